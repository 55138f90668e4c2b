//! Idempotent-producer state kept by the log: duplicates are recognised across a crash,
//! a clean restart and a roll, and recovery replays only what follows the last snapshot.

use super::*;
use crate::test_util::idempotent_batch;

fn append_idempotent(log: &mut Log, count: usize, pid: i64, seq: i32) -> AppendOutcome {
    let b = idempotent_batch(count, pid, 0, seq);
    validate_batches(&b).expect("test batch is valid");
    log.append(&b, 0).expect("append")
}

fn snapshots(dir: &Path) -> Vec<i64> {
    let mut found: Vec<i64> = fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| {
            crate::producer_state::parse_snapshot_name(
                &e.expect("entry").file_name().to_string_lossy(),
            )
        })
        .collect();
    found.sort_unstable();
    found
}

// A batch written before a crash (no clean close) is recognised as a duplicate when the
// producer retries it after the restart: answered with its first offsets, not appended.
#[test]
fn duplicate_after_crash_is_not_appended() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), LogConfig::default());
    append_idempotent(&mut log, 3, 42, 0);
    let second = append_idempotent(&mut log, 2, 42, 3)
        .appended()
        .expect("appended");
    assert_eq!(second.first_offset, 3);
    drop(log); // crash: no clean-shutdown marker, no snapshot
    assert!(snapshots(dir.path()).is_empty());

    let mut log = open(dir.path(), LogConfig::default());
    assert_eq!(log.producer_count(), 1);
    match append_idempotent(&mut log, 2, 42, 3) {
        AppendOutcome::Duplicate(b) => {
            assert_eq!((b.first_offset.get(), b.last_offset.get()), (3, 4))
        }
        other => panic!("expected a duplicate, got {other:?}"),
    }
    assert_eq!(log.log_end_offset(), 5);
    // The next batch in sequence still appends; a gap is refused.
    assert!(matches!(
        log.append(&idempotent_batch(1, 42, 0, 9), 0),
        Err(Error::OutOfOrderSequence {
            expected: 5,
            got: 9,
            ..
        })
    ));
    let next = append_idempotent(&mut log, 1, 42, 5)
        .appended()
        .expect("appended");
    assert_eq!(next.first_offset, 5);
}

// A clean close writes a snapshot at the log end; the next open loads it and replays
// nothing, and duplicates are still recognised.
#[test]
fn clean_close_snapshots_producer_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), LogConfig::default());
    append_idempotent(&mut log, 4, 7, 0);
    log.close().expect("close");
    assert_eq!(snapshots(dir.path()), vec![4]);
    let mut log = open(dir.path(), LogConfig::default());
    assert!(matches!(
        append_idempotent(&mut log, 4, 7, 0),
        AppendOutcome::Duplicate(b) if b.first_offset == 0
    ));
    // A log that never saw an idempotent producer writes no snapshot at close.
    let plain = tempfile::tempdir().expect("tempdir");
    let mut log = open(plain.path(), LogConfig::default());
    append(&mut log, 3, 10, 0);
    log.close().expect("close");
    assert!(snapshots(plain.path()).is_empty());
}

// A roll queues a snapshot at the new segment's base, written by the next sync (not under
// the append); after a crash recovery starts from it, and state from before it survives.
#[test]
fn roll_snapshot_written_by_sync_and_used_by_recovery() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), small_config());
    let mut seq = 0;
    while log.segment_count() < 3 {
        append_idempotent(&mut log, 10, 1, seq);
        seq += 10;
    }
    assert!(log.has_roll_work());
    assert!(
        snapshots(dir.path()).is_empty(),
        "no snapshot written by the append itself"
    );
    let handle = log.sync_handle().expect("sync handle");
    let synced = handle.sync().expect("sync");
    log.mark_durable(synced);
    assert!(!log.has_roll_work());
    let written = snapshots(dir.path());
    assert_eq!(written.len(), 2, "one snapshot per roll: {written:?}");
    // A second producer after the last roll, then a crash.
    append_idempotent(&mut log, 2, 2, 0);
    let end = log.log_end_offset();
    drop(log);
    let mut log = open(dir.path(), small_config());
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(log.producer_count(), 2);
    assert!(matches!(
        append_idempotent(&mut log, 10, 1, seq - 10),
        AppendOutcome::Duplicate(_)
    ));
    assert!(matches!(
        append_idempotent(&mut log, 2, 2, 0),
        AppendOutcome::Duplicate(b) if b.first_offset.get() == end.get() - 2
    ));
}

// Truncation below a snapshot deletes it and rebuilds the state from what is left: a
// batch cut away is no longer a duplicate.
#[test]
fn truncation_rebuilds_producer_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), LogConfig::default());
    append_idempotent(&mut log, 2, 5, 0);
    append_idempotent(&mut log, 2, 5, 2);
    log.close().expect("close");
    let mut log = open(dir.path(), LogConfig::default());
    log.truncate_to(Offset(2)).expect("truncate");
    assert!(snapshots(dir.path()).is_empty());
    assert!(matches!(
        append_idempotent(&mut log, 2, 5, 2),
        AppendOutcome::Appended(info) if info.first_offset == 2
    ));
}
