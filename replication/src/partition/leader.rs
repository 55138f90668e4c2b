//! Leadership of one partition as this broker sees it: who leads in which epoch, the ISR
//! (committed, or with an AlterPartition in flight), and, on the leader, each follower's
//! position. The rules over them live here as plain functions of this state (Kafka's
//! `Partition` leader half): the maximal ISR, the high-watermark candidate, which followers
//! fell out of sync, and which one may join.
//!
//! ISR changes are proposed by the leader and committed by the controller (AlterPartition,
//! KIP-497). Until the controller answers, the leader counts the *maximal* ISR: the committed
//! one plus a pending addition, and still the old members of a pending removal. Counting a
//! smaller ISR than the controller committed could acknowledge a write that a member the
//! controller still considers in sync does not have, and that member may be elected.

use std::collections::{BTreeMap, BTreeSet};

use logbook_storage::{LeaderEpoch, Offset};

use super::replica_state::ReplicaState;
use super::TopicPartition;

/// A partition's assignment and leadership as the controller committed it: what the broker's
/// metadata publisher hands to `ReplicaManager::apply_partition_changes` (a plain struct, so
/// replication does not depend on the metadata crate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionState {
    /// The partition.
    pub topic_partition: TopicPartition,
    /// The topic's id.
    pub topic_id: uuid::Uuid,
    /// Broker ids of every replica, preferred leader first.
    pub replicas: Vec<i32>,
    /// Broker ids of the in-sync replicas.
    pub isr: Vec<i32>,
    /// The leader's broker id, -1 when the partition has none.
    pub leader: i32,
    /// Bumped by the controller at every leader change.
    pub leader_epoch: LeaderEpoch,
    /// Bumped by the controller at every change of the partition (ISR, replicas, leader);
    /// an AlterPartition names the epoch it was computed from.
    pub partition_epoch: i32,
}

/// The ISR as the leader counts it (Kafka's `PartitionState`): committed, or with one
/// AlterPartition in flight. Only one request is in flight per partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IsrState {
    /// No change in flight.
    Committed {
        /// The committed ISR.
        isr: BTreeSet<i32>,
    },
    /// A follower that caught up is being added.
    PendingExpand {
        /// The committed ISR.
        isr: BTreeSet<i32>,
        /// The follower being added.
        new_member: i32,
    },
    /// Followers that fell behind are being removed.
    PendingShrink {
        /// The committed ISR (still counted until the shrink commits).
        isr: BTreeSet<i32>,
        /// The followers being removed.
        removed: BTreeSet<i32>,
    },
}

impl IsrState {
    /// The ISR the controller committed.
    #[must_use]
    pub fn committed(&self) -> &BTreeSet<i32> {
        match self {
            IsrState::Committed { isr }
            | IsrState::PendingExpand { isr, .. }
            | IsrState::PendingShrink { isr, .. } => isr,
        }
    }

    /// The ISR the high watermark and acks=all count (Kafka's `maximalIsr`): the committed
    /// ISR plus a pending addition; a pending removal is still counted.
    #[must_use]
    pub fn maximal(&self) -> BTreeSet<i32> {
        let mut isr = self.committed().clone();
        if let IsrState::PendingExpand { new_member, .. } = self {
            isr.insert(*new_member);
        }
        isr
    }

    /// Whether an AlterPartition is in flight.
    #[must_use]
    pub fn is_inflight(&self) -> bool {
        !matches!(self, IsrState::Committed { .. })
    }
}

/// One ISR member as AlterPartition v3 names it (`BrokerState`): a follower's broker epoch
/// lets the controller refuse one that restarted since it fetched (KIP-903).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IsrMember {
    /// The broker id.
    pub broker_id: i32,
    /// Its broker epoch as the leader saw it in its fetches; -1 for the leader itself.
    pub broker_epoch: i64,
}

/// An ISR change the leader asks the controller to commit (AlterPartition, API 56).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterPartitionRequest {
    /// The partition.
    pub topic_partition: TopicPartition,
    /// The topic's id.
    pub topic_id: uuid::Uuid,
    /// The leader asking (this broker).
    pub leader_id: i32,
    /// The leader's epoch.
    pub leader_epoch: LeaderEpoch,
    /// The partition epoch the change was computed from; a stale one is refused
    /// (INVALID_UPDATE_VERSION).
    pub partition_epoch: i32,
    /// The proposed ISR.
    pub new_isr: Vec<IsrMember>,
}

/// The controller's answer when it committed an ISR change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlterPartitionCommitted {
    /// The ISR now committed.
    pub isr: Vec<i32>,
    /// The leader epoch of the committed state.
    pub leader_epoch: LeaderEpoch,
    /// The partition epoch of the committed state.
    pub partition_epoch: i32,
}

/// Why the controller did not commit an ISR change (the AlterPartition error codes a
/// leader acts on). Every refusal returns the leader to its committed ISR; it proposes again
/// on a later fetch or shrink check if the reason still holds.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AlterPartitionError {
    /// The request named a stale partition epoch (INVALID_UPDATE_VERSION).
    #[error("stale partition epoch")]
    InvalidUpdateVersion,
    /// A proposed member is fenced, shutting down or restarted (INELIGIBLE_REPLICA).
    #[error("ineligible replica")]
    IneligibleReplica,
    /// Another leader was elected meanwhile (NEW_LEADER_ELECTED / FENCED_LEADER_EPOCH).
    #[error("another leader was elected")]
    NewLeaderElected,
    /// The controller does not know the partition (UNKNOWN_TOPIC_OR_PARTITION).
    #[error("unknown partition")]
    UnknownTopicOrPartition,
    /// The change was never sent (Kafka's OPERATION_NOT_ATTEMPTED): a change for the
    /// partition is in flight already, the queue is full, the broker is stopping or has no
    /// controller. The controller cannot have applied it.
    #[error("not attempted: {0}")]
    NotAttempted(String),
    /// The controller failed otherwise; whether it applied the change is unknown.
    #[error("{0}")]
    Other(String),
}

/// What the leader hands the controller's AlterPartition answer to.
pub type AlterPartitionCallback =
    Box<dyn FnOnce(Result<AlterPartitionCommitted, AlterPartitionError>) + Send>;

/// Sends AlterPartition requests to the controller (Kafka's `AlterPartitionManager`). The
/// controller client implements it next session; tests use a fake that accepts or refuses.
///
/// Contract: `submit` must not block, and must call `done` exactly once, on any thread,
/// possibly before returning (the partition calls it with no lock held).
pub trait AlterPartitionSender: Send + Sync {
    /// Sends `request`; the answer goes to `done`.
    fn submit(&self, request: AlterPartitionRequest, done: AlterPartitionCallback);
}

/// Whether a broker may be counted in an ISR now (Kafka's `isReplicaIsrEligible`,
/// KIP-841 and KIP-903): registered, not fenced, not in controlled shutdown, and still in
/// the registration it fetched with (`broker_epoch`, -1 when not known). The leader asks
/// it before proposing a follower for the ISR, and before letting a caught-up follower
/// outside the ISR hold the high watermark back: a follower that was caught up when it
/// died stays "caught up" for `replica.lag.time.max.ms`, and without this check every
/// acks=all write would wait that long once the controller fenced it.
pub trait IsrEligibility: Send + Sync {
    /// Whether broker `broker_id`, last seen with `broker_epoch`, is eligible.
    fn is_eligible(&self, broker_id: i32, broker_epoch: i64) -> bool;
}

/// Every broker is eligible: a single node (no followers), and tests without a controller.
#[derive(Debug, Default)]
pub struct AnyBrokerEligible;

impl IsrEligibility for AnyBrokerEligible {
    fn is_eligible(&self, _broker_id: i32, _broker_epoch: i64) -> bool {
        true
    }
}

/// A sender for a broker without a controller (single node): there are no followers, so
/// no ISR change is ever proposed; one that is is refused.
#[derive(Debug, Default)]
pub struct NoController;

impl AlterPartitionSender for NoController {
    fn submit(&self, request: AlterPartitionRequest, done: AlterPartitionCallback) {
        tracing::warn!(partition = %request.topic_partition, "AlterPartition without a controller");
        done(Err(AlterPartitionError::NotAttempted(
            "no controller".to_string(),
        )));
    }
}

/// This broker's role for a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Opened, but no leadership applied yet (Kafka's partition before its first
    /// LeaderAndIsr / metadata delta): serves nothing to clients.
    None,
    /// This broker leads the partition.
    Leader,
    /// Another broker leads; this one fetches from it.
    Follower,
}

/// The leadership state of one partition. Owned by the `Partition`, behind its lock.
#[derive(Debug)]
pub struct Leadership {
    /// This broker's id.
    pub local_broker_id: i32,
    /// This broker's role.
    pub role: Role,
    /// The leader's broker id (-1: none).
    pub leader_id: i32,
    /// The current leader epoch.
    pub leader_epoch: LeaderEpoch,
    /// The current partition epoch.
    pub partition_epoch: i32,
    /// The topic's id.
    pub topic_id: uuid::Uuid,
    /// Every replica, preferred leader first.
    pub replicas: Vec<i32>,
    /// The ISR as counted.
    pub isr: IsrState,
    /// On the leader: each other replica's state.
    pub followers: BTreeMap<i32, ReplicaState>,
    /// On the leader: the log end when it became leader in this epoch (KIP-207: the high
    /// watermark below it is not yet known to be final).
    pub leader_epoch_start_offset: Option<Offset>,
}

impl Leadership {
    /// No role yet.
    #[must_use]
    pub fn new(local_broker_id: i32, leader_epoch: LeaderEpoch) -> Self {
        Self {
            local_broker_id,
            role: Role::None,
            leader_id: -1,
            leader_epoch,
            partition_epoch: -1,
            topic_id: uuid::Uuid::nil(),
            replicas: Vec::new(),
            isr: IsrState::Committed {
                isr: BTreeSet::new(),
            },
            followers: BTreeMap::new(),
            leader_epoch_start_offset: None,
        }
    }

    /// The lowest log start among the ISR's followers (Kafka's `lowWatermarkIfLeader`
    /// without the leader's own): `None` when there is no follower to wait for, `Offset(-1)`
    /// while one has not reported its log start in this epoch yet. DeleteRecords answers
    /// once this reaches the new log start, so a failover cannot bring deleted records back.
    #[must_use]
    pub fn followers_low_watermark(&self) -> Option<Offset> {
        self.isr
            .maximal()
            .iter()
            .filter(|id| **id != self.local_broker_id)
            .map(|id| {
                self.followers
                    .get(id)
                    .and_then(|f| f.log_start_offset)
                    .unwrap_or(Offset(-1))
            })
            .min()
    }

    /// Whether this broker leads.
    #[must_use]
    pub fn is_leader(&self) -> bool {
        self.role == Role::Leader
    }

    /// `min.insync.replicas` as it applies to this partition, as Kafka's
    /// `Partition.effectiveMinIsr`: never more than the partition has replicas. A topic
    /// with one replica and `min.insync.replicas=2` (a broker default copied from a
    /// production cluster) still commits its records and accepts acks=all; without the cap
    /// its high watermark would never move and every record would stay invisible.
    #[must_use]
    pub fn effective_min_isr(&self, min_insync_replicas: usize) -> usize {
        min_insync_replicas.min(self.replicas.len()).max(1)
    }

    /// The high watermark the leader may publish given its own counted offset
    /// (`leader_offset`: its durable offset, or its log end when the OS flushes), as Kafka's
    /// `maybeIncrementLeaderHW`: the least counted offset over the maximal ISR, and over
    /// followers outside it that are caught up (so one about to join is not left below the
    /// high watermark it must reach). `None` when this broker does not lead or the committed
    /// ISR is smaller than the effective `min_insync_replicas` (Kafka 3.7+: the high watermark waits
    /// rather than commit records fewer replicas than promised have). A member whose
    /// position is unknown holds the high watermark where it is. A follower outside the
    /// ISR counts only while `eligibility` accepts its broker (a fenced one never does).
    #[must_use]
    pub fn high_watermark_candidate(
        &self,
        leader_offset: Offset,
        min_insync_replicas: usize,
        leader_log_end: Offset,
        now_ms: i64,
        lag_time_max_ms: i64,
        eligibility: &dyn IsrEligibility,
    ) -> Option<Offset> {
        if !self.is_leader()
            || self.isr.committed().len() < self.effective_min_isr(min_insync_replicas)
        {
            return None;
        }
        let maximal = self.isr.maximal();
        let mut candidate = leader_offset;
        for member in &maximal {
            if *member == self.local_broker_id {
                continue;
            }
            let end = self.followers.get(member).and_then(|f| f.log_end_offset)?;
            candidate = candidate.min(end);
        }
        for follower in self.followers.values() {
            if maximal.contains(&follower.broker_id) {
                continue;
            }
            if let Some(end) = follower.log_end_offset {
                if follower.is_caught_up(leader_log_end, now_ms, lag_time_max_ms)
                    && eligibility.is_eligible(follower.broker_id, follower.broker_epoch)
                {
                    candidate = candidate.min(end);
                }
            }
        }
        Some(candidate)
    }

    /// The followers in the committed ISR that fell out of sync (Kafka's
    /// `getOutOfSyncReplicas`): none while an AlterPartition is in flight.
    #[must_use]
    pub fn out_of_sync_replicas(
        &self,
        leader_log_end: Offset,
        now_ms: i64,
        lag_time_max_ms: i64,
    ) -> BTreeSet<i32> {
        if !self.is_leader() || self.isr.is_inflight() {
            return BTreeSet::new();
        }
        self.isr
            .committed()
            .iter()
            .copied()
            .filter(|id| *id != self.local_broker_id)
            .filter(|id| {
                self.followers
                    .get(id)
                    .is_none_or(|f| !f.is_caught_up(leader_log_end, now_ms, lag_time_max_ms))
            })
            .collect()
    }

    /// Whether `follower` may join the ISR now (Kafka's `canAddReplicaToIsr` with
    /// `isFollowerInSync`): nothing in flight, not a member yet, an assigned replica, and
    /// its log reaches both the high watermark and the start of this leader epoch (so it
    /// holds everything this leader committed), and `eligibility` accepts its broker
    /// (fenced, shutting down, stale broker epoch: KIP-841/903; the controller checks
    /// again).
    #[must_use]
    pub fn can_add_to_isr(
        &self,
        follower: i32,
        high_watermark: Offset,
        eligibility: &dyn IsrEligibility,
    ) -> bool {
        let Some(state) = self.followers.get(&follower) else {
            return false;
        };
        let Some(end) = state.log_end_offset else {
            return false;
        };
        if !eligibility.is_eligible(follower, state.broker_epoch) {
            return false;
        }
        self.is_leader()
            && !self.isr.is_inflight()
            && !self.isr.committed().contains(&follower)
            && self.replicas.contains(&follower)
            && end >= high_watermark
            && self
                .leader_epoch_start_offset
                .is_some_and(|start| end >= start)
    }

    /// The AlterPartition request for `new_isr`.
    #[must_use]
    pub fn alter_partition_request(
        &self,
        topic_partition: &TopicPartition,
        new_isr: &BTreeSet<i32>,
    ) -> AlterPartitionRequest {
        AlterPartitionRequest {
            topic_partition: topic_partition.clone(),
            topic_id: self.topic_id,
            leader_id: self.local_broker_id,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            new_isr: new_isr
                .iter()
                .map(|id| IsrMember {
                    broker_id: *id,
                    broker_epoch: self.followers.get(id).map_or(-1, |f| f.broker_epoch),
                })
                .collect(),
        }
    }
}
