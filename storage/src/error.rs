//! The storage crate's one error type. Each variant is a failure the caller can act on;
//! the broker turns them into Kafka error codes in its `errors.rs` (storage never does).

use crate::record_batch::BatchError;

/// Everything a [`crate::Log`] operation can fail with.
///
/// Disk data that fails validation during recovery is *not* an error (it is truncated
/// and logged); `CorruptBatch` is returned when already-trusted data turns out to be
/// unreadable at serve time (the disk lied after recovery, or an index points into the
/// middle of a batch), so the broker can answer `KafkaStorageError`/`CorruptMessage`
/// instead of panicking.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The requested offset is below the log start or above the log end.
    #[error("offset {requested} out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        /// The offset the caller asked for.
        requested: i64,
        /// The first offset still readable.
        log_start_offset: i64,
        /// The offset the next appended record will get.
        log_end_offset: i64,
    },
    /// A batch on disk (or handed to `append`) is not a well-formed v2 batch.
    #[error("corrupt record batch at position {position}: {reason}")]
    CorruptBatch {
        /// Byte position of the batch: in its segment file for disk data, in the
        /// caller's buffer for `append` input.
        position: u64,
        /// Human-readable cause (segment name included for disk data).
        reason: String,
    },
    /// A produce payload failed header validation.
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// A single append is larger than a segment can address (u32 file positions).
    #[error("append of {bytes} bytes exceeds the maximum segment size")]
    AppendTooLarge {
        /// Size of the rejected append.
        bytes: usize,
    },
    /// The operating system failed a file operation (maps to `KafkaStorageError`).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
