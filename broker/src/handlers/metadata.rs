//! Metadata (API key 3): brokers, cluster id, controller, and each topic's partitions with
//! their leader. Unknown topics are created here when `auto.create.topics.enable` and the
//! request allow it, as Kafka does.

use std::sync::Arc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use crate::broker::Broker;
use crate::errors;
use crate::topics::{Topic, TopicError};

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 13 };

/// `topic_authorized_operations` when the client did not ask for them.
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

/// Describes one existing topic.
pub(crate) fn describe_topic(broker: &Broker, topic: &Topic) -> MetadataResponseTopic {
    let node = BrokerId(broker.node_id());
    let partitions = topic
        .partitions
        .iter()
        .zip(0..)
        .map(|(p, index)| {
            MetadataResponsePartition::default()
                .with_partition_index(index)
                .with_leader_id(node)
                .with_leader_epoch(p.leader_epoch())
                .with_replica_nodes(vec![node])
                .with_isr_nodes(vec![node])
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_topic_id(topic.id)
        .with_is_internal(topic.name.starts_with("__"))
        .with_partitions(partitions)
        .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED)
}

fn failed_topic(
    name: Option<TopicName>,
    id: uuid::Uuid,
    error: ResponseError,
) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(name)
        .with_topic_id(id)
        .with_error_code(error.code())
        .with_topic_authorized_operations(OPERATIONS_NOT_REQUESTED)
}

/// Answers a Metadata request.
pub fn handle(broker: &Arc<Broker>, request: MetadataRequest, version: i16) -> MetadataResponse {
    let all_topics = match &request.topics {
        None => true,
        Some(t) => version == 0 && t.is_empty(),
    };
    let auto_create = broker.config.auto_create_topics_enable
        && (version < 4 || request.allow_auto_topic_creation);
    let topics = if all_topics {
        broker
            .topics
            .all()
            .iter()
            .map(|t| describe_topic(broker, t))
            .collect()
    } else {
        request
            .topics
            .unwrap_or_default()
            .into_iter()
            .map(|wanted| match wanted.name {
                // Clients that ask by id (v10+) may still send an empty name, not null.
                Some(_) if !wanted.topic_id.is_nil() => match broker.topics.get_by_id(&wanted.topic_id) {
                    Some(topic) => describe_topic(broker, &topic),
                    None => failed_topic(None, wanted.topic_id, ResponseError::UnknownTopicId),
                },
                Some(name) => {
                    let result = tokio::task::block_in_place(|| {
                        broker
                            .topics
                            .get_or_create(name.as_str(), auto_create, broker.config.num_partitions)
                    });
                    match result {
                        Ok(topic) => describe_topic(broker, &topic),
                        Err(e) => {
                            if !matches!(e, TopicError::Unknown(_)) {
                                tracing::debug!(topic = %name.as_str(), error = %e, "metadata auto-create refused");
                            }
                            failed_topic(Some(name), uuid::Uuid::nil(), errors::topic_error(&e))
                        }
                    }
                }
                None => match broker.topics.get_by_id(&wanted.topic_id) {
                    Some(topic) => describe_topic(broker, &topic),
                    None => failed_topic(None, wanted.topic_id, ResponseError::UnknownTopicId),
                },
            })
            .collect()
    };
    let node = MetadataResponseBroker::default()
        .with_node_id(BrokerId(broker.node_id()))
        .with_host(StrBytes::from_string(broker.advertised_host.clone()))
        .with_port(broker.advertised_port);
    MetadataResponse::default()
        .with_brokers(vec![node])
        .with_cluster_id(Some(StrBytes::from_string(
            broker.topics.cluster_id().to_string(),
        )))
        .with_controller_id(BrokerId(broker.node_id()))
        .with_topics(topics)
        .with_cluster_authorized_operations(OPERATIONS_NOT_REQUESTED)
}
