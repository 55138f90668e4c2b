//! KIP-534's delete horizon: compaction marks a batch it keeps only for a while (one
//! holding tombstones, or a transaction marker whose transaction has no data left) by
//! moving its base timestamp to
//! the time it may be removed and setting attribute bit 6. Record timestamps are stored
//! as deltas from the base timestamp, so each record's delta is rewritten to keep its
//! absolute timestamp, as Kafka's `MemoryRecordsBuilder` does when it rebuilds the batch.

/// Reads a zigzag varint (Kafka's record field encoding) at `*at`, advancing it.
fn read_varint(buf: &[u8], at: &mut usize) -> Result<i64, String> {
    let mut raw = 0_u64;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*at).ok_or("truncated varint")?;
        *at += 1;
        raw |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            #[expect(
                clippy::cast_possible_wrap,
                reason = "zigzag decoding reinterprets the bits"
            )]
            return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    Err("varint longer than 10 bytes".to_string())
}

/// Appends `value` as a zigzag varint.
fn put_varint(out: &mut Vec<u8>, value: i64) {
    #[expect(
        clippy::cast_sign_loss,
        reason = "zigzag encoding reinterprets the bits"
    )]
    let mut raw = ((value << 1) ^ (value >> 63)) as u64;
    loop {
        let byte = (raw & 0x7f) as u8;
        raw >>= 7;
        if raw == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// The uncompressed records section `records` with every record's timestamp delta
/// rewritten from `old_base` to `new_base` (absolute timestamps unchanged).
///
/// # Errors
/// A record that does not decode.
pub(super) fn rebase_timestamps(
    records: &[u8],
    old_base: i64,
    new_base: i64,
) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(records.len() + 16);
    let mut at = 0;
    let mut body = Vec::new();
    while at < records.len() {
        let length = usize::try_from(read_varint(records, &mut at)?)
            .map_err(|_| "negative record length".to_string())?;
        let record = records
            .get(at..at + length)
            .ok_or("record longer than its batch")?;
        at += length;
        let attributes = *record.first().ok_or("empty record")?;
        let mut field = 1;
        let delta = read_varint(record, &mut field)?;
        let timestamp = old_base.saturating_add(delta);
        body.clear();
        body.push(attributes);
        put_varint(&mut body, timestamp.saturating_sub(new_base));
        body.extend_from_slice(record.get(field..).unwrap_or_default());
        put_varint(
            &mut out,
            i64::try_from(body.len()).map_err(|e| e.to_string())?,
        );
        out.extend_from_slice(&body);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RecordIter;

    /// A rebased record keeps its absolute timestamp and every other field.
    #[test]
    fn rebase_keeps_absolute_timestamps() {
        let mut records = Vec::new();
        for (delta, key) in [(0_i64, b"a"), (300, b"b")] {
            let mut body = vec![0_u8];
            put_varint(&mut body, delta);
            put_varint(&mut body, delta / 300);
            put_varint(&mut body, 1);
            body.extend(key);
            put_varint(&mut body, 2);
            body.extend(b"vv");
            put_varint(&mut body, 0);
            put_varint(&mut records, i64::try_from(body.len()).expect("small"));
            records.extend(body);
        }
        let rebased = rebase_timestamps(&records, 1_000, 1_000_000_000).expect("rebase");
        let got: Vec<(i64, i32, Vec<u8>)> = RecordIter::new(&rebased)
            .map(|r| {
                let r = r.expect("record");
                (
                    1_000_000_000 + r.timestamp_delta,
                    r.offset_delta,
                    r.key.expect("key").to_vec(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![(1_000, 0, b"a".to_vec()), (1_300, 1, b"b".to_vec())]
        );
    }
}
