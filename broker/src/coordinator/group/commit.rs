//! OffsetCommit, OffsetFetch and offset expiry (`offsets.retention.minutes`), as Kafka's
//! `GroupCoordinator.handleCommitOffsets` / `handleFetchOffsets` / `cleanupGroupMetadata`.
//!
//! A commit is appended to the group's `__consumer_offsets` partition and applied to the
//! group under its lock (so the log order is the apply order); the caller answers only once
//! the append is durable, so an acknowledged commit survives a crash.

use std::sync::Arc;

use logbook_replication::Partition;

use super::classic_group::GroupState;
use super::offsets::{OffsetAndMetadata, OFFSET_METADATA_BYTES_MAX};
use super::{now_ms, persistence, GroupCoordinator, GroupError};

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
    pub durable: Option<(Arc<Partition>, i64)>,
}

/// Committed offsets of one topic, as OffsetFetch returns them (`None` = no commit).
pub type FetchedTopic = (String, Vec<(i32, Option<OffsetAndMetadata>)>);

impl GroupCoordinator {
    /// OffsetCommit. `generation_id < 0` with an empty member id is a standalone commit,
    /// accepted when the group has no members.
    pub fn commit_offsets(
        &self,
        group_id: &str,
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
        let group = match self.group(group_id) {
            Some(g) => g,
            None if generation_id < 0 => self.get_or_create(group_id),
            // A member of a generation this coordinator never had.
            None => return all(GroupError::IllegalGeneration),
        };
        let mut g = group.lock();
        let check = if g.state == GroupState::Dead {
            Err(GroupError::CoordinatorNotAvailable)
        } else if g.is_static_member_fenced(group_instance_id, member_id) {
            Err(GroupError::FencedInstanceId)
        } else if generation_id < 0 && g.state == GroupState::Empty {
            Ok(())
        } else if g.state == GroupState::CompletingRebalance {
            Err(GroupError::RebalanceInProgress)
        } else if !g.members.contains_key(member_id) {
            Err(GroupError::UnknownMemberId)
        } else if generation_id != g.generation_id {
            Err(GroupError::IllegalGeneration)
        } else {
            let timeout = g.members.get(member_id).map_or(0, |m| m.session_timeout_ms);
            self.schedule_session(&mut g, member_id, timeout);
            Ok(())
        };
        if let Err(e) = check {
            return all(e);
        }
        let now = now_ms();
        let mut errors = Vec::with_capacity(partitions.len());
        let mut records = Vec::new();
        let mut values = Vec::new();
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
            values.push(((p.topic.clone(), p.partition), value));
        }
        if records.is_empty() {
            return CommitResult {
                errors,
                durable: None,
            };
        }
        match self.append(group_id, &records) {
            Ok(durable) => {
                g.offsets.extend(values);
                CommitResult {
                    errors,
                    durable: Some(durable),
                }
            }
            Err(e) => CommitResult {
                errors: errors.into_iter().map(|x| x.or(Some(e))).collect(),
                durable: None,
            },
        }
    }

    /// OffsetFetch: the committed offsets of `topics` (every committed partition when
    /// `None`). A group that does not exist has no offsets.
    #[must_use]
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        topics: Option<&[(String, Vec<i32>)]>,
    ) -> Vec<FetchedTopic> {
        let group = self.group(group_id);
        let g = group.as_ref().map(|g| g.lock());
        let committed = |topic: &str, partition: i32| {
            g.as_ref()
                .and_then(|g| g.offsets.get(&(topic.to_string(), partition)).cloned())
        };
        match topics {
            Some(topics) => topics
                .iter()
                .map(|(topic, partitions)| {
                    (
                        topic.clone(),
                        partitions
                            .iter()
                            .map(|p| (*p, committed(topic, *p)))
                            .collect(),
                    )
                })
                .collect(),
            None => {
                let mut out: Vec<FetchedTopic> = Vec::new();
                if let Some(g) = &g {
                    for ((topic, partition), value) in &g.offsets {
                        if out.last().is_none_or(|(t, _)| t != topic) {
                            out.push((topic.clone(), Vec::new()));
                        }
                        if let Some((_, list)) = out.last_mut() {
                            list.push((*partition, Some(value.clone())));
                        }
                    }
                }
                out
            }
        }
    }

    /// Removes offsets past `offsets.retention.minutes` and groups left with nothing, as
    /// Kafka: an Empty group's offsets expire a retention period after it became empty (or
    /// after the commit, for groups that never had members); a non-empty consumer group's
    /// offsets expire only for topics no member subscribes to.
    pub fn expire_offsets(&self, now_ms: i64) {
        let retention = self.config.offsets_retention_ms;
        let groups: Vec<_> = self.groups.read().values().cloned().collect();
        for group in groups {
            let mut g = group.lock();
            let expired: Vec<(String, i32)> = match g.state {
                GroupState::Empty => {
                    let base_state = g.protocol_type.is_some().then_some(g.state_timestamp_ms);
                    g.offsets
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
            let mut records: Vec<_> = expired
                .iter()
                .map(|(topic, partition)| {
                    (
                        persistence::offset_key(&g.group_id, topic, *partition),
                        None,
                    )
                })
                .collect();
            for key in &expired {
                g.offsets.remove(key);
            }
            let dead = g.state == GroupState::Empty && g.offsets.is_empty();
            if dead {
                g.transition_to(GroupState::Dead, now_ms);
                records.push((persistence::group_key(&g.group_id), None));
            }
            if !records.is_empty() {
                tracing::info!(group = %g.group_id, offsets = expired.len(), removed_group = dead, "expired offsets");
                let _ = self.append(&g.group_id, &records);
            }
            if dead {
                let group_id = g.group_id.clone();
                drop(g);
                self.remove_group(&group_id, &group);
            }
        }
    }
}
