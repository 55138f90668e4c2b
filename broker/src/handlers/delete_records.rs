//! DeleteRecords (API key 21): raises partitions' log start offsets (Kafka Streams purges
//! its repartition topics this way, `kafka-delete-records.sh` too). Answered once the new
//! log start is checkpointed durably, so it survives a crash, and — as Kafka's
//! `DelayedDeleteRecords` — once every follower in the ISR has moved its own log start there
//! too (the low watermark), so a failover cannot bring the deleted records back; a request
//! whose followers do not follow within its timeout gets REQUEST_TIMED_OUT. The segments
//! wholly below the new start are deleted at once. The I/O runs on the blocking pool, off
//! the async workers.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse, ResponseKind};
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::ResponseError;
use logbook_replication::{Offset, Partition, TopicPartition};

use super::{RequestContext, ResponseFuture};
use crate::authorizer::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::errors;
use crate::topics;

/// Versions served (Kafka 4.x serves 0-2).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

/// How often a DeleteRecords waiting for its followers looks at their log starts again
/// (they report them in their fetches, every `replica.fetch.wait.max.ms` at most).
const LOW_WATERMARK_POLL: Duration = Duration::from_millis(10);

/// One partition's deletion: the partition and its new log start, or an error.
fn delete_one(
    broker: &Broker,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<(Arc<Partition>, i64), ResponseError> {
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
    let start = partition
        .delete_records_before(Offset(offset))
        .map_err(|e| errors::replication_error(&e))?;
    Ok((partition, start.get()))
}

/// Waits until `partition`'s low watermark reaches `start` (every follower in the ISR moved
/// its log start there) and answers it, or REQUEST_TIMED_OUT at `deadline`.
async fn wait_low_watermark(
    partition: &Partition,
    start: i64,
    deadline: tokio::time::Instant,
) -> Result<i64, ResponseError> {
    loop {
        let low = partition
            .low_watermark()
            .map_err(|e| errors::replication_error(&e))?
            .get();
        if low >= start {
            return Ok(low);
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::info!(partition = %partition.topic_partition(), low_watermark = low, log_start = start, "DeleteRecords timed out waiting for followers");
            return Err(ResponseError::RequestTimedOut);
        }
        tokio::time::sleep(LOW_WATERMARK_POLL).await;
    }
}

/// Answers a DeleteRecords request: deletes on the blocking pool, then waits for the
/// followers of every partition deleted from, up to the request's timeout.
pub fn handle(ctx: &RequestContext, request: DeleteRecordsRequest) -> ResponseFuture {
    let broker = Arc::clone(&ctx.broker);
    let timeout = Duration::from_millis(u64::try_from(request.timeout_ms.max(0)).unwrap_or(0));
    // DELETE on each topic, checked before its existence is revealed.
    let may_delete: Vec<bool> = request
        .topics
        .iter()
        .map(|t| ctx.authorize(AclOperation::Delete, ResourceType::Topic, &t.name))
        .collect();
    Box::pin(async move {
        let deadline = tokio::time::Instant::now() + timeout;
        let work = tokio::task::spawn_blocking(move || {
            request
                .topics
                .into_iter()
                .zip(may_delete)
                .map(|(t, may_delete)| {
                    let partitions: Vec<_> = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let result = if may_delete {
                                delete_one(&broker, t.name.as_str(), p.partition_index, p.offset)
                            } else {
                                Err(ResponseError::TopicAuthorizationFailed)
                            };
                            (p.partition_index, result)
                        })
                        .collect();
                    (t.name, partitions)
                })
                .collect::<Vec<_>>()
        });
        let deleted = match work.await {
            Ok(deleted) => deleted,
            Err(e) => {
                tracing::error!(error = %e, "DeleteRecords panicked");
                return None;
            }
        };
        let mut topics = Vec::with_capacity(deleted.len());
        for (name, partitions) in deleted {
            let mut results = Vec::with_capacity(partitions.len());
            for (index, result) in partitions {
                let result = match result {
                    Ok((partition, start)) => wait_low_watermark(&partition, start, deadline).await,
                    Err(e) => Err(e),
                };
                let answer = DeleteRecordsPartitionResult::default().with_partition_index(index);
                results.push(match result {
                    Ok(low_watermark) => answer.with_low_watermark(low_watermark),
                    Err(e) => answer.with_low_watermark(-1).with_error_code(e.code()),
                });
            }
            topics.push(
                DeleteRecordsTopicResult::default()
                    .with_name(name)
                    .with_partitions(results),
            );
        }
        Some(
            ResponseKind::DeleteRecords(DeleteRecordsResponse::default().with_topics(topics))
                .into(),
        )
    })
}
