//! Tests of `Log`: append/read, indexes, rolls, recovery, retention, truncation, plus a
//! proptest model test against a `Vec` of batches.

use super::*;
use crate::record_batch::{assign_offsets, validate_batches};
use crate::test_util::{batch, batch_with_timestamps};

fn open(dir: &Path, config: LogConfig) -> Log {
    Log::open(dir, config).expect("open log")
}

fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

/// Appends a batch of `records` records, returning its info and stored bytes.
fn append(
    log: &mut Log,
    records: usize,
    value_bytes: usize,
    timestamp: i64,
) -> (AppendInfo, Vec<u8>) {
    let mut b = batch(records, value_bytes, timestamp);
    validate_batches(&b).expect("test batch is valid");
    let info = log
        .append(&b, 3)
        .expect("append")
        .appended()
        .expect("not a duplicate");
    // What the log stores: the batch with its assigned offsets and leader epoch.
    assign_offsets(&mut b, info.first_offset.get(), 3);
    (info, b)
}

fn read_all(log: &Log) -> Vec<u8> {
    log.read(log.log_start_offset(), usize::MAX, Offset::MAX, true)
        .expect("read")
        .records
        .to_vec()
}

fn headers(bytes: &[u8]) -> Vec<RecordBatchHeader> {
    iter_headers(bytes).map(|(_, h)| h).collect()
}

// Offsets are assigned from the log end; reading at any offset inside a batch returns
// that whole batch first, with stored bytes identical to what was appended.
#[test]
fn append_and_read_at_any_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), LogConfig::default());
    let (a, ba) = append(&mut log, 3, 10, 100);
    let (b, bb) = append(&mut log, 5, 10, 200);
    assert_eq!(
        (
            a.first_offset.get(),
            a.last_offset.get(),
            a.log_end_offset.get()
        ),
        (0, 2, 3)
    );
    assert_eq!(
        (
            b.first_offset.get(),
            b.last_offset.get(),
            b.log_end_offset.get()
        ),
        (3, 7, 8)
    );
    assert_eq!(b.max_timestamp, 204);
    for offset in 0..3 {
        let r = log
            .read(Offset(offset), 1 << 20, Offset::MAX, false)
            .expect("read");
        assert_eq!(r.records.len(), ba.len() + bb.len());
        assert_eq!(&r.records[..ba.len()], &ba[..]);
    }
    for offset in 3..8 {
        let r = log
            .read(Offset(offset), 1 << 20, Offset::MAX, false)
            .expect("read");
        assert_eq!(&r.records[..], &bb[..]);
        assert_eq!(r.log_end_offset, 8);
    }
    assert!(log
        .read(Offset(8), 100, Offset::MAX, true)
        .expect("read")
        .records
        .is_empty());
    assert!(matches!(
        log.read(Offset(9), 100, Offset::MAX, true),
        Err(Error::OffsetOutOfRange {
            requested: 9,
            log_start_offset: 0,
            log_end_offset: 8
        })
    ));
}

// max_bytes stops before a batch that would not fit; min_one_batch returns an oversized
// first batch whole; max_offset (high watermark) excludes batches reaching it.
#[test]
fn read_limits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), LogConfig::default());
    let (_, b0) = append(&mut log, 2, 100, 0);
    let (_, b1) = append(&mut log, 2, 100, 0);
    let (_, _b2) = append(&mut log, 2, 100, 0);
    let one = b0.len();
    let r = log
        .read(Offset(0), one + b1.len() - 1, Offset::MAX, false)
        .expect("read");
    assert_eq!(r.records.len(), one);
    let r = log
        .read(Offset(0), one - 1, Offset::MAX, false)
        .expect("read");
    assert!(r.records.is_empty());
    let r = log.read(Offset(0), 1, Offset::MAX, true).expect("read");
    assert_eq!(&r.records[..], &b0[..]);
    // High watermark 3 is inside the second batch (offsets 2..=3): only the first.
    let r = log.read(Offset(0), 1 << 20, Offset(3), true).expect("read");
    assert_eq!(headers(&r.records).len(), 1);
    let r = log.read(Offset(0), 1 << 20, Offset(4), true).expect("read");
    assert_eq!(headers(&r.records).len(), 2);
    assert!(log
        .read(Offset(2), 1 << 20, Offset(3), true)
        .expect("read")
        .records
        .is_empty());
    assert!(log
        .read(Offset(4), 1 << 20, Offset(4), true)
        .expect("read")
        .records
        .is_empty());
}

// Many batches across several segments: every offset finds its batch through the
// index, reads span segments, and the index is actually sparse.
#[test]
fn index_lookups_across_many_batches_and_segments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(
        dir.path(),
        LogConfig {
            segment_bytes: 64 * 1024,
            index_interval_bytes: 1024,
            ..LogConfig::default()
        },
    );
    let mut bases = Vec::new();
    for i in 0..600 {
        let (info, _) = append(&mut log, 1 + i % 4, 20 + i % 50, i as i64);
        bases.push((info.first_offset.get(), info.last_offset.get()));
    }
    assert!(log.segment_count() > 1, "expected several segments");
    // Inactive segments' indexes are read from their files, not held in memory.
    assert_eq!(log.inactive_resident_index_entries(), 0);
    for &(first, last) in &bases {
        for offset in [first, last] {
            let r = log
                .read(Offset(offset), 300, Offset::MAX, true)
                .expect("read");
            let h = headers(&r.records);
            assert_eq!(h[0].base_offset, first, "offset {offset}");
        }
    }
    // The same after a clean reopen and after crash recovery.
    let config = log.config().clone();
    log.close().expect("close");
    let check = |log: &Log, what: &str| {
        assert_eq!(log.inactive_resident_index_entries(), 0, "{what}");
        for &(first, last) in &bases {
            let r = log
                .read(Offset(last), 300, Offset::MAX, true)
                .expect("read");
            assert_eq!(headers(&r.records)[0].base_offset, first, "{what}");
        }
    };
    let log = open(dir.path(), config.clone());
    check(&log, "clean reopen");
    drop(log); // crash
    let log = open(dir.path(), config);
    check(&log, "recovered");
    let all = read_all(&log);
    let hs = headers(&all);
    assert_eq!(hs.len(), 600);
    assert!(hs
        .windows(2)
        .all(|w| w[0].last_offset() + 1 == w[1].base_offset));
}

// read_slices tells the offset after the batches it selected (what a consumer's next
// fetch starts from) for reads of every size, within a segment and across segments, with
// and without a high watermark.
#[test]
fn slice_reads_know_their_next_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(
        dir.path(),
        LogConfig {
            segment_bytes: 16 * 1024,
            index_interval_bytes: 512,
            ..LogConfig::default()
        },
    );
    let mut last = Vec::new();
    for i in 0..300 {
        let (info, _) = append(&mut log, 1 + i % 3, 30 + i % 40, i as i64);
        last.push(info.last_offset.get());
    }
    assert!(log.segment_count() > 2, "expected several segments");
    let end = log.end();
    for &start in &[0, 1, 57, 200, last[250]] {
        for &max_bytes in &[1, 100, 700, 5000, 20_000, 100_000] {
            for &hw in &[Offset::MAX, Offset(end - 10)] {
                let read = log
                    .read_slices(Offset(start), max_bytes, hw, true)
                    .expect("read");
                if read.bytes == 0 {
                    assert_eq!(read.next_offset, None);
                    continue;
                }
                let bytes = log
                    .read(Offset(start), max_bytes, hw, true)
                    .expect("read")
                    .records;
                let expected = headers(&bytes).last().expect("a batch").last_offset() + 1;
                assert_eq!(
                    read.next_offset,
                    Some(Offset(expected)),
                    "start {start} max_bytes {max_bytes} hw {hw:?}"
                );
            }
        }
    }
}

// A segment rolls when the next append would exceed segment_bytes.
#[test]
fn rolls_by_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), small_config());
    let (_, b) = append(&mut log, 1, 1000, 0);
    let per = b.len();
    let fit = 4096 / per;
    for _ in 1..fit {
        append(&mut log, 1, 1000, 0);
    }
    assert_eq!(log.segment_count(), 1);
    append(&mut log, 1, 1000, 0);
    assert_eq!(log.segment_count(), 2);
    assert!(dir.path().join(format!("{:020}.log", fit)).exists());
    assert!(dir.path().join(format!("{:020}.timeindex", fit)).exists());
}

// A segment whose batches carry no timestamp rolls once its first append is older than
// segment_ms by the wall clock.
#[test]
fn rolls_by_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(
        dir.path(),
        LogConfig {
            segment_ms: 1000,
            ..LogConfig::default()
        },
    );
    let b = batch(1, 10, -1);
    log.append_at(&b, 0, 10_000).expect("append");
    let b = batch(1, 10, -1);
    log.append_at(&b, 0, 10_900).expect("append");
    assert_eq!(log.segment_count(), 1);
    let b = batch(1, 10, -1);
    log.append_at(&b, 0, 11_001).expect("append");
    assert_eq!(log.segment_count(), 2);
    let b = batch(1, 10, -1);
    log.append_at(&b, 0, 11_500).expect("append");
    assert_eq!(log.segment_count(), 2);
}

// With timestamps, Kafka's rule: an append rolls when its largest timestamp is more than
// segment_ms past the segment's first batch's, whatever the wall clock says (records
// stamped long ago, then a current one, roll so the old ones can expire on their own);
// after a reopen the first batch's timestamp is read back from the file.
#[test]
fn rolls_by_record_timestamps() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        segment_ms: 1000,
        ..LogConfig::default()
    };
    let mut log = open(dir.path(), config.clone());
    // Records of long ago, appended a wall-clock hour apart: no roll.
    log.append_at(&batch(2, 10, 10_000), 0, 5_000_000)
        .expect("append");
    log.append_at(&batch(1, 10, 10_900), 0, 8_600_000)
        .expect("append");
    assert_eq!(log.segment_count(), 1);
    // A record stamped 1,001 ms after the first batch's largest (10,001): a roll.
    log.append_at(&batch(1, 10, 11_002), 0, 8_600_001)
        .expect("append");
    assert_eq!(log.segment_count(), 2);
    log.append_at(&batch(1, 10, 11_500), 0, 8_600_002)
        .expect("append");
    assert_eq!(log.segment_count(), 2);
    drop(log);
    let mut log = open(dir.path(), config);
    log.append_at(&batch(1, 10, 12_002), 0, 8_600_003)
        .expect("append");
    assert_eq!(log.segment_count(), 2, "1,000 ms past 11,002: no roll");
    log.append_at(&batch(1, 10, 12_003), 0, 8_600_004)
        .expect("append");
    assert_eq!(
        log.segment_count(),
        3,
        "1,001 ms past 11,002, read back from the file"
    );
}

// An index holding segment_index_bytes of entries forces a roll.
#[test]
fn rolls_when_index_full() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(
        dir.path(),
        LogConfig {
            index_interval_bytes: 0,
            segment_index_bytes: 8 * 4,
            ..LogConfig::default()
        },
    );
    for _ in 0..4 {
        append(&mut log, 1, 1, 0);
    }
    assert_eq!(log.segment_count(), 1);
    append(&mut log, 1, 1, 0);
    assert_eq!(log.segment_count(), 2);
}

fn fill(log: &mut Log, n: usize) {
    for i in 0..n {
        append(log, 1 + i % 3, 30 + i % 40, 1000 + i as i64);
    }
}

// Reopening after close (trusted checkpoint) and after a drop without close (recovery
// scan) gives the same log end and the same bytes.
#[test]
fn reopen_clean_and_after_crash_agree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), small_config());
    fill(&mut log, 100);
    let end = log.log_end_offset().get();
    let bytes = read_all(&log);
    log.close().expect("close");
    assert!(dir.path().join(CLEAN_SHUTDOWN_FILE).exists());

    let log = open(dir.path(), small_config());
    assert!(
        !dir.path().join(CLEAN_SHUTDOWN_FILE).exists(),
        "marker consumed"
    );
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(read_all(&log), bytes);
    drop(log);

    let mut log = open(dir.path(), small_config());
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(read_all(&log), bytes);
    let (info, _) = append(&mut log, 2, 5, 0);
    assert_eq!(info.first_offset, end);
}

fn last_segment_path(dir: &Path) -> PathBuf {
    let mut logs: Vec<_> = fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs.pop().expect("a segment")
}

// Cutting the last segment at every byte of its final batch, or appending garbage,
// reopens at the last whole batch, with a working index, and appends continue.
#[test]
fn torn_tail_every_byte_and_garbage() {
    let src = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        index_interval_bytes: 100,
        ..LogConfig::default()
    };
    let mut log = open(src.path(), config.clone());
    fill(&mut log, 20);
    let before_last = log.log_end_offset().get();
    let prefix = read_all(&log);
    let (_, last) = append(&mut log, 3, 40, 5);
    drop(log);
    let seg = last_segment_path(src.path());
    let full = fs::read(&seg).expect("read");
    assert_eq!(full.len(), prefix.len() + last.len());

    let cuts: Vec<Option<usize>> = (0..last.len()).map(Some).chain([None]).collect();
    for cut in cuts {
        let dir = tempfile::tempdir().expect("tempdir");
        for entry in fs::read_dir(src.path()).expect("read dir") {
            let path = entry.expect("entry").path();
            fs::copy(&path, dir.path().join(path.file_name().expect("name"))).expect("copy");
        }
        let seg = dir.path().join(seg.file_name().expect("name"));
        let mut data = full.clone();
        match cut {
            Some(n) => data.truncate(prefix.len() + n),
            None => data.extend([
                0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ]),
        }
        fs::write(&seg, &data).expect("write");
        let mut log = open(dir.path(), config.clone());
        let expected_end = if cut.is_none() {
            before_last + 3
        } else {
            before_last
        };
        assert_eq!(log.log_end_offset(), expected_end, "cut {cut:?}");
        for offset in 0..expected_end {
            let r = log
                .read(Offset(offset), 1 << 20, Offset::MAX, true)
                .expect("read");
            assert!(headers(&r.records)[0].last_offset() >= offset);
        }
        let (info, b) = append(&mut log, 2, 7, 0);
        assert_eq!(info.first_offset, expected_end);
        let r = log
            .read(Offset(expected_end + 1), 1 << 20, Offset::MAX, true)
            .expect("read");
        assert_eq!(&r.records[..], &b[..]);
        drop(log);
        let log = open(dir.path(), config.clone());
        assert_eq!(log.log_end_offset(), expected_end + 2);
    }
}

// A flipped byte inside a middle batch fails its CRC: recovery truncates from that batch.
#[test]
fn flipped_byte_truncates_from_that_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), LogConfig::default());
    let (_, b0) = append(&mut log, 2, 20, 0);
    let (mid, b1) = append(&mut log, 2, 20, 0);
    append(&mut log, 2, 20, 0);
    drop(log);
    let seg = last_segment_path(dir.path());
    let mut data = fs::read(&seg).expect("read");
    data[b0.len() + b1.len() / 2] ^= 0x40;
    fs::write(&seg, &data).expect("write");
    let log = open(dir.path(), LogConfig::default());
    assert_eq!(log.log_end_offset(), mid.first_offset);
    assert_eq!(read_all(&log), b0);
    assert_eq!(fs::metadata(&seg).expect("meta").len(), b0.len() as u64);
}

// A flipped byte in a batch of an earlier segment after an unclean stop: the segment
// is cut there and later segments are deleted (never serve past corrupt data).
#[test]
fn corruption_in_earlier_segment_deletes_later_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), small_config());
    fill(&mut log, 60);
    assert!(log.segment_count() >= 3);
    drop(log);
    // Without a recovery point, recovery scans every segment (a new log has none yet).
    let _ = fs::remove_file(dir.path().join(RECOVERY_POINT_FILE));
    assert!(!dir.path().join(RECOVERY_POINT_FILE).exists());
    let first = dir.path().join(format!("{:020}.log", 0));
    let mut data = fs::read(&first).expect("read");
    let hs: Vec<_> = iter_headers(&data).collect();
    let (pos, h) = hs[2];
    data[pos + 70] ^= 1;
    fs::write(&first, &data).expect("write");
    let log = open(dir.path(), small_config());
    assert_eq!(log.log_end_offset(), h.base_offset);
    assert_eq!(log.segment_count(), 1);
}

// Missing or damaged index files are rebuilt and lookups still work.
#[test]
fn missing_or_damaged_index_is_rebuilt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        index_interval_bytes: 128,
        segment_bytes: 8192,
        ..LogConfig::default()
    };
    let mut log = open(dir.path(), config.clone());
    fill(&mut log, 120);
    let bytes = read_all(&log);
    let end = log.log_end_offset().get();
    log.close().expect("close");
    let index0 = dir.path().join(format!("{:020}.index", 0));
    let len = fs::metadata(&index0).expect("meta").len();
    assert!(len > 0);
    fs::remove_file(&index0).expect("rm");
    let time0 = dir.path().join(format!("{:020}.timeindex", 0));
    let mut t = fs::read(&time0).expect("read");
    t.truncate(t.len() - 5);
    fs::write(&time0, &t).expect("write");
    let last_index = last_segment_path(dir.path()).with_extension("index");
    fs::write(&last_index, [0xff; 16]).expect("write");

    let log = open(dir.path(), config.clone());
    assert_eq!(fs::metadata(&index0).expect("rebuilt").len(), len);
    assert_eq!(fs::metadata(&time0).expect("rebuilt").len() % 12, 0);
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(read_all(&log), bytes);
    for offset in 0..end {
        let r = log
            .read(Offset(offset), 1, Offset::MAX, true)
            .expect("read");
        let h = headers(&r.records);
        assert!(h[0].base_offset <= offset && offset <= h[0].last_offset());
    }
}

// An empty directory opens as an empty log; reads at 0 are empty, and a nonexistent
// directory is created.
#[test]
fn empty_dir() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("topic-0");
    let log = open(&path, LogConfig::default());
    assert_eq!(
        (log.log_start_offset().get(), log.log_end_offset().get()),
        (0, 0)
    );
    assert!(log
        .read(Offset(0), 100, Offset::MAX, true)
        .expect("read")
        .records
        .is_empty());
    assert_eq!(
        log.batch_with_max_timestamp(Offset::MAX).expect("scan"),
        None
    );
    assert_eq!(log.batch_for_timestamp(0, Offset::MAX).expect("scan"), None);
    log.close().expect("close");
    let log = open(&path, LogConfig::default());
    assert_eq!(log.log_end_offset(), 0);
    log.delete().expect("delete");
    assert!(!path.exists());
}

// batch_for_timestamp finds the first batch reaching a timestamp (using the time index
// across segments) and honours max_offset; batch_with_max_timestamp picks the earliest
// batch with the largest max timestamp.
#[test]
fn timestamp_lookups() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(
        dir.path(),
        LogConfig {
            segment_bytes: 2048,
            index_interval_bytes: 100,
            ..LogConfig::default()
        },
    );
    // Batch i has max timestamp 10 * i, except batch 30 jumps to 10_000 and batch 35 ties.
    let mut first_offsets = Vec::new();
    for i in 0..50i64 {
        let max = match i {
            30 | 35 => 10_000,
            _ => 10 * i,
        };
        let b = batch_with_timestamps(2, 20, 10 * i, Some(max));
        first_offsets.push(
            log.append(&b, 0)
                .expect("append")
                .appended()
                .expect("appended")
                .first_offset
                .get(),
        );
    }
    assert!(log.segment_count() > 2);
    let base_of = |b: Option<Bytes>| b.map(|b| headers(&b)[0].base_offset);
    assert_eq!(
        base_of(log.batch_for_timestamp(0, Offset::MAX).expect("ts")),
        Some(0)
    );
    assert_eq!(
        base_of(log.batch_for_timestamp(95, Offset::MAX).expect("ts")),
        Some(first_offsets[10])
    );
    assert_eq!(
        base_of(log.batch_for_timestamp(100, Offset::MAX).expect("ts")),
        Some(first_offsets[10])
    );
    assert_eq!(
        base_of(log.batch_for_timestamp(301, Offset::MAX).expect("ts")),
        Some(first_offsets[30])
    );
    assert_eq!(
        base_of(log.batch_for_timestamp(10_001, Offset::MAX).expect("ts")),
        None
    );
    assert_eq!(
        base_of(
            log.batch_for_timestamp(301, Offset(first_offsets[30] + 1))
                .expect("ts")
        ),
        None
    );
    assert_eq!(
        base_of(log.batch_with_max_timestamp(Offset::MAX).expect("max")),
        Some(first_offsets[30])
    );
    assert_eq!(
        base_of(
            log.batch_with_max_timestamp(Offset(first_offsets[30] + 1))
                .expect("max")
        ),
        Some(first_offsets[29])
    );
    assert_eq!(
        base_of(
            log.batch_with_max_timestamp(Offset(first_offsets[30] + 2))
                .expect("max")
        ),
        Some(first_offsets[30])
    );
    // Still right after a clean reopen and after crash recovery.
    log.close().expect("close");
    let log = open(dir.path(), LogConfig::default());
    assert_eq!(
        base_of(log.batch_for_timestamp(301, Offset::MAX).expect("ts")),
        Some(first_offsets[30])
    );
    assert_eq!(
        base_of(log.batch_with_max_timestamp(Offset::MAX).expect("max")),
        Some(first_offsets[30])
    );
    drop(log);
    let log = open(dir.path(), LogConfig::default());
    assert_eq!(
        base_of(log.batch_for_timestamp(95, Offset::MAX).expect("ts")),
        Some(first_offsets[10])
    );
    assert_eq!(
        base_of(log.batch_with_max_timestamp(Offset::MAX).expect("max")),
        Some(first_offsets[30])
    );
}

// DeleteRecords raises the log start (reads below it fail), deletes whole segments
// below it, and survives a restart.
#[test]
fn delete_records_before() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), small_config());
    fill(&mut log, 60);
    let segments = log.segment_count();
    let end = log.log_end_offset().get();
    assert!(matches!(
        log.delete_records_before(Offset(end + 1)),
        Err(Error::OffsetOutOfRange { .. })
    ));
    let target = end / 2 + 1;
    log.delete_records_before(Offset(target)).expect("delete");
    assert_eq!(log.log_start_offset(), target);
    assert!(log.segment_count() < segments);
    assert!(matches!(
        log.read(Offset(target - 1), 100, Offset::MAX, true),
        Err(Error::OffsetOutOfRange { .. })
    ));
    let r = log
        .read(Offset(target), 100, Offset::MAX, true)
        .expect("read");
    assert!(headers(&r.records)[0].last_offset() >= target);
    drop(log);
    let log = open(dir.path(), small_config());
    assert_eq!(log.log_start_offset(), target);
    assert_eq!(log.log_end_offset(), end);
    let mut log = log;
    log.delete_records_before(Offset(end)).expect("delete all");
    assert_eq!(log.log_start_offset(), end);
    assert!(log
        .read(Offset(end), 100, Offset::MAX, true)
        .expect("read")
        .records
        .is_empty());
}

// Retention by time removes old segments (never the active one); by bytes removes the
// oldest until the log fits.
#[test]
fn retention_by_time_and_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(
        dir.path(),
        LogConfig {
            retention_ms: 1000,
            ..small_config()
        },
    );
    for i in 0..60 {
        append(&mut log, 1, 200, i * 100);
    }
    let segments = log.segment_count();
    assert!(segments >= 4);
    assert_eq!(log.apply_retention(0).expect("retention"), 0);
    let removed = log.apply_retention(5_000).expect("retention");
    assert!(removed >= 1 && removed < segments);
    assert!(log.log_start_offset() > Offset(0));
    let removed_all = log.apply_retention(i64::MAX / 2).expect("retention");
    assert_eq!(log.segment_count(), 1);
    assert!(removed_all >= 1);
    assert_eq!(log.log_end_offset(), 60);

    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(
        dir.path(),
        LogConfig {
            retention_ms: -1,
            retention_bytes: 10_000,
            ..small_config()
        },
    );
    for _ in 0..100 {
        append(&mut log, 1, 200, 0);
    }
    assert!(log.size_bytes() > 10_000);
    let removed = log.apply_retention(0).expect("retention");
    assert!(removed > 0);
    assert!(log.size_bytes() <= 10_000 + 4096);
    assert!(log.size_bytes() >= 10_000);
    assert_eq!(log.apply_retention(0).expect("retention"), 0);
}

// truncate_to removes the batch holding the offset and everything after; appends
// continue from the new end, also across segments and after reopening.
#[test]
fn truncate_to() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), small_config());
    let mut infos = Vec::new();
    for i in 0..60 {
        infos.push(append(&mut log, 2, 60, i).0);
    }
    let target = infos[20].first_offset.get() + 1; // inside batch 20
    log.truncate_to(Offset(target)).expect("truncate");
    assert_eq!(log.log_end_offset(), infos[20].first_offset);
    let all = read_all(&log);
    assert_eq!(headers(&all).len(), 20);
    let (info, _) = append(&mut log, 1, 5, 0);
    assert_eq!(info.first_offset, infos[20].first_offset);
    drop(log);
    let mut log = open(dir.path(), small_config());
    assert_eq!(log.log_end_offset(), infos[20].first_offset.next());
    log.truncate_to(Offset(0)).expect("truncate");
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.segment_count(), 1);
    append(&mut log, 1, 5, 0);
    assert_eq!(log.log_end_offset(), 1);
}

// The sync handle covers unsynced segments; marking durable advances the recovery
// point and a later crash recovery only has to scan from there.
#[test]
fn sync_handle_and_recovery_point() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), small_config());
    fill(&mut log, 40);
    let handle = log.sync_handle().expect("sync handle");
    assert_eq!(handle.end_offset(), log.log_end_offset());
    assert!(handle.files.len() > 1, "rolled unsynced segments included");
    let durable = handle.sync().expect("sync");
    log.mark_durable(durable);
    assert_eq!(log.recovery_point(), durable.durable_offset);
    assert_eq!(log.sync_handle().expect("sync handle").files.len(), 0);
    append(&mut log, 1, 1, 0);
    assert_eq!(log.sync_handle().expect("sync handle").files.len(), 1);
    let rp = checkpoint::read(dir.path(), RECOVERY_POINT_FILE, 1)
        .expect("read")
        .expect("present");
    assert!(rp[0] > 0);
}

// The write-out head start covers exactly the files the next sync will fsync: every
// segment with appends above the recovery point, and none once they are durable.
#[test]
fn writeback_handle_names_the_files_the_sync_would() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), small_config());
    fill(&mut log, 40);
    let writeback = log.writeback_handle();
    writeback.start();
    let handle = log.sync_handle().expect("sync handle");
    assert!(handle.files.len() > 1, "rolled unsynced segments included");
    let same = |a: &Arc<File>, b: &Arc<File>| Arc::ptr_eq(a, b);
    assert_eq!(writeback.files.len(), handle.files.len());
    assert!(writeback
        .files
        .iter()
        .zip(&handle.files)
        .all(|(a, b)| same(a, b)));
    let durable = handle.sync().expect("sync");
    log.mark_durable(durable);
    assert!(log.writeback_handle().files.is_empty());
    append(&mut log, 1, 1, 0);
    assert_eq!(log.writeback_handle().files.len(), 1);
}

// Appending bytes that are not whole batches is refused without writing.
#[test]
fn append_rejects_partial_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), LogConfig::default());
    let mut b = batch(2, 10, 0);
    b.truncate(b.len() - 1);
    assert!(matches!(log.append(&b, 0), Err(Error::CorruptBatch { .. })));
    assert!(matches!(
        log.append(&[], 0),
        Err(Error::CorruptBatch { .. })
    ));
    assert_eq!(log.log_end_offset(), 0);
}

// The broker shares a Log behind a mutex across tasks and sends SyncHandles to a
// flusher: the types must allow it.
#[test]
fn thread_safety_markers() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Log>();
    send::<SyncHandle>();
}

// After a clean reopen the marker is gone: appends followed by a crash are recovered
// (the stale checkpoint values are not trusted).
#[test]
fn crash_after_clean_reopen_recovers_new_appends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), small_config());
    fill(&mut log, 30);
    log.close().expect("close");
    let mut log = open(dir.path(), small_config());
    fill(&mut log, 30);
    let end = log.log_end_offset().get();
    let bytes = read_all(&log);
    drop(log);
    let seg = last_segment_path(dir.path());
    let mut data = fs::read(&seg).expect("read");
    data.extend([7u8; 30]);
    fs::write(&seg, &data).expect("write");
    let log = open(dir.path(), small_config());
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(read_all(&log), bytes);
}

mod faults;
mod model;
mod producers;
mod retention;
mod transactions;
mod txn_model;

// Space reserved ahead of the active segment never shows in the file size (which readers
// and recovery trust), survives a crash harmlessly, and is released on close.
#[test]
fn preallocation_never_changes_the_file_size_and_is_released_on_close() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        preallocate_bytes_max: 1 << 20,
        ..LogConfig::default()
    };
    let segment = dir.path().join("00000000000000000000.log");
    let mut log = open(dir.path(), config.clone());
    let mut stored = Vec::new();
    for _ in 0..20 {
        let (_, b) = append(&mut log, 5, 100, 1);
        stored.extend(b);
        let meta = std::fs::metadata(&segment).expect("segment");
        assert_eq!(meta.len(), stored.len() as u64, "size is the bytes written");
    }
    drop(log); // crash: the reserve stays on disk past the end
    let log = open(dir.path(), config.clone());
    assert_eq!(
        read_all(&log),
        stored,
        "recovery sees exactly what was written"
    );
    log.close().expect("close");
    let meta = std::fs::metadata(&segment).expect("segment");
    assert_eq!(meta.len(), stored.len() as u64);
    assert!(
        meta.blocks() * 512 < meta.len() + 64 * 1024,
        "{} bytes allocated for {} bytes after close",
        meta.blocks() * 512,
        meta.len()
    );
    let log = open(dir.path(), config);
    assert_eq!(read_all(&log), stored);
}

// Each sync drops from the page cache what lies more than page_cache_tail_bytes behind
// the active segment's end, once, in ranges of at least 1 MiB; data stays readable.
#[test]
fn syncs_drop_all_but_the_page_cache_tail() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        page_cache_tail_bytes: 1 << 20,
        ..LogConfig::default()
    };
    let mut log = open(dir.path(), config);
    let mut stored = Vec::new();
    while stored.len() < (3 << 20) + 1000 {
        let (_, b) = append(&mut log, 10, 10_000, 1);
        stored.extend(b);
    }
    let size = stored.len() as u64;
    let handle = log.sync_handle().expect("sync handle");
    assert_eq!(handle.drop_range(), Some((0, (size - (1 << 20)) as usize)));
    handle.sync().expect("sync");
    assert_eq!(
        log.sync_handle().expect("sync handle").drop_range(),
        None,
        "nothing new to drop"
    );
    while (stored.len() as u64) < size + (1 << 20) + 1000 {
        let (_, b) = append(&mut log, 10, 10_000, 1);
        stored.extend(b);
    }
    let handle = log.sync_handle().expect("sync handle");
    let (from, len) = handle.drop_range().expect("a second range");
    assert_eq!(from, size - (1 << 20), "continues where the last one ended");
    assert_eq!(from + len as u64, stored.len() as u64 - (1 << 20));
    handle.sync().expect("sync");
    assert_eq!(read_all(&log), stored);
}
