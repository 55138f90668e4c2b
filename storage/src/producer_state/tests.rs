//! Tests of `ProducerStateManager`: sequence checks, snapshots and their damage.

use super::*;

fn header(pid: i64, epoch: i16, seq: i32, count: i32, base_offset: i64) -> RecordBatchHeader {
    RecordBatchHeader {
        base_offset,
        batch_length: 0,
        partition_leader_epoch: 0,
        magic: 2,
        crc: 0,
        attributes: 0,
        last_offset_delta: count - 1,
        base_timestamp: 0,
        max_timestamp: 1_000 + base_offset,
        producer_id: pid,
        producer_epoch: epoch,
        base_sequence: seq,
        records_count: count,
    }
}

fn manager(dir: &Path) -> ProducerStateManager {
    ProducerStateManager::new(dir).expect("new")
}

// In-sequence batches append; a retry is a duplicate with its first offsets; a gap is refused.
#[test]
fn sequences_duplicates_and_gaps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut state = manager(dir.path());
    let first = header(7, 0, 0, 3, 10);
    assert_eq!(state.check(&first), SequenceCheck::Append);
    state.update(&first);
    assert_eq!(
        state.check(&header(7, 0, 0, 3, -1)),
        SequenceCheck::Duplicate(BatchMetadata {
            first_sequence: 0,
            last_sequence: 2,
            first_offset: Offset(10),
            last_offset: Offset(12),
            max_timestamp: 1_010,
        })
    );
    assert_eq!(state.check(&header(7, 0, 3, 1, -1)), SequenceCheck::Append);
    assert_eq!(
        state.check(&header(7, 0, 5, 1, -1)),
        SequenceCheck::OutOfOrder {
            expected: 3,
            got: 5
        }
    );
    assert_eq!(
        state.check(&header(7, 1, 4, 1, -1)),
        SequenceCheck::OutOfOrder {
            expected: 0,
            got: 4
        }
    );
    assert_eq!(state.check(&header(7, 1, 0, 1, -1)), SequenceCheck::Append);
    state.update(&header(7, 1, 0, 1, 13));
    assert_eq!(
        state.check(&header(7, 0, 3, 1, -1)),
        SequenceCheck::StaleEpoch { current: 1, got: 0 }
    );
    // Non-idempotent batches are never checked.
    assert_eq!(
        state.check(&header(-1, -1, -1, 5, -1)),
        SequenceCheck::Append
    );
}

// Only the last five batches are remembered, as Kafka does.
#[test]
fn remembers_five_batches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut state = manager(dir.path());
    for i in 0..6 {
        state.update(&header(1, 0, i, 1, i64::from(i)));
    }
    assert!(matches!(
        state.check(&header(1, 0, 1, 1, -1)),
        SequenceCheck::Duplicate(b) if b.first_offset == 1
    ));
    assert!(matches!(
        state.check(&header(1, 0, 0, 1, -1)),
        SequenceCheck::OutOfOrder {
            expected: 6,
            got: 0
        }
    ));
}

// A snapshot written and loaded back gives the same answers; snapshots above the log end
// are deleted; a damaged newest snapshot falls back to an older one.
#[test]
fn snapshots_round_trip_and_damage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut state = manager(dir.path());
    state.update(&header(1, 0, 0, 2, 0));
    state.update(&header(2, 3, 7, 1, 2));
    state.take_snapshot(3).write().expect("write");
    state.update(&header(1, 0, 2, 1, 3));
    state.take_snapshot(4).write().expect("write");
    state.update(&header(1, 0, 3, 1, 4));
    state.take_snapshot(5).write().expect("write");

    let mut loaded = manager(dir.path());
    assert_eq!(loaded.load(4).expect("load"), Some(4));
    assert!(!snapshot_path(dir.path(), 5).exists());
    assert_eq!(loaded.producer_count(), 2);
    assert!(matches!(
        loaded.check(&header(1, 0, 2, 1, -1)),
        SequenceCheck::Duplicate(b) if b.first_offset == 3
    ));
    assert!(matches!(
        loaded.check(&header(2, 3, 7, 1, -1)),
        SequenceCheck::Duplicate(b) if b.first_offset == 2
    ));

    // Flip a byte of the newest: it is ignored and removed, the older one is used.
    let path = snapshot_path(dir.path(), 4);
    let mut bytes = fs::read(&path).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    fs::write(&path, bytes).expect("write");
    let mut loaded = manager(dir.path());
    assert_eq!(loaded.load(10).expect("load"), Some(3));
    assert!(!path.exists());
    assert_eq!(loaded.check(&header(1, 0, 2, 1, -1)), SequenceCheck::Append);
}

// Producers silent for the expiration time are forgotten; trimming the log start forgets
// producers whose batches are gone.
#[test]
fn expiry_and_log_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut state = manager(dir.path());
    state.update(&header(1, 0, 0, 1, 0)); // timestamp 1000
    state.update(&header(2, 0, 0, 1, 50)); // timestamp 1050
    assert_eq!(state.remove_expired(1_040, 30), 1);
    assert_eq!(state.producer_count(), 1);
    state.update(&header(3, 0, 0, 1, 60));
    state.on_log_start_advanced(55, 55).expect("trim");
    assert_eq!(state.producer_count(), 1);
    assert_eq!(
        state.check(&header(3, 0, 0, 1, -1)),
        SequenceCheck::Duplicate(BatchMetadata {
            first_sequence: 0,
            last_sequence: 0,
            first_offset: Offset(60),
            last_offset: Offset(60),
            max_timestamp: 1_060,
        })
    );
}

// A version-1 snapshot (before transactions) still loads: its producers have no open
// transaction and no coordinator epoch. A version-2 snapshot keeps an open transaction.
#[test]
fn snapshot_version_1_is_read_and_version_2_keeps_transactions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut body = Vec::new();
    body.extend(1u32.to_be_bytes()); // one producer
    body.extend(7i64.to_be_bytes());
    body.extend(2i16.to_be_bytes()); // epoch
    body.extend(1_500i64.to_be_bytes()); // last timestamp
    body.push(1); // one batch
    body.extend(0i32.to_be_bytes());
    body.extend(2i32.to_be_bytes());
    body.extend(10i64.to_be_bytes());
    body.extend(12i64.to_be_bytes());
    body.extend(1_500i64.to_be_bytes());
    let mut v1 = Vec::new();
    v1.extend(SNAPSHOT_MAGIC);
    v1.extend(1u16.to_be_bytes());
    v1.extend(crc32c::crc32c(&body).to_be_bytes());
    v1.extend(body);
    fs::write(snapshot_path(dir.path(), 13), v1).expect("write v1");
    let mut loaded = manager(dir.path());
    assert_eq!(loaded.load(13).expect("load"), Some(13));
    assert_eq!(
        loaded.active_producers(),
        vec![ActiveProducer {
            producer_id: 7,
            producer_epoch: 2,
            last_sequence: 2,
            last_timestamp: 1_500,
            coordinator_epoch: -1,
            current_txn_start_offset: -1,
        }]
    );
    assert_eq!(loaded.first_unstable_offset(), None);

    let mut txn = header(8, 0, 0, 2, 13);
    txn.attributes = 0x10;
    loaded.update(&txn);
    loaded.take_snapshot(15).write().expect("write v2");
    let mut reloaded = manager(dir.path());
    assert_eq!(reloaded.load(15).expect("load"), Some(15));
    assert_eq!(reloaded.first_unstable_offset(), Some(13));
    assert_eq!(reloaded.active_producers(), loaded.active_producers());
}

// A coordinator's batches carry the producer's id and epoch but no sequence (the group
// coordinator's transactional offset commits, one per transaction): each appends, none is
// taken for a retry of the one before, also under a new epoch; a stale epoch is still
// refused.
#[test]
fn batches_without_a_sequence_always_append() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut state = manager(dir.path());
    let first = header(7, 0, -1, 1, 10);
    assert_eq!(state.check(&first), SequenceCheck::Append);
    state.update(&first);
    assert_eq!(state.check(&header(7, 0, -1, 1, -1)), SequenceCheck::Append);
    state.update(&header(7, 0, -1, 1, 11));
    assert_eq!(state.check(&header(7, 1, -1, 1, -1)), SequenceCheck::Append);
    state.update(&header(7, 1, -1, 1, 12));
    assert_eq!(
        state.check(&header(7, 0, -1, 1, -1)),
        SequenceCheck::StaleEpoch { current: 1, got: 0 }
    );
}
