//! The follower's fetch client (`logbook_replication::fetcher`) against the real broker
//! process: Fetch v17 with a replica id, ListOffsets v7 from a replica, and a whole
//! `ReplicaFetcher` copying a partition into a local `storage::Log`, and
//! OffsetsForLeaderEpoch v4 from a replica. A single node leads alone (its replica set is
//! itself), so it refuses fetches from a replica it does not name.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use integration_tests::Broker;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use logbook_replication::fetcher::{
    EpochRequest, FetchPartition, FetchRequest, FollowerLog, InitialFetchState, LeaderEndPoint,
    LeaderError, RemoteLeaderEndPoint, RemoteLeaderEndPointConfig, ReplicaFetcher,
};
use logbook_replication::{Error, TopicPartition};
use logbook_storage::{AppendInfo, LeaderEpoch, Log, LogConfig, Offset};

use crate::common::{create_topic, produce_ok, Record};
use crate::wire;

fn topic_id(broker: &Broker, topic: &str) -> uuid::Uuid {
    let request =
        MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_string(topic.to_owned()))))]));
    let mut stream = wire::connect(broker.addr());
    let response = wire::round_trip(&mut stream, 12, 1, &request);
    response.topics[0].topic_id
}

fn endpoint(broker: &Broker) -> RemoteLeaderEndPoint {
    RemoteLeaderEndPoint::new(RemoteLeaderEndPointConfig {
        leader_id: 1,
        address: broker.addr().to_string(),
        replica_id: 2,
        replica_epoch: 1,
        client_id: "logbook-it-replica".to_owned(),
        request_timeout: Duration::from_secs(10),
        frame_bytes_max: 100 << 20,
        security: Default::default(),
    })
}

fn tp(topic: &str) -> TopicPartition {
    TopicPartition {
        topic: topic.to_owned(),
        partition: 0,
    }
}

fn records(n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| Record::new(0, format!("k{i}"), format!("value-{i}")))
        .collect()
}

/// The local replica: a `storage::Log` fsync'd on every append.
struct LocalReplica {
    tp: TopicPartition,
    log: std::sync::Mutex<Log>,
    high_watermark: std::sync::Mutex<Offset>,
}

impl LocalReplica {
    fn open(dir: &Path, tp: TopicPartition) -> Arc<Self> {
        let log = Log::open(dir, LogConfig::default()).expect("open local log");
        Arc::new(Self {
            tp,
            log: std::sync::Mutex::new(log),
            high_watermark: std::sync::Mutex::new(Offset(0)),
        })
    }
}

impl FollowerLog for LocalReplica {
    fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }
    fn log_start_offset(&self) -> Result<Offset, Error> {
        Ok(self.log.lock().expect("lock").log_start_offset())
    }
    fn log_end_offset(&self) -> Result<Offset, Error> {
        Ok(self.log.lock().expect("lock").log_end_offset())
    }
    fn latest_epoch(&self) -> Result<Option<LeaderEpoch>, Error> {
        Ok(self
            .log
            .lock()
            .expect("lock")
            .leader_epochs()
            .latest_epoch())
    }
    fn floor_end_offset(&self, epoch: LeaderEpoch) -> Result<Option<(LeaderEpoch, Offset)>, Error> {
        let log = self.log.lock().expect("lock");
        let end = log.log_end_offset().get();
        Ok(log
            .leader_epochs()
            .floor_end_offset(epoch, end)
            .map(|(e, o)| (e, Offset(o))))
    }
    fn high_watermark(&self) -> Offset {
        *self.high_watermark.lock().expect("lock")
    }
    fn truncate_to(&self, offset: Offset) -> Result<(), Error> {
        Ok(self.log.lock().expect("lock").truncate_to(offset)?)
    }
    fn truncate_fully_and_start_at(&self, offset: Offset) -> Result<(), Error> {
        Ok(self
            .log
            .lock()
            .expect("lock")
            .truncate_fully_and_start_at(offset)?)
    }
    fn append_as_follower(&self, records: &[u8]) -> Result<AppendInfo, Error> {
        let mut log = self.log.lock().expect("lock");
        let info = log.append_as_follower(records)?;
        let synced = log
            .sync_handle()?
            .sync()
            .map_err(logbook_storage::Error::Io)?;
        log.mark_durable(synced);
        Ok(info)
    }
    fn update_from_leader(&self, high_watermark: Offset, _log_start: Offset) -> Result<(), Error> {
        let end = self.log.lock().expect("lock").log_end_offset();
        *self.high_watermark.lock().expect("lock") = high_watermark.min(end);
        Ok(())
    }
    async fn wait_durable(&self, _offset: Offset) -> Result<(), Error> {
        Ok(())
    }
}

#[test]
fn replica_fetch_v17_and_list_offsets_from_the_real_broker() {
    // Proves: the follower's Fetch v17 (replica state, topic id, current leader epoch)
    // and ListOffsets v7 from a replica are understood by the broker: a replica the
    // partition does not name, and a current leader epoch the broker does not know yet,
    // are UNKNOWN_LEADER_EPOCH; latest/earliest from a replica are 6/0. (Copying records
    // from a real leader needs a replica set that names the fetcher: see the ignored
    // test below, enabled with the controller wiring.)
    let broker = Broker::start();
    create_topic(&broker.bootstrap(), "replicated", 1, &[]);
    produce_ok(&broker.bootstrap(), "replicated", &records(6), &[]);
    let id = topic_id(&broker, "replicated");
    let dir = tempfile::tempdir().expect("tempdir");
    let local = LocalReplica::open(dir.path(), tp("replicated"));
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let mut endpoint = endpoint(&broker);
        let request = |epoch: i32| FetchRequest {
            max_wait_ms: 100,
            min_bytes: 1,
            max_bytes: 1 << 20,
            partitions: vec![FetchPartition {
                topic_partition: tp("replicated"),
                topic_id: id,
                fetch_offset: Offset(0),
                current_leader_epoch: LeaderEpoch(epoch),
                last_fetched_epoch: None,
                log_start_offset: Offset(0),
                partition_max_bytes: 1 << 20,
            }],
        };
        // The broker leads alone (no controller has named replica 2 yet), so, as Kafka's
        // `followerReplicaOrThrow`, it answers a fetch from a replica it does not know
        // with UNKNOWN_LEADER_EPOCH and no records (its metadata may be the stale side).
        let fetched = endpoint.fetch(request(0)).await.expect("fetch");
        assert_eq!(fetched.len(), 1);
        let p = &fetched[0];
        assert_eq!(p.error, Some(LeaderError::UnknownLeaderEpoch));
        assert!(p.records.is_empty());
        assert_eq!(p.diverging_epoch, None);
        assert_eq!(local.log_end_offset().expect("end"), Offset(0));

        let ahead = endpoint.fetch(request(1)).await.expect("fetch");
        assert_eq!(ahead[0].error, Some(LeaderError::UnknownLeaderEpoch));
        assert_eq!(
            endpoint
                .fetch_latest_offset(&tp("replicated"), LeaderEpoch(0))
                .await
                .expect("latest"),
            Offset(6)
        );
        assert_eq!(
            endpoint
                .fetch_earliest_offset(&tp("replicated"), LeaderEpoch(0))
                .await
                .expect("earliest"),
            Offset(0)
        );
    });
}

#[test]
#[ignore = "needs a replica set naming the fetcher: a lone broker leads alone (replicas = itself) and answers an unknown replica with UNKNOWN_LEADER_EPOCH, and its controller refuses an assignment naming an unregistered broker 2 (as Kafka does); the fetcher copying from real brokers is covered by the cluster tests (cluster::replication)"]
fn replica_fetcher_copies_a_partition_from_the_real_broker() {
    // Proves: a ReplicaFetcher over RemoteLeaderEndPoint copies a partition from the real
    // broker into a local log, batch for batch, and keeps up with later produces: the
    // local log ends where the broker's high watermark is, its bytes are the broker's
    // (the same records come back from both), and its high watermark follows the leader's.
    let broker = Broker::start();
    create_topic(&broker.bootstrap(), "copied", 1, &[]);
    produce_ok(&broker.bootstrap(), "copied", &records(4), &[]);
    let id = topic_id(&broker, "copied");
    let dir = tempfile::tempdir().expect("tempdir");
    let local = LocalReplica::open(dir.path(), tp("copied"));
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let mut fetcher = ReplicaFetcher::new(endpoint(&broker), Default::default());
    fetcher
        .add_partitions(vec![InitialFetchState {
            log: Arc::clone(&local),
            topic_id: id,
            current_leader_epoch: LeaderEpoch(0),
        }])
        .expect("add");
    runtime.block_on(fetcher.do_work());
    assert_eq!(local.log_end_offset().expect("end"), Offset(4));
    produce_ok(&broker.bootstrap(), "copied", &records(3), &[]);
    runtime.block_on(async {
        for _ in 0..20 {
            fetcher.do_work().await;
            if local.log_end_offset().expect("end") == Offset(7) {
                break;
            }
        }
    });
    assert_eq!(local.log_end_offset().expect("end"), Offset(7));
    assert_eq!(local.high_watermark(), Offset(7));
    assert!(fetcher.failed_partitions().is_empty());
    let local_bytes = local
        .log
        .lock()
        .expect("local log")
        .read(Offset(0), usize::MAX, Offset::MAX, true)
        .expect("read local")
        .records;
    let segment = broker
        .data_dir()
        .join("copied-0")
        .join("00000000000000000000.log");
    let leader_bytes = std::fs::read(&segment).expect("read the broker's segment");
    assert_eq!(local_bytes.len(), leader_bytes.len());
    assert!(
        local_bytes == leader_bytes,
        "the local copy differs from the broker's segment"
    );
}

#[test]
fn offsets_for_leader_epoch_from_the_real_broker() {
    // Proves: a replica's OffsetsForLeaderEpoch v4 (replica id set) for the latest epoch
    // answers that epoch ending at the log end.
    let broker = Broker::start();
    create_topic(&broker.bootstrap(), "epochs", 1, &[]);
    produce_ok(&broker.bootstrap(), "epochs", &records(3), &[]);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let mut endpoint = endpoint(&broker);
        let answer = endpoint
            .fetch_epoch_end_offsets(vec![EpochRequest {
                topic_partition: tp("epochs"),
                current_leader_epoch: LeaderEpoch(0),
                leader_epoch: LeaderEpoch(0),
            }])
            .await
            .expect("OffsetsForLeaderEpoch");
        assert_eq!(answer[0].error, None);
        assert_eq!(
            (answer[0].end.leader_epoch, answer[0].end.end_offset),
            (0, 3)
        );
    });
}
