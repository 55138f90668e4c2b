//! Committed offsets: what OffsetCommit stores and OffsetFetch returns, and the limits Kafka
//! applies to them.

/// Kafka's `offset.metadata.max.bytes` default: longer commit metadata strings are refused
/// with OFFSET_METADATA_TOO_LARGE.
pub const OFFSET_METADATA_BYTES_MAX: usize = 4096;

/// One committed offset of a group for one partition (Kafka's `OffsetAndMetadata`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    /// The next offset the group will consume.
    pub offset: i64,
    /// The leader epoch of the last consumed record, or -1.
    pub leader_epoch: i32,
    /// The client's metadata string ("" when it sent none).
    pub metadata: String,
    /// When the commit was made, in ms since the epoch.
    pub commit_timestamp_ms: i64,
}
