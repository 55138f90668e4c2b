//! Fields of answers that Kafka fills in a particular way and clients read, checked over
//! a raw socket against what Apache Kafka 4.4 answered to the same requests (aiokafka and
//! @platformatic/kafka probes, side by side): a Produce never creates a topic; a refused
//! append names the log start offset; a deduplicated retry reports the batch's timestamp;
//! a failed Fetch partition has every offset -1; the defaults of DescribeTransactions and
//! CreateTopics answers, and CreateTopics' refusal of a null config; and an acks=1 answer
//! that never precedes the records' visibility on a single node.

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, DeleteRecordsRequest, DeleteRecordsResponse,
    DescribeTransactionsRequest, DescribeTransactionsResponse, FetchRequest, FetchResponse,
    InitProducerIdRequest, InitProducerIdResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, ProduceResponse, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Record, TimestampType};

use integration_tests::Broker;

use crate::common::create_topic;
use crate::wire::{self, connect};

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const INVALID_TIMESTAMP: i16 = 32;
const INVALID_CONFIG: i16 = 40;
const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

fn produce(
    stream: &mut std::net::TcpStream,
    topic: &str,
    records: Bytes,
) -> PartitionProduceResponse {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let mut response: ProduceResponse = wire::round_trip(stream, 9, 1, &request);
    response.responses.remove(0).partition_responses.remove(0)
}

/// Records `0..count` of one idempotent batch of `producer_id`/`epoch` from `sequence`,
/// timestamps `first_timestamp + i`.
fn idempotent_batch(producer_id: i64, epoch: i16, sequence: i32, first_timestamp: i64) -> Bytes {
    let records: Vec<Record> = (0..3_i32)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(i),
            sequence: sequence + i,
            timestamp: first_timestamp + i64::from(i),
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("v{i}"))),
            headers: Default::default(),
        })
        .collect();
    wire::encode_uncompressed(&records)
}

fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms fit i64")
}

#[test]
fn produce_fetch_and_admin_answers_carry_kafkas_fields() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    let mut stream = connect(broker.addr());

    // 1. Produce to a topic that does not exist, auto-creation on (the default): Kafka
    //    answers UNKNOWN_TOPIC_OR_PARTITION and creates nothing (only Metadata creates).
    let batch = wire::record_batch(&[(None, Some(Bytes::from_static(b"x")))], now_ms());
    for attempt in 0..2 {
        let answer = produce(&mut stream, "never-made", batch.clone());
        assert_eq!(
            (
                answer.error_code,
                answer.base_offset,
                answer.log_start_offset
            ),
            (UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
            "produce to an unknown topic, attempt {attempt}"
        );
    }
    let metadata: MetadataResponse = wire::round_trip(
        &mut stream,
        12,
        2,
        &MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name("never-made")))
            ]))
            .with_allow_auto_topic_creation(false),
    );
    assert_eq!(
        metadata.topics[0].error_code, UNKNOWN_TOPIC_OR_PARTITION,
        "the produce created no topic"
    );

    // 2. A refused append names the partition's log start offset (2 here, after
    //    DeleteRecords), as Kafka's does for INVALID_TIMESTAMP and the producer-state errors.
    create_topic(
        &bootstrap,
        "answers",
        1,
        &[("message.timestamp.before.max.ms", "86400000")],
    );
    let now = now_ms();
    let three = wire::record_batch(
        &[
            (None, Some(Bytes::from_static(b"a"))),
            (None, Some(Bytes::from_static(b"b"))),
            (None, Some(Bytes::from_static(b"c"))),
        ],
        now,
    );
    let appended = produce(&mut stream, "answers", three);
    assert_eq!((appended.error_code, appended.base_offset), (0, 0));
    let deleted: DeleteRecordsResponse = wire::round_trip(
        &mut stream,
        2,
        3,
        &DeleteRecordsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(name("answers"))
                .with_partitions(vec![DeleteRecordsPartition::default()
                    .with_partition_index(0)
                    .with_offset(2)])]),
    );
    assert_eq!(deleted.topics[0].partitions[0].low_watermark, 2);
    let too_old = wire::record_batch(&[(None, Some(Bytes::from_static(b"old")))], 1_000);
    let refused = produce(&mut stream, "answers", too_old);
    assert_eq!(
        (
            refused.error_code,
            refused.base_offset,
            refused.log_start_offset
        ),
        (INVALID_TIMESTAMP, -1, 2),
        "a refused append names the log start offset"
    );

    // 3. An idempotent retry is answered with the first append's offset and, as its append
    //    time, the batch's max timestamp, on a CreateTime topic too.
    let init: InitProducerIdResponse = wire::round_trip(
        &mut stream,
        4,
        4,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id((-1).into())
            .with_producer_epoch(-1),
    );
    assert_eq!(init.error_code, 0);
    let (producer_id, epoch) = (init.producer_id.0, init.producer_epoch);
    let stamp = now_ms();
    let batch = idempotent_batch(producer_id, epoch, 0, stamp);
    let first = produce(&mut stream, "answers", batch.clone());
    assert_eq!(
        (
            first.error_code,
            first.base_offset,
            first.log_append_time_ms
        ),
        (0, 3, -1),
        "first append of the idempotent batch"
    );
    let retry = produce(&mut stream, "answers", batch);
    assert_eq!(
        (
            retry.error_code,
            retry.base_offset,
            retry.log_append_time_ms,
            retry.log_start_offset
        ),
        (0, 3, stamp + 2, 2),
        "the deduplicated retry"
    );

    // 4. A Fetch partition out of range has every offset -1 and no aborted transactions.
    let fetch: FetchResponse = wire::round_trip(
        &mut stream,
        11,
        5,
        &FetchRequest::default()
            .with_replica_id((-1).into())
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_isolation_level(1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(name("answers"))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(100)
                    .with_partition_max_bytes(1 << 20)])]),
    );
    let p = &fetch.responses[0].partitions[0];
    assert_eq!(
        (
            p.error_code,
            p.high_watermark,
            p.last_stable_offset,
            p.log_start_offset,
            p.aborted_transactions.is_none()
        ),
        (OFFSET_OUT_OF_RANGE, -1, -1, -1, true),
        "an out-of-range fetch partition"
    );

    // 5. DescribeTransactions of an unknown id: the error, the rest at the schema's zeros.
    // Retried while the transaction coordinator loads (COORDINATOR_LOAD_IN_PROGRESS 14,
    // COORDINATOR_NOT_AVAILABLE 15, NOT_COORDINATOR 16), as clients do.
    let mut described: DescribeTransactionsResponse = DescribeTransactionsResponse::default();
    for _ in 0..100 {
        described = wire::round_trip(
            &mut stream,
            0,
            6,
            &DescribeTransactionsRequest::default()
                .with_transactional_ids(vec![TransactionalId(StrBytes::from_static_str("nobody"))]),
        );
        if ![14, 15, 16].contains(&described.transaction_states[0].error_code) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let state = &described.transaction_states[0];
    assert_eq!(
        (
            state.error_code,
            state.producer_id.0,
            state.producer_epoch,
            state.transaction_start_time_ms
        ),
        (TRANSACTIONAL_ID_NOT_FOUND, 0, 0, 0),
        "DescribeTransactions of an unknown id"
    );

    // 6. A created topic's CreateTopics message is null.
    let created: CreateTopicsResponse = wire::round_trip(
        &mut stream,
        7,
        7,
        &CreateTopicsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(name("made-by-create"))
                .with_num_partitions(1)
                .with_replication_factor(1)]),
    );
    assert_eq!(
        (
            created.topics[0].error_code,
            created.topics[0].error_message.clone()
        ),
        (0, None),
        "CreateTopics success"
    );
    // A config without a value is INVALID_CONFIG (40), not "the default", and nothing is made.
    let null_config: CreateTopicsResponse = wire::round_trip(
        &mut stream,
        7,
        10,
        &CreateTopicsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(name("null-config"))
                .with_num_partitions(1)
                .with_replication_factor(1)
                .with_configs(vec![CreatableTopicConfig::default()
                    .with_name(StrBytes::from_static_str("retention.ms"))
                    .with_value(None)])]),
    );
    assert_eq!(
        null_config.topics[0].error_code, INVALID_CONFIG,
        "a null config value"
    );
}

/// Raw ListOffsets v7 LATEST of `topic`/0 on `stream`: the high watermark.
fn latest(stream: &mut std::net::TcpStream, topic: &str) -> i64 {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
    let request = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let response: ListOffsetsResponse = wire::round_trip(stream, 7, 9, &request);
    let p = &response.topics[0].partitions[0];
    assert_eq!(p.error_code, 0, "ListOffsets LATEST");
    p.offset
}

#[test]
fn an_acks_1_acknowledgement_is_visible_at_once_on_a_single_node() {
    // Proves: on a single node an acks=1 answer never precedes the record's visibility:
    // right after each of 50 acknowledgements (Produce v9 acks=1 over a raw socket, as a Go
    // or Python client sends it) ListOffsets LATEST on the same connection already counts
    // it, as on Kafka, whose one-member ISR moves the high watermark with the append.
    // Before, the answer came before the fsync that moves Logbook's high watermark, and
    // LATEST lagged (a Go client saw it stale 7 times in 10, and DeleteRecords up to an
    // acknowledged offset failed with OFFSET_OUT_OF_RANGE).
    let broker = Broker::start();
    create_topic(&broker.bootstrap(), "acks-one", 1, &[]);
    let mut stream = connect(broker.addr());
    let mut stale = Vec::new();
    for i in 0..50_i64 {
        let batch = wire::record_batch(&[(None, Some(Bytes::from(format!("v{i}"))))], now_ms());
        let request = ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name("acks-one"))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch))])]);
        let response: ProduceResponse = wire::round_trip(&mut stream, 9, 8, &request);
        let p = &response.responses[0].partition_responses[0];
        assert_eq!((p.error_code, p.base_offset), (0, i), "acknowledgement {i}");
        let end = latest(&mut stream, "acks-one");
        if end != i + 1 {
            stale.push((i, end));
        }
    }
    assert_eq!(stale, [], "(record, LATEST) right after its acks=1 answer");
}
