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
    /// Batches fetched from the leader do not continue this replica's log: the first does
    /// not start at the log end, or one does not start where the previous ended (Kafka's
    /// `UnexpectedAppendOffsetException`). Nothing was written; the follower must
    /// truncate or re-fetch.
    #[error("replicated batch at offset {got} where {expected} was expected")]
    UnexpectedAppendOffset {
        /// The offset the next batch had to start at.
        expected: i64,
        /// The base offset it had.
        got: i64,
    },
    /// A single append is larger than a segment can address (u32 file positions).
    #[error("append of {bytes} bytes exceeds the maximum segment size")]
    AppendTooLarge {
        /// Size of the rejected append.
        bytes: usize,
    },
    /// The operating system failed a file operation (maps to `KafkaStorageError`).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// An earlier write or fsync failed in a way that leaves the log's files in doubt;
    /// the log refuses appends until a restart recovers it (maps to `KafkaStorageError`).
    #[error("log in {} failed: {reason}", dir.display())]
    LogFailed {
        /// The partition directory.
        dir: std::path::PathBuf,
        /// The original failure.
        reason: String,
    },
    /// An idempotent producer skipped or reordered sequence numbers.
    #[error(
        "out of order sequence number for producer {producer_id}: expected {expected}, got {got}"
    )]
    OutOfOrderSequence {
        /// The producer.
        producer_id: i64,
        /// The sequence the broker expected.
        expected: i32,
        /// The sequence it got.
        got: i32,
    },
    /// A batch from an older epoch of a producer that has since been re-initialised.
    #[error("producer {producer_id} epoch {got} is older than the current epoch {current}")]
    InvalidProducerEpoch {
        /// The producer.
        producer_id: i64,
        /// The producer's current epoch.
        current: i16,
        /// The batch's epoch.
        got: i16,
    },
    /// A transactional producer wrote a non-transactional batch while its transaction is
    /// open (Kafka's `InvalidTxnStateException`).
    #[error("producer {producer_id} wrote a non-transactional batch inside its open transaction")]
    InvalidTxnState {
        /// The producer.
        producer_id: i64,
    },
    /// A marker from a transaction coordinator older than the one that wrote the
    /// producer's last marker (a zombie coordinator).
    #[error("coordinator epoch {got} for producer {producer_id} is older than {current}")]
    TransactionCoordinatorFenced {
        /// The producer.
        producer_id: i64,
        /// The coordinator epoch of the producer's last marker.
        current: i32,
        /// The marker's coordinator epoch.
        got: i32,
    },
}
