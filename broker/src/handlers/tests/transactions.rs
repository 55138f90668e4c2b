//! The read side of transactions through the handlers: Fetch read_committed stops at the
//! last stable offset and lists aborted transactions, ListOffsets read_committed answers
//! the LSO, DescribeProducers shows the open transaction. The data is appended straight
//! to the partition (clients cannot write markers; the coordinator part writes them with
//! `Partition::write_txn_marker`, as here).

use std::time::Duration;

use kafka_protocol::messages::fetch_response::AbortedTransaction;
use logbook_replication::{Offset, TopicPartition, TxnResult};

use super::*;

const PRODUCER: i64 = 1000;

/// `count` records of `PRODUCER`'s transaction at epoch 0 from `sequence`.
fn txn_batch(count: i64, sequence: i32) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: PRODUCER,
            producer_epoch: 0,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: sequence + i32::try_from(i).expect("small"),
            timestamp: 1000 + i,
            key: None,
            value: Some(Bytes::from(format!("t{i}"))),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("encode batch");
    buf.freeze()
}

fn fetch_request(isolation_level: i8) -> RequestKind {
    RequestKind::Fetch(
        FetchRequest::default()
            .with_max_bytes(1 << 20)
            .with_max_wait_ms(0)
            .with_isolation_level(isolation_level)
            .with_topics(vec![FetchTopic::default()
                .with_topic(name("t"))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(1 << 20)])]),
    )
}

async fn call(
    broker: &Arc<Broker>,
    key: ApiKey,
    version: i16,
    body: RequestKind,
) -> super::super::Response {
    let ctx = super::super::RequestContext::new(
        Arc::clone(broker),
        "127.0.0.1:1".parse().expect("address"),
        crate::listeners::ListenerName::new("PLAINTEXT"),
        key,
        version,
        1,
        None,
    );
    super::super::dispatch(&ctx, body)
        .await
        .expect("a response")
}

/// (high watermark, last stable offset, aborted transactions, record bytes) of the
/// fetch of partition 0 from offset 0.
async fn fetch(
    broker: &Arc<Broker>,
    isolation_level: i8,
) -> (i64, i64, Option<Vec<AbortedTransaction>>, usize) {
    let response = call(broker, ApiKey::Fetch, 12, fetch_request(isolation_level)).await;
    let ResponseKind::Fetch(body) = response.body else {
        panic!("not a fetch response")
    };
    let p = &body.responses[0].partitions[0];
    assert_eq!(p.error_code, 0);
    let bytes = p.records.as_ref().map_or(0, Bytes::len);
    (
        p.high_watermark,
        p.last_stable_offset,
        p.aborted_transactions.clone(),
        bytes,
    )
}

async fn latest(broker: &Arc<Broker>, isolation_level: i8) -> i64 {
    let body = RequestKind::ListOffsets(
        ListOffsetsRequest::default()
            // A consumer (-1); replica ids (>= 0) get the log end.
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(isolation_level)
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1)])]),
    );
    let ResponseKind::ListOffsets(body) = call(broker, ApiKey::ListOffsets, 5, body).await.body
    else {
        panic!("not a ListOffsets response")
    };
    body.topics[0].partitions[0].offset
}

async fn producers(broker: &Arc<Broker>) -> Vec<describe_producers_response::ProducerState> {
    let body = RequestKind::DescribeProducers(DescribeProducersRequest::default().with_topics(
        vec![describe_producers_request::TopicRequest::default()
            .with_name(name("t"))
            .with_partition_indexes(vec![0])],
    ));
    let ResponseKind::DescribeProducers(body) =
        call(broker, ApiKey::DescribeProducers, 0, body).await.body
    else {
        panic!("not a DescribeProducers response")
    };
    let p = &body.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.active_producers.clone()
}

// An open transaction holds read_committed fetches and ListOffsets at its first offset
// while read_uncommitted goes to the high watermark; after the abort marker is durable
// the LSO moves to the high watermark and the fetch lists the aborted transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_stops_at_the_lso_and_lists_aborts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = broker(dir.path());
    broker.topics.get_or_create("t", true, 1, 1).expect("topic");
    let partition = broker
        .replicas
        .get_partition_or_error(
            &TopicPartition {
                topic: "t".into(),
                partition: 0,
            },
            -1,
        )
        .expect("partition");
    let timeout = Duration::from_secs(5);
    let plain = batch(2);
    partition.append(&plain).expect("append"); // 0..2
    partition.append(&txn_batch(3, 0)).expect("append"); // 2..5
    partition
        .wait_durable(Offset(5), timeout)
        .await
        .expect("durable");

    assert_eq!(fetch(&broker, 1).await, (5, 2, Some(vec![]), plain.len()));
    let (hw, lso, aborted, _) = fetch(&broker, 0).await;
    assert_eq!((hw, lso, aborted), (5, 2, None));
    assert_eq!((latest(&broker, 1).await, latest(&broker, 0).await), (2, 5));
    let open = producers(&broker).await;
    assert_eq!(open.len(), 1);
    assert_eq!(
        (
            open[0].producer_id.0,
            open[0].producer_epoch,
            open[0].last_sequence,
            open[0].current_txn_start_offset
        ),
        (PRODUCER, 0, 2, 2)
    );

    let marker = partition
        .write_txn_marker(PRODUCER, 0, 3, TxnResult::Abort)
        .expect("marker");
    assert_eq!(marker, Offset(5));
    partition
        .wait_durable(Offset(6), timeout)
        .await
        .expect("durable");
    let (hw, lso, aborted, _) = fetch(&broker, 1).await;
    assert_eq!((hw, lso), (6, 6));
    assert_eq!(
        aborted,
        Some(vec![AbortedTransaction::default()
            .with_producer_id(ProducerId(PRODUCER))
            .with_first_offset(2)])
    );
    assert_eq!(latest(&broker, 1).await, 6);
    let done = producers(&broker).await;
    assert_eq!(
        (done[0].coordinator_epoch, done[0].current_txn_start_offset),
        (3, -1)
    );
}

// A read_committed long poll waiting for min_bytes while a transaction is open wakes when
// the commit marker becomes durable (the LSO moves with the high watermark), well before
// its max wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_long_poll_wakes_on_the_marker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = broker(dir.path());
    broker.topics.get_or_create("t", true, 1, 1).expect("topic");
    let partition = broker
        .replicas
        .get_partition_or_error(
            &TopicPartition {
                topic: "t".into(),
                partition: 0,
            },
            -1,
        )
        .expect("partition");
    partition.append(&txn_batch(2, 0)).expect("append"); // 0..2
    partition
        .wait_durable(Offset(2), Duration::from_secs(5))
        .await
        .expect("durable");
    let RequestKind::Fetch(request) = fetch_request(1) else {
        unreachable!("a fetch request")
    };
    let request = RequestKind::Fetch(request.with_min_bytes(1).with_max_wait_ms(10_000));
    let started = std::time::Instant::now();
    let waiting = tokio::spawn({
        let broker = Arc::clone(&broker);
        async move { call(&broker, ApiKey::Fetch, 12, request).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "nothing is stable yet");
    partition
        .write_txn_marker(PRODUCER, 0, 0, TxnResult::Commit)
        .expect("marker");
    let response = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("woken before the max wait")
        .expect("task");
    assert!(started.elapsed() < Duration::from_secs(5));
    let ResponseKind::Fetch(body) = response.body else {
        panic!("not a fetch response")
    };
    let p = &body.responses[0].partitions[0];
    assert_eq!((p.high_watermark, p.last_stable_offset), (3, 3));
    assert!(p.records.as_ref().is_some_and(|r| !r.is_empty()));
}
