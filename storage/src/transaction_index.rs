//! `TransactionIndex`: the aborted transactions whose ABORT marker lies in one segment
//! (`<base>.txnindex`, Kafka's format), so a read_committed fetch can tell its client
//! which producers' records in the fetched range to drop without the broker decoding
//! anything.
//!
//! Format: back-to-back 34-byte entries, big-endian: version i16 (= 0), producer id i64,
//! first offset i64, last offset i64 (the marker's), last stable offset i64 (the LSO
//! right after the abort: where a reader may stop looking for older transactions).
//! Entries are appended in marker order, so `last_offset` ascends. The file exists only
//! once a segment has an entry.
//!
//! Thread-safety: owned by its `LogSegment`, behind the log's lock. The entries live in
//! memory too (aborts are rare); the file is appended on each abort (page cache), made
//! durable by the flusher (the active segment's through `SyncHandle`, a rolled one's in
//! `RollWork`) and at close. After a crash, recovery drops the entries at or above its
//! replay start and the replay of the markers writes them again.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::log_segment::file_name;

/// Bytes of one entry.
pub(crate) const ENTRY_BYTES: usize = 34;
const ENTRY_VERSION: i16 = 0;
const _: () = assert!(ENTRY_BYTES == 2 + 8 + 8 + 8 + 8);

/// One aborted transaction (Kafka's `AbortedTxn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    /// The producer whose records to drop.
    pub producer_id: i64,
    /// Offset of the transaction's first batch at this partition.
    pub first_offset: i64,
    /// Offset of its ABORT marker.
    pub last_offset: i64,
    /// The last stable offset when the marker was written.
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    fn encode(&self) -> [u8; ENTRY_BYTES] {
        let mut out = [0u8; ENTRY_BYTES];
        let fields = [
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        ];
        out[..2].copy_from_slice(&ENTRY_VERSION.to_be_bytes());
        for (i, value) in fields.iter().enumerate() {
            out[2 + 8 * i..10 + 8 * i].copy_from_slice(&value.to_be_bytes());
        }
        out
    }

    fn decode(entry: &[u8]) -> Result<Self, String> {
        let field = |i: usize| -> i64 {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(entry.get(2 + 8 * i..10 + 8 * i).unwrap_or(&[0; 8]));
            i64::from_be_bytes(bytes)
        };
        let version = entry
            .get(..2)
            .map(|v| i16::from_be_bytes([v[0], v[1]]))
            .ok_or_else(|| "short entry".to_string())?;
        if version != ENTRY_VERSION {
            return Err(format!("unknown transaction index entry version {version}"));
        }
        Ok(Self {
            producer_id: field(0),
            first_offset: field(1),
            last_offset: field(2),
            last_stable_offset: field(3),
        })
    }
}

/// One segment's aborted transactions. See the module docs.
#[derive(Debug)]
pub(crate) struct TransactionIndex {
    path: PathBuf,
    entries: Vec<AbortedTxn>,
    /// Entries appended since the last fsync.
    unsynced: bool,
}

impl TransactionIndex {
    /// The index of the segment at `base_offset` in `dir`, read from its file if there is
    /// one. A torn last entry (a crash mid-write) or an unreadable entry ends the list
    /// (recovery rewrites what it replays; below that, entries were fsync'd whole).
    pub(crate) fn open(dir: &Path, base_offset: i64) -> io::Result<Self> {
        let path = dir.join(file_name(base_offset, "txnindex"));
        let entries = match fs::read(&path) {
            Ok(bytes) => {
                let mut entries = Vec::with_capacity(bytes.len() / ENTRY_BYTES);
                for chunk in bytes.chunks_exact(ENTRY_BYTES) {
                    match AbortedTxn::decode(chunk) {
                        Ok(entry) => entries.push(entry),
                        Err(reason) => {
                            tracing::warn!(path = %path.display(), %reason, "ignoring the rest of a transaction index");
                            break;
                        }
                    }
                }
                entries
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(Self {
            path,
            entries,
            unsynced: false,
        })
    }

    /// An empty index at `path`, removing a stale file of that name.
    pub(crate) fn create(path: PathBuf) -> io::Result<Self> {
        remove_if_exists(&path)?;
        Ok(Self {
            path,
            entries: Vec::new(),
            unsynced: false,
        })
    }

    /// The file's path (it may not exist).
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The entries, in marker order.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    /// Appends an entry (to the page cache; see [`TransactionIndex::take_unsynced`]).
    pub(crate) fn append(&mut self, txn: AbortedTxn) -> io::Result<()> {
        if let Some(last) = self.entries.last() {
            assert!(
                last.last_offset < txn.last_offset,
                "aborted transaction at {} appended after one at {}",
                txn.last_offset,
                last.last_offset
            );
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        file.write_all(&txn.encode())?;
        self.entries.push(txn);
        self.unsynced = true;
        Ok(())
    }

    /// Drops every entry whose marker is at or above `offset` (truncation, or before a
    /// recovery replay writes them again), cutting the file to match.
    pub(crate) fn truncate_from(&mut self, offset: i64) -> io::Result<()> {
        let keep = self.entries.partition_point(|e| e.last_offset < offset);
        let file_len = match fs::metadata(&self.path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        let len = (keep * ENTRY_BYTES) as u64;
        self.entries.truncate(keep);
        if file_len != len {
            if keep == 0 {
                remove_if_exists(&self.path)?;
            } else {
                let file = OpenOptions::new().write(true).open(&self.path)?;
                file.set_len(len)?;
                self.unsynced = true;
            }
        }
        Ok(())
    }

    /// The file's path when entries were appended since the last fsync, clearing the
    /// flag: the caller fsyncs it (outside the log's lock).
    pub(crate) fn take_unsynced(&mut self) -> Option<PathBuf> {
        std::mem::take(&mut self.unsynced).then(|| self.path.clone())
    }

    /// Adds to `out` the entries overlapping `[start, upper)`: whose marker is at or after
    /// `start` and whose first offset is below `upper` (Kafka's `collectAbortedTxns`).
    /// Returns `true` once an entry's last stable offset reaches `upper`: no later segment
    /// can hold a transaction that began below it.
    pub(crate) fn collect(&self, start: i64, upper: i64, out: &mut Vec<AbortedTxn>) -> bool {
        let from = self.entries.partition_point(|e| e.last_offset < start);
        for entry in self.entries.get(from..).unwrap_or_default() {
            if entry.first_offset < upper {
                out.push(*entry);
            }
            if entry.last_stable_offset >= upper {
                return true;
            }
        }
        false
    }

    /// Removes the file.
    pub(crate) fn delete(&self) -> io::Result<()> {
        remove_if_exists(&self.path)
    }
}

/// fsyncs the index file at `path`, if it still exists.
pub(crate) fn sync_path(path: &Path) -> io::Result<()> {
    match File::open(path) {
        Ok(file) => file.sync_all(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Writes `entries` to `path` durably (temp, fsync, rename, fsync dir); none removes it.
pub(crate) fn write_entries(path: &Path, entries: &[AbortedTxn]) -> io::Result<()> {
    if entries.is_empty() {
        return remove_if_exists(path);
    }
    logbook_common::replace(path, |out| {
        entries
            .iter()
            .try_for_each(|entry| out.write_all(&entry.encode()))
    })
}

/// Reads the entries of the index file at `path` (none if it does not exist).
pub(crate) fn read_entries(dir: &Path, base_offset: i64) -> io::Result<Vec<AbortedTxn>> {
    Ok(TransactionIndex::open(dir, base_offset)?.entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: lso,
        }
    }

    /// Entries survive a reopen in Kafka's 34-byte layout; collect picks the overlapping
    /// ones and says when the search is complete; truncation cuts the file.
    #[test]
    fn append_reopen_collect_truncate() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut index = TransactionIndex::open(dir.path(), 100).expect("open");
        assert!(!index.path().exists());
        index.append(txn(1, 100, 110, 105)).expect("append");
        index.append(txn(2, 105, 120, 121)).expect("append");
        let bytes = fs::read(index.path()).expect("read");
        assert_eq!(bytes.len(), 2 * ENTRY_BYTES);
        assert_eq!(&bytes[..2], &[0, 0]);
        assert_eq!(&bytes[2..10], &1i64.to_be_bytes());
        assert_eq!(&bytes[26..34], &105i64.to_be_bytes());
        let index = TransactionIndex::open(dir.path(), 100).expect("reopen");
        assert_eq!(
            index.entries(),
            &[txn(1, 100, 110, 105), txn(2, 105, 120, 121)]
        );

        let mut out = Vec::new();
        assert!(!index.collect(111, 130, &mut out));
        assert_eq!(out, vec![txn(2, 105, 120, 121)]);
        out.clear();
        // Upper bound 105: the first entry's LSO reaches it, so the search ends there.
        assert!(index.collect(0, 105, &mut out));
        assert_eq!(out, vec![txn(1, 100, 110, 105)]);

        let mut index = index;
        index.truncate_from(120).expect("truncate");
        assert_eq!(fs::read(index.path()).expect("read").len(), ENTRY_BYTES);
        index.truncate_from(0).expect("truncate");
        assert!(!index.path().exists());
    }
}
