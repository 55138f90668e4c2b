//! Migration of a single node's metadata files into the metadata log (plan §2.4): reads
//! `__cluster_metadata/topics.json`, `broker_configs.json`, `producer-id-block` and each
//! partition's `leader-epoch-checkpoint`, and hands them to `migration::from_legacy`, whose
//! batch the first controller leader writes as one entry. Once that entry is committed the
//! files are renamed `*.migrated` (kept for a rollback, never read again).

use std::io;
use std::path::{Path, PathBuf};

use logbook_metadata::migration::{LegacyState, LegacyTopic};
use logbook_metadata::{BrokerEndpoint, FeatureLevelRecord, RegisterBrokerRecord};
use uuid::Uuid;

use crate::broker_config::DynamicBrokerConfigs;
use crate::topic_config::TopicConfig;
use crate::topics::METADATA_DIR;

const TOPICS_FILE: &str = "topics.json";
const BROKER_CONFIGS_FILE: &str = "broker_configs.json";
const PRODUCER_ID_BLOCK_FILE: &str = "producer-id-block";
/// Suffix of a migrated file.
pub const MIGRATED_SUFFIX: &str = ".migrated";

#[derive(serde::Deserialize)]
struct PersistedTopic {
    name: String,
    id: Uuid,
    partitions: i32,
    config: TopicConfig,
}

#[derive(serde::Deserialize)]
struct PersistedRegistry {
    cluster_id: String,
    topics: Vec<PersistedTopic>,
}

/// What a single node left outside its logs, and the files it came from.
#[derive(Debug)]
pub struct LegacyMetadata {
    /// The state to migrate.
    pub state: LegacyState,
    files: Vec<PathBuf>,
}

/// Whether `data_dir` holds a single node's `topics.json` that was not migrated yet.
#[must_use]
pub fn has_legacy_metadata(data_dir: &Path) -> bool {
    data_dir.join(METADATA_DIR).join(TOPICS_FILE).is_file()
}

/// Reads the legacy files of `data_dir`, if `topics.json` exists; the registration and
/// features are this node's (`node_id` advertising `host:port`).
///
/// # Errors
/// A file that exists but cannot be read or parsed: the start stops rather than lose it.
pub fn read(
    data_dir: &Path,
    node_id: i32,
    endpoints: &[BrokerEndpoint],
    features: &[(String, i16)],
) -> io::Result<Option<LegacyMetadata>> {
    let dir = data_dir.join(METADATA_DIR);
    let topics_path = dir.join(TOPICS_FILE);
    let Some(bytes) = read_if_exists(&topics_path)? else {
        return Ok(None);
    };
    let registry: PersistedRegistry = parse_json(&topics_path, &bytes)?;
    let mut files = vec![topics_path];
    let configs_path = dir.join(BROKER_CONFIGS_FILE);
    let dynamic = match read_if_exists(&configs_path)? {
        Some(bytes) => {
            files.push(configs_path.clone());
            parse_json::<DynamicBrokerConfigs>(&configs_path, &bytes)?
        }
        None => DynamicBrokerConfigs::default(),
    };
    let producer_id_block_end = read_producer_id_block(&dir, &mut files)?;
    let topics = legacy_topics(data_dir, registry.topics);
    let state = LegacyState {
        cluster_id: registry.cluster_id,
        registration: registration(node_id, endpoints),
        features: features
            .iter()
            .map(|(name, level)| FeatureLevelRecord {
                name: name.clone(),
                level: *level,
            })
            .collect(),
        topics,
        broker_configs: dynamic.node,
        cluster_default_configs: dynamic.cluster_default,
        producer_id_block_end,
    };
    Ok(Some(LegacyMetadata { state, files }))
}

/// The end of the last producer id block handed out, if the file exists (and is then
/// listed among the migrated files): the controller must not hand out those ids again.
fn read_producer_id_block(dir: &Path, files: &mut Vec<PathBuf>) -> io::Result<Option<i64>> {
    let block_path = dir.join(PRODUCER_ID_BLOCK_FILE);
    match read_if_exists(&block_path)? {
        Some(bytes) => {
            files.push(block_path.clone());
            let text = String::from_utf8_lossy(&bytes);
            Ok(Some(
                text.trim()
                    .parse::<i64>()
                    .map_err(|e| invalid(&block_path, &e.to_string()))?,
            ))
        }
        None => Ok(None),
    }
}

/// The registry's topics with each partition's latest leader epoch from its checkpoint,
/// so the controller's first leader epochs continue the ones the logs already hold.
fn legacy_topics(data_dir: &Path, topics: Vec<PersistedTopic>) -> Vec<LegacyTopic> {
    topics
        .into_iter()
        .map(|t| {
            let latest_leader_epochs = (0..t.partitions)
                .filter_map(|p| {
                    latest_epoch(&data_dir.join(format!("{}-{p}", t.name))).map(|e| (p, e))
                })
                .collect();
            LegacyTopic {
                name: t.name,
                id: t.id,
                partitions: t.partitions,
                config: t.config.overrides().clone(),
                latest_leader_epochs,
            }
        })
        .collect()
}

/// This node's registration as the migration writes it: fenced, so the controller
/// unfences it only once it heartbeats like any broker.
fn registration(node_id: i32, endpoints: &[BrokerEndpoint]) -> RegisterBrokerRecord {
    RegisterBrokerRecord {
        broker_id: node_id,
        incarnation_id: Uuid::new_v4(),
        broker_epoch: 0,
        endpoints: endpoints.to_vec(),
        rack: None,
        fenced: true,
        in_controlled_shutdown: false,
        partitions_max: None,
    }
}

impl LegacyMetadata {
    /// Renames the migrated files `*.migrated`, then fsyncs their directory.
    ///
    /// # Errors
    /// A rename or the fsync failed (the next start would refuse to migrate twice: the
    /// metadata log is not empty any more, and `topics.json` is ignored then).
    pub fn mark_migrated(&self) -> io::Result<()> {
        for file in &self.files {
            let mut migrated = file.clone().into_os_string();
            migrated.push(MIGRATED_SUFFIX);
            std::fs::rename(file, &migrated)?;
        }
        if let Some(dir) = self.files.first().and_then(|f| f.parent()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

fn read_if_exists(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn parse_json<T: serde::de::DeserializeOwned>(path: &Path, bytes: &[u8]) -> io::Result<T> {
    serde_json::from_slice(bytes).map_err(|e| invalid(path, &e.to_string()))
}

fn invalid(path: &Path, reason: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {reason}", path.display()),
    )
}

/// The latest epoch in a partition's `leader-epoch-checkpoint` (Kafka's text format: a
/// version line, a count line, then `epoch start_offset` lines); `None` if the file is
/// missing or unreadable (the partition then starts at epoch 0, which a single node
/// always used).
fn latest_epoch(partition_dir: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(
        partition_dir.join(logbook_storage::leader_epoch_cache::LEADER_EPOCH_CHECKPOINT_FILE),
    )
    .ok()?;
    text.lines()
        .skip(2)
        .filter_map(|line| line.split_whitespace().next()?.parse::<i32>().ok())
        .max()
}
