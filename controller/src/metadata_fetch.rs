//! MetadataFetch: how a broker-only node (`process.roles=broker`) learns the metadata log.
//! KRaft brokers are observers of the quorum: they fetch the committed `__cluster_metadata`
//! records from the active controller and fold them into their own image. This is the same
//! pull, over the controller RPC: the broker names the last offset it applied, and the
//! active controller answers with the committed batches after it, or with a snapshot of its
//! whole image when those batches are no longer at hand (a new broker, or one far behind).
//!
//! The active controller serves from a [`MetadataTail`]: the last committed batches its
//! state machine applied, bounded by count. Batches are kept as the state machine decoded
//! them, so serving one is a clone and no log read; a broker further behind than the tail
//! gets the image, which is what a snapshot would hold anyway (metadata is megabytes at
//! most, and the frame limit bounds one answer).
//!
//! Only committed batches are ever in the tail (the state machine applies nothing else),
//! so a broker never learns a batch the quorum could still drop. Only the active
//! controller answers (others say NOT_CONTROLLER), so a voter cut off from the quorum
//! cannot keep a broker on an old image.

use std::collections::VecDeque;

use logbook_metadata::snapshot::MetadataSnapshot;
use logbook_metadata::MetadataBatch;
use serde::{Deserialize, Serialize};

/// Batches the tail keeps by default: a broker further behind gets the whole image.
pub const METADATA_TAIL_BATCHES_MAX: usize = 4096;

/// Longest wait a MetadataFetch may ask for (Kafka's `replica.fetch.wait.max.ms` is 500
/// ms for brokers fetching metadata too); longer asks are cut to this.
pub const METADATA_FETCH_WAIT_MAX_MS: u64 = 5_000;

/// What a broker-only node asks the active controller.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataFetchRequest {
    /// The offset of the last batch the broker applied (-1: none yet).
    pub after_offset: i64,
    /// How long the controller may hold the request when nothing newer is committed.
    pub max_wait_ms: u64,
    /// The most batches one answer may carry.
    pub max_batches: usize,
}

/// The active controller's answer to a [`MetadataFetchRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetadataFetchReply {
    /// The committed batches after `after_offset`, each with its offset, in log order
    /// (empty when nothing newer was committed within the wait).
    Batches(Vec<(i64, MetadataBatch)>),
    /// The batches after `after_offset` are not at hand: the whole image instead.
    Snapshot(MetadataSnapshot),
}

/// The last committed batches, for MetadataFetch (see the module docs).
#[derive(Debug)]
pub struct MetadataTail {
    batches: VecDeque<(i64, MetadataBatch)>,
    /// The tail holds every batch after this offset (up to the newest applied): the offset
    /// of the image it started from (-1: from the beginning of the log).
    complete_after: i64,
    max: usize,
}

impl MetadataTail {
    /// An empty tail from the start of the log, keeping at most `max` batches.
    #[must_use]
    pub fn new(max: usize) -> Self {
        MetadataTail {
            batches: VecDeque::new(),
            complete_after: -1,
            max: max.max(1),
        }
    }

    /// Adds the batch committed at `offset` (after every batch already held).
    pub fn push(&mut self, offset: i64, batch: MetadataBatch) {
        if self.batches.len() == self.max {
            if let Some((dropped, _)) = self.batches.pop_front() {
                self.complete_after = dropped;
            }
        }
        self.batches.push_back((offset, batch));
    }

    /// The state jumped to a snapshot at `offset`: nothing before it is at hand.
    pub fn reset(&mut self, offset: i64) {
        self.batches.clear();
        self.complete_after = offset;
    }

    /// Up to `max` batches after `after`, or `None` when some of them are no longer held.
    #[must_use]
    pub fn read_after(&self, after: i64, max: usize) -> Option<Vec<(i64, MetadataBatch)>> {
        if after < self.complete_after {
            return None;
        }
        let start = self.batches.partition_point(|(offset, _)| *offset <= after);
        Some(
            self.batches
                .iter()
                .skip(start)
                .take(max.max(1))
                .cloned()
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(n: usize) -> MetadataBatch {
        MetadataBatch(Vec::with_capacity(n))
    }

    #[test]
    fn a_fetch_gets_the_batches_after_its_offset_in_order() {
        let mut tail = MetadataTail::new(10);
        // Offsets skip where Raft wrote blank and membership entries.
        for offset in [2, 3, 5, 9] {
            tail.push(offset, batch(0));
        }
        let offsets =
            |v: Vec<(i64, MetadataBatch)>| v.into_iter().map(|(o, _)| o).collect::<Vec<_>>();
        assert_eq!(tail.read_after(-1, 10).map(offsets), Some(vec![2, 3, 5, 9]));
        assert_eq!(tail.read_after(3, 10).map(offsets), Some(vec![5, 9]));
        assert_eq!(tail.read_after(4, 10).map(offsets), Some(vec![5, 9]));
        assert_eq!(tail.read_after(3, 1).map(offsets), Some(vec![5]));
        assert_eq!(tail.read_after(9, 10).map(offsets), Some(vec![]));
    }

    #[test]
    fn a_fetch_from_before_the_tail_gets_no_batches() {
        let mut tail = MetadataTail::new(2);
        for offset in [1, 2, 3] {
            tail.push(offset, batch(0));
        }
        // Offset 1 was dropped: a broker at -1 or 0 would miss it.
        assert_eq!(tail.read_after(-1, 10), None);
        assert_eq!(tail.read_after(0, 10), None);
        assert_eq!(tail.read_after(1, 10).map(|v| v.len()), Some(2));
        tail.reset(40);
        assert_eq!(tail.read_after(3, 10), None);
        assert_eq!(tail.read_after(40, 10), Some(vec![]));
    }
}
