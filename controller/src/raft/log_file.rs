//! The Raft log on disk: segment files of length-prefixed, CRC'd frames, one frame per
//! entry, in `<data-dir>/__cluster_metadata-0/`.
//!
//! Why not `storage::Log` (the plan's first choice): a raft entry would have to become a
//! Kafka v2 record batch, and storage has no public encoder for data batches, keeps its
//! checkpoint helpers private, and carries producer state, indexes, retention and
//! compaction that this log never uses. The whole format here is ~300 lines.
//!
//! Segment file `<base index, 20 digits>.log` holds consecutive entries from `base`.
//! Frame: body length (u32 BE), CRC32C (u32 BE) of the index and body, index (u64 BE),
//! body (JSON of one openraft entry). Recovery scans every segment and stops at the first
//! frame that is short, fails its CRC, claims more than `frame_bytes_max` or breaks the
//! index sequence: that is a torn tail, cut off (and later segments deleted), because
//! only fsync'd entries were ever acknowledged. Not thread-safe: the store wraps it in a
//! mutex and calls it from blocking threads.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::durable_file::sync_dir;

/// Bytes before a frame's body: length, CRC, index.
pub(crate) const FRAME_HEADER_BYTES: usize = 16;
/// Suffix of segment files.
const SEGMENT_SUFFIX: &str = ".log";

/// One segment file and its length in bytes (the position of the next frame).
#[derive(Debug)]
struct Segment {
    base: u64,
    path: PathBuf,
    file: File,
    len: u64,
}

/// Where one entry's frame lies.
#[derive(Clone, Copy, Debug)]
struct Location {
    segment_base: u64,
    position: u64,
    body_bytes: u32,
}

/// The segment files of the log with an in-memory map of every entry's position.
#[derive(Debug)]
pub(crate) struct LogFile {
    dir: PathBuf,
    segment_bytes: u64,
    frame_bytes_max: u32,
    /// Ascending by base; the last one takes appends.
    segments: Vec<Segment>,
    /// One per present entry, for indexes `first_index..first_index + len`.
    locations: VecDeque<Location>,
    first_index: u64,
}

impl LogFile {
    /// Opens (creating if needed) the log in `dir`, dropping a torn tail. Segments roll at
    /// `segment_bytes`; a frame body over `frame_bytes_max` is treated as damage.
    pub(crate) fn open(dir: &Path, segment_bytes: u64, frame_bytes_max: u32) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        let mut bases = Vec::new();
        for item in fs::read_dir(dir)? {
            let name = item?.file_name();
            let name = name.to_string_lossy();
            if let Some(base) = name
                .strip_suffix(SEGMENT_SUFFIX)
                .and_then(|b| b.parse::<u64>().ok())
            {
                bases.push(base);
            }
        }
        bases.sort_unstable();
        let mut log = LogFile {
            dir: dir.to_path_buf(),
            segment_bytes,
            frame_bytes_max,
            segments: Vec::new(),
            locations: VecDeque::new(),
            first_index: bases.first().copied().unwrap_or(0),
        };
        let mut damaged = false;
        for base in bases {
            let path = segment_path(dir, base);
            let contiguous = log.last_index().is_none_or(|last| last + 1 == base);
            if damaged || !contiguous {
                tracing::warn!(path = %path.display(), "deleting a controller log segment after a torn tail or gap");
                fs::remove_file(&path)?;
                damaged = true;
                continue;
            }
            let file = OpenOptions::new().read(true).write(true).open(&path)?;
            let valid = log.scan(&file, base)?;
            let len = file.metadata()?.len();
            if valid < len {
                tracing::warn!(
                    path = %path.display(),
                    valid_bytes = valid,
                    file_bytes = len,
                    "dropping the torn tail of the controller log"
                );
                file.set_len(valid)?;
                file.sync_all()?;
                damaged = true;
            }
            if valid == 0 {
                fs::remove_file(&path)?;
                continue;
            }
            log.segments.push(Segment {
                base,
                path,
                file,
                len: valid,
            });
        }
        sync_dir(dir)?;
        Ok(log)
    }

    /// Reads the frames of one segment into `locations`; returns the length of its valid
    /// prefix.
    fn scan(&mut self, file: &File, base: u64) -> io::Result<u64> {
        let bytes = {
            let len = usize::try_from(file.metadata()?.len())
                .map_err(|_| io::Error::other("segment larger than memory"))?;
            let mut bytes = vec![0; len];
            file.read_exact_at(&mut bytes, 0)?;
            bytes
        };
        if self.locations.is_empty() {
            self.first_index = base;
        }
        let mut position = 0usize;
        loop {
            let expected = self.first_index + self.locations.len() as u64;
            let Some(body_bytes) = self.frame_at(&bytes, position, expected) else {
                return Ok(position as u64);
            };
            self.locations.push_back(Location {
                segment_base: base,
                position: position as u64,
                body_bytes,
            });
            position += FRAME_HEADER_BYTES + body_bytes as usize;
        }
    }

    /// The body length of a whole, intact frame at `position` carrying `expected`, or
    /// `None` where the valid log ends.
    fn frame_at(&self, bytes: &[u8], position: usize, expected: u64) -> Option<u32> {
        let rest = bytes.get(position..)?;
        let (header, rest) = rest.split_first_chunk::<FRAME_HEADER_BYTES>()?;
        let (len, header) = header.split_first_chunk::<4>()?;
        let (crc, index) = header.split_first_chunk::<4>()?;
        let body_bytes = u32::from_be_bytes(*len);
        if body_bytes > self.frame_bytes_max
            || u64::from_be_bytes(<[u8; 8]>::try_from(index).ok()?) != expected
        {
            return None;
        }
        let body = rest.get(..body_bytes as usize)?;
        let actual = crc32c::crc32c_append(crc32c::crc32c(index), body);
        (actual == u32::from_be_bytes(*crc)).then_some(body_bytes)
    }

    /// Index of the first present entry.
    pub(crate) fn first_index(&self) -> Option<u64> {
        (!self.locations.is_empty()).then_some(self.first_index)
    }

    /// Index of the last present entry.
    pub(crate) fn last_index(&self) -> Option<u64> {
        (!self.locations.is_empty()).then(|| self.first_index + self.locations.len() as u64 - 1)
    }

    /// Appends entries (index, body) and fsyncs them before returning. Indexes must
    /// follow the last present entry (any index when the log is empty). On an error the
    /// log is left as it was: no entry of the call is readable (bytes already written past
    /// the old end are overwritten by the next append, or cut by recovery as a torn or
    /// unacknowledged tail), so the caller's view and the log's agree and a retry appends
    /// the same indexes again.
    pub(crate) fn append(&mut self, entries: &[(u64, Vec<u8>)]) -> io::Result<()> {
        let before = (
            self.locations.len(),
            self.segments.len(),
            self.segments.last().map(|s| s.len),
            self.first_index,
        );
        let appended = self.append_frames(entries);
        if appended.is_err() {
            let (locations, segments, active_len, first_index) = before;
            self.locations.truncate(locations);
            self.segments.truncate(segments);
            if let (Some(active), Some(len)) = (self.segments.last_mut(), active_len) {
                active.len = len;
            }
            self.first_index = first_index;
        }
        appended
    }

    /// [`Self::append`]'s work: writes each frame, rolling segments as they fill, then
    /// syncs the touched segments and, if one was created, the directory.
    fn append_frames(&mut self, entries: &[(u64, Vec<u8>)]) -> io::Result<()> {
        let mut touched: Vec<u64> = Vec::new();
        let mut created = false;
        for (index, body) in entries {
            if let Some(last) = self.last_index() {
                assert!(
                    last + 1 == *index,
                    "controller log append at {index} after {last}"
                );
            } else {
                self.first_index = *index;
            }
            let body_bytes = u32::try_from(body.len())
                .ok()
                .filter(|b| *b <= self.frame_bytes_max)
                .ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "controller log entry {index} of {} bytes is too large",
                            body.len()
                        ),
                    )
                })?;
            let frame_bytes = (FRAME_HEADER_BYTES + body.len()) as u64;
            let roll = self
                .segments
                .last()
                .is_none_or(|s| s.len > 0 && s.len + frame_bytes > self.segment_bytes);
            if roll {
                self.roll(*index)?;
                created = true;
            }
            let segment = self
                .segments
                .last_mut()
                .ok_or_else(|| io::Error::other("no active segment"))?;
            let frame = encode_frame(*index, body, body_bytes);
            segment.file.write_all_at(&frame, segment.len)?;
            self.locations.push_back(Location {
                segment_base: segment.base,
                position: segment.len,
                body_bytes,
            });
            segment.len += frame_bytes;
            if touched.last() != Some(&segment.base) {
                touched.push(segment.base);
            }
        }
        for segment in self.segments.iter().filter(|s| touched.contains(&s.base)) {
            segment.file.sync_data()?;
        }
        if created {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// Starts a new segment whose first entry is `index` (created empty, truncating any
    /// leftover file of that name). Not synced here: [`Self::append`] syncs the directory
    /// once its entries are durable, so a crash before then loses only unacknowledged
    /// entries.
    fn roll(&mut self, index: u64) -> io::Result<()> {
        let path = segment_path(&self.dir, index);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        self.segments.push(Segment {
            base: index,
            path,
            file,
            len: 0,
        });
        Ok(())
    }

    /// The bodies of the present entries in `start..end` (indexes outside are skipped).
    pub(crate) fn read(&self, start: u64, end: u64) -> io::Result<Vec<(u64, Vec<u8>)>> {
        let Some(last) = self.last_index() else {
            return Ok(Vec::new());
        };
        let start = start.max(self.first_index);
        let end = end.min(last + 1);
        let mut out = Vec::with_capacity(end.saturating_sub(start) as usize);
        for index in start..end {
            let location = self.locations[(index - self.first_index) as usize];
            let segment = self.segment(location.segment_base)?;
            let mut frame = vec![0; FRAME_HEADER_BYTES + location.body_bytes as usize];
            segment.file.read_exact_at(&mut frame, location.position)?;
            // Checked again on the way out: the page cache can hand back what the disk mangled.
            if self.frame_at(&frame, 0, index) != Some(location.body_bytes) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("controller log entry {index} is corrupt on disk"),
                ));
            }
            frame.drain(..FRAME_HEADER_BYTES);
            out.push((index, frame));
        }
        Ok(out)
    }

    fn segment(&self, base: u64) -> io::Result<&Segment> {
        self.segments
            .binary_search_by_key(&base, |s| s.base)
            .ok()
            .and_then(|i| self.segments.get(i))
            .ok_or_else(|| io::Error::other(format!("no controller log segment {base}")))
    }

    /// Removes the entries from `index` on (openraft's `truncate`: they conflict with the
    /// leader's log), durably.
    pub(crate) fn truncate(&mut self, index: u64) -> io::Result<()> {
        let Some(last) = self.last_index() else {
            return Ok(());
        };
        if index > last {
            return Ok(());
        }
        let keep = index.saturating_sub(self.first_index) as usize;
        let cut = self.locations.get(keep).copied();
        self.locations.truncate(keep);
        let Some(cut) = cut else {
            return Ok(());
        };
        // Shorten the segment holding `index` first, then delete the later ones: a crash in
        // between leaves a gap that recovery drops, never entries that were truncated.
        while let Some(segment) = self.segments.last_mut() {
            if segment.base < cut.segment_base {
                break;
            }
            if segment.base == cut.segment_base && cut.position > 0 {
                segment.file.set_len(cut.position)?;
                segment.file.sync_all()?;
                segment.len = cut.position;
                break;
            }
            let segment = self
                .segments
                .pop()
                .ok_or_else(|| io::Error::other("no segment"))?;
            fs::remove_file(&segment.path)?;
        }
        sync_dir(&self.dir)
    }

    /// Forgets the entries up to and including `index` (openraft's `purge`, after a
    /// snapshot covers them) and deletes the segments that hold nothing newer.
    pub(crate) fn purge(&mut self, index: u64) -> io::Result<()> {
        while self.first_index().is_some_and(|first| first <= index) {
            self.locations.pop_front();
            self.first_index += 1;
        }
        if self.locations.is_empty() {
            self.first_index = index + 1;
        }
        let mut deleted = false;
        while let Some(segment) = self.segments.first() {
            let next_base = self.segments.get(1).map(|s| s.base);
            let whole = match next_base {
                Some(next) => next <= index + 1,
                None => self.locations.is_empty(),
            };
            if !whole {
                break;
            }
            fs::remove_file(&segment.path)?;
            self.segments.remove(0);
            deleted = true;
        }
        if deleted {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }
}

/// One entry's frame as it is on disk: body length, CRC-32C of index and body, index,
/// body.
fn encode_frame(index: u64, body: &[u8], body_bytes: u32) -> Vec<u8> {
    let mut frame = Vec::with_capacity(FRAME_HEADER_BYTES + body.len());
    let index_bytes = index.to_be_bytes();
    let crc = crc32c::crc32c_append(crc32c::crc32c(&index_bytes), body);
    frame.extend_from_slice(&body_bytes.to_be_bytes());
    frame.extend_from_slice(&crc.to_be_bytes());
    frame.extend_from_slice(&index_bytes);
    frame.extend_from_slice(body);
    frame
}

/// `dir/<base, 20 digits>.log`.
fn segment_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}{SEGMENT_SUFFIX}"))
}

#[cfg(test)]
mod tests;
