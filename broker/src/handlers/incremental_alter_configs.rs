//! IncrementalAlterConfigs (API key 44): SET, DELETE, APPEND and SUBTRACT on single configs
//! of a topic or a dynamic broker layer, leaving the others as they are; what
//! `kafka-configs.sh --alter --add-config/--delete-config` and Kafka Connect send.
//! Validation and errors follow Kafka's controller (`ConfigurationControlManager`).

use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};
use kafka_protocol::protocol::VersionRange;

use super::alter_configs::{alter, check_entries, decide_each, target, Target};
use crate::broker_config::broker_definition;
use crate::errors;
use crate::topic_config::{apply_ops, is_list, kafka_default, AlterOp, ConfigError};

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

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
