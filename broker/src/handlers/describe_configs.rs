//! DescribeConfigs (API key 32): every config of a topic or of this broker with its value,
//! source and synonyms, as Kafka's `ConfigHelper` reports them. Admin tools
//! (`kafka-configs.sh --describe --all`, `kafka-topics.sh --describe`, Kafka Connect)
//! decide what to show from the source, so each value says where it is set: on the topic,
//! dynamically for this broker or as the cluster default, at start, or Kafka's default.

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use crate::authorizer::AclOperation;
use crate::broker::Broker;
use crate::broker_config::{broker_config_type, broker_definition, Synonym};
use crate::config::SETTINGS;
use crate::errors;
use crate::topic_config::{config_type, ConfigSource};
use crate::topics::validate_topic_name;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 1, max: 4 };

/// Kafka's `ConfigResource.Type` codes.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_BROKER_LOGGER: i8 = 8;
/// Kafka's `ConfigType` UNKNOWN: what Kafka reports for a logger's level.
const CONFIG_TYPE_UNKNOWN: i8 = 0;

/// One config as reported.
struct Entry {
    name: String,
    value: Option<String>,
    synonyms: Vec<Synonym>,
    read_only: bool,
    config_type: i8,
    /// The source when there is no synonym: DEFAULT_CONFIG, or a logger's.
    source_alone: ConfigSource,
}

impl Entry {
    /// The source is the first synonym's (Kafka's rule), else `source_alone`.
    fn source(&self) -> ConfigSource {
        self.synonyms
            .first()
            .map_or(self.source_alone, |s| s.source)
    }
}

fn topic_configs(broker: &Broker, name: &str) -> Result<Vec<Entry>, (ResponseError, String)> {
    validate_topic_name(name).map_err(|e| (errors::topic_error(&e), e.to_string()))?;
    // Kafka answers a missing topic with an empty message (`ConfigHelper.describeConfigs`);
    // `kafka-configs.sh` prints it as is.
    let topic = broker
        .topics
        .get(name)
        .ok_or((ResponseError::UnknownTopicOrPartition, String::new()))?;
    Ok(topic
        .config
        .describe_with_synonyms(broker.topics.defaults())
        .into_iter()
        .map(|(name, value, _, synonyms)| Entry {
            config_type: config_type(&name),
            source_alone: ConfigSource::Default,
            name,
            value: Some(value),
            synonyms,
            read_only: false,
        })
        .collect())
}

/// This broker's configs: the topic defaults through their layers (dynamic), and the
/// static settings (read-only), sorted by name as Kafka's are.
fn node_configs(broker: &Broker) -> Vec<Entry> {
    let config = &broker.config;
    let mut entries: Vec<Entry> = broker
        .topics
        .defaults()
        .describe_node()
        .into_iter()
        .map(|(name, value, synonyms)| Entry {
            read_only: !broker_definition(&name).is_some_and(|d| d.dynamic),
            config_type: broker_config_type(&name),
            source_alone: ConfigSource::Default,
            name,
            value,
            synonyms,
        })
        .collect();
    for setting in SETTINGS {
        if entries.iter().any(|e| e.name == setting.name) {
            continue;
        }
        let value = (setting.read)(config);
        let source = if config.explicit.contains(setting.name) {
            ConfigSource::StaticBroker
        } else {
            ConfigSource::Default
        };
        entries.push(Entry {
            name: setting.name.to_string(),
            synonyms: vec![Synonym {
                name: setting.name.to_string(),
                value: value.clone(),
                source,
            }],
            value: Some(value),
            read_only: true,
            config_type: setting.config_type,
            source_alone: ConfigSource::Default,
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries
}

/// The cluster-default layer (`BROKER ""`): only what is set there.
fn cluster_default_configs(broker: &Broker) -> Vec<Entry> {
    broker
        .topics
        .defaults()
        .describe_cluster_default()
        .into_iter()
        .map(|(name, value, synonyms)| Entry {
            read_only: false,
            config_type: broker_config_type(&name),
            source_alone: ConfigSource::Default,
            name,
            value,
            synonyms,
        })
        .collect()
}

fn broker_configs(broker: &Broker, name: &str) -> Result<Vec<Entry>, (ResponseError, String)> {
    if name.is_empty() {
        return Ok(cluster_default_configs(broker));
    }
    match name.parse::<i32>() {
        Ok(id) if id == broker.node_id() => Ok(node_configs(broker)),
        Ok(_) => Err((
            ResponseError::InvalidRequest,
            format!(
                "Unexpected broker id, expected {} or empty string, but received {name}",
                broker.node_id()
            ),
        )),
        Err(_) => Err((
            ResponseError::InvalidRequest,
            format!("Broker id must be an integer, but it is: {name}"),
        )),
    }
}

/// The broker loggers and their levels (KIP-412; `logging_controller`), for this broker
/// only, as Kafka's `ConfigHelper`: each with source DYNAMIC_BROKER_LOGGER_CONFIG, no
/// synonyms, not read-only.
fn logger_configs(broker: &Broker, name: &str) -> Result<Vec<Entry>, (ResponseError, String)> {
    super::alter_configs::check_node_id(
        broker,
        name,
        |id| format!("Unexpected broker id, expected {id} but received {name}"),
        || format!("Broker id must be an integer, but it is: {name}"),
    )?;
    Ok(crate::logging_controller::controller()
        .loggers()
        .into_iter()
        .map(|(logger, level)| Entry {
            name: logger,
            value: Some(level),
            synonyms: Vec::new(),
            read_only: false,
            config_type: CONFIG_TYPE_UNKNOWN,
            source_alone: ConfigSource::DynamicBrokerLogger,
        })
        .collect())
}

/// Answers a DescribeConfigs request.
pub fn handle(
    ctx: &super::RequestContext,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let (broker, version) = (&ctx.broker, ctx.api_version);
    let results = request
        .resources
        .iter()
        .map(|resource| {
            let name = resource.resource_name.as_str();
            let authorized = super::alter_configs::authorize_config(
                ctx,
                AclOperation::DescribeConfigs,
                resource.resource_type,
                name,
            );
            let entries = match resource.resource_type {
                _ if authorized.is_err() => authorized.map(|()| Vec::new()),
                RESOURCE_TOPIC => topic_configs(broker, name),
                RESOURCE_BROKER => broker_configs(broker, name),
                RESOURCE_BROKER_LOGGER => logger_configs(broker, name),
                other => Err((
                    ResponseError::InvalidRequest,
                    format!("Unsupported resource type: {other}"),
                )),
            };
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            match entries {
                Ok(entries) => {
                    let wanted = resource
                        .configuration_keys
                        .as_ref()
                        .filter(|k| !k.is_empty());
                    let configs = entries
                        .into_iter()
                        .filter(|e| {
                            wanted.is_none_or(|keys| keys.iter().any(|k| k.as_str() == e.name))
                        })
                        .map(|e| config_entry(e, request.include_synonyms, version))
                        .collect();
                    result.with_configs(configs)
                }
                Err((code, message)) => result
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_string(message))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

/// One config as the response lists it. Synonyms (the values a config would fall back to,
/// most specific first) are listed only when the request's `include_synonyms` asks for
/// them; `config_type` exists from v3 (older versions get 0, "unknown").
fn config_entry(e: Entry, include_synonyms: bool, version: i16) -> DescribeConfigsResourceResult {
    let synonyms = if include_synonyms {
        e.synonyms
            .iter()
            .map(|s| {
                DescribeConfigsSynonym::default()
                    .with_name(StrBytes::from_string(s.name.clone()))
                    .with_value(Some(StrBytes::from_string(s.value.clone())))
                    .with_source(s.source.code())
            })
            .collect()
    } else {
        Vec::new()
    };
    DescribeConfigsResourceResult::default()
        .with_config_source(e.source().code())
        .with_read_only(e.read_only)
        .with_is_sensitive(false)
        .with_synonyms(synonyms)
        .with_config_type(if version >= 3 { e.config_type } else { 0 })
        .with_value(e.value.map(StrBytes::from_string))
        .with_name(StrBytes::from_string(e.name))
}
