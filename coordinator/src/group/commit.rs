//! OffsetCommit, OffsetFetch and offset expiry (`offsets.retention.minutes`), as Kafka's
//! `GroupCoordinator.handleCommitOffsets` / `handleFetchOffsets` / `cleanupGroupMetadata`.
//!
//! A commit's records go through the group coordinator's write path, which appends them to
//! the group's `__consumer_offsets` partition and replays them onto the group under its
//! lock with the function the load replays them with (so the log order is the apply order,
//! and a restart rebuilds what the write installed); the caller answers only once
//! the append is durable, so an acknowledged commit survives a crash, and OffsetFetch reads
//! the offsets as of the partition's high watermark ([`GroupOffsets`]), so it never answers
//! one that is not durable.
//!
//! [`GroupOffsets`]: super::offsets::GroupOffsets

use std::sync::Arc;

use super::classic_group::GroupState;
use super::offsets::{OffsetAndMetadata, OFFSET_METADATA_BYTES_MAX};
use super::{now_ms, persistence, Committable, CoordinatorResult, GroupCoordinator, GroupError};

/// One partition of an OffsetCommit.
#[derive(Clone, Debug)]
pub struct CommitPartition {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset to commit.
    pub offset: i64,
    /// Leader epoch of the last consumed record, or -1.
    pub leader_epoch: i32,
    /// The client's metadata string.
    pub metadata: Option<String>,
}

/// The outcome of an OffsetCommit: one result per partition in request order, and the
/// append that must become durable before answering.
pub struct CommitResult {
    /// Per-partition errors (`None` = committed).
    pub errors: Vec<Option<GroupError>>,
    /// The `__consumer_offsets` partition and the offset the commit's batch ends before.
    pub durable: Option<Committable>,
}

/// Committed offsets of one topic, as OffsetFetch returns them (`None` = no commit).
pub type FetchedTopic = (String, Vec<(i32, Option<OffsetAndMetadata>)>);

impl GroupCoordinator {
    /// OffsetCommit. `generation_id < 0` with an empty member id is a standalone commit,
    /// accepted when the group has no members. `api_version` is the request's: from v9 an
    /// unknown group is GROUP_ID_NOT_FOUND, before it ILLEGAL_GENERATION (Kafka keeps the
    /// old answer for old clients).
    pub fn commit_offsets(
        &self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
        partitions: &[CommitPartition],
        api_version: i16,
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
            Ok(None) if generation_id < 0 => match self.get_or_create(group_id) {
                Ok(g) => g,
                Err(e) => return all(e),
            },
            Ok(None) if api_version >= 9 => return all(GroupError::GroupIdNotFound),
            // A member of a generation this coordinator never had.
            Ok(None) => return all(GroupError::IllegalGeneration),
        };
        let mut g = group.lock();
        if let Err(e) = validate_offset_commit(&g, generation_id, member_id, group_instance_id) {
            return all(e);
        }
        // Kafka's classic protocol: a commit keeps the member's session alive.
        if matches!(g.state, GroupState::Stable | GroupState::PreparingRebalance) {
            if let Some(timeout) = g.members.get(member_id).map(|m| m.session_timeout_ms) {
                self.schedule_session(&mut g, member_id, timeout);
            }
        }
        let result = offset_commit_records(group_id, partitions, now_ms());
        // A partition refused up front keeps its own error when the write fails.
        let refused = result.response.clone();
        match self.write(&mut g, None, result) {
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

    /// OffsetFetch: the committed offsets of `topics` (every committed partition when
    /// `None`) as of the high watermark of the group's `__consumer_offsets` partition: a
    /// commit is visible once it is durable, never before (Kafka reads its coordinator's
    /// timeline at the last committed offset). A group that does not exist has no offsets.
    ///
    /// # Errors
    /// NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS for a group whose shard is not loaded.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        topics: Option<&[(String, Vec<i32>)]>,
    ) -> Result<Vec<FetchedTopic>, GroupError> {
        let group = self.lookup(group_id)?;
        let Some(group) = group else {
            return Ok(topics
                .unwrap_or_default()
                .iter()
                .map(|(topic, partitions)| {
                    (
                        topic.clone(),
                        partitions.iter().map(|p| (*p, None)).collect(),
                    )
                })
                .collect());
        };
        let high_watermark = self.offsets_partition(group_id)?.high_watermark();
        let mut g = group.lock();
        g.offsets.prune(high_watermark);
        Ok(match topics {
            Some(topics) => topics
                .iter()
                .map(|(topic, partitions)| {
                    let committed =
                        |p: i32| g.offsets.committed(&(topic.clone(), p), high_watermark);
                    (
                        topic.clone(),
                        partitions.iter().map(|p| (*p, committed(*p))).collect(),
                    )
                })
                .collect(),
            None => {
                let mut out: Vec<FetchedTopic> = Vec::new();
                for ((topic, partition), value) in g.offsets.all_committed(high_watermark) {
                    if out.last().is_none_or(|(t, _)| *t != topic) {
                        out.push((topic.clone(), Vec::new()));
                    }
                    if let Some((_, list)) = out.last_mut() {
                        list.push((partition, Some(value)));
                    }
                }
                out
            }
        })
    }

    /// Removes offsets past `offsets.retention.minutes` and groups left with nothing, as
    /// Kafka: an Empty group's offsets expire a retention period after it became empty (or
    /// after the commit, for groups that never had members); a non-empty consumer group's
    /// offsets expire only for topics no member subscribes to.
    pub fn expire_offsets(&self, now_ms: i64) {
        self.expire_groups(self.all_groups(), now_ms);
    }

    /// [`Self::expire_offsets`] over `groups` (one shard's, from its expiry timer).
    pub(super) fn expire_groups(
        &self,
        groups: Vec<Arc<parking_lot::Mutex<super::ClassicGroup>>>,
        now_ms: i64,
    ) {
        let retention = self.config.offsets_retention_ms;
        for group in groups {
            let g = group.lock();
            let expired: Vec<(String, i32)> = match g.state {
                GroupState::Empty => {
                    let base_state = g.protocol_type.is_some().then_some(g.state_timestamp_ms);
                    g.offsets
                        .latest()
                        .iter()
                        .filter(|(_, v)| {
                            base_state
                                .unwrap_or(v.commit_timestamp_ms)
                                .max(v.commit_timestamp_ms)
                                + retention
                                <= now_ms
                        })
                        .map(|(k, _)| k.clone())
                        .collect()
                }
                GroupState::Stable
                | GroupState::CompletingRebalance
                | GroupState::PreparingRebalance => match g.subscribed_topics() {
                    Some(subscribed) => g
                        .offsets
                        .latest()
                        .iter()
                        .filter(|((topic, _), v)| {
                            !subscribed.contains(topic)
                                && v.commit_timestamp_ms + retention <= now_ms
                        })
                        .map(|(k, _)| k.clone())
                        .collect(),
                    None => Vec::new(),
                },
                GroupState::Dead => Vec::new(),
            };
            drop(g);
            self.remove_offsets(&group, &expired, now_ms, "expired offsets");
        }
    }

    /// Kafka's `onPartitionsDeleted`: a deleted topic's committed offsets are removed from
    /// every group (tombstones in `__consumer_offsets`, so a restart does not bring them
    /// back), so a group of a re-created topic starts from `auto.offset.reset` rather than
    /// from the old topic's positions. Groups left Empty with no offsets are removed.
    pub fn on_topics_deleted(&self, topics: &[String]) {
        for group in self.all_groups() {
            let removed: Vec<(String, i32)> = group
                .lock()
                .offsets
                .latest()
                .keys()
                .filter(|(topic, _)| topics.contains(topic))
                .cloned()
                .collect();
            if !removed.is_empty() {
                self.remove_offsets(&group, &removed, now_ms(), "offsets of deleted topics");
            }
        }
    }

    /// Kafka's `cleanupGroupMetadata`: drops `keys` from the group's offsets with their
    /// tombstones, and the group itself (Dead, with a group tombstone) if it is Empty and
    /// holds no offsets any more. The tombstones' durability is not awaited (losing them in
    /// a crash leaves offsets that the next cleanup removes again), but nothing is removed
    /// unless they were appended.
    fn remove_offsets(
        &self,
        group: &Arc<parking_lot::Mutex<super::ClassicGroup>>,
        keys: &[(String, i32)],
        now_ms: i64,
        reason: &str,
    ) {
        let mut g = group.lock();
        if g.state == GroupState::Dead {
            return;
        }
        let group_id = g.group_id.clone();
        let mut records: Vec<_> = keys
            .iter()
            .filter(|key| g.offsets.latest().contains_key(*key))
            .map(|(topic, partition)| (persistence::offset_key(&group_id, topic, *partition), None))
            .collect();
        let removed = records.len();
        let dead = g.state == GroupState::Empty && g.offsets.latest().len() == removed;
        if dead {
            records.push((persistence::group_key(&group_id), None));
        }
        if records.is_empty() {
            return;
        }
        // Removed only once the tombstones are in the log (the write replays them onto the
        // group): were they not, a restart would bring the offsets back while this broker
        // had forgotten them.
        let result = CoordinatorResult {
            records,
            response: (),
        };
        if let Err(e) = self.write(&mut g, None, result) {
            tracing::warn!(group = %group_id, error = %e, "cannot write offset tombstones; will retry");
            return;
        }
        tracing::info!(group = %group_id, offsets = removed, removed_group = dead, reason);
        if dead {
            g.transition_to(GroupState::Dead, now_ms);
            drop(g);
            self.remove_group(&group_id, group);
        }
    }
}

/// Checks each partition of a commit (metadata size, topic name length) and makes the
/// record of each that passes, stamped `now`: shared by OffsetCommit and TxnOffsetCommit
/// so that both refuse and encode a partition the same way (the per-partition half of
/// Kafka's `handleCommitOffsets`). The response is each partition's error in request order
/// (`None`: it has a record); the write replays the records onto the group.
pub(super) fn offset_commit_records(
    group_id: &str,
    partitions: &[CommitPartition],
    now: i64,
) -> CoordinatorResult<Vec<Option<GroupError>>> {
    let mut errors = Vec::with_capacity(partitions.len());
    let mut records = Vec::new();
    for p in partitions {
        let metadata = p.metadata.clone().unwrap_or_default();
        if metadata.len() > OFFSET_METADATA_BYTES_MAX {
            errors.push(Some(GroupError::OffsetMetadataTooLarge));
            continue;
        }
        // No topic can have such a name, and the record key could not hold it.
        if p.topic.len() > persistence::STRING_BYTES_MAX {
            errors.push(Some(GroupError::UnknownTopicOrPartition));
            continue;
        }
        errors.push(None);
        let value = OffsetAndMetadata {
            offset: p.offset,
            leader_epoch: p.leader_epoch,
            metadata,
            commit_timestamp_ms: now,
        };
        records.push((
            persistence::offset_key(group_id, &p.topic, p.partition),
            Some(persistence::offset_value(&value)),
        ));
    }
    CoordinatorResult {
        records,
        response: errors,
    }
}

/// Kafka's `ClassicGroup.validateOffsetCommit`, in its order: a Dead group, then the
/// standalone commit to an Empty group, then member and generation (a zombie learns it is
/// one before anything else), and only then REBALANCE_IN_PROGRESS for a current member
/// while the group waits for SyncGroup.
fn validate_offset_commit(
    g: &super::ClassicGroup,
    generation_id: i32,
    member_id: &str,
    group_instance_id: Option<&str>,
) -> Result<(), GroupError> {
    if g.state == GroupState::Dead {
        return Err(GroupError::CoordinatorNotAvailable);
    }
    if generation_id < 0 && g.state == GroupState::Empty {
        return Ok(());
    }
    if generation_id >= 0 || !member_id.is_empty() || group_instance_id.is_some() {
        if let Some(e) = g.static_member_error(group_instance_id, member_id) {
            return Err(e);
        }
        if !g.members.contains_key(member_id) {
            return Err(GroupError::UnknownMemberId);
        }
        if generation_id != g.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
    } else if g.state != GroupState::Empty {
        // No member id and no generation (the v0 shape): only an Empty group takes it.
        return Err(GroupError::UnknownMemberId);
    }
    if g.state == GroupState::CompletingRebalance {
        return Err(GroupError::RebalanceInProgress);
    }
    Ok(())
}
