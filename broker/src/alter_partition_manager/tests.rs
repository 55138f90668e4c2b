//! The AlterPartitionManager against a real three-voter controller quorum in this process,
//! through a `ControllerClient` on a voter that does not lead (so every change crosses the
//! controller RPC). Each test says what it proves.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use logbook_controller::quorum::{
    BrokerHeartbeatRequest, BrokerRegistrationRequest, Clock, CreatableTopic, ManualClock,
    QuorumConfig, QuorumController,
};
use logbook_controller::{ControllerClientConfig, ControllerConfig, ControllerNode, RaftTimings};
use logbook_replication::{IsrMember, TopicPartition};
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::*;

const WAIT: Duration = Duration::from_secs(20);

struct Quorum {
    nodes: BTreeMap<u64, Arc<QuorumController>>,
    voters: BTreeMap<u64, ControllerNode>,
    _dirs: Vec<TempDir>,
}

async fn start_quorum() -> Quorum {
    let dirs: Vec<TempDir> = (0..3).map(|_| TempDir::new().expect("dir")).collect();
    let mut listeners = BTreeMap::new();
    let mut voters = BTreeMap::new();
    for id in 1..=3 {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        voters.insert(id, ControllerNode::new("127.0.0.1", port));
        listeners.insert(id, listener);
    }
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::default());
    let mut starts = Vec::new();
    for (id, dir) in (1..=3).zip(&dirs) {
        let mut config = ControllerConfig::new(id, voters.clone(), dir.path().to_path_buf());
        config.timings = RaftTimings {
            election_timeout_min_ms: 400,
            election_timeout_max_ms: 800,
            heartbeat_interval_ms: 100,
            ..RaftTimings::default()
        };
        let listener = listeners.remove(&id).expect("listener");
        let quorum_config = QuorumConfig {
            session_check_interval_ms: 3_600_000,
            ..QuorumConfig::default()
        };
        let clock = Arc::clone(&clock);
        starts.push(async move {
            let qc = QuorumController::start(config, Some(listener), quorum_config, clock, None)
                .await
                .expect("start");
            (id, qc)
        });
    }
    let nodes = futures::future::join_all(starts)
        .await
        .into_iter()
        .collect();
    Quorum {
        nodes,
        voters,
        _dirs: dirs,
    }
}

impl Quorum {
    /// The voter all nodes agree leads.
    async fn leader(&self) -> u64 {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let leaders: Vec<Option<u64>> =
                self.nodes.values().map(|n| n.raft().leader()).collect();
            if let Some(Some(leader)) = leaders.first() {
                if leaders.iter().all(|l| *l == Some(*leader)) {
                    return *leader;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no leader: {leaders:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn shutdown(self) {
        for node in self.nodes.values() {
            node.shutdown().await.expect("shutdown");
        }
    }
}

/// A proposal for partition `partition` of `topic_id` ("t") by `leader_id`.
fn proposal(
    topic_id: Uuid,
    partition: i32,
    leader_id: i32,
    partition_epoch: i32,
    isr: &[(i32, i64)],
) -> AlterPartitionRequest {
    AlterPartitionRequest {
        topic_partition: TopicPartition {
            topic: "t".to_string(),
            partition,
        },
        topic_id,
        leader_id,
        leader_epoch: LeaderEpoch(0),
        partition_epoch,
        new_isr: isr
            .iter()
            .map(|(broker_id, broker_epoch)| IsrMember {
                broker_id: *broker_id,
                broker_epoch: *broker_epoch,
            })
            .collect(),
    }
}

type Answer = oneshot::Receiver<Result<AlterPartitionCommitted, AlterPartitionError>>;

fn submit(manager: &AlterPartitionManager, request: AlterPartitionRequest) -> Answer {
    let (tx, rx) = oneshot::channel();
    manager.submit(
        request,
        Box::new(move |result| {
            let _ = tx.send(result);
        }),
    );
    rx
}

async fn answer(rx: Answer) -> Result<AlterPartitionCommitted, AlterPartitionError> {
    tokio::time::timeout(WAIT, rx)
        .await
        .expect("answered in time")
        .expect("answered")
}

// Two ISR shrinks proposed together by one leader go to the controller in one
// AlterPartition (one metadata batch) and each gets its committed ISR and new partition
// epoch back; a change from a stale partition epoch is refused INVALID_UPDATE_VERSION, a
// follower with a wrong broker epoch INELIGIBLE_REPLICA, a change from a broker that does
// not lead NEW_LEADER_ELECTED. While the broker epoch is stale (a re-registration in
// progress), changes are retried rather than failed, and land once it is current.
#[tokio::test(flavor = "current_thread")]
async fn changes_are_batched_committed_and_refused_as_the_controller_decides() {
    let quorum = start_quorum().await;
    let leader = quorum.leader().await;
    let follower = *quorum
        .nodes
        .keys()
        .find(|id| **id != leader)
        .expect("follower");
    let client = Arc::new(ControllerClient::new(
        Some(Arc::clone(&quorum.nodes[&follower])),
        quorum.voters.clone(),
        ControllerClientConfig::new(follower),
    ));
    let mut epochs = BTreeMap::new();
    for id in 1..=3 {
        let reply = client
            .register_broker(BrokerRegistrationRequest {
                broker_id: id,
                incarnation_id: Uuid::new_v4(),
                endpoints: Vec::new(),
                rack: None,
                partitions_max: None,
            })
            .await
            .expect("register");
        let beat = client
            .broker_heartbeat(BrokerHeartbeatRequest {
                broker_id: id,
                broker_epoch: reply.broker_epoch,
                current_metadata_offset: reply.registration_offset,
                want_fence: false,
                want_shut_down: false,
            })
            .await
            .expect("heartbeat");
        assert!(!beat.is_fenced);
        epochs.insert(id, reply.broker_epoch);
    }
    let created = client
        .create_topics(
            vec![CreatableTopic {
                name: "t".to_string(),
                num_partitions: 4,
                replication_factor: 3,
                cap_replication_factor: false,
                configs: Vec::new(),
                assignment: Vec::new(),
            }],
            false,
        )
        .await
        .expect("create");
    let topic_id = created[0].1.as_ref().expect("created").topic_id;
    let image = quorum.nodes[&leader].image();
    let partitions = &image.topic("t").expect("topic").partitions;
    // Round-robin placement: partitions 0 and 3 have the same leader.
    let (p0, p3) = (&partitions[0], &partitions[3]);
    assert_eq!(p0.leader, p3.leader);
    let us = p0.leader;
    let shrink = |p: &PartitionRegistration| -> Vec<(i32, i64)> {
        p.isr[..2].iter().map(|b| (*b, epochs[b])).collect()
    };

    let broker_epoch = Arc::new(AtomicI64::new(epochs[&us]));
    let supplier = Arc::clone(&broker_epoch);
    let shutdown = CancellationToken::new();
    let tasks = TaskTracker::new();
    let manager = AlterPartitionManager::start(
        Arc::clone(&client),
        Arc::new(move || supplier.load(Ordering::SeqCst)),
        AlterPartitionManagerConfig::new(us),
        shutdown.clone(),
        &tasks,
    );
    let offset_before = quorum.nodes[&leader].image().offset();
    // Both submitted before the (same-thread) task runs: one request.
    let a0 = submit(&manager, proposal(topic_id, 0, us, 0, &shrink(p0)));
    let a3 = submit(&manager, proposal(topic_id, 3, us, 0, &shrink(p3)));
    let (r0, r3) = (answer(a0).await, answer(a3).await);
    let isr0: Vec<i32> = shrink(p0).iter().map(|(b, _)| *b).collect();
    let isr3: Vec<i32> = shrink(p3).iter().map(|(b, _)| *b).collect();
    assert_eq!(
        r0,
        Ok(AlterPartitionCommitted {
            isr: isr0.clone(),
            leader_epoch: LeaderEpoch(0),
            partition_epoch: 1
        })
    );
    assert_eq!(
        r3,
        Ok(AlterPartitionCommitted {
            isr: isr3,
            leader_epoch: LeaderEpoch(0),
            partition_epoch: 1
        })
    );
    let image = quorum.nodes[&leader].image();
    assert_eq!(image.offset(), offset_before + 1, "one batch for both");
    assert_eq!(
        image.partition(&topic_id, 0).map(|p| p.isr.clone()),
        Some(isr0)
    );

    // Stale partition epoch: computed from epoch 0, the partition is at 1 now.
    let stale = submit(&manager, proposal(topic_id, 0, us, 0, &shrink(p0)));
    assert_eq!(
        answer(stale).await,
        Err(AlterPartitionError::InvalidUpdateVersion)
    );
    // Expanding with a broker epoch the follower does not have.
    let mut wrong: Vec<(i32, i64)> = shrink(p0);
    let third = p0.isr[2];
    wrong.push((third, epochs[&third] + 100));
    let ineligible = submit(&manager, proposal(topic_id, 0, us, 1, &wrong));
    assert_eq!(
        answer(ineligible).await,
        Err(AlterPartitionError::IneligibleReplica)
    );
    // Partition 1 is led by another broker.
    let p1 = &partitions[1];
    assert_ne!(p1.leader, us);
    let not_leader = submit(&manager, proposal(topic_id, 1, us, 0, &shrink(p1)));
    assert_eq!(
        answer(not_leader).await,
        Err(AlterPartitionError::NewLeaderElected)
    );

    // A stale broker epoch is a request-level error: retried, not failed.
    broker_epoch.store(epochs[&us] - 1, Ordering::SeqCst);
    let mut expand = shrink(p0);
    expand.push((third, epochs[&third]));
    let mut retried = submit(&manager, proposal(topic_id, 0, us, 1, &expand));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        retried.try_recv().is_err(),
        "answered with a stale broker epoch"
    );
    broker_epoch.store(epochs[&us], Ordering::SeqCst);
    let expanded = answer(retried)
        .await
        .expect("committed after the epoch is current");
    assert_eq!((expanded.isr.len(), expanded.partition_epoch), (3, 2));

    shutdown.cancel();
    tasks.close();
    tasks.wait().await;
    drop(manager);
    client.shutdown().await;
    drop(client);
    quorum.shutdown().await;
}
