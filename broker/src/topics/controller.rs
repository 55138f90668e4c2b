//! The registry as a view of the metadata image (a broker in a cluster, or a single node
//! on its own quorum): changes go to the controller, which commits them to the metadata
//! log; the publisher then applies the committed image here ([`Topics::apply_image`]).
//! Every change answers only after this broker's image shows it (read your writes).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use logbook_controller::quorum::{AlterConfigOp, CreatableTopic, QuorumError};
use logbook_metadata::{ConfigResource, MetadataImage};
use logbook_replication::ReplicaManager;
use parking_lot::{Mutex, RwLock};

use super::{is_internal, NewTopic, Topic, TopicError, Topics, METADATA_DIR};
use crate::broker_config::DynamicBrokerConfigs;
use crate::cluster::ClusterContext;
use crate::topic_config::{BrokerDefaults, TopicConfig};

impl Topics {
    /// An empty registry that the metadata publisher fills from the image of `cluster`.
    /// Nothing is read from `topics.json` (migration moved it into the metadata log) and
    /// no directory is removed until [`Topics::remove_orphans_after_catch_up`].
    ///
    /// # Errors
    /// The metadata directory cannot be created.
    pub fn open_in_cluster(
        data_dir: &Path,
        replicas: Arc<ReplicaManager>,
        defaults: BrokerDefaults,
        partitions_max: i32,
        cluster: Arc<ClusterContext>,
    ) -> Result<Self, TopicError> {
        std::fs::create_dir_all(data_dir.join(METADATA_DIR))?;
        Ok(Topics {
            data_dir: data_dir.to_path_buf(),
            cluster_id: RwLock::new(String::new()),
            cluster: Some(cluster),
            by_name: RwLock::new(HashMap::new()),
            by_id: RwLock::new(HashMap::new()),
            admin: Mutex::new(()),
            replicas,
            defaults,
            partitions_max,
            partitions_total_max: u64::MAX,
        })
    }

    /// The cluster this registry is a view of (`None`: a registry of its own).
    #[must_use]
    pub fn cluster(&self) -> Option<&Arc<ClusterContext>> {
        self.cluster.as_ref()
    }

    /// The image this registry shows (`None` without a cluster).
    #[must_use]
    pub fn image(&self) -> Option<MetadataImage> {
        self.cluster.as_ref().map(|c| c.metadata.image())
    }

    /// Makes the registry show `image`: topics, partition counts, config overrides, the
    /// dynamic broker configs and the cluster id. Returns the topics that are gone (by name;
    /// a topic recreated under the same name with a new id counts as gone), whose logs the
    /// publisher deletes. Called by the metadata publisher only.
    pub(crate) fn apply_image(&self, image: &MetadataImage, node_id: i32) -> Vec<String> {
        let old = self.by_name.read().clone();
        let mut by_name = HashMap::new();
        let mut by_id = HashMap::new();
        for t in image.topics() {
            let overrides = image.topic_configs(&t.name);
            let count = i32::try_from(t.partitions.len()).unwrap_or(i32::MAX);
            let kept = old.get(&t.name).filter(|o| {
                o.id == t.id && o.partition_count == count && o.config.overrides() == overrides
            });
            let topic = kept.cloned().unwrap_or_else(|| {
                let config = TopicConfig::from_map(overrides).unwrap_or_else(|e| {
                    tracing::error!(topic = %t.name, error = %e, "committed topic config is invalid here; using the defaults");
                    TopicConfig::default()
                });
                Arc::new(Topic {
                    name: t.name.clone(),
                    id: t.id,
                    partition_count: count,
                    config,
                })
            });
            by_id.insert(topic.id, Arc::clone(&topic));
            by_name.insert(topic.name.clone(), topic);
        }
        let gone = old
            .values()
            .filter(|o| by_name.get(&o.name).is_none_or(|n| n.id != o.id))
            .map(|o| o.name.clone())
            .collect();
        *self.by_id.write() = by_id;
        *self.by_name.write() = by_name;
        let dynamic = DynamicBrokerConfigs {
            node: image.broker_configs(node_id).clone(),
            cluster_default: image.cluster_default_configs().clone(),
        };
        if self.defaults.dynamic() != dynamic {
            self.defaults.set_dynamic(dynamic);
        }
        if let Some(id) = image.cluster_id() {
            if *self.cluster_id.read() != id {
                *self.cluster_id.write() = id.to_string();
            }
        }
        gone
    }

    /// The log config of `topic` (its overrides on the broker defaults).
    #[must_use]
    pub fn log_config(&self, topic: &Topic) -> logbook_storage::LogConfig {
        topic.config.log_config(&self.defaults)
    }

    /// Removes (single node) or renames `-stray` (cluster) the partition directories no
    /// topic of the applied image names. Call only once the image has caught up with the
    /// controller: a stale image would take live replicas for orphans.
    ///
    /// # Errors
    /// Reading the data dir, removing or renaming a directory.
    pub fn remove_orphans_after_catch_up(&self) -> Result<(), TopicError> {
        let known: HashSet<String> = self
            .all()
            .iter()
            .flat_map(|t| (0..t.partition_count).map(move |p| format!("{}-{p}", t.name)))
            .collect();
        self.remove_orphans(&known)
    }

    /// Checks, before the controller commits anything, that this broker can create the
    /// directories of partitions `range` of `name` (a path taken by a file fails the whole
    /// request, as a half-created topic would otherwise stay in the metadata with
    /// partitions no broker can host).
    ///
    /// # Errors
    /// `Io` (KAFKA_STORAGE_ERROR) naming the path in the way.
    pub(super) fn check_partition_dirs(
        &self,
        name: &str,
        range: std::ops::Range<i32>,
    ) -> Result<(), TopicError> {
        for index in range {
            let dir = self.replicas.log_dir(name, index);
            if std::fs::symlink_metadata(&dir).is_ok_and(|m| !m.is_dir()) {
                return Err(TopicError::Io(std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a partition directory", dir.display()),
                )));
            }
        }
        Ok(())
    }

    /// Creation through the controller, after the broker's own validation.
    pub(super) fn create_through_controller(
        &self,
        cluster: &ClusterContext,
        new: NewTopic<'_>,
        assignment: &[Vec<i32>],
    ) -> Result<Arc<Topic>, TopicError> {
        self.check_partition_dirs(new.name, 0..new.partitions)?;
        let internal = is_internal(new.name);
        let replication_factor = match new.name {
            super::GROUP_METADATA_TOPIC_NAME => cluster.offsets_topic_replication_factor,
            super::TRANSACTION_STATE_TOPIC_NAME => cluster.transaction_state_replication_factor,
            _ => new.replication_factor,
        };
        let topic = creatable(&new, replication_factor, internal, assignment);
        let created = create_one(cluster, topic, false)?;
        if !cluster.wait_for_controller_offset() {
            return Err(TopicError::MetadataTimeout);
        }
        tracing::info!(topic = %new.name, id = %created.topic_id, partitions = created.num_partitions, replication_factor = created.replication_factor, "created topic");
        self.get_by_id(&created.topic_id)
            .ok_or(TopicError::MetadataTimeout)
    }
}

/// One topic's CreateTopics on the controller (or only its validation).
fn create_one(
    cluster: &ClusterContext,
    topic: CreatableTopic,
    validate_only: bool,
) -> Result<logbook_controller::quorum::CreatedTopic, TopicError> {
    let results = cluster
        .block_on(
            cluster
                .controller()
                .map_err(from_quorum)?
                .create_topics(vec![topic], validate_only),
        )
        .ok_or(TopicError::MetadataTimeout)?
        .map_err(from_quorum)?;
    match results.into_iter().next() {
        Some((_, result)) => result.map_err(from_quorum),
        None => Err(TopicError::MetadataTimeout),
    }
}

/// The controller's form of a creation.
fn creatable(
    new: &NewTopic<'_>,
    replication_factor: i16,
    internal: bool,
    assignment: &[Vec<i32>],
) -> CreatableTopic {
    CreatableTopic {
        name: new.name.to_string(),
        num_partitions: new.partitions,
        replication_factor,
        cap_replication_factor: internal,
        configs: new
            .config
            .overrides()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        assignment: assignment.to_vec(),
    }
}

/// A validate-only creation through the controller, which checks a manual assignment's
/// brokers against its image.
pub(super) fn validate_assignment(
    cluster: &ClusterContext,
    new: &NewTopic<'_>,
    assignment: &[Vec<i32>],
) -> Result<(), TopicError> {
    let topic = creatable(new, new.replication_factor, false, assignment);
    create_one(cluster, topic, true).map(drop)
}

/// CreatePartitions through the controller.
pub(super) fn add_partitions(
    cluster: &ClusterContext,
    name: &str,
    total: i32,
    assignment: &[Vec<i32>],
) -> Result<(), TopicError> {
    let results = cluster
        .block_on(
            cluster
                .controller()
                .map_err(from_quorum)?
                .create_partitions(vec![logbook_controller::quorum::NewPartitions {
                    name: name.to_string(),
                    count: total,
                    assignment: assignment.to_vec(),
                }]),
        )
        .ok_or(TopicError::MetadataTimeout)?
        .map_err(from_quorum)?;
    for (_, result) in results {
        result.map_err(from_quorum)?;
    }
    if !cluster.wait_for_controller_offset() {
        return Err(TopicError::MetadataTimeout);
    }
    tracing::info!(topic = %name, to = total, "added partitions");
    Ok(())
}

/// DeleteTopics through the controller.
pub(super) fn delete(cluster: &ClusterContext, name: &str) -> Result<(), TopicError> {
    let results = cluster
        .block_on(
            cluster
                .controller()
                .map_err(from_quorum)?
                .delete_topics(vec![name.to_string()]),
        )
        .ok_or(TopicError::MetadataTimeout)?
        .map_err(from_quorum)?;
    for (_, result) in results {
        result.map_err(from_quorum)?;
    }
    if !cluster.wait_for_controller_offset() {
        return Err(TopicError::MetadataTimeout);
    }
    tracing::info!(topic = %name, "deleted topic");
    Ok(())
}

/// Replaces the dynamic configs of `resource` (`current` → `wanted`, both validated)
/// through the controller: the differences become SET and DELETE operations.
pub(super) fn alter_configs(
    cluster: &ClusterContext,
    resource: ConfigResource,
    current: &BTreeMap<String, String>,
    wanted: &BTreeMap<String, String>,
) -> Result<(), TopicError> {
    let mut ops: Vec<AlterConfigOp> = wanted
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(*v))
        .map(|(k, v)| AlterConfigOp::Set(k.clone(), v.clone()))
        .collect();
    ops.extend(
        current
            .keys()
            .filter(|k| !wanted.contains_key(*k))
            .map(|k| AlterConfigOp::Delete(k.clone())),
    );
    if ops.is_empty() {
        return Ok(());
    }
    let results = cluster
        .block_on(
            cluster
                .controller()
                .map_err(from_quorum)?
                .incremental_alter_configs(vec![(resource.clone(), ops)]),
        )
        .ok_or(TopicError::MetadataTimeout)?
        .map_err(from_quorum)?;
    for (_, result) in results {
        result.map_err(from_quorum)?;
    }
    if !cluster.wait_for_controller_offset() {
        return Err(TopicError::MetadataTimeout);
    }
    tracing::info!(resource = %resource.name, kind = ?resource.resource_type, "altered configs");
    Ok(())
}

/// The registry's error for a controller's: the cases clients already know from a single
/// node keep their `TopicError` (and message); the rest are the controller's own.
fn from_quorum(e: QuorumError) -> TopicError {
    match e {
        QuorumError::TopicAlreadyExists { name } => TopicError::AlreadyExists(name),
        QuorumError::UnknownTopicOrPartition { name, .. } => TopicError::Unknown(name),
        QuorumError::InvalidPartitions { partitions, .. } => {
            TopicError::InvalidPartitions(partitions)
        }
        QuorumError::InvalidReplicationFactor {
            replication_factor,
            usable_brokers,
        } => TopicError::InvalidReplicationFactor {
            factor: replication_factor,
            brokers: usable_brokers,
        },
        other => TopicError::Controller(other),
    }
}
