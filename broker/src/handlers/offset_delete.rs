//! OffsetDelete (API key 47): remove a group's committed offsets of some partitions, unless
//! a member subscribes to the topic (GROUP_SUBSCRIBED_TO_TOPIC). Answered once the
//! tombstones are committed, so an OffsetFetch after the answer no longer sees the offsets.

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::ResponseError;

use std::time::Duration;

use kafka_protocol::messages::ResponseKind;

use crate::authorizer::{AclOperation, ResourceType};
use crate::errors;
use crate::handlers::offset_commit::committed_codes;
use crate::handlers::ResponseFuture;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

/// Answers OffsetDelete once its tombstones are committed.
pub fn handle(ctx: &super::RequestContext, request: OffsetDeleteRequest) -> ResponseFuture {
    let broker = &ctx.broker;
    if !ctx.authorize(AclOperation::Delete, ResourceType::Group, &request.group_id) {
        return super::ready(ResponseKind::OffsetDelete(
            OffsetDeleteResponse::default()
                .with_error_code(ResponseError::GroupAuthorizationFailed.code()),
        ));
    }
    // READ on each topic, checked before its existence is revealed. Each partition's
    // answer is decided here but for the known ones, whose codes come from the deletion.
    let mut topics = Vec::with_capacity(request.topics.len());
    let mut known = Vec::new();
    let mut slots = Vec::new();
    for (topic_index, topic) in request.topics.iter().enumerate() {
        let may_read = ctx.authorize(AclOperation::Read, ResourceType::Topic, &topic.name);
        let t = broker
            .topics
            .get(topic.name.0.as_str())
            .filter(|_| may_read);
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for (partition_index, p) in topic.partitions.iter().enumerate() {
            let exists = t
                .as_ref()
                .is_some_and(|t| (0..t.partition_count).contains(&p.partition_index));
            let code = if exists {
                known.push((topic.name.0.to_string(), p.partition_index));
                slots.push((topic_index, partition_index));
                errors::NONE
            } else if !may_read {
                ResponseError::TopicAuthorizationFailed.code()
            } else {
                ResponseError::UnknownTopicOrPartition.code()
            };
            partitions.push(
                OffsetDeleteResponsePartition::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code),
            );
        }
        topics.push(
            OffsetDeleteResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions),
        );
    }
    let result = match broker
        .groups
        .delete_offsets(request.group_id.0.as_str(), &known)
    {
        Ok(result) => result,
        Err(e) => {
            return super::ready(ResponseKind::OffsetDelete(
                OffsetDeleteResponse::default().with_error_code(errors::group_error(&e).code()),
            ))
        }
    };
    let timeout = Duration::from_millis(broker.groups.config().commit_timeout_ms);
    Box::pin(async move {
        let codes = committed_codes(result, timeout, "offset deletion").await;
        for ((topic, partition), code) in slots.into_iter().zip(codes) {
            if let Some(code) = code {
                topics[topic].partitions[partition].error_code = code.code();
            }
        }
        Some(ResponseKind::OffsetDelete(OffsetDeleteResponse::default().with_topics(topics)).into())
    })
}
