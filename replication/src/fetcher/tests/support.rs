//! Test doubles: `Replica`, a `FollowerLog` over a real `storage::Log` whose fsync the
//! test controls, and `InMemoryLeader`, a `LeaderEndPoint` that serves replica fetches
//! from another `Replica` as the leader side will (diverging-epoch check, out of range,
//! epoch fencing, high watermark = min over the followers' fetch offsets).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use logbook_storage::record_batch::iter_headers;
use logbook_storage::{AppendInfo, AppendOutcome, LeaderEpoch, Log, LogConfig, Offset};
use parking_lot::Mutex;
use tokio::sync::watch;

use super::super::{
    EndPointError, EpochEndOffset, EpochRequest, EpochResult, FetchRequest, FetchedPartition,
    FollowerLog, LeaderEndPoint, LeaderError,
};
use crate::{Error, TopicPartition};

pub(super) fn tp() -> TopicPartition {
    TopicPartition {
        topic: "t".to_string(),
        partition: 0,
    }
}

/// A batch of `records` records (8-byte values), base offset 0, optionally from an
/// idempotent producer `(producer_id, epoch, first sequence)`.
pub(super) fn batch(records: usize, producer: Option<(i64, i16, i32)>) -> Vec<u8> {
    let mut body = Vec::new();
    for i in 0..records {
        let mut record = vec![0u8]; // attributes
        put_varint(&mut record, i as i64); // timestamp delta
        put_varint(&mut record, i as i64); // offset delta
        put_varint(&mut record, -1); // null key
        put_varint(&mut record, 8);
        record.extend((0..8).map(|j| (i * 8 + j) as u8));
        put_varint(&mut record, 0); // headers
        put_varint(&mut body, record.len() as i64);
        body.extend(record);
    }
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let mut out = Vec::new();
    out.extend(0i64.to_be_bytes());
    out.extend(0i32.to_be_bytes());
    out.extend(0i32.to_be_bytes());
    out.push(2);
    out.extend(0u32.to_be_bytes());
    out.extend(0i16.to_be_bytes());
    out.extend((records as i32 - 1).to_be_bytes());
    out.extend(1_000i64.to_be_bytes());
    out.extend((1_000 + records as i64 - 1).to_be_bytes());
    out.extend(pid.to_be_bytes());
    out.extend(epoch.to_be_bytes());
    out.extend(seq.to_be_bytes());
    out.extend((records as i32).to_be_bytes());
    out.extend(body);
    let length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// When a replica's appends become durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FlushMode {
    /// fsync right after each append.
    Inline,
    /// Only when the test calls [`Replica::flush`] (a slow disk).
    Manual,
}

#[derive(Clone, Copy, Debug)]
struct Durable {
    offset: Offset,
    failed: bool,
}

/// One replica's log, usable as leader (appends with an epoch) and as follower.
pub(super) struct Replica {
    tp: TopicPartition,
    dir: std::path::PathBuf,
    log: Mutex<Log>,
    high_watermark: Mutex<Offset>,
    durable: watch::Sender<Durable>,
    mode: FlushMode,
}

impl Replica {
    pub(super) fn open(dir: &Path, mode: FlushMode) -> Arc<Self> {
        Self::open_as(dir, mode, tp())
    }

    pub(super) fn open_as(dir: &Path, mode: FlushMode, tp: TopicPartition) -> Arc<Self> {
        let config = LogConfig {
            segment_bytes: 2048,
            index_interval_bytes: 256,
            ..LogConfig::default()
        };
        let log = Log::open(dir, config).expect("open log");
        let end = log.log_end_offset();
        let (durable, _) = watch::channel(Durable {
            offset: end,
            failed: false,
        });
        Arc::new(Self {
            tp,
            dir: dir.to_path_buf(),
            log: Mutex::new(log),
            high_watermark: Mutex::new(end),
            durable,
            mode,
        })
    }

    /// A crash and restart: the log is opened again from its files (recovery runs, as no
    /// clean-shutdown marker was written) and replaces the one in memory.
    pub(super) fn restart(&self) {
        let mut log = self.log.lock();
        let config = log.config().clone();
        *log = Log::open(&self.dir, config).expect("reopen log");
        let end = log.log_end_offset();
        drop(log);
        self.durable.send_modify(|d| d.offset = end);
        let mut hw = self.high_watermark.lock();
        *hw = (*hw).min(end);
    }

    /// fsyncs what was appended; a failure fails the log (as `Partition::flush` does).
    pub(super) fn flush(&self) {
        let handle = match self.log.lock().sync_handle() {
            Ok(handle) => handle,
            Err(_) => return,
        };
        match handle.sync() {
            Ok(synced) => {
                let mut log = self.log.lock();
                log.mark_durable(synced);
                let offset = synced.durable_offset.min(log.log_end_offset());
                self.durable.send_modify(|d| d.offset = offset);
            }
            Err(e) => {
                self.log.lock().mark_failed(format!("fsync failed: {e}"));
                self.durable.send_modify(|d| d.failed = true);
            }
        }
    }

    pub(super) fn durable_offset(&self) -> Offset {
        self.durable.borrow().offset
    }

    /// Appends as the leader in `epoch` (offsets assigned here).
    pub(super) fn append_as_leader(&self, bytes: &[u8], epoch: i32) -> AppendOutcome {
        let outcome = self.log.lock().append(bytes, epoch).expect("leader append");
        if self.mode == FlushMode::Inline {
            self.flush();
        }
        outcome
    }

    /// Becomes leader in `epoch` (the epoch starts at the log end).
    pub(super) fn become_leader(&self, epoch: i32) {
        self.log.lock().assign_epoch_start(LeaderEpoch(epoch));
    }

    pub(super) fn end(&self) -> Offset {
        self.log.lock().log_end_offset()
    }

    pub(super) fn start(&self) -> Offset {
        self.log.lock().log_start_offset()
    }

    pub(super) fn hw(&self) -> Offset {
        *self.high_watermark.lock()
    }

    pub(super) fn set_hw(&self, offset: Offset) {
        *self.high_watermark.lock() = offset;
    }

    /// The stored bytes of every batch whose last offset is below `upto`.
    pub(super) fn bytes_below(&self, upto: Offset) -> Vec<u8> {
        let log = self.log.lock();
        let start = log.log_start_offset();
        log.read(start, usize::MAX, upto, true)
            .expect("read")
            .records
            .to_vec()
    }

    pub(super) fn epochs(&self) -> Vec<(i32, i64)> {
        self.log
            .lock()
            .leader_epochs()
            .entries()
            .iter()
            .map(|e| (e.epoch.0, e.start_offset))
            .collect()
    }

    /// Base offsets of the batches at or above `from`.
    pub(super) fn batch_bases(&self, from: Offset) -> Vec<i64> {
        let bytes = self.bytes_below(Offset::MAX);
        iter_headers(&bytes)
            .map(|(_, h)| h.base_offset)
            .filter(|&b| b >= from.get())
            .collect()
    }

    pub(super) fn truncate(&self, offset: Offset) {
        FollowerLog::truncate_to(self, offset).expect("truncate");
    }

    pub(super) fn with_log<T>(&self, f: impl FnOnce(&mut Log) -> T) -> T {
        f(&mut self.log.lock())
    }
}

impl FollowerLog for Replica {
    fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }

    fn log_start_offset(&self) -> Result<Offset, Error> {
        Ok(self.start())
    }

    fn log_end_offset(&self) -> Result<Offset, Error> {
        Ok(self.end())
    }

    fn latest_epoch(&self) -> Result<Option<LeaderEpoch>, Error> {
        Ok(self.log.lock().leader_epochs().latest_epoch())
    }

    fn floor_end_offset(&self, epoch: LeaderEpoch) -> Result<Option<(LeaderEpoch, Offset)>, Error> {
        let log = self.log.lock();
        let end = log.log_end_offset().get();
        Ok(log
            .leader_epochs()
            .floor_end_offset(epoch, end)
            .map(|(e, o)| (e, Offset(o))))
    }

    fn high_watermark(&self) -> Offset {
        self.hw()
    }

    fn truncate_to(&self, offset: Offset) -> Result<(), Error> {
        let mut log = self.log.lock();
        log.truncate_to(offset)?;
        let end = log.log_end_offset();
        drop(log);
        self.durable.send_modify(|d| d.offset = d.offset.min(end));
        let mut hw = self.high_watermark.lock();
        *hw = (*hw).min(end);
        Ok(())
    }

    fn truncate_fully_and_start_at(&self, offset: Offset) -> Result<(), Error> {
        self.log.lock().truncate_fully_and_start_at(offset)?;
        self.durable.send_modify(|d| d.offset = offset);
        *self.high_watermark.lock() = offset;
        Ok(())
    }

    fn append_as_follower(&self, records: &[u8]) -> Result<AppendInfo, Error> {
        let info = self.log.lock().append_as_follower(records)?;
        if self.mode == FlushMode::Inline {
            self.flush();
        }
        Ok(info)
    }

    fn update_from_leader(
        &self,
        leader_high_watermark: Offset,
        _leader_log_start_offset: Offset,
    ) -> Result<(), Error> {
        let end = self.end();
        *self.high_watermark.lock() = leader_high_watermark.min(end);
        Ok(())
    }

    async fn wait_durable(&self, offset: Offset) -> Result<(), Error> {
        let mut rx = self.durable.subscribe();
        let state = rx
            .wait_for(|d| d.failed || d.offset >= offset)
            .await
            .map(|d| *d)
            .map_err(|_| Error::Closed(self.tp.clone()))?;
        if state.failed {
            let failure = self.log.lock().failure().unwrap_or("failed").to_string();
            return Err(Error::Storage(logbook_storage::Error::LogFailed {
                dir: std::path::PathBuf::new(),
                reason: failure,
            }));
        }
        Ok(())
    }
}

/// The leader's side of one partition, shared by the followers' end points.
pub(super) struct LeaderState {
    pub(super) replica: Arc<Replica>,
    pub(super) epoch: i32,
    /// Each follower's last fetch offset in this epoch.
    pub(super) follower_offsets: BTreeMap<i32, Offset>,
    /// The followers the high watermark waits for (all of them: the ISR).
    pub(super) followers: Vec<i32>,
    /// Off: an old (pre-KIP-320) or unclean leader that never answers a diverging epoch.
    pub(super) diverging_check: bool,
}

impl LeaderState {
    pub(super) fn new(replica: Arc<Replica>, epoch: i32, followers: Vec<i32>) -> Arc<Mutex<Self>> {
        replica.become_leader(epoch);
        Arc::new(Mutex::new(Self {
            replica,
            epoch,
            follower_offsets: BTreeMap::new(),
            followers,
            diverging_check: true,
        }))
    }

    fn check_epoch(&self, requested: LeaderEpoch) -> Option<LeaderError> {
        match requested.0.cmp(&self.epoch) {
            std::cmp::Ordering::Less => Some(LeaderError::FencedLeaderEpoch),
            std::cmp::Ordering::Greater => Some(LeaderError::UnknownLeaderEpoch),
            std::cmp::Ordering::Equal => None,
        }
    }

    /// HW = min(leader log end, every follower's fetch offset), never down.
    fn maybe_advance_high_watermark(&self) {
        let mut candidate = self.replica.durable_offset();
        for f in &self.followers {
            match self.follower_offsets.get(f) {
                Some(&o) => candidate = candidate.min(o),
                None => return,
            }
        }
        if candidate > self.replica.hw() {
            self.replica.set_hw(candidate);
        }
    }
}

/// What one fetcher sent, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Sent {
    /// A Fetch at this offset (of the one partition), with the follower's durable
    /// offset when it arrived.
    Fetch { offset: i64, durable: i64 },
    /// OffsetsForLeaderEpoch for this epoch.
    Epoch(i32),
    /// ListOffsets earliest (-2) or latest (-1).
    ListOffsets(i64),
}

/// A follower's view of the leader, in process.
pub(super) struct InMemoryLeader {
    pub(super) leader: Arc<Mutex<LeaderState>>,
    pub(super) replica_id: i32,
    /// The follower's own replica, to record its durable offset at each fetch.
    pub(super) follower: Arc<Replica>,
    pub(super) sent: Arc<Mutex<Vec<Sent>>>,
}

impl InMemoryLeader {
    pub(super) fn new(
        leader: &Arc<Mutex<LeaderState>>,
        replica_id: i32,
        follower: &Arc<Replica>,
    ) -> Self {
        Self {
            leader: Arc::clone(leader),
            replica_id,
            follower: Arc::clone(follower),
            sent: Arc::new(Mutex::new(Vec::new())),
        }
    }
}

impl LeaderEndPoint for InMemoryLeader {
    fn broker_id(&self) -> i32 {
        0
    }

    async fn fetch(
        &mut self,
        request: FetchRequest,
    ) -> Result<Vec<FetchedPartition>, EndPointError> {
        let mut leader = self.leader.lock();
        let mut out = Vec::new();
        for p in request.partitions {
            self.sent.lock().push(Sent::Fetch {
                offset: p.fetch_offset.get(),
                durable: self.follower.durable_offset().get(),
            });
            let mut answer = FetchedPartition {
                topic_partition: p.topic_partition.clone(),
                error: None,
                high_watermark: leader.replica.hw(),
                log_start_offset: leader.replica.start(),
                diverging_epoch: None,
                records: bytes::Bytes::new(),
            };
            if let Some(error) = leader.check_epoch(p.current_leader_epoch) {
                answer.error = Some(error);
                out.push(answer);
                continue;
            }
            let (log_start, log_end) = (leader.replica.start(), leader.replica.end());
            if let (Some(last), true) = (p.last_fetched_epoch, leader.diverging_check) {
                let end = leader
                    .replica
                    .with_log(|log| log.leader_epochs().end_offset_for(last, log_end.get()));
                let diverging = match end {
                    None => Some(EpochEndOffset {
                        leader_epoch: -1,
                        end_offset: -1,
                    }),
                    Some((epoch, end)) if epoch < last || end < p.fetch_offset.get() => {
                        Some(EpochEndOffset {
                            leader_epoch: epoch.0,
                            end_offset: end,
                        })
                    }
                    Some(_) => None,
                };
                if diverging.is_some() {
                    answer.diverging_epoch = diverging;
                    out.push(answer);
                    continue;
                }
            }
            if p.fetch_offset < log_start || p.fetch_offset > log_end {
                answer.error = Some(LeaderError::OffsetOutOfRange);
                out.push(answer);
                continue;
            }
            let max_bytes = usize::try_from(p.partition_max_bytes).unwrap_or(0);
            answer.records = leader
                .replica
                .with_log(|log| log.read(p.fetch_offset, max_bytes, Offset::MAX, true))
                .expect("leader read")
                .records;
            leader
                .follower_offsets
                .insert(self.replica_id, p.fetch_offset);
            leader.maybe_advance_high_watermark();
            answer.high_watermark = leader.replica.hw();
            out.push(answer);
        }
        Ok(out)
    }

    async fn fetch_epoch_end_offsets(
        &mut self,
        partitions: Vec<EpochRequest>,
    ) -> Result<Vec<EpochResult>, EndPointError> {
        let leader = self.leader.lock();
        let mut out = Vec::new();
        for p in partitions {
            self.sent.lock().push(Sent::Epoch(p.leader_epoch.0));
            let error = leader.check_epoch(p.current_leader_epoch);
            let end = leader.replica.with_log(|log| {
                let log_end = log.log_end_offset().get();
                log.leader_epochs().end_offset_for(p.leader_epoch, log_end)
            });
            out.push(EpochResult {
                topic_partition: p.topic_partition,
                error,
                end: end.map_or(
                    EpochEndOffset {
                        leader_epoch: -1,
                        end_offset: -1,
                    },
                    |(e, o)| EpochEndOffset {
                        leader_epoch: e.0,
                        end_offset: o,
                    },
                ),
            });
        }
        Ok(out)
    }

    async fn fetch_earliest_offset(
        &mut self,
        _tp: &TopicPartition,
        current_leader_epoch: LeaderEpoch,
    ) -> Result<Offset, EndPointError> {
        self.sent.lock().push(Sent::ListOffsets(-2));
        let leader = self.leader.lock();
        match leader.check_epoch(current_leader_epoch) {
            Some(error) => Err(EndPointError::Refused(error)),
            None => Ok(leader.replica.start()),
        }
    }

    async fn fetch_latest_offset(
        &mut self,
        _tp: &TopicPartition,
        current_leader_epoch: LeaderEpoch,
    ) -> Result<Offset, EndPointError> {
        self.sent.lock().push(Sent::ListOffsets(-1));
        let leader = self.leader.lock();
        match leader.check_epoch(current_leader_epoch) {
            Some(error) => Err(EndPointError::Refused(error)),
            None => Ok(leader.replica.end()),
        }
    }
}
