//! Compaction of transactional data and markers (Kafka's `CleanedTransactionMetadata`,
//! KIP-98 and KIP-534): a read_committed view of the log survives a pass except for
//! superseded keys, aborted records go, markers stay while their transaction has data
//! and until their delete horizon after, and the producer state rebuilt from the
//! cleaned log is the state before.

use std::collections::{BTreeMap, HashSet};

use proptest::prelude::*;

use super::*;
use crate::end_transaction_marker::{parse_marker, EndTransactionMarker, TxnResult};
use crate::producer_state::ActiveProducer;

/// [`keyed_batch`] in `producer`'s transaction at `epoch`, first sequence `seq`.
fn txn_batch(
    records: &[(Vec<u8>, Option<Vec<u8>>)],
    producer: i64,
    epoch: i16,
    seq: i32,
) -> Vec<u8> {
    let mut out = keyed_batch(records, CODEC_NONE, Some((producer, epoch, seq)), 1_000);
    out[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

fn end_txn(log: &mut Log, producer: i64, epoch: i16, result: TxnResult) -> i64 {
    let marker = EndTransactionMarker {
        result,
        coordinator_epoch: 0,
    };
    log.append_txn_marker(producer, epoch, marker, 0)
        .expect("marker")
        .first_offset
        .get()
}

fn append(log: &mut Log, batch: &[u8]) -> i64 {
    log.append(batch, 0)
        .expect("append")
        .appended()
        .expect("appended")
        .first_offset
        .get()
}

/// One stored batch: its header, its records and, for a marker, the marker.
struct Stored {
    header: RecordBatchHeader,
    rows: Vec<Row>,
    marker: Option<EndTransactionMarker>,
}

fn stored(log: &Log) -> Vec<Stored> {
    let bytes = log
        .read(log.log_start_offset(), usize::MAX, Offset::MAX, true)
        .expect("read")
        .records;
    let mut out = Vec::new();
    for (position, header) in iter_headers(&bytes) {
        let batch = &bytes[position..position + header.total_bytes()];
        assert_eq!(
            compute_crc(batch),
            header.crc,
            "crc at {}",
            header.base_offset
        );
        let mut scratch = Vec::new();
        let body = records_of(batch, &header, &mut scratch).expect("decodes");
        let rows: Vec<Row> = RecordIter::new(body)
            .map(|r| {
                let r = r.expect("record");
                (
                    header.base_offset + i64::from(r.offset_delta),
                    r.key.map(<[u8]>::to_vec),
                    r.value.map(<[u8]>::to_vec),
                )
            })
            .collect();
        assert_eq!(
            rows.len(),
            usize::try_from(header.records_count).expect("count")
        );
        let marker = if header.is_control() {
            parse_marker(&header, batch).expect("marker")
        } else {
            None
        };
        out.push(Stored {
            header,
            rows,
            marker,
        });
    }
    out
}

/// What a read_committed consumer sees, by the client's own algorithm (Kafka's
/// `CompletedFetch`): below the last stable offset, a transactional batch of a producer
/// named by an aborted transaction starting at or before it is skipped until that
/// producer's ABORT marker; control batches are never returned.
fn read_committed(log: &mut Log) -> Vec<Row> {
    let end = log.log_end_offset();
    let lso = log.first_unstable_offset(end).unwrap_or(end);
    let mut aborted = log.collect_aborted_transactions(log.log_start_offset(), lso);
    aborted.sort_by_key(|t| t.first_offset);
    let mut aborted = aborted.into_iter().peekable();
    let mut aborted_producers = HashSet::new();
    let mut out = Vec::new();
    for batch in stored(log) {
        let header = batch.header;
        if header.base_offset >= lso.get() {
            break;
        }
        while let Some(txn) = aborted.next_if(|t| t.first_offset <= header.last_offset()) {
            aborted_producers.insert(txn.producer_id);
        }
        if header.is_control() {
            if batch.marker.is_some_and(|m| m.result == TxnResult::Abort) {
                aborted_producers.remove(&header.producer_id);
            }
            continue;
        }
        if header.is_transactional() && aborted_producers.contains(&header.producer_id) {
            continue;
        }
        out.extend(batch.rows.into_iter().filter(|r| r.0 < lso.get()));
    }
    out
}

/// The producer state that matters after a reload: epoch, last sequence, open
/// transaction (the coordinator epoch of a dropped marker is not kept, as in Kafka).
fn producer_state(log: &Log) -> Vec<(i64, i16, i32, i64)> {
    log.active_producers()
        .iter()
        .map(|p: &ActiveProducer| {
            (
                p.producer_id,
                p.producer_epoch,
                p.last_sequence,
                p.current_txn_start_offset,
            )
        })
        .collect()
}

/// Closes the log, deletes its producer snapshots and reopens it, so producer state is
/// rebuilt from the (cleaned) batches alone.
fn reopen_without_snapshots(log: Log, config: LogConfig) -> Log {
    let dir = log.dir().to_path_buf();
    log.close().expect("close");
    for entry in std::fs::read_dir(&dir).expect("list") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "snapshot") {
            std::fs::remove_file(path).expect("remove snapshot");
        }
    }
    Log::open(&dir, config).expect("reopen")
}

/// Markers carry the wall clock: passes run as of later than that.
fn wall_clock_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms fit i64")
}

/// Makes everything durable and stable (the high watermark passes every marker).
fn settle(log: &mut Log) {
    sync(log);
    let end = log.log_end_offset();
    log.first_unstable_offset(end);
}

/// The read_committed view a compaction up to `cleaned_to` leaves: every committed record
/// at or above it, and below it only the newest committed record of each key.
fn expected_view(before: &[Row], cleaned_to: i64) -> Vec<Row> {
    let mut newest: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
    for row in before.iter().filter(|r| r.0 < cleaned_to) {
        newest.insert(row.1.clone().expect("keyed"), row.0);
    }
    before
        .iter()
        .filter(|r| r.0 >= cleaned_to || newest.get(r.1.as_ref().expect("keyed")) == Some(&r.0))
        .cloned()
        .collect()
}

fn markers(log: &Log) -> Vec<(i64, i64, TxnResult, bool)> {
    stored(log)
        .iter()
        .filter_map(|b| {
            b.marker.map(|m| {
                (
                    b.header.base_offset,
                    b.header.producer_id,
                    m.result,
                    b.header.attributes & 0x40 != 0,
                )
            })
        })
        .collect()
}

// Committed, aborted and open transactions interleaved with plain batches, cleaned three
// times: the read_committed view keeps every committed record except superseded keys
// (an aborted record never shadows an older committed one), aborted records are gone
// from the log, a marker stays while its transaction has a batch in the log, then gets a
// delete horizon and goes after it; nothing from the open transaction's first offset on
// changes, and the producer state rebuilt from the cleaned log alone is the state before.
#[test]
fn transactions_compacted_aborted_removed_markers_until_horizon() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), compacted_config(300)).expect("open");
    append(
        &mut log,
        &keyed_batch(&[kv("k", Some("v0"))], CODEC_NONE, None, 1_000),
    ); // 0
    append(
        &mut log,
        &txn_batch(&[kv("k", Some("c1")), kv("a", Some("a1"))], 9, 0, 0),
    ); // 1-2
    append(
        &mut log,
        &keyed_batch(&[kv("b", Some("b0"))], CODEC_NONE, None, 1_000),
    ); // 3
    append(
        &mut log,
        &txn_batch(&[kv("k", Some("x1")), kv("b", Some("x2"))], 10, 0, 0),
    ); // 4-5
    assert_eq!(end_txn(&mut log, 9, 0, TxnResult::Commit), 6);
    assert_eq!(end_txn(&mut log, 10, 0, TxnResult::Abort), 7);
    append(&mut log, &txn_batch(&[kv("a", Some("a2"))], 9, 0, 2)); // 8
    assert_eq!(end_txn(&mut log, 9, 0, TxnResult::Commit), 9);
    for i in 0..6 {
        append(
            &mut log,
            &keyed_batch(&[kv("k", Some(&format!("v{i}")))], CODEC_NONE, None, 1_000),
        ); // 10..16
    }
    let open = append(&mut log, &txn_batch(&[kv("o", Some("open"))], 11, 0, 0)); // 16
    for i in 0..6 {
        append(
            &mut log,
            &keyed_batch(&[kv(&format!("p{i}"), Some("p"))], CODEC_NONE, None, 1_000),
        );
    }
    settle(&mut log);
    assert!(log.segment_count() > 5, "{} segments", log.segment_count());
    let before = read_committed(&mut log);
    let state_before = producer_state(&log);
    let uncommitted_above: Vec<Row> = stored(&log)
        .into_iter()
        .flat_map(|b| b.rows)
        .filter(|r| r.0 >= open)
        .collect();
    let now = wall_clock_ms() + 10_000;

    let mut cleaner = cleaner();
    run_pass(&mut log, &mut cleaner, now, false).expect("due");
    let cleaned_to = read_checkpoint(log.dir()).expect("read").expect("written");
    assert!(
        cleaned_to <= open,
        "cleaned to {cleaned_to}, open transaction at {open}"
    );
    assert!(cleaned_to > 9, "cleaned to {cleaned_to}");
    let view = read_committed(&mut log);
    assert_eq!(view, expected_view(&before, cleaned_to));
    assert!(
        view.contains(&(3, Some(b"b".to_vec()), Some(b"b0".to_vec()))),
        "the aborted `b` must not shadow the committed one: {view:?}"
    );
    let all: Vec<Stored> = stored(&log);
    let aborted_left: Vec<&Row> = all
        .iter()
        .filter(|b| b.header.producer_id == 10 && !b.header.is_control())
        .flat_map(|b| &b.rows)
        .collect();
    assert!(
        aborted_left.is_empty(),
        "aborted records left: {aborted_left:?}"
    );
    // Producer 10's aborted batch stays, emptied: it is the producer's last batch.
    let p10: Vec<(i64, i32, i16)> = all
        .iter()
        .filter(|b| b.header.producer_id == 10 && !b.header.is_control())
        .map(|b| {
            (
                b.header.base_offset,
                b.header.records_count,
                b.header.attributes,
            )
        })
        .collect();
    assert_eq!(p10, vec![(4, 0, 0x10)]);
    // Every marker stays: each transaction had a batch in this pass.
    assert_eq!(
        markers(&log),
        vec![
            (6, 9, TxnResult::Commit, false),
            (7, 10, TxnResult::Abort, false),
            (9, 9, TxnResult::Commit, false),
        ]
    );
    let rows_above: Vec<Row> = stored(&log)
        .into_iter()
        .flat_map(|b| b.rows)
        .filter(|r| r.0 >= open)
        .collect();
    assert_eq!(
        rows_above, uncommitted_above,
        "nothing changes from the open transaction on"
    );

    // Second pass: producer 9's first transaction has no batch left, so its marker gets
    // a delete horizon; the others keep theirs (data, or producer 10's kept empty batch).
    let stats = run_pass(&mut log, &mut cleaner, now + 100, true).expect("forced");
    assert_eq!(
        markers(&log),
        vec![
            (6, 9, TxnResult::Commit, true),
            (7, 10, TxnResult::Abort, false),
            (9, 9, TxnResult::Commit, false),
        ]
    );
    assert_eq!(
        stats.tombstone_due_ms,
        Some(now + 100 + 1_000),
        "the next pass is due at the horizon"
    );
    assert_eq!(read_committed(&mut log), expected_view(&before, cleaned_to));

    // Before the horizon the marker stays; after it, it goes.
    run_pass(&mut log, &mut cleaner, now + 1_000, true).expect("forced");
    assert_eq!(markers(&log).len(), 3);
    run_pass(&mut log, &mut cleaner, now + 1_200, true).expect("forced");
    assert_eq!(
        markers(&log),
        vec![
            (7, 10, TxnResult::Abort, false),
            (9, 9, TxnResult::Commit, false)
        ]
    );
    assert_eq!(read_committed(&mut log), expected_view(&before, cleaned_to));
    let end = log.log_end_offset();
    assert_eq!(log.first_unstable_offset(end), Some(Offset(open)));

    let mut log = reopen_without_snapshots(log, compacted_config(300));
    assert_eq!(producer_state(&log), state_before);
    assert_eq!(read_committed(&mut log), expected_view(&before, cleaned_to));
    let end = log.log_end_offset();
    assert_eq!(log.first_unstable_offset(end), Some(Offset(open)));
}

// A producer fenced by a marker of a newer epoch (the coordinator's abort after a new
// InitProducerId) has no batch of that epoch: its marker is its last record and stays,
// so a reload still fences the old epoch.
#[test]
fn fencing_marker_kept_as_the_producers_last_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), compacted_config(300)).expect("open");
    append(&mut log, &txn_batch(&[kv("k", Some("z"))], 5, 0, 0)); // 0
    assert_eq!(end_txn(&mut log, 5, 1, TxnResult::Abort), 1);
    for i in 0..10 {
        append(
            &mut log,
            &keyed_batch(&[kv("k", Some(&i.to_string()))], CODEC_NONE, None, 1_000),
        );
    }
    settle(&mut log);
    let state_before = producer_state(&log);
    assert_eq!(state_before, vec![(5, 1, -1, -1)]);
    let now = wall_clock_ms() + 10_000;
    let mut cleaner = cleaner();
    for i in 0..4 {
        run_pass(&mut log, &mut cleaner, now + i * 5_000, true).expect("forced");
    }
    assert_eq!(
        markers(&log),
        vec![(1, 5, TxnResult::Abort, false)],
        "the fencing marker stays"
    );
    let mut log = reopen_without_snapshots(log, compacted_config(300));
    assert_eq!(producer_state(&log), state_before);
    let stale = log
        .append(&txn_batch(&[kv("k", Some("zombie"))], 5, 0, 1), 0)
        .map(|o| o.appended().is_some());
    assert!(
        matches!(stale, Err(Error::InvalidProducerEpoch { .. }) | Ok(false)),
        "epoch 0 is fenced after the reload: {stale:?}"
    );
}

#[derive(Clone, Debug)]
enum TxnOp {
    /// A plain batch of these keys.
    Plain(Vec<u8>),
    /// A batch of these keys in producer `p`'s transaction (begun if none is open).
    Txn(u8, Vec<u8>),
    /// Producer `p` commits (`true`) or aborts its open transaction, if any.
    End(u8, bool),
    /// A forced pass, `advance` ms later.
    Clean(u16),
}

fn txn_op() -> impl Strategy<Value = TxnOp> {
    prop_oneof![
        3 => prop::collection::vec(0u8..6, 1..3).prop_map(TxnOp::Plain),
        4 => (0u8..3, prop::collection::vec(0u8..6, 1..3)).prop_map(|(p, k)| TxnOp::Txn(p, k)),
        2 => (0u8..3, any::<bool>()).prop_map(|(p, c)| TxnOp::End(p, c)),
        1 => (0u16..1_500).prop_map(TxnOp::Clean),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    // Any interleaving of plain batches, transactional batches of three producers,
    // commits, aborts and passes: after every pass the read_committed view equals the
    // view before any pass with only superseded keys (below the cleaned point) removed,
    // no aborted record is left below the cleaned point, and rebuilding producer state
    // from the cleaned log (no snapshots) gives the state before, the same first
    // unstable offset and the same view.
    #[test]
    fn transactional_compaction_model(ops in prop::collection::vec(txn_op(), 1..50)) {
        let dir = tempfile::tempdir().expect("tempdir");
                let mut log = Log::open(dir.path(), compacted_config(300)).expect("open");
        let mut cleaner = cleaner();
        // Per producer: open transaction's record offsets and next sequence.
        let mut open: BTreeMap<u8, Vec<i64>> = BTreeMap::new();
        let mut sequences: BTreeMap<u8, i32> = BTreeMap::new();
        let mut aborted: HashSet<i64> = HashSet::new();
        let mut now = wall_clock_ms() + 10_000;
        let mut serial = 0_u32;
        let mut value = || { serial += 1; serial.to_string() };
        for op in &ops {
            match op {
                TxnOp::Plain(keys) => {
                    let records: Vec<_> = keys.iter().map(|k| kv(&k.to_string(), Some(&value()))).collect();
                    append(&mut log, &keyed_batch(&records, CODEC_NONE, None, 1_000));
                }
                TxnOp::Txn(p, keys) => {
                    let records: Vec<_> = keys.iter().map(|k| kv(&k.to_string(), Some(&value()))).collect();
                    let seq = sequences.entry(*p).or_insert(0);
                    let first = append(&mut log, &txn_batch(&records, 100 + i64::from(*p), 0, *seq));
                    *seq += i32::try_from(records.len()).expect("small");
                    open.entry(*p).or_default().extend(first..first + records.len() as i64);
                }
                TxnOp::End(p, commit) => {
                    if let Some(offsets) = open.remove(p) {
                        let result = if *commit { TxnResult::Commit } else { TxnResult::Abort };
                        end_txn(&mut log, 100 + i64::from(*p), 0, result);
                        if !commit {
                            aborted.extend(offsets);
                        }
                    }
                }
                TxnOp::Clean(advance) => {
                    settle(&mut log);
                    let before = read_committed(&mut log);
                    let state = producer_state(&log);
                    let end = log.log_end_offset();
                    let unstable = log.first_unstable_offset(end);
                    now += i64::from(*advance);
                    let previous = read_checkpoint(log.dir()).expect("read").unwrap_or(0);
                    run_pass(&mut log, &mut cleaner, now, true);
                    let cleaned_to = read_checkpoint(log.dir()).expect("read").unwrap_or(0);
                    prop_assert!(previous <= cleaned_to);
                    prop_assert_eq!(read_committed(&mut log), expected_view(&before, cleaned_to));
                    let left: Vec<i64> = stored(&log).into_iter().flat_map(|b| b.rows).map(|r| r.0)
                        .filter(|o| *o < cleaned_to && aborted.contains(o)).collect();
                    prop_assert!(left.is_empty(), "aborted records below {}: {:?}", cleaned_to, left);
                    prop_assert_eq!(log.first_unstable_offset(end), unstable);
                    log = reopen_without_snapshots(log, compacted_config(300));
                    prop_assert_eq!(producer_state(&log), state);
                    prop_assert_eq!(log.first_unstable_offset(end), unstable);
                    prop_assert_eq!(read_committed(&mut log), expected_view(&before, cleaned_to));
                }
            }
        }
    }
}

// The cleaned segment's `.txnindex` follows the swap's commit point: a crash after it
// (every `.swap` name in place) is completed at open with the cleaned segment's own
// entries (the aborted transaction whose marker stays), and the aborted records are
// gone; a crash before it (only the `.txnindex` renamed) leaves the old segments with
// their entries and no leftover file; a swap an older version began (no `.txnindex.swap`
// at all) keeps every old entry. Each way read_committed never sees the aborted record.
#[test]
fn interrupted_swap_keeps_the_cleaned_transaction_index() {
    for (after_commit, older_version) in [(false, false), (true, false), (true, true)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = Log::open(dir.path(), compacted_config(300)).expect("open");
        append(
            &mut log,
            &keyed_batch(&[kv("b", Some("b0"))], CODEC_NONE, None, 1_000),
        ); // 0
        append(&mut log, &txn_batch(&[kv("b", Some("aborted"))], 10, 0, 0)); // 1
        assert_eq!(end_txn(&mut log, 10, 0, TxnResult::Abort), 2);
        for i in 0..10 {
            append(
                &mut log,
                &keyed_batch(&[kv(&format!("k{i}"), Some("v"))], CODEC_NONE, None, 1_000),
            );
        }
        settle(&mut log);
        let end = log.log_end_offset();
        let aborted = log.collect_aborted_transactions(Offset(0), end);
        assert_eq!(aborted.len(), 1);
        let before = read_committed(&mut log);
        log.set_config(compacted_config(100_000));
        let now = wall_clock_ms() + 10_000;
        let job = log.cleaning_job(now, Offset::MAX, -1, false).expect("due");
        let mut result = cleaner().clean(&job, now).expect("clean");
        write_checkpoint(dir.path(), result.cleaned_to).expect("checkpoint");
        let cleaned = result.segments.remove(0);
        for rest in result.segments {
            rest.discard();
        }
        log.close().expect("close");
        let base = cleaned.base_offset;
        let swap_txn_index = CleanedSegment::txn_index_path(dir.path(), base, SWAP_SUFFIX);
        assert!(CleanedSegment::txn_index_path(dir.path(), base, CLEANED_SUFFIX).exists());
        checkpoint::write(
            dir.path(),
            &file_name(base, SWAP_END_EXTENSION),
            &[cleaned.end_offset()],
        )
        .expect("marker");
        let cleaned_txn_index = CleanedSegment::txn_index_path(dir.path(), base, CLEANED_SUFFIX);
        if older_version {
            std::fs::remove_file(cleaned_txn_index).expect("remove");
        } else {
            std::fs::rename(cleaned_txn_index, &swap_txn_index).expect("rename");
        }
        if after_commit {
            for (from, to) in CleanedSegment::paths(dir.path(), base, CLEANED_SUFFIX)
                .into_iter()
                .zip(CleanedSegment::paths(dir.path(), base, SWAP_SUFFIX))
            {
                std::fs::rename(from, to).expect("rename");
            }
        }
        let mut log = Log::open(dir.path(), compacted_config(100_000)).expect("reopen");
        assert_eq!(
            log.collect_aborted_transactions(Offset(0), end),
            aborted,
            "after commit: {after_commit}"
        );
        assert_eq!(
            read_committed(&mut log),
            before,
            "after commit: {after_commit}"
        );
        let aborted_rows = stored(&log)
            .iter()
            .filter(|b| b.header.producer_id == 10 && !b.header.is_control())
            .map(|b| b.rows.len())
            .sum::<usize>();
        assert_eq!(
            aborted_rows,
            usize::from(!after_commit),
            "after commit: {after_commit}"
        );
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !names.iter().any(|n| n.ends_with(SWAP_SUFFIX)
                || n.ends_with(CLEANED_SUFFIX)
                || n.ends_with(SWAP_END_EXTENSION)),
            "{names:?}"
        );
    }
}
