//! The Kafka-protocol client of the workspace (Kafka's `clients` module): `InterBrokerClient`
//! sends typed requests to a broker and decodes its answers, and [`error_name`] names an
//! error code as Kafka does.
//!
//! Two users share it. The broker's coordinators send requests from this broker to another
//! one (Kafka's `NodeToNodeChannelManager` / `InterBrokerSendThread`): WriteTxnMarkers to
//! partition leaders and AddPartitionsToTxn (verify only) to transaction coordinators. The
//! admin CLI (`logbook-cli`: its `KafkaClient` and `logbook healthcheck`) reaches any
//! Kafka-compatible broker through it. It depends on no other workspace crate but
//! `logbook-protocol` (for the frame codec), so the CLI does not pull in the broker.
//!
//! One connection per destination broker, owned by a task ([`channel`]) fed through a
//! bounded queue; up to `inflight_max` requests are pipelined on it and their answers matched
//! in order by correlation id (Kafka answers in request order on a connection). Every request
//! has a deadline (`request_timeout`); a request past it, a malformed or out-of-order answer,
//! or any I/O error closes the connection and fails everything in flight on it, and the next
//! request reconnects after a backoff that doubles from `reconnect_backoff_min` up to
//! `reconnect_backoff_max` (Kafka's `reconnect.backoff.ms` / `reconnect.backoff.max.ms`)
//! while connecting keeps failing. Frames go through `logbook_protocol`'s codec, so an
//! answer above `frame_bytes_max` closes the connection before anything is allocated.
//! It follows `replication::fetcher::RemoteLeaderEndPoint` (same framing and header
//! handling), with pipelining and a task per broker because many coordinator operations
//! share one destination.
//!
//! The framing steps are public for a caller that drives its own connection:
//! [`encode_request`], [`set_correlation_id`], [`with_size_prefix`] and
//! [`decode_response`]. The bench's raw producer encodes one Produce request with them and
//! resends it at full speed, which this client (an encode and a queued call per send) would
//! slow down.

mod channel;
mod errors;
pub mod security;
#[cfg(test)]
mod tests;

pub use errors::error_name;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// Where another broker listens.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BrokerEndpoint {
    /// Its `node.id`.
    pub id: i32,
    /// Its advertised host.
    pub host: String,
    /// Its advertised port.
    pub port: u16,
}

/// Settings of the inter-broker client.
#[derive(Clone, Debug)]
pub struct InterBrokerConfig {
    /// Client id in request headers.
    pub client_id: String,
    /// Longest a request may take from being queued to its answer (Kafka's
    /// `request.timeout.ms`, 30 s).
    pub request_timeout: Duration,
    /// First wait before reconnecting after a failed connect (`reconnect.backoff.ms`).
    pub reconnect_backoff_min: Duration,
    /// Longest wait between connect attempts (`reconnect.backoff.max.ms`).
    pub reconnect_backoff_max: Duration,
    /// Requests pipelined on one connection (Kafka's `max.in.flight.requests.per.connection`
    /// default is 5); as many more may wait in the
    /// broker's queue, and callers beyond that wait for room until their deadline.
    pub inflight_max: usize,
    /// Largest answer frame accepted, in bytes after the size prefix.
    pub frame_bytes_max: usize,
    /// TLS and SASL of every connection (PLAINTEXT by default).
    pub security: security::ConnectionSecurity,
}

impl Default for InterBrokerConfig {
    /// Kafka's client defaults.
    fn default() -> Self {
        InterBrokerConfig {
            client_id: "logbook-broker".to_string(),
            request_timeout: Duration::from_secs(30),
            reconnect_backoff_min: Duration::from_millis(50),
            reconnect_backoff_max: Duration::from_secs(1),
            inflight_max: 5,
            frame_bytes_max: 100 * 1024 * 1024,
            security: security::ConnectionSecurity::default(),
        }
    }
}

/// Why a request to another broker got no answer. Callers retry (with fresh metadata when
/// the destination may have changed); none of these is a Kafka error code from the peer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InterBrokerError {
    /// Could not connect, or the connection broke before the answer.
    #[error("broker {broker_id} unreachable: {reason}")]
    Disconnected {
        /// The destination.
        broker_id: i32,
        /// What failed.
        reason: String,
    },
    /// No answer within the request timeout.
    #[error("request to broker {broker_id} timed out")]
    Timeout {
        /// The destination.
        broker_id: i32,
    },
    /// The answer could not be decoded, or a request could not be encoded.
    #[error("protocol error with broker {broker_id}: {reason}")]
    Protocol {
        /// The destination.
        broker_id: i32,
        /// What was wrong.
        reason: String,
    },
    /// The client is shut down.
    #[error("inter-broker client shut down")]
    Shutdown,
}

/// One encoded request waiting for its answer frame.
struct Call {
    /// Header and body, without the size prefix and with correlation id 0 (the channel
    /// sets it).
    frame: BytesMut,
    deadline: tokio::time::Instant,
    answer: oneshot::Sender<Result<Bytes, InterBrokerError>>,
}

struct Channel {
    endpoint: BrokerEndpoint,
    calls: mpsc::Sender<Call>,
}

/// Requests to other brokers. See the module docs.
pub struct InterBrokerClient {
    config: InterBrokerConfig,
    channels: Mutex<HashMap<i32, Channel>>,
    shutdown: CancellationToken,
}

impl InterBrokerClient {
    /// A client with no connection yet; connections open on first use.
    #[must_use]
    pub fn new(config: InterBrokerConfig) -> Arc<Self> {
        Arc::new(InterBrokerClient {
            config,
            channels: Mutex::new(HashMap::new()),
            shutdown: CancellationToken::new(),
        })
    }

    /// Sends `request` at `version` to `broker` and decodes its answer. Call from within the
    /// tokio runtime.
    ///
    /// # Errors
    /// See [`InterBrokerError`]; an error code inside the answer is the caller's to read.
    pub async fn send<R: Request>(
        &self,
        broker: &BrokerEndpoint,
        version: i16,
        request: &R,
    ) -> Result<R::Response, InterBrokerError> {
        let protocol = |reason: String| InterBrokerError::Protocol {
            broker_id: broker.id,
            reason,
        };
        let frame = encode_request(version, &self.config.client_id, request).map_err(protocol)?;
        let (answer, answered) = oneshot::channel();
        let deadline = tokio::time::Instant::now() + self.config.request_timeout;
        let call = Call {
            frame,
            deadline,
            answer,
        };
        // A full queue holds the caller back (bounded in-flight), up to its deadline.
        let calls = self.channel(broker)?;
        match tokio::time::timeout_at(deadline, calls.send(call)).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err(InterBrokerError::Shutdown),
            Err(_) => {
                return Err(InterBrokerError::Timeout {
                    broker_id: broker.id,
                })
            }
        }
        // The channel answers every call by its deadline; the extra second only covers a
        // channel task that died without answering.
        let mut body =
            match tokio::time::timeout_at(deadline + Duration::from_secs(1), answered).await {
                Ok(Ok(result)) => result?,
                Ok(Err(_)) => return Err(InterBrokerError::Shutdown),
                Err(_) => {
                    return Err(InterBrokerError::Timeout {
                        broker_id: broker.id,
                    })
                }
            };
        decode_response::<R>(&mut body, version)
            .map(|(_header, response)| response)
            .map_err(protocol)
    }

    /// The queue of `broker`'s connection task, started on first use (again if its address
    /// changed).
    fn channel(&self, broker: &BrokerEndpoint) -> Result<mpsc::Sender<Call>, InterBrokerError> {
        if self.shutdown.is_cancelled() {
            return Err(InterBrokerError::Shutdown);
        }
        let mut channels = self.channels.lock();
        if let Some(channel) = channels.get(&broker.id) {
            if channel.endpoint == *broker && !channel.calls.is_closed() {
                return Ok(channel.calls.clone());
            }
        }
        let (calls, queue) = mpsc::channel(self.config.inflight_max.max(1));
        tokio::spawn(channel::run(
            broker.clone(),
            self.config.clone(),
            queue,
            self.shutdown.child_token(),
        ));
        channels.insert(
            broker.id,
            Channel {
                endpoint: broker.clone(),
                calls: calls.clone(),
            },
        );
        Ok(calls)
    }

    /// Closes every connection; requests in flight fail with `Shutdown`.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
        self.channels.lock().clear();
    }
}

impl Drop for InterBrokerClient {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Header then body of one request at `version`, without the size prefix, with correlation
/// id 0: the channel sets it per send ([`set_correlation_id`]), and the bench's raw producer
/// encodes a request once with it to resend it.
///
/// # Errors
/// kafka-protocol cannot encode `request` at `version`.
pub fn encode_request<R: Request>(
    version: i16,
    client_id: &str,
    request: &R,
) -> Result<BytesMut, String> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(0)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())));
    let mut frame = BytesMut::new();
    header
        .encode(&mut frame, R::header_version(version))
        .map_err(|e| format!("encode header: {e}"))?;
    request
        .encode(&mut frame, version)
        .map_err(|e| format!("encode request: {e}"))?;
    Ok(frame)
}

/// Sets the correlation id of an encoded request (bytes 4..8 of every request header).
///
/// # Errors
/// `frame` is shorter than a request header's fixed fields.
pub fn set_correlation_id(frame: &mut [u8], correlation_id: i32) -> Result<(), String> {
    let slot = frame
        .get_mut(4..8)
        .ok_or_else(|| "request shorter than its header".to_string())?;
    slot.copy_from_slice(&correlation_id.to_be_bytes());
    Ok(())
}

/// The correlation id an answer frame starts with (every response header does).
fn correlation_id_of(frame: &[u8]) -> Option<i32> {
    let bytes: [u8; 4] = frame.get(0..4)?.try_into().ok()?;
    Some(i32::from_be_bytes(bytes))
}

/// An answer frame (after its size prefix) to a request `R` sent at `version`: its header,
/// which carries the correlation id, and its body.
///
/// # Errors
/// The header or the body does not decode.
pub fn decode_response<R: Request>(
    frame: &mut Bytes,
    version: i16,
) -> Result<(ResponseHeader, R::Response), String> {
    let header_version = <R::Response as HeaderVersion>::header_version(version);
    let header = ResponseHeader::decode(frame, header_version)
        .map_err(|e| format!("response header: {e}"))?;
    let response =
        R::Response::decode(frame, version).map_err(|e| format!("response body: {e}"))?;
    Ok((header, response))
}

/// A size-prefixed frame of `body`, as it goes on the wire.
///
/// # Errors
/// `body` is longer than a size prefix can say (2 GiB).
pub fn with_size_prefix(body: &[u8]) -> Result<Bytes, String> {
    let size = i32::try_from(body.len()).map_err(|_| "request too large".to_string())?;
    let mut frame = BytesMut::with_capacity(body.len() + 4);
    frame.put_i32(size);
    frame.put_slice(body);
    Ok(frame.freeze())
}
