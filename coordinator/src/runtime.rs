//! `CoordinatorRuntime`: hosts a coordinator's state sharded by the partitions of its
//! internal topic, as Kafka's `CoordinatorRuntime` does, so that the group coordinator and
//! (next) the transaction coordinator share one shape: a shard is loaded when this broker
//! becomes the partition's leader (`load`, replaying that partition only), dropped when it
//! stops leading it (`unload`), and its timers belong to the shard, so unloading cancels
//! them and no late timer acts on state this broker no longer owns.
//!
//! The group coordinator runs on it: one `GroupShard` (its groups) per partition of
//! `__consumer_offsets`, `GroupCoordinator::load_partition` / `unload_partition` calling
//! `load` / `unload`, every group request starting at `shard(partition_for(group))` (the
//! [`RuntimeError`]s mapped to NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS in
//! `errors.rs`), and its timers (session, join phase, pending sync, offset expiry) scheduled
//! with [`CoordinatorRuntime::schedule`]. On a single node the broker loads every partition
//! at start (or when the topic is created); with replication, leadership changes go through
//! `coordinator::roles`: `begin_load` on the metadata publisher, `complete_load` on the
//! blocking pool (requests meanwhile get `LoadInProgress`), and `unload`. The transaction coordinator is the second `CoordinatorShard`
//! (`TransactionShard`, one per `__transaction_state` partition). Remaining: writes still
//! go straight to `Partition::append` rather than through the runtime (Kafka's runtime
//! batches a shard's records and applies them once durable).
//!
//! Replay cost: `load` replays its partition from the log start offset to the high
//! watermark, so start-up time is proportional to the partition's log, not to its live
//! state. Once log compaction exists, `__consumer_offsets` (compacted) keeps only the last
//! record per key below the cleaner's point, and this replay becomes proportional to live
//! state with no change here: the shard's `replay` is the place that must keep reading from
//! the log start (never a cached position past it) for that to hold.
//!
//! Thread-safety: the shard table is behind a `parking_lot::RwLock` held only for map
//! operations, never across an `.await` or a replay; a shard's own state guards itself.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::partition_writer::CoordinatorPartition;
use parking_lot::RwLock;
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

/// Shards of one coordinator by partition index. See the module docs.
pub struct CoordinatorRuntime<S> {
    shards: RwLock<HashMap<i32, Entry<S>>>,
    next_epoch: AtomicU64,
    shutdown: CancellationToken,
    self_weak: Weak<CoordinatorRuntime<S>>,
}

impl<S: CoordinatorShard> CoordinatorRuntime<S> {
    /// An empty runtime; cancelling `shutdown` stops every timer.
    #[must_use]
    pub fn new(shutdown: CancellationToken) -> Arc<Self> {
        Arc::new_cyclic(|self_weak| CoordinatorRuntime {
            shards: RwLock::new(HashMap::new()),
            next_epoch: AtomicU64::new(1),
            shutdown,
            self_weak: self_weak.clone(),
        })
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
        let (epoch, timers) = {
            let shards = self.shards.read();
            match shards.get(&partition_index) {
                Some(e) if matches!(e.status, Status::Loaded(_)) => (e.epoch, e.timers.clone()),
                Some(_) => return Err(RuntimeError::LoadInProgress(partition_index)),
                None => return Err(RuntimeError::NotCoordinator(partition_index)),
            }
        };
        let weak = self.self_weak.clone();
        Ok(tokio::spawn(async move {
            tokio::select! {
                () = timers.cancelled() => {}
                () = tokio::time::sleep(delay) => {
                    let Some(runtime) = weak.upgrade() else { return };
                    let shard = match runtime.shards.read().get(&partition_index) {
                        Some(Entry { status: Status::Loaded(shard), epoch: e, .. }) if *e == epoch => {
                            Arc::clone(shard)
                        }
                        _ => return,
                    };
                    f(&shard);
                }
            }
        })
        .abort_handle())
    }
}

#[cfg(test)]
mod tests;
