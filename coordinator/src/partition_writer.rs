//! What the coordinators need of the broker's logs, as traits (Kafka's `PartitionWriter`
//! in `coordinator-common`, which core implements over `ReplicaManager` as
//! `CoordinatorPartitionWriter`): find a partition of an internal topic this broker hosts,
//! append a batch to it, wait until that append is committed, write a transaction marker,
//! read it back for replay; and create an internal topic if it is missing. The coordinators
//! see replication and storage through these traits only, so they can live above them in
//! their own crate and be tested over any implementation; the broker's is
//! the broker's `coordinator_partition_writer` (over `Topics` and `ReplicaManager`).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;

/// A partition's offsets, read together (`log_start <= high_watermark <= log_end`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogOffsets {
    /// First offset still in the log.
    pub log_start: i64,
    /// One past the last committed offset.
    pub high_watermark: i64,
    /// One past the last offset appended (possibly not yet committed).
    pub log_end: i64,
}

/// Why a write to (or a read of) a coordinator's partition failed, in the classes the
/// coordinators answer differently (Kafka's coordinators map a write timeout to
/// COORDINATOR_NOT_AVAILABLE and a log failure to NOT_COORDINATOR).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// Retriable here: not enough in-sync replicas, or the commit timed out.
    #[error("not available: {0}")]
    Unavailable(String),
    /// This broker cannot write the partition: it no longer leads it, the partition is
    /// closed or unknown, or its log failed.
    #[error("cannot write: {0}")]
    NotLeader(String),
    /// A marker's producer epoch or coordinator epoch is stale: a newer coordinator owns
    /// the transaction.
    #[error("fenced: {0}")]
    Fenced(String),
    /// The log answered a coordinator's own batch as a duplicate of an earlier one: the
    /// log is not what the coordinator believes (its batches never repeat a sequence).
    #[error("duplicate: {0}")]
    Duplicate(String),
    /// The coordinator could not encode its own batch, so nothing was appended (our own
    /// bug: the runtime's write path returns it, never a partition).
    #[error("cannot encode: {0}")]
    Encode(String),
}

/// One partition this broker hosts, as a coordinator uses it.
pub trait CoordinatorPartition: Send + Sync {
    /// `topic-index`, for log lines.
    fn name(&self) -> String;

    /// Whether this broker leads the partition now.
    fn is_leader(&self) -> bool;

    /// The partition's leader epoch here (a transaction coordinator's epoch).
    fn leader_epoch(&self) -> i32;

    /// One past the last committed offset (cheap: no log lock).
    fn high_watermark(&self) -> i64;

    /// Appends `batch` (one or more whole record batches, as the coordinator encoded them)
    /// as the leader, with `acks=all` rules; returns the log end offset after it, the
    /// offset [`CoordinatorPartition::wait_committed`] waits for.
    ///
    /// # Errors
    /// See [`WriteError`].
    fn append(&self, batch: &[u8]) -> Result<i64, WriteError>;

    /// Resolves once every offset below `offset` is committed (durable and replicated to
    /// `min.insync.replicas`), or fails at `timeout`.
    fn wait_committed(
        &self,
        offset: i64,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<(), WriteError>>;

    /// Writes the control batch ending transaction `producer_id`/`producer_epoch` here
    /// (commit or abort), stamped with `coordinator_epoch`; returns the marker's offset.
    ///
    /// # Errors
    /// `Fenced` for a stale producer or coordinator epoch; see [`WriteError`].
    fn write_txn_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        commit: bool,
    ) -> Result<i64, WriteError>;

    /// The partition's offsets.
    ///
    /// # Errors
    /// The partition is closed.
    fn offsets(&self) -> Result<LogOffsets, WriteError>;

    /// Whole batches from `offset` up to the log end (not only the high watermark: a new
    /// leader's log holds what the old leader committed while its high watermark lags),
    /// at most `max_bytes` but always one batch if there is one.
    ///
    /// # Errors
    /// The partition is closed or its log cannot be read.
    fn read(&self, offset: i64, max_bytes: usize) -> Result<Bytes, WriteError>;
}

/// Finds the partitions coordinators write (Kafka's `PartitionWriter`, by partition).
pub trait PartitionWriter: Send + Sync {
    /// Partition `index` of `topic`, if this broker hosts a replica of it.
    fn partition(&self, topic: &str, index: i32) -> Option<Arc<dyn CoordinatorPartition>>;
}

/// An internal topic to create: the coordinator decides its partitions and configs.
#[derive(Clone, Debug)]
pub struct InternalTopic<'a> {
    /// `__consumer_offsets`, `__transaction_state`, ...
    pub name: &'a str,
    /// Its partition count.
    pub partitions: i32,
    /// Its replication factor.
    pub replication_factor: i16,
    /// Topic configs (`cleanup.policy=compact`, ...).
    pub configs: &'a [(&'a str, &'a str)],
}

/// The internal topics' lifecycle, as far as the broker's metadata is concerned.
pub trait InternalTopics: Send + Sync {
    /// The partition count of `topic` if it exists in the cluster.
    fn partition_count(&self, topic: &str) -> Option<i32>;

    /// Creates `topic` (through the controller when there is one) and returns its
    /// partition count once this broker's metadata has it.
    ///
    /// # Errors
    /// The topic could not be created (it may exist already: callers look again).
    fn create(&self, topic: InternalTopic<'_>) -> Result<i32, String>;
}

/// Everything a coordinator needs of its broker: one object, two roles.
pub trait CoordinatorHost: PartitionWriter + InternalTopics {}

impl<T: PartitionWriter + InternalTopics> CoordinatorHost for T {}
