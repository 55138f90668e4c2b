//! DescribeTopicPartitions (API key 75): topics and their partitions, paged (KIP-966);
//! Kafka 4.x's `kafka-topics.sh --describe` uses it instead of Metadata. Named topics or,
//! with none named, every topic, in name order from the cursor, at most
//! `response_partition_limit` partitions per answer (capped at Kafka's
//! `max.request.partition.size.limit`, 2000), with a `next_cursor` where it stopped. On a
//! single node this broker is every partition's only replica and leader; eligible leader
//! replicas are not used, so those lists are empty.

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::metadata::TOPIC_OPERATIONS_ALL;
use super::RequestContext;
use crate::authorizer::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::topics::{self, Topic};

/// Versions served (Kafka 4.x serves 0).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

/// Kafka's `max.request.partition.size.limit` default: most partitions in one answer.
const PARTITIONS_PER_RESPONSE_MAX: i32 = 2000;

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

/// Partitions `from..` of `topic`, at most `limit` of them.
fn partitions(
    broker: &Broker,
    topic: &Topic,
    from: i32,
    limit: i32,
) -> Vec<DescribeTopicPartitionsResponsePartition> {
    let node = BrokerId(broker.node_id());
    let to = topic.partition_count.min(from.saturating_add(limit));
    let image = broker.topics.image();
    (from..to)
        .map(|index| {
            if let Some(image) = &image {
                let shown = super::metadata::image_partition(broker, image, topic, index);
                return DescribeTopicPartitionsResponsePartition::default()
                    .with_partition_index(index)
                    .with_error_code(shown.error_code)
                    .with_leader_id(shown.leader_id)
                    .with_leader_epoch(shown.leader_epoch)
                    .with_replica_nodes(shown.replica_nodes)
                    .with_isr_nodes(shown.isr_nodes)
                    .with_offline_replicas(shown.offline_replicas)
                    .with_eligible_leader_replicas(Some(Vec::new()))
                    .with_last_known_elr(Some(Vec::new()));
            }
            let hosted = broker.replicas.partition(&topic.name, index);
            let epoch = hosted.as_ref().map_or(-1, |p| p.leader_epoch().0);
            let offline = hosted.as_ref().is_none_or(|p| p.offline_reason().is_some());
            let partition = DescribeTopicPartitionsResponsePartition::default()
                .with_partition_index(index)
                .with_leader_epoch(epoch)
                .with_replica_nodes(vec![node])
                .with_eligible_leader_replicas(Some(Vec::new()))
                .with_last_known_elr(Some(Vec::new()));
            if offline {
                partition
                    .with_error_code(ResponseError::LeaderNotAvailable.code())
                    .with_leader_id(BrokerId(-1))
                    .with_offline_replicas(vec![node])
            } else {
                partition.with_leader_id(node).with_isr_nodes(vec![node])
            }
        })
        .collect()
}

/// The whole request refused (Kafka's `getErrorResponse`): each named topic with `error`.
fn refused(
    request: &DescribeTopicPartitionsRequest,
    error: ResponseError,
) -> DescribeTopicPartitionsResponse {
    let topics = request
        .topics
        .iter()
        .map(|t| {
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(t.name.clone()))
                .with_error_code(error.code())
        })
        .collect();
    DescribeTopicPartitionsResponse::default().with_topics(topics)
}

/// Answers a DescribeTopicPartitions request.
pub fn handle(
    ctx: &RequestContext,
    request: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let broker = &ctx.broker;
    let all = request.topics.is_empty();
    let cursor_topic = request
        .cursor
        .as_ref()
        .map_or("", |c| c.topic_name.as_str());
    let names = names_from_cursor(broker, &request, cursor_topic);
    if let Some(cursor) = &request.cursor {
        if !all && !names.iter().any(|n| n.as_str() == cursor_topic) {
            return refused(&request, ResponseError::InvalidRequest);
        }
        if cursor.partition_index < 0 {
            return refused(&request, ResponseError::InvalidRequest);
        }
    }
    let mut remaining = request
        .response_partition_limit
        .clamp(1, PARTITIONS_PER_RESPONSE_MAX);
    let mut response = DescribeTopicPartitionsResponse::default();
    for name in &names {
        if remaining == 0 {
            // The next answer starts at this topic.
            response.next_cursor = Some(
                Cursor::default()
                    .with_topic_name(topic_name(name))
                    .with_partition_index(0),
            );
            break;
        }
        // DESCRIBE on the topic, checked before its existence is revealed; with "all
        // topics" the others are left out.
        if !ctx.authorize(AclOperation::Describe, ResourceType::Topic, name) {
            if !all {
                response.topics.push(
                    DescribeTopicPartitionsResponseTopic::default()
                        .with_name(Some(topic_name(name)))
                        .with_error_code(ResponseError::TopicAuthorizationFailed.code()),
                );
            }
            continue;
        }
        let Some(topic) = broker.topics.get(name) else {
            if !all {
                response.topics.push(missing_topic(name));
            }
            continue;
        };
        let from = if name.as_str() == cursor_topic {
            request.cursor.as_ref().map_or(0, |c| c.partition_index)
        } else {
            0
        };
        let (mut page, next, count) = topic_page(broker, name, &topic, from, remaining);
        page.topic_authorized_operations = ctx.authorizer.authorized_operations(
            ResourceType::Topic,
            name,
            crate::authorizer::TOPIC_OPERATIONS,
        );
        response.topics.push(page);
        if next < topic.partition_count {
            response.next_cursor = Some(
                Cursor::default()
                    .with_topic_name(topic_name(name))
                    .with_partition_index(next),
            );
            break;
        }
        remaining -= count;
    }
    response
}

/// The topics to page through, in name order from the cursor's topic on (KIP-966 pages by
/// name): the named ones, or every topic when none is named; each once.
fn names_from_cursor(
    broker: &Broker,
    request: &DescribeTopicPartitionsRequest,
    cursor_topic: &str,
) -> Vec<String> {
    let mut names: Vec<String> = if request.topics.is_empty() {
        broker.topics.all().iter().map(|t| t.name.clone()).collect()
    } else {
        request.topics.iter().map(|t| t.name.to_string()).collect()
    };
    names.retain(|n| n.as_str() >= cursor_topic);
    names.sort();
    names.dedup();
    names
}

/// A named topic that does not exist: an invalid name answers INVALID_TOPIC_EXCEPTION
/// rather than UNKNOWN_TOPIC_OR_PARTITION, as Kafka tells the two apart.
fn missing_topic(name: &str) -> DescribeTopicPartitionsResponseTopic {
    let error = match topics::validate_topic_name(name) {
        Ok(()) => ResponseError::UnknownTopicOrPartition,
        Err(_) => ResponseError::InvalidTopicException,
    };
    DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(topic_name(name)))
        .with_error_code(error.code())
        .with_is_internal(topics::is_internal(name))
        .with_topic_authorized_operations(TOPIC_OPERATIONS_ALL)
}

/// One page of `topic`: its partitions from `from`, at most `limit` of them, with the
/// partition the next page starts at and how many were listed (what is left of the
/// response's partition budget shrinks by that).
fn topic_page(
    broker: &Broker,
    name: &str,
    topic: &Topic,
    from: i32,
    limit: i32,
) -> (DescribeTopicPartitionsResponseTopic, i32, i32) {
    let listed = partitions(broker, topic, from, limit);
    let next = from.saturating_add(i32::try_from(listed.len()).unwrap_or(i32::MAX));
    let count = i32::try_from(listed.len()).unwrap_or(i32::MAX);
    let page = DescribeTopicPartitionsResponseTopic::default()
        .with_name(Some(topic_name(name)))
        .with_topic_id(topic.id)
        .with_is_internal(topics::is_internal(name))
        .with_partitions(listed)
        .with_topic_authorized_operations(TOPIC_OPERATIONS_ALL);
    (page, next, count)
}
