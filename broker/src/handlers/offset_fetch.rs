//! OffsetFetch (API key 9): a group's committed offsets, for one group (v1-7) or several
//! (v8+). With `require_stable` (v7+, KIP-447), a partition whose transactional offset
//! commit is not yet committed or aborted answers UNSTABLE_OFFSET_COMMIT, so the consumer
//! retries instead of starting from an offset a transaction may still change.

use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use crate::authorizer::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::group::offsets::OffsetAndMetadata;
use crate::coordinator::group::FetchedTopic;

/// Versions served (v10 names topics by id; not served).
pub const VERSIONS: VersionRange = VersionRange { min: 1, max: 9 };

/// First version with the multi-group form (KIP-709).
const GROUPS_VERSION: i16 = 8;

/// "No committed offset", as Kafka answers it.
const NO_OFFSET: i64 = -1;

/// A partition's answer: its committed offset, or (with `require_stable`) an error while a
/// transactional commit of it is pending.
type Fetched = (String, Vec<(i32, Result<Option<OffsetAndMetadata>, i16>)>);

/// The group's committed offsets for `topics` (all if `None`), as far as the sender may
/// see them: DESCRIBE on the group, and on each topic (a topic asked for without it
/// answers TOPIC_AUTHORIZATION_FAILED; one found by "all topics" is left out).
fn fetch(
    ctx: &super::RequestContext,
    group_id: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> Result<Vec<Fetched>, i16> {
    let broker: &Broker = &ctx.broker;
    if !ctx.authorize(AclOperation::Describe, ResourceType::Group, group_id) {
        return Err(ResponseError::GroupAuthorizationFailed.code());
    }
    let may_describe =
        |topic: &str| ctx.authorize(AclOperation::Describe, ResourceType::Topic, topic);
    let (topics, unauthorized): (Option<Vec<_>>, Vec<_>) = match topics {
        None => (None, Vec::new()),
        Some(topics) => {
            let (allowed, denied) = topics.into_iter().partition(|(t, _)| may_describe(t));
            (Some(allowed), denied)
        }
    };
    let all_topics = topics.is_none();
    let mut fetched: Vec<FetchedTopic> = broker
        .groups
        .fetch_offsets(group_id, topics.as_deref())
        .map_err(|e| crate::errors::group_error(&e).code())?;
    if all_topics {
        fetched.retain(|(topic, _)| may_describe(topic));
    }
    let unstable = if require_stable {
        broker.groups.pending_txn_partitions(group_id)
    } else {
        std::collections::HashSet::new()
    };
    Ok(fetched
        .into_iter()
        .map(|(topic, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|(index, committed)| {
                    if unstable.contains(&(topic.clone(), index)) {
                        (index, Err(ResponseError::UnstableOffsetCommit.code()))
                    } else {
                        (index, Ok(committed))
                    }
                })
                .collect();
            (topic, partitions)
        })
        .chain(unauthorized.into_iter().map(|(topic, partitions)| {
            let denied = ResponseError::TopicAuthorizationFailed.code();
            (
                topic,
                partitions.into_iter().map(|p| (p, Err(denied))).collect(),
            )
        }))
        .collect())
}

/// The committed offset to report (none while unstable) and the partition's error code.
fn split(committed: Result<Option<OffsetAndMetadata>, i16>) -> (Option<OffsetAndMetadata>, i16) {
    match committed {
        Ok(c) => (c, crate::errors::NONE),
        Err(code) => (None, code),
    }
}

/// The committed offset's fields as a partition reports them (offset, leader epoch,
/// metadata), with "no committed offset" when there is none or it is unstable, and the
/// partition's error code.
fn reported(committed: Result<Option<OffsetAndMetadata>, i16>) -> (i64, i32, String, i16) {
    let (committed, code) = split(committed);
    let (offset, leader_epoch, metadata) = committed.map_or((NO_OFFSET, -1, String::new()), |c| {
        (c.offset, c.leader_epoch, c.metadata)
    });
    (offset, leader_epoch, metadata, code)
}

/// Answers OffsetFetch.
#[must_use]
pub fn handle(ctx: &super::RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse {
    if ctx.api_version >= GROUPS_VERSION {
        let groups = request
            .groups
            .iter()
            .map(|g| group_response(ctx, g, request.require_stable))
            .collect();
        return OffsetFetchResponse::default().with_groups(groups);
    }
    single_group_response(ctx, &request)
}

/// One group of the multi-group form (v8+, KIP-709): each group is authorized and
/// answered on its own, so one failing group leaves the others' answers intact.
fn group_response(
    ctx: &super::RequestContext,
    g: &OffsetFetchRequestGroup,
    require_stable: bool,
) -> OffsetFetchResponseGroup {
    let topics = g.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    let (fetched, error_code) = match fetch(ctx, g.group_id.0.as_str(), topics, require_stable) {
        Ok(fetched) => (fetched, 0),
        Err(code) => (Vec::new(), code),
    };
    OffsetFetchResponseGroup::default()
        .with_group_id(g.group_id.clone())
        .with_error_code(error_code)
        .with_topics(
            fetched
                .into_iter()
                .map(|(topic, partitions)| {
                    OffsetFetchResponseTopics::default()
                        .with_name(StrBytes::from_string(topic).into())
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|(index, committed)| {
                                    let (offset, leader_epoch, metadata, code) =
                                        reported(committed);
                                    OffsetFetchResponsePartitions::default()
                                        .with_partition_index(index)
                                        .with_error_code(code)
                                        .with_committed_offset(offset)
                                        .with_committed_leader_epoch(leader_epoch)
                                        .with_metadata(Some(StrBytes::from_string(metadata)))
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

/// The single-group form (v1-7), whose response shape differs from the multi-group one:
/// the group's error is top-level (absent in v1) and leader epochs exist from v5.
fn single_group_response(
    ctx: &super::RequestContext,
    request: &OffsetFetchRequest,
) -> OffsetFetchResponse {
    let version = ctx.api_version;
    let epoch = |e: i32| if version >= 5 { e } else { -1 };
    let topics = request.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    let (fetched, error_code) = match fetch(
        ctx,
        request.group_id.0.as_str(),
        topics,
        request.require_stable,
    ) {
        Ok(fetched) => (fetched, 0),
        // v1 has no top-level error code: an empty answer.
        Err(code) => (Vec::new(), if version >= 2 { code } else { 0 }),
    };
    OffsetFetchResponse::default()
        .with_error_code(error_code)
        .with_topics(
            fetched
                .into_iter()
                .map(|(topic, partitions)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(StrBytes::from_string(topic).into())
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|(index, committed)| {
                                    let (offset, leader_epoch, metadata, code) =
                                        reported(committed);
                                    OffsetFetchResponsePartition::default()
                                        .with_partition_index(index)
                                        .with_error_code(code)
                                        .with_committed_offset(offset)
                                        .with_committed_leader_epoch(epoch(leader_epoch))
                                        .with_metadata(Some(StrBytes::from_string(metadata)))
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}
