//! Internal topics: exactly Kafka's own (`__consumer_offsets`, `__transaction_state`,
//! `__share_group_state`) are internal, and `__consumer_offsets` is created only by the
//! group coordinator's rules (its configured partition count, compacted), whatever
//! triggers it: a FindCoordinator, a Metadata naming it, or a Produce naming it.

use std::time::{Duration, Instant};

use integration_tests::Broker;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    CreateTopicsRequest, DeleteTopicsRequest, FindCoordinatorRequest, GroupId, MetadataRequest,
    MetadataResponse, OffsetCommitRequest, OffsetFetchRequest, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{NewPartitions, ResourceSpecifier};
use rdkafka::consumer::Consumer;
use rdkafka::Message;

use crate::common::{admin, admin_options, block_on, consumer, create_topic, produce_ok, Record};
use crate::wire;

/// CreateTopics of an internal topic that exists (Kafka 4.4).
const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

/// Metadata v12 for `topics` (all topics when `None`).
fn metadata(broker: &Broker, topics: Option<&[&str]>, auto_create: bool) -> MetadataResponse {
    let request = MetadataRequest::default()
        .with_topics(topics.map(|names| {
            names
                .iter()
                .map(|n| MetadataRequestTopic::default().with_name(Some(topic_name(n))))
                .collect()
        }))
        .with_allow_auto_topic_creation(auto_create);
    let mut stream = wire::connect(broker.addr());
    wire::round_trip(&mut stream, 12, 1, &request)
}

/// (error code, is_internal, partition count) of `name` in a Metadata answer.
fn described(response: &MetadataResponse, name: &str) -> Option<(i16, bool, usize)> {
    response
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some(name))
        .map(|t| (t.error_code, t.is_internal, t.partitions.len()))
}

/// FindCoordinator v3 for a group; returns the error code.
fn find_group_coordinator(broker: &Broker, group: &str) -> i16 {
    let request = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_string(group.to_owned()))
        .with_key_type(0);
    let mut stream = wire::connect(broker.addr());
    wire::round_trip(&mut stream, 3, 2, &request).error_code
}

/// Java's `String.hashCode`, as Kafka places a group on `__consumer_offsets`.
fn offsets_partition(group: &str, partitions: i32) -> i32 {
    let hash = group
        .encode_utf16()
        .fold(0_i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)));
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions
}

/// One group id per `__consumer_offsets` partition.
fn group_per_partition(partitions: i32) -> Vec<String> {
    let mut groups: Vec<Option<String>> =
        vec![None; usize::try_from(partitions).expect("positive count")];
    for i in 0.. {
        let group = format!("group-{i}");
        let p = usize::try_from(offsets_partition(&group, partitions)).expect("non-negative");
        groups[p].get_or_insert(group);
        if groups.iter().all(Option::is_some) {
            break;
        }
    }
    groups.into_iter().flatten().collect()
}

/// Commits `offset` for `topic`/0 as a simple (generation -1) commit; returns the error code.
fn commit(stream: &mut std::net::TcpStream, group: &str, topic: &str, offset: i64) -> i16 {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    let response = wire::round_trip(stream, 8, 3, &request);
    response.topics[0].partitions[0].error_code
}

/// The committed offset of `topic`/0 for `group` (OffsetFetch v7).
fn fetch_committed(stream: &mut std::net::TcpStream, group: &str, topic: &str) -> (i16, i64) {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partition_indexes(vec![0])]));
    let response = wire::round_trip(stream, 7, 4, &request);
    let p = &response.topics[0].partitions[0];
    (p.error_code, p.committed_offset)
}

/// A one-record v2 batch.
fn one_record_batch() -> bytes::Bytes {
    crate::wire::record_batch(
        &[(
            Some(bytes::Bytes::from_static(b"k")),
            Some(bytes::Bytes::from_static(b"v")),
        )],
        1_700_000_000_000,
    )
}

/// Produces one record to `topic`/0 (v9, acks=-1); returns the partition's error code.
fn produce_raw(broker: &Broker, topic: &str) -> i16 {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(one_record_batch()))])]);
    let mut stream = wire::connect(broker.addr());
    let response = wire::round_trip(&mut stream, 9, 5, &request);
    response.responses[0].partition_responses[0].error_code
}

#[test]
fn find_coordinator_creates_offsets_topic_by_coordinator_rules() {
    // Proves: on a fresh broker a FindCoordinator for a group creates
    // __consumer_offsets (as Kafka does; franz-go's suite expects it right after a
    // coordinator lookup) with --offsets-topic-num-partitions partitions, marked
    // internal, compacted, with the configs Kafka sets on it.
    let broker = Broker::start_with(&["--offsets-topic-num-partitions", "6"]);
    let before = metadata(&broker, None, false);
    assert_eq!(
        described(&before, "__consumer_offsets"),
        None,
        "fresh broker"
    );

    assert_eq!(find_group_coordinator(&broker, "some-group"), 0);
    let after = metadata(&broker, None, false);
    assert_eq!(
        described(&after, "__consumer_offsets"),
        Some((0, true, 6)),
        "__consumer_offsets listed, internal, 6 partitions"
    );

    let admin = admin(&broker.bootstrap());
    let configs = block_on(admin.describe_configs(
        &[ResourceSpecifier::Topic("__consumer_offsets")],
        &admin_options(),
    ))
    .expect("describe configs");
    let resource = configs[0].as_ref().expect("describe __consumer_offsets");
    let value = |name: &str| {
        resource
            .get(name)
            .and_then(|e| e.value.clone())
            .unwrap_or_default()
    };
    assert_eq!(value("cleanup.policy"), "compact");
    assert_eq!(value("compression.type"), "producer");
    assert_eq!(value("segment.bytes"), "104857600");
}

#[test]
fn transaction_state_topic_has_the_configs_kafka_forces() {
    // Proves: __transaction_state is created (by a transactional producer's first
    // InitProducerId) with the configs Kafka's TransactionStateManager forces on it —
    // min.insync.replicas from transaction.state.log.min.isr (2 by default, capped at the
    // one replica here, so a transaction still commits) and no unclean election — and a
    // transaction commits through it.
    let broker = Broker::start();
    let topic = "txn-state-configs";
    crate::common::create_topic(&broker.bootstrap(), topic, 1, &[]);
    let producer: rdkafka::producer::BaseProducer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("transactional.id", "txn-state-configs")
        .create()
        .expect("producer");
    use rdkafka::producer::Producer;
    producer
        .init_transactions(crate::common::CLIENT_TIMEOUT)
        .expect("init_transactions");
    producer.begin_transaction().expect("begin");
    producer
        .send(rdkafka::producer::BaseRecord::<(), str>::to(topic).payload("one"))
        .expect("send");
    producer
        .commit_transaction(crate::common::CLIENT_TIMEOUT)
        .expect("commit");

    let admin = admin(&broker.bootstrap());
    let configs = block_on(admin.describe_configs(
        &[ResourceSpecifier::Topic("__transaction_state")],
        &admin_options(),
    ))
    .expect("describe configs");
    let resource = configs[0].as_ref().expect("describe __transaction_state");
    let value = |name: &str| {
        resource
            .get(name)
            .and_then(|e| e.value.clone())
            .unwrap_or_default()
    };
    assert_eq!(value("min.insync.replicas"), "2");
    assert_eq!(value("unclean.leader.election.enable"), "false");
    assert_eq!(value("cleanup.policy"), "compact");
    assert_eq!(value("compression.type"), "uncompressed");
}

#[test]
fn metadata_auto_create_of_offsets_topic_uses_coordinator_rules() {
    // Proves: a Metadata request naming __consumer_offsets with auto-creation
    // allowed creates it with --offsets-topic-num-partitions partitions (not
    // --num-partitions 1 as an ordinary topic), so OffsetCommit works for groups on
    // every partition, before and after a restart. Today it gets 1 partition and
    // commits for groups on other partitions fail until a restart.
    let mut broker = Broker::start_with(&["--offsets-topic-num-partitions", "4"]);
    let response = metadata(&broker, Some(&["__consumer_offsets"]), true);
    assert_eq!(
        described(&response, "__consumer_offsets"),
        Some((0, true, 4)),
        "created by the coordinator's rules"
    );
    create_topic(&broker.bootstrap(), "t", 1, &[]);
    let groups = group_per_partition(4);
    let mut stream = wire::connect(broker.addr());
    for (i, group) in (10..).zip(&groups) {
        assert_eq!(commit(&mut stream, group, "t", i), 0, "commit of {group}");
    }
    for (i, group) in (10..).zip(&groups) {
        assert_eq!(fetch_committed(&mut stream, group, "t"), (0, i), "{group}");
    }
    drop(stream);
    broker.restart();
    let mut stream = wire::connect(broker.addr());
    for (i, group) in (10..).zip(&groups) {
        assert_eq!(
            fetch_committed(&mut stream, group, "t"),
            (0, i),
            "{group} after a restart"
        );
    }
    let after = metadata(&broker, Some(&["__consumer_offsets"]), false);
    assert_eq!(described(&after, "__consumer_offsets"), Some((0, true, 4)));
}

#[test]
fn clients_cannot_create_produce_to_or_delete_internal_topics() {
    // Proves: a Produce naming __consumer_offsets on a fresh broker is
    // UNKNOWN_TOPIC_OR_PARTITION (3), as on Kafka, and does not auto-create it as an
    // ordinary one-partition topic; Metadata for __transaction_state does not create it;
    // CreateTopics of an internal topic that does not exist is refused with
    // INVALID_TOPIC_EXCEPTION; once __consumer_offsets exists, a Produce to it is
    // INVALID_TOPIC_EXCEPTION, CreateTopics of it TOPIC_ALREADY_EXISTS (36, as Kafka 4.4
    // answers), and DeleteTopics of it is refused with INVALID_TOPIC_EXCEPTION; nothing
    // changes.
    let broker = Broker::start_with(&["--offsets-topic-num-partitions", "3"]);
    assert_eq!(
        produce_raw(&broker, "__consumer_offsets"),
        UNKNOWN_TOPIC_OR_PARTITION
    );
    assert_eq!(
        produce_raw(&broker, "__transaction_state"),
        UNKNOWN_TOPIC_OR_PARTITION
    );
    let listed = metadata(&broker, None, false);
    assert_eq!(described(&listed, "__consumer_offsets"), None);
    assert_eq!(described(&listed, "__transaction_state"), None);

    let response = metadata(&broker, Some(&["__transaction_state"]), true);
    assert_eq!(
        described(&response, "__transaction_state"),
        Some((UNKNOWN_TOPIC_OR_PARTITION, true, 0)),
        "no transaction coordinator: never created as an ordinary topic"
    );

    let create = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(
            ["__consumer_offsets", "__share_group_state"]
                .into_iter()
                .map(|name| {
                    CreatableTopic::default()
                        .with_name(topic_name(name))
                        .with_num_partitions(1)
                        .with_replication_factor(1)
                })
                .collect(),
        );
    let mut stream = wire::connect(broker.addr());
    let created = wire::round_trip(&mut stream, 7, 6, &create);
    let codes: Vec<i16> = created.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        vec![INVALID_TOPIC_EXCEPTION, INVALID_TOPIC_EXCEPTION]
    );

    assert_eq!(find_group_coordinator(&broker, "g"), 0);
    assert_eq!(
        produce_raw(&broker, "__consumer_offsets"),
        INVALID_TOPIC_EXCEPTION
    );
    let again = wire::round_trip(
        &mut stream,
        7,
        8,
        &CreateTopicsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(topic_name("__consumer_offsets"))
                .with_num_partitions(1)
                .with_replication_factor(1)]),
    );
    assert_eq!(again.topics[0].error_code, TOPIC_ALREADY_EXISTS);
    let delete = DeleteTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![
            DeleteTopicState::default().with_name(Some(topic_name("__consumer_offsets")))
        ]);
    let deleted = wire::round_trip(&mut stream, 6, 7, &delete);
    assert_eq!(deleted.responses[0].error_code, INVALID_TOPIC_EXCEPTION);
    let after = metadata(&broker, None, false);
    assert_eq!(described(&after, "__consumer_offsets"), Some((0, true, 3)));
    assert!(broker.data_dir().join("__consumer_offsets-2").is_dir());
}

#[test]
fn user_topic_with_double_underscore_is_an_ordinary_topic() {
    // Proves: only Kafka's own internal topics are internal: a user topic
    // `__events` is created, listed as not internal, grows with CreatePartitions,
    // and an rdkafka consumer subscribed to `^__ev.*` receives its records.
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "__events", 1, &[]);
    let listed = metadata(&broker, None, false);
    assert_eq!(described(&listed, "__events"), Some((0, false, 1)));

    let admin = admin(&bootstrap);
    let grown =
        block_on(admin.create_partitions(&[NewPartitions::new("__events", 3)], &admin_options()))
            .expect("create partitions");
    assert_eq!(grown, vec![Ok("__events".to_owned())]);
    let listed = metadata(&broker, None, false);
    assert_eq!(described(&listed, "__events"), Some((0, false, 3)));

    let records: Vec<Record> = (0..3)
        .map(|p| Record::new(p, format!("k{p}"), format!("v{p}")))
        .collect();
    produce_ok(&bootstrap, "__events", &records, &[]);

    let consumer = consumer(
        &bootstrap,
        &[
            ("group.id", "pattern-group"),
            ("auto.offset.reset", "earliest"),
            ("topic.metadata.refresh.interval.ms", "500"),
        ],
    );
    consumer.subscribe(&["^__ev.*"]).expect("subscribe");
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < records.len() {
        assert!(
            Instant::now() < deadline,
            "pattern subscription received {got:?}"
        );
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            let message = message.expect("consume");
            got.push((
                message.topic().to_owned(),
                message.partition(),
                message.offset(),
                message.payload().map(<[u8]>::to_vec),
            ));
        }
    }
    got.sort();
    let expected: Vec<_> = (0..3)
        .map(|p| {
            (
                "__events".to_owned(),
                p,
                0,
                Some(format!("v{p}").into_bytes()),
            )
        })
        .collect();
    assert_eq!(got, expected);
}
