//! The broker's side of the coordinators' traits (Kafka's `CoordinatorPartitionWriter`):
//! partitions are the `ReplicaManager`'s, internal topics are created through `Topics`
//! (and so through the controller in a cluster). The only place where a coordinator's
//! write meets `logbook_replication`; its errors are classified here, once, into the
//! [`WriteError`] classes the coordinators answer by.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use logbook_replication::{AppendOutcome, Error, Offset, Partition, TxnResult};

use crate::coordinator::partition_writer::{
    CoordinatorPartition, InternalTopic, InternalTopics, LogOffsets, PartitionWriter, WriteError,
};
use crate::topic_config::TopicConfig;
use crate::topics::{NewTopic, Topics};

/// The coordinators' view of this broker's topics and replicas.
pub struct CoordinatorPartitionWriter {
    topics: Arc<Topics>,
}

impl CoordinatorPartitionWriter {
    /// The writer over `topics` (and its replica manager).
    #[must_use]
    pub fn new(topics: Arc<Topics>) -> Arc<Self> {
        Arc::new(CoordinatorPartitionWriter { topics })
    }
}

impl PartitionWriter for CoordinatorPartitionWriter {
    fn partition(&self, topic: &str, index: i32) -> Option<Arc<dyn CoordinatorPartition>> {
        let partition = self.topics.replicas().partition(topic, index)?;
        Some(Arc::new(Replica(partition)))
    }
}

impl InternalTopics for CoordinatorPartitionWriter {
    fn partition_count(&self, topic: &str) -> Option<i32> {
        self.topics.get(topic).map(|t| t.partition_count)
    }

    fn create(&self, topic: InternalTopic<'_>) -> Result<i32, String> {
        let config = TopicConfig::from_pairs(topic.configs.iter().map(|(k, v)| (*k, Some(*v))))
            .map_err(|e| e.to_string())?;
        self.topics
            .create_internal(NewTopic {
                name: topic.name,
                partitions: topic.partitions,
                replication_factor: topic.replication_factor,
                config,
            })
            .map(|t| t.partition_count)
            .map_err(|e| e.to_string())
    }
}

/// A replica of an internal (or, for markers, any) partition.
struct Replica(Arc<Partition>);

impl CoordinatorPartition for Replica {
    fn name(&self) -> String {
        self.0.topic_partition().to_string()
    }

    fn is_leader(&self) -> bool {
        self.0.is_leader()
    }

    fn leader_epoch(&self) -> i32 {
        self.0.leader_epoch().0
    }

    fn high_watermark(&self) -> i64 {
        self.0.high_watermark().get()
    }

    fn append(&self, batch: &[u8]) -> Result<i64, WriteError> {
        match self.0.append_for_coordinator(batch) {
            Ok(AppendOutcome::Appended(info)) => Ok(info.log_end_offset.get()),
            // Coordinator batches carry no producer id, or (TxnOffsetCommit) a sequence the
            // coordinator never repeats: a duplicate means the log is not what we think.
            Ok(AppendOutcome::Duplicate(_)) => Err(WriteError::Duplicate(self.name())),
            Err(e) => Err(classify(&e)),
        }
    }

    fn wait_committed(
        &self,
        offset: i64,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<(), WriteError>> {
        Box::pin(async move {
            self.0
                .wait_durable(Offset(offset), timeout)
                .await
                .map_err(|e| classify(&e))
        })
    }

    fn write_txn_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        commit: bool,
    ) -> Result<i64, WriteError> {
        let result = if commit {
            TxnResult::Commit
        } else {
            TxnResult::Abort
        };
        self.0
            .write_txn_marker(producer_id, producer_epoch, coordinator_epoch, result)
            .map(Offset::get)
            .map_err(|e| classify(&e))
    }

    fn offsets(&self) -> Result<LogOffsets, WriteError> {
        let o = self.0.offsets().map_err(|e| classify(&e))?;
        Ok(LogOffsets {
            log_start: o.log_start_offset.get(),
            high_watermark: o.high_watermark.get(),
            log_end: o.log_end_offset.get(),
        })
    }

    fn read(&self, offset: i64, max_bytes: usize) -> Result<Bytes, WriteError> {
        self.0
            .read_to_log_end(Offset(offset), max_bytes, true)
            .map(|r| r.records)
            .map_err(|e| classify(&e))
    }
}

/// The class of a replication error, as Kafka's coordinators answer it: write timeouts
/// and too few in-sync replicas are retriable (COORDINATOR_NOT_AVAILABLE), a stale marker
/// is fenced, anything else means this broker cannot write the partition
/// (NOT_COORDINATOR).
fn classify(e: &Error) -> WriteError {
    use logbook_storage::Error as Storage;
    let message = e.to_string();
    match e {
        Error::Timeout { .. }
        | Error::NotEnoughReplicas { .. }
        | Error::NotEnoughReplicasAfterAppend { .. } => WriteError::Unavailable(message),
        Error::Storage(
            Storage::InvalidProducerEpoch { .. } | Storage::TransactionCoordinatorFenced { .. },
        ) => WriteError::Fenced(message),
        Error::Closed(_)
        | Error::Storage(_)
        | Error::UnknownTopicOrPartition(_)
        | Error::NotLeaderOrFollower(_)
        | Error::FencedLeaderEpoch { .. }
        | Error::UnknownLeaderEpoch { .. }
        | Error::InconsistentTopicId { .. }
        | Error::OffsetNotAvailable { .. } => WriteError::NotLeader(message),
    }
}
