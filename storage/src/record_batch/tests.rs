//! Tests of the header view, produce validation and in-place rewrites.

use super::*;
use crate::test_util::{batch, batch_with_timestamps};

// A well-formed single batch parses and validates, with the summary the broker needs.
#[test]
fn valid_batch_parses_and_validates() {
    let b = batch(3, 10, 1000);
    let h = RecordBatchHeader::parse(&b).expect("valid");
    assert_eq!(h.magic, 2);
    assert_eq!(h.records_count, 3);
    assert_eq!(h.last_offset_delta, 2);
    assert_eq!(h.total_bytes(), b.len());
    assert_eq!(h.max_timestamp, 1002);
    assert_eq!(h.compression_codec(), 0);
    assert!(!h.is_log_append_time() && !h.is_transactional() && !h.is_control());
    let s = validate_batches(&b).expect("valid");
    assert_eq!(s.batch_count, 1);
    assert_eq!(s.record_count, 3);
    assert_eq!(s.largest_batch_bytes, b.len());
    assert_eq!(s.max_timestamp, 1002);
}

// Several batches back to back are summed.
#[test]
fn multiple_batches_validate() {
    let mut buf = batch(1, 5, 10);
    buf.extend(batch(4, 50, 20));
    buf.extend(batch(2, 0, 5));
    let s = validate_batches(&buf).expect("valid");
    assert_eq!(s.batch_count, 3);
    assert_eq!(s.record_count, 7);
    assert_eq!(s.max_timestamp, 23);
    assert_eq!(iter_headers(&buf).count(), 3);
}

// Each kind of damage is rejected with its own error.
#[test]
fn validation_rejects_each_bad_case() {
    assert_eq!(
        validate_batches(&[]).expect_err("must be rejected"),
        BatchError::Empty
    );

    let good = batch(2, 8, 0);
    let mut bad_crc = good.clone();
    let last = bad_crc.len() - 1;
    bad_crc[last] ^= 0xff;
    assert!(matches!(
        validate_batches(&bad_crc),
        Err(BatchError::CrcMismatch { position: 0, .. })
    ));

    let mut bad_magic = good.clone();
    bad_magic[16] = 1;
    assert_eq!(
        validate_batches(&bad_magic).expect_err("must be rejected"),
        BatchError::UnsupportedMagic(1)
    );

    assert_eq!(
        validate_batches(&good[..10]).expect_err("must be rejected"),
        BatchError::Truncated { position: 0 }
    );
    assert!(matches!(
        validate_batches(&good[..40]),
        Err(BatchError::InvalidLength { position: 0, .. })
    ));
    assert!(matches!(
        validate_batches(&good[..good.len() - 1]),
        Err(BatchError::InvalidLength { position: 0, .. })
    ));

    let mut too_long = good.clone();
    too_long[8..12].copy_from_slice(&1_000_000i32.to_be_bytes());
    assert!(matches!(
        validate_batches(&too_long),
        Err(BatchError::InvalidLength {
            length: 1_000_000,
            ..
        })
    ));
    let mut too_short = good.clone();
    too_short[8..12].copy_from_slice(&48i32.to_be_bytes());
    assert!(matches!(
        validate_batches(&too_short),
        Err(BatchError::InvalidLength { length: 48, .. })
    ));

    let mut count_mismatch = good.clone();
    count_mismatch[57..61].copy_from_slice(&5i32.to_be_bytes());
    fix_crc(&mut count_mismatch);
    assert!(matches!(
        validate_batches(&count_mismatch),
        Err(BatchError::InvalidRecordCount {
            count: 5,
            last_offset_delta: 1,
            ..
        })
    ));

    let mut codec = good.clone();
    codec[22] |= 0x7;
    fix_crc(&mut codec);
    assert!(matches!(
        validate_batches(&codec),
        Err(BatchError::InvalidCodec { codec: 7, .. })
    ));

    // A trailing partial batch after a good one is reported at its position.
    let mut trailing = good.clone();
    trailing.extend(&good[..20]);
    assert!(matches!(
        validate_batches(&trailing),
        Err(BatchError::InvalidLength { position, .. }) if position == good.len()
    ));
    let mut trailing = good.clone();
    trailing.extend(&good[..5]);
    assert_eq!(
        validate_batches(&trailing).expect_err("must be rejected"),
        BatchError::Truncated {
            position: good.len()
        }
    );
}

fn fix_crc(b: &mut [u8]) {
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
}

// parse checks magic before requiring a whole v2 header.
#[test]
fn parse_reports_magic_before_length() {
    let mut short = vec![0u8; 20];
    short[16] = 1;
    assert_eq!(
        RecordBatchHeader::parse(&short).expect_err("must be rejected"),
        BatchError::UnsupportedMagic(1)
    );
    short[16] = 2;
    assert_eq!(
        RecordBatchHeader::parse(&short).expect_err("must be rejected"),
        BatchError::Truncated { position: 0 }
    );
    assert_eq!(
        RecordBatchHeader::parse(&short[..16]).expect_err("must be rejected"),
        BatchError::Truncated { position: 0 }
    );
}

// Offsets and epochs are rewritten without invalidating the CRC.
#[test]
fn assign_offsets_rewrites_headers_and_keeps_crc() {
    let mut buf = batch(3, 4, 0);
    buf.extend(batch(2, 4, 0));
    let next = assign_offsets(&mut buf, 100, 7);
    assert_eq!(next, 105);
    let headers: Vec<_> = iter_headers(&buf).map(|(_, h)| h).collect();
    assert_eq!(headers[0].base_offset, 100);
    assert_eq!(headers[1].base_offset, 103);
    assert_eq!(headers[1].last_offset(), 104);
    assert!(headers.iter().all(|h| h.partition_leader_epoch == 7));
    validate_batches(&buf).expect("crc still valid");
}

// LogAppendTime sets the attribute and max timestamp and re-signs the batch.
#[test]
fn log_append_time_rewrites_and_resigns() {
    let mut buf = batch_with_timestamps(2, 4, 5, Some(6));
    buf.extend(batch(1, 4, 0));
    set_log_append_time(&mut buf, 99_999);
    validate_batches(&buf).expect("crc recomputed");
    for (_, h) in iter_headers(&buf) {
        assert!(h.is_log_append_time());
        assert_eq!(h.max_timestamp, 99_999);
    }
}

// iter_headers stops at an incomplete batch instead of yielding garbage.
#[test]
fn iter_headers_stops_at_incomplete_batch() {
    let mut buf = batch(1, 4, 0);
    let first = buf.len();
    buf.extend(batch(1, 400, 0));
    buf.truncate(buf.len() - 1);
    let all: Vec<_> = iter_headers(&buf).collect();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].0, 0);
    assert_eq!(all[0].1.total_bytes(), first);
}
