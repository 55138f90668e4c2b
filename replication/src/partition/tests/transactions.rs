//! Transactions at the partition: markers written by `write_txn_marker`, and the last
//! stable offset they move.

use super::*;
use logbook_storage::AbortedTxn;

/// [`batch`] as part of `producer_id`'s transaction at `epoch`, first sequence `sequence`.
pub(super) fn txn_batch(producer_id: i64, epoch: i16, sequence: i32) -> Vec<u8> {
    let mut out = batch();
    out[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    out[43..51].copy_from_slice(&producer_id.to_be_bytes());
    out[51..53].copy_from_slice(&epoch.to_be_bytes());
    out[53..57].copy_from_slice(&sequence.to_be_bytes());
    let crc = crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

// The marker lands at the log end, returns its offset, becomes durable like any append,
// and a marker of a fenced producer epoch is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_txn_marker_appends_a_durable_marker() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flusher = Flusher::start(FlushPolicy::EveryWrite, 1);
    let partition = open(dir.path(), "txn", &flusher);
    let timeout = Duration::from_secs(5);
    partition.append(&txn_batch(9, 1, 0)).expect("append");
    let offset = partition
        .write_txn_marker(9, 1, 0, TxnResult::Commit)
        .expect("marker");
    assert_eq!(offset, Offset(1));
    partition
        .wait_durable(Offset(2), timeout)
        .await
        .expect("marker durable");
    assert!(matches!(
        partition.write_txn_marker(9, 0, 0, TxnResult::Abort),
        Err(Error::Storage(
            logbook_storage::Error::InvalidProducerEpoch { .. }
        ))
    ));
    assert_eq!(
        partition.offsets().expect("offsets").log_end_offset,
        Offset(2)
    );
}

// The last stable offset holds at an open transaction's first offset while the high
// watermark moves on, and moves only once the marker is durable (below the high
// watermark); a read_committed read stops there and lists the aborted transaction of the
// range it covers, while a read_uncommitted read goes to the high watermark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_stable_offset_and_committed_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flusher = Flusher::start(FlushPolicy::EveryWrite, 1);
    let partition = open(dir.path(), "lso", &flusher);
    let timeout = Duration::from_secs(5);
    partition.append(&batch()).expect("append"); // 0
    partition.append(&txn_batch(3, 0, 0)).expect("append"); // 1: producer 3 begins
    partition.append(&batch()).expect("append"); // 2
    partition
        .wait_durable(Offset(3), timeout)
        .await
        .expect("durable");
    let offsets = partition.offsets().expect("offsets");
    assert_eq!(
        (offsets.last_stable_offset, offsets.high_watermark),
        (Offset(1), Offset(3))
    );
    let committed = partition
        .read_slices_committed(Offset(0), usize::MAX, true)
        .expect("read");
    assert_eq!(
        committed.read.bytes,
        batch().len(),
        "only offset 0 is stable"
    );
    assert!(committed.aborted_transactions.is_empty());
    let uncommitted = partition
        .read_slices(Offset(0), usize::MAX, true)
        .expect("read");
    assert_eq!(uncommitted.bytes, 3 * batch().len());

    let marker = partition
        .write_txn_marker(3, 0, 4, TxnResult::Abort)
        .expect("abort");
    assert_eq!(marker, Offset(3));
    partition
        .wait_durable(Offset(4), timeout)
        .await
        .expect("durable");
    let committed = partition
        .read_slices_committed(Offset(1), usize::MAX, true)
        .expect("read");
    assert_eq!(committed.offsets.last_stable_offset, Offset(4));
    assert_eq!(
        committed.aborted_transactions,
        vec![AbortedTxn {
            producer_id: 3,
            first_offset: 1,
            last_offset: 3,
            last_stable_offset: 4,
        }]
    );
    let producers = partition.active_producers().expect("producers");
    assert_eq!(producers.len(), 1);
    assert_eq!(
        (
            producers[0].producer_id,
            producers[0].coordinator_epoch,
            producers[0].current_txn_start_offset
        ),
        (3, 4, -1)
    );
}
