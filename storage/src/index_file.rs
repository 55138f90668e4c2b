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

/// In an index file of `count` fixed-size entries, sorted so that `before` holds for a
/// prefix of them, the last entry of that prefix (`None` if the prefix is empty). A binary
/// search with one `pread` per probe: how an inactive segment's index is consulted without
/// keeping its entries in memory (the page cache keeps hot index files cheap to read).
pub(crate) fn last_where<const N: usize>(
    path: &Path,
    count: usize,
    before: impl Fn(&[u8; N]) -> bool,
) -> io::Result<Option<[u8; N]>> {
    use std::os::unix::fs::FileExt;
    let file = File::open(path)?;
    let read = |i: usize| -> io::Result<[u8; N]> {
        let mut entry = [0u8; N];
        file.read_exact_at(&mut entry, (i * N) as u64)?;
        Ok(entry)
    };
    // Entries below `low` satisfy `before`; entries at or above `high` do not.
    let (mut low, mut high) = (0, count);
    while low < high {
        let mid = low + (high - low) / 2;
        if before(&read(mid)?) {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    match low.checked_sub(1) {
        Some(last) => read(last).map(Some),
        None => Ok(None),
    }
}

/// The last entry of the prefix of an index's entries for which `before` holds: from
/// `resident` while the index is in memory, else (`evicted` = `Some(count)`) from the file
/// at `path` through [`last_where`], decoding entries with `decode`. An unreadable file
/// gives `None` with a warning: callers then scan the segment from its start (slower,
/// never wrong), so a damaged index cannot fail a read.
pub(crate) fn last_entry_where<E: Copy, const N: usize>(
    resident: &[E],
    evicted: Option<usize>,
    path: &Path,
    decode: fn(&[u8; N]) -> E,
    before: impl Fn(&E) -> bool,
) -> Option<E> {
    let Some(count) = evicted else {
        let n = resident.partition_point(|e| before(e));
        return n.checked_sub(1).and_then(|i| resident.get(i)).copied();
    };
    match last_where(path, count, |e| before(&decode(e))) {
        Ok(found) => found.map(|e| decode(&e)),
        Err(e) => {
            tracing::warn!(index = %path.display(), error = %e, "cannot read index; scanning the segment instead");
            None
        }
    }
}
