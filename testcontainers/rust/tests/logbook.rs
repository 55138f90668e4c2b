//! The module against the real `logbook` image (`LOGBOOK_IMAGE`, default `logbook:latest`)
//! with librdkafka: records round-trip through the mapped, advertised port; an idempotent
//! producer loses and duplicates nothing while the fault injector takes the partition's
//! leader away and then fails produces; SASL/PLAIN users are checked; TLS (and SASL over
//! TLS) serves clients trusting the CA, made at test time with rcgen, and refuses others.
//!
//! Needs Docker and the image. Run one test at a time (each starts a broker):
//! `TESTCONTAINERS_RYUK_DISABLED=true cargo test -- --test-threads=1`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication, TopicResult};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use testcontainers_logbook::{Logbook, LogbookContainer};

const TIMEOUT: Duration = Duration::from_secs(30);

/// `(offset, value)` of every record of partition 0 of `topic`, read from the beginning
/// until `count` have come, checking the partition holds exactly that many.
async fn read_partition(config: &ClientConfig, topic: &str, count: usize) -> Vec<(i64, String)> {
    let consumer: StreamConsumer = config
        .clone()
        .set("group.id", format!("reader-{topic}"))
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Beginning)
        .expect("assignment");
    consumer.assign(&assignment).expect("assign");
    let mut records = Vec::new();
    while records.len() < count {
        let message = tokio::time::timeout(TIMEOUT, consumer.recv())
            .await
            .unwrap_or_else(|_| panic!("record {} of {topic} within {TIMEOUT:?}", records.len()))
            .expect("no consumer error");
        records.push((message.offset(), payload(&message)));
    }
    let watermarks = consumer
        .fetch_watermarks(topic, 0, TIMEOUT)
        .expect("watermarks");
    assert_eq!(
        watermarks,
        (0, count as i64),
        "{topic}-0 holds exactly {count} records"
    );
    records
}

fn payload(message: &impl Message) -> String {
    String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned()
}

fn numbered(prefix: &str, range: std::ops::Range<i64>) -> Vec<(i64, String)> {
    range.map(|i| (i, format!("{prefix}{i}"))).collect()
}

#[tokio::test]
async fn records_round_trip_through_the_mapped_port() {
    let logbook = Logbook::default().start().await.expect("Logbook starts");
    let bootstrap = logbook.bootstrap_servers();
    assert!(
        logbook.network_bootstrap_servers().starts_with("logbook-")
            && logbook.network_bootstrap_servers().ends_with(":9093")
    );

    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .create()
        .expect("producer");
    let mut offsets = Vec::new();
    for i in 0..10 {
        let (key, value) = (format!("k{i}"), format!("v{i}"));
        let delivery = producer
            .send(
                FutureRecord::to("orders")
                    .partition(0)
                    .key(&key)
                    .payload(&value),
                TIMEOUT,
            )
            .await
            .expect("delivered");
        assert_eq!(delivery.partition, 0);
        offsets.push(delivery.offset);
    }
    assert_eq!(offsets, (0..10).collect::<Vec<i64>>());

    // A consumer group, as an application reads: the coordinator is reached through the
    // advertised address too.
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "round-trip")
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    consumer.subscribe(&["orders"]).expect("subscribe");
    let mut records = Vec::new();
    while records.len() < 10 {
        let message = tokio::time::timeout(TIMEOUT, consumer.recv())
            .await
            .expect("a record within 30 s")
            .expect("no consumer error");
        records.push((message.partition(), message.offset(), payload(&message)));
    }
    let expected: Vec<(i32, i64, String)> = (0..10).map(|i| (0, i, format!("v{i}"))).collect();
    assert_eq!(records, expected);
    assert_eq!(
        consumer
            .fetch_watermarks("orders", 0, TIMEOUT)
            .expect("watermarks"),
        (0, 10)
    );
}

#[tokio::test]
async fn no_message_lost_when_the_leader_moves() {
    let logbook = Logbook::default()
        .with_fault_injection()
        .start()
        .await
        .expect("Logbook starts");
    let bootstrap = logbook.bootstrap_servers();
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &bootstrap);
    assert_eq!(logbook.faults().expect("faults"), serde_json::json!([]));

    let admin: AdminClient<DefaultClientContext> = config.create().expect("admin");
    let created = admin
        .create_topics(
            &[NewTopic::new("out", 1, TopicReplication::Fixed(1))],
            &AdminOptions::new().operation_timeout(Some(TIMEOUT)),
        )
        .await
        .expect("CreateTopics");
    let expected: Vec<TopicResult> = vec![Ok("out".to_string())];
    assert_eq!(created, expected);

    // The leader goes away for 2 s, as in a leader election, while 100 records are sent.
    let unavailable = logbook
        .add_fault(r#"{"kind":"partition_unavailable","topic":"out","duration_ms":2000}"#)
        .expect("partition_unavailable armed");
    let producer: FutureProducer = config
        .clone()
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("message.timeout.ms", "60000")
        .create()
        .expect("producer");
    let pending: Vec<_> = (0..100)
        .map(|i| {
            let value = format!("m{i}");
            producer
                .send_result(
                    FutureRecord::<(), _>::to("out")
                        .partition(0)
                        .payload(&value),
                )
                .map_err(|(e, _)| e)
                .expect("queued")
        })
        .collect();
    let mut offsets = Vec::new();
    for (i, delivery) in pending.into_iter().enumerate() {
        let delivery = delivery
            .await
            .expect("delivery reported")
            .unwrap_or_else(|(e, _)| panic!("record m{i} not delivered: {e}"));
        offsets.push(delivery.offset);
    }
    assert_eq!(
        offsets,
        (0..100).collect::<Vec<i64>>(),
        "each record once, in order"
    );
    let listed = logbook.faults().expect("faults");
    let fault = find_fault(&listed, unavailable);
    assert!(
        fault["injected"].as_u64().expect("injected") >= 1,
        "the producer met the missing leader: {fault}"
    );
    assert_eq!(
        read_partition(&config, "out", 100).await,
        numbered("m", 0..100)
    );

    // Then the next 3 produces to "out" are refused with NOT_LEADER_OR_FOLLOWER: the
    // producer refreshes its metadata and retries until they land, once each.
    let refused = logbook
        .add_fault(
            r#"{"kind":"error","api":"Produce","topic":"out","error":"NOT_LEADER_OR_FOLLOWER","count":3}"#,
        )
        .expect("error fault armed");
    let mut offsets = Vec::new();
    for i in 100..105 {
        let value = format!("m{i}");
        let delivery = producer
            .send(
                FutureRecord::<(), _>::to("out")
                    .partition(0)
                    .payload(&value),
                TIMEOUT,
            )
            .await
            .unwrap_or_else(|(e, _)| panic!("record m{i} not delivered: {e}"));
        offsets.push(delivery.offset);
    }
    assert_eq!(offsets, (100..105).collect::<Vec<i64>>());
    let listed = logbook.faults().expect("faults");
    let fault = find_fault(&listed, refused);
    assert_eq!(fault["injected"], 3, "{fault}");
    assert_eq!(fault["armed"], false, "spent after 3: {fault}");
    assert_eq!(fault["error"], "NOT_LEADER_OR_FOLLOWER");
    assert_eq!(
        read_partition(&config, "out", 105).await,
        numbered("m", 0..105)
    );

    assert_eq!(logbook.clear_faults().expect("cleared"), 2);
    assert_eq!(logbook.faults().expect("faults"), serde_json::json!([]));
}

fn find_fault(listed: &serde_json::Value, id: u64) -> &serde_json::Value {
    listed
        .as_array()
        .expect("a JSON list")
        .iter()
        .find(|fault| fault["id"] == id)
        .unwrap_or_else(|| panic!("fault {id} in {listed}"))
}

/// Every error librdkafka reports outside a request: how a refused login shows.
#[derive(Clone, Default)]
struct Errors(Arc<Mutex<Vec<(KafkaError, String)>>>);

impl ClientContext for Errors {
    fn error(&self, error: KafkaError, reason: &str) {
        self.0
            .lock()
            .expect("errors")
            .push((error, reason.to_string()));
    }
}

/// Produces `value` to partition 0 of `topic` with acks=all; where it landed.
async fn produce_acked(config: &ClientConfig, topic: &str, value: &str) -> (i32, i64) {
    let producer: FutureProducer = config
        .clone()
        .set("acks", "all")
        .create()
        .expect("producer");
    let delivery = producer
        .send(
            FutureRecord::to(topic).partition(0).key("k").payload(value),
            TIMEOUT,
        )
        .await
        .unwrap_or_else(|(e, _)| panic!("{value:?} not delivered to {topic}: {e}"));
    (delivery.partition, delivery.offset)
}

/// Sends `value` to partition 0 of `topic` from a client the broker should refuse (5 s
/// message timeout): the send's error, if any, and every error librdkafka reported.
async fn produce_refused(
    config: &ClientConfig,
    topic: &str,
    value: &str,
) -> (Option<KafkaError>, Vec<(KafkaError, String)>) {
    let errors = Errors::default();
    let producer: FutureProducer<Errors> = config
        .clone()
        .set("message.timeout.ms", "5000")
        .create_with_context(errors.clone())
        .expect("producer");
    let sent = producer
        .send(
            FutureRecord::to(topic).partition(0).key("k").payload(value),
            TIMEOUT,
        )
        .await;
    drop(producer);
    let seen = errors.0.lock().expect("errors").clone();
    (sent.err().map(|(e, _)| e), seen)
}

/// Whether librdkafka reported `code` with a reason containing `text`.
fn reported(seen: &[(KafkaError, String)], code: RDKafkaErrorCode, text: &str) -> bool {
    seen.iter()
        .any(|(error, reason)| error.rdkafka_error_code() == Some(code) && reason.contains(text))
}

#[tokio::test]
async fn sasl_plain_users_are_checked() {
    let logbook = Logbook::default()
        .with_sasl_plain_user("alice", "secret")
        .start()
        .await
        .expect("Logbook starts");
    let sasl = |password: &str| {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", logbook.bootstrap_servers())
            .set("security.protocol", "SASL_PLAINTEXT")
            .set("sasl.mechanism", "PLAIN")
            .set("sasl.username", "alice")
            .set("sasl.password", password);
        config
    };

    assert_eq!(
        produce_acked(&sasl("secret"), "secured", "hello").await,
        (0, 0)
    );

    let (refused, seen) = produce_refused(&sasl("wrong"), "secured", "intrusion").await;
    assert!(refused.is_some(), "a wrong password produced");
    assert!(
        reported(
            &seen,
            RDKafkaErrorCode::Authentication,
            "Invalid username or password"
        ),
        "no authentication failure reported: {seen:?}"
    );

    assert_eq!(
        read_partition(&sasl("secret"), "secured", 1).await,
        vec![(0, "hello".to_string())],
        "only alice's record was written"
    );
}

#[tokio::test]
async fn the_bare_image_is_refused_with_a_pointer_to_start() {
    // Without Logbook::start/into_request no host port is chosen, so the broker could not
    // advertise a reachable address: the module stops it before it is handed out.
    use testcontainers::runners::AsyncRunner;
    let refused = AsyncRunner::start(Logbook::default()).await;
    let error = refused
        .expect_err("the bare image does not start")
        .to_string();
    assert!(error.contains("Logbook::start()"), "{error}");
}

/// A CA and a server certificate it signed, PEM: `(ca, server chain, server key)`. The server
/// certificate names every host a test may connect to: `localhost`, `127.0.0.1`, and
/// `TESTCONTAINERS_HOST_OVERRIDE` (the host of `bootstrap_servers()`), since librdkafka
/// checks the name (`ssl.endpoint.identification.algorithm=https` by default).
fn certificates(ca_name: &str) -> (String, String, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, ca_name);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);

    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    if let Ok(host) = std::env::var("TESTCONTAINERS_HOST_OVERRIDE") {
        if !host.trim().is_empty() && !names.contains(&host.trim().to_string()) {
            names.push(host.trim().to_string());
        }
    }
    let server_key = KeyPair::generate().expect("server key");
    let mut server_params = CertificateParams::new(names).expect("server params");
    server_params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let server = server_params
        .signed_by(&server_key, &issuer)
        .expect("server certificate");
    (ca.pem(), server.pem(), server_key.serialize_pem())
}

#[tokio::test]
async fn tls_serves_clients_that_trust_the_ca_and_refuses_others() {
    let (ca, chain, key) = certificates("logbook-test-ca");
    let logbook = Logbook::default()
        .with_tls(&chain, &key)
        .start()
        .await
        .expect("Logbook starts");
    let tls = |ca: &str| {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", logbook.bootstrap_servers())
            .set("security.protocol", "SSL")
            .set("ssl.ca.pem", ca);
        config
    };

    assert_eq!(
        produce_acked(&tls(&ca), "private", "over tls").await,
        (0, 0)
    );

    // A client trusting another CA fails the handshake: its record times out undelivered,
    // and librdkafka reports why (certificate verify failed).
    let (other_ca, _, _) = certificates("some-other-ca");
    let (refused, seen) =
        produce_refused(&tls(&other_ca), "private", "from an untrusting client").await;
    match refused {
        Some(KafkaError::MessageProduction(code)) => {
            assert_eq!(code, RDKafkaErrorCode::MessageTimedOut)
        }
        other => panic!("a client not trusting the CA produced: {other:?}"),
    }
    assert!(
        reported(&seen, RDKafkaErrorCode::SSL, "certificate verify failed"),
        "no TLS handshake failure reported: {seen:?}"
    );

    assert_eq!(
        read_partition(&tls(&ca), "private", 1).await,
        vec![(0, "over tls".to_string())],
        "only the trusting client's record was written"
    );
}

#[tokio::test]
async fn tls_with_sasl_plain_users_is_sasl_ssl() {
    let (ca, chain, key) = certificates("logbook-test-ca");
    let logbook = Logbook::default()
        .with_sasl_plain_user("alice", "secret")
        .with_tls(&chain, &key)
        .start()
        .await
        .expect("Logbook starts");
    let sasl_ssl = |password: &str| {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", logbook.bootstrap_servers())
            .set("security.protocol", "SASL_SSL")
            .set("ssl.ca.pem", &ca)
            .set("sasl.mechanism", "PLAIN")
            .set("sasl.username", "alice")
            .set("sasl.password", password);
        config
    };

    assert_eq!(
        produce_acked(&sasl_ssl("secret"), "secured", "sasl over tls").await,
        (0, 0)
    );

    // Past the handshake, the login is still checked.
    let (refused, seen) = produce_refused(&sasl_ssl("wrong"), "secured", "intrusion").await;
    assert!(refused.is_some(), "a wrong password produced");
    assert!(
        reported(
            &seen,
            RDKafkaErrorCode::Authentication,
            "Invalid username or password"
        ),
        "no authentication failure reported: {seen:?}"
    );

    assert_eq!(
        read_partition(&sasl_ssl("secret"), "secured", 1).await,
        vec![(0, "sasl over tls".to_string())],
        "only alice's record was written"
    );
}
