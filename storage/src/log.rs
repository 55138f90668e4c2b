//! `Log`: one partition's log — an ordered list of segments with a log start offset, a
//! log end offset and a recovery point. Appends go to the last (active) segment; reads
//! locate a batch by segment + offset index; recovery on open makes the on-disk state
//! trustworthy again after a crash.

use std::fs::{self, File};
use std::io;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::checkpoint::{self, CLEAN_SHUTDOWN_FILE, LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE};
use crate::end_transaction_marker::{
    build_marker_batch, parse_marker, EndTransactionMarker, TxnResult,
};
use crate::error::Error;
use crate::leader_epoch_cache::{EpochCheckpoint, LeaderEpoch, LeaderEpochFileCache};
use crate::log_segment::{LogSegment, SEGMENT_BYTES_MAX};
use crate::log_validator::ValidatedBatches;
use crate::offset::Offset;
use crate::producer_state::{
    ActiveProducer, BatchMetadata, MarkerCheck, ProducerSnapshot, ProducerStateManager,
    SequenceCheck,
};
use crate::record_batch::{iter_headers, RecordBatchHeader};
use crate::transaction_index::{self, AbortedTxn};
use logbook_common::now_ms;

mod cleaning;
mod follower;
mod loader; // Log::open: Kafka's LogLoader, the start-up phases of a log // append_as_follower, truncate_fully_and_start_at: the replica's side // log compaction's hooks: the cleaning job, the segment swap, swap recovery
pub use cleaning::CompactionConfig;

/// Per-log settings, Kafka's topic configs of the same names.
#[derive(Clone, Debug)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would exceed this. Capped at
    /// `i32::MAX` like Kafka's, so file positions fit an index entry. Default 1 GiB.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when an append's largest timestamp is this much past the active
    /// segment's first batch's (by the wall clock since the first append when that batch
    /// has no timestamp), as Kafka's `timeWaitedForRoll`. Default 7 days.
    pub segment_ms: u64,
    /// `index.interval.bytes`: bytes between offset (and time) index entries. Default 4096.
    pub index_interval_bytes: u32,
    /// `segment.index.bytes`: an index holding this many bytes of entries forces a roll.
    /// Default 10 MiB.
    pub segment_index_bytes: u32,
    /// `retention.ms`: delete segments whose largest timestamp is older; -1 = forever.
    /// Default 7 days.
    pub retention_ms: i64,
    /// `retention.bytes`: delete oldest segments while the log is larger; -1 = no limit.
    pub retention_bytes: i64,
    /// Most bytes reserved on disk ahead of the active segment's end (0 disables). Not a
    /// Kafka config: see `LogSegment::preallocate` for why a log reserves ahead.
    pub preallocate_bytes_max: u64,
    /// Bytes at the end of the active segment kept in the page cache once durable; older
    /// pages are dropped after each fsync (0 leaves the page cache to the kernel). Not a
    /// Kafka config: see `LogSegment::trim_page_cache`.
    pub page_cache_tail_bytes: u64,
    /// Log compaction settings (`cleanup.policy=compact` and its configs).
    pub compaction: CompactionConfig,
    /// `min.insync.replicas`: not used by the log itself; carried with the topic's other
    /// configs so the partition that owns the log knows it from the moment it opens (its
    /// high watermark and acks=all depend on it). Default 1.
    pub min_insync_replicas: usize,
}

impl Default for LogConfig {
    fn default() -> Self {
        const WEEK_MS: u64 = 7 * 24 * 60 * 60 * 1000;
        Self {
            segment_bytes: 1 << 30,
            segment_ms: WEEK_MS,
            index_interval_bytes: 4096,
            segment_index_bytes: 10 * 1024 * 1024,
            retention_ms: WEEK_MS as i64,
            retention_bytes: -1,
            preallocate_bytes_max: 8 << 20,
            page_cache_tail_bytes: 64 << 20,
            compaction: CompactionConfig::default(),
            min_insync_replicas: 1,
        }
    }
}

/// Offsets of one successful append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendInfo {
    /// Offset given to the first record.
    pub first_offset: Offset,
    /// Offset given to the last record.
    pub last_offset: Offset,
    /// Largest batch `max_timestamp` of the append (-1 if none).
    pub max_timestamp: i64,
    /// Log end offset after the append (`last_offset + 1`).
    pub log_end_offset: Offset,
}

/// What an append did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendOutcome {
    /// The batches were written at these offsets.
    Appended(AppendInfo),
    /// The append was one batch that an idempotent producer had already written (a
    /// retry): nothing was written; answer with the offsets it got the first time.
    Duplicate(BatchMetadata),
}

impl AppendOutcome {
    /// The offsets written, or `None` for a duplicate.
    #[must_use]
    pub fn appended(self) -> Option<AppendInfo> {
        match self {
            AppendOutcome::Appended(info) => Some(info),
            AppendOutcome::Duplicate(_) => None,
        }
    }
}

/// Result of [`Log::read`].
#[derive(Clone, Debug)]
pub struct ReadResult {
    /// Whole batches, back to back, exactly as stored; may be empty.
    pub records: Bytes,
    /// Log start offset at the time of the read.
    pub log_start_offset: Offset,
    /// Log end offset at the time of the read.
    pub log_end_offset: Offset,
}

/// Result of [`Log::read_slices`]: whole batches, back to back, as file ranges.
#[derive(Clone, Debug)]
pub struct SliceRead {
    /// Ranges of segment files, in offset order; empty when there is nothing to read.
    pub slices: Vec<FileSlice>,
    /// Total bytes of `slices`.
    pub bytes: usize,
    /// Log start offset at the time of the read.
    pub log_start_offset: Offset,
    /// Log end offset at the time of the read.
    pub log_end_offset: Offset,
    /// One past the last offset of the batches in `slices` (a fetch that takes them all
    /// continues from here), when the read could tell without reading more headers: the
    /// span of offsets a consumer was sent, for metrics.
    pub next_offset: Option<Offset>,
}

/// `len` bytes of a segment file from `position`: whole batches, immutable once written.
///
/// Holds the file open, so the bytes stay readable even if retention deletes the segment
/// before they are sent.
#[derive(Clone, Debug)]
pub struct FileSlice {
    /// The segment's `.log`.
    pub file: Arc<File>,
    /// Byte position in the file.
    pub position: u64,
    /// Length in bytes.
    pub len: usize,
}

impl FileSlice {
    /// Appends the slice's bytes to `out` with positional reads.
    ///
    /// # Errors
    /// I/O errors, or `UnexpectedEof` if the file was truncated below the slice.
    pub fn read_into(&self, out: &mut Vec<u8>) -> io::Result<()> {
        crate::log_segment::read_exact_at_uninit(&self.file, out, self.position, self.len)
    }
}

/// The `.log` files holding appends not yet durable, whose write-out a flusher starts
/// before it syncs a group of partitions ([`Log::writeback_handle`]).
///
/// Why: a flusher syncing several partitions one after another paid one full disk round
/// (data write, journal commit, cache flush) per partition. Starting every partition's
/// data write first puts all of it in flight at once, so the fsyncs that follow mostly
/// find their data written and their metadata committed by the first one. 8 files of
/// 16 KiB each, fsynced by 2 threads: 1.14-1.39 ms per round; with the write-out started
/// first, 0.77-0.86 ms (p50 of 1,500 rounds, ext4 on the development VM). A 3-node
/// cluster on one disk, RF=3 acks=all at 5,000 records/s over 8 partitions, 4
/// alternating pairs: e2e p99 9.4-9.8 ms without, 8.8-9.1 with (one run 17.1).
#[derive(Debug)]
pub struct WritebackHandle {
    files: Vec<Arc<File>>,
}

impl WritebackHandle {
    /// Starts writing the files' dirty pages to the disk without waiting for them
    /// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`). Only a head start: durability still
    /// comes from [`SyncHandle::sync`]'s fdatasync, which waits for this write-out and
    /// reports its errors, so a failure here is only logged.
    pub fn start(&self) {
        for file in &self.files {
            if let Err(e) = sync_file_range_write(file) {
                tracing::debug!(error = %e, "starting write-out ahead of the fsync failed; the fsync will tell");
            }
        }
    }
}

/// `sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE)`: write-out of every dirty page of the
/// file starts; nothing is waited for.
fn sync_file_range_write(file: &File) -> rustix::io::Result<()> {
    use std::os::fd::AsRawFd;
    #[expect(
        unsafe_code,
        reason = "sync_file_range has no safe wrapper in rustix or std"
    )]
    // SAFETY: the descriptor is open for as long as `file` is borrowed; the call takes no
    // pointers.
    let rc = unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
    if rc == 0 {
        Ok(())
    } else {
        Err(
            rustix::io::Errno::from_io_error(&io::Error::last_os_error())
                .unwrap_or(rustix::io::Errno::IO),
        )
    }
}

/// What to fsync to make every append made before its capture durable, and the
/// durability work a roll left behind.
///
/// Holds shared file handles and paths (not segments), so it stays valid if segments roll
/// or are deleted meanwhile (fsync of an unlinked file is harmless; a deleted index is
/// skipped). `Send`: capture it under the caller's lock with [`Log::sync_handle`],
/// [`SyncHandle::sync`] outside it, then [`Log::mark_durable`] with the result.
#[derive(Debug)]
pub struct SyncHandle {
    files: Vec<Arc<File>>,
    end_offset: i64,
    /// Durable-once-synced bytes to drop from the page cache after the fsync.
    drop_cached: Option<FileSlice>,
    /// Work rolls queued: index fsyncs, the directory fsync, producer snapshots.
    roll_work: RollWork,
    /// The recovery point to checkpoint once `end_offset` is durable (when it enters a
    /// newer segment), bounding crash recovery to about one segment.
    recovery_point: Option<i64>,
    /// `.txnindex` files appended since their last fsync.
    txn_indexes: Vec<PathBuf>,
    dir: PathBuf,
}

/// Durability work a segment roll leaves for the flusher, so that no fsync runs under the
/// log's lock or on an async worker: the rolled segment's final indexes, the directory
/// entry of the new segment, and the producer-state snapshot at the new base offset. All
/// of it is done before the high watermark may pass the new segment's first batch.
#[derive(Debug, Default)]
pub(crate) struct RollWork {
    index_files: Vec<PathBuf>,
    sync_dir: bool,
    /// Written before the snapshots: a snapshot at offset S on disk implies the epoch
    /// checkpoint covers everything below S, which recovery relies on.
    epoch_checkpoint: Option<EpochCheckpoint>,
    snapshots: Vec<ProducerSnapshot>,
}

impl RollWork {
    fn is_empty(&self) -> bool {
        self.index_files.is_empty()
            && !self.sync_dir
            && self.epoch_checkpoint.is_none()
            && self.snapshots.is_empty()
    }

    /// Does the work. Blocking. A deleted index file (retention got there first) is
    /// skipped; a failed fsync is returned (the data is in doubt). The epoch checkpoint
    /// and snapshots are derived data: failing to write them (out of space, say) only
    /// makes a later recovery scan longer, so it is logged and reported as
    /// `Ok(false)` (the caller marks the epochs to be written again), never fatal. No
    /// snapshot is written after a failed epoch checkpoint, keeping "a snapshot at S
    /// implies the checkpoint covers everything below S".
    fn run(&self, dir: &Path) -> io::Result<bool> {
        for path in &self.index_files {
            match File::open(path) {
                Ok(file) => file.sync_all()?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        if self.sync_dir {
            checkpoint::sync_dir(dir)?;
        }
        if let Some(epochs) = &self.epoch_checkpoint {
            if let Err(e) = epochs.write() {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot write the leader-epoch checkpoint; will retry");
                return Ok(false);
            }
        }
        for snapshot in &self.snapshots {
            if let Err(e) = snapshot.write() {
                tracing::warn!(dir = %dir.display(), offset = snapshot.offset(), error = %e, "cannot write a producer snapshot; recovery will scan further back");
            }
        }
        Ok(true)
    }
}

/// What a successful [`SyncHandle::sync`] made durable, for [`Log::mark_durable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Synced {
    /// Everything below this offset is durable.
    pub durable_offset: Offset,
    /// The recovery point now in the `recovery-point` file, if the sync wrote it.
    checkpointed_recovery_point: Option<i64>,
    /// The epoch checkpoint could not be written: write it again next time.
    epochs_unwritten: bool,
}

impl SyncHandle {
    /// fdatasyncs the captured `.log` files, does the roll work, then checkpoints the
    /// recovery point if due; returns what is now durable (everything below the log end
    /// at capture). Blocking; call without holding locks.
    ///
    /// # Errors
    /// The first failed fsync or write. The caller must then treat the log as failed
    /// (Linux may drop dirty pages and clear the error after a failed fsync, so a retry
    /// could "succeed" over lost data): see `Log::mark_failed`.
    pub fn sync(self) -> io::Result<Synced> {
        for file in &self.files {
            crate::fault::check(crate::fault::Op::Fsync, &self.dir)?;
            file.sync_data()?;
        }
        for path in &self.txn_indexes {
            transaction_index::sync_path(path)?;
        }
        let derived_written = self.roll_work.run(&self.dir)?;
        if let Some(slice) = &self.drop_cached {
            crate::log_segment::drop_cached(slice);
        }
        if let Some(rp) = self.recovery_point {
            checkpoint::write(&self.dir, RECOVERY_POINT_FILE, &[rp])?;
        }
        Ok(Synced {
            durable_offset: Offset(self.end_offset),
            checkpointed_recovery_point: self.recovery_point,
            epochs_unwritten: !derived_written,
        })
    }

    /// The log end offset at capture.
    pub fn end_offset(&self) -> Offset {
        Offset(self.end_offset)
    }

    /// `(position, len)` of what the sync will drop from the page cache.
    #[cfg(test)]
    pub(crate) fn drop_range(&self) -> Option<(u64, usize)> {
        self.drop_cached.as_ref().map(|s| (s.position, s.len))
    }
}

/// One partition's log in `<data>/<topic>-<partition>/`.
///
/// On disk: segments `<20-digit base>.log/.index/.timeindex` and the checkpoint files
/// `log-start-offset`, `recovery-point` and (only between a clean close and the next
/// open) `clean-shutdown`.
///
/// Invariants: `segments` is non-empty and sorted by base offset, each segment's offsets
/// are contiguous and end where the next begins; the last is the active segment;
/// `segments[0].base <= log_start_offset <= recovery_point`-or-not, and
/// `log_start_offset <= log_end_offset`, `recovery_point <= log_end_offset`.
///
/// Thread-safety: `Send + Sync` but not internally locked. The caller wraps it in a
/// mutex; reads take `&self`, appends `&mut self`. I/O done under that lock: appends
/// (page-cache writes), reads (page-cache `pread`s), and, rarely, fsyncs on segment roll
/// (indexes + directory) and checkpoint writes. Data fsyncs go through [`SyncHandle`].
pub struct Log {
    dir: PathBuf,
    config: LogConfig,
    segments: Vec<LogSegment>,
    log_start_offset: i64,
    /// Everything below is known fsync'd; recovery after a crash starts at its segment.
    recovery_point: i64,
    /// The value in the `recovery-point` file.
    checkpointed_recovery_point: i64,
    /// Idempotent producers' last batches, rebuilt in recovery.
    producer_state: ProducerStateManager,
    /// First offset of every leader epoch, rebuilt in recovery.
    leader_epochs: LeaderEpochFileCache,
    /// Durability work of rolls not yet handed to a [`SyncHandle`].
    roll_work: RollWork,
    /// Set when a write or fsync failed in a way that leaves the files in doubt: every
    /// later append, sync and truncation is refused (Kafka takes the log dir offline).
    failed: Option<String>,
}

/// Applies a stored marker to producer state; the aborted transaction it ends, if any,
/// as its transaction index entry (Kafka's `CompletedTxn` + `lastStableOffset`).
fn apply_marker(
    state: &mut ProducerStateManager,
    header: &RecordBatchHeader,
    marker: EndTransactionMarker,
) -> Option<AbortedTxn> {
    let aborted = marker.result == TxnResult::Abort;
    let completed = state.update_marker(header, marker.coordinator_epoch, aborted)?;
    aborted.then(|| AbortedTxn {
        producer_id: completed.producer_id,
        first_offset: completed.first_offset,
        last_offset: completed.last_offset,
        last_stable_offset: state.last_stable_offset_after(&completed),
    })
}

impl Log {
    /// fsyncs the `.txnindex` files written since their last fsync (recovery, close).
    fn sync_txn_indexes(&mut self) -> io::Result<()> {
        for segment in &mut self.segments {
            if let Some(path) = segment.txn_index_mut().take_unsynced() {
                transaction_index::sync_path(&path)?;
            }
        }
        Ok(())
    }

    fn clamp_config(&mut self) {
        self.config.segment_bytes = self.config.segment_bytes.clamp(1, SEGMENT_BYTES_MAX);
    }

    fn check_invariants(&self) {
        let (start, end, rp) = (self.log_start_offset, self.end(), self.recovery_point);
        assert!(!self.segments.is_empty(), "log has no segment");
        let first = self.segments.first().map_or(0, LogSegment::base_offset);
        assert!(
            first <= start,
            "first segment base {first} > log start {start}"
        );
        assert!(start <= end, "log start {start} > log end {end}");
        assert!(rp <= end, "recovery point {rp} > log end {end}");
    }

    /// Durably records the recovery point, unless the file already holds it (each write
    /// costs two fsyncs, and a broker opens and closes thousands of partitions).
    fn write_recovery_point(&mut self) -> io::Result<()> {
        if self.checkpointed_recovery_point == self.recovery_point {
            return Ok(());
        }
        checkpoint::write(&self.dir, RECOVERY_POINT_FILE, &[self.recovery_point])?;
        self.checkpointed_recovery_point = self.recovery_point;
        Ok(())
    }

    fn active(&self) -> &LogSegment {
        self.segments
            .last()
            .expect("a log always has an active segment")
    }

    fn active_mut(&mut self) -> &mut LogSegment {
        self.segments
            .last_mut()
            .expect("a log always has an active segment")
    }

    /// The partition directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Current settings.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Replaces the settings (topic config change); applies from the next append.
    pub fn set_config(&mut self, config: LogConfig) {
        self.config = config;
        self.clamp_config();
    }

    /// First offset still readable.
    pub fn log_start_offset(&self) -> Offset {
        Offset(self.log_start_offset)
    }

    /// Offset the next appended record will get.
    pub fn log_end_offset(&self) -> Offset {
        Offset(self.end())
    }

    /// Offset below which everything is known fsync'd.
    pub fn recovery_point(&self) -> Offset {
        Offset(self.recovery_point)
    }

    /// The log end offset as the log's own arithmetic uses it.
    fn end(&self) -> i64 {
        self.active().next_offset()
    }

    /// Number of segments (for metrics and tests).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Total bytes of all segments' `.log` files.
    pub fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|s| u64::from(s.size())).sum()
    }

    /// Appends already-validated batches (`validate_batches` succeeded), with the
    /// wall clock as the segment-age clock. See [`Log::append_at`].
    pub fn append(&mut self, batches: &[u8], leader_epoch: i32) -> Result<AppendOutcome, Error> {
        self.append_at(batches, leader_epoch, now_ms())
    }

    /// The error for a log that failed earlier, if it did.
    fn check_not_failed(&self) -> Result<(), Error> {
        match &self.failed {
            Some(reason) => Err(Error::LogFailed {
                dir: self.dir.clone(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Marks the log failed after a write or fsync error that leaves its files in doubt:
    /// from now on appends, syncs and truncations return [`Error::LogFailed`] (reads of
    /// what was durable before keep working). Kafka takes the whole log dir offline in
    /// this case; a restart runs recovery, which trusts only what validates on disk.
    pub fn mark_failed(&mut self, reason: String) {
        if self.failed.is_none() {
            tracing::error!(dir = %self.dir.display(), %reason, "log failed: no more appends until restart");
            self.failed = Some(reason);
        }
    }

    /// Why the log failed, if it did.
    pub fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    /// Checks idempotent producers' sequences for every batch of an append (Kafka's
    /// `analyzeAndValidateProducerState`): `Ok(Some(..))` when the append is exactly one
    /// batch already in the log (a retry), `Ok(None)` to append.
    fn check_producers(
        &self,
        headers: &[(usize, RecordBatchHeader)],
    ) -> Result<Option<BatchMetadata>, Error> {
        for (_, header) in headers {
            match self.producer_state.check(header) {
                SequenceCheck::Append => {}
                SequenceCheck::Duplicate(cached) if headers.len() == 1 => {
                    return Ok(Some(cached));
                }
                SequenceCheck::Duplicate(cached) => {
                    return Err(Error::OutOfOrderSequence {
                        producer_id: header.producer_id,
                        expected: cached.last_sequence.wrapping_add(1),
                        got: header.base_sequence,
                    });
                }
                SequenceCheck::OutOfOrder { expected, got } => {
                    return Err(Error::OutOfOrderSequence {
                        producer_id: header.producer_id,
                        expected,
                        got,
                    });
                }
                SequenceCheck::StaleEpoch { current, got } => {
                    return Err(Error::InvalidProducerEpoch {
                        producer_id: header.producer_id,
                        current,
                        got,
                    });
                }
                SequenceCheck::InvalidTxnState => {
                    return Err(Error::InvalidTxnState {
                        producer_id: header.producer_id,
                    });
                }
            }
        }
        Ok(None)
    }

    /// Appends batches, taking `now_ms` as the wall-clock time for `segment_ms` rolls.
    ///
    /// Assigns offsets from the log end: the stored batches get new base offsets and
    /// leader epochs (as [`assign_offsets`] would write them) while `batches` itself is
    /// left as received; rolls first if the active segment is non-empty and would
    /// exceed `segment_bytes`, has waited `segment_ms` (see [`LogConfig::segment_ms`]),
    /// has a full index, or would
    /// overflow u32 relative offsets; then one vectored positional write of the patched
    /// headers and the untouched rest (page cache, no fsync, no copy of the batches) and
    /// the index entries in memory. `batches` must be whole v2 batches (else `CorruptBatch`,
    /// nothing written); CRCs are not re-checked here.
    pub fn append_at(
        &mut self,
        batches: &[u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendOutcome, Error> {
        let headers: Vec<(usize, RecordBatchHeader)> = iter_headers(batches).collect();
        let covered = headers.last().map_or(0, |(p, h)| p + h.total_bytes());
        if headers.is_empty() || covered != batches.len() {
            return Err(Error::CorruptBatch {
                position: covered as u64,
                reason: "append input is not whole v2 batches (validate_batches first)".to_string(),
            });
        }
        self.append_headers(batches, headers, leader_epoch, now_ms)
    }

    /// Appends what the produce door's [`crate::log_validator::validate`] accepted, using
    /// the headers it parsed (nothing is parsed again), with the wall clock as the
    /// segment-age clock. Otherwise as [`Log::append_at`].
    pub fn append_validated(
        &mut self,
        validated: &ValidatedBatches,
        leader_epoch: i32,
    ) -> Result<AppendOutcome, Error> {
        let headers = validated
            .batches()
            .iter()
            .map(|b| (b.position, b.header))
            .collect();
        self.append_headers(validated.bytes(), headers, leader_epoch, now_ms())
    }

    /// Appends a transaction marker for `producer_id` (Kafka's `appendAsLeader` with
    /// origin COORDINATOR of an `EndTransactionMarker` batch), with the wall clock as its
    /// timestamp: ends the producer's transaction at this partition. Returns its offsets.
    ///
    /// # Errors
    /// `InvalidProducerEpoch` for an epoch older than the producer's;
    /// `TransactionCoordinatorFenced` for a coordinator epoch older than the last marker's;
    /// as [`Log::append_at`] otherwise.
    pub fn append_txn_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTransactionMarker,
        leader_epoch: i32,
    ) -> Result<AppendInfo, Error> {
        match self.producer_state.check_marker(
            producer_id,
            producer_epoch,
            marker.coordinator_epoch,
        ) {
            MarkerCheck::Append => {}
            MarkerCheck::StaleEpoch { current, got } => {
                return Err(Error::InvalidProducerEpoch {
                    producer_id,
                    current,
                    got,
                })
            }
            MarkerCheck::CoordinatorFenced { current, got } => {
                return Err(Error::TransactionCoordinatorFenced {
                    producer_id,
                    current,
                    got,
                })
            }
        }
        let now = now_ms();
        let batch = build_marker_batch(producer_id, producer_epoch, marker, now);
        match self.append_at(&batch, leader_epoch, now)? {
            AppendOutcome::Appended(info) => Ok(info),
            AppendOutcome::Duplicate(_) => unreachable!("markers carry no sequence"),
        }
    }

    /// The append itself, given each batch's position and header in `batches`.
    fn append_headers(
        &mut self,
        batches: &[u8],
        mut headers: Vec<(usize, RecordBatchHeader)>,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendOutcome, Error> {
        self.check_not_failed()?;
        if let Some((position, _)) = headers.iter().find(|(_, h)| h.last_offset_delta < 0) {
            return Err(Error::CorruptBatch {
                position: *position as u64,
                reason: "negative last offset delta".to_string(),
            });
        }
        let offsets: i64 = headers
            .iter()
            .map(|(_, h)| h.record_count_by_offsets())
            .sum();
        if batches.len() as u64 > SEGMENT_BYTES_MAX || offsets > i64::from(u32::MAX) {
            return Err(Error::AppendTooLarge {
                bytes: batches.len(),
            });
        }
        if let Some(duplicate) = self.check_producers(&headers)? {
            return Ok(AppendOutcome::Duplicate(duplicate));
        }
        let incoming_max_timestamp =
            self.roll_for_append(&headers, batches.len() as u64, offsets, now_ms)?;
        let first_offset = self.end();
        let mut next = first_offset;
        for (_, header) in &mut headers {
            header.base_offset = next;
            header.partition_leader_epoch = leader_epoch;
            next = header.last_offset() + 1;
        }
        let interval = self.config.index_interval_bytes;
        let preallocate_max = self.config.preallocate_bytes_max;
        let active = self.active_mut();
        active.preallocate(batches.len(), preallocate_max);
        if let Err(e) = active.append(batches, &headers, interval, now_ms) {
            return Err(self.write_failed(e));
        }
        for (position, header) in &headers {
            if header.is_control() && header.producer_id >= 0 {
                self.append_marker_state(batches, *position, header)?;
            } else {
                self.producer_state.update(header);
            }
        }
        self.leader_epochs
            .assign(LeaderEpoch(leader_epoch), first_offset);
        assert!(self.end() == next, "log end {} != {next}", self.end());
        Ok(AppendOutcome::Appended(AppendInfo {
            first_offset: Offset(first_offset),
            last_offset: Offset(next - 1),
            max_timestamp: incoming_max_timestamp,
            log_end_offset: Offset(next),
        }))
    }

    /// Applies an appended marker (at `position` of `batches`) to producer state and, for
    /// an abort, appends its entry to the active segment's transaction index. A failure
    /// to write the index fails the log: a restart rebuilds the index from the markers.
    fn append_marker_state(
        &mut self,
        batches: &[u8],
        position: usize,
        header: &RecordBatchHeader,
    ) -> Result<(), Error> {
        let bytes = batches.get(position..).unwrap_or_default();
        let marker = match parse_marker(header, bytes) {
            Ok(Some(marker)) => marker,
            Ok(None) => return Ok(()),
            Err(reason) => {
                let reason = format!("appended marker unreadable: {reason}");
                self.mark_failed(reason.clone());
                return Err(Error::CorruptBatch {
                    position: position as u64,
                    reason,
                });
            }
        };
        if let Some(txn) = apply_marker(&mut self.producer_state, header, marker) {
            if let Err(e) = self.active_mut().txn_index_mut().append(txn) {
                self.mark_failed(format!("cannot append to the transaction index: {e}"));
                return Err(Error::Io(e));
            }
        }
        Ok(())
    }

    /// Turns a failed append write into the caller's error. The segment already cut its
    /// file back to where the append began; if that worked, the log is intact and stays
    /// usable (out of space is usually temporary: the next append after space is freed
    /// succeeds). If the file could not be cut back, the log fails.
    fn write_failed(&mut self, e: crate::log_segment::AppendError) -> Error {
        match e {
            crate::log_segment::AppendError::RolledBack(e) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, "append write failed; nothing was appended");
                Error::Io(e)
            }
            crate::log_segment::AppendError::InDoubt { write, cut } => {
                self.mark_failed(format!(
                    "append write failed ({write}) and cutting the segment back failed ({cut})"
                ));
                Error::Io(write)
            }
        }
    }

    /// Rolls first when an append of `bytes` in `offsets` offsets (batches `headers`) is due
    /// one; returns the append's largest timestamp (-1 when no batch has one).
    fn roll_for_append(
        &mut self,
        headers: &[(usize, RecordBatchHeader)],
        bytes: u64,
        offsets: i64,
        now_ms: i64,
    ) -> Result<i64, Error> {
        let max_timestamp = headers
            .iter()
            .map(|(_, h)| h.max_timestamp)
            .max()
            .unwrap_or(-1);
        self.active_mut().load_rolling_timestamp();
        if self.should_roll(bytes, offsets, now_ms, max_timestamp) {
            self.roll()?;
        }
        Ok(max_timestamp)
    }

    /// Kafka's `LogSegment.shouldRoll` for an append of `bytes` in `offsets` offsets whose
    /// batches' largest timestamp is `max_timestamp`.
    fn should_roll(&self, bytes: u64, offsets: i64, now_ms: i64, max_timestamp: i64) -> bool {
        let active = self.active();
        if active.is_empty() {
            return false;
        }
        let config = &self.config;
        let waited = active.waited_for_roll_ms(now_ms, max_timestamp);
        u64::from(active.size()) + bytes > config.segment_bytes
            || u64::try_from(waited).unwrap_or(0) > config.segment_ms
            || active.index_full(config.segment_index_bytes)
            || active.next_offset() + offsets - 1 - active.base_offset() > i64::from(u32::MAX)
    }

    /// Closes the active segment (final time index entry, indexes written) and starts a
    /// new one at the log end. The fsyncs that make the roll durable (the old segment's
    /// indexes, the directory entry of the new one) and the producer snapshot at the new
    /// base are queued as [`RollWork`] for the next [`SyncHandle`], so none runs here,
    /// under the caller's lock; the high watermark cannot pass data in the new segment
    /// before that sync has done them.
    ///
    /// A failure (out of space for the index files, say) leaves the active segment
    /// active and the log usable: the new segment is created first and removed again if
    /// the old one cannot be closed, so the next append simply tries the roll again.
    fn roll(&mut self) -> Result<(), Error> {
        let base = self.end();
        let segment = LogSegment::create(&self.dir, base)?;
        let active = self.active_mut();
        let closed = active.on_inactive().and_then(|()| {
            let mut index_files = active.index_paths().to_vec();
            index_files.extend(active.txn_index_mut().take_unsynced());
            active.evict_indexes().map(|()| index_files)
        });
        let index_files = match closed {
            Ok(files) => files,
            Err(e) => {
                if let Err(remove) = segment.delete_files() {
                    self.mark_failed(format!(
                        "roll failed ({e}) and the new segment could not be removed ({remove})"
                    ));
                }
                return Err(e.into());
            }
        };
        tracing::info!(dir = %self.dir.display(), base_offset = base, "rolled new segment");
        self.segments.push(segment);
        self.roll_work.index_files.extend(index_files);
        self.roll_work.sync_dir = true;
        if let Some(epochs) = self.leader_epochs.take_checkpoint() {
            self.roll_work.epoch_checkpoint = Some(epochs);
        }
        let snapshot = self.producer_state.take_snapshot(base);
        self.roll_work.snapshots.push(snapshot);
        Ok(())
    }

    /// Whether a roll left durability work for the next sync (the caller schedules one
    /// even when its flush policy would not).
    pub fn has_roll_work(&self) -> bool {
        !self.roll_work.is_empty()
    }

    fn out_of_range(&self, requested: i64) -> Error {
        Error::OffsetOutOfRange {
            requested,
            log_start_offset: self.log_start_offset,
            log_end_offset: self.end(),
        }
    }

    /// Index entries held in memory by inactive segments (0: they are read from files).
    #[cfg(test)]
    pub(crate) fn inactive_resident_index_entries(&self) -> usize {
        self.segments.split_last().map_or(0, |(_, inactive)| {
            inactive
                .iter()
                .map(LogSegment::resident_index_entries)
                .sum()
        })
    }

    /// Index of the segment whose range holds `offset` (the last with base <= offset).
    fn segment_index_for(&self, offset: i64) -> usize {
        self.segments
            .partition_point(|s| s.base_offset() <= offset)
            .saturating_sub(1)
    }

    /// The batch holding `offset` (or the first after it): segment index, position, header.
    fn locate(&self, offset: i64) -> Result<Option<(usize, u32, RecordBatchHeader)>, Error> {
        for i in self.segment_index_for(offset)..self.segments.len() {
            let segment = self.segments.get(i).expect("i < len");
            if let Some((position, header)) = segment.find_batch(offset)? {
                return Ok(Some((i, position, header)));
            }
        }
        Ok(None)
    }

    fn read_batch(
        &self,
        segment: usize,
        position: u32,
        header: &RecordBatchHeader,
    ) -> Result<Bytes, Error> {
        let mut out = Vec::new();
        self.segments
            .get(segment)
            .expect("segment index from locate")
            .read_into(&mut out, position, header.total_bytes())?;
        Ok(Bytes::from(out))
    }

    /// Reads whole batches starting with the batch that holds `offset`, into memory.
    ///
    /// Same selection as [`Log::read_slices`], whose ranges it then `pread`s into one
    /// buffer: for callers that decode what they read (group coordinator replay, tests).
    pub fn read(
        &self,
        offset: Offset,
        max_bytes: usize,
        max_offset: Offset,
        min_one_batch: bool,
    ) -> Result<ReadResult, Error> {
        let read = self.read_slices(offset, max_bytes, max_offset, min_one_batch)?;
        let mut out = Vec::with_capacity(read.bytes);
        for slice in &read.slices {
            slice.read_into(&mut out)?;
        }
        Ok(ReadResult {
            records: Bytes::from(out),
            log_start_offset: read.log_start_offset,
            log_end_offset: read.log_end_offset,
        })
    }

    /// Selects whole batches starting with the batch that holds `offset`, as ranges of
    /// segment files (one per segment touched), without reading them.
    ///
    /// Never includes a batch whose last offset is `>= max_offset` (the high watermark,
    /// exclusive); stops before exceeding `max_bytes`, except that with `min_one_batch`
    /// a first eligible batch larger than `max_bytes` is returned whole. `offset ==
    /// log_end_offset` or `>= max_offset` gives no ranges; `offset` below the log start or
    /// above the log end is `OffsetOutOfRange`. Cost: an index lookup and a short header
    /// scan at each end of each segment touched; the data itself is not read, so the caller
    /// can send it with `sendfile` (the ranges hold the files open: a segment deleted by
    /// retention meanwhile stays readable).
    pub fn read_slices(
        &self,
        offset: Offset,
        max_bytes: usize,
        max_offset: Offset,
        min_one_batch: bool,
    ) -> Result<SliceRead, Error> {
        let (offset, max_offset) = (offset.get(), max_offset.get());
        let log_end = self.end();
        if offset < self.log_start_offset || offset > log_end {
            return Err(self.out_of_range(offset));
        }
        let mut result = SliceRead {
            slices: Vec::new(),
            bytes: 0,
            log_start_offset: Offset(self.log_start_offset),
            log_end_offset: Offset(log_end),
            next_offset: None,
        };
        if offset == log_end || offset >= max_offset {
            return Ok(result);
        }
        let Some((first_segment, first_position, first)) = self.locate(offset)? else {
            return Ok(result);
        };
        if first.last_offset() >= max_offset {
            return Ok(result);
        }
        let segments = self.segments.get(first_segment..).unwrap_or_default();
        if first.total_bytes() > max_bytes {
            if min_one_batch {
                if let Some(segment) = segments.first() {
                    result
                        .slices
                        .push(segment.slice(first_position, first.total_bytes()));
                    result.bytes = first.total_bytes();
                    result.next_offset = Some(Offset(first.last_offset() + 1));
                }
            }
            return Ok(result);
        }
        let mut position = first_position;
        let mut stopped_early = false;
        for segment in segments {
            let (end, last_offset) =
                segment.readable_end(position, max_bytes - result.bytes, max_offset)?;
            if end > position {
                let len = (end - position) as usize;
                result.slices.push(segment.slice(position, len));
                result.bytes += len;
                result.next_offset = last_offset.map(|last| Offset(last + 1));
            }
            if end < segment.size() {
                stopped_early = true;
                break;
            }
            position = 0;
        }
        if !stopped_early && result.bytes > 0 {
            // Every segment read to its end: the batches reach the log end.
            result.next_offset = Some(Offset(log_end));
        }
        Ok(result)
    }

    /// The first batch (in offset order, at or above the log start) whose
    /// `max_timestamp >= timestamp_ms` and whose last offset is `< max_offset`; `None` if
    /// there is none.
    /// Skips segments by their largest timestamp and jumps within a segment with the
    /// time index. The caller decodes the batch to find the exact record.
    pub fn batch_for_timestamp(
        &self,
        timestamp_ms: i64,
        max_offset: Offset,
    ) -> Result<Option<Bytes>, Error> {
        let max_offset = max_offset.get();
        for (i, segment) in self.segments.iter().enumerate() {
            if segment.base_offset() >= max_offset {
                break;
            }
            if segment.is_empty()
                || segment.next_offset() <= self.log_start_offset
                || segment.max_timestamp().0 < timestamp_ms
            {
                continue;
            }
            let mut found = None;
            let mut past_max = false;
            segment.scan_headers(
                segment.timestamp_scan_start(timestamp_ms),
                |position, header| {
                    if header.last_offset() >= max_offset {
                        past_max = true;
                        return ControlFlow::Break(());
                    }
                    if header.last_offset() >= self.log_start_offset
                        && header.max_timestamp >= timestamp_ms
                    {
                        found = Some((position, *header));
                        return ControlFlow::Break(());
                    }
                    ControlFlow::Continue(())
                },
            )?;
            if let Some((position, header)) = found {
                return self.read_batch(i, position, &header).map(Some);
            }
            if past_max {
                break;
            }
        }
        Ok(None)
    }

    /// The batch with the largest `max_timestamp` among batches at or above the log
    /// start whose last offset is `< max_offset` (the earliest on ties); `None` if there
    /// is none. Uses each segment's recorded maximum where the whole segment is
    /// eligible, scans headers otherwise. Not a hot path.
    pub fn batch_with_max_timestamp(&self, max_offset: Offset) -> Result<Option<Bytes>, Error> {
        let max_offset = max_offset.get();
        // (timestamp, last offset of the batch holding it)
        let mut best: Option<(i64, i64)> = None;
        let mut consider = |timestamp: i64, offset: i64| {
            if best.is_none_or(|(ts, _)| timestamp > ts) {
                best = Some((timestamp, offset));
            }
        };
        for segment in &self.segments {
            if segment.base_offset() >= max_offset {
                break;
            }
            if segment.is_empty() || segment.next_offset() <= self.log_start_offset {
                continue;
            }
            let whole = segment.next_offset() <= max_offset
                && segment.base_offset() >= self.log_start_offset;
            if let (true, (timestamp, Some(offset))) = (whole, segment.max_timestamp()) {
                consider(timestamp, offset);
                continue;
            }
            segment.scan_headers(0, |_, header| {
                if header.last_offset() >= max_offset {
                    return ControlFlow::Break(());
                }
                if header.last_offset() >= self.log_start_offset {
                    consider(header.max_timestamp, header.last_offset());
                }
                ControlFlow::Continue(())
            })?;
        }
        let Some((_, offset)) = best else {
            return Ok(None);
        };
        match self.locate(offset)? {
            Some((segment, position, header)) => {
                self.read_batch(segment, position, &header).map(Some)
            }
            None => Ok(None),
        }
    }

    /// Captures what must be fsync'd to make everything appended so far durable: the
    /// `.log` of every segment not wholly below the recovery point (usually just the
    /// active one), as shared handles, and the log end at capture; and the range of the
    /// active segment that the sync will then drop from the page cache (all but its last
    /// `page_cache_tail_bytes`). Cheap (no I/O).
    ///
    /// # Errors
    /// [`Error::LogFailed`] once the log failed: nothing is synced any more, so the high
    /// watermark stays where the last successful sync left it.
    pub fn sync_handle(&mut self) -> Result<SyncHandle, Error> {
        self.check_not_failed()?;
        let tail = self.config.page_cache_tail_bytes;
        let drop_cached = (tail > 0)
            .then(|| self.active_mut().trim_page_cache(tail))
            .flatten();
        let files = self.unsynced_log_files();
        let txn_indexes = self
            .active_mut()
            .txn_index_mut()
            .take_unsynced()
            .into_iter()
            .collect();
        let end_offset = self.end();
        // The recovery-point file is rewritten only when the recovery point enters a
        // newer segment, bounding crash recovery to about one segment.
        let checkpointed = self.checkpointed_recovery_point;
        let crossed = self
            .segments
            .iter()
            .any(|s| checkpointed < s.base_offset() && s.base_offset() <= end_offset);
        Ok(SyncHandle {
            files,
            end_offset,
            drop_cached,
            roll_work: std::mem::take(&mut self.roll_work),
            recovery_point: crossed.then_some(end_offset),
            txn_indexes,
            dir: self.dir.clone(),
        })
    }

    /// The `.log` files of the segments with appends above the recovery point, newest
    /// first: what a sync must fdatasync.
    fn unsynced_log_files(&self) -> Vec<Arc<File>> {
        let mut files = Vec::new();
        for segment in self.segments.iter().rev() {
            if segment.next_offset() <= self.recovery_point {
                break;
            }
            segment.sync_files(&mut files);
        }
        files
    }

    /// The `.log` files with appends above the recovery point, for a [`WritebackHandle`]
    /// (the same files [`Log::sync_handle`] would fsync; nothing is captured or changed).
    #[must_use]
    pub fn writeback_handle(&self) -> WritebackHandle {
        WritebackHandle {
            files: self.unsynced_log_files(),
        }
    }

    /// Records what a [`SyncHandle::sync`] made durable. The durable offset is clamped
    /// to the log end (a truncation may have happened since capture).
    pub fn mark_durable(&mut self, synced: Synced) {
        if synced.epochs_unwritten {
            self.leader_epochs.mark_dirty();
        }
        if let Some(rp) = synced.checkpointed_recovery_point {
            self.checkpointed_recovery_point = rp;
        }
        let offset = synced.durable_offset.get().min(self.end());
        if offset > self.recovery_point {
            self.recovery_point = offset;
        }
    }

    /// Forgets idempotent producers silent for `expiration_ms` (Kafka's
    /// `producer.id.expiration.ms`); returns how many.
    pub fn remove_expired_producers(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        self.producer_state.remove_expired(now_ms, expiration_ms)
    }

    /// The leader-epoch cache (first offset of every epoch).
    pub fn leader_epochs(&self) -> &LeaderEpochFileCache {
        &self.leader_epochs
    }

    /// Idempotent producers tracked (for tests and metrics).
    pub fn producer_count(&self) -> usize {
        self.producer_state.producer_count()
    }

    /// Every producer the log tracks, for DescribeProducers.
    pub fn active_producers(&self) -> Vec<ActiveProducer> {
        self.producer_state.active_producers()
    }

    /// The first offset of the oldest transaction not yet stable given `high_watermark`
    /// (open, or its marker not yet below the high watermark), never below the log start
    /// (Kafka's `firstUnstableOffset`); `None` when there is none. Forgets the completed
    /// transactions the high watermark has passed.
    pub fn first_unstable_offset(&mut self, high_watermark: Offset) -> Option<Offset> {
        self.producer_state.on_high_watermark(high_watermark.get());
        self.producer_state
            .first_unstable_offset()
            .map(|first| Offset(first.max(self.log_start_offset)))
    }

    /// The first unstable offset as [`Log::first_unstable_offset`] last left it (no
    /// high watermark update).
    pub fn first_unstable(&self) -> Option<i64> {
        self.producer_state
            .first_unstable_offset()
            .map(|first| first.max(self.log_start_offset))
    }

    /// The aborted transactions overlapping `[start, upper)` — marker at or after
    /// `start`, first offset below `upper` — in marker order (Kafka's
    /// `collectAbortedTransactions`): what a read_committed fetch of that range returns so
    /// its client drops those producers' records. Reads the in-memory transaction indexes
    /// from the segment holding `start` on, stopping at the first entry whose last stable
    /// offset reaches `upper`.
    pub fn collect_aborted_transactions(&self, start: Offset, upper: Offset) -> Vec<AbortedTxn> {
        let (start, upper) = (start.get(), upper.get());
        let mut out = Vec::new();
        for segment in self
            .segments
            .get(self.segment_index_for(start)..)
            .unwrap_or_default()
        {
            if segment.txn_index().collect(start, upper, &mut out) {
                break;
            }
        }
        out
    }

    /// Removes everything at or above `offset` (replication truncation). The whole batch
    /// holding `offset` goes, so the new log end is that batch's base offset (`<=
    /// offset`). If that would fall below the log start, the log is emptied and
    /// restarted at `offset` (Kafka's truncate-fully-and-start-at). `offset >=` log end
    /// is a no-op. Rebuilds the cut segment's indexes (O(segment) header reads).
    pub fn truncate_to(&mut self, offset: Offset) -> Result<(), Error> {
        let offset = offset.get();
        self.check_not_failed()?;
        if offset >= self.end() {
            // An epoch this replica started as leader without appending anything ends
            // here; as a follower it must not report it as its last fetched epoch
            // (Kafka's truncateTo does the same).
            self.leader_epochs.truncate_from_end(self.end());
            return Ok(());
        }
        let located = if offset < self.log_start_offset {
            None
        } else {
            self.locate(offset)?
        };
        match located {
            Some((i, position, header)) if header.base_offset >= self.log_start_offset => {
                for segment in self.segments.split_off(i + 1) {
                    tracing::info!(segment = %segment.log_path().display(), "deleting segment (truncation)");
                    segment.delete_files()?;
                }
                let interval = self.config.index_interval_bytes;
                self.active_mut().truncate_at(position, interval)?;
                tracing::info!(dir = %self.dir.display(), offset, log_end = self.end(), "truncated log");
            }
            _ => {
                for segment in std::mem::take(&mut self.segments) {
                    segment.delete_files()?;
                }
                self.segments.push(LogSegment::create(&self.dir, offset)?);
                checkpoint::sync_dir(&self.dir)?;
                self.log_start_offset = offset;
                checkpoint::write(&self.dir, LOG_START_OFFSET_FILE, &[offset])?;
                tracing::info!(dir = %self.dir.display(), offset, "truncated log fully");
            }
        }
        self.recovery_point = self.recovery_point.min(self.end());
        if self.checkpointed_recovery_point > self.recovery_point {
            // Recovery must not trust data that will be rewritten above this point.
            self.write_recovery_point()?;
        }
        // Producer state described batches that are gone: reload the newest snapshot
        // still valid and replay the headers after it (Kafka's truncateAndReload).
        let log_end = self.end();
        self.leader_epochs.truncate_from_end(log_end);
        self.leader_epochs
            .truncate_from_start(self.log_start_offset);
        self.roll_work.snapshots.retain(|s| s.offset() <= log_end);
        self.producer_state.remove_snapshots_from(log_end + 1)?;
        self.load_producer_state(false)?;
        self.check_invariants();
        Ok(())
    }

    /// fsyncs everything and writes the checkpoints (log start, recovery point = log
    /// end, then the clean-shutdown marker), so the next open skips the CRC scan.
    /// A failed log writes no clean-shutdown marker: its next open runs recovery.
    pub fn close(mut self) -> Result<(), Error> {
        self.check_not_failed()?;
        let active = self.active_mut();
        active.on_inactive()?;
        active.sync_indexes()?;
        if !std::mem::take(&mut self.roll_work).run(&self.dir)? {
            self.leader_epochs.mark_dirty();
        }
        for file in self.unsynced_log_files() {
            file.sync_data()?;
        }
        self.sync_txn_indexes()?;
        let log_end = self.end();
        self.recovery_point = log_end;
        // The producer state at the log end, so the next open replays nothing; only when
        // there is state to keep (or an older snapshot to supersede), since an open after
        // a clean shutdown with no snapshot at all starts with empty state.
        if let Some(epochs) = self.leader_epochs.take_checkpoint() {
            epochs.write()?;
        }
        let snapshot_at =
            if !self.producer_state.is_empty() || self.producer_state.latest_snapshot().is_some() {
                self.producer_state.take_snapshot(log_end).write()?;
                log_end
            } else {
                -1
            };
        checkpoint::write(&self.dir, LOG_START_OFFSET_FILE, &[self.log_start_offset])?;
        self.write_recovery_point()?;
        checkpoint::write(
            &self.dir,
            CLEAN_SHUTDOWN_FILE,
            &[self.log_start_offset, log_end, snapshot_at],
        )?;
        tracing::debug!(dir = %self.dir.display(), log_end, "closed log");
        Ok(())
    }

    /// Removes the partition directory and all its files.
    pub fn delete(self) -> Result<(), Error> {
        let dir = self.dir.clone();
        drop(self);
        fs::remove_dir_all(&dir)?;
        Ok(())
    }
}

mod retention;
pub use retention::SegmentDeletion;

#[cfg(test)]
mod tests;
