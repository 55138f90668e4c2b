//! Writing a transaction's markers (Kafka's `TransactionMarkerChannelManager` and the
//! WriteTxnMarkers it sends, collapsed to direct appends on one node): one control batch
//! per partition of the transaction, through `Partition::write_txn_marker`, each waited
//! on until durable; for a `__consumer_offsets` partition the group coordinator also
//! applies (commit) or drops (abort) the producer's pending transactional offsets.

use std::time::Duration;

use logbook_replication::Offset;

use super::metadata::{TransactionMetadata, TransactionResult};
use super::TxnError;
use crate::coordinator::group::GroupCoordinator;
use crate::topics::Topics;

/// Attempts per marker before the completion gives up (a later load retries it).
const MARKER_ATTEMPTS_MAX: u32 = 10;

/// Writes the markers of `meta`'s transaction (its producer id and epoch, `result`) to
/// each of its partitions and waits until all are durable. A partition that no longer
/// exists (its topic was deleted) needs no marker, as in Kafka.
///
/// # Errors
/// A marker could not be written after retries (`CoordinatorNotAvailable`).
pub(super) async fn write_markers(
    topics: &Topics,
    groups: &GroupCoordinator,
    meta: &TransactionMetadata,
    coordinator_epoch: i32,
    result: TransactionResult,
    timeout: Duration,
) -> Result<(), TxnError> {
    let marker = match result {
        TransactionResult::Commit => logbook_replication::TxnResult::Commit,
        TransactionResult::Abort => logbook_replication::TxnResult::Abort,
    };
    let mut waits = Vec::with_capacity(meta.partitions.len());
    for (topic, index) in &meta.partitions {
        let Some(partition) = topics.replicas().partition(topic, *index) else {
            tracing::info!(%topic, partition = index, "no marker for a partition that no longer exists");
            continue;
        };
        let mut attempt = 0;
        let offset = loop {
            attempt += 1;
            match partition.write_txn_marker(
                meta.producer_id,
                meta.producer_epoch,
                coordinator_epoch,
                marker,
            ) {
                Ok(offset) => break offset,
                Err(e) if attempt < MARKER_ATTEMPTS_MAX => {
                    tracing::warn!(%topic, partition = index, error = %e, attempt, "transaction marker not written; retrying");
                    tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
                }
                Err(e) => {
                    tracing::error!(%topic, partition = index, error = %e, "transaction marker not written");
                    return Err(TxnError::CoordinatorNotAvailable);
                }
            }
        };
        if topic == crate::coordinator::GROUP_METADATA_TOPIC_NAME {
            groups.complete_txn_offsets(
                *index,
                meta.producer_id,
                result == TransactionResult::Commit,
            );
        }
        waits.push((partition, Offset(offset.get() + 1)));
    }
    for (partition, end) in waits {
        if let Err(e) = partition.wait_durable(end, timeout).await {
            tracing::warn!(error = %e, "transaction marker not durable");
            return Err(TxnError::CoordinatorNotAvailable);
        }
    }
    Ok(())
}
