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
pub fn summarize(bytes: &Bytes) -> Result<Vec<RecordSummary>, String> {
    let mut buf = bytes.clone();
    let sets = RecordBatchDecoder::decode_all(&mut buf).map_err(|e| e.to_string())?;
    Ok(sets
        .into_iter()
        .flat_map(|set| set.records)
        .map(|r| RecordSummary {
            offset: r.offset,
            timestamp: r.timestamp,
            has_key: r.key.is_some(),
        })
        .collect())
}
