//! Topic metadata: which topics exist, their ids, partition counts and config overrides.
//! The partitions' logs belong to the `ReplicaManager`; this registry only asks it to
//! host or drop them as topics come and go.
//!
//! In a broker (`Topics::open_in_cluster`) the registry is a view of the metadata image:
//! creations, deletions and config changes go to the controller and answer once the local
//! image shows them (`topics/controller.rs`), and the `MetadataPublisher` applies the image
//! here. A registry of its own (`Topics::open`, unit tests) persists itself as one JSON
//! document in `<data-dir>/__cluster_metadata/topics.json`, replaced atomically (write
//! temp, fsync, rename, fsync dir), with its order of operations keeping disk and registry
//! consistent across crashes: a created topic's logs are opened before the registry names
//! it; a deleted topic leaves the registry before its directories go, and any partition
//! directory the registry does not name is removed at start. A broker finding such a file
//! from before the quorum migrates it into the metadata log (`cluster/migration.rs`).
//!
//! Creation is all-or-nothing and bounded: the broker-wide partition limit
//! (`partition_budget`) is checked before anything is created, and a creation that fails
//! half-way removes the partitions it already opened, so no directory is left behind and
//! the registry is unchanged. Internal topics ([`INTERNAL_TOPICS`]) are created only by
//! their coordinators ([`Topics::create_internal`]), never by clients.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use logbook_replication::ReplicaManager;
use parking_lot::{Mutex, RwLock};
use uuid::Uuid;

use crate::broker_config::{validate_broker_layer, BrokerScope, DynamicBrokerConfigs};
use crate::topic_config::{BrokerDefaults, ConfigError, TopicConfig};

/// Longest legal topic name (Kafka's limit).
pub const TOPIC_NAME_BYTES_MAX: usize = 249;

/// Directory of broker metadata files inside the data dir.
pub const METADATA_DIR: &str = "__cluster_metadata";
const TOPICS_FILE: &str = "topics.json";
/// Dynamic broker configs (AlterConfigs on BROKER resources), in the metadata dir.
const BROKER_CONFIGS_FILE: &str = "broker_configs.json";

/// Replaces `dir/name` with `bytes` crash-safely: write a temporary file, fsync it, rename
/// it over the old one, fsync the directory. A crash leaves the old or the new file.
fn checkpoint(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    logbook_common::replace(&dir.join(name), |out| out.write_all(bytes))
}

/// Kafka's internal topics (its `Topic.INTERNAL_TOPICS`): the only topics reported as
/// internal, created only by their coordinators with the coordinators' rules, and
/// refused to clients' Produce, CreateTopics, CreatePartitions and DeleteTopics. Other
/// names starting with `__` are ordinary user topics.
pub const INTERNAL_TOPICS: [&str; 3] = [
    GROUP_METADATA_TOPIC_NAME,
    TRANSACTION_STATE_TOPIC_NAME,
    "__share_group_state",
];

/// The coordinators' internal topics (their names are theirs: Kafka's `Topic` constants).
pub use logbook_coordinator::{GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME};

/// Whether `name` is one of Kafka's [`INTERNAL_TOPICS`].
#[must_use]
pub fn is_internal(name: &str) -> bool {
    INTERNAL_TOPICS.contains(&name)
}

/// Most partitions one CreateTopics or CreatePartitions may add in total (Kafka's
/// controller caps both at 10,000: `MAX_PARTITIONS_PER_BATCH`, `MAX_RECORDS_PER_USER_OP`),
/// so one request holds the admin lock for a bounded time.
pub const PARTITIONS_PER_REQUEST_MAX: u64 = 10_000;

/// One topic: metadata only (its partitions' logs are the `ReplicaManager`'s).
pub struct Topic {
    /// The topic's name.
    pub name: String,
    /// The topic's id (KIP-516), stable across restarts.
    pub id: Uuid,
    /// Number of partitions, numbered `0..partition_count`.
    pub partition_count: i32,
    /// Config overrides.
    pub config: TopicConfig,
}

/// Why a topic operation failed; mapped to Kafka codes in `errors`.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    /// CreateTopics of a name that exists (Kafka's message, which `kafka-topics.sh` prints).
    #[error("Topic '{0}' already exists.")]
    AlreadyExists(String),
    /// Illegal name; the message is Kafka's (`Topic.validate`), which tools print verbatim.
    #[error("Topic name is invalid: {reason}")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// What is wrong with it, in Kafka's words.
        reason: String,
    },
    /// The name differs from an existing topic's only by `.` against `_` (Kafka's
    /// `Topic.hasCollision`: metric names replace `.` with `_`, so the two would share
    /// them); Kafka's message.
    #[error("Topic '{name}' collides with existing topic: {existing}")]
    Collides {
        /// The name asked for.
        name: String,
        /// The existing topic it collides with.
        existing: String,
    },
    /// Partition count ≤ 0 or above the limit.
    #[error("invalid partition count {0}")]
    InvalidPartitions(i32),
    /// Replication factor ≤ 0 or above the number of brokers (Kafka's messages).
    #[error("{}", replication_factor_message(*factor, *brokers))]
    InvalidReplicationFactor {
        /// Requested factor.
        factor: i16,
        /// Brokers available.
        brokers: usize,
    },
    /// Manual assignment naming unknown brokers or inconsistent partitions.
    #[error("invalid replica assignment: {0}")]
    InvalidReplicaAssignment(String),
    /// Bad config.
    #[error(transparent)]
    InvalidConfig(#[from] ConfigError),
    /// No such topic.
    #[error("unknown topic '{0}'")]
    Unknown(String),
    /// A client asked to create, grow, delete or auto-create an internal topic.
    #[error("'{0}' is an internal topic: only its coordinator creates and changes it")]
    Internal(String),
    /// The request would take the broker past its partition limit.
    #[error(
        "creating {requested} partition(s) would exceed the broker's partition limit: \
         {in_use} in use, partitions.max={limit} (--partitions-max; each partition holds \
         one file descriptor)"
    )]
    PartitionLimit {
        /// Partitions the request would add.
        requested: u64,
        /// Partitions the broker hosts now.
        in_use: u64,
        /// The limit (`Limits::partitions_max`, or derived from `RLIMIT_NOFILE`).
        limit: u64,
    },
    /// One CreateTopics or CreatePartitions asked for more than
    /// [`PARTITIONS_PER_REQUEST_MAX`] partitions.
    #[error(
        "excessively large number of partitions per request: {requested} requested, \
         at most {PARTITIONS_PER_REQUEST_MAX}"
    )]
    RequestTooLarge {
        /// Partitions the whole request asked for.
        requested: u64,
    },
    /// Storage or metadata I/O failed.
    #[error(transparent)]
    Replication(#[from] logbook_replication::Error),
    /// The controller refused or failed the operation.
    #[error(transparent)]
    Controller(logbook_controller::quorum::QuorumError),
    /// The controller did not answer, or its change did not reach this broker's metadata,
    /// within the admin timeout.
    #[error("the controller did not complete the operation in time")]
    MetadataTimeout,
    /// The registry file could not be written.
    #[error("metadata I/O: {0}")]
    Io(#[from] std::io::Error),
}

/// Kafka's message for an impossible replication factor (its `ReplicationControlManager`).
fn replication_factor_message(factor: i16, brokers: usize) -> String {
    if factor <= 0 {
        "Replication factor must be larger than 0, or -1 to use the default value.".to_string()
    } else {
        format!(
            "Unable to replicate the partition {factor} time(s): The target replication factor \
             of {factor} cannot be reached because only {brokers} broker(s) are registered."
        )
    }
}

/// What CreateTopics asks for, after defaults are applied by the handler.
pub struct NewTopic<'a> {
    /// Name to create.
    pub name: &'a str,
    /// Partition count.
    pub partitions: i32,
    /// Replication factor.
    pub replication_factor: i16,
    /// Validated configs.
    pub config: TopicConfig,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct PersistedTopic {
    name: String,
    id: Uuid,
    partitions: i32,
    config: TopicConfig,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct PersistedRegistry {
    cluster_id: String,
    topics: Vec<PersistedTopic>,
}

/// The topic registry of this broker.
pub struct Topics {
    data_dir: PathBuf,
    cluster_id: RwLock<String>,
    /// The controller and image this registry is a view of; `None` for a registry of its
    /// own (`topics.json`; unit tests).
    cluster: Option<Arc<crate::cluster::ClusterContext>>,
    by_name: RwLock<HashMap<String, Arc<Topic>>>,
    by_id: RwLock<HashMap<Uuid, Arc<Topic>>>,
    /// Serializes create and delete so the registry file is written in order.
    admin: Mutex<()>,
    replicas: Arc<ReplicaManager>,
    defaults: BrokerDefaults,
    partitions_max: i32,
    /// Partitions this broker may host in total (`partition_budget::partitions_max`).
    partitions_total_max: u64,
}

/// Checks a topic name as Kafka does: 1..=249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
///
/// # Errors
/// The reason the name is illegal.
pub fn validate_topic_name(name: &str) -> Result<(), TopicError> {
    let invalid = |reason: String| {
        Err(TopicError::InvalidName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("the empty string is not allowed".to_string());
    }
    if name == METADATA_DIR {
        // KRaft's metadata log is `__cluster_metadata-0`; a topic of that name would
        // share its directory.
        return invalid(format!("'{name}' is reserved for the cluster metadata log"));
    }
    if name == "." || name == ".." {
        return invalid(format!("'{name}' is not allowed"));
    }
    if name.len() > TOPIC_NAME_BYTES_MAX {
        return invalid(format!(
            "the length of '{name}' is longer than the max allowed length {TOPIC_NAME_BYTES_MAX}"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return invalid(format!(
            "'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

impl Topics {
    /// Loads the registry from `data_dir`, opening (and recovering) every partition log, and
    /// removes partition directories the registry does not name.
    ///
    /// # Errors
    /// Unreadable registry or a log that cannot be opened.
    pub fn open(
        data_dir: &Path,
        replicas: Arc<ReplicaManager>,
        defaults: BrokerDefaults,
        partitions_max: i32,
    ) -> Result<Self, TopicError> {
        std::fs::create_dir_all(data_dir.join(METADATA_DIR))?;
        let path = data_dir.join(METADATA_DIR).join(TOPICS_FILE);
        let registry = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice::<PersistedRegistry>(&bytes).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => PersistedRegistry {
                cluster_id: new_cluster_id(),
                topics: Vec::new(),
            },
            Err(e) => return Err(e.into()),
        };
        let broker_configs_path = data_dir.join(METADATA_DIR).join(BROKER_CONFIGS_FILE);
        match std::fs::read(&broker_configs_path) {
            Ok(bytes) => defaults.set_dynamic(
                serde_json::from_slice::<DynamicBrokerConfigs>(&bytes).map_err(|e| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{}: {e}", broker_configs_path.display()),
                    )
                })?,
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
        let topics = Topics {
            data_dir: data_dir.to_path_buf(),
            cluster_id: RwLock::new(registry.cluster_id),
            cluster: None,
            by_name: RwLock::new(HashMap::new()),
            by_id: RwLock::new(HashMap::new()),
            admin: Mutex::new(()),
            replicas,
            defaults,
            partitions_max,
            partitions_total_max: u64::MAX,
        };
        let mut known_dirs = std::collections::HashSet::new();
        for t in registry.topics {
            for p in 0..t.partitions {
                known_dirs.insert(format!("{}-{p}", t.name));
            }
            let topic = topics.open_topic(&t.name, t.id, t.partitions, t.config)?;
            topics.insert(topic);
        }
        topics.remove_orphans(&known_dirs)?;
        topics.persist()?;
        Ok(topics)
    }

    fn remove_orphans(&self, known: &std::collections::HashSet<String>) -> Result<(), TopicError> {
        for entry in std::fs::read_dir(&self.data_dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == METADATA_DIR
                || name == CLUSTER_METADATA_LOG_DIR
                || name.ends_with(STRAY_SUFFIX)
                || !entry.file_type()?.is_dir()
            {
                continue;
            }
            let looks_like_partition = name.rsplit_once('-').is_some_and(|(topic, p)| {
                validate_topic_name(topic).is_ok() && p.parse::<u32>().is_ok()
            });
            if !looks_like_partition {
                continue;
            }
            // The topic id the directory records (Kafka's partition.metadata): one the image
            // does not hold is a deleted topic's for sure, even under a name in use again.
            let recorded = logbook_replication::partition_metadata::read(&entry.path())
                .ok()
                .flatten();
            let of_deleted_topic = recorded.is_some_and(|id| self.get_by_id(&id).is_none());
            if known.contains(&name) && !of_deleted_topic {
                continue;
            }
            if of_deleted_topic {
                tracing::warn!(dir = %name, "removing partition directory of a deleted topic");
                std::fs::remove_dir_all(entry.path())?;
            } else if self.cluster.as_ref().is_some_and(|c| !c.sole_voter) {
                // A replica the image does not name may still be the only copy of data
                // another broker lost: keep it aside, as KRaft does.
                let stray = self.data_dir.join(format!("{name}{STRAY_SUFFIX}"));
                tracing::warn!(dir = %name, "renaming partition directory of a topic not in the metadata to -stray");
                std::fs::rename(entry.path(), stray)?;
            } else {
                tracing::warn!(dir = %name, "removing partition directory of a topic not in the registry");
                std::fs::remove_dir_all(entry.path())?;
            }
        }
        Ok(())
    }

    fn open_topic(
        &self,
        name: &str,
        id: Uuid,
        partitions: i32,
        config: TopicConfig,
    ) -> Result<Arc<Topic>, TopicError> {
        self.open_partitions(name, 0..partitions, &config)?;
        Ok(Arc::new(Topic {
            name: name.to_string(),
            id,
            partition_count: partitions,
            config,
        }))
    }

    /// Has the replica manager open the partitions `range` of topic `name`, all or none:
    /// when one fails, those already opened are deleted again, and so is the failed one's
    /// directory if this call created it, so nothing is left on disk.
    fn open_partitions(
        &self,
        name: &str,
        range: std::ops::Range<i32>,
        config: &TopicConfig,
    ) -> Result<(), TopicError> {
        let log_config = config.log_config(&self.defaults);
        self.replicas
            .create_partitions(name, range, &log_config)
            .map(|_| ())
            .map_err(TopicError::from)
    }

    /// Partitions this broker hosts now, over all topics.
    fn partitions_in_use(&self) -> u64 {
        self.by_name
            .read()
            .values()
            .map(|t| u64::try_from(t.partition_count).unwrap_or(u64::MAX))
            .sum()
    }

    /// Sets the broker-wide partition limit (see `partition_budget`). Topics opened
    /// before keep their partitions even if they exceed it; only growth is refused.
    #[must_use]
    pub fn with_partitions_total_max(mut self, max: u64) -> Self {
        let in_use = self.partitions_in_use();
        if max < in_use {
            tracing::warn!(
                in_use,
                partitions_max = max,
                "the broker hosts more partitions than its limit; no partition can be added"
            );
        }
        self.partitions_total_max = max;
        self
    }

    /// Checks that `requested` more partitions fit in the broker-wide limit, before
    /// anything is created. Call with the admin lock held for a decision that holds.
    ///
    /// # Errors
    /// `PartitionLimit` naming the limit.
    pub fn check_partition_budget(&self, requested: u64) -> Result<(), TopicError> {
        let in_use = self.partitions_in_use();
        if in_use.saturating_add(requested) > self.partitions_total_max {
            return Err(TopicError::PartitionLimit {
                requested,
                in_use,
                limit: self.partitions_total_max,
            });
        }
        Ok(())
    }

    /// Checks the partitions one CreateTopics or CreatePartitions asks for in total
    /// against the per-request cap and the broker-wide limit, before any topic of it is
    /// created or grown (Kafka's controller refuses the whole request the same way).
    ///
    /// # Errors
    /// `RequestTooLarge` or `PartitionLimit`.
    pub fn check_request_partitions(&self, requested: u64) -> Result<(), TopicError> {
        if requested > PARTITIONS_PER_REQUEST_MAX {
            return Err(TopicError::RequestTooLarge { requested });
        }
        self.check_partition_budget(requested)
    }

    fn insert(&self, topic: Arc<Topic>) {
        self.by_id.write().insert(topic.id, Arc::clone(&topic));
        self.by_name.write().insert(topic.name.clone(), topic);
    }

    fn persist(&self) -> Result<(), TopicError> {
        let mut topics: Vec<PersistedTopic> = self
            .by_name
            .read()
            .values()
            .map(|t| PersistedTopic {
                name: t.name.clone(),
                id: t.id,
                partitions: t.partition_count,
                config: t.config.clone(),
            })
            .collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        if self.cluster.is_some() {
            return Ok(());
        }
        let registry = PersistedRegistry {
            cluster_id: self.cluster_id.read().clone(),
            topics,
        };
        let bytes = serde_json::to_vec_pretty(&registry)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        checkpoint(&self.data_dir.join(METADATA_DIR), TOPICS_FILE, &bytes)?;
        Ok(())
    }

    /// Changes a topic's config overrides: `alter` computes the new set from the current
    /// one; the result is validated, then (unless `validate_only`) recorded in the
    /// registry and applied to the topic's live partitions, so the next produce, roll and
    /// retention check use it. This is the one place a live topic's config changes.
    ///
    /// # Errors
    /// `InvalidName`, `InvalidConfig` (from `alter` or validation), `Unknown` (checked after
    /// validation, as Kafka's controller does), I/O writing the registry.
    pub fn alter_config(
        &self,
        name: &str,
        validate_only: bool,
        alter: impl FnOnce(&TopicConfig) -> Result<BTreeMap<String, String>, ConfigError>,
    ) -> Result<(), TopicError> {
        validate_topic_name(name)?;
        let _admin = self.admin.lock();
        let topic = self.get(name);
        let current = topic.as_ref().map(|t| t.config.clone()).unwrap_or_default();
        let config = TopicConfig::from_map(&alter(&current)?)?;
        let topic = topic.ok_or_else(|| TopicError::Unknown(name.to_string()))?;
        if validate_only {
            return Ok(());
        }
        if let Some(cluster) = &self.cluster {
            return controller::alter_configs(
                cluster,
                logbook_metadata::ConfigResource::topic(name),
                topic.config.overrides(),
                config.overrides(),
            );
        }
        let altered = Arc::new(Topic {
            name: topic.name.clone(),
            id: topic.id,
            partition_count: topic.partition_count,
            config,
        });
        self.insert(Arc::clone(&altered));
        if let Err(e) = self.persist() {
            self.insert(topic);
            return Err(e);
        }
        self.replicas
            .set_config(name, &altered.config.log_config(&self.defaults));
        tracing::info!(topic = %name, configs = ?altered.config.overrides(), "altered topic config");
        Ok(())
    }

    /// Changes a dynamic broker layer (`scope`): `alter` computes the new layer from the
    /// current one; the result is validated, then (unless `validate_only`) persisted and
    /// applied to every live partition whose topic does not override the changed configs.
    ///
    /// # Errors
    /// `InvalidConfig` (from `alter` or validation), I/O writing the file.
    pub fn alter_broker_config(
        &self,
        scope: BrokerScope,
        validate_only: bool,
        alter: impl FnOnce(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, ConfigError>,
    ) -> Result<(), TopicError> {
        let _admin = self.admin.lock();
        let mut dynamic = self.defaults.dynamic();
        let layer = alter(dynamic.layer(scope))?;
        validate_broker_layer(&layer)?;
        if validate_only {
            return Ok(());
        }
        if let Some(cluster) = &self.cluster {
            let resource = match scope {
                BrokerScope::Node => logbook_metadata::ConfigResource::broker(cluster.node_id),
                BrokerScope::ClusterDefault => logbook_metadata::ConfigResource::cluster_default(),
            };
            return controller::alter_configs(cluster, resource, dynamic.layer(scope), &layer);
        }
        *dynamic.layer_mut(scope) = layer;
        let bytes = serde_json::to_vec_pretty(&dynamic)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        checkpoint(
            &self.data_dir.join(METADATA_DIR),
            BROKER_CONFIGS_FILE,
            &bytes,
        )?;
        self.defaults.set_dynamic(dynamic);
        for topic in self.all() {
            self.replicas
                .set_config(&topic.name, &topic.config.log_config(&self.defaults));
        }
        tracing::info!(?scope, "altered dynamic broker config");
        Ok(())
    }

    /// The cluster id reported in Metadata, stable across restarts.
    #[must_use]
    pub fn cluster_id(&self) -> String {
        self.cluster_id.read().clone()
    }

    /// Broker-wide config defaults.
    #[must_use]
    pub fn defaults(&self) -> &BrokerDefaults {
        &self.defaults
    }

    /// The topic named `name`, if it exists.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.by_name.read().get(name).cloned()
    }

    /// The topic with id `id`, if it exists.
    #[must_use]
    pub fn get_by_id(&self, id: &Uuid) -> Option<Arc<Topic>> {
        self.by_id.read().get(id).cloned()
    }

    /// All topics, sorted by name.
    #[must_use]
    pub fn all(&self) -> Vec<Arc<Topic>> {
        let mut all: Vec<_> = self.by_name.read().values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// Checks a creation without performing it (CreateTopics validate-only, and the first
    /// half of a real creation).
    ///
    /// # Errors
    /// The first reason the topic cannot be created.
    pub fn validate_new(&self, new: &NewTopic<'_>) -> Result<(), TopicError> {
        self.validate_assigned(new, &[])
    }

    /// [`Topics::validate_new`] for a topic with a manual replica assignment (partition
    /// `i`'s replicas): the controller checks the brokers it names, in a validate-only
    /// CreateTopics too, so a bad assignment is refused as a real creation would be.
    ///
    /// # Errors
    /// As [`Topics::validate_new`]; the controller's `InvalidReplicaAssignment`.
    pub fn validate_assigned(
        &self,
        new: &NewTopic<'_>,
        assignment: &[Vec<i32>],
    ) -> Result<(), TopicError> {
        self.validate_client_topic(new, !assignment.is_empty())?;
        match &self.cluster {
            Some(cluster) if !assignment.is_empty() => {
                controller::validate_assignment(cluster, new, assignment)
            }
            _ => Ok(()),
        }
    }

    /// The broker's own checks of a client's topic (the controller's come with the write).
    fn validate_client_topic(&self, new: &NewTopic<'_>, assigned: bool) -> Result<(), TopicError> {
        // An internal topic that exists already is TOPIC_ALREADY_EXISTS, as on Kafka (so a
        // "create if missing" tool sees what it expects); one that does not is refused, where
        // Kafka would create it with the client's shape and leave its coordinator on it.
        if is_internal(new.name) && self.get(new.name).is_some() {
            return Err(TopicError::AlreadyExists(new.name.to_string()));
        }
        if is_internal(new.name) {
            return Err(TopicError::Internal(new.name.to_string()));
        }
        self.validate_shape(new, assigned)?;
        self.check_partition_budget(u64::try_from(new.partitions).unwrap_or(0))
    }

    /// An existing topic whose name equals `name` once `.` and `_` are made the same
    /// (Kafka's `Topic.unifyCollisionChars`); only names holding either can collide.
    fn collision_with(&self, name: &str) -> Option<String> {
        let unify = |n: &str| n.replace('.', "_");
        if !name.contains(['.', '_']) {
            return None;
        }
        let unified = unify(name);
        self.by_name
            .read()
            .keys()
            .find(|existing| existing.as_str() != name && unify(existing) == unified)
            .map(ToString::to_string)
    }

    /// The checks every creation shares, internal or not: name, existence, partition
    /// count and replication factor (the last left to the controller for a manual
    /// assignment, which may name registered brokers that are fenced now, as Kafka allows).
    fn validate_shape(&self, new: &NewTopic<'_>, assigned: bool) -> Result<(), TopicError> {
        validate_topic_name(new.name)?;
        if self.by_name.read().contains_key(new.name) {
            return Err(TopicError::AlreadyExists(new.name.to_string()));
        }
        if let Some(existing) = self.collision_with(new.name) {
            return Err(TopicError::Collides {
                name: new.name.to_string(),
                existing,
            });
        }
        if new.partitions <= 0 || new.partitions > self.partitions_max {
            return Err(TopicError::InvalidPartitions(new.partitions));
        }
        // Registered brokers, fenced ones included, as Kafka's placer counts them: with a
        // broker down the controller still places its replicas (outside the ISR), so long
        // as one broker is active.
        let brokers = self.cluster.as_ref().map_or(1, |c| {
            let image = c.metadata.image();
            if image.unfenced_brokers().next().is_some() {
                image.brokers().count()
            } else {
                0
            }
        });
        if self.cluster.is_some() && new.replication_factor > 0 && is_internal(new.name) {
            // Internal topics are capped by the live brokers at creation (plan §3.5).
            return Ok(());
        }
        if self.cluster.is_some() && assigned && new.replication_factor > 0 {
            return Ok(());
        }
        if new.replication_factor <= 0
            || usize::try_from(new.replication_factor).unwrap_or(0) > brokers
        {
            return Err(TopicError::InvalidReplicationFactor {
                factor: new.replication_factor,
                brokers,
            });
        }
        Ok(())
    }

    /// Creates a client's topic: opens its partition logs, then records it in the
    /// registry. All or nothing: on any failure nothing is left on disk or in the registry.
    ///
    /// # Errors
    /// Validation errors (`Internal` for an internal topic's name), the partition limit,
    /// or I/O while creating logs or writing the registry.
    pub fn create(&self, new: NewTopic<'_>) -> Result<Arc<Topic>, TopicError> {
        self.create_assigned(new, &[])
    }

    /// [`Topics::create`] with a manual replica assignment (`kafka-topics.sh
    /// --replica-assignment`): partition `i`'s replicas, preferred leader first; empty lets
    /// the controller place them.
    ///
    /// # Errors
    /// As [`Topics::create`]; the controller's `InvalidReplicaAssignment`.
    pub fn create_assigned(
        &self,
        new: NewTopic<'_>,
        assignment: &[Vec<i32>],
    ) -> Result<Arc<Topic>, TopicError> {
        let _admin = self.admin.lock();
        self.validate_client_topic(&new, !assignment.is_empty())?;
        self.create_validated(new, assignment)
    }

    /// Creates an internal topic on behalf of its coordinator, which chose its partition
    /// count and configs; the same checks as [`Topics::create`] otherwise.
    ///
    /// # Errors
    /// As [`Topics::create`]; `Internal` when `new` does not name an internal topic.
    pub fn create_internal(&self, new: NewTopic<'_>) -> Result<Arc<Topic>, TopicError> {
        let _admin = self.admin.lock();
        if !is_internal(new.name) {
            return Err(TopicError::Internal(new.name.to_string()));
        }
        self.validate_shape(&new, false)?;
        self.check_partition_budget(u64::try_from(new.partitions).unwrap_or(0))?;
        self.create_validated(new, &[])
    }

    /// Creation after validation, with the admin lock held.
    fn create_validated(
        &self,
        new: NewTopic<'_>,
        assignment: &[Vec<i32>],
    ) -> Result<Arc<Topic>, TopicError> {
        if let Some(cluster) = &self.cluster {
            return self.create_through_controller(cluster, new, assignment);
        }
        let topic = self.open_topic(new.name, Uuid::new_v4(), new.partitions, new.config)?;
        // The new partition directories must survive a crash before the registry names
        // them and before any write to them is acknowledged: one fsync covers them all.
        let registered = std::fs::File::open(&self.data_dir)
            .and_then(|dir| dir.sync_all())
            .map_err(TopicError::from)
            .and_then(|()| {
                self.insert(Arc::clone(&topic));
                self.persist()
            });
        if let Err(e) = registered {
            let mut by_name = self.by_name.write();
            if by_name
                .get(new.name)
                .is_some_and(|t| Arc::ptr_eq(t, &topic))
            {
                by_name.remove(new.name);
            }
            drop(by_name);
            self.by_id.write().remove(&topic.id);
            self.replicas.delete_topic(&topic.name);
            return Err(e);
        }
        tracing::info!(topic = %topic.name, id = %topic.id, partitions = topic.partition_count, "created topic");
        Ok(topic)
    }

    /// Returns the topic, creating it with `partitions` and `replication_factor` (the
    /// broker's `num.partitions` and `default.replication.factor`, as Kafka's
    /// `AutoTopicCreationManager` creates them) if `auto_create` allows and the name is
    /// legal.
    ///
    /// # Errors
    /// `Unknown` when it does not exist and may not be created; creation errors.
    pub fn get_or_create(
        &self,
        name: &str,
        auto_create: bool,
        partitions: i32,
        replication_factor: i16,
    ) -> Result<Arc<Topic>, TopicError> {
        if let Some(t) = self.get(name) {
            return Ok(t);
        }
        if !auto_create {
            return Err(TopicError::Unknown(name.to_string()));
        }
        if is_internal(name) {
            return Err(TopicError::Internal(name.to_string()));
        }
        validate_topic_name(name)?;
        match self.create(NewTopic {
            name,
            partitions,
            replication_factor,
            config: TopicConfig::default(),
        }) {
            Err(TopicError::AlreadyExists(_)) => self
                .get(name)
                .ok_or_else(|| TopicError::Unknown(name.to_string())),
            other => other,
        }
    }

    /// Grows a topic to `total` partitions (CreatePartitions): opens the new partitions'
    /// logs, then swaps in a `Topic` holding old and new and records it in the registry.
    /// Holders of the previous `Arc<Topic>` keep seeing the old partition list.
    ///
    /// # Errors
    /// `Unknown`; `InvalidPartitions` unless `total` exceeds the current count (and is
    /// within the per-topic limit); `PartitionLimit` past the broker-wide limit;
    /// `Internal` for internal topics; I/O errors, after which the topic is unchanged and
    /// no new partition is left on disk.
    pub fn add_partitions(
        &self,
        name: &str,
        total: i32,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        self.add_partitions_assigned(name, total, None, validate_only)
    }

    /// [`Topics::add_partitions`] with a manual assignment of the new partitions (one
    /// replica list each, `kafka-topics.sh --alter --replica-assignment`), which the
    /// controller checks as Kafka's does; empty lets it place them. A validate-only
    /// request checks the assignment's shape here, not its brokers.
    ///
    /// # Errors
    /// As [`Topics::add_partitions`]; the controller's `InvalidReplicaAssignment`.
    pub fn add_partitions_assigned(
        &self,
        name: &str,
        total: i32,
        assignment: Option<&[Vec<i32>]>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let _admin = self.admin.lock();
        let topic = self
            .get(name)
            .ok_or_else(|| TopicError::Unknown(name.to_string()))?;
        if is_internal(name) {
            return Err(TopicError::Internal(name.to_string()));
        }
        let current = topic.partition_count;
        if total <= current || total > self.partitions_max {
            return Err(TopicError::InvalidPartitions(total));
        }
        self.check_partition_budget(u64::try_from(total - current).unwrap_or(0))?;
        let adding = usize::try_from(total - current).unwrap_or(0);
        // A list, even an empty one, must place every new partition (Kafka's
        // ReplicationControlManager); only a null list leaves them to the placer.
        if let Some(assignment) = assignment {
            if assignment.len() != adding {
                return Err(TopicError::InvalidReplicaAssignment(format!(
                    "Attempted to add {adding} additional partition(s), but only {} assignment(s) were specified.",
                    assignment.len()
                )));
            }
        }
        let assignment = assignment.unwrap_or_default();
        if validate_only {
            return Ok(());
        }
        if let Some(cluster) = &self.cluster {
            self.check_partition_dirs(name, current..total)?;
            return controller::add_partitions(cluster, name, total, assignment);
        }
        self.open_partitions(name, current..total, &topic.config)?;
        let grown = Arc::new(Topic {
            name: topic.name.clone(),
            id: topic.id,
            partition_count: total,
            config: topic.config.clone(),
        });
        let registered = std::fs::File::open(&self.data_dir)
            .and_then(|dir| dir.sync_all())
            .map_err(TopicError::from)
            .and_then(|()| {
                self.insert(grown);
                self.persist()
            });
        if let Err(e) = registered {
            self.insert(topic);
            self.replicas.remove_partitions(name, current..total);
            return Err(e);
        }
        tracing::info!(topic = %name, from = current, to = total, "added partitions");
        Ok(())
    }

    /// Deletes a topic: removes it from the registry, then its data from disk.
    ///
    /// # Errors
    /// `Unknown` if it does not exist; `Internal` for an existing internal topic, whose
    /// coordinator holds it open; I/O errors.
    pub fn delete(&self, name: &str) -> Result<Arc<Topic>, TopicError> {
        let _admin = self.admin.lock();
        if is_internal(name) && self.get(name).is_some() {
            return Err(TopicError::Internal(name.to_string()));
        }
        if let Some(cluster) = &self.cluster {
            let topic = self
                .get(name)
                .ok_or_else(|| TopicError::Unknown(name.to_string()))?;
            controller::delete(cluster, name)?;
            return Ok(topic);
        }
        let topic = self
            .by_name
            .write()
            .remove(name)
            .ok_or_else(|| TopicError::Unknown(name.to_string()))?;
        self.by_id.write().remove(&topic.id);
        self.persist()?;
        self.replicas.delete_topic(&topic.name);
        tracing::info!(topic = %topic.name, "deleted topic");
        Ok(topic)
    }

    /// The replica manager hosting the topics' partitions.
    #[must_use]
    pub fn replicas(&self) -> &Arc<ReplicaManager> {
        &self.replicas
    }
}

/// The controller's metadata log directory in the data dir (`__cluster_metadata-0`), which
/// looks like a partition directory but never is one.
pub const CLUSTER_METADATA_LOG_DIR: &str = "__cluster_metadata-0";

/// Suffix of a partition directory set aside because the metadata does not name it.
pub const STRAY_SUFFIX: &str = "-stray";

fn new_cluster_id() -> String {
    // Kafka cluster ids are 22-character URL-safe base64 of a UUID.
    let id = Uuid::new_v4();
    let mut s = String::with_capacity(22);
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let value = id.as_u128();
    for i in 0..22 {
        let shift = 128u32.saturating_sub(6 * (i + 1));
        let idx = usize::try_from((value >> shift) & 0x3f).unwrap_or(0);
        s.push(char::from(ALPHABET[idx]));
    }
    s
}

mod controller;

#[cfg(test)]
mod tests;
