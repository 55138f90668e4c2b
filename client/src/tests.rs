//! The inter-broker client against scripted peers on loopback: pipelined answers matched by
//! correlation id, a silent peer timed out and the next request reconnecting, a refused
//! connection, and an answer out of order closing the connection. Also Kafka's error names.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::StreamExt;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, ResponseHeader};
use kafka_protocol::protocol::Encodable;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::codec::FramedRead;

use super::{error_name, BrokerEndpoint, InterBrokerClient, InterBrokerConfig, InterBrokerError};

const VERSION: i16 = 3;

fn config() -> InterBrokerConfig {
    InterBrokerConfig {
        request_timeout: Duration::from_millis(500),
        reconnect_backoff_min: Duration::from_millis(10),
        reconnect_backoff_max: Duration::from_millis(50),
        ..InterBrokerConfig::default()
    }
}

async fn listener() -> (TcpListener, BrokerEndpoint) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let endpoint = BrokerEndpoint {
        id: 7,
        host: "127.0.0.1".into(),
        port,
    };
    (listener, endpoint)
}

/// An ApiVersions v3 answer with `error_code` as its marker, for `correlation_id`.
fn answer(correlation_id: i32, error_code: i16) -> Bytes {
    let mut body = BytesMut::new();
    // ApiVersions answers always use response header v0.
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut body, 0)
        .expect("header");
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .encode(&mut body, VERSION)
        .expect("body");
    let mut frame = BytesMut::new();
    frame.put_i32(i32::try_from(body.len()).expect("size"));
    frame.put_slice(&body);
    frame.freeze()
}

/// Reads request frames and returns their correlation ids, `n` of them.
async fn read_requests(
    frames: &mut FramedRead<
        tokio::net::tcp::OwnedReadHalf,
        tokio_util::codec::LengthDelimitedCodec,
    >,
    n: usize,
) -> Vec<i32> {
    let mut ids = Vec::new();
    for _ in 0..n {
        let mut frame = frames.next().await.expect("frame").expect("read");
        // api key, api version, then the correlation id.
        frame.advance(4);
        ids.push(frame.get_i32());
    }
    ids
}

fn split(
    stream: TcpStream,
) -> (
    FramedRead<tokio::net::tcp::OwnedReadHalf, tokio_util::codec::LengthDelimitedCodec>,
    tokio::net::tcp::OwnedWriteHalf,
) {
    let (read, write) = stream.into_split();
    (
        FramedRead::new(read, logbook_protocol::frame_codec(1 << 20)),
        write,
    )
}

// Three requests sent at once are pipelined on one connection (all three arrive before any
// answer) and each caller gets its own answer back.
#[tokio::test]
async fn pipelined_requests_get_their_own_answers() {
    let (listener, endpoint) = listener().await;
    let peer = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accept");
        let (mut frames, mut write) = split(stream);
        let ids = read_requests(&mut frames, 3).await;
        for (i, id) in ids.iter().enumerate() {
            let code = i16::try_from(100 + i).expect("code");
            write.write_all(&answer(*id, code)).await.expect("write");
        }
        ids
    });
    let client = InterBrokerClient::new(config());
    let request = ApiVersionsRequest::default();
    let (a, b, c) = tokio::join!(
        client.send(&endpoint, VERSION, &request),
        client.send(&endpoint, VERSION, &request),
        client.send(&endpoint, VERSION, &request),
    );
    let mut codes = vec![
        a.expect("a").error_code,
        b.expect("b").error_code,
        c.expect("c").error_code,
    ];
    codes.sort_unstable();
    assert_eq!(codes, vec![100, 101, 102]);
    let ids = peer.await.expect("peer");
    assert_eq!(ids.len(), 3);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids {ids:?}");
}

// A peer that never answers: the request times out after `request_timeout`, the connection
// is dropped, and the next request opens a new one and is answered.
#[tokio::test]
async fn silent_peer_times_out_and_next_request_reconnects() {
    let (listener, endpoint) = listener().await;
    let peer = tokio::spawn(async move {
        let (silent, _) = listener.accept().await.expect("accept");
        let (mut frames, _write) = split(silent);
        read_requests(&mut frames, 1).await;
        let (stream, _) = listener.accept().await.expect("second accept");
        let (mut frames, mut write) = split(stream);
        let ids = read_requests(&mut frames, 1).await;
        write.write_all(&answer(ids[0], 5)).await.expect("write");
        // Keep the first connection open until the end: only the timeout may end it.
        tokio::time::sleep(Duration::from_millis(200)).await;
    });
    let client = InterBrokerClient::new(config());
    let request = ApiVersionsRequest::default();
    let started = tokio::time::Instant::now();
    let first = client.send(&endpoint, VERSION, &request).await;
    assert_eq!(
        first.err(),
        Some(InterBrokerError::Timeout { broker_id: 7 })
    );
    assert!(started.elapsed() >= Duration::from_millis(450));
    let second = client
        .send(&endpoint, VERSION, &request)
        .await
        .expect("answered on a new connection");
    assert_eq!(second.error_code, 5);
    peer.await.expect("peer");
}

// Nothing listening: Disconnected, promptly.
#[tokio::test]
async fn refused_connection_is_disconnected() {
    let (listener, endpoint) = listener().await;
    drop(listener);
    let client = InterBrokerClient::new(config());
    let result = client
        .send(&endpoint, VERSION, &ApiVersionsRequest::default())
        .await;
    assert!(
        matches!(
            result,
            Err(InterBrokerError::Disconnected { broker_id: 7, .. })
        ),
        "{result:?}"
    );
}

// An answer carrying another request's correlation id is a protocol error.
#[tokio::test]
async fn answer_out_of_order_is_a_protocol_error() {
    let (listener, endpoint) = listener().await;
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accept");
        let (mut frames, mut write) = split(stream);
        let ids = read_requests(&mut frames, 1).await;
        write
            .write_all(&answer(ids[0].wrapping_add(1), 0))
            .await
            .expect("write");
        tokio::time::sleep(Duration::from_millis(200)).await;
    });
    let client = InterBrokerClient::new(config());
    let result = client
        .send(&endpoint, VERSION, &ApiVersionsRequest::default())
        .await;
    assert!(
        matches!(result, Err(InterBrokerError::Protocol { broker_id: 7, .. })),
        "{result:?}"
    );
}

// Error codes are named as Kafka's `Errors` enum spells them; a code kafka-protocol does not
// know keeps its number (as does 0, which names no error).
#[test]
fn error_names_are_kafkas() {
    assert_eq!(error_name(0), "0");
    assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
    assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
    assert_eq!(error_name(9999), "9999");
}
