//! TransactionCoordinator against a real `__transaction_state` on disk: fencing, the
//! commit path with its markers, and replay after a restart.

use std::sync::Arc;

use super::*;
use crate::group::GroupConfig;
use crate::test_host::TestHost;

struct Setup {
    topics: Arc<TestHost>,
    txn: Arc<TransactionCoordinator>,
}

/// The v1 flow's coordinator (`transaction.version` 1), as the tests written for it expect.
fn open(path: &std::path::Path) -> Setup {
    open_with(path, 1)
}

fn open_with(path: &std::path::Path, transaction_version: i16) -> Setup {
    open_config(path, |c| c.transaction_version = transaction_version)
}

/// A coordinator with the tests' settings (v1 flow), adjusted by `adjust`.
fn open_config(path: &std::path::Path, adjust: impl FnOnce(&mut TransactionConfig)) -> Setup {
    let mut config = TransactionConfig {
        state_log_num_partitions: 3,
        max_timeout_ms: 60_000,
        transaction_version: 1,
        ..TransactionConfig::default()
    };
    adjust(&mut config);
    let topics = TestHost::open(path, logbook_replication::FlushPolicy::EveryWrite);
    let producer_ids = crate::producer_id_manager::RpcProducerIdManager::for_tests();
    let groups = crate::GroupCoordinator::load(
        &topics.host(),
        GroupConfig {
            offsets_topic_num_partitions: 2,
            ..GroupConfig::default()
        },
    )
    .expect("groups");
    let txn = TransactionCoordinator::load(&topics.host(), groups, producer_ids, config)
        .expect("transactions");
    Setup { topics, txn }
}

fn create_topic(s: &Setup, name: &str) {
    s.topics.create_topic(name, 2);
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
        s.txn
            .add_partitions("t", pid, 0, &[("a".into(), 0)], 0)
            .await,
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        s.txn
            .add_partitions("t", pid + 1, 1, &[("a".into(), 0)], 0)
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
        .add_partitions("t", pid, epoch, &[("a".into(), 0), ("a".into(), 1)], 0)
        .await
        .expect("add");
    assert_eq!(
        s.txn.describe("t").expect("describe").state,
        TransactionState::Ongoing
    );
    s.txn
        .end_transaction("t", pid, epoch, TransactionResult::Commit, 0)
        .await
        .expect("commit");
    let m = s.txn.describe("t").expect("describe");
    assert_eq!(m.state, TransactionState::CompleteCommit);
    assert!(m.partitions.is_empty());
    for index in 0..2 {
        let p = s.topics.replicas.partition("a", index).expect("partition");
        // One marker each, durable.
        assert_eq!(p.offsets().expect("offsets").high_watermark.get(), 1);
    }
    // A retried EndTxn(commit) is answered NONE; an abort now contradicts the state.
    assert_eq!(
        s.txn
            .end_transaction("t", pid, epoch, TransactionResult::Commit, 0)
            .await,
        Ok((-1, -1))
    );
    assert_eq!(
        s.txn
            .end_transaction("t", pid, epoch, TransactionResult::Abort, 0)
            .await,
        Err(TxnError::InvalidTxnState)
    );
    // Fence an ongoing transaction.
    s.txn
        .add_partitions("t", pid, epoch, &[("a".into(), 0)], 0)
        .await
        .expect("add");
    assert_eq!(
        s.txn.init_producer_id("t", 1000, None).await,
        Err(TxnError::ConcurrentTransactions)
    );
    let m = s.txn.describe("t").expect("describe");
    assert_eq!(m.state, TransactionState::CompleteAbort);
    assert_eq!(m.producer_epoch, epoch + 1);
    let p = s.topics.replicas.partition("a", 0).expect("partition");
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
            .add_partitions("t", pid, epoch, &[("a".into(), 1)], 0)
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
        tokio::task::block_in_place(|| s.topics.replicas.shutdown());
        (pid, epoch)
    };
    let s = open(dir.path());
    let m = s.txn.describe("t").expect("replayed");
    assert_eq!((m.producer_id, m.producer_epoch), (pid, epoch));
    // The load spawned the completion: wait for it (the Complete record durable).
    settle(&s, "t", TransactionState::CompleteCommit).await;
    assert_eq!(
        s.txn.describe("t").expect("describe").state,
        TransactionState::CompleteCommit
    );
    let p = s.topics.replicas.partition("a", 1).expect("partition");
    assert_eq!(p.offsets().expect("offsets").high_watermark.get(), 1);
    // The first epoch is still the producer's: the next InitProducerId bumps it.
    assert_eq!(
        s.txn.init_producer_id("t", 1000, None).await,
        Ok((pid, epoch + 1))
    );
}

/// Waits (up to 2 s) until `id` is in `state` and its last record is durable (not pending),
/// as a completion spawned by a load leaves it.
async fn settle(s: &Setup, id: &str, state: TransactionState) {
    for _ in 0..100 {
        let entry = s.txn.entry(id).expect("entry");
        let settled = {
            let e = entry.lock();
            e.meta.state == state && !e.pending
        };
        if settled {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The epoch the partition's producer state holds for `pid` (set by its last marker).
fn marker_epoch(s: &Setup, topic: &str, index: i32, pid: i64) -> i16 {
    s.topics
        .replicas
        .partition(topic, index)
        .expect("partition")
        .active_producers()
        .expect("producers")
        .into_iter()
        .find(|p| p.producer_id == pid)
        .expect("producer known to the partition")
        .producer_epoch
}

// Transaction protocol v2 (KIP-890 part 2): Produce adds its partition itself; every EndTxn
// bumps the epoch and returns it, the markers carry the bumped epoch (so the old epoch is
// fenced), a retry with the epoch before the bump gets the same answer, and an abort with
// no open transaction still bumps the epoch (Kafka's table in `endTransaction`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_txn_v2_bumps_epoch_per_transaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open_with(dir.path(), 2);
    create_topic(&s, "a");
    let (pid, epoch) = s.txn.init_producer_id("t", 1000, None).await.expect("init");
    assert_eq!(epoch, 0);
    let a0 = ("a".to_string(), 0);
    s.txn
        .add_partition_for_produce("t", pid, 0, &a0)
        .expect("implicit add");
    let m = s.txn.describe("t").expect("describe");
    assert_eq!(m.state, TransactionState::Ongoing);
    assert_eq!(m.client_transaction_version, 2);
    assert_eq!(
        s.txn
            .end_transaction("t", pid, 0, TransactionResult::Commit, 2)
            .await,
        Ok((pid, 1))
    );
    assert_eq!(marker_epoch(&s, "a", 0, pid), 1);
    let m = s.txn.describe("t").expect("describe");
    assert_eq!(
        (m.state, m.producer_epoch, m.last_producer_epoch),
        (TransactionState::CompleteCommit, 1, 0)
    );
    // The old epoch is fenced from the next transaction.
    assert_eq!(
        s.txn.add_partition_for_produce("t", pid, 0, &a0),
        Err(TxnError::ProducerFenced)
    );
    // A retried EndTxn(commit) with the epoch before the bump: same answer, nothing written.
    assert_eq!(
        s.txn
            .end_transaction("t", pid, 0, TransactionResult::Commit, 2)
            .await,
        Ok((pid, 1))
    );
    assert_eq!(
        s.txn
            .end_transaction("t", pid, 0, TransactionResult::Abort, 2)
            .await,
        Err(TxnError::InvalidTxnState)
    );
    // Commit with the current epoch and no open transaction contradicts the state.
    assert_eq!(
        s.txn
            .end_transaction("t", pid, 1, TransactionResult::Commit, 2)
            .await,
        Err(TxnError::InvalidTxnState)
    );
    // The next transaction, aborted: epoch 2, an abort marker at epoch 2.
    s.txn
        .add_partition_for_produce("t", pid, 1, &a0)
        .expect("implicit add");
    assert_eq!(
        s.txn
            .end_transaction("t", pid, 1, TransactionResult::Abort, 2)
            .await,
        Ok((pid, 2))
    );
    assert_eq!(marker_epoch(&s, "a", 0, pid), 2);
    let p = s.topics.replicas.partition("a", 0).expect("partition");
    assert_eq!(p.offsets().expect("offsets").high_watermark.get(), 2);
    // An abort with nothing open bumps the epoch and writes no marker.
    assert_eq!(
        s.txn
            .end_transaction("t", pid, 2, TransactionResult::Abort, 2)
            .await,
        Ok((pid, 3))
    );
    assert_eq!(p.offsets().expect("offsets").high_watermark.get(), 2);
    // A stale epoch is fenced.
    assert_eq!(
        s.txn
            .end_transaction("t", pid, 1, TransactionResult::Abort, 2)
            .await,
        Err(TxnError::ProducerFenced)
    );
}

// Epoch exhaustion under transaction protocol v2: the EndTxn of a producer at epoch
// i16::MAX - 1 writes its markers at i16::MAX and moves the id to a new producer id at
// epoch 0, which the response returns (prev/next producer id, as Kafka's
// `TransactionMetadata`); a retry with the old producer id and epoch gets the same answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_txn_v2_epoch_exhaustion_rotates_producer_id() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open_with(dir.path(), 2);
    create_topic(&s, "a");
    let (pid, _) = s.txn.init_producer_id("t", 1000, None).await.expect("init");
    let last = i16::MAX - 1;
    s.txn.entry("t").expect("entry").lock().meta.producer_epoch = last;
    s.txn
        .add_partition_for_produce("t", pid, last, &("a".to_string(), 1))
        .expect("implicit add");
    let (next_pid, next_epoch) = s
        .txn
        .end_transaction("t", pid, last, TransactionResult::Commit, 2)
        .await
        .expect("commit");
    assert_ne!(next_pid, pid);
    assert_eq!(next_epoch, 0);
    assert_eq!(marker_epoch(&s, "a", 1, pid), i16::MAX);
    let m = s.txn.describe("t").expect("describe");
    assert_eq!(
        (
            m.producer_id,
            m.previous_producer_id,
            m.next_producer_id,
            m.producer_epoch
        ),
        (next_pid, pid, metadata::NO_PRODUCER_ID, 0)
    );
    assert_eq!(
        s.txn
            .end_transaction("t", pid, last, TransactionResult::Commit, 2)
            .await,
        Ok((next_pid, 0))
    );
    // The new producer id works for the next transaction.
    s.txn
        .add_partition_for_produce("t", next_pid, 0, &("a".to_string(), 1))
        .expect("implicit add");
}

// Restart with transaction protocol v2: the Prepare record (value version 1, with
// NextProducerId and ClientTransactionVersion in tagged fields) is replayed, its markers
// are written at the bumped epoch and the Complete record moves to the next producer id.
// Before version 1 values were read, replay skipped them and lost the transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_v1_records_completes_v2_transaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let last = i16::MAX - 1;
    let (pid, prepared) = {
        let s = open_with(dir.path(), 2);
        create_topic(&s, "a");
        let (pid, _) = s.txn.init_producer_id("t", 1000, None).await.expect("init");
        s.txn.entry("t").expect("entry").lock().meta.producer_epoch = last;
        s.txn
            .add_partition_for_produce("t", pid, last, &("a".to_string(), 0))
            .expect("implicit add");
        // Write PrepareCommit only, as if the broker died before the markers.
        let entry = s.txn.entry("t").expect("entry");
        let (durable, prepared) = {
            let mut e = entry.lock();
            let metadata::EndV2::Prepare(next) = e
                .meta
                .prepare_end_v2(
                    pid,
                    last,
                    TransactionResult::Commit,
                    || Ok(pid + 1000),
                    now_ms(),
                )
                .expect("end")
            else {
                panic!("not a retry");
            };
            (s.txn.append(&mut e, next.clone()).expect("append"), next)
        };
        s.txn.durable(&entry, durable).await.expect("durable");
        s.txn.shutdown();
        tokio::task::block_in_place(|| s.topics.replicas.shutdown());
        (pid, prepared)
    };
    assert_eq!(
        (prepared.producer_epoch, prepared.next_producer_id),
        (i16::MAX, pid + 1000)
    );
    let s = open_with(dir.path(), 2);
    let m = s.txn.describe("t").expect("replayed");
    assert!(
        m.state == TransactionState::PrepareCommit || m.state == TransactionState::CompleteCommit,
        "state {:?}",
        m.state
    );
    settle(&s, "t", TransactionState::CompleteCommit).await;
    let m = s.txn.describe("t").expect("describe");
    assert_eq!(
        (
            m.state,
            m.producer_id,
            m.previous_producer_id,
            m.producer_epoch,
            m.client_transaction_version
        ),
        (TransactionState::CompleteCommit, pid + 1000, pid, 0, 2)
    );
    assert_eq!(marker_epoch(&s, "a", 0, pid), i16::MAX);
    // A retry of the lost EndTxn answer gets the new producer id.
    assert_eq!(
        s.txn
            .end_transaction("t", pid, last, TransactionResult::Commit, 2)
            .await,
        Ok((pid + 1000, 0))
    );
}

/// The coordinator epoch of `pid`'s last marker on the partition (-1 if none).
fn marker_coordinator_epoch(s: &Setup, topic: &str, index: i32, pid: i64) -> i32 {
    s.topics
        .replicas
        .partition(topic, index)
        .expect("partition")
        .active_producers()
        .expect("producers")
        .into_iter()
        .find(|p| p.producer_id == pid)
        .map_or(-1, |p| p.coordinator_epoch)
}

fn high_watermark(s: &Setup, topic: &str, index: i32) -> i64 {
    s.topics
        .replicas
        .partition(topic, index)
        .expect("partition")
        .offsets()
        .expect("offsets")
        .high_watermark
        .get()
}

// Resignation (Kafka's `onResignation`): after unloading the id's __transaction_state
// partition the transaction's timeout abort never fires (no record, no marker), and EndTxn,
// AddPartitionsToTxn, InitProducerId and DescribeTransactions answer NOT_COORDINATOR.
// Loading it again (coordinator epoch 7) finds the ongoing transaction in the log, and the
// new owner aborts it on timeout with markers carrying epoch 7.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unload_stops_timeout_abort_and_reload_restores() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open_config(dir.path(), |c| c.abort_timed_out_interval_ms = 20);
    create_topic(&s, "a");
    let (pid, epoch) = s.txn.init_producer_id("t", 500, None).await.expect("init");
    s.txn
        .add_partitions("t", pid, epoch, &[("a".into(), 0)], 0)
        .await
        .expect("add");
    let index = s.txn.partition_for("t");
    s.txn.unload_partition(index);
    let state_end = high_watermark(&s, TRANSACTION_STATE_TOPIC_NAME, index);
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    assert_eq!(
        high_watermark(&s, TRANSACTION_STATE_TOPIC_NAME, index),
        state_end,
        "an unloaded shard wrote to __transaction_state"
    );
    assert_eq!(
        high_watermark(&s, "a", 0),
        0,
        "an unloaded shard wrote a marker"
    );
    assert_eq!(
        s.txn
            .end_transaction("t", pid, epoch, TransactionResult::Commit, 0)
            .await,
        Err(TxnError::NotCoordinator)
    );
    assert_eq!(
        s.txn
            .add_partitions("t", pid, epoch, &[("a".into(), 1)], 0)
            .await,
        Err(TxnError::NotCoordinator)
    );
    assert_eq!(
        s.txn.init_producer_id("t", 500, None).await,
        Err(TxnError::NotCoordinator)
    );
    assert_eq!(
        s.txn.describe("t").map(|m| m.state),
        Err(TxnError::NotCoordinator)
    );

    tokio::task::block_in_place(|| s.txn.load_partition(index, 7)).expect("reload");
    let m = s.txn.describe("t").expect("replayed");
    assert_eq!(
        (m.state, m.producer_id, m.producer_epoch),
        (TransactionState::Ongoing, pid, epoch)
    );
    assert_eq!(m.partitions.len(), 1);
    settle(&s, "t", TransactionState::CompleteAbort).await;
    let m = s.txn.describe("t").expect("describe");
    // The timeout abort fences the producer: the epoch is bumped.
    assert_eq!(
        (m.state, m.producer_id, m.producer_epoch),
        (TransactionState::CompleteAbort, pid, epoch + 1)
    );
    assert_eq!(high_watermark(&s, "a", 0), 1, "one abort marker");
    assert_eq!(marker_coordinator_epoch(&s, "a", 0, pid), 7);
}

// An EndTxn past its Prepare record, about to write markers, when the partition is unloaded:
// it answers NOT_COORDINATOR and writes no marker. The next owner (coordinator epoch 5)
// finishes the commit from the Prepare record with markers carrying epoch 5.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unload_fails_end_txn_before_markers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open(dir.path());
    create_topic(&s, "a");
    let (pid, epoch) = s.txn.init_producer_id("t", 1000, None).await.expect("init");
    s.txn
        .add_partitions("t", pid, epoch, &[("a".into(), 1)], 0)
        .await
        .expect("add");
    // EndTxn's first half: PrepareCommit written and durable.
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
    let index = s.txn.partition_for("t");
    s.txn.unload_partition(index);
    // Its second half, on the entry it already holds.
    assert_eq!(s.txn.complete(&entry).await, Err(TxnError::NotCoordinator));
    assert_eq!(
        high_watermark(&s, "a", 1),
        0,
        "a resigned coordinator wrote a marker"
    );

    tokio::task::block_in_place(|| s.txn.load_partition(index, 5)).expect("reload");
    settle(&s, "t", TransactionState::CompleteCommit).await;
    assert_eq!(
        s.txn.describe("t").expect("describe").state,
        TransactionState::CompleteCommit
    );
    assert_eq!(high_watermark(&s, "a", 1), 1, "one commit marker");
    assert_eq!(marker_coordinator_epoch(&s, "a", 1, pid), 5);
}

// EndTxn's markers carry the coordinator epoch the partition was loaded with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_txn_markers_carry_coordinator_epoch_of_load() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open(dir.path());
    create_topic(&s, "a");
    let index = s.txn.partition_for("t");
    tokio::task::block_in_place(|| s.txn.state_topic().map(|_| ())).expect("state topic");
    tokio::task::block_in_place(|| s.txn.load_partition(index, 3)).expect("reload");
    let (pid, epoch) = s.txn.init_producer_id("t", 1000, None).await.expect("init");
    s.txn
        .add_partitions("t", pid, epoch, &[("a".into(), 0), ("a".into(), 1)], 0)
        .await
        .expect("add");
    s.txn
        .end_transaction("t", pid, epoch, TransactionResult::Commit, 0)
        .await
        .expect("commit");
    assert_eq!(marker_coordinator_epoch(&s, "a", 0, pid), 3);
    assert_eq!(marker_coordinator_epoch(&s, "a", 1, pid), 3);
}

/// Makes this broker the leader of `topic`-`index` with `replicas` all in the ISR at
/// `epoch`: with a second replica that never fetches, nothing written there commits.
fn lead(s: &Setup, topic: &str, index: i32, replicas: &[i32], epoch: i32) {
    let state = logbook_replication::PartitionState {
        topic_partition: logbook_replication::TopicPartition {
            topic: topic.into(),
            partition: index,
        },
        topic_id: uuid::Uuid::nil(),
        replicas: replicas.to_vec(),
        isr: replicas.to_vec(),
        leader: 0,
        leader_epoch: logbook_replication::LeaderEpoch(epoch),
        partition_epoch: epoch,
    };
    s.topics
        .replicas
        .partition(topic, index)
        .expect("partition")
        .become_leader(&state)
        .expect("lead");
}

// Markers that cannot become durable in time do not leave the transaction stuck in
// PrepareCommit: EndTxn is answered (the outcome is decided once PrepareCommit is durable,
// as Kafka answers), a retry gets CONCURRENT_TRANSACTIONS while the completion retries in
// the background, and once the partition commits again the transaction completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markers_that_time_out_are_retried_until_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open_config(dir.path(), |c| c.write_timeout_ms = 300);
    create_topic(&s, "a");
    lead(&s, "a", 0, &[0, 2], 1);
    let (pid, epoch) = s
        .txn
        .init_producer_id("t", 10_000, None)
        .await
        .expect("init");
    s.txn
        .add_partitions("t", pid, epoch, &[("a".into(), 0), ("a".into(), 1)], 0)
        .await
        .expect("add");
    assert_eq!(
        s.txn
            .end_transaction("t", pid, epoch, TransactionResult::Commit, 0)
            .await,
        Ok((-1, -1))
    );
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    assert_eq!(
        s.txn.describe("t").expect("describe").state,
        TransactionState::PrepareCommit,
        "broker 2 never fetched the marker"
    );
    assert_eq!(
        s.txn
            .end_transaction("t", pid, epoch, TransactionResult::Commit, 0)
            .await,
        Err(TxnError::ConcurrentTransactions)
    );
    lead(&s, "a", 0, &[0], 2);
    settle(&s, "t", TransactionState::CompleteCommit).await;
    assert_eq!(
        s.txn.describe("t").expect("describe").state,
        TransactionState::CompleteCommit
    );
    assert_eq!(
        s.txn
            .end_transaction("t", pid, epoch, TransactionResult::Commit, 0)
            .await,
        Ok((-1, -1))
    );
}

// A PrepareCommit that does not become durable is undone in memory, as Kafka clears its
// pending state without transitioning: EndTxn answers COORDINATOR_NOT_AVAILABLE and the
// client's retry writes PrepareCommit again, instead of CONCURRENT_TRANSACTIONS forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepare_that_is_not_durable_is_undone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = open_config(dir.path(), |c| c.write_timeout_ms = 300);
    create_topic(&s, "a");
    let (pid, epoch) = s
        .txn
        .init_producer_id("t", 10_000, None)
        .await
        .expect("init");
    s.txn
        .add_partitions("t", pid, epoch, &[("a".into(), 0)], 0)
        .await
        .expect("add");
    s.txn.state_topic().expect("state topic");
    let state_topic = TRANSACTION_STATE_TOPIC_NAME;
    let index = s.txn.partition_for("t");
    lead(&s, state_topic, index, &[0, 2], 1);
    assert_eq!(
        s.txn
            .end_transaction("t", pid, epoch, TransactionResult::Commit, 0)
            .await,
        Err(TxnError::CoordinatorNotAvailable)
    );
    assert_eq!(
        s.txn.describe("t").expect("describe").state,
        TransactionState::Ongoing
    );
    lead(&s, state_topic, index, &[0], 2);
    assert_eq!(
        s.txn
            .end_transaction("t", pid, epoch, TransactionResult::Commit, 0)
            .await,
        Ok((-1, -1))
    );
    assert_eq!(
        s.txn.describe("t").expect("describe").state,
        TransactionState::CompleteCommit
    );
}
