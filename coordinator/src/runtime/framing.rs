//! The record framing every coordinator shares (Kafka's `CoordinatorRuntime` serde and
//! loader): a coordinator's records as one uncompressed v2 batch ([`encode_batch`],
//! [`encode_batch_as`] for a transactional producer's batch), and the replay of an
//! internal partition's batches into records ([`replay_with`]), markers included, stepping
//! over batches compaction emptied. A coordinator brings only its key/value schemas.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
    TimestampType, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
};

use crate::partition_writer::CoordinatorPartition;

/// Bytes read from the log per replay step.
const REPLAY_READ_BYTES: usize = 1 << 20;

/// One record batch (magic 2, uncompressed) holding `records` as (key, value) pairs.
///
/// # Errors
/// The encoder's message (it fails only on our own bugs).
pub fn encode_batch(records: &[(Bytes, Option<Bytes>)], now_ms: i64) -> Result<BytesMut, String> {
    encode_batch_as(records, now_ms, None)
}

/// [`encode_batch`], written for a transactional producer (`Some((producer_id, epoch))`:
/// the batch carries its id and epoch and the transactional bit, as Kafka's group
/// coordinator writes a TxnOffsetCommit) or for the coordinator itself (`None`).
///
/// # Errors
/// The encoder's message (it fails only on our own bugs).
pub fn encode_batch_as(
    records: &[(Bytes, Option<Bytes>)],
    now_ms: i64,
    producer: Option<(i64, i16)>,
) -> Result<BytesMut, String> {
    let (producer_id, producer_epoch) = producer.unwrap_or((NO_PRODUCER_ID, NO_PRODUCER_EPOCH));
    let records: Vec<Record> = records
        .iter()
        .zip(0_i32..)
        .map(|((key, value), delta)| Record {
            transactional: producer.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(delta),
            // kafka-protocol's encoder starts a new batch wherever `offset - sequence`
            // changes; sequences counting up from NO_SEQUENCE keep all records in one
            // batch (base sequence NO_SEQUENCE, as Kafka writes for non-idempotent data).
            sequence: NO_SEQUENCE.wrapping_add(delta),
            timestamp: now_ms,
            key: Some(key.clone()),
            value: value.clone(),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .map_err(|e| e.to_string())?;
    Ok(buf)
}

/// One record of an internal topic as replay sees it.
pub enum Replayed<'a> {
    /// A keyed data record.
    Data {
        /// Its key.
        key: &'a Bytes,
        /// Its value (`None`: a tombstone).
        value: Option<&'a Bytes>,
        /// The batch's producer id (-1 for the coordinator's own writes).
        producer_id: i64,
        /// Whether the batch belongs to a transaction (TxnOffsetCommit).
        transactional: bool,
    },
    /// A transaction marker (control record) of `producer_id`.
    Marker {
        /// The producer whose transaction ended.
        producer_id: i64,
        /// Commit (true) or abort.
        commit: bool,
    },
}

/// The type of a control record, from its key (`version i16, type i16`: 0 abort, 1 commit).
fn control_is_commit(key: Option<&Bytes>) -> Option<bool> {
    let key = key?;
    let kind = i16::from_be_bytes([*key.get(2)?, *key.get(3)?]);
    match kind {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// The v2 record batch header, as far as replay needs it (Kafka's `DefaultRecordBatch`
/// layout): the base offset, the batch length after the first 12 bytes, the magic byte,
/// and the last offset delta; 61 bytes in all.
const BATCH_BASE_OFFSET_AT: usize = 0;
const BATCH_LENGTH_AT: usize = 8;
const BATCH_MAGIC_AT: usize = 16;
const BATCH_LAST_OFFSET_DELTA_AT: usize = 23;
const BATCH_HEADER_BYTES: usize = 61;
/// The bytes before the batch length's count starts (base offset and length).
const BATCH_LOG_OVERHEAD: usize = 12;

/// The last offset of the last whole batch in `buf` by the batch headers (a batch's last
/// offset survives compaction even when none of its records do); `None` if no header
/// parses.
fn last_offset_of_batches(buf: &Bytes) -> Option<i64> {
    let mut rest: &[u8] = buf;
    let mut last = None;
    while rest.len() >= BATCH_HEADER_BYTES && rest[BATCH_MAGIC_AT] == 2 {
        let i64_at = |at: usize| {
            rest.get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map(i64::from_be_bytes)
        };
        let i32_at = |at: usize| {
            rest.get(at..at + 4)
                .and_then(|b| b.try_into().ok())
                .map(i32::from_be_bytes)
        };
        let (Some(base), Some(length), Some(delta)) = (
            i64_at(BATCH_BASE_OFFSET_AT),
            i32_at(BATCH_LENGTH_AT),
            i32_at(BATCH_LAST_OFFSET_DELTA_AT),
        ) else {
            break;
        };
        let Some(after) = usize::try_from(length)
            .ok()
            .and_then(|l| rest.get(BATCH_LOG_OVERHEAD + l..))
        else {
            break;
        };
        last = Some(base + i64::from(delta));
        rest = after;
    }
    last
}

/// Reads the records of an internal topic's `partition` from its log start to its log
/// end (a new leader's log holds what the old leader committed even while its high
/// watermark lags; Kafka's loaders read to the log end too) and decodes each with `decode` (`Ok(None)`: nothing to keep), in log order;
/// records that do not decode are logged and skipped. Shared by every coordinator.
///
/// # Errors
/// Storage errors, or a batch the record decoder rejects.
pub fn replay_with<T>(
    partition: &dyn CoordinatorPartition,
    decode: impl Fn(Replayed<'_>) -> Result<Option<T>, String>,
) -> Result<Vec<T>, String> {
    let offsets = partition.offsets().map_err(|e| e.to_string())?;
    let mut next = offsets.log_start;
    let mut out = Vec::new();
    while next < offsets.log_end {
        let records = partition
            .read(next, REPLAY_READ_BYTES)
            .map_err(|e| e.to_string())?;
        if records.is_empty() {
            break;
        }
        let mut buf = records.clone();
        let sets = RecordBatchDecoder::decode_all(&mut buf).map_err(|e| e.to_string())?;
        let before = next;
        for record in sets.iter().flat_map(|s| s.records.iter()) {
            next = next.max(record.offset + 1);
            if record.offset < before {
                continue;
            }
            let replayed = if record.control {
                match control_is_commit(record.key.as_ref()) {
                    Some(commit) => Replayed::Marker {
                        producer_id: record.producer_id,
                        commit,
                    },
                    None => continue,
                }
            } else {
                let Some(key) = &record.key else { continue };
                Replayed::Data {
                    key,
                    value: record.value.as_ref(),
                    producer_id: record.producer_id,
                    transactional: record.transactional,
                }
            };
            match decode(replayed) {
                Ok(Some(p)) => out.push(p),
                Ok(None) => {}
                Err(e) => tracing::warn!(
                    partition = %partition.name(),
                    offset = record.offset,
                    error = %e,
                    "skipping an undecodable internal record"
                ),
            }
        }
        if next <= before {
            // No record past `before`: the read holds only batches that compaction emptied
            // (kept for their producer state, as Kafka's cleaner keeps them) — and the next
            // batch did not fit. Step past them by their headers' last offsets: their
            // record counts are 0, so counting records would stop the replay here and
            // leave everything after out.
            let end = last_offset_of_batches(&records).map_or(before, |last| last + 1);
            if end <= before {
                break;
            }
            next = end;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Replay steps past batches compaction emptied by their headers' last offsets (their
    // record count is 0): an empty batch of offsets 0..=2 followed by only the start of a
    // batch too large for the read must step to 3, not stop at 0 and leave the rest of
    // the partition unreplayed.
    #[test]
    fn empty_batches_are_stepped_over_by_their_last_offset() {
        let records: Vec<(Bytes, Option<Bytes>)> = (0..3)
            // Keys long enough that the batch is longer than the partial read below.
            .map(|i| (Bytes::from(format!("group-{i}")), None))
            .collect();
        let full = encode_batch(&records, 0).expect("encode");
        // The cleaner's empty batch: the header alone, its count 0, its last offset kept.
        let mut empty = full.get(..61).expect("header").to_vec();
        empty[8..12].copy_from_slice(&49_i32.to_be_bytes());
        empty[57..61].copy_from_slice(&0_i32.to_be_bytes());
        assert_eq!(last_offset_of_batches(&Bytes::from(empty.clone())), Some(2));

        let mut read = empty.clone();
        read.extend_from_slice(full.get(..100).expect("a partial batch"));
        assert_eq!(last_offset_of_batches(&Bytes::from(read)), Some(2));
        assert_eq!(last_offset_of_batches(&full.clone().freeze()), Some(2));
        assert_eq!(last_offset_of_batches(&Bytes::from_static(b"short")), None);
    }
}
