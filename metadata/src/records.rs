//! The records of the metadata log, named and shaped after KRaft's (`TopicRecord`,
//! `PartitionRecord`, `PartitionChangeRecord`, ...), so Kafka's controller code and KIPs
//! can be read side by side with ours.
//!
//! Encoding (our own, not Kafka's binary schemas: kafka-protocol has no metadata records
//! and no tool reads our log): JSON through serde. A [`MetadataBatch`] is written as
//! `{"v":1,"records":[...]}`; each record is an object whose `"type"` names its kind
//! (`"TopicRecord"`, ...) next to its fields. Readers ignore fields they do not know, and a
//! field added later carries `#[serde(default)]`, so adding a field needs no version bump.
//! `v` changes only for a change old readers must refuse (a field's meaning changes or a
//! field becomes mandatory); a reader refuses a `v` above [`BATCH_ENCODING_VERSION`]. An
//! unknown record `"type"` is a decode error, as an unknown record type is in KRaft: new
//! kinds of record may only be written once a `metadata.version` feature level that every
//! node supports says so.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::Error;

/// A broker's (and controller's) `node.id`.
pub type BrokerId = i32;

/// The `leader` of a partition that has none (offline).
pub const NO_LEADER: BrokerId = -1;

/// Version of the batch encoding this code writes and the newest it reads.
pub const BATCH_ENCODING_VERSION: u16 = 1;

/// The level of one cluster feature (`metadata.version`, `transaction.version`, ...).
/// Level 0 removes the feature, as in KRaft.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureLevelRecord {
    /// Feature name.
    pub name: String,
    /// Finalized level; 0 removes it.
    pub level: i16,
}

/// The cluster id. Logbook-only: KRaft keeps it in `meta.properties` on each node, we
/// replicate it so every node agrees. Once set it never changes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterIdRecord {
    /// Kafka-style cluster id (22 characters of URL-safe base64).
    pub cluster_id: String,
}

/// One listener a broker advertises to clients and other brokers.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BrokerEndpoint {
    /// Listener name (`PLAINTEXT`, ...).
    pub name: String,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: u16,
    /// Kafka's security protocol id (0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL).
    pub security_protocol: i16,
}

/// A broker registered (or re-registered after a restart: a new incarnation and a higher
/// broker epoch replace the old registration).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterBrokerRecord {
    /// The broker's node id.
    pub broker_id: BrokerId,
    /// Random id of this process run; a new one means the broker restarted.
    pub incarnation_id: Uuid,
    /// Epoch of this registration. Strictly greater than any earlier registration of the
    /// same broker; the broker sends it with fetches and heartbeats (KIP-841/903).
    pub broker_epoch: i64,
    /// Advertised listeners.
    pub endpoints: Vec<BrokerEndpoint>,
    /// `broker.rack`, if set.
    #[serde(default)]
    pub rack: Option<String>,
    /// A new registration is fenced until its heartbeats show it caught up.
    #[serde(default = "fenced_default")]
    pub fenced: bool,
    /// Whether the broker is moving its leaderships away before stopping.
    #[serde(default)]
    pub in_controlled_shutdown: bool,
    /// Most partitions the broker can host (its partition budget); `None` = unbounded.
    #[serde(default)]
    pub partitions_max: Option<u64>,
}

fn fenced_default() -> bool {
    true
}

/// A broker removed from the cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnregisterBrokerRecord {
    /// The broker's node id.
    pub broker_id: BrokerId,
    /// Must equal the current registration's epoch.
    pub broker_epoch: i64,
}

/// A change to a registered broker's state (KRaft's newer form of Fence/UnfenceBrokerRecord).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistrationChangeRecord {
    /// The broker's node id.
    pub broker_id: BrokerId,
    /// Must equal the current registration's epoch, so a change meant for an earlier
    /// incarnation never touches a newer one.
    pub broker_epoch: i64,
    /// New fencing state; `None` keeps it.
    #[serde(default)]
    pub fenced: Option<bool>,
    /// New controlled-shutdown state; `None` keeps it.
    #[serde(default)]
    pub in_controlled_shutdown: Option<bool>,
}

/// A topic created (its partitions follow as [`PartitionRecord`]s, usually in the same batch).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRecord {
    /// Topic name, unique in the cluster.
    pub name: String,
    /// Topic id (KIP-516), unique forever.
    pub topic_id: Uuid,
}

/// A topic deleted, with its partitions and its config overrides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveTopicRecord {
    /// The deleted topic's id.
    pub topic_id: Uuid,
}

/// Whether a partition's leader may serve data (KIP-704). After an unclean election the
/// leader is RECOVERING until it has made its log consistent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LeaderRecoveryState {
    /// The leader's log is consistent (Kafka's value 0).
    #[default]
    Recovered,
    /// The leader was elected uncleanly and is recovering (Kafka's value 1).
    Recovering,
}

/// A partition created, or its whole registration in a snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRecord {
    /// The topic's id.
    pub topic_id: Uuid,
    /// Partition index; partitions of a topic are created in order `0, 1, ...`.
    pub partition_id: i32,
    /// Assigned replicas, the preferred leader first.
    pub replicas: Vec<BrokerId>,
    /// In-sync replicas, a subset of `replicas`, never empty.
    pub isr: Vec<BrokerId>,
    /// Replicas leaving in an ongoing reassignment.
    #[serde(default)]
    pub removing_replicas: Vec<BrokerId>,
    /// Replicas joining in an ongoing reassignment.
    #[serde(default)]
    pub adding_replicas: Vec<BrokerId>,
    /// Current leader, a member of `isr`, or [`NO_LEADER`].
    pub leader: BrokerId,
    /// Bumped on every leader change and replica removal.
    pub leader_epoch: i32,
    /// Bumped on every change to the registration.
    pub partition_epoch: i32,
    /// See [`LeaderRecoveryState`].
    #[serde(default)]
    pub leader_recovery_state: LeaderRecoveryState,
    /// Eligible leader replicas (KIP-966). Reserved: always empty for now.
    #[serde(default)]
    pub elr: Vec<BrokerId>,
    /// Last known ELR members (KIP-966). Reserved: always empty for now.
    #[serde(default)]
    pub last_known_elr: Vec<BrokerId>,
}

/// A change to one partition. Every `Some` field replaces the current value; `leader`
/// being `Some` (even the current leader) bumps the leader epoch, and any change bumps the
/// partition epoch, as KRaft's `PartitionRegistration.merge`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionChangeRecord {
    /// The topic's id.
    pub topic_id: Uuid,
    /// Partition index.
    pub partition_id: i32,
    /// Compare-and-set: the partition epoch of the registration this change was computed
    /// from. A change whose epoch is not the current one is stale (computed by a deposed
    /// controller, or racing another change) and rejects its batch. Logbook-only.
    pub partition_epoch: i32,
    /// New leader ([`NO_LEADER`] for none); `Some` bumps the leader epoch.
    #[serde(default)]
    pub leader: Option<BrokerId>,
    /// New ISR.
    #[serde(default)]
    pub isr: Option<Vec<BrokerId>>,
    /// New replica assignment.
    #[serde(default)]
    pub replicas: Option<Vec<BrokerId>>,
    /// New removing replicas.
    #[serde(default)]
    pub removing_replicas: Option<Vec<BrokerId>>,
    /// New adding replicas.
    #[serde(default)]
    pub adding_replicas: Option<Vec<BrokerId>>,
    /// New leader recovery state.
    #[serde(default)]
    pub leader_recovery_state: Option<LeaderRecoveryState>,
    /// New ELR (KIP-966). Reserved.
    #[serde(default)]
    pub elr: Option<Vec<BrokerId>>,
    /// New last known ELR (KIP-966). Reserved.
    #[serde(default)]
    pub last_known_elr: Option<Vec<BrokerId>>,
}

/// What a [`ConfigRecord`] configures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ConfigResourceType {
    /// A topic, named by its name.
    Topic,
    /// A broker, named by its id in decimal; `""` is the cluster-wide default.
    Broker,
}

/// One dynamic config set or deleted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigRecord {
    /// Kind of resource.
    pub resource_type: ConfigResourceType,
    /// Topic name, or broker id (`""` = cluster default for brokers).
    pub resource_name: String,
    /// Config name (`retention.ms`, ...).
    pub name: String,
    /// New value; `None` deletes the override.
    #[serde(default)]
    pub value: Option<String>,
}

/// A block of producer ids handed to a broker: ids below `next_producer_id` are taken.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdsRecord {
    /// Broker the block went to.
    pub broker_id: BrokerId,
    /// That broker's epoch when it asked.
    pub broker_epoch: i64,
    /// First id not yet handed out; only ever grows.
    pub next_producer_id: i64,
}

/// A user's SCRAM credential for one mechanism (KRaft's `UserScramCredentialRecord`):
/// what SCRAM authentication needs, never the password. Written by
/// AlterUserScramCredentials; replaces the user's earlier credential of the mechanism.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserScramCredentialRecord {
    /// The user name.
    pub name: String,
    /// Kafka's mechanism code: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512.
    pub mechanism: i8,
    /// The salt.
    pub salt: Vec<u8>,
    /// `H(HMAC(SaltedPassword, "Client Key"))`.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: Vec<u8>,
    /// The PBKDF2 iteration count.
    pub iterations: i32,
}

/// A user's SCRAM credential for one mechanism removed (KRaft's
/// `RemoveUserScramCredentialRecord`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveUserScramCredentialRecord {
    /// The user name.
    pub name: String,
    /// Kafka's mechanism code.
    pub mechanism: i8,
}

/// One ACL (KRaft's `AccessControlEntryRecord`): a binding of a resource pattern to a
/// principal, host, operation and permission, under an id the controller picked. Written
/// by CreateAcls; an identical binding is never stored twice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessControlEntryRecord {
    /// The ACL's id (what `RemoveAccessControlEntryRecord` names).
    pub id: Uuid,
    /// What the ACL is on, its pattern and who it is for.
    #[serde(flatten)]
    pub binding: crate::acls::AclBinding,
}

/// An ACL removed (KRaft's `RemoveAccessControlEntryRecord`), by id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveAccessControlEntryRecord {
    /// The id of the ACL removed.
    pub id: Uuid,
}

/// A client quota set or removed (KRaft's `ClientQuotaRecord`): `key` of the entity the
/// components name. Written by AlterClientQuotas.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientQuotaRecord {
    /// The entity: one component per entity type.
    pub entity: Vec<crate::quotas::EntityData>,
    /// The quota key (`producer_byte_rate`, …).
    pub key: String,
    /// The value (ignored when `remove`).
    pub value: crate::quotas::QuotaValue,
    /// Whether the key is removed.
    pub remove: bool,
}

/// One metadata record. The JSON form is the record's fields plus `"type"`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum MetadataRecord {
    /// See [`FeatureLevelRecord`].
    #[serde(rename = "FeatureLevelRecord")]
    FeatureLevel(FeatureLevelRecord),
    /// See [`ClusterIdRecord`].
    #[serde(rename = "ClusterIdRecord")]
    ClusterId(ClusterIdRecord),
    /// See [`RegisterBrokerRecord`].
    #[serde(rename = "RegisterBrokerRecord")]
    RegisterBroker(RegisterBrokerRecord),
    /// See [`UnregisterBrokerRecord`].
    #[serde(rename = "UnregisterBrokerRecord")]
    UnregisterBroker(UnregisterBrokerRecord),
    /// See [`BrokerRegistrationChangeRecord`].
    #[serde(rename = "BrokerRegistrationChangeRecord")]
    BrokerRegistrationChange(BrokerRegistrationChangeRecord),
    /// See [`TopicRecord`].
    #[serde(rename = "TopicRecord")]
    Topic(TopicRecord),
    /// See [`RemoveTopicRecord`].
    #[serde(rename = "RemoveTopicRecord")]
    RemoveTopic(RemoveTopicRecord),
    /// See [`PartitionRecord`].
    #[serde(rename = "PartitionRecord")]
    Partition(PartitionRecord),
    /// See [`PartitionChangeRecord`].
    #[serde(rename = "PartitionChangeRecord")]
    PartitionChange(PartitionChangeRecord),
    /// See [`ConfigRecord`].
    #[serde(rename = "ConfigRecord")]
    Config(ConfigRecord),
    /// See [`ProducerIdsRecord`].
    #[serde(rename = "ProducerIdsRecord")]
    ProducerIds(ProducerIdsRecord),
    /// See [`UserScramCredentialRecord`].
    #[serde(rename = "UserScramCredentialRecord")]
    UserScramCredential(UserScramCredentialRecord),
    /// See [`RemoveUserScramCredentialRecord`].
    #[serde(rename = "RemoveUserScramCredentialRecord")]
    RemoveUserScramCredential(RemoveUserScramCredentialRecord),
    /// See [`AccessControlEntryRecord`].
    #[serde(rename = "AccessControlEntryRecord")]
    AccessControlEntry(AccessControlEntryRecord),
    /// See [`RemoveAccessControlEntryRecord`].
    #[serde(rename = "RemoveAccessControlEntryRecord")]
    RemoveAccessControlEntry(RemoveAccessControlEntryRecord),
    /// See [`ClientQuotaRecord`].
    #[serde(rename = "ClientQuotaRecord")]
    ClientQuota(ClientQuotaRecord),
}

/// One atomic controller operation: one Raft entry. Applying it changes the image by all
/// of its records or, if one of them is invalid, by none (see `MetadataImage::apply`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(try_from = "BatchEnvelope")]
pub struct MetadataBatch(pub Vec<MetadataRecord>);

/// The JSON shape of a batch: the encoding version next to the records.
#[derive(Deserialize)]
struct BatchEnvelope {
    v: u16,
    records: Vec<MetadataRecord>,
}

/// The same shape, borrowed, so writing a batch copies nothing.
#[derive(Serialize)]
struct BatchEnvelopeRef<'a> {
    v: u16,
    records: &'a [MetadataRecord],
}

impl Serialize for MetadataBatch {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        BatchEnvelopeRef {
            v: BATCH_ENCODING_VERSION,
            records: &self.0,
        }
        .serialize(serializer)
    }
}

impl TryFrom<BatchEnvelope> for MetadataBatch {
    type Error = Error;

    fn try_from(envelope: BatchEnvelope) -> Result<Self, Error> {
        if envelope.v > BATCH_ENCODING_VERSION {
            return Err(Error::UnsupportedEncodingVersion {
                version: envelope.v,
                supported: BATCH_ENCODING_VERSION,
            });
        }
        Ok(MetadataBatch(envelope.records))
    }
}

impl MetadataBatch {
    /// The batch as JSON bytes (the form stored in a Raft entry).
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("metadata records have only string map keys")
    }

    /// Reads a batch written by [`MetadataBatch::encode`].
    ///
    /// # Errors
    /// `UnsupportedEncodingVersion` for a newer encoding; `Decode` for bytes that are not
    /// a batch (including an unknown record type).
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        check_encoding_version(bytes)?;
        serde_json::from_slice(bytes).map_err(|e| Error::Decode {
            reason: e.to_string(),
        })
    }
}

/// Refuses bytes whose top-level `v` is newer than this code, before reading any record
/// (a newer version may have records this code cannot parse).
pub(crate) fn check_encoding_version(bytes: &[u8]) -> Result<(), Error> {
    #[derive(Deserialize)]
    struct VersionProbe {
        v: u16,
    }
    let probe: VersionProbe = serde_json::from_slice(bytes).map_err(|e| Error::Decode {
        reason: e.to_string(),
    })?;
    if probe.v > BATCH_ENCODING_VERSION {
        return Err(Error::UnsupportedEncodingVersion {
            version: probe.v,
            supported: BATCH_ENCODING_VERSION,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
