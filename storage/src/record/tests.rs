//! Tests of the record walker, plus builders of records and batches in every codec that the
//! validator's tests share (storage never imports kafka-protocol, so they encode by hand;
//! the integration tests cover what real clients send).

use std::io::Write;

use super::*;
use crate::compression::{CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD};

pub(crate) use crate::test_util::put_varint;

fn put_nullable(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        Some(b) => {
            put_varint(out, b.len() as i64);
            out.extend_from_slice(b);
        }
        None => put_varint(out, -1),
    }
}

/// One record's fields, encoded by [`TestRecord::encode`] with its length prefix.
#[derive(Clone, Debug)]
pub(crate) struct TestRecord {
    pub timestamp_delta: i64,
    pub offset_delta: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl TestRecord {
    /// Record `i` of a well-formed batch: key `k{i}`, value `v{i}`, one header.
    pub(crate) fn nth(i: i64) -> Self {
        Self {
            timestamp_delta: i,
            offset_delta: i,
            key: Some(format!("k{i}").into_bytes()),
            value: Some(format!("v{i}").into_bytes()),
            headers: vec![(b"h".to_vec(), Some(format!("{i}").into_bytes()))],
        }
    }

    /// The body (no length prefix).
    pub(crate) fn body(&self) -> Vec<u8> {
        let mut body = vec![0u8];
        put_varint(&mut body, self.timestamp_delta);
        put_varint(&mut body, self.offset_delta);
        put_nullable(&mut body, self.key.as_deref());
        put_nullable(&mut body, self.value.as_deref());
        put_varint(&mut body, self.headers.len() as i64);
        for (k, v) in &self.headers {
            put_nullable(&mut body, Some(k));
            put_nullable(&mut body, v.as_deref());
        }
        body
    }

    /// Length prefix and body.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let body = self.body();
        let mut out = Vec::new();
        put_varint(&mut out, body.len() as i64);
        out.extend(body);
        out
    }
}

/// Compresses a records section as Kafka's producers do for `codec`.
pub(crate) fn compress(codec: u8, raw: &[u8]) -> Vec<u8> {
    match codec {
        CODEC_NONE => raw.to_vec(),
        CODEC_GZIP => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(raw).expect("gzip");
            e.finish().expect("gzip")
        }
        CODEC_SNAPPY => snap::raw::Encoder::new().compress_vec(raw).expect("snappy"),
        CODEC_LZ4 => {
            let mut e = lz4::EncoderBuilder::new().build(Vec::new()).expect("lz4");
            e.write_all(raw).expect("lz4");
            let (out, result) = e.finish();
            result.expect("lz4");
            out
        }
        CODEC_ZSTD => zstd::encode_all(raw, 1).expect("zstd"),
        other => panic!("no codec {other}"),
    }
}

/// Snappy in xerial's framing (what the Java producer writes), in blocks of `block` bytes.
pub(crate) fn xerial_snappy(raw: &[u8], block: usize) -> Vec<u8> {
    let mut out = b"\x82SNAPPY\x00".to_vec();
    out.extend(1i32.to_be_bytes());
    out.extend(1i32.to_be_bytes());
    for chunk in raw.chunks(block) {
        let c = snap::raw::Encoder::new()
            .compress_vec(chunk)
            .expect("snappy");
        out.extend((c.len() as u32).to_be_bytes());
        out.extend(c);
    }
    out
}

/// Header fields a test may vary; `Default` is a plain producer's CreateTime batch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TestBatch {
    pub attributes: i16,
    pub base_timestamp: i64,
    /// `None`: the true maximum of the records.
    pub max_timestamp: Option<i64>,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    /// `None`: the number of records.
    pub records_count: Option<i32>,
}

impl Default for TestBatch {
    fn default() -> Self {
        Self {
            attributes: 0,
            base_timestamp: 1_000,
            max_timestamp: None,
            producer_id: -1,
            producer_epoch: -1,
            base_sequence: -1,
            records_count: None,
        }
    }
}

impl TestBatch {
    /// A whole batch holding `records`, its records section being `section` (already
    /// compressed if the attributes say so), with a correct CRC.
    pub(crate) fn with_section(&self, records: &[TestRecord], section: &[u8]) -> Vec<u8> {
        let count = self.records_count.unwrap_or(records.len() as i32);
        let max_ts = self.max_timestamp.unwrap_or_else(|| {
            records
                .iter()
                .map(|r| self.base_timestamp + r.timestamp_delta)
                .max()
                .unwrap_or(-1)
        });
        let mut out = Vec::new();
        out.extend(0i64.to_be_bytes());
        out.extend(0i32.to_be_bytes()); // batch length, patched below
        out.extend(0i32.to_be_bytes());
        out.push(2);
        out.extend(0u32.to_be_bytes()); // crc, patched below
        out.extend(self.attributes.to_be_bytes());
        out.extend((count - 1).to_be_bytes());
        out.extend(self.base_timestamp.to_be_bytes());
        out.extend(max_ts.to_be_bytes());
        out.extend(self.producer_id.to_be_bytes());
        out.extend(self.producer_epoch.to_be_bytes());
        out.extend(self.base_sequence.to_be_bytes());
        out.extend(count.to_be_bytes());
        out.extend_from_slice(section);
        let length = (out.len() - 12) as i32;
        out[8..12].copy_from_slice(&length.to_be_bytes());
        let crc = crc32c::crc32c(&out[21..]);
        out[17..21].copy_from_slice(&crc.to_be_bytes());
        out
    }

    /// A whole batch of `records`, compressed with the codec of `attributes`.
    pub(crate) fn build(&self, records: &[TestRecord]) -> Vec<u8> {
        let raw: Vec<u8> = records.iter().flat_map(TestRecord::encode).collect();
        let section = compress((self.attributes & 7) as u8, &raw);
        self.with_section(records, &section)
    }
}

// Records of every shape parse back to exactly their fields, and the walker yields them in
// order and consumes the whole buffer.
#[test]
fn walks_every_field() {
    let mut records: Vec<TestRecord> = (0..3).map(TestRecord::nth).collect();
    records[1].key = None;
    records[1].value = None;
    records[1].headers = vec![];
    records[2].headers.push((b"empty".to_vec(), None));
    records[2].timestamp_delta = -5;
    let buf: Vec<u8> = records.iter().flat_map(TestRecord::encode).collect();
    let mut iter = RecordIter::new(&buf);
    let walked: Vec<Record<'_>> = iter.by_ref().map(|r| r.expect("valid")).collect();
    assert!(iter.remaining().is_empty());
    assert_eq!(walked.len(), 3);
    for (w, r) in walked.iter().zip(&records) {
        assert_eq!(w.offset_delta as i64, r.offset_delta);
        assert_eq!(w.timestamp_delta, r.timestamp_delta);
        assert_eq!(w.key, r.key.as_deref());
        assert_eq!(w.value, r.value.as_deref());
        let headers: Vec<(&[u8], Option<&[u8]>)> = w.headers.iter().collect();
        let expected: Vec<(&[u8], Option<&[u8]>)> = r
            .headers
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_deref()))
            .collect();
        assert_eq!(headers, expected);
        assert_eq!(w.size_bytes, r.encode().len());
    }
    assert!(walked[1].headers.is_empty());
    assert_eq!(walked[2].headers.len(), 2);
}

// Large varints (timestamps in ms, i64 extremes) and the edges of the one- and two-byte
// fast paths round-trip, through `parse` and `skim` alike.
#[test]
fn varlong_extremes() {
    let edges = [
        0,
        1,
        -1,
        63,
        64,
        -64,
        -65,
        8191,
        8192,
        -8192,
        -8193,
        1 << 20,
    ];
    for delta in [i64::MIN, i64::MAX, 1_700_000_000_000]
        .into_iter()
        .chain(edges)
    {
        let mut r = TestRecord::nth(0);
        r.timestamp_delta = delta;
        let enc = r.encode();
        assert_eq!(Record::parse(&enc).expect("valid").timestamp_delta, delta);
        assert_eq!(Record::skim(&enc).expect("valid").timestamp_delta, delta);
    }
    for delta in edges {
        let mut r = TestRecord::nth(0);
        r.offset_delta = delta;
        r.value = Some(vec![
            7;
            usize::try_from(delta.unsigned_abs()).expect("small")
        ]);
        let enc = r.encode();
        let parsed = Record::parse(&enc).expect("valid");
        let skimmed = Record::skim(&enc).expect("valid");
        assert_eq!(i64::from(parsed.offset_delta), delta);
        assert_eq!(i64::from(skimmed.offset_delta), delta);
        assert_eq!(
            parsed.value.map(<[u8]>::len),
            r.value.as_ref().map(Vec::len)
        );
        assert_eq!((skimmed.size_bytes, skimmed.has_key), (enc.len(), true));
    }
}

/// `parse`'s error, checked to be `skim`'s as well: the validator walks with `skim`.
fn parse_err(bytes: &[u8]) -> RecordError {
    let error = Record::parse(bytes).expect_err("must be rejected");
    assert_eq!(
        Record::skim(bytes).expect_err("skim must reject it too"),
        error
    );
    error
}

// Each malformation gets its own error, and never a panic.
#[test]
fn rejects_each_malformation() {
    let good = TestRecord::nth(7).encode();
    // Length prefix beyond the buffer.
    assert_eq!(
        parse_err(&good[..good.len() - 1]),
        RecordError::InvalidSize {
            expected: (good.len() - 1) as i64,
            remaining: good.len() - 2
        }
    );
    // Negative length prefix.
    let mut neg = Vec::new();
    put_varint(&mut neg, -3);
    assert!(matches!(
        parse_err(&neg),
        RecordError::InvalidSize { expected: -3, .. }
    ));
    // Length prefix longer than the fields: bytes left over inside the record.
    let mut body = TestRecord::nth(1).body();
    body.push(0);
    let mut padded = Vec::new();
    put_varint(&mut padded, body.len() as i64);
    padded.extend(&body);
    assert_eq!(
        parse_err(&padded),
        RecordError::SizeMismatch {
            expected: body.len(),
            read: body.len() - 1
        }
    );
    // Length prefix shorter than the fields.
    let body = TestRecord::nth(1).body();
    let mut short = Vec::new();
    put_varint(&mut short, body.len() as i64 - 2);
    short.extend(&body);
    assert!(matches!(
        parse_err(&short),
        RecordError::SizeMismatch { .. }
    ));
    // Key length below -1.
    let mut r = vec![0u8];
    put_varint(&mut r, 0);
    put_varint(&mut r, 0);
    put_varint(&mut r, -2);
    let mut bad_key = Vec::new();
    put_varint(&mut bad_key, r.len() as i64);
    bad_key.extend(&r);
    assert_eq!(
        parse_err(&bad_key),
        RecordError::InvalidLength {
            field: "key",
            length: -2
        }
    );
    // Negative header count.
    let mut r = vec![0u8];
    for v in [0, 0, -1, -1, -4] {
        put_varint(&mut r, v);
    }
    let mut bad_headers = Vec::new();
    put_varint(&mut bad_headers, r.len() as i64);
    bad_headers.extend(&r);
    assert_eq!(parse_err(&bad_headers), RecordError::InvalidHeaderCount(-4));
    // Null header key.
    let mut r = vec![0u8];
    for v in [0, 0, -1, -1, 1, -1, -1] {
        put_varint(&mut r, v);
    }
    let mut null_header_key = Vec::new();
    put_varint(&mut null_header_key, r.len() as i64);
    null_header_key.extend(&r);
    assert_eq!(
        parse_err(&null_header_key),
        RecordError::InvalidLength {
            field: "header key",
            length: -1
        }
    );
    // A varint of 6 continuation bytes.
    let too_long = [0x80u8, 0x80, 0x80, 0x80, 0x80, 0x01];
    assert_eq!(parse_err(&too_long), RecordError::VarintTooLong);
    // Empty input.
    assert_eq!(parse_err(&[]), RecordError::Truncated);
}

// After an error the walker stops instead of resynchronising on garbage.
#[test]
fn walker_stops_at_first_error() {
    let mut buf = TestRecord::nth(0).encode();
    buf.extend([0x7f, 1, 2]);
    buf.extend(TestRecord::nth(1).encode());
    let items: Vec<_> = RecordIter::new(&buf).collect();
    assert_eq!(items.len(), 2);
    assert!(items[0].is_ok());
    assert!(items[1].is_err());
}

// Every codec's output decompresses back to the records, and raw and xerial snappy both
// work; garbage under each codec flag is an error, not a panic.
#[test]
fn every_codec_decompresses() {
    let raw: Vec<u8> = (0..50).flat_map(|i| TestRecord::nth(i).encode()).collect();
    for codec in [CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD] {
        let compressed = compress(codec, &raw);
        let out = crate::compression::decompress(codec, &compressed, 1 << 20).expect("valid");
        assert_eq!(out, raw, "codec {codec}");
        let garbage: Vec<u8> = (0..200u32).map(|i| (i * 37 % 251) as u8).collect();
        assert!(
            crate::compression::decompress(codec, &garbage, 1 << 20).is_err(),
            "garbage under codec {codec}"
        );
        // The bound holds.
        assert_eq!(
            crate::compression::decompress(codec, &compressed, raw.len() - 1),
            Err(crate::compression::DecompressError::TooLarge {
                bytes_max: raw.len() - 1
            }),
            "bound under codec {codec}"
        );
    }
    let xerial = xerial_snappy(&raw, 100);
    assert_eq!(
        crate::compression::decompress(CODEC_SNAPPY, &xerial, 1 << 20).expect("xerial"),
        raw
    );
}
