//! Metadata (API key 3): brokers, cluster id, controller, and each topic's partitions with
//! their leader. Unknown topics are created here when `auto.create.topics.enable` and the
//! request allow it, as Kafka does.

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use crate::authorizer::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::errors;
use crate::listeners::ListenerName;
use crate::topics::{self, Topic, TopicError};

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 13 };

/// `topic_authorized_operations` when the client did not ask for them.
pub(crate) const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

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
    let image = broker.topics.image();
    let partitions = (0..topic.partition_count)
        .map(|index| {
            if let Some(image) = &image {
                return image_partition(broker, image, topic, index);
            }
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

/// One partition as the image has it; a partition this broker leads but a disk failure
/// took offline is shown without a leader, as Kafka does.
pub(crate) fn image_partition(
    broker: &Broker,
    image: &logbook_metadata::MetadataImage,
    topic: &Topic,
    index: i32,
) -> MetadataResponsePartition {
    let ids = |v: &[i32]| v.iter().copied().map(BrokerId).collect::<Vec<_>>();
    let Some(view) = crate::cluster::views::partition(image, &topic.id, index) else {
        return MetadataResponsePartition::default()
            .with_partition_index(index)
            .with_error_code(ResponseError::LeaderNotAvailable.code())
            .with_leader_id(BrokerId(-1))
            .with_leader_epoch(-1);
    };
    let mut offline = view.offline_replicas.clone();
    let mut leader = view.leader;
    if leader == broker.node_id()
        && broker
            .replicas
            .partition(&topic.name, index)
            .is_none_or(|p| p.offline_reason().is_some())
    {
        leader = -1;
        if !offline.contains(&broker.node_id()) {
            offline.push(broker.node_id());
        }
    }
    let partition = MetadataResponsePartition::default()
        .with_partition_index(index)
        .with_leader_id(BrokerId(leader))
        .with_leader_epoch(view.leader_epoch)
        .with_replica_nodes(ids(&view.replicas))
        .with_isr_nodes(ids(&view.isr))
        .with_offline_replicas(ids(&offline));
    if leader == -1 {
        partition.with_error_code(ResponseError::LeaderNotAvailable.code())
    } else {
        partition
    }
}

/// The brokers Metadata lists (registered and unfenced, from the image), and the
/// controller id it reports: KRaft brokers hide the controller and name a live broker;
/// this one names the active controller when it is a live broker (combined mode), else
/// itself.
///
/// Only brokers with an endpoint on `listener` are listed, at that endpoint (Kafka's
/// `getAliveBrokerNodes(listenerName)`).
pub(crate) fn brokers_and_controller(
    broker: &Broker,
    listener: &ListenerName,
) -> (Vec<crate::cluster::views::BrokerView>, i32) {
    let Some(image) = broker.topics.image() else {
        let this: Vec<_> = broker.this_broker(listener).into_iter().collect();
        return (this, broker.node_id());
    };
    let brokers = crate::cluster::views::alive_brokers(&image, listener.as_str());
    let controller = broker
        .topics
        .cluster()
        .and_then(|c| c.controller().ok())
        .and_then(crate::cluster::ControllerHandle::leader_id)
        .filter(|id| brokers.iter().any(|b| b.node_id == *id))
        .unwrap_or(broker.node_id());
    (brokers, controller)
}

/// A partition as clients of the request's listener see it (Kafka's
/// `KRaftMetadataCache.getPartitionMetadata`): replicas without a live endpoint on the
/// listener are offline, and a leader without one is not named: LISTENER_NOT_FOUND from
/// v6 (LEADER_NOT_AVAILABLE before), leader -1. `brokers` are the live brokers with an
/// endpoint on the listener.
pub(crate) fn fit_to_listener(
    partition: &mut MetadataResponsePartition,
    brokers: &[crate::cluster::views::BrokerView],
    version: i16,
) {
    let reachable = |id: BrokerId| brokers.iter().any(|b| b.node_id == id.0);
    for replica in &partition.replica_nodes {
        if !reachable(*replica) && !partition.offline_replicas.contains(replica) {
            partition.offline_replicas.push(*replica);
        }
    }
    if partition.leader_id.0 >= 0 && !reachable(partition.leader_id) {
        partition.leader_id = BrokerId(-1);
        partition.error_code = if version >= LISTENER_NOT_FOUND_VERSION {
            ResponseError::ListenerNotFound.code()
        } else {
            ResponseError::LeaderNotAvailable.code()
        };
    }
}

/// First version answered LISTENER_NOT_FOUND for a leader without the request's listener.
const LISTENER_NOT_FOUND_VERSION: i16 = 6;

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
    match broker
        .groups
        .offsets_topic()
        .map(|_| broker.topics.get(name.as_str()))
    {
        Ok(Some(topic)) => describe_topic(broker, &topic, operations),
        Ok(None) => unknown(),
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
            ctx.authorizer.cluster_authorized_operations()
        } else {
            OPERATIONS_NOT_REQUESTED
        };
    let may_create_any = auto_create
        && ctx
            .authorizer
            .authorize_cluster_quietly(AclOperation::Create);
    let topics = if all_topics {
        // Every topic the sender may DESCRIBE; the others are left out without a word.
        broker
            .topics
            .all()
            .iter()
            .filter(|t| ctx.authorize(AclOperation::Describe, ResourceType::Topic, &t.name))
            .map(|t| describe_topic(broker, t, topic_operations))
            .collect()
    } else {
        requested_topics(
            ctx,
            request.topics.unwrap_or_default(),
            auto_create,
            may_create_any,
            topic_operations,
        )
    };
    let (brokers, controller_id) = brokers_and_controller(broker, &ctx.listener_name);
    let mut topics = topics;
    for topic in &mut topics {
        let described = topic.error_code != ResponseError::TopicAuthorizationFailed.code();
        if topic_operations != OPERATIONS_NOT_REQUESTED && described {
            if let Some(name) = &topic.name {
                topic.topic_authorized_operations = ctx.authorizer.authorized_operations(
                    ResourceType::Topic,
                    name.as_str(),
                    crate::authorizer::TOPIC_OPERATIONS,
                );
            }
        }
        for partition in &mut topic.partitions {
            fit_to_listener(partition, &brokers, ctx.api_version);
        }
    }
    MetadataResponse::default()
        .with_brokers(response_brokers(brokers))
        .with_cluster_id(Some(StrBytes::from_string(broker.topics.cluster_id())))
        .with_controller_id(BrokerId(controller_id))
        .with_topics(topics)
        .with_cluster_authorized_operations(cluster_operations)
}

/// The topics the request names, in its order, each by id or by name: described, refused,
/// or auto-created. Names are checked for DESCRIBE before anything else, so a topic the
/// sender may not see is not revealed to exist.
fn requested_topics(
    ctx: &super::RequestContext,
    wanted: Vec<MetadataRequestTopic>,
    auto_create: bool,
    may_create_any: bool,
    topic_operations: i32,
) -> Vec<MetadataResponseTopic> {
    let broker = &ctx.broker;
    wanted
        .into_iter()
        .map(|wanted| match wanted.name {
            // Clients that ask by id (v10+) may still send an empty name, not null.
            Some(_) if !wanted.topic_id.is_nil() => {
                topic_by_id(ctx, wanted.topic_id, topic_operations)
            }
            Some(name)
                if !ctx.authorize(AclOperation::Describe, ResourceType::Topic, name.as_str()) =>
            {
                // Existence is not revealed, so no topic id either.
                failed_topic(
                    Some(name),
                    uuid::Uuid::nil(),
                    ResponseError::TopicAuthorizationFailed,
                )
            }
            Some(name) if topics::is_internal(name.as_str()) => {
                internal_topic(broker, name, auto_create, topic_operations)
            }
            Some(name) => {
                topic_or_auto_create(ctx, name, auto_create, may_create_any, topic_operations)
            }
            None => topic_by_id(ctx, wanted.topic_id, topic_operations),
        })
        .collect()
}

/// A topic asked for by id: ids are not secret, so an unauthorized one is named as such.
fn topic_by_id(
    ctx: &super::RequestContext,
    id: uuid::Uuid,
    operations: i32,
) -> MetadataResponseTopic {
    let broker = &ctx.broker;
    match broker.topics.get_by_id(&id) {
        Some(topic) if ctx.authorize(AclOperation::Describe, ResourceType::Topic, &topic.name) => {
            describe_topic(broker, &topic, operations)
        }
        Some(_) => failed_topic(None, id, ResponseError::TopicAuthorizationFailed),
        None => failed_topic(None, id, ResponseError::UnknownTopicId),
    }
}

/// A non-internal topic the sender may describe, asked for by name: described, or, when
/// missing, created as Kafka's `AutoTopicCreationManager` does if auto-creation is on and
/// the sender may CREATE it.
fn topic_or_auto_create(
    ctx: &super::RequestContext,
    name: TopicName,
    auto_create: bool,
    may_create_any: bool,
    operations: i32,
) -> MetadataResponseTopic {
    let broker = &ctx.broker;
    // Creating a missing topic needs CREATE on the cluster or on the topic.
    let may_create = || ctx.authorize(AclOperation::Create, ResourceType::Topic, name.as_str());
    // (The lookup runs only without CREATE on the cluster.)
    if auto_create && !may_create_any && broker.topics.get(name.as_str()).is_none() && !may_create()
    {
        return failed_topic(
            Some(name),
            uuid::Uuid::nil(),
            ResponseError::TopicAuthorizationFailed,
        );
    }
    let result = tokio::task::block_in_place(|| {
        broker.topics.get_or_create(
            name.as_str(),
            auto_create,
            broker.config.num_partitions,
            broker.config.default_replication_factor,
        )
    });
    match result {
        Ok(topic) => describe_topic(broker, &topic, operations),
        Err(e) => {
            if !matches!(e, TopicError::Unknown(_)) {
                tracing::debug!(topic = %name.as_str(), error = %e, "metadata auto-create refused");
            }
            failed_topic(Some(name), uuid::Uuid::nil(), errors::topic_error(&e))
        }
    }
}

/// The brokers as the response lists them.
fn response_brokers(
    brokers: Vec<crate::cluster::views::BrokerView>,
) -> Vec<MetadataResponseBroker> {
    brokers
        .into_iter()
        .map(|b| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(b.node_id))
                .with_host(StrBytes::from_string(b.host))
                .with_port(b.port)
                .with_rack(b.rack.map(StrBytes::from_string))
        })
        .collect()
}
