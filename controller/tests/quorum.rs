//! Three controller voters in one process on 127.0.0.1 (OS-assigned ports, temp dirs),
//! driven through `RaftController` with a toy state machine that records what it applied.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use logbook_controller::{
    ControllerConfig, ControllerNode, Error, Payload, RaftController, RaftTimings, StateMachine,
    StateMachineError,
};
use tempfile::TempDir;
use tokio::net::TcpListener;

/// Applied entries, (raft index, JSON), shared with the test.
type Applied = Arc<Mutex<Vec<(u64, String)>>>;

/// Appends every applied entry to a list; a snapshot is that list.
struct ListMachine {
    applied: Applied,
}

impl StateMachine for ListMachine {
    async fn apply(&mut self, index: u64, payload: &Payload) -> Result<(), StateMachineError> {
        self.applied
            .lock()
            .expect("lock")
            .push((index, payload.json().to_string()));
        Ok(())
    }

    fn snapshot(&self) -> Result<Vec<u8>, StateMachineError> {
        serde_json::to_vec(&*self.applied.lock().expect("lock"))
            .map_err(|e| StateMachineError(e.to_string()))
    }

    fn install_snapshot(
        &mut self,
        _last: Option<u64>,
        snapshot: &[u8],
    ) -> Result<(), StateMachineError> {
        let list =
            serde_json::from_slice(snapshot).map_err(|e| StateMachineError(e.to_string()))?;
        *self.applied.lock().expect("lock") = list;
        Ok(())
    }
}

/// Timeouts short enough for tests, long enough for two busy cores.
fn test_timings() -> RaftTimings {
    RaftTimings {
        election_timeout_min_ms: 400,
        election_timeout_max_ms: 800,
        heartbeat_interval_ms: 100,
        ..RaftTimings::default()
    }
}

const WAIT: Duration = Duration::from_secs(15);

struct Cluster {
    dirs: BTreeMap<u64, TempDir>,
    voters: BTreeMap<u64, ControllerNode>,
    timings: RaftTimings,
    nodes: BTreeMap<u64, RaftController>,
    applied: BTreeMap<u64, Applied>,
}

impl Cluster {
    /// Binds three listeners, then starts the three voters at the same time (each calls
    /// `initialize` with the same voter set).
    async fn start(timings: RaftTimings) -> Cluster {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let mut listeners = BTreeMap::new();
        let mut voters = BTreeMap::new();
        for id in 1..=3u64 {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let port = listener.local_addr().expect("addr").port();
            voters.insert(id, ControllerNode::new("127.0.0.1", port));
            listeners.insert(id, listener);
        }
        let mut cluster = Cluster {
            dirs: (1..=3)
                .map(|id| (id, tempfile::tempdir().expect("tempdir")))
                .collect(),
            voters,
            timings,
            nodes: BTreeMap::new(),
            applied: BTreeMap::new(),
        };
        let starts: Vec<_> = listeners
            .into_iter()
            .map(|(id, listener)| {
                let (config, machine) = cluster.config(id);
                tokio::spawn(async move {
                    (
                        id,
                        machine.applied.clone(),
                        RaftController::start_with_listener(config, listener, machine).await,
                    )
                })
            })
            .collect();
        for start in starts {
            let (id, applied, started) = start.await.expect("join");
            cluster.nodes.insert(id, started.expect("start"));
            cluster.applied.insert(id, applied);
        }
        cluster
    }

    fn config(&self, id: u64) -> (ControllerConfig, ListMachine) {
        let mut config =
            ControllerConfig::new(id, self.voters.clone(), self.dirs[&id].path().to_path_buf());
        config.timings = self.timings.clone();
        let machine = ListMachine {
            applied: Arc::new(Mutex::new(Vec::new())),
        };
        (config, machine)
    }

    /// Restarts a stopped node from its directory on its own port.
    async fn restart(&mut self, id: u64) {
        let (config, machine) = self.config(id);
        self.applied.insert(id, machine.applied.clone());
        let node = RaftController::start(config, machine)
            .await
            .expect("restart");
        self.nodes.insert(id, node);
    }

    async fn stop(&mut self, id: u64) {
        let node = self.nodes.remove(&id).expect("running");
        node.shutdown().await.expect("shutdown");
    }

    /// Waits until every running node names the same running leader.
    async fn leader(&self) -> u64 {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let leaders: Vec<Option<u64>> =
                self.nodes.values().map(RaftController::leader).collect();
            if let Some(Some(leader)) = leaders.first() {
                if leaders.iter().all(|l| *l == Some(*leader)) && self.nodes.contains_key(leader) {
                    return *leader;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no agreed leader: {leaders:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Writes through the current leader, again through the next one if leadership moved
    /// before the write was appended (busy cores can cost a leader its lease).
    async fn write(&self, value: u64) -> u64 {
        let payload = Payload::encode(&serde_json::json!({ "value": value })).expect("encode");
        for _ in 0..5 {
            let leader = self.leader().await;
            match self.nodes[&leader].write(payload.clone()).await {
                Ok(index) => return index,
                Err(Error::NotController { .. }) => continue,
                Err(e) => panic!("write {value}: {e}"),
            }
        }
        panic!("write {value}: leadership kept moving")
    }

    /// Waits until node `id` applied `index`, then returns its applied list.
    async fn applied_up_to(&self, id: u64, index: u64) -> Vec<(u64, String)> {
        let mut metrics = self.nodes[&id].metrics();
        tokio::time::timeout(
            WAIT,
            metrics.wait_for(|m| m.last_applied.is_some_and(|l| l.index >= index)),
        )
        .await
        .unwrap_or_else(|_| panic!("node {id} did not apply {index}"))
        .expect("metrics");
        self.applied[&id].lock().expect("lock").clone()
    }
}

fn values(applied: &[(u64, String)]) -> Vec<String> {
    applied.iter().map(|(_, json)| json.clone()).collect()
}

fn expected(range: std::ops::Range<u64>) -> Vec<String> {
    range.map(|v| format!("{{\"value\":{v}}}")).collect()
}

// Three voters started at once elect one leader; writes commit with increasing indexes
// and every node applies the same entries at the same indexes; a follower refuses writes
// with NotController naming the leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_voters_elect_and_commit() {
    let cluster = Cluster::start(test_timings()).await;
    let leader = cluster.leader().await;
    let mut indexes = Vec::new();
    for v in 0..5 {
        indexes.push(cluster.write(v).await);
    }
    assert!(
        indexes.windows(2).all(|w| w[0] < w[1]),
        "indexes {indexes:?}"
    );
    let on_leader = cluster.applied_up_to(leader, indexes[4]).await;
    assert_eq!(values(&on_leader), expected(0..5));
    assert_eq!(on_leader.iter().map(|e| e.0).collect::<Vec<_>>(), indexes);
    for id in 1..=3 {
        assert_eq!(
            cluster.applied_up_to(id, indexes[4]).await,
            on_leader,
            "node {id}"
        );
    }
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    let refused = cluster.nodes[&follower]
        .write(Payload::from_json("1".to_string()).expect("json"))
        .await;
    assert!(
        matches!(refused, Err(Error::NotController { leader_id: Some(l) }) if l == leader),
        "{refused:?}"
    );
    for node in cluster.nodes.values() {
        node.shutdown().await.expect("shutdown");
    }
}

// Shutting the leader down makes the other two elect a new one, which commits further
// writes after the old ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_shutdown_reelects_and_commits() {
    let mut cluster = Cluster::start(test_timings()).await;
    let first = cluster.write(0).await;
    let old_leader = cluster.leader().await;
    cluster.stop(old_leader).await;
    let new_leader = cluster.leader().await;
    assert_ne!(new_leader, old_leader);
    let second = cluster.write(1).await;
    assert!(first < second, "{first} < {second}");
    for id in cluster.nodes.keys() {
        assert_eq!(
            values(&cluster.applied_up_to(*id, second).await),
            expected(0..2),
            "node {id}"
        );
    }
    for node in cluster.nodes.values() {
        node.shutdown().await.expect("shutdown");
    }
}

// A whole-cluster restart keeps votes and logs: terms do not go back, committed entries
// are applied again from disk, and new writes follow them. The leader's last log frame is
// cut in half before the restart (a power loss before its own fsync, after the followers
// had the entry): it drops the torn entry and must not resume its old term with a shorter
// log and give the lost index out again (see log_store::resign_on_restart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_from_disk_keeps_vote_and_log_and_drops_torn_tail() {
    let mut cluster = Cluster::start(test_timings()).await;
    let mut last = 0;
    for v in 0..5 {
        last = cluster.write(v).await;
    }
    for id in 1..=3 {
        cluster.applied_up_to(id, last).await;
    }
    let terms: BTreeMap<u64, u64> = cluster
        .nodes
        .iter()
        .map(|(id, n)| (*id, n.metrics().borrow().vote.leader_id.term))
        .collect();
    let torn = cluster.leader().await;
    for id in 1..=3 {
        cluster.stop(id).await;
    }
    let log_dir = cluster.dirs[&torn].path().join("__cluster_metadata-0");
    let segment = std::fs::read_dir(&log_dir)
        .expect("ls")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .max()
        .expect("a segment");
    let len = std::fs::metadata(&segment).expect("meta").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .expect("open")
        .set_len(len - 10)
        .expect("cut the last frame");
    let mut garbage = std::fs::OpenOptions::new()
        .append(true)
        .open(&segment)
        .expect("open");
    garbage.write_all(&[0x5A; 7]).expect("garbage");
    drop(garbage);
    for id in 1..=3 {
        cluster.restart(id).await;
        let vote = cluster.nodes[&id].metrics().borrow().vote;
        assert!(
            vote.leader_id.term >= terms[&id],
            "node {id}: vote {vote:?} older than term {}",
            terms[&id]
        );
    }
    let next = cluster.write(5).await;
    assert!(next > last, "{next} > {last}: an index was given out twice");
    let on_node_1 = cluster.applied_up_to(1, next).await;
    assert_eq!(values(&on_node_1), expected(0..6));
    for id in 2..=3 {
        assert_eq!(
            cluster.applied_up_to(id, next).await,
            on_node_1,
            "node {id} diverged"
        );
    }
    for node in cluster.nodes.values() {
        node.shutdown().await.expect("shutdown");
    }
}

// A node that was down while the others snapshotted and purged their logs catches up by
// InstallSnapshot: its state equals the leader's and it reports the snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_node_catches_up_by_snapshot() {
    let timings = RaftTimings {
        snapshot_since_last_entries: 10,
        logs_to_keep_after_snapshot: 0,
        ..test_timings()
    };
    let mut cluster = Cluster::start(timings).await;
    let leader = cluster.leader().await;
    let lagging = (1..=3).find(|id| *id != leader).expect("a follower");
    cluster.stop(lagging).await;
    let mut last = 0;
    for v in 0..40 {
        last = cluster.write(v).await;
    }
    let mut metrics = cluster.nodes[&leader].metrics();
    tokio::time::timeout(
        WAIT,
        metrics.wait_for(|m| m.purged.is_some_and(|p| p.index >= 20)),
    )
    .await
    .expect("the leader purged its log after a snapshot")
    .expect("metrics");
    cluster.restart(lagging).await;
    let caught_up = cluster.applied_up_to(lagging, last).await;
    assert_eq!(caught_up, cluster.applied_up_to(leader, last).await);
    assert_eq!(values(&caught_up), expected(0..40));
    let snapshot = cluster.nodes[&lagging].metrics().borrow().snapshot;
    assert!(
        snapshot.is_some_and(|s| s.index >= 20),
        "lagging node snapshot {snapshot:?}"
    );
    for node in cluster.nodes.values() {
        node.shutdown().await.expect("shutdown");
    }
}

/// Sends `bytes` to `address` and expects the connection to be closed on us.
fn expect_closed(address: std::net::SocketAddr, bytes: &[u8]) {
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    if !bytes.is_empty() {
        stream.write_all(bytes).expect("write");
    }
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("got {n} bytes back for garbage {bytes:?}"),
        Err(e) => assert!(
            matches!(e.kind(), std::io::ErrorKind::ConnectionReset),
            "connection not closed: {e}"
        ),
    }
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = u32::try_from(body.len())
        .expect("len")
        .to_be_bytes()
        .to_vec();
    out.extend_from_slice(body);
    out
}

// Garbage on the controller port (a huge length, an unknown api key, a Raft key with a
// body that is not JSON, a cut header) closes that connection; the quorum keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_the_controller_port_closes_the_connection() {
    let cluster = Cluster::start(test_timings()).await;
    let leader = cluster.leader().await;
    let address = cluster.nodes[&leader].local_addr().expect("listening");
    let cases: Vec<Vec<u8>> = vec![
        vec![0x7F, 0xFF, 0xFF, 0xFF, 1, 2, 3],
        frame(&[0, 18, 0, 3, 0, 0, 0, 1, 0xFF, 0xFF]),
        frame(&[0x7D, 0x01, 0, 0, 0, 0, 0, 1, 0xFF, 0xFF, b'{', b'x']),
        frame(&[0x7D, 0x00, 0, 0]),
    ];
    for case in cases {
        tokio::task::spawn_blocking(move || expect_closed(address, &case))
            .await
            .expect("join");
    }
    let index = cluster.write(7).await;
    assert_eq!(
        values(&cluster.applied_up_to(leader, index).await),
        expected(7..8)
    );
    for node in cluster.nodes.values() {
        node.shutdown().await.expect("shutdown");
    }
}

// A single voter elects itself and commits (the shape of single-node mode); its listener
// serves at most `connections_max` connections and closes the ones beyond, and a freed
// slot is usable again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_voter_commits_and_bounds_its_connections() {
    let dir = tempfile::tempdir().expect("tempdir");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("addr");
    let voters = BTreeMap::from([(1, ControllerNode::new("127.0.0.1", address.port()))]);
    let voters_of_one = voters.clone();
    let mut config = ControllerConfig::new(1, voters, dir.path().to_path_buf());
    config.timings = test_timings();
    config.limits.connections_max = 1;
    let applied = Applied::default();
    let machine = ListMachine {
        applied: applied.clone(),
    };
    let node = RaftController::start_with_listener(config, listener, machine)
        .await
        .expect("start");
    assert_eq!(node.wait_for_leader(WAIT).await.expect("running"), Some(1));
    let index = node
        .write(Payload::from_json("{\"value\":1}".to_string()).expect("json"))
        .await
        .expect("write");
    assert_eq!(
        *applied.lock().expect("lock"),
        vec![(index, "{\"value\":1}".to_string())]
    );
    tokio::task::spawn_blocking(move || {
        let held = std::net::TcpStream::connect(address).expect("first connection");
        expect_closed(address, &[]);
        drop(held);
        // The server notices the close and frees the slot; retry briefly.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let mut again = std::net::TcpStream::connect(address).expect("connect");
            again
                .set_read_timeout(Some(Duration::from_millis(300)))
                .expect("timeout");
            let mut buf = [0u8; 8];
            match again.read(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                other => assert!(
                    std::time::Instant::now() < deadline,
                    "slot never freed: {other:?}"
                ),
            }
        }
    })
    .await
    .expect("join");
    // A quorum of one resumes its term on restart (no election, so single-node startup
    // stays fast) and re-applies its committed entries from disk; started by `start`, it
    // binds nothing.
    let term = node.metrics().borrow().current_term;
    node.shutdown().await.expect("shutdown");
    let restarted_applied = Applied::default();
    let machine = ListMachine {
        applied: restarted_applied.clone(),
    };
    let mut config = ControllerConfig::new(1, voters_of_one, dir.path().to_path_buf());
    config.timings = test_timings();
    let node = RaftController::start(config, machine)
        .await
        .expect("restart");
    assert_eq!(node.local_addr(), None, "a quorum of one opens no socket");
    assert_eq!(node.wait_for_leader(WAIT).await.expect("running"), Some(1));
    assert_eq!(node.metrics().borrow().current_term, term);
    let mut metrics = node.metrics();
    tokio::time::timeout(
        WAIT,
        metrics.wait_for(|m| m.last_applied.is_some_and(|l| l.index >= index)),
    )
    .await
    .expect("re-applied")
    .expect("metrics");
    assert_eq!(
        *restarted_applied.lock().expect("lock"),
        vec![(index, "{\"value\":1}".to_string())]
    );
    node.shutdown().await.expect("shutdown");
}

// A write larger than `entry_bytes_max` is refused with EntryTooLarge before it reaches
// the log (where it would fail the append and stop the node); the node keeps committing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_write_is_refused_and_the_node_keeps_working() {
    let dir = tempfile::tempdir().expect("tempdir");
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let voters = BTreeMap::from([(1, ControllerNode::new("127.0.0.1", port))]);
    let mut config = ControllerConfig::new(1, voters, dir.path().to_path_buf());
    config.timings = test_timings();
    config.entry_bytes_max = 1024;
    let applied = Applied::default();
    let machine = ListMachine {
        applied: applied.clone(),
    };
    let node = RaftController::start_with_listener(config, listener, machine)
        .await
        .expect("start");
    assert_eq!(node.wait_for_leader(WAIT).await.expect("running"), Some(1));
    let big = Payload::encode(&"x".repeat(2000)).expect("encode");
    let refused = tokio::time::timeout(WAIT, node.write(big))
        .await
        .expect("answered");
    assert!(
        matches!(refused, Err(Error::EntryTooLarge { max: 1024, .. })),
        "{refused:?}"
    );
    let index = tokio::time::timeout(WAIT, node.write(Payload::encode(&7).expect("encode")))
        .await
        .expect("answered")
        .expect("write");
    assert_eq!(
        *applied.lock().expect("lock"),
        vec![(index, "7".to_string())]
    );
    node.shutdown().await.expect("shutdown");
}
