//! `ReplicaManager::append_records`: the one way a client's produce payload reaches a log
//! (Kafka's `ReplicaManager.appendRecords` for one partition): find the partition the
//! client may write to, validate the payload at the door (storage's `log_validator`, off
//! the async worker when it is large), let the caller's check refuse it (the transaction
//! coordinator's KIP-890 verification), then append with the request's acks promise.
//!
//! Why here and not in the produce handler: the handler then speaks only to the replica
//! manager, as Kafka's `KafkaApis.handleProduceRequest` does; which partition, in what
//! order the checks run and what a failure means are decided in one place, next to the
//! partition they guard. The acks=all wait is [`ReplicaManager::wait_for_acks_all`],
//! over all of one request's partitions together, as Kafka's `DelayedProduce`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use logbook_storage::log_validator::{self, ValidatedBatches, ValidatorConfig};
use logbook_storage::record_batch::RecordBatchHeader;
use logbook_storage::{AppendOutcome, Offset, ValidationError};

use super::ReplicaManager;
use crate::{Error, Partition, TopicPartition};

/// One partition's records from a Produce request and what the topic and request impose
/// on them.
pub struct AppendRecords<'a> {
    /// The partition written to.
    pub topic_partition: &'a TopicPartition,
    /// The payload as received.
    pub records: &'a Bytes,
    /// The topic's validation rules (Kafka's `LogValidator` arguments).
    pub validator: &'a ValidatorConfig,
    /// Payloads at or above these sizes are validated in `block_in_place`.
    pub off_worker: OffWorker,
    /// The request's acks (-1, 0 or 1).
    pub required_acks: i16,
    /// The topic's `min.insync.replicas` (at least 1).
    pub min_insync_replicas: usize,
}

/// When validation leaves the async worker: a walk of a large payload (or decompressing a
/// compressed one) would hold the worker, and every connection it serves, for that long.
#[derive(Clone, Copy, Debug)]
pub struct OffWorker {
    /// Any payload of at least this many bytes.
    pub bytes_min: usize,
    /// A compressed payload of at least this many bytes.
    pub compressed_bytes_min: usize,
}

impl OffWorker {
    /// Whether a payload of `payload_bytes`, compressed or not, is validated off the
    /// worker.
    #[must_use]
    pub fn applies_to(self, payload_bytes: usize, compressed: bool) -> bool {
        payload_bytes >= self.bytes_min
            || (compressed && payload_bytes >= self.compressed_bytes_min)
    }

    /// [`OffWorker::applies_to`] for `records` (compressed when its first batch is).
    fn applies(self, records: &Bytes) -> bool {
        let compressed =
            || RecordBatchHeader::parse(records).is_ok_and(|h| h.compression_codec() != 0);
        records.len() >= self.bytes_min
            || (records.len() >= self.compressed_bytes_min && compressed())
    }
}

/// Why a partition's records were not appended.
#[derive(Debug)]
pub enum AppendRecordsError<R> {
    /// The partition is not one the client may write to: unknown here, offline, or not
    /// led by this broker.
    Partition(Error),
    /// The payload failed validation; nothing was appended.
    Invalid(ValidationError),
    /// The caller's check refused the validated batches; nothing was appended.
    Refused(R),
    /// The append itself failed (including acks=all refused for too few in-sync
    /// replicas).
    Append(Error),
}

/// An append that happened (or a retried batch found already appended).
pub struct AppendedRecords {
    /// The partition appended to.
    pub partition: Arc<Partition>,
    /// The payload as validated (its log-append time, record count, bytes).
    pub validated: ValidatedBatches,
    /// Where the batches went, or the first append's answer for a duplicate.
    pub outcome: AppendOutcome,
}

impl AppendedRecords {
    /// What acks=all waits for: the end of this append, or of the first append of a
    /// retried batch, under the topic's `min.insync.replicas`.
    #[must_use]
    pub fn pending_ack(&self, min_insync_replicas: usize) -> PendingAck {
        let end_offset = match &self.outcome {
            AppendOutcome::Duplicate(cached) => cached.last_offset.next(),
            AppendOutcome::Appended(info) => info.log_end_offset,
        };
        PendingAck {
            partition: Arc::clone(&self.partition),
            end_offset,
            min_insync_replicas,
        }
    }
}

/// An append acks=all must see committed before the client is answered.
pub struct PendingAck {
    partition: Arc<Partition>,
    end_offset: Offset,
    min_insync_replicas: usize,
}

impl ReplicaManager {
    /// Appends a client's records to the partition it leads: the partition (as
    /// [`ReplicaManager::get_partition_or_error`], any leader epoch), then validation, then
    /// `check` on the validated batches, then the append with acks=all's
    /// `min.insync.replicas` promise. Nothing is appended unless every step passes.
    ///
    /// # Errors
    /// See [`AppendRecordsError`]: which step refused.
    pub fn append_records<R>(
        &self,
        request: &AppendRecords<'_>,
        check: impl FnOnce(&Partition, &ValidatedBatches) -> Result<(), R>,
    ) -> Result<AppendedRecords, AppendRecordsError<R>> {
        let partition = self
            .get_partition_or_error(request.topic_partition, -1)
            .map_err(AppendRecordsError::Partition)?;
        let validated = if request.off_worker.applies(request.records) {
            tokio::task::block_in_place(|| {
                log_validator::validate(request.records.clone(), request.validator)
            })
        } else {
            log_validator::validate(request.records.clone(), request.validator)
        }
        .map_err(AppendRecordsError::Invalid)?;
        check(&partition, &validated).map_err(AppendRecordsError::Refused)?;
        // The bytes are those received, except where the validator rewrote a batch's
        // timestamp fields as Kafka does (LogAppendTime, or a maxTimestamp that disagreed
        // with the records).
        let outcome = partition
            .append_as_leader(
                &validated,
                request.required_acks,
                request.min_insync_replicas,
            )
            .map_err(AppendRecordsError::Append)?;
        Ok(AppendedRecords {
            partition,
            validated,
            outcome,
        })
    }

    /// acks=1: waits for each append to be held by its leader as the leader counts it
    /// ([`Partition::wait_for_acks_leader`]); one result per pending append, in order.
    pub async fn wait_for_acks_leader<'a>(
        pending: impl IntoIterator<Item = &'a PendingAck>,
        timeout: Duration,
    ) -> Vec<Result<(), Error>> {
        futures::future::join_all(
            pending
                .into_iter()
                .map(|p| p.partition.wait_for_acks_leader(p.end_offset, timeout)),
        )
        .await
    }

    /// Waits for every append of one request together (Kafka's `DelayedProduce`): each
    /// succeeds once the high watermark passes it with the ISR still at its
    /// `min.insync.replicas`; answers in the order given.
    pub async fn wait_for_acks_all<'a>(
        pending: impl IntoIterator<Item = &'a PendingAck>,
        timeout: Duration,
    ) -> Vec<Result<(), Error>> {
        futures::future::join_all(pending.into_iter().map(|p| {
            p.partition
                .wait_for_acks_all(p.end_offset, timeout, p.min_insync_replicas)
        }))
        .await
    }
}
