//! Poison batches (issue 8): batches whose CRC is right but whose records are not, sent
//! over a raw socket as an attacker (or a buggy client) would. Kafka's LogValidator refuses
//! them with CORRUPT_MESSAGE / INVALID_RECORD / INVALID_TIMESTAMP and per-record errors;
//! accepting one stalls every librdkafka consumer of the partition at it forever.

use bytes::Bytes;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{ListOffsetsRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use integration_tests::Broker;

use crate::common::{self, Record};
use crate::wire::{self, connect};

const CORRUPT_MESSAGE: i16 = 2;
const INVALID_TIMESTAMP: i16 = 32;
const INVALID_RECORD: i16 = 87;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;

const ATTR_GZIP: i16 = 1;
const ATTR_TRANSACTIONAL: i16 = 0x10;
const ATTR_CONTROL: i16 = 0x20;

/// Appends a zigzag varint.
fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// One record (length prefix included) with key `k{tag}` and value `v{tag}`.
fn record(timestamp_delta: i64, offset_delta: i64, tag: &str) -> Vec<u8> {
    let mut body = vec![0u8];
    put_varint(&mut body, timestamp_delta);
    put_varint(&mut body, offset_delta);
    for field in [format!("k{tag}"), format!("v{tag}")] {
        put_varint(&mut body, field.len() as i64);
        body.extend(field.as_bytes());
    }
    put_varint(&mut body, 0);
    let mut out = Vec::new();
    put_varint(&mut out, body.len() as i64);
    out.extend(body);
    out
}

/// Header fields of a hand-made batch; `Default` is a plain CreateTime batch.
#[derive(Clone, Copy)]
struct Header {
    attributes: i16,
    base_timestamp: i64,
    max_timestamp: i64,
    producer_id: i64,
    base_sequence: i32,
    records_count: i32,
}

impl Default for Header {
    fn default() -> Self {
        Self {
            attributes: 0,
            base_timestamp: 1_000,
            max_timestamp: 1_002,
            producer_id: -1,
            base_sequence: -1,
            records_count: 3,
        }
    }
}

/// A whole v2 batch with a correct CRC over whatever `records` holds.
fn batch(h: Header, records: &[u8]) -> Bytes {
    let mut out = Vec::new();
    out.extend(0i64.to_be_bytes());
    out.extend(0i32.to_be_bytes()); // batch length, patched below
    out.extend(0i32.to_be_bytes());
    out.push(2);
    out.extend(0u32.to_be_bytes()); // crc, patched below
    out.extend(h.attributes.to_be_bytes());
    out.extend((h.records_count - 1).to_be_bytes());
    out.extend(h.base_timestamp.to_be_bytes());
    out.extend(h.max_timestamp.to_be_bytes());
    out.extend(h.producer_id.to_be_bytes());
    out.extend((if h.producer_id >= 0 { 0i16 } else { -1 }).to_be_bytes());
    out.extend(h.base_sequence.to_be_bytes());
    out.extend(h.records_count.to_be_bytes());
    out.extend_from_slice(records);
    let length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.into()
}

/// Three well-formed records tagged `{prefix}0..2`, timestamps 1000..1002.
fn good_records(prefix: &str) -> Vec<u8> {
    (0..3)
        .flat_map(|i| record(i, i, &format!("{prefix}{i}")))
        .collect()
}

/// Sends one Produce (acks=-1) of `records` to `topic`-0 at `version`.
fn produce(
    stream: &mut std::net::TcpStream,
    version: i16,
    topic: &str,
    records: Bytes,
) -> PartitionProduceResponse {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let mut response = wire::round_trip(stream, version, 7, &request);
    response.responses.remove(0).partition_responses.remove(0)
}

// Every kind of poison batch gets Kafka's error code, nothing of it is appended, and an
// rdkafka consumer afterwards reads exactly the valid records at contiguous offsets.
#[test]
fn poison_batches_are_refused_and_consumers_read_only_valid_records() {
    let broker = Broker::start();
    let topic = "poison";
    common::create_topic(&broker.bootstrap(), topic, 1, &[]);
    let mut stream = connect(broker.addr());
    let first = produce(
        &mut stream,
        9,
        topic,
        batch(Header::default(), &good_records("a")),
    );
    assert_eq!(
        (first.error_code, first.base_offset),
        (0, 0),
        "first good batch"
    );

    let mut malformed = good_records("b");
    let second_record = record(0, 0, "b0").len();
    malformed[second_record] = 0x7e; // record 1 claims 63 bytes: runs past the batch
    let mut deltas = Vec::new();
    for (i, delta) in [0, 1, 5].into_iter().enumerate() {
        deltas.extend(record(i as i64, delta, &format!("d{i}")));
    }
    let mut trailing = good_records("t");
    trailing.extend(record(3, 3, "t3"));
    let poisons: Vec<(&str, Bytes, i16)> = vec![
        (
            "record length past the batch",
            batch(Header::default(), &malformed),
            INVALID_RECORD,
        ),
        (
            "offset deltas 0,1,5",
            batch(Header::default(), &deltas),
            INVALID_RECORD,
        ),
        (
            "a fourth record beyond recordsCount",
            batch(Header::default(), &trailing),
            INVALID_RECORD,
        ),
        (
            "recordsCount 4 over 3 records",
            batch(
                Header {
                    records_count: 4,
                    ..Header::default()
                },
                &good_records("c"),
            ),
            INVALID_RECORD,
        ),
        (
            "gzip flag over uncompressed records",
            batch(
                Header {
                    attributes: ATTR_GZIP,
                    ..Header::default()
                },
                &good_records("g"),
            ),
            CORRUPT_MESSAGE,
        ),
        // A transactional batch (a control batch is one) in a request without a
        // transactional id is refused before it is validated, as Kafka's
        // `handleProduceRequest` refuses it.
        (
            "control batch from a client",
            batch(
                Header {
                    attributes: ATTR_CONTROL | ATTR_TRANSACTIONAL,
                    producer_id: 1,
                    base_sequence: 0,
                    ..Header::default()
                },
                &good_records("x"),
            ),
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ),
        (
            "transactional batch without a producer id",
            batch(
                Header {
                    attributes: ATTR_TRANSACTIONAL,
                    ..Header::default()
                },
                &good_records("y"),
            ),
            TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ),
        (
            "idempotent batch without a sequence",
            batch(
                Header {
                    producer_id: 1,
                    ..Header::default()
                },
                &good_records("z"),
            ),
            INVALID_RECORD,
        ),
    ];
    for (what, poison, code) in poisons {
        let response = produce(&mut stream, 9, topic, poison);
        assert_eq!(response.error_code, code, "{what}");
        assert_eq!(response.base_offset, -1, "{what}");
        assert!(response.error_message.is_some(), "{what}: an error message");
    }

    // v8+ carries the offending record's index.
    let response = produce(&mut stream, 9, topic, batch(Header::default(), &malformed));
    let indexes: Vec<i32> = response
        .record_errors
        .iter()
        .map(|e| e.batch_index)
        .collect();
    assert_eq!(indexes, vec![1], "record_errors of the malformed batch");

    let last = produce(
        &mut stream,
        9,
        topic,
        batch(Header::default(), &good_records("e")),
    );
    assert_eq!(
        (last.error_code, last.base_offset),
        (0, 3),
        "good batch after the poisons"
    );

    let consumed = common::consume(&broker.bootstrap(), topic, 0, 0, 6, &[]);
    let expected: Vec<Record> = ["a0", "a1", "a2", "e0", "e1", "e2"]
        .iter()
        .map(|t| Record::new(0, format!("k{t}"), format!("v{t}")))
        .collect();
    common::assert_records(&consumed, &expected, 0);
}

/// ListOffsets v7 MAX_TIMESTAMP (-3) for `topic`-0: (offset, timestamp).
fn max_timestamp_offset(stream: &mut std::net::TcpStream, topic: &str) -> (i64, i64) {
    let request = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-3)])]);
    let response = wire::round_trip(stream, 7, 9, &request);
    let p = &response.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    (p.offset, p.timestamp)
}

// A batch whose maxTimestamp field lies (far future, records at 500..502) is stored with
// the maximum of its records, as Kafka's validator rewrites it: ListOffsets MAX_TIMESTAMP
// then finds the honest batch's record at offset 2 (timestamp 1002), not the liar's.
#[test]
fn max_timestamp_is_recomputed_from_the_records() {
    let broker = Broker::start();
    let topic = "liar";
    common::create_topic(&broker.bootstrap(), topic, 1, &[]);
    let mut stream = connect(broker.addr());
    let honest = produce(
        &mut stream,
        9,
        topic,
        batch(Header::default(), &good_records("h")),
    );
    assert_eq!((honest.error_code, honest.base_offset), (0, 0));
    let liar = Header {
        base_timestamp: 500,
        max_timestamp: 4_000_000_000_000,
        ..Header::default()
    };
    let response = produce(&mut stream, 9, topic, batch(liar, &good_records("l")));
    assert_eq!((response.error_code, response.base_offset), (0, 3));
    assert_eq!(max_timestamp_offset(&mut stream, topic), (2, 1_002));
    let consumed = common::consume(&broker.bootstrap(), topic, 0, 3, 3, &[]);
    let timestamps: Vec<rdkafka::Timestamp> = consumed.iter().map(|c| c.timestamp).collect();
    assert_eq!(
        timestamps,
        (500..503)
            .map(rdkafka::Timestamp::CreateTime)
            .collect::<Vec<_>>(),
        "record timestamps untouched"
    );
}

// message.timestamp.before.max.ms / after.max.ms: a record outside the window is refused
// with INVALID_TIMESTAMP (32) naming the record; timestamps inside it are accepted.
#[test]
fn timestamps_outside_the_topic_window_are_refused() {
    let broker = Broker::start();
    let topic = "windowed";
    common::create_topic(
        &broker.bootstrap(),
        topic,
        1,
        &[
            ("message.timestamp.before.max.ms", "3600000"),
            ("message.timestamp.after.max.ms", "3600000"),
        ],
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let mut stream = connect(broker.addr());
    let mut records = record(0, 0, "0");
    records.extend(record(-7_200_000, 1, "1"));
    records.extend(record(1, 2, "2"));
    let stale = Header {
        base_timestamp: now,
        max_timestamp: now + 1,
        ..Header::default()
    };
    let response = produce(&mut stream, 9, topic, batch(stale, &records));
    assert_eq!(response.error_code, INVALID_TIMESTAMP);
    let indexes: Vec<i32> = response
        .record_errors
        .iter()
        .map(|e| e.batch_index)
        .collect();
    assert_eq!(indexes, vec![1]);
    let fresh = produce(&mut stream, 9, topic, batch(stale, &good_records("f")));
    assert_eq!((fresh.error_code, fresh.base_offset), (0, 0));
}
