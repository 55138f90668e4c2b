//! The controller listener: accepts peers' connections (at most `connections_max`),
//! reads Kafka-framed requests, hands Raft's to openraft, and answers in request order.
//!
//! A peer that sends something we cannot parse (bad header, unknown api key, a body that
//! is not the request's JSON, a frame over the limit) gets its connection closed and one
//! warning line; nothing it sent reaches Raft, and every other connection carries on.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use openraft::Raft;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::frame::{self, FrameError, RaftApiKey};
use crate::config::NetworkLimits;
use crate::raft::types::TypeConfig;

/// Accepts connections until `shutdown`, serving each on its own tracked task.
pub(crate) async fn serve(
    listener: TcpListener,
    raft: Raft<TypeConfig>,
    limits: NetworkLimits,
    shutdown: CancellationToken,
    tasks: TaskTracker,
) {
    let permits = Arc::new(Semaphore::new(limits.connections_max));
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: wait a little rather than spin.
                tracing::warn!(error = %e, "controller listener accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            tracing::warn!(%peer, max = limits.connections_max, "controller connections at their limit; closing a new one");
            continue;
        };
        let (raft, limits, shutdown) = (raft.clone(), limits.clone(), shutdown.clone());
        tasks.spawn(async move {
            serve_connection(stream, peer, &raft, &limits, &shutdown).await;
            drop(permit);
        });
    }
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    raft: &Raft<TypeConfig>,
    limits: &NetworkLimits,
    shutdown: &CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let mut framed = Framed::new(stream, frame::codec(limits.frame_bytes_max));
    let idle = Duration::from_millis(limits.connection_idle_ms);
    loop {
        let next = tokio::select! {
            () = shutdown.cancelled() => return,
            next = tokio::time::timeout(idle, framed.next()) => next,
        };
        let request = match next {
            Err(_) => {
                tracing::debug!(%peer, "closing an idle controller connection");
                return;
            }
            Ok(None) => return,
            Ok(Some(Err(e))) => {
                tracing::warn!(%peer, error = %e, "closing controller connection: unreadable frame");
                return;
            }
            Ok(Some(Ok(frame))) => frame.freeze(),
        };
        let response = match handle(raft, request).await {
            Ok(response) => response,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "closing controller connection: malformed request");
                return;
            }
        };
        if let Err(e) = framed.send(response).await {
            tracing::debug!(%peer, error = %e, "controller connection lost while answering");
            return;
        }
    }
}

/// Decodes one request, runs it, encodes the answer: openraft's `Result` as JSON, so a
/// Raft-level refusal (a stale term, a shut-down node) travels to the caller as such.
async fn handle(raft: &Raft<TypeConfig>, request: Bytes) -> Result<Bytes, FrameError> {
    let (header, body) = frame::decode_request(request)?;
    let key = RaftApiKey::from_code(header.api_key).ok_or(FrameError("unknown api key"))?;
    if header.api_version != frame::RAFT_API_VERSION {
        return Err(FrameError("unsupported api version"));
    }
    let body = match key {
        RaftApiKey::AppendEntries => encode(&raft.append_entries(decode(&body)?).await),
        RaftApiKey::Vote => encode(&raft.vote(decode(&body)?).await),
        RaftApiKey::InstallSnapshot => encode(&raft.install_snapshot(decode(&body)?).await),
    }?;
    Ok(frame::encode_response(header.correlation_id, &body))
}

fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(body).map_err(|_| FrameError("body is not the request's JSON"))
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, FrameError> {
    serde_json::to_vec(value).map_err(|_| FrameError("response does not serialize"))
}
