//! How the client secures a connection, as Kafka's `security.protocol` says: TLS
//! (rustls) around the TCP stream, then a SASL login (PLAIN or SCRAM-SHA-256/512, as
//! Kafka's `SaslClientAuthenticator`: SaslHandshake v1, then SaslAuthenticate v2) before
//! the first request. Built by the tools from `--command-config` (Kafka's client
//! properties) and by the broker for its inter-broker listener.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use bytes::Bytes;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Request, StrBytes};
use ring::{digest, hmac, pbkdf2};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

/// TLS and SASL settings of a connection; neither means PLAINTEXT.
#[derive(Clone, Default)]
pub struct ConnectionSecurity {
    /// TLS with this client configuration (SSL, SASL_SSL).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// A SASL login (SASL_PLAINTEXT, SASL_SSL).
    pub sasl: Option<SaslLogin>,
}

impl std::fmt::Debug for ConnectionSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionSecurity")
            .field("tls", &self.tls.is_some())
            .field(
                "sasl",
                &self.sasl.as_ref().map(|s| (s.mechanism, &s.username)),
            )
            .finish()
    }
}

impl ConnectionSecurity {
    /// Secures `stream`, a TCP connection to `host`: the TLS handshake (the server's
    /// certificate checked against `host`), then the SASL login as `client_id`.
    ///
    /// # Errors
    /// `host` is not a TLS server name, the handshake failed, or the login was refused
    /// (the broker's message).
    pub async fn secure(
        &self,
        stream: TcpStream,
        host: &str,
        client_id: &str,
    ) -> Result<SecuredStream, String> {
        let mut secured = match &self.tls {
            None => SecuredStream::Plain(stream),
            Some(tls) => {
                let name = rustls_pki_types::ServerName::try_from(host.to_string())
                    .map_err(|e| format!("{host} is not a TLS server name: {e}"))?;
                let connector = tokio_rustls::TlsConnector::from(Arc::clone(tls));
                let stream = connector
                    .connect(name, stream)
                    .await
                    .map_err(|e| format!("TLS handshake with {host}: {e}"))?;
                SecuredStream::Tls(Box::new(stream))
            }
        };
        if let Some(login) = &self.sasl {
            authenticate(&mut secured, login, client_id).await?;
        }
        Ok(secured)
    }

    /// Whether this is PLAINTEXT (no TLS, no SASL).
    #[must_use]
    pub fn is_plaintext(&self) -> bool {
        self.tls.is_none() && self.sasl.is_none()
    }
}

/// A connection as [`ConnectionSecurity::secure`] left it: the TCP stream itself, or TLS
/// around it.
pub enum SecuredStream {
    /// PLAINTEXT or SASL_PLAINTEXT.
    Plain(TcpStream),
    /// SSL or SASL_SSL.
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for SecuredStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            SecuredStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            SecuredStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for SecuredStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            SecuredStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            SecuredStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            SecuredStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            SecuredStream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            SecuredStream::Plain(s) => s.is_write_vectored(),
            SecuredStream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            SecuredStream::Plain(s) => Pin::new(s).poll_flush(cx),
            SecuredStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            SecuredStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            SecuredStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A SASL mechanism the client logs in with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaslMechanism {
    /// PLAIN (RFC 4616).
    Plain,
    /// SCRAM-SHA-256 (RFC 7677).
    ScramSha256,
    /// SCRAM-SHA-512.
    ScramSha512,
}

impl SaslMechanism {
    /// The mechanism named as Kafka names it (`sasl.mechanism`).
    ///
    /// # Errors
    /// A mechanism the client does not speak.
    pub fn parse(name: &str) -> Result<Self, String> {
        match name.trim() {
            "PLAIN" => Ok(SaslMechanism::Plain),
            "SCRAM-SHA-256" => Ok(SaslMechanism::ScramSha256),
            "SCRAM-SHA-512" => Ok(SaslMechanism::ScramSha512),
            other => Err(format!(
                "sasl.mechanism {other} is not supported here (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"
            )),
        }
    }

    /// Kafka's name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    fn scram(
        self,
    ) -> Option<(
        hmac::Algorithm,
        &'static digest::Algorithm,
        pbkdf2::Algorithm,
    )> {
        match self {
            SaslMechanism::Plain => None,
            SaslMechanism::ScramSha256 => Some((
                hmac::HMAC_SHA256,
                &digest::SHA256,
                pbkdf2::PBKDF2_HMAC_SHA256,
            )),
            SaslMechanism::ScramSha512 => Some((
                hmac::HMAC_SHA512,
                &digest::SHA512,
                pbkdf2::PBKDF2_HMAC_SHA512,
            )),
        }
    }
}

/// A user and password to log in with.
#[derive(Clone)]
pub struct SaslLogin {
    /// The mechanism.
    pub mechanism: SaslMechanism,
    /// The user.
    pub username: String,
    /// The password.
    pub password: String,
}

/// SCRAM's `Hi(password, salt, iterations)` (RFC 5802): what a SCRAM credential is
/// derived from, on the client as on an admin tool creating users.
#[must_use]
pub fn salted_password(
    mechanism: SaslMechanism,
    password: &[u8],
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    let (algorithm, len) = match mechanism {
        SaslMechanism::ScramSha512 => (pbkdf2::PBKDF2_HMAC_SHA512, 64),
        _ => (pbkdf2::PBKDF2_HMAC_SHA256, 32),
    };
    let mut out = vec![0; len];
    let rounds = std::num::NonZeroU32::new(iterations.max(1)).unwrap_or(std::num::NonZeroU32::MIN);
    pbkdf2::derive(algorithm, rounds, salt, password, &mut out);
    out
}

/// Logs in on `stream` as `login` says.
///
/// # Errors
/// The broker refused the mechanism or the credentials (with its message), the SCRAM
/// exchange did not hold together, or the connection failed.
pub async fn authenticate<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    login: &SaslLogin,
    client_id: &str,
) -> Result<(), String> {
    let handshake: SaslHandshakeResponse = exchange(
        stream,
        client_id,
        1,
        &SaslHandshakeRequest::default()
            .with_mechanism(StrBytes::from_static_str(login.mechanism.name())),
    )
    .await?;
    if handshake.error_code != 0 {
        let enabled: Vec<String> = handshake
            .mechanisms
            .iter()
            .map(ToString::to_string)
            .collect();
        return Err(format!(
            "the broker does not enable SASL mechanism {} (enabled: {})",
            login.mechanism.name(),
            enabled.join(", ")
        ));
    }
    match login.mechanism.scram() {
        None => {
            let token = format!("\0{}\0{}", login.username, login.password);
            authenticate_step(stream, client_id, token.into_bytes()).await?;
            Ok(())
        }
        Some(algorithms) => scram(stream, login, client_id, algorithms).await,
    }
}

async fn scram<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    login: &SaslLogin,
    client_id: &str,
    (mac, hash, _): (
        hmac::Algorithm,
        &'static digest::Algorithm,
        pbkdf2::Algorithm,
    ),
) -> Result<(), String> {
    let mut nonce_bytes = [0u8; 24];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce_bytes)
        .map_err(|_| "the system's random source failed".to_string())?;
    let nonce = B64.encode(nonce_bytes);
    let user = login.username.replace('=', "=3D").replace(',', "=2C");
    let client_first_bare = format!("n={user},r={nonce}");
    let server_first = authenticate_step(
        stream,
        client_id,
        format!("n,,{client_first_bare}").into_bytes(),
    )
    .await?;
    let server_first =
        String::from_utf8(server_first).map_err(|_| "server-first is not UTF-8".to_string())?;
    let field = |name: &str| {
        server_first
            .split(',')
            .find_map(|f| f.strip_prefix(name))
            .ok_or_else(|| format!("server-first without {name}"))
    };
    let server_nonce = field("r=")?;
    if !server_nonce.starts_with(&nonce) {
        return Err("the server's nonce does not extend the client's".to_string());
    }
    let salt = B64
        .decode(field("s=")?)
        .map_err(|_| "the salt is not base64".to_string())?;
    let iterations: u32 = field("i=")?
        .parse()
        .map_err(|_| "the iteration count is not a number".to_string())?;
    let salted = salted_password(
        login.mechanism,
        login.password.as_bytes(),
        &salt,
        iterations,
    );
    let key = hmac::Key::new(mac, &salted);
    let client_key = hmac::sign(&key, b"Client Key");
    let stored_key = digest::digest(hash, client_key.as_ref());
    let client_final_bare = format!("c=biws,r={server_nonce}");
    let auth_message = format!("{client_first_bare},{server_first},{client_final_bare}");
    let signature = hmac::sign(
        &hmac::Key::new(mac, stored_key.as_ref()),
        auth_message.as_bytes(),
    );
    let proof: Vec<u8> = client_key
        .as_ref()
        .iter()
        .zip(signature.as_ref())
        .map(|(a, b)| a ^ b)
        .collect();
    let server_final = authenticate_step(
        stream,
        client_id,
        format!("{client_final_bare},p={}", B64.encode(proof)).into_bytes(),
    )
    .await?;
    let server_final =
        String::from_utf8(server_final).map_err(|_| "server-final is not UTF-8".to_string())?;
    let verifier = server_final
        .strip_prefix("v=")
        .ok_or_else(|| format!("the server refused: {server_final}"))?;
    let server_key = hmac::sign(&key, b"Server Key");
    let expected = hmac::sign(
        &hmac::Key::new(mac, server_key.as_ref()),
        auth_message.as_bytes(),
    );
    if B64.decode(verifier).ok().as_deref() != Some(expected.as_ref()) {
        return Err("the server's signature does not verify: not the broker we know".to_string());
    }
    Ok(())
}

/// One SaslAuthenticate v2 round: the server's bytes, or its refusal.
async fn authenticate_step<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    client_id: &str,
    token: Vec<u8>,
) -> Result<Vec<u8>, String> {
    let response: SaslAuthenticateResponse = exchange(
        stream,
        client_id,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
    )
    .await?;
    if response.error_code != 0 {
        return Err(format!(
            "authentication failed: {}",
            response.error_message.as_deref().unwrap_or("(no message)")
        ));
    }
    Ok(response.auth_bytes.to_vec())
}

/// One request and its answer on a connection nothing else uses yet.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin, R: Request>(
    stream: &mut S,
    client_id: &str,
    version: i16,
    request: &R,
) -> Result<R::Response, String> {
    let frame = crate::encode_request(version, client_id, request)
        .and_then(|body| crate::with_size_prefix(&body))?;
    stream
        .write_all(&frame)
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut size = [0u8; 4];
    stream
        .read_exact(&mut size)
        .await
        .map_err(|e| format!("the broker closed the connection during SASL ({e})"))?;
    let size = usize::try_from(u32::from_be_bytes(size)).unwrap_or(usize::MAX);
    if size > 1 << 20 {
        return Err(format!("a {size}-byte answer during SASL"));
    }
    let mut body = vec![0u8; size];
    stream
        .read_exact(&mut body)
        .await
        .map_err(|e| format!("read: {e}"))?;
    let (_, response) = crate::decode_response::<R>(&mut Bytes::from(body), version)?;
    Ok(response)
}
