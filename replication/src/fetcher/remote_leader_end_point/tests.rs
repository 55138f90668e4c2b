//! `RemoteLeaderEndPoint` against a tiny fake leader on a real socket: the requests carry
//! exactly the fields a Kafka leader reads (replica state, epochs, topic ids), and the
//! answers come back as the fetcher's types; a wrong correlation id or an oversized frame
//! drops the connection and the next request reconnects.

use bytes::{Bytes, BytesMut};
use logbook_protocol::kafka_protocol::messages::fetch_response::{
    EpochEndOffset as WireEpochEndOffset, FetchableTopicResponse, PartitionData,
};
use logbook_protocol::kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use logbook_protocol::kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset as WireEpochEnd, OffsetForLeaderTopicResult,
};
use logbook_protocol::kafka_protocol::messages::{
    ApiKey, FetchResponse, ListOffsetsResponse, OffsetForLeaderEpochResponse, RequestKind,
    ResponseKind,
};
use logbook_protocol::kafka_protocol::protocol::VersionRange;
use logbook_protocol::{decode_request, encode_response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::fetcher::leader_end_point::FetchPartition;

const TOPIC_ID: uuid::Uuid = uuid::Uuid::from_u128(0x1234);

fn config(address: String) -> RemoteLeaderEndPointConfig {
    RemoteLeaderEndPointConfig {
        leader_id: 7,
        address,
        replica_id: 3,
        replica_epoch: 42,
        client_id: "logbook-replica-fetcher-3".to_string(),
        request_timeout: Duration::from_secs(5),
        frame_bytes_max: 1 << 20,
        security: Default::default(),
    }
}

fn tp(partition: i32) -> TopicPartition {
    TopicPartition {
        topic: "orders".to_string(),
        partition,
    }
}

async fn read_request(stream: &mut TcpStream) -> Option<(i16, i32, RequestKind)> {
    let size = stream.read_i32().await.ok()?;
    let mut body = vec![0u8; usize::try_from(size).ok()?];
    stream.read_exact(&mut body).await.ok()?;
    let table = |_: ApiKey| Some(VersionRange { min: 0, max: 18 });
    let decoded = decode_request(Bytes::from(body), &table).expect("decodable request");
    Some((
        decoded.header.request_api_version,
        decoded.header.correlation_id,
        decoded.body,
    ))
}

async fn answer(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: ResponseKind,
) {
    let mut out = BytesMut::new();
    encode_response(&mut out, key, version, correlation_id, &body).expect("encode");
    stream.write_all(&out).await.expect("write");
}

// One of each request: the fake leader checks the fields Kafka's leader reads and
// answers; the end point turns the answers into the fetcher's types.
#[tokio::test]
async fn speaks_fetch_v17_offsets_for_leader_epoch_v4_and_list_offsets() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("addr").to_string();
    let leader = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.expect("accept");
        let (version, correlation_id, body) = read_request(&mut stream).await.expect("fetch");
        let RequestKind::Fetch(fetch) = body else {
            panic!("expected Fetch, got {body:?}");
        };
        assert_eq!(version, 17);
        assert_eq!(fetch.replica_state.replica_id.0, 3);
        assert_eq!(fetch.replica_state.replica_epoch, 42);
        assert_eq!(
            (fetch.max_wait_ms, fetch.min_bytes, fetch.isolation_level),
            (500, 1, 0)
        );
        assert_eq!(fetch.topics.len(), 1);
        assert_eq!(fetch.topics[0].topic_id, TOPIC_ID);
        let p = &fetch.topics[0].partitions;
        assert_eq!(
            p.iter()
                .map(|p| (
                    p.partition,
                    p.fetch_offset,
                    p.current_leader_epoch,
                    p.last_fetched_epoch,
                    p.log_start_offset
                ))
                .collect::<Vec<_>>(),
            vec![(0, 10, 5, 4, 2), (1, 0, 5, -1, 0)]
        );
        let mut diverged = PartitionData::default();
        diverged.partition_index = 0;
        diverged.high_watermark = 8;
        diverged.log_start_offset = 2;
        let mut epoch = WireEpochEndOffset::default();
        epoch.epoch = 3;
        epoch.end_offset = 7;
        diverged.diverging_epoch = epoch;
        let mut data = PartitionData::default();
        data.partition_index = 1;
        data.high_watermark = 3;
        data.log_start_offset = 0;
        data.records = Some(Bytes::from_static(b"batches"));
        let mut topic = FetchableTopicResponse::default();
        topic.topic_id = TOPIC_ID;
        topic.partitions = vec![diverged, data];
        let mut response = FetchResponse::default();
        response.responses = vec![topic];
        answer(
            &mut stream,
            ApiKey::Fetch,
            version,
            correlation_id,
            ResponseKind::Fetch(response),
        )
        .await;

        let (version, correlation_id, body) = read_request(&mut stream).await.expect("epochs");
        let RequestKind::OffsetForLeaderEpoch(request) = body else {
            panic!("expected OffsetForLeaderEpoch, got {body:?}");
        };
        assert_eq!((version, request.replica_id.0), (4, 3));
        let asked = &request.topics[0];
        assert_eq!(asked.topic.0.as_str(), "orders");
        assert_eq!(
            (
                asked.partitions[0].current_leader_epoch,
                asked.partitions[0].leader_epoch
            ),
            (5, 4)
        );
        let mut end = WireEpochEnd::default();
        end.partition = 0;
        end.leader_epoch = 3;
        end.end_offset = 7;
        let mut fenced = WireEpochEnd::default();
        fenced.partition = 1;
        fenced.error_code = ResponseError::FencedLeaderEpoch.code();
        let mut topic = OffsetForLeaderTopicResult::default();
        topic.topic = asked.topic.clone();
        topic.partitions = vec![end, fenced];
        let mut response = OffsetForLeaderEpochResponse::default();
        response.topics = vec![topic];
        answer(
            &mut stream,
            ApiKey::OffsetForLeaderEpoch,
            version,
            correlation_id,
            ResponseKind::OffsetForLeaderEpoch(response),
        )
        .await;

        for expected_timestamp in [-1i64, -2] {
            let (version, correlation_id, body) =
                read_request(&mut stream).await.expect("list offsets");
            let RequestKind::ListOffsets(request) = body else {
                panic!("expected ListOffsets, got {body:?}");
            };
            assert_eq!((version, request.replica_id.0), (7, 3));
            assert_eq!(
                request.topics[0].partitions[0].timestamp,
                expected_timestamp
            );
            let mut partition = ListOffsetsPartitionResponse::default();
            partition.partition_index = 0;
            partition.offset = if expected_timestamp == -1 { 9 } else { 2 };
            let mut topic = ListOffsetsTopicResponse::default();
            topic.name = request.topics[0].name.clone();
            topic.partitions = vec![partition];
            let mut response = ListOffsetsResponse::default();
            response.topics = vec![topic];
            answer(
                &mut stream,
                ApiKey::ListOffsets,
                version,
                correlation_id,
                ResponseKind::ListOffsets(response),
            )
            .await;
        }
    });

    let mut endpoint = RemoteLeaderEndPoint::new(config(address));
    let fetched = endpoint
        .fetch(FetchRequest {
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 1 << 20,
            partitions: vec![
                FetchPartition {
                    topic_partition: tp(0),
                    topic_id: TOPIC_ID,
                    fetch_offset: Offset(10),
                    current_leader_epoch: LeaderEpoch(5),
                    last_fetched_epoch: Some(LeaderEpoch(4)),
                    log_start_offset: Offset(2),
                    partition_max_bytes: 1024,
                },
                FetchPartition {
                    topic_partition: tp(1),
                    topic_id: TOPIC_ID,
                    fetch_offset: Offset(0),
                    current_leader_epoch: LeaderEpoch(5),
                    last_fetched_epoch: None,
                    log_start_offset: Offset(0),
                    partition_max_bytes: 1024,
                },
            ],
        })
        .await
        .expect("fetch");
    assert_eq!(
        fetched,
        vec![
            FetchedPartition {
                topic_partition: tp(0),
                error: None,
                high_watermark: Offset(8),
                log_start_offset: Offset(2),
                diverging_epoch: Some(EpochEndOffset {
                    leader_epoch: 3,
                    end_offset: 7
                }),
                records: Bytes::new(),
            },
            FetchedPartition {
                topic_partition: tp(1),
                error: None,
                high_watermark: Offset(3),
                log_start_offset: Offset(0),
                diverging_epoch: None,
                records: Bytes::from_static(b"batches"),
            },
        ]
    );
    let epochs = endpoint
        .fetch_epoch_end_offsets(vec![
            EpochRequest {
                topic_partition: tp(0),
                current_leader_epoch: LeaderEpoch(5),
                leader_epoch: LeaderEpoch(4),
            },
            EpochRequest {
                topic_partition: tp(1),
                current_leader_epoch: LeaderEpoch(5),
                leader_epoch: LeaderEpoch(4),
            },
        ])
        .await
        .expect("epochs");
    assert_eq!(
        epochs[0].end,
        EpochEndOffset {
            leader_epoch: 3,
            end_offset: 7
        }
    );
    assert_eq!(epochs[0].error, None);
    assert_eq!(epochs[1].error, Some(LeaderError::FencedLeaderEpoch));
    assert_eq!(
        endpoint
            .fetch_latest_offset(&tp(0), LeaderEpoch(5))
            .await
            .expect("latest"),
        Offset(9)
    );
    assert_eq!(
        endpoint
            .fetch_earliest_offset(&tp(0), LeaderEpoch(5))
            .await
            .expect("earliest"),
        Offset(2)
    );
    leader.await.expect("fake leader");
}

// An answer with another correlation id is a protocol error that drops the connection;
// a response frame above `frame_bytes_max` too; the next request reconnects.
#[tokio::test]
async fn bad_answers_drop_the_connection_and_the_next_request_reconnects() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("addr").to_string();
    let leader = tokio::spawn(async move {
        let mut accepted = 0;
        for reply in ["wrong correlation", "oversized", "good"] {
            let (mut stream, _) = listener.accept().await.expect("accept");
            accepted += 1;
            let (version, correlation_id, _) = read_request(&mut stream).await.expect("request");
            match reply {
                "wrong correlation" => {
                    let body = ResponseKind::ListOffsets(ListOffsetsResponse::default());
                    answer(
                        &mut stream,
                        ApiKey::ListOffsets,
                        version,
                        correlation_id + 1,
                        body,
                    )
                    .await;
                }
                "oversized" => {
                    stream
                        .write_all(&(2i32 << 20).to_be_bytes())
                        .await
                        .expect("write");
                }
                _ => {
                    let mut partition = ListOffsetsPartitionResponse::default();
                    partition.offset = 4;
                    let mut topic = ListOffsetsTopicResponse::default();
                    topic.name = TopicName(StrBytes::from_static_str("orders"));
                    topic.partitions = vec![partition];
                    let mut response = ListOffsetsResponse::default();
                    response.topics = vec![topic];
                    answer(
                        &mut stream,
                        ApiKey::ListOffsets,
                        version,
                        correlation_id,
                        ResponseKind::ListOffsets(response),
                    )
                    .await;
                }
            }
            // Wait for the client to hang up before taking the next connection.
            let mut rest = Vec::new();
            let _ = stream.read_to_end(&mut rest).await;
            if reply == "good" {
                break;
            }
        }
        accepted
    });
    let mut endpoint = RemoteLeaderEndPoint::new(config(address));
    let err = endpoint
        .fetch_latest_offset(&tp(0), LeaderEpoch(1))
        .await
        .expect_err("correlation");
    assert!(matches!(err, EndPointError::Protocol(_)), "{err:?}");
    let err = endpoint
        .fetch_latest_offset(&tp(0), LeaderEpoch(1))
        .await
        .expect_err("oversized");
    assert!(matches!(err, EndPointError::Protocol(_)), "{err:?}");
    let offset = endpoint
        .fetch_latest_offset(&tp(0), LeaderEpoch(1))
        .await
        .expect("reconnected");
    assert_eq!(offset, Offset(4));
    drop(endpoint);
    assert_eq!(leader.await.expect("fake leader"), 3);
}
