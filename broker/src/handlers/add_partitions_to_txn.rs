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

use crate::broker::Broker;
use crate::coordinator::transaction::TxnError;
use crate::errors;
use crate::handlers::ResponseFuture;

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
    Box::pin(async move {
        let mut response = AddPartitionsToTxnResponse::default();
        if version < BATCHED_VERSION {
            response.results_by_topic_v3_and_below = process(
                &broker,
                request.v3_and_below_transactional_id.as_str(),
                request.v3_and_below_producer_id.0,
                request.v3_and_below_producer_epoch,
                false,
                &request.v3_and_below_topics,
                version,
            )
            .await;
        } else {
            for txn in &request.transactions {
                let topic_results = process(
                    &broker,
                    txn.transactional_id.as_str(),
                    txn.producer_id.0,
                    txn.producer_epoch,
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

/// One transaction's partitions: UNKNOWN_TOPIC_OR_PARTITION for those that do not exist
/// and OPERATION_NOT_ATTEMPTED for the others (as Kafka), else the coordinator's answer.
async fn process(
    broker: &Broker,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    verify_only: bool,
    topics: &[AddPartitionsToTxnTopic],
    version: i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let fenced_as_epoch = version < PRODUCER_FENCED_VERSION;
    let batched = version >= BATCHED_VERSION;
    // The batched form adds only for a partition leader serving a transaction protocol v2
    // Produce (KIP-890 part 2: its implicit add); the client form is protocol v1.
    let client_transaction_version = if batched {
        crate::coordinator::transaction::metadata::TRANSACTION_VERSION_2
    } else {
        0
    };
    let mut partitions = Vec::new();
    let mut unknown = Vec::new();
    for topic in topics {
        let known = broker.topics.get(topic.name.0.as_str());
        for p in &topic.partitions {
            let tp = (topic.name.0.to_string(), *p);
            if known
                .as_ref()
                .is_some_and(|t| (0..t.partition_count).contains(p))
            {
                partitions.push(tp);
            } else {
                unknown.push(tp);
            }
        }
    }
    let outcomes: Vec<((String, i32), Option<TxnError>)> = if !unknown.is_empty() {
        let not_attempted = partitions
            .into_iter()
            .map(|tp| (tp, Some(TxnError::OperationNotAttempted)));
        unknown
            .into_iter()
            .map(|tp| (tp, Some(TxnError::UnknownTopicOrPartition)))
            .chain(not_attempted)
            .collect()
    } else if verify_only {
        partitions
            .into_iter()
            .map(|tp| {
                let r = broker
                    .transactions
                    .verify_local_partition(transactional_id, producer_id, producer_epoch, &tp)
                    .err();
                (tp, r)
            })
            .collect()
    } else {
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
        partitions.into_iter().map(|tp| (tp, result)).collect()
    };
    let outcome = |tp: &(String, i32)| outcomes.iter().find(|(p, _)| p == tp).and_then(|(_, e)| *e);
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
                            let e = outcome(&(topic.name.0.to_string(), *p));
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(*p)
                                .with_partition_error_code(e.map_or(errors::NONE, |e| {
                                    errors::txn_error(&e, fenced_as_epoch).code()
                                }))
                        })
                        .collect(),
                )
        })
        .collect()
}
