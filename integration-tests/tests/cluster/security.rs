//! Three nodes with SASL_SSL on every listener: clients, replica fetches between brokers
//! and the controller quorum (Raft, registrations, heartbeats) all run over TLS with a
//! SASL/PLAIN login, and a PLAINTEXT client gets nothing.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use integration_tests::cluster::{wait_until, Cluster, ClusterSpec};
use integration_tests::target_dir;

const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#;

fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl (the test makes its certificates with it)");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A CA (`ca.pem`) and one keystore every node serves (`broker.pem`, for 127.0.0.1).
fn make_certificates(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=logbook-test-ca",
        ],
    );
    std::fs::write(
        dir.join("broker.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .expect("write the extension file");
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "broker.key",
            "-out",
            "broker.csr",
            "-subj",
            "/CN=broker",
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "broker.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "broker.crt",
            "-days",
            "2",
            "-extfile",
            "broker.ext",
        ],
    );
    let key = std::fs::read_to_string(dir.join("broker.key")).expect("broker key");
    let cert = std::fs::read_to_string(dir.join("broker.crt")).expect("broker cert");
    std::fs::write(dir.join("broker.pem"), format!("{key}{cert}")).expect("write the keystore");
}

/// Where kafka-python is (the CI script installs it; installed here when it is not).
fn pythonpath() -> std::path::PathBuf {
    let pydeps = target_dir().join("pydeps");
    let importable = |p: &Path| {
        Command::new("python3")
            .args(["-c", "import kafka"])
            .env("PYTHONPATH", p)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !importable(&pydeps) {
        let status = Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(["--no-input", "--target"])
            .arg(&pydeps)
            .arg("kafka-python==2.3.3")
            .status()
            .expect("run pip");
        assert!(status.success() && importable(&pydeps), "kafka-python");
    }
    pydeps
}

/// One step of `sasl_ssl_cluster.py` against `bootstrap` as `user`; its output line.
fn client(bootstrap: &str, ca: &Path, (user, password): (&str, &str), step: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/sasl_ssl_cluster.py");
    let output = Command::new("timeout")
        .arg("120")
        .arg("python3")
        .arg(script)
        .args([bootstrap, &ca.display().to_string(), user, password])
        .args(step)
        .env("PYTHONPATH", pythonpath())
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_string();
    assert!(
        output.status.success(),
        "sasl_ssl_cluster.py {step:?}: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

const ADMIN: (&str, &str) = ("admin", "admin-secret");

/// Partition 0's leader and ISR as kafka-python's admin client describes them over
/// SASL_SSL.
fn leader_and_isr(bootstrap: &str, ca: &Path, topic: &str) -> (i32, String) {
    let line = client(bootstrap, ca, ADMIN, &["describe", topic]);
    let (leader, isr) = line
        .strip_prefix("leader ")
        .and_then(|rest| rest.split_once(" isr "))
        .unwrap_or_else(|| panic!("describe printed {line}"));
    (leader.parse().expect("a leader id"), isr.to_string())
}

#[test]
fn sasl_ssl_on_every_listener_replicates_fails_over_and_refuses_plaintext() {
    // Proves: with the client listener (PLAINTEXT name mapped to SASL_SSL), the
    // inter-broker listener (the same) and the controller listener all SASL_SSL with PLAIN,
    // the quorum forms and the brokers register (over TLS + SASL to the controllers);
    // kafka-python over SASL_SSL creates an RF=3 topic whose ISR is all three (followers
    // fetch over TLS + SASL), 20 acks=all records are acknowledged at offsets 0..19 and a
    // consumer group reads them; after the leader is killed, 10 more are acknowledged at
    // 20..29 through another node and the group reads exactly those from its committed
    // offset; the killed node restarts and is back in the ISR. A wrong password is
    // refused, and Kafka bytes sent in the clear get no Kafka answer (the TLS handshake
    // fails and the connection closes). With the StandardAuthorizer and super.users=
    // User:admin, the nodes (admin on every listener) are served on the controller
    // listener, while alice, who logs in there but has no CLUSTER_ACTION on the cluster,
    // is closed before any controller frame, as Kafka's ControllerApis refuses her.
    let _serial = crate::serial();
    let certs = tempfile::tempdir().expect("certificate directory");
    make_certificates(certs.path());
    let ca = certs.path().join("ca.pem");
    let mut spec = ClusterSpec::quorum(3);
    for setting in [
        "listener.security.protocol.map=PLAINTEXT:SASL_SSL,CONTROLLER:SASL_SSL".to_string(),
        "sasl.enabled.mechanisms=PLAIN".to_string(),
        "sasl.mechanism.inter.broker.protocol=PLAIN".to_string(),
        "sasl.mechanism.controller.protocol=PLAIN".to_string(),
        "ssl.keystore.type=PEM".to_string(),
        format!(
            "ssl.keystore.location={}",
            certs.path().join("broker.pem").display()
        ),
        "ssl.truststore.type=PEM".to_string(),
        format!("ssl.truststore.location={}", ca.display()),
        format!("listener.name.plaintext.plain.sasl.jaas.config={JAAS}"),
        format!("listener.name.controller.plain.sasl.jaas.config={JAAS}"),
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer".to_string(),
        "super.users=User:admin".to_string(),
    ] {
        spec.extra_args.extend(["--override".to_string(), setting]);
    }
    let mut cluster = Cluster::start(&spec);
    let bootstrap = cluster.bootstrap();
    let brokers = wait_until(Duration::from_secs(30), || {
        let line = client(&bootstrap, &ca, ADMIN, &["login"]);
        (line == "brokers 3").then_some(line)
    });
    assert!(brokers.is_some(), "{}", cluster.log_tails());
    assert!(
        client(&bootstrap, &ca, ("admin", "wrong"), &["login"]).starts_with("refused:"),
        "a wrong password logs in"
    );

    assert_eq!(
        client(&bootstrap, &ca, ADMIN, &["create", "secure"]),
        "created secure"
    );
    let in_sync = wait_until(Duration::from_secs(30), || {
        (leader_and_isr(&bootstrap, &ca, "secure").1 == "1,2,3").then_some(())
    });
    assert!(in_sync.is_some(), "{}", cluster.log_tails());
    let offsets: Vec<String> = (0..20).map(|o| o.to_string()).collect();
    assert_eq!(
        client(&bootstrap, &ca, ADMIN, &["produce", "secure", "0", "20"]),
        format!("produced {}", offsets.join(","))
    );
    let values: Vec<String> = (0..20).map(|v| format!("v{v}")).collect();
    assert_eq!(
        client(&bootstrap, &ca, ADMIN, &["consume", "secure", "g", "20"]),
        format!("consumed {}", values.join(","))
    );

    let (leader, _) = leader_and_isr(&bootstrap, &ca, "secure");
    cluster.node_mut(leader).kill();
    let other = cluster
        .nodes()
        .iter()
        .find(|n| n.node_id() != leader)
        .expect("a live node")
        .bootstrap();
    let offsets: Vec<String> = (20..30).map(|o| o.to_string()).collect();
    assert_eq!(
        client(&other, &ca, ADMIN, &["produce", "secure", "20", "10"]),
        format!("produced {}", offsets.join(",")),
        "{}",
        cluster.log_tails()
    );
    let values: Vec<String> = (20..30).map(|v| format!("v{v}")).collect();
    assert_eq!(
        client(&other, &ca, ADMIN, &["consume", "secure", "g", "10"]),
        format!("consumed {}", values.join(","))
    );
    cluster.node_mut(leader).restart();
    let back = wait_until(Duration::from_secs(30), || {
        (leader_and_isr(&other, &ca, "secure").1 == "1,2,3").then_some(())
    });
    assert!(back.is_some(), "{}", cluster.log_tails());

    // The controller listener: admin (a super user) is kept, alice is closed.
    let controller = format!("127.0.0.1:{}", cluster.node(1).controller_port());
    assert_eq!(
        client(&controller, &ca, ADMIN, &["controller"]),
        "authenticated, kept open"
    );
    assert_eq!(
        client(&controller, &ca, ("alice", "alice-secret"), &["controller"]),
        "authenticated, closed"
    );
    assert!(
        cluster
            .node(1)
            .log()
            .contains("User:alice may not CLUSTER_ACTION on the cluster"),
        "{}",
        cluster.node(1).log_tail()
    );

    // Kafka bytes in the clear: an ApiVersions v0 request.
    let mut plain = std::net::TcpStream::connect(cluster.node(leader).addr()).expect("connect");
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    plain
        .write_all(&[0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 7, 0, 0])
        .expect("write");
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    assert!(
        answer.first().is_none_or(|&b| b == 0x15),
        "a cleartext request got {answer:?}, not a TLS alert or a close"
    );
}
