//! `ReplicaManager::read`: a consumer's read of one partition it fetches from (Kafka's
//! `ReplicaManager.readFromLog` for one partition): whole batches as file ranges, bounded by
//! the fetch's isolation — the high watermark for read_uncommitted, the last stable offset
//! with the aborted transactions of the range for read_committed — and the partition's
//! offsets to answer with.
//!
//! Why here: which bound an isolation level reads to, and that the offsets of a committed
//! read are taken under the same lock as the read, are the replica manager's rules, not
//! the Fetch handler's. The handler resolves its partitions once per request
//! ([`ReplicaManager::get_partition_or_error`]) and reads them again on every pass of a long
//! poll, so this takes the resolved partition rather than looking it up again.

use logbook_storage::{AbortedTxn, Offset, SliceRead};

use super::ReplicaManager;
use crate::{Error, Partition, PartitionOffsets};

/// How far a consumer may read (Kafka's `FetchIsolation` for a consumer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchIsolation {
    /// read_uncommitted: up to the high watermark.
    HighWatermark,
    /// read_committed: up to the last stable offset, with the aborted transactions.
    TxnCommitted,
}

/// One partition's read.
pub struct LogReadResult {
    /// The batches selected, as file ranges.
    pub read: SliceRead,
    /// The partition's offsets (for read_committed, as of the read itself); `None` when
    /// the partition closed meanwhile.
    pub offsets: Option<PartitionOffsets>,
    /// read_committed only: the aborted transactions overlapping the range.
    pub aborted_transactions: Option<Vec<AbortedTxn>>,
}

impl ReplicaManager {
    /// Reads whole batches of `partition` from `offset`, at most `max_bytes` (but one whole
    /// batch when `min_one_batch`), up to the bound of `isolation`.
    ///
    /// # Errors
    /// `OffsetOutOfRange` from storage; I/O errors; the partition being closed.
    pub fn read(
        &self,
        partition: &Partition,
        offset: Offset,
        max_bytes: usize,
        min_one_batch: bool,
        isolation: FetchIsolation,
    ) -> Result<LogReadResult, Error> {
        match isolation {
            FetchIsolation::TxnCommitted => partition
                .read_slices_committed(offset, max_bytes, min_one_batch)
                .map(|r| LogReadResult {
                    read: r.read,
                    offsets: Some(r.offsets),
                    aborted_transactions: Some(r.aborted_transactions),
                }),
            FetchIsolation::HighWatermark => {
                let read = partition.read_slices(offset, max_bytes, min_one_batch)?;
                Ok(LogReadResult {
                    read,
                    offsets: partition.offsets().ok(),
                    aborted_transactions: None,
                })
            }
        }
    }
}
