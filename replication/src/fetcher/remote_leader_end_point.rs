//! `RemoteLeaderEndPoint`: the leader over TCP, as Kafka's class of the same name. One
//! connection per fetcher, one request in flight, every read and write under the request
//! timeout; any failure drops the connection and the next request reconnects.
//!
//! The connection is secured as the inter-broker listener is (`security`: TLS, then a SASL
//! login, through logbook-client's `ConnectionSecurity`).
//!
//! Wire: Fetch v17 (`replica_state { replica_id, replica_epoch }`, topics by id,
//! `current_leader_epoch`, `last_fetched_epoch`, READ_UNCOMMITTED), OffsetsForLeaderEpoch
//! v4 (`replica_id` set) and ListOffsets v7 (`replica_id` set, EARLIEST / LATEST), framed
//! and encoded with kafka-protocol through `logbook_protocol`. Response frames larger
//! than `frame_bytes_max` close the connection before anything is allocated.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use logbook_client::security::{ConnectionSecurity, SecuredStream};
use logbook_protocol::kafka_protocol::messages::fetch_request::{
    FetchPartition as WireFetchPartition, FetchTopic, ReplicaState,
};
use logbook_protocol::kafka_protocol::messages::fetch_response::FetchableTopicResponse;
use logbook_protocol::kafka_protocol::messages::list_offsets_request::{
    ListOffsetsPartition, ListOffsetsTopic,
};
use logbook_protocol::kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use logbook_protocol::kafka_protocol::messages::{
    BrokerId, FetchRequest as WireFetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest,
    RequestHeader, ResponseHeader, TopicName,
};
use logbook_protocol::kafka_protocol::protocol::{
    Decodable, Encodable, HeaderVersion, Request, StrBytes,
};
use logbook_protocol::kafka_protocol::ResponseError;
use logbook_storage::{LeaderEpoch, Offset};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::leader_end_point::{
    EndPointError, EpochEndOffset, EpochRequest, EpochResult, FetchPartition, FetchRequest,
    FetchedPartition, LeaderEndPoint, LeaderError,
};
use crate::TopicPartition;

/// Fetch version sent: the first with `replica_state` and without the v18 fields.
pub const FETCH_VERSION: i16 = 17;
/// OffsetsForLeaderEpoch version sent.
pub const OFFSET_FOR_LEADER_EPOCH_VERSION: i16 = 4;
/// ListOffsets version sent.
pub const LIST_OFFSETS_VERSION: i16 = 7;

/// Kafka's ListOffsets timestamps.
const EARLIEST_TIMESTAMP: i64 = -2;
const LATEST_TIMESTAMP: i64 = -1;

/// Where the leader is and who we are.
#[derive(Clone, Debug)]
pub struct RemoteLeaderEndPointConfig {
    /// The leader broker's id.
    pub leader_id: i32,
    /// The leader's advertised `host:port`.
    pub address: String,
    /// This broker's id, sent as the replica id.
    pub replica_id: i32,
    /// This broker's epoch (its registration), sent as `replica_epoch` (KIP-903).
    pub replica_epoch: i64,
    /// Client id in request headers.
    pub client_id: String,
    /// `replica.socket.timeout.ms` on top of the fetch's own wait: longest a request may
    /// take from send to answer. Default 30 s.
    pub request_timeout: Duration,
    /// Largest response frame accepted (bytes after the size prefix).
    pub frame_bytes_max: usize,
    /// TLS and SASL of the inter-broker listener; PLAINTEXT by default.
    pub security: ConnectionSecurity,
}

/// The leader over one TCP connection. See the module docs.
pub struct RemoteLeaderEndPoint {
    config: RemoteLeaderEndPointConfig,
    /// This broker's epoch as it is now (it changes when the broker registers again);
    /// `config.replica_epoch` without it.
    broker_epoch: Option<Arc<AtomicI64>>,
    connection: Option<SecuredStream>,
    correlation_id: i32,
}

impl RemoteLeaderEndPoint {
    /// An end point that connects on first use.
    #[must_use]
    pub fn new(config: RemoteLeaderEndPointConfig) -> Self {
        Self {
            config,
            broker_epoch: None,
            connection: None,
            correlation_id: 0,
        }
    }

    /// Sends the broker epoch held in `epoch` at each fetch instead of the configured one,
    /// so a registration after the fetcher started is seen (KIP-903).
    #[must_use]
    pub fn with_broker_epoch(mut self, epoch: Arc<AtomicI64>) -> Self {
        self.broker_epoch = Some(epoch);
        self
    }

    /// Sends `request` at `version` and decodes its answer; drops the connection on any
    /// failure.
    async fn send<R: Request>(
        &mut self,
        version: i16,
        request: &R,
        wait: Duration,
    ) -> Result<R::Response, EndPointError> {
        let timeout = self.config.request_timeout + wait;
        match tokio::time::timeout(timeout, self.round_trip(version, request)).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => {
                self.connection = None;
                Err(e)
            }
            Err(_) => {
                self.connection = None;
                Err(EndPointError::Timeout(timeout))
            }
        }
    }

    async fn round_trip<R: Request>(
        &mut self,
        version: i16,
        request: &R,
    ) -> Result<R::Response, EndPointError> {
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let correlation_id = self.correlation_id;
        let frame = encode_request(version, correlation_id, &self.config.client_id, request)?;
        if self.connection.is_none() {
            let stream = TcpStream::connect(&self.config.address).await?;
            stream.set_nodelay(true)?;
            let host = self
                .config
                .address
                .rsplit_once(':')
                .map_or(self.config.address.as_str(), |(host, _)| host)
                .trim_matches(['[', ']']);
            let stream = self
                .config
                .security
                .secure(stream, host, &self.config.client_id)
                .await
                .map_err(|e| EndPointError::Io(std::io::Error::other(e)))?;
            self.connection = Some(stream);
        }
        let stream = self
            .connection
            .as_mut()
            .ok_or_else(|| EndPointError::Protocol("no connection".to_string()))?;
        stream.write_all(&frame).await?;
        let size = stream.read_i32().await?;
        let size = usize::try_from(size)
            .ok()
            .filter(|&s| s <= self.config.frame_bytes_max)
            .ok_or_else(|| EndPointError::Protocol(format!("response frame of {size} bytes")))?;
        let mut body = vec![0u8; size];
        stream.read_exact(&mut body).await?;
        let mut body = Bytes::from(body);
        let header_version = <R::Response as HeaderVersion>::header_version(version);
        let header = ResponseHeader::decode(&mut body, header_version)
            .map_err(|e| EndPointError::Protocol(format!("response header: {e}")))?;
        if header.correlation_id != correlation_id {
            return Err(EndPointError::Protocol(format!(
                "correlation id {} for request {correlation_id}",
                header.correlation_id
            )));
        }
        let response = R::Response::decode(&mut body, version)
            .map_err(|e| EndPointError::Protocol(format!("response body: {e}")))?;
        Ok(response)
    }

    async fn list_offset(
        &mut self,
        tp: &TopicPartition,
        current_leader_epoch: LeaderEpoch,
        timestamp: i64,
    ) -> Result<Offset, EndPointError> {
        let mut partition = ListOffsetsPartition::default();
        partition.partition_index = tp.partition;
        partition.current_leader_epoch = current_leader_epoch.0;
        partition.timestamp = timestamp;
        let mut topic = ListOffsetsTopic::default();
        topic.name = TopicName(StrBytes::from_string(tp.topic.clone()));
        topic.partitions = vec![partition];
        let mut request = ListOffsetsRequest::default();
        request.replica_id = BrokerId(self.config.replica_id);
        request.isolation_level = 0;
        request.topics = vec![topic];
        let response = self
            .send(LIST_OFFSETS_VERSION, &request, Duration::ZERO)
            .await?;
        let answer = response
            .topics
            .iter()
            .filter(|t| t.name.0.as_str() == tp.topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == tp.partition)
            .ok_or_else(|| EndPointError::Protocol(format!("no ListOffsets answer for {tp}")))?;
        match leader_error(answer.error_code) {
            None => Ok(Offset(answer.offset)),
            Some(error) => Err(EndPointError::Refused(error)),
        }
    }
}

/// One size-prefixed request frame: header at the version's header version, then body.
fn encode_request<R: Request>(
    version: i16,
    correlation_id: i32,
    client_id: &str,
    request: &R,
) -> Result<Bytes, EndPointError> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_string(client_id.to_string())));
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    header
        .encode(&mut frame, R::header_version(version))
        .map_err(|e| EndPointError::Protocol(format!("encode header: {e}")))?;
    request
        .encode(&mut frame, version)
        .map_err(|e| EndPointError::Protocol(format!("encode request: {e}")))?;
    let size = i32::try_from(frame.len() - 4)
        .map_err(|_| EndPointError::Protocol("request too large".to_string()))?;
    frame
        .get_mut(0..4)
        .ok_or_else(|| EndPointError::Protocol("frame shorter than its prefix".to_string()))?
        .copy_from_slice(&size.to_be_bytes());
    Ok(frame.freeze())
}

/// Reads an error code the leader sent (0: none).
fn leader_error(code: i16) -> Option<LeaderError> {
    if code == 0 {
        return None;
    }
    Some(match ResponseError::try_from_code(code) {
        Some(ResponseError::OffsetOutOfRange) => LeaderError::OffsetOutOfRange,
        Some(ResponseError::FencedLeaderEpoch) => LeaderError::FencedLeaderEpoch,
        Some(ResponseError::UnknownLeaderEpoch) => LeaderError::UnknownLeaderEpoch,
        Some(ResponseError::NotLeaderOrFollower) => LeaderError::NotLeaderOrFollower,
        Some(ResponseError::UnknownTopicOrPartition) => LeaderError::UnknownTopicOrPartition,
        Some(ResponseError::UnknownTopicId) => LeaderError::UnknownTopicId,
        _ => LeaderError::Other(code),
    })
}

/// The wire Fetch request's topics: the partitions grouped by topic id, in the order
/// each topic first appears, with the name of each id (answers come back by id and are
/// handed on by name).
fn fetch_topics(partitions: &[FetchPartition]) -> (BTreeMap<uuid::Uuid, String>, Vec<FetchTopic>) {
    let mut names: BTreeMap<uuid::Uuid, String> = BTreeMap::new();
    let mut topics: Vec<FetchTopic> = Vec::new();
    for p in partitions {
        names.insert(p.topic_id, p.topic_partition.topic.clone());
        let mut partition = WireFetchPartition::default();
        partition.partition = p.topic_partition.partition;
        partition.current_leader_epoch = p.current_leader_epoch.0;
        partition.fetch_offset = p.fetch_offset.get();
        partition.last_fetched_epoch = p.last_fetched_epoch.map_or(-1, |e| e.0);
        partition.log_start_offset = p.log_start_offset.get();
        partition.partition_max_bytes = p.partition_max_bytes;
        match topics.iter_mut().find(|t| t.topic_id == p.topic_id) {
            Some(topic) => topic.partitions.push(partition),
            None => {
                let mut topic = FetchTopic::default();
                topic.topic_id = p.topic_id;
                topic.partitions = vec![partition];
                topics.push(topic);
            }
        }
    }
    (names, topics)
}

/// The leader's Fetch answer, per partition and by topic name; an answer for a topic id
/// the request did not name is a protocol error.
fn fetched_partitions(
    names: &BTreeMap<uuid::Uuid, String>,
    responses: Vec<FetchableTopicResponse>,
) -> Result<Vec<FetchedPartition>, EndPointError> {
    let mut out = Vec::new();
    for topic in responses {
        let Some(name) = names.get(&topic.topic_id) else {
            return Err(EndPointError::Protocol(format!(
                "fetch answer for topic id {} not asked",
                topic.topic_id
            )));
        };
        for p in topic.partitions {
            let diverging = (p.diverging_epoch.epoch >= 0 || p.diverging_epoch.end_offset >= 0)
                .then_some(EpochEndOffset {
                    leader_epoch: p.diverging_epoch.epoch,
                    end_offset: p.diverging_epoch.end_offset,
                });
            out.push(FetchedPartition {
                topic_partition: TopicPartition {
                    topic: name.clone(),
                    partition: p.partition_index,
                },
                error: leader_error(p.error_code),
                high_watermark: Offset(p.high_watermark),
                log_start_offset: Offset(p.log_start_offset),
                diverging_epoch: diverging,
                records: p.records.unwrap_or_default(),
            });
        }
    }
    Ok(out)
}

impl LeaderEndPoint for RemoteLeaderEndPoint {
    fn broker_id(&self) -> i32 {
        self.config.leader_id
    }

    async fn fetch(
        &mut self,
        request: FetchRequest,
    ) -> Result<Vec<FetchedPartition>, EndPointError> {
        // Topic ids on the wire, names in answers: remember which is which.
        let (names, topics) = fetch_topics(&request.partitions);
        let mut replica_state = ReplicaState::default();
        replica_state.replica_id = BrokerId(self.config.replica_id);
        replica_state.replica_epoch = self
            .broker_epoch
            .as_ref()
            .map_or(self.config.replica_epoch, |e| e.load(Ordering::Acquire));
        let mut wire = WireFetchRequest::default();
        wire.replica_state = replica_state;
        wire.replica_id = BrokerId(-1);
        wire.max_wait_ms = request.max_wait_ms;
        wire.min_bytes = request.min_bytes;
        wire.max_bytes = request.max_bytes;
        wire.isolation_level = 0;
        wire.session_id = 0;
        wire.session_epoch = -1;
        wire.topics = topics;
        let wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
        let response = self.send(FETCH_VERSION, &wire, wait).await?;
        if let Some(error) = leader_error(response.error_code) {
            return Err(EndPointError::Refused(error));
        }
        fetched_partitions(&names, response.responses)
    }

    async fn fetch_epoch_end_offsets(
        &mut self,
        partitions: Vec<EpochRequest>,
    ) -> Result<Vec<EpochResult>, EndPointError> {
        let mut topics: Vec<OffsetForLeaderTopic> = Vec::new();
        for p in &partitions {
            let mut partition = OffsetForLeaderPartition::default();
            partition.partition = p.topic_partition.partition;
            partition.current_leader_epoch = p.current_leader_epoch.0;
            partition.leader_epoch = p.leader_epoch.0;
            let name = p.topic_partition.topic.as_str();
            match topics.iter_mut().find(|t| t.topic.0.as_str() == name) {
                Some(topic) => topic.partitions.push(partition),
                None => {
                    let mut topic = OffsetForLeaderTopic::default();
                    topic.topic = TopicName(StrBytes::from_string(name.to_string()));
                    topic.partitions = vec![partition];
                    topics.push(topic);
                }
            }
        }
        let mut request = OffsetForLeaderEpochRequest::default();
        request.replica_id = BrokerId(self.config.replica_id);
        request.topics = topics;
        let response = self
            .send(OFFSET_FOR_LEADER_EPOCH_VERSION, &request, Duration::ZERO)
            .await?;
        let mut out = Vec::new();
        for topic in response.topics {
            for p in topic.partitions {
                out.push(EpochResult {
                    topic_partition: TopicPartition {
                        topic: topic.topic.0.to_string(),
                        partition: p.partition,
                    },
                    error: leader_error(p.error_code),
                    end: EpochEndOffset {
                        leader_epoch: p.leader_epoch,
                        end_offset: p.end_offset,
                    },
                });
            }
        }
        Ok(out)
    }

    async fn fetch_earliest_offset(
        &mut self,
        topic_partition: &TopicPartition,
        current_leader_epoch: LeaderEpoch,
    ) -> Result<Offset, EndPointError> {
        self.list_offset(topic_partition, current_leader_epoch, EARLIEST_TIMESTAMP)
            .await
    }

    async fn fetch_latest_offset(
        &mut self,
        topic_partition: &TopicPartition,
        current_leader_epoch: LeaderEpoch,
    ) -> Result<Offset, EndPointError> {
        self.list_offset(topic_partition, current_leader_epoch, LATEST_TIMESTAMP)
            .await
    }
}

#[cfg(test)]
mod tests;
