//! DescribeConfigs (API key 32): every config of a topic or of this broker with its value
//! and source. Admin tools (`kafka-topics.sh --describe`, `kafka-configs.sh`, Kafka Connect)
//! decide what to show from the source, so topic overrides report DYNAMIC_TOPIC_CONFIG and
//! everything else DEFAULT_CONFIG. Changing configs (AlterConfigs) is a later issue.

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use crate::broker::Broker;
use crate::errors;
use crate::topic_config::config_type;
use crate::topics::validate_topic_name;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 1, max: 4 };

/// Kafka's `ConfigResource.Type` codes.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_BROKER_LOGGER: i8 = 8;

/// `ConfigSource` codes used for broker configs.
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

/// One config as reported: name, value, source, Kafka `ConfigType`.
type Entry = (String, String, i8, i8);

fn topic_configs(broker: &Broker, name: &str) -> Result<Vec<Entry>, ResponseError> {
    validate_topic_name(name).map_err(|e| errors::topic_error(&e))?;
    let topic = broker
        .topics
        .get(name)
        .ok_or(ResponseError::UnknownTopicOrPartition)?;
    Ok(topic
        .config
        .describe(broker.topics.defaults())
        .into_iter()
        .map(|(name, value, source)| {
            let source = source.code();
            let kind = config_type(&name);
            (name, value, source, kind)
        })
        .collect())
}

fn broker_configs(broker: &Broker) -> Vec<Entry> {
    let c = &broker.config;
    let listener = format!("PLAINTEXT://{}", c.listen);
    let advertised = format!(
        "PLAINTEXT://{}:{}",
        broker.advertised_host, broker.advertised_port
    );
    let (int, long, string, boolean) = (3, 5, 2, 1);
    vec![
        (
            "advertised.listeners".into(),
            advertised,
            SOURCE_STATIC_BROKER,
            7,
        ),
        (
            "auto.create.topics.enable".into(),
            c.auto_create_topics_enable.to_string(),
            SOURCE_DEFAULT,
            boolean,
        ),
        (
            "broker.id".into(),
            c.node_id.to_string(),
            SOURCE_STATIC_BROKER,
            int,
        ),
        (
            "compression.type".into(),
            "producer".into(),
            SOURCE_DEFAULT,
            string,
        ),
        (
            "default.replication.factor".into(),
            c.default_replication_factor.to_string(),
            SOURCE_DEFAULT,
            int,
        ),
        (
            "group.initial.rebalance.delay.ms".into(),
            c.group_initial_rebalance_delay_ms.to_string(),
            SOURCE_DEFAULT,
            int,
        ),
        (
            "group.max.session.timeout.ms".into(),
            c.group_max_session_timeout_ms.to_string(),
            SOURCE_DEFAULT,
            int,
        ),
        (
            "group.min.session.timeout.ms".into(),
            c.group_min_session_timeout_ms.to_string(),
            SOURCE_DEFAULT,
            int,
        ),
        ("listeners".into(), listener, SOURCE_STATIC_BROKER, 7),
        (
            "log.cleanup.policy".into(),
            "delete".into(),
            SOURCE_DEFAULT,
            7,
        ),
        (
            "log.dirs".into(),
            c.data_dir.display().to_string(),
            SOURCE_STATIC_BROKER,
            string,
        ),
        (
            "log.retention.check.interval.ms".into(),
            c.log_retention_check_interval_ms.to_string(),
            SOURCE_DEFAULT,
            long,
        ),
        (
            "log.retention.ms".into(),
            c.log_retention_ms.to_string(),
            SOURCE_DEFAULT,
            long,
        ),
        (
            "log.segment.bytes".into(),
            c.log_segment_bytes.to_string(),
            SOURCE_DEFAULT,
            int,
        ),
        (
            "message.max.bytes".into(),
            c.limits.message_max_bytes.to_string(),
            SOURCE_DEFAULT,
            int,
        ),
        (
            "min.insync.replicas".into(),
            "1".into(),
            SOURCE_DEFAULT,
            int,
        ),
        (
            "node.id".into(),
            c.node_id.to_string(),
            SOURCE_STATIC_BROKER,
            int,
        ),
        (
            "num.partitions".into(),
            c.num_partitions.to_string(),
            SOURCE_DEFAULT,
            int,
        ),
        (
            "offsets.retention.minutes".into(),
            c.offsets_retention_minutes.to_string(),
            SOURCE_DEFAULT,
            int,
        ),
        (
            "offsets.topic.num.partitions".into(),
            c.offsets_topic_num_partitions.to_string(),
            SOURCE_DEFAULT,
            int,
        ),
        (
            "socket.request.max.bytes".into(),
            c.limits.frame_bytes_max.to_string(),
            SOURCE_DEFAULT,
            int,
        ),
    ]
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
            let entries = match resource.resource_type {
                RESOURCE_TOPIC => topic_configs(broker, name),
                RESOURCE_BROKER if name.is_empty() || name == broker.node_id().to_string() => {
                    Ok(broker_configs(broker))
                }
                RESOURCE_BROKER => Err(ResponseError::InvalidRequest),
                // No dynamic logger levels: an empty list, as for a broker with none set.
                RESOURCE_BROKER_LOGGER => Ok(Vec::new()),
                _ => Err(ResponseError::InvalidRequest),
            };
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            match entries {
                Ok(entries) => {
                    let wanted = resource.configuration_keys.as_ref();
                    let configs = entries
                        .into_iter()
                        .filter(|(name, ..)| {
                            wanted.is_none_or(|keys| keys.iter().any(|k| k.as_str() == name))
                        })
                        .map(|(name, value, source, kind)| {
                            let name = StrBytes::from_string(name);
                            let value = Some(StrBytes::from_string(value));
                            let synonyms = if request.include_synonyms {
                                vec![DescribeConfigsSynonym::default()
                                    .with_name(name.clone())
                                    .with_value(value.clone())
                                    .with_source(source)]
                            } else {
                                Vec::new()
                            };
                            DescribeConfigsResourceResult::default()
                                .with_name(name)
                                .with_value(value)
                                .with_config_source(source)
                                .with_synonyms(synonyms)
                                .with_config_type(if version >= 3 { kind } else { 0 })
                        })
                        .collect();
                    result.with_configs(configs)
                }
                Err(e) => result
                    .with_error_code(e.code())
                    .with_error_message(Some(StrBytes::from_string(e.to_string()))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}
