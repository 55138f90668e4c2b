//! QuorumController on real Raft quorums in this process (one voter in a temp dir, or
//! three on 127.0.0.1), with a manual session clock. Each test says what it proves.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use logbook_metadata::{BrokerId, Election, LeaderRecoveryState, MetadataImage, NO_LEADER};
use tempfile::TempDir;
use tokio::net::TcpListener;
use uuid::Uuid;

use super::*;
use crate::{ControllerConfig, ControllerNode, RaftTimings};

const WAIT: Duration = Duration::from_secs(20);

fn timings() -> RaftTimings {
    RaftTimings {
        election_timeout_min_ms: 400,
        election_timeout_max_ms: 800,
        heartbeat_interval_ms: 100,
        ..RaftTimings::default()
    }
}

fn quorum_config() -> QuorumConfig {
    QuorumConfig {
        // The periodic check stays out of the way; tests call check_sessions themselves.
        session_check_interval_ms: 3_600_000,
        ..QuorumConfig::default()
    }
}

async fn start_voters(
    dirs: &BTreeMap<u64, TempDir>,
    ids: &[u64],
    clock: &Arc<ManualClock>,
) -> BTreeMap<u64, Arc<QuorumController>> {
    let mut listeners = BTreeMap::new();
    let mut voters = BTreeMap::new();
    for id in dirs.keys() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        voters.insert(*id, ControllerNode::new("127.0.0.1", port));
        listeners.insert(*id, listener);
    }
    let mut starts = Vec::new();
    for id in ids {
        let mut config = ControllerConfig::new(*id, voters.clone(), dirs[id].path().to_path_buf());
        config.timings = timings();
        let listener = listeners.remove(id).expect("listener");
        let clock: Arc<dyn Clock> = clock.clone();
        starts.push(async move {
            let qc = QuorumController::start(config, Some(listener), quorum_config(), clock, None)
                .await
                .expect("start");
            (*id, qc)
        });
    }
    futures::future::join_all(starts)
        .await
        .into_iter()
        .collect()
}

/// One voter on `dir`, leading.
async fn start_single(dir: &Path, clock: &Arc<ManualClock>) -> Arc<QuorumController> {
    start_single_with(dir, clock, quorum_config()).await
}

/// One voter on `dir` with `quorum` settings, leading.
async fn start_single_with(
    dir: &Path,
    clock: &Arc<ManualClock>,
    quorum: QuorumConfig,
) -> Arc<QuorumController> {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let voters = BTreeMap::from([(1, ControllerNode::new("127.0.0.1", port))]);
    let mut config = ControllerConfig::new(1, voters, dir.to_path_buf());
    config.timings = timings();
    let clock: Arc<dyn Clock> = clock.clone();
    let qc = QuorumController::start(config, Some(listener), quorum, clock, None)
        .await
        .expect("start");
    let leader = qc.raft().wait_for_leader(WAIT).await.expect("leader");
    assert_eq!(leader, Some(1));
    qc
}

fn registration(broker_id: BrokerId, incarnation_id: Uuid) -> BrokerRegistrationRequest {
    BrokerRegistrationRequest {
        broker_id,
        incarnation_id,
        endpoints: Vec::new(),
        rack: None,
        partitions_max: None,
    }
}

fn heartbeat(broker_id: BrokerId, broker_epoch: i64, offset: i64) -> BrokerHeartbeatRequest {
    BrokerHeartbeatRequest {
        broker_id,
        broker_epoch,
        current_metadata_offset: offset,
        want_fence: false,
        want_shut_down: false,
    }
}

/// Registers `id` and unfences it with a caught-up heartbeat; returns its epoch.
async fn register_unfenced(qc: &QuorumController, id: BrokerId) -> i64 {
    let reply = qc
        .register_broker(registration(id, Uuid::new_v4()))
        .await
        .expect("register");
    let beat = qc
        .broker_heartbeat(heartbeat(id, reply.broker_epoch, reply.registration_offset))
        .await
        .expect("heartbeat");
    assert!(!beat.is_fenced, "broker {id} still fenced: {beat:?}");
    reply.broker_epoch
}

fn topic(name: &str, partitions: i32, rf: i16) -> CreatableTopic {
    CreatableTopic {
        name: name.to_string(),
        num_partitions: partitions,
        replication_factor: rf,
        cap_replication_factor: false,
        configs: Vec::new(),
        assignment: Vec::new(),
    }
}

async fn create(qc: &QuorumController, t: CreatableTopic) -> Result<CreatedTopic, QuorumError> {
    let mut results = qc
        .create_topics(vec![t], false)
        .await
        .expect("create_topics");
    results.pop().expect("one result").1
}

/// (replicas, isr, leader, leader_epoch, partition_epoch) of one partition.
type PartitionView = (Vec<i32>, Vec<i32>, i32, i32, i32);

/// The [`PartitionView`] of every partition of `name`.
fn partitions(image: &MetadataImage, name: &str) -> Vec<PartitionView> {
    image
        .topic(name)
        .expect("topic")
        .partitions
        .iter()
        .map(|p| {
            (
                p.replicas.clone(),
                p.isr.clone(),
                p.leader,
                p.leader_epoch,
                p.partition_epoch,
            )
        })
        .collect()
}

// A first leader bootstraps the cluster id and features; a new incarnation while the old
// session is live is refused, the same incarnation may retry (new epoch), and a new one is
// accepted once the old session has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_refuses_a_second_incarnation_while_the_session_lives() {
    let dir = TempDir::new().expect("dir");
    let clock = Arc::new(ManualClock::default());
    let qc = start_single(dir.path(), &clock).await;
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let first = qc
        .register_broker(registration(1, a))
        .await
        .expect("register");
    let image = qc.image();
    assert_eq!(image.cluster_id().map(str::len), Some(22));
    assert_eq!(image.feature_level("metadata.version"), Some(21));
    let broker = image.broker(1).expect("registered");
    assert!(broker.fenced);
    assert_eq!(broker.broker_epoch, first.broker_epoch);
    assert!(first.broker_epoch <= first.registration_offset);

    let duplicate = qc.register_broker(registration(1, b)).await;
    assert!(
        matches!(
            duplicate,
            Err(QuorumError::DuplicateBrokerRegistration { broker_id: 1 })
        ),
        "{duplicate:?}"
    );
    let retry = qc.register_broker(registration(1, a)).await.expect("retry");
    assert!(retry.broker_epoch > first.broker_epoch);

    clock.advance_ms(9000);
    let replaced = qc
        .register_broker(registration(1, b))
        .await
        .expect("after the session");
    assert!(replaced.broker_epoch > retry.broker_epoch);
    assert_eq!(qc.image().broker(1).expect("broker").incarnation_id, b);
    // A heartbeat of the replaced registration is stale.
    let stale = qc
        .broker_heartbeat(heartbeat(1, retry.broker_epoch, i64::MAX))
        .await;
    assert!(
        matches!(stale, Err(QuorumError::StaleBrokerEpoch { .. })),
        "{stale:?}"
    );
    qc.shutdown().await.expect("shutdown");
}

// A new active controller (here: the same voter restarted) gives a whole session to a
// live broker, but none to one in controlled shutdown or fenced (Kafka's hasValidSession):
// their new incarnations register at once instead of waiting out a session timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_failover_a_leaving_broker_may_register_again_at_once() {
    let dir = TempDir::new().expect("dir");
    let clock = Arc::new(ManualClock::default());
    let qc = start_single(dir.path(), &clock).await;
    let leaving = register_unfenced(&qc, 1).await;
    register_unfenced(&qc, 2).await;
    qc.register_broker(registration(3, Uuid::new_v4()))
        .await
        .expect("register 3 (stays fenced)");
    let mut shut_down = heartbeat(1, leaving, qc.image().offset());
    shut_down.want_shut_down = true;
    let reply = qc.broker_heartbeat(shut_down).await.expect("heartbeat");
    assert!(reply.in_controlled_shutdown, "{reply:?}");
    qc.shutdown().await.expect("shutdown");
    drop(qc);

    let qc = start_single(dir.path(), &clock).await;
    let image = qc.image();
    let states: Vec<(bool, bool)> = (1..=3)
        .map(|id| {
            let b = image.broker(id).expect("broker");
            (b.fenced, b.in_controlled_shutdown)
        })
        .collect();
    assert_eq!(states, vec![(false, true), (false, false), (true, false)]);
    for id in [1, 3] {
        let fresh = Uuid::new_v4();
        let reply = qc
            .register_broker(registration(id, fresh))
            .await
            .unwrap_or_else(|e| panic!("broker {id} registers at once: {e:?}"));
        assert!(reply.broker_epoch > leaving);
        assert_eq!(qc.image().broker(id).expect("broker").incarnation_id, fresh);
    }
    let duplicate = qc.register_broker(registration(2, Uuid::new_v4())).await;
    assert!(
        matches!(
            duplicate,
            Err(QuorumError::DuplicateBrokerRegistration { broker_id: 2 })
        ),
        "{duplicate:?}"
    );
    qc.shutdown().await.expect("shutdown");
}

// A registered broker stays fenced until its metadata offset reaches its registration,
// and while it asks to stay fenced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_is_unfenced_once_caught_up() {
    let dir = TempDir::new().expect("dir");
    let clock = Arc::new(ManualClock::default());
    let qc = start_single(dir.path(), &clock).await;
    let reply = qc
        .register_broker(registration(1, Uuid::new_v4()))
        .await
        .expect("register");
    let behind = qc
        .broker_heartbeat(heartbeat(
            1,
            reply.broker_epoch,
            reply.registration_offset - 1,
        ))
        .await
        .expect("heartbeat");
    assert!(!behind.is_caught_up);
    assert!(behind.is_fenced);
    let mut wants_fence = heartbeat(1, reply.broker_epoch, reply.registration_offset);
    wants_fence.want_fence = true;
    let fenced = qc.broker_heartbeat(wants_fence).await.expect("heartbeat");
    assert!(fenced.is_caught_up && fenced.is_fenced, "{fenced:?}");
    let caught_up = qc
        .broker_heartbeat(heartbeat(1, reply.broker_epoch, reply.registration_offset))
        .await
        .expect("heartbeat");
    assert!(
        caught_up.is_caught_up && !caught_up.is_fenced,
        "{caught_up:?}"
    );
    assert!(!qc.image().broker(1).expect("broker").fenced);
    qc.shutdown().await.expect("shutdown");
}

// RF=3 over brokers 1..3 is Kafka's round-robin from start index 0; a session timeout
// fences broker 1, takes it out of every ISR and moves its leadership to the next ISR
// replica (leader epoch bumped only there); partition epochs all bump.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_timeout_fences_and_moves_leadership() {
    let dir = TempDir::new().expect("dir");
    let clock = Arc::new(ManualClock::default());
    let qc = start_single(dir.path(), &clock).await;
    let mut epochs = BTreeMap::new();
    for id in 1..=3 {
        epochs.insert(id, register_unfenced(&qc, id).await);
    }
    let created = create(&qc, topic("t", 3, 3)).await.expect("created");
    assert_eq!((created.num_partitions, created.replication_factor), (3, 3));
    assert_eq!(
        partitions(&qc.image(), "t"),
        vec![
            (vec![1, 2, 3], vec![1, 2, 3], 1, 0, 0),
            (vec![2, 3, 1], vec![2, 3, 1], 2, 0, 0),
            (vec![3, 1, 2], vec![3, 1, 2], 3, 0, 0),
        ]
    );
    clock.advance_ms(5000);
    for id in [2, 3] {
        let offset = qc.image().offset();
        qc.broker_heartbeat(heartbeat(id, epochs[&id], offset))
            .await
            .expect("heartbeat");
    }
    assert_eq!(qc.check_sessions().await.expect("check"), Vec::<i32>::new());
    clock.advance_ms(4000);
    assert_eq!(qc.check_sessions().await.expect("check"), vec![1]);
    let image = qc.image();
    assert!(image.broker(1).expect("broker").fenced);
    assert_eq!(
        partitions(&image, "t"),
        vec![
            (vec![1, 2, 3], vec![2, 3], 2, 1, 1),
            (vec![2, 3, 1], vec![2, 3], 2, 0, 1),
            (vec![3, 1, 2], vec![3, 2], 3, 0, 1),
        ]
    );
    qc.shutdown().await.expect("shutdown");
}

// Fencing the last ISR member keeps it in the ISR with no leader; when it comes back
// (caught up, unfenced) it is elected again with a new leader epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_isr_member_is_kept_with_no_leader_until_it_returns() {
    let dir = TempDir::new().expect("dir");
    let clock = Arc::new(ManualClock::default());
    let qc = start_single(dir.path(), &clock).await;
    let epoch1 = register_unfenced(&qc, 1).await;
    create(&qc, topic("solo", 1, 1)).await.expect("created");
    let epoch2 = register_unfenced(&qc, 2).await;
    clock.advance_ms(5000);
    let offset = qc.image().offset();
    qc.broker_heartbeat(heartbeat(2, epoch2, offset))
        .await
        .expect("heartbeat");
    clock.advance_ms(4000);
    assert_eq!(qc.check_sessions().await.expect("check"), vec![1]);
    assert_eq!(
        partitions(&qc.image(), "solo"),
        vec![(vec![1], vec![1], NO_LEADER, 1, 1)]
    );

    let offset = qc.image().offset();
    let back = qc
        .broker_heartbeat(heartbeat(1, epoch1, offset))
        .await
        .expect("heartbeat");
    assert!(!back.is_fenced);
    assert_eq!(
        partitions(&qc.image(), "solo"),
        vec![(vec![1], vec![1], 1, 2, 2)]
    );
    qc.shutdown().await.expect("shutdown");
}

// With unclean.leader.election.enable=true, a partition whose only ISR member is gone
// gets a leader when an out-of-sync replica comes back (Kafka's handleBrokerUnfenced
// elects every leaderless partition, uncleanly where the topic allows it); without it
// the partition stays leaderless. Turning the setting on later elects through the
// periodic check (Kafka's maybeElectUncleanLeaders).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_returning_out_of_sync_replica_is_elected_uncleanly_where_allowed() {
    let dir = TempDir::new().expect("dir");
    let clock = Arc::new(ManualClock::default());
    let qc = start_single(dir.path(), &clock).await;
    let epoch1 = register_unfenced(&qc, 1).await;
    let epoch2 = register_unfenced(&qc, 2).await;
    let mut unclean = topic("unclean", 1, 2);
    unclean.assignment = vec![vec![1, 2]];
    unclean.configs = vec![(
        "unclean.leader.election.enable".to_string(),
        "true".to_string(),
    )];
    create(&qc, unclean).await.expect("created");
    let mut clean = topic("clean", 1, 2);
    clean.assignment = vec![vec![1, 2]];
    create(&qc, clean).await.expect("created");
    // Broker 2's session ends: it leaves both ISRs.
    clock.advance_ms(5000);
    qc.broker_heartbeat(heartbeat(1, epoch1, qc.image().offset()))
        .await
        .expect("heartbeat");
    clock.advance_ms(4000);
    assert_eq!(qc.check_sessions().await.expect("check"), vec![2]);
    // Then broker 1's: both partitions are leaderless, ISR [1].
    let epoch2 = {
        let reply = qc
            .register_broker(registration(2, Uuid::new_v4()))
            .await
            .expect("register");
        assert!(reply.broker_epoch > epoch2);
        reply
    };
    clock.advance_ms(9_001);
    assert_eq!(qc.check_sessions().await.expect("check"), vec![1]);
    for name in ["unclean", "clean"] {
        assert_eq!(
            partitions(&qc.image(), name),
            vec![(vec![1, 2], vec![1], NO_LEADER, 1, 2)],
            "{name}"
        );
    }
    // Broker 2 (never in sync since) catches up and is unfenced.
    let back = qc
        .broker_heartbeat(heartbeat(2, epoch2.broker_epoch, qc.image().offset()))
        .await
        .expect("heartbeat");
    assert!(!back.is_fenced);
    assert_eq!(
        partitions(&qc.image(), "unclean"),
        vec![(vec![1, 2], vec![2], 2, 2, 3)]
    );
    assert_eq!(
        partitions(&qc.image(), "clean"),
        vec![(vec![1, 2], vec![1], NO_LEADER, 1, 2)]
    );
    assert_eq!(qc.elect_unclean_leaders().await.expect("elect"), 0);
    // Allowing it later: the periodic check elects broker 2.
    let altered = qc
        .incremental_alter_configs(vec![(
            logbook_metadata::ConfigResource::topic("clean"),
            vec![AlterConfigOp::Set(
                "unclean.leader.election.enable".to_string(),
                "true".to_string(),
            )],
        )])
        .await
        .expect("alter");
    assert!(altered[0].1.is_ok(), "{altered:?}");
    assert_eq!(qc.elect_unclean_leaders().await.expect("elect"), 1);
    assert_eq!(
        partitions(&qc.image(), "clean"),
        vec![(vec![1, 2], vec![2], 2, 2, 3)]
    );
    qc.shutdown().await.expect("shutdown");
}

// A replication factor above the active brokers is INVALID_REPLICATION_FACTOR (nothing
// created), unless the request caps it; an existing name is TOPIC_ALREADY_EXISTS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_checks_replication_factor_and_existence() {
    let dir = TempDir::new().expect("dir");
    let clock = Arc::new(ManualClock::default());
    let qc = start_single(dir.path(), &clock).await;
    register_unfenced(&qc, 1).await;
    register_unfenced(&qc, 2).await;
    let too_many = create(&qc, topic("t", 1, 3)).await;
    assert!(
        matches!(
            too_many,
            Err(QuorumError::InvalidReplicationFactor {
                replication_factor: 3,
                usable_brokers: 2
            })
        ),
        "{too_many:?}"
    );
    assert!(qc.image().topic("t").is_none());
    let capped = create(
        &qc,
        CreatableTopic {
            cap_replication_factor: true,
            ..topic("t", 1, 3)
        },
    )
    .await
    .expect("capped");
    assert_eq!(capped.replication_factor, 2);
    let again = create(&qc, topic("t", 1, 1)).await;
    assert!(
        matches!(again, Err(QuorumError::TopicAlreadyExists { .. })),
        "{again:?}"
    );
    let zero = create(&qc, topic("z", 0, 1)).await;
    assert!(
        matches!(
            zero,
            Err(QuorumError::InvalidPartitions { partitions: 0, .. })
        ),
        "{zero:?}"
    );
    qc.shutdown().await.expect("shutdown");
}

// With a registered broker fenced, a replication factor above the active brokers but not
// above the registered ones is still placed (Kafka's StripedReplicaPlacer): every
// partition is led by an active broker and the fenced replica starts outside the ISR; at
// creation and when partitions are added. With every broker fenced, nothing is placed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_broker_still_takes_replicas_outside_the_isr() {
    let dir = TempDir::new().expect("dir");
    let clock = Arc::new(ManualClock::default());
    let qc = start_single(dir.path(), &clock).await;
    register_unfenced(&qc, 1).await;
    register_unfenced(&qc, 2).await;
    qc.register_broker(registration(3, Uuid::new_v4()))
        .await
        .expect("register 3, left fenced");
    assert!(qc.image().broker(3).is_some_and(|b| b.fenced));
    create(&qc, topic("down", 3, 3)).await.expect("placed");
    let grown = qc
        .create_partitions(vec![NewPartitions {
            name: "down".to_string(),
            count: 5,
            assignment: Vec::new(),
        }])
        .await
        .expect("create_partitions");
    assert!(grown[0].1.is_ok(), "{grown:?}");
    let placed = partitions(&qc.image(), "down");
    assert_eq!(placed.len(), 5);
    for (i, (replicas, isr, leader, _, _)) in placed.iter().enumerate() {
        let mut sorted = replicas.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![1, 2, 3], "partition {i}");
        let mut in_sync = isr.clone();
        in_sync.sort_unstable();
        assert_eq!(
            in_sync,
            vec![1, 2],
            "partition {i}: the fenced replica is out"
        );
        assert_eq!(
            *leader, replicas[0],
            "partition {i}: the first replica leads"
        );
        assert_ne!(*leader, 3, "partition {i}");
    }
    let too_many = create(&qc, topic("four", 1, 4)).await;
    assert!(
        matches!(
            too_many,
            Err(QuorumError::InvalidReplicationFactor {
                replication_factor: 4,
                usable_brokers: 3
            })
        ),
        "{too_many:?}"
    );
    qc.shutdown().await.expect("shutdown");
}

// AlterPartition is validated as Kafka does: sender not leader, stale leader epoch, stale
// partition epoch, ineligible replica (wrong broker epoch, in controlled shutdown); a
// valid shrink commits without a leader epoch bump; dropping the leader elects another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alter_partition_validates_epochs_and_eligibility() {
    let dir = TempDir::new().expect("dir");
    let clock = Arc::new(ManualClock::default());
    let qc = start_single(dir.path(), &clock).await;
    let mut epochs = BTreeMap::new();
    for id in 1..=3 {
        epochs.insert(id, register_unfenced(&qc, id).await);
    }
    let id = create(&qc, topic("t", 1, 3))
        .await
        .expect("created")
        .topic_id;
    let request = |broker_id: BrokerId, leader_epoch, partition_epoch, isr: Vec<(i32, i64)>| {
        AlterPartitionRequest {
            broker_id,
            broker_epoch: epochs[&broker_id],
            partitions: vec![AlterPartitionData {
                topic_id: id,
                partition: 0,
                leader_epoch,
                new_isr_with_epochs: isr,
                leader_recovery_state: LeaderRecoveryState::Recovered,
                partition_epoch,
            }],
        }
    };
    let one = |r: Result<AlterPartitionResults, QuorumError>| {
        r.expect("request").pop().expect("one partition").2
    };
    let not_leader = one(qc.alter_partition(request(2, 0, 0, vec![(2, -1)])).await);
    assert!(
        matches!(
            not_leader,
            Err(QuorumError::NotLeaderOrFollower { broker_id: 2 })
        ),
        "{not_leader:?}"
    );
    let fenced_epoch = one(qc.alter_partition(request(1, 1, 0, vec![(1, -1)])).await);
    assert!(
        matches!(
            fenced_epoch,
            Err(QuorumError::FencedLeaderEpoch {
                epoch: 1,
                current: 0
            })
        ),
        "{fenced_epoch:?}"
    );
    let stale = one(qc.alter_partition(request(1, 0, 5, vec![(1, -1)])).await);
    assert!(
        matches!(
            stale,
            Err(QuorumError::InvalidUpdateVersion {
                epoch: 5,
                current: 0
            })
        ),
        "{stale:?}"
    );
    let wrong_epoch = one(qc
        .alter_partition(request(1, 0, 0, vec![(1, -1), (2, epochs[&2] + 100)]))
        .await);
    assert!(
        matches!(
            wrong_epoch,
            Err(QuorumError::IneligibleReplica { replica: 2 })
        ),
        "{wrong_epoch:?}"
    );
    let mut stale_broker = request(1, 0, 0, vec![(1, -1)]);
    stale_broker.broker_epoch -= 1;
    assert!(matches!(
        qc.alter_partition(stale_broker).await,
        Err(QuorumError::StaleBrokerEpoch { broker_id: 1, .. })
    ));

    let shrunk = one(qc
        .alter_partition(request(1, 0, 0, vec![(1, epochs[&1]), (2, epochs[&2])]))
        .await)
    .expect("shrink");
    assert_eq!(
        (
            shrunk.isr.clone(),
            shrunk.leader,
            shrunk.leader_epoch,
            shrunk.partition_epoch
        ),
        (vec![1, 2], 1, 0, 1)
    );

    let mut shut_down = heartbeat(3, epochs[&3], qc.image().offset());
    shut_down.want_shut_down = true;
    qc.broker_heartbeat(shut_down).await.expect("heartbeat");
    let shutting = one(qc
        .alter_partition(request(1, 0, 1, vec![(1, -1), (2, -1), (3, -1)]))
        .await);
    assert!(
        matches!(shutting, Err(QuorumError::IneligibleReplica { replica: 3 })),
        "{shutting:?}"
    );

    let without_leader = one(qc
        .alter_partition(request(1, 0, 1, vec![(2, epochs[&2])]))
        .await);
    assert!(
        matches!(
            without_leader,
            Err(QuorumError::NewLeaderElected { leader: 2 })
        ),
        "{without_leader:?}"
    );
    assert_eq!(
        partitions(&qc.image(), "t"),
        vec![(vec![1, 2, 3], vec![2], 2, 1, 2)]
    );
    qc.shutdown().await.expect("shutdown");
}

// Controlled shutdown moves every leadership off the broker and takes it out of the
// ISRs before it may stop; a preferred election later brings leadership back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controlled_shutdown_moves_leaderships_before_stopping() {
    let dir = TempDir::new().expect("dir");
    let clock = Arc::new(ManualClock::default());
    let qc = start_single(dir.path(), &clock).await;
    let mut epochs = BTreeMap::new();
    for id in 1..=3 {
        epochs.insert(id, register_unfenced(&qc, id).await);
    }
    create(&qc, topic("t", 3, 3)).await.expect("created");
    let before = qc.image().offset();
    for id in [2, 3] {
        qc.broker_heartbeat(heartbeat(id, epochs[&id], before))
            .await
            .expect("heartbeat");
    }
    let mut request = heartbeat(1, epochs[&1], before);
    request.want_shut_down = true;
    let reply = qc.broker_heartbeat(request).await.expect("heartbeat");
    // Kafka's rule: not before the other brokers applied the batch that moved the
    // leaderships (its offset), as their heartbeats report.
    assert!(
        reply.in_controlled_shutdown && !reply.should_shut_down,
        "{reply:?}"
    );
    let moved = qc.image().offset();
    assert!(moved > before);
    let reply = qc.broker_heartbeat(request).await.expect("heartbeat");
    assert!(!reply.should_shut_down, "{reply:?}");
    qc.broker_heartbeat(heartbeat(2, epochs[&2], moved))
        .await
        .expect("heartbeat");
    qc.broker_heartbeat(heartbeat(3, epochs[&3], moved - 1))
        .await
        .expect("heartbeat");
    let reply = qc.broker_heartbeat(request).await.expect("heartbeat");
    assert!(!reply.should_shut_down, "broker 3 is behind: {reply:?}");
    qc.broker_heartbeat(heartbeat(3, epochs[&3], moved))
        .await
        .expect("heartbeat");
    let reply = qc.broker_heartbeat(request).await.expect("heartbeat");
    assert!(
        reply.in_controlled_shutdown && reply.should_shut_down,
        "{reply:?}"
    );
    assert_eq!(
        partitions(&qc.image(), "t"),
        vec![
            (vec![1, 2, 3], vec![2, 3], 2, 1, 1),
            (vec![2, 3, 1], vec![2, 3], 2, 0, 1),
            (vec![3, 1, 2], vec![3, 2], 3, 0, 1),
        ]
    );
    // Broker 1 is back (re-registered, caught up), and rejoined the ISR of partition 0.
    let epoch = register_unfenced(&qc, 1).await;
    let topic_id = qc.image().topic("t").expect("t").id;
    let p0 = qc.image().partition(&topic_id, 0).expect("p0").clone();
    let rejoin = AlterPartitionRequest {
        broker_id: 2,
        broker_epoch: epochs[&2],
        partitions: vec![AlterPartitionData {
            topic_id,
            partition: 0,
            leader_epoch: p0.leader_epoch,
            new_isr_with_epochs: vec![(2, -1), (3, -1), (1, epoch)],
            leader_recovery_state: LeaderRecoveryState::Recovered,
            partition_epoch: p0.partition_epoch,
        }],
    };
    qc.alter_partition(rejoin)
        .await
        .expect("rejoin")
        .pop()
        .expect("one")
        .2
        .expect("ok");
    let elected = qc
        .elect_leaders(
            Election::Preferred,
            Some(vec![("t".to_string(), 0), ("t".to_string(), 1)]),
        )
        .await
        .expect("elect");
    assert!(matches!(elected[0].1, Ok(1)), "{elected:?}");
    assert!(
        matches!(elected[1].1, Err(QuorumError::ElectionNotNeeded)),
        "{elected:?}"
    );
    assert_eq!(
        partitions(&qc.image(), "t")[0],
        (vec![1, 2, 3], vec![2, 3, 1], 1, 2, 3)
    );
    qc.shutdown().await.expect("shutdown");
}

// Producer id blocks are 1000 ids each, consecutive, and keep growing after the
// controller restarts from its log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_id_blocks_grow_across_a_restart() {
    let dir = TempDir::new().expect("dir");
    let clock = Arc::new(ManualClock::default());
    let qc = start_single(dir.path(), &clock).await;
    let epoch = register_unfenced(&qc, 1).await;
    let first = qc.allocate_producer_ids(1, epoch).await.expect("block");
    let second = qc.allocate_producer_ids(1, epoch).await.expect("block");
    assert_eq!(
        first,
        ProducerIdsBlock {
            first_producer_id: 0,
            len: 1000
        }
    );
    assert_eq!(
        second,
        ProducerIdsBlock {
            first_producer_id: 1000,
            len: 1000
        }
    );
    let stale = qc.allocate_producer_ids(1, epoch - 1).await;
    assert!(
        matches!(stale, Err(QuorumError::StaleBrokerEpoch { .. })),
        "{stale:?}"
    );
    let before = qc.image();
    qc.shutdown().await.expect("shutdown");
    drop(qc);

    let qc = start_single(dir.path(), &clock).await;
    let third = qc
        .allocate_producer_ids(1, epoch)
        .await
        .expect("block after restart");
    assert_eq!(
        third,
        ProducerIdsBlock {
            first_producer_id: 2000,
            len: 1000
        }
    );
    assert_eq!(qc.image().cluster_id(), before.cluster_id());
    qc.shutdown().await.expect("shutdown");
}

/// The voter that leads, among `nodes`.
async fn leader_of(nodes: &BTreeMap<u64, Arc<QuorumController>>) -> u64 {
    let any = nodes.values().next().expect("a node");
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(leader) = any.raft().leader().filter(|l| nodes.contains_key(l)) {
            return leader;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no leader among {:?}",
            nodes.keys()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// Three voters: the leader creates a topic and hands out a producer id block; followers
// answer NOT_CONTROLLER naming it. When it is killed, a survivor takes over with the
// whole image (topic known, the next block higher), gives brokers a whole fresh session,
// and both survivors hold equal images.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_continues_where_the_old_one_stopped() {
    let dirs: BTreeMap<u64, TempDir> = (1..=3)
        .map(|id| (id, TempDir::new().expect("dir")))
        .collect();
    let clock = Arc::new(ManualClock::default());
    let mut nodes = start_voters(&dirs, &[1, 2, 3], &clock).await;
    let leader = leader_of(&nodes).await;
    let follower = *nodes.keys().find(|id| **id != leader).expect("follower");
    let refused = nodes[&follower].allocate_producer_ids(1, 1).await;
    assert!(
        matches!(refused, Err(QuorumError::NotController { leader_id: Some(l) }) if l == leader),
        "{refused:?}"
    );
    let mut epochs = BTreeMap::new();
    for id in 1..=3 {
        epochs.insert(id, register_unfenced(&nodes[&leader], id).await);
    }
    let created = create(&nodes[&leader], topic("t", 2, 3))
        .await
        .expect("created");
    let block = nodes[&leader]
        .allocate_producer_ids(1, epochs[&1])
        .await
        .expect("block");
    assert_eq!(block.first_producer_id, 0);

    let old = nodes.remove(&leader).expect("leader");
    old.shutdown().await.expect("shutdown");
    drop(old);
    let new_leader = leader_of(&nodes).await;
    assert_ne!(new_leader, leader);
    let qc = &nodes[&new_leader];
    let next = loop {
        match qc.allocate_producer_ids(1, epochs[&1]).await {
            Ok(block) => break block,
            Err(QuorumError::NotController { .. }) => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("allocate on the new leader: {e}"),
        }
    };
    assert_eq!(next.first_producer_id, 1000);
    // The new active controller gave every broker a whole session timeout (9 s) from its
    // first operation, as Kafka's, not what was left of the old sessions.
    clock.advance_ms(8999);
    assert_eq!(qc.check_sessions().await.expect("check"), Vec::<i32>::new());
    clock.advance_ms(1);
    assert_eq!(qc.check_sessions().await.expect("check"), vec![1, 2, 3]);
    assert_eq!(qc.image().topic("t").map(|t| t.id), Some(created.topic_id));
    let again = create(qc, topic("t", 1, 1)).await;
    assert!(
        matches!(again, Err(QuorumError::TopicAlreadyExists { .. })),
        "{again:?}"
    );

    let offset = qc.image().offset();
    for node in nodes.values() {
        let mut applied = node.subscribe();
        tokio::time::timeout(WAIT, applied.wait_for(|a| a.image.offset() >= offset))
            .await
            .expect("caught up in time")
            .expect("watch");
    }
    let images: Vec<MetadataImage> = nodes.values().map(|n| n.image()).collect();
    assert_eq!(images[0], images[1]);
    for node in nodes.values() {
        node.shutdown().await.expect("shutdown");
    }
}

// The cluster id is 22 characters of URL-safe base64, as Kafka's.
// MetadataFetch, as a broker-only node uses it: a fetch from before what the tail holds
// gets the whole image; a fetch from the newest offset waits for the next commit and gets
// exactly the batches after it; folding them onto the image gives the controller's image.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_fetch_serves_the_image_then_the_batches_after_it() {
    use crate::metadata_fetch::{MetadataFetchReply, MetadataFetchRequest};
    use logbook_metadata::snapshot::MetadataSnapshot;

    let dir = TempDir::new().expect("tempdir");
    let clock = Arc::new(ManualClock::default());
    let config = QuorumConfig {
        metadata_tail_batches_max: 2,
        ..quorum_config()
    };
    let qc = start_single_with(dir.path(), &clock, config).await;
    register_unfenced(&qc, 1).await;
    create(&qc, topic("first", 2, 1)).await.expect("create");
    let fetch = |after_offset, max_wait_ms| MetadataFetchRequest {
        after_offset,
        max_wait_ms,
        max_batches: 100,
    };

    // The bootstrap, registration, unfencing and creation are more than two batches.
    let reply = qc.fetch_metadata(fetch(-1, 0)).await.expect("fetch");
    let MetadataFetchReply::Snapshot(snapshot) = reply else {
        panic!("expected the image, got {reply:?}");
    };
    assert_eq!(snapshot, MetadataSnapshot::of(&qc.image()));
    let mut image = snapshot.to_image().expect("image");

    // Nothing newer: an empty answer after the wait.
    let started = std::time::Instant::now();
    let reply = qc
        .fetch_metadata(fetch(image.offset(), 200))
        .await
        .expect("fetch");
    assert_eq!(reply, MetadataFetchReply::Batches(Vec::new()));
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );

    // A waiting fetch is answered by the next commit with the batch after its offset.
    let waiting = {
        let qc = Arc::clone(&qc);
        let after = image.offset();
        tokio::spawn(async move { qc.fetch_metadata(fetch(after, 10_000)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    create(&qc, topic("second", 1, 1)).await.expect("create");
    let reply = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("answered at the commit, not at the wait's end")
        .expect("task")
        .expect("fetch");
    let MetadataFetchReply::Batches(batches) = reply else {
        panic!("expected batches, got {reply:?}");
    };
    assert_eq!(batches.len(), 1, "{batches:?}");
    for (offset, batch) in &batches {
        assert!(*offset > image.offset());
        image = image.apply(*offset, batch).0;
    }
    assert_eq!(
        MetadataSnapshot::of(&image),
        MetadataSnapshot::of(&qc.image())
    );
    assert!(image.topic("second").is_some());
}

#[test]
fn cluster_id_is_kafka_shaped() {
    assert_eq!(new_cluster_id(Uuid::nil()), "AAAAAAAAAAAAAAAAAAAAAA");
    assert_eq!(
        new_cluster_id(Uuid::from_u128(u128::MAX)),
        "_____________________w"
    );
}
