//! `TimeIndex`: the sparse timestamp -> offset map of one segment, so ListOffsets by
//! timestamp skips to the right region of the segment, and retention knows a segment's
//! largest timestamp without reading it.

use crate::index_file::open_index_file;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// A time index entry is an 8-byte timestamp followed by a 4-byte relative offset.
pub(crate) const TIME_INDEX_ENTRY_BYTES: usize = 12;
const _: () = assert!(TIME_INDEX_ENTRY_BYTES == 12);

/// Sparse map from timestamp to offset for one segment.
///
/// File format (`<base>.timeindex`, Kafka's): 12-byte big-endian entries: the largest
/// batch `max_timestamp` seen so far in the segment (i64), then the relative offset
/// (u32) of the last record of the first batch that reached it. Timestamps are strictly
/// increasing (an entry is only added when the maximum grows), offsets non-decreasing.
/// Written at the offset index's cadence and once more when the segment stops being
/// active (roll or close), so the last entry is the segment's largest timestamp.
/// Not preallocated, not checksummed: rebuilt from the `.log` when damaged.
pub(crate) struct TimeIndex {
    path: PathBuf,
    base_offset: i64,
    entries: Vec<(i64, u32)>,
    flushed: usize,
    /// `Some(n)`: evicted (inactive segment); the file holds the `n` entries and
    /// `entries` is empty. See `OffsetIndex`.
    evicted: Option<usize>,
}

fn decode(entry: &[u8; TIME_INDEX_ENTRY_BYTES]) -> (i64, u32) {
    let [a, b, c, d, e, f, g, h, i, j, k, l] = *entry;
    (
        i64::from_be_bytes([a, b, c, d, e, f, g, h]),
        u32::from_be_bytes([i, j, k, l]),
    )
}

impl TimeIndex {
    /// Opens (creating if missing) the index, loading entries unchecked. Returns whether
    /// the file existed with a whole number of entries.
    pub(crate) fn open(path: &Path, base_offset: i64) -> io::Result<(Self, bool)> {
        let existed = path.exists();
        drop(open_index_file(path)?);
        let bytes = std::fs::read(path)?;
        let whole = bytes.len() % TIME_INDEX_ENTRY_BYTES == 0;
        let entries = bytes
            .chunks_exact(TIME_INDEX_ENTRY_BYTES)
            .map(|e| {
                let (ts, rel) = e.split_at(8);
                (
                    i64::from_be_bytes(ts.try_into().expect("chunk of 12 splits into 8 + 4")),
                    u32::from_be_bytes(rel.try_into().expect("chunk of 12 splits into 8 + 4")),
                )
            })
            .collect::<Vec<_>>();
        let flushed = entries.len();
        let index = Self {
            path: path.to_path_buf(),
            base_offset,
            entries,
            flushed,
            evicted: None,
        };
        Ok((index, existed && whole))
    }

    /// Checks monotonicity and that offsets are below `next_offset` when known.
    pub(crate) fn sanity_check(&self, next_offset: Option<i64>) -> Result<(), String> {
        for pair in self.entries.windows(2) {
            if let [(t0, r0), (t1, r1)] = pair {
                if t1 <= t0 || r1 < r0 {
                    return Err(format!(
                        "entries not increasing: ({t0}, {r0}) then ({t1}, {r1})"
                    ));
                }
            }
        }
        if let (Some(&(_, rel)), Some(next)) = (self.entries.last(), next_offset) {
            let offset = self.base_offset + i64::from(rel);
            if offset >= next {
                return Err(format!("last entry offset {offset} >= next offset {next}"));
            }
        }
        Ok(())
    }

    /// fdatasyncs the index file (opened for the call: an index holds no descriptor).
    pub(crate) fn sync(&self) -> io::Result<()> {
        open_index_file(&self.path)?.sync_data()
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Entries held in memory (0 once evicted).
    #[cfg(test)]
    pub(crate) fn resident(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn len(&self) -> usize {
        self.evicted.unwrap_or(self.entries.len())
    }

    /// Writes any unwritten entries and drops them from memory (inactive segment).
    pub(crate) fn evict(&mut self) -> io::Result<()> {
        if self.evicted.is_none() {
            self.flush()?;
            self.evicted = Some(self.entries.len());
            self.entries = Vec::new();
        }
        Ok(())
    }

    /// The last entry of the prefix for which `before` holds; `None` also when an evicted
    /// index cannot be read (callers then scan from the segment start).
    fn last_where(&self, before: impl Fn(&(i64, u32)) -> bool) -> Option<(i64, u32)> {
        crate::index_file::last_entry_where(&self.entries, self.evicted, &self.path, decode, before)
    }

    /// The last entry as `(timestamp, absolute offset)`: the segment's largest timestamp
    /// once the segment is inactive.
    pub(crate) fn last_entry(&self) -> Option<(i64, i64)> {
        self.last_where(|_| true)
            .map(|(ts, rel)| (ts, self.base_offset + i64::from(rel)))
    }

    /// Offset of a batch all of whose predecessors (and itself) have `max_timestamp <
    /// timestamp`: the entry with the largest timestamp strictly below `timestamp`.
    /// Scanning from that batch finds the first batch reaching `timestamp`. `None`:
    /// scan from the segment start.
    pub(crate) fn lookup(&self, timestamp: i64) -> Option<i64> {
        self.last_where(|&(ts, _)| ts < timestamp)
            .map(|(_, rel)| self.base_offset + i64::from(rel))
    }

    /// Adds `(timestamp, offset)` in memory if `timestamp` exceeds the last entry's.
    pub(crate) fn maybe_push(&mut self, timestamp: i64, offset: i64) {
        if self.evicted.is_some() {
            // An inactive segment's final entry was written before eviction.
            return;
        }
        let rel = u32::try_from(offset - self.base_offset)
            .expect("the log rolls before a relative offset overflows u32");
        if let Some(&(ts, r)) = self.entries.last() {
            if timestamp <= ts {
                return;
            }
            if rel < r {
                // Only reachable when entries loaded from a damaged file point past the
                // batches being tracked; the post-scan sanity check then rebuilds it.
                return;
            }
        }
        self.entries.push((timestamp, rel));
    }

    /// Writes entries added since the last flush with one positional write.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        let Some(new) = self.entries.get(self.flushed..) else {
            return Ok(());
        };
        if new.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::with_capacity(new.len() * TIME_INDEX_ENTRY_BYTES);
        for (ts, rel) in new {
            bytes.extend(ts.to_be_bytes());
            bytes.extend(rel.to_be_bytes());
        }
        open_index_file(&self.path)?
            .write_all_at(&bytes, (self.flushed * TIME_INDEX_ENTRY_BYTES) as u64)?;
        self.flushed = self.entries.len();
        Ok(())
    }

    /// Drops every entry (before a rebuild).
    pub(crate) fn clear(&mut self) -> io::Result<()> {
        self.truncate_entries(0)
    }

    fn truncate_entries(&mut self, keep: usize) -> io::Result<()> {
        if self.evicted.take().is_some() {
            // Back in memory, to be rebuilt by recovery (the only caller for such an index).
            assert!(keep == 0, "an evicted index is only ever cleared");
        }
        self.entries.truncate(keep);
        self.flushed = self.flushed.min(keep);
        open_index_file(&self.path)?.set_len((self.flushed * TIME_INDEX_ENTRY_BYTES) as u64)
    }
}
