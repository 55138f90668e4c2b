//! LogValidator: the door every produced batch passes before it is appended, as Kafka's
//! `LogValidator` is. A correct CRC proves nothing about the records inside, and one
//! accepted malformed batch stalls every consumer of its partition forever, so this walks
//! every record (decompressing compressed batches), refuses what a client may not write
//! (control batches, transactional batches without a producer id, idempotent batches
//! without a sequence) and recomputes each batch's `maxTimestamp` from its records.
//!
//! The result, [`ValidatedBatches`], is what the log appends: its bytes are the bytes
//! received, except where Kafka also rewrites them (`maxTimestamp` and the timestamp-type
//! bit, with a new CRC; and a batch rebuilt in the topic's `compression.type` when that
//! is not `producer` and differs from the batch's codec).
//!
//! Errors name Kafka's exceptions (`CorruptRecordException`, `InvalidRecordException`,
//! `InvalidTimestampException`, `RecordTooLargeException`); the broker maps them to codes.

use bytes::{Bytes, BytesMut};

use crate::compression::{self, DecompressError, CODEC_NONE};
use crate::record::{Record, RecordError};
use crate::record_batch::{self, BatchError, RecordBatchHeader, BATCH_HEADER_BYTES};

/// Kafka's `RecordBatch.NO_TIMESTAMP`.
pub const NO_TIMESTAMP: i64 = -1;

/// Who appends: clients are held to more rules than the broker's own coordinators
/// (Kafka's `AppendOrigin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer, through Produce.
    Client,
    /// A coordinator of this broker (group metadata, transaction markers).
    Coordinator,
}

/// What the topic and the broker impose on a produce payload.
#[derive(Clone, Copy, Debug)]
pub struct ValidatorConfig {
    /// Who appends.
    pub origin: AppendOrigin,
    /// `message.timestamp.type=LogAppendTime`: batches get `now_ms` as their timestamp.
    pub log_append_time: bool,
    /// `cleanup.policy` includes `compact`: every record needs a key.
    pub compacted: bool,
    /// `max.message.bytes`: the largest batch, in bytes as sent.
    pub max_message_bytes: usize,
    /// `message.timestamp.before.max.ms`: how far in the past a CreateTime may be.
    pub timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far in the future a CreateTime may be.
    pub timestamp_after_max_ms: i64,
    /// The broker's clock for this append.
    pub now_ms: i64,
    /// Bound on one batch's decompressed records, against decompression bombs.
    pub decompressed_bytes_max: usize,
    /// The topic's `compression.type` as a codec id (0 uncompressed, 1 gzip, 2 snappy,
    /// 3 lz4, 4 zstd): a batch in another codec is rebuilt in this one, as Kafka's
    /// `LogValidator` does. `None` for `producer`: batches are stored as sent.
    pub target_codec: Option<u8>,
}

/// One batch of a [`ValidatedBatches`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValidatedBatch {
    /// Where the batch starts in [`ValidatedBatches::bytes`].
    pub position: usize,
    /// Its header as it is in those bytes: `max_timestamp` is the largest record timestamp
    /// (CreateTime) or the append time (LogAppendTime); `base_offset` is still the
    /// producer's (the log assigns offsets when it writes).
    pub header: RecordBatchHeader,
    /// Offset delta of the first record carrying `max_timestamp` (the last record under
    /// LogAppendTime), for the time index and ListOffsets MAX_TIMESTAMP.
    pub offset_delta_of_max_timestamp: i32,
}

/// A produce payload that passed [`validate`]: the bytes to append and what the append
/// needs to know about each batch, parsed once here so nothing downstream re-parses.
///
/// Invariant: `bytes` is whole v2 batches with correct CRCs, back to back, and
/// `batches[i]` describes the batch at `batches[i].position` exactly.
#[derive(Clone, Debug)]
pub struct ValidatedBatches {
    bytes: Bytes,
    batches: Vec<ValidatedBatch>,
    log_append_time_ms: Option<i64>,
}

impl ValidatedBatches {
    /// The bytes to append (offsets not yet assigned).
    #[must_use]
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// The batches, in order.
    #[must_use]
    pub fn batches(&self) -> &[ValidatedBatch] {
        &self.batches
    }

    /// Offsets the append consumes: the sum of `last_offset_delta + 1`.
    #[must_use]
    pub fn record_count(&self) -> i64 {
        self.batches
            .iter()
            .map(|b| b.header.record_count_by_offsets())
            .sum()
    }

    /// Largest `max_timestamp` of any batch, [`NO_TIMESTAMP`] if none has one.
    #[must_use]
    pub fn max_timestamp(&self) -> i64 {
        self.batches
            .iter()
            .map(|b| b.header.max_timestamp)
            .max()
            .unwrap_or(NO_TIMESTAMP)
    }

    /// The append time stamped on the batches under LogAppendTime, else `None`.
    #[must_use]
    pub fn log_append_time_ms(&self) -> Option<i64> {
        self.log_append_time_ms
    }
}

/// A record that was refused, as ProduceResponse v8+ reports it (`batch_index` is the
/// record's index within its batch, Kafka's `RecordError`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectedRecord {
    /// Index of the record in its batch.
    pub batch_index: i32,
    /// Why.
    pub message: String,
}

/// Why a produce payload is refused.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ValidationError {
    /// The batch framing or CRC is wrong (Kafka: `CorruptRecordException`).
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// A batch is larger than `max.message.bytes` (Kafka: `RecordTooLargeException`).
    #[error("batch of {batch_bytes} bytes exceeds max.message.bytes {max_message_bytes}")]
    MessageTooLarge {
        /// Size of the batch.
        batch_bytes: usize,
        /// The limit.
        max_message_bytes: usize,
    },
    /// A compressed batch's records are not in its codec (Kafka fails inside the codec's
    /// stream; a corrupt payload is what it is).
    #[error("batch at position {position}: {source}")]
    Corrupt {
        /// Start of the batch.
        position: usize,
        /// The decompression failure.
        source: DecompressError,
    },
    /// The batch or its records break the format or a client rule (Kafka:
    /// `InvalidRecordException`); `records` names the offending records, if any.
    #[error("{message}")]
    InvalidRecord {
        /// What is wrong.
        message: String,
        /// The offending records.
        records: Vec<RejectedRecord>,
    },
    /// Record timestamps outside the topic's allowed window, or a producer claiming
    /// LogAppendTime (Kafka: `InvalidTimestampException`).
    #[error("{message}")]
    InvalidTimestamp {
        /// What is wrong.
        message: String,
        /// The offending records.
        records: Vec<RejectedRecord>,
    },
}

impl ValidationError {
    /// The refused records, for ProduceResponse `record_errors`.
    #[must_use]
    pub fn rejected_records(&self) -> &[RejectedRecord] {
        match self {
            Self::InvalidRecord { records, .. } | Self::InvalidTimestamp { records, .. } => records,
            Self::Batch(_) | Self::MessageTooLarge { .. } | Self::Corrupt { .. } => &[],
        }
    }
}

fn invalid(message: String) -> ValidationError {
    ValidationError::InvalidRecord {
        message,
        records: Vec::new(),
    }
}

fn invalid_at(batch_index: usize, message: String) -> ValidationError {
    ValidationError::InvalidRecord {
        message: format!("record {batch_index}: {message}"),
        records: vec![RejectedRecord {
            batch_index: i32::try_from(batch_index).unwrap_or(i32::MAX),
            message,
        }],
    }
}

/// Validates a produce payload as Kafka's `LogValidator` does and returns what to append.
///
/// In order: framing and CRC of every batch ([`record_batch::validate_batches`]);
/// `max.message.bytes`; the client rules
/// (no control batch, a producer id on transactional batches, a sequence on idempotent
/// ones); then every record: it parses, its offset delta is its index, its timestamp
/// does not overflow, it has a key on a compacted topic, its CreateTime lies within the
/// topic's window; the records exactly fill the batch and number `recordsCount`.
/// Finally `maxTimestamp` is set to the records' maximum (CreateTime) or `now_ms`
/// (LogAppendTime), rewriting the batch and its CRC only if it differs.
///
/// CPU: one pass over the records; compressed batches are decompressed into one buffer of
/// at most `decompressed_bytes_max` bytes. Callers on async workers should run large
/// payloads under `block_in_place`.
///
/// # Errors
/// The first [`ValidationError`]; record-level failures of one batch are collected.
pub fn validate(
    bytes: Bytes,
    config: &ValidatorConfig,
) -> Result<ValidatedBatches, ValidationError> {
    let summary = record_batch::validate_batches(&bytes)?;
    if summary.largest_batch_bytes > config.max_message_bytes {
        return Err(ValidationError::MessageTooLarge {
            batch_bytes: summary.largest_batch_bytes,
            max_message_bytes: config.max_message_bytes,
        });
    }
    // One v2 batch per partition per request, as Kafka's LogValidator insists: a
    // producer's sequence numbers, a transaction's markers and the per-batch answer all
    // assume it, and no client sends more.
    if summary.batch_count > 1 {
        return Err(ValidationError::InvalidRecord {
            message: format!(
                "a produce request carries one record batch per partition, not {}",
                summary.batch_count
            ),
            records: Vec::new(),
        });
    }
    let mut batches = Vec::with_capacity(summary.batch_count);
    let mut recompressed = Vec::new();
    for (position, header) in record_batch::iter_headers(&bytes) {
        let batch = bytes
            .get(position..position + header.total_bytes())
            .unwrap_or_default();
        let (validated, records) = validate_batch(position, header, batch, config)?;
        if let Some(records) = records {
            recompressed.push((batches.len(), records));
        }
        batches.push(validated);
    }
    if !recompressed.is_empty() {
        return rebuild_in_target_codec(&bytes, batches, recompressed, config);
    }
    // Kafka's setMaxTimestamp: rewrite (and re-checksum) only a batch whose stored
    // timestamp type or max timestamp differs from the validated one.
    let stale: Vec<usize> = batches
        .iter()
        .enumerate()
        .filter(|(_, b)| {
            let sent = RecordBatchHeader::parse(bytes.get(b.position..).unwrap_or_default());
            sent.ok().is_none_or(|sent| {
                sent.attributes != b.header.attributes
                    || sent.max_timestamp != b.header.max_timestamp
            })
        })
        .map(|(i, _)| i)
        .collect();
    let bytes = if stale.is_empty() {
        bytes
    } else {
        let mut copy = BytesMut::from(&bytes[..]);
        for i in stale {
            let b = batches.get_mut(i).expect("index from enumerate");
            let end = b.position + b.header.total_bytes();
            let batch = copy
                .get_mut(b.position..end)
                .expect("validate_batches checked every batch is whole");
            b.header.crc =
                record_batch::set_timestamps(batch, b.header.attributes, b.header.max_timestamp);
        }
        copy.freeze()
    };
    Ok(ValidatedBatches {
        bytes,
        batches,
        log_append_time_ms: config.log_append_time.then_some(config.now_ms),
    })
}

/// The payload with the batches of `recompressed` (index, new records section) rebuilt
/// in the topic's codec: new length, attributes, `maxTimestamp` and CRC; the others
/// as validated. Kafka refuses a batch the new codec made larger than
/// `max.message.bytes` (`RecordTooLargeException`), and so does this.
fn rebuild_in_target_codec(
    bytes: &Bytes,
    mut batches: Vec<ValidatedBatch>,
    recompressed: Vec<(usize, Vec<u8>)>,
    config: &ValidatorConfig,
) -> Result<ValidatedBatches, ValidationError> {
    let mut out = BytesMut::with_capacity(bytes.len());
    let mut sections = recompressed.into_iter().peekable();
    for (i, b) in batches.iter_mut().enumerate() {
        let original = bytes
            .get(b.position..b.position + b.header.total_bytes())
            .unwrap_or_default();
        b.position = out.len();
        match sections.next_if(|(at, _)| *at == i) {
            Some((_, records)) => {
                let rebuilt = record_batch::rebuilt_with_records(
                    original,
                    b.header.attributes,
                    b.header.max_timestamp,
                    &records,
                )?;
                if rebuilt.len() > config.max_message_bytes {
                    return Err(ValidationError::MessageTooLarge {
                        batch_bytes: rebuilt.len(),
                        max_message_bytes: config.max_message_bytes,
                    });
                }
                let stored = RecordBatchHeader::parse(&rebuilt)?;
                (b.header.crc, b.header.batch_length) = (stored.crc, stored.batch_length);
                out.extend_from_slice(&rebuilt);
            }
            None => {
                // Kept in its codec: the timestamp rewrite `validate` does otherwise.
                out.extend_from_slice(original);
                let stored = out.get_mut(b.position..).expect("just written");
                b.header.crc = record_batch::set_timestamps(
                    stored,
                    b.header.attributes,
                    b.header.max_timestamp,
                );
            }
        }
    }
    Ok(ValidatedBatches {
        bytes: out.freeze(),
        batches,
        log_append_time_ms: config.log_append_time.then_some(config.now_ms),
    })
}

/// The batch-level rules Kafka's `validateBatch` applies to client appends.
fn validate_client_batch(header: &RecordBatchHeader) -> Result<(), ValidationError> {
    if header.is_control() {
        return Err(invalid(
            "clients are not allowed to write control records".to_string(),
        ));
    }
    let has_producer_id = header.producer_id >= 0;
    if has_producer_id && header.base_sequence < 0 {
        return Err(invalid(format!(
            "invalid sequence number {} in record batch with producer id {}",
            header.base_sequence, header.producer_id
        )));
    }
    if header.is_transactional() && !has_producer_id {
        return Err(invalid(format!(
            "transactional record batch without a producer id (producer id {})",
            header.producer_id
        )));
    }
    Ok(())
}

/// Walks one whole batch's records; returns its header with the recomputed max timestamp
/// (and, for a batch to store in another codec, the codec bits of `attributes` changed)
/// and, for such a batch, its records section in the topic's codec.
fn validate_batch(
    position: usize,
    mut header: RecordBatchHeader,
    batch: &[u8],
    config: &ValidatorConfig,
) -> Result<(ValidatedBatch, Option<Vec<u8>>), ValidationError> {
    if config.origin == AppendOrigin::Client {
        validate_client_batch(&header)?;
    }
    let records_section = batch.get(BATCH_HEADER_BYTES..).unwrap_or_default();
    let decompressed;
    let records = if header.compression_codec() == CODEC_NONE {
        records_section
    } else {
        decompressed = compression::decompress(
            header.compression_codec(),
            records_section,
            config.decompressed_bytes_max,
        )
        .map_err(|source| ValidationError::Corrupt { position, source })?;
        &decompressed[..]
    };
    let walk = walk_records(&header, records, config)?;
    let max_timestamp = if config.log_append_time {
        header.attributes |= record_batch::ATTR_TIMESTAMP_TYPE;
        config.now_ms
    } else {
        header.attributes &= !record_batch::ATTR_TIMESTAMP_TYPE;
        walk.max_timestamp
    };
    header.max_timestamp = max_timestamp;
    let recompressed = match config.target_codec {
        Some(target) if target != header.compression_codec() && header.records_count > 0 => {
            let section = if target == CODEC_NONE {
                records.to_vec()
            } else {
                compression::compress(target, records).map_err(|e| {
                    invalid(format!("recompressing the batch to codec {target}: {e}"))
                })?
            };
            header.attributes = (header.attributes & !CODEC_BITS) | i16::from(target);
            Some(section)
        }
        _ => None,
    };
    let validated = ValidatedBatch {
        position,
        header,
        offset_delta_of_max_timestamp: if config.log_append_time {
            header.last_offset_delta
        } else {
            walk.offset_delta_of_max_timestamp
        },
    };
    Ok((validated, recompressed))
}

/// Attribute bits 0-2: the batch's compression codec.
const CODEC_BITS: i16 = 0x07;

/// What walking a batch's records found.
struct Walk {
    max_timestamp: i64,
    offset_delta_of_max_timestamp: i32,
}

/// Checks every record of one batch (Kafka's `validateRecord` and the record iterator's
/// own checks); collects key and timestamp errors like Kafka, stops at a malformed record.
fn walk_records(
    header: &RecordBatchHeader,
    records: &[u8],
    config: &ValidatorConfig,
) -> Result<Walk, ValidationError> {
    let expected = usize::try_from(header.records_count).unwrap_or(0);
    let mut walk = Walk {
        max_timestamp: NO_TIMESTAMP,
        offset_delta_of_max_timestamp: 0,
    };
    let mut rejected = Vec::new();
    let mut timestamp_rejected = false;
    // `Record::skim`, not `RecordIter`: the same checks without carrying each record's
    // borrowed fields out (most of the produce path's own CPU at 100 B values).
    let create_time_window = create_time_window(header, config);
    let mut rest = records;
    let mut count = 0usize;
    while !rest.is_empty() {
        let index = count;
        if index >= expected {
            return Err(invalid_at(
                index,
                format!("incorrect declared batch size: more than {expected} records in the batch"),
            ));
        }
        let record =
            Record::skim(rest).map_err(|e: RecordError| invalid_at(index, e.to_string()))?;
        rest = rest.get(record.size_bytes..).unwrap_or_default();
        count += 1;
        let batch_index = checked_offset_delta(record.offset_delta, index)?;
        let timestamp = record_timestamp(header, record.timestamp_delta, index)?;
        if config.compacted && !record.has_key {
            rejected.push(RejectedRecord {
                batch_index,
                message: "compacted topic cannot accept message without key".to_string(),
            });
            continue;
        }
        if let Some(message) = record_timestamp_error(header, config, create_time_window, timestamp)
        {
            timestamp_rejected = true;
            rejected.push(RejectedRecord {
                batch_index,
                message,
            });
            continue;
        }
        if timestamp > walk.max_timestamp {
            walk.max_timestamp = timestamp;
            walk.offset_delta_of_max_timestamp = record.offset_delta;
        }
    }
    if count < expected {
        return Err(invalid(format!(
            "incorrect declared batch size: {expected} records declared, {count} found"
        )));
    }
    if !rest.is_empty() {
        return Err(invalid(format!(
            "incorrect declared batch size: {} bytes remain after the last record",
            rest.len()
        )));
    }
    if rejected.is_empty() {
        return Ok(walk);
    }
    Err(rejection(rejected, timestamp_rejected))
}

/// `timestamp_error`'s CreateTime window, computed once per batch: a record inside it
/// needs no closer look (saturating bounds are exact: a bound beyond i64 excludes no
/// timestamp). `None` under LogAppendTime, where every record gets a closer look.
fn create_time_window(header: &RecordBatchHeader, config: &ValidatorConfig) -> Option<(i64, i64)> {
    (!config.log_append_time && !header.is_log_append_time()).then(|| {
        (
            config.now_ms.saturating_sub(config.timestamp_before_max_ms),
            config.now_ms.saturating_add(config.timestamp_after_max_ms),
        )
    })
}

/// Record `index`'s position in its batch, which its offset delta must equal (Kafka's
/// `validateRecord`: deltas are 0, 1, 2, ...).
#[inline]
fn checked_offset_delta(offset_delta: i32, index: usize) -> Result<i32, ValidationError> {
    let batch_index = i32::try_from(index).unwrap_or(i32::MAX);
    if offset_delta != batch_index {
        return Err(invalid_at(
            index,
            format!(
                "invalid offset delta {offset_delta} for record {index} (deltas must be 0, 1, 2, ...)"
            ),
        ));
    }
    Ok(batch_index)
}

/// Why a record's `timestamp` is refused, if it is: only a record outside the batch's
/// CreateTime `window` (or any record without one) gets [`timestamp_error`]'s closer look.
#[inline]
fn record_timestamp_error(
    header: &RecordBatchHeader,
    config: &ValidatorConfig,
    window: Option<(i64, i64)>,
    timestamp: i64,
) -> Option<String> {
    let suspect = match window {
        Some((earliest, latest)) if timestamp != NO_TIMESTAMP => {
            timestamp < earliest || timestamp > latest
        }
        _ => true,
    };
    suspect
        .then(|| timestamp_error(header, timestamp, config))
        .flatten()
}

/// Record `index`'s timestamp: the batch's max timestamp under LogAppendTime, else base
/// timestamp plus its delta (an overflow is a malformed record).
#[inline]
fn record_timestamp(
    header: &RecordBatchHeader,
    timestamp_delta: i64,
    index: usize,
) -> Result<i64, ValidationError> {
    if header.is_log_append_time() {
        return Ok(header.max_timestamp);
    }
    header
        .base_timestamp
        .checked_add(timestamp_delta)
        .ok_or_else(|| {
            invalid_at(
                index,
                format!(
                    "timestamp delta {timestamp_delta} overflows base timestamp {}",
                    header.base_timestamp
                ),
            )
        })
}

/// The error for a batch with rejected records (Kafka's `RecordValidationException`):
/// INVALID_TIMESTAMP if any was rejected for its timestamp, else INVALID_RECORD; the
/// message shows the first three.
fn rejection(rejected: Vec<RejectedRecord>, timestamp_rejected: bool) -> ValidationError {
    let shown: Vec<String> = rejected
        .iter()
        .take(3)
        .map(|r| format!("record {}: {}", r.batch_index, r.message))
        .collect();
    let message = format!(
        "{} record(s) rejected, the first {}: {}",
        rejected.len(),
        shown.len(),
        shown.join("; ")
    );
    if timestamp_rejected {
        ValidationError::InvalidTimestamp {
            message,
            records: rejected,
        }
    } else {
        ValidationError::InvalidRecord {
            message,
            records: rejected,
        }
    }
}

/// Kafka's `validateTimestamp`: under CreateTime a record timestamp must lie within
/// `[now - before.max.ms, now + after.max.ms]`; a producer may never claim LogAppendTime
/// where the broker would not accept the timestamp as a CreateTime.
fn timestamp_error(
    header: &RecordBatchHeader,
    timestamp: i64,
    config: &ValidatorConfig,
) -> Option<String> {
    if !config.log_append_time && timestamp != NO_TIMESTAMP {
        let diff = i128::from(config.now_ms) - i128::from(timestamp);
        let too_old = diff > i128::from(config.timestamp_before_max_ms);
        let too_new = -diff > i128::from(config.timestamp_after_max_ms);
        (too_old || too_new).then(|| {
            format!(
                "timestamp {timestamp} is out of range: it must be within [{}, {}]",
                config.now_ms.saturating_sub(config.timestamp_before_max_ms),
                config.now_ms.saturating_add(config.timestamp_after_max_ms)
            )
        })
    } else if header.is_log_append_time() {
        Some("producer should not set timestamp type to LogAppendTime".to_string())
    } else {
        None
    }
}

#[cfg(test)]
mod tests;
