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
//! Transactions (Kafka's `ProducerAppendInfo` rules): a transactional data batch starts
//! the producer's transaction at this partition (its first offset) or continues it; a
//! marker ends it. Open transactions, ordered by first offset, give the *first unstable
//! offset*; a completed transaction stays unstable until its marker is below the high
//! watermark (Kafka's `unreplicatedTxns`). A batch or marker of an older producer epoch is
//! refused; a marker of a newer epoch bumps the producer's epoch (fencing); a marker from
//! an older coordinator epoch is refused; a non-transactional batch inside an open
//! transaction is refused. Expiry never forgets a producer with an open transaction.
//!
//! Format (big-endian): magic `LBPS`, version u16 (2; version 1 is still read), CRC-32C
//! u32 of everything after it, entry count u32, then per producer: id i64, epoch i16, last
//! timestamp i64, (version 2 only: coordinator epoch i32, open transaction's first offset
//! i64 or -1), batch count u8, and per batch: first sequence i32, last sequence i32, first
//! offset i64, last offset i64, max timestamp i64.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::offset::Offset;
use crate::record_batch::RecordBatchHeader;

/// Batches remembered per producer for duplicate detection: Kafka's ceiling on
/// `max.in.flight.requests.per.connection` for idempotent producers.
pub const CACHED_BATCHES_PER_PRODUCER: usize = 5;

/// Kafka's `RecordBatch.NO_SEQUENCE`: the base sequence of a batch written without one.
const NO_SEQUENCE: i32 = -1;

/// Kafka's `producer.id.expiration.ms` default: a producer silent for a day is forgotten.
pub const PRODUCER_ID_EXPIRATION_MS_DEFAULT: i64 = 86_400_000;

const SNAPSHOT_EXTENSION: &str = "snapshot";
const SNAPSHOT_MAGIC: &[u8; 4] = b"LBPS";
const SNAPSHOT_VERSION: u16 = 2;
/// The version before transactions, still read.
const SNAPSHOT_VERSION_V1: u16 = 1;
/// magic + version + crc + count.
const SNAPSHOT_HEADER_BYTES: usize = 4 + 2 + 4 + 4;
const ENTRY_HEAD_BYTES: usize = 8 + 2 + 8 + 4 + 8 + 1;
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
    /// Coordinator epoch of the producer's last marker (-1 before any).
    coordinator_epoch: i32,
    /// First offset of the producer's open transaction at this partition.
    current_txn_first_offset: Option<i64>,
}

impl ProducerEntry {
    fn new(epoch: i16, last_timestamp: i64) -> Self {
        Self {
            epoch,
            last_timestamp,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            current_txn_first_offset: None,
        }
    }
}

/// A producer's newest record in the log (Kafka's `LastRecord`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LastRecord {
    /// Last offset of its newest data batch of the current epoch; `None` when a marker of
    /// a newer epoch (a fencing abort) came after its last data batch.
    pub(crate) last_data_offset: Option<i64>,
    /// Its current epoch.
    pub(crate) producer_epoch: i16,
}

/// A transaction a marker ended (Kafka's `CompletedTxn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletedTxn {
    /// The producer.
    pub producer_id: i64,
    /// Offset of the transaction's first batch at this partition.
    pub first_offset: i64,
    /// Offset of the marker.
    pub last_offset: i64,
    /// Whether the marker was an ABORT.
    pub is_aborted: bool,
}

/// One producer as DescribeProducers reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActiveProducer {
    /// The producer id.
    pub producer_id: i64,
    /// Its current epoch.
    pub producer_epoch: i16,
    /// Last sequence written (-1 if none cached).
    pub last_sequence: i32,
    /// Largest timestamp of its batches.
    pub last_timestamp: i64,
    /// Coordinator epoch of its last marker (-1 if none).
    pub coordinator_epoch: i32,
    /// First offset of its open transaction, -1 if none.
    pub current_txn_start_offset: i64,
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
    /// A non-transactional batch while the producer's transaction is open.
    InvalidTxnState,
}

/// The verdict on a marker (before it is appended).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerCheck {
    /// Append it.
    Append,
    /// The marker's producer epoch is older than the producer's.
    StaleEpoch {
        /// The producer's current epoch.
        current: i16,
        /// The marker's epoch.
        got: i16,
    },
    /// The marker's coordinator epoch is older than the producer's last marker's.
    CoordinatorFenced {
        /// The coordinator epoch of the producer's last marker.
        current: i32,
        /// The marker's.
        got: i32,
    },
}

/// Per-partition producer state. Not locked: owned by the `Log`, behind its caller's lock.
#[derive(Debug)]
pub struct ProducerStateManager {
    dir: PathBuf,
    producers: HashMap<i64, ProducerEntry>,
    /// Open transactions: first offset → producer id.
    ongoing: BTreeMap<i64, i64>,
    /// Transactions whose marker is not yet below the high watermark: first offset →
    /// the completed transaction. Not in snapshots (a reopened log is all durable).
    unreplicated: BTreeMap<i64, CompletedTxn>,
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
            ongoing: BTreeMap::new(),
            unreplicated: BTreeMap::new(),
            snapshots,
        })
    }

    /// Loads the newest readable snapshot at or below `log_end`, deleting snapshots above
    /// it (they describe data that is gone) and unreadable ones. Returns the offset the
    /// state is valid at — the log must be replayed from there — or `None` when no
    /// snapshot could be used (replay from the log start).
    pub(crate) fn load(&mut self, log_end: i64) -> io::Result<Option<i64>> {
        self.reset();
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
                        self.rebuild_ongoing();
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

    fn reset(&mut self) {
        self.producers.clear();
        self.ongoing.clear();
        self.unreplicated.clear();
    }

    fn rebuild_ongoing(&mut self) {
        self.ongoing = self
            .producers
            .iter()
            .filter_map(|(&id, e)| e.current_txn_first_offset.map(|first| (first, id)))
            .collect();
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

    /// Each producer's newest record (Kafka's `lastRecordsOfActiveProducers`): log
    /// compaction keeps that batch (empty if need be) so the producer's sequence and epoch
    /// survive a reload from the log.
    pub(crate) fn last_records(&self) -> HashMap<i64, LastRecord> {
        self.producers
            .iter()
            .map(|(&id, entry)| {
                let last = LastRecord {
                    last_data_offset: entry.batches.back().map(|b| b.last_offset.get()),
                    producer_epoch: entry.epoch,
                };
                (id, last)
            })
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
        if entry.current_txn_first_offset.is_some() && !header.is_transactional() {
            return SequenceCheck::InvalidTxnState;
        }
        if header.base_sequence == NO_SEQUENCE {
            // Only a coordinator of this broker writes a producer's batch without a
            // sequence (the group coordinator's transactional offset commits; the produce
            // door refuses it from clients): Kafka checks sequences for client appends
            // only, so each such batch appends — the same producer id and epoch writes one
            // per transaction, and none of them is a retry of the one before.
            return SequenceCheck::Append;
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
        // An entry without batches had its epoch set by a marker: the new epoch's first
        // batch starts at sequence 0 (Kafka's `inSequence(NO_SEQUENCE, 0)`).
        let expected = entry
            .batches
            .back()
            .map_or(0, |b| next_sequence(b.last_sequence));
        if header.base_sequence == expected {
            SequenceCheck::Append
        } else {
            SequenceCheck::OutOfOrder {
                expected,
                got: header.base_sequence,
            }
        }
    }

    /// Checks a marker for `producer_id` (Kafka's `appendEndTxnMarker` checks): its
    /// producer epoch may not be older than the producer's, nor its coordinator epoch
    /// older than the producer's last marker's.
    pub fn check_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
    ) -> MarkerCheck {
        let Some(entry) = self.producers.get(&producer_id) else {
            return MarkerCheck::Append;
        };
        if producer_epoch < entry.epoch {
            MarkerCheck::StaleEpoch {
                current: entry.epoch,
                got: producer_epoch,
            }
        } else if coordinator_epoch < entry.coordinator_epoch {
            MarkerCheck::CoordinatorFenced {
                current: entry.coordinator_epoch,
                got: coordinator_epoch,
            }
        } else {
            MarkerCheck::Append
        }
    }

    /// Records a stored marker (`header` carries its offset): ends the producer's open
    /// transaction, if any, and returns it; takes the marker's producer epoch (a bump
    /// fences older producers) and coordinator epoch. The completed transaction stays
    /// unstable until [`ProducerStateManager::on_high_watermark`] passes the marker.
    pub fn update_marker(
        &mut self,
        header: &RecordBatchHeader,
        coordinator_epoch: i32,
        is_aborted: bool,
    ) -> Option<CompletedTxn> {
        let entry = self
            .producers
            .entry(header.producer_id)
            .or_insert_with(|| ProducerEntry::new(header.producer_epoch, header.max_timestamp));
        if header.producer_epoch != entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        entry.coordinator_epoch = coordinator_epoch;
        entry.last_timestamp = entry.last_timestamp.max(header.max_timestamp);
        let first_offset = entry.current_txn_first_offset.take()?;
        self.ongoing.remove(&first_offset);
        let completed = CompletedTxn {
            producer_id: header.producer_id,
            first_offset,
            last_offset: header.base_offset,
            is_aborted,
        };
        self.unreplicated.insert(first_offset, completed);
        Some(completed)
    }

    /// The last stable offset recorded with an aborted transaction in the transaction
    /// index (Kafka's `lastStableOffset(completedTxn)`): the first offset of the oldest
    /// transaction still open, else the offset after the marker.
    pub fn last_stable_offset_after(&self, completed: &CompletedTxn) -> i64 {
        self.ongoing
            .iter()
            .find(|(_, &pid)| pid != completed.producer_id)
            .map_or(completed.last_offset + 1, |(&first, _)| first)
    }

    /// The first offset of the oldest transaction not yet stable: open, or ended by a
    /// marker the high watermark has not passed. `None` when every transaction is stable.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let ongoing = self.ongoing.keys().next().copied();
        let unreplicated = self.unreplicated.keys().next().copied();
        match (ongoing, unreplicated) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Forgets completed transactions whose marker is below `high_watermark` (Kafka's
    /// `onHighWatermarkUpdated`).
    pub fn on_high_watermark(&mut self, high_watermark: i64) {
        self.unreplicated
            .retain(|_, t| t.last_offset >= high_watermark);
    }

    /// Every producer tracked, for DescribeProducers, ordered by producer id.
    pub fn active_producers(&self) -> Vec<ActiveProducer> {
        let mut out: Vec<ActiveProducer> = self
            .producers
            .iter()
            .map(|(&producer_id, e)| ActiveProducer {
                producer_id,
                producer_epoch: e.epoch,
                last_sequence: e.batches.back().map_or(-1, |b| b.last_sequence),
                last_timestamp: e.last_timestamp,
                coordinator_epoch: e.coordinator_epoch,
                current_txn_start_offset: e.current_txn_first_offset.unwrap_or(-1),
            })
            .collect();
        out.sort_unstable_by_key(|p| p.producer_id);
        out
    }

    /// Records a batch as stored (its header carries the assigned base offset). Markers
    /// go through [`ProducerStateManager::update_marker`].
    pub fn update(&mut self, header: &RecordBatchHeader) {
        if header.producer_id < 0 || header.is_control() {
            return;
        }
        let entry = self
            .producers
            .entry(header.producer_id)
            .or_insert_with(|| ProducerEntry::new(header.producer_epoch, header.max_timestamp));
        if header.producer_epoch != entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        if header.is_transactional() && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(header.base_offset);
            self.ongoing.insert(header.base_offset, header.producer_id);
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
            entry.current_txn_first_offset.is_some()
                || entry
                    .batches
                    .back()
                    .is_some_and(|b| b.last_offset.get() >= log_start)
        });
        self.unreplicated.retain(|_, t| t.last_offset >= log_start);
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
    /// `now_ms` (Kafka's `producer.id.expiration.ms`), never one with an open
    /// transaction. Returns how many were removed.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, entry| {
            entry.current_txn_first_offset.is_some()
                || now_ms.saturating_sub(entry.last_timestamp) < expiration_ms
        });
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
        self.reset();
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
        logbook_common::replace(&path, |out| out.write_all(&self.bytes))
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
        body.extend(entry.coordinator_epoch.to_be_bytes());
        body.extend(entry.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
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
    if version != SNAPSHOT_VERSION && version != SNAPSHOT_VERSION_V1 {
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
        let (coordinator_epoch, current_txn_first_offset) = if version == SNAPSHOT_VERSION_V1 {
            (-1, None)
        } else {
            let coordinator_epoch = i32::from_be_bytes(r.take()?);
            let first = i64::from_be_bytes(r.take()?);
            (coordinator_epoch, (first >= 0).then_some(first))
        };
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
                coordinator_epoch,
                current_txn_first_offset,
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
