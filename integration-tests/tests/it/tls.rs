//! SSL listeners (rustls): kafka-python produces and consumes over TLS with the broker's
//! certificate checked against a CA; mTLS (`ssl.client.auth=required`) admits a client
//! certificate the trust store signed and refuses a client without one; plain bytes sent
//! to the SSL port close the connection while the PLAINTEXT listener beside it serves.
//!
//! Certificates are made with the `openssl` command line for each test.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use integration_tests::{free_ports, Broker};

use crate::python_client::{ensure_kafka_python, run_with_timeout};

/// How long the client script may run.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(90);

pub(crate) fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl (the tests make their certificates with it)");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A CA of its own in `<dir>/other` (`ca.pem`, `ca.key`), which never signed the broker's
/// certificate: a client that trusts only it must be refused. Returns that directory.
pub(crate) fn make_untrusted_ca(dir: &Path) -> PathBuf {
    let other = dir.join("other");
    std::fs::create_dir_all(&other).expect("mkdir");
    openssl(
        &other,
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
            "/CN=other-ca",
        ],
    );
    other
}

/// A CA (`ca.pem`), the broker's PEM keystore (`broker.pem`: key then certificate, for
/// 127.0.0.1 and localhost) and a client certificate (`client.pem`, `client.key`), all
/// signed by the CA, in `dir`.
pub(crate) fn make_certificates(dir: &Path) {
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
    for (name, san) in [
        ("broker", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
        ("client", "subjectAltName=DNS:client"),
    ] {
        let subject = format!("/CN={name}");
        let (key, csr, cert, ext) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.crt"),
            format!("{name}.ext"),
        );
        std::fs::write(dir.join(&ext), format!("{san}\n")).expect("write the extension file");
        openssl(
            dir,
            &[
                "req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj",
                &subject,
            ],
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &cert,
                "-days",
                "2",
                "-extfile",
                &ext,
            ],
        );
    }
    let key = std::fs::read_to_string(dir.join("broker.key")).expect("broker key");
    let cert = std::fs::read_to_string(dir.join("broker.crt")).expect("broker cert");
    std::fs::write(dir.join("broker.pem"), format!("{key}{cert}")).expect("write the keystore");
    std::fs::copy(dir.join("client.crt"), dir.join("client.pem")).expect("client cert");
}

/// A new broker certificate for 127.0.0.1 with common name `cn`, signed by the CA of
/// [`make_certificates`]; returns its keystore (key then certificate) as PEM.
fn renewed_keystore(dir: &Path, cn: &str) -> String {
    let subject = format!("/CN={cn}");
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "renewed.key",
            "-out",
            "renewed.csr",
            "-subj",
            &subject,
        ],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "renewed.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "renewed.crt",
            "-days",
            "2",
            "-extfile",
            "broker.ext",
        ],
    );
    let key = std::fs::read_to_string(dir.join("renewed.key")).expect("key");
    let cert = std::fs::read_to_string(dir.join("renewed.crt")).expect("cert");
    format!("{key}{cert}")
}

/// The common name of the certificate the server at `port` presents (Python's ssl,
/// checking it against `ca`).
fn served_common_name(port: u16, ca: &Path) -> String {
    let script = r"
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[2])
with socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10) as raw:
    with ctx.wrap_socket(raw, server_hostname='127.0.0.1') as tls:
        print(dict(x[0] for x in tls.getpeercert()['subject'])['commonName'])
";
    let output = Command::new("python3")
        .args(["-c", script, &port.to_string()])
        .arg(ca)
        .output()
        .expect("run python3");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// Runs tls_client.py against `bootstrap`; its one-line answer.
fn python_client(bootstrap: &str, ca: &Path, client: Option<(&Path, &Path)>) -> String {
    let pythonpath = ensure_kafka_python();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/tls_client.py");
    let mut command = Command::new("python3");
    command.arg(&script).arg(bootstrap).arg(ca);
    if let Some((cert, key)) = client {
        command.arg(cert).arg(key);
    }
    command
        .env("PYTHONPATH", &pythonpath)
        .env("PYTHONUNBUFFERED", "1");
    let output = run_with_timeout(command, SCRIPT_TIMEOUT);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "tls_client.py failed with {}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        output.status
    );
    stdout.trim().to_owned()
}

/// A broker with a PLAINTEXT listener and an SSL one (its keystore `dir/broker.pem`, and
/// `extra` overrides); returns it with the SSL port.
fn start_with_ssl(dir: &Path, extra: &[String]) -> (Broker, u16) {
    let [plain, ssl] = free_ports();
    let keystore: PathBuf = dir.join("broker.pem");
    let mut overrides = vec![
        format!("listeners=PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl}"),
        "ssl.keystore.type=PEM".to_owned(),
        format!("ssl.keystore.location={}", keystore.display()),
    ];
    overrides.extend(extra.iter().cloned());
    let args: Vec<String> = overrides
        .into_iter()
        .flat_map(|o| ["--override".to_owned(), o])
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    (Broker::start_on(plain, &args, &[]), ssl)
}

#[test]
fn kafka_python_produces_and_consumes_over_tls() {
    // Proves: over the SSL listener kafka-python (checking the broker's certificate and
    // host name against the CA) gets 5 acks=all records acknowledged at offsets 0..4 and
    // reads them back in order; plain Kafka bytes sent to the SSL port close the
    // connection, and the PLAINTEXT listener beside it still answers.
    let dir = tempfile::tempdir().expect("tempdir");
    make_certificates(dir.path());
    let (broker, ssl) = start_with_ssl(dir.path(), &[]);
    let answer = python_client(
        &format!("127.0.0.1:{ssl}"),
        &dir.path().join("ca.pem"),
        None,
    );
    assert_eq!(answer, "ok values=v0,v1,v2,v3,v4 offsets=0..4");

    let ssl_addr: std::net::SocketAddr = format!("127.0.0.1:{ssl}").parse().expect("addr");
    let mut stream = crate::wire::connect(ssl_addr);
    let frame = crate::wire::request_frame(
        3,
        1,
        &kafka_protocol::messages::ApiVersionsRequest::default(),
    );
    std::io::Write::write_all(&mut stream, &frame).expect("send plain bytes");
    crate::wire::expect_closed(&mut stream, "plain Kafka bytes on the SSL listener");
    crate::common::assert_round_trip(&broker.bootstrap(), "beside-tls");
}

#[test]
fn mutual_tls_admits_a_signed_client_and_refuses_one_without_a_certificate() {
    // Proves: with ssl.client.auth=required and the CA as trust store, kafka-python with a
    // client certificate the CA signed produces and consumes; without one it never gets
    // a connection (refused), and the broker logs the failed handshake.
    let dir = tempfile::tempdir().expect("tempdir");
    make_certificates(dir.path());
    let truststore = dir.path().join("ca.pem");
    let (broker, ssl) = start_with_ssl(
        dir.path(),
        &[
            "ssl.client.auth=required".to_owned(),
            "ssl.truststore.type=PEM".to_owned(),
            format!("ssl.truststore.location={}", truststore.display()),
        ],
    );
    let bootstrap = format!("127.0.0.1:{ssl}");
    let cert = dir.path().join("client.pem");
    let key = dir.path().join("client.key");
    let answer = python_client(&bootstrap, &truststore, Some((&cert, &key)));
    assert_eq!(answer, "ok values=v0,v1,v2,v3,v4 offsets=0..4");
    let answer = python_client(&bootstrap, &truststore, None);
    assert!(answer.starts_with("refused: "), "{answer}");
    assert!(
        broker.wait_for_log("TLS handshake failed", std::time::Duration::from_secs(5)),
        "{}",
        broker.log_tail()
    );
}

#[test]
fn a_renewed_keystore_file_is_served_without_a_restart() {
    // Proves: replacing the keystore file (renamed into place, as certificate tools do)
    // makes new connections get the new certificate within about a second, with no
    // restart; a replacement that is not a keystore keeps the last good certificate and
    // the broker says why.
    let dir = tempfile::tempdir().expect("tempdir");
    make_certificates(dir.path());
    let ca = dir.path().join("ca.pem");
    let (broker, ssl) = start_with_ssl(dir.path(), &[]);
    assert_eq!(served_common_name(ssl, &ca), "broker");

    let keystore = dir.path().join("broker.pem");
    let replace = |content: &str| {
        let staged = dir.path().join("broker.pem.new");
        std::fs::write(&staged, content).expect("stage the keystore");
        std::fs::rename(&staged, &keystore).expect("replace the keystore");
    };
    replace(&renewed_keystore(dir.path(), "broker-renewed"));
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(served_common_name(ssl, &ca), "broker-renewed");

    replace("not a keystore\n");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(served_common_name(ssl, &ca), "broker-renewed");
    assert!(
        broker
            .log()
            .contains("the changed TLS keystore cannot be used"),
        "{}",
        broker.log_tail()
    );
}

#[test]
fn pkcs12_keystore_and_trust_store() {
    // Proves: the broker reads its key and certificate from a PKCS12 keystore and the
    // trusted CA from a PKCS12 trust store (both as `openssl pkcs12 -export` writes them,
    // opened with their passwords); with ssl.client.auth=required a CA-signed client
    // produces and consumes through it; a wrong keystore password stops the start.
    let dir = tempfile::tempdir().expect("tempdir");
    make_certificates(dir.path());
    openssl(
        dir.path(),
        &[
            "pkcs12",
            "-export",
            "-in",
            "broker.crt",
            "-inkey",
            "broker.key",
            "-certfile",
            "ca.pem",
            "-out",
            "broker.p12",
            "-passout",
            "pass:changeit",
        ],
    );
    openssl(
        dir.path(),
        &[
            "pkcs12",
            "-export",
            "-nokeys",
            "-in",
            "ca.pem",
            "-out",
            "trust.p12",
            "-passout",
            "pass:trustit",
        ],
    );
    let stores = |keystore_password: &str| {
        vec![
            "ssl.keystore.type=PKCS12".to_owned(),
            format!(
                "ssl.keystore.location={}",
                dir.path().join("broker.p12").display()
            ),
            format!("ssl.keystore.password={keystore_password}"),
            "ssl.client.auth=required".to_owned(),
            "ssl.truststore.type=PKCS12".to_owned(),
            format!(
                "ssl.truststore.location={}",
                dir.path().join("trust.p12").display()
            ),
            "ssl.truststore.password=trustit".to_owned(),
        ]
    };
    let (_broker, ssl) = start_with_ssl(dir.path(), &stores("changeit"));
    let cert = dir.path().join("client.pem");
    let key = dir.path().join("client.key");
    let answer = python_client(
        &format!("127.0.0.1:{ssl}"),
        &dir.path().join("ca.pem"),
        Some((&cert, &key)),
    );
    assert_eq!(answer, "ok values=v0,v1,v2,v3,v4 offsets=0..4");

    let mut args = vec![
        "--data-dir".to_owned(),
        dir.path().join("unused").display().to_string(),
        "--override".to_owned(),
        "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0".to_owned(),
    ];
    for o in stores("wrong") {
        args.extend(["--override".to_owned(), o]);
    }
    let output = Command::new(integration_tests::broker_binary())
        .args(&args)
        .output()
        .expect("run the broker");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("wrong ssl.keystore.password?"), "{stderr}");
}

#[test]
fn logbook_tools_over_tls_and_a_stalled_handshake() {
    // Proves: `logbook topic create/list --command-config` with security.protocol=SSL and
    // the CA as a PEM trust store works over the SSL listener (rustls on both ends); a
    // trust store without that CA is refused (exit 3, the certificate named unknown); a
    // client that opens a TCP connection to the SSL port and never starts the handshake is
    // closed after connections.max.idle.ms (500 ms here), while others are served.
    let dir = tempfile::tempdir().expect("tempdir");
    make_certificates(dir.path());
    let (broker, ssl) = start_with_ssl(dir.path(), &["connections.max.idle.ms=500".to_owned()]);
    let config = |name: &str, ca: &Path| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                "security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={}\n",
                ca.display()
            ),
        )
        .expect("write the config");
        path
    };
    let good = config("ssl.properties", &dir.path().join("ca.pem"));
    let bootstrap = format!("127.0.0.1:{ssl}");
    let tool = |args: &[&str], config: &Path| {
        let out = std::process::Command::new(integration_tests::broker_binary())
            .args(args)
            .args(["-b", &bootstrap, "--command-config"])
            .arg(config)
            .output()
            .expect("run logbook");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let out = tool(&["topic", "create", "over-tls", "--partitions", "2"], &good);
    assert_eq!(out.0, Some(0), "{out:?}");
    let out = tool(&["topic", "list", "--json"], &good);
    assert!(out.1.contains("over-tls"), "{out:?}");

    // A CA of its own, which never signed the broker's certificate.
    let other = make_untrusted_ca(dir.path());
    let stranger = config("stranger.properties", &other.join("ca.pem"));
    let out = tool(&["topic", "list"], &stranger);
    assert_eq!(out.0, Some(3), "{out:?}");
    assert!(out.2.contains("UnknownIssuer"), "{out:?}");

    let started = std::time::Instant::now();
    let mut stalled = std::net::TcpStream::connect(("127.0.0.1", ssl)).expect("connect");
    crate::wire::expect_closed(&mut stalled, "a handshake that never starts");
    let waited = started.elapsed();
    assert!(
        waited >= std::time::Duration::from_millis(400)
            && waited < std::time::Duration::from_secs(5),
        "closed after {waited:?}"
    );
    assert!(
        broker.wait_for_log(
            "TLS handshake not finished in time",
            std::time::Duration::from_secs(5)
        ),
        "{}",
        broker.log_tail()
    );
    crate::common::assert_round_trip(&broker.bootstrap(), "beside-a-stalled-handshake");
}
