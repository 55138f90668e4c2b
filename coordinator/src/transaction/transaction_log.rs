//! Records of the `__transaction_state` topic in Apache Kafka's own schemas
//! (`TransactionLogKey` / `TransactionLogValue` json), so Kafka's tools could read them,
//! and the replay that rebuilds a shard's transactional ids.
//!
//! Key, version 0 (non-flexible, big-endian): `version i16, transactional_id string` (i16
//! length + UTF-8).
//! Value, version 0 (non-flexible): `version i16, producer_id i64, producer_epoch i16,
//! transaction_timeout_ms i32, transaction_status i8, transaction_partitions nullable
//! [topic string, partition_ids [i32]], last_update_timestamp_ms i64,
//! start_timestamp_ms i64` (arrays: i32 count, -1 for null; Kafka writes null partitions
//! for `Empty`). A null value is a tombstone: the id expired.
//! Value, version 1 (flexible, written when `transaction.version` ≥ 1, as Kafka does): the
//! same fields with compact strings and arrays (unsigned varint length + 1, 0 for null),
//! an empty tag buffer after each topic entry, and a final tag buffer holding, when not at
//! their defaults, `PreviousProducerId` (tag 0, i64, default -1), `NextProducerId` (tag 1,
//! i64, default -1) and `ClientTransactionVersion` (tag 2, i16, default 0). Unknown tags are
//! skipped on replay.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::metadata::{TransactionMetadata, TransactionState, NO_PRODUCER_EPOCH, NO_PRODUCER_ID};

const KEY_VERSION: i16 = 0;
const VALUE_VERSION: i16 = 0;
/// The first flexible value version, with the transaction protocol v2 tagged fields.
const VALUE_VERSION_FLEXIBLE: i16 = 1;

const TAG_PREVIOUS_PRODUCER_ID: u32 = 0;
const TAG_NEXT_PRODUCER_ID: u32 = 1;
const TAG_CLIENT_TRANSACTION_VERSION: u32 = 2;

fn put_uvarint(buf: &mut BytesMut, mut n: u32) {
    while n >= 0x80 {
        buf.put_u8(u8::try_from(n & 0x7f).expect("7 bits") | 0x80);
        n >>= 7;
    }
    buf.put_u8(u8::try_from(n).expect("below 0x80"));
}

/// A compact length (n + 1; 0 is null).
fn put_compact_len(buf: &mut BytesMut, n: usize) {
    put_uvarint(buf, u32::try_from(n + 1).expect("lengths are bounded"));
}

/// Longest transactional id the key's i16-length string holds.
pub const TRANSACTIONAL_ID_BYTES_MAX: usize = i16::MAX as usize;

fn put_string(buf: &mut BytesMut, s: &str) {
    let len = i16::try_from(s.len()).expect("transactional ids and topics are < 32 KiB");
    buf.put_i16(len);
    buf.put_slice(s.as_bytes());
}

/// The key of a transactional id.
#[must_use]
pub fn key(transactional_id: &str) -> Bytes {
    let mut buf = BytesMut::with_capacity(4 + transactional_id.len());
    buf.put_i16(KEY_VERSION);
    put_string(&mut buf, transactional_id);
    buf.freeze()
}

/// The value of a transactional id's metadata: version 1 (flexible) when `flexible`, which
/// the coordinator sets when `transaction.version` ≥ 1, else version 0.
#[must_use]
pub fn value(m: &TransactionMetadata, flexible: bool) -> Bytes {
    if flexible {
        return value_v1(m);
    }
    let mut buf = BytesMut::new();
    buf.put_i16(VALUE_VERSION);
    buf.put_i64(m.producer_id);
    buf.put_i16(m.producer_epoch);
    buf.put_i32(m.timeout_ms);
    buf.put_i8(m.state.id());
    if m.state == TransactionState::Empty {
        buf.put_i32(-1);
    } else {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (topic, partition) in &m.partitions {
            by_topic.entry(topic).or_default().push(*partition);
        }
        buf.put_i32(i32::try_from(by_topic.len()).expect("partitions are bounded"));
        for (topic, partitions) in by_topic {
            put_string(&mut buf, topic);
            buf.put_i32(i32::try_from(partitions.len()).expect("partitions are bounded"));
            for p in partitions {
                buf.put_i32(p);
            }
        }
    }
    buf.put_i64(m.last_update_ms);
    buf.put_i64(m.start_ms);
    buf.freeze()
}

fn value_v1(m: &TransactionMetadata) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i16(VALUE_VERSION_FLEXIBLE);
    buf.put_i64(m.producer_id);
    buf.put_i16(m.producer_epoch);
    buf.put_i32(m.timeout_ms);
    buf.put_i8(m.state.id());
    if m.state == TransactionState::Empty {
        put_uvarint(&mut buf, 0);
    } else {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for (topic, partition) in &m.partitions {
            by_topic.entry(topic).or_default().push(*partition);
        }
        put_compact_len(&mut buf, by_topic.len());
        for (topic, partitions) in by_topic {
            put_compact_len(&mut buf, topic.len());
            buf.put_slice(topic.as_bytes());
            put_compact_len(&mut buf, partitions.len());
            for p in partitions {
                buf.put_i32(p);
            }
            put_uvarint(&mut buf, 0);
        }
    }
    buf.put_i64(m.last_update_ms);
    buf.put_i64(m.start_ms);
    let mut tags: Vec<(u32, Vec<u8>)> = Vec::new();
    if m.previous_producer_id != NO_PRODUCER_ID {
        tags.push((
            TAG_PREVIOUS_PRODUCER_ID,
            m.previous_producer_id.to_be_bytes().to_vec(),
        ));
    }
    if m.next_producer_id != NO_PRODUCER_ID {
        tags.push((
            TAG_NEXT_PRODUCER_ID,
            m.next_producer_id.to_be_bytes().to_vec(),
        ));
    }
    if m.client_transaction_version != 0 {
        tags.push((
            TAG_CLIENT_TRANSACTION_VERSION,
            m.client_transaction_version.to_be_bytes().to_vec(),
        ));
    }
    put_uvarint(
        &mut buf,
        u32::try_from(tags.len()).expect("three tags at most"),
    );
    for (tag, data) in tags {
        put_uvarint(&mut buf, tag);
        put_uvarint(
            &mut buf,
            u32::try_from(data.len()).expect("8 bytes at most"),
        );
        buf.put_slice(&data);
    }
    buf.freeze()
}

struct Reader(Bytes);

impl Reader {
    fn need(&self, n: usize) -> Result<(), String> {
        if self.0.remaining() < n {
            return Err(format!(
                "truncated: need {n} bytes, {} left",
                self.0.remaining()
            ));
        }
        Ok(())
    }
    fn i8(&mut self) -> Result<i8, String> {
        self.need(1)?;
        Ok(self.0.get_i8())
    }
    fn i16(&mut self) -> Result<i16, String> {
        self.need(2)?;
        Ok(self.0.get_i16())
    }
    fn i32(&mut self) -> Result<i32, String> {
        self.need(4)?;
        Ok(self.0.get_i32())
    }
    fn i64(&mut self) -> Result<i64, String> {
        self.need(8)?;
        Ok(self.0.get_i64())
    }
    fn string(&mut self) -> Result<String, String> {
        let len = usize::try_from(self.i16()?).map_err(|_| "null string".to_string())?;
        self.need(len)?;
        String::from_utf8(self.0.split_to(len).to_vec()).map_err(|e| e.to_string())
    }
    fn uvarint(&mut self) -> Result<u32, String> {
        let mut n: u32 = 0;
        for shift in (0..35).step_by(7) {
            let b = self.i8()?.to_ne_bytes()[0];
            n |= u32::from(b & 0x7f)
                .checked_shl(shift)
                .ok_or_else(|| "varint too long".to_string())?;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err("varint too long".into())
    }
    /// A compact length: `None` for null (0), else n, bounded by the bytes left (each
    /// element takes at least `min_bytes`).
    fn compact_len(&mut self, min_bytes: usize) -> Result<Option<usize>, String> {
        let n = self.uvarint()?;
        if n == 0 {
            return Ok(None);
        }
        let n = usize::try_from(n - 1).map_err(|e| e.to_string())?;
        self.need(n.saturating_mul(min_bytes))?;
        Ok(Some(n))
    }
    fn compact_string(&mut self) -> Result<String, String> {
        let len = self
            .compact_len(1)?
            .ok_or_else(|| "null string".to_string())?;
        String::from_utf8(self.0.split_to(len).to_vec()).map_err(|e| e.to_string())
    }
    /// Skips a tag buffer, returning the tags this decoder knows.
    fn tags(&mut self) -> Result<Vec<(u32, Bytes)>, String> {
        let count = self.uvarint()?;
        let mut tags = Vec::new();
        for _ in 0..count {
            let tag = self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).map_err(|e| e.to_string())?;
            self.need(size)?;
            tags.push((tag, self.0.split_to(size)));
        }
        Ok(tags)
    }
    /// An array count, bounded by the bytes left (each element takes at least `min_bytes`).
    fn count(&mut self, min_bytes: usize) -> Result<Option<usize>, String> {
        let n = self.i32()?;
        if n < 0 {
            return Ok(None);
        }
        let n = usize::try_from(n).map_err(|e| e.to_string())?;
        self.need(n.saturating_mul(min_bytes))?;
        Ok(Some(n))
    }
}

/// One decoded record: a transactional id and its metadata, `None` for a tombstone.
pub type Persisted = (String, Option<TransactionMetadata>);

/// Decodes one record of `__transaction_state`.
///
/// # Errors
/// What does not parse (replay logs it and skips the record).
pub fn decode_record(key: &Bytes, value: Option<&Bytes>) -> Result<Persisted, String> {
    let mut k = Reader(key.clone());
    let version = k.i16()?;
    if version != KEY_VERSION {
        return Err(format!("unknown transaction log key version {version}"));
    }
    let transactional_id = k.string()?;
    let Some(value) = value else {
        return Ok((transactional_id, None));
    };
    let mut v = Reader(value.clone());
    let version = v.i16()?;
    let flexible = match version {
        VALUE_VERSION => false,
        VALUE_VERSION_FLEXIBLE => true,
        _ => {
            return Err(format!(
                "unsupported transaction log value version {version}"
            ))
        }
    };
    let producer_id = v.i64()?;
    let producer_epoch = v.i16()?;
    let timeout_ms = v.i32()?;
    let status = v.i8()?;
    let state =
        TransactionState::from_id(status).ok_or_else(|| format!("unknown status {status}"))?;
    let partitions = decode_partitions(&mut v, flexible)?;
    let last_update_ms = v.i64()?;
    let start_ms = v.i64()?;
    let (previous_producer_id, next_producer_id, client_transaction_version) = if flexible {
        decode_tagged_fields(&mut v)?
    } else {
        (NO_PRODUCER_ID, NO_PRODUCER_ID, 0)
    };
    Ok((
        transactional_id.clone(),
        Some(TransactionMetadata {
            transactional_id,
            producer_id,
            previous_producer_id,
            next_producer_id,
            producer_epoch,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms,
            state,
            partitions,
            start_ms,
            last_update_ms,
            client_transaction_version,
        }),
    ))
}

/// The value's transaction partitions (`transactionPartitions`: topics, each with its
/// partition indexes), in the value version's encoding (compact in the flexible one).
fn decode_partitions(
    v: &mut Reader,
    flexible: bool,
) -> Result<std::collections::BTreeSet<(String, i32)>, String> {
    let mut partitions = std::collections::BTreeSet::new();
    let topics = if flexible {
        v.compact_len(3)?
    } else {
        v.count(6)?
    };
    for _ in 0..topics.unwrap_or(0) {
        let topic = if flexible {
            v.compact_string()?
        } else {
            v.string()?
        };
        let n = if flexible {
            v.compact_len(4)?
        } else {
            v.count(4)?
        };
        for _ in 0..n.unwrap_or(0) {
            partitions.insert((topic.clone(), v.i32()?));
        }
        if flexible {
            v.tags()?;
        }
    }
    Ok(partitions)
}

/// The flexible value version's tagged fields: previous and next producer id and the
/// client's transaction version (KIP-890), each at its default when absent. A known tag
/// of the wrong size does not parse; unknown tags are skipped.
fn decode_tagged_fields(v: &mut Reader) -> Result<(i64, i64, i16), String> {
    let (mut previous_producer_id, mut next_producer_id, mut client_transaction_version) =
        (NO_PRODUCER_ID, NO_PRODUCER_ID, 0);
    for (tag, mut data) in v.tags()? {
        match tag {
            TAG_PREVIOUS_PRODUCER_ID if data.len() == 8 => previous_producer_id = data.get_i64(),
            TAG_NEXT_PRODUCER_ID if data.len() == 8 => next_producer_id = data.get_i64(),
            TAG_CLIENT_TRANSACTION_VERSION if data.len() == 2 => {
                client_transaction_version = data.get_i16();
            }
            TAG_PREVIOUS_PRODUCER_ID | TAG_NEXT_PRODUCER_ID | TAG_CLIENT_TRANSACTION_VERSION => {
                return Err(format!("tag {tag} of {} bytes", data.len()));
            }
            _ => {}
        }
    }
    Ok((
        previous_producer_id,
        next_producer_id,
        client_transaction_version,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    // A record decodes to what was encoded; the bytes are Kafka's v0 layout.
    #[test]
    fn round_trip() {
        let mut m = TransactionMetadata::new("tx-1", 42, 60_000, 100);
        m.producer_epoch = 3;
        m.state = TransactionState::Ongoing;
        m.partitions.insert(("b".into(), 1));
        m.partitions.insert(("a".into(), 0));
        m.partitions.insert(("a".into(), 2));
        m.start_ms = 90;
        let k = key("tx-1");
        assert_eq!(&k[..], b"\x00\x00\x00\x04tx-1");
        let v = value(&m, false);
        let (id, decoded) = decode_record(&k, Some(&v)).expect("decodes");
        assert_eq!(id, "tx-1");
        assert_eq!(decoded, Some(m));
        // Empty writes null partitions.
        let empty = TransactionMetadata::new("tx-1", 42, 60_000, 100);
        let v = value(&empty, false);
        assert_eq!(&v[2 + 8 + 2 + 4 + 1..2 + 8 + 2 + 4 + 1 + 4], &[0xff; 4]);
        assert_eq!(
            decode_record(&k, None).expect("tombstone"),
            ("tx-1".into(), None)
        );
    }

    // Version 1 (flexible): compact arrays and the tagged fields of transaction protocol v2
    // round-trip; defaults are not written, and unknown tags are skipped.
    #[test]
    fn round_trip_v1() {
        let mut m = TransactionMetadata::new("tx-1", 42, 60_000, 100);
        m.producer_epoch = i16::MAX;
        m.state = TransactionState::PrepareCommit;
        m.partitions.insert(("b".into(), 1));
        m.partitions.insert(("a".into(), 0));
        m.partitions.insert(("a".into(), 2));
        m.start_ms = 90;
        m.previous_producer_id = 41;
        m.next_producer_id = 43;
        m.client_transaction_version = 2;
        let k = key("tx-1");
        let v = value(&m, true);
        assert_eq!(&v[..2], &[0, 1]);
        let (_, decoded) = decode_record(&k, Some(&v)).expect("decodes");
        assert_eq!(decoded, Some(m.clone()));
        // An Empty state with every tagged field at its default: null partitions (0) and
        // an empty tag buffer close the value.
        let empty = TransactionMetadata::new("tx-1", 42, 60_000, 100);
        let v = value(&empty, true);
        assert_eq!(v.len(), 2 + 8 + 2 + 4 + 1 + 1 + 8 + 8 + 1);
        assert_eq!(v[2 + 8 + 2 + 4 + 1], 0);
        assert_eq!(v[v.len() - 1], 0);
        assert_eq!(
            decode_record(&k, Some(&v)).expect("decodes"),
            ("tx-1".into(), Some(empty.clone()))
        );
        // An unknown tag (9, two bytes) is skipped.
        let mut with_unknown = v[..v.len() - 1].to_vec();
        with_unknown.extend_from_slice(&[1, 9, 2, 0xab, 0xcd]);
        assert_eq!(
            decode_record(&k, Some(&Bytes::from(with_unknown))).expect("decodes"),
            ("tx-1".into(), Some(empty))
        );
    }
}
