//! The `Log`'s side of log compaction (see `crate::cleaner`): choosing what a pass may
//! clean (Kafka's `LogCleanerManager.cleanableOffsets`), swapping a cleaned segment in
//! (Kafka's `replaceSegments`) and, at open, finishing or discarding a swap a crash
//! interrupted. Kept apart from `log.rs` so retention and compaction change separately.

use std::fs;
use std::io;
use std::path::Path;

use super::Log;
use crate::checkpoint;
use crate::cleaner::{
    CleanedSegment, CleaningJob, CLEANED_SUFFIX, SWAP_END_EXTENSION, SWAP_SUFFIX,
};
use crate::error::Error;
use crate::log_segment::{file_name, LogSegment};
use crate::offset::Offset;
use crate::transaction_index;

/// Kafka's topic configs for compaction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CompactionConfig {
    /// `cleanup.policy` includes `compact`.
    pub compact: bool,
    /// `delete.retention.ms`: how long a tombstone stays readable after its segment's
    /// newest timestamp. Default 1 day.
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: a record stays uncompacted at least this long.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty segment this old is cleaned whatever the ratio.
    pub max_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio`: dirty bytes / cleanable bytes needed for a pass.
    pub min_cleanable_dirty_ratio: f64,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        Self {
            compact: false,
            delete_retention_ms: 86_400_000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
        }
    }
}

/// Name of the marker `<base>.swapend`: the end offset of the segments a `.swap` replaces.
fn swap_end_name(base_offset: i64) -> String {
    file_name(base_offset, SWAP_END_EXTENSION)
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Parses `<20 digits>.<rest>` into the base offset when the name ends with `suffix`.
fn base_of(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?;
    let digits = stem.get(..20)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Writes the aborted transactions of the segments at `bases` as the transaction index
/// of the segment at `target` (durably). Only for a swap begun by a version whose cleaner
/// kept transactional batches whole and wrote no `.txnindex.swap`: every old entry stays.
/// Idempotent: a crash and a second run give the same file.
fn merge_txn_indexes(dir: &Path, bases: &[i64], target: i64) -> io::Result<()> {
    let mut merged = Vec::new();
    for &base in bases {
        merged.extend(transaction_index::read_entries(dir, base)?);
    }
    if merged.is_empty() {
        return Ok(());
    }
    merged.sort_unstable_by_key(|e| e.last_offset);
    merged.dedup_by_key(|e| e.last_offset);
    transaction_index::write_entries(&dir.join(file_name(target, "txnindex")), &merged)
}

/// Puts the cleaned segment's `<base>.txnindex.swap` in place as `<base>.txnindex`; an
/// empty one (the pass kept none of the replaced segments' entries) is removed instead,
/// as a segment's `.txnindex` exists only with an entry.
fn install_txn_index(dir: &Path, base: i64) -> io::Result<()> {
    let swap = CleanedSegment::txn_index_path(dir, base, SWAP_SUFFIX);
    match fs::metadata(&swap) {
        Ok(m) if m.len() == 0 => fs::remove_file(&swap),
        Ok(_) => fs::rename(&swap, CleanedSegment::txn_index_path(dir, base, "")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Renames `from` to `to`; a missing `from` (a cleaned segment without a `.txnindex`)
/// is no error.
fn rename_if_exists(from: &Path, to: &Path) -> io::Result<()> {
    match fs::rename(from, to) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// At open, before segments are listed: deletes `.cleaned` files (a pass that did not
/// reach its commit point) and completes every `.swap` (a pass past it): the segments in
/// the range its `.swapend` marker names are deleted (their `.txnindex` files too: the
/// cleaned segment's own, `.txnindex.swap`, holds the entries it keeps) and the `.swap`
/// files take the final names. A `.swap` without a marker cannot happen (the marker is
/// durable first); it is deleted, keeping the old segments. A `.txnindex.swap` without
/// its `.log.swap` is from before the commit point and is deleted.
pub(super) fn complete_interrupted_swaps(dir: &Path) -> io::Result<()> {
    let mut swaps = Vec::new();
    let mut txn_index_swaps = Vec::new();
    let mut markers = Vec::new();
    let mut segment_bases = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(CLEANED_SUFFIX) {
            tracing::info!(path = %entry.path().display(), "deleting an unfinished cleaned segment");
            fs::remove_file(entry.path())?;
        } else if let Some(base) = base_of(&name, &format!(".log{SWAP_SUFFIX}")) {
            swaps.push(base);
        } else if let Some(base) = base_of(&name, &format!(".txnindex{SWAP_SUFFIX}")) {
            txn_index_swaps.push(base);
        } else if let Some(base) = base_of(&name, &format!(".{SWAP_END_EXTENSION}")) {
            markers.push(base);
        } else if let Some(base) = base_of(&name, ".log") {
            segment_bases.push(base);
        }
    }
    for base in txn_index_swaps {
        if !swaps.contains(&base) {
            remove_if_exists(&CleanedSegment::txn_index_path(dir, base, SWAP_SUFFIX))?;
        }
    }
    let changed = !swaps.is_empty() || !markers.is_empty();
    for base in swaps {
        complete_swap(dir, base, &segment_bases)?;
    }
    if changed {
        checkpoint::sync_dir(dir)?;
        for base in markers {
            remove_if_exists(&dir.join(swap_end_name(base)))?;
        }
        checkpoint::sync_dir(dir)?;
    }
    Ok(())
}

/// Completes one `.swap` found at open (the second half of Kafka's `replaceSegments`,
/// as its `completeSwapOperations` does): the old segments in the range its `.swapend`
/// marker names are deleted, the `.txnindex` it keeps installed, and the `.swap` files
/// renamed to the final names. Without a marker, the `.swap` is discarded instead.
fn complete_swap(dir: &Path, base: i64, segment_bases: &[i64]) -> io::Result<()> {
    let end = checkpoint::read(dir, &swap_end_name(base), 1)?.and_then(|v| v.first().copied());
    let Some(end) = end else {
        tracing::warn!(dir = %dir.display(), base, "swap segment without its end marker; discarding it");
        for path in CleanedSegment::paths(dir, base, SWAP_SUFFIX) {
            remove_if_exists(&path)?;
        }
        remove_if_exists(&CleanedSegment::txn_index_path(dir, base, SWAP_SUFFIX))?;
        return Ok(());
    };
    let olds: Vec<i64> = segment_bases
        .iter()
        .copied()
        .filter(|&b| base <= b && b < end)
        .collect();
    // The cleaner writes a `.txnindex.cleaned` (empty if it keeps no entry) whenever
    // the replaced segments have entries; without one the swap is an older
    // version's, whose cleaned segment still holds every aborted batch.
    let from_cleaner = CleanedSegment::txn_index_path(dir, base, SWAP_SUFFIX).exists();
    if !from_cleaner {
        merge_txn_indexes(dir, &olds, base)?;
    }
    for &old in &olds {
        for path in CleanedSegment::paths(dir, old, "") {
            remove_if_exists(&path)?;
        }
        if from_cleaner || old != base {
            remove_if_exists(&CleanedSegment::txn_index_path(dir, old, ""))?;
        }
    }
    install_txn_index(dir, base)?;
    for (swap, final_path) in CleanedSegment::paths(dir, base, SWAP_SUFFIX)
        .into_iter()
        .zip(CleanedSegment::paths(dir, base, ""))
    {
        rename_if_exists(&swap, &final_path)?;
    }
    tracing::info!(dir = %dir.display(), base, end, "completed an interrupted compaction swap");
    Ok(())
}

/// Kafka's `LogToClean.cleanableRatio` over the cleanable `segments`: the share of their
/// bytes at or after `first_dirty`, and whether a dirty one is older than
/// `max.compaction.lag.ms` (its newest record before `max_lag_bound`), which makes a
/// pass due whatever the ratio.
fn dirty_ratio(segments: &[LogSegment], first_dirty: i64, max_lag_bound: i64) -> (f64, bool) {
    let (mut clean_bytes, mut dirty_bytes) = (0_u64, 0_u64);
    let mut overdue = false;
    for segment in segments {
        if segment.next_offset() <= first_dirty {
            clean_bytes += u64::from(segment.size());
        } else {
            dirty_bytes += u64::from(segment.size());
            overdue |= segment.largest_timestamp() < max_lag_bound;
        }
    }
    #[expect(
        clippy::cast_precision_loss,
        reason = "a ratio of byte counts; precision loss is irrelevant"
    )]
    let dirty_ratio = dirty_bytes as f64 / (clean_bytes + dirty_bytes).max(1) as f64;
    (dirty_ratio, overdue)
}

impl Log {
    /// What a compaction pass may clean now (step 1 of a pass, under the caller's lock,
    /// no I/O beyond file metadata), or `None` when the log is not compacted or not due.
    ///
    /// The dirty section starts at `cleaned_to` (the cleaner checkpoint; the log start if
    /// lower or unknown) and ends before the first uncleanable offset: the active
    /// segment, any segment reaching `max_offset` (the high watermark) or not yet durable,
    /// and any segment newer than `min.compaction.lag.ms`. A pass is due when the dirty
    /// ratio reaches `min.cleanable.dirty.ratio`, a dirty segment is older than
    /// `max.compaction.lag.ms`, or `force` (a kept tombstone's delete retention ran out).
    #[must_use]
    pub fn cleaning_job(
        &self,
        now_ms: i64,
        max_offset: Offset,
        cleaned_to: i64,
        force: bool,
    ) -> Option<CleaningJob> {
        let max_offset = max_offset.get();
        let config = self.config.compaction;
        if !config.compact || self.failed.is_some() {
            return None;
        }
        // Never at or above the first unstable offset (Kafka's cleanableOffsets): an open
        // transaction's batches are not settled yet.
        let limit = max_offset
            .min(self.recovery_point)
            .min(self.first_unstable().unwrap_or(i64::MAX));
        let inactive = self.segments.split_last().map_or(&[][..], |(_, rest)| rest);
        let mut first_dirty = cleaned_to.max(self.log_start_offset);
        if first_dirty > self.end() {
            first_dirty = self.log_start_offset;
        }
        let lag_bound = now_ms.saturating_sub(config.min_compaction_lag_ms);
        let cleanable = inactive
            .iter()
            .take_while(|s| {
                s.next_offset() <= limit
                    && (s.next_offset() <= first_dirty || s.largest_timestamp() <= lag_bound)
            })
            .count();
        let segments = inactive.get(..cleanable).unwrap_or_default();
        let first_uncleanable = segments.last().map_or(first_dirty, LogSegment::next_offset);
        // Nothing dirty: a forced pass still rewrites the clean section (expired
        // tombstones go, everything else stays).
        if segments.is_empty() || (first_uncleanable <= first_dirty && !force) {
            return None;
        }
        let max_lag_bound = now_ms.saturating_sub(config.max_compaction_lag_ms);
        let (dirty_ratio, overdue) = dirty_ratio(segments, first_dirty, max_lag_bound);
        if !(dirty_ratio >= config.min_cleanable_dirty_ratio || overdue || force) {
            return None;
        }
        Some(CleaningJob {
            dir: self.dir.clone(),
            segments: segments.iter().map(LogSegment::cleaning_view).collect(),
            first_dirty_offset: first_dirty,
            first_uncleanable_offset: first_uncleanable,
            segment_bytes: self.config.segment_bytes,
            index_interval_bytes: self.config.index_interval_bytes,
            delete_retention_ms: config.delete_retention_ms,
            producer_last_records: self.producer_state.last_records(),
            aborted_transactions: self.collect_aborted_transactions(
                Offset(
                    segments
                        .first()
                        .map_or(first_dirty, LogSegment::base_offset),
                ),
                Offset(first_uncleanable),
            ),
            dirty_ratio,
        })
    }

    /// Swaps a cleaned segment in for the segments it was made from (step 3 of a pass,
    /// under the caller's lock: renames, deletions and three directory fsyncs, no data
    /// copied). Returns `false`, discarding the cleaned files, when those segments
    /// changed meanwhile (retention, DeleteRecords or truncation got there first).
    ///
    /// Crash safety, as Kafka's `replaceSegments`: the `<base>.swapend` marker (the end
    /// of the replaced range) is made durable, then the `.cleaned` files are renamed to
    /// `.swap` (the commit point), then the old segments are deleted and the `.swap`
    /// files renamed to the final names. [`Log::open`] completes a swap found after the
    /// commit point and deletes `.cleaned` files found before it. Readers holding an old
    /// segment's file keep reading it: an unlinked file stays readable.
    ///
    /// # Errors
    /// I/O errors. After one the log is marked failed if the commit point was passed
    /// (the next open completes the swap).
    pub fn replace_with_cleaned(&mut self, cleaned: CleanedSegment) -> Result<bool, Error> {
        self.check_not_failed()?;
        let Some(first) = cleaned.replaces.first() else {
            return Ok(false);
        };
        let at = self
            .segments
            .iter()
            .position(|s| s.base_offset() == first.base_offset);
        let unchanged = at.is_some_and(|at| {
            at + cleaned.replaces.len() < self.segments.len()
                && cleaned
                    .replaces
                    .iter()
                    .zip(self.segments.get(at..).unwrap_or_default())
                    .all(|(view, segment)| segment.is_viewed_by(view))
        });
        let (Some(at), true) = (at, unchanged) else {
            cleaned.discard();
            return Ok(false);
        };
        let dir = self.dir.clone();
        let base = cleaned.base_offset;
        let end = cleaned.end_offset();
        checkpoint::write(&dir, &swap_end_name(base), &[end])?;
        let renamed: io::Result<()> = rename_if_exists(
            &CleanedSegment::txn_index_path(&dir, base, CLEANED_SUFFIX),
            &CleanedSegment::txn_index_path(&dir, base, SWAP_SUFFIX),
        )
        .and_then(|()| {
            CleanedSegment::paths(&dir, base, CLEANED_SUFFIX)
                .into_iter()
                .zip(CleanedSegment::paths(&dir, base, SWAP_SUFFIX))
                .try_for_each(|(from, to)| fs::rename(from, to))
        });
        if let Err(e) = renamed.and_then(|()| checkpoint::sync_dir(&dir)) {
            // Before the commit point is durable either outcome is safe; the next open
            // decides from what is on disk.
            self.mark_failed(format!(
                "compaction swap failed before its commit point: {e}"
            ));
            return Err(e.into());
        }
        match self.finish_swap(at, &cleaned, end) {
            Ok(()) => {
                tracing::info!(dir = %dir.display(), base, end, replaced = cleaned.replaces.len(), "swapped in a cleaned segment");
                self.check_invariants();
                Ok(true)
            }
            Err(e) => {
                self.mark_failed(format!(
                    "compaction swap failed after its commit point: {e}"
                ));
                Err(e.into())
            }
        }
    }

    /// The part of the swap after the commit point.
    fn finish_swap(&mut self, at: usize, cleaned: &CleanedSegment, end: i64) -> io::Result<()> {
        let dir = self.dir.clone();
        let base = cleaned.base_offset;
        let replaced: Vec<LogSegment> = self
            .segments
            .splice(at..at + cleaned.replaces.len(), std::iter::empty())
            .collect();
        for segment in replaced {
            if segment.base_offset() != base {
                segment.delete_files()?;
            }
        }
        // The cleaned segment's `.txnindex` (if it keeps any entry) replaces the first
        // old segment's, whose entries may name markers the pass removed.
        remove_if_exists(&CleanedSegment::txn_index_path(&dir, base, ""))?;
        install_txn_index(&dir, base)?;
        for (swap, final_path) in CleanedSegment::paths(&dir, base, SWAP_SUFFIX)
            .into_iter()
            .zip(CleanedSegment::paths(&dir, base, ""))
        {
            fs::rename(swap, final_path)?;
        }
        checkpoint::sync_dir(&dir)?;
        remove_if_exists(&dir.join(swap_end_name(base)))?;
        let (mut segment, _) = LogSegment::open(&dir, base)?;
        segment.set_next_offset(end);
        segment.evict_indexes()?;
        self.segments.insert(at, segment);
        Ok(())
    }
}
