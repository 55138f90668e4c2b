//! The one error type of this crate: why a batch was rejected, a placement impossible, or
//! bytes not a batch. The broker maps these to Kafka error codes in `broker/src/errors.rs`.

use uuid::Uuid;

use crate::records::BrokerId;

/// Failures a caller of this crate can act on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum Error {
    /// Bytes that are not a metadata batch or snapshot.
    #[error("undecodable metadata: {reason}")]
    Decode {
        /// The decoder's message.
        reason: String,
    },
    /// Written by a newer Logbook with an encoding this one cannot read.
    #[error("metadata encoding version {version} is newer than the supported {supported}")]
    UnsupportedEncodingVersion {
        /// Version found.
        version: u16,
        /// Newest version this code reads.
        supported: u16,
    },
    /// A second, different cluster id.
    #[error("cluster id {new} differs from the cluster's {current}")]
    ClusterIdMismatch {
        /// The id in the image.
        current: String,
        /// The id in the record.
        new: String,
    },
    /// A record names a broker that is not registered.
    #[error("broker {broker_id} is not registered")]
    UnknownBroker {
        /// The broker.
        broker_id: BrokerId,
    },
    /// A record's broker epoch is not the registration's (or, for a registration, not
    /// greater than the previous one).
    #[error("broker {broker_id}: epoch {epoch} does not match the registration's {current}")]
    StaleBrokerEpoch {
        /// The broker.
        broker_id: BrokerId,
        /// Epoch in the record.
        epoch: i64,
        /// Epoch of the current registration.
        current: i64,
    },
    /// A topic of this name already exists.
    #[error("topic {name} already exists")]
    TopicAlreadyExists {
        /// The name.
        name: String,
    },
    /// A topic of this id already exists.
    #[error("topic id {topic_id} already exists")]
    TopicIdAlreadyExists {
        /// The id.
        topic_id: Uuid,
    },
    /// A record names a topic id that does not exist.
    #[error("unknown topic id {topic_id}")]
    UnknownTopicId {
        /// The id.
        topic_id: Uuid,
    },
    /// A `PartitionRecord` that is not the topic's next partition.
    #[error("topic {topic_id}: partition {partition_id} created, next is {next}")]
    PartitionOutOfOrder {
        /// The topic.
        topic_id: Uuid,
        /// Partition in the record.
        partition_id: i32,
        /// The topic's partition count (the only index a new partition may have).
        next: i32,
    },
    /// A change to a partition that does not exist.
    #[error("topic {topic_id} has no partition {partition_id}")]
    UnknownPartition {
        /// The topic.
        topic_id: Uuid,
        /// The partition.
        partition_id: i32,
    },
    /// A partition change computed from an older registration (compare-and-set failed).
    #[error(
        "partition {topic_id}-{partition_id}: change from epoch {expected}, current is {current}"
    )]
    StalePartitionEpoch {
        /// The topic.
        topic_id: Uuid,
        /// The partition.
        partition_id: i32,
        /// Epoch the change was computed from.
        expected: i32,
        /// The registration's epoch.
        current: i32,
    },
    /// A partition registration that breaks an invariant (empty ISR, leader outside it, ...).
    #[error("partition {topic_id}-{partition_id}: {reason}")]
    InvalidPartition {
        /// The topic.
        topic_id: Uuid,
        /// The partition.
        partition_id: i32,
        /// Which invariant.
        reason: String,
    },
    /// A config record whose resource name is not valid for its type.
    #[error("invalid config resource {resource_name:?}: {reason}")]
    InvalidConfigResource {
        /// The name.
        resource_name: String,
        /// Why.
        reason: String,
    },
    /// A producer id block that does not start above the previous one.
    #[error("producer ids must grow: next {next_producer_id} after {current}")]
    ProducerIdsNotIncreasing {
        /// Next id in the record.
        next_producer_id: i64,
        /// Next id in the image.
        current: i64,
    },
    /// Partition count of zero or less (Kafka's INVALID_PARTITIONS).
    #[error("number of partitions must be larger than 0, got {partitions}")]
    InvalidPartitions {
        /// The requested count.
        partitions: i32,
    },
    /// Replication factor of zero or less, or more than the usable brokers (Kafka's
    /// INVALID_REPLICATION_FACTOR).
    #[error("replication factor {replication_factor} with {usable_brokers} usable brokers")]
    InvalidReplicationFactor {
        /// The requested factor.
        replication_factor: i16,
        /// Unfenced brokers not shutting down.
        usable_brokers: usize,
    },
}
