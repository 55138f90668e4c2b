//! `PartitionChangeBuilder`: computes the one `PartitionChangeRecord` that takes a
//! partition from its registration to a target (ISR, replicas, reassignment state) and
//! elects its leader, after Kafka's controller class of the same name (read, not copied).
//!
//! The rules that keep acknowledged data safe live here, so every controller operation
//! (fencing, controlled shutdown, AlterPartition, ElectLeaders, reassignment) shares them:
//! - ONLINE keeps the current leader if it is still in the target ISR and acceptable
//!   (unfenced, not shutting down), otherwise takes the first replica in assignment order
//!   that is; PREFERRED tries `replicas[0]` first; UNCLEAN falls back to any acceptable
//!   replica and then resets the ISR to that leader alone, marked RECOVERING.
//! - The ISR is never emptied: removing its last member leaves the ISR as it is and the
//!   partition without a leader (`leader = -1`), until that member comes back.
//! - The leader epoch is bumped only on a leader change or when replicas are removed (not
//!   on ISR shrinks: metadata.version 3.6+, KAFKA-15021); the partition epoch on any change.
//! - The record carries the partition epoch it was computed from; apply rejects it if the
//!   partition changed in between.

use uuid::Uuid;

use crate::image::PartitionRegistration;
use crate::records::{BrokerId, LeaderRecoveryState, PartitionChangeRecord, NO_LEADER};

/// How to elect a leader (Kafka's `PartitionChangeBuilder.Election`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Election {
    /// Keep the partition online from the ISR; keep the current leader when possible.
    #[default]
    Online,
    /// Like `Online`, but move leadership to the preferred replica if it is eligible.
    Preferred,
    /// Like `Online`, but if no ISR member is eligible take any acceptable replica
    /// (data loss possible; `unclean.leader.election.enable`).
    Unclean,
}

/// Builds the change from a partition's registration to a target state. Targets default
/// to the current values; set only what the operation changes.
pub struct PartitionChangeBuilder<'a, F: Fn(BrokerId) -> bool> {
    partition: &'a PartitionRegistration,
    topic_id: Uuid,
    partition_id: i32,
    is_acceptable_leader: F,
    election: Election,
    target_isr: Vec<BrokerId>,
    target_replicas: Vec<BrokerId>,
    target_removing: Vec<BrokerId>,
    target_adding: Vec<BrokerId>,
    target_leader_recovery_state: LeaderRecoveryState,
}

impl<'a, F: Fn(BrokerId) -> bool> PartitionChangeBuilder<'a, F> {
    /// A builder for `topic_id`'s partition `partition_id`, now `partition`.
    /// `is_acceptable_leader` says whether a broker may lead (usually
    /// `MetadataImage::is_active_broker`).
    pub fn new(
        partition: &'a PartitionRegistration,
        topic_id: Uuid,
        partition_id: i32,
        is_acceptable_leader: F,
    ) -> Self {
        PartitionChangeBuilder {
            partition,
            topic_id,
            partition_id,
            is_acceptable_leader,
            election: Election::Online,
            target_isr: partition.isr.clone(),
            target_replicas: partition.replicas.clone(),
            target_removing: partition.removing_replicas.clone(),
            target_adding: partition.adding_replicas.clone(),
            target_leader_recovery_state: partition.leader_recovery_state,
        }
    }

    /// The election type (default `Online`).
    #[must_use]
    pub fn with_election(mut self, election: Election) -> Self {
        self.election = election;
        self
    }

    /// The ISR wanted (an AlterPartition's, or the ISR without a fenced broker). An empty
    /// target (the last member removed) leaves the ISR as it is, but elects from the empty
    /// target: the partition goes offline (`leader = -1`) rather than losing its last
    /// in-sync replica.
    #[must_use]
    pub fn with_target_isr(mut self, isr: Vec<BrokerId>) -> Self {
        self.target_isr = isr;
        self
    }

    /// The replica assignment wanted. An empty target leaves it unchanged.
    #[must_use]
    pub fn with_target_replicas(mut self, replicas: Vec<BrokerId>) -> Self {
        self.target_replicas = replicas;
        self
    }

    /// Replicas leaving in a reassignment.
    #[must_use]
    pub fn with_target_removing(mut self, removing: Vec<BrokerId>) -> Self {
        self.target_removing = removing;
        self
    }

    /// Replicas joining in a reassignment.
    #[must_use]
    pub fn with_target_adding(mut self, adding: Vec<BrokerId>) -> Self {
        self.target_adding = adding;
        self
    }

    /// The leader recovery state wanted (a recovered leader's AlterPartition).
    #[must_use]
    pub fn with_target_leader_recovery_state(mut self, state: LeaderRecoveryState) -> Self {
        self.target_leader_recovery_state = state;
        self
    }

    /// The change record, or `None` if the target is the current state.
    #[must_use]
    pub fn build(mut self) -> Option<PartitionChangeRecord> {
        let mut record = PartitionChangeRecord {
            topic_id: self.topic_id,
            partition_id: self.partition_id,
            partition_epoch: self.partition.partition_epoch,
            ..PartitionChangeRecord::default()
        };
        self.complete_reassignment_if_needed();
        self.try_election(&mut record);
        // Removing a replica bumps the leader epoch, so the removed replica's fetches are
        // fenced even if the leader stays.
        if record.leader.is_none()
            && !self.target_replicas.is_empty()
            && !contains_all(&self.target_replicas, &self.partition.replicas)
        {
            record.leader = Some(self.partition.leader);
        }
        if record.isr.is_none()
            && !self.target_isr.is_empty()
            && self.target_isr != self.partition.isr
        {
            record.isr = Some(self.target_isr.clone());
        }
        if !self.target_replicas.is_empty() && self.target_replicas != self.partition.replicas {
            record.replicas = Some(self.target_replicas.clone());
        }
        if self.target_removing != self.partition.removing_replicas {
            record.removing_replicas = Some(self.target_removing.clone());
        }
        if self.target_adding != self.partition.adding_replicas {
            record.adding_replicas = Some(self.target_adding.clone());
        }
        if record.leader_recovery_state.is_none()
            && self.target_leader_recovery_state != self.partition.leader_recovery_state
        {
            record.leader_recovery_state = Some(self.target_leader_recovery_state);
        }
        let no_op = record.leader.is_none()
            && record.isr.is_none()
            && record.replicas.is_none()
            && record.removing_replicas.is_none()
            && record.adding_replicas.is_none()
            && record.leader_recovery_state.is_none();
        (!no_op).then_some(record)
    }

    /// A reassignment is complete once every target replica (the replicas without the
    /// removing ones) is in the ISR: then the removing replicas leave replicas and ISR.
    fn complete_reassignment_if_needed(&mut self) {
        if self.target_removing.is_empty() && self.target_adding.is_empty() {
            return;
        }
        let removing = &self.target_removing;
        let isr: Vec<BrokerId> = self
            .target_isr
            .iter()
            .copied()
            .filter(|r| !removing.contains(r))
            .collect();
        let replicas: Vec<BrokerId> = self
            .target_replicas
            .iter()
            .copied()
            .filter(|r| !removing.contains(r))
            .collect();
        if isr.is_empty() || replicas.is_empty() || !contains_all(&isr, &replicas) {
            return;
        }
        self.target_isr = isr;
        self.target_replicas = replicas;
        self.target_removing.clear();
        self.target_adding.clear();
    }

    fn is_valid_new_leader(&self, replica: BrokerId) -> bool {
        self.target_isr.contains(&replica) && (self.is_acceptable_leader)(replica)
    }

    /// The elected leader and whether the election was unclean.
    fn elect_leader(&self) -> (BrokerId, bool) {
        if self.election == Election::Preferred {
            if let Some(&preferred) = self.target_replicas.first() {
                if self.is_valid_new_leader(preferred) {
                    return (preferred, false);
                }
            }
        }
        if self.is_valid_new_leader(self.partition.leader) {
            return (self.partition.leader, false);
        }
        if let Some(&leader) = self
            .target_replicas
            .iter()
            .find(|r| self.is_valid_new_leader(**r))
        {
            return (leader, false);
        }
        if self.election == Election::Unclean {
            if let Some(&leader) = self
                .target_replicas
                .iter()
                .find(|r| (self.is_acceptable_leader)(**r))
            {
                return (leader, true);
            }
        }
        (NO_LEADER, false)
    }

    fn try_election(&self, record: &mut PartitionChangeRecord) {
        let (leader, unclean) = self.elect_leader();
        if leader == self.partition.leader {
            if unclean {
                // The target ISR left out the current leader and nobody in it can lead:
                // the leader stays (its log is the partition's) and is alone in sync.
                // Kafka's builder would write the target ISR without its leader here.
                record.isr = Some(vec![leader]);
            }
            return;
        }
        record.leader = Some(leader);
        if unclean {
            // The new leader may lack acknowledged records: it alone is in sync now, and
            // it must recover its log before serving (KIP-704).
            record.isr = Some(vec![leader]);
            if self.partition.leader_recovery_state != LeaderRecoveryState::Recovering {
                record.leader_recovery_state = Some(LeaderRecoveryState::Recovering);
            }
        }
    }
}

fn contains_all(set: &[BrokerId], subset: &[BrokerId]) -> bool {
    subset.iter().all(|r| set.contains(r))
}

#[cfg(test)]
mod tests;
