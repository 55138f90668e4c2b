//! `CoordinatorRuntime`: hosts a coordinator's state sharded by the partitions of its
//! internal topic, as Kafka's `CoordinatorRuntime` does, so that the group coordinator and
//! the transaction coordinator share one shape: a shard is loaded when this broker becomes
//! the partition's leader (`load`, replaying that partition only), dropped when it stops
//! leading it (`unload`), and its timers belong to the shard, so unloading cancels them
//! and no late timer acts on state this broker no longer owns.
//!
//! The group coordinator runs on it: one `GroupShard` (its groups) per partition of
//! `__consumer_offsets`, `GroupCoordinator::load_partition` / `unload_partition` calling
//! `load` / `unload`, every group request starting at `shard(partition_for(group))` (the
//! [`RuntimeError`]s mapped to NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS in
//! `errors.rs`), its one-shot timers (session, join phase, pending sync) scheduled with
//! [`CoordinatorRuntime::schedule`] and offset expiry with
//! [`CoordinatorRuntime::schedule_periodic`]. On a single node the broker loads every
//! partition at start (or when the topic is created); with replication, leadership changes
//! go through `coordinator::roles`: `begin_load` on the metadata publisher, `complete_load`
//! on the blocking pool (requests meanwhile get `LoadInProgress`), and `unload`. The
//! transaction coordinator is the second `CoordinatorShard` (`TransactionShard`, one per
//! `__transaction_state` partition), its sweeps (timed-out transactions, expired ids) on
//! `schedule_periodic` too.
//!
//! The runtime also owns what both coordinators did each for itself: the internal topic's
//! lifecycle ([`CoordinatorRuntime::ensure_topic`]: created on first use by the
//! coordinator's spec, the partitions this broker leads loaded before the topic is
//! published to requests; [`CoordinatorRuntime::load_existing`] at start) and the write
//! path ([`CoordinatorRuntime::write`], in `runtime/result.rs`): an operation returns its
//! records together with its response as a [`CoordinatorResult`] (Kafka's), and `write`
//! encodes them as one batch stamped with the current time, appends it to the shard's
//! partition ([`CoordinatorRuntime::append`], through the
//! [`PartitionWriter`](crate::partition_writer::PartitionWriter)), logs a failed write in
//! one place for every coordinator, and hands back a [`Written`]: the response, the
//! records with their offsets, and what to wait for before answering. The group
//! coordinator then replays the offset records it wrote onto its shard with the function
//! its load replays the partition with, as Kafka's runtime replays a write's records, so a
//! restart rebuilds what a live write installed.
//!
//! Still unlike Kafka's: an operation runs and appends under its group's or transactional
//! id's lock, one batch per operation, rather than being queued per shard and its records
//! batched by the runtime; the shard is changed at the append, not once the batch is
//! committed (readers
//! that must see only committed state read at the high watermark, as OffsetFetch does, or
//! wait for the commit), and a write that does not commit is undone by its coordinator
//! (the transaction coordinator puts back the previous metadata) rather than by reverting
//! the shard to its last committed offset. Two kinds of state are still changed in memory
//! by the operation rather than replayed from its records: a group's metadata (members,
//! which the rebalance state machine owns) and a transactional id's metadata (the next
//! metadata is the write's response, installed once appended).
//!
//! Replay cost: `load` replays its partition from the log start offset to the log end, so
//! start-up time is proportional to the partition's log, not to its live state. Both
//! internal topics are compacted, so below the cleaner's point the log keeps only the last
//! record per key and this replay tends to the live state; the shard's `replay` is the
//! place that must keep reading from the log start (never a cached position past it) for
//! that to hold.
//!
//! Thread-safety: the shard table is behind a `parking_lot::RwLock` held only for map
//! operations, never across an `.await` or a replay; a shard's own state guards itself.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use super::partition_writer::{CoordinatorHost, CoordinatorPartition, InternalTopic, WriteError};
use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;

/// The state of one coordinator for one partition of its internal topic.
pub trait CoordinatorShard: Send + Sync + Sized + 'static {
    /// Rebuilds the shard from the records of `partition` (index `partition_index` of the
    /// internal topic) and nothing else. Runs blocking I/O: call `load` off the async
    /// workers (or inside `block_in_place`).
    ///
    /// # Errors
    /// The partition's log cannot be read.
    fn replay(partition_index: i32, partition: &dyn CoordinatorPartition) -> Result<Self, String>;
}

/// Why a shard cannot serve a request; `errors.rs` maps these to Kafka's codes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    /// This broker does not host the shard (never loaded, or unloaded): NOT_COORDINATOR.
    #[error("not coordinator for partition {0}")]
    NotCoordinator(i32),
    /// The shard is being replayed: COORDINATOR_LOAD_IN_PROGRESS.
    #[error("partition {0} is loading")]
    LoadInProgress(i32),
    /// Replay failed; the shard stays unloaded.
    #[error("cannot load partition {partition_index}: {reason}")]
    Load {
        /// The partition that failed to load.
        partition_index: i32,
        /// The replay's message.
        reason: String,
    },
}

enum Status<S> {
    Loading,
    Loaded(Arc<S>),
}

struct Entry<S> {
    status: Status<S>,
    /// Distinguishes successive loads of one partition, so a replay or timer of an earlier
    /// load never acts on a later one.
    epoch: u64,
    /// Cancelled at unload: stops every timer of this load.
    timers: CancellationToken,
}

/// A load begun by [`CoordinatorRuntime::begin_load`], to finish with
/// [`CoordinatorRuntime::complete_load`]; a later load or unload of the partition makes it
/// stale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub struct LoadTicket {
    /// The partition being loaded.
    pub partition_index: i32,
    epoch: u64,
}

/// An append to a shard's partition, and the offset that must be committed before the
/// client is answered.
pub type Committable = (Arc<dyn CoordinatorPartition>, i64);

/// How a coordinator wants its internal topic created (Kafka's
/// `groupMetadataTopicConfigs` / `TransactionStateManager` topic configs).
#[derive(Clone, Debug)]
pub struct TopicSpec {
    /// Partition count.
    pub partitions: i32,
    /// Replication factor.
    pub replication_factor: i16,
    /// Topic configs.
    pub configs: Vec<(&'static str, String)>,
}

/// Runs blocking I/O from async code: `block_in_place` on the multi-threaded runtime (the
/// broker's), directly elsewhere (single-threaded test runtimes, which cannot hand the
/// worker over).
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// Shards of one coordinator by partition index, over its internal topic. See the module
/// docs.
pub struct CoordinatorRuntime<S> {
    shards: RwLock<HashMap<i32, Entry<S>>>,
    next_epoch: AtomicU64,
    shutdown: CancellationToken,
    self_weak: Weak<CoordinatorRuntime<S>>,
    /// The broker's partitions and internal topics.
    host: Arc<dyn CoordinatorHost>,
    /// The internal topic (`__consumer_offsets`, `__transaction_state`).
    topic: &'static str,
    /// Its partition count, once it exists here.
    topic_partitions: OnceLock<i32>,
    /// Serialises its creation.
    topic_creation: Mutex<()>,
}

impl<S: CoordinatorShard> CoordinatorRuntime<S> {
    /// An empty runtime over `topic` of `host`; cancelling `shutdown` stops every timer.
    #[must_use]
    pub fn new(
        shutdown: CancellationToken,
        host: Arc<dyn CoordinatorHost>,
        topic: &'static str,
    ) -> Arc<Self> {
        Arc::new_cyclic(|self_weak| CoordinatorRuntime {
            shards: RwLock::new(HashMap::new()),
            next_epoch: AtomicU64::new(1),
            shutdown,
            self_weak: self_weak.clone(),
            host,
            topic,
            topic_partitions: OnceLock::new(),
            topic_creation: Mutex::new(()),
        })
    }

    /// Partition `index` of the internal topic, if this broker hosts it.
    #[must_use]
    pub fn partition(&self, index: i32) -> Option<Arc<dyn CoordinatorPartition>> {
        self.host.partition(self.topic, index)
    }

    /// Whether this broker leads partition `index` of the internal topic now.
    #[must_use]
    pub fn leads(&self, index: i32) -> bool {
        self.partition(index).is_some_and(|p| p.is_leader())
    }

    /// The write path: appends `batch` (encoded by the shard's coordinator) to partition
    /// `index`; returns the partition and the offset to wait for before answering.
    ///
    /// # Errors
    /// `NotLeader` when the partition is not hosted here; see [`WriteError`].
    pub fn append(&self, index: i32, batch: &[u8]) -> Result<Committable, WriteError> {
        let partition = self.partition(index).ok_or_else(|| {
            WriteError::NotLeader(format!("{}-{index} is not hosted here", self.topic))
        })?;
        let end_offset = partition.append(batch)?;
        Ok((partition, end_offset))
    }

    /// The internal topic's partition count if it exists in the cluster (remembered once
    /// seen: another broker may have created it).
    pub fn topic_partitions(&self) -> Option<i32> {
        if let Some(count) = self.topic_partitions.get() {
            return Some(*count);
        }
        let count = self.host.partition_count(self.topic)?;
        Some(*self.topic_partitions.get_or_init(|| count))
    }

    /// At start: if the internal topic exists, loads with `load` the partitions this broker
    /// leads (all of them on a single node; the others load as their leadership arrives)
    /// and returns its partition count.
    ///
    /// # Errors
    /// The first failed load.
    pub fn load_existing(
        &self,
        load: impl Fn(i32) -> Result<(), RuntimeError>,
    ) -> Result<Option<i32>, RuntimeError> {
        let Some(count) = self.host.partition_count(self.topic) else {
            return Ok(None);
        };
        for index in 0..count {
            if self.leads(index) {
                load(index)?;
            }
        }
        Ok(Some(*self.topic_partitions.get_or_init(|| count)))
    }

    /// The internal topic's partition count, creating the topic on first use by `spec`
    /// (through the controller in a cluster) and loading with `load` every partition this
    /// broker leads and does not host yet, before the topic is published to requests (so
    /// no request sees it without its shards). Creation is serialised, and waited for off
    /// the async workers: it goes through the controller, whose tasks need a worker.
    ///
    /// # Errors
    /// The topic could not be created, or a partition of it could not be loaded.
    pub fn ensure_topic(
        &self,
        spec: impl FnOnce() -> TopicSpec,
        load: impl Fn(i32) -> Result<(), RuntimeError>,
    ) -> Result<i32, String> {
        if let Some(count) = self.topic_partitions.get() {
            return Ok(*count);
        }
        let _creating = blocking(|| self.topic_creation.lock());
        if let Some(count) = self.topic_partitions() {
            // Created already (here meanwhile, or by another broker of the cluster: its
            // shards load here as their leadership arrives).
            return Ok(count);
        }
        let spec = spec();
        let configs: Vec<(&str, &str)> =
            spec.configs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let created = blocking(|| {
            self.host.create(InternalTopic {
                name: self.topic,
                partitions: spec.partitions,
                replication_factor: spec.replication_factor,
                configs: &configs,
            })
        });
        let count = match created {
            Ok(count) => count,
            Err(e) => {
                // Another broker created it meanwhile.
                if let Some(count) = self.topic_partitions() {
                    return Ok(count);
                }
                return Err(format!("cannot create {}: {e}", self.topic));
            }
        };
        tracing::info!(partitions = spec.partitions, "created {}", self.topic);
        for index in 0..count {
            if self.leads(index) && !self.is_hosted(index) {
                load(index)
                    .map_err(|e| format!("cannot load a partition of {}: {e}", self.topic))?;
            }
        }
        Ok(*self.topic_partitions.get_or_init(|| count))
    }

    /// Replays partition `ticket.partition_index` of the internal topic for the load
    /// `ticket` began ([`CoordinatorRuntime::complete_load`] over the hosted partition),
    /// off the async workers; a partition not hosted here abandons the load.
    ///
    /// # Errors
    /// `NotCoordinator` when the partition is not hosted here; as `complete_load`.
    pub fn load_hosted(&self, ticket: LoadTicket) -> Result<Arc<S>, RuntimeError> {
        let Some(partition) = self.partition(ticket.partition_index) else {
            self.abandon_load(ticket);
            return Err(RuntimeError::NotCoordinator(ticket.partition_index));
        };
        blocking(|| self.complete_load(ticket, partition.as_ref()))
    }

    /// Loads the shard of `partition_index` by replaying `partition` (replacing, and
    /// cancelling the timers of, any earlier load). Requests meanwhile get
    /// `LoadInProgress`. Blocking: see [`CoordinatorShard::replay`].
    ///
    /// # Errors
    /// `Load` when replay fails (the shard is then unloaded); `NotCoordinator` when the
    /// partition was unloaded while it replayed.
    pub fn load(
        &self,
        partition_index: i32,
        partition: &dyn CoordinatorPartition,
    ) -> Result<(), RuntimeError> {
        let ticket = self.begin_load(partition_index);
        self.complete_load(ticket, partition).map(|_| ())
    }

    /// The first half of [`CoordinatorRuntime::load`], which does not block: marks the
    /// partition as loading (requests get `LoadInProgress` from now on, as Kafka answers
    /// while a load is scheduled) and resigns any earlier load. Finish it with
    /// [`CoordinatorRuntime::complete_load`], off the async workers.
    pub fn begin_load(&self, partition_index: i32) -> LoadTicket {
        let epoch = self.next_epoch.fetch_add(1, Ordering::Relaxed);
        let previous = self.shards.write().insert(
            partition_index,
            Entry {
                status: Status::Loading,
                epoch,
                timers: self.shutdown.child_token(),
            },
        );
        if let Some(previous) = previous {
            previous.timers.cancel();
        }
        LoadTicket {
            partition_index,
            epoch,
        }
    }

    /// Replays `partition` for the load `ticket` began and installs the shard, unless a
    /// later load or an unload superseded it meanwhile. Blocking: see
    /// [`CoordinatorShard::replay`].
    ///
    /// # Errors
    /// `Load` when replay fails (the shard is then unloaded); `NotCoordinator` when the
    /// load was superseded (unloaded, or loaded again) while it replayed.
    pub fn complete_load(
        &self,
        ticket: LoadTicket,
        partition: &dyn CoordinatorPartition,
    ) -> Result<Arc<S>, RuntimeError> {
        let LoadTicket {
            partition_index,
            epoch,
        } = ticket;
        let superseded = || {
            self.shards
                .read()
                .get(&partition_index)
                .is_none_or(|e| e.epoch != epoch)
        };
        if superseded() {
            return Err(RuntimeError::NotCoordinator(partition_index));
        }
        let replayed = S::replay(partition_index, partition);
        let mut shards = self.shards.write();
        let Some(entry) = shards
            .get_mut(&partition_index)
            .filter(|e| e.epoch == epoch)
        else {
            return Err(RuntimeError::NotCoordinator(partition_index));
        };
        match replayed {
            Ok(shard) => {
                let shard = Arc::new(shard);
                entry.status = Status::Loaded(Arc::clone(&shard));
                Ok(shard)
            }
            Err(reason) => {
                if let Some(entry) = shards.remove(&partition_index) {
                    entry.timers.cancel();
                }
                Err(RuntimeError::Load {
                    partition_index,
                    reason,
                })
            }
        }
    }

    /// Gives up the load `ticket` began (its partition is not hosted here after all): the
    /// partition is dropped unless a later load or unload already superseded it.
    pub fn abandon_load(&self, ticket: LoadTicket) {
        let mut shards = self.shards.write();
        if shards
            .get(&ticket.partition_index)
            .is_some_and(|e| e.epoch == ticket.epoch)
        {
            if let Some(entry) = shards.remove(&ticket.partition_index) {
                entry.timers.cancel();
            }
        }
    }

    /// Drops the shard of `partition_index` and cancels its timers (this broker no longer
    /// leads the partition); returns it if it was loaded.
    pub fn unload(&self, partition_index: i32) -> Option<Arc<S>> {
        let entry = self.shards.write().remove(&partition_index)?;
        entry.timers.cancel();
        match entry.status {
            Status::Loaded(shard) => Some(shard),
            Status::Loading => None,
        }
    }

    /// The loaded shard of `partition_index`.
    ///
    /// # Errors
    /// `NotCoordinator` when it is not hosted here, `LoadInProgress` while it replays.
    pub fn shard(&self, partition_index: i32) -> Result<Arc<S>, RuntimeError> {
        match self.shards.read().get(&partition_index).map(|e| &e.status) {
            None => Err(RuntimeError::NotCoordinator(partition_index)),
            Some(Status::Loading) => Err(RuntimeError::LoadInProgress(partition_index)),
            Some(Status::Loaded(shard)) => Ok(Arc::clone(shard)),
        }
    }

    /// Whether the shard of `partition_index` is loaded or loading here.
    #[must_use]
    pub fn is_hosted(&self, partition_index: i32) -> bool {
        self.shards.read().contains_key(&partition_index)
    }

    /// The partitions whose shards are loaded, ascending.
    #[must_use]
    pub fn loaded_partitions(&self) -> Vec<i32> {
        let mut loaded: Vec<i32> = self
            .shards
            .read()
            .iter()
            .filter(|(_, e)| matches!(e.status, Status::Loaded(_)))
            .map(|(p, _)| *p)
            .collect();
        loaded.sort_unstable();
        loaded
    }

    /// Runs `f` on the shard of `partition_index` after `delay`, unless the shard is
    /// unloaded (or reloaded) first or the runtime shuts down. Call from within tokio.
    ///
    /// # Errors
    /// The shard is not loaded.
    pub fn schedule(
        &self,
        partition_index: i32,
        delay: Duration,
        f: impl FnOnce(&S) + Send + 'static,
    ) -> Result<tokio::task::AbortHandle, RuntimeError> {
        let (epoch, timers) = self.timer_scope(partition_index)?;
        let weak = self.self_weak.clone();
        Ok(tokio::spawn(async move {
            tokio::select! {
                () = timers.cancelled() => {}
                () = tokio::time::sleep(delay) => {
                    let Some(runtime) = weak.upgrade() else { return };
                    let Some(shard) = runtime.loaded_at(partition_index, epoch) else { return };
                    f(&shard);
                }
            }
        })
        .abort_handle())
    }

    /// Runs `f` on the shard of `partition_index` every `period` (first `period` from now,
    /// then `period` after each run returns) for as long as this load of the shard lasts:
    /// unloading or reloading the shard, or shutting the runtime down, stops it, as
    /// [`CoordinatorRuntime::schedule`]'s timers stop. The coordinators' housekeeping
    /// (offset expiry, aborting timed-out transactions, expiring transactional ids) runs
    /// on it rather than each timer re-arming itself. Call from within tokio.
    ///
    /// # Errors
    /// The shard is not loaded.
    pub fn schedule_periodic(
        &self,
        partition_index: i32,
        period: Duration,
        mut f: impl FnMut(&S) + Send + 'static,
    ) -> Result<tokio::task::AbortHandle, RuntimeError> {
        let (epoch, timers) = self.timer_scope(partition_index)?;
        let weak = self.self_weak.clone();
        Ok(tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = timers.cancelled() => return,
                    () = tokio::time::sleep(period) => {}
                }
                // Not kept across the sleep: a timer must not keep its runtime alive.
                let Some(shard) = weak
                    .upgrade()
                    .and_then(|runtime| runtime.loaded_at(partition_index, epoch))
                else {
                    return;
                };
                f(&shard);
            }
        })
        .abort_handle())
    }

    /// The load a timer on `partition_index` belongs to: its epoch and the token its
    /// unload cancels.
    ///
    /// # Errors
    /// The shard is not loaded (`LoadInProgress` while it replays).
    fn timer_scope(&self, partition_index: i32) -> Result<(u64, CancellationToken), RuntimeError> {
        let shards = self.shards.read();
        match shards.get(&partition_index) {
            Some(e) if matches!(e.status, Status::Loaded(_)) => Ok((e.epoch, e.timers.clone())),
            Some(_) => Err(RuntimeError::LoadInProgress(partition_index)),
            None => Err(RuntimeError::NotCoordinator(partition_index)),
        }
    }

    /// The shard of `partition_index` if the load of `epoch` still holds it (a timer of an
    /// earlier load finds nothing).
    fn loaded_at(&self, partition_index: i32, epoch: u64) -> Option<Arc<S>> {
        match self.shards.read().get(&partition_index) {
            Some(Entry {
                status: Status::Loaded(shard),
                epoch: e,
                ..
            }) if *e == epoch => Some(Arc::clone(shard)),
            _ => None,
        }
    }
}

pub mod framing;
mod result;

pub use result::{CoordinatorResult, Written};

#[cfg(test)]
mod tests;
