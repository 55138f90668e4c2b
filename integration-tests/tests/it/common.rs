//! rdkafka helpers shared by the test modules: a producer that records every
//! delivery report, an assign-based consumer (no group operations), and an admin
//! client driven synchronously.

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication, TopicResult};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::{DeliveryResult, Header, Headers, Message, OwnedHeaders, Timestamp};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

/// Upper bound for any single client operation in these tests.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(20);

/// One record as the tests produce it and expect it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub partition: i32,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// CreateTime in milliseconds; `None` lets the client stamp it.
    pub timestamp: Option<i64>,
}

impl Record {
    /// A record with a key and value on `partition`, no headers, client timestamp.
    pub fn new(partition: i32, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Record {
        Record {
            partition,
            key: Some(key.into()),
            value: Some(value.into()),
            headers: Vec::new(),
            timestamp: None,
        }
    }
}

/// One record as a consumer read it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consumed {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: Timestamp,
}

/// The outcome of one produced record, from its delivery report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// Index of the record in the slice given to `produce_all`.
    pub index: usize,
    /// `(partition, offset)` as acknowledged by the broker, or the error code.
    pub result: Result<(i32, i64), RDKafkaErrorCode>,
}

/// Producer context that stores every delivery report.
#[derive(Default)]
pub struct Collector {
    deliveries: Mutex<Vec<Delivery>>,
}

impl ClientContext for Collector {}

impl ProducerContext for Collector {
    type DeliveryOpaque = Box<usize>;

    fn delivery(&self, result: &DeliveryResult<'_>, index: Box<usize>) {
        let result = match result {
            Ok(message) => Ok((message.partition(), message.offset())),
            Err((error, _)) => Err(error
                .rdkafka_error_code()
                .unwrap_or(RDKafkaErrorCode::Unknown)),
        };
        self.deliveries
            .lock()
            .expect("delivery lock")
            .push(Delivery {
                index: *index,
                result,
            });
    }
}

/// A producer whose delivery reports are collected.
pub type TestProducer = BaseProducer<Collector>;

/// The wall clock in milliseconds since the epoch, as the broker stamps times.
pub fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(since.as_millis()).expect("milliseconds fit an i64")
}

/// A producer for `bootstrap` with short timeouts; `extra` overrides settings.
pub fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> TestProducer {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("message.timeout.ms", "20000")
        .set("socket.timeout.ms", "10000")
        .set("linger.ms", "5")
        .set("enable.idempotence", "false")
        .set("acks", "all");
    for (key, value) in extra {
        config.set(*key, *value);
    }
    config
        .create_with_context(Collector::default())
        .expect("create producer")
}

impl Collector {
    /// Every delivery report received so far, in arrival order.
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.deliveries.lock().expect("delivery lock").clone()
    }

    /// How many delivery reports arrived so far.
    pub fn count(&self) -> usize {
        self.deliveries.lock().expect("delivery lock").len()
    }
}

/// Enqueues every record for `topic` (retrying while the local queue is full);
/// the delivery opaque of record `i` is `i`. Does not wait for acknowledgements.
pub fn send_all(producer: &TestProducer, topic: &str, records: &[Record]) {
    for (index, record) in records.iter().enumerate() {
        let mut headers = OwnedHeaders::new_with_capacity(record.headers.len());
        for (key, value) in &record.headers {
            headers = headers.insert(Header {
                key,
                value: value.as_deref(),
            });
        }
        let mut base = BaseRecord::with_opaque_to(topic, Box::new(index))
            .partition(record.partition)
            .headers(headers);
        if let Some(key) = &record.key {
            base = base.key(key.as_slice());
        }
        if let Some(value) = &record.value {
            base = base.payload(value.as_slice());
        }
        if let Some(timestamp) = record.timestamp {
            base = base.timestamp(timestamp);
        }
        let deadline = Instant::now() + CLIENT_TIMEOUT;
        loop {
            match producer.send(base) {
                Ok(()) => break,
                Err((error, returned))
                    if error.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull)
                        && Instant::now() < deadline =>
                {
                    base = returned;
                    producer.poll(Duration::from_millis(10));
                }
                Err((error, _)) => panic!("enqueue record {index}: {error}"),
            }
        }
        producer.poll(Duration::ZERO);
    }
}

/// Polls until at least `count` delivery reports have arrived in total.
pub fn wait_for_reports(producer: &TestProducer, count: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let done = producer.context().count();
        if done >= count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "only {done} of {count} delivery reports arrived"
        );
        producer.poll(Duration::from_millis(20));
    }
}

/// Sends every record to `topic` and waits for all delivery reports.
/// Returns the reports ordered by record index.
pub fn produce_all(producer: &TestProducer, topic: &str, records: &[Record]) -> Vec<Delivery> {
    let start = producer.context().count();
    send_all(producer, topic, records);
    wait_for_reports(producer, start + records.len(), CLIENT_TIMEOUT * 2);
    let mut deliveries: Vec<Delivery> = producer.context().deliveries()[start..].to_vec();
    deliveries.sort_by_key(|d| d.index);
    deliveries
}

/// Produces `records` and asserts every one was acknowledged; returns the
/// acknowledged `(partition, offset)` per record index.
pub fn produce_ok(
    bootstrap: &str,
    topic: &str,
    records: &[Record],
    extra: &[(&str, &str)],
) -> Vec<(i32, i64)> {
    let producer = producer(bootstrap, extra);
    produce_all(&producer, topic, records)
        .into_iter()
        .map(|d| match d.result {
            Ok(at) => at,
            Err(code) => panic!("record {} was not acknowledged: {code:?}", d.index),
        })
        .collect()
}

/// A consumer for `bootstrap` that never joins or commits to a group.
pub fn consumer(bootstrap: &str, extra: &[(&str, &str)]) -> BaseConsumer {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "logbook-it")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "error")
        .set("socket.timeout.ms", "10000")
        .set("fetch.wait.max.ms", "100");
    for (key, value) in extra {
        config.set(*key, *value);
    }
    config.create().expect("create consumer")
}

/// Reads `count` records of `topic`/`partition` starting at `from` by `assign`
/// and returns them in the order received. Panics on a consumer error or if
/// fewer than `count` records arrive within `CLIENT_TIMEOUT`.
pub fn consume(
    bootstrap: &str,
    topic: &str,
    partition: i32,
    from: i64,
    count: usize,
    extra: &[(&str, &str)],
) -> Vec<Consumed> {
    let consumer = consumer(bootstrap, extra);
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, partition, Offset::Offset(from))
        .expect("build assignment");
    consumer.assign(&assignment).expect("assign");
    let mut out = Vec::with_capacity(count);
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    while out.len() < count {
        assert!(
            Instant::now() < deadline,
            "consumed only {} of {count} records from {topic}/{partition} at {from}",
            out.len()
        );
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(error)) => panic!("consume {topic}/{partition}: {error}"),
            Some(Ok(message)) => out.push(Consumed {
                partition: message.partition(),
                offset: message.offset(),
                key: message.key().map(<[u8]>::to_vec),
                value: message.payload().map(<[u8]>::to_vec),
                headers: message
                    .headers()
                    .map(|headers| {
                        headers
                            .iter()
                            .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                            .collect()
                    })
                    .unwrap_or_default(),
                timestamp: message.timestamp(),
            }),
        }
    }
    out
}

/// Asserts `consumed` are exactly `expected` (in order) at contiguous offsets from `from`.
pub fn assert_records(consumed: &[Consumed], expected: &[Record], from: i64) {
    assert_eq!(consumed.len(), expected.len(), "record count");
    for (i, (got, want)) in consumed.iter().zip(expected).enumerate() {
        let offset = from + i64::try_from(i).expect("small index");
        assert_eq!(got.offset, offset, "offset of record {i}");
        assert_eq!(got.partition, want.partition, "partition of record {i}");
        assert_eq!(got.key, want.key, "key of record {i} at offset {offset}");
        assert_eq!(
            got.value, want.value,
            "value of record {i} at offset {offset}"
        );
        assert_eq!(
            got.headers, want.headers,
            "headers of record {i} at offset {offset}"
        );
        if let Some(ts) = want.timestamp {
            assert_eq!(
                got.timestamp,
                Timestamp::CreateTime(ts),
                "timestamp of record {i}"
            );
        }
    }
}

/// An admin client for `bootstrap`.
pub fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("socket.timeout.ms", "10000")
        .create()
        .expect("create admin client")
}

/// Admin options with short timeouts.
pub fn admin_options() -> AdminOptions {
    AdminOptions::new()
        .request_timeout(Some(CLIENT_TIMEOUT))
        .operation_timeout(Some(Duration::from_secs(10)))
}

/// Runs a future to completion on a throwaway current-thread runtime.
pub fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("build a tokio runtime")
        .block_on(async { tokio::time::timeout(CLIENT_TIMEOUT * 2, future).await })
        .expect("client future timed out")
}

/// Creates topics through the AdminClient and returns one result per topic.
pub fn create_topics(
    bootstrap: &str,
    topics: &[NewTopic<'_>],
    options: &AdminOptions,
) -> Vec<TopicResult> {
    let admin = admin(bootstrap);
    block_on(admin.create_topics(topics, options)).expect("CreateTopics request")
}

/// Creates `name` with `partitions` partitions (replication factor 1) and asserts success.
pub fn create_topic(bootstrap: &str, name: &str, partitions: i32, configs: &[(&str, &str)]) {
    let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    for (key, value) in configs {
        topic = topic.set(key, value);
    }
    let results = create_topics(bootstrap, &[topic], &admin_options());
    assert_eq!(results, vec![Ok(name.to_owned())], "create topic {name}");
}

/// Topic names and partition counts from a Metadata request for all topics,
/// internal topics (`__consumer_offsets`, ...) left out.
pub fn list_topics(bootstrap: &str) -> Vec<(String, usize)> {
    let consumer = consumer(bootstrap, &[]);
    let metadata = consumer
        .fetch_metadata(None, CLIENT_TIMEOUT)
        .expect("Metadata request");
    let mut topics: Vec<(String, usize)> = metadata
        .topics()
        .iter()
        .filter(|t| t.error().is_none() && !t.name().starts_with("__"))
        .map(|t| (t.name().to_owned(), t.partitions().len()))
        .collect();
    topics.sort();
    topics
}

/// Polls `list_topics` until it equals `expected` (sorted) for up to 5 s,
/// then asserts equality. Kafka propagates new topics to its metadata cache
/// asynchronously; a single node may answer at once.
pub fn wait_for_topics(bootstrap: &str, expected: &[(&str, usize)], what: &str) {
    let expected: Vec<(String, usize)> = expected
        .iter()
        .map(|(n, p)| ((*n).to_owned(), *p))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let topics = list_topics(bootstrap);
        if topics == expected || Instant::now() > deadline {
            assert_eq!(topics, expected, "{what}");
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Metadata for one topic: its error (if any) and partition ids.
pub fn topic_metadata(bootstrap: &str, topic: &str) -> (Option<RDKafkaRespErr>, Vec<i32>) {
    let consumer = consumer(bootstrap, &[]);
    let metadata = consumer
        .fetch_metadata(Some(topic), CLIENT_TIMEOUT)
        .expect("Metadata request");
    let t = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic)
        .unwrap_or_else(|| panic!("topic {topic} missing from its own Metadata response"));
    (t.error(), t.partitions().iter().map(|p| p.id()).collect())
}

/// A produce then consume of a few records on a new topic: proves the broker
/// still serves normal clients (used after each bad-input test).
pub fn assert_round_trip(bootstrap: &str, topic: &str) {
    create_topic(bootstrap, topic, 1, &[]);
    let records: Vec<Record> = (0..5)
        .map(|i| Record::new(0, format!("k{i}"), format!("v{i}")))
        .collect();
    let acked = produce_ok(bootstrap, topic, &records, &[]);
    assert_eq!(
        acked,
        (0..5).map(|o| (0, o)).collect::<Vec<_>>(),
        "acknowledged offsets"
    );
    let consumed = consume(bootstrap, topic, 0, 0, 5, &[]);
    assert_records(&consumed, &records, 0);
}

/// Runs `scripts/<script> <args>` against the suite's broker binary and asserts its
/// summary line.
pub fn run_script(script: &str, args: &[&str], summary: &str) {
    run_script_with(script, args, &[], summary);
}

/// [`run_script`] with extra environment variables.
pub fn run_script_with(script: &str, args: &[&str], env: &[(&str, &str)], summary: &str) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let output = std::process::Command::new("bash")
        .arg(root.join("scripts").join(script))
        .args(args)
        .env("LOGBOOK_BIN", integration_tests::broker_binary())
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("run scripts/{script}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains(summary),
        "{script} {args:?} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}
