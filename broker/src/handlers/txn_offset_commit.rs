//! TxnOffsetCommit (API key 28): a transactional producer commits a group's consumed
//! offsets inside its transaction (`sendOffsetsToTransaction`). The group coordinator
//! writes them as the producer's transactional batch and holds them pending until the
//! transaction's marker; the answer waits until the batch is durable.
//!
//! v5 is transaction protocol v2 (KIP-890 part 2), served when `transaction.version` is
//! finalized at 2: its clients send no AddOffsetsToTxn, so the group's `__consumer_offsets`
//! partition is first added to the transaction here (durably, as AddOffsetsToTxn would),
//! then the offsets are written.
//!
//! Before v5 the transaction is verified first, as Kafka's coordinators do
//! (`maybeStartTransactionVerificationForPartition` on the group's `__consumer_offsets`
//! partition, KIP-890 part 1): the transaction coordinator must hold the producer's
//! transaction open with that partition in it. Without this, a TxnOffsetCommit that
//! arrived after its transaction had been aborted (a request held in a stopped broker's
//! socket, or sent after the client gave up) was written after the abort marker: its
//! offsets stayed pending with no marker to come, and OffsetFetch with `require_stable`
//! answered UNSTABLE_OFFSET_COMMIT for them until that producer's next marker.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ResponseKind, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use crate::authorizer::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::group::CommitPartition;
use crate::errors;
use crate::handlers::ResponseFuture;
use std::collections::HashSet;

/// Versions served (v5 only with `transaction.version` 2, see `handlers::supported_at`).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

/// Adds the group to the transaction (v5), writes the pending offsets and returns the
/// future of the answer.
pub fn handle(ctx: &super::RequestContext, request: TxnOffsetCommitRequest) -> ResponseFuture {
    let version = ctx.api_version;
    let refused = ctx.refuse_txn_group(&request.transactional_id, &request.group_id);
    if let Some(error) = refused {
        return super::ready(ResponseKind::TxnOffsetCommit(every_partition(
            &request, error,
        )));
    }
    // READ on each topic; the others answer TOPIC_AUTHORIZATION_FAILED.
    let unreadable: HashSet<String> = request
        .topics
        .iter()
        .map(|t| t.name.0.as_str())
        .filter(|name| !ctx.authorize(AclOperation::Read, ResourceType::Topic, name))
        .map(str::to_string)
        .collect();
    if version <= super::LAST_VERSION_BEFORE_TRANSACTION_V2 {
        return commit(&ctx.broker, version, &request, &unreadable);
    }
    let broker = Arc::clone(&ctx.broker);
    Box::pin(async move {
        let added = broker
            .transactions
            .add_offsets(
                request.transactional_id.as_str(),
                request.producer_id.0,
                request.producer_epoch,
                request.group_id.0.as_str(),
                super::TRANSACTION_VERSION_2,
            )
            .await;
        if let Err(e) = added {
            tracing::debug!(group = %request.group_id.0, error = %e, "group not added to the transaction");
            let error = errors::txn_error(&e, false);
            return Some(ResponseKind::TxnOffsetCommit(every_partition(&request, error)).into());
        }
        commit(&broker, version, &request, &unreadable).await
    })
}

/// Writes the pending offsets (the v1 flow's TxnOffsetCommit).
fn commit(
    broker: &Arc<Broker>,
    version: i16,
    request: &TxnOffsetCommitRequest,
    unreadable: &HashSet<String>,
) -> ResponseFuture {
    if version <= super::LAST_VERSION_BEFORE_TRANSACTION_V2 {
        if let Err(error) = verify_transaction(broker, request) {
            return Box::pin(std::future::ready(Some(
                ResponseKind::TxnOffsetCommit(every_partition(request, error)).into(),
            )));
        }
    }
    let (decided, commits) = screen_partitions(broker, version, request, unreadable);
    let (generation_id, member_id, instance_id) = if version >= 3 {
        (
            request.generation_id,
            request.member_id.as_str(),
            request.group_instance_id.as_ref().map(StrBytes::as_str),
        )
    } else {
        (-1, "", None)
    };
    let result = broker.groups.txn_commit_offsets(
        request.group_id.0.as_str(),
        request.producer_id.0,
        request.producer_epoch,
        generation_id,
        member_id,
        instance_id,
        &commits,
    );
    let timeout = Duration::from_millis(broker.groups.config().commit_timeout_ms);
    let names: Vec<(StrBytes, Vec<i32>)> = request
        .topics
        .iter()
        .map(|t| {
            (
                t.name.0.clone(),
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        })
        .collect();
    Box::pin(async move {
        let group_errors =
            super::offset_commit::committed_codes(result, timeout, "transactional offset commit")
                .await;
        let topics = response_topics(names, decided, group_errors);
        Some(
            ResponseKind::TxnOffsetCommit(TxnOffsetCommitResponse::default().with_topics(topics))
                .into(),
        )
    })
}

/// Decides what the broker can answer before the group coordinator sees the request: per
/// partition, in request order, TOPIC_AUTHORIZATION_FAILED or UNKNOWN_TOPIC_OR_PARTITION,
/// or `None` for a partition whose offset goes to the coordinator (in `commits`, in the
/// same order, so its verdicts can be matched back).
fn screen_partitions(
    broker: &Broker,
    version: i16,
    request: &TxnOffsetCommitRequest,
    unreadable: &HashSet<String>,
) -> (Vec<Vec<Option<ResponseError>>>, Vec<CommitPartition>) {
    let mut decided: Vec<Vec<Option<ResponseError>>> = Vec::with_capacity(request.topics.len());
    let mut commits = Vec::new();
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        let known = broker.topics.get(name);
        let mut row = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            if unreadable.contains(name) {
                row.push(Some(ResponseError::TopicAuthorizationFailed));
            } else if known
                .as_ref()
                .is_some_and(|t| (0..t.partition_count).contains(&p.partition_index))
            {
                row.push(None);
                commits.push(CommitPartition {
                    topic: name.to_string(),
                    partition: p.partition_index,
                    offset: p.committed_offset,
                    leader_epoch: if version >= 2 {
                        p.committed_leader_epoch
                    } else {
                        -1
                    },
                    metadata: p.committed_metadata.as_ref().map(ToString::to_string),
                });
            } else {
                row.push(Some(ResponseError::UnknownTopicOrPartition));
            }
        }
        decided.push(row);
    }
    (decided, commits)
}

/// The response's topics, in request order: a partition decided early keeps that error;
/// the others take the coordinator's verdicts in turn (they were sent in that order).
fn response_topics(
    names: Vec<(StrBytes, Vec<i32>)>,
    decided: Vec<Vec<Option<ResponseError>>>,
    group_errors: Vec<Option<ResponseError>>,
) -> Vec<TxnOffsetCommitResponseTopic> {
    let mut group_errors = group_errors.into_iter();
    names
        .into_iter()
        .zip(decided)
        .map(|((name, partitions), row)| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(name.into())
                .with_partitions(
                    partitions
                        .into_iter()
                        .zip(row)
                        .map(|(index, early)| {
                            let error = early.or_else(|| group_errors.next().flatten());
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(index)
                                .with_error_code(errors::code(error))
                        })
                        .collect(),
                )
        })
        .collect()
}

/// Kafka's checks before a transactional offset write: that this broker coordinates the
/// group, then that the producer's transaction is open with the group's `__consumer_offsets`
/// partition in it (added by AddOffsetsToTxn). The error is Kafka's: its
/// `maybeConvertOffsetCommitError` of the verification's produce-style code (a
/// coordinator that cannot answer yet becomes COORDINATOR_NOT_AVAILABLE, which clients
/// retry; INVALID_TXN_STATE and INVALID_PRODUCER_EPOCH pass through).
fn verify_transaction(
    broker: &Broker,
    request: &TxnOffsetCommitRequest,
) -> Result<(), ResponseError> {
    let group_id = request.group_id.0.as_str();
    broker
        .groups
        .check_coordinates(group_id)
        .map_err(|e| errors::group_error(&e))?;
    let partition = (
        crate::coordinator::GROUP_METADATA_TOPIC_NAME.to_owned(),
        broker.groups.partition_for(group_id),
    );
    broker
        .transactions
        .verify_partition(
            request.transactional_id.as_str(),
            request.producer_id.0,
            request.producer_epoch,
            &partition,
        )
        .map_err(|e| {
            tracing::debug!(group = group_id, transactional_id = %request.transactional_id.as_str(), error = %e, "transactional offset commit not verified");
            match errors::produce_verification_error(&e, false) {
                ResponseError::NotEnoughReplicas => ResponseError::CoordinatorNotAvailable,
                other => other,
            }
        })
}

/// The answer that gives every partition of the request `error`.
fn every_partition(
    request: &TxnOffsetCommitRequest,
    error: ResponseError,
) -> TxnOffsetCommitResponse {
    let topics = request
        .topics
        .iter()
        .map(|t| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(error.code())
                        })
                        .collect(),
                )
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}
