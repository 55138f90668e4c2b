//! Named cases: KIP-279's follower that lacks the leader's epoch, out of range both
//! ways, fencing, idempotent producers across failover, and the fsync rule.

use std::sync::Arc;
use std::time::Duration;

use logbook_storage::fault::{self, Op};
use logbook_storage::{AppendOutcome, LeaderEpoch, Offset};
use uuid::Uuid;

use super::super::{
    EndPointError, EpochRequest, EpochResult, FailureReason, FetchRequest, FetchedPartition,
    FetcherConfig, InitialFetchState, LeaderEndPoint, ReplicaFetcher, ReplicaFetcherHandle,
};
use super::support::{batch, tp, FlushMode, InMemoryLeader, LeaderState, Replica, Sent};
use crate::TopicPartition;

fn config() -> FetcherConfig {
    FetcherConfig {
        backoff: Duration::from_millis(50),
        ..FetcherConfig::default()
    }
}

fn fetcher(
    leader: &Arc<parking_lot::Mutex<LeaderState>>,
    follower: &Arc<Replica>,
    epoch: i32,
    config: FetcherConfig,
) -> ReplicaFetcher<InMemoryLeader, Replica> {
    let mut fetcher = ReplicaFetcher::new(InMemoryLeader::new(leader, 1, follower), config);
    fetcher
        .add_partitions(vec![InitialFetchState {
            log: Arc::clone(follower),
            topic_id: Uuid::nil(),
            current_leader_epoch: LeaderEpoch(epoch),
        }])
        .expect("add");
    fetcher
}

fn sent(fetcher: &mut ReplicaFetcher<InMemoryLeader, Replica>) -> Vec<Sent> {
    std::mem::take(&mut *fetcher.endpoint_mut().sent.lock())
}

/// Appends batches of `sizes` records as leader in `epoch`.
fn write(replica: &Replica, epoch: i32, sizes: &[usize]) {
    for &n in sizes {
        replica.append_as_leader(&batch(n, None), epoch);
    }
}

// KIP-279: the follower led epoch 4 briefly (offsets 5..8) after missing the leader's
// epoch 2, and the leader has since moved on to epoch 5 — two fast failovers. The
// leader answers the follower's epoch 4 with its epoch 2 ending at 6; the follower never
// had epoch 2, so it truncates to where its own epoch 1 ends (5) and asks again with
// epoch 1 (OffsetsForLeaderEpoch), gets 3, truncates to 3 and fetches the leader's log
// from there. Truncating to min(6, 8) at once would keep offsets 3..5 of epoch 1 that
// the leader replaced in epoch 2.
#[tokio::test]
async fn follower_lacking_the_leaders_epoch_asks_again_kip_279() {
    let dir = tempfile::tempdir().expect("tempdir");
    let leader_replica = Replica::open(&dir.path().join("l"), FlushMode::Inline);
    let follower = Replica::open(&dir.path().join("f"), FlushMode::Inline);
    write(&leader_replica, 1, &[3]);
    write(&leader_replica, 2, &[3]);
    write(&follower, 1, &[3, 2]);
    write(&follower, 4, &[3]);
    let leader = LeaderState::new(Arc::clone(&leader_replica), 5, vec![1]);
    write(&leader_replica, 5, &[2]);
    assert_eq!(leader_replica.epochs(), vec![(1, 0), (2, 3), (5, 6)]);
    assert_eq!(follower.epochs(), vec![(1, 0), (4, 5)]);

    let mut fetcher = fetcher(&leader, &follower, 5, config());
    fetcher.do_work().await;
    assert_eq!(
        follower.end(),
        Offset(5),
        "truncated to the end of its epoch 1"
    );
    let state = fetcher.fetch_state(&tp()).expect("followed");
    assert!(state.truncating, "must ask again: {state:?}");
    fetcher.do_work().await;
    assert_eq!(follower.end(), Offset(8));
    assert_eq!(
        sent(&mut fetcher),
        vec![
            Sent::Fetch {
                offset: 8,
                durable: 8
            },
            Sent::Epoch(1),
            Sent::Fetch {
                offset: 3,
                durable: 3
            },
        ]
    );
    assert_eq!(
        follower.bytes_below(Offset::MAX),
        leader_replica.bytes_below(Offset::MAX)
    );
    assert_eq!(follower.epochs(), leader_replica.epochs());
    fetcher.do_work().await;
    assert_eq!(leader_replica.hw(), Offset(8), "the follower caught up");
    assert_eq!(follower.hw(), Offset(8));
}

// A follower whose log ends past the leader's (an unclean leader that never answers a
// diverging epoch) gets OFFSET_OUT_OF_RANGE and truncates to the leader's log end.
#[tokio::test]
async fn out_of_range_above_the_leaders_end_truncates_to_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let leader_replica = Replica::open(&dir.path().join("l"), FlushMode::Inline);
    let follower = Replica::open(&dir.path().join("f"), FlushMode::Inline);
    write(&leader_replica, 3, &[2, 2]);
    write(&follower, 3, &[2, 2, 3]);
    let leader = LeaderState::new(Arc::clone(&leader_replica), 3, vec![1]);
    leader.lock().diverging_check = false;
    let mut fetcher = fetcher(&leader, &follower, 3, config());
    fetcher.do_work().await;
    assert_eq!(follower.end(), Offset(4));
    fetcher.do_work().await;
    assert_eq!(
        sent(&mut fetcher),
        vec![
            Sent::Fetch {
                offset: 7,
                durable: 7
            },
            Sent::ListOffsets(-1),
            Sent::Fetch {
                offset: 4,
                durable: 4
            },
        ]
    );
    assert_eq!(
        follower.bytes_below(Offset::MAX),
        leader_replica.bytes_below(Offset::MAX)
    );
}

// A follower whose log ends below the leader's log start (retention ran while it was
// away) starts over at the leader's start and copies from there.
#[tokio::test]
async fn out_of_range_below_the_leaders_start_starts_over_there() {
    let dir = tempfile::tempdir().expect("tempdir");
    let leader_replica = Replica::open(&dir.path().join("l"), FlushMode::Inline);
    let follower = Replica::open(&dir.path().join("f"), FlushMode::Inline);
    write(&follower, 0, &[3]);
    leader_replica.with_log(|log| {
        log.truncate_fully_and_start_at(Offset(100))
            .expect("restart")
    });
    write(&leader_replica, 1, &[2, 3]);
    let leader = LeaderState::new(Arc::clone(&leader_replica), 1, vec![1]);
    let mut fetcher = fetcher(&leader, &follower, 1, config());
    fetcher.do_work().await;
    assert_eq!(
        (follower.start(), follower.end()),
        (Offset(100), Offset(100))
    );
    fetcher.do_work().await;
    assert_eq!(
        sent(&mut fetcher),
        vec![
            Sent::Fetch {
                offset: 3,
                durable: 3
            },
            Sent::ListOffsets(-1),
            Sent::ListOffsets(-2),
            Sent::Fetch {
                offset: 100,
                durable: 100
            },
        ]
    );
    assert_eq!(follower.end(), Offset(105));
    assert_eq!(
        follower.bytes_below(Offset::MAX),
        leader_replica.bytes_below(Offset::MAX)
    );
    assert_eq!(follower.epochs(), vec![(1, 100)]);
}

// FENCED_LEADER_EPOCH for the epoch we fetch in stops the partition until metadata adds
// it again with the new epoch; UNKNOWN_LEADER_EPOCH (the leader is behind) backs off
// and retries.
#[tokio::test]
async fn fenced_stops_until_a_new_epoch_and_unknown_backs_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    let leader_replica = Replica::open(&dir.path().join("l"), FlushMode::Inline);
    let follower = Replica::open(&dir.path().join("f"), FlushMode::Inline);
    write(&leader_replica, 2, &[2]);
    let leader = LeaderState::new(Arc::clone(&leader_replica), 2, vec![1]);

    let mut ahead = fetcher(&leader, &follower, 3, config());
    ahead.do_work().await;
    let state = ahead.fetch_state(&tp()).expect("still followed");
    assert!(state.delayed, "unknown epoch backs off: {state:?}");
    ahead.do_work().await;
    assert_eq!(sent(&mut ahead).len(), 1, "no fetch while backing off");
    tokio::time::sleep(Duration::from_millis(60)).await;
    ahead.do_work().await;
    assert_eq!(sent(&mut ahead).len(), 1, "retried after the back-off");

    let mut behind = fetcher(&leader, &follower, 1, config());
    behind.do_work().await;
    assert_eq!(behind.fetch_state(&tp()), None);
    assert_eq!(
        behind.failed_partitions().get(&tp()),
        Some(&FailureReason::Fenced {
            current_leader_epoch: LeaderEpoch(1)
        })
    );
    behind
        .add_partitions(vec![InitialFetchState {
            log: Arc::clone(&follower),
            topic_id: Uuid::nil(),
            current_leader_epoch: LeaderEpoch(2),
        }])
        .expect("new epoch");
    assert!(behind.failed_partitions().is_empty());
    behind.do_work().await;
    assert_eq!(follower.end(), Offset(2));
}

// Idempotence across failover: batches copied by the fetcher carry the producer's state,
// so when the follower becomes leader the producer's retry of its last batch is answered
// with the original offsets, not written twice.
#[tokio::test]
async fn new_leader_deduplicates_a_retry_it_replicated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let leader_replica = Replica::open(&dir.path().join("l"), FlushMode::Inline);
    let follower = Replica::open(&dir.path().join("f"), FlushMode::Inline);
    let leader = LeaderState::new(Arc::clone(&leader_replica), 1, vec![1]);
    leader_replica.append_as_leader(&batch(2, Some((42, 0, 0))), 1);
    leader_replica.append_as_leader(&batch(3, Some((42, 0, 2))), 1);
    let mut fetcher = fetcher(&leader, &follower, 1, config());
    fetcher.do_work().await;
    assert_eq!(follower.end(), Offset(5));
    drop(fetcher);
    follower.become_leader(2);
    let retry = follower.append_as_leader(&batch(3, Some((42, 0, 2))), 2);
    let AppendOutcome::Duplicate(original) = retry else {
        panic!("the retry was appended again: {retry:?}");
    };
    assert_eq!(
        (original.first_offset, original.last_offset),
        (Offset(2), Offset(4))
    );
    assert_eq!(follower.end(), Offset(5));
}

// The fsync rule: with a slow disk the round does not end (so no next Fetch) until what
// it appended is durable, and every Fetch's offset is at most the follower's durable
// offset. Under `os` (no waiting) the next Fetch goes out ahead of the disk.
#[tokio::test]
async fn next_fetch_waits_until_the_appended_data_is_durable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let leader_replica = Replica::open(&dir.path().join("l"), FlushMode::Inline);
    let follower = Replica::open(&dir.path().join("f"), FlushMode::Manual);
    let leader = LeaderState::new(Arc::clone(&leader_replica), 1, vec![1]);
    write(&leader_replica, 1, &[2, 3]);
    let mut fetcher = fetcher(&leader, &follower, 1, config());
    {
        let round = fetcher.do_work();
        tokio::pin!(round);
        assert!(
            tokio::time::timeout(Duration::from_millis(200), &mut round)
                .await
                .is_err(),
            "the round ended before its appends were durable"
        );
        assert_eq!(follower.end(), Offset(5));
        assert_eq!(follower.durable_offset(), Offset(0));
        follower.flush();
        round.await;
    }
    fetcher.do_work().await;
    assert_eq!(
        sent(&mut fetcher),
        vec![
            Sent::Fetch {
                offset: 0,
                durable: 0
            },
            Sent::Fetch {
                offset: 5,
                durable: 5
            },
        ]
    );
    assert_eq!(leader_replica.hw(), Offset(5));

    let os = Replica::open(&dir.path().join("os"), FlushMode::Manual);
    let mut fetcher = fetcher_with(
        &leader,
        &os,
        FetcherConfig {
            wait_for_durable: false,
            ..config()
        },
    );
    fetcher.do_work().await;
    fetcher.do_work().await;
    assert_eq!(
        sent(&mut fetcher),
        vec![
            Sent::Fetch {
                offset: 0,
                durable: 0
            },
            Sent::Fetch {
                offset: 5,
                durable: 0
            },
        ],
        "under `os` the fetch offset runs ahead of the disk"
    );
}

fn fetcher_with(
    leader: &Arc<parking_lot::Mutex<LeaderState>>,
    follower: &Arc<Replica>,
    config: FetcherConfig,
) -> ReplicaFetcher<InMemoryLeader, Replica> {
    let mut fetcher = ReplicaFetcher::new(InMemoryLeader::new(leader, 2, follower), config);
    fetcher
        .add_partitions(vec![InitialFetchState {
            log: Arc::clone(follower),
            topic_id: Uuid::nil(),
            current_leader_epoch: LeaderEpoch(1),
        }])
        .expect("add");
    fetcher
}

// The fsync rule on a running fetcher task: while the leader keeps appending and the
// follower's disk syncs only when the test says so, no Fetch ever carries an offset
// beyond what the follower has fsync'd. The task also takes a new leader epoch and a
// removal while running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_fetcher_never_reports_an_offset_that_is_not_durable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let leader_replica = Replica::open(&dir.path().join("l"), FlushMode::Inline);
    let follower = Replica::open(&dir.path().join("f"), FlushMode::Manual);
    let leader = LeaderState::new(Arc::clone(&leader_replica), 1, vec![1]);
    let endpoint = InMemoryLeader::new(&leader, 1, &follower);
    let sent_log = Arc::clone(&endpoint.sent);
    let handle = ReplicaFetcherHandle::spawn(ReplicaFetcher::new(endpoint, config()));
    handle
        .add_partitions(vec![InitialFetchState {
            log: Arc::clone(&follower),
            topic_id: Uuid::nil(),
            current_leader_epoch: LeaderEpoch(1),
        }])
        .await
        .expect("add");
    for i in 0..20 {
        write(&leader_replica, 1, &[1 + i % 3]);
        tokio::time::sleep(Duration::from_millis(5)).await;
        if i % 4 == 3 {
            follower.flush();
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while follower.end() < leader_replica.end() || follower.durable_offset() < follower.end() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "follower did not catch up"
        );
        follower.flush();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (states, failed) = handle.describe().await.expect("describe");
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(states.len(), 1);
    // A leader epoch change from metadata moves the running partition to the new epoch.
    leader.lock().epoch = 2;
    handle
        .add_partitions(vec![InitialFetchState {
            log: Arc::clone(&follower),
            topic_id: Uuid::nil(),
            current_leader_epoch: LeaderEpoch(2),
        }])
        .await
        .expect("new epoch");
    let (states, _) = handle.describe().await.expect("describe");
    assert_eq!(states[0].1.current_leader_epoch, LeaderEpoch(2));
    write(&leader_replica, 2, &[2]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while follower.end() < leader_replica.end() || follower.durable_offset() < follower.end() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no fetch in the new epoch"
        );
        follower.flush();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Once removed, the partition is fetched no more.
    handle.remove_partitions(vec![tp()]).await.expect("remove");
    let after_remove = sent_log.lock().len();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(sent_log.lock().len(), after_remove, "fetched after removal");
    let (states, _) = handle.describe().await.expect("describe");
    assert!(states.is_empty());
    handle.shutdown().await;
    let sent = sent_log.lock().clone();
    assert!(sent.len() > 2, "{sent:?}");
    for s in &sent {
        if let Sent::Fetch { offset, durable } = s {
            assert!(
                offset <= durable,
                "fetch at {offset} with only {durable} durable: {sent:?}"
            );
        }
    }
    assert_eq!(
        follower.bytes_below(Offset::MAX),
        leader_replica.bytes_below(Offset::MAX)
    );
}

// A failed fsync of fetched data stops fetching that partition for good (logged and
// reported as FsyncFailed), never a silent retry: the next round sends nothing for it.
#[tokio::test]
async fn failed_fsync_stops_the_partition() {
    let dir = tempfile::tempdir().expect("tempdir");
    let leader_replica = Replica::open(&dir.path().join("l"), FlushMode::Inline);
    let follower_dir = dir.path().join("f");
    let follower = Replica::open(&follower_dir, FlushMode::Inline);
    let leader = LeaderState::new(Arc::clone(&leader_replica), 1, vec![1]);
    write(&leader_replica, 1, &[2]);
    let mut fetcher = fetcher(&leader, &follower, 1, config());
    fetcher.do_work().await;
    assert_eq!(follower.durable_offset(), Offset(2));
    write(&leader_replica, 1, &[3]);
    fault::fail(&follower_dir, Op::Fsync, libc::EIO, 1);
    fetcher.do_work().await;
    assert_eq!(follower.end(), Offset(5), "appended, not durable");
    assert_eq!(follower.durable_offset(), Offset(2));
    assert!(
        matches!(
            fetcher.failed_partitions().get(&tp()),
            Some(FailureReason::FsyncFailed(_))
        ),
        "{:?}",
        fetcher.failed_partitions()
    );
    assert_eq!(fetcher.fetch_state(&tp()), None);
    sent(&mut fetcher);
    fetcher.do_work().await;
    assert_eq!(
        sent(&mut fetcher),
        vec![],
        "nothing fetched after the failure"
    );
    assert_eq!(
        leader_replica.hw(),
        Offset(2),
        "the leader never counted offset 5"
    );
}

/// A leader that only records the order of each Fetch's partitions and answers nothing.
struct OrderRecordingLeader {
    orders: Vec<Vec<i32>>,
}

impl LeaderEndPoint for OrderRecordingLeader {
    fn broker_id(&self) -> i32 {
        0
    }

    async fn fetch(
        &mut self,
        request: FetchRequest,
    ) -> Result<Vec<FetchedPartition>, EndPointError> {
        self.orders.push(
            request
                .partitions
                .iter()
                .map(|p| p.topic_partition.partition)
                .collect(),
        );
        Ok(Vec::new())
    }

    async fn fetch_epoch_end_offsets(
        &mut self,
        _partitions: Vec<EpochRequest>,
    ) -> Result<Vec<EpochResult>, EndPointError> {
        Ok(Vec::new())
    }

    async fn fetch_earliest_offset(
        &mut self,
        _tp: &TopicPartition,
        _epoch: LeaderEpoch,
    ) -> Result<Offset, EndPointError> {
        Ok(Offset(0))
    }

    async fn fetch_latest_offset(
        &mut self,
        _tp: &TopicPartition,
        _epoch: LeaderEpoch,
    ) -> Result<Offset, EndPointError> {
        Ok(Offset(0))
    }
}

// Each Fetch starts its partition list one further, so a response's byte budget is not
// always spent on the same partitions.
#[tokio::test]
async fn fetch_order_rotates_between_rounds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut fetcher = ReplicaFetcher::new(OrderRecordingLeader { orders: Vec::new() }, config());
    let replicas: Vec<_> = (0..3)
        .map(|p| {
            let tp = TopicPartition {
                topic: "t".to_string(),
                partition: p,
            };
            let replica =
                Replica::open_as(&dir.path().join(format!("p{p}")), FlushMode::Inline, tp);
            replica.append_as_leader(&batch(1, None), 1);
            replica
        })
        .collect();
    fetcher
        .add_partitions(
            replicas
                .iter()
                .map(|r| InitialFetchState {
                    log: Arc::clone(r),
                    topic_id: Uuid::nil(),
                    current_leader_epoch: LeaderEpoch(1),
                })
                .collect(),
        )
        .expect("add");
    for _ in 0..4 {
        fetcher.do_work().await;
    }
    assert_eq!(
        fetcher.endpoint_mut().orders,
        vec![vec![0, 1, 2], vec![1, 2, 0], vec![2, 0, 1], vec![0, 1, 2]]
    );
}
