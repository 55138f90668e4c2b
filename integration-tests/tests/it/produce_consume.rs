//! Round trips through rdkafka: what a producer writes is exactly what a
//! consumer reads, at contiguous offsets per partition.

use integration_tests::Broker;

use crate::common::{assert_records, consume, create_topic, produce_ok, Record};

/// The records of the round-trip test: partition `i % 3`, a key, a value, one
/// header with a value and one with a null value, timestamp 1_700_000_000_000 + i.
fn keyed_records(count: usize) -> Vec<Record> {
    (0..count)
        .map(|i| Record {
            partition: i32::try_from(i % 3).expect("small"),
            key: Some(format!("key-{i:04}").into_bytes()),
            value: Some(format!("value-{i:04}-{}", "x".repeat(i % 50)).into_bytes()),
            headers: vec![
                ("trace".to_owned(), Some(format!("t{i}").into_bytes())),
                ("empty".to_owned(), None),
            ],
            timestamp: Some(1_700_000_000_000 + i64::try_from(i).expect("small")),
        })
        .collect()
}

#[test]
fn round_trip_three_partitions_with_keys_headers_and_timestamps() {
    // Proves: 300 records produced to a 3-partition topic (created by the
    // AdminClient) are acknowledged at offsets 0..100 per partition, and read
    // back by assign from offset 0 with identical key, value, headers (including
    // a null header value), CreateTime timestamp and offset, in order.
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "orders", 3, &[]);

    let records = keyed_records(300);
    let acked = produce_ok(&bootstrap, "orders", &records, &[]);
    for (i, (partition, offset)) in acked.iter().enumerate() {
        assert_eq!(*partition, records[i].partition, "partition of record {i}");
        assert_eq!(
            *offset,
            i64::try_from(i / 3).expect("small"),
            "acknowledged offset of record {i}"
        );
    }

    for partition in 0..3 {
        let expected: Vec<Record> = records
            .iter()
            .filter(|r| r.partition == partition)
            .cloned()
            .collect();
        let consumed = consume(&bootstrap, "orders", partition, 0, expected.len(), &[]);
        assert_records(&consumed, &expected, 0);
    }
}

#[test]
fn fetch_from_the_middle_of_a_batch() {
    // Proves: a fetch at an offset inside a batch returns records from exactly
    // that offset on (the broker returns the whole batch and the client skips
    // the earlier records), and null keys / empty values survive.
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "mid-batch", 1, &[]);

    // One linger window: librdkafka sends all 10 in one batch.
    let mut records: Vec<Record> = (0..10)
        .map(|i| Record::new(0, format!("k{i}"), format!("v{i}")))
        .collect();
    records[3].key = None;
    records[4].value = Some(Vec::new());
    records[5].value = None;
    let acked = produce_ok(&bootstrap, "mid-batch", &records, &[("linger.ms", "200")]);
    assert_eq!(acked, (0..10).map(|o| (0, o)).collect::<Vec<_>>());

    let consumed = consume(&bootstrap, "mid-batch", 0, 3, 7, &[]);
    assert_records(&consumed, &records[3..], 3);
}

#[test]
fn auto_created_topic_on_produce() {
    // Proves: with auto.create.topics.enable (the default) a produce to an
    // unknown topic creates it with the default partition count (1) and the
    // records land at offsets 0..n.
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    let records: Vec<Record> = (0..20)
        .map(|i| Record::new(0, format!("k{i}"), format!("v{i}")))
        .collect();
    let acked = produce_ok(&bootstrap, "auto-created", &records, &[]);
    assert_eq!(acked, (0..20).map(|o| (0, o)).collect::<Vec<_>>());
    let (error, partitions) = crate::common::topic_metadata(&bootstrap, "auto-created");
    assert_eq!((error, partitions), (None, vec![0]));
    let consumed = consume(&bootstrap, "auto-created", 0, 0, 20, &[]);
    assert_records(&consumed, &records, 0);
}

#[test]
fn idempotent_producer_round_trip() {
    // Proves: an idempotent producer (enable.idempotence=true: InitProducerId,
    // sequence numbers, up to 5 in-flight requests) gets 2000 records on two
    // partitions acknowledged at contiguous offsets 0..1000 each, read back
    // exactly once and in order.
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "idempotent", 2, &[]);
    let records: Vec<Record> = (0..2000_i32)
        .map(|i| Record::new(i % 2, format!("k{i}"), format!("v{i}")))
        .collect();
    let acked = produce_ok(
        &bootstrap,
        "idempotent",
        &records,
        &[
            ("enable.idempotence", "true"),
            ("batch.num.messages", "100"),
            ("max.in.flight.requests.per.connection", "5"),
        ],
    );
    for (i, at) in acked.iter().enumerate() {
        let expected = (records[i].partition, i64::try_from(i / 2).expect("small"));
        assert_eq!(*at, expected, "acknowledged position of record {i}");
    }
    for partition in 0..2 {
        let expected: Vec<Record> = records
            .iter()
            .filter(|r| r.partition == partition)
            .cloned()
            .collect();
        let consumed = consume(&bootstrap, "idempotent", partition, 0, 1000, &[]);
        assert_records(&consumed, &expected, 0);
    }
}
