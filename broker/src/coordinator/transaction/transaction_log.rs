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
//! for `Empty`). A null value is a tombstone: the id expired. Version 1 (flexible, with
//! tagged fields for transaction protocol v2) is not written here, and refused on replay.

use std::collections::BTreeMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::metadata::{TransactionMetadata, TransactionState, NO_PRODUCER_EPOCH, NO_PRODUCER_ID};

const KEY_VERSION: i16 = 0;
const VALUE_VERSION: i16 = 0;

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

/// The value of a transactional id's metadata.
#[must_use]
pub fn value(m: &TransactionMetadata) -> Bytes {
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
    if version != VALUE_VERSION {
        return Err(format!(
            "unsupported transaction log value version {version}"
        ));
    }
    let producer_id = v.i64()?;
    let producer_epoch = v.i16()?;
    let timeout_ms = v.i32()?;
    let status = v.i8()?;
    let state =
        TransactionState::from_id(status).ok_or_else(|| format!("unknown status {status}"))?;
    let mut partitions = std::collections::BTreeSet::new();
    if let Some(topics) = v.count(6)? {
        for _ in 0..topics {
            let topic = v.string()?;
            let n = v.count(4)?.unwrap_or(0);
            for _ in 0..n {
                partitions.insert((topic.clone(), v.i32()?));
            }
        }
    }
    let last_update_ms = v.i64()?;
    let start_ms = v.i64()?;
    Ok((
        transactional_id.clone(),
        Some(TransactionMetadata {
            transactional_id,
            producer_id,
            previous_producer_id: NO_PRODUCER_ID,
            producer_epoch,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms,
            state,
            partitions,
            start_ms,
            last_update_ms,
        }),
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
        let v = value(&m);
        let (id, decoded) = decode_record(&k, Some(&v)).expect("decodes");
        assert_eq!(id, "tx-1");
        assert_eq!(decoded, Some(m));
        // Empty writes null partitions.
        let empty = TransactionMetadata::new("tx-1", 42, 60_000, 100);
        let v = value(&empty);
        assert_eq!(&v[2 + 8 + 2 + 4 + 1..2 + 8 + 2 + 4 + 1 + 4], &[0xff; 4]);
        assert_eq!(
            decode_record(&k, None).expect("tombstone"),
            ("tx-1".into(), None)
        );
    }
}
