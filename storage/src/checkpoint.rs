//! Small durable files in the partition directory (log start offset, recovery point,
//! clean-shutdown marker). Written with write-temp, fsync, rename, fsync-dir so a crash
//! leaves either the old or the new content, never a torn file.
//!
//! Format: one ASCII line `v1 <i64> [<i64>...]\n`. Text keeps them inspectable with
//! `cat`; the version prefix lets the format change. A file that does not parse is
//! treated as absent (logged), which only costs a longer recovery scan.

use std::fs;
use std::io;
use std::path::Path;

/// Name of the log-start-offset checkpoint (DeleteRecords and retention raise it).
pub(crate) const LOG_START_OFFSET_FILE: &str = "log-start-offset";
/// Name of the recovery-point checkpoint: everything below it was fsync'd.
pub(crate) const RECOVERY_POINT_FILE: &str = "recovery-point";
/// Name of the clean-shutdown marker: `log_start log_end recovery_point`.
pub(crate) const CLEAN_SHUTDOWN_FILE: &str = "clean-shutdown";
pub(crate) use logbook_common::{sync_dir, TMP_SUFFIX};

/// Durably replaces `dir/name` with `values`.
pub(crate) fn write(dir: &Path, name: &str, values: &[i64]) -> io::Result<()> {
    let mut line = String::from("v1");
    for value in values {
        line.push(' ');
        line.push_str(&value.to_string());
    }
    line.push('\n');
    logbook_common::replace(&dir.join(name), |out| out.write_all(line.as_bytes()))
}

/// Reads `dir/name`; `Ok(None)` if missing or unparsable (or not `count` values).
pub(crate) fn read(dir: &Path, name: &str, count: usize) -> io::Result<Option<Vec<i64>>> {
    let text = match fs::read_to_string(dir.join(name)) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            tracing::warn!(dir = %dir.display(), name, "checkpoint is not text; ignoring it");
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let mut words = text.split_ascii_whitespace();
    let parsed: Option<Vec<i64>> = if words.next() == Some("v1") {
        words.map(|w| w.parse::<i64>().ok()).collect()
    } else {
        None
    };
    match parsed {
        Some(values) if values.len() == count => Ok(Some(values)),
        _ => {
            tracing::warn!(dir = %dir.display(), name, "checkpoint does not parse; ignoring it");
            Ok(None)
        }
    }
}

/// Durably removes `dir/name` if present.
pub(crate) fn remove(dir: &Path, name: &str) -> io::Result<()> {
    match fs::remove_file(dir.join(name)) {
        Ok(()) => sync_dir(dir),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A written checkpoint reads back; damaged or missing ones read as absent.
    #[test]
    fn round_trip_and_damage() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(read(dir.path(), "x", 1).expect("read"), None);
        write(dir.path(), "x", &[42, -1]).expect("write");
        assert_eq!(read(dir.path(), "x", 2).expect("read"), Some(vec![42, -1]));
        assert_eq!(read(dir.path(), "x", 1).expect("read"), None);
        fs::write(dir.path().join("x"), "v1 12z\n").expect("write");
        assert_eq!(read(dir.path(), "x", 1).expect("read"), None);
        remove(dir.path(), "x").expect("remove");
        remove(dir.path(), "x").expect("remove twice");
        assert!(!dir.path().join("x.tmp").exists());
    }
}
