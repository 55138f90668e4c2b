//! librdkafka built with OpenSSL (the confluent-kafka wheel; the suite's own rdkafka has
//! no OpenSSL, so SCRAM, SSL and the unsecured-JWT builder need this build) against one
//! broker with PLAINTEXT, SASL_PLAINTEXT and SSL listeners: PLAIN, SCRAM-SHA-256 (the user
//! made with librdkafka's AlterUserScramCredentials), OAUTHBEARER with an unsecured JWT,
//! and SSL each produce and consume; a wrong password, an unknown user, an expired token
//! and an untrusted certificate are each refused with Kafka's error, and the broker keeps
//! serving. The client script is `tests/python/librdkafka_security.py`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use integration_tests::{free_ports, Broker};

use crate::python_client::{ensure_python_package, run_with_timeout};
use crate::tls::{make_certificates, make_untrusted_ca};

/// The confluent-kafka release (librdkafka 2.x with OpenSSL) the test installs.
const CONFLUENT_KAFKA: &str = "confluent-kafka==2.16.1";

#[test]
fn librdkafka_plain_scram_oauthbearer_and_ssl() {
    let dir = tempfile::tempdir().expect("tempdir");
    make_certificates(dir.path());
    let other = make_untrusted_ca(dir.path());
    let [plain, sasl, ssl] = free_ports();
    let listeners = format!(
        "listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},SSL://127.0.0.1:{ssl}"
    );
    let keystore = format!(
        "ssl.keystore.location={}",
        dir.path().join("broker.pem").display()
    );
    let mut args = Vec::new();
    for setting in [
        listeners.as_str(),
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        r#"listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";"#,
        "connection.failed.authentication.delay.ms=100",
        "ssl.keystore.type=PEM",
        keystore.as_str(),
    ] {
        args.extend(["--override", setting]);
    }
    let broker = Broker::start_on(plain, &args, &[]);

    let sasl_bootstrap = format!("127.0.0.1:{sasl}");
    let ssl_bootstrap = format!("127.0.0.1:{ssl}");
    let plain_bootstrap = format!("127.0.0.1:{plain}");
    let sasl_case = |name: &str, mechanism: &str, user: &str, password: &str| {
        serde_json::json!({
            "name": name,
            "bootstrap": sasl_bootstrap,
            "config": {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism,
                "sasl.username": user,
                "sasl.password": password,
            },
        })
    };
    let oauth_case = |name: &str, extra: serde_json::Value| {
        let mut config = serde_json::json!({
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
        });
        for (k, v) in extra.as_object().expect("object") {
            config[k] = v.clone();
        }
        serde_json::json!({"name": name, "bootstrap": sasl_bootstrap, "config": config})
    };
    let ssl_case = |name: &str, ca: &Path| {
        serde_json::json!({
            "name": name,
            "bootstrap": ssl_bootstrap,
            "config": {
                "security.protocol": "SSL",
                "ssl.ca.location": ca.display().to_string(),
            },
        })
    };
    let mut scram = sasl_case("scram256", "SCRAM-SHA-256", "carol", "carol-secret");
    scram["scram_user"] = serde_json::json!(["carol", "carol-secret", plain_bootstrap]);
    let cases = serde_json::json!([
        sasl_case("plain", "PLAIN", "alice", "alice-secret"),
        scram,
        oauth_case(
            "oauth",
            serde_json::json!({
                "enable.sasl.oauthbearer.unsecure.jwt": true,
                "sasl.oauthbearer.config": "principal=bob",
            })
        ),
        ssl_case("ssl", &dir.path().join("ca.pem")),
        sasl_case("plainwrong", "PLAIN", "alice", "wrong"),
        sasl_case("scramwrong", "SCRAM-SHA-256", "carol", "wrong"),
        sasl_case("scramunknown", "SCRAM-SHA-512", "mallory", "x"),
        oauth_case(
            "oauthexpired",
            serde_json::json!({"test.token": ["bob", 1000]})
        ),
        ssl_case("sslstranger", &other.join("ca.pem")),
    ]);

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/librdkafka_security.py");
    let mut command = Command::new("python3");
    command.arg(&script).arg(cases.to_string()).env(
        "PYTHONPATH",
        ensure_python_package(CONFLUENT_KAFKA, "confluent_kafka", "pydeps-confluent-kafka"),
    );
    let out = run_with_timeout(command, Duration::from_secs(240));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let lines: Vec<&str> = stdout.lines().collect();
    let context = format!(
        "stdout:\n{stdout}\nstderr:\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        broker.log_tail()
    );
    assert_eq!(lines.len(), 10, "{context}");
    assert_eq!(
        &lines[..5],
        &[
            "plain ok offsets=0..2 values=v0,v1,v2",
            "scram256-admin ok",
            "scram256 ok offsets=0..2 values=v0,v1,v2",
            "oauth ok offsets=0..2 values=v0,v1,v2",
            "ssl ok offsets=0..2 values=v0,v1,v2",
        ],
        "{context}"
    );
    // librdkafka reports the broker's SaslAuthenticate message as _AUTHENTICATION, after
    // "<broker>/bootstrap: " and before its own "(after N ms in state AUTH_REQ)".
    for (line, (prefix, message)) in lines[5..].iter().zip([
        ("plainwrong refused _AUTHENTICATION", "SASL authentication error: Authentication failed: Invalid username or password ("),
        ("scramwrong refused _AUTHENTICATION", "SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256 ("),
        ("scramunknown refused _AUTHENTICATION", "SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 ("),
        ("oauthexpired refused _AUTHENTICATION", "SASL authentication error: {\"status\":\"invalid_token\"} ("),
        ("sslstranger refused _SSL", "SSL handshake failed: error:0A000086:SSL routines::certificate verify failed"),
    ]) {
        assert!(
            line.starts_with(prefix) && line.contains(message),
            "{line:?} is not {prefix:?} with {message:?}\n{context}"
        );
    }
    crate::common::assert_round_trip(&broker.bootstrap(), "after-the-refusals");
}
