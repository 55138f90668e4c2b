//! Record-level decoding, kept off the hot path: only ListOffsets by timestamp decodes
//! stored records here (produce validation walks them in place with storage's
//! `record` walker instead), through the
//! `kafka-protocol` crate's decoder (which handles all codecs, xerial snappy framing
//! included).

use bytes::Bytes;
use kafka_protocol::records::RecordBatchDecoder;

/// One decoded record's offset, timestamp and whether it has a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordSummary {
    /// Absolute offset.
    pub offset: i64,
    /// Record timestamp (create time, or the batch's log-append time).
    pub timestamp: i64,
    /// Whether the key is non-null.
    pub has_key: bool,
}

/// Decodes every record of the back-to-back batches in `bytes`.
///
/// # Errors
/// The decoder's message when the bytes do not parse.
///
/// Under LogAppendTime (attribute bit 3) every record's timestamp is the batch's
/// `max_timestamp`, the broker's append time, as Kafka's `DefaultRecordBatch` reads it.
/// The `kafka-protocol` decoder adds each record's delta to the first timestamp either
/// way, which is the producer's create time there: ListOffsets by timestamp then answered
/// with the producer's clock on a LogAppendTime topic, and a lookup at the append time
/// found nothing.
pub fn summarize(bytes: &Bytes) -> Result<Vec<RecordSummary>, String> {
    let mut buf = bytes.clone();
    let mut summaries = Vec::new();
    while !buf.is_empty() {
        let append_time = logbook_storage::RecordBatchHeader::parse(&buf)
            .ok()
            .filter(|header| header.is_log_append_time())
            .map(|header| header.max_timestamp);
        let set = RecordBatchDecoder::decode(&mut buf).map_err(|e| e.to_string())?;
        summaries.extend(set.records.into_iter().map(|r| RecordSummary {
            offset: r.offset,
            timestamp: append_time.unwrap_or(r.timestamp),
            has_key: r.key.is_some(),
        }));
    }
    Ok(summaries)
}
