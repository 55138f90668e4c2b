//! TLS for SSL listeners (Kafka's `SslFactory` / `DefaultSslEngineFactory`), with rustls:
//! the server certificate and key from a PEM keystore, the trust store that client
//! certificates are checked against, `ssl.client.auth`, `ssl.enabled.protocols` and
//! `ssl.cipher.suites`, each read first under the listener's own prefix
//! (`listener.name.<name>.ssl.…`) and then unprefixed, as Kafka looks them up.
//!
//! Why rustls: no OpenSSL in the image. Keystores and trust stores are PEM (KIP-651's
//! `ssl.keystore.type=PEM`, what every certificate tool produces) or PKCS12 (opened with
//! `ssl.keystore.password` / `ssl.truststore.password`). JKS (Kafka's default type) cannot
//! be read without a Java keystore parser and is refused with a message saying what to use.
//! A PEM key must be unencrypted (`ssl.key.password` is refused): rustls reads only
//! unencrypted PKCS#8, PKCS#1 and SEC1 keys.
//!
//! A keystore file is reloaded when it changes (checked at most once a second, on a new
//! connection's handshake), so a renewed certificate is served without a restart; a
//! replacement that cannot be read keeps the previous certificate and logs why. Inline
//! keystores and the trust store are read once.
//!
//! The principal of a client that presents a certificate is its subject, mapped by
//! `ssl.principal.mapping.rules` ([`principal`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig, SupportedCipherSuite, SupportedProtocolVersion};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::listeners::ListenerName;

pub mod principal;

/// The `ssl.*` settings Logbook reads (also under a `listener.name.<name>.` prefix).
pub const SETTINGS: &[&str] = &[
    "ssl.cipher.suites",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm",
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.principal.mapping.rules",
    "ssl.protocol",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
];

/// Whether `key` is one of [`SETTINGS`], plain or under a listener's prefix.
#[must_use]
pub fn is_ssl_setting(key: &str) -> bool {
    SETTINGS.contains(&crate::listeners::without_listener_prefix(key))
}

/// One listener's view of the security settings: its prefixed value first, then the
/// plain one, as Kafka looks up `listener.name.<name>.` settings.
pub(crate) struct ListenerSettings<'a> {
    pub(crate) settings: &'a BTreeMap<String, String>,
    prefix: String,
}

impl<'a> ListenerSettings<'a> {
    /// `listener`'s view of `settings`.
    pub(crate) fn new(listener: &ListenerName, settings: &'a BTreeMap<String, String>) -> Self {
        ListenerSettings {
            settings,
            prefix: listener.config_prefix(),
        }
    }

    /// The listener's own value of `name` only (no fallback to the plain setting).
    pub(crate) fn get_prefixed(&self, name: &str) -> Option<&str> {
        self.settings
            .get(&format!("{}{name}", self.prefix))
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// The listener's value of `name`, else the plain one; empty values count as unset.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.settings
            .get(&format!("{}{name}", self.prefix))
            .or_else(|| self.settings.get(name))
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }
}

/// The TLS server configuration of SSL listener `listener` from `settings` (the `ssl.*`
/// values as given).
///
/// # Errors
/// A message naming the setting that is missing, unreadable or not supported; the broker
/// must not start.
pub fn server_config(
    listener: &ListenerName,
    settings: &BTreeMap<String, String>,
) -> Result<Arc<ServerConfig>, String> {
    let s = ListenerSettings {
        settings,
        prefix: listener.config_prefix(),
    };
    let provider = Arc::new(provider(&s)?);
    let keystore = Keystore::load(&s, Arc::clone(&provider))?;
    let versions = protocol_versions(&s)?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| format!("ssl.enabled.protocols: {e}"))?;
    let client_auth = s
        .get("ssl.client.auth")
        .unwrap_or("none")
        .to_ascii_lowercase();
    let builder = match client_auth.as_str() {
        "none" => builder.with_no_client_auth(),
        "requested" | "required" => {
            let roots = Arc::new(truststore(&s)?);
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider);
            let verifier = if client_auth == "requested" {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("ssl.truststore: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
        other => {
            return Err(format!(
                "ssl.client.auth {other}: expected none, requested or required"
            ))
        }
    };
    let config = builder.with_cert_resolver(Arc::new(keystore));
    Ok(Arc::new(config))
}

/// The TLS client configuration a broker connects with to listener `listener` of another
/// node (replica fetch and transaction markers on the inter-broker listener, Raft and
/// heartbeats on the controller listener), from that listener's own settings, as Kafka's
/// inter-broker `SslFactory` in client mode: its trust store checks the other node's
/// certificate, its keystore (when there is one) is presented for `ssl.client.auth`, and
/// `ssl.endpoint.identification.algorithm` set empty skips the host name check (Kafka's
/// default `https` keeps it).
///
/// # Errors
/// A message naming the setting that is missing, unreadable or not supported.
pub fn client_config(
    listener: &ListenerName,
    settings: &BTreeMap<String, String>,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let s = ListenerSettings {
        settings,
        prefix: listener.config_prefix(),
    };
    let provider = Arc::new(provider(&s)?);
    let roots = Arc::new(truststore(&s).map_err(|e| {
        format!("{e} (a broker checks the certificate of the node it connects to against it)")
    })?);
    let versions = protocol_versions(&s)?;
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| format!("ssl.enabled.protocols: {e}"))?;
    let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider)
        .build()
        .map_err(|e| format!("ssl.truststore: {e}"))?;
    // Kafka reads an empty value as "no host name check"; `s.get` drops empty values.
    let identification = settings
        .get(&format!(
            "{}ssl.endpoint.identification.algorithm",
            s.prefix
        ))
        .or_else(|| settings.get("ssl.endpoint.identification.algorithm"))
        .map(|v| v.trim().to_ascii_lowercase());
    let builder = match identification.as_deref() {
        None | Some("https") => builder.with_webpki_verifier(webpki),
        Some("") => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyHostName(webpki))),
        Some(other) => {
            return Err(format!(
                "ssl.endpoint.identification.algorithm {other}: expected https or empty"
            ))
        }
    };
    let has_keystore = ["ssl.keystore.location", "ssl.keystore.certificate.chain"]
        .iter()
        .any(|k| s.get(k).is_some());
    let config = if has_keystore {
        let (chain, key) = keystore(&s)?;
        builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| format!("the keystore's key and certificate: {e}"))?
    } else {
        builder.with_no_client_auth()
    };
    Ok(Arc::new(config))
}

/// The trust store's check of a server certificate, without its host name check
/// (`ssl.endpoint.identification.algorithm=`): the chain, validity and signatures are
/// still checked.
#[derive(Debug)]
struct AnyHostName(Arc<rustls::client::WebPkiServerVerifier>);

impl rustls::client::danger::ServerCertVerifier for AnyHostName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &rustls_pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// How often a keystore file is looked at for a change, at most.
const RELOAD_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The server certificate, reloaded from `ssl.keystore.location` when the file changes.
#[derive(Debug)]
struct Keystore {
    /// The file, for a keystore given by location.
    path: Option<PathBuf>,
    format: KeystoreFormat,
    provider: Arc<rustls::crypto::CryptoProvider>,
    state: Mutex<KeystoreState>,
}

#[derive(Debug)]
struct KeystoreState {
    key: Arc<CertifiedKey>,
    /// The file's modification time and length when `key` was read.
    version: Option<(SystemTime, u64)>,
    checked: Instant,
}

impl Keystore {
    fn load(
        s: &ListenerSettings<'_>,
        provider: Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<Self, String> {
        let (chain, key) = keystore(s)?;
        let format = KeystoreFormat::of(s)?;
        let path = s.get("ssl.keystore.location").map(PathBuf::from);
        let version = path.as_ref().and_then(|p| file_version(p));
        let key = certified(chain, key, &provider)?;
        Ok(Keystore {
            path,
            format,
            provider,
            state: Mutex::new(KeystoreState {
                key,
                version,
                checked: Instant::now(),
            }),
        })
    }

    /// Re-reads the keystore file if it changed since it was read.
    fn refresh(&self, state: &mut KeystoreState) {
        let Some(path) = &self.path else { return };
        if state.checked.elapsed() < RELOAD_CHECK_INTERVAL {
            return;
        }
        state.checked = Instant::now();
        let version = file_version(path);
        if version.is_none() || version == state.version {
            return;
        }
        let reloaded = std::fs::read(path)
            .map_err(|e| e.to_string())
            .and_then(|data| self.format.parse(&data))
            .and_then(|(chain, key)| certified(chain, key, &self.provider));
        match reloaded {
            Ok(key) => {
                state.key = key;
                state.version = version;
                tracing::info!(path = %path.display(), "reloaded the TLS keystore");
            }
            Err(e) => {
                // Logged once per change: a half-written file is retried on the next one.
                state.version = version;
                tracing::warn!(path = %path.display(), error = %e, "the changed TLS keystore cannot be used; serving the previous certificate");
            }
        }
    }
}

impl ResolvesServerCert for Keystore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut state = self.state.lock();
        self.refresh(&mut state);
        Some(Arc::clone(&state.key))
    }
}

fn file_version(path: &std::path::Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

fn certified(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    provider: &rustls::crypto::CryptoProvider,
) -> Result<Arc<CertifiedKey>, String> {
    CertifiedKey::from_der(chain, key, provider)
        .map(Arc::new)
        .map_err(|e| format!("the keystore's key and certificate: {e}"))
}

/// The certificate chain and key: `ssl.keystore.location` (a PEM file holding both), or
/// `ssl.keystore.certificate.chain` and `ssl.keystore.key` given inline.
fn keystore(s: &ListenerSettings<'_>) -> Result<KeyPair, String> {
    let format = KeystoreFormat::of(s)?;
    if let KeystoreFormat::Pkcs12 { .. } = format {
        let path = s
            .get("ssl.keystore.location")
            .ok_or("ssl.keystore.type PKCS12 needs ssl.keystore.location")?;
        let data = std::fs::read(path).map_err(|e| format!("ssl.keystore.location {path}: {e}"))?;
        return format.parse(&data);
    }
    if s.get("ssl.key.password").is_some() {
        return Err("ssl.key.password: encrypted private keys are not supported; give the key unencrypted (PKCS#8)".into());
    }
    let pem = match (
        s.get("ssl.keystore.location"),
        s.get("ssl.keystore.certificate.chain"),
        s.get("ssl.keystore.key"),
    ) {
        (Some(path), None, None) => std::fs::read(path)
            .map_err(|e| format!("ssl.keystore.location {path}: {e}"))?,
        (None, Some(chain), Some(key)) => format!("{chain}\n{key}").into_bytes(),
        _ => {
            return Err("an SSL listener needs ssl.keystore.location, or ssl.keystore.certificate.chain with ssl.keystore.key".into())
        }
    };
    format.parse(&pem)
}

/// A certificate chain and its private key.
type KeyPair = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// How a keystore file is read (`ssl.keystore.type`).
#[derive(Clone, Debug)]
enum KeystoreFormat {
    /// PEM: unencrypted key and certificates.
    Pem,
    /// PKCS#12, opened with `ssl.keystore.password`.
    Pkcs12 { password: String },
}

impl KeystoreFormat {
    fn of(s: &ListenerSettings<'_>) -> Result<Self, String> {
        let kind = s
            .get("ssl.keystore.type")
            .unwrap_or("JKS")
            .to_ascii_uppercase();
        match kind.as_str() {
            "PEM" => Ok(KeystoreFormat::Pem),
            "PKCS12" => {
                let password = s.get("ssl.keystore.password").unwrap_or_default().to_owned();
                // One password opens a PKCS#12 file here; Kafka's separate key password is
                // accepted only when it is the same.
                if s.get("ssl.key.password").is_some_and(|k| k != password) {
                    return Err("ssl.key.password differs from ssl.keystore.password: a PKCS12 keystore whose key has its own password is not supported".into());
                }
                Ok(KeystoreFormat::Pkcs12 { password })
            }
            _ => Err(format!(
                "ssl.keystore.type {kind} is not supported: use ssl.keystore.type=PEM (a PEM file in ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key) or PKCS12"
            )),
        }
    }

    fn parse(&self, data: &[u8]) -> Result<KeyPair, String> {
        match self {
            KeystoreFormat::Pem => parse_keystore(data),
            KeystoreFormat::Pkcs12 { password } => parse_pkcs12_keystore(data, password),
        }
    }
}

/// The key of a PKCS#12 keystore and its chain: the certificate bag with the key's local
/// key id first (else the first one), then the others in file order.
fn parse_pkcs12_keystore(data: &[u8], password: &str) -> Result<KeyPair, String> {
    let archive = p12_keystore::Pkcs12Archive::from_pkcs12(data, password)
        .map_err(|e| format!("the PKCS12 keystore (wrong ssl.keystore.password?): {e}"))?;
    let key = archive
        .keys
        .first()
        .ok_or("the PKCS12 keystore holds no private key")?;
    let key_id = key.local_key_id.as_ref().map(|id| id.0.as_slice());
    let leaf = archive
        .certs
        .iter()
        .position(|c| key_id.is_some() && c.local_key_id.as_deref() == key_id)
        .unwrap_or(0);
    if archive.certs.is_empty() {
        return Err("the PKCS12 keystore holds no certificate".into());
    }
    let mut chain = vec![CertificateDer::from(
        archive.certs[leaf].cert.as_der().to_vec(),
    )];
    chain.extend(
        archive
            .certs
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != leaf)
            .map(|(_, c)| CertificateDer::from(c.cert.as_der().to_vec())),
    );
    let key = PrivateKeyDer::try_from(key.key.as_der().to_vec())
        .map_err(|e| format!("the PKCS12 keystore's private key: {e}"))?;
    Ok((chain, key))
}

/// The certificates and the key of a PEM keystore.
fn parse_keystore(
    pem: &[u8],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    if String::from_utf8_lossy(pem).contains("ENCRYPTED PRIVATE KEY") {
        return Err("the keystore's private key is encrypted: give it unencrypted (PKCS#8)".into());
    }
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the keystore's certificates: {e}"))?;
    if chain.is_empty() {
        return Err("the keystore holds no certificate".into());
    }
    let key = PrivateKeyDer::from_pem_slice(pem)
        .map_err(|e| format!("the keystore's private key: {e}"))?;
    Ok((chain, key))
}

/// The certificates client certificates must chain to: `ssl.truststore.location` (PEM)
/// or `ssl.truststore.certificates` inline.
fn truststore(s: &ListenerSettings<'_>) -> Result<RootCertStore, String> {
    let kind = s
        .get("ssl.truststore.type")
        .unwrap_or("JKS")
        .to_ascii_uppercase();
    if kind == "PKCS12" {
        let path = s
            .get("ssl.truststore.location")
            .ok_or("ssl.truststore.type PKCS12 needs ssl.truststore.location")?;
        let data =
            std::fs::read(path).map_err(|e| format!("ssl.truststore.location {path}: {e}"))?;
        let password = s.get("ssl.truststore.password").unwrap_or_default();
        let archive = p12_keystore::Pkcs12Archive::from_pkcs12(&data, password)
            .map_err(|e| format!("the PKCS12 trust store (wrong ssl.truststore.password?): {e}"))?;
        let mut roots = RootCertStore::empty();
        for bag in &archive.certs {
            roots
                .add(CertificateDer::from(bag.cert.as_der().to_vec()))
                .map_err(|e| format!("the trust store's certificates: {e}"))?;
        }
        if roots.is_empty() {
            return Err("the trust store holds no certificate".into());
        }
        return Ok(roots);
    }
    if kind != "PEM" {
        return Err(format!(
            "ssl.truststore.type {kind} is not supported: use ssl.truststore.type=PEM or PKCS12"
        ));
    }
    let pem = match (
        s.get("ssl.truststore.location"),
        s.get("ssl.truststore.certificates"),
    ) {
        (Some(path), None) => std::fs::read(path)
            .map_err(|e| format!("ssl.truststore.location {path}: {e}"))?,
        (None, Some(inline)) => inline.as_bytes().to_vec(),
        _ => {
            return Err("ssl.client.auth needs a trust store: ssl.truststore.location or ssl.truststore.certificates".into())
        }
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("the trust store's certificates: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("the trust store's certificates: {e}"))?;
    }
    if roots.is_empty() {
        return Err("the trust store holds no certificate".into());
    }
    Ok(roots)
}

/// `ssl.enabled.protocols` (Kafka's default: TLSv1.2,TLSv1.3).
fn protocol_versions(
    s: &ListenerSettings<'_>,
) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let value = s.get("ssl.enabled.protocols").unwrap_or("TLSv1.2,TLSv1.3");
    let mut versions = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        versions.push(match name {
            "TLSv1.2" => &rustls::version::TLS12,
            "TLSv1.3" => &rustls::version::TLS13,
            other => {
                return Err(format!(
                    "ssl.enabled.protocols {other}: TLSv1.2 and TLSv1.3 are supported"
                ))
            }
        });
    }
    if versions.is_empty() {
        return Err("ssl.enabled.protocols names no protocol".into());
    }
    Ok(versions)
}

/// The ring provider, its suites narrowed to `ssl.cipher.suites` when given (IANA names,
/// as Java names them: `TLS_AES_128_GCM_SHA256`, `TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`).
fn provider(s: &ListenerSettings<'_>) -> Result<rustls::crypto::CryptoProvider, String> {
    let mut provider = rustls::crypto::ring::default_provider();
    let Some(wanted) = s.get("ssl.cipher.suites") else {
        return Ok(provider);
    };
    let iana =
        |suite: &SupportedCipherSuite| format!("{:?}", suite.suite()).replacen("TLS13_", "TLS_", 1);
    let mut chosen = Vec::new();
    for name in wanted.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let suite = provider
            .cipher_suites
            .iter()
            .find(|suite| iana(suite) == name)
            .ok_or_else(|| format!("ssl.cipher.suites {name} is not supported"))?;
        chosen.push(*suite);
    }
    provider.cipher_suites = chosen;
    Ok(provider)
}

#[cfg(test)]
mod tests;
