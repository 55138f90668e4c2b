//! Idempotent-producer state of one partition: for each producer id, its epoch and the
//! sequence ranges (with their offsets) of its last few batches.
//!
//! This is what lets the leader drop a retried batch (answering with the offsets it got the
//! first time) and refuse a batch that skips sequence numbers, so an idempotent producer's
//! records land exactly once and in order. Kept in memory; after a restart a producer with no
//! entry is accepted at any sequence (as Kafka does once a producer's state has expired).

use std::collections::{HashMap, VecDeque};

use logbook_storage::RecordBatchHeader;

/// Batches remembered per producer for duplicate detection (Kafka's
/// `max.in.flight.requests.per.connection` ceiling for idempotence).
pub const CACHED_BATCHES_PER_PRODUCER: usize = 5;

/// One appended batch of an idempotent producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachedBatch {
    /// First sequence number.
    pub first_sequence: i32,
    /// Last sequence number.
    pub last_sequence: i32,
    /// Offset of its first record.
    pub first_offset: i64,
    /// Offset of its last record.
    pub last_offset: i64,
}

#[derive(Clone, Debug, Default)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<CachedBatch>,
}

/// The verdict on an incoming batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Not from an idempotent producer, or the next batch in sequence: append it.
    Append,
    /// A retry of a batch already in the log: answer with its offsets, append nothing.
    Duplicate(CachedBatch),
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

/// Per-partition producer state (Kafka's `ProducerStateManager`).
#[derive(Debug, Default)]
pub struct ProducerStateManager {
    producers: HashMap<i64, ProducerEntry>,
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

impl ProducerStateManager {
    /// Checks a batch (before offsets are assigned) against the producer's state.
    #[must_use]
    pub fn check(&self, header: &RecordBatchHeader) -> SequenceCheck {
        if header.producer_id < 0 {
            return SequenceCheck::Append;
        }
        let Some(entry) = self.producers.get(&header.producer_id) else {
            return SequenceCheck::Append;
        };
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

    /// Records an appended batch (header with its assigned base offset).
    pub fn update(&mut self, header: &RecordBatchHeader) {
        if header.producer_id < 0 {
            return;
        }
        let entry = self.producers.entry(header.producer_id).or_default();
        if header.producer_epoch != entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        if entry.batches.len() == CACHED_BATCHES_PER_PRODUCER {
            entry.batches.pop_front();
        }
        entry.batches.push_back(CachedBatch {
            first_sequence: header.base_sequence,
            last_sequence: last_sequence(header),
            first_offset: header.base_offset,
            last_offset: header.last_offset(),
        });
    }

    /// Forgets everything (after truncation, the state is rebuilt lazily).
    pub fn clear(&mut self) {
        self.producers.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pid: i64, epoch: i16, seq: i32, count: i32, base_offset: i64) -> RecordBatchHeader {
        RecordBatchHeader {
            base_offset,
            batch_length: 0,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: count - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            records_count: count,
        }
    }

    // In-sequence batches append; a retry is a duplicate with its first offsets; a gap is refused.
    #[test]
    fn sequences_duplicates_and_gaps() {
        let mut state = ProducerStateManager::default();
        let first = header(7, 0, 0, 3, 10);
        assert_eq!(state.check(&first), SequenceCheck::Append);
        state.update(&first);
        assert_eq!(
            state.check(&header(7, 0, 0, 3, -1)),
            SequenceCheck::Duplicate(CachedBatch {
                first_sequence: 0,
                last_sequence: 2,
                first_offset: 10,
                last_offset: 12
            })
        );
        assert_eq!(state.check(&header(7, 0, 3, 1, -1)), SequenceCheck::Append);
        assert_eq!(
            state.check(&header(7, 0, 5, 1, -1)),
            SequenceCheck::OutOfOrder {
                expected: 3,
                got: 5
            }
        );
        assert_eq!(
            state.check(&header(7, 1, 4, 1, -1)),
            SequenceCheck::OutOfOrder {
                expected: 0,
                got: 4
            }
        );
        assert_eq!(state.check(&header(7, 1, 0, 1, -1)), SequenceCheck::Append);
        state.update(&header(7, 1, 0, 1, 13));
        assert_eq!(
            state.check(&header(7, 0, 3, 1, -1)),
            SequenceCheck::StaleEpoch { current: 1, got: 0 }
        );
        // Non-idempotent batches are never checked.
        assert_eq!(
            state.check(&header(-1, -1, -1, 5, -1)),
            SequenceCheck::Append
        );
    }
}
