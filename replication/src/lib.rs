//! Partitions as replicas: the log, the high watermark and the waiters of acks=all.
//!
//! On a single node the high watermark follows the *durable* log end: a record becomes
//! visible to consumers (and acknowledged to acks=all producers) only once it is fsync'd, so
//! nobody ever reads data that a crash could take back. Later issues add leadership, ISR and
//! replica fetchers here; the broker reaches partition data only through this crate so the
//! high-watermark rules cannot be bypassed.

mod flusher;
mod partition;
pub mod producer_state;

pub use flusher::{FlushPolicy, Flusher};
pub use partition::{AppendOutcome, Partition, PartitionOffsets, TopicPartition};

/// Failures a caller of this crate can act on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The storage layer refused or failed.
    #[error(transparent)]
    Storage(#[from] logbook_storage::Error),
    /// The partition was deleted or the broker is shutting down while the caller waited.
    #[error("partition {0} is closed")]
    Closed(TopicPartition),
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
    /// The wait for durability/replication did not finish within the request timeout.
    #[error("timed out waiting for offset {offset} to become durable on {topic_partition}")]
    Timeout {
        /// The partition waited on.
        topic_partition: TopicPartition,
        /// The offset that had to become durable.
        offset: i64,
    },
}
