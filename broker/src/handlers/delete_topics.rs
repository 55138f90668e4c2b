//! DeleteTopics (API key 20): remove topics and their data, by name or (v6+) by topic id.

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use crate::authorizer::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::errors;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 1, max: 6 };

fn delete_by_name(broker: &Broker, name: TopicName) -> DeletableTopicResult {
    let result = tokio::task::block_in_place(|| broker.topics.delete(name.as_str()));
    if result.is_ok() {
        broker
            .groups
            .on_topics_deleted(&[name.as_str().to_string()]);
    }
    let out = DeletableTopicResult::default().with_name(Some(name));
    match result {
        Ok(topic) => out.with_topic_id(topic.id),
        Err(e) => out
            .with_error_code(errors::topic_error(&e).code())
            .with_error_message(Some(StrBytes::from_string(e.to_string()))),
    }
}

/// Answers a DeleteTopics request.
pub fn handle(ctx: &super::RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    let (broker, version) = (&ctx.broker, ctx.api_version);
    // DELETE on the topic, checked before its existence is revealed.
    let delete = |name: TopicName| {
        if ctx.authorize(AclOperation::Delete, ResourceType::Topic, &name) {
            delete_by_name(broker, name)
        } else {
            DeletableTopicResult::default()
                .with_name(Some(name))
                .with_error_code(ResponseError::TopicAuthorizationFailed.code())
        }
    };
    let responses = if version >= 6 {
        request
            .topics
            .into_iter()
            .map(|t| match t.name {
                Some(name) => delete(name),
                None => match broker.topics.get_by_id(&t.topic_id) {
                    // Without DESCRIBE the name stays unsaid (the id is not secret).
                    Some(topic)
                        if !ctx.authorize(
                            AclOperation::Describe,
                            ResourceType::Topic,
                            &topic.name,
                        ) =>
                    {
                        DeletableTopicResult::default()
                            .with_name(None)
                            .with_topic_id(t.topic_id)
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    }
                    Some(topic) => {
                        let name = TopicName(StrBytes::from_string(topic.name.clone()));
                        delete(name).with_topic_id(t.topic_id)
                    }
                    None => DeletableTopicResult::default()
                        .with_topic_id(t.topic_id)
                        .with_error_code(ResponseError::UnknownTopicId.code()),
                },
            })
            .collect()
    } else {
        request.topic_names.into_iter().map(delete).collect()
    };
    DeleteTopicsResponse::default().with_responses(responses)
}
