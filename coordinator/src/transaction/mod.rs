//! `TransactionCoordinator`: Kafka's transaction coordinator (KIP-98) — producer ids and
//! epochs per `transactional.id`, the transaction state machine, and its durable state in
//! the compacted internal topic `__transaction_state`, on the same [`CoordinatorRuntime`]
//! as the group coordinator (one [`TransactionShard`] per partition of the topic).
//!
//! Every change of a transactional id is a record (Kafka's `TransactionLogValue`) appended
//! to its partition under the id's lock, installed at once (so the log order is the apply
//! order) and marked pending until durable: requests meanwhile get CONCURRENT_TRANSACTIONS,
//! and the client is answered only once it is durable. EndTxn writes PrepareCommit /
//! PrepareAbort, then a marker (`Partition::write_txn_marker`) to every partition of the
//! transaction, waits until they are durable, then writes CompleteCommit / CompleteAbort and
//! only then answers (on one node this is the simplest order that is correct; Kafka answers
//! after the Prepare record and sends markers in the background, which clients cannot tell
//! apart except by latency). A crash between the two leaves a Prepare record, and loading
//! the shard finishes the markers.
//!
//! Leadership of a `__transaction_state` partition moves between brokers: `load_partition`
//! (Kafka's `onElection`) takes the coordinator epoch that markers carry, so partitions
//! fence a deposed coordinator, and `unload_partition` (`onResignation`) drops the shard
//! and resigns its load (a `Lease` every entry holds), so an EndTxn still waiting for its
//! markers answers NOT_COORDINATOR rather than writing for a partition it no longer leads.
//!
//! Thread-safety: one `parking_lot::Mutex` per transactional id, held for bounded work
//! (checks, one append) and never across an `.await`.

mod markers;
pub mod metadata;
pub mod remote;
pub mod transaction_log;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use logbook_client::InterBrokerClient;
use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;

pub use metadata::{TransactionMetadata, TransactionResult, TransactionState};
pub use remote::{PartitionLeaders, Remote};

use super::partition_writer::{CoordinatorHost, CoordinatorPartition, WriteError};
use super::producer_id_manager::RpcProducerIdManager;
use super::runtime::framing::{replay_with, Replayed};
use super::runtime::{
    blocking, CoordinatorResult, CoordinatorRuntime, CoordinatorShard, LoadTicket, RuntimeError,
    TopicSpec,
};
use logbook_common::now_ms;
use metadata::is_epoch_exhausted;

pub use crate::TRANSACTION_STATE_TOPIC_NAME;

/// Why a transaction request failed; each variant is the Kafka error a client acts on,
/// mapped to its code in `errors::txn_error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    /// Empty transactional id, or a request that cannot be served as asked.
    #[error("invalid request")]
    InvalidRequest,
    /// `transaction.timeout.ms` above `transaction.max.timeout.ms` (or not positive).
    #[error("invalid transaction timeout")]
    InvalidTransactionTimeout,
    /// The coordinator cannot serve yet (its topic cannot be created, a write timed out).
    #[error("coordinator not available")]
    CoordinatorNotAvailable,
    /// This broker does not host the id's shard.
    #[error("not coordinator")]
    NotCoordinator,
    /// The id's shard is being replayed.
    #[error("coordinator load in progress")]
    CoordinatorLoadInProgress,
    /// A commit or abort (or another change) of this id is being completed; retry.
    #[error("concurrent transactions")]
    ConcurrentTransactions,
    /// A newer producer with this transactional id exists.
    #[error("producer fenced")]
    ProducerFenced,
    /// The producer id is not the one of this transactional id.
    #[error("invalid producer id mapping")]
    InvalidProducerIdMapping,
    /// The request contradicts the transaction's state.
    #[error("invalid transaction state")]
    InvalidTxnState,
    /// DescribeTransactions of an id the coordinator does not know.
    #[error("transactional id not found")]
    TransactionalIdNotFound,
    /// A partition added to a transaction does not exist.
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    /// Another partition of the same request failed, so this one was not added.
    #[error("operation not attempted")]
    OperationNotAttempted,
    /// The producer id block or the coordinator's log could not be written.
    #[error("storage failure")]
    Storage,
}

/// What the transaction coordinator needs of the group coordinator, and nothing more:
/// where a group's offsets live, and the transactional offset commits a marker written to
/// `__consumer_offsets` completes (Kafka's `GroupCoordinator.onTransactionCompleted`). The
/// group coordinator implements it; transactions never see groups otherwise.
pub trait GroupOffsets: Send + Sync {
    /// Whether `__consumer_offsets` exists (created on first use).
    fn offsets_topic_ready(&self) -> bool;
    /// The `__consumer_offsets` partition of `group_id`.
    fn partition_for(&self, group_id: &str) -> i32;
    /// Whether the group shard of `partition_index` can take a marker now (loaded here).
    fn accepts_txn_markers(&self, partition_index: i32) -> bool;
    /// Applies a commit or abort marker written at `marker_offset` to the pending
    /// transactional offsets of `producer_id` in that shard.
    fn complete_txn_offsets(
        &self,
        partition_index: i32,
        producer_id: i64,
        commit: bool,
        marker_offset: i64,
    );
}

/// What a coordinator runtime's refusal means to a transactional client (as for groups).
impl From<&RuntimeError> for TxnError {
    fn from(e: &RuntimeError) -> Self {
        match e {
            RuntimeError::NotCoordinator(_) | RuntimeError::Load { .. } => Self::NotCoordinator,
            RuntimeError::LoadInProgress(_) => Self::CoordinatorLoadInProgress,
        }
    }
}

/// Transaction coordinator settings (broker settings under Kafka's names).
#[derive(Clone, Debug)]
pub struct TransactionConfig {
    /// `transaction.state.log.num.partitions`, used when `__transaction_state` is created.
    pub state_log_num_partitions: i32,
    /// `transaction.state.log.segment.bytes`: its `segment.bytes`.
    pub state_log_segment_bytes: i32,
    /// `transaction.state.log.min.isr`: its `min.insync.replicas`.
    pub state_log_min_isr: i32,
    /// `transaction.max.timeout.ms`.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`.
    pub id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub abort_timed_out_interval_ms: u64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`.
    pub remove_expired_interval_ms: u64,
    /// How long a write to `__transaction_state` or a marker may take to become durable.
    pub write_timeout_ms: u64,
    /// The finalized `transaction.version` feature level: 2 serves transaction protocol v2
    /// (KIP-890 part 2); from 1 on, `__transaction_state` values are written flexible (v1).
    pub transaction_version: i16,
}

impl Default for TransactionConfig {
    /// Kafka's defaults.
    fn default() -> Self {
        TransactionConfig {
            state_log_num_partitions: 50,
            state_log_segment_bytes: 104_857_600,
            state_log_min_isr: 2,
            max_timeout_ms: 900_000,
            id_expiration_ms: 604_800_000,
            abort_timed_out_interval_ms: 10_000,
            remove_expired_interval_ms: 3_600_000,
            write_timeout_ms: 30_000,
            transaction_version: 2,
        }
    }
}

/// One transactional id: its metadata and whether a write of it is not yet durable.
pub struct TxnEntry {
    /// The installed metadata (written to the log, perhaps not yet durable).
    pub meta: TransactionMetadata,
    /// A transition is being written: requests get CONCURRENT_TRANSACTIONS.
    pending: bool,
    /// The metadata before the transition being written, put back if the write fails: Kafka
    /// clears its `pendingState` without transitioning, so the client's retry starts again
    /// from the state it knew (left in Prepare*, the transaction would answer
    /// CONCURRENT_TRANSACTIONS forever, with no completion to end it).
    previous: Option<TransactionMetadata>,
    /// The load of the shard this entry belongs to.
    lease: Arc<Lease>,
}

/// One load of a `__transaction_state` partition by this broker (Kafka's
/// `TxnMetadataCacheEntry.coordinatorEpoch` plus its resignation): every entry of the shard
/// holds it, so an operation that outlives the load (EndTxn waiting for its markers, a
/// completion after a timeout) sees that this broker is no longer the coordinator and
/// answers NOT_COORDINATOR instead of writing for a partition it does not lead.
struct Lease {
    /// The coordinator epoch given at load (the partition's leader epoch); markers carry it
    /// so partitions fence a deposed coordinator. Unset while the load is finishing:
    /// requests then get COORDINATOR_LOAD_IN_PROGRESS.
    coordinator_epoch: OnceLock<i32>,
    /// Cancelled at unload (Kafka's `onResignation`).
    resigned: CancellationToken,
}

impl Lease {
    fn new() -> Arc<Self> {
        Arc::new(Lease {
            coordinator_epoch: OnceLock::new(),
            resigned: CancellationToken::new(),
        })
    }

    /// The coordinator epoch, or why this load cannot serve.
    fn coordinator_epoch(&self) -> Result<i32, TxnError> {
        if self.resigned.is_cancelled() {
            return Err(TxnError::NotCoordinator);
        }
        self.coordinator_epoch
            .get()
            .copied()
            .ok_or(TxnError::CoordinatorLoadInProgress)
    }
}

type Shared = Arc<Mutex<TxnEntry>>;

/// The transactional ids of one `__transaction_state` partition: the transaction
/// coordinator's [`CoordinatorShard`], rebuilt from that partition only.
pub struct TransactionShard {
    transactions: RwLock<HashMap<String, Shared>>,
    lease: Arc<Lease>,
}

impl CoordinatorShard for TransactionShard {
    fn replay(partition_index: i32, partition: &dyn CoordinatorPartition) -> Result<Self, String> {
        let records = replay_with(partition, |record| match record {
            Replayed::Data { key, value, .. } => {
                transaction_log::decode_record(key, value).map(Some)
            }
            Replayed::Marker { .. } => Ok(None),
        })
        .map_err(|e| format!("{}: {e}", partition.name()))?;
        let shard = TransactionShard {
            transactions: RwLock::new(HashMap::new()),
            lease: Lease::new(),
        };
        {
            let mut map = shard.transactions.write();
            for (id, meta) in records {
                match meta {
                    Some(meta) => {
                        map.insert(
                            id,
                            Arc::new(Mutex::new(TxnEntry {
                                meta,
                                pending: false,
                                previous: None,
                                lease: Arc::clone(&shard.lease),
                            })),
                        );
                    }
                    None => {
                        map.remove(&id);
                    }
                }
            }
        }
        tracing::info!(
            partition = partition_index,
            transactional_ids = shard.transactions.read().len(),
            "loaded transactions"
        );
        Ok(shard)
    }
}

impl TransactionShard {
    fn get(&self, id: &str) -> Option<Shared> {
        self.transactions.read().get(id).cloned()
    }

    fn all(&self) -> Vec<Shared> {
        self.transactions.read().values().cloned().collect()
    }
}

/// A write to `__transaction_state` that must become durable before the client is answered.
struct Durable {
    partition: Arc<dyn CoordinatorPartition>,
    end_offset: i64,
}

/// What `describe` / `list` report of one transactional id.
#[derive(Clone, Debug)]
pub struct TransactionListing {
    /// The metadata.
    pub meta: TransactionMetadata,
}

/// First wait before a background completion tries again (Kafka's marker channel retries
/// every `retry.backoff.ms`); it doubles up to [`COMPLETION_RETRY_BACKOFF_MAX`].
const COMPLETION_RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// Longest wait between two attempts of a background completion.
const COMPLETION_RETRY_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// The transaction coordinator of this broker. See the module docs.
pub struct TransactionCoordinator {
    config: TransactionConfig,
    /// One [`TransactionShard`] per loaded `__transaction_state` partition: its timers,
    /// the topic's lifecycle and the write path.
    runtime: Arc<CoordinatorRuntime<TransactionShard>>,
    /// The broker's partitions, for the markers of transactions' data partitions.
    host: Arc<dyn CoordinatorHost>,
    groups: Arc<dyn GroupOffsets>,
    /// Producer ids from the controller's blocks (KIP-730).
    producer_ids: Arc<RpcProducerIdManager>,
    /// Other brokers, once the cluster is wired: markers for partitions led elsewhere and
    /// KIP-890 checks for transactions coordinated elsewhere go there.
    remote: OnceLock<Remote>,
    /// `__transaction_state`'s partition count: the existing topic's, else
    /// `state_log_num_partitions`.
    state_partitions: i32,
    shutdown: CancellationToken,
    self_weak: Weak<TransactionCoordinator>,
}

impl TransactionCoordinator {
    /// Loads every partition of `__transaction_state` if it exists (a single node leads
    /// them all) and finishes the commits and aborts a crash interrupted; the topic is
    /// created on first use otherwise. Call from within the tokio runtime; blocking I/O.
    ///
    /// # Errors
    /// The topic's log cannot be read.
    pub fn load(
        host: &Arc<dyn CoordinatorHost>,
        groups: Arc<dyn GroupOffsets>,
        producer_ids: Arc<RpcProducerIdManager>,
        config: TransactionConfig,
    ) -> Result<Arc<Self>, String> {
        let state_partitions = host
            .partition_count(TRANSACTION_STATE_TOPIC_NAME)
            .unwrap_or(config.state_log_num_partitions);
        let shutdown = CancellationToken::new();
        let coordinator = Arc::new_cyclic(|self_weak| TransactionCoordinator {
            config,
            runtime: CoordinatorRuntime::new(
                shutdown.clone(),
                Arc::clone(host),
                TRANSACTION_STATE_TOPIC_NAME,
            ),
            host: Arc::clone(host),
            groups,
            producer_ids,
            remote: OnceLock::new(),
            state_partitions,
            shutdown,
            self_weak: self_weak.clone(),
        });
        coordinator
            .runtime
            .load_existing(|index| {
                coordinator.load_partition(index, coordinator.leader_epoch(index))
            })
            .map_err(|e| e.to_string())?;
        Ok(coordinator)
    }

    /// Kafka's `onElection` for `__transaction_state`: replays partition `partition_index`
    /// into a shard whose markers carry `coordinator_epoch` (the partition's leader epoch),
    /// finishes its Prepare transactions (markers, then Complete; Ongoing ones are left to
    /// their timeout) and starts its timers. An earlier load of the partition resigns first.
    ///
    /// # Errors
    /// The partition is not hosted here or cannot be read.
    pub fn load_partition(
        &self,
        partition_index: i32,
        coordinator_epoch: i32,
    ) -> Result<(), RuntimeError> {
        let ticket = self.begin_load_partition(partition_index);
        self.complete_load_partition(ticket, coordinator_epoch)
    }

    /// The non-blocking half of [`TransactionCoordinator::load_partition`]: resigns any
    /// earlier load of the partition, and from now on requests for its ids answer
    /// COORDINATOR_LOAD_IN_PROGRESS until
    /// [`TransactionCoordinator::complete_load_partition`] (or NOT_COORDINATOR after an
    /// unload).
    pub fn begin_load_partition(&self, partition_index: i32) -> LoadTicket {
        self.unload_partition(partition_index);
        self.runtime.begin_load(partition_index)
    }

    /// Replays the partition of `ticket` into a shard whose markers carry
    /// `coordinator_epoch`, finishes its Prepare transactions and starts its timers, unless
    /// the load was superseded meanwhile. Blocking I/O.
    ///
    /// # Errors
    /// The partition is not hosted here, cannot be read, or the load was superseded.
    pub fn complete_load_partition(
        &self,
        ticket: LoadTicket,
        coordinator_epoch: i32,
    ) -> Result<(), RuntimeError> {
        let partition_index = ticket.partition_index;
        let shard = self.runtime.load_hosted(ticket)?;
        if shard
            .lease
            .coordinator_epoch
            .set(coordinator_epoch)
            .is_err()
        {
            // Another load of the same partition raced this one and owns the shard.
            return Err(RuntimeError::LoadInProgress(partition_index));
        }
        if shard.lease.resigned.is_cancelled() {
            return Err(RuntimeError::NotCoordinator(partition_index));
        }
        tracing::info!(
            partition = partition_index,
            coordinator_epoch,
            "transaction coordinator loaded"
        );
        for entry in shard.all() {
            if entry.lock().meta.pending_result().is_some() {
                self.spawn_completion(entry);
            }
        }
        self.schedule_abort_timed_out(partition_index);
        self.schedule_remove_expired(partition_index);
        Ok(())
    }

    /// Kafka's `onResignation` for `__transaction_state`: this broker no longer leads
    /// partition `partition_index`. Drops its transactional ids, cancels their timers
    /// (transaction timeout, id expiry), and makes operations still in flight for them
    /// (EndTxn waiting for markers or a durable write, AddPartitionsToTxn, InitProducerId,
    /// a completion) answer NOT_COORDINATOR; later requests for its ids get NOT_COORDINATOR
    /// until it is loaded again. When this returns no append of the old load is under way.
    pub fn unload_partition(&self, partition_index: i32) {
        let Some(shard) = self.runtime.unload(partition_index) else {
            return;
        };
        shard.lease.resigned.cancel();
        // Appends run under the entry's lock and check the lease first: taking every lock
        // once waits out any append that checked before the cancel.
        let entries = shard.all();
        for entry in &entries {
            drop(entry.lock());
        }
        tracing::info!(
            partition = partition_index,
            transactional_ids = entries.len(),
            "transaction coordinator unloaded"
        );
    }

    /// The coordinator epoch partition `partition_index` is loaded with here (`None` while
    /// it loads, or when it is not hosted).
    #[must_use]
    pub fn coordinator_epoch(&self, partition_index: i32) -> Option<i32> {
        let shard = self.runtime.shard(partition_index).ok()?;
        shard.lease.coordinator_epoch().ok()
    }

    /// The leader epoch of partition `partition_index` of `__transaction_state` here: the
    /// coordinator epoch of a load on a single node (0 if the partition is not hosted).
    fn leader_epoch(&self, partition_index: i32) -> i32 {
        self.runtime
            .partition(partition_index)
            .map_or(0, |p| p.leader_epoch())
    }

    /// Stops the coordinator's timers.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// The settings.
    #[must_use]
    pub fn config(&self) -> &TransactionConfig {
        &self.config
    }

    /// The `__transaction_state` partition of `transactional_id` (Kafka's `partitionFor`).
    #[must_use]
    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        super::partition_for(transactional_id, self.state_partitions)
    }

    /// The partition count of `__transaction_state`, created on first use with
    /// `state_partitions` partitions and the configs Kafka's `TransactionStateManager`
    /// forces (compacted, uncompressed,
    /// `segment.bytes` = `transaction.state.log.segment.bytes`, `min.insync.replicas` =
    /// `transaction.state.log.min.isr`, no unclean election: a transaction's outcome must
    /// never be lost to an out-of-sync leader); its partitions are loaded before it is
    /// published to requests.
    ///
    /// # Errors
    /// `CoordinatorNotAvailable` when it cannot be created yet.
    pub fn state_topic(&self) -> Result<i32, TxnError> {
        let spec = || TopicSpec {
            partitions: self.state_partitions,
            replication_factor: 1,
            configs: vec![
                ("cleanup.policy", "compact".to_string()),
                ("compression.type", "uncompressed".to_string()),
                (
                    "segment.bytes",
                    self.config.state_log_segment_bytes.to_string(),
                ),
                (
                    "min.insync.replicas",
                    self.config.state_log_min_isr.to_string(),
                ),
                ("unclean.leader.election.enable", "false".to_string()),
            ],
        };
        self.runtime
            .ensure_topic(spec, |index| {
                self.load_partition(index, self.leader_epoch(index))
            })
            .map_err(|e| {
                tracing::error!(error = %e, "the transaction coordinator's topic is not available");
                TxnError::CoordinatorNotAvailable
            })
    }

    /// The loaded shard of `transactional_id`, once its load has finished.
    fn shard_for(&self, transactional_id: &str) -> Result<Arc<TransactionShard>, TxnError> {
        self.state_topic()?;
        let shard = self
            .runtime
            .shard(self.partition_for(transactional_id))
            .map_err(|e| TxnError::from(&e))?;
        shard.lease.coordinator_epoch()?;
        Ok(shard)
    }

    /// The entry of an existing id.
    fn entry(&self, transactional_id: &str) -> Result<Shared, TxnError> {
        self.shard_for(transactional_id)?
            .get(transactional_id)
            .ok_or(TxnError::InvalidProducerIdMapping)
    }

    /// Appends `next` (or a tombstone for `Dead`) to the id's partition through the
    /// runtime's write path, and installs it in `entry` as pending, keeping the metadata it
    /// replaces to put back if the write does not become durable (`durable`). Call with
    /// the entry's lock held, so the log order is the install order.
    fn append(&self, entry: &mut TxnEntry, next: TransactionMetadata) -> Result<Durable, TxnError> {
        entry.lease.coordinator_epoch()?;
        let id = next.transactional_id.clone();
        self.state_topic()?;
        let flexible = self.config.transaction_version >= 1;
        let value =
            (next.state != TransactionState::Dead).then(|| transaction_log::value(&next, flexible));
        let result = CoordinatorResult {
            records: vec![(transaction_log::key(&id), value)],
            response: next,
        };
        let span = tracing::error_span!("write", transactional_id = id);
        let written = self
            .runtime
            .write(self.partition_for(&id), None, result, &span)
            .map_err(|e| TxnError::from(&e))?;
        let (partition, end_offset) = written
            .committable
            .expect("a write of one record appends a batch");
        entry.previous = Some(std::mem::replace(&mut entry.meta, written.response));
        entry.pending = true;
        Ok(Durable {
            partition,
            end_offset,
        })
    }

    /// Waits for an append, then clears the entry's pending mark; NOT_COORDINATOR if the
    /// shard is unloaded meanwhile. A write that does not become durable is undone in memory
    /// (Kafka's append callback on an error): the record may still be in the log, but the
    /// client, told it failed, retries from the previous state.
    async fn durable(&self, entry: &Shared, durable: Durable) -> Result<(), TxnError> {
        let timeout = Duration::from_millis(self.config.write_timeout_ms);
        let resigned = entry.lock().lease.resigned.clone();
        let result = tokio::select! {
            () = resigned.cancelled() => return Err(TxnError::NotCoordinator),
            r = durable.partition.wait_committed(durable.end_offset, timeout) => r,
        };
        let mut e = entry.lock();
        e.pending = false;
        let previous = e.previous.take();
        result.map_err(|err| {
            tracing::warn!(transactional_id = e.meta.transactional_id, error = %err, "transaction log write not durable; its transition is undone");
            if let Some(previous) = previous {
                e.meta = previous;
            }
            TxnError::from(&err)
        })
    }

    /// InitProducerId with a transactional id (Kafka's `handleInitProducerId`): the id's
    /// producer id and a bumped epoch. `expected` is the producer's own id and epoch when it
    /// asks for a KIP-360 bump. An ongoing transaction is aborted first (markers with the
    /// bumped epoch, so its producer is fenced) and the answer is CONCURRENT_TRANSACTIONS,
    /// so the client retries and gets the next epoch.
    ///
    /// # Errors
    /// See [`TxnError`].
    pub async fn init_producer_id(
        &self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(i64, i16), TxnError> {
        if transactional_id.is_empty()
            || transactional_id.len() > transaction_log::TRANSACTIONAL_ID_BYTES_MAX
        {
            return Err(TxnError::InvalidRequest);
        }
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return Err(TxnError::InvalidTransactionTimeout);
        }
        let shard = self.shard_for(transactional_id)?;
        let entry = self.get_or_create_transaction(&shard, transactional_id, timeout_ms)?;
        let (durable, fenced) = {
            let mut e = entry.lock();
            if e.pending {
                return Err(TxnError::ConcurrentTransactions);
            }
            let (next, fenced) = self.prepare_init_producer_id(&e.meta, timeout_ms, expected)?;
            (self.append(&mut e, next)?, fenced)
        };
        self.durable(&entry, durable).await?;
        if fenced {
            tracing::info!(
                transactional_id,
                "fencing the previous producer: aborting its ongoing transaction"
            );
            self.complete_or_retry(&entry).await?;
            return Err(TxnError::ConcurrentTransactions);
        }
        let e = entry.lock();
        Ok((e.meta.producer_id, e.meta.producer_epoch))
    }

    /// The transactional id's entry, created with a new producer id if it has none
    /// (Kafka's `handleInitProducerId` putting fresh metadata if absent). Two requests
    /// racing to create it get the same entry; the loser's producer id goes unused.
    fn get_or_create_transaction(
        &self,
        shard: &TransactionShard,
        transactional_id: &str,
        timeout_ms: i32,
    ) -> Result<Shared, TxnError> {
        Ok(match shard.get(transactional_id) {
            Some(e) => e,
            None => {
                let id = self.next_producer_id()?;
                let meta = TransactionMetadata::new(transactional_id, id, timeout_ms, now_ms());
                Arc::clone(
                    shard
                        .transactions
                        .write()
                        .entry(transactional_id.to_string())
                        .or_insert_with(|| {
                            Arc::new(Mutex::new(TxnEntry {
                                meta,
                                pending: false,
                                previous: None,
                                lease: Arc::clone(&shard.lease),
                            }))
                        }),
                )
            }
        })
    }

    /// The transition InitProducerId asks of the transaction `m` (Kafka's
    /// `prepareInitProducerIdTransit`), and whether it fences an ongoing transaction:
    /// a producer naming an id and epoch that are not this transaction's is fenced;
    /// a transaction being completed answers CONCURRENT_TRANSACTIONS; an ongoing one is
    /// aborted with a bumped epoch; otherwise the epoch is bumped, or the producer id
    /// rotated once the epoch is exhausted. Called under the entry's lock.
    fn prepare_init_producer_id(
        &self,
        m: &TransactionMetadata,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
    ) -> Result<(TransactionMetadata, bool), TxnError> {
        let valid_expected = expected.is_none_or(|(pid, epoch)| {
            m.producer_epoch == metadata::NO_PRODUCER_EPOCH
                || pid == m.producer_id
                || (pid == m.previous_producer_id && is_epoch_exhausted(epoch))
        });
        if !valid_expected {
            return Err(TxnError::ProducerFenced);
        }
        let now = now_ms();
        match m.state {
            TransactionState::PrepareCommit | TransactionState::PrepareAbort => {
                Err(TxnError::ConcurrentTransactions)
            }
            TransactionState::Dead | TransactionState::PrepareEpochFence => {
                Err(TxnError::ConcurrentTransactions)
            }
            TransactionState::Ongoing => Ok((m.prepare_fence_and_abort(now), true)),
            TransactionState::Empty
            | TransactionState::CompleteCommit
            | TransactionState::CompleteAbort => {
                if is_epoch_exhausted(m.producer_epoch)
                    && expected.is_none_or(|(_, epoch)| epoch == m.producer_epoch)
                {
                    let id = self.next_producer_id()?;
                    Ok((
                        m.prepare_rotation(id, timeout_ms, expected.is_some(), now),
                        false,
                    ))
                } else if is_epoch_exhausted(m.producer_epoch) {
                    // An exhausted epoch that the request does not name: an older producer.
                    Err(TxnError::ProducerFenced)
                } else {
                    Ok((
                        m.prepare_increment_epoch(timeout_ms, expected.map(|(_, e)| e), now)?,
                        false,
                    ))
                }
            }
        }
    }

    fn next_producer_id(&self) -> Result<i64, TxnError> {
        self.producer_ids
            .generate()
            .map_err(|_| TxnError::CoordinatorLoadInProgress)
    }

    /// A new producer id (InitProducerId of an idempotent producer), from the controller's
    /// blocks.
    ///
    /// # Errors
    /// `CoordinatorLoadInProgress` while no block is ready (retriable).
    pub fn generate_producer_id(&self) -> Result<i64, TxnError> {
        self.next_producer_id()
    }

    /// Wires the coordinator to the cluster: markers for partitions led by other brokers
    /// are sent to them, and Produce's KIP-890 checks for transactions coordinated by other
    /// brokers ask them. Once only; later calls are ignored.
    pub fn connect_cluster(
        &self,
        leaders: Arc<dyn PartitionLeaders>,
        client: Arc<InterBrokerClient>,
    ) {
        if self.remote.set(Remote { leaders, client }).is_err() {
            tracing::warn!("transaction coordinator already connected to the cluster");
        }
    }

    /// The broker coordinating `transactional_id` when it is another one (Kafka's
    /// `AddPartitionsToTxnManager.getTransactionCoordinator`).
    ///
    /// # Errors
    /// `CoordinatorNotAvailable` when its `__transaction_state` partition has no leader.
    fn remote_coordinator(
        &self,
        transactional_id: &str,
    ) -> Result<Option<(&Remote, logbook_client::BrokerEndpoint)>, TxnError> {
        let Some(remote) = self.remote.get() else {
            return Ok(None);
        };
        if self
            .host
            .partition_count(TRANSACTION_STATE_TOPIC_NAME)
            .is_none()
        {
            // Not created yet: the local path creates it (a single broker) or answers.
            return Ok(None);
        }
        match remote.remote_leader(
            TRANSACTION_STATE_TOPIC_NAME,
            self.partition_for(transactional_id),
        ) {
            Ok(Some(leader)) => Ok(Some((remote, leader))),
            Ok(None) => Ok(None),
            Err(remote::NoLeader) => Err(TxnError::CoordinatorNotAvailable),
        }
    }

    /// Runs a KIP-890 call to another broker's coordinator from the ordered part of Produce
    /// (blocking, as the local add does).
    fn ask_remote_coordinator(
        (remote, coordinator): (&Remote, logbook_client::BrokerEndpoint),
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partition: &(String, i32),
        verify_only: bool,
    ) -> Result<(), TxnError> {
        let handle = tokio::runtime::Handle::current();
        blocking(|| {
            handle.block_on(remote::add_or_verify(
                &remote.client,
                &coordinator,
                transactional_id,
                producer_id,
                producer_epoch,
                partition,
                verify_only,
            ))
        })
    }

    /// AddPartitionsToTxn (client form) and AddOffsetsToTxn: adds `partitions` to the
    /// producer's transaction (durably) and starts it if none is open.
    /// `client_transaction_version` is 2 for the implicit adds of transaction protocol v2
    /// (TxnOffsetCommit v5), else 0.
    ///
    /// # Errors
    /// See [`TxnError`].
    pub async fn add_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
        client_transaction_version: i16,
    ) -> Result<(), TxnError> {
        let entry = self.entry(transactional_id)?;
        let Some(durable) = self.start_add(
            &entry,
            producer_id,
            producer_epoch,
            partitions,
            client_transaction_version,
        )?
        else {
            return Ok(());
        };
        self.durable(&entry, durable).await
    }

    /// Appends the addition of `partitions` (if any is new) under the entry's lock.
    fn start_add(
        &self,
        entry: &Shared,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[(String, i32)],
        client_transaction_version: i16,
    ) -> Result<Option<Durable>, TxnError> {
        let mut e = entry.lock();
        e.meta.check_producer(producer_id, producer_epoch)?;
        if e.pending {
            return Err(TxnError::ConcurrentTransactions);
        }
        match e
            .meta
            .prepare_add_partitions(partitions, client_transaction_version, now_ms())?
        {
            None => Ok(None),
            Some(next) => self.append(&mut e, next).map(Some),
        }
    }

    /// Transaction protocol v2's implicit add (KIP-890 part 2; Kafka's leader sends
    /// AddPartitionsToTxn v5 to the coordinator): the first transactional batch of a
    /// Produce v12+ for `partition` adds it to the producer's transaction. Called from the
    /// ordered part of Produce, so it blocks (`block_in_place`) until the addition is
    /// durable: the batch must not be appended before the coordinator durably knows its
    /// partition (else a crash could leave records no marker will ever end), and later
    /// requests of the connection must not overtake it (Kafka mutes the connection
    /// meanwhile). Only the first batch per partition and transaction waits.
    ///
    /// # Errors
    /// See [`TxnError`].
    pub fn add_partition_for_produce(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partition: &(String, i32),
    ) -> Result<(), TxnError> {
        if let Some(coordinator) = self.remote_coordinator(transactional_id)? {
            return Self::ask_remote_coordinator(
                coordinator,
                transactional_id,
                producer_id,
                producer_epoch,
                partition,
                false,
            );
        }
        let entry = self.entry(transactional_id)?;
        let partitions = std::slice::from_ref(partition);
        let Some(durable) = self.start_add(
            &entry,
            producer_id,
            producer_epoch,
            partitions,
            metadata::TRANSACTION_VERSION_2,
        )?
        else {
            return Ok(());
        };
        let handle = tokio::runtime::Handle::current();
        blocking(|| handle.block_on(self.durable(&entry, durable)))
    }

    /// Whether `partition` is in the producer's ongoing transaction (AddPartitionsToTxn v4+
    /// `verify_only`, KIP-890 part 1).
    ///
    /// # Errors
    /// See [`TxnError`]; a partition not in the transaction is `InvalidTxnState`.
    pub fn verify_partition(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partition: &(String, i32),
    ) -> Result<(), TxnError> {
        if let Some(coordinator) = self.remote_coordinator(transactional_id)? {
            return Self::ask_remote_coordinator(
                coordinator,
                transactional_id,
                producer_id,
                producer_epoch,
                partition,
                true,
            );
        }
        self.verify_local_partition(transactional_id, producer_id, producer_epoch, partition)
    }

    /// [`TransactionCoordinator::verify_partition`] on this broker's own shard: what the
    /// AddPartitionsToTxn handler answers for `verify_only`.
    ///
    /// # Errors
    /// See [`TxnError`]; a partition not in the transaction is `InvalidTxnState`.
    pub fn verify_local_partition(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partition: &(String, i32),
    ) -> Result<(), TxnError> {
        let entry = self.entry(transactional_id)?;
        let e = entry.lock();
        e.meta.check_producer(producer_id, producer_epoch)?;
        match e.meta.state {
            TransactionState::PrepareCommit | TransactionState::PrepareAbort => {
                Err(TxnError::ConcurrentTransactions)
            }
            TransactionState::Ongoing if e.meta.partitions.contains(partition) => Ok(()),
            _ => Err(TxnError::InvalidTxnState),
        }
    }

    /// AddOffsetsToTxn: adds the group's `__consumer_offsets` partition to the transaction,
    /// so EndTxn writes its marker there (and applies or drops the group's pending offsets).
    ///
    /// # Errors
    /// See [`TxnError`].
    pub async fn add_offsets(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        group_id: &str,
        client_transaction_version: i16,
    ) -> Result<(), TxnError> {
        if group_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        if !self.groups.offsets_topic_ready() {
            return Err(TxnError::CoordinatorNotAvailable);
        }
        let partition = (
            super::GROUP_METADATA_TOPIC_NAME.to_string(),
            self.groups.partition_for(group_id),
        );
        self.add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            &[partition],
            client_transaction_version,
        )
        .await
    }

    /// EndTxn: commits or aborts the producer's transaction; answers once every marker and
    /// the Complete record are durable, or, when they cannot be within the write timeout,
    /// once the Prepare record is (see `complete_or_retry`). With transaction protocol v2
    /// (`client_transaction_version` 2, EndTxn v5) the epoch is bumped (a new producer id on
    /// exhaustion) and the producer id and epoch to use next are returned; a retry of a
    /// completed EndTxn returns the current ones. The v1 flow returns
    /// `(NO_PRODUCER_ID, NO_PRODUCER_EPOCH)`.
    ///
    /// # Errors
    /// See [`TxnError`].
    pub async fn end_transaction(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        result: TransactionResult,
        client_transaction_version: i16,
    ) -> Result<(i64, i16), TxnError> {
        const NONE: (i64, i16) = (metadata::NO_PRODUCER_ID, metadata::NO_PRODUCER_EPOCH);
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        let v2 = client_transaction_version >= metadata::TRANSACTION_VERSION_2;
        let entry = self.entry(transactional_id)?;
        let durable = {
            let mut e = entry.lock();
            if v2 {
                // Kafka checks the producer id and epoch before the pending transition.
                let pending = e.pending;
                let end = e.meta.prepare_end_v2(
                    producer_id,
                    producer_epoch,
                    result,
                    || {
                        if pending {
                            Err(TxnError::ConcurrentTransactions)
                        } else {
                            self.next_producer_id()
                        }
                    },
                    now_ms(),
                );
                let end = match end {
                    Ok(_) | Err(TxnError::InvalidTxnState) if pending => {
                        return Err(TxnError::ConcurrentTransactions)
                    }
                    other => other?,
                };
                match end {
                    metadata::EndV2::Retry => {
                        return Ok((e.meta.producer_id, e.meta.producer_epoch));
                    }
                    metadata::EndV2::Prepare(next) => self.append(&mut e, next)?,
                }
            } else {
                e.meta.check_producer(producer_id, producer_epoch)?;
                if e.pending {
                    return Err(TxnError::ConcurrentTransactions);
                }
                match e.meta.prepare_end(result, now_ms())? {
                    None => return Ok(NONE),
                    Some(next) => self.append(&mut e, next)?,
                }
            }
        };
        self.durable(&entry, durable).await?;
        self.complete_or_retry(&entry).await?;
        if !v2 {
            return Ok(NONE);
        }
        let e = entry.lock();
        Ok((e.meta.producer_id, e.meta.producer_epoch))
    }

    /// Writes the markers of a Prepare state to every partition of the transaction, then the
    /// Complete record.
    async fn complete(&self, entry: &Shared) -> Result<(), TxnError> {
        let meta = entry.lock().meta.clone();
        let Some(result) = meta.pending_result() else {
            return Ok(());
        };
        let lease = Arc::clone(&entry.lock().lease);
        let coordinator_epoch = lease.coordinator_epoch()?;
        tokio::select! {
            () = lease.resigned.cancelled() => return Err(TxnError::NotCoordinator),
            r = markers::write_markers(
                self.host.as_ref(),
                self.groups.as_ref(),
                self.remote.get(),
                &meta,
                coordinator_epoch,
                result,
                Duration::from_millis(self.config.write_timeout_ms),
            ) => r?,
        }
        let durable = {
            let mut e = entry.lock();
            if e.meta.state != meta.state || e.meta.producer_epoch != meta.producer_epoch {
                // Completed by someone else meanwhile (recovery and a retry).
                return Ok(());
            }
            let next = e.meta.prepare_complete(now_ms());
            self.append(&mut e, next)?
        };
        self.durable(entry, durable).await
    }

    /// [`Self::complete`] for a client that waits: once the Prepare record is durable the
    /// outcome is decided, so a completion that cannot finish within the write timeout
    /// (a partition without a leader, a
    /// follower not fetching) goes on in the background until it does, and the client is
    /// answered as Kafka answers it (Kafka answers EndTxn once the Prepare record is
    /// durable, and its marker channel retries until the markers are written).
    ///
    /// # Errors
    /// NOT_COORDINATOR when this broker resigned: the next coordinator completes it.
    async fn complete_or_retry(&self, entry: &Shared) -> Result<(), TxnError> {
        match self.complete(entry).await {
            Ok(()) => Ok(()),
            Err(TxnError::NotCoordinator) => Err(TxnError::NotCoordinator),
            Err(e) => {
                let id = entry.lock().meta.transactional_id.clone();
                tracing::warn!(transactional_id = id, error = %e, "transaction not completed yet; retrying in the background");
                self.spawn_completion(Arc::clone(entry));
                Ok(())
            }
        }
    }

    /// Completes a Prepare transaction in the background (after a load, a timeout, or a
    /// completion that failed), retrying with a growing backoff until it is complete, this
    /// broker resigns, or it shuts down — never leaving a decided transaction in Prepare*,
    /// where its partitions' last stable offset would stay stuck.
    fn spawn_completion(&self, entry: Shared) {
        let Some(coordinator) = self.self_weak.upgrade() else {
            return;
        };
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            let mut backoff = COMPLETION_RETRY_BACKOFF;
            loop {
                let r = tokio::select! {
                    () = shutdown.cancelled() => return,
                    r = coordinator.complete(&entry) => r,
                };
                match r {
                    Ok(()) => return,
                    Err(TxnError::NotCoordinator) => {
                        // Resigned: the next owner completes it from the log.
                        tracing::debug!("completion left to the next coordinator");
                        return;
                    }
                    Err(e) => {
                        let id = entry.lock().meta.transactional_id.clone();
                        tracing::warn!(transactional_id = id, error = %e, retry_in = ?backoff, "cannot complete a transaction yet");
                    }
                }
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(COMPLETION_RETRY_BACKOFF_MAX);
            }
        });
    }

    /// Aborts the shard's transactions open longer than their timeout (Kafka's
    /// `abortTimedOutTransactions`), bumping the epoch so their producers are fenced; runs
    /// every `transaction.abort.timed.out.transaction.cleanup.interval.ms` on a periodic
    /// timer of the shard (so it stops at unload).
    fn schedule_abort_timed_out(&self, partition_index: i32) {
        let weak = self.self_weak.clone();
        let period = Duration::from_millis(self.config.abort_timed_out_interval_ms.max(10));
        let scheduled = self
            .runtime
            .schedule_periodic(partition_index, period, move |shard| {
                if let Some(c) = weak.upgrade() {
                    c.abort_timed_out(shard, now_ms());
                }
            });
        if let Err(e) = scheduled {
            tracing::debug!(error = %e, "transaction timeout check not scheduled");
        }
    }

    fn abort_timed_out(&self, shard: &TransactionShard, now: i64) {
        for entry in shard.all() {
            let durable = {
                let mut e = entry.lock();
                let m = &e.meta;
                let expired = m.state == TransactionState::Ongoing
                    && !e.pending
                    && m.start_ms.saturating_add(i64::from(m.timeout_ms)) < now;
                if !expired || m.producer_epoch == i16::MAX {
                    continue;
                }
                tracing::info!(
                    transactional_id = m.transactional_id,
                    producer_id = m.producer_id,
                    "aborting a transaction open past its timeout"
                );
                let next = m.prepare_fence_and_abort(now);
                match self.append(&mut e, next) {
                    Ok(d) => d,
                    Err(err) => {
                        tracing::warn!(error = %err, "cannot abort a timed-out transaction");
                        continue;
                    }
                }
            };
            let Some(coordinator) = self.self_weak.upgrade() else {
                return;
            };
            tokio::spawn(async move {
                if coordinator.durable(&entry, durable).await.is_ok() {
                    coordinator.spawn_completion(entry);
                }
            });
        }
    }

    /// Removes transactional ids idle for `transactional.id.expiration.ms` (a tombstone),
    /// every `transaction.remove.expired.transaction.cleanup.interval.ms`, on a periodic
    /// timer of the shard.
    fn schedule_remove_expired(&self, partition_index: i32) {
        let weak = self.self_weak.clone();
        let period = Duration::from_millis(self.config.remove_expired_interval_ms.max(10));
        let scheduled = self
            .runtime
            .schedule_periodic(partition_index, period, move |shard| {
                if let Some(c) = weak.upgrade() {
                    c.remove_expired(shard, now_ms());
                }
            });
        if let Err(e) = scheduled {
            tracing::debug!(error = %e, "transactional id expiry not scheduled");
        }
    }

    fn remove_expired(&self, shard: &TransactionShard, now: i64) {
        for entry in shard.all() {
            let id = {
                let mut e = entry.lock();
                let m = &e.meta;
                let idle = matches!(
                    m.state,
                    TransactionState::Empty
                        | TransactionState::CompleteCommit
                        | TransactionState::CompleteAbort
                ) && !e.pending
                    && m.last_update_ms
                        .saturating_add(self.config.id_expiration_ms)
                        <= now;
                if !idle {
                    continue;
                }
                let mut dead = m.clone();
                dead.state = TransactionState::Dead;
                if let Err(err) = self.append(&mut e, dead) {
                    tracing::warn!(error = %err, "cannot expire a transactional id");
                    continue;
                }
                e.pending = false;
                e.previous = None;
                e.meta.transactional_id.clone()
            };
            tracing::info!(transactional_id = id, "expired transactional id removed");
            let mut map = shard.transactions.write();
            if map.get(&id).is_some_and(|e| Arc::ptr_eq(e, &entry)) {
                map.remove(&id);
            }
        }
    }

    /// DescribeTransactions of one id.
    ///
    /// # Errors
    /// `TransactionalIdNotFound` for an unknown id; coordinator errors.
    pub fn describe(&self, transactional_id: &str) -> Result<TransactionMetadata, TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        let shard = self.shard_for(transactional_id)?;
        let entry = shard
            .get(transactional_id)
            .ok_or(TxnError::TransactionalIdNotFound)?;
        let meta = entry.lock().meta.clone();
        if meta.state == TransactionState::Dead {
            return Err(TxnError::TransactionalIdNotFound);
        }
        Ok(meta)
    }

    /// ListTransactions: every id of every loaded shard, filtered by state names, producer
    /// ids and (v1) a minimum time since its transaction started (`duration_filter_ms`, -1
    /// for none).
    #[must_use]
    pub fn list(
        &self,
        states: &[String],
        producer_ids: &[i64],
        duration_filter_ms: i64,
    ) -> Vec<TransactionMetadata> {
        let now = now_ms();
        let mut out: Vec<TransactionMetadata> = self
            .runtime
            .loaded_partitions()
            .into_iter()
            .filter_map(|p| self.runtime.shard(p).ok())
            .flat_map(|s| s.all())
            .map(|e| e.lock().meta.clone())
            .filter(|m| m.state != TransactionState::Dead)
            .filter(|m| states.is_empty() || states.iter().any(|s| s == m.state.name()))
            .filter(|m| producer_ids.is_empty() || producer_ids.contains(&m.producer_id))
            // Any state, as Kafka's `listTransactionStates`: a finished transaction keeps
            // its start time, an id that never began one has -1 and always passes.
            .filter(|m| {
                duration_filter_ms < 0 || now.saturating_sub(m.start_ms) > duration_filter_ms
            })
            .collect();
        out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        out
    }
}

/// What a failed `__transaction_state` write means to a client (Kafka maps a write timeout
/// or too few replicas to COORDINATOR_NOT_AVAILABLE and a log failure to NOT_COORDINATOR).
impl From<&WriteError> for TxnError {
    fn from(e: &WriteError) -> Self {
        match e {
            WriteError::Unavailable(_) => TxnError::CoordinatorNotAvailable,
            WriteError::NotLeader(_) | WriteError::Fenced(_) => TxnError::NotCoordinator,
            WriteError::Duplicate(_) | WriteError::Encode(_) => TxnError::Storage,
        }
    }
}
