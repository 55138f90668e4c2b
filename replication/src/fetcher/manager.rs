//! `ReplicaFetcherManager`: which leader broker each followed partition is fetched from
//! (Kafka's `ReplicaFetcherManager` / `AbstractFetcherManager`, with one fetcher per leader
//! broker, Kafka's `num.replica.fetchers` = 1).
//!
//! Metadata changes arrive synchronously (from `ReplicaManager::apply_partition_changes`):
//! they only update the *wanted* assignment (partition → leader, leader epoch), bounded by
//! the hosted partition count, and wake the manager's task. The task reconciles: a
//! partition whose leader changed is removed from the old leader's fetcher and added to the
//! new one's (created on demand, through a [`LeaderEndPointFactory`]); a partition now led
//! here or deleted is removed; a fetcher left with no partition is stopped. A partition is
//! (re)added only when its (leader, epoch) differs from what was last handed to a fetcher,
//! so one the fetcher stopped (fenced: its leader has a newer epoch) stays stopped until
//! metadata names a newer epoch. A leader whose address is not known yet is retried every
//! back-off.
//!
//! A fetch round in flight when its partition becomes leader cannot touch the leader's
//! log: `Partition` refuses follower changes unless it is a follower.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use logbook_storage::LeaderEpoch;
use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::dyn_end_point::BoxedLeaderEndPoint;
use super::remote_leader_end_point::{RemoteLeaderEndPoint, RemoteLeaderEndPointConfig};
use super::replica_fetcher::{
    Description, FetcherConfig, InitialFetchState, ReplicaFetcher, ReplicaFetcherHandle,
};
use crate::{Partition, TopicPartition};

/// Where brokers listen, from the cluster metadata (the broker implements it over its
/// metadata image): a follower connects to its leader there.
pub trait BrokerEndpoints: Send + Sync {
    /// The `(host, port)` of `broker_id`'s inter-broker listener, if it is registered.
    fn endpoint(&self, broker_id: i32) -> Option<(String, u16)>;
}

/// Makes the connection to a leader broker for a new fetcher.
pub trait LeaderEndPointFactory: Send + Sync {
    /// An end point for `leader_id`; `None` while its address is unknown.
    fn end_point(&self, leader_id: i32) -> Option<BoxedLeaderEndPoint>;
}

/// The production factory: [`RemoteLeaderEndPoint`]s to the addresses [`BrokerEndpoints`]
/// gives, sending this broker's id and its current broker epoch.
pub struct RemoteLeaderEndPoints {
    /// Where the leaders listen.
    pub endpoints: Arc<dyn BrokerEndpoints>,
    /// This broker's id.
    pub replica_id: i32,
    /// This broker's epoch, updated when it registers again.
    pub broker_epoch: Arc<AtomicI64>,
    /// `replica.socket.timeout.ms`.
    pub request_timeout: Duration,
    /// Largest response frame accepted.
    pub frame_bytes_max: usize,
    /// TLS and SASL of the inter-broker listener.
    pub security: logbook_client::security::ConnectionSecurity,
}

impl LeaderEndPointFactory for RemoteLeaderEndPoints {
    fn end_point(&self, leader_id: i32) -> Option<BoxedLeaderEndPoint> {
        let (host, port) = self.endpoints.endpoint(leader_id)?;
        let end_point = RemoteLeaderEndPoint::new(RemoteLeaderEndPointConfig {
            leader_id,
            address: format!("{host}:{port}"),
            replica_id: self.replica_id,
            replica_epoch: self.broker_epoch.load(Ordering::Acquire),
            client_id: format!("replica-fetcher-{}-{leader_id}", self.replica_id),
            request_timeout: self.request_timeout,
            frame_bytes_max: self.frame_bytes_max,
            security: self.security.clone(),
        })
        .with_broker_epoch(Arc::clone(&self.broker_epoch));
        Some(BoxedLeaderEndPoint(Box::new(end_point)))
    }
}

/// Where one partition is wanted to be fetched from.
#[derive(Clone)]
struct Target {
    partition: Arc<Partition>,
    topic_id: Uuid,
    leader: i32,
    leader_epoch: LeaderEpoch,
}

struct Shared {
    wanted: Mutex<BTreeMap<TopicPartition, Target>>,
    wake: Notify,
    factory: RwLock<Option<Arc<dyn LeaderEndPointFactory>>>,
    config: RwLock<FetcherConfig>,
    cancel: CancellationToken,
    /// Fetchers by leader broker, for `describe`; owned by the task otherwise.
    fetchers: tokio::sync::Mutex<BTreeMap<i32, ReplicaFetcherHandle<Partition>>>,
}

/// One fetcher per leader broker for the partitions this broker follows. See the module
/// docs.
pub struct ReplicaFetcherManager {
    shared: Arc<Shared>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl ReplicaFetcherManager {
    /// A manager with no partitions; its task starts with the first partition followed.
    #[must_use]
    pub fn new(config: FetcherConfig) -> Self {
        Self {
            shared: Arc::new(Shared {
                wanted: Mutex::new(BTreeMap::new()),
                wake: Notify::new(),
                factory: RwLock::new(None),
                config: RwLock::new(config),
                cancel: CancellationToken::new(),
                fetchers: tokio::sync::Mutex::new(BTreeMap::new()),
            }),
            task: Mutex::new(None),
        }
    }

    /// Sets how connections to leaders are made (before partitions are followed).
    pub fn set_factory(&self, factory: Arc<dyn LeaderEndPointFactory>) {
        *self.shared.factory.write() = Some(factory);
        self.shared.wake.notify_one();
    }

    /// Sets the settings of fetchers created from now on.
    pub fn set_config(&self, config: FetcherConfig) {
        *self.shared.config.write() = config;
    }

    /// Follows `partition` on `leader` in `leader_epoch` (Kafka's
    /// `addFetcherForPartitions`); moves it if it was followed on another leader.
    pub fn add_partition(
        &self,
        partition: &Arc<Partition>,
        topic_id: Uuid,
        leader: i32,
        leader_epoch: LeaderEpoch,
    ) {
        let tp = partition.topic_partition().clone();
        let target = Target {
            partition: Arc::clone(partition),
            topic_id,
            leader,
            leader_epoch,
        };
        self.shared.wanted.lock().insert(tp, target);
        self.ensure_started();
        self.shared.wake.notify_one();
    }

    /// Stops following `partitions` (Kafka's `removeFetcherForPartitions`): they became
    /// leader, lost their leader, or were deleted.
    pub fn remove_partitions(&self, partitions: &[TopicPartition]) {
        let mut wanted = self.shared.wanted.lock();
        let mut removed = false;
        for tp in partitions {
            removed |= wanted.remove(tp).is_some();
        }
        drop(wanted);
        if removed {
            self.shared.wake.notify_one();
        }
    }

    /// Every fetcher's partitions and failures, by leader broker (tests, metrics).
    pub async fn describe(&self) -> BTreeMap<i32, Description> {
        let fetchers = self.shared.fetchers.lock().await;
        let mut out = BTreeMap::new();
        for (leader, fetcher) in fetchers.iter() {
            if let Ok(description) = fetcher.describe().await {
                out.insert(*leader, description);
            }
        }
        out
    }

    /// Stops every fetcher and waits for them (at most `timeout`; a round in flight ends at
    /// its next await).
    pub async fn shutdown(&self) {
        self.shared.cancel.cancel();
        let task = self.task.lock().take();
        if let Some(task) = task {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "replica fetcher manager task failed");
            }
        }
    }

    /// Stops every fetcher from synchronous code: waits (bounded) on a multi-threaded
    /// runtime, only signals elsewhere.
    pub fn shutdown_blocking(&self, timeout: Duration) {
        self.shared.cancel.cancel();
        let Some(task) = self.task.lock().take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                let waited = tokio::task::block_in_place(|| {
                    handle.block_on(tokio::time::timeout(timeout, task))
                });
                if waited.is_err() {
                    tracing::warn!("replica fetchers did not stop within {timeout:?}");
                }
            }
            _ => {}
        }
    }

    fn ensure_started(&self) {
        let mut task = self.task.lock();
        if task.is_some() || self.shared.cancel.is_cancelled() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                *task = Some(handle.spawn(run(Arc::clone(&self.shared))));
            }
            Err(_) => {
                tracing::error!("no tokio runtime: replica fetchers cannot start");
            }
        }
    }
}

/// What each partition was last handed to a fetcher with.
type Assigned = BTreeMap<TopicPartition, (i32, LeaderEpoch)>;

async fn run(shared: Arc<Shared>) {
    let mut assigned: Assigned = BTreeMap::new();
    let mut retry_at: Option<tokio::time::Instant> = None;
    loop {
        let retry = async {
            match retry_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = shared.cancel.cancelled() => break,
            () = shared.wake.notified() => {}
            () = retry => {}
        }
        let complete = reconcile(&shared, &mut assigned).await;
        retry_at = (!complete).then(|| tokio::time::Instant::now() + shared.config.read().backoff);
    }
    let fetchers = std::mem::take(&mut *shared.fetchers.lock().await);
    for (_, fetcher) in fetchers {
        fetcher.shutdown().await;
    }
}

/// Brings the fetchers in line with the wanted assignment; `false` when some partition
/// could not be handed to a fetcher yet (its leader's address is unknown, or the fetcher
/// is full), to be retried.
async fn reconcile(shared: &Shared, assigned: &mut Assigned) -> bool {
    let wanted: BTreeMap<TopicPartition, Target> = shared.wanted.lock().clone();
    let mut fetchers = shared.fetchers.lock().await;
    // Removals first: partitions no longer wanted, or wanted on another leader.
    remove_fetcher_for_partitions(&fetchers, &wanted, assigned).await;
    // Additions: new partitions, a new leader, or a new epoch.
    let complete = add_fetcher_for_partitions(shared, &mut fetchers, &wanted, assigned).await;
    shutdown_idle_fetcher_threads(&mut fetchers, assigned).await;
    complete
}

/// The fetchers by leader broker, as [`Shared`] holds them.
type Fetchers = BTreeMap<i32, ReplicaFetcherHandle<Partition>>;

/// Kafka's `removeFetcherForPartitions`: takes the partitions no longer wanted, or
/// wanted on another leader, from their fetchers (and from `assigned`), before any is
/// added elsewhere, so that no partition is fetched by two fetchers at once.
async fn remove_fetcher_for_partitions(
    fetchers: &Fetchers,
    wanted: &BTreeMap<TopicPartition, Target>,
    assigned: &mut Assigned,
) {
    let mut removals: BTreeMap<i32, Vec<TopicPartition>> = BTreeMap::new();
    for (tp, (leader, _)) in assigned.iter() {
        if wanted.get(tp).is_none_or(|t| t.leader != *leader) {
            removals.entry(*leader).or_default().push(tp.clone());
        }
    }
    for (leader, partitions) in removals {
        for tp in &partitions {
            assigned.remove(tp);
        }
        if let Some(fetcher) = fetchers.get(&leader) {
            if fetcher.remove_partitions(partitions).await.is_err() {
                tracing::warn!(leader, "replica fetcher stopped unexpectedly");
            }
        }
    }
}

/// Kafka's `addFetcherForPartitions`: hands each partition whose leader or epoch
/// changed to its leader's fetcher, starting that fetcher if need be. `false` when some
/// could not be handed over yet.
async fn add_fetcher_for_partitions(
    shared: &Shared,
    fetchers: &mut Fetchers,
    wanted: &BTreeMap<TopicPartition, Target>,
    assigned: &mut Assigned,
) -> bool {
    let mut additions: BTreeMap<i32, Vec<(TopicPartition, Target)>> = BTreeMap::new();
    for (tp, target) in wanted {
        if assigned.get(tp) != Some(&(target.leader, target.leader_epoch)) {
            additions
                .entry(target.leader)
                .or_default()
                .push((tp.clone(), target.clone()));
        }
    }
    let mut complete = true;
    for (leader, targets) in additions {
        if let std::collections::btree_map::Entry::Vacant(vacant) = fetchers.entry(leader) {
            let factory = shared.factory.read().clone();
            let Some(end_point) = factory.and_then(|f| f.end_point(leader)) else {
                tracing::info!(
                    leader,
                    partitions = targets.len(),
                    "leader's address not known yet; fetching later"
                );
                complete = false;
                continue;
            };
            let config = shared.config.read().clone();
            tracing::info!(leader, "starting a replica fetcher");
            let fetcher = ReplicaFetcherHandle::spawn(ReplicaFetcher::new(end_point, config));
            vacant.insert(fetcher);
        }
        let Some(fetcher) = fetchers.get(&leader) else {
            continue;
        };
        let states = targets
            .iter()
            .map(|(_, t)| InitialFetchState {
                log: Arc::clone(&t.partition),
                topic_id: t.topic_id,
                current_leader_epoch: t.leader_epoch,
            })
            .collect();
        match fetcher.add_partitions(states).await {
            Ok(()) => {
                for (tp, t) in targets {
                    tracing::info!(partition = %tp, leader, epoch = %t.leader_epoch, "fetching from the leader");
                    assigned.insert(tp, (t.leader, t.leader_epoch));
                }
            }
            Err(e) => {
                tracing::error!(leader, error = %e, "cannot add partitions to the replica fetcher");
                complete = false;
            }
        }
    }
    complete
}

/// Kafka's `shutdownIdleFetcherThreads`: stops the fetchers left with no partition.
async fn shutdown_idle_fetcher_threads(fetchers: &mut Fetchers, assigned: &Assigned) {
    let busy: BTreeSet<i32> = assigned.values().map(|(leader, _)| *leader).collect();
    let idle: Vec<i32> = fetchers
        .keys()
        .copied()
        .filter(|leader| !busy.contains(leader))
        .collect();
    for leader in idle {
        if let Some(fetcher) = fetchers.remove(&leader) {
            tracing::info!(leader, "stopping an idle replica fetcher");
            fetcher.shutdown().await;
        }
    }
}
