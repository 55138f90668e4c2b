//! A producer that costs the client almost nothing, so the broker is the bound (issue 24,
//! item 6): each connection encodes one Produce request once (one v2 record batch per
//! partition it owns, CRC-32C computed once) and sends it again and again, with several
//! requests in flight, reading only the answers' error codes. librdkafka spends 1.6-2.4
//! client CPU-s per GB building batches, about three times the broker's cost, so on a
//! two-core machine the `produce` section measures the client; this one measures how
//! fast the broker takes bytes in.
//!
//! The broker sees ordinary non-idempotent Produce v7 requests (no producer id), so
//! every resend is appended as new records, validated (CRC, record walk) like any other.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use crate::Res;

/// How one raw run is shaped.
#[derive(Clone, Debug)]
pub struct RawProduce {
    pub topic: String,
    pub partitions: i32,
    pub connections: usize,
    /// Requests in flight per connection.
    pub in_flight: usize,
    /// `acks` of every request: -1 (all) or 1.
    pub acks: i16,
    /// Records per batch (one batch per partition per request).
    pub records_per_batch: usize,
    pub value_bytes: usize,
    /// Stop once this many value bytes were acknowledged.
    pub total_bytes: u64,
}

/// What a raw run acknowledged.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawRun {
    /// Value bytes acknowledged (what MB/s counts, as the other sections do).
    pub bytes: u64,
    pub records: u64,
    pub requests: u64,
    /// Partitions answered with an error code other than 0.
    pub errors: u64,
}

/// Runs `shape` against `addr` on `rt` until `total_bytes` are acknowledged.
pub fn run(rt: &tokio::runtime::Runtime, addr: SocketAddr, shape: &RawProduce) -> Res<RawRun> {
    let connections = shape.connections.max(1);
    let per_request = {
        let owned = partitions_of(0, connections, shape.partitions).len();
        (owned * shape.records_per_batch * shape.value_bytes) as u64
    };
    if per_request == 0 {
        return Err("raw produce: fewer partitions than connections".into());
    }
    let claimed = Arc::new(AtomicU64::new(0));
    rt.block_on(async {
        let mut tasks = Vec::with_capacity(connections);
        for index in 0..connections {
            let owned = partitions_of(index, connections, shape.partitions);
            let shape = shape.clone();
            let claimed = Arc::clone(&claimed);
            tasks.push(tokio::spawn(async move {
                connection(addr, &shape, &owned, &claimed).await
            }));
        }
        let mut total = RawRun::default();
        for task in tasks {
            let run = task.await.map_err(|e| format!("raw produce task: {e}"))??;
            total.bytes += run.bytes;
            total.records += run.records;
            total.requests += run.requests;
            total.errors += run.errors;
        }
        Ok(total)
    })
}

/// The partitions connection `index` of `connections` writes to (round-robin).
fn partitions_of(index: usize, connections: usize, partitions: i32) -> Vec<i32> {
    (0..partitions)
        .filter(|p| usize::try_from(*p).is_ok_and(|p| p % connections == index))
        .collect()
}

/// One connection: sends its request until the run's acknowledged bytes reach the total.
async fn connection(
    addr: SocketAddr,
    shape: &RawProduce,
    owned: &[i32],
    claimed: &AtomicU64,
) -> Res<RawRun> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (mut reader, mut writer) = stream.into_split();
    let timestamp = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis(),
    )?;
    let batch = record_batch(shape.records_per_batch, shape.value_bytes, timestamp);
    let mut frame = produce_request(shape.acks, &shape.topic, owned, &batch);
    let bytes_per_request = (owned.len() * shape.records_per_batch * shape.value_bytes) as u64;
    let records_per_request = (owned.len() * shape.records_per_batch) as u64;
    let slots = Arc::new(Semaphore::new(shape.in_flight.max(1)));
    let total = shape.total_bytes;
    let reading_slots = Arc::clone(&slots);
    let partitions = owned.len();
    let answers = tokio::spawn(async move {
        let mut run = RawRun::default();
        let mut expected = 0_i32;
        loop {
            let mut size = [0_u8; 4];
            if reader.read_exact(&mut size).await.is_err() {
                return Ok::<RawRun, String>(run);
            }
            let len = usize::try_from(i32::from_be_bytes(size)).map_err(|e| e.to_string())?;
            let mut body = vec![0_u8; len];
            reader
                .read_exact(&mut body)
                .await
                .map_err(|e| e.to_string())?;
            let (correlation, errors) = produce_errors(&body, partitions)?;
            if correlation != expected {
                return Err(format!(
                    "answer {correlation} out of order (expected {expected})"
                ));
            }
            expected = expected.wrapping_add(1);
            run.requests += 1;
            run.errors += errors;
            run.bytes += bytes_per_request;
            run.records += records_per_request;
            reading_slots.add_permits(1);
        }
    });
    let mut correlation = 0_i32;
    let mut sent_bytes = 0_u64;
    // Sends stop once what was sent by every connection could reach the total; the
    // shared counter is of sends, so the connections together send about `total`.
    while claimed.fetch_add(bytes_per_request, Ordering::Relaxed) < total {
        slots.acquire().await?.forget();
        frame[8..12].copy_from_slice(&correlation.to_be_bytes());
        writer.write_all(&frame).await?;
        correlation = correlation.wrapping_add(1);
        sent_bytes += bytes_per_request;
    }
    // Wait for every answer, then close our side so the reader sees the end.
    let _all = slots
        .acquire_many(u32::try_from(shape.in_flight.max(1))?)
        .await?;
    writer.shutdown().await?;
    let run = tokio::time::timeout(Duration::from_secs(60), answers)
        .await
        .map_err(|_| "raw produce: answers did not end")?
        .map_err(|e| format!("raw produce reader: {e}"))??;
    if run.bytes != sent_bytes {
        return Err(format!(
            "raw produce: {} bytes answered of {sent_bytes} sent",
            run.bytes
        )
        .into());
    }
    Ok(run)
}

/// A v2 record batch of `records` records with `value_bytes`-byte values and no keys,
/// all at `timestamp` (CreateTime), no producer id: what a non-idempotent client sends.
fn record_batch(records: usize, value_bytes: usize, timestamp: i64) -> Vec<u8> {
    let value: Vec<u8> = (0..value_bytes)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let mut body = Vec::with_capacity(records * (value_bytes + 16));
    for index in 0..records {
        let mut record = Vec::with_capacity(value_bytes + 16);
        record.push(0); // attributes
        varint(&mut record, 0); // timestamp delta
        varint(&mut record, i64::try_from(index).unwrap_or(i64::MAX)); // offset delta
        varint(&mut record, -1); // key: null
        varint(&mut record, i64::try_from(value_bytes).unwrap_or(i64::MAX));
        record.extend_from_slice(&value);
        varint(&mut record, 0); // headers
        varint(&mut body, i64::try_from(record.len()).unwrap_or(i64::MAX));
        body.extend_from_slice(&record);
    }
    let count = i32::try_from(records).unwrap_or(i32::MAX);
    // From attributes to the end: what the CRC covers.
    let mut covered = Vec::with_capacity(body.len() + 40);
    covered.extend_from_slice(&0_i16.to_be_bytes()); // attributes
    covered.extend_from_slice(&(count - 1).to_be_bytes()); // last offset delta
    covered.extend_from_slice(&timestamp.to_be_bytes()); // base timestamp
    covered.extend_from_slice(&timestamp.to_be_bytes()); // max timestamp
    covered.extend_from_slice(&(-1_i64).to_be_bytes()); // producer id
    covered.extend_from_slice(&(-1_i16).to_be_bytes()); // producer epoch
    covered.extend_from_slice(&(-1_i32).to_be_bytes()); // base sequence
    covered.extend_from_slice(&count.to_be_bytes());
    covered.extend_from_slice(&body);
    let crc = crc32c::crc32c(&covered);
    let mut batch = Vec::with_capacity(covered.len() + 21);
    batch.extend_from_slice(&0_i64.to_be_bytes()); // base offset
    let length = i32::try_from(covered.len() + 9).unwrap_or(i32::MAX); // + epoch, magic, crc
    batch.extend_from_slice(&length.to_be_bytes());
    batch.extend_from_slice(&(-1_i32).to_be_bytes()); // partition leader epoch
    batch.push(2); // magic
    batch.extend_from_slice(&crc.to_be_bytes());
    batch.extend_from_slice(&covered);
    batch
}

/// A zigzag varint (records' variable-length fields).
fn varint(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    loop {
        let byte = (zigzag & 0x7f) as u8;
        zigzag >>= 7;
        if zigzag == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A whole Produce v7 frame (size prefix included; correlation id 0 at bytes 8..12) with
/// `batch` for each of `partitions` of `topic`.
fn produce_request(acks: i16, topic: &str, partitions: &[i32], batch: &[u8]) -> Vec<u8> {
    const CLIENT_ID: &[u8] = b"logbook-bench-raw";
    let mut body = Vec::with_capacity(64 + partitions.len() * (batch.len() + 8));
    body.extend_from_slice(&0_i16.to_be_bytes()); // api key: Produce
    body.extend_from_slice(&7_i16.to_be_bytes()); // version
    body.extend_from_slice(&0_i32.to_be_bytes()); // correlation id, set per send
    body.extend_from_slice(&i16::try_from(CLIENT_ID.len()).unwrap_or(0).to_be_bytes());
    body.extend_from_slice(CLIENT_ID);
    body.extend_from_slice(&(-1_i16).to_be_bytes()); // transactional id: null
    body.extend_from_slice(&acks.to_be_bytes());
    body.extend_from_slice(&30_000_i32.to_be_bytes()); // timeout ms
    body.extend_from_slice(&1_i32.to_be_bytes()); // one topic
    body.extend_from_slice(&i16::try_from(topic.len()).unwrap_or(0).to_be_bytes());
    body.extend_from_slice(topic.as_bytes());
    body.extend_from_slice(&i32::try_from(partitions.len()).unwrap_or(0).to_be_bytes());
    for partition in partitions {
        body.extend_from_slice(&partition.to_be_bytes());
        body.extend_from_slice(&i32::try_from(batch.len()).unwrap_or(0).to_be_bytes());
        body.extend_from_slice(batch);
    }
    let mut frame = i32::try_from(body.len())
        .unwrap_or(0)
        .to_be_bytes()
        .to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// The correlation id of a Produce v7 answer and how many of its `partitions` partitions
/// carry an error code.
fn produce_errors(body: &[u8], partitions: usize) -> Result<(i32, u64), String> {
    let mut at = 0_usize;
    let mut take = |n: usize| -> Result<&[u8], String> {
        let slice = body
            .get(at..at + n)
            .ok_or_else(|| format!("short Produce answer ({} bytes)", body.len()))?;
        at += n;
        Ok(slice)
    };
    let i32_of = |b: &[u8]| i32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let correlation = i32_of(take(4)?);
    let topics = i32_of(take(4)?);
    let mut errors = 0_u64;
    let mut seen = 0_usize;
    for _ in 0..topics {
        let name = take(2)?;
        let name_len = usize::try_from(i16::from_be_bytes([name[0], name[1]])).unwrap_or(0);
        take(name_len)?;
        let count = i32_of(take(4)?);
        for _ in 0..count {
            take(4)?; // partition
            let code = take(2)?;
            if i16::from_be_bytes([code[0], code[1]]) != 0 {
                errors += 1;
            }
            take(8 + 8 + 8)?; // base offset, log append time, log start offset
                              // v7 has no record errors or error message.
            seen += 1;
        }
    }
    if seen != partitions {
        return Err(format!(
            "Produce answer for {seen} partitions, sent {partitions}"
        ));
    }
    Ok((correlation, errors))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The batch's length and CRC fields agree with its bytes, as a broker checks them.
    #[test]
    fn record_batch_is_self_consistent() {
        let batch = record_batch(3, 10, 1_700_000_000_000);
        let length = i32::from_be_bytes([batch[8], batch[9], batch[10], batch[11]]);
        assert_eq!(
            usize::try_from(length).expect("positive length") + 12,
            batch.len()
        );
        assert_eq!(batch[16], 2);
        let crc = u32::from_be_bytes([batch[17], batch[18], batch[19], batch[20]]);
        assert_eq!(crc, crc32c::crc32c(&batch[21..]));
        let count = i32::from_be_bytes([batch[57], batch[58], batch[59], batch[60]]);
        assert_eq!(count, 3);
    }

    #[test]
    fn varints_zigzag() {
        let mut out = Vec::new();
        for v in [0, -1, 1, 63, -64, 64, 300] {
            varint(&mut out, v);
        }
        assert_eq!(out, vec![0, 1, 2, 126, 127, 128, 1, 216, 4]);
    }

    #[test]
    fn connections_split_partitions() {
        assert_eq!(partitions_of(0, 4, 8), vec![0, 4]);
        assert_eq!(partitions_of(3, 4, 8), vec![3, 7]);
    }
}
