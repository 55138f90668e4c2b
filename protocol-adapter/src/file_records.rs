//! Record sets sent straight from segment files: a Fetch response carries its records as
//! ranges of files, and the connection sends them with `sendfile(2)` from the page cache
//! to the socket, as Kafka does with `FileChannel.transferTo`. The broker never copies
//! fetched records into its own memory.
//!
//! How, without a hand-written Fetch encoder: the response is encoded by `kafka-protocol`
//! as usual, but each partition's `records` field holds a *stand-in* — a slice, of the
//! right length, of a large zero-filled region that is never written and, unless something
//! reads it, never backed by memory. The encoder writes a records field with one
//! `put_slice` of exactly that slice; [`ResponseBuf`] recognises the stand-in by its
//! address and records a [`Chunk::File`] in its place. Everything else the encoder writes
//! (length prefixes, tagged fields, other partitions) lands in ordinary memory chunks.
//! The length prefixes are therefore right by construction, for every version.

use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, OnceLock};

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::buf::ByteBufMut;

/// Address space reserved for stand-ins: the records of one response must fit in it,
/// else the excess is read into memory instead (see [`FileRecords::records`]). Reads of
/// untouched anonymous memory map the kernel's shared zero page, so it costs no RSS.
///
/// Sized for responses, not for any allocator: it only has to exceed the largest fetch
/// response (`fetch_response_bytes_max`, 55 MiB by default) with room to spare. The one
/// requirement on the process allocator is that a zeroed allocation this large is served
/// by a fresh mapping rather than by writing zeros; the broker's `alloc` tests check that
/// for its allocator on both sides of its own thresholds.
pub const STAND_IN_BYTES: usize = 1 << 30;

fn stand_in_space() -> &'static [u8] {
    static SPACE: OnceLock<&'static [u8]> = OnceLock::new();
    SPACE.get_or_init(|| Box::leak(vec![0u8; STAND_IN_BYTES].into_boxed_slice()))
}

/// `len` bytes of a file from `position`, to be sent as they are.
#[derive(Clone, Debug)]
pub struct FileRegion {
    /// The open file; keeping it open keeps the bytes readable even if the file is
    /// unlinked meanwhile.
    pub file: Arc<File>,
    /// Byte position in the file.
    pub position: u64,
    /// Length in bytes.
    pub len: usize,
}

impl FileRegion {
    fn read(&self, out: &mut Vec<u8>) -> io::Result<()> {
        let start = out.len();
        out.resize(start + self.len, 0);
        let dest = out.get_mut(start..).unwrap_or_default();
        self.file.read_exact_at(dest, self.position)
    }
}

/// The record sets of one response that are to be sent from files.
#[derive(Debug, Default)]
pub struct FileRecords {
    /// Stand-in offset (into the stand-in space) and the regions it stands for.
    entries: Vec<(usize, Vec<FileRegion>)>,
    /// Stand-in bytes handed out.
    used: usize,
}

impl FileRecords {
    /// The value for a response's `records` field holding `regions` back to back: a
    /// stand-in that [`ResponseBuf`] replaces by the regions, or, if the stand-in space of
    /// this response is exhausted, the bytes themselves read from the files.
    ///
    /// # Errors
    /// I/O errors of that fallback read.
    pub fn records(&mut self, regions: Vec<FileRegion>) -> io::Result<Bytes> {
        let len: usize = regions.iter().map(|r| r.len).sum();
        if len == 0 {
            return Ok(Bytes::new());
        }
        let space = stand_in_space();
        match space.get(self.used..self.used + len) {
            Some(stand_in) => {
                self.entries.push((self.used, regions));
                self.used += len;
                Ok(Bytes::from_static(stand_in))
            }
            None => {
                let mut out = Vec::with_capacity(len);
                for region in &regions {
                    region.read(&mut out)?;
                }
                Ok(Bytes::from(out))
            }
        }
    }

    /// Whether no record set was deferred to a file.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A piece of encoded output.
#[derive(Debug)]
pub enum Chunk {
    /// Bytes in memory.
    Mem(BytesMut),
    /// Bytes to send from a file.
    File(FileRegion),
}

/// Encoded responses waiting to be written: memory chunks with file regions in between.
///
/// Implements `kafka-protocol`'s `ByteBufMut` with *logical* offsets (file regions count
/// their length), so encoders and the frame-size patch work as on a `BytesMut`.
#[derive(Debug)]
pub struct ResponseBuf {
    /// Never empty; the last chunk is always `Mem`, where new bytes go.
    chunks: Vec<Chunk>,
    /// Logical length of every chunk before the last.
    sealed_len: usize,
    /// Stand-ins the response being encoded may contain.
    pending: Vec<(usize, Vec<FileRegion>)>,
    /// A stand-in that could not be matched (a bug); reported by `end_records`.
    error: Option<String>,
}

impl Default for ResponseBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponseBuf {
    /// An empty buffer.
    #[must_use]
    pub fn new() -> Self {
        Self {
            chunks: vec![Chunk::Mem(BytesMut::new())],
            sealed_len: 0,
            pending: Vec::new(),
            error: None,
        }
    }

    /// Logical length: bytes in memory plus bytes of file regions.
    #[must_use]
    pub fn len(&self) -> usize {
        self.sealed_len + self.tail_ref().len()
    }

    /// Whether nothing is buffered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Makes the stand-ins of `records` recognisable while the next response is encoded.
    pub fn begin_records(&mut self, records: FileRecords) {
        self.pending = records.entries;
        self.error = None;
    }

    /// Ends the response started by [`ResponseBuf::begin_records`].
    ///
    /// # Errors
    /// If a stand-in was not found where the encoder wrote records, or was written without
    /// being registered: the output would carry zeros instead of records, so the caller
    /// must not send it.
    pub fn end_records(&mut self) -> Result<(), String> {
        let leftover = std::mem::take(&mut self.pending);
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        if !leftover.is_empty() {
            return Err(format!(
                "{} record set(s) were not written by the encoder",
                leftover.len()
            ));
        }
        Ok(())
    }

    /// Takes every chunk out, leaving the buffer empty.
    pub fn take_chunks(&mut self) -> Vec<Chunk> {
        self.sealed_len = 0;
        std::mem::replace(&mut self.chunks, vec![Chunk::Mem(BytesMut::new())])
    }

    fn tail_ref(&self) -> &BytesMut {
        match self.chunks.last() {
            Some(Chunk::Mem(tail)) => tail,
            _ => unreachable!("the last chunk is always Mem"),
        }
    }

    /// The memory chunk new bytes go to.
    pub fn tail(&mut self) -> &mut BytesMut {
        if !matches!(self.chunks.last(), Some(Chunk::Mem(_))) {
            self.chunks.push(Chunk::Mem(BytesMut::new()));
        }
        match self.chunks.last_mut() {
            Some(Chunk::Mem(tail)) => tail,
            _ => unreachable!("just ensured"),
        }
    }

    /// If `src` is a stand-in, the regions it stands for.
    fn stand_in(&mut self, src: &[u8]) -> Option<Vec<FileRegion>> {
        let space = stand_in_space().as_ptr_range();
        let start = src.as_ptr();
        if src.is_empty() || !space.contains(&start) {
            return None;
        }
        let offset = start as usize - space.start as usize;
        match self.pending.iter().position(|(at, _)| *at == offset) {
            Some(i) => {
                let (_, regions) = self.pending.swap_remove(i);
                let len: usize = regions.iter().map(|r| r.len).sum();
                if len != src.len() {
                    self.error = Some(format!(
                        "stand-in of {} bytes for {len} bytes of records",
                        src.len()
                    ));
                }
                Some(regions)
            }
            None => {
                self.error = Some(format!("unregistered stand-in at offset {offset}"));
                None
            }
        }
    }

    fn push_regions(&mut self, regions: Vec<FileRegion>) {
        self.sealed_len += self.tail_ref().len();
        for region in regions {
            self.sealed_len += region.len;
            self.chunks.push(Chunk::File(region));
        }
        self.chunks.push(Chunk::Mem(BytesMut::new()));
    }

    /// Drops everything from logical offset `len` on.
    fn truncate(&mut self, len: usize) {
        while len < self.sealed_len {
            // The tail goes entirely; the chunk before it becomes the tail (or is cut).
            self.chunks.pop();
            match self.chunks.pop() {
                Some(Chunk::Mem(mem)) => {
                    self.sealed_len -= mem.len();
                    self.chunks.push(Chunk::Mem(mem));
                }
                Some(Chunk::File(mut region)) => {
                    self.sealed_len -= region.len;
                    if len > self.sealed_len {
                        region.len = len - self.sealed_len;
                        self.sealed_len = len;
                        self.chunks.push(Chunk::File(region));
                    }
                    self.chunks.push(Chunk::Mem(BytesMut::new()));
                }
                None => {
                    self.sealed_len = 0;
                    self.chunks.push(Chunk::Mem(BytesMut::new()));
                }
            }
        }
        let keep = len - self.sealed_len;
        self.tail().truncate(keep);
    }

    /// The bytes of logical `range`, which must lie within one memory chunk.
    fn mem_range(&mut self, range: Range<usize>) -> &mut [u8] {
        let mut end = self.len();
        for chunk in self.chunks.iter_mut().rev() {
            let len = match chunk {
                Chunk::Mem(mem) => mem.len(),
                Chunk::File(region) => region.len,
            };
            let start = end - len;
            if start <= range.start && range.end <= end {
                if let Chunk::Mem(mem) = chunk {
                    return &mut mem[range.start - start..range.end - start];
                }
                break;
            }
            end = start;
        }
        panic!("range {range:?} is not within one memory chunk");
    }
}

#[expect(
    unsafe_code,
    reason = "BufMut is an unsafe trait; every method delegates to the tail BytesMut"
)]
// SAFETY: `chunk_mut`, `advance_mut` and `remaining_mut` all act on the same tail
// `BytesMut`, which upholds BufMut's contract; `put_slice` only appends.
unsafe impl BufMut for ResponseBuf {
    fn remaining_mut(&self) -> usize {
        self.tail_ref().remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: forwarded; the caller initialised `cnt` bytes of the tail's `chunk_mut`.
        unsafe { self.tail().advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.tail().chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        match self.stand_in(src) {
            Some(regions) => self.push_regions(regions),
            None => self.tail().extend_from_slice(src),
        }
    }
}

impl ByteBufMut for ResponseBuf {
    fn offset(&self) -> usize {
        self.len()
    }

    fn seek(&mut self, offset: usize) {
        let len = self.len();
        if offset >= len {
            let tail_len = offset - self.sealed_len;
            self.tail().resize(tail_len, 0);
        } else {
            self.truncate(offset);
        }
    }

    fn range(&mut self, r: Range<usize>) -> &mut [u8] {
        self.mem_range(r)
    }
}

#[cfg(test)]
mod tests;
