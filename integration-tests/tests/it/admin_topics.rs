//! Topic administration: CreateTopics / DeleteTopics error codes as Kafka
//! returns them, and topic metadata and data surviving restarts.

use std::path::Path;
use std::time::{Duration, Instant};

use integration_tests::Broker;
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::{BrokerId, CreateTopicsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::error::RDKafkaErrorCode;

use crate::common::{
    admin, admin_options, assert_records, block_on, consume, create_topic, create_topics,
    list_topics, produce_ok, wait_for_topics, Record,
};
use crate::wire;

/// Creates one topic through the AdminClient and returns its result.
fn try_create(
    bootstrap: &str,
    name: &str,
    partitions: i32,
    replication: i32,
    configs: &[(&str, &str)],
) -> Result<String, (String, RDKafkaErrorCode)> {
    let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(replication));
    for (key, value) in configs {
        topic = topic.set(key, value);
    }
    let mut results = create_topics(bootstrap, &[topic], &admin_options());
    assert_eq!(results.len(), 1, "one result per topic");
    results.remove(0)
}

/// Polls until `path` no longer exists; false if it still does after 5 s.
fn gone_within(path: &Path) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while path.exists() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

#[test]
fn create_with_partitions_and_configs_then_duplicate() {
    // Proves: CreateTopics with 4 partitions and valid configs (retention.ms,
    // cleanup.policy) succeeds and Metadata lists 4 partitions; creating it again
    // answers TOPIC_ALREADY_EXISTS (36).
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    let configs = [("retention.ms", "3600000"), ("cleanup.policy", "delete")];
    assert_eq!(
        try_create(&bootstrap, "four", 4, 1, &configs),
        Ok("four".to_owned())
    );
    wait_for_topics(&bootstrap, &[("four", 4)], "after create");
    assert_eq!(
        try_create(&bootstrap, "four", 4, 1, &configs),
        Err(("four".to_owned(), RDKafkaErrorCode::TopicAlreadyExists))
    );
    assert_eq!(
        list_topics(&bootstrap),
        vec![("four".to_owned(), 4)],
        "still 4 partitions"
    );
}

#[test]
fn invalid_topic_names() {
    // Proves: names with illegal characters, "." and "..", and names over 249
    // characters are refused with INVALID_TOPIC_EXCEPTION (17) and not created,
    // while a 249-character name of legal characters is accepted.
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    let too_long = "a".repeat(250);
    for name in ["bad/name", ".", "..", "sp ace", "ü", too_long.as_str()] {
        assert_eq!(
            try_create(&bootstrap, name, 1, 1, &[]),
            Err((name.to_owned(), RDKafkaErrorCode::InvalidTopic)),
            "topic name {name:?}"
        );
    }
    assert_eq!(
        list_topics(&bootstrap),
        Vec::<(String, usize)>::new(),
        "nothing was created"
    );
    let longest = format!("Legal._-{}", "z".repeat(241));
    assert_eq!(longest.len(), 249);
    assert_eq!(
        try_create(&bootstrap, &longest, 1, 1, &[]),
        Ok(longest.clone())
    );
}

#[test]
fn invalid_partitions_replication_and_config() {
    // Proves: num_partitions 0 -> INVALID_PARTITIONS (37); replication factor 3
    // on a single node -> INVALID_REPLICATION_FACTOR (38); an unknown config and
    // an invalid config value -> INVALID_CONFIG (40); none of them is created.
    // num_partitions -1 means "broker default" in CreateTopics v4+ (as in Kafka)
    // and creates the topic with --num-partitions partitions.
    let broker = Broker::start_with(&["--num-partitions", "2"]);
    let bootstrap = broker.bootstrap();
    assert_eq!(
        try_create(&bootstrap, "zero", 0, 1, &[]),
        Err(("zero".to_owned(), RDKafkaErrorCode::InvalidPartitions))
    );
    assert_eq!(
        try_create(&bootstrap, "rf3", 1, 3, &[]),
        Err(("rf3".to_owned(), RDKafkaErrorCode::InvalidReplicationFactor))
    );
    assert_eq!(
        try_create(
            &bootstrap,
            "unknown-config",
            1,
            1,
            &[("no.such.config", "1")]
        ),
        Err(("unknown-config".to_owned(), RDKafkaErrorCode::InvalidConfig))
    );
    assert_eq!(
        try_create(&bootstrap, "bad-value", 1, 1, &[("retention.ms", "soon")]),
        Err(("bad-value".to_owned(), RDKafkaErrorCode::InvalidConfig))
    );
    assert_eq!(
        try_create(
            &bootstrap,
            "bad-policy",
            1,
            1,
            &[("cleanup.policy", "shred")]
        ),
        Err(("bad-policy".to_owned(), RDKafkaErrorCode::InvalidConfig))
    );
    assert_eq!(
        list_topics(&bootstrap),
        Vec::<(String, usize)>::new(),
        "nothing was created"
    );
    assert_eq!(
        try_create(&bootstrap, "default-count", -1, -1, &[]),
        Ok("default-count".to_owned())
    );
    wait_for_topics(
        &bootstrap,
        &[("default-count", 2)],
        "num_partitions -1 uses --num-partitions",
    );
}

#[test]
fn raw_create_topics_negative_partitions() {
    // Proves: a raw CreateTopics v7 with num_partitions -2 (librdkafka refuses to
    // send it) answers INVALID_PARTITIONS (37) for that topic, and one with 0
    // partitions too; the response names each topic.
    let broker = Broker::start();
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(
            [("minus-two", -2), ("zero", 0)]
                .into_iter()
                .map(|(name, partitions)| {
                    CreatableTopic::default()
                        .with_name(TopicName(StrBytes::from_static_str(name)))
                        .with_num_partitions(partitions)
                        .with_replication_factor(1)
                })
                .collect(),
        );
    let mut stream = wire::connect(broker.addr());
    let response = wire::round_trip(&mut stream, 7, 3, &request);
    let answers: Vec<(String, i16)> = response
        .topics
        .iter()
        .map(|t| (t.name.0.as_str().to_owned(), t.error_code))
        .collect();
    assert_eq!(
        answers,
        vec![("minus-two".to_owned(), 37), ("zero".to_owned(), 37)]
    );
    assert_eq!(
        list_topics(&broker.bootstrap()),
        Vec::<(String, usize)>::new()
    );
}

#[test]
fn create_topics_error_messages_read_as_kafka_writes_them() {
    // Proves: CreateTopics' error_message for a duplicate and for each kind of illegal
    // name is the text Apache Kafka 4.x sends (checked against the reference broker):
    // `kafka-topics.sh --create` prints it verbatim ("Error while executing topic
    // command : <message>"), so scripts/kafka-tools-test compares it.
    let broker = Broker::start();
    create_topic(&broker.bootstrap(), "taken", 1, &[]);
    create_topic(&broker.bootstrap(), "metric_name", 1, &[]);
    let too_long = "a".repeat(250);
    let cases = [
        ("taken", 36, "Topic 'taken' already exists.".to_owned()),
        // Only `.` against `_` apart: the two would share metric names (Kafka's
        // `Topic.hasCollision`).
        (
            "metric.name",
            17,
            "Topic 'metric.name' collides with existing topic: metric_name".to_owned(),
        ),
        (
            "bad/name",
            17,
            "Topic name is invalid: 'bad/name' contains one or more characters other than \
             ASCII alphanumerics, '.', '_' and '-'"
                .to_owned(),
        ),
        (
            ".",
            17,
            "Topic name is invalid: '.' is not allowed".to_owned(),
        ),
        (
            "..",
            17,
            "Topic name is invalid: '..' is not allowed".to_owned(),
        ),
        (
            too_long.as_str(),
            17,
            format!(
                "Topic name is invalid: the length of '{too_long}' is longer than the max \
                 allowed length 249"
            ),
        ),
        (
            "",
            17,
            "Topic name is invalid: the empty string is not allowed".to_owned(),
        ),
    ];
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(
            cases
                .iter()
                .map(|(name, _, _)| {
                    CreatableTopic::default()
                        .with_name(TopicName(StrBytes::from_string((*name).to_owned())))
                        .with_num_partitions(1)
                        .with_replication_factor(1)
                })
                .collect(),
        );
    let mut stream = wire::connect(broker.addr());
    let response = wire::round_trip(&mut stream, 7, 4, &request);
    let answers: Vec<(String, i16, Option<String>)> = response
        .topics
        .iter()
        .map(|t| {
            (
                t.name.0.as_str().to_owned(),
                t.error_code,
                t.error_message.as_ref().map(|m| m.as_str().to_owned()),
            )
        })
        .collect();
    let expected: Vec<(String, i16, Option<String>)> = cases
        .iter()
        .map(|(name, code, message)| ((*name).to_owned(), *code, Some(message.clone())))
        .collect();
    assert_eq!(answers, expected);
}

#[test]
fn an_empty_replica_list_is_an_invalid_replica_assignment() {
    // Proves: a manual assignment giving a partition no replicas is refused with
    // INVALID_REPLICA_ASSIGNMENT (39) and Kafka's reason, and nothing is created (it was
    // refused as an invalid replication factor, 38, which Java reports as
    // InvalidReplicationFactorException).
    let broker = Broker::start();
    let assignment = |partition: i32, brokers: Vec<i32>| {
        CreatableReplicaAssignment::default()
            .with_partition_index(partition)
            .with_broker_ids(brokers.into_iter().map(BrokerId).collect())
    };
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("no-replicas")))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(vec![
                assignment(0, vec![1]),
                assignment(1, vec![]),
            ])]);
    let response = wire::round_trip(&mut wire::connect(broker.addr()), 7, 1, &request);
    let topic = &response.topics[0];
    assert_eq!(topic.error_code, 39, "INVALID_REPLICA_ASSIGNMENT");
    let message = topic.error_message.as_ref().map(|m| m.as_str().to_owned());
    assert!(
        message.as_deref().is_some_and(
            |m| m.ends_with("The manual partition assignment includes an empty replica list.")
        ),
        "{message:?}"
    );
    assert!(
        !list_topics(&broker.bootstrap())
            .iter()
            .any(|(name, _)| name == "no-replicas"),
        "nothing created"
    );
}

#[test]
fn validate_only_does_not_create() {
    // Proves: CreateTopics with validate_only answers success for a valid topic
    // and the matching error for an invalid one, but creates nothing: no
    // metadata entry and no `<data>/<topic>-0` directory.
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    let options = admin_options().validate_only(true);
    let results = create_topics(
        &bootstrap,
        &[
            NewTopic::new("dry-run", 3, TopicReplication::Fixed(1)),
            NewTopic::new("dry-bad", 0, TopicReplication::Fixed(1)),
        ],
        &options,
    );
    assert_eq!(
        results,
        vec![
            Ok("dry-run".to_owned()),
            Err(("dry-bad".to_owned(), RDKafkaErrorCode::InvalidPartitions))
        ]
    );
    assert_eq!(list_topics(&bootstrap), Vec::<(String, usize)>::new());
    assert!(
        !broker.data_dir().join("dry-run-0").exists(),
        "validate-only created a directory"
    );
}

#[test]
fn delete_topic_removes_metadata_and_data() {
    // Proves: DeleteTopics removes the topic from Metadata and its partition
    // directory `<data>/<topic>-0` disappears; deleting it again answers
    // UNKNOWN_TOPIC_OR_PARTITION (3); a topic re-created under the same name
    // starts empty at offset 0.
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "doomed", 1, &[]);
    create_topic(&bootstrap, "kept", 1, &[]);
    let old: Vec<Record> = (0..10)
        .map(|i| Record::new(0, format!("k{i}"), format!("old{i}")))
        .collect();
    produce_ok(&bootstrap, "doomed", &old, &[]);
    let dir = broker.data_dir().join("doomed-0");
    assert!(
        dir.is_dir(),
        "{} should exist after producing",
        dir.display()
    );

    let admin = admin(&bootstrap);
    let results =
        block_on(admin.delete_topics(&["doomed"], &admin_options())).expect("DeleteTopics");
    assert_eq!(results, vec![Ok("doomed".to_owned())]);
    wait_for_topics(&bootstrap, &[("kept", 1)], "after DeleteTopics");
    assert!(
        gone_within(&dir),
        "{} still exists after DeleteTopics",
        dir.display()
    );

    let again = block_on(admin.delete_topics(&["doomed"], &admin_options())).expect("DeleteTopics");
    assert_eq!(
        again,
        vec![Err((
            "doomed".to_owned(),
            RDKafkaErrorCode::UnknownTopicOrPartition
        ))]
    );

    create_topic(&bootstrap, "doomed", 1, &[]);
    let new = vec![Record::new(0, "k", "new")];
    assert_eq!(
        produce_ok(&bootstrap, "doomed", &new, &[]),
        vec![(0, 0)],
        "re-created topic starts at 0"
    );
    assert_records(&consume(&bootstrap, "doomed", 0, 0, 1, &[]), &new, 0);
}

#[test]
fn a_recreated_topic_keeps_its_records_across_restarts() {
    // Proves: a topic deleted and created again under the same name keeps the new topic's
    // records across a SIGTERM restart and a SIGKILL restart. A restarted broker replays
    // the metadata log, where the old topic's creation and deletion come before the new
    // one's creation: deleting logs by name while replaying the old deletion would wipe the
    // new topic's directory, which has the same name.
    let mut broker = Broker::start();
    let bootstrap = broker.bootstrap();
    let admin_client = admin(&bootstrap);
    create_topic(&bootstrap, "again", 1, &[]);
    let old: Vec<Record> = (0..5)
        .map(|i| Record::new(0, format!("k{i}"), format!("old{i}")))
        .collect();
    produce_ok(&bootstrap, "again", &old, &[]);
    let deleted =
        block_on(admin_client.delete_topics(&["again"], &admin_options())).expect("DeleteTopics");
    assert_eq!(deleted, vec![Ok("again".to_owned())]);
    assert!(
        gone_within(&broker.data_dir().join("again-0")),
        "the old topic's directory is still there"
    );
    create_topic(&bootstrap, "again", 1, &[]);
    let new: Vec<Record> = (0..20)
        .map(|i| Record::new(0, format!("k{i}"), format!("new{i}")))
        .collect();
    assert_eq!(
        produce_ok(&bootstrap, "again", &new, &[]).last(),
        Some(&(0, 19))
    );

    let status = broker.terminate();
    assert!(status.success(), "SIGTERM shutdown exit status: {status}");
    broker.restart();
    wait_for_topics(&bootstrap, &[("again", 1)], "after SIGTERM restart");
    assert_records(&consume(&bootstrap, "again", 0, 0, 20, &[]), &new, 0);

    broker.kill();
    broker.restart();
    wait_for_topics(&bootstrap, &[("again", 1)], "after SIGKILL restart");
    assert_records(&consume(&bootstrap, "again", 0, 0, 20, &[]), &new, 0);
    let more = vec![Record::new(0, "k20", "new20")];
    assert_eq!(produce_ok(&bootstrap, "again", &more, &[]), vec![(0, 20)]);
}

/// Records `from..to` for partition `partition` of the restart test.
fn batch(partition: i32, from: usize, to: usize) -> Vec<Record> {
    (from..to)
        .map(|i| {
            Record::new(
                partition,
                format!("p{partition}-k{i}"),
                format!("p{partition}-v{i}"),
            )
        })
        .collect()
}

#[test]
fn topics_and_data_survive_sigterm_and_sigkill_restarts() {
    // Proves: after a clean SIGTERM shutdown (exit status 0) and restart, and
    // after a SIGKILL and restart, Metadata still lists every topic with its
    // partition count (including one created just before the SIGKILL) and every
    // acknowledged record reads back at its offset.
    let mut broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "durable", 2, &[("retention.ms", "86400000")]);
    let mut expected = [batch(0, 0, 50), batch(1, 0, 50)];
    for part in &expected {
        let acked = produce_ok(&bootstrap, "durable", part, &[]);
        assert_eq!(acked.last(), Some(&(part[0].partition, 49)));
    }

    let status = broker.terminate();
    assert!(status.success(), "SIGTERM shutdown exit status: {status}");
    broker.restart();
    wait_for_topics(&bootstrap, &[("durable", 2)], "after SIGTERM restart");
    for (partition, part) in (0..).zip(&expected) {
        assert_records(
            &consume(&bootstrap, "durable", partition, 0, 50, &[]),
            part,
            0,
        );
    }

    for (partition, part) in (0..).zip(expected.iter_mut()) {
        let more = batch(partition, 50, 60);
        let acked = produce_ok(&bootstrap, "durable", &more, &[]);
        assert_eq!(acked, (50..60).map(|o| (partition, o)).collect::<Vec<_>>());
        part.extend(more);
    }
    create_topic(&bootstrap, "late", 3, &[]);
    broker.kill();
    broker.restart();
    wait_for_topics(
        &bootstrap,
        &[("durable", 2), ("late", 3)],
        "after SIGKILL restart",
    );
    for (partition, part) in (0..).zip(&expected) {
        assert_records(
            &consume(&bootstrap, "durable", partition, 0, 60, &[]),
            part,
            0,
        );
    }
}

// CreatePartitions grows a topic (kafka-topics.sh --alter --partitions): 2 → 5 partitions
// whose directories exist, the count survives a restart, and shrinking or
// an unknown topic is refused with INVALID_PARTITIONS / UNKNOWN_TOPIC_OR_PARTITION.
#[test]
fn create_partitions_grows_a_topic() {
    use rdkafka::admin::NewPartitions;
    let mut broker = Broker::start();
    let bootstrap = broker.bootstrap();
    crate::common::create_topic(&bootstrap, "grown", 2, &[]);
    let client = crate::common::admin(&bootstrap);
    let results = crate::common::block_on(client.create_partitions(
        &[
            NewPartitions::new("grown", 5),
            NewPartitions::new("grown-missing", 3),
        ],
        &crate::common::admin_options(),
    ))
    .expect("create partitions");
    assert_eq!(results[0], Ok("grown".to_string()));
    assert_eq!(
        results[1],
        Err((
            "grown-missing".to_string(),
            rdkafka::types::RDKafkaErrorCode::UnknownTopicOrPartition
        ))
    );
    let results = crate::common::block_on(client.create_partitions(
        &[NewPartitions::new("grown", 3)],
        &crate::common::admin_options(),
    ))
    .expect("create partitions");
    assert_eq!(
        results[0],
        Err((
            "grown".to_string(),
            rdkafka::types::RDKafkaErrorCode::InvalidPartitions
        ))
    );
    drop(client);
    crate::common::wait_for_topics(&bootstrap, &[("grown", 5)], "after growing");
    broker.restart();
    crate::common::wait_for_topics(&broker.bootstrap(), &[("grown", 5)], "after restart");
    assert!(broker.data_dir().join("grown-4").is_dir());
}
