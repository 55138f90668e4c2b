//! DescribeConfigs through rdkafka's AdminClient: topic overrides are reported with their
//! source (what `kafka-topics.sh --describe` and `kafka-configs.sh` rely on), defaults as
//! defaults, broker configs with the broker's values, and an unknown topic gets
//! UNKNOWN_TOPIC_OR_PARTITION.

use integration_tests::Broker;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::DescribeConfigsRequest;
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{ConfigSource, ResourceSpecifier};

use crate::common::{admin, admin_options, block_on, create_topic};

// A topic created with retention.ms=1234 reports it as a dynamic topic config, and
// max.message.bytes as the broker default 1048588; the broker reports num.partitions.
#[test]
fn describe_topic_and_broker_configs() {
    let broker = Broker::start_with(&["--num-partitions", "3"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "described", 2, &[("retention.ms", "1234")]);
    let client = admin(&bootstrap);
    let results = block_on(client.describe_configs(
        &[
            ResourceSpecifier::Topic("described"),
            ResourceSpecifier::Broker(1),
        ],
        &admin_options(),
    ))
    .expect("describe configs");
    let topic = results[0].as_ref().expect("topic configs");
    let retention = topic.get("retention.ms").expect("retention.ms listed");
    assert_eq!(retention.value.as_deref(), Some("1234"));
    assert_eq!(retention.source, ConfigSource::DynamicTopic);
    let max = topic
        .get("max.message.bytes")
        .expect("max.message.bytes listed");
    assert_eq!(max.value.as_deref(), Some("1048588"));
    assert_eq!(max.source, ConfigSource::Default);
    let cleanup = topic.get("cleanup.policy").expect("cleanup.policy listed");
    assert_eq!(cleanup.value.as_deref(), Some("delete"));

    let node = results[1].as_ref().expect("broker configs");
    assert_eq!(
        node.get("num.partitions").and_then(|e| e.value.as_deref()),
        Some("3")
    );
    assert_eq!(
        node.get("broker.id").and_then(|e| e.value.as_deref()),
        Some("1")
    );

    // librdkafka's admin result does not surface per-resource errors here, so the
    // unknown topic is checked on the wire: DescribeConfigs v4 → error code 3.
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(StrBytes::from_static_str("no-such-topic"))]);
    let mut stream = crate::wire::connect(broker.addr());
    let response = crate::wire::round_trip(&mut stream, 4, 9, &request);
    assert_eq!(response.results[0].error_code, 3, "unknown topic");
    // Kafka's message for it is empty; `kafka-configs.sh` prints it as is.
    assert_eq!(
        response.results[0]
            .error_message
            .as_ref()
            .map(ToString::to_string),
        Some(String::new())
    );
    assert!(response.results[0].configs.is_empty());
}

// Broker configs as Kafka 4.4 describes them: the hours and minutes forms of retention and
// roll are read-only (only the `.ms` primaries change at run time) and refused by
// IncrementalAlterConfigs; `listeners` and `log.dirs` are of type LIST (7). Fails on the
// previous build: the hours forms were dynamic, the lists STRING.
#[test]
fn broker_config_flags_and_types_are_kafkas() {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::{
        DescribeConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    };
    let broker = Broker::start();
    let keys = [
        "log.retention.hours",
        "log.retention.minutes",
        "log.retention.ms",
        "log.roll.hours",
        "listeners",
        "log.dirs",
    ];
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str("1"))
            .with_configuration_keys(Some(
                keys.iter().map(|k| StrBytes::from_static_str(k)).collect(),
            ))]);
    let mut stream = crate::wire::connect(broker.addr());
    let response: DescribeConfigsResponse = crate::wire::round_trip(&mut stream, 4, 3, &request);
    let mut seen: Vec<(String, bool, i8)> = response.results[0]
        .configs
        .iter()
        .map(|c| (c.name.to_string(), c.read_only, c.config_type))
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            // Read-only here: Kafka lets a broker's listeners change at run time,
            // Logbook does not (yet).
            ("listeners".to_string(), true, 7),
            ("log.dirs".to_string(), true, 7),
            ("log.retention.hours".to_string(), true, 3),
            ("log.retention.minutes".to_string(), true, 3),
            ("log.retention.ms".to_string(), false, 5),
            ("log.roll.hours".to_string(), true, 3),
        ]
    );
    let alter = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str(""))
            .with_configs(vec![AlterableConfig::default()
                .with_name(StrBytes::from_static_str("log.retention.hours"))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_static_str("1")))]),
    ]);
    let altered: IncrementalAlterConfigsResponse =
        crate::wire::round_trip(&mut stream, 1, 4, &alter);
    assert_eq!(altered.responses[0].error_code, 42, "INVALID_REQUEST");
}
