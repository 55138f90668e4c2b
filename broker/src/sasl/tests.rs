use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiVersionsRequest, MetadataRequest, RequestHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Encodable, HeaderVersion, StrBytes};

use super::*;

fn frame<R: Encodable + HeaderVersion>(key: ApiKey, version: i16, body: &R) -> Bytes {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(StrBytes::from_static_str("test")))
        .encode(&mut buf, R::header_version(version))
        .expect("header");
    body.encode(&mut buf, version).expect("body");
    buf.freeze()
}

fn table() -> impl VersionTable {
    |key| crate::handlers::supported_at(key, 2)
}

/// A SASL_PLAINTEXT listener with PLAIN user alice and SCRAM-SHA-256 user bob.
fn listener(reauth_ms: u64) -> Arc<SaslListener> {
    struct Bob(ScramCredential);
    impl ScramCredentials for Bob {
        fn credential(&self, user: &str, m: ScramMechanism) -> Option<ScramCredential> {
            (user == "bob" && m == self.0.mechanism).then(|| self.0.clone())
        }
    }
    let m = ScramMechanism::Sha256;
    let salt = b"salt".to_vec();
    let bob = m.credential(
        salt.clone(),
        &m.salted_password(b"bob-secret", &salt, 4096),
        4096,
    );
    let settings: BTreeMap<String, String> = [
        ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256,GSSAPI"),
        (
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="x" user_alice="alice-secret";"#,
        ),
        ("connections.max.reauth.ms", &reauth_ms.to_string()),
        ("connection.failed.authentication.delay.ms", "25"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let name = ListenerName::new("SASL_PLAINTEXT");
    Arc::new(SaslListener::new(&name, &settings, None, Arc::new(Bob(bob))).expect("listener"))
}

fn peer() -> SocketAddr {
    "127.0.0.1:5000".parse().expect("addr")
}

fn handshake(a: &mut Authenticator, mechanism: &'static str, version: i16) -> Step {
    let body = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
    a.on_frame(&frame(ApiKey::SaslHandshake, version, &body), &table())
}

fn authenticate(a: &mut Authenticator, token: &[u8]) -> Step {
    let body = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
    a.on_frame(&frame(ApiKey::SaslAuthenticate, 2, &body), &table())
}

/// The SaslAuthenticate answer's error code, bytes, lifetime, delay, and whether it closes.
fn authenticate_answer(step: Step) -> (i16, Bytes, i64, Duration, bool) {
    match step {
        Step::Answer {
            answer:
                Answer::Response {
                    body: ResponseKind::SaslAuthenticate(r),
                    delay,
                    ..
                },
            close,
        } => (
            r.error_code,
            r.auth_bytes,
            r.session_lifetime_ms,
            delay,
            close,
        ),
        _ => panic!("expected a SaslAuthenticate answer"),
    }
}

// PLAIN: ApiVersions is served before authentication, other requests close the
// connection; the right password authenticates as User:alice; a wrong one is refused with
// Kafka's message after the delay, and the connection closes.
#[test]
fn plain_exchange() {
    let mut a = Authenticator::new(listener(0), peer());
    let versions = frame(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    assert!(matches!(a.on_frame(&versions, &table()), Step::Serve(p) if p.name == "ANONYMOUS"));
    let metadata = frame(ApiKey::Metadata, 12, &MetadataRequest::default());
    assert!(matches!(a.on_frame(&metadata, &table()), Step::Close));

    let mut a = Authenticator::new(listener(0), peer());
    match handshake(&mut a, "PLAIN", 1) {
        Step::Answer {
            answer:
                Answer::Response {
                    body: ResponseKind::SaslHandshake(r),
                    ..
                },
            close: false,
        } => {
            assert_eq!(r.error_code, 0);
            let names: Vec<&str> = r.mechanisms.iter().map(|m| m.as_str()).collect();
            assert_eq!(names, ["PLAIN", "SCRAM-SHA-256"]);
        }
        _ => panic!("handshake answer"),
    }
    assert!(matches!(a.on_frame(&metadata, &table()), Step::Close));
    let (code, _, lifetime, delay, close) =
        authenticate_answer(authenticate(&mut a, b"\0alice\0alice-secret"));
    assert_eq!(
        (code, lifetime, delay, close),
        (0, 0, Duration::ZERO, false)
    );
    assert!(a.is_authenticated());
    assert!(
        matches!(a.on_frame(&metadata, &table()), Step::Serve(p) if *p == KafkaPrincipal::user("alice"))
    );

    for (token, message) in [
        (&b"\0alice\0wrong"[..], "Authentication failed: Invalid username or password"),
        (b"\0mallory\0alice-secret", "Authentication failed: Invalid username or password"),
        (b"\0\0x", "Authentication failed: username not specified"),
        (b"bob\0alice\0alice-secret", "Authentication failed: Client requested an authorization id that is different from username"),
    ] {
        let mut a = Authenticator::new(listener(0), peer());
        handshake(&mut a, "PLAIN", 1);
        match authenticate(&mut a, token) {
            Step::Answer {
                answer: Answer::Response { body: ResponseKind::SaslAuthenticate(r), delay, .. },
                close: true,
            } => {
                assert_eq!(r.error_code, ResponseError::SaslAuthenticationFailed.code());
                assert_eq!(r.error_message.as_deref(), Some(message));
                assert_eq!(delay, Duration::from_millis(25));
            }
            _ => panic!("a refusal"),
        }
    }
}

// A mechanism not enabled gets UNSUPPORTED_SASL_MECHANISM and the enabled list, then the
// connection closes; after SaslHandshake v0 tokens are bare frames and answered bare.
#[test]
fn unsupported_mechanism_and_bare_tokens() {
    let mut a = Authenticator::new(listener(0), peer());
    match handshake(&mut a, "GSSAPI", 1) {
        Step::Answer {
            answer:
                Answer::Response {
                    body: ResponseKind::SaslHandshake(r),
                    ..
                },
            close: true,
        } => assert_eq!(r.error_code, ResponseError::UnsupportedSaslMechanism.code()),
        _ => panic!("refusal"),
    }
    let mut a = Authenticator::new(listener(0), peer());
    handshake(&mut a, "PLAIN", 0);
    match a.on_frame(&Bytes::from_static(b"\0alice\0alice-secret"), &table()) {
        Step::Answer {
            answer: Answer::Token(t),
            close: false,
        } => assert!(t.is_empty()),
        _ => panic!("bare answer"),
    }
    assert!(a.is_authenticated());
    let mut a = Authenticator::new(listener(0), peer());
    handshake(&mut a, "PLAIN", 0);
    assert!(matches!(
        a.on_frame(&Bytes::from_static(b"\0alice\0no"), &table()),
        Step::Close
    ));
}

// SCRAM-SHA-256 end to end with a client computed here; with connections.max.reauth.ms the
// session lifetime is told, re-authentication as the same user works, as another is
// refused.
#[test]
fn scram_exchange_and_reauthentication() {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD;
    let m = ScramMechanism::Sha256;
    let mut a = Authenticator::new(listener(60_000), peer());
    let login = |a: &mut Authenticator, password: &[u8]| {
        handshake(a, "SCRAM-SHA-256", 1);
        let client_first_bare = "n=bob,r=clientnonce";
        let (code, server_first, ..) = authenticate_answer(authenticate(
            a,
            format!("n,,{client_first_bare}").as_bytes(),
        ));
        assert_eq!(code, 0);
        let server_first = String::from_utf8(server_first.to_vec()).expect("utf8");
        let nonce = server_first
            .split(',')
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .expect("r")
            .to_string();
        assert!(nonce.starts_with("clientnonce") && nonce.len() > "clientnonce".len());
        let salted = m.salted_password(password, b"salt", 4096);
        let credential = m.credential(b"salt".to_vec(), &salted, 4096);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let client_key = m.hmac(&salted, b"Client Key");
        let signature = m.hmac(&credential.stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        let last = format!("{without_proof},p={}", b64.encode(proof));
        (
            authenticate_answer(authenticate(a, last.as_bytes())),
            credential,
            auth_message,
        )
    };
    let ((code, server_final, lifetime, _, close), credential, auth_message) =
        login(&mut a, b"bob-secret");
    assert_eq!((code, lifetime, close), (0, 60_000, false));
    let expected = format!(
        "v={}",
        b64.encode(m.hmac(&credential.server_key, auth_message.as_bytes()))
    );
    assert_eq!(server_final, expected.as_bytes());
    assert!(a.is_authenticated());
    // Re-authentication on the same connection.
    let ((code, ..), ..) = login(&mut a, b"bob-secret");
    assert_eq!(code, 0);
    assert!(a.is_authenticated());
    // A wrong password: Kafka's generic SCRAM message.
    let mut a = Authenticator::new(listener(0), peer());
    let ((code, _, _, delay, close), ..) = login(&mut a, b"wrong");
    assert_eq!(
        (code, delay, close),
        (
            ResponseError::SaslAuthenticationFailed.code(),
            Duration::from_millis(25),
            true
        )
    );
}

#[test]
fn settings_and_mechanisms() {
    assert!(is_sasl_setting("sasl.enabled.mechanisms"));
    assert!(is_sasl_setting(
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config"
    ));
    assert!(is_sasl_setting(
        "listener.name.sasl_ssl.connections.max.reauth.ms"
    ));
    assert!(!is_sasl_setting(
        "listener.name.sasl_ssl.plain.sasl.enabled.mechanisms"
    ));
    assert!(!is_sasl_setting("sasl.nonsense"));
    assert!(enabled_mechanisms(None).is_err());
    assert!(enabled_mechanisms(Some("NONSENSE")).is_err());
    assert_eq!(
        enabled_mechanisms(Some("oauthbearer,PLAIN")),
        Ok(vec![Mechanism::OAuthBearer, Mechanism::Plain])
    );
    // PLAIN without a JAAS configuration cannot start.
    let settings: BTreeMap<String, String> =
        [("sasl.enabled.mechanisms".to_string(), "PLAIN".to_string())].into();
    let e = SaslListener::new(
        &ListenerName::new("SASL_SSL"),
        &settings,
        None,
        Arc::new(NoScramCredentials),
    )
    .err()
    .expect("refused");
    assert!(
        e.contains("listener.name.sasl_ssl.plain.sasl.jaas.config"),
        "{e}"
    );
}
