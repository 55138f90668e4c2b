//! OffsetForLeaderEpoch (API 23) on a single node, through raw requests: advertised at
//! v2–4, the current epoch ends at the log end, unknown epochs are UNDEFINED, a stale or
//! future `current_leader_epoch` is fenced or unknown, and the answer survives a restart
//! (a single node keeps its epoch: nothing bumps it until the controller hands out
//! leadership). rdkafka consumers keep working with the API advertised; librdkafka sends it
//! only when Metadata shows a higher leader epoch, which a single node never does yet.

use integration_tests::Broker;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, BrokerId, OffsetForLeaderEpochRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::common::{consume, create_topic, produce_ok, Record};
use crate::wire;

/// (error, leader epoch, end offset) per `(partition, current_leader_epoch, leader_epoch)`.
fn epoch_ends(broker: &Broker, topic: &str, queries: &[(i32, i32, i32)]) -> Vec<(i16, i32, i64)> {
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(
                queries
                    .iter()
                    .map(|(partition, current, epoch)| {
                        OffsetForLeaderPartition::default()
                            .with_partition(*partition)
                            .with_current_leader_epoch(*current)
                            .with_leader_epoch(*epoch)
                    })
                    .collect(),
            )]);
    let mut stream = wire::connect(broker.addr());
    let response = wire::round_trip(&mut stream, 4, 23, &request);
    assert_eq!(response.topics.len(), 1);
    let partitions = &response.topics[0].partitions;
    assert_eq!(
        partitions.iter().map(|p| p.partition).collect::<Vec<_>>(),
        queries.iter().map(|q| q.0).collect::<Vec<_>>()
    );
    partitions
        .iter()
        .map(|p| (p.error_code, p.leader_epoch, p.end_offset))
        .collect()
}

#[test]
fn offset_for_leader_epoch_on_a_single_node() {
    // Proves: ApiVersions lists API 23 at v2..4; after 5 records on partition 0 and none on
    // partition 1, epoch 0 ends at 5 and 0 (the log ends), epoch 3 is UNDEFINED (-1, -1),
    // current_leader_epoch 0 passes and 1 is UNKNOWN_LEADER_EPOCH (75), partition 7 is
    // UNKNOWN_TOPIC_OR_PARTITION (3); after a restart (a new leader epoch) the same end
    // offsets with the old current epochs fenced, and rdkafka reads the 5 records back.
    let mut broker = Broker::start();
    let bootstrap = broker.bootstrap();
    let mut stream = wire::connect(broker.addr());
    let versions = wire::round_trip(&mut stream, 3, 1, &ApiVersionsRequest::default());
    let api = versions
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::OffsetForLeaderEpoch as i16)
        .expect("OffsetForLeaderEpoch advertised");
    assert_eq!((api.min_version, api.max_version), (2, 4));

    create_topic(&bootstrap, "epochs", 2, &[]);
    let records: Vec<Record> = (0..5)
        .map(|i| Record::new(0, format!("k{i}"), format!("v{i}")))
        .collect();
    let acked = produce_ok(&bootstrap, "epochs", &records, &[]);
    assert_eq!(acked, (0..5).map(|o| (0, o)).collect::<Vec<_>>());

    let queries = [
        (0, -1, 0),
        (1, -1, 0),
        (0, -1, 3),
        (0, 0, 0),
        (0, 1, 0),
        (7, -1, 0),
    ];
    let expected = vec![
        (0, 0, 5),
        (0, 0, 0),
        (0, -1, -1),
        (0, 0, 5),
        (75, -1, -1),
        (3, -1, -1),
    ];
    assert_eq!(epoch_ends(&broker, "epochs", &queries), expected);

    // A restart registers the broker again, which takes it out of the ISR and elects it
    // anew: the leader epoch moves on, as on a KRaft broker, so the clients' current
    // epochs 0 and 1 are now fenced (FENCED_LEADER_EPOCH, 74); the epoch-0 answers stay.
    broker.restart();
    let mut after_restart = expected.clone();
    after_restart[3] = (74, -1, -1);
    after_restart[4] = (74, -1, -1);
    assert_eq!(epoch_ends(&broker, "epochs", &queries), after_restart);
    let consumed = consume(&broker.bootstrap(), "epochs", 0, 0, 5, &[]);
    assert_eq!(
        consumed.iter().map(|c| c.offset).collect::<Vec<_>>(),
        (0..5).collect::<Vec<_>>()
    );
}
