//! `LeaderEndPoint`: what a follower asks of its leader (Kafka's trait of the same name),
//! in the fetcher's own types so the fetch logic knows nothing of the wire.
//!
//! Error codes in answers are *read* here, never chosen: [`LeaderError`] names the codes
//! the leader sent that the fetcher acts on (Kafka's `AbstractFetcherThread` match), and
//! keeps any other code as it came.

use std::future::Future;

use bytes::Bytes;
use logbook_storage::{LeaderEpoch, Offset};
use uuid::Uuid;

use crate::TopicPartition;

/// One partition of a replica Fetch (Fetch v17's `FetchPartition`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchPartition {
    /// The partition.
    pub topic_partition: TopicPartition,
    /// Its topic's id (Fetch v13+ names topics by id).
    pub topic_id: Uuid,
    /// The follower's log end offset: everything below it is in the follower's log (and
    /// durable there under `FlushPolicy::EveryWrite`).
    pub fetch_offset: Offset,
    /// The leader epoch the follower believes current (fences stale leaders and followers).
    pub current_leader_epoch: LeaderEpoch,
    /// The epoch of the last batch the follower has (KIP-320's diverging-epoch check);
    /// `None` for an empty log.
    pub last_fetched_epoch: Option<LeaderEpoch>,
    /// The follower's log start offset.
    pub log_start_offset: Offset,
    /// Most bytes for this partition.
    pub partition_max_bytes: i32,
}

/// A replica Fetch request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchRequest {
    /// Longest the leader may hold the request for `min_bytes` (`replica.fetch.wait.max.ms`).
    pub max_wait_ms: i32,
    /// Bytes the leader waits for (`replica.fetch.min.bytes`).
    pub min_bytes: i32,
    /// Most bytes in the response (`replica.fetch.response.max.bytes`).
    pub max_bytes: i32,
    /// The partitions, in the order the fetcher wants them served.
    pub partitions: Vec<FetchPartition>,
}

/// An error code from the leader that the fetcher acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaderError {
    /// OFFSET_OUT_OF_RANGE: the fetch offset is outside the leader's log.
    OffsetOutOfRange,
    /// FENCED_LEADER_EPOCH: the follower's current leader epoch is older than the leader's.
    FencedLeaderEpoch,
    /// UNKNOWN_LEADER_EPOCH: the leader has not caught up with that epoch yet.
    UnknownLeaderEpoch,
    /// NOT_LEADER_OR_FOLLOWER.
    NotLeaderOrFollower,
    /// UNKNOWN_TOPIC_OR_PARTITION.
    UnknownTopicOrPartition,
    /// UNKNOWN_TOPIC_ID.
    UnknownTopicId,
    /// Any other code, as received.
    Other(i16),
}

/// A leader epoch and where it ends (OffsetsForLeaderEpoch's `EpochEndOffset`, also a
/// Fetch response's `diverging_epoch`); -1 in either field is undefined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEndOffset {
    /// The largest epoch of the leader not above the one asked for (-1: undefined).
    pub leader_epoch: i32,
    /// Where it ends in the leader's log (-1: undefined).
    pub end_offset: i64,
}

/// One partition of a Fetch response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedPartition {
    /// The partition.
    pub topic_partition: TopicPartition,
    /// The leader's error for it, if any.
    pub error: Option<LeaderError>,
    /// The leader's high watermark.
    pub high_watermark: Offset,
    /// The leader's log start offset.
    pub log_start_offset: Offset,
    /// Set when the follower's log diverged from the leader's at its last fetched epoch:
    /// no records come with it.
    pub diverging_epoch: Option<EpochEndOffset>,
    /// Whole batches from the batch holding the fetch offset, as the leader stores them.
    pub records: Bytes,
}

/// One partition of an OffsetsForLeaderEpoch request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochRequest {
    /// The partition.
    pub topic_partition: TopicPartition,
    /// The epoch the follower believes current.
    pub current_leader_epoch: LeaderEpoch,
    /// The epoch whose end the follower asks for (its latest).
    pub leader_epoch: LeaderEpoch,
}

/// One partition of an OffsetsForLeaderEpoch response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochResult {
    /// The partition.
    pub topic_partition: TopicPartition,
    /// The leader's error for it, if any.
    pub error: Option<LeaderError>,
    /// The answer.
    pub end: EpochEndOffset,
}

/// A request as a whole failed: nothing is known about any partition in it.
#[derive(Debug, thiserror::Error)]
pub enum EndPointError {
    /// The connection failed or closed.
    #[error("connection to the leader failed: {0}")]
    Io(#[from] std::io::Error),
    /// The leader's answer could not be read, or answered something else.
    #[error("unreadable answer from the leader: {0}")]
    Protocol(String),
    /// No answer within the request timeout.
    #[error("the leader did not answer within {0:?}")]
    Timeout(std::time::Duration),
    /// The leader refused the whole request with this code.
    #[error("the leader refused the request: {0:?}")]
    Refused(LeaderError),
}

/// The leader of a set of partitions, as one follower's fetcher sees it. `&mut self`: a
/// fetcher owns its end point and sends one request at a time.
pub trait LeaderEndPoint: Send + 'static {
    /// The leader broker's id (for logs).
    fn broker_id(&self) -> i32;

    /// Sends a replica Fetch; answers per partition.
    fn fetch(
        &mut self,
        request: FetchRequest,
    ) -> impl Future<Output = Result<Vec<FetchedPartition>, EndPointError>> + Send;

    /// Sends OffsetsForLeaderEpoch for `partitions`.
    fn fetch_epoch_end_offsets(
        &mut self,
        partitions: Vec<EpochRequest>,
    ) -> impl Future<Output = Result<Vec<EpochResult>, EndPointError>> + Send;

    /// The leader's log start offset (ListOffsets EARLIEST from a replica).
    fn fetch_earliest_offset(
        &mut self,
        topic_partition: &TopicPartition,
        current_leader_epoch: LeaderEpoch,
    ) -> impl Future<Output = Result<Offset, EndPointError>> + Send;

    /// The leader's log end offset (ListOffsets LATEST from a replica, which Kafka answers
    /// with the log end, not the high watermark).
    fn fetch_latest_offset(
        &mut self,
        topic_partition: &TopicPartition,
        current_leader_epoch: LeaderEpoch,
    ) -> impl Future<Output = Result<Offset, EndPointError>> + Send;
}
