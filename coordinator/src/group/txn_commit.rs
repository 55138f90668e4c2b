//! TxnOffsetCommit (KIP-98, KIP-447): a transactional producer's consumed offsets are
//! written to the group's `__consumer_offsets` partition as a transactional batch (its
//! producer id and epoch, the transactional bit) and held pending per producer (the write
//! replays the batch onto the group as the load replays a transactional batch); only the
//! commit marker the transaction coordinator writes to that partition applies them to the
//! group (`complete_txn_offsets`), and an abort marker drops them. OffsetFetch with
//! `require_stable` answers UNSTABLE_OFFSET_COMMIT for partitions with pending offsets.

use std::collections::HashSet;

use super::classic_group::GroupState;
use super::commit::{offset_commit_records, CommitPartition, CommitResult};
use super::{now_ms, persistence, GroupCoordinator, GroupError};

impl GroupCoordinator {
    /// TxnOffsetCommit: validates the member as Kafka's `validateOffsetCommit` does for a
    /// transactional commit (generation -1 with no member id is always accepted; the group
    /// is created if new), appends the offsets as `producer_id`'s transactional batch and
    /// holds them pending. The caller answers once the batch is durable.
    #[expect(
        clippy::too_many_arguments,
        reason = "the request's fields, as Kafka passes them"
    )]
    pub fn txn_commit_offsets(
        &self,
        group_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
        partitions: &[CommitPartition],
    ) -> CommitResult {
        let all = |e: GroupError| CommitResult {
            errors: vec![Some(e); partitions.len()],
            durable: None,
        };
        if group_id.is_empty() || group_id.len() > persistence::STRING_BYTES_MAX {
            return all(GroupError::InvalidGroupId);
        }
        let group = match self.lookup(group_id) {
            Err(e) => return all(e),
            Ok(Some(g)) => g,
            Ok(None) => match self.get_or_create(group_id) {
                Ok(g) => g,
                Err(e) => return all(e),
            },
        };
        let mut g = group.lock();
        if g.state == GroupState::Dead {
            return all(GroupError::CoordinatorNotAvailable);
        }
        if let Err(e) = validate_txn_offset_commit(&g, generation_id, member_id, group_instance_id)
        {
            return all(e);
        }
        let result = offset_commit_records(group_id, partitions, now_ms());
        let refused = result.response.clone();
        // The write replays the transactional records onto the group: pending for
        // `producer_id` until its marker.
        match self.write(&mut g, Some((producer_id, producer_epoch)), result) {
            Ok(written) => CommitResult {
                errors: written.response,
                durable: written.committable,
            },
            Err(e) => CommitResult {
                errors: refused.into_iter().map(|x| x.or(Some(e))).collect(),
                durable: None,
            },
        }
    }

    /// The transaction coordinator wrote `producer_id`'s marker to partition
    /// `partition_index` of `__consumer_offsets` at `marker_offset`: apply (commit) or drop
    /// its pending offsets. Applied ones reach OffsetFetch once the marker is committed.
    pub fn complete_txn_offsets(
        &self,
        partition_index: i32,
        producer_id: i64,
        commit: bool,
        marker_offset: i64,
    ) {
        match self.runtime.shard(partition_index) {
            Ok(shard) => shard.complete_txn_offsets(producer_id, commit, Some(marker_offset + 1)),
            Err(e) => {
                tracing::warn!(partition = partition_index, error = %e, "transaction marker for a shard not loaded here");
            }
        }
    }

    /// Whether a transaction marker may be written to `__consumer_offsets` partition
    /// `partition_index` here now: its shard is loaded. Kafka's coordinator runtime applies
    /// a marker as a write on the loaded shard and refuses it otherwise (the WriteTxnMarkers
    /// handler answers NOT_LEADER_OR_FOLLOWER, and the transaction coordinator retries). A
    /// marker appended while the shard replays is missed: the replay reads to the log end
    /// it saw when it started, and `complete_txn_offsets` finds no loaded shard, so the
    /// group's transactional offsets stayed pending and OffsetFetch with `require_stable`
    /// answered UNSTABLE_OFFSET_COMMIT until the next reload (a consumer that restarted
    /// on a node still loading waited minutes in the chaos trials).
    #[must_use]
    pub fn accepts_txn_markers(&self, partition_index: i32) -> bool {
        self.runtime.shard(partition_index).is_ok()
    }

    /// The partitions of `group_id` with transactional offsets not yet committed or aborted
    /// (OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT for them).
    #[must_use]
    pub fn pending_txn_partitions(&self, group_id: &str) -> HashSet<(String, i32)> {
        let Ok(Some(group)) = self.lookup(group_id) else {
            return HashSet::new();
        };
        let g = group.lock();
        g.pending_txn_offsets
            .values()
            .flat_map(|m| m.keys().cloned())
            .collect()
    }
}

/// The group coordinator as the transaction coordinator sees it.
impl crate::transaction::GroupOffsets for GroupCoordinator {
    fn offsets_topic_ready(&self) -> bool {
        self.offsets_topic().is_ok()
    }

    fn partition_for(&self, group_id: &str) -> i32 {
        GroupCoordinator::partition_for(self, group_id)
    }

    fn accepts_txn_markers(&self, partition_index: i32) -> bool {
        GroupCoordinator::accepts_txn_markers(self, partition_index)
    }

    fn complete_txn_offsets(
        &self,
        partition_index: i32,
        producer_id: i64,
        commit: bool,
        marker_offset: i64,
    ) {
        GroupCoordinator::complete_txn_offsets(
            self,
            partition_index,
            producer_id,
            commit,
            marker_offset,
        );
    }
}

/// Kafka's `validateOffsetCommit` for a transactional commit, in its order: generation -1
/// with no member id and no instance id is always accepted (a producer committing for a
/// group it is not a member of); otherwise the static instance must be the member's, the
/// member known and the generation current.
fn validate_txn_offset_commit(
    g: &super::ClassicGroup,
    generation_id: i32,
    member_id: &str,
    group_instance_id: Option<&str>,
) -> Result<(), GroupError> {
    if generation_id >= 0 || !member_id.is_empty() || group_instance_id.is_some() {
        if let Some(instance) = group_instance_id {
            match g.static_members.get(instance) {
                None => return Err(GroupError::UnknownMemberId),
                Some(current) if current != member_id => return Err(GroupError::FencedInstanceId),
                Some(_) => {}
            }
        }
        if !g.members.contains_key(member_id) {
            return Err(GroupError::UnknownMemberId);
        }
        if generation_id != g.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
    }
    Ok(())
}
