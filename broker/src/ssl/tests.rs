use super::*;

fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn refused(pairs: &[(&str, &str)], expected: &str) {
    let e = server_config(&ListenerName::new("SSL"), &settings(pairs)).expect_err(expected);
    assert!(e.contains(expected), "{e:?} lacks {expected:?}");
}

#[test]
fn security_settings_plain_and_per_listener() {
    assert!(is_ssl_setting("ssl.keystore.location"));
    assert!(is_ssl_setting("listener.name.internal.ssl.client.auth"));
    assert!(!is_ssl_setting("ssl.nonsense"));
    assert!(!is_ssl_setting("listener.name.internal.log.retention.ms"));
}

#[test]
fn what_cannot_be_served_is_refused_with_the_setting_named() {
    refused(&[], "ssl.keystore.type JKS is not supported");
    refused(
        &[("ssl.keystore.type", "PKCS12")],
        "ssl.keystore.type PKCS12",
    );
    refused(
        &[("ssl.keystore.type", "PEM")],
        "an SSL listener needs ssl.keystore.location",
    );
    refused(
        &[
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", "/nonexistent/keystore.pem"),
        ],
        "ssl.keystore.location /nonexistent/keystore.pem",
    );
    refused(
        &[
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", "/x"),
            ("ssl.key.password", "secret"),
        ],
        "encrypted private keys are not supported",
    );
    // The listener's own value wins over the plain one.
    refused(
        &[
            ("ssl.keystore.type", "PEM"),
            ("listener.name.ssl.ssl.keystore.type", "PKCS12"),
        ],
        "ssl.keystore.type PKCS12",
    );
    let provider = |suites: &str| {
        let s = settings(&[("ssl.cipher.suites", suites)]);
        provider(&ListenerSettings {
            settings: &s,
            prefix: String::new(),
        })
    };
    let narrowed = provider("TLS_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256")
        .expect("known suites");
    assert_eq!(narrowed.cipher_suites.len(), 2);
    assert!(provider("TLS_RSA_WITH_RC4_128_MD5").is_err());
    let s = settings(&[("ssl.enabled.protocols", "TLSv1.1")]);
    let versions = protocol_versions(&ListenerSettings {
        settings: &s,
        prefix: String::new(),
    });
    assert!(versions.is_err());
}
