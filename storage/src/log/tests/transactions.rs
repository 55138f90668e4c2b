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
