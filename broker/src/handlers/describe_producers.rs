//! DescribeProducers (API key 61): the producers a partition's log tracks — epoch, last
//! sequence and timestamp, the coordinator epoch of their last marker and the start of
//! their open transaction — as `kafka-transactions.sh describe-producers` shows them (and
//! as an operator finds a hanging transaction holding the last stable offset back).
//! The state is the log's `ProducerStateManager`, read through the partition.

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::ResponseError;
use logbook_replication::{ActiveProducer, TopicPartition};

use super::RequestContext;
use crate::authorizer::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::errors;

/// Versions served (Kafka 4.x serves 0).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

fn producer_state(p: &ActiveProducer) -> ProducerState {
    ProducerState::default()
        .with_producer_id(ProducerId(p.producer_id))
        .with_producer_epoch(i32::from(p.producer_epoch))
        .with_last_sequence(p.last_sequence)
        .with_last_timestamp(p.last_timestamp)
        .with_coordinator_epoch(p.coordinator_epoch)
        .with_current_txn_start_offset(p.current_txn_start_offset)
}

/// One partition's producers, or the error Kafka's `ReplicaManager.activeProducerState`
/// gives (unknown partition, offline log, ...).
fn describe_partition(broker: &Broker, topic: &str, partition: i32) -> PartitionResponse {
    let response = PartitionResponse::default().with_partition_index(partition);
    let producers = broker
        .replicas
        .get_partition_or_error(
            &TopicPartition {
                topic: topic.to_owned(),
                partition,
            },
            -1,
        )
        .and_then(|p| p.active_producers())
        .map_err(|e| errors::replication_error(&e));
    match producers {
        Ok(producers) => {
            response.with_active_producers(producers.iter().map(producer_state).collect())
        }
        Err(e) => error_response(response, e),
    }
}

fn error_response(response: PartitionResponse, error: ResponseError) -> PartitionResponse {
    response.with_error_code(error.code())
}

/// Answers a DescribeProducers request.
pub fn handle(
    ctx: &RequestContext,
    request: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let broker = &ctx.broker;
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            // READ on the topic, checked before its existence is revealed.
            let readable = ctx.authorize(AclOperation::Read, ResourceType::Topic, &t.name);
            let known = readable && broker.topics.get(t.name.as_str()).is_some();
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&index| {
                    if !readable {
                        error_response(
                            PartitionResponse::default().with_partition_index(index),
                            ResponseError::TopicAuthorizationFailed,
                        )
                    } else if known {
                        describe_partition(broker, t.name.as_str(), index)
                    } else {
                        error_response(
                            PartitionResponse::default().with_partition_index(index),
                            ResponseError::UnknownTopicOrPartition,
                        )
                    }
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}
