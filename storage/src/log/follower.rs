//! The follower's side of the log (Kafka's `UnifiedLog.appendAsFollower` and
//! `truncateFullyAndStartAt`): a replica copies its leader's batches byte for byte, so
//! offsets, partition leader epochs and producer fields stay exactly what the leader
//! wrote. Only structure and CRC are checked (the leader walked every record when it
//! accepted them); nothing is re-encoded. Producer state, transaction index and leader
//! epochs are derived from the copied batches as recovery derives them, so a follower
//! that becomes leader deduplicates an idempotent producer's retry and serves
//! read_committed consumers exactly as the old leader would have.

use super::{now_ms, AppendInfo, Log, LogSegment};
use crate::checkpoint::{self, LOG_START_OFFSET_FILE};
use crate::error::Error;
use crate::leader_epoch_cache::LeaderEpoch;
use crate::log_segment::SEGMENT_BYTES_MAX;
use crate::offset::Offset;
use crate::record_batch::{compute_crc, RecordBatchHeader, BATCH_LENGTH_MIN, LOG_OVERHEAD_BYTES};

/// Checks that `batches` is whole v2 batches with matching CRCs and sane offset deltas,
/// and returns each batch's position and header. Unlike the produce door's
/// `validate_batches`, a batch may hold fewer records than offsets (log compaction on the
/// leader removes records but keeps the span) or none at all (an emptied batch kept for
/// its producer state).
fn parse_replicated(batches: &[u8]) -> Result<Vec<(usize, RecordBatchHeader)>, Error> {
    let corrupt = |position: usize, reason: String| Error::CorruptBatch {
        position: position as u64,
        reason,
    };
    let mut headers = Vec::new();
    let mut position = 0usize;
    while position < batches.len() {
        let rest = batches.get(position..).unwrap_or_default();
        let header =
            RecordBatchHeader::parse(rest).map_err(|e| corrupt(position, e.to_string()))?;
        if header.batch_length < BATCH_LENGTH_MIN
            || header.batch_length as usize > rest.len() - LOG_OVERHEAD_BYTES
        {
            return Err(corrupt(
                position,
                format!("invalid batch length {}", header.batch_length),
            ));
        }
        let batch = rest.get(..header.total_bytes()).unwrap_or_default();
        let computed = compute_crc(batch);
        if computed != header.crc {
            return Err(corrupt(
                position,
                format!(
                    "crc mismatch: stored {:#010x}, computed {computed:#010x}",
                    header.crc
                ),
            ));
        }
        if header.last_offset_delta < 0 || header.records_count < 0 {
            return Err(corrupt(
                position,
                format!(
                    "last offset delta {} with {} records",
                    header.last_offset_delta, header.records_count
                ),
            ));
        }
        if header.compression_codec() > 4 {
            return Err(corrupt(
                position,
                format!("unknown compression codec {}", header.compression_codec()),
            ));
        }
        position += header.total_bytes();
        headers.push((position - header.total_bytes(), header));
    }
    if headers.is_empty() {
        return Err(corrupt(0, "no batch to append".to_string()));
    }
    Ok(headers)
}

/// Checks that replicated batches continue this log (Kafka's `appendAsFollower` refusing
/// an `UnexpectedAppendOffsetException`): each starts at the offset after the one before,
/// the first at `first_offset`, and partition leader epochs never go back below the
/// latest epoch the log knows. Returns the offset after the last batch.
fn check_follows_on(
    headers: &[(usize, RecordBatchHeader)],
    first_offset: i64,
    latest_epoch: i32,
) -> Result<i64, Error> {
    let mut next = first_offset;
    let mut epoch = latest_epoch;
    for (position, header) in headers {
        if header.base_offset != next {
            return Err(Error::UnexpectedAppendOffset {
                expected: next,
                got: header.base_offset,
            });
        }
        if header.partition_leader_epoch >= 0 && header.partition_leader_epoch < epoch {
            return Err(Error::CorruptBatch {
                position: *position as u64,
                reason: format!(
                    "partition leader epoch {} after epoch {epoch}",
                    header.partition_leader_epoch
                ),
            });
        }
        epoch = epoch.max(header.partition_leader_epoch);
        next = header.last_offset() + 1;
    }
    Ok(next)
}

impl Log {
    /// Appends batches fetched from the leader, keeping their offsets and partition leader
    /// epochs, with the wall clock as the segment-age clock. See
    /// [`Log::append_as_follower_at`].
    ///
    /// # Errors
    /// As [`Log::append_as_follower_at`].
    pub fn append_as_follower(&mut self, batches: &[u8]) -> Result<AppendInfo, Error> {
        self.append_as_follower_at(batches, now_ms())
    }

    /// Appends batches fetched from the leader (Kafka's `appendAsFollower`), taking
    /// `now_ms` as the wall-clock time for `segment.ms` rolls.
    ///
    /// The first batch must start at the log end and each next one where the previous
    /// ended (else [`Error::UnexpectedAppendOffset`], nothing written); partition leader
    /// epochs may not go down. Checked per batch: length, magic, CRC-32C, offset delta,
    /// codec. Producer state is updated without sequence checks (origin replication: the
    /// leader already checked them), but kept, so that this replica deduplicates a retry
    /// once it leads; an ABORT marker adds its transaction index entry; each batch's
    /// epoch enters the leader-epoch cache. Page cache only, like [`Log::append_at`]: the
    /// caller schedules the fsync.
    ///
    /// # Errors
    /// `CorruptBatch` for a malformed batch or an epoch going backwards;
    /// `UnexpectedAppendOffset`; `AppendTooLarge`; `LogFailed`; `Io` from the write.
    pub fn append_as_follower_at(
        &mut self,
        batches: &[u8],
        now_ms: i64,
    ) -> Result<AppendInfo, Error> {
        self.check_not_failed()?;
        let headers = parse_replicated(batches)?;
        let first_offset = self.end();
        let latest_epoch = self.leader_epochs.latest_epoch().map_or(-1, |e| e.0);
        let next = check_follows_on(&headers, first_offset, latest_epoch)?;
        let offsets = next - first_offset;
        if batches.len() as u64 > SEGMENT_BYTES_MAX || offsets > i64::from(u32::MAX) {
            return Err(Error::AppendTooLarge {
                bytes: batches.len(),
            });
        }
        let incoming_max_timestamp =
            self.roll_for_append(&headers, batches.len() as u64, offsets, now_ms)?;
        let interval = self.config.index_interval_bytes;
        let preallocate_max = self.config.preallocate_bytes_max;
        let active = self.active_mut();
        active.preallocate(batches.len(), preallocate_max);
        // The write patches base offset, length and epoch from the headers, which hold
        // the values already in the bytes: what lands on disk is the leader's batch.
        if let Err(e) = active.append(batches, &headers, interval, now_ms) {
            return Err(self.write_failed(e));
        }
        for (position, header) in &headers {
            if header.is_control() && header.producer_id >= 0 {
                self.append_marker_state(batches, *position, header)?;
            } else {
                self.producer_state.update(header);
            }
            self.leader_epochs.assign(
                LeaderEpoch(header.partition_leader_epoch),
                header.base_offset,
            );
        }
        assert!(self.end() == next, "log end {} != {next}", self.end());
        Ok(AppendInfo {
            first_offset: Offset(first_offset),
            last_offset: Offset(next - 1),
            max_timestamp: incoming_max_timestamp,
            log_end_offset: Offset(next),
        })
    }

    /// Records that `epoch` starts at the log end (Kafka's `becomeLeader` assigning the
    /// new epoch's start offset), so a follower that fetched further in an older epoch
    /// learns where that epoch ended here before this leader appends anything. Older or
    /// equal epochs change nothing.
    pub fn assign_epoch_start(&mut self, epoch: LeaderEpoch) {
        let end = self.end();
        self.leader_epochs.assign(epoch, end);
    }

    /// Empties the log and restarts it at `offset` (Kafka's `truncateFullyAndStartAt`):
    /// for a follower whose whole log lies below the leader's log start, or that must
    /// start over at the leader's offset. Producer state, epochs and transaction indexes
    /// are dropped with the data; the new log start is checkpointed durably.
    ///
    /// # Errors
    /// `LogFailed`; `Io` from deleting or creating files.
    pub fn truncate_fully_and_start_at(&mut self, offset: Offset) -> Result<(), Error> {
        let offset = offset.get();
        self.check_not_failed()?;
        assert!(offset >= 0, "restart offset {offset} < 0");
        for segment in std::mem::take(&mut self.segments) {
            segment.delete_files()?;
        }
        self.segments.push(LogSegment::create(&self.dir, offset)?);
        checkpoint::sync_dir(&self.dir)?;
        self.log_start_offset = offset;
        checkpoint::write(&self.dir, LOG_START_OFFSET_FILE, &[offset])?;
        self.recovery_point = offset;
        if self.checkpointed_recovery_point != offset {
            self.write_recovery_point()?;
        }
        self.roll_work.snapshots.clear();
        self.producer_state.clear()?;
        self.leader_epochs.clear();
        tracing::info!(dir = %self.dir.display(), offset, "truncated log fully and restarted it");
        self.check_invariants();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
