//! `LogLoader` (Kafka's `LogLoader`): what [`Log::open`] does before a log serves, in
//! phases, each a function below, run in this order:
//!
//! 1. [`scan_dir`]: finish an interrupted compaction swap, drop temporary files and
//!    indexes without a segment, list the segments' base offsets;
//! 2. [`Checkpoints::read`]: the clean-shutdown marker (removed durably at once, so a
//!    later crash recovers), the log start and the recovery point;
//! 3. [`Log::open_segments`]: open every segment, each knowing where the next begins;
//! 4. [`Log::clean_shutdown_start`]: trust the clean-shutdown marker only if the active
//!    segment agrees with it;
//! 5. [`Log::recover_segments`]: validate (CRC and all) every segment from the recovery
//!    point on, and any earlier one whose indexes are damaged; cut at the first invalid
//!    batch and delete the segments after it;
//! 6. [`Log::settle_log_start`]: the log start from the marker or checkpoint, never past
//!    the recovered end; fsync what recovery kept; write the checkpoints;
//! 7. [`Log::load_producer_state`] and [`Log::fill_first_epoch`]: producer state and leader
//!    epochs from the newest snapshot and the batch headers after it.
//!
//! Every phase returns the first I/O error; nothing here is retried or skipped.

use std::fs;
use std::ops::ControlFlow;
use std::path::Path;

use super::{apply_marker, cleaning, Log, LogConfig, RollWork};
use crate::checkpoint::{
    self, CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE, TMP_SUFFIX,
};
use crate::end_transaction_marker::{parse_marker, EndTransactionMarker};
use crate::error::Error;
use crate::leader_epoch_cache::{LeaderEpoch, LeaderEpochFileCache};
use crate::log_segment::LogSegment;
use crate::producer_state::ProducerStateManager;
use crate::record_batch::RecordBatchHeader;

/// The checkpoint files [`Log::open`] starts from.
struct Checkpoints {
    /// The clean-shutdown marker's `[log start, log end, snapshot offset or -1]`.
    clean: Option<Vec<i64>>,
    /// The checkpointed log start offset.
    log_start: Option<i64>,
    /// The checkpointed recovery point.
    recovery_point: Option<i64>,
}

impl Checkpoints {
    /// Reads the checkpoints and removes the clean-shutdown marker (durably), so that a
    /// crash of the log opened now recovers.
    fn read(dir: &Path) -> Result<Checkpoints, Error> {
        let clean = checkpoint::read(dir, CLEAN_SHUTDOWN_FILE, 3)?;
        checkpoint::remove(dir, CLEAN_SHUTDOWN_FILE)?;
        let log_start =
            checkpoint::read(dir, LOG_START_OFFSET_FILE, 1)?.and_then(|v| v.first().copied());
        let recovery_point =
            checkpoint::read(dir, RECOVERY_POINT_FILE, 1)?.and_then(|v| v.first().copied());
        Ok(Checkpoints {
            clean,
            log_start,
            recovery_point,
        })
    }

    /// The marker's third value is the offset of the producer snapshot the close wrote,
    /// -1 when it wrote none (markers of older versions hold the log end there, which
    /// only costs a scan when that snapshot is missing).
    fn clean_without_snapshot(&self) -> bool {
        matches!(self.clean.as_deref(), Some(&[_, _, -1]))
    }
}

/// Removes temporary files and indexes whose segment is gone; returns the segments' base
/// offsets, ascending.
fn scan_dir(dir: &Path) -> Result<Vec<i64>, Error> {
    let mut bases = Vec::new();
    let mut index_files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(TMP_SUFFIX) {
            fs::remove_file(entry.path())?;
        } else if let Some(base) = parse_segment_name(&name, "log") {
            bases.push(base);
        } else if let Some(base) = parse_segment_name(&name, "index")
            .or_else(|| parse_segment_name(&name, "timeindex"))
            .or_else(|| parse_segment_name(&name, "txnindex"))
        {
            index_files.push((base, entry.path()));
        }
    }
    bases.sort_unstable();
    for (base, path) in index_files {
        if bases.binary_search(&base).is_err() {
            tracing::info!(path = %path.display(), "removing index without a segment");
            fs::remove_file(path)?;
        }
    }
    Ok(bases)
}

/// Parses `<20 digits>.<ext>` into the base offset.
fn parse_segment_name(name: &str, extension: &str) -> Option<i64> {
    let stem = name.strip_suffix(extension)?.strip_suffix('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// Calls `f` with the header of every batch whose last offset is `>= from`, in offset
/// order, across `segments`, and with the marker of each transaction marker (read from
/// the log: a control batch is a few dozen bytes). Reads headers only otherwise.
fn for_each_header_from(
    segments: &[LogSegment],
    from: i64,
    mut f: impl FnMut(&RecordBatchHeader, Option<EndTransactionMarker>),
) -> Result<(), Error> {
    let first = segments
        .partition_point(|s| s.base_offset() <= from)
        .saturating_sub(1);
    for segment in segments.get(first..).unwrap_or_default() {
        let mut failed = None;
        segment.scan_headers(0, |position, header| {
            if header.last_offset() < from {
                return ControlFlow::Continue(());
            }
            let marker = if header.is_control() && header.producer_id >= 0 {
                match read_marker(segment, position, header) {
                    Ok(marker) => marker,
                    Err(e) => {
                        failed = Some(e);
                        return ControlFlow::Break(());
                    }
                }
            } else {
                None
            };
            f(header, marker);
            ControlFlow::Continue(())
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
    }
    Ok(())
}

/// The marker of the control batch at `position` of `segment` (`None`: an emptied or
/// non-marker control batch).
fn read_marker(
    segment: &LogSegment,
    position: u32,
    header: &RecordBatchHeader,
) -> Result<Option<EndTransactionMarker>, Error> {
    let mut bytes = Vec::with_capacity(header.total_bytes());
    segment.read_into(&mut bytes, position, header.total_bytes())?;
    parse_marker(header, &bytes).map_err(|reason| Error::CorruptBatch {
        position: u64::from(position),
        reason: format!("{}: {reason}", segment.log_path().display()),
    })
}

impl Log {
    /// Opens (creating if missing) the log in `dir`: the phases of the module docs.
    ///
    /// If the clean-shutdown checkpoint written by [`Log::close`] is present and
    /// consistent (the active segment's tail walk ends at its file size at the recorded
    /// log end, indexes sane), it is trusted: no CRC scan. The marker is removed
    /// (durably) before returning, so a later crash triggers recovery.
    ///
    /// Otherwise recovery runs from the segment holding the checkpointed recovery point
    /// (the first segment if none): every batch is validated (length, magic, offsets,
    /// CRC-32C); the first invalid or torn batch and everything after it is truncated and
    /// later segments are deleted; the scanned segments' indexes are rebuilt and the
    /// recovered data is fsync'd. Earlier segments with missing or damaged indexes are
    /// rebuilt the same way. One `tracing` line per truncation or rebuild.
    pub fn open(dir: &Path, config: LogConfig) -> Result<Log, Error> {
        fs::create_dir_all(dir)?;
        cleaning::complete_interrupted_swaps(dir)?;
        // Segments below it may have offset gaps (records compaction removed).
        let cleaned_to = crate::cleaner::read_checkpoint(dir)?.unwrap_or(i64::MIN);
        let bases = scan_dir(dir)?;
        let checkpoints = Checkpoints::read(dir)?;
        let mut log = Log {
            dir: dir.to_path_buf(),
            config,
            segments: Vec::new(),
            log_start_offset: 0,
            recovery_point: 0,
            checkpointed_recovery_point: checkpoints.recovery_point.unwrap_or(-1),
            producer_state: ProducerStateManager::new(dir)?,
            leader_epochs: LeaderEpochFileCache::load(dir)?,
            roll_work: RollWork::default(),
            failed: None,
        };
        log.clamp_config();
        if bases.is_empty() {
            log.start_empty(checkpoints.log_start.unwrap_or(0).max(0))?;
            return Ok(log);
        }
        let files_ok = log.open_segments(&bases)?;
        let clean_start = log.clean_shutdown_start(&checkpoints, &files_ok);
        let recover_from = if clean_start.is_some() {
            log.segments.len()
        } else {
            let rp = checkpoints.recovery_point.unwrap_or(i64::MIN);
            log.segments
                .partition_point(|s| s.base_offset() <= rp)
                .saturating_sub(1)
        };
        let recovered_any = log.recover_segments(recover_from, &files_ok, cleaned_to)?;
        let start = clean_start
            .or(checkpoints.log_start)
            .unwrap_or_else(|| log.segments.first().map_or(0, LogSegment::base_offset));
        log.settle_log_start(start, checkpoints.log_start, recovered_any)?;
        log.leader_epochs.truncate_from_end(log.end());
        log.leader_epochs.truncate_from_start(log.log_start_offset);
        log.load_producer_state(clean_start.is_some() && checkpoints.clean_without_snapshot())?;
        log.fill_first_epoch()?;
        log.check_invariants();
        tracing::debug!(dir = %dir.display(), log_start = log.log_start_offset, log_end = log.end(), clean = clean_start.is_some(), "opened log");
        Ok(log)
    }

    /// A directory without segments: one empty segment at `base` (the checkpointed log
    /// start, so DeleteRecords survives an emptied log).
    fn start_empty(&mut self, base: i64) -> Result<(), Error> {
        self.segments.push(LogSegment::create(&self.dir, base)?);
        checkpoint::sync_dir(&self.dir)?;
        self.log_start_offset = base;
        self.recovery_point = base;
        // No recovery-point file is written for an empty log: without one, recovery
        // scans from the first segment, which is exactly right for a log this new.
        // Snapshots and epochs describe data that is gone.
        self.producer_state.clear()?;
        self.leader_epochs.clear();
        self.check_invariants();
        Ok(())
    }

    /// Opens the segments of `bases` (ascending), each told where the next begins; returns
    /// for each whether its index files were present and whole.
    fn open_segments(&mut self, bases: &[i64]) -> Result<Vec<bool>, Error> {
        let mut files_ok = Vec::with_capacity(bases.len());
        for &base in bases {
            let (segment, ok) = LogSegment::open(&self.dir, base)?;
            self.segments.push(segment);
            files_ok.push(ok);
        }
        let last = self.segments.len() - 1;
        for i in 0..last {
            let next = self.segments.get(i + 1).map_or(0, LogSegment::base_offset);
            if let Some(segment) = self.segments.get_mut(i) {
                segment.set_next_offset(next);
            }
        }
        Ok(files_ok)
    }

    /// The log start the clean-shutdown marker records, if there is a marker and the
    /// active segment agrees with it (indexes whole and sane, the tail walk ending at the
    /// recorded log end); `None` means recover.
    fn clean_shutdown_start(
        &mut self,
        checkpoints: &Checkpoints,
        files_ok: &[bool],
    ) -> Option<i64> {
        let &[start, end, _] = checkpoints.clean.as_deref()? else {
            return None;
        };
        let interval = self.config.index_interval_bytes;
        let ok_files = files_ok.last().copied().unwrap_or(false);
        let dir = self.dir.clone();
        let active = self.segments.last_mut().expect("segments is non-empty");
        let verdict = if !ok_files {
            Err("index files missing or torn".to_string())
        } else {
            active
                .sanity_check(None)
                .and_then(|()| active.scan_tail(interval))
        };
        match verdict {
            Ok(()) if active.next_offset() == end && start <= end => Some(start),
            Ok(()) => {
                tracing::warn!(dir = %dir.display(), checkpoint_end = end, found_end = active.next_offset(), "clean-shutdown checkpoint disagrees with the log; recovering");
                None
            }
            Err(reason) => {
                tracing::warn!(dir = %dir.display(), %reason, "clean-shutdown checkpoint not usable; recovering");
                None
            }
        }
    }

    /// Recovers every segment from index `recover_from` on, and any earlier one whose
    /// indexes are damaged (`files_ok` false or a failed sanity check): its batches are
    /// validated and its indexes rebuilt; at the first invalid batch (or a segment that
    /// ends short of the next one's base) the rest of the segment is cut and the later
    /// segments are deleted. Segments below `cleaned_to` may have offset gaps. Returns
    /// whether any segment was recovered.
    fn recover_segments(
        &mut self,
        recover_from: usize,
        files_ok: &[bool],
        cleaned_to: i64,
    ) -> Result<bool, Error> {
        let interval = self.config.index_interval_bytes;
        let mut i = 0;
        let mut recovered_any = false;
        while i < self.segments.len() {
            let is_last = i + 1 == self.segments.len();
            let segment = self.segments.get_mut(i).expect("i < len");
            let next_base = if is_last {
                None
            } else {
                Some(segment.next_offset())
            };
            let damage = if !files_ok.get(i).copied().unwrap_or(false) {
                Some("index files missing or torn".to_string())
            } else {
                segment.sanity_check(next_base).err()
            };
            if i >= recover_from || damage.is_some() {
                recovered_any = true;
                if let Some(reason) = &damage {
                    tracing::warn!(segment = %segment.log_path().display(), %reason, "rebuilding indexes");
                }
                let gaps = segment.base_offset() < cleaned_to;
                let cut = segment.recover_with_gaps(interval, true, gaps)?;
                let short = next_base.is_some_and(|n| {
                    segment.next_offset() > n || (!gaps && segment.next_offset() != n)
                });
                if let (Some(n), None, false) = (next_base, &cut, short) {
                    segment.set_next_offset(n);
                }
                tracing::info!(segment = %segment.log_path().display(), next_offset = segment.next_offset(), "recovered segment: batches validated, indexes rebuilt");
                if let Some((position, reason)) = &cut {
                    tracing::warn!(segment = %segment.log_path().display(), position, %reason, "truncated invalid tail of segment");
                }
                if cut.is_some() || short {
                    let removed = self.segments.split_off(i + 1);
                    for later in removed {
                        tracing::warn!(segment = %later.log_path().display(), "deleting segment after truncated data");
                        later.delete_files()?;
                    }
                }
            }
            i += 1;
        }
        Ok(recovered_any)
    }

    /// Sets the log start to `start` (never below the first segment; a log whose recovered
    /// end is below it starts empty there), fsyncs what recovery kept when it recovered
    /// anything (a process crash may have left it in the page cache only), and writes the
    /// log start (if `checkpointed` differs) and recovery point checkpoints. The inactive
    /// segments' indexes leave memory.
    fn settle_log_start(
        &mut self,
        start: i64,
        checkpointed: Option<i64>,
        recovered_any: bool,
    ) -> Result<(), Error> {
        let first_base = self.segments.first().map_or(0, LogSegment::base_offset);
        let start = start.max(first_base);
        let log_end = self.end();
        if start > log_end {
            tracing::warn!(dir = %self.dir.display(), log_start = start, log_end, "log end below log start after recovery; starting empty at log start");
            for segment in std::mem::take(&mut self.segments) {
                segment.delete_files()?;
            }
            self.segments.push(LogSegment::create(&self.dir, start)?);
            checkpoint::sync_dir(&self.dir)?;
        }
        self.log_start_offset = start;
        if recovered_any {
            // What survived a process crash may still be only in the page cache.
            let mut files = Vec::new();
            for segment in &self.segments {
                segment.sync_files(&mut files);
                segment.sync_indexes()?;
            }
            for file in files {
                file.sync_data()?;
            }
        }
        self.recovery_point = self.end();
        if checkpointed != Some(start) {
            checkpoint::write(&self.dir, LOG_START_OFFSET_FILE, &[start])?;
        }
        self.write_recovery_point()?;
        if let Some((_, inactive)) = self.segments.split_last_mut() {
            for segment in inactive {
                segment.evict_indexes()?;
            }
        }
        Ok(())
    }

    /// Rebuilds producer state: the newest snapshot at or below the log end, then the
    /// batch headers after it (all of the log when there is no snapshot). After a clean
    /// shutdown that wrote no snapshot (`clean_without_snapshot`) there was no producer
    /// state to keep (a clean close writes one whenever there is), so nothing is scanned;
    /// a close that wrote one whose file is gone now scans the whole log.
    pub(super) fn load_producer_state(
        &mut self,
        clean_without_snapshot: bool,
    ) -> Result<(), Error> {
        let clean = clean_without_snapshot;
        let log_end = self.end();
        let from = match self.producer_state.load(log_end)? {
            Some(offset) => offset,
            None if clean => return Ok(()),
            None => self.log_start_offset,
        };
        let from = from.max(self.log_start_offset);
        // The replay below writes the aborted transactions at or above `from` again.
        for segment in &mut self.segments {
            segment.txn_index_mut().truncate_from(from)?;
        }
        if from >= log_end {
            self.sync_txn_indexes()?;
            return Ok(());
        }
        let started = std::time::Instant::now();
        let mut batches = 0_u64;
        let mut aborted = Vec::new();
        let state = &mut self.producer_state;
        let epochs = &mut self.leader_epochs;
        for_each_header_from(&self.segments, from, |header, marker| {
            if let Some(marker) = marker {
                aborted.extend(apply_marker(state, header, marker));
            } else if header.producer_id >= 0 {
                state.update(header);
            }
            epochs.assign(
                LeaderEpoch(header.partition_leader_epoch),
                header.base_offset,
            );
            batches += 1;
        })?;
        // Everything recovered is durable: completed transactions are stable.
        self.producer_state.on_high_watermark(log_end);
        for txn in aborted {
            let i = self.segment_index_for(txn.last_offset);
            if let Some(segment) = self.segments.get_mut(i) {
                segment.txn_index_mut().append(txn)?;
            }
        }
        self.sync_txn_indexes()?;
        tracing::info!(dir = %self.dir.display(), from, log_end, batches, producers = self.producer_state.producer_count(), elapsed_ms = started.elapsed().as_millis(), "rebuilt producer state from the log");
        Ok(())
    }

    /// A non-empty log with no epoch known (its checkpoint was lost, or was never
    /// written by an older version) learns the epoch of its first batch, so the cache
    /// always covers the log from its start.
    fn fill_first_epoch(&mut self) -> Result<(), Error> {
        if self.leader_epochs.latest_epoch().is_some() || self.log_start_offset == self.end() {
            return Ok(());
        }
        if let Some((_, _, header)) = self.locate(self.log_start_offset)? {
            self.leader_epochs.assign(
                LeaderEpoch(header.partition_leader_epoch),
                self.log_start_offset,
            );
        }
        Ok(())
    }
}
