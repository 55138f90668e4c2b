//! Produce (API key 0): each partition's payload goes to `ReplicaManager::append_records`,
//! which validates it at the door (storage's `log_validator` walks every record, as Kafka's
//! LogValidator does), runs this handler's transaction check, and appends it (offsets
//! assigned by rewriting batch headers); the handler answers per `acks`:
//! 0 → no response, 1 → after the leader's append (not waiting for its fsync, as Kafka
//! answers after the leader's write), -1 → once the high watermark passes the records:
//! durable on the leader and on every member of the ISR (on a single node, fsync'd).
//! acks=-1 with a committed ISR smaller than the topic's `min.insync.replicas` is refused
//! before the append (NOT_ENOUGH_REPLICAS), and after it if the ISR shrank below it while
//! waiting (NOT_ENOUGH_REPLICAS_AFTER_APPEND). A partition this broker does not lead answers
//! NOT_LEADER_OR_FOLLOWER with the leader it knows (`current_leader`, v10+, KIP-951).
//!
//! Transactional batches (KIP-890 part 1, Kafka's `transaction.partition.verification.enable`,
//! on by default): before the append, the transaction coordinator must hold the partition in
//! the producer's ongoing transaction, else INVALID_TXN_STATE (TRANSACTION_ABORTABLE from
//! v11), so a hanging transaction cannot start from a late write. The check is one branch
//! on the first batch's transactional bit, so plain produce is unchanged. Transactional
//! batches in a request without a transactional id are refused outright
//! (TRANSACTIONAL_ID_AUTHORIZATION_FAILED): no coordinator could ever end their transaction.
//!
//! Transaction protocol v2 (KIP-890 part 2): a client that uses it sends Produce v12+ (Kafka's
//! clients cap transactional produce at v11 in the v1 flow) and never sends
//! AddPartitionsToTxn; its first batch for a partition adds the partition to its
//! transaction (Kafka's leader sends AddPartitionsToTxn v5 to the coordinator; here a direct
//! call, durable before the batch is appended). Below `transaction.version` 2, v12+
//! transactional batches are only verified, as v11 ones are.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{BrokerId, ProduceRequest, ProduceResponse, ResponseKind};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;
use logbook_replication::{
    AppendOutcome, AppendRecords, AppendRecordsError, AppendedRecords, Partition, PendingAck,
    ReplicaManager,
};
use logbook_storage::log_validator::{AppendOrigin, ValidatedBatches, ValidatorConfig};
use logbook_storage::ValidationError;

use crate::authorizer::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::errors;
use crate::handlers::ResponseFuture;
use crate::topics::Topic;
use logbook_common::now_ms;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 3, max: 13 };

/// First version that names topics by id (KIP-516).
const TOPIC_ID_VERSION: i16 = 13;

/// First version a client of transaction protocol v2 sends (Kafka's
/// `LAST_STABLE_VERSION_BEFORE_TRANSACTION_V2` is 11): its transactional batches add their
/// partition to the transaction.
const TRANSACTION_V2_VERSION: i16 = 12;

/// First version whose client knows TRANSACTION_ABORTABLE (KIP-890; Kafka's
/// `genericErrorSupported`): a transactional batch for a partition not in the transaction
/// gets it instead of INVALID_TXN_STATE.
const TRANSACTION_ABORTABLE_VERSION: i16 = 11;

/// First version whose responses carry the current leader on NOT_LEADER_OR_FOLLOWER
/// (KIP-951).
const CURRENT_LEADER_VERSION: i16 = 10;

/// A partition's append that must be committed (acks=all) or held by the leader (acks=1)
/// before the request is answered, and where its answer is in the response.
struct DurableWait {
    topic_index: usize,
    partition_index: usize,
    pending: PendingAck,
}

/// The topic's `min.insync.replicas` (at least 1).
fn min_insync_replicas(broker: &Broker, topic: &Topic) -> usize {
    topic
        .config
        .get("min.insync.replicas", broker.topics.defaults())
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1)
}

/// KIP-951: a NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH answer names the leader this
/// broker knows, so the client can skip a metadata round trip. Node endpoints come with the
/// cluster metadata image.
fn fill_current_leaders(
    broker: &Broker,
    responses: &mut [TopicProduceResponse],
    topic_names: &[Option<String>],
) {
    for (topic, name) in responses.iter_mut().zip(topic_names) {
        let Some(name) = name else { continue };
        for p in &mut topic.partition_responses {
            let not_leader = p.error_code == ResponseError::NotLeaderOrFollower.code()
                || p.error_code == ResponseError::FencedLeaderEpoch.code();
            if !not_leader {
                continue;
            }
            if let Some(partition) = broker.replicas.partition(name, p.index) {
                let (leader, epoch) = partition.current_leader();
                p.current_leader = LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(leader))
                    .with_leader_epoch(epoch.0);
            }
        }
    }
}

fn partition_error(
    index: i32,
    error: ResponseError,
    message: Option<String>,
) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(error.code())
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message(message.map(StrBytes::from_string))
}

/// Errors Kafka answers with log start offset -1 although the partition was reached
/// (`ReplicaManager.appendToLocalLog` answers them with `UNKNOWN_LOG_APPEND_INFO`).
const ERRORS_WITHOUT_LOG_START_OFFSET: [ResponseError; 6] = [
    ResponseError::UnknownTopicOrPartition,
    ResponseError::NotLeaderOrFollower,
    ResponseError::MessageTooLarge,
    ResponseError::RecordListTooLarge,
    ResponseError::CorruptMessage,
    ResponseError::KafkaStorageError,
];

/// A leader's refusal of an append carries the partition's log start offset, except for
/// [`ERRORS_WITHOUT_LOG_START_OFFSET`], as Kafka's does: a Java producer compares it with
/// its last acknowledged offset to tell a producer state removed by retention (reset the
/// sequence) from a real sequence error.
fn with_log_start_offset(
    broker: &Broker,
    topic_partition: &logbook_replication::TopicPartition,
    response: PartitionProduceResponse,
) -> PartitionProduceResponse {
    let withheld = ERRORS_WITHOUT_LOG_START_OFFSET
        .iter()
        .any(|e| e.code() == response.error_code);
    let log_start_offset = broker
        .replicas
        .partition(&topic_partition.topic, topic_partition.partition)
        .filter(|_| !withheld)
        .and_then(|p| p.offsets().ok().map(|o| o.log_start_offset.get()));
    match log_start_offset {
        Some(offset) => response.with_log_start_offset(offset),
        None => response,
    }
}

/// The refusal of a batch that failed validation, with the offending records' indexes
/// (ProduceResponse v8+ `record_errors`; older versions drop the field when encoding).
fn validation_failure(index: i32, e: &ValidationError) -> PartitionProduceResponse {
    let record_errors = e
        .rejected_records()
        .iter()
        .map(|r| {
            BatchIndexAndErrorMessage::default()
                .with_batch_index(r.batch_index)
                .with_batch_index_error_message(Some(StrBytes::from_string(r.message.clone())))
        })
        .collect();
    partition_error(index, errors::validation_error(e), Some(e.to_string()))
        .with_record_errors(record_errors)
}

/// What the topic's configs impose on this append (Kafka's `LogValidator` arguments).
fn validator_config(broker: &Broker, topic: &Topic) -> ValidatorConfig {
    let defaults = broker.topics.defaults();
    let config = &topic.config;
    let long = |name: &str| {
        config
            .get(name, defaults)
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(i64::MAX)
    };
    ValidatorConfig {
        origin: AppendOrigin::Client,
        log_append_time: config.log_append_time(defaults),
        compacted: config.compacted(defaults),
        max_message_bytes: usize::try_from(config.max_message_bytes(defaults).max(0))
            .unwrap_or(usize::MAX),
        timestamp_before_max_ms: long("message.timestamp.before.max.ms"),
        timestamp_after_max_ms: long("message.timestamp.after.max.ms"),
        now_ms: now_ms(),
        decompressed_bytes_max: broker.config.limits.decompressed_batch_bytes_max,
        target_codec: config
            .get("compression.type", defaults)
            .and_then(|name| target_codec(&name)),
    }
}

/// The codec a topic's `compression.type` stores batches in (Kafka's
/// `BrokerCompressionType`); `None` for `producer` (as sent). The config is validated
/// when set, so an unknown name does not occur; it is treated as `producer`.
fn target_codec(compression_type: &str) -> Option<u8> {
    match compression_type {
        "uncompressed" => Some(0),
        "gzip" => Some(1),
        "snappy" => Some(2),
        "lz4" => Some(3),
        "zstd" => Some(4),
        _ => None,
    }
}

/// Validates and appends one partition's records through the replica manager; returns the
/// response and, on success, what acks=all waits for.
fn append_partition(
    broker: &Broker,
    topic: &Topic,
    data: &PartitionProduceData,
    verification: Option<&TxnVerification<'_>>,
    acks: i16,
) -> (PartitionProduceResponse, Option<PendingAck>) {
    let index = data.index;
    let Some(records) = data.records.as_ref() else {
        return (
            partition_error(
                index,
                ResponseError::CorruptMessage,
                Some("null records".into()),
            ),
            None,
        );
    };
    let topic_partition = logbook_replication::TopicPartition {
        topic: topic.name.clone(),
        partition: index,
    };
    let min_insync_replicas = min_insync_replicas(broker, topic);
    let request = AppendRecords {
        topic_partition: &topic_partition,
        records,
        validator: &validator_config(broker, topic),
        off_worker: broker.config.limits.validation_off_worker(),
        required_acks: acks,
        min_insync_replicas,
    };
    let appended = broker
        .replicas
        .append_records(&request, |partition, validated| {
            verification.map_or(Ok(()), |v| {
                v.check(broker, topic, partition, validated, index)
            })
        });
    match appended {
        Ok(appended) => {
            let response = append_response(topic, &appended, index);
            (response, Some(appended.pending_ack(min_insync_replicas)))
        }
        Err(AppendRecordsError::Partition(e)) => (
            with_log_start_offset(
                broker,
                &topic_partition,
                partition_error(index, errors::replication_error(&e), Some(e.to_string())),
            ),
            None,
        ),
        Err(AppendRecordsError::Invalid(e)) => {
            tracing::debug!(partition = %topic_partition, error = %e, "produce rejected");
            (
                with_log_start_offset(broker, &topic_partition, validation_failure(index, &e)),
                None,
            )
        }
        Err(AppendRecordsError::Refused(refused)) => (refused, None),
        Err(AppendRecordsError::Append(e)) => {
            tracing::warn!(partition = %topic_partition, error = %e, "append failed");
            (
                partition_error(index, errors::replication_error(&e), Some(e.to_string())),
                None,
            )
        }
    }
}

/// A transactional produce's check against its coordinator (KIP-890): with transaction
/// protocol v2 the produce adds its partition to the transaction itself, otherwise the
/// partition must have been added (AddPartitionsToTxn) before.
struct TxnVerification<'a> {
    transactional_id: &'a str,
    adds_partition: bool,
    /// The client knows TRANSACTION_ABORTABLE (Produce v11+).
    abortable: bool,
}

impl TxnVerification<'_> {
    /// Passes verified transactional batches (and non-transactional ones, always); else the
    /// partition's answer.
    fn check(
        &self,
        broker: &Broker,
        topic: &Topic,
        partition: &Partition,
        validated: &ValidatedBatches,
        index: i32,
    ) -> Result<(), PartitionProduceResponse> {
        let Some(first) = validated
            .batches()
            .first()
            .filter(|b| b.header.is_transactional())
        else {
            return Ok(());
        };
        let transactional_id = self.transactional_id;
        let topic_partition = (topic.name.clone(), index);
        let (producer_id, producer_epoch) = (first.header.producer_id, first.header.producer_epoch);
        let verified = if self.adds_partition {
            broker.transactions.add_partition_for_produce(
                transactional_id,
                producer_id,
                producer_epoch,
                &topic_partition,
            )
        } else {
            broker.transactions.verify_partition(
                transactional_id,
                producer_id,
                producer_epoch,
                &topic_partition,
            )
        };
        let Err(e) = verified else {
            return Ok(());
        };
        tracing::debug!(partition = %partition.topic_partition(), transactional_id, error = %e, "transactional produce not verified");
        Err(partition_error(
            index,
            errors::produce_verification_error(&e, self.abortable),
            Some(format!(
                "Partition was not verified in the transaction: {e}"
            )),
        ))
    }
}

/// The partition's answer to a successful append (for a retried batch, the first
/// append's answer).
fn append_response(
    topic: &Topic,
    appended: &AppendedRecords,
    index: i32,
) -> PartitionProduceResponse {
    let AppendedRecords {
        partition,
        validated,
        outcome,
    } = appended;
    let log_append_time_ms = validated.log_append_time_ms().unwrap_or(-1);
    let log_start_offset = partition.offsets().map_or(-1, |o| o.log_start_offset.get());
    let response = PartitionProduceResponse::default()
        .with_index(index)
        .with_log_start_offset(log_start_offset);
    match outcome {
        // A retry is answered with the first append's offsets and, as its append time, the
        // batch's stored max timestamp: the append time under LogAppendTime, and the
        // producer's own largest timestamp under CreateTime too (Kafka's `UnifiedLog` sets
        // the duplicate's `logAppendTime` from the cached batch either way, so a Java
        // producer reports that timestamp for every record of the retried batch).
        AppendOutcome::Duplicate(cached) => response
            .with_base_offset(cached.first_offset.get())
            .with_log_append_time_ms(cached.max_timestamp),
        AppendOutcome::Appended(info) => {
            crate::metrics::BrokerTopicStats::appended(
                &topic.name,
                validated.bytes().len(),
                u64::try_from(validated.record_count()).unwrap_or(0),
            );
            response
                .with_base_offset(info.first_offset.get())
                .with_log_append_time_ms(log_append_time_ms)
        }
    }
}

/// The topic the client may write to: WRITE on it is checked before anything reveals
/// whether it exists (Kafka's `filterByAuthorized` comes first), except that
/// a topic id must first be resolved to the name the ACLs use.
fn resolve_topic(
    ctx: &super::RequestContext,
    data: &TopicProduceData,
    version: i16,
) -> Result<Arc<Topic>, ResponseError> {
    let broker = &ctx.broker;
    let may_write = |name: &str| ctx.authorize(AclOperation::Write, ResourceType::Topic, name);
    if version < TOPIC_ID_VERSION && !may_write(data.name.as_str()) {
        return Err(ResponseError::TopicAuthorizationFailed);
    }
    let topic = resolve_any_topic(broker, data, version)?;
    if version >= TOPIC_ID_VERSION && !may_write(&topic.name) {
        return Err(ResponseError::TopicAuthorizationFailed);
    }
    // Internal topics belong to the coordinators; Kafka refuses client appends to them.
    if crate::topics::is_internal(&topic.name) {
        return Err(ResponseError::InvalidTopicException);
    }
    Ok(topic)
}

fn resolve_any_topic(
    broker: &Broker,
    data: &TopicProduceData,
    version: i16,
) -> Result<Arc<Topic>, ResponseError> {
    if version >= TOPIC_ID_VERSION {
        return broker
            .topics
            .get_by_id(&data.topic_id)
            .ok_or(ResponseError::UnknownTopicId);
    }
    // Kafka creates topics from Metadata requests only: a Produce to a topic that does not
    // exist is UNKNOWN_TOPIC_OR_PARTITION whatever `auto.create.topics.enable` says (clients
    // ask Metadata first, and that creates it).
    broker
        .topics
        .get(data.name.as_str())
        .ok_or(ResponseError::UnknownTopicOrPartition)
}

/// Appends the request's records now (in request order) and returns the future answer.
pub fn handle(ctx: &super::RequestContext, request: ProduceRequest) -> ResponseFuture {
    let (broker, version) = (&ctx.broker, ctx.api_version);
    let acks = request.acks;
    let adds_partition = version >= TRANSACTION_V2_VERSION
        && broker.config.transaction_version >= super::TRANSACTION_VERSION_2;
    let mut responses = Vec::with_capacity(request.topic_data.len());
    let mut topic_names = Vec::with_capacity(request.topic_data.len());
    let mut waits = Vec::new();
    let may_use_transactional_id = may_use_transactional_id(ctx, &request);
    let transactional_id = request.transactional_id.as_ref().map(|t| t.0.as_str());
    let faults = crate::fault_injector::for_request(ctx);
    // Why every partition is refused when the reason is not the ACL.
    let no_transactional_id = (!may_use_transactional_id && request.transactional_id.is_none())
        .then(|| "transactional records without a transactional id".to_owned());
    for (topic_index, data) in request.topic_data.iter().enumerate() {
        let resolved = if may_use_transactional_id {
            resolve_topic(ctx, data, version)
        } else {
            Err(ResponseError::TransactionalIdAuthorizationFailed)
        };
        topic_names.push(resolved.as_ref().ok().map(|t| t.name.clone()));
        let partitions = match (acks, resolved) {
            (-1..=1, Ok(topic)) => {
                let target = TopicAppend {
                    broker,
                    topic: &topic,
                    topic_index,
                    transactional_id,
                    adds_partition,
                    acks,
                    version,
                    faults: faults.as_ref(),
                };
                target.append_all(&data.partition_data, &mut waits)
            }
            (-1..=1, Err(error)) => data
                .partition_data
                .iter()
                .map(|p| partition_error(p.index, error, no_transactional_id.clone()))
                .collect(),
            _ => data
                .partition_data
                .iter()
                .map(|p| partition_error(p.index, ResponseError::InvalidRequiredAcks, None))
                .collect(),
        };
        responses.push(
            TopicProduceResponse::default()
                .with_name(data.name.clone())
                .with_topic_id(data.topic_id)
                .with_partition_responses(partitions),
        );
    }
    let throttle_ms = record_quota(ctx, &request);
    if acks == 0 {
        close_if_failed(ctx, &responses);
        return Box::pin(std::future::ready(None));
    }
    let timeout_ms = u64::try_from(request.timeout_ms.max(0))
        .unwrap_or(0)
        .min(broker.config.limits.produce_timeout_ms_max);
    Box::pin(answer(
        Arc::clone(broker),
        version,
        responses,
        topic_names,
        waits,
        (acks, Duration::from_millis(timeout_ms)),
        throttle_ms,
    ))
}

/// Counts the request's record bytes against the user's or client's
/// `producer_byte_rate`; the throttle time (0 within the quota), which also mutes the
/// connection for that long.
fn record_quota(ctx: &super::RequestContext, request: &ProduceRequest) -> i32 {
    let manager = &ctx.broker.quotas.produce;
    let Some(applied) = ctx.quota(manager) else {
        return 0;
    };
    let bytes: usize = request
        .topic_data
        .iter()
        .flat_map(|t| &t.partition_data)
        .filter_map(|p| p.records.as_ref().map(bytes::Bytes::len))
        .sum();
    #[allow(clippy::cast_precision_loss)]
    let throttle_ms = manager.record(
        &applied,
        bytes as f64,
        crate::client_quota_manager::now_ms(),
    );
    ctx.throttle(throttle_ms);
    throttle_ms
}

/// A request carrying transactional batches needs a transactional id, and WRITE on it;
/// without either every partition is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
/// as Kafka's `handleProduceRequest` answers the whole request. A transactional batch with
/// no transactional id would open a transaction no coordinator owns: nothing would ever
/// end it, and read_committed consumers would stop at it for good.
fn may_use_transactional_id(ctx: &super::RequestContext, request: &ProduceRequest) -> bool {
    if !has_transactional_records(request) {
        return true;
    }
    request.transactional_id.as_ref().is_some_and(|id| {
        ctx.authorize(
            AclOperation::Write,
            ResourceType::TransactionalId,
            id.as_str(),
        )
    })
}

/// Whether any batch of the request is transactional (Kafka's
/// `ProduceRequest.hasTransactionalRecords`); reads batch headers only.
fn has_transactional_records(request: &ProduceRequest) -> bool {
    request
        .topic_data
        .iter()
        .flat_map(|t| &t.partition_data)
        .filter_map(|p| p.records.as_ref())
        .any(|records| {
            logbook_storage::record_batch::iter_headers(records)
                .any(|(_, header)| header.is_transactional())
        })
}

/// acks=0 gets no answer: Kafka closes the connection of a failed acks=0 request, so the
/// client hears of the failure this way, and refreshes its metadata.
fn close_if_failed(ctx: &super::RequestContext, responses: &[TopicProduceResponse]) {
    let mut partitions = responses.iter().flat_map(|t| &t.partition_responses);
    if partitions.any(|p| p.error_code != errors::NONE) {
        ctx.close_connection();
    }
}

/// One topic of a Produce request, resolved: where its partitions' appends go.
struct TopicAppend<'a> {
    broker: &'a Broker,
    topic: &'a Topic,
    topic_index: usize,
    transactional_id: Option<&'a str>,
    adds_partition: bool,
    acks: i16,
    /// The request's version.
    version: i16,
    /// The fault injector and this request's scope, when faults are armed.
    faults: Option<&'a (
        &'a crate::fault_injector::FaultInjector,
        crate::fault_injector::FaultScope,
    )>,
}

impl TopicAppend<'_> {
    /// Appends each partition's records in request order; the answers, and in `waits` the
    /// appends acks=all must wait for.
    fn append_all(
        &self,
        partition_data: &[PartitionProduceData],
        waits: &mut Vec<DurableWait>,
    ) -> Vec<PartitionProduceResponse> {
        partition_data
            .iter()
            .enumerate()
            .map(|(partition_index, p)| {
                if let Some(error) = self
                    .faults
                    .and_then(|(f, scope)| f.partition_error(scope, &self.topic.name, p.index))
                {
                    return partition_error(p.index, error, None);
                }
                let verification = self
                    .transactional_id
                    .map(|transactional_id| TxnVerification {
                        transactional_id,
                        adds_partition: self.adds_partition,
                        abortable: self.version >= TRANSACTION_ABORTABLE_VERSION,
                    });
                let (response, pending) =
                    append_partition(self.broker, self.topic, p, verification.as_ref(), self.acks);
                if let Some(pending) = pending {
                    waits.push(DurableWait {
                        topic_index: self.topic_index,
                        partition_index,
                        pending,
                    });
                }
                response
            })
            .collect()
    }
}

/// The answer of a Produce request once its appends are done: within `timeout`, after every
/// append in `waits` is committed (acks=all) or held by its leader (acks=1), or failed; then
/// the current leaders of partitions answered NOT_LEADER (KIP-951).
async fn answer(
    broker: Arc<Broker>,
    version: i16,
    mut responses: Vec<TopicProduceResponse>,
    topic_names: Vec<Option<String>>,
    waits: Vec<DurableWait>,
    (acks, timeout): (i16, Duration),
    throttle_ms: i32,
) -> Option<crate::handlers::Response> {
    if !waits.is_empty() {
        let pending = waits.iter().map(|w| &w.pending);
        // acks=all waits for the ISR (the high watermark); acks=1 for the leader's own copy
        // (its fsync, so a single node's answer never precedes the records' visibility).
        let results = if acks == -1 {
            ReplicaManager::wait_for_acks_all(pending, timeout).await
        } else {
            ReplicaManager::wait_for_acks_leader(pending, timeout).await
        };
        for (w, result) in waits.iter().zip(results) {
            if let Err(e) = result {
                let p = &mut responses[w.topic_index].partition_responses[w.partition_index];
                p.error_code = errors::replication_error(&e).code();
                p.error_message = Some(StrBytes::from_string(e.to_string()));
            }
        }
    }
    if version >= CURRENT_LEADER_VERSION {
        fill_current_leaders(&broker, &mut responses, &topic_names);
    }
    Some(
        ResponseKind::Produce(
            ProduceResponse::default()
                .with_responses(responses)
                .with_throttle_time_ms(throttle_ms),
        )
        .into(),
    )
}
