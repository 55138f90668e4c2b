//! Topic metadata: which topics exist, their ids, partitions and config overrides.
//!
//! The registry is persisted as one JSON document in `<data-dir>/__cluster_metadata/topics.json`,
//! replaced atomically (write temp, fsync, rename, fsync dir). Order of operations keeps disk
//! and registry consistent across crashes: a created topic's logs are opened before the
//! registry names it; a deleted topic leaves the registry before its directories go, and any
//! partition directory the registry does not name is removed at start.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use logbook_replication::{Flusher, Partition, TopicPartition};
use parking_lot::{Mutex, RwLock};
use uuid::Uuid;

use crate::topic_config::{BrokerDefaults, ConfigError, TopicConfig};

/// Longest legal topic name (Kafka's limit).
pub const TOPIC_NAME_BYTES_MAX: usize = 249;

/// Directory of broker metadata files inside the data dir.
pub const METADATA_DIR: &str = "__cluster_metadata";
const TOPICS_FILE: &str = "topics.json";

/// One topic and its partitions.
pub struct Topic {
    /// The topic's name.
    pub name: String,
    /// The topic's id (KIP-516), stable across restarts.
    pub id: Uuid,
    /// Partitions by index.
    pub partitions: Vec<Arc<Partition>>,
    /// Config overrides.
    pub config: TopicConfig,
}

/// Why a topic operation failed; mapped to Kafka codes in `errors`.
#[derive(Debug, thiserror::Error)]
pub enum TopicError {
    /// CreateTopics of a name that exists.
    #[error("topic '{0}' already exists")]
    AlreadyExists(String),
    /// Illegal name.
    #[error("invalid topic name '{name}': {reason}")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Partition count ≤ 0 or above the limit.
    #[error("invalid partition count {0}")]
    InvalidPartitions(i32),
    /// Replication factor ≤ 0 or above the number of brokers.
    #[error("replication factor {factor} is invalid with {brokers} broker(s)")]
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
    /// Storage or metadata I/O failed.
    #[error(transparent)]
    Replication(#[from] logbook_replication::Error),
    /// The registry file could not be written.
    #[error("metadata I/O: {0}")]
    Io(#[from] std::io::Error),
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
    cluster_id: String,
    by_name: RwLock<HashMap<String, Arc<Topic>>>,
    by_id: RwLock<HashMap<Uuid, Arc<Topic>>>,
    /// Serializes create and delete so the registry file is written in order.
    admin: Mutex<()>,
    flusher: Flusher,
    defaults: BrokerDefaults,
    partitions_max: i32,
}

/// Checks a topic name as Kafka does: 1..=249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
///
/// # Errors
/// The reason the name is illegal.
pub fn validate_topic_name(name: &str) -> Result<(), TopicError> {
    let invalid = |reason| {
        Err(TopicError::InvalidName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() {
        return invalid("the empty string is not allowed");
    }
    if name == "." || name == ".." {
        return invalid("'.' and '..' are not allowed");
    }
    if name.len() > TOPIC_NAME_BYTES_MAX {
        return invalid("longer than 249 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return invalid("only ASCII alphanumerics, '.', '_' and '-' are allowed");
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
        flusher: Flusher,
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
        let topics = Topics {
            data_dir: data_dir.to_path_buf(),
            cluster_id: registry.cluster_id,
            by_name: RwLock::new(HashMap::new()),
            by_id: RwLock::new(HashMap::new()),
            admin: Mutex::new(()),
            flusher,
            defaults,
            partitions_max,
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
            if name == METADATA_DIR || !entry.file_type()?.is_dir() || known.contains(&name) {
                continue;
            }
            let looks_like_partition = name.rsplit_once('-').is_some_and(|(topic, p)| {
                validate_topic_name(topic).is_ok() && p.parse::<u32>().is_ok()
            });
            if looks_like_partition {
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
        let log_config = config.log_config(&self.defaults);
        let mut opened = Vec::with_capacity(usize::try_from(partitions).unwrap_or(0));
        for p in 0..partitions {
            let tp = TopicPartition {
                topic: name.to_string(),
                partition: p,
            };
            let dir = self.data_dir.join(format!("{name}-{p}"));
            opened.push(Partition::open(
                tp,
                &dir,
                log_config.clone(),
                self.flusher.clone(),
            )?);
        }
        Ok(Arc::new(Topic {
            name: name.to_string(),
            id,
            partitions: opened,
            config,
        }))
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
                partitions: i32::try_from(t.partitions.len()).unwrap_or(i32::MAX),
                config: t.config.clone(),
            })
            .collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        let registry = PersistedRegistry {
            cluster_id: self.cluster_id.clone(),
            topics,
        };
        let bytes = serde_json::to_vec_pretty(&registry)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let dir = self.data_dir.join(METADATA_DIR);
        let tmp = dir.join(format!("{TOPICS_FILE}.tmp"));
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, dir.join(TOPICS_FILE))?;
        std::fs::File::open(&dir)?.sync_all()?;
        Ok(())
    }

    /// The cluster id reported in Metadata, stable across restarts.
    #[must_use]
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
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
        validate_topic_name(new.name)?;
        if self.by_name.read().contains_key(new.name) {
            return Err(TopicError::AlreadyExists(new.name.to_string()));
        }
        if new.partitions <= 0 || new.partitions > self.partitions_max {
            return Err(TopicError::InvalidPartitions(new.partitions));
        }
        let brokers = 1;
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

    /// Creates a topic: opens its partition logs, then records it in the registry.
    ///
    /// # Errors
    /// Validation errors, or I/O while creating logs or writing the registry.
    pub fn create(&self, new: NewTopic<'_>) -> Result<Arc<Topic>, TopicError> {
        let _admin = self.admin.lock();
        self.validate_new(&new)?;
        let topic = self.open_topic(new.name, Uuid::new_v4(), new.partitions, new.config)?;
        // The new partition directories must survive a crash before the registry names
        // them and before any write to them is acknowledged: one fsync covers them all.
        std::fs::File::open(&self.data_dir)?.sync_all()?;
        self.insert(Arc::clone(&topic));
        if let Err(e) = self.persist() {
            self.by_name.write().remove(new.name);
            self.by_id.write().remove(&topic.id);
            for p in &topic.partitions {
                let _ = p.delete();
            }
            return Err(e);
        }
        tracing::info!(topic = %topic.name, id = %topic.id, partitions = topic.partitions.len(), "created topic");
        Ok(topic)
    }

    /// Returns the topic, creating it with the default partition count if `auto_create`
    /// allows and the name is legal.
    ///
    /// # Errors
    /// `Unknown` when it does not exist and may not be created; creation errors.
    pub fn get_or_create(
        &self,
        name: &str,
        auto_create: bool,
        partitions: i32,
    ) -> Result<Arc<Topic>, TopicError> {
        if let Some(t) = self.get(name) {
            return Ok(t);
        }
        if !auto_create {
            return Err(TopicError::Unknown(name.to_string()));
        }
        validate_topic_name(name)?;
        match self.create(NewTopic {
            name,
            partitions,
            replication_factor: 1,
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
    /// within the limit); `InvalidName` for internal topics; I/O errors.
    pub fn add_partitions(
        &self,
        name: &str,
        total: i32,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let _admin = self.admin.lock();
        let topic = self
            .get(name)
            .ok_or_else(|| TopicError::Unknown(name.to_string()))?;
        if name.starts_with("__") {
            return Err(TopicError::InvalidName {
                name: name.to_string(),
                reason: "the partitions of internal topics cannot be changed",
            });
        }
        let current = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        if total <= current || total > self.partitions_max {
            return Err(TopicError::InvalidPartitions(total));
        }
        if validate_only {
            return Ok(());
        }
        let log_config = topic.config.log_config(&self.defaults);
        let mut partitions = topic.partitions.clone();
        for p in current..total {
            let tp = TopicPartition {
                topic: name.to_string(),
                partition: p,
            };
            let dir = self.data_dir.join(format!("{name}-{p}"));
            partitions.push(Partition::open(
                tp,
                &dir,
                log_config.clone(),
                self.flusher.clone(),
            )?);
        }
        std::fs::File::open(&self.data_dir)?.sync_all()?;
        let grown = Arc::new(Topic {
            name: topic.name.clone(),
            id: topic.id,
            partitions,
            config: topic.config.clone(),
        });
        self.insert(grown);
        self.persist()?;
        tracing::info!(topic = %name, from = current, to = total, "added partitions");
        Ok(())
    }

    /// Deletes a topic: removes it from the registry, then its data from disk.
    ///
    /// # Errors
    /// `Unknown` if it does not exist; I/O errors.
    pub fn delete(&self, name: &str) -> Result<Arc<Topic>, TopicError> {
        let _admin = self.admin.lock();
        let topic = self
            .by_name
            .write()
            .remove(name)
            .ok_or_else(|| TopicError::Unknown(name.to_string()))?;
        self.by_id.write().remove(&topic.id);
        self.persist()?;
        for p in &topic.partitions {
            if let Err(e) = p.delete() {
                tracing::error!(partition = %p.topic_partition(), error = %e, "deleting partition data failed");
            }
        }
        tracing::info!(topic = %topic.name, "deleted topic");
        Ok(topic)
    }

    /// Closes every partition, writing clean-shutdown checkpoints.
    pub fn close_all(&self) {
        for topic in self.all() {
            for p in &topic.partitions {
                if let Err(e) = p.close() {
                    tracing::error!(partition = %p.topic_partition(), error = %e, "closing partition failed");
                }
            }
        }
    }
}

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
