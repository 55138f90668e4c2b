//! Every compression codec librdkafka offers: the broker stores the compressed
//! batches and the consumer reads back exactly what was produced.

use integration_tests::Broker;

use crate::common::{assert_records, consume, create_topic, produce_ok, Record};

/// Produces 1000 records (compressible values, several batches) with
/// `compression.type = codec` and reads them back from offset 0.
fn round_trip_with(codec: &str) {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    let topic = format!("compressed-{codec}");
    create_topic(&bootstrap, &topic, 1, &[]);

    let records: Vec<Record> = (0..1000)
        .map(|i| {
            let mut record = Record::new(
                0,
                format!("key-{i}"),
                format!("{codec} payload {i} {}", "abcdefgh".repeat(1 + i % 20)),
            );
            record.headers = vec![("codec".to_owned(), Some(codec.as_bytes().to_vec()))];
            record
        })
        .collect();
    let acked = produce_ok(
        &bootstrap,
        &topic,
        &records,
        &[
            ("compression.type", codec),
            ("linger.ms", "20"),
            ("batch.num.messages", "200"),
        ],
    );
    assert_eq!(
        acked,
        (0..1000).map(|o| (0, o)).collect::<Vec<_>>(),
        "acknowledged offsets ({codec})"
    );
    let consumed = consume(&bootstrap, &topic, 0, 0, 1000, &[]);
    assert_records(&consumed, &records, 0);
}

#[test]
fn codec_none() {
    // Proves: uncompressed batches round-trip 1000 records at offsets 0..1000.
    round_trip_with("none");
}

#[test]
fn codec_gzip() {
    // Proves: gzip-compressed batches round-trip 1000 records at offsets 0..1000.
    round_trip_with("gzip");
}

#[test]
fn codec_snappy() {
    // Proves: snappy-compressed batches round-trip 1000 records at offsets 0..1000.
    round_trip_with("snappy");
}

#[test]
fn codec_lz4() {
    // Proves: lz4-compressed batches round-trip 1000 records at offsets 0..1000.
    round_trip_with("lz4");
}

#[test]
fn codec_zstd() {
    // Proves: zstd-compressed batches round-trip 1000 records at offsets 0..1000.
    round_trip_with("zstd");
}
