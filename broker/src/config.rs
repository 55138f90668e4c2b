//! Broker configuration: command-line flags, each with a `LOGBOOK_*` environment equivalent.
//!
//! Every limit the broker enforces lives in [`Limits`], named with its unit last, so an
//! operator can find and change it and a test can exceed it.

mod cluster;
mod file;
mod settings;

pub use cluster::{ClusterConfig, ProcessRoles, QuorumVoter, QuorumVoters};
pub use settings::{env_key, setting, Setting, SETTINGS};

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

/// Kafka's default `message.max.bytes`: 1 MiB plus the 12-byte log overhead.
pub const MESSAGE_MAX_BYTES_DEFAULT: i32 = 1_048_588;

/// Command-line and environment configuration of one broker process.
#[derive(Clone, Debug, Parser)]
#[command(name = "logbook", version, about = "A Kafka-protocol broker")]
pub struct Config {
    /// Address to listen on for Kafka clients.
    #[arg(long, env = "LOGBOOK_LISTEN", default_value = "127.0.0.1:9092")]
    pub listen: SocketAddr,
    /// HOST:PORT given to clients in Metadata; defaults to the listen address.
    #[arg(long, env = "LOGBOOK_ADVERTISED_LISTENER")]
    pub advertised_listener: Option<String>,
    /// Directory holding all partitions and metadata.
    #[arg(long, env = "LOGBOOK_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// This broker's node id (`node.id`; `broker.id` is its old name). With
    /// `--controller-quorum-voters`, a node with the controller role must be listed there.
    #[arg(long, env = "LOGBOOK_NODE_ID", default_value_t = 1)]
    pub node_id: i32,
    /// What this node does (`process.roles`): `broker,controller` (combined, the default),
    /// `broker` or `controller`. A node without `--controller-quorum-voters` must be
    /// combined: it is a single node.
    #[arg(
        long,
        env = "LOGBOOK_PROCESS_ROLES",
        default_value = "broker,controller"
    )]
    pub process_roles: ProcessRoles,
    /// The controller quorum (`controller.quorum.voters`): `1@host:port,2@host:port,…`,
    /// the same on every node. A node with the controller role listens for the quorum on
    /// its own entry; clients still use `--listen`. Empty (the default): a single node.
    #[arg(long, env = "LOGBOOK_CONTROLLER_QUORUM_VOTERS", default_value = "")]
    pub controller_quorum_voters: QuorumVoters,
    /// Create topics on first use by Metadata or Produce (`auto.create.topics.enable`).
    #[arg(long, env = "LOGBOOK_AUTO_CREATE_TOPICS_ENABLE", default_value_t = true, action = clap::ArgAction::Set)]
    pub auto_create_topics_enable: bool,
    /// The active controller moves leadership back to each partition's preferred replica
    /// (the first of its replicas) when it is back in the ISR, every
    /// `leader.imbalance.check.interval.seconds` (`auto.leader.rebalance.enable`).
    #[arg(long, env = "LOGBOOK_AUTO_LEADER_REBALANCE_ENABLE", default_value_t = true, action = clap::ArgAction::Set)]
    pub auto_leader_rebalance_enable: bool,
    /// How often the active controller looks for partitions not led by their preferred
    /// replica (`leader.imbalance.check.interval.seconds`).
    #[arg(
        long,
        env = "LOGBOOK_LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS",
        default_value_t = 300
    )]
    pub leader_imbalance_check_interval_seconds: u64,
    /// Partitions of an auto-created topic, and of a created topic that asks for -1 (`num.partitions`).
    #[arg(long, env = "LOGBOOK_NUM_PARTITIONS", default_value_t = 1)]
    pub num_partitions: i32,
    /// Replication factor used when CreateTopics asks for -1 (`default.replication.factor`).
    #[arg(long, env = "LOGBOOK_DEFAULT_REPLICATION_FACTOR", default_value_t = 1)]
    pub default_replication_factor: i16,
    /// When to fsync: `every-write` (durable acks, the default) or `os` (leave it to the OS).
    #[arg(long, env = "LOGBOOK_FLUSH_POLICY", default_value = "every-write")]
    pub flush_policy: FlushPolicyArg,
    /// Threads that fsync partitions (group commit).
    #[arg(long, env = "LOGBOOK_FLUSH_THREADS", default_value_t = 2)]
    pub flush_threads: usize,
    /// Default `segment.bytes` for topics that do not set it.
    #[arg(long, env = "LOGBOOK_LOG_SEGMENT_BYTES", default_value_t = 1 << 30)]
    pub log_segment_bytes: i64,
    /// Default `retention.ms` for topics that do not set it (-1 keeps forever).
    #[arg(long, env = "LOGBOOK_LOG_RETENTION_MS", default_value_t = 7 * 24 * 3600 * 1000)]
    pub log_retention_ms: i64,
    /// Most disk space a partition reserves ahead of its active segment's end (fallocate),
    /// which saves the file system per-page allocation work on produce; 0 disables. The
    /// reserve is released when the segment rolls or the broker stops.
    #[arg(long, env = "LOGBOOK_LOG_PREALLOCATE_BYTES_MAX", default_value_t = 8 << 20)]
    pub log_preallocate_bytes_max: u64,
    /// Bytes at the end of each partition's active segment kept in the page cache once
    /// durable, so consumers of fresh data never touch the disk; older pages are dropped
    /// after each fsync, which bounds the page cache a partition holds and lets writes
    /// reuse warm memory. 0 leaves the page cache to the kernel.
    #[arg(long, env = "LOGBOOK_PAGE_CACHE_TAIL_BYTES", default_value_t = 64 << 20)]
    pub page_cache_tail_bytes: u64,
    /// How long an idempotent producer's state is kept after its last write
    /// (`producer.id.expiration.ms`); a retry after that is no longer deduplicated.
    #[arg(
        long,
        env = "LOGBOOK_PRODUCER_ID_EXPIRATION_MS",
        default_value_t = 86_400_000
    )]
    pub producer_id_expiration_ms: i64,
    /// How often producers silent for `producer.id.expiration.ms` are looked for
    /// (`producer.id.expiration.check.interval.ms`).
    #[arg(
        long,
        env = "LOGBOOK_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS",
        default_value_t = 600_000
    )]
    pub producer_id_expiration_check_interval_ms: u64,
    /// How often retention is applied.
    #[arg(
        long,
        env = "LOGBOOK_LOG_RETENTION_CHECK_INTERVAL_MS",
        default_value_t = 300_000
    )]
    pub log_retention_check_interval_ms: u64,
    /// Whether the log cleaner compacts `cleanup.policy=compact` topics
    /// (`log.cleaner.enable`); without it `__consumer_offsets` grows forever.
    #[arg(long, env = "LOGBOOK_LOG_CLEANER_ENABLE", default_value_t = true, action = clap::ArgAction::Set)]
    pub log_cleaner_enable: bool,
    /// Log cleaner threads (`log.cleaner.threads`).
    #[arg(long, env = "LOGBOOK_LOG_CLEANER_THREADS", default_value_t = 1)]
    pub log_cleaner_threads: usize,
    /// How long the cleaner sleeps when no log needs cleaning (`log.cleaner.backoff.ms`).
    #[arg(long, env = "LOGBOOK_LOG_CLEANER_BACKOFF_MS", default_value_t = 15_000)]
    pub log_cleaner_backoff_ms: u64,
    /// Memory of the cleaner's key → offset maps, all threads together
    /// (`log.cleaner.dedupe.buffer.size`); a pass cleans only as far as its map holds.
    #[arg(
        long,
        env = "LOGBOOK_LOG_CLEANER_DEDUPE_BUFFER_SIZE",
        default_value_t = 128 << 20
    )]
    pub log_cleaner_dedupe_buffer_size: usize,
    /// Cap on each cleaner thread's read + write rate (`log.cleaner.io.max.bytes.per.second`);
    /// the default (Kafka's `Double.MAX_VALUE`) is unlimited.
    #[arg(
        long,
        env = "LOGBOOK_LOG_CLEANER_IO_MAX_BYTES_PER_SECOND",
        default_value_t = f64::MAX
    )]
    pub log_cleaner_io_max_bytes_per_second: f64,
    /// How long the first rebalance of an empty group waits for more members
    /// (`group.initial.rebalance.delay.ms`).
    #[arg(
        long,
        env = "LOGBOOK_GROUP_INITIAL_REBALANCE_DELAY_MS",
        default_value_t = 3000
    )]
    pub group_initial_rebalance_delay_ms: i32,
    /// Partitions of `__consumer_offsets` when it is created (`offsets.topic.num.partitions`).
    #[arg(
        long,
        env = "LOGBOOK_OFFSETS_TOPIC_NUM_PARTITIONS",
        default_value_t = 50
    )]
    pub offsets_topic_num_partitions: i32,
    /// Replication factor of `__consumer_offsets` when it is created, capped by the
    /// brokers alive then (`offsets.topic.replication.factor`).
    #[arg(
        long,
        env = "LOGBOOK_OFFSETS_TOPIC_REPLICATION_FACTOR",
        default_value_t = 3
    )]
    pub offsets_topic_replication_factor: i16,
    /// Replication factor of `__transaction_state` when it is created, capped by the
    /// brokers alive then (`transaction.state.log.replication.factor`).
    #[arg(
        long,
        env = "LOGBOOK_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
        default_value_t = 3
    )]
    pub transaction_state_log_replication_factor: i16,
    /// How often this broker heartbeats the controller (`broker.heartbeat.interval.ms`).
    #[arg(
        long,
        env = "LOGBOOK_BROKER_HEARTBEAT_INTERVAL_MS",
        default_value_t = 2000
    )]
    pub broker_heartbeat_interval_ms: u64,
    /// A broker without a heartbeat for this long is fenced by the controller
    /// (`broker.session.timeout.ms`).
    #[arg(
        long,
        env = "LOGBOOK_BROKER_SESSION_TIMEOUT_MS",
        default_value_t = 9000
    )]
    pub broker_session_timeout_ms: u64,
    /// A follower that has not caught up with the leader's log end for this long leaves
    /// the ISR (`replica.lag.time.max.ms`).
    #[arg(
        long,
        env = "LOGBOOK_REPLICA_LAG_TIME_MAX_MS",
        default_value_t = 30_000
    )]
    pub replica_lag_time_max_ms: i64,
    /// `segment.bytes` of `__consumer_offsets` when it is created
    /// (`offsets.topic.segment.bytes`).
    #[arg(
        long,
        env = "LOGBOOK_OFFSETS_TOPIC_SEGMENT_BYTES",
        default_value_t = 104_857_600
    )]
    pub offsets_topic_segment_bytes: i32,
    /// How long the offsets of an empty group are kept (`offsets.retention.minutes`).
    #[arg(
        long,
        env = "LOGBOOK_OFFSETS_RETENTION_MINUTES",
        default_value_t = 10080
    )]
    pub offsets_retention_minutes: i64,
    /// How often expired offsets are removed (`offsets.retention.check.interval.ms`).
    #[arg(
        long,
        env = "LOGBOOK_OFFSETS_RETENTION_CHECK_INTERVAL_MS",
        default_value_t = 600_000
    )]
    pub offsets_retention_check_interval_ms: u64,
    /// Partitions of `__transaction_state` when it is created
    /// (`transaction.state.log.num.partitions`).
    #[arg(
        long,
        env = "LOGBOOK_TRANSACTION_STATE_LOG_NUM_PARTITIONS",
        default_value_t = 50
    )]
    pub transaction_state_log_num_partitions: i32,
    /// `segment.bytes` of `__transaction_state` when it is created
    /// (`transaction.state.log.segment.bytes`).
    #[arg(
        long,
        env = "LOGBOOK_TRANSACTION_STATE_LOG_SEGMENT_BYTES",
        default_value_t = 104_857_600
    )]
    pub transaction_state_log_segment_bytes: i32,
    /// `min.insync.replicas` of `__transaction_state` when it is created
    /// (`transaction.state.log.min.isr`; capped at its replica count, as every minimum).
    #[arg(
        long,
        env = "LOGBOOK_TRANSACTION_STATE_LOG_MIN_ISR",
        default_value_t = 2
    )]
    pub transaction_state_log_min_isr: i32,
    /// Largest `transaction.timeout.ms` a producer may ask for (`transaction.max.timeout.ms`).
    #[arg(
        long,
        env = "LOGBOOK_TRANSACTION_MAX_TIMEOUT_MS",
        default_value_t = 900_000
    )]
    pub transaction_max_timeout_ms: i32,
    /// How long a transactional id with no transaction is kept (`transactional.id.expiration.ms`).
    #[arg(
        long,
        env = "LOGBOOK_TRANSACTIONAL_ID_EXPIRATION_MS",
        default_value_t = 604_800_000
    )]
    pub transactional_id_expiration_ms: i64,
    /// How often transactions open past their timeout are aborted
    /// (`transaction.abort.timed.out.transaction.cleanup.interval.ms`).
    #[arg(
        long,
        env = "LOGBOOK_TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS",
        default_value_t = 10_000
    )]
    pub transaction_abort_timed_out_transaction_cleanup_interval_ms: u64,
    /// How often expired transactional ids are removed
    /// (`transaction.remove.expired.transaction.cleanup.interval.ms`).
    #[arg(
        long,
        env = "LOGBOOK_TRANSACTION_REMOVE_EXPIRED_TRANSACTION_CLEANUP_INTERVAL_MS",
        default_value_t = 3_600_000
    )]
    pub transaction_remove_expired_transaction_cleanup_interval_ms: u64,
    /// The finalized level of the `transaction.version` feature (Kafka finalizes it with
    /// `kafka-features.sh upgrade --feature transaction.version=N`, or at `kafka-storage.sh
    /// format --feature`; 2 by default since Kafka 4.0). 2: transaction protocol v2 (KIP-890
    /// part 2: EndTxn v5 bumps the epoch, Produce v12+ and TxnOffsetCommit v5 add their
    /// partition to the transaction). 0 or 1: the v1 flow only; EndTxn and TxnOffsetCommit are
    /// served up to v4, as a Kafka cluster below `transaction.version` 2 does. From 1 on,
    /// `__transaction_state` values are written in the flexible version 1.
    #[arg(
        long,
        env = "LOGBOOK_TRANSACTION_VERSION",
        default_value_t = 2,
        value_parser = clap::value_parser!(i16).range(0..=2)
    )]
    pub transaction_version: i16,
    /// Smallest session timeout a group member may ask for (`group.min.session.timeout.ms`).
    #[arg(
        long,
        env = "LOGBOOK_GROUP_MIN_SESSION_TIMEOUT_MS",
        default_value_t = 6000
    )]
    pub group_min_session_timeout_ms: i32,
    /// Largest session timeout a group member may ask for (`group.max.session.timeout.ms`).
    #[arg(
        long,
        env = "LOGBOOK_GROUP_MAX_SESSION_TIMEOUT_MS",
        default_value_t = 1_800_000
    )]
    pub group_max_session_timeout_ms: i32,
    /// Test-only fault injection: abort the process right after its N-th transaction
    /// marker is appended (see `logbook_replication::failpoint`). Hidden; never set in
    /// production.
    #[arg(long, hide = true, value_name = "N")]
    pub failpoint_abort_after_txn_markers: Option<u64>,
    /// Limits on what clients may ask of the broker.
    #[command(flatten)]
    pub limits: Limits,
    /// A config file of broker settings under Kafka's names: Kafka's `server.properties`
    /// format, or TOML when the name ends in `.toml` (see `config/server.properties`).
    /// `LOGBOOK_*` variables and flags take precedence over it.
    #[arg(long, env = "LOGBOOK_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Wait up to this long for the `--config` file to appear (and stop growing) before
    /// starting: a container runtime can then copy in settings it learns only after the
    /// container starts, such as `advertised.listeners` with a mapped port, into an image
    /// with no shell (what our Testcontainers modules do). 0: the file must exist.
    #[arg(
        long,
        env = "LOGBOOK_CONFIG_WAIT_MS",
        default_value_t = 0,
        value_name = "MS"
    )]
    pub config_wait_ms: u64,
    /// Serve Prometheus metrics on HOST:PORT (`/metrics`, plus `/healthz` and `/readyz`
    /// for orchestrators). Off unless given.
    #[arg(long, env = "LOGBOOK_METRICS_LISTEN", value_name = "HOST:PORT")]
    pub metrics_listen: Option<SocketAddr>,
    /// Serve the fault injector's admin API on the metrics listener (`/faults`, and
    /// `logbook fault …`), so tests can make requests fail, stall or drop on cue. Needs
    /// `--metrics-listen`. Never in production: off unless given.
    #[arg(long, env = "LOGBOOK_FAULT_INJECTION")]
    pub fault_injection: bool,
    /// Most consumer-lag series (group × partition) one scrape reports; the rest are left
    /// out (logged at debug).
    #[arg(
        long,
        env = "LOGBOOK_METRICS_LAG_PARTITIONS_MAX",
        default_value_t = 10_000
    )]
    pub metrics_lag_partitions_max: usize,
    /// Log format on stderr: `text` (the default) or `json`, one object per line.
    #[arg(long, env = "LOGBOOK_LOG_FORMAT", default_value = "text")]
    pub log_format: LogFormat,
    /// A broker setting under its Kafka name, `KEY=VALUE`, as `kafka-server-start.sh`
    /// takes it (repeatable; applied after flags and `KAFKA_*` environment variables).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
    /// Topic defaults given by Kafka name without a flag of their own
    /// (`log.cleanup.policy`, …), and the Kafka-named values of those with one.
    #[arg(skip)]
    pub static_broker_configs: BTreeMap<String, String>,
    /// Kafka settings accepted but without effect here (`num.io.threads=8`, …), as given;
    /// logged at startup.
    #[arg(skip)]
    pub ignored: Vec<String>,
    /// `KAFKA_*` environment variables that name no broker setting (`KAFKA_BOOTSTRAP`,
    /// `KAFKA_BROKERS`, … as application shells and compose files carry them): skipped and
    /// logged once at startup by name (never by value: it may be a secret), as Kafka's
    /// docker image passes them on and Kafka only warns "isn't a known config".
    #[arg(skip)]
    pub ignored_env: Vec<String>,
    /// Kafka names given explicitly (`--override`, `KAFKA_*`): reported as
    /// STATIC_BROKER_CONFIG by DescribeConfigs.
    #[arg(skip)]
    pub explicit: BTreeSet<String>,
    /// Kafka's listener settings (`listeners`, `advertised.listeners`, …) as given; without
    /// `listeners`, `--listen` is the one PLAINTEXT listener (see [`Config::listeners`]).
    #[arg(skip)]
    pub listener_settings: crate::listeners::ListenerSettings,
    /// A SCRAM user to create at start if it has no credential of that mechanism yet, in
    /// the syntax of Kafka's `kafka-storage format --add-scram`:
    /// `SCRAM-SHA-256=[name=admin,password=admin-secret]` (optionally `iterations=N`,
    /// 4096 by default). Repeatable. How the first admin of a SASL-only broker logs in;
    /// later changes go through AlterUserScramCredentials (`kafka-configs.sh`).
    #[arg(long = "add-scram", value_name = "MECHANISM=[name=…,password=…]")]
    pub add_scram: Vec<String>,
    /// The security settings as given (`ssl.*` of `crate::ssl`, `sasl.*` and the others of
    /// `crate::sasl`), plain or under a listener's prefix; read when the listeners start.
    #[arg(skip)]
    pub security_settings: BTreeMap<String, String>,
    /// `authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`.
    #[arg(skip)]
    pub authorizer: crate::authorizer::standard::AuthorizerSettings,
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// The flush policy as given on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FlushPolicyArg {
    /// fsync every write group before acknowledging acks=all and exposing data.
    EveryWrite,
    /// Let the OS write back; acks=all means "in the page cache".
    Os,
}

/// Every bound the broker enforces. Each is configurable and each has a test that exceeds it.
#[derive(Clone, Debug, clap::Args)]
pub struct Limits {
    /// Largest request frame accepted (Kafka's `socket.request.max.bytes`); a larger size
    /// prefix closes the connection before anything is allocated.
    #[arg(long, env = "LOGBOOK_FRAME_BYTES_MAX", default_value_t = 100 * 1024 * 1024)]
    pub frame_bytes_max: usize,
    /// Largest record batch accepted, unless the topic sets `max.message.bytes` (`message.max.bytes`).
    #[arg(long, env = "LOGBOOK_MESSAGE_MAX_BYTES", default_value_t = MESSAGE_MAX_BYTES_DEFAULT)]
    pub message_max_bytes: i32,
    /// Concurrent client connections; further connections wait in the accept backlog.
    #[arg(long, env = "LOGBOOK_CONNECTIONS_MAX", default_value_t = 10_000)]
    pub connections_max: usize,
    /// Connections from one IP address (Kafka's `max.connections.per.ip`, unlimited by
    /// default: `i32::MAX`); a further connection from that address is closed at once.
    #[arg(
        long,
        env = "LOGBOOK_MAX_CONNECTIONS_PER_IP",
        default_value_t = 2_147_483_647
    )]
    pub max_connections_per_ip: usize,
    /// New connections per second across the broker's listeners (Kafka's
    /// `max.connection.creation.rate`, unlimited by default: `i32::MAX`): over it, the
    /// listeners stop accepting until the rate is back under it (KIP-612).
    #[arg(
        long,
        env = "LOGBOOK_MAX_CONNECTION_CREATION_RATE",
        default_value_t = 2_147_483_647
    )]
    pub max_connection_creation_rate: u32,
    /// A connection with no request in flight that receives no request for this long is
    /// closed (Kafka's `connections.max.idle.ms`, 10 minutes).
    #[arg(
        long,
        env = "LOGBOOK_CONNECTIONS_MAX_IDLE_MS",
        default_value_t = 600_000
    )]
    pub connections_max_idle_ms: u64,
    /// Requests read ahead on one connection while earlier ones are still being answered.
    #[arg(
        long,
        env = "LOGBOOK_INFLIGHT_REQUESTS_PER_CONNECTION_MAX",
        default_value_t = 32
    )]
    pub inflight_requests_per_connection_max: usize,
    /// Upper bound on a fetch's `max_wait_ms`.
    #[arg(long, env = "LOGBOOK_FETCH_WAIT_MS_MAX", default_value_t = 30_000)]
    pub fetch_wait_ms_max: u64,
    /// Upper bound on the bytes one fetch response carries (`fetch.max.bytes`).
    #[arg(long, env = "LOGBOOK_FETCH_RESPONSE_BYTES_MAX", default_value_t = 55 * 1024 * 1024)]
    pub fetch_response_bytes_max: usize,
    /// Incremental fetch sessions (KIP-227) cached at once (Kafka's
    /// `max.incremental.fetch.session.cache.slots`); 0 turns sessions off.
    #[arg(
        long,
        env = "LOGBOOK_FETCH_SESSION_CACHE_SLOTS",
        default_value_t = 1_000
    )]
    pub fetch_session_cache_slots: usize,
    /// Partitions all fetch sessions hold together (about 250 bytes each); a session that
    /// would pass it is not cached (Kafka has no such bound: see `fetch_session`).
    #[arg(
        long,
        env = "LOGBOOK_FETCH_SESSION_PARTITIONS_MAX",
        default_value_t = 200_000
    )]
    pub fetch_session_partitions_max: usize,
    /// Upper bound on how long an acks=all produce waits for durability.
    #[arg(long, env = "LOGBOOK_PRODUCE_TIMEOUT_MS_MAX", default_value_t = 30_000)]
    pub produce_timeout_ms_max: u64,
    /// Partitions one CreateTopics may create in total, and that one topic may have.
    #[arg(
        long,
        env = "LOGBOOK_PARTITIONS_PER_TOPIC_MAX",
        default_value_t = 100_000
    )]
    pub partitions_per_topic_max: i32,
    /// Partitions this broker may host in total, over all topics. Each partition holds
    /// one file descriptor, so 0 (the default) derives the limit from `RLIMIT_NOFILE`
    /// (raised to its hard limit at start) less `connections_max` and a fixed headroom
    /// (`partition_budget`). CreateTopics, CreatePartitions and auto-creation past it get
    /// POLICY_VIOLATION before anything is created.
    #[arg(long, env = "LOGBOOK_PARTITIONS_MAX", default_value_t = 0)]
    pub partitions_max: u64,
    /// Members one consumer group may have (`group.max.size`); a further member's JoinGroup
    /// gets GROUP_MAX_SIZE_REACHED.
    #[arg(long, env = "LOGBOOK_GROUP_MAX_SIZE", default_value_t = 10_000)]
    pub group_max_size: usize,
    /// Most bytes one produced batch's records may inflate to when the broker decompresses
    /// them to validate them; a batch beyond it is refused as CORRUPT_MESSAGE before the
    /// rest is inflated, so a small "zip bomb" cannot exhaust memory. Kafka has no batch
    /// bound (its `max.decompressed.message.bytes`, 4.4, caps each record and is unlimited by
    /// default); 64 MiB is 64 times the default `message.max.bytes`, above any real ratio.
    #[arg(
        long,
        env = "LOGBOOK_DECOMPRESSED_BATCH_BYTES_MAX",
        default_value_t = 64 << 20
    )]
    pub decompressed_batch_bytes_max: usize,
    /// Compressed produce payloads at least this large are validated under
    /// `block_in_place` (decompressing costs about 1 ms per 100-300 KiB), so they do not
    /// stall the other connections served by the same async worker. Kafka validates on
    /// its request handler threads and has no such setting.
    #[arg(
        long,
        env = "LOGBOOK_BLOCK_IN_PLACE_COMPRESSED_BYTES_MIN",
        default_value_t = 64 << 10
    )]
    pub block_in_place_compressed_bytes_min: usize,
    /// Uncompressed produce payloads are only walked (a few varints per record); past this
    /// size they too are validated under `block_in_place`.
    #[arg(
        long,
        env = "LOGBOOK_BLOCK_IN_PLACE_BYTES_MIN",
        default_value_t = 1 << 20
    )]
    pub block_in_place_bytes_min: usize,
}

impl Limits {
    /// When validating a produce payload is heavy enough to leave the async worker
    /// (`block_in_place`).
    #[must_use]
    pub fn validation_off_worker(&self) -> logbook_replication::OffWorker {
        logbook_replication::OffWorker {
            bytes_min: self.block_in_place_bytes_min,
            compressed_bytes_min: self.block_in_place_compressed_bytes_min,
        }
    }
}

/// Waits until `path` exists and its length has not changed for 100 ms (a copy into a
/// container lands as a create, then writes), for at most `within`.
///
/// # Errors
/// The file did not appear in time.
fn wait_for_file(path: &std::path::Path, within: std::time::Duration) -> Result<(), String> {
    if within.is_zero() || path.exists() {
        return Ok(());
    }
    tracing_free_notice(path);
    let deadline = std::time::Instant::now() + within;
    let step = std::time::Duration::from_millis(50);
    let mut last: Option<(u64, std::time::Instant)> = None;
    while std::time::Instant::now() < deadline {
        if let Ok(meta) = std::fs::metadata(path) {
            let len = meta.len();
            match last {
                Some((seen, since)) if seen == len && len > 0 && since.elapsed() >= 2 * step => {
                    return Ok(());
                }
                Some((seen, _)) if seen == len => {}
                _ => last = Some((len, std::time::Instant::now())),
            }
        }
        std::thread::sleep(step);
    }
    Err(format!(
        "config file {} did not appear within --config-wait-ms {}",
        path.display(),
        within.as_millis()
    ))
}

/// Logging starts after the configuration is read, so this one line goes to stderr as is.
fn tracing_free_notice(path: &std::path::Path) {
    eprintln!("logbook: waiting for config file {}", path.display());
}

impl Config {
    /// Applies broker settings given under Kafka's names: first `KAFKA_*` variables of
    /// `env` (sorted by name), then each `--override KEY=VALUE` in order, so the last
    /// word wins as with `kafka-server-start.sh`. A `KAFKA_*` variable naming no setting
    /// is not this broker's (the environment is shared with applications): it goes to
    /// [`Config::ignored_env`]. A mistyped `--override` key is still an error: it was
    /// written for this broker.
    ///
    /// # Errors
    /// A message naming the key, the value and what is allowed; the broker must not start.
    pub fn apply_kafka_settings(
        &mut self,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<(), String> {
        let mut from_env: Vec<(String, String, String)> = env
            .into_iter()
            .filter_map(|(var, value)| env_key(&var).map(|key| (key, var, value)))
            .collect();
        from_env.sort();
        for (key, var, value) in from_env {
            if settings::is_known(&key) {
                settings::apply(self, &key, &value)?;
            } else {
                self.ignored_env.push(var);
            }
        }
        for pair in self.overrides.clone() {
            let (key, value) = pair.split_once('=').ok_or_else(|| {
                format!("--override '{pair}' is not KEY=VALUE (e.g. log.segment.bytes=1048576)")
            })?;
            settings::apply(self, key.trim(), value)?;
        }
        self.mark_flags_explicit();
        self.cluster()?;
        self.listeners()?;
        Ok(())
    }

    /// The configuration with no flags and no environment: every default.
    fn defaults() -> Result<Config, String> {
        use clap::{CommandFactory, FromArgMatches};
        let command = Config::command().mut_args(|arg| arg.env(None::<&str>));
        command
            .try_get_matches_from(["logbook"])
            .map_err(|e| e.to_string())
            .and_then(|m| Config::from_arg_matches(&m).map_err(|e| e.to_string()))
    }

    /// Puts the `--config` file between the defaults and what `given` sets: `given` is the
    /// command line parsed without defaults (so it holds only the flags and `LOGBOOK_*`
    /// variables that were set). The precedence is defaults < file < `LOGBOOK_*` < flags;
    /// `KAFKA_*` variables and `--override` then come on top in
    /// [`Config::apply_kafka_settings`]. Without `--config`, `self` is returned as it is.
    ///
    /// # Errors
    /// The file cannot be read or parsed, or names an unknown key or a bad value: the
    /// message names the file, the key, the value and what is allowed.
    pub fn layer_config_file(self, given: &clap::ArgMatches) -> Result<Config, String> {
        use clap::FromArgMatches;
        let Some(path) = self.config.clone() else {
            return Ok(self);
        };
        wait_for_file(&path, std::time::Duration::from_millis(self.config_wait_ms))?;
        let mut layered = Self::defaults()?;
        for (key, value) in file::read(&path)? {
            settings::apply(&mut layered, &key, &value)
                .map_err(|e| format!("config file {}: {e}", path.display()))?;
        }
        let from_file = layered.clone();
        layered
            .update_from_arg_matches(given)
            .map_err(|e| e.to_string())?;
        // A flag or variable that changed what the file set also replaces the file's text
        // of it, which DescribeConfigs would otherwise report (`log.segment.bytes`,
        // `log.retention.hours`, … keep the value as given).
        for setting in settings::SETTINGS {
            if (setting.read)(&from_file) != (setting.read)(&layered) {
                layered.static_broker_configs.remove(setting.name);
            }
        }
        Ok(layered)
    }

    /// The cluster settings (`node.id`, `process.roles`, `controller.quorum.voters`),
    /// checked together.
    ///
    /// # Errors
    /// A message naming the settings that disagree; the broker must not start.
    pub fn cluster(&self) -> Result<ClusterConfig, String> {
        ClusterConfig::new(
            self.node_id,
            self.process_roles,
            self.controller_quorum_voters.clone(),
        )
    }

    /// Adds to `explicit` every Kafka-named setting whose value differs from what a start
    /// with no flags and no environment gives: a value set by a flag (`--listen`,
    /// `--data-dir`, …) or its `LOGBOOK_*` variable is a static broker config, as Kafka
    /// reports what server.properties sets. (A flag set to its default value is reported
    /// as DEFAULT_CONFIG: the two cannot be told apart here, and the value is the same.)
    fn mark_flags_explicit(&mut self) {
        let Ok(defaults) = Self::defaults() else {
            return;
        };
        for setting in settings::SETTINGS {
            if (setting.read)(self) != (setting.read)(&defaults) {
                self.explicit.insert(setting.name.to_string());
            }
        }
    }

    /// The listeners to bind and advertise: Kafka's listener settings, where `listeners`
    /// defaults to `--listen` as one PLAINTEXT listener and `advertised.listeners` to
    /// `--advertised-listener` (then to the listeners themselves, a wildcard host
    /// advertised as this machine's name, as Kafka's `withWildcardHostnamesResolved`).
    ///
    /// # Errors
    /// The settings break one of Kafka's rules (see [`crate::listeners::Listeners::resolve`]).
    pub fn listeners(&self) -> Result<crate::listeners::Listeners, String> {
        let given = &self.listener_settings;
        let settings = crate::listeners::ListenerSettings {
            listeners: given
                .listeners
                .clone()
                .or_else(|| Some(format!("PLAINTEXT://{}", self.listen))),
            advertised_listeners: given.advertised_listeners.clone().or_else(|| {
                self.advertised_listener
                    .as_ref()
                    .map(|a| format!("PLAINTEXT://{a}"))
            }),
            ..given.clone()
        };
        let mut listeners = crate::listeners::Listeners::resolve(&settings)?;
        if settings.advertised_listeners.is_none() {
            for endpoint in &mut listeners.advertised {
                if matches!(endpoint.host.as_str(), "" | "0.0.0.0" | "::") {
                    endpoint.host = crate::listeners::local_host_name();
                }
            }
        }
        Ok(listeners)
    }
}
