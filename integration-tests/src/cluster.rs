//! A cluster of `logbook` processes on 127.0.0.1 for the replication tests: each node has
//! its own client port, controller port, data directory and node id, and the harness can
//! SIGKILL, SIGSTOP/SIGCONT, SIGTERM and restart any one of them with the same directory,
//! which is what the failover scenarios do to a real cluster.
//!
//! Ports are taken below 32768: the kernel hands out local ports of outgoing connections
//! from 32768 up, so a port there, freed by a killed node, can be taken by some client's
//! connection before the node restarts on it. The leader of a partition and the broker
//! list come from a Metadata request made with rdkafka, as a client sees them.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use tempfile::TempDir;

use crate::{broker_binary, startup_timeout, SHUTDOWN_TIMEOUT};

/// How many bytes of a node's log go into a failure message.
const LOG_TAIL_BYTES: u64 = 8 * 1024;
/// Lowest port the harness hands out.
const PORT_MIN: u32 = 20_000;
/// One past the highest port the harness hands out (the ephemeral range starts here).
const PORT_END: u32 = 32_768;

/// How the nodes of a [`Cluster`] are started.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    /// Number of nodes; their node ids are 1..=nodes.
    pub nodes: usize,
    /// Pass `--controller-quorum-voters` naming every node (a real cluster); without it
    /// every node is an independent single-node broker.
    pub quorum: bool,
    /// Extra flags for every node (e.g. shorter session timeouts for a test).
    pub extra_args: Vec<String>,
    /// With a quorum: how many of the nodes (the first ones) are controller-only voters,
    /// the others then being broker-only nodes. 0: every node has both roles.
    pub dedicated_controllers: usize,
    /// Two listeners per node, as Kafka configures them: INTERNAL (the one
    /// [`ClusterNode::bootstrap`] names, and `inter.broker.listener.name`) and PLAINTEXT,
    /// bound on [`ClusterNode::outer_addr`] but advertised at 127.0.0.2, where nothing
    /// listens: a broker that replicated over PLAINTEXT instead of the inter-broker
    /// listener would reach no leader.
    pub internal_listener: bool,
}

impl ClusterSpec {
    /// `nodes` combined broker+controller nodes forming one quorum.
    #[must_use]
    pub fn quorum(nodes: usize) -> ClusterSpec {
        ClusterSpec {
            nodes,
            quorum: true,
            extra_args: Vec::new(),
            dedicated_controllers: 0,
            internal_listener: false,
        }
    }

    /// `controllers` controller-only voters (node ids `1..=controllers`) and `brokers`
    /// broker-only nodes after them, as KRaft clusters with dedicated controllers run.
    #[must_use]
    pub fn dedicated(controllers: usize, brokers: usize) -> ClusterSpec {
        ClusterSpec {
            nodes: controllers + brokers,
            quorum: true,
            extra_args: Vec::new(),
            dedicated_controllers: controllers,
            internal_listener: false,
        }
    }

    /// `nodes` independent single-node brokers (no voters), with node ids 1..=nodes.
    #[must_use]
    pub fn independent(nodes: usize) -> ClusterSpec {
        ClusterSpec {
            nodes,
            quorum: false,
            extra_args: Vec::new(),
            dedicated_controllers: 0,
            internal_listener: false,
        }
    }
}

/// What a node of a [`Cluster`] runs (`--process-roles`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeRole {
    /// `broker,controller` (the default).
    Combined,
    /// `controller`: a voter with no client listener.
    Controller,
    /// `broker`: no voter; pulls the metadata log from the controllers.
    Broker,
}

/// One `logbook` process of a [`Cluster`].
pub struct ClusterNode {
    node_id: i32,
    role: NodeRole,
    port: u16,
    /// The PLAINTEXT listener's port with [`ClusterSpec::internal_listener`].
    outer_port: Option<u16>,
    controller_port: u16,
    data_dir: PathBuf,
    log_path: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
    paused: bool,
}

impl ClusterNode {
    /// This node's `--node-id`.
    #[must_use]
    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// `127.0.0.1:PORT` of its client listener.
    #[must_use]
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Its client listener's address.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// With [`ClusterSpec::internal_listener`]: where its PLAINTEXT listener is bound.
    #[must_use]
    pub fn outer_addr(&self) -> Option<SocketAddr> {
        self.outer_port
            .map(|port| SocketAddr::from(([127, 0, 0, 1], port)))
    }

    /// Port of its entry in `--controller-quorum-voters` (reserved even without a quorum).
    #[must_use]
    pub fn controller_port(&self) -> u16 {
        self.controller_port
    }

    /// Its `--data-dir`, kept across restarts.
    #[must_use]
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// What the node runs.
    #[must_use]
    pub fn role(&self) -> NodeRole {
        self.role
    }

    /// The process id while it runs (also while paused).
    #[must_use]
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// True while the process has not exited (a paused process is running).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// True between `pause` and `resume`.
    #[must_use]
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Everything the node wrote to stderr and stdout, over all its runs.
    #[must_use]
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The last part of the node's log, framed for a panic message.
    #[must_use]
    pub fn log_tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(&self.log_path) {
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            let mut bytes = Vec::new();
            let skip = std::io::SeekFrom::Start(len.saturating_sub(LOG_TAIL_BYTES));
            if std::io::Seek::seek(&mut file, skip).is_ok() {
                let _ = file.read_to_end(&mut bytes);
            }
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
        format!(
            "----- node {} log ({}) -----\n{text}\n----- end of node {} log -----",
            self.node_id,
            self.log_path.display(),
            self.node_id
        )
    }

    /// Starts the process and waits until its client port accepts connections.
    fn spawn(&mut self) {
        assert!(
            self.child.is_none(),
            "node {} already running",
            self.node_id
        );
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .expect("open the node log");
        let child = Command::new(broker_binary())
            .args(&self.args)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned()),
            )
            .env("RUST_BACKTRACE", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", broker_binary().display()));
        self.child = Some(child);
        self.paused = false;
        self.wait_until_accepting();
    }

    /// Waits until the node's client port accepts connections, or for a controller-only
    /// node (which has none) its controller port.
    fn wait_until_accepting(&mut self) {
        // A node restarted while its old broker session is still live registers only once
        // that session ends (DUPLICATE_BROKER_REGISTRATION until then, as Kafka's
        // controller answers), up to broker.session.timeout.ms (9 s) — counted from the
        // activation of a new controller, which gives every broker a whole session.
        let timeout = startup_timeout() + Duration::from_secs(20);
        let deadline = Instant::now() + timeout;
        let addr = match self.role {
            NodeRole::Controller => SocketAddr::from(([127, 0, 0, 1], self.controller_port)),
            NodeRole::Combined | NodeRole::Broker => self.addr(),
        };
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return;
            }
            let child = self.child.as_mut().expect("node spawned");
            if let Some(status) = child.try_wait().expect("check the node process") {
                self.child = None;
                panic!(
                    "node {} exited during startup with {status}\n{}",
                    self.node_id,
                    self.log_tail()
                );
            }
            if Instant::now() > deadline {
                self.kill();
                panic!(
                    "node {} did not accept connections on {} within {timeout:?}\n{}",
                    self.node_id,
                    self.addr(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Sends `signal` (a `kill` name such as `STOP`) to the running process.
    fn signal(&self, signal: &str) {
        let pid = self.pid().expect("node is running");
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(
            status.success(),
            "kill -{signal} {pid} (node {}) failed: {status}",
            self.node_id
        );
    }

    /// SIGKILL and reap: nothing is flushed or checkpointed.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // An error means it already exited, which is what we want.
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused = false;
    }

    /// SIGSTOP: the process keeps its sockets open but answers nothing, as a machine
    /// that hangs (or a long GC pause) does; peers see no FIN.
    pub fn pause(&mut self) {
        self.signal("STOP");
        self.paused = true;
    }

    /// SIGCONT after `pause`.
    pub fn resume(&mut self) {
        self.signal("CONT");
        self.paused = false;
    }

    /// SIGTERM (resuming a paused process first) and wait for the exit; a process still
    /// alive after `SHUTDOWN_TIMEOUT` is killed and the call panics.
    pub fn terminate(&mut self) -> ExitStatus {
        if self.paused {
            self.resume();
        }
        self.signal("TERM");
        let mut child = self.child.take().expect("node is running");
        let deadline = Instant::now() + SHUTDOWN_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().expect("wait for the node") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "node {} did not exit within {SHUTDOWN_TIMEOUT:?} of SIGTERM\n{}",
                    self.node_id,
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the node again on the same ports, directory and flags; kills it first if
    /// it still runs.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

/// One node of a cluster being started (not spawned yet): its directories under
/// `work_root`, its role (combined, or controller or broker with dedicated controllers;
/// `voter` says whether it is one of the quorum's voters) and its command line.
fn new_node(
    work_root: &Path,
    spec: &ClusterSpec,
    voters: &str,
    node_id: i32,
    (port, controller_port): (u16, u16),
    voter: bool,
) -> ClusterNode {
    let dir = work_root.join(format!("node-{node_id}"));
    let data_dir = dir.join("data");
    std::fs::create_dir_all(&data_dir).expect("create a node's data directory");
    let mut args = vec![
        "--listen".to_owned(),
        format!("127.0.0.1:{port}"),
        "--data-dir".to_owned(),
        data_dir.display().to_string(),
        "--node-id".to_owned(),
        node_id.to_string(),
    ];
    let role = if spec.dedicated_controllers == 0 {
        NodeRole::Combined
    } else if voter {
        NodeRole::Controller
    } else {
        NodeRole::Broker
    };
    if spec.quorum {
        args.extend(["--controller-quorum-voters".to_owned(), voters.to_owned()]);
    }
    match role {
        NodeRole::Combined => {}
        NodeRole::Controller => {
            args.extend(["--process-roles".to_owned(), "controller".to_owned()]);
        }
        NodeRole::Broker => {
            args.extend(["--process-roles".to_owned(), "broker".to_owned()]);
        }
    }
    let outer_port = (spec.internal_listener && role != NodeRole::Controller).then(low_port);
    if let Some(outer) = outer_port {
        args.extend(
            [
                format!("listeners=INTERNAL://127.0.0.1:{port},PLAINTEXT://127.0.0.1:{outer}"),
                format!("advertised.listeners=INTERNAL://127.0.0.1:{port},PLAINTEXT://127.0.0.2:{outer}"),
                "listener.security.protocol.map=INTERNAL:PLAINTEXT,PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
                    .to_owned(),
                "inter.broker.listener.name=INTERNAL".to_owned(),
            ]
            .into_iter()
            .flat_map(|o| ["--override".to_owned(), o]),
        );
    }
    args.extend(spec.extra_args.iter().cloned());
    ClusterNode {
        node_id,
        role,
        port,
        outer_port,
        controller_port,
        data_dir,
        log_path: dir.join("node.log"),
        args,
        child: None,
        paused: false,
    }
}

/// N `logbook` processes on 127.0.0.1 (node ids 1..=N). Drop kills every node and
/// removes the directories; a panicking test first gets every node's log tail.
pub struct Cluster {
    nodes: Vec<ClusterNode>,
    voters: String,
    /// Holds the data directories and logs for the cluster's lifetime.
    _work_dir: TempDir,
}

impl Cluster {
    /// Starts every node of `spec` at once (nodes of a quorum wait for each other) and
    /// waits until each accepts connections.
    #[must_use]
    pub fn start(spec: &ClusterSpec) -> Cluster {
        let work_dir = tempfile::Builder::new()
            .prefix("logbook-cluster-")
            .tempdir()
            .expect("create a temporary directory for the cluster");
        let ids: Vec<i32> = (1..=spec.nodes)
            .map(|i| i32::try_from(i).expect("a small node count"))
            .collect();
        let ports: Vec<(u16, u16)> = ids.iter().map(|_| (low_port(), low_port())).collect();
        let is_voter = |id: i32| {
            spec.dedicated_controllers == 0
                || usize::try_from(id).is_ok_and(|i| i <= spec.dedicated_controllers)
        };
        let voters = ids
            .iter()
            .zip(&ports)
            .filter(|(id, _)| is_voter(**id))
            .map(|(id, (_, controller))| format!("{id}@127.0.0.1:{controller}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes: Vec<ClusterNode> = ids
            .iter()
            .zip(&ports)
            .map(|(&node_id, &ports)| {
                new_node(
                    work_dir.path(),
                    spec,
                    &voters,
                    node_id,
                    ports,
                    is_voter(node_id),
                )
            })
            .collect();
        // Spawn all before waiting on any: a quorum member cannot serve alone.
        std::thread::scope(|scope| {
            for node in &mut nodes {
                scope.spawn(|| node.spawn());
            }
        });
        Cluster {
            nodes,
            voters: if spec.quorum { voters } else { String::new() },
            _work_dir: work_dir,
        }
    }

    /// The nodes, in node-id order.
    #[must_use]
    pub fn nodes(&self) -> &[ClusterNode] {
        &self.nodes
    }

    /// The node with id `node_id`.
    ///
    /// # Panics
    /// If there is no such node.
    #[must_use]
    pub fn node(&self, node_id: i32) -> &ClusterNode {
        self.nodes
            .iter()
            .find(|n| n.node_id == node_id)
            .unwrap_or_else(|| panic!("no node {node_id}"))
    }

    /// The node with id `node_id`, to signal or restart it.
    ///
    /// # Panics
    /// If there is no such node.
    pub fn node_mut(&mut self, node_id: i32) -> &mut ClusterNode {
        self.nodes
            .iter_mut()
            .find(|n| n.node_id == node_id)
            .unwrap_or_else(|| panic!("no node {node_id}"))
    }

    /// `--controller-quorum-voters` as given to every node (empty without a quorum).
    #[must_use]
    pub fn voters(&self) -> &str {
        &self.voters
    }

    /// Every broker's client address, comma-separated, for `bootstrap.servers`.
    #[must_use]
    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .filter(|n| n.role != NodeRole::Controller)
            .map(ClusterNode::bootstrap)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Every node's log tail, for a failure message.
    #[must_use]
    pub fn log_tails(&self) -> String {
        self.nodes
            .iter()
            .map(ClusterNode::log_tail)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
        if std::thread::panicking() {
            eprintln!("{}", self.log_tails());
        }
    }
}

/// What a Metadata request answered: the brokers `(node id, host, port)` and, per
/// partition of the topic asked about, its leader (-1 when it has none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataView {
    /// Brokers, sorted by node id.
    pub brokers: Vec<(i32, String, u16)>,
    /// `(partition, leader)` of the topic asked about, sorted by partition; empty when
    /// the topic was not asked about or is unknown.
    pub leaders: Vec<(i32, i32)>,
    /// The same partitions with their replicas and ISR (each sorted), by partition.
    pub partitions: Vec<PartitionView>,
}

/// One partition as Metadata describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionView {
    /// The partition index.
    pub partition: i32,
    /// Its leader, -1 when it has none.
    pub leader: i32,
    /// Its replicas, sorted.
    pub replicas: Vec<i32>,
    /// Its replicas in assignment order: the first is the preferred leader.
    pub assigned: Vec<i32>,
    /// Its in-sync replicas, sorted.
    pub isr: Vec<i32>,
}

/// Asks `bootstrap` for metadata (of `topic`, or of no topic) with rdkafka.
///
/// # Errors
/// rdkafka's message when no broker answered within `timeout`.
pub fn metadata(
    bootstrap: &str,
    topic: Option<&str>,
    timeout: Duration,
) -> Result<MetadataView, String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("allow.auto.create.topics", "false")
        .set("socket.timeout.ms", "3000")
        .create()
        .map_err(|e| format!("create a metadata client: {e}"))?;
    let metadata = consumer
        .fetch_metadata(topic, timeout)
        .map_err(|e| format!("metadata from {bootstrap}: {e}"))?;
    let mut brokers: Vec<(i32, String, u16)> = metadata
        .brokers()
        .iter()
        .map(|b| {
            let port = u16::try_from(b.port()).unwrap_or(0);
            (b.id(), b.host().to_owned(), port)
        })
        .collect();
    brokers.sort();
    let mut leaders: Vec<(i32, i32)> = metadata
        .topics()
        .iter()
        .filter(|t| Some(t.name()) == topic && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| (p.id(), p.leader())))
        .collect();
    leaders.sort_unstable();
    let mut partitions: Vec<PartitionView> = metadata
        .topics()
        .iter()
        .filter(|t| Some(t.name()) == topic && t.error().is_none())
        .flat_map(|t| {
            t.partitions().iter().map(|p| {
                let assigned = p.replicas().to_vec();
                let mut replicas = assigned.clone();
                replicas.sort_unstable();
                let mut isr = p.isr().to_vec();
                isr.sort_unstable();
                PartitionView {
                    partition: p.id(),
                    leader: p.leader(),
                    replicas,
                    assigned,
                    isr,
                }
            })
        })
        .collect();
    partitions.sort_by_key(|p| p.partition);
    Ok(MetadataView {
        brokers,
        leaders,
        partitions,
    })
}

/// The leader of `topic`/`partition` as a client sees it, waiting until there is one.
///
/// # Errors
/// What was last seen, if no leader appeared within `timeout`.
pub fn leader_of(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    timeout: Duration,
) -> Result<i32, String> {
    let mut last = String::new();
    let found = wait_until(timeout, || {
        match metadata(bootstrap, Some(topic), Duration::from_secs(3)) {
            Ok(view) => {
                let leader = view
                    .leaders
                    .iter()
                    .find(|(p, _)| *p == partition)
                    .map(|(_, l)| *l);
                last = format!("{view:?}");
                leader.filter(|l| *l >= 0)
            }
            Err(e) => {
                last = e;
                None
            }
        }
    });
    found.ok_or_else(|| {
        format!("no leader for {topic}-{partition} within {timeout:?}; last seen: {last}")
    })
}

/// Polls `probe` every 100 ms until it returns `Some`, or `None` once `timeout` passed.
pub fn wait_until<T>(timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A port in `[PORT_MIN, PORT_END)` that was free a moment ago. Each test process walks
/// the range from its own pid-derived start, so parallel test binaries rarely probe the
/// same ports, and a port is never handed out twice by one process.
fn low_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let span = PORT_END - PORT_MIN;
    let start = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let offset = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = PORT_MIN + (start + offset) % span;
        let port = u16::try_from(port).expect("below 32768");
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {PORT_MIN}..{PORT_END}");
}
