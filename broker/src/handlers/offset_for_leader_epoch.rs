//! OffsetForLeaderEpoch (API key 23): where a leader epoch ends in the leader's log.
//! Followers ask it to find where their log diverged from the leader's after a leader
//! change (KIP-101, KIP-279); consumers ask it to validate their position after they see
//! a new leader epoch in Metadata (KIP-320) and so notice a truncated log. Without this API a
//! client skips the validation silently.
//!
//! Each partition goes through `ReplicaManager::get_partition_or_error` (unknown partition,
//! fenced or unknown `current_leader_epoch`, not the leader) and is answered from the
//! leader-epoch cache by `Partition::end_offset_for_epoch`; an epoch the log cannot place is
//! UNDEFINED (epoch -1, offset -1), as Kafka answers.

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use kafka_protocol::protocol::VersionRange;
use logbook_replication::TopicPartition;

use crate::authorizer::{AclOperation, ResourceType};
use crate::errors;
use kafka_protocol::ResponseError;

/// Versions served: Kafka 4.x serves 2–4 (v0 and v1 were removed by KIP-896).
pub const VERSIONS: VersionRange = VersionRange { min: 2, max: 4 };

/// The epoch and offset of an undefined answer (Kafka's `UNDEFINED_EPOCH` and
/// `UNDEFINED_EPOCH_OFFSET`).
const UNDEFINED: i32 = -1;
const UNDEFINED_OFFSET: i64 = -1;

/// Answers an OffsetForLeaderEpoch request.
pub fn handle(
    ctx: &super::RequestContext,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let broker = &ctx.broker;
    // Followers hold CLUSTER_ACTION; consumers (KIP-320) need DESCRIBE on each topic.
    let cluster_action = ctx
        .authorizer
        .authorize_cluster_quietly(AclOperation::ClusterAction);
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let authorized = cluster_action
                || ctx.authorize(AclOperation::Describe, ResourceType::Topic, &t.topic);
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let response = EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(UNDEFINED)
                        .with_end_offset(UNDEFINED_OFFSET);
                    if !authorized {
                        return response
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code());
                    }
                    let topic_partition = TopicPartition {
                        topic: t.topic.to_string(),
                        partition: p.partition,
                    };
                    let answer = broker
                        .replicas
                        .get_partition_or_error(&topic_partition, p.current_leader_epoch)
                        .and_then(|partition| {
                            tokio::task::block_in_place(|| {
                                partition.end_offset_for_epoch(p.leader_epoch)
                            })
                        });
                    match answer {
                        Ok(Some((epoch, end))) => response
                            .with_leader_epoch(epoch.0)
                            .with_end_offset(end.get()),
                        Ok(None) => response,
                        Err(e) => response.with_error_code(errors::replication_error(&e).code()),
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}
