//! DescribeTransactions (API key 65): a transactional id's state, producer id and epoch,
//! timeout, start time and partitions (`kafka-transactions.sh describe`).

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::authorizer::{AclOperation, ResourceType};
use crate::errors;
use kafka_protocol::ResponseError;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

/// Answers DescribeTransactions.
#[must_use]
pub fn handle(
    ctx: &super::RequestContext,
    request: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let states = request
        .transactional_ids
        .iter()
        .map(|id| {
            // An error leaves the other fields at the schema's defaults (producer id, epoch
            // and start time 0), as Kafka answers them.
            let state = TransactionState::default().with_transactional_id(id.clone());
            if !ctx.authorize(AclOperation::Describe, ResourceType::TransactionalId, id) {
                return state
                    .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
            }
            match ctx.broker.transactions.describe(id.as_str()) {
                Err(e) => state.with_error_code(errors::txn_error(&e, false).code()),
                Ok(m) => {
                    let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                    for (topic, p) in &m.partitions {
                        topics.entry(topic.clone()).or_default().push(*p);
                    }
                    state
                        .with_transaction_state(StrBytes::from_static_str(m.state.name()))
                        .with_transaction_timeout_ms(m.timeout_ms)
                        .with_transaction_start_time_ms(m.start_ms)
                        .with_producer_id(ProducerId(m.producer_id))
                        .with_producer_epoch(m.producer_epoch)
                        .with_topics(
                            topics
                                .into_iter()
                                // Only the topics the sender may DESCRIBE.
                                .filter(|(topic, _)| {
                                    ctx.authorize(
                                        AclOperation::Describe,
                                        ResourceType::Topic,
                                        topic,
                                    )
                                })
                                .map(|(topic, partitions)| {
                                    TopicData::default()
                                        .with_topic(StrBytes::from_string(topic).into())
                                        .with_partitions(partitions)
                                })
                                .collect(),
                        )
                }
            }
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}
