//! The transaction coordinator's calls to another broker, against a real broker process:
//! the inter-broker client's WriteTxnMarkers and AddPartitionsToTxn (v5, verify only) with
//! their exact answers, and a coordinator in this test process whose `PartitionLeaders`
//! place a topic's partitions (and `__transaction_state`) on that broker, so its markers
//! travel as WriteTxnMarkers and its KIP-890 checks as AddPartitionsToTxn.
//!
//! Setup shared by both tests: broker B runs a librdkafka transactional producer `t` that
//! writes three records to `remote-topic`/0 and leaves its transaction open, so B holds an
//! ongoing transaction (producer id P, epoch 0) whose records no read_committed consumer
//! sees until a marker arrives.

use std::sync::Arc;
use std::time::Duration;

use integration_tests::Broker;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, DescribeTransactionsRequest, ProducerId, TopicName, TransactionalId,
    WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;
use logbook_broker::coordinator::group::{GroupConfig, GroupCoordinator};
use logbook_broker::coordinator::producer_id_manager::{
    ProducerIdBlock, ProducerIdBlocks, RpcProducerIdManager,
};
use logbook_broker::coordinator::transaction::{
    PartitionLeaders, TransactionConfig, TransactionCoordinator, TransactionResult, TxnError,
    TRANSACTION_STATE_TOPIC_NAME,
};
use logbook_broker::topic_config::{BrokerDefaults, TopicConfig};
use logbook_broker::topics::{NewTopic, Topics};
use logbook_client::{BrokerEndpoint, InterBrokerClient, InterBrokerConfig};
use rdkafka::consumer::Consumer;
use rdkafka::producer::Producer;

use crate::common::{
    consume, consumer, create_topic, produce_all, producer, Record, CLIENT_TIMEOUT,
};
use crate::wire::{connect, round_trip};

const TOPIC: &str = "remote-topic";
const SMALL_INTERNAL_TOPICS: &[&str] = &[
    "--override",
    "transaction.state.log.num.partitions=3",
    "--override",
    "offsets.topic.num.partitions=3",
];

/// B's id in these tests (the harness starts it with the default node id; only the
/// coordinator in this process compares ids).
const REMOTE_ID: i32 = 2;
const LOCAL_ID: i32 = 1;

fn endpoint(broker: &Broker) -> BrokerEndpoint {
    BrokerEndpoint {
        id: REMOTE_ID,
        host: broker.addr().ip().to_string(),
        port: broker.addr().port(),
    }
}

/// Broker B with an open transaction of `t` holding three records on `TOPIC`/0; returns the
/// producer (kept open) and its producer id and epoch as B's coordinator describes them.
fn open_transaction(b: &Broker) -> (crate::common::TestProducer, i64, i16) {
    create_topic(&b.bootstrap(), TOPIC, 2, &[]);
    let p = producer(
        &b.bootstrap(),
        &[
            ("transactional.id", "t"),
            ("enable.idempotence", "true"),
            ("transaction.timeout.ms", "300000"),
        ],
    );
    p.init_transactions(CLIENT_TIMEOUT).expect("init");
    p.begin_transaction().expect("begin");
    let records: Vec<Record> = (0..3)
        .map(|i| Record::new(0, format!("k{i}"), format!("v{i}")))
        .collect();
    for d in produce_all(&p, TOPIC, &records) {
        d.result.expect("acknowledged");
    }
    let described = round_trip(
        &mut connect(b.addr()),
        0,
        1,
        &DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![StrBytes::from_static_str("t").into()]),
    );
    let state = described.transaction_states.first().expect("one state");
    assert_eq!(state.transaction_state.as_str(), "Ongoing");
    (p, state.producer_id.0, state.producer_epoch)
}

/// `TOPIC`/0's last stable offset as a read_committed consumer of B sees it.
fn last_stable_offset(b: &Broker) -> i64 {
    consumer(&b.bootstrap(), &[("isolation.level", "read_committed")])
        .fetch_watermarks(TOPIC, 0, CLIENT_TIMEOUT)
        .expect("watermarks")
        .1
}

fn marker_request(producer_id: i64, epoch: i16, coordinator_epoch: i32) -> WriteTxnMarkersRequest {
    WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
        .with_transaction_result(true)
        .with_coordinator_epoch(coordinator_epoch)
        .with_topics(vec![WritableTxnMarkerTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
            .with_partition_indexes(vec![0])])])
}

fn verify_request(producer_id: i64, epoch: i16, partitions: Vec<i32>) -> AddPartitionsToTxnRequest {
    AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_static_str("t")))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch)
            .with_verify_only(true)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(TOPIC)))
                .with_partitions(partitions)]),
    ])
}

// The client against a real broker: AddPartitionsToTxn v5 verify-only answers NONE for the
// partition in `t`'s transaction, INVALID_TXN_STATE (48) for one that is not, and
// INVALID_PRODUCER_ID_MAPPING (49) for another producer id; WriteTxnMarkers v1 commits the
// transaction (read_committed then sees the three records, LSO 4 past the marker), and a
// later marker with an older coordinator epoch is TRANSACTION_COORDINATOR_FENCED (52).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inter_broker_client_against_a_real_broker() {
    let b = Broker::start_with(SMALL_INTERNAL_TOPICS);
    let (p, pid, epoch) = tokio::task::block_in_place(|| open_transaction(&b));
    let client = InterBrokerClient::new(InterBrokerConfig::default());
    let to_b = endpoint(&b);

    let answer = client
        .send(&to_b, 5, &verify_request(pid, epoch, vec![0, 1]))
        .await
        .expect("answer");
    let codes: Vec<(i32, i16)> = answer
        .results_by_transaction
        .iter()
        .flat_map(|t| t.topic_results.iter())
        .flat_map(|t| t.results_by_partition.iter())
        .map(|r| (r.partition_index, r.partition_error_code))
        .collect();
    assert_eq!(answer.error_code, 0);
    assert_eq!(codes, vec![(0, 0), (1, 48)]);
    let answer = client
        .send(&to_b, 5, &verify_request(pid + 1, epoch, vec![0]))
        .await
        .expect("answer");
    let codes: Vec<i16> = answer
        .results_by_transaction
        .iter()
        .flat_map(|t| t.topic_results.iter())
        .flat_map(|t| t.results_by_partition.iter())
        .map(|r| r.partition_error_code)
        .collect();
    assert_eq!(codes, vec![49]);

    assert_eq!(tokio::task::block_in_place(|| last_stable_offset(&b)), 0);
    let answer = client
        .send(&to_b, 1, &marker_request(pid, epoch, 7))
        .await
        .expect("answer");
    let codes: Vec<(i64, i32, i16)> = answer
        .markers
        .iter()
        .flat_map(|m| {
            m.topics.iter().flat_map(move |t| {
                t.partitions
                    .iter()
                    .map(move |p| (m.producer_id.0, p.partition_index, p.error_code))
            })
        })
        .collect();
    assert_eq!(codes, vec![(pid, 0, 0)]);
    let keys: Vec<(i64, Vec<u8>)> = tokio::task::block_in_place(|| {
        consume(
            &b.bootstrap(),
            TOPIC,
            0,
            0,
            3,
            &[("isolation.level", "read_committed")],
        )
    })
    .into_iter()
    .map(|c| (c.offset, c.key.expect("key")))
    .collect();
    assert_eq!(
        keys,
        vec![
            (0, b"k0".to_vec()),
            (1, b"k1".to_vec()),
            (2, b"k2".to_vec())
        ]
    );
    assert_eq!(tokio::task::block_in_place(|| last_stable_offset(&b)), 4);

    let answer = client
        .send(&to_b, 1, &marker_request(pid, epoch, 6))
        .await
        .expect("answer");
    let codes: Vec<i16> = answer
        .markers
        .iter()
        .flat_map(|m| m.topics.iter())
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.error_code)
        .collect();
    assert_eq!(codes, vec![52]);
    drop(p);
}

/// `TOPIC` and `__transaction_state` are led by B; everything else here.
struct LeadersOnB(BrokerEndpoint);

impl PartitionLeaders for LeadersOnB {
    fn leader(&self, topic: &str, _partition: i32) -> Option<BrokerEndpoint> {
        if topic == TOPIC || topic == TRANSACTION_STATE_TOPIC_NAME {
            Some(self.0.clone())
        } else {
            Some(BrokerEndpoint {
                id: LOCAL_ID,
                host: "127.0.0.1".into(),
                port: 1,
            })
        }
    }

    fn local_broker_id(&self) -> i32 {
        LOCAL_ID
    }
}

/// One block starting at a fixed id: the coordinator here hands out B's producer id, so its
/// markers address the records B holds.
struct FixedBlock(i64);

impl ProducerIdBlocks for FixedBlock {
    fn next_block(
        &self,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<ProducerIdBlock, String>> + Send + '_>,
    > {
        let first = self.0;
        Box::pin(async move { Ok(ProducerIdBlock { first, len: 1000 }) })
    }
}

// A coordinator in this process (its own data dir) whose PartitionLeaders put `TOPIC` and
// `__transaction_state` on broker B: its KIP-890 verification of `t` (coordinated by B)
// asks B (partition 0 verified, partition 1 INVALID_TXN_STATE), and its EndTxn's marker for
// `TOPIC`/0 travels to B as WriteTxnMarkers: before it B's read_committed consumers see
// nothing (LSO 0), after it the three records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_markers_land_on_the_leader() {
    let b = Broker::start_with(SMALL_INTERNAL_TOPICS);
    let (p, pid, epoch) = tokio::task::block_in_place(|| open_transaction(&b));
    assert_eq!(epoch, 0, "a first InitProducerId gives epoch 0");

    let dir = tempfile::tempdir().expect("tempdir");
    let replicas = Arc::new(logbook_replication::ReplicaManager::new(
        dir.path(),
        logbook_replication::FlushPolicy::EveryWrite,
        1,
    ));
    let topics = Arc::new(
        Topics::open(
            dir.path(),
            replicas,
            BrokerDefaults::new(1_048_588, 1 << 30, -1),
            1000,
        )
        .expect("topics"),
    );
    topics
        .create(NewTopic {
            name: TOPIC,
            partitions: 2,
            replication_factor: 1,
            config: TopicConfig::default(),
        })
        .expect("topic here");
    let producer_ids = RpcProducerIdManager::new(Arc::new(FixedBlock(pid)));
    let host: Arc<dyn logbook_broker::coordinator::partition_writer::CoordinatorHost> =
        logbook_broker::coordinator_partition_writer::CoordinatorPartitionWriter::new(Arc::clone(
            &topics,
        ));
    let groups = GroupCoordinator::load(
        &host,
        GroupConfig {
            offsets_topic_num_partitions: 3,
            ..GroupConfig::default()
        },
    )
    .expect("groups");
    let txn = TransactionCoordinator::load(
        &host,
        groups,
        producer_ids,
        TransactionConfig {
            state_log_num_partitions: 3,
            transaction_version: 1,
            ..TransactionConfig::default()
        },
    )
    .expect("transactions");
    tokio::task::block_in_place(|| txn.state_topic().map(|_| ())).expect("state topic");
    txn.connect_cluster(
        Arc::new(LeadersOnB(endpoint(&b))),
        InterBrokerClient::new(InterBrokerConfig::default()),
    );

    // KIP-890 verification of a transaction B coordinates.
    assert_eq!(
        txn.verify_partition("t", pid, 0, &(TOPIC.into(), 0)),
        Ok(())
    );
    assert_eq!(
        txn.verify_partition("t", pid, 0, &(TOPIC.into(), 1)),
        Err(TxnError::InvalidTxnState)
    );

    // A transaction coordinated here, with B's producer id, on B's partition.
    let (local_pid, local_epoch) = loop {
        match txn.init_producer_id("t2", 60_000, None).await {
            Ok(ids) => break ids,
            Err(TxnError::CoordinatorLoadInProgress) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("init: {e}"),
        }
    };
    assert_eq!((local_pid, local_epoch), (pid, 0));
    txn.add_partitions("t2", pid, 0, &[(TOPIC.into(), 0)], 0)
        .await
        .expect("add");
    assert_eq!(tokio::task::block_in_place(|| last_stable_offset(&b)), 0);
    txn.end_transaction("t2", pid, 0, TransactionResult::Commit, 0)
        .await
        .expect("commit with a remote marker");
    let keys: Vec<(i64, Vec<u8>)> = tokio::task::block_in_place(|| {
        consume(
            &b.bootstrap(),
            TOPIC,
            0,
            0,
            3,
            &[("isolation.level", "read_committed")],
        )
    })
    .into_iter()
    .map(|c| (c.offset, c.key.expect("key")))
    .collect();
    assert_eq!(
        keys,
        vec![
            (0, b"k0".to_vec()),
            (1, b"k1".to_vec()),
            (2, b"k2".to_vec())
        ]
    );
    assert_eq!(tokio::task::block_in_place(|| last_stable_offset(&b)), 4);
    // Nothing was written to the local replica of the topic.
    let local = topics
        .replicas()
        .partition(TOPIC, 0)
        .expect("local replica");
    assert_eq!(local.high_watermark().get(), 0);
    txn.shutdown();
    drop(p);
}
