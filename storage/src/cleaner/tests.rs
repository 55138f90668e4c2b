//! Tests of log compaction: the offset map, a pass over a real `Log` (latest value per
//! key at its original offset, tombstones, compressed batches, idempotent producers'
//! last batches), crash leftovers at open, and a proptest model of keyed writes and
//! deletes.

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;

use super::*;
use crate::compression::{CODEC_GZIP, CODEC_LZ4, CODEC_SNAPPY, CODEC_ZSTD};
use crate::log::{CompactionConfig, Log, LogConfig};
use crate::offset::Offset;
use crate::record_batch::iter_headers;
use crate::test_util::put_varint;

/// A v2 batch of keyed records (`None` value = tombstone), compressed with `codec`, from
/// idempotent producer `producer` (id, epoch, first sequence) if given.
fn keyed_batch(
    records: &[(Vec<u8>, Option<Vec<u8>>)],
    codec: u8,
    producer: Option<(i64, i16, i32)>,
    timestamp: i64,
) -> Vec<u8> {
    let mut raw = Vec::new();
    for (i, (key, value)) in records.iter().enumerate() {
        let mut record = vec![0u8];
        put_varint(&mut record, 0);
        put_varint(&mut record, i as i64);
        put_varint(&mut record, key.len() as i64);
        record.extend(key);
        match value {
            Some(v) => {
                put_varint(&mut record, v.len() as i64);
                record.extend(v);
            }
            None => put_varint(&mut record, -1),
        }
        put_varint(&mut record, 0);
        put_varint(&mut raw, record.len() as i64);
        raw.extend(record);
    }
    let body = if codec == CODEC_NONE {
        raw
    } else {
        compression::compress(codec, &raw).expect("compress")
    };
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let mut out = Vec::new();
    out.extend(0i64.to_be_bytes());
    out.extend(0i32.to_be_bytes());
    out.extend(0i32.to_be_bytes());
    out.push(2);
    out.extend(0u32.to_be_bytes());
    out.extend(i16::from(codec).to_be_bytes());
    out.extend((records.len() as i32 - 1).to_be_bytes());
    out.extend(timestamp.to_be_bytes());
    out.extend(timestamp.to_be_bytes());
    out.extend(pid.to_be_bytes());
    out.extend(epoch.to_be_bytes());
    out.extend(seq.to_be_bytes());
    out.extend((records.len() as i32).to_be_bytes());
    out.extend(body);
    let length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

fn kv(key: &str, value: Option<&str>) -> (Vec<u8>, Option<Vec<u8>>) {
    (
        key.as_bytes().to_vec(),
        value.map(|v| v.as_bytes().to_vec()),
    )
}

fn compacted_config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 128,
        compaction: CompactionConfig {
            compact: true,
            delete_retention_ms: 1_000,
            min_cleanable_dirty_ratio: 0.0,
            ..CompactionConfig::default()
        },
        ..LogConfig::default()
    }
}

fn sync(log: &mut Log) {
    let handle = log.sync_handle().expect("sync handle");
    let synced = handle.sync().expect("sync");
    log.mark_durable(synced);
}

/// Every record of the log: (offset, key, value), plus each batch header.
type Row = (i64, Option<Vec<u8>>, Option<Vec<u8>>);
fn records(log: &Log) -> (Vec<Row>, Vec<RecordBatchHeader>) {
    let bytes = log
        .read(log.log_start_offset(), usize::MAX, Offset::MAX, true)
        .expect("read")
        .records;
    let mut rows = Vec::new();
    let mut headers = Vec::new();
    for (position, header) in iter_headers(&bytes) {
        let batch = &bytes[position..position + header.total_bytes()];
        assert_eq!(
            compute_crc(batch),
            header.crc,
            "crc of batch at {}",
            header.base_offset
        );
        let mut scratch = Vec::new();
        let body = records_of(batch, &header, &mut scratch).expect("decodes");
        let mut count = 0;
        for record in RecordIter::new(body) {
            let record = record.expect("record");
            rows.push((
                header.base_offset + i64::from(record.offset_delta),
                record.key.map(<[u8]>::to_vec),
                record.value.map(<[u8]>::to_vec),
            ));
            count += 1;
        }
        assert_eq!(count, header.records_count);
        headers.push(header);
    }
    (rows, headers)
}

/// One whole pass: job, clean, checkpoint, swaps. Returns the stats, `None` if not due.
fn run_pass(log: &mut Log, cleaner: &mut Cleaner, now_ms: i64, force: bool) -> Option<CleanStats> {
    let cleaned_to = read_checkpoint(log.dir())
        .expect("checkpoint")
        .unwrap_or(-1);
    let job = log.cleaning_job(now_ms, Offset::MAX, cleaned_to, force)?;
    let result = cleaner.clean(&job, now_ms).expect("clean");
    write_checkpoint(log.dir(), result.cleaned_to).expect("write checkpoint");
    for segment in result.segments {
        assert!(log.replace_with_cleaned(segment).expect("swap"));
    }
    Some(result.stats)
}

fn cleaner() -> Cleaner {
    Cleaner::new(CleanerConfig {
        dedupe_buffer_bytes: 1 << 20,
        io_max_bytes_per_second: None,
    })
}

// The map keeps the largest offset per key, refuses to overfill, and forgets on clear.
#[test]
fn offset_map_keeps_latest_offset_and_is_bounded() {
    let mut map = OffsetMap::new(24 * 100);
    assert_eq!(map.max_entries(), 90);
    map.put(b"a", 5);
    map.put(b"a", 9);
    map.put(b"b", 7);
    assert_eq!(
        (map.get(b"a"), map.get(b"b"), map.get(b"c")),
        (Some(9), Some(7), None)
    );
    assert_eq!((map.len(), map.latest_offset()), (2, 9));
    for i in 0..88 {
        map.put(format!("k{i}").as_bytes(), 100 + i);
    }
    assert!(!map.has_room_for(1));
    map.clear();
    assert_eq!((map.len(), map.get(b"a")), (0, None));
}

// Many updates per key over small segments: after a pass every key's latest value is at
// its original offset, no older value survives, the segments were merged (fewer files),
// and the same holds after a reopen.
#[test]
fn pass_keeps_latest_value_per_key_at_its_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), compacted_config(600)).expect("open");
    let mut latest = BTreeMap::new();
    for round in 0..20 {
        for key in 0..5 {
            let value = format!("v{round}-{key}");
            let info = log
                .append(
                    &keyed_batch(
                        &[kv(&format!("k{key}"), Some(&value))],
                        CODEC_NONE,
                        None,
                        1_000,
                    ),
                    0,
                )
                .expect("append")
                .appended()
                .expect("appended");
            latest.insert(format!("k{key}"), (info.first_offset.get(), value));
        }
    }
    sync(&mut log);
    let segments_before = log.segment_count();
    assert!(segments_before > 5, "{segments_before} segments");
    let mut cleaner = cleaner();
    let stats = run_pass(&mut log, &mut cleaner, 2_000, false).expect("due");
    assert!(stats.records_retained < stats.records_read, "{stats:?}");
    // Groups are sized by the segments' sizes before cleaning (Kafka's
    // groupSegmentsBySize): the now small cleaned segments merge on the next pass.
    run_pass(&mut log, &mut cleaner, 2_000, true).expect("forced");
    assert!(
        log.segment_count() < segments_before,
        "{} segments",
        log.segment_count()
    );
    let check = |log: &Log| {
        let (rows, _) = records(log);
        let cleaned_to = read_checkpoint(log.dir()).expect("read").expect("written");
        let offsets: Vec<i64> = rows.iter().map(|r| r.0).collect();
        assert!(
            offsets.windows(2).all(|w| w[0] < w[1]),
            "offsets not increasing: {offsets:?}"
        );
        for (key, (offset, value)) in &latest {
            let found: Vec<&Row> = rows
                .iter()
                .filter(|r| r.1.as_deref() == Some(key.as_bytes()))
                .collect();
            let newest = found.last().expect("key present");
            assert_eq!(
                (newest.0, newest.2.as_deref()),
                (*offset, Some(value.as_bytes()))
            );
            // Below the cleaned point, only the newest record of a key remains.
            assert!(
                found.iter().filter(|r| r.0 < cleaned_to).count() <= 1,
                "{key}: {found:?}"
            );
        }
    };
    check(&log);
    let end = log.log_end_offset();
    log.close().expect("close");
    let log = Log::open(dir.path(), compacted_config(600)).expect("reopen");
    assert_eq!(log.log_end_offset(), end);
    check(&log);
}

// A tombstone stays for delete.retention.ms after the first pass that kept it (which
// stamps that horizon on its batch, KIP-534) and goes (with every older value of its
// key) at the first pass after.
#[test]
fn tombstones_removed_after_delete_retention() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), compacted_config(300)).expect("open");
    log.append(
        &keyed_batch(
            &[kv("a", Some("1")), kv("b", Some("1"))],
            CODEC_NONE,
            None,
            1_000,
        ),
        0,
    )
    .expect("append");
    log.append(&keyed_batch(&[kv("a", None)], CODEC_NONE, None, 1_000), 0)
        .expect("append");
    for i in 0..10 {
        log.append(
            &keyed_batch(&[kv("c", Some(&i.to_string()))], CODEC_NONE, None, 1_000),
            0,
        )
        .expect("append");
    }
    sync(&mut log);
    let mut cleaner = cleaner();
    // The first pass (now 1500, retention 1000) keeps it and stamps horizon 2500.
    let stats = run_pass(&mut log, &mut cleaner, 1_500, false).expect("due");
    let (rows, _) = records(&log);
    assert!(
        rows.iter()
            .any(|r| r.1.as_deref() == Some(b"a") && r.2.is_none()),
        "{rows:?}"
    );
    assert!(
        !rows
            .iter()
            .any(|r| r.1.as_deref() == Some(b"a") && r.2.is_some()),
        "{rows:?}"
    );
    assert_eq!(stats.tombstone_due_ms, Some(2_500));
    // A pass before the horizon keeps it.
    let stats = run_pass(&mut log, &mut cleaner, 2_499, true).expect("forced");
    assert_eq!(stats.tombstone_due_ms, Some(2_500));
    let (rows, _) = records(&log);
    assert!(
        rows.iter()
            .any(|r| r.1.as_deref() == Some(b"a") && r.2.is_none()),
        "{rows:?}"
    );
    // At it: the tombstone is gone too, b's value stays.
    run_pass(&mut log, &mut cleaner, 2_500, true).expect("forced");
    let (rows, _) = records(&log);
    assert!(
        !rows.iter().any(|r| r.1.as_deref() == Some(b"a")),
        "{rows:?}"
    );
    assert!(rows
        .iter()
        .any(|r| r.1.as_deref() == Some(b"b") && r.2.as_deref() == Some(b"1")));
}

// KIP-534: a tombstone written with an old producer timestamp (its segment long past
// delete.retention.ms) is not dropped by the first pass that sees it, as a segment-time
// rule would: that pass stamps the horizon (now + retention) on its batch, keeping every
// record's timestamp, and only a pass at or after the horizon drops it.
#[test]
fn tombstones_with_old_timestamps_stay_until_the_stamped_horizon() {
    for codec in [CODEC_NONE, CODEC_ZSTD] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = Log::open(dir.path(), compacted_config(300)).expect("open");
        log.append(
            &keyed_batch(&[kv("a", Some("1"))], CODEC_NONE, None, 1_000),
            0,
        )
        .expect("append");
        log.append(
            &keyed_batch(&[kv("b", Some("1")), kv("a", None)], codec, None, 1_000),
            0,
        )
        .expect("append");
        for i in 0..10 {
            log.append(
                &keyed_batch(&[kv("c", Some(&i.to_string()))], CODEC_NONE, None, 1_000),
                0,
            )
            .expect("append");
        }
        sync(&mut log);
        let mut cleaner = cleaner();
        let now = 10_000_000;
        let stats = run_pass(&mut log, &mut cleaner, now, false).expect("due");
        assert_eq!(stats.tombstone_due_ms, Some(now + 1_000));
        let tombstone_of_a = |log: &Log| {
            let (rows, headers) = records(log);
            let found = rows
                .iter()
                .any(|r| r.0 == 2 && r.1.as_deref() == Some(b"a") && r.2.is_none());
            (found, rows, headers)
        };
        let (found, rows, headers) = tombstone_of_a(&log);
        assert!(found, "{rows:?}");
        assert!(!rows.iter().any(|r| r.0 == 0), "{rows:?}");
        let stamped = headers
            .iter()
            .find(|h| h.base_offset == 1)
            .expect("batch of the tombstone");
        assert_eq!(stamped.delete_horizon_ms(), Some(now + 1_000));
        assert_eq!(stamped.compression_codec(), codec);
        // Each record's absolute timestamp is unchanged (deltas rebased on the horizon).
        let bytes = log
            .read(Offset(1), usize::MAX, Offset::MAX, true)
            .expect("read")
            .records;
        let (position, header) = iter_headers(&bytes).next().expect("batch");
        let mut scratch = Vec::new();
        let body = records_of(
            &bytes[position..position + header.total_bytes()],
            &header,
            &mut scratch,
        )
        .expect("decodes");
        let stamps: Vec<i64> = RecordIter::new(body)
            .map(|r| header.base_timestamp + r.expect("record").timestamp_delta)
            .collect();
        assert_eq!(stamps, vec![1_000, 1_000]);
        // Survives a reopen, and a pass just before the horizon.
        log.close().expect("close");
        let mut log = Log::open(dir.path(), compacted_config(300)).expect("reopen");
        run_pass(&mut log, &mut cleaner, now + 999, true).expect("forced");
        let (found, rows, _) = tombstone_of_a(&log);
        assert!(found, "{rows:?}");
        // The pass at the horizon drops it; b keeps its value.
        let stats = run_pass(&mut log, &mut cleaner, now + 1_000, true).expect("forced");
        assert_eq!(stats.tombstone_due_ms, None);
        let (rows, _) = records(&log);
        assert!(
            !rows.iter().any(|r| r.1.as_deref() == Some(b"a")),
            "{rows:?}"
        );
        assert!(rows
            .iter()
            .any(|r| r.0 == 1 && r.1.as_deref() == Some(b"b") && r.2.as_deref() == Some(b"1")));
    }
}

// Compressed batches are rewritten with the same codec, decompress to exactly the kept
// records, and carry their original base offset and last offset delta.
#[test]
fn compressed_batches_recompressed_with_same_codec() {
    for codec in [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = Log::open(dir.path(), compacted_config(400)).expect("open");
        log.append(
            &keyed_batch(
                &[
                    kv("x", Some("old")),
                    kv("y", Some("keep")),
                    kv("z", Some("old")),
                ],
                codec,
                None,
                1_000,
            ),
            0,
        )
        .expect("append");
        for _ in 0..6 {
            log.append(
                &keyed_batch(
                    &[kv("x", Some("new")), kv("z", Some("new"))],
                    codec,
                    None,
                    1_000,
                ),
                0,
            )
            .expect("append");
        }
        sync(&mut log);
        run_pass(&mut log, &mut cleaner(), 1_100, false).expect("due");
        let (rows, headers) = records(&log);
        let first = headers.first().expect("a batch");
        assert_eq!(
            (
                first.base_offset,
                first.last_offset_delta,
                first.records_count
            ),
            (0, 2, 1),
            "codec {codec}"
        );
        assert_eq!(first.compression_codec(), codec);
        assert_eq!(
            rows.first(),
            Some(&(1, Some(b"y".to_vec()), Some(b"keep".to_vec())))
        );
    }
}

// The last batch of an idempotent producer stays (empty) when all its records are
// compacted away, so its sequence state survives; a reopened log still accepts the
// producer's next sequence and refuses a duplicate.
#[test]
fn idempotent_producers_last_batch_kept_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), compacted_config(300)).expect("open");
    for seq in 0..4 {
        log.append(
            &keyed_batch(&[kv("p", Some("x"))], CODEC_NONE, Some((7, 0, seq)), 1_000),
            0,
        )
        .expect("append");
    }
    // Other traffic rolls the producer's batches out of the active segment and
    // supersedes its key.
    for i in 0..8 {
        log.append(
            &keyed_batch(&[kv("p", Some(&i.to_string()))], CODEC_NONE, None, 1_000),
            0,
        )
        .expect("append");
    }
    sync(&mut log);
    run_pass(&mut log, &mut cleaner(), 1_100, false).expect("due");
    let (_, headers) = records(&log);
    let kept: Vec<&RecordBatchHeader> = headers.iter().filter(|h| h.producer_id == 7).collect();
    assert_eq!(kept.len(), 1, "{headers:?}");
    assert_eq!(
        (
            kept[0].base_offset,
            kept[0].base_sequence,
            kept[0].records_count
        ),
        (3, 3, 0)
    );
    log.close().expect("close");
    let mut log = Log::open(dir.path(), compacted_config(300)).expect("reopen");
    let dup = log
        .append(
            &keyed_batch(&[kv("p", Some("x"))], CODEC_NONE, Some((7, 0, 3)), 1_000),
            0,
        )
        .expect("append");
    assert!(
        dup.appended().is_none(),
        "retry of sequence 3 is a duplicate"
    );
    log.append(
        &keyed_batch(&[kv("p", Some("x"))], CODEC_NONE, Some((7, 0, 4)), 1_000),
        0,
    )
    .expect("next sequence accepted");
}

/// Writes a compacted log and leaves one pass's cleaned files behind, not swapped.
fn log_with_cleaned_leftover(dir: &Path) -> (BTreeMap<String, String>, CleanedSegment, i64) {
    let mut log = Log::open(dir, compacted_config(400)).expect("open");
    let mut latest = BTreeMap::new();
    for round in 0..10 {
        for key in 0..3 {
            let value = format!("{round}");
            log.append(
                &keyed_batch(
                    &[kv(&format!("k{key}"), Some(&value))],
                    CODEC_NONE,
                    None,
                    1_000,
                ),
                0,
            )
            .expect("append");
            latest.insert(format!("k{key}"), value);
        }
    }
    sync(&mut log);
    // Larger segments from now on, so the pass merges the small ones into one group.
    log.set_config(compacted_config(100_000));
    let job = log
        .cleaning_job(1_100, Offset::MAX, -1, false)
        .expect("due");
    let mut result = cleaner().clean(&job, 1_100).expect("clean");
    write_checkpoint(dir, result.cleaned_to).expect("checkpoint");
    let end = log.log_end_offset().get();
    log.close().expect("close");
    (latest, result.segments.remove(0), end)
}

fn latest_values(log: &Log) -> BTreeMap<String, String> {
    let (rows, _) = records(log);
    rows.into_iter()
        .map(|r| {
            (
                String::from_utf8(r.1.expect("key")).expect("utf8"),
                String::from_utf8(r.2.expect("value")).expect("utf8"),
            )
        })
        .collect()
}

// A crash before the commit point leaves `.cleaned` files: open deletes them and the log
// is the uncleaned one, complete.
#[test]
fn open_deletes_cleaned_leftovers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (latest, cleaned, end) = log_with_cleaned_leftover(dir.path());
    let leftover = CleanedSegment::paths(dir.path(), cleaned.base_offset, CLEANED_SUFFIX);
    assert!(leftover[0].exists());
    let log = Log::open(dir.path(), compacted_config(400)).expect("reopen");
    assert!(leftover.iter().all(|p| !p.exists()));
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(latest_values(&log), latest);
}

// A crash after the commit point (`.swap` + marker durable, old segments partly deleted)
// is completed at open: the cleaned segment replaces the old ones, every key's latest
// value is readable, nothing is duplicated.
#[test]
fn open_completes_interrupted_swap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (latest, cleaned, end) = log_with_cleaned_leftover(dir.path());
    let base = cleaned.base_offset;
    let group_end = cleaned.end_offset();
    checkpoint::write(
        dir.path(),
        &file_name(base, SWAP_END_EXTENSION),
        &[group_end],
    )
    .expect("marker");
    for (from, to) in CleanedSegment::paths(dir.path(), base, CLEANED_SUFFIX)
        .into_iter()
        .zip(CleanedSegment::paths(dir.path(), base, SWAP_SUFFIX))
    {
        std::fs::rename(from, to).expect("rename");
    }
    // The crash came after deleting the second old segment only.
    let second = cleaned.replaces[1].base_offset;
    std::fs::remove_file(dir.path().join(file_name(second, "log"))).expect("delete");
    let log = Log::open(dir.path(), compacted_config(400)).expect("reopen");
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(latest_values(&log), latest);
    let (rows, _) = records(&log);
    let below: Vec<&Row> = rows.iter().filter(|r| r.0 < group_end).collect();
    assert!(below.len() <= 3, "{below:?}");
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.ends_with(SWAP_SUFFIX) || n.ends_with(SWAP_END_EXTENSION)),
        "{names:?}"
    );
}

// A segment that changed after the job was taken (retention deleted it) is not replaced.
#[test]
fn swap_refused_when_segments_changed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), compacted_config(300)).expect("open");
    for i in 0..20 {
        log.append(
            &keyed_batch(&[kv("k", Some(&i.to_string()))], CODEC_NONE, None, 1_000),
            0,
        )
        .expect("append");
    }
    sync(&mut log);
    let job = log
        .cleaning_job(1_100, Offset::MAX, -1, false)
        .expect("due");
    let result = cleaner().clean(&job, 1_100).expect("clean");
    let second_base = job.segments[1].base_offset;
    log.delete_records_before(Offset(second_base))
        .expect("delete records");
    let mut swapped = Vec::new();
    for segment in result.segments {
        swapped.push(log.replace_with_cleaned(segment).expect("swap"));
    }
    assert_eq!(swapped.first(), Some(&false));
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.ends_with(CLEANED_SUFFIX)),
        "{names:?}"
    );
}

#[derive(Clone, Debug)]
enum Op {
    /// Write these (key, value-or-tombstone) records as one batch.
    Write(Vec<(u8, Option<u8>)>),
    /// Run a pass.
    Clean,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => prop::collection::vec((0u8..8, prop::option::weighted(0.8, any::<u8>())), 1..4).prop_map(Op::Write),
        1 => Just(Op::Clean),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    // For any sequence of keyed writes and deletes with passes in between (and a small
    // map, so passes stop where the map is full): every key's latest record is readable
    // at its original offset with its value, unless it is a tombstone past delete
    // retention (then the key is gone); below the cleaned point no older record of a key
    // survives; offsets only increase; a reopen reads the same.
    #[test]
    fn compaction_model(ops in prop::collection::vec(op(), 1..40), codec in prop::sample::select(vec![CODEC_NONE, CODEC_GZIP, CODEC_ZSTD])) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = Log::open(dir.path(), compacted_config(300)).expect("open");
        let mut cleaner = Cleaner::new(CleanerConfig { dedupe_buffer_bytes: 24 * 12, io_max_bytes_per_second: None });
        // key -> (offset, value) of its latest record.
        let mut latest: BTreeMap<u8, (i64, Option<u8>)> = BTreeMap::new();
        let mut now = 1_000;
        for op in &ops {
            match op {
                Op::Write(records) => {
                    let batch: Vec<_> = records.iter().map(|(k, v)| (vec![*k], v.map(|v| vec![v]))).collect();
                    let info = log.append(&keyed_batch(&batch, codec, None, now), 0).expect("append").appended().expect("appended");
                    for (i, (k, v)) in records.iter().enumerate() {
                        latest.insert(*k, (info.first_offset.get() + i as i64, *v));
                    }
                }
                Op::Clean => {
                    sync(&mut log);
                    now += 700;
                    run_pass(&mut log, &mut cleaner, now, true);
                }
            }
        }
        let check = |log: &Log| {
            let (rows, _) = records(log);
            let cleaned_to = read_checkpoint(log.dir()).expect("read").unwrap_or(-1);
            let offsets: Vec<i64> = rows.iter().map(|r| r.0).collect();
            prop_assert!(offsets.windows(2).all(|w| w[0] < w[1]), "offsets {:?}", offsets);
            for (key, (offset, value)) in &latest {
                let found: Vec<&Row> = rows.iter().filter(|r| r.1.as_deref() == Some(&[*key][..])).collect();
                match (found.last(), value) {
                    (Some(newest), _) => {
                        prop_assert_eq!(newest.0, *offset);
                        prop_assert_eq!(newest.2.clone(), value.map(|v| vec![v]));
                    }
                    // A deleted key may be gone entirely once its tombstone expired.
                    (None, None) => prop_assert!(*offset < cleaned_to),
                    (None, Some(_)) => prop_assert!(false, "key {} lost", key),
                }
                prop_assert!(found.iter().filter(|r| r.0 < cleaned_to).count() <= 1, "key {}: {:?}", key, found);
            }
            Ok(())
        };
        check(&log)?;
        let end = log.log_end_offset();
        log.close().expect("close");
        let log = Log::open(dir.path(), compacted_config(300)).expect("reopen");
        prop_assert_eq!(log.log_end_offset(), end);
        check(&log)?;
    }
}

/// [`keyed_batch`] as part of `producer`'s transaction (epoch 0, sequence `seq`).
fn txn_keyed_batch(records: &[(Vec<u8>, Option<Vec<u8>>)], producer: i64, seq: i32) -> Vec<u8> {
    let mut out = keyed_batch(records, CODEC_NONE, Some((producer, 0, seq)), 1_000);
    out[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

// Compaction never cleans at or above the first unstable offset (an open transaction's
// first offset): every record from there on survives a pass, while below it only the
// latest value per key stays; the aborted transaction's index entry survives the swap
// (merged into the cleaned segment's `.txnindex`) and a reopen.
#[test]
fn never_cleans_at_or_above_the_first_unstable_offset() {
    use crate::end_transaction_marker::{EndTransactionMarker, TxnResult};
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = Log::open(dir.path(), compacted_config(300)).expect("open");
    let plain = |log: &mut Log, i: usize| {
        log.append(
            &keyed_batch(&[kv("k", Some(&i.to_string()))], CODEC_NONE, None, 1_000),
            0,
        )
        .expect("append");
    };
    for i in 0..4 {
        plain(&mut log, i); // 0..4
    }
    log.append(&txn_keyed_batch(&[kv("t", Some("x"))], 9, 0), 0)
        .expect("append"); // 4
    let abort = EndTransactionMarker {
        result: TxnResult::Abort,
        coordinator_epoch: 0,
    };
    log.append_txn_marker(9, 0, abort, 0).expect("abort"); // 5
    for i in 6..10 {
        plain(&mut log, i); // 6..10
    }
    log.append(&txn_keyed_batch(&[kv("o", Some("open"))], 10, 0), 0)
        .expect("append"); // 10: stays open
    for i in 11..20 {
        plain(&mut log, i); // 11..20
    }
    sync(&mut log);
    let end = log.log_end_offset();
    assert!(log.segment_count() > 4, "{} segments", log.segment_count());
    let aborted = log.collect_aborted_transactions(Offset(0), end);
    assert_eq!(aborted.len(), 1);
    assert_eq!((aborted[0].first_offset, aborted[0].last_offset), (4, 5));

    // Markers carry the wall clock: clean as of later than that.
    let now_ms = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("ms fit i64")
        + 10_000;
    run_pass(&mut log, &mut cleaner(), now_ms, false).expect("due");
    let (rows, _) = records(&log);
    let at_or_above: Vec<i64> = rows.iter().map(|r| r.0).filter(|&o| o >= 10).collect();
    assert_eq!(
        at_or_above,
        (10..20).collect::<Vec<i64>>(),
        "nothing cleaned from 10 on"
    );
    let below_k = rows
        .iter()
        .filter(|r| r.0 < 10 && r.1.as_deref() == Some(b"k".as_slice()))
        .count();
    assert!(
        (1..8).contains(&below_k),
        "below 10 the superseded `k`s went, the latest there stays: {rows:?}"
    );
    assert_eq!(log.collect_aborted_transactions(Offset(0), end), aborted);
    log.close().expect("close");
    let mut log = Log::open(dir.path(), compacted_config(300)).expect("reopen");
    assert_eq!(log.collect_aborted_transactions(Offset(0), end), aborted);
    assert_eq!(log.first_unstable_offset(end), Some(Offset(10)));
}

mod transactions;
