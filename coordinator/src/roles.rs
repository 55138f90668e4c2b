//! `CoordinatorRoles`: moves the coordinator shards with the leadership of their internal
//! partitions, as Kafka's `onElection` / `onResignation` (called from its metadata
//! publisher) do. A coordinator shard lives where its `__consumer_offsets` or
//! `__transaction_state` partition's leader is: becoming leader loads it (the transaction
//! coordinator's epoch = the partition's leader epoch, so markers of a deposed coordinator
//! are fenced), becoming follower or losing the replica unloads it (timers cancelled,
//! parked JoinGroup / SyncGroup and in-flight EndTxn answer NOT_COORDINATOR).
//!
//! The metadata publisher calls [`CoordinatorRoles::on_partition_changes`] after
//! `ReplicaManager::apply_partition_changes`. Unloading is immediate (no I/O). Loading
//! replays the partition's log, which may take long, so it must not hold back the
//! publisher: the shard is marked loading at once (requests answer
//! COORDINATOR_LOAD_IN_PROGRESS, as Kafka's do while a load is scheduled) and the replay
//! runs on the blocking pool. A later change of the same partition supersedes a load still
//! running (the runtime's load tickets), so changes may arrive in any rhythm.
//!
//! Single-node start-up still loads every internal partition in the coordinators' own
//! `load`; this hook is additive: a partition already hosted (group) or hosted with the
//! same coordinator epoch (transactions) is left as it is.

use std::collections::HashMap;
use std::sync::Arc;

use logbook_common::TopicPartition;
use parking_lot::Mutex;

use super::group::GroupCoordinator;
use super::transaction::{TransactionCoordinator, TRANSACTION_STATE_TOPIC_NAME};
use super::GROUP_METADATA_TOPIC_NAME;

/// One partition's new role on this broker, as the metadata publisher learned it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionRole {
    /// The partition.
    pub topic_partition: TopicPartition,
    /// This broker now leads it (`false`: it follows, or is no longer a replica).
    pub leader: bool,
    /// The partition's leader epoch in the image.
    pub leader_epoch: i32,
}

/// The group and transaction coordinators of this broker, loaded and unloaded with the
/// leadership of their partitions. See the module docs.
pub struct CoordinatorRoles {
    groups: Arc<GroupCoordinator>,
    transactions: Arc<TransactionCoordinator>,
    /// The `__transaction_state` loads this hook began, by partition: the coordinator epoch
    /// each was begun with, so a repeated change in the same epoch starts no second replay.
    transaction_loads: Mutex<HashMap<i32, i32>>,
}

impl CoordinatorRoles {
    /// Roles over the two coordinators (their start-up loads count as hosted).
    #[must_use]
    pub fn new(
        groups: Arc<GroupCoordinator>,
        transactions: Arc<TransactionCoordinator>,
    ) -> Arc<Self> {
        Arc::new(CoordinatorRoles {
            groups,
            transactions,
            transaction_loads: Mutex::new(HashMap::new()),
        })
    }

    /// Applies leadership changes: for each internal partition, leader → load its shard
    /// (in the background; see the module docs), otherwise → unload it. Other topics are
    /// ignored. Returns the background loads begun, which callers may await (tests do) or
    /// drop. Call from within the tokio runtime.
    pub fn on_partition_changes(
        &self,
        changes: &[PartitionRole],
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let mut loads = Vec::new();
        for change in changes {
            let index = change.topic_partition.partition;
            match (change.topic_partition.topic.as_str(), change.leader) {
                (GROUP_METADATA_TOPIC_NAME, true) => {
                    if let Some(load) = self.load_group_partition(index) {
                        loads.push(load);
                    }
                }
                (GROUP_METADATA_TOPIC_NAME, false) => self.groups.unload_partition(index),
                (TRANSACTION_STATE_TOPIC_NAME, true) => {
                    if let Some(load) = self.load_transaction_partition(index, change.leader_epoch)
                    {
                        loads.push(load);
                    }
                }
                (TRANSACTION_STATE_TOPIC_NAME, false) => {
                    self.transaction_loads.lock().remove(&index);
                    self.transactions.unload_partition(index);
                }
                _ => {}
            }
        }
        loads
    }

    /// Partitions whose replicas this broker dropped (their topic was deleted or they were
    /// reassigned away): their shards are unloaded.
    pub fn on_partitions_deleted(&self, deleted: &[TopicPartition]) {
        let roles: Vec<PartitionRole> = deleted
            .iter()
            .map(|tp| PartitionRole {
                topic_partition: tp.clone(),
                leader: false,
                leader_epoch: -1,
            })
            .collect();
        let _ = self.on_partition_changes(&roles);
    }

    fn load_group_partition(&self, index: i32) -> Option<tokio::task::JoinHandle<()>> {
        if self.groups.is_hosted(index) {
            // Loaded at start-up or by an earlier change (a leader epoch bump while this
            // broker stays leader changes nothing for groups).
            return None;
        }
        let ticket = self.groups.begin_load_partition(index);
        let groups = Arc::clone(&self.groups);
        Some(tokio::task::spawn_blocking(move || {
            match groups.complete_load_partition(ticket) {
                Ok(()) => tracing::info!(partition = index, "group coordinator loaded"),
                Err(e) => {
                    tracing::info!(partition = index, error = %e, "group coordinator load ended")
                }
            }
        }))
    }

    fn load_transaction_partition(
        &self,
        index: i32,
        leader_epoch: i32,
    ) -> Option<tokio::task::JoinHandle<()>> {
        {
            let mut begun = self.transaction_loads.lock();
            if begun.get(&index) == Some(&leader_epoch)
                || self.transactions.coordinator_epoch(index) == Some(leader_epoch)
            {
                return None;
            }
            begun.insert(index, leader_epoch);
        }
        let ticket = self.transactions.begin_load_partition(index);
        let transactions = Arc::clone(&self.transactions);
        Some(tokio::task::spawn_blocking(move || {
            if let Err(e) = transactions.complete_load_partition(ticket, leader_epoch) {
                tracing::info!(partition = index, error = %e, "transaction coordinator load ended");
            }
        }))
    }
}

#[cfg(test)]
mod tests;
