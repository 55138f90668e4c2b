//! ListOffsets: earliest / latest (high watermark) / by timestamp / max
//! timestamp, through librdkafka and through raw ListOffsets v7 requests.

use integration_tests::Broker;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use rdkafka::consumer::Consumer;
use rdkafka::{Offset, TopicPartitionList};

use crate::common::{consumer, create_topic, produce_ok, Record, CLIENT_TIMEOUT};
use crate::wire;

/// 10 records on partition 0 with timestamps 1000, 2000, ..., 10000.
fn thousands() -> Vec<Record> {
    (1..=10)
        .map(|i| {
            let mut record = Record::new(0, format!("k{i}"), format!("v{i}"));
            record.timestamp = Some(i * 1000);
            record
        })
        .collect()
}

/// `offsets_for_times` for one timestamp on `topic`/0.
fn offset_for_time(bootstrap: &str, topic: &str, timestamp: i64) -> Offset {
    let consumer = consumer(bootstrap, &[]);
    let mut query = TopicPartitionList::new();
    query
        .add_partition_offset(topic, 0, Offset::Offset(timestamp))
        .expect("build query");
    let answer = consumer
        .offsets_for_times(query, CLIENT_TIMEOUT)
        .expect("ListOffsets by timestamp");
    let element = answer
        .find_partition(topic, 0)
        .expect("partition 0 in the answer");
    assert!(
        element.error().is_ok(),
        "partition error for {timestamp}: {:?}",
        element.error()
    );
    element.offset()
}

#[test]
fn offsets_for_times_and_watermarks() {
    // Proves: ListOffsets by timestamp returns the first record whose timestamp
    // is >= the target (1500 -> offset 1, the 2000 record; 2000 -> 1; 0 -> 0;
    // 10000 -> 9), a time after every record answers -1 (OffsetEnd), and the
    // watermarks are (0, 10) after one 10-record batch and (0, 20) after two.
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "times", 1, &[]);
    let acked = produce_ok(&bootstrap, "times", &thousands(), &[("linger.ms", "200")]);
    assert_eq!(acked, (0..10).map(|o| (0, o)).collect::<Vec<_>>());

    assert_eq!(
        offset_for_time(&bootstrap, "times", 1500),
        Offset::Offset(1)
    );
    assert_eq!(
        offset_for_time(&bootstrap, "times", 2000),
        Offset::Offset(1)
    );
    assert_eq!(offset_for_time(&bootstrap, "times", 0), Offset::Offset(0));
    assert_eq!(
        offset_for_time(&bootstrap, "times", 10_000),
        Offset::Offset(9)
    );
    assert_eq!(offset_for_time(&bootstrap, "times", 10_001), Offset::End);

    let consumer = consumer(&bootstrap, &[]);
    assert_eq!(
        consumer
            .fetch_watermarks("times", 0, CLIENT_TIMEOUT)
            .expect("watermarks"),
        (0, 10)
    );
    let acked = produce_ok(&bootstrap, "times", &thousands(), &[("linger.ms", "200")]);
    assert_eq!(acked, (10..20).map(|o| (0, o)).collect::<Vec<_>>());
    assert_eq!(
        consumer
            .fetch_watermarks("times", 0, CLIENT_TIMEOUT)
            .expect("watermarks"),
        (0, 20),
        "a second 10-record batch moves the high watermark by 10"
    );
}

/// One raw ListOffsets v7 query for `topic`/0: its partition's answer.
fn list_offsets_partition(
    broker: &Broker,
    topic: &str,
    timestamp: i64,
) -> kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(0)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_current_leader_epoch(-1)
                .with_timestamp(timestamp)])]);
    let mut stream = wire::connect(broker.addr());
    let response = wire::round_trip(&mut stream, 7, 11, &request);
    assert_eq!(response.topics.len(), 1, "one topic in the answer");
    assert_eq!(response.topics[0].name.0.as_str(), topic);
    let partitions = &response.topics[0].partitions;
    assert_eq!(partitions.len(), 1, "one partition in the answer");
    assert_eq!(partitions[0].partition_index, 0);
    partitions[0].clone()
}

/// [`list_offsets_partition`] as (error, timestamp, offset).
fn raw_list_offsets(broker: &Broker, topic: &str, timestamp: i64) -> (i16, i64, i64) {
    let p = list_offsets_partition(broker, topic, timestamp);
    (p.error_code, p.timestamp, p.offset)
}

/// 10 records on partition 0 stamped out of order, the largest (50000) at offset 1.
fn out_of_order_stamps() -> Vec<Record> {
    [
        20_000, 50_000, 30_000, 30_000, 40_000, 21_000, 22_000, 23_000, 24_000, 25_000,
    ]
    .iter()
    .enumerate()
    .map(|(i, ts)| {
        let mut record = Record::new(0, format!("k{i}"), format!("v{i}"));
        record.timestamp = Some(*ts);
        record
    })
    .collect()
}

#[test]
fn raw_list_offsets_earliest_latest_max_timestamp() {
    // Proves, on ListOffsets v7: EARLIEST (-2) -> 0, LATEST (-1) -> high
    // watermark 10, MAX_TIMESTAMP (-3) -> the offset and timestamp of the record
    // with the largest timestamp even when it is not the last one (offset 1,
    // 50000), and a timestamp query matches per record, not per batch
    // (25000 -> offset 1, timestamp 50000; 50001 -> offset -1).
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "max-ts", 1, &[]);
    let records = out_of_order_stamps();
    let acked = produce_ok(&bootstrap, "max-ts", &records, &[("linger.ms", "200")]);
    assert_eq!(acked, (0..10).map(|o| (0, o)).collect::<Vec<_>>());

    assert_eq!(raw_list_offsets(&broker, "max-ts", -2).2, 0, "EARLIEST");
    assert_eq!(raw_list_offsets(&broker, "max-ts", -1).2, 10, "LATEST");
    assert_eq!(
        raw_list_offsets(&broker, "max-ts", -3),
        (0, 50_000, 1),
        "MAX_TIMESTAMP"
    );
    assert_eq!(
        raw_list_offsets(&broker, "max-ts", 25_000),
        (0, 50_000, 1),
        "first record >= 25000"
    );
    assert_eq!(
        raw_list_offsets(&broker, "max-ts", 20_000),
        (0, 20_000, 0),
        "first record >= 20000"
    );
    assert_eq!(
        raw_list_offsets(&broker, "max-ts", 50_001),
        (0, -1, -1),
        "after every record"
    );
}

#[test]
fn list_offsets_unknown_topic() {
    // Proves: ListOffsets for a topic that does not exist answers
    // UNKNOWN_TOPIC_OR_PARTITION (3) for the partition (and does not create it).
    let broker = Broker::start_with(&["--auto-create-topics-enable", "false"]);
    let (error, _, _) = raw_list_offsets(&broker, "no-such-topic", -1);
    assert_eq!(error, 3, "UNKNOWN_TOPIC_OR_PARTITION");
}

/// ListOffsets v7 for `topic`/0 at `timestamp`: (offset, leader epoch).
fn offset_and_epoch(broker: &Broker, topic: &str, timestamp: i64) -> (i64, i32) {
    let p = list_offsets_partition(broker, topic, timestamp);
    assert_eq!(p.error_code, 0, "ListOffsets {timestamp}");
    (p.offset, p.leader_epoch)
}

#[test]
fn list_offsets_answers_the_epoch_of_the_record_found() {
    // Proves (KIP-320, Kafka's fetchOffsetForTimestamp): the leader epoch answered with an
    // offset is the epoch that offset was written in — for EARLIEST the log start's, for a
    // timestamp or MAX_TIMESTAMP lookup the batch's — and the current leader epoch only
    // for LATEST. Records 0..3 are written in epoch 0; a restart elects the single node
    // anew (a higher epoch); records 3..5 are written in that epoch.
    let mut broker = Broker::start();
    let topic = "epoch-of-offset";
    create_topic(&broker.bootstrap(), topic, 1, &[]);
    let stamped = |range: std::ops::Range<i64>| -> Vec<Record> {
        range
            .map(|i| {
                let mut record = Record::new(0, format!("k{i}"), format!("v{i}"));
                record.timestamp = Some((i + 1) * 1000);
                record
            })
            .collect()
    };
    let acked = produce_ok(&broker.bootstrap(), topic, &stamped(0..3), &[]);
    assert_eq!(acked, (0..3).map(|o| (0, o)).collect::<Vec<_>>());
    assert_eq!(
        offset_and_epoch(&broker, topic, -1),
        (3, 0),
        "LATEST before"
    );

    broker.restart();
    let acked = produce_ok(&broker.bootstrap(), topic, &stamped(3..5), &[]);
    assert_eq!(acked, (3..5).map(|o| (0, o)).collect::<Vec<_>>());
    let (latest, current) = offset_and_epoch(&broker, topic, -1);
    assert_eq!(latest, 5, "LATEST");
    assert!(current > 0, "a restart moved the epoch on: {current}");
    assert_eq!(offset_and_epoch(&broker, topic, -2), (0, 0), "EARLIEST");
    assert_eq!(offset_and_epoch(&broker, topic, 2000), (1, 0), "ts 2000");
    assert_eq!(
        offset_and_epoch(&broker, topic, 4000),
        (3, current),
        "ts 4000"
    );
    assert_eq!(
        offset_and_epoch(&broker, topic, -3),
        (4, current),
        "MAX_TIMESTAMP"
    );
}

#[test]
fn log_append_time_topics_are_looked_up_by_their_append_time() {
    // Proves: on a `message.timestamp.type=LogAppendTime` topic every record's timestamp
    // is the broker's append time, for lookups as for consumers (Kafka's
    // `DefaultRecordBatch`): records the producer stamped 20000..25000 (one batch) are
    // found at offset 0 by a lookup at 25000 and at the wall clock before producing, with
    // the append time as their timestamp; MAX_TIMESTAMP answers offset 0 and the append
    // time; a time after the append answers -1. Before the fix the lookups used the
    // producer's stamps: 25000 -> offset 1 (its 50000), the wall clock -> nothing.
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(
        &bootstrap,
        "append-time",
        1,
        &[("message.timestamp.type", "LogAppendTime")],
    );
    let now_ms = || {
        i64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("clock after 1970")
                .as_millis(),
        )
        .expect("milliseconds fit i64")
    };
    let before_ms = now_ms();
    let records = out_of_order_stamps();
    let acked = produce_ok(&bootstrap, "append-time", &records, &[("linger.ms", "200")]);
    assert_eq!(acked, (0..10).map(|o| (0, o)).collect::<Vec<_>>());
    let after_ms = now_ms();

    let (error, append_time, offset) = raw_list_offsets(&broker, "append-time", -3);
    assert_eq!((error, offset), (0, 0), "MAX_TIMESTAMP");
    assert!(
        (before_ms..=after_ms).contains(&append_time),
        "MAX_TIMESTAMP answered {append_time}, not an append time in {before_ms}..={after_ms}"
    );
    assert_eq!(
        raw_list_offsets(&broker, "append-time", 25_000),
        (0, append_time, 0),
        "a producer's stamp is not what is looked up"
    );
    assert_eq!(
        raw_list_offsets(&broker, "append-time", before_ms),
        (0, append_time, 0),
        "the wall clock before producing"
    );
    assert_eq!(
        raw_list_offsets(&broker, "append-time", append_time + 1),
        (0, -1, -1),
        "after the append"
    );
    assert_eq!(
        offset_for_time(&bootstrap, "append-time", before_ms),
        Offset::Offset(0),
        "librdkafka's offsets_for_times"
    );
}
