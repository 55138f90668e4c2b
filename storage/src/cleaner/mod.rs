//! Log compaction (Kafka's `LogCleaner`/`Cleaner`): for `cleanup.policy=compact` logs, a
//! pass rewrites the closed segments keeping only the newest record of each key, so a
//! compacted topic (and `__consumer_offsets`) holds about one record per live key instead
//! of its whole history.
//!
//! A pass has three steps, so that the log's lock is held only for the last one:
//! 1. [`crate::Log::cleaning_job`] (under the lock, no I/O): which inactive segments, the
//!    dirty section `[first_dirty, first_uncleanable)` and the settings.
//! 2. [`Cleaner::clean`] (no lock; on a cleaner thread): fill the [`OffsetMap`] with the
//!    newest offset of every key of the dirty section (as far as the map holds), then
//!    rewrite every segment below that point, in groups of adjacent segments up to
//!    `segment.bytes`, into `<base>.log.cleaned` (+ indexes), fsync'd.
//! 3. [`crate::Log::replace_with_cleaned`] (under the lock: renames, deletions and three
//!    directory fsyncs, no data written): the crash-safe swap, as Kafka does it:
//!    `.cleaned` → `.swap`, old segments deleted, `.swap` → final names. `Log::open`
//!    deletes `.cleaned` leftovers and completes a `.swap`.
//!
//! What is kept (Kafka's `shouldRetainRecord` and `BatchRetention`): offsets never change
//! (batches keep their base offset, last offset delta and producer fields; records keep
//! their deltas); a record is dropped when a newer record of its key is in the map; a
//! tombstone (null value) follows KIP-534: the first pass that keeps it stamps its batch
//! with a delete horizon (now + `delete.retention.ms`, see [`delete_horizon`]) and the
//! first pass past that horizon drops it, so every tombstone stays readable for
//! `delete.retention.ms` after compaction first saw it, whatever timestamp its producer
//! gave it (a segment-time rule drops tombstones written with old timestamps before a
//! consumer rebuilding state can see them); a record without a key is dropped (a compacted topic refuses
//! them at produce; they can only come from before the policy changed). A batch left
//! without records is dropped, except a producer's last batch (Kafka's
//! `isBatchLastRecordOfProducer`), which stays as an empty batch so the producer's next
//! sequence number is still known after a restart.
//!
//! Transactions (Kafka's `CleanedTransactionMetadata`, KIP-98 and KIP-534; see
//! [`cleaned_transaction_metadata`]): the records of aborted transactions (named by the
//! `.txnindex` entries) are removed and never enter the map; committed transactional
//! batches are compacted like plain ones. A commit or abort marker stays while its
//! transaction still has a batch in the log; after that, a pass gives it a delete horizon
//! (now + `delete.retention.ms`, see [`delete_horizon`]) and the first pass past the
//! horizon removes it. A fenced producer's newest-epoch marker, when no data batch of
//! that epoch follows, is its last record and stays whole. The cleaned segment's
//! `.txnindex` holds only the entries of the ABORT markers it keeps.
//! Compressed batches are decompressed and the kept records recompressed with the same
//! codec; CRCs are recomputed.
//!
//! Memory is bounded by the map (`log.cleaner.dedupe.buffer.size`) and one batch at a
//! time; I/O is throttled to `log.cleaner.io.max.bytes.per.second`.

mod cleaned_transaction_metadata;
mod delete_horizon;
mod offset_map;

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cleaned_transaction_metadata::CleanedTransactionMetadata;
pub use offset_map::OffsetMap;

use crate::checkpoint;
use crate::compression::{self, CODEC_NONE};
use crate::end_transaction_marker::parse_marker;
use crate::error::Error;
use crate::log_segment::{file_name, ChunkReader, LogSegment};
use crate::producer_state::LastRecord;
use crate::record::RecordIter;
use crate::record_batch::{
    compute_crc, RecordBatchHeader, ATTR_DELETE_HORIZON, BATCH_HEADER_BYTES, BATCH_LENGTH_MIN,
    LOG_OVERHEAD_BYTES,
};
use crate::transaction_index::{self, AbortedTxn};

/// Per-partition checkpoint of the offset compaction has cleaned up to (Kafka keeps one
/// `cleaner-offset-checkpoint` per log dir; one per partition directory is deleted with
/// the partition and reuses the partition's checkpoint format).
pub const CLEANER_CHECKPOINT_FILE: &str = "cleaner-offset-checkpoint";
/// Suffix of a segment's files while a pass writes them.
pub(crate) const CLEANED_SUFFIX: &str = ".cleaned";
/// Suffix of a cleaned segment's files between the commit point and the final rename.
pub(crate) const SWAP_SUFFIX: &str = ".swap";
/// Extension of the marker naming the end of the offsets a `.swap` replaces.
pub(crate) const SWAP_END_EXTENSION: &str = "swapend";
/// Read size when reading segments for a pass.
const READ_CHUNK_BYTES: usize = 1024 * 1024;
/// Largest decompressed records section of one batch the cleaner accepts.
const DECOMPRESSED_BYTES_MAX: usize = 256 << 20;

/// Cleaner settings, Kafka's broker configs of the same names.
#[derive(Clone, Copy, Debug)]
pub struct CleanerConfig {
    /// `log.cleaner.dedupe.buffer.size` (per cleaner): memory of the key → offset map.
    pub dedupe_buffer_bytes: usize,
    /// `log.cleaner.io.max.bytes.per.second`: read + write rate cap; `None` = unlimited.
    pub io_max_bytes_per_second: Option<u64>,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        Self {
            dedupe_buffer_bytes: 128 << 20,
            io_max_bytes_per_second: None,
        }
    }
}

/// An inactive segment as a pass sees it, captured under the log's lock.
#[derive(Clone, Debug)]
pub struct SegmentView {
    pub(crate) base_offset: i64,
    /// The next segment's base offset.
    pub(crate) next_offset: i64,
    pub(crate) file: Arc<File>,
    pub(crate) size: u32,
}

/// What one pass works on; see [`crate::Log::cleaning_job`].
#[derive(Clone, Debug)]
pub struct CleaningJob {
    pub(crate) dir: PathBuf,
    /// Every segment below `first_uncleanable_offset`, in offset order.
    pub(crate) segments: Vec<SegmentView>,
    pub(crate) first_dirty_offset: i64,
    pub(crate) first_uncleanable_offset: i64,
    pub(crate) segment_bytes: u64,
    pub(crate) index_interval_bytes: u32,
    pub(crate) delete_retention_ms: i64,
    /// Each producer's newest record, kept so its state survives a reload.
    pub(crate) producer_last_records: HashMap<i64, LastRecord>,
    /// The aborted transactions whose marker is at or after the first segment's base
    /// offset and whose first offset is below `first_uncleanable_offset`.
    pub(crate) aborted_transactions: Vec<AbortedTxn>,
    /// Dirty bytes / all bytes below `first_uncleanable_offset`.
    pub dirty_ratio: f64,
}

impl CleaningJob {
    /// Bytes of the segments the job covers.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.segments.iter().map(|s| u64::from(s.size)).sum()
    }
}

/// A group of segments rewritten into `<base>.log.cleaned` (+ indexes), durable, waiting
/// for [`crate::Log::replace_with_cleaned`].
#[derive(Debug)]
pub struct CleanedSegment {
    pub(crate) dir: PathBuf,
    pub(crate) base_offset: i64,
    /// The segments it replaces, checked unchanged at the swap.
    pub(crate) replaces: Vec<SegmentView>,
}

impl CleanedSegment {
    /// Offset after the replaced group: the base offset of the segment that follows.
    pub(crate) fn end_offset(&self) -> i64 {
        self.replaces
            .last()
            .map_or(self.base_offset, |s| s.next_offset)
    }

    /// The three files, with `suffix`.
    pub(crate) fn paths(dir: &Path, base_offset: i64, suffix: &str) -> [PathBuf; 3] {
        ["log", "index", "timeindex"]
            .map(|extension| dir.join(format!("{}{suffix}", file_name(base_offset, extension))))
    }

    /// The `.txnindex` with `suffix`: it exists only when the cleaned segment keeps an
    /// aborted transaction's marker, and a swap renames it before the three others (the
    /// `.log`'s `.swap` name is the commit point, and then it must be in place).
    pub(crate) fn txn_index_path(dir: &Path, base_offset: i64, suffix: &str) -> PathBuf {
        dir.join(format!("{}{suffix}", file_name(base_offset, "txnindex")))
    }

    /// Deletes the `.cleaned` files (a swap that will not happen).
    pub fn discard(self) {
        let txn_index = Self::txn_index_path(&self.dir, self.base_offset, CLEANED_SUFFIX);
        for path in Self::paths(&self.dir, self.base_offset, CLEANED_SUFFIX)
            .into_iter()
            .chain([txn_index])
        {
            if let Err(e) = std::fs::remove_file(&path) {
                if e.kind() != io::ErrorKind::NotFound {
                    tracing::warn!(path = %path.display(), error = %e, "cannot remove a cleaned segment");
                }
            }
        }
    }
}

/// Counters of one pass.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CleanStats {
    /// Bytes of segments read (map building and rewrite).
    pub bytes_read: u64,
    /// Bytes of cleaned segments written.
    pub bytes_written: u64,
    /// Records read by the rewrite.
    pub records_read: u64,
    /// Records kept.
    pub records_retained: u64,
    /// Segments before the pass (of those rewritten).
    pub segments_before: usize,
    /// Segments after the pass.
    pub segments_after: usize,
    /// Keys put in the map.
    pub map_entries: usize,
    /// Earliest time a kept tombstone or transaction marker becomes removable (`None`:
    /// none kept): the caller runs a pass then even if nothing else is dirty. A marker
    /// whose transaction's last batches this pass removed makes it the pass's time (the
    /// next pass gives the marker its delete horizon).
    pub tombstone_due_ms: Option<i64>,
}

/// The result of [`Cleaner::clean`]: cleaned segments to swap in, in offset order.
#[derive(Debug)]
pub struct CleanResult {
    /// Cleaned groups, oldest first.
    pub segments: Vec<CleanedSegment>,
    /// Offset the log is cleaned up to once every group is swapped in (the next pass's
    /// first dirty offset): write it with [`write_checkpoint`] before the first swap.
    pub cleaned_to: i64,
    /// Counters.
    pub stats: CleanStats,
}

/// Reads the partition's `cleaner-offset-checkpoint` (`None` when absent).
///
/// # Errors
/// I/O errors other than a missing file.
pub fn read_checkpoint(dir: &Path) -> io::Result<Option<i64>> {
    Ok(checkpoint::read(dir, CLEANER_CHECKPOINT_FILE, 1)?.and_then(|v| v.first().copied()))
}

/// Durably writes the partition's `cleaner-offset-checkpoint`. Written before the swaps
/// of a pass: `Log::open` accepts offset gaps (compacted batches) only in segments below
/// it, and a crash between this write and a swap only leaves some duplicates for a later
/// pass.
///
/// # Errors
/// I/O errors.
pub fn write_checkpoint(dir: &Path, cleaned_to: i64) -> io::Result<()> {
    checkpoint::write(dir, CLEANER_CHECKPOINT_FILE, &[cleaned_to])
}

/// Caps read + write bytes per second by sleeping the cleaner thread (Kafka's
/// `Throttler`). Never used on an async worker.
#[derive(Debug)]
struct Throttler {
    bytes_per_second: Option<u64>,
    started: Instant,
    bytes: u64,
}

impl Throttler {
    fn new(bytes_per_second: Option<u64>) -> Self {
        Self {
            bytes_per_second,
            started: Instant::now(),
            bytes: 0,
        }
    }

    fn record(&mut self, bytes: usize) {
        let Some(rate) = self.bytes_per_second.filter(|&r| r > 0) else {
            return;
        };
        self.bytes += bytes as u64;
        #[expect(
            clippy::cast_precision_loss,
            reason = "byte counts far below 2^52 in a pass"
        )]
        let due = Duration::from_secs_f64(self.bytes as f64 / rate as f64);
        let elapsed = self.started.elapsed();
        if due > elapsed + Duration::from_millis(10) {
            std::thread::sleep(due - elapsed);
        }
    }
}

/// The decompressed records section of one batch.
fn records_of<'a>(
    batch: &'a [u8],
    header: &RecordBatchHeader,
    scratch: &'a mut Vec<u8>,
) -> Result<&'a [u8], String> {
    let body = batch.get(BATCH_HEADER_BYTES..).unwrap_or_default();
    let codec = header.compression_codec();
    if codec == CODEC_NONE {
        return Ok(body);
    }
    *scratch =
        compression::decompress(codec, body, DECOMPRESSED_BYTES_MAX).map_err(|e| e.to_string())?;
    Ok(scratch.as_slice())
}

/// What to do with one batch.
enum Filtered {
    /// Keep it byte for byte.
    Whole,
    /// Keep this rewritten batch instead.
    Rebuilt(Vec<u8>),
    /// Drop it.
    Dropped,
}

/// Per-pass decision context for data records.
struct Retention<'a> {
    map: &'a OffsetMap,
    /// Offsets at or above are outside the map: kept as they are.
    map_end: i64,
    /// The pass's clock: a batch whose delete horizon is at or before it loses its
    /// tombstones.
    now_ms: i64,
    /// `delete.retention.ms`: the horizon a pass stamps on a batch whose tombstones it
    /// keeps for the first time is `now_ms` plus this.
    delete_retention_ms: i64,
}

impl Retention<'_> {
    /// Kafka's `shouldRetainRecord`: the newest record of its key, and if a tombstone,
    /// its batch has no delete horizon yet or has not reached it (`horizon_passed`).
    fn keep(&self, offset: i64, key: Option<&[u8]>, tombstone: bool, horizon_passed: bool) -> bool {
        if offset >= self.map_end {
            return true;
        }
        let Some(key) = key else {
            return false;
        };
        let newest = self.map.get(key).is_none_or(|latest| offset >= latest);
        newest && !(tombstone && horizon_passed)
    }
}

/// Builds the v2 batch `header` describes with `records` (uncompressed, back to back,
/// `count` of them) as its records, compressed with the header's codec; base offset,
/// last offset delta, timestamps and producer fields unchanged; CRC recomputed. With a
/// `delete_horizon_ms`, that is the base timestamp and attribute bit 6 is set (the
/// records' timestamp deltas must already be relative to it).
fn rebuild_batch(
    original: &[u8],
    header: &RecordBatchHeader,
    records: &[u8],
    count: i32,
    delete_horizon_ms: Option<i64>,
) -> io::Result<Vec<u8>> {
    let codec = header.compression_codec();
    let mut attributes = header.attributes;
    if delete_horizon_ms.is_some() {
        attributes |= ATTR_DELETE_HORIZON;
    }
    let body = if count == 0 {
        // An empty batch carries no records to compress (Kafka's `writeEmptyHeader`).
        attributes &= !0x7;
        Vec::new()
    } else if codec == CODEC_NONE {
        records.to_vec()
    } else {
        compression::compress(codec, records)?
    };
    let mut out = Vec::with_capacity(BATCH_HEADER_BYTES + body.len());
    out.extend_from_slice(original.get(..BATCH_HEADER_BYTES).unwrap_or_default());
    out.extend_from_slice(&body);
    let length = i32::try_from(out.len() - LOG_OVERHEAD_BYTES)
        .map_err(|_| io::Error::other("rebuilt batch too large"))?;
    assert!(
        BATCH_LENGTH_MIN <= length,
        "rebuilt batch shorter than a header"
    );
    if let Some(field) = out.get_mut(8..12) {
        field.copy_from_slice(&length.to_be_bytes());
    }
    if let Some(field) = out.get_mut(21..23) {
        field.copy_from_slice(&attributes.to_be_bytes());
    }
    if let Some(field) = out.get_mut(57..61) {
        field.copy_from_slice(&count.to_be_bytes());
    }
    if let (Some(horizon), Some(field)) = (delete_horizon_ms, out.get_mut(27..35)) {
        field.copy_from_slice(&horizon.to_be_bytes());
    }
    let crc = compute_crc(&out);
    if let Some(field) = out.get_mut(17..21) {
        field.copy_from_slice(&crc.to_be_bytes());
    }
    Ok(out)
}

/// One cleaner: its map and throttler, reused pass after pass. Not shared between
/// threads (each cleaner thread owns one).
pub struct Cleaner {
    map: OffsetMap,
    config: CleanerConfig,
    scratch: Vec<u8>,
}

/// Stops a pass: the map could not take even one batch of the dirty section.
fn map_too_small(entries: usize, needed: usize) -> Error {
    Error::Io(io::Error::other(format!(
        "log.cleaner.dedupe.buffer.size holds {entries} keys, a single batch has {needed}"
    )))
}

impl Cleaner {
    /// A cleaner whose passes may use up to `config.dedupe_buffer_bytes` of map.
    #[must_use]
    pub fn new(config: CleanerConfig) -> Self {
        Self {
            map: OffsetMap::new(0),
            config,
            scratch: Vec::new(),
        }
    }

    /// Runs one pass (see [`Cleaner::clean_pass`]) with a map sized for it: one slot per
    /// dirty offset at most (a key per record is the worst case), never more than
    /// `log.cleaner.dedupe.buffer.size`, and freed when the pass ends. Kafka allocates
    /// the whole buffer at start; here an idle cleaner, or one cleaning a small
    /// `__consumer_offsets` partition, holds kilobytes, not 128 MiB.
    ///
    /// # Errors
    /// As [`Cleaner::clean_pass`].
    pub fn clean(&mut self, job: &CleaningJob, now_ms: i64) -> Result<CleanResult, Error> {
        let dirty_offsets =
            usize::try_from(job.first_uncleanable_offset - job.first_dirty_offset).unwrap_or(0);
        let bytes = OffsetMap::bytes_for(dirty_offsets).min(self.config.dedupe_buffer_bytes);
        self.map = OffsetMap::new(bytes);
        let result = self.clean_pass(job, now_ms);
        self.map = OffsetMap::new(0);
        result
    }

    /// Runs steps 1-2 of a pass (see the module docs) as of `now_ms`. Blocking I/O:
    /// call on a cleaner thread, never under the log's lock.
    ///
    /// # Errors
    /// I/O errors, a batch that does not decode (the pass stops; nothing is swapped), or
    /// a map too small for one batch.
    fn clean_pass(&mut self, job: &CleaningJob, now_ms: i64) -> Result<CleanResult, Error> {
        let mut throttler = Throttler::new(self.config.io_max_bytes_per_second);
        let mut stats = CleanStats::default();
        let map_end = self.build_offset_map(job, &mut throttler, &mut stats)?;
        stats.map_entries = self.map.len();
        let rewrite: Vec<&SegmentView> = job
            .segments
            .iter()
            .filter(|s| s.base_offset < map_end)
            .collect();
        let mut segments = Vec::new();
        // One walk over the transactions of every group, in offset order: a marker in a
        // later group knows whether an earlier group held its transaction's batches.
        let mut txns = CleanedTransactionMetadata::new(&job.aborted_transactions);
        let mut i = 0;
        while i < rewrite.len() {
            let group = group_by_size(rewrite.get(i..).unwrap_or_default(), job.segment_bytes);
            let pass = Pass {
                job,
                map_end,
                now_ms,
            };
            let cleaned =
                match self.clean_group(&pass, group, &mut txns, &mut throttler, &mut stats) {
                    Ok(cleaned) => cleaned,
                    Err(e) => {
                        for done in segments {
                            CleanedSegment::discard(done);
                        }
                        return Err(e);
                    }
                };
            segments.push(cleaned);
            i += group.len();
        }
        stats.segments_before = rewrite.len();
        stats.segments_after = segments.len();
        Ok(CleanResult {
            segments,
            cleaned_to: map_end,
            stats,
        })
    }

    /// Puts the newest offset of each key of the dirty section into the map, batch by
    /// batch, until the map is full or the section ends; returns where it stopped (the
    /// offset after the last batch put).
    fn build_offset_map(
        &mut self,
        job: &CleaningJob,
        throttler: &mut Throttler,
        stats: &mut CleanStats,
    ) -> Result<i64, Error> {
        self.map.clear();
        let aborted: Vec<AbortedTxn> = job
            .aborted_transactions
            .iter()
            .copied()
            .filter(|t| t.last_offset >= job.first_dirty_offset)
            .collect();
        let mut txns = CleanedTransactionMetadata::new(&aborted);
        let mut end = job.first_dirty_offset;
        for segment in &job.segments {
            if segment.next_offset <= job.first_dirty_offset {
                continue;
            }
            let mut full = false;
            for_each_batch(segment, throttler, stats, |batch, header, _, _| {
                if header.last_offset() < job.first_dirty_offset {
                    return Ok(true);
                }
                if header.is_control() {
                    let marker = parse_marker(header, batch)
                        .map_err(|reason| corrupt(segment, header, reason))?;
                    txns.on_control_batch_read(header, marker);
                    end = header.last_offset() + 1;
                    return Ok(true);
                }
                if txns.on_batch_read(header) {
                    // An aborted transaction's records never enter the map: they must not
                    // hide an older committed record of their key.
                    end = header.last_offset() + 1;
                    return Ok(true);
                }
                let records = records_of(batch, header, &mut self.scratch)
                    .map_err(|reason| corrupt(segment, header, reason))?;
                let count = usize::try_from(header.records_count).unwrap_or(0);
                if !self.map.has_room_for(count) {
                    if self.map.is_empty() {
                        return Err(map_too_small(self.map.max_entries(), count));
                    }
                    full = true;
                    return Ok(false);
                }
                for record in RecordIter::new(records) {
                    let record = record.map_err(|e| corrupt(segment, header, e.to_string()))?;
                    if let Some(key) = record.key {
                        let offset = header.base_offset + i64::from(record.offset_delta);
                        self.map.put(key, offset);
                    }
                }
                end = header.last_offset() + 1;
                Ok(true)
            })?;
            if full {
                return Ok(end);
            }
            end = end.max(segment.next_offset.min(job.first_uncleanable_offset));
        }
        Ok(end)
    }

    /// Rewrites one group of adjacent segments into `<first base>.log.cleaned`.
    fn clean_group(
        &mut self,
        pass: &Pass<'_>,
        group: &[&SegmentView],
        txns: &mut CleanedTransactionMetadata,
        throttler: &mut Throttler,
        stats: &mut CleanStats,
    ) -> Result<CleanedSegment, Error> {
        let job = pass.job;
        let first = group.first().expect("a group has a segment");
        let mut cleaned =
            LogSegment::create_with_suffix(&job.dir, first.base_offset, CLEANED_SUFFIX)?;
        let result = self.write_group(pass, group, txns, throttler, stats, &mut cleaned);
        let done = CleanedSegment {
            dir: job.dir.clone(),
            base_offset: first.base_offset,
            replaces: group.iter().map(|s| (*s).clone()).collect(),
        };
        match result.and_then(|()| cleaned.finish_cleaned().map_err(Error::from)) {
            Ok(()) => Ok(done),
            Err(e) => {
                drop(cleaned);
                done.discard();
                Err(e)
            }
        }
    }

    /// Writes the kept batches of `group` into `cleaned`, and the aborted transactions
    /// whose markers it keeps into its `.txnindex` (durably).
    fn write_group(
        &mut self,
        pass: &Pass<'_>,
        group: &[&SegmentView],
        txns: &mut CleanedTransactionMetadata,
        throttler: &mut Throttler,
        stats: &mut CleanStats,
        cleaned: &mut LogSegment,
    ) -> Result<(), Error> {
        let Pass {
            job,
            map_end,
            now_ms,
        } = *pass;
        let mut writer = GroupWriter {
            pass: *pass,
            retention: Retention {
                map: &self.map,
                map_end,
                now_ms,
                delete_retention_ms: job.delete_retention_ms,
            },
            txns,
            scratch: &mut self.scratch,
            cleaned,
            kept_aborted: Vec::new(),
        };
        for segment in group {
            for_each_batch(
                segment,
                throttler,
                stats,
                |batch, header, throttler, stats| {
                    let filtered = writer.filter(segment, batch, header, stats)?;
                    writer.append(segment, batch, header, filtered, throttler, stats)?;
                    Ok(true)
                },
            )?;
        }
        let GroupWriter {
            cleaned,
            kept_aborted,
            ..
        } = writer;
        write_cleaned_txn_index(job, group, cleaned, kept_aborted)
    }
}

/// What writing one group into its cleaned segment carries from batch to batch (Kafka's
/// `cleanInto` with its `filterInto` and `CleanedTransactionMetadata`): a struct so each
/// batch's steps (its fate, then its append) can be functions of their own without a
/// dozen arguments each.
struct GroupWriter<'a> {
    pass: Pass<'a>,
    retention: Retention<'a>,
    txns: &'a mut CleanedTransactionMetadata,
    scratch: &'a mut Vec<u8>,
    cleaned: &'a mut LogSegment,
    /// The aborted transactions whose markers this group keeps: its `.txnindex` entries.
    kept_aborted: Vec<AbortedTxn>,
}

impl GroupWriter<'_> {
    /// One batch's fate (Kafka's `filterInto` per batch): a control batch goes by its
    /// transaction's state, a data batch by its transaction's outcome and then record by
    /// record; a data batch kept in any form marks its transaction as retained.
    fn filter(
        &mut self,
        segment: &SegmentView,
        batch: &[u8],
        header: &RecordBatchHeader,
        stats: &mut CleanStats,
    ) -> Result<Filtered, Error> {
        let last_of_producer = is_last_of_producer(self.pass.job, header);
        if header.is_control() {
            return self.filter_control(segment, batch, header, last_of_producer, stats);
        }
        let filtered = self.filter_data(segment, batch, header, last_of_producer, stats)?;
        if !matches!(filtered, Filtered::Dropped) {
            self.txns.on_batch_retained(header);
        }
        Ok(filtered)
    }

    /// A control batch (Kafka's `onControlBatchRead` then `checkBatchRetention`): its
    /// marker ends a transaction, whose `.txnindex` entry is kept while the marker is;
    /// the marker is removable once its transaction has no data left and it is not its
    /// producer's last batch.
    fn filter_control(
        &mut self,
        segment: &SegmentView,
        batch: &[u8],
        header: &RecordBatchHeader,
        last_of_producer: bool,
        stats: &mut CleanStats,
    ) -> Result<Filtered, Error> {
        let marker =
            parse_marker(header, batch).map_err(|reason| corrupt(segment, header, reason))?;
        let read = self.txns.on_control_batch_read(header, marker);
        self.kept_aborted.extend(read.index_entry);
        let (filtered, due) = filter_marker(
            batch,
            header,
            read.discardable && !last_of_producer,
            &self.pass,
            self.scratch,
            stats,
        )
        .map_err(|reason| corrupt(segment, header, reason))?;
        let due = if read.emptied_now {
            Some(self.pass.now_ms)
        } else {
            due
        };
        if let Some(due) = due {
            stats.tombstone_due_ms = Some(stats.tombstone_due_ms.map_or(due, |d| d.min(due)));
        }
        Ok(filtered)
    }

    /// A data batch (Kafka's `onBatchRead` then `shouldRetainRecord` per record): an
    /// aborted transaction's batch loses all its records, else each record stays only if
    /// it is the newest of its key (and not a tombstone past its horizon).
    fn filter_data(
        &mut self,
        segment: &SegmentView,
        batch: &[u8],
        header: &RecordBatchHeader,
        last_of_producer: bool,
        stats: &mut CleanStats,
    ) -> Result<Filtered, Error> {
        if self.txns.on_batch_read(header) {
            // An aborted transaction's batch: its records go; the batch
            // stays empty if it is its producer's last.
            stats.records_read += u64::try_from(header.records_count).unwrap_or(0);
            return if last_of_producer {
                rebuild_batch(batch, header, &[], 0, None)
                    .map(Filtered::Rebuilt)
                    .map_err(|e| corrupt(segment, header, e.to_string()))
            } else {
                Ok(Filtered::Dropped)
            };
        }
        let (filtered, due) = filter_batch(
            batch,
            header,
            &self.retention,
            last_of_producer,
            self.scratch,
            stats,
        )
        .map_err(|reason| corrupt(segment, header, reason))?;
        if let Some(due) = due {
            // A kept tombstone becomes removable at its horizon; the
            // caller runs a pass then even if nothing else is dirty.
            stats.tombstone_due_ms = Some(stats.tombstone_due_ms.map_or(due, |d| d.min(due)));
        }
        Ok(filtered)
    }

    /// Appends a batch's kept form to the cleaned segment, counting its bytes as written
    /// and against the I/O throttle.
    fn append(
        &mut self,
        segment: &SegmentView,
        batch: &[u8],
        header: &RecordBatchHeader,
        filtered: Filtered,
        throttler: &mut Throttler,
        stats: &mut CleanStats,
    ) -> Result<(), Error> {
        let interval = self.pass.job.index_interval_bytes;
        match filtered {
            Filtered::Whole => {
                self.cleaned.append_cleaned(batch, header, interval)?;
                stats.bytes_written += batch.len() as u64;
                throttler.record(batch.len());
            }
            Filtered::Rebuilt(bytes) => {
                let rebuilt = RecordBatchHeader::parse(&bytes)
                    .map_err(|e| corrupt(segment, header, e.to_string()))?;
                self.cleaned.append_cleaned(&bytes, &rebuilt, interval)?;
                stats.bytes_written += bytes.len() as u64;
                throttler.record(bytes.len());
            }
            Filtered::Dropped => {}
        }
        Ok(())
    }
}

/// Writes the aborted transactions a group kept into its cleaned segment's `.txnindex`
/// and syncs it, before the swap can make it the segment's index. When the group's
/// segments had entries and none was kept, writes an empty `.txnindex.cleaned` instead.
fn write_cleaned_txn_index(
    job: &CleaningJob,
    group: &[&SegmentView],
    cleaned: &mut LogSegment,
    kept_aborted: Vec<AbortedTxn>,
) -> Result<(), Error> {
    let index = cleaned.txn_index_mut();
    let kept_none = kept_aborted.is_empty();
    for entry in kept_aborted {
        index.append(entry)?;
    }
    if let Some(path) = index.take_unsynced() {
        transaction_index::sync_path(&path)?;
    }
    let (start, end) = (
        group.first().map_or(0, |s| s.base_offset),
        group.last().map_or(0, |s| s.next_offset),
    );
    let had_entries = job
        .aborted_transactions
        .iter()
        .any(|t| start <= t.last_offset && t.last_offset < end);
    if kept_none && had_entries {
        // An empty `.txnindex.cleaned` says "the replaced entries are gone", which an
        // interrupted swap must tell apart from an older version's swap (no file).
        let path = CleanedSegment::txn_index_path(&job.dir, start, CLEANED_SUFFIX);
        File::create(&path)?.sync_all()?;
    }
    Ok(())
}

/// A pass's fixed inputs, passed down to each group.
#[derive(Clone, Copy)]
struct Pass<'a> {
    job: &'a CleaningJob,
    /// Offsets at or above are outside the map.
    map_end: i64,
    now_ms: i64,
}

/// Kafka's `isBatchLastRecordOfProducer`: the batch holding the producer's last data
/// offset, or, when a marker of a newer epoch came after its last data batch (it was
/// fenced), that epoch's marker. Such a batch stays so a reload from the log restores the
/// producer's last sequence and epoch.
fn is_last_of_producer(job: &CleaningJob, header: &RecordBatchHeader) -> bool {
    if header.producer_id < 0 {
        return false;
    }
    job.producer_last_records
        .get(&header.producer_id)
        .is_some_and(|last| match last.last_data_offset {
            Some(offset) => !header.is_control() && header.last_offset() == offset,
            None => header.is_control() && header.producer_epoch == last.producer_epoch,
        })
}

/// A marker's fate (Kafka's `checkBatchRetention` for control batches, KIP-534): kept as
/// it is while its transaction has data (`discardable` false); once discardable, given a
/// delete horizon (`now + delete.retention.ms`, in its base timestamp, attribute bit 6)
/// on the first pass and removed by the first pass after that horizon. An emptied control
/// batch goes at once. Returns the time a later pass should remove it, if kept for that.
fn filter_marker(
    batch: &[u8],
    header: &RecordBatchHeader,
    discardable: bool,
    pass: &Pass<'_>,
    scratch: &mut Vec<u8>,
    stats: &mut CleanStats,
) -> Result<(Filtered, Option<i64>), String> {
    let count = u64::try_from(header.records_count).unwrap_or(0);
    stats.records_read += count;
    if !discardable {
        stats.records_retained += count;
        return Ok((Filtered::Whole, None));
    }
    if header.records_count == 0 {
        return Ok((Filtered::Dropped, None));
    }
    match header.delete_horizon_ms() {
        Some(horizon) if horizon <= pass.now_ms => Ok((Filtered::Dropped, None)),
        Some(horizon) => {
            stats.records_retained += count;
            Ok((Filtered::Whole, Some(horizon)))
        }
        None => {
            stats.records_retained += count;
            let horizon = pass.now_ms.saturating_add(pass.job.delete_retention_ms);
            let records = records_of(batch, header, scratch)?;
            let rebased =
                delete_horizon::rebase_timestamps(records, header.base_timestamp, horizon)?;
            let rebuilt =
                rebuild_batch(batch, header, &rebased, header.records_count, Some(horizon))
                    .map_err(|e| e.to_string())?;
            Ok((Filtered::Rebuilt(rebuilt), Some(horizon)))
        }
    }
}

/// Applies [`Retention`] to every record of one batch (Kafka's `filterTo` for one data
/// batch). A batch that keeps a tombstone below the map's end and has no delete horizon
/// yet is rebuilt with one (`now + delete.retention.ms`); the second value is the horizon
/// of a batch kept with tombstones, when a later pass should run to drop them.
fn filter_batch(
    batch: &[u8],
    header: &RecordBatchHeader,
    retention: &Retention<'_>,
    keep_if_empty: bool,
    scratch: &mut Vec<u8>,
    stats: &mut CleanStats,
) -> Result<(Filtered, Option<i64>), String> {
    assert!(
        !header.is_control(),
        "control batches go through filter_marker"
    );
    let records = records_of(batch, header, scratch)?;
    let horizon = header.delete_horizon_ms();
    let horizon_passed = horizon.is_some_and(|h| h <= retention.now_ms);
    let mut kept = Vec::new();
    let mut kept_count = 0_i32;
    let mut all = true;
    let mut kept_tombstone = false;
    let mut iter = RecordIter::new(records);
    loop {
        let start = records.len() - iter.remaining().len();
        let Some(record) = iter.next() else { break };
        let record = record.map_err(|e| e.to_string())?;
        stats.records_read += 1;
        let offset = header.base_offset + i64::from(record.offset_delta);
        let tombstone = record.value.is_none();
        if retention.keep(offset, record.key, tombstone, horizon_passed) {
            kept.extend_from_slice(
                records
                    .get(start..start + record.size_bytes)
                    .unwrap_or_default(),
            );
            kept_count += 1;
            stats.records_retained += 1;
            kept_tombstone |= tombstone && offset < retention.map_end;
        } else {
            all = false;
        }
    }
    if kept_tombstone && horizon.is_none() {
        // First pass to keep this batch's tombstones: stamp when they may go.
        let stamped = retention
            .now_ms
            .saturating_add(retention.delete_retention_ms);
        let source = if all { records } else { kept.as_slice() };
        let rebased = delete_horizon::rebase_timestamps(source, header.base_timestamp, stamped)?;
        let rebuilt = rebuild_batch(batch, header, &rebased, kept_count, Some(stamped))
            .map_err(|e| e.to_string())?;
        return Ok((Filtered::Rebuilt(rebuilt), Some(stamped)));
    }
    let due = horizon.filter(|_| kept_tombstone);
    if all {
        return Ok((Filtered::Whole, due));
    }
    if kept_count == 0 && !keep_if_empty {
        return Ok((Filtered::Dropped, None));
    }
    rebuild_batch(batch, header, &kept, kept_count, None)
        .map(|rebuilt| (Filtered::Rebuilt(rebuilt), due))
        .map_err(|e| e.to_string())
}

fn corrupt(segment: &SegmentView, header: &RecordBatchHeader, reason: String) -> Error {
    Error::CorruptBatch {
        position: 0,
        reason: format!(
            "segment {} batch at offset {}: {reason}",
            segment.base_offset, header.base_offset
        ),
    }
}

/// Calls `f(batch, header)` for each whole batch of `segment` until it returns false.
fn for_each_batch(
    segment: &SegmentView,
    throttler: &mut Throttler,
    stats: &mut CleanStats,
    mut f: impl FnMut(&[u8], &RecordBatchHeader, &mut Throttler, &mut CleanStats) -> Result<bool, Error>,
) -> Result<(), Error> {
    let limit = u64::from(segment.size);
    let mut reader = ChunkReader::new(&segment.file, limit, READ_CHUNK_BYTES);
    let mut position = 0_u64;
    while position < limit {
        let torn = |reason: &str| Error::CorruptBatch {
            position,
            reason: format!("segment {}: {reason}", segment.base_offset),
        };
        let head = reader
            .get(position, BATCH_HEADER_BYTES)?
            .ok_or_else(|| torn("torn batch header"))?;
        let header = RecordBatchHeader::parse(head).map_err(|e| torn(&e.to_string()))?;
        if header.batch_length < BATCH_LENGTH_MIN {
            return Err(torn("invalid batch length"));
        }
        let total = header.total_bytes();
        let batch = reader
            .get(position, total)?
            .ok_or_else(|| torn("torn batch"))?;
        stats.bytes_read += total as u64;
        throttler.record(total);
        if !f(batch, &header, throttler, stats)? {
            return Ok(());
        }
        position += total as u64;
    }
    Ok(())
}

/// The longest prefix of `segments` that fits one cleaned segment (Kafka's
/// `groupSegmentsBySize`): total size at most `segment_bytes` (original sizes: cleaning
/// only shrinks) and an offset span that relative u32 index offsets can address. Never
/// empty.
fn group_by_size<'a, 'b>(
    segments: &'a [&'b SegmentView],
    segment_bytes: u64,
) -> &'a [&'b SegmentView] {
    let Some(first) = segments.first() else {
        return segments;
    };
    let mut bytes = 0_u64;
    let mut n = 0;
    for segment in segments {
        let span = segment.next_offset - first.base_offset;
        if n > 0 && (bytes + u64::from(segment.size) > segment_bytes || span > i64::from(u32::MAX))
        {
            break;
        }
        bytes += u64::from(segment.size);
        n += 1;
    }
    segments.get(..n).unwrap_or(segments)
}

#[cfg(test)]
mod tests;
