//! Replication between in-process `ReplicaManager`s, each with its own data directory,
//! flusher and real `Partition`s: the followers' fetchers (started by
//! `apply_partition_changes`) reach the leader through `Loopback`, an end point that calls
//! the leader manager as the broker's Fetch, OffsetsForLeaderEpoch and ListOffsets
//! handlers do (`get_partition_or_error`, then `fetch_for_follower` /
//! `end_offset_for_epoch`; LATEST from a replica is the log end).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use logbook_storage::log_validator::{self, AppendOrigin, ValidatorConfig};
use logbook_storage::{AppendOutcome, LeaderEpoch, LogConfig, Offset};
use parking_lot::Mutex;

use super::super::{
    BoxedLeaderEndPoint, EndPointError, EpochEndOffset, EpochRequest, EpochResult, FetchRequest,
    FetchedPartition, FetcherConfig, LeaderEndPoint, LeaderEndPointFactory, LeaderError,
};
use super::support::batch;
use crate::{
    Error, FlushPolicy, FollowerFetch, FollowerFetchResult, PartitionState, ReplicaManager,
    TopicPartition,
};

const TIMEOUT: Duration = Duration::from_secs(20);

type Registry = Arc<Mutex<BTreeMap<i32, Weak<ReplicaManager>>>>;

/// What a follower sent: a fetch at `offset` while its durable offset was `durable`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SentFetch {
    follower: i32,
    offset: i64,
    durable: i64,
}

/// Every follower's fetches, in order.
type Journal = Arc<Mutex<Vec<SentFetch>>>;

struct Loopback {
    leader_id: i32,
    leader: Weak<ReplicaManager>,
    follower: Weak<ReplicaManager>,
    replica_id: i32,
    journal: Journal,
}

fn leader_error(e: &Error) -> LeaderError {
    match e {
        Error::FencedLeaderEpoch { .. } => LeaderError::FencedLeaderEpoch,
        Error::UnknownLeaderEpoch { .. } => LeaderError::UnknownLeaderEpoch,
        Error::NotLeaderOrFollower(_) => LeaderError::NotLeaderOrFollower,
        Error::UnknownTopicOrPartition(_) => LeaderError::UnknownTopicOrPartition,
        Error::Storage(logbook_storage::Error::OffsetOutOfRange { .. }) => {
            LeaderError::OffsetOutOfRange
        }
        _ => LeaderError::Other(-1),
    }
}

impl Loopback {
    fn manager(&self) -> Result<Arc<ReplicaManager>, EndPointError> {
        self.leader.upgrade().ok_or_else(|| {
            EndPointError::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused))
        })
    }

    /// One pass over the request's partitions; `true` if anything came back.
    fn fetch_once(
        &self,
        request: &FetchRequest,
    ) -> Result<(Vec<FetchedPartition>, bool), EndPointError> {
        let leader = self.manager()?;
        let follower = self.follower.upgrade();
        let mut out = Vec::new();
        let mut any = false;
        for p in &request.partitions {
            let tp = &p.topic_partition;
            if let Some(local) = follower
                .as_ref()
                .and_then(|f| f.partition(&tp.topic, tp.partition))
            {
                self.journal.lock().push(SentFetch {
                    follower: self.replica_id,
                    offset: p.fetch_offset.get(),
                    durable: local.durable_offset().get(),
                });
            }
            let mut answer = FetchedPartition {
                topic_partition: tp.clone(),
                error: None,
                high_watermark: Offset(-1),
                log_start_offset: Offset(-1),
                diverging_epoch: None,
                records: Bytes::new(),
            };
            let fetch = FollowerFetch {
                replica_id: self.replica_id,
                replica_epoch: 1,
                fetch_offset: p.fetch_offset,
                log_start_offset: p.log_start_offset,
                current_leader_epoch: p.current_leader_epoch.0,
                last_fetched_epoch: p.last_fetched_epoch.map_or(-1, |e| e.0),
                max_bytes: usize::try_from(p.partition_max_bytes).unwrap_or(0),
                min_one_batch: true,
            };
            let result = leader
                .get_partition_or_error(tp, p.current_leader_epoch.0)
                .and_then(|partition| {
                    partition.fetch_for_follower(&fetch, crate::partition::now_ms())
                });
            match result {
                Ok(FollowerFetchResult::Records { read, offsets }) => {
                    let mut bytes = Vec::new();
                    for slice in &read.slices {
                        slice.read_into(&mut bytes).expect("read leader slice");
                    }
                    any |= !bytes.is_empty();
                    answer.high_watermark = offsets.high_watermark;
                    answer.log_start_offset = offsets.log_start_offset;
                    answer.records = Bytes::from(bytes);
                }
                Ok(FollowerFetchResult::Diverging {
                    epoch,
                    end_offset,
                    offsets,
                }) => {
                    any = true;
                    answer.high_watermark = offsets.high_watermark;
                    answer.log_start_offset = offsets.log_start_offset;
                    answer.diverging_epoch = Some(EpochEndOffset {
                        leader_epoch: epoch.0,
                        end_offset: end_offset.get(),
                    });
                }
                Err(e) => {
                    any = true;
                    answer.error = Some(leader_error(&e));
                }
            }
            out.push(answer);
        }
        Ok((out, any))
    }
}

impl LeaderEndPoint for Loopback {
    fn broker_id(&self) -> i32 {
        self.leader_id
    }

    async fn fetch(
        &mut self,
        request: FetchRequest,
    ) -> Result<Vec<FetchedPartition>, EndPointError> {
        let deadline = tokio::time::Instant::now()
            + Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
        loop {
            // Subscribe before reading, as the broker's long poll does.
            let mut log_end = {
                let leader = self.manager()?;
                request.partitions.first().and_then(|p| {
                    leader
                        .partition(&p.topic_partition.topic, p.topic_partition.partition)
                        .map(|partition| partition.subscribe_log_end())
                })
            };
            let (answers, any) = self.fetch_once(&request)?;
            if any || tokio::time::Instant::now() >= deadline {
                return Ok(answers);
            }
            let changed = async {
                match log_end.as_mut() {
                    Some(rx) => {
                        let _ = rx.changed().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep_until(deadline) => {}
                // Several partitions: only the first one's log end wakes us; poll the rest.
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        }
    }

    async fn fetch_epoch_end_offsets(
        &mut self,
        partitions: Vec<EpochRequest>,
    ) -> Result<Vec<EpochResult>, EndPointError> {
        let leader = self.manager()?;
        Ok(partitions
            .into_iter()
            .map(|p| {
                let answer = leader
                    .get_partition_or_error(&p.topic_partition, p.current_leader_epoch.0)
                    .and_then(|partition| partition.end_offset_for_epoch(p.leader_epoch.0));
                let (error, end) = match answer {
                    Ok(Some((epoch, end))) => (None, (epoch.0, end.get())),
                    Ok(None) => (None, (-1, -1)),
                    Err(e) => (Some(leader_error(&e)), (-1, -1)),
                };
                EpochResult {
                    topic_partition: p.topic_partition,
                    error,
                    end: EpochEndOffset {
                        leader_epoch: end.0,
                        end_offset: end.1,
                    },
                }
            })
            .collect())
    }

    async fn fetch_earliest_offset(
        &mut self,
        topic_partition: &TopicPartition,
        current_leader_epoch: LeaderEpoch,
    ) -> Result<Offset, EndPointError> {
        let leader = self.manager()?;
        leader
            .get_partition_or_error(topic_partition, current_leader_epoch.0)
            .and_then(|p| p.offsets())
            .map(|o| o.log_start_offset)
            .map_err(|e| EndPointError::Refused(leader_error(&e)))
    }

    async fn fetch_latest_offset(
        &mut self,
        topic_partition: &TopicPartition,
        current_leader_epoch: LeaderEpoch,
    ) -> Result<Offset, EndPointError> {
        let leader = self.manager()?;
        leader
            .get_partition_or_error(topic_partition, current_leader_epoch.0)
            .and_then(|p| p.offsets())
            .map(|o| o.log_end_offset)
            .map_err(|e| EndPointError::Refused(leader_error(&e)))
    }
}

struct LoopbackFactory {
    registry: Registry,
    replica_id: i32,
    journal: Journal,
}

impl LeaderEndPointFactory for LoopbackFactory {
    fn end_point(&self, leader_id: i32) -> Option<BoxedLeaderEndPoint> {
        let registry = self.registry.lock();
        let leader = registry.get(&leader_id)?.clone();
        let follower = registry.get(&self.replica_id).cloned().unwrap_or_default();
        Some(BoxedLeaderEndPoint(Box::new(Loopback {
            leader_id,
            leader,
            follower,
            replica_id: self.replica_id,
            journal: Arc::clone(&self.journal),
        })))
    }
}

/// In-process brokers hosting topic "t" partition 0.
struct Cluster {
    registry: Registry,
    journal: Journal,
    nodes: BTreeMap<i32, Arc<ReplicaManager>>,
}

fn tp() -> TopicPartition {
    TopicPartition {
        topic: "t".to_string(),
        partition: 0,
    }
}

fn state(replicas: &[i32], isr: &[i32], leader: i32, epoch: i32) -> PartitionState {
    PartitionState {
        topic_partition: tp(),
        topic_id: uuid::Uuid::from_u128(7),
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
        leader,
        leader_epoch: LeaderEpoch(epoch),
        partition_epoch: epoch,
    }
}

impl Cluster {
    fn new() -> Self {
        Self {
            registry: Arc::new(Mutex::new(BTreeMap::new())),
            journal: Arc::new(Mutex::new(Vec::new())),
            nodes: BTreeMap::new(),
        }
    }

    /// Starts (or restarts from its directory) broker `id`.
    fn start(&mut self, id: i32, dir: &Path) -> Arc<ReplicaManager> {
        let factory = LoopbackFactory {
            registry: Arc::clone(&self.registry),
            replica_id: id,
            journal: Arc::clone(&self.journal),
        };
        let manager = Arc::new(
            ReplicaManager::new(dir, FlushPolicy::EveryWrite, 1)
                .with_broker_id(id)
                .with_controller_leadership()
                .with_leader_end_point_factory(Arc::new(factory))
                .with_fetcher_config(FetcherConfig {
                    max_wait_ms: 100,
                    backoff: Duration::from_millis(50),
                    ..FetcherConfig::default()
                }),
        );
        let config = LogConfig {
            segment_bytes: 4096,
            ..LogConfig::default()
        };
        manager
            .create_partitions("t", 0..1, &config)
            .expect("create partition");
        self.registry.lock().insert(id, Arc::downgrade(&manager));
        self.nodes.insert(id, Arc::clone(&manager));
        manager
    }

    fn node(&self, id: i32) -> &Arc<ReplicaManager> {
        self.nodes.get(&id).expect("node")
    }

    fn partition(&self, id: i32) -> Arc<crate::Partition> {
        self.node(id).partition("t", 0).expect("partition")
    }

    fn apply(&self, ids: &[i32], state: &PartitionState) {
        for id in ids {
            for (tp, result) in self.node(*id).apply_partition_changes(vec![state.clone()]) {
                result.unwrap_or_else(|e| panic!("apply on {id} for {tp}: {e}"));
            }
        }
    }

    /// Appends `records` records on `leader` as a producer with `acks`; returns the
    /// offset after them.
    fn produce(&self, leader: i32, records: usize, acks: i16, min_isr: usize) -> Offset {
        let config = ValidatorConfig {
            origin: AppendOrigin::Client,
            log_append_time: false,
            compacted: false,
            max_message_bytes: 1 << 20,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: i64::MAX,
            now_ms: 1_000,
            decompressed_bytes_max: 1 << 20,
            target_codec: None,
        };
        let validated = log_validator::validate(Bytes::from(batch(records, None)), &config)
            .expect("valid batch");
        match self
            .partition(leader)
            .append_as_leader(&validated, acks, min_isr)
            .expect("append")
        {
            AppendOutcome::Appended(info) => info.log_end_offset,
            AppendOutcome::Duplicate(_) => panic!("not idempotent"),
        }
    }

    /// Every batch of broker `id`'s log, as stored.
    fn log_bytes(&self, id: i32) -> Vec<u8> {
        let partition = self.partition(id);
        let start = partition.offsets().expect("offsets").log_start_offset;
        partition
            .with_log(|log| log.read(start, usize::MAX, Offset::MAX, true))
            .expect("read")
            .records
            .to_vec()
    }

    fn epochs(&self, id: i32) -> Vec<(i32, i64)> {
        self.partition(id)
            .with_log(|log| {
                Ok(log
                    .leader_epochs()
                    .entries()
                    .iter()
                    .map(|e| (e.epoch.0, e.start_offset))
                    .collect())
            })
            .expect("epochs")
    }

    /// Waits until `done` holds (checked every 10 ms).
    async fn until(&self, what: &str, mut done: impl FnMut(&Self) -> bool) {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        while !done(self) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn shutdown(self) {
        for node in self.nodes.values() {
            node.shutdown_fetchers().await;
            let node = Arc::clone(node);
            tokio::task::block_in_place(|| node.shutdown());
        }
    }
}

fn tempdirs(n: usize) -> Vec<tempfile::TempDir> {
    (0..n)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect()
}

// RF=3: the followers' fetchers (started by apply_partition_changes) copy the leader's log
// byte for byte; an acks=all produce with min.insync.replicas=2 completes once the high
// watermark passes it, and every fetch offset the leader counted was already durable on
// its follower (fsync before the next fetch); followers learn the high watermark from the
// leader, and a DeleteRecords on the leader moves their log start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rf3_replicates_and_acks_all_waits_for_followers_fsync() {
    let dirs = tempdirs(3);
    let mut cluster = Cluster::new();
    for (id, dir) in (1..=3).zip(&dirs) {
        cluster.start(id, dir.path());
    }
    let assignment = state(&[1, 2, 3], &[1, 2, 3], 1, 1);
    cluster.apply(&[1, 2, 3], &assignment);

    let mut end = Offset(0);
    for records in [3, 5, 2] {
        end = cluster.produce(1, records, -1, 2);
        cluster
            .partition(1)
            .wait_for_acks_all(end, TIMEOUT, 2)
            .await
            .expect("acks=all completes");
    }
    assert_eq!(end, Offset(10));
    assert_eq!(cluster.partition(1).high_watermark(), Offset(10));
    cluster
        .until("followers at the leader's high watermark", |c| {
            (2..=3).all(|id| c.partition(id).high_watermark() == Offset(10))
        })
        .await;
    let leader_bytes = cluster.log_bytes(1);
    for id in 2..=3 {
        assert_eq!(cluster.log_bytes(id), leader_bytes, "follower {id}'s log");
        assert_eq!(cluster.epochs(id), vec![(1, 0)]);
        assert_eq!(cluster.partition(id).durable_offset(), Offset(10));
    }
    let journal = cluster.journal.lock().clone();
    assert!(journal.iter().any(|f| f.offset == 10), "{journal:?}");
    for fetch in &journal {
        assert!(
            fetch.offset <= fetch.durable,
            "follower {} fetched at {} with only {} durable",
            fetch.follower,
            fetch.offset,
            fetch.durable
        );
    }

    let leader = cluster.partition(1);
    tokio::task::block_in_place(|| leader.delete_records_before(Offset(4))).expect("delete");
    let end = cluster.produce(1, 1, -1, 2);
    leader
        .wait_for_acks_all(end, TIMEOUT, 2)
        .await
        .expect("acks=all");
    cluster
        .until("followers' log start at 4", |c| {
            (2..=3)
                .all(|id| c.partition(id).offsets().expect("offsets").log_start_offset == Offset(4))
        })
        .await;
    cluster.shutdown().await;
}

// KIP-320: broker 1 led epoch 1 and appended a tail nobody else has (acks=1) after brokers
// 2 and 3 moved to epoch 2 under leader 2. When metadata makes broker 1 a follower of 2, its
// fetch gets the diverging epoch, it truncates the tail and copies leader 2's log, so all
// three logs end identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_leader_truncates_its_divergent_tail() {
    let dirs = tempdirs(3);
    let mut cluster = Cluster::new();
    for (id, dir) in (1..=3).zip(&dirs) {
        cluster.start(id, dir.path());
    }
    cluster.apply(&[1, 2, 3], &state(&[1, 2, 3], &[1, 2, 3], 1, 1));
    let end = cluster.produce(1, 4, -1, 2);
    cluster
        .partition(1)
        .wait_for_acks_all(end, TIMEOUT, 2)
        .await
        .expect("acks=all");
    cluster
        .until("followers have offset 4", |c| {
            (2..=3).all(|id| c.partition(id).log_end_offset() == Offset(4))
        })
        .await;

    // Leader 2 in epoch 2; broker 1 has not heard and still leads epoch 1.
    let epoch2 = state(&[1, 2, 3], &[2, 3], 2, 2);
    cluster.apply(&[2, 3], &epoch2);
    cluster.produce(1, 3, 1, 1);
    assert_eq!(cluster.partition(1).log_end_offset(), Offset(7));
    let end = cluster.produce(2, 2, -1, 2);
    assert_eq!(end, Offset(6));
    cluster
        .partition(2)
        .wait_for_acks_all(end, TIMEOUT, 2)
        .await
        .expect("acks=all on the new leader");

    cluster.apply(&[1], &epoch2);
    cluster
        .until("broker 1 converges on leader 2's log", |c| {
            c.partition(1).log_end_offset() == Offset(6) && c.log_bytes(1) == c.log_bytes(2)
        })
        .await;
    let leader_bytes = cluster.log_bytes(2);
    for id in [1, 3] {
        assert_eq!(cluster.log_bytes(id), leader_bytes, "broker {id}'s log");
        assert_eq!(
            cluster.epochs(id),
            vec![(1, 0), (2, 4)],
            "broker {id}'s epochs"
        );
    }
    cluster.shutdown().await;
}

// A follower that stops and starts again from its directory resumes fetching at its log
// end (not from the start), with its high watermark from the checkpoint, and catches up
// with what the leader appended meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_follower_resumes_from_its_log_end() {
    let dirs = tempdirs(2);
    let mut cluster = Cluster::new();
    cluster.start(1, dirs[0].path());
    cluster.start(2, dirs[1].path());
    let assignment = state(&[1, 2], &[1, 2], 1, 1);
    cluster.apply(&[1, 2], &assignment);
    let end = cluster.produce(1, 6, -1, 2);
    cluster
        .partition(1)
        .wait_for_acks_all(end, TIMEOUT, 2)
        .await
        .expect("acks=all");
    cluster
        .until("follower's high watermark at 6", |c| {
            c.partition(2).high_watermark() == Offset(6)
        })
        .await;

    let follower = cluster.nodes.remove(&2).expect("node 2");
    follower.shutdown_fetchers().await;
    tokio::task::block_in_place(|| follower.shutdown());
    drop(follower);
    cluster.produce(1, 3, 1, 1);
    cluster.journal.lock().clear();

    cluster.start(2, dirs[1].path());
    assert_eq!(cluster.partition(2).high_watermark(), Offset(6));
    assert_eq!(cluster.partition(2).log_end_offset(), Offset(6));
    cluster.apply(&[2], &assignment);
    cluster
        .until("the restarted follower catches up", |c| {
            c.partition(2).log_end_offset() == Offset(9)
                && c.partition(2).high_watermark() == Offset(9)
        })
        .await;
    assert_eq!(cluster.log_bytes(2), cluster.log_bytes(1));
    let first = cluster.journal.lock().first().copied().expect("a fetch");
    assert_eq!((first.follower, first.offset), (2, 6));
    cluster.shutdown().await;
}
