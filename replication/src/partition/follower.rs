//! The follower's side of a `Partition` (Kafka's `Partition.appendRecordsToFollowerOrFutureReplica`,
//! `truncateTo` and the follower half of `UnifiedLog.updateHighWatermark`): what the replica
//! fetcher does to the local replica, through [`FollowerLog`].
//!
//! Every change is refused unless the partition is a follower, checked under the
//! leadership lock (shared) for the whole change: a fetch round still in flight when the
//! partition becomes leader can neither append to nor truncate the leader's log, and its
//! high watermark cannot be set from an old leader's answer.
//!
//! A follower's high watermark is `min(leader's high watermark, own log end)` and may go
//! down (a new leader's may be lower than the old one's, as in Kafka); its durable offset
//! is published apart from it (the fetcher waits on that before the next fetch, plan §0).
//! Truncation clamps the high watermark, the durable offset, the counted offset and the
//! log-end watch to the new log end.
//!
//! Storage calls here do file I/O (writes, truncation, checkpoints): the fetcher is an async
//! task, so they run through [`blocking`].

use std::sync::atomic::Ordering;

use logbook_storage::{AppendInfo, LeaderEpoch, Offset};

use super::leader::Role;
use super::Partition;
use crate::fetcher::FollowerLog;
use crate::flusher::FlushPolicy;
use crate::{Error, TopicPartition};

/// Runs blocking I/O from async code: `block_in_place` on a multi-threaded runtime (the
/// broker's), directly elsewhere (single-threaded test runtimes cannot hand the worker
/// over, and plain threads need not).
pub(crate) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

impl Partition {
    /// Runs `change` on the log if this partition is a follower, holding the leadership
    /// lock shared so no role change interleaves.
    fn as_follower<T>(
        &self,
        change: impl FnOnce(&mut logbook_storage::Log) -> Result<T, logbook_storage::Error>,
    ) -> Result<T, Error> {
        let leadership = self.leadership.read();
        if leadership.role != Role::Follower {
            return Err(Error::NotLeaderOrFollower(self.topic_partition.clone()));
        }
        let mut guard = self.log.lock();
        let state = guard
            .as_mut()
            .ok_or_else(|| Error::Closed(self.topic_partition.clone()))?;
        change(&mut state.log).map_err(|e| {
            if let Some(failure) = state.log.failure() {
                self.go_offline(failure.to_string());
            }
            Error::from(e)
        })
    }

    /// Publishes a new, possibly lower, log end after a truncation and clamps every
    /// offset derived from the log to it.
    fn truncated_to(&self, log_start: Offset, log_end: Offset) {
        self.log_end.send_replace(log_end);
        self.durable.send_if_modified(|d| {
            let lowered = *d > log_end;
            *d = (*d).min(log_end);
            lowered
        });
        self.leader_offset
            .fetch_min(log_end.get(), Ordering::AcqRel);
        self.high_watermark.send_if_modified(|hw| {
            let clamped = (*hw).min(log_end).max(log_start);
            let changed = clamped != *hw;
            *hw = clamped;
            changed
        });
    }

    /// This broker's role for the partition.
    #[must_use]
    pub fn role(&self) -> Role {
        self.leadership.read().role
    }

    /// The durable offset as last published.
    #[must_use]
    pub fn durable_offset(&self) -> Offset {
        *self.durable.borrow()
    }
}

impl FollowerLog for Partition {
    fn topic_partition(&self) -> &TopicPartition {
        &self.topic_partition
    }

    fn log_start_offset(&self) -> Result<Offset, Error> {
        self.with_log(|log| Ok(log.log_start_offset()))
    }

    fn log_end_offset(&self) -> Result<Offset, Error> {
        self.with_log(|log| Ok(log.log_end_offset()))
    }

    fn latest_epoch(&self) -> Result<Option<LeaderEpoch>, Error> {
        self.with_log(|log| Ok(log.leader_epochs().latest_epoch()))
    }

    fn floor_end_offset(&self, epoch: LeaderEpoch) -> Result<Option<(LeaderEpoch, Offset)>, Error> {
        self.with_log(|log| {
            let end = log.log_end_offset().get();
            Ok(log
                .leader_epochs()
                .floor_end_offset(epoch, end)
                .map(|(e, o)| (e, Offset(o))))
        })
    }

    fn high_watermark(&self) -> Offset {
        Partition::high_watermark(self)
    }

    fn truncate_to(&self, offset: Offset) -> Result<(), Error> {
        blocking(|| {
            // No fsync of the old tail may finish after the truncation and mark the
            // rewritten offsets durable.
            let _syncing = self.sync_lock.lock();
            let (start, end) = self.as_follower(|log| {
                log.truncate_to(offset)?;
                Ok((log.log_start_offset(), log.log_end_offset()))
            })?;
            self.truncated_to(start, end);
            Ok(())
        })
    }

    fn truncate_fully_and_start_at(&self, offset: Offset) -> Result<(), Error> {
        blocking(|| {
            let _syncing = self.sync_lock.lock();
            self.as_follower(|log| log.truncate_fully_and_start_at(offset))?;
            self.truncated_to(offset, offset);
            // Everything in the (empty) log is durable and committed: a high watermark
            // below the new log start would be clamped up anyway.
            self.durable.send_replace(offset);
            self.high_watermark.send_replace(offset);
            Ok(())
        })
    }

    fn append_as_follower(&self, records: &[u8]) -> Result<AppendInfo, Error> {
        let (info, roll_work) = blocking(|| {
            self.as_follower(|log| {
                let info = log.append_as_follower(records)?;
                Ok((info, log.has_roll_work()))
            })
        })?;
        self.log_end.send_if_modified(|end| {
            let advanced = info.log_end_offset > *end;
            *end = (*end).max(info.log_end_offset);
            advanced
        });
        match self.flusher.policy() {
            // Group commit: the fetcher waits for the durable offset before its next fetch.
            FlushPolicy::EveryWrite => self.schedule_flush(),
            FlushPolicy::Os => {
                if roll_work {
                    self.schedule_flush();
                }
                self.leader_offset
                    .fetch_max(info.log_end_offset.get(), Ordering::AcqRel);
            }
        }
        Ok(info)
    }

    fn update_from_leader(
        &self,
        leader_high_watermark: Offset,
        leader_log_start_offset: Offset,
    ) -> Result<(), Error> {
        let (start, end) = {
            let leadership = self.leadership.read();
            if leadership.role != Role::Follower {
                return Err(Error::NotLeaderOrFollower(self.topic_partition.clone()));
            }
            let (start, end, high_watermark) = self.with_log(|log| {
                let (start, end) = (log.log_start_offset(), log.log_end_offset());
                let high_watermark = leader_high_watermark.min(end).max(start);
                // Kafka's follower `updateHighWatermark`: transactions whose markers are
                // now committed are forgotten, so a follower's memory stays bounded and its
                // first unstable offset (which bounds its cleaner) moves on.
                log.first_unstable_offset(high_watermark);
                Ok((start, end, high_watermark))
            })?;
            self.high_watermark.send_if_modified(|hw| {
                let changed = *hw != high_watermark;
                *hw = high_watermark;
                changed
            });
            (start, end)
        };
        // DeleteRecords or retention moved the leader's log start: follow it, never past
        // what this replica knows committed (Kafka's `maybeIncrementLogStartOffset` with
        // `LeaderOffsetIncremented`). The segments below go at once, off the log lock.
        let high_watermark = Partition::high_watermark(self);
        let new_start = leader_log_start_offset.min(high_watermark).min(end);
        if new_start <= start {
            return Ok(());
        }
        blocking(|| {
            let _syncing = self.sync_lock.lock();
            let deletion = self.as_follower(|log| log.take_log_start_deletion(new_start))?;
            if let Some(deletion) = deletion {
                deletion.run()?;
            }
            Ok(())
        })
    }

    async fn wait_durable(&self, offset: Offset) -> Result<(), Error> {
        if self.flusher.policy() == FlushPolicy::Os {
            // Nothing waits for fsync under `Os`: the fetcher does not ask.
            return Ok(());
        }
        let mut durable = self.durable.subscribe();
        loop {
            // Closed (deleted, or the broker stopping): it will never become durable.
            self.with_log(|_| Ok(()))?;
            if let Some(reason) = self.offline_reason() {
                return Err(Error::Storage(logbook_storage::Error::LogFailed {
                    dir: std::path::PathBuf::new(),
                    reason,
                }));
            }
            let reached = *durable.borrow_and_update() >= offset;
            // A truncation below `offset` also ends the wait: what is not in the log
            // need not be durable.
            if reached || Partition::log_end_offset(self) < offset {
                return Ok(());
            }
            if durable.changed().await.is_err() {
                return Err(Error::Closed(self.topic_partition.clone()));
            }
        }
    }
}
