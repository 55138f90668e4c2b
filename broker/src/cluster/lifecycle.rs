//! `BrokerLifecycle` (Kafka's `BrokerLifecycleManager`): registers this broker with the
//! controller, heartbeats every `broker.heartbeat.interval.ms` with the offset of the
//! image it applied (the controller unfences it once that reaches its registration), and
//! at shutdown asks for a controlled shutdown, so its leaderships move before its logs
//! close.

use std::sync::Arc;
use std::time::Duration;

use logbook_controller::quorum::{
    BrokerHeartbeatRequest, BrokerRegistrationReply, BrokerRegistrationRequest, QuorumError,
};
use logbook_metadata::BrokerEndpoint;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use super::ClusterContext;

/// Pause between attempts while the controller is not reachable or refuses (no leader
/// yet, a previous incarnation's session still live).
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// How long a controlled shutdown waits for the controller's consent.
pub const CONTROLLED_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one heartbeat of a controlled shutdown may go unanswered before the broker
/// stops without the controller's consent (a quorum that lost its majority answers none).
const SHUTDOWN_HEARTBEAT_MAX: Duration = Duration::from_secs(4);

/// Why the broker could not join the cluster.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    /// Registration or unfencing did not happen within the startup timeout.
    #[error("broker {node_id} was not {what} within {timeout_ms} ms: {last}")]
    Timeout {
        /// This broker.
        node_id: i32,
        /// The step that did not finish.
        what: &'static str,
        /// The timeout.
        timeout_ms: u128,
        /// The last refusal seen.
        last: String,
    },
}

/// This broker's registration and heartbeats.
pub struct BrokerLifecycle {
    cluster: Arc<ClusterContext>,
    incarnation_id: Uuid,
    heartbeat_interval: Duration,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

impl BrokerLifecycle {
    /// Registers (advertising `host:port`), heartbeats until the controller unfences this
    /// broker and the local image shows it unfenced, then keeps heartbeating in the
    /// background. Retries refusals until `timeout`.
    ///
    /// # Errors
    /// `Timeout` naming the step that did not finish.
    pub async fn start(
        cluster: Arc<ClusterContext>,
        endpoints: Vec<BrokerEndpoint>,
        heartbeat_interval: Duration,
        timeout: Duration,
    ) -> Result<Self, LifecycleError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let incarnation_id = incarnation_id(&cluster, timeout).await;
        let lifecycle = BrokerLifecycle {
            cluster,
            incarnation_id,
            heartbeat_interval,
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
        };
        let node_id = lifecycle.cluster.node_id;
        let timed_out = |what, last: String| LifecycleError::Timeout {
            node_id,
            what,
            timeout_ms: timeout.as_millis(),
            last,
        };
        let reply = lifecycle
            .register(endpoints, deadline)
            .await
            .map_err(|last| timed_out("registered", last))?;
        lifecycle.cluster.set_broker_epoch(reply.broker_epoch);
        tracing::info!(
            node_id,
            broker_epoch = reply.broker_epoch,
            offset = reply.registration_offset,
            "broker registered"
        );
        lifecycle
            .await_unfenced(&reply, deadline)
            .await
            .map_err(|(what, last)| timed_out(what, last))?;
        lifecycle.tasks.spawn(heartbeat_loop(
            Arc::clone(&lifecycle.cluster),
            lifecycle.heartbeat_interval,
            lifecycle.shutdown.clone(),
        ));
        Ok(lifecycle)
    }

    /// Registers this broker (Kafka's BrokerRegistration), retrying refusals until
    /// `deadline`: at startup the controller may have no leader yet, or still hold the
    /// session of this broker's previous incarnation. The error is the last refusal.
    async fn register(
        &self,
        endpoints: Vec<BrokerEndpoint>,
        deadline: tokio::time::Instant,
    ) -> Result<BrokerRegistrationReply, String> {
        let registration = BrokerRegistrationRequest {
            broker_id: self.cluster.node_id,
            incarnation_id: self.incarnation_id,
            endpoints,
            rack: None,
            partitions_max: None,
        };
        loop {
            let registered = match self.cluster.controller() {
                Ok(controller) => controller.register_broker(registration.clone()).await,
                Err(e) => Err(e),
            };
            match registered {
                Ok(reply) => return Ok(reply),
                Err(e) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!(error = %e, "broker registration refused; retrying");
                    tokio::time::sleep(RETRY_BACKOFF).await;
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// Heartbeats until the controller unfences this broker, then waits until the local
    /// image shows it unfenced, so requests served from that image see this broker as a
    /// live one. The controller unfences a broker only once its heartbeats show the image
    /// caught up with its registration, hence the wait for that offset first. The error
    /// names the step not finished by `deadline` and the last refusal.
    async fn await_unfenced(
        &self,
        reply: &BrokerRegistrationReply,
        deadline: tokio::time::Instant,
    ) -> Result<(), (&'static str, String)> {
        let node_id = self.cluster.node_id;
        // Unfenced once a heartbeat shows the image caught up with the registration.
        let metadata = self.cluster.metadata.clone();
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        metadata
            .wait_for_offset(reply.registration_offset, remaining)
            .await;
        let mut last = String::from("not caught up");
        loop {
            match self.heartbeat(false).await {
                Ok(beat) if !beat.is_fenced => break,
                Ok(beat) => last = format!("{beat:?}"),
                Err(e) => last = e.to_string(),
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(("unfenced", last));
            }
            tokio::time::sleep(RETRY_BACKOFF).await;
        }
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        let epoch = reply.broker_epoch;
        let shown = metadata
            .wait_until(
                |image| {
                    image
                        .broker(node_id)
                        .is_some_and(|b| b.broker_epoch == epoch && !b.fenced)
                },
                remaining,
            )
            .await;
        if shown.is_none() {
            return Err(("shown unfenced in the local image", last));
        }
        Ok(())
    }

    async fn heartbeat(
        &self,
        want_shut_down: bool,
    ) -> Result<logbook_controller::quorum::BrokerHeartbeatReply, QuorumError> {
        heartbeat(&self.cluster, want_shut_down).await
    }

    /// Controlled shutdown: stops the regular heartbeats and heartbeats with
    /// `want_shut_down` until the controller says this broker leads nothing any more (or
    /// `timeout` passes), so clients move to the new leaders before the logs close.
    /// Every wait is bounded by `timeout`: with its peers gone the controller quorum
    /// commits nothing, and a heartbeat then never gets its answer.
    pub async fn controlled_shutdown(&self, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        self.shutdown.cancel();
        self.tasks.close();
        if tokio::time::timeout_at(deadline, self.tasks.wait())
            .await
            .is_err()
        {
            tracing::warn!("the heartbeat task did not stop in time");
        }
        loop {
            let bound = deadline.min(tokio::time::Instant::now() + SHUTDOWN_HEARTBEAT_MAX);
            match tokio::time::timeout_at(bound, self.heartbeat(true)).await {
                Ok(Ok(beat)) if beat.should_shut_down => {
                    tracing::info!("controlled shutdown complete");
                    return;
                }
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "controlled shutdown heartbeat refused");
                }
                Err(_) => {
                    // No answer at all: the controller quorum has lost its majority (the
                    // peers are gone), so no leadership can move anyway.
                    tracing::warn!(
                        timeout_ms = SHUTDOWN_HEARTBEAT_MAX.as_millis(),
                        "the controller did not answer the shutdown heartbeat; stopping without a controlled shutdown"
                    );
                    return;
                }
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    timeout_ms = timeout.as_millis(),
                    "controlled shutdown did not complete in time; stopping anyway"
                );
                return;
            }
            tokio::time::sleep(RETRY_BACKOFF).await;
        }
    }
}

/// The incarnation id to register with: a new one, except on a sole voter, which takes
/// over the one in the image. A new controller gives every registered broker a fresh
/// session (plan §3.1), so a restarted single node with a new id would be refused as a
/// duplicate of its dead predecessor until that session ran out (seconds of startup);
/// a sole voter's predecessor is certainly gone (the quorum was that process), so the
/// registration continues its incarnation instead.
async fn incarnation_id(cluster: &ClusterContext, timeout: Duration) -> Uuid {
    if !cluster.sole_voter {
        return Uuid::new_v4();
    }
    if let Ok(controller) = cluster.controller() {
        let offset = controller.applied_offset();
        cluster.metadata.wait_for_offset(offset, timeout).await;
    }
    cluster
        .metadata
        .image()
        .broker(cluster.node_id)
        .map_or_else(Uuid::new_v4, |b| b.incarnation_id)
}

async fn heartbeat(
    cluster: &ClusterContext,
    want_shut_down: bool,
) -> Result<logbook_controller::quorum::BrokerHeartbeatReply, QuorumError> {
    cluster
        .controller()?
        .broker_heartbeat(BrokerHeartbeatRequest {
            broker_id: cluster.node_id,
            broker_epoch: cluster.broker_epoch(),
            current_metadata_offset: cluster.metadata.image().offset(),
            want_fence: false,
            want_shut_down,
        })
        .await
}

/// Heartbeats every `interval` until `shutdown`.
async fn heartbeat_loop(
    cluster: Arc<ClusterContext>,
    interval: Duration,
    shutdown: CancellationToken,
) {
    let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(1)));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        // A heartbeat the controller never answers (no quorum) must not keep shutdown
        // waiting for this task.
        let beat = tokio::select! {
            () = shutdown.cancelled() => return,
            beat = heartbeat(&cluster, false) => beat,
        };
        match beat {
            Ok(beat) if beat.is_fenced => {
                tracing::warn!(?beat, "the controller has this broker fenced");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "broker heartbeat failed"),
        }
    }
}
