//! acks=all at the partition (Kafka's `appendRecordsToLeader` check and `DelayedProduce`
//! with `checkEnoughReplicasReachOffset`): refuse before appending when the committed ISR is
//! under `min.insync.replicas`, wait for the high watermark, and fail the wait when the
//! partition stops leading. Also the views of leadership the handlers need.

use std::sync::atomic::Ordering;
use std::time::Duration;

use logbook_storage::{AppendOutcome, LeaderEpoch, Offset, ValidatedBatches};
use tokio::sync::watch;

use super::leader::Role;
use super::Partition;
use crate::flusher::FlushPolicy;
use crate::Error;

impl Partition {
    /// Appends a client's produce payload as [`Partition::append_validated`] does, first
    /// checking acks=all's promise as Kafka's `appendRecordsToLeader`: with
    /// `required_acks == -1` and a committed ISR smaller than `min_insync_replicas`, nothing
    /// is appended (NOT_ENOUGH_REPLICAS). `min_insync_replicas` is the topic's config; the
    /// partition keeps it for its high-watermark rule.
    ///
    /// # Errors
    /// `NotEnoughReplicas`; otherwise as [`Partition::append`].
    pub fn append_as_leader(
        &self,
        batches: &ValidatedBatches,
        required_acks: i16,
        min_insync_replicas: usize,
    ) -> Result<AppendOutcome, Error> {
        self.set_min_insync_replicas(min_insync_replicas);
        let check = (required_acks == -1).then_some(min_insync_replicas);
        self.append_with(check, |log, epoch| log.append_validated(batches, epoch))
    }

    /// Appends a coordinator's records (group, offset and transaction log writes) as Kafka's
    /// coordinators write them, with acks=all: refused (NOT_ENOUGH_REPLICAS) when the
    /// committed ISR is under the partition's `min.insync.replicas`, so a group or
    /// transaction state is never acknowledged on fewer replicas than the topic demands.
    ///
    /// # Errors
    /// `NotEnoughReplicas`; otherwise as [`Partition::append`].
    pub fn append_for_coordinator(&self, batches: &[u8]) -> Result<AppendOutcome, Error> {
        let min_isr = self.min_insync_replicas.load(Ordering::Acquire);
        self.append_with(Some(min_isr), |log, epoch| log.append(batches, epoch))
    }

    /// Sets the topic's `min.insync.replicas` (a config change; produce requests pass it
    /// too): below it the high watermark does not advance and acks=all is refused.
    pub fn set_min_insync_replicas(&self, min_insync_replicas: usize) {
        let previous = self
            .min_insync_replicas
            .swap(min_insync_replicas.max(1), Ordering::AcqRel);
        if previous > min_insync_replicas {
            // A lower minimum may release a high watermark held back.
            self.maybe_advance_high_watermark();
        }
    }

    /// Waits until everything below `offset` is committed (the high watermark reached it:
    /// durable on every member of the ISR).
    ///
    /// # Errors
    /// `Timeout` after `timeout`; `NotEnoughReplicasAfterAppend` when the ISR that committed
    /// it is under `min.insync.replicas`; `NotLeaderOrFollower` if the partition stops
    /// leading meanwhile; `Closed` if it is deleted meanwhile.
    pub async fn wait_durable(&self, offset: Offset, timeout: Duration) -> Result<(), Error> {
        // Every caller is an acks=all write of Kafka's (coordinator records, markers,
        // offset commits): the ISR that committed it must still meet the minimum.
        let min_isr = self.min_insync_replicas.load(Ordering::Acquire);
        self.wait_for_acks_all(offset, timeout, min_isr).await
    }

    /// Waits for acks=all (Kafka's `DelayedProduce` with `checkEnoughReplicasReachOffset`):
    /// once the high watermark reaches `offset`, succeeds if the maximal ISR still has at
    /// least `min_insync_replicas` members (capped at the replica count, as Kafka's
    /// `effectiveMinIsr`), else NOT_ENOUGH_REPLICAS_AFTER_APPEND (the
    /// records are committed, but by fewer replicas than the producer asked for).
    ///
    /// # Errors
    /// `NotEnoughReplicasAfterAppend`; `NotLeaderOrFollower` if the partition stops leading
    /// while waiting (the records may yet be truncated by the new leader); `Timeout` after
    /// `timeout`; `Closed` if the partition is deleted meanwhile.
    pub async fn wait_for_acks_all(
        &self,
        offset: Offset,
        timeout: Duration,
        min_insync_replicas: usize,
    ) -> Result<(), Error> {
        let high_watermark = self.high_watermark.subscribe();
        self.wait_while_leading(high_watermark, offset, timeout, |hw| {
            if hw < offset {
                return None;
            }
            let (isr, min_insync_replicas) = {
                let leadership = self.leadership.read();
                let min_isr = leadership.effective_min_isr(min_insync_replicas);
                (leadership.isr.maximal().len(), min_isr)
            };
            Some(if isr < min_insync_replicas {
                Err(Error::NotEnoughReplicasAfterAppend {
                    topic_partition: self.topic_partition.clone(),
                    isr,
                    min_insync_replicas,
                })
            } else {
                Ok(())
            })
        })
        .await
    }

    /// acks=1: waits until the leader itself holds everything below `offset` as it counts
    /// it toward the high watermark: fsync'd under `EveryWrite`, at once under `Os`. The
    /// flusher advances the high watermark before it publishes the durable offset, so on a
    /// partition whose ISR is the leader alone (every single-node topic) the answer never
    /// precedes the records' visibility: a ListOffsets, DeleteRecords or new consumer right
    /// after the acknowledgement sees them, as on Kafka, whose acks=1 leader of a one-member
    /// ISR moves its high watermark with the append. Followers are not waited for.
    ///
    /// # Errors
    /// `Timeout` after `timeout`; `NotLeaderOrFollower` if the partition stops leading
    /// meanwhile; a storage error if its log failed; `Closed` if it is deleted meanwhile.
    pub async fn wait_for_acks_leader(
        &self,
        offset: Offset,
        timeout: Duration,
    ) -> Result<(), Error> {
        if self.flusher.policy() == FlushPolicy::Os {
            return Ok(());
        }
        let durable = self.durable.subscribe();
        self.wait_while_leading(durable, offset, timeout, |durable| {
            if let Err(e) = self.with_log(|_| Ok(())) {
                return Some(Err(e));
            }
            if let Some(reason) = self.offline_reason() {
                return Some(Err(Error::Storage(logbook_storage::Error::LogFailed {
                    dir: std::path::PathBuf::new(),
                    reason,
                })));
            }
            (durable >= offset).then_some(Ok(()))
        })
        .await
    }

    /// The acks waits' loop: until `done` (given `watched`'s value, at once and on every
    /// change) answers, within `timeout`. Fails with NOT_LEADER_OR_FOLLOWER once the
    /// partition stops leading in the epoch the wait began in: the role watch keeps only
    /// its latest value, so a leader -> follower -> leader flip between two wake-ups reads
    /// as "still leader", but the epoch does not come back, so a waiter whose leadership
    /// ended fails even when this broker leads again (the record may have been truncated
    /// in between).
    async fn wait_while_leading(
        &self,
        mut watched: watch::Receiver<Offset>,
        offset: Offset,
        timeout: Duration,
        mut done: impl FnMut(Offset) -> Option<Result<(), Error>>,
    ) -> Result<(), Error> {
        let mut role = self.role.subscribe();
        let epoch = self.leadership.read().leader_epoch;
        let wait = async {
            loop {
                if *role.borrow_and_update() != Role::Leader
                    || self.leadership.read().leader_epoch != epoch
                {
                    return Err(Error::NotLeaderOrFollower(self.topic_partition.clone()));
                }
                let current = *watched.borrow_and_update();
                if let Some(result) = done(current) {
                    return result;
                }
                let changed = tokio::select! {
                    changed = watched.changed() => changed,
                    changed = role.changed() => changed,
                };
                if changed.is_err() {
                    return Err(Error::Closed(self.topic_partition.clone()));
                }
            }
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(result) => result,
            Err(_) => Err(Error::Timeout {
                topic_partition: self.topic_partition.clone(),
                offset: offset.get(),
            }),
        }
    }

    /// A receiver that wakes whenever the log end advances (followers' long polls read up
    /// to the log end, not the high watermark); subscribe before reading.
    #[must_use]
    pub fn subscribe_log_end(&self) -> watch::Receiver<Offset> {
        self.log_end.subscribe()
    }

    /// The `(leader id, leader epoch)` this broker knows for the partition (-1 for no
    /// leader): what NOT_LEADER_OR_FOLLOWER answers carry (KIP-951).
    #[must_use]
    pub fn current_leader(&self) -> (i32, LeaderEpoch) {
        let leadership = self.leadership.read();
        (leadership.leader_id, leadership.leader_epoch)
    }

    /// Whether this broker leads the partition.
    #[must_use]
    pub fn is_leader(&self) -> bool {
        self.leadership.read().is_leader()
    }

    /// The committed ISR and the maximal one (with an AlterPartition in flight they
    /// differ), for DescribeTopicPartitions-style views and tests.
    #[must_use]
    pub fn isr(&self) -> (Vec<i32>, Vec<i32>) {
        let leadership = self.leadership.read();
        (
            leadership.isr.committed().iter().copied().collect(),
            leadership.isr.maximal().into_iter().collect(),
        )
    }

    /// KIP-207: a leader whose high watermark is still below the start of its epoch
    /// does not yet know the final high watermark of the previous leader, so "latest" (and
    /// a timestamp lookup that finds nothing below it) would go backwards across a
    /// failover; ListOffsets answers OFFSET_NOT_AVAILABLE until it catches up.
    ///
    /// # Errors
    /// `OffsetNotAvailable`.
    pub fn check_offsets_available(&self) -> Result<(), Error> {
        let start = self.leadership.read().leader_epoch_start_offset;
        let high_watermark = self.high_watermark();
        match start {
            Some(start) if start > high_watermark => Err(Error::OffsetNotAvailable {
                topic_partition: self.topic_partition.clone(),
                high_watermark: high_watermark.get(),
                leader_epoch_start_offset: start.get(),
            }),
            _ => Ok(()),
        }
    }
}
