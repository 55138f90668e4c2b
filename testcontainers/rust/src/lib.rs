//! Logbook, a broker that speaks Kafka's wire protocol, in a container for tests.
//!
//! [`Logbook`] is a [`testcontainers::Image`] of the shell-less `logbook` image (the default
//! target of the repo's `Dockerfile`). Start it with [`Logbook::start`] (or
//! [`Logbook::into_request`], then any [`ImageExt`] option, then
//! [`AsyncRunner::start`](testcontainers::runners::AsyncRunner::start)); the started
//! container then gives clients on the host
//! [`bootstrap_servers`](LogbookContainer::bootstrap_servers) and drives the broker's fault
//! injector through [`LogbookContainer`].
//!
//! ```no_run
//! use testcontainers_logbook::{Logbook, LogbookContainer};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let logbook = Logbook::default().with_fault_injection().start().await?;
//! let bootstrap = logbook.bootstrap_servers(); // e.g. "127.0.0.1:49321"
//! let id = logbook.add_fault(r#"{"kind":"partition_unavailable","topic":"orders"}"#)?;
//! // ... produce to "orders" and watch the client retry ...
//! logbook.clear_fault(id)?;
//! # Ok(()) }
//! ```
//!
//! # How the broker learns its advertised address
//!
//! A Kafka client connects to the bootstrap address, then to whatever address the broker
//! *advertises*, so the broker must advertise the port Docker mapped on the host. The image
//! has no shell, so nothing inside the container can find that port out.
//! testcontainers/README.md has every module copy a one-line `advertised.listeners` file
//! into the started container, which the broker waits for (`LOGBOOK_CONFIG`,
//! `LOGBOOK_CONFIG_WAIT_MS`). The `testcontainers` crate (0.27) cannot do that step: it
//! copies files only *before* the container starts (when the mapped port is not yet
//! known), and its only hook between start and the ready condition,
//! [`Image::exec_before_ready`], runs commands in the container, and this image has no
//! command that writes a file.
//!
//! So this module does the other thing Testcontainers modules do: it chooses free host
//! ports itself before the container is created, maps them explicitly
//! (`with_mapped_port(host_port, 9092)`), and passes the advertised address up front as
//! `KAFKA_ADVERTISED_LISTENERS=EXTERNAL://<host>:<host_port>,BROKER://<name>:9093`; no
//! config file and no `LOGBOOK_CONFIG` are needed. The cost is a short race: another
//! process could take a chosen port between the check and Docker binding it, in which case
//! [`Logbook::start`] chooses new ports and tries again (up to three times).
//!
//! The container's name and hostname are both set to a unique name, so that containers on
//! the same user-defined Docker network reach the broker's `BROKER` listener at
//! [`network_bootstrap_servers`](LogbookContainer::network_bootstrap_servers): Docker's DNS
//! resolves container names there.
//!
//! # TLS
//!
//! [`Logbook::with_tls`] serves the host listener over TLS. The key and chain go in as a PEM
//! keystore file, which 0.27 *can* copy, since it is known before the container starts
//! ([`Image::copy_to_sources`]); only the advertised address needed the port trick above.
//!
//! # Clusters
//!
//! [`LogbookCluster`] starts several nodes on one Docker network, each a broker and a voter of
//! the metadata quorum, reached from the network as `logbook-<id>`, and can
//! [`kill`](LogbookCluster::kill) one for failover tests.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use testcontainers::core::{ContainerPort, ContainerState, ExecCommand, WaitFor};
use testcontainers::runners::AsyncRunner;
use testcontainers::{
    ContainerAsync, ContainerRequest, CopyTargetOptions, CopyToContainer, Image, ImageExt,
    TestcontainersError,
};

/// The listener for clients on the host (mapped to a free host port).
pub const KAFKA_PORT: ContainerPort = ContainerPort::Tcp(9092);
/// The listener for containers on the same Docker network (not mapped).
pub const BROKER_PORT: u16 = 9093;
/// Metrics, health and the fault injector's HTTP API (mapped to a free host port).
pub const ADMIN_PORT: ContainerPort = ContainerPort::Tcp(9644);
/// The metadata quorum's listener on each node of a [`LogbookCluster`] (not mapped).
pub const CONTROLLER_PORT: u16 = 9094;

/// Where [`Logbook::with_tls`] puts the key and chain in the container (the path the Java and
/// Python modules use).
pub const TLS_KEYSTORE: &str = "/tmp/logbook-tls.pem";

/// The image used when `LOGBOOK_IMAGE` is not set.
pub const DEFAULT_IMAGE: &str = "logbook:latest";

/// The line the broker logs (on stderr, as all its logging) once it serves clients.
const READY_LINE: &str = "Kafka Server started";

/// How many times [`Logbook::start`] tries fresh ports when Docker finds one taken.
const START_ATTEMPTS: usize = 3;

/// How long one fault API call may take: a `fence` waits up to 30 s for an abort.
const HTTP_TIMEOUT: Duration = Duration::from_secs(60);

/// The Logbook broker as a Testcontainers image.
///
/// The default is the image named by `LOGBOOK_IMAGE` (`name:tag`), else
/// [`DEFAULT_IMAGE`], with plaintext listeners and the fault injector off.
#[derive(Clone)]
pub struct Logbook {
    name: String,
    tag: String,
    fault_injection: bool,
    /// SASL/PLAIN users of the host listener, in the order given (a repeated user keeps its
    /// place and takes the new password).
    plain_users: Vec<(String, String)>,
    /// Extra variables, applied last (after the module's own).
    env: BTreeMap<String, String>,
    /// The host listener's PEM keystore (key, then chain) from [`Logbook::with_tls`], copied
    /// into the container before it starts.
    tls_keystore: Option<CopyToContainer>,
    /// The node's place in a [`LogbookCluster`]; `None` for a single broker.
    node: Option<ClusterNode>,
    /// The host ports and name chosen when the request is made; `None` until then.
    bound: Option<Bound>,
}

/// Redacts the secrets: a test's failure output must not print the users' passwords or
/// the TLS private key.
impl fmt::Debug for Logbook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let users: Vec<&str> = self.plain_users.iter().map(|(u, _)| u.as_str()).collect();
        f.debug_struct("Logbook")
            .field("name", &self.name)
            .field("tag", &self.tag)
            .field("fault_injection", &self.fault_injection)
            .field("plain_users", &users)
            .field("env", &self.env)
            .field("tls", &self.tls_keystore.as_ref().map(|_| "<keystore>"))
            .field("node", &self.node)
            .field("bound", &self.bound)
            .finish()
    }
}

/// What makes a [`Logbook`] one node of a [`LogbookCluster`].
#[derive(Debug, Clone)]
struct ClusterNode {
    /// Its `node.id`, 1-based.
    id: usize,
    /// How many voters the quorum has.
    size: usize,
    /// The cluster's Docker network.
    network: String,
}

/// What is fixed before the container is created (see the crate docs for why).
#[derive(Debug, Clone)]
struct Bound {
    /// The host clients on the host connect to.
    host: String,
    /// The host port mapped to [`KAFKA_PORT`].
    kafka_port: u16,
    /// The host port mapped to [`ADMIN_PORT`].
    admin_port: u16,
    /// The name containers on the network reach it by (its hostname), advertised on the
    /// `BROKER` listener: the container's name, or `logbook-<id>` for a cluster node.
    network_name: String,
}

impl Default for Logbook {
    fn default() -> Self {
        let image = std::env::var("LOGBOOK_IMAGE")
            .ok()
            .filter(|image| !image.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_IMAGE.to_string());
        Self::from_image(image.trim())
    }
}

impl Logbook {
    /// The image `reference` (`name`, `name:tag`, `registry:port/name:tag`; the tag
    /// defaults to `latest`), otherwise as [`Logbook::default`].
    pub fn from_image(reference: &str) -> Self {
        // A colon after the last slash separates the tag; one before it is a registry port.
        let slash = reference.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match reference[slash..].rfind(':') {
            Some(i) => (&reference[..slash + i], &reference[slash + i + 1..]),
            None => (reference, "latest"),
        };
        Self {
            name: name.to_string(),
            tag: tag.to_string(),
            fault_injection: false,
            plain_users: Vec::new(),
            env: BTreeMap::new(),
            tls_keystore: None,
            node: None,
            bound: None,
        }
    }

    /// Serves the fault injector ([`LogbookContainer::add_fault`]) on the admin port. It is
    /// off unless asked for, as on the broker: without it `/faults` answers 404.
    pub fn with_fault_injection(mut self) -> Self {
        self.fault_injection = true;
        self
    }

    /// Makes the host listener (`EXTERNAL`) SASL_PLAINTEXT with mechanism PLAIN and adds
    /// this user (call again for more users). Clients on the host then need
    /// `security.protocol=SASL_PLAINTEXT`, `sasl.mechanism=PLAIN`, `sasl.username` and
    /// `sasl.password`; the `BROKER` listener for containers on the network stays
    /// plaintext. The users are passed as Kafka's JAAS line in
    /// `KAFKA_LISTENER_NAME_EXTERNAL_PLAIN_SASL_JAAS_CONFIG`, as a Kafka broker takes them.
    pub fn with_sasl_plain_user(
        mut self,
        user: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        let (user, password) = (user.into(), password.into());
        match self.plain_users.iter_mut().find(|(u, _)| *u == user) {
            Some(entry) => entry.1 = password,
            None => self.plain_users.push((user, password)),
        }
        self
    }

    /// Serves the host listener (`EXTERNAL`) over TLS with this certificate chain and private
    /// key (PEM text, the key unencrypted: the broker reads it with rustls, which has no
    /// password support). The chain's first certificate must name the host clients connect
    /// to, the host of [`bootstrap_servers`](LogbookContainer::bootstrap_servers): `127.0.0.1`,
    /// or `localhost` where `TESTCONTAINERS_HOST_OVERRIDE=localhost`, so give it both as
    /// subject alternative names.
    ///
    /// Clients on the host then need `security.protocol=SSL` (`SASL_SSL` with
    /// [`Logbook::with_sasl_plain_user`]) and the issuing CA (`ssl.ca.pem` or
    /// `ssl.ca.location` in librdkafka); the `BROKER` listener for containers on the network
    /// stays plaintext. The key and chain are copied in as one PEM keystore ([`TLS_KEYSTORE`],
    /// key first) and named by `KAFKA_LISTENER_NAME_EXTERNAL_SSL_KEYSTORE_TYPE=PEM` and
    /// `..._LOCATION`, as the Java and Python modules do. Unlike the advertised address, the
    /// file is known before the container starts, so testcontainers 0.27 can copy it.
    pub fn with_tls(
        mut self,
        certificate_chain_pem: impl AsRef<str>,
        private_key_pem: impl AsRef<str>,
    ) -> Self {
        let pem = format!(
            "{}\n{}\n",
            private_key_pem.as_ref().trim(),
            certificate_chain_pem.as_ref().trim()
        );
        // 0644: the broker runs as an unprivileged user, the copy is owned by root.
        self.tls_keystore = Some(CopyToContainer::new(
            pem.into_bytes(),
            CopyTargetOptions::new(TLS_KEYSTORE).with_mode(0o644),
        ));
        self
    }

    /// Sets one more variable on the broker (a `KAFKA_*` setting under Kafka's name, or a
    /// `LOGBOOK_*` flag), after the module's own, so it wins over them.
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(name.into(), value.into());
        self
    }

    /// The request to start: free host ports chosen and mapped for [`KAFKA_PORT`] and
    /// [`ADMIN_PORT`], the advertised address set from them, the container's name and
    /// hostname set. Add other [`ImageExt`] options (a network, a log consumer, …) to
    /// this, not to the image: going from the image straight to
    /// [`AsyncRunner::start`] skips the port choice, and the container then refuses to
    /// start with an error saying so. Do not rename the container: its name is what
    /// [`LogbookContainer::network_bootstrap_servers`] advertises.
    ///
    /// # Errors
    /// No free port could be found on this machine.
    pub fn into_request(mut self) -> Result<ContainerRequest<Logbook>, TestcontainersError> {
        let (kafka_port, admin_port) = free_ports().map_err(|e| {
            TestcontainersError::other(format!("choosing free host ports for Logbook: {e}"))
        })?;
        let unique = format!("{}-{}", std::process::id(), kafka_port);
        // A cluster node is `logbook-<id>` on its network, as in the Java module. 0.27 sets no
        // network aliases, and container names are global to the Docker engine (two clusters
        // would clash), so the node keeps a unique container name and takes `logbook-<id>` as
        // its hostname: on a user-defined network Docker resolves a container's hostname too
        // (it adds it to the endpoint's aliases, the API's `DNSNames`).
        let (container_name, network_name) = match &self.node {
            Some(node) => (format!("{}-{unique}", node.alias()), node.alias()),
            None => (format!("logbook-{unique}"), format!("logbook-{unique}")),
        };
        let network = self.node.as_ref().map(|node| node.network.clone());
        self.bound = Some(Bound {
            host: docker_host(),
            kafka_port,
            admin_port,
            network_name: network_name.clone(),
        });
        let request = self
            .with_mapped_port(kafka_port, KAFKA_PORT)
            .with_mapped_port(admin_port, ADMIN_PORT)
            .with_container_name(container_name)
            .with_hostname(network_name)
            .with_startup_timeout(Duration::from_secs(90));
        Ok(match network {
            Some(network) => request.with_network(network),
            None => request,
        })
    }

    /// Starts the broker and waits until it serves (its `Kafka Server started` line).
    /// If Docker finds a chosen host port taken meanwhile, it tries again with new ports.
    ///
    /// # Errors
    /// Docker is unreachable, the image is missing, or the broker does not start in time
    /// (its log then says why).
    pub async fn start(self) -> Result<ContainerAsync<Logbook>, TestcontainersError> {
        let mut attempt = 1;
        loop {
            let request = self.clone().into_request()?;
            let result = <ContainerRequest<Logbook> as AsyncRunner<Logbook>>::start(request).await;
            match result {
                Err(e) if attempt < START_ATTEMPTS && port_taken(&e) => attempt += 1,
                result => return result,
            }
        }
    }

    fn bound(&self) -> &Bound {
        self.bound
            .as_ref()
            .expect("a started Logbook container always has its ports (Logbook::into_request)")
    }

    /// Kafka's listener settings, plus the module's other variables (README "How a module
    /// starts the broker"), before [`Logbook::with_env`]'s.
    fn module_env(&self) -> Vec<(String, String)> {
        // SASL users, TLS, both or neither, as the Java and Python modules choose it.
        let external = format!(
            "{}{}",
            if self.plain_users.is_empty() {
                ""
            } else {
                "SASL_"
            },
            if self.tls_keystore.is_some() {
                "SSL"
            } else {
                "PLAINTEXT"
            }
        );
        // A cluster node also serves the quorum, on a listener of its own.
        let (controller_listener, controller_protocol) = match self.node {
            Some(_) => (
                format!(",CONTROLLER://0.0.0.0:{CONTROLLER_PORT}"),
                ",CONTROLLER:PLAINTEXT",
            ),
            None => (String::new(), ""),
        };
        let mut env = vec![
            (
                "KAFKA_LISTENERS".to_string(),
                format!(
                    "EXTERNAL://0.0.0.0:{},BROKER://0.0.0.0:{BROKER_PORT}{controller_listener}",
                    KAFKA_PORT.as_u16()
                ),
            ),
            (
                "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP".to_string(),
                format!("EXTERNAL:{external},BROKER:PLAINTEXT{controller_protocol}"),
            ),
            (
                "KAFKA_INTER_BROKER_LISTENER_NAME".to_string(),
                "BROKER".to_string(),
            ),
            (
                "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS".to_string(),
                "0".to_string(),
            ),
            (
                "LOGBOOK_METRICS_LISTEN".to_string(),
                format!("0.0.0.0:{}", ADMIN_PORT.as_u16()),
            ),
        ];
        if let Some(bound) = &self.bound {
            env.push((
                "KAFKA_ADVERTISED_LISTENERS".to_string(),
                format!(
                    "EXTERNAL://{}:{},BROKER://{}:{BROKER_PORT}",
                    bound.host, bound.kafka_port, bound.network_name
                ),
            ));
        }
        if self.fault_injection {
            env.push(("LOGBOOK_FAULT_INJECTION".to_string(), "true".to_string()));
        }
        if self.tls_keystore.is_some() {
            env.push((
                "KAFKA_LISTENER_NAME_EXTERNAL_SSL_KEYSTORE_TYPE".to_string(),
                "PEM".to_string(),
            ));
            env.push((
                "KAFKA_LISTENER_NAME_EXTERNAL_SSL_KEYSTORE_LOCATION".to_string(),
                TLS_KEYSTORE.to_string(),
            ));
        }
        if let Some(node) = &self.node {
            // As the Java module's LogbookCluster: every node a broker and a voter, and
            // internal topics replicated as far as the cluster allows (at most 3), with one
            // replica of slack in the in-sync set.
            let replication = node.size.min(3);
            let voters: Vec<String> = (1..=node.size)
                .map(|id| format!("{id}@{}:{CONTROLLER_PORT}", node_alias(id)))
                .collect();
            for (name, value) in [
                ("KAFKA_NODE_ID", node.id.to_string()),
                ("KAFKA_PROCESS_ROLES", "broker,controller".to_string()),
                ("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER".to_string()),
                ("KAFKA_CONTROLLER_QUORUM_VOTERS", voters.join(",")),
                ("KAFKA_DEFAULT_REPLICATION_FACTOR", replication.to_string()),
                (
                    "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
                    replication.to_string(),
                ),
                (
                    "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
                    replication.to_string(),
                ),
                (
                    "KAFKA_MIN_INSYNC_REPLICAS",
                    replication.saturating_sub(1).max(1).to_string(),
                ),
            ] {
                env.push((name.to_string(), value));
            }
        }
        if !self.plain_users.is_empty() {
            let mut jaas =
                String::from("org.apache.kafka.common.security.plain.PlainLoginModule required");
            for (user, password) in &self.plain_users {
                jaas.push_str(&format!(" user_{user}=\"{}\"", jaas_escape(password)));
            }
            jaas.push(';');
            env.push((
                "KAFKA_SASL_ENABLED_MECHANISMS".to_string(),
                "PLAIN".to_string(),
            ));
            env.push((
                "KAFKA_LISTENER_NAME_EXTERNAL_PLAIN_SASL_JAAS_CONFIG".to_string(),
                jaas,
            ));
        }
        env
    }
}

/// Both mapped ports, exposed only when the request does not map them itself.
const EXPOSED: [ContainerPort; 2] = [KAFKA_PORT, ADMIN_PORT];

impl Image for Logbook {
    fn name(&self) -> &str {
        &self.name
    }

    fn tag(&self) -> &str {
        &self.tag
    }

    /// The broker logs to stderr; it prints this line once its listeners serve.
    fn ready_conditions(&self) -> Vec<WaitFor> {
        vec![WaitFor::message_on_stderr(READY_LINE)]
    }

    fn env_vars(
        &self,
    ) -> impl IntoIterator<
        Item = (
            impl Into<std::borrow::Cow<'_, str>>,
            impl Into<std::borrow::Cow<'_, str>>,
        ),
    > {
        let mut env: BTreeMap<String, String> = self.module_env().into_iter().collect();
        env.extend(self.env.clone());
        env
    }

    /// The TLS keystore, if any: copied before the container starts, which is when 0.27
    /// copies.
    fn copy_to_sources(&self) -> impl IntoIterator<Item = &CopyToContainer> {
        self.tls_keystore.iter()
    }

    fn expose_ports(&self) -> &[ContainerPort] {
        // With its ports mapped (always, through into_request) the request exposes them.
        if self.bound.is_some() {
            &[]
        } else {
            &EXPOSED
        }
    }

    /// Runs nothing; refuses a container whose host port is not the one the broker
    /// advertises, which is what starting the image without [`Logbook::into_request`]
    /// gives: clients would bootstrap, then be sent to an address that does not answer.
    fn exec_before_ready(
        &self,
        cs: ContainerState,
    ) -> testcontainers::core::error::Result<Vec<ExecCommand>> {
        let Some(bound) = &self.bound else {
            return Err(TestcontainersError::other(
                "start Logbook with Logbook::start() or Logbook::into_request(), not the image \
                 itself: the broker must be told its mapped host port before it starts",
            ));
        };
        let mapped = cs.host_port_ipv4(KAFKA_PORT)?;
        if mapped != bound.kafka_port {
            return Err(TestcontainersError::other(format!(
                "Logbook advertises host port {} but Docker mapped {KAFKA_PORT} to {mapped}: \
                 keep the port mapping of Logbook::into_request()",
                bound.kafka_port
            )));
        }
        Ok(Vec::new())
    }
}

/// What a started Logbook container offers: its addresses and the fault injector's calls
/// (README "Fault injection": `POST /faults`, `GET /faults`, `DELETE /faults[/<id>]`).
///
/// The fault calls are plain blocking HTTP/1.1 over [`std::net::TcpStream`] (one short
/// request to a local port), which keeps this crate free of an HTTP client and of a
/// particular async runtime; they are fine to call from async tests.
pub trait LogbookContainer {
    /// `host:port` for clients on the host (the advertised `EXTERNAL` listener).
    fn bootstrap_servers(&self) -> String;

    /// `name:9093` for containers on the same user-defined Docker network (the
    /// advertised `BROKER` listener, always plaintext).
    fn network_bootstrap_servers(&self) -> String;

    /// The fault injector's base URL, `http://host:port` (also `/metrics`, `/healthz`).
    fn fault_url(&self) -> String;

    /// Arms a fault from its JSON, e.g.
    /// `{"kind":"error","api":"Produce","topic":"orders","error":"NOT_LEADER_OR_FOLLOWER","count":3}`;
    /// its id, for [`LogbookContainer::clear_fault`] and the [`LogbookContainer::faults`] list.
    ///
    /// # Errors
    /// The broker refused the spec (HTTP 400, with its reason), fault injection is off
    /// (404: see [`Logbook::with_fault_injection`]) or the call failed.
    fn add_fault(&self, json: &str) -> Result<u64, FaultError>;

    /// Every fault with `id`, `injected` (how often it acted), `armed` and its spec, as
    /// the broker's JSON list.
    ///
    /// # Errors
    /// As [`LogbookContainer::add_fault`].
    fn faults(&self) -> Result<serde_json::Value, FaultError>;

    /// Clears every fault; how many there were.
    ///
    /// # Errors
    /// As [`LogbookContainer::add_fault`].
    fn clear_faults(&self) -> Result<u64, FaultError>;

    /// Clears the fault `id`.
    ///
    /// # Errors
    /// No such fault (404), or as [`LogbookContainer::add_fault`].
    fn clear_fault(&self, id: u64) -> Result<(), FaultError>;
}

impl LogbookContainer for ContainerAsync<Logbook> {
    fn bootstrap_servers(&self) -> String {
        let bound = self.image().bound();
        format!("{}:{}", bound.host, bound.kafka_port)
    }

    fn network_bootstrap_servers(&self) -> String {
        format!("{}:{BROKER_PORT}", self.image().bound().network_name)
    }

    fn fault_url(&self) -> String {
        let bound = self.image().bound();
        format!("http://{}:{}", bound.host, bound.admin_port)
    }

    fn add_fault(&self, json: &str) -> Result<u64, FaultError> {
        let answer = fault_call(self.image().bound(), "POST", "/faults", Some(json))?;
        answer["id"]
            .as_u64()
            .ok_or_else(|| FaultError(format!("POST /faults: no fault id in {answer}")))
    }

    fn faults(&self) -> Result<serde_json::Value, FaultError> {
        fault_call(self.image().bound(), "GET", "/faults", None)
    }

    fn clear_faults(&self) -> Result<u64, FaultError> {
        let answer = fault_call(self.image().bound(), "DELETE", "/faults", None)?;
        Ok(answer["cleared"].as_u64().unwrap_or(0))
    }

    fn clear_fault(&self, id: u64) -> Result<(), FaultError> {
        fault_call(
            self.image().bound(),
            "DELETE",
            &format!("/faults/{id}"),
            None,
        )
        .map(drop)
    }
}

/// `logbook-<id>`: how the nodes of a [`LogbookCluster`] reach node `id` on their network.
fn node_alias(id: usize) -> String {
    format!("logbook-{id}")
}

impl ClusterNode {
    fn alias(&self) -> String {
        node_alias(self.id)
    }
}

/// Several Logbook nodes on one Docker network, each a broker and a voter of the metadata
/// quorum (KRaft's `process.roles=broker,controller`), with replication factor
/// `min(size, 3)` by default: for failover tests (kill a node, and the partitions it led move).
///
/// Each node is a [`Logbook`] container with its own mapped host ports
/// ([`LogbookContainer::bootstrap_servers`]), reached from the network as
/// `logbook-<id>:9093` and by the other voters as `logbook-<id>:9094`, with the variables of
/// the Java module's `LogbookCluster`. The nodes start together: none is ready (logs
/// `Kafka Server started`) before a majority of voters has elected a leader, so starting them
/// one after another would wait on the first forever.
///
/// Dropping the cluster removes its containers, and testcontainers then removes the network
/// it created with the first of them.
///
/// ```no_run
/// use testcontainers_logbook::LogbookCluster;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let cluster = LogbookCluster::start(3).await?;
/// let bootstrap = cluster.bootstrap_servers().await; // "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
/// // ... produce, find the partition's leader, then take it away for good:
/// cluster.kill(2).await?;
/// # Ok(()) }
/// ```
pub struct LogbookCluster {
    network: String,
    /// Node `id` at index `id - 1`.
    nodes: Vec<ContainerAsync<Logbook>>,
}

impl fmt::Debug for LogbookCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogbookCluster")
            .field("network", &self.network)
            .field(
                "nodes",
                &self.nodes.iter().map(|node| node.id()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl LogbookCluster {
    /// Starts `size` nodes of the default image ([`Logbook::default`]) and waits until every
    /// one serves.
    ///
    /// # Errors
    /// As [`LogbookCluster::start_with`].
    pub async fn start(size: usize) -> Result<Self, TestcontainersError> {
        Self::start_with(Logbook::default(), size).await
    }

    /// Starts `size` nodes made from `template` (its image, fault injection, SASL users, TLS
    /// and variables apply to every node; its variables still win over the module's) and
    /// waits until every one serves. The nodes start concurrently, each retrying on a taken
    /// host port as [`Logbook::start`] does.
    ///
    /// # Errors
    /// `size` is 0, or a node did not start (the first such error, naming the node); the
    /// nodes that did start are removed again.
    pub async fn start_with(template: Logbook, size: usize) -> Result<Self, TestcontainersError> {
        if size == 0 {
            return Err(TestcontainersError::other(
                "a Logbook cluster needs at least one node",
            ));
        }
        let network = unique_network_name();
        let starts = (1..=size).map(|id| {
            let mut node = template.clone();
            node.node = Some(ClusterNode {
                id,
                size,
                network: network.clone(),
            });
            node.start()
        });
        // Joined, not spawned: the crate stays free of a particular async runtime, and the
        // futures still progress together (each mostly waits on Docker and on its log).
        let results = futures::future::join_all(starts).await;
        let mut nodes = Vec::with_capacity(size);
        let mut failure = None;
        for (index, result) in results.into_iter().enumerate() {
            match result {
                Ok(node) => nodes.push(node),
                Err(e) => {
                    failure.get_or_insert_with(|| {
                        TestcontainersError::other(format!(
                            "Logbook cluster node {} did not start: {e}",
                            index + 1
                        ))
                    });
                }
            }
        }
        match failure {
            // Dropping the nodes that started removes them (and then the network).
            Some(error) => Err(error),
            None => Ok(Self { network, nodes }),
        }
    }

    /// Node `id` (1-based, its `node.id`).
    ///
    /// # Panics
    /// There is no node `id`.
    pub fn node(&self, id: usize) -> &ContainerAsync<Logbook> {
        assert!(
            (1..=self.nodes.len()).contains(&id),
            "no Logbook node {id} in a cluster of {}",
            self.nodes.len()
        );
        &self.nodes[id - 1]
    }

    /// Every node, node 1 first.
    pub fn nodes(&self) -> &[ContainerAsync<Logbook>] {
        &self.nodes
    }

    /// How many nodes the cluster has (running or not).
    pub fn size(&self) -> usize {
        self.nodes.len()
    }

    /// The Docker network the nodes share: give it to other containers of the test
    /// ([`ImageExt::with_network`]) to reach [`LogbookCluster::network_bootstrap_servers`].
    pub fn network(&self) -> &str {
        &self.network
    }

    /// Every *running* node's host address, comma-separated, for `bootstrap.servers`. Async,
    /// since whether a node runs is Docker's to say (it may have been killed or stopped).
    pub async fn bootstrap_servers(&self) -> String {
        let mut running = Vec::new();
        for node in &self.nodes {
            if node.is_running().await.unwrap_or(false) {
                running.push(node.bootstrap_servers());
            }
        }
        running.join(",")
    }

    /// `logbook-1:9093,logbook-2:9093,...` for containers on [`LogbookCluster::network`]
    /// (every node, running or not, as a client's bootstrap list may name dead ones).
    pub fn network_bootstrap_servers(&self) -> String {
        (1..=self.nodes.len())
            .map(|id| format!("{}:{BROKER_PORT}", node_alias(id)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Kills node `id` with SIGKILL, as a crash: no graceful shutdown, no leadership handed
    /// over. testcontainers 0.27 can only *stop* a container (its stop signal first), so
    /// this asks Docker directly through testcontainers' re-exported `bollard`, connecting
    /// as `bollard::Docker::connect_with_defaults` does (`DOCKER_HOST`, else the local
    /// socket). Returns once Docker reports the container exited; the container is kept
    /// (and removed with the cluster), and [`LogbookCluster::bootstrap_servers`] leaves it
    /// out from then on.
    ///
    /// # Errors
    /// Docker is unreachable or refused, or the node still runs after the kill.
    ///
    /// # Panics
    /// There is no node `id`.
    pub async fn kill(&self, id: usize) -> Result<(), TestcontainersError> {
        use futures::StreamExt;
        let node = self.node(id);
        let docker = testcontainers::bollard::Docker::connect_with_defaults()
            .map_err(|e| TestcontainersError::other(format!("connecting to Docker: {e}")))?;
        // No options: Docker's default signal, SIGKILL.
        docker
            .kill_container(node.id(), None)
            .await
            .map_err(|e| TestcontainersError::other(format!("killing Logbook node {id}: {e}")))?;
        // Waits until the container is not running. bollard reports the killed process's
        // exit code (137) as an error, so the outcome is checked by asking again instead.
        let _exit = std::pin::pin!(docker.wait_container(node.id(), None))
            .next()
            .await;
        if node.is_running().await? {
            return Err(TestcontainersError::other(format!(
                "Logbook node {id} still runs after SIGKILL"
            )));
        }
        Ok(())
    }
}

/// A network name no other cluster uses, in this process or another on the same engine.
fn unique_network_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "logbook-cluster-{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A fault API call that failed: what was asked and what came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultError(pub String);

impl fmt::Display for FaultError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FaultError {}

/// `method path` on the admin port with an optional JSON body; the JSON answer of a 200.
fn fault_call(
    bound: &Bound,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<serde_json::Value, FaultError> {
    let what = |e: String| FaultError(format!("{method} {path}: {e}"));
    let (status, text) = http_request(&bound.host, bound.admin_port, method, path, body)
        .map_err(|e| what(e.to_string()))?;
    if status != 200 {
        return Err(what(format!("HTTP {status} {}", text.trim())));
    }
    serde_json::from_str(&text).map_err(|e| what(format!("answer is not JSON ({e}): {text}")))
}

/// One HTTP/1.1 request with `Connection: close`, read to the end: status and body.
/// Enough for the broker's admin endpoint, which answers each request with a complete
/// body (`Content-Length`); a chunked answer is decoded too.
fn http_request(
    host: &str,
    port: u16,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> std::io::Result<(u16, String)> {
    use std::io::{Error, ErrorKind};
    let addr = (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| Error::new(ErrorKind::NotFound, format!("{host} has no address")))?;
    let mut stream = TcpStream::connect_timeout(&addr, HTTP_TIMEOUT)?;
    stream.set_read_timeout(Some(HTTP_TIMEOUT))?;
    stream.set_write_timeout(Some(HTTP_TIMEOUT))?;
    let body = body.unwrap_or("");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let bad = |what: &str| Error::new(ErrorKind::InvalidData, what.to_string());
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of HTTP headers"))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut content = raw[split + 4..].to_vec();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .ok_or_else(|| bad("no HTTP status"))?;
    let header = |name: &str| {
        head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then(|| value.trim().to_ascii_lowercase())
        })
    };
    if header("transfer-encoding").is_some_and(|te| te.contains("chunked")) {
        content = dechunk(&content).ok_or_else(|| bad("bad chunked body"))?;
    } else if let Some(length) = header("content-length").and_then(|l| l.parse::<usize>().ok()) {
        content.truncate(length);
    }
    Ok((status, String::from_utf8_lossy(&content).into_owned()))
}

/// The body of a chunked transfer encoding.
fn dechunk(mut data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = data.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&data[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(data.get(..size)?);
        data = data.get(size + 2..)?;
    }
}

/// Two distinct free TCP ports on all interfaces, as Docker will bind them.
fn free_ports() -> std::io::Result<(u16, u16)> {
    // Both listeners stay open until both are chosen, so the ports differ.
    let kafka = TcpListener::bind(("0.0.0.0", 0))?;
    let admin = TcpListener::bind(("0.0.0.0", 0))?;
    Ok((kafka.local_addr()?.port(), admin.local_addr()?.port()))
}

/// The host where Docker publishes ports, as testcontainers finds it:
/// `TESTCONTAINERS_HOST_OVERRIDE`, else the host of a `tcp://` (or `http(s)://`)
/// `DOCKER_HOST`, else this machine (`127.0.0.1`, not `localhost`, which some clients
/// resolve to `::1` first).
fn docker_host() -> String {
    if let Some(host) = std::env::var("TESTCONTAINERS_HOST_OVERRIDE")
        .ok()
        .filter(|h| !h.trim().is_empty())
    {
        return host.trim().to_string();
    }
    if let Ok(docker_host) = std::env::var("DOCKER_HOST") {
        for scheme in ["tcp://", "http://", "https://"] {
            if let Some(rest) = docker_host.strip_prefix(scheme) {
                let authority = rest.split('/').next().unwrap_or(rest);
                let host = match authority.rsplit_once(':') {
                    Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
                    _ => authority,
                };
                if !host.is_empty() {
                    return host.to_string();
                }
            }
        }
    }
    "127.0.0.1".to_string()
}

/// Whether Docker refused to start the container because a mapped host port was taken.
fn port_taken(error: &TestcontainersError) -> bool {
    let text = error.to_string().to_ascii_lowercase();
    text.contains("port is already allocated") || text.contains("address already in use")
}

/// A password as a double-quoted JAAS value.
fn jaas_escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references_split_at_the_tag() {
        let split = |r: &str| {
            let l = Logbook::from_image(r);
            (l.name, l.tag)
        };
        assert_eq!(split("logbook:latest"), ("logbook".into(), "latest".into()));
        assert_eq!(split("logbook"), ("logbook".into(), "latest".into()));
        assert_eq!(
            split("registry:5000/team/logbook:1.2"),
            ("registry:5000/team/logbook".into(), "1.2".into())
        );
        assert_eq!(
            split("registry:5000/logbook"),
            ("registry:5000/logbook".into(), "latest".into())
        );
    }

    #[test]
    fn sasl_users_make_the_external_listener_sasl_plain() {
        let env: BTreeMap<String, String> = Logbook::default()
            .with_sasl_plain_user("alice", "secret")
            .module_env()
            .into_iter()
            .collect();
        assert_eq!(
            env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"],
            "EXTERNAL:SASL_PLAINTEXT,BROKER:PLAINTEXT"
        );
        assert_eq!(env["KAFKA_SASL_ENABLED_MECHANISMS"], "PLAIN");
        assert_eq!(
            env["KAFKA_LISTENER_NAME_EXTERNAL_PLAIN_SASL_JAAS_CONFIG"],
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret";"#
        );
        assert!(!env.contains_key("LOGBOOK_FAULT_INJECTION"));
        assert!(!env.contains_key("LOGBOOK_CONFIG"));
    }

    fn env_of(logbook: &Logbook) -> BTreeMap<String, String> {
        logbook.module_env().into_iter().collect()
    }

    #[test]
    fn tls_makes_the_external_listener_ssl_and_copies_the_keystore() {
        let logbook = Logbook::default().with_tls("CHAIN\n", "  KEY\n");
        let env = env_of(&logbook);
        assert_eq!(
            env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"],
            "EXTERNAL:SSL,BROKER:PLAINTEXT"
        );
        assert_eq!(env["KAFKA_LISTENER_NAME_EXTERNAL_SSL_KEYSTORE_TYPE"], "PEM");
        assert_eq!(
            env["KAFKA_LISTENER_NAME_EXTERNAL_SSL_KEYSTORE_LOCATION"],
            "/tmp/logbook-tls.pem"
        );
        let copies: Vec<&CopyToContainer> = logbook.copy_to_sources().into_iter().collect();
        assert_eq!(copies.len(), 1);
        // CopyToContainer's fields are private; its Debug shows them all.
        let debug = format!("{:?}", copies[0]);
        assert!(
            debug.contains(r#"target: "/tmp/logbook-tls.pem", mode: Some(420)"#),
            "0644 at TLS_KEYSTORE: {debug}"
        );
        let key_then_chain = format!("Data({:?})", b"KEY\nCHAIN\n".to_vec());
        assert!(debug.contains(&key_then_chain), "{debug}");
        // With SASL users too, SASL_SSL, in either order.
        for both in [
            logbook.clone().with_sasl_plain_user("alice", "secret"),
            Logbook::default()
                .with_sasl_plain_user("alice", "secret")
                .with_tls("CHAIN", "KEY"),
        ] {
            assert_eq!(
                env_of(&both)["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"],
                "EXTERNAL:SASL_SSL,BROKER:PLAINTEXT"
            );
        }
        assert_eq!(Logbook::default().copy_to_sources().into_iter().count(), 0);
    }

    #[test]
    fn cluster_nodes_get_the_java_modules_variables() {
        let mut logbook = Logbook {
            node: Some(ClusterNode {
                id: 2,
                size: 3,
                network: "net".to_string(),
            }),
            ..Logbook::default()
        };
        let env = env_of(&logbook);
        let expected = [
            ("KAFKA_NODE_ID", "2"),
            ("KAFKA_PROCESS_ROLES", "broker,controller"),
            (
                "KAFKA_LISTENERS",
                "EXTERNAL://0.0.0.0:9092,BROKER://0.0.0.0:9093,CONTROLLER://0.0.0.0:9094",
            ),
            (
                "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
                "EXTERNAL:PLAINTEXT,BROKER:PLAINTEXT,CONTROLLER:PLAINTEXT",
            ),
            ("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER"),
            (
                "KAFKA_CONTROLLER_QUORUM_VOTERS",
                "1@logbook-1:9094,2@logbook-2:9094,3@logbook-3:9094",
            ),
            ("KAFKA_DEFAULT_REPLICATION_FACTOR", "3"),
            ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "3"),
            ("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "3"),
            ("KAFKA_MIN_INSYNC_REPLICAS", "2"),
            ("KAFKA_INTER_BROKER_LISTENER_NAME", "BROKER"),
        ];
        for (name, value) in expected {
            assert_eq!(env[name], value, "{name}");
        }
        // Replication min(size, 3), min ISR one less but at least 1.
        for (size, replication, min_isr) in [(1, "1", "1"), (2, "2", "1"), (5, "3", "2")] {
            logbook.node = Some(ClusterNode {
                id: 1,
                size,
                network: "net".to_string(),
            });
            let env = env_of(&logbook);
            assert_eq!(env["KAFKA_DEFAULT_REPLICATION_FACTOR"], replication);
            assert_eq!(env["KAFKA_MIN_INSYNC_REPLICAS"], min_isr);
        }
        assert_eq!(
            env_of(&logbook)["KAFKA_CONTROLLER_QUORUM_VOTERS"],
            "1@logbook-1:9094,2@logbook-2:9094,3@logbook-3:9094,4@logbook-4:9094,5@logbook-5:9094"
        );
        // A single broker has no quorum settings.
        let single = env_of(&Logbook::default());
        assert!(!single.contains_key("KAFKA_NODE_ID"));
        assert!(!single.contains_key("KAFKA_CONTROLLER_QUORUM_VOTERS"));
    }

    #[test]
    fn debug_output_names_users_but_not_passwords_or_the_key() {
        let logbook = Logbook::default()
            .with_sasl_plain_user("alice", "alice-secret")
            .with_tls("CHAIN", "PRIVATE-KEY-BYTES");
        let shown = format!("{logbook:?}");
        assert!(shown.contains("\"alice\""), "{shown}");
        assert!(shown.contains("<keystore>"), "{shown}");
        assert!(!shown.contains("alice-secret"), "{shown}");
        assert!(!shown.contains("PRIVATE-KEY-BYTES"), "{shown}");
    }

    #[test]
    fn chunked_bodies_are_decoded() {
        assert_eq!(
            dechunk(b"4\r\n[{}]\r\n2\r\n[]\r\n0\r\n\r\n").as_deref(),
            Some(&b"[{}][]"[..])
        );
    }
}
