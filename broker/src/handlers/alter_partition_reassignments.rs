//! AlterPartitionReassignments (API key 45, KIP-455): moves partition replicas between
//! brokers (`kafka-reassign-partitions.sh --execute` / `--cancel`). The active controller
//! records each target (see `QuorumController::alter_partition_reassignments`); the new
//! replicas then fetch from the leader, join the ISR, and the old ones leave.

use std::collections::HashMap;

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;
use logbook_controller::quorum::{ReassignmentResults, ReassignmentTargets};

use super::RequestContext;
use crate::authorizer::AclOperation;
use crate::cluster::ClusterContext;
use crate::errors;

/// Versions served (Kafka 4.x serves 0-1; v1 adds `AllowReplicationFactorChange`, KIP-860).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

/// A target refused before the controller sees it: the partition, its error code and
/// message.
type Refusal = ((String, i32), (i16, String));

/// Answers an AlterPartitionReassignments request.
pub fn handle(
    ctx: &RequestContext,
    request: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let response = AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(request.allow_replication_factor_change);
    if !ctx.authorize_cluster(AclOperation::Alter) {
        return response
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str(
                super::acls::CLUSTER_AUTHORIZATION_FAILED,
            )));
    }
    let Some(cluster) = ctx.broker.topics.cluster() else {
        return response.with_error_code(ResponseError::NotController.code());
    };
    let image = cluster.metadata.image();
    let (asked, refused) = screen_targets(ctx, &request, &image);
    let results = if asked.is_empty() {
        Vec::new()
    } else {
        match submit_to_controller(cluster, asked) {
            Ok(results) => results,
            Err(error) => {
                tracing::info!(?error, "AlterPartitionReassignments failed");
                return response.with_error_code(error.code());
            }
        }
    };
    if results.iter().any(|(_, r)| r.is_ok()) && !cluster.wait_for_controller_offset() {
        tracing::warn!("AlterPartitionReassignments: this broker's metadata did not catch up");
    }
    let outcomes = partition_outcomes(results, refused);
    response.with_responses(topic_responses(&request, &outcomes))
}

/// Splits the request's targets into those to send to the controller and those refused
/// here: a partition named twice, and (KIP-860) a target changing the replication factor
/// when the client does not allow it. Refusing them here keeps the controller's batch
/// valid for the other partitions.
fn screen_targets(
    ctx: &RequestContext,
    request: &AlterPartitionReassignmentsRequest,
    image: &logbook_metadata::MetadataImage,
) -> (ReassignmentTargets, Vec<Refusal>) {
    // KIP-860: when the client does not allow it (v1+), a target must keep the partition's
    // replication factor. v0 has no such option and always allows the change (the Java
    // client refuses to send `allowReplicationFactorChange=false` at v0), which is how
    // kafka-reassign-partitions.sh raises or lowers a replication factor.
    let keep_factor = ctx.api_version >= 1 && !request.allow_replication_factor_change;
    let mut refused: Vec<Refusal> = Vec::new();
    let mut asked = Vec::new();
    let duplicated = duplicated_partitions(request);
    for topic in &request.topics {
        let name = topic.name.as_str().to_string();
        for p in &topic.partitions {
            let key = (name.clone(), p.partition_index);
            // Two targets for one partition would be two changes computed from the same
            // partition epoch: the controller's batch would be refused on every retry.
            if duplicated.contains(&key) {
                continue;
            }
            if let (true, Some(target)) = (keep_factor, &p.replicas) {
                let current = image
                    .topic(&name)
                    .and_then(|t| t.partition(p.partition_index))
                    .map(|r| r.replicas.len() - r.adding_replicas.len());
                if current.is_some_and(|n| n != target.len()) {
                    refused.push((
                        key,
                        (
                            ResponseError::InvalidReplicationFactor.code(),
                            "The replication factor is changed from the current one, which \
                             this request does not allow."
                                .to_owned(),
                        ),
                    ));
                    continue;
                }
            }
            let target = p
                .replicas
                .as_ref()
                .map(|replicas| replicas.iter().map(|b| b.0).collect());
            asked.push((key, target));
        }
    }
    refused.extend(duplicated.into_iter().map(|key| {
        (
            key,
            (
                ResponseError::InvalidRequest.code(),
                "The partition appears more than once in the request.".to_owned(),
            ),
        )
    }));
    (asked, refused)
}

/// Records the targets through the active controller, local or remote. An error here
/// (no controller, timeout) fails the whole request, as in Kafka, where the controller
/// answers it as one.
fn submit_to_controller(
    cluster: &ClusterContext,
    asked: ReassignmentTargets,
) -> Result<ReassignmentResults, ResponseError> {
    cluster
        .controller()
        .map_err(|e| errors::quorum_error(&e))
        .and_then(|controller| {
            cluster
                .block_on(controller.alter_partition_reassignments(asked))
                .ok_or(ResponseError::RequestTimedOut)?
                .map_err(|e| errors::quorum_error(&e))
        })
}

/// Each partition's error code and message: the controller's verdict, or the refusal
/// made here.
fn partition_outcomes(
    results: ReassignmentResults,
    refused: Vec<Refusal>,
) -> HashMap<(String, i32), (i16, Option<String>)> {
    let mut outcomes: HashMap<(String, i32), (i16, Option<String>)> = results
        .into_iter()
        .map(|(key, result)| {
            let outcome = match result {
                Ok(()) => (0, None),
                Err(e) => (errors::quorum_error(&e).code(), Some(e.to_string())),
            };
            (key, outcome)
        })
        .collect();
    outcomes.extend(
        refused
            .into_iter()
            .map(|(key, (code, message))| (key, (code, Some(message)))),
    );
    outcomes
}

/// The response answers every partition of the request, in its order; one with no
/// outcome (which should not happen) gets UNKNOWN_SERVER_ERROR rather than silence.
fn topic_responses(
    request: &AlterPartitionReassignmentsRequest,
    outcomes: &HashMap<(String, i32), (i16, Option<String>)>,
) -> Vec<ReassignableTopicResponse> {
    request
        .topics
        .iter()
        .map(|topic| {
            let name = topic.name.as_str().to_string();
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let (code, message) = outcomes
                        .get(&(name.clone(), p.partition_index))
                        .cloned()
                        .unwrap_or((ResponseError::UnknownServerError.code(), None));
                    ReassignablePartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                        .with_error_message(message.map(StrBytes::from_string))
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect()
}

/// The (topic, partition) pairs the request names more than once (in one topic entry or
/// across repeated topic entries).
fn duplicated_partitions(
    request: &AlterPartitionReassignmentsRequest,
) -> std::collections::HashSet<(String, i32)> {
    let mut seen = std::collections::HashSet::new();
    let mut duplicated = std::collections::HashSet::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            let key = (topic.name.as_str().to_string(), p.partition_index);
            if !seen.insert(key.clone()) {
                duplicated.insert(key);
            }
        }
    }
    duplicated
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use kafka_protocol::messages::{BrokerId, TopicName};

    use super::*;

    fn topic(name: &'static str, partitions: &[i32]) -> ReassignableTopic {
        ReassignableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str(name)))
            .with_partitions(
                partitions
                    .iter()
                    .map(|p| {
                        ReassignablePartition::default()
                            .with_partition_index(*p)
                            .with_replicas(Some(vec![BrokerId(2), BrokerId(3)]))
                    })
                    .collect(),
            )
    }

    // A partition named twice, in one topic entry or in two entries of the same topic, is
    // found (the wire fuzzer's finding: such a request got UNKNOWN_SERVER_ERROR after the
    // controller's batch was refused on every retry); distinct ones are not.
    #[test]
    fn duplicated_partitions_are_found() {
        let request = AlterPartitionReassignmentsRequest::default().with_topics(vec![
            topic("a", &[0, 1, 0]),
            topic("b", &[0]),
            topic("b", &[1, 0]),
            topic("c", &[0, 1]),
        ]);
        let mut found: Vec<(String, i32)> = duplicated_partitions(&request).into_iter().collect();
        found.sort();
        assert_eq!(found, vec![("a".to_owned(), 0), ("b".to_owned(), 0)]);
    }
}
