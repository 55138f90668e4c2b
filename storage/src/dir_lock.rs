//! `DataDirLock`: one process per data directory (Kafka's `.lock` file in every log dir).
//!
//! Two brokers on one directory would append to the same segments and rewrite each other's
//! checkpoints, so the second one must not start. The lock is an exclusive `flock` on
//! `<data dir>/.lock`, held for the life of the process: the kernel drops it when the
//! process exits, however it exits, so a crash never leaves a stale lock behind. The file
//! also records the holder's pid, for the refusal message only.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rustix::fs::{flock, FlockOperation};

/// The lock file's name inside the data directory.
pub const LOCK_FILE: &str = ".lock";

/// An exclusive hold on a data directory; released when dropped or when the process ends.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
    path: PathBuf,
}

/// Why the data directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum DataDirLockError {
    /// Another live process holds it.
    #[error("data directory {dir} is in use by another process{holder}; every broker needs a data directory of its own")]
    InUse {
        /// The directory.
        dir: PathBuf,
        /// " (pid N)" when the lock file names its holder.
        holder: String,
    },
    /// The directory or its lock file could not be created or locked.
    #[error("cannot lock data directory {dir}: {source}")]
    Io {
        /// The directory.
        dir: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

impl DataDirLock {
    /// Creates `dir` if needed and takes its lock without waiting.
    ///
    /// # Errors
    /// [`DataDirLockError::InUse`] when another process holds it; `Io` otherwise.
    pub fn acquire(dir: &Path) -> Result<Self, DataDirLockError> {
        let io = |source| DataDirLockError::Io {
            dir: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        if let Err(e) = flock(&file, FlockOperation::NonBlockingLockExclusive) {
            if e == rustix::io::Errno::WOULDBLOCK {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                return Err(DataDirLockError::InUse {
                    dir: dir.to_path_buf(),
                    holder: if pid.is_empty() {
                        String::new()
                    } else {
                        format!(" (pid {pid})")
                    },
                });
            }
            return Err(io(e.into()));
        }
        // Ours now: record who holds it. Not fsync'd: it is only for the message above.
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        Ok(Self { _file: file, path })
    }

    /// The lock file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // flock locks belong to the open file description, so a second open in the same process
    // conflicts just as another process would; dropping the first lets the next one in.
    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let first = DataDirLock::acquire(&data).expect("first lock");
        let err = DataDirLock::acquire(&data).expect_err("second lock");
        let message = err.to_string();
        assert!(
            matches!(err, DataDirLockError::InUse { .. })
                && message.contains(&format!("pid {}", std::process::id())),
            "{message}"
        );
        assert_eq!(first.path(), data.join(LOCK_FILE));
        drop(first);
        DataDirLock::acquire(&data).expect("lock after the first is dropped");
    }
}
