//! Fetch (API key 1): serve whole record batches by offset from each partition, up to the
//! request's byte limits, long-polling for `min_bytes` up to `max_wait_ms` — woken by high
//! watermark advances, never by a timer loop.
//!
//! read_committed (isolation level 1) reads stop at the last stable offset and carry the
//! aborted transactions of the range, so clients drop those records; a long poll is woken
//! by the high watermark, which is also what moves the last stable offset (a marker
//! counts once the high watermark passes it).
//!
//! Records are not read: each partition's batches are selected as ranges of segment files
//! and the connection sends them with `sendfile` (see `logbook_protocol::file_records`).
//!
//! A follower's fetch (`replica_id`, or v15+ `replica_state.replica_id`, ≥ 0) goes to
//! `Partition::fetch_for_follower`: it reads up to the log end (still as file ranges), gets
//! the diverging epoch instead of records when its log diverged (KIP-320), records the
//! follower's position (which moves the high watermark and the ISR), and long-polls on the
//! log end rather than the high watermark.
//!
//! NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH answers carry the leader this broker
//! knows (`current_leader`, v16+, KIP-951).
//!
//! Fetch sessions (KIP-227, v7+): `crate::fetch_session` picks the context from the
//! request's session id and epoch. A full fetch (epoch 0) is answered in full and leaves a
//! session; an incremental one reads the session's partitions and is answered with only
//! those that changed.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, ProducerId, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::ResponseError;
use logbook_protocol::{FileRecords, FileRegion};
use logbook_replication::{
    AbortedTxn, FetchIsolation, FollowerFetch, LogReadResult, Offset, Partition, ReplicaManager,
    TopicPartition,
};
use tokio::sync::watch;

use crate::authorizer::{AclOperation, RequestAuthorizer, ResourceType};
use crate::broker::Broker;
use crate::errors;
use crate::fetch_session::{Answer, FetchContext, PartitionKey, FINAL_EPOCH, INVALID_SESSION_ID};
use crate::handlers::{Response, ResponseFuture};

mod replica;
use replica::{fill_current_leaders, follower_partition};

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 4, max: 18 };

/// First version that names topics by id (KIP-516).
const TOPIC_ID_VERSION: i16 = 13;

/// `isolation_level` of a read_committed consumer.
const READ_COMMITTED: i8 = 1;

/// First version whose follower id is in `replica_state` (KIP-903).
const REPLICA_STATE_VERSION: i16 = 15;

/// First version whose answers name the current leader (KIP-951).
const CURRENT_LEADER_VERSION: i16 = 16;

/// First version with fetch sessions (KIP-227).
const SESSION_VERSION: i16 = 7;

/// The follower a fetch comes from: its broker id and broker epoch (-1 before v15).
#[derive(Clone, Copy)]
struct Follower {
    replica_id: i32,
    replica_epoch: i64,
}

/// One requested topic, resolved once per request: the topic (or why not), and each
/// requested partition with the hosted partition the replica manager gave for it (or
/// the error it answered: unknown, fenced or unknown leader epoch, offline).
struct ResolvedTopic {
    name: TopicName,
    id: uuid::Uuid,
    partitions: Vec<(
        kafka_protocol::messages::fetch_request::FetchPartition,
        Result<Arc<Partition>, ResponseError>,
    )>,
}

/// Answers a Fetch request; all the work happens in the returned future.
pub fn handle(ctx: &super::RequestContext, request: FetchRequest) -> ResponseFuture {
    let (broker, version) = (&ctx.broker, ctx.api_version);
    let broker = Arc::clone(broker);
    let authorizer = ctx.authorizer.clone();
    let consumer = request.replica_id.0 < 0 && request.replica_state.replica_id.0 < 0;
    let quota = consumer.then(|| ctx.quota(&broker.quotas.fetch)).flatten();
    let faults = consumer
        .then(|| crate::fault_injector::for_request(ctx).map(|(_, scope)| scope))
        .flatten();
    Box::pin(async move {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let cap = quota.as_ref().map(|applied| {
            crate::client_quota_manager::ClientQuotaManager::max_value_in_window(applied) as usize
        });
        let (mut response, mut records) =
            fetch(&broker, &authorizer, request, version, cap, faults.as_ref()).await;
        if let Some(applied) = quota {
            let bytes: usize = response
                .responses
                .iter()
                .flat_map(|t| &t.partitions)
                .filter_map(|p| p.records.as_ref().map(Bytes::len))
                .sum();
            #[allow(clippy::cast_precision_loss)]
            let bytes = bytes as f64;
            let now = crate::client_quota_manager::now_ms();
            let manager = &broker.quotas.fetch;
            let throttle_ms = manager.record(&applied, bytes, now);
            if throttle_ms > 0 {
                // Kafka's throttled fetch: no records, and its bytes do not count.
                manager.unrecord(&applied, bytes, now);
                response = throttled(response, throttle_ms);
                records = FileRecords::default();
            }
        }
        Some(Response {
            body: ResponseKind::Fetch(response),
            records,
        })
    })
}

/// The answer of a fetch that took its client over `consumer_byte_rate` (Kafka's
/// `getThrottledResponse`): no partitions; a new session is not offered, an existing one
/// goes on.
pub(crate) fn throttled(response: FetchResponse, throttle_ms: i32) -> FetchResponse {
    FetchResponse::default()
        .with_throttle_time_ms(throttle_ms)
        .with_error_code(response.error_code)
        .with_session_id(response.session_id)
}

/// Resolves the requested topics, each only if the sender may read it (Kafka's order: a
/// name is checked before its existence is revealed, an id is resolved first).
fn resolve(
    broker: &Broker,
    may_read: impl Fn(&str) -> bool,
    request: FetchRequest,
    version: i16,
) -> Vec<ResolvedTopic> {
    request
        .topics
        .into_iter()
        .map(|t| {
            let topic = if version >= TOPIC_ID_VERSION {
                broker
                    .topics
                    .get_by_id(&t.topic_id)
                    .ok_or(ResponseError::UnknownTopicId)
                    .and_then(|topic| {
                        if may_read(&topic.name) {
                            Ok(topic)
                        } else {
                            Err(ResponseError::TopicAuthorizationFailed)
                        }
                    })
            } else if !may_read(t.topic.as_str()) {
                Err(ResponseError::TopicAuthorizationFailed)
            } else {
                broker
                    .topics
                    .get(t.topic.as_str())
                    .ok_or(ResponseError::UnknownTopicOrPartition)
            };
            let name = match &topic {
                Ok(topic) if version >= TOPIC_ID_VERSION => TopicName(
                    kafka_protocol::protocol::StrBytes::from_string(topic.name.clone()),
                ),
                _ => t.topic,
            };
            let partitions = t
                .partitions
                .into_iter()
                .map(|req| {
                    let partition = match &topic {
                        Ok(topic) => broker
                            .replicas
                            .get_partition_or_error(
                                &TopicPartition {
                                    topic: topic.name.clone(),
                                    partition: req.partition,
                                },
                                req.current_leader_epoch,
                            )
                            .map_err(|e| errors::replication_error(&e)),
                        Err(e) => Err(*e),
                    };
                    (req, partition)
                })
                .collect();
            ResolvedTopic {
                name,
                id: t.topic_id,
                partitions,
            }
        })
        .collect()
}

/// Partitions a fault fails are answered with its error and not read (the fetch returns
/// at once, as with any partition error).
fn inject_faults(
    injector: &crate::fault_injector::FaultInjector,
    scope: &crate::fault_injector::FaultScope,
    topics: &mut [ResolvedTopic],
) {
    for topic in topics {
        for (req, partition) in &mut topic.partitions {
            if partition.is_ok() {
                if let Some(error) =
                    injector.partition_error(scope, topic.name.as_str(), req.partition)
                {
                    *partition = Err(error);
                }
            }
        }
    }
}

/// The outcome of one pass over every requested partition.
struct Pass {
    response: Vec<FetchableTopicResponse>,
    records: FileRecords,
    bytes: usize,
    error: bool,
    /// What a consumer is sent, per partition with data: topic, bytes, offsets spanned
    /// (collected only when metrics are on).
    delivered: Vec<(String, usize, u64)>,
}

fn error_partition(index: i32, error: ResponseError) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(error.code())
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_aborted_transactions(None)
        .with_preferred_read_replica(BrokerId(-1))
        .with_records(Some(Bytes::new()))
}

/// One pass over every requested partition, in request order, within `max_bytes` (the
/// first partition with data always gets one whole batch).
fn read_pass(
    replicas: &ReplicaManager,
    topics: &[ResolvedTopic],
    max_bytes: usize,
    read_committed: bool,
    follower: Option<Follower>,
) -> Pass {
    let mut reader = PassReader {
        replicas,
        budget: max_bytes,
        min_one_batch: true,
        read_committed,
        follower,
        pass: Pass {
            response: Vec::new(),
            records: FileRecords::default(),
            bytes: 0,
            error: false,
            delivered: Vec::new(),
        },
    };
    let response = topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|(req, partition)| reader.read_partition(&t.name, req, partition))
                .collect();
            FetchableTopicResponse::default()
                .with_topic(t.name.clone())
                .with_topic_id(t.id)
                .with_partitions(partitions)
        })
        .collect();
    reader.pass.response = response;
    reader.pass
}

/// A pass in progress: the byte budget left, whether the next partition must still get one
/// whole batch, and what was read so far.
struct PassReader<'a> {
    replicas: &'a ReplicaManager,
    budget: usize,
    min_one_batch: bool,
    read_committed: bool,
    follower: Option<Follower>,
    pass: Pass,
}

impl PassReader<'_> {
    /// The answer for one partition: a follower's read, a consumer's, or its error.
    fn read_partition(
        &mut self,
        topic: &TopicName,
        req: &FetchPartition,
        partition: &Result<Arc<Partition>, ResponseError>,
    ) -> PartitionData {
        let partition = match partition {
            Ok(p) => p,
            Err(e) => {
                self.pass.error = true;
                return error_partition(req.partition, *e);
            }
        };
        let limit = usize::try_from(req.partition_max_bytes.max(0))
            .unwrap_or(0)
            .min(self.budget);
        match self.follower {
            Some(follower) => self.follower_read(follower, req, partition, limit),
            None => self.consumer_read(topic, req, partition, limit),
        }
    }

    /// Counts `n` bytes read: they leave the budget, and once any partition returned
    /// data the others no longer need a whole batch.
    fn took(&mut self, n: usize) {
        if n > 0 {
            self.min_one_batch = false;
        }
        self.pass.bytes += n;
        self.budget = self.budget.saturating_sub(n);
    }

    /// A follower's read (`fetch/replica.rs`), up to the log end.
    fn follower_read(
        &mut self,
        follower: Follower,
        req: &FetchPartition,
        partition: &Partition,
        limit: usize,
    ) -> PartitionData {
        let fetch = FollowerFetch {
            replica_id: follower.replica_id,
            replica_epoch: follower.replica_epoch,
            fetch_offset: Offset(req.fetch_offset),
            log_start_offset: Offset(req.log_start_offset),
            current_leader_epoch: req.current_leader_epoch,
            last_fetched_epoch: req.last_fetched_epoch,
            max_bytes: limit,
            min_one_batch: self.min_one_batch,
        };
        let data = follower_partition(partition, &fetch, &mut self.pass.records);
        if data.error_code != errors::NONE {
            self.pass.error = true;
        }
        self.took(data.records.as_ref().map_or(0, Bytes::len));
        data
    }

    /// A consumer's read: whole batches below the high watermark (the last stable offset
    /// for read_committed, with the aborted transactions), selected as file ranges that
    /// the response sends with `sendfile`.
    fn consumer_read(
        &mut self,
        topic: &TopicName,
        req: &FetchPartition,
        partition: &Partition,
        limit: usize,
    ) -> PartitionData {
        let offset = Offset(req.fetch_offset);
        let isolation = if self.read_committed {
            FetchIsolation::TxnCommitted
        } else {
            FetchIsolation::HighWatermark
        };
        let read = self
            .replicas
            .read(partition, offset, limit, self.min_one_batch, isolation);
        let records = &mut self.pass.records;
        let read = read.and_then(|result| {
            let regions = result
                .read
                .slices
                .iter()
                .map(|slice| FileRegion {
                    file: Arc::clone(&slice.file),
                    position: slice.position,
                    len: slice.len,
                })
                .collect();
            let set = records
                .records(regions)
                .map_err(logbook_storage::Error::from)?;
            Ok((result, set))
        });
        let (
            LogReadResult {
                read,
                offsets,
                aborted_transactions: aborted,
            },
            set,
        ) = match read {
            Ok(read) => read,
            Err(e) => {
                self.pass.error = true;
                // Its error alone, every offset -1, as Kafka's `createLogReadResult`.
                return error_partition(req.partition, errors::replication_error(&e));
            }
        };
        let high_watermark = offsets.map_or(-1, |o| o.high_watermark.get());
        let last_stable = offsets.map_or(-1, |o| o.last_stable_offset.get());
        let n = read.bytes;
        if n > 0 && crate::metrics::enabled() {
            let spanned = read.next_offset.map_or(0, |next| {
                u64::try_from(next.get() - offset.get()).unwrap_or(0)
            });
            self.pass.delivered.push((topic.to_string(), n, spanned));
        }
        self.took(n);
        PartitionData::default()
            .with_partition_index(req.partition)
            .with_high_watermark(high_watermark)
            .with_last_stable_offset(last_stable)
            .with_log_start_offset(read.log_start_offset.get())
            .with_aborted_transactions(aborted.map(aborted_transactions))
            .with_preferred_read_replica(BrokerId(-1))
            .with_records(Some(set))
    }
}

/// The response's form of the aborted transactions of a read_committed read.
fn aborted_transactions(aborted: Vec<AbortedTxn>) -> Vec<AbortedTransaction> {
    aborted
        .into_iter()
        .map(|t| {
            AbortedTransaction::default()
                .with_producer_id(ProducerId(t.producer_id))
                .with_first_offset(t.first_offset)
        })
        .collect()
}

/// Receivers that wake the long poll: the high watermark for consumers, the log end for
/// followers (they read up to it).
fn subscribe(topics: &[ResolvedTopic], follower: bool) -> Vec<watch::Receiver<Offset>> {
    topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .filter_map(|(_, p)| p.as_ref().ok())
        .map(|p| {
            if follower {
                p.subscribe_log_end()
            } else {
                p.subscribe()
            }
        })
        .collect()
}

/// Whether the sender may read a topic: a follower's fetch needs CLUSTER_ACTION (then
/// every topic); a consumer's, READ on each topic.
fn read_permission(authorizer: &RequestAuthorizer, follower: bool) -> impl Fn(&str) -> bool + '_ {
    let cluster_action = follower && authorizer.authorize_cluster(AclOperation::ClusterAction);
    move |name: &str| {
        if follower {
            cluster_action
        } else {
            authorizer.authorize(AclOperation::Read, ResourceType::Topic, name)
        }
    }
}

async fn fetch(
    broker: &Broker,
    authorizer: &RequestAuthorizer,
    request: FetchRequest,
    version: i16,
    quota_cap: Option<usize>,
    faults: Option<&crate::fault_injector::FaultScope>,
) -> (FetchResponse, FileRecords) {
    let FetchParams {
        max_wait,
        min_bytes,
        max_bytes,
        read_committed,
        follower,
    } = FetchParams::of(&broker.config.limits, &request, version);
    // Never more than the quota lets through in one window, so a fetch can succeed.
    let max_bytes = quota_cap.map_or(max_bytes, |cap| max_bytes.min(cap.max(1)));
    let by_id = version >= TOPIC_ID_VERSION;
    let mut request = request;
    let (context, requested) = session_context(broker, &request, version);
    match &context {
        FetchContext::Error(e) => {
            let response = FetchResponse::default()
                .with_error_code(e.code())
                .with_session_id(INVALID_SESSION_ID);
            return (response, FileRecords::default());
        }
        FetchContext::Incremental { partitions, .. } => {
            request.topics = session_topics(partitions, by_id);
        }
        FetchContext::Sessionless | FetchContext::Full => {}
    }
    let mut topics = resolve(
        broker,
        read_permission(authorizer, follower.is_some()),
        request,
        version,
    );
    if let (Some(scope), Some(injector)) = (faults, broker.faults.as_deref()) {
        inject_faults(injector, scope, &mut topics);
    }
    let deadline = tokio::time::Instant::now() + max_wait;
    let respond = |pass: Pass| {
        let session = SessionAnswer {
            context: &context,
            requested,
            by_id,
            follower: follower.is_some(),
        };
        session.respond(broker, pass, version)
    };
    let replicas = &broker.replicas;
    let read = || {
        tokio::task::block_in_place(|| {
            read_pass(replicas, &topics, max_bytes, read_committed, follower)
        })
    };
    loop {
        // Subscribe before reading, so an append between the read and the wait still wakes us.
        let mut receivers = subscribe(&topics, follower.is_some());
        let pass = read();
        let done = pass.error || pass.bytes >= min_bytes || tokio::time::Instant::now() >= deadline;
        if done || receivers.is_empty() {
            return respond(pass);
        }
        let changed =
            futures::future::select_all(receivers.iter_mut().map(|r| Box::pin(r.changed())));
        if tokio::time::timeout_at(deadline, changed).await.is_err() {
            return respond(read());
        }
    }
}

/// A Fetch request's limits and reader, from the request and the broker's limits.
struct FetchParams {
    max_wait: Duration,
    min_bytes: usize,
    max_bytes: usize,
    read_committed: bool,
    /// Set for a follower's fetch (a replica id >= 0).
    follower: Option<Follower>,
}

impl FetchParams {
    fn of(limits: &crate::config::Limits, request: &FetchRequest, version: i16) -> FetchParams {
        let max_wait = Duration::from_millis(
            u64::try_from(request.max_wait_ms.max(0))
                .unwrap_or(0)
                .min(limits.fetch_wait_ms_max),
        );
        let follower = if version >= REPLICA_STATE_VERSION {
            Follower {
                replica_id: request.replica_state.replica_id.0,
                replica_epoch: request.replica_state.replica_epoch,
            }
        } else {
            Follower {
                replica_id: request.replica_id.0,
                replica_epoch: -1,
            }
        };
        FetchParams {
            max_wait,
            min_bytes: usize::try_from(request.min_bytes.max(0)).unwrap_or(0),
            max_bytes: usize::try_from(request.max_bytes.max(0))
                .unwrap_or(0)
                .min(limits.fetch_response_bytes_max),
            read_committed: request.isolation_level == READ_COMMITTED,
            follower: (follower.replica_id >= 0).then_some(follower),
        }
    }
}

/// How a pass becomes the answer under the request's session context (KIP-227): a full
/// fetch creates a session of its partitions with what they were answered, an incremental
/// one keeps only what changed; then the current leaders of partitions in error (KIP-951).
struct SessionAnswer<'a> {
    context: &'a FetchContext,
    requested: Vec<(PartitionKey, FetchPartition)>,
    by_id: bool,
    follower: bool,
}

impl SessionAnswer<'_> {
    fn respond(
        self,
        broker: &Broker,
        mut pass: Pass,
        version: i16,
    ) -> (FetchResponse, FileRecords) {
        for (topic, bytes, offsets) in &pass.delivered {
            crate::metrics::BrokerTopicStats::fetched(topic, *bytes, *offsets);
        }
        let now = std::time::Instant::now();
        let session_id = match self.context {
            FetchContext::Full => {
                let answers = answers_by_key(&pass.response, self.by_id);
                let partitions = self
                    .requested
                    .into_iter()
                    .map(|(key, req)| {
                        let answer = answers.get(&key).copied().unwrap_or_default();
                        (key, req, answer)
                    })
                    .collect();
                broker
                    .fetch_sessions
                    .create(self.follower, self.by_id, partitions, now)
            }
            FetchContext::Incremental { id, epoch, .. } => {
                let finished = broker.fetch_sessions.finish_incremental(
                    *id,
                    *epoch,
                    &mut pass.response,
                    answer_of,
                );
                if let Err(e) = finished {
                    let response = FetchResponse::default()
                        .with_error_code(e.code())
                        .with_session_id(*id);
                    return (response, FileRecords::default());
                }
                *id
            }
            FetchContext::Sessionless | FetchContext::Error(_) => INVALID_SESSION_ID,
        };
        if version >= CURRENT_LEADER_VERSION && pass.error {
            fill_current_leaders(broker, &mut pass.response);
        }
        (
            FetchResponse::default()
                .with_session_id(session_id)
                .with_responses(pass.response),
            pass.records,
        )
    }
}

/// The session context of `request` (sessionless before v7), and its partitions with their
/// keys, which a full fetch's new session is made of.
fn session_context(
    broker: &Broker,
    request: &FetchRequest,
    version: i16,
) -> (FetchContext, Vec<(PartitionKey, FetchPartition)>) {
    if version < SESSION_VERSION {
        return (FetchContext::Sessionless, Vec::new());
    }
    let by_id = version >= TOPIC_ID_VERSION;
    if request.session_epoch == FINAL_EPOCH {
        // Sessionless (librdkafka fetches this way): only a named session to close, so the
        // request's partitions are not copied into keys on every fetch.
        let context = broker.fetch_sessions.new_context(
            request.session_id,
            FINAL_EPOCH,
            by_id,
            &[],
            &[],
            std::time::Instant::now(),
        );
        return (context, Vec::new());
    }
    let requested: Vec<(PartitionKey, FetchPartition)> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    PartitionKey::new(by_id, t.topic_id, t.topic.as_str(), p.partition),
                    p.clone(),
                )
            })
        })
        .collect();
    let forgotten: Vec<PartitionKey> = request
        .forgotten_topics_data
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| PartitionKey::new(by_id, t.topic_id, t.topic.as_str(), *p))
        })
        .collect();
    let context = broker.fetch_sessions.new_context(
        request.session_id,
        request.session_epoch,
        by_id,
        &requested,
        &forgotten,
        std::time::Instant::now(),
    );
    (context, requested)
}

/// A session's partitions as a request's topics: one entry per run of partitions of the
/// same topic, in the session's order (Kafka's answers group runs the same way).
fn session_topics(partitions: &[(PartitionKey, FetchPartition)], by_id: bool) -> Vec<FetchTopic> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (key, partition) in partitions {
        let same = topics.last().is_some_and(|t| {
            if by_id {
                t.topic_id == key.topic_id
            } else {
                t.topic.as_str() == key.topic
            }
        });
        if !same {
            topics.push(
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(key.topic.clone())))
                    .with_topic_id(key.topic_id),
            );
        }
        if let Some(t) = topics.last_mut() {
            t.partitions.push(partition.clone());
        }
    }
    topics
}

/// What a session compares in one partition's answer.
fn answer_of(p: &PartitionData) -> Answer {
    Answer {
        records_bytes: p.records.as_ref().map_or(0, Bytes::len),
        high_watermark: p.high_watermark,
        log_start_offset: p.log_start_offset,
        error: p.error_code != errors::NONE,
        preferred_read_replica: p.preferred_read_replica.0 != -1,
        diverging: p.diverging_epoch.epoch >= 0,
    }
}

/// Each partition's answer by its session key.
fn answers_by_key(
    topics: &[FetchableTopicResponse],
    by_id: bool,
) -> std::collections::HashMap<PartitionKey, Answer> {
    topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    PartitionKey::new(by_id, t.topic_id, t.topic.as_str(), p.partition_index),
                    answer_of(p),
                )
            })
        })
        .collect()
}
