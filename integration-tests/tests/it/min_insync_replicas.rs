//! `min.insync.replicas` above a partition's replica count, as Kafka's `effectiveMinIsr`
//! treats it: capped at the replica count. Compose files copied from production often set
//! the broker default to 2 on a single node; Kafka then still commits every write, acks=all
//! included, and so must Logbook (before the cap, such records were appended and never
//! became visible: the high watermark stayed at 0).

use integration_tests::Broker;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};

use crate::common::{
    assert_records, consume, consumer, create_topic, produce_all, produce_ok, producer, Record,
    CLIENT_TIMEOUT,
};

fn records(prefix: &str, n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| Record::new(0, format!("{prefix}-k{i}"), format!("{prefix}-v{i}")))
        .collect()
}

#[test]
fn one_replica_with_min_insync_replicas_two_commits_every_write() {
    // Proves: on a single node with the broker default min.insync.replicas=2 and a topic
    // that also sets it to 2, acks=1 and acks=all produces are acknowledged at offsets 0..5
    // and 5..10, ListOffsets LATEST is 10, and a consumer reads all 10 back exactly; the
    // coordinator writes under the same default work too: a group's synchronous commit is
    // read back by OffsetFetch, and a committed transaction is visible to read_committed.
    let broker = Broker::start_with(&["--override", "min.insync.replicas=2"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "mir", 1, &[("min.insync.replicas", "2")]);

    let first = records("acks1", 5);
    let acked = produce_ok(&bootstrap, "mir", &first, &[("acks", "1")]);
    assert_eq!(acked, (0..5).map(|o| (0, o)).collect::<Vec<_>>());
    let second = records("acksall", 5);
    let acked = produce_ok(&bootstrap, "mir", &second, &[("acks", "all")]);
    assert_eq!(acked, (5..10).map(|o| (0, o)).collect::<Vec<_>>());

    let (low, high) = consumer(&bootstrap, &[])
        .fetch_watermarks("mir", 0, CLIENT_TIMEOUT)
        .expect("watermarks");
    assert_eq!((low, high), (0, 10));
    let all: Vec<Record> = first.into_iter().chain(second).collect();
    assert_records(&consume(&bootstrap, "mir", 0, 0, 10, &[]), &all, 0);

    // A group commit: __consumer_offsets is created with one replica under the default 2.
    let group = consumer(&bootstrap, &[("group.id", "mir-g")]);
    let mut commit = TopicPartitionList::new();
    commit
        .add_partition_offset("mir", 0, Offset::Offset(7))
        .expect("commit list");
    group.commit(&commit, CommitMode::Sync).expect("commit");
    let reader = consumer(&bootstrap, &[("group.id", "mir-g")]);
    let mut ask = TopicPartitionList::new();
    ask.add_partition("mir", 0);
    let committed = reader
        .committed_offsets(ask, CLIENT_TIMEOUT)
        .expect("committed");
    assert_eq!(
        committed.find_partition("mir", 0).map(|e| e.offset()),
        Some(Offset::Offset(7))
    );

    // A transaction: __transaction_state likewise, then the markers on "mir".
    let txn = producer(
        &bootstrap,
        &[
            ("transactional.id", "mir-txn"),
            ("enable.idempotence", "true"),
        ],
    );
    txn.init_transactions(CLIENT_TIMEOUT)
        .expect("init_transactions");
    txn.begin_transaction().expect("begin");
    let third = records("txn", 3);
    let delivered = produce_all(&txn, "mir", &third);
    let offsets: Vec<i64> = delivered
        .iter()
        .map(|d| d.result.expect("delivered").1)
        .collect();
    assert_eq!(offsets, vec![10, 11, 12]);
    txn.commit_transaction(CLIENT_TIMEOUT).expect("commit");
    let committed = consume(
        &bootstrap,
        "mir",
        0,
        10,
        3,
        &[("isolation.level", "read_committed")],
    );
    assert_records(&committed, &third, 10);
    let (_, last_stable) = consumer(&bootstrap, &[("isolation.level", "read_committed")])
        .fetch_watermarks("mir", 0, CLIENT_TIMEOUT)
        .expect("watermarks");
    assert_eq!(last_stable, 14, "the three records and their commit marker");
}
