//! The broker stopped in the middle of writing a transaction's markers — its PrepareCommit
//! (or PrepareAbort) durable in `__transaction_state`, some markers appended, the others
//! not — completes the transaction after a restart, on every partition, exactly once.
//!
//! No signal sent from outside lands between two markers reliably (they are appended
//! microseconds apart), so the broker stops itself there: the test-only flag
//! `--failpoint-abort-after-txn-markers N` aborts the process right after its N-th marker
//! was appended, before any fsync, as a SIGKILL would leave it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use integration_tests::Broker;
use rdkafka::consumer::Consumer;
use rdkafka::producer::Producer;
use rdkafka::{Message, Offset, TopicPartitionList};

use super::txn_requests::describe;
use super::{
    committed, high_watermark, last_stable_offset, records, send_in_txn, transactional,
    SMALL_INTERNAL_TOPICS,
};
use crate::common::{consumer, create_topic, CLIENT_TIMEOUT};

/// Partitions of each of the transaction's two topics.
const PARTITIONS: i32 = 4;
/// Records the transaction writes to each partition.
const RECORDS: usize = 3;
/// Markers one transaction writes: one per partition of both topics, and one to the
/// group's `__consumer_offsets` partition (the transaction also commits an offset).
const MARKERS: u64 = 2 * 4 + 1;

/// Waits until the broker process has exited on its own (the failpoint fired).
fn wait_exited(broker: &mut Broker, within: Duration) {
    let deadline = Instant::now() + within;
    while broker.is_running() {
        assert!(
            Instant::now() < deadline,
            "the failpoint did not stop the broker within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `(offset, key)` of every record a read_committed consumer reads from the partitions of
/// `topics`, once it has read `expected` records in total and 1 s more brought nothing; and
/// asserts the consumer's position reached each partition's high watermark (it read past
/// every aborted record and marker).
fn read_committed_all(
    bootstrap: &str,
    topics: &[String],
    expected: usize,
) -> BTreeMap<(String, i32), Vec<(i64, String)>> {
    let c = consumer(bootstrap, &[("isolation.level", "read_committed")]);
    let mut tpl = TopicPartitionList::new();
    for topic in topics {
        for partition in 0..PARTITIONS {
            tpl.add_partition_offset(topic, partition, Offset::Offset(0))
                .expect("assignment");
        }
    }
    c.assign(&tpl).expect("assign");
    let mut out: BTreeMap<(String, i32), Vec<(i64, String)>> = BTreeMap::new();
    let mut read = 0;
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    let mut quiet_since = Instant::now();
    while read < expected || quiet_since.elapsed() < Duration::from_secs(1) {
        assert!(
            Instant::now() < deadline,
            "read {read} of {expected} committed records"
        );
        match c.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(e)) => panic!("read_committed consumer: {e}"),
            Some(Ok(m)) => {
                read += 1;
                quiet_since = Instant::now();
                out.entry((m.topic().to_owned(), m.partition()))
                    .or_default()
                    .push((
                        m.offset(),
                        String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned(),
                    ));
            }
        }
    }
    out
}

/// One trial: a transaction over 2 topics × `PARTITIONS` partitions plus a group offset,
/// committed (or aborted) while the broker is armed to abort after `abort_after` markers;
/// then a restart without the failpoint and the checks.
fn trial(broker: &mut Broker, trial: u32, abort_after: u64, commit: bool) {
    let armed = abort_after.to_string();
    broker.set_extra_args(
        &[
            SMALL_INTERNAL_TOPICS,
            &["--failpoint-abort-after-txn-markers", &armed],
        ]
        .concat(),
    );
    broker.restart();
    let bootstrap = broker.bootstrap();
    let topics = [
        format!("txn-markers-{trial}-a"),
        format!("txn-markers-{trial}-b"),
    ];
    for topic in &topics {
        create_topic(&bootstrap, topic, PARTITIONS, &[]);
    }
    let id = format!("txn-markers-{trial}-id");
    let group = format!("txn-markers-{trial}-group");
    let p = transactional(&bootstrap, &id, "60000");
    let metadata = consumer(&bootstrap, &[("group.id", &group)])
        .group_metadata()
        .expect("group metadata");
    p.begin_transaction().expect("begin");
    for topic in &topics {
        for partition in 0..PARTITIONS {
            let prefix = format!("{topic}-p{partition}");
            send_in_txn(&p, topic, &records(partition, &prefix, RECORDS));
        }
    }
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset(&topics[0], 0, Offset::Offset(2))
        .expect("offset");
    p.send_offsets_to_transaction(&offsets, &metadata, CLIENT_TIMEOUT)
        .expect("send offsets");

    // EndTxn from another thread: the broker aborts itself while writing the markers and
    // is restarted without the failpoint while the client retries.
    let ended = std::thread::scope(|s| {
        let ending = s.spawn(|| {
            if commit {
                p.commit_transaction(Duration::from_secs(60))
            } else {
                p.abort_transaction(Duration::from_secs(60))
            }
        });
        wait_exited(broker, Duration::from_secs(20));
        broker.set_extra_args(SMALL_INTERNAL_TOPICS);
        broker.restart();
        ending.join().expect("EndTxn thread")
    });
    let what = if commit { "commit" } else { "abort" };
    eprintln!("trial {trial} ({what}, stopped after marker {abort_after}): client {ended:?}");

    // The coordinator completes the transaction from its Prepare record.
    let deadline = Instant::now() + Duration::from_secs(20);
    let complete = if commit {
        "CompleteCommit"
    } else {
        "CompleteAbort"
    };
    loop {
        let state = describe(broker.addr(), &id);
        if state.error_code == 0 && state.transaction_state.as_str() == complete {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "trial {trial}: {id} still {:?} (error {})",
            state.transaction_state,
            state.error_code
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let expected: BTreeMap<(String, i32), Vec<(i64, String)>> = if commit {
        topics
            .iter()
            .flat_map(|topic| (0..PARTITIONS).map(move |p| (topic, p)))
            .map(|(topic, partition)| {
                let keys = (0..RECORDS)
                    .map(|i| {
                        (
                            i64::try_from(i).expect("small"),
                            format!("{topic}-p{partition}-{i}"),
                        )
                    })
                    .collect();
                ((topic.clone(), partition), keys)
            })
            .collect()
    } else {
        BTreeMap::new()
    };
    let total = expected.values().map(Vec::len).sum();
    assert_eq!(
        read_committed_all(&bootstrap, &topics, total),
        expected,
        "trial {trial}: read_committed after the restart"
    );
    let records = i64::try_from(RECORDS).expect("small");
    for topic in &topics {
        for partition in 0..PARTITIONS {
            let hw = high_watermark(&bootstrap, topic, partition);
            // The records, a marker, and perhaps a second marker where the first was
            // written before the stop (recovery writes every marker again, as Kafka's
            // coordinator does after a failover).
            assert!(
                records < hw && hw <= records + 2,
                "trial {trial}: {topic}/{partition} high watermark {hw}"
            );
            assert_eq!(
                last_stable_offset(&bootstrap, topic, partition),
                hw,
                "trial {trial}: {topic}/{partition}: no transaction left open"
            );
        }
    }
    assert_eq!(
        committed(&bootstrap, &group, &topics[0], 0),
        commit.then_some(2),
        "trial {trial}: the group's offset follows the transaction"
    );
    if commit {
        if let Err(e) = ended {
            panic!("trial {trial}: the transaction committed, but the client was told {e}");
        }
    }
}

#[test]
fn broker_stopped_between_markers_completes_the_transaction() {
    // Proves: a transaction whose EndTxn stopped the broker after its first marker, after
    // half of them, and after the last (before CompleteCommit) is committed after the
    // restart on every partition: a read_committed consumer reads each of its records
    // exactly once at offsets 0..3, the last stable offset equals the high watermark
    // everywhere, the group offset sent to the transaction is applied, and
    // DescribeTransactions says CompleteCommit; and one stopped mid-abort is aborted
    // everywhere (nothing for read_committed, no offset). The client's EndTxn, retried
    // across the restart, must then report success.
    let mut broker = Broker::start_with(SMALL_INTERNAL_TOPICS);
    trial(&mut broker, 0, 1, true);
    trial(&mut broker, 1, MARKERS / 2, true);
    trial(&mut broker, 2, MARKERS, true);
    trial(&mut broker, 3, MARKERS / 2, false);
}
