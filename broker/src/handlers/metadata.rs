//! Metadata (API key 3): brokers, cluster id, controller, and each topic's partitions with
//! their leader. Unknown topics are created here when `auto.create.topics.enable` and the
//! request allow it, as Kafka does.

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use crate::broker::Broker;
use crate::errors;
use crate::topics::{self, Topic, TopicError};

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 13 };

/// `topic_authorized_operations` when the client did not ask for them.
pub(crate) const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

/// Operations on the cluster a client may perform, as Kafka reports them without an
/// authorizer: bits of `AclOperation` CREATE(5), CLUSTER_ACTION(7), DESCRIBE_CONFIGS(8),
/// ALTER_CONFIGS(9), IDEMPOTENT_WRITE(10), CREATE_TOKENS(11), DESCRIBE_TOKENS(12).
pub(crate) const CLUSTER_OPERATIONS_ALL: i32 = 8096;

/// Operations on a topic without an authorizer, as Kafka 4.0 reports them: READ(3),
/// WRITE(4), CREATE(5), DELETE(6), ALTER(7), DESCRIBE(8), DESCRIBE_CONFIGS(10),
/// ALTER_CONFIGS(11).
pub(crate) const TOPIC_OPERATIONS_ALL: i32 = 3576;

/// Describes one existing topic.
pub(crate) fn describe_topic(
    broker: &Broker,
    topic: &Topic,
    operations: i32,
) -> MetadataResponseTopic {
    let node = BrokerId(broker.node_id());
    let partitions = (0..topic.partition_count)
        .map(|index| {
            let hosted = broker.replicas.partition(&topic.name, index);
            let epoch = hosted.as_ref().map_or(-1, |p| p.leader_epoch().0);
            // A partition a disk failure took offline has no leader (Kafka lists it
            // with LEADER_NOT_AVAILABLE and the replica as offline).
            let offline = hosted.as_ref().is_none_or(|p| p.offline_reason().is_some());
            let partition = MetadataResponsePartition::default()
                .with_partition_index(index)
                .with_leader_epoch(epoch)
                .with_replica_nodes(vec![node]);
            if offline {
                partition
                    .with_error_code(ResponseError::LeaderNotAvailable.code())
                    .with_leader_id(BrokerId(-1))
                    .with_offline_replicas(vec![node])
            } else {
                partition.with_leader_id(node).with_isr_nodes(vec![node])
            }
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.name.clone()))))
        .with_topic_id(topic.id)
        .with_is_internal(topics::is_internal(&topic.name))
        .with_partitions(partitions)
        .with_topic_authorized_operations(operations)
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

/// Describes an internal topic named by the request. A missing `__consumer_offsets` is
/// created by the group coordinator's rules when auto-creation is allowed (Kafka's
/// `AutoTopicCreationManager` does the same), never as an ordinary topic; the other
/// internal topics have no coordinator here yet, so they stay unknown.
fn internal_topic(
    broker: &Broker,
    name: TopicName,
    auto_create: bool,
    operations: i32,
) -> MetadataResponseTopic {
    if let Some(topic) = broker.topics.get(name.as_str()) {
        return describe_topic(broker, &topic, operations);
    }
    let unknown = || {
        failed_topic(
            Some(name.clone()),
            uuid::Uuid::nil(),
            ResponseError::UnknownTopicOrPartition,
        )
        .with_is_internal(true)
    };
    if !auto_create || name.as_str() != crate::coordinator::GROUP_METADATA_TOPIC_NAME {
        return unknown();
    }
    match broker.groups.offsets_topic() {
        Ok(topic) => describe_topic(broker, topic, operations),
        Err(e) => failed_topic(
            Some(name.clone()),
            uuid::Uuid::nil(),
            errors::group_error(&e),
        )
        .with_is_internal(true),
    }
}

/// Answers a Metadata request.
pub fn handle(ctx: &super::RequestContext, request: MetadataRequest) -> MetadataResponse {
    let (broker, version) = (&ctx.broker, ctx.api_version);
    let all_topics = match &request.topics {
        None => true,
        Some(t) => version == 0 && t.is_empty(),
    };
    let auto_create = broker.config.auto_create_topics_enable
        && (version < 4 || request.allow_auto_topic_creation);
    // Only v8+ carries the fields; older requests decode the flags as false.
    let topic_operations = if version >= 8 && request.include_topic_authorized_operations {
        TOPIC_OPERATIONS_ALL
    } else {
        OPERATIONS_NOT_REQUESTED
    };
    let cluster_operations =
        if (8..=10).contains(&version) && request.include_cluster_authorized_operations {
            CLUSTER_OPERATIONS_ALL
        } else {
            OPERATIONS_NOT_REQUESTED
        };
    let topics = if all_topics {
        broker
            .topics
            .all()
            .iter()
            .map(|t| describe_topic(broker, t, topic_operations))
            .collect()
    } else {
        request
            .topics
            .unwrap_or_default()
            .into_iter()
            .map(|wanted| match wanted.name {
                // Clients that ask by id (v10+) may still send an empty name, not null.
                Some(_) if !wanted.topic_id.is_nil() => match broker.topics.get_by_id(&wanted.topic_id) {
                    Some(topic) => describe_topic(broker, &topic, topic_operations),
                    None => failed_topic(None, wanted.topic_id, ResponseError::UnknownTopicId),
                },
                Some(name) if topics::is_internal(name.as_str()) => {
                    internal_topic(broker, name, auto_create, topic_operations)
                }
                Some(name) => {
                    let result = tokio::task::block_in_place(|| {
                        broker
                            .topics
                            .get_or_create(name.as_str(), auto_create, broker.config.num_partitions)
                    });
                    match result {
                        Ok(topic) => describe_topic(broker, &topic, topic_operations),
                        Err(e) => {
                            if !matches!(e, TopicError::Unknown(_)) {
                                tracing::debug!(topic = %name.as_str(), error = %e, "metadata auto-create refused");
                            }
                            failed_topic(Some(name), uuid::Uuid::nil(), errors::topic_error(&e))
                        }
                    }
                }
                None => match broker.topics.get_by_id(&wanted.topic_id) {
                    Some(topic) => describe_topic(broker, &topic, topic_operations),
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
        .with_cluster_authorized_operations(cluster_operations)
}
