//! The controller listener: accepts peers' and brokers' connections (at most
//! `connections_max`), reads Kafka-framed requests, hands Raft's to openraft and controller
//! RPC to the installed [`ControllerRpc`] (the QuorumController), and answers in request
//! order (one request at a time per connection; a controller RPC gets at most
//! `request_timeout_ms`).
//!
//! A peer that sends something we cannot parse (bad header, unknown api key, a body that
//! is not the request's JSON, a frame over the limit) gets its connection closed and one
//! warning line; nothing it sent reaches Raft, and every other connection carries on.
//!
//! When a connection that carried broker heartbeats closes, the QuorumController hears of
//! it ([`ControllerRpc::connection_closed`]), so a killed broker is fenced after one heartbeat
//! interval instead of a whole session timeout.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{SinkExt, StreamExt};
use openraft::Raft;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::codec::Framed;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::frame::{
    self, FrameError, RaftApiKey, CONTROLLER_RPC_API_KEY, CONTROLLER_RPC_API_VERSION,
};
use super::security::{ControllerAcceptor, ControllerStream};
use crate::config::NetworkLimits;
use crate::raft::types::TypeConfig;

/// What answers controller RPC behind the listener: the QuorumController
/// (`controller_rpc`). A trait, so this layer never sees the metadata model.
pub(crate) trait ControllerRpc: Send + Sync {
    /// Answers one request body that came over connection `connection`, within `timeout`;
    /// also says whether it was a broker heartbeat. An `Err` closes the connection.
    fn call(
        &self,
        body: Bytes,
        connection: u64,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<(Vec<u8>, bool), FrameError>>;

    /// Connection `connection`, which carried broker heartbeats, closed.
    fn connection_closed(&self, connection: u64) -> BoxFuture<'_, ()>;
}

/// The controller RPC handler, installed once the QuorumController has started (the Raft
/// layer starts first and serves Raft alone until then; the Raft tests never install
/// one). Weak, because the controller owns the Raft node that owns this listener.
pub(crate) type ControllerSlot = Arc<OnceLock<Weak<dyn ControllerRpc>>>;

/// Ids of accepted connections, so a closed heartbeat connection names its sessions.
static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// What one connection serves with.
#[derive(Clone)]
struct Service {
    raft: Raft<TypeConfig>,
    controller: ControllerSlot,
    limits: NetworkLimits,
    /// The listener's TLS and SASL; `None` is PLAINTEXT.
    acceptor: Option<Arc<dyn ControllerAcceptor>>,
}

/// Accepts connections until `shutdown`, serving each on its own tracked task.
pub(crate) async fn serve(
    listener: TcpListener,
    raft: Raft<TypeConfig>,
    controller: ControllerSlot,
    limits: NetworkLimits,
    acceptor: Option<Arc<dyn ControllerAcceptor>>,
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
        let service = Service {
            raft: raft.clone(),
            controller: Arc::clone(&controller),
            limits: limits.clone(),
            acceptor: acceptor.clone(),
        };
        let shutdown = shutdown.clone();
        tasks.spawn(async move {
            serve_connection(stream, peer, &service, &shutdown).await;
            drop(permit);
        });
    }
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    service: &Service,
    shutdown: &CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let stream: ControllerStream = match &service.acceptor {
        None => Box::new(stream),
        Some(acceptor) => {
            // A peer that never finishes its handshake is closed like an idle one.
            let bound = Duration::from_millis(service.limits.connection_idle_ms);
            let accepted = tokio::select! {
                () = shutdown.cancelled() => return,
                accepted = tokio::time::timeout(bound, acceptor.accept(stream, peer)) => accepted,
            };
            match accepted {
                Ok(Ok(stream)) => stream,
                Ok(Err(reason)) => {
                    tracing::info!(%peer, %reason, "controller listener refused a connection");
                    return;
                }
                Err(_) => {
                    tracing::info!(%peer, "controller listener closed a connection whose TLS or SASL did not finish in time");
                    return;
                }
            }
        }
    };
    let connection = NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed);
    let mut carried_heartbeat = false;
    let closed = serve_requests(
        stream,
        peer,
        service,
        shutdown,
        connection,
        &mut carried_heartbeat,
    )
    .await;
    if closed && carried_heartbeat {
        if let Some(controller) = service.controller.get().and_then(Weak::upgrade) {
            tracing::debug!(%peer, connection, "broker heartbeat connection closed");
            controller.connection_closed(connection).await;
        }
    }
}

/// Serves requests until the connection ends; `true` if the peer closed it or it broke
/// (not our shutdown). Sets `carried_heartbeat` once a broker heartbeat came over it.
async fn serve_requests(
    stream: ControllerStream,
    peer: SocketAddr,
    service: &Service,
    shutdown: &CancellationToken,
    connection: u64,
    carried_heartbeat: &mut bool,
) -> bool {
    let mut framed = Framed::new(stream, frame::codec(service.limits.frame_bytes_max));
    let idle = Duration::from_millis(service.limits.connection_idle_ms);
    loop {
        let next = tokio::select! {
            () = shutdown.cancelled() => return false,
            next = tokio::time::timeout(idle, framed.next()) => next,
        };
        let request = match next {
            Err(_) => {
                tracing::debug!(%peer, "closing an idle controller connection");
                return true;
            }
            Ok(None) => return true,
            Ok(Some(Err(e))) => {
                tracing::warn!(%peer, error = %e, "closing controller connection: unreadable frame");
                return true;
            }
            Ok(Some(Ok(frame))) => frame.freeze(),
        };
        let response = tokio::select! {
            () = shutdown.cancelled() => return false,
            response = handle(service, request, connection, carried_heartbeat) => response,
        };
        let response = match response {
            Ok(response) => response,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "closing controller connection: malformed request");
                return true;
            }
        };
        if let Err(e) = framed.send(response).await {
            tracing::debug!(%peer, error = %e, "controller connection lost while answering");
            return true;
        }
    }
}

/// Decodes one request, runs it, encodes the answer: openraft's `Result` as JSON, so a
/// Raft-level refusal (a stale term, a shut-down node) travels to the caller as such;
/// for controller RPC the QuorumController's `Result`.
async fn handle(
    service: &Service,
    request: Bytes,
    connection: u64,
    carried_heartbeat: &mut bool,
) -> Result<Bytes, FrameError> {
    let (header, body) = frame::decode_request(request)?;
    if header.api_key == CONTROLLER_RPC_API_KEY {
        if header.api_version != CONTROLLER_RPC_API_VERSION {
            return Err(FrameError("unsupported api version"));
        }
        // Not installed yet (this node is still starting): closing makes the client try
        // again after its backoff.
        let controller = service
            .controller
            .get()
            .and_then(Weak::upgrade)
            .ok_or(FrameError("controller RPC before the controller started"))?;
        let timeout = Duration::from_millis(service.limits.request_timeout_ms);
        let (answer, heartbeat) = controller.call(body, connection, timeout).await?;
        *carried_heartbeat |= heartbeat;
        return Ok(frame::encode_response(header.correlation_id, &answer));
    }
    let raft = &service.raft;
    let key = RaftApiKey::from_code(header.api_key).ok_or(FrameError("unknown api key"))?;
    if header.api_version != frame::RAFT_API_VERSION {
        return Err(FrameError("unsupported api version"));
    }
    let body = match key {
        RaftApiKey::AppendEntries => {
            let request = decode(&body)?;
            check_append_entries(&request)?;
            encode(&raft.append_entries(request).await)
        }
        RaftApiKey::Vote => encode(&raft.vote(decode(&body)?).await),
        RaftApiKey::InstallSnapshot => encode(&raft.install_snapshot(decode(&body)?).await),
    }?;
    Ok(frame::encode_response(header.correlation_id, &body))
}

/// Refuses an AppendEntries no leader could have sent: entries whose indexes do not follow
/// `prev_log_id` one by one, or log ids from a term above the sender's vote. openraft
/// trusts its peers (the log store asserts contiguity, and a commit index past the entries
/// it can read panics its core), and this listener takes frames from anyone who can reach
/// it: a forged frame closes its connection instead of stopping this node's Raft.
fn check_append_entries(
    request: &openraft::raft::AppendEntriesRequest<TypeConfig>,
) -> Result<(), FrameError> {
    const FORGED: FrameError = FrameError("append entries that no leader could send");
    let term = request.vote.leader_id.term;
    let ids = request
        .prev_log_id
        .iter()
        .chain(request.leader_commit.iter())
        .chain(request.entries.iter().map(|e| &e.log_id));
    if ids.into_iter().any(|id| id.leader_id.term > term) {
        return Err(FORGED);
    }
    let mut next = request
        .prev_log_id
        .map_or(Some(0), |p| p.index.checked_add(1));
    for entry in &request.entries {
        if next != Some(entry.log_id.index) {
            return Err(FORGED);
        }
        next = entry.log_id.index.checked_add(1);
    }
    Ok(())
}

fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(body).map_err(|_| FrameError("body is not the request's JSON"))
}

fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, FrameError> {
    serde_json::to_vec(value).map_err(|_| FrameError("response does not serialize"))
}

#[cfg(test)]
mod append_entries_checks {
    use openraft::raft::AppendEntriesRequest;
    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Vote};

    use super::check_append_entries;
    use crate::raft::types::TypeConfig;

    fn id(term: u64, index: u64) -> LogId<u64> {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    fn request(
        prev: Option<LogId<u64>>,
        indexes: &[u64],
        commit: Option<LogId<u64>>,
    ) -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest {
            vote: Vote::new_committed(3, 1),
            prev_log_id: prev,
            entries: indexes
                .iter()
                .map(|i| Entry {
                    log_id: id(3, *i),
                    payload: EntryPayload::Blank,
                })
                .collect(),
            leader_commit: commit,
        }
    }

    // What a leader sends passes; entries that skip or repeat indexes, or log ids from a
    // term above the sender's vote, are refused before openraft sees them.
    #[test]
    fn forged_append_entries_are_refused() {
        assert!(check_append_entries(&request(None, &[0, 1], None)).is_ok());
        assert!(
            check_append_entries(&request(Some(id(2, 11)), &[12, 13], Some(id(2, 11)))).is_ok()
        );
        assert!(check_append_entries(&request(Some(id(2, 11)), &[], Some(id(3, 40)))).is_ok());
        assert!(check_append_entries(&request(Some(id(2, 11)), &[1 << 40], None)).is_err());
        assert!(check_append_entries(&request(None, &[5], None)).is_err());
        assert!(check_append_entries(&request(Some(id(2, 11)), &[12, 14], None)).is_err());
        assert!(check_append_entries(&request(Some(id(9, 11)), &[12], None)).is_err());
        assert!(
            check_append_entries(&request(Some(id(2, 11)), &[], Some(id(1 << 53, 2)))).is_err()
        );
        assert!(check_append_entries(&request(Some(id(2, u64::MAX)), &[0], None)).is_err());
    }
}
