//! DescribeCluster (60), DescribeLogDirs (35), DescribeTopicPartitions (75) and
//! ElectLeaders (43) by raw requests (rdkafka's AdminClient has none of them), checked
//! against what Metadata says and what is on disk.

use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeLogDirsRequest, DescribeLogDirsResponse,
    DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, ElectLeadersRequest,
    ElectLeadersResponse, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use integration_tests::Broker;

use crate::common::{create_topic, produce_ok, Record};
use crate::wire::{connect, round_trip};

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

fn metadata(broker: &Broker) -> MetadataResponse {
    let mut stream = connect(broker.addr());
    round_trip(
        &mut stream,
        12,
        1,
        &MetadataRequest::default().with_topics(None),
    )
}

/// Kafka's cluster operations without an authorizer (as Metadata reports them).
const CLUSTER_OPERATIONS_ALL: i32 = 8096;
/// Kafka's topic operations without an authorizer.
const TOPIC_OPERATIONS_ALL: i32 = 3576;

// DescribeCluster names the cluster id and controller Metadata names, this broker with
// its host and port and no rack; authorized operations only when asked (else i32::MIN);
// a request for controller endpoints is UNSUPPORTED_ENDPOINT_TYPE (115).
#[test]
fn describe_cluster() {
    let broker = Broker::start();
    let meta = metadata(&broker);
    let mut stream = connect(broker.addr());
    for version in 0..=2 {
        for include in [false, true] {
            let request = DescribeClusterRequest::default()
                .with_include_cluster_authorized_operations(include)
                .with_endpoint_type(1);
            let response = round_trip(&mut stream, version, 2, &request);
            assert_eq!(response.error_code, 0);
            assert_eq!(
                response.cluster_id,
                meta.cluster_id.clone().expect("cluster id")
            );
            assert_eq!(response.controller_id, meta.controller_id);
            assert_eq!(response.brokers.len(), 1);
            let b = &response.brokers[0];
            assert_eq!(b.broker_id, meta.brokers[0].node_id);
            assert_eq!(b.host.as_str(), "127.0.0.1");
            assert_eq!(b.port, i32::from(broker.addr().port()));
            assert_eq!(b.rack, None);
            assert!(!b.is_fenced);
            let ops = if include {
                CLUSTER_OPERATIONS_ALL
            } else {
                i32::MIN
            };
            assert_eq!(response.cluster_authorized_operations, ops);
        }
    }
    let response = round_trip(
        &mut stream,
        1,
        3,
        &DescribeClusterRequest::default().with_endpoint_type(2),
    );
    assert_eq!(response.error_code, 115);
}

/// Sum of the `.log` file sizes of `topic`-`partition` on disk.
fn log_bytes(broker: &Broker, topic: &str, partition: i32) -> i64 {
    std::fs::read_dir(broker.data_dir().join(format!("{topic}-{partition}")))
        .expect("partition dir")
        .filter_map(|e| {
            let e = e.ok()?;
            let is_log = e.file_name().to_string_lossy().ends_with(".log");
            is_log.then(|| {
                e.metadata()
                    .ok()
                    .map(|m| i64::try_from(m.len()).expect("fits"))
            })?
        })
        .sum()
}

// DescribeLogDirs: one log dir, the absolute data directory; per partition its size is
// the bytes of its segment files on disk and its offset lag 0; v4 has the file system's
// total and usable bytes; a topic filter lists only the partitions asked for.
#[test]
fn describe_log_dirs() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "dirs", 2, &[("segment.bytes", "1024")]);
    let records: Vec<Record> = (0..40)
        .map(|i| Record::new(0, format!("k{i}"), "value"))
        .collect();
    produce_ok(
        &bootstrap,
        "dirs",
        &records,
        &[("linger.ms", "0"), ("batch.num.messages", "1")],
    );
    let expected_dir = std::path::absolute(broker.data_dir()).expect("absolute");
    let mut stream = connect(broker.addr());
    let all: DescribeLogDirsResponse = round_trip(
        &mut stream,
        4,
        1,
        &DescribeLogDirsRequest::default().with_topics(None),
    );
    assert_eq!(all.error_code, 0);
    assert_eq!(all.results.len(), 1);
    let dir = &all.results[0];
    assert_eq!(dir.error_code, 0);
    assert_eq!(dir.log_dir.as_str(), expected_dir.display().to_string());
    assert!(dir.total_bytes > 0 && dir.usable_bytes > 0 && dir.usable_bytes <= dir.total_bytes);
    let topic = dir
        .topics
        .iter()
        .find(|t| t.name.as_str() == "dirs")
        .expect("dirs listed");
    let sizes: Vec<(i32, i64, i64, bool)> = topic
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                p.partition_size,
                p.offset_lag,
                p.is_future_key,
            )
        })
        .collect();
    let p0 = log_bytes(&broker, "dirs", 0);
    assert!(p0 > 1024, "partition 0 has {p0} bytes");
    assert_eq!(sizes, vec![(0, p0, 0, false), (1, 0, 0, false)]);

    let only: DescribeLogDirsResponse = round_trip(
        &mut stream,
        1,
        2,
        &DescribeLogDirsRequest::default().with_topics(Some(vec![
            DescribableLogDirTopic::default()
                .with_topic(name("dirs"))
                .with_partitions(vec![0]),
        ])),
    );
    let dir = &only.results[0];
    assert_eq!(dir.topics.len(), 1);
    assert_eq!(dir.topics[0].partitions.len(), 1);
    assert_eq!(dir.topics[0].partitions[0].partition_index, 0);
    assert_eq!(dir.topics[0].partitions[0].partition_size, p0);
}

fn describe_partitions(
    broker: &Broker,
    topics: &[&str],
    limit: i32,
    cursor: Option<(&str, i32)>,
) -> DescribeTopicPartitionsResponse {
    let mut stream = connect(broker.addr());
    let request = DescribeTopicPartitionsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|t| TopicRequest::default().with_name(name(t)))
                .collect(),
        )
        .with_response_partition_limit(limit)
        .with_cursor(cursor.map(|(t, p)| {
            Cursor::default()
                .with_topic_name(name(t))
                .with_partition_index(p)
        }));
    round_trip(&mut stream, 0, 1, &request)
}

/// (topic, error, [partition indexes]) per topic.
type TopicPage = Vec<(String, i16, Vec<i32>)>;

/// Each topic's page, and the next cursor (topic, partition).
fn pages(response: &DescribeTopicPartitionsResponse) -> (TopicPage, Option<(String, i32)>) {
    let topics = response
        .topics
        .iter()
        .map(|t| {
            (
                t.name.as_ref().map(|n| n.to_string()).unwrap_or_default(),
                t.error_code,
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        })
        .collect();
    let cursor = response
        .next_cursor
        .as_ref()
        .map(|c| (c.topic_name.to_string(), c.partition_index));
    (topics, cursor)
}

// DescribeTopicPartitions pages through named topics in name order, response_partition_limit
// partitions at a time, with Kafka's cursor; an unknown name gets UNKNOWN_TOPIC_OR_PARTITION
// (3); with no names every topic is listed; each partition has this broker as leader,
// replica and ISR, empty ELR lists, and the topic the id Metadata gives it.
#[test]
fn describe_topic_partitions() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "dtp-a", 3, &[]);
    create_topic(&bootstrap, "dtp-b", 2, &[]);
    let names = ["dtp-b", "missing", "dtp-a"];
    let s = |v: &str| v.to_owned();

    let first = describe_partitions(&broker, &names, 2, None);
    assert_eq!(
        pages(&first),
        (vec![(s("dtp-a"), 0, vec![0, 1])], Some((s("dtp-a"), 2)))
    );
    let second = describe_partitions(&broker, &names, 2, Some(("dtp-a", 2)));
    assert_eq!(
        pages(&second),
        (
            vec![(s("dtp-a"), 0, vec![2]), (s("dtp-b"), 0, vec![0])],
            Some((s("dtp-b"), 1))
        )
    );
    let third = describe_partitions(&broker, &names, 2, Some(("dtp-b", 1)));
    assert_eq!(
        pages(&third),
        (
            vec![(s("dtp-b"), 0, vec![1]), (s("missing"), 3, vec![])],
            None
        )
    );
    // The cursor's topic must be among the names asked for.
    let refused = describe_partitions(&broker, &["dtp-a"], 2, Some(("dtp-b", 0)));
    assert_eq!(pages(&refused).0, vec![(s("dtp-a"), 42, vec![])]);

    let everything = describe_partitions(&broker, &[], 100, None);
    assert_eq!(
        pages(&everything),
        (
            vec![(s("dtp-a"), 0, vec![0, 1, 2]), (s("dtp-b"), 0, vec![0, 1])],
            None
        )
    );
    let meta = metadata(&broker);
    let node = meta.brokers[0].node_id;
    for topic in &everything.topics {
        let name = topic.name.as_ref().expect("name");
        let listed = meta
            .topics
            .iter()
            .find(|t| t.name.as_ref() == Some(name))
            .expect("in metadata");
        assert_eq!(topic.topic_id, listed.topic_id);
        assert!(!topic.is_internal);
        assert_eq!(topic.topic_authorized_operations, TOPIC_OPERATIONS_ALL);
        for p in &topic.partitions {
            assert_eq!(p.error_code, 0);
            assert_eq!(p.leader_id, node);
            assert_eq!(p.leader_epoch, listed.partitions[0].leader_epoch);
            assert_eq!(p.replica_nodes, vec![node]);
            assert_eq!(p.isr_nodes, vec![node]);
            assert_eq!(p.eligible_leader_replicas, Some(vec![]));
            assert_eq!(p.last_known_elr, Some(vec![]));
            assert_eq!(p.offline_replicas, Vec::<BrokerId>::new());
        }
    }
}

fn elect(
    broker: &Broker,
    version: i16,
    partitions: Option<Vec<(&str, Vec<i32>)>>,
) -> ElectLeadersResponse {
    let mut stream = connect(broker.addr());
    let request = ElectLeadersRequest::default()
        .with_election_type(0)
        .with_timeout_ms(5_000)
        .with_topic_partitions(partitions.map(|list| {
            list.into_iter()
                .map(|(t, p)| {
                    TopicPartitions::default()
                        .with_topic(name(t))
                        .with_partitions(p)
                })
                .collect()
        }));
    round_trip(&mut stream, version, 1, &request)
}

// ElectLeaders on a single node: the preferred leader already leads, so
// ELECTION_NOT_NEEDED (84); an unknown partition or topic UNKNOWN_TOPIC_OR_PARTITION (3)
// with the message of Kafka's controller, which `kafka-leader-election.sh` prints (Logbook
// said "unknown topic or partition nope-0" for both); null partitions list every topic
// with no partition results (Kafka leaves out those needing no election).
#[test]
fn elect_leaders() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "el-a", 2, &[]);
    create_topic(&bootstrap, "el-b", 1, &[]);
    for version in 0..=2 {
        let response = elect(
            &broker,
            version,
            Some(vec![("el-a", vec![0, 1, 9]), ("nope", vec![0])]),
        );
        assert_eq!(response.error_code, 0);
        let results: Vec<(String, Vec<(i32, i16, Option<String>)>)> = response
            .replica_election_results
            .iter()
            .map(|r| {
                (
                    r.topic.to_string(),
                    r.partition_result
                        .iter()
                        .map(|p| {
                            (
                                p.partition_id,
                                p.error_code,
                                p.error_message.as_ref().map(ToString::to_string),
                            )
                        })
                        .collect(),
                )
            })
            .collect();
        let not_needed = || Some("Leader election not needed for topic partition.".to_owned());
        assert_eq!(
            results,
            vec![
                (
                    "el-a".to_owned(),
                    vec![
                        (0, 84, not_needed()),
                        (1, 84, not_needed()),
                        (9, 3, Some("No such partition as el-a-9".to_owned()))
                    ]
                ),
                (
                    "nope".to_owned(),
                    vec![(0, 3, Some("No such topic as nope".to_owned()))]
                ),
            ]
        );
    }
    let all = elect(&broker, 2, None);
    let topics: Vec<(String, usize)> = all
        .replica_election_results
        .iter()
        .map(|r| (r.topic.to_string(), r.partition_result.len()))
        .collect();
    assert_eq!(topics, vec![("el-a".to_owned(), 0), ("el-b".to_owned(), 0)]);
}
