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
//!
//! The request is framed and the answers decoded by `logbook-client`'s framing functions,
//! as its `InterBrokerClient` frames and decodes; that client itself is not used to send:
//! it encodes every request anew and routes each through a queue, a oneshot answer and a
//! connection task, work per request that would bring back the client cost this section
//! exists to avoid. Here each connection writes the same bytes with a patched correlation
//! id and one reader counts the answers.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use crate::Res;

/// Largest Produce answer accepted (a few partitions' worth is a few hundred bytes).
const ANSWER_BYTES_MAX: usize = 1 << 20;

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
    let (reader, mut writer) = stream.into_split();
    let timestamp = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_millis(),
    )?;
    let batch = record_batch(shape.records_per_batch, shape.value_bytes, timestamp)?;
    let mut frame = produce_request(shape.acks, &shape.topic, owned, &batch)?;
    let bytes_per_request = (owned.len() * shape.records_per_batch * shape.value_bytes) as u64;
    let records_per_request = (owned.len() * shape.records_per_batch) as u64;
    let slots = Arc::new(Semaphore::new(shape.in_flight.max(1)));
    let total = shape.total_bytes;
    let reading_slots = Arc::clone(&slots);
    let partitions = owned.len();
    let answers = tokio::spawn(read_answers(
        reader,
        partitions,
        bytes_per_request,
        records_per_request,
        reading_slots,
    ));
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

/// The reading half of a connection: each answer, in order, is checked for its
/// correlation id and partition errors, counts its request's bytes and records as
/// acknowledged, and frees a slot for the next request. Ends when the writer closes.
async fn read_answers(
    mut reader: OwnedReadHalf,
    partitions: usize,
    bytes_per_request: u64,
    records_per_request: u64,
    slots: Arc<Semaphore>,
) -> Result<RawRun, String> {
    let mut run = RawRun::default();
    let mut expected = 0_i32;
    loop {
        let mut size = [0_u8; 4];
        if reader.read_exact(&mut size).await.is_err() {
            return Ok(run);
        }
        let len = usize::try_from(i32::from_be_bytes(size))
            .ok()
            .filter(|len| *len <= ANSWER_BYTES_MAX)
            .ok_or_else(|| format!("implausible answer size {size:?}"))?;
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
        slots.add_permits(1);
    }
}

/// A v2 record batch of `records` records with `value_bytes`-byte values and no keys,
/// all at `timestamp` (CreateTime), no producer id: what a non-idempotent client sends.
fn record_batch(records: usize, value_bytes: usize, timestamp: i64) -> Res<Bytes> {
    let value: Bytes = (0..value_bytes)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect::<Vec<u8>>()
        .into();
    let records: Vec<Record> = (0..i64::try_from(records)?)
        .map(|offset| Record {
            transactional: false,
            control: false,
            partition_leader_epoch: -1,
            delete_horizon: false,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset,
            // kafka-protocol starts a new batch wherever `offset - sequence` changes, so
            // the sequence counts along (the batch's base sequence stays -1).
            sequence: i32::try_from(offset).unwrap_or(i32::MAX) - 1,
            timestamp,
            key: None,
            value: Some(value.clone()),
            headers: Default::default(),
        })
        .collect();
    let mut batch = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut batch,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .map_err(|e| format!("encode record batch: {e}"))?;
    Ok(batch.freeze())
}

/// Produce version of the raw requests (non-flexible: the correlation id sits at a fixed
/// place in the frame, bytes 8..12).
const PRODUCE_VERSION: i16 = 7;

/// A whole Produce frame (size prefix included; correlation id 0 at bytes 8..12) with
/// `batch` for each of `partitions` of `topic`.
fn produce_request(acks: i16, topic: &str, partitions: &[i32], batch: &Bytes) -> Res<Vec<u8>> {
    let request = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partition_data(
                partitions
                    .iter()
                    .map(|p| {
                        PartitionProduceData::default()
                            .with_index(*p)
                            .with_records(Some(batch.clone()))
                    })
                    .collect(),
            )]);
    let body = logbook_client::encode_request(PRODUCE_VERSION, "logbook-bench-raw", &request)
        .map_err(|e| format!("encode Produce: {e}"))?;
    Ok(logbook_client::with_size_prefix(&body)?.to_vec())
}

/// The correlation id of a Produce answer and how many of its partitions carry an error
/// code; an answer for another number of partitions than `partitions` is an error.
fn produce_errors(body: &[u8], partitions: usize) -> Result<(i32, u64), String> {
    let mut buf = Bytes::copy_from_slice(body);
    let (header, answer) =
        logbook_client::decode_response::<ProduceRequest>(&mut buf, PRODUCE_VERSION)
            .map_err(|e| format!("Produce answer: {e}"))?;
    let codes: Vec<i16> = answer
        .responses
        .iter()
        .flat_map(|t| t.partition_responses.iter().map(|p| p.error_code))
        .collect();
    if codes.len() != partitions {
        return Err(format!(
            "Produce answer for {} partitions, sent {partitions}",
            codes.len()
        ));
    }
    let errors = codes.iter().filter(|code| **code != 0).count();
    Ok((
        header.correlation_id,
        u64::try_from(errors).unwrap_or(u64::MAX),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The batch's length and CRC fields agree with its bytes, as a broker checks them,
    // and it is one batch of all the records.
    #[test]
    fn record_batch_is_self_consistent() {
        let batch = record_batch(3, 10, 1_700_000_000_000).expect("batch");
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

    // A request's correlation id sits where `connection` patches it.
    #[test]
    fn correlation_id_is_at_bytes_8_to_12() {
        let batch = record_batch(1, 4, 0).expect("batch");
        let frame = produce_request(-1, "t", &[0, 1], &batch).expect("frame");
        assert_eq!(&frame[4..6], &0_i16.to_be_bytes());
        assert_eq!(&frame[6..8], &PRODUCE_VERSION.to_be_bytes());
        assert_eq!(&frame[8..12], &0_i32.to_be_bytes());
    }

    // A truncated answer is an error, not a panic.
    #[test]
    fn truncated_answers_are_errors() {
        assert!(produce_errors(&[0, 0, 0, 1, 0, 0], 1).is_err());
        assert!(produce_errors(&[], 1).is_err());
    }

    #[test]
    fn connections_split_partitions() {
        assert_eq!(partitions_of(0, 4, 8), vec![0, 4]);
        assert_eq!(partitions_of(3, 4, 8), vec![3, 7]);
    }
}
