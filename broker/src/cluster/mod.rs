//! The broker's side of the cluster: how it reaches the controller quorum
//! ([`ControllerHandle`]), the metadata it serves from ([`MetadataCache`], fed by the
//! [`publisher`]), its registration and heartbeats ([`lifecycle`]), and the one-time
//! migration of a single node's metadata files into the metadata log ([`migration`]).
//!
//! Every controller call goes through [`ControllerHandle`], so swapping the local
//! `QuorumController` for a client that forwards to the active controller over the network
//! changes one type and nothing else.

pub mod lifecycle;
pub mod metadata_cache;
pub mod metadata_follower;
pub mod migration;
pub mod partition_leaders;
pub mod publisher;
pub mod views;

use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use logbook_controller::quorum::{
    AlterConfigOp, BrokerHeartbeatReply, BrokerHeartbeatRequest, BrokerRegistrationReply,
    BrokerRegistrationRequest, CreatableTopic, CreatedTopic, ProducerIdsBlock, QuorumError,
    ReassignmentResults, ReassignmentTargets,
};
use logbook_controller::ControllerClient;
use logbook_metadata::{BrokerId, ConfigResource, Election};
use uuid::Uuid;

pub use metadata_cache::MetadataCache;

/// Per-topic results of CreateTopics.
pub type CreateTopicsResults = Vec<(String, Result<CreatedTopic, QuorumError>)>;
/// Per-partition results of ElectLeaders.
pub type ElectLeadersResults = Vec<((String, i32), Result<BrokerId, QuorumError>)>;

/// The one door from the broker to the controller: methods mirror `QuorumController`'s.
/// Behind it is a [`ControllerClient`], which calls this node's own QuorumController while
/// it is the active one and the active controller over the controller listener otherwise.
/// Cheap to clone.
#[derive(Clone)]
pub struct ControllerHandle {
    inner: Arc<ControllerClient>,
}

impl ControllerHandle {
    /// A handle over `client`.
    #[must_use]
    pub fn new(inner: Arc<ControllerClient>) -> Self {
        ControllerHandle { inner }
    }

    /// The client (the AlterPartition manager sends through it too).
    #[must_use]
    pub fn client(&self) -> &Arc<ControllerClient> {
        &self.inner
    }

    /// BrokerRegistration.
    ///
    /// # Errors
    /// As `QuorumController::register_broker`.
    pub async fn register_broker(
        &self,
        request: BrokerRegistrationRequest,
    ) -> Result<BrokerRegistrationReply, QuorumError> {
        self.inner.register_broker(request).await
    }

    /// BrokerHeartbeat.
    ///
    /// # Errors
    /// As `QuorumController::broker_heartbeat`.
    pub async fn broker_heartbeat(
        &self,
        request: BrokerHeartbeatRequest,
    ) -> Result<BrokerHeartbeatReply, QuorumError> {
        self.inner.broker_heartbeat(request).await
    }

    /// CreateTopics.
    ///
    /// # Errors
    /// As `QuorumController::create_topics`.
    pub async fn create_topics(
        &self,
        topics: Vec<CreatableTopic>,
        validate_only: bool,
    ) -> Result<CreateTopicsResults, QuorumError> {
        self.inner.create_topics(topics, validate_only).await
    }

    /// CreatePartitions.
    ///
    /// # Errors
    /// As `QuorumController::create_partitions`.
    pub async fn create_partitions(
        &self,
        topics: Vec<logbook_controller::quorum::NewPartitions>,
    ) -> Result<Vec<(String, Result<(), QuorumError>)>, QuorumError> {
        self.inner.create_partitions(topics).await
    }

    /// DeleteTopics.
    ///
    /// # Errors
    /// As `QuorumController::delete_topics`.
    pub async fn delete_topics(
        &self,
        names: Vec<String>,
    ) -> Result<Vec<(String, Result<Uuid, QuorumError>)>, QuorumError> {
        self.inner.delete_topics(names).await
    }

    /// IncrementalAlterConfigs.
    ///
    /// # Errors
    /// As `QuorumController::incremental_alter_configs`.
    pub async fn incremental_alter_configs(
        &self,
        resources: Vec<(ConfigResource, Vec<AlterConfigOp>)>,
    ) -> Result<Vec<(ConfigResource, Result<(), QuorumError>)>, QuorumError> {
        self.inner.incremental_alter_configs(resources).await
    }

    /// ElectLeaders.
    ///
    /// # Errors
    /// As `QuorumController::elect_leaders`.
    pub async fn elect_leaders(
        &self,
        election: Election,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<ElectLeadersResults, QuorumError> {
        self.inner.elect_leaders(election, partitions).await
    }

    /// AlterPartitionReassignments.
    ///
    /// # Errors
    /// As `QuorumController::alter_partition_reassignments`.
    pub async fn alter_partition_reassignments(
        &self,
        reassignments: ReassignmentTargets,
    ) -> Result<ReassignmentResults, QuorumError> {
        self.inner
            .alter_partition_reassignments(reassignments)
            .await
    }

    /// AllocateProducerIds.
    ///
    /// # Errors
    /// As `QuorumController::allocate_producer_ids`.
    pub async fn allocate_producer_ids(
        &self,
        broker_id: BrokerId,
        broker_epoch: i64,
    ) -> Result<ProducerIdsBlock, QuorumError> {
        self.inner
            .allocate_producer_ids(broker_id, broker_epoch)
            .await
    }

    /// The active controller as this node knows it, reported to clients as the
    /// controller (a combined node leads the quorum and serves clients), if known.
    #[must_use]
    pub fn leader_id(&self) -> Option<i32> {
        self.inner.leader_id().and_then(|id| i32::try_from(id).ok())
    }

    /// The metadata offset an answer must wait for after an operation returned (read your
    /// writes): the controller committed and applied the operation's batch at or before
    /// this offset.
    #[must_use]
    pub fn applied_offset(&self) -> i64 {
        self.inner.controller_offset()
    }
}

/// What `Topics`, the producer-id manager and the handlers need of the cluster: the
/// controller, the image, this node's id and registration epoch, and the settings of
/// controller-side topic creation.
pub struct ClusterContext {
    /// The controller, once started (the publisher, and so the registry, exist before it:
    /// the controller replays its log into them as it starts).
    controller: OnceLock<ControllerHandle>,
    /// The image this broker serves.
    pub metadata: MetadataCache,
    /// `node.id`.
    pub node_id: i32,
    /// This broker's registration epoch (-1 until registered).
    broker_epoch: AtomicI64,
    /// How long an admin operation waits for the controller and for its result to reach
    /// the local image.
    pub admin_timeout: Duration,
    /// `offsets.topic.replication.factor`.
    pub offsets_topic_replication_factor: i16,
    /// `transaction.state.log.replication.factor`.
    pub transaction_state_replication_factor: i16,
    /// Whether this node is the only voter (a single node): orphan logs are deleted
    /// rather than renamed `-stray`.
    pub sole_voter: bool,
}

impl ClusterContext {
    /// A context for `node_id` (no controller yet, not registered yet).
    #[must_use]
    pub fn new(metadata: MetadataCache, node_id: i32, admin_timeout: Duration) -> Self {
        ClusterContext {
            controller: OnceLock::new(),
            metadata,
            node_id,
            broker_epoch: AtomicI64::new(-1),
            admin_timeout,
            offsets_topic_replication_factor: 3,
            transaction_state_replication_factor: 3,
            sole_voter: true,
        }
    }

    /// Sets the controller, once, at startup.
    pub fn set_controller(&self, controller: ControllerHandle) {
        if self.controller.set(controller).is_err() {
            tracing::error!("the controller was set twice; keeping the first");
        }
    }

    /// The controller.
    ///
    /// # Errors
    /// `NotController` before startup has set it.
    pub fn controller(&self) -> Result<&ControllerHandle, QuorumError> {
        self.controller
            .get()
            .ok_or(QuorumError::NotController { leader_id: None })
    }

    /// This broker's registration epoch (-1 until registered).
    #[must_use]
    pub fn broker_epoch(&self) -> i64 {
        self.broker_epoch.load(Ordering::Acquire)
    }

    pub(crate) fn set_broker_epoch(&self, epoch: i64) {
        self.broker_epoch.store(epoch, Ordering::Release);
    }

    /// Runs a controller call from synchronous code (the topic registry and the
    /// coordinators are synchronous): parks this worker with `block_in_place` and drives
    /// `future` on it, bounded by `admin_timeout`. Needs the multi-threaded runtime the
    /// broker runs on.
    ///
    /// # Errors
    /// `None` when the call did not finish within `admin_timeout`.
    pub fn block_on<F: Future>(&self, future: F) -> Option<F::Output> {
        let timeout = self.admin_timeout;
        let handle = tokio::runtime::Handle::current();
        tokio::task::block_in_place(|| {
            handle.block_on(async { tokio::time::timeout(timeout, future).await.ok() })
        })
    }

    /// Waits (synchronously, as [`ClusterContext::block_on`]) until the local image has
    /// applied everything the controller applied when this is called: an admin operation
    /// answers only once this broker shows its result. False on timeout.
    #[must_use]
    pub fn wait_for_controller_offset(&self) -> bool {
        let Ok(controller) = self.controller() else {
            return false;
        };
        let offset = controller.applied_offset();
        let metadata = self.metadata.clone();
        let timeout = self.admin_timeout;
        self.block_on(async move { metadata.wait_for_offset(offset, timeout).await })
            .unwrap_or(false)
    }
}

/// Producer-id blocks come from the active controller (AllocateProducerIds, KIP-730), for
/// this broker at its current broker epoch; the controller records each block in the
/// metadata log before handing it out, so no id is ever given twice.
impl crate::coordinator::producer_id_manager::ProducerIdBlocks for ClusterContext {
    fn next_block(
        &self,
    ) -> futures::future::BoxFuture<
        '_,
        Result<crate::coordinator::producer_id_manager::ProducerIdBlock, String>,
    > {
        Box::pin(async move {
            let controller = self.controller().map_err(|e| e.to_string())?;
            let block = tokio::time::timeout(
                self.admin_timeout,
                controller.allocate_producer_ids(self.node_id, self.broker_epoch()),
            )
            .await
            .map_err(|_| "the controller gave no producer id block in time".to_string())?
            .map_err(|e| e.to_string())?;
            Ok(crate::coordinator::producer_id_manager::ProducerIdBlock {
                first: block.first_producer_id,
                len: block.len,
            })
        })
    }
}
