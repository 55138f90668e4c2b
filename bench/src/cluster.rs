//! A local 3-node cluster for the replication figures (issue 11, item 7): started by a
//! pluggable [`NodeLauncher`], so the same trials and measurements run against Apache
//! Kafka (the reference, through `shared/reference-kafka/start-node`) today and against
//! Logbook with `--controller-quorum-voters` once it forms a cluster, by switching the
//! launcher only. Also the `cluster` mode: acks=all produce throughput, CPU per GB summed
//! over every node's pid, and end-to-end latency at a fixed rate, RF=3 against RF=1.
//!
//! Ports are below 32768 (the kernel's ephemeral range starts there), so a killed node's
//! port cannot be taken by a client's outgoing connection before it restarts.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use tempfile::TempDir;

use crate::kafka::{self, ProducerSettings};
use crate::procfs::{self, Proc};
use crate::report::fmt;
use crate::Res;

/// How long a node may take to accept connections (three JVMs starting on two cores).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(180);
/// Lowest port handed out.
const PORT_MIN: u32 = 20_000;
/// One past the highest port handed out: the ephemeral range starts here.
const PORT_END: u32 = 32_768;

/// How the nodes of a cluster are started. Both take the same shape of cluster: node ids
/// 1..=N, each with a client port, a controller port, a data directory and the same
/// `controller.quorum.voters`, combined broker+controller roles.
#[derive(Clone, Debug)]
pub enum NodeLauncher {
    /// Apache Kafka, through the reference `start-node` script (static KRaft quorum).
    Kafka {
        /// Path of `shared/reference-kafka/start-node`.
        script: PathBuf,
        /// Extra `server.properties` lines for every node.
        properties: Vec<String>,
    },
    /// The `logbook` binary with the cluster flags.
    Logbook {
        /// Path of the binary.
        bin: PathBuf,
        /// Extra flags for every node.
        args: Vec<String>,
    },
}

impl NodeLauncher {
    /// A short name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            NodeLauncher::Kafka { .. } => "kafka",
            NodeLauncher::Logbook { .. } => "logbook",
        }
    }
}

/// One node: its ports, directory and, while it runs, its pid.
pub struct Node {
    /// `node.id`.
    pub id: i32,
    /// Client port.
    pub port: u16,
    /// Controller (quorum) port.
    pub controller_port: u16,
    dir: PathBuf,
    pid: Option<u32>,
    /// The process when the bench spawned it itself (Logbook); Kafka's JVM is started
    /// by a script and found by pid.
    child: Option<Child>,
}

impl Node {
    /// The client address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The pid while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }
}

/// A cluster of N nodes on 127.0.0.1 owned by the bench; drop kills every node and
/// removes the directories.
pub struct LocalCluster {
    launcher: NodeLauncher,
    nodes: Vec<Node>,
    voters: String,
    cluster_id: String,
    _work: TempDir,
}

impl LocalCluster {
    /// Starts `count` nodes at once (a quorum member waits for the others) under
    /// `data_root` and waits until every one accepts connections.
    pub fn start(launcher: &NodeLauncher, count: usize, data_root: &Path) -> Res<LocalCluster> {
        std::fs::create_dir_all(data_root)?;
        // LOGBOOK_BENCH_KEEP=1 keeps the nodes' directories (logs, data) for a post-mortem.
        let keep = std::env::var_os("LOGBOOK_BENCH_KEEP").is_some();
        let work = tempfile::Builder::new()
            .prefix("logbook-cluster-")
            .disable_cleanup(keep)
            .tempdir_in(data_root)?;
        if keep {
            eprintln!("keeping node directories in {}", work.path().display());
        }
        let mut nodes = Vec::with_capacity(count);
        for i in 1..=count {
            let id = i32::try_from(i)?;
            let dir = work.path().join(format!("n{id}"));
            std::fs::create_dir_all(&dir)?;
            nodes.push(Node {
                id,
                port: low_port()?,
                controller_port: low_port()?,
                dir,
                pid: None,
                child: None,
            });
        }
        let voters = nodes
            .iter()
            .map(|n| format!("{}@127.0.0.1:{}", n.id, n.controller_port))
            .collect::<Vec<_>>()
            .join(",");
        let cluster_id = match launcher {
            NodeLauncher::Kafka { .. } => kafka_cluster_id()?,
            NodeLauncher::Logbook { .. } => String::new(),
        };
        let mut cluster = LocalCluster {
            launcher: launcher.clone(),
            nodes,
            voters,
            cluster_id,
            _work: work,
        };
        let ids: Vec<i32> = cluster.nodes.iter().map(|n| n.id).collect();
        cluster.start_nodes(&ids)?;
        Ok(cluster)
    }

    /// Every node's client address, for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.addr().to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// With `LOGBOOK_BENCH_KEEP` set and gdb installed: writes every running node's thread
    /// backtraces to `stacks-<unix time>.txt` in its directory, for a trial that got stuck
    /// (a hung request path leaves nothing in the log). Returns the files written.
    pub fn dump_stacks(&self) -> Vec<PathBuf> {
        if std::env::var_os("LOGBOOK_BENCH_KEEP").is_none() {
            return Vec::new();
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut written = Vec::new();
        for node in &self.nodes {
            let Some(pid) = node.pid else { continue };
            let output = Command::new("gdb")
                .args([
                    "-batch",
                    "-p",
                    &pid.to_string(),
                    "-ex",
                    "thread apply all bt",
                ])
                .output();
            let Ok(output) = output else { return written };
            let path = node.dir.join(format!("stacks-{now}.txt"));
            if std::fs::write(&path, &output.stdout).is_ok() {
                written.push(path);
            }
        }
        written
    }

    /// Pids of the running nodes.
    pub fn pids(&self) -> Vec<u32> {
        self.nodes.iter().filter_map(Node::pid).collect()
    }

    /// Pid of node `id` while it runs (the chaos nemesis signals it directly).
    pub fn node_pid(&self, id: i32) -> Option<u32> {
        self.nodes.iter().find(|n| n.id == id).and_then(Node::pid)
    }

    fn node_mut(&mut self, id: i32) -> Res<&mut Node> {
        self.nodes
            .iter_mut()
            .find(|n| n.id == id)
            .ok_or_else(|| format!("no node {id}").into())
    }

    /// SIGKILL node `id` and wait until the process is gone.
    pub fn kill(&mut self, id: i32) -> Res<()> {
        let node = self.node_mut(id)?;
        kill_node(node);
        Ok(())
    }

    /// Sends SIGKILL to node `id` and returns at once; the process is reaped (and waited
    /// for) by the next `kill` or `restart`, so a caller timing what follows the kill is
    /// not held up while a large process is torn down.
    pub fn signal_kill(&mut self, id: i32) -> Res<()> {
        let node = self.node_mut(id)?;
        if let Some(child) = node.child.as_mut() {
            // An error means it already exited.
            let _ = child.kill();
        } else if let Some(pid) = node.pid {
            sigkill(pid);
        }
        Ok(())
    }

    /// Starts node `id` again with the same ports and directory.
    pub fn restart(&mut self, id: i32) -> Res<()> {
        self.kill(id)?;
        self.start_nodes(&[id])
    }

    /// Launches the nodes `ids` concurrently and waits for each client port.
    fn start_nodes(&mut self, ids: &[i32]) -> Res<()> {
        let launcher = self.launcher.clone();
        let voters = self.voters.clone();
        let cluster_id = self.cluster_id.clone();
        let results: Vec<Res<()>> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .nodes
                .iter_mut()
                .filter(|n| ids.contains(&n.id))
                .map(|node| {
                    let (launcher, voters, cluster_id) = (&launcher, &voters, &cluster_id);
                    scope.spawn(move || launch(launcher, node, voters, cluster_id))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("a launcher thread panicked".into()))
                })
                .collect()
        });
        results.into_iter().collect()
    }

    /// [`wait_settled`] on this cluster.
    pub fn wait_settled(
        &self,
        brokers: usize,
        topic: Option<(&str, usize)>,
        timeout: Duration,
    ) -> Res<Vec<i32>> {
        wait_settled(&self.bootstrap(), brokers, topic, timeout)
    }

    /// [`create_topic`] on this cluster.
    pub fn create_topic(
        &self,
        rt: &tokio::runtime::Runtime,
        topic: &str,
        partitions: i32,
        rf: i32,
        configs: &[(&str, &str)],
    ) -> Res<()> {
        create_topic(rt, &self.bootstrap(), topic, partitions, rf, configs)
    }

    /// Whether node `id` is the active controller (the Raft leader of the metadata
    /// quorum) now, as far as its log tells: Kafka logs each quorum state transition
    /// ("Completed transition to Leader(…)"), so the last one says. `None` when the log
    /// does not tell (Logbook, until its controller logs its transitions).
    pub fn is_active_controller(&self, id: i32) -> Option<bool> {
        let node = self.nodes.iter().find(|n| n.id == id)?;
        match self.launcher {
            NodeLauncher::Kafka { .. } => {
                let log = std::fs::read_to_string(node.dir.join("kafka.log")).ok()?;
                let marker = "Completed transition to ";
                let last = log.lines().rev().find_map(|line| {
                    line.find(marker).and_then(|i| line.get(i + marker.len()..))
                })?;
                Some(last.starts_with("Leader"))
            }
            NodeLauncher::Logbook { .. } => {
                let log = std::fs::read_to_string(node.dir.join("node.log")).ok()?;
                let marker = "metadata quorum leader: node ";
                let last = log.lines().rev().find_map(|line| {
                    line.find(marker).and_then(|i| line.get(i + marker.len()..))
                })?;
                Some(last.split_whitespace().next()?.parse::<i32>().ok()? == id)
            }
        }
    }

    /// The tail of node `id`'s log, for an error message.
    pub fn log_tail(&self, id: i32) -> String {
        let Some(node) = self.nodes.iter().find(|n| n.id == id) else {
            return String::new();
        };
        let path = match self.launcher {
            NodeLauncher::Kafka { .. } => node.dir.join("kafka.log"),
            NodeLauncher::Logbook { .. } => node.dir.join("node.log"),
        };
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let start = text.len().saturating_sub(4096);
        text.get(start..).unwrap_or_default().to_owned()
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            kill_node(node);
        }
    }
}

/// Waits until Metadata from `bootstrap` lists `brokers` brokers and, if `topic` is given, every one
/// of its partitions has a leader and an ISR of `isr` replicas; returns the leader
/// of each partition.
pub fn wait_settled(
    bootstrap: &str,
    brokers: usize,
    topic: Option<(&str, usize)>,
    timeout: Duration,
) -> Res<Vec<i32>> {
    let deadline = Instant::now() + timeout;
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("allow.auto.create.topics", "false")
        .create()?;
    let mut last = String::from("no answer");
    while Instant::now() < deadline {
        match consumer.fetch_metadata(topic.map(|t| t.0), Duration::from_secs(5)) {
            Ok(metadata) => {
                let live = metadata.brokers().len();
                let mut leaders = Vec::new();
                let mut settled = live == brokers;
                if let Some((name, isr)) = topic {
                    let found = metadata.topics().iter().find(|t| t.name() == name);
                    match found {
                        Some(t) if t.error().is_none() && !t.partitions().is_empty() => {
                            let mut partitions: Vec<_> = t.partitions().iter().collect();
                            partitions.sort_by_key(|p| p.id());
                            for p in partitions {
                                settled &= p.leader() >= 0 && p.isr().len() == isr;
                                leaders.push(p.leader());
                            }
                        }
                        _ => settled = false,
                    }
                }
                last = format!("{live} brokers, leaders {leaders:?}");
                if settled {
                    return Ok(leaders);
                }
            }
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(format!("cluster not settled within {timeout:?}: {last}").into())
}

/// Creates `topic` with `partitions` partitions, replication factor `rf` and topic
/// configs, through `bootstrap`.
pub fn create_topic(
    rt: &tokio::runtime::Runtime,
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    rf: i32,
    configs: &[(&str, &str)],
) -> Res<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let mut new = NewTopic::new(topic, partitions, TopicReplication::Fixed(rf));
    for (key, value) in configs {
        new = new.set(key, value);
    }
    let options = AdminOptions::new()
        .operation_timeout(Some(Duration::from_secs(60)))
        .request_timeout(Some(Duration::from_secs(60)));
    for result in rt.block_on(admin.create_topics([&new], &options))? {
        result.map_err(|(topic, code)| format!("create topic {topic}: {code}"))?;
    }
    Ok(())
}

/// Starts one node with `launcher` and waits until its client port accepts.
fn launch(launcher: &NodeLauncher, node: &mut Node, voters: &str, cluster_id: &str) -> Res<()> {
    match launcher {
        NodeLauncher::Kafka { script, properties } => {
            launch_kafka(script, properties, node, voters, cluster_id)
        }
        NodeLauncher::Logbook { bin, args } => launch_logbook(bin, args, node, voters),
    }
}

/// A reference Kafka node, through the `start-node` script.
fn launch_kafka(
    script: &Path,
    properties: &[String],
    node: &mut Node,
    voters: &str,
    cluster_id: &str,
) -> Res<()> {
    // The script formats the directory once, starts the JVM in the background,
    // waits for the port and prints the JVM's pid.
    let output = Command::new(script)
        .arg(node.id.to_string())
        .arg(node.port.to_string())
        .arg(node.controller_port.to_string())
        .arg(&node.dir)
        .arg(voters)
        .arg(cluster_id)
        .args(properties)
        .env("START_TIMEOUT_S", STARTUP_TIMEOUT.as_secs().to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    if !output.status.success() {
        return Err(format!(
            "start-node {} failed: {}",
            node.id,
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let pid: u32 = String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .map_err(|_| format!("start-node {} printed no pid", node.id))?;
    node.pid = Some(pid);
    Ok(())
}

/// A `logbook` node, its output in `node.log` in its directory; fails if it exits or
/// does not listen within `STARTUP_TIMEOUT`.
fn launch_logbook(bin: &Path, args: &[String], node: &mut Node, voters: &str) -> Res<()> {
    let data = node.dir.join("data");
    std::fs::create_dir_all(&data)?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(node.dir.join("node.log"))?;
    let child = Command::new(bin)
        .arg("--listen")
        .arg(node.addr().to_string())
        .arg("--data-dir")
        .arg(&data)
        .arg("--node-id")
        .arg(node.id.to_string())
        .arg("--controller-quorum-voters")
        .arg(voters)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    node.pid = Some(child.id());
    node.child = Some(child);
    let deadline = Instant::now() + STARTUP_TIMEOUT;
    loop {
        if TcpStream::connect_timeout(&node.addr(), Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if let Some(child) = node.child.as_mut() {
            if let Some(status) = child.try_wait()? {
                node.child = None;
                node.pid = None;
                return Err(format!("node {} exited at start: {status}", node.id).into());
            }
        }
        if Instant::now() > deadline {
            return Err(format!("node {} not listening after {STARTUP_TIMEOUT:?}", node.id).into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGKILL a node and wait until its process is gone.
fn kill_node(node: &mut Node) {
    if let Some(mut child) = node.child.take() {
        // An error means it already exited.
        let _ = child.kill();
        let _ = child.wait();
    } else if let Some(pid) = node.pid {
        sigkill(pid);
        // The JVM is not our child (the script's shell started it), so init reaps it;
        // wait until /proc says it is gone or a zombie.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && process_alive(pid) {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    node.pid = None;
}

/// Sends SIGKILL to `pid`.
fn sigkill(pid: u32) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        #[expect(unsafe_code, reason = "kill(2) has no safe wrapper in libc")]
        // SAFETY: kill takes plain integers and touches no memory of ours.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// True while `/proc/<pid>` exists and is not a zombie.
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(')')
            .and_then(|i| stat.get(i + 1..))
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// A fresh Kafka cluster id from Kafka's own tool (a base64 UUID).
fn kafka_cluster_id() -> Res<String> {
    let lib = std::env::var("KAFKA_REF_LIB").unwrap_or_else(|_| {
        format!(
            "{}/.cache/logbook-reference-kafka/lib",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    let output = Command::new("java")
        .args([
            "-cp",
            &format!("{lib}/*"),
            "kafka.tools.StorageTool",
            "random-uuid",
        ])
        .stdin(Stdio::null())
        .output()?;
    let id = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !output.status.success() || id.is_empty() {
        return Err(format!(
            "kafka StorageTool random-uuid failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    Ok(id)
}

/// A port in `[PORT_MIN, PORT_END)` that was free a moment ago, never the same twice in
/// one process.
pub fn low_port() -> Res<u16> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let span = PORT_END - PORT_MIN;
    let start = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let offset = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = u16::try_from(PORT_MIN + (start + offset) % span)?;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Err(format!("no free port in {PORT_MIN}..{PORT_END}").into())
}

/// Which nodes to start, for both the `failover` and `cluster` modes.
#[derive(clap::Args, Debug, Clone)]
pub struct LauncherOpts {
    /// What the nodes run: `kafka` (the reference, via --kafka-start-node) or `logbook`.
    #[arg(long, default_value = "kafka")]
    pub target: String,
    /// The reference `start-node` script.
    #[arg(long, default_value = "/work/shared/reference-kafka/start-node")]
    pub kafka_start_node: PathBuf,
    /// An extra server.properties line for every Kafka node (repeat it).
    #[arg(long)]
    pub kafka_property: Vec<String>,
    /// The `logbook` binary (default: target/release/logbook beside this binary).
    #[arg(long)]
    pub broker_bin: Option<PathBuf>,
    /// An extra flag for every Logbook node (repeat it).
    #[arg(long, allow_hyphen_values = true)]
    pub broker_arg: Vec<String>,
    /// Nodes in the cluster.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Where the nodes' directories go.
    #[arg(long)]
    pub data_root: Option<PathBuf>,
}

impl LauncherOpts {
    /// The launcher these options describe.
    pub fn launcher(&self) -> Res<NodeLauncher> {
        match self.target.as_str() {
            "kafka" => Ok(NodeLauncher::Kafka {
                script: self.kafka_start_node.clone(),
                properties: self.kafka_property.clone(),
            }),
            "logbook" => Ok(NodeLauncher::Logbook {
                bin: self
                    .broker_bin
                    .clone()
                    .unwrap_or_else(crate::default_broker_bin),
                args: self.broker_arg.clone(),
            }),
            other => Err(format!("--target {other}: expected kafka or logbook").into()),
        }
    }

    /// `--data-root`, or the temporary directory.
    pub fn data_root(&self) -> PathBuf {
        self.data_root.clone().unwrap_or_else(std::env::temp_dir)
    }
}

/// `logbook-bench cluster`: the item-7 figures on a local cluster.
#[derive(Parser, Debug)]
#[command(name = "logbook-bench cluster")]
struct ClusterOpts {
    #[command(flatten)]
    launcher: LauncherOpts,
    /// Replication factors to measure (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "3,1")]
    rf: Vec<i32>,
    /// Partitions of each topic.
    #[arg(long, default_value_t = 8)]
    partitions: i32,
    /// MiB of values in the throughput run.
    #[arg(long, default_value_t = 1024)]
    produce_mib: u64,
    /// Records per second in the latency run.
    #[arg(long, default_value_t = 5000)]
    latency_rate: u32,
    /// Seconds of the latency run.
    #[arg(long, default_value_t = 30.0)]
    latency_secs: f64,
    /// Value bytes per record.
    #[arg(long, default_value_t = 1024)]
    value_bytes: usize,
    /// Measure a running cluster at these HOST:PORTs instead of starting one (topics are
    /// created there; the launcher options are ignored).
    #[arg(long)]
    bootstrap: Option<String>,
    /// With --bootstrap: the brokers' pids (comma-separated), whose CPU and RSS are summed.
    #[arg(long, value_delimiter = ',', requires = "bootstrap")]
    broker_pids: Vec<u32>,
}

/// CPU seconds summed over `pids` (a pid that is gone counts 0).
fn cpu_sum(pids: &[u32]) -> f64 {
    pids.iter()
        .filter_map(|&pid| procfs::cpu_seconds(Proc::Pid(pid)))
        .sum()
}

/// Resident memory summed over `pids`, MiB.
fn rss_sum(pids: &[u32]) -> f64 {
    pids.iter()
        .filter_map(|&pid| procfs::rss_mib(Proc::Pid(pid)))
        .sum()
}

/// One replication factor's figures: on a fresh cluster (unless one is running), a
/// throughput run with one producer, then a paced latency run on a second topic; the
/// row is printed before the cluster goes.
fn measure_rf(
    opts: &ClusterOpts,
    launcher: &NodeLauncher,
    rt: &tokio::runtime::Runtime,
    rf: i32,
    run_id: u64,
) -> Res<[(&'static str, f64); 9]> {
    // A fresh cluster per replication factor, unless one is given.
    let owned = match opts.bootstrap {
        Some(_) => None,
        None => Some(LocalCluster::start(
            launcher,
            opts.launcher.nodes,
            &opts.launcher.data_root(),
        )?),
    };
    let (bootstrap, pids) = match &owned {
        Some(cluster) => (cluster.bootstrap(), cluster.pids()),
        None => (
            opts.bootstrap.clone().unwrap_or_default(),
            opts.broker_pids.clone(),
        ),
    };
    wait_settled(
        &bootstrap,
        opts.launcher.nodes,
        None,
        Duration::from_secs(120),
    )?;
    let topic = format!("cluster-rf{rf}-{run_id}");
    create_settled_topic(opts, rt, &bootstrap, &topic, rf)?;
    let settings = ProducerSettings::default_with("all");
    let (run, wall, broker_cpu, client_cpu) =
        produce_throughput(opts, &bootstrap, &topic, &settings, &pids)?;
    #[expect(clippy::cast_precision_loss, reason = "byte counts far below 2^52")]
    let gb = run.bytes as f64 / 1e9;
    let mb_s = gb * 1000.0 / wall;
    let latency_topic = format!("cluster-latency-rf{rf}-{run_id}");
    create_settled_topic(opts, rt, &bootstrap, &latency_topic, rf)?;
    let latency = kafka::latency_run(
        &bootstrap,
        &latency_topic,
        opts.partitions,
        &settings,
        None,
        opts.latency_rate,
        opts.latency_secs,
        2.0,
        opts.value_bytes,
    )?;
    let rss = rss_sum(&pids);
    let row = [
        ("mb_s", mb_s),
        ("broker_cpu_s_per_gb", broker_cpu / gb),
        (
            "client_cpu_s_per_gb",
            client_cpu.map_or(f64::NAN, |c| c / gb),
        ),
        ("p50_ms", latency.quantile_ms(0.5)),
        ("p99_ms", latency.quantile_ms(0.99)),
        ("p999_ms", latency.quantile_ms(0.999)),
        #[expect(clippy::cast_precision_loss, reason = "small counts")]
        ("lost", latency.lost as f64),
        ("rss_mib", rss),
        #[expect(clippy::cast_precision_loss, reason = "small counts")]
        ("errors", run.errors as f64),
    ];
    print_rf_row(rf, &row, latency.lost, rss);
    Ok(row)
}

/// One replication factor's line of the table.
fn print_rf_row(rf: i32, row: &[(&str, f64)], lost: u64, rss: f64) {
    println!(
        "{rf:<3} {:>5} {:>22} {:>16} {:>7} {:>7} {:>9} {:>5} {:>14}",
        fmt(Some(row[0].1), 0),
        fmt(Some(row[1].1), 2),
        fmt(Some(row[2].1), 2),
        fmt(Some(row[3].1), 1),
        fmt(Some(row[4].1), 1),
        fmt(Some(row[5].1), 1),
        lost,
        fmt(Some(rss), 0),
    );
}

/// Creates `topic` with `rf` replicas (`min.insync.replicas` 2 from RF 2 on) and waits
/// until every partition has its full ISR.
fn create_settled_topic(
    opts: &ClusterOpts,
    rt: &tokio::runtime::Runtime,
    bootstrap: &str,
    topic: &str,
    rf: i32,
) -> Res<()> {
    let min_isr = if rf >= 2 { "2" } else { "1" };
    let isr = usize::try_from(rf)?;
    create_topic(
        rt,
        bootstrap,
        topic,
        opts.partitions,
        rf,
        &[("min.insync.replicas", min_isr)],
    )?;
    wait_settled(
        bootstrap,
        opts.launcher.nodes,
        Some((topic, isr)),
        Duration::from_secs(60),
    )?;
    Ok(())
}

/// The throughput run: `--produce-mib` by one producer; returns the run, its wall
/// seconds from the first send, and the brokers' (summed) and this process's CPU
/// seconds over it.
fn produce_throughput(
    opts: &ClusterOpts,
    bootstrap: &str,
    topic: &str,
    settings: &ProducerSettings,
    pids: &[u32],
) -> Res<(kafka::ProduceRun, f64, f64, Option<f64>)> {
    let value_bytes = u64::try_from(opts.value_bytes)?;
    let records = opts.produce_mib * 1024 * 1024 / value_bytes;
    let start = std::sync::Mutex::new(None);
    let run = kafka::produce_fixed(
        bootstrap,
        topic,
        opts.partitions,
        settings,
        1,
        records,
        opts.value_bytes,
        &|| {
            if let Ok(mut s) = start.lock() {
                *s = Some((Instant::now(), cpu_sum(pids), procfs::cpu_seconds(Proc::Me)));
            }
        },
    )?;
    let (started, broker_cpu0, client_cpu0) = start
        .lock()
        .ok()
        .and_then(|s| *s)
        .ok_or("the producer never started")?;
    let wall = started.elapsed().as_secs_f64();
    let broker_cpu = cpu_sum(pids) - broker_cpu0;
    let client_cpu = procfs::cpu_seconds(Proc::Me)
        .zip(client_cpu0)
        .map(|(b, a)| b - a);
    Ok((run, wall, broker_cpu, client_cpu))
}

/// Runs `logbook-bench cluster ARGS…`: per replication factor, a fresh cluster, one
/// librdkafka producer (linger 5 ms, acks=all) for throughput and broker CPU per GB
/// summed over the nodes, then a paced run for end-to-end p50/p99/p99.9.
pub fn main(args: &[String]) -> Res<bool> {
    let opts = ClusterOpts::parse_from(args);
    let launcher = opts.launcher.launcher()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    println!(
        "logbook-bench cluster · {} × {} · load {}",
        opts.launcher.nodes,
        if opts.bootstrap.is_some() {
            "running"
        } else {
            launcher.name()
        },
        procfs::loadavg()
    );
    println!("rf  MB/s  broker CPU-s/GB (sum)  client CPU-s/GB  p50 ms  p99 ms  p99.9 ms  lost  RSS MiB (sum)");
    let mut metrics = serde_json::Map::new();
    // Topic names unique per run, so a running cluster can be measured again.
    let run_id = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for &rf in &opts.rf {
        for (key, value) in measure_rf(&opts, &launcher, &rt, rf, run_id)? {
            metrics.insert(format!("cluster.rf{rf}.{key}"), serde_json::json!(value));
        }
    }
    let line = serde_json::json!({
        "bench": "logbook-bench cluster",
        "target": if opts.bootstrap.is_some() { "running" } else { launcher.name() },
        "nodes": opts.launcher.nodes,
        "partitions": opts.partitions,
        "produce_mib": opts.produce_mib,
        "latency_rate": opts.latency_rate,
        "metrics": metrics,
    });
    println!("{line}");
    Ok(true)
}
