//! The handlers' replication paths against an in-process broker whose partition is made
//! leader or follower by hand: OffsetForLeaderEpoch answers, a follower's Fetch (records up
//! to the log end, the diverging epoch, the high watermark it moves), acks=all under
//! min.insync.replicas, NOT_LEADER_OR_FOLLOWER with the current leader (KIP-951), and
//! ListOffsets' OFFSET_NOT_AVAILABLE (KIP-207).

use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::ResponseError;
use std::time::Duration;

use logbook_replication::{LeaderEpoch, PartitionState, TopicPartition};

use super::*;

async fn call(broker: &Arc<Broker>, key: ApiKey, version: i16, body: RequestKind) -> ResponseKind {
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
        .body
}

fn state(replicas: &[i32], isr: &[i32], leader: i32, epoch: i32) -> PartitionState {
    PartitionState {
        topic_partition: TopicPartition {
            topic: "t".into(),
            partition: 0,
        },
        topic_id: uuid::Uuid::nil(),
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
        leader,
        leader_epoch: LeaderEpoch(epoch),
        partition_epoch: epoch,
    }
}

/// (error, epoch, end offset) of OffsetForLeaderEpoch v4 for `partition` of "t".
async fn epoch_end(
    broker: &Arc<Broker>,
    partition: i32,
    current: i32,
    epoch: i32,
) -> (i16, i32, i64) {
    let body = RequestKind::OffsetForLeaderEpoch(
        OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![
                offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                    .with_topic(name("t"))
                    .with_partitions(vec![
                        offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                            .with_partition(partition)
                            .with_current_leader_epoch(current)
                            .with_leader_epoch(epoch),
                    ]),
            ]),
    );
    let ResponseKind::OffsetForLeaderEpoch(r) =
        call(broker, ApiKey::OffsetForLeaderEpoch, 4, body).await
    else {
        panic!("not an OffsetForLeaderEpoch response")
    };
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.leader_epoch, p.end_offset)
}

/// A follower's Fetch v15 of "t"-0 from `replica_id` at `offset` after `last_epoch`.
async fn follower_fetch(
    broker: &Arc<Broker>,
    replica_id: i32,
    offset: i64,
    last_epoch: i32,
) -> PartitionData {
    follower_fetch_of(broker, "t", 0, replica_id, offset, last_epoch, 0).await
}

/// A follower's Fetch v15 of `topic`-`partition` from `replica_id` at `offset` after
/// `last_epoch`, reporting its log start `log_start`.
async fn follower_fetch_of(
    broker: &Arc<Broker>,
    topic: &str,
    partition: i32,
    replica_id: i32,
    offset: i64,
    last_epoch: i32,
    log_start: i64,
) -> PartitionData {
    let body = RequestKind::Fetch(
        FetchRequest::default()
            .with_replica_state(
                fetch_request::ReplicaState::default()
                    .with_replica_id(BrokerId(replica_id))
                    .with_replica_epoch(7),
            )
            .with_max_bytes(1 << 20)
            .with_max_wait_ms(0)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(broker.topics.get(topic).expect("topic").id)
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_log_start_offset(log_start)
                    .with_last_fetched_epoch(last_epoch)
                    .with_current_leader_epoch(-1)
                    .with_partition_max_bytes(1 << 20)])]),
    );
    let ResponseKind::Fetch(r) = call(broker, ApiKey::Fetch, 15, body).await else {
        panic!("not a Fetch response")
    };
    r.responses[0].partitions[0].clone()
}

/// Produce of `count` records to "t"-0 with `acks` at `version`: (error, base offset,
/// current leader id and epoch).
async fn produce(broker: &Arc<Broker>, acks: i16, version: i16) -> (i16, i64, (i32, i32)) {
    let body = RequestKind::Produce(
        ProduceRequest::default()
            .with_acks(acks)
            .with_timeout_ms(300)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name("t"))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch(1)))])]),
    );
    let ResponseKind::Produce(r) = call(broker, ApiKey::Produce, version, body).await else {
        panic!("not a Produce response")
    };
    let p = &r.responses[0].partition_responses[0];
    (
        p.error_code,
        p.base_offset,
        (p.current_leader.leader_id.0, p.current_leader.leader_epoch),
    )
}

// OffsetForLeaderEpoch on a single node: the current epoch ends at the log end, a newer
// one is undefined, a newer current_leader_epoch is UNKNOWN_LEADER_EPOCH (retriable: the
// broker is behind), an older one FENCED_LEADER_EPOCH; once a new epoch starts the old one
// ends where it began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_for_leader_epoch_answers_from_the_epoch_cache() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = broker(dir.path());
    broker.topics.get_or_create("t", true, 1, 1).expect("topic");
    assert_eq!(produce(&broker, -1, 9).await.0, 0);
    assert_eq!(produce(&broker, -1, 9).await.0, 0);
    assert_eq!(epoch_end(&broker, 0, -1, 0).await, (0, 0, 2));
    assert_eq!(epoch_end(&broker, 0, 0, 0).await, (0, 0, 2));
    assert_eq!(epoch_end(&broker, 0, -1, 3).await, (0, -1, -1));
    assert_eq!(
        epoch_end(&broker, 0, 1, 0).await.0,
        ResponseError::UnknownLeaderEpoch.code()
    );
    assert_eq!(
        epoch_end(&broker, 9, -1, 0).await.0,
        ResponseError::UnknownTopicOrPartition.code()
    );

    let partition = broker.replicas.partition("t", 0).expect("partition");
    partition
        .become_leader(&state(&[0], &[0], 0, 2))
        .expect("lead");
    assert_eq!(produce(&broker, -1, 9).await.0, 0);
    assert_eq!(epoch_end(&broker, 0, 2, 0).await, (0, 0, 2));
    assert_eq!(epoch_end(&broker, 0, 2, 1).await, (0, 0, 2));
    assert_eq!(epoch_end(&broker, 0, 2, 2).await, (0, 2, 3));
    assert_eq!(
        epoch_end(&broker, 0, 1, 2).await.0,
        ResponseError::FencedLeaderEpoch.code()
    );
}

// A follower's Fetch reads up to the log end (past the HW), moves the HW with its fetch
// offset, and gets the diverging epoch and no records when its log diverged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_fetch_reads_to_log_end_and_moves_the_high_watermark() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = broker(dir.path());
    broker.topics.get_or_create("t", true, 1, 1).expect("topic");
    assert_eq!(produce(&broker, -1, 9).await.0, 0);
    let partition = broker.replicas.partition("t", 0).expect("partition");
    partition
        .become_leader(&state(&[0, 2], &[0, 2], 0, 1))
        .expect("lead");
    assert_eq!(produce(&broker, 1, 9).await.1, 1);
    assert_eq!(produce(&broker, 1, 9).await.1, 2);
    assert_eq!(
        partition.high_watermark().get(),
        1,
        "follower 2 has not fetched"
    );

    let data = follower_fetch(&broker, 2, 1, 0).await;
    assert_eq!(data.error_code, 0);
    assert_eq!(data.high_watermark, 1);
    assert!(
        data.records.as_ref().is_some_and(|r| !r.is_empty()),
        "records past the HW"
    );
    let data = follower_fetch(&broker, 2, 3, 1).await;
    assert_eq!(data.error_code, 0);
    assert_eq!(
        data.high_watermark, 1,
        "read before this fetch's position counts, as Kafka"
    );
    // The follower has everything; the HW follows once the leader's own fsync is done.
    partition
        .wait_durable(
            logbook_replication::Offset(3),
            std::time::Duration::from_secs(5),
        )
        .await
        .expect("committed");
    assert_eq!(follower_fetch(&broker, 2, 3, 1).await.high_watermark, 3);

    // It claims offset 2 was written in epoch 0, which ended at 1 here.
    let data = follower_fetch(&broker, 2, 3, 0).await;
    assert_eq!(data.error_code, 0);
    assert_eq!(
        (data.diverging_epoch.epoch, data.diverging_epoch.end_offset),
        (0, 1)
    );
    assert!(data.records.as_ref().is_none_or(|r| r.is_empty()));
    // A broker that is not a replica.
    let data = follower_fetch(&broker, 5, 0, -1).await;
    assert_eq!(data.error_code, ResponseError::NotLeaderOrFollower.code());
}

// min.insync.replicas is capped at the replica count (Kafka's `effectiveMinIsr`): with one
// replica and min.insync.replicas=2, acks=all and acks=1 both succeed and the records are
// committed. With two replicas and an ISR of one, acks=all is NOT_ENOUGH_REPLICAS and
// nothing is appended; as a follower, NOT_LEADER_OR_FOLLOWER naming the leader (v10+).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_refusals_name_the_reason_and_the_leader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = broker(dir.path());
    let mut configs = std::collections::BTreeMap::new();
    configs.insert("min.insync.replicas".to_string(), "2".to_string());
    broker
        .topics
        .create(crate::topics::NewTopic {
            name: "t",
            partitions: 1,
            replication_factor: 1,
            config: crate::topic_config::TopicConfig::from_map(&configs).expect("config"),
        })
        .expect("topic");
    let partition = broker.replicas.partition("t", 0).expect("partition");
    assert_eq!(produce(&broker, -1, 9).await.0, 0, "one replica: acks=all");
    assert_eq!(produce(&broker, 1, 9).await.0, 0, "one replica: acks=1");
    partition
        .wait_durable(
            logbook_replication::Offset(2),
            std::time::Duration::from_secs(10),
        )
        .await
        .expect("both committed");
    assert_eq!(partition.high_watermark().get(), 2);

    partition
        .become_leader(&state(&[0, 2], &[0], 0, 3))
        .expect("lead");
    let (error, _, _) = produce(&broker, -1, 9).await;
    assert_eq!(error, ResponseError::NotEnoughReplicas.code());
    assert_eq!(partition.log_end_offset().get(), 2, "nothing appended");
    assert_eq!(produce(&broker, 1, 9).await.0, 0, "acks=1 is not refused");

    assert!(partition.become_follower(&state(&[0, 2], &[0, 2], 2, 4)));
    assert_eq!(
        produce(&broker, 1, 10).await,
        (ResponseError::NotLeaderOrFollower.code(), -1, (2, 4))
    );
    assert_eq!(
        produce(&broker, 1, 9).await.0,
        ResponseError::NotLeaderOrFollower.code()
    );
}

/// ListOffsets v7 LATEST for "t"-0 from `replica_id` (-1: a consumer): (error, offset).
async fn latest_offset(broker: &Arc<Broker>, replica_id: i32) -> (i16, i64) {
    let body = RequestKind::ListOffsets(
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(replica_id))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(-1)])]),
    );
    let ResponseKind::ListOffsets(r) = call(broker, ApiKey::ListOffsets, 7, body).await else {
        panic!("not a ListOffsets response")
    };
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.offset)
}

// ListOffsets LATEST from a follower (replica id >= 0, its out-of-range path) is the
// leader's log end, past the high watermark (Kafka answers replicas without an isolation
// level); a consumer still gets the high watermark. OffsetForLeaderEpoch for the
// undefined epoch -1 answers (-1, -1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_from_a_replica_answers_the_log_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = broker(dir.path());
    broker.topics.get_or_create("t", true, 1, 1).expect("topic");
    assert_eq!(produce(&broker, -1, 9).await.0, 0);
    let partition = broker.replicas.partition("t", 0).expect("partition");
    partition
        .become_leader(&state(&[0, 2], &[0, 2], 0, 1))
        .expect("lead");
    assert_eq!(produce(&broker, 1, 9).await.1, 1);
    assert_eq!(produce(&broker, 1, 9).await.1, 2);
    assert_eq!(partition.high_watermark().get(), 1);
    assert_eq!(
        latest_offset(&broker, -1).await,
        (0, 1),
        "a consumer: the HW"
    );
    assert_eq!(
        latest_offset(&broker, 2).await,
        (0, 3),
        "a replica: the log end"
    );
    assert_eq!(epoch_end(&broker, 0, -1, -1).await, (0, -1, -1));
}

/// A standalone OffsetCommit v8 of "t"-0 at `offset` for group "g": its error code.
async fn commit_offset(broker: &Arc<Broker>, offset: i64) -> i16 {
    let body = RequestKind::OffsetCommit(
        OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(name("t"))
                    .with_partitions(vec![
                        offset_commit_request::OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(offset),
                    ]),
            ]),
    );
    let ResponseKind::OffsetCommit(r) = call(broker, ApiKey::OffsetCommit, 8, body).await else {
        panic!("not an OffsetCommit response")
    };
    r.topics[0].partitions[0].error_code
}

/// Group "g"'s committed offset of "t"-0 by OffsetFetch v7 (-1: none).
async fn fetched_offset(broker: &Arc<Broker>) -> i64 {
    let body = RequestKind::OffsetFetch(
        OffsetFetchRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_topics(Some(vec![
                offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(name("t"))
                    .with_partition_indexes(vec![0]),
            ])),
    );
    let ResponseKind::OffsetFetch(r) = call(broker, ApiKey::OffsetFetch, 7, body).await else {
        panic!("not an OffsetFetch response")
    };
    assert_eq!(r.error_code, 0);
    r.topics[0].partitions[0].committed_offset
}

// OffsetFetch answers only durable commits, as Kafka reads its coordinator state at the
// last committed offset of __consumer_offsets: while a follower in the ISR has not fetched a
// commit's batch, the commit waits, and OffsetFetch still answers the previous offset; once
// the follower has it, both answer the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offset_fetch_answers_only_commits_under_the_high_watermark() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = broker(dir.path());
    broker.topics.get_or_create("t", true, 1, 1).expect("topic");
    assert_eq!(commit_offset(&broker, 5).await, 0);
    assert_eq!(fetched_offset(&broker).await, 5);

    let index = broker.groups.partition_for("g");
    let topic = crate::coordinator::GROUP_METADATA_TOPIC_NAME;
    let partition = broker.replicas.partition(topic, index).expect("partition");
    let mut lead = state(&[0, 2], &[0, 2], 0, 1);
    lead.topic_partition = TopicPartition {
        topic: topic.into(),
        partition: index,
    };
    partition.become_leader(&lead).expect("lead");
    let end = partition.offsets().expect("offsets").log_end_offset.get();
    assert_eq!(
        follower_fetch_of(&broker, topic, index, 2, end, 0, 0)
            .await
            .error_code,
        0
    );

    let committing = tokio::spawn({
        let broker = Arc::clone(&broker);
        async move { commit_offset(&broker, 9).await }
    });
    // The commit's batch is appended but follower 2 has not fetched it.
    for _ in 0..100 {
        if partition.offsets().expect("offsets").log_end_offset.get() > end {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let new_end = partition.offsets().expect("offsets").log_end_offset.get();
    assert!(new_end > end, "the commit was appended");
    assert_eq!(fetched_offset(&broker).await, 5, "not durable yet");
    assert!(!committing.is_finished());

    assert_eq!(
        follower_fetch_of(&broker, topic, index, 2, new_end, 1, 0)
            .await
            .error_code,
        0
    );
    assert_eq!(committing.await.expect("commit"), 0);
    assert_eq!(fetched_offset(&broker).await, 9);
}

/// DeleteRecords of "t"-0 before `offset` with `timeout_ms`: (error, low watermark).
async fn delete_records(broker: &Arc<Broker>, offset: i64, timeout_ms: i32) -> (i16, i64) {
    let body = RequestKind::DeleteRecords(
        DeleteRecordsRequest::default()
            .with_timeout_ms(timeout_ms)
            .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
                .with_name(name("t"))
                .with_partitions(vec![
                    delete_records_request::DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(offset),
                ])]),
    );
    let ResponseKind::DeleteRecords(r) = call(broker, ApiKey::DeleteRecords, 2, body).await else {
        panic!("not a DeleteRecords response")
    };
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

// DeleteRecords answers once every follower in the ISR moved its log start to the new one
// (Kafka's DelayedDeleteRecords and low watermark): REQUEST_TIMED_OUT while follower 2
// still reports 0, success with the low watermark once it reports 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_waits_for_the_followers_log_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = broker(dir.path());
    broker.topics.get_or_create("t", true, 1, 1).expect("topic");
    for expected in 0..3 {
        assert_eq!(produce(&broker, -1, 9).await.1, expected);
    }
    let partition = broker.replicas.partition("t", 0).expect("partition");
    partition
        .become_leader(&state(&[0, 2], &[0, 2], 0, 1))
        .expect("lead");
    assert_eq!(
        follower_fetch_of(&broker, "t", 0, 2, 3, 0, 0)
            .await
            .error_code,
        0
    );
    assert_eq!(
        delete_records(&broker, 2, 300).await,
        (ResponseError::RequestTimedOut.code(), -1)
    );
    assert_eq!(
        partition.offsets().expect("offsets").log_start_offset.get(),
        2
    );

    let deleting = tokio::spawn({
        let broker = Arc::clone(&broker);
        async move { delete_records(&broker, 2, 5_000).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!deleting.is_finished(), "follower 2 still holds offset 0");
    let data = follower_fetch_of(&broker, "t", 0, 2, 3, 0, 2).await;
    assert_eq!((data.error_code, data.log_start_offset), (0, 2));
    assert_eq!(deleting.await.expect("delete"), (0, 2));
}

/// WriteTxnMarkers v1 of an ABORT by producer 77 (epoch 0) for `__consumer_offsets`
/// partition `index`; the partition's error code.
async fn abort_marker_for_offsets(broker: &Arc<Broker>, index: i32) -> i16 {
    let body = RequestKind::WriteTxnMarkers(WriteTxnMarkersRequest::default().with_markers(vec![
        write_txn_markers_request::WritableTxnMarker::default()
            .with_producer_id(ProducerId(77))
            .with_producer_epoch(0)
            .with_transaction_result(false)
            .with_topics(vec![write_txn_markers_request::WritableTxnMarkerTopic::default()
                .with_name(name(crate::coordinator::GROUP_METADATA_TOPIC_NAME))
                .with_partition_indexes(vec![index])]),
    ]));
    let ResponseKind::WriteTxnMarkers(r) = call(broker, ApiKey::WriteTxnMarkers, 1, body).await
    else {
        panic!("not a WriteTxnMarkers response")
    };
    r.markers[0].topics[0].partitions[0].error_code
}

// A transaction marker for a __consumer_offsets partition whose group shard is still
// loading is refused with NOT_LEADER_OR_FOLLOWER (the transaction coordinator retries), as
// Kafka's runtime refuses it, and nothing is appended: the replay reads to the log end it
// saw when it started, so a marker appended meanwhile was never applied and the group's
// transactional offsets stayed pending (OffsetFetch require_stable: UNSTABLE_OFFSET_COMMIT)
// until the next reload. Once the shard is loaded the same marker is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn txn_markers_wait_for_the_group_shard_to_load() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = broker(dir.path());
    broker.topics.get_or_create("t", true, 1, 1).expect("topic");
    assert_eq!(commit_offset(&broker, 5).await, 0);
    let index = broker.groups.partition_for("g");
    let partition = broker
        .replicas
        .partition(crate::coordinator::GROUP_METADATA_TOPIC_NAME, index)
        .expect("partition");
    let end = || partition.offsets().expect("offsets").log_end_offset.get();
    let before = end();
    let ticket = broker.groups.begin_load_partition(index);
    assert_eq!(
        abort_marker_for_offsets(&broker, index).await,
        ResponseError::NotLeaderOrFollower.code()
    );
    assert_eq!(end(), before, "no marker appended while the shard loads");
    broker
        .groups
        .complete_load_partition(ticket)
        .expect("load completes");
    assert_eq!(abort_marker_for_offsets(&broker, index).await, 0);
    assert_eq!(end(), before + 1);
}
