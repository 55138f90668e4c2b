//! Transaction markers (Kafka's `EndTransactionMarker` and `ControlRecordType`): the
//! control batch the transaction coordinator writes to every partition of a transaction
//! to commit or abort it. Storage builds the bytes itself (it has CRC-32C and needs no
//! kafka-protocol) and reads them back in recovery, so producer state and the
//! aborted-transaction index can be rebuilt from the log alone.
//!
//! A marker is one v2 batch with the transactional and control attribute bits, the
//! producer's id and epoch, base sequence -1, and one record whose key is
//! `version i16 = 0, type i16 (0 = ABORT, 1 = COMMIT)` and whose value is
//! `version i16 = 0, coordinator_epoch i32`.

use crate::record::RecordIter;
use crate::record_batch::{
    RecordBatchHeader, ATTR_CONTROL, ATTR_TRANSACTIONAL, BATCH_HEADER_BYTES, LOG_OVERHEAD_BYTES,
};

/// How a transaction ended (Kafka's `TransactionResult`; the marker's control type).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnResult {
    /// The transaction's records are dropped by read_committed consumers.
    Abort,
    /// The transaction's records become visible to read_committed consumers.
    Commit,
}

impl TxnResult {
    /// The control record type id Kafka writes in the marker's key.
    #[must_use]
    pub fn control_type(self) -> i16 {
        match self {
            TxnResult::Abort => 0,
            TxnResult::Commit => 1,
        }
    }
}

/// A parsed marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndTransactionMarker {
    /// Commit or abort.
    pub result: TxnResult,
    /// The epoch of the transaction coordinator that wrote it (fences zombie coordinators).
    pub coordinator_epoch: i32,
}

const CONTROL_KEY_VERSION: i16 = 0;
const MARKER_VALUE_VERSION: i16 = 0;

fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
}

/// The bytes of one marker batch (base offset 0, leader epoch 0: the log assigns both),
/// stamped `timestamp_ms`, with a correct CRC-32C.
#[must_use]
pub fn build_marker_batch(
    producer_id: i64,
    producer_epoch: i16,
    marker: EndTransactionMarker,
    timestamp_ms: i64,
) -> Vec<u8> {
    let mut key = Vec::with_capacity(4);
    key.extend(CONTROL_KEY_VERSION.to_be_bytes());
    key.extend(marker.result.control_type().to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend(MARKER_VALUE_VERSION.to_be_bytes());
    value.extend(marker.coordinator_epoch.to_be_bytes());
    let mut record = Vec::with_capacity(16);
    record.push(0); // attributes
    put_varint(&mut record, 0); // timestamp delta
    put_varint(&mut record, 0); // offset delta
    put_varint(&mut record, key.len() as i64);
    record.extend(&key);
    put_varint(&mut record, value.len() as i64);
    record.extend(&value);
    put_varint(&mut record, 0); // no headers
    let mut out = Vec::with_capacity(BATCH_HEADER_BYTES + 1 + record.len());
    out.extend(0i64.to_be_bytes()); // base offset
    out.extend(0i32.to_be_bytes()); // batch length, set below
    out.extend(0i32.to_be_bytes()); // partition leader epoch
    out.push(2); // magic
    out.extend(0u32.to_be_bytes()); // crc, set below
    out.extend((ATTR_TRANSACTIONAL | ATTR_CONTROL).to_be_bytes());
    out.extend(0i32.to_be_bytes()); // last offset delta
    out.extend(timestamp_ms.to_be_bytes()); // base timestamp
    out.extend(timestamp_ms.to_be_bytes()); // max timestamp
    out.extend(producer_id.to_be_bytes());
    out.extend(producer_epoch.to_be_bytes());
    out.extend((-1i32).to_be_bytes()); // base sequence
    out.extend(1i32.to_be_bytes()); // records count
    put_varint(&mut out, record.len() as i64);
    out.extend(record);
    let length = i32::try_from(out.len() - LOG_OVERHEAD_BYTES).expect("a marker is tiny");
    out.splice(8..12, length.to_be_bytes());
    let crc = crate::record_batch::compute_crc(&out);
    out.splice(17..21, crc.to_be_bytes());
    out
}

/// Reads the marker of a whole control batch (`batch` is the batch's bytes, header
/// included). `Ok(None)` for a control batch with no records (compaction emptied it, as
/// Kafka allows) or an unknown control type; `Err` for bytes that are not a marker.
pub fn parse_marker(
    header: &RecordBatchHeader,
    batch: &[u8],
) -> Result<Option<EndTransactionMarker>, String> {
    if !header.is_control() {
        return Err("not a control batch".to_string());
    }
    let records = batch
        .get(BATCH_HEADER_BYTES..header.total_bytes())
        .ok_or_else(|| "control batch shorter than its header says".to_string())?;
    let Some(record) = RecordIter::new(records).next() else {
        return Ok(None);
    };
    let record = record.map_err(|e| e.to_string())?;
    let key = record
        .key
        .ok_or_else(|| "control record without a key".to_string())?;
    let (Some(version), Some(kind)) = (key.get(0..2), key.get(2..4)) else {
        return Err(format!("control record key of {} bytes", key.len()));
    };
    if i16::from_be_bytes([version[0], version[1]]) < 0 {
        return Err("negative control record key version".to_string());
    }
    let result = match i16::from_be_bytes([kind[0], kind[1]]) {
        0 => TxnResult::Abort,
        1 => TxnResult::Commit,
        // Another control type (Kafka has leader-change and snapshot records): not a marker.
        _ => return Ok(None),
    };
    let value = record
        .value
        .ok_or_else(|| "marker without a value".to_string())?;
    let Some(epoch) = value.get(2..6) else {
        return Err(format!("marker value of {} bytes", value.len()));
    };
    let coordinator_epoch = i32::from_be_bytes([epoch[0], epoch[1], epoch[2], epoch[3]]);
    Ok(Some(EndTransactionMarker {
        result,
        coordinator_epoch,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record_batch::validate_batches;

    /// A built marker is a valid batch with Kafka's attribute bits, and reads back.
    #[test]
    fn marker_round_trips() {
        for result in [TxnResult::Abort, TxnResult::Commit] {
            let marker = EndTransactionMarker {
                result,
                coordinator_epoch: 7,
            };
            let bytes = build_marker_batch(42, 3, marker, 1_000);
            let summary = validate_batches(&bytes).expect("valid batch");
            assert_eq!(summary.record_count, 1);
            let header = RecordBatchHeader::parse(&bytes).expect("header");
            assert_eq!(header.attributes, 0x30);
            assert_eq!(
                (
                    header.producer_id,
                    header.producer_epoch,
                    header.base_sequence
                ),
                (42, 3, -1)
            );
            assert_eq!(parse_marker(&header, &bytes), Ok(Some(marker)));
            // Key: version 0, type; value: version 0, coordinator epoch 7.
            let tail = &bytes[BATCH_HEADER_BYTES..];
            let kind = result.control_type().to_be_bytes();
            assert!(tail.windows(4).any(|w| w == [0, 0, kind[0], kind[1]]));
            assert!(tail.windows(6).any(|w| w == [0, 0, 0, 0, 0, 7]));
        }
    }
}
