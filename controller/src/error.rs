//! The controller's typed errors: one variant per failure a caller can act on. Only the
//! broker's `errors.rs` turns them into Kafka error codes (NOT_CONTROLLER and friends).

use std::io;

/// What a controller operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// This node is not the active controller; `leader_id` is the one it knows of, if any
    /// (Kafka's NOT_CONTROLLER: the caller retries against that node).
    #[error("not the controller (leader: {leader_id:?})")]
    NotController {
        /// The current leader's node id, when this node knows it.
        leader_id: Option<u64>,
    },
    /// The entry is larger than `entry_bytes_max` allows (Kafka's RECORD_LIST_TOO_LARGE
    /// for a metadata batch); nothing was written.
    #[error("controller entry of {bytes} bytes exceeds entry_bytes_max {max}")]
    EntryTooLarge {
        /// Size of the entry as it would be stored.
        bytes: usize,
        /// The configured limit.
        max: u32,
    },
    /// The Raft node has stopped (shutdown, or a fatal storage error before it).
    #[error("the controller quorum has shut down: {reason}")]
    Shutdown {
        /// Why it stopped, as openraft reports it.
        reason: String,
    },
    /// The configuration cannot work (this node missing from the voters, a bad address).
    #[error("invalid controller configuration: {0}")]
    Config(String),
    /// Disk or socket I/O failed while starting.
    #[error("controller I/O error: {0}")]
    Io(#[from] io::Error),
    /// A failure of ours or openraft's that no caller can fix (logged where it happens).
    #[error("controller internal error: {0}")]
    Internal(String),
}
