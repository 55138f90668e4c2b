//! `OffsetIndex`: the sparse offset -> file position map of one segment, so a fetch
//! finds its batch with a binary search and a short header scan instead of reading the
//! segment from the start.

use crate::index_file::open_index_file;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// An index entry is a 4-byte relative offset followed by a 4-byte file position.
pub(crate) const OFFSET_INDEX_ENTRY_BYTES: usize = 8;
const _: () = assert!(OFFSET_INDEX_ENTRY_BYTES == 8);

/// Sparse map from offset to file position for one segment.
///
/// File format (`<base>.index`, Kafka's): entries of 8 bytes, big-endian: offset relative
/// to `base_offset` (u32), then the position (u32) in the `.log` file of the batch whose
/// *last* offset is that offset (Kafka keys entries by the batch's last offset). Entries
/// are strictly increasing in both fields. The file is not preallocated: it is exactly
/// `entries * 8` bytes. Not checksummed: recovery sanity-checks it and rebuilds it from
/// the `.log` when damaged.
///
/// While the segment is active, all entries are kept in memory (`entries`) for lookups;
/// `flushed` counts those already written to the file. Once the segment is inactive the
/// index is *evicted* ([`OffsetIndex::evict`]): lookups binary-search the file instead, so
/// memory does not grow with the data held on disk.
pub(crate) struct OffsetIndex {
    path: PathBuf,
    base_offset: i64,
    entries: Vec<(u32, u32)>,
    flushed: usize,
    /// `Some(n)`: evicted; the file holds the `n` entries and `entries` is empty.
    evicted: Option<usize>,
}

fn decode(entry: &[u8; OFFSET_INDEX_ENTRY_BYTES]) -> (u32, u32) {
    let [a, b, c, d, e, f, g, h] = *entry;
    (
        u32::from_be_bytes([a, b, c, d]),
        u32::from_be_bytes([e, f, g, h]),
    )
}

impl OffsetIndex {
    /// Opens (creating if missing) the index at `path`, loading its entries unchecked.
    /// Returns the index and whether the file existed with a whole number of entries;
    /// call [`OffsetIndex::sanity_check`] before trusting it.
    pub(crate) fn open(path: &Path, base_offset: i64) -> io::Result<(Self, bool)> {
        let existed = path.exists();
        drop(open_index_file(path)?);
        let bytes = std::fs::read(path)?;
        let whole = bytes.len() % OFFSET_INDEX_ENTRY_BYTES == 0;
        let entries = bytes
            .chunks_exact(OFFSET_INDEX_ENTRY_BYTES)
            .map(|e| {
                let (rel, pos) = e.split_at(4);
                (
                    u32::from_be_bytes(rel.try_into().expect("chunk of 8 splits into 4 + 4")),
                    u32::from_be_bytes(pos.try_into().expect("chunk of 8 splits into 4 + 4")),
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

    /// Checks what can be checked cheaply: strictly increasing entries, positions inside
    /// the log (`log_bytes`), offsets below `next_offset` when known.
    pub(crate) fn sanity_check(
        &self,
        log_bytes: u32,
        next_offset: Option<i64>,
    ) -> Result<(), String> {
        for pair in self.entries.windows(2) {
            if let [(r0, p0), (r1, p1)] = pair {
                if r1 <= r0 || p1 <= p0 {
                    return Err(format!(
                        "entries not increasing: ({r0}, {p0}) then ({r1}, {p1})"
                    ));
                }
            }
        }
        if let Some(&(rel, pos)) = self.entries.last() {
            if pos >= log_bytes {
                return Err(format!("last entry position {pos} >= log size {log_bytes}"));
            }
            if let Some(next) = next_offset {
                let offset = self.base_offset + i64::from(rel);
                if offset >= next {
                    return Err(format!("last entry offset {offset} >= next offset {next}"));
                }
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

    /// Writes any unwritten entries and drops them from memory (the segment is inactive:
    /// no more entries will come). Lookups then read the file.
    pub(crate) fn evict(&mut self) -> io::Result<()> {
        if self.evicted.is_none() {
            self.flush()?;
            self.evicted = Some(self.entries.len());
            self.entries = Vec::new();
        }
        Ok(())
    }

    /// The last entry of the prefix of entries for which `before` holds. An unreadable
    /// evicted index gives `None` (callers then scan the segment from its start: slower,
    /// never wrong).
    fn last_where(&self, before: impl Fn(&(u32, u32)) -> bool) -> Option<(u32, u32)> {
        crate::index_file::last_entry_where(&self.entries, self.evicted, &self.path, decode, before)
    }

    /// Position of the batch to start scanning from to find `offset`: the entry with the
    /// largest offset `<= offset` (its batch ends at or before `offset`, so the batch
    /// holding `offset` is at or after it), or 0 when there is none.
    pub(crate) fn lookup(&self, offset: i64) -> u32 {
        let rel = offset - self.base_offset;
        if rel < 0 {
            return 0;
        }
        let rel = u32::try_from(rel).unwrap_or(u32::MAX);
        self.last_where(|&(r, _)| r <= rel)
            .map_or(0, |(_, pos)| pos)
    }

    /// Position of the last entry at or below `position_limit` whose offset is below
    /// `offset_limit`: a batch boundary before which every batch ends by `position_limit`
    /// and holds only offsets below `offset_limit`.
    pub(crate) fn last_position_within(
        &self,
        position_limit: u64,
        offset_limit: i64,
    ) -> Option<u32> {
        self.last_where(|&(rel, pos)| {
            u64::from(pos) <= position_limit && self.base_offset + i64::from(rel) < offset_limit
        })
        .map(|(_, pos)| pos)
    }

    /// The last entry as `(absolute offset, position)`.
    pub(crate) fn last_entry(&self) -> Option<(i64, u32)> {
        self.last_where(|_| true)
            .map(|(rel, pos)| (self.base_offset + i64::from(rel), pos))
    }

    /// Adds an entry in memory (written by the next [`OffsetIndex::flush`]).
    /// `last_offset` is the batch's last offset, `position` where the batch starts.
    pub(crate) fn push(&mut self, last_offset: i64, position: u32) {
        assert!(
            self.evicted.is_none(),
            "entry pushed to the evicted index of an inactive segment"
        );
        let rel = u32::try_from(last_offset - self.base_offset)
            .expect("the log rolls before a relative offset overflows u32");
        if let Some(&(r, p)) = self.entries.last() {
            assert!(r < rel, "index offset {rel} not above previous {r}");
            assert!(
                p < position,
                "index position {position} not above previous {p}"
            );
        }
        self.entries.push((rel, position));
    }

    /// Writes entries added since the last flush with one positional write.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        let Some(new) = self.entries.get(self.flushed..) else {
            return Ok(());
        };
        if new.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::with_capacity(new.len() * OFFSET_INDEX_ENTRY_BYTES);
        for (rel, pos) in new {
            bytes.extend(rel.to_be_bytes());
            bytes.extend(pos.to_be_bytes());
        }
        open_index_file(&self.path)?
            .write_all_at(&bytes, (self.flushed * OFFSET_INDEX_ENTRY_BYTES) as u64)?;
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
        open_index_file(&self.path)?.set_len((self.flushed * OFFSET_INDEX_ENTRY_BYTES) as u64)
    }
}
