//! RecordBatch v2 as bytes: a header view, batch framing/CRC validation and the two
//! in-place rewrites the broker does before appending (offsets, max timestamp). The
//! records inside are walked by `record` and checked by `log_validator`.
//!
//! The wire format of a batch is its disk format, so the log never decodes records:
//! it only reads the fixed 61-byte header. Layout (big-endian, offsets in bytes):
//!
//! ```text
//!  0 baseOffset i64          12 partitionLeaderEpoch i32   16 magic i8 (= 2)
//!  8 batchLength i32         17 crc u32 (CRC-32C of bytes 21..end)
//! 21 attributes i16          23 lastOffsetDelta i32        27 baseTimestamp i64
//! 35 maxTimestamp i64        43 producerId i64             51 producerEpoch i16
//! 53 baseSequence i32        57 recordsCount i32           61 records...
//! ```
//!
//! `baseOffset`, `batchLength` and `partitionLeaderEpoch` are outside the CRC, which is
//! why the broker can assign offsets without recomputing it.

/// Bytes before `batchLength` counts: baseOffset (8) + batchLength (4).
pub const LOG_OVERHEAD_BYTES: usize = 12;
/// The full v2 header, up to and including `recordsCount`.
pub const BATCH_HEADER_BYTES: usize = 61;
/// Smallest legal `batchLength`: a header with no records.
pub const BATCH_LENGTH_MIN: i32 = (BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES) as i32;

const PARTITION_LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORDS_COUNT_AT: usize = 57;
// The header ends exactly where recordsCount ends.
const _: () = assert!(RECORDS_COUNT_AT + 4 == BATCH_HEADER_BYTES);
const _: () = assert!(BATCH_LENGTH_MIN == 49);

/// The only magic (format version) this crate stores.
pub const MAGIC_V2: i8 = 2;
/// Highest compression codec id Kafka defines (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
const CODEC_MAX: u8 = 4;
/// Attribute bit 3: the batch's timestamps are the broker's append time.
pub(crate) const ATTR_TIMESTAMP_TYPE: i16 = 0x08;
pub(crate) const ATTR_TRANSACTIONAL: i16 = 0x10;
pub(crate) const ATTR_CONTROL: i16 = 0x20;
/// Attribute bit 6 (KIP-534): the base timestamp holds the batch's delete horizon, set by
/// log compaction on a batch it keeps only until then.
pub(crate) const ATTR_DELETE_HORIZON: i16 = 0x40;

/// A decoded copy of a v2 batch header. `Copy`, 64 bytes: cheap to pass around.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordBatchHeader {
    /// Offset of the first record (assigned by the broker on append).
    pub base_offset: i64,
    /// Bytes after this field: the batch occupies `12 + batch_length` bytes.
    pub batch_length: i32,
    /// Leader epoch at append time (assigned by the broker, outside the CRC).
    pub partition_leader_epoch: i32,
    /// Format version; always 2 once parsed.
    pub magic: i8,
    /// Stored CRC-32C of bytes 21..end.
    pub crc: u32,
    /// Codec (bits 0-2), timestamp type (3), transactional (4), control (5).
    pub attributes: i16,
    /// Last offset minus base offset.
    pub last_offset_delta: i32,
    /// Timestamp of the first record.
    pub base_timestamp: i64,
    /// Largest record timestamp (or the append time under LogAppendTime).
    pub max_timestamp: i64,
    /// Idempotent/transactional producer id, -1 if none.
    pub producer_id: i64,
    /// Producer epoch, -1 if none.
    pub producer_epoch: i16,
    /// Sequence of the first record, -1 if none.
    pub base_sequence: i32,
    /// Number of records in the batch.
    pub records_count: i32,
}

/// Why a batch (or a produce payload) is not acceptable.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum BatchError {
    /// Fewer bytes than a header needs at `position`.
    #[error("truncated record batch at position {position}")]
    Truncated {
        /// Start of the incomplete batch in the buffer.
        position: usize,
    },
    /// Magic byte other than 2 (v0/v1 message sets are not stored).
    #[error("unsupported record batch magic {0}")]
    UnsupportedMagic(i8),
    /// `batchLength` below the header size or beyond the end of the buffer.
    #[error("invalid batch length {length} at position {position}")]
    InvalidLength {
        /// Start of the batch in the buffer.
        position: usize,
        /// The stored `batchLength`.
        length: i32,
    },
    /// Stored CRC differs from the CRC-32C of the batch bytes.
    #[error(
        "crc mismatch at position {position}: stored {stored:#010x}, computed {computed:#010x}"
    )]
    CrcMismatch {
        /// Start of the batch in the buffer.
        position: usize,
        /// CRC in the header.
        stored: u32,
        /// CRC of the bytes.
        computed: u32,
    },
    /// `recordsCount` < 1 or inconsistent with `lastOffsetDelta`.
    #[error("invalid record count {count} (last offset delta {last_offset_delta}) at position {position}")]
    InvalidRecordCount {
        /// Start of the batch in the buffer.
        position: usize,
        /// The stored `recordsCount`.
        count: i32,
        /// The stored `lastOffsetDelta`.
        last_offset_delta: i32,
    },
    /// Compression codec id above 4.
    #[error("invalid compression codec {codec} at position {position}")]
    InvalidCodec {
        /// Start of the batch in the buffer.
        position: usize,
        /// The codec bits of `attributes`.
        codec: u8,
    },
    /// The payload holds no bytes at all.
    #[error("empty record set")]
    Empty,
}

/// Copies `N` bytes at `at`. Callers check `buf.len() >= at + N` first.
fn bytes_at<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(
        buf.get(at..at + N)
            .expect("caller checked the buffer holds a whole header"),
    );
    out
}

fn i64_at(buf: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(bytes_at(buf, at))
}
fn i32_at(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(bytes_at(buf, at))
}
fn i16_at(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(bytes_at(buf, at))
}
fn put(buf: &mut [u8], at: usize, value: &[u8]) {
    buf.get_mut(at..at + value.len())
        .expect("caller checked the buffer holds a whole header")
        .copy_from_slice(value);
}

impl RecordBatchHeader {
    /// Parses the header at the start of `buf` (big-endian, Kafka layout).
    ///
    /// Fewer than 17 bytes (not enough to see magic) -> [`BatchError::Truncated`];
    /// magic != 2 -> [`BatchError::UnsupportedMagic`] (checked before requiring 61
    /// bytes, since magic 0/1 message sets are shorter); then 61 bytes are required.
    /// Does not check `batch_length`, the CRC or that the whole batch is present.
    pub fn parse(buf: &[u8]) -> Result<Self, BatchError> {
        let Some(&magic) = buf.get(MAGIC_AT) else {
            return Err(BatchError::Truncated { position: 0 });
        };
        let magic = magic as i8;
        if magic != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic(magic));
        }
        if buf.len() < BATCH_HEADER_BYTES {
            return Err(BatchError::Truncated { position: 0 });
        }
        Ok(Self {
            base_offset: i64_at(buf, 0),
            batch_length: i32_at(buf, 8),
            partition_leader_epoch: i32_at(buf, PARTITION_LEADER_EPOCH_AT),
            magic,
            crc: u32::from_be_bytes(bytes_at(buf, CRC_AT)),
            attributes: i16_at(buf, ATTRIBUTES_AT),
            last_offset_delta: i32_at(buf, LAST_OFFSET_DELTA_AT),
            base_timestamp: i64_at(buf, BASE_TIMESTAMP_AT),
            max_timestamp: i64_at(buf, MAX_TIMESTAMP_AT),
            producer_id: i64_at(buf, PRODUCER_ID_AT),
            producer_epoch: i16_at(buf, PRODUCER_EPOCH_AT),
            base_sequence: i32_at(buf, BASE_SEQUENCE_AT),
            records_count: i32_at(buf, RECORDS_COUNT_AT),
        })
    }

    /// Bytes the whole batch occupies: `LOG_OVERHEAD_BYTES + batch_length`.
    /// Only meaningful once `batch_length >= BATCH_LENGTH_MIN` was checked (a negative
    /// length yields a value below the header size, never a panic).
    pub fn total_bytes(&self) -> usize {
        LOG_OVERHEAD_BYTES.saturating_add_signed(self.batch_length as isize)
    }

    /// Offset of the last record: `base_offset + last_offset_delta`.
    pub fn last_offset(&self) -> i64 {
        self.base_offset + i64::from(self.last_offset_delta)
    }

    /// Offsets the batch spans: `last_offset_delta + 1` (compaction may remove records
    /// but never changes the span).
    pub fn record_count_by_offsets(&self) -> i64 {
        i64::from(self.last_offset_delta) + 1
    }

    /// Compression codec: `attributes & 0x7`.
    pub fn compression_codec(&self) -> u8 {
        (self.attributes & 0x7) as u8
    }

    /// Attribute bit 3: timestamps are the broker's append time.
    pub fn is_log_append_time(&self) -> bool {
        self.attributes & ATTR_TIMESTAMP_TYPE != 0
    }

    /// Attribute bit 4: part of a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & ATTR_TRANSACTIONAL != 0
    }

    /// Attribute bit 5: a control batch (commit/abort marker).
    pub fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    /// Kafka's `deleteHorizonMs`: when attribute bit 6 is set, the time (in the base
    /// timestamp field) after which log compaction removes the batch's markers.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        (self.attributes & ATTR_DELETE_HORIZON != 0).then_some(self.base_timestamp)
    }
}

/// CRC-32C (Castagnoli) of a whole batch's checksummed part (bytes 21..end).
/// `batch` must be exactly one whole batch of at least `BATCH_HEADER_BYTES`.
pub(crate) fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(batch.get(ATTRIBUTES_AT..).unwrap_or_default())
}

/// Summary of a validated produce payload.
#[derive(Clone, Copy, Debug)]
pub struct BatchesSummary {
    /// Number of batches in the payload.
    pub batch_count: usize,
    /// Sum of `last_offset_delta + 1`: the offsets the append will consume.
    pub record_count: i64,
    /// Size of the largest batch, for `max.message.bytes` checks.
    pub largest_batch_bytes: usize,
    /// Largest `max_timestamp` of any batch.
    pub max_timestamp: i64,
}

/// Validates a produce payload of one or more back-to-back v2 batches without decoding
/// records.
///
/// Per batch, in this order: at least 17 bytes remain (else `Truncated`); magic is 2
/// (else `UnsupportedMagic`); `batchLength` is >= 49 and fits in the rest of `buf`
/// (else `InvalidLength`, which is how a trailing partial batch is reported once its
/// length is readable); the CRC-32C over bytes 21..end matches (`CrcMismatch`);
/// `recordsCount >= 1` and `lastOffsetDelta == recordsCount - 1` (`InvalidRecordCount`:
/// produce batches are never compacted, and an empty batch would consume no offsets);
/// codec in 0..=4 (`InvalidCodec`). An empty `buf` is `Empty`.
pub fn validate_batches(buf: &[u8]) -> Result<BatchesSummary, BatchError> {
    if buf.is_empty() {
        return Err(BatchError::Empty);
    }
    let mut summary = BatchesSummary {
        batch_count: 0,
        record_count: 0,
        largest_batch_bytes: 0,
        max_timestamp: -1,
    };
    let mut position = 0usize;
    while position < buf.len() {
        let rest = buf.get(position..).unwrap_or_default();
        if rest.len() <= MAGIC_AT {
            return Err(BatchError::Truncated { position });
        }
        let length = i32_at(rest, 8);
        let header = match RecordBatchHeader::parse(rest) {
            Ok(header) => header,
            Err(BatchError::Truncated { .. }) => {
                // Magic is fine but the header is incomplete: the length cannot fit.
                return Err(BatchError::InvalidLength { position, length });
            }
            Err(other) => return Err(other),
        };
        if length < BATCH_LENGTH_MIN || length as usize > rest.len() - LOG_OVERHEAD_BYTES {
            return Err(BatchError::InvalidLength { position, length });
        }
        let total = header.total_bytes();
        let batch = rest.get(..total).unwrap_or_default();
        let computed = compute_crc(batch);
        if computed != header.crc {
            return Err(BatchError::CrcMismatch {
                position,
                stored: header.crc,
                computed,
            });
        }
        if header.records_count < 1 || header.last_offset_delta != header.records_count - 1 {
            return Err(BatchError::InvalidRecordCount {
                position,
                count: header.records_count,
                last_offset_delta: header.last_offset_delta,
            });
        }
        let codec = header.compression_codec();
        if codec > CODEC_MAX {
            return Err(BatchError::InvalidCodec { position, codec });
        }
        summary.batch_count += 1;
        summary.record_count += header.record_count_by_offsets();
        summary.largest_batch_bytes = summary.largest_batch_bytes.max(total);
        summary.max_timestamp = summary.max_timestamp.max(header.max_timestamp);
        position += total;
    }
    Ok(summary)
}

/// Iterator behind [`iter_headers`].
struct HeaderIter<'a> {
    buf: &'a [u8],
    position: usize,
}

impl Iterator for HeaderIter<'_> {
    type Item = (usize, RecordBatchHeader);

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.buf.get(self.position..)?;
        let header = RecordBatchHeader::parse(rest).ok()?;
        if header.batch_length < BATCH_LENGTH_MIN || header.total_bytes() > rest.len() {
            return None;
        }
        let position = self.position;
        self.position += header.total_bytes();
        Some((position, header))
    }
}

/// Walks back-to-back batches (data already validated or read from disk): yields
/// `(position, header)` for each whole batch and stops at the first incomplete or
/// unparsable one. Checks no CRC.
pub fn iter_headers(buf: &[u8]) -> impl Iterator<Item = (usize, RecordBatchHeader)> + '_ {
    HeaderIter { buf, position: 0 }
}

/// Rewrites `baseOffset` and `partitionLeaderEpoch` of every batch in `buf` (both are
/// outside the CRC, so the CRC stays valid); the first batch gets `first_offset`, each
/// next one follows the previous batch's last offset. Returns the offset after the last
/// batch. Stops at the first incomplete batch, like [`iter_headers`].
///
/// The in-place form of what `Log::append` writes (it writes [`offset_patch`] before each
/// untouched batch body instead of rewriting a copy); both go through `offset_patch`.
pub fn assign_offsets(buf: &mut [u8], first_offset: i64, leader_epoch: i32) -> i64 {
    let batches: Vec<(usize, RecordBatchHeader)> = iter_headers(buf).collect();
    let mut next = first_offset;
    for (position, mut header) in batches {
        header.base_offset = next;
        header.partition_leader_epoch = leader_epoch;
        put(buf, position, &offset_patch(&header));
        next = header.last_offset() + 1;
    }
    next
}

/// Bytes of a batch's head that [`assign_offsets`] rewrites: base offset, batch length and
/// partition leader epoch, all outside the CRC.
pub const OFFSET_PATCH_BYTES: usize = 16;
const _: () = assert!(PARTITION_LEADER_EPOCH_AT + 4 == OFFSET_PATCH_BYTES);

/// The first [`OFFSET_PATCH_BYTES`] of the batch `header` describes, as stored: a log
/// writes these followed by the rest of the batch as received, instead of copying the
/// batch to rewrite it.
#[must_use]
pub fn offset_patch(header: &RecordBatchHeader) -> [u8; OFFSET_PATCH_BYTES] {
    let mut patch = [0u8; OFFSET_PATCH_BYTES];
    put(&mut patch, 0, &header.base_offset.to_be_bytes());
    put(&mut patch, 8, &header.batch_length.to_be_bytes());
    put(
        &mut patch,
        PARTITION_LEADER_EPOCH_AT,
        &header.partition_leader_epoch.to_be_bytes(),
    );
    patch
}

/// For `message.timestamp.type=LogAppendTime`: sets attribute bit 3 and
/// `maxTimestamp = now_ms` on every batch and recomputes its CRC (both fields are inside
/// the CRC). Record timestamps are left alone: readers ignore them under this type.
pub fn set_log_append_time(buf: &mut [u8], now_ms: i64) {
    let batches: Vec<(usize, usize, i16)> = iter_headers(buf)
        .map(|(position, header)| (position, header.total_bytes(), header.attributes))
        .collect();
    for (position, total, attributes) in batches {
        let batch = buf
            .get_mut(position..position + total)
            .expect("iter_headers yields only whole batches");
        let _crc = set_timestamps(batch, attributes | ATTR_TIMESTAMP_TYPE, now_ms);
    }
}

/// Writes `attributes` and `maxTimestamp` into one whole batch and recomputes its CRC
/// (Kafka's `DefaultRecordBatch.setMaxTimestamp`): the only rewrite inside the CRC the
/// broker does. `batch` must be exactly one whole batch. Returns the new CRC.
pub(crate) fn set_timestamps(batch: &mut [u8], attributes: i16, max_timestamp: i64) -> u32 {
    assert!(
        BATCH_HEADER_BYTES <= batch.len(),
        "batch of {} bytes is shorter than a header",
        batch.len()
    );
    put(batch, ATTRIBUTES_AT, &attributes.to_be_bytes());
    put(batch, MAX_TIMESTAMP_AT, &max_timestamp.to_be_bytes());
    let crc = compute_crc(batch);
    put(batch, CRC_AT, &crc.to_be_bytes());
    crc
}

/// One whole batch with `header_of`'s header (the first [`BATCH_HEADER_BYTES`]) and
/// `records` as its records section: `batchLength` fitted, `attributes` and
/// `maxTimestamp` written and the CRC recomputed (Kafka rebuilding a batch in another
/// codec, as `LogValidator` does for a topic's `compression.type`).
///
/// # Errors
/// A records section too large for a batch.
pub(crate) fn rebuilt_with_records(
    header_of: &[u8],
    attributes: i16,
    max_timestamp: i64,
    records: &[u8],
) -> Result<Vec<u8>, BatchError> {
    let header = header_of
        .get(..BATCH_HEADER_BYTES)
        .ok_or(BatchError::Truncated { position: 0 })?;
    let length =
        i32::try_from(BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES + records.len()).map_err(|_| {
            BatchError::InvalidLength {
                position: 0,
                length: i32::MAX,
            }
        })?;
    let mut batch = Vec::with_capacity(BATCH_HEADER_BYTES + records.len());
    batch.extend_from_slice(header);
    batch.extend_from_slice(records);
    put(&mut batch, 8, &length.to_be_bytes());
    set_timestamps(&mut batch, attributes, max_timestamp);
    Ok(batch)
}

#[cfg(test)]
mod tests;
