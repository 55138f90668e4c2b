//! Cluster metadata as KRaft models it: a log of records ([`MetadataRecord`], one atomic
//! [`MetadataBatch`] per Raft entry) folded into an immutable [`MetadataImage`].
//!
//! Pure on purpose: no I/O, no async runtime, no clocks, no randomness. Every node applies
//! the same committed batches and must reach the same image, so `apply` may depend on
//! nothing but the image and the batch; that also makes the whole controller logic
//! (placement, elections, ISR changes) testable without a cluster. The Raft log, the
//! network and the files live in `logbook-controller` and the broker.

pub mod acls;
mod error;
mod image;
pub mod migration;
#[cfg(test)]
mod model_tests;
mod partition_change;
pub mod placement;
pub mod quotas;
mod records;
pub mod snapshot;
#[cfg(test)]
mod test_support;

pub use error::Error;
pub use image::{
    BrokerRegistration, ConfigResource, MetadataDelta, MetadataImage, PartitionRegistration,
    ProducerIdsImage, RejectedBatch, TopicIdPartition, TopicImage,
};
pub use partition_change::{Election, PartitionChangeBuilder};
pub use records::{
    AccessControlEntryRecord, BrokerEndpoint, BrokerId, BrokerRegistrationChangeRecord,
    ClientQuotaRecord, ClusterIdRecord, ConfigRecord, ConfigResourceType, FeatureLevelRecord,
    LeaderRecoveryState, MetadataBatch, MetadataRecord, PartitionChangeRecord, PartitionRecord,
    ProducerIdsRecord, RegisterBrokerRecord, RemoveAccessControlEntryRecord, RemoveTopicRecord,
    RemoveUserScramCredentialRecord, TopicRecord, UnregisterBrokerRecord,
    UserScramCredentialRecord, BATCH_ENCODING_VERSION, NO_LEADER,
};
