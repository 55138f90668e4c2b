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
pub mod hw_checkpoint;
mod log_cleaner;
mod partition;
pub mod partition_metadata;
mod replica_manager;

pub use flusher::{FlushPolicy, Flusher};
pub use log_cleaner::LogCleanerConfig;
pub use logbook_storage::{
    AbortedTxn, ActiveProducer, AppendOutcome, LeaderEpoch, Offset, TxnResult,
};
pub use partition::{
    AlterPartitionCallback, AlterPartitionCommitted, AlterPartitionError, AlterPartitionRequest,
    AlterPartitionSender, AnyBrokerEligible, CommittedRead, FollowerFetch, FollowerFetchResult,
    IsrEligibility, IsrMember, IsrState, NoController, Partition, PartitionOffsets, PartitionState,
    ReplicaOptions, ReplicaState, Role, TopicPartition, DELETE_TO_HIGH_WATERMARK,
    REPLICA_LAG_TIME_MAX_MS_DEFAULT,
};
pub use replica_manager::{
    AppendRecords, AppendRecordsError, AppendedRecords, FetchIsolation, LogReadResult, OffWorker,
    PartitionChange, PendingAck, ReplicaManager,
};

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
    /// acks=all refused before the append: the committed ISR is smaller than the topic's
    /// `min.insync.replicas`, so nothing was appended.
    #[error("{topic_partition} has {isr} in-sync replicas, fewer than min.insync.replicas {min_insync_replicas}")]
    NotEnoughReplicas {
        /// The partition.
        topic_partition: TopicPartition,
        /// The committed ISR's size.
        isr: usize,
        /// The topic's `min.insync.replicas`.
        min_insync_replicas: usize,
    },
    /// acks=all after the append: the records are committed, but the ISR shrank below
    /// `min.insync.replicas` meanwhile.
    #[error("{topic_partition} has {isr} in-sync replicas after the append, fewer than min.insync.replicas {min_insync_replicas}")]
    NotEnoughReplicasAfterAppend {
        /// The partition.
        topic_partition: TopicPartition,
        /// The maximal ISR's size when the high watermark passed the records.
        isr: usize,
        /// The topic's `min.insync.replicas`.
        min_insync_replicas: usize,
    },
    /// A new leader's high watermark is still below the start of its epoch (KIP-207):
    /// offsets are not known to be final yet.
    #[error("{topic_partition}: high watermark {high_watermark} below the leader epoch start {leader_epoch_start_offset}")]
    OffsetNotAvailable {
        /// The partition.
        topic_partition: TopicPartition,
        /// The high watermark.
        high_watermark: i64,
        /// Where this leader's epoch starts.
        leader_epoch_start_offset: i64,
    },
    /// The partition's directory holds the log of another topic of the same name (its
    /// `partition.metadata` names another topic id), and the broker is still replaying the
    /// metadata log, so which one is current is not known yet: the directory is left alone.
    #[error("{topic_partition}: the directory holds topic id {found}, not {wanted}")]
    InconsistentTopicId {
        /// The partition.
        topic_partition: TopicPartition,
        /// The topic id the directory records.
        found: uuid::Uuid,
        /// The topic id asked for.
        wanted: uuid::Uuid,
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
