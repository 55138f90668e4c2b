//! The leader's side of replication: serving followers' Fetch requests (Kafka's
//! `Partition.fetchRecords` for a follower and `updateFollowerFetchState`), answering
//! OffsetsForLeaderEpoch, and proposing ISR changes (`maybeExpandIsr`, `maybeShrinkIsr`)
//! through the [`AlterPartitionSender`](super::AlterPartitionSender).
//!
//! A follower reads up to the leader's *log end* (not the high watermark), as file ranges
//! so the connection still sends them with sendfile. A fetch whose `last_fetched_epoch`
//! ended earlier on the leader, or is not known to it, gets the diverging epoch (KIP-320) and
//! no records, and does not count as the follower's position: its log beyond that point is
//! not the leader's.

use std::collections::BTreeSet;

use logbook_storage::{LeaderEpoch, Offset, SliceRead};

use super::leader::{
    AlterPartitionCommitted, AlterPartitionError, AlterPartitionRequest, IsrState,
};
use super::{Partition, PartitionOffsets};
use crate::Error;

/// One partition of a follower's Fetch request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowerFetch {
    /// The follower's broker id (the request's `replica_id` / `replica_state.replica_id`).
    pub replica_id: i32,
    /// The follower's broker epoch (`replica_state.replica_epoch`, v15+; -1 before).
    pub replica_epoch: i64,
    /// The follower's log end: it has everything below.
    pub fetch_offset: Offset,
    /// The follower's log start.
    pub log_start_offset: Offset,
    /// The leader epoch the follower believes current (-1: not checked).
    pub current_leader_epoch: i32,
    /// The epoch of the follower's last batch (-1: not sent, no divergence check).
    pub last_fetched_epoch: i32,
    /// Most bytes to return.
    pub max_bytes: usize,
    /// Return the first batch even when it is larger than `max_bytes`.
    pub min_one_batch: bool,
}

/// What a follower's fetch gets.
#[derive(Debug)]
pub enum FollowerFetchResult {
    /// The follower's log diverged: it must truncate to `end_offset` (at most) and fetch
    /// again; no records.
    Diverging {
        /// The largest epoch the leader has that is not above the follower's last one.
        epoch: LeaderEpoch,
        /// Where that epoch ends on the leader.
        end_offset: Offset,
        /// The leader's offsets.
        offsets: PartitionOffsets,
    },
    /// Batches from the fetch offset, up to the log end.
    Records {
        /// The batches, as file ranges.
        read: SliceRead,
        /// The leader's offsets when they were selected.
        offsets: PartitionOffsets,
    },
}

impl Partition {
    /// Serves a follower's fetch: checks the leader epoch and that the follower is an
    /// assigned replica, runs the diverging-epoch check, reads up to the log end, then
    /// records the follower's position, maybe advances the high watermark and maybe
    /// proposes the follower for the ISR.
    ///
    /// # Errors
    /// `FencedLeaderEpoch` / `UnknownLeaderEpoch`; `NotLeaderOrFollower` when this broker
    /// does not lead; `UnknownLeaderEpoch` (with an epoch) or `NotLeaderOrFollower`
    /// (without) for a replica not assigned, as Kafka, so a reassignment race retries;
    /// `OffsetOutOfRange` for a fetch offset outside the log, or a last fetched epoch the
    /// leader cannot place; storage errors; the partition being closed.
    pub fn fetch_for_follower(
        &self,
        fetch: &FollowerFetch,
        now_ms: i64,
    ) -> Result<FollowerFetchResult, Error> {
        let high_watermark = self.high_watermark();
        let result = {
            let leadership = self.leadership.read();
            self.check_leader_epoch(fetch.current_leader_epoch)?;
            if !leadership.is_leader() {
                return Err(Error::NotLeaderOrFollower(self.topic_partition.clone()));
            }
            if !leadership.followers.contains_key(&fetch.replica_id) {
                return Err(if fetch.current_leader_epoch >= 0 {
                    Error::UnknownLeaderEpoch {
                        topic_partition: self.topic_partition.clone(),
                        requested: fetch.current_leader_epoch,
                        current: leadership.leader_epoch,
                    }
                } else {
                    Error::NotLeaderOrFollower(self.topic_partition.clone())
                });
            }
            self.with_log(|log| {
                let offsets = Self::offsets_of(log, high_watermark);
                let log_end = log.log_end_offset();
                if fetch.last_fetched_epoch >= 0 {
                    let out_of_range = || logbook_storage::Error::OffsetOutOfRange {
                        requested: fetch.fetch_offset.get(),
                        log_start_offset: log.log_start_offset().get(),
                        log_end_offset: log_end.get(),
                    };
                    let (epoch, end) = log
                        .leader_epochs()
                        .end_offset_for(LeaderEpoch(fetch.last_fetched_epoch), log_end.get())
                        .ok_or_else(out_of_range)?;
                    if fetch.fetch_offset < log.log_start_offset() {
                        return Err(out_of_range());
                    }
                    if epoch.0 < fetch.last_fetched_epoch || end < fetch.fetch_offset.get() {
                        return Ok(FollowerFetchResult::Diverging {
                            epoch,
                            end_offset: Offset(end),
                            offsets,
                        });
                    }
                }
                let read = log.read_slices(
                    fetch.fetch_offset,
                    fetch.max_bytes,
                    log_end,
                    fetch.min_one_batch,
                )?;
                Ok(FollowerFetchResult::Records { read, offsets })
            })?
        };
        if let FollowerFetchResult::Records { offsets, .. } = &result {
            self.update_follower_fetch_state(fetch, offsets.log_end_offset, now_ms);
        }
        Ok(result)
    }

    /// Records a follower's fetch (Kafka's `updateFollowerFetchState`), then maybe
    /// proposes it for the ISR and maybe advances the high watermark.
    fn update_follower_fetch_state(
        &self,
        fetch: &FollowerFetch,
        leader_log_end: Offset,
        now_ms: i64,
    ) {
        let high_watermark = self.high_watermark();
        let expand = {
            let mut leadership = self.leadership.write();
            let Some(follower) = leadership.followers.get_mut(&fetch.replica_id) else {
                return;
            };
            follower.update_fetch_state(
                fetch.fetch_offset,
                fetch.log_start_offset,
                now_ms,
                leader_log_end,
                fetch.replica_epoch,
            );
            if leadership.can_add_to_isr(
                fetch.replica_id,
                high_watermark,
                self.isr_eligibility.as_ref(),
            ) {
                let committed = leadership.isr.committed().clone();
                let mut new_isr = committed.clone();
                new_isr.insert(fetch.replica_id);
                let request = leadership.alter_partition_request(&self.topic_partition, &new_isr);
                leadership.isr = IsrState::PendingExpand {
                    isr: committed,
                    new_member: fetch.replica_id,
                };
                tracing::info!(partition = %self.topic_partition, follower = fetch.replica_id, isr = ?new_isr, "proposing ISR expansion");
                Some((request, leadership.isr.clone()))
            } else {
                None
            }
        };
        if let Some((request, proposed)) = expand {
            self.submit_alter_partition(request, proposed);
        }
        self.maybe_advance_high_watermark();
    }

    /// Proposes removing the followers that have not caught up with the log end for
    /// `replica.lag.time.max.ms` (Kafka's `maybeShrinkIsr`); the caller runs it every half
    /// lag time. The removed members still count (maximal ISR) until the controller
    /// commits. Returns the followers proposed for removal.
    pub fn maybe_shrink_isr(&self, now_ms: i64) -> BTreeSet<i32> {
        let log_end = self.log_end_offset();
        let (request, proposed, removed) = {
            let mut leadership = self.leadership.write();
            let removed =
                leadership.out_of_sync_replicas(log_end, now_ms, self.replica_lag_time_max_ms);
            if removed.is_empty() {
                return removed;
            }
            let committed = leadership.isr.committed().clone();
            let new_isr: BTreeSet<i32> = committed.difference(&removed).copied().collect();
            let request = leadership.alter_partition_request(&self.topic_partition, &new_isr);
            leadership.isr = IsrState::PendingShrink {
                isr: committed,
                removed: removed.clone(),
            };
            tracing::info!(partition = %self.topic_partition, out_of_sync = ?removed, isr = ?new_isr, "proposing ISR shrink");
            (request, leadership.isr.clone(), removed)
        };
        self.submit_alter_partition(request, proposed);
        removed
    }

    /// Sends an ISR change with no lock held (the sender may answer at once).
    fn submit_alter_partition(&self, request: AlterPartitionRequest, proposed: IsrState) {
        let weak = self.self_weak();
        let sent = request.clone();
        self.alter_partition.submit(
            request,
            Box::new(move |result| {
                if let Some(partition) = weak.upgrade() {
                    partition.handle_alter_partition_result(sent, &proposed, result);
                }
            }),
        );
    }

    /// Applies the controller's answer to an ISR change (Kafka's
    /// `handleAlterPartitionUpdate`): ignored if the partition's state moved on meanwhile
    /// (a metadata change was applied); a commit becomes the committed ISR with the new
    /// partition epoch; a refusal returns to the committed ISR only when the controller
    /// cannot have applied the change (Kafka's `handleAlterPartitionError`).
    fn handle_alter_partition_result(
        &self,
        sent: AlterPartitionRequest,
        proposed: &IsrState,
        result: Result<AlterPartitionCommitted, AlterPartitionError>,
    ) {
        {
            let mut leadership = self.leadership.write();
            if &leadership.isr != proposed || !leadership.is_leader() {
                tracing::debug!(partition = %self.topic_partition, "AlterPartition answer for an outdated proposal ignored");
                return;
            }
            match result {
                Ok(committed) => {
                    if committed.leader_epoch != leadership.leader_epoch
                        || committed.partition_epoch < leadership.partition_epoch
                    {
                        tracing::debug!(partition = %self.topic_partition, "AlterPartition answer of another epoch ignored");
                        return;
                    }
                    tracing::info!(partition = %self.topic_partition, isr = ?committed.isr, partition_epoch = committed.partition_epoch, "ISR change committed");
                    leadership.partition_epoch = committed.partition_epoch;
                    leadership.isr = IsrState::Committed {
                        isr: committed.isr.into_iter().collect(),
                    };
                }
                Err(
                    e @ (AlterPartitionError::NotAttempted(_)
                    | AlterPartitionError::IneligibleReplica),
                ) => {
                    // The controller did not apply the change: back to the committed ISR,
                    // from where the next fetch or shrink check may propose again.
                    tracing::warn!(partition = %self.topic_partition, error = %e, "ISR change refused");
                    let isr = leadership.isr.committed().clone();
                    leadership.isr = IsrState::Committed { isr };
                }
                Err(
                    e @ (AlterPartitionError::NewLeaderElected
                    | AlterPartitionError::InvalidUpdateVersion
                    | AlterPartitionError::UnknownTopicOrPartition),
                ) => {
                    // The controller's state moved on (another leader, another partition
                    // epoch): the change may even have been applied before this answer.
                    // Keep the pending (maximal) ISR until the metadata arrives, as
                    // Kafka's `handleAlterPartitionError` does: dropping back to the old
                    // committed ISR could let the high watermark pass a new member that
                    // is now the leader, and acknowledge acks=all records it never had.
                    tracing::info!(partition = %self.topic_partition, error = %e, "ISR change refused; keeping the pending ISR until new metadata arrives");
                    return;
                }
                Err(e @ AlterPartitionError::Other(_)) => {
                    // Unknown whether it was applied: send the same change again (Kafka
                    // retries on any other error), keeping the pending ISR meanwhile.
                    tracing::warn!(partition = %self.topic_partition, error = %e, "ISR change failed; sending it again");
                    drop(leadership);
                    self.submit_alter_partition(sent, proposed.clone());
                    return;
                }
            }
        }
        self.maybe_advance_high_watermark();
    }

    /// Where `leader_epoch` ends in this replica's log (OffsetsForLeaderEpoch, Kafka's
    /// `lastOffsetForLeaderEpoch` on the leader): the largest epoch not above it and the
    /// start of the next one, or the log end for the latest epoch; `None` (UNDEFINED) for an
    /// epoch the log cannot place. The caller checked leadership and the current epoch
    /// (`ReplicaManager::get_partition_or_error`).
    ///
    /// # Errors
    /// The partition being closed.
    pub fn end_offset_for_epoch(
        &self,
        leader_epoch: i32,
    ) -> Result<Option<(LeaderEpoch, Offset)>, Error> {
        self.with_log(|log| {
            let log_end = log.log_end_offset().get();
            Ok(log
                .leader_epochs()
                .end_offset_for(LeaderEpoch(leader_epoch), log_end)
                .map(|(epoch, end)| (epoch, Offset(end))))
        })
    }
}
