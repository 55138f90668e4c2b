//! `LogSegment`: one `.log` file of back-to-back batches plus its two sparse indexes.
//! Segments exist so retention can delete old data by unlinking whole files and so an
//! index lookup only has to cover one bounded file (u32 positions and relative offsets).

use std::fs::{self, File, OpenOptions};
use std::io::{self, IoSlice};
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use crate::error::Error;
use crate::log::FileSlice;
use crate::offset_index::OffsetIndex;
use crate::record_batch::{
    compute_crc, offset_patch, RecordBatchHeader, BATCH_HEADER_BYTES, BATCH_LENGTH_MIN,
    LOG_OVERHEAD_BYTES, OFFSET_PATCH_BYTES,
};
use crate::time_index::TimeIndex;
use crate::transaction_index::TransactionIndex;

/// Largest segment file, as Kafka caps `segment.bytes`: positions fit a signed i32.
pub(crate) const SEGMENT_BYTES_MAX: u64 = i32::MAX as u64;
/// Read size when scanning headers for a lookup or a read's far end: a scan starts at an
/// index entry and rarely goes further than one index interval (4 KiB by default).
const SCAN_CHUNK_BYTES: usize = 8 * 1024;
/// Read size when validating whole batches during recovery.
const RECOVERY_CHUNK_BYTES: usize = 1024 * 1024;
/// Kafka's "no timestamp".
pub(crate) const NO_TIMESTAMP: i64 = -1;

/// `<base offset, 20 digits>.<extension>`, Kafka's file naming.
pub(crate) fn file_name(base_offset: i64, extension: &str) -> String {
    format!("{base_offset:020}.{extension}")
}

/// Reads a file through a reusable buffer so header scans do one `pread` per chunk
/// rather than one per batch.
pub(crate) struct ChunkReader<'a> {
    file: &'a File,
    limit: u64,
    chunk_bytes: usize,
    start: u64,
    buf: Vec<u8>,
}

impl<'a> ChunkReader<'a> {
    pub(crate) fn new(file: &'a File, limit: u64, chunk_bytes: usize) -> Self {
        Self {
            file,
            limit,
            chunk_bytes,
            start: 0,
            buf: Vec::new(),
        }
    }

    /// `len` bytes at `position`, or `None` if they extend past `limit`.
    pub(crate) fn get(&mut self, position: u64, len: usize) -> io::Result<Option<&[u8]>> {
        let end = position + len as u64;
        if end > self.limit {
            return Ok(None);
        }
        let buffered_end = self.start + self.buf.len() as u64;
        if position < self.start || end > buffered_end {
            let want = (len.max(self.chunk_bytes) as u64).min(self.limit - position);
            self.buf.resize(want as usize, 0);
            self.file.read_exact_at(&mut self.buf, position)?;
            self.start = position;
        }
        let from = (position - self.start) as usize;
        Ok(self.buf.get(from..from + len))
    }
}

/// One segment: `<base>.log`, `<base>.index`, `<base>.timeindex`.
///
/// Invariants: `size` is the number of valid bytes of the `.log` (batches back to back
/// from position 0, the first with base offset `base_offset`, each next one starting at
/// the previous one's last offset + 1, except in a segment rewritten by log compaction,
/// where batches may start later and the first may start after `base_offset`);
/// `next_offset` is the offset after its last batch
/// (`base_offset` when empty); every index entry points at a batch boundary below
/// `size`. Not thread-safe by itself: owned by a `Log`, which is behind the caller's
/// lock; only the `Arc<File>`s escape, for fsync.
pub(crate) struct LogSegment {
    base_offset: i64,
    log_path: PathBuf,
    log_file: Arc<File>,
    size: u32,
    next_offset: i64,
    offset_index: OffsetIndex,
    time_index: TimeIndex,
    /// Bytes appended since the last offset index entry (Kafka's cadence counter).
    bytes_since_last_index_entry: u32,
    /// Largest batch `max_timestamp` in the segment, `NO_TIMESTAMP` if none.
    max_timestamp: i64,
    /// Last offset of the first batch that reached `max_timestamp`.
    offset_of_max_timestamp: Option<i64>,
    /// Wall-clock time of the first append, for `segment_ms` rolls of a segment whose first
    /// batch has no timestamp, and for rolls of an idle segment.
    first_append_ms: Option<i64>,
    /// The first batch's max timestamp (when it has one), from which an append's
    /// `segment_ms` roll is counted (Kafka's `rollingBasedTimestamp`); `None` also while not
    /// yet read back from the file after a restart ([`Self::rolling_timestamp_known`]).
    rolling_timestamp: Option<i64>,
    /// Whether `rolling_timestamp` is known (always, but for a reopened non-empty segment
    /// until [`Self::load_rolling_timestamp`]).
    rolling_timestamp_known: bool,
    /// End of the disk space reserved for the `.log` (>= `size` while reserving; 0 when
    /// nothing is reserved past `size` or the file system cannot reserve).
    preallocated: u64,
    /// The file system refused `fallocate`: stop asking.
    preallocate_unsupported: bool,
    /// Pages of the `.log` below this position have been dropped from the page cache.
    uncached_below: u64,
    /// Aborted transactions whose marker is in this segment (`.txnindex`).
    txn_index: TransactionIndex,
}

/// A failed append write, and whether the segment could be cut back to where it began.
#[derive(Debug)]
pub(crate) enum AppendError {
    /// Nothing of the append remains: the segment is as it was before.
    RolledBack(io::Error),
    /// Part of the append may remain in the file: the segment is in doubt.
    InDoubt {
        /// Why the write failed.
        write: io::Error,
        /// Why cutting the file back failed.
        cut: io::Error,
    },
}

/// Least bytes dropped from the page cache at once (fewer, larger `fadvise` calls).
const DROP_CACHED_BYTES_MIN: u64 = 1 << 20;

/// Drops `slice`'s pages from the page cache (`POSIX_FADV_DONTNEED`; only clean pages go,
/// so call it after the fsync that covers them). Failure only costs memory: logged.
pub(crate) fn drop_cached(slice: &FileSlice) {
    let Some(len) = std::num::NonZeroU64::new(slice.len as u64) else {
        return;
    };
    if let Err(e) = rustix::fs::fadvise(
        &*slice.file,
        slice.position,
        Some(len),
        rustix::fs::Advice::DontNeed,
    ) {
        tracing::debug!(error = %e, "fadvise(DONTNEED) failed");
        return;
    }
    metrics::counter!("logbook_page_cache_drops_total").increment(1);
    metrics::counter!("logbook_page_cache_dropped_bytes_total").increment(len.get());
}

/// Least disk space reserved at a time ahead of the active segment's end.
const PREALLOCATE_BYTES_MIN: u64 = 64 * 1024;
/// Reserve this many appends' worth ahead (bounded by the log's `preallocate_bytes_max`).
const PREALLOCATE_APPENDS_AHEAD: u64 = 16;

impl LogSegment {
    /// Creates an empty segment at `base_offset`, replacing any stale files of that name.
    pub(crate) fn create(dir: &Path, base_offset: i64) -> io::Result<Self> {
        Self::create_with_suffix(dir, base_offset, "")
    }

    /// Opens an existing segment without reading its `.log`. `next_offset` is unknown
    /// until the caller sets it ([`Self::set_next_offset`]), scans the tail
    /// ([`Self::scan_tail`]) or recovers ([`Self::recover`]). Returns whether both index
    /// files existed with whole entries (not yet sanity-checked).
    pub(crate) fn open(dir: &Path, base_offset: i64) -> io::Result<(Self, bool)> {
        let log_path = dir.join(file_name(base_offset, "log"));
        let log_file = OpenOptions::new().read(true).write(true).open(&log_path)?;
        let metadata = log_file.metadata()?;
        let size = u32::try_from(metadata.len().min(SEGMENT_BYTES_MAX))
            .expect("SEGMENT_BYTES_MAX fits u32");
        let created = metadata.created().or_else(|_| metadata.modified()).ok();
        let first_append_ms = created
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let (offset_index, offset_ok) =
            OffsetIndex::open(&dir.join(file_name(base_offset, "index")), base_offset)?;
        let (time_index, time_ok) =
            TimeIndex::open(&dir.join(file_name(base_offset, "timeindex")), base_offset)?;
        let (max_timestamp, offset_of_max_timestamp) = match time_index.last_entry() {
            Some((ts, offset)) => (ts, Some(offset)),
            None => (NO_TIMESTAMP, None),
        };
        let txn_index = TransactionIndex::open(dir, base_offset)?;
        let segment = Self {
            base_offset,
            log_path,
            log_file: Arc::new(log_file),
            size,
            next_offset: base_offset,
            offset_index,
            time_index,
            bytes_since_last_index_entry: 0,
            max_timestamp,
            offset_of_max_timestamp,
            first_append_ms: (size > 0).then_some(first_append_ms).flatten(),
            // Read on first need (an append), not here: a restart opens every segment.
            rolling_timestamp: None,
            rolling_timestamp_known: size == 0,
            preallocated: 0,
            preallocate_unsupported: false,
            uncached_below: 0,
            txn_index,
        };
        Ok((
            segment,
            offset_ok && time_ok && metadata.len() <= SEGMENT_BYTES_MAX,
        ))
    }

    pub(crate) fn base_offset(&self) -> i64 {
        self.base_offset
    }

    /// Valid bytes in the `.log`.
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// Offset after the segment's last batch (`base_offset` when empty).
    pub(crate) fn next_offset(&self) -> i64 {
        self.next_offset
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Largest batch `max_timestamp` and the last offset of the batch that has it.
    pub(crate) fn max_timestamp(&self) -> (i64, Option<i64>) {
        (self.max_timestamp, self.offset_of_max_timestamp)
    }

    pub(crate) fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// For a non-last segment: its end is the next segment's base offset.
    pub(crate) fn set_next_offset(&mut self, next_offset: i64) {
        assert!(
            self.base_offset <= next_offset,
            "segment base {} > next offset {next_offset}",
            self.base_offset
        );
        self.next_offset = next_offset;
    }

    /// Cheap index checks against the log size and `next_offset` (when known).
    pub(crate) fn sanity_check(&self, next_offset: Option<i64>) -> Result<(), String> {
        self.offset_index
            .sanity_check(self.size, next_offset)
            .map_err(|e| format!("offset index: {e}"))?;
        self.time_index
            .sanity_check(next_offset)
            .map_err(|e| format!("time index: {e}"))
    }

    /// True once either index holds as many entries as `segment_index_bytes` allows.
    pub(crate) fn index_full(&self, segment_index_bytes: u32) -> bool {
        let bytes = segment_index_bytes as usize;
        self.offset_index.len() >= bytes / crate::offset_index::OFFSET_INDEX_ENTRY_BYTES
            || self.time_index.len() >= bytes / crate::time_index::TIME_INDEX_ENTRY_BYTES
    }

    /// Reads the first batch's max timestamp back from the file, once, for a segment
    /// reopened after a restart (Kafka's `loadFirstBatchTimestamp`). A read that fails
    /// leaves it unknown, and the wall clock since the first append counts meanwhile.
    pub(crate) fn load_rolling_timestamp(&mut self) {
        if self.rolling_timestamp_known {
            return;
        }
        let mut header = [0_u8; crate::record_batch::BATCH_HEADER_BYTES];
        if self.log_file.read_exact_at(&mut header, 0).is_err() {
            return;
        }
        self.rolling_timestamp = RecordBatchHeader::parse(&header)
            .ok()
            .map(|h| h.max_timestamp)
            .filter(|t| *t >= 0);
        self.rolling_timestamp_known = true;
    }

    /// How long an append whose batches' largest timestamp is `max_timestamp` has waited
    /// for a `segment_ms` roll, as Kafka's `timeWaitedForRoll`: that timestamp less the
    /// first batch's, or, when the first batch has none, the wall clock since the first
    /// append. Records stamped 30 days ago and then a current one therefore roll, so the
    /// old ones can expire by `retention.ms` on their own.
    pub(crate) fn waited_for_roll_ms(&self, now_ms: i64, max_timestamp: i64) -> i64 {
        match self.rolling_timestamp {
            Some(first) => max_timestamp.saturating_sub(first),
            None => self.age_ms(now_ms),
        }
    }

    /// Milliseconds since the first append (0 when empty).
    pub(crate) fn age_ms(&self, now_ms: i64) -> i64 {
        self.first_append_ms
            .map_or(0, |first| now_ms.saturating_sub(first))
    }

    /// The timestamp retention compares: the largest batch timestamp, or the file's
    /// modification time when no batch carries one (Kafka's rule).
    pub(crate) fn largest_timestamp(&self) -> i64 {
        if self.max_timestamp >= 0 {
            return self.max_timestamp;
        }
        self.log_file
            .metadata()
            .and_then(|m| m.modified())
            .map_or(0, logbook_common::time::unix_ms)
    }

    /// Updates size, offsets, max timestamp and (at Kafka's cadence) the indexes for a
    /// batch that now sits at `position`.
    fn track_batch(
        &mut self,
        position: u32,
        header: &RecordBatchHeader,
        index_interval_bytes: u32,
    ) {
        let last_offset = header.last_offset();
        if header.max_timestamp > self.max_timestamp {
            self.max_timestamp = header.max_timestamp;
            self.offset_of_max_timestamp = Some(last_offset);
        }
        if self.bytes_since_last_index_entry >= index_interval_bytes {
            self.offset_index.push(last_offset, position);
            if let Some(offset) = self.offset_of_max_timestamp {
                self.time_index.maybe_push(self.max_timestamp, offset);
            }
            self.bytes_since_last_index_entry = 0;
        }
        let total =
            u32::try_from(header.total_bytes()).expect("batch size checked against segment size");
        self.bytes_since_last_index_entry = self.bytes_since_last_index_entry.saturating_add(total);
        self.size = position + total;
        self.next_offset = last_offset + 1;
    }

    /// Appends `buf` (whole batches with offsets assigned; `headers` from
    /// `iter_headers(buf)`) with a positional write at the end, then the index entries.
    /// On a failed write nothing in memory changes and the file is cut back.
    pub(crate) fn append(
        &mut self,
        buf: &[u8],
        headers: &[(usize, RecordBatchHeader)],
        index_interval_bytes: u32,
        now_ms: i64,
    ) -> Result<(), AppendError> {
        let start = self.size;
        assert!(
            u64::from(start) + buf.len() as u64 <= u64::from(u32::MAX),
            "append of {} bytes at {start} overflows u32 positions",
            buf.len()
        );
        let written = crate::fault::check(crate::fault::Op::Write, &self.log_path)
            .and_then(|()| write_patched_at(&self.log_file, buf, headers, u64::from(start)));
        if let Err(write) = written {
            self.preallocated = 0;
            return Err(match self.log_file.set_len(u64::from(start)) {
                Ok(()) => AppendError::RolledBack(write),
                Err(cut) => AppendError::InDoubt { write, cut },
            });
        }
        if self.first_append_ms.is_none() {
            self.first_append_ms = Some(now_ms);
        }
        if start == 0 {
            self.rolling_timestamp = headers
                .first()
                .map(|(_, h)| h.max_timestamp)
                .filter(|t| *t >= 0);
            self.rolling_timestamp_known = true;
        }
        for (position, header) in headers {
            let position = start + u32::try_from(*position).expect("checked above");
            assert!(
                header.base_offset == self.next_offset,
                "batch base {} != segment next offset {}",
                header.base_offset,
                self.next_offset
            );
            self.track_batch(position, header, index_interval_bytes);
        }
        // Index entries stay in memory until the segment rolls or closes (index_file.rs).
        Ok(())
    }

    /// Rebuilds both indexes by reading the whole `.log` from position 0, validating
    /// each batch (length, magic, offsets contiguous from `base_offset`, and the CRC if
    /// `check_crc`). The first invalid or torn batch and everything after it is cut off.
    /// Returns `Some((position, reason))` when something was cut.
    /// Reserves disk space ahead of an append of `len` bytes, when the reserve is used up:
    /// `fallocate(KEEP_SIZE)` of about [`PREALLOCATE_APPENDS_AHEAD`] appends of this size
    /// (at least [`PREALLOCATE_BYTES_MIN`], at most `max`).
    ///
    /// Why: writing into blocks ext4 has not allocated yet costs a delayed-allocation
    /// reservation per 4 KiB page (extent status tree, quota, buffer heads) in the
    /// writer's thread; into reserved blocks it does not. Broker CPU per GB produced
    /// dropped 5-25% with it, and a system-wide profile showed no work moved to kernel
    /// threads. The file size is unchanged (readers and recovery see only written bytes);
    /// the reserve past the end is released when the segment rolls or the log closes.
    /// File systems without `fallocate` just skip it.
    pub(crate) fn preallocate(&mut self, len: usize, max: u64) {
        let end = u64::from(self.size) + len as u64;
        if max == 0 || self.preallocate_unsupported || end <= self.preallocated {
            return;
        }
        let from = self.preallocated.max(u64::from(self.size));
        let ahead = (len as u64 * PREALLOCATE_APPENDS_AHEAD)
            .clamp(PREALLOCATE_BYTES_MIN, max.max(PREALLOCATE_BYTES_MIN))
            .min(SEGMENT_BYTES_MAX.saturating_sub(from));
        let want = ahead.max(end - from);
        match rustix::fs::fallocate(
            &*self.log_file,
            rustix::fs::FallocateFlags::KEEP_SIZE,
            from,
            want,
        ) {
            Ok(()) => self.preallocated = from + want,
            // Out of space is not "unsupported": the append itself will tell the
            // producer, and reserving works again once space is freed.
            Err(e) if e == rustix::io::Errno::NOSPC => {
                tracing::debug!(segment = %self.log_path.display(), "no space to reserve ahead");
            }
            Err(e) => {
                self.preallocate_unsupported = true;
                tracing::debug!(segment = %self.log_path.display(), error = %e, "fallocate refused; not reserving space ahead");
            }
        }
    }

    /// The range of the `.log` to drop from the page cache once the next fsync has made it
    /// durable: everything below the last `tail` bytes not dropped before (at least
    /// [`DROP_CACHED_BYTES_MIN`] at a time), or `None`.
    ///
    /// Why: a bounded page-cache tail per partition keeps the fresh data consumers read
    /// in memory, while the pages of older data go back to the free lists right away and
    /// are reused by the next writes. On the development VM a page the kernel has not
    /// used lately costs the host a fault on first touch (fresh memory fills at 0.5-1 GB/s
    /// there, against 18 GB/s once touched): writing 1 GiB with an fdatasync per 4 MiB
    /// took 1.5-2.0 CPU-s/GB letting the page cache grow, 0.51-0.59 dropping pages 8 MiB
    /// behind the end. Older data is read from disk (with `sendfile`, at no extra CPU).
    pub(crate) fn trim_page_cache(&mut self, tail: u64) -> Option<FileSlice> {
        let to = u64::from(self.size).saturating_sub(tail);
        if to < self.uncached_below + DROP_CACHED_BYTES_MIN {
            return None;
        }
        let from = self.uncached_below;
        self.uncached_below = to;
        Some(FileSlice {
            file: Arc::clone(&self.log_file),
            position: from,
            len: usize::try_from(to - from).unwrap_or(usize::MAX),
        })
    }

    /// Releases disk space reserved past the end of the `.log` (see [`Self::preallocate`]).
    pub(crate) fn release_preallocated(&mut self) -> io::Result<()> {
        // Unconditional: a reserve made before a crash is not known to `preallocated`.
        self.log_file.set_len(u64::from(self.size))?;
        self.preallocated = 0;
        Ok(())
    }

    pub(crate) fn recover(
        &mut self,
        index_interval_bytes: u32,
        check_crc: bool,
    ) -> io::Result<Option<(u64, String)>> {
        self.recover_with_gaps(index_interval_bytes, check_crc, false)
    }

    /// [`Self::recover`], accepting offset gaps between batches when `gaps_allowed` (a
    /// segment log compaction rewrote: its batches' offsets only increase).
    pub(crate) fn recover_with_gaps(
        &mut self,
        index_interval_bytes: u32,
        check_crc: bool,
        gaps_allowed: bool,
    ) -> io::Result<Option<(u64, String)>> {
        let file_bytes = self.log_file.metadata()?.len();
        let limit = file_bytes.min(SEGMENT_BYTES_MAX);
        self.offset_index.clear()?;
        self.time_index.clear()?;
        self.size = 0;
        self.next_offset = self.base_offset;
        self.bytes_since_last_index_entry = 0;
        self.max_timestamp = NO_TIMESTAMP;
        self.offset_of_max_timestamp = None;
        let file = Arc::clone(&self.log_file);
        let mut reader = ChunkReader::new(&file, limit, RECOVERY_CHUNK_BYTES);
        let mut position = 0u64;
        let mut problem = None;
        while position < limit {
            match self.check_batch(&mut reader, position, limit, check_crc, gaps_allowed)? {
                Ok(header) => {
                    let at = u32::try_from(position).expect("position below SEGMENT_BYTES_MAX");
                    self.track_batch(at, &header, index_interval_bytes);
                    position += header.total_bytes() as u64;
                }
                Err(reason) => {
                    problem = Some(reason);
                    break;
                }
            }
        }
        if position < file_bytes {
            let reason =
                problem.unwrap_or_else(|| "bytes beyond the maximum segment size".to_string());
            self.log_file.set_len(position)?;
            problem = Some(reason);
        }
        self.offset_index.flush()?;
        self.time_index.flush()?;
        Ok(problem.map(|reason| (position, reason)))
    }

    /// Validates the batch at `position`; the inner `Err` says why it is not a batch.
    fn check_batch(
        &self,
        reader: &mut ChunkReader<'_>,
        position: u64,
        limit: u64,
        check_crc: bool,
        gaps_allowed: bool,
    ) -> io::Result<Result<RecordBatchHeader, String>> {
        let Some(head) = reader.get(position, BATCH_HEADER_BYTES)? else {
            return Ok(Err(format!(
                "torn batch header: {} bytes left",
                limit - position
            )));
        };
        let header = match RecordBatchHeader::parse(head) {
            Ok(header) => header,
            Err(e) => return Ok(Err(e.to_string())),
        };
        if header.batch_length < BATCH_LENGTH_MIN {
            return Ok(Err(format!("invalid batch length {}", header.batch_length)));
        }
        let total = header.total_bytes();
        if position + total as u64 > limit {
            return Ok(Err(format!(
                "torn batch: {total} bytes, {} left",
                limit - position
            )));
        }
        if check_crc {
            let Some(batch) = reader.get(position, total)? else {
                return Ok(Err("torn batch".to_string()));
            };
            let computed = compute_crc(batch);
            if computed != header.crc {
                return Ok(Err(format!(
                    "crc mismatch: stored {:#010x}, computed {computed:#010x}",
                    header.crc
                )));
            }
        }
        let in_order = if gaps_allowed {
            header.base_offset >= self.next_offset
        } else {
            header.base_offset == self.next_offset
        };
        if !in_order {
            return Ok(Err(format!(
                "base offset {} where {} was expected",
                header.base_offset, self.next_offset
            )));
        }
        if header.last_offset_delta < 0
            || header.last_offset() - self.base_offset > i64::from(u32::MAX)
        {
            return Ok(Err(format!(
                "invalid last offset delta {}",
                header.last_offset_delta
            )));
        }
        Ok(Ok(header))
    }

    /// After a clean shutdown: walks headers from the last offset index entry to the end
    /// (at most about one index interval) to learn `next_offset`, the index cadence
    /// counter and any timestamp after the last time index entry. `Err` if the walk does
    /// not end exactly at the file size (the checkpoint lied; recover instead).
    pub(crate) fn scan_tail(&mut self, index_interval_bytes: u32) -> Result<(), String> {
        let last_entry = self.offset_index.last_entry();
        let start = last_entry.map_or(0, |(_, position)| position);
        let mut headers = Vec::new();
        let scanned = self.scan_headers(start, |position, header| {
            headers.push((position, *header));
            ControlFlow::Continue(())
        });
        scanned.map_err(|e| e.to_string())?;
        if let Some((offset, position)) = last_entry {
            let first = headers.first().map(|(p, h)| (h.last_offset(), *p));
            if first != Some((offset, position)) {
                return Err(format!(
                    "last index entry ({offset}, {position}) does not match the batch there"
                ));
            }
        }
        let mut expected = headers.first().map(|(_, h)| h.base_offset);
        if start == 0 && expected.is_some_and(|b| b != self.base_offset) {
            return Err("first batch does not start at the segment base offset".to_string());
        }
        self.bytes_since_last_index_entry = 0;
        for (i, (position, header)) in headers.iter().enumerate() {
            if expected.is_some_and(|e| e != header.base_offset) {
                return Err(format!("offsets not contiguous at position {position}"));
            }
            let relative = header.last_offset() - self.base_offset;
            if header.last_offset_delta < 0 || relative > i64::from(u32::MAX) {
                return Err(format!("invalid last offset at position {position}"));
            }
            expected = Some(header.last_offset() + 1);
            if i == 0 && last_entry.is_some() {
                // Already indexed: account for it without adding an entry again.
                self.bytes_since_last_index_entry =
                    u32::try_from(header.total_bytes()).unwrap_or(u32::MAX);
                if header.max_timestamp > self.max_timestamp {
                    self.max_timestamp = header.max_timestamp;
                    self.offset_of_max_timestamp = Some(header.last_offset());
                }
                self.next_offset = header.last_offset() + 1;
            } else {
                self.track_batch(*position, header, index_interval_bytes);
            }
        }
        if headers.is_empty() {
            self.next_offset = self.base_offset;
        }
        self.sanity_check(Some(self.next_offset))?;
        self.offset_index.flush().map_err(|e| e.to_string())?;
        self.time_index.flush().map_err(|e| e.to_string())
    }

    /// Calls `f(position, header)` for each batch from `start` (a batch boundary) to the
    /// end of the segment, until `f` breaks. Reads headers only (no CRC): the data was
    /// validated before it was appended or by recovery. A header that does not parse or
    /// runs past the end is `Error::CorruptBatch`.
    pub(crate) fn scan_headers(
        &self,
        start: u32,
        mut f: impl FnMut(u32, &RecordBatchHeader) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        let limit = u64::from(self.size);
        let mut reader = ChunkReader::new(&self.log_file, limit, SCAN_CHUNK_BYTES);
        let mut position = u64::from(start);
        while position < limit {
            let corrupt = |reason: String| Error::CorruptBatch {
                position,
                reason: format!("{}: {reason}", self.log_path.display()),
            };
            let Some(head) = reader.get(position, BATCH_HEADER_BYTES)? else {
                return Err(corrupt("torn batch header".to_string()));
            };
            let header = RecordBatchHeader::parse(head).map_err(|e| corrupt(e.to_string()))?;
            let total = header.total_bytes() as u64;
            if header.batch_length < BATCH_LENGTH_MIN || position + total > limit {
                return Err(corrupt(format!(
                    "invalid batch length {}",
                    header.batch_length
                )));
            }
            let at = u32::try_from(position).expect("position below segment size");
            if f(at, &header).is_break() {
                return Ok(());
            }
            position += total;
        }
        Ok(())
    }

    /// The first batch whose last offset is `>= offset` (the batch holding `offset`),
    /// with its position; `None` if the segment ends before `offset`.
    pub(crate) fn find_batch(
        &self,
        offset: i64,
    ) -> Result<Option<(u32, RecordBatchHeader)>, Error> {
        let start = self.offset_index.lookup(offset);
        let mut found = None;
        self.scan_headers(start, |position, header| {
            if header.last_offset() >= offset {
                found = Some((position, *header));
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })?;
        Ok(found)
    }

    /// The end of the region of whole batches a read may take from `start` (a batch
    /// boundary): at most `max_bytes` long, stopping before the first batch whose last
    /// offset is `>= max_offset`. The offset index gives a boundary close to the end and a
    /// header scan from there finds the exact one, so finding the end of a 1 MiB read costs
    /// a pread or two of headers, not a read of the data.
    ///
    /// Also returns the last offset of the region when the scan saw it: the last batch it
    /// took, or one before the first batch it left out (`None` when the region ends where
    /// the scan started, at the segment's end).
    pub(crate) fn readable_end(
        &self,
        start: u32,
        max_bytes: usize,
        max_offset: i64,
    ) -> Result<(u32, Option<i64>), Error> {
        let limit = u64::from(start)
            .saturating_add(max_bytes as u64)
            .min(u64::from(self.size));
        let from = self
            .offset_index
            .last_position_within(limit, max_offset)
            .map_or(start, |position| position.max(start));
        let mut end = from;
        let mut last_offset = None;
        self.scan_headers(from, |position, header| {
            let batch_end = u64::from(position) + header.total_bytes() as u64;
            if batch_end > limit || header.last_offset() >= max_offset {
                if end > start && last_offset.is_none() {
                    last_offset = Some(header.base_offset - 1);
                }
                return ControlFlow::Break(());
            }
            end = u32::try_from(batch_end).expect("batch end within the segment size");
            last_offset = Some(header.last_offset());
            ControlFlow::Continue(())
        })?;
        Ok((end, last_offset))
    }

    /// The bytes `[position, position + len)` of the `.log`, as a shareable file range.
    pub(crate) fn slice(&self, position: u32, len: usize) -> FileSlice {
        assert!(
            u64::from(position) + len as u64 <= u64::from(self.size),
            "slice of {len} bytes at {position} past segment size {}",
            self.size
        );
        FileSlice {
            file: Arc::clone(&self.log_file),
            position: u64::from(position),
            len,
        }
    }

    /// Position to start a scan for the first batch with `max_timestamp >= timestamp`.
    pub(crate) fn timestamp_scan_start(&self, timestamp: i64) -> u32 {
        self.time_index
            .lookup(timestamp)
            .map_or(0, |offset| self.offset_index.lookup(offset))
    }

    /// Appends `len` bytes at `position` to `out` with one positional read.
    pub(crate) fn read_into(&self, out: &mut Vec<u8>, position: u32, len: usize) -> io::Result<()> {
        assert!(
            u64::from(position) + len as u64 <= u64::from(self.size),
            "read of {len} bytes at {position} past segment size {}",
            self.size
        );
        read_exact_at_uninit(&self.log_file, out, u64::from(position), len)
    }

    /// Cuts the segment at `position` (a batch boundary) and rebuilds its indexes from
    /// the remaining headers (no CRC: the data was already trusted). O(segment) reads;
    /// only replication truncation uses it.
    pub(crate) fn truncate_at(
        &mut self,
        position: u32,
        index_interval_bytes: u32,
    ) -> io::Result<()> {
        assert!(
            position <= self.size,
            "truncate position {position} > size {}",
            self.size
        );
        self.log_file.set_len(u64::from(position))?;
        self.preallocated = 0;
        if let Some((at, reason)) = self.recover(index_interval_bytes, false)? {
            tracing::warn!(segment = %self.log_path.display(), position = at, %reason, "truncated while rebuilding indexes after truncate_to");
        }
        if position == 0 {
            self.first_append_ms = None;
            self.rolling_timestamp = None;
            self.rolling_timestamp_known = true;
        }
        Ok(())
    }

    /// The segment stops being active (roll or close): record its largest timestamp as
    /// the final time index entry (Kafka's `onBecomeInactiveSegment`) and flush.
    pub(crate) fn on_inactive(&mut self) -> io::Result<()> {
        self.release_preallocated()?;
        if let Some(offset) = self.offset_of_max_timestamp {
            self.time_index.maybe_push(self.max_timestamp, offset);
        }
        self.offset_index.flush()?;
        self.time_index.flush()
    }

    /// Index entries held in memory.
    #[cfg(test)]
    pub(crate) fn resident_index_entries(&self) -> usize {
        self.offset_index.resident() + self.time_index.resident()
    }

    /// Drops the indexes' entries from memory once the segment is inactive (lookups then
    /// read the index files), so memory does not grow with the data held on disk.
    pub(crate) fn evict_indexes(&mut self) -> io::Result<()> {
        self.offset_index.evict()?;
        self.time_index.evict()
    }

    /// Adds the `.log` handle to `out` for fsync outside the log's lock. Indexes are not
    /// included: the active one is rebuilt by recovery, a rolled one is synced at roll.
    pub(crate) fn sync_files(&self, out: &mut Vec<Arc<File>>) {
        out.push(Arc::clone(&self.log_file));
    }

    /// The `.index` and `.timeindex` paths, for an fsync outside the log's lock.
    pub(crate) fn index_paths(&self) -> [PathBuf; 2] {
        [
            self.offset_index.path().to_path_buf(),
            self.time_index.path().to_path_buf(),
        ]
    }

    /// fsyncs the indexes now (a rolled segment's indexes are final).
    pub(crate) fn sync_indexes(&self) -> io::Result<()> {
        self.offset_index.sync()?;
        self.time_index.sync()
    }

    /// The segment's aborted-transaction index.
    pub(crate) fn txn_index(&self) -> &TransactionIndex {
        &self.txn_index
    }

    /// The segment's aborted-transaction index, to append or truncate.
    pub(crate) fn txn_index_mut(&mut self) -> &mut TransactionIndex {
        &mut self.txn_index
    }

    /// Unlinks the files (the `.txnindex` too). Open handles (e.g. in a `SyncHandle`)
    /// stay valid.
    pub(crate) fn delete_files(self) -> io::Result<()> {
        self.txn_index.delete()?;
        for path in [
            self.log_path.as_path(),
            self.offset_index.path(),
            self.time_index.path(),
        ] {
            match fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

/// Log compaction's side of a segment: the `.cleaned` segment a pass writes, and the view
/// of an inactive segment it reads without the log's lock.
impl LogSegment {
    /// Creates an empty segment whose three files carry `suffix` after their usual names
    /// (`<base>.log.cleaned`, ...), replacing stale files of those names.
    pub(crate) fn create_with_suffix(
        dir: &Path,
        base_offset: i64,
        suffix: &str,
    ) -> io::Result<Self> {
        let name =
            |extension: &str| dir.join(format!("{}{suffix}", file_name(base_offset, extension)));
        let log_path = name("log");
        let log_file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&log_path)?;
        let (index_path, time_path) = (name("index"), name("timeindex"));
        for path in [&index_path, &time_path] {
            match fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        let (offset_index, _) = OffsetIndex::open(&index_path, base_offset)?;
        let (time_index, _) = TimeIndex::open(&time_path, base_offset)?;
        let txn_index = TransactionIndex::create(name("txnindex"))?;
        Ok(Self {
            base_offset,
            log_path,
            log_file: Arc::new(log_file),
            size: 0,
            next_offset: base_offset,
            offset_index,
            time_index,
            bytes_since_last_index_entry: 0,
            max_timestamp: NO_TIMESTAMP,
            offset_of_max_timestamp: None,
            first_append_ms: None,
            rolling_timestamp: None,
            rolling_timestamp_known: true,
            preallocated: 0,
            preallocate_unsupported: false,
            uncached_below: 0,
            txn_index,
        })
    }

    /// Appends one whole batch kept by compaction (offsets already final). Unlike
    /// [`Self::append`], its base offset may lie past `next_offset` (the records between
    /// were compacted away), never below it.
    pub(crate) fn append_cleaned(
        &mut self,
        batch: &[u8],
        header: &RecordBatchHeader,
        index_interval_bytes: u32,
    ) -> io::Result<()> {
        assert!(
            self.next_offset <= header.base_offset,
            "cleaned batch base {} below segment next offset {}",
            header.base_offset,
            self.next_offset
        );
        assert!(
            header.total_bytes() == batch.len(),
            "batch of {} bytes, header says {}",
            batch.len(),
            header.total_bytes()
        );
        let position = self.size;
        assert!(
            u64::from(position) + batch.len() as u64 <= SEGMENT_BYTES_MAX,
            "cleaned segment would pass the maximum segment size"
        );
        self.log_file.write_all_at(batch, u64::from(position))?;
        self.track_batch(position, header, index_interval_bytes);
        Ok(())
    }

    /// Finishes a segment written by compaction: final time index entry, indexes
    /// written, and all three files fsync'd (they must be durable before the swap).
    pub(crate) fn finish_cleaned(&mut self) -> io::Result<()> {
        self.on_inactive()?;
        self.log_file.sync_all()?;
        self.sync_indexes()
    }

    /// The read-only view the cleaner works from, outside the log's lock: the `.log` of
    /// an inactive segment is immutable until compaction or retention replaces it, and
    /// the shared handle keeps it readable even then.
    pub(crate) fn cleaning_view(&self) -> crate::cleaner::SegmentView {
        crate::cleaner::SegmentView {
            base_offset: self.base_offset,
            next_offset: self.next_offset,
            file: Arc::clone(&self.log_file),
            size: self.size,
        }
    }

    /// True when `view` was taken from this segment (same base and same open file).
    pub(crate) fn is_viewed_by(&self, view: &crate::cleaner::SegmentView) -> bool {
        self.base_offset == view.base_offset
            && self.size == view.size
            && Arc::ptr_eq(&self.log_file, &view.file)
    }
}

const _: () = assert!(LOG_OVERHEAD_BYTES + BATCH_LENGTH_MIN as usize == BATCH_HEADER_BYTES);

/// Most iovecs one `pwritev` takes (Linux `UIO_MAXIOV`).
const IOVECS_MAX: usize = 1024;

/// Writes `buf` (whole batches, at the positions in `headers`) at `position`, each batch's
/// first [`OFFSET_PATCH_BYTES`] replaced by [`offset_patch`] of its header: `pwritev` of
/// the patches interleaved with the untouched batch bodies, so the record bytes go from the
/// request buffer to the page cache without a copy in between.
fn write_patched_at(
    file: &File,
    buf: &[u8],
    headers: &[(usize, RecordBatchHeader)],
    position: u64,
) -> io::Result<()> {
    let patches: Vec<[u8; OFFSET_PATCH_BYTES]> = headers
        .iter()
        .map(|(_, header)| offset_patch(header))
        .collect();
    let mut slices = Vec::with_capacity(headers.len() * 2);
    for ((at, header), patch) in headers.iter().zip(&patches) {
        let body = buf
            .get(at + OFFSET_PATCH_BYTES..at + header.total_bytes())
            .expect("headers describe whole batches of buf");
        slices.push(IoSlice::new(patch));
        slices.push(IoSlice::new(body));
    }
    let mut remaining = &mut slices[..];
    let mut offset = position;
    while !remaining.is_empty() {
        let batch = remaining.len().min(IOVECS_MAX);
        let written = rustix::io::pwritev(file, &remaining[..batch], offset)?;
        if written == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "pwritev wrote nothing",
            ));
        }
        offset += written as u64;
        IoSlice::advance_slices(&mut remaining, written);
    }
    Ok(())
}

/// Appends exactly `len` bytes of `file` at `position` to `out`, reading straight into the
/// vector's spare capacity.
///
/// Why not `resize` + `read_exact_at`: zero-filling every fetch buffer before the kernel
/// overwrites it was 16% of the broker's CPU while serving consumers. `pread` is
/// positional, so concurrent readers of one file never disturb each other.
pub(crate) fn read_exact_at_uninit(
    file: &File,
    out: &mut Vec<u8>,
    position: u64,
    len: usize,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    out.reserve_exact(len);
    let mut done = 0;
    while done < len {
        let spare = out.spare_capacity_mut();
        let want = len - done;
        assert!(
            want <= spare.len(),
            "reserved {len} bytes, {} spare for {want}",
            spare.len()
        );
        let offset = i64::try_from(position + done as u64).expect("segment positions fit i64");
        #[expect(
            unsafe_code,
            reason = "pread into uninitialised spare capacity avoids a memset per fetch"
        )]
        // SAFETY: the pointer and `want` describe spare capacity owned by `out` (checked
        // above); pread writes at most `want` bytes there and returns how many it wrote,
        // and only that many are marked initialised by `set_len`.
        let n = unsafe {
            let n = libc::pread(file.as_raw_fd(), spare.as_mut_ptr().cast(), want, offset);
            if n > 0 {
                out.set_len(out.len() + n.unsigned_abs());
            }
            n
        };
        match n {
            n if n > 0 => done += n.unsigned_abs(),
            0 => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "segment ended {} bytes short of a {len}-byte read at {position}",
                        len - done
                    ),
                ))
            }
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}
