//! `MetadataImage`: the cluster's metadata as of one offset of the metadata log, immutable
//! and cheap to clone (an `Arc`), so the broker can hand the same image to every request
//! and swap in the next one after each committed batch, as KRaft's `MetadataImage`.
//!
//! Topics and brokers are `Arc`s inside ordered maps: applying a batch copies the maps'
//! spines (one pointer per topic) and only the topics it touches. Ordered maps also make
//! iteration, snapshots and deltas deterministic.

mod apply;
mod delta;
mod partition_registration;

use std::collections::BTreeMap;
use std::sync::Arc;

use uuid::Uuid;

use crate::records::{BrokerEndpoint, BrokerId, ConfigResourceType};

pub use delta::{MetadataDelta, RejectedBatch};
pub use partition_registration::PartitionRegistration;

/// A partition named by its topic's id (Kafka's `TopicIdPartition`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicIdPartition {
    /// The topic's id.
    pub topic_id: Uuid,
    /// Partition index.
    pub partition: i32,
}

/// Something that has dynamic configs (Kafka's `ConfigResource`).
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct ConfigResource {
    /// Topic or broker.
    pub resource_type: ConfigResourceType,
    /// Topic name, or broker id in decimal (`""` = cluster default).
    pub name: String,
}

impl ConfigResource {
    /// The configs of topic `name`.
    #[must_use]
    pub fn topic(name: &str) -> Self {
        ConfigResource {
            resource_type: ConfigResourceType::Topic,
            name: name.to_string(),
        }
    }

    /// The configs of broker `id`.
    #[must_use]
    pub fn broker(id: BrokerId) -> Self {
        ConfigResource {
            resource_type: ConfigResourceType::Broker,
            name: id.to_string(),
        }
    }

    /// The cluster-wide default broker configs.
    #[must_use]
    pub fn cluster_default() -> Self {
        ConfigResource {
            resource_type: ConfigResourceType::Broker,
            name: String::new(),
        }
    }
}

/// A registered broker, as the last `RegisterBrokerRecord` and the changes after it say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRegistration {
    /// Node id.
    pub broker_id: BrokerId,
    /// Process run id.
    pub incarnation_id: Uuid,
    /// Registration epoch.
    pub broker_epoch: i64,
    /// Advertised listeners.
    pub endpoints: Vec<BrokerEndpoint>,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// Fenced brokers lead nothing, join no ISR and are not shown to clients.
    pub fenced: bool,
    /// Moving its leaderships away before stopping.
    pub in_controlled_shutdown: bool,
    /// Partition budget; `None` = unbounded.
    pub partitions_max: Option<u64>,
}

impl BrokerRegistration {
    /// Whether the broker may lead partitions and receive new replicas: unfenced and not
    /// shutting down (Kafka's `isActive` for elections and placement).
    #[must_use]
    pub fn is_active(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }
}

/// One topic: its name, id and partitions (indexed by partition id, `0..len`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicImage {
    /// Topic id.
    pub id: Uuid,
    /// Topic name.
    pub name: String,
    /// Partition `p` is `partitions[p]`.
    pub partitions: Vec<PartitionRegistration>,
}

impl TopicImage {
    /// Partition `partition`, if the topic has it.
    #[must_use]
    pub fn partition(&self, partition: i32) -> Option<&PartitionRegistration> {
        usize::try_from(partition)
            .ok()
            .and_then(|p| self.partitions.get(p))
    }
}

/// The last producer id block handed out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerIdsImage {
    /// Broker that got it.
    pub broker_id: BrokerId,
    /// Its epoch then.
    pub broker_epoch: i64,
    /// First id not yet handed out.
    pub next_producer_id: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct ImageState {
    offset: i64,
    cluster_id: Option<String>,
    features: BTreeMap<String, i16>,
    brokers: BTreeMap<BrokerId, Arc<BrokerRegistration>>,
    topics: BTreeMap<Uuid, Arc<TopicImage>>,
    topic_ids: BTreeMap<String, Uuid>,
    configs: BTreeMap<ConfigResource, Arc<BTreeMap<String, String>>>,
    producer_ids: Option<ProducerIdsImage>,
    /// SCRAM credentials by (user, mechanism code).
    scram: BTreeMap<(String, i8), Arc<crate::records::UserScramCredentialRecord>>,
    /// The ACLs, shared between images until a batch changes one.
    acls: Arc<crate::acls::AclCache>,
    /// The client quotas, shared between images until a batch changes one.
    quotas: Arc<crate::quotas::ClientQuotas>,
}

/// The cluster metadata as of [`MetadataImage::offset`]. Immutable; `clone` is one atomic
/// increment. Build the next one with [`MetadataImage::apply`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataImage(Arc<ImageState>);

impl Default for MetadataImage {
    fn default() -> Self {
        MetadataImage::empty()
    }
}

impl MetadataImage {
    /// The image before any record: offset -1, nothing registered.
    #[must_use]
    pub fn empty() -> Self {
        MetadataImage(Arc::new(ImageState {
            offset: -1,
            cluster_id: None,
            features: BTreeMap::new(),
            brokers: BTreeMap::new(),
            topics: BTreeMap::new(),
            topic_ids: BTreeMap::new(),
            configs: BTreeMap::new(),
            producer_ids: None,
            scram: BTreeMap::new(),
            acls: Arc::default(),
            quotas: Arc::default(),
        }))
    }

    /// The ACLs (what the StandardAuthorizer decides from).
    #[must_use]
    pub fn acls(&self) -> &crate::acls::AclCache {
        &self.0.acls
    }

    /// The client quotas (AlterClientQuotas; what the broker throttles by).
    #[must_use]
    pub fn client_quotas(&self) -> &Arc<crate::quotas::ClientQuotas> {
        &self.0.quotas
    }

    /// `user`'s SCRAM credential for mechanism code `mechanism`, if any.
    #[must_use]
    pub fn scram_credential(
        &self,
        user: &str,
        mechanism: i8,
    ) -> Option<&Arc<crate::records::UserScramCredentialRecord>> {
        self.0.scram.get(&(user.to_string(), mechanism))
    }

    /// Every SCRAM credential, by user then mechanism code.
    pub fn scram_credentials(
        &self,
    ) -> impl Iterator<Item = &Arc<crate::records::UserScramCredentialRecord>> {
        self.0.scram.values()
    }

    /// Offset (Raft index) of the last batch applied; -1 for the empty image.
    #[must_use]
    pub fn offset(&self) -> i64 {
        self.0.offset
    }

    /// The cluster id, once a `ClusterIdRecord` set it.
    #[must_use]
    pub fn cluster_id(&self) -> Option<&str> {
        self.0.cluster_id.as_deref()
    }

    /// Finalized feature levels by name (level-0 features are absent).
    #[must_use]
    pub fn features(&self) -> &BTreeMap<String, i16> {
        &self.0.features
    }

    /// The level of feature `name`, if finalized.
    #[must_use]
    pub fn feature_level(&self, name: &str) -> Option<i16> {
        self.0.features.get(name).copied()
    }

    /// Every registered broker, fenced or not, by id.
    pub fn brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.0.brokers.values().map(AsRef::as_ref)
    }

    /// Registered, unfenced brokers by id (the brokers Metadata shows clients).
    pub fn unfenced_brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers().filter(|b| !b.fenced)
    }

    /// Broker `id`'s registration.
    #[must_use]
    pub fn broker(&self, id: BrokerId) -> Option<&BrokerRegistration> {
        self.0.brokers.get(&id).map(AsRef::as_ref)
    }

    /// Whether broker `id` may lead a partition (registered, unfenced, not shutting down):
    /// the `is_acceptable_leader` a controller passes to `PartitionChangeBuilder`.
    #[must_use]
    pub fn is_active_broker(&self, id: BrokerId) -> bool {
        self.broker(id).is_some_and(BrokerRegistration::is_active)
    }

    /// Partitions (topic name, index) whose preferred replica is an active ISR member but
    /// does not lead (Kafka's imbalanced partitions, which `auto.leader.rebalance.enable`
    /// elects back), in topic and partition order.
    #[must_use]
    pub fn imbalanced_partitions(&self) -> Vec<(String, i32)> {
        self.topics()
            .flat_map(|topic| {
                (0..)
                    .zip(&topic.partitions)
                    .filter_map(|(index, partition)| {
                        let preferred = partition.preferred_replica();
                        (partition.leader != preferred
                            && partition.isr.contains(&preferred)
                            && self.is_active_broker(preferred))
                        .then(|| (topic.name.clone(), index))
                    })
            })
            .collect()
    }

    /// Whether some partition has no leader (Kafka's `areSomePartitionsLeaderless`).
    #[must_use]
    pub fn has_leaderless_partitions(&self) -> bool {
        self.topics()
            .flat_map(|topic| topic.partitions.iter())
            .any(|partition| !partition.has_leader())
    }

    /// Ids of the brokers placement may use (active ones), ascending.
    #[must_use]
    pub fn usable_brokers(&self) -> Vec<BrokerId> {
        self.brokers()
            .filter(|b| b.is_active())
            .map(|b| b.broker_id)
            .collect()
    }

    /// Every topic, ordered by id.
    pub fn topics(&self) -> impl Iterator<Item = &Arc<TopicImage>> {
        self.0.topics.values()
    }

    /// Topic `name`.
    #[must_use]
    pub fn topic(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.0
            .topic_ids
            .get(name)
            .and_then(|id| self.0.topics.get(id))
    }

    /// Topic with id `id`.
    #[must_use]
    pub fn topic_by_id(&self, id: &Uuid) -> Option<&Arc<TopicImage>> {
        self.0.topics.get(id)
    }

    /// The registration of `topic_id`'s partition `partition`.
    #[must_use]
    pub fn partition(&self, topic_id: &Uuid, partition: i32) -> Option<&PartitionRegistration> {
        self.topic_by_id(topic_id)
            .and_then(|t| t.partition(partition))
    }

    /// Replicas of `partition` on brokers that are unregistered or fenced: Metadata's
    /// `offline_replicas` (Kafka's `MetadataCache.getOfflineReplicas`, without log dirs).
    #[must_use]
    pub fn offline_replicas(&self, partition: &PartitionRegistration) -> Vec<BrokerId> {
        partition
            .replicas
            .iter()
            .copied()
            .filter(|r| self.broker(*r).is_none_or(|b| b.fenced))
            .collect()
    }

    /// How many partition replicas each broker is assigned (brokers with none absent), to
    /// check a broker's `partitions_max` before placing more on it. O(partitions).
    #[must_use]
    pub fn replica_counts(&self) -> BTreeMap<BrokerId, u64> {
        let mut counts = BTreeMap::new();
        for replica in self
            .topics()
            .flat_map(|t| t.partitions.iter())
            .flat_map(|p| p.replicas.iter())
        {
            *counts.entry(*replica).or_insert(0) += 1;
        }
        counts
    }

    /// Dynamic configs of `resource` (empty if none).
    #[must_use]
    pub fn configs(&self, resource: &ConfigResource) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.0.configs.get(resource).map_or(&EMPTY, AsRef::as_ref)
    }

    /// Every resource with at least one dynamic config, with its configs.
    pub fn all_configs(
        &self,
    ) -> impl Iterator<Item = (&ConfigResource, &BTreeMap<String, String>)> {
        self.0.configs.iter().map(|(r, c)| (r, c.as_ref()))
    }

    /// Config overrides of topic `name`.
    #[must_use]
    pub fn topic_configs(&self, name: &str) -> &BTreeMap<String, String> {
        self.configs(&ConfigResource::topic(name))
    }

    /// Dynamic configs of broker `id`.
    #[must_use]
    pub fn broker_configs(&self, id: BrokerId) -> &BTreeMap<String, String> {
        self.configs(&ConfigResource::broker(id))
    }

    /// Dynamic cluster-wide default broker configs.
    #[must_use]
    pub fn cluster_default_configs(&self) -> &BTreeMap<String, String> {
        self.configs(&ConfigResource::cluster_default())
    }

    /// The last producer id block handed out.
    #[must_use]
    pub fn producer_ids(&self) -> Option<&ProducerIdsImage> {
        self.0.producer_ids.as_ref()
    }

    /// First producer id not yet handed out (0 before any block).
    #[must_use]
    pub fn next_producer_id(&self) -> i64 {
        self.0
            .producer_ids
            .as_ref()
            .map_or(0, |p| p.next_producer_id)
    }
}

#[cfg(test)]
mod tests;
