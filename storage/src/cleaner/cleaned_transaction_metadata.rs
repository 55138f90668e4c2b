//! `CleanedTransactionMetadata` (Kafka's class of that name): what a compaction pass knows
//! about transactions while it walks the log in offset order, so it can drop the records
//! of aborted transactions and tell when a commit or abort marker has no data left.
//!
//! Input: the aborted transactions overlapping the pass (from the `.txnindex` files:
//! producer, first offset, marker offset), by first offset. A transactional batch of a
//! producer whose aborted transaction has begun (its first offset reached) and whose
//! ABORT marker has not been read yet is aborted; any other transactional batch belongs
//! to a transaction that committed (the pass never reaches an open one: it stops below the
//! first unstable offset). A marker whose transaction had a batch in this pass must stay;
//! one whose transaction had none may go once its delete horizon has passed.

use std::collections::{HashMap, VecDeque};

use crate::end_transaction_marker::{EndTransactionMarker, TxnResult};
use crate::record_batch::RecordBatchHeader;
use crate::transaction_index::AbortedTxn;

/// A transaction whose batches the walk is among (its marker not read yet).
#[derive(Clone, Copy, Debug)]
struct OngoingTxn {
    /// The index entry of an aborted transaction; `None` for a committed one.
    aborted: Option<AbortedTxn>,
    /// A batch of it was read in this pass.
    observed: bool,
    /// A batch of it stays in the cleaned log (with records, or emptied).
    retained: bool,
}

/// What a pass may do with a marker it just read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MarkerRead {
    /// The marker's transaction has no batch left in the log (or the batch is an empty
    /// control batch): removable once its delete horizon passes.
    pub(crate) discardable: bool,
    /// Every batch of the transaction this pass read is being removed by this pass: the
    /// next pass will find the marker discardable, so it should come soon.
    pub(crate) emptied_now: bool,
    /// The aborted transaction's index entry, to keep in the cleaned segment's
    /// `.txnindex` (the marker stays, and batches of it were read).
    pub(crate) index_entry: Option<AbortedTxn>,
}

/// See the module docs. One per pass, fed every batch of the pass in offset order.
#[derive(Debug, Default)]
pub(crate) struct CleanedTransactionMetadata {
    /// Aborted transactions not yet begun in the walk, by first offset.
    aborted: VecDeque<AbortedTxn>,
    /// Producer id → its transaction the walk is in.
    ongoing: HashMap<i64, OngoingTxn>,
}

impl CleanedTransactionMetadata {
    /// Starts a walk with the aborted transactions whose marker is at or after the walk's
    /// first offset (any order).
    pub(crate) fn new(aborted: &[AbortedTxn]) -> Self {
        let mut aborted = aborted.to_vec();
        aborted.sort_by_key(|t| (t.first_offset, t.last_offset));
        Self {
            aborted: aborted.into(),
            ongoing: HashMap::new(),
        }
    }

    /// Kafka's `consumeAbortedTxnsUpTo`: the aborted transactions begun by `offset`.
    fn begin_aborted_up_to(&mut self, offset: i64) {
        while let Some(txn) = self.aborted.front().copied() {
            if txn.first_offset > offset {
                break;
            }
            self.aborted.pop_front();
            self.ongoing.entry(txn.producer_id).or_insert(OngoingTxn {
                aborted: Some(txn),
                observed: false,
                retained: false,
            });
        }
    }

    /// Kafka's `onBatchRead`: a data batch; `true` when it belongs to an aborted
    /// transaction (its records go).
    pub(crate) fn on_batch_read(&mut self, header: &RecordBatchHeader) -> bool {
        self.begin_aborted_up_to(header.last_offset());
        if !header.is_transactional() {
            return false;
        }
        let txn = self
            .ongoing
            .entry(header.producer_id)
            .or_insert(OngoingTxn {
                aborted: None,
                observed: false,
                retained: false,
            });
        txn.observed = true;
        txn.aborted.is_some()
    }

    /// The data batch just read stays in the cleaned log (with records or emptied).
    pub(crate) fn on_batch_retained(&mut self, header: &RecordBatchHeader) {
        if header.is_transactional() {
            if let Some(txn) = self.ongoing.get_mut(&header.producer_id) {
                txn.retained = true;
            }
        }
    }

    /// Kafka's `onControlBatchRead`: a control batch, with its marker (`None`: emptied
    /// by an earlier pass, or a control type that is not a marker).
    pub(crate) fn on_control_batch_read(
        &mut self,
        header: &RecordBatchHeader,
        marker: Option<EndTransactionMarker>,
    ) -> MarkerRead {
        self.begin_aborted_up_to(header.last_offset());
        let Some(marker) = marker else {
            // An emptied control batch has nothing left to keep; another control type
            // is not ours to remove.
            return MarkerRead {
                discardable: header.records_count == 0,
                emptied_now: false,
                index_entry: None,
            };
        };
        let ongoing = self.ongoing.remove(&header.producer_id);
        let txn = match (marker.result, ongoing) {
            // An ABORT ends the aborted transaction the index names; a COMMIT ends a
            // committed one (an abort entry here would be a marker the index lacks).
            (TxnResult::Abort, Some(txn)) if txn.aborted.is_some() => txn,
            (TxnResult::Commit, Some(txn)) if txn.aborted.is_none() => txn,
            (_, Some(txn)) => {
                // Index and markers disagree: keep everything of it.
                self.ongoing.insert(header.producer_id, txn);
                return MarkerRead {
                    discardable: false,
                    emptied_now: false,
                    index_entry: None,
                };
            }
            (_, None) => {
                return MarkerRead {
                    discardable: true,
                    emptied_now: false,
                    index_entry: None,
                }
            }
        };
        MarkerRead {
            discardable: !txn.observed,
            emptied_now: txn.observed && !txn.retained,
            index_entry: txn.aborted.filter(|_| txn.observed),
        }
    }
}
