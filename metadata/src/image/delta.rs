//! `MetadataDelta`: what one applied batch changed, so the broker's publisher touches only
//! the partitions, brokers and configs that moved (Kafka's `MetadataDelta`, reduced to the
//! keys: the new values are in the new image).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use uuid::Uuid;

use super::{ConfigResource, TopicIdPartition, TopicImage};
use crate::records::BrokerId;
use crate::Error;

/// A batch that changed nothing because one of its records was invalid. Batches are
/// atomic, so the records before it were undone too. Every node rejects the same batch
/// (apply is deterministic); for the controller it means its view was stale or it has a
/// bug, for everyone else it is worth one error log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectedBatch {
    /// Index of the first invalid record in the batch.
    pub record_index: usize,
    /// Why it was invalid.
    pub error: Error,
}

/// The changes of one batch. Look up the new values in the image `apply` returned (the
/// old ones in the image it was called on).
///
/// Something created and deleted in the same batch appears in neither list; a partition
/// created and changed in the same batch is only in `partitions_created`; partitions of a
/// deleted topic are in `topics_deleted` only.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetadataDelta {
    /// Offset of the batch.
    pub offset: i64,
    /// The cluster id was set.
    pub cluster_id_changed: bool,
    /// Features whose level changed.
    pub features_changed: BTreeSet<String>,
    /// Brokers registered, re-registered, changed or unregistered (absent from the new
    /// image).
    pub brokers_changed: BTreeSet<BrokerId>,
    /// Topics created.
    pub topics_created: BTreeSet<Uuid>,
    /// Topics deleted, with their last image (name and partitions, for deleting logs).
    pub topics_deleted: BTreeMap<Uuid, Arc<TopicImage>>,
    /// Partitions created (of new topics and by CreatePartitions).
    pub partitions_created: BTreeSet<TopicIdPartition>,
    /// Existing partitions whose registration changed.
    pub partitions_changed: BTreeSet<TopicIdPartition>,
    /// Resources whose dynamic configs changed (a deleted topic's included).
    pub configs_changed: BTreeSet<ConfigResource>,
    /// A producer id block was handed out.
    pub producer_ids_changed: bool,
    /// A SCRAM credential was added, replaced or removed.
    pub scram_changed: bool,
    /// An ACL was added or removed.
    pub acls_changed: bool,
    /// A client quota was set or removed.
    pub quotas_changed: bool,
    /// Set if the batch was rejected; then nothing else is set.
    pub rejected: Option<RejectedBatch>,
}

impl MetadataDelta {
    /// Whether the batch changed nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        !self.cluster_id_changed
            && self.features_changed.is_empty()
            && self.brokers_changed.is_empty()
            && self.topics_created.is_empty()
            && self.topics_deleted.is_empty()
            && self.partitions_created.is_empty()
            && self.partitions_changed.is_empty()
            && self.configs_changed.is_empty()
            && !self.producer_ids_changed
            && !self.scram_changed
            && !self.acls_changed
            && !self.quotas_changed
    }
}
