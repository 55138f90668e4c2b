//! IncrementalAlterConfigs (API key 44): SET, DELETE, APPEND and SUBTRACT on single configs
//! of a topic or a dynamic broker layer, leaving the others as they are; what
//! `kafka-configs.sh --alter --add-config/--delete-config` and Kafka Connect send. Also the
//! broker loggers' levels (SET and DELETE only).
//! Validation and errors follow Kafka's controller (`ConfigurationControlManager`).

use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::protocol::VersionRange;

use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::ResponseError;

use super::alter_configs::{
    alter, check_entries, check_node_id, decide_each, target, Refusal, Target,
    RESOURCE_BROKER_LOGGER,
};
use crate::broker::Broker;
use crate::broker_config::broker_definition;
use crate::errors;
use crate::logging_controller::{self, LoggerChange};
use crate::topic_config::{apply_ops, is_list, kafka_default, AlterOp, ConfigError};

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

/// Broker loggers (KIP-412): SET a logger's level or DELETE it back to where it started, on
/// this broker only, all of a resource's changes or none, as Kafka's
/// `ConfigAdminManager` checks them (`logging_controller`). Not kept across a restart.
fn alter_loggers(
    broker: &Broker,
    resource: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), Refusal> {
    let name = resource.resource_name.as_str();
    check_node_id(
        broker,
        name,
        |id| format!("Unexpected node id. Expected {id}, but received {name}"),
        || format!("Node id must be an integer, but it is: {name}"),
    )?;
    // A missing level is refused as a level that is not one, below.
    check_entries(resource.configs.iter().map(|c| (c.name.as_str(), false)))
        .map_err(|e| (errors::config_error(&e), e.to_string()))?;
    let changes = resource
        .configs
        .iter()
        .map(|c| {
            let logger = c.name.to_string();
            match AlterOp::from_code(c.config_operation) {
                Ok(AlterOp::Set) => Ok(LoggerChange::Set {
                    logger,
                    // The JVM renders a missing value as `null` in the same message.
                    level: c
                        .value
                        .as_ref()
                        .map_or_else(|| "null".to_owned(), ToString::to_string),
                }),
                Ok(AlterOp::Delete) => Ok(LoggerChange::Unset { logger }),
                Ok(op @ (AlterOp::Append | AlterOp::Subtract)) => Err((
                    ResponseError::InvalidRequest,
                    format!(
                        "{} operation is not allowed for the BROKER_LOGGER resource",
                        if op == AlterOp::Append {
                            "APPEND"
                        } else {
                            "SUBTRACT"
                        }
                    ),
                )),
                Err(e) => Err((errors::config_error(&e), e.to_string())),
            }
        })
        .collect::<Result<Vec<_>, Refusal>>()?;
    logging_controller::controller()
        .alter(&changes, validate_only)
        .map_err(|refused| {
            let code = if refused.invalid_config {
                ResponseError::InvalidConfig
            } else {
                ResponseError::InvalidRequest
            };
            (code, refused.message)
        })
}

/// Answers an IncrementalAlterConfigs request.
pub fn handle(
    ctx: &super::RequestContext,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let broker = &ctx.broker;
    let outcomes = decide_each(
        ctx,
        "IncrementalAlterConfigs",
        &request.resources,
        |r| (r.resource_type, r.resource_name.as_str()),
        |resource| {
            if resource.resource_type == RESOURCE_BROKER_LOGGER {
                return alter_loggers(broker, resource, request.validate_only);
            }
            let entries = resource.configs.iter().map(|c| {
                let needs_value = c.config_operation != 1;
                (c.name.as_str(), needs_value && c.value.is_none())
            });
            let ops: Result<Vec<_>, ConfigError> = resource
                .configs
                .iter()
                .map(|c| {
                    Ok((
                        c.name.to_string(),
                        AlterOp::from_code(c.config_operation)?,
                        c.value.as_ref().map(ToString::to_string),
                    ))
                })
                .collect();
            check_entries(entries)
                .and(ops)
                .map_err(|e| (errors::config_error(&e), e.to_string()))
                .and_then(|ops| {
                    let target = target(broker, resource.resource_type, &resource.resource_name)?;
                    let broker_resource = matches!(target, Target::Broker(_));
                    alter(broker, target, request.validate_only, |current| {
                        if broker_resource {
                            apply_ops(
                                current,
                                &ops,
                                |name| {
                                    broker_definition(name)
                                        .is_some_and(crate::broker_config::is_list_kind)
                                },
                                |name| {
                                    broker_definition(name)
                                        .and_then(|d| d.default.map(str::to_string))
                                },
                            )
                        } else {
                            apply_ops(current, &ops, is_list, kafka_default)
                        }
                    })
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
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}
