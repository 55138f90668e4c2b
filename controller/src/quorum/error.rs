//! What a QuorumController operation fails with: one variant per Kafka error a caller must
//! see, named as Kafka names it, so the broker's `errors.rs` maps each to its code with an
//! exhaustive match (the codes are chosen there, not here).

use logbook_metadata::BrokerId;
use uuid::Uuid;

/// A controller operation's failure (whole request, or one topic / partition of it).
///
/// Serializable because the controller RPC (`controller_rpc`) carries it from the active
/// controller to a broker on another node unchanged.
#[derive(Debug, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum QuorumError {
    /// NOT_CONTROLLER: this node is not the active controller; retry at `leader_id`.
    #[error("not the active controller (leader: {leader_id:?})")]
    NotController {
        /// The leader this node knows of.
        leader_id: Option<u64>,
    },
    /// DUPLICATE_BROKER_REGISTRATION: another incarnation of the broker still has a live
    /// session.
    #[error("broker {broker_id} is registered by another incarnation with a live session")]
    DuplicateBrokerRegistration {
        /// The broker.
        broker_id: BrokerId,
    },
    /// BROKER_ID_NOT_REGISTERED.
    #[error("broker {broker_id} is not registered")]
    BrokerIdNotRegistered {
        /// The broker.
        broker_id: BrokerId,
    },
    /// STALE_BROKER_EPOCH: a request from an older registration of the broker.
    #[error("broker {broker_id}: epoch {epoch}, registration has {current}")]
    StaleBrokerEpoch {
        /// The broker.
        broker_id: BrokerId,
        /// Epoch in the request.
        epoch: i64,
        /// Epoch of the registration.
        current: i64,
    },
    /// TOPIC_ALREADY_EXISTS.
    #[error("topic {name} already exists")]
    TopicAlreadyExists {
        /// The topic.
        name: String,
    },
    /// UNKNOWN_TOPIC_OR_PARTITION.
    #[error("unknown topic or partition {name}-{partition}")]
    UnknownTopicOrPartition {
        /// Topic name (or id in text).
        name: String,
        /// Partition (-1 for a whole topic).
        partition: i32,
    },
    /// UNKNOWN_TOPIC_ID.
    #[error("unknown topic id {topic_id}")]
    UnknownTopicId {
        /// The id.
        topic_id: Uuid,
    },
    /// INVALID_REPLICATION_FACTOR.
    #[error("replication factor {replication_factor} with {usable_brokers} usable brokers")]
    InvalidReplicationFactor {
        /// Requested factor.
        replication_factor: i16,
        /// Active brokers.
        usable_brokers: usize,
    },
    /// INVALID_PARTITIONS.
    #[error("invalid partition count {partitions}: {reason}")]
    InvalidPartitions {
        /// Requested count.
        partitions: i32,
        /// Why.
        reason: String,
    },
    /// INVALID_REQUEST: a request that breaks the protocol's rules.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// NOT_LEADER_OR_FOLLOWER: an AlterPartition from a broker that does not lead.
    #[error("broker {broker_id} does not lead the partition")]
    NotLeaderOrFollower {
        /// The sender.
        broker_id: BrokerId,
    },
    /// FENCED_LEADER_EPOCH: an AlterPartition computed at another leader epoch.
    #[error("leader epoch {epoch}, current is {current}")]
    FencedLeaderEpoch {
        /// Epoch in the request.
        epoch: i32,
        /// Current leader epoch.
        current: i32,
    },
    /// INVALID_UPDATE_VERSION: an AlterPartition from an older partition epoch.
    #[error("partition epoch {epoch}, current is {current}")]
    InvalidUpdateVersion {
        /// Epoch in the request.
        epoch: i32,
        /// Current partition epoch.
        current: i32,
    },
    /// INELIGIBLE_REPLICA: an ISR with a fenced, shutting-down, unregistered or restarted
    /// (wrong broker epoch) replica (KIP-841, KIP-903).
    #[error("replica {replica} may not join the ISR")]
    IneligibleReplica {
        /// The first ineligible replica.
        replica: BrokerId,
    },
    /// NEW_LEADER_ELECTED: the change was committed, and it elected another leader.
    #[error("the change elected leader {leader}")]
    NewLeaderElected {
        /// The new leader.
        leader: BrokerId,
    },
    /// ELECTION_NOT_NEEDED: the wanted leader leads already.
    #[error("election not needed")]
    ElectionNotNeeded,
    /// PREFERRED_LEADER_NOT_AVAILABLE.
    #[error("preferred leader not available")]
    PreferredLeaderNotAvailable,
    /// INVALID_REPLICA_ASSIGNMENT: a reassignment's target replicas are empty, repeat a
    /// broker, or name an unregistered one.
    #[error("invalid replica assignment: {0}")]
    InvalidReplicaAssignment(String),
    /// NO_REASSIGNMENT_IN_PROGRESS: a cancellation of a partition not being reassigned.
    #[error("no reassignment in progress")]
    NoReassignmentInProgress,
    /// A SCRAM credential change refused, with Kafka's code and message
    /// (RESOURCE_NOT_FOUND for a deletion of a credential that does not exist).
    #[error("{message}")]
    ScramCredential {
        /// Kafka's error code.
        code: i16,
        /// Kafka's message.
        message: String,
    },
    /// ELIGIBLE_LEADERS_NOT_AVAILABLE: no replica may lead.
    #[error("no eligible leader")]
    EligibleLeadersNotAvailable,
    /// The batch was rejected on apply several times in a row (each time recomputed from
    /// the newer image); Kafka would answer UNKNOWN_SERVER_ERROR.
    #[error("metadata batch rejected: {0}")]
    Rejected(logbook_metadata::Error),
    /// REQUEST_TIMED_OUT: no controller answered within the client's request timeout
    /// (unreachable, or no leader elected meanwhile). The operation may still have been
    /// committed, as with any Kafka request that times out.
    #[error("no controller answered within {timeout_ms} ms")]
    RequestTimedOut {
        /// The request timeout.
        timeout_ms: u64,
    },
    /// The Raft layer failed (shutdown, I/O).
    #[error(transparent)]
    Raft(#[serde(with = "crate::controller_rpc::raft_error")] crate::Error),
}

impl From<crate::Error> for QuorumError {
    fn from(error: crate::Error) -> Self {
        match error {
            crate::Error::NotController { leader_id } => QuorumError::NotController { leader_id },
            other => QuorumError::Raft(other),
        }
    }
}

impl From<logbook_metadata::Error> for QuorumError {
    fn from(error: logbook_metadata::Error) -> Self {
        match error {
            logbook_metadata::Error::InvalidReplicationFactor {
                replication_factor,
                usable_brokers,
            } => QuorumError::InvalidReplicationFactor {
                replication_factor,
                usable_brokers,
            },
            logbook_metadata::Error::InvalidPartitions { partitions } => {
                QuorumError::InvalidPartitions {
                    partitions,
                    reason: "must be larger than 0".to_string(),
                }
            }
            other => QuorumError::Rejected(other),
        }
    }
}
