//! Durability of acks=all writes: every record the broker acknowledged is still
//! there, at the acknowledged offset, after a SIGKILL and a restart.

use std::time::Duration;

use integration_tests::Broker;
use rdkafka::consumer::Consumer;
use rdkafka::producer::{Producer, PurgeConfig};

use crate::common::{
    assert_records, consume, consumer, create_topic, produce_ok, producer, send_all,
    wait_for_reports, Record, CLIENT_TIMEOUT,
};

/// Record `i` of a durability run: key and value name the index so a read-back
/// record identifies what it was.
fn numbered(partition: i32, i: usize) -> Record {
    let mut record = Record::new(
        partition,
        format!("key-{i:05}"),
        format!("value-{i:05}-{}", "d".repeat(i % 64)),
    );
    record.headers = vec![("index".to_owned(), Some(i.to_string().into_bytes()))];
    record
}

/// Index of a read-back record, from its key `key-NNNNN`.
fn index_of(key: Option<&[u8]>) -> usize {
    let key = std::str::from_utf8(key.expect("record has a key")).expect("utf-8 key");
    key.strip_prefix("key-")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected key {key:?}"))
}

#[test]
fn acknowledged_records_survive_sigkill_mid_stream() {
    // Proves: with acks=all (no idempotence), SIGKILL while 5000 records are
    // streaming loses none of the acknowledged ones: after restart the log is
    // contiguous from offset 0, holds records in send order without duplicates,
    // and every acknowledged record sits at exactly its acknowledged offset.
    let mut broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "journal", 1, &[]);

    let records: Vec<Record> = (0..5000).map(|i| numbered(0, i)).collect();
    let producer = producer(
        &bootstrap,
        &[
            ("batch.num.messages", "50"),
            ("linger.ms", "1"),
            ("max.in.flight.requests.per.connection", "1"),
            ("message.timeout.ms", "10000"),
        ],
    );
    send_all(&producer, "journal", &records);
    wait_for_reports(&producer, 1500, CLIENT_TIMEOUT * 2);
    broker.kill();
    // Reports of requests answered just before the kill may still be queued.
    producer.poll(Duration::from_millis(500));
    producer.purge(PurgeConfig::default().queue().inflight());
    wait_for_reports(&producer, records.len(), CLIENT_TIMEOUT);

    let mut acked: Vec<(usize, i64)> = producer
        .context()
        .deliveries()
        .into_iter()
        .filter_map(|d| d.result.ok().map(|(_, offset)| (d.index, offset)))
        .collect();
    acked.sort_unstable();
    eprintln!(
        "durability: {} of {} records acknowledged before SIGKILL",
        acked.len(),
        records.len()
    );
    assert!(
        acked.len() >= 1500,
        "at least the awaited reports are acknowledged"
    );
    for (n, (index, offset)) in acked.iter().enumerate() {
        assert_eq!(*index, n, "acknowledged records are a prefix of the stream");
        assert_eq!(
            *offset,
            i64::try_from(n).expect("small"),
            "acknowledged offset of record {n}"
        );
    }
    drop(producer);

    broker.restart();
    let (low, high) = consumer(&bootstrap, &[])
        .fetch_watermarks("journal", 0, CLIENT_TIMEOUT)
        .expect("watermarks after restart");
    assert_eq!(low, 0, "log start offset after restart");
    let high_count = usize::try_from(high).expect("non-negative high watermark");
    assert!(
        high_count >= acked.len(),
        "high watermark {high} after restart, but {} records were acknowledged",
        acked.len()
    );
    let consumed = consume(&bootstrap, "journal", 0, 0, high_count, &[]);
    // Records written but not acknowledged before the kill may be there too;
    // whatever is there must be the stream's prefix, in order, at offsets 0..high.
    let indices: Vec<usize> = consumed
        .iter()
        .map(|c| index_of(c.key.as_deref()))
        .collect();
    assert_eq!(
        indices,
        (0..high_count).collect::<Vec<_>>(),
        "log holds the stream's prefix in order"
    );
    assert_records(&consumed, &records[..high_count], 0);
}

#[test]
fn acknowledged_records_survive_sigkill_right_after() {
    // Proves: 5000 records on 2 partitions acknowledged with acks=all are all
    // readable, at their acknowledged offsets (0..2500 per partition), after a
    // SIGKILL immediately following the last acknowledgement and a restart.
    let mut broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "journal2", 2, &[]);
    let records: Vec<Record> = (0..5000)
        .map(|i| numbered(i32::try_from(i % 2).expect("0 or 1"), i))
        .collect();
    let acked = produce_ok(
        &bootstrap,
        "journal2",
        &records,
        &[("batch.num.messages", "100")],
    );
    broker.kill();
    for (i, at) in acked.iter().enumerate() {
        assert_eq!(
            *at,
            (records[i].partition, i64::try_from(i / 2).expect("small")),
            "acknowledged position of record {i}"
        );
    }

    broker.restart();
    for partition in 0..2 {
        let expected: Vec<Record> = records
            .iter()
            .filter(|r| r.partition == partition)
            .cloned()
            .collect();
        let consumed = consume(&bootstrap, "journal2", partition, 0, expected.len(), &[]);
        assert_records(&consumed, &expected, 0);
    }
}

/// One trial of [`idempotent_records_land_exactly_once_across_restarts`]: streams `count`
/// records with an idempotent producer to a fresh topic, stops the broker (SIGKILL, or
/// SIGTERM when `clean`) once `stop_after` were acknowledged, restarts it, lets the
/// producer retry, and returns the indices read back from the topic in log order.
fn idempotent_trial(
    broker: &mut Broker,
    topic: &str,
    count: usize,
    stop_after: usize,
    clean: bool,
) -> Vec<usize> {
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, topic, 1, &[]);
    let records: Vec<Record> = (0..count).map(|i| numbered(0, i)).collect();
    let producer = producer(
        &bootstrap,
        &[
            ("enable.idempotence", "true"),
            ("batch.num.messages", "40"),
            ("linger.ms", "2"),
            ("max.in.flight.requests.per.connection", "5"),
            ("message.timeout.ms", "60000"),
            ("retry.backoff.ms", "50"),
        ],
    );
    send_all(&producer, topic, &records);
    wait_for_reports(&producer, stop_after, CLIENT_TIMEOUT * 2);
    if clean {
        let status = broker.terminate();
        assert!(status.success(), "clean shutdown exit status {status}");
    }
    broker.restart();
    wait_for_reports(&producer, count, CLIENT_TIMEOUT * 4);
    let failed: Vec<_> = producer
        .context()
        .deliveries()
        .into_iter()
        .filter(|d| d.result.is_err())
        .map(|d| (d.index, d.result))
        .collect();
    assert!(
        failed.is_empty(),
        "{topic}: deliveries failed: {:?}",
        &failed[..failed.len().min(5)]
    );
    drop(producer);
    let (_, high) = consumer(&bootstrap, &[])
        .fetch_watermarks(topic, 0, CLIENT_TIMEOUT)
        .expect("watermarks after restart");
    let high = usize::try_from(high).expect("non-negative high watermark");
    consume(&bootstrap, topic, 0, 0, high, &[])
        .iter()
        .map(|c| index_of(c.key.as_deref()))
        .collect()
}

#[test]
fn idempotent_records_land_exactly_once_across_restarts() {
    // Proves: an idempotent producer streaming acks=all records through a SIGKILL (twice)
    // and a clean SIGTERM restart ends with every record exactly once, in send order.
    // Batches written but not yet acknowledged when the broker stopped are retried by the
    // client; the broker recognises them from producer state rebuilt from the log (and its
    // snapshot) and answers with their original offsets instead of appending them again.
    // Before producer state lived in storage, most such trials left duplicates.
    let mut broker = Broker::start();
    for (trial, clean) in [(0, false), (1, false), (2, true)] {
        let topic = format!("idempotent-{trial}");
        let indices = idempotent_trial(&mut broker, &topic, 3000, 700 + 300 * trial, clean);
        assert_eq!(
            indices.len(),
            3000,
            "{topic}: record count (duplicates or losses)"
        );
        assert_eq!(
            indices,
            (0..3000).collect::<Vec<_>>(),
            "{topic}: records in send order, once each"
        );
    }
}
