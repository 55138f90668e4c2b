//! What Produce answers a transactional batch it cannot tie to a transaction, with raw
//! requests (no client sends these on purpose, but a buggy or hand-made one does): without
//! a transactional id the whole request is refused, as Kafka's `handleProduceRequest`
//! does, so no transaction opens that no coordinator would ever end; for a partition not
//! added to the transaction, INVALID_TXN_STATE up to v10 and TRANSACTION_ABORTABLE from
//! v11 (KIP-890), which a client can abort and go on from. And when an idempotent
//! producer's state expires.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use integration_tests::Broker;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    BrokerId, InitProducerIdRequest, ListOffsetsRequest, ProduceRequest, ProducerId, TopicName,
    TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Record, TimestampType};

use super::SMALL_INTERNAL_TOPICS;
use crate::common::{create_topic, now_ms};
use crate::wire::{connect, encode_uncompressed, record_batch, round_trip};

const NONE: i16 = 0;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const INVALID_TXN_STATE: i16 = 48;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
const TRANSACTION_ABORTABLE: i16 = 120;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// InitProducerId v3 (`transactional_id` None: an idempotent producer), retried while the
/// transaction coordinator loads: `(producer id, epoch)`.
fn init_producer_id(addr: SocketAddr, transactional_id: Option<&str>) -> (i64, i16) {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(transactional_id.map(|t| TransactionalId(s(t))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = round_trip(&mut connect(addr), 3, 1, &request);
        match response.error_code {
            NONE => return (response.producer_id.0, response.producer_epoch),
            COORDINATOR_LOAD_IN_PROGRESS | COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR
                if Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            code => panic!("InitProducerId {transactional_id:?}: error {code}"),
        }
    }
}

/// One uncompressed transactional batch of `count` records from `producer`, sequences
/// from 0.
fn transactional_batch(producer: (i64, i16), count: i32) -> Bytes {
    producer_batch(producer, count, true)
}

/// One uncompressed batch of `count` records from `producer`, sequences from 0.
fn producer_batch(producer: (i64, i16), count: i32, transactional: bool) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: producer.0,
            producer_epoch: producer.1,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(i),
            sequence: i,
            timestamp: now_ms(),
            key: None,
            value: Some(Bytes::from(format!("txn-{i}"))),
            headers: Default::default(),
        })
        .collect();
    encode_uncompressed(&records)
}

/// Produce (acks=all) of `records` to partition 0 of `topic`: `(error code, base offset)`.
fn produce(
    addr: SocketAddr,
    version: i16,
    transactional_id: Option<&str>,
    topic: &str,
    records: Bytes,
) -> (i16, i64) {
    let request = ProduceRequest::default()
        .with_transactional_id(transactional_id.map(|t| TransactionalId(s(t))))
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(s(topic)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let response = round_trip(&mut connect(addr), version, 1, &request);
    let partition = &response.responses[0].partition_responses[0];
    (partition.error_code, partition.base_offset)
}

/// The latest offset of partition 0 under read_committed: the last stable offset.
fn last_stable_offset(addr: SocketAddr, topic: &str) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(1)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let response = round_trip(&mut connect(addr), 5, 1, &request);
    let partition = &response.topics[0].partitions[0];
    assert_eq!(partition.error_code, NONE, "ListOffsets read_committed");
    partition.offset
}

#[test]
fn transactional_batches_without_a_transaction_are_refused() {
    // Proves: a transactional batch in a Produce request with no transactional id is
    // refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (v9 and v12) and nothing is written:
    // the next plain batch lands at offset 0 and the last stable offset follows the log
    // end (before, the batch was appended and opened a transaction nobody could end, and
    // the last stable offset stayed at it); a transactional batch for a partition never
    // added to the producer's transaction gets INVALID_TXN_STATE up to v10 and
    // TRANSACTION_ABORTABLE from v11, as Kafka 4.4 answers.
    let broker = Broker::start_with(SMALL_INTERNAL_TOPICS);
    let addr = broker.addr();
    create_topic(&broker.bootstrap(), "txn-stray", 1, &[]);

    let idempotent = init_producer_id(addr, None);
    for version in [9, 12] {
        let refused = produce(
            addr,
            version,
            None,
            "txn-stray",
            transactional_batch(idempotent, 3),
        );
        assert_eq!(
            refused.0, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "v{version}: a transactional batch without a transactional id"
        );
    }
    let plain = record_batch(
        &[
            (None, Some(Bytes::from_static(b"plain-0"))),
            (None, Some(Bytes::from_static(b"plain-1"))),
        ],
        now_ms(),
    );
    assert_eq!(
        produce(addr, 9, None, "txn-stray", plain),
        (NONE, 0),
        "the plain batch after the refused ones"
    );
    assert_eq!(
        last_stable_offset(addr, "txn-stray"),
        2,
        "no transaction is left open"
    );

    create_topic(&broker.bootstrap(), "txn-unadded", 1, &[]);
    let transactional = init_producer_id(addr, Some("txn-unadded-id"));
    for (version, expected) in [(10, INVALID_TXN_STATE), (11, TRANSACTION_ABORTABLE)] {
        let answer = produce(
            addr,
            version,
            Some("txn-unadded-id"),
            "txn-unadded",
            transactional_batch(transactional, 1),
        );
        assert_eq!(
            answer.0, expected,
            "v{version}: a partition not added to the transaction"
        );
    }
    assert_eq!(
        last_stable_offset(addr, "txn-unadded"),
        0,
        "nothing was appended"
    );
}

#[test]
fn idle_producer_ids_expire_at_the_check_interval() {
    // Proves: `producer.id.expiration.check.interval.ms` is a broker setting (a Kafka
    // `server.properties` with it starts) and sets how often producers silent for
    // `producer.id.expiration.ms` are forgotten: a retry of the first batch is
    // deduplicated (offset 0 again) until then, and appended anew after it, as Kafka does.
    // Before, expiry ran with the retention pass (every 5 minutes, first after 30 s).
    let broker = Broker::start_with(&[
        "--producer-id-expiration-ms",
        "1500",
        "--override",
        "producer.id.expiration.check.interval.ms=250",
    ]);
    let addr = broker.addr();
    create_topic(&broker.bootstrap(), "pid-expiry", 1, &[]);
    let producer = init_producer_id(addr, None);
    let batch = producer_batch(producer, 2, false);
    assert_eq!(
        produce(addr, 9, None, "pid-expiry", batch.clone()),
        (NONE, 0),
        "first send"
    );
    assert_eq!(
        produce(addr, 9, None, "pid-expiry", batch.clone()),
        (NONE, 0),
        "a retry is deduplicated"
    );
    std::thread::sleep(Duration::from_millis(2_500));
    assert_eq!(
        produce(addr, 9, None, "pid-expiry", batch),
        (NONE, 2),
        "after expiry the same batch is new"
    );
}
