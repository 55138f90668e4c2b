//! CreatePartitions (API key 37): grow a topic's partition count (`kafka-topics.sh --alter
//! --partitions`, with `--replica-assignment` for a manual placement of the new ones, which
//! the controller checks). Partitions are never removed.

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use crate::authorizer::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::errors;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 3 };

/// Partitions the whole request would add to existing topics; requests that fail on
/// their own (unknown topic, a count that does not grow) add nothing.
fn requested_partitions(broker: &Broker, request: &CreatePartitionsRequest) -> u64 {
    request
        .topics
        .iter()
        .filter_map(|t| {
            let topic = broker.topics.get(t.name.as_str())?;
            let current = i64::from(topic.partition_count);
            u64::try_from(i64::from(t.count) - current).ok()
        })
        .fold(0_u64, u64::saturating_add)
}

/// Answers a CreatePartitions request.
pub fn handle(
    ctx: &super::RequestContext,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let broker = &ctx.broker;
    // Checked for the whole request before any topic grows, as Kafka's controller refuses
    // an excessively large batch; each topic is checked again as it grows.
    let requested = requested_partitions(broker, &request);
    if let Err(e) = broker.topics.check_request_partitions(requested) {
        tracing::info!(requested, error = %e, "create partitions refused");
        let results = request
            .topics
            .iter()
            .map(|t| {
                CreatePartitionsTopicResult::default()
                    .with_name(t.name.clone())
                    .with_error_code(errors::topic_error(&e).code())
                    .with_error_message(Some(StrBytes::from_string(e.to_string())))
            })
            .collect();
        return CreatePartitionsResponse::default().with_results(results);
    }
    let mut seen = std::collections::HashSet::new();
    let results = request
        .topics
        .iter()
        .map(|t| {
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            if !seen.insert(t.name.as_str().to_string()) {
                return result
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_static_str("duplicate topic in request")));
            }
            if !ctx.authorize(AclOperation::Alter, ResourceType::Topic, &t.name) {
                return result
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                    .with_error_message(Some(StrBytes::from_static_str(
                        "The topic authorization is failed.",
                    )));
            }
            let assignment: Option<Vec<Vec<i32>>> = t.assignments.as_ref().map(|list| {
                list.iter()
                    .map(|p| p.broker_ids.iter().map(|b| b.0).collect())
                    .collect()
            });
            let outcome = tokio::task::block_in_place(|| {
                broker.topics.add_partitions_assigned(
                    t.name.as_str(),
                    t.count,
                    assignment.as_deref(),
                    request.validate_only,
                )
            });
            match outcome {
                Ok(()) => result,
                Err(e) => {
                    tracing::info!(topic = %t.name.as_str(), error = %e, "create partitions refused");
                    result
                        .with_error_code(errors::topic_error(&e).code())
                        .with_error_message(Some(StrBytes::from_string(e.to_string())))
                }
            }
        })
        .collect();
    CreatePartitionsResponse::default().with_results(results)
}
