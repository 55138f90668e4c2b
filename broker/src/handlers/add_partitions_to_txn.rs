//! AddPartitionsToTxn (API key 24): a transactional producer names the partitions it is
//! about to write, so EndTxn knows where to write markers. v0–v3 are the client's form
//! (one transaction); v4+ are the batched broker form (KIP-890), where `verify_only`
//! asks whether the partitions are already in the transaction without adding them, and
//! an add is a partition leader's implicit add for a protocol v2 Produce. A broker answers
//! for its own coordinator shards only: nothing here is forwarded.
//! State lives in the `TransactionCoordinator`; this file translates.

use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ResponseKind,
};
use kafka_protocol::protocol::VersionRange;

use crate::authorizer::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::transaction::TxnError;
use crate::errors;
use crate::handlers::ResponseFuture;
use kafka_protocol::ResponseError;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

/// First version that knows PRODUCER_FENCED.
const PRODUCER_FENCED_VERSION: i16 = 2;
/// First version of the batched broker form.
const BATCHED_VERSION: i16 = 4;

/// Adds (or verifies) the partitions and answers once the change is durable.
pub fn handle(ctx: &super::RequestContext, request: AddPartitionsToTxnRequest) -> ResponseFuture {
    let broker = Arc::clone(&ctx.broker);
    let version = ctx.api_version;
    // The batched form comes from brokers only: CLUSTER_ACTION, or nothing is done.
    if version >= BATCHED_VERSION && !ctx.authorize_cluster(AclOperation::ClusterAction) {
        let response = AddPartitionsToTxnResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
        return super::ready(ResponseKind::AddPartitionsToTxn(response));
    }
    let denied = (version < BATCHED_VERSION).then(|| client_form_denials(ctx, &request));
    Box::pin(async move {
        let mut response = AddPartitionsToTxnResponse::default();
        if version < BATCHED_VERSION {
            response.results_by_topic_v3_and_below = process(
                &broker,
                denied.as_ref(),
                Producer {
                    transactional_id: request.v3_and_below_transactional_id.as_str(),
                    producer_id: request.v3_and_below_producer_id.0,
                    producer_epoch: request.v3_and_below_producer_epoch,
                },
                false,
                &request.v3_and_below_topics,
                version,
            )
            .await;
        } else {
            for txn in &request.transactions {
                let topic_results = process(
                    &broker,
                    None,
                    Producer {
                        transactional_id: txn.transactional_id.as_str(),
                        producer_id: txn.producer_id.0,
                        producer_epoch: txn.producer_epoch,
                    },
                    txn.verify_only,
                    &txn.topics,
                    version,
                )
                .await;
                response.results_by_transaction.push(
                    AddPartitionsToTxnResult::default()
                        .with_transactional_id(txn.transactional_id.clone())
                        .with_topic_results(topic_results),
                );
            }
        }
        Some(ResponseKind::AddPartitionsToTxn(response).into())
    })
}

/// The client form needs WRITE on the transactional id and on each topic (an internal
/// topic is never writable by a client). Checked before the request is processed, as
/// the authorizer belongs to the request's context, not to the future answering it.
fn client_form_denials(ctx: &super::RequestContext, request: &AddPartitionsToTxnRequest) -> Denied {
    let transactional_id = request.v3_and_below_transactional_id.as_str();
    if !ctx.authorize(
        AclOperation::Write,
        ResourceType::TransactionalId,
        transactional_id,
    ) {
        return Denied::TransactionalId;
    }
    Denied::Topics(
        request
            .v3_and_below_topics
            .iter()
            .map(|t| t.name.0.as_str())
            .filter(|name| {
                crate::topics::is_internal(name)
                    || !ctx.authorize(AclOperation::Write, ResourceType::Topic, name)
            })
            .map(str::to_string)
            .collect(),
    )
}

/// One transaction's partitions: UNKNOWN_TOPIC_OR_PARTITION for those that do not exist
/// and OPERATION_NOT_ATTEMPTED for the others (as Kafka), else the coordinator's answer.
async fn process(
    broker: &Broker,
    denied: Option<&Denied>,
    producer: Producer<'_>,
    verify_only: bool,
    topics: &[AddPartitionsToTxnTopic],
    version: i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let Producer {
        transactional_id,
        producer_id,
        producer_epoch,
    } = producer;
    let fenced_as_epoch = version < PRODUCER_FENCED_VERSION;
    let batched = version >= BATCHED_VERSION;
    // The batched form adds only for a partition leader serving a transaction protocol v2
    // Produce (KIP-890 part 2: its implicit add); the client form is protocol v1.
    let client_transaction_version = if batched {
        crate::coordinator::transaction::metadata::TRANSACTION_VERSION_2
    } else {
        0
    };
    let code = |e: TxnError| errors::txn_error(&e, fenced_as_epoch).code();
    if matches!(denied, Some(Denied::TransactionalId)) {
        let refused = ResponseError::TransactionalIdAuthorizationFailed.code();
        return results(topics, |_| refused);
    }
    let sorted = sort_partitions(broker, denied, topics);
    let outcomes: Vec<((String, i32), i16)> =
        if !sorted.unknown.is_empty() || !sorted.unauthorized.is_empty() {
            refused_outcomes(sorted, code)
        } else if verify_only {
            sorted
                .partitions
                .into_iter()
                .map(|tp| {
                    let r = broker
                        .transactions
                        .verify_local_partition(transactional_id, producer_id, producer_epoch, &tp)
                        .err();
                    (tp, r.map_or(errors::NONE, code))
                })
                .collect()
        } else {
            let partitions = sorted.partitions;
            let result = broker
                .transactions
                .add_partitions(
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    &partitions,
                    client_transaction_version,
                )
                .await
                .err();
            let result = result.map_or(errors::NONE, code);
            partitions.into_iter().map(|tp| (tp, result)).collect()
        };
    results(topics, |tp| {
        outcomes
            .iter()
            .find(|(p, _)| p == tp)
            .map_or(errors::NONE, |(_, e)| *e)
    })
}

/// Any refused partition fails the whole transaction's request, as in Kafka: the refused
/// ones answer their error, the others OPERATION_NOT_ATTEMPTED, and nothing is added.
fn refused_outcomes(
    sorted: SortedPartitions,
    code: impl Fn(TxnError) -> i16,
) -> Vec<((String, i32), i16)> {
    let not_attempted = sorted
        .partitions
        .into_iter()
        .map(|tp| (tp, code(TxnError::OperationNotAttempted)));
    let refused = ResponseError::TopicAuthorizationFailed.code();
    sorted
        .unauthorized
        .into_iter()
        .map(|tp| (tp, refused))
        .chain(
            sorted
                .unknown
                .into_iter()
                .map(|tp| (tp, code(TxnError::UnknownTopicOrPartition))),
        )
        .chain(not_attempted)
        .collect()
}

/// A transaction's partitions sorted before the coordinator sees any: one refused
/// partition means none is attempted, so all must be known first.
struct SortedPartitions {
    /// Partitions that exist and may be written.
    partitions: Vec<(String, i32)>,
    /// Partitions of unknown topics, or past their topic's partition count.
    unknown: Vec<(String, i32)>,
    /// Partitions of topics without WRITE (client form).
    unauthorized: Vec<(String, i32)>,
}

/// Sorts `topics`' partitions into writable, unknown and unauthorized ones, in request
/// order.
fn sort_partitions(
    broker: &Broker,
    denied: Option<&Denied>,
    topics: &[AddPartitionsToTxnTopic],
) -> SortedPartitions {
    let mut partitions = Vec::new();
    let mut unknown = Vec::new();
    let mut unauthorized = Vec::new();
    for topic in topics {
        let known = broker.topics.get(topic.name.0.as_str());
        let refused =
            matches!(denied, Some(Denied::Topics(names)) if names.contains(topic.name.0.as_str()));
        for p in &topic.partitions {
            let tp = (topic.name.0.to_string(), *p);
            if refused {
                unauthorized.push(tp);
            } else if known
                .as_ref()
                .is_some_and(|t| (0..t.partition_count).contains(p))
            {
                partitions.push(tp);
            } else {
                unknown.push(tp);
            }
        }
    }
    SortedPartitions {
        partitions,
        unknown,
        unauthorized,
    }
}

/// The transactional producer a request speaks for.
struct Producer<'a> {
    transactional_id: &'a str,
    producer_id: i64,
    producer_epoch: i16,
}

/// What the client form may not do.
enum Denied {
    /// No WRITE on the transactional id: every partition is refused.
    TransactionalId,
    /// The topics without WRITE (internal ones included).
    Topics(std::collections::HashSet<String>),
}

/// The answer for `topics`, each partition with the code `code_of` gives it.
fn results(
    topics: &[AddPartitionsToTxnTopic],
    code_of: impl Fn(&(String, i32)) -> i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|topic| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(topic.name.clone())
                .with_results_by_partition(
                    topic
                        .partitions
                        .iter()
                        .map(|p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(*p)
                                .with_partition_error_code(code_of(&(topic.name.0.to_string(), *p)))
                        })
                        .collect(),
                )
        })
        .collect()
}
