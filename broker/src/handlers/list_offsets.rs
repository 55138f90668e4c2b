//! ListOffsets (API key 2): the earliest, latest or max-timestamp offset of a partition, or
//! the first record at or after a timestamp (found through the time index, then by decoding
//! the one batch that holds it).
//!
//! KIP-207: a new leader whose high watermark is still below the start of its leader epoch
//! does not know the final high watermark yet; a client's (v2+, which carry an isolation
//! level) "latest", or a timestamp lookup that finds nothing below it, gets
//! OFFSET_NOT_AVAILABLE (retriable) instead of an offset that could go backwards.
//!
//! A follower (replica id >= 0) asks EARLIEST / LATEST on its out-of-range path: Kafka
//! answers replicas without an isolation level, so LATEST is the leader's log end (what the
//! follower must truncate to if it is ahead), not the high watermark, and KIP-207 does not
//! apply. Replicas, like consumers, are answered by the leader only.

use std::sync::Arc;

use kafka_protocol::messages::list_offsets_request::ListOffsetsPartition;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::ResponseError;
use logbook_replication::{Partition, TopicPartition};

use crate::authorizer::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::errors;
use crate::topics::Topic;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 1, max: 10 };

/// Kafka's special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

/// The records of a stored batch; a batch that no longer decodes is a disk problem.
fn summarize(
    partition: &Partition,
    batch: &bytes::Bytes,
) -> Result<Vec<crate::records::RecordSummary>, ResponseError> {
    crate::records::summarize(batch).map_err(|e| {
        tracing::error!(partition = %partition.topic_partition(), error = %e, "stored batch does not decode");
        ResponseError::CorruptMessage
    })
}

/// The leader epoch a stored batch was appended in (its header's partition leader epoch,
/// as Kafka's timestamp lookups answer it); -1 for a batch too short to say.
fn batch_epoch(batch: &bytes::Bytes) -> i32 {
    logbook_storage::RecordBatchHeader::parse(batch).map_or(-1, |h| h.partition_leader_epoch)
}

/// `isolation_level` of a read_committed consumer.
const READ_COMMITTED: i8 = 1;

/// First version carrying an isolation level: a client's request (Kafka applies KIP-207
/// only to those).
const ISOLATION_LEVEL_VERSION: i16 = 2;

/// Who asks, which decides the last offset answered (Kafka's `lastFetchableOffset`).
#[derive(Clone, Copy)]
enum Asker {
    /// A consumer at read_uncommitted: the high watermark.
    ReadUncommitted,
    /// A consumer at read_committed: the last stable offset.
    ReadCommitted,
    /// A follower: the log end.
    Replica,
}

/// (offset, timestamp, leader epoch) answered for one partition, the epoch as Kafka's
/// `fetchOffsetForTimestamp` answers it (KIP-320 clients validate their position with it):
/// the leader's current epoch for LATEST, the epoch the log start was written in for
/// EARLIEST, and the epoch of the batch holding the record found by a timestamp lookup;
/// -1 when unknown. A read_committed client sees only
/// what is below the last stable offset (Kafka's `lastFetchableOffset`): LATEST is the
/// LSO, and timestamp lookups ignore records at or above it; a replica sees the log end.
fn lookup(
    partition: &Partition,
    timestamp: i64,
    asker: Asker,
    client: bool,
) -> Result<(i64, i64, i32), ResponseError> {
    let offsets = partition
        .offsets()
        .map_err(|e| errors::replication_error(&e))?;
    // KIP-207, checked where Kafka checks it: "latest", and lookups that find nothing.
    let not_available = || -> Result<(), ResponseError> {
        if client {
            partition
                .check_offsets_available()
                .map_err(|e| errors::replication_error(&e))?;
        }
        Ok(())
    };
    let last_fetchable = match asker {
        Asker::ReadUncommitted => offsets.high_watermark.get(),
        Asker::ReadCommitted => offsets.last_stable_offset.get(),
        Asker::Replica => offsets.log_end_offset.get(),
    };
    let log_start_offset = offsets.log_start_offset.get();
    match timestamp {
        LATEST => {
            not_available()?;
            Ok((last_fetchable, -1, partition.leader_epoch().0))
        }
        EARLIEST | EARLIEST_LOCAL => {
            let epoch = partition
                .epoch_for_offset(offsets.log_start_offset)
                .map_err(|e| errors::replication_error(&e))?;
            Ok((log_start_offset, -1, epoch.map_or(-1, |e| e.0)))
        }
        // No tiered storage: nothing has been uploaded.
        LATEST_TIERED => Ok((-1, -1, -1)),
        MAX_TIMESTAMP => max_timestamp_lookup(partition, last_fetchable, &not_available),
        target if target >= 0 => timestamp_lookup(
            partition,
            target,
            log_start_offset..last_fetchable,
            &not_available,
        ),
        _ => Err(ResponseError::InvalidRequest),
    }
}

/// MAX_TIMESTAMP (KIP-734): the earliest record holding the largest timestamp below
/// `last_fetchable`. Only the batch holding the largest timestamp is decoded, not the log.
/// `not_available` is the KIP-207 check for a lookup finding nothing.
fn max_timestamp_lookup(
    partition: &Partition,
    last_fetchable: i64,
    not_available: &dyn Fn() -> Result<(), ResponseError>,
) -> Result<(i64, i64, i32), ResponseError> {
    let batch = partition
        .batch_with_max_timestamp()
        .map_err(|e| errors::replication_error(&e))?;
    let Some(batch) = batch else {
        not_available()?;
        return Ok((-1, -1, -1));
    };
    let epoch = batch_epoch(&batch);
    let records = summarize(partition, &batch)?;
    // The earliest record holding the largest timestamp, as Kafka answers.
    let best =
        records
            .iter()
            .filter(|r| r.offset < last_fetchable)
            .fold(None::<(i64, i64)>, |best, r| match best {
                Some((_, ts)) if ts >= r.timestamp => best,
                _ => Some((r.offset, r.timestamp)),
            });
    match best {
        Some((offset, timestamp)) => Ok((offset, timestamp, epoch)),
        None => not_available().map(|()| (-1, -1, -1)),
    }
}

/// The first record at or after `target` within `visible` (log start to last fetchable
/// offset): the time index finds the batch, and only that batch is decoded.
/// `not_available` is the KIP-207 check for a lookup finding nothing.
fn timestamp_lookup(
    partition: &Partition,
    target: i64,
    visible: std::ops::Range<i64>,
    not_available: &dyn Fn() -> Result<(), ResponseError>,
) -> Result<(i64, i64, i32), ResponseError> {
    let batch = partition
        .batch_for_timestamp(target)
        .map_err(|e| errors::replication_error(&e))?;
    let Some(batch) = batch else {
        not_available()?;
        return Ok((-1, -1, -1));
    };
    let epoch = batch_epoch(&batch);
    let records = summarize(partition, &batch)?;
    let found = records
        .iter()
        .find(|r| r.timestamp >= target && visible.contains(&r.offset));
    match found {
        Some(r) => Ok((r.offset, r.timestamp, epoch)),
        None => not_available().map(|()| (-1, -1, -1)),
    }
}

/// Answers a ListOffsets request.
pub fn handle(ctx: &super::RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse {
    let (broker, version) = (&ctx.broker, ctx.api_version);
    let replica = request.replica_id.0 >= 0;
    let asker = if replica {
        Asker::Replica
    } else if request.isolation_level == READ_COMMITTED {
        Asker::ReadCommitted
    } else {
        Asker::ReadUncommitted
    };
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            // DESCRIBE on the topic, checked before its existence is revealed.
            let topic = if ctx.authorize(AclOperation::Describe, ResourceType::Topic, &t.name) {
                broker
                    .topics
                    .get(t.name.as_str())
                    .ok_or(ResponseError::UnknownTopicOrPartition)
            } else {
                Err(ResponseError::TopicAuthorizationFailed)
            };
            let partitions = t
                .partitions
                .iter()
                .map(|p| partition_offsets(broker, &topic, p, asker, version, replica))
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    ListOffsetsResponse::default().with_topics(topics)
}

/// One partition's answer. Only the partition's leader answers (replicas too), at the
/// client's current leader epoch when it sent one, so a client with stale metadata is told
/// to refresh it (FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER) instead of given an offset.
fn partition_offsets(
    broker: &Broker,
    topic: &Result<Arc<Topic>, ResponseError>,
    p: &ListOffsetsPartition,
    asker: Asker,
    version: i16,
    replica: bool,
) -> ListOffsetsPartitionResponse {
    let response = ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index);
    let partition = match topic {
        Ok(topic) => broker
            .replicas
            .get_partition_or_error(
                &TopicPartition {
                    topic: topic.name.clone(),
                    partition: p.partition_index,
                },
                p.current_leader_epoch,
            )
            .map_err(|e| errors::replication_error(&e)),
        Err(e) => Err(*e),
    };
    let partition = match partition {
        Ok(partition) => partition,
        Err(e) => {
            return response
                .with_error_code(e.code())
                .with_offset(-1)
                .with_timestamp(-1)
        }
    };
    match tokio::task::block_in_place(|| {
        lookup(
            &partition,
            p.timestamp,
            asker,
            version >= ISOLATION_LEVEL_VERSION && !replica,
        )
    }) {
        Ok((offset, timestamp, epoch)) => response
            .with_offset(offset)
            .with_timestamp(timestamp)
            // The field exists from v4; earlier versions cannot carry it.
            .with_leader_epoch(if version >= 4 { epoch } else { -1 }),
        Err(e) => response
            .with_error_code(e.code())
            .with_offset(-1)
            .with_timestamp(-1),
    }
}
