//! ElectLeaders (API key 43): preferred or unclean leader election, answered as a single
//! node answers it. This broker is every partition's only replica, preferred and current
//! leader, so an election is never needed (ELECTION_NOT_NEEDED); with no partitions named
//! (null) every topic is listed and, as Kafka's controller does, the partitions that
//! need no election are left out of its results.

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::broker::Broker;

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

/// Answers an ElectLeaders request.
pub fn handle(ctx: &RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse {
    let broker = &ctx.broker;
    if ctx.api_version >= 1 && !ELECTION_TYPES.contains(&request.election_type) {
        return ElectLeadersResponse::default()
            .with_error_code(ResponseError::InvalidRequest.code());
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
