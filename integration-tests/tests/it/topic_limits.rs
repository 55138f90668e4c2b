//! Topic creation is bounded and all-or-nothing: a request that would take the broker
//! past its partition limit (`--partitions-max`; each partition holds one file
//! descriptor) is refused before anything is created, and a creation that fails
//! half-way leaves no partition directory and no registry entry behind.

use std::path::Path;

use integration_tests::Broker;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::common::list_topics;
use crate::wire;

const POLICY_VIOLATION: i16 = 44;
const KAFKA_STORAGE_ERROR: i16 = 56;

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

/// CreateTopics v7; returns (name, error code, error message) per topic.
fn create(broker: &Broker, topics: &[(&str, i32)]) -> Vec<(String, i16, String)> {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(
            topics
                .iter()
                .map(|(name, partitions)| {
                    CreatableTopic::default()
                        .with_name(topic_name(name))
                        .with_num_partitions(*partitions)
                        .with_replication_factor(1)
                })
                .collect(),
        );
    let mut stream = wire::connect(broker.addr());
    wire::round_trip(&mut stream, 7, 1, &request)
        .topics
        .iter()
        .map(|t| {
            (
                t.name.0.as_str().to_owned(),
                t.error_code,
                t.error_message
                    .as_ref()
                    .map_or(String::new(), |m| m.as_str().to_owned()),
            )
        })
        .collect()
}

/// CreatePartitions v3 growing `name` to `count`; returns (error code, message).
fn grow(broker: &Broker, name: &str, count: i32) -> (i16, String) {
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![CreatePartitionsTopic::default()
            .with_name(topic_name(name))
            .with_count(count)
            // Null, as Kafka's admin client sends it without an assignment: an empty
            // list would have to place every new partition (INVALID_REPLICA_ASSIGNMENT).
            .with_assignments(None)]);
    let mut stream = wire::connect(broker.addr());
    let response = wire::round_trip(&mut stream, 3, 2, &request);
    let result = &response.results[0];
    (
        result.error_code,
        result
            .error_message
            .as_ref()
            .map_or(String::new(), |m| m.as_str().to_owned()),
    )
}

/// Metadata v12 naming `name` with auto-creation allowed; returns its error code.
fn auto_create(broker: &Broker, name: &str) -> i16 {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic_name(name)))
        ]))
        .with_allow_auto_topic_creation(true);
    let mut stream = wire::connect(broker.addr());
    wire::round_trip(&mut stream, 12, 3, &request).topics[0].error_code
}

/// Partition directories of `topic` in the data dir, sorted.
fn partition_dirs(data_dir: &Path, topic: &str) -> Vec<String> {
    let prefix = format!("{topic}-");
    let mut dirs: Vec<String> = std::fs::read_dir(data_dir)
        .expect("read data dir")
        .map(|e| e.expect("dir entry"))
        .filter(|e| e.file_type().expect("file type").is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.strip_prefix(&prefix)
                .is_some_and(|p| p.parse::<u32>().is_ok())
        })
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn partition_limit_is_checked_before_anything_is_created() {
    // Proves: with --partitions-max 20, CreateTopics asking for 21 partitions in
    // total (over two topics) answers POLICY_VIOLATION (44) for both topics, with a
    // message naming the limit, and creates no directory; 10 + 10 then succeeds; one
    // partition more — by CreatePartitions, CreateTopics or Metadata auto-creation —
    // is refused the same way; after a delete the freed partitions can be used.
    let broker = Broker::start_with(&["--partitions-max", "20"]);
    let data = broker.data_dir();

    let refused = create(&broker, &[("a", 10), ("b", 11)]);
    assert_eq!(refused.len(), 2);
    for (name, code, message) in &refused {
        assert_eq!(*code, POLICY_VIOLATION, "{name}: {message}");
        assert!(message.contains("partitions.max=20"), "{name}: {message}");
    }
    assert!(partition_dirs(data, "a").is_empty(), "a left directories");
    assert!(partition_dirs(data, "b").is_empty(), "b left directories");
    assert_eq!(list_topics(&broker.bootstrap()), vec![]);

    let created = create(&broker, &[("a", 10), ("b", 10)]);
    let codes: Vec<i16> = created.iter().map(|(_, code, _)| *code).collect();
    assert_eq!(codes, vec![0, 0]);

    let (code, message) = grow(&broker, "a", 11);
    assert_eq!(code, POLICY_VIOLATION, "{message}");
    assert!(message.contains("partitions.max=20"), "{message}");
    assert_eq!(partition_dirs(data, "a").len(), 10);

    let one_more = create(&broker, &[("c", 1)]);
    assert_eq!(one_more[0].1, POLICY_VIOLATION, "{}", one_more[0].2);
    assert_eq!(auto_create(&broker, "d"), POLICY_VIOLATION);
    assert!(partition_dirs(data, "c").is_empty());
    assert!(partition_dirs(data, "d").is_empty());

    let delete = DeleteTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![
            DeleteTopicState::default().with_name(Some(topic_name("b")))
        ]);
    let mut stream = wire::connect(broker.addr());
    let deleted = wire::round_trip(&mut stream, 6, 4, &delete);
    assert_eq!(deleted.responses[0].error_code, 0);
    assert_eq!(grow(&broker, "a", 20).0, 0);
    assert_eq!(list_topics(&broker.bootstrap()), vec![("a".to_owned(), 20)]);
}

#[test]
fn failed_creation_is_rolled_back() {
    // Proves: when creating a partition fails half-way (its directory path is
    // taken by a file), CreateTopics answers KAFKA_STORAGE_ERROR (56) and the
    // partitions already created are removed: no directory, no topic; the same for
    // CreatePartitions, which leaves the topic at its old size. Once the obstacle
    // is gone the same requests succeed.
    let mut broker = Broker::start();
    let data = broker.data_dir().to_path_buf();

    std::fs::write(data.join("roll-2"), b"in the way").expect("write obstacle");
    let refused = create(&broker, &[("roll", 4)]);
    assert_eq!(refused[0].1, KAFKA_STORAGE_ERROR, "{}", refused[0].2);
    assert_eq!(partition_dirs(&data, "roll"), Vec::<String>::new());
    assert!(
        data.join("roll-2").is_file(),
        "the obstacle is not ours to remove"
    );
    assert_eq!(list_topics(&broker.bootstrap()), vec![]);

    assert_eq!(create(&broker, &[("grow", 2)])[0].1, 0);
    std::fs::write(data.join("grow-3"), b"in the way").expect("write obstacle");
    let (code, message) = grow(&broker, "grow", 5);
    assert_eq!(code, KAFKA_STORAGE_ERROR, "{message}");
    assert_eq!(partition_dirs(&data, "grow"), vec!["grow-0", "grow-1"]);
    assert_eq!(
        list_topics(&broker.bootstrap()),
        vec![("grow".to_owned(), 2)]
    );

    std::fs::remove_file(data.join("roll-2")).expect("remove obstacle");
    std::fs::remove_file(data.join("grow-3")).expect("remove obstacle");
    assert_eq!(create(&broker, &[("roll", 4)])[0].1, 0);
    assert_eq!(grow(&broker, "grow", 5).0, 0);
    broker.restart();
    assert_eq!(
        list_topics(&broker.bootstrap()),
        vec![("grow".to_owned(), 5), ("roll".to_owned(), 4)]
    );
    assert_eq!(partition_dirs(&data, "roll").len(), 4);
}

#[test]
fn huge_requests_are_refused_at_once() {
    // Proves: with the default (derived) limit, one CreateTopics asking for 100,000
    // partitions and one CreatePartitions adding 10,001 get POLICY_VIOLATION (44)
    // at once, as Kafka's controller refuses more than 10,000 partitions per request,
    // leave no directory behind, and a normal creation afterwards works. Today the
    // first ran out of file descriptors after seconds with ~20,000 directories left.
    let broker = Broker::start();
    let data = broker.data_dir();
    let started = std::time::Instant::now();
    let refused = create(&broker, &[("huge", 100_000)]);
    assert_eq!(refused[0].1, POLICY_VIOLATION, "{}", refused[0].2);
    assert!(
        refused[0].2.contains("10000"),
        "the message names the limit: {}",
        refused[0].2
    );
    assert!(partition_dirs(data, "huge").is_empty());

    assert_eq!(create(&broker, &[("small", 1)])[0].1, 0);
    let (code, message) = grow(&broker, "small", 10_002);
    assert_eq!(code, POLICY_VIOLATION, "{message}");
    assert_eq!(partition_dirs(data, "small"), vec!["small-0"]);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "refusals took {:?}",
        started.elapsed()
    );
    assert_eq!(grow(&broker, "small", 3).0, 0);
    assert_eq!(
        list_topics(&broker.bootstrap()),
        vec![("small".to_owned(), 3)]
    );
}
