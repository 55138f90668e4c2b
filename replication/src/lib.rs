//! Partitions as replicas: the log, the high watermark and the waiters of acks=all.
//!
//! On a single node the high watermark follows the *durable* log end: a record becomes
//! visible to consumers (and acknowledged to acks=all producers) only once it is fsync'd, so
//! nobody ever reads data that a crash could take back. Later issues add leadership, ISR and
//! replica fetchers here; the broker reaches partition data only through this crate so the
//! high-watermark rules cannot be bypassed.

pub mod failpoint;
pub mod fetcher;
mod flusher;
mod log_cleaner;
mod partition;
mod replica_manager;

pub use flusher::{FlushPolicy, Flusher};
pub use log_cleaner::LogCleanerConfig;
pub use logbook_storage::{AbortedTxn, ActiveProducer, AppendOutcome, Offset, TxnResult};
pub use partition::{
    CommittedRead, Partition, PartitionOffsets, TopicPartition, DELETE_TO_HIGH_WATERMARK,
};
pub use replica_manager::ReplicaManager;

/// Failures a caller of this crate can act on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The storage layer refused or failed.
    #[error(transparent)]
    Storage(#[from] logbook_storage::Error),
    /// The partition was deleted or the broker is shutting down while the caller waited.
    #[error("partition {0} is closed")]
    Closed(TopicPartition),
    /// No such topic or partition on this broker.
    #[error("unknown topic or partition {0}")]
    UnknownTopicOrPartition(TopicPartition),
    /// This broker is not the partition's leader.
    #[error("this broker is not the leader of {0}")]
    NotLeaderOrFollower(TopicPartition),
    /// The request carries a leader epoch older than the partition's: the client's
    /// metadata is stale.
    #[error("leader epoch {requested} of {topic_partition} is fenced (current {current})")]
    FencedLeaderEpoch {
        /// The partition.
        topic_partition: TopicPartition,
        /// The epoch in the request.
        requested: i32,
        /// The partition's epoch.
        current: logbook_storage::LeaderEpoch,
    },
    /// The request carries a leader epoch newer than the partition's: this broker has not
    /// caught up with the controller yet.
    #[error("leader epoch {requested} of {topic_partition} is unknown (current {current})")]
    UnknownLeaderEpoch {
        /// The partition.
        topic_partition: TopicPartition,
        /// The epoch in the request.
        requested: i32,
        /// The partition's epoch.
        current: logbook_storage::LeaderEpoch,
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
