//! Snapshots: an image written back as the records that rebuild it, so a node can load
//! the metadata without replaying the whole log (KRaft writes its snapshots the same way,
//! through `MetadataImage.write`).
//!
//! Encoded like a batch: `{"v":1,"offset":N,"records":[...]}`. Replaying the records on
//! the empty image at `offset` gives an image equal to the one written.

use serde::{Deserialize, Serialize};

use crate::image::MetadataImage;
use crate::records::check_encoding_version;
use crate::records::{
    ClusterIdRecord, ConfigRecord, FeatureLevelRecord, MetadataRecord, ProducerIdsRecord,
    RegisterBrokerRecord, TopicRecord, UserScramCredentialRecord, BATCH_ENCODING_VERSION,
};
use crate::Error;

impl MetadataImage {
    /// The records that rebuild this image from the empty one: the cluster id, features,
    /// brokers, each topic with its partitions, configs, then the producer id block.
    #[must_use]
    pub fn to_records(&self) -> Vec<MetadataRecord> {
        let mut records = Vec::new();
        if let Some(cluster_id) = self.cluster_id() {
            records.push(MetadataRecord::ClusterId(ClusterIdRecord {
                cluster_id: cluster_id.to_string(),
            }));
        }
        for (name, level) in self.features() {
            records.push(MetadataRecord::FeatureLevel(FeatureLevelRecord {
                name: name.clone(),
                level: *level,
            }));
        }
        for broker in self.brokers() {
            records.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                broker_id: broker.broker_id,
                incarnation_id: broker.incarnation_id,
                broker_epoch: broker.broker_epoch,
                endpoints: broker.endpoints.clone(),
                rack: broker.rack.clone(),
                fenced: broker.fenced,
                in_controlled_shutdown: broker.in_controlled_shutdown,
                partitions_max: broker.partitions_max,
            }));
        }
        for topic in self.topics() {
            records.push(MetadataRecord::Topic(TopicRecord {
                name: topic.name.clone(),
                topic_id: topic.id,
            }));
            for (partition_id, partition) in (0..).zip(&topic.partitions) {
                records.push(MetadataRecord::Partition(
                    partition.to_record(topic.id, partition_id),
                ));
            }
        }
        for (resource, configs) in self.all_configs() {
            for (name, value) in configs {
                records.push(MetadataRecord::Config(ConfigRecord {
                    resource_type: resource.resource_type,
                    resource_name: resource.name.clone(),
                    name: name.clone(),
                    value: Some(value.clone()),
                }));
            }
        }
        if let Some(block) = self.producer_ids() {
            records.push(MetadataRecord::ProducerIds(ProducerIdsRecord {
                broker_id: block.broker_id,
                broker_epoch: block.broker_epoch,
                next_producer_id: block.next_producer_id,
            }));
        }
        for credential in self.scram_credentials() {
            records.push(MetadataRecord::UserScramCredential(
                UserScramCredentialRecord::clone(credential),
            ));
        }
        for (entity, quotas) in self.client_quotas().iter() {
            for (key, value) in quotas {
                records.push(MetadataRecord::ClientQuota(crate::ClientQuotaRecord {
                    entity: entity
                        .iter()
                        .map(|(t, n)| crate::quotas::EntityData {
                            entity_type: t.clone(),
                            entity_name: n.clone(),
                        })
                        .collect(),
                    key: key.clone(),
                    value: *value,
                    remove: false,
                }));
            }
        }
        for acl in self.acls().iter() {
            records.push(MetadataRecord::AccessControlEntry(
                crate::records::AccessControlEntryRecord::clone(acl),
            ));
        }
        records
    }
}

/// An image as of `offset`, as records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataSnapshot {
    /// Encoding version ([`BATCH_ENCODING_VERSION`]).
    pub v: u16,
    /// Offset of the last batch the image includes.
    pub offset: i64,
    /// The records (`MetadataImage::to_records`).
    pub records: Vec<MetadataRecord>,
}

impl MetadataSnapshot {
    /// The snapshot of `image`.
    #[must_use]
    pub fn of(image: &MetadataImage) -> Self {
        MetadataSnapshot {
            v: BATCH_ENCODING_VERSION,
            offset: image.offset(),
            records: image.to_records(),
        }
    }

    /// The image the snapshot rebuilds.
    ///
    /// # Errors
    /// An invalid record (never in a snapshot this code wrote).
    pub fn to_image(&self) -> Result<MetadataImage, Error> {
        MetadataImage::from_records(self.offset, self.records.clone())
    }

    /// The snapshot as JSON bytes.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("metadata records have only string map keys")
    }

    /// Reads a snapshot written by [`MetadataSnapshot::encode`].
    ///
    /// # Errors
    /// `Decode` for other bytes, `UnsupportedEncodingVersion` for a newer encoding.
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        check_encoding_version(bytes)?;
        serde_json::from_slice(bytes).map_err(|e| Error::Decode {
            reason: e.to_string(),
        })
    }
}
