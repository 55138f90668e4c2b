//! Blocking socket helpers: connect with timeouts, read one size-prefixed frame, one
//! request/response round trip, and what the fuzzer asks the broker before and between
//! batches (ApiVersions, Metadata, the setup that gives it topics, records and a
//! transactional producer to aim at).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{
    api_versions_request::ApiVersionsRequest, create_topics_request, init_producer_id_request,
    metadata_request::MetadataRequest, produce_request, ApiKey, ApiVersionsResponse,
    CreateTopicsResponse, InitProducerIdResponse, MetadataResponse, ProducerId, RequestKind,
    ResponseHeader, TopicName, TransactionalId,
};
use kafka_protocol::protocol::{Decodable, StrBytes};

use crate::requests::{self, Corpus, Topic};

/// Largest response frame we believe; a bigger size prefix is a broken response.
pub const RESPONSE_BYTES_MAX: usize = 256 * 1024 * 1024;

/// One served API and its version range.
#[derive(Clone, Copy, Debug)]
pub struct ApiRange {
    /// Api key.
    pub key: i16,
    /// Lowest version.
    pub min: i16,
    /// Highest version.
    pub max: i16,
}

/// How a read of one response ended without a frame.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadEnd {
    /// EOF or reset: the broker closed the connection.
    Closed,
    /// Nothing within the read timeout.
    Timeout,
    /// A size prefix that cannot be a response (negative or over `RESPONSE_BYTES_MAX`).
    Implausible(i32),
}

/// Resolves `addr` (host:port) to its first socket address.
///
/// # Errors
/// The address does not resolve.
pub fn resolve(addr: &str) -> Result<SocketAddr, String> {
    addr.to_socket_addrs()
        .map_err(|e| format!("resolve {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("{addr} resolves to nothing"))
}

/// Connects with connect, read and write timeouts of `timeout`.
///
/// # Errors
/// The connection is refused or times out.
pub fn connect(addr: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

fn is_closed(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::UnexpectedEof
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionAborted
            | ErrorKind::BrokenPipe
            | ErrorKind::NotConnected
    )
}

fn read_exact(stream: &mut TcpStream, buf: &mut [u8]) -> Result<(), ReadEnd> {
    match stream.read_exact(buf) {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            Err(ReadEnd::Timeout)
        }
        Err(e) if is_closed(&e) => Err(ReadEnd::Closed),
        Err(_) => Err(ReadEnd::Closed),
    }
}

/// Reads one size-prefixed frame (the prefix removed).
///
/// # Errors
/// The connection closed, timed out, or the size prefix is implausible.
pub fn read_frame(stream: &mut TcpStream) -> Result<Bytes, ReadEnd> {
    let mut size = [0u8; 4];
    read_exact(stream, &mut size)?;
    let size = i32::from_be_bytes(size);
    let len = usize::try_from(size).map_err(|_| ReadEnd::Implausible(size))?;
    if len > RESPONSE_BYTES_MAX {
        return Err(ReadEnd::Implausible(size));
    }
    let mut body = vec![0u8; len];
    read_exact(stream, &mut body)?;
    Ok(Bytes::from(body))
}

/// Writes all of `bytes`; `false` if the broker closed the connection or stalled.
pub fn write_all(stream: &mut TcpStream, bytes: &[u8]) -> bool {
    stream.write_all(bytes).is_ok()
}

/// Sends one request and returns the response body (header stripped).
///
/// # Errors
/// Connection trouble, a closed connection, or an undecodable header.
pub fn round_trip(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    request: &RequestKind,
) -> Result<Bytes, String> {
    let payload = requests::encode(key, version, 1, Some("logbook-wire-fuzz"), request)
        .ok_or_else(|| format!("{key:?} v{version} does not encode"))?;
    if !write_all(stream, &crate::mutate::honest(&payload)) {
        return Err(format!("{key:?} v{version}: write failed"));
    }
    let mut frame = read_frame(stream).map_err(|e| format!("{key:?} v{version}: {e:?}"))?;
    ResponseHeader::decode(&mut frame, key.response_header_version(version))
        .map_err(|e| format!("{key:?} v{version} response header: {e}"))?;
    Ok(frame)
}

/// The APIs the listener at `addr` advertises.
///
/// # Errors
/// No answer, or an answer that does not decode.
pub fn api_versions(addr: SocketAddr, timeout: Duration) -> Result<Vec<ApiRange>, String> {
    let mut stream = connect(addr, timeout).map_err(|e| format!("connect {addr}: {e}"))?;
    let request = RequestKind::ApiVersions(ApiVersionsRequest::default());
    // v3 first (what clients send); a broker without it answers in v0.
    for version in [3, 0] {
        let Ok(mut body) = round_trip(&mut stream, ApiKey::ApiVersions, version, &request) else {
            stream = connect(addr, timeout).map_err(|e| format!("connect {addr}: {e}"))?;
            continue;
        };
        let response = ApiVersionsResponse::decode(&mut body, version)
            .map_err(|e| format!("ApiVersions v{version} response: {e}"))?;
        if response.error_code != 0 {
            continue;
        }
        return Ok(response
            .api_keys
            .iter()
            .map(|k| ApiRange {
                key: k.api_key,
                min: k.min_version,
                max: k.max_version,
            })
            .collect());
    }
    Err(format!("{addr} answered no ApiVersions"))
}

fn version_of(apis: &[ApiRange], key: ApiKey, ceiling: i16) -> Option<i16> {
    apis.iter()
        .find(|a| a.key == key as i16)
        .map(|a| a.max.min(ceiling))
        .filter(|v| apis.iter().any(|a| a.key == key as i16 && a.min <= *v))
}

/// Topics and brokers from a Metadata request for every topic.
///
/// # Errors
/// Connection trouble or an undecodable answer.
pub fn metadata(
    stream: &mut TcpStream,
    apis: &[ApiRange],
) -> Result<(Vec<Topic>, Vec<i32>), String> {
    let version = version_of(apis, ApiKey::Metadata, 12).ok_or("no Metadata version")?;
    let mut request = MetadataRequest::default();
    request.topics = None;
    let mut body = round_trip(
        stream,
        ApiKey::Metadata,
        version,
        &RequestKind::Metadata(request),
    )?;
    let response = MetadataResponse::decode(&mut body, version)
        .map_err(|e| format!("Metadata v{version} response: {e}"))?;
    let topics = response
        .topics
        .iter()
        .filter_map(|t| {
            Some(Topic {
                name: t.name.as_ref()?.0.to_string(),
                id: t.topic_id,
                partitions: t.partitions.iter().map(|p| p.partition_index).collect(),
            })
        })
        .collect();
    let brokers = response.brokers.iter().map(|b| b.node_id.0).collect();
    Ok((topics, brokers))
}

/// ApiVersions then Metadata on a fresh connection, all within `timeout`.
///
/// # Errors
/// What failed, and how long it took.
pub fn health(addr: SocketAddr, apis: &[ApiRange], timeout: Duration) -> Result<(), String> {
    let started = Instant::now();
    let mut stream = connect(addr, timeout).map_err(|e| format!("connect: {e}"))?;
    let request = RequestKind::ApiVersions(ApiVersionsRequest::default());
    round_trip(&mut stream, ApiKey::ApiVersions, 3, &request)
        .map_err(|e| format!("ApiVersions after {:?}: {e}", started.elapsed()))?;
    let left = timeout.saturating_sub(started.elapsed());
    stream
        .set_read_timeout(Some(left.max(Duration::from_millis(1))))
        .map_err(|e| e.to_string())?;
    metadata(&mut stream, apis)
        .map_err(|e| format!("Metadata after {:?}: {e}", started.elapsed()))?;
    Ok(())
}

/// Creates the fuzz topics (fuzz-a, fuzz-b, fuzz-c) when the broker serves
/// CreateTopics; ones that already exist (a second run) are fine.
fn create_topics(stream: &mut TcpStream, apis: &[ApiRange]) -> Result<(), String> {
    if let Some(version) = version_of(apis, ApiKey::CreateTopics, 7) {
        let mut request = create_topics_request::CreateTopicsRequest::default();
        request.timeout_ms = 10_000;
        for (name, partitions) in [("fuzz-a", 3), ("fuzz-b", 1), ("fuzz-c", 2)] {
            let mut t = create_topics_request::CreatableTopic::default();
            t.name = TopicName(StrBytes::from_static_str(name));
            t.num_partitions = partitions;
            t.replication_factor = -1;
            request.topics.push(t);
        }
        // Already existing (a second run) is fine.
        let body = round_trip(
            stream,
            ApiKey::CreateTopics,
            version,
            &RequestKind::CreateTopics(request),
        )?;
        let _ = CreateTopicsResponse::decode(&mut body.clone(), version);
    }
    Ok(())
}

/// Writes a record batch into every partition of the fuzz topics, so that fetches have
/// something to read; a refusal (a partition led elsewhere) is ignored.
fn produce_records(stream: &mut TcpStream, apis: &[ApiRange], topics: &[Topic], batches: &[Bytes]) {
    if let Some(version) = version_of(apis, ApiKey::Produce, 9) {
        for topic in topics.iter().filter(|t| t.name.starts_with("fuzz-")) {
            let mut request = produce_request::ProduceRequest::default();
            request.acks = 1;
            request.timeout_ms = 5000;
            let mut data = produce_request::TopicProduceData::default();
            data.name = TopicName(StrBytes::from_string(topic.name.clone()));
            for partition in &topic.partitions {
                let mut p = produce_request::PartitionProduceData::default();
                p.index = *partition;
                p.records = batches.first().cloned();
                data.partition_data.push(p);
            }
            request.topic_data.push(data);
            // A partition led elsewhere answers NOT_LEADER; records are a nicety.
            let _ = round_trip(
                stream,
                ApiKey::Produce,
                version,
                &RequestKind::Produce(request),
            );
        }
    }
}

/// A producer id and epoch for requests that name one: a transactional one, else an
/// idempotent one; (-1, -1) when the broker grants neither.
fn init_producer_id(stream: &mut TcpStream, apis: &[ApiRange]) -> (i64, i16) {
    let mut producer = (-1, -1);
    if let Some(version) = version_of(apis, ApiKey::InitProducerId, 4) {
        for transactional in [true, false] {
            let mut request = init_producer_id_request::InitProducerIdRequest::default();
            request.transactional_id =
                transactional.then(|| TransactionalId(StrBytes::from_static_str("fuzz-txn")));
            request.transaction_timeout_ms = 60_000;
            request.producer_id = ProducerId(-1);
            request.producer_epoch = -1;
            let Ok(mut body) = round_trip(
                stream,
                ApiKey::InitProducerId,
                version,
                &RequestKind::InitProducerId(request),
            ) else {
                break;
            };
            if let Ok(r) = InitProducerIdResponse::decode(&mut body, version) {
                if r.error_code == 0 {
                    producer = (r.producer_id.0, r.producer_epoch);
                    break;
                }
            }
        }
    }
    producer
}

/// Gives the broker something to be fuzzed around: topics (created if missing), records
/// in each of their partitions, and a transactional producer id; then reads Metadata.
///
/// # Errors
/// The broker does not answer Metadata.
pub fn prepare(addr: SocketAddr, apis: &[ApiRange], timeout: Duration) -> Result<Corpus, String> {
    let mut stream = connect(addr, timeout).map_err(|e| format!("connect {addr}: {e}"))?;
    create_topics(&mut stream, apis)?;
    let (batches, bombs) = requests::record_batches();
    let (topics, brokers) = metadata(&mut stream, apis)?;
    produce_records(&mut stream, apis, &topics, &batches);
    let producer = init_producer_id(&mut stream, apis);
    Ok(Corpus {
        topics,
        brokers,
        groups: vec!["fuzz-group".to_owned(), "fuzz-group-2".to_owned()],
        transactional_ids: vec!["fuzz-txn".to_owned(), "fuzz-txn-2".to_owned()],
        producer,
        batches,
        bombs,
    })
}
