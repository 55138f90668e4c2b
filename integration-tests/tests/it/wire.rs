//! Raw Kafka wire access over `std::net::TcpStream`, for requests no client
//! library would send: hand-made frames, unknown versions, pipelining.
//! Encoding and decoding of well-formed messages goes through `kafka-protocol`.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

/// Read timeout on raw sockets: a broker that neither answers nor closes within
/// this time counts as hung.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Connects with read and write timeouts set.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&addr, READ_TIMEOUT).expect("connect to the broker");
    stream
        .set_read_timeout(Some(READ_TIMEOUT))
        .expect("set read timeout");
    stream
        .set_write_timeout(Some(READ_TIMEOUT))
        .expect("set write timeout");
    stream.set_nodelay(true).expect("set nodelay");
    stream
}

/// One size-prefixed request frame: header (at the header version the API
/// version implies) followed by the body.
pub fn request_frame<R: Request>(version: i16, correlation_id: i32, request: &R) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("logbook-it")));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, R::header_version(version))
        .expect("encode request header");
    request
        .encode(&mut body, version)
        .expect("encode request body");
    let mut frame = Vec::with_capacity(body.len() + 4);
    frame.put_i32(i32::try_from(body.len()).expect("small request"));
    frame.extend_from_slice(&body);
    frame
}

/// What a read of one response frame found.
#[derive(Debug)]
pub enum Read1 {
    /// A whole frame (size prefix removed).
    Frame(Bytes),
    /// The broker closed the connection (EOF or reset) before a whole frame.
    Closed,
}

/// Reads one size-prefixed frame. Panics if the broker neither answers nor
/// closes within `READ_TIMEOUT` (that is a hung connection).
pub fn read_frame(stream: &mut TcpStream) -> Read1 {
    let mut size = [0u8; 4];
    if !read_exact_or_closed(stream, &mut size) {
        return Read1::Closed;
    }
    let size = i32::from_be_bytes(size);
    assert!(
        (0..=64 * 1024 * 1024).contains(&size),
        "response size prefix {size} is not plausible"
    );
    let mut body = vec![0u8; usize::try_from(size).expect("non-negative")];
    if !read_exact_or_closed(stream, &mut body) {
        return Read1::Closed;
    }
    Read1::Frame(Bytes::from(body))
}

/// Reads one frame and panics if the connection closed instead.
pub fn expect_frame(stream: &mut TcpStream) -> Bytes {
    match read_frame(stream) {
        Read1::Frame(frame) => frame,
        Read1::Closed => panic!("broker closed the connection instead of answering"),
    }
}

/// Asserts the broker closes the connection (EOF or reset) within
/// `READ_TIMEOUT`, discarding anything it sends before closing.
pub fn expect_closed(stream: &mut TcpStream, what: &str) {
    let mut sink = [0u8; 4096];
    loop {
        match stream.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if is_reset(&e) => return,
            Err(e) if is_timeout(&e) => {
                panic!("{what}: broker neither answered nor closed the connection within {READ_TIMEOUT:?}")
            }
            Err(e) => panic!("{what}: read failed: {e}"),
        }
    }
}

/// Decodes a response header of `header_version` and checks its correlation id.
pub fn split_response(frame: &mut Bytes, header_version: i16, correlation_id: i32) {
    let header = ResponseHeader::decode(frame, header_version).expect("decode response header");
    assert_eq!(
        header.correlation_id, correlation_id,
        "response correlation id"
    );
}

/// Sends `request` and decodes its response, checking the correlation id and
/// that the whole frame was consumed.
pub fn round_trip<R: Request>(
    stream: &mut TcpStream,
    version: i16,
    correlation_id: i32,
    request: &R,
) -> R::Response {
    stream
        .write_all(&request_frame(version, correlation_id, request))
        .expect("send request");
    let mut frame = expect_frame(stream);
    split_response(
        &mut frame,
        <R::Response as HeaderVersion>::header_version(version),
        correlation_id,
    );
    let response = R::Response::decode(&mut frame, version).expect("decode response body");
    assert_eq!(frame.remaining(), 0, "bytes left after the response body");
    response
}

fn read_exact_or_closed(stream: &mut TcpStream, buf: &mut [u8]) -> bool {
    let mut filled = 0;
    while filled < buf.len() {
        match stream.read(&mut buf[filled..]) {
            Ok(0) => return false,
            Ok(n) => filled += n,
            Err(e) if is_reset(&e) => return false,
            Err(e) if is_timeout(&e) => {
                panic!("broker neither answered nor closed the connection within {READ_TIMEOUT:?} ({filled} of {} bytes read)", buf.len())
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => panic!("read failed: {e}"),
        }
    }
    true
}

fn is_reset(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe
    )
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// One uncompressed v2 batch of plain (non-idempotent) records, as `(key, value)` pairs,
/// timestamps `first_timestamp`, `first_timestamp + 1`, …: what a raw-socket test produces
/// when it needs well-formed records rather than hand-made bytes.
pub fn record_batch(records: &[(Option<Bytes>, Option<Bytes>)], first_timestamp: i64) -> Bytes {
    use kafka_protocol::records::{Record, TimestampType};
    let records: Vec<Record> = records
        .iter()
        .zip(0_i32..)
        .map(|((key, value), delta)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(delta),
            // One batch: kafka-protocol's encoder starts a new batch wherever `offset -
            // sequence` changes, so sequences count up from -1 (the base sequence stays -1).
            sequence: delta - 1,
            timestamp: first_timestamp + i64::from(delta),
            key: key.clone(),
            value: value.clone(),
            headers: Default::default(),
        })
        .collect();
    encode_uncompressed(&records)
}

/// `records` encoded as uncompressed v2 batches (one per run of `offset - sequence`).
pub fn encode_uncompressed(records: &[kafka_protocol::records::Record]) -> Bytes {
    use kafka_protocol::records::{Compression, RecordBatchEncoder, RecordEncodeOptions};
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("encode batch");
    buf.freeze()
}
