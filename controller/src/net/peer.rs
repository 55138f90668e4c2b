//! Outbound Raft traffic: one connection per peer, owned by that peer's task, shared by
//! every openraft client for it (replication stream, votes, snapshot chunks).
//!
//! Requests queue on a bounded channel (`peer_queue_max`) and are sent one at a time, so
//! responses match requests without bookkeeping. A request that misses its deadline
//! drops the connection (its answer may still arrive and would be read as the next
//! one's). A failed dial is retried only after a backoff that doubles from
//! `reconnect_backoff_min_ms` to `reconnect_backoff_max_ms`; until then requests fail at
//! once as `Unreachable`, which makes openraft back off too.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use logbook_client::security::{ConnectionSecurity, SecuredStream};
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::frame::{self, RaftApiKey, RequestHeader};
use crate::config::NetworkLimits;
use crate::raft::types::{ControllerNode, TypeConfig};

type NodeId = u64;

/// Why a call got no answer.
#[derive(Debug)]
pub(crate) enum CallError {
    /// Could not connect (or backing off after failing to): openraft should back off.
    Unreachable(io::Error),
    /// Connected, but the exchange failed or timed out: the connection was dropped.
    Network(io::Error),
}

/// One request for a peer's task.
struct Call {
    api_key: i16,
    api_version: i16,
    body: Vec<u8>,
    deadline: Instant,
    reply: oneshot::Sender<Result<Bytes, CallError>>,
}

/// The peers' tasks, started on first use and stopped by the controller's shutdown.
#[derive(Debug)]
pub(crate) struct PeerPool {
    client_id: String,
    limits: NetworkLimits,
    security: ConnectionSecurity,
    peers: Mutex<HashMap<NodeId, (ControllerNode, mpsc::Sender<Call>)>>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

impl PeerPool {
    /// A pool whose connections introduce themselves as `client_id`.
    pub(crate) fn new(
        client_id: String,
        limits: NetworkLimits,
        security: ConnectionSecurity,
        shutdown: CancellationToken,
        tasks: TaskTracker,
    ) -> Self {
        Self {
            client_id,
            limits,
            security,
            peers: Mutex::new(HashMap::new()),
            shutdown,
            tasks,
        }
    }

    /// The queue of `target`'s task, starting it (again, if its address changed).
    fn sender(&self, target: NodeId, node: &ControllerNode) -> mpsc::Sender<Call> {
        let mut peers = self
            .peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((known, tx)) = peers.get(&target) {
            if known == node && !tx.is_closed() {
                return tx.clone();
            }
        }
        let (tx, rx) = mpsc::channel(self.limits.peer_queue_max);
        let peer = PeerTask {
            client_id: self.client_id.clone(),
            target,
            address: node.address(),
            host: node.host.clone(),
            limits: self.limits.clone(),
            security: self.security.clone(),
            connection: None,
            backoff: Duration::from_millis(self.limits.reconnect_backoff_min_ms),
            retry_at: None,
            correlation_id: 0,
        };
        self.tasks.spawn(peer.run(rx, self.shutdown.clone()));
        peers.insert(target, (node.clone(), tx.clone()));
        tx
    }

    /// Sends one request to `target` on its pooled connection and waits for the answer's
    /// body until `deadline` (the peer task answers by then; the grace only covers
    /// scheduling).
    pub(crate) async fn call(
        &self,
        target: NodeId,
        node: &ControllerNode,
        (api_key, api_version): (i16, i16),
        body: Vec<u8>,
        deadline: Instant,
    ) -> Result<Bytes, CallError> {
        let timed_out = || {
            CallError::Network(io::Error::new(
                io::ErrorKind::TimedOut,
                "controller request timed out",
            ))
        };
        let stopped = || CallError::Network(io::Error::other("controller peer task stopped"));
        let (reply, answer) = oneshot::channel();
        let call = Call {
            api_key,
            api_version,
            body,
            deadline,
            reply,
        };
        let sender = self.sender(target, node);
        tokio::time::timeout_at(deadline, sender.send(call))
            .await
            .map_err(|_| timed_out())?
            .map_err(|_| stopped())?;
        tokio::time::timeout_at(deadline + Duration::from_millis(100), answer)
            .await
            .map_err(|_| timed_out())?
            .map_err(|_| stopped())?
    }
}

/// The task that owns the connection to one peer.
struct PeerTask {
    client_id: String,
    target: NodeId,
    address: String,
    host: String,
    limits: NetworkLimits,
    security: ConnectionSecurity,
    connection: Option<Framed<SecuredStream, LengthDelimitedCodec>>,
    backoff: Duration,
    retry_at: Option<Instant>,
    correlation_id: i32,
}

impl PeerTask {
    async fn run(mut self, mut calls: mpsc::Receiver<Call>, shutdown: CancellationToken) {
        loop {
            let call = tokio::select! {
                () = shutdown.cancelled() => return,
                call = calls.recv() => match call {
                    Some(call) => call,
                    None => return,
                },
            };
            if call.reply.is_closed() {
                continue;
            }
            let result = match tokio::time::timeout_at(call.deadline, self.exchange(&call)).await {
                Ok(result) => result,
                Err(_) => Err(CallError::Network(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "controller request timed out",
                ))),
            };
            if matches!(result, Err(CallError::Network(_))) {
                self.connection = None;
            }
            let _ = call.reply.send(result);
        }
    }

    async fn connect(
        &mut self,
    ) -> Result<&mut Framed<SecuredStream, LengthDelimitedCodec>, CallError> {
        if self.connection.is_none() {
            if self.retry_at.is_some_and(|at| Instant::now() < at) {
                return Err(CallError::Unreachable(io::Error::other(format!(
                    "backing off before dialing controller {} at {}",
                    self.target, self.address
                ))));
            }
            let timeout = Duration::from_millis(self.limits.connect_timeout_ms);
            let dialed = tokio::time::timeout(timeout, self.dial())
                .await
                .unwrap_or_else(|_| {
                    Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))
                });
            match dialed {
                Ok(stream) => {
                    self.connection = Some(Framed::new(
                        stream,
                        frame::codec(self.limits.frame_bytes_max),
                    ));
                    self.backoff = Duration::from_millis(self.limits.reconnect_backoff_min_ms);
                    self.retry_at = None;
                }
                Err(e) => {
                    tracing::debug!(target_node = self.target, address = %self.address, error = %e, "cannot reach controller peer");
                    self.retry_at = Some(Instant::now() + self.backoff);
                    self.backoff = (self.backoff * 2)
                        .min(Duration::from_millis(self.limits.reconnect_backoff_max_ms));
                    return Err(CallError::Unreachable(e));
                }
            }
        }
        self.connection
            .as_mut()
            .ok_or_else(|| CallError::Unreachable(io::Error::other("no connection")))
    }

    /// Connects to the peer and secures the connection (TLS, SASL login) as the
    /// controller listener wants.
    async fn dial(&self) -> io::Result<SecuredStream> {
        let stream = TcpStream::connect(&self.address).await?;
        let _ = stream.set_nodelay(true);
        self.security
            .secure(stream, &self.host, &self.client_id)
            .await
            .map_err(io::Error::other)
    }

    async fn exchange(&mut self, call: &Call) -> Result<Bytes, CallError> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let header = RequestHeader {
            api_key: call.api_key,
            api_version: call.api_version,
            correlation_id: self.correlation_id,
            client_id: self.client_id.clone(),
        };
        let expected = self.correlation_id;
        let connection = self.connect().await?;
        connection
            .send(frame::encode_request(&header, &call.body))
            .await
            .map_err(CallError::Network)?;
        let response = match connection.next().await {
            Some(Ok(response)) => response.freeze(),
            Some(Err(e)) => return Err(CallError::Network(e)),
            None => {
                return Err(CallError::Network(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "controller peer closed the connection",
                )))
            }
        };
        let (correlation_id, body) = frame::decode_response(response)
            .map_err(|e| CallError::Network(io::Error::new(io::ErrorKind::InvalidData, e)))?;
        if correlation_id != expected {
            return Err(CallError::Network(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("response to {correlation_id} while waiting for {expected}"),
            )));
        }
        Ok(body)
    }
}

/// openraft's network factory: clients for a target share its pooled connection.
#[derive(Clone, Debug)]
pub struct NetworkFactory {
    pool: Arc<PeerPool>,
}

impl NetworkFactory {
    pub(crate) fn new(pool: Arc<PeerPool>) -> Self {
        Self { pool }
    }
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &ControllerNode) -> PeerClient {
        PeerClient {
            target,
            node: node.clone(),
            pool: Arc::clone(&self.pool),
        }
    }
}

/// openraft's client for one target.
#[derive(Debug)]
pub struct PeerClient {
    target: NodeId,
    node: ControllerNode,
    pool: Arc<PeerPool>,
}

impl PeerClient {
    /// Sends one request and decodes openraft's `Result` from the answer.
    async fn call<Req, Resp, E>(
        &self,
        api_key: RaftApiKey,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp, RPCError<NodeId, ControllerNode, RaftError<NodeId, E>>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: StdError + DeserializeOwned,
    {
        let network = |e: io::Error| RPCError::Network(NetworkError::new(&e));
        let body = serde_json::to_vec(request).map_err(|e| network(io::Error::other(e)))?;
        let deadline = Instant::now() + timeout;
        let answer = self
            .pool
            .call(
                self.target,
                &self.node,
                (api_key.code(), frame::RAFT_API_VERSION),
                body,
                deadline,
            )
            .await;
        let body = match answer {
            Ok(body) => body,
            Err(CallError::Unreachable(e)) => {
                return Err(RPCError::Unreachable(Unreachable::new(&e)))
            }
            Err(CallError::Network(e)) => return Err(network(e)),
        };
        let result: Result<Resp, RaftError<NodeId, E>> = serde_json::from_slice(&body)
            .map_err(|e| network(io::Error::new(io::ErrorKind::InvalidData, e)))?;
        result.map_err(|e| {
            RPCError::RemoteError(RemoteError::new_with_node(
                self.target,
                self.node.clone(),
                e,
            ))
        })
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, ControllerNode, RaftError<NodeId>>>
    {
        self.call(RaftApiKey::AppendEntries, &rpc, option.hard_ttl())
            .await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, ControllerNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.call(RaftApiKey::InstallSnapshot, &rpc, option.hard_ttl())
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, ControllerNode, RaftError<NodeId>>> {
        self.call(RaftApiKey::Vote, &rpc, option.hard_ttl()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(port: u16) -> PeerTask {
        let limits = NetworkLimits {
            reconnect_backoff_min_ms: 200,
            reconnect_backoff_max_ms: 400,
            ..NetworkLimits::default()
        };
        PeerTask {
            client_id: "controller-1".to_string(),
            target: 2,
            address: format!("127.0.0.1:{port}"),
            host: "127.0.0.1".to_string(),
            security: ConnectionSecurity::default(),
            backoff: Duration::from_millis(limits.reconnect_backoff_min_ms),
            limits,
            connection: None,
            retry_at: None,
            correlation_id: 0,
        }
    }

    // A failed dial backs off (doubling, capped) and fails calls at once meanwhile without
    // dialing; once the peer listens again the next call after the backoff reconnects and
    // the backoff resets.
    #[tokio::test]
    async fn dial_failures_back_off_and_a_returning_peer_is_reconnected() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let mut peer = task(port);
        let call = Call {
            api_key: RaftApiKey::Vote.code(),
            api_version: frame::RAFT_API_VERSION,
            body: b"{}".to_vec(),
            deadline: Instant::now() + Duration::from_secs(5),
            reply: oneshot::channel().0,
        };
        assert!(matches!(
            peer.exchange(&call).await,
            Err(CallError::Unreachable(_))
        ));
        assert_eq!(peer.backoff, Duration::from_millis(400));
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("peer returns");
        match peer.exchange(&call).await {
            Err(CallError::Unreachable(e)) => assert!(e.to_string().contains("backing off"), "{e}"),
            other => panic!("dialed during the backoff: {other:?}"),
        }
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.expect("accept");
            let mut framed = Framed::new(stream, frame::codec(1 << 20));
            let request = framed.next().await.expect("a request").expect("frame");
            let (header, body) = frame::decode_request(request.freeze()).expect("header");
            assert_eq!(
                (header.api_key, &body[..]),
                (RaftApiKey::Vote.code(), &b"{}"[..])
            );
            framed
                .send(frame::encode_response(header.correlation_id, b"\"ok\""))
                .await
                .expect("answer");
        });
        tokio::time::sleep(Duration::from_millis(250)).await;
        let body = peer.exchange(&call).await.expect("reconnected");
        assert_eq!(&body[..], b"\"ok\"");
        assert_eq!(peer.backoff, Duration::from_millis(200));
    }
}
