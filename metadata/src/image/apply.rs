//! `MetadataImage::apply`: folds one batch into the next image. Deterministic (it reads
//! only the image and the batch) and atomic (an invalid record rejects the whole batch),
//! so every node that applies the same committed log holds the same image.

use std::sync::Arc;

use super::{
    BrokerRegistration, ConfigResource, ImageState, MetadataDelta, MetadataImage,
    PartitionRegistration, ProducerIdsImage, RejectedBatch, TopicIdPartition, TopicImage,
};
use crate::records::{
    BrokerRegistrationChangeRecord, ClusterIdRecord, ConfigRecord, ConfigResourceType,
    FeatureLevelRecord, MetadataBatch, MetadataRecord, PartitionChangeRecord, PartitionRecord,
    ProducerIdsRecord, RegisterBrokerRecord, RemoveTopicRecord, TopicRecord,
    UnregisterBrokerRecord,
};
use crate::Error;

impl MetadataImage {
    /// The image after the batch at `offset`, and what changed.
    ///
    /// A batch with an invalid record (see [`Error`]) changes nothing but the offset; the
    /// delta then says why in `rejected`.
    ///
    /// # Panics
    /// If `offset` is not above the image's: the caller must apply the log in order.
    #[must_use]
    pub fn apply(&self, offset: i64, batch: &MetadataBatch) -> (MetadataImage, MetadataDelta) {
        assert!(
            self.offset() < offset,
            "batch offset {offset} not above the image's {}",
            self.offset()
        );
        let mut state = ImageState::clone(&self.0);
        state.offset = offset;
        let mut delta = MetadataDelta {
            offset,
            ..MetadataDelta::default()
        };
        for (record_index, record) in batch.0.iter().enumerate() {
            if let Err(error) = replay(&mut state, &mut delta, record) {
                let mut unchanged = ImageState::clone(&self.0);
                unchanged.offset = offset;
                let rejected = MetadataDelta {
                    offset,
                    rejected: Some(RejectedBatch {
                        record_index,
                        error,
                    }),
                    ..MetadataDelta::default()
                };
                return (MetadataImage(Arc::new(unchanged)), rejected);
            }
        }
        (MetadataImage(Arc::new(state)), delta)
    }

    /// The image a snapshot's records rebuild (replayed on the empty image at `offset`).
    ///
    /// # Errors
    /// The first invalid record (a snapshot written by `to_records` never has one), or
    /// records at a negative offset.
    pub fn from_records(offset: i64, records: Vec<MetadataRecord>) -> Result<Self, Error> {
        if offset < 0 {
            return if records.is_empty() {
                Ok(MetadataImage::empty())
            } else {
                Err(Error::Decode {
                    reason: format!("records at negative offset {offset}"),
                })
            };
        }
        let (image, delta) = MetadataImage::empty().apply(offset, &MetadataBatch(records));
        match delta.rejected {
            Some(rejected) => Err(rejected.error),
            None => Ok(image),
        }
    }
}

fn replay(
    state: &mut ImageState,
    delta: &mut MetadataDelta,
    record: &MetadataRecord,
) -> Result<(), Error> {
    match record {
        MetadataRecord::FeatureLevel(r) => feature_level(state, delta, r),
        MetadataRecord::ClusterId(r) => cluster_id(state, delta, r),
        MetadataRecord::RegisterBroker(r) => register_broker(state, delta, r),
        MetadataRecord::UnregisterBroker(r) => unregister_broker(state, delta, r),
        MetadataRecord::BrokerRegistrationChange(r) => broker_change(state, delta, r),
        MetadataRecord::Topic(r) => topic(state, delta, r),
        MetadataRecord::RemoveTopic(r) => remove_topic(state, delta, r),
        MetadataRecord::Partition(r) => partition(state, delta, r),
        MetadataRecord::PartitionChange(r) => partition_change(state, delta, r),
        MetadataRecord::Config(r) => config(state, delta, r),
        MetadataRecord::ProducerIds(r) => producer_ids(state, delta, r),
        MetadataRecord::UserScramCredential(r) => {
            state
                .scram
                .insert((r.name.clone(), r.mechanism), Arc::new(r.clone()));
            delta.scram_changed = true;
            Ok(())
        }
        MetadataRecord::AccessControlEntry(r) => {
            Arc::make_mut(&mut state.acls).insert(r.clone());
            delta.acls_changed = true;
            Ok(())
        }
        MetadataRecord::RemoveAccessControlEntry(r) => {
            if Arc::make_mut(&mut state.acls).remove(&r.id) {
                delta.acls_changed = true;
            }
            Ok(())
        }
        MetadataRecord::ClientQuota(r) => {
            Arc::make_mut(&mut state.quotas).apply(r);
            delta.quotas_changed = true;
            Ok(())
        }
        MetadataRecord::RemoveUserScramCredential(r) => {
            if state.scram.remove(&(r.name.clone(), r.mechanism)).is_some() {
                delta.scram_changed = true;
            }
            Ok(())
        }
    }
}

fn feature_level(
    state: &mut ImageState,
    delta: &mut MetadataDelta,
    r: &FeatureLevelRecord,
) -> Result<(), Error> {
    let old = if r.level == 0 {
        state.features.remove(&r.name)
    } else {
        state.features.insert(r.name.clone(), r.level)
    };
    if old != Some(r.level) && !(old.is_none() && r.level == 0) {
        delta.features_changed.insert(r.name.clone());
    }
    Ok(())
}

fn cluster_id(
    state: &mut ImageState,
    delta: &mut MetadataDelta,
    r: &ClusterIdRecord,
) -> Result<(), Error> {
    match &state.cluster_id {
        Some(current) if *current == r.cluster_id => Ok(()),
        Some(current) => Err(Error::ClusterIdMismatch {
            current: current.clone(),
            new: r.cluster_id.clone(),
        }),
        None => {
            state.cluster_id = Some(r.cluster_id.clone());
            delta.cluster_id_changed = true;
            Ok(())
        }
    }
}

fn register_broker(
    state: &mut ImageState,
    delta: &mut MetadataDelta,
    r: &RegisterBrokerRecord,
) -> Result<(), Error> {
    if let Some(current) = state.brokers.get(&r.broker_id) {
        if r.broker_epoch <= current.broker_epoch {
            return Err(Error::StaleBrokerEpoch {
                broker_id: r.broker_id,
                epoch: r.broker_epoch,
                current: current.broker_epoch,
            });
        }
    }
    let registration = BrokerRegistration {
        broker_id: r.broker_id,
        incarnation_id: r.incarnation_id,
        broker_epoch: r.broker_epoch,
        endpoints: r.endpoints.clone(),
        rack: r.rack.clone(),
        fenced: r.fenced,
        in_controlled_shutdown: r.in_controlled_shutdown,
        partitions_max: r.partitions_max,
    };
    state.brokers.insert(r.broker_id, Arc::new(registration));
    delta.brokers_changed.insert(r.broker_id);
    Ok(())
}

fn registered(state: &ImageState, broker_id: i32, broker_epoch: i64) -> Result<(), Error> {
    let current = state
        .brokers
        .get(&broker_id)
        .ok_or(Error::UnknownBroker { broker_id })?;
    if current.broker_epoch != broker_epoch {
        return Err(Error::StaleBrokerEpoch {
            broker_id,
            epoch: broker_epoch,
            current: current.broker_epoch,
        });
    }
    Ok(())
}

fn unregister_broker(
    state: &mut ImageState,
    delta: &mut MetadataDelta,
    r: &UnregisterBrokerRecord,
) -> Result<(), Error> {
    registered(state, r.broker_id, r.broker_epoch)?;
    state.brokers.remove(&r.broker_id);
    delta.brokers_changed.insert(r.broker_id);
    Ok(())
}

fn broker_change(
    state: &mut ImageState,
    delta: &mut MetadataDelta,
    r: &BrokerRegistrationChangeRecord,
) -> Result<(), Error> {
    registered(state, r.broker_id, r.broker_epoch)?;
    let Some(entry) = state.brokers.get_mut(&r.broker_id) else {
        return Err(Error::UnknownBroker {
            broker_id: r.broker_id,
        });
    };
    let registration = Arc::make_mut(entry);
    let before = registration.clone();
    if let Some(fenced) = r.fenced {
        registration.fenced = fenced;
    }
    if let Some(shutting_down) = r.in_controlled_shutdown {
        registration.in_controlled_shutdown = shutting_down;
    }
    if *registration != before {
        delta.brokers_changed.insert(r.broker_id);
    }
    Ok(())
}

fn topic(state: &mut ImageState, delta: &mut MetadataDelta, r: &TopicRecord) -> Result<(), Error> {
    if state.topic_ids.contains_key(&r.name) {
        return Err(Error::TopicAlreadyExists {
            name: r.name.clone(),
        });
    }
    if state.topics.contains_key(&r.topic_id) {
        return Err(Error::TopicIdAlreadyExists {
            topic_id: r.topic_id,
        });
    }
    state.topic_ids.insert(r.name.clone(), r.topic_id);
    state.topics.insert(
        r.topic_id,
        Arc::new(TopicImage {
            id: r.topic_id,
            name: r.name.clone(),
            partitions: Vec::new(),
        }),
    );
    delta.topics_created.insert(r.topic_id);
    Ok(())
}

fn remove_topic(
    state: &mut ImageState,
    delta: &mut MetadataDelta,
    r: &RemoveTopicRecord,
) -> Result<(), Error> {
    let topic = state
        .topics
        .remove(&r.topic_id)
        .ok_or(Error::UnknownTopicId {
            topic_id: r.topic_id,
        })?;
    state.topic_ids.remove(&topic.name);
    let resource = ConfigResource::topic(&topic.name);
    if state.configs.remove(&resource).is_some() {
        delta.configs_changed.insert(resource);
    }
    delta
        .partitions_created
        .retain(|tp| tp.topic_id != r.topic_id);
    delta
        .partitions_changed
        .retain(|tp| tp.topic_id != r.topic_id);
    if !delta.topics_created.remove(&r.topic_id) {
        delta.topics_deleted.insert(r.topic_id, topic);
    }
    Ok(())
}

fn partition(
    state: &mut ImageState,
    delta: &mut MetadataDelta,
    r: &PartitionRecord,
) -> Result<(), Error> {
    let entry = state
        .topics
        .get_mut(&r.topic_id)
        .ok_or(Error::UnknownTopicId {
            topic_id: r.topic_id,
        })?;
    let next = i32::try_from(entry.partitions.len()).unwrap_or(i32::MAX);
    if r.partition_id != next {
        return Err(Error::PartitionOutOfOrder {
            topic_id: r.topic_id,
            partition_id: r.partition_id,
            next,
        });
    }
    let registration = PartitionRegistration::from_record(r);
    registration.validate(r.topic_id, r.partition_id)?;
    Arc::make_mut(entry).partitions.push(registration);
    delta.partitions_created.insert(TopicIdPartition {
        topic_id: r.topic_id,
        partition: r.partition_id,
    });
    Ok(())
}

fn partition_change(
    state: &mut ImageState,
    delta: &mut MetadataDelta,
    r: &PartitionChangeRecord,
) -> Result<(), Error> {
    let entry = state
        .topics
        .get_mut(&r.topic_id)
        .ok_or(Error::UnknownTopicId {
            topic_id: r.topic_id,
        })?;
    let unknown = Error::UnknownPartition {
        topic_id: r.topic_id,
        partition_id: r.partition_id,
    };
    let index = usize::try_from(r.partition_id).map_err(|_| unknown.clone())?;
    let current = entry.partitions.get(index).ok_or(unknown.clone())?;
    if current.partition_epoch != r.partition_epoch {
        return Err(Error::StalePartitionEpoch {
            topic_id: r.topic_id,
            partition_id: r.partition_id,
            expected: r.partition_epoch,
            current: current.partition_epoch,
        });
    }
    let merged = current.merge(r);
    merged.validate(r.topic_id, r.partition_id)?;
    let slot = Arc::make_mut(entry)
        .partitions
        .get_mut(index)
        .ok_or(unknown)?;
    *slot = merged;
    let tp = TopicIdPartition {
        topic_id: r.topic_id,
        partition: r.partition_id,
    };
    if !delta.partitions_created.contains(&tp) {
        delta.partitions_changed.insert(tp);
    }
    Ok(())
}

fn config(
    state: &mut ImageState,
    delta: &mut MetadataDelta,
    r: &ConfigRecord,
) -> Result<(), Error> {
    let invalid = |reason: &str| {
        Err(Error::InvalidConfigResource {
            resource_name: r.resource_name.clone(),
            reason: reason.to_string(),
        })
    };
    match r.resource_type {
        ConfigResourceType::Topic if r.resource_name.is_empty() => {
            return invalid("a topic config needs a topic name");
        }
        ConfigResourceType::Broker
            if !r.resource_name.is_empty() && r.resource_name.parse::<u32>().is_err() =>
        {
            return invalid("a broker config names a broker id or \"\" (cluster default)");
        }
        ConfigResourceType::Topic | ConfigResourceType::Broker => {}
    }
    let resource = ConfigResource {
        resource_type: r.resource_type,
        name: r.resource_name.clone(),
    };
    let configs = state.configs.entry(resource.clone()).or_default();
    let changed = match &r.value {
        Some(value) => {
            Arc::make_mut(configs).insert(r.name.clone(), value.clone()) != Some(value.clone())
        }
        None => configs.contains_key(&r.name) && Arc::make_mut(configs).remove(&r.name).is_some(),
    };
    if configs.is_empty() {
        state.configs.remove(&resource);
    }
    if changed {
        delta.configs_changed.insert(resource);
    }
    Ok(())
}

fn producer_ids(
    state: &mut ImageState,
    delta: &mut MetadataDelta,
    r: &ProducerIdsRecord,
) -> Result<(), Error> {
    let current = state
        .producer_ids
        .as_ref()
        .map_or(0, |p| p.next_producer_id);
    let first = state.producer_ids.is_none();
    if r.next_producer_id < current || (!first && r.next_producer_id == current) {
        return Err(Error::ProducerIdsNotIncreasing {
            next_producer_id: r.next_producer_id,
            current,
        });
    }
    state.producer_ids = Some(ProducerIdsImage {
        broker_id: r.broker_id,
        broker_epoch: r.broker_epoch,
        next_producer_id: r.next_producer_id,
    });
    delta.producer_ids_changed = true;
    Ok(())
}
