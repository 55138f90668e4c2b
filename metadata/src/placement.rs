//! Replica placement for new partitions: Kafka's rack-unaware round-robin
//! (`AdminUtils.assignReplicasToBrokersRackUnaware`; read, not copied).
//!
//! With the usable brokers sorted by id as `b[0..n]`, partition `p` (counted from the
//! topic's first new partition) gets its first replica on `b[(start_index + p) % n]`, so
//! leaders spread evenly. Follower `j` sits `1 + (shift + j) % (n - 1)` places after the
//! first replica, and `shift` grows by one every `n` partitions, so the followers of
//! consecutive rounds land on different brokers too. Never two replicas of a partition on
//! the same broker. The two starting points are the caller's (Kafka draws them at random;
//! our controller passes them in, so `assign` stays deterministic).

use crate::records::BrokerId;
use crate::Error;

/// Where the round-robin starts (Kafka's `fixedStartIndex`, drawn twice at random when
/// not fixed). Any values are valid; they are taken modulo the broker count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlacementStart {
    /// Index (in the sorted broker list) of the first partition's first replica.
    pub start_index: usize,
    /// Initial offset of the followers from their first replica.
    pub replica_shift: usize,
}

impl PlacementStart {
    /// Both starting points at `index` (Kafka's `fixedStartIndex`).
    #[must_use]
    pub fn fixed(index: usize) -> Self {
        PlacementStart {
            start_index: index,
            replica_shift: index,
        }
    }
}

/// Replica lists for partitions `first_partition_id .. first_partition_id + partitions`
/// (element `i` is partition `first_partition_id + i`), placed on `usable_brokers`
/// (unfenced, not shutting down; order and duplicates do not matter).
/// `first_partition_id` is 0 for a new topic and the current count for CreatePartitions
/// (Kafka's `startPartitionId`: first replicas continue the round-robin, the follower shift
/// restarts from `start` and grows at the next multiple of the broker count).
///
/// # Errors
/// `InvalidPartitions` if `partitions <= 0`; `InvalidReplicationFactor` if
/// `replication_factor <= 0` or more than the usable brokers.
pub fn assign(
    partitions: i32,
    replication_factor: i16,
    usable_brokers: &[BrokerId],
    first_partition_id: i32,
    start: PlacementStart,
) -> Result<Vec<Vec<BrokerId>>, Error> {
    let mut brokers = usable_brokers.to_vec();
    brokers.sort_unstable();
    brokers.dedup();
    let n = brokers.len();
    let invalid_rf = Error::InvalidReplicationFactor {
        replication_factor,
        usable_brokers: n,
    };
    let Ok(count) = usize::try_from(partitions) else {
        return Err(Error::InvalidPartitions { partitions });
    };
    if count == 0 {
        return Err(Error::InvalidPartitions { partitions });
    }
    let rf = usize::try_from(replication_factor).map_err(|_| invalid_rf.clone())?;
    if rf == 0 || rf > n {
        return Err(invalid_rf);
    }
    let first = usize::try_from(first_partition_id.max(0)).unwrap_or(0);
    let start_index = start.start_index % n;
    // Only `shift % (n - 1)` matters below; reducing it first avoids overflow.
    let mut shift = if n > 1 {
        start.replica_shift % (n - 1)
    } else {
        0
    };
    let mut assignment = Vec::with_capacity(count);
    for partition in first..first + count {
        if partition > 0 && partition % n == 0 {
            shift += 1;
        }
        let first_replica = (partition + start_index) % n;
        let mut replicas = Vec::with_capacity(rf);
        replicas.push(broker_at(&brokers, first_replica));
        for j in 0..rf - 1 {
            let offset = 1 + (shift + j) % (n - 1);
            replicas.push(broker_at(&brokers, (first_replica + offset) % n));
        }
        assignment.push(replicas);
    }
    Ok(assignment)
}

fn broker_at(brokers: &[BrokerId], index: usize) -> BrokerId {
    *brokers
        .get(index)
        .expect("placement indexes are taken modulo the broker count")
}

#[cfg(test)]
mod tests;
