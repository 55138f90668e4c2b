//! `--command-config FILE`: the client security settings of Kafka's tools, in Kafka's
//! client properties format (`security.protocol`, `sasl.mechanism`, `sasl.jaas.config`,
//! `ssl.truststore.*`, `ssl.keystore.*`), so the file a `kafka-topics.sh --command-config`
//! reads works here unchanged. Served: PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL; PLAIN
//! and SCRAM-SHA-256/512 logins; PEM trust and key stores (file or inline). Anything else
//! a secured connection would need is refused with a message rather than ignored.

use std::collections::BTreeMap;
use std::sync::Arc;

use logbook_client::security::{ConnectionSecurity, SaslLogin, SaslMechanism};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::client::CliError;

/// Reads a Java properties file: `key=value` or `key:value` lines, `#` and `!`
/// comments, a trailing `\` continuing a line.
///
/// # Errors
/// The file cannot be read.
pub fn read_properties(path: &str) -> Result<BTreeMap<String, String>, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Failed(format!("--command-config {path}: {e}")))?;
    Ok(parse_properties(&text))
}

fn parse_properties(text: &str) -> BTreeMap<String, String> {
    let mut properties = BTreeMap::new();
    let mut pending = String::new();
    for line in text.lines() {
        let line = line.trim_start();
        if pending.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
        {
            continue;
        }
        if let Some(continued) = line.strip_suffix('\\') {
            pending.push_str(continued);
            continue;
        }
        pending.push_str(line);
        let entry = std::mem::take(&mut pending);
        let split = entry.find(['=', ':']).unwrap_or(entry.len());
        let (key, value) = entry.split_at(split);
        let value = value.get(1..).unwrap_or("");
        properties.insert(key.trim().to_string(), value.trim().to_string());
    }
    properties
}

/// The connection security the properties describe.
///
/// # Errors
/// A protocol, mechanism or store type not served, or a file that cannot be read.
pub fn security(properties: &BTreeMap<String, String>) -> Result<ConnectionSecurity, CliError> {
    let get = |key: &str| {
        properties
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    let protocol = get("security.protocol")
        .unwrap_or("PLAINTEXT")
        .to_ascii_uppercase();
    let (tls, sasl) = match protocol.as_str() {
        "PLAINTEXT" => (false, false),
        "SSL" => (true, false),
        "SASL_PLAINTEXT" => (false, true),
        "SASL_SSL" => (true, true),
        other => {
            return Err(CliError::Failed(format!(
                "security.protocol {other} is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"
            )))
        }
    };
    Ok(ConnectionSecurity {
        tls: if tls { Some(tls_config(&get)?) } else { None },
        sasl: if sasl { Some(sasl_login(&get)?) } else { None },
    })
}

fn failed(message: String) -> CliError {
    CliError::Failed(message)
}

fn sasl_login<'a>(get: &impl Fn(&str) -> Option<&'a str>) -> Result<SaslLogin, CliError> {
    let mechanism =
        SaslMechanism::parse(get("sasl.mechanism").unwrap_or("GSSAPI")).map_err(failed)?;
    let jaas = get("sasl.jaas.config")
        .ok_or_else(|| failed("a SASL protocol needs sasl.jaas.config".to_string()))?;
    let modules = logbook_common::jaas::parse_config(jaas)
        .map_err(|e| failed(format!("sasl.jaas.config: {e}")))?;
    let options = &modules[0].options;
    let field = |name: &str| {
        options
            .get(name)
            .cloned()
            .ok_or_else(|| failed(format!("sasl.jaas.config has no {name}")))
    };
    Ok(SaslLogin {
        mechanism,
        username: field("username")?,
        password: field("password")?,
    })
}

fn tls_config<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
) -> Result<Arc<rustls::ClientConfig>, CliError> {
    for key in ["ssl.truststore.type", "ssl.keystore.type"] {
        if let Some(kind) = get(key) {
            if !kind.eq_ignore_ascii_case("PEM") {
                return Err(failed(format!(
                    "{key}={kind}: only PEM stores are read here"
                )));
            }
        }
    }
    let pem = |location: &str, inline: &str| -> Result<Option<Vec<u8>>, CliError> {
        match (get(inline), get(location)) {
            (Some(text), _) => Ok(Some(text.as_bytes().to_vec())),
            (None, Some(path)) => std::fs::read(path)
                .map(Some)
                .map_err(|e| failed(format!("{location} {path}: {e}"))),
            (None, None) => Ok(None),
        }
    };
    let mut roots = rustls::RootCertStore::empty();
    let trusted =
        pem("ssl.truststore.location", "ssl.truststore.certificates")?.ok_or_else(|| {
            failed("TLS needs ssl.truststore.location (a PEM file of CA certificates)".to_string())
        })?;
    for cert in CertificateDer::pem_slice_iter(&trusted) {
        let cert = cert.map_err(|e| failed(format!("trust store: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| failed(format!("trust store: {e}")))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| failed(format!("TLS: {e}")))?
        .with_root_certificates(roots);
    let config = match pem("ssl.keystore.location", "ssl.keystore.key")? {
        None => builder.with_no_client_auth(),
        Some(key_pem) => {
            let chain_pem = pem("ssl.keystore.location", "ssl.keystore.certificate.chain")?
                .unwrap_or_else(|| key_pem.clone());
            let chain = CertificateDer::pem_slice_iter(&chain_pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| failed(format!("key store: {e}")))?;
            let key = PrivateKeyDer::from_pem_slice(&key_pem)
                .map_err(|e| failed(format!("key store key: {e}")))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| failed(format!("key store: {e}")))?
        }
    };
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_client_properties() {
        let p = parse_properties(
            "# a comment\nsecurity.protocol = SASL_PLAINTEXT\nsasl.mechanism:SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \\\n  required username=\"admin\" password=\"a=b\";\n",
        );
        let secured = security(&p).expect("security");
        assert!(secured.tls.is_none());
        let login = secured.sasl.expect("a SASL login");
        assert_eq!(login.mechanism, SaslMechanism::ScramSha512);
        assert_eq!(
            (login.username.as_str(), login.password.as_str()),
            ("admin", "a=b")
        );
        let plain = parse_properties("security.protocol=PLAINTEXT\n");
        assert!(security_is_plain(&plain));
        let bad = parse_properties("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n");
        assert!(security(&bad).is_err());
    }

    fn security_is_plain(p: &BTreeMap<String, String>) -> bool {
        security(p).is_ok_and(|s| s.tls.is_none() && s.sasl.is_none())
    }
}
