//! Test helpers: builds valid RecordBatch v2 bytes (uncompressed records, correct
//! CRC-32C) without depending on kafka-protocol, which storage must never import.

/// Appends a zigzag varint (Kafka's record field encoding).
pub(crate) fn put_varint(out: &mut Vec<u8>, value: i64) {
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

/// A batch of `records_count` records with `value_bytes`-byte values, base offset 0,
/// record `i` stamped `base_timestamp + i`.
pub(crate) fn batch(records_count: usize, value_bytes: usize, base_timestamp: i64) -> Vec<u8> {
    batch_with_timestamps(records_count, value_bytes, base_timestamp, None)
}

/// Like [`batch`] but with an explicit `max_timestamp` header field when given.
pub(crate) fn batch_with_timestamps(
    records_count: usize,
    value_bytes: usize,
    base_timestamp: i64,
    max_timestamp: Option<i64>,
) -> Vec<u8> {
    assert!(records_count >= 1, "a batch holds at least one record");
    let mut records = Vec::new();
    for i in 0..records_count {
        let mut record = Vec::new();
        record.push(0u8); // attributes
        put_varint(&mut record, i as i64); // timestamp delta
        put_varint(&mut record, i as i64); // offset delta
        put_varint(&mut record, -1); // null key
        put_varint(&mut record, value_bytes as i64);
        record.extend((0..value_bytes).map(|j| (i + j) as u8));
        put_varint(&mut record, 0); // no headers
        put_varint(&mut records, record.len() as i64);
        records.extend(record);
    }
    let last_delta = (records_count - 1) as i32;
    let max_ts = max_timestamp.unwrap_or(base_timestamp + i64::from(last_delta));
    let mut out = Vec::new();
    out.extend(0i64.to_be_bytes()); // base offset
    out.extend(0i32.to_be_bytes()); // batch length, patched below
    out.extend(0i32.to_be_bytes()); // partition leader epoch
    out.push(2); // magic
    out.extend(0u32.to_be_bytes()); // crc, patched below
    out.extend(0i16.to_be_bytes()); // attributes
    out.extend(last_delta.to_be_bytes());
    out.extend(base_timestamp.to_be_bytes());
    out.extend(max_ts.to_be_bytes());
    out.extend((-1i64).to_be_bytes()); // producer id
    out.extend((-1i16).to_be_bytes()); // producer epoch
    out.extend((-1i32).to_be_bytes()); // base sequence
    out.extend((records_count as i32).to_be_bytes());
    out.extend(records);
    let length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

/// [`batch`] from idempotent producer `producer_id` at `epoch`, first sequence `sequence`.
pub(crate) fn idempotent_batch(
    records_count: usize,
    producer_id: i64,
    epoch: i16,
    sequence: i32,
) -> Vec<u8> {
    let mut out = batch(records_count, 8, 1_000);
    out[43..51].copy_from_slice(&producer_id.to_be_bytes());
    out[51..53].copy_from_slice(&epoch.to_be_bytes());
    out[53..57].copy_from_slice(&sequence.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

/// [`idempotent_batch`] with the transactional attribute bit: part of `producer_id`'s
/// transaction.
pub(crate) fn transactional_batch(
    records_count: usize,
    producer_id: i64,
    epoch: i16,
    sequence: i32,
) -> Vec<u8> {
    let mut out = idempotent_batch(records_count, producer_id, epoch, sequence);
    out[21..23].copy_from_slice(&0x10i16.to_be_bytes());
    let crc = crc32c::crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}
