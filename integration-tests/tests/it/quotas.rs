//! Client quotas (KIP-546 APIs, KIP-219 throttling): AlterClientQuotas and
//! DescribeClientQuotas on the wire with Kafka's codes and filter rules, a produce and a
//! fetch over their byte rates answered with `throttle_time_ms` (the produce's connection
//! muted for that long, the fetch answered empty), and Kafka's kafka-configs managing
//! quotas exactly as it does against Apache Kafka (scripts/quota-tools-test).

use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, CreateTopicsRequest, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse, FetchRequest, MetadataRequest, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use integration_tests::Broker;

use crate::wire::{connect, record_batch, round_trip};

const INVALID_REQUEST: i16 = 42;
const UNSUPPORTED_VERSION: i16 = 35;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// An AlterClientQuotas entry: `entity` (type, name or default) with `ops` (key, value or
/// removal).
fn entry(entity: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> EntryData {
    EntryData::default()
        .with_entity(
            entity
                .iter()
                .map(|(t, n)| {
                    EntityData::default()
                        .with_entity_type(s(t))
                        .with_entity_name(n.map(s))
                })
                .collect(),
        )
        .with_ops(
            ops.iter()
                .map(|(k, v)| {
                    OpData::default()
                        .with_key(s(k))
                        .with_value(v.unwrap_or(0.0))
                        .with_remove(v.is_none())
                })
                .collect(),
        )
}

/// Each entry's (code, message) of an AlterClientQuotas v1.
fn alter(
    stream: &mut std::net::TcpStream,
    entries: Vec<EntryData>,
    validate_only: bool,
) -> Vec<(i16, Option<String>)> {
    let response = round_trip(
        stream,
        1,
        1,
        &AlterClientQuotasRequest::default()
            .with_entries(entries)
            .with_validate_only(validate_only),
    );
    response
        .entries
        .iter()
        .map(|e| {
            (
                e.error_code,
                e.error_message.as_ref().map(ToString::to_string),
            )
        })
        .collect()
}

/// A DescribeClientQuotas v1 with `components` (type, match type, match).
fn describe(
    stream: &mut std::net::TcpStream,
    components: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> DescribeClientQuotasResponse {
    round_trip(
        stream,
        1,
        2,
        &DescribeClientQuotasRequest::default()
            .with_components(
                components
                    .iter()
                    .map(|(t, m, n)| {
                        ComponentData::default()
                            .with_entity_type(s(t))
                            .with_match_type(*m)
                            .with_match(n.map(s))
                    })
                    .collect(),
            )
            .with_strict(strict),
    )
}

/// The entities a describe listed, as `type=name` (`type=` for a default) joined by `,`,
/// each with its `key=value`s.
fn listed(response: &DescribeClientQuotasResponse) -> Vec<String> {
    let mut out: Vec<String> = response
        .entries
        .iter()
        .flatten()
        .map(|e| {
            let entity: Vec<String> = e
                .entity
                .iter()
                .map(|d| {
                    format!(
                        "{}={}",
                        d.entity_type,
                        d.entity_name.as_ref().map_or("", |n| n.as_str())
                    )
                })
                .collect();
            let values: Vec<String> = e
                .values
                .iter()
                .map(|v| format!("{}={}", v.key, v.value))
                .collect();
            format!("{} {}", entity.join(","), values.join(","))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn quota_apis_on_the_wire() {
    // Proves: AlterClientQuotas with validate_only changes nothing; then sets alice's
    // producer_byte_rate, the default client id's consumer_byte_rate and alice+app's
    // request_percentage; bad entries get INVALID_REQUEST with Kafka's messages while the
    // good ones in the same request apply; DescribeClientQuotas lists by EXACT, DEFAULT
    // and SPECIFIED components and strict as Kafka's ClientQuotasImage.describe, an
    // unknown entity type is UNSUPPORTED_VERSION and a repeated type INVALID_REQUEST;
    // removing the last key removes the entity.
    let broker = Broker::start();
    let mut stream = connect(broker.addr());
    let alice = entry(
        &[("user", Some("alice"))],
        &[("producer_byte_rate", Some(1024.0))],
    );
    assert_eq!(alter(&mut stream, vec![alice.clone()], true), [(0, None)]);
    assert!(listed(&describe(&mut stream, &[], false)).is_empty());
    let results = alter(
        &mut stream,
        vec![
            alice,
            entry(
                &[("client-id", None)],
                &[("consumer_byte_rate", Some(2048.0))],
            ),
            entry(
                &[("user", Some("alice")), ("client-id", Some("app"))],
                &[("request_percentage", Some(12.5))],
            ),
            entry(
                &[("user", Some("bob"))],
                &[("producer_byte_rate", Some(1.5))],
            ),
            entry(
                &[("group", Some("g"))],
                &[("producer_byte_rate", Some(1.0))],
            ),
            entry(
                &[("ip", Some("10.0.0.1"))],
                &[("producer_byte_rate", Some(1.0))],
            ),
        ],
        false,
    );
    let expected: Vec<(i16, Option<String>)> = vec![
        (0, None),
        (0, None),
        (0, None),
        (
            INVALID_REQUEST,
            Some("producer_byte_rate cannot be a fractional value.".into()),
        ),
        (
            INVALID_REQUEST,
            Some("Unhandled client quota entity type: group".into()),
        ),
        (
            INVALID_REQUEST,
            Some("Invalid configuration key producer_byte_rate".into()),
        ),
    ];
    assert_eq!(results, expected);

    let all = listed(&describe(&mut stream, &[], false));
    assert_eq!(
        all,
        [
            "client-id= consumer_byte_rate=2048",
            "client-id=app,user=alice request_percentage=12.5",
            "user=alice producer_byte_rate=1024",
        ]
    );
    // EXACT user alice: both entities naming alice; strict: only the user alone.
    let exact = [("user", 0, Some("alice"))];
    assert_eq!(listed(&describe(&mut stream, &exact, false)).len(), 2);
    assert_eq!(
        listed(&describe(&mut stream, &exact, true)),
        ["user=alice producer_byte_rate=1024"]
    );
    // DEFAULT client id; SPECIFIED client id (any entity with one, the default included).
    assert_eq!(
        listed(&describe(&mut stream, &[("client-id", 1, None)], false)),
        ["client-id= consumer_byte_rate=2048"]
    );
    assert_eq!(
        listed(&describe(&mut stream, &[("client-id", 2, None)], false)).len(),
        2
    );
    let unknown = describe(&mut stream, &[("group", 2, None)], false);
    assert_eq!(unknown.error_code, UNSUPPORTED_VERSION);
    assert_eq!(
        unknown.error_message.as_ref().map(|m| m.as_str()),
        Some("Unsupported entity type group")
    );
    let twice = describe(&mut stream, &[("user", 2, None), ("user", 1, None)], false);
    assert_eq!(twice.error_code, INVALID_REQUEST);
    assert_eq!(
        twice.error_message.as_ref().map(|m| m.as_str()),
        Some("Entity type user cannot appear more than once in the filter.")
    );

    let removed = alter(
        &mut stream,
        vec![entry(
            &[("user", Some("alice"))],
            &[("producer_byte_rate", None)],
        )],
        false,
    );
    assert_eq!(removed, [(0, None)]);
    assert_eq!(listed(&describe(&mut stream, &exact, true)).len(), 0);
}

/// A Produce v9 of one `size`-byte record to partition 0 of `topic`: its throttle time.
fn produce(stream: &mut std::net::TcpStream, topic: &str, size: usize, correlation_id: i32) -> i32 {
    let value = Bytes::from(vec![b'x'; size]);
    let batch = record_batch(&[(None, Some(value))], 1_700_000_000_000);
    let response = round_trip(
        stream,
        9,
        correlation_id,
        &ProduceRequest::default()
            .with_acks(1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(s(topic)))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch))])]),
    );
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    response.throttle_time_ms
}

/// A Fetch v12 of partition 0 of `topic` from `offset`: (throttle time, record bytes,
/// partitions answered).
fn fetch(stream: &mut std::net::TcpStream, topic: &str, offset: i64) -> (i32, usize, usize) {
    let response = round_trip(
        stream,
        12,
        7,
        &FetchRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_max_wait_ms(0)
            .with_max_bytes(50 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(s(topic)))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(50 << 20)])]),
    );
    let partitions: Vec<_> = response
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .collect();
    let bytes = partitions
        .iter()
        .filter_map(|p| p.records.as_ref().map(Bytes::len))
        .sum();
    (response.throttle_time_ms, bytes, partitions.len())
}

/// Creates `name` with one partition over `stream` (CreateTopics v7), checking it was.
fn create_topic(stream: &mut std::net::TcpStream, name: &str) {
    let created = round_trip(
        stream,
        7,
        1,
        &CreateTopicsRequest::default()
            .with_timeout_ms(10_000)
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(s(name)))
                .with_num_partitions(1)
                .with_replication_factor(1)]),
    );
    assert_eq!(created.topics[0].error_code, 0, "create {name}");
}

#[test]
fn produce_and_fetch_over_their_byte_rates_are_throttled() {
    // Proves, for the client id of the raw requests ("logbook-it"):
    // - producer_byte_rate 100000: six 150 kB produces (within the quota over Kafka's
    //   ten-second window) answer throttle 0; the seventh answers a throttle time near
    //   Kafka's (rate - quota) / quota x window (~500 ms), and the next request on that
    //   connection is not answered before that time has passed (the muted channel);
    // - consumer_byte_rate 50000: a fetch asking 50 MB gets at most what one window allows
    //   (500 kB: two of the 150 kB batches... up to three) and throttle 0; the next fetch would
    //   take the rate over, so it is answered with no partitions and a throttle time, and so
    //   is an immediate retry (a throttled fetch's bytes do not count, the rate stays over).
    let broker = Broker::start();
    let mut stream = connect(broker.addr());
    create_topic(&mut stream, "quota");
    let set = alter(
        &mut stream,
        vec![entry(
            &[("client-id", Some("logbook-it"))],
            &[
                ("producer_byte_rate", Some(100_000.0)),
                ("consumer_byte_rate", Some(50_000.0)),
            ],
        )],
        false,
    );
    assert_eq!(set, [(0, None)]);

    let throttles: Vec<i32> = (0..6)
        .map(|i| produce(&mut stream, "quota", 150_000, 10 + i))
        .collect();
    assert_eq!(throttles, [0; 6]);
    let throttle = produce(&mut stream, "quota", 150_000, 20);
    assert!(
        (300..=700).contains(&throttle),
        "the seventh produce's throttle time {throttle} ms"
    );
    let sent = Instant::now();
    let _ = produce(&mut stream, "quota", 10, 21);
    let muted = sent.elapsed();
    assert!(
        muted >= Duration::from_millis(u64::try_from(throttle).expect("positive") - 50),
        "answered after {muted:?}, throttle {throttle} ms"
    );

    let (throttle, bytes, partitions) = fetch(&mut stream, "quota", 0);
    assert_eq!((throttle, partitions), (0, 1));
    assert!(
        (150_000..=500_000).contains(&bytes),
        "the first fetch returned {bytes} bytes, over one window of the quota"
    );
    let (throttle, bytes, partitions) = fetch(&mut stream, "quota", 3);
    assert!(throttle > 0, "the second fetch was not throttled");
    assert_eq!((bytes, partitions), (0, 0));
    let (again, bytes, partitions) = fetch(&mut stream, "quota", 3);
    assert!(again > 0, "the retry was not throttled");
    assert_eq!((bytes, partitions), (0, 0));
}

#[test]
fn request_percentage_throttles_a_busy_client_and_no_other() {
    // Proves, for the raw requests' client id ("logbook-it") under request_percentage 0.2
    // (2 ms of one thread per second: 20 ms over Kafka's ten-second window): Metadata
    // requests are answered with throttle 0 until their time takes the rate over the
    // quota, then with a throttle time bounded by one window (1..=1000 ms, Kafka's
    // boundedThrottleTime); the connection is muted for that long (the next request is not
    // answered sooner); a fetch while the rate is over is answered with no records; and a
    // client with another client id (rdkafka) is served unthrottled meanwhile.
    let broker = Broker::start();
    let mut stream = connect(broker.addr());
    create_topic(&mut stream, "busy");
    assert_eq!(produce(&mut stream, "busy", 100, 2), 0);
    let set = alter(
        &mut stream,
        vec![entry(
            &[("client-id", Some("logbook-it"))],
            &[("request_percentage", Some(0.2))],
        )],
        false,
    );
    assert_eq!(set, [(0, None)]);

    // The first throttle times are small (the rate just over the quota); each request
    // made while over it takes the rate further, until the throttle is long enough to time.
    let started = Instant::now();
    let (mut unthrottled, mut throttled) = (0, 0);
    let throttle = loop {
        let response = round_trip(
            &mut stream,
            12,
            3,
            &MetadataRequest::default().with_topics(None),
        );
        assert_eq!(response.topics.len(), 1);
        assert!(
            (0..=1000).contains(&response.throttle_time_ms),
            "throttle {} ms, over one window",
            response.throttle_time_ms
        );
        match response.throttle_time_ms {
            // Back under for a moment is Kafka's rate too: its window grows within each
            // second and shrinks at the next, so a rate just over the quota wavers.
            0 => unthrottled += 1,
            ms if ms >= 200 => break ms,
            _ => throttled += 1,
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{unthrottled} Metadata requests unthrottled, {throttled} throttled in 30 s"
        );
    };
    assert!(unthrottled > 0, "the first Metadata request was throttled");
    let sent = Instant::now();
    let (mut fetch_throttle, _, mut partitions) = fetch(&mut stream, "busy", 0);
    let muted = sent.elapsed();
    assert!(
        muted >= Duration::from_millis(u64::try_from(throttle).expect("positive") - 50),
        "answered after {muted:?}, throttle {throttle} ms"
    );
    eprintln!("{unthrottled} unthrottled, {throttled} throttled under 200 ms, then {throttle} ms; fetch answered after {muted:?}");
    // The mute lasts until the rate is back at the quota, so the first fetch after it may be
    // charged just under it (a sample leaving the window): such a fetch is served whole.
    // Fetches are charged too; the first one over the quota is answered with no records.
    let deadline = Instant::now() + Duration::from_secs(30);
    while fetch_throttle == 0 {
        assert_eq!(
            partitions, 1,
            "an unthrottled fetch is answered with its partition"
        );
        assert!(
            Instant::now() < deadline,
            "no fetch went over the request quota in 30 s"
        );
        (fetch_throttle, _, partitions) = fetch(&mut stream, "busy", 0);
    }
    assert!(
        (1..=1000).contains(&fetch_throttle) && partitions == 0,
        "a fetch over the request quota: throttle {fetch_throttle} ms, {partitions} partitions"
    );
    crate::common::assert_round_trip(&broker.bootstrap(), "not-the-busy-client");
}

#[test]
fn kafka_configs_manages_quotas_as_on_kafka() {
    // Proves (scripts/quota-tools-test, which gives the same lines against Apache Kafka
    // 4.4): kafka-configs.sh adds user, default client-id, user+client-id and IP quotas,
    // describes each exactly as on Kafka, refuses a fractional byte rate and a zero quota
    // with Kafka's InvalidRequestException messages, and deletes keys.
    let broker = Broker::start();
    crate::common::run_script("quota-tools-test", &[&broker.bootstrap()], "13 passed");
}

/// Whether a new connection to `addr` gets an ApiVersions answer (false: closed unanswered).
fn answered(addr: std::net::SocketAddr) -> bool {
    use std::io::{Read, Write};
    let mut stream = connect(addr);
    let request = crate::wire::request_frame(
        3,
        1,
        &kafka_protocol::messages::ApiVersionsRequest::default(),
    );
    if stream.write_all(&request).is_err() {
        return false;
    }
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).is_ok()
}

#[test]
fn connection_creation_rates_per_ip_and_per_broker() {
    // Proves KIP-612 as Kafka measures it (a ten-second window at least):
    // - connection_creation_rate 2 for ip 127.0.0.1: twenty connections are served, the
    //   21st is closed unanswered, and so is the next one while the address is throttled;
    //   another address's quota (none) is not consulted for it;
    // - max.connection.creation.rate=5 on a second broker: the first fifty connections are
    //   accepted at once, the ten after them only as the rate allows (about 200 ms each).
    let broker = Broker::start();
    let mut stream = connect(broker.addr());
    let set = alter(
        &mut stream,
        vec![entry(
            &[("ip", Some("127.0.0.1"))],
            &[("connection_creation_rate", Some(2.0))],
        )],
        false,
    );
    assert_eq!(set, [(0, None)]);
    drop(stream);
    // The connection that set the quota was opened before it existed and is not counted.
    let served = (0..20).filter(|_| answered(broker.addr())).count();
    assert_eq!(served, 20);
    assert!(!answered(broker.addr()), "the 21st connection was served");
    assert!(
        !answered(broker.addr()),
        "a connection while throttled was served"
    );

    let limited = Broker::start_with(&["--override", "max.connection.creation.rate=5"]);
    let started = Instant::now();
    let burst = (0..50).filter(|_| answered(limited.addr())).count();
    let burst_time = started.elapsed();
    assert_eq!(burst, 50);
    let started = Instant::now();
    let rest = (0..10).filter(|_| answered(limited.addr())).count();
    let rest_time = started.elapsed();
    assert_eq!(rest, 10);
    assert!(
        rest_time >= Duration::from_millis(1500) && burst_time < rest_time,
        "50 connections in {burst_time:?}, the next 10 in {rest_time:?}"
    );
}
