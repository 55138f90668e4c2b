//! OffsetCommit (API key 8): store a group's consumed positions. The answer waits until the
//! commit's `__consumer_offsets` batch is durable, so an acknowledged commit survives a crash.

use std::time::Duration;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, ResponseKind};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use crate::authorizer::{AclOperation, ResourceType};
use crate::coordinator::group::{CommitPartition, CommitResult, GroupError};
use crate::errors;
use crate::handlers::ResponseFuture;

/// Versions served (v10 names topics by id; not served).
pub const VERSIONS: VersionRange = VersionRange { min: 2, max: 9 };

/// The answer that gives every requested partition `error`.
fn every_partition(request: &OffsetCommitRequest, error: ResponseError) -> OffsetCommitResponse {
    let topics = request
        .topics
        .iter()
        .map(|t| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(error.code())
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}

/// Answers OffsetCommit once the commit is durable.
pub fn handle(ctx: &super::RequestContext, request: OffsetCommitRequest) -> ResponseFuture {
    let (broker, version) = (&ctx.broker, ctx.api_version);
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, &request.group_id) {
        return super::ready(ResponseKind::OffsetCommit(every_partition(
            &request,
            ResponseError::GroupAuthorizationFailed,
        )));
    }
    let (decided, commits) = screen_partitions(ctx, &request);
    let result = broker.groups.commit_offsets(
        request.group_id.0.as_str(),
        request.generation_id_or_member_epoch,
        request.member_id.as_str(),
        request.group_instance_id.as_ref().map(StrBytes::as_str),
        &commits,
        version,
    );
    let timeout = Duration::from_millis(broker.groups.config().commit_timeout_ms);
    let names: Vec<(StrBytes, Vec<i32>)> = request
        .topics
        .iter()
        .map(|t| {
            (
                t.name.0.clone(),
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        })
        .collect();
    Box::pin(async move {
        let group_errors = committed_codes(result, timeout, "offset commit").await;
        let topics = response_topics(names, decided, group_errors);
        Some(ResponseKind::OffsetCommit(OffsetCommitResponse::default().with_topics(topics)).into())
    })
}

/// Decides what the broker can answer before the group coordinator sees the request: per
/// partition in request order, `Some(error)` decided here (no READ on the topic, checked
/// before its existence is revealed; unknown partition), or `None` for one handed to the
/// group (in `commits`, in the same order, so its verdicts can be matched back).
fn screen_partitions(
    ctx: &super::RequestContext,
    request: &OffsetCommitRequest,
) -> (Vec<Vec<Option<ResponseError>>>, Vec<CommitPartition>) {
    let (broker, version) = (&ctx.broker, ctx.api_version);
    let mut decided: Vec<Vec<Option<ResponseError>>> = Vec::with_capacity(request.topics.len());
    let mut commits = Vec::new();
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        // READ on the topic, checked before its existence is revealed.
        let may_read = ctx.authorize(AclOperation::Read, ResourceType::Topic, name);
        let known = broker.topics.get(name);
        let mut row = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            if !may_read {
                row.push(Some(ResponseError::TopicAuthorizationFailed));
                continue;
            }
            let exists = known
                .as_ref()
                .is_some_and(|t| (0..t.partition_count).contains(&p.partition_index));
            if exists {
                row.push(None);
                commits.push(CommitPartition {
                    topic: name.to_string(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: if version >= 6 {
                        p.committed_leader_epoch
                    } else {
                        -1
                    },
                    metadata: p.committed_metadata.as_ref().map(ToString::to_string),
                });
            } else {
                row.push(Some(ResponseError::UnknownTopicOrPartition));
            }
        }
        decided.push(row);
    }
    (decided, commits)
}

/// The response's topics, in request order: a partition decided early keeps that error;
/// the others take the group's verdicts in turn (they were handed over in that order).
fn response_topics(
    names: Vec<(StrBytes, Vec<i32>)>,
    decided: Vec<Vec<Option<ResponseError>>>,
    group_errors: Vec<Option<ResponseError>>,
) -> Vec<OffsetCommitResponseTopic> {
    let mut group_errors = group_errors.into_iter();
    names
        .into_iter()
        .zip(decided)
        .map(|((name, partitions), row)| {
            OffsetCommitResponseTopic::default()
                .with_name(name.into())
                .with_partitions(
                    partitions
                        .into_iter()
                        .zip(row)
                        .map(|(index, early)| {
                            let error = match early {
                                Some(e) => Some(e),
                                None => group_errors.next().flatten(),
                            };
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(index)
                                .with_error_code(errors::code(error))
                        })
                        .collect(),
                )
        })
        .collect()
}

/// Each partition's code of a commit (OffsetCommit or TxnOffsetCommit) once its append is
/// committed: the coordinator's refusals, and for the rest the failure of the wait, if it
/// failed (`what` names the commit in the log line).
pub(super) async fn committed_codes(
    result: CommitResult,
    timeout: Duration,
    what: &str,
) -> Vec<Option<ResponseError>> {
    let mut codes: Vec<Option<ResponseError>> = result
        .errors
        .iter()
        .map(|e| e.map(|e| errors::group_error(&e)))
        .collect();
    if let Some((partition, end_offset)) = result.durable {
        if let Err(e) = partition.wait_committed(end_offset, timeout).await {
            tracing::warn!(error = %e, "{what} not durable");
            let error = errors::group_error(&GroupError::from(&e));
            for slot in &mut codes {
                slot.get_or_insert(error);
            }
        }
    }
    codes
}
