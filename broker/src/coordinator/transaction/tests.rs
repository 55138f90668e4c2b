//! TransactionCoordinator against a real `__transaction_state` on disk: fencing, the
//! commit path with its markers, and replay after a restart.

use std::sync::Arc;

use super::*;
use crate::coordinator::group::GroupConfig;
use crate::topic_config::BrokerDefaults;

struct Setup {
    topics: Arc<Topics>,
    txn: Arc<TransactionCoordinator>,
}

fn open(path: &std::path::Path) -> Setup {
    let replicas = Arc::new(logbook_replication::ReplicaManager::new(
        path,
        logbook_replication::FlushPolicy::EveryWrite,
        1,
    ));
    let topics = Arc::new(
        Topics::open(
            path,
            replicas,
            BrokerDefaults::new(1_048_588, 1 << 30, -1),
            1000,
        )
        .expect("topics"),
    );
    let producer_ids = Arc::new(
        ProducerIdManager::open(&path.join(crate::topics::METADATA_DIR)).expect("producer ids"),
    );
    let groups = GroupCoordinator::load(
        &topics,
        GroupConfig {
            offsets_topic_num_partitions: 2,
            ..GroupConfig::default()
        },
    )
    .expect("groups");
    let txn = TransactionCoordinator::load(
        &topics,
        groups,
        producer_ids,
        TransactionConfig {
            state_log_num_partitions: 3,
            max_timeout_ms: 60_000,
            ..TransactionConfig::default()
        },
    )
    .expect("transactions");
    Setup { topics, txn }
}

fn create_topic(s: &Setup, name: &str) {
    s.topics
        .create(crate::topics::NewTopic {
            name,
            partitions: 2,
            replication_factor: 1,
            config: TopicConfig::default(),
        })
        .expect("topic");
}

// A second InitProducerId for the same id bumps the epoch and fences the first producer;
// a timeout above transaction.max.timeout.ms is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_fences_previous_producer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open(dir.path());
    assert_eq!(
        s.txn.init_producer_id("t", 60_001, None).await,
        Err(TxnError::InvalidTransactionTimeout)
    );
    assert_eq!(
        s.txn.init_producer_id("", 1000, None).await,
        Err(TxnError::InvalidRequest)
    );
    let (pid, epoch) = s
        .txn
        .init_producer_id("t", 1000, None)
        .await
        .expect("first");
    assert_eq!(epoch, 0);
    let (pid2, epoch2) = s
        .txn
        .init_producer_id("t", 1000, None)
        .await
        .expect("second");
    assert_eq!((pid2, epoch2), (pid, 1));
    create_topic(&s, "a");
    assert_eq!(
        s.txn.add_partitions("t", pid, 0, &[("a".into(), 0)]).await,
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        s.txn
            .add_partitions("t", pid + 1, 1, &[("a".into(), 0)])
            .await,
        Err(TxnError::InvalidProducerIdMapping)
    );
    // Another transactional id gets another producer id.
    let (other, _) = s
        .txn
        .init_producer_id("u", 1000, None)
        .await
        .expect("other");
    assert_ne!(other, pid);
}

// Commit: markers reach every partition of the transaction (as control batches after the
// data), and the state goes to CompleteCommit; an InitProducerId during an ongoing
// transaction aborts it with the bumped epoch and answers CONCURRENT_TRANSACTIONS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_writes_markers_and_fence_aborts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open(dir.path());
    create_topic(&s, "a");
    let (pid, epoch) = s.txn.init_producer_id("t", 1000, None).await.expect("init");
    s.txn
        .add_partitions("t", pid, epoch, &[("a".into(), 0), ("a".into(), 1)])
        .await
        .expect("add");
    assert_eq!(
        s.txn.describe("t").expect("describe").state,
        TransactionState::Ongoing
    );
    s.txn
        .end_transaction("t", pid, epoch, TransactionResult::Commit)
        .await
        .expect("commit");
    let m = s.txn.describe("t").expect("describe");
    assert_eq!(m.state, TransactionState::CompleteCommit);
    assert!(m.partitions.is_empty());
    for index in 0..2 {
        let p = s
            .topics
            .replicas()
            .partition("a", index)
            .expect("partition");
        // One marker each, durable.
        assert_eq!(p.offsets().expect("offsets").high_watermark.get(), 1);
    }
    // A retried EndTxn(commit) is answered NONE; an abort now contradicts the state.
    assert_eq!(
        s.txn
            .end_transaction("t", pid, epoch, TransactionResult::Commit)
            .await,
        Ok(())
    );
    assert_eq!(
        s.txn
            .end_transaction("t", pid, epoch, TransactionResult::Abort)
            .await,
        Err(TxnError::InvalidTxnState)
    );
    // Fence an ongoing transaction.
    s.txn
        .add_partitions("t", pid, epoch, &[("a".into(), 0)])
        .await
        .expect("add");
    assert_eq!(
        s.txn.init_producer_id("t", 1000, None).await,
        Err(TxnError::ConcurrentTransactions)
    );
    let m = s.txn.describe("t").expect("describe");
    assert_eq!(m.state, TransactionState::CompleteAbort);
    assert_eq!(m.producer_epoch, epoch + 1);
    let p = s.topics.replicas().partition("a", 0).expect("partition");
    assert_eq!(p.offsets().expect("offsets").high_watermark.get(), 2);
    // The retry gets the next epoch.
    assert_eq!(
        s.txn.init_producer_id("t", 1000, None).await,
        Ok((pid, epoch + 2))
    );
}

// Restart: the shard replays __transaction_state; a transaction left in PrepareCommit is
// completed (its markers written) when the shard loads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_completes_prepared_transactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (pid, epoch) = {
        let s = open(dir.path());
        create_topic(&s, "a");
        let (pid, epoch) = s.txn.init_producer_id("t", 1000, None).await.expect("init");
        s.txn
            .add_partitions("t", pid, epoch, &[("a".into(), 1)])
            .await
            .expect("add");
        // Write PrepareCommit only, as if the broker died before the markers.
        let entry = s.txn.entry("t").expect("entry");
        let durable = {
            let mut e = entry.lock();
            let next = e
                .meta
                .prepare_end(TransactionResult::Commit, now_ms())
                .expect("end")
                .expect("changed");
            s.txn.append(&mut e, next).expect("append")
        };
        s.txn.durable(&entry, durable).await.expect("durable");
        s.txn.shutdown();
        tokio::task::block_in_place(|| s.topics.replicas().shutdown());
        (pid, epoch)
    };
    let s = open(dir.path());
    let m = s.txn.describe("t").expect("replayed");
    assert_eq!((m.producer_id, m.producer_epoch), (pid, epoch));
    // The load spawned the completion: wait for it.
    for _ in 0..100 {
        if s.txn.describe("t").expect("describe").state == TransactionState::CompleteCommit {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        s.txn.describe("t").expect("describe").state,
        TransactionState::CompleteCommit
    );
    let p = s.topics.replicas().partition("a", 1).expect("partition");
    assert_eq!(p.offsets().expect("offsets").high_watermark.get(), 1);
    // The first epoch is still the producer's: the next InitProducerId bumps it.
    assert_eq!(
        s.txn.init_producer_id("t", 1000, None).await,
        Ok((pid, epoch + 1))
    );
}
