//! OffsetDelete (API key 47): remove a group's committed offsets of some partitions, unless
//! a member subscribes to the topic (GROUP_SUBSCRIBED_TO_TOPIC).

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::ResponseError;

use crate::authorizer::{AclOperation, ResourceType};
use crate::errors;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

/// Answers OffsetDelete.
#[must_use]
pub fn handle(ctx: &super::RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let broker = &ctx.broker;
    if !ctx.authorize(AclOperation::Delete, ResourceType::Group, &request.group_id) {
        return OffsetDeleteResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    // READ on each topic, checked before its existence is revealed.
    let may_read = |topic: &str| ctx.authorize(AclOperation::Read, ResourceType::Topic, topic);
    let mut known = Vec::new();
    for topic in &request.topics {
        if !may_read(&topic.name) {
            continue;
        }
        let t = broker.topics.get(topic.name.0.as_str());
        for p in &topic.partitions {
            let exists = t
                .as_ref()
                .is_some_and(|t| (0..t.partition_count).contains(&p.partition_index));
            if exists {
                known.push((topic.name.0.to_string(), p.partition_index));
            }
        }
    }
    let results = match broker
        .groups
        .delete_offsets(request.group_id.0.as_str(), &known)
    {
        Ok(results) => results,
        Err(e) => {
            return OffsetDeleteResponse::default().with_error_code(errors::group_error(&e).code())
        }
    };
    let mut results = results.into_iter();
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let may = may_read(&topic.name);
            let t = broker.topics.get(topic.name.0.as_str()).filter(|_| may);
            OffsetDeleteResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(
                    topic
                        .partitions
                        .iter()
                        .map(|p| {
                            let exists = t.as_ref().is_some_and(|t| {
                                usize::try_from(p.partition_index).is_ok_and(|i| {
                                    i < usize::try_from(t.partition_count).unwrap_or(0)
                                })
                            });
                            let code = if exists {
                                errors::group_code(results.next().flatten())
                            } else if !may {
                                ResponseError::TopicAuthorizationFailed.code()
                            } else {
                                ResponseError::UnknownTopicOrPartition.code()
                            };
                            OffsetDeleteResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    OffsetDeleteResponse::default().with_topics(topics)
}
