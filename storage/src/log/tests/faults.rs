//! Disk failures, injected: a failed append write leaves the log as it was (out of space
//! is survivable), a failed fsync is reported and never turned into a durable offset.

use super::*;
use crate::fault::{self, Op};

// ENOSPC on the append write: the caller gets the error, nothing of the batch remains
// (file size, log end, reads), and once space is back the next append works.
#[test]
fn failed_write_rolls_back_and_log_stays_usable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), LogConfig::default());
    let (first, stored) = append(&mut log, 2, 10, 0);
    fault::fail(dir.path(), Op::Write, libc::ENOSPC, 1);
    let b = batch(3, 10, 0);
    match log.append(&b, 3) {
        Err(Error::Io(e)) => assert_eq!(e.raw_os_error(), Some(libc::ENOSPC)),
        other => panic!("expected ENOSPC, got {other:?}"),
    }
    assert_eq!(log.log_end_offset(), first.log_end_offset);
    assert_eq!(read_all(&log), stored);
    assert!(log.failure().is_none());
    let (again, _) = append(&mut log, 3, 10, 0);
    assert_eq!(again.first_offset, first.log_end_offset);
    log.close().expect("close");
    let log = open(dir.path(), LogConfig::default());
    assert_eq!(log.log_end_offset(), 5);
}

// A failed fsync is returned by the sync; the caller marks the log failed, after which
// appends and syncs are refused and close writes no clean-shutdown marker.
#[test]
fn failed_fsync_fails_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), LogConfig::default());
    append(&mut log, 2, 10, 0);
    fault::fail(dir.path(), Op::Fsync, libc::EIO, 1);
    let handle = log.sync_handle().expect("sync handle");
    let err = handle.sync().expect_err("injected EIO");
    assert_eq!(err.raw_os_error(), Some(libc::EIO));
    assert_eq!(log.recovery_point(), 0);
    log.mark_failed(err.to_string());
    assert!(matches!(
        log.append(&batch(1, 1, 0), 3),
        Err(Error::LogFailed { .. })
    ));
    assert!(matches!(log.sync_handle(), Err(Error::LogFailed { .. })));
    assert!(matches!(log.close(), Err(Error::LogFailed { .. })));
    assert!(!dir.path().join(CLEAN_SHUTDOWN_FILE).exists());
}
