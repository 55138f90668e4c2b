//! The listener: binds, accepts connections under a connection limit, runs retention, and
//! shuts down cleanly on SIGTERM/Ctrl-C (stop accepting, finish owed responses, close every
//! log with a clean-shutdown checkpoint).

use std::sync::Arc;
use std::time::Duration;

use logbook_replication::{FlushPolicy, ReplicaManager};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::broker::Broker;
use crate::config::{Config, FlushPolicyArg};
use crate::connection_quotas::ConnectionQuotas;
use crate::producer_ids::ProducerIdManager;
use crate::topic_config::BrokerDefaults;
use crate::topics::Topics;

/// How long shutdown waits for connections to finish their owed responses.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Runs the broker until a shutdown signal.
///
/// # Errors
/// Startup failures: the data directory cannot be opened, or the address cannot be bound.
pub async fn run(config: Config) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let started = std::time::Instant::now();
    if let Some(count) = config.failpoint_abort_after_txn_markers {
        tracing::warn!(
            count,
            "test failpoint armed: aborting after {count} transaction markers"
        );
        logbook_replication::failpoint::abort_after_txn_markers(count);
    }
    let policy = match config.flush_policy {
        FlushPolicyArg::EveryWrite => FlushPolicy::EveryWrite,
        FlushPolicyArg::Os => FlushPolicy::Os,
    };
    let replicas = Arc::new(
        ReplicaManager::new(&config.data_dir, policy, config.flush_threads)
            .with_broker_id(config.node_id),
    );
    replicas.start_log_cleaner(log_cleaner_config(&config));
    replicas.start_maintenance();
    let defaults = BrokerDefaults::new(
        config.limits.message_max_bytes,
        config.log_segment_bytes,
        config.log_retention_ms,
    )
    .with_preallocate_bytes_max(config.log_preallocate_bytes_max)
    .with_page_cache_tail_bytes(config.page_cache_tail_bytes)
    .with_static_configs(&config.static_broker_configs);
    let topics = Arc::new(tokio::task::block_in_place(|| {
        Topics::open(
            &config.data_dir,
            Arc::clone(&replicas),
            defaults,
            config.limits.partitions_per_topic_max,
        )
        .map(|t| {
            t.with_partitions_total_max(crate::partition_budget::partitions_max(&config.limits))
        })
    })?);
    let producer_ids = Arc::new(ProducerIdManager::open(
        &config.data_dir.join(crate::topics::METADATA_DIR),
    )?);
    let groups = tokio::task::block_in_place(|| {
        crate::coordinator::GroupCoordinator::load(&topics, group_config(&config))
    })?;
    let transactions = tokio::task::block_in_place(|| {
        crate::coordinator::TransactionCoordinator::load(
            &topics,
            Arc::clone(&groups),
            Arc::clone(&producer_ids),
            transaction_config(&config),
        )
    })?;
    let listener = TcpListener::bind(config.listen).await?;
    let (advertised_host, advertised_port) = config.advertised();
    let broker = Arc::new(Broker {
        config,
        topics,
        replicas: Arc::clone(&replicas),
        producer_ids,
        groups,
        transactions,
        advertised_host,
        advertised_port,
    });
    tracing::info!(
        listen = %broker.config.listen,
        advertised = %format!("{}:{}", broker.advertised_host, broker.advertised_port),
        data_dir = %broker.config.data_dir.display(),
        node_id = broker.node_id(),
        topics = broker.topics.all().len(),
        startup_ms = started.elapsed().as_millis(),
        "accepting connections"
    );
    let shutdown = CancellationToken::new();
    let tracker = TaskTracker::new();
    tracker.spawn(retention_loop(Arc::clone(&broker), shutdown.clone()));
    let connections = Arc::new(Semaphore::new(broker.config.limits.connections_max.max(1)));
    let quotas = ConnectionQuotas::new(broker.config.limits.max_connections_per_ip);
    let stop = shutdown_signal();
    tokio::pin!(stop);
    loop {
        let permit = tokio::select! {
            () = &mut stop => break,
            permit = Arc::clone(&connections).acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let Some(slot) = quotas.try_open(peer.ip()) else {
                    // Kafka's TooManyConnectionsException: close the new connection at once.
                    tracing::info!(%peer, limit = broker.config.limits.max_connections_per_ip, "closing connection: max.connections.per.ip reached");
                    drop(stream);
                    continue;
                };
                let broker = Arc::clone(&broker);
                let shutdown = shutdown.clone();
                tracker.spawn(async move {
                    crate::connection::serve(broker, stream, peer, shutdown).await;
                    drop(slot);
                    drop(permit);
                });
            }
            Err(e) => {
                // Usually EMFILE: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    tracing::info!("shutting down");
    shutdown.cancel();
    tracker.close();
    if tokio::time::timeout(SHUTDOWN_GRACE, tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("connections did not finish within the grace period");
    }
    broker.groups.shutdown();
    broker.transactions.shutdown();
    tokio::task::block_in_place(|| replicas.shutdown());
    tracing::info!("shutdown complete");
    Ok(())
}

/// The group coordinator's settings from the broker's flags.
fn group_config(config: &Config) -> crate::coordinator::group::GroupConfig {
    crate::coordinator::group::GroupConfig {
        initial_rebalance_delay_ms: config.group_initial_rebalance_delay_ms.max(0),
        offsets_topic_num_partitions: config.offsets_topic_num_partitions.max(1),
        offsets_retention_ms: config.offsets_retention_minutes.saturating_mul(60_000),
        offsets_retention_check_interval_ms: config.offsets_retention_check_interval_ms,
        min_session_timeout_ms: config.group_min_session_timeout_ms,
        max_session_timeout_ms: config.group_max_session_timeout_ms,
        group_max_size: config.limits.group_max_size.max(1),
        commit_timeout_ms: config.limits.produce_timeout_ms_max,
        offsets_topic_segment_bytes: config.offsets_topic_segment_bytes.max(14),
    }
}

/// The transaction coordinator's settings from the broker's flags.
fn transaction_config(config: &Config) -> crate::coordinator::transaction::TransactionConfig {
    crate::coordinator::transaction::TransactionConfig {
        state_log_num_partitions: config.transaction_state_log_num_partitions.max(1),
        state_log_segment_bytes: config.transaction_state_log_segment_bytes.max(14),
        max_timeout_ms: config.transaction_max_timeout_ms.max(1),
        id_expiration_ms: config.transactional_id_expiration_ms.max(1),
        abort_timed_out_interval_ms: config
            .transaction_abort_timed_out_transaction_cleanup_interval_ms,
        remove_expired_interval_ms: config
            .transaction_remove_expired_transaction_cleanup_interval_ms,
        write_timeout_ms: config.limits.produce_timeout_ms_max,
        transaction_version: config.transaction_version,
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {},
                    _ = term.recv() => {},
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the broker");
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// Has the replica manager apply `retention.ms` / `retention.bytes` and producer-id expiry
/// to every partition periodically.
async fn retention_loop(broker: Arc<Broker>, shutdown: CancellationToken) {
    let period = Duration::from_millis(broker.config.log_retention_check_interval_ms.max(100));
    let mut ticker = tokio::time::interval(period);
    ticker.tick().await;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let expiration_ms = broker.config.producer_id_expiration_ms;
        // On the blocking pool: checkpoint fsyncs and file deletions must not stall an
        // async worker (block_in_place would, and would take its other tasks with it).
        let replicas = Arc::clone(&broker.replicas);
        let check =
            tokio::task::spawn_blocking(move || replicas.apply_retention(now, expiration_ms));
        if let Err(e) = check.await {
            tracing::error!(error = %e, "retention check panicked");
        }
    }
}

/// The log cleaner's settings from the `--log-cleaner-*` flags.
fn log_cleaner_config(config: &Config) -> logbook_replication::LogCleanerConfig {
    let rate = config.log_cleaner_io_max_bytes_per_second;
    logbook_replication::LogCleanerConfig {
        enable: config.log_cleaner_enable,
        threads: config.log_cleaner_threads,
        backoff_ms: config.log_cleaner_backoff_ms,
        dedupe_buffer_bytes: config.log_cleaner_dedupe_buffer_size,
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a positive rate below u64::MAX; larger means unlimited"
        )]
        io_max_bytes_per_second: (rate > 0.0 && rate < 1e18).then_some(rate as u64),
    }
}
