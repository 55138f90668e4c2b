//! TxnOffsetCommit (API key 28): a transactional producer commits a group's consumed
//! offsets inside its transaction (`sendOffsetsToTransaction`). The group coordinator
//! writes them as the producer's transactional batch and holds them pending until the
//! transaction's marker; the answer waits until the batch is durable. v5 (transaction
//! protocol v2, which adds the group implicitly) is not served.

use std::time::Duration;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ResponseKind, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use crate::coordinator::group::CommitPartition;
use crate::errors;
use crate::handlers::ResponseFuture;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

/// Writes the pending offsets and returns the future of the answer.
pub fn handle(ctx: &super::RequestContext, request: TxnOffsetCommitRequest) -> ResponseFuture {
    let (broker, version) = (&ctx.broker, ctx.api_version);
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
