//! `logbook-bench`: starts a `logbook` broker (or targets a running one) and measures
//! it end to end with librdkafka (the `rdkafka` crate), printing a table per section
//! and, last, one JSON line (`--json-out` also writes it to a file; `--check
//! BASELINE.json` compares it with a committed baseline and exits 1 on a gross
//! regression).
//!
//! Modes with their own options: `logbook-bench failover --trials N` (kill-the-leader
//! trials on a 3-node cluster, `failover.rs`) and `logbook-bench cluster` (acks=all
//! throughput, CPU per GB summed over the nodes and latency, RF=3 against RF=1,
//! `cluster.rs`); both run against Apache Kafka (`--target kafka`) or Logbook.
//!
//! Sections (`--only a,b`): `ceilings` (machine limits), `startup` (empty data dir),
//! `produce`, `consume` (cold, warm, hot tail), `latency`, `txn` (transactional produce
//! and read_committed latency, see `txn.rs`), `recovery` (start after SIGKILL with
//! data), `scale` (many partitions), `connections`, and, only when named, `headline`
//! (raw Produce requests resent by a client that costs almost nothing, so the broker is
//! the bound: `raw_produce.rs`). Each section that
//! needs a broker starts a fresh one on a new temporary data dir and a free port, so
//! its CPU and memory figures are its own.
//!
//! `--check` guards only steady figures (identical runs here differ by ±20% in
//! throughput, ±30% in CPU per GB and up to 4x in peak RSS): the acks=all 8-partition
//! produce scenario's broker CPU-s/GB over the same run's reference workload (fail above
//! 1.3x; see `ceilings::reference_produce_cpu_s_per_gb`), e2e p99.9 (2x + 2 ms), broker
//! CPU-s/GB over all produce scenarios (fail above 2x + 0.2) and over the warm reads (2x + 0.1; cold
//! reads are mostly the kernel's page-cache refill and swing 4x), the MB/s of both
//! (fail below 1/5), acks=all and acks=1 p99 (fail above 5x + 5 ms), idle RSS (2x + 16
//! MiB), peak RSS (3x + 128 MiB), start-up times (5x + 1 s), and any error, lost or
//! missing record, unserved connection or failed section (fail above 0).
//!
//! Units: MB and GB are 10^6 and 10^9 bytes of record values (1 KiB each by default);
//! CPU seconds are user + system from `/proc/<pid>/stat` (broker) and `/proc/self/stat`
//! (the bench: every librdkafka thread); "cores" is CPU seconds per wall second.
//!
//! # Back-of-envelope, written before measuring
//!
//! Machine: 2 vCPUs (AMD EPYC, shared with other work), 24 GB RAM, one virtio disk
//! (ext4, volatile write cache), Linux 6.x.
//!
//! - **Disk, sequential with `fdatasync` per 1 MiB.** Each `fdatasync` is a cache
//!   flush round trip to the host, ~1–3 ms, plus ~1 ms to move 1 MiB: 2–4 ms per MiB,
//!   so 250–500 MB/s, or 150 MB/s if the host is busy. Small fsyncs (4 KiB +
//!   `fdatasync`): 300–2,000 per second. acks=all throughput cannot beat the first
//!   figure by much (group commit syncs more than 1 MiB at a time, so it may reach
//!   1–1.5× of it).
//! - **Loopback TCP, one stream.** Two kernel copies per byte at ~5–10 GB/s each, plus
//!   syscalls: 2–4 GB/s with 256 KiB writes when sender and receiver each get a core.
//!   Broker produce or consume through loopback shares the same two cores with
//!   librdkafka, so a tenth of that is already good.
//! - **Broker CPU per GB produced.** Socket read (one copy, ~0.1 s/GB in the kernel),
//!   CRC-32C of each batch (hardware, ~0.1 s/GB), write into the page cache (one copy,
//!   ~0.15 s/GB), fsync (mostly waiting, little CPU) and protocol work per 1 MiB batch
//!   (negligible): ≈ 0.4–0.6 CPU-s/GB. librdkafka's producer copies each record into
//!   its queue and builds batches: ~1.5–2.5 CPU-s/GB. With 2 cores the *client* bounds
//!   throughput: ≈ 2 cores / (0.5 + 2) s/GB ≈ 400–800 MB/s, capped by the disk figure
//!   for acks=all (every write must be on disk before the ack): expect 150–400 MB/s.
//! - **Broker CPU per GB consumed.** `pread` from the page cache (one copy) plus the
//!   socket write (one copy): ≈ 0.2–0.3 CPU-s/GB. The librdkafka consumer parses every
//!   record: ~1–1.5 CPU-s/GB, so expect 500–1,000 MB/s warm; cold adds disk reads
//!   (virtio reads ≥ 500 MB/s, so still client-bound).
//! - **End-to-end latency at 5,000 × 1 KiB/s (5 MB/s).** The producer's 5 ms linger
//!   makes one ~25 KiB batch per 5 ms (200 produce requests and ≤ 200 fsyncs per
//!   second, far below the fsync ceiling). A record waits 0–5 ms in linger, ~0.1 ms on
//!   the wire, one fsync (~1–3 ms; the high watermark, hence visibility to consumers,
//!   moves after the fsync even for acks=1), then the long-polling fetch wakes (~0.2 ms):
//!   p50 ≈ 4–6 ms, p99 ≈ 8–10 ms; acks=1 about the same because visibility waits for the
//!   same fsync.
//! - **Start-up.** Empty dir: exec + runtime + bind ≈ 2–10 ms. After SIGKILL with 1 GiB
//!   in 100 partitions: opening 100 partitions' segments and re-validating the unflushed
//!   tail (CRC at several GB/s, from the page cache): ≈ 50–300 ms.
//! - **Scale.** 10,000 partitions × (a few open files + index state, ~10–50 KiB) ≈
//!   100–500 MiB; 2,000 connections × (buffers, ~10–50 KiB) ≈ 20–100 MiB.

mod broker;
mod ceilings;
mod chaos;
mod cluster;
mod connections;
mod failover;
mod kafka;
mod procfs;
mod raw_produce;
mod report;
mod txn;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;

use crate::broker::{BrokerSpec, OwnedBroker, StartTimes, Target};
use crate::kafka::ProducerSettings;
use crate::procfs::{Usage, UsageDelta};
use crate::report::{fmt, pct, Report, Table};

/// Errors the bench reports and stops on.
pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const SECTIONS: [&str; 9] = [
    "ceilings",
    "startup",
    "produce",
    "consume",
    "latency",
    "txn",
    "recovery",
    "scale",
    "connections",
];
/// Sections that run only when named in `--only`.
const OPT_IN_SECTIONS: [&str; 1] = ["headline"];
const MIB: u64 = 1024 * 1024;
/// The pace of the paced-fsync ceiling (250 flushes a second): flushes that are not back
/// to back, as a broker's are under a steady load (see `ceilings::paced_fsync_ms`).
const PACED_FSYNC_INTERVAL: Duration = Duration::from_millis(4);
/// MiB per run of the produce section's reference workload.
const REFERENCE_MIB: u64 = 64;

/// End-to-end benchmark of the logbook broker (see the crate docs for the sketch).
#[derive(Parser, Debug)]
#[command(version)]
struct Opts {
    /// The broker binary to start (default: target/release/logbook beside this binary).
    #[arg(long)]
    broker_bin: Option<PathBuf>,
    /// Benchmark a running broker at HOST:PORT instead (skips startup and recovery).
    #[arg(long, conflicts_with = "broker_bin")]
    bootstrap: Option<String>,
    /// With --bootstrap: the broker's pid, for CPU and memory figures.
    #[arg(long, requires = "bootstrap")]
    broker_pid: Option<u32>,
    /// An extra flag for every started broker (repeat it), e.g. --broker-arg=--flush-policy=os.
    #[arg(long, allow_hyphen_values = true)]
    broker_arg: Vec<String>,
    /// A librdkafka producer property for every producer, KEY=VALUE (repeat it; applied last).
    #[arg(long)]
    producer_arg: Vec<String>,
    /// A librdkafka consumer property for every consumer, KEY=VALUE (repeat it; applied last).
    #[arg(long)]
    consumer_arg: Vec<String>,
    /// Where the brokers' temporary data directories go (and the disk ceiling is measured).
    #[arg(long)]
    data_root: Option<PathBuf>,
    /// Small volumes: the whole run takes well under two minutes (for CI).
    #[arg(long)]
    quick: bool,
    /// Run only these sections (comma-separated): ceilings, startup, produce, consume,
    /// latency, txn, recovery, scale, connections.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Compare with this baseline JSON and exit 1 on a gross regression.
    #[arg(long)]
    check: Option<PathBuf>,
    /// Also write the JSON line to this file.
    #[arg(long)]
    json_out: Option<PathBuf>,
    /// Instead of benchmarking: print min / median / max of every metric over the JSON
    /// lines in these files (from earlier runs' --json-out), e.g. five alternating runs;
    /// with --check, compare the medians with the baseline.
    #[arg(long, num_args = 1.., value_name = "JSON")]
    summarize: Vec<PathBuf>,
    /// Value bytes per record.
    #[arg(long, default_value_t = 1024)]
    value_bytes: usize,
    /// Producer instances (each its own connection and thread) in throughput runs.
    #[arg(long, default_value_t = 4)]
    producers: usize,
    /// MiB of values per produce scenario [default: 512, quick 128].
    #[arg(long)]
    produce_mib: Option<u64>,
    /// Produce-section records carry one of this many keys (0: no keys); with
    /// `--produce-topic-config cleanup.policy=compact` the log cleaner has work.
    #[arg(long, default_value_t = 0)]
    produce_keys: u64,
    /// A topic config for the produce section's topics, KEY=VALUE (repeat it), e.g.
    /// cleanup.policy=compact and a small segment.bytes, so the cleaner runs while producing.
    #[arg(long, value_parser = key_value)]
    produce_topic_config: Vec<(String, String)>,
    /// MiB of values read back in the consume section [default: 512, quick 128].
    #[arg(long)]
    consume_mib: Option<u64>,
    /// MiB of values in the hot-tail read [default: 256, quick 64].
    #[arg(long)]
    hot_tail_mib: Option<u64>,
    /// Records per second in the latency runs.
    #[arg(long, default_value_t = 5000)]
    latency_rate: u32,
    /// Seconds per latency run [default: 30, quick 5].
    #[arg(long)]
    latency_secs: Option<f64>,
    /// A noisy neighbour beside each latency run: a process writing this many MiB of
    /// buffered data to a new file on the data disk, pausing a second and starting again
    /// until the run ends (the last two files kept), as a service sharing the machine
    /// would (issue 24: the tail on a shared disk). 0: none.
    #[arg(long, default_value_t = 0)]
    neighbour_mib: u64,
    /// The neighbour also fdatasyncs each file once written (as `dd conv=fdatasync`), so
    /// its data reaches the disk during the run; without it the kernel keeps it dirty in
    /// memory for 30 s and the files are gone before that.
    #[arg(long)]
    neighbour_sync: bool,
    /// MiB of values per scenario in the txn section's throughput runs [default: 256, quick 64].
    #[arg(long)]
    txn_mib: Option<u64>,
    /// Records per transaction in the txn section's throughput runs.
    #[arg(long, default_value_t = 100)]
    txn_records: u64,
    /// Milliseconds between commits in the txn section's latency runs.
    #[arg(long, default_value_t = 100)]
    txn_commit_ms: u64,
    /// MiB of values written before the SIGKILL in the recovery section [default: 1024, quick 128].
    #[arg(long)]
    recovery_mib: Option<u64>,
    /// Partitions holding the recovery data.
    #[arg(long, default_value_t = 100)]
    recovery_partitions: i32,
    /// Partitions in the scale section [default: 10000, quick 500].
    #[arg(long)]
    partitions: Option<i32>,
    /// Concurrent connections in the connections section.
    #[arg(long, default_value_t = 2000)]
    connections: usize,
}

/// The produce table's note on keys and topic configs, empty when neither is given.
fn produce_shape(keys: u64, configs: &[(String, String)]) -> String {
    let mut note = String::new();
    if keys > 0 {
        note.push_str(&format!(", {keys} keys"));
    }
    for (key, value) in configs {
        note.push_str(&format!(", {key}={value}"));
    }
    note
}

/// Parses `KEY=VALUE`.
fn key_value(pair: &str) -> Result<(String, String), String> {
    pair.split_once('=')
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .ok_or_else(|| format!("'{pair}' is not KEY=VALUE"))
}

/// Volumes after applying `--quick` defaults.
struct Sizes {
    produce_mib: u64,
    consume_mib: u64,
    hot_tail_mib: u64,
    latency_secs: f64,
    latency_warmup: f64,
    txn_mib: u64,
    recovery_mib: u64,
    partitions: i32,
    disk_mib: u64,
    fsync_secs: f64,
    loopback_mib: u64,
    startups: usize,
    scale_latency_secs: f64,
}

impl Sizes {
    fn new(o: &Opts) -> Sizes {
        let q = o.quick;
        Sizes {
            produce_mib: o.produce_mib.unwrap_or(if q { 128 } else { 512 }),
            consume_mib: o.consume_mib.unwrap_or(if q { 128 } else { 512 }),
            hot_tail_mib: o.hot_tail_mib.unwrap_or(if q { 64 } else { 256 }),
            latency_secs: o.latency_secs.unwrap_or(if q { 5.0 } else { 30.0 }),
            latency_warmup: if q { 1.0 } else { 2.0 },
            txn_mib: o.txn_mib.unwrap_or(if q { 64 } else { 256 }),
            recovery_mib: o.recovery_mib.unwrap_or(if q { 128 } else { 1024 }),
            partitions: o.partitions.unwrap_or(if q { 500 } else { 10_000 }),
            disk_mib: if q { 128 } else { 512 },
            fsync_secs: if q { 1.0 } else { 3.0 },
            loopback_mib: if q { 1024 } else { 4096 },
            startups: if q { 3 } else { 5 },
            scale_latency_secs: if q { 3.0 } else { 10.0 },
        }
    }
}

/// Shared state of one run.
struct Bench {
    opts: Opts,
    sizes: Sizes,
    spec: Option<BrokerSpec>,
    data_root: PathBuf,
    rt: tokio::runtime::Runtime,
    report: Report,
    disk_mb_s: Option<f64>,
    loopback_mb_s: Option<f64>,
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("logbook-bench: {error}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Res<bool> {
    // Modes with options of their own (issue 11): `failover` (kill-the-leader trials) and
    // `cluster` (figures on a 3-node cluster); see failover.rs and cluster.rs.
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("failover") => return failover::main(args.get(1..).unwrap_or_default()),
        Some("cluster") => return cluster::main(args.get(1..).unwrap_or_default()),
        Some("chaos") => return chaos::main(args.get(1..).unwrap_or_default()),
        Some("neighbour") => return ceilings::neighbour_main(args.get(2..).unwrap_or_default()),
        _ => {}
    }
    let opts = Opts::parse();
    if !opts.summarize.is_empty() {
        let medians = report::summarize(&opts.summarize)?;
        return match &opts.check {
            Some(baseline) => report::check(&medians, baseline),
            None => Ok(true),
        };
    }
    check_sections(&opts.only)?;
    let (mut bench, nofile) = Bench::new(opts)?;

    let unix = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let load_start = procfs::loadavg();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned();
    let cpus = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    println!(
        "logbook-bench {} · {} · {cpus} CPUs · Linux {kernel} · load {load_start} · nofile {nofile}{}",
        if bench.opts.quick { "--quick" } else { "(full)" },
        report::utc_date(unix),
        bench.spec.as_ref().map(|s| format!(" · broker {} {}", s.bin.display(), s.args.join(" "))).unwrap_or_default()
    );

    let mut failed = Vec::new();
    for section in section_plan(&bench.opts.only) {
        if run_section(&mut bench, section)? {
            failed.push(section);
        }
    }

    let load_end = procfs::loadavg();
    println!(
        "\n===== summary ({}, load at start {load_start}, at end {load_end})",
        report::utc_date(unix)
    );
    for table in &bench.report.tables {
        println!("{table}");
    }
    let json = summary_json(&bench, unix, cpus, &kernel, &load_start, &load_end);
    let line = serde_json::to_string(&json)?;
    println!("{line}");
    if let Some(path) = &bench.opts.json_out {
        std::fs::write(path, format!("{line}\n"))?;
    }
    let checked = match &bench.opts.check {
        Some(baseline) => report::check(&bench.report.metrics, baseline)?,
        None => true,
    };
    if !failed.is_empty() {
        eprintln!("logbook-bench: sections failed: {}", failed.join(", "));
    }
    Ok(checked && failed.is_empty())
}

/// The sections to run, in order: every default section `--only` allows, then the
/// opt-in ones it names.
fn section_plan(only: &[String]) -> Vec<&'static str> {
    let wanted = |name: &str| bench_wants(only, name);
    let mut plan: Vec<&str> = SECTIONS.into_iter().filter(|s| wanted(s)).collect();
    plan.extend(
        OPT_IN_SECTIONS
            .into_iter()
            .filter(|s| only.iter().any(|o| o == s)),
    );
    plan
}

impl Bench {
    /// A run's state: client overrides set, the data root created, the broker to start
    /// checked, the file limit raised (brokers inherit it) and the runtime built. Also
    /// returns the file limit, for the header line.
    fn new(opts: Opts) -> Res<(Self, u64)> {
        kafka::set_overrides(&opts.producer_arg, &opts.consumer_arg)?;
        let data_root = opts.data_root.clone().unwrap_or_else(std::env::temp_dir);
        std::fs::create_dir_all(&data_root)?;
        let spec = broker_spec(&opts, &data_root)?;
        // Brokers inherit the limit: 10,000 partitions hold tens of thousands of files.
        let nofile = connections::raise_nofile(1 << 18);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let sizes = Sizes::new(&opts);
        let bench = Bench {
            opts,
            sizes,
            spec,
            data_root,
            rt,
            report: Report::default(),
            disk_mb_s: None,
            loopback_mb_s: None,
        };
        Ok((bench, nofile))
    }
}

/// Refuses a `--only` naming no section.
fn check_sections(only: &[String]) -> Res<()> {
    for section in only {
        if !SECTIONS.contains(&section.as_str()) && !OPT_IN_SECTIONS.contains(&section.as_str()) {
            return Err(format!(
                "unknown section {section:?}; sections: {} (and, only when named: {})",
                SECTIONS.join(", "),
                OPT_IN_SECTIONS.join(", ")
            )
            .into());
        }
    }
    Ok(())
}

/// The broker each section starts, unless `--bootstrap` names one already running: the
/// binary (which must exist), its extra arguments and where its data goes.
fn broker_spec(opts: &Opts, data_root: &Path) -> Res<Option<BrokerSpec>> {
    Ok(if opts.bootstrap.is_some() {
        None
    } else {
        let bin = opts.broker_bin.clone().unwrap_or_else(default_broker_bin);
        if !bin.exists() {
            return Err(format!(
                "no broker binary at {}: build it with `cargo build --release -p logbook-broker` or pass --broker-bin",
                bin.display()
            )
            .into());
        }
        Some(BrokerSpec {
            bin,
            args: opts.broker_arg.clone(),
            data_root: data_root.to_path_buf(),
        })
    })
}

/// Runs one section, after waiting for a quiet disk if it times the disk; a failed
/// section is reported (and fails --check) but the others still run. `true` when it
/// failed.
fn run_section(bench: &mut Bench, section: &str) -> Res<bool> {
    // Only sections that time the disk wait; the wait is shown, not hidden.
    // The latency percentiles need the longest quiet stretch (rare stalls move p99.9).
    let quiet_windows = match section {
        "latency" | "txn" if !bench.opts.quick => 40,
        "produce" | "headline" | "consume" | "latency" | "txn" | "recovery" | "scale" => 2,
        _ => 0,
    };
    if quiet_windows > 0 {
        let waited =
            ceilings::settle_disk(&bench.data_root, quiet_windows, Duration::from_secs(90))?;
        println!(
            "\n   (disk settled after {:.1} s: 4 KiB fdatasync under 5 ms for {:.1} s)",
            waited.as_secs_f64(),
            f64::from(quiet_windows) * 0.5
        );
    }
    let load = procfs::loadavg();
    println!("\n== {section} (load {load})");
    let started = Instant::now();
    let outcome = match section {
        "ceilings" => bench.ceilings(),
        "startup" => bench.startup(),
        "produce" => bench.produce(),
        "headline" => bench.headline(),
        "consume" => bench.consume(),
        "latency" => bench.latency(),
        "txn" => bench.txn(),
        "recovery" => bench.recovery(),
        "scale" => bench.scale(),
        _ => bench.connections(),
    };
    // A failed section is reported (and fails --check) but the others still run.
    let failed = outcome.is_err();
    if let Err(error) = outcome {
        println!("   FAILED: {error}");
        bench
            .report
            .tables
            .push(format!("{section}: FAILED: {error}\n"));
        bench.report.metric(format!("{section}.failed"), Some(1.0));
    }
    println!("   ({section}: {:.1} s)", started.elapsed().as_secs_f64());
    Ok(failed)
}

/// The run's machine-readable summary: date, host, configuration and every metric.
fn summary_json(
    bench: &Bench,
    unix: u64,
    cpus: usize,
    kernel: &str,
    load_start: &str,
    load_end: &str,
) -> serde_json::Value {
    serde_json::json!({
        "bench": "logbook-bench",
        "schema": 1,
        "date": report::utc_date(unix),
        "unix_time": unix,
        "quick": bench.opts.quick,
        "host": { "cpus": cpus, "kernel": kernel, "loadavg_start": load_start, "loadavg_end": load_end },
        "config": {
            "value_bytes": bench.opts.value_bytes,
            "producers": bench.opts.producers,
            "produce_mib": bench.sizes.produce_mib,
            "produce_keys": bench.opts.produce_keys,
            "produce_topic_config": bench.opts.produce_topic_config,
            "latency_rate": bench.opts.latency_rate,
            "latency_secs": bench.sizes.latency_secs,
            "neighbour_mib": bench.opts.neighbour_mib,
            "neighbour_sync": bench.opts.neighbour_sync,
            "txn_mib": bench.sizes.txn_mib,
            "txn_records": bench.opts.txn_records,
            "txn_commit_ms": bench.opts.txn_commit_ms,
            "broker_args": bench.opts.broker_arg,
            "producer_args": bench.opts.producer_arg,
            "consumer_args": bench.opts.consumer_arg,
            "only": bench.opts.only,
        },
        "metrics": bench.report.metrics,
    })
}

/// What a consume pass reads back: the topic a section filled, and how many records.
struct ReadBack<'a> {
    bootstrap: &'a str,
    topic: &'a str,
    partitions: i32,
    records: u64,
    /// The broker's process, for its CPU and disk reads.
    pid: Option<u32>,
}

/// Polls a new consumer for half a second before anything is produced, so that the hot
/// tail's clock does not include its connecting and listing offsets.
fn settle_consumer(consumer: &rdkafka::consumer::BaseConsumer) {
    let settle = Instant::now();
    while settle.elapsed() < Duration::from_millis(500) {
        let _ = consumer.poll(Duration::from_millis(50));
    }
}

/// The scale section's fetch step: one consumer assigned every partition reads back
/// `expected` records. Returns the run, its seconds and the broker's RSS after it (taken
/// once the consumer is gone).
fn scale_fetch(
    t: &mut Table,
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    expected: u64,
    target: &Target,
) -> Res<(kafka::ConsumeRun, f64, Option<f64>)> {
    let pid = target.pid();
    let start = Usage::sample(pid);
    let consumer = kafka::assigned_consumer(bootstrap, topic, partitions)?;
    let run = kafka::consume_count(&consumer, expected)?;
    let u = start.since(pid);
    drop(consumer);
    let after_fetch = target.rss_mib();
    let step = "fetch all (one consumer assigned every partition)";
    scale_step(t, step, &u, after_fetch);
    Ok((run, u.wall, after_fetch))
}

/// One scale step's row (seconds, broker RSS after, broker CPU), printed as it comes.
fn scale_step(t: &mut Table, step: &str, u: &UsageDelta, rss_after: Option<f64>) {
    t.row(vec![
        step.to_owned(),
        fmt(Some(u.wall), 2),
        fmt(rss_after, 1),
        fmt(u.broker_cpu, 2),
    ]);
    println!(
        "   {}",
        t.render().lines().last().unwrap_or_default().trim()
    );
}

/// A failed CreateTopics of the scale section, with the open-files limit and the last
/// lines of the broker's log (many partitions fail on file limits first).
fn with_log_tail(target: &Target, e: &dyn std::fmt::Display) -> String {
    let tail = match target {
        Target::Owned(broker) => broker.log_tail(),
        Target::External { .. } => String::new(),
    };
    let mut last: Vec<&str> = tail.lines().rev().take(3).collect();
    last.reverse();
    let last = last.join("\n     ");
    format!(
        "{e} (open-files limit {}); broker log ends:\n     {last}",
        connections::raise_nofile(0)
    )
}

/// Kills the scale section's broker and times its exit and the removal of its data
/// directory (dropping it removes it), the teardown of many partitions.
fn tear_down(mut broker: OwnedBroker) {
    let t = Instant::now();
    broker.kill();
    let killed = t.elapsed().as_secs_f64();
    drop(broker);
    println!(
        "   teardown: SIGKILL → exit {killed:.1} s, data dir removed {:.1} s",
        t.elapsed().as_secs_f64() - killed
    );
}

fn bench_wants(only: &[String], section: &str) -> bool {
    only.is_empty() || only.iter().any(|s| s == section)
}

/// `target/release/logbook` beside this binary, else the workspace's.
fn default_broker_bin() -> PathBuf {
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
    {
        let beside = dir.join("logbook");
        if beside.exists() {
            return beside;
        }
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/logbook")
}

/// GB of values from a record count.
#[expect(
    clippy::cast_precision_loss,
    reason = "byte counts stay far below 2^52"
)]
fn gb(bytes: u64) -> f64 {
    bytes as f64 / 1e9
}

#[expect(clippy::cast_precision_loss, reason = "counts stay far below 2^52")]
fn f(n: u64) -> f64 {
    n as f64
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Median of a small sample.
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Throughput figures from one measured phase: rates and cores over `seconds` (the
/// measured window), CPU per GB over the whole sample (set-up included).
struct Phase {
    mb_s: f64,
    records_s: f64,
    broker_cpu_per_gb: Option<f64>,
    client_cpu_per_gb: Option<f64>,
    broker_cores: Option<f64>,
    client_cores: Option<f64>,
}

impl Phase {
    fn new(records: u64, bytes: u64, seconds: f64, usage: &procfs::UsageDelta) -> Phase {
        Phase {
            mb_s: f(bytes) / seconds / 1e6,
            records_s: f(records) / seconds,
            broker_cpu_per_gb: usage.broker_cpu.map(|c| c / gb(bytes)),
            client_cpu_per_gb: usage.client_cpu.map(|c| c / gb(bytes)),
            broker_cores: usage.broker_cpu.map(|c| c / seconds),
            client_cores: usage.client_cpu.map(|c| c / seconds),
        }
    }

    /// The table cells every throughput table shows, in this order: MB/s, records/s,
    /// broker and client CPU-s/GB, broker and client cores.
    fn cells(&self) -> Vec<String> {
        vec![
            fmt(Some(self.mb_s), 0),
            fmt(Some(self.records_s), 0),
            fmt(self.broker_cpu_per_gb, 2),
            fmt(self.client_cpu_per_gb, 2),
            fmt(self.broker_cores, 2),
            fmt(self.client_cores, 2),
        ]
    }

    fn record(&self, report: &mut Report, prefix: &str) {
        report.metric(format!("{prefix}.mb_s"), Some(self.mb_s));
        report.metric(format!("{prefix}.records_s"), Some(self.records_s));
        report.metric(
            format!("{prefix}.broker_cpu_s_per_gb"),
            self.broker_cpu_per_gb,
        );
        report.metric(
            format!("{prefix}.client_cpu_s_per_gb"),
            self.client_cpu_per_gb,
        );
        report.metric(format!("{prefix}.broker_cores"), self.broker_cores);
        report.metric(format!("{prefix}.client_cores"), self.client_cores);
    }
}

/// Sums of several phases, for the totals `--check` guards (steadier than any one).
#[derive(Default)]
struct Totals {
    records: u64,
    bytes: u64,
    seconds: f64,
    broker_cpu: Option<f64>,
    client_cpu: Option<f64>,
    wall: f64,
}

impl Totals {
    fn add(&mut self, records: u64, bytes: u64, seconds: f64, usage: &procfs::UsageDelta) {
        self.records += records;
        self.bytes += bytes;
        self.seconds += seconds;
        self.wall += usage.wall;
        self.broker_cpu = usage.broker_cpu.map(|c| c + self.broker_cpu.unwrap_or(0.0));
        self.client_cpu = usage.client_cpu.map(|c| c + self.client_cpu.unwrap_or(0.0));
    }

    fn phase(&self) -> Phase {
        let usage = procfs::UsageDelta {
            wall: self.wall,
            broker_cpu: self.broker_cpu,
            client_cpu: self.client_cpu,
            broker_disk_read: None,
        };
        Phase::new(self.records, self.bytes, self.seconds, &usage)
    }
}

impl Bench {
    /// A fresh broker (or the `--bootstrap` one) for a section.
    fn target(&self) -> Res<(Target, Option<StartTimes>)> {
        match (&self.spec, &self.opts.bootstrap) {
            (Some(spec), _) => {
                let (broker, times) = OwnedBroker::start(spec)?;
                Ok((Target::Owned(broker), Some(times)))
            }
            (None, Some(bootstrap)) => Ok((
                Target::External {
                    bootstrap: bootstrap.clone(),
                    pid: self.opts.broker_pid,
                },
                None,
            )),
            (None, None) => Err("neither a broker binary nor --bootstrap".into()),
        }
    }

    /// A topic name unique to this run (matters with --bootstrap).
    fn topic(&self, name: &str) -> String {
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        if self.spec.is_some() {
            format!("bench-{name}")
        } else {
            format!("bench-{name}-{unix}")
        }
    }

    fn records_for(&self, mib: u64) -> u64 {
        (mib * MIB / self.opts.value_bytes as u64).max(1)
    }

    fn ceilings(&mut self) -> Res<()> {
        let dir = self.data_root.clone();
        let disk = ceilings::disk_fdatasync_mb_s(&dir, self.sizes.disk_mib)?;
        let (fsyncs, fsync_ms) = ceilings::fsyncs_per_second(&dir, self.sizes.fsync_secs)?;
        let (paced_p50, paced_p99) =
            ceilings::paced_fsync_ms(&dir, PACED_FSYNC_INTERVAL, self.sizes.fsync_secs)?;
        let loopback = ceilings::loopback_mb_s(&self.rt, self.sizes.loopback_mib)?;
        self.disk_mb_s = Some(disk);
        self.loopback_mb_s = Some(loopback);
        let mut t = Table::new(
            format!("machine ceilings (data root {})", dir.display()),
            &["ceiling", "figure"],
        );
        t.row(vec![
            "sequential write, fdatasync per 1 MiB".into(),
            format!("{disk:.0} MB/s"),
        ]);
        t.row(vec![
            "4 KiB write + fdatasync".into(),
            format!("{fsyncs:.0} /s (median {fsync_ms:.2} ms)"),
        ]);
        t.row(vec![
            format!(
                "4 KiB write + fdatasync every {} ms",
                PACED_FSYNC_INTERVAL.as_millis()
            ),
            format!("p50 {paced_p50:.2} ms, p99 {paced_p99:.2} ms"),
        ]);
        t.row(vec![
            "loopback TCP, one stream".into(),
            format!("{loopback:.0} MB/s"),
        ]);
        self.report.table(&t);
        let r = &mut self.report;
        r.metric("ceiling.disk_fdatasync_1mib.mb_s", Some(disk));
        r.metric("ceiling.fsync_4kib.per_s", Some(fsyncs));
        r.metric("ceiling.fsync_4kib_paced.p50_ms", Some(paced_p50));
        r.metric("ceiling.fsync_4kib_paced.p99_ms", Some(paced_p99));
        r.metric("ceiling.loopback.mb_s", Some(loopback));
        Ok(())
    }

    fn startup(&mut self) -> Res<()> {
        let Some(spec) = self.spec.clone() else {
            println!("   skipped: needs a broker the bench starts");
            return Ok(());
        };
        let (mut accept, mut api, mut idle) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..self.sizes.startups {
            let (broker, times) = OwnedBroker::start(&spec)?;
            std::thread::sleep(Duration::from_millis(300));
            accept.push(ms(times.accept));
            api.push(ms(times.api));
            idle.extend(broker.rss_mib());
        }
        let row = |name: &str, v: &mut Vec<f64>, d: usize| {
            let mut s = v.clone();
            let med = median(&mut s);
            vec![
                name.to_owned(),
                fmt(s.first().copied(), d),
                fmt(Some(med), d),
                fmt(s.last().copied(), d),
            ]
        };
        let mut t = Table::new(
            format!(
                "start on an empty data dir ({} starts; spawn → poll connect every 1 ms)",
                self.sizes.startups
            ),
            &["figure", "min", "median", "max"],
        );
        t.row(row("spawn → TCP accepted, ms", &mut accept, 1));
        t.row(row("spawn → ApiVersions answered, ms", &mut api, 1));
        t.row(row("idle RSS 300 ms after start, MiB", &mut idle, 1));
        self.report.table(&t);
        let r = &mut self.report;
        r.metric("startup.empty.accept_ms", Some(median(&mut accept)));
        r.metric("startup.empty.api_ms", Some(median(&mut api)));
        r.metric("startup.empty.idle_rss_mib", Some(median(&mut idle)));
        Ok(())
    }

    /// Runs the fixed-volume producers of a produce phase and measures the broker (`pid`)
    /// from the moment they start: the run and the resource usage over it.
    fn produce_measured(
        &self,
        bootstrap: &str,
        topic: &str,
        partitions: i32,
        settings: &ProducerSettings,
        records: u64,
        pid: Option<u32>,
    ) -> Res<(kafka::ProduceRun, procfs::UsageDelta)> {
        let start = Mutex::new(None);
        let run = kafka::produce_fixed(
            bootstrap,
            topic,
            partitions,
            settings,
            self.opts.producers,
            records,
            self.opts.value_bytes,
            &|| {
                if let Ok(mut s) = start.lock() {
                    *s = Some(Usage::sample(pid));
                }
            },
        )?;
        let usage = start
            .lock()
            .ok()
            .and_then(|s| s.clone())
            .ok_or("producers never started")?
            .since(pid);
        Ok((run, usage))
    }

    fn produce(&mut self) -> Res<()> {
        let (target, _) = self.target()?;
        let bootstrap = target.bootstrap();
        let pid = target.pid();
        let records = self.records_for(self.sizes.produce_mib);
        let mut t = Table::new(
            format!(
                "produce: {} MiB of {} B values per scenario, {} producers (linger.ms 5, batch.size 1 MiB, no compression), round-robin over partitions{}",
                self.sizes.produce_mib,
                self.opts.value_bytes,
                self.opts.producers,
                produce_shape(self.opts.produce_keys, &self.opts.produce_topic_config)
            ),
            &["scenario", "MB/s", "records/s", "broker CPU-s/GB", "client CPU-s/GB", "broker cores", "client cores", "of disk", "of loopback", "errors"],
        );
        let reference = self.produce_reference()?;
        let mut total = Totals::default();
        for (acks, partitions) in [("all", 8), ("1", 8), ("all", 1), ("1", 1)] {
            let name = format!("acks={acks} {partitions}p");
            let topic = self.topic(&format!("produce-acks{acks}-p{partitions}"));
            kafka::create_topic_with(
                &self.rt,
                &bootstrap,
                &topic,
                partitions,
                &self.opts.produce_topic_config,
            )?;
            let settings = ProducerSettings {
                keys: self.opts.produce_keys,
                ..ProducerSettings::tuned(acks)
            };
            ceilings::warm_free_pages(self.sizes.produce_mib * MIB * 2);
            let (run, usage) =
                self.produce_measured(&bootstrap, &topic, partitions, &settings, records, pid)?;
            let phase = Phase::new(run.records, run.bytes, usage.wall, &usage);
            total.add(run.records, run.bytes, usage.wall, &usage);
            let key = format!("produce.acks_{acks}.p{partitions}");
            phase.record(&mut self.report, &key);
            self.report.metric(
                format!("{key}.broker_cpu_vs_reference"),
                phase.broker_cpu_per_gb.map(|broker| broker / reference),
            );
            self.report
                .metric(format!("{key}.errors"), Some(f(run.errors)));
            t.row(
                [
                    vec![name],
                    phase.cells(),
                    vec![
                        pct(self.disk_mb_s.map(|d| phase.mb_s / d)),
                        pct(self.loopback_mb_s.map(|l| phase.mb_s / l)),
                        run.errors.to_string(),
                    ],
                ]
                .concat(),
            );
            println!(
                "   {}",
                t.render().lines().last().unwrap_or_default().trim()
            );
        }
        self.produce_total(t, &total, reference, &target);
        Ok(())
    }

    /// The produce table's last row, all four scenarios together (guarded by --check),
    /// and the broker's CPU per GB against the reference workload's.
    fn produce_total(&mut self, mut t: Table, total: &Totals, reference: f64, target: &Target) {
        let all = total.phase();
        all.record(&mut self.report, "produce.total");
        t.row(vec![
            "all four (guarded by --check)".to_owned(),
            fmt(Some(all.mb_s), 0),
            fmt(Some(all.records_s), 0),
            fmt(all.broker_cpu_per_gb, 2),
            fmt(all.client_cpu_per_gb, 2),
            fmt(all.broker_cores, 2),
            fmt(all.client_cores, 2),
            pct(self.disk_mb_s.map(|d| all.mb_s / d)),
            pct(self.loopback_mb_s.map(|l| all.mb_s / l)),
            "-".to_owned(),
        ]);
        self.report.table(&t);
        let ratio = all.broker_cpu_per_gb.map(|broker| broker / reference);
        self.report
            .metric("produce.total.broker_cpu_vs_reference", ratio);
        println!(
            "   broker CPU per GB / reference CPU per GB: all four {}, acks=all 8p {} (guarded by --check)",
            fmt(ratio, 2),
            fmt(
                self.report
                    .metrics
                    .get("produce.acks_all.p8.broker_cpu_vs_reference")
                    .copied(),
                2
            )
        );
        self.report
            .metric("produce.peak_rss_mib", target.peak_rss_mib());
        println!("   broker peak RSS {} MiB", fmt(target.peak_rss_mib(), 1));
    }

    /// The median CPU per GB of [`ceilings::reference_produce_cpu_s_per_gb`] on the
    /// broker's disk, measured now, so the produce figures can be read against the
    /// machine's state at the time they were taken.
    fn produce_reference(&mut self) -> Res<f64> {
        let mut runs = Vec::with_capacity(ceilings::REFERENCE_RUNS);
        for _ in 0..ceilings::REFERENCE_RUNS {
            ceilings::warm_free_pages(REFERENCE_MIB * MIB * 2);
            runs.push(ceilings::reference_produce_cpu_s_per_gb(
                &self.data_root,
                REFERENCE_MIB,
            )?);
        }
        runs.sort_by(f64::total_cmp);
        let median = runs[runs.len() / 2];
        let shown: Vec<String> = runs.iter().map(|r| format!("{r:.3}")).collect();
        println!(
            "   reference workload (loopback receive + CRC-32C + write + fdatasync per MiB, {REFERENCE_MIB} MiB): {} CPU-s/GB, median {median:.3}",
            shown.join(" / ")
        );
        self.report
            .metric("reference.produce_cpu_s_per_gb", Some(median));
        Ok(median)
    }

    /// The broker as the bound: raw Produce requests encoded once and resent
    /// (`raw_produce`), so the client spends a few percent of what librdkafka does and
    /// MB/s is what the broker takes in, with its cores beside the client's.
    fn headline(&mut self) -> Res<()> {
        let (target, _) = self.target()?;
        let bootstrap = target.bootstrap();
        let pid = target.pid();
        let addr: std::net::SocketAddr = bootstrap
            .parse()
            .map_err(|e| format!("headline needs an IP:PORT bootstrap ({bootstrap}): {e}"))?;
        let partitions = 8;
        let shape = |acks: i16, topic: String| raw_produce::RawProduce {
            topic,
            partitions,
            connections: 4,
            in_flight: 4,
            acks,
            records_per_batch: (256 * 1024 / self.opts.value_bytes.max(1)).max(1),
            value_bytes: self.opts.value_bytes,
            total_bytes: self.sizes.produce_mib * 4 * MIB,
        };
        let mut t = Table::new(
            format!(
                "headline: the broker as the bound, {} MiB of {} B values per scenario, 4 connections x 4 requests in flight, raw Produce v7 encoded once and resent (256 KiB batch per partition, 8 partitions)",
                self.sizes.produce_mib * 4,
                self.opts.value_bytes
            ),
            &["scenario", "MB/s", "records/s", "broker CPU-s/GB", "client CPU-s/GB", "broker cores", "client cores", "errors"],
        );
        for (acks, name) in [(-1_i16, "all"), (1, "1")] {
            let topic = self.topic(&format!("headline-acks{name}-p8"));
            kafka::create_topic(&self.rt, &bootstrap, &topic, partitions)?;
            ceilings::warm_free_pages(self.sizes.produce_mib * 4 * MIB * 2);
            let start = Usage::sample(pid);
            let run = raw_produce::run(&self.rt, addr, &shape(acks, topic))?;
            let usage = start.since(pid);
            let phase = Phase::new(run.records, run.bytes, usage.wall, &usage);
            let key = format!("headline.acks_{name}.p8");
            phase.record(&mut self.report, &key);
            self.report
                .metric(format!("{key}.errors"), Some(f(run.errors)));
            t.row(
                [
                    vec![format!("acks={name} 8p")],
                    phase.cells(),
                    vec![run.errors.to_string()],
                ]
                .concat(),
            );
        }
        self.report.table(&t);
        Ok(())
    }

    fn consume(&mut self) -> Res<()> {
        let (target, _) = self.target()?;
        let bootstrap = target.bootstrap();
        let pid = target.pid();
        let partitions = 8;
        let records = self.records_for(self.sizes.consume_mib);
        let topic = self.topic("consume-p8");
        kafka::create_topic(&self.rt, &bootstrap, &topic, partitions)?;
        let fill = Instant::now();
        let filled = kafka::produce_fixed(
            &bootstrap,
            &topic,
            partitions,
            &ProducerSettings::tuned("1"),
            self.opts.producers,
            records,
            self.opts.value_bytes,
            &|| {},
        )?;
        println!(
            "   wrote {} MiB to 8 partitions in {:.1} s",
            self.sizes.consume_mib,
            fill.elapsed().as_secs_f64()
        );
        let mut t = self.consume_table();
        let cold = evict_page_cache(target.data_dir())?;
        let mut total = Totals::default();
        for label in [
            if cold {
                "cold (evicted from page cache)"
            } else {
                "warm (could not evict)"
            },
            "warm (page cache, CPU guarded)",
        ] {
            let source = ReadBack {
                bootstrap: &bootstrap,
                topic: &topic,
                partitions,
                records: filled.records,
                pid,
            };
            self.consume_read_back(&mut t, &mut total, label, &source)?;
        }

        let both = total.phase();
        both.record(&mut self.report, "consume.total");
        t.row(vec![
            "cold + warm (MB/s guarded)".to_owned(),
            "-".to_owned(),
            fmt(Some(both.mb_s), 0),
            fmt(Some(both.records_s), 0),
            fmt(both.broker_cpu_per_gb, 2),
            fmt(both.client_cpu_per_gb, 2),
            fmt(both.broker_cores, 2),
            fmt(both.client_cores, 2),
            "-".to_owned(),
            pct(self.loopback_mb_s.map(|l| both.mb_s / l)),
        ]);

        // Hot tail: the consumer keeps up with producers writing a fresh topic.
        self.consume_hot_tail(&mut t, &bootstrap, partitions, pid)?;
        self.report.table(&t);
        self.report
            .metric("consume.peak_rss_mib", target.peak_rss_mib());
        println!("   broker peak RSS {} MiB", fmt(target.peak_rss_mib(), 1));
        Ok(())
    }

    /// The consume table's header.
    fn consume_table(&self) -> Table {
        Table::new(
            format!(
                "consume: read {} MiB back from the beginning of 8 partitions, one consumer",
                self.sizes.consume_mib
            ),
            &[
                "read",
                "first record ms",
                "MB/s",
                "records/s",
                "broker CPU-s/GB",
                "client CPU-s/GB",
                "broker cores",
                "client cores",
                "broker disk reads MiB",
                "of loopback",
            ],
        )
    }

    /// One read of the consume topic from the beginning by a new consumer: MB/s from the
    /// first record to the last, with the time to that first record shown apart, and the
    /// broker's disk reads (a cold read's come from disk, a warm one's from the cache).
    fn consume_read_back(
        &mut self,
        t: &mut Table,
        total: &mut Totals,
        label: &str,
        source: &ReadBack<'_>,
    ) -> Res<()> {
        // A cold read fills the page cache again (see `ceilings::warm_free_pages`).
        ceilings::warm_free_pages(self.sizes.consume_mib * MIB * 2);
        let start = Usage::sample(source.pid);
        let t0 = Instant::now();
        let consumer = kafka::assigned_consumer(source.bootstrap, source.topic, source.partitions)?;
        let run = kafka::consume_count(&consumer, source.records)?;
        // Throughput from the first record to the last; connecting, finding the
        // coordinator and listing offsets come before the first and are shown apart.
        let seconds = run.last.duration_since(run.first).as_secs_f64();
        let first_ms = ms(run.first.duration_since(t0));
        let usage = start.since(source.pid);
        drop(consumer);
        let phase = Phase::new(run.records, run.bytes, seconds, &usage);
        total.add(run.records, run.bytes, seconds, &usage);
        let key = if label.starts_with("cold") {
            "consume.cold"
        } else {
            "consume.warm"
        };
        phase.record(&mut self.report, key);
        let read_mib = usage.broker_disk_read.map(|b| f(b) / f(MIB));
        self.report.metric(format!("{key}.disk_read_mib"), read_mib);
        self.report.metric(
            format!("{key}.missing"),
            Some(f(source.records.saturating_sub(run.records))),
        );
        self.report
            .metric(format!("{key}.first_record_ms"), Some(first_ms));
        t.row(
            [
                vec![label.to_owned(), fmt(Some(first_ms), 0)],
                phase.cells(),
                vec![
                    fmt(read_mib, 1),
                    pct(self.loopback_mb_s.map(|l| phase.mb_s / l)),
                ],
            ]
            .concat(),
        );
        println!(
            "   {}",
            t.render().lines().last().unwrap_or_default().trim()
        );
        Ok(())
    }

    /// The hot tail: one consumer keeps up with producers writing a fresh topic, so the
    /// broker both takes and serves each byte.
    fn consume_hot_tail(
        &mut self,
        t: &mut Table,
        bootstrap: &str,
        partitions: i32,
        pid: Option<u32>,
    ) -> Res<()> {
        let tail_topic = self.topic("hot-tail-p8");
        kafka::create_topic(&self.rt, bootstrap, &tail_topic, partitions)?;
        let tail_records = self.records_for(self.sizes.hot_tail_mib);
        let consumer = kafka::assigned_consumer(bootstrap, &tail_topic, partitions)?;
        settle_consumer(&consumer);
        let start: Mutex<Option<(Usage, Instant)>> = Mutex::new(None);
        let (run, produced) = std::thread::scope(|scope| -> Res<_> {
            let reader = scope.spawn(|| kafka::consume_count(&consumer, tail_records));
            let produced = kafka::produce_fixed(
                bootstrap,
                &tail_topic,
                partitions,
                &ProducerSettings::tuned("1"),
                self.opts.producers,
                tail_records,
                self.opts.value_bytes,
                &|| {
                    if let Ok(mut s) = start.lock() {
                        *s = Some((Usage::sample(pid), Instant::now()));
                    }
                },
            )?;
            let run = reader.join().map_err(|_| "consumer thread panicked")??;
            Ok((run, produced))
        })?;
        let (usage0, t0) = start
            .lock()
            .ok()
            .and_then(|s| s.clone())
            .ok_or("producers never started")?;
        let usage = usage0.since(pid);
        let seconds = run.last.duration_since(t0).as_secs_f64();
        let phase = Phase::new(run.records, run.bytes, seconds, &usage);
        // The broker both takes and serves each byte here: CPU per GB is per GB through it.
        phase.record(&mut self.report, "consume.hot_tail");
        let read_mib = usage.broker_disk_read.map(|b| f(b) / f(MIB));
        self.report
            .metric("consume.hot_tail.disk_read_mib", read_mib);
        self.report.metric(
            "consume.hot_tail.missing",
            Some(f(produced.records.saturating_sub(run.records))),
        );
        t.row(
            [
                vec![
                    format!(
                        "hot tail ({} MiB, acks=1, produce+consume)",
                        self.sizes.hot_tail_mib
                    ),
                    fmt(Some(ms(run.first.duration_since(t0))), 0),
                ],
                phase.cells(),
                vec![
                    fmt(read_mib, 1),
                    pct(self.loopback_mb_s.map(|l| phase.mb_s / l)),
                ],
            ]
            .concat(),
        );
        Ok(())
    }

    fn latency(&mut self) -> Res<()> {
        let (target, _) = self.target()?;
        let bootstrap = target.bootstrap();
        let pid = target.pid();
        let rate = self.opts.latency_rate;
        let mut t = Table::new(
            format!(
                "end-to-end latency: {rate} records/s of {} B for {} s (first {} s not counted), 1 partition, one producer with client defaults (linger.ms 5), one consumer; due time in the payload",
                self.opts.value_bytes, self.sizes.latency_secs, self.sizes.latency_warmup
            ),
            &["acks", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "samples", "lost", "broker cores", "client cores", "disk stall ms"],
        );
        for acks in ["all", "1"] {
            let topic = self.topic(&format!("latency-acks{acks}"));
            kafka::create_topic(&self.rt, &bootstrap, &topic, 1)?;
            let witness = ceilings::DiskWitness::start(&self.data_root)?;
            let neighbour = (self.opts.neighbour_mib > 0)
                .then(|| {
                    ceilings::Neighbour::start(
                        &self.data_root,
                        self.opts.neighbour_mib,
                        self.opts.neighbour_sync,
                    )
                })
                .transpose()?;
            let start = Usage::sample(pid);
            let run = kafka::latency_run(
                &bootstrap,
                &topic,
                1,
                &ProducerSettings::default_with(acks),
                None,
                rate,
                self.sizes.latency_secs,
                self.sizes.latency_warmup,
                self.opts.value_bytes,
            )?;
            let usage = start.since(pid);
            let neighbour_mib = neighbour.map(ceilings::Neighbour::finish);
            let disk_stall = witness.finish();
            let key = format!("latency.acks_{acks}");
            if let Some(mib) = neighbour_mib {
                let how = if self.opts.neighbour_sync {
                    "and fdatasync'd"
                } else {
                    "buffered"
                };
                println!("   (neighbour: {mib} MiB written {how} beside the acks={acks} run)");
                self.report
                    .metric(format!("{key}.neighbour_mib"), Some(mib));
            }
            let (p50, p99, p999) = (
                run.quantile_ms(0.5),
                run.quantile_ms(0.99),
                run.quantile_ms(0.999),
            );
            let max = run.quantile_ms(1.0);
            let r = &mut self.report;
            r.metric(format!("{key}.p50_ms"), Some(p50));
            r.metric(format!("{key}.p99_ms"), Some(p99));
            r.metric(format!("{key}.p999_ms"), Some(p999));
            r.metric(format!("{key}.max_ms"), Some(max));
            r.metric(format!("{key}.lost"), Some(f(run.lost)));
            r.metric(format!("{key}.disk_stall_ms"), Some(disk_stall));
            r.metric(
                format!("{key}.broker_cores"),
                usage.broker_cpu.map(|c| c / usage.wall),
            );
            t.row(vec![
                acks.to_owned(),
                fmt(Some(p50), 2),
                fmt(Some(p99), 2),
                fmt(Some(p999), 2),
                fmt(Some(max), 2),
                run.micros.len().to_string(),
                run.lost.to_string(),
                fmt(usage.broker_cpu.map(|c| c / usage.wall), 3),
                fmt(usage.client_cpu.map(|c| c / usage.wall), 3),
                fmt(Some(disk_stall), 1),
            ]);
            println!(
                "   {}",
                t.render().lines().last().unwrap_or_default().trim()
            );
        }
        self.report.table(&t);
        println!("   (disk stall: the slowest 4 KiB write + fdatasync of a probe on the same disk during the run)");
        Ok(())
    }

    fn recovery(&mut self) -> Res<()> {
        let Some(spec) = self.spec.clone() else {
            println!("   skipped: needs a broker the bench starts");
            return Ok(());
        };
        let (mut broker, _) = OwnedBroker::start(&spec)?;
        let bootstrap = broker.bootstrap();
        let partitions = self.opts.recovery_partitions;
        let topic = self.topic("recovery");
        kafka::create_topic(&self.rt, &bootstrap, &topic, partitions)?;
        let records = self.records_for(self.sizes.recovery_mib);
        let fill = Instant::now();
        let produced = kafka::produce_fixed(
            &bootstrap,
            &topic,
            partitions,
            &ProducerSettings::tuned("1"),
            self.opts.producers,
            records,
            self.opts.value_bytes,
            &|| {},
        )?;
        let on_disk = dir_bytes(broker.data_dir());
        println!(
            "   wrote {} MiB of values ({:.0} MiB on disk) to {partitions} partitions in {:.1} s; SIGKILL",
            self.sizes.recovery_mib,
            f(on_disk) / f(MIB),
            fill.elapsed().as_secs_f64()
        );
        let rss_before = broker.rss_mib();
        let times = broker.restart()?;
        std::thread::sleep(Duration::from_millis(300));
        let idle = broker.rss_mib();
        let recovered = kafka::high_watermark_sum(&bootstrap, &topic, partitions)?;
        let mut t = Table::new(
            format!(
                "start after SIGKILL holding {} MiB in {partitions} partitions",
                self.sizes.recovery_mib
            ),
            &[
                "spawn → TCP accepted ms",
                "→ ApiVersions ms",
                "RSS before kill MiB",
                "idle RSS after restart MiB",
                "records acked",
                "records after restart",
            ],
        );
        t.row(vec![
            fmt(Some(ms(times.accept)), 1),
            fmt(Some(ms(times.api)), 1),
            fmt(rss_before, 1),
            fmt(idle, 1),
            produced.records.to_string(),
            recovered.to_string(),
        ]);
        self.report.table(&t);
        let r = &mut self.report;
        r.metric("recovery.accept_ms", Some(ms(times.accept)));
        r.metric("recovery.api_ms", Some(ms(times.api)));
        r.metric("recovery.idle_rss_mib", idle);
        r.metric("recovery.data_mib", Some(f(on_disk) / f(MIB)));
        r.metric(
            "recovery.missing",
            Some(f(produced.records.saturating_sub(recovered))),
        );
        Ok(())
    }

    fn scale(&mut self) -> Res<()> {
        let (target, _) = self.target()?;
        let bootstrap = target.bootstrap();
        let pid = target.pid();
        let partitions = self.sizes.partitions;
        let count = u64::try_from(partitions)?;
        let topic = self.topic("scale");
        let mut t = Table::new(
            format!("scale: one topic with {partitions} partitions on one broker"),
            &["step", "seconds", "broker RSS after, MiB", "broker CPU-s"],
        );
        let idle = target.rss_mib();
        t.row(vec!["idle".into(), "-".into(), fmt(idle, 1), "-".into()]);

        let start = Usage::sample(pid);
        kafka::create_topic(&self.rt, &bootstrap, &topic, partitions)
            .map_err(|e| with_log_tail(&target, &e))?;
        let u = start.since(pid);
        let create_s = u.wall;
        let created = target.rss_mib();
        let step = format!("CreateTopics ({partitions} partitions)");
        scale_step(&mut t, &step, &u, created);

        let start = Usage::sample(pid);
        let produced = kafka::produce_fixed(
            &bootstrap,
            &topic,
            partitions,
            &ProducerSettings::tuned("all"),
            1,
            count,
            self.opts.value_bytes,
            &|| {},
        )?;
        let u = start.since(pid);
        let produce_s = u.wall;
        let after_produce = target.rss_mib();
        let step = "produce 1 record to each (acks=all, one producer)";
        scale_step(&mut t, step, &u, after_produce);

        let expected = produced.records;
        let (run, fetch_s, after_fetch) =
            scale_fetch(&mut t, &bootstrap, &topic, partitions, expected, &target)?;

        let lat = self.scale_latency(&mut t, &bootstrap, &topic, partitions, &target)?;
        t.row(vec![
            "peak".into(),
            "-".into(),
            fmt(target.peak_rss_mib(), 1),
            "-".into(),
        ]);
        self.report.table(&t);
        let r = &mut self.report;
        r.metric("scale.partitions", Some(f(count)));
        r.metric("scale.create_s", Some(create_s));
        r.metric("scale.produce_all_s", Some(produce_s));
        r.metric("scale.created.rss_mib", created);
        r.metric("scale.fetched.rss_mib", after_fetch);
        r.metric("scale.peak_rss_mib", target.peak_rss_mib());
        r.metric("scale.fetch_all_s", Some(fetch_s));
        r.metric("scale.latency.p50_ms", Some(lat.quantile_ms(0.5)));
        r.metric("scale.latency.p99_ms", Some(lat.quantile_ms(0.99)));
        r.metric("scale.missing", Some(f(count.saturating_sub(run.records))));
        r.metric("scale.latency.lost", Some(f(lat.lost)));
        if let Target::Owned(broker) = target {
            tear_down(broker);
        }
        Ok(())
    }

    /// The scale section's last step: end-to-end latency at 1,000 records/s round-robin
    /// over every partition, one consumer on all of them.
    fn scale_latency(
        &self,
        t: &mut Table,
        bootstrap: &str,
        topic: &str,
        partitions: i32,
        target: &Target,
    ) -> Res<kafka::LatencyRun> {
        let rate = 1000;
        let lat_start = Instant::now();
        let lat = kafka::latency_run(
            bootstrap,
            topic,
            partitions,
            &ProducerSettings::default_with("all"),
            None,
            rate,
            self.sizes.scale_latency_secs,
            1.0,
            self.opts.value_bytes,
        )?;
        let lat_s = lat_start.elapsed().as_secs_f64();
        let after_latency = target.rss_mib();
        t.row(vec![
            format!(
                "e2e latency, {rate} records/s round-robin, consumer on all: p50 {} / p99 {} ms, {} lost",
                fmt(Some(lat.quantile_ms(0.5)), 1),
                fmt(Some(lat.quantile_ms(0.99)), 1),
                lat.lost
            ),
            fmt(Some(lat_s), 1),
            fmt(after_latency, 1),
            "-".into(),
        ]);
        Ok(lat)
    }

    fn connections(&mut self) -> Res<()> {
        let (target, _) = self.target()?;
        let Target::Owned(broker) = &target else {
            println!("   skipped: needs a broker the bench starts");
            return Ok(());
        };
        let count = self.opts.connections;
        let idle = broker.rss_mib();
        let open_rss = Mutex::new(None);
        let run = connections::run(&self.rt, broker.addr(), count, &|| {
            if let Ok(mut rss) = open_rss.lock() {
                *rss = broker.rss_mib();
            }
        })?;
        let open = open_rss.lock().ok().and_then(|r| *r);
        let per_conn = idle
            .zip(open)
            .map(|(i, o)| (o - i) * 1024.0 / f(count as u64));
        let mut t = Table::new(
            format!("connections: {count} concurrent raw TCP clients, each sends ApiVersions twice while all stay open"),
            &["opened", "served", "open all s", "round p50 ms", "round p99 ms", "round max ms", "round s", "RSS idle MiB", "RSS all open MiB", "KiB/conn"],
        );
        t.row(vec![
            run.opened.to_string(),
            run.served.to_string(),
            fmt(Some(run.connect_seconds), 2),
            fmt(Some(kafka::quantile_ms(&run.micros, 0.5)), 1),
            fmt(Some(kafka::quantile_ms(&run.micros, 0.99)), 1),
            fmt(Some(kafka::quantile_ms(&run.micros, 1.0)), 1),
            fmt(Some(run.round_seconds), 2),
            fmt(idle, 1),
            fmt(open, 1),
            fmt(per_conn, 1),
        ]);
        self.report.table(&t);
        let r = &mut self.report;
        r.metric("connections.requested", Some(f(count as u64)));
        r.metric("connections.served", Some(f(run.served)));
        r.metric(
            "connections.unserved",
            Some(f((count as u64).saturating_sub(run.served))),
        );
        r.metric(
            "connections.round.p99_ms",
            Some(kafka::quantile_ms(&run.micros, 0.99)),
        );
        r.metric("connections.open.rss_mib", open);
        Ok(())
    }
}

/// Drops the broker's data files from the page cache (fdatasync, then
/// `POSIX_FADV_DONTNEED` per file) so the next read comes from the disk. Without a data
/// directory (a `--bootstrap` broker) it tries `/proc/sys/vm/drop_caches`.
fn evict_page_cache(dir: Option<&Path>) -> Res<bool> {
    let Some(dir) = dir else {
        return Ok(std::fs::write("/proc/sys/vm/drop_caches", "1\n").is_ok());
    };
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                let file = std::fs::File::open(entry.path())?;
                file.sync_data()?;
                fadvise_dontneed(&file)?;
            }
        }
    }
    Ok(true)
}

fn fadvise_dontneed(file: &std::fs::File) -> Res<()> {
    use std::os::fd::AsRawFd;
    #[expect(unsafe_code, reason = "posix_fadvise has no safe wrapper in libc")]
    // SAFETY: the descriptor is open for the whole call (borrowed from `file`); the call
    // only advises the kernel and touches no memory of ours.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("posix_fadvise: error {rc}").into())
    }
}

/// Total size of the regular files under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.metadata() {
                Ok(m) if m.is_dir() => stack.push(entry.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}
