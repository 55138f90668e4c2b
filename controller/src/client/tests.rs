//! ControllerClient and the controller RPC on real Raft quorums in this process (three
//! voters on 127.0.0.1, or one with a listener), with a manual session clock. Each test
//! says what it proves.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use futures::{SinkExt, StreamExt};
use logbook_metadata::BrokerId;
use tempfile::TempDir;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::Framed;

use super::*;
use crate::net::frame::{self, RequestHeader};
use crate::quorum::{Clock, ManualClock, QuorumConfig};
use crate::{ControllerConfig, RaftTimings};

const WAIT: Duration = Duration::from_secs(20);

fn quorum_config() -> QuorumConfig {
    QuorumConfig {
        // The periodic check stays out of the way; tests call check_sessions themselves.
        session_check_interval_ms: 3_600_000,
        ..QuorumConfig::default()
    }
}

/// Voters `ids` on 127.0.0.1 ports bound first; returns them and the voter set.
async fn start_voters(
    dirs: &BTreeMap<u64, TempDir>,
    clock: &Arc<ManualClock>,
) -> (
    BTreeMap<u64, Arc<QuorumController>>,
    BTreeMap<u64, ControllerNode>,
) {
    let mut listeners = BTreeMap::new();
    let mut voters = BTreeMap::new();
    for id in dirs.keys() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        voters.insert(*id, ControllerNode::new("127.0.0.1", port));
        listeners.insert(*id, listener);
    }
    let mut starts = Vec::new();
    for (id, dir) in dirs {
        let mut config = ControllerConfig::new(*id, voters.clone(), dir.path().to_path_buf());
        config.timings = RaftTimings {
            election_timeout_min_ms: 400,
            election_timeout_max_ms: 800,
            heartbeat_interval_ms: 100,
            ..RaftTimings::default()
        };
        let listener = listeners.remove(id).expect("listener");
        let clock: Arc<dyn Clock> = clock.clone();
        starts.push(async move {
            let qc = QuorumController::start(config, Some(listener), quorum_config(), clock, None)
                .await
                .expect("start");
            (*id, qc)
        });
    }
    let nodes = futures::future::join_all(starts)
        .await
        .into_iter()
        .collect();
    (nodes, voters)
}

fn dirs(n: u64) -> BTreeMap<u64, TempDir> {
    (1..=n)
        .map(|id| (id, TempDir::new().expect("dir")))
        .collect()
}

/// The voter that leads, among `nodes`, once they agree on one.
async fn leader_of(nodes: &BTreeMap<u64, Arc<QuorumController>>) -> u64 {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let leaders: Vec<Option<u64>> = nodes.values().map(|n| n.raft().leader()).collect();
        if let Some(Some(leader)) = leaders.first() {
            if nodes.contains_key(leader) && leaders.iter().all(|l| *l == Some(*leader)) {
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

fn client(
    local: Option<&Arc<QuorumController>>,
    voters: &BTreeMap<u64, ControllerNode>,
    node_id: u64,
) -> ControllerClient {
    let config = ControllerClientConfig {
        request_timeout_ms: 15_000,
        retry_backoff_ms: 50,
        ..ControllerClientConfig::new(node_id)
    };
    ControllerClient::new(local.cloned(), voters.clone(), config)
}

fn registration(broker_id: BrokerId) -> BrokerRegistrationRequest {
    BrokerRegistrationRequest {
        broker_id,
        incarnation_id: Uuid::new_v4(),
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

/// Registers `id` through `client` and unfences it; returns its broker epoch.
async fn register_unfenced(client: &ControllerClient, id: BrokerId) -> i64 {
    let reply = client
        .register_broker(registration(id))
        .await
        .expect("register");
    let beat = client
        .broker_heartbeat(heartbeat(id, reply.broker_epoch, reply.registration_offset))
        .await
        .expect("heartbeat");
    assert!(!beat.is_fenced, "broker {id} still fenced: {beat:?}");
    reply.broker_epoch
}

async fn shutdown_all(nodes: BTreeMap<u64, Arc<QuorumController>>) {
    for node in nodes.values() {
        node.shutdown().await.expect("shutdown");
    }
}

// A combined node that does not lead and a broker-only node (no local controller, only
// the voter list) both reach the active controller: registrations, heartbeats, a topic
// and a producer-id block land in the leader's image, and the follower's own
// QuorumController still refuses them directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_on_a_follower_and_a_broker_only_node_reach_the_leader() {
    let dirs = dirs(3);
    let clock = Arc::new(ManualClock::default());
    let (nodes, voters) = start_voters(&dirs, &clock).await;
    let leader = leader_of(&nodes).await;
    let follower = *nodes.keys().find(|id| **id != leader).expect("follower");
    let combined = client(Some(&nodes[&follower]), &voters, follower);
    let broker_only = client(None, &voters, 4);

    let direct = nodes[&follower].allocate_producer_ids(1, 1).await;
    assert!(
        matches!(direct, Err(QuorumError::NotController { leader_id: Some(l) }) if l == leader),
        "{direct:?}"
    );
    let mut epochs = BTreeMap::new();
    for id in 1..=3 {
        epochs.insert(id, register_unfenced(&combined, id).await);
    }
    epochs.insert(4, register_unfenced(&broker_only, 4).await);
    let created = combined
        .create_topics(
            vec![CreatableTopic {
                name: "t".to_string(),
                num_partitions: 2,
                replication_factor: 3,
                cap_replication_factor: false,
                configs: vec![("cleanup.policy".to_string(), "compact".to_string())],
                assignment: Vec::new(),
            }],
            false,
        )
        .await
        .expect("create_topics");
    let topic_id = match created.as_slice() {
        [(name, Ok(topic))] if name == "t" => {
            assert_eq!((topic.num_partitions, topic.replication_factor), (2, 3));
            topic.topic_id
        }
        other => panic!("{other:?}"),
    };
    let again = broker_only
        .create_topics(
            vec![CreatableTopic {
                name: "t".to_string(),
                num_partitions: 1,
                replication_factor: 1,
                cap_replication_factor: false,
                configs: Vec::new(),
                assignment: Vec::new(),
            }],
            false,
        )
        .await
        .expect("create_topics");
    assert!(
        matches!(again.as_slice(), [(_, Err(QuorumError::TopicAlreadyExists { name }))] if name == "t"),
        "{again:?}"
    );
    let first = broker_only
        .allocate_producer_ids(4, epochs[&4])
        .await
        .expect("block");
    let second = combined
        .allocate_producer_ids(1, epochs[&1])
        .await
        .expect("block");
    assert_eq!(
        (first.first_producer_id, second.first_producer_id),
        (0, 1000)
    );
    let stale = broker_only.allocate_producer_ids(4, epochs[&4] - 1).await;
    assert!(
        matches!(
            stale,
            Err(QuorumError::StaleBrokerEpoch { broker_id: 4, .. })
        ),
        "{stale:?}"
    );

    let image = nodes[&leader].image();
    // Both clients learned an offset covering their last operation (read your writes).
    assert_eq!(broker_only.controller_offset(), image.offset());
    assert!(combined.controller_offset() >= image.broker(1).expect("b1").broker_epoch);
    assert_eq!(
        (combined.leader_id(), broker_only.leader_id()),
        (Some(leader), Some(leader))
    );
    assert_eq!(image.topic("t").map(|t| t.id), Some(topic_id));
    assert_eq!(image.topic("t").map(|t| t.partitions.len()), Some(2));
    for id in 1..=4 {
        let broker = image.broker(id).expect("registered");
        assert!(!broker.fenced, "broker {id} fenced");
        assert_eq!(broker.broker_epoch, epochs[&id]);
    }
    drop((combined, broker_only));
    shutdown_all(nodes).await;
}

// The leader is stopped while a broker-only client heartbeats and takes producer-id
// blocks: the client follows the new leader without an error reaching the caller, and
// the blocks carry on from the log (no id handed out twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_follows_a_new_leader() {
    let dirs = dirs(3);
    let clock = Arc::new(ManualClock::default());
    let (mut nodes, voters) = start_voters(&dirs, &clock).await;
    let leader = leader_of(&nodes).await;
    let broker_only = client(None, &voters, 7);
    let epoch = register_unfenced(&broker_only, 7).await;
    let mut blocks = Vec::new();
    for _ in 0..3 {
        let block = broker_only
            .allocate_producer_ids(7, epoch)
            .await
            .expect("block");
        blocks.push(block.first_producer_id);
    }
    let old = nodes.remove(&leader).expect("leader");
    old.shutdown().await.expect("shutdown");
    drop(old);
    for _ in 0..3 {
        let beat = broker_only
            .broker_heartbeat(heartbeat(7, epoch, i64::MAX))
            .await
            .expect("heartbeat after failover");
        assert!(!beat.is_fenced, "{beat:?}");
        let block = broker_only
            .allocate_producer_ids(7, epoch)
            .await
            .expect("block after failover");
        blocks.push(block.first_producer_id);
    }
    assert_eq!(blocks, vec![0, 1000, 2000, 3000, 4000, 5000]);
    let new_leader = leader_of(&nodes).await;
    assert_ne!(new_leader, leader);
    assert_eq!(
        nodes[&new_leader].image().broker(7).map(|b| b.broker_epoch),
        Some(epoch)
    );
    drop(broker_only);
    shutdown_all(nodes).await;
}

/// A request frame with the controller RPC key and `body`.
fn rpc_frame(correlation_id: i32, body: &[u8]) -> bytes::Bytes {
    frame::encode_request(
        &RequestHeader {
            api_key: CONTROLLER_RPC_API_KEY,
            api_version: CONTROLLER_RPC_API_VERSION,
            correlation_id,
            client_id: "test".to_string(),
        },
        body,
    )
}

// Garbage on the controller RPC key (a body that is no request, a header cut short)
// closes that connection without an answer; a well-formed request on a new connection is
// answered, and the controller is unharmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_rpc_key_closes_the_connection() {
    let dirs = dirs(1);
    let clock = Arc::new(ManualClock::default());
    let (nodes, voters) = start_voters(&dirs, &clock).await;
    leader_of(&nodes).await;
    let address = voters[&1].address();
    let mut framed = Framed::new(
        TcpStream::connect(&address).await.expect("connect"),
        frame::codec(1 << 20),
    );
    framed
        .send(rpc_frame(1, b"{\"NoSuchOperation\":7}"))
        .await
        .expect("send");
    let closed = tokio::time::timeout(WAIT, framed.next())
        .await
        .expect("closed in time");
    assert!(closed.is_none(), "answered garbage: {closed:?}");

    let mut framed = Framed::new(
        TcpStream::connect(&address).await.expect("connect"),
        frame::codec(1 << 20),
    );
    let mut short = BytesMut::new();
    short.put_i16(CONTROLLER_RPC_API_KEY);
    framed.send(short.freeze()).await.expect("send");
    let closed = tokio::time::timeout(WAIT, framed.next())
        .await
        .expect("closed in time");
    assert!(closed.is_none(), "answered a short header: {closed:?}");

    let mut framed = Framed::new(
        TcpStream::connect(&address).await.expect("connect"),
        frame::codec(1 << 20),
    );
    let request =
        serde_json::to_vec(&ControllerRequest::RegisterBroker(registration(5))).expect("encode");
    framed.send(rpc_frame(9, &request)).await.expect("send");
    let answer = tokio::time::timeout(WAIT, framed.next())
        .await
        .expect("answered in time")
        .expect("an answer")
        .expect("a frame");
    let (correlation_id, body) = frame::decode_response(answer.freeze()).expect("header");
    assert_eq!(correlation_id, 9);
    let answer: ControllerAnswer = serde_json::from_slice(&body).expect("decode");
    assert!(
        matches!(answer.result, Ok(ControllerReply::RegisterBroker(_))),
        "{answer:?}"
    );
    assert_eq!(answer.metadata_offset, nodes[&1].image().offset());
    assert!(nodes[&1].image().broker(5).is_some());
    shutdown_all(nodes).await;
}

/// Waits until the active controller has seen `broker_id`'s heartbeat connection close.
async fn wait_connection_closed(qc: &QuorumController, broker_id: BrokerId) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while qc
        .session(broker_id)
        .await
        .and_then(|s| s.heartbeat_connection)
        .is_some()
    {
        assert!(tokio::time::Instant::now() < deadline, "close not seen");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// Fencing on heartbeat-connection EOF (plan §3.1): while the connection that carried a
// broker's heartbeats stays open, the broker waits out the whole 9 s session (a paused
// process keeps its socket); once it closes, the broker is fenced one heartbeat interval
// (2 s) later, not before. A broker that heartbeats again on a new connection within the
// interval is not fenced, and an in-process heartbeat has no connection to lose.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_heartbeat_connection_fences_after_one_interval() {
    let dirs = dirs(1);
    let clock = Arc::new(ManualClock::default());
    let (nodes, voters) = start_voters(&dirs, &clock).await;
    leader_of(&nodes).await;
    let qc = &nodes[&1];
    let local = client(Some(qc), &voters, 1);
    let local_epoch = register_unfenced(&local, 1).await;
    let remote = client(None, &voters, 2);
    let epoch = register_unfenced(&remote, 2).await;
    let session = qc.session(2).await.expect("session");
    assert!(session.heartbeat_connection.is_some());
    assert_eq!(
        qc.session(1).await.and_then(|s| s.heartbeat_connection),
        None
    );

    // Connection open: the session timeout applies (9 s from the heartbeat).
    clock.advance_ms(8999);
    assert_eq!(qc.check_sessions().await.expect("check"), Vec::<i32>::new());
    local
        .broker_heartbeat(heartbeat(1, local_epoch, i64::MAX))
        .await
        .expect("heartbeat");
    remote
        .broker_heartbeat(heartbeat(2, epoch, i64::MAX))
        .await
        .expect("heartbeat");

    // Closed: fenced after 2 s, not before. Broker 1 (in-process) is untouched.
    drop(remote);
    wait_connection_closed(qc, 2).await;
    clock.advance_ms(1999);
    assert_eq!(qc.check_sessions().await.expect("check"), Vec::<i32>::new());
    clock.advance_ms(1);
    assert_eq!(qc.check_sessions().await.expect("check"), vec![2]);
    assert!(qc.image().broker(2).expect("broker").fenced);
    assert!(!qc.image().broker(1).expect("broker").fenced);

    // A broker that comes back on a new connection within the interval keeps its session.
    let back = client(None, &voters, 3);
    let epoch = register_unfenced(&back, 3).await;
    drop(back);
    wait_connection_closed(qc, 3).await;
    clock.advance_ms(1000);
    let again = client(None, &voters, 3);
    again
        .broker_heartbeat(heartbeat(3, epoch, i64::MAX))
        .await
        .expect("heartbeat on a new connection");
    clock.advance_ms(5000);
    assert_eq!(qc.check_sessions().await.expect("check"), Vec::<i32>::new());
    assert!(!qc.image().broker(3).expect("broker").fenced);
    drop((local, again));
    shutdown_all(nodes).await;
}

/// `voters` with `leader`'s address replaced by a listener that accepts connections and
/// never answers on them (a SIGSTOPped controller), and the task holding that listener.
async fn route_leader_to_silence(
    voters: &BTreeMap<u64, ControllerNode>,
    leader: u64,
) -> (BTreeMap<u64, ControllerNode>, tokio::task::JoinHandle<()>) {
    let silent = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let silent_port = silent.local_addr().expect("addr").port();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            open.push(stream);
        }
    });
    let mut routed = voters.clone();
    routed.insert(leader, ControllerNode::new("127.0.0.1", silent_port));
    (routed, held)
}

/// Sends a heartbeat through `stuck` (whose route to `leader` is silent), checks that it
/// is still waiting after `settle`, shuts the leader down, and requires the heartbeat to
/// land unfenced on the new leader within 8 s, well before the client's 15 s deadline.
async fn heartbeat_follows_the_new_leader(
    nodes: &mut BTreeMap<u64, Arc<QuorumController>>,
    leader: u64,
    stuck: &Arc<ControllerClient>,
    request: BrokerHeartbeatRequest,
    settle: Duration,
) {
    let call = {
        let stuck = Arc::clone(stuck);
        tokio::spawn(async move { stuck.broker_heartbeat(request).await })
    };
    tokio::time::sleep(settle).await;
    assert!(!call.is_finished(), "the silent leader answered");
    let old = nodes.remove(&leader).expect("leader");
    old.shutdown().await.expect("shutdown");
    drop(old);
    let moved = tokio::time::Instant::now();
    let beat = tokio::time::timeout(Duration::from_secs(8), call)
        .await
        .expect("the call stayed with the silent leader")
        .expect("join");
    let beat = beat.expect("heartbeat on the new leader");
    assert!(!beat.is_fenced, "{beat:?}");
    assert!(
        moved.elapsed() < Duration::from_secs(8),
        "took {:?}",
        moved.elapsed()
    );
}

// A call held by a controller that accepted the connection but stopped answering (a
// SIGSTOPped leader) moves to the new leader once this node's Raft elects one, instead of
// waiting for the call's deadline: the chaos trials' nodes all sent their heartbeats to a
// stopped old leader for 30 s, and the new controller fenced every broker after one
// session timeout. Here the client's address for the leader is a listener that never
// answers; the leader is then shut down, and the heartbeat must land on the new leader
// well before the 15 s deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_stuck_on_a_silent_leader_follows_the_new_one() {
    let dirs = dirs(3);
    let clock = Arc::new(ManualClock::default());
    let (mut nodes, voters) = start_voters(&dirs, &clock).await;
    let leader = leader_of(&nodes).await;
    let follower = *nodes.keys().find(|id| **id != leader).expect("follower");
    let epoch = register_unfenced(&client(Some(&nodes[&follower]), &voters, follower), 5).await;

    let (routed, held) = route_leader_to_silence(&voters, leader).await;
    let stuck = Arc::new(client(Some(&nodes[&follower]), &routed, follower));
    let request = heartbeat(5, epoch, i64::MAX);
    heartbeat_follows_the_new_leader(
        &mut nodes,
        leader,
        &stuck,
        request,
        Duration::from_millis(500),
    )
    .await;
    held.abort();
    drop(stuck);
    shutdown_all(nodes).await;
}

// A broker-only node has no Raft to say that the leader moved: its heartbeat attempts are
// bounded instead (`attempt_timeout_ms`), so a heartbeat held by a stopped controller goes
// to another voter, which names the new leader, long before the call's deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_only_heartbeat_leaves_a_silent_leader_after_one_attempt() {
    let dirs = dirs(3);
    let clock = Arc::new(ManualClock::default());
    let (mut nodes, voters) = start_voters(&dirs, &clock).await;
    let leader = leader_of(&nodes).await;
    let broker: BrokerId = 7;
    let epoch = register_unfenced(&client(None, &voters, 7), broker).await;

    let (routed, held) = route_leader_to_silence(&voters, leader).await;
    let config = ControllerClientConfig {
        request_timeout_ms: 15_000,
        retry_backoff_ms: 50,
        attempt_timeout_ms: 1_000,
        ..ControllerClientConfig::new(7)
    };
    let stuck = Arc::new(ControllerClient::new(None, routed, config));
    let request = heartbeat(broker, epoch, i64::MAX);
    heartbeat_follows_the_new_leader(
        &mut nodes,
        leader,
        &stuck,
        request,
        Duration::from_millis(300),
    )
    .await;
    held.abort();
    drop(stuck);
    shutdown_all(nodes).await;
}
