//! Opening a segment's `.index` / `.timeindex` file for one write, truncate or fsync.
//!
//! Why indexes keep no open descriptor: their entries live in memory, and the file is
//! only written when a segment stops being active (roll, close) or is rebuilt
//! (recovery, truncation). A crash loses nothing, because recovery rescans the active
//! segment from the recovery point and rebuilds its indexes. So a partition costs one
//! file descriptor (its `.log`) instead of three — 10,000 partitions fit a 20,000 open
//! file limit — and an append does no index I/O at all.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

/// Opens (creating if missing) an index file for reading and writing.
pub(crate) fn open_index_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}
