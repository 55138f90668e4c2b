//! SASL listeners: librdkafka (rdkafka) with SASL/PLAIN over SASL_PLAINTEXT produces and
//! consumes with users from Kafka's JAAS syntax; a wrong password is refused with Kafka's
//! code and message after the failed-authentication delay, the connection closes, and the
//! broker keeps serving; a request before authentication closes the connection.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use integration_tests::{free_port, free_ports, Broker};
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

/// A broker with a PLAINTEXT listener and a SASL_PLAINTEXT one, with `settings` (Kafka
/// names) besides; returns it with the SASL port.
fn start_sasl_plaintext(settings: &[&str]) -> (Broker, u16) {
    let [plain, sasl] = free_ports();
    let listeners =
        format!("listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}");
    let mut args = vec!["--override", listeners.as_str()];
    for setting in settings {
        args.extend(["--override", setting]);
    }
    (Broker::start_on(plain, &args, &[]), sasl)
}

/// [`start_sasl_plaintext`] serving PLAIN for alice and bob (a password with a quote and
/// a semicolon, as JAAS escapes them), refusing after 300 ms.
fn start_with_sasl() -> (Broker, u16) {
    start_sasl_plaintext(&[
        "sasl.enabled.mechanisms=PLAIN",
        r#"listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_alice="alice-secret" user_bob="b\"ob;secret";"#,
        "connection.failed.authentication.delay.ms=300",
    ])
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
    // authentication closes the connection unanswered, and so does a 600 kB frame;
    // ApiVersions before it is answered
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
        broker.wait_for_log("failed authentication", std::time::Duration::from_secs(5)),
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

    // A frame larger than sasl.server.max.receive.size (512 KiB) before authentication
    // closes the connection as soon as its length is read.
    let mut stream = wire::connect(addr);
    std::io::Write::write_all(&mut stream, &600_000u32.to_be_bytes()).expect("send a length");
    wire::expect_closed(&mut stream, "an oversized frame before authentication");

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

/// The broker's resident set in kB (`VmRSS` of /proc/PID/status).
fn rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

#[test]
fn thousands_of_failed_logins_leave_the_broker_bounded_and_serving() {
    // Proves: 2,000 failed PLAIN logins from 40 concurrent clients (each answered
    // SASL_AUTHENTICATION_FAILED after the 100 ms delay, then closed) grow the broker's
    // resident memory by less than 32 MiB, while a good login on its own connection keeps
    // being served within a second each time, and after the storm a good login and the
    // PLAINTEXT listener still work.
    let (broker, sasl) = start_sasl_plaintext(&[
        "sasl.enabled.mechanisms=PLAIN",
        r#"listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";"#,
    ]);
    let addr: std::net::SocketAddr = format!("127.0.0.1:{sasl}").parse().expect("addr");
    let login = move |password: &'static [u8]| {
        let mut stream = wire::connect(addr);
        let shaken = wire::round_trip(
            &mut stream,
            1,
            1,
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        );
        assert_eq!(shaken.error_code, 0);
        let mut token = b"\0alice\0".to_vec();
        token.extend_from_slice(password);
        let answer = wire::round_trip(
            &mut stream,
            2,
            2,
            &SaslAuthenticateRequest::default().with_auth_bytes(bytes::Bytes::from(token)),
        );
        (stream, answer.error_code)
    };
    let before = rss_kb(broker.pid());
    let storm: Vec<_> = (0..40)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let (mut stream, code) = login(b"wrong");
                    assert_eq!(code, SASL_AUTHENTICATION_FAILED);
                    wire::expect_closed(&mut stream, "after a failed login");
                }
            })
        })
        .collect();
    let mut slowest = Duration::ZERO;
    while storm.iter().any(|t| !t.is_finished()) {
        let started = Instant::now();
        let (mut stream, code) = login(b"alice-secret");
        assert_eq!(code, 0);
        let metadata = wire::round_trip(&mut stream, 12, 3, &MetadataRequest::default());
        assert_eq!(metadata.brokers.len(), 1);
        slowest = slowest.max(started.elapsed());
        std::thread::sleep(Duration::from_millis(100));
    }
    for t in storm {
        t.join().expect("a storm thread");
    }
    let after = rss_kb(broker.pid());
    eprintln!("failed-login storm: RSS {before} kB -> {after} kB, slowest good login {slowest:?}");
    assert!(
        slowest < Duration::from_secs(1),
        "a good login took {slowest:?} during the storm"
    );
    assert!(
        after < before + 32 * 1024,
        "RSS grew from {before} kB to {after} kB over 2,000 failed logins"
    );
    let (_, code) = login(b"alice-secret");
    assert_eq!(code, 0);
    common::assert_round_trip(&broker.bootstrap(), "after-the-storm");
}

#[test]
fn kafka_configs_scram_users_and_java_clients_over_sasl_ssl() {
    // Proves (scripts/sasl-tools-test): Kafka's kafka-configs.sh adds SCRAM-SHA-256 and
    // SCRAM-SHA-512 credentials (AlterUserScramCredentials, kept in the metadata log) and
    // refuses two changes for one user in one request as Kafka does; Java kafka-clients
    // 4.x over SASL_SSL produce 3 records as alice with SCRAM-SHA-512 and consume them
    // back with SCRAM-SHA-256; a wrong password gets Kafka's SCRAM failure message; after
    // --delete-config SCRAM-SHA-512 that login is refused; console clients over mTLS
    // (ssl.client.auth=required, a PEM keystore) produce and read 3 records, and without a
    // client certificate are refused (SslAuthenticationException). The same script passes
    // against Apache Kafka 4.4 with SASL_TOOLS_KAFKA=1.
    common::run_script(
        "sasl-tools-test",
        &[],
        "sasl-tools-test: 1 passed, 0 failed",
    );
}

#[test]
fn user_scram_credentials_on_the_wire() {
    // Proves: AlterUserScramCredentials upserts a credential (any salted password; the
    // broker derives the keys) and DescribeUserScramCredentials then lists its mechanism
    // and iterations, never keys; a deletion of a credential that does not exist gets
    // RESOURCE_NOT_FOUND from the controller; too few iterations get
    // UNACCEPTABLE_CREDENTIAL; describing an unknown user gets RESOURCE_NOT_FOUND and a
    // user named twice DUPLICATE_RESOURCE, each with Kafka's message.
    use kafka_protocol::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    use kafka_protocol::messages::{
        AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
    };
    let broker = Broker::start();
    let mut stream = wire::connect(broker.addr());
    let name = |n: &'static str| StrBytes::from_static_str(n);
    let upsert = |user: &'static str, iterations: i32| {
        ScramCredentialUpsertion::default()
            .with_name(name(user))
            .with_mechanism(1)
            .with_iterations(iterations)
            .with_salt(bytes::Bytes::from_static(b"0123456789abcdef"))
            .with_salted_password(bytes::Bytes::from_static(&[7; 32]))
    };
    let altered = wire::round_trip(
        &mut stream,
        0,
        1,
        &AlterUserScramCredentialsRequest::default()
            .with_deletions(vec![ScramCredentialDeletion::default()
                .with_name(name("nobody"))
                .with_mechanism(2)])
            .with_upsertions(vec![upsert("alice", 8192), upsert("bob", 100)]),
    );
    let outcome = |user: &str| {
        let r = altered
            .results
            .iter()
            .find(|r| r.user.as_str() == user)
            .expect("a result per user");
        (
            r.error_code,
            r.error_message.as_deref().unwrap_or("").to_owned(),
        )
    };
    assert_eq!(outcome("alice"), (0, String::new()));
    assert_eq!(
        outcome("nobody"),
        (
            91,
            "Attempt to delete a user credential that does not exist".to_owned()
        )
    );
    assert_eq!(outcome("bob"), (93, "Too few iterations".to_owned()));

    // Deletions are validated first, as Kafka's ScramControlManager does: deleting a
    // credential that does not exist refuses the user, and its upsertion in the same
    // request is not looked at (it was DUPLICATE_RESOURCE); deleting one that exists and
    // upserting it again is DUPLICATE_RESOURCE. Neither changes anything.
    let both = wire::round_trip(
        &mut stream,
        0,
        4,
        &AlterUserScramCredentialsRequest::default()
            .with_deletions(vec![
                ScramCredentialDeletion::default()
                    .with_name(name("erin"))
                    .with_mechanism(1),
                ScramCredentialDeletion::default()
                    .with_name(name("alice"))
                    .with_mechanism(1),
            ])
            .with_upsertions(vec![upsert("erin", 8192), upsert("alice", 4096)]),
    );
    let mut codes: Vec<(String, i16, String)> = both
        .results
        .iter()
        .map(|r| {
            (
                r.user.to_string(),
                r.error_code,
                r.error_message.as_deref().unwrap_or("").to_owned(),
            )
        })
        .collect();
    codes.sort();
    assert_eq!(
        codes,
        [
            (
                "alice".to_owned(),
                92,
                "A user credential cannot be altered twice in the same request".to_owned()
            ),
            (
                "erin".to_owned(),
                91,
                "Attempt to delete a user credential that does not exist".to_owned()
            ),
        ]
    );

    let described = wire::round_trip(
        &mut stream,
        0,
        5,
        &DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
            UserName::default().with_name(name("alice")),
            UserName::default().with_name(name("carol")),
            UserName::default().with_name(name("dave")),
            UserName::default().with_name(name("dave")),
        ])),
    );
    assert_eq!(described.error_code, 0);
    // Kafka's messages name the user.
    let messages: Vec<&str> = described
        .results
        .iter()
        .map(|r| r.error_message.as_deref().unwrap_or(""))
        .collect();
    assert_eq!(
        messages,
        [
            "",
            "Attempt to describe a user credential that does not exist: carol",
            "Cannot describe SCRAM credentials for the same user twice in a single request: dave",
        ]
    );
    let summary: Vec<(String, i16, Vec<(i8, i32)>)> = described
        .results
        .iter()
        .map(|r| {
            let infos = r
                .credential_infos
                .iter()
                .map(|c| (c.mechanism, c.iterations))
                .collect();
            (r.user.to_string(), r.error_code, infos)
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("alice".to_owned(), 0, vec![(1, 8192)]),
            ("carol".to_owned(), 91, vec![]),
            ("dave".to_owned(), 92, vec![]),
        ]
    );
    let all = wire::round_trip(
        &mut stream,
        0,
        3,
        &DescribeUserScramCredentialsRequest::default(),
    );
    assert_eq!(all.results.len(), 1);
    assert_eq!(all.results[0].user.as_str(), "alice");
}

#[test]
fn oauthbearer_unsecured_jwts_on_the_wire() {
    // Proves: an unsecured JWT (alg none, sub=alice, exp ahead) in an RFC 7628
    // client-first message authenticates (empty answer) and Metadata is then served; an
    // expired token and a signed one (not served yet) get the error challenge
    // {"status":"invalid_token"}, and after the client's %x01 SASL_AUTHENTICATION_FAILED
    // with that message, then a close. (Java kafka-clients' OAUTHBEARER login is in
    // scripts/sasl-tools-test, librdkafka's in it::librdkafka_security.)
    use base64::Engine;
    let (_broker, sasl) = start_sasl_plaintext(&[
        "sasl.enabled.mechanisms=OAUTHBEARER",
        "connection.failed.authentication.delay.ms=0",
    ]);
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let addr: std::net::SocketAddr = format!("127.0.0.1:{sasl}").parse().expect("addr");
    let login = |header: &str, claims: &str| {
        let jwt = format!("{}.{}.", b64.encode(header), b64.encode(claims));
        let mut stream = wire::connect(addr);
        let shaken = wire::round_trip(
            &mut stream,
            1,
            1,
            &SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_static_str("OAUTHBEARER")),
        );
        assert_eq!(shaken.error_code, 0);
        let first = format!("n,,\u{1}auth=Bearer {jwt}\u{1}\u{1}");
        let answer = wire::round_trip(
            &mut stream,
            2,
            2,
            &SaslAuthenticateRequest::default()
                .with_auth_bytes(bytes::Bytes::from(first.into_bytes())),
        );
        (stream, answer)
    };
    let (mut stream, answer) = login(r#"{"alg":"none"}"#, r#"{"sub":"alice","exp":99999999999}"#);
    assert_eq!((answer.error_code, answer.auth_bytes.len()), (0, 0));
    let metadata = wire::round_trip(&mut stream, 12, 3, &MetadataRequest::default());
    assert_eq!(metadata.brokers[0].port, i32::from(sasl));

    for (header, claims) in [
        (r#"{"alg":"none"}"#, r#"{"sub":"alice","exp":1000}"#),
        (r#"{"alg":"RS256"}"#, r#"{"sub":"alice","exp":99999999999}"#),
    ] {
        let (mut stream, challenge) = login(header, claims);
        assert_eq!(challenge.error_code, 0);
        assert_eq!(&challenge.auth_bytes[..], br#"{"status":"invalid_token"}"#);
        let refused = wire::round_trip(
            &mut stream,
            2,
            3,
            &SaslAuthenticateRequest::default().with_auth_bytes(bytes::Bytes::from_static(b"\x01")),
        );
        assert_eq!(refused.error_code, SASL_AUTHENTICATION_FAILED);
        assert_eq!(
            refused.error_message.as_deref(),
            Some(r#"{"status":"invalid_token"}"#)
        );
        wire::expect_closed(&mut stream, "after a refused token");
    }
}

/// Runs `openssl` in `dir` with `stdin`; its stdout.
fn openssl_in(dir: &std::path::Path, args: &[&str], stdin: &[u8]) -> Vec<u8> {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run openssl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin)
        .expect("write to openssl");
    let output = child.wait_with_output().expect("openssl output");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

#[test]
fn oauthbearer_signed_jwts_against_a_jwks_endpoint() {
    // Proves: with Kafka's OAuthBearerValidatorCallbackHandler, a JWKS served over HTTP
    // (read at start), an expected audience and issuer: an RS256 token signed by the
    // JWKS's key (kid k1) authenticates as its sub and Metadata is served; an expired
    // token, one for another audience, one from another issuer, one without iat, one
    // signed by a key the JWKS does not hold, and an unsecured (alg none) token each get
    // {"status":"invalid_token"} and then SASL_AUTHENTICATION_FAILED.
    use base64::Engine;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let dir = tempfile::tempdir().expect("temporary directory");
    for key in ["key.pem", "other.pem"] {
        openssl_in(
            dir.path(),
            &[
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
                "-out",
                key,
            ],
            b"",
        );
    }
    let modulus = String::from_utf8(openssl_in(
        dir.path(),
        &["rsa", "-in", "key.pem", "-noout", "-modulus"],
        b"",
    ))
    .expect("modulus");
    let hex = modulus.trim().trim_start_matches("Modulus=");
    let n: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect();
    let jwks = format!(
        r#"{{"keys":[{{"kty":"RSA","kid":"k1","use":"sig","alg":"RS256","n":"{}","e":"AQAB"}}]}}"#,
        b64.encode(&n)
    );
    std::fs::write(dir.path().join("jwks.json"), jwks).expect("write the JWKS");
    let http_port = free_port();
    let mut server = std::process::Command::new("python3")
        .args([
            "-m",
            "http.server",
            &http_port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start python3 -m http.server");
    let up = integration_tests::cluster::wait_until(Duration::from_secs(10), || {
        std::net::TcpStream::connect(("127.0.0.1", http_port)).ok()
    });
    assert!(up.is_some(), "the JWKS server did not start");
    let url = format!(
        "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url=http://127.0.0.1:{http_port}/jwks.json"
    );
    let (_broker, sasl) = start_sasl_plaintext(&[
        "sasl.enabled.mechanisms=OAUTHBEARER",
        "connection.failed.authentication.delay.ms=0",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        &url,
        "sasl.oauthbearer.expected.audience=logbook,other",
        "sasl.oauthbearer.expected.issuer=https://issuer.test",
    ]);
    let _ = server.kill();
    let _ = server.wait();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs();
    let sign = |key: &str, header: &str, claims: &str| {
        let input = format!("{}.{}", b64.encode(header), b64.encode(claims));
        let signature = openssl_in(
            dir.path(),
            &["dgst", "-sha256", "-sign", key],
            input.as_bytes(),
        );
        format!("{input}.{}", b64.encode(signature))
    };
    let addr: std::net::SocketAddr = format!("127.0.0.1:{sasl}").parse().expect("addr");
    let login = |jwt: &str| {
        let mut stream = wire::connect(addr);
        let shaken = wire::round_trip(
            &mut stream,
            1,
            1,
            &SaslHandshakeRequest::default()
                .with_mechanism(StrBytes::from_static_str("OAUTHBEARER")),
        );
        assert_eq!(shaken.error_code, 0);
        let first = format!("n,,\u{1}auth=Bearer {jwt}\u{1}\u{1}");
        let answer = wire::round_trip(
            &mut stream,
            2,
            2,
            &SaslAuthenticateRequest::default()
                .with_auth_bytes(bytes::Bytes::from(first.into_bytes())),
        );
        (stream, answer)
    };
    let header = r#"{"alg":"RS256","kid":"k1","typ":"JWT"}"#;
    let claims = |aud: &str, iss: &str, iat: Option<u64>, exp: u64| {
        let iat = iat.map(|t| format!(r#","iat":{t}"#)).unwrap_or_default();
        format!(r#"{{"sub":"alice","aud":"{aud}","iss":"{iss}","exp":{exp}{iat}}}"#)
    };
    let good = sign(
        "key.pem",
        header,
        &claims("logbook", "https://issuer.test", Some(now), now + 3600),
    );
    let (mut stream, answer) = login(&good);
    assert_eq!((answer.error_code, answer.auth_bytes.len()), (0, 0));
    assert!(answer.session_lifetime_ms >= 0);
    let metadata = wire::round_trip(&mut stream, 12, 3, &MetadataRequest::default());
    assert_eq!(metadata.brokers[0].port, i32::from(sasl));

    let refused = [
        sign(
            "key.pem",
            header,
            &claims(
                "logbook",
                "https://issuer.test",
                Some(now - 7200),
                now - 3600,
            ),
        ),
        sign(
            "key.pem",
            header,
            &claims("elsewhere", "https://issuer.test", Some(now), now + 3600),
        ),
        sign(
            "key.pem",
            header,
            &claims("logbook", "https://evil.test", Some(now), now + 3600),
        ),
        sign(
            "key.pem",
            header,
            &claims("logbook", "https://issuer.test", None, now + 3600),
        ),
        sign(
            "other.pem",
            header,
            &claims("logbook", "https://issuer.test", Some(now), now + 3600),
        ),
        format!(
            "{}.{}.",
            b64.encode(r#"{"alg":"none"}"#),
            b64.encode(claims(
                "logbook",
                "https://issuer.test",
                Some(now),
                now + 3600
            ))
        ),
    ];
    for (i, jwt) in refused.iter().enumerate() {
        let (mut stream, challenge) = login(jwt);
        assert_eq!(
            (challenge.error_code, &challenge.auth_bytes[..]),
            (0, &br#"{"status":"invalid_token"}"#[..]),
            "token {i}"
        );
        let failed = wire::round_trip(
            &mut stream,
            2,
            3,
            &SaslAuthenticateRequest::default().with_auth_bytes(bytes::Bytes::from_static(b"\x01")),
        );
        assert_eq!(failed.error_code, SASL_AUTHENTICATION_FAILED, "token {i}");
        wire::expect_closed(&mut stream, "after a refused token");
    }
}

#[test]
fn java_clients_log_in_with_signed_jwts() {
    // Proves (scripts/oauth-tools-test): Java kafka-clients 4.x with Kafka's
    // OAuthBearerLoginCallbackHandler reading an RS256 token from a file log in to a
    // listener checking tokens against a JWKS (file: URL), produce one record and read it
    // back; a token signed by another key gets SaslAuthenticationException.
    common::run_script(
        "oauth-tools-test",
        &[],
        "oauth-tools-test: 3 passed, 0 failed",
    );
}

#[test]
fn logbook_user_tool_manages_scram_users() {
    // Proves: `logbook user add` (salt and PBKDF2 on the client, AlterUserScramCredentials)
    // makes a SCRAM-SHA-256 user that kafka-python logs in as over SASL_PLAINTEXT and
    // produces with (offset 0), while a wrong password is refused; `user list --json`
    // shows the mechanism and iterations; after `user delete` the list is empty, the login
    // is refused, and a second delete exits 1 with RESOURCE_NOT_FOUND.
    let (broker, sasl) = start_sasl_plaintext(&[
        "sasl.enabled.mechanisms=SCRAM-SHA-256",
        "connection.failed.authentication.delay.ms=0",
    ]);
    let tool = |args: &[&str]| {
        Command::new(integration_tests::broker_binary())
            .args(args)
            .args(["-b", &broker.bootstrap()])
            .output()
            .expect("run logbook")
    };
    let out = tool(&[
        "user",
        "add",
        "alice",
        "--mechanism",
        "SCRAM-SHA-256",
        "--password",
        "alice-secret",
        "--iterations",
        "8192",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = tool(&["user", "list", "--json"]);
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    assert_eq!(
        listed,
        serde_json::json!([{"user": "alice", "mechanism": "SCRAM-SHA-256", "iterations": 8192}])
    );

    let login = |password: &str| {
        let script = r"
import sys
from kafka import KafkaProducer
try:
    p = KafkaProducer(bootstrap_servers=sys.argv[1], security_protocol='SASL_PLAINTEXT',
                      sasl_mechanism='SCRAM-SHA-256', sasl_plain_username='alice',
                      sasl_plain_password=sys.argv[2], acks='all', max_block_ms=10000,
                      api_version_auto_timeout_ms=10000)
    m = p.send('scram-users', b'v').get(timeout=20)
    print('ok offset=%d' % m.offset)
except Exception as e:
    print('refused: %s' % type(e).__name__)
";
        let mut command = Command::new("python3");
        command
            .args(["-c", script, &format!("127.0.0.1:{sasl}"), password])
            .env("PYTHONPATH", crate::python_client::ensure_kafka_python());
        let out = crate::python_client::run_with_timeout(command, Duration::from_secs(60));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(login("alice-secret"), "ok offset=0");
    assert!(login("wrong").starts_with("refused: "), "a wrong password");

    let out = tool(&["user", "delete", "alice", "--mechanism", "SCRAM-SHA-256"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = tool(&["user", "list", "--json"]);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&listed.stdout).expect("JSON"),
        serde_json::json!([])
    );
    assert!(
        login("alice-secret").starts_with("refused: "),
        "a deleted user"
    );
    let again = tool(&["user", "delete", "alice"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("RESOURCE_NOT_FOUND"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
}

#[test]
fn kafkajs_scram_over_sasl_plaintext_and_sasl_ssl() {
    // Proves: kafkajs (its own SCRAM code, Node's TLS) logs in as alice, made at start with
    // --add-scram, with SCRAM-SHA-256 over SASL_PLAINTEXT and SCRAM-SHA-512 over SASL_SSL,
    // each producing 3 records at offsets 0..2 and reading them back in a group; a wrong
    // password gets kafkajs's SASL error carrying Kafka's SCRAM message.
    let dir = tempfile::tempdir().expect("tempdir");
    crate::tls::make_certificates(dir.path());
    let [plain, sasl, sasl_ssl] = free_ports();
    let listeners = format!(
        "listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},SASL_SSL://127.0.0.1:{sasl_ssl}"
    );
    let keystore = format!(
        "ssl.keystore.location={}",
        dir.path().join("broker.pem").display()
    );
    let mut args = Vec::new();
    for setting in [
        listeners.as_str(),
        "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512",
        "connection.failed.authentication.delay.ms=100",
        "ssl.keystore.type=PEM",
        keystore.as_str(),
    ] {
        args.extend(["--override", setting]);
    }
    args.extend([
        "--add-scram",
        "SCRAM-SHA-256=[name=alice,password=alice-secret]",
        "--add-scram",
        "SCRAM-SHA-512=[name=alice,password=alice-secret]",
    ]);
    let broker = Broker::start_on(plain, &args, &[]);

    // A package directory of its own: clients-txn-test runs `npm ci` in
    // integration-tests/kafkajs, which would pull node_modules from under this test.
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("kafkajs");
    let package = integration_tests::target_dir().join("kafkajs-scram");
    std::fs::create_dir_all(&package).expect("mkdir");
    for file in ["package.json", "package-lock.json", "scram.js"] {
        std::fs::copy(source.join(file), package.join(file)).expect("copy the kafkajs package");
    }
    if !package.join("node_modules/kafkajs").exists() {
        let out = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&package)
            .output()
            .expect("run npm (Node.js is on CI's machines)");
        assert!(
            out.status.success(),
            "npm ci: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut command = Command::new("node");
    command
        .arg(package.join("scram.js"))
        .arg(format!("127.0.0.1:{sasl}"))
        .arg(format!("127.0.0.1:{sasl_ssl}"))
        .arg(dir.path().join("ca.pem"))
        .args(["alice", "alice-secret"]);
    let out = crate::python_client::run_with_timeout(command, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let context = format!(
        "stdout:\n{stdout}\nstderr:\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        broker.log_tail()
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "scram256 ok offsets=0,1,2 values=v0,v1,v2",
            "scram512ssl ok offsets=0,1,2 values=v0,v1,v2",
            "wrong refused KafkaJSSASLAuthenticationError: SASL SCRAM SHA512 authentication failed: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
        ],
        "{context}"
    );
}
