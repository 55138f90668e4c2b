//! Start-up and shutdown of a node. [`run`] goes through the phases of Kafka's
//! `BrokerServer.startup`, each a function here, in this order:
//!
//! 1. `open_storage`: the `ReplicaManager` over the data directory (flusher, cleaner);
//! 2. `join_quorum`: the topics view and metadata publisher, this node's voter (or the
//!    metadata follower of a broker-only node), the controller client, the AlterPartition
//!    manager, registration until unfenced, and the catch-up of the metadata log
//!    (`Membership` holds what it started);
//! 3. `load_coordinators`: the group and transaction coordinators over
//!    `coordinator_partition_writer`, following their partitions' leadership from then on;
//! 4. `serve`: bind, accept connections under the connection limits
//!    (`accept_connections`), run retention, until SIGTERM/Ctrl-C.
//!
//! Shutdown runs them backwards: controlled shutdown, stop accepting and let connections
//! send what they owe, stop the coordinators, leave the quorum (`Membership::leave`), close
//! every log with a clean-shutdown checkpoint. A controller-only node runs
//! `run_controller_only` instead.

use std::sync::Arc;
use std::time::Duration;

use logbook_controller::metadata_state_machine::MetadataPublication;
use logbook_controller::quorum::{QuorumConfig, QuorumController, SystemClock};
use logbook_controller::{
    ControllerClient, ControllerClientConfig, ControllerConfig, ControllerNode,
};
use logbook_replication::{FlushPolicy, ReplicaManager};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::broker::Broker;
use crate::cluster::lifecycle::{BrokerLifecycle, CONTROLLED_SHUTDOWN_TIMEOUT};
use crate::cluster::metadata_cache::InterBrokerEndpoints;
use crate::cluster::metadata_follower::MetadataFollower;
use crate::cluster::migration;
use crate::cluster::publisher::{MetadataPublisher, RoleChangeHooks, PUBLICATION_QUEUE_MAX};
use crate::cluster::{ClusterContext, ControllerHandle, MetadataCache};
use crate::config::ClusterConfig;
use crate::config::{Config, FlushPolicyArg};
use crate::connection::ListenerSecurity;
use crate::connection_quotas::ConnectionQuotas;
use crate::listeners::{ListenerName, Listeners, SecurityProtocol};
use crate::ssl::principal::PrincipalMapper;
use crate::topic_config::BrokerDefaults;
use crate::topics::Topics;

/// How long shutdown waits for connections to finish their owed responses.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How long each later step of shutdown (background tasks, controller client, quorum) may
/// take before the broker goes on to close its logs.
const SHUTDOWN_STEP_MAX: Duration = Duration::from_secs(3);

/// How long the broker waits at startup to register and be unfenced (a cluster may wait
/// for a quorum of voters to come up).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(300);

/// How long an admin operation waits for the controller and for its result to show in
/// this broker's metadata.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The controller quorum's voters: `controller.quorum.voters`, or this node alone (a
/// single node; a sole voter binds no socket, so the address is never used).
fn controller_voters(
    cluster: &ClusterConfig,
    node_id: i32,
) -> Result<std::collections::BTreeMap<u64, ControllerNode>, Box<dyn std::error::Error + Send + Sync>>
{
    if cluster.voters.is_empty() {
        let id = u64::try_from(node_id)?;
        return Ok([(id, ControllerNode::new("127.0.0.1", 1))]
            .into_iter()
            .collect());
    }
    cluster
        .voters
        .iter()
        .map(|v| {
            Ok((
                u64::try_from(v.node_id)?,
                ControllerNode::new(v.host.clone(), v.port),
            ))
        })
        .collect()
}

/// Runs the broker until a shutdown signal.
///
/// # Errors
/// Startup failures: the data directory cannot be opened, or the address cannot be bound.
pub async fn run(config: Config) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let started = std::time::Instant::now();
    // Held until `run` returns; the kernel drops it if the process dies.
    let _data_dir_lock = logbook_storage::dir_lock::DataDirLock::acquire(&config.data_dir)?;
    // First, so every metric handle resolved from here on records.
    let metrics = start_metrics(&config).await?;
    arm_failpoints(&config);
    let cluster_config = config.cluster()?;
    if config.fault_injection && config.metrics_listen.is_none() {
        return Err(
            "--fault-injection needs --metrics-listen: its admin API is served there".into(),
        );
    }
    let metadata = MetadataCache::new();
    let scram: Arc<dyn crate::sasl::ScramCredentials> = Arc::new(metadata.clone());
    let (listeners, securities) = checked_listeners(&config, scram)?;
    if !cluster_config.roles.broker {
        if let Some(metrics) = &metrics {
            metrics.endpoint.set_ready(true);
        }
        let result = run_controller_only(&config, &cluster_config).await;
        stop_metrics(metrics).await;
        return result;
    }
    let (replicas, defaults) = open_storage(&config, &metadata);
    let membership = join_quorum(&config, &cluster_config, &metadata, &replicas, defaults).await?;
    let topics = Arc::clone(&membership.topics);
    let cluster = Arc::clone(&membership.cluster);
    let (groups, transactions) = load_coordinators(
        &config,
        &topics,
        &cluster,
        &replicas,
        &metadata,
        &membership.role_hooks,
    )
    .await?;
    add_scram_users(&config, &cluster).await?;
    let bound = bind_listeners(&listeners, securities).await?;
    let authorizer = authorizer(&config, &metadata);
    let faults = config
        .fault_injection
        .then(crate::fault_injector::FaultInjector::new);
    let broker = Arc::new(Broker {
        fetch_sessions: crate::fetch_session::FetchSessionCache::new(
            config.limits.fetch_session_cache_slots,
            config.limits.fetch_session_partitions_max,
        ),
        config,
        topics,
        replicas: Arc::clone(&replicas),
        groups,
        transactions,
        listeners,
        authorizer,
        quotas: crate::client_quota_manager::QuotaManagers::default(),
        faults,
    });
    tracing::info!(
        listeners = %endpoint_list(&broker.listeners.bound),
        advertised = %endpoint_list(&broker.listeners.advertised),
        data_dir = %broker.config.data_dir.display(),
        node_id = broker.node_id(),
        topics = broker.topics.all().len(),
        startup_ms = started.elapsed().as_millis(),
        "accepting connections"
    );
    announce_running(broker.node_id());
    serve(&broker, &bound, metrics.as_ref(), &membership.lifecycle).await;
    broker.groups.shutdown();
    broker.transactions.shutdown();
    membership.leave().await;
    tokio::task::block_in_place(|| replicas.shutdown());
    stop_metrics(metrics).await;
    tracing::info!("shutdown complete");
    Ok(())
}

/// Logs the two lines Kafka prints when a broker starts serving, word for word where tools
/// match on them: the Testcontainers Kafka modules wait for `Transitioning from RECOVERY to
/// RUNNING` (Java) or `Kafka Server started` (Rust) before handing the container to a
/// test, and scripts written against Kafka grep for the same. The listeners are bound
/// by now, so a client that connects on seeing them is served.
fn announce_running(node_id: i32) {
    tracing::info!("[BrokerLifecycleManager id={node_id}] The broker has been unfenced. Transitioning from RECOVERY to RUNNING.");
    tracing::info!("[KafkaRaftServer nodeId={node_id}] Kafka Server started");
}

/// The broker's authorizer: Kafka's StandardAuthorizer over the metadata image's ACLs
/// when `authorizer.class.name` names it, otherwise everyone may do everything.
fn authorizer(config: &Config, metadata: &MetadataCache) -> Arc<dyn crate::authorizer::Authorizer> {
    if config.authorizer.standard {
        Arc::new(crate::authorizer::standard::StandardAuthorizer::new(
            metadata.clone(),
            &config.authorizer,
        ))
    } else {
        Arc::new(crate::authorizer::AllowEveryone)
    }
}

/// Arms the hidden test-only failpoints the config names (`replication::failpoint`).
fn arm_failpoints(config: &Config) {
    if let Some(count) = config.failpoint_abort_after_txn_markers {
        tracing::warn!(
            count,
            "test failpoint armed: aborting after {count} transaction markers"
        );
        logbook_replication::failpoint::abort_after_txn_markers(count);
    }
}

/// Start-up phase 4, listening: the broker is ready (metrics `/readyz`), runs retention
/// and serves connections until a shutdown signal; then it stops being ready, moves its
/// leaderships away (controlled shutdown), stops accepting and gives open connections
/// [`SHUTDOWN_GRACE`] to send the responses they owe.
async fn serve(
    broker: &Arc<Broker>,
    listeners: &[BoundListener],
    metrics: Option<&RunningMetrics>,
    lifecycle: &BrokerLifecycle,
) {
    if let Some(metrics) = metrics {
        metrics.endpoint.set_broker(broker);
        metrics.endpoint.set_ready(true);
    }
    let shutdown = CancellationToken::new();
    let tracker = TaskTracker::new();
    tracker.spawn(retention_loop(Arc::clone(broker), shutdown.clone()));
    tracker.spawn(producer_expiry_loop(Arc::clone(broker), shutdown.clone()));
    accept_connections(broker, listeners, &shutdown, &tracker).await;
    tracing::info!("shutting down");
    if let Some(metrics) = metrics {
        metrics.endpoint.set_ready(false);
    }
    lifecycle
        .controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT)
        .await;
    shutdown.cancel();
    tracker.close();
    if tokio::time::timeout(SHUTDOWN_GRACE, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("connections did not finish within the grace period");
    }
}

/// Starts the AlterPartition manager (Kafka's `AlterPartitionManager`) as the replicas'
/// ISR-change sender; returns its task tracker and stop token.
fn start_alter_partition_manager(
    client: &Arc<ControllerClient>,
    cluster: &Arc<ClusterContext>,
    replicas: &ReplicaManager,
    node_id: i32,
) -> (TaskTracker, CancellationToken) {
    let background = TaskTracker::new();
    let background_stop = CancellationToken::new();
    let epoch_of = Arc::clone(cluster);
    replicas.set_alter_partition_sender(Arc::new(
        crate::alter_partition_manager::AlterPartitionManager::start(
            Arc::clone(client),
            Arc::new(move || epoch_of.broker_epoch()),
            crate::alter_partition_manager::AlterPartitionManagerConfig::new(node_id),
            background_stop.clone(),
            &background,
        ),
    ));
    (background, background_stop)
}

/// The first producer id block from the controller, fetched at start so the first
/// InitProducerId after startup need not be retried; `None` (fetched on first use) if the
/// controller does not answer within [`STARTUP_TIMEOUT`].
async fn first_producer_id_block(
    cluster: &ClusterContext,
) -> Option<crate::coordinator::producer_id_manager::ProducerIdBlock> {
    use crate::coordinator::producer_id_manager::ProducerIdBlocks;
    match tokio::time::timeout(STARTUP_TIMEOUT, cluster.next_block()).await {
        Ok(Ok(block)) => Some(block),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "no producer id block at startup; fetched on first use");
            None
        }
        Err(_) => {
            tracing::warn!("no producer id block at startup in time; fetched on first use");
            None
        }
    }
}

/// Coordinators follow their partitions' leadership from now on: `roles` is hooked into
/// the publisher, and the changes applied before this hook existed are replayed into it
/// (loads of shards already loaded at start are skipped).
fn follow_leadership(
    roles: &Arc<crate::coordinator::roles::CoordinatorRoles>,
    role_hooks: &RoleChangeHooks,
    replicas: &ReplicaManager,
) {
    let hooked = Arc::clone(roles);
    role_hooks.add(Arc::new(move |changes| {
        let mapped: Vec<crate::coordinator::roles::PartitionRole> =
            changes.iter().map(partition_role).collect();
        drop(hooked.on_partition_changes(&mapped));
    }));
    drop(roles.on_partition_changes(&internal_partition_roles(replicas)));
}

/// The metrics endpoint while it runs.
struct RunningMetrics {
    endpoint: Arc<crate::metrics::endpoint::MetricsEndpoint>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// What joining the metadata quorum started: the broker's view of the cluster and the
/// tasks that keep it current, stopped by [`Membership::leave`].
struct Membership {
    cluster: Arc<ClusterContext>,
    topics: Arc<Topics>,
    /// Where the coordinators hook into leadership changes.
    role_hooks: RoleChangeHooks,
    /// Registration and heartbeats; the controlled shutdown goes through it.
    lifecycle: BrokerLifecycle,
    client: Arc<ControllerClient>,
    /// This node's voter, when it has the controller role.
    quorum: Option<Arc<QuorumController>>,
    publisher_task: tokio::task::JoinHandle<()>,
    /// Stops a broker-only node's metadata follower.
    metadata_stop: CancellationToken,
    /// The AlterPartition manager's tasks.
    background: TaskTracker,
    background_stop: CancellationToken,
}

impl Membership {
    /// Stops what [`join_quorum`] started, each step bounded: the background tasks, the
    /// controller client, the metadata follower, the voter, the publisher.
    async fn leave(self) {
        self.background_stop.cancel();
        self.background.close();
        bounded_step("background tasks", self.background.wait()).await;
        bounded_step("controller client", self.client.shutdown()).await;
        self.metadata_stop.cancel();
        if let Some(quorum) = &self.quorum {
            if let Some(Err(e)) = bounded_step("controller quorum", quorum.shutdown()).await {
                tracing::warn!(error = %e, "the controller did not stop cleanly");
            }
        }
        self.publisher_task.abort();
    }
}

/// Start-up phase 2, joining the quorum (Kafka's `BrokerServer.startup` up to the
/// coordinators): the topics view and the metadata publisher, this node's voter (or, on a
/// broker-only node, the metadata follower), the controller client and the AlterPartition
/// manager, then registration; returns once the broker is unfenced, the publisher has
/// replayed the metadata log and re-applied the image in force, and orphan directories are
/// gone.
async fn join_quorum(
    config: &Config,
    cluster_config: &ClusterConfig,
    metadata: &MetadataCache,
    replicas: &Arc<ReplicaManager>,
    defaults: BrokerDefaults,
) -> Result<Membership, Box<dyn std::error::Error + Send + Sync>> {
    let node_id = config.node_id;
    let voters = controller_voters(cluster_config, node_id)?;
    let mut quorum_config = quorum_config(config);
    // The only voter is this node: a single node (a broker-only node never is).
    let sole_voter = voters.len() == 1 && cluster_config.roles.controller;
    if !sole_voter {
        tokio::spawn(halt_on_log_dir_failure(replicas.log_dir_failures()));
    }
    let legacy = legacy_metadata(config, sole_voter, &mut quorum_config)?;
    let (cluster, topics) = cluster_view(config, metadata, replicas, defaults, sole_voter)?;
    // The publisher runs before the controller starts: the controller replays its log
    // into it while it starts, through a bounded queue.
    let (publications, publication_queue) = mpsc::channel(PUBLICATION_QUEUE_MAX);
    let role_hooks = RoleChangeHooks::default();
    let publisher = MetadataPublisher::new(
        node_id,
        config.data_dir.clone(),
        Arc::clone(&topics),
        Arc::clone(replicas),
        metadata.clone(),
        role_hooks.clone(),
    );
    let (catch_up, catch_up_queue) = mpsc::channel(1);
    let publisher_task = tokio::spawn(publisher.run(publication_queue, catch_up_queue));
    let client_config = controller_client_config(config)?;
    let metadata_stop = CancellationToken::new();
    let quorum = start_metadata_source(
        config,
        cluster_config,
        quorum_config,
        sole_voter,
        publications,
        &metadata_stop,
        metadata,
    )
    .await?;
    let client = Arc::new(ControllerClient::new(
        quorum.clone(),
        controller_voters(cluster_config, node_id)?,
        client_config,
    ));
    cluster.set_controller(ControllerHandle::new(Arc::clone(&client)));
    let (background, background_stop) =
        start_alter_partition_manager(&client, &cluster, replicas, node_id);
    let lifecycle = register_and_catch_up(
        config, &cluster, replicas, metadata, &topics, catch_up, legacy,
    )
    .await?;
    Ok(Membership {
        cluster,
        topics,
        role_hooks,
        lifecycle,
        client,
        quorum,
        publisher_task,
        metadata_stop,
        background,
        background_stop,
    })
}

/// The broker's view of the cluster before it joins: the `ClusterContext` admin requests
/// and the coordinators go through, and the `Topics` view over the replicas.
fn cluster_view(
    config: &Config,
    metadata: &MetadataCache,
    replicas: &Arc<ReplicaManager>,
    defaults: BrokerDefaults,
    sole_voter: bool,
) -> Result<(Arc<ClusterContext>, Arc<Topics>), Box<dyn std::error::Error + Send + Sync>> {
    let mut context = ClusterContext::new(metadata.clone(), config.node_id, ADMIN_TIMEOUT);
    context.offsets_topic_replication_factor = config.offsets_topic_replication_factor;
    context.transaction_state_replication_factor = config.transaction_state_log_replication_factor;
    context.sole_voter = sole_voter;
    let cluster = Arc::new(context);
    let topics = Arc::new(
        Topics::open_in_cluster(
            &config.data_dir,
            Arc::clone(replicas),
            defaults,
            config.limits.partitions_per_topic_max,
            Arc::clone(&cluster),
        )?
        .with_partitions_total_max(crate::partition_budget::partitions_max(&config.limits)),
    );
    Ok((cluster, topics))
}

/// The single node's metadata files from before the quorum (`topics.json`), to migrate
/// into the metadata log as its bootstrap batch (set in `quorum_config`). Only a sole
/// voter may migrate them.
fn legacy_metadata(
    config: &Config,
    sole_voter: bool,
    quorum_config: &mut QuorumConfig,
) -> Result<Option<migration::LegacyMetadata>, Box<dyn std::error::Error + Send + Sync>> {
    if !migration::has_legacy_metadata(&config.data_dir) {
        return Ok(None);
    }
    if !sole_voter {
        return Err(format!(
            "{} holds the topics of a single node (__cluster_metadata/topics.json), which can \
             only be migrated by that node alone: start it once without \
             controller.quorum.voters, then join the cluster with an empty data dir",
            config.data_dir.display()
        )
        .into());
    }
    let endpoints = config.listeners()?.registered_endpoints();
    let features = quorum_config.bootstrap_features.clone();
    let legacy = tokio::task::block_in_place(|| {
        migration::read(&config.data_dir, config.node_id, &endpoints, &features)
    })?;
    if let Some(legacy) = &legacy {
        let batch = logbook_metadata::migration::from_legacy(&legacy.state)?;
        quorum_config.cluster_id = Some(legacy.state.cluster_id.clone());
        quorum_config.bootstrap_batch = Some(batch.0);
    }
    Ok(legacy)
}

/// Where this broker's metadata comes from: a node with the controller role runs a voter
/// whose state machine feeds the publisher (returned); a broker-only node pulls the
/// metadata log from the active controller with a follower task (stopped by
/// `metadata_stop`).
async fn start_metadata_source(
    config: &Config,
    cluster_config: &ClusterConfig,
    quorum_config: QuorumConfig,
    sole_voter: bool,
    publications: mpsc::Sender<MetadataPublication>,
    metadata_stop: &CancellationToken,
    metadata: &MetadataCache,
) -> Result<Option<Arc<QuorumController>>, Box<dyn std::error::Error + Send + Sync>> {
    let voters = controller_voters(cluster_config, config.node_id)?;
    if !cluster_config.roles.controller {
        let client_config = controller_client_config(config)?;
        let fetch_client = Arc::new(ControllerClient::new(None, voters, client_config));
        tokio::spawn(MetadataFollower::new(fetch_client, publications).run(metadata_stop.clone()));
        return Ok(None);
    }
    let raft_config = controller_config(config, voters, metadata)?;
    let quorum = QuorumController::start(
        raft_config,
        None,
        quorum_config,
        Arc::new(SystemClock),
        Some(publications),
    )
    .await?;
    if sole_voter {
        // A lone voter restarting would wait out an election timeout before leading.
        if let Err(e) = quorum.raft().raft().trigger().elect().await {
            tracing::warn!(error = %e, "cannot trigger the election of the sole voter");
        }
        // Registering before the election is over would be refused (NOT_CONTROLLER)
        // and retried only after the client's back-off (100 ms of every start).
        if let Err(e) = quorum.raft().wait_for_leader(Duration::from_secs(2)).await {
            tracing::warn!(error = %e, "the sole voter did not become leader");
        }
    }
    Ok(Some(quorum))
}

/// Registers the broker and waits until it is unfenced; then the startup replay is over:
/// the publisher re-applies the image in force whole, the legacy files are marked
/// migrated if the image holds them, and partition directories no topic names are
/// removed.
async fn register_and_catch_up(
    config: &Config,
    cluster: &Arc<ClusterContext>,
    replicas: &ReplicaManager,
    metadata: &MetadataCache,
    topics: &Topics,
    catch_up: mpsc::Sender<tokio::sync::oneshot::Sender<()>>,
    legacy: Option<migration::LegacyMetadata>,
) -> Result<BrokerLifecycle, Box<dyn std::error::Error + Send + Sync>> {
    let lifecycle = BrokerLifecycle::start(
        Arc::clone(cluster),
        config.listeners()?.registered_endpoints(),
        Duration::from_millis(config.broker_heartbeat_interval_ms),
        STARTUP_TIMEOUT,
    )
    .await?;
    replicas.set_broker_epoch(cluster.broker_epoch());
    // Registered, and the image shows it: the publisher has replayed the metadata log.
    // Now the image in force decides what the directories the replay left alone hold.
    replicas.mark_caught_up();
    let (applied, applied_wait) = tokio::sync::oneshot::channel();
    if catch_up.send(applied).await.is_err() || applied_wait.await.is_err() {
        return Err("the metadata publisher stopped during startup".into());
    }
    if let Some(legacy) = &legacy {
        if metadata.image().cluster_id() == Some(legacy.state.cluster_id.as_str()) {
            tokio::task::block_in_place(|| legacy.mark_migrated())?;
            tracing::info!(
                topics = legacy.state.topics.len(),
                "migrated the single node's metadata files into the metadata log"
            );
        } else {
            tracing::warn!("the metadata log was not empty; topics.json was not migrated");
        }
    }
    tokio::task::block_in_place(|| topics.remove_orphans_after_catch_up())?;
    Ok(lifecycle)
}

/// Installs the Prometheus recorder and serves it on `--metrics-listen`, if given.
/// Start-up phase "open storage": the replica manager over the data dir (its flushers, log
/// cleaner and maintenance started; partitions are opened as the metadata replay names
/// them) and the broker-wide defaults of topic configs.
fn open_storage(
    config: &Config,
    metadata: &MetadataCache,
) -> (Arc<ReplicaManager>, BrokerDefaults) {
    let policy = match config.flush_policy {
        FlushPolicyArg::EveryWrite => FlushPolicy::EveryWrite,
        FlushPolicyArg::Os => FlushPolicy::Os,
    };
    let replicas = Arc::new(
        ReplicaManager::new(&config.data_dir, policy, config.flush_threads)
            .with_broker_id(config.node_id)
            .with_replica_lag_time_max_ms(config.replica_lag_time_max_ms)
            .with_controller_leadership()
            .with_broker_endpoints(
                Arc::new(InterBrokerEndpoints::new(
                    metadata.clone(),
                    inter_broker_listener(config),
                )),
                inter_broker_security(config),
            ),
    );
    replicas.set_isr_eligibility(Arc::new(metadata.clone()));
    replicas.start_log_cleaner(log_cleaner_config(config));
    replicas.start_maintenance();
    let defaults = BrokerDefaults::new(
        config.limits.message_max_bytes,
        config.log_segment_bytes,
        config.log_retention_ms,
    )
    .with_preallocate_bytes_max(config.log_preallocate_bytes_max)
    .with_page_cache_tail_bytes(config.page_cache_tail_bytes)
    .with_static_configs(&config.static_broker_configs);
    (replicas, defaults)
}

/// Start-up phase "load coordinators": the producer-id manager (with the controller's
/// first block, so the first InitProducerId after start-up need not be retried), the group
/// and transaction coordinators replaying the internal partitions this broker leads, and
/// the hook that makes both follow leadership changes from now on.
async fn load_coordinators(
    config: &Config,
    topics: &Arc<Topics>,
    cluster: &Arc<ClusterContext>,
    replicas: &Arc<ReplicaManager>,
    metadata: &MetadataCache,
    role_hooks: &RoleChangeHooks,
) -> Result<
    (
        Arc<crate::coordinator::GroupCoordinator>,
        Arc<crate::coordinator::TransactionCoordinator>,
    ),
    Box<dyn std::error::Error + Send + Sync>,
> {
    let node_id = config.node_id;
    let producer_ids =
        crate::coordinator::producer_id_manager::RpcProducerIdManager::with_first_block(
            Arc::clone(cluster)
                as Arc<dyn crate::coordinator::producer_id_manager::ProducerIdBlocks>,
            first_producer_id_block(cluster).await,
        );
    let host: Arc<dyn crate::coordinator::partition_writer::CoordinatorHost> =
        crate::coordinator_partition_writer::CoordinatorPartitionWriter::new(Arc::clone(topics));
    let groups = tokio::task::block_in_place(|| {
        crate::coordinator::GroupCoordinator::load(&host, group_config(config))
    })?;
    let transactions = tokio::task::block_in_place(|| {
        crate::coordinator::TransactionCoordinator::load(
            &host,
            groups.clone(),
            producer_ids,
            transaction_config(config),
        )
    })?;
    let roles = crate::coordinator::roles::CoordinatorRoles::new(
        Arc::clone(&groups),
        Arc::clone(&transactions),
    );
    follow_leadership(&roles, role_hooks, replicas);
    transactions.connect_cluster(
        Arc::new(crate::cluster::partition_leaders::ImageLeaders::new(
            InterBrokerEndpoints::new(metadata.clone(), inter_broker_listener(config)),
            node_id,
        )),
        logbook_client::InterBrokerClient::new(logbook_client::InterBrokerConfig {
            client_id: format!("broker-{node_id}"),
            security: inter_broker_security(config),
            ..logbook_client::InterBrokerConfig::default()
        }),
    );
    Ok((groups, transactions))
}

/// The listeners and the security of each bound one (in `listeners.bound` order), built
/// once before anything starts: later phases take the inter-broker listener as given, a
/// keystore that cannot be served stops the start before storage opens, and a JWKS is
/// read here, before any port is bound, so no client can connect to one listener while
/// another is still being set up. `scram` is where SCRAM logins find their credentials
/// (the metadata cache, filled later by the quorum).
///
/// # Errors
/// As [`Config::listeners`]; an SSL listener's TLS settings cannot be served.
fn checked_listeners(
    config: &Config,
    scram: Arc<dyn crate::sasl::ScramCredentials>,
) -> Result<(Listeners, Vec<ListenerSecurity>), String> {
    let listeners = config.listeners()?;
    let securities = listeners
        .bound
        .iter()
        .map(|endpoint| listener_security(endpoint, config, Arc::clone(&scram)))
        .collect::<Result<Vec<_>, _>>()?;
    crate::channel_builders::inter_broker_security(&listeners, &config.security_settings)?;
    controller_network_security(config, None)?;
    Ok((listeners, securities))
}

/// How replica fetchers and transaction markers connect to other brokers (checked at
/// start by [`checked_listeners`]).
fn inter_broker_security(config: &Config) -> logbook_client::security::ConnectionSecurity {
    config
        .listeners()
        .and_then(|l| crate::channel_builders::inter_broker_security(&l, &config.security_settings))
        .unwrap_or_default()
}

/// TLS and SASL of the controller listener: how this node connects to the voters, and
/// how its own controller listener (on a voter) secures what it accepts. SCRAM is not
/// served there, as in Kafka: its credentials live in the metadata the quorum serves.
///
/// # Errors
/// The controller listener's settings cannot be served (the message names the setting).
fn controller_network_security(
    config: &Config,
    authorizer: Option<Arc<dyn crate::authorizer::Authorizer>>,
) -> Result<logbook_controller::net::security::NetworkSecurity, String> {
    let listeners = config.listeners()?;
    let client =
        crate::channel_builders::controller_security(&listeners, &config.security_settings)?;
    if client
        .sasl
        .as_ref()
        .is_some_and(|l| l.mechanism != logbook_client::security::SaslMechanism::Plain)
    {
        return Err("sasl.mechanism.controller.protocol: SCRAM cannot be used on the controller listener (its credentials live in the metadata the controllers serve); use PLAIN, as Kafka requires".to_string());
    }
    let name = listeners
        .controller
        .first()
        .cloned()
        .unwrap_or_else(|| ListenerName::new("CONTROLLER"));
    let endpoint = crate::listeners::Endpoint {
        name,
        host: String::new(),
        port: 0,
        protocol: listeners.controller_protocol,
    };
    let security = if endpoint.protocol == SecurityProtocol::Plaintext {
        ListenerSecurity::default()
    } else {
        listener_security(&endpoint, config, Arc::new(crate::sasl::NoScramCredentials))?
    };
    let acceptor = crate::channel_builders::ControllerListenerAcceptor::new(
        security,
        authorizer.filter(|a| !a.allows_everything()),
        endpoint.name,
    );
    Ok(logbook_controller::net::security::NetworkSecurity { client, acceptor })
}

/// A controller configuration for this node, secured as the controller listener says.
fn controller_config(
    config: &Config,
    voters: std::collections::BTreeMap<u64, logbook_controller::ControllerNode>,
    metadata: &MetadataCache,
) -> Result<ControllerConfig, Box<dyn std::error::Error + Send + Sync>> {
    let mut raft_config = ControllerConfig::new(
        u64::try_from(config.node_id)?,
        voters,
        config.data_dir.clone(),
    );
    // Peers on the controller listener need CLUSTER_ACTION on the cluster, as Kafka's
    // ControllerApis asks of every controller request.
    raft_config.security = controller_network_security(config, Some(authorizer(config, metadata)))?;
    Ok(raft_config)
}

/// A controller client configuration for this node, secured as the controller listener
/// says.
fn controller_client_config(
    config: &Config,
) -> Result<ControllerClientConfig, Box<dyn std::error::Error + Send + Sync>> {
    let mut client_config = ControllerClientConfig::new(u64::try_from(config.node_id)?);
    client_config.security = controller_network_security(config, None)?.client;
    Ok(client_config)
}

/// `inter.broker.listener.name` (checked at start: the configuration was validated).
fn inter_broker_listener(config: &Config) -> ListenerName {
    config
        .listeners()
        .map_or_else(|_| ListenerName::new("PLAINTEXT"), |l| l.inter_broker)
}

/// Start-up phase "users": creates each `--add-scram` user that has no credential of its
/// mechanism yet (so a changed password is never reset by a restart), through the
/// controller as AlterUserScramCredentials does, and waits until this broker's image has
/// them, so the first login finds them.
///
/// # Errors
/// A `--add-scram` value that does not parse, or the controller refused or did not answer.
async fn add_scram_users(
    config: &Config,
    cluster: &ClusterContext,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    use crate::sasl::scram::AddScram;
    use logbook_controller::quorum::ScramChange;
    let wanted = config
        .add_scram
        .iter()
        .map(|text| AddScram::parse(text))
        .collect::<Result<Vec<_>, _>>()?;
    let image = cluster.metadata.image();
    let changes: Vec<ScramChange> = wanted
        .iter()
        .filter(|add| {
            image
                .scram_credential(&add.name, add.mechanism.code())
                .is_none()
        })
        .map(|add| {
            let credential = add
                .credential()
                .ok_or("--add-scram: the system's random source failed")?;
            Ok(ScramChange::Upsert(
                credential.into_record(add.name.clone()),
            ))
        })
        .collect::<Result<_, &str>>()?;
    if changes.is_empty() {
        return Ok(());
    }
    let controller = cluster.controller()?;
    for (change, result) in changes.iter().zip(
        controller
            .client()
            .alter_user_scram_credentials(changes.clone())
            .await?,
    ) {
        result.map_err(|e| format!("--add-scram {}: {e}", change.user()))?;
        tracing::info!(user = change.user(), "created SCRAM user (--add-scram)");
    }
    let offset = controller.applied_offset();
    if !cluster
        .metadata
        .wait_for_offset(offset, Duration::from_secs(30))
        .await
    {
        return Err("--add-scram: the metadata did not catch up within 30 s".into());
    }
    Ok(())
}

/// A bound listener: its name, socket, and how it secures its connections.
struct BoundListener {
    name: ListenerName,
    socket: TcpListener,
    security: ListenerSecurity,
}

/// How `endpoint` secures its connections: TLS on SSL and SASL_SSL listeners (with
/// `ssl.principal.mapping.rules`), SASL on SASL_PLAINTEXT and SASL_SSL ones.
///
/// # Errors
/// Its TLS or SASL settings cannot be served (the message names the listener).
fn listener_security(
    endpoint: &crate::listeners::Endpoint,
    config: &Config,
    scram: Arc<dyn crate::sasl::ScramCredentials>,
) -> Result<ListenerSecurity, String> {
    let name = &endpoint.name;
    let settings = &config.security_settings;
    let in_listener = |e: String| format!("listener {name}: {e}");
    let tls = match endpoint.protocol {
        SecurityProtocol::Ssl | SecurityProtocol::SaslSsl => {
            let tls = crate::ssl::server_config(name, settings).map_err(in_listener)?;
            let rules = crate::ssl::ListenerSettings::new(name, settings)
                .get("ssl.principal.mapping.rules")
                .map(str::to_string);
            let mapper = rules
                .as_deref()
                .map_or_else(|| Ok(PrincipalMapper::default()), PrincipalMapper::parse)
                .map_err(|e| in_listener(format!("ssl.principal.mapping.rules: {e}")))?;
            Some((tokio_rustls::TlsAcceptor::from(tls), Arc::new(mapper)))
        }
        SecurityProtocol::Plaintext | SecurityProtocol::SaslPlaintext => None,
    };
    let sasl = match endpoint.protocol {
        SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => {
            let jaas_file = crate::sasl::jaas_file_from_env();
            let sasl = crate::sasl::SaslListener::new(name, settings, jaas_file.as_deref(), scram)
                .map_err(in_listener)?;
            Some(Arc::new(sasl))
        }
        SecurityProtocol::Plaintext | SecurityProtocol::Ssl => None,
    };
    Ok(ListenerSecurity { tls, sasl })
}

/// Binds every client and inter-broker listener, in configured order, each with the
/// security [`checked_listeners`] built for it.
///
/// # Errors
/// A listener's address is not numeric, or cannot be bound.
async fn bind_listeners(
    listeners: &Listeners,
    securities: Vec<ListenerSecurity>,
) -> Result<Vec<BoundListener>, Box<dyn std::error::Error + Send + Sync>> {
    let mut bound = Vec::with_capacity(listeners.bound.len());
    for (endpoint, security) in listeners.bound.iter().zip(securities) {
        let address = endpoint.bind_address()?;
        let socket = TcpListener::bind(address)
            .await
            .map_err(|e| format!("cannot listen on {endpoint} ({address}): {e}"))?;
        bound.push(BoundListener {
            name: endpoint.name.clone(),
            socket,
            security,
        });
    }
    Ok(bound)
}

/// `NAME://host:port,...` for the start-up log line.
fn endpoint_list(endpoints: &[crate::listeners::Endpoint]) -> String {
    let list: Vec<String> = endpoints.iter().map(ToString::to_string).collect();
    list.join(",")
}

/// Start-up phase "listen": accepts connections on every listener until a shutdown
/// signal, each under the one `connections_max` semaphore and per-IP quota (Kafka counts
/// `max.connections` across listeners), served on `tracker` and stopped by `shutdown`.
async fn accept_connections(
    broker: &Arc<Broker>,
    listeners: &[BoundListener],
    shutdown: &CancellationToken,
    tracker: &TaskTracker,
) {
    let connections = Arc::new(Semaphore::new(broker.config.limits.connections_max.max(1)));
    let quotas = ConnectionQuotas::new(broker.config.limits.max_connections_per_ip);
    let creation_rate = parking_lot::Mutex::new(crate::client_quota_manager::Rate::default());
    let limits = AcceptLimits {
        connections: &connections,
        quotas: &quotas,
        creation_rate: &creation_rate,
    };
    let loops = listeners
        .iter()
        .map(|listener| accept_loop(broker, listener, &limits, shutdown, tracker));
    tokio::select! {
        () = shutdown_signal() => {}
        _ = futures::future::join_all(loops) => {}
    }
}

/// What every listener's accept loop counts new connections against.
struct AcceptLimits<'a> {
    connections: &'a Arc<Semaphore>,
    quotas: &'a Arc<ConnectionQuotas>,
    /// New connections across the listeners, against `max.connection.creation.rate`.
    creation_rate: &'a parking_lot::Mutex<crate::client_quota_manager::Rate>,
}

/// Accepts the connections of one listener (until its caller stops polling it, or the
/// connection semaphore closes).
async fn accept_loop(
    broker: &Arc<Broker>,
    listener: &BoundListener,
    limits: &AcceptLimits<'_>,
    shutdown: &CancellationToken,
    tracker: &TaskTracker,
) {
    let name = &listener.name;
    loop {
        let Ok(permit) = Arc::clone(limits.connections).acquire_owned().await else {
            return;
        };
        match listener.socket.accept().await {
            Ok((stream, peer)) => {
                let connection_metrics = crate::metrics::ConnectionMetrics::global();
                let Some(slot) = limits.quotas.try_open(peer.ip()) else {
                    // Kafka's TooManyConnectionsException: close the new connection at once.
                    tracing::info!(%peer, listener = %name, limit = broker.config.limits.max_connections_per_ip, "closing connection: max.connections.per.ip reached");
                    connection_metrics.rejected_per_ip();
                    drop(stream);
                    continue;
                };
                let rate_limit = broker
                    .topics
                    .cluster()
                    .and_then(|c| c.metadata.client_quotas())
                    .and_then(|q| q.ip_connection_rate(&peer.ip().to_string()));
                if let Some(limit) = rate_limit {
                    let now = crate::client_quota_manager::now_ms();
                    if let Err(throttle_ms) = limits.quotas.admit_rate(peer.ip(), limit, now) {
                        // KIP-612: the per-IP rate closes the connection at once.
                        tracing::info!(%peer, listener = %name, limit, throttle_ms, "closing connection: connection_creation_rate of its address exceeded");
                        connection_metrics.rejected_per_ip();
                        drop(slot);
                        drop(stream);
                        continue;
                    }
                }
                connection_metrics.opened();
                {
                    let broker = Arc::clone(broker);
                    let shutdown = shutdown.clone();
                    let name = name.clone();
                    let security = listener.security.clone();
                    tracker.spawn(async move {
                        crate::connection::serve(broker, stream, peer, name, security, shutdown)
                            .await;
                        connection_metrics.closed();
                        drop(slot);
                        drop(permit);
                    });
                }
                let throttle_ms =
                    creation_throttle(limits, broker.config.limits.max_connection_creation_rate);
                if throttle_ms > 0 {
                    // KIP-612: over the broker's rate the listeners accept nothing more
                    // until it is back under it; the connection just taken is served.
                    tracing::debug!(listener = %name, throttle_ms, "max.connection.creation.rate reached: accepting paused");
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(Duration::from_millis(throttle_ms)) => {}
                    }
                }
            }
            Err(e) => {
                // Usually EMFILE: back off instead of spinning.
                tracing::warn!(listener = %name, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Counts one new connection against `max.connection.creation.rate` (`limit` per second);
/// how long accepting must pause (0: not).
fn creation_throttle(limits: &AcceptLimits<'_>, limit: u32) -> u64 {
    if limit >= 2_147_483_647 {
        return 0;
    }
    let now = crate::client_quota_manager::now_ms();
    let mut rate = limits.creation_rate.lock();
    rate.record(1.0, now);
    let throttle = crate::client_quota_manager::throttle_ms(&rate, f64::from(limit.max(1)), now);
    u64::try_from(throttle).unwrap_or(0)
}

async fn start_metrics(
    config: &Config,
) -> Result<Option<RunningMetrics>, Box<dyn std::error::Error + Send + Sync>> {
    let Some(addr) = config.metrics_listen else {
        return Ok(None);
    };
    let handle = crate::metrics::install()?;
    let endpoint =
        crate::metrics::endpoint::MetricsEndpoint::new(handle, config.metrics_lag_partitions_max);
    let stop = CancellationToken::new();
    let serve = endpoint
        .bind(addr, stop.clone())
        .await
        .map_err(|e| format!("cannot listen for metrics on {addr}: {e}"))?;
    Ok(Some(RunningMetrics {
        endpoint,
        stop,
        task: tokio::spawn(serve),
    }))
}

/// Stops the metrics endpoint: last, so a scrape sees the whole shutdown.
async fn stop_metrics(metrics: Option<RunningMetrics>) {
    if let Some(metrics) = metrics {
        metrics.stop.cancel();
        let _ = metrics.task.await;
    }
}

/// The QuorumController's settings from the broker's flags.
fn quorum_config(config: &Config) -> QuorumConfig {
    QuorumConfig {
        session_timeout_ms: config.broker_session_timeout_ms,
        heartbeat_interval_ms: config.broker_heartbeat_interval_ms,
        default_num_partitions: config.num_partitions,
        default_replication_factor: config.default_replication_factor,
        auto_leader_rebalance_enable: config.auto_leader_rebalance_enable,
        leader_imbalance_check_interval_ms: config
            .leader_imbalance_check_interval_seconds
            .saturating_mul(1000),
        ..QuorumConfig::default()
    }
}

/// A controller-only node (`process.roles=controller`, KRaft's dedicated controllers):
/// a voter of the metadata quorum on its `controller.quorum.voters` address and nothing
/// else. It hosts no partitions, registers as no broker and opens no client listener
/// (`--listen` is unused), as a KRaft controller serves brokers only; brokers and
/// combined nodes reach it for registration, heartbeats, admin operations and
/// MetadataFetch. Runs until SIGTERM or Ctrl-C.
async fn run_controller_only(
    config: &Config,
    cluster: &ClusterConfig,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    if migration::has_legacy_metadata(&config.data_dir) {
        return Err(format!(
            "{} holds the topics of a single node (__cluster_metadata/topics.json): a              controller-only node hosts no partitions and cannot migrate them; start that              node alone with both roles first",
            config.data_dir.display()
        )
        .into());
    }
    let node_id = u64::try_from(config.node_id)?;
    let voters = controller_voters(cluster, config.node_id)?;
    // No metadata image is kept here (no broker role): peers on the controller listener
    // are authorized as Kafka authorizes them before its ACLs have loaded, super users
    // (and allow.everyone.if.no.acl.found) only.
    let raft_config = controller_config(config, voters, &MetadataCache::new())?;
    let quorum = QuorumController::start(
        raft_config,
        None,
        quorum_config(config),
        Arc::new(SystemClock),
        None,
    )
    .await?;
    tracing::info!(
        node_id,
        controller_listener = ?cluster.controller_address.as_ref().map(ToString::to_string),
        data_dir = %config.data_dir.display(),
        "controller ready (process.roles=controller: no client listener)"
    );
    shutdown_signal().await;
    tracing::info!("shutting down");
    if let Some(Err(e)) = bounded_step("controller quorum", quorum.shutdown()).await {
        tracing::warn!(error = %e, "the controller did not stop cleanly");
    }
    tracing::info!("shutdown complete");
    Ok(())
}

/// Runs one step of shutdown for at most `SHUTDOWN_STEP_MAX`: a step that waits on peers
/// that are gone (a controller quorum without a majority retries them forever) must not keep
/// the process from closing its logs and exiting. `None` when the step timed out.
async fn bounded_step<T>(what: &str, step: impl std::future::Future<Output = T>) -> Option<T> {
    let done = tokio::time::timeout(SHUTDOWN_STEP_MAX, step).await.ok();
    if done.is_none() {
        tracing::warn!(
            step = what,
            timeout_ms = SHUTDOWN_STEP_MAX.as_millis(),
            "shutdown step did not finish in time; going on"
        );
    }
    done
}

/// A role change as the coordinators take it.
fn partition_role(
    change: &crate::cluster::publisher::LocalRoleChange,
) -> crate::coordinator::roles::PartitionRole {
    crate::coordinator::roles::PartitionRole {
        topic_partition: change.topic_partition.clone(),
        leader: change.leader,
        leader_epoch: change.leader_epoch,
    }
}

/// The current role of every hosted partition of the internal topics.
fn internal_partition_roles(
    replicas: &ReplicaManager,
) -> Vec<crate::coordinator::roles::PartitionRole> {
    [
        crate::coordinator::GROUP_METADATA_TOPIC_NAME,
        crate::coordinator::transaction::TRANSACTION_STATE_TOPIC_NAME,
    ]
    .into_iter()
    .flat_map(|topic| replicas.partitions_of(topic))
    .map(|p| crate::coordinator::roles::PartitionRole {
        topic_partition: p.topic_partition().clone(),
        leader: p.is_leader(),
        leader_epoch: p.leader_epoch().0,
    })
    .collect()
}

/// The group coordinator's settings from the broker's flags.
fn group_config(config: &Config) -> crate::coordinator::group::GroupConfig {
    crate::coordinator::group::GroupConfig {
        initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms.max(0),
        offsets_topic_num_partitions: config.offsets_topic_num_partitions.max(1),
        offsets_retention_ms: config.offsets_retention_minutes.saturating_mul(60_000),
        offsets_retention_check_interval_ms: config.offsets_retention_check_interval_ms,
        min_session_timeout_ms: config.group_min_session_timeout_ms,
        max_session_timeout_ms: config.group_max_session_timeout_ms,
        group_max_size: config.limits.group_max_size.max(1),
        commit_timeout_ms: config.limits.produce_timeout_ms_max,
        offsets_topic_segment_bytes: config.offsets_topic_segment_bytes.max(14),
    }
}

/// The transaction coordinator's settings from the broker's flags.
fn transaction_config(config: &Config) -> crate::coordinator::transaction::TransactionConfig {
    crate::coordinator::transaction::TransactionConfig {
        state_log_num_partitions: config.transaction_state_log_num_partitions.max(1),
        state_log_segment_bytes: config.transaction_state_log_segment_bytes.max(14),
        state_log_min_isr: config.transaction_state_log_min_isr.max(1),
        max_timeout_ms: config.transaction_max_timeout_ms.max(1),
        id_expiration_ms: config.transactional_id_expiration_ms.max(1),
        abort_timed_out_interval_ms: config
            .transaction_abort_timed_out_transaction_cleanup_interval_ms,
        remove_expired_interval_ms: config
            .transaction_remove_expired_transaction_cleanup_interval_ms,
        write_timeout_ms: config.limits.produce_timeout_ms_max,
        transaction_version: config.transaction_version,
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {},
                    _ = term.recv() => {},
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the broker");
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// When the first retention pass runs after start, at most (Kafka's
/// `log.initial.task.delay.ms`, 30 s).
const RETENTION_INITIAL_DELAY: Duration = Duration::from_secs(30);

/// Has the replica manager apply `retention.ms` / `retention.bytes` to every partition
/// periodically: first after 30 s as Kafka's `LogManager` (sooner when
/// the check interval is shorter), then every `log.retention.check.interval.ms`. Waiting a
/// whole interval (5 minutes by default) left expired data readable for minutes after a
/// restart where Kafka had deleted it.
async fn retention_loop(broker: Arc<Broker>, shutdown: CancellationToken) {
    let period = Duration::from_millis(broker.config.log_retention_check_interval_ms.max(100));
    let first = tokio::time::Instant::now() + period.min(RETENTION_INITIAL_DELAY);
    let mut ticker = tokio::time::interval_at(first, period);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let now = logbook_common::now_ms();
        // On the blocking pool: checkpoint fsyncs and file deletions must not stall an
        // async worker (block_in_place would, and would take its other tasks with it).
        let replicas = Arc::clone(&broker.replicas);
        let check = tokio::task::spawn_blocking(move || replicas.apply_retention(now));
        if let Err(e) = check.await {
            tracing::error!(error = %e, "retention check panicked");
        }
    }
}

/// Forgets idempotent producers silent for `producer.id.expiration.ms`, every
/// `producer.id.expiration.check.interval.ms` (first after one interval), as Kafka's
/// `PeriodicProducerExpirationCheck`: a retry after that is no longer deduplicated.
async fn producer_expiry_loop(broker: Arc<Broker>, shutdown: CancellationToken) {
    let period = Duration::from_millis(
        broker
            .config
            .producer_id_expiration_check_interval_ms
            .max(1),
    );
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let expired = broker.replicas.expire_producers(
            logbook_common::now_ms(),
            broker.config.producer_id_expiration_ms,
        );
        if expired > 0 {
            tracing::info!(producers = expired, "expired idle producer ids");
        }
    }
}

/// The log cleaner's settings from the `--log-cleaner-*` flags.
fn log_cleaner_config(config: &Config) -> logbook_replication::LogCleanerConfig {
    let rate = config.log_cleaner_io_max_bytes_per_second;
    logbook_replication::LogCleanerConfig {
        enable: config.log_cleaner_enable,
        threads: config.log_cleaner_threads,
        backoff_ms: config.log_cleaner_backoff_ms,
        dedupe_buffer_bytes: config.log_cleaner_dedupe_buffer_size,
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a positive rate below u64::MAX; larger means unlimited"
        )]
        io_max_bytes_per_second: (rate > 0.0 && rate < 1e18).then_some(rate as u64),
    }
}

/// In a cluster, a broker whose data directory failed (a write or fsync error: its logs can
/// no longer be trusted to persist anything) halts, as Kafka's `LogDirFailureHandler` halts
/// a broker whose only log directory failed: the controller then fences it when its
/// heartbeats stop and elects leaders among the other replicas, instead of the failed
/// leader keeping its partitions, refusing its followers and shrinking the ISR to itself.
/// A single node keeps serving its other partitions (there is nowhere to fail over to);
/// the failed ones answer KAFKA_STORAGE_ERROR until a restart recovers them.
async fn halt_on_log_dir_failure(mut failures: tokio::sync::watch::Receiver<Option<String>>) {
    let Ok(failed) = failures.wait_for(Option::is_some).await else {
        return;
    };
    let reason = failed.clone().unwrap_or_default();
    tracing::error!(%reason, "the data directory failed: halting so the controller moves leadership to the other replicas");
    std::process::exit(1);
}
