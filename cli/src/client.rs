//! `KafkaClient`: the admin tools' Kafka-protocol client, for any Kafka-compatible broker.
//!
//! Requests travel over `logbook-client`'s [`InterBrokerClient`] connections (the broker's
//! own framing, pipelining and timeouts). Each broker is asked ApiVersions once and every
//! request goes at the highest version both sides know, as Kafka's clients negotiate.
//! Requests that belong to one broker (a partition's leader, a group's coordinator) go
//! there, after Metadata or FindCoordinator says which it is.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiVersionsRequest, BrokerId, FindCoordinatorRequest, MetadataRequest, MetadataResponse,
    TopicName,
};
use kafka_protocol::protocol::{Message, Request, StrBytes};
use logbook_client::{BrokerEndpoint, InterBrokerClient, InterBrokerConfig, InterBrokerError};
use parking_lot::Mutex;

/// How a tool failed; decides its exit status.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// No broker could be reached, or one stopped answering (exit 3).
    #[error("{0}")]
    Unreachable(String),
    /// A broker refused the operation: a Kafka error code (exit 1).
    #[error("{message} ({name})")]
    Kafka {
        /// Kafka's error name.
        name: String,
        /// What was asked and why it failed.
        message: String,
    },
    /// Anything else that stops the tool (exit 1).
    #[error("{0}")]
    Failed(String),
}

impl CliError {
    /// The process exit status for this failure: 1 refused or failed, 3 unreachable (2 is
    /// clap's for bad usage).
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Unreachable(_) => 3,
            CliError::Kafka { .. } | CliError::Failed(_) => 1,
        }
    }

    /// The error for a non-zero Kafka `code`, naming `what` failed.
    #[must_use]
    pub fn kafka(code: i16, what: &str, message: Option<&str>) -> CliError {
        let name = error_name(code);
        let detail = match message {
            Some(m) if !m.is_empty() => format!("{what}: {m}"),
            _ => match description(code) {
                Some(text) => format!("{what}: {text}"),
                None => what.to_string(),
            },
        };
        CliError::Kafka {
            name,
            message: detail,
        }
    }
}

/// `Ok(())` for code 0, else the Kafka error.
///
/// # Errors
/// `code` is not NONE.
pub fn check(code: i16, what: &str, message: Option<&StrBytes>) -> Result<(), CliError> {
    if code == 0 {
        Ok(())
    } else {
        Err(CliError::kafka(code, what, message.map(|m| m.as_str())))
    }
}

/// Kafka's own words (`Errors.java`) for the codes the tools meet most.
fn description(code: i16) -> Option<&'static str> {
    Some(match code {
        3 => "This server does not host this topic-partition.",
        5 => "There is no leader for this topic-partition as we are in the middle of a leadership election.",
        6 => "For requests intended only for the leader, this error indicates that the broker is not the current leader.",
        14 => "The coordinator is loading and hence can't process requests.",
        15 => "The coordinator is not available.",
        16 => "This is not the correct coordinator.",
        25 => "The coordinator is not aware of this member.",
        36 => "Topic with this name already exists.",
        37 => "Number of partitions is below 1.",
        38 => "Replication factor is below 1 or larger than the number of available brokers.",
        40 => "Configuration is invalid.",
        68 => "The group is not empty.",
        69 => "The group id does not exist.",
        _ => return None,
    })
}

pub use logbook_client::error_name;

/// ListOffsets' special timestamps: the log start and the end (the high watermark).
pub const EARLIEST_TIMESTAMP: i64 = -2;
/// See [`EARLIEST_TIMESTAMP`].
pub const LATEST_TIMESTAMP: i64 = -1;

/// API key → the lowest and highest version a broker serves.
type ApiVersions = HashMap<i16, (i16, i16)>;

/// Which broker a request goes to.
#[derive(Clone, Copy, Debug)]
pub enum Node {
    /// Whichever answers first (bootstrap order).
    Any,
    /// This broker id, as Metadata named it.
    Id(i32),
}

/// A Kafka-protocol client for the tools.
pub struct KafkaClient {
    inner: Arc<InterBrokerClient>,
    bootstrap: Vec<BrokerEndpoint>,
    /// The bootstrap address that answered, used for `Node::Any`.
    any: Mutex<Option<BrokerEndpoint>>,
    brokers: Mutex<HashMap<i32, BrokerEndpoint>>,
    /// Per endpoint id: API key → highest version it serves.
    versions: Mutex<HashMap<i32, ApiVersions>>,
}

impl KafkaClient {
    /// A client for the comma-separated `bootstrap` list (`host:port,…`).
    ///
    /// # Errors
    /// An address is not `host:port`.
    pub fn new(
        bootstrap: &str,
        timeout: Duration,
        security: logbook_client::security::ConnectionSecurity,
    ) -> Result<KafkaClient, CliError> {
        let mut endpoints = Vec::new();
        for (i, address) in bootstrap
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .enumerate()
        {
            let (host, port) = address
                .rsplit_once(':')
                .and_then(|(h, p)| p.parse::<u16>().ok().map(|p| (h, p)))
                .ok_or_else(|| {
                    CliError::Failed(format!("bootstrap server '{address}' is not HOST:PORT"))
                })?;
            endpoints.push(BrokerEndpoint {
                // Bootstrap connections get ids no broker has.
                id: -1000 - i32::try_from(i).unwrap_or(0),
                host: host.trim_matches(['[', ']']).to_string(),
                port,
            });
        }
        if endpoints.is_empty() {
            return Err(CliError::Failed("no bootstrap server given".into()));
        }
        Ok(KafkaClient {
            inner: InterBrokerClient::new(InterBrokerConfig {
                client_id: "logbook-cli".to_string(),
                request_timeout: timeout,
                security,
                ..InterBrokerConfig::default()
            }),
            bootstrap: endpoints,
            any: Mutex::new(None),
            brokers: Mutex::new(HashMap::new()),
            versions: Mutex::new(HashMap::new()),
        })
    }

    /// Closes every connection.
    pub fn shutdown(&self) {
        self.inner.shutdown();
    }

    /// Sends `request` to `node` at the highest version both sides know.
    ///
    /// # Errors
    /// Unreachable broker, an API the broker does not serve, or a protocol error.
    pub async fn send<R: Request + Message>(
        &self,
        node: Node,
        request: &R,
    ) -> Result<R::Response, CliError> {
        let endpoint = self.endpoint(node).await?;
        let version = self.version_for::<R>(&endpoint).await?;
        self.inner
            .send(&endpoint, version, request)
            .await
            .map_err(|e| unreachable(&endpoint, &e))
    }

    /// Like [`KafkaClient::send`], building the request for the version chosen: for
    /// requests whose fields differ between versions (DeleteTopics names or ids,
    /// OffsetFetch's v8 groups).
    ///
    /// # Errors
    /// As [`KafkaClient::send`].
    pub async fn send_with<R: Request + Message>(
        &self,
        node: Node,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response, CliError> {
        self.send_capped(node, i16::MAX, build).await
    }

    /// Like [`KafkaClient::send_with`], at no version above `max`: for APIs whose newer
    /// versions name topics by id only (OffsetFetch and OffsetCommit v10), which a tool
    /// printing names would have to map back.
    ///
    /// # Errors
    /// As [`KafkaClient::send`].
    pub async fn send_capped<R: Request + Message>(
        &self,
        node: Node,
        max: i16,
        build: impl FnOnce(i16) -> R,
    ) -> Result<R::Response, CliError> {
        let endpoint = self.endpoint(node).await?;
        let version = self.version_for::<R>(&endpoint).await?.min(max);
        let request = build(version);
        self.inner
            .send(&endpoint, version, &request)
            .await
            .map_err(|e| unreachable(&endpoint, &e))
    }

    /// The version of `R` to use with `endpoint`: the highest both serve.
    async fn version_for<R: Request + Message>(
        &self,
        endpoint: &BrokerEndpoint,
    ) -> Result<i16, CliError> {
        let known = self.versions.lock().get(&endpoint.id).cloned();
        let versions = match known {
            Some(v) => v,
            None => self.api_versions(endpoint).await?,
        };
        let Some(&(min, max)) = versions.get(&R::KEY) else {
            return Err(CliError::Failed(format!(
                "the broker at {}:{} does not serve API key {}",
                endpoint.host,
                endpoint.port,
                R::KEY
            )));
        };
        let ours = R::VERSIONS;
        let version = max.min(ours.max);
        if version < min.max(ours.min) {
            return Err(CliError::Failed(format!(
                "no version of API key {} in common with {}:{}",
                R::KEY,
                endpoint.host,
                endpoint.port
            )));
        }
        Ok(version)
    }

    async fn api_versions(
        &self,
        endpoint: &BrokerEndpoint,
    ) -> Result<HashMap<i16, (i16, i16)>, CliError> {
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("logbook-cli"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let response = self
            .inner
            .send(endpoint, 3, &request)
            .await
            .map_err(|e| unreachable(endpoint, &e))?;
        check(response.error_code, "ApiVersions", None)?;
        let versions: HashMap<i16, (i16, i16)> = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        self.versions.lock().insert(endpoint.id, versions.clone());
        Ok(versions)
    }

    async fn endpoint(&self, node: Node) -> Result<BrokerEndpoint, CliError> {
        match node {
            Node::Id(id) => {
                if let Some(endpoint) = self.brokers.lock().get(&id).cloned() {
                    return Ok(endpoint);
                }
                // Boxed: `metadata` sends through `endpoint` (to `Node::Any`).
                Box::pin(self.metadata(Some(&[]))).await?;
                self.brokers.lock().get(&id).cloned().ok_or_else(|| {
                    CliError::Failed(format!("broker {id} is not in the cluster's metadata"))
                })
            }
            Node::Any => {
                if let Some(endpoint) = self.any.lock().clone() {
                    return Ok(endpoint);
                }
                let mut last = String::new();
                for endpoint in &self.bootstrap {
                    match self.api_versions(endpoint).await {
                        Ok(_) => {
                            *self.any.lock() = Some(endpoint.clone());
                            return Ok(endpoint.clone());
                        }
                        Err(e) => last = e.to_string(),
                    }
                }
                Err(CliError::Unreachable(format!(
                    "no bootstrap server answered ({last})"
                )))
            }
        }
    }

    /// Metadata for `topics` (`None`: every topic; `Some(&[])`: brokers only); remembers
    /// the brokers it names.
    ///
    /// # Errors
    /// As [`KafkaClient::send`].
    pub async fn metadata(&self, topics: Option<&[String]>) -> Result<MetadataResponse, CliError> {
        self.metadata_with(topics, false).await
    }

    /// [`KafkaClient::metadata`], asking the broker to create missing topics when
    /// `allow_auto_topic_creation` (it does if its `auto.create.topics.enable` is on).
    ///
    /// # Errors
    /// As [`KafkaClient::send`].
    pub async fn metadata_with(
        &self,
        topics: Option<&[String]>,
        allow_auto_topic_creation: bool,
    ) -> Result<MetadataResponse, CliError> {
        let request = MetadataRequest::default()
            .with_topics(topics.map(|names| {
                names
                    .iter()
                    .map(|n| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string(n.clone()))))
                    })
                    .collect()
            }))
            .with_allow_auto_topic_creation(allow_auto_topic_creation);
        let response = self.send(Node::Any, &request).await?;
        let mut brokers = self.brokers.lock();
        for broker in &response.brokers {
            brokers.insert(
                broker.node_id.0,
                BrokerEndpoint {
                    id: broker.node_id.0,
                    host: broker.host.to_string(),
                    port: u16::try_from(broker.port).unwrap_or(0),
                },
            );
        }
        Ok(response)
    }

    /// The offset of each `(topic, partition)` for `timestamp` (a time in milliseconds: the
    /// first offset whose record is at least that recent, or the end when none is; or
    /// [`EARLIEST_TIMESTAMP`] / [`LATEST_TIMESTAMP`]), asked of each partition's leader.
    ///
    /// # Errors
    /// A partition's error code, an unknown topic, or as [`KafkaClient::send`].
    pub async fn list_offsets(
        &self,
        partitions: &[(String, i32)],
        timestamp: i64,
    ) -> Result<HashMap<(String, i32), i64>, CliError> {
        use kafka_protocol::messages::list_offsets_request::{
            ListOffsetsPartition, ListOffsetsTopic,
        };
        use kafka_protocol::messages::ListOffsetsRequest;
        let mut topics: Vec<String> = partitions.iter().map(|(t, _)| t.clone()).collect();
        topics.sort();
        topics.dedup();
        let metadata = self.metadata(Some(&topics)).await?;
        let mut by_leader: HashMap<i32, Vec<(String, i32)>> = HashMap::new();
        for (topic, partition) in partitions {
            let leader = metadata
                .topics
                .iter()
                .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == topic))
                .ok_or_else(|| CliError::Failed(format!("no metadata for topic {topic}")))
                .and_then(|t| {
                    check(t.error_code, &format!("topic {topic}"), None)?;
                    t.partitions
                        .iter()
                        .find(|p| p.partition_index == *partition)
                        .map(|p| p.leader_id.0)
                        .ok_or_else(|| {
                            CliError::Failed(format!("topic {topic} has no partition {partition}"))
                        })
                })?;
            by_leader
                .entry(leader)
                .or_default()
                .push((topic.clone(), *partition));
        }
        let mut offsets = HashMap::new();
        for (leader, wanted) in by_leader {
            let mut request_topics: Vec<ListOffsetsTopic> = Vec::new();
            for (topic, partition) in &wanted {
                let entry = ListOffsetsPartition::default()
                    .with_partition_index(*partition)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(timestamp);
                match request_topics.iter_mut().find(|t| t.name.as_str() == topic) {
                    Some(t) => t.partitions.push(entry),
                    None => request_topics.push(
                        ListOffsetsTopic::default()
                            .with_name(TopicName(StrBytes::from_string(topic.clone())))
                            .with_partitions(vec![entry]),
                    ),
                }
            }
            let request = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(request_topics);
            let response = self.send(Node::Id(leader), &request).await?;
            for topic in &response.topics {
                for p in &topic.partitions {
                    check(
                        p.error_code,
                        &format!("offsets of {}-{}", topic.name.as_str(), p.partition_index),
                        None,
                    )?;
                    offsets.insert((topic.name.to_string(), p.partition_index), p.offset);
                }
            }
        }
        Ok(offsets)
    }

    /// The broker coordinating `group`.
    ///
    /// # Errors
    /// The coordinator is not available, or as [`KafkaClient::send`].
    pub async fn group_coordinator(&self, group: &str) -> Result<i32, CliError> {
        let key = StrBytes::from_string(group.to_string());
        let response = self
            .send_with(Node::Any, |version| {
                let request = FindCoordinatorRequest::default().with_key_type(0);
                if version >= 4 {
                    request.with_coordinator_keys(vec![key])
                } else {
                    request.with_key(key)
                }
            })
            .await?;
        // v4+ answers per key; older versions at the top level.
        let (code, message, node, host, port) = match response.coordinators.first() {
            Some(c) => (
                c.error_code,
                c.error_message.clone(),
                c.node_id,
                c.host.clone(),
                c.port,
            ),
            None => (
                response.error_code,
                response.error_message.clone(),
                response.node_id,
                response.host.clone(),
                response.port,
            ),
        };
        check(
            code,
            &format!("finding the coordinator of group {group}"),
            message.as_ref(),
        )?;
        let BrokerId(id) = node;
        self.brokers.lock().insert(
            id,
            BrokerEndpoint {
                id,
                host: host.to_string(),
                port: u16::try_from(port).unwrap_or(0),
            },
        );
        Ok(id)
    }
}

fn unreachable(endpoint: &BrokerEndpoint, error: &InterBrokerError) -> CliError {
    if let InterBrokerError::Protocol { reason, .. } = error {
        return CliError::Failed(format!(
            "protocol error with {}:{}: {reason}",
            endpoint.host, endpoint.port
        ));
    }
    let reason = match error {
        InterBrokerError::Disconnected { reason, .. } => reason.clone(),
        InterBrokerError::Timeout { .. } => "no answer in time".to_string(),
        other => other.to_string(),
    };
    CliError::Unreachable(format!(
        "cannot reach {}:{}: {reason}",
        endpoint.host, endpoint.port
    ))
}
