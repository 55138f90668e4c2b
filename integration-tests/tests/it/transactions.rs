//! Transactions with librdkafka's transactional producer (transaction protocol v1:
//! FindCoordinator TRANSACTION, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
//! TxnOffsetCommit, EndTxn): what read_committed and read_uncommitted consumers see after a
//! commit and an abort, fencing by a second producer with the same transactional.id,
//! offsets committed in a transaction, the coordinator's timeout abort, and recovery after
//! a SIGKILL. Submodules: a SIGKILL between markers, ListTransactions filters and
//! transactional id expiry.
//!
//! Each test starts its own broker. With Kafka's 50 partitions for each of
//! `__transaction_state` and `__consumer_offsets` the two internal topics take most of a
//! test's time to create, so the tests use `SMALL_INTERNAL_TOPICS`, except
//! `committed_transaction_is_read_once_with_its_marker`, which keeps Kafka's layout covered.

mod late_offset_commit;
mod list_transactions;
mod marker_recovery;
mod produce_checks;
mod transactional_id_expiry;
mod txn_requests;

use std::time::{Duration, Instant};

use integration_tests::Broker;
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::Producer;
use rdkafka::{Message, Offset, TopicPartitionList};

use crate::common::{
    consume, consumer, create_topic, produce_all, producer, Record, TestProducer, CLIENT_TIMEOUT,
};

/// Broker flags for 3 partitions each of `__transaction_state` and `__consumer_offsets`
/// (Kafka: 50 each): enough for ids and groups to land on different partitions.
const SMALL_INTERNAL_TOPICS: &[&str] = &[
    "--override",
    "transaction.state.log.num.partitions=3",
    "--override",
    "offsets.topic.num.partitions=3",
];

/// A transactional producer for `transactional_id`, initialised.
fn transactional(bootstrap: &str, transactional_id: &str, timeout_ms: &str) -> TestProducer {
    let p = producer(
        bootstrap,
        &[
            ("transactional.id", transactional_id),
            ("enable.idempotence", "true"),
            ("transaction.timeout.ms", timeout_ms),
            // librdkafka requires both to fit in the transaction timeout.
            ("message.timeout.ms", timeout_ms),
            ("socket.timeout.ms", timeout_ms),
        ],
    );
    p.init_transactions(CLIENT_TIMEOUT)
        .expect("init_transactions");
    p
}

/// Records `prefix-0 .. prefix-{n-1}` on `partition`.
fn records(partition: i32, prefix: &str, n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| {
            Record::new(
                partition,
                format!("{prefix}-{i}"),
                format!("{prefix}-value-{i}"),
            )
        })
        .collect()
}

/// Produces inside the open transaction and asserts every record was acknowledged.
fn send_in_txn(p: &TestProducer, topic: &str, records: &[Record]) -> Vec<(i32, i64)> {
    produce_all(p, topic, records)
        .into_iter()
        .map(|d| {
            d.result
                .unwrap_or_else(|e| panic!("record {}: {e:?}", d.index))
        })
        .collect()
}

/// The high watermark of `topic`/`partition` (read_uncommitted ListOffsets).
fn high_watermark(bootstrap: &str, topic: &str, partition: i32) -> i64 {
    consumer(bootstrap, &[("isolation.level", "read_uncommitted")])
        .fetch_watermarks(topic, partition, CLIENT_TIMEOUT)
        .expect("watermarks")
        .1
}

/// The last stable offset of `topic`/`partition` (read_committed ListOffsets).
fn last_stable_offset(bootstrap: &str, topic: &str, partition: i32) -> i64 {
    consumer(bootstrap, &[("isolation.level", "read_committed")])
        .fetch_watermarks(topic, partition, CLIENT_TIMEOUT)
        .expect("watermarks")
        .1
}

/// Waits until the high watermark of `topic`/`partition` is `expected`.
fn wait_high_watermark(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    expected: i64,
    within: Duration,
) {
    let deadline = Instant::now() + within;
    loop {
        let hw = high_watermark(bootstrap, topic, partition);
        if hw == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{topic}/{partition}: high watermark {hw}, expected {expected}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The keys a consumer with `isolation` reads from `partition` until it has read `count`
/// records and then sees nothing more for a while (so extra records would be noticed).
fn keys_read(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    count: usize,
    isolation: &str,
) -> Vec<(i64, String)> {
    let extra = [("isolation.level", isolation)];
    let mut out: Vec<(i64, String)> = consume(bootstrap, topic, partition, 0, count, &extra)
        .into_iter()
        .map(|c| {
            (
                c.offset,
                String::from_utf8(c.key.expect("key")).expect("utf-8 key"),
            )
        })
        .collect();
    // Nothing more arrives.
    let c = consumer(bootstrap, &extra);
    let mut tpl = TopicPartitionList::new();
    let next = out.last().map_or(0, |(o, _)| o + 1);
    tpl.add_partition_offset(topic, partition, Offset::Offset(next))
        .expect("assignment");
    c.assign(&tpl).expect("assign");
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            out.push((
                m.offset(),
                String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned(),
            ));
        }
    }
    out
}

fn keys(prefix: &str, offsets: std::ops::Range<i64>, first: usize) -> Vec<(i64, String)> {
    offsets
        .enumerate()
        .map(|(i, o)| (o, format!("{prefix}-{}", first + i)))
        .collect()
}

#[test]
fn committed_transaction_is_read_once_with_its_marker() {
    // Proves: a committed transaction across two partitions is read by a read_committed
    // consumer exactly (offsets 0..4 on each), and each partition holds one commit marker
    // after the data (high watermark 5 for 4 records).
    // Kafka's default layout: 50 partitions of each internal topic.
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "txn-commit", 2, &[]);
    let p = transactional(&bootstrap, "txn-commit-id", "60000");
    p.begin_transaction().expect("begin");
    let mut all = records(0, "p0", 4);
    all.extend(records(1, "p1", 4));
    let acked = send_in_txn(&p, "txn-commit", &all);
    assert_eq!(&acked[..4], &[(0, 0), (0, 1), (0, 2), (0, 3)]);
    p.commit_transaction(CLIENT_TIMEOUT).expect("commit");
    for (partition, prefix) in [(0, "p0"), (1, "p1")] {
        assert_eq!(high_watermark(&bootstrap, "txn-commit", partition), 5);
        assert_eq!(
            keys_read(&bootstrap, "txn-commit", partition, 4, "read_committed"),
            keys(prefix, 0..4, 0)
        );
    }
}

#[test]
fn aborted_transaction_is_hidden_from_read_committed() {
    // Proves: records of an aborted transaction are skipped by read_committed (which
    // reads the next committed transaction after the abort marker) and returned by
    // read_uncommitted.
    let broker = Broker::start_with(SMALL_INTERNAL_TOPICS);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "txn-abort", 1, &[]);
    let p = transactional(&bootstrap, "txn-abort-id", "60000");
    p.begin_transaction().expect("begin");
    send_in_txn(&p, "txn-abort", &records(0, "aborted", 3));
    p.abort_transaction(CLIENT_TIMEOUT).expect("abort");
    p.begin_transaction().expect("begin again");
    send_in_txn(&p, "txn-abort", &records(0, "kept", 2));
    p.commit_transaction(CLIENT_TIMEOUT).expect("commit");
    // 3 aborted records, abort marker at 3, 2 committed records at 4 and 5, marker at 6.
    assert_eq!(high_watermark(&bootstrap, "txn-abort", 0), 7);
    assert_eq!(
        keys_read(&bootstrap, "txn-abort", 0, 2, "read_committed"),
        keys("kept", 4..6, 0)
    );
    let mut uncommitted = keys("aborted", 0..3, 0);
    uncommitted.extend(keys("kept", 4..6, 0));
    assert_eq!(
        keys_read(&bootstrap, "txn-abort", 0, 5, "read_uncommitted"),
        uncommitted
    );
}

/// The code of a transactional call's error.
fn txn_code(e: &KafkaError) -> Option<RDKafkaErrorCode> {
    match e {
        KafkaError::Transaction(e) => Some(e.code()),
        other => other.rdkafka_error_code(),
    }
}

#[test]
fn second_producer_fences_the_first_and_aborts_its_transaction() {
    // Proves: InitProducerId from a second producer with the same transactional.id
    // aborts the first producer's open transaction (an abort marker, its records hidden
    // from read_committed) and fences it: its commit fails with a fatal fencing error.
    let broker = Broker::start_with(SMALL_INTERNAL_TOPICS);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "txn-fence", 1, &[]);
    let first = transactional(&bootstrap, "txn-fence-id", "60000");
    first.begin_transaction().expect("begin");
    send_in_txn(&first, "txn-fence", &records(0, "zombie", 2));
    let second = transactional(&bootstrap, "txn-fence-id", "60000");
    // The zombie's transaction was aborted: its 2 records and an abort marker.
    assert_eq!(high_watermark(&bootstrap, "txn-fence", 0), 3);
    let err = first
        .commit_transaction(CLIENT_TIMEOUT)
        .expect_err("the fenced producer cannot commit");
    assert_eq!(txn_code(&err), Some(RDKafkaErrorCode::Fenced), "{err}");
    second.begin_transaction().expect("begin");
    send_in_txn(&second, "txn-fence", &records(0, "live", 2));
    second.commit_transaction(CLIENT_TIMEOUT).expect("commit");
    assert_eq!(
        keys_read(&bootstrap, "txn-fence", 0, 2, "read_committed"),
        keys("live", 3..5, 0)
    );
}

/// The group's committed offset of `topic`/`partition`, as a read_uncommitted consumer
/// of `group` sees it (OffsetFetch without require_stable; `None`: no commit).
fn committed(bootstrap: &str, group: &str, topic: &str, partition: i32) -> Option<i64> {
    fetch_committed(
        bootstrap,
        group,
        topic,
        partition,
        "read_uncommitted",
        CLIENT_TIMEOUT,
    )
    .expect("committed")
}

/// OffsetFetch by a consumer with `isolation` (librdkafka sets require_stable for
/// read_committed, and retries UNSTABLE_OFFSET_COMMIT until `timeout`).
fn fetch_committed(
    bootstrap: &str,
    group: &str,
    topic: &str,
    partition: i32,
    isolation: &str,
    timeout: Duration,
) -> Result<Option<i64>, KafkaError> {
    let c = consumer(
        bootstrap,
        &[("group.id", group), ("isolation.level", isolation)],
    );
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, partition);
    let got = c.committed_offsets(tpl, timeout)?;
    Ok(
        match got
            .find_partition(topic, partition)
            .expect("partition")
            .offset()
        {
            Offset::Offset(o) => Some(o),
            _ => None,
        },
    )
}

#[test]
fn offsets_sent_to_a_transaction_are_committed_only_with_it() {
    // Proves: send_offsets_to_transaction (AddOffsetsToTxn + TxnOffsetCommit) makes the
    // group's offset visible to OffsetFetch only once the transaction commits; an aborted
    // transaction's offsets are never applied.
    let broker = Broker::start_with(SMALL_INTERNAL_TOPICS);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "txn-input", 1, &[]);
    create_topic(&bootstrap, "txn-output", 1, &[]);
    let group_consumer = consumer(&bootstrap, &[("group.id", "txn-group")]);
    let metadata = group_consumer.group_metadata().expect("group metadata");
    let p = transactional(&bootstrap, "txn-offsets-id", "60000");
    let offsets = |o: i64| {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("txn-input", 0, Offset::Offset(o))
            .expect("offset");
        tpl
    };
    // Aborted: offset 7 is never applied.
    p.begin_transaction().expect("begin");
    send_in_txn(&p, "txn-output", &records(0, "out", 1));
    p.send_offsets_to_transaction(&offsets(7), &metadata, CLIENT_TIMEOUT)
        .expect("send offsets");
    assert_eq!(committed(&bootstrap, "txn-group", "txn-input", 0), None);
    p.abort_transaction(CLIENT_TIMEOUT).expect("abort");
    assert_eq!(committed(&bootstrap, "txn-group", "txn-input", 0), None);
    // Committed: offset 11 appears with the commit.
    p.begin_transaction().expect("begin");
    send_in_txn(&p, "txn-output", &records(0, "out", 1));
    p.send_offsets_to_transaction(&offsets(11), &metadata, CLIENT_TIMEOUT)
        .expect("send offsets");
    assert_eq!(committed(&bootstrap, "txn-group", "txn-input", 0), None);
    // require_stable: the pending commit answers UNSTABLE_OFFSET_COMMIT, which librdkafka
    // retries until its timeout.
    let unstable = fetch_committed(
        &bootstrap,
        "txn-group",
        "txn-input",
        0,
        "read_committed",
        Duration::from_secs(2),
    );
    assert!(
        unstable.is_err(),
        "a pending offset is unstable: {unstable:?}"
    );
    p.commit_transaction(CLIENT_TIMEOUT).expect("commit");
    assert_eq!(committed(&bootstrap, "txn-group", "txn-input", 0), Some(11));
    assert_eq!(
        fetch_committed(
            &bootstrap,
            "txn-group",
            "txn-input",
            0,
            "read_committed",
            CLIENT_TIMEOUT
        )
        .expect("stable after commit"),
        Some(11)
    );
    // The same producer's next transaction commits offsets again (a second offset-commit
    // batch of one producer id and epoch is a new write, not a retry of the first).
    p.begin_transaction().expect("begin");
    send_in_txn(&p, "txn-output", &records(0, "out", 1));
    p.send_offsets_to_transaction(&offsets(13), &metadata, CLIENT_TIMEOUT)
        .expect("send offsets again");
    p.commit_transaction(CLIENT_TIMEOUT).expect("commit again");
    assert_eq!(committed(&bootstrap, "txn-group", "txn-input", 0), Some(13));
}

#[test]
fn transaction_open_past_its_timeout_is_aborted_and_fenced() {
    // Proves: the coordinator aborts a transaction open longer than transaction.timeout.ms
    // (an abort marker appears without any client action, and the last stable offset it
    // held back moves past it) and bumps the epoch, so the producer that left it open
    // cannot commit it.
    let broker = Broker::start_with(
        &[
            SMALL_INTERNAL_TOPICS,
            &[
                "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
                "200",
            ],
        ]
        .concat(),
    );
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "txn-timeout", 1, &[]);
    let p = transactional(&bootstrap, "txn-timeout-id", "2000");
    p.begin_transaction().expect("begin");
    send_in_txn(&p, "txn-timeout", &records(0, "stale", 3));
    assert_eq!(high_watermark(&bootstrap, "txn-timeout", 0), 3);
    // The open transaction holds the last stable offset at its first record.
    assert_eq!(last_stable_offset(&bootstrap, "txn-timeout", 0), 0);
    wait_high_watermark(&bootstrap, "txn-timeout", 0, 4, Duration::from_secs(10));
    // The abort marker releases it.
    assert_eq!(last_stable_offset(&bootstrap, "txn-timeout", 0), 4);
    let err = p
        .commit_transaction(CLIENT_TIMEOUT)
        .expect_err("the timed-out transaction cannot commit");
    assert!(
        matches!(
            txn_code(&err),
            Some(RDKafkaErrorCode::Fenced | RDKafkaErrorCode::InvalidProducerEpoch)
        ),
        "{err}"
    );
    assert_eq!(
        keys_read(&bootstrap, "txn-timeout", 0, 0, "read_committed"),
        vec![]
    );
}

#[test]
fn sigkill_mid_transaction_leaves_no_hanging_transaction() {
    // Proves: after a SIGKILL with a transaction open, the restarted coordinator reloads
    // __transaction_state and aborts the transaction at its timeout (marker written), and
    // a new producer with the same transactional.id commits on top of it.
    let mut broker = Broker::start_with(
        &[
            SMALL_INTERNAL_TOPICS,
            &[
                "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
                "200",
            ],
        ]
        .concat(),
    );
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "txn-crash", 1, &[]);
    {
        let p = transactional(&bootstrap, "txn-crash-id", "3000");
        p.begin_transaction().expect("begin");
        send_in_txn(&p, "txn-crash", &records(0, "lost", 2));
        broker.kill();
        drop(p);
        broker.restart();
    }
    wait_high_watermark(&bootstrap, "txn-crash", 0, 3, Duration::from_secs(15));
    let p = transactional(&bootstrap, "txn-crash-id", "60000");
    p.begin_transaction().expect("begin");
    send_in_txn(&p, "txn-crash", &records(0, "kept", 2));
    p.commit_transaction(CLIENT_TIMEOUT).expect("commit");
    assert_eq!(
        keys_read(&bootstrap, "txn-crash", 0, 2, "read_committed"),
        keys("kept", 3..5, 0)
    );
}
