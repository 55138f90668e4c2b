//! Retention and DeleteRecords as Kafka's `UnifiedLog.deleteOldSegments` applies them:
//! the active segment counts, the high watermark bounds every deletion, and the log start
//! is checkpointed before files go.

use super::*;

fn segment_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    names.sort();
    names
}

// An idle log whose only (active) segment expired loses it all once the high watermark
// covers it: a new empty segment starts at the log end, which becomes the log start, and
// appends continue at the same offsets; the log start survives a reopen without close.
#[test]
fn expired_active_segment_is_rolled_and_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig {
        retention_ms: 1000,
        ..LogConfig::default()
    };
    let mut log = open(dir.path(), config.clone());
    append(&mut log, 10, 20, 100);
    assert_eq!(log.segment_count(), 1);
    // Not expired yet.
    assert!(log
        .take_retention_deletion(1100, Offset(10))
        .expect("retention")
        .is_none());
    // Expired, but the high watermark is below the log end: nothing may go.
    assert!(log
        .take_retention_deletion(5_000, Offset(9))
        .expect("retention")
        .is_none());
    let deletion = log
        .take_retention_deletion(5_000, Offset(10))
        .expect("retention")
        .expect("the expired active segment goes");
    assert_eq!(deletion.segment_count(), 1);
    assert_eq!(deletion.log_start_offset(), 10);
    assert_eq!(log.log_start_offset(), 10);
    assert_eq!(log.log_end_offset(), 10);
    assert_eq!(log.segment_count(), 1);
    deletion.run().expect("run");
    assert_eq!(segment_files(dir.path()), vec![format!("{:020}.log", 10)]);
    // An empty active segment is never deletable.
    assert!(log
        .take_retention_deletion(i64::MAX / 2, Offset(10))
        .expect("retention")
        .is_none());
    let (info, _) = append(&mut log, 2, 20, 6_000);
    assert_eq!(info.first_offset, 10);
    drop(log);
    let log = open(dir.path(), config);
    assert_eq!(log.log_start_offset(), 10);
    assert_eq!(log.log_end_offset(), 12);
}

// Expired segments go oldest first, but never one holding data at or above the high
// watermark: the deletion stops at the first segment whose upper bound passes it.
#[test]
fn retention_never_passes_the_high_watermark() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(
        dir.path(),
        LogConfig {
            retention_ms: 0,
            ..small_config()
        },
    );
    for _ in 0..12 {
        append(&mut log, 1, 1000, 0);
    }
    let bases: Vec<i64> = log.segments.iter().map(LogSegment::base_offset).collect();
    assert!(bases.len() >= 3, "segments {bases:?}");
    let hw = bases[2]; // segments 0 and 1 are wholly below it
    let deletion = log
        .take_retention_deletion(10, Offset(hw))
        .expect("retention")
        .expect("two segments go");
    assert_eq!(deletion.segment_count(), 2);
    deletion.run().expect("run");
    assert_eq!(log.log_start_offset(), bases[2]);
    assert!(log
        .take_retention_deletion(10, Offset(hw))
        .expect("retention")
        .is_none());
}

// retention.bytes counts the active segment: with a limit of 0 everything goes; with a
// limit the oldest segments go while what is left stays at or above it.
#[test]
fn retention_bytes_counts_the_active_segment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(
        dir.path(),
        LogConfig {
            retention_bytes: 0,
            ..LogConfig::default()
        },
    );
    append(&mut log, 3, 100, 0);
    assert_eq!(log.apply_retention(0).expect("retention"), 1);
    assert_eq!(log.log_start_offset(), 3);
    assert_eq!(log.size_bytes(), 0);

    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), small_config());
    for _ in 0..12 {
        append(&mut log, 1, 1000, 0);
    }
    let sizes: Vec<u64> = log.segments.iter().map(|s| u64::from(s.size())).collect();
    let keep: u64 = sizes.iter().rev().take(2).sum();
    log.set_config(LogConfig {
        retention_bytes: i64::try_from(keep).expect("small"),
        ..small_config()
    });
    assert_eq!(log.apply_retention(0).expect("retention"), sizes.len() - 2);
    assert_eq!(log.size_bytes(), keep);
}

// DeleteRecords raises the log start inside a segment; the segments wholly below it go
// at once, the one holding it stays; the checkpoint is written before the files go.
#[test]
fn log_start_deletion_removes_whole_segments_below() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), small_config());
    for _ in 0..12 {
        append(&mut log, 1, 1000, 0);
    }
    let bases: Vec<i64> = log.segments.iter().map(LogSegment::base_offset).collect();
    let target = bases[2] + 1;
    let deletion = log
        .take_log_start_deletion(Offset(target))
        .expect("delete")
        .expect("raised");
    assert_eq!(deletion.segment_count(), 2);
    assert_eq!(log.log_start_offset(), target);
    deletion.run().expect("run");
    assert_eq!(
        checkpoint::read(dir.path(), LOG_START_OFFSET_FILE, 1).expect("read"),
        Some(vec![target])
    );
    assert!(log
        .take_log_start_deletion(Offset(target))
        .expect("same")
        .is_none());
    assert!(matches!(
        log.take_log_start_deletion(log.log_end_offset().next()),
        Err(Error::OffsetOutOfRange { .. })
    ));
    drop(log);
    let log = open(dir.path(), small_config());
    assert_eq!(log.log_start_offset(), target);
}

// `segment.ms` rolls an idle active segment at the retention check, not only on the next
// append: the log gains a new empty active segment and loses nothing; a younger or empty
// active segment stays.
#[test]
fn segment_ms_rolls_an_idle_active_segment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(
        dir.path(),
        LogConfig {
            segment_ms: 1_000,
            retention_ms: -1,
            ..LogConfig::default()
        },
    );
    let b = batch(3, 10, 100);
    log.append_at(&b, 0, 10_000).expect("append");
    assert!(log
        .take_retention_deletion(10_500, Offset(3))
        .expect("check")
        .is_none());
    assert_eq!(log.segment_count(), 1, "younger than segment.ms");
    assert!(log
        .take_retention_deletion(11_001, Offset(3))
        .expect("check")
        .is_none());
    assert_eq!(log.segment_count(), 2, "rolled on time");
    assert_eq!(
        (log.log_start_offset(), log.log_end_offset()),
        (Offset(0), Offset(3))
    );
    assert!(log.has_roll_work());
    log.take_retention_deletion(20_000, Offset(3))
        .expect("check");
    assert_eq!(
        log.segment_count(),
        2,
        "an empty active segment never rolls"
    );
}
