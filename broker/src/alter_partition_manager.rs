//! `AlterPartitionManager` (Kafka's `DefaultAlterPartitionManager`): carries the ISR changes
//! partition leaders propose to the active controller and their answers back.
//!
//! Leaders submit through [`AlterPartitionSender`] without blocking; one task sends every
//! change queued meanwhile as one AlterPartition, with at most one request in flight, so a
//! burst of ISR shrinks after a broker dies costs one controller round trip, not one per
//! partition. A partition has at most one change queued or in flight (the `Partition`
//! proposes one at a time; a second is refused at once, as Kafka's `putIfAbsent`). A
//! per-partition answer completes that change; a request-level failure (no controller
//! reachable within the client's request timeout, a stale broker epoch while this broker
//! re-registers) keeps every change queued and retries after `retry_backoff_ms`, never
//! failing them: the leader keeps counting its maximal ISR meanwhile, which is safe, and
//! ignores a late answer once new metadata superseded its proposal.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use logbook_controller::quorum::{
    AlterPartitionData, AlterPartitionRequest as ControllerAlterPartition, QuorumError,
};
use logbook_controller::ControllerClient;
use logbook_metadata::{LeaderRecoveryState, PartitionRegistration};
use logbook_replication::{
    AlterPartitionCallback, AlterPartitionCommitted, AlterPartitionError, AlterPartitionRequest,
    AlterPartitionSender, LeaderEpoch,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

/// Settings of the manager.
#[derive(Clone, Debug)]
pub struct AlterPartitionManagerConfig {
    /// This broker's id (AlterPartition's `broker_id`).
    pub broker_id: i32,
    /// Changes waiting for the task; a submit beyond it is refused at once (the leader
    /// proposes again later). Default 1024.
    pub queue_max: usize,
    /// Pause before resending after a request-level failure (Kafka: 50 ms).
    pub retry_backoff_ms: u64,
}

impl AlterPartitionManagerConfig {
    /// Defaults for broker `broker_id`.
    #[must_use]
    pub fn new(broker_id: i32) -> Self {
        AlterPartitionManagerConfig {
            broker_id,
            queue_max: 1024,
            retry_backoff_ms: 50,
        }
    }
}

/// This broker's current broker epoch (from its registration; changes when it
/// re-registers).
pub type BrokerEpochSupplier = Arc<dyn Fn() -> i64 + Send + Sync>;

/// One proposed change and whom to tell.
struct Item {
    request: AlterPartitionRequest,
    done: AlterPartitionCallback,
}

/// The sending half; the task holds the rest.
pub struct AlterPartitionManager {
    queue: mpsc::Sender<Item>,
}

impl AlterPartitionManager {
    /// Starts the sending task on `tasks`; it stops at `shutdown`, failing whatever is
    /// still queued.
    #[must_use]
    pub fn start(
        client: Arc<ControllerClient>,
        broker_epoch: BrokerEpochSupplier,
        config: AlterPartitionManagerConfig,
        shutdown: CancellationToken,
        tasks: &TaskTracker,
    ) -> Self {
        let (queue, received) = mpsc::channel(config.queue_max.max(1));
        let task = SendTask {
            client,
            broker_epoch,
            config,
            received,
            unsent: BTreeMap::new(),
        };
        tasks.spawn(task.run(shutdown));
        AlterPartitionManager { queue }
    }
}

impl AlterPartitionSender for AlterPartitionManager {
    fn submit(&self, request: AlterPartitionRequest, done: AlterPartitionCallback) {
        if let Err(e) = self.queue.try_send(Item { request, done }) {
            let (reason, item) = match e {
                mpsc::error::TrySendError::Full(item) => ("AlterPartition queue full", item),
                mpsc::error::TrySendError::Closed(item) => ("AlterPartition manager stopped", item),
            };
            tracing::warn!(partition = %item.request.topic_partition, "{reason}");
            (item.done)(Err(AlterPartitionError::NotAttempted(reason.to_string())));
        }
    }
}

/// A partition by topic id, as AlterPartition v2+ names it.
type PartitionKey = (Uuid, i32);

struct SendTask {
    client: Arc<ControllerClient>,
    broker_epoch: BrokerEpochSupplier,
    config: AlterPartitionManagerConfig,
    received: mpsc::Receiver<Item>,
    /// Changes not yet answered, at most one per partition.
    unsent: BTreeMap<PartitionKey, Item>,
}

impl SendTask {
    async fn run(mut self, shutdown: CancellationToken) {
        let backoff = Duration::from_millis(self.config.retry_backoff_ms);
        let mut failing = false;
        loop {
            if self.unsent.is_empty() {
                let item = tokio::select! {
                    () = shutdown.cancelled() => break,
                    item = self.received.recv() => item,
                };
                let Some(item) = item else { break };
                self.enqueue(item);
            }
            while let Ok(item) = self.received.try_recv() {
                self.enqueue(item);
            }
            let request = self.request();
            let sent = tokio::select! {
                () = shutdown.cancelled() => break,
                sent = self.client.alter_partition(request) => sent,
            };
            match sent {
                Ok(results) => {
                    failing = false;
                    if self.complete(results) {
                        tokio::select! {
                            () = shutdown.cancelled() => break,
                            () = tokio::time::sleep(backoff) => {}
                        }
                    }
                }
                Err(e) => {
                    if failing {
                        tracing::debug!(error = %e, "AlterPartition failed again; retrying");
                    } else {
                        tracing::warn!(error = %e, changes = self.unsent.len(), "AlterPartition failed; retrying");
                    }
                    failing = true;
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep(backoff) => {}
                    }
                }
            }
        }
        self.received.close();
        while let Ok(item) = self.received.try_recv() {
            self.enqueue(item);
        }
        for (_, item) in std::mem::take(&mut self.unsent) {
            (item.done)(Err(AlterPartitionError::NotAttempted(
                "broker shutting down".to_string(),
            )));
        }
    }

    /// Queues `item` unless its partition has a change queued or in flight already.
    fn enqueue(&mut self, item: Item) {
        let key = (
            item.request.topic_id,
            item.request.topic_partition.partition,
        );
        if self.unsent.contains_key(&key) {
            tracing::warn!(partition = %item.request.topic_partition, "an ISR change for this partition is in flight already");
            (item.done)(Err(AlterPartitionError::NotAttempted(
                "an ISR change for this partition is in flight already".to_string(),
            )));
            return;
        }
        self.unsent.insert(key, item);
    }

    /// One AlterPartition carrying every queued change.
    fn request(&self) -> ControllerAlterPartition {
        let partitions = self
            .unsent
            .values()
            .map(|item| {
                let r = &item.request;
                AlterPartitionData {
                    topic_id: r.topic_id,
                    partition: r.topic_partition.partition,
                    leader_epoch: r.leader_epoch.0,
                    new_isr_with_epochs: r
                        .new_isr
                        .iter()
                        .map(|m| (m.broker_id, m.broker_epoch))
                        .collect(),
                    // A leader elected cleanly is recovered; Logbook elects no recovering
                    // leader yet (unclean election recovery is not built).
                    leader_recovery_state: LeaderRecoveryState::Recovered,
                    partition_epoch: r.partition_epoch,
                }
            })
            .collect();
        ControllerAlterPartition {
            broker_id: self.config.broker_id,
            broker_epoch: (self.broker_epoch)(),
            partitions,
        }
    }

    /// Hands each answered partition its result; a partition missing from the answer stays
    /// queued and is sent again (Kafka does the same), and so does one refused with an
    /// error that does not say whether the change was applied (Kafka's leader retries
    /// those): returns whether any such stays, so the caller backs off before resending.
    fn complete(
        &mut self,
        results: Vec<(Uuid, i32, Result<PartitionRegistration, QuorumError>)>,
    ) -> bool {
        let mut retry = false;
        for (topic_id, partition, result) in results {
            let Some(item) = self.unsent.remove(&(topic_id, partition)) else {
                tracing::warn!(%topic_id, partition, "AlterPartition answer for a partition not asked about");
                continue;
            };
            match result.map(committed).map_err(partition_error) {
                Err(AlterPartitionError::Other(e)) => {
                    tracing::warn!(partition = %item.request.topic_partition, error = %e, "AlterPartition failed for a partition; retrying");
                    self.unsent.insert((topic_id, partition), item);
                    retry = true;
                }
                result => (item.done)(result),
            }
        }
        if !retry && !self.unsent.is_empty() {
            tracing::warn!(
                changes = self.unsent.len(),
                "AlterPartition answer left partitions out; sending them again"
            );
        }
        retry
    }
}

fn committed(registration: PartitionRegistration) -> AlterPartitionCommitted {
    AlterPartitionCommitted {
        isr: registration.isr,
        leader_epoch: LeaderEpoch(registration.leader_epoch),
        partition_epoch: registration.partition_epoch,
    }
}

/// The controller's refusal of one partition's change, as the leader acts on it.
fn partition_error(error: QuorumError) -> AlterPartitionError {
    match error {
        QuorumError::InvalidUpdateVersion { .. } => AlterPartitionError::InvalidUpdateVersion,
        QuorumError::IneligibleReplica { .. } => AlterPartitionError::IneligibleReplica,
        QuorumError::NewLeaderElected { .. }
        | QuorumError::FencedLeaderEpoch { .. }
        | QuorumError::NotLeaderOrFollower { .. } => AlterPartitionError::NewLeaderElected,
        QuorumError::UnknownTopicId { .. } | QuorumError::UnknownTopicOrPartition { .. } => {
            AlterPartitionError::UnknownTopicOrPartition
        }
        e @ (QuorumError::NotController { .. }
        | QuorumError::DuplicateBrokerRegistration { .. }
        | QuorumError::BrokerIdNotRegistered { .. }
        | QuorumError::StaleBrokerEpoch { .. }
        | QuorumError::TopicAlreadyExists { .. }
        | QuorumError::InvalidReplicationFactor { .. }
        | QuorumError::InvalidPartitions { .. }
        | QuorumError::InvalidRequest(_)
        | QuorumError::ElectionNotNeeded
        | QuorumError::PreferredLeaderNotAvailable
        | QuorumError::EligibleLeadersNotAvailable
        | QuorumError::InvalidReplicaAssignment(_)
        | QuorumError::NoReassignmentInProgress
        | QuorumError::Rejected(_)
        | QuorumError::RequestTimedOut { .. }
        | QuorumError::ScramCredential { .. }
        | QuorumError::Raft(_)) => AlterPartitionError::Other(e.to_string()),
    }
}

#[cfg(test)]
mod tests;
