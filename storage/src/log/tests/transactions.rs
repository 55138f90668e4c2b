//! Transactions in the log: markers, producer state of open transactions, the
//! aborted-transaction index and the first unstable offset.

use super::*;
use crate::end_transaction_marker::{parse_marker, EndTransactionMarker, TxnResult};
use crate::test_util::transactional_batch;

fn marker(result: TxnResult, coordinator_epoch: i32) -> EndTransactionMarker {
    EndTransactionMarker {
        result,
        coordinator_epoch,
    }
}

fn append_txn(log: &mut Log, count: usize, pid: i64, epoch: i16, seq: i32) -> AppendInfo {
    let b = transactional_batch(count, pid, epoch, seq);
    validate_batches(&b).expect("test batch is valid");
    log.append(&b, 0)
        .expect("append")
        .appended()
        .expect("not a duplicate")
}

// A marker is stored as one control batch at the log end, readable back as the marker
// written; a marker of an older producer epoch is refused and writes nothing.
#[test]
fn marker_is_a_control_batch_at_the_log_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), LogConfig::default());
    append_txn(&mut log, 3, 7, 2, 0);
    let info = log
        .append_txn_marker(7, 2, marker(TxnResult::Commit, 5), 0)
        .expect("marker");
    assert_eq!(
        (info.first_offset, info.last_offset),
        (Offset(3), Offset(3))
    );
    assert_eq!(log.log_end_offset(), Offset(4));
    let read = log
        .read(Offset(3), usize::MAX, Offset::MAX, true)
        .expect("read");
    let header = RecordBatchHeader::parse(&read.records).expect("header");
    assert!(header.is_control() && header.is_transactional());
    assert_eq!(
        (
            header.base_offset,
            header.producer_id,
            header.producer_epoch
        ),
        (3, 7, 2)
    );
    assert_eq!(
        parse_marker(&header, &read.records),
        Ok(Some(marker(TxnResult::Commit, 5)))
    );
    assert!(matches!(
        log.append_txn_marker(7, 1, marker(TxnResult::Abort, 5), 0),
        Err(Error::InvalidProducerEpoch {
            producer_id: 7,
            current: 2,
            got: 1
        })
    ));
    assert_eq!(log.log_end_offset(), Offset(4));
}

fn aborted(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
    AbortedTxn {
        producer_id: pid,
        first_offset: first,
        last_offset: last,
        last_stable_offset: lso,
    }
}

// Two interleaved transactions: the first unstable offset is the oldest open one's first
// offset, stays there until the marker is below the high watermark, and the aborted one
// is in the transaction index with Kafka's last stable offset (the other's first offset,
// still open then). A non-transactional batch inside an open transaction is refused.
#[test]
fn first_unstable_offset_and_aborted_index() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), LogConfig::default());
    append(&mut log, 2, 8, 1_000); // 0..2, no producer
    assert_eq!(log.first_unstable_offset(Offset(2)), None);
    append_txn(&mut log, 2, 1, 0, 0); // 2..4 producer 1
    append_txn(&mut log, 1, 2, 0, 0); // 4 producer 2
    append_txn(&mut log, 1, 1, 0, 2); // 5 producer 1
    assert_eq!(log.first_unstable_offset(Offset(6)), Some(Offset(2)));
    assert!(matches!(
        log.append(&crate::test_util::idempotent_batch(1, 1, 0, 3), 0),
        Err(Error::InvalidTxnState { producer_id: 1 })
    ));
    log.append_txn_marker(1, 0, marker(TxnResult::Abort, 0), 0)
        .expect("abort"); // 6
                          // Marker not yet below the high watermark: still unstable.
    assert_eq!(log.first_unstable_offset(Offset(6)), Some(Offset(2)));
    assert_eq!(log.first_unstable_offset(Offset(7)), Some(Offset(4)));
    log.append_txn_marker(2, 0, marker(TxnResult::Commit, 0), 0)
        .expect("commit"); // 7
    assert_eq!(log.first_unstable_offset(Offset(8)), None);
    assert_eq!(
        log.collect_aborted_transactions(Offset(0), Offset(8)),
        vec![aborted(1, 2, 6, 4)]
    );
    assert_eq!(
        log.collect_aborted_transactions(Offset(7), Offset(8)),
        vec![]
    );
    assert_eq!(
        log.collect_aborted_transactions(Offset(0), Offset(2)),
        vec![]
    );
    // A marker of an older coordinator epoch is refused.
    append_txn(&mut log, 1, 2, 0, 1);
    assert!(matches!(
        log.append_txn_marker(2, 0, marker(TxnResult::Commit, -1), 0),
        Err(Error::TransactionCoordinatorFenced {
            current: 0,
            got: -1,
            ..
        })
    ));
}

// A marker with a newer producer epoch bumps it: the old epoch's batches are refused,
// and the new epoch's first batch must start at sequence 0.
#[test]
fn marker_epoch_bump_fences_the_old_epoch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), LogConfig::default());
    append_txn(&mut log, 1, 5, 0, 0);
    log.append_txn_marker(5, 1, marker(TxnResult::Abort, 0), 0)
        .expect("abort with a bumped epoch");
    let b = transactional_batch(1, 5, 0, 1);
    assert!(matches!(
        log.append(&b, 0),
        Err(Error::InvalidProducerEpoch {
            current: 1,
            got: 0,
            ..
        })
    ));
    assert!(matches!(
        log.append(&transactional_batch(1, 5, 1, 3), 0),
        Err(Error::OutOfOrderSequence {
            expected: 0,
            got: 3,
            ..
        })
    ));
    append_txn(&mut log, 1, 5, 1, 0);
}

// The transaction index and open transactions survive a crash (rebuilt by the replay
// from the last snapshot, also with every snapshot deleted), a clean restart, segment
// rolls, and go with their segment when retention deletes it; expiry keeps a producer
// with an open transaction.
#[test]
fn recovery_rebuilds_transactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        segment_bytes: 300,
        // The test batches are stamped 0 and markers with the wall clock: no segment.ms
        // roll by record timestamps, so only size rolls the segments.
        segment_ms: u64::MAX,
        ..LogConfig::default()
    };
    let mut log = open(dir.path(), config.clone());
    append_txn(&mut log, 1, 1, 0, 0); // 0
    log.append_txn_marker(1, 0, marker(TxnResult::Abort, 0), 0)
        .expect("abort"); // 1
    append_txn(&mut log, 1, 2, 0, 0); // 2
    append_txn(&mut log, 1, 1, 0, 1); // 3
    log.append_txn_marker(1, 0, marker(TxnResult::Abort, 0), 0)
        .expect("abort"); // 4
    append(&mut log, 1, 8, 1_000); // 5
    assert!(log.segment_count() > 1, "rolls happened");
    let expected = vec![aborted(1, 0, 1, 2), aborted(1, 3, 4, 2)];
    let end = log.log_end_offset();
    assert_eq!(log.collect_aborted_transactions(Offset(0), end), expected);
    assert_eq!(log.remove_expired_producers(i64::MAX, 1), 1);
    assert_eq!(log.first_unstable_offset(end), Some(Offset(2)));

    for reopen in ["crash", "crash without snapshots", "clean"] {
        match reopen {
            "clean" => log.close().expect("close"),
            _ => drop(log),
        }
        if reopen == "crash without snapshots" {
            for entry in fs::read_dir(dir.path()).expect("read dir") {
                let path = entry.expect("entry").path();
                if path.extension().is_some_and(|e| e == "snapshot") {
                    fs::remove_file(path).expect("remove snapshot");
                }
            }
        }
        log = open(dir.path(), config.clone());
        assert_eq!(
            log.collect_aborted_transactions(Offset(0), end),
            expected,
            "after {reopen}"
        );
        assert_eq!(
            log.first_unstable_offset(end),
            Some(Offset(2)),
            "after {reopen}"
        );
    }
    // Producer 2 commits; then everything below 6 expires with its segments.
    log.append_txn_marker(2, 0, marker(TxnResult::Commit, 0), 0)
        .expect("commit"); // 6
    let txn_indexes = || {
        fs::read_dir(dir.path())
            .expect("read dir")
            .filter(|e| {
                e.as_ref()
                    .expect("entry")
                    .path()
                    .extension()
                    .is_some_and(|x| x == "txnindex")
            })
            .count()
    };
    assert!(txn_indexes() >= 1);
    log.delete_records_before(Offset(6))
        .expect("delete records");
    assert_eq!(txn_indexes(), 0);
    assert_eq!(
        log.collect_aborted_transactions(Offset(6), Offset(7)),
        vec![]
    );
}

// Truncating below an abort marker removes its transaction index entry (and the file)
// and reopens the transaction it ended; truncating below the transaction's first batch
// forgets it.
#[test]
fn truncation_removes_index_entries_and_reopens_transactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    // One segment: no segment.ms roll between the batches stamped 0 and the marker.
    let mut log = open(
        dir.path(),
        LogConfig {
            segment_ms: u64::MAX,
            ..LogConfig::default()
        },
    );
    append_txn(&mut log, 2, 4, 0, 0); // 0..2
    log.append_txn_marker(4, 0, marker(TxnResult::Abort, 0), 0)
        .expect("abort"); // 2
    append(&mut log, 1, 8, 1_000); // 3
    assert_eq!(
        log.collect_aborted_transactions(Offset(0), Offset(4)),
        vec![aborted(4, 0, 2, 3)]
    );
    let txn_index = dir
        .path()
        .join(crate::log_segment::file_name(0, "txnindex"));
    assert!(txn_index.exists());
    log.truncate_to(Offset(2)).expect("truncate");
    assert_eq!(
        log.collect_aborted_transactions(Offset(0), Offset(2)),
        vec![]
    );
    assert!(!txn_index.exists());
    assert_eq!(log.first_unstable_offset(Offset(2)), Some(Offset(0)));
    log.truncate_to(Offset(0)).expect("truncate");
    assert_eq!(log.first_unstable_offset(Offset(0)), None);
}
