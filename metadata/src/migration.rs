//! Migration of a single-node Logbook's metadata files into the metadata log (plan §2.4):
//! a pure conversion of what the broker read from `__cluster_metadata/` (`topics.json`,
//! `broker_configs.json`, `producer-id-block`) and from each partition's
//! `leader-epoch-checkpoint` into one batch, so the upgrade is one atomic Raft entry.
//! The broker reads the files and renames them after the batch is committed.
//!
//! What is kept: the cluster id, every topic's id, name, partition count and config
//! overrides, the dynamic broker configs (this node's and the cluster default), the
//! producer-id block end (ids below it may have been handed out, so the next block starts
//! there), and each partition's leader epoch, which must never go back: a leader epoch
//! lower than one already in a log would let a stale leader's data win.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::image::MetadataImage;
use crate::records::{
    BrokerId, ClusterIdRecord, ConfigRecord, ConfigResourceType, FeatureLevelRecord,
    LeaderRecoveryState, MetadataBatch, MetadataRecord, PartitionRecord, ProducerIdsRecord,
    RegisterBrokerRecord, TopicRecord,
};
use crate::Error;

/// One topic of `topics.json`, plus the latest leader epoch of each partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LegacyTopic {
    /// Topic name.
    pub name: String,
    /// Topic id.
    pub id: Uuid,
    /// Partition count.
    pub partitions: i32,
    /// Config overrides (`TopicConfig`'s name → value map).
    pub config: BTreeMap<String, String>,
    /// Latest epoch in each partition's `leader-epoch-checkpoint`, by partition index; a
    /// partition absent or with no epoch starts at 0.
    pub latest_leader_epochs: BTreeMap<i32, i32>,
}

/// Everything a single-node broker kept outside its logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LegacyState {
    /// `topics.json`'s cluster id.
    pub cluster_id: String,
    /// The node's registration (fenced until it heartbeats, as any registration).
    pub registration: RegisterBrokerRecord,
    /// Feature levels to finalize with the migration (what a fresh cluster would get).
    pub features: Vec<FeatureLevelRecord>,
    /// `topics.json`'s topics.
    pub topics: Vec<LegacyTopic>,
    /// `broker_configs.json`'s `node` layer (this broker's dynamic configs).
    pub broker_configs: BTreeMap<String, String>,
    /// `broker_configs.json`'s `cluster_default` layer.
    pub cluster_default_configs: BTreeMap<String, String>,
    /// The block end in `producer-id-block`, if the file exists.
    pub producer_id_block_end: Option<i64>,
}

/// The batch that recreates `legacy` in the metadata log: the cluster id, features, the
/// node's registration, each topic (sorted by name) with partitions that have this node as
/// their only replica, ISR member and leader at their latest leader epoch, the configs, and
/// the producer id block.
///
/// # Errors
/// The first record the empty image would reject (duplicate topic names or ids, a
/// partition count below 1, a negative epoch, ...), so a bad legacy state fails before
/// anything is written.
pub fn from_legacy(legacy: &LegacyState) -> Result<MetadataBatch, Error> {
    let node: BrokerId = legacy.registration.broker_id;
    let mut records = vec![MetadataRecord::ClusterId(ClusterIdRecord {
        cluster_id: legacy.cluster_id.clone(),
    })];
    records.extend(
        legacy
            .features
            .iter()
            .cloned()
            .map(MetadataRecord::FeatureLevel),
    );
    records.push(MetadataRecord::RegisterBroker(legacy.registration.clone()));
    let mut topics: Vec<&LegacyTopic> = legacy.topics.iter().collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    for topic in topics {
        records.extend(legacy_topic_records(topic, node)?);
    }
    records.extend(config_records(
        ConfigResourceType::Broker,
        &node.to_string(),
        &legacy.broker_configs,
    ));
    records.extend(config_records(
        ConfigResourceType::Broker,
        "",
        &legacy.cluster_default_configs,
    ));
    if let Some(next_producer_id) = legacy.producer_id_block_end {
        records.push(MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id: node,
            broker_epoch: legacy.registration.broker_epoch,
            next_producer_id,
        }));
    }
    let batch = MetadataBatch(records);
    let (_, delta) = MetadataImage::empty().apply(0, &batch);
    match delta.rejected {
        Some(rejected) => Err(rejected.error),
        None => Ok(batch),
    }
}

/// One legacy topic's records: the topic, each partition with `node` as its only
/// replica, ISR member and leader at its latest leader epoch (0 when unknown), and the
/// topic's configs.
fn legacy_topic_records(topic: &LegacyTopic, node: BrokerId) -> Result<Vec<MetadataRecord>, Error> {
    if topic.partitions < 1 {
        return Err(Error::InvalidPartitions {
            partitions: topic.partitions,
        });
    }
    let mut records = vec![MetadataRecord::Topic(TopicRecord {
        name: topic.name.clone(),
        topic_id: topic.id,
    })];
    for partition_id in 0..topic.partitions {
        let leader_epoch = topic
            .latest_leader_epochs
            .get(&partition_id)
            .copied()
            .unwrap_or(0)
            .max(0);
        records.push(MetadataRecord::Partition(PartitionRecord {
            topic_id: topic.id,
            partition_id,
            replicas: vec![node],
            isr: vec![node],
            removing_replicas: Vec::new(),
            adding_replicas: Vec::new(),
            leader: node,
            leader_epoch,
            partition_epoch: 0,
            leader_recovery_state: LeaderRecoveryState::Recovered,
            elr: Vec::new(),
            last_known_elr: Vec::new(),
        }));
    }
    records.extend(config_records(
        ConfigResourceType::Topic,
        &topic.name,
        &topic.config,
    ));
    Ok(records)
}

fn config_records<'a>(
    resource_type: ConfigResourceType,
    resource_name: &'a str,
    configs: &'a BTreeMap<String, String>,
) -> impl Iterator<Item = MetadataRecord> + 'a {
    configs.iter().map(move |(name, value)| {
        MetadataRecord::Config(ConfigRecord {
            resource_type,
            resource_name: resource_name.to_string(),
            name: name.clone(),
            value: Some(value.clone()),
        })
    })
}

#[cfg(test)]
mod tests;
