//! Group administration: ListGroups, DescribeGroups, DeleteGroups and OffsetDelete.

use bytes::Bytes;

use super::classic_group::GroupState;
use super::Committable;
use super::{now_ms, persistence, CommitResult, CoordinatorResult, GroupCoordinator, GroupError};

/// One group as ListGroups shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupListing {
    /// Group id.
    pub group_id: String,
    /// Protocol type ("" for offset-only groups).
    pub protocol_type: String,
    /// State.
    pub state: GroupState,
}

/// One member as DescribeGroups shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberDescription {
    /// Member id.
    pub member_id: String,
    /// `group.instance.id`.
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client host.
    pub client_host: String,
    /// Metadata for the selected protocol (Stable groups only, as Kafka).
    pub metadata: Bytes,
    /// Assignment: the member's current one, in every state (metadata is Stable-only).
    pub assignment: Bytes,
}

/// A group as DescribeGroups shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescription {
    /// State.
    pub state: GroupState,
    /// Protocol type.
    pub protocol_type: String,
    /// Selected protocol (Stable groups only).
    pub protocol: String,
    /// Members.
    pub members: Vec<MemberDescription>,
}

impl GroupCoordinator {
    /// Every live group, filtered by state names (case-insensitive, as Kafka) when given.
    #[must_use]
    pub fn list_groups(&self, states: &[String]) -> Vec<GroupListing> {
        let groups = self.all_groups();
        let mut out: Vec<GroupListing> = groups
            .iter()
            .map(|g| {
                let g = g.lock();
                GroupListing {
                    group_id: g.group_id.clone(),
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    state: g.state,
                }
            })
            .filter(|l| l.state != GroupState::Dead)
            .filter(|l| {
                states.is_empty()
                    || states
                        .iter()
                        .any(|s| s.eq_ignore_ascii_case(l.state.name()))
            })
            .collect();
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// DescribeGroups of one group.
    ///
    /// # Errors
    /// GROUP_ID_NOT_FOUND for a group that does not exist.
    pub fn describe_group(&self, group_id: &str) -> Result<GroupDescription, GroupError> {
        let group = self.lookup(group_id)?.ok_or(GroupError::GroupIdNotFound)?;
        let g = group.lock();
        if g.state == GroupState::Dead {
            return Err(GroupError::GroupIdNotFound);
        }
        let stable = g.state == GroupState::Stable;
        let protocol = g.protocol_name.clone().unwrap_or_default();
        Ok(GroupDescription {
            state: g.state,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol: if stable {
                protocol.clone()
            } else {
                String::new()
            },
            members: g
                .join_order
                .iter()
                .filter_map(|id| g.members.get(id))
                .map(|m| MemberDescription {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(&protocol).cloned().unwrap_or_default()
                    } else {
                        Bytes::new()
                    },
                    // Kafka's `describeNoMetadata`: outside Stable the member's last
                    // assignment is still shown (empty once a rebalance reset it).
                    assignment: m.assignment.clone(),
                })
                .collect(),
        })
    }

    /// DeleteGroups of one group: only an Empty group may go; its offsets and metadata are
    /// removed with tombstones. The group is gone from memory at once; the returned
    /// append is what to wait for before answering, so that a deletion the client saw
    /// succeed cannot come back after a crash (the tombstones are then durable), as
    /// Kafka answers only once its records are committed.
    ///
    /// # Errors
    /// GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or a storage failure.
    pub fn delete_group(&self, group_id: &str) -> Result<Option<Committable>, GroupError> {
        let group = self.lookup(group_id)?.ok_or(GroupError::GroupIdNotFound)?;
        let mut g = group.lock();
        match g.state {
            GroupState::Dead => return Err(GroupError::GroupIdNotFound),
            GroupState::Empty => {}
            GroupState::PreparingRebalance
            | GroupState::CompletingRebalance
            | GroupState::Stable => return Err(GroupError::NonEmptyGroup),
        }
        let mut records: Vec<_> = g
            .offsets
            .latest()
            .keys()
            .map(|(topic, partition)| (persistence::offset_key(group_id, topic, *partition), None))
            .collect();
        records.push((persistence::group_key(group_id), None));
        let result = CoordinatorResult {
            records,
            response: (),
        };
        let written = self.write(&mut g, None, result)?;
        g.transition_to(GroupState::Dead, now_ms());
        drop(g);
        self.remove_group(group_id, &group);
        tracing::info!(group = group_id, "deleted group");
        Ok(written.committable)
    }

    /// OffsetDelete: removes committed offsets, except of topics a member subscribes to.
    /// Returns one result per requested (topic, partition), and the tombstones' append to
    /// wait for: the deletion shows in OffsetFetch once it is committed (OffsetFetch reads
    /// as of the high watermark), so the answer must wait for it too, as Kafka's does.
    ///
    /// # Errors
    /// GROUP_ID_NOT_FOUND; NON_EMPTY_GROUP for a non-consumer group with members.
    pub fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<CommitResult, GroupError> {
        let group = self.lookup(group_id)?.ok_or(GroupError::GroupIdNotFound)?;
        let mut g = group.lock();
        let subscribed = match g.state {
            GroupState::Dead => return Err(GroupError::GroupIdNotFound),
            GroupState::Empty => Default::default(),
            GroupState::PreparingRebalance
            | GroupState::CompletingRebalance
            | GroupState::Stable => {
                if g.protocol_type.as_deref() != Some("consumer") {
                    return Err(GroupError::NonEmptyGroup);
                }
                g.subscribed_topics().unwrap_or_default()
            }
        };
        let mut results = Vec::with_capacity(partitions.len());
        let mut records = Vec::new();
        for (topic, partition) in partitions {
            if subscribed.contains(topic) {
                results.push(Some(GroupError::GroupSubscribedToTopic));
                continue;
            }
            results.push(None);
            if g.offsets
                .latest()
                .contains_key(&(topic.clone(), *partition))
            {
                records.push((persistence::offset_key(group_id, topic, *partition), None));
            }
        }
        // The write replays the tombstones onto the group; none: nothing is written.
        let result = CoordinatorResult {
            records,
            response: results,
        };
        let written = self.write(&mut g, None, result)?;
        Ok(CommitResult {
            errors: written.response,
            durable: written.committable,
        })
    }
}
