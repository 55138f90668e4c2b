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
//! Thread-safety: the map is behind a `RwLock` held only to look up or swap entries,
//! never across I/O or an `.await`.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use logbook_storage::LogConfig;
use parking_lot::{Mutex, RwLock};

use crate::log_cleaner::{LogCleaner, LogCleanerConfig, Partitions};
use crate::{Error, FlushPolicy, Flusher, Partition, TopicPartition};

/// The partitions hosted by this broker. See the module docs.
pub struct ReplicaManager {
    data_dir: PathBuf,
    flusher: Flusher,
    /// Hosted partitions by topic, indexed by partition number (shared with the log
    /// cleaner's threads).
    partitions: Partitions,
    /// The log cleaner, once started.
    log_cleaner: Mutex<Option<LogCleaner>>,
}

impl ReplicaManager {
    /// A replica manager for logs under `data_dir`, starting `flush_threads` flusher
    /// threads with `policy`.
    #[must_use]
    pub fn new(data_dir: &Path, policy: FlushPolicy, flush_threads: usize) -> Self {
        Self {
            data_dir: data_dir.to_path_buf(),
            flusher: Flusher::start(policy, flush_threads),
            partitions: Arc::new(RwLock::new(HashMap::new())),
            log_cleaner: Mutex::new(None),
        }
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

    /// The flush policy in force.
    #[must_use]
    pub fn flush_policy(&self) -> FlushPolicy {
        self.flusher.policy()
    }

    /// The partition, or the error a client must act on (Kafka's `getPartitionOrError`
    /// followed by the leader-epoch check): `UnknownTopicOrPartition` when this broker
    /// hosts no such partition, `Storage(LogFailed)` when a disk failure took it offline,
    /// `FencedLeaderEpoch` / `UnknownLeaderEpoch` when `current_leader_epoch` (-1: not
    /// known to the client) is older / newer than the partition's. On a single node this
    /// broker leads every partition it hosts; `NotLeaderOrFollower` arrives with
    /// replication.
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
        let mut opened: Vec<Arc<Partition>> = Vec::with_capacity(range.len());
        for index in range.clone() {
            let topic_partition = TopicPartition {
                topic: topic.to_string(),
                partition: index,
            };
            let dir = self.log_dir(topic, index);
            let existed = std::fs::symlink_metadata(&dir).is_ok();
            match Partition::open(topic_partition, &dir, config.clone(), self.flusher.clone()) {
                Ok(partition) => opened.push(partition),
                Err(e) => {
                    tracing::warn!(%topic, partition = index, error = %e, "cannot open partition log; rolling back");
                    for partition in opened {
                        if let Err(e) = partition.delete() {
                            tracing::error!(partition = %partition.topic_partition(), error = %e, "rollback could not remove a partition directory");
                        }
                    }
                    if !existed && dir.is_dir() {
                        if let Err(e) = std::fs::remove_dir_all(&dir) {
                            tracing::error!(dir = %dir.display(), error = %e, "removing a half-created partition failed");
                        }
                    }
                    return Err(e);
                }
            }
        }
        let mut partitions = self.partitions.write();
        let list = partitions.entry(topic.to_string()).or_default();
        for partition in &opened {
            let index = usize::try_from(partition.topic_partition().partition).unwrap_or(0);
            assert!(
                index == list.len(),
                "partition {index} of {topic} created out of order (have {})",
                list.len()
            );
            list.push(Arc::clone(partition));
        }
        Ok(opened)
    }

    /// Stops hosting `topic` and deletes its logs. Errors removing files are logged (the
    /// topic is gone from the metadata already; leftovers are removed at next start).
    pub fn delete_topic(&self, topic: &str) {
        let removed = self.partitions.write().remove(topic).unwrap_or_default();
        for partition in removed {
            if let Err(e) = partition.delete() {
                tracing::error!(partition = %partition.topic_partition(), error = %e, "deleting partition data failed");
            }
        }
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

    /// Applies retention to every hosted partition and forgets idempotent producers
    /// silent for `producer_id_expiration_ms`. Blocking: run it off the async workers.
    pub fn apply_retention(&self, now_ms: i64, producer_id_expiration_ms: i64) {
        let all: Vec<Arc<Partition>> = self.partitions.read().values().flatten().cloned().collect();
        for partition in all {
            match partition.apply_retention(now_ms, producer_id_expiration_ms) {
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

    /// Closes every hosted partition (clean-shutdown checkpoints), then stops the
    /// flusher.
    pub fn shutdown(&self) {
        if let Some(cleaner) = self.log_cleaner.lock().take() {
            cleaner.shutdown();
        }
        let all: Vec<Arc<Partition>> = self.partitions.read().values().flatten().cloned().collect();
        for partition in all {
            if let Err(e) = partition.close() {
                tracing::error!(partition = %partition.topic_partition(), error = %e, "closing partition failed");
            }
        }
        self.flusher.shutdown();
    }
}
