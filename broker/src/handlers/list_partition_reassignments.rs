//! ListPartitionReassignments (API key 46, KIP-455): the partitions being reassigned, with
//! their replicas and the replicas joining and leaving (`kafka-reassign-partitions.sh
//! --verify`, `kafka-topics.sh --describe`), read from this broker's metadata image.

use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;
use logbook_metadata::{MetadataImage, PartitionRegistration};

use super::RequestContext;
use crate::authorizer::AclOperation;

/// Versions served (Kafka 4.x serves 0).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 0 };

fn ids(list: &[i32]) -> Vec<BrokerId> {
    list.iter().copied().map(BrokerId).collect()
}

fn ongoing(index: i32, partition: &PartitionRegistration) -> OngoingPartitionReassignment {
    OngoingPartitionReassignment::default()
        .with_partition_index(index)
        .with_replicas(ids(&partition.replicas))
        .with_adding_replicas(ids(&partition.adding_replicas))
        .with_removing_replicas(ids(&partition.removing_replicas))
}

/// `topic`'s partitions (all, or `wanted`) being reassigned; `None` for an unknown topic.
fn topic_reassignments(
    image: &MetadataImage,
    topic: &str,
    wanted: Option<&[i32]>,
) -> Option<OngoingTopicReassignment> {
    let image_topic = image.topic(topic)?;
    let partitions: Vec<OngoingPartitionReassignment> = (0..)
        .zip(&image_topic.partitions)
        .filter(|(index, _)| wanted.is_none_or(|w| w.contains(index)))
        .filter(|(_, p)| p.is_reassigning())
        .map(|(index, p)| ongoing(index, p))
        .collect();
    (!partitions.is_empty()).then(|| {
        OngoingTopicReassignment::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
            .with_partitions(partitions)
    })
}

/// Answers a ListPartitionReassignments request: as Kafka's controller, only partitions
/// with a reassignment in progress are listed; unknown topics and partitions are left out.
pub fn handle(
    ctx: &RequestContext,
    request: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    if !ctx.authorize_cluster(AclOperation::Describe) {
        return ListPartitionReassignmentsResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
            .with_error_message(Some(StrBytes::from_static_str(
                super::acls::CLUSTER_AUTHORIZATION_FAILED,
            )));
    }
    let Some(cluster) = ctx.broker.topics.cluster() else {
        return ListPartitionReassignmentsResponse::default()
            .with_error_code(ResponseError::NotController.code());
    };
    let image = cluster.metadata.image();
    let topics = match &request.topics {
        None => {
            let mut names: Vec<String> = image.topics().map(|t| t.name.clone()).collect();
            names.sort();
            names
                .iter()
                .filter_map(|name| topic_reassignments(&image, name, None))
                .collect()
        }
        Some(topics) => topics
            .iter()
            .filter_map(|t| {
                topic_reassignments(&image, t.name.as_str(), Some(&t.partition_indexes))
            })
            .collect(),
    };
    ListPartitionReassignmentsResponse::default().with_topics(topics)
}
