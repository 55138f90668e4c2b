use std::collections::BTreeMap;

use super::*;
use crate::records::BrokerEndpoint;
use crate::{ConfigResource, MetadataImage};

/// `topics.json` as `broker/src/topics.rs` writes it (`PersistedRegistry`; a topic's
/// `config` is `TopicConfig`, a struct with one `overrides` map).
const TOPICS_JSON: &str = r#"{
  "cluster_id": "q1Sh-9_ISia_zwGINzRvyQ",
  "topics": [
    {
      "name": "orders",
      "id": "2b3c7e5a-52e4-4f0e-9a43-2f1d0c9e7a11",
      "partitions": 3,
      "config": { "overrides": { "cleanup.policy": "compact", "retention.ms": "86400000" } }
    },
    {
      "name": "__consumer_offsets",
      "id": "0c1f0d56-8d2a-4a3e-b0a5-6f3c2b1a9e00",
      "partitions": 2,
      "config": { "overrides": { "cleanup.policy": "compact" } }
    }
  ]
}"#;

/// `broker_configs.json` (`DynamicBrokerConfigs`).
const BROKER_CONFIGS_JSON: &str = r#"{ "node": { "log.cleaner.threads": "2" }, "cluster_default": { "log.retention.ms": "1000" } }"#;

/// `producer-id-block`: the end of the last reserved block.
const PRODUCER_ID_BLOCK: &str = "3000";

fn map(value: &serde_json::Value) -> BTreeMap<String, String> {
    value
        .as_object()
        .map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), v.as_str().expect("string value").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// What next session's broker code will do: read the three files and the epoch
/// checkpoints into a `LegacyState`.
fn legacy_from_files(epochs: &BTreeMap<(&str, i32), i32>) -> LegacyState {
    let topics: serde_json::Value = serde_json::from_str(TOPICS_JSON).expect("topics.json");
    let brokers: serde_json::Value =
        serde_json::from_str(BROKER_CONFIGS_JSON).expect("broker_configs.json");
    LegacyState {
        cluster_id: topics["cluster_id"]
            .as_str()
            .expect("cluster id")
            .to_string(),
        registration: RegisterBrokerRecord {
            broker_id: 1,
            incarnation_id: Uuid::from_u128(42),
            broker_epoch: 0,
            endpoints: vec![BrokerEndpoint {
                name: "PLAINTEXT".to_string(),
                host: "127.0.0.1".to_string(),
                port: 9092,
                security_protocol: 0,
            }],
            rack: None,
            fenced: true,
            in_controlled_shutdown: false,
            partitions_max: None,
        },
        features: vec![FeatureLevelRecord {
            name: "metadata.version".to_string(),
            level: 1,
        }],
        topics: topics["topics"]
            .as_array()
            .expect("topics")
            .iter()
            .map(|t| {
                let name = t["name"].as_str().expect("name").to_string();
                LegacyTopic {
                    id: t["id"].as_str().expect("id").parse().expect("uuid"),
                    partitions: i32::try_from(t["partitions"].as_i64().expect("count"))
                        .expect("i32"),
                    config: map(&t["config"]["overrides"]),
                    latest_leader_epochs: epochs
                        .iter()
                        .filter(|((topic, _), _)| *topic == name)
                        .map(|((_, p), e)| (*p, *e))
                        .collect(),
                    name,
                }
            })
            .collect(),
        broker_configs: map(&brokers["node"]),
        cluster_default_configs: map(&brokers["cluster_default"]),
        producer_id_block_end: Some(PRODUCER_ID_BLOCK.trim().parse().expect("block end")),
    }
}

// A recorded single-node state becomes one batch that keeps the cluster id, topic ids,
// partition counts, configs (topic, broker, cluster default), the producer id block end and
// each partition's leader epoch; this node is every partition's only replica and leader.
#[test]
fn migrates_a_recorded_single_node_state() {
    let epochs = BTreeMap::from([
        (("orders", 0), 4),
        (("orders", 2), 0),
        (("__consumer_offsets", 0), 2),
    ]);
    let legacy = legacy_from_files(&epochs);
    let batch = from_legacy(&legacy).expect("migrate");

    let orders: Uuid = "2b3c7e5a-52e4-4f0e-9a43-2f1d0c9e7a11"
        .parse()
        .expect("uuid");
    let offsets: Uuid = "0c1f0d56-8d2a-4a3e-b0a5-6f3c2b1a9e00"
        .parse()
        .expect("uuid");
    let p = |topic_id, partition_id, leader_epoch| {
        MetadataRecord::Partition(PartitionRecord {
            topic_id,
            partition_id,
            replicas: vec![1],
            isr: vec![1],
            removing_replicas: vec![],
            adding_replicas: vec![],
            leader: 1,
            leader_epoch,
            partition_epoch: 0,
            leader_recovery_state: LeaderRecoveryState::Recovered,
            elr: vec![],
            last_known_elr: vec![],
        })
    };
    let c = |resource_type, resource_name: &str, name: &str, value: &str| {
        MetadataRecord::Config(ConfigRecord {
            resource_type,
            resource_name: resource_name.to_string(),
            name: name.to_string(),
            value: Some(value.to_string()),
        })
    };
    let expected = vec![
        MetadataRecord::ClusterId(ClusterIdRecord {
            cluster_id: "q1Sh-9_ISia_zwGINzRvyQ".to_string(),
        }),
        MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: "metadata.version".to_string(),
            level: 1,
        }),
        MetadataRecord::RegisterBroker(legacy.registration.clone()),
        // Topics sorted by name: "__consumer_offsets" < "orders".
        MetadataRecord::Topic(TopicRecord {
            name: "__consumer_offsets".to_string(),
            topic_id: offsets,
        }),
        p(offsets, 0, 2),
        p(offsets, 1, 0),
        c(
            ConfigResourceType::Topic,
            "__consumer_offsets",
            "cleanup.policy",
            "compact",
        ),
        MetadataRecord::Topic(TopicRecord {
            name: "orders".to_string(),
            topic_id: orders,
        }),
        p(orders, 0, 4),
        p(orders, 1, 0),
        p(orders, 2, 0),
        c(
            ConfigResourceType::Topic,
            "orders",
            "cleanup.policy",
            "compact",
        ),
        c(
            ConfigResourceType::Topic,
            "orders",
            "retention.ms",
            "86400000",
        ),
        c(ConfigResourceType::Broker, "1", "log.cleaner.threads", "2"),
        c(ConfigResourceType::Broker, "", "log.retention.ms", "1000"),
        MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id: 1,
            broker_epoch: 0,
            next_producer_id: 3000,
        }),
    ];
    assert_eq!(batch.0, expected);

    // And the image it gives answers as the old files did.
    let (image, delta) = MetadataImage::empty().apply(0, &batch);
    assert_eq!(delta.rejected, None);
    assert_eq!(image.cluster_id(), Some("q1Sh-9_ISia_zwGINzRvyQ"));
    assert_eq!(
        image.topic("orders").map(|t| (t.id, t.partitions.len())),
        Some((orders, 3))
    );
    assert_eq!(image.partition(&orders, 0).map(|p| p.leader_epoch), Some(4));
    assert_eq!(image.topic_configs("orders").len(), 2);
    assert_eq!(
        image
            .configs(&ConfigResource::broker(1))
            .get("log.cleaner.threads")
            .map(String::as_str),
        Some("2")
    );
    assert_eq!(image.cluster_default_configs().len(), 1);
    assert_eq!(image.next_producer_id(), 3000);
}

// The input order of topics does not matter (one deterministic batch), a negative epoch
// (an empty checkpoint's -1) starts at 0, and no producer-id-block file means no block.
#[test]
fn deterministic_and_defaults() {
    let mut legacy = legacy_from_files(&BTreeMap::from([(("orders", 1), -1)]));
    let forward = from_legacy(&legacy).expect("migrate");
    legacy.topics.reverse();
    assert_eq!(from_legacy(&legacy).expect("migrate"), forward);
    legacy.producer_id_block_end = None;
    let batch = from_legacy(&legacy).expect("migrate");
    assert!(!batch
        .0
        .iter()
        .any(|r| matches!(r, MetadataRecord::ProducerIds(_))));
    let (image, _) = MetadataImage::empty().apply(0, &batch);
    let orders = image.topic("orders").expect("orders");
    assert!(orders.partitions.iter().all(|p| p.leader_epoch == 0));
    assert_eq!(image.next_producer_id(), 0);
}

// A state the image would refuse is refused before anything is written.
#[test]
fn invalid_legacy_state_is_an_error() {
    let mut legacy = legacy_from_files(&BTreeMap::new());
    let mut twin = legacy.topics[0].clone();
    twin.id = Uuid::from_u128(7);
    legacy.topics.push(twin);
    assert_eq!(
        from_legacy(&legacy),
        Err(Error::TopicAlreadyExists {
            name: "orders".to_string()
        })
    );
    let mut legacy = legacy_from_files(&BTreeMap::new());
    legacy.topics[0].partitions = 0;
    assert_eq!(
        from_legacy(&legacy),
        Err(Error::InvalidPartitions { partitions: 0 })
    );
}
