//! SASL on SASL_PLAINTEXT and SASL_SSL listeners (Kafka's `SaslServerAuthenticator`):
//! the exchange every connection of such a listener goes through before any other request
//! is served, and the principal it ends with.
//!
//! The exchange, as Kafka runs it:
//! - ApiVersions may come first (clients learn the SASL versions from it); any other
//!   request before authentication closes the connection ("unexpected request during SASL
//!   handshake"), without an answer.
//! - SaslHandshake names the mechanism; one not enabled on the listener is answered
//!   UNSUPPORTED_SASL_MECHANISM with the enabled list, then the connection closes.
//! - After SaslHandshake v1 the tokens come in SaslAuthenticate requests (KIP-152); after
//!   v0 they come as bare length-prefixed frames and are answered the same way (the
//!   pre-KIP-152 framing some older clients still use).
//! - A failed authentication is answered SASL_AUTHENTICATION_FAILED with Kafka's message
//!   after `connection.failed.authentication.delay.ms` (100 ms), then the connection
//!   closes; the broker logs the client's address and the reason.
//! - With `connections.max.reauth.ms` set, SaslAuthenticate v1+ tells the client its
//!   session lifetime; the client re-authenticates on the same connection (KIP-368) with
//!   the same mechanism and principal, and a connection whose session has expired is
//!   closed at its next request.
//! - Until authenticated, a frame may not exceed `sasl.server.max.receive.size` (512 KiB).
//!
//! Mechanisms: PLAIN (users from Kafka's JAAS syntax, [`jaas`]), OAUTHBEARER with unsecured
//! JWTs ([`oauthbearer`]) and SCRAM-SHA-256/512
//! ([`scram`], credentials from the metadata log through [`ScramCredentials`], written by
//! AlterUserScramCredentials). GSSAPI (Kerberos) is not served.

pub use logbook_common::jaas;
pub mod oauthbearer;
pub mod scram;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, RequestKind, ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use logbook_protocol::{decode_request, VersionTable};
use subtle::ConstantTimeEq;
use tokio::time::Instant;

use crate::authorizer::KafkaPrincipal;
use crate::listeners::ListenerName;
use crate::ssl::ListenerSettings;
use scram::{ScramCredential, ScramMechanism, ScramServer, ScramStep};

/// The SASL settings Logbook reads, plain or under a listener's prefix;
/// `sasl.jaas.config` also under a listener and mechanism prefix
/// (`listener.name.sasl_ssl.plain.sasl.jaas.config`).
pub const SETTINGS: &[&str] = &[
    "connection.failed.authentication.delay.ms",
    "connections.max.reauth.ms",
    "principal.builder.class",
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "sasl.mechanism.controller.protocol",
    "sasl.mechanism.inter.broker.protocol",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.server.callback.handler.class",
    "sasl.server.max.receive.size",
];

/// Mechanism names that may prefix `sasl.jaas.config` (lower case, as Kafka writes them).
const MECHANISM_PREFIXES: &[&str] = &[
    "plain.",
    "scram-sha-256.",
    "scram-sha-512.",
    "oauthbearer.",
    "gssapi.",
];

/// Kafka's `OAuthBearerLoginModule`, whose `unsecuredValidator…` options configure the
/// token validator.
const OAUTHBEARER_LOGIN_MODULE: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

/// Kafka's `PlainLoginModule`, whose `user_<name>` options are PLAIN's users.
const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";

/// Kafka's default `sasl.server.max.receive.size`.
const DEFAULT_MAX_RECEIVE: usize = 524_288;

/// Kafka's default `connection.failed.authentication.delay.ms`.
const DEFAULT_FAILED_DELAY_MS: u64 = 100;

/// Whether `key` is one of [`SETTINGS`], plain or prefixed.
#[must_use]
pub fn is_sasl_setting(key: &str) -> bool {
    let unprefixed = crate::listeners::without_listener_prefix(key);
    let unprefixed = MECHANISM_PREFIXES
        .iter()
        .find_map(|m| unprefixed.strip_prefix(m))
        .filter(|s| {
            // What Kafka reads under a mechanism prefix: the JAAS entry, the server
            // callback handler and its OAUTHBEARER settings.
            *s == "sasl.jaas.config"
                || *s == "sasl.server.callback.handler.class"
                || s.starts_with("sasl.oauthbearer.")
        })
        .unwrap_or(unprefixed);
    SETTINGS.contains(&unprefixed)
}

/// A SASL mechanism served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    /// PLAIN (RFC 4616).
    Plain,
    /// SCRAM-SHA-256 or SCRAM-SHA-512.
    Scram(ScramMechanism),
    /// OAUTHBEARER (RFC 7628) with unsecured JWTs.
    OAuthBearer,
}

impl Mechanism {
    /// The mechanism's SASL name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        match name {
            "PLAIN" => Some(Mechanism::Plain),
            "OAUTHBEARER" => Some(Mechanism::OAuthBearer),
            other => ScramMechanism::from_name(other).map(Mechanism::Scram),
        }
    }
}

/// Where SCRAM credentials are looked up (the metadata image's users).
pub trait ScramCredentials: Send + Sync {
    /// `user`'s credential for `mechanism`, if there is one.
    fn credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential>;
}

/// The SCRAM users of the metadata log (AlterUserScramCredentials), as this broker's
/// image has them.
impl ScramCredentials for crate::cluster::MetadataCache {
    fn credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        ScramCredential::from_record(self.image().scram_credential(user, mechanism.code())?)
    }
}

/// No SCRAM users (for checking a listener's settings before the metadata is loaded).
pub struct NoScramCredentials;

impl ScramCredentials for NoScramCredentials {
    fn credential(&self, _user: &str, _mechanism: ScramMechanism) -> Option<ScramCredential> {
        None
    }
}

/// One SASL listener's settings.
pub struct SaslListener {
    listener: ListenerName,
    mechanisms: Vec<Mechanism>,
    /// PLAIN's users and passwords (`user_<name>="password"`).
    plain_users: HashMap<String, String>,
    scram: Arc<dyn ScramCredentials>,
    /// OAUTHBEARER's token validator, when OAUTHBEARER is enabled.
    oauth: Option<OAuthValidator>,
    /// `connections.max.reauth.ms`; 0 means sessions do not expire.
    reauth_ms: u64,
    failed_delay: Duration,
    /// `sasl.server.max.receive.size`.
    max_receive: usize,
}

impl SaslListener {
    /// The SASL settings of `listener` from `settings` (the security settings as given);
    /// `jaas_file` is the JAAS file named by `KAFKA_OPTS`, if any.
    ///
    /// # Errors
    /// A message naming the setting that is missing or not supported; the broker must not
    /// start.
    pub fn new(
        listener: &ListenerName,
        settings: &BTreeMap<String, String>,
        jaas_file: Option<&str>,
        scram: Arc<dyn ScramCredentials>,
    ) -> Result<Self, String> {
        let s = ListenerSettings::new(listener, settings);
        let mechanisms = enabled_mechanisms(s.get("sasl.enabled.mechanisms"))?;
        let mut plain_users = HashMap::new();
        if mechanisms.contains(&Mechanism::Plain) {
            let modules = jaas_modules(listener, &s, "plain", jaas_file)?;
            for module in modules.iter().filter(|m| m.class == PLAIN_LOGIN_MODULE) {
                for (key, password) in &module.options {
                    if let Some(user) = key.strip_prefix("user_") {
                        plain_users.insert(user.to_string(), password.clone());
                    }
                }
            }
            if plain_users.is_empty() {
                tracing::warn!(%listener, "SASL/PLAIN is enabled but its JAAS configuration names no user_<name>: every PLAIN login will fail");
            }
        }
        let oauth = if mechanisms.contains(&Mechanism::OAuthBearer) {
            // The JAAS entry is optional here: without one, Kafka's validator defaults.
            let modules = jaas_modules(listener, &s, "oauthbearer", jaas_file).unwrap_or_default();
            let options = modules
                .iter()
                .find(|m| m.class == OAUTHBEARER_LOGIN_MODULE)
                .map(|m| m.options.clone())
                .unwrap_or_default();
            Some(oauth_validator(listener, &s, &options)?)
        } else {
            None
        };
        if let Some(class) = s.get("principal.builder.class") {
            if !class.ends_with("DefaultKafkaPrincipalBuilder") {
                return Err(format!("principal.builder.class {class}: only Kafka's default principal builder is served"));
            }
        }
        let number = |name: &str, default: u64| -> Result<u64, String> {
            s.get(name).map_or(Ok(default), |v| {
                v.parse::<u64>()
                    .map_err(|_| format!("{name} {v}: expected a non-negative number"))
            })
        };
        let max_receive = number("sasl.server.max.receive.size", DEFAULT_MAX_RECEIVE as u64)?;
        Ok(SaslListener {
            listener: listener.clone(),
            mechanisms,
            plain_users,
            scram,
            oauth,
            reauth_ms: number("connections.max.reauth.ms", 0)?,
            failed_delay: Duration::from_millis(number(
                "connection.failed.authentication.delay.ms",
                DEFAULT_FAILED_DELAY_MS,
            )?),
            max_receive: usize::try_from(max_receive.max(1)).unwrap_or(usize::MAX),
        })
    }

    fn mechanism_names(&self) -> Vec<StrBytes> {
        self.mechanisms
            .iter()
            .map(|m| StrBytes::from_static_str(m.name()))
            .collect()
    }
}

/// How OAUTHBEARER tokens are checked on a listener.
enum OAuthValidator {
    /// Kafka's default, for development: unsecured JWTs.
    Unsecured(oauthbearer::UnsecuredValidator),
    /// Kafka's `OAuthBearerValidatorCallbackHandler`: signed JWTs and a JWKS.
    Jwks(Arc<oauthbearer::jwks::JwksValidator>),
}

impl OAuthValidator {
    fn validate(&self, token: &str, now_ms: i64) -> Result<(String, i64), String> {
        match self {
            OAuthValidator::Unsecured(v) => v.validate(token, now_ms),
            OAuthValidator::Jwks(v) => v.validate(token, now_ms),
        }
    }
}

/// The listener's OAUTHBEARER validator: signed tokens against a JWKS when
/// `sasl.oauthbearer.jwks.endpoint.url` is set (with Kafka's
/// `OAuthBearerValidatorCallbackHandler` as `sasl.server.callback.handler.class`, or
/// alone), else Kafka's unsecured default with the JAAS `options`. Each setting is read
/// under `listener.name.<l>.oauthbearer.`, then `listener.name.<l>.`, then plain.
fn oauth_validator(
    listener: &ListenerName,
    s: &ListenerSettings<'_>,
    options: &BTreeMap<String, String>,
) -> Result<OAuthValidator, String> {
    let get = |name: &str| {
        s.get_prefixed(&format!("oauthbearer.{name}"))
            .or_else(|| s.get(name))
    };
    let handler = get("sasl.server.callback.handler.class");
    let secured_handler =
        handler.is_some_and(|h| h.ends_with(".OAuthBearerValidatorCallbackHandler"));
    if let Some(h) = handler.filter(|h| {
        !h.ends_with(".OAuthBearerValidatorCallbackHandler")
            && !h.ends_with(".OAuthBearerUnsecuredValidatorCallbackHandler")
    }) {
        return Err(format!("sasl.server.callback.handler.class {h}: Kafka's OAuthBearerValidatorCallbackHandler and OAuthBearerUnsecuredValidatorCallbackHandler are served"));
    }
    let Some(url) = get("sasl.oauthbearer.jwks.endpoint.url") else {
        if secured_handler {
            return Err(
                "OAuthBearerValidatorCallbackHandler needs sasl.oauthbearer.jwks.endpoint.url"
                    .to_string(),
            );
        }
        return Ok(OAuthValidator::Unsecured(
            oauthbearer::UnsecuredValidator::new(options)?,
        ));
    };
    let number = |name: &str, default: i64| -> Result<i64, String> {
        get(name).map_or(Ok(default), |v| {
            v.parse::<i64>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| format!("{name} {v}: expected a non-negative number"))
        })
    };
    let tls = if url.starts_with("https://") {
        crate::ssl::client_config(listener, s.settings).ok()
    } else {
        None
    };
    let settings = oauthbearer::jwks::JwksSettings {
        url: url.to_string(),
        refresh_ms: u64::try_from(number(
            "sasl.oauthbearer.jwks.endpoint.refresh.ms",
            3_600_000,
        )?)
        .unwrap_or(3_600_000),
        expected_audience: get("sasl.oauthbearer.expected.audience")
            .map(|a| {
                a.split(',')
                    .map(|x| x.trim().to_string())
                    .filter(|x| !x.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
        expected_issuer: get("sasl.oauthbearer.expected.issuer").map(str::to_string),
        sub_claim: get("sasl.oauthbearer.sub.claim.name")
            .unwrap_or("sub")
            .to_string(),
        clock_skew_seconds: number("sasl.oauthbearer.clock.skew.seconds", 30)?,
        tls,
    };
    oauthbearer::jwks::JwksValidator::start(settings)
        .map(OAuthValidator::Jwks)
        .map_err(|e| format!("OAUTHBEARER: {e}"))
}

/// `sasl.enabled.mechanisms` (Kafka's default is GSSAPI, which is not served).
fn enabled_mechanisms(value: Option<&str>) -> Result<Vec<Mechanism>, String> {
    let value = value.unwrap_or("GSSAPI");
    let mut mechanisms = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match Mechanism::parse(&name.to_ascii_uppercase()) {
            Some(m) if !mechanisms.contains(&m) => mechanisms.push(m),
            Some(_) => {}
            None if name.eq_ignore_ascii_case("GSSAPI") => {
                tracing::warn!("sasl.enabled.mechanisms: GSSAPI (Kerberos) is not served; left out");
            }
            None => {
                return Err(format!(
                    "sasl.enabled.mechanisms: {name} is not served (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are)"
                ))
            }
        }
    }
    if mechanisms.is_empty() {
        return Err(format!(
            "sasl.enabled.mechanisms {value}: no served mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER); Kafka's default GSSAPI is not served"
        ));
    }
    Ok(mechanisms)
}

/// The login modules of `mechanism` on `listener`, where Kafka looks for them:
/// `listener.name.<l>.<mechanism>.sasl.jaas.config`, then the JAAS file's
/// `<l>.KafkaServer` section, then its `KafkaServer` section.
fn jaas_modules(
    listener: &ListenerName,
    s: &ListenerSettings<'_>,
    mechanism: &str,
    jaas_file: Option<&str>,
) -> Result<Vec<jaas::LoginModule>, String> {
    if let Some(config) = s.get_prefixed(&format!("{mechanism}.sasl.jaas.config")) {
        return jaas::parse_config(config).map_err(|e| {
            format!(
                "{}{mechanism}.sasl.jaas.config: {e}",
                listener.config_prefix()
            )
        });
    }
    if let Some(path) = jaas_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("JAAS file {path} (java.security.auth.login.config): {e}"))?;
        let sections = jaas::parse_file(&text).map_err(|e| format!("JAAS file {path}: {e}"))?;
        let own = format!("{}.KafkaServer", listener.as_str().to_ascii_lowercase());
        if let Some(modules) = sections.get(&own).or_else(|| sections.get("KafkaServer")) {
            return Ok(modules.clone());
        }
    }
    Err(format!(
        "listener {listener} serves SASL/{}: set {}{mechanism}.sasl.jaas.config (or a KafkaServer section in the JAAS file of -Djava.security.auth.login.config in KAFKA_OPTS)",
        mechanism.to_ascii_uppercase(),
        listener.config_prefix()
    ))
}

/// The login a broker presents to `listener` on another node: the mechanism named by
/// `mechanism_setting` (`sasl.mechanism.inter.broker.protocol` or
/// `sasl.mechanism.controller.protocol`; Kafka's default GSSAPI is not served), with the
/// `username` and `password` options of that listener's login module for it, found where
/// the listener's own users are (`listener.name.<l>.<mechanism>.sasl.jaas.config`, then
/// the JAAS file), as Kafka's inter-broker client reads them.
///
/// # Errors
/// The mechanism is not one a broker logs in with, or the login module names no
/// `username` and `password`.
pub fn client_login(
    listener: &ListenerName,
    settings: &BTreeMap<String, String>,
    mechanism_setting: &str,
    jaas_file: Option<&str>,
) -> Result<logbook_client::security::SaslLogin, String> {
    use logbook_client::security::{SaslLogin, SaslMechanism};
    let name = settings
        .get(mechanism_setting)
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .unwrap_or("GSSAPI");
    let mechanism = SaslMechanism::parse(name).map_err(|_| {
        format!("{mechanism_setting} {name}: a broker logs in to listener {listener} with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default GSSAPI is not served)")
    })?;
    let s = ListenerSettings::new(listener, settings);
    let modules = jaas_modules(listener, &s, &name.to_ascii_lowercase(), jaas_file)?;
    modules
        .iter()
        .find_map(|m| {
            let username = m.options.get("username")?;
            let password = m.options.get("password")?;
            Some(SaslLogin {
                mechanism,
                username: username.clone(),
                password: password.clone(),
            })
        })
        .ok_or_else(|| {
            format!(
                "{}{}.sasl.jaas.config: the login module names no username and password for this broker to log in to listener {listener} with",
                listener.config_prefix(),
                name.to_ascii_lowercase()
            )
        })
}

/// The JAAS file named by `-Djava.security.auth.login.config=FILE` in `KAFKA_OPTS`, as the
/// Kafka scripts pass it to the JVM.
#[must_use]
pub fn jaas_file_from_env() -> Option<String> {
    let opts = std::env::var("KAFKA_OPTS").ok()?;
    opts.split_whitespace()
        .find_map(|o| o.strip_prefix("-Djava.security.auth.login.config="))
        .map(|p| p.trim_matches('"').to_string())
}

/// What the connection does with a frame, as decided by its [`Authenticator`].
pub enum Step {
    /// A request for the broker: serve it as this principal.
    Serve(Arc<KafkaPrincipal>),
    /// Send this answer, then read on, or close after it.
    Answer {
        /// The answer.
        answer: Answer,
        /// Close the connection once it is sent.
        close: bool,
    },
    /// Close the connection now, without an answer.
    Close,
}

/// An answer of the SASL exchange.
pub enum Answer {
    /// A Kafka response (SaslHandshake, SaslAuthenticate), sent after `delay`.
    Response {
        /// Its API.
        api_key: ApiKey,
        /// The request's version.
        api_version: i16,
        /// The request's correlation id.
        correlation_id: i32,
        /// The body.
        body: ResponseKind,
        /// How long to hold it (a failed authentication's delay).
        delay: Duration,
    },
    /// A bare length-prefixed token (after SaslHandshake v0).
    Token(Bytes),
}

/// Where a connection is in the exchange.
enum State {
    /// Waiting for SaslHandshake (ApiVersions allowed).
    Handshake,
    /// Mechanism chosen; waiting for tokens.
    Authenticate {
        mechanism: Mechanism,
        /// Tokens come as bare frames (SaslHandshake v0).
        bare: bool,
        exchange: Exchange,
    },
    /// Authenticated; requests are served.
    Authenticated,
}

/// A mechanism's state within one exchange.
enum Exchange {
    /// PLAIN: one token.
    Plain,
    /// SCRAM: two rounds.
    Scram(ScramServer),
    /// OAUTHBEARER: the error JSON once a token was refused (the client must answer it
    /// with `%x01` before the failure).
    OAuthBearer { error: Option<String> },
}

impl Exchange {
    fn new(mechanism: Mechanism) -> Self {
        match mechanism {
            Mechanism::Plain => Exchange::Plain,
            Mechanism::Scram(m) => Exchange::Scram(ScramServer::new(m)),
            Mechanism::OAuthBearer => Exchange::OAuthBearer { error: None },
        }
    }
}

/// What a token led to: a challenge (not done), or the user and, for a token that
/// expires, when (ms since the epoch).
enum Outcome {
    Challenge(Vec<u8>),
    Authenticated {
        user: String,
        bytes: Vec<u8>,
        expires_ms: Option<i64>,
    },
}

/// One connection's SASL state.
pub struct Authenticator {
    listener: Arc<SaslListener>,
    peer: SocketAddr,
    state: State,
    /// The authenticated principal and mechanism (kept across a re-authentication).
    session: Option<(Arc<KafkaPrincipal>, Mechanism)>,
    /// How long the session lasts, told to the client (`connections.max.reauth.ms`, or
    /// less if its token expires sooner).
    lifetime: Option<Duration>,
    /// When the session expires.
    expires: Option<Instant>,
}

impl Authenticator {
    /// The state of a new connection from `peer` on `listener`.
    #[must_use]
    pub fn new(listener: Arc<SaslListener>, peer: SocketAddr) -> Self {
        Authenticator {
            listener,
            peer,
            state: State::Handshake,
            session: None,
            lifetime: None,
            expires: None,
        }
    }

    /// The frame bound until authenticated (`sasl.server.max.receive.size`).
    #[must_use]
    pub fn max_receive(&self) -> usize {
        self.listener.max_receive
    }

    /// The principal the exchange authenticated, once it has.
    #[must_use]
    pub fn principal(&self) -> Option<Arc<KafkaPrincipal>> {
        self.session
            .as_ref()
            .map(|(principal, _)| Arc::clone(principal))
    }

    /// Whether requests are served (authenticated, not re-authenticating).
    #[must_use]
    pub fn is_authenticated(&self) -> bool {
        matches!(self.state, State::Authenticated)
    }

    /// Decides what to do with `frame`.
    pub fn on_frame(&mut self, frame: &Bytes, table: &impl VersionTable) -> Step {
        let api_key = frame
            .get(..2)
            .map(|b| i16::from_be_bytes([b[0], b[1]]))
            .and_then(|k| ApiKey::try_from(k).ok());
        match &self.state {
            State::Authenticated => {
                if api_key == Some(ApiKey::SaslHandshake) && self.listener.reauth_ms > 0 {
                    return self.handshake(frame, table);
                }
                if self.expires.is_some_and(|at| Instant::now() >= at) {
                    tracing::info!(peer = %self.peer, listener = %self.listener.listener, "closing connection: SASL session expired (connections.max.reauth.ms) without re-authentication");
                    return Step::Close;
                }
                match &self.session {
                    Some((principal, _)) => Step::Serve(Arc::clone(principal)),
                    None => Step::Close,
                }
            }
            State::Handshake => match api_key {
                Some(ApiKey::ApiVersions) if self.session.is_none() => {
                    Step::Serve(crate::handlers::anonymous())
                }
                Some(ApiKey::SaslHandshake) => self.handshake(frame, table),
                other => self.unexpected(other, "handshake"),
            },
            State::Authenticate { bare: true, .. } => self.token(frame.clone(), None),
            State::Authenticate { bare: false, .. } => {
                if api_key != Some(ApiKey::SaslAuthenticate) {
                    return self.unexpected(api_key, "authentication");
                }
                match decode_request(frame.clone(), table) {
                    Ok(request) => {
                        let RequestKind::SaslAuthenticate(body) = request.body else {
                            return Step::Close;
                        };
                        let header = (
                            request.header.request_api_version,
                            request.header.correlation_id,
                        );
                        self.token(body.auth_bytes, Some(header))
                    }
                    Err(e) => {
                        tracing::info!(peer = %self.peer, error = %e, "closing connection: undecodable SaslAuthenticate");
                        Step::Close
                    }
                }
            }
        }
    }

    fn unexpected(&self, api_key: Option<ApiKey>, during: &str) -> Step {
        tracing::info!(peer = %self.peer, listener = %self.listener.listener, ?api_key, "closing connection: unexpected Kafka request during SASL {during}");
        Step::Close
    }

    fn handshake(&mut self, frame: &Bytes, table: &impl VersionTable) -> Step {
        let request = match decode_request(frame.clone(), table) {
            Ok(request) => request,
            Err(e) => {
                tracing::info!(peer = %self.peer, error = %e, "closing connection: undecodable SaslHandshake");
                return Step::Close;
            }
        };
        let RequestKind::SaslHandshake(body) = request.body else {
            return Step::Close;
        };
        let version = request.header.request_api_version;
        let asked = body.mechanism.as_str();
        let chosen = Mechanism::parse(asked).filter(|m| self.listener.mechanisms.contains(m));
        let reauth_mismatch = match (&self.session, chosen) {
            (Some((_, previous)), Some(chosen)) => *previous != chosen,
            _ => false,
        };
        let mut response =
            SaslHandshakeResponse::default().with_mechanisms(self.listener.mechanism_names());
        let close = match chosen {
            Some(mechanism) if !reauth_mismatch => {
                self.state = State::Authenticate {
                    mechanism,
                    bare: version == 0,
                    exchange: Exchange::new(mechanism),
                };
                false
            }
            _ => {
                tracing::info!(peer = %self.peer, listener = %self.listener.listener, mechanism = asked, reauthentication = self.session.is_some(), "closing connection: SASL mechanism not enabled");
                response.error_code = ResponseError::UnsupportedSaslMechanism.code();
                true
            }
        };
        Step::Answer {
            answer: Answer::Response {
                api_key: ApiKey::SaslHandshake,
                api_version: version,
                correlation_id: request.header.correlation_id,
                body: ResponseKind::SaslHandshake(response),
                delay: Duration::ZERO,
            },
            close,
        }
    }

    /// Evaluates one token; `header` is the SaslAuthenticate request's version and
    /// correlation id, `None` for a bare token.
    fn token(&mut self, token: Bytes, header: Option<(i16, i32)>) -> Step {
        let State::Authenticate {
            mechanism,
            exchange,
            ..
        } = &mut self.state
        else {
            return Step::Close;
        };
        let mechanism = *mechanism;
        let outcome = evaluate(&self.listener, exchange, mechanism, &token);
        let outcome = outcome.and_then(|outcome| match outcome {
            Outcome::Authenticated {
                user,
                bytes,
                expires_ms,
            } => self
                .authenticated(&user, mechanism, expires_ms)
                .map(|()| (true, bytes)),
            Outcome::Challenge(bytes) => Ok((false, bytes)),
        });
        match outcome {
            Ok((done, bytes)) => {
                if done {
                    self.state = State::Authenticated;
                }
                let lifetime = if done { self.session_lifetime_ms() } else { 0 };
                self.answer(header, Ok((bytes, lifetime)))
            }
            Err(failure) => {
                tracing::info!(peer = %self.peer, listener = %self.listener.listener, mechanism = mechanism.name(), reason = %failure.reason, "failed authentication");
                crate::metrics::ConnectionMetrics::global().failed_authentication();
                self.answer(header, Err(failure))
            }
        }
    }

    /// Records a successful authentication as `user`: the principal, and on a
    /// re-authentication the check that it did not change.
    fn authenticated(
        &mut self,
        user: &str,
        mechanism: Mechanism,
        expires_ms: Option<i64>,
    ) -> Result<(), Failure> {
        let principal = KafkaPrincipal::user(user);
        if let Some((previous, _)) = &self.session {
            if **previous != principal {
                return Err(Failure {
                    client_message: format!("Cannot change principals during re-authentication from {previous}: {principal}"),
                    reason: format!("re-authentication as {principal} of a session of {previous}"),
                });
            }
        }
        tracing::debug!(peer = %self.peer, listener = %self.listener.listener, %principal, mechanism = mechanism.name(), "authenticated");
        self.session = Some((Arc::new(principal), mechanism));
        // With re-authentication on, the session ends at connections.max.reauth.ms or
        // when the token expires, whichever is first (KIP-368).
        self.lifetime = (self.listener.reauth_ms > 0).then(|| {
            let mut lifetime = Duration::from_millis(self.listener.reauth_ms);
            if let Some(expires_ms) = expires_ms {
                let left = expires_ms.saturating_sub(logbook_common::now_ms()).max(0);
                lifetime = lifetime.min(Duration::from_millis(left.unsigned_abs()));
            }
            lifetime
        });
        self.expires = self.lifetime.map(|lifetime| Instant::now() + lifetime);
        Ok(())
    }

    fn session_lifetime_ms(&self) -> i64 {
        self.lifetime
            .map_or(0, |l| i64::try_from(l.as_millis()).unwrap_or(i64::MAX))
    }

    fn answer(&self, header: Option<(i16, i32)>, outcome: Result<(Vec<u8>, i64), Failure>) -> Step {
        let Some((api_version, correlation_id)) = header else {
            // Bare tokens: a failure closes without an answer, as in Kafka.
            return match outcome {
                Ok((bytes, _)) => Step::Answer {
                    answer: Answer::Token(Bytes::from(bytes)),
                    close: false,
                },
                Err(_) => Step::Close,
            };
        };
        let (body, delay, close) = match outcome {
            Ok((bytes, lifetime)) => (
                SaslAuthenticateResponse::default()
                    .with_auth_bytes(Bytes::from(bytes))
                    .with_session_lifetime_ms(if api_version >= 1 { lifetime } else { 0 }),
                Duration::ZERO,
                false,
            ),
            Err(failure) => (
                SaslAuthenticateResponse::default()
                    .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                    .with_error_message(Some(StrBytes::from_string(failure.client_message))),
                self.listener.failed_delay,
                true,
            ),
        };
        Step::Answer {
            answer: Answer::Response {
                api_key: ApiKey::SaslAuthenticate,
                api_version,
                correlation_id,
                body: ResponseKind::SaslAuthenticate(body),
                delay,
            },
            close,
        }
    }
}

/// Runs one token through the mechanism's exchange.
fn evaluate(
    listener: &SaslListener,
    exchange: &mut Exchange,
    mechanism: Mechanism,
    token: &[u8],
) -> Result<Outcome, Failure> {
    let invalid = |reason: String| {
        Failure {
        client_message: format!(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
            mechanism.name()
        ),
        reason,
    }
    };
    match exchange {
        Exchange::Plain => plain(&listener.plain_users, token).map(|user| Outcome::Authenticated {
            user,
            bytes: Vec::new(),
            expires_ms: None,
        }),
        Exchange::Scram(server) => {
            let store = Arc::clone(&listener.scram);
            let lookup = move |user: &str, m| store.credential(user, m);
            let nonce = server_nonce()
                .ok_or_else(|| invalid("the system's random source failed".to_string()))?;
            match server.step(token, &lookup, &nonce) {
                Ok(ScramStep::Challenge(challenge)) => Ok(Outcome::Challenge(challenge)),
                Ok(ScramStep::Authenticated { user, server_final }) => Ok(Outcome::Authenticated {
                    user,
                    bytes: server_final,
                    expires_ms: None,
                }),
                Err(e) => Err(invalid(e.to_string())),
            }
        }
        Exchange::OAuthBearer { error } => {
            if token == [1u8] {
                if let Some(json) = error.take() {
                    return Err(Failure {
                        client_message: json,
                        reason: "invalid token".to_string(),
                    });
                }
            }
            let (jwt, authzid) = oauthbearer::client_first(token).map_err(invalid)?;
            let Some(validator) = &listener.oauth else {
                return Err(invalid("OAUTHBEARER has no validator".to_string()));
            };
            match validator.validate(&jwt, logbook_common::now_ms()) {
                Ok((user, expires_ms)) => {
                    if !authzid.is_empty() && authzid != user {
                        return Err(Failure {
                            client_message: format!("Authentication failed: Client requested an authorization id ({authzid}) that is different from the token's principal name ({user})"),
                            reason: format!("authorization id {authzid} differs from the token's principal {user}"),
                        });
                    }
                    Ok(Outcome::Authenticated {
                        user,
                        bytes: Vec::new(),
                        expires_ms: Some(expires_ms),
                    })
                }
                Err(reason) => {
                    // RFC 7628: the error goes out as a challenge; the failure follows the
                    // client's %x01.
                    tracing::info!(%reason, "OAUTHBEARER token refused");
                    let json = r#"{"status":"invalid_token"}"#.to_string();
                    *error = Some(json.clone());
                    Ok(Outcome::Challenge(json.into_bytes()))
                }
            }
        }
    }
}

/// A refused authentication: what the client is told, and what the log says.
struct Failure {
    client_message: String,
    reason: String,
}

/// Checks a PLAIN token (`authzid NUL authcid NUL password`) against the JAAS users, with
/// Kafka's `PlainSaslServer` messages.
fn plain(users: &HashMap<String, String>, token: &[u8]) -> Result<String, Failure> {
    let fail = |message: &str, reason: String| Failure {
        client_message: message.to_string(),
        reason,
    };
    let parts: Vec<&[u8]> = token.split(|b| *b == 0).collect();
    if parts.len() != 3 {
        return Err(fail(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN",
            format!("invalid SASL/PLAIN response: expected 3 tokens, got {}", parts.len()),
        ));
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let (authzid, user, password) = (text(parts[0]), text(parts[1]), parts[2]);
    if user.is_empty() {
        return Err(fail(
            "Authentication failed: username not specified",
            "no username".into(),
        ));
    }
    if password.is_empty() {
        return Err(fail(
            "Authentication failed: password not specified",
            format!("no password for {user}"),
        ));
    }
    let known = users
        .get(&user)
        .is_some_and(|expected| bool::from(expected.as_bytes().ct_eq(password)));
    if !known {
        return Err(fail(
            "Authentication failed: Invalid username or password",
            format!("invalid username or password for {user}"),
        ));
    }
    if !authzid.is_empty() && authzid != user {
        return Err(fail(
            "Authentication failed: Client requested an authorization id that is different from username",
            format!("authorization id {authzid} differs from username {user}"),
        ));
    }
    Ok(user)
}

/// A fresh SCRAM server nonce: 18 random bytes, base64 without padding; `None` if the
/// system's random source fails (that login fails, the broker goes on).
fn server_nonce() -> Option<String> {
    use base64::Engine;
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 18];
    ring::rand::SystemRandom::new().fill(&mut bytes).ok()?;
    Some(base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes))
}

#[cfg(test)]
mod tests;
