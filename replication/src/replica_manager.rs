//! `ReplicaManager`: the one owner of the partitions this broker hosts (Kafka's class of
//! the same name).
//!
//! Handlers never index partitions or check epochs themselves: they ask
//! [`ReplicaManager::get_partition_or_error`], which answers with the partition or the
//! exact reason a client must act on (unknown partition, not the leader, a fenced or
//! unknown leader epoch, a partition a disk failure took offline). It also creates and
//! deletes partitions' logs (all-or-nothing per request), runs retention and producer-id
//! expiry, and owns the flusher that makes appends durable. Cluster metadata — which
//! topics exist, their ids and configs, and later replica assignments and leaders — lives
//! in the broker's `Topics`, not here.
//!
//! Leadership arrives through [`ReplicaManager::apply_partition_changes`] (from the
//! controller's committed metadata). Without a controller, every partition opened is led
//! by this broker alone (replicas and ISR: itself), which is how a single node serves.
//! A maintenance thread proposes ISR shrinks every half `replica.lag.time.max.ms` and
//! writes the high-watermark checkpoint every 5 seconds (and at shutdown).
//!
//! Thread-safety: the map is behind a `RwLock` held only to look up or swap entries,
//! never across I/O or an `.await`.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use logbook_storage::{LogConfig, Offset};
use parking_lot::{Condvar, Mutex, RwLock};

use crate::fetcher::{
    BrokerEndpoints, FetcherConfig, FollowerLog, LeaderEndPointFactory, RemoteLeaderEndPoints,
    ReplicaFetcherManager,
};
use crate::hw_checkpoint::{HighWatermarkCheckpoint, HighWatermarks};
use crate::log_cleaner::{LogCleaner, LogCleanerConfig, Partitions};
use crate::partition::{
    now_ms, AnyBrokerEligible, IsrEligibility, PartitionState, ReplicaOptions, Role,
    REPLICA_LAG_TIME_MAX_MS_DEFAULT,
};
use crate::partition_metadata;
use crate::{
    AlterPartitionCallback, AlterPartitionRequest, AlterPartitionSender, Error, FlushPolicy,
    Flusher, NoController, Partition, TopicPartition,
};

/// How often the high-watermark checkpoint is written (Kafka's
/// `replica.high.watermark.checkpoint.interval.ms`).
const HW_CHECKPOINT_INTERVAL: Duration = Duration::from_secs(5);

/// Kafka's `replica.socket.timeout.ms`: longest a follower's request to its leader may take
/// on top of the fetch's own wait.
const REPLICA_SOCKET_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest response frame a follower accepts from its leader: the fetch response budget
/// (`replica.fetch.response.max.bytes`, 10 MiB) with room for one oversized first batch.
const REPLICA_FRAME_BYTES_MAX: usize = 64 << 20;

/// How long shutdown waits for the replica fetchers to stop.
const FETCHER_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// What a role change did to one partition (see
/// [`ReplicaManager::apply_partition_changes`]).
#[derive(Debug)]
pub enum PartitionChange {
    /// This broker now leads it (`true`: in a new leader epoch).
    Leader(bool),
    /// This broker now follows `leader` (`true`: something changed).
    Follower(bool),
    /// This broker is not among its replicas; nothing was done (removal comes with
    /// reassignment).
    NotAReplica,
}

/// The AlterPartition sender every partition holds: it forwards to the sender set last,
/// so partitions opened while the controller's log replays at startup (before the
/// controller client exists) reach the controller once it does.
struct LateBoundSender(RwLock<Arc<dyn AlterPartitionSender>>);

impl AlterPartitionSender for LateBoundSender {
    fn submit(&self, request: AlterPartitionRequest, done: AlterPartitionCallback) {
        let sender = Arc::clone(&self.0.read());
        sender.submit(request, done);
    }
}

/// The ISR eligibility every partition asks: it forwards to the view set last (the
/// cluster metadata, once the broker has it), like [`LateBoundSender`].
struct LateBoundEligibility(RwLock<Arc<dyn IsrEligibility>>);

impl IsrEligibility for LateBoundEligibility {
    fn is_eligible(&self, broker_id: i32, broker_epoch: i64) -> bool {
        let view = Arc::clone(&self.0.read());
        view.is_eligible(broker_id, broker_epoch)
    }
}

/// The replica manager's maintenance thread: ISR shrink checks and the HW checkpoint.
struct Maintenance {
    stop: Mutex<bool>,
    wake: Condvar,
}

/// The partitions hosted by this broker. See the module docs.
pub struct ReplicaManager {
    data_dir: PathBuf,
    flusher: Flusher,
    /// Hosted partitions by topic, indexed by partition number (shared with the log
    /// cleaner's threads).
    partitions: Partitions,
    /// The log cleaner, once started.
    log_cleaner: Mutex<Option<LogCleaner>>,
    /// This broker's id (`node.id`).
    local_broker_id: i32,
    /// Where ISR changes go.
    alter_partition: Arc<LateBoundSender>,
    /// Which brokers may count in an ISR.
    isr_eligibility: Arc<LateBoundEligibility>,
    /// `replica.lag.time.max.ms`.
    replica_lag_time_max_ms: i64,
    /// The data directory's high-watermark checkpoint.
    hw_checkpoint: HighWatermarkCheckpoint,
    /// High watermarks read at startup, each used once by the first open of its partition.
    checkpointed: Mutex<HighWatermarks>,
    /// What was written last, so an idle broker does not rewrite it.
    last_checkpointed: Mutex<HighWatermarks>,
    /// Stops the maintenance thread.
    maintenance: Arc<Maintenance>,
    /// Partitions opened lead alone at once (single node, no controller); false once
    /// leadership comes from the controller's metadata.
    lead_alone: bool,
    /// The fetchers of the partitions this broker follows.
    fetchers: ReplicaFetcherManager,
    /// This broker's epoch (its registration with the controller; -1 before), sent in
    /// followers' fetches (KIP-903).
    broker_epoch: Arc<AtomicI64>,
    /// This broker has caught up with the metadata log since it started: until then the
    /// publisher replays history, and a replica that was reassigned away and later back
    /// would be wiped at the first step and lead empty at the last (see
    /// [`ReplicaManager::stop_replicas`]).
    caught_up: AtomicBool,
}

impl ReplicaManager {
    /// A replica manager for logs under `data_dir`, starting `flush_threads` flusher
    /// threads with `policy`.
    /// This broker's id is 0 until [`ReplicaManager::with_broker_id`] sets it.
    #[must_use]
    pub fn new(data_dir: &Path, policy: FlushPolicy, flush_threads: usize) -> Self {
        let hw_checkpoint = HighWatermarkCheckpoint::new(data_dir);
        let checkpointed = hw_checkpoint.read().unwrap_or_else(|e| {
            tracing::warn!(dir = %data_dir.display(), error = %e, "cannot read the high-watermark checkpoint; partitions open at their log start");
            HashMap::new()
        });
        Self {
            data_dir: data_dir.to_path_buf(),
            flusher: Flusher::start(policy, flush_threads),
            partitions: Arc::new(RwLock::new(HashMap::new())),
            log_cleaner: Mutex::new(None),
            local_broker_id: 0,
            alter_partition: Arc::new(LateBoundSender(RwLock::new(Arc::new(NoController)))),
            isr_eligibility: Arc::new(LateBoundEligibility(RwLock::new(Arc::new(
                AnyBrokerEligible,
            )))),
            replica_lag_time_max_ms: REPLICA_LAG_TIME_MAX_MS_DEFAULT,
            hw_checkpoint,
            last_checkpointed: Mutex::new(checkpointed.clone()),
            checkpointed: Mutex::new(checkpointed),
            maintenance: Arc::new(Maintenance {
                stop: Mutex::new(false),
                wake: Condvar::new(),
            }),
            lead_alone: true,
            fetchers: ReplicaFetcherManager::new(FetcherConfig {
                wait_for_durable: policy == FlushPolicy::EveryWrite,
                ..FetcherConfig::default()
            }),
            broker_epoch: Arc::new(AtomicI64::new(-1)),
            caught_up: AtomicBool::new(false),
        }
    }

    /// Followers fetch from the leaders' addresses `endpoints` gives (the cluster
    /// metadata), over Kafka's Fetch protocol, secured as `security` says (the
    /// inter-broker listener's TLS and SASL). Set after [`ReplicaManager::with_broker_id`]
    /// (fetches carry the id) and before any partition is followed.
    #[must_use]
    pub fn with_broker_endpoints(
        self,
        endpoints: Arc<dyn BrokerEndpoints>,
        security: logbook_client::security::ConnectionSecurity,
    ) -> Self {
        let factory = RemoteLeaderEndPoints {
            endpoints,
            replica_id: self.local_broker_id,
            broker_epoch: Arc::clone(&self.broker_epoch),
            request_timeout: REPLICA_SOCKET_TIMEOUT,
            frame_bytes_max: REPLICA_FRAME_BYTES_MAX,
            security,
        };
        self.fetchers.set_factory(Arc::new(factory));
        self
    }

    /// Followers reach their leaders through `factory` (tests: in-process leaders). Set
    /// before any partition is followed.
    #[must_use]
    pub fn with_leader_end_point_factory(self, factory: Arc<dyn LeaderEndPointFactory>) -> Self {
        self.fetchers.set_factory(factory);
        self
    }

    /// Sets the replica fetchers' settings (`wait_for_durable` is taken from the flush
    /// policy whatever `config` says).
    #[must_use]
    pub fn with_fetcher_config(self, config: FetcherConfig) -> Self {
        self.fetchers.set_config(FetcherConfig {
            wait_for_durable: self.flusher.policy() == FlushPolicy::EveryWrite,
            ..config
        });
        self
    }

    /// Sets this broker's epoch after it registered with the controller; followers'
    /// fetches carry it from their next request.
    pub fn set_broker_epoch(&self, broker_epoch: i64) {
        self.broker_epoch.store(broker_epoch, Ordering::Release);
    }

    /// Sets where ISR changes go once the controller client exists (it is built after the
    /// replica manager: the controller replays its log into the partitions as it starts).
    pub fn set_alter_partition_sender(&self, sender: Arc<dyn AlterPartitionSender>) {
        *self.alter_partition.0.write() = sender;
    }

    /// Sets which brokers may count in an ISR (the cluster metadata's registrations).
    pub fn set_isr_eligibility(&self, eligibility: Arc<dyn IsrEligibility>) {
        *self.isr_eligibility.0.write() = eligibility;
    }

    /// Marks the end of the startup replay of the metadata log (the broker registered and
    /// its image caught up): from now on a replica reassigned away is deleted.
    pub fn mark_caught_up(&self) {
        self.caught_up.store(true, Ordering::Release);
    }

    /// Whether [`ReplicaManager::mark_caught_up`] was called: destructive changes (deleting
    /// a topic's logs, a stray directory of an earlier topic of the same name) wait for it.
    #[must_use]
    pub fn is_caught_up(&self) -> bool {
        self.caught_up.load(Ordering::Acquire)
    }

    /// This broker's epoch (-1 before registration).
    #[must_use]
    pub fn broker_epoch(&self) -> i64 {
        self.broker_epoch.load(Ordering::Acquire)
    }

    /// The replica fetchers (tests and metrics describe them).
    #[must_use]
    pub fn fetchers(&self) -> &ReplicaFetcherManager {
        &self.fetchers
    }

    /// Leadership comes from the controller: partitions open with no role and serve
    /// nothing until [`ReplicaManager::apply_partition_changes`] names their leader (a
    /// replica that led alone meanwhile could acknowledge writes the real leader never
    /// sees).
    #[must_use]
    pub fn with_controller_leadership(mut self) -> Self {
        self.lead_alone = false;
        self
    }

    /// Sets this broker's id (`node.id`), before any partition is opened.
    #[must_use]
    pub fn with_broker_id(mut self, local_broker_id: i32) -> Self {
        self.local_broker_id = local_broker_id;
        self
    }

    /// Sets `replica.lag.time.max.ms`, before any partition is opened.
    #[must_use]
    pub fn with_replica_lag_time_max_ms(mut self, lag_ms: i64) -> Self {
        self.replica_lag_time_max_ms = lag_ms.max(1);
        self
    }

    /// Sets where ISR changes go (the controller client), before any partition is opened.
    #[must_use]
    pub fn with_alter_partition_sender(self, sender: Arc<dyn AlterPartitionSender>) -> Self {
        *self.alter_partition.0.write() = sender;
        self
    }

    /// This broker's id.
    #[must_use]
    pub fn local_broker_id(&self) -> i32 {
        self.local_broker_id
    }

    /// Starts the maintenance thread: ISR shrink checks every half
    /// `replica.lag.time.max.ms` and the high-watermark checkpoint every 5 seconds. Called
    /// once at startup; stopped by [`ReplicaManager::shutdown`].
    ///
    /// # Panics
    /// If the OS refuses to start a thread at startup.
    pub fn start_maintenance(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        let maintenance = Arc::clone(&self.maintenance);
        let shrink_every = Duration::from_millis(
            u64::try_from(self.replica_lag_time_max_ms / 2)
                .unwrap_or(1)
                .max(1),
        );
        let tick = shrink_every.min(HW_CHECKPOINT_INTERVAL);
        std::thread::Builder::new()
            .name("logbook-replica-maintenance".to_string())
            .spawn(move || {
                let mut last_checkpoint = std::time::Instant::now();
                let mut last_shrink = std::time::Instant::now();
                loop {
                    {
                        let mut stop = maintenance.stop.lock();
                        if !*stop {
                            maintenance.wake.wait_for(&mut stop, tick);
                        }
                        if *stop {
                            return;
                        }
                    }
                    let Some(manager) = weak.upgrade() else {
                        return;
                    };
                    if last_shrink.elapsed() >= shrink_every {
                        last_shrink = std::time::Instant::now();
                        manager.maybe_shrink_isr(now_ms());
                    }
                    if last_checkpoint.elapsed() >= HW_CHECKPOINT_INTERVAL {
                        last_checkpoint = std::time::Instant::now();
                        manager.checkpoint_high_watermarks();
                    }
                }
            })
            .expect("starting the replica maintenance thread at startup");
    }

    /// Proposes ISR shrinks for every partition this broker leads (Kafka's
    /// `maybeShrinkIsr` task).
    pub fn maybe_shrink_isr(&self, now_ms: i64) {
        for partition in self.all_partitions() {
            partition.maybe_shrink_isr(now_ms);
        }
    }

    /// Writes every hosted partition's high watermark to the data directory's checkpoint,
    /// if any changed since the last write. Blocking (fsyncs).
    pub fn checkpoint_high_watermarks(&self) {
        let current: HighWatermarks = self
            .all_partitions()
            .into_iter()
            .map(|p| (p.topic_partition().clone(), p.high_watermark()))
            .collect();
        let mut last = self.last_checkpointed.lock();
        if *last == current {
            return;
        }
        match self.hw_checkpoint.write(&current) {
            Ok(()) => *last = current,
            Err(e) => {
                tracing::error!(dir = %self.data_dir.display(), error = %e, "writing the high-watermark checkpoint failed");
            }
        }
    }

    /// Applies the controller's committed leadership and ISR of hosted partitions (Kafka's
    /// `applyDelta` for local changes): this broker leads → `become_leader`, and its
    /// fetcher stops; it is another replica → `become_follower`, and the partition is
    /// fetched from its leader in the leader epoch the partition now has (no fetching while
    /// it has no leader). Stale states are ignored by the partition. Answers per
    /// partition, in order; a partition this broker does not host is
    /// `UnknownTopicOrPartition` (creating its log needs its topic config: the metadata
    /// publisher creates it first).
    pub fn apply_partition_changes(
        &self,
        states: Vec<PartitionState>,
    ) -> Vec<(TopicPartition, Result<PartitionChange, Error>)> {
        states
            .into_iter()
            .map(|state| {
                let tp = state.topic_partition.clone();
                let Some(partition) = self.partition(&tp.topic, tp.partition) else {
                    return (tp.clone(), Err(Error::UnknownTopicOrPartition(tp)));
                };
                let result = if state.leader == self.local_broker_id {
                    self.fetchers.remove_partitions(std::slice::from_ref(&tp));
                    partition.become_leader(&state).map(PartitionChange::Leader)
                } else if state.replicas.contains(&self.local_broker_id) {
                    let changed = partition.become_follower(&state);
                    self.update_fetcher(&partition, state.topic_id);
                    Ok(PartitionChange::Follower(changed))
                } else {
                    self.fetchers.remove_partitions(std::slice::from_ref(&tp));
                    Ok(PartitionChange::NotAReplica)
                };
                (tp, result)
            })
            .collect()
    }

    /// Stops being a replica of partitions reassigned away from this broker (Kafka's
    /// StopReplica with deletion): no more fetching, appends refused and acks=all waiters
    /// failed (as on becoming a follower), and the log emptied, so the disk space comes
    /// back and a later reassignment back here starts from the leader's log. Hosted
    /// placeholders that never held a record and never had a role are left alone. While the
    /// startup replay runs ([`ReplicaManager::mark_caught_up`] not called yet) the log is
    /// kept: an intermediate image of the history may remove a replica the final one names
    /// again (away and back), and its log may then hold the partition's only copy. Returns
    /// the partitions stopped.
    pub fn stop_replicas(&self, states: Vec<PartitionState>) -> Vec<TopicPartition> {
        let mut stopped = Vec::new();
        for state in states {
            let tp = state.topic_partition.clone();
            let Some(partition) = self.partition(&tp.topic, tp.partition) else {
                continue;
            };
            self.fetchers.remove_partitions(std::slice::from_ref(&tp));
            if partition.role() == Role::None && partition.log_end_offset() == Offset(0) {
                continue;
            }
            partition.become_follower(&state);
            if !self.caught_up.load(Ordering::Acquire) {
                tracing::info!(partition = %tp, "no longer a replica (metadata replay): stopped, log kept");
                stopped.push(tp);
                continue;
            }
            match FollowerLog::truncate_fully_and_start_at(partition.as_ref(), Offset(0)) {
                Ok(()) => {
                    tracing::info!(partition = %tp, "no longer a replica: stopped, log deleted");
                }
                Err(e) => {
                    tracing::error!(partition = %tp, error = %e, "no longer a replica, but its log could not be deleted");
                }
            }
            stopped.push(tp);
        }
        stopped
    }

    /// Fetches a follower partition from the leader it now has (after a role change that
    /// may have been ignored as stale), or stops fetching it.
    fn update_fetcher(&self, partition: &Arc<Partition>, topic_id: uuid::Uuid) {
        let (leader, leader_epoch) = partition.current_leader();
        let tp = partition.topic_partition();
        if partition.role() == Role::Follower && leader >= 0 && leader != self.local_broker_id {
            self.fetchers
                .add_partition(partition, topic_id, leader, leader_epoch);
        } else {
            self.fetchers.remove_partitions(std::slice::from_ref(tp));
        }
    }

    fn all_partitions(&self) -> Vec<Arc<Partition>> {
        self.partitions.read().values().flatten().cloned().collect()
    }

    /// Starts the log cleaner threads that compact `cleanup.policy=compact` partitions
    /// (no threads when `config.enable` is false). Called once at startup.
    pub fn start_log_cleaner(&self, config: LogCleanerConfig) {
        let cleaner = LogCleaner::start(Arc::clone(&self.partitions), config);
        if let Some(previous) = self.log_cleaner.lock().replace(cleaner) {
            previous.shutdown();
        }
    }

    /// Log cleaner passes completed since start (0 when it is not running).
    #[must_use]
    pub fn log_cleaner_passes(&self) -> u64 {
        self.log_cleaner
            .lock()
            .as_ref()
            .map_or(0, LogCleaner::passes)
    }

    /// The directory of a partition's log: `<data-dir>/<topic>-<partition>`.
    #[must_use]
    pub fn log_dir(&self, topic: &str, partition: i32) -> PathBuf {
        self.data_dir.join(format!("{topic}-{partition}"))
    }

    /// The data directory's failure (`None` while healthy); see
    /// [`Flusher::log_dir_failures`].
    #[must_use]
    pub fn log_dir_failures(&self) -> tokio::sync::watch::Receiver<Option<String>> {
        self.flusher.log_dir_failures()
    }

    /// The flush policy in force.
    #[must_use]
    pub fn flush_policy(&self) -> FlushPolicy {
        self.flusher.policy()
    }

    /// The partition, or the error a client must act on (Kafka's `getPartitionOrError`
    /// followed by the leader-epoch check): `UnknownTopicOrPartition` when this broker
    /// hosts no such partition, `Storage(LogFailed)` when a disk failure took it offline,
    /// `FencedLeaderEpoch` / `UnknownLeaderEpoch` when `current_leader_epoch` (-1: not
    /// known to the client) is older / newer than the partition's, then
    /// `NotLeaderOrFollower` when this broker does not lead it (clients read and write
    /// only on the leader; followers fetch through `Partition::fetch_for_follower` after
    /// this same check).
    ///
    /// # Errors
    /// As above.
    pub fn get_partition_or_error(
        &self,
        topic_partition: &TopicPartition,
        current_leader_epoch: i32,
    ) -> Result<Arc<Partition>, Error> {
        let partition = self
            .partition(&topic_partition.topic, topic_partition.partition)
            .ok_or_else(|| Error::UnknownTopicOrPartition(topic_partition.clone()))?;
        if let Some(reason) = partition.offline_reason() {
            return Err(Error::Storage(logbook_storage::Error::LogFailed {
                dir: self.log_dir(&topic_partition.topic, topic_partition.partition),
                reason,
            }));
        }
        partition.check_leader_epoch(current_leader_epoch)?;
        if !partition.is_leader() {
            return Err(Error::NotLeaderOrFollower(topic_partition.clone()));
        }
        Ok(partition)
    }

    /// The hosted partition `topic`-`index`, if any, without the client-facing checks:
    /// for the broker's own coordinators.
    #[must_use]
    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        let partitions = self.partitions.read();
        let list = partitions.get(topic)?;
        usize::try_from(index)
            .ok()
            .and_then(|i| list.get(i))
            .cloned()
    }

    /// Every hosted partition of `topic`, by index.
    #[must_use]
    pub fn partitions_of(&self, topic: &str) -> Vec<Arc<Partition>> {
        self.partitions
            .read()
            .get(topic)
            .cloned()
            .unwrap_or_default()
    }

    /// Opens (creating or recovering) the logs of `topic`'s partitions in `range` and
    /// hosts them. All or nothing: if one cannot be opened, the ones this call opened are
    /// closed, their directories removed, and nothing is hosted. The caller fsyncs the data
    /// directory once afterwards so the new directories survive a crash.
    ///
    /// # Errors
    /// The first storage error.
    pub fn create_partitions(
        &self,
        topic: &str,
        range: Range<i32>,
        config: &LogConfig,
    ) -> Result<Vec<Arc<Partition>>, Error> {
        self.open_partitions(topic, None, range, config)
    }

    /// Opens (creating where missing) the logs of partitions `range` of the topic `topic`
    /// whose id is `topic_id`, recording the id in each directory
    /// ([`partition_metadata`](crate::partition_metadata)). A directory that records
    /// another id holds a deleted topic of the same name: once the startup replay is over
    /// ([`ReplicaManager::mark_caught_up`]) it is deleted and the log created empty; during
    /// the replay nothing is opened and INCONSISTENT_TOPIC_ID is returned, since a later
    /// image may name that other id again (the directory is then the current topic's). A
    /// directory without the file (written before it existed) is taken as `topic_id`'s,
    /// and the file written once the replay is over.
    ///
    /// # Errors
    /// [`Error::InconsistentTopicId`] as above; as [`ReplicaManager::create_partitions`].
    pub fn create_partitions_of(
        &self,
        topic: &str,
        topic_id: uuid::Uuid,
        range: Range<i32>,
        config: &LogConfig,
    ) -> Result<Vec<Arc<Partition>>, Error> {
        let caught_up = self.is_caught_up();
        for index in range.clone() {
            let dir = self.log_dir(topic, index);
            let found = match partition_metadata::read(&dir) {
                Ok(found) => found,
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "unreadable partition.metadata; taking the directory as the topic's");
                    None
                }
            };
            let Some(found) = found.filter(|found| *found != topic_id) else {
                continue;
            };
            let topic_partition = TopicPartition {
                topic: topic.to_string(),
                partition: index,
            };
            if !caught_up {
                return Err(Error::InconsistentTopicId {
                    topic_partition,
                    found,
                    wanted: topic_id,
                });
            }
            tracing::warn!(partition = %topic_partition, %found, wanted = %topic_id, "deleting the log of an earlier topic of the same name");
            self.checkpointed.lock().remove(&topic_partition);
            std::fs::remove_dir_all(&dir).map_err(logbook_storage::Error::from)?;
        }
        let opened = self.open_partitions(topic, Some(topic_id), range, config)?;
        Ok(opened)
    }

    /// Writes `topic_id` into the directories of `topic`'s hosted partitions that do not
    /// record one yet (logs opened during the startup replay, or written before the file
    /// existed). Called once the replay is over.
    pub fn record_topic_id(&self, topic: &str, topic_id: uuid::Uuid) {
        for partition in self.partitions_of(topic) {
            let tp = partition.topic_partition();
            let dir = self.log_dir(&tp.topic, tp.partition);
            if matches!(partition_metadata::read(&dir), Ok(Some(_))) || !dir.is_dir() {
                continue;
            }
            if let Err(e) = partition_metadata::write(&dir, topic_id) {
                tracing::error!(partition = %tp, error = %e, "cannot record the topic id of a partition directory");
            }
        }
    }

    fn open_partitions(
        &self,
        topic: &str,
        topic_id: Option<uuid::Uuid>,
        range: Range<i32>,
        config: &LogConfig,
    ) -> Result<Vec<Arc<Partition>>, Error> {
        let caught_up = self.is_caught_up();
        let mut opened: Vec<Arc<Partition>> = Vec::with_capacity(range.len());
        for index in range.clone() {
            let topic_partition = TopicPartition {
                topic: topic.to_string(),
                partition: index,
            };
            let dir = self.log_dir(topic, index);
            let existed = std::fs::symlink_metadata(&dir).is_ok();
            // A checkpointed high watermark belongs to the log that was there at startup.
            let checkpointed = self.checkpointed.lock().remove(&topic_partition);
            let options = ReplicaOptions {
                local_broker_id: self.local_broker_id,
                checkpointed_high_watermark: checkpointed.filter(|_| existed),
                alter_partition: Arc::clone(&self.alter_partition) as Arc<dyn AlterPartitionSender>,
                replica_lag_time_max_ms: self.replica_lag_time_max_ms,
                isr_eligibility: Arc::clone(&self.isr_eligibility) as Arc<dyn IsrEligibility>,
            };
            let opened_partition = Partition::open_replica(
                topic_partition,
                &dir,
                config.clone(),
                self.flusher.clone(),
                options,
            );
            // A new directory is this topic's; an old one without the file is recorded
            // only after the replay (it may belong to a later topic of the same name). A
            // directory left without the file is taken as the topic's later on, as one
            // written before the file existed.
            if let (Some(id), Ok(_)) = (topic_id, &opened_partition) {
                if !existed || caught_up {
                    if let Err(e) = partition_metadata::write(&dir, id) {
                        tracing::error!(dir = %dir.display(), error = %e, "cannot record the topic id of a partition directory");
                    }
                }
            }
            match opened_partition {
                Ok(partition) => {
                    if self.lead_alone {
                        partition.become_sole_leader();
                    }
                    opened.push(partition);
                }
                Err(e) => {
                    tracing::warn!(%topic, partition = index, error = %e, "cannot open partition log; rolling back");
                    roll_back_open(opened, &dir, existed);
                    return Err(e);
                }
            }
        }
        self.host_opened(topic, &opened);
        Ok(opened)
    }

    /// Makes newly opened partitions of `topic` hosted (Kafka's `allPartitions` put),
    /// all under one write lock so that no reader sees some of them without the others.
    /// They must come in partition order, right after those already hosted.
    fn host_opened(&self, topic: &str, opened: &[Arc<Partition>]) {
        let mut partitions = self.partitions.write();
        let list = partitions.entry(topic.to_string()).or_default();
        for partition in opened {
            let index = usize::try_from(partition.topic_partition().partition).unwrap_or(0);
            assert!(
                index == list.len(),
                "partition {index} of {topic} created out of order (have {})",
                list.len()
            );
            list.push(Arc::clone(partition));
        }
    }

    /// Stops hosting `topic` and closes its logs, leaving their files: during the startup
    /// replay a deleted topic's directory may belong to a later topic of the same name,
    /// which a later image opens again (the files no image names are removed once the
    /// replay is over).
    pub fn close_topic(&self, topic: &str) {
        for partition in self.unhost_topic(topic) {
            if let Err(e) = partition.close() {
                tracing::error!(partition = %partition.topic_partition(), error = %e, "closing the partition of a deleted topic failed");
            }
        }
    }

    /// Stops hosting `topic` and deletes its logs. Errors removing files are logged (the
    /// topic is gone from the metadata already; leftovers are removed at next start).
    pub fn delete_topic(&self, topic: &str) {
        for partition in self.unhost_topic(topic) {
            if let Err(e) = partition.delete() {
                tracing::error!(partition = %partition.topic_partition(), error = %e, "deleting partition data failed");
            }
        }
    }

    /// Removes `topic`'s partitions from the hosted ones and from the replica fetchers;
    /// returns them for the caller to close or delete.
    fn unhost_topic(&self, topic: &str) -> Vec<Arc<Partition>> {
        let removed = self.partitions.write().remove(topic).unwrap_or_default();
        let names: Vec<TopicPartition> = removed
            .iter()
            .map(|p| p.topic_partition().clone())
            .collect();
        self.fetchers.remove_partitions(&names);
        removed
    }

    /// Stops hosting the partitions `range` of `topic` (the last ones: a CreatePartitions
    /// being rolled back) and deletes their logs.
    pub fn remove_partitions(&self, topic: &str, range: Range<i32>) {
        let removed: Vec<Arc<Partition>> = {
            let mut partitions = self.partitions.write();
            let Some(list) = partitions.get_mut(topic) else {
                return;
            };
            let from = usize::try_from(range.start).unwrap_or(0).min(list.len());
            list.split_off(from)
        };
        let names: Vec<TopicPartition> = removed
            .iter()
            .map(|p| p.topic_partition().clone())
            .collect();
        self.fetchers.remove_partitions(&names);
        for partition in removed {
            if let Err(e) = partition.delete() {
                tracing::error!(partition = %partition.topic_partition(), error = %e, "removing a rolled-back partition failed");
            }
        }
    }

    /// Applies a changed topic config to its hosted partitions. A partition being closed
    /// (its topic is being deleted) needs none; any other failure leaves the partition on
    /// its old config until the next change or restart, so it is logged as a warning.
    pub fn set_config(&self, topic: &str, config: &LogConfig) {
        for partition in self.partitions_of(topic) {
            match partition.set_config(config.clone()) {
                Ok(()) => {}
                Err(e @ Error::Closed(_)) => {
                    tracing::debug!(partition = %partition.topic_partition(), error = %e, "config not applied to a closing partition");
                }
                Err(e) => {
                    tracing::warn!(partition = %partition.topic_partition(), error = %e, "config not applied");
                }
            }
        }
    }

    /// Forgets, in every hosted partition, the idempotent producers silent for
    /// `producer_id_expiration_ms`; returns how many.
    pub fn expire_producers(&self, now_ms: i64, producer_id_expiration_ms: i64) -> usize {
        let all: Vec<Arc<Partition>> = self.partitions.read().values().flatten().cloned().collect();
        all.iter()
            .filter_map(|p| p.expire_producers(now_ms, producer_id_expiration_ms).ok())
            .sum()
    }

    /// Applies retention to every hosted partition. Blocking: run it off the async
    /// workers.
    pub fn apply_retention(&self, now_ms: i64) {
        let all: Vec<Arc<Partition>> = self.partitions.read().values().flatten().cloned().collect();
        for partition in all {
            match partition.apply_retention(now_ms) {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!(partition = %partition.topic_partition(), segments = n, "retention removed segments");
                }
                Err(e) => {
                    tracing::warn!(partition = %partition.topic_partition(), error = %e, "retention failed");
                }
            }
        }
    }

    /// Stops the replica fetchers and waits for them: nothing is appended to a follower
    /// after this returns.
    pub async fn shutdown_fetchers(&self) {
        self.fetchers.shutdown().await;
    }

    /// Stops the replica fetchers (waiting for them a bounded time on the broker's
    /// runtime), closes every hosted partition (clean-shutdown checkpoints), then stops the
    /// flusher.
    pub fn shutdown(&self) {
        self.fetchers.shutdown_blocking(FETCHER_SHUTDOWN_TIMEOUT);
        *self.maintenance.stop.lock() = true;
        self.maintenance.wake.notify_all();
        if let Some(cleaner) = self.log_cleaner.lock().take() {
            cleaner.shutdown();
        }
        self.checkpoint_high_watermarks();
        close_all(&self.all_partitions());
        self.flusher.shutdown();
    }
}

/// How many threads [`close_all`] closes partitions on.
const CLOSE_THREADS: usize = 8;

/// Closes `partitions` on up to [`CLOSE_THREADS`] threads. Each close fsyncs its log and
/// writes its checkpoints; one after another, a broker with `__consumer_offsets` (50
/// partitions) spent seconds on slow-fsync filesystems (overlayfs in a container), while
/// fsyncs issued together share the filesystem's journal commits. Failures are logged:
/// a partition that did not close cleanly is recovered at the next open.
fn close_all(partitions: &[Arc<Partition>]) {
    let next = AtomicUsize::new(0);
    let close_next = || {
        while let Some(partition) = partitions.get(next.fetch_add(1, Ordering::Relaxed)) {
            if let Err(e) = partition.close() {
                tracing::error!(partition = %partition.topic_partition(), error = %e, "closing partition failed");
            }
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..CLOSE_THREADS.min(partitions.len()) {
            if let Err(e) = std::thread::Builder::new()
                .name("logbook-close".to_owned())
                .spawn_scoped(scope, close_next)
            {
                tracing::warn!(error = %e, "no thread to close partitions on; closing on fewer");
            }
        }
        close_next();
    });
}

/// Undoes an `open_partitions` that failed part way: the partitions it opened are
/// deleted, and the failed one's directory too if the attempt created it, so that a
/// retry starts from what was there before. Failures are logged, not returned: the
/// open's own error is the one the caller gets.
fn roll_back_open(opened: Vec<Arc<Partition>>, dir: &Path, existed: bool) {
    for partition in opened {
        if let Err(e) = partition.delete() {
            tracing::error!(partition = %partition.topic_partition(), error = %e, "rollback could not remove a partition directory");
        }
    }
    if !existed && dir.is_dir() {
        if let Err(e) = std::fs::remove_dir_all(dir) {
            tracing::error!(dir = %dir.display(), error = %e, "removing a half-created partition failed");
        }
    }
}

mod append_records;
pub use append_records::{
    AppendRecords, AppendRecordsError, AppendedRecords, OffWorker, PendingAck,
};
mod read;
pub use read::{FetchIsolation, LogReadResult};
