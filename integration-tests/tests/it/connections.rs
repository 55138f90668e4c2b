//! Connection limits and closes, over raw sockets with rdkafka alongside: the idle timeout
//! (`--connections-max-idle-ms`, Kafka's `connections.max.idle.ms`), the per-address limit
//! (`--max-connections-per-ip`), and the close that tells an acks=0 producer its request
//! failed.

use std::io::Write;
use std::thread::sleep;
use std::time::{Duration, Instant};

use integration_tests::Broker;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiVersionsRequest, FetchRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::common::{
    assert_records, consume, create_topic, produce_all, produce_ok, producer, Record,
};
use crate::wire::{self, connect, expect_closed};

/// An ApiVersions round trip: proves the connection is open and served.
fn api_versions(stream: &mut std::net::TcpStream, correlation_id: i32) {
    let response = wire::round_trip(stream, 3, correlation_id, &ApiVersionsRequest::default());
    assert_eq!(response.error_code, 0, "ApiVersions error");
}

// A raw socket that sends nothing, and one that goes quiet after a request, are both closed
// after the configured idle time, while a connection that keeps talking, a long-polling fetch
// longer than the idle time, and an rdkafka producer and consumer keep working.
#[test]
fn idle_connections_are_closed_and_active_ones_kept() {
    let broker = Broker::start_with(&["--connections-max-idle-ms", "1000"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "idle", 1, &[]);
    let producer = producer(&bootstrap, &[]);
    let first: Vec<Record> = (0..3)
        .map(|i| Record::new(0, format!("k{i}"), format!("a{i}")))
        .collect();
    let acked: Vec<_> = produce_all(&producer, "idle", &first)
        .into_iter()
        .map(|d| d.result)
        .collect();
    assert_eq!(
        acked,
        vec![Ok((0, 0)), Ok((0, 1)), Ok((0, 2))],
        "first records"
    );

    let started = Instant::now();
    let mut silent = connect(broker.addr());
    let mut quiet = connect(broker.addr());
    api_versions(&mut quiet, 1);
    let mut chatty = connect(broker.addr());
    let mut long_poll = connect(broker.addr());
    // A fetch at the log end waits max_wait_ms (2.5 s) for data that never comes: a request
    // in flight, so the connection is not idle although nothing arrives meanwhile.
    let fetch = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(2_500)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("idle")))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(3)
                .with_partition_max_bytes(1 << 20)])]);
    long_poll
        .write_all(&wire::request_frame(12, 7, &fetch))
        .expect("send fetch");

    for i in 0..6 {
        sleep(Duration::from_millis(400));
        api_versions(&mut chatty, 10 + i);
    }
    let fetched = wire::expect_frame(&mut long_poll);
    assert!(
        started.elapsed() >= Duration::from_millis(2_400),
        "the long poll was answered after {:?}",
        started.elapsed()
    );
    assert!(!fetched.is_empty());
    expect_closed(&mut silent, "a socket that never sent anything");
    expect_closed(&mut quiet, "a socket idle after one request");
    api_versions(&mut chatty, 20);
    api_versions(&mut long_poll, 21);

    // The rdkafka producer's connections may have been idle meanwhile; it reconnects and
    // every record lands exactly once, in order.
    let second: Vec<Record> = (0..3)
        .map(|i| Record::new(0, format!("k{i}"), format!("b{i}")))
        .collect();
    let acked: Vec<_> = produce_all(&producer, "idle", &second)
        .into_iter()
        .map(|d| d.result)
        .collect();
    assert_eq!(
        acked,
        vec![Ok((0, 3)), Ok((0, 4)), Ok((0, 5))],
        "second records"
    );
    let all: Vec<Record> = first.into_iter().chain(second).collect();
    assert_records(&consume(&bootstrap, "idle", 0, 0, 6, &[]), &all, 0);
}

// A response that is ready leaves at once even when the next request on the same
// connection is parked: ApiVersions, then a Fetch at the log end waiting 10 s, written in one
// go. The ApiVersions answer must arrive long before the fetch's wait ends (it was held
// behind the fetch while responses were gathered into one write, which stalled kafka-python
// 3 group members whose SyncGroup answer waited behind a parked request), and the fetch is
// answered after its wait, in request order.
#[test]
fn a_ready_response_is_not_held_behind_a_parked_request() {
    const FETCH_WAIT: Duration = Duration::from_secs(10);
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "held", 1, &[]);
    let fetch = FetchRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_max_wait_ms(i32::try_from(FETCH_WAIT.as_millis()).expect("small"))
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("held")))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let mut both = wire::request_frame(3, 1, &ApiVersionsRequest::default());
    both.extend(wire::request_frame(12, 2, &fetch));
    let mut stream = connect(broker.addr());
    stream
        .set_read_timeout(Some(FETCH_WAIT * 2))
        .expect("set read timeout");
    let started = Instant::now();
    stream.write_all(&both).expect("send ApiVersions and Fetch");

    let mut first = wire::expect_frame(&mut stream);
    let first_after = started.elapsed();
    wire::split_response(&mut first, 0, 1);
    assert!(
        first_after < FETCH_WAIT / 2,
        "the ApiVersions answer waited {first_after:?} for the parked fetch"
    );
    let mut second = wire::expect_frame(&mut stream);
    let second_after = started.elapsed();
    wire::split_response(&mut second, 1, 2);
    assert!(
        second_after >= FETCH_WAIT - Duration::from_millis(100),
        "the fetch was answered after {second_after:?}, before its wait"
    );
}

// With max.connections.per.ip = 3, a 4th connection from 127.0.0.1 is closed at once
// while the first three stay served; once they close, a real client connects and works.
#[test]
fn per_ip_limit_closes_the_extra_connection() {
    let broker = Broker::start_with(&["--max-connections-per-ip", "4"]);
    let mut held = hold_connections(&broker, 4);
    let mut extra = connect(broker.addr());
    // The request may or may not reach the socket before the close; either way no answer.
    let _ = extra.write_all(&wire::request_frame(3, 99, &ApiVersionsRequest::default()));
    expect_closed(&mut extra, "a 5th connection from one address");
    for (i, stream) in held.iter_mut().enumerate() {
        api_versions(stream, 10 + i32::try_from(i).expect("small"));
    }
    drop(held);
    // The slots are given back as the broker notices the closes.
    sleep(Duration::from_millis(300));
    create_topic(&broker.bootstrap(), "after-limit", 1, &[]);
    let records: Vec<Record> = (0..3)
        .map(|i| Record::new(0, format!("k{i}"), format!("v{i}")))
        .collect();
    let acked = produce_ok(&broker.bootstrap(), "after-limit", &records, &[]);
    assert_eq!(acked, vec![(0, 0), (0, 1), (0, 2)]);
}

/// Opens `n` connections that each got an ApiVersions answer. The harness's own
/// start-up probes (connect, then close) count against the per-IP limit until the broker
/// notices they closed, so a connection may be refused at first: then all are dropped
/// and tried again shortly, for at most 10 s.
fn hold_connections(broker: &Broker, n: usize) -> Vec<std::net::TcpStream> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut held: Vec<_> = (0..n).map(|_| connect(broker.addr())).collect();
        let all_served = held.iter_mut().enumerate().all(|(i, stream)| {
            let id = i32::try_from(i).expect("small");
            stream
                .write_all(&wire::request_frame(3, id, &ApiVersionsRequest::default()))
                .is_ok()
                && matches!(wire::read_frame(stream), wire::Read1::Frame(_))
        });
        if all_served {
            return held;
        }
        assert!(
            Instant::now() < deadline,
            "{n} connections from one address were never all served under a limit of {n}"
        );
        drop(held);
        sleep(Duration::from_millis(100));
    }
}

/// One acks=0 Produce v9 of a one-record batch to `topic`-`partition`.
fn produce_acks0(partition: i32) -> ProduceRequest {
    let records = crate::bad_input::record_batch(1, true);
    ProduceRequest::default()
        .with_acks(0)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("acks0")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

// An acks=0 produce gets no response; when it fails (here: a partition index the topic does
// not have) Kafka closes the connection so the client notices and refreshes its metadata. A
// valid acks=0 produce leaves the connection open and its record is appended.
#[test]
fn acks0_produce_error_closes_the_connection() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "acks0", 1, &[]);
    let mut stream = connect(broker.addr());
    stream
        .write_all(&wire::request_frame(9, 1, &produce_acks0(0)))
        .expect("send valid acks=0 produce");
    // Answered with correlation id 2: nothing was sent for request 1, and the connection lives.
    api_versions(&mut stream, 2);
    stream
        .write_all(&wire::request_frame(9, 3, &produce_acks0(5)))
        .expect("send acks=0 produce to partition 5");
    expect_closed(
        &mut stream,
        "acks=0 produce to a partition that does not exist",
    );
    let consumed = consume(&bootstrap, "acks0", 0, 0, 1, &[]);
    assert_eq!(consumed[0].offset, 0);
    assert_eq!(consumed[0].value.as_deref(), Some(&b"v0"[..]));
}
