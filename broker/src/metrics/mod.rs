//! Prometheus metrics, served on `--metrics-listen` (off by default).
//!
//! Recording goes through the `metrics` facade. Until [`install`] puts the Prometheus
//! recorder in place every handle is a no-op, and the hot paths check [`enabled`] (one
//! relaxed load) before anything costlier than bumping a handle they hold, so a broker
//! without `--metrics-listen` pays nothing.
//!
//! Three kinds of metric, by where their value comes from:
//! - events counted where they happen, through handles resolved once:
//!   [`RequestMetrics`] (per API key: requests, errors by code, queue and processing time,
//!   request size), [`ConnectionMetrics`], [`BrokerTopicStats`] (bytes and records in and out
//!   per topic), and in the storage and replication crates the fsync latency and batch
//!   size and the page-cache tail drops;
//! - state read when Prometheus scrapes ([`collector`]): every partition's offsets and
//!   size, under-replicated and under-min-ISR partitions, consumer groups by state and their
//!   lag, process memory and descriptors;
//! - the endpoint itself ([`endpoint`]): `/metrics`, `/healthz`, `/readyz`.
//!
//! Names follow Prometheus conventions: the `logbook_` prefix, base units (`_seconds`,
//! `_bytes`), `_total` on counters; process metrics use the standard `process_*` names every
//! Prometheus client library exports, so existing dashboards find them.

pub mod collector;
pub mod endpoint;
mod request_metrics;
mod topic_stats;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use metrics_util::MetricKindMask;

pub use request_metrics::{ConnectionMetrics, RequestMetrics};
pub use topic_stats::BrokerTopicStats;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether the Prometheus recorder is installed (`--metrics-listen` was given).
#[inline]
#[must_use]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Latency buckets, 100 µs to 30 s.
const SECONDS_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];
/// Size buckets, 64 B to 64 MiB by powers of four.
const BYTES_BUCKETS: &[f64] = &[
    64.0,
    256.0,
    1024.0,
    4096.0,
    16_384.0,
    65_536.0,
    262_144.0,
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
    67_108_864.0,
];
/// Count buckets, 1 to 65,536 by powers of four.
const COUNT_BUCKETS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16_384.0, 65_536.0,
];

/// A gauge not set for this long is dropped from the output: gauges are set at every
/// scrape, so this removes the series of a deleted partition or group after a scrape or
/// two, and never one still alive (a scrape sets them all just before rendering).
const GAUGE_IDLE: Duration = Duration::from_secs(30);

/// How often histogram samples are folded into their buckets when nobody scrapes.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// Installs the Prometheus recorder as the process's global one. Call once, before any
/// handle is resolved (handles resolved earlier stay no-ops), and from within the runtime
/// (it spawns the upkeep task).
///
/// # Errors
/// A recorder is installed already, or the buckets are invalid.
pub fn install() -> Result<PrometheusHandle, String> {
    let matcher = |suffix: &str| Matcher::Suffix(suffix.to_string());
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(matcher("_seconds"), SECONDS_BUCKETS)
        .and_then(|b| b.set_buckets_for_metric(matcher("_bytes"), BYTES_BUCKETS))
        .and_then(|b| b.set_buckets_for_metric(matcher("_records"), COUNT_BUCKETS))
        .map_err(|e| e.to_string())?
        .idle_timeout(MetricKindMask::GAUGE, Some(GAUGE_IDLE))
        .install_recorder()
        .map_err(|e| e.to_string())?;
    ENABLED.store(true, Ordering::Relaxed);
    describe();
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(UPKEEP_INTERVAL).await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

/// HELP texts.
fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!("logbook_requests_total", "Requests answered, by API");
    describe_counter!(
        "logbook_request_errors_total",
        "Error codes in responses (each partition's counts), by API and error"
    );
    describe_histogram!(
        "logbook_request_queue_seconds",
        Unit::Seconds,
        "From a request's arrival to the start of its processing (waiting behind earlier requests of its connection)"
    );
    describe_histogram!(
        "logbook_request_processing_seconds",
        Unit::Seconds,
        "From the start of a request's processing to its response being ready (a Fetch's long poll included)"
    );
    describe_histogram!(
        "logbook_request_size_bytes",
        Unit::Bytes,
        "Request sizes, by API"
    );
    describe_counter!(
        "logbook_connections_accepted_total",
        "Client connections accepted"
    );
    describe_counter!(
        "logbook_connections_rejected_total",
        "Client connections closed at once, by reason"
    );
    describe_gauge!("logbook_connections_active", "Open client connections");
    describe_counter!(
        "logbook_topic_bytes_in_total",
        Unit::Bytes,
        "Record batch bytes appended by producers, by topic"
    );
    describe_counter!(
        "logbook_topic_records_in_total",
        "Records appended by producers, by topic"
    );
    describe_counter!(
        "logbook_topic_bytes_out_total",
        Unit::Bytes,
        "Record batch bytes sent to consumers, by topic (replica fetches not included)"
    );
    describe_counter!(
        "logbook_topic_records_out_total",
        "Offsets sent to consumers, by topic (the span of the batches sent: records, plus control records and compacted gaps)"
    );
    describe_histogram!(
        "logbook_fsync_seconds",
        Unit::Seconds,
        "Time of one partition log fsync"
    );
    describe_histogram!(
        "logbook_fsync_batch_records",
        "Offsets made durable by one fsync (the writes it groups)"
    );
    describe_counter!(
        "logbook_page_cache_drops_total",
        "Times durable pages behind a segment's tail were dropped from the page cache"
    );
    describe_counter!(
        "logbook_page_cache_dropped_bytes_total",
        Unit::Bytes,
        "Bytes of durable pages dropped from the page cache"
    );
    collector::describe();
}
