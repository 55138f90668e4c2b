//! Role changes of a partition, applied from the controller's committed metadata (Kafka's
//! `Partition.makeLeader` / `makeFollower`): a stale change (older leader epoch, or an
//! older partition epoch in the same leader epoch) is ignored, so replaying metadata is
//! harmless.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use logbook_storage::{LeaderEpoch, Offset};

use super::leader::{IsrState, Leadership, PartitionState, Role};
use super::replica_state::ReplicaState;
use super::{now_ms, Partition};
use crate::flusher::FlushPolicy;
use crate::Error;

impl Partition {
    /// Makes this broker the leader as `state` says. In a new leader epoch: the epoch
    /// starts at the log end (recorded in the leader-epoch cache, so OffsetsForLeaderEpoch
    /// tells followers of the previous epoch where it ended), every follower's state is
    /// reset (position unknown; ISR members get a full lag time to fetch), and the
    /// leader's counted offset restarts from what is durable. The committed ISR is taken
    /// from `state` and any AlterPartition in flight is forgotten. Returns whether the
    /// leader epoch is new (Kafka's `makeLeader`); `false` also for a stale `state`.
    ///
    /// # Errors
    /// The partition being closed.
    pub fn become_leader(&self, state: &PartitionState) -> Result<bool, Error> {
        let now_ms = now_ms();
        let mut leadership = self.leadership.write();
        if is_stale(
            state,
            leadership.leader_epoch,
            leadership.partition_epoch,
            leadership.role,
        ) {
            tracing::debug!(partition = %self.topic_partition, epoch = %state.leader_epoch, "stale leadership change ignored");
            return Ok(false);
        }
        let new_epoch =
            leadership.role != Role::Leader || state.leader_epoch > leadership.leader_epoch;
        let policy = self.flusher.policy();
        let (log_end, durable) = self.with_log(|log| {
            if new_epoch {
                log.assign_epoch_start(state.leader_epoch);
            }
            let durable = match policy {
                FlushPolicy::EveryWrite => log.recovery_point(),
                FlushPolicy::Os => log.log_end_offset(),
            };
            Ok((log.log_end_offset(), durable))
        })?;
        leadership.role = Role::Leader;
        leadership.leader_id = leadership.local_broker_id;
        leadership.leader_epoch = state.leader_epoch;
        leadership.partition_epoch = state.partition_epoch;
        leadership.topic_id = state.topic_id;
        leadership.replicas.clone_from(&state.replicas);
        leadership.isr = IsrState::Committed {
            isr: state.isr.iter().copied().collect(),
        };
        reset_followers(&mut leadership, state, new_epoch, now_ms, log_end);
        if new_epoch {
            self.leader_offset.store(durable.get(), Ordering::Release);
        }
        self.leader_epoch
            .store(state.leader_epoch.0, Ordering::Release);
        drop(leadership);
        self.log_end.send_if_modified(|end| {
            let changed = *end != log_end;
            *end = log_end;
            changed
        });
        self.role.send_replace(Role::Leader);
        tracing::info!(partition = %self.topic_partition, epoch = %state.leader_epoch, isr = ?state.isr, new_epoch, "became leader");
        self.maybe_advance_high_watermark();
        Ok(new_epoch)
    }

    /// Makes this broker a follower of `state.leader`: appends are refused from now on and
    /// every acks=all waiter fails with NOT_LEADER_OR_FOLLOWER (their records may be
    /// truncated by the new leader). The high watermark stays; the fetcher moves it with the
    /// leader's. Returns whether anything changed (Kafka's `makeFollower`); `false` for a
    /// stale `state`.
    pub fn become_follower(&self, state: &PartitionState) -> bool {
        let mut leadership = self.leadership.write();
        if is_stale(
            state,
            leadership.leader_epoch,
            leadership.partition_epoch,
            leadership.role,
        ) {
            tracing::debug!(partition = %self.topic_partition, epoch = %state.leader_epoch, "stale leadership change ignored");
            return false;
        }
        let changed = leadership.role != Role::Follower
            || leadership.leader_id != state.leader
            || leadership.leader_epoch != state.leader_epoch;
        leadership.role = Role::Follower;
        leadership.leader_id = state.leader;
        leadership.leader_epoch = state.leader_epoch;
        leadership.partition_epoch = state.partition_epoch;
        leadership.topic_id = state.topic_id;
        leadership.replicas.clone_from(&state.replicas);
        leadership.isr = IsrState::Committed {
            isr: state.isr.iter().copied().collect(),
        };
        leadership.followers.clear();
        leadership.leader_epoch_start_offset = None;
        self.leader_epoch
            .store(state.leader_epoch.0, Ordering::Release);
        drop(leadership);
        self.role.send_replace(Role::Follower);
        if changed {
            tracing::info!(partition = %self.topic_partition, leader = state.leader, epoch = %state.leader_epoch, "became follower");
        }
        changed
    }

    /// Makes this broker the leader of a single-node partition (replicas and ISR: itself),
    /// in the latest epoch its log knows (0 for a new one): how every partition is served
    /// until the controller hands out leadership. The high watermark moves to the durable
    /// end at once, so a single node behaves as before replication.
    pub fn become_sole_leader(&self) {
        let local = self.leadership.read().local_broker_id;
        let epoch = self
            .with_log(|log| Ok(log.leader_epochs().latest_epoch()))
            .ok()
            .flatten()
            .unwrap_or(LeaderEpoch(0));
        let state = PartitionState {
            topic_partition: self.topic_partition.clone(),
            topic_id: uuid::Uuid::nil(),
            replicas: vec![local],
            isr: vec![local],
            leader: local,
            leader_epoch: epoch,
            partition_epoch: 0,
        };
        if let Err(e) = self.become_leader(&state) {
            tracing::debug!(partition = %self.topic_partition, error = %e, "closed before it could lead");
        }
    }

    /// The log end offset as last published.
    #[must_use]
    pub fn log_end_offset(&self) -> Offset {
        *self.log_end.borrow()
    }
}

/// Whether `state` is older than what the partition applied: an older leader epoch, or
/// an older (or, with a role already taken, the same) partition epoch in the same leader
/// epoch.
fn is_stale(state: &PartitionState, epoch: LeaderEpoch, partition_epoch: i32, role: Role) -> bool {
    if state.leader_epoch != epoch {
        return state.leader_epoch < epoch;
    }
    role != Role::None && state.partition_epoch < partition_epoch
}

/// The followers' states as a leader starts (Kafka's `makeLeader` resetting each remote
/// replica): in a new epoch, every follower's position is unknown again and the epoch
/// starts at `log_end`; ISR members get a full lag time to fetch before they count as
/// out of sync. In the same epoch (a new assignment or ISR) what is known of the
/// remaining followers stays and new ones start unknown.
fn reset_followers(
    leadership: &mut Leadership,
    state: &PartitionState,
    new_epoch: bool,
    now_ms: i64,
    log_end: Offset,
) {
    let local = leadership.local_broker_id;
    if new_epoch {
        leadership.leader_epoch_start_offset = Some(log_end);
        let isr: BTreeSet<i32> = leadership.isr.committed().clone();
        leadership.followers = state
            .replicas
            .iter()
            .filter(|id| **id != local)
            .map(|id| {
                (
                    *id,
                    ReplicaState::new(*id, now_ms, log_end, isr.contains(id)),
                )
            })
            .collect();
    } else {
        // Same epoch, new assignment or ISR: keep what is known of remaining followers.
        leadership
            .followers
            .retain(|id, _| state.replicas.contains(id));
        for id in state.replicas.iter().filter(|id| **id != local) {
            leadership
                .followers
                .entry(*id)
                .or_insert_with(|| ReplicaState::new(*id, now_ms, log_end, false));
        }
    }
}
