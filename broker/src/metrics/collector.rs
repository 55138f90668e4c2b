//! What is read when Prometheus scrapes: partition offsets and sizes, replication health,
//! consumer groups and their lag, the process's memory and descriptors. Nothing here
//! runs on a request path.

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use kafka_protocol::messages::ResponseKind;
use logbook_storage::record_batch::BATCH_HEADER_BYTES;
use logbook_storage::{Offset, RecordBatchHeader};
use metrics::{describe_gauge, gauge, Unit};

use crate::broker::Broker;
use crate::coordinator::group::GroupState;

/// HELP texts of the scrape-time metrics.
pub(super) fn describe() {
    describe_gauge!(
        "logbook_log_start_offset",
        "First offset of a hosted partition's log"
    );
    describe_gauge!(
        "logbook_log_end_offset",
        "Offset after the last record of a hosted partition's log"
    );
    describe_gauge!(
        "logbook_high_watermark",
        "Offset below which a partition's records are replicated to its ISR and readable"
    );
    describe_gauge!(
        "logbook_log_size_bytes",
        Unit::Bytes,
        "Bytes of a hosted partition's log segments"
    );
    describe_gauge!("logbook_leader_partitions", "Partitions this broker leads");
    describe_gauge!(
        "logbook_under_replicated_partitions",
        "Partitions this broker leads whose ISR is smaller than their replica set"
    );
    describe_gauge!("logbook_under_min_isr_partitions", "Partitions this broker leads whose ISR is smaller than min.insync.replicas (acks=all fails)");
    describe_gauge!(
        "logbook_offline_partitions",
        "Hosted partitions offline after a storage error"
    );
    describe_gauge!(
        "logbook_consumer_groups",
        "Consumer groups this broker coordinates, by state"
    );
    describe_gauge!(
        "logbook_consumer_group_lag",
        "Records between a group's committed offset and the high watermark, per partition"
    );
    describe_gauge!(
        "logbook_consumer_group_lag_seconds",
        Unit::Seconds,
        "Age of the oldest record a group has not consumed (the one at its committed offset), per partition; 0 when caught up"
    );
    describe_gauge!("logbook_build_info", "Always 1; the version is a label");
}

/// Sets every scrape-time gauge.
pub fn collect(broker: Option<&Arc<Broker>>, lag_partitions_max: usize) {
    gauge!("logbook_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    gauge!("logbook_connections_active").set(super::ConnectionMetrics::global().active() as f64);
    if let Some(broker) = broker {
        partitions(broker);
        groups(broker, lag_partitions_max);
    }
}

/// Offsets and size of every hosted partition, and the replication health of those led.
fn partitions(broker: &Broker) {
    let image = broker.topics.image();
    let (mut leaders, mut under_replicated, mut under_min_isr, mut offline) = (0, 0, 0, 0);
    for topic in broker.topics.all() {
        let min_isr = topic
            .config
            .get("min.insync.replicas", broker.topics.defaults())
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(1)
            .max(1);
        for partition in broker.replicas.partitions_of(&topic.name) {
            let index = partition.topic_partition().partition;
            let labels = [
                ("topic", topic.name.clone()),
                ("partition", index.to_string()),
            ];
            if partition.offline_reason().is_some() {
                offline += 1;
                continue;
            }
            if let Ok(offsets) = partition.offsets() {
                gauge!("logbook_log_start_offset", &labels)
                    .set(offsets.log_start_offset.get() as f64);
                gauge!("logbook_log_end_offset", &labels).set(offsets.log_end_offset.get() as f64);
                gauge!("logbook_high_watermark", &labels).set(offsets.high_watermark.get() as f64);
            }
            if let Ok(bytes) = partition.size_bytes() {
                gauge!("logbook_log_size_bytes", &labels).set(bytes as f64);
            }
            if !partition.is_leader() {
                continue;
            }
            leaders += 1;
            let (isr, _) = partition.isr();
            let replicas = image
                .as_ref()
                .and_then(|image| crate::cluster::views::partition(image, &topic.id, index))
                .map_or(isr.len(), |view| view.replicas.len());
            if isr.len() < replicas {
                under_replicated += 1;
            }
            // Kafka's `effectiveMinIsr`: never more than the replicas.
            if isr.len() < min_isr.min(replicas) {
                under_min_isr += 1;
            }
        }
    }
    gauge!("logbook_leader_partitions").set(f64::from(leaders));
    gauge!("logbook_under_replicated_partitions").set(f64::from(under_replicated));
    gauge!("logbook_under_min_isr_partitions").set(f64::from(under_min_isr));
    gauge!("logbook_offline_partitions").set(f64::from(offline));
}

/// Groups by state, and each group's lag on the partitions this broker hosts (at most
/// `lag_partitions_max` series).
fn groups(broker: &Broker, lag_partitions_max: usize) {
    let listings = broker.groups.list_groups(&[]);
    for state in [
        GroupState::Empty,
        GroupState::PreparingRebalance,
        GroupState::CompletingRebalance,
        GroupState::Stable,
        GroupState::Dead,
    ] {
        let count = listings.iter().filter(|g| g.state == state).count();
        gauge!("logbook_consumer_groups", "state" => state.name()).set(count as f64);
    }
    let now_ms = logbook_common::now_ms();
    let mut series = 0usize;
    for listing in &listings {
        let Ok(topics) = broker.groups.fetch_offsets(&listing.group_id, None) else {
            continue;
        };
        for (topic, partitions) in topics {
            for (index, committed) in partitions {
                let Some(committed) = committed else { continue };
                let Some(partition) = broker.replicas.partition(&topic, index) else {
                    continue;
                };
                if series >= lag_partitions_max {
                    tracing::debug!(lag_partitions_max, "consumer lag series capped");
                    return;
                }
                series += 1;
                let high_watermark = partition.high_watermark().get();
                let lag = (high_watermark - committed.offset).max(0);
                let labels = [
                    ("group", listing.group_id.clone()),
                    ("topic", topic.clone()),
                    ("partition", index.to_string()),
                ];
                gauge!("logbook_consumer_group_lag", &labels).set(lag as f64);
                let behind_ms = if lag == 0 {
                    Some(0)
                } else {
                    record_timestamp(&partition, committed.offset).map(|ts| (now_ms - ts).max(0))
                };
                if let Some(ms) = behind_ms {
                    gauge!("logbook_consumer_group_lag_seconds", &labels).set(ms as f64 / 1000.0);
                }
            }
        }
    }
}

/// The timestamp of the batch holding `offset` (its first record's, or the broker's under
/// LogAppendTime): one index lookup and one 61-byte read.
fn record_timestamp(partition: &logbook_replication::Partition, offset: i64) -> Option<i64> {
    let read = partition.read_slices(Offset(offset), 0, true).ok()?;
    let slice = read.slices.first()?;
    let mut header = [0u8; BATCH_HEADER_BYTES];
    slice.file.read_exact_at(&mut header, slice.position).ok()?;
    let header = RecordBatchHeader::parse(&header).ok()?;
    Some(if header.is_log_append_time() {
        header.max_timestamp
    } else {
        header.base_timestamp
    })
}

/// The standard process metrics of Prometheus client libraries, read from /proc and
/// written as Prometheus text. Written here rather than through the recorder because
/// `process_cpu_seconds_total` is a fractional counter, which the `metrics` facade's
/// integer counters cannot hold.
#[must_use]
pub fn process_text() -> String {
    let mut out = String::new();
    memory_metrics(&mut out);
    fd_metrics(&mut out);
    cpu_and_start_metrics(&mut out);
    out
}

/// Writes one metric with its HELP and TYPE lines, as the Prometheus client libraries do.
fn write_metric(out: &mut String, name: &str, kind: &str, help: &str, value: f64) {
    use std::fmt::Write;
    let _ = write!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n\n"
    );
}

/// Virtual and resident memory, from /proc/self/statm (counted in pages there).
fn memory_metrics(out: &mut String) {
    if let Ok(statm) = std::fs::read_to_string("/proc/self/statm") {
        let mut fields = statm
            .split_whitespace()
            .map(|f| f.parse::<f64>().unwrap_or(0.0));
        let page = rustix::param::page_size() as f64;
        if let (Some(size), Some(resident)) = (fields.next(), fields.next()) {
            write_metric(
                out,
                "process_virtual_memory_bytes",
                "gauge",
                "Virtual memory size in bytes.",
                size * page,
            );
            write_metric(
                out,
                "process_resident_memory_bytes",
                "gauge",
                "Resident memory size in bytes.",
                resident * page,
            );
        }
    }
}

/// Open file descriptors and their soft limit: a broker holds one per segment file and
/// connection, so running out of them is how a large broker fails.
fn fd_metrics(out: &mut String) {
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        write_metric(
            out,
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            fds.count() as f64,
        );
    }
    if let Ok(limits) = std::fs::read_to_string("/proc/self/limits") {
        if let Some(soft) = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3))
            .and_then(|v| v.parse::<f64>().ok())
        {
            write_metric(
                out,
                "process_max_fds",
                "gauge",
                "Maximum number of open file descriptors.",
                soft,
            );
        }
    }
}

/// CPU time and start time, from /proc/self/stat (in clock ticks there; the start time
/// counts from boot, hence /proc/stat's `btime`).
fn cpu_and_start_metrics(out: &mut String) {
    if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
        // After the parenthesised command name: utime and stime are fields 11 and 12,
        // starttime field 19 (0-based), in clock ticks.
        if let Some((_, rest)) = stat.rsplit_once(')') {
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let ticks = rustix::param::clock_ticks_per_second() as f64;
            let value = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
            if let (Some(utime), Some(stime)) = (value(11), value(12)) {
                write_metric(
                    out,
                    "process_cpu_seconds_total",
                    "counter",
                    "Total user and system CPU time spent in seconds.",
                    (utime + stime) / ticks,
                );
            }
            if let (Some(start), Some(boot)) = (value(19), boot_time()) {
                write_metric(
                    out,
                    "process_start_time_seconds",
                    "gauge",
                    "Start time of the process since unix epoch in seconds.",
                    boot + start / ticks,
                );
            }
        }
    }
}

/// The system's boot time in seconds since the epoch (`btime` of /proc/stat).
fn boot_time() -> Option<f64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// Calls `f` with every error code of a response: the top-level one and each topic's and
/// partition's, as Kafka's `errorCounts` counts them. APIs not listed count nothing.
///
/// Longer than 70 lines because it is one exhaustive `match` with an arm per API, each
/// naming where that response keeps its error codes; split by API it would only spread
/// one table over several functions.
pub fn response_errors(body: &ResponseKind, f: &mut dyn FnMut(i16)) {
    match body {
        ResponseKind::Produce(r) => r
            .responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .for_each(|p| f(p.error_code)),
        ResponseKind::Fetch(r) => {
            f(r.error_code);
            r.responses
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| f(p.error_code));
        }
        ResponseKind::ListOffsets(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code)),
        ResponseKind::Metadata(r) => {
            for t in &r.topics {
                f(t.error_code);
                t.partitions.iter().for_each(|p| f(p.error_code));
            }
        }
        ResponseKind::OffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code)),
        ResponseKind::OffsetFetch(r) => {
            f(r.error_code);
            r.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| f(p.error_code));
            for g in &r.groups {
                f(g.error_code);
                g.topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .for_each(|p| f(p.error_code));
            }
        }
        ResponseKind::FindCoordinator(r) => {
            f(r.error_code);
            r.coordinators.iter().for_each(|c| f(c.error_code));
        }
        ResponseKind::JoinGroup(r) => f(r.error_code),
        ResponseKind::Heartbeat(r) => f(r.error_code),
        ResponseKind::SyncGroup(r) => f(r.error_code),
        ResponseKind::LeaveGroup(r) => {
            f(r.error_code);
            r.members.iter().for_each(|m| f(m.error_code));
        }
        ResponseKind::DescribeGroups(r) => r.groups.iter().for_each(|g| f(g.error_code)),
        ResponseKind::ListGroups(r) => f(r.error_code),
        ResponseKind::DeleteGroups(r) => r.results.iter().for_each(|g| f(g.error_code)),
        ResponseKind::ApiVersions(r) => f(r.error_code),
        ResponseKind::CreateTopics(r) => r.topics.iter().for_each(|t| f(t.error_code)),
        ResponseKind::DeleteTopics(r) => r.responses.iter().for_each(|t| f(t.error_code)),
        ResponseKind::CreatePartitions(r) => r.results.iter().for_each(|t| f(t.error_code)),
        ResponseKind::DeleteRecords(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code)),
        ResponseKind::DescribeConfigs(r) => r.results.iter().for_each(|c| f(c.error_code)),
        ResponseKind::AlterConfigs(r) => r.responses.iter().for_each(|c| f(c.error_code)),
        ResponseKind::IncrementalAlterConfigs(r) => {
            r.responses.iter().for_each(|c| f(c.error_code));
        }
        ResponseKind::InitProducerId(r) => f(r.error_code),
        ResponseKind::EndTxn(r) => f(r.error_code),
        ResponseKind::AddOffsetsToTxn(r) => f(r.error_code),
        ResponseKind::TxnOffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code)),
        ResponseKind::AddPartitionsToTxn(r) => {
            f(r.error_code);
            r.results_by_topic_v3_and_below
                .iter()
                .flat_map(|t| &t.results_by_partition)
                .for_each(|p| f(p.partition_error_code));
            for txn in &r.results_by_transaction {
                txn.topic_results
                    .iter()
                    .flat_map(|t| &t.results_by_partition)
                    .for_each(|p| f(p.partition_error_code));
            }
        }
        ResponseKind::OffsetForLeaderEpoch(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code)),
        ResponseKind::DescribeCluster(r) => f(r.error_code),
        ResponseKind::DescribeTopicPartitions(r) => r.topics.iter().for_each(|t| f(t.error_code)),
        ResponseKind::DescribeProducers(r) => r
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code)),
        ResponseKind::ListTransactions(r) => f(r.error_code),
        ResponseKind::DescribeTransactions(r) => {
            r.transaction_states.iter().for_each(|t| f(t.error_code));
        }
        ResponseKind::ElectLeaders(r) => {
            f(r.error_code);
            r.replica_election_results
                .iter()
                .flat_map(|t| &t.partition_result)
                .for_each(|p| f(p.error_code));
        }
        _ => {}
    }
}
