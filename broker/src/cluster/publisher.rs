//! `MetadataPublisher` (Kafka's `BrokerMetadataPublisher`): applies each committed image to
//! this broker, in log order — the topic registry, the partition logs it hosts (created
//! with their topic's config, deleted with their topic, reconfigured), each hosted
//! partition's leadership and ISR (`ReplicaManager::apply_partition_changes`), then the
//! coordinators' hook — and only then makes the image the one requests see
//! ([`MetadataCache`]). So an admin request that waits for its offset finds its partitions
//! open and led.

use std::path::PathBuf;
use std::sync::Arc;

use logbook_controller::metadata_state_machine::MetadataPublication;
use logbook_metadata::{ConfigResourceType, MetadataDelta, MetadataImage, TopicIdPartition};
use logbook_replication::{
    LeaderEpoch, PartitionChange, PartitionState, ReplicaManager, TopicPartition,
};
use parking_lot::RwLock;
use tokio::sync::{mpsc, oneshot};

use super::MetadataCache;
use crate::topics::Topics;

/// Bound of the queue from the metadata state machine to the publisher: the state machine
/// awaits room, so a slow publisher holds back later entries instead of losing them.
pub const PUBLICATION_QUEUE_MAX: usize = 64;

/// One hosted partition's new role, for the coordinators (their `on_partition_changes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalRoleChange {
    /// The partition.
    pub topic_partition: TopicPartition,
    /// This broker now leads it (`false`: it follows).
    pub leader: bool,
    /// The partition's leader epoch in the image.
    pub leader_epoch: i32,
}

/// Called after leaderships changed, with the hosted partitions whose role was applied.
pub type RoleChangeHook = Arc<dyn Fn(&[LocalRoleChange]) + Send + Sync>;

/// The hooks the publisher calls; coordinators register theirs once built.
#[derive(Clone, Default)]
pub struct RoleChangeHooks(Arc<RwLock<Vec<RoleChangeHook>>>);

impl RoleChangeHooks {
    /// Adds a hook, called for every later change.
    pub fn add(&self, hook: RoleChangeHook) {
        self.0.write().push(hook);
    }

    fn call(&self, changes: &[LocalRoleChange]) {
        if changes.is_empty() {
            return;
        }
        for hook in self.0.read().iter() {
            hook(changes);
        }
    }
}

/// What one image asks of this broker's partitions, gathered before any role changes so
/// the data directory is synced once for all the logs it opened.
#[derive(Default)]
struct PartitionPlan {
    /// Whether any partition log was opened (the data directory needs an fsync).
    created_any: bool,
    /// Changed partitions this broker is a replica of: their leadership to apply.
    states: Vec<PartitionState>,
    /// Hosted partitions this broker is no longer a replica of: to stop.
    stopped: Vec<PartitionState>,
}

/// The publisher task's state.
pub struct MetadataPublisher {
    node_id: i32,
    data_dir: PathBuf,
    topics: Arc<Topics>,
    replicas: Arc<ReplicaManager>,
    cache: MetadataCache,
    hooks: RoleChangeHooks,
    /// Whether an image was applied already: the first one is applied whole.
    applied_any: bool,
}

impl MetadataPublisher {
    /// A publisher applying images to `topics` and `replicas` for broker `node_id`, then
    /// publishing them to `cache`; `data_dir` holds the partition directories.
    #[must_use]
    pub fn new(
        node_id: i32,
        data_dir: PathBuf,
        topics: Arc<Topics>,
        replicas: Arc<ReplicaManager>,
        cache: MetadataCache,
        hooks: RoleChangeHooks,
    ) -> Self {
        MetadataPublisher {
            node_id,
            data_dir,
            topics,
            replicas,
            cache,
            hooks,
            applied_any: false,
        }
    }

    /// Applies publications until the state machine drops its sender; a message on
    /// `caught_up` (sent by the server once the startup replay is over) re-applies the
    /// current image whole, then answers.
    pub async fn run(
        mut self,
        mut publications: mpsc::Receiver<MetadataPublication>,
        mut caught_up: mpsc::Receiver<oneshot::Sender<()>>,
    ) {
        loop {
            tokio::select! {
                publication = publications.recv() => {
                    let Some(publication) = publication else { break };
                    // Creating and deleting logs is blocking file I/O.
                    tokio::task::block_in_place(|| {
                        self.publish(&publication.image, &publication.delta);
                    });
                }
                Some(done) = caught_up.recv() => {
                    tokio::task::block_in_place(|| self.catch_up());
                    let _ = done.send(());
                }
            }
        }
        tracing::debug!("metadata publisher stopped");
    }

    /// The startup replay is over: applies the current image whole. During the replay a
    /// partition whose directory held another topic of the same name was left closed
    /// ([`ReplicaManager::create_partitions_of`]); now the image in force decides, and a
    /// directory of a topic the image does not name any more is deleted and created anew.
    /// Directories opened during the replay get their topic id recorded.
    pub fn catch_up(&mut self) {
        let image = self.cache.image();
        self.publish(&image, &MetadataDelta::default());
        for topic in self.topics.all() {
            self.replicas.record_topic_id(&topic.name, topic.id);
        }
    }

    /// Applies one image (see the module docs).
    pub fn publish(&mut self, image: &MetadataImage, delta: &MetadataDelta) {
        self.cache.stage(image);
        if delta.rejected.is_some() {
            self.cache.publish(image.clone());
            return;
        }
        // A snapshot arrives as an image with an empty delta: compare everything.
        let whole = !self.applied_any || delta.is_empty();
        self.applied_any = true;
        self.remove_deleted_topics(image);
        let plan = self.host_and_plan_partitions(image, delta, whole);
        if plan.created_any {
            self.sync_data_dir();
        }
        let mut changes = self.apply_leadership(plan.states);
        changes.extend(self.stop_moved_replicas(plan.stopped));
        self.hooks.call(&changes);
        self.cache.publish(image.clone());
    }

    /// Updates the topic registry and drops the logs of the topics the image no longer
    /// names. During the metadata-log replay the directories may already belong to a later
    /// topic of the same name, so they are only closed then, not deleted.
    fn remove_deleted_topics(&self, image: &MetadataImage) {
        for name in self.topics.apply_image(image, self.node_id) {
            if self.replicas.is_caught_up() {
                tracing::info!(topic = %name, "deleting the logs of a deleted topic");
                self.replicas.delete_topic(&name);
            } else {
                // Replaying the metadata log: the directories may hold a later topic of the
                // same name (deleted and created again); what no image names is removed
                // after the replay.
                tracing::info!(topic = %name, "closing the logs of a deleted topic (replay)");
                self.replicas.close_topic(&name);
            }
        }
    }

    /// Per topic, in image order: opens the logs of new local replicas, pushes a changed
    /// topic config to its logs, and collects the partition states to apply. Hosting comes
    /// before the states are applied, because a replica needs its log to take a role.
    fn host_and_plan_partitions(
        &self,
        image: &MetadataImage,
        delta: &MetadataDelta,
        whole: bool,
    ) -> PartitionPlan {
        let broker_configs_changed = delta
            .configs_changed
            .iter()
            .any(|r| r.resource_type == ConfigResourceType::Broker);
        let mut plan = PartitionPlan::default();
        for topic_image in image.topics() {
            let Some(topic) = self.topics.get_by_id(&topic_image.id) else {
                continue;
            };
            // A reassignment may add this broker to a partition it does not host yet.
            let grown = whole
                || delta.topics_created.contains(&topic.id)
                || delta
                    .partitions_created
                    .iter()
                    .chain(&delta.partitions_changed)
                    .any(|tp| tp.topic_id == topic.id);
            if grown {
                plan.created_any |= self.host_local_replicas(&topic, topic_image);
            }
            let reconfigured = broker_configs_changed
                || delta
                    .configs_changed
                    .iter()
                    .any(|r| r.resource_type == ConfigResourceType::Topic && r.name == topic.name);
            if reconfigured && !whole {
                self.replicas
                    .set_config(&topic.name, &self.topics.log_config(&topic));
            }
            self.plan_partitions(&topic, topic_image, delta, whole, &mut plan);
        }
        plan
    }

    /// Sorts `topic`'s changed partitions into the ones this broker is a replica of (their
    /// leadership and ISR to apply) and the hosted ones it no longer is (to stop), the way
    /// Kafka's `ReplicaManager.applyDelta` splits local changes from deletions.
    fn plan_partitions(
        &self,
        topic: &crate::topics::Topic,
        topic_image: &logbook_metadata::TopicImage,
        delta: &MetadataDelta,
        whole: bool,
        plan: &mut PartitionPlan,
    ) {
        for (index, registration) in (0..).zip(&topic_image.partitions) {
            let key = TopicIdPartition {
                topic_id: topic.id,
                partition: index,
            };
            let changed = whole
                || delta.partitions_created.contains(&key)
                || delta.partitions_changed.contains(&key);
            if !changed {
                continue;
            }
            let state = PartitionState {
                topic_partition: TopicPartition {
                    topic: topic.name.clone(),
                    partition: index,
                },
                topic_id: topic.id,
                replicas: registration.replicas.clone(),
                isr: registration.isr.clone(),
                leader: registration.leader,
                leader_epoch: LeaderEpoch(registration.leader_epoch),
                partition_epoch: registration.partition_epoch,
            };
            if registration.replicas.contains(&self.node_id) {
                plan.states.push(state);
            } else if self.replicas.partition(&topic.name, index).is_some() {
                // Reassigned away (or never a replica: a placeholder of the hosted
                // prefix, which stop_replicas leaves alone).
                plan.stopped.push(state);
            }
        }
    }

    /// The new partition directories must survive a crash before any write to them is
    /// acknowledged: one fsync of the data directory covers them all.
    fn sync_data_dir(&self) {
        let synced = std::fs::File::open(&self.data_dir).and_then(|dir| dir.sync_all());
        if let Err(e) = synced {
            tracing::error!(error = %e, "fsync of the data directory after creating partitions failed");
        }
    }

    /// Makes this broker lead or follow each planned partition and reports the roles it
    /// took, with the image's leader epoch, for the coordinators (a leader loads its
    /// shard, a transaction shard at that epoch; a follower unloads it). A partition that
    /// fails is logged and skipped.
    fn apply_leadership(&self, states: Vec<PartitionState>) -> Vec<LocalRoleChange> {
        let epochs: Vec<i32> = states.iter().map(|s| s.leader_epoch.0).collect();
        self.replicas
            .apply_partition_changes(states)
            .into_iter()
            .zip(epochs)
            .filter_map(|((topic_partition, result), leader_epoch)| match result {
                Ok(PartitionChange::Leader(_)) => Some(LocalRoleChange {
                    topic_partition,
                    leader: true,
                    leader_epoch,
                }),
                Ok(PartitionChange::Follower(_)) => Some(LocalRoleChange {
                    topic_partition,
                    leader: false,
                    leader_epoch,
                }),
                Ok(PartitionChange::NotAReplica) => None,
                Err(e) => {
                    tracing::error!(partition = %topic_partition, error = %e, "cannot apply the partition's leadership");
                    None
                }
            })
            .collect()
    }

    /// Stops the replicas reassigned away from this broker; the coordinators see each as a
    /// resignation (a follower role with no epoch), so they unload its state.
    fn stop_moved_replicas(&self, stopped: Vec<PartitionState>) -> Vec<LocalRoleChange> {
        self.replicas
            .stop_replicas(stopped)
            .into_iter()
            .map(|topic_partition| LocalRoleChange {
                topic_partition,
                leader: false,
                leader_epoch: -1,
            })
            .collect()
    }

    /// Opens the logs of `topic`'s partitions this broker is a replica of and does not
    /// host yet. The replica manager hosts a topic's partitions as a prefix `0..n`, so the
    /// partitions before the last local replica are opened too (they get no role, and
    /// serve nothing). Returns whether any log was opened.
    fn host_local_replicas(
        &self,
        topic: &crate::topics::Topic,
        image: &logbook_metadata::TopicImage,
    ) -> bool {
        let wanted_end = (0..)
            .zip(&image.partitions)
            .filter(|(_, r)| r.replicas.contains(&self.node_id))
            .map(|(p, _)| p + 1)
            .max()
            .unwrap_or(0);
        let hosted = i32::try_from(self.replicas.partitions_of(&topic.name).len()).unwrap_or(0);
        if wanted_end <= hosted {
            return false;
        }
        let config = self.topics.log_config(topic);
        match self
            .replicas
            .create_partitions_of(&topic.name, topic.id, hosted..wanted_end, &config)
        {
            Ok(_) => true,
            Err(logbook_replication::Error::InconsistentTopicId {
                topic_partition,
                found,
                wanted,
            }) => {
                tracing::info!(partition = %topic_partition, %found, %wanted, "the directory holds another topic of the same name; left closed until the replay is over");
                false
            }
            Err(e) => {
                tracing::error!(topic = %topic.name, error = %e, "cannot open the logs of local replicas");
                false
            }
        }
    }
}
