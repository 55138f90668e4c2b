//! A data directory of a single node from before the metadata quorum (its registry in
//! `__cluster_metadata/topics.json`, dynamic broker configs in `broker_configs.json`, the
//! producer-id block in `producer-id-block`) is migrated into the metadata log at the first
//! start: same cluster id, topic ids, partition counts and configs, the same records at the
//! same offsets, committed group offsets still readable, producer ids not reissued, and the
//! old files renamed `*.migrated` so they are never read again.

use std::path::Path;
use std::time::Duration;

use integration_tests::Broker;
use kafka_protocol::messages::{InitProducerIdRequest, MetadataRequest};
use rdkafka::admin::{ConfigResourceResult, OwnedResourceSpecifier, ResourceSpecifier};
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use crate::common::{
    self, admin, admin_options, block_on, consume, create_topic, produce_ok, Record,
};
use crate::wire;

const ARGS: [&str; 2] = ["--offsets-topic-num-partitions", "1"];

/// The cluster id and each topic's (name, id, partition count), from Metadata v12.
fn registry(broker: &Broker) -> (String, Vec<(String, uuid::Uuid, usize)>) {
    let mut stream = wire::connect(broker.addr());
    let response = wire::round_trip(
        &mut stream,
        12,
        1,
        &MetadataRequest::default().with_topics(None),
    );
    let mut topics: Vec<(String, uuid::Uuid, usize)> = response
        .topics
        .iter()
        .map(|t| {
            let name = t
                .name
                .as_ref()
                .map(|n| n.as_str().to_owned())
                .unwrap_or_default();
            (name, t.topic_id, t.partitions.len())
        })
        .collect();
    topics.sort();
    let cluster_id = response
        .cluster_id
        .map(|c| c.as_str().to_owned())
        .unwrap_or_default();
    (cluster_id, topics)
}

fn committed(bootstrap: &str) -> Option<Offset> {
    let consumer = common::consumer(bootstrap, &[("group.id", "legacy-g")]);
    let mut list = TopicPartitionList::new();
    list.add_partition("legacy", 0);
    let committed = consumer
        .committed_offsets(list, common::CLIENT_TIMEOUT)
        .expect("committed offsets");
    committed.find_partition("legacy", 0).map(|e| e.offset())
}

fn retention_ms(bootstrap: &str) -> Option<String> {
    let results = block_on(
        admin(bootstrap).describe_configs([&ResourceSpecifier::Topic("legacy")], &admin_options()),
    )
    .expect("DescribeConfigs");
    let config: &ConfigResourceResult = &results[0];
    let resource = config.as_ref().expect("topic config");
    assert_eq!(
        resource.specifier,
        OwnedResourceSpecifier::Topic("legacy".to_owned())
    );
    resource.get("retention.ms").and_then(|e| e.value.clone())
}

fn producer_id(broker: &Broker) -> i64 {
    let mut stream = wire::connect(broker.addr());
    let response = wire::round_trip(
        &mut stream,
        4,
        1,
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(kafka_protocol::messages::ProducerId(-1))
            .with_producer_epoch(-1),
    );
    assert_eq!(response.error_code, 0);
    response.producer_id.0
}

/// Turns a data dir into what a single node left before the quorum: no metadata log, the
/// registry and broker configs in their JSON files, the producer-id block end in its file.
fn make_legacy(data_dir: &Path, cluster_id: &str, topics: &[(String, uuid::Uuid, usize)]) {
    std::fs::remove_dir_all(data_dir.join("__cluster_metadata-0"))
        .expect("remove the metadata log");
    let metadata = data_dir.join("__cluster_metadata");
    std::fs::create_dir_all(&metadata).expect("metadata dir");
    let topics: Vec<serde_json::Value> = topics
        .iter()
        .map(|(name, id, partitions)| {
            let config = if name == "legacy" {
                serde_json::json!({"retention.ms": "123456789"})
            } else {
                serde_json::json!({
                    "cleanup.policy": "compact",
                    "compression.type": "producer",
                    "segment.bytes": "104857600"
                })
            };
            // `TopicConfig` is persisted as `{"overrides": {name: value}}`.
            serde_json::json!({
                "name": name,
                "id": id,
                "partitions": partitions,
                "config": {"overrides": config}
            })
        })
        .collect();
    let registry = serde_json::json!({"cluster_id": cluster_id, "topics": topics});
    std::fs::write(metadata.join("topics.json"), registry.to_string()).expect("topics.json");
    std::fs::write(
        metadata.join("broker_configs.json"),
        r#"{"node":{},"cluster_default":{"log.retention.ms":"999999999"}}"#,
    )
    .expect("broker_configs.json");
    std::fs::write(metadata.join("producer-id-block"), "5000").expect("producer-id-block");
}

#[test]
fn single_node_metadata_files_migrate_into_the_metadata_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut broker = Broker::start_in(dir.path(), &ARGS);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "legacy", 2, &[("retention.ms", "123456789")]);
    let p0: Vec<Record> = (0..3)
        .map(|i| Record::new(0, format!("k{i}"), format!("v{i}")))
        .collect();
    let p1: Vec<Record> = (0..2)
        .map(|i| Record::new(1, format!("x{i}"), format!("y{i}")))
        .collect();
    produce_ok(&bootstrap, "legacy", &p0, &[]);
    produce_ok(&bootstrap, "legacy", &p1, &[]);
    let consumer = common::consumer(&bootstrap, &[("group.id", "legacy-g")]);
    let mut commit = TopicPartitionList::new();
    commit
        .add_partition_offset("legacy", 0, Offset::Offset(2))
        .expect("commit list");
    consumer.commit(&commit, CommitMode::Sync).expect("commit");
    drop(consumer);
    let (cluster_id, topics) = registry(&broker);
    assert_eq!(
        topics
            .iter()
            .map(|(n, _, p)| (n.as_str(), *p))
            .collect::<Vec<_>>(),
        vec![("__consumer_offsets", 1), ("legacy", 2)]
    );
    let status = broker.terminate();
    assert!(status.success(), "{status}");
    make_legacy(dir.path(), &cluster_id, &topics);

    broker.restart();
    let metadata = dir.path().join("__cluster_metadata");
    for file in ["topics.json", "broker_configs.json", "producer-id-block"] {
        assert!(
            !metadata.join(file).exists(),
            "{file} is still there\n{}",
            broker.log_tail()
        );
        assert!(
            metadata.join(format!("{file}.migrated")).exists(),
            "{file}.migrated is missing"
        );
    }
    for round in ["after migration", "after another restart"] {
        assert_eq!(
            registry(&broker),
            (cluster_id.clone(), topics.clone()),
            "{round}"
        );
        let read = consume(&bootstrap, "legacy", 0, 0, 3, &[]);
        common::assert_records(&read, &p0, 0);
        let read = consume(&bootstrap, "legacy", 1, 0, 2, &[]);
        common::assert_records(&read, &p1, 0);
        assert_eq!(committed(&bootstrap), Some(Offset::Offset(2)), "{round}");
        assert_eq!(
            retention_ms(&bootstrap).as_deref(),
            Some("123456789"),
            "{round}"
        );
        let id = producer_id(&broker);
        assert!(
            id >= 5000,
            "producer id {id} {round}: ids below the old block end may be in use"
        );
        broker.restart();
        std::thread::sleep(Duration::from_millis(10));
    }
}
