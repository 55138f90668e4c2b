//! `Partition`: one topic-partition hosted by this broker, owning its `Log`, high watermark
//! and the waiters on it.
//!
//! Offsets, for the replication to come: the *log end* (next offset to assign), the
//! *durable offset* (everything below is fsync'd: the log's recovery point), the *high
//! watermark* (what consumers may read and acks=all waits for) and the *last stable
//! offset* (what read_committed consumers may read), with
//! `log_start <= last_stable <= high_watermark <= log_end` asserted wherever they are
//! read together. The high watermark is advanced only by [`Partition::maybe_advance_high_watermark`]:
//! on a single node it follows the durable offset (or the log end when flushing is left
//! to the OS); with replication it will follow the in-sync replicas instead.
//!
//! With replication the partition also has a role (leader, follower, or none yet), the
//! ISR and, on the leader, each follower's position ([`leader::Leadership`]); the high
//! watermark then is the least counted offset over the maximal ISR: the leader counts its
//! durable offset (its log end when the OS flushes) and each follower its fetch offset.
//!
//! Thread-safety: the log sits behind a mutex taken only for short, bounded work (an append of
//! one request's batches, one read of at most a fetch's byte budget); it is never held across
//! an `.await`. Leadership sits behind a read-write lock: appends hold it shared (so no append
//! slips in after the partition stopped leading), role changes and follower-state updates
//! exclusively. Lock order: leadership, then log; never the other way. Offsets visible to
//! others are published through `watch` channels (high watermark, log end, role), which wake
//! acks=all producers and long-polling fetches without any polling.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use logbook_storage::{
    AbortedTxn, ActiveProducer, AppendOutcome, EndTransactionMarker, LeaderEpoch, Log, LogConfig,
    Offset, ReadResult, SliceRead, TxnResult, ValidatedBatches,
};
use parking_lot::{Mutex, RwLock};
use tokio::sync::watch;

use crate::flusher::{Flush, FlushPolicy, Flusher};
use crate::Error;

mod acks;
mod follower;
mod follower_fetch;
pub mod leader;
mod replica_state;
mod role_change;

pub use follower_fetch::{FollowerFetch, FollowerFetchResult};
pub use leader::{
    AlterPartitionCallback, AlterPartitionCommitted, AlterPartitionError, AlterPartitionRequest,
    AlterPartitionSender, AnyBrokerEligible, IsrEligibility, IsrMember, IsrState, Leadership,
    NoController, PartitionState, Role,
};
pub use replica_state::ReplicaState;

/// Kafka's default `replica.lag.time.max.ms`: a follower that has not caught up with the
/// leader's log end for this long leaves the ISR.
pub const REPLICA_LAG_TIME_MAX_MS_DEFAULT: i64 = 30_000;

/// How a replica is opened (see [`Partition::open_replica`]).
#[derive(Clone)]
pub struct ReplicaOptions {
    /// This broker's id.
    pub local_broker_id: i32,
    /// The high watermark from the replication-offset checkpoint, if it has one for this
    /// partition; the opened replica's high watermark is `min(checkpoint, log end)` (0
    /// without one) until it becomes leader or its leader tells it more.
    pub checkpointed_high_watermark: Option<Offset>,
    /// Where ISR changes go.
    pub alter_partition: Arc<dyn AlterPartitionSender>,
    /// `replica.lag.time.max.ms`.
    pub replica_lag_time_max_ms: i64,
    /// Which brokers may count in the ISR (the cluster metadata).
    pub isr_eligibility: Arc<dyn IsrEligibility>,
}

impl ReplicaOptions {
    /// A single node's options: broker `local_broker_id`, no controller, no checkpoint.
    #[must_use]
    pub fn single_node(local_broker_id: i32) -> Self {
        Self {
            local_broker_id,
            checkpointed_high_watermark: None,
            alter_partition: Arc::new(NoController),
            replica_lag_time_max_ms: REPLICA_LAG_TIME_MAX_MS_DEFAULT,
            isr_eligibility: Arc::new(AnyBrokerEligible),
        }
    }
}

/// The offset a DeleteRecords request gives to mean "up to the high watermark" (Kafka's
/// `DeleteRecordsRequest.HIGH_WATERMARK`).
pub const DELETE_TO_HIGH_WATERMARK: Offset = Offset(-1);

/// The log and the state that must change atomically with it.
struct LogState {
    log: Log,
}

pub use logbook_common::TopicPartition;

/// The offsets a fetch or ListOffsets answer reports, read together; always
/// `log_start_offset <= last_stable_offset <= high_watermark <= log_end_offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionOffsets {
    /// First offset still in the log.
    pub log_start_offset: Offset,
    /// One past the last offset read_committed consumers may read: the first offset of
    /// the oldest transaction not yet stable (open, or its marker not yet below the high
    /// watermark), or the high watermark when there is none or it is lower.
    pub last_stable_offset: Offset,
    /// One past the last offset visible to consumers (durable on a single node).
    pub high_watermark: Offset,
    /// One past the last offset appended (possibly not yet durable).
    pub log_end_offset: Offset,
}

impl PartitionOffsets {
    /// Asserts the offsets' order; a violation is our bug, and serving it would hand
    /// clients offsets that move backwards.
    fn checked(self) -> Self {
        let PartitionOffsets {
            log_start_offset: start,
            last_stable_offset: lso,
            high_watermark: hw,
            log_end_offset: end,
        } = self;
        assert!(start <= lso, "log start {start} > last stable offset {lso}");
        assert!(lso <= hw, "last stable offset {lso} > high watermark {hw}");
        assert!(hw <= end, "high watermark {hw} > log end {end}");
        self
    }
}

/// What a read_committed read returns (see [`Partition::read_slices_committed`]).
#[derive(Debug)]
pub struct CommittedRead {
    /// The batches, below the last stable offset.
    pub read: SliceRead,
    /// The partition's offsets when the batches were selected.
    pub offsets: PartitionOffsets,
    /// Aborted transactions overlapping the range read, in marker order.
    pub aborted_transactions: Vec<AbortedTxn>,
}

/// One hosted partition. See the module docs for the locking rules.
pub struct Partition {
    topic_partition: TopicPartition,
    log: Mutex<Option<LogState>>,
    /// The high watermark; receivers wake on every advance.
    high_watermark: watch::Sender<Offset>,
    /// Set when the partition has appends the flusher has not yet picked up.
    flush_queued: AtomicBool,
    /// Held by the flusher thread syncing this partition, so two flusher threads never sync
    /// it at once (their checkpoint writes share temporary file names, and an older
    /// checkpoint must never overwrite a newer one). Never taken by appends.
    sync_lock: Mutex<()>,
    /// Set once the log failed (see `Log::mark_failed`), so the per-request check in
    /// `ReplicaManager::get_partition_or_error` costs an atomic load, not the log lock.
    offline: AtomicBool,
    flusher: Flusher,
    /// The current leader epoch (a copy of `leadership.leader_epoch` for lock-free checks).
    leader_epoch: AtomicI32,
    /// Role, ISR and followers' positions. See the module docs for the lock order.
    leadership: RwLock<Leadership>,
    /// The role, for acks=all waiters: they fail when this partition stops leading.
    role: watch::Sender<Role>,
    /// The log end; followers' long polls wake on it.
    log_end: watch::Sender<Offset>,
    /// The durable offset (everything below is fsync'd), apart from the high watermark: a
    /// follower's fetcher waits on it before its next fetch (plan §0), while its high
    /// watermark comes from the leader. Woken with no change when an fsync fails (the
    /// waiters then find the partition offline).
    durable: watch::Sender<Offset>,
    /// The offset this replica counts toward the high watermark as leader: its durable
    /// offset, or its log end when the OS flushes.
    leader_offset: AtomicI64,
    /// The topic's `min.insync.replicas`: from the log config at open, then as of the last
    /// produce or config change.
    min_insync_replicas: AtomicUsize,
    /// `replica.lag.time.max.ms`.
    replica_lag_time_max_ms: i64,
    /// Where ISR changes go.
    alter_partition: Arc<dyn AlterPartitionSender>,
    /// Which brokers may count in the ISR.
    isr_eligibility: Arc<dyn IsrEligibility>,
    /// Lets the partition hand the flusher a reference to itself.
    self_weak: Weak<Partition>,
}

impl Partition {
    /// Opens (recovering if needed) the log of `topic_partition` in `dir` as the leader of a
    /// single node (replicas and ISR: broker 0 alone), as every partition was before
    /// replication: everything recovery kept is on disk, so it is all visible.
    ///
    /// # Errors
    /// Storage errors from opening or recovering the log.
    pub fn open(
        topic_partition: TopicPartition,
        dir: &std::path::Path,
        config: LogConfig,
        flusher: Flusher,
    ) -> Result<Arc<Self>, Error> {
        let partition = Self::open_replica(
            topic_partition,
            dir,
            config,
            flusher,
            ReplicaOptions::single_node(0),
        )?;
        partition.become_sole_leader();
        Ok(partition)
    }

    /// Opens (recovering if needed) the log of `topic_partition` in `dir` with no role yet:
    /// it serves no client until [`Partition::become_leader`] or
    /// [`Partition::become_follower`]. Its high watermark is the checkpointed one, never past
    /// the log end: a restarted replica's tail may not be committed (opening with the log
    /// end would show consumers records a new leader then truncates).
    ///
    /// # Errors
    /// Storage errors from opening or recovering the log.
    pub fn open_replica(
        topic_partition: TopicPartition,
        dir: &std::path::Path,
        config: LogConfig,
        flusher: Flusher,
        options: ReplicaOptions,
    ) -> Result<Arc<Self>, Error> {
        let min_insync_replicas = config.min_insync_replicas.max(1);
        let log = Log::open(dir, config)?;
        let log_end_offset = log.log_end_offset();
        let start = options
            .checkpointed_high_watermark
            .unwrap_or(Offset(0))
            .min(log_end_offset)
            .max(log.log_start_offset());
        let (high_watermark, _) = watch::channel(start);
        let (role, _) = watch::channel(Role::None);
        let (log_end, _) = watch::channel(log_end_offset);
        // Everything recovery kept is on disk.
        let (durable, _) = watch::channel(log_end_offset);
        let leader_epoch = log.leader_epochs().latest_epoch().unwrap_or_default();
        Ok(Arc::new_cyclic(|self_weak| Partition {
            topic_partition,
            log: Mutex::new(Some(LogState { log })),
            high_watermark,
            flush_queued: AtomicBool::new(false),
            sync_lock: Mutex::new(()),
            offline: AtomicBool::new(false),
            flusher,
            leader_epoch: AtomicI32::new(leader_epoch.0),
            leadership: RwLock::new(Leadership::new(options.local_broker_id, leader_epoch)),
            role,
            log_end,
            durable,
            // Everything recovery kept is on disk.
            leader_offset: AtomicI64::new(log_end_offset.get()),
            min_insync_replicas: AtomicUsize::new(min_insync_replicas),
            replica_lag_time_max_ms: options.replica_lag_time_max_ms,
            alter_partition: options.alter_partition,
            isr_eligibility: options.isr_eligibility,
            self_weak: self_weak.clone(),
        }))
    }

    /// The partition's name.
    #[must_use]
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.topic_partition
    }

    /// The current leader epoch (constant on a single node until leadership exists).
    #[must_use]
    pub fn leader_epoch(&self) -> LeaderEpoch {
        LeaderEpoch(self.leader_epoch.load(Ordering::Acquire))
    }

    /// Checks a request's `current_leader_epoch` (-1: the client does not know it), as
    /// Kafka's `Partition.checkCurrentLeaderEpoch` does: an older epoch is a fenced client
    /// (FENCED_LEADER_EPOCH), a newer one means this broker has not caught up with the
    /// controller yet (UNKNOWN_LEADER_EPOCH).
    ///
    /// # Errors
    /// `FencedLeaderEpoch` or `UnknownLeaderEpoch`.
    pub fn check_leader_epoch(&self, requested: i32) -> Result<(), Error> {
        let current = self.leader_epoch();
        match requested {
            -1 => Ok(()),
            e if e < current.0 => Err(Error::FencedLeaderEpoch {
                topic_partition: self.topic_partition.clone(),
                requested: e,
                current,
            }),
            e if e > current.0 => Err(Error::UnknownLeaderEpoch {
                topic_partition: self.topic_partition.clone(),
                requested: e,
                current,
            }),
            _ => Ok(()),
        }
    }

    /// Why the partition is offline (a disk failure took its log down), if it is.
    #[must_use]
    pub fn offline_reason(&self) -> Option<String> {
        if !self.offline.load(Ordering::Acquire) {
            return None;
        }
        self.log
            .lock()
            .as_ref()
            .and_then(|state| state.log.failure().map(str::to_owned))
    }

    pub(crate) fn with_log<T>(
        &self,
        f: impl FnOnce(&mut Log) -> Result<T, logbook_storage::Error>,
    ) -> Result<T, Error> {
        let mut guard = self.log.lock();
        let state = guard
            .as_mut()
            .ok_or_else(|| Error::Closed(self.topic_partition.clone()))?;
        Ok(f(&mut state.log)?)
    }

    /// Appends validated batches, assigning offsets in place, and schedules the fsync that
    /// will make them visible. Returns at once: use [`Partition::wait_durable`] for acks=all.
    /// A retried batch of an idempotent producer is not appended again (the log's producer
    /// state recognises it, also after a restart): the outcome then carries its offsets.
    ///
    /// # Errors
    /// Storage errors (sequence errors of idempotent producers among them, and
    /// `LogFailed` once a disk failure took the log offline); the partition being closed.
    pub fn append(&self, batches: &[u8]) -> Result<AppendOutcome, Error> {
        self.append_with(None, |log, epoch| log.append(batches, epoch))
    }

    /// Appends a produce payload as the produce door validated it (its headers parsed
    /// once there, not again here); otherwise as [`Partition::append`].
    ///
    /// # Errors
    /// As [`Partition::append`].
    pub fn append_validated(&self, batches: &ValidatedBatches) -> Result<AppendOutcome, Error> {
        self.append_with(None, |log, epoch| log.append_validated(batches, epoch))
    }

    /// Appends under the leadership lock (shared), so no append slips in after the
    /// partition stopped leading, and never in an epoch other than the one it leads in.
    /// `acks_all_min_isr`: refuse (NOT_ENOUGH_REPLICAS) when the committed ISR is smaller.
    fn append_with(
        &self,
        acks_all_min_isr: Option<usize>,
        append: impl FnOnce(&mut Log, i32) -> Result<AppendOutcome, logbook_storage::Error>,
    ) -> Result<AppendOutcome, Error> {
        let (outcome, roll_work) = {
            let leadership = self.leadership.read();
            if !leadership.is_leader() {
                return Err(Error::NotLeaderOrFollower(self.topic_partition.clone()));
            }
            if let Some(min_isr) = acks_all_min_isr {
                let min_isr = leadership.effective_min_isr(min_isr);
                let isr = leadership.isr.committed().len();
                if isr < min_isr {
                    return Err(Error::NotEnoughReplicas {
                        topic_partition: self.topic_partition.clone(),
                        isr,
                        min_insync_replicas: min_isr,
                    });
                }
            }
            let mut guard = self.log.lock();
            let state = guard
                .as_mut()
                .ok_or_else(|| Error::Closed(self.topic_partition.clone()))?;
            let outcome = match append(&mut state.log, leadership.leader_epoch.0) {
                Ok(outcome) => outcome,
                Err(e) => {
                    if let Some(failure) = state.log.failure() {
                        self.go_offline(failure.to_string());
                    }
                    return Err(e.into());
                }
            };
            (outcome, state.log.has_roll_work())
        };
        let AppendOutcome::Appended(info) = outcome else {
            return Ok(outcome);
        };
        self.log_end.send_if_modified(|end| {
            let advanced = info.log_end_offset > *end;
            *end = (*end).max(info.log_end_offset);
            advanced
        });
        match self.flusher.policy() {
            FlushPolicy::EveryWrite => self.schedule_flush(),
            FlushPolicy::Os => {
                // A roll's fsyncs (indexes, directory, producer snapshot) still run, on
                // the flusher, whatever the policy.
                if roll_work {
                    self.schedule_flush();
                }
                self.leader_offset_reached(info.log_end_offset);
            }
        }
        Ok(outcome)
    }

    /// Appends a transaction marker (commit or abort) for `producer_id` at
    /// `producer_epoch`, written by the transaction coordinator of `coordinator_epoch`
    /// (Kafka's WriteTxnMarkers on one partition), and schedules its fsync. Returns the
    /// marker's offset; the caller `wait_durable`s past it before answering.
    ///
    /// # Errors
    /// Storage errors: `InvalidProducerEpoch` for an epoch older than the producer's,
    /// `TransactionCoordinatorFenced` for an older coordinator epoch, `LogFailed`; the
    /// partition being closed.
    pub fn write_txn_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        result: TxnResult,
    ) -> Result<Offset, Error> {
        let marker = EndTransactionMarker {
            result,
            coordinator_epoch,
        };
        let outcome = self.append_with(None, |log, leader_epoch| {
            log.append_txn_marker(producer_id, producer_epoch, marker, leader_epoch)
                .map(AppendOutcome::Appended)
        })?;
        match outcome {
            AppendOutcome::Appended(info) => {
                crate::failpoint::txn_marker_appended();
                Ok(info.first_offset)
            }
            AppendOutcome::Duplicate(_) => unreachable!("append_txn_marker never deduplicates"),
        }
    }

    pub(crate) fn self_weak(&self) -> Weak<Partition> {
        self.self_weak.clone()
    }

    fn schedule_flush(&self) {
        if !self.flush_queued.swap(true, Ordering::AcqRel) {
            let dirty: Weak<dyn Flush> = self.self_weak.clone();
            self.flusher.enqueue(dirty);
        }
    }

    /// Called by the flusher: makes everything appended so far durable, then publishes the
    /// new high watermark. The log lock is held only to capture file handles and to record
    /// the result, never during the fsync itself.
    pub(crate) fn flush(&self) {
        let _syncing = self.sync_lock.lock();
        // Clear first: an append that races with this flush queues another one.
        self.flush_queued.store(false, Ordering::Release);
        let (handle, durable_before) = {
            let mut guard = self.log.lock();
            let Some(state) = guard.as_mut() else { return };
            match state.log.sync_handle() {
                Ok(handle) => (handle, state.log.recovery_point()),
                // Failed earlier: nothing more becomes durable.
                Err(_) => return,
            }
        };
        let started = std::time::Instant::now();
        match handle.sync() {
            Ok(synced) => {
                // One sync makes durable every write since the last: the group commit's
                // batch, in offsets.
                metrics::histogram!("logbook_fsync_seconds")
                    .record(started.elapsed().as_secs_f64());
                metrics::histogram!("logbook_fsync_batch_records")
                    .record((synced.durable_offset.get() - durable_before.get()).max(0) as f64);
                let durable = self.log.lock().as_mut().map(|state| {
                    state.log.mark_durable(synced);
                    state.log.recovery_point()
                });
                // The high watermark first, the durable offset after: an acks=1 answer waits
                // for the durable offset (`wait_for_acks_leader`), and must find the records
                // visible wherever the leader alone decides the high watermark.
                if self.flusher.policy() == FlushPolicy::EveryWrite {
                    self.leader_offset_reached(synced.durable_offset);
                }
                if let Some(durable) = durable {
                    self.durable.send_if_modified(|d| {
                        let advanced = durable > *d;
                        *d = (*d).max(durable);
                        advanced
                    });
                }
            }
            Err(e) => {
                // After a failed fsync Linux may have dropped the dirty pages and cleared
                // the error, so a retry could "succeed" over lost data. The log fails for
                // good: the high watermark stays where the last good sync left it, appends
                // get KAFKA_STORAGE_ERROR, and only a restart (recovery) brings it back.
                let open = match self.log.lock().as_mut() {
                    Some(state) => {
                        state.log.mark_failed(format!("fsync failed: {e}"));
                        true
                    }
                    None => false,
                };
                if !open {
                    // Closed (deleted, or shutting down) while syncing: not a disk failure
                    // anyone will read from.
                    tracing::debug!(partition = %self.topic_partition, error = %e, "fsync of a closed partition failed");
                    return;
                }
                self.go_offline(format!("fsync failed: {e}"));
                // Wake the fetcher waiting for durability: it finds the partition offline.
                self.durable.send_modify(|_| {});
                tracing::error!(partition = %self.topic_partition, error = %e, "fsync failed; partition offline until restart");
            }
        }
    }

    /// Takes the partition offline for good (until a restart recovers its log) and reports
    /// its data directory failed.
    pub(crate) fn go_offline(&self, reason: String) {
        self.offline.store(true, Ordering::Release);
        self.flusher
            .report_log_dir_failure(format!("{}: {reason}", self.topic_partition));
    }

    /// Records that this replica's own counted offset (durable offset, or log end when
    /// the OS flushes) reached `offset`, and advances the high watermark if it leads.
    fn leader_offset_reached(&self, offset: Offset) {
        self.leader_offset.fetch_max(offset.get(), Ordering::AcqRel);
        self.maybe_advance_high_watermark();
    }

    /// Moves the high watermark up to the least counted offset over the maximal ISR (see
    /// [`Leadership::high_watermark_candidate`]), never down; only the leader does. On a
    /// single node that is the durable offset (or the log end when the OS flushes). Waiters
    /// (acks=all, fetch long-polls) wake on every advance.
    fn maybe_advance_high_watermark(&self) {
        let leader_offset = Offset(self.leader_offset.load(Ordering::Acquire));
        let min_isr = self.min_insync_replicas.load(Ordering::Acquire);
        let now_ms = now_ms();
        let log_end = *self.log_end.borrow();
        let candidate = self.leadership.read().high_watermark_candidate(
            leader_offset,
            min_isr,
            log_end,
            now_ms,
            self.replica_lag_time_max_ms,
            self.isr_eligibility.as_ref(),
        );
        let Some(candidate) = candidate else { return };
        self.high_watermark.send_if_modified(|hw| {
            if candidate > *hw {
                *hw = candidate;
                true
            } else {
                false
            }
        });
    }

    /// The high watermark: one past the last record consumers may read.
    #[must_use]
    pub fn high_watermark(&self) -> Offset {
        *self.high_watermark.borrow()
    }

    /// Log start, last stable offset, high watermark and log end, consistent with each
    /// other (read under the log's lock).
    ///
    /// # Errors
    /// The partition being closed.
    pub fn offsets(&self) -> Result<PartitionOffsets, Error> {
        let high_watermark = self.high_watermark();
        self.with_log(|log| Ok(Self::offsets_of(log, high_watermark)))
    }

    /// The offsets of `log` given the published `high_watermark`, under the log's lock.
    /// The high watermark may trail a log start that DeleteRecords or retention moved past
    /// it (only below what was ever visible), and may lead a log end that a replication
    /// truncation moved back; both are clamped. The last stable offset is Kafka's
    /// `min(firstUnstableOffset, highWatermark)`.
    fn offsets_of(log: &mut Log, high_watermark: Offset) -> PartitionOffsets {
        let (log_start_offset, log_end_offset) = (log.log_start_offset(), log.log_end_offset());
        let high_watermark = high_watermark.min(log_end_offset).max(log_start_offset);
        let last_stable_offset = log
            .first_unstable_offset(high_watermark)
            .map_or(high_watermark, |first| first.min(high_watermark));
        PartitionOffsets {
            log_start_offset,
            last_stable_offset,
            high_watermark,
            log_end_offset,
        }
        .checked()
    }

    /// Every producer the partition's log tracks (DescribeProducers), by producer id.
    ///
    /// # Errors
    /// The partition being closed.
    pub fn active_producers(&self) -> Result<Vec<ActiveProducer>, Error> {
        self.with_log(|log| Ok(log.active_producers()))
    }

    /// A receiver that wakes whenever the high watermark advances; subscribe *before* reading
    /// so no advance between the read and the wait is missed.
    #[must_use]
    pub fn subscribe(&self) -> watch::Receiver<Offset> {
        self.high_watermark.subscribe()
    }

    /// Reads whole batches from `offset`, never past the high watermark.
    ///
    /// # Errors
    /// `OffsetOutOfRange` from storage; I/O errors; the partition being closed.
    pub fn read(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<ReadResult, Error> {
        let high_watermark = self.high_watermark();
        self.with_log(|log| log.read(offset, max_bytes, high_watermark, min_one_batch))
    }

    /// Reads whole batches from `offset` up to the log end, not the high watermark: a
    /// coordinator loading its partition as the new leader replays everything this log
    /// holds (as Kafka's loaders read to the log end offset): a new leader's log is what
    /// will be committed, and its high watermark may not yet have caught up with what the
    /// old leader committed.
    ///
    /// # Errors
    /// `OffsetOutOfRange` from storage; I/O errors; the partition being closed.
    pub fn read_to_log_end(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<ReadResult, Error> {
        self.with_log(|log| {
            let end = log.log_end_offset();
            log.read(offset, max_bytes, end, min_one_batch)
        })
    }

    /// Selects whole batches from `offset`, never past the high watermark, as file ranges
    /// to send without reading them (see `Log::read_slices`).
    ///
    /// # Errors
    /// `OffsetOutOfRange` from storage; I/O errors; the partition being closed.
    pub fn read_slices(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<SliceRead, Error> {
        let high_watermark = self.high_watermark();
        self.with_log(|log| log.read_slices(offset, max_bytes, high_watermark, min_one_batch))
    }

    /// Selects whole batches from `offset` for a read_committed consumer: never past the
    /// last stable offset, with the aborted transactions overlapping the range from
    /// `offset` to it (Kafka's `collectAbortedTransactions`; the upper bound is the last
    /// stable offset, as Kafka's own upper bound may also reach past the data returned —
    /// clients apply an entry only to the batches they get), and the offsets as of the
    /// same moment. The log's lock is taken once.
    ///
    /// # Errors
    /// As [`Partition::read_slices`].
    pub fn read_slices_committed(
        &self,
        offset: Offset,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<CommittedRead, Error> {
        let high_watermark = self.high_watermark();
        self.with_log(|log| {
            let offsets = Self::offsets_of(log, high_watermark);
            let lso = offsets.last_stable_offset;
            let read = log.read_slices(offset, max_bytes, lso, min_one_batch)?;
            let aborted_transactions = if read.bytes > 0 {
                log.collect_aborted_transactions(offset, lso)
            } else {
                Vec::new()
            };
            Ok(CommittedRead {
                read,
                offsets,
                aborted_transactions,
            })
        })
    }

    /// The first batch below the high watermark whose max timestamp is at or after
    /// `timestamp_ms` (ListOffsets by timestamp; the caller decodes it for the record).
    ///
    /// # Errors
    /// Storage errors; the partition being closed.
    pub fn batch_for_timestamp(&self, timestamp_ms: i64) -> Result<Option<bytes::Bytes>, Error> {
        let high_watermark = self.high_watermark();
        self.with_log(|log| log.batch_for_timestamp(timestamp_ms, high_watermark))
    }

    /// The leader epoch `offset` was written in, from the leader-epoch cache (ListOffsets
    /// EARLIEST answers it, KIP-320); `None` when the cache does not cover it.
    ///
    /// # Errors
    /// The partition being closed.
    pub fn epoch_for_offset(&self, offset: Offset) -> Result<Option<LeaderEpoch>, Error> {
        self.with_log(|log| Ok(log.leader_epochs().epoch_for_offset(offset.get())))
    }

    /// The batch below the high watermark holding the largest timestamp (ListOffsets
    /// MAX_TIMESTAMP).
    ///
    /// # Errors
    /// Storage errors; the partition being closed.
    pub fn batch_with_max_timestamp(&self) -> Result<Option<bytes::Bytes>, Error> {
        let high_watermark = self.high_watermark();
        self.with_log(|log| log.batch_with_max_timestamp(high_watermark))
    }

    /// Applies `retention.ms` / `retention.bytes` and the log start as of `now_ms`, never
    /// past the high watermark (Kafka's `deleteOldSegments`; an idle partition whose data
    /// all expired rolls a new empty segment and loses the rest); returns the segments
    /// removed. Blocking (the log-start checkpoint's fsyncs, file deletions): call off the async
    /// workers. The log lock is held only to pick the segments, never for the I/O.
    ///
    /// # Errors
    /// Storage errors; the partition being closed.
    pub fn apply_retention(&self, now_ms: i64) -> Result<usize, Error> {
        // Serialises log-start checkpoints with each other and with close.
        let _syncing = self.sync_lock.lock();
        let high_watermark = self.high_watermark();
        let (deletion, roll_work) = self.with_log(|log| {
            let deletion = log.take_retention_deletion(now_ms, high_watermark)?;
            Ok((deletion, log.has_roll_work()))
        })?;
        if roll_work {
            // The roll's directory fsync and producer snapshot run on the flusher.
            self.schedule_flush();
        }
        let Some(deletion) = deletion else {
            return Ok(0);
        };
        let count = deletion.segment_count();
        deletion.run()?;
        Ok(count)
    }

    /// Forgets idempotent producers silent for `producer_id_expiration_ms` (Kafka's
    /// `PeriodicProducerExpirationCheck`); returns how many.
    ///
    /// # Errors
    /// The partition being closed.
    pub fn expire_producers(
        &self,
        now_ms: i64,
        producer_id_expiration_ms: i64,
    ) -> Result<usize, Error> {
        self.with_log(|log| Ok(log.remove_expired_producers(now_ms, producer_id_expiration_ms)))
    }

    /// Raises the log start to `offset` (DeleteRecords; [`DELETE_TO_HIGH_WATERMARK`] means
    /// the high watermark), which may not pass the high watermark (Kafka:
    /// OFFSET_OUT_OF_RANGE), and deletes the segments wholly below it. Returns the log
    /// start (Kafka's low watermark) once it is checkpointed durably. Blocking: call off
    /// the async workers; the fsyncs run outside the log lock.
    ///
    /// # Errors
    /// `OffsetOutOfRange` below 0 or above the high watermark; storage errors.
    pub fn delete_records_before(&self, offset: Offset) -> Result<Offset, Error> {
        let _syncing = self.sync_lock.lock();
        let high_watermark = self.high_watermark();
        let deletion = self.with_log(|log| {
            // Clamped as in `offsets`.
            let high_watermark = high_watermark
                .min(log.log_end_offset())
                .max(log.log_start_offset());
            let offset = if offset == DELETE_TO_HIGH_WATERMARK {
                high_watermark
            } else {
                offset
            };
            if offset < Offset(0) || offset > high_watermark {
                return Err(logbook_storage::Error::OffsetOutOfRange {
                    requested: offset.get(),
                    log_start_offset: log.log_start_offset().get(),
                    log_end_offset: high_watermark.get(),
                });
            }
            log.take_log_start_deletion(offset)
        })?;
        if let Some(deletion) = deletion {
            deletion.run()?;
        }
        self.with_log(|log| Ok(log.log_start_offset()))
    }

    /// The low watermark (Kafka's `lowWatermarkIfLeader`): the lowest log start of this
    /// leader and the followers in its ISR, the offset below which no replica that could
    /// become leader still holds records.
    ///
    /// # Errors
    /// `NotLeaderOrFollower` when this broker does not lead the partition; the partition
    /// being closed.
    pub fn low_watermark(&self) -> Result<Offset, Error> {
        let followers = {
            let leadership = self.leadership.read();
            if !leadership.is_leader() {
                return Err(Error::NotLeaderOrFollower(self.topic_partition.clone()));
            }
            leadership.followers_low_watermark()
        };
        let local = self.with_log(|log| Ok(log.log_start_offset()))?;
        Ok(followers.map_or(local, |f| f.min(local)))
    }

    /// Bytes of the log's segments (what DescribeLogDirs reports as the partition size).
    ///
    /// # Errors
    /// The partition being closed.
    pub fn size_bytes(&self) -> Result<u64, Error> {
        self.with_log(|log| Ok(log.size_bytes()))
    }

    /// Applies a new log configuration (topic config change).
    ///
    /// # Errors
    /// The partition being closed.
    pub fn set_config(&self, config: LogConfig) -> Result<(), Error> {
        self.set_min_insync_replicas(config.min_insync_replicas);
        self.with_log(|log| {
            log.set_config(config);
            Ok(())
        })
    }

    /// Flushes and closes the log, writing the clean-shutdown checkpoint.
    ///
    /// # Errors
    /// Storage errors while flushing.
    pub fn close(&self) -> Result<(), Error> {
        // Wait for a sync in progress: close writes the same checkpoints.
        let _syncing = self.sync_lock.lock();
        let state = self.log.lock().take();
        // A fetcher waiting for durability finds the partition closed.
        self.durable.send_modify(|_| {});
        if let Some(state) = state {
            state.log.close()?;
        }
        Ok(())
    }

    /// Closes the log and removes its files (DeleteTopics).
    ///
    /// # Errors
    /// Storage errors while removing files.
    pub fn delete(&self) -> Result<(), Error> {
        let _syncing = self.sync_lock.lock();
        let state = self.log.lock().take();
        self.durable.send_modify(|_| {});
        if let Some(state) = state {
            state.log.delete()?;
        }
        Ok(())
    }
}

/// Milliseconds since the epoch, the clock of follower lag.
pub(crate) use logbook_common::now_ms;

/// The flusher's view of a partition (`flusher::Flush`).
impl Flush for Partition {
    fn start_writeback(&self) {
        let handle = self
            .log
            .lock()
            .as_ref()
            .map(|state| state.log.writeback_handle());
        if let Some(handle) = handle {
            handle.start();
        }
    }

    fn flush(&self) {
        Partition::flush(self);
    }
}

#[cfg(test)]
mod tests;
