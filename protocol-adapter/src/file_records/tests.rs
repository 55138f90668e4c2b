use std::io::Write;

use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchResponse, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::*;
use crate::{encode_response, encode_response_with_records};

/// A file holding `len` distinct bytes, open for reading.
fn file_of(len: usize, seed: u8) -> (tempfile::NamedTempFile, Arc<File>) {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    let bytes: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect();
    file.write_all(&bytes).expect("write");
    let shared = Arc::new(file.reopen().expect("reopen"));
    (file, shared)
}

/// Writes out the chunks as a socket would receive them.
fn flatten(chunks: Vec<Chunk>) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in chunks {
        match chunk {
            Chunk::Mem(mem) => out.extend_from_slice(&mem),
            Chunk::File(region) => region.read(&mut out).expect("read region"),
        }
    }
    out
}

fn partition(index: i32, records: Option<Bytes>) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_high_watermark(1000 + i64::from(index))
        .with_last_stable_offset(1000)
        .with_log_start_offset(3)
        .with_preferred_read_replica(BrokerId(-1))
        .with_records(records)
}

/// A response with record sets from files (one spanning two files), an empty set, a null
/// set and aborted transactions, built twice: with stand-ins and with the real bytes.
fn responses(
    version: i16,
    files: &[(Arc<File>, u64, usize)],
) -> (FetchResponse, FileRecords, FetchResponse) {
    let mut records = FileRecords::default();
    let region = |i: usize| FileRegion {
        file: Arc::clone(&files[i].0),
        position: files[i].1,
        len: files[i].2,
    };
    let real = |regions: &[FileRegion]| {
        let mut out = Vec::new();
        for r in regions {
            r.read(&mut out).expect("read");
        }
        Bytes::from(out)
    };
    let sets = [vec![region(0)], vec![region(1), region(2)], vec![region(3)]];
    let mut spliced = Vec::new();
    let mut plain = Vec::new();
    for (i, set) in sets.iter().enumerate() {
        spliced.push(records.records(set.clone()).expect("stand-in"));
        plain.push(real(set));
        let _ = i;
    }
    let build = |sets: &[Bytes]| {
        let aborted = (version >= 4).then(|| {
            vec![AbortedTransaction::default()
                .with_producer_id((7).into())
                .with_first_offset(5)]
        });
        let topic = |name: &str, partitions| {
            let mut t = FetchableTopicResponse::default().with_partitions(partitions);
            if version >= 13 {
                t = t.with_topic_id(uuid::Uuid::from_u128(0x1234));
            } else {
                t = t.with_topic(TopicName(StrBytes::from_string(name.to_string())));
            }
            t
        };
        FetchResponse::default()
            .with_throttle_time_ms(0)
            .with_responses(vec![
                topic(
                    "a",
                    vec![
                        partition(0, Some(sets[0].clone())).with_aborted_transactions(aborted),
                        partition(1, Some(Bytes::new())),
                        partition(2, None),
                    ],
                ),
                topic(
                    "b",
                    vec![
                        partition(0, Some(sets[1].clone())),
                        partition(1, Some(sets[2].clone())),
                    ],
                ),
            ])
    };
    (build(&spliced), records, build(&plain))
}

#[test]
fn file_regions_encode_byte_for_byte_like_in_memory_records_at_every_version() {
    let (_a, a) = file_of(5000, 1);
    let (_b, b) = file_of(300, 2);
    let files = [
        (Arc::clone(&a), 100, 4000),
        (Arc::clone(&b), 0, 300),
        (Arc::clone(&a), 0, 70),
        (Arc::clone(&a), 4100, 900),
    ];
    for version in 4..=18 {
        let (spliced, records, plain) = responses(version, &files);
        let mut out = ResponseBuf::new();
        // A response before, in memory only, as a connection batches them.
        let before = ResponseKind::Fetch(FetchResponse::default());
        encode_response_with_records(
            &mut out,
            ApiKey::Fetch,
            version,
            1,
            &before,
            FileRecords::default(),
        )
        .expect("encode");
        encode_response_with_records(
            &mut out,
            ApiKey::Fetch,
            version,
            2,
            &ResponseKind::Fetch(spliced),
            records,
        )
        .unwrap_or_else(|e| panic!("v{version}: {e}"));
        let logical = out.len();
        let chunks = out.take_chunks();
        let files_in_output = chunks
            .iter()
            .filter(|c| matches!(c, Chunk::File(_)))
            .count();
        assert_eq!(
            files_in_output, 4,
            "v{version}: every region is a file chunk"
        );
        let got = flatten(chunks);
        assert_eq!(got.len(), logical, "v{version}: logical length");

        let mut want = BytesMut::new();
        encode_response(&mut want, ApiKey::Fetch, version, 1, &before).expect("encode");
        encode_response(
            &mut want,
            ApiKey::Fetch,
            version,
            2,
            &ResponseKind::Fetch(plain),
        )
        .expect("encode");
        assert!(got == want[..], "v{version}: bytes differ");
        assert!(out.is_empty());
    }
}

#[test]
fn seeking_back_drops_file_chunks_and_keeps_earlier_bytes() {
    let (_a, a) = file_of(100, 3);
    let mut records = FileRecords::default();
    let stand_in = records
        .records(vec![FileRegion {
            file: Arc::clone(&a),
            position: 10,
            len: 50,
        }])
        .expect("stand-in");
    let mut out = ResponseBuf::new();
    out.put_slice(b"head");
    out.begin_records(records);
    out.put_slice(&stand_in);
    out.put_slice(b"tail");
    out.end_records().expect("matched");
    assert_eq!(out.len(), 4 + 50 + 4);
    out.range(54..58).copy_from_slice(b"TAIL");
    out.seek(30);
    assert_eq!(out.len(), 30, "cut inside the file region");
    out.seek(2);
    assert_eq!(out.len(), 2);
    out.put_slice(b"ad");
    assert_eq!(flatten(out.take_chunks()), b"head");
}

#[test]
fn a_stand_in_the_encoder_never_wrote_is_an_error() {
    let (_a, a) = file_of(10, 4);
    let mut records = FileRecords::default();
    let _unused = records
        .records(vec![FileRegion {
            file: a,
            position: 0,
            len: 10,
        }])
        .expect("stand-in");
    let mut out = ResponseBuf::new();
    out.begin_records(records);
    out.put_slice(b"no records here");
    assert!(out.end_records().is_err());
}

#[test]
fn empty_record_sets_need_no_stand_in() {
    let mut records = FileRecords::default();
    let bytes = records.records(Vec::new()).expect("empty");
    assert!(bytes.is_empty());
    assert!(records.is_empty());
}
