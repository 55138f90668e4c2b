//! `FollowerLog`: the local replica as the fetcher uses it. `Partition` implements it
//! once it can be a follower (session 2); tests implement it over a bare `storage::Log`
//! with a controllable fsync.

use std::future::Future;

use logbook_storage::{AppendInfo, LeaderEpoch, Offset};

use crate::{Error, TopicPartition};

/// A partition this broker follows. Implementations lock their log per call, never across
/// an await.
pub trait FollowerLog: Send + Sync + 'static {
    /// The partition.
    fn topic_partition(&self) -> &TopicPartition;

    /// First offset of the local log.
    ///
    /// # Errors
    /// The partition being closed.
    fn log_start_offset(&self) -> Result<Offset, Error>;

    /// The local log end offset.
    ///
    /// # Errors
    /// The partition being closed.
    fn log_end_offset(&self) -> Result<Offset, Error>;

    /// The epoch of the local log's last batch (its leader-epoch cache's latest).
    ///
    /// # Errors
    /// The partition being closed.
    fn latest_epoch(&self) -> Result<Option<LeaderEpoch>, Error>;

    /// `LeaderEpochFileCache::floor_end_offset` of the local log at its log end.
    ///
    /// # Errors
    /// The partition being closed.
    fn floor_end_offset(&self, epoch: LeaderEpoch) -> Result<Option<(LeaderEpoch, Offset)>, Error>;

    /// The local high watermark (the follower's: what it last learned from the leader,
    /// capped at its own log end).
    fn high_watermark(&self) -> Offset;

    /// Removes everything at or above `offset` (`Log::truncate_to`).
    ///
    /// # Errors
    /// Storage errors; the partition being closed.
    fn truncate_to(&self, offset: Offset) -> Result<(), Error>;

    /// Empties the log and restarts it at `offset` (`Log::truncate_fully_and_start_at`).
    ///
    /// # Errors
    /// Storage errors; the partition being closed.
    fn truncate_fully_and_start_at(&self, offset: Offset) -> Result<(), Error>;

    /// Appends fetched batches (`Log::append_as_follower`) and schedules their fsync as a
    /// normal append does.
    ///
    /// # Errors
    /// Storage errors; the partition being closed.
    fn append_as_follower(&self, records: &[u8]) -> Result<AppendInfo, Error>;

    /// Takes the leader's high watermark and log start from a fetch response: the local
    /// high watermark becomes `min(leader_high_watermark, log end)`.
    ///
    /// # Errors
    /// The partition being closed.
    fn update_from_leader(
        &self,
        leader_high_watermark: Offset,
        leader_log_start_offset: Offset,
    ) -> Result<(), Error>;

    /// Resolves once everything below `offset` is fsync'd (or is no longer in the log).
    ///
    /// # Errors
    /// The log failed (a failed fsync): it will never become durable.
    fn wait_durable(&self, offset: Offset) -> impl Future<Output = Result<(), Error>> + Send;
}
