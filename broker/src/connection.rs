//! One client connection: a reader that decodes frames and runs each request's ordered part,
//! and a writer that sends responses strictly in request order.
//!
//! Between them sits a bounded queue (`inflight_requests_per_connection_max`) of pending
//! responses: a client that pipelines faster than we answer is slowed by TCP backpressure,
//! not by our memory. Malformed input closes the connection after the responses already
//! owed are sent, with one log line, as Apache Kafka does.

use std::net::SocketAddr;
use std::sync::Arc;

use std::io;

use futures::StreamExt;
use kafka_protocol::messages::ApiKey;
use logbook_protocol::{
    decode_request, encode_api_versions_fallback, encode_response_with_records, frame_codec, Chunk,
    DecodeError, FileRegion, ResponseBuf,
};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

use crate::broker::Broker;
use crate::handlers::{self, ResponseFuture};

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
    },
    /// ApiVersions asked at a version we do not know: answer in the v0 layout.
    ApiVersionsFallback { correlation_id: i32 },
}

/// Serves one connection until the client closes it, sends something malformed, or the
/// broker shuts down.
pub async fn serve(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: SocketAddr,
    shutdown: CancellationToken,
) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "set_nodelay failed");
    }
    let (read_half, write_half) = stream.into_split();
    let mut frames = FramedRead::new(read_half, frame_codec(broker.config.limits.frame_bytes_max));
    let (tx, rx) = mpsc::channel(
        broker
            .config
            .limits
            .inflight_requests_per_connection_max
            .max(1),
    );
    let writer = tokio::spawn(write_loop(write_half, rx, peer));
    loop {
        let frame = tokio::select! {
            () = shutdown.cancelled() => break,
            frame = frames.next() => frame,
        };
        let frame = match frame {
            None => break,
            Some(Ok(frame)) => frame.freeze(),
            Some(Err(e)) => {
                tracing::warn!(%peer, error = %e, "closing connection: bad frame");
                break;
            }
        };
        let pending = match decode_request(frame, &handlers::supported) {
            Ok(request) => {
                let api_version = request.header.request_api_version;
                let correlation_id = request.header.correlation_id;
                let response = handlers::CLIENT_ADDRESS.sync_scope(peer, || {
                    handlers::dispatch(&broker, &request.header, request.body)
                });
                Pending::Response {
                    api_key: request.api_key,
                    api_version,
                    correlation_id,
                    response,
                }
            }
            Err(DecodeError::UnsupportedVersion {
                preamble,
                api_key: ApiKey::ApiVersions,
            }) => Pending::ApiVersionsFallback {
                correlation_id: preamble.correlation_id,
            },
            Err(e) => {
                tracing::warn!(%peer, error = %e, "closing connection: undecodable request");
                break;
            }
        };
        if tx.send(pending).await.is_err() {
            break;
        }
    }
    drop(tx);
    if let Err(e) = writer.await {
        tracing::error!(%peer, error = %e, "connection writer panicked");
    }
}

async fn write_loop(
    mut out: tokio::net::tcp::OwnedWriteHalf,
    mut rx: mpsc::Receiver<Pending>,
    peer: SocketAddr,
) {
    let mut buf = ResponseBuf::new();
    while let Some(pending) = rx.recv().await {
        let encoded = match pending {
            Pending::Response {
                api_key,
                api_version,
                correlation_id,
                response,
            } => match response.await {
                Some(response) => encode_response_with_records(
                    &mut buf,
                    api_key,
                    api_version,
                    correlation_id,
                    &response.body,
                    response.records,
                ),
                None => Ok(()),
            },
            Pending::ApiVersionsFallback { correlation_id } => {
                let body = handlers::api_versions::response(
                    kafka_protocol::ResponseError::UnsupportedVersion.code(),
                );
                encode_api_versions_fallback(buf.tail(), correlation_id, &body)
            }
        };
        if let Err(e) = encoded {
            tracing::error!(%peer, error = %e, "cannot encode response; closing connection");
            break;
        }
        // Gather responses that are already queued into one write, up to a bound.
        if !rx.is_empty() && buf.len() < WRITE_BATCH_BYTES {
            continue;
        }
        if let Err(e) = send(&mut out, &mut buf).await {
            tracing::debug!(%peer, error = %e, "write failed; closing connection");
            return;
        }
    }
    if !buf.is_empty() {
        let _ = send(&mut out, &mut buf).await;
    }
    let _ = out.shutdown().await;
}

/// Writes out everything buffered: memory chunks with `write`, file chunks with
/// `sendfile` (page cache to socket, no copy through our memory). The socket is corked
/// meanwhile when files are involved, so the small memory chunks between record sets
/// leave in full segments rather than one packet each.
async fn send(out: &mut OwnedWriteHalf, buf: &mut ResponseBuf) -> io::Result<()> {
    let chunks = buf.take_chunks();
    let corked = chunks.len() > 1;
    if corked {
        set_cork(out, true);
    }
    let result = async {
        for chunk in chunks {
            match chunk {
                Chunk::Mem(mem) => out.write_all(&mem).await?,
                Chunk::File(region) => send_file(out, &region).await?,
            }
        }
        Ok(())
    }
    .await;
    if corked {
        set_cork(out, false);
    }
    result
}

fn set_cork(out: &OwnedWriteHalf, on: bool) {
    let stream: &TcpStream = out.as_ref();
    if let Err(e) = rustix::net::sockopt::set_tcp_cork(stream, on) {
        tracing::debug!(error = %e, on, "TCP_CORK failed");
    }
}

/// Sends `region` with `sendfile`, waiting for the socket to drain when it is full.
/// A file shorter than the region (truncated under us) is an error: the response promised
/// those bytes, so the connection cannot continue.
async fn send_file(out: &OwnedWriteHalf, region: &FileRegion) -> io::Result<()> {
    let stream: &TcpStream = out.as_ref();
    let mut position = region.position;
    let end = region.position + region.len as u64;
    while position < end {
        stream.writable().await?;
        let remaining = usize::try_from(end - position).unwrap_or(usize::MAX);
        let sent = stream.try_io(Interest::WRITABLE, || {
            rustix::fs::sendfile(stream, &*region.file, Some(&mut position), remaining)
                .map_err(io::Error::from)
        });
        match sent {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("file ended at {position}, {} bytes short", end - position),
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
