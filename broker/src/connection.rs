//! One client connection: a reader that decodes frames and runs each request's ordered part,
//! and a writer that sends responses strictly in request order through a [`Transport`].
//!
//! Between them sits a bounded queue (`inflight_requests_per_connection_max`) of pending
//! responses: a client that pipelines faster than we answer is slowed by TCP backpressure,
//! not by our memory. Malformed input closes the connection after the responses already
//! owed are sent, with one log line, as Apache Kafka does. So does a connection that stays
//! idle — no request in flight and no request received — for `connections_max_idle_ms`
//! (Kafka's `connections.max.idle.ms`), so that idle sockets cannot hold the connection
//! limits against real clients.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kafka_protocol::messages::ApiKey;
use logbook_protocol::{
    decode_request, encode_api_versions_fallback, encode_response_with_records, frame_codec,
    DecodeError, ResponseBuf,
};
use tokio::io::AsyncRead;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

use crate::authorizer::KafkaPrincipal;
use crate::broker::Broker;
use crate::handlers::{self, RequestContext, ResponseFuture};
use crate::listeners::ListenerName;
use crate::sasl::{Answer, Authenticator, SaslListener, Step};
use crate::ssl::principal::PrincipalMapper;
use crate::transport::{CopyingTransport, PlaintextTransport, Transport};

/// Bytes of responses (records in files included) gathered before a write when more are
/// queued.
const WRITE_BATCH_BYTES: usize = 256 * 1024;

/// A response owed to the client, in request order.
enum Pending {
    /// A decoded request's future answer.
    Response {
        api_key: ApiKey,
        api_version: i16,
        correlation_id: i32,
        response: ResponseFuture,
        /// When its frame was read: the start of its queue time.
        received: Instant,
    },
    /// A bare SASL token (after SaslHandshake v0), sent length-prefixed.
    SaslToken(bytes::Bytes),
    /// ApiVersions asked at a version we do not know: answer in the v0 layout.
    ApiVersionsFallback { correlation_id: i32 },
}

impl Pending {
    /// The pending form of an answer of the SASL exchange; a delayed one (a failed
    /// authentication) waits in its future, holding back only its own connection.
    fn sasl(answer: Answer, received: Instant) -> Self {
        match answer {
            Answer::Token(token) => Pending::SaslToken(token),
            Answer::Response {
                api_key,
                api_version,
                correlation_id,
                body,
                delay,
            } => Pending::Response {
                api_key,
                api_version,
                correlation_id,
                response: Box::pin(async move {
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    Some(body.into())
                }),
                received,
            },
        }
    }
}

/// What the idle check needs from both halves of a connection.
struct Activity {
    /// When the connection started; times below are milliseconds since then.
    started: Instant,
    /// Requests read whose response is not yet encoded.
    inflight: AtomicUsize,
    /// When the last response was encoded.
    last_response_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            inflight: AtomicUsize::new(0),
            last_response_ms: AtomicU64::new(0),
        }
    }

    fn request_queued(&self) {
        self.inflight.fetch_add(1, Ordering::AcqRel);
    }

    fn response_done(&self) {
        let now_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_response_ms.store(now_ms, Ordering::Release);
        self.inflight.fetch_sub(1, Ordering::AcqRel);
    }

    /// When the connection becomes idle if nothing happens meanwhile: `idle` after the
    /// later of the last request read and the last response, or `idle` from now while a
    /// request is in flight (a long-polling fetch or a parked JoinGroup is not idleness).
    fn idle_deadline(&self, last_request: Instant, idle: Duration) -> Instant {
        if self.inflight.load(Ordering::Acquire) > 0 {
            return Instant::now() + idle;
        }
        let last_response =
            self.started + Duration::from_millis(self.last_response_ms.load(Ordering::Acquire));
        last_request.max(last_response) + idle
    }
}

/// How a listener secures its connections: TLS (SSL and SASL_SSL listeners, with the
/// rules that turn a client certificate into a principal) and SASL (SASL_PLAINTEXT and
/// SASL_SSL listeners).
#[derive(Clone, Default)]
pub struct ListenerSecurity {
    /// The TLS acceptor and `ssl.principal.mapping.rules`.
    pub tls: Option<(tokio_rustls::TlsAcceptor, Arc<PrincipalMapper>)>,
    /// The SASL settings.
    pub sasl: Option<Arc<SaslListener>>,
}

/// Serves one connection until the client closes it, sends something malformed, stays
/// idle too long, fails authentication, or the broker shuts down.
///
/// On a TLS listener the handshake comes first (bounded by `connections.max.idle.ms`, so
/// a client that never finishes it holds nothing for long), and responses are copied
/// through TLS ([`CopyingTransport`]): `sendfile` cannot encrypt, as on Kafka without
/// kernel TLS. The principal is the client certificate's mapped subject, or `ANONYMOUS`;
/// on a SASL listener it is the SASL user.
pub async fn serve(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: SocketAddr,
    listener: ListenerName,
    security: ListenerSecurity,
    shutdown: CancellationToken,
) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "set_nodelay failed");
    }
    let sasl = security.sasl.map(|sasl| Authenticator::new(sasl, peer));
    let Some((tls, mapper)) = security.tls else {
        let (read_half, write_half) = stream.into_split();
        let transport = PlaintextTransport::new(write_half);
        let auth = Auth {
            principal: crate::handlers::anonymous(),
            sasl,
        };
        serve_with(broker, read_half, transport, peer, listener, auth, shutdown).await;
        return;
    };
    let timeout = Duration::from_millis(broker.config.limits.connections_max_idle_ms.max(1));
    let handshake = tokio::select! {
        () = shutdown.cancelled() => return,
        handshake = tokio::time::timeout(timeout, tls.accept(stream)) => handshake,
    };
    let stream = match handshake {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            tracing::info!(%peer, %listener, error = %e, "closing connection: TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::info!(%peer, %listener, timeout_ms = timeout.as_millis(), "closing connection: TLS handshake not finished in time");
            return;
        }
    };
    let Some(principal) = certificate_principal(stream.get_ref().1, &mapper, peer) else {
        return;
    };
    let (read_half, write_half) = tokio::io::split(stream);
    let auth = Auth { principal, sasl };
    serve_with(
        broker,
        read_half,
        CopyingTransport::new(write_half),
        peer,
        listener,
        auth,
        shutdown,
    )
    .await;
}

/// The principal of a TLS client: its certificate's subject mapped by
/// `ssl.principal.mapping.rules`, or `ANONYMOUS` without a certificate; `None` (close)
/// when no rule applies, as Kafka fails such a connection.
pub(crate) fn certificate_principal(
    tls: &rustls::ServerConnection,
    mapper: &PrincipalMapper,
    peer: SocketAddr,
) -> Option<Arc<KafkaPrincipal>> {
    let Some(certificate) = tls.peer_certificates().and_then(<[_]>::first) else {
        return Some(crate::handlers::anonymous());
    };
    match crate::ssl::principal::subject_name(certificate).and_then(|dn| mapper.name(&dn)) {
        Ok(name) => Some(Arc::new(KafkaPrincipal::user(&name))),
        Err(e) => {
            tracing::info!(%peer, error = %e, "closing connection: no principal for the client certificate");
            None
        }
    }
}

/// Who a connection's requests come from: the principal of its transport, and on a SASL
/// listener the exchange that replaces it.
pub struct Auth {
    /// The principal before (or without) SASL.
    pub principal: Arc<KafkaPrincipal>,
    /// The SASL exchange, on a SASL listener.
    pub sasl: Option<Authenticator>,
}

/// First capacity of a connection's read buffer (see [`serve_with`]).
const READ_BUFFER_INITIAL_BYTES: usize = 1024;

/// Serves one connection whose bytes arrive on `input` and whose responses leave through
/// `transport` (plain TCP, or a stream that needs every byte copied, such as TLS).
pub async fn serve_with<R, T>(
    broker: Arc<Broker>,
    input: R,
    transport: T,
    peer: SocketAddr,
    listener: ListenerName,
    mut auth: Auth,
    shutdown: CancellationToken,
) where
    R: AsyncRead + Unpin,
    T: Transport,
{
    let limits = &broker.config.limits;
    // A small first read buffer: an idle connection keeps it for as long as it stays
    // open, and a frame's length prefix makes the codec reserve the whole frame anyway.
    // With tokio-util's default 8 KiB, 10,000 idle connections took about 10 KiB each.
    let mut frames = FramedRead::with_capacity(
        input,
        frame_codec(limits.frame_bytes_max),
        READ_BUFFER_INITIAL_BYTES,
    );
    if let Some(sasl) = &auth.sasl {
        // Until authenticated, frames are bounded by `sasl.server.max.receive.size`.
        frames
            .decoder_mut()
            .set_max_frame_length(sasl.max_receive().min(limits.frame_bytes_max));
    }
    let transaction_version = broker.config.transaction_version;
    let supported = |key| handlers::supported_at(key, transaction_version);
    let idle = Duration::from_millis(limits.connections_max_idle_ms.max(1));
    let (tx, rx) = mpsc::channel(limits.inflight_requests_per_connection_max.max(1));
    let activity = Arc::new(Activity::new());
    let writer = tokio::spawn(write_loop(transport, rx, peer, Arc::clone(&activity)));
    let mut last_request = Instant::now();
    // One timer per connection, moved on rather than re-created for every request.
    let idle_timer = tokio::time::sleep(idle);
    tokio::pin!(idle_timer);
    loop {
        idle_timer
            .as_mut()
            .reset(activity.idle_deadline(last_request, idle));
        let frame = tokio::select! {
            () = shutdown.cancelled() => break,
            () = &mut idle_timer => {
                if activity.idle_deadline(last_request, idle) <= Instant::now() {
                    tracing::debug!(%peer, idle_ms = idle.as_millis(), "closing idle connection");
                    break;
                }
                continue;
            }
            frame = frames.next() => frame,
        };
        last_request = Instant::now();
        let Some(frame) = frame_or_close(frame, peer) else {
            break;
        };
        let principal = match auth.sasl.as_mut() {
            None => Arc::clone(&auth.principal),
            Some(sasl) => match sasl.on_frame(&frame, &supported) {
                Step::Serve(principal) => principal,
                Step::Close => break,
                Step::Answer { answer, close } => {
                    if sasl.is_authenticated() {
                        frames
                            .decoder_mut()
                            .set_max_frame_length(limits.frame_bytes_max);
                    }
                    activity.request_queued();
                    if tx.send(Pending::sasl(answer, last_request)).await.is_err() || close {
                        break;
                    }
                    continue;
                }
            },
        };
        let Some((pending, closing, throttle_ms)) =
            dispatch_frame(&broker, frame, peer, &listener, principal, last_request)
        else {
            break;
        };
        activity.request_queued();
        if tx.send(pending).await.is_err() {
            break;
        }
        if closing {
            tracing::debug!(%peer, "closing connection at the handler's request");
            break;
        }
        if throttle_ms > 0 {
            // KIP-219: the answer goes out now; the channel stays muted for the throttle
            // time, so a client that ignores throttle_time_ms is held back all the same.
            let muted = Duration::from_millis(u64::try_from(throttle_ms).unwrap_or(0));
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(muted) => {}
            }
            last_request = Instant::now();
        }
    }
    drop(tx);
    if let Err(e) = writer.await {
        tracing::error!(%peer, error = %e, "connection writer panicked");
    }
}

/// The frame read, or `None` when the connection must close (the client closed it, or
/// sent a bad frame: logged).
fn frame_or_close(
    frame: Option<std::io::Result<bytes::BytesMut>>,
    peer: SocketAddr,
) -> Option<bytes::Bytes> {
    match frame? {
        Ok(frame) => Some(frame.freeze()),
        // A TLS client that closes its socket without close_notify (most do) is closing,
        // not sending a bad frame.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            tracing::debug!(%peer, error = %e, "client closed the connection");
            None
        }
        Err(e) => {
            tracing::warn!(%peer, error = %e, "closing connection: bad frame");
            None
        }
    }
}

/// Decodes a frame and runs its request's ordered part (`handlers::dispatch`): the
/// pending answer for the writer, and whether the handler asked to close the connection
/// after it; `None` (close now) when the frame is not a request we can answer.
fn dispatch_frame(
    broker: &Arc<Broker>,
    frame: bytes::Bytes,
    peer: SocketAddr,
    listener: &ListenerName,
    principal: Arc<KafkaPrincipal>,
    received: Instant,
) -> Option<(Pending, bool, i32)> {
    let transaction_version = broker.config.transaction_version;
    let supported = |key| handlers::supported_at(key, transaction_version);
    let frame_bytes = frame.len();
    match decode_request(frame, &supported) {
        Ok(request) => {
            crate::metrics::RequestMetrics::global().received(request.api_key, frame_bytes);
            let ctx = RequestContext::new(
                Arc::clone(broker),
                peer,
                listener.clone(),
                request.api_key,
                request.header.request_api_version,
                request.header.correlation_id,
                request.header.client_id,
            )
            .with_principal(principal);
            let request_quota = crate::client_request_quota::applied(&ctx, &request.body);
            let started = request_quota.as_ref().map(|_| Instant::now());
            let mut response =
                match crate::fault_injector::dispatch(&ctx, request.body, frame_bytes) {
                    crate::fault_injector::Dispatched::Answer(response) => response,
                    crate::fault_injector::Dispatched::Drop => return None,
                };
            if let (Some(applied), Some(started)) = (request_quota, started) {
                response =
                    crate::client_request_quota::charge(&ctx, applied, started.elapsed(), response);
            }
            let pending = Pending::Response {
                api_key: ctx.api_key,
                api_version: ctx.api_version,
                correlation_id: ctx.correlation_id,
                response,
                received,
            };
            Some((pending, ctx.closes_connection(), ctx.throttle_ms()))
        }
        Err(DecodeError::UnsupportedVersion {
            preamble,
            api_key: ApiKey::ApiVersions,
        }) => {
            let pending = Pending::ApiVersionsFallback {
                correlation_id: preamble.correlation_id,
            };
            Some((pending, false, 0))
        }
        Err(e) => {
            tracing::warn!(%peer, error = %e, "closing connection: undecodable request");
            None
        }
    }
}

async fn write_loop<T: Transport>(
    mut transport: T,
    mut rx: mpsc::Receiver<Pending>,
    peer: SocketAddr,
    activity: Arc<Activity>,
) {
    let mut buf = ResponseBuf::new();
    while let Some(pending) = rx.recv().await {
        let encoded = match pending {
            Pending::Response {
                api_key,
                api_version,
                correlation_id,
                mut response,
                received,
            } => {
                let ready =
                    answer_in_order(api_key, &mut response, received, &mut buf, &mut transport)
                        .await;
                match ready {
                    Err(e) => {
                        tracing::debug!(%peer, error = %e, "write failed; closing connection");
                        return;
                    }
                    Ok(None) => Ok(()),
                    Ok(Some(response)) => encode_response_with_records(
                        &mut buf,
                        api_key,
                        api_version,
                        correlation_id,
                        &response.body,
                        response.records,
                    ),
                }
            }
            Pending::SaslToken(token) => {
                use bytes::BufMut;
                let tail = buf.tail();
                tail.put_u32(u32::try_from(token.len()).unwrap_or(u32::MAX));
                tail.put_slice(&token);
                Ok(())
            }
            Pending::ApiVersionsFallback { correlation_id } => {
                let body = handlers::api_versions::unsupported_version();
                encode_api_versions_fallback(buf.tail(), correlation_id, &body)
            }
        };
        activity.response_done();
        if let Err(e) = encoded {
            tracing::error!(%peer, error = %e, "cannot encode response; closing connection");
            break;
        }
        // Gather responses that are already queued into one write, up to a bound; the
        // next one is awaited only after what is gathered has left (`ready_or_flush`).
        if !rx.is_empty() && buf.len() < WRITE_BATCH_BYTES {
            continue;
        }
        if let Err(e) = transport.send(buf.take_chunks()).await {
            tracing::debug!(%peer, error = %e, "write failed; closing connection");
            return;
        }
    }
    if !buf.is_empty() {
        let _ = transport.send(buf.take_chunks()).await;
    }
    let _ = transport.shutdown().await;
}

/// Runs a request's future to its answer ([`ready_or_flush`]) and records its queue and
/// handling times. Handler futures run when polled here, in request order: until then the
/// request waits behind the earlier ones of its connection.
async fn answer_in_order<T: Transport>(
    api_key: ApiKey,
    response: &mut ResponseFuture,
    received: Instant,
    buf: &mut ResponseBuf,
    transport: &mut T,
) -> std::io::Result<Option<handlers::Response>> {
    let started = Instant::now();
    let ready = ready_or_flush(response, buf, transport).await;
    if let Ok(answer) = &ready {
        crate::metrics::RequestMetrics::global().answered(
            api_key,
            started.saturating_duration_since(received),
            started.elapsed(),
            answer.as_ref().map(|r| &r.body),
        );
    }
    ready
}

/// The answer of the next request, writing out the responses gathered so far first unless
/// it is ready now. A finished response must never wait for a later request of the same
/// connection: that one may be parked for a long time (a JoinGroup waits for the whole
/// group, a Fetch for data), and a client that needs the earlier answer (a SyncGroup's
/// assignment, a Heartbeat's REBALANCE_IN_PROGRESS) before it can do what releases the
/// parked one would stall until its request timeout.
async fn ready_or_flush<T: Transport>(
    response: &mut ResponseFuture,
    buf: &mut ResponseBuf,
    transport: &mut T,
) -> std::io::Result<Option<handlers::Response>> {
    if !buf.is_empty() {
        if let Some(ready) = futures::FutureExt::now_or_never(&mut *response) {
            return Ok(ready);
        }
        transport.send(buf.take_chunks()).await?;
    }
    Ok(response.await)
}
