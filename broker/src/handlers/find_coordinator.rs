//! FindCoordinator (API key 10): which broker coordinates a group. The coordinator of a
//! group is the leader of its `__consumer_offsets` partition, from the metadata image.
//! The first lookup of a group creates `__consumer_offsets`, as Kafka does; the coordinator
//! of a transactional id (key type 1) is the leader of its `__transaction_state` partition,
//! and its first lookup creates that topic.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use crate::authorizer::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::listeners::ListenerName;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 6 };

/// First version with the batched `coordinator_keys` form (KIP-699).
const BATCHED_VERSION: i16 = 4;
const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

/// The coordinator of one key: (node id, host, port) or the error.
fn coordinator_of(
    ctx: &super::RequestContext,
    key: &str,
    key_type: i8,
) -> Result<(i32, String, i32), ResponseError> {
    let broker: &Broker = &ctx.broker;
    match key_type {
        KEY_TYPE_GROUP if !ctx.authorize(AclOperation::Describe, ResourceType::Group, key) => {
            Err(ResponseError::GroupAuthorizationFailed)
        }
        KEY_TYPE_TRANSACTION
            if !ctx.authorize(AclOperation::Describe, ResourceType::TransactionalId, key) =>
        {
            Err(ResponseError::TransactionalIdAuthorizationFailed)
        }
        KEY_TYPE_GROUP => {
            // The leader of the group's __consumer_offsets partition; on a single node every
            // partition is led by this broker. Like Kafka, the first lookup creates the
            // topic (by the coordinator's rules); if that fails the coordinator is not
            // available yet and the client retries.
            if let Err(e) = broker.groups.offsets_topic() {
                tracing::warn!(group = key, error = %e, "cannot create the group coordinator's topic");
                return Err(ResponseError::CoordinatorNotAvailable);
            }
            let partition = broker.groups.partition_for(key);
            leader_of(
                broker,
                &ctx.listener_name,
                crate::coordinator::GROUP_METADATA_TOPIC_NAME,
                partition,
            )
        }
        KEY_TYPE_TRANSACTION => {
            if let Err(e) = broker.transactions.state_topic() {
                tracing::warn!(transactional_id = key, error = %e, "cannot create the transaction coordinator's topic");
                return Err(ResponseError::CoordinatorNotAvailable);
            }
            let partition = broker.transactions.partition_for(key);
            leader_of(
                broker,
                &ctx.listener_name,
                crate::coordinator::transaction::TRANSACTION_STATE_TOPIC_NAME,
                partition,
            )
        }
        _ => Err(ResponseError::InvalidRequest),
    }
}

/// The live leader of `topic`-`partition` from the image (this broker without one), at its
/// endpoint on `listener`; COORDINATOR_NOT_AVAILABLE while the partition has no live leader,
/// or its leader has no endpoint there (Kafka's `getAliveBrokerNode(leader, listenerName)`).
fn leader_of(
    broker: &Broker,
    listener: &ListenerName,
    topic: &str,
    partition: i32,
) -> Result<(i32, String, i32), ResponseError> {
    let this = || {
        broker
            .this_broker(listener)
            .map(|b| (b.node_id, b.host, b.port))
            .ok_or(ResponseError::CoordinatorNotAvailable)
    };
    let Some(image) = broker.topics.image() else {
        return this();
    };
    let leader = broker
        .topics
        .get(topic)
        .and_then(|t| crate::cluster::views::partition(&image, &t.id, partition))
        .map_or(-1, |p| p.leader);
    if leader == broker.node_id() {
        return this();
    }
    crate::cluster::views::alive_broker(&image, leader, listener.as_str())
        .map(|b| (b.node_id, b.host, b.port))
        .ok_or(ResponseError::CoordinatorNotAvailable)
}

/// Answers FindCoordinator.
#[must_use]
pub fn handle(
    ctx: &super::RequestContext,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let version = ctx.api_version;
    let mut response = FindCoordinatorResponse::default();
    if version >= BATCHED_VERSION {
        response.error_message = None;
        response.coordinators = request
            .coordinator_keys
            .iter()
            .map(
                |key| match coordinator_of(ctx, key.as_str(), request.key_type) {
                    Ok((node_id, host, port)) => Coordinator::default()
                        .with_key(key.clone())
                        .with_node_id(BrokerId(node_id))
                        .with_host(StrBytes::from_string(host))
                        .with_port(port)
                        .with_error_message(Some(StrBytes::from_static_str("NONE"))),
                    Err(e) => Coordinator::default()
                        .with_key(key.clone())
                        .with_node_id(BrokerId(-1))
                        .with_port(-1)
                        .with_error_code(e.code())
                        .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                },
            )
            .collect();
        return response;
    }
    // Kafka sends `Errors.message()`, which is "NONE" on success.
    let error_message = |m: String| (version >= 1).then(|| StrBytes::from_string(m));
    match coordinator_of(ctx, request.key.as_str(), request.key_type) {
        Ok((node_id, host, port)) => {
            response.node_id = BrokerId(node_id);
            response.host = StrBytes::from_string(host);
            response.port = port;
            response.error_message = error_message("NONE".to_string());
        }
        Err(e) => {
            response.error_code = e.code();
            response.node_id = BrokerId(-1);
            response.port = -1;
            response.error_message = error_message(e.to_string());
        }
    }
    response
}
