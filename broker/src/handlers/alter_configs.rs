//! AlterConfigs (API key 33): replaces the whole set of a topic's overrides, or of a dynamic
//! broker layer, with the given configs (anything not named returns to its default), as
//! Kafka's legacy API does. Kafka's own tools now use IncrementalAlterConfigs; librdkafka
//! and older admin clients still send this. The resource checks shared by both live here.

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use crate::authorizer::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::broker_config::BrokerScope;
use crate::errors;
use crate::topic_config::ConfigError;
use crate::topics::TopicError;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

/// Kafka's `ConfigResource.Type` codes.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// Config resource type BROKER_LOGGER.
pub(crate) const RESOURCE_BROKER_LOGGER: i8 = 8;

/// What an alter request names: a topic, or one of this broker's dynamic layers.
pub(crate) enum Target {
    /// A topic by name.
    Topic(String),
    /// `BROKER "<this node>"` or `BROKER ""`.
    Broker(BrokerScope),
}

/// A refusal: the code and Kafka's message.
pub(crate) type Refusal = (ResponseError, String);

/// Resolves a resource as Kafka's `ConfigAdminManager.preprocess` does: a BROKER name must
/// be empty (the cluster default) or this node's id.
pub(crate) fn target(broker: &Broker, resource_type: i8, name: &str) -> Result<Target, Refusal> {
    match resource_type {
        RESOURCE_TOPIC => Ok(Target::Topic(name.to_string())),
        RESOURCE_BROKER if name.is_empty() => Ok(Target::Broker(BrokerScope::ClusterDefault)),
        RESOURCE_BROKER => match name.parse::<i32>() {
            Ok(id) if id == broker.node_id() => Ok(Target::Broker(BrokerScope::Node)),
            Ok(_) => Err((
                ResponseError::InvalidRequest,
                format!(
                    "Unexpected broker id, expected {}, but received {name}",
                    broker.node_id()
                ),
            )),
            Err(_) => Err((
                ResponseError::InvalidRequest,
                format!("Node id must be an integer, but it is: {name}"),
            )),
        },
        other => Err((
            ResponseError::InvalidRequest,
            format!("Unknown resource type {other}"),
        )),
    }
}

/// Checks that a per-node resource (a broker's configs, its loggers) names this node:
/// INVALID_REQUEST otherwise, worded by the caller as Kafka words it where it answers
/// (`other`: the name read as another node's id; `not_a_number`: not an integer).
pub(crate) fn check_node_id(
    broker: &Broker,
    name: &str,
    other: impl FnOnce(i32) -> String,
    not_a_number: impl FnOnce() -> String,
) -> Result<(), Refusal> {
    match name.parse::<i32>() {
        Ok(id) if id == broker.node_id() => Ok(()),
        Ok(_) => Err((ResponseError::InvalidRequest, other(broker.node_id()))),
        Err(_) => Err((ResponseError::InvalidRequest, not_a_number())),
    }
}

/// Indexes of resources named more than once; Kafka refuses each of them.
fn duplicated<'a>(ids: impl Iterator<Item = (i8, &'a str)> + Clone) -> HashSet<usize> {
    let mut seen = HashSet::new();
    let repeated: HashSet<(i8, &str)> = ids.clone().filter(|id| !seen.insert(*id)).collect();
    ids.enumerate()
        .filter(|(_, id)| repeated.contains(id))
        .map(|(i, _)| i)
        .collect()
}

/// Decides each resource of an AlterConfigs or IncrementalAlterConfigs request, in order,
/// as Kafka's `ConfigAdminManager` does: every copy of a resource named more than once is
/// refused with INVALID_REQUEST, the others go to `decide`. Refusals are logged under the
/// `api`'s name. Returns each resource's error code and message, for the API's own
/// response type.
pub(crate) fn decide_each<'a, R>(
    ctx: &super::RequestContext,
    api: &str,
    resources: &'a [R],
    id: impl Fn(&'a R) -> (i8, &'a str),
    mut decide: impl FnMut(&'a R) -> Result<(), Refusal>,
) -> Vec<(i16, Option<StrBytes>)> {
    let repeated = duplicated(resources.iter().map(&id));
    resources
        .iter()
        .enumerate()
        .map(|(i, resource)| {
            let outcome = if repeated.contains(&i) {
                Err((
                    ResponseError::InvalidRequest,
                    "Each resource must appear at most once.".to_string(),
                ))
            } else {
                let (resource_type, name) = id(resource);
                authorize_config(ctx, AclOperation::AlterConfigs, resource_type, name)
                    .and_then(|()| decide(resource))
            };
            match outcome {
                Ok(()) => (0, None),
                Err((code, message)) => {
                    tracing::info!(api, resource = id(resource).1, %message, "config change refused");
                    (code.code(), Some(StrBytes::from_string(message)))
                }
            }
        })
        .collect()
}

/// Config resource type GROUP (KIP-848 group configs).
const RESOURCE_GROUP: i8 = 32;

/// Whether the sender may do `operation` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
/// resource: a broker's or the broker loggers' configs are the cluster's, a topic's the
/// topic's, a group's the group's (Kafka's `configsAuthorizationApiError` names the code).
/// Other types are left to the handler, which refuses them.
pub(crate) fn authorize_config(
    ctx: &super::RequestContext,
    operation: AclOperation,
    resource_type: i8,
    name: &str,
) -> Result<(), Refusal> {
    let (resource, name, error) = match resource_type {
        RESOURCE_TOPIC => (
            ResourceType::Topic,
            name,
            ResponseError::TopicAuthorizationFailed,
        ),
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER => (
            ResourceType::Cluster,
            crate::authorizer::CLUSTER_NAME,
            ResponseError::ClusterAuthorizationFailed,
        ),
        RESOURCE_GROUP => (
            ResourceType::Group,
            name,
            ResponseError::GroupAuthorizationFailed,
        ),
        _ => return Ok(()),
    };
    if ctx.authorize(operation, resource, name) {
        Ok(())
    } else {
        Err((
            error,
            format!("{error:?}: not authorized to {operation:?} this resource"),
        ))
    }
}

/// Checks the configs of one resource before anything else (Kafka's `preprocess`): no name
/// twice, no value missing where one is needed.
pub(crate) fn check_entries<'a>(
    entries: impl Iterator<Item = (&'a str, bool)> + Clone,
) -> Result<(), ConfigError> {
    let mut names = HashSet::new();
    if !entries.clone().all(|(name, _)| names.insert(name)) {
        return Err(ConfigError::DuplicateKeys);
    }
    let nulls: Vec<&str> = entries
        .filter(|(_, null)| *null)
        .map(|(name, _)| name)
        .collect();
    if nulls.is_empty() {
        Ok(())
    } else {
        Err(ConfigError::NullValue(nulls.join(", ")))
    }
}

/// Runs a change on its target, off the async worker (it writes metadata with fsync).
pub(crate) fn alter(
    broker: &Broker,
    target: Target,
    validate_only: bool,
    change: impl FnOnce(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, ConfigError>,
) -> Result<(), Refusal> {
    // Kafka's controller names a missing topic in its own words (`ConfigurationControlManager`).
    let refuse = |e: &TopicError, code: ResponseError| match e {
        TopicError::Unknown(name) => (code, format!("The topic '{name}' does not exist.")),
        other => (code, other.to_string()),
    };
    tokio::task::block_in_place(|| match target {
        Target::Topic(name) => broker
            .topics
            .alter_config(&name, validate_only, |current| change(current.overrides()))
            .map_err(|e| refuse(&e, errors::topic_error(&e))),
        Target::Broker(scope) => broker
            .topics
            .alter_broker_config(scope, validate_only, change)
            .map_err(|e| refuse(&e, errors::broker_config_error(&e))),
    })
}

/// Answers an AlterConfigs request.
pub fn handle(ctx: &super::RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let broker = &ctx.broker;
    let outcomes = decide_each(
        ctx,
        "AlterConfigs",
        &request.resources,
        |r| (r.resource_type, r.resource_name.as_str()),
        |resource| {
            let entries = resource
                .configs
                .iter()
                .map(|c| (c.name.as_str(), c.value.is_none()));
            check_entries(entries)
                .map_err(|e| (errors::config_error(&e), e.to_string()))
                .and_then(|()| target(broker, resource.resource_type, &resource.resource_name))
                .and_then(|target| {
                    let replacement: BTreeMap<String, String> = resource
                        .configs
                        .iter()
                        .map(|c| {
                            let value = c.value.as_ref().map_or("", |v| v.as_str());
                            (c.name.to_string(), value.to_string())
                        })
                        .collect();
                    alter(broker, target, request.validate_only, |_| Ok(replacement))
                })
        },
    );
    let responses = outcomes
        .into_iter()
        .zip(&request.resources)
        .map(|((code, message), resource)| {
            AlterConfigsResourceResponse::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone())
                .with_error_code(code)
                .with_error_message(message)
        })
        .collect();
    AlterConfigsResponse::default().with_responses(responses)
}
