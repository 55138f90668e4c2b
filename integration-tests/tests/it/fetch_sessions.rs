//! Incremental fetch sessions (KIP-227) over raw Fetch requests: a full fetch (epoch 0)
//! leaves a session; incremental fetches name only changed partitions and are answered
//! with only the partitions that have something new; unknown ids, stale epochs and a
//! switch between topic names and ids get Kafka's top-level errors (70, 71, 106); epoch -1
//! and forgetting every partition close the session. The Java client (Streams, Connect)
//! and franz-go use sessions in their own tests; rdkafka fetches sessionless.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use integration_tests::Broker;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::common::{create_topic, produce_ok, Record};
use crate::wire::{connect, round_trip};

const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
const FETCH_SESSION_TOPIC_ID_ERROR: i16 = 106;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// `(partition, fetch offset)` as request partitions.
fn parts(offsets: &[(i32, i64)]) -> Vec<FetchPartition> {
    offsets
        .iter()
        .map(|&(p, offset)| {
            FetchPartition::default()
                .with_partition(p)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)
        })
        .collect()
}

fn fetch(session_id: i32, epoch: i32, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_id(session_id)
        .with_session_epoch(epoch)
}

/// Each answered partition: (partition, error, high watermark, has records).
fn answered(response: &FetchResponse) -> Vec<(i32, i16, i64, bool)> {
    response
        .responses
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    p.partition_index,
                    p.error_code,
                    p.high_watermark,
                    p.records.as_ref().is_some_and(|r| !r.is_empty()),
                )
            })
        })
        .collect()
}

struct Client {
    stream: TcpStream,
    correlation: i32,
}

impl Client {
    fn fetch(&mut self, version: i16, request: &FetchRequest) -> FetchResponse {
        self.correlation += 1;
        round_trip(&mut self.stream, version, self.correlation, request)
    }
}

fn produce(bootstrap: &str, topic: &str, partition: i32, count: usize) {
    let records: Vec<Record> = (0..count)
        .map(|i| Record::new(partition, format!("k{i}"), format!("v{i}")))
        .collect();
    produce_ok(bootstrap, topic, &records, &[]);
}

// v12 (topics by name): the full fetch answers every partition and names a session; the
// next fetch, which moves two positions, is answered with nothing new; records on the third
// partition come back alone; a resent epoch, an unknown id and a switch to topic ids are
// refused at the top level; forgetting every partition ends the session.
#[test]
fn an_incremental_fetch_is_answered_with_only_what_changed() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "sess", 3, &[]);
    produce(&bootstrap, "sess", 0, 5);
    produce(&bootstrap, "sess", 1, 3);
    let mut client = Client {
        stream: connect(broker.addr()),
        correlation: 0,
    };

    let full = client.fetch(
        12,
        &fetch(0, 0, 0).with_topics(vec![FetchTopic::default()
            .with_topic(name("sess"))
            .with_partitions(parts(&[(0, 0), (1, 0), (2, 0)]))]),
    );
    assert_eq!(full.error_code, 0);
    assert_ne!(full.session_id, 0, "a full fetch at epoch 0 gets a session");
    assert_eq!(
        answered(&full),
        vec![(0, 0, 5, true), (1, 0, 3, true), (2, 0, 0, false)]
    );
    let id = full.session_id;

    // Positions move past what was read: nothing new anywhere, so nothing comes back.
    let quiet = client.fetch(
        12,
        &fetch(id, 1, 0).with_topics(vec![FetchTopic::default()
            .with_topic(name("sess"))
            .with_partitions(parts(&[(0, 5), (1, 3)]))]),
    );
    assert_eq!((quiet.error_code, quiet.session_id), (0, id));
    assert_eq!(answered(&quiet), vec![]);

    // New records on partition 2, which the request does not name: it alone comes back,
    // after a long poll that the append ends.
    let writer = {
        let bootstrap = bootstrap.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            produce(&bootstrap, "sess", 2, 2);
        })
    };
    let started = Instant::now();
    let woken = client.fetch(12, &fetch(id, 2, 10_000));
    writer.join().expect("writer");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "the append ends the long poll"
    );
    assert_eq!((woken.error_code, woken.session_id), (0, id));
    assert_eq!(answered(&woken), vec![(2, 0, 2, true)]);

    // The same epoch again (a resent request): 71, no partitions.
    let resent = client.fetch(12, &fetch(id, 2, 0));
    assert_eq!(resent.error_code, INVALID_FETCH_SESSION_EPOCH);
    assert_eq!((resent.session_id, answered(&resent)), (0, vec![]));
    // An unknown session: 70.
    let unknown = client.fetch(12, &fetch(id.wrapping_add(1).max(1), 1, 0));
    assert_eq!(unknown.error_code, FETCH_SESSION_ID_NOT_FOUND);
    // A session made by names cannot go on by topic ids: 106.
    let by_id = client.fetch(13, &fetch(id, 3, 0));
    assert_eq!(by_id.error_code, FETCH_SESSION_TOPIC_ID_ERROR);

    // Forgetting all three closes the session: the answer names none, and the id is gone.
    let forget = client.fetch(
        12,
        &fetch(id, 3, 0).with_forgotten_topics_data(vec![ForgottenTopic::default()
            .with_topic(name("sess"))
            .with_partitions(vec![0, 1, 2])]),
    );
    assert_eq!((forget.error_code, forget.session_id), (0, 0));
    let gone = client.fetch(12, &fetch(id, 4, 0));
    assert_eq!(gone.error_code, FETCH_SESSION_ID_NOT_FOUND);

    // Epoch -1 is a sessionless fetch, answered in full.
    let sessionless = client.fetch(
        12,
        &fetch(0, -1, 0).with_topics(vec![FetchTopic::default()
            .with_topic(name("sess"))
            .with_partitions(parts(&[(0, 5), (2, 0)]))]),
    );
    assert_eq!((sessionless.error_code, sessionless.session_id), (0, 0));
    assert_eq!(
        answered(&sessionless),
        vec![(0, 0, 5, false), (2, 0, 2, true)]
    );
}

// v17 (topics by id, as the Java client sends): a partition whose high watermark moved
// without records for this fetch (its position is already at the end) still comes back,
// and an answered error is sent again until it clears.
#[test]
fn a_session_by_topic_ids_reports_watermark_moves() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "sess-ids", 2, &[]);
    let mut client = Client {
        stream: connect(broker.addr()),
        correlation: 0,
    };
    let metadata: MetadataResponse = round_trip(
        &mut client.stream,
        12,
        99,
        &MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name("sess-ids")))
        ])),
    );
    let topic_id = metadata.topics[0].topic_id;
    assert!(!topic_id.is_nil());
    let topic = |offsets: &[(i32, i64)]| {
        vec![FetchTopic::default()
            .with_topic_id(topic_id)
            .with_partitions(parts(offsets))]
    };

    let full = client.fetch(17, &fetch(0, 0, 0).with_topics(topic(&[(0, 0), (1, 0)])));
    assert_eq!(full.error_code, 0);
    assert_ne!(full.session_id, 0);
    assert_eq!(answered(&full), vec![(0, 0, 0, false), (1, 0, 0, false)]);
    assert_eq!(full.responses[0].topic_id, topic_id);
    let id = full.session_id;

    // Records on 1, read from its cached position 0.
    produce(&bootstrap, "sess-ids", 1, 4);
    let next = client.fetch(17, &fetch(id, 1, 0));
    assert_eq!(answered(&next), vec![(1, 0, 4, true)]);
    assert_eq!(next.responses[0].topic_id, topic_id);

    // The client moves 1 to the end but asks a position past it on 0: OFFSET_OUT_OF_RANGE
    // (1) is sent, and sent again on the next fetch, since errors always are.
    let out_of_range = client.fetch(17, &fetch(id, 2, 0).with_topics(topic(&[(0, 50), (1, 4)])));
    assert_eq!(answered(&out_of_range).len(), 1);
    assert_eq!(answered(&out_of_range)[0].0, 0);
    assert_eq!(answered(&out_of_range)[0].1, 1);
    let again = client.fetch(17, &fetch(id, 3, 0));
    assert_eq!(
        answered(&again)
            .iter()
            .map(|a| (a.0, a.1))
            .collect::<Vec<_>>(),
        vec![(0, 1)]
    );
    // Back in range: 0 comes back once with its watermark, then the session is quiet.
    let fixed = client.fetch(17, &fetch(id, 4, 0).with_topics(topic(&[(0, 0)])));
    assert_eq!(answered(&fixed), vec![(0, 0, 0, false)]);
    let quiet = client.fetch(17, &fetch(id, 5, 0));
    assert_eq!((quiet.error_code, answered(&quiet)), (0, vec![]));
}
