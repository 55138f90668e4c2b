//! ElectLeaders (API key 43): preferred or unclean leader election
//! (`kafka-leader-election.sh`), run by the active controller, which writes the partition
//! changes to the metadata log. With no partitions named (null) every topic is listed and,
//! as Kafka's controller does, the partitions that needed no election are left out of its
//! results. A broker without a controller (unit tests) answers as the lone replica of
//! every partition: an election is never needed.

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use logbook_controller::quorum::QuorumError;
use logbook_metadata::Election;

use super::RequestContext;
use crate::authorizer::AclOperation;
use crate::broker::Broker;
use crate::cluster::ClusterContext;
use crate::errors;
use kafka_protocol::ResponseError;

/// Versions served (Kafka 4.x serves 0-2).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

/// Kafka's `ElectionType`: PREFERRED (0) and UNCLEAN (1).
const ELECTION_TYPES: std::ops::RangeInclusive<i8> = 0..=1;

/// The outcome of electing a leader for one partition, with Kafka's message.
fn elect(broker: &Broker, topic: &str, partition: i32) -> (ResponseError, String) {
    let Some(meta) = broker.topics.get(topic) else {
        return (
            ResponseError::UnknownTopicOrPartition,
            format!("No such topic as {topic}"),
        );
    };
    if partition < 0 || partition >= meta.partition_count {
        return (
            ResponseError::UnknownTopicOrPartition,
            format!("No such partition as {topic}-{partition}"),
        );
    }
    let online = broker
        .replicas
        .partition(topic, partition)
        .is_some_and(|p| p.offline_reason().is_none());
    if online {
        (
            ResponseError::ElectionNotNeeded,
            "Leader election not needed for topic partition.".to_owned(),
        )
    } else {
        (
            ResponseError::PreferredLeaderNotAvailable,
            format!("Failed to elect leader for partition {topic}-{partition}: the only replica is offline"),
        )
    }
}

fn result(partition: i32, (error, message): (ResponseError, String)) -> PartitionResult {
    PartitionResult::default()
        .with_partition_id(partition)
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}

/// The answer refusing the whole request with `error`: at the top (v1+) and on every
/// named partition.
fn refused(request: &ElectLeadersRequest, error: ResponseError) -> ElectLeadersResponse {
    let results = request
        .topic_partitions
        .iter()
        .flatten()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    PartitionResult::default()
                        .with_partition_id(*p)
                        .with_error_code(error.code())
                })
                .collect();
            ReplicaElectionResult::default()
                .with_topic(t.topic.clone())
                .with_partition_result(partitions)
        })
        .collect();
    ElectLeadersResponse::default()
        .with_error_code(error.code())
        .with_replica_election_results(results)
}

/// Answers an ElectLeaders request: through the controller when this broker has one
/// (every broker started by `server`), else as a lone replica (see [`elect`]).
pub fn handle(ctx: &RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse {
    let broker = &ctx.broker;
    if ctx.api_version >= 1 && !ELECTION_TYPES.contains(&request.election_type) {
        return ElectLeadersResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code());
    }
    if !ctx.authorize_cluster(AclOperation::Alter) {
        return refused(&request, ResponseError::ClusterAuthorizationFailed);
    }
    if let Some(cluster) = broker.topics.cluster() {
        return through_controller(broker, cluster, &request);
    }
    let results = match request.topic_partitions {
        None => {
            let mut all = broker.topics.all();
            all.sort_by(|a, b| a.name.cmp(&b.name));
            all.iter()
                .map(|topic| {
                    let partitions = (0..topic.partition_count)
                        .map(|p| (p, elect(broker, &topic.name, p)))
                        .filter(|(_, (error, _))| *error != ResponseError::ElectionNotNeeded)
                        .map(|(p, outcome)| result(p, outcome))
                        .collect();
                    ReplicaElectionResult::default()
                        .with_topic(TopicName(StrBytes::from_string(topic.name.clone())))
                        .with_partition_result(partitions)
                })
                .collect()
        }
        Some(topics) => topics
            .into_iter()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| result(*p, elect(broker, t.topic.as_str(), *p)))
                    .collect();
                ReplicaElectionResult::default()
                    .with_topic(t.topic)
                    .with_partition_result(partitions)
            })
            .collect(),
    };
    ElectLeadersResponse::default().with_replica_election_results(results)
}

/// Kafka's `ElectionType` as the controller's election: v0 has no field and means
/// PREFERRED.
fn election(request: &ElectLeadersRequest) -> Election {
    if request.election_type == 1 {
        Election::Unclean
    } else {
        Election::Preferred
    }
}

/// The election as the active controller runs it (Kafka's `ReplicationControlManager.electLeaders`):
/// per partition the new leader, or ELECTION_NOT_NEEDED / PREFERRED_LEADER_NOT_AVAILABLE /
/// ELIGIBLE_LEADERS_NOT_AVAILABLE / UNKNOWN_TOPIC_OR_PARTITION. With no partitions named,
/// every topic is listed with only the partitions an election was needed for. The answer
/// waits until this broker's metadata shows the new leaders, so a Metadata request sent
/// right after it sees them.
fn through_controller(
    broker: &Broker,
    cluster: &ClusterContext,
    request: &ElectLeadersRequest,
) -> ElectLeadersResponse {
    let named: Option<Vec<(String, i32)>> = request.topic_partitions.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.topic.as_str().to_string(), *p))
            })
            .collect()
    });
    let outcome = cluster
        .controller()
        .map_err(|e| errors::quorum_error(&e))
        .and_then(|controller| {
            cluster
                .block_on(controller.elect_leaders(election(request), named.clone()))
                .ok_or(ResponseError::RequestTimedOut)?
                .map_err(|e| errors::quorum_error(&e))
        });
    let results = match outcome {
        Ok(results) => results,
        Err(error) => {
            tracing::info!(?error, "ElectLeaders failed");
            return ElectLeadersResponse::default().with_error_code(error.code());
        }
    };
    if results.iter().any(|(_, r)| r.is_ok()) && !cluster.wait_for_controller_offset() {
        tracing::warn!("ElectLeaders: this broker's metadata did not catch up in time");
    }
    let order = topic_order(broker, request);
    let results = results_by_topic(order, results, named.is_none(), |t| {
        broker.topics.get(t).is_some()
    });
    ElectLeadersResponse::default().with_replica_election_results(results)
}

/// The topics of the answer, each once: in the request's order when it named partitions
/// (a topic named twice, not necessarily in a row, where it came first), by name
/// otherwise, as Kafka's `ElectLeaders` answers.
fn topic_order(broker: &Broker, request: &ElectLeadersRequest) -> Vec<String> {
    let mut order: Vec<String> = match &request.topic_partitions {
        Some(topics) => topics
            .iter()
            .map(|t| t.topic.as_str().to_string())
            .collect(),
        None => {
            let mut all: Vec<String> = broker
                .topics
                .all()
                .into_iter()
                .map(|t| t.name.clone())
                .collect();
            all.sort();
            all
        }
    };
    // A topic named twice (not necessarily in a row) is answered once, where it came first.
    let mut seen = std::collections::HashSet::new();
    order.retain(|t| seen.insert(t.clone()));
    order
}

/// The controller's per-partition outcomes grouped under `order`'s topics. With no
/// partitions named (`all`), partitions that needed no election are left out, as Kafka's
/// controller does; a named one answers ELECTION_NOT_NEEDED with Kafka's message, and an
/// unknown one UNKNOWN_TOPIC_OR_PARTITION with the message of Kafka's controller, which
/// says which of the two is missing (`topic_exists`).
fn results_by_topic(
    order: Vec<String>,
    results: Vec<(
        (String, i32),
        Result<logbook_metadata::BrokerId, QuorumError>,
    )>,
    all: bool,
    topic_exists: impl Fn(&str) -> bool,
) -> Vec<ReplicaElectionResult> {
    let mut by_topic: std::collections::HashMap<String, Vec<PartitionResult>> =
        order.iter().map(|t| (t.clone(), Vec::new())).collect();
    for ((topic, partition), elected) in results {
        let outcome = match elected {
            Ok(_) => (0, None),
            Err(QuorumError::ElectionNotNeeded) if all => continue,
            Err(QuorumError::ElectionNotNeeded) => (
                ResponseError::ElectionNotNeeded.code(),
                Some("Leader election not needed for topic partition.".to_owned()),
            ),
            Err(QuorumError::UnknownTopicOrPartition { .. }) => (
                ResponseError::UnknownTopicOrPartition.code(),
                Some(if topic_exists(&topic) {
                    format!("No such partition as {topic}-{partition}")
                } else {
                    format!("No such topic as {topic}")
                }),
            ),
            Err(e) => (errors::quorum_error(&e).code(), Some(e.to_string())),
        };
        let entry = PartitionResult::default()
            .with_partition_id(partition)
            .with_error_code(outcome.0)
            .with_error_message(outcome.1.map(StrBytes::from_string));
        by_topic.entry(topic).or_default().push(entry);
    }
    order
        .into_iter()
        .map(|topic| {
            let partitions = by_topic.remove(&topic).unwrap_or_default();
            ReplicaElectionResult::default()
                .with_topic(TopicName(StrBytes::from_string(topic)))
                .with_partition_result(partitions)
        })
        .collect()
}
