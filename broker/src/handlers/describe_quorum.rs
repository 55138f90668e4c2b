//! DescribeQuorum (API key 55, KIP-595/KIP-836): the replication of the metadata log
//! (`__cluster_metadata-0`) as the active controller sees it, which
//! `kafka-metadata-quorum.sh describe --status | --replication` prints. As a KRaft broker
//! forwards it, this broker asks the active controller
//! (`QuorumController::describe_quorum`). A request naming another partition gets
//! UNKNOWN_TOPIC_OR_PARTITION for it, as Kafka's Raft client answers.

use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{
    BrokerId, DescribeQuorumRequest, DescribeQuorumResponse, TopicName,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;
use logbook_controller::quorum::{QuorumDescription, ReplicaProgress};

use super::RequestContext;
use crate::authorizer::AclOperation;
use crate::errors;

/// Versions served (Kafka 4.x serves 0-2).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

/// The metadata log's topic (KRaft's name).
const METADATA_TOPIC: &str = "__cluster_metadata";

/// The listener name voters' endpoints are shown under (KRaft's conventional name).
const CONTROLLER_LISTENER: &str = "CONTROLLER";

/// Answers a DescribeQuorum request.
pub fn handle(ctx: &RequestContext, request: DescribeQuorumRequest) -> DescribeQuorumResponse {
    let version = ctx.api_version;
    if !ctx.authorize_cluster(AclOperation::Describe) {
        return DescribeQuorumResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str(
                super::acls::CLUSTER_AUTHORIZATION_FAILED,
            )));
    }
    let asks_metadata_log = request.topics.len() == 1
        && request.topics[0].topic_name.as_str() == METADATA_TOPIC
        && request.topics[0].partitions.len() == 1
        && request.topics[0].partitions[0].partition_index == 0;
    if !asks_metadata_log {
        let topics = request
            .topics
            .iter()
            .map(|t| {
                TopicData::default()
                    .with_topic_name(t.topic_name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                PartitionData::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                            })
                            .collect(),
                    )
            })
            .collect();
        return DescribeQuorumResponse::default().with_topics(topics);
    }
    let outcome = ctx
        .broker
        .topics
        .cluster()
        .ok_or(ResponseError::UnsupportedVersion)
        .and_then(|cluster| {
            let controller = cluster.controller().map_err(|e| errors::quorum_error(&e))?;
            cluster
                .block_on(controller.client().describe_quorum())
                .ok_or(ResponseError::RequestTimedOut)?
                .map_err(|e| errors::quorum_error(&e))
        });
    match outcome {
        Ok(description) => describe(&description, version),
        Err(error) => {
            tracing::info!(?error, "DescribeQuorum failed");
            let response = DescribeQuorumResponse::default().with_error_code(error.code());
            if version >= 2 {
                response.with_error_message(Some(StrBytes::from_string(format!("{error:?}"))))
            } else {
                response
            }
        }
    }
}

fn replica(progress: &ReplicaProgress, version: i16) -> ReplicaState {
    let state = ReplicaState::default()
        .with_replica_id(BrokerId(progress.node_id))
        .with_log_end_offset(progress.log_end_offset);
    if version >= 1 {
        state
            .with_last_fetch_timestamp(progress.last_fetch_timestamp)
            .with_last_caught_up_timestamp(progress.last_caught_up_timestamp)
    } else {
        state
    }
}

fn describe(description: &QuorumDescription, version: i16) -> DescribeQuorumResponse {
    let partition = PartitionData::default()
        .with_partition_index(0)
        .with_leader_id(BrokerId(description.leader_id))
        .with_leader_epoch(description.leader_epoch)
        .with_high_watermark(description.high_watermark)
        .with_current_voters(
            description
                .voters
                .iter()
                .map(|v| replica(v, version))
                .collect(),
        )
        .with_observers(
            description
                .observers
                .iter()
                .map(|o| replica(o, version))
                .collect(),
        );
    let response = DescribeQuorumResponse::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
        .with_partitions(vec![partition])]);
    if version < 2 {
        return response;
    }
    let nodes = description
        .endpoints
        .iter()
        .map(|(id, host, port)| {
            Node::default()
                .with_node_id(BrokerId(*id))
                .with_listeners(vec![Listener::default()
                    .with_name(StrBytes::from_static_str(CONTROLLER_LISTENER))
                    .with_host(StrBytes::from_string(host.clone()))
                    .with_port(*port)])
        })
        .collect();
    response.with_nodes(nodes)
}
