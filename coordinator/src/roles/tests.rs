//! Leadership changes moving coordinator shards: a follower transition answers parked and
//! in-flight requests NOT_COORDINATOR, a leader transition loads in the background, and a
//! reload in a newer leader epoch fences the markers of the old one.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use logbook_client::{BrokerEndpoint, InterBrokerClient, InterBrokerConfig};
use logbook_replication::TopicPartition;

use super::{CoordinatorRoles, PartitionRole};
use crate::group::{CommitPartition, GroupConfig, GroupCoordinator, GroupError, JoinRequest};
use crate::test_host::TestHost;
use crate::transaction::{
    PartitionLeaders, TransactionConfig, TransactionCoordinator, TransactionResult, TxnError,
    TRANSACTION_STATE_TOPIC_NAME,
};
use crate::GROUP_METADATA_TOPIC_NAME;

struct Setup {
    topics: Arc<TestHost>,
    groups: Arc<GroupCoordinator>,
    txn: Arc<TransactionCoordinator>,
    roles: Arc<CoordinatorRoles>,
}

fn open(path: &std::path::Path, initial_rebalance_delay_ms: i32) -> Setup {
    let topics = TestHost::open(path, logbook_replication::FlushPolicy::Os);
    let producer_ids = crate::producer_id_manager::RpcProducerIdManager::for_tests();
    let groups = GroupCoordinator::load(
        &topics.host(),
        GroupConfig {
            offsets_topic_num_partitions: 2,
            initial_rebalance_delay_ms,
            ..GroupConfig::default()
        },
    )
    .expect("groups");
    let txn = TransactionCoordinator::load(
        &topics.host(),
        groups.clone(),
        producer_ids,
        TransactionConfig {
            state_log_num_partitions: 2,
            transaction_version: 1,
            write_timeout_ms: 60_000,
            ..TransactionConfig::default()
        },
    )
    .expect("transactions");
    topics.create_topic("a", 2);
    let roles = CoordinatorRoles::new(Arc::clone(&groups), Arc::clone(&txn));
    Setup {
        topics,
        groups,
        txn,
        roles,
    }
}

fn role(topic: &str, partition: i32, leader: bool, leader_epoch: i32) -> PartitionRole {
    PartitionRole {
        topic_partition: TopicPartition {
            topic: topic.to_string(),
            partition,
        },
        leader,
        leader_epoch,
    }
}

async fn settle(loads: Vec<tokio::task::JoinHandle<()>>) {
    for load in loads {
        tokio::time::timeout(Duration::from_secs(30), load)
            .await
            .expect("load in time")
            .expect("load task");
    }
}

fn join(member_id: &str) -> JoinRequest {
    JoinRequest {
        group_id: "g".into(),
        member_id: member_id.into(),
        group_instance_id: None,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        rebalance_timeout_ms: 10_000,
        session_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"m"))],
        require_known_member_id: true,
        supports_skip_assignment: true,
    }
}

// A follower transition of the group's __consumer_offsets partition answers a JoinGroup
// parked in the join phase with NOT_COORDINATOR (so the member finds the new coordinator)
// and later requests too; a leader transition loads the partition again in the background
// (COORDINATOR_LOAD_IN_PROGRESS is the runtime's answer meanwhile, see its tests) and the
// committed offsets are back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_transition_fails_parked_join_and_leader_transition_reloads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open(dir.path(), 60_000);
    let index = s.groups.partition_for("g");
    let commit = CommitPartition {
        topic: "a".into(),
        partition: 1,
        offset: 42,
        leader_epoch: 0,
        metadata: Some("m".into()),
    };
    let r = s.groups.commit_offsets("g", -1, "", None, &[commit], 8);
    assert_eq!(r.errors, vec![None]);
    if let Some((partition, end)) = r.durable {
        partition
            .wait_committed(end, Duration::from_secs(10))
            .await
            .expect("durable");
    }
    let first = s.groups.join_group(join("")).await.expect("first join");
    assert_eq!(first.error, Some(GroupError::MemberIdRequired));
    // Parked: the group waits out the initial rebalance delay (60 s).
    let parked = s.groups.join_group(join(&first.member_id));

    // Already loaded at start-up: a leader change in a new epoch starts no second load.
    assert!(s
        .roles
        .on_partition_changes(&[role(GROUP_METADATA_TOPIC_NAME, index, true, 1)])
        .is_empty());
    let loads = s
        .roles
        .on_partition_changes(&[role(GROUP_METADATA_TOPIC_NAME, index, false, 2)]);
    assert!(loads.is_empty());
    let answer = tokio::time::timeout(Duration::from_secs(5), parked)
        .await
        .expect("answered at once")
        .expect("sender kept");
    assert_eq!(answer.error, Some(GroupError::NotCoordinator));
    assert_eq!(
        s.groups.fetch_offsets("g", None).map(|_| ()),
        Err(GroupError::NotCoordinator)
    );

    let loads = s
        .roles
        .on_partition_changes(&[role(GROUP_METADATA_TOPIC_NAME, index, true, 3)]);
    assert_eq!(loads.len(), 1);
    settle(loads).await;
    let fetched = s.groups.fetch_offsets("g", None).expect("loaded");
    let offsets: Vec<(String, i32, i64)> = fetched
        .into_iter()
        .flat_map(|(topic, partitions)| {
            partitions
                .into_iter()
                .filter_map(move |(p, o)| o.map(|o| (topic.clone(), p, o.offset)))
        })
        .collect();
    assert_eq!(offsets, vec![("a".to_string(), 1, 42)]);
}

/// Partitions of topic `a` led by an unreachable broker; everything else led here.
struct Unreachable;

impl PartitionLeaders for Unreachable {
    fn leader(&self, topic: &str, _partition: i32) -> Option<BrokerEndpoint> {
        Some(BrokerEndpoint {
            id: if topic == "a" { 2 } else { 1 },
            host: "127.0.0.1".into(),
            // Nothing listens on port 1: every connect is refused.
            port: 1,
        })
    }

    fn local_broker_id(&self) -> i32 {
        1
    }
}

// An EndTxn whose markers cannot reach the partition's leader keeps retrying (the
// transaction timeout is 60 s); a follower transition of its __transaction_state partition
// answers it NOT_COORDINATOR at once, and later requests for the id too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_transition_fails_in_flight_end_txn() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open(dir.path(), 0);
    s.txn.connect_cluster(
        Arc::new(Unreachable),
        InterBrokerClient::new(InterBrokerConfig {
            request_timeout: Duration::from_millis(500),
            ..InterBrokerConfig::default()
        }),
    );
    let (pid, epoch) = s
        .txn
        .init_producer_id("t", 60_000, None)
        .await
        .expect("init");
    s.txn
        .add_partitions("t", pid, epoch, &[("a".into(), 0)], 0)
        .await
        .expect("add");
    let txn = Arc::clone(&s.txn);
    let end = tokio::spawn(async move {
        txn.end_transaction("t", pid, epoch, TransactionResult::Commit, 0)
            .await
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!end.is_finished(), "EndTxn finished without its marker");
    let index = s.txn.partition_for("t");
    let loads =
        s.roles
            .on_partition_changes(&[role(TRANSACTION_STATE_TOPIC_NAME, index, false, 4)]);
    assert!(loads.is_empty());
    let answer = tokio::time::timeout(Duration::from_secs(5), end)
        .await
        .expect("answered at once")
        .expect("task");
    assert_eq!(answer, Err(TxnError::NotCoordinator));
    assert_eq!(
        s.txn.describe("t").map(|m| m.state),
        Err(TxnError::NotCoordinator)
    );
}

/// The coordinator epoch the partition's producer state holds for `pid` (its last marker's).
fn marker_coordinator_epoch(s: &Setup, topic: &str, index: i32, pid: i64) -> i32 {
    s.topics
        .replicas
        .partition(topic, index)
        .expect("partition")
        .active_producers()
        .expect("producers")
        .into_iter()
        .find(|p| p.producer_id == pid)
        .map_or(-1, |p| p.coordinator_epoch)
}

// The transaction coordinator's epoch is the leader epoch of its partition: leadership in
// epoch 5 writes markers with coordinator epoch 5; the same change again starts no second
// load; after a move to epoch 6 the markers carry 6, and a marker still carrying 5 (a
// deposed coordinator's) is refused with TRANSACTION_COORDINATOR_FENCED.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_in_newer_epoch_fences_old_markers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open(dir.path(), 0);
    tokio::task::block_in_place(|| s.txn.state_topic().map(|_| ())).expect("state topic");
    let index = s.txn.partition_for("t");
    let changes = [role(TRANSACTION_STATE_TOPIC_NAME, index, true, 5)];
    let loads = s.roles.on_partition_changes(&changes);
    assert_eq!(loads.len(), 1, "epoch 0 from start-up, now 5: one reload");
    settle(loads).await;
    assert!(
        s.roles.on_partition_changes(&changes).is_empty(),
        "same epoch: no second load"
    );
    assert_eq!(s.txn.coordinator_epoch(index), Some(5));

    let commit = |s: &Setup| {
        let txn = Arc::clone(&s.txn);
        async move {
            let (pid, epoch) = txn.init_producer_id("t", 60_000, None).await.expect("init");
            txn.add_partitions("t", pid, epoch, &[("a".into(), 0)], 0)
                .await
                .expect("add");
            txn.end_transaction("t", pid, epoch, TransactionResult::Commit, 0)
                .await
                .expect("commit");
            (pid, epoch)
        }
    };
    let (pid, _) = commit(&s).await;
    assert_eq!(marker_coordinator_epoch(&s, "a", 0, pid), 5);

    let loads = s
        .roles
        .on_partition_changes(&[role(TRANSACTION_STATE_TOPIC_NAME, index, true, 6)]);
    settle(loads).await;
    assert_eq!(s.txn.coordinator_epoch(index), Some(6));
    let (pid, epoch) = commit(&s).await;
    assert_eq!(marker_coordinator_epoch(&s, "a", 0, pid), 6);

    let partition = s.topics.replicas.partition("a", 0).expect("partition");
    let stale = partition.write_txn_marker(pid, epoch, 5, logbook_replication::TxnResult::Abort);
    assert!(
        matches!(
            stale,
            Err(logbook_replication::Error::Storage(
                logbook_storage::Error::TransactionCoordinatorFenced { .. }
            ))
        ),
        "a marker of an older coordinator epoch is fenced: {stale:?}"
    );
}

// Deleting an internal partition's replica unloads its shard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_partition_unloads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open(dir.path(), 0);
    tokio::task::block_in_place(|| s.txn.state_topic().map(|_| ())).expect("state topic");
    let index = s.txn.partition_for("t");
    s.txn
        .init_producer_id("t", 60_000, None)
        .await
        .expect("init");
    s.roles.on_partitions_deleted(&[TopicPartition {
        topic: TRANSACTION_STATE_TOPIC_NAME.to_string(),
        partition: index,
    }]);
    assert_eq!(
        s.txn.describe("t").map(|m| m.state),
        Err(TxnError::NotCoordinator)
    );
    assert_eq!(s.txn.coordinator_epoch(index), None);
}
