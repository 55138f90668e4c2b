//! Crash-safe replacement of a small file (checkpoints, snapshots, metadata files), as
//! Kafka's `Utils.atomicMoveWithFallback` after a flushed temporary file: write
//! `NAME.tmp`, fsync it, rename it over `NAME`, fsync the directory. A crash at any
//! point leaves the old file or the new one whole, never a torn one, and once
//! [`replace`] returns the new one survives a power loss. A stale `NAME.tmp` left by a
//! crash is overwritten by the next replacement; readers never look at it.
//!
//! Every error is returned, the fsyncs' included: a caller that ignores one would claim
//! durability a crash can take away.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Suffix of the temporary file written before the rename.
pub const TMP_SUFFIX: &str = ".tmp";

/// fsyncs a directory so that creations, renames and deletions in it are durable.
///
/// # Errors
/// Opening or syncing the directory.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Durably replaces `path` with what `write` writes (buffered): temporary file, fsync,
/// rename, fsync of the parent directory.
///
/// # Errors
/// Any write, fsync or rename; the previous file is then intact.
pub fn replace(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    replace_with(path, true, write)
}

/// Replaces `path` atomically but without fsync: for hints whose loss costs only time.
/// After a power loss the old content, the new one, a damaged file or none may be found,
/// so its reader must detect damage (a CRC) and cope with absence.
///
/// # Errors
/// Any write or rename; the previous file is then intact.
pub fn replace_unsynced(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    replace_with(path, false, write)
}

fn replace_with(
    path: &Path,
    sync: bool,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = tmp_path(path);
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    let mut out = BufWriter::new(file);
    write(&mut out)?;
    let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
    if sync {
        file.sync_all()?;
    }
    drop(file);
    fs::rename(&tmp, path)?;
    match path.parent() {
        Some(dir) if sync => sync_dir(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        }),
        _ => Ok(()),
    }
}

/// `path` with [`TMP_SUFFIX`] appended to its file name.
#[must_use]
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(TMP_SUFFIX);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replacement leaves exactly the new content and no temporary file, and a failed
    /// write leaves the old content untouched.
    #[test]
    fn replace_swaps_whole_files_and_a_failed_write_keeps_the_old_one() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("state.checkpoint");
        replace(&path, |w| w.write_all(b"first")).expect("first");
        replace(&path, |w| w.write_all(b"second")).expect("second");
        assert_eq!(fs::read(&path).expect("read"), b"second");
        assert!(!tmp_path(&path).exists(), "temporary file left behind");

        let failed = replace(&path, |w| {
            w.write_all(b"torn")?;
            Err(io::Error::other("disk gone"))
        });
        assert_eq!(failed.expect_err("write failed").to_string(), "disk gone");
        assert_eq!(fs::read(&path).expect("read"), b"second");

        replace_unsynced(&path, |w| w.write_all(b"hint")).expect("unsynced");
        assert_eq!(fs::read(&path).expect("read"), b"hint");
    }

    /// The temporary file sits beside the target, so the rename never crosses a
    /// filesystem.
    #[test]
    fn the_temporary_file_is_the_name_plus_tmp() {
        assert_eq!(
            tmp_path(Path::new("/d/00000000000000000042.snapshot")),
            PathBuf::from("/d/00000000000000000042.snapshot.tmp")
        );
    }
}
