//! Tests of the follower's append: byte-identical copies, offset and CRC checks, and the
//! state derived from copied batches (producers, transactions, epochs).

use std::path::Path;

use super::*;
use crate::end_transaction_marker::{EndTransactionMarker, TxnResult};
use crate::log::AppendOutcome;
use crate::test_util::{batch, idempotent_batch, transactional_batch};

fn open_log(dir: &Path) -> Log {
    Log::open(dir, super::super::LogConfig::default()).expect("open log")
}

/// Everything in `log` from `from`, as stored.
fn all_bytes(log: &Log, from: i64) -> Vec<u8> {
    log.read(Offset(from), usize::MAX, Offset::MAX, true)
        .expect("read")
        .records
        .to_vec()
}

fn leader_append(log: &mut Log, bytes: &[u8], epoch: i32) -> AppendInfo {
    log.append(bytes, epoch)
        .expect("append")
        .appended()
        .expect("not a duplicate")
}

// A follower's copy is the leader's bytes: same offsets, same partition leader epochs,
// same epoch cache, appended in pieces as a fetcher would.
#[test]
fn follower_copy_is_byte_identical_with_the_leaders_epochs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut leader = open_log(&dir.path().join("leader"));
    let mut follower = open_log(&dir.path().join("follower"));
    leader_append(&mut leader, &batch(3, 10, 1_000), 2);
    leader_append(&mut leader, &batch(1, 10, 1_001), 2);
    leader_append(&mut leader, &batch(4, 10, 1_002), 5);
    let first = leader
        .read(Offset(0), 1, Offset::MAX, true)
        .expect("read")
        .records;
    let info = follower.append_as_follower(&first).expect("first batch");
    assert_eq!(
        (info.first_offset, info.log_end_offset),
        (Offset(0), Offset(3))
    );
    let rest = all_bytes(&leader, 3);
    let info = follower.append_as_follower(&rest).expect("the rest");
    assert_eq!(
        (info.first_offset, info.last_offset),
        (Offset(3), Offset(7))
    );
    assert_eq!(follower.log_end_offset(), Offset(8));
    assert_eq!(all_bytes(&follower, 0), all_bytes(&leader, 0));
    assert_eq!(
        follower.leader_epochs().entries(),
        leader.leader_epochs().entries()
    );
    assert_eq!(
        follower.leader_epochs().floor_end_offset(LeaderEpoch(2), 8),
        Some((LeaderEpoch(2), 4))
    );
}

// Batches that do not continue the log, that leave a gap, or whose CRC is wrong write
// nothing; an epoch going backwards is refused.
#[test]
fn follower_append_refuses_what_does_not_continue_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut leader = open_log(&dir.path().join("leader"));
    let mut follower = open_log(&dir.path().join("follower"));
    leader_append(&mut leader, &batch(2, 10, 1_000), 1);
    leader_append(&mut leader, &batch(2, 10, 1_000), 1);
    leader_append(&mut leader, &batch(2, 10, 1_000), 3);
    let bytes = all_bytes(&leader, 0);
    let (b0, rest) = bytes.split_at(bytes.len() / 3);
    let (b1, b2) = rest.split_at(rest.len() / 2);

    let err = follower
        .append_as_follower(b1)
        .expect_err("starts at 2, log end 0");
    assert!(
        matches!(
            err,
            Error::UnexpectedAppendOffset {
                expected: 0,
                got: 2
            }
        ),
        "{err:?}"
    );
    let gap = [b0, b2].concat();
    let err = follower.append_as_follower(&gap).expect_err("gap 2..4");
    assert!(
        matches!(
            err,
            Error::UnexpectedAppendOffset {
                expected: 2,
                got: 4
            }
        ),
        "{err:?}"
    );
    let mut corrupt = b0.to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 1;
    let err = follower.append_as_follower(&corrupt).expect_err("crc");
    assert!(matches!(err, Error::CorruptBatch { .. }), "{err:?}");
    assert_eq!(follower.log_end_offset(), Offset(0), "nothing written");
    assert_eq!(follower.size_bytes(), 0);

    follower
        .append_as_follower(&[b0, b1, b2].concat())
        .expect("whole log");
    // Epoch 0 after epoch 3: a leader never writes that.
    let mut stale = b0.to_vec();
    stale[0..8].copy_from_slice(&6i64.to_be_bytes());
    stale[12..16].copy_from_slice(&0i32.to_be_bytes());
    let err = follower
        .append_as_follower(&stale)
        .expect_err("stale epoch");
    assert!(matches!(err, Error::CorruptBatch { .. }), "{err:?}");
    assert_eq!(follower.log_end_offset(), Offset(6));
}

// Producer state comes from replicated batches: after failover, the replica that now
// leads answers an idempotent producer's retry as a duplicate with the offsets the old
// leader gave it (also after a restart), and the next sequence appends.
#[test]
fn replicated_producer_state_deduplicates_a_retry_on_the_new_leader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut leader = open_log(&dir.path().join("leader"));
    let follower_dir = dir.path().join("follower");
    let mut follower = open_log(&follower_dir);
    leader_append(&mut leader, &batch(2, 10, 1_000), 4);
    leader_append(&mut leader, &idempotent_batch(3, 77, 1, 0), 4);
    leader_append(&mut leader, &idempotent_batch(2, 77, 1, 3), 4);
    follower
        .append_as_follower(&all_bytes(&leader, 0))
        .expect("replicate");
    for reopen in [false, true] {
        if reopen {
            follower.close().expect("close");
            follower = open_log(&follower_dir);
        }
        // The producer retries its last batch on the new leader (epoch 5).
        let retry = follower
            .append(&idempotent_batch(2, 77, 1, 3), 5)
            .expect("retry");
        let AppendOutcome::Duplicate(original) = retry else {
            panic!("retry appended again: {retry:?} (reopen {reopen})");
        };
        assert_eq!(
            (original.first_offset, original.last_offset),
            (Offset(5), Offset(6))
        );
    }
    let next = leader_append(&mut follower, &idempotent_batch(1, 77, 1, 5), 5);
    assert_eq!(next.first_offset, Offset(7));
    let err = follower
        .append(&idempotent_batch(1, 77, 1, 9), 5)
        .expect_err("gap in sequence");
    assert!(
        matches!(
            err,
            Error::OutOfOrderSequence {
                expected: 6,
                got: 9,
                ..
            }
        ),
        "{err:?}"
    );
}

// Transactions replicate with their state: an aborted transaction's index entry and the
// first unstable offset of an open one are what the leader has.
#[test]
fn replicated_markers_build_the_transaction_index_and_unstable_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut leader = open_log(&dir.path().join("leader"));
    let mut follower = open_log(&dir.path().join("follower"));
    leader_append(&mut leader, &transactional_batch(2, 9, 0, 0), 1);
    leader
        .append_txn_marker(
            9,
            0,
            EndTransactionMarker {
                result: TxnResult::Abort,
                coordinator_epoch: 3,
            },
            1,
        )
        .expect("abort");
    leader_append(&mut leader, &transactional_batch(1, 10, 0, 0), 1);
    follower
        .append_as_follower(&all_bytes(&leader, 0))
        .expect("replicate");
    let end = follower.log_end_offset();
    assert_eq!(end, Offset(4));
    assert_eq!(
        follower.collect_aborted_transactions(Offset(0), end),
        leader.collect_aborted_transactions(Offset(0), end)
    );
    assert_eq!(
        follower.collect_aborted_transactions(Offset(0), end).len(),
        1
    );
    assert_eq!(follower.first_unstable_offset(end), Some(Offset(3)));
    assert_eq!(
        follower.first_unstable_offset(end),
        leader.first_unstable_offset(end)
    );
}

// A follower whose log lies wholly below the leader's log start starts over there: no
// data, no producers, no epochs, the new start durable across a reopen.
#[test]
fn truncate_fully_and_start_at_restarts_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("follower");
    let mut log = open_log(&path);
    leader_append(&mut log, &idempotent_batch(3, 5, 0, 0), 2);
    log.truncate_fully_and_start_at(Offset(100))
        .expect("restart");
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (Offset(100), Offset(100))
    );
    assert_eq!(log.producer_count(), 0);
    assert!(log.leader_epochs().entries().is_empty());
    let mut copy = batch(1, 10, 1_000);
    copy[0..8].copy_from_slice(&100i64.to_be_bytes());
    copy[12..16].copy_from_slice(&7i32.to_be_bytes());
    log.append_as_follower(&copy).expect("append at 100");
    drop(log);
    let log = open_log(&path);
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (Offset(100), Offset(101))
    );
    assert_eq!(log.leader_epochs().latest_epoch(), Some(LeaderEpoch(7)));
}

// A replica elected leader records its epoch's start; if it is demoted before writing
// anything, a truncation at or past its log end drops that empty epoch, so as a follower
// it never reports an epoch it wrote nothing in (the fetcher would loop on the diverging
// answer otherwise).
#[test]
fn truncation_at_the_log_end_drops_an_empty_leader_epoch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open_log(dir.path());
    leader_append(&mut log, &batch(1, 10, 1_000), 3);
    log.assign_epoch_start(LeaderEpoch(5));
    assert_eq!(log.leader_epochs().latest_epoch(), Some(LeaderEpoch(5)));
    log.truncate_to(Offset(1)).expect("truncate");
    assert_eq!(log.leader_epochs().latest_epoch(), Some(LeaderEpoch(3)));
    assert_eq!(log.log_end_offset(), Offset(1));
}
