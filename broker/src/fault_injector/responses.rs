//! The answer an `error` fault gives a group or transaction request: the response Kafka's
//! coordinator sends when it fails that request with the error (its `getErrorResponse`),
//! with every per-item error set where the API has no top-level one.

use kafka_protocol::messages::{
    add_offsets_to_txn_response, add_partitions_to_txn_response, end_txn_response,
    find_coordinator_response, heartbeat_response, init_producer_id_response, join_group_response,
    leave_group_response, offset_commit_response, sync_group_response, ApiKey, BrokerId,
    ProducerId, RequestKind, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

/// APIs an `error` fault answers as a whole (by group or transactional id).
pub const TOP_LEVEL: [ApiKey; 10] = [
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::OffsetCommit,
    ApiKey::InitProducerId,
    ApiKey::AddPartitionsToTxn,
    ApiKey::AddOffsetsToTxn,
    ApiKey::EndTxn,
];

/// The group and transactional id a request names, for matching.
#[derive(Default)]
pub struct Keys {
    /// Its group id.
    pub group: Option<String>,
    /// Its transactional id.
    pub transactional_id: Option<String>,
}

impl Keys {
    /// The keys of `body`.
    #[must_use]
    pub fn of(body: &RequestKind) -> Self {
        let group = |g: &StrBytes| Some(g.to_string());
        match body {
            RequestKind::FindCoordinator(r) => {
                let key = r.coordinator_keys.first().unwrap_or(&r.key);
                if r.key_type == 1 {
                    Self {
                        transactional_id: Some(key.to_string()),
                        ..Self::default()
                    }
                } else {
                    Self {
                        group: group(key),
                        ..Self::default()
                    }
                }
            }
            RequestKind::JoinGroup(r) => Self {
                group: group(&r.group_id),
                ..Self::default()
            },
            RequestKind::SyncGroup(r) => Self {
                group: group(&r.group_id),
                ..Self::default()
            },
            RequestKind::Heartbeat(r) => Self {
                group: group(&r.group_id),
                ..Self::default()
            },
            RequestKind::LeaveGroup(r) => Self {
                group: group(&r.group_id),
                ..Self::default()
            },
            RequestKind::OffsetCommit(r) => Self {
                group: group(&r.group_id),
                ..Self::default()
            },
            RequestKind::InitProducerId(r) => Self {
                transactional_id: r.transactional_id.as_ref().map(|t| t.to_string()),
                ..Self::default()
            },
            RequestKind::AddPartitionsToTxn(r) => Self {
                transactional_id: Some(r.v3_and_below_transactional_id.to_string()),
                ..Self::default()
            },
            RequestKind::AddOffsetsToTxn(r) => Self {
                transactional_id: Some(r.transactional_id.to_string()),
                group: group(&r.group_id),
            },
            RequestKind::EndTxn(r) => Self {
                transactional_id: Some(r.transactional_id.to_string()),
                ..Self::default()
            },
            _ => Self::default(),
        }
    }
}

/// The response to `body` (at `version`) failed with `error`; `None` for an API not in
/// [`TOP_LEVEL`].
#[must_use]
pub fn error_response(
    version: i16,
    body: &RequestKind,
    error: ResponseError,
) -> Option<ResponseKind> {
    let code = error.code();
    let message = Some(StrBytes::from_string(format!(
        "{error} (injected by the broker's fault injector)"
    )));
    Some(match body {
        RequestKind::FindCoordinator(r) if version >= 4 => ResponseKind::FindCoordinator(
            // v4+ (KIP-699) answers per key; the top-level fields are not in the version.
            find_coordinator_response::FindCoordinatorResponse::default().with_coordinators(
                r.coordinator_keys
                    .iter()
                    .map(|key| {
                        find_coordinator_response::Coordinator::default()
                            .with_key(key.clone())
                            .with_node_id(BrokerId(-1))
                            .with_port(-1)
                            .with_error_code(code)
                            .with_error_message(message.clone())
                    })
                    .collect(),
            ),
        ),
        RequestKind::FindCoordinator(_) => ResponseKind::FindCoordinator(
            find_coordinator_response::FindCoordinatorResponse::default()
                .with_error_code(code)
                .with_error_message(if version >= 1 {
                    message.clone()
                } else {
                    Some(StrBytes::default())
                })
                .with_node_id(BrokerId(-1))
                .with_port(-1),
        ),
        RequestKind::JoinGroup(r) => ResponseKind::JoinGroup(
            join_group_response::JoinGroupResponse::default()
                .with_error_code(code)
                .with_generation_id(-1)
                .with_protocol_name(if version >= 7 { None } else { Some(StrBytes::default()) })
                .with_member_id(r.member_id.clone()),
        ),
        RequestKind::SyncGroup(_) => ResponseKind::SyncGroup(
            sync_group_response::SyncGroupResponse::default().with_error_code(code),
        ),
        RequestKind::Heartbeat(_) => ResponseKind::Heartbeat(
            heartbeat_response::HeartbeatResponse::default().with_error_code(code),
        ),
        RequestKind::LeaveGroup(_) => ResponseKind::LeaveGroup(
            leave_group_response::LeaveGroupResponse::default().with_error_code(code),
        ),
        RequestKind::OffsetCommit(r) => ResponseKind::OffsetCommit(
            offset_commit_response::OffsetCommitResponse::default().with_topics(
                r.topics
                    .iter()
                    .map(|t| {
                        offset_commit_response::OffsetCommitResponseTopic::default()
                            .with_name(t.name.clone())
                            .with_topic_id(t.topic_id)
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        offset_commit_response::OffsetCommitResponsePartition::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(code)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            ),
        ),
        RequestKind::InitProducerId(_) => ResponseKind::InitProducerId(
            init_producer_id_response::InitProducerIdResponse::default()
                .with_error_code(code)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ),
        RequestKind::AddPartitionsToTxn(r) => ResponseKind::AddPartitionsToTxn(
            add_partitions_to_txn_response::AddPartitionsToTxnResponse::default()
                .with_error_code(if version >= 4 { code } else { 0 })
                .with_results_by_topic_v3_and_below(
                    r.v3_and_below_topics
                        .iter()
                        .map(|t| {
                            add_partitions_to_txn_response::AddPartitionsToTxnTopicResult::default()
                                .with_name(t.name.clone())
                                .with_results_by_partition(
                                    t.partitions
                                        .iter()
                                        .map(|p| {
                                            add_partitions_to_txn_response::AddPartitionsToTxnPartitionResult::default()
                                                .with_partition_index(*p)
                                                .with_partition_error_code(code)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
        ),
        RequestKind::AddOffsetsToTxn(_) => ResponseKind::AddOffsetsToTxn(
            add_offsets_to_txn_response::AddOffsetsToTxnResponse::default().with_error_code(code),
        ),
        RequestKind::EndTxn(_) => ResponseKind::EndTxn(
            end_txn_response::EndTxnResponse::default()
                .with_error_code(code)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ),
        _ => return None,
    })
}
