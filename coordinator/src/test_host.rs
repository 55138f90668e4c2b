//! The coordinators' tests run over the real log: a [`TestHost`] implements the
//! coordinators' traits over a `logbook_replication::ReplicaManager` in a temporary
//! directory (a dev-dependency only), so replay, durability waits and markers are tested
//! against real partitions and their producer state. The broker's own implementation
//! (`CoordinatorPartitionWriter`) also goes through `Topics` and the controller, which
//! these tests have no use for; the per-partition part is the same thin delegation.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use logbook_replication::{AppendOutcome, Error, FlushPolicy, Offset, Partition, ReplicaManager};
use logbook_storage::LogConfig;
use parking_lot::Mutex;

use super::partition_writer::{
    CoordinatorHost, CoordinatorPartition, InternalTopic, InternalTopics, LogOffsets,
    PartitionWriter, WriteError,
};

/// Topics and their replicas in one directory, this broker leading every partition.
pub struct TestHost {
    /// The replicas, for tests that look at a partition itself.
    pub replicas: Arc<ReplicaManager>,
    /// Partition counts by topic.
    topics: Mutex<BTreeMap<String, i32>>,
}

impl TestHost {
    /// Opens `dir` with `policy`, reopening every partition a previous host left there (a
    /// broker's restart).
    pub fn open(dir: &Path, policy: FlushPolicy) -> Arc<Self> {
        let replicas = Arc::new(ReplicaManager::new(dir, policy, 1));
        let mut topics: BTreeMap<String, i32> = BTreeMap::new();
        for entry in std::fs::read_dir(dir)
            .expect("read the data directory")
            .flatten()
        {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some((topic, index)) = name.rsplit_once('-') else {
                continue;
            };
            let Ok(index) = index.parse::<i32>() else {
                continue;
            };
            if entry.path().is_dir() {
                let count = topics.entry(topic.to_string()).or_insert(0);
                *count = (*count).max(index + 1);
            }
        }
        for (topic, count) in &topics {
            replicas
                .create_partitions(topic, 0..*count, &LogConfig::default())
                .expect("reopen partitions");
        }
        Arc::new(TestHost {
            replicas,
            topics: Mutex::new(topics),
        })
    }

    /// The host as the coordinators take it.
    pub fn host(self: &Arc<Self>) -> Arc<dyn CoordinatorHost> {
        Arc::clone(self) as Arc<dyn CoordinatorHost>
    }

    /// Creates a data topic of `partitions` partitions.
    pub fn create_topic(&self, name: &str, partitions: i32) {
        self.replicas
            .create_partitions(name, 0..partitions, &LogConfig::default())
            .expect("create partitions");
        self.topics.lock().insert(name.to_string(), partitions);
    }
}

impl PartitionWriter for TestHost {
    fn partition(&self, topic: &str, index: i32) -> Option<Arc<dyn CoordinatorPartition>> {
        let partition = self.replicas.partition(topic, index)?;
        Some(Arc::new(Replica(partition)))
    }
}

impl InternalTopics for TestHost {
    fn partition_count(&self, topic: &str) -> Option<i32> {
        self.topics.lock().get(topic).copied()
    }

    fn create(&self, topic: InternalTopic<'_>) -> Result<i32, String> {
        if self.partition_count(topic.name).is_some() {
            return Err(format!("{} exists", topic.name));
        }
        self.create_topic(topic.name, topic.partitions);
        Ok(topic.partitions)
    }
}

/// A replica, as the coordinators use it.
struct Replica(Arc<Partition>);

fn classify(e: &Error) -> WriteError {
    use logbook_storage::Error as Storage;
    match e {
        Error::Timeout { .. }
        | Error::NotEnoughReplicas { .. }
        | Error::NotEnoughReplicasAfterAppend { .. } => WriteError::Unavailable(e.to_string()),
        Error::Storage(
            Storage::InvalidProducerEpoch { .. } | Storage::TransactionCoordinatorFenced { .. },
        ) => WriteError::Fenced(e.to_string()),
        _ => WriteError::NotLeader(e.to_string()),
    }
}

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
            logbook_replication::TxnResult::Commit
        } else {
            logbook_replication::TxnResult::Abort
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
