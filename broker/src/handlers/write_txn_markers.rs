//! WriteTxnMarkers (API key 27): writes commit or abort markers for producers on named
//! partitions. Transaction coordinators on other brokers send it to this partition leader
//! (`coordinator/transaction/markers.rs` appends its own partitions' markers directly); a
//! marker whose coordinator epoch is older than the last one the partition saw for its
//! producer is refused with TRANSACTION_COORDINATOR_FENCED (the producer state's check), so
//! a deposed coordinator cannot end a transaction. Administrators send it too:
//! `Admin.abortTransaction` (KIP-664,
//! `kafka-transactions.sh abort`) aborts a hanging transaction, one whose coordinator has
//! lost track of it, by writing its abort marker here. Each partition is answered once its
//! marker is durable; a marker for `__consumer_offsets` also applies or drops the producer's
//! pending transactional offsets, as Kafka's `onTransactionCompleted` does.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{ResponseKind, WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::ResponseError;
use logbook_replication::{Offset, TopicPartition, TxnResult};

use super::{RequestContext, ResponseFuture};
use crate::authorizer::AclOperation;
use crate::broker::Broker;
use crate::coordinator::GROUP_METADATA_TOPIC_NAME;
use crate::errors;

/// Versions served (Kafka 4.x serves 1; 0 was removed by KIP-896).
pub const VERSIONS: VersionRange = VersionRange { min: 1, max: 1 };

/// How long one marker may take to become durable before its partition is answered
/// REQUEST_TIMED_OUT (the request carries no timeout; this is the admin client's default).
const DURABLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Writes one marker and waits until it is durable.
async fn write_one(
    broker: &Broker,
    topic: &str,
    index: i32,
    marker: &kafka_protocol::messages::write_txn_markers_request::WritableTxnMarker,
) -> Result<(), ResponseError> {
    let topic_partition = TopicPartition {
        topic: topic.to_owned(),
        partition: index,
    };
    let partition = broker
        .replicas
        .get_partition_or_error(&topic_partition, -1)
        .map_err(|e| errors::replication_error(&e))?;
    if topic == GROUP_METADATA_TOPIC_NAME && !broker.groups.accepts_txn_markers(index) {
        // Kafka answers a marker for a group partition whose coordinator is not loaded
        // (loading, or not hosted) with NOT_LEADER_OR_FOLLOWER, which the transaction
        // coordinator retries once the load is done.
        return Err(ResponseError::NotLeaderOrFollower);
    }
    let commit = marker.transaction_result;
    let offset = partition
        .write_txn_marker(
            marker.producer_id.0,
            marker.producer_epoch,
            marker.coordinator_epoch,
            if commit {
                TxnResult::Commit
            } else {
                TxnResult::Abort
            },
        )
        .map_err(|e| errors::replication_error(&e))?;
    if topic == GROUP_METADATA_TOPIC_NAME {
        broker
            .groups
            .complete_txn_offsets(index, marker.producer_id.0, commit, offset.get());
    }
    partition
        .wait_durable(Offset(offset.get() + 1), DURABLE_TIMEOUT)
        .await
        .map_err(|e| errors::replication_error(&e))
}

/// Answers a WriteTxnMarkers request once every marker is durable or has failed.
pub fn handle(ctx: &RequestContext, request: WriteTxnMarkersRequest) -> ResponseFuture {
    let broker = Arc::clone(&ctx.broker);
    // Only brokers write markers: ALTER or CLUSTER_ACTION on the cluster.
    let allowed = ctx
        .authorizer
        .authorize_cluster_quietly(AclOperation::Alter)
        || ctx.authorize_cluster(AclOperation::ClusterAction);
    Box::pin(async move {
        let mut markers = Vec::with_capacity(request.markers.len());
        for marker in &request.markers {
            let mut topics = Vec::with_capacity(marker.topics.len());
            for topic in &marker.topics {
                let mut partitions = Vec::with_capacity(topic.partition_indexes.len());
                for &index in &topic.partition_indexes {
                    let result = if allowed {
                        write_one(&broker, topic.name.as_str(), index, marker).await
                    } else {
                        Err(ResponseError::ClusterAuthorizationFailed)
                    };
                    if let Err(code) = result {
                        tracing::info!(topic = %topic.name.as_str(), partition = index, producer_id = marker.producer_id.0, error = ?code, "transaction marker refused");
                    }
                    partitions.push(
                        WritableTxnMarkerPartitionResult::default()
                            .with_partition_index(index)
                            .with_error_code(errors::code(result.err())),
                    );
                }
                topics.push(
                    WritableTxnMarkerTopicResult::default()
                        .with_name(topic.name.clone())
                        .with_partitions(partitions),
                );
            }
            markers.push(
                WritableTxnMarkerResult::default()
                    .with_producer_id(marker.producer_id)
                    .with_topics(topics),
            );
        }
        Some(
            ResponseKind::WriteTxnMarkers(WriteTxnMarkersResponse::default().with_markers(markers))
                .into(),
        )
    })
}
