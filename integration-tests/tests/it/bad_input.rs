//! Bad input on raw TCP sockets: malformed frames, absurd sizes, unknown APIs
//! and versions, pipelining. The broker must answer or close — never hang,
//! never crash — and keep serving normal clients afterwards.

use std::io::Write;
use std::net::Shutdown;

use bytes::{Buf, BufMut, BytesMut};
use integration_tests::Broker;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse,
    ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, StrBytes};

use crate::common::assert_round_trip;
use crate::wire::{self, connect, expect_closed, expect_frame, read_frame, Read1};

/// Deterministic pseudo-random bytes (xorshift), so a failure reproduces.
fn garbage(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[3]
        })
        .collect()
}

/// Peak virtual memory of a process in KiB (`VmPeak` in /proc/<pid>/status).
fn vm_peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmPeak:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmPeak line")
}

#[test]
fn garbage_bytes_close_the_connection() {
    // Proves: random bytes whose size prefix is absurd (0x7f.. = ~2 GiB), a
    // correctly sized frame whose header is garbage (API key 0x7f7f), and a
    // zero-length frame each make the broker close that connection; the broker
    // still serves an rdkafka round trip afterwards.
    let broker = Broker::start();

    let mut stream = connect(broker.addr());
    let mut bytes = garbage(1000, 0x5eed);
    bytes[0] = 0x7f;
    stream.write_all(&bytes).expect("send garbage");
    expect_closed(&mut stream, "random garbage");

    let mut stream = connect(broker.addr());
    let mut frame = Vec::new();
    frame.put_i32(996);
    let mut body = garbage(996, 42);
    body[0] = 0x7f;
    body[1] = 0x7f;
    frame.extend_from_slice(&body);
    stream.write_all(&frame).expect("send framed garbage");
    expect_closed(&mut stream, "framed garbage with API key 0x7f7f");

    let mut stream = connect(broker.addr());
    stream
        .write_all(&0i32.to_be_bytes())
        .expect("send empty frame");
    expect_closed(&mut stream, "zero-length frame");

    assert_round_trip(&broker.bootstrap(), "after-garbage");
}

#[test]
fn truncated_frame_then_close() {
    // Proves: a frame whose prefix says 100 bytes but whose sender sends 10 and
    // half-closes gets the connection closed by the broker (no hang), and the
    // broker keeps serving clients.
    let broker = Broker::start();
    let mut stream = connect(broker.addr());
    let mut frame = Vec::new();
    frame.put_i32(100);
    frame.extend_from_slice(&[0, 18, 0, 3, 0, 0, 0, 1, 0, 0]);
    stream.write_all(&frame).expect("send truncated frame");
    stream.shutdown(Shutdown::Write).expect("half-close");
    expect_closed(&mut stream, "truncated frame");
    assert_round_trip(&broker.bootstrap(), "after-truncated");
}

#[test]
fn oversized_and_negative_length_prefixes_close_the_connection() {
    // Proves: size prefixes 0x7fffffff (2 GiB), -1, i32::MIN, and one byte over
    // --frame-bytes-max (1 MiB here) each get the connection closed, without the
    // broker reserving the claimed size (its peak virtual memory grows by less
    // than 1 GiB), and the broker keeps serving clients.
    let broker = Broker::start_with(&["--frame-bytes-max", "1048576"]);
    let bootstrap = broker.bootstrap();
    assert_round_trip(&bootstrap, "before-prefixes");
    let peak_before = vm_peak_kib(broker.pid());

    for prefix in [i32::MAX, -1, i32::MIN, 1_048_577] {
        let mut stream = connect(broker.addr());
        let mut bytes = prefix.to_be_bytes().to_vec();
        bytes.extend_from_slice(&[0, 18, 0, 3, 0, 0, 0, 1]);
        stream.write_all(&bytes).expect("send size prefix");
        expect_closed(&mut stream, &format!("size prefix {prefix}"));
    }

    let peak_after = vm_peak_kib(broker.pid());
    assert!(
        peak_after < peak_before + 1024 * 1024,
        "broker VmPeak grew from {peak_before} KiB to {peak_after} KiB: it allocated a claimed frame size"
    );
    assert_round_trip(&bootstrap, "after-prefixes");
}

/// A request header v1 for `api_key`/`version` with correlation id 7, then `body`.
fn hand_made_frame(api_key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let mut payload = BytesMut::new();
    payload.put_i16(api_key);
    payload.put_i16(version);
    payload.put_i32(7);
    payload.put_i16(2);
    payload.put_slice(b"it");
    payload.put_slice(body);
    let mut frame = Vec::new();
    frame.put_i32(i32::try_from(payload.len()).expect("small"));
    frame.extend_from_slice(&payload);
    frame
}

/// Sends `frame` and asserts the broker either closes the connection or answers
/// with correlation id 7 — within the read timeout, never a hang.
fn closed_or_answered(broker: &Broker, frame: &[u8], what: &str) {
    let mut stream = connect(broker.addr());
    stream.write_all(frame).expect("send request");
    match read_frame(&mut stream) {
        Read1::Closed => {}
        Read1::Frame(mut response) => {
            assert!(
                response.len() >= 4,
                "{what}: response shorter than a header"
            );
            assert_eq!(
                response.get_i32(),
                7,
                "{what}: correlation id of the error response"
            );
        }
    }
}

#[test]
fn unknown_api_key_and_unknown_version() {
    // Proves: a well-framed request with API key 9999, and a Metadata request at
    // version 99, get the connection closed or an error response carrying the
    // request's correlation id — never a hang — and the broker keeps serving.
    let broker = Broker::start();
    closed_or_answered(&broker, &hand_made_frame(9999, 0, &[]), "API key 9999");
    closed_or_answered(
        &broker,
        &hand_made_frame(ApiKey::Metadata as i16, 99, &[0, 0, 0, 0]),
        "Metadata v99",
    );
    assert_round_trip(&broker.bootstrap(), "after-unknown-api");
}

/// API keys that must be advertised by ApiVersions.
const REQUIRED_APIS: [ApiKey; 7] = [
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::ApiVersions,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
];

/// Asserts `response` lists every API of `REQUIRED_APIS` with min <= max and
/// ApiVersions itself at least 0..=3.
fn assert_advertises_required_apis(response: &ApiVersionsResponse) {
    for api in REQUIRED_APIS {
        let entry = response
            .api_keys
            .iter()
            .find(|k| k.api_key == api as i16)
            .unwrap_or_else(|| panic!("{api:?} missing from ApiVersions: {:?}", response.api_keys));
        assert!(entry.min_version <= entry.max_version, "{api:?}: {entry:?}");
    }
    let own = response
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::ApiVersions as i16)
        .expect("ApiVersions advertised");
    assert!(
        own.min_version == 0 && own.max_version >= 3,
        "ApiVersions range {own:?}"
    );
}

#[test]
fn api_versions_unknown_version_answers_v0_unsupported_version() {
    // Proves: ApiVersions at v127 is answered (not closed) in the v0 layout —
    // response header v0 with the correlation id, error_code 35
    // UNSUPPORTED_VERSION and an api_keys list of ApiVersions alone, as Kafka's —
    // so a client can retry at a version the broker supports.
    let broker = Broker::start();
    let mut body = Vec::new();
    body.put_u8(0); // request header v2 tagged fields
    body.put_u8(3); // compact string "it"
    body.put_slice(b"it");
    body.put_u8(2); // compact string "1"
    body.put_slice(b"1");
    body.put_u8(0); // body tagged fields
    let mut stream = connect(broker.addr());
    stream
        .write_all(&hand_made_frame(ApiKey::ApiVersions as i16, 127, &body))
        .expect("send ApiVersions v127");
    let mut frame = expect_frame(&mut stream);
    let header = ResponseHeader::decode(&mut frame, 0).expect("response header v0");
    assert_eq!(header.correlation_id, 7);
    let response =
        ApiVersionsResponse::decode(&mut frame, 0).expect("ApiVersions response in v0 layout");
    assert_eq!(frame.remaining(), 0, "bytes after the v0 ApiVersions body");
    assert_eq!(response.error_code, 35, "UNSUPPORTED_VERSION");
    // Kafka lists only ApiVersions itself here (ApiVersionsRequest.getErrorResponse).
    let listed: Vec<(i16, i16)> = response
        .api_keys
        .iter()
        .map(|k| (k.api_key, k.min_version))
        .collect();
    assert_eq!(
        listed,
        [(ApiKey::ApiVersions as i16, 0)],
        "api_keys of the fallback"
    );
    assert!(
        response.api_keys[0].max_version >= 3,
        "ApiVersions range {:?}",
        response.api_keys[0]
    );
    assert_round_trip(&broker.bootstrap(), "after-api-versions-127");
}

#[test]
fn pipelined_requests_answered_in_order() {
    // Proves: 20 requests (ApiVersions v3 and Metadata v12 alternating,
    // correlation ids 1..=20) written back to back on one connection before
    // reading anything are answered in request order, each response decoding
    // cleanly at its version (Metadata lists this broker's host and port).
    let broker = Broker::start();
    let api_versions = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("logbook-it"))
        .with_client_software_version(StrBytes::from_static_str("1.0"));
    let metadata = MetadataRequest::default().with_topics(None);
    let mut all = Vec::new();
    for correlation_id in 1..=20 {
        if correlation_id % 2 == 1 {
            all.extend(wire::request_frame(3, correlation_id, &api_versions));
        } else {
            all.extend(wire::request_frame(12, correlation_id, &metadata));
        }
    }
    let mut stream = connect(broker.addr());
    stream.write_all(&all).expect("send 20 pipelined requests");

    let mut seen = Vec::new();
    for expected in 1..=20 {
        let mut frame = expect_frame(&mut stream);
        if expected % 2 == 1 {
            let header =
                ResponseHeader::decode(&mut frame, 0).expect("ApiVersions response header v0");
            seen.push(header.correlation_id);
            if header.correlation_id != expected {
                continue;
            }
            let response = ApiVersionsResponse::decode(&mut frame, 3).expect("ApiVersions v3 body");
            assert_eq!(response.error_code, 0);
            assert_advertises_required_apis(&response);
        } else {
            let header =
                ResponseHeader::decode(&mut frame, 1).expect("Metadata response header v1");
            seen.push(header.correlation_id);
            if header.correlation_id != expected {
                continue;
            }
            let response = MetadataResponse::decode(&mut frame, 12).expect("Metadata v12 body");
            let brokers: Vec<(String, i32)> = response
                .brokers
                .iter()
                .map(|b| (b.host.as_str().to_owned(), b.port))
                .collect();
            assert_eq!(
                brokers,
                vec![("127.0.0.1".to_owned(), i32::from(broker.addr().port()))]
            );
        }
        assert_eq!(frame.remaining(), 0, "bytes after response {expected}");
    }
    assert_eq!(
        seen,
        (1..=20).collect::<Vec<i32>>(),
        "correlation ids in request order"
    );
    assert_round_trip(&broker.bootstrap(), "after-pipelining");
}

/// One uncompressed v2 batch of `count` records `v0..`, keyed `k0..` (or key-less),
/// timestamps from 1000.
pub(crate) fn record_batch(count: i64, keyed: bool) -> bytes::Bytes {
    let records: Vec<_> = (0..count)
        .map(|i| {
            (
                keyed.then(|| bytes::Bytes::from(format!("k{i}"))),
                Some(bytes::Bytes::from(format!("v{i}"))),
            )
        })
        .collect();
    wire::record_batch(&records, 1_000)
}

/// Sends one Produce v9 (acks=-1) of `records` to `topic`-0 and returns the partition's
/// (error code, base offset).
fn produce_raw(stream: &mut std::net::TcpStream, topic: &str, records: bytes::Bytes) -> (i16, i64) {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, TopicName};
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let response = wire::round_trip(stream, 9, 77, &request);
    let partition = &response.responses[0].partition_responses[0];
    (partition.error_code, partition.base_offset)
}

// Batches that fail validation get Kafka's per-partition error codes, nothing is
// appended (the next good batch still gets offset 0), and the connection stays usable:
// a flipped CRC byte → CORRUPT_MESSAGE (2), a magic-1 message set →
// UNSUPPORTED_FOR_MESSAGE_FORMAT (43), a length running past the data → CORRUPT_MESSAGE.
#[test]
fn invalid_batches_get_kafka_error_codes() {
    let broker = Broker::start();
    crate::common::create_topic(&broker.bootstrap(), "validated", 1, &[]);
    let mut stream = connect(broker.addr());
    let good = record_batch(3, true);

    let mut flipped = good.to_vec();
    let last = flipped.len() - 1;
    flipped[last] ^= 0xff;
    assert_eq!(
        produce_raw(&mut stream, "validated", flipped.into()).0,
        2,
        "flipped CRC byte"
    );

    let mut magic1 = good.to_vec();
    magic1[16] = 1;
    assert_eq!(
        produce_raw(&mut stream, "validated", magic1.into()).0,
        43,
        "magic 1"
    );

    let mut long = good.to_vec();
    long[8..12].copy_from_slice(&10_000i32.to_be_bytes());
    assert_eq!(
        produce_raw(&mut stream, "validated", long.into()).0,
        2,
        "length past the data"
    );

    assert_eq!(
        produce_raw(&mut stream, "validated", good.clone()),
        (0, 0),
        "first good batch gets offset 0"
    );
    assert_eq!(
        produce_raw(&mut stream, "validated", good),
        (0, 3),
        "second good batch follows it"
    );
}

// Two valid batches for one partition in one request are refused with INVALID_RECORD (87),
// as Kafka's LogValidator refuses them, and nothing of either is appended.
#[test]
fn two_batches_for_one_partition_are_refused() {
    let broker = Broker::start();
    crate::common::create_topic(&broker.bootstrap(), "one-batch", 1, &[]);
    let mut stream = connect(broker.addr());
    let good = record_batch(2, true);
    let two: bytes::Bytes = [good.as_ref(), good.as_ref()].concat().into();
    assert_eq!(produce_raw(&mut stream, "one-batch", two).0, 87);
    assert_eq!(produce_raw(&mut stream, "one-batch", good), (0, 0));
}

// A compacted topic refuses records without a key with INVALID_RECORD (87), as Kafka does,
// and accepts keyed ones.
#[test]
fn compacted_topic_rejects_null_keys() {
    let broker = Broker::start();
    crate::common::create_topic(
        &broker.bootstrap(),
        "compacted",
        1,
        &[("cleanup.policy", "compact")],
    );
    let mut stream = connect(broker.addr());
    assert_eq!(
        produce_raw(&mut stream, "compacted", record_batch(2, false)).0,
        87
    );
    assert_eq!(
        produce_raw(&mut stream, "compacted", record_batch(2, true)),
        (0, 0)
    );
}

// A request claiming a 2^31-element array in a 20-byte frame must not make the broker
// allocate it: the connection closes and the broker keeps serving.
#[test]
fn huge_array_length_does_not_crash() {
    let mut broker = Broker::start();
    for (version, array_len) in [
        (1i16, &0x7fff_ffffi32.to_be_bytes()[..]),
        (9, &[0xff, 0xff, 0xff, 0xff, 0x0f][..]),
    ] {
        let mut stream = connect(broker.addr());
        let mut body = BytesMut::new();
        body.put_i16(ApiKey::Metadata as i16);
        body.put_i16(version);
        body.put_i32(5);
        body.put_i16(-1); // null client id
        if version >= 9 {
            body.put_u8(0); // no tagged fields in the header
        }
        body.put_slice(array_len);
        let mut frame = Vec::new();
        frame.extend_from_slice(&i32::try_from(body.len()).expect("small").to_be_bytes());
        frame.extend_from_slice(&body);
        stream.write_all(&frame).expect("send");
        expect_closed(&mut stream, "metadata with a huge array length");
    }
    assert!(broker.is_running(), "broker died:\n{}", broker.log_tail());
    assert_round_trip(&broker.bootstrap(), "after-huge-array");
}

// A topic with message.timestamp.type=LogAppendTime stamps batches with the broker's clock:
// the produce response carries it and consumers see it instead of the producer's 1000.
#[test]
fn log_append_time_topic_stamps_batches() {
    let broker = Broker::start();
    crate::common::create_topic(
        &broker.bootstrap(),
        "stamped",
        1,
        &[("message.timestamp.type", "LogAppendTime")],
    );
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64;
    let mut stream = connect(broker.addr());
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, TopicName};
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("stamped")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(record_batch(2, true)))])]);
    let response = wire::round_trip(&mut stream, 9, 1, &request);
    let partition = &response.responses[0].partition_responses[0];
    assert_eq!(partition.error_code, 0);
    assert!(
        partition.log_append_time_ms >= before,
        "log append time {} < {before}",
        partition.log_append_time_ms
    );
    let consumed = crate::common::consume(&broker.bootstrap(), "stamped", 0, 0, 2, &[]);
    for c in &consumed {
        assert_eq!(
            c.timestamp,
            rdkafka::Timestamp::LogAppendTime(partition.log_append_time_ms),
            "record timestamp is the broker's"
        );
    }
}

// Clients cannot append to the internal __consumer_offsets topic: INVALID_TOPIC_EXCEPTION
// (17), as Kafka answers; the coordinator's own records are unaffected.
#[test]
fn produce_to_internal_topic_is_refused() {
    // Before `__consumer_offsets` exists a Produce to it is UNKNOWN_TOPIC_OR_PARTITION (3)
    // and creates nothing, as on Kafka; once FindCoordinator has made it, INVALID_TOPIC (17).
    use kafka_protocol::messages::{FindCoordinatorRequest, FindCoordinatorResponse};
    let broker = Broker::start();
    let mut stream = connect(broker.addr());
    assert_eq!(
        produce_raw(&mut stream, "__consumer_offsets", record_batch(1, true)).0,
        3
    );
    let found: FindCoordinatorResponse = wire::round_trip(
        &mut stream,
        4,
        78,
        &FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![StrBytes::from_static_str("g")]),
    );
    assert_eq!(found.coordinators[0].error_code, 0, "FindCoordinator");
    assert_eq!(
        produce_raw(&mut stream, "__consumer_offsets", record_batch(1, true)).0,
        17
    );
}

// Flexible request versions can carry strings longer than the int16-length fields of
// __consumer_offsets: a 40,000-byte group id gets INVALID_GROUP_ID (24) on JoinGroup and
// OffsetCommit, a 40,000-byte topic in a commit gets UNKNOWN_TOPIC_OR_PARTITION (3), and the
// broker keeps serving.
#[test]
fn overlong_group_strings_are_refused() {
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{GroupId, JoinGroupRequest, OffsetCommitRequest, TopicName};
    let mut broker = Broker::start_with(&["--group-initial-rebalance-delay-ms", "0"]);
    let mut stream = connect(broker.addr());
    let long = "g".repeat(40_000);
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(long.clone())))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(bytes::Bytes::from_static(b"\x00\x00"))]);
    let response = wire::round_trip(&mut stream, 9, 1, &join);
    assert_eq!(
        response.error_code, 24,
        "JoinGroup with a 40,000-byte group id"
    );

    let commit = |group: String, topic: String| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic)))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(5)])])
    };
    assert_round_trip(&broker.bootstrap(), "t");
    let response = wire::round_trip(&mut stream, 9, 2, &commit(long.clone(), "t".into()));
    assert_eq!(
        response.topics[0].partitions[0].error_code, 24,
        "commit with a long group id"
    );
    let response = wire::round_trip(&mut stream, 9, 3, &commit("g".into(), long));
    assert_eq!(
        response.topics[0].partitions[0].error_code, 3,
        "commit with a long topic"
    );
    assert!(broker.is_running(), "broker died:\n{}", broker.log_tail());
    assert_round_trip(&broker.bootstrap(), "after-long-strings");
}

// `--decompressed-batch-bytes-max` bounds what one produced batch may inflate to: a gzip
// batch of 64 KiB of zeros (a few hundred bytes on the wire) is refused as CORRUPT_MESSAGE
// (2) with the bound at 4096 and nothing is appended; the same batch is accepted by a broker
// with the default bound.
#[test]
fn decompression_bound_is_a_flag() {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let records: Vec<Record> = (0..16)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: i32::try_from(i).expect("small") - 1,
            timestamp: 1_000 + i,
            key: Some(bytes::Bytes::from(format!("k{i}"))),
            value: Some(bytes::Bytes::from(vec![0u8; 4096])),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::Gzip,
        },
    )
    .expect("encode batch");
    let bomb = buf.freeze();
    assert!(bomb.len() < 4096, "compressed: {} bytes", bomb.len());

    let bounded = Broker::start_with(&["--decompressed-batch-bytes-max", "4096"]);
    crate::common::create_topic(&bounded.bootstrap(), "inflating", 1, &[]);
    let mut stream = connect(bounded.addr());
    assert_eq!(
        produce_raw(&mut stream, "inflating", bomb.clone()).0,
        2,
        "a batch inflating past the bound"
    );
    assert_eq!(
        produce_raw(&mut stream, "inflating", record_batch(1, true)),
        (0, 0),
        "nothing was appended"
    );

    let default = Broker::start();
    crate::common::create_topic(&default.bootstrap(), "inflating", 1, &[]);
    let mut stream = connect(default.addr());
    assert_eq!(produce_raw(&mut stream, "inflating", bomb), (0, 0));
}
