//! Transactions at the partition: markers written by `write_txn_marker`, and the last
//! stable offset they move.

use super::*;

/// [`batch`] as part of `producer_id`'s transaction at `epoch`, first sequence `sequence`.
fn txn_batch(producer_id: i64, epoch: i16, sequence: i32) -> Vec<u8> {
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
