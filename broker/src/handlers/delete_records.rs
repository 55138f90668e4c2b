//! DeleteRecords (API key 21): raises partitions' log start offsets (Kafka Streams purges
//! its repartition topics this way, `kafka-delete-records.sh` too). Answered once the new
//! log start is checkpointed durably, so it survives a crash; the segments wholly below it
//! are deleted at once. The I/O runs on the blocking pool, off the async workers.

use std::sync::Arc;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse, ResponseKind};
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::ResponseError;
use logbook_replication::{Offset, TopicPartition};

use super::{RequestContext, ResponseFuture};
use crate::broker::Broker;
use crate::errors;
use crate::topics;

/// Versions served (Kafka 4.x serves 0-2).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

/// One partition's answer: its low watermark (the new log start), or an error with -1.
fn delete_one(
    broker: &Broker,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<i64, ResponseError> {
    // Kafka's order: unknown partitions first (KafkaApis), then internal topics and the
    // cleanup policy (ReplicaManager, Partition.deleteRecordsOnLeader).
    let Some(meta) = broker.topics.get(topic) else {
        return Err(ResponseError::UnknownTopicOrPartition);
    };
    if partition < 0 || partition >= meta.partition_count {
        return Err(ResponseError::UnknownTopicOrPartition);
    }
    if topics::is_internal(topic) {
        return Err(ResponseError::InvalidTopicException);
    }
    let deletes = meta
        .config
        .get("cleanup.policy", broker.topics.defaults())
        .is_some_and(|v| {
            v.split(',')
                .any(|p| p.trim().eq_ignore_ascii_case("delete"))
        });
    if !deletes {
        return Err(ResponseError::PolicyViolation);
    }
    let topic_partition = TopicPartition {
        topic: topic.to_owned(),
        partition,
    };
    let partition = broker
        .replicas
        .get_partition_or_error(&topic_partition, -1)
        .map_err(|e| errors::replication_error(&e))?;
    partition
        .delete_records_before(Offset(offset))
        .map(Offset::get)
        .map_err(|e| errors::replication_error(&e))
}

/// Answers a DeleteRecords request (after the checkpoints, on the blocking pool).
pub fn handle(ctx: &RequestContext, request: DeleteRecordsRequest) -> ResponseFuture {
    let broker = Arc::clone(&ctx.broker);
    Box::pin(async move {
        let work = tokio::task::spawn_blocking(move || {
            let topics = request
                .topics
                .into_iter()
                .map(|t| {
                    let partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let result = DeleteRecordsPartitionResult::default()
                                .with_partition_index(p.partition_index);
                            match delete_one(&broker, t.name.as_str(), p.partition_index, p.offset)
                            {
                                Ok(low_watermark) => result.with_low_watermark(low_watermark),
                                Err(e) => result.with_low_watermark(-1).with_error_code(e.code()),
                            }
                        })
                        .collect();
                    DeleteRecordsTopicResult::default()
                        .with_name(t.name)
                        .with_partitions(partitions)
                })
                .collect();
            DeleteRecordsResponse::default().with_topics(topics)
        });
        match work.await {
            Ok(response) => Some(ResponseKind::DeleteRecords(response).into()),
            Err(e) => {
                tracing::error!(error = %e, "DeleteRecords panicked");
                None
            }
        }
    })
}
