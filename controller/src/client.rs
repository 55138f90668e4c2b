//! `ControllerClient`: how a broker reaches the active controller, wherever it runs (Kafka's
//! `NodeToControllerChannelManager`). Its methods have the QuorumController's signatures, so
//! the broker calls one type whether the active controller is in this process or not.
//!
//! Each call goes to the controller this node believes active: the local QuorumController
//! when its Raft node leads, else the leader that Raft's metrics or the last NOT_CONTROLLER
//! answer named, else the voters in turn (a broker-only node knows no leader at first). A
//! NOT_CONTROLLER answer is followed to the leader it names; a connection that fails, or a
//! controller that is shutting down, is retried after `retry_backoff_ms`, until
//! `request_timeout_ms` has passed since the call began; then the call fails with
//! `RequestTimedOut` (REQUEST_TIMED_OUT, as Kafka's forwarding answers when no controller
//! replies in time). A retried operation may have been committed by the controller that
//! did not answer, as with any Kafka request: CreateTopics may then answer
//! TOPIC_ALREADY_EXISTS, AlterPartition INVALID_UPDATE_VERSION.
//!
//! Remote calls use the controller RPC key (`controller_rpc`) on one pooled connection per
//! controller (`net::peer`: bounded queue, one request at a time, reconnect with backoff).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use logbook_metadata::{BrokerId, ConfigResource, Election};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use crate::config::NetworkLimits;
use crate::controller_rpc::{
    self as rpc, ControllerAnswer, ControllerReply, ControllerRequest, CONTROLLER_RPC_API_KEY,
    CONTROLLER_RPC_API_VERSION,
};
use crate::metadata_fetch::{MetadataFetchReply, MetadataFetchRequest};
use crate::net::peer::{CallError, PeerPool};
use crate::quorum::{
    AlterConfigOp, AlterPartitionRequest, AlterPartitionResults, BrokerHeartbeatReply,
    BrokerHeartbeatRequest, BrokerRegistrationReply, BrokerRegistrationRequest, CreatableTopic,
    CreatedTopic, NewPartitions, ProducerIdsBlock, QuorumController, QuorumDescription,
    QuorumError, ReassignmentResults, ReassignmentTargets,
};
use crate::raft::types::ControllerNode;

/// The client's settings.
#[derive(Clone, Debug)]
pub struct ControllerClientConfig {
    /// This node's id (the connections' client id is `broker-<id>`).
    pub node_id: u64,
    /// How long one call may take, retries included (Kafka's `request.timeout.ms`).
    /// Default 30000 ms.
    pub request_timeout_ms: u64,
    /// Pause before retrying after a failed connection, a controller shutting down or a
    /// NOT_CONTROLLER that names no new leader (Kafka's `retry.backoff.ms`). Default 100 ms.
    pub retry_backoff_ms: u64,
    /// Longest one attempt of a heartbeat or a metadata fetch (beyond the fetch's own
    /// wait) may stay with a remote controller on a broker-only node before the call tries
    /// another voter. Such a node has no Raft of its own to say that the leader moved, and a
    /// heartbeat held by a stopped controller until the call's deadline would let the new
    /// controller fence this broker. Only these idempotent calls are bounded: a CreateTopics
    /// sent twice would answer TOPIC_ALREADY_EXISTS. Default 3000 ms.
    pub attempt_timeout_ms: u64,
    /// Frame limit, queue bound, connect timeout and reconnect backoff of the connections.
    pub limits: NetworkLimits,
    /// TLS and SASL of the connections to the controller listener.
    pub security: logbook_client::security::ConnectionSecurity,
}

impl ControllerClientConfig {
    /// Default timings for node `node_id`.
    #[must_use]
    pub fn new(node_id: u64) -> Self {
        ControllerClientConfig {
            node_id,
            request_timeout_ms: 30_000,
            retry_backoff_ms: 100,
            attempt_timeout_ms: 3_000,
            limits: NetworkLimits::default(),
            security: logbook_client::security::ConnectionSecurity::default(),
        }
    }
}

/// Where one attempt goes.
enum Target<'a> {
    Local(&'a QuorumController),
    Remote(u64),
}

/// A broker's handle on the active controller. Cheap to share behind an `Arc`; dropping
/// it stops its connections.
pub struct ControllerClient {
    local: Option<Arc<QuorumController>>,
    voters: BTreeMap<u64, ControllerNode>,
    config: ControllerClientConfig,
    /// The leader named by the last NOT_CONTROLLER answer (std mutex, never held across an
    /// await).
    leader_hint: Mutex<Option<u64>>,
    /// Next voter to try when no leader is known.
    next_voter: AtomicUsize,
    /// The largest applied metadata offset an answering controller reported.
    controller_offset: AtomicI64,
    pool: PeerPool,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

impl Drop for ControllerClient {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl ControllerClient {
    /// A client over `local` (this node's QuorumController when it is a voter) and the
    /// `controller.quorum.voters` set.
    #[must_use]
    pub fn new(
        local: Option<Arc<QuorumController>>,
        voters: BTreeMap<u64, ControllerNode>,
        config: ControllerClientConfig,
    ) -> Self {
        let shutdown = CancellationToken::new();
        let tasks = TaskTracker::new();
        let pool = PeerPool::new(
            format!("broker-{}", config.node_id),
            config.limits.clone(),
            config.security.clone(),
            shutdown.clone(),
            tasks.clone(),
        );
        ControllerClient {
            local,
            voters,
            config,
            leader_hint: Mutex::new(None),
            next_voter: AtomicUsize::new(0),
            controller_offset: AtomicI64::new(-1),
            pool,
            shutdown,
            tasks,
        }
    }

    /// The largest metadata offset an answering controller had applied when it answered
    /// (so at least the offset of every operation answered so far): after an admin
    /// operation the broker waits until its own image reaches it before answering its
    /// client (read your writes, plan §2.3). Never decreases; -1 before any answer.
    #[must_use]
    pub fn controller_offset(&self) -> i64 {
        self.controller_offset.load(Ordering::Acquire)
    }

    /// The active controller as this node knows it: its local Raft node's leader, else the
    /// leader the last NOT_CONTROLLER answer named.
    #[must_use]
    pub fn leader_id(&self) -> Option<u64> {
        self.local
            .as_ref()
            .and_then(|local| local.raft().leader())
            .or_else(|| {
                *self
                    .leader_hint
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
            })
    }

    /// Stops the connections and waits for their tasks.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }

    /// See [`QuorumController::register_broker`].
    ///
    /// # Errors
    /// As the QuorumController's, and `RequestTimedOut`.
    pub async fn register_broker(
        &self,
        request: BrokerRegistrationRequest,
    ) -> Result<BrokerRegistrationReply, QuorumError> {
        match self
            .call(ControllerRequest::RegisterBroker(request))
            .await?
        {
            ControllerReply::RegisterBroker(reply) => Ok(reply),
            other => Err(mismatch(&other)),
        }
    }

    /// See [`QuorumController::broker_heartbeat`].
    ///
    /// # Errors
    /// As the QuorumController's, and `RequestTimedOut`.
    pub async fn broker_heartbeat(
        &self,
        request: BrokerHeartbeatRequest,
    ) -> Result<BrokerHeartbeatReply, QuorumError> {
        match self
            .call(ControllerRequest::BrokerHeartbeat(request))
            .await?
        {
            ControllerReply::BrokerHeartbeat(reply) => Ok(reply),
            other => Err(mismatch(&other)),
        }
    }

    /// See [`QuorumController::create_topics`].
    ///
    /// # Errors
    /// As the QuorumController's, and `RequestTimedOut`.
    pub async fn create_topics(
        &self,
        topics: Vec<CreatableTopic>,
        validate_only: bool,
    ) -> Result<Vec<(String, Result<CreatedTopic, QuorumError>)>, QuorumError> {
        let request = ControllerRequest::CreateTopics {
            topics,
            validate_only,
        };
        match self.call(request).await? {
            ControllerReply::CreateTopics(results) => Ok(results),
            other => Err(mismatch(&other)),
        }
    }

    /// See [`QuorumController::create_partitions`].
    ///
    /// # Errors
    /// As the QuorumController's, and `RequestTimedOut`.
    pub async fn create_partitions(
        &self,
        topics: Vec<NewPartitions>,
    ) -> Result<Vec<(String, Result<(), QuorumError>)>, QuorumError> {
        match self
            .call(ControllerRequest::CreatePartitions { topics })
            .await?
        {
            ControllerReply::CreatePartitions(results) => Ok(results),
            other => Err(mismatch(&other)),
        }
    }

    /// See [`QuorumController::delete_topics`].
    ///
    /// # Errors
    /// As the QuorumController's, and `RequestTimedOut`.
    pub async fn delete_topics(
        &self,
        names: Vec<String>,
    ) -> Result<Vec<(String, Result<Uuid, QuorumError>)>, QuorumError> {
        match self.call(ControllerRequest::DeleteTopics { names }).await? {
            ControllerReply::DeleteTopics(results) => Ok(results),
            other => Err(mismatch(&other)),
        }
    }

    /// See [`QuorumController::incremental_alter_configs`].
    ///
    /// # Errors
    /// As the QuorumController's, and `RequestTimedOut`.
    pub async fn incremental_alter_configs(
        &self,
        resources: Vec<(ConfigResource, Vec<AlterConfigOp>)>,
    ) -> Result<Vec<(ConfigResource, Result<(), QuorumError>)>, QuorumError> {
        match self
            .call(ControllerRequest::IncrementalAlterConfigs { resources })
            .await?
        {
            ControllerReply::IncrementalAlterConfigs(results) => Ok(results),
            other => Err(mismatch(&other)),
        }
    }

    /// See [`QuorumController::alter_partition`].
    ///
    /// # Errors
    /// As the QuorumController's, and `RequestTimedOut`.
    pub async fn alter_partition(
        &self,
        request: AlterPartitionRequest,
    ) -> Result<AlterPartitionResults, QuorumError> {
        match self
            .call(ControllerRequest::AlterPartition(request))
            .await?
        {
            ControllerReply::AlterPartition(results) => Ok(results),
            other => Err(mismatch(&other)),
        }
    }

    /// See [`QuorumController::elect_leaders`].
    ///
    /// # Errors
    /// As the QuorumController's, and `RequestTimedOut`.
    pub async fn elect_leaders(
        &self,
        election: Election,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<Vec<((String, i32), Result<BrokerId, QuorumError>)>, QuorumError> {
        let request = ControllerRequest::ElectLeaders {
            election,
            partitions,
        };
        match self.call(request).await? {
            ControllerReply::ElectLeaders(results) => Ok(results),
            other => Err(mismatch(&other)),
        }
    }

    /// See [`QuorumController::alter_partition_reassignments`].
    ///
    /// # Errors
    /// As the QuorumController's, and `RequestTimedOut`.
    pub async fn alter_partition_reassignments(
        &self,
        reassignments: ReassignmentTargets,
    ) -> Result<ReassignmentResults, QuorumError> {
        let request = ControllerRequest::AlterPartitionReassignments { reassignments };
        match self.call(request).await? {
            ControllerReply::AlterPartitionReassignments(results) => Ok(results),
            other => Err(mismatch(&other)),
        }
    }

    /// See [`QuorumController::allocate_producer_ids`].
    ///
    /// # Errors
    /// As the QuorumController's, and `RequestTimedOut`.
    pub async fn allocate_producer_ids(
        &self,
        broker_id: BrokerId,
        broker_epoch: i64,
    ) -> Result<ProducerIdsBlock, QuorumError> {
        let request = ControllerRequest::AllocateProducerIds {
            broker_id,
            broker_epoch,
        };
        match self.call(request).await? {
            ControllerReply::AllocateProducerIds(block) => Ok(block),
            other => Err(mismatch(&other)),
        }
    }

    /// See [`QuorumController::describe_quorum`].
    ///
    /// # Errors
    /// As the QuorumController's, and `RequestTimedOut`.
    pub async fn describe_quorum(&self) -> Result<QuorumDescription, QuorumError> {
        match self.call(ControllerRequest::DescribeQuorum).await? {
            ControllerReply::DescribeQuorum(description) => Ok(description),
            other => Err(mismatch(&other)),
        }
    }

    /// See [`QuorumController::alter_user_scram_credentials`].
    ///
    /// # Errors
    /// As the QuorumController's, and `RequestTimedOut`.
    pub async fn alter_user_scram_credentials(
        &self,
        changes: Vec<crate::quorum::ScramChange>,
    ) -> Result<Vec<Result<(), QuorumError>>, QuorumError> {
        match self
            .call(ControllerRequest::AlterUserScramCredentials { changes })
            .await?
        {
            ControllerReply::AlterUserScramCredentials(results) => Ok(results),
            other => Err(mismatch(&other)),
        }
    }

    /// See [`QuorumController::create_acls`].
    ///
    /// # Errors
    /// As the QuorumController's, and `RequestTimedOut`.
    pub async fn create_acls(
        &self,
        bindings: Vec<logbook_metadata::acls::AclBinding>,
    ) -> Result<Vec<Result<(), QuorumError>>, QuorumError> {
        match self
            .call(ControllerRequest::CreateAcls { bindings })
            .await?
        {
            ControllerReply::CreateAcls(results) => Ok(results),
            other => Err(mismatch(&other)),
        }
    }

    /// See [`QuorumController::alter_client_quotas`].
    ///
    /// # Errors
    /// As the QuorumController's, and `RequestTimedOut`.
    pub async fn alter_client_quotas(
        &self,
        alterations: Vec<crate::quorum::QuotaAlteration>,
        validate_only: bool,
    ) -> Result<Vec<Result<(), QuorumError>>, QuorumError> {
        match self
            .call(ControllerRequest::AlterClientQuotas {
                alterations,
                validate_only,
            })
            .await?
        {
            ControllerReply::AlterClientQuotas(results) => Ok(results),
            other => Err(mismatch(&other)),
        }
    }

    /// See [`QuorumController::delete_acls`].
    ///
    /// # Errors
    /// As the QuorumController's, and `RequestTimedOut`.
    pub async fn delete_acls(
        &self,
        filters: Vec<logbook_metadata::acls::AclBindingFilter>,
    ) -> Result<Vec<Result<Vec<logbook_metadata::acls::AclBinding>, QuorumError>>, QuorumError>
    {
        match self.call(ControllerRequest::DeleteAcls { filters }).await? {
            ControllerReply::DeleteAcls(results) => Ok(results),
            other => Err(mismatch(&other)),
        }
    }

    /// See [`QuorumController::fetch_metadata`]. A broker-only node's metadata follower
    /// calls this on a client of its own, so its long polls never hold back a heartbeat
    /// queued on the same connection.
    ///
    /// # Errors
    /// As the QuorumController's, and `RequestTimedOut`.
    pub async fn fetch_metadata(
        &self,
        request: MetadataFetchRequest,
    ) -> Result<MetadataFetchReply, QuorumError> {
        match self.call(ControllerRequest::FetchMetadata(request)).await? {
            ControllerReply::FetchMetadata(reply) => Ok(reply),
            other => Err(mismatch(&other)),
        }
    }

    /// Runs `request` on the active controller, following NOT_CONTROLLER and retrying
    /// unreachable controllers until the request timeout.
    async fn call(&self, request: ControllerRequest) -> Result<ControllerReply, QuorumError> {
        let timeout_ms = self.config.request_timeout_ms;
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        let backoff = Duration::from_millis(self.config.retry_backoff_ms);
        let mut redirected = false;
        loop {
            let (target_id, outcome) = self.attempt(&request, deadline).await;
            let outcome = outcome.map(|answer| {
                self.controller_offset
                    .fetch_max(answer.metadata_offset, Ordering::AcqRel);
                answer.result
            });
            let retry_now = match outcome {
                Ok(Err(QuorumError::NotController { leader_id })) => {
                    self.set_leader_hint(leader_id);
                    // Follow a redirect to another node at once, but only once in a row,
                    // so two nodes that name each other do not spin.
                    let follow = leader_id.is_some_and(|l| l != target_id) && !redirected;
                    redirected = follow;
                    follow
                }
                Ok(Err(QuorumError::Raft(crate::Error::Shutdown { reason }))) => {
                    tracing::debug!(controller = target_id, %reason, "controller shutting down; trying another");
                    self.forget_leader(target_id);
                    redirected = false;
                    false
                }
                Ok(result) => {
                    // The node that answered is the active controller: keep going there.
                    self.set_leader_hint(Some(target_id));
                    return result;
                }
                Err(e) => {
                    tracing::debug!(controller = target_id, error = ?e, "controller unreachable; retrying");
                    self.forget_leader(target_id);
                    redirected = false;
                    false
                }
            };
            if !retry_now {
                if Instant::now() + backoff >= deadline {
                    return Err(QuorumError::RequestTimedOut { timeout_ms });
                }
                tokio::time::sleep(backoff).await;
            }
            if Instant::now() >= deadline {
                return Err(QuorumError::RequestTimedOut { timeout_ms });
            }
        }
    }

    /// One attempt at the controller [`Self::target`] names: dispatched in process when
    /// this node's own Raft leads, else sent over the network. Returns the controller
    /// tried with the outcome, for the caller's retry and redirect decisions.
    async fn attempt(
        &self,
        request: &ControllerRequest,
        deadline: Instant,
    ) -> (u64, Result<ControllerAnswer, CallError>) {
        match self.target() {
            Target::Local(controller) => {
                let result = rpc::dispatch(controller, request.clone(), None).await;
                let metadata_offset = controller.image().offset();
                (
                    controller.raft().node_id(),
                    Ok(ControllerAnswer {
                        result,
                        metadata_offset,
                    }),
                )
            }
            Target::Remote(id) => {
                // An attempt on a controller that stopped answering (SIGSTOP, a hung
                // host) would hold the call until its deadline, 30 s by default, while
                // the quorum elects another leader in about a second: a heartbeat stuck
                // there let the new controller fence every broker, this node's own
                // included, after one session timeout (the chaos trials' minutes-long
                // stalls). The attempt is dropped as soon as this node's Raft names
                // another leader, and the call goes there.
                let attempt_deadline = self
                    .attempt_bound(request)
                    .map_or(deadline, |bound| deadline.min(Instant::now() + bound));
                let outcome = tokio::select! {
                    outcome = self.remote(id, request, attempt_deadline) => outcome,
                    () = self.leader_moved_from(id) => {
                        tracing::debug!(controller = id, "the quorum elected another leader; leaving the call there");
                        Err(CallError::Network(std::io::Error::other(
                            "the quorum elected another leader",
                        )))
                    }
                };
                (id, outcome)
            }
        }
    }

    /// The controller to try next: this node's when its Raft node leads, else the leader
    /// its Raft metrics or the last answer named, else the next voter in turn.
    fn target(&self) -> Target<'_> {
        if let Some(local) = &self.local {
            let raft = local.raft();
            match raft.leader() {
                Some(leader) if leader == raft.node_id() => return Target::Local(local),
                Some(leader) => return Target::Remote(leader),
                None => {}
            }
        }
        let hint = *self
            .leader_hint
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(leader) = hint.filter(|l| self.voters.contains_key(l)) {
            return Target::Remote(leader);
        }
        let turn = self.next_voter.fetch_add(1, Ordering::Relaxed) % self.voters.len().max(1);
        let voter = self.voters.keys().nth(turn).copied().unwrap_or_default();
        match &self.local {
            Some(local) if local.raft().node_id() == voter => Target::Local(local),
            _ => Target::Remote(voter),
        }
    }

    /// How long one remote attempt of `request` may take on a node without a Raft of its
    /// own, when it is bounded at all (see `ControllerClientConfig::attempt_timeout_ms`).
    /// A node with a Raft follows its leader changes instead (`leader_moved_from`).
    fn attempt_bound(&self, request: &ControllerRequest) -> Option<Duration> {
        if self.local.is_some() {
            return None;
        }
        let bound = Duration::from_millis(self.config.attempt_timeout_ms);
        match request {
            ControllerRequest::BrokerHeartbeat(_) => Some(bound),
            ControllerRequest::FetchMetadata(fetch) => {
                Some(bound + Duration::from_millis(fetch.max_wait_ms))
            }
            _ => None,
        }
    }

    /// Completes once this node's Raft names a leader other than `id` (never on a
    /// broker-only node, which has no Raft of its own: its attempts end at the deadline,
    /// with the connection, or at `attempt_bound`).
    async fn leader_moved_from(&self, id: u64) {
        let Some(local) = &self.local else {
            return std::future::pending().await;
        };
        let mut metrics = local.raft().metrics();
        if metrics
            .wait_for(|m| m.current_leader.is_some_and(|leader| leader != id))
            .await
            .is_err()
        {
            // Raft stopped: the node is shutting down and the call's deadline ends it.
            std::future::pending::<()>().await;
        }
    }

    fn set_leader_hint(&self, leader_id: Option<u64>) {
        *self
            .leader_hint
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = leader_id;
    }

    fn forget_leader(&self, controller: u64) {
        let mut hint = self
            .leader_hint
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if *hint == Some(controller) {
            *hint = None;
        }
    }

    /// One attempt on controller `id` over its pooled connection.
    async fn remote(
        &self,
        id: u64,
        request: &ControllerRequest,
        deadline: Instant,
    ) -> Result<ControllerAnswer, CallError> {
        let Some(node) = self.voters.get(&id) else {
            return Err(CallError::Unreachable(std::io::Error::other(format!(
                "controller {id} is not in controller.quorum.voters"
            ))));
        };
        let body = serde_json::to_vec(request).map_err(|e| {
            CallError::Network(std::io::Error::new(std::io::ErrorKind::InvalidInput, e))
        })?;
        let key = (CONTROLLER_RPC_API_KEY, CONTROLLER_RPC_API_VERSION);
        let answer = self.pool.call(id, node, key, body, deadline).await?;
        serde_json::from_slice(&answer).map_err(|e| {
            // A controller of another version, or a bug: nothing a retry would fix, but
            // another controller might answer, so it counts as a failed exchange.
            tracing::warn!(controller = id, error = %e, "undecodable controller answer");
            CallError::Network(std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        })
    }
}

/// An answer of another operation's kind: a bug on one end.
fn mismatch(reply: &ControllerReply) -> QuorumError {
    let message = format!("controller answered with the wrong kind of reply: {reply:?}");
    tracing::error!("{message}");
    QuorumError::Raft(crate::Error::Internal(message))
}

#[cfg(test)]
mod tests;
