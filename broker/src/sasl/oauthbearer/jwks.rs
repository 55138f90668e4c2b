//! Signed JWTs for SASL/OAUTHBEARER (Kafka's `OAuthBearerValidatorCallbackHandler` with
//! its `ValidatorAccessTokenValidator`): the token's signature is checked with a key of
//! the JSON Web Key Set at `sasl.oauthbearer.jwks.endpoint.url` (an `http://`, `https://`
//! or `file:` URL), chosen by the token's `kid`; then, as Kafka's jose4j consumer
//! checks them, `exp` and `iat` are required, `exp` not past and `iat`/`nbf` not ahead
//! (both within `sasl.oauthbearer.clock.skew.seconds`, 30), `aud` must name one of
//! `sasl.oauthbearer.expected.audience` when that is set, `iss` must be
//! `sasl.oauthbearer.expected.issuer` when that is set, and the principal is the
//! `sasl.oauthbearer.sub.claim.name` claim (`sub`). RS256/384/512, PS256/384/512 and
//! ES256/384 signatures are checked with ring; `alg: none` is refused.
//!
//! The key set is read at start (a broker that cannot read it does not start, as Kafka's)
//! and again every `sasl.oauthbearer.jwks.endpoint.refresh.ms` (one hour) by a background
//! task, and sooner (at most once every ten seconds) when a token names a `kid` the set
//! lacks, so a rotated key is found; a failed refresh keeps the previous keys and logs.

use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine;
use parking_lot::RwLock;
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};

/// Largest JWKS document read.
const JWKS_BYTES_MAX: usize = 1 << 20;
/// Soonest a token naming an unknown `kid` makes the set be read again.
const UNKNOWN_KID_REFRESH: Duration = Duration::from_secs(10);
/// How long one read of the set may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// One verification key of the set.
#[derive(Clone, Debug)]
struct Jwk {
    kid: Option<String>,
    key: VerifyKey,
}

#[derive(Clone, Debug)]
enum VerifyKey {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// An uncompressed point (`04 || x || y`) on P-256 or P-384.
    Ec {
        p384: bool,
        point: Vec<u8>,
    },
}

/// Where the key set comes from, and how it is reached.
#[derive(Clone)]
struct Source {
    url: String,
    /// TLS for an `https://` URL (the listener's trust store).
    tls: Option<Arc<rustls::ClientConfig>>,
}

/// What a listener checks signed tokens with.
pub struct JwksValidator {
    source: Source,
    keys: RwLock<Vec<Jwk>>,
    /// When the set was last read (for the unknown-`kid` refresh).
    read_at: RwLock<std::time::Instant>,
    refreshing: std::sync::atomic::AtomicBool,
    expected_audience: Vec<String>,
    expected_issuer: Option<String>,
    sub_claim: String,
    clock_skew_ms: i64,
}

/// The settings the validator reads (under the listener and mechanism prefixes too).
pub struct JwksSettings {
    /// `sasl.oauthbearer.jwks.endpoint.url`.
    pub url: String,
    /// `sasl.oauthbearer.jwks.endpoint.refresh.ms`.
    pub refresh_ms: u64,
    /// `sasl.oauthbearer.expected.audience` (comma-separated).
    pub expected_audience: Vec<String>,
    /// `sasl.oauthbearer.expected.issuer`.
    pub expected_issuer: Option<String>,
    /// `sasl.oauthbearer.sub.claim.name`.
    pub sub_claim: String,
    /// `sasl.oauthbearer.clock.skew.seconds`.
    pub clock_skew_seconds: i64,
    /// TLS for an `https://` URL.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl JwksValidator {
    /// Reads the key set once and starts its refresher on the current runtime.
    ///
    /// # Errors
    /// The URL is not served, or the set cannot be read or holds no usable key.
    pub fn start(settings: JwksSettings) -> Result<Arc<Self>, String> {
        let source = Source {
            url: settings.url.clone(),
            tls: settings.tls.clone(),
        };
        if source.url.starts_with("https://") && source.tls.is_none() {
            return Err(format!(
                "sasl.oauthbearer.jwks.endpoint.url {}: an https URL needs ssl.truststore.location (PEM or PKCS12) to check the server with",
                source.url
            ));
        }
        let keys = read_blocking(&source)?;
        let validator = Arc::new(JwksValidator {
            source,
            keys: RwLock::new(keys),
            read_at: RwLock::new(std::time::Instant::now()),
            refreshing: std::sync::atomic::AtomicBool::new(false),
            expected_audience: settings.expected_audience,
            expected_issuer: settings.expected_issuer,
            sub_claim: settings.sub_claim,
            clock_skew_ms: settings.clock_skew_seconds.saturating_mul(1000),
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let weak = Arc::downgrade(&validator);
            let every = Duration::from_millis(settings.refresh_ms.max(1000));
            runtime.spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let Some(validator) = weak.upgrade() else {
                        return;
                    };
                    validator.refresh().await;
                }
            });
        }
        Ok(validator)
    }

    async fn refresh(&self) {
        match read(&self.source).await {
            Ok(keys) => {
                *self.keys.write() = keys;
                *self.read_at.write() = std::time::Instant::now();
            }
            Err(e) => {
                tracing::warn!(url = %self.source.url, error = %e, "cannot refresh the OAUTHBEARER JWKS; keeping the previous keys");
            }
        }
    }

    /// A token named `kid` the set lacks: read the set again in the background, at most
    /// once per [`UNKNOWN_KID_REFRESH`].
    fn refresh_for_unknown_kid(self: &Arc<Self>) {
        use std::sync::atomic::Ordering;
        if self.read_at.read().elapsed() < UNKNOWN_KID_REFRESH
            || self.refreshing.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.refreshing.store(false, Ordering::Release);
            return;
        };
        let validator = Arc::clone(self);
        runtime.spawn(async move {
            validator.refresh().await;
            validator.refreshing.store(false, Ordering::Release);
        });
    }

    /// The principal name and expiry (ms since the epoch) of a valid token; otherwise why
    /// not (for the log).
    pub fn validate(self: &Arc<Self>, token: &str, now_ms: i64) -> Result<(String, i64), String> {
        let mut parts = token.split('.');
        let (Some(header_b64), Some(payload_b64), Some(signature_b64), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("not a JWS compact serialization (three dot-separated parts)".to_string());
        };
        let header = super::json_part(header_b64, "header")?;
        let alg = header
            .get("alg")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("none");
        let kid = header.get("kid").and_then(serde_json::Value::as_str);
        let signature = B64URL
            .decode(signature_b64)
            .map_err(|e| format!("the JWS signature is not base64url: {e}"))?;
        let signed = format!("{header_b64}.{payload_b64}");
        let keys = self.keys.read().clone();
        let candidates: Vec<&Jwk> = keys
            .iter()
            .filter(|k| kid.is_none() || k.kid.as_deref() == kid)
            .collect();
        if candidates.is_empty() {
            self.refresh_for_unknown_kid();
            return Err(format!(
                "no key of the JWKS has kid {}",
                kid.unwrap_or("(none)")
            ));
        }
        let verified = candidates
            .iter()
            .any(|k| verify(alg, &k.key, signed.as_bytes(), &signature).unwrap_or(false));
        if !verified {
            return Err(format!(
                "the signature ({alg}) is not valid for any key of the JWKS{}",
                kid.map(|k| format!(" with kid {k}")).unwrap_or_default()
            ));
        }
        let claims = super::json_part(payload_b64, "payload")?;
        let exp_ms = super::seconds_claim(&claims, "exp")?.ok_or("no exp claim")?;
        if now_ms - self.clock_skew_ms >= exp_ms {
            return Err(format!(
                "the token expired at {exp_ms} ms (now {now_ms} ms)"
            ));
        }
        let iat_ms = super::seconds_claim(&claims, "iat")?.ok_or("no iat claim")?;
        if iat_ms > now_ms + self.clock_skew_ms {
            return Err(format!("the token was issued in the future ({iat_ms} ms)"));
        }
        if let Some(nbf_ms) = super::seconds_claim(&claims, "nbf")? {
            if nbf_ms > now_ms + self.clock_skew_ms {
                return Err(format!("the token is not valid before {nbf_ms} ms"));
            }
        }
        if !self.expected_audience.is_empty() {
            let audience: Vec<&str> = match claims.get("aud") {
                Some(serde_json::Value::String(a)) => vec![a.as_str()],
                Some(serde_json::Value::Array(a)) => {
                    a.iter().filter_map(serde_json::Value::as_str).collect()
                }
                _ => Vec::new(),
            };
            if !audience
                .iter()
                .any(|a| self.expected_audience.iter().any(|e| e == a))
            {
                return Err(format!(
                    "the token's audience {audience:?} names none of {:?}",
                    self.expected_audience
                ));
            }
        }
        if let Some(issuer) = &self.expected_issuer {
            let iss = claims.get("iss").and_then(serde_json::Value::as_str);
            if iss != Some(issuer.as_str()) {
                return Err(format!(
                    "the token's issuer {} is not {issuer}",
                    iss.unwrap_or("(none)")
                ));
            }
        }
        let principal = claims
            .get(&self.sub_claim)
            .and_then(serde_json::Value::as_str)
            .filter(|p| !p.trim().is_empty())
            .ok_or_else(|| format!("no string principal claim {}", self.sub_claim))?;
        Ok((principal.to_string(), exp_ms))
    }
}

/// Whether `signature` over `message` verifies with `key` under `alg`.
fn verify(alg: &str, key: &VerifyKey, message: &[u8], signature: &[u8]) -> Result<bool, ()> {
    let ok = match (alg, key) {
        ("RS256" | "RS384" | "RS512" | "PS256" | "PS384" | "PS512", VerifyKey::Rsa { n, e }) => {
            let params: &signature::RsaParameters = match alg {
                "RS256" => &signature::RSA_PKCS1_2048_8192_SHA256,
                "RS384" => &signature::RSA_PKCS1_2048_8192_SHA384,
                "RS512" => &signature::RSA_PKCS1_2048_8192_SHA512,
                "PS256" => &signature::RSA_PSS_2048_8192_SHA256,
                "PS384" => &signature::RSA_PSS_2048_8192_SHA384,
                _ => &signature::RSA_PSS_2048_8192_SHA512,
            };
            RsaPublicKeyComponents { n, e }
                .verify(params, message, signature)
                .is_ok()
        }
        ("ES256", VerifyKey::Ec { p384: false, point }) => {
            UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                .verify(message, signature)
                .is_ok()
        }
        ("ES384", VerifyKey::Ec { p384: true, point }) => {
            UnparsedPublicKey::new(&signature::ECDSA_P384_SHA384_FIXED, point)
                .verify(message, signature)
                .is_ok()
        }
        _ => return Err(()),
    };
    Ok(ok)
}

/// The usable keys of a JWKS document (RSA, and EC on P-256/P-384; keys for encryption
/// only are left out).
fn parse_jwks(document: &[u8]) -> Result<Vec<Jwk>, String> {
    let value: serde_json::Value =
        serde_json::from_slice(document).map_err(|e| format!("the JWKS is not JSON: {e}"))?;
    let keys = value
        .get("keys")
        .and_then(serde_json::Value::as_array)
        .ok_or("the JWKS has no keys array")?;
    let field = |k: &serde_json::Value, name: &str| -> Option<Vec<u8>> {
        B64URL
            .decode(k.get(name)?.as_str()?.trim_end_matches('='))
            .ok()
    };
    let mut out = Vec::new();
    for k in keys {
        if k.get("use").and_then(serde_json::Value::as_str) == Some("enc") {
            continue;
        }
        let kid = k
            .get("kid")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string);
        let key = match k.get("kty").and_then(serde_json::Value::as_str) {
            Some("RSA") => match (field(k, "n"), field(k, "e")) {
                (Some(n), Some(e)) => VerifyKey::Rsa { n, e },
                _ => continue,
            },
            Some("EC") => {
                let p384 = match k.get("crv").and_then(serde_json::Value::as_str) {
                    Some("P-256") => false,
                    Some("P-384") => true,
                    _ => continue,
                };
                match (field(k, "x"), field(k, "y")) {
                    (Some(x), Some(y)) => {
                        let mut point = vec![4u8];
                        point.extend(x);
                        point.extend(y);
                        VerifyKey::Ec { p384, point }
                    }
                    _ => continue,
                }
            }
            _ => continue,
        };
        out.push(Jwk { kid, key });
    }
    if out.is_empty() {
        return Err("the JWKS holds no RSA or EC signature key".to_string());
    }
    Ok(out)
}

/// Reads the set once, from start-up code that may or may not be on a runtime.
fn read_blocking(source: &Source) -> Result<Vec<Jwk>, String> {
    if let Some(path) = file_path(&source.url) {
        return read_file(path);
    }
    let source = source.clone();
    // A thread of its own: start-up runs on the runtime, which must not block on itself.
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?
            .block_on(read(&source))
    })
    .join()
    .map_err(|_| "the JWKS reader panicked".to_string())?
}

async fn read(source: &Source) -> Result<Vec<Jwk>, String> {
    if let Some(path) = file_path(&source.url) {
        return read_file(path);
    }
    let body = tokio::time::timeout(FETCH_TIMEOUT, http_get(&source.url, source.tls.clone()))
        .await
        .map_err(|_| format!("{}: no answer within {FETCH_TIMEOUT:?}", source.url))??;
    parse_jwks(&body)
}

fn file_path(url: &str) -> Option<&str> {
    url.strip_prefix("file://")
        .or_else(|| url.strip_prefix("file:"))
}

fn read_file(path: &str) -> Result<Vec<Jwk>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("JWKS file {path}: {e}"))?;
    parse_jwks(&bytes)
}

/// GET `url` (http or https) with hyper; the body of a 200 answer.
async fn http_get(url: &str, tls: Option<Arc<rustls::ClientConfig>>) -> Result<Vec<u8>, String> {
    use http_body_util::{BodyExt, Empty, Limited};
    let uri: hyper::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let https = uri.scheme_str() == Some("https");
    if !https && uri.scheme_str() != Some("http") {
        return Err(format!(
            "{url}: sasl.oauthbearer.jwks.endpoint.url must be http://, https:// or file:"
        ));
    }
    let host = uri
        .host()
        .ok_or_else(|| format!("{url}: no host"))?
        .to_string();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let tcp = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let request = hyper::Request::get(uri.path_and_query().map_or("/", |p| p.as_str()))
        .header(
            hyper::header::HOST,
            uri.authority().map_or(host.as_str(), |a| a.as_str()),
        )
        .header(hyper::header::ACCEPT, "application/json")
        .body(Empty::<bytes::Bytes>::new())
        .map_err(|e| format!("{url}: {e}"))?;
    let response = match tls {
        Some(tls) if https => {
            let name =
                rustls_pki_types::ServerName::try_from(host.trim_matches(['[', ']']).to_string())
                    .map_err(|e| format!("{url}: {e}"))?;
            let stream = tokio_rustls::TlsConnector::from(tls)
                .connect(name, tcp)
                .await
                .map_err(|e| format!("{url}: TLS: {e}"))?;
            send(hyper_util::rt::TokioIo::new(stream), request).await?
        }
        _ if https => return Err(format!("{url}: https needs a trust store")),
        _ => send(hyper_util::rt::TokioIo::new(tcp), request).await?,
    };
    if response.status() != hyper::StatusCode::OK {
        return Err(format!("{url}: HTTP {}", response.status()));
    }
    let body = Limited::new(response.into_body(), JWKS_BYTES_MAX)
        .collect()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    Ok(body.to_bytes().to_vec())
}

async fn send<I>(
    io: I,
    request: hyper::Request<http_body_util::Empty<bytes::Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, String>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP handshake: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    sender
        .send_request(request)
        .await
        .map_err(|e| format!("HTTP request: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_a_jwks() {
        let doc = br#"{"keys":[
            {"kty":"RSA","kid":"r1","use":"sig","n":"AQAB","e":"AQAB"},
            {"kty":"EC","kid":"e1","crv":"P-256","x":"AQ","y":"Ag"},
            {"kty":"EC","kid":"e2","crv":"P-521","x":"AQ","y":"Ag"},
            {"kty":"RSA","kid":"x","use":"enc","n":"AQAB","e":"AQAB"},
            {"kty":"oct","k":"AQAB"}]}"#;
        let keys = parse_jwks(doc).expect("keys");
        let kids: Vec<_> = keys
            .iter()
            .map(|k| k.kid.clone().unwrap_or_default())
            .collect();
        assert_eq!(kids, ["r1", "e1"]);
        assert!(
            matches!(&keys[1].key, VerifyKey::Ec { p384: false, point } if point == &[4, 1, 2])
        );
        assert!(parse_jwks(br#"{"keys":[]}"#).is_err());
        assert_eq!(file_path("file:///tmp/jwks.json"), Some("/tmp/jwks.json"));
    }
}
