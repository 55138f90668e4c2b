//! Metadata answers as Kafka gives them: this node as broker, controller and
//! leader of every partition, topic ids, unknown topics, and the authorized
//! operations bitfields that kafka-python's admin client decodes.

use integration_tests::Broker;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    BrokerId, DescribeGroupsRequest, DescribeGroupsResponse, GroupId, MetadataRequest,
    MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::common::create_topic;
use crate::wire;

/// Kafka's answer when authorized operations were not requested (INT32_MIN).
const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;
/// Topic operations Kafka reports without an authorizer: READ(3), WRITE(4),
/// CREATE(5), DELETE(6), ALTER(7), DESCRIBE(8), DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11).
const TOPIC_OPERATIONS_ALL: i32 =
    (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 10) | (1 << 11);
/// Cluster operations Kafka reports without an authorizer: CREATE(5), ALTER(7),
/// DESCRIBE(8), CLUSTER_ACTION(9), DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11), IDEMPOTENT_WRITE(12).
const CLUSTER_OPERATIONS_ALL: i32 =
    (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12);
/// Group operations Kafka 4.4 reports without an authorizer: READ(3), DELETE(6),
/// DESCRIBE(8), DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11) = 3400.
const GROUP_OPERATIONS_ALL: i32 = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11);

/// A Metadata request for `topics` (None = all) at `version` over a raw socket.
fn metadata(
    broker: &Broker,
    version: i16,
    topics: Option<&[&str]>,
    authorized_operations: bool,
) -> MetadataResponse {
    let request = MetadataRequest::default()
        .with_topics(topics.map(|names| {
            names
                .iter()
                .map(|n| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string((*n).to_owned()))))
                })
                .collect()
        }))
        .with_allow_auto_topic_creation(false)
        .with_include_cluster_authorized_operations(authorized_operations && version <= 10)
        .with_include_topic_authorized_operations(authorized_operations);
    let mut stream = wire::connect(broker.addr());
    wire::round_trip(&mut stream, version, 5, &request)
}

#[test]
fn single_node_is_broker_controller_and_leader() {
    // Proves: Metadata v12 from a broker started with --node-id 7 lists exactly
    // one broker (7, 127.0.0.1, its port), controller 7, and for a 3-partition
    // topic partitions 0..3 with leader 7, replicas [7], isr [7], no error,
    // not internal, a non-nil topic id; an unknown topic answers
    // UNKNOWN_TOPIC_OR_PARTITION (3) and is not created.
    let broker = Broker::start_with(&["--node-id", "7"]);
    create_topic(&broker.bootstrap(), "meta", 3, &[]);
    let response = metadata(&broker, 12, Some(&["meta", "absent"]), false);

    let brokers: Vec<(i32, String, i32)> = response
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.as_str().to_owned(), b.port))
        .collect();
    assert_eq!(
        brokers,
        vec![(7, "127.0.0.1".to_owned(), i32::from(broker.addr().port()))]
    );
    assert_eq!(response.controller_id, BrokerId(7), "controller id");

    assert_eq!(response.topics.len(), 2, "one entry per requested topic");
    let meta = response
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some("meta"))
        .expect("meta in the answer");
    assert_eq!(meta.error_code, 0);
    assert!(!meta.is_internal);
    assert!(
        !meta.topic_id.is_nil(),
        "topic id must be set from Metadata v10 on"
    );
    // (partition, error code, leader, replicas, isr)
    type PartitionView = (i32, i16, i32, Vec<i32>, Vec<i32>);
    let mut partitions: Vec<PartitionView> = meta
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                p.error_code,
                p.leader_id.0,
                p.replica_nodes.iter().map(|b| b.0).collect(),
                p.isr_nodes.iter().map(|b| b.0).collect(),
            )
        })
        .collect();
    partitions.sort();
    assert_eq!(
        partitions,
        (0..3)
            .map(|i| (i, 0, 7, vec![7], vec![7]))
            .collect::<Vec<_>>()
    );

    let absent = response
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some("absent"))
        .expect("absent in the answer");
    assert_eq!(absent.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    assert!(absent.partitions.is_empty());
    // Internal topics (__consumer_offsets, which a broker may create at
    // start) are left out of the count.
    let all = metadata(&broker, 12, None, false);
    for topic in &all.topics {
        let name = topic.name.as_ref().map_or("", |n| n.0.as_str());
        if name == "__consumer_offsets" || name == "__transaction_state" {
            assert!(topic.is_internal, "{name} must be marked internal");
        }
    }
    let user_topics: Vec<&str> = all
        .topics
        .iter()
        .filter(|t| !t.is_internal)
        .filter_map(|t| t.name.as_ref().map(|n| n.0.as_str()))
        .collect();
    assert_eq!(
        user_topics,
        vec!["meta"],
        "Metadata with allow_auto_topic_creation=false created a topic"
    );
}

#[test]
fn authorized_operations_bitfields() {
    // Proves: Metadata v8 with include_cluster/topic_authorized_operations=true
    // answers the bitfields Kafka gives without an authorizer (cluster 8096,
    // topic 3576), v12 gives the topic bitfield, DescribeGroups v5 the group bitfield
    // (3400), and without the flags both are
    // INT32_MIN. kafka-python's KafkaAdminClient.list_topics() sends v8 with
    // the flags set and fails to decode bit 31.
    let broker = Broker::start();
    create_topic(&broker.bootstrap(), "ops", 1, &[]);

    let v8 = metadata(&broker, 8, Some(&["ops"]), true);
    assert_eq!(
        v8.cluster_authorized_operations, CLUSTER_OPERATIONS_ALL,
        "v8 cluster operations"
    );
    assert_eq!(
        v8.topics[0].topic_authorized_operations, TOPIC_OPERATIONS_ALL,
        "v8 topic operations"
    );

    let v12 = metadata(&broker, 12, Some(&["ops"]), true);
    assert_eq!(
        v12.topics[0].topic_authorized_operations, TOPIC_OPERATIONS_ALL,
        "v12 topic operations"
    );

    // DescribeGroups v5 lists the group operations Kafka 4.4 does (3400; 328 before groups
    // had DESCRIBE_CONFIGS and ALTER_CONFIGS).
    let mut stream = wire::connect(broker.addr());
    let groups: DescribeGroupsResponse = wire::round_trip(
        &mut stream,
        5,
        15,
        &DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(StrBytes::from_static_str("ops-group"))])
            .with_include_authorized_operations(true),
    );
    assert_eq!(
        (
            groups.groups[0].error_code,
            groups.groups[0].authorized_operations
        ),
        (0, GROUP_OPERATIONS_ALL),
        "DescribeGroups v5 group operations"
    );

    let v8_plain = metadata(&broker, 8, Some(&["ops"]), false);
    assert_eq!(
        v8_plain.cluster_authorized_operations,
        AUTHORIZED_OPERATIONS_OMITTED
    );
    assert_eq!(
        v8_plain.topics[0].topic_authorized_operations,
        AUTHORIZED_OPERATIONS_OMITTED
    );
}
