//! The one place where failures become Kafka error codes.
//!
//! Every crate's typed error is mapped here by an exhaustive `match` (no `_` arm), so a new
//! variant forces a decision. Our own bugs become UNKNOWN_SERVER_ERROR with a log line.

use kafka_protocol::ResponseError;
use logbook_storage::{BatchError, ValidationError};

use crate::topics::TopicError;

/// Kafka's code for "no error".
pub const NONE: i16 = 0;

/// Kafka's name of an error code (`NOT_LEADER_OR_FOLLOWER`); it lives in the client crate,
/// which the admin tools share.
pub use logbook_client::error_name;

/// The code for a record-batch validation failure on produce.
#[must_use]
pub fn batch_error(e: &BatchError) -> ResponseError {
    match e {
        BatchError::UnsupportedMagic(_) => ResponseError::UnsupportedForMessageFormat,
        BatchError::Truncated { .. }
        | BatchError::InvalidLength { .. }
        | BatchError::CrcMismatch { .. }
        | BatchError::InvalidRecordCount { .. }
        | BatchError::InvalidCodec { .. }
        | BatchError::Empty => ResponseError::CorruptMessage,
    }
}

/// The code for a produce payload the LogValidator refused, as Kafka maps its exceptions:
/// `CorruptRecordException` → CORRUPT_MESSAGE, `InvalidRecordException` → INVALID_RECORD,
/// `InvalidTimestampException` → INVALID_TIMESTAMP, `RecordTooLargeException` →
/// MESSAGE_TOO_LARGE.
#[must_use]
pub fn validation_error(e: &ValidationError) -> ResponseError {
    match e {
        ValidationError::Batch(b) => batch_error(b),
        ValidationError::MessageTooLarge { .. } => ResponseError::MessageTooLarge,
        ValidationError::Corrupt { .. } => ResponseError::CorruptMessage,
        ValidationError::InvalidRecord { .. } => ResponseError::InvalidRecord,
        ValidationError::InvalidTimestamp { .. } => ResponseError::InvalidTimestamp,
    }
}

/// The code for a storage failure.
#[must_use]
pub fn storage_error(e: &logbook_storage::Error) -> ResponseError {
    use logbook_storage::Error;
    match e {
        Error::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        Error::CorruptBatch { .. } => ResponseError::CorruptMessage,
        Error::Batch(b) => batch_error(b),
        Error::AppendTooLarge { .. } => ResponseError::MessageTooLarge,
        // Only a follower's fetcher appends replicated batches; no client sees this.
        Error::UnexpectedAppendOffset { .. } => ResponseError::UnknownServerError,
        Error::Io(_) | Error::LogFailed { .. } => ResponseError::KafkaStorageError,
        Error::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        Error::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        Error::InvalidTxnState { .. } => ResponseError::InvalidTxnState,
        Error::TransactionCoordinatorFenced { .. } => ResponseError::TransactionCoordinatorFenced,
    }
}

/// The code for a partition-level failure.
#[must_use]
pub fn replication_error(e: &logbook_replication::Error) -> ResponseError {
    use logbook_replication::Error;
    match e {
        Error::Storage(s) => storage_error(s),
        Error::Closed(_) | Error::NotLeaderOrFollower(_) => ResponseError::NotLeaderOrFollower,
        Error::UnknownTopicOrPartition(_) => ResponseError::UnknownTopicOrPartition,
        Error::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
        Error::UnknownLeaderEpoch { .. } => ResponseError::UnknownLeaderEpoch,
        Error::Timeout { .. } => ResponseError::RequestTimedOut,
        Error::NotEnoughReplicas { .. } => ResponseError::NotEnoughReplicas,
        Error::NotEnoughReplicasAfterAppend { .. } => ResponseError::NotEnoughReplicasAfterAppend,
        Error::OffsetNotAvailable { .. } => ResponseError::OffsetNotAvailable,
        Error::InconsistentTopicId { .. } => ResponseError::InconsistentTopicId,
    }
}

/// The code for a refused config change, as Kafka's controller and `ConfigAdminManager`
/// choose them: bad names and values INVALID_CONFIG, malformed requests and broker configs
/// that cannot change INVALID_REQUEST (Kafka wraps broker validation failures so, KAFKA-13609).
#[must_use]
pub fn config_error(e: &crate::topic_config::ConfigError) -> ResponseError {
    use crate::topic_config::ConfigError;
    match e {
        ConfigError::Unknown(_)
        | ConfigError::Invalid { .. }
        | ConfigError::NotList { .. }
        | ConfigError::NullTopicValue(_) => ResponseError::InvalidConfig,
        ConfigError::NotDynamic(_)
        | ConfigError::DuplicateKeys
        | ConfigError::NullValue(_)
        | ConfigError::UnknownOperation(_) => ResponseError::InvalidRequest,
    }
}

/// The code for a refused change of a BROKER resource: Kafka's `ConfigAdminManager` turns
/// every failed validation of a broker config into INVALID_REQUEST (KAFKA-13609), and only
/// a misused APPEND/SUBTRACT into INVALID_CONFIG.
#[must_use]
pub fn broker_config_error(e: &TopicError) -> ResponseError {
    use crate::topic_config::ConfigError;
    match e {
        TopicError::InvalidConfig(ConfigError::NotList { .. }) => ResponseError::InvalidConfig,
        TopicError::InvalidConfig(_) => ResponseError::InvalidRequest,
        other => topic_error(other),
    }
}

/// The code for a topic administration failure.
#[must_use]
pub fn topic_error(e: &TopicError) -> ResponseError {
    match e {
        TopicError::AlreadyExists(_) => ResponseError::TopicAlreadyExists,
        TopicError::InvalidName { .. } | TopicError::Collides { .. } => {
            ResponseError::InvalidTopicException
        }
        TopicError::InvalidPartitions(_) => ResponseError::InvalidPartitions,
        TopicError::InvalidReplicationFactor { .. } => ResponseError::InvalidReplicationFactor,
        TopicError::InvalidReplicaAssignment(_) => ResponseError::InvalidReplicaAssignment,
        TopicError::InvalidConfig(c) => config_error(c),
        TopicError::Unknown(_) => ResponseError::UnknownTopicOrPartition,
        // Kafka refuses client appends to (and deletes of records in) internal topics
        // with INVALID_TOPIC_EXCEPTION; its servers do not refuse DeleteTopics of them,
        // but the coordinator holds them open here, so the closest refusal is used.
        TopicError::Internal(_) => ResponseError::InvalidTopicException,
        // Kafka's controller refuses a CreateTopics over its per-request partition cap
        // with POLICY_VIOLATION; a broker-wide partition limit is the same kind of policy.
        TopicError::PartitionLimit { .. } | TopicError::RequestTooLarge { .. } => {
            ResponseError::PolicyViolation
        }
        TopicError::Replication(r) => replication_error(r),
        TopicError::Controller(q) => quorum_error(q),
        // The controller committed the change but this broker's image did not show it in
        // time: the client retries and finds it done (or TOPIC_ALREADY_EXISTS).
        TopicError::MetadataTimeout => ResponseError::RequestTimedOut,
        TopicError::Io(io) => {
            tracing::error!(error = %io, "topic metadata I/O failed");
            ResponseError::KafkaStorageError
        }
    }
}

/// The message a client is told for `e`: Kafka's own text for an INVALID_REQUEST (no
/// prefix of ours), else the error's description.
#[must_use]
pub fn quorum_message(e: &logbook_controller::quorum::QuorumError) -> String {
    match e {
        logbook_controller::quorum::QuorumError::InvalidRequest(message) => message.clone(),
        other => other.to_string(),
    }
}

/// The Kafka error of a controller operation's failure, as Kafka's controller answers it.
#[must_use]
pub fn quorum_error(e: &logbook_controller::quorum::QuorumError) -> ResponseError {
    use logbook_controller::quorum::QuorumError;
    match e {
        QuorumError::NotController { .. } => ResponseError::NotController,
        QuorumError::DuplicateBrokerRegistration { .. } => {
            ResponseError::DuplicateBrokerRegistration
        }
        QuorumError::BrokerIdNotRegistered { .. } => ResponseError::BrokerIdNotRegistered,
        QuorumError::StaleBrokerEpoch { .. } => ResponseError::StaleBrokerEpoch,
        QuorumError::TopicAlreadyExists { .. } => ResponseError::TopicAlreadyExists,
        QuorumError::UnknownTopicOrPartition { .. } => ResponseError::UnknownTopicOrPartition,
        QuorumError::UnknownTopicId { .. } => ResponseError::UnknownTopicId,
        QuorumError::InvalidReplicationFactor { .. } => ResponseError::InvalidReplicationFactor,
        QuorumError::InvalidPartitions { .. } => ResponseError::InvalidPartitions,
        QuorumError::InvalidRequest(_) => ResponseError::InvalidRequest,
        QuorumError::NotLeaderOrFollower { .. } => ResponseError::NotLeaderOrFollower,
        QuorumError::FencedLeaderEpoch { .. } => ResponseError::FencedLeaderEpoch,
        QuorumError::InvalidUpdateVersion { .. } => ResponseError::InvalidUpdateVersion,
        QuorumError::IneligibleReplica { .. } => ResponseError::IneligibleReplica,
        QuorumError::NewLeaderElected { .. } => ResponseError::NewLeaderElected,
        QuorumError::ElectionNotNeeded => ResponseError::ElectionNotNeeded,
        QuorumError::PreferredLeaderNotAvailable => ResponseError::PreferredLeaderNotAvailable,
        QuorumError::EligibleLeadersNotAvailable => ResponseError::EligibleLeadersNotAvailable,
        QuorumError::InvalidReplicaAssignment(_) => ResponseError::InvalidReplicaAssignment,
        QuorumError::NoReassignmentInProgress => ResponseError::NoReassignmentInProgress,
        QuorumError::RequestTimedOut { .. } => ResponseError::RequestTimedOut,
        QuorumError::ScramCredential { code, .. } => {
            ResponseError::try_from_code(*code).unwrap_or(ResponseError::UnknownServerError)
        }
        QuorumError::Rejected(error) => {
            tracing::error!(%error, "controller batch rejected repeatedly");
            ResponseError::UnknownServerError
        }
        QuorumError::Raft(error) => {
            tracing::error!(%error, "controller quorum failed");
            ResponseError::UnknownServerError
        }
    }
}

/// ListTransactions v2 with a `transactional_id_pattern` that does not compile (Kafka:
/// INVALID_REGULAR_EXPRESSION for a `PatternSyntaxException`; here also for Java regex
/// syntax outside the subset served, see `handlers::list_transactions`).
pub const INVALID_TRANSACTIONAL_ID_PATTERN: ResponseError = ResponseError::InvalidRegularExpression;

/// The code for a transaction coordinator failure. `fenced_as_epoch`: the request's
/// version predates PRODUCER_FENCED (InitProducerId < 4, AddPartitionsToTxn / AddOffsetsToTxn
/// / EndTxn / TxnOffsetCommit < 2), so, as Kafka's `KafkaApis`, INVALID_PRODUCER_EPOCH is sent.
#[must_use]
pub fn txn_error(
    e: &crate::coordinator::transaction::TxnError,
    fenced_as_epoch: bool,
) -> ResponseError {
    use crate::coordinator::transaction::TxnError;
    match e {
        TxnError::InvalidRequest => ResponseError::InvalidRequest,
        TxnError::InvalidTransactionTimeout => ResponseError::InvalidTransactionTimeout,
        TxnError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        TxnError::NotCoordinator => ResponseError::NotCoordinator,
        TxnError::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
        TxnError::ProducerFenced if fenced_as_epoch => ResponseError::InvalidProducerEpoch,
        TxnError::ProducerFenced => ResponseError::ProducerFenced,
        TxnError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
        TxnError::InvalidTxnState => ResponseError::InvalidTxnState,
        TxnError::TransactionalIdNotFound => ResponseError::TransactionalIdNotFound,
        TxnError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        TxnError::OperationNotAttempted => ResponseError::OperationNotAttempted,
        TxnError::Storage => ResponseError::KafkaStorageError,
    }
}

/// The code of a transactional produce the coordinator could not verify (KIP-890 part 1),
/// as Kafka's `ReplicaManager` translates it: a partition not in the transaction is
/// INVALID_TXN_STATE, or TRANSACTION_ABORTABLE for a client that knows it (`abortable`:
/// Produce v11+, Kafka's `genericErrorSupported`), which then aborts and goes on where
/// INVALID_TXN_STATE is fatal; retriable coordinator errors become NOT_ENOUGH_REPLICAS
/// (older clients retry it without a metadata refresh); a fenced epoch is
/// INVALID_PRODUCER_EPOCH.
#[must_use]
pub fn produce_verification_error(
    e: &crate::coordinator::transaction::TxnError,
    abortable: bool,
) -> ResponseError {
    use crate::coordinator::transaction::TxnError;
    match e {
        TxnError::InvalidTxnState if abortable => ResponseError::TransactionAbortable,
        TxnError::ConcurrentTransactions
        | TxnError::CoordinatorLoadInProgress
        | TxnError::CoordinatorNotAvailable
        | TxnError::NotCoordinator => ResponseError::NotEnoughReplicas,
        TxnError::ProducerFenced => ResponseError::InvalidProducerEpoch,
        other @ (TxnError::InvalidRequest
        | TxnError::InvalidTransactionTimeout
        | TxnError::InvalidProducerIdMapping
        | TxnError::InvalidTxnState
        | TxnError::TransactionalIdNotFound
        | TxnError::UnknownTopicOrPartition
        | TxnError::OperationNotAttempted
        | TxnError::Storage) => txn_error(other, false),
    }
}

/// The code for a group coordinator failure.
#[must_use]
pub fn group_error(e: &crate::coordinator::group::GroupError) -> ResponseError {
    use crate::coordinator::group::GroupError;
    match e {
        GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
        GroupError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        GroupError::NotCoordinator => ResponseError::NotCoordinator,
        GroupError::CoordinatorLoadInProgress => ResponseError::CoordinatorLoadInProgress,
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
        GroupError::MemberIdRequired => ResponseError::MemberIdRequired,
        GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::FencedInstanceId => ResponseError::FencedInstanceId,
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
        GroupError::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached,
        GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound,
        GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
        GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
        GroupError::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge,
        GroupError::UnknownTopicOrPartition => ResponseError::UnknownTopicOrPartition,
        GroupError::Storage => ResponseError::UnknownServerError,
    }
}

/// The numeric code of an optional group error.
#[must_use]
pub fn group_code(e: Option<crate::coordinator::group::GroupError>) -> i16 {
    e.map_or(NONE, |e| group_error(&e).code())
}

/// The numeric code of an optional error.
#[must_use]
pub fn code(e: Option<ResponseError>) -> i16 {
    e.map_or(NONE, |e| e.code())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::group::GroupError;
    use crate::coordinator::runtime::RuntimeError;

    #[test]
    fn member_id_required_is_code_79() {
        assert_eq!(group_error(&GroupError::MemberIdRequired).code(), 79);
    }

    #[test]
    fn runtime_errors_are_kafkas_codes() {
        // Proves: a shard not hosted here (or whose load failed) is NOT_COORDINATOR (16), one
        // still replaying COORDINATOR_LOAD_IN_PROGRESS (14).
        let code = |e: RuntimeError| group_error(&GroupError::from(&e)).code();
        assert_eq!(code(RuntimeError::NotCoordinator(1)), 16);
        assert_eq!(code(RuntimeError::LoadInProgress(1)), 14);
        assert_eq!(
            code(RuntimeError::Load {
                partition_index: 1,
                reason: "io".into()
            }),
            16
        );
    }
}
