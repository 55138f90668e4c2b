//! The records inside a v2 batch (Kafka's `DefaultRecord`), walked as byte slices over an
//! uncompressed buffer. The produce validator walks them to refuse malformed batches, and
//! log compaction will walk them to read keys; neither needs owned copies or kafka-protocol.
//!
//! Layout of one record (varints are zigzag, Kafka's `ByteUtils.readVarint`/`readVarlong`):
//!
//! ```text
//! length varint            bytes after this field
//! attributes i8            unused by v2, always 0 from current clients
//! timestampDelta varlong   record timestamp minus the batch's baseTimestamp
//! offsetDelta varint       record offset minus the batch's baseOffset
//! keyLength varint, key    -1 for a null key
//! valueLength varint, value
//! headerCount varint, then per header: keyLength varint (>= 0), key,
//!                                       valueLength varint (-1 null), value
//! ```

/// Why the bytes of a record are not a record. Messages follow Kafka's
/// `InvalidRecordException` texts so clients see familiar wording.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// The buffer ends inside a length prefix or field.
    #[error("found invalid record structure: the buffer ends inside a field")]
    Truncated,
    /// A varint runs past 5 bytes (varint) or 10 bytes (varlong).
    #[error("found invalid record structure: varint is too long")]
    VarintTooLong,
    /// The record's length prefix is negative or runs past the buffer.
    #[error("invalid record size: expected to read {expected} bytes in record payload, but only {remaining} remain")]
    InvalidSize {
        /// The length prefix.
        expected: i64,
        /// Bytes left in the buffer.
        remaining: usize,
    },
    /// The fields ended before (or would run past) the record's length prefix.
    #[error(
        "invalid record size: expected to read {expected} bytes in record payload, but read {read}"
    )]
    SizeMismatch {
        /// The length prefix.
        expected: usize,
        /// Bytes the fields used.
        read: usize,
    },
    /// A key or value length below -1.
    #[error("found invalid record structure: {field} length {length}")]
    InvalidLength {
        /// `key`, `value`, `header key` or `header value`.
        field: &'static str,
        /// The stored length.
        length: i32,
    },
    /// A negative header count.
    #[error("found invalid number of record headers {0}")]
    InvalidHeaderCount(i32),
}

/// One record of a batch, borrowed from the (decompressed) records buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Record attributes byte (no bits are defined for v2 records).
    pub attributes: i8,
    /// Timestamp relative to the batch's `baseTimestamp`.
    pub timestamp_delta: i64,
    /// Offset relative to the batch's `baseOffset`.
    pub offset_delta: i32,
    /// The key, `None` when null.
    pub key: Option<&'a [u8]>,
    /// The value, `None` when null (a tombstone on compacted topics).
    pub value: Option<&'a [u8]>,
    /// The headers, already checked to be well formed.
    pub headers: Headers<'a>,
    /// Bytes the record occupies in the buffer, length prefix included.
    pub size_bytes: usize,
}

/// The headers of a [`Record`]: `count` (key, value) pairs in `bytes`, checked when the
/// record was parsed, so iterating cannot fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Headers<'a> {
    count: usize,
    bytes: &'a [u8],
}

impl<'a> Headers<'a> {
    /// Number of headers.
    #[must_use]
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when the record has no headers.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The (key, value) pairs in order; a `None` value is a null header value.
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], Option<&'a [u8]>)> + 'a {
        let mut cursor = Cursor {
            buf: self.bytes,
            at: 0,
        };
        (0..self.count).map_while(move |_| cursor.header().ok())
    }
}

/// A read position in a buffer; every read is bounds-checked into a [`RecordError`].
struct Cursor<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    #[inline(always)]
    fn byte(&mut self) -> Result<u8, RecordError> {
        let b = *self.buf.get(self.at).ok_or(RecordError::Truncated)?;
        self.at += 1;
        Ok(b)
    }

    /// An unsigned LEB128 of at most `max_bytes` bytes.
    ///
    /// Small records' fields fit one or two bytes (deltas, lengths under 8 KiB, header
    /// counts): those return before the general loop. At 100 B values the record walk is
    /// most of the produce path's own CPU, and these are most of the walk.
    #[inline(always)]
    fn unsigned(&mut self, max_bytes: u32) -> Result<u64, RecordError> {
        let rest = self.buf.get(self.at..).unwrap_or_default();
        match *rest {
            [b0, ..] if b0 & 0x80 == 0 => {
                self.at += 1;
                Ok(u64::from(b0))
            }
            [b0, b1, ..] if b1 & 0x80 == 0 && max_bytes >= 2 => {
                self.at += 2;
                Ok(u64::from(b0 & 0x7f) | (u64::from(b1) << 7))
            }
            _ => self.unsigned_long(max_bytes),
        }
    }

    /// [`Cursor::unsigned`] past its one- and two-byte cases.
    #[inline(never)]
    fn unsigned_long(&mut self, max_bytes: u32) -> Result<u64, RecordError> {
        let mut value = 0u64;
        for i in 0..max_bytes {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordError::VarintTooLong)
    }

    /// A zigzag varint (i32), at most 5 bytes.
    #[inline(always)]
    fn varint(&mut self) -> Result<i32, RecordError> {
        let raw = self.unsigned(5)?;
        // Kafka reads 5 groups into an int, dropping bits above 32 of the last byte.
        let raw = raw as u32;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// A zigzag varlong (i64), at most 10 bytes.
    #[inline(always)]
    fn varlong(&mut self) -> Result<i64, RecordError> {
        let raw = self.unsigned(10)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    #[inline(always)]
    fn take(&mut self, len: usize) -> Result<&'a [u8], RecordError> {
        let end = self.at.checked_add(len).ok_or(RecordError::Truncated)?;
        let out = self.buf.get(self.at..end).ok_or(RecordError::Truncated)?;
        self.at = end;
        Ok(out)
    }

    /// A length-prefixed byte string; -1 is null, below -1 is invalid.
    #[inline]
    fn nullable_bytes(&mut self, field: &'static str) -> Result<Option<&'a [u8]>, RecordError> {
        let buf = self.buf;
        Ok(self
            .nullable_span(field)?
            .map(|(from, to)| buf.get(from..to).unwrap_or_default()))
    }

    /// [`Cursor::nullable_bytes`] as a (start, end) span of the buffer.
    #[inline(always)]
    fn nullable_span(
        &mut self,
        field: &'static str,
    ) -> Result<Option<(usize, usize)>, RecordError> {
        let length = self.varint()?;
        match usize::try_from(length) {
            Ok(len) => {
                let start = self.at;
                self.take(len)?;
                Ok(Some((start, self.at)))
            }
            Err(_) if length == -1 => Ok(None),
            Err(_) => Err(RecordError::InvalidLength { field, length }),
        }
    }

    fn header(&mut self) -> Result<(&'a [u8], Option<&'a [u8]>), RecordError> {
        let key = self
            .nullable_bytes("header key")?
            .ok_or(RecordError::InvalidLength {
                field: "header key",
                length: -1,
            })?;
        let value = self.nullable_bytes("header value")?;
        Ok((key, value))
    }
}

/// What the produce validator checks of one record, read by [`Record::skim`] without
/// building a [`Record`]: at 100 B values the record walk is most of the produce path's
/// own CPU, and carrying the borrowed fields out of every record is most of the walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordShape {
    /// Timestamp relative to the batch's `baseTimestamp`.
    pub timestamp_delta: i64,
    /// Offset relative to the batch's `baseOffset`.
    pub offset_delta: i32,
    /// False for a null key.
    pub has_key: bool,
    /// Bytes the record occupies in the buffer, length prefix included.
    pub size_bytes: usize,
}

/// Where one record's fields lie: every rule of [`Record::parse`] checked, nothing
/// borrowed yet. Positions are into the record's body (after the length prefix).
struct Layout {
    attributes: i8,
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<(usize, usize)>,
    value: Option<(usize, usize)>,
    header_count: usize,
    headers: (usize, usize),
    body_start: usize,
    size_bytes: usize,
}

impl Layout {
    #[inline(always)]
    fn of(buf: &[u8]) -> Result<Layout, RecordError> {
        let mut outer = Cursor { buf, at: 0 };
        let length = outer.varint()?;
        let body_start = outer.at;
        let remaining = buf.len() - body_start;
        let body_len = usize::try_from(length)
            .ok()
            .filter(|&len| len <= remaining)
            .ok_or(RecordError::InvalidSize {
                expected: i64::from(length),
                remaining,
            })?;
        let body = outer.take(body_len)?;
        let mut c = Cursor { buf: body, at: 0 };
        // Running out of body bytes means the length prefix was too short.
        let mismatch = |e: RecordError| match e {
            RecordError::Truncated => RecordError::SizeMismatch {
                expected: body_len,
                read: body_len + 1,
            },
            other => other,
        };
        let attributes = c.byte().map_err(mismatch)? as i8;
        let timestamp_delta = c.varlong().map_err(mismatch)?;
        let offset_delta = c.varint().map_err(mismatch)?;
        let key = c.nullable_span("key").map_err(mismatch)?;
        let value = c.nullable_span("value").map_err(mismatch)?;
        let header_count = c.varint().map_err(mismatch)?;
        let count = usize::try_from(header_count)
            .map_err(|_| RecordError::InvalidHeaderCount(header_count))?;
        let headers_start = c.at;
        for _ in 0..count {
            c.header().map_err(mismatch)?;
        }
        if c.at != body_len {
            return Err(RecordError::SizeMismatch {
                expected: body_len,
                read: c.at,
            });
        }
        Ok(Layout {
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            value,
            header_count: count,
            headers: (headers_start, c.at),
            body_start,
            size_bytes: outer.at,
        })
    }
}

impl<'a> Record<'a> {
    /// Parses the record at the start of `buf` (length prefix first). The record must
    /// use exactly the bytes its length prefix announces.
    ///
    /// # Errors
    /// A [`RecordError`] naming the first field that does not fit.
    pub fn parse(buf: &'a [u8]) -> Result<Self, RecordError> {
        let layout = Layout::of(buf)?;
        let body = buf
            .get(layout.body_start..layout.size_bytes)
            .unwrap_or_default();
        let span = |(from, to): (usize, usize)| body.get(from..to).unwrap_or_default();
        Ok(Self {
            attributes: layout.attributes,
            timestamp_delta: layout.timestamp_delta,
            offset_delta: layout.offset_delta,
            key: layout.key.map(span),
            value: layout.value.map(span),
            headers: Headers {
                count: layout.header_count,
                bytes: span(layout.headers),
            },
            size_bytes: layout.size_bytes,
        })
    }

    /// Checks the record at the start of `buf` exactly as [`Record::parse`] does, and
    /// returns only what the produce validator needs of it.
    ///
    /// # Errors
    /// As [`Record::parse`].
    #[inline]
    pub fn skim(buf: &[u8]) -> Result<RecordShape, RecordError> {
        let layout = Layout::of(buf)?;
        Ok(RecordShape {
            timestamp_delta: layout.timestamp_delta,
            offset_delta: layout.offset_delta,
            has_key: layout.key.is_some(),
            size_bytes: layout.size_bytes,
        })
    }
}

/// Walks the back-to-back records of an uncompressed records buffer (the bytes after a
/// batch header, decompressed if the batch is compressed). Yields each record or the first
/// error, then stops; it does not know the batch's `recordsCount`, the caller compares.
pub struct RecordIter<'a> {
    buf: &'a [u8],
    failed: bool,
}

impl<'a> RecordIter<'a> {
    /// A walker over `records` (no batch header).
    #[must_use]
    pub fn new(records: &'a [u8]) -> Self {
        Self {
            buf: records,
            failed: false,
        }
    }

    /// Bytes not yet walked.
    #[must_use]
    pub fn remaining(&self) -> &'a [u8] {
        self.buf
    }
}

impl<'a> Iterator for RecordIter<'a> {
    type Item = Result<Record<'a>, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.buf.is_empty() {
            return None;
        }
        match Record::parse(self.buf) {
            Ok(record) => {
                self.buf = self.buf.get(record.size_bytes..).unwrap_or_default();
                Some(Ok(record))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
