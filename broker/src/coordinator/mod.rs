//! Coordinators: the broker-side state machines that clients find with FindCoordinator.
//! The group coordinator and the transaction coordinator, both on one `CoordinatorRuntime`.

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

pub use crate::topics::GROUP_METADATA_TOPIC_NAME;

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
