//! Message size limits: a record just under the broker's default
//! message.max.bytes (1048588) is stored byte-identical; a batch over it is
//! rejected with MESSAGE_TOO_LARGE and takes no offset.

use integration_tests::Broker;
use rdkafka::error::RDKafkaErrorCode;

use crate::common::{
    assert_records, consume, create_topic, produce_all, produce_ok, producer, Record,
};

/// Consumer settings that let one fetch carry a 2 MiB batch.
const BIG_FETCH: &[(&str, &str)] = &[
    ("fetch.max.bytes", "10485760"),
    ("max.partition.fetch.bytes", "10485760"),
];

#[test]
fn one_mebibyte_record_round_trips() {
    // Proves: a 1 MiB - 1 KiB value (non-repeating bytes) is accepted at offset 0
    // and read back byte-identical.
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "large", 1, &[]);

    let value: Vec<u8> = (0..(1024 * 1024 - 1024))
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let mut record = Record::new(0, "big", value);
    record.headers = vec![("h".to_owned(), Some(b"v".to_vec()))];
    let records = vec![record];
    let acked = produce_ok(
        &bootstrap,
        "large",
        &records,
        &[("message.max.bytes", "2000000")],
    );
    assert_eq!(acked, vec![(0, 0)]);
    let consumed = consume(&bootstrap, "large", 0, 0, 1, BIG_FETCH);
    assert_records(&consumed, &records, 0);
}

#[test]
fn record_over_message_max_bytes_is_rejected() {
    // Proves: a 2 MiB record (the client allows up to 10 MB, so it reaches the
    // broker) is refused with MESSAGE_TOO_LARGE, takes no offset, and the broker
    // then serves normal produce/consume on the same topic from offset 0.
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "too-large", 1, &[]);

    let producer = producer(
        &bootstrap,
        &[("message.max.bytes", "10000000"), ("retries", "0")],
    );
    let big = vec![Record::new(0, "big", vec![7u8; 2 * 1024 * 1024])];
    let deliveries = produce_all(&producer, "too-large", &big);
    assert_eq!(deliveries.len(), 1);
    assert_eq!(
        deliveries[0].result,
        Err(RDKafkaErrorCode::MessageSizeTooLarge),
        "2 MiB record against message.max.bytes 1048588"
    );

    let small: Vec<Record> = (0..3)
        .map(|i| Record::new(0, format!("k{i}"), format!("v{i}")))
        .collect();
    let acked = produce_ok(&bootstrap, "too-large", &small, &[]);
    assert_eq!(
        acked,
        vec![(0, 0), (0, 1), (0, 2)],
        "the rejected record took no offset"
    );
    let consumed = consume(&bootstrap, "too-large", 0, 0, 3, &[]);
    assert_records(&consumed, &small, 0);
}

#[test]
fn configured_message_max_bytes_is_enforced() {
    // Proves: --message-max-bytes is honoured: with a 10000-byte limit a
    // 20000-byte record is refused with MESSAGE_TOO_LARGE and a 5000-byte one
    // is stored at offset 0.
    let broker = Broker::start_with(&["--message-max-bytes", "10000"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "limited", 1, &[]);

    let producer = producer(&bootstrap, &[("retries", "0")]);
    let deliveries = produce_all(
        &producer,
        "limited",
        &[Record::new(0, "k", vec![1u8; 20_000])],
    );
    assert_eq!(
        deliveries[0].result,
        Err(RDKafkaErrorCode::MessageSizeTooLarge)
    );

    let ok = vec![Record::new(0, "k", vec![2u8; 5_000])];
    assert_eq!(produce_ok(&bootstrap, "limited", &ok, &[]), vec![(0, 0)]);
    assert_records(&consume(&bootstrap, "limited", 0, 0, 1, &[]), &ok, 0);
}
