//! logbook-coordinator: the state machines clients find with FindCoordinator (Kafka's
//! `coordinator-common`, `group-coordinator` and `transaction-coordinator` modules).
//!
//! - [`runtime`]: `CoordinatorRuntime`, a coordinator's state sharded by the partitions of
//!   its internal topic, loaded and unloaded with their leadership, owning the timers
//!   (one-shot and periodic) and the write path (`CoordinatorResult` → `write`).
//! - [`partition_writer`]: all a coordinator needs of the broker, as traits (find a hosted
//!   partition, append, wait until committed, write a marker, read back for replay; create
//!   an internal topic). The broker implements them over its `ReplicaManager`; the tests
//!   over a real log in a temporary directory. This crate sees storage and replication
//!   through them only, and never the broker (the layering test holds this).
//! - [`group`]: the classic group protocol and committed offsets on `__consumer_offsets`.
//! - [`transaction`]: transactions on `__transaction_state`, their markers, and the
//!   [`transaction::GroupOffsets`] trait through which they complete transactional offset
//!   commits (the only way transactions reach groups).
//! - [`producer_id_manager`]: producer id blocks from the controller (KIP-730).
//! - [`roles`]: leadership changes of the internal partitions → loads and unloads.
//!
//! A new coordinator is a [`runtime::CoordinatorShard`] (its state for one partition,
//! rebuilt by `replay`) plus operations that return their records and response as a
//! [`runtime::CoordinatorResult`] for [`runtime::CoordinatorRuntime::write`] to append to
//! the shard's [`partition_writer::CoordinatorPartition`].

pub mod group;
pub mod partition_writer;
pub mod producer_id_manager;
pub mod roles;
pub mod runtime;
#[cfg(test)]
mod test_host;
pub mod transaction;

pub use group::GroupCoordinator;
pub use roles::{CoordinatorRoles, PartitionRole};
pub use transaction::TransactionCoordinator;

/// The internal topic holding committed offsets and group metadata (Kafka's
/// `Topic.GROUP_METADATA_TOPIC_NAME`), the group coordinator's.
pub const GROUP_METADATA_TOPIC_NAME: &str = "__consumer_offsets";

/// The internal topic holding transaction state (Kafka's
/// `Topic.TRANSACTION_STATE_TOPIC_NAME`), the transaction coordinator's.
pub const TRANSACTION_STATE_TOPIC_NAME: &str = "__transaction_state";

/// Java's `String.hashCode` over UTF-16 code units, as Kafka uses to place groups.
#[must_use]
pub fn java_string_hashcode(s: &str) -> i32 {
    s.encode_utf16().fold(0_i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// Kafka's `Utils.abs(groupId.hashCode) % partitions`: the `__consumer_offsets` partition
/// whose leader coordinates `group_id` (and likewise the `__transaction_state` partition of
/// a transactional id).
#[must_use]
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    assert!(0 < partitions, "offsets topic has {partitions} partitions");
    let hash = java_string_hashcode(group_id);
    // Utils.abs maps i32::MIN to 0 rather than overflowing.
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashcode_matches_java() {
        // Values computed by Java's String.hashCode.
        assert_eq!(java_string_hashcode(""), 0);
        assert_eq!(java_string_hashcode("a"), 97);
        assert_eq!(java_string_hashcode("hello"), 99_162_322);
        assert_eq!(java_string_hashcode("polygenelubricants"), i32::MIN);
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("hello", 50), 99_162_322 % 50);
        // "Aa" and "BB" collide in Java.
        assert_eq!(java_string_hashcode("Aa"), java_string_hashcode("BB"));
    }
}
