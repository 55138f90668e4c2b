//! The leader side of replication, with two fake followers driven by hand through
//! `fetch_for_follower` and a fake controller answering AlterPartition: the high watermark
//! over the maximal ISR, acks=all's checks, leadership loss, ISR shrink and expand, the
//! diverging-epoch answer and the high-watermark checkpoint.

use std::sync::Arc;

use logbook_storage::log_validator::{self, AppendOrigin, ValidatorConfig};
use parking_lot::Mutex;

use super::*;
use crate::hw_checkpoint::{HighWatermarkCheckpoint, HighWatermarks};

const LEADER: i32 = 1;
const LAG_MS: i64 = 1_000;

/// A controller that keeps every AlterPartition until the test answers it.
#[derive(Default)]
struct FakeController {
    pending: Mutex<Vec<(AlterPartitionRequest, AlterPartitionCallback)>>,
}

impl AlterPartitionSender for FakeController {
    fn submit(&self, request: AlterPartitionRequest, done: AlterPartitionCallback) {
        self.pending.lock().push((request, done));
    }
}

impl FakeController {
    /// The proposed ISRs so far, oldest first, without answering.
    fn proposals(&self) -> Vec<Vec<i32>> {
        self.pending
            .lock()
            .iter()
            .map(|(r, _)| r.new_isr.iter().map(|m| m.broker_id).collect())
            .collect()
    }

    /// Commits the oldest proposal with `partition_epoch`; returns its ISR.
    fn accept(&self, partition_epoch: i32) -> Vec<i32> {
        let (request, done) = self.pending.lock().remove(0);
        let isr: Vec<i32> = request.new_isr.iter().map(|m| m.broker_id).collect();
        done(Ok(AlterPartitionCommitted {
            isr: isr.clone(),
            leader_epoch: request.leader_epoch,
            partition_epoch,
        }));
        isr
    }

    /// Refuses the oldest proposal.
    fn reject(&self, error: AlterPartitionError) {
        let (_, done) = self.pending.lock().remove(0);
        done(Err(error));
    }
}

fn state(
    replicas: &[i32],
    isr: &[i32],
    leader: i32,
    epoch: i32,
    partition_epoch: i32,
) -> PartitionState {
    PartitionState {
        topic_partition: TopicPartition {
            topic: "r".to_string(),
            partition: 0,
        },
        topic_id: uuid::Uuid::nil(),
        replicas: replicas.to_vec(),
        isr: isr.to_vec(),
        leader,
        leader_epoch: LeaderEpoch(epoch),
        partition_epoch,
    }
}

/// A replica on broker 1 with no role yet; its flusher is stopped, so the test makes the
/// log durable by calling `flush` itself.
fn replica(
    dir: &std::path::Path,
    controller: &Arc<FakeController>,
    checkpoint: Option<Offset>,
) -> Arc<Partition> {
    replica_with_eligibility(dir, controller, checkpoint, Arc::new(AnyBrokerEligible))
}

/// [`replica`], asking `isr_eligibility` which brokers may count in the ISR.
fn replica_with_eligibility(
    dir: &std::path::Path,
    controller: &Arc<FakeController>,
    checkpoint: Option<Offset>,
    isr_eligibility: Arc<dyn IsrEligibility>,
) -> Arc<Partition> {
    let flusher = Flusher::start(FlushPolicy::EveryWrite, 1);
    flusher.shutdown();
    let sender: Arc<dyn AlterPartitionSender> = controller.clone();
    Partition::open_replica(
        TopicPartition {
            topic: "r".to_string(),
            partition: 0,
        },
        &dir.join("r-0"),
        LogConfig::default(),
        flusher,
        ReplicaOptions {
            local_broker_id: LEADER,
            checkpointed_high_watermark: checkpoint,
            alter_partition: sender,
            replica_lag_time_max_ms: LAG_MS,
            isr_eligibility,
        },
    )
    .expect("open replica")
}

fn fetch(replica_id: i32, fetch_offset: i64, last_fetched_epoch: i32) -> FollowerFetch {
    FollowerFetch {
        replica_id,
        replica_epoch: 100 + i64::from(replica_id),
        fetch_offset: Offset(fetch_offset),
        log_start_offset: Offset(0),
        current_leader_epoch: -1,
        last_fetched_epoch,
        max_bytes: 1 << 20,
        min_one_batch: true,
    }
}

/// A follower fetch that must return records; returns how many bytes.
fn fetch_records(partition: &Partition, replica_id: i32, fetch_offset: i64, now_ms: i64) -> usize {
    match partition.fetch_for_follower(&fetch(replica_id, fetch_offset, -1), now_ms) {
        Ok(FollowerFetchResult::Records { read, .. }) => read.bytes,
        other => panic!("expected records, got {other:?}"),
    }
}

fn validated() -> ValidatedBatches {
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
    log_validator::validate(bytes::Bytes::from(batch()), &config).expect("valid batch")
}

// HW = the least counted offset over the ISR: the leader counts only what it fsync'd,
// followers their fetch offsets, and an ISR member never heard from holds it back.
#[test]
fn high_watermark_is_min_over_isr_of_durable_offsets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let controller = Arc::new(FakeController::default());
    let p = replica(dir.path(), &controller, None);
    assert!(p
        .become_leader(&state(&[1, 2, 3], &[1, 2, 3], LEADER, 1, 0))
        .expect("lead"));
    for _ in 0..3 {
        p.append(&batch()).expect("append");
    }
    p.flush();
    assert_eq!(p.high_watermark(), Offset(0), "followers 2 and 3 unknown");
    let now = now_ms();
    assert!(fetch_records(&p, 2, 0, now) > 0);
    fetch_records(&p, 2, 3, now);
    assert_eq!(p.high_watermark(), Offset(0), "follower 3 still unknown");
    fetch_records(&p, 3, 1, now);
    assert_eq!(p.high_watermark(), Offset(1));
    fetch_records(&p, 3, 3, now);
    assert_eq!(p.high_watermark(), Offset(3));

    // Appended but not yet fsync'd by the leader: followers having it is not enough.
    p.append(&batch()).expect("append");
    fetch_records(&p, 2, 4, now);
    fetch_records(&p, 3, 4, now);
    assert_eq!(
        p.high_watermark(),
        Offset(3),
        "leader's offset 3 is not durable yet"
    );
    p.flush();
    assert_eq!(p.high_watermark(), Offset(4));
    // Never down, even if a follower reports less (it truncated).
    fetch_records(&p, 3, 2, now);
    assert_eq!(p.high_watermark(), Offset(4));
}

// Under min.insync.replicas the HW stays, acks=all is refused before the append with
// nothing appended, and once the ISR is big enough both work again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_min_isr_nothing_commits_and_acks_all_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let controller = Arc::new(FakeController::default());
    let p = replica(dir.path(), &controller, None);
    p.become_leader(&state(&[1, 2], &[1], LEADER, 1, 0))
        .expect("lead");
    let refused = p.append_as_leader(&validated(), -1, 2);
    assert!(
        matches!(
            refused,
            Err(Error::NotEnoughReplicas {
                isr: 1,
                min_insync_replicas: 2,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(p.log_end_offset(), Offset(0), "nothing appended");
    // acks=1 appends, but the HW waits for the ISR to reach min.insync.replicas.
    p.append_as_leader(&validated(), 1, 2)
        .expect("acks=1 appends");
    p.flush();
    fetch_records(&p, 2, 1, now_ms());
    assert_eq!(
        p.high_watermark(),
        Offset(0),
        "ISR {{1}} < min.insync.replicas 2"
    );
    // Follower 2 caught up: proposed, committed; the HW moves and acks=all is served.
    assert_eq!(controller.proposals(), vec![vec![1, 2]]);
    controller.accept(1);
    assert_eq!(p.isr(), (vec![1, 2], vec![1, 2]));
    assert_eq!(p.high_watermark(), Offset(1));
    p.append_as_leader(&validated(), -1, 2)
        .expect("acks=all appends");
    p.flush();
    fetch_records(&p, 2, 2, now_ms());
    p.wait_for_acks_all(Offset(2), Duration::from_secs(5), 2)
        .await
        .expect("acknowledged");
}

// The HW passed the records but the ISR shrank below min.insync.replicas before the
// waiter checked: NOT_ENOUGH_REPLICAS_AFTER_APPEND (the records stay).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isr_shrunk_below_min_after_append() {
    let dir = tempfile::tempdir().expect("tempdir");
    let controller = Arc::new(FakeController::default());
    let p = replica(dir.path(), &controller, None);
    p.become_leader(&state(&[1, 2], &[1, 2], LEADER, 1, 0))
        .expect("lead");
    let start = now_ms();
    p.append_as_leader(&validated(), -1, 2).expect("append");
    p.flush();
    fetch_records(&p, 2, 1, start);
    assert_eq!(p.high_watermark(), Offset(1));
    // Follower 2 stops fetching while the log grows; after the lag time it is dropped.
    p.append_as_leader(&validated(), 1, 2).expect("append");
    assert_eq!(
        p.maybe_shrink_isr(start + LAG_MS + 1)
            .into_iter()
            .collect::<Vec<_>>(),
        vec![2]
    );
    controller.accept(1);
    let waited = p
        .wait_for_acks_all(Offset(1), Duration::from_secs(5), 2)
        .await;
    assert!(
        matches!(
            waited,
            Err(Error::NotEnoughReplicasAfterAppend {
                isr: 1,
                min_insync_replicas: 2,
                ..
            })
        ),
        "{waited:?}"
    );
    assert_eq!(p.log_end_offset(), Offset(2));
}

// Losing leadership fails every acks=all waiter with NOT_LEADER_OR_FOLLOWER and refuses
// appends from then on; a stale (older-epoch) change is ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn become_follower_fails_waiters_and_refuses_appends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let controller = Arc::new(FakeController::default());
    let p = replica(dir.path(), &controller, None);
    p.become_leader(&state(&[1, 2], &[1, 2], LEADER, 1, 0))
        .expect("lead");
    p.append_as_leader(&validated(), -1, 1).expect("append");
    p.flush();
    let waiter = {
        let p = Arc::clone(&p);
        tokio::spawn(async move {
            p.wait_for_acks_all(Offset(1), Duration::from_secs(30), 1)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiter.is_finished(), "follower 2 has not fetched");
    assert!(p.become_follower(&state(&[1, 2], &[1, 2], 2, 2, 1)));
    let waited = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("waiter woke")
        .expect("task");
    assert!(
        matches!(waited, Err(Error::NotLeaderOrFollower(_))),
        "{waited:?}"
    );
    assert!(matches!(
        p.append(&batch()),
        Err(Error::NotLeaderOrFollower(_))
    ));
    assert!(matches!(
        p.fetch_for_follower(&fetch(2, 0, -1), now_ms()),
        Err(Error::NotLeaderOrFollower(_))
    ));
    assert_eq!(p.current_leader(), (2, LeaderEpoch(2)));
    // A late metadata replay of epoch 1 does not make it leader again.
    assert!(!p
        .become_leader(&state(&[1, 2], &[1, 2], LEADER, 1, 0))
        .expect("stale"));
    assert!(!p.is_leader());
}

// A follower that stops catching up leaves the ISR after replica.lag.time.max.ms (still
// counted until the controller commits); it comes back once it reaches the HW; one change
// in flight at a time; a refusal the controller cannot have applied returns to the
// committed ISR.
#[test]
fn isr_shrinks_after_lag_and_expands_on_catch_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let controller = Arc::new(FakeController::default());
    let p = replica(dir.path(), &controller, None);
    p.become_leader(&state(&[1, 2, 3], &[1, 2, 3], LEADER, 1, 0))
        .expect("lead");
    let base = now_ms();
    p.append(&batch()).expect("append");
    p.flush();
    fetch_records(&p, 2, 1, base + LAG_MS);
    assert!(
        p.maybe_shrink_isr(base + LAG_MS / 2).is_empty(),
        "nobody lags yet"
    );
    let removed = p.maybe_shrink_isr(base + LAG_MS + LAG_MS / 2);
    assert_eq!(removed.into_iter().collect::<Vec<_>>(), vec![3]);
    assert_eq!(controller.proposals(), vec![vec![1, 2]]);
    // In flight: the old ISR still counts, and no second change is proposed.
    assert_eq!(p.isr(), (vec![1, 2, 3], vec![1, 2, 3]));
    assert_eq!(
        p.high_watermark(),
        Offset(0),
        "3 still counts while the shrink is pending"
    );
    assert!(p.maybe_shrink_isr(base + 10 * LAG_MS).is_empty());
    controller.accept(1);
    assert_eq!(p.isr(), (vec![1, 2], vec![1, 2]));
    assert_eq!(
        p.high_watermark(),
        Offset(1),
        "the committed shrink releases the HW"
    );

    // Follower 3 fetches below the HW: not yet; at the HW: proposed, and counted at once.
    fetch_records(&p, 3, 0, base + 2 * LAG_MS);
    assert!(controller.proposals().is_empty());
    fetch_records(&p, 3, 1, base + 2 * LAG_MS);
    assert_eq!(controller.proposals(), vec![vec![1, 2, 3]]);
    assert_eq!(p.isr(), (vec![1, 2], vec![1, 2, 3]));
    controller.reject(AlterPartitionError::IneligibleReplica);
    assert_eq!(p.isr(), (vec![1, 2], vec![1, 2]));
    // Proposed again on its next fetch, and committed.
    fetch_records(&p, 3, 1, base + 2 * LAG_MS);
    controller.accept(2);
    assert_eq!(p.isr(), (vec![1, 2, 3], vec![1, 2, 3]));
}

// KIP-320: a follower whose last fetched epoch ended earlier on the leader gets the
// diverging epoch and its end, no records, and its position is not recorded; one whose log
// matches gets records. OffsetsForLeaderEpoch answers from the same cache.
#[test]
fn diverging_epoch_is_answered_without_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let controller = Arc::new(FakeController::default());
    let p = replica(dir.path(), &controller, None);
    p.become_leader(&state(&[1, 2], &[1, 2], LEADER, 1, 0))
        .expect("lead");
    for _ in 0..3 {
        p.append(&batch()).expect("append");
    }
    // A new leader epoch starts at the log end, before anything is appended in it.
    assert!(p
        .become_leader(&state(&[1, 2], &[1, 2], LEADER, 3, 1))
        .expect("lead"));
    assert_eq!(
        p.end_offset_for_epoch(1).expect("epoch 1"),
        Some((LeaderEpoch(1), Offset(3)))
    );
    assert_eq!(
        p.end_offset_for_epoch(3).expect("epoch 3"),
        Some((LeaderEpoch(3), Offset(3)))
    );
    for _ in 0..2 {
        p.append(&batch()).expect("append");
    }
    p.flush();
    assert_eq!(
        p.end_offset_for_epoch(2).expect("epoch 2"),
        Some((LeaderEpoch(1), Offset(3)))
    );
    assert_eq!(
        p.end_offset_for_epoch(3).expect("epoch 3"),
        Some((LeaderEpoch(3), Offset(5)))
    );
    assert_eq!(p.end_offset_for_epoch(4).expect("epoch 4"), None);

    let now = now_ms();
    // The follower wrote offset 3 in epoch 2, which the leader never had.
    match p.fetch_for_follower(&fetch(2, 4, 2), now).expect("fetch") {
        FollowerFetchResult::Diverging {
            epoch, end_offset, ..
        } => {
            assert_eq!((epoch, end_offset), (LeaderEpoch(1), Offset(3)));
        }
        other => panic!("expected diverging, got {other:?}"),
    }
    // It has epoch 1 up to 4, but epoch 1 ended at 3 here.
    match p.fetch_for_follower(&fetch(2, 4, 1), now).expect("fetch") {
        FollowerFetchResult::Diverging {
            epoch, end_offset, ..
        } => {
            assert_eq!((epoch, end_offset), (LeaderEpoch(1), Offset(3)));
        }
        other => panic!("expected diverging, got {other:?}"),
    }
    assert_eq!(
        p.high_watermark(),
        Offset(0),
        "a diverging fetch records no position"
    );
    // Truncated to 3: it matches, gets the two records of epoch 3, and counts.
    match p.fetch_for_follower(&fetch(2, 3, 1), now).expect("fetch") {
        FollowerFetchResult::Records { read, offsets } => {
            assert!(read.bytes > 0);
            assert_eq!(offsets.log_end_offset, Offset(5));
        }
        other => panic!("expected records, got {other:?}"),
    }
    assert_eq!(p.high_watermark(), Offset(3));
    fetch_records(&p, 2, 5, now);
    assert_eq!(p.high_watermark(), Offset(5));
}

// Fetches the leader must refuse: a replica not assigned (UNKNOWN_LEADER_EPOCH when it names
// the epoch, so a reassignment race retries; NOT_LEADER_OR_FOLLOWER otherwise), stale and
// future epochs, and an offset past the log end.
#[test]
fn follower_fetch_refusals() {
    let dir = tempfile::tempdir().expect("tempdir");
    let controller = Arc::new(FakeController::default());
    let p = replica(dir.path(), &controller, None);
    assert!(
        matches!(
            p.fetch_for_follower(&fetch(2, 0, -1), now_ms()),
            Err(Error::NotLeaderOrFollower(_))
        ),
        "no role yet"
    );
    p.become_leader(&state(&[1, 2], &[1, 2], LEADER, 4, 0))
        .expect("lead");
    let with_epoch = |replica_id, epoch| FollowerFetch {
        current_leader_epoch: epoch,
        ..fetch(replica_id, 0, -1)
    };
    assert!(matches!(
        p.fetch_for_follower(&with_epoch(9, 4), now_ms()),
        Err(Error::UnknownLeaderEpoch { .. })
    ));
    assert!(matches!(
        p.fetch_for_follower(&fetch(9, 0, -1), now_ms()),
        Err(Error::NotLeaderOrFollower(_))
    ));
    assert!(matches!(
        p.fetch_for_follower(&with_epoch(2, 3), now_ms()),
        Err(Error::FencedLeaderEpoch { .. })
    ));
    assert!(matches!(
        p.fetch_for_follower(&with_epoch(2, 5), now_ms()),
        Err(Error::UnknownLeaderEpoch { .. })
    ));
    assert!(matches!(
        p.fetch_for_follower(&fetch(2, 1, -1), now_ms()),
        Err(Error::Storage(
            logbook_storage::Error::OffsetOutOfRange { .. }
        ))
    ));
    assert!(matches!(
        p.fetch_for_follower(&with_epoch(2, 4), now_ms()),
        Ok(FollowerFetchResult::Records { .. })
    ));
}

// A replica reopens at min(checkpointed HW, log end), not at its log end; leading an ISR of
// one moves it to the durable end at once. KIP-207: a leader whose HW is below its epoch
// start refuses to name offsets until followers catch it up.
#[test]
fn reopen_uses_the_checkpointed_high_watermark() {
    let dir = tempfile::tempdir().expect("tempdir");
    let controller = Arc::new(FakeController::default());
    {
        let p = replica(dir.path(), &controller, None);
        p.become_leader(&state(&[1], &[1], LEADER, 1, 0))
            .expect("lead");
        for _ in 0..3 {
            p.append(&batch()).expect("append");
        }
        p.flush();
        assert_eq!(p.high_watermark(), Offset(3));
        p.close().expect("close");
    }
    let reopened = replica(dir.path(), &controller, Some(Offset(1)));
    assert_eq!(reopened.high_watermark(), Offset(1));
    assert_eq!(
        reopened.offsets().expect("offsets").high_watermark,
        Offset(1)
    );
    assert!(
        matches!(
            reopened.append(&batch()),
            Err(Error::NotLeaderOrFollower(_))
        ),
        "no role yet"
    );
    // Leading with a follower: the HW stays until the follower confirms, and ListOffsets
    // may not answer yet.
    reopened
        .become_leader(&state(&[1, 2], &[1, 2], LEADER, 2, 0))
        .expect("lead");
    assert_eq!(reopened.high_watermark(), Offset(1));
    assert!(matches!(
        reopened.check_offsets_available(),
        Err(Error::OffsetNotAvailable { .. })
    ));
    fetch_records(&reopened, 2, 3, now_ms());
    assert_eq!(reopened.high_watermark(), Offset(3));
    reopened.check_offsets_available().expect("caught up");
    reopened.close().expect("close");

    let beyond = replica(dir.path(), &controller, Some(Offset(99)));
    assert_eq!(beyond.high_watermark(), Offset(3), "clamped to the log end");
    beyond.close().expect("close");
    let sole = replica(dir.path(), &controller, None);
    assert_eq!(sole.high_watermark(), Offset(0));
    sole.become_sole_leader();
    assert_eq!(
        sole.high_watermark(),
        Offset(3),
        "a single node shows its durable end at once"
    );
    sole.close().expect("close");
}

// The replica manager writes every partition's HW to one replication-offset-checkpoint
// at shutdown and reads it back at the next start; the single-node path still shows the
// durable end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_manager_checkpoints_high_watermarks() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let manager =
            crate::ReplicaManager::new(dir.path(), FlushPolicy::EveryWrite, 1).with_broker_id(7);
        let opened = manager
            .create_partitions("t", 0..2, &LogConfig::default())
            .expect("create");
        for _ in 0..2 {
            opened[1].append(&batch()).expect("append");
        }
        opened[1]
            .wait_durable(Offset(2), Duration::from_secs(5))
            .await
            .expect("durable");
        manager.shutdown();
    }
    let written = HighWatermarkCheckpoint::new(dir.path())
        .read()
        .expect("read");
    let expected: HighWatermarks = [
        (
            TopicPartition {
                topic: "t".into(),
                partition: 0,
            },
            Offset(0),
        ),
        (
            TopicPartition {
                topic: "t".into(),
                partition: 1,
            },
            Offset(2),
        ),
    ]
    .into_iter()
    .collect();
    assert_eq!(written, expected);
    // Reopened by a manager that leads alone: the HW is the durable end.
    let manager =
        crate::ReplicaManager::new(dir.path(), FlushPolicy::EveryWrite, 1).with_broker_id(7);
    let opened = manager
        .create_partitions("t", 0..2, &LogConfig::default())
        .expect("reopen");
    assert_eq!(opened[1].high_watermark(), Offset(2));
    assert_eq!(opened[1].current_leader(), (7, LeaderEpoch(0)));
    manager.shutdown();
}

// KIP-497's maximal ISR: a follower whose addition is pending already holds the HW back
// (the controller may commit it, and then it must have every committed record), even when
// it has not caught up with the log end lately.
#[test]
fn pending_isr_addition_counts_toward_the_high_watermark() {
    let dir = tempfile::tempdir().expect("tempdir");
    let controller = Arc::new(FakeController::default());
    let p = replica(dir.path(), &controller, None);
    p.become_leader(&state(&[1, 2, 3], &[1, 2], LEADER, 1, 0))
        .expect("lead");
    let now = now_ms();
    p.append(&batch()).expect("append");
    p.flush();
    fetch_records(&p, 2, 1, now);
    assert_eq!(p.high_watermark(), Offset(1));
    p.append(&batch()).expect("append");
    p.flush();
    // Follower 3 reaches the HW (1) but not the log end (2): proposed for the ISR.
    fetch_records(&p, 3, 1, now);
    assert_eq!(controller.proposals(), vec![vec![1, 2, 3]]);
    assert_eq!(p.isr(), (vec![1, 2], vec![1, 2, 3]));
    fetch_records(&p, 2, 2, now);
    assert_eq!(p.high_watermark(), Offset(1), "pending member 3 is at 1");
    controller.accept(1);
    fetch_records(&p, 3, 2, now);
    assert_eq!(p.high_watermark(), Offset(2));
}

// Coordinator records (group, offset and transaction log writes) are acks=all writes in
// Kafka: refused before they are appended when the committed ISR is under the partition's
// min.insync.replicas, and not acknowledged when the ISR that committed them is.
#[tokio::test]
async fn coordinator_appends_check_min_insync_replicas() {
    let dir = tempfile::tempdir().expect("tempdir");
    let controller = Arc::new(FakeController::default());
    let p = replica(dir.path(), &controller, None);
    p.become_leader(&state(&[1, 2], &[1], LEADER, 1, 0))
        .expect("lead");
    p.set_min_insync_replicas(2);
    let refused = p.append_for_coordinator(&batch());
    assert!(
        matches!(
            refused,
            Err(Error::NotEnoughReplicas {
                isr: 1,
                min_insync_replicas: 2,
                ..
            })
        ),
        "{refused:?}"
    );
    assert_eq!(p.log_end_offset(), Offset(0), "nothing appended");
    // With min.insync.replicas 1 it is appended and committed by the ISR {1}.
    p.set_min_insync_replicas(1);
    p.append_for_coordinator(&batch()).expect("appended");
    p.flush();
    p.wait_durable(Offset(1), std::time::Duration::from_secs(5))
        .await
        .expect("committed");
}

// Kafka's `handleAlterPartitionError`: only a change the controller cannot have applied
// (OPERATION_NOT_ATTEMPTED, INELIGIBLE_REPLICA) returns to the committed ISR. After
// NEW_LEADER_ELECTED, INVALID_UPDATE_VERSION or UNKNOWN_TOPIC_OR_PARTITION the controller
// may have committed the addition and elected the new member (a reassignment [1,2] ->
// [3,2] does exactly that), so the pending member keeps holding the high watermark until
// new metadata arrives; an unknown failure is sent again.
#[test]
fn a_refused_isr_addition_keeps_holding_the_high_watermark_until_new_metadata() {
    for refusal in [
        AlterPartitionError::NewLeaderElected,
        AlterPartitionError::InvalidUpdateVersion,
        AlterPartitionError::UnknownTopicOrPartition,
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let controller = Arc::new(FakeController::default());
        let p = replica(dir.path(), &controller, None);
        p.become_leader(&state(&[1, 2, 3], &[1, 2], LEADER, 1, 0))
            .expect("lead");
        let now = now_ms();
        p.append(&batch()).expect("append");
        p.flush();
        fetch_records(&p, 2, 1, now);
        fetch_records(&p, 3, 1, now);
        assert_eq!(controller.proposals(), vec![vec![1, 2, 3]]);
        p.append(&batch()).expect("append");
        p.flush();
        controller.reject(refusal.clone());
        assert_eq!(p.isr(), (vec![1, 2], vec![1, 2, 3]), "{refusal:?}");
        fetch_records(&p, 2, 2, now);
        assert_eq!(
            p.high_watermark(),
            Offset(1),
            "{refusal:?}: member 3 (at 1) may be the new leader"
        );
        assert!(controller.proposals().is_empty(), "{refusal:?}: no retry");
        // The metadata that follows decides: here the controller committed [1, 2, 3].
        p.become_leader(&state(&[1, 2, 3], &[1, 2, 3], LEADER, 1, 1))
            .expect("lead");
        assert_eq!(p.isr(), (vec![1, 2, 3], vec![1, 2, 3]));
    }

    // An unknown failure: the same change is sent again, still pending meanwhile.
    let dir = tempfile::tempdir().expect("tempdir");
    let controller = Arc::new(FakeController::default());
    let p = replica(dir.path(), &controller, None);
    p.become_leader(&state(&[1, 2, 3], &[1, 2], LEADER, 1, 0))
        .expect("lead");
    p.append(&batch()).expect("append");
    p.flush();
    fetch_records(&p, 3, 0, now_ms());
    assert_eq!(controller.proposals(), vec![vec![1, 2, 3]]);
    controller.reject(AlterPartitionError::Other("request timed out".into()));
    assert_eq!(p.isr(), (vec![1, 2], vec![1, 2, 3]));
    assert_eq!(controller.proposals(), vec![vec![1, 2, 3]], "sent again");
    controller.accept(1);
    assert_eq!(p.isr(), (vec![1, 2, 3], vec![1, 2, 3]));
}

/// Brokers the test has fenced are ineligible; the others are, whatever their epoch.
#[derive(Default)]
struct Fenced(Mutex<Vec<i32>>);

impl IsrEligibility for Fenced {
    fn is_eligible(&self, broker_id: i32, _broker_epoch: i64) -> bool {
        !self.0.lock().contains(&broker_id)
    }
}

// KIP-841: a follower that was caught up when it died stays "caught up" for the lag time,
// so once the controller fenced it and took it out of the ISR, only its ineligibility keeps
// it from holding the high watermark (and every acks=all write) back for that long; and a
// fenced broker is never proposed for the ISR.
#[test]
fn a_fenced_follower_outside_the_isr_does_not_hold_the_high_watermark() {
    let dir = tempfile::tempdir().expect("tempdir");
    let controller = Arc::new(FakeController::default());
    let fenced = Arc::new(Fenced::default());
    let p = replica_with_eligibility(dir.path(), &controller, None, fenced.clone());
    p.become_leader(&state(&[1, 2, 3], &[1, 2, 3], LEADER, 1, 0))
        .expect("lead");
    let now = now_ms();
    p.append(&batch()).expect("append");
    p.flush();
    fetch_records(&p, 2, 1, now);
    fetch_records(&p, 3, 1, now);
    assert_eq!(p.high_watermark(), Offset(1));
    // Broker 3 dies at offset 1; the controller fences it and shrinks the ISR.
    p.append(&batch()).expect("append");
    p.flush();
    fenced.0.lock().push(3);
    assert!(!p
        .become_leader(&state(&[1, 2, 3], &[1, 2], LEADER, 1, 1))
        .expect("same leader epoch, new ISR"));
    fetch_records(&p, 2, 2, now);
    assert_eq!(
        p.high_watermark(),
        Offset(2),
        "fenced follower 3 (at 1, caught up {LAG_MS} ms ago at most) must not count"
    );
    // Fenced, it reaches the log end: not proposed. Unfenced again, it is.
    p.append(&batch()).expect("append");
    p.flush();
    fetch_records(&p, 3, 3, now);
    assert!(controller.proposals().is_empty(), "fenced broker proposed");
    fenced.0.lock().clear();
    fetch_records(&p, 3, 3, now);
    assert_eq!(controller.proposals(), vec![vec![1, 2, 3]]);
}

// With leadership from the controller, a created partition serves nothing until
// apply_partition_changes names its leader; then this broker leads or follows as told, a
// stale change is ignored, and an unhosted partition is reported.
#[test]
fn apply_partition_changes_gives_roles() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manager = crate::ReplicaManager::new(dir.path(), FlushPolicy::EveryWrite, 1)
        .with_broker_id(LEADER)
        .with_controller_leadership();
    let opened = manager
        .create_partitions("r", 0..2, &LogConfig::default())
        .expect("create");
    assert!(matches!(
        opened[0].append(&batch()),
        Err(Error::NotLeaderOrFollower(_))
    ));
    let tp = |partition| TopicPartition {
        topic: "r".into(),
        partition,
    };
    assert!(matches!(
        manager.get_partition_or_error(&tp(0), -1),
        Err(Error::NotLeaderOrFollower(_))
    ));
    let mut follower = state(&[2, 1], &[2, 1], 2, 3, 0);
    follower.topic_partition = tp(1);
    let mut missing = state(&[1], &[1], LEADER, 1, 0);
    missing.topic_partition = tp(9);
    let results = manager.apply_partition_changes(vec![
        state(&[1, 2], &[1, 2], LEADER, 2, 0),
        follower.clone(),
        missing,
    ]);
    assert!(matches!(
        results[0].1,
        Ok(crate::PartitionChange::Leader(true))
    ));
    assert!(matches!(
        results[1].1,
        Ok(crate::PartitionChange::Follower(true))
    ));
    assert!(matches!(
        results[2].1,
        Err(Error::UnknownTopicOrPartition(_))
    ));
    opened[0].append(&batch()).expect("the leader appends");
    assert_eq!(opened[0].current_leader(), (LEADER, LeaderEpoch(2)));
    assert!(matches!(
        opened[1].append(&batch()),
        Err(Error::NotLeaderOrFollower(_))
    ));
    assert_eq!(opened[1].current_leader(), (2, LeaderEpoch(3)));
    // Replaying an older epoch changes nothing.
    let results = manager.apply_partition_changes(vec![state(&[1, 2], &[1, 2], 2, 1, 0)]);
    assert!(matches!(
        results[0].1,
        Ok(crate::PartitionChange::Follower(false))
    ));
    assert!(opened[0].is_leader());
    manager.shutdown();
}

// min.insync.replicas comes with the log config at open: a leader whose committed ISR is
// smaller than it holds its high watermark from the first append, before any produce
// passed the topic's value; a config change lowering it releases the high watermark.
#[test]
fn min_insync_replicas_is_known_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flusher = Flusher::start(FlushPolicy::EveryWrite, 1);
    flusher.shutdown();
    let p = Partition::open_replica(
        TopicPartition {
            topic: "r".to_string(),
            partition: 0,
        },
        &dir.path().join("r-0"),
        LogConfig {
            min_insync_replicas: 2,
            ..LogConfig::default()
        },
        flusher,
        ReplicaOptions {
            local_broker_id: LEADER,
            checkpointed_high_watermark: None,
            alter_partition: Arc::new(NoController),
            replica_lag_time_max_ms: LAG_MS,
            isr_eligibility: Arc::new(AnyBrokerEligible),
        },
    )
    .expect("open replica");
    p.become_leader(&state(&[1, 2], &[1], LEADER, 1, 0))
        .expect("lead");
    p.append(&batch()).expect("append");
    p.flush();
    assert_eq!(
        p.high_watermark(),
        Offset(0),
        "an ISR of 1 is under min.insync.replicas 2"
    );
    p.set_config(LogConfig::default()).expect("config");
    assert_eq!(p.high_watermark(), Offset(1));
}

// min.insync.replicas above the replica count is capped at it (Kafka's `effectiveMinIsr`):
// a partition with one replica and min.insync.replicas 3 accepts acks=all, its high
// watermark follows the durable offset, and the acks=all wait succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_insync_replicas_is_capped_at_the_replica_count() {
    let dir = tempfile::tempdir().expect("tempdir");
    let controller = Arc::new(FakeController::default());
    let p = replica(dir.path(), &controller, None);
    p.become_leader(&state(&[1], &[1], LEADER, 1, 0))
        .expect("lead");
    p.append_as_leader(&validated(), -1, 3)
        .expect("acks=all appends");
    p.append_as_leader(&validated(), 1, 3)
        .expect("acks=1 appends");
    p.flush();
    assert_eq!(p.high_watermark(), Offset(2));
    p.wait_for_acks_all(Offset(2), Duration::from_secs(5), 3)
        .await
        .expect("acknowledged");
    // Two replicas, one in sync: the cap is 2, so acks=all is refused again.
    p.become_leader(&state(&[1, 2], &[1], LEADER, 2, 1))
        .expect("lead");
    let refused = p.append_as_leader(&validated(), -1, 3);
    assert!(
        matches!(
            refused,
            Err(Error::NotEnoughReplicas {
                isr: 1,
                min_insync_replicas: 2,
                ..
            })
        ),
        "{refused:?}"
    );
}

// A follower forgets a transaction once the leader's high watermark passes its marker, as
// Kafka's follower does on each high-watermark update: without it the follower's first
// unstable offset (which bounds its cleaner) stays at its first transaction and every
// completed transaction stays in memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_settles_transactions_the_high_watermark_passed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flusher = Flusher::start(FlushPolicy::EveryWrite, 1);
    let leader = super::open(dir.path(), "lead", &flusher);
    leader
        .append(&super::transactions::txn_batch(9, 1, 0))
        .expect("append");
    leader
        .write_txn_marker(9, 1, 0, TxnResult::Commit)
        .expect("marker");
    leader
        .wait_durable(Offset(2), Duration::from_secs(5))
        .await
        .expect("durable");
    // Every segment in order: the batch is stamped 0 and the marker with the wall clock,
    // so segment.ms (counted in record timestamps) put them in two.
    let mut segments: Vec<_> = std::fs::read_dir(dir.path().join("lead-0"))
        .expect("the leader's directory")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    segments.sort();
    let bytes: Vec<u8> = segments
        .iter()
        .flat_map(|p| std::fs::read(p).expect("the leader's segment"))
        .collect();

    let controller = Arc::new(FakeController::default());
    let follower = replica(dir.path(), &controller, None);
    assert!(follower.become_follower(&state(&[2, 1], &[2, 1], 2, 1, 0)));
    use crate::fetcher::FollowerLog;
    let info = FollowerLog::append_as_follower(&*follower, &bytes).expect("append");
    assert_eq!(info.log_end_offset, Offset(2));
    let unstable = || {
        follower
            .with_log(|log| Ok(log.first_unstable()))
            .expect("log")
    };
    assert_eq!(unstable(), Some(0), "the marker is not committed yet");
    FollowerLog::update_from_leader(&*follower, Offset(1), Offset(0)).expect("update");
    assert_eq!(unstable(), Some(0), "the marker at 1 is not under 1");
    FollowerLog::update_from_leader(&*follower, Offset(2), Offset(0)).expect("update");
    assert_eq!(unstable(), None);
}

// An acks=all waiter whose leadership ended fails even if this broker leads again before
// the waiter wakes up (the role watch only shows "leader" again): the record it waits for
// may have been truncated by the other leader in between. One thread, so the waiter runs
// only at the test's awaits: it sees the flip only once it is over.
#[tokio::test(flavor = "current_thread")]
async fn an_acks_all_waiter_fails_across_a_leader_flip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let controller = Arc::new(FakeController::default());
    let p = replica(dir.path(), &controller, None);
    p.become_leader(&state(&[1, 2], &[1, 2], LEADER, 1, 0))
        .expect("lead");
    p.append_as_leader(&validated(), -1, 1).expect("append");
    p.flush();
    let waiter = {
        let p = Arc::clone(&p);
        tokio::spawn(async move {
            p.wait_for_acks_all(Offset(1), Duration::from_secs(30), 1)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiter.is_finished(), "follower 2 has not fetched");
    // Follower in epoch 2, leader again in epoch 3 with only itself in the ISR: offset 1
    // becomes committed in the new epoch.
    let before = p.high_watermark();
    assert!(p.become_follower(&state(&[1, 2], &[1, 2], 2, 2, 1)));
    assert!(p
        .become_leader(&state(&[1], &[1], LEADER, 3, 2))
        .expect("lead again"));
    p.append_as_leader(&validated(), -1, 3).expect("append");
    p.flush();
    let waited = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("waiter woke")
        .expect("task");
    assert!(p.high_watermark() > before, "committed in epoch 3");
    assert!(
        matches!(waited, Err(Error::NotLeaderOrFollower(_))),
        "{waited:?}"
    );
}
