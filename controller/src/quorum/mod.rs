//! The QuorumController (Kafka's `QuorumController`): the active controller's logic. It
//! runs on whichever voter leads the Raft quorum and turns requests (registration,
//! heartbeats, topic admin, AlterPartition, elections, producer ids) into atomic
//! `MetadataBatch`es.
//!
//! One operation at a time, each against the newest applied image: compute the records,
//! write them, wait until they are committed and applied here. The operation lock is an
//! async mutex held across that wait on purpose: it is the controller's event queue
//! (Kafka runs its operations on one thread for the same reason), so no two operations
//! compute from the same image. A batch the image rejects (a stale partition epoch, say)
//! is recomputed from the newer image a few times before the operation fails.
//!
//! A voter that is not the leader answers `NotController` with the leader it knows. When
//! it becomes leader (a new term), it first waits until it has applied everything
//! committed, gives every registered broker a fresh session deadline (plan §3.1), and
//! writes the bootstrap records if the image has no cluster id.

mod acl_control;
mod clock;
mod cluster_control;
mod describe_quorum;
mod error;
mod producer_id_control;
mod quota_control;
mod replication_control;
mod scram_control;
mod sessions;

use std::sync::Arc;
use std::time::Duration;

use logbook_metadata::{MetadataBatch, MetadataImage, MetadataRecord};
use openraft::error::{CheckIsLeaderError, RaftError};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Mutex, MutexGuard};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::metadata_fetch::{
    MetadataFetchReply, MetadataFetchRequest, MetadataTail, METADATA_FETCH_WAIT_MAX_MS,
    METADATA_TAIL_BATCHES_MAX,
};
use crate::metadata_state_machine::{AppliedImage, MetadataPublication, MetadataStateMachine};
use crate::{ControllerConfig, Payload, RaftController};

pub use clock::{Clock, ManualClock, SystemClock};
pub use cluster_control::{
    BrokerHeartbeatReply, BrokerHeartbeatRequest, BrokerRegistrationReply,
    BrokerRegistrationRequest,
};
pub use describe_quorum::{QuorumDescription, ReplicaProgress};
pub use error::QuorumError;
pub use producer_id_control::{ProducerIdsBlock, PRODUCER_ID_BLOCK_SIZE};
pub use quota_control::QuotaAlteration;
pub use replication_control::{
    AlterConfigOp, AlterPartitionData, AlterPartitionRequest, AlterPartitionResults,
    CreatableTopic, CreatedTopic, NewPartitions, ReassignmentResults, ReassignmentTargets,
};
pub use scram_control::ScramChange;
pub use sessions::{BrokerSession, BrokerSessions};

/// How many times an operation whose batch was rejected is recomputed before it fails.
const STALE_RETRIES: u32 = 3;

/// The QuorumController's settings (Kafka's names in the docs).
#[derive(Clone, Debug)]
pub struct QuorumConfig {
    /// `broker.session.timeout.ms`: a broker without a heartbeat for this long is fenced.
    pub session_timeout_ms: u64,
    /// `broker.heartbeat.interval.ms`: how often brokers heartbeat; a new active
    /// controller gives brokers `max(2 × this, 3 s)` to heartbeat it.
    pub heartbeat_interval_ms: u64,
    /// How often the active controller looks for ended sessions.
    pub session_check_interval_ms: u64,
    /// `num.partitions`: partitions of a topic created with -1.
    pub default_num_partitions: i32,
    /// `default.replication.factor`: replication factor of a topic created with -1.
    pub default_replication_factor: i16,
    /// `auto.leader.rebalance.enable`: the active controller runs preferred-leader
    /// elections for imbalanced partitions every `leader_imbalance_check_interval_ms`.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.check.interval.seconds`, in milliseconds.
    pub leader_imbalance_check_interval_ms: u64,
    /// The cluster id the first leader writes (a migrated node's old one); `None` draws one.
    pub cluster_id: Option<String>,
    /// Feature levels the first leader writes (`metadata.version`, `transaction.version`).
    pub bootstrap_features: Vec<(String, i16)>,
    /// A whole first batch to write instead of the cluster id and features: the migration
    /// of a single node's metadata files (plan §2.4), which carries its own cluster id
    /// and features, as one atomic entry.
    pub bootstrap_batch: Option<Vec<MetadataRecord>>,
    /// Committed batches kept for MetadataFetch; a broker-only node further behind gets the
    /// whole image (`metadata_fetch`).
    pub metadata_tail_batches_max: usize,
}

impl Default for QuorumConfig {
    fn default() -> Self {
        QuorumConfig {
            session_timeout_ms: 9000,
            heartbeat_interval_ms: 2000,
            session_check_interval_ms: 500,
            default_num_partitions: 1,
            default_replication_factor: 1,
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_ms: 300_000,
            cluster_id: None,
            bootstrap_features: vec![("metadata.version".to_string(), 21)],
            bootstrap_batch: None,
            metadata_tail_batches_max: METADATA_TAIL_BATCHES_MAX,
        }
    }
}

/// What only the active controller holds, guarded by the operation lock.
#[derive(Debug, Default)]
struct ActiveState {
    /// The Raft term this node was last active in; a different current term means it
    /// (re)gained leadership and must reset sessions.
    term: Option<u64>,
    sessions: BrokerSessions,
}

/// The controller of the metadata quorum on this voter (active only while it leads).
pub struct QuorumController {
    raft: RaftController,
    applied: watch::Receiver<AppliedImage>,
    /// The state machine's last committed batches, for MetadataFetch.
    tail: Arc<std::sync::Mutex<MetadataTail>>,
    config: QuorumConfig,
    clock: Arc<dyn Clock>,
    active: Mutex<ActiveState>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

impl QuorumController {
    /// Starts this voter's Raft node with a [`MetadataStateMachine`] publishing to
    /// `publisher`, and the QuorumController over it, with its session check running.
    /// `listener` is the controller listener bound already (tests bind port 0); `None`
    /// binds this node's `controller.quorum.voters` address.
    ///
    /// # Errors
    /// As `RaftController::start`.
    pub async fn start(
        raft_config: ControllerConfig,
        listener: Option<TcpListener>,
        config: QuorumConfig,
        clock: Arc<dyn Clock>,
        publisher: Option<mpsc::Sender<MetadataPublication>>,
    ) -> Result<Arc<Self>, crate::Error> {
        let state_machine = MetadataStateMachine::new(publisher)
            .with_tail_batches_max(config.metadata_tail_batches_max);
        let applied = state_machine.subscribe();
        let tail = state_machine.tail();
        let raft = match listener {
            Some(listener) => {
                RaftController::start_with_listener(raft_config, listener, state_machine).await?
            }
            None => RaftController::start(raft_config, state_machine).await?,
        };
        let controller = Arc::new(QuorumController {
            raft,
            applied,
            tail,
            config,
            clock,
            active: Mutex::new(ActiveState::default()),
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
        });
        let rpc: Arc<dyn crate::net::server::ControllerRpc> = controller.clone();
        controller.raft.install_controller(Arc::downgrade(&rpc));
        controller.tasks.spawn(session_check_loop(
            Arc::downgrade(&controller),
            controller.shutdown.clone(),
            controller.config.session_check_interval_ms,
        ));
        if controller.config.auto_leader_rebalance_enable {
            controller.tasks.spawn(leader_balance_loop(
                Arc::downgrade(&controller),
                controller.shutdown.clone(),
                controller.config.leader_imbalance_check_interval_ms,
            ));
        }
        Ok(controller)
    }

    /// The newest applied image on this voter.
    #[must_use]
    pub fn image(&self) -> MetadataImage {
        self.applied.borrow().image.clone()
    }

    /// A receiver of the newest applied image (the broker's startup waits on it).
    #[must_use]
    pub fn subscribe(&self) -> watch::Receiver<AppliedImage> {
        self.applied.clone()
    }

    /// The Raft node under this controller.
    #[must_use]
    pub fn raft(&self) -> &RaftController {
        &self.raft
    }

    /// The session of `broker_id` on this controller, if it is active and has one (tests
    /// look at deadlines and heartbeat connections).
    pub async fn session(&self, broker_id: logbook_metadata::BrokerId) -> Option<BrokerSession> {
        self.active.lock().await.sessions.get(broker_id)
    }

    /// MetadataFetch (see `metadata_fetch`): the committed batches after
    /// `request.after_offset`, waiting up to `max_wait_ms` for one when there is none yet,
    /// or the whole image when the tail no longer holds them. Takes no operation lock, so a
    /// waiting fetch holds back no other request.
    ///
    /// # Errors
    /// `NotController` (with the leader this voter knows) unless this node leads.
    pub async fn fetch_metadata(
        &self,
        request: MetadataFetchRequest,
    ) -> Result<MetadataFetchReply, QuorumError> {
        let leader = self.raft.leader();
        if leader != Some(self.raft.node_id()) {
            return Err(QuorumError::NotController { leader_id: leader });
        }
        let wait = Duration::from_millis(request.max_wait_ms.min(METADATA_FETCH_WAIT_MAX_MS));
        let mut applied = self.applied.clone();
        // The broker may know more than this new leader has applied yet: it waits too.
        let newer = applied.wait_for(|a| a.image.offset() > request.after_offset);
        // Timing out is an empty answer, as a Fetch's max wait is.
        let _ = tokio::time::timeout(wait, newer).await;
        let batches = self
            .tail
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .read_after(request.after_offset, request.max_batches);
        Ok(match batches {
            Some(batches) => MetadataFetchReply::Batches(batches),
            None => MetadataFetchReply::Snapshot(logbook_metadata::snapshot::MetadataSnapshot::of(
                &self.image(),
            )),
        })
    }

    /// Stops the session check and the Raft node.
    ///
    /// # Errors
    /// As `RaftController::shutdown`.
    pub async fn shutdown(&self) -> Result<(), crate::Error> {
        self.shutdown.cancel();
        self.tasks.close();
        self.tasks.wait().await;
        self.raft.shutdown().await
    }

    /// Takes the operation lock as the active controller: `NotController` unless this
    /// node leads; on the first operation of a new term, catches up, resets sessions and
    /// bootstraps.
    async fn activate(&self) -> Result<MutexGuard<'_, ActiveState>, QuorumError> {
        let mut active = self.active.lock().await;
        let (leader, term) = {
            let metrics = self.raft.metrics();
            let m = metrics.borrow();
            (m.current_leader, m.current_term)
        };
        if leader != Some(self.raft.node_id()) {
            active.term = None;
            return Err(QuorumError::NotController { leader_id: leader });
        }
        if active.term != Some(term) {
            self.catch_up().await?;
            // Every registered broker gets a whole session from now, as Kafka's new active
            // controller counts each broker's last contact from its activation: brokers
            // find the new controller only after their heartbeats to the old one time out,
            // and a shorter grace fenced every broker (itself included) when the old
            // controller was paused rather than gone, leaving partitions leaderless.
            let grace_ms = self
                .config
                .session_timeout_ms
                .max(2 * self.config.heartbeat_interval_ms);
            let now = self.clock.now();
            let deadline = now + Duration::from_millis(grace_ms);
            let image = self.image();
            active.sessions.reset(&image, now, deadline);
            if image.cluster_id().is_none() {
                self.bootstrap().await?;
            }
            tracing::info!(
                node_id = self.raft.node_id(),
                term,
                offset = self.image().offset(),
                "active controller"
            );
            active.term = Some(term);
        }
        Ok(active)
    }

    /// Waits until this leader has applied every entry committed before its term (a
    /// linearizable read), so it computes from the whole committed image.
    async fn catch_up(&self) -> Result<(), QuorumError> {
        let timeout = Duration::from_millis(self.config.session_timeout_ms);
        match tokio::time::timeout(timeout, self.raft.raft().ensure_linearizable()).await {
            Err(_) => Err(QuorumError::NotController { leader_id: None }),
            Ok(Ok(_)) => Ok(()),
            Ok(Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)))) => {
                Err(QuorumError::NotController {
                    leader_id: f.leader_id,
                })
            }
            Ok(Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(_)))) => {
                Err(QuorumError::NotController { leader_id: None })
            }
            Ok(Err(RaftError::Fatal(fatal))) => Err(QuorumError::Raft(crate::Error::Shutdown {
                reason: fatal.to_string(),
            })),
        }
    }

    /// The first leader's records: the cluster id and the feature levels (plan §2.4).
    async fn bootstrap(&self) -> Result<(), QuorumError> {
        if let Some(batch) = &self.config.bootstrap_batch {
            return self.commit(batch.clone()).await.map(|_| ());
        }
        let cluster_id = self
            .config
            .cluster_id
            .clone()
            .unwrap_or_else(|| new_cluster_id(uuid::Uuid::new_v4()));
        let mut records = vec![MetadataRecord::ClusterId(
            logbook_metadata::ClusterIdRecord { cluster_id },
        )];
        records.extend(self.config.bootstrap_features.iter().map(|(name, level)| {
            MetadataRecord::FeatureLevel(logbook_metadata::FeatureLevelRecord {
                name: name.clone(),
                level: *level,
            })
        }));
        self.commit(records).await.map(|_| ())
    }

    /// Writes one batch and waits until it is applied here; returns its offset, or
    /// `Rejected` if the image refused it.
    async fn commit(&self, records: Vec<MetadataRecord>) -> Result<i64, QuorumError> {
        let payload = Payload::encode(&MetadataBatch(records))
            .map_err(|e| QuorumError::Raft(crate::Error::Internal(e.to_string())))?;
        let index = self.raft.write(payload).await?;
        let offset = i64::try_from(index)
            .map_err(|_| QuorumError::Raft(crate::Error::Internal(format!("index {index}"))))?;
        let applied = self.applied.borrow();
        match &applied.last_rejected {
            Some((rejected_at, rejected)) if *rejected_at == offset => {
                Err(QuorumError::Rejected(rejected.error.clone()))
            }
            _ => Ok(offset),
        }
    }

    /// Runs `op` against the newest image and commits its records, recomputing from the
    /// newer image if the batch is rejected. An op with no records writes nothing and
    /// returns the image's offset.
    async fn run<T>(
        &self,
        mut op: impl FnMut(&MetadataImage) -> Result<(Vec<MetadataRecord>, T), QuorumError>,
    ) -> Result<(T, i64), QuorumError> {
        let mut attempt = 0;
        loop {
            let image = self.image();
            let (records, value) = op(&image)?;
            if records.is_empty() {
                return Ok((value, image.offset()));
            }
            match self.commit(records).await {
                Ok(offset) => return Ok((value, offset)),
                Err(QuorumError::Rejected(error)) if attempt < STALE_RETRIES => {
                    tracing::info!(%error, attempt, "controller batch rejected; recomputing");
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Fences brokers whose sessions ended, every `interval_ms`, while the controller lives,
/// then elects leaders uncleanly where a leaderless partition's topic allows it.
async fn session_check_loop(
    controller: std::sync::Weak<QuorumController>,
    shutdown: CancellationToken,
    interval_ms: u64,
) {
    let mut interval = tokio::time::interval(Duration::from_millis(interval_ms.max(1)));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = interval.tick() => {}
        }
        let Some(controller) = controller.upgrade() else {
            return;
        };
        match controller.check_sessions().await {
            Ok(_) | Err(QuorumError::NotController { .. }) => {}
            Err(e) => tracing::warn!(error = %e, "broker session check failed"),
        }
        if controller.image().has_leaderless_partitions() {
            match controller.elect_unclean_leaders().await {
                Ok(_) | Err(QuorumError::NotController { .. }) => {}
                Err(e) => tracing::warn!(error = %e, "unclean leader election failed"),
            }
        }
    }
}

/// `auto.leader.rebalance.enable`: every `interval_ms`, the active controller moves the
/// leadership of each partition whose preferred replica (its first) is an eligible ISR
/// member but does not lead back to it (Kafka's `maybeBalancePartitionLeaders`), so the
/// leaderships a failover piled onto the survivors spread out again once the node
/// returns. Other voters skip the round (NOT_CONTROLLER).
async fn leader_balance_loop(
    controller: std::sync::Weak<QuorumController>,
    shutdown: CancellationToken,
    interval_ms: u64,
) {
    let period = Duration::from_millis(interval_ms.max(1));
    let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = interval.tick() => {}
        }
        let Some(controller) = controller.upgrade() else {
            return;
        };
        let image = controller.image();
        let imbalanced = image.imbalanced_partitions();
        if imbalanced.is_empty() {
            continue;
        }
        match controller
            .elect_leaders(logbook_metadata::Election::Preferred, Some(imbalanced))
            .await
        {
            Ok(results) => {
                let moved = results.iter().filter(|(_, r)| r.is_ok()).count();
                if moved > 0 {
                    tracing::info!(
                        partitions = moved,
                        "moved leaderships back to preferred replicas"
                    );
                }
            }
            Err(QuorumError::NotController { .. }) => {}
            Err(e) => tracing::warn!(error = %e, "preferred leader election failed"),
        }
    }
}

/// A Kafka-style cluster id: the 16 bytes of a UUID in URL-safe base64 without padding
/// (22 characters), as `kafka-storage.sh random-uuid` prints.
fn new_cluster_id(uuid: uuid::Uuid) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let value = uuid.as_u128();
    // 128 bits = 21 groups of 6 bits and 2 bits left, which base64 pads with 4 zero bits.
    (0..22)
        .map(|i| {
            let shift = 128 - 6 * (i + 1);
            let bits = if shift >= 0 {
                (value >> shift) & 0x3f
            } else {
                (value << -shift) & 0x3f
            };
            char::from(ALPHABET[usize::try_from(bits).unwrap_or(0)])
        })
        .collect()
}

#[cfg(test)]
mod tests;
