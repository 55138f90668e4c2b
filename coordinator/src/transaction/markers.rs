//! Writing a transaction's markers (Kafka's `TransactionMarkerChannelManager`): one control
//! batch per partition of the transaction, carrying the coordinator epoch. A partition this
//! broker leads gets its marker through `CoordinatorPartition::write_txn_marker`, waited on until
//! durable (for a `__consumer_offsets` partition the group coordinator also applies or
//! drops the producer's pending transactional offsets); a partition led elsewhere gets it
//! through WriteTxnMarkers to its leader, one request per leader broker, answered once the
//! markers are durable there. Partitions that fail retriably (leader moved or unknown, not
//! enough replicas, no answer) are retried with freshly looked-up leaders until the
//! deadline; a fenced answer (TRANSACTION_COORDINATOR_FENCED, a stale producer epoch) stops
//! the completion, since a newer coordinator owns the transaction.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use logbook_client::BrokerEndpoint;

use super::metadata::{TransactionMetadata, TransactionResult};
use super::remote::{self, MarkerOutcome, Remote};
use super::{GroupOffsets, TxnError};
use crate::partition_writer::{CoordinatorHost, CoordinatorPartition, WriteError};

/// First wait before a round of retries; it grows by this much per round, up to
/// [`RETRY_BACKOFF_MAX`] (Kafka retries markers every `retry.backoff.ms`).
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// Longest wait between two rounds of retries.
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Where one partition's marker goes this round.
enum Route {
    /// Its topic is gone: no marker needed, as in Kafka.
    Gone,
    /// Led here.
    Local(Arc<dyn CoordinatorPartition>),
    /// Led by another broker.
    Remote(BrokerEndpoint),
    /// No leader right now (or not yet hosted here): retry later.
    Unavailable,
}

fn route(host: &dyn CoordinatorHost, remote: Option<&Remote>, topic: &str, index: i32) -> Route {
    let exists = host
        .partition_count(topic)
        .is_some_and(|count| (0..count).contains(&index));
    let local = || host.partition(topic, index);
    match remote {
        None => local().map_or(Route::Gone, Route::Local),
        Some(_) if !exists => Route::Gone,
        Some(remote) => match remote.remote_leader(topic, index) {
            Ok(Some(leader)) => Route::Remote(leader),
            Ok(None) => local().map_or(Route::Unavailable, Route::Local),
            Err(remote::NoLeader) => Route::Unavailable,
        },
    }
}

/// What one round of marker writes left to do.
#[derive(Default)]
struct Round {
    /// Local markers written, to wait on until durable.
    written: Vec<(Arc<dyn CoordinatorPartition>, i64)>,
    /// Partitions to try again.
    retry: Vec<(String, i32)>,
}

/// Writes the markers of `meta`'s transaction (its producer id and epoch, `result`) to
/// each of its partitions, here or on their leaders (`remote`; `None` on a single node),
/// and waits until all are durable, retrying for up to `timeout`.
///
/// # Errors
/// `NotCoordinator` when a partition fenced this coordinator; `CoordinatorNotAvailable`
/// when markers were still missing at the deadline (a later load retries them).
pub(super) async fn write_markers(
    host: &dyn CoordinatorHost,
    groups: &dyn GroupOffsets,
    remote: Option<&Remote>,
    meta: &TransactionMetadata,
    coordinator_epoch: i32,
    result: TransactionResult,
    timeout: Duration,
) -> Result<(), TxnError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let commit = result == TransactionResult::Commit;
    let mut pending: Vec<(String, i32)> = meta.partitions.iter().cloned().collect();
    let mut written = Vec::with_capacity(pending.len());
    let mut backoff = RETRY_BACKOFF;
    loop {
        let round = write_round(
            host,
            groups,
            remote,
            meta,
            coordinator_epoch,
            commit,
            pending,
        )
        .await?;
        written.extend(round.written);
        if round.retry.is_empty() {
            break;
        }
        if deadline <= tokio::time::Instant::now() + backoff {
            tracing::warn!(producer_id = meta.producer_id, partitions = ?round.retry, "transaction markers not written before the deadline");
            return Err(TxnError::CoordinatorNotAvailable);
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff + RETRY_BACKOFF).min(RETRY_BACKOFF_MAX);
        pending = round.retry;
    }
    let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
    for (partition, end) in written {
        if let Err(e) = partition.wait_committed(end, remaining).await {
            tracing::warn!(error = %e, "transaction marker not durable");
            return Err(TxnError::CoordinatorNotAvailable);
        }
    }
    Ok(())
}

/// One attempt at every partition in `pending`: local ones written here, remote ones sent
/// to their leaders together.
async fn write_round(
    host: &dyn CoordinatorHost,
    groups: &dyn GroupOffsets,
    remote: Option<&Remote>,
    meta: &TransactionMetadata,
    coordinator_epoch: i32,
    commit: bool,
    pending: Vec<(String, i32)>,
) -> Result<Round, TxnError> {
    let mut round = Round::default();
    let mut by_leader: BTreeMap<i32, (BrokerEndpoint, Vec<(String, i32)>)> = BTreeMap::new();
    for (topic, index) in pending {
        match route(host, remote, &topic, index) {
            Route::Gone => {
                tracing::info!(%topic, partition = index, "no marker for a partition that no longer exists");
            }
            Route::Unavailable => round.retry.push((topic, index)),
            Route::Remote(leader) => {
                by_leader
                    .entry(leader.id)
                    .or_insert_with(|| (leader, Vec::new()))
                    .1
                    .push((topic, index));
            }
            Route::Local(_)
                if topic == crate::GROUP_METADATA_TOPIC_NAME
                    && !groups.accepts_txn_markers(index) =>
            {
                // The group shard is still loading (see `accepts_txn_markers`).
                round.retry.push((topic, index));
            }
            Route::Local(partition) => {
                let written = partition.write_txn_marker(
                    meta.producer_id,
                    meta.producer_epoch,
                    coordinator_epoch,
                    commit,
                );
                match written {
                    Ok(offset) => {
                        if topic == crate::GROUP_METADATA_TOPIC_NAME {
                            groups.complete_txn_offsets(index, meta.producer_id, commit, offset);
                        }
                        round.written.push((partition, offset + 1));
                    }
                    Err(e) => {
                        tracing::info!(%topic, partition = index, error = %e, "transaction marker not written here");
                        settle(&mut round, (topic, index), local_outcome(&e))?;
                    }
                }
            }
        }
    }
    let Some(remote) = remote else {
        return Ok(round);
    };
    send_remote_markers(
        remote,
        meta,
        coordinator_epoch,
        commit,
        by_leader,
        &mut round,
    )
    .await?;
    Ok(round)
}

/// The remote half of a round (Kafka's `TransactionMarkerChannelManager`): one
/// WriteTxnMarkers per leader, all sent at once, each partition's answer filed into
/// `round`; a leader that cannot be reached has all its partitions tried again.
async fn send_remote_markers(
    remote: &Remote,
    meta: &TransactionMetadata,
    coordinator_epoch: i32,
    commit: bool,
    by_leader: BTreeMap<i32, (BrokerEndpoint, Vec<(String, i32)>)>,
    round: &mut Round,
) -> Result<(), TxnError> {
    let sends = by_leader
        .into_values()
        .map(|(leader, partitions)| async move {
            let answer = remote::send_markers(
                &remote.client,
                &leader,
                meta.producer_id,
                meta.producer_epoch,
                coordinator_epoch,
                commit,
                &partitions,
            )
            .await;
            (leader, partitions, answer)
        });
    for (leader, partitions, answer) in futures::future::join_all(sends).await {
        match answer {
            Ok(codes) => {
                for (tp, code) in codes {
                    if code != 0 {
                        tracing::info!(topic = %tp.0, partition = tp.1, broker = leader.id, code, "transaction marker refused by the leader");
                    }
                    settle(round, tp, remote::marker_outcome(code))?;
                }
            }
            Err(e) => {
                tracing::info!(broker = leader.id, error = %e, "transaction markers not sent");
                round.retry.extend(partitions);
            }
        }
    }
    Ok(())
}

/// What a marker this broker failed to write means (as `remote::marker_outcome` for a
/// leader's code): a fenced producer epoch or coordinator stops the transaction's
/// completion; anything else (not the leader now, a storage error) is tried again.
fn local_outcome(e: &WriteError) -> MarkerOutcome {
    match e {
        WriteError::Fenced(_) => MarkerOutcome::Fenced,
        WriteError::Unavailable(_)
        | WriteError::NotLeader(_)
        | WriteError::Duplicate(_)
        | WriteError::Encode(_) => MarkerOutcome::Retry,
    }
}

/// Files a partition's marker outcome into the round.
fn settle(round: &mut Round, tp: (String, i32), outcome: MarkerOutcome) -> Result<(), TxnError> {
    match outcome {
        MarkerOutcome::Written | MarkerOutcome::Skip => Ok(()),
        MarkerOutcome::Retry => {
            round.retry.push(tp);
            Ok(())
        }
        MarkerOutcome::Fenced => {
            tracing::warn!(topic = %tp.0, partition = tp.1, "transaction marker fenced: a newer coordinator owns the transaction");
            Err(TxnError::NotCoordinator)
        }
    }
}
