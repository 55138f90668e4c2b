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

/// The codec id (attribute bits 0-2) of every batch in `topic`/0's first segment.
fn stored_codecs(broker: &Broker, topic: &str) -> Vec<u8> {
    let segment = broker
        .data_dir()
        .join(format!("{topic}-0"))
        .join("00000000000000000000.log");
    let bytes = std::fs::read(&segment).expect("read the segment");
    let mut codecs = Vec::new();
    let mut at = 0;
    while at + 61 <= bytes.len() {
        let length = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes"));
        let attributes = i16::from_be_bytes(bytes[at + 21..at + 23].try_into().expect("2 bytes"));
        codecs.push((attributes & 7) as u8);
        at += 12 + usize::try_from(length).expect("positive batch length");
    }
    codecs
}

#[test]
fn a_topics_compression_type_is_the_codec_batches_are_stored_in() {
    // Proves: with the topic's `compression.type` set (not `producer`), batches sent
    // uncompressed, in gzip and in snappy are stored in the topic's codec, as Kafka's
    // LogValidator recompresses them, and read back exactly; `producer` stores each as
    // sent. Before the fix every batch kept the producer's codec (a gzip-only client such
    // as kafkajs could not read a `gzip` topic that a snappy producer wrote to).
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    for (topic_codec, expected) in [
        ("zstd", [4, 4, 4]),
        ("lz4", [3, 3, 3]),
        ("gzip", [1, 1, 1]),
        ("uncompressed", [0, 0, 0]),
        ("producer", [0, 1, 2]),
    ] {
        let topic = format!("stored-as-{topic_codec}");
        create_topic(&bootstrap, &topic, 1, &[("compression.type", topic_codec)]);
        let mut all = Vec::new();
        for (round, producer_codec) in ["none", "gzip", "snappy"].iter().enumerate() {
            let records: Vec<Record> = (0..20)
                .map(|i| {
                    let mut record = Record::new(
                        0,
                        format!("key-{round}-{i}"),
                        format!("{producer_codec} {i} {}", "xyz".repeat(i)),
                    );
                    record.headers = vec![("h".to_owned(), Some(vec![round as u8]))];
                    record
                })
                .collect();
            // One batch per producer codec: librdkafka sends the batch once all 20 are
            // queued, and the long linger keeps it from sending part of them earlier when
            // this thread is descheduled mid-loop (a 100 ms linger split a batch in two on
            // a loaded 2-core CI machine).
            let acked = produce_ok(
                &bootstrap,
                &topic,
                &records,
                &[
                    ("compression.type", producer_codec),
                    ("batch.num.messages", "20"),
                    ("linger.ms", "10000"),
                ],
            );
            let first = round as i64 * 20;
            assert_eq!(
                acked,
                (first..first + 20).map(|o| (0, o)).collect::<Vec<_>>(),
                "{topic}: offsets of the {producer_codec} batch"
            );
            all.extend(records);
        }
        assert_eq!(
            stored_codecs(&broker, &topic),
            expected,
            "{topic}: stored codecs"
        );
        let consumed = consume(&bootstrap, &topic, 0, 0, 60, &[]);
        assert_records(&consumed, &all, 0);
    }
}
