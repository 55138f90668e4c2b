//! TxnOffsetCommit (API key 28): a transactional producer commits a group's consumed
//! offsets inside its transaction (`sendOffsetsToTransaction`). The group coordinator
//! writes them as the producer's transactional batch and holds them pending until the
//! transaction's marker; the answer waits until the batch is durable.
//!
//! v5 is transaction protocol v2 (KIP-890 part 2), served when `transaction.version` is
//! finalized at 2: its clients send no AddOffsetsToTxn, so the group's `__consumer_offsets`
//! partition is first added to the transaction here (durably, as AddOffsetsToTxn would),
//! then the offsets are written.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ResponseKind, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use crate::broker::Broker;
use crate::coordinator::group::CommitPartition;
use crate::errors;
use crate::handlers::ResponseFuture;

/// Versions served (v5 only with `transaction.version` 2, see `handlers::supported_at`).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

/// Adds the group to the transaction (v5), writes the pending offsets and returns the
/// future of the answer.
pub fn handle(ctx: &super::RequestContext, request: TxnOffsetCommitRequest) -> ResponseFuture {
    let version = ctx.api_version;
    if version <= super::LAST_VERSION_BEFORE_TRANSACTION_V2 {
        return commit(&ctx.broker, version, &request);
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
            let code = errors::txn_error(&e, false).code();
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
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect();
            return Some(
                ResponseKind::TxnOffsetCommit(
                    TxnOffsetCommitResponse::default().with_topics(topics),
                )
                .into(),
            );
        }
        commit(&broker, version, &request).await
    })
}

/// Writes the pending offsets (the v1 flow's TxnOffsetCommit).
fn commit(broker: &Arc<Broker>, version: i16, request: &TxnOffsetCommitRequest) -> ResponseFuture {
    let mut decided: Vec<Vec<Option<ResponseError>>> = Vec::with_capacity(request.topics.len());
    let mut commits = Vec::new();
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        let known = broker.topics.get(name);
        let mut row = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            if known
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
        let mut group_errors: Vec<Option<ResponseError>> = result
            .errors
            .iter()
            .map(|e| e.map(|e| errors::group_error(&e)))
            .collect();
        if let Some((partition, end_offset)) = result.durable {
            if let Err(e) = partition.wait_durable(end_offset, timeout).await {
                tracing::warn!(error = %e, "transactional offset commit not durable");
                let error = errors::replication_error(&e);
                for slot in &mut group_errors {
                    slot.get_or_insert(error);
                }
            }
        }
        let mut group_errors = group_errors.into_iter();
        let topics = names
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
            .collect();
        Some(
            ResponseKind::TxnOffsetCommit(TxnOffsetCommitResponse::default().with_topics(topics))
                .into(),
        )
    })
}
