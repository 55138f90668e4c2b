//! `logbook-bench failover --trials N`: the kill-the-leader trials of issue 11 (plan
//! §4.4), measuring what a client sees when a partition leader dies under acks=all load,
//! and checking that nothing acknowledged is lost, duplicated or moved.
//!
//! Per trial: a fresh cluster (see `cluster.rs`; Apache Kafka or Logbook), a topic with
//! replication factor 3, `min.insync.replicas=2` and 8 partitions, one idempotent acks=all
//! librdkafka producer sending 1 KiB values at a fixed rate round-robin over the
//! partitions, each value carrying its sequence number. At a random moment the leader of
//! partition 0 gets SIGKILL. Failover is the time from the kill to the first successful
//! delivery report, for a partition the victim led, that the new leader sent. The load
//! runs on a few seconds, the victim restarts on its directory, the cluster settles (every
//! ISR full again), and everything is read back from the beginning: an acknowledged
//! sequence number that is missing is lost, one read twice is a duplicate, one read at
//! another partition or offset than its delivery report said has changed offset. All
//! three must be 0.
//!
//! Which broker acknowledged a record comes from librdkafka itself
//! (`rd_kafka_message_broker_id` on the delivery report), so an answer the victim sent
//! just before it died, handed to the callback after the kill, is never taken for the new
//! leader's ("late" in the trial line counts such answers). The kill only sends the signal (the reaping waits until the restart), so the
//! producer keeps serving its reports while a large process is torn down.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::Consumer;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::util::Timeout;

use crate::cluster::{LauncherOpts, LocalCluster};
use crate::kafka;
use crate::report::fmt;
use crate::Res;

/// Marks a trial value: `[MAGIC][sequence number]…`.
const MAGIC: u32 = 0x4c42_464f;
/// The topic of every trial (each trial has a fresh cluster).
const TOPIC: &str = "failover";

/// `logbook-bench failover`.
#[derive(Parser, Debug)]
#[command(name = "logbook-bench failover")]
struct FailoverOpts {
    #[command(flatten)]
    launcher: LauncherOpts,
    /// Trials, each on a fresh cluster.
    #[arg(long, default_value_t = 10)]
    trials: usize,
    /// Partitions of the trial topic.
    #[arg(long, default_value_t = 8)]
    partitions: i32,
    /// Records per second the producer sends.
    #[arg(long, default_value_t = 2000)]
    rate: u32,
    /// Value bytes per record.
    #[arg(long, default_value_t = 1024)]
    value_bytes: usize,
    /// Earliest kill, seconds after the load starts.
    #[arg(long, default_value_t = 3.0)]
    kill_min_secs: f64,
    /// Latest kill, seconds after the load starts.
    #[arg(long, default_value_t = 8.0)]
    kill_max_secs: f64,
    /// Seconds the load goes on after the failover was seen.
    #[arg(long, default_value_t = 3.0)]
    after_failover_secs: f64,
    /// A trial whose failover takes longer than this fails.
    #[arg(long, default_value_t = 60.0)]
    failover_timeout_secs: f64,
    /// Kill the active controller (and measure the failover of the partitions it leads)
    /// instead of the leader of partition 0.
    #[arg(long)]
    kill_active_controller: bool,
    /// Seed of the kill times (default: from the clock); printed, so a run can be repeated.
    #[arg(long)]
    seed: Option<u64>,
    /// Also write the JSON summary line to this file.
    #[arg(long)]
    json_out: Option<PathBuf>,
}

/// What the delivery callback records, shared with the sending thread.
struct Tracker {
    /// The victim's node id.
    victim: i32,
    /// Partitions the victim led when it was killed.
    victim_partitions: Mutex<Vec<i32>>,
    /// When the victim got SIGKILL.
    killed_at: Mutex<Option<Instant>>,
    /// The first delivery the new leader of a victim partition sent.
    failed_over_at: Mutex<Option<Instant>>,
    /// `(sequence, partition, offset)` of every acknowledged record.
    acked: Mutex<Vec<(u64, i32, i64)>>,
    failed: AtomicU64,
    /// Reports from the victim handed over after the kill (sent before it died).
    victim_acks_after_kill: AtomicU64,
    first_error: Mutex<Option<String>>,
}

struct TrackingContext(Arc<Tracker>);

impl ClientContext for TrackingContext {
    /// librdkafka's own log lines, only with `LOGBOOK_BENCH_RDKAFKA_DEBUG` (the trials'
    /// connection errors are expected), on stderr with the wall clock, to line them up
    /// with the nodes' logs.
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, log_message: &str) {
        if std::env::var_os("LOGBOOK_BENCH_RDKAFKA_DEBUG").is_none() {
            return;
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        eprintln!("{now:.6} rdkafka {level:?} {fac}: {log_message}");
    }
}

impl ProducerContext for TrackingContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, seq: usize) {
        let now = Instant::now();
        match result {
            Ok(message) => {
                let partition = message.partition();
                if let Ok(mut acked) = self.0.acked.lock() {
                    acked.push((seq as u64, partition, message.offset()));
                }
                let killed = self.0.killed_at.lock().ok().and_then(|k| *k);
                let victim_led = self
                    .0
                    .victim_partitions
                    .lock()
                    .is_ok_and(|v| v.contains(&partition));
                #[expect(unsafe_code, reason = "rdkafka has no safe wrapper for the broker id")]
                // SAFETY: the pointer is the librdkafka message this report borrows, valid for
                // the whole callback; the function only reads one field of it.
                let broker =
                    unsafe { rdkafka::bindings::rd_kafka_message_broker_id(message.ptr()) };
                if killed.is_some() && victim_led {
                    if broker == self.0.victim {
                        self.0
                            .victim_acks_after_kill
                            .fetch_add(1, Ordering::Relaxed);
                    } else if broker >= 0 {
                        if let Ok(mut first) = self.0.failed_over_at.lock() {
                            first.get_or_insert(now);
                        }
                    }
                }
            }
            Err((error, _)) => {
                self.0.failed.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut first) = self.0.first_error.lock() {
                    first.get_or_insert_with(|| error.to_string());
                }
            }
        }
    }
}

/// The outcome of one trial.
#[derive(Debug, Clone)]
struct Trial {
    victim: i32,
    victim_partitions: Vec<i32>,
    kill_after_s: f64,
    /// Whether the victim was the active controller when killed (None: unknown).
    victim_controller: Option<bool>,
    failover_ms: Option<f64>,
    settle_s: f64,
    sent: u64,
    acked: u64,
    failed: u64,
    victim_acks_after_kill: u64,
    lost: u64,
    duplicates: u64,
    offsets_changed: u64,
    first_error: Option<String>,
}

/// A small xorshift generator for the kill times (no `rand` dependency for one number
/// per trial).
struct XorShift(u64);

impl XorShift {
    /// A float in [0, 1).
    fn next_unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        #[expect(clippy::cast_precision_loss, reason = "53 random bits")]
        let unit = (self.0 >> 11) as f64 / (1_u64 << 53) as f64;
        unit
    }
}

/// Runs `logbook-bench failover ARGS…`; true when every trial lost, duplicated and moved
/// nothing and saw its failover.
pub fn main(args: &[String]) -> Res<bool> {
    let opts = FailoverOpts::parse_from(args);
    let launcher = opts.launcher.launcher()?;
    let seed = opts.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_secs())
    });
    let mut random = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    println!(
        "logbook-bench failover · {} trials · {} × {} · RF 3, min.insync.replicas 2, {} partitions · \
         idempotent acks=all, {} records/s of {} B · seed {seed}",
        opts.trials,
        opts.launcher.nodes,
        launcher.name(),
        opts.partitions,
        opts.rate,
        opts.value_bytes
    );
    println!("trial victim ctl led        kill s  failover ms  settle s   sent  acked failed lost dups moved late");
    let trials = run_trials(&opts, &launcher, &rt, &mut random)?;
    let mut failovers: Vec<f64> = trials.iter().filter_map(|t| t.failover_ms).collect();
    failovers.sort_by(f64::total_cmp);
    let quantile = |q: f64| quantile(&failovers, q);
    let lost: u64 = trials.iter().map(|t| t.lost).sum();
    let duplicates: u64 = trials.iter().map(|t| t.duplicates).sum();
    let changed: u64 = trials.iter().map(|t| t.offsets_changed).sum();
    let acked: u64 = trials.iter().map(|t| t.acked).sum();
    let unfinished = trials.iter().filter(|t| t.failover_ms.is_none()).count();
    println!(
        "\nfailover p50 {} ms, p99 {} ms, max {} ms over {} trials ({unfinished} without failover); \
         acknowledged {acked}: lost {lost}, duplicates {duplicates}, offsets changed {changed}",
        fmt(quantile(0.5), 0),
        fmt(quantile(0.99), 0),
        fmt(failovers.last().copied(), 0),
        trials.len()
    );
    print_by_victim_role(&trials);
    let line = serde_json::json!({
        "bench": "logbook-bench failover",
        "target": launcher.name(),
        "seed": seed,
        "trials": trials.len(),
        "rate": opts.rate,
        "partitions": opts.partitions,
        "failover_ms": { "p50": quantile(0.5), "p99": quantile(0.99), "max": failovers.last() },
        "failover_ms_each": trials.iter().map(|t| t.failover_ms).collect::<Vec<_>>(),
        "victim_was_controller_each": trials.iter().map(|t| t.victim_controller).collect::<Vec<_>>(),
        "victim_acks_after_kill_each": trials.iter().map(|t| t.victim_acks_after_kill).collect::<Vec<_>>(),
        "acked": acked,
        "lost": lost,
        "duplicates": duplicates,
        "offsets_changed": changed,
        "without_failover": unfinished,
    });
    println!("{line}");
    if let Some(path) = &opts.json_out {
        std::fs::write(path, format!("{line}\n"))?;
    }
    Ok(lost == 0 && duplicates == 0 && changed == 0 && unfinished == 0)
}

/// Runs the trials one after the other, each killing its victim at a random time
/// between `--kill-min-secs` and `--kill-max-secs`, and prints each one's row; the
/// first trial that fails ends the run.
fn run_trials(
    opts: &FailoverOpts,
    launcher: &crate::cluster::NodeLauncher,
    rt: &tokio::runtime::Runtime,
    random: &mut XorShift,
) -> Res<Vec<Trial>> {
    let mut trials = Vec::with_capacity(opts.trials);
    for index in 1..=opts.trials {
        let kill_after = opts.kill_min_secs
            + random.next_unit() * (opts.kill_max_secs - opts.kill_min_secs).max(0.0);
        let trial = match run_trial(opts, launcher, rt, kill_after) {
            Ok(trial) => trial,
            Err(error) => {
                println!("{index:>5} FAILED: {error}");
                return Err(format!("trial {index}: {error}").into());
            }
        };
        print_trial(index, &trial);
        trials.push(trial);
    }
    Ok(trials)
}

/// One trial's row of the table.
fn print_trial(index: usize, trial: &Trial) {
    println!(
        "{index:>5} {:>6} {:>3} {:<12} {:>6.1} {:>12} {:>9.1} {:>6} {:>6} {:>6} {:>4} {:>4} {:>5} {:>4}{}",
        trial.victim,
        match trial.victim_controller {
            Some(true) => "yes",
            Some(false) => "no",
            None => "?",
        },
        format!("{:?}", trial.victim_partitions),
        trial.kill_after_s,
        fmt(trial.failover_ms, 0),
        trial.settle_s,
        trial.sent,
        trial.acked,
        trial.failed,
        trial.lost,
        trial.duplicates,
        trial.offsets_changed,
        trial.victim_acks_after_kill,
        trial
            .first_error
            .as_ref()
            .map(|e| format!("  (first error: {e})"))
            .unwrap_or_default()
    );
}

/// Failover times split by whether the victim was the active controller (a controller
/// failover comes on top of the partition leaders').
fn print_by_victim_role(trials: &[Trial]) {
    for (label, wanted) in [
        ("victim was the active controller", Some(true)),
        ("victim was not the active controller", Some(false)),
    ] {
        let mut some: Vec<f64> = trials
            .iter()
            .filter(|t| t.victim_controller == wanted)
            .filter_map(|t| t.failover_ms)
            .collect();
        if !some.is_empty() {
            some.sort_by(f64::total_cmp);
            println!(
                "  {label}: {} trials, failover median {} ms, max {} ms",
                some.len(),
                fmt(some.get(some.len() / 2).copied(), 0),
                fmt(some.last().copied(), 0)
            );
        }
    }
}

/// The `q` quantile of `sorted` (nearest rank), `None` when it is empty.
fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "small positive ranks"
    )]
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).copied()
}

/// A trial's cluster, started and settled, with the topic created (RF 3,
/// `min.insync.replicas` 2) and its ISRs full; also each partition's leader.
fn start_trial_cluster(
    opts: &FailoverOpts,
    launcher: &crate::cluster::NodeLauncher,
    rt: &tokio::runtime::Runtime,
) -> Res<(LocalCluster, Vec<i32>)> {
    let nodes = opts.launcher.nodes;
    let cluster = LocalCluster::start(launcher, nodes, &opts.launcher.data_root())?;
    cluster.wait_settled(nodes, None, Duration::from_secs(120))?;
    cluster.create_topic(
        rt,
        TOPIC,
        opts.partitions,
        3,
        &[("min.insync.replicas", "2")],
    )?;
    let leaders = cluster.wait_settled(nodes, Some((TOPIC, 3)), Duration::from_secs(60))?;
    Ok((cluster, leaders))
}

impl Tracker {
    /// A tracker of a trial that has not killed `victim` yet.
    fn new(victim: i32, victim_partitions: Vec<i32>) -> Self {
        Tracker {
            victim,
            victim_partitions: Mutex::new(victim_partitions),
            killed_at: Mutex::new(None),
            failed_over_at: Mutex::new(None),
            acked: Mutex::new(Vec::new()),
            failed: AtomicU64::new(0),
            victim_acks_after_kill: AtomicU64::new(0),
            first_error: Mutex::new(None),
        }
    }
}

/// One trial on a fresh cluster.
fn run_trial(
    opts: &FailoverOpts,
    launcher: &crate::cluster::NodeLauncher,
    rt: &tokio::runtime::Runtime,
    kill_after_s: f64,
) -> Res<Trial> {
    let nodes = opts.launcher.nodes;
    let (mut cluster, leaders) = start_trial_cluster(opts, launcher, rt)?;
    let victim = pick_victim(opts, &cluster, &leaders)?;
    let victim_partitions: Vec<i32> = (0..opts.partitions)
        .zip(&leaders)
        .filter(|(_, l)| **l == victim)
        .map(|(p, _)| p)
        .collect();

    let tracker = Arc::new(Tracker::new(victim, victim_partitions.clone()));
    let producer = tracking_producer(&cluster.bootstrap(), &tracker)?;

    let (sent, killed_at, victim_controller) =
        produce_through_kill(opts, &mut cluster, &producer, &tracker, kill_after_s)?;
    producer.flush(Duration::from_secs(300))?;
    if let Some(fatal) = producer.client().fatal_error() {
        let mut first = tracker.first_error.lock().map_err(|_| "tracker poisoned")?;
        first.get_or_insert(format!("fatal: {fatal:?}"));
    }
    let failover_ms = match (
        killed_at,
        tracker.failed_over_at.lock().ok().and_then(|f| *f),
    ) {
        (Some(k), Some(f)) => Some(f.duration_since(k).as_secs_f64() * 1000.0),
        _ => None,
    };
    drop(producer);

    let settle_start = Instant::now();
    cluster.restart(victim)?;
    cluster
        .wait_settled(nodes, Some((TOPIC, 3)), Duration::from_secs(180))
        .map_err(|e| format!("{e}; node {victim} log:\n{}", cluster.log_tail(victim)))?;
    let settle_s = settle_start.elapsed().as_secs_f64();

    let consumed = read_back(&cluster.bootstrap(), opts.partitions)?;
    let acked = tracker
        .acked
        .lock()
        .map_err(|_| "tracker poisoned")?
        .clone();
    let (lost, changed, duplicates) = count_losses(&acked, &consumed);
    let first_error = tracker.first_error.lock().ok().and_then(|e| e.clone());
    Ok(Trial {
        victim,
        victim_partitions,
        kill_after_s,
        victim_controller,
        failover_ms,
        settle_s,
        sent,
        acked: acked.len() as u64,
        failed: tracker.failed.load(Ordering::Relaxed),
        victim_acks_after_kill: tracker.victim_acks_after_kill.load(Ordering::Relaxed),
        lost,
        duplicates,
        offsets_changed: changed,
        first_error,
    })
}

/// The node to kill: the active controller when `--kill-active-controller` (it must lead
/// a partition of the topic), else the leader of partition 0.
fn pick_victim(opts: &FailoverOpts, cluster: &LocalCluster, leaders: &[i32]) -> Res<i32> {
    Ok(if opts.kill_active_controller {
        (1..=i32::try_from(opts.launcher.nodes)?)
            .find(|id| cluster.is_active_controller(*id) == Some(true))
            .filter(|id| leaders.contains(id))
            .ok_or("the active controller is unknown or leads no partition of the topic")?
    } else {
        *leaders.first().ok_or("the topic has no partition 0")?
    })
}

/// The trial's idempotent acks=all producer, reporting deliveries to `tracker`;
/// `LOGBOOK_BENCH_RDKAFKA_DEBUG=broker,topic,msg,eos` turns on librdkafka's debug
/// contexts.
fn tracking_producer(
    bootstrap: &str,
    tracker: &Arc<Tracker>,
) -> Res<BaseProducer<TrackingContext>> {
    let mut config = ClientConfig::new();
    // LOGBOOK_BENCH_RDKAFKA_DEBUG=broker,topic,msg,eos turns on librdkafka's debug contexts.
    if let Ok(debug) = std::env::var("LOGBOOK_BENCH_RDKAFKA_DEBUG") {
        config.set("debug", debug);
        config.set_log_level(rdkafka::config::RDKafkaLogLevel::Debug);
    }
    let producer: BaseProducer<TrackingContext> = config
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("compression.type", "none")
        .set("message.timeout.ms", "300000")
        .set("queue.buffering.max.kbytes", "262144")
        .create_with_context(TrackingContext(Arc::clone(tracker)))?;
    producer
        .client()
        .fetch_metadata(Some(TOPIC), Duration::from_secs(30))?;

    Ok(producer)
}

/// Sends at `--rate` round-robin, kills the victim after `kill_after_s`, and goes on
/// until `--after-failover-secs` past the failover (or `--failover-timeout-secs` past
/// the kill without one). Returns the records sent, when the victim was killed and
/// whether it was the active controller then.
fn produce_through_kill(
    opts: &FailoverOpts,
    cluster: &mut LocalCluster,
    producer: &BaseProducer<TrackingContext>,
    tracker: &Tracker,
    kill_after_s: f64,
) -> Res<(u64, Option<Instant>, Option<bool>)> {
    let mut value = vec![0_u8; opts.value_bytes.max(12)];
    let interval = Duration::from_secs_f64(1.0 / f64::from(opts.rate.max(1)));
    let kill_after = Duration::from_secs_f64(kill_after_s);
    let failover_timeout = Duration::from_secs_f64(opts.failover_timeout_secs);
    let after_failover = Duration::from_secs_f64(opts.after_failover_secs);
    let parts = u64::try_from(opts.partitions)?;
    let start = Instant::now();
    let mut seq = 0_u64;
    let mut killed_at: Option<Instant> = None;
    let mut victim_controller = None;
    loop {
        let elapsed = start.elapsed();
        if killed_at.is_none() && elapsed >= kill_after {
            victim_controller = cluster.is_active_controller(tracker.victim);
            let now = Instant::now();
            if let Ok(mut k) = tracker.killed_at.lock() {
                *k = Some(now);
            }
            killed_at = Some(now);
            cluster.signal_kill(tracker.victim)?;
        }
        if let Some(killed) = killed_at {
            let failed_over = tracker.failed_over_at.lock().ok().and_then(|f| *f);
            match failed_over {
                Some(at) if at.elapsed() >= after_failover => break,
                None if killed.elapsed() >= failover_timeout => break,
                _ => {}
            }
        }
        let due = interval.saturating_mul(u32::try_from(seq)?);
        if elapsed < due {
            producer.poll(due.saturating_sub(elapsed).min(Duration::from_millis(1)));
            continue;
        }
        value[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        value[4..12].copy_from_slice(&seq.to_le_bytes());
        let partition = i32::try_from(seq % parts)?;
        let record = BaseRecord::<(), [u8], usize>::with_opaque_to(TOPIC, usize::try_from(seq)?)
            .payload(&value[..])
            .partition(partition);
        match producer.send(record) {
            Ok(()) => seq += 1,
            // A full local queue (the leader is gone): serve reports and try again.
            Err(_) => {
                producer.poll(Duration::from_millis(10));
            }
        }
    }
    Ok((seq, killed_at, victim_controller))
}

/// Compares what was acknowledged with what was read back: acknowledged records missing
/// (lost), read elsewhere than acknowledged (changed), and read more than once
/// (duplicates).
fn count_losses(
    acked: &[(u64, i32, i64)],
    consumed: &BTreeMap<u64, Vec<(i32, i64)>>,
) -> (u64, u64, u64) {
    let (mut lost, mut changed) = (0_u64, 0_u64);
    for (seq, partition, offset) in acked {
        match consumed.get(seq) {
            None => lost += 1,
            Some(places) if !places.contains(&(*partition, *offset)) => changed += 1,
            Some(_) => {}
        }
    }
    let duplicates: u64 = consumed
        .values()
        .map(|places| places.len().saturating_sub(1) as u64)
        .sum();
    (lost, changed, duplicates)
}

/// Reads every partition from its start to its high watermark; returns, per sequence
/// number, every `(partition, offset)` it was read at.
fn read_back(bootstrap: &str, partitions: i32) -> Res<BTreeMap<u64, Vec<(i32, i64)>>> {
    let consumer = kafka::assigned_consumer(bootstrap, TOPIC, partitions)?;
    let mut remaining: BTreeMap<i32, i64> = BTreeMap::new();
    for partition in 0..partitions {
        let (_, high) =
            consumer.fetch_watermarks(TOPIC, partition, Timeout::After(Duration::from_secs(30)))?;
        if high > 0 {
            remaining.insert(partition, high);
        }
    }
    let mut consumed: BTreeMap<u64, Vec<(i32, i64)>> = BTreeMap::new();
    let mut last_progress = Instant::now();
    while !remaining.is_empty() {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                last_progress = Instant::now();
                let (partition, offset) = (message.partition(), message.offset());
                let payload = message.payload().unwrap_or_default();
                let magic = payload
                    .get(0..4)
                    .and_then(|b| b.try_into().ok())
                    .map(u32::from_be_bytes);
                let seq = payload
                    .get(4..12)
                    .and_then(|b| b.try_into().ok())
                    .map(u64::from_le_bytes);
                match (magic, seq) {
                    (Some(MAGIC), Some(seq)) => {
                        consumed.entry(seq).or_default().push((partition, offset))
                    }
                    _ => {
                        return Err(format!(
                            "record at {TOPIC}-{partition}@{offset} is not a trial record"
                        )
                        .into())
                    }
                }
                if remaining
                    .get(&partition)
                    .is_some_and(|high| offset + 1 >= *high)
                {
                    remaining.remove(&partition);
                }
            }
            Some(Err(error)) => return Err(format!("read back: {error}").into()),
            None if last_progress.elapsed() > Duration::from_secs(60) => {
                return Err(format!("read back stalled; partitions left (partition → high watermark): {remaining:?}").into());
            }
            None => {}
        }
    }
    Ok(consumed)
}
