//! DeleteRecords (API 21) with rdkafka's AdminClient and raw requests: the log start
//! moves (ListOffsets earliest, fetch below it OFFSET_OUT_OF_RANGE, whole segments below
//! it deleted), durably (a SIGKILL and restart keep it), -1 means the high watermark, and
//! the refusals are Kafka's.

use std::time::{Duration, Instant};

use integration_tests::Broker;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    BrokerId, DeleteRecordsRequest, DeleteRecordsResponse, FetchRequest, FindCoordinatorRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::{Offset, TopicPartitionList};

use crate::common::{admin, admin_options, block_on, consume, create_topic, produce_ok, Record};
use crate::retention::{segment_bases, watermarks};
use crate::wire::{connect, round_trip};

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// rdkafka `delete_records` of `topic`/0 up to `offset`: (low watermark, error).
fn delete_with_admin(bootstrap: &str, topic: &str, offset: Offset) -> (Offset, Option<String>) {
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset(topic, 0, offset)
        .expect("build list");
    let result = block_on(admin(bootstrap).delete_records(&offsets, &admin_options()))
        .expect("delete_records request");
    let element = result
        .elements_for_topic(topic)
        .into_iter()
        .next()
        .expect("one partition");
    (
        element.offset(),
        element.error().err().map(|e| e.to_string()),
    )
}

/// Raw DeleteRecords v2 of one partition: (error code, low watermark).
fn delete_raw(broker: &Broker, topic: &str, partition: i32, offset: i64) -> (i16, i64) {
    let mut stream = connect(broker.addr());
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![DeleteRecordsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![DeleteRecordsPartition::default()
                .with_partition_index(partition)
                .with_offset(offset)])]);
    let response: DeleteRecordsResponse = round_trip(&mut stream, 2, 1, &request);
    assert_eq!(response.topics.len(), 1);
    assert_eq!(response.topics[0].name.as_str(), topic);
    let p = &response.topics[0].partitions[0];
    assert_eq!(p.partition_index, partition);
    (p.error_code, p.low_watermark)
}

/// Raw Fetch v5 of `topic`/0 at `offset`: (error code, log start offset, high watermark).
fn fetch_raw(broker: &Broker, topic: &str, offset: i64) -> (i16, i64, i64) {
    let mut stream = connect(broker.addr());
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])]);
    let response = round_trip(&mut stream, 5, 2, &request);
    let p = &response.responses[0].partitions[0];
    (p.error_code, p.log_start_offset, p.high_watermark)
}

// DeleteRecords up to 30 of 60 records in ~1 KiB segments: the answer's low watermark is
// 30, ListOffsets earliest 30, a fetch at 10 OFFSET_OUT_OF_RANGE (1) with offsets -1 and at
// 30 with log start 30,
// records 30..59 read back exactly, the segments wholly below 30 gone from disk; all of
// it again after a SIGKILL and restart. Then -1 deletes up to the high watermark (60).
#[test]
fn delete_records_moves_log_start_durably() {
    let mut broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "purged", 1, &[("segment.bytes", "1024")]);
    let all: Vec<Record> = (0..60)
        .map(|i| Record::new(0, format!("k{i}"), format!("v{i}")))
        .collect();
    let one_per_batch = [("linger.ms", "0"), ("batch.num.messages", "1")];
    produce_ok(&bootstrap, "purged", &all, &one_per_batch);
    let before = segment_bases(broker.data_dir(), "purged");
    assert!(before.len() >= 3, "segments {before:?}");
    let holding_30 = *before
        .iter()
        .filter(|b| **b <= 30)
        .max()
        .expect("a base <= 30");
    assert!(holding_30 > 0, "segments {before:?}");

    assert_eq!(
        delete_with_admin(&bootstrap, "purged", Offset::Offset(30)),
        (Offset::Offset(30), None)
    );
    let check = |broker: &Broker| {
        let bootstrap = broker.bootstrap();
        assert_eq!(watermarks(&bootstrap, "purged"), (30, 60));
        // Below the log start: OFFSET_OUT_OF_RANGE with every offset -1, as Kafka 4.4
        // answers it (checked with a Fetch v4 at offsets 10 and 100 after deleting to 30).
        assert_eq!(fetch_raw(broker, "purged", 10), (1, -1, -1));
        assert_eq!(fetch_raw(broker, "purged", 29), (1, -1, -1));
        assert_eq!(
            fetch_raw(broker, "purged", 30),
            (0, 30, 60),
            "at the log start"
        );
        let expected: Vec<i64> = before
            .iter()
            .copied()
            .filter(|b| *b >= holding_30)
            .collect();
        assert_eq!(segment_bases(broker.data_dir(), "purged"), expected);
        let got = consume(&bootstrap, "purged", 0, 30, 30, &[]);
        crate::common::assert_records(&got, &all[30..], 30);
    };
    check(&broker);
    broker.restart(); // SIGKILL, then start again on the same data
    check(&broker);
    // At or below the log start: nothing changes, the low watermark is the log start.
    assert_eq!(delete_raw(&broker, "purged", 0, 12), (0, 30));

    assert_eq!(
        delete_with_admin(&bootstrap, "purged", Offset::End),
        (Offset::Offset(60), None)
    );
    assert_eq!(watermarks(&bootstrap, "purged"), (60, 60));
    let at = produce_ok(&bootstrap, "purged", &all[..1], &[]);
    assert_eq!(at, vec![(0, 60)]);
}

// Kafka's refusals: past the high watermark OFFSET_OUT_OF_RANGE (1); an unknown topic or
// partition UNKNOWN_TOPIC_OR_PARTITION (3); an internal topic INVALID_TOPIC_EXCEPTION (17);
// a compact-only topic POLICY_VIOLATION (44); each with low watermark -1.
#[test]
fn delete_records_refusals() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "plain", 1, &[]);
    create_topic(&bootstrap, "compacted", 1, &[("cleanup.policy", "compact")]);
    let records: Vec<Record> = (0..5)
        .map(|i| Record::new(0, format!("k{i}"), "v"))
        .collect();
    produce_ok(&bootstrap, "plain", &records, &[]);
    produce_ok(&bootstrap, "compacted", &records, &[]);

    assert_eq!(delete_raw(&broker, "plain", 0, 6), (1, -1));
    assert_eq!(delete_raw(&broker, "plain", 0, -7), (1, -1));
    assert_eq!(delete_raw(&broker, "plain", 1, 0), (3, -1));
    assert_eq!(delete_raw(&broker, "nope", 0, 0), (3, -1));
    assert_eq!(delete_raw(&broker, "compacted", 0, 2), (44, -1));
    assert_eq!(watermarks(&bootstrap, "compacted"), (0, 5));
    assert_eq!(delete_raw(&broker, "plain", 0, 5), (0, 5));

    // FindCoordinator creates __consumer_offsets.
    let mut stream = connect(broker.addr());
    let _ = round_trip(
        &mut stream,
        1,
        3,
        &FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g")),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = delete_raw(&broker, "__consumer_offsets", 0, 0);
    while seen.0 == 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        seen = delete_raw(&broker, "__consumer_offsets", 0, 0);
    }
    assert_eq!(seen, (17, -1));
}
