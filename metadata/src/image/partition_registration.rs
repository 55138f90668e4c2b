//! `PartitionRegistration`: one partition's replicas, ISR, leader and epochs, and the rules
//! a `PartitionChangeRecord` follows when it is merged in (Kafka's `PartitionRegistration`).

use uuid::Uuid;

use crate::records::{
    BrokerId, LeaderRecoveryState, PartitionChangeRecord, PartitionRecord, NO_LEADER,
};
use crate::Error;

/// One partition's registration.
///
/// Invariants (checked on every apply, so an image never holds a registration that breaks
/// them): `replicas` is non-empty and has no duplicates; `isr` is a non-empty subset of
/// `replicas`; `leader` is in `isr` or is [`NO_LEADER`]; `removing_replicas` and
/// `adding_replicas` are disjoint subsets of `replicas`; both epochs are non-negative and
/// never decrease.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartitionRegistration {
    /// Assigned replicas, the preferred leader first.
    pub replicas: Vec<BrokerId>,
    /// In-sync replicas.
    pub isr: Vec<BrokerId>,
    /// Replicas leaving in an ongoing reassignment.
    pub removing_replicas: Vec<BrokerId>,
    /// Replicas joining in an ongoing reassignment.
    pub adding_replicas: Vec<BrokerId>,
    /// Eligible leader replicas (KIP-966). Reserved: empty.
    pub elr: Vec<BrokerId>,
    /// Last known ELR (KIP-966). Reserved: empty.
    pub last_known_elr: Vec<BrokerId>,
    /// Leader, or [`NO_LEADER`].
    pub leader: BrokerId,
    /// Bumped on leader changes and replica removals; clients and followers fence on it.
    pub leader_epoch: i32,
    /// Bumped on every change; AlterPartition compares it.
    pub partition_epoch: i32,
    /// See [`LeaderRecoveryState`].
    pub leader_recovery_state: LeaderRecoveryState,
}

impl PartitionRegistration {
    /// The registration a `PartitionRecord` describes.
    #[must_use]
    pub fn from_record(record: &PartitionRecord) -> Self {
        PartitionRegistration {
            replicas: record.replicas.clone(),
            isr: record.isr.clone(),
            removing_replicas: record.removing_replicas.clone(),
            adding_replicas: record.adding_replicas.clone(),
            elr: record.elr.clone(),
            last_known_elr: record.last_known_elr.clone(),
            leader: record.leader,
            leader_epoch: record.leader_epoch,
            partition_epoch: record.partition_epoch,
            leader_recovery_state: record.leader_recovery_state,
        }
    }

    /// The `PartitionRecord` that recreates this registration (for snapshots).
    #[must_use]
    pub fn to_record(&self, topic_id: Uuid, partition_id: i32) -> PartitionRecord {
        PartitionRecord {
            topic_id,
            partition_id,
            replicas: self.replicas.clone(),
            isr: self.isr.clone(),
            removing_replicas: self.removing_replicas.clone(),
            adding_replicas: self.adding_replicas.clone(),
            leader: self.leader,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            leader_recovery_state: self.leader_recovery_state,
            elr: self.elr.clone(),
            last_known_elr: self.last_known_elr.clone(),
        }
    }

    /// This registration with `change` merged in: `Some` fields replace, a `Some` leader
    /// bumps the leader epoch, and the partition epoch always grows by one. Does not check
    /// the compare-and-set epoch or the invariants (`apply` does both).
    #[must_use]
    pub fn merge(&self, change: &PartitionChangeRecord) -> Self {
        let pick = |new: &Option<Vec<BrokerId>>, old: &Vec<BrokerId>| {
            new.clone().unwrap_or_else(|| old.clone())
        };
        let (leader, leader_epoch) = match change.leader {
            Some(leader) => (leader, self.leader_epoch + 1),
            None => (self.leader, self.leader_epoch),
        };
        PartitionRegistration {
            replicas: pick(&change.replicas, &self.replicas),
            isr: pick(&change.isr, &self.isr),
            removing_replicas: pick(&change.removing_replicas, &self.removing_replicas),
            adding_replicas: pick(&change.adding_replicas, &self.adding_replicas),
            elr: pick(&change.elr, &self.elr),
            last_known_elr: pick(&change.last_known_elr, &self.last_known_elr),
            leader,
            leader_epoch,
            partition_epoch: self.partition_epoch + 1,
            leader_recovery_state: change
                .leader_recovery_state
                .unwrap_or(self.leader_recovery_state),
        }
    }

    /// Whether a leader is elected.
    #[must_use]
    pub fn has_leader(&self) -> bool {
        self.leader != NO_LEADER
    }

    /// The preferred leader: the first assigned replica.
    #[must_use]
    pub fn preferred_replica(&self) -> BrokerId {
        self.replicas.first().copied().unwrap_or(NO_LEADER)
    }

    /// Whether a reassignment is in progress.
    #[must_use]
    pub fn is_reassigning(&self) -> bool {
        !self.removing_replicas.is_empty() || !self.adding_replicas.is_empty()
    }

    /// Checks the invariants listed on the type.
    pub(crate) fn validate(&self, topic_id: Uuid, partition_id: i32) -> Result<(), Error> {
        let invalid = |reason: String| {
            Err(Error::InvalidPartition {
                topic_id,
                partition_id,
                reason,
            })
        };
        if self.replicas.is_empty() {
            return invalid("no replicas".to_string());
        }
        if let Some(r) = self.replicas.iter().find(|r| **r < 0) {
            return invalid(format!("replica id {r} is negative"));
        }
        if has_duplicates(&self.replicas) {
            return invalid(format!("duplicate replicas {:?}", self.replicas));
        }
        if self.isr.is_empty() {
            return invalid("empty ISR".to_string());
        }
        if has_duplicates(&self.isr) {
            return invalid(format!("duplicate ISR members {:?}", self.isr));
        }
        for (what, set) in [
            ("ISR", &self.isr),
            ("removing replicas", &self.removing_replicas),
            ("adding replicas", &self.adding_replicas),
        ] {
            if let Some(r) = set.iter().find(|r| !self.replicas.contains(r)) {
                return invalid(format!(
                    "{what} member {r} is not a replica {:?}",
                    self.replicas
                ));
            }
        }
        if let Some(r) = self
            .removing_replicas
            .iter()
            .find(|r| self.adding_replicas.contains(r))
        {
            return invalid(format!("replica {r} both adding and removing"));
        }
        if self.leader != NO_LEADER && !self.isr.contains(&self.leader) {
            return invalid(format!("leader {} not in ISR {:?}", self.leader, self.isr));
        }
        if self.leader_epoch < 0 || self.partition_epoch < 0 {
            return invalid(format!(
                "negative epoch (leader {}, partition {})",
                self.leader_epoch, self.partition_epoch
            ));
        }
        Ok(())
    }
}

fn has_duplicates(ids: &[BrokerId]) -> bool {
    ids.iter()
        .enumerate()
        .any(|(i, id)| ids.iter().skip(i + 1).any(|other| other == id))
}
