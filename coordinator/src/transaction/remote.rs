//! The transaction coordinator's calls to other brokers: WriteTxnMarkers (27) to the
//! leader of a transaction's partition (Kafka's `TransactionMarkerChannelManager`), and
//! AddPartitionsToTxn v5 from a partition leader to the transaction's coordinator (Kafka's
//! `AddPartitionsToTxnManager`, KIP-890: verify-only for protocol v1, add for v2).
//! Where partitions lead comes from [`PartitionLeaders`], which the broker implements over
//! its metadata image; on a single node none is installed and everything stays local.

use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, ProducerId, TopicName, TransactionalId, WriteTxnMarkersRequest,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use logbook_client::{BrokerEndpoint, InterBrokerClient, InterBrokerError};

use super::TxnError;

/// WriteTxnMarkers version sent (the one `handlers::write_txn_markers` serves).
pub const WRITE_TXN_MARKERS_VERSION: i16 = 1;
/// AddPartitionsToTxn version sent between brokers (the batched form with `verify_only`).
pub const ADD_PARTITIONS_TO_TXN_VERSION: i16 = 5;

/// Where each partition is led, as this broker's metadata image says.
pub trait PartitionLeaders: Send + Sync + 'static {
    /// The leader of `topic`'s `partition`, or `None` when it has none (or the partition is
    /// unknown).
    fn leader(&self, topic: &str, partition: i32) -> Option<BrokerEndpoint>;
    /// This broker's id.
    fn local_broker_id(&self) -> i32;
}

/// The cluster as the transaction coordinator reaches it.
pub struct Remote {
    /// Where partitions lead.
    pub leaders: Arc<dyn PartitionLeaders>,
    /// The connections to other brokers.
    pub client: Arc<InterBrokerClient>,
}

impl Remote {
    /// The leader of the partition when it is another broker (`Ok(None)`: this broker).
    ///
    /// # Errors
    /// The partition has no leader now.
    pub fn remote_leader(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Option<BrokerEndpoint>, NoLeader> {
        let leader = self.leaders.leader(topic, partition).ok_or(NoLeader)?;
        Ok((leader.id != self.leaders.local_broker_id()).then_some(leader))
    }
}

/// A partition without a leader in the image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoLeader;

/// Sends one WriteTxnMarkers with the marker of `producer_id` for `partitions` to
/// `broker`; returns each partition's error code (0: written and durable there).
///
/// # Errors
/// No answer (the caller retries every partition).
pub async fn send_markers(
    client: &InterBrokerClient,
    broker: &BrokerEndpoint,
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    commit: bool,
    partitions: &[(String, i32)],
) -> Result<Vec<((String, i32), i16)>, InterBrokerError> {
    let mut topics: Vec<WritableTxnMarkerTopic> = Vec::new();
    for (topic, index) in partitions {
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partition_indexes.push(*index),
            None => topics.push(
                WritableTxnMarkerTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.clone())))
                    .with_partition_indexes(vec![*index]),
            ),
        }
    }
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch)
            .with_transaction_result(commit)
            .with_coordinator_epoch(coordinator_epoch)
            .with_topics(topics)]);
    let response = client
        .send(broker, WRITE_TXN_MARKERS_VERSION, &request)
        .await?;
    let mut codes = Vec::with_capacity(partitions.len());
    for tp in partitions {
        let code = response
            .markers
            .iter()
            .filter(|m| m.producer_id.0 == producer_id)
            .flat_map(|m| m.topics.iter())
            .filter(|t| t.name.0.as_str() == tp.0)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == tp.1)
            .map(|p| p.error_code);
        // A partition the answer leaves out was not written: retry it.
        codes.push((
            tp.clone(),
            code.unwrap_or(ResponseError::UnknownServerError.code()),
        ));
    }
    Ok(codes)
}

/// Asks the transaction coordinator on `broker` to verify (`verify_only`) or add
/// `partition` to the producer's ongoing transaction.
///
/// # Errors
/// The coordinator's answer as a [`TxnError`]; no answer is `CoordinatorNotAvailable`
/// (the produce is refused with a retriable error).
pub async fn add_or_verify(
    client: &InterBrokerClient,
    broker: &BrokerEndpoint,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    partition: &(String, i32),
    verify_only: bool,
) -> Result<(), TxnError> {
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(StrBytes::from_string(
                transactional_id.to_string(),
            )))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch)
            .with_verify_only(verify_only)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(TopicName(StrBytes::from_string(partition.0.clone())))
                .with_partitions(vec![partition.1])]),
    ]);
    let response = client
        .send(broker, ADD_PARTITIONS_TO_TXN_VERSION, &request)
        .await
        .map_err(|e| {
            tracing::debug!(error = %e, transactional_id, "transaction coordinator not reached");
            TxnError::CoordinatorNotAvailable
        })?;
    if response.error_code != 0 {
        return Err(txn_error_of_code(response.error_code));
    }
    let code = response
        .results_by_transaction
        .iter()
        .filter(|t| t.transactional_id.0.as_str() == transactional_id)
        .flat_map(|t| t.topic_results.iter())
        .filter(|t| t.name.0.as_str() == partition.0)
        .flat_map(|t| t.results_by_partition.iter())
        .find(|p| p.partition_index == partition.1)
        .map(|p| p.partition_error_code);
    match code {
        Some(0) => Ok(()),
        Some(code) => Err(txn_error_of_code(code)),
        None => Err(TxnError::CoordinatorNotAvailable),
    }
}

/// Reads a transaction coordinator's error code back into the [`TxnError`] it stands for
/// (the inverse of `errors::txn_error` for the codes AddPartitionsToTxn answers); anything
/// else is a retriable `CoordinatorNotAvailable`.
#[must_use]
pub fn txn_error_of_code(code: i16) -> TxnError {
    match ResponseError::try_from_code(code) {
        Some(ResponseError::InvalidTxnState) => TxnError::InvalidTxnState,
        Some(ResponseError::ConcurrentTransactions) => TxnError::ConcurrentTransactions,
        Some(ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch) => {
            TxnError::ProducerFenced
        }
        Some(ResponseError::InvalidProducerIdMapping) => TxnError::InvalidProducerIdMapping,
        Some(ResponseError::NotCoordinator) => TxnError::NotCoordinator,
        Some(ResponseError::CoordinatorLoadInProgress) => TxnError::CoordinatorLoadInProgress,
        Some(ResponseError::UnknownTopicOrPartition) => TxnError::UnknownTopicOrPartition,
        Some(ResponseError::InvalidRequest) => TxnError::InvalidRequest,
        Some(ResponseError::TransactionalIdNotFound) => TxnError::TransactionalIdNotFound,
        Some(ResponseError::OperationNotAttempted) => TxnError::OperationNotAttempted,
        _ => TxnError::CoordinatorNotAvailable,
    }
}

/// What a marker's error code (from the leader, or from writing it here) means to the
/// coordinator, as Kafka's `TransactionMarkerRequestCompletionHandler` reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerOutcome {
    /// Written (and durable on the leader).
    Written,
    /// Try again with a fresh leader (leadership moved, not enough replicas, a timeout, a
    /// storage error on the leader).
    Retry,
    /// This coordinator or its producer epoch is stale: stop completing the transaction.
    Fenced,
    /// The partition cannot take a marker at all (Kafka skips it).
    Skip,
}

/// Classifies a marker's error code (0: written).
#[must_use]
pub fn marker_outcome(code: i16) -> MarkerOutcome {
    if code == 0 {
        return MarkerOutcome::Written;
    }
    match ResponseError::try_from_code(code) {
        Some(
            ResponseError::TransactionCoordinatorFenced
            | ResponseError::InvalidProducerEpoch
            | ResponseError::ProducerFenced,
        ) => MarkerOutcome::Fenced,
        Some(ResponseError::UnsupportedForMessageFormat | ResponseError::UnsupportedVersion) => {
            MarkerOutcome::Skip
        }
        _ => MarkerOutcome::Retry,
    }
}
