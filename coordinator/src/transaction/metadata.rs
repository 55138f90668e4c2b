//! `TransactionMetadata`: one transactional id's producer id, epoch and open transaction,
//! and the state machine Kafka's `TransactionMetadata` keeps (`Empty → Ongoing →
//! PrepareCommit/PrepareAbort → CompleteCommit/CompleteAbort → Ongoing …`).
//!
//! Transitions are pure: each `prepare_*` returns the next metadata (or the error a client
//! gets) without changing `self`; the coordinator writes the next metadata to
//! `__transaction_state` and installs it, so the log order is the apply order.
//!
//! Transaction protocol v2 (KIP-890 part 2, `client_transaction_version` 2): every EndTxn
//! bumps the epoch when it writes PrepareCommit/PrepareAbort (the markers carry the bumped
//! epoch, so a late write of the finished transaction is fenced), and the client learns the
//! new epoch from the EndTxn response. When the epoch before the bump is exhausted, the
//! bump reaches `i16::MAX` and the Prepare record names a `next_producer_id`, which the
//! Complete record installs at epoch 0 (Kafka's `prepareAbortOrCommit` / `prepareComplete`).

use std::collections::BTreeSet;

use super::TxnError;

/// Kafka's `RecordBatch.NO_PRODUCER_EPOCH` / `NO_PRODUCER_ID`.
pub const NO_PRODUCER_EPOCH: i16 = -1;
/// See [`NO_PRODUCER_EPOCH`].
pub const NO_PRODUCER_ID: i64 = -1;

/// A transaction's state, with the ids Kafka's `TransactionState` writes to the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransactionState {
    /// No transaction open (a new id, or one just initialised).
    Empty = 0,
    /// Partitions have been added; records may be written.
    Ongoing = 1,
    /// EndTxn(commit) logged; markers are being written.
    PrepareCommit = 2,
    /// EndTxn(abort), a fence or a timeout logged; abort markers are being written.
    PrepareAbort = 3,
    /// Every commit marker is written.
    CompleteCommit = 4,
    /// Every abort marker is written.
    CompleteAbort = 5,
    /// The id expired and is being removed.
    Dead = 6,
    /// An InitProducerId is fencing an ongoing transaction (in memory only in Kafka; here
    /// the fence goes straight to `PrepareAbort` with the bumped epoch).
    PrepareEpochFence = 7,
}

impl TransactionState {
    /// The state of a log id; `None` for an unknown id.
    #[must_use]
    pub fn from_id(id: i8) -> Option<Self> {
        Some(match id {
            0 => Self::Empty,
            1 => Self::Ongoing,
            2 => Self::PrepareCommit,
            3 => Self::PrepareAbort,
            4 => Self::CompleteCommit,
            5 => Self::CompleteAbort,
            6 => Self::Dead,
            7 => Self::PrepareEpochFence,
            _ => return None,
        })
    }

    /// The id written to the log.
    #[must_use]
    pub fn id(self) -> i8 {
        self as i8
    }

    /// The name ListTransactions / DescribeTransactions report (Kafka's `TransactionState.name`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Ongoing => "Ongoing",
            Self::PrepareCommit => "PrepareCommit",
            Self::PrepareAbort => "PrepareAbort",
            Self::CompleteCommit => "CompleteCommit",
            Self::CompleteAbort => "CompleteAbort",
            Self::Dead => "Dead",
            Self::PrepareEpochFence => "PrepareEpochFence",
        }
    }
}

/// The outcome markers record (Kafka's `TransactionResult`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransactionResult {
    /// Commit markers.
    Commit,
    /// Abort markers.
    Abort,
}

/// One transactional id's state. Invariant: `partitions` is empty unless `state` is
/// `Ongoing`, `PrepareCommit` or `PrepareAbort`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionMetadata {
    /// The producer's `transactional.id`.
    pub transactional_id: String,
    /// The producer id in use.
    pub producer_id: i64,
    /// The producer id before the last rotation (an epoch-exhausted producer's retry is
    /// recognised by it).
    pub previous_producer_id: i64,
    /// The producer id a protocol-v2 commit or abort of an epoch-exhausted producer moves to
    /// when it completes; `NO_PRODUCER_ID` otherwise.
    pub next_producer_id: i64,
    /// The current epoch (`NO_PRODUCER_EPOCH` until the first InitProducerId completes).
    pub producer_epoch: i16,
    /// The epoch before the last bump by the same producer (KIP-360 retries); in memory.
    pub last_producer_epoch: i16,
    /// `transaction.timeout.ms` of the producer.
    pub timeout_ms: i32,
    /// The state.
    pub state: TransactionState,
    /// Partitions of the open transaction (topic, partition).
    pub partitions: BTreeSet<(String, i32)>,
    /// When the open transaction started (-1 when none).
    pub start_ms: i64,
    /// When the metadata last changed.
    pub last_update_ms: i64,
    /// The transaction protocol the client of the current transaction uses (Kafka's
    /// `clientTransactionVersion`: 0 or 1 for the v1 flow, 2 for KIP-890 part 2).
    pub client_transaction_version: i16,
}

/// `client_transaction_version` of transaction protocol v2 (Kafka's `TV_2`).
pub const TRANSACTION_VERSION_2: i16 = 2;

/// What an EndTxn of transaction protocol v2 leads to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndV2 {
    /// Log this Prepare state (epoch bumped), write its markers, then complete.
    Prepare(TransactionMetadata),
    /// A retry of an EndTxn that already completed: answer NONE with the current producer
    /// id and epoch.
    Retry,
}

/// Kafka's `TransactionMetadata.isEpochExhausted`: the last epochs are kept for the fence
/// and the abort markers of an epoch bump.
#[must_use]
pub fn is_epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

impl TransactionMetadata {
    /// A new transactional id with its first producer id, before any epoch is handed out.
    #[must_use]
    pub fn new(transactional_id: &str, producer_id: i64, timeout_ms: i32, now_ms: i64) -> Self {
        TransactionMetadata {
            transactional_id: transactional_id.to_string(),
            producer_id,
            previous_producer_id: NO_PRODUCER_ID,
            next_producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms,
            state: TransactionState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            client_transaction_version: 0,
        }
    }

    fn to_state(&self, state: TransactionState, now_ms: i64) -> Self {
        let mut next = self.clone();
        next.state = state;
        next.last_update_ms = now_ms;
        next
    }

    /// Kafka's `prepareIncrementProducerEpoch`: a new InitProducerId (`expected_epoch`
    /// `None`) or a KIP-360 bump by the producer itself. Call only when the state is
    /// Empty/CompleteCommit/CompleteAbort and the epoch is not exhausted.
    ///
    /// # Errors
    /// `ProducerFenced` when `expected_epoch` is neither the current nor the previous one.
    pub fn prepare_increment_epoch(
        &self,
        timeout_ms: i32,
        expected_epoch: Option<i16>,
        now_ms: i64,
    ) -> Result<Self, TxnError> {
        assert!(
            !is_epoch_exhausted(self.producer_epoch),
            "producer {} epoch {} exhausted",
            self.producer_id,
            self.producer_epoch
        );
        let bumped = self.producer_epoch + 1;
        let (epoch, last) = match expected_epoch {
            None => (bumped, NO_PRODUCER_EPOCH),
            Some(e) if self.producer_epoch == NO_PRODUCER_EPOCH || e == self.producer_epoch => {
                (bumped, self.producer_epoch)
            }
            // A retry of a bump whose answer was lost.
            Some(e) if e == self.last_producer_epoch => {
                (self.producer_epoch, self.last_producer_epoch)
            }
            Some(_) => return Err(TxnError::ProducerFenced),
        };
        let mut next = self.to_state(TransactionState::Empty, now_ms);
        next.producer_epoch = epoch;
        next.last_producer_epoch = last;
        next.timeout_ms = timeout_ms;
        next.partitions.clear();
        next.start_ms = -1;
        Ok(next)
    }

    /// Kafka's `prepareProducerIdRotation`: the epoch is exhausted, so the id gets a new
    /// producer id at epoch 0.
    #[must_use]
    pub fn prepare_rotation(
        &self,
        new_producer_id: i64,
        timeout_ms: i32,
        record_last_epoch: bool,
        now_ms: i64,
    ) -> Self {
        let mut next = self.to_state(TransactionState::Empty, now_ms);
        next.previous_producer_id = self.producer_id;
        next.producer_id = new_producer_id;
        next.next_producer_id = NO_PRODUCER_ID;
        next.producer_epoch = 0;
        next.last_producer_epoch = if record_last_epoch {
            self.producer_epoch
        } else {
            NO_PRODUCER_EPOCH
        };
        next.timeout_ms = timeout_ms;
        next.partitions.clear();
        next.start_ms = -1;
        next
    }

    /// The abort that fences an ongoing transaction (InitProducerId from a new producer, or
    /// the transaction's timeout): the epoch is bumped so the old producer's next request
    /// is refused, and the abort markers carry the bumped epoch. Also for a transaction of
    /// protocol v2 the bump is one: Kafka 4.1 answers the timed-out producer's late
    /// EndTxn(commit) with the epoch before the bump INVALID_TXN_STATE (a retry of a
    /// completed abort), not PRODUCER_FENCED.
    #[must_use]
    pub fn prepare_fence_and_abort(&self, now_ms: i64) -> Self {
        assert!(
            self.producer_epoch < i16::MAX,
            "producer {} epoch {} cannot be bumped",
            self.producer_id,
            self.producer_epoch
        );
        let mut next = self.to_state(TransactionState::PrepareAbort, now_ms);
        next.producer_epoch = self.producer_epoch + 1;
        next.last_producer_epoch = NO_PRODUCER_EPOCH;
        next.next_producer_id = NO_PRODUCER_ID;
        next
    }

    /// Checks a client request's producer id and epoch (Kafka: INVALID_PRODUCER_ID_MAPPING
    /// for another id, PRODUCER_FENCED for another epoch).
    ///
    /// # Errors
    /// As described.
    pub fn check_producer(&self, producer_id: i64, producer_epoch: i16) -> Result<(), TxnError> {
        if producer_id != self.producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if producer_epoch != self.producer_epoch {
            return Err(TxnError::ProducerFenced);
        }
        Ok(())
    }

    /// AddPartitionsToTxn / AddOffsetsToTxn: the transaction with `added` partitions;
    /// `Ok(None)` when they are all in it already (nothing to write).
    ///
    /// # Errors
    /// CONCURRENT_TRANSACTIONS while a commit or abort completes; INVALID_TXN_STATE otherwise.
    pub fn prepare_add_partitions(
        &self,
        added: &[(String, i32)],
        client_transaction_version: i16,
        now_ms: i64,
    ) -> Result<Option<Self>, TxnError> {
        match self.state {
            TransactionState::PrepareCommit | TransactionState::PrepareAbort => {
                Err(TxnError::ConcurrentTransactions)
            }
            TransactionState::Dead | TransactionState::PrepareEpochFence => {
                Err(TxnError::InvalidTxnState)
            }
            TransactionState::Ongoing if added.iter().all(|p| self.partitions.contains(p)) => {
                Ok(None)
            }
            TransactionState::Empty
            | TransactionState::Ongoing
            | TransactionState::CompleteCommit
            | TransactionState::CompleteAbort => {
                let mut next = self.to_state(TransactionState::Ongoing, now_ms);
                if self.state != TransactionState::Ongoing {
                    next.start_ms = now_ms;
                }
                next.client_transaction_version = client_transaction_version;
                next.partitions.extend(added.iter().cloned());
                Ok(Some(next))
            }
        }
    }

    /// EndTxn from the client: the Prepare state to log, or `Ok(None)` for a retry of an
    /// EndTxn that already completed (answered NONE).
    ///
    /// # Errors
    /// CONCURRENT_TRANSACTIONS while the same outcome is being completed; INVALID_TXN_STATE
    /// for a result that contradicts the state, or no transaction.
    pub fn prepare_end(
        &self,
        result: TransactionResult,
        now_ms: i64,
    ) -> Result<Option<Self>, TxnError> {
        use TransactionResult::{Abort, Commit};
        use TransactionState as S;
        match (self.state, result) {
            (S::Ongoing, Commit) => Ok(Some(self.to_state(S::PrepareCommit, now_ms))),
            (S::Ongoing, Abort) => Ok(Some(self.to_state(S::PrepareAbort, now_ms))),
            (S::CompleteCommit, Commit) | (S::CompleteAbort, Abort) => Ok(None),
            (S::PrepareCommit, Commit) | (S::PrepareAbort, Abort) => {
                Err(TxnError::ConcurrentTransactions)
            }
            _ => Err(TxnError::InvalidTxnState),
        }
    }

    /// EndTxn of transaction protocol v2 (Kafka's `endTransaction` with an epoch-bumping
    /// client): `producer_epoch` is either the current epoch (a new EndTxn) or the one before
    /// the last bump (a retry of an EndTxn whose answer was lost). `new_producer_id` gives a
    /// fresh producer id; it is called only when the bump exhausts the epoch.
    ///
    /// Kafka's table for the states without an open transaction (PF PRODUCER_FENCED, ITS
    /// INVALID_TXN_STATE, EB epoch bump, NONE a retry answered with no change):
    /// Empty: abort retry PF, abort EB, commit retry PF, commit ITS; CompleteAbort: abort
    /// retry NONE, abort EB, commit ITS; CompleteCommit: abort retry ITS, abort EB, commit
    /// retry NONE, commit ITS. An abort with no open transaction still bumps the epoch.
    ///
    /// # Errors
    /// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, CONCURRENT_TRANSACTIONS (the same
    /// outcome is being completed), INVALID_TXN_STATE, or the allocation's error.
    pub fn prepare_end_v2(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        result: TransactionResult,
        new_producer_id: impl FnOnce() -> Result<i64, TxnError>,
        now_ms: i64,
    ) -> Result<EndV2, TxnError> {
        use TransactionResult::{Abort, Commit};
        use TransactionState as S;
        // A retry after the bump of an exhausted epoch moved the id to a new producer id.
        let retry_on_overflow = self.previous_producer_id == producer_id
            && producer_epoch == i16::MAX - 1
            && self.producer_epoch == 0;
        let retry_on_bump = i32::from(self.producer_epoch) == i32::from(producer_epoch) + 1;
        let current = producer_epoch == self.producer_epoch;
        let valid_epoch = match self.state {
            S::Ongoing | S::Empty | S::Dead | S::PrepareEpochFence => current,
            S::PrepareCommit | S::PrepareAbort => retry_on_bump,
            S::CompleteCommit | S::CompleteAbort => current || retry_on_bump || retry_on_overflow,
        };
        let retry = retry_on_bump || retry_on_overflow;
        if self.producer_id != producer_id && !retry_on_overflow {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if !valid_epoch {
            return Err(TxnError::ProducerFenced);
        }
        let prepare = |state: S, no_partition_added: bool, alloc: Option<i64>| {
            let mut next = self.to_state(state, now_ms);
            next.producer_epoch = self.producer_epoch + 1;
            next.last_producer_epoch = self.producer_epoch;
            next.next_producer_id = alloc.unwrap_or(NO_PRODUCER_ID);
            next.client_transaction_version = TRANSACTION_VERSION_2;
            if no_partition_added {
                next.start_ms = now_ms;
            }
            EndV2::Prepare(next)
        };
        let (state, no_partition_added) = match (self.state, result) {
            (S::Ongoing, Commit) => (S::PrepareCommit, false),
            (S::Ongoing, Abort) => (S::PrepareAbort, false),
            (S::CompleteCommit, Commit) | (S::CompleteAbort, Abort) if retry => {
                return Ok(EndV2::Retry)
            }
            (S::CompleteCommit | S::CompleteAbort | S::Empty, Abort) if !retry => {
                (S::PrepareAbort, true)
            }
            (S::PrepareCommit, Commit) | (S::PrepareAbort, Abort) => {
                return Err(TxnError::ConcurrentTransactions)
            }
            _ => return Err(TxnError::InvalidTxnState),
        };
        let alloc = if is_epoch_exhausted(self.producer_epoch) {
            Some(new_producer_id()?)
        } else {
            None
        };
        Ok(prepare(state, no_partition_added, alloc))
    }

    /// The state after every marker of a Prepare state is written. A protocol-v2 Prepare
    /// that exhausted the epoch moves to its `next_producer_id` at epoch 0.
    #[must_use]
    pub fn prepare_complete(&self, now_ms: i64) -> Self {
        let state = match self.state {
            TransactionState::PrepareCommit => TransactionState::CompleteCommit,
            TransactionState::PrepareAbort => TransactionState::CompleteAbort,
            other => panic!(
                "completing transaction {} in state {other:?}",
                self.transactional_id
            ),
        };
        let mut next = self.to_state(state, now_ms);
        next.partitions.clear();
        // The finished transaction's start time stays (Kafka's `prepareComplete` keeps
        // `txnStartTimestamp`): DescribeTransactions and kafka-transactions show it.
        if self.client_transaction_version >= TRANSACTION_VERSION_2
            && self.next_producer_id != NO_PRODUCER_ID
        {
            next.previous_producer_id = self.producer_id;
            next.producer_id = self.next_producer_id;
            next.producer_epoch = 0;
        }
        next.next_producer_id = NO_PRODUCER_ID;
        next
    }

    /// The result a Prepare state's markers record.
    #[must_use]
    pub fn pending_result(&self) -> Option<TransactionResult> {
        match self.state {
            TransactionState::PrepareCommit => Some(TransactionResult::Commit),
            TransactionState::PrepareAbort => Some(TransactionResult::Abort),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ongoing() -> TransactionMetadata {
        let m = TransactionMetadata::new("t", 7, 60_000, 0)
            .prepare_increment_epoch(60_000, None, 1)
            .expect("first epoch");
        m.prepare_add_partitions(&[("a".into(), 0)], 0, 2)
            .expect("add")
            .expect("changed")
    }

    // A new producer gets epoch 0; a second InitProducerId bumps it and forgets the
    // previous one (so the first producer's KIP-360 retry is fenced).
    #[test]
    fn init_bumps_and_fences() {
        let m = TransactionMetadata::new("t", 7, 60_000, 0);
        let first = m.prepare_increment_epoch(60_000, None, 1).expect("first");
        assert_eq!((first.producer_id, first.producer_epoch), (7, 0));
        let second = first
            .prepare_increment_epoch(60_000, None, 2)
            .expect("second");
        assert_eq!(second.producer_epoch, 1);
        assert_eq!(
            second.prepare_increment_epoch(60_000, Some(0), 3),
            Err(TxnError::ProducerFenced)
        );
        // KIP-360: the current producer bumps its own epoch, and a retry of that is idempotent.
        let bumped = second
            .prepare_increment_epoch(60_000, Some(1), 3)
            .expect("bump");
        assert_eq!((bumped.producer_epoch, bumped.last_producer_epoch), (2, 1));
        let retried = bumped
            .prepare_increment_epoch(60_000, Some(1), 4)
            .expect("retry");
        assert_eq!(retried.producer_epoch, 2);
    }

    // EndTxn: the prepare state, idempotent retries, and contradictions.
    #[test]
    fn end_transitions() {
        let m = ongoing();
        let prepared = m
            .prepare_end(TransactionResult::Commit, 3)
            .expect("end")
            .expect("changed");
        assert_eq!(prepared.state, TransactionState::PrepareCommit);
        assert_eq!(
            prepared.prepare_end(TransactionResult::Commit, 4),
            Err(TxnError::ConcurrentTransactions)
        );
        assert_eq!(
            prepared.prepare_end(TransactionResult::Abort, 4),
            Err(TxnError::InvalidTxnState)
        );
        let done = prepared.prepare_complete(5);
        assert_eq!(done.state, TransactionState::CompleteCommit);
        assert!(done.partitions.is_empty());
        assert_eq!(done.prepare_end(TransactionResult::Commit, 6), Ok(None));
        assert_eq!(
            done.prepare_end(TransactionResult::Abort, 6),
            Err(TxnError::InvalidTxnState)
        );
    }

    // The fence keeps the partitions (they get abort markers) and bumps the epoch.
    #[test]
    fn fence_aborts_with_bumped_epoch() {
        let m = ongoing();
        let fenced = m.prepare_fence_and_abort(9);
        assert_eq!(fenced.state, TransactionState::PrepareAbort);
        assert_eq!(fenced.producer_epoch, m.producer_epoch + 1);
        assert_eq!(fenced.partitions, m.partitions);
        assert_eq!(
            fenced.check_producer(7, m.producer_epoch),
            Err(TxnError::ProducerFenced)
        );
    }

    // Rotation on exhaustion: a new producer id at epoch 0.
    #[test]
    fn rotation() {
        let mut m = TransactionMetadata::new("t", 7, 60_000, 0);
        m.producer_epoch = i16::MAX - 1;
        assert!(is_epoch_exhausted(m.producer_epoch));
        let r = m.prepare_rotation(8, 60_000, true, 1);
        assert_eq!(
            (r.producer_id, r.producer_epoch, r.previous_producer_id),
            (8, 0, 7)
        );
    }
}
