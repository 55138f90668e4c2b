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

/// A logger as DescribeConfigs lists it: name, level, source, read-only, config type.
type LoggerEntry = (String, String, i8, bool, i8);
/// One change of IncrementalAlterConfigs: name, operation, value.
type Change = (&'static str, i8, Option<&'static str>);

/// One BROKER_LOGGER change of IncrementalAlterConfigs v1, on a connection of its own (the
/// test's broker closes idle ones quickly): the error code and message of the resource.
fn alter_logger(
    broker: &Broker,
    resource_name: &'static str,
    changes: &[Change],
    validate_only: bool,
) -> (i16, Option<String>) {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::{
        IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    };
    let request = IncrementalAlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(vec![AlterConfigsResource::default()
            .with_resource_type(8)
            .with_resource_name(StrBytes::from_static_str(resource_name))
            .with_configs(
                changes
                    .iter()
                    .map(|(name, op, value)| {
                        AlterableConfig::default()
                            .with_name(StrBytes::from_static_str(name))
                            .with_config_operation(*op)
                            .with_value(value.map(StrBytes::from_static_str))
                    })
                    .collect(),
            )]);
    let mut stream = crate::wire::connect(broker.addr());
    let response: IncrementalAlterConfigsResponse =
        crate::wire::round_trip(&mut stream, 1, 11, &request);
    let result = &response.responses[0];
    (
        result.error_code,
        result.error_message.as_ref().map(ToString::to_string),
    )
}

/// BROKER_LOGGER DescribeConfigs v4 of `name` (only `keys` when given), on a connection of
/// its own: the error, then (logger, level, source, read-only, config type) per entry.
fn describe_loggers(
    broker: &Broker,
    name: &'static str,
    keys: Option<&[&'static str]>,
) -> (i16, Option<String>, Vec<LoggerEntry>) {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(8)
            .with_resource_name(StrBytes::from_static_str(name))
            .with_configuration_keys(
                keys.map(|k| k.iter().map(|k| StrBytes::from_static_str(k)).collect()),
            )]);
    let mut stream = crate::wire::connect(broker.addr());
    let response: kafka_protocol::messages::DescribeConfigsResponse =
        crate::wire::round_trip(&mut stream, 4, 12, &request);
    let result = &response.results[0];
    (
        result.error_code,
        result.error_message.as_ref().map(ToString::to_string),
        result
            .configs
            .iter()
            .map(|c| {
                (
                    c.name.to_string(),
                    c.value
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default(),
                    c.config_source,
                    c.read_only,
                    c.config_type,
                )
            })
            .collect(),
    )
}

/// The level `loggers` give `name`.
fn level_of(loggers: &[LoggerEntry], name: &str) -> Option<String> {
    loggers.iter().find(|l| l.0 == name).map(|l| l.1.clone())
}

// Broker loggers (KIP-412), what `kafka-configs.sh --entity-type broker-loggers` shows and
// changes: the levels are listed as Kafka lists them (source DYNAMIC_BROKER_LOGGER_CONFIG,
// type UNKNOWN); a SET changes what the broker logs at once, both ways (the connection
// code's debug line for an idle connection appears only after `logbook_broker=DEBUG`, its
// warning for a client that hangs up mid-frame disappears under `logbook_broker=ERROR`);
// DELETE takes a logger back to where it started; refusals carry Kafka's codes and
// messages and apply nothing. Fails on the previous build: it listed no logger and refused
// every change.
#[test]
fn broker_loggers_show_and_change_the_log_levels() {
    use std::io::Write;
    use std::time::Duration;
    let broker = Broker::start_with(&["--connections-max-idle-ms", "300"]);
    let idle_closed = "closing idle connection";
    let bad_frame = "closing connection: bad frame";
    let hang_up = || {
        let mut s = crate::wire::connect(broker.addr());
        s.write_all(&[0, 0, 0, 10, 0, 18]).expect("half a frame");
    };
    let count = |needle: &str| broker.log().matches(needle).count();

    let (error, _, loggers) = describe_loggers(&broker, "1", None);
    assert_eq!(error, 0);
    assert_eq!(
        loggers.iter().find(|l| l.0 == "root"),
        Some(&("root".to_string(), "INFO".to_string(), 6, false, 0))
    );
    assert_eq!(
        level_of(&loggers, "logbook_broker").as_deref(),
        Some("INFO")
    );
    assert_eq!(
        level_of(&loggers, "logbook_replication").as_deref(),
        Some("INFO")
    );

    // At INFO an idle connection closes without a word.
    let idle = crate::wire::connect(broker.addr());
    std::thread::sleep(Duration::from_millis(1500));
    drop(idle);
    assert_eq!(count(idle_closed), 0, "logged at INFO");

    assert_eq!(
        alter_logger(&broker, "1", &[("logbook_broker", 0, Some("DEBUG"))], true),
        (0, None),
        "validate only"
    );
    let (_, _, loggers) = describe_loggers(&broker, "1", None);
    assert_eq!(
        level_of(&loggers, "logbook_broker").as_deref(),
        Some("INFO")
    );

    assert_eq!(
        alter_logger(&broker, "1", &[("logbook_broker", 0, Some("DEBUG"))], false),
        (0, None)
    );
    let (_, _, loggers) =
        describe_loggers(&broker, "1", Some(&["logbook_broker", "root", "nosuch"]));
    assert_eq!(
        loggers
            .iter()
            .map(|l| (l.0.as_str(), l.1.as_str()))
            .collect::<Vec<_>>(),
        vec![("root", "INFO"), ("logbook_broker", "DEBUG")]
    );
    let _idle = crate::wire::connect(broker.addr());
    assert!(
        broker.wait_for_log(idle_closed, Duration::from_secs(10)),
        "the debug line after logbook_broker=DEBUG"
    );

    // Quieter: the warning goes, and comes back with DELETE.
    assert_eq!(
        alter_logger(&broker, "1", &[("logbook_broker", 0, Some("ERROR"))], false),
        (0, None)
    );
    let warnings = count(bad_frame);
    hang_up();
    describe_loggers(&broker, "1", None);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        count(bad_frame),
        warnings,
        "a warning under logbook_broker=ERROR"
    );
    assert_eq!(
        alter_logger(&broker, "1", &[("logbook_broker", 1, None)], false),
        (0, None)
    );
    let (_, _, loggers) = describe_loggers(&broker, "1", None);
    assert_eq!(
        level_of(&loggers, "logbook_broker").as_deref(),
        Some("INFO")
    );
    hang_up();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while count(bad_frame) == warnings && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(count(bad_frame) > warnings, "the warning back at INFO");

    // Refusals: nothing of the resource is applied.
    let refusals: [(&[Change], &'static str, i16, &str); 6] = [
        (
            &[("logbook_storage", 0, Some("TRACE")), ("root", 0, Some("NOPE"))],
            "1",
            40,
            "Cannot set the log level of root to NOPE as it is not a supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN",
        ),
        (&[("root", 1, None)], "1", 42, "Removing the log level of the root logger is not allowed"),
        (
            &[("logbook_storage", 2, Some("DEBUG"))],
            "1",
            42,
            "APPEND operation is not allowed for the BROKER_LOGGER resource",
        ),
        (&[("nosuch", 0, Some("DEBUG"))], "1", 40, "Logger nosuch does not exist!"),
        (
            &[("logbook_storage", 0, Some("DEBUG"))],
            "2",
            42,
            "Unexpected node id. Expected 1, but received 2",
        ),
        (
            &[("logbook_storage", 0, Some("DEBUG"))],
            "x",
            42,
            "Node id must be an integer, but it is: x",
        ),
    ];
    for (changes, name, code, message) in refusals {
        assert_eq!(
            alter_logger(&broker, name, changes, false),
            (code, Some(message.to_string())),
            "{changes:?}"
        );
    }
    let (_, _, loggers) = describe_loggers(&broker, "1", None);
    assert_eq!(
        level_of(&loggers, "logbook_storage").as_deref(),
        Some("INFO")
    );
    assert_eq!(level_of(&loggers, "root").as_deref(), Some("INFO"));

    // A module path under a crate is a logger of its own, listed while it has a level.
    assert_eq!(
        alter_logger(
            &broker,
            "1",
            &[("logbook_replication::fetcher", 0, Some("FATAL"))],
            false
        ),
        (0, None)
    );
    let (_, _, loggers) = describe_loggers(&broker, "1", None);
    assert_eq!(
        level_of(&loggers, "logbook_replication::fetcher").as_deref(),
        Some("FATAL")
    );
    assert_eq!(
        alter_logger(
            &broker,
            "1",
            &[("logbook_replication::fetcher", 1, None)],
            false
        ),
        (0, None)
    );
    let (_, _, loggers) = describe_loggers(&broker, "1", None);
    assert_eq!(level_of(&loggers, "logbook_replication::fetcher"), None);

    assert_eq!(
        describe_loggers(&broker, "2", None).1.as_deref(),
        Some("Unexpected broker id, expected 1 but received 2")
    );
    assert_eq!(
        describe_loggers(&broker, "x", None).1.as_deref(),
        Some("Broker id must be an integer, but it is: x")
    );
}
