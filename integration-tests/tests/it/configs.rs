//! Changing configs (issue 9): AlterConfigs through rdkafka's AdminClient and
//! IncrementalAlterConfigs on the wire (librdkafka's admin API has no incremental call),
//! with Kafka's error codes and messages, validate_only, changes that take effect without
//! a restart, persistence across a restart, and dynamic broker defaults with their sources.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use integration_tests::Broker;
use kafka_protocol::messages::alter_configs_request::{
    AlterConfigsResource as LegacyResource, AlterableConfig as LegacyConfig,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResourceResult;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    AlterConfigsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AlterConfig, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::Timestamp;

use crate::common::{
    admin, admin_options, assert_round_trip, block_on, consume, create_topic, create_topics,
    produce_all, producer, Record,
};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;
const INVALID_CONFIG: i16 = 40;
const INVALID_REQUEST: i16 = 42;
const UNKNOWN_TOPIC: i16 = 3;

/// One IncrementalAlterConfigs resource: type, name, `(name, op, value)` entries.
fn resource(kind: i8, name: &str, ops: &[(&str, i8, Option<&str>)]) -> AlterConfigsResource {
    AlterConfigsResource::default()
        .with_resource_type(kind)
        .with_resource_name(StrBytes::from_string(name.to_string()))
        .with_configs(
            ops.iter()
                .map(|(n, op, v)| {
                    AlterableConfig::default()
                        .with_name(StrBytes::from_string((*n).to_string()))
                        .with_config_operation(*op)
                        .with_value(v.map(|v| StrBytes::from_string(v.to_string())))
                })
                .collect(),
        )
}

/// Sends IncrementalAlterConfigs v1 and returns `(error code, message)` per resource.
fn incremental(
    broker: &Broker,
    resources: Vec<AlterConfigsResource>,
    validate_only: bool,
) -> Vec<(i16, Option<String>)> {
    let request = IncrementalAlterConfigsRequest::default()
        .with_resources(resources)
        .with_validate_only(validate_only);
    let mut stream = crate::wire::connect(broker.addr());
    let response: IncrementalAlterConfigsResponse =
        crate::wire::round_trip(&mut stream, 1, 7, &request);
    response
        .responses
        .iter()
        .map(|r| {
            (
                r.error_code,
                r.error_message.as_ref().map(ToString::to_string),
            )
        })
        .collect()
}

/// DescribeConfigs v4 with synonyms of one resource; panics on a resource error.
fn describe(broker: &Broker, kind: i8, name: &str) -> Vec<DescribeConfigsResourceResult> {
    let request = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(StrBytes::from_string(name.to_string()))]);
    let mut stream = crate::wire::connect(broker.addr());
    let response = crate::wire::round_trip(&mut stream, 4, 9, &request);
    let result = &response.results[0];
    assert_eq!(
        result.error_code, 0,
        "describe {name}: {:?}",
        result.error_message
    );
    result.configs.clone()
}

/// `(value, source code)` of config `key` of a described resource.
fn entry(configs: &[DescribeConfigsResourceResult], key: &str) -> (Option<String>, i8) {
    let c = configs
        .iter()
        .find(|c| c.name.as_str() == key)
        .unwrap_or_else(|| panic!("{key} not described"));
    (c.value.as_ref().map(ToString::to_string), c.config_source)
}

/// `(name, value, source)` of the synonyms of config `key`.
fn synonyms(configs: &[DescribeConfigsResourceResult], key: &str) -> Vec<(String, String, i8)> {
    configs
        .iter()
        .find(|c| c.name.as_str() == key)
        .map(|c| {
            c.synonyms
                .iter()
                .map(|s| {
                    (
                        s.name.to_string(),
                        s.value
                            .as_ref()
                            .map(ToString::to_string)
                            .unwrap_or_default(),
                        s.source,
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

// Legacy AlterConfigs replaces the whole set: the override not named returns to its
// default; the new max.message.bytes holds at the next produce (MESSAGE_TOO_LARGE), with
// no restart.
#[test]
fn alter_configs_replaces_the_set_and_applies_at_once() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "legacy", 1, &[("retention.ms", "1234")]);
    let client = admin(&bootstrap);
    let change =
        AlterConfig::new(ResourceSpecifier::Topic("legacy")).set("max.message.bytes", "2000");
    let results = block_on(client.alter_configs(&[change], &admin_options())).expect("alter");
    assert!(results[0].is_ok(), "{results:?}");
    let configs = describe(&broker, TOPIC, "legacy");
    assert_eq!(
        entry(&configs, "max.message.bytes"),
        (Some("2000".into()), 1)
    );
    assert_eq!(
        entry(&configs, "retention.ms"),
        (Some("604800000".into()), 5)
    );

    let p = producer(&bootstrap, &[("message.max.bytes", "100000")]);
    let big = Record::new(0, "k", vec![b'x'; 5000]);
    let small = Record::new(0, "k", vec![b'y'; 100]);
    let deliveries = produce_all(&p, "legacy", &[big]);
    assert_eq!(
        deliveries[0].result,
        Err(RDKafkaErrorCode::MessageSizeTooLarge)
    );
    let deliveries = produce_all(&p, "legacy", &[small]);
    assert_eq!(deliveries[0].result, Ok((0, 0)));

    // An unknown config in the legacy API: INVALID_CONFIG for that resource, and nothing
    // changed. (librdkafka's admin result does not surface per-resource errors, so the
    // code is checked on the wire.)
    let request = AlterConfigsRequest::default().with_resources(vec![LegacyResource::default()
        .with_resource_type(TOPIC)
        .with_resource_name(StrBytes::from_static_str("legacy"))
        .with_configs(vec![LegacyConfig::default()
            .with_name(StrBytes::from_static_str("no.such.config"))
            .with_value(Some(StrBytes::from_static_str("1")))])]);
    let mut stream = crate::wire::connect(broker.addr());
    let response = crate::wire::round_trip(&mut stream, 2, 5, &request);
    assert_eq!(response.responses[0].error_code, INVALID_CONFIG);
    assert_eq!(
        response.responses[0].error_message.as_deref(),
        Some("Unknown topic config name: no.such.config")
    );
    let configs = describe(&broker, TOPIC, "legacy");
    assert_eq!(
        entry(&configs, "max.message.bytes"),
        (Some("2000".into()), 1)
    );
}

// SET, APPEND, SUBTRACT and DELETE change only the configs they name; every refusal has
// Kafka's code and a message naming the key; validate_only changes nothing.
#[test]
fn replication_throttle_rates_are_dynamic_broker_configs() {
    // Proves: what `kafka-reassign-partitions --throttle` sets before it moves anything
    // (the two rates on every broker) is accepted and described as a dynamic broker config,
    // and `--verify`'s DELETE removes it; before, the SET was refused ("Cannot update these
    // configs dynamically"), so the tool stopped before the reassignment. Not enforced.
    let broker = Broker::start();
    let rates = [
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    ];
    let set = incremental(
        &broker,
        vec![resource(
            BROKER,
            "1",
            &rates.map(|name| (name, SET, Some("50000000"))),
        )],
        false,
    );
    assert_eq!(set, vec![(0, None)]);
    let configs = describe(&broker, BROKER, "1");
    for name in rates {
        assert_eq!(
            entry(&configs, name),
            (Some("50000000".into()), 2), // DYNAMIC_BROKER_CONFIG
            "{name}"
        );
    }
    let refused = incremental(
        &broker,
        vec![resource(
            BROKER,
            "1",
            &[("leader.replication.throttled.rate", SET, Some("-1"))],
        )],
        false,
    );
    // As every broker config with a bad value (Kafka validates the broker layer whole).
    assert_eq!(refused[0].0, INVALID_REQUEST, "{refused:?}");
    let deleted = incremental(
        &broker,
        vec![resource(
            BROKER,
            "1",
            &rates.map(|name| (name, DELETE, None)),
        )],
        false,
    );
    assert_eq!(deleted, vec![(0, None)]);
    let configs = describe(&broker, BROKER, "1");
    for name in rates {
        assert_eq!(
            entry(&configs, name),
            (Some("9223372036854775807".into()), 5),
            "{name}"
        );
    }
}

#[test]
fn incremental_alter_operations_and_errors() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "incr", 1, &[("retention.ms", "1234")]);

    let ok = incremental(
        &broker,
        vec![resource(
            TOPIC,
            "incr",
            &[
                ("segment.bytes", SET, Some("100000")),
                ("cleanup.policy", APPEND, Some("compact")),
            ],
        )],
        false,
    );
    assert_eq!(ok, vec![(0, None)]);
    let configs = describe(&broker, TOPIC, "incr");
    assert_eq!(entry(&configs, "retention.ms"), (Some("1234".into()), 1));
    assert_eq!(entry(&configs, "segment.bytes"), (Some("100000".into()), 1));
    assert_eq!(
        entry(&configs, "cleanup.policy"),
        (Some("delete,compact".into()), 1)
    );

    let ok = incremental(
        &broker,
        vec![resource(
            TOPIC,
            "incr",
            &[
                ("cleanup.policy", SUBTRACT, Some("delete")),
                ("retention.ms", DELETE, None),
            ],
        )],
        false,
    );
    assert_eq!(ok, vec![(0, None)]);
    let configs = describe(&broker, TOPIC, "incr");
    assert_eq!(
        entry(&configs, "cleanup.policy"),
        (Some("compact".into()), 1)
    );
    assert_eq!(
        entry(&configs, "retention.ms"),
        (Some("604800000".into()), 5)
    );

    let refused = incremental(
        &broker,
        vec![
            resource(TOPIC, "incr", &[("no.such.config", SET, Some("1"))]),
            resource(TOPIC, "no-such-topic", &[("retention.ms", SET, Some("1"))]),
            resource(BROKER, "7", &[("log.retention.ms", SET, Some("1"))]),
            resource(BROKER, "", &[("num.partitions", SET, Some("3"))]),
        ],
        false,
    );
    assert_eq!(
        refused,
        vec![
            (
                INVALID_CONFIG,
                Some("Unknown topic config name: no.such.config".into())
            ),
            (
                UNKNOWN_TOPIC,
                Some("The topic 'no-such-topic' does not exist.".into())
            ),
            (
                INVALID_REQUEST,
                Some("Unexpected broker id, expected 1, but received 7".into())
            ),
            (
                INVALID_REQUEST,
                Some("Cannot update these configs dynamically: num.partitions".into())
            ),
        ]
    );
    let refused = incremental(
        &broker,
        vec![resource(
            TOPIC,
            "incr",
            &[("segment.bytes", SET, Some("10"))],
        )],
        false,
    );
    assert_eq!(
        refused,
        vec![(
            INVALID_CONFIG,
            Some(
                "Invalid value 10 for configuration segment.bytes: Value must be at least 14"
                    .into()
            )
        )]
    );
    let refused = incremental(
        &broker,
        vec![resource(
            TOPIC,
            "incr",
            &[("retention.ms", APPEND, Some("5"))],
        )],
        false,
    );
    assert_eq!(
        refused,
        vec![(
            INVALID_CONFIG,
            Some("Can't APPEND to key retention.ms because its type is not LIST.".into())
        )]
    );
    let refused = incremental(
        &broker,
        vec![
            resource(TOPIC, "incr", &[("retention.ms", SET, Some("5"))]),
            resource(TOPIC, "incr", &[("retention.ms", SET, Some("6"))]),
            resource(
                TOPIC,
                "other",
                &[
                    ("retention.ms", SET, Some("5")),
                    ("retention.ms", DELETE, None),
                ],
            ),
        ],
        false,
    );
    let codes: Vec<i16> = refused.iter().map(|r| r.0).collect();
    assert_eq!(codes, vec![INVALID_REQUEST; 3]);
    assert_eq!(
        refused[0].1.as_deref(),
        Some("Each resource must appear at most once.")
    );
    assert_eq!(
        refused[2].1.as_deref(),
        Some("Error due to duplicate config keys")
    );

    // validate_only: accepted, nothing changed.
    let ok = incremental(
        &broker,
        vec![resource(
            TOPIC,
            "incr",
            &[("retention.ms", SET, Some("999"))],
        )],
        true,
    );
    assert_eq!(ok, vec![(0, None)]);
    let configs = describe(&broker, TOPIC, "incr");
    assert_eq!(
        entry(&configs, "retention.ms"),
        (Some("604800000".into()), 5)
    );
}

// segment.bytes and message.timestamp.type changed on a live topic hold for the next
// appends: segments roll at the new size, fetched timestamps are the broker's append time.
#[test]
fn changes_apply_to_the_live_log() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "live", 1, &[]);
    let ok = incremental(
        &broker,
        vec![resource(
            TOPIC,
            "live",
            &[
                ("segment.bytes", SET, Some("1024")),
                ("message.timestamp.type", SET, Some("LogAppendTime")),
            ],
        )],
        false,
    );
    assert_eq!(ok, vec![(0, None)]);
    let before_ms = i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms");
    let records: Vec<Record> = (0..10)
        .map(|i| Record {
            timestamp: Some(1_000 + i),
            ..Record::new(0, format!("k{i}"), vec![b'v'; 500])
        })
        .collect();
    let p = producer(&bootstrap, &[("linger.ms", "0"), ("batch.size", "600")]);
    let deliveries = produce_all(&p, "live", &records);
    assert!(
        deliveries.iter().all(|d| d.result.is_ok()),
        "{deliveries:?}"
    );
    let segments = std::fs::read_dir(broker.data_dir().join("live-0"))
        .expect("partition dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .count();
    assert!(
        segments >= 4,
        "10 batches of ~570 bytes in 1 KiB segments: {segments} segments"
    );
    let consumed = consume(&bootstrap, "live", 0, 0, 10, &[]);
    for c in &consumed {
        match c.timestamp {
            Timestamp::LogAppendTime(ts) => assert!(ts >= before_ms, "{ts} < {before_ms}"),
            other => panic!("offset {}: {other:?}, expected LogAppendTime", c.offset),
        }
    }
}

/// The topic configs Kafka 4.4 lists for a topic (`kafka-configs.sh --describe --all`), sorted.
const KAFKA_TOPIC_CONFIGS: &[&str] = &[
    "cleanup.policy",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "delete.retention.ms",
    "errors.deadletterqueue.group.enable",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.decompressed.message.bytes",
    "max.message.bytes",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.copy.lag.bytes",
    "remote.copy.lag.ms",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
];

// The configs are Kafka 4's, name for name: the three Kafka 4.0 removed are refused as
// unknown by CreateTopics and IncrementalAlterConfigs (INVALID_CONFIG, "Unknown topic config
// name: …") and listed neither for a topic nor for the broker; message.timestamp.after.max.ms
// has Kafka 4's default of one hour, reported with its broker synonym.
#[test]
fn configs_are_kafka_4s() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "kafka4", 1, &[]);
    for removed in [
        "message.format.version",
        "message.downconversion.enable",
        "message.timestamp.difference.max.ms",
    ] {
        let topic =
            NewTopic::new("kafka4-removed", 1, TopicReplication::Fixed(1)).set(removed, "true");
        assert_eq!(
            create_topics(&bootstrap, &[topic], &admin_options()),
            vec![Err((
                "kafka4-removed".to_owned(),
                RDKafkaErrorCode::InvalidConfig
            ))],
            "CreateTopics with {removed}"
        );
        let refused = incremental(
            &broker,
            vec![resource(TOPIC, "kafka4", &[(removed, SET, Some("true"))])],
            true,
        );
        assert_eq!(
            refused,
            vec![(
                INVALID_CONFIG,
                Some(format!("Unknown topic config name: {removed}"))
            )]
        );
    }
    let configs = describe(&broker, TOPIC, "kafka4");
    let mut names: Vec<&str> = configs.iter().map(|c| c.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, KAFKA_TOPIC_CONFIGS);
    assert_eq!(
        entry(&configs, "message.timestamp.after.max.ms"),
        (Some("3600000".into()), 5)
    );
    assert_eq!(
        synonyms(&configs, "message.timestamp.after.max.ms"),
        vec![(
            "log.message.timestamp.after.max.ms".into(),
            "3600000".into(),
            5
        )]
    );
    let node = describe(&broker, BROKER, "1");
    assert_eq!(
        entry(&node, "log.message.timestamp.after.max.ms"),
        (Some("3600000".into()), 5)
    );
    for removed in [
        "log.message.downconversion.enable",
        "log.message.timestamp.difference.max.ms",
    ] {
        assert!(
            node.iter().all(|c| c.name.as_str() != removed),
            "{removed} listed for the broker"
        );
    }
}

// Topic overrides and dynamic broker configs survive a restart; a cluster default
// (`--entity-default`) applies to topics without an override and is reported as
// DYNAMIC_DEFAULT_BROKER_CONFIG with Kafka's synonyms.
#[test]
fn configs_survive_restart_and_broker_defaults_apply() {
    let mut broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "kept", 1, &[]);
    create_topic(&bootstrap, "plain", 1, &[]);
    let ok = incremental(
        &broker,
        vec![
            resource(TOPIC, "kept", &[("retention.ms", SET, Some("3600000"))]),
            resource(BROKER, "", &[("log.retention.ms", SET, Some("7200000"))]),
            resource(BROKER, "1", &[("message.max.bytes", SET, Some("3000"))]),
        ],
        false,
    );
    assert_eq!(ok, vec![(0, None), (0, None), (0, None)]);
    broker.restart();
    std::thread::sleep(Duration::from_millis(200));

    let kept = describe(&broker, TOPIC, "kept");
    assert_eq!(entry(&kept, "retention.ms"), (Some("3600000".into()), 1));
    assert_eq!(
        synonyms(&kept, "retention.ms"),
        vec![
            ("retention.ms".into(), "3600000".into(), 1),
            ("log.retention.ms".into(), "7200000".into(), 3),
            ("log.retention.hours".into(), "168".into(), 5),
        ]
    );
    let plain = describe(&broker, TOPIC, "plain");
    assert_eq!(entry(&plain, "retention.ms"), (Some("7200000".into()), 3));
    assert_eq!(entry(&plain, "max.message.bytes"), (Some("3000".into()), 2));
    assert_eq!(
        synonyms(&plain, "max.message.bytes"),
        vec![
            ("message.max.bytes".into(), "3000".into(), 2),
            ("message.max.bytes".into(), "1048588".into(), 5),
        ]
    );
    assert_eq!(
        entry(&plain, "segment.bytes"),
        (Some("1073741824".into()), 5)
    );
    let node = describe(&broker, BROKER, "1");
    assert_eq!(entry(&node, "message.max.bytes"), (Some("3000".into()), 2));
    let cluster = describe(&broker, BROKER, "");
    assert_eq!(
        entry(&cluster, "log.retention.ms"),
        (Some("7200000".into()), 3)
    );

    // The broker-level message.max.bytes holds for a topic without an override.
    let p = producer(&bootstrap, &[("message.max.bytes", "100000")]);
    let deliveries = produce_all(&p, "plain", &[Record::new(0, "k", vec![b'x'; 5000])]);
    assert_eq!(
        deliveries[0].result,
        Err(RDKafkaErrorCode::MessageSizeTooLarge)
    );
}

// Broker settings under Kafka's names: `--override` sets them (reported as
// STATIC_BROKER_CONFIG, applied to topics); an unknown key or a bad value, given by
// `--override` or as a `KAFKA_*` variable, stops the start naming key, value and what is
// allowed.
#[test]
fn overrides_under_kafka_names() {
    let broker = Broker::start_with(&[
        "--override",
        "num.partitions=3",
        "--override",
        "log.segment.bytes=2048",
        "--override",
        "log.cleanup.policy=compact",
    ]);
    let node = describe(&broker, BROKER, "1");
    assert_eq!(entry(&node, "num.partitions"), (Some("3".into()), 4));
    assert_eq!(entry(&node, "log.segment.bytes"), (Some("2048".into()), 4));
    create_topic(&broker.bootstrap(), "with-statics", 1, &[]);
    let topic = describe(&broker, TOPIC, "with-statics");
    assert_eq!(entry(&topic, "segment.bytes"), (Some("2048".into()), 4));
    assert_eq!(
        synonyms(&topic, "segment.bytes"),
        vec![
            ("log.segment.bytes".into(), "2048".into(), 4),
            ("log.segment.bytes".into(), "1073741824".into(), 5),
        ]
    );
    assert_eq!(entry(&topic, "cleanup.policy"), (Some("compact".into()), 4));

    let dir = tempfile::tempdir().expect("temp dir");
    let start = |args: &[&str], env: &[(&str, &str)]| {
        let out = std::process::Command::new(integration_tests::broker_binary())
            .args(["--data-dir", dir.path().to_str().expect("utf-8")])
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .output()
            .expect("run the broker");
        assert!(!out.status.success(), "started with {args:?} {env:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let stderr = start(&["--override", "num.partitions=abc"], &[]);
    assert!(
        stderr.contains("invalid value 'abc' for broker config num.partitions")
            && stderr.contains("allowed: an integer >= 1"),
        "{stderr}"
    );
    let stderr = start(&["--override", "no.such.key=1"], &[]);
    assert!(
        stderr.contains("unknown broker config 'no.such.key' (value '1')"),
        "{stderr}"
    );
    let stderr = start(&[], &[("KAFKA_LOG_SEGMENT_BYTES", "10")]);
    assert!(
        stderr.contains("invalid value '10' for broker config log.segment.bytes")
            && stderr.contains("at least 14"),
        "{stderr}"
    );
    let stderr = start(&[], &[("KAFKA_LOG_CLEANUP_POLICY", "shred")]);
    assert!(
        stderr.contains("invalid value 'shred' for broker config log.cleanup.policy"),
        "{stderr}"
    );
}

// KAFKA_* variables that name no broker config (the client settings an application's
// shell or compose file carries next to the broker) do not stop the start, as on Kafka's
// docker image: the broker serves clients and logs each variable once by name, never its
// value; a known one beside them still takes effect.
#[test]
fn unknown_kafka_variables_in_the_environment_are_ignored() {
    let broker = Broker::start_with_env(
        &[],
        &[
            ("KAFKA_BOOTSTRAP", "127.0.0.1:9092"),
            ("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
            ("KAFKA_BROKERS", "kafka-1:9092,kafka-2:9092"),
            ("KAFKA_NUM_PARTITIONS", "3"),
        ],
    );
    let node = describe(&broker, BROKER, "1");
    assert_eq!(entry(&node, "num.partitions"), (Some("3".into()), 4));
    crate::common::assert_round_trip(&broker.bootstrap(), "env-ignored");
    let log = broker.log();
    for variable in [
        "KAFKA_BOOTSTRAP",
        "KAFKA_BOOTSTRAP_SERVERS",
        "KAFKA_BROKERS",
    ] {
        let needle = format!("variable=\"{variable}\"");
        let lines = log.lines().filter(|l| l.contains(&needle)).count();
        assert_eq!(lines, 1, "{variable} logged once:\n{log}");
    }
    assert!(!log.contains("kafka-1:9092"), "a value was logged:\n{log}");
}

// `--config FILE` (Kafka's server.properties format, or TOML by extension) sits under the
// LOGBOOK_* variables and the flags: the file's num.partitions loses to the flag, its
// log.segment.bytes to the variable, its message.max.bytes holds. Its keys are reported as
// STATIC_BROKER_CONFIG; Kafka's thread-pool keys are accepted and logged as ignored; a bad
// key or value stops the start naming the file, the key and the value.
#[test]
fn config_file_under_environment_and_flags() {
    let dir = tempfile::tempdir().expect("temp dir");
    let properties = dir.path().join("server.properties");
    std::fs::write(
        &properties,
        "# as Kafka writes it\nnum.partitions=5\nlog.segment.bytes = 2048\n\
         message.max.bytes: 5000\nlog.retention.hours=2\nnum.io.threads=8\n",
    )
    .expect("write the config file");
    let path = properties.to_str().expect("utf-8");
    let broker = Broker::start_with_env(
        &["--config", path, "--num-partitions", "3"],
        &[("LOGBOOK_LOG_SEGMENT_BYTES", "4096")],
    );
    let node = describe(&broker, BROKER, "1");
    assert_eq!(entry(&node, "num.partitions"), (Some("3".into()), 4));
    assert_eq!(entry(&node, "log.segment.bytes"), (Some("4096".into()), 4));
    assert_eq!(entry(&node, "message.max.bytes"), (Some("5000".into()), 4));
    assert_eq!(
        entry(&node, "log.retention.ms"),
        (Some("7200000".into()), 4)
    );
    let log = broker.log();
    assert!(
        log.contains("num.io.threads=8") && log.contains("ignored"),
        "no word of the ignored key in the log:\n{log}"
    );
    drop(broker);

    let toml = dir.path().join("logbook.toml");
    std::fs::write(
        &toml,
        "\"num.partitions\" = 6\n[log]\n\"segment.bytes\" = 8192\n",
    )
    .expect("write the TOML file");
    let broker = Broker::start_with(&["--config", toml.to_str().expect("utf-8")]);
    let node = describe(&broker, BROKER, "1");
    assert_eq!(entry(&node, "num.partitions"), (Some("6".into()), 4));
    assert_eq!(entry(&node, "log.segment.bytes"), (Some("8192".into()), 4));
    drop(broker);

    let refused = |text: &str, name: &str| {
        let file = dir.path().join(name);
        std::fs::write(&file, text).expect("write the bad file");
        let out = std::process::Command::new(integration_tests::broker_binary())
            .args([
                "--data-dir",
                dir.path().join("data").to_str().expect("utf-8"),
            ])
            .args(["--listen", "127.0.0.1:0", "--config"])
            .arg(&file)
            .output()
            .expect("run the broker");
        assert_eq!(out.status.code(), Some(1), "started with {text:?}");
        (file, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (file, stderr) = refused("no.such.key=1\n", "unknown.properties");
    assert!(
        stderr.contains(&format!(
            "config file {}: unknown broker config 'no.such.key' (value '1')",
            file.display()
        )),
        "{stderr}"
    );
    let (_, stderr) = refused("num.partitions=many\n", "bad.properties");
    assert!(
        stderr.contains("invalid value 'many' for broker config num.partitions")
            && stderr.contains("allowed: an integer >= 1"),
        "{stderr}"
    );
    let (_, stderr) = refused("[log\n", "broken.toml");
    assert!(stderr.contains("broken.toml"), "{stderr}");
}

// A second broker on a data directory a running broker holds is refused, naming the
// holder; once the first is gone (even by SIGKILL) the directory is free again.
#[test]
fn a_held_data_dir_is_refused() {
    let mut broker = Broker::start();
    let second = std::process::Command::new(integration_tests::broker_binary())
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(broker.data_dir())
        .output()
        .expect("run a second broker");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "data directory {} is in use by another process (pid {})",
            broker.data_dir().display(),
            broker.pid()
        )),
        "{stderr}"
    );
    broker.kill();
    broker.restart();
    assert_round_trip(&broker.bootstrap(), "after-the-lock");
}

// `logbook healthcheck` (the Docker image's HEALTHCHECK) answers 0 for a serving broker
// and 1, with the reason, for a port nobody listens on.
#[test]
fn healthcheck_exit_codes() {
    let broker = Broker::start();
    let check = |listen: &str| {
        std::process::Command::new(integration_tests::broker_binary())
            .args(["healthcheck", "--listen", listen, "--timeout-ms", "2000"])
            .output()
            .expect("run the healthcheck")
    };
    let healthy = check(&broker.bootstrap());
    assert_eq!(healthy.status.code(), Some(0), "{healthy:?}");
    drop(broker);
    let closed = check(&format!("127.0.0.1:{}", integration_tests::free_port()));
    assert_eq!(closed.status.code(), Some(1), "{closed:?}");
    assert!(
        String::from_utf8_lossy(&closed.stderr).contains("logbook healthcheck: 127.0.0.1:"),
        "{closed:?}"
    );
}

// `--log-format json`: every log line is one JSON object with Kafka-collector-friendly
// fields (timestamp, level, message), the startup line among them.
#[test]
fn json_logs_are_one_object_per_line() {
    let broker = Broker::start_with(&["--log-format", "json"]);
    assert_round_trip(&broker.bootstrap(), "json-logs");
    let log = broker.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["fields"]["message"] == "accepting connections"
                && l["level"] == "INFO"
                && l["timestamp"].is_string()),
        "no startup line in:\n{log}"
    );
}
