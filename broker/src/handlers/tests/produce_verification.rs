//! KIP-890 part 1 at the produce door: a transactional produce to a partition the
//! coordinator has not added to the producer's transaction is refused with
//! INVALID_TXN_STATE (and nothing is appended); after AddPartitionsToTxn it is appended;
//! a fenced epoch is INVALID_PRODUCER_EPOCH.

use super::*;

/// `count` records of a transactional batch of `producer`/`epoch` from sequence 0.
fn txn_batch(producer: i64, epoch: i16, count: i64) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: true,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: producer,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: i32::try_from(i).expect("small"),
            timestamp: 1000 + i,
            key: None,
            value: Some(Bytes::from(format!("t{i}"))),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("encode batch");
    buf.freeze()
}

async fn produce(broker: &Arc<Broker>, batch: Bytes) -> (i16, i64) {
    produce_at(broker, batch, 9).await
}

async fn produce_at(broker: &Arc<Broker>, batch: Bytes, version: i16) -> (i16, i64) {
    let body = RequestKind::Produce(
        ProduceRequest::default()
            .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx"))))
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name("t"))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch))])]),
    );
    let ctx = super::super::RequestContext::new(
        Arc::clone(broker),
        "127.0.0.1:1".parse().expect("address"),
        crate::listeners::ListenerName::new("PLAINTEXT"),
        ApiKey::Produce,
        version,
        1,
        None,
    );
    let response = super::super::dispatch(&ctx, body)
        .await
        .expect("a response");
    let ResponseKind::Produce(r) = response.body else {
        panic!("not a produce response")
    };
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_produce_needs_the_partition_in_the_transaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = broker(dir.path());
    broker.topics.get_or_create("t", true, 1, 1).expect("topic");
    let (pid, epoch) = broker
        .transactions
        .init_producer_id("tx", 60_000, None)
        .await
        .expect("init");
    assert_eq!(
        produce(&broker, txn_batch(pid, epoch, 2)).await,
        (kafka_protocol::ResponseError::InvalidTxnState.code(), -1)
    );
    broker
        .transactions
        .add_partitions("tx", pid, epoch, &[("t".into(), 0)], 0)
        .await
        .expect("add");
    assert_eq!(produce(&broker, txn_batch(pid, epoch, 2)).await, (0, 0));
    // A newer producer fences this one: its next write is refused at the door.
    let (_, bumped) = broker
        .transactions
        .init_producer_id("tx", 60_000, None)
        .await
        .map_or((pid, epoch + 1), |r| r);
    assert!(bumped > epoch);
    assert_eq!(
        produce(&broker, txn_batch(pid, epoch, 1)).await.0,
        kafka_protocol::ResponseError::InvalidProducerEpoch.code()
    );
}

// Transaction protocol v2 (KIP-890 part 2): a transactional Produce v12 adds its partition
// to the transaction itself (no AddPartitionsToTxn), and the batch is appended; at v11 (the
// highest version a v1-flow Kafka client sends) the partition is only verified, and one not
// in the transaction is TRANSACTION_ABORTABLE (INVALID_TXN_STATE below v11).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_v12_adds_the_partition_to_the_transaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let broker = broker(dir.path());
    broker.topics.get_or_create("t", true, 1, 1).expect("topic");
    let (pid, epoch) = broker
        .transactions
        .init_producer_id("tx", 60_000, None)
        .await
        .expect("init");
    assert_eq!(
        produce_at(&broker, txn_batch(pid, epoch, 2), 10).await,
        (kafka_protocol::ResponseError::InvalidTxnState.code(), -1)
    );
    assert_eq!(
        produce_at(&broker, txn_batch(pid, epoch, 2), 11).await,
        (
            kafka_protocol::ResponseError::TransactionAbortable.code(),
            -1
        )
    );
    assert_eq!(
        produce_at(&broker, txn_batch(pid, epoch, 2), 12).await,
        (0, 0)
    );
    let m = broker.transactions.describe("tx").expect("describe");
    assert_eq!(
        m.state,
        crate::coordinator::transaction::TransactionState::Ongoing
    );
    assert!(m.partitions.contains(&("t".to_string(), 0)));
    assert_eq!(m.client_transaction_version, 2);
}
