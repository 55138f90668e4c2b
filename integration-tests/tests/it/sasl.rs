//! SASL listeners: librdkafka (rdkafka) with SASL/PLAIN over SASL_PLAINTEXT produces and
//! consumes with users from Kafka's JAAS syntax; a wrong password is refused with Kafka's
//! code and message after the failed-authentication delay, the connection closes, and the
//! broker keeps serving; a request before authentication closes the connection.

use std::time::{Duration, Instant};

use integration_tests::{free_port, Broker};
use kafka_protocol::messages::{
    ApiVersionsRequest, MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;

use crate::common::{self, Record};
use crate::wire;

/// Kafka's SASL_AUTHENTICATION_FAILED.
const SASL_AUTHENTICATION_FAILED: i16 = 58;
/// Kafka's UNSUPPORTED_SASL_MECHANISM.
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;

/// A broker with a PLAINTEXT listener and a SASL_PLAINTEXT one serving PLAIN for alice
/// and bob (a password with a quote and a semicolon, as JAAS escapes them); returns it
/// with the SASL port.
fn start_with_sasl() -> (Broker, u16) {
    let (plain, sasl) = (free_port(), free_port());
    let overrides = [
        format!("listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}"),
        "sasl.enabled.mechanisms=PLAIN".to_owned(),
        r#"listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_alice="alice-secret" user_bob="b\"ob;secret";"#.to_owned(),
        "connection.failed.authentication.delay.ms=300".to_owned(),
    ];
    let args: Vec<String> = overrides
        .into_iter()
        .flat_map(|o| ["--override".to_owned(), o])
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    (Broker::start_on(plain, &args, &[]), sasl)
}

fn sasl_client(user: &str, password: &str) -> Vec<(String, String)> {
    [
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.username", user),
        ("sasl.password", password),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect()
}

#[test]
fn rdkafka_plain_produces_and_consumes() {
    // Proves: librdkafka authenticated with SASL/PLAIN on the SASL_PLAINTEXT listener gets
    // 4 acks=all records acknowledged at offsets 0..3 and reads them back; the metadata it
    // is given names the SASL listener's port (not the PLAINTEXT one); a user whose
    // password holds JAAS-escaped characters logs in too.
    let (broker, sasl) = start_with_sasl();
    let bootstrap = format!("127.0.0.1:{sasl}");
    common::create_topic(&broker.bootstrap(), "sasl-plain", 1, &[]);
    for (user, password, topic_offset) in [("alice", "alice-secret", 0), ("bob", "b\"ob;secret", 4)]
    {
        let config = sasl_client(user, password);
        let extra: Vec<(&str, &str)> = config
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let producer = common::producer(&bootstrap, &[&extra[..], &[("acks", "all")]].concat());
        let records: Vec<Record> = (0..4)
            .map(|i| Record::new(0, format!("k{i}"), format!("{user}-{i}")))
            .collect();
        let deliveries = common::produce_all(&producer, "sasl-plain", &records);
        let offsets: Vec<i64> = deliveries
            .iter()
            .map(|d| {
                d.result
                    .as_ref()
                    .map(|(_, offset)| *offset)
                    .expect("delivered")
            })
            .collect();
        assert_eq!(
            offsets,
            (topic_offset..topic_offset + 4).collect::<Vec<i64>>()
        );
        let consumed = common::consume(&bootstrap, "sasl-plain", 0, topic_offset, 4, &extra);
        common::assert_records(&consumed, &records, topic_offset);
        let consumer = common::consumer(&bootstrap, &extra);
        let metadata =
            rdkafka::consumer::Consumer::fetch_metadata(&consumer, None, Duration::from_secs(10))
                .expect("metadata over SASL");
        let ports: Vec<i32> = metadata
            .brokers()
            .iter()
            .map(rdkafka::metadata::MetadataBroker::port)
            .collect();
        assert_eq!(ports, [i32::from(sasl)]);
    }
}

#[test]
fn wrong_password_is_refused_after_the_delay_and_others_are_served() {
    // Proves: on the wire, SaslHandshake v1 lists PLAIN; a wrong password gets
    // SASL_AUTHENTICATION_FAILED with Kafka's message no sooner than
    // connection.failed.authentication.delay.ms (300 ms), then the connection closes;
    // an unknown mechanism gets UNSUPPORTED_SASL_MECHANISM and a close; Metadata before
    // authentication closes the connection unanswered; ApiVersions before it is answered
    // and lists SaslHandshake and SaslAuthenticate; a good login on a new connection and
    // the PLAINTEXT listener are served throughout.
    let (broker, sasl) = start_with_sasl();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{sasl}").parse().expect("addr");
    let handshake = |mechanism: &'static str| {
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism))
    };

    let mut stream = wire::connect(addr);
    let versions = wire::round_trip(&mut stream, 3, 1, &ApiVersionsRequest::default());
    let listed = |key: i16| versions.api_keys.iter().any(|k| k.api_key == key);
    assert!(
        listed(17) && listed(36),
        "SaslHandshake and SaslAuthenticate listed"
    );
    let shaken = wire::round_trip(&mut stream, 1, 2, &handshake("PLAIN"));
    assert_eq!(shaken.error_code, 0);
    assert_eq!(
        shaken
            .mechanisms
            .iter()
            .map(|m| m.as_str())
            .collect::<Vec<_>>(),
        ["PLAIN"]
    );
    let started = Instant::now();
    let refused = wire::round_trip(
        &mut stream,
        2,
        3,
        &SaslAuthenticateRequest::default()
            .with_auth_bytes(bytes::Bytes::from_static(b"\0alice\0wrong")),
    );
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "answered after {:?}",
        started.elapsed()
    );
    assert_eq!(refused.error_code, SASL_AUTHENTICATION_FAILED);
    assert_eq!(
        refused.error_message.as_deref(),
        Some("Authentication failed: Invalid username or password")
    );
    wire::expect_closed(&mut stream, "after a failed authentication");
    assert!(
        broker.log().contains("failed authentication"),
        "{}",
        broker.log_tail()
    );

    let mut stream = wire::connect(addr);
    let shaken = wire::round_trip(&mut stream, 1, 1, &handshake("SCRAM-SHA-512"));
    assert_eq!(shaken.error_code, UNSUPPORTED_SASL_MECHANISM);
    wire::expect_closed(&mut stream, "after an unsupported mechanism");

    let mut stream = wire::connect(addr);
    std::io::Write::write_all(
        &mut stream,
        &wire::request_frame(12, 1, &MetadataRequest::default()),
    )
    .expect("send");
    wire::expect_closed(&mut stream, "Metadata before authentication");

    let mut stream = wire::connect(addr);
    wire::round_trip(&mut stream, 1, 1, &handshake("PLAIN"));
    let ok = wire::round_trip(
        &mut stream,
        2,
        2,
        &SaslAuthenticateRequest::default()
            .with_auth_bytes(bytes::Bytes::from_static(b"\0alice\0alice-secret")),
    );
    assert_eq!((ok.error_code, ok.session_lifetime_ms), (0, 0));
    let metadata = wire::round_trip(&mut stream, 12, 3, &MetadataRequest::default());
    assert_eq!(metadata.brokers.len(), 1);
    assert_eq!(metadata.brokers[0].port, i32::from(sasl));
    common::assert_round_trip(&broker.bootstrap(), "beside-sasl");
}
