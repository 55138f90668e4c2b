//! `ProducerStateManager`: what an idempotent producer last wrote to one partition, kept
//! next to the log it describes (Kafka's class of the same name).
//!
//! For each producer id: its epoch, the time of its last batch, and the sequence ranges
//! with their offsets of its last [`CACHED_BATCHES_PER_PRODUCER`] batches. That is what
//! lets a leader answer a retried batch with the offsets it got the first time instead of
//! appending it again, and refuse a batch that skips sequence numbers — so an idempotent
//! producer's records land exactly once and in order, also across a restart: the state is
//! rebuilt from the log in recovery, starting at the last snapshot.
//!
//! Snapshots: `<20-digit offset>.snapshot` in the partition directory holds the state as it
//! was with the log ending at that offset. One is written when a segment rolls (offset =
//! the new segment's base) and at clean shutdown (offset = log end), each with
//! write-temp, fsync, rename, fsync-dir, so a crash leaves the old or the new file, never a
//! torn one; a file whose checksum does not match is ignored (recovery then scans further
//! back). Recovery loads the newest snapshot at or below the log end and re-reads only the
//! batch headers after it. Snapshots are data, not a source of truth: deleting them all
//! costs a longer scan, never a wrong answer.
//!
//! Format (big-endian): magic `LBPS`, version u16 (1), CRC-32C u32 of everything after it,
//! entry count u32, then per producer: id i64, epoch i16, last timestamp i64, batch count
//! u8, and per batch: first sequence i32, last sequence i32, first offset i64, last offset
//! i64, max timestamp i64.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::offset::Offset;
use crate::record_batch::RecordBatchHeader;

/// Batches remembered per producer for duplicate detection: Kafka's ceiling on
/// `max.in.flight.requests.per.connection` for idempotent producers.
pub const CACHED_BATCHES_PER_PRODUCER: usize = 5;

/// Kafka's `producer.id.expiration.ms` default: a producer silent for a day is forgotten.
pub const PRODUCER_ID_EXPIRATION_MS_DEFAULT: i64 = 86_400_000;

const SNAPSHOT_EXTENSION: &str = "snapshot";
const SNAPSHOT_MAGIC: &[u8; 4] = b"LBPS";
const SNAPSHOT_VERSION: u16 = 1;
/// magic + version + crc + count.
const SNAPSHOT_HEADER_BYTES: usize = 4 + 2 + 4 + 4;
const ENTRY_HEAD_BYTES: usize = 8 + 2 + 8 + 1;
const BATCH_ENTRY_BYTES: usize = 4 + 4 + 8 + 8 + 8;

/// One appended batch of an idempotent producer, as remembered for duplicate detection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMetadata {
    /// First sequence number.
    pub first_sequence: i32,
    /// Last sequence number.
    pub last_sequence: i32,
    /// Offset of its first record.
    pub first_offset: Offset,
    /// Offset of its last record.
    pub last_offset: Offset,
    /// The batch's max timestamp as stored (the append time under LogAppendTime), which a
    /// deduplicated retry reports as its append time.
    pub max_timestamp: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct ProducerEntry {
    epoch: i16,
    /// Largest batch timestamp seen, for `producer.id.expiration.ms`.
    last_timestamp: i64,
    batches: VecDeque<BatchMetadata>,
}

/// The verdict on an incoming batch (before offsets are assigned).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Not from an idempotent producer, or the next batch in sequence: append it.
    Append,
    /// A retry of a batch already in the log: answer with its offsets, append nothing.
    Duplicate(BatchMetadata),
    /// A gap or reordering in the sequence numbers.
    OutOfOrder {
        /// The sequence the broker expected.
        expected: i32,
        /// The sequence it got.
        got: i32,
    },
    /// The batch carries an epoch older than the producer's current one (a zombie).
    StaleEpoch {
        /// The producer's current epoch.
        current: i16,
        /// The batch's epoch.
        got: i16,
    },
}

/// Per-partition producer state. Not locked: owned by the `Log`, behind its caller's lock.
#[derive(Debug)]
pub struct ProducerStateManager {
    dir: PathBuf,
    producers: HashMap<i64, ProducerEntry>,
    /// Offsets of the snapshot files on disk, ascending.
    snapshots: BTreeSet<i64>,
}

/// A copy of the state to write as a snapshot outside the log's lock.
#[derive(Debug)]
pub struct ProducerSnapshot {
    dir: PathBuf,
    offset: i64,
    bytes: Vec<u8>,
}

fn next_sequence(last: i32) -> i32 {
    if last == i32::MAX {
        0
    } else {
        last + 1
    }
}

fn last_sequence(header: &RecordBatchHeader) -> i32 {
    let last = i64::from(header.base_sequence) + i64::from(header.last_offset_delta);
    // Sequences wrap at i32::MAX, as in Kafka's DefaultRecordBatch.
    i32::try_from(last % (i64::from(i32::MAX) + 1)).unwrap_or(0)
}

/// `<20-digit offset>.snapshot`.
fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(crate::log_segment::file_name(offset, SNAPSHOT_EXTENSION))
}

/// The offset a snapshot file name stands for.
pub(crate) fn parse_snapshot_name(name: &str) -> Option<i64> {
    let stem = name.strip_suffix(SNAPSHOT_EXTENSION)?.strip_suffix('.')?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

impl ProducerStateManager {
    /// An empty state for the log in `dir`, knowing the snapshot files present there.
    pub(crate) fn new(dir: &Path) -> io::Result<Self> {
        let mut snapshots = BTreeSet::new();
        for entry in fs::read_dir(dir)? {
            let name = entry?.file_name();
            if let Some(offset) = parse_snapshot_name(&name.to_string_lossy()) {
                snapshots.insert(offset);
            }
        }
        Ok(Self {
            dir: dir.to_path_buf(),
            producers: HashMap::new(),
            snapshots,
        })
    }

    /// Loads the newest readable snapshot at or below `log_end`, deleting snapshots above
    /// it (they describe data that is gone) and unreadable ones. Returns the offset the
    /// state is valid at — the log must be replayed from there — or `None` when no
    /// snapshot could be used (replay from the log start).
    pub(crate) fn load(&mut self, log_end: i64) -> io::Result<Option<i64>> {
        self.producers.clear();
        let above: Vec<i64> = self.snapshots.range(log_end + 1..).copied().collect();
        for offset in above {
            tracing::info!(dir = %self.dir.display(), offset, "removing producer snapshot above the log end");
            self.remove_snapshot(offset)?;
        }
        while let Some(&offset) = self.snapshots.iter().next_back() {
            match fs::read(snapshot_path(&self.dir, offset)) {
                Ok(bytes) => match decode_snapshot(&bytes) {
                    Ok(producers) => {
                        self.producers = producers;
                        return Ok(Some(offset));
                    }
                    Err(reason) => {
                        tracing::warn!(dir = %self.dir.display(), offset, %reason, "ignoring unreadable producer snapshot");
                    }
                },
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            self.remove_snapshot(offset)?;
        }
        Ok(None)
    }

    fn remove_snapshot(&mut self, offset: i64) -> io::Result<()> {
        self.snapshots.remove(&offset);
        match fs::remove_file(snapshot_path(&self.dir, offset)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Whether any producer is tracked.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Number of producers tracked.
    pub fn producer_count(&self) -> usize {
        self.producers.len()
    }

    /// Last offset of each producer's newest batch: log compaction keeps those batches
    /// (empty if need be) so the producers' sequence state survives a reload.
    pub(crate) fn last_offsets(&self) -> HashMap<i64, i64> {
        self.producers
            .iter()
            .filter_map(|(&id, entry)| entry.batches.back().map(|b| (id, b.last_offset.get())))
            .collect()
    }

    /// The newest snapshot offset on disk, if any.
    pub(crate) fn latest_snapshot(&self) -> Option<i64> {
        self.snapshots.iter().next_back().copied()
    }

    /// Checks a batch (before offsets are assigned) against the producer's state, as
    /// Kafka's `ProducerAppendInfo.checkSequence` does: a producer with no state (new, or
    /// expired) may start at any sequence; a new epoch must start at 0.
    pub fn check(&self, header: &RecordBatchHeader) -> SequenceCheck {
        if header.producer_id < 0 {
            return SequenceCheck::Append;
        }
        let Some(entry) = self.producers.get(&header.producer_id) else {
            return SequenceCheck::Append;
        };
        if header.is_control() {
            // A marker carries no sequence; only its epoch is checked.
            return if header.producer_epoch < entry.epoch {
                SequenceCheck::StaleEpoch {
                    current: entry.epoch,
                    got: header.producer_epoch,
                }
            } else {
                SequenceCheck::Append
            };
        }
        if header.producer_epoch < entry.epoch {
            return SequenceCheck::StaleEpoch {
                current: entry.epoch,
                got: header.producer_epoch,
            };
        }
        if header.producer_epoch > entry.epoch {
            return if header.base_sequence == 0 {
                SequenceCheck::Append
            } else {
                SequenceCheck::OutOfOrder {
                    expected: 0,
                    got: header.base_sequence,
                }
            };
        }
        let last = last_sequence(header);
        if let Some(dup) = entry
            .batches
            .iter()
            .find(|b| b.first_sequence == header.base_sequence && b.last_sequence == last)
        {
            return SequenceCheck::Duplicate(*dup);
        }
        let expected = entry
            .batches
            .back()
            .map_or(header.base_sequence, |b| next_sequence(b.last_sequence));
        if header.base_sequence == expected {
            SequenceCheck::Append
        } else {
            SequenceCheck::OutOfOrder {
                expected,
                got: header.base_sequence,
            }
        }
    }

    /// Records a batch as stored (its header carries the assigned base offset).
    pub fn update(&mut self, header: &RecordBatchHeader) {
        if header.producer_id < 0 || header.is_control() {
            return;
        }
        let entry = self
            .producers
            .entry(header.producer_id)
            .or_insert_with(|| ProducerEntry {
                epoch: header.producer_epoch,
                last_timestamp: header.max_timestamp,
                batches: VecDeque::new(),
            });
        if header.producer_epoch != entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        entry.last_timestamp = entry.last_timestamp.max(header.max_timestamp);
        if entry.batches.len() == CACHED_BATCHES_PER_PRODUCER {
            entry.batches.pop_front();
        }
        entry.batches.push_back(BatchMetadata {
            first_sequence: header.base_sequence,
            last_sequence: last_sequence(header),
            first_offset: Offset(header.base_offset),
            last_offset: Offset(header.last_offset()),
            max_timestamp: header.max_timestamp,
        });
    }

    /// Forgets producers whose last batch is below the new log start (their batches are
    /// gone, so a retry could not be answered anyway) and snapshots older than the
    /// segment that now starts the log (`first_segment_base`), keeping at least the
    /// newest one.
    pub(crate) fn on_log_start_advanced(
        &mut self,
        log_start: i64,
        first_segment_base: i64,
    ) -> io::Result<()> {
        self.producers.retain(|_, entry| {
            entry
                .batches
                .back()
                .is_some_and(|b| b.last_offset.get() >= log_start)
        });
        let latest = self.latest_snapshot();
        let old: Vec<i64> = self
            .snapshots
            .range(..first_segment_base)
            .copied()
            .filter(|o| Some(*o) != latest)
            .collect();
        for offset in old {
            self.remove_snapshot(offset)?;
        }
        Ok(())
    }

    /// Forgets producers whose last batch timestamp is `expiration_ms` or more before
    /// `now_ms` (Kafka's `producer.id.expiration.ms`). Returns how many were removed.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers
            .retain(|_, entry| now_ms.saturating_sub(entry.last_timestamp) < expiration_ms);
        before - self.producers.len()
    }

    /// Forgets everything and deletes every snapshot at or above `offset` (truncation:
    /// the caller reloads and replays).
    pub(crate) fn remove_snapshots_from(&mut self, offset: i64) -> io::Result<()> {
        let above: Vec<i64> = self.snapshots.range(offset..).copied().collect();
        for o in above {
            self.remove_snapshot(o)?;
        }
        Ok(())
    }

    /// Deletes every snapshot (the log was emptied).
    pub(crate) fn clear(&mut self) -> io::Result<()> {
        self.producers.clear();
        self.remove_snapshots_from(i64::MIN)
    }

    /// A copy of the state as a snapshot at `offset` (the log end it describes), to be
    /// written with [`ProducerSnapshot::write`] outside the log's lock. The offset is
    /// recorded as present now: if the write then fails, recovery finds no file (or an
    /// older one) and scans further back, which is only slower.
    pub(crate) fn take_snapshot(&mut self, offset: i64) -> ProducerSnapshot {
        self.snapshots.insert(offset);
        ProducerSnapshot {
            dir: self.dir.clone(),
            offset,
            bytes: encode_snapshot(&self.producers),
        }
    }
}

impl ProducerSnapshot {
    /// The log end offset the snapshot describes.
    pub fn offset(&self) -> i64 {
        self.offset
    }

    /// Writes the snapshot durably (write temp, fsync, rename, fsync dir). Blocking.
    pub fn write(&self) -> io::Result<()> {
        let path = snapshot_path(&self.dir, self.offset);
        let tmp = path.with_extension(format!(
            "{SNAPSHOT_EXTENSION}{}",
            crate::checkpoint::TMP_SUFFIX
        ));
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        file.write_all(&self.bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, &path)?;
        crate::checkpoint::sync_dir(&self.dir)
    }
}

fn encode_snapshot(producers: &HashMap<i64, ProducerEntry>) -> Vec<u8> {
    let mut body =
        Vec::with_capacity(4 + producers.len() * (ENTRY_HEAD_BYTES + 2 * BATCH_ENTRY_BYTES));
    let count = u32::try_from(producers.len()).expect("fewer than 2^32 producers");
    body.extend(count.to_be_bytes());
    let mut ids: Vec<&i64> = producers.keys().collect();
    ids.sort_unstable();
    for id in ids {
        let entry = &producers[id];
        body.extend(id.to_be_bytes());
        body.extend(entry.epoch.to_be_bytes());
        body.extend(entry.last_timestamp.to_be_bytes());
        body.push(u8::try_from(entry.batches.len()).expect("at most 5 cached batches"));
        for b in &entry.batches {
            body.extend(b.first_sequence.to_be_bytes());
            body.extend(b.last_sequence.to_be_bytes());
            body.extend(b.first_offset.get().to_be_bytes());
            body.extend(b.last_offset.get().to_be_bytes());
            body.extend(b.max_timestamp.to_be_bytes());
        }
    }
    let mut out = Vec::with_capacity(SNAPSHOT_HEADER_BYTES - 4 + body.len());
    out.extend(SNAPSHOT_MAGIC);
    out.extend(SNAPSHOT_VERSION.to_be_bytes());
    out.extend(crc32c::crc32c(&body).to_be_bytes());
    out.extend(body);
    out
}

/// A cursor over snapshot bytes that fails instead of panicking on short input.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let (head, rest) = self
            .bytes
            .split_at_checked(N)
            .ok_or_else(|| "truncated".to_string())?;
        self.bytes = rest;
        let mut out = [0u8; N];
        out.copy_from_slice(head);
        Ok(out)
    }
}

fn decode_snapshot(bytes: &[u8]) -> Result<HashMap<i64, ProducerEntry>, String> {
    let mut r = Reader { bytes };
    if &r.take::<4>()? != SNAPSHOT_MAGIC {
        return Err("bad magic".to_string());
    }
    let version = u16::from_be_bytes(r.take()?);
    if version != SNAPSHOT_VERSION {
        return Err(format!("unknown version {version}"));
    }
    let crc = u32::from_be_bytes(r.take()?);
    if crc32c::crc32c(r.bytes) != crc {
        return Err("checksum mismatch".to_string());
    }
    let count = u32::from_be_bytes(r.take()?);
    let mut producers = HashMap::new();
    for _ in 0..count {
        let id = i64::from_be_bytes(r.take()?);
        let epoch = i16::from_be_bytes(r.take()?);
        let last_timestamp = i64::from_be_bytes(r.take()?);
        let batch_count = u8::from_be_bytes(r.take()?);
        if usize::from(batch_count) > CACHED_BATCHES_PER_PRODUCER {
            return Err(format!("{batch_count} cached batches"));
        }
        let mut batches = VecDeque::with_capacity(usize::from(batch_count));
        for _ in 0..batch_count {
            batches.push_back(BatchMetadata {
                first_sequence: i32::from_be_bytes(r.take()?),
                last_sequence: i32::from_be_bytes(r.take()?),
                first_offset: Offset(i64::from_be_bytes(r.take()?)),
                last_offset: Offset(i64::from_be_bytes(r.take()?)),
                max_timestamp: i64::from_be_bytes(r.take()?),
            });
        }
        producers.insert(
            id,
            ProducerEntry {
                epoch,
                last_timestamp,
                batches,
            },
        );
    }
    if !r.bytes.is_empty() {
        return Err("trailing bytes".to_string());
    }
    Ok(producers)
}

#[cfg(test)]
mod tests;
