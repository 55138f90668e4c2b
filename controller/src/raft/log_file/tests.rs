use super::*;

const MB: u64 = 1 << 20;

fn body(i: u64) -> Vec<u8> {
    format!("{{\"entry\":{i}}}").into_bytes()
}

fn entries(range: std::ops::Range<u64>) -> Vec<(u64, Vec<u8>)> {
    range.map(|i| (i, body(i))).collect()
}

// Appended entries read back after a reopen, across segment rolls.
#[test]
fn append_read_reopen_across_segments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = LogFile::open(dir.path(), 100, 1 << 20).expect("open");
    log.append(&entries(0..10)).expect("append");
    assert!(log.segments.len() > 1, "segments rolled at 100 bytes");
    drop(log);
    let log = LogFile::open(dir.path(), 100, 1 << 20).expect("reopen");
    assert_eq!(log.first_index(), Some(0));
    assert_eq!(log.last_index(), Some(9));
    assert_eq!(log.read(3, 6).expect("read"), entries(3..6));
    assert_eq!(log.read(0, 100).expect("read"), entries(0..10));
}

// A frame cut at any byte, or followed by garbage, is dropped on reopen and the log ends
// at the last whole entry; appends continue from there.
#[test]
fn torn_tail_is_dropped_at_every_cut() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = LogFile::open(dir.path(), MB, 1 << 20).expect("open");
    log.append(&entries(0..3)).expect("append");
    let path = segment_path(dir.path(), 0);
    let whole = fs::read(&path).expect("read segment");
    let last_frame = FRAME_HEADER_BYTES + body(2).len();
    let keep = whole.len() - last_frame;
    drop(log);
    for cut in keep..whole.len() {
        fs::write(&path, &whole[..cut]).expect("cut");
        let log = LogFile::open(dir.path(), MB, 1 << 20).expect("reopen");
        assert_eq!(log.last_index(), Some(1), "cut at {cut}");
        assert_eq!(fs::metadata(&path).expect("meta").len(), keep as u64);
    }
    let mut garbage = whole.clone();
    garbage.extend_from_slice(&[0xAB; 40]);
    fs::write(&path, &garbage).expect("garbage");
    let mut log = LogFile::open(dir.path(), MB, 1 << 20).expect("reopen");
    assert_eq!(log.last_index(), Some(2));
    log.append(&entries(3..4)).expect("append after recovery");
    drop(log);
    let log = LogFile::open(dir.path(), MB, 1 << 20).expect("reopen");
    assert_eq!(log.read(0, 10).expect("read"), entries(0..4));
}

// A flipped bit in the middle entry ends the log before it: later entries are not
// trusted (they were never acknowledged if the disk lost the earlier one).
#[test]
fn corrupt_middle_entry_ends_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = LogFile::open(dir.path(), MB, 1 << 20).expect("open");
    log.append(&entries(5..8)).expect("append");
    drop(log);
    let path = segment_path(dir.path(), 5);
    let mut bytes = fs::read(&path).expect("read");
    let second_body = 2 * FRAME_HEADER_BYTES + body(5).len();
    bytes[second_body] ^= 0x01;
    fs::write(&path, &bytes).expect("write");
    let log = LogFile::open(dir.path(), MB, 1 << 20).expect("reopen");
    assert_eq!((log.first_index(), log.last_index()), (Some(5), Some(5)));
}

// Truncate removes the tail durably, across segments; purge hides the head and deletes
// whole segments only.
#[test]
fn truncate_and_purge() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = LogFile::open(dir.path(), 100, 1 << 20).expect("open");
    log.append(&entries(0..20)).expect("append");
    log.truncate(12).expect("truncate");
    assert_eq!(log.last_index(), Some(11));
    log.append(&[(12, b"\"new\"".to_vec())])
        .expect("append after truncate");
    log.purge(6).expect("purge");
    assert_eq!(log.first_index(), Some(7));
    let segments_before = fs::read_dir(dir.path()).expect("ls").count();
    drop(log);
    let mut log = LogFile::open(dir.path(), 100, 1 << 20).expect("reopen");
    // The purge point is the store's checkpoint; the file alone may still hold a few.
    log.purge(6).expect("purge again");
    assert_eq!(
        fs::read_dir(dir.path()).expect("ls").count(),
        segments_before
    );
    assert_eq!(log.first_index(), Some(7));
    assert_eq!(log.last_index(), Some(12));
    let read = log.read(0, 100).expect("read");
    assert_eq!(read.first().map(|e| e.0), Some(7));
    assert_eq!(read.last(), Some(&(12, b"\"new\"".to_vec())));
    log.purge(12).expect("purge all");
    assert_eq!(log.last_index(), None);
    assert_eq!(fs::read_dir(dir.path()).expect("ls").count(), 0);
    log.append(&entries(13..15))
        .expect("append after purging all");
    assert_eq!(log.read(0, 100).expect("read"), entries(13..15));
}

// A failed append leaves the log as it was: entries written before the failing one are
// not readable (they were never synced, and the caller was told the append failed), and
// the same indexes can be appended again. Before, the first entries stayed in the map, so
// the retry hit "append at N after N" and the log reported an entry the store had not
// acknowledged.
#[test]
fn failed_append_leaves_the_log_unchanged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = LogFile::open(dir.path(), 100, 64).expect("open");
    log.append(&entries(0..3)).expect("append");
    let too_large = vec![b'x'; 65];
    let failed = log.append(&[(3, body(3)), (4, body(4)), (5, too_large)]);
    assert_eq!(
        failed.map_err(|e| e.kind()),
        Err(io::ErrorKind::InvalidInput)
    );
    assert_eq!((log.first_index(), log.last_index()), (Some(0), Some(2)));
    assert_eq!(log.read(0, 10).expect("read"), entries(0..3));
    log.append(&entries(3..6)).expect("append again");
    assert_eq!(log.read(0, 10).expect("read"), entries(0..6));
    drop(log);
    let log = LogFile::open(dir.path(), 100, 64).expect("reopen");
    assert_eq!(log.read(0, 10).expect("read"), entries(0..6));

    // From an empty log too.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = LogFile::open(dir.path(), 100, 64).expect("open");
    assert!(log.append(&[(7, body(7)), (8, vec![b'x'; 65])]).is_err());
    assert_eq!(log.last_index(), None);
    log.append(&entries(7..9)).expect("append");
    assert_eq!(log.read(0, 10).expect("read"), entries(7..9));
}
