//! How data leaves the front of a log: retention (`retention.ms`, `retention.bytes`) and
//! DeleteRecords, as Kafka's `UnifiedLog.deleteOldSegments` does it.
//!
//! Both work in two steps so no file I/O happens under the partition's lock: under the
//! lock the log raises its log start offset in memory and takes the doomed segments off
//! its list ([`SegmentDeletion`]); off the lock [`SegmentDeletion::run`] checkpoints the
//! new log start durably and only then removes the files. A crash between the two leaves
//! the segments on disk below a log start that recovery reads back from the checkpoint
//! (or from the first segment), and the next retention check removes them.

use std::path::PathBuf;

use super::Log;
use crate::checkpoint::{self, LOG_START_OFFSET_FILE};
use crate::error::Error;
use crate::log_segment::LogSegment;
use crate::offset::Offset;

/// Segments taken off the front of a log, and the log start they leave, to be made
/// durable off the log's lock. Dropping it without [`SegmentDeletion::run`] leaves the
/// files on disk until the next retention check (they are below the log start).
#[must_use = "the log start is not durable and the files stay until `run`"]
pub struct SegmentDeletion {
    dir: PathBuf,
    log_start_offset: i64,
    segments: Vec<LogSegment>,
}

impl SegmentDeletion {
    /// The log start offset after the deletion.
    #[must_use]
    pub fn log_start_offset(&self) -> Offset {
        Offset(self.log_start_offset)
    }

    /// How many segments go.
    #[must_use]
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Checkpoints the new log start (write-temp, fsync, rename, fsync the directory),
    /// then deletes the segments' files. Blocking. The caller serialises runs of one log
    /// (an older run finishing last would checkpoint a lower log start).
    ///
    /// # Errors
    /// I/O errors writing the checkpoint or removing files.
    pub fn run(self) -> Result<(), Error> {
        checkpoint::write(&self.dir, LOG_START_OFFSET_FILE, &[self.log_start_offset])?;
        for segment in self.segments {
            tracing::info!(segment = %segment.log_path().display(), log_start = self.log_start_offset, "deleting segment");
            segment.delete_files()?;
        }
        Ok(())
    }
}

impl Log {
    /// How many segments at the front of the log retention may delete now (Kafka's
    /// `deletableSegments` with, in order, the log-start, size and time predicates).
    ///
    /// A segment is deletable only if everything in it is below the high watermark (its
    /// upper bound, the next segment's base or the log end for the active one, is at or
    /// below `high_watermark`), and the active segment only if it is not empty. So an
    /// idle topic whose newest data expired loses all of it: the caller rolls a new empty
    /// active segment first.
    fn deletable_segment_count(&self, now_ms: i64, high_watermark: i64) -> usize {
        let segments = &self.segments;
        let log_end = self.end();
        let deletable = |i: usize| -> bool {
            let Some(segment) = segments.get(i) else {
                return false;
            };
            let upper_bound = segments.get(i + 1).map_or(log_end, LogSegment::base_offset);
            let last_and_empty = i + 1 == segments.len() && segment.size() == 0;
            upper_bound <= high_watermark && !last_and_empty
        };
        // Segments wholly below the log start (DeleteRecords moved it, or a crash
        // interrupted a deletion).
        let mut count = 0;
        while deletable(count)
            && segments
                .get(count + 1)
                .is_some_and(|next| next.base_offset() <= self.log_start_offset)
        {
            count += 1;
        }
        let retention_bytes = self.config.retention_bytes;
        let size = i64::try_from(self.size_bytes()).unwrap_or(i64::MAX);
        if retention_bytes >= 0 && size >= retention_bytes {
            let already: i64 = segments
                .iter()
                .take(count)
                .map(|s| i64::from(s.size()))
                .sum();
            let mut excess = size - already - retention_bytes;
            while deletable(count) {
                let segment_bytes = segments.get(count).map_or(0, |s| i64::from(s.size()));
                if excess - segment_bytes < 0 {
                    break;
                }
                excess -= segment_bytes;
                count += 1;
            }
        }
        let retention_ms = self.config.retention_ms;
        if retention_ms >= 0 {
            while deletable(count)
                && segments
                    .get(count)
                    .is_some_and(|s| now_ms.saturating_sub(s.largest_timestamp()) > retention_ms)
            {
                count += 1;
            }
        }
        count
    }

    /// Applies `retention.bytes`, `retention.ms` and the log start as of `now_ms`, never
    /// past `high_watermark` (see [`Log::deletable_segment_count`]): takes the deletable
    /// segments off the log, rolling a new active segment first when all of them go, and
    /// raises the log start to the new first segment. `None` when nothing goes. Cheap
    /// apart from a roll; the durable part is [`SegmentDeletion::run`].
    ///
    /// # Errors
    /// [`Error::LogFailed`] for a failed log; a failed roll.
    pub fn take_retention_deletion(
        &mut self,
        now_ms: i64,
        high_watermark: Offset,
    ) -> Result<Option<SegmentDeletion>, Error> {
        let high_watermark = high_watermark.get();
        self.check_not_failed()?;
        self.roll_if_aged(now_ms)?;
        let count = self.deletable_segment_count(now_ms, high_watermark);
        if count == 0 {
            return Ok(None);
        }
        if count == self.segments.len() {
            // A log always has an active segment: start the next one at the log end.
            self.roll()?;
        }
        let first_kept = self
            .segments
            .get(count)
            .map_or(self.log_start_offset, LogSegment::base_offset);
        let new_start = first_kept.max(self.log_start_offset);
        self.detach_oldest(count, new_start).map(Some)
    }

    /// `segment.ms` on time: closes a non-empty active segment whose first append is older
    /// than `segment.ms`, as the next append would. Without it an idle partition keeps its
    /// last segment active forever, and what only closed segments get — compaction, an
    /// exact time index on disk — never reaches its data. (Retention does not need it: it
    /// deletes an expired active segment itself.) The roll's fsyncs are queued as
    /// `RollWork` for the flusher like any roll's.
    fn roll_if_aged(&mut self, now_ms: i64) -> Result<(), Error> {
        let active = self.active();
        let aged = !active.is_empty()
            && u64::try_from(active.age_ms(now_ms)).unwrap_or(0) > self.config.segment_ms;
        if aged {
            self.roll()?;
        }
        Ok(())
    }

    /// Raises the log start to `offset` (DeleteRecords) and takes off the log every
    /// segment wholly below it (whose next segment starts at or below `offset`; never the
    /// active one). `None` when `offset` is at or below the log start already. The caller
    /// keeps `offset` at or below the high watermark.
    ///
    /// # Errors
    /// `OffsetOutOfRange` above the log end; [`Error::LogFailed`] for a failed log.
    pub fn take_log_start_deletion(
        &mut self,
        offset: Offset,
    ) -> Result<Option<SegmentDeletion>, Error> {
        let offset = offset.get();
        self.check_not_failed()?;
        if offset > self.end() || offset < 0 {
            return Err(self.out_of_range(offset));
        }
        if offset <= self.log_start_offset {
            return Ok(None);
        }
        let count = self
            .segments
            .windows(2)
            .take_while(|pair| pair.get(1).is_some_and(|next| next.base_offset() <= offset))
            .count();
        self.detach_oldest(count, offset).map(Some)
    }

    /// Takes the first `count` segments off the list (never the active one), raises the
    /// log start to `new_start` and trims producer state and leader epochs to it.
    fn detach_oldest(&mut self, count: usize, new_start: i64) -> Result<SegmentDeletion, Error> {
        assert!(
            count < self.segments.len(),
            "would delete the active segment ({count} of {})",
            self.segments.len()
        );
        assert!(
            self.log_start_offset <= new_start,
            "log start would move back from {} to {new_start}",
            self.log_start_offset
        );
        let segments: Vec<LogSegment> = self.segments.drain(..count).collect();
        self.log_start_offset = new_start;
        let first_base = self.segments.first().map_or(0, LogSegment::base_offset);
        self.producer_state
            .on_log_start_advanced(self.log_start_offset, first_base)?;
        self.leader_epochs
            .truncate_from_start(self.log_start_offset);
        self.check_invariants();
        Ok(SegmentDeletion {
            dir: self.dir.clone(),
            log_start_offset: new_start,
            segments,
        })
    }

    /// Raises the log start to `offset` and deletes the segments wholly below it, all at
    /// once (the durable checkpoint before any file goes). See
    /// [`Log::take_log_start_deletion`]; for callers that hold the log alone.
    ///
    /// # Errors
    /// As [`Log::take_log_start_deletion`] and [`SegmentDeletion::run`].
    pub fn delete_records_before(&mut self, offset: Offset) -> Result<(), Error> {
        if let Some(deletion) = self.take_log_start_deletion(offset)? {
            deletion.run()?;
        }
        Ok(())
    }

    /// Applies retention as of `now_ms` with everything in the log counted as below the
    /// high watermark, all at once; returns the number of segments removed. See
    /// [`Log::take_retention_deletion`]; for callers that hold the log alone.
    ///
    /// # Errors
    /// As [`Log::take_retention_deletion`] and [`SegmentDeletion::run`].
    pub fn apply_retention(&mut self, now_ms: i64) -> Result<usize, Error> {
        let log_end = self.log_end_offset();
        match self.take_retention_deletion(now_ms, log_end)? {
            Some(deletion) => {
                let count = deletion.segment_count();
                deletion.run()?;
                Ok(count)
            }
            None => Ok(0),
        }
    }
}
