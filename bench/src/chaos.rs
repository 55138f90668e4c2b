//! `logbook-bench chaos`: random process faults on a 3-node cluster under idempotent and
//! transactional load, then a checker of everything the clients were told succeeded.
//!
//! One trial: a fresh cluster (`cluster.rs`; Logbook or Apache Kafka), an input and an
//! output topic with replication factor 3, `min.insync.replicas=2`, unclean election off
//! and `--partitions` partitions. For `--duration` seconds:
//!
//! - `--producers` idempotent acks=all librdkafka producers write records round-robin
//!   over the input partitions, key = producer id (`p<index>.<incarnation>`, a new
//!   incarnation after a fatal idempotence error), value = `"<producer id> <sequence>"`,
//!   and record every acknowledged `(producer, sequence, partition, offset)`;
//! - a read-process-write job (a read_committed consumer in group `chaos-eos` and a
//!   transactional producer) copies each input record to the same partition of the
//!   output topic as `"<input partition> <input offset> <txn id> <input value>"` and
//!   commits the consumer offsets inside the transaction (`send_offsets_to_transaction`).
//!   On an abortable error it aborts and rewinds to the group's committed offsets; on a
//!   fatal one it starts a new producer with the same `transactional.id` (which fences and
//!   resolves the old one) and rewinds. A rebalance also rewinds, as an EOS app must.
//!   A `send_offsets_to_transaction` that librdkafka blocks in well past its timeout (a
//!   client bug, see `send_offsets_watched`) is treated like a fatal error and reported
//!   as a client hang, not counted against the broker;
//! - a nemesis picks any node at random intervals and SIGKILLs it (restart after a random
//!   delay), SIGSTOPs it (SIGCONT after a few seconds, or after longer than the broker
//!   session and replica lag timeouts) or SIGTERMs it (clean restart). Kinds are drawn
//!   from a shuffled bag of one of each, so every three faults hold one of each kind. At
//!   most `--max-down` nodes (default 1) are killed, stopped or terminated at once.
//!
//! Then the nemesis heals every node, the producers flush, every partition's ISR fills
//! again, the job drains the input (its committed offsets reach the input's end), and
//! both topics are read from the beginning with read_committed and read_uncommitted.
//! Counts (every one must be 0): acknowledged records lost, read twice, reordered within
//! a producer's partition, or read at another partition/offset than acknowledged; input
//! records that differ between the two isolation levels; input records below the
//! committed offset with no output or with several; outputs for input past the committed
//! offset (output and offsets not atomic); outputs whose content is not their input's;
//! records of aborted transactions visible to read_committed; transactions partly
//! visible; records of committed transactions missing; offsets the job committed that
//! the group lost; records sent but never acknowledged when at most one node was down
//! at a time (a majority was always up, so each should be acknowledged after heal); and
//! trials that got stuck (no heal, no drain, no read-back).
//!
//! Every fault is logged to stderr with the wall clock (to line up with the nodes' logs,
//! kept with `LOGBOOK_BENCH_KEEP=1`). Trial `i` uses seed `--seed + i - 1`, so one trial
//! is repeated with `--trials 1 --seed <its seed>` (the faults' kinds, nodes and delays
//! repeat; their timing against the load does not).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use crate::cluster::{LauncherOpts, LocalCluster, NodeLauncher};
use crate::Res;

/// The idempotent producers' topic, read by the job.
const INPUT: &str = "chaos-input";
/// The job's transactional output.
const OUTPUT: &str = "chaos-output";
/// The job's consumer group.
const GROUP: &str = "chaos-eos";
/// The job's `transactional.id` (the same for every producer incarnation, so a new one
/// fences the old).
const TRANSACTIONAL_ID: &str = "chaos-eos-job";
/// Timeout of each transactional call and of a consumer's offset look-ups.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long past [`CALL_TIMEOUT`] a `send_offsets_to_transaction` may block before the job
/// gives its producer up ([`send_offsets_watched`]).
const HUNG_CALL_GRACE: Duration = Duration::from_secs(30);
/// Most input records per transaction.
const TXN_RECORDS_MAX: usize = 100;
/// Longest a transaction collects input before committing.
const TXN_COLLECT: Duration = Duration::from_millis(200);
/// How long the job may take to catch up with the input after the faults stop.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(150);
/// How long a read-back may go without progress.
const READ_STALL: Duration = Duration::from_secs(60);
/// How long a SIGTERMed node may take to exit before it gets SIGKILL.
const TERM_TIMEOUT: Duration = Duration::from_secs(60);

/// `logbook-bench chaos`.
#[derive(Parser, Debug)]
#[command(name = "logbook-bench chaos")]
struct ChaosOpts {
    #[command(flatten)]
    launcher: LauncherOpts,
    /// Trials, each on a fresh cluster.
    #[arg(long, default_value_t = 1)]
    trials: usize,
    /// Seconds of faults and load per trial.
    #[arg(long, default_value_t = 60.0)]
    duration: f64,
    /// Seed of the first trial (default: from the clock); printed, so a run can be repeated.
    #[arg(long)]
    seed: Option<u64>,
    /// Also write the JSON summary line to this file.
    #[arg(long)]
    json_out: Option<PathBuf>,
    /// Partitions of the input and of the output topic.
    #[arg(long, default_value_t = 6)]
    partitions: i32,
    /// Idempotent producers.
    #[arg(long, default_value_t = 2)]
    producers: usize,
    /// Records per second of each producer.
    #[arg(long, default_value_t = 100)]
    rate: u32,
    /// Most nodes down (killed, stopped or terminated) at once: 1 or 2.
    #[arg(long, default_value_t = 1)]
    max_down: usize,
    /// Shortest pause between one fault's start and the next's.
    #[arg(long, default_value_t = 1.0)]
    gap_min_secs: f64,
    /// Longest pause between one fault's start and the next's.
    #[arg(long, default_value_t = 6.0)]
    gap_max_secs: f64,
    /// `replica.lag.time.max.ms` of every node; long SIGSTOPs outlast it and the broker
    /// session timeout (9 s on both targets).
    #[arg(long, default_value_t = 10_000)]
    replica_lag_time_max_ms: u64,
}

/// A small xorshift generator (no `rand` dependency for a few numbers per fault).
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> XorShift {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A float in [0, 1).
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        #[expect(clippy::cast_precision_loss, reason = "53 random bits")]
        let unit = (self.0 >> 11) as f64 / (1_u64 << 53) as f64;
        unit
    }

    /// A float in [low, high).
    fn between(&mut self, low: f64, high: f64) -> f64 {
        low + self.unit() * (high - low).max(0.0)
    }

    /// An index in [0, len).
    fn index(&mut self, len: usize) -> usize {
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "small lengths"
        )]
        let i = (self.unit() * len as f64) as usize;
        i.min(len.saturating_sub(1))
    }
}

/// Seconds since the epoch, to line events up with the nodes' logs.
fn wall() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// What the nemesis did to a node that is still down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// SIGKILL; healed by a restart on the same directory.
    Kill,
    /// SIGSTOP; healed by SIGCONT.
    Stop,
    /// SIGTERM and wait for the exit; healed by a restart.
    Term,
}

/// What the nemesis did in one trial.
#[derive(Debug, Default, Clone)]
struct NemesisLog {
    kills: u64,
    stops: u64,
    long_stops: u64,
    terms: u64,
    /// SIGTERMed nodes still alive after `TERM_TIMEOUT` (then killed).
    term_timeouts: u64,
    /// `"<seconds into the trial> node <id> <action>"`, in order.
    events: Vec<String>,
}

impl NemesisLog {
    fn event(&mut self, start: Instant, node: i32, what: &str) {
        let line = format!("{:7.2}s node {node} {what}", start.elapsed().as_secs_f64());
        eprintln!("chaos {:.3} {line}", wall());
        self.events.push(line);
    }
}

/// Sends `signal` to `pid`.
fn signal(pid: u32, signal: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        #[expect(unsafe_code, reason = "kill(2) has no safe wrapper in libc")]
        // SAFETY: kill takes plain integers and touches no memory of ours.
        unsafe {
            libc::kill(pid, signal);
        }
    }
}

/// True while `/proc/<pid>` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|i| stat.get(i + 1..))
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// Runs faults on `cluster` until `stop`, then heals every node.
fn nemesis(
    cluster: &mut LocalCluster,
    opts: &ChaosOpts,
    random: &mut XorShift,
    stop: &AtomicBool,
    start: Instant,
    log: &mut NemesisLog,
) -> Res<()> {
    let ids: Vec<i32> = (1..=i32::try_from(opts.launcher.nodes)?).collect();
    let mut down: Vec<(i32, Fault, Instant)> = Vec::new();
    let mut bag: Vec<Fault> = Vec::new();
    let mut next = Instant::now() + Duration::from_secs_f64(random.between(1.0, 3.0));
    let max_down = opts.max_down.clamp(1, ids.len().saturating_sub(1).max(1));
    loop {
        let now = Instant::now();
        let mut i = 0;
        while i < down.len() {
            if down.get(i).is_some_and(|d| d.2 <= now) {
                let (id, fault, _) = down.remove(i);
                heal(cluster, id, fault, log, start)?;
            } else {
                i += 1;
            }
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if now >= next && down.len() < max_down {
            let up: Vec<i32> = ids
                .iter()
                .copied()
                .filter(|id| down.iter().all(|d| d.0 != *id))
                .collect();
            if bag.is_empty() {
                bag = vec![Fault::Kill, Fault::Stop, Fault::Term];
            }
            let fault = bag.remove(random.index(bag.len()));
            let id = *up.get(random.index(up.len())).ok_or("no node up")?;
            let pid = cluster
                .node_pid(id)
                .ok_or_else(|| format!("node {id} has no pid"))?;
            let heal_after = inject(cluster, id, pid, fault, random, log, start)?;
            down.push((
                id,
                fault,
                Instant::now() + Duration::from_secs_f64(heal_after),
            ));
            next = Instant::now()
                + Duration::from_secs_f64(random.between(opts.gap_min_secs, opts.gap_max_secs));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for (id, fault, _) in down {
        heal(cluster, id, fault, log, start)?;
    }
    Ok(())
}

/// Starts `fault` on node `id` (process `pid`) and returns how many seconds until it is
/// healed: SIGKILL (restarted later), SIGSTOP (sometimes long, past a session timeout)
/// or SIGTERM (SIGKILL if the node has not exited within `TERM_TIMEOUT`).
fn inject(
    cluster: &mut LocalCluster,
    id: i32,
    pid: u32,
    fault: Fault,
    random: &mut XorShift,
    log: &mut NemesisLog,
    start: Instant,
) -> Res<f64> {
    match fault {
        Fault::Kill => {
            log.kills += 1;
            cluster.signal_kill(id)?;
            let after = random.between(0.5, 8.0);
            log.event(start, id, &format!("SIGKILL (restart in {after:.1}s)"));
            Ok(after)
        }
        Fault::Stop => {
            log.stops += 1;
            let long = random.unit() < 0.3;
            let after = if long {
                log.long_stops += 1;
                random.between(12.0, 20.0)
            } else {
                random.between(1.0, 5.0)
            };
            signal(pid, libc::SIGSTOP);
            log.event(start, id, &format!("SIGSTOP (SIGCONT in {after:.1}s)"));
            Ok(after)
        }
        Fault::Term => {
            log.terms += 1;
            signal(pid, libc::SIGTERM);
            log.event(start, id, "SIGTERM");
            let deadline = Instant::now() + TERM_TIMEOUT;
            while alive(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if alive(pid) {
                log.term_timeouts += 1;
                log.event(start, id, "still alive after SIGTERM: SIGKILL");
                cluster.signal_kill(id)?;
            } else {
                log.event(start, id, "exited");
            }
            Ok(random.between(0.0, 3.0))
        }
    }
}

/// Ends `fault` on node `id`.
fn heal(
    cluster: &mut LocalCluster,
    id: i32,
    fault: Fault,
    log: &mut NemesisLog,
    start: Instant,
) -> Res<()> {
    match fault {
        Fault::Stop => {
            if let Some(pid) = cluster.node_pid(id) {
                signal(pid, libc::SIGCONT);
            }
            log.event(start, id, "SIGCONT");
        }
        Fault::Kill | Fault::Term => {
            log.event(start, id, "restarting");
            cluster
                .restart(id)
                .map_err(|e| format!("restart of node {id}: {e}\n{}", cluster.log_tail(id)))?;
            log.event(start, id, "restarted");
        }
    }
    Ok(())
}

/// One acknowledged input record.
#[derive(Clone, Debug)]
struct Acked {
    producer: String,
    seq: u64,
    partition: i32,
    offset: i64,
}

/// What the idempotent producers' delivery reports say.
#[derive(Default)]
struct ProducerLog {
    acked: Mutex<Vec<Acked>>,
    failed: AtomicU64,
    fatal: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl ProducerLog {
    fn error(&self, error: String) {
        if let Ok(mut first) = self.first_error.lock() {
            first.get_or_insert(error);
        }
    }
}

/// The delivery callback of one producer incarnation.
struct AckContext {
    producer: String,
    log: Arc<ProducerLog>,
}

impl ClientContext for AckContext {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        debug_log(&self.producer, level, fac, message);
    }
}

impl ProducerContext for AckContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, seq: usize) {
        match result {
            Ok(message) => {
                if let Ok(mut acked) = self.log.acked.lock() {
                    acked.push(Acked {
                        producer: self.producer.clone(),
                        seq: seq as u64,
                        partition: message.partition(),
                        offset: message.offset(),
                    });
                }
            }
            Err((error, _)) => {
                self.log.failed.fetch_add(1, Ordering::Relaxed);
                self.log.error(format!("{}: {error}", self.producer));
            }
        }
    }
}

/// Producer `index` until `stop`: paced sends, a new incarnation after a fatal error,
/// then a flush. Returns the records handed to librdkafka.
fn run_producer(
    index: usize,
    bootstrap: &str,
    opts: &ChaosOpts,
    log: &Arc<ProducerLog>,
    stop: &AtomicBool,
) -> Res<u64> {
    let interval = Duration::from_secs_f64(1.0 / f64::from(opts.rate.max(1)));
    let partitions = u64::try_from(opts.partitions)?;
    let mut sent = 0_u64;
    for incarnation in 0.. {
        let key = format!("p{index}.{incarnation}");
        let producer: BaseProducer<AckContext> = with_debug(
            ClientConfig::new()
                .set("bootstrap.servers", bootstrap)
                .set("enable.idempotence", "true")
                .set("acks", "all")
                .set("linger.ms", "5")
                .set("message.timeout.ms", "300000"),
        )
        .create_with_context(AckContext {
            producer: key.clone(),
            log: Arc::clone(log),
        })?;
        let start = Instant::now();
        let mut seq = 0_u64;
        loop {
            if stop.load(Ordering::Relaxed) {
                if let Err(e) = producer.flush(Duration::from_secs(150)) {
                    log.error(format!("{key} flush: {e}"));
                }
                return Ok(sent);
            }
            if let Some((code, reason)) = producer.client().fatal_error() {
                log.fatal.fetch_add(1, Ordering::Relaxed);
                log.error(format!("{key} fatal: {code:?} {reason}"));
                eprintln!(
                    "chaos {:.3} producer {key} fatal: {code:?} {reason}",
                    wall()
                );
                break;
            }
            let due = interval.saturating_mul(u32::try_from(seq)?);
            let elapsed = start.elapsed();
            if elapsed < due {
                producer.poll(due.saturating_sub(elapsed).min(Duration::from_millis(5)));
                continue;
            }
            let value = format!("{key} {seq}");
            let partition = i32::try_from(seq % partitions)?;
            let record = BaseRecord::with_opaque_to(INPUT, usize::try_from(seq)?)
                .key(&key)
                .payload(&value)
                .partition(partition);
            match producer.send(record) {
                Ok(()) => {
                    seq += 1;
                    sent += 1;
                    producer.poll(Duration::ZERO);
                }
                // A full local queue (partitions without a leader): serve reports, retry.
                Err(_) => {
                    producer.poll(Duration::from_millis(10));
                }
            }
        }
    }
    Ok(sent)
}

/// How one transaction ended, as the job saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Open,
    Committed,
    Aborted,
    /// The producer failed fatally before the outcome was known; the next incarnation's
    /// `init_transactions` committed or aborted it.
    Unknown,
}

/// The job's record of its transactions and offsets.
#[derive(Default)]
struct JobLog {
    /// Per transaction id: output records sent and how it ended.
    txns: Mutex<BTreeMap<String, (u64, Outcome)>>,
    /// The next input offset per partition, as of the last commit or rewind.
    committed: Mutex<BTreeMap<i32, i64>>,
    commits: AtomicU64,
    aborts: AtomicU64,
    fatal: AtomicU64,
    /// Calls librdkafka blocked in past their timeout ([`send_offsets_watched`]).
    client_hangs: AtomicU64,
    rebalances: AtomicU64,
    first_error: Mutex<Option<String>>,
    /// The latest error with its wall-clock time, for a stuck trial's report.
    last_error: Mutex<String>,
    /// The call the job is in (or last made), with its wall-clock time.
    step: Mutex<String>,
}

impl JobLog {
    fn error(&self, error: String) {
        let now = wall();
        eprintln!("chaos {now:.3} job: {error}");
        if let Ok(mut last) = self.last_error.lock() {
            *last = format!("at {now:.3}: {error}");
        }
        if let Ok(mut first) = self.first_error.lock() {
            first.get_or_insert(error);
        }
    }

    fn step(&self, txn: &str, call: &str) {
        if let Ok(mut step) = self.step.lock() {
            *step = format!("{call} of {txn} since {:.3}", wall());
        }
    }

    fn set_outcome(&self, txn: &str, outcome: Outcome) {
        if let Ok(mut txns) = self.txns.lock() {
            if let Some(entry) = txns.get_mut(txn) {
                entry.1 = outcome;
            }
        }
    }
}

/// Sets librdkafka's `debug` contexts from `LOGBOOK_BENCH_RDKAFKA_DEBUG` (e.g. `eos,cgrp`)
/// on the job's and the load producers' clients; their lines go to stderr with the wall
/// clock (see [`debug_log`]).
fn with_debug(config: &mut ClientConfig) -> &mut ClientConfig {
    if let Ok(debug) = std::env::var("LOGBOOK_BENCH_RDKAFKA_DEBUG") {
        config.set("debug", debug);
        config.set_log_level(rdkafka::config::RDKafkaLogLevel::Debug);
    }
    config
}

/// A librdkafka log line of the job's clients, only with `LOGBOOK_BENCH_RDKAFKA_DEBUG`.
fn debug_log(client: &str, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
    if std::env::var_os("LOGBOOK_BENCH_RDKAFKA_DEBUG").is_some() {
        eprintln!("{:.6} rdkafka {client} {level:?} {fac}: {message}", wall());
    }
}

/// The job's transactional producer's context: default delivery, debug lines to stderr.
struct JobProducerContext;

impl ClientContext for JobProducerContext {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        debug_log("job-producer", level, fac, message);
    }
}

impl ProducerContext for JobProducerContext {
    type DeliveryOpaque = ();

    fn delivery(&self, _result: &DeliveryResult<'_>, _opaque: ()) {}
}

/// Tells the job's loop that the group rebalanced (its positions were reset).
struct RebalanceFlag(Arc<AtomicBool>);

impl ClientContext for RebalanceFlag {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        debug_log("job-consumer", level, fac, message);
    }
}

impl ConsumerContext for RebalanceFlag {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, _rebalance: &Rebalance<'_>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The job's phases, set by the trial.
const JOB_RUN: u8 = 0;
/// Stop once the committed offsets reach `JobControl::drain_to`.
const JOB_DRAIN: u8 = 1;
/// Stop now.
const JOB_STOP: u8 = 2;

/// How the trial steers the job.
struct JobControl {
    phase: AtomicU8,
    drain_to: Mutex<BTreeMap<i32, i64>>,
}

/// Why a transaction did not commit.
enum Failure {
    /// Abort, rewind and go on with the same producer.
    Abortable(String),
    /// A new producer incarnation, then rewind.
    Fatal(String),
    /// librdkafka blocked past the call's timeout: the producer is left behind (its thread
    /// with it) and a new incarnation fences it, then rewind.
    Hung(String),
}

fn classify(what: &str, error: &KafkaError) -> Failure {
    match error {
        KafkaError::Transaction(e) if e.is_fatal() => Failure::Fatal(format!("{what}: {e}")),
        _ => Failure::Abortable(format!("{what}: {error}")),
    }
}

fn retriable(error: &KafkaError) -> bool {
    match error {
        KafkaError::Transaction(e) => e.is_retriable() && !e.is_fatal(),
        // commit_transaction flushes first; a flush timeout is retried like a commit's.
        KafkaError::Flush(_) => true,
        _ => false,
    }
}

/// `abort_transaction`, with the producer's event queue served meanwhile from a second
/// thread. librdkafka's abort purges the outstanding messages and then waits until their
/// delivery reports have been *served*; rust-rdkafka's `BaseProducer` does not poll
/// inside `abort_transaction` (it does inside `commit_transaction`, through `flush`), so
/// an abort with messages outstanding timed out again and again ("the event queue must
/// be polled for delivery report events in a separate thread or prior to calling abort")
/// until the job gave its producer up: the "stuck" trials of the stop-30 runs.
fn abort_serving_reports(producer: &BaseProducer<JobProducerContext>) -> KafkaResult<()> {
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                producer.poll(Duration::from_millis(50));
            }
        });
        let result = producer.abort_transaction(CALL_TIMEOUT);
        done.store(true, Ordering::Relaxed);
        result
    })
}

/// A transactional producer that finished `init_transactions` (retried while the
/// coordinator is unavailable).
fn txn_producer(bootstrap: &str, control: &JobControl) -> Res<BaseProducer<JobProducerContext>> {
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    loop {
        let producer: BaseProducer<JobProducerContext> = with_debug(&mut ClientConfig::new())
            .set("bootstrap.servers", bootstrap)
            .set("transactional.id", TRANSACTIONAL_ID)
            .set("acks", "all")
            .set("linger.ms", "5")
            .set("transaction.timeout.ms", "60000")
            .set("message.timeout.ms", "55000")
            .create_with_context(JobProducerContext)?;
        match producer.init_transactions(CALL_TIMEOUT) {
            Ok(()) => return Ok(producer),
            Err(e)
                if Instant::now() < deadline
                    && control.phase.load(Ordering::SeqCst) != JOB_STOP =>
            {
                eprintln!("chaos {:.3} job: init_transactions: {e}; retrying", wall());
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(e) => return Err(format!("init_transactions: {e}").into()),
        }
    }
}

/// Seeks every assigned partition to the group's committed offset (the beginning when
/// none) and records those offsets as the job's.
fn rewind(consumer: &BaseConsumer<RebalanceFlag>, log: &JobLog) -> Res<()> {
    let assignment = consumer.assignment()?;
    if assignment.count() == 0 {
        return Ok(());
    }
    let committed = consumer.committed_offsets(assignment, CALL_TIMEOUT)?;
    let mut seek = TopicPartitionList::new();
    let mut known = BTreeMap::new();
    for element in committed.elements() {
        let offset = match element.offset() {
            Offset::Offset(o) => {
                known.insert(element.partition(), o);
                Offset::Offset(o)
            }
            _ => Offset::Beginning,
        };
        seek.add_partition_offset(element.topic(), element.partition(), offset)?;
    }
    let result = consumer.seek_partitions(seek, CALL_TIMEOUT)?;
    for element in result.elements() {
        if let Err(e) = element.error() {
            return Err(format!("seek {}-{}: {e}", element.topic(), element.partition()).into());
        }
    }
    if let Ok(mut offsets) = log.committed.lock() {
        offsets.extend(known);
    }
    Ok(())
}

/// One transaction over `batch`; returns the next offset per input partition.
fn transact(
    producer: &Arc<BaseProducer<JobProducerContext>>,
    consumer: &BaseConsumer<RebalanceFlag>,
    batch: &[(i32, i64, String)],
    txn: &str,
    log: &JobLog,
) -> Result<BTreeMap<i32, i64>, Failure> {
    log.step(txn, "begin_transaction");
    producer
        .begin_transaction()
        .map_err(|e| classify("begin_transaction", &e))?;
    if let Ok(mut txns) = log.txns.lock() {
        txns.insert(txn.to_owned(), (0, Outcome::Open));
    }
    let mut next: BTreeMap<i32, i64> = BTreeMap::new();
    for (partition, offset, value) in batch {
        let out = format!("{partition} {offset} {txn} {value}");
        loop {
            let record = BaseRecord::<str, str>::to(OUTPUT)
                .key(txn)
                .payload(&out)
                .partition(*partition);
            match producer.send(record) {
                Ok(()) => break,
                Err((
                    KafkaError::MessageProduction(rdkafka::error::RDKafkaErrorCode::QueueFull),
                    _,
                )) => {
                    producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => return Err(classify("send", &e)),
            }
        }
        if let Ok(mut txns) = log.txns.lock() {
            if let Some(entry) = txns.get_mut(txn) {
                entry.0 += 1;
            }
        }
        next.insert(*partition, offset + 1);
    }
    let mut offsets = TopicPartitionList::new();
    for (partition, offset) in &next {
        offsets
            .add_partition_offset(INPUT, *partition, Offset::Offset(*offset))
            .map_err(|e| Failure::Abortable(format!("offsets: {e}")))?;
    }
    let metadata = consumer
        .group_metadata()
        .ok_or_else(|| Failure::Abortable("no group metadata".to_owned()))?;
    log.step(txn, "send_offsets_to_transaction");
    send_offsets_watched(producer, offsets, metadata)?;
    let mut attempts = 0;
    loop {
        log.step(txn, "commit_transaction");
        match producer.commit_transaction(CALL_TIMEOUT) {
            Ok(()) => return Ok(next),
            Err(e) if retriable(&e) && attempts < 3 => {
                attempts += 1;
                log.error(format!("commit_transaction (retrying): {e}"));
            }
            Err(e) if retriable(&e) => {
                return Err(Failure::Fatal(format!(
                    "commit_transaction kept failing: {e}"
                )))
            }
            Err(e) => return Err(classify("commit_transaction", &e)),
        }
    }
}

/// `send_offsets_to_transaction` on a helper thread, given up [`HUNG_CALL_GRACE`] after its
/// own timeout. librdkafka (2.12, still open upstream as confluentinc/librdkafka#5456 and
/// #5511) never checks the timeout of a coordinator request: when the cached group
/// coordinator is a broker it has dropped from its metadata (a node fenced while it
/// restarts is left out of Metadata, in Kafka as here), the TxnOffsetCommit waits for a
/// state change of some broker that may never come, and the call blocks for good (seen
/// once in CI: the job sat in it for 150 s after the heal, every node up). A blocked call
/// cannot be cancelled, so the job leaves that producer to its thread and starts a new
/// incarnation, whose InitProducerId fences the old one and aborts its transaction: the
/// broker-side checks (exactly-once output, offsets) still apply to everything after.
fn send_offsets_watched(
    producer: &Arc<BaseProducer<JobProducerContext>>,
    offsets: TopicPartitionList,
    metadata: rdkafka::consumer::ConsumerGroupMetadata,
) -> Result<(), Failure> {
    let (done, result) = std::sync::mpsc::channel();
    let caller = Arc::clone(producer);
    std::thread::Builder::new()
        .name("chaos-send-offsets".to_owned())
        .spawn(move || {
            let answer = caller.send_offsets_to_transaction(&offsets, &metadata, CALL_TIMEOUT);
            // The job may have stopped waiting; nothing to do then.
            let _ = done.send(answer);
        })
        .map_err(|e| Failure::Abortable(format!("spawn: {e}")))?;
    match result.recv_timeout(CALL_TIMEOUT + HUNG_CALL_GRACE) {
        Ok(answer) => answer.map_err(|e| classify("send_offsets_to_transaction", &e)),
        Err(_) => Err(Failure::Hung(format!(
            "send_offsets_to_transaction still blocked {} s after its {} s timeout \
             (librdkafka#5456/#5511)",
            HUNG_CALL_GRACE.as_secs(),
            CALL_TIMEOUT.as_secs()
        ))),
    }
}

/// The read-process-write job, until the trial stops it or it has drained the input.
fn run_job(bootstrap: &str, control: &JobControl, log: &JobLog) -> Res<()> {
    let rebalanced = Arc::new(AtomicBool::new(false));
    let consumer: BaseConsumer<RebalanceFlag> = with_debug(&mut ClientConfig::new())
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "1000")
        .create_with_context(RebalanceFlag(Arc::clone(&rebalanced)))?;
    consumer.subscribe(&[INPUT])?;
    let mut producer = Arc::new(txn_producer(bootstrap, control)?);
    let mut incarnation = 0_u64;
    let mut txn_no = 0_u64;
    loop {
        if job_finished(control, log)? {
            return Ok(());
        }
        let batch = collect_batch(&consumer, log);
        if rebalanced.swap(false, Ordering::SeqCst) {
            // The new assignment starts at the committed offsets; what was read before
            // it is dropped and read again from there. The rewind must succeed before
            // reading on: the dropped batch moved the positions past records no
            // transaction holds (CI once saw a NotCoordinator here skip 100 inputs).
            log.rebalances.fetch_add(1, Ordering::Relaxed);
            rewind_until_done(&consumer, "after rebalance", log)?;
            continue;
        }
        if batch.is_empty() {
            continue;
        }
        let txn = format!("t{incarnation}.{txn_no}");
        txn_no += 1;
        let failure = match transact(&producer, &consumer, &batch, &txn, log) {
            Ok(next) => {
                log.set_outcome(&txn, Outcome::Committed);
                log.commits.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut committed) = log.committed.lock() {
                    committed.extend(next);
                }
                if !rebalanced.load(Ordering::SeqCst) {
                    continue;
                }
                // A rebalance during the transaction reset the positions to offsets
                // older than this commit: the next loop rewinds.
                None
            }
            Err(failure) => Some(failure),
        };
        if let Some(failure) = failure {
            match settle_failure(failure, &producer, &txn, log) {
                AfterFailure::Keep => {}
                AfterFailure::Replace => {
                    drop(producer);
                    producer = Arc::new(txn_producer(bootstrap, control)?);
                    incarnation += 1;
                    txn_no = 0;
                }
                AfterFailure::LeaveBehind => {
                    producer = Arc::new(txn_producer(bootstrap, control)?);
                    incarnation += 1;
                    txn_no = 0;
                }
            }
        }
        // Rewind until it works: reading on from a wrong position would duplicate output.
        rewind_until_done(&consumer, &txn, log)?;
    }
}

/// What a failed transaction does to the job's producer.
enum AfterFailure {
    /// Keep it: the transaction was aborted.
    Keep,
    /// Close it, then make a new one: the transaction's outcome is unknown.
    Replace,
    /// Make a new one and leave the old one behind: one of its calls is blocked.
    LeaveBehind,
}

/// Logs and counts a failed transaction: an abortable one is aborted (the producer is
/// replaced if that fails too), a fatal one or a hung client call leaves its outcome
/// unknown. Says what to do with the producer.
fn settle_failure(
    failure: Failure,
    producer: &BaseProducer<JobProducerContext>,
    txn: &str,
    log: &JobLog,
) -> AfterFailure {
    match failure {
        Failure::Abortable(why) => {
            log.error(format!("{txn}: {why}; aborting"));
            if abort_with_retries(producer, txn, log) {
                log.set_outcome(txn, Outcome::Aborted);
                log.aborts.fetch_add(1, Ordering::Relaxed);
                AfterFailure::Keep
            } else {
                log.set_outcome(txn, Outcome::Unknown);
                log.fatal.fetch_add(1, Ordering::Relaxed);
                AfterFailure::Replace
            }
        }
        Failure::Hung(why) => {
            log.error(format!(
                "{txn}: {why}; new producer, the old one left behind"
            ));
            log.set_outcome(txn, Outcome::Unknown);
            log.client_hangs.fetch_add(1, Ordering::Relaxed);
            AfterFailure::LeaveBehind
        }
        Failure::Fatal(why) => {
            log.error(format!("{txn}: {why}; new producer"));
            log.set_outcome(txn, Outcome::Unknown);
            log.fatal.fetch_add(1, Ordering::Relaxed);
            AfterFailure::Replace
        }
    }
}

/// Whether the job is done: told to stop, or told to drain and its commits reached the
/// input ends it was given.
fn job_finished(control: &JobControl, log: &JobLog) -> Res<bool> {
    match control.phase.load(Ordering::SeqCst) {
        JOB_STOP => return Ok(true),
        JOB_DRAIN => {
            let target = control.drain_to.lock().map_err(|_| "poisoned")?.clone();
            let done = log.committed.lock().map_err(|_| "poisoned")?;
            if target
                .iter()
                .all(|(p, end)| done.get(p).copied().unwrap_or(0) >= *end)
            {
                return Ok(true);
            }
        }
        _ => {}
    }
    Ok(false)
}

/// One transaction's input: records polled until `TXN_RECORDS_MAX` or `TXN_COLLECT` has
/// passed, as (partition, offset, value).
fn collect_batch(consumer: &BaseConsumer<RebalanceFlag>, log: &JobLog) -> Vec<(i32, i64, String)> {
    let mut batch = Vec::new();
    let until = Instant::now() + TXN_COLLECT;
    while batch.len() < TXN_RECORDS_MAX && Instant::now() < until {
        match consumer.poll(Duration::from_millis(50)) {
            Some(Ok(m)) => {
                let value = String::from_utf8_lossy(m.payload().unwrap_or_default());
                batch.push((m.partition(), m.offset(), value.into_owned()));
            }
            Some(Err(e)) => log.error(format!("poll: {e}")),
            None => {}
        }
    }
    batch
}

/// Aborts `txn`, retrying a retriable error up to six attempts in all; `false` when it
/// could not be aborted (the caller then replaces the producer).
fn abort_with_retries(
    producer: &BaseProducer<JobProducerContext>,
    txn: &str,
    log: &JobLog,
) -> bool {
    let mut aborted = false;
    for _ in 0..6 {
        log.step(txn, "abort_transaction");
        match abort_serving_reports(producer) {
            Ok(()) => {
                aborted = true;
                break;
            }
            Err(e) if retriable(&e) => log.error(format!("abort (retrying): {e}")),
            Err(e) => {
                log.error(format!("abort: {e}"));
                break;
            }
        }
    }
    aborted
}

/// Rewinds the consumer to the committed offsets, retrying for up to `DRAIN_TIMEOUT`:
/// reading on from a wrong position would duplicate output.
fn rewind_until_done(consumer: &BaseConsumer<RebalanceFlag>, txn: &str, log: &JobLog) -> Res<()> {
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    loop {
        log.step(txn, "rewind (committed offsets, seek)");
        match rewind(consumer, log) {
            Ok(()) => break,
            Err(e) if Instant::now() < deadline => {
                log.error(format!("rewind: {e}; retrying"));
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(e) => return Err(format!("rewind: {e}").into()),
        }
    }
    Ok(())
}

/// The group's committed offsets of the input as OffsetFetch answers them with and
/// without `require_stable` (librdkafka asks for stable offsets under read_committed), for
/// a stuck trial's report: a transaction that never completes leaves the offsets pending.
fn group_offsets_report(bootstrap: &str, partitions: i32) -> String {
    let mut report = Vec::new();
    for isolation in ["read_uncommitted", "read_committed"] {
        let fetched = (|| -> Res<Vec<(i32, Offset)>> {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", bootstrap)
                .set("group.id", GROUP)
                .set("isolation.level", isolation)
                .create()?;
            let mut list = TopicPartitionList::new();
            for partition in 0..partitions {
                list.add_partition(INPUT, partition);
            }
            let answer = consumer.committed_offsets(list, Duration::from_secs(10))?;
            Ok(answer
                .elements()
                .iter()
                .map(|e| (e.partition(), e.offset()))
                .collect())
        })();
        report.push(match fetched {
            Ok(offsets) => format!("{isolation} {offsets:?}"),
            Err(e) => format!("{isolation} failed: {e}"),
        });
    }
    report.join("; ")
}

/// One record read back.
struct Read {
    partition: i32,
    offset: i64,
    key: String,
    value: String,
}

/// Reads every partition of `topic` from the beginning until each reports its end (the
/// high watermark, or the last stable offset under read_committed).
fn read_all(bootstrap: &str, topic: &str, partitions: i32, isolation: &str) -> Res<Vec<Read>> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "chaos-check")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", isolation)
        .create()?;
    let mut list = TopicPartitionList::new();
    for partition in 0..partitions {
        list.add_partition_offset(topic, partition, Offset::Beginning)?;
    }
    consumer.assign(&list)?;
    let mut ended = vec![false; usize::try_from(partitions)?];
    let mut records = Vec::new();
    let mut last_progress = Instant::now();
    while ended.iter().any(|e| !e) {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                last_progress = Instant::now();
                records.push(Read {
                    partition: m.partition(),
                    offset: m.offset(),
                    key: String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned(),
                    value: String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
                });
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                last_progress = Instant::now();
                if let Some(e) = usize::try_from(p).ok().and_then(|p| ended.get_mut(p)) {
                    *e = true;
                }
            }
            Some(Err(e)) => return Err(format!("read {topic} ({isolation}): {e}").into()),
            None if last_progress.elapsed() > READ_STALL => {
                return Err(format!(
                    "read {topic} ({isolation}) stalled; partitions not at their end: {:?}",
                    (0..partitions)
                        .zip(&ended)
                        .filter(|(_, e)| !**e)
                        .map(|(p, _)| p)
                        .collect::<Vec<_>>()
                )
                .into())
            }
            None => {}
        }
    }
    Ok(records)
}

/// Every count of one trial; all must be 0.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    lost: u64,
    duplicated: u64,
    reordered: u64,
    offset_changed: u64,
    /// Input records read differently under the two isolation levels.
    isolation_diff: u64,
    /// Records that are not the bench's.
    foreign: u64,
    /// Input below the committed offset with no committed output.
    txn_missing: u64,
    /// Extra committed outputs for one input.
    txn_duplicated: u64,
    /// Committed outputs for input past the committed offset.
    txn_past_commit: u64,
    /// Outputs whose content is not their input's.
    txn_mismatch: u64,
    /// Records of aborted transactions visible to read_committed.
    aborted_visible: u64,
    /// Transactions partly visible to read_committed.
    txn_partial: u64,
    /// Records of committed transactions missing under read_committed.
    committed_missing: u64,
    /// Offsets the job committed that the group lost.
    offsets_lost: u64,
    /// Records handed to a producer that were never acknowledged, counted when at most
    /// one node was down at a time: a majority was always up, so with a 300 s message
    /// timeout every record should be acknowledged once the cluster heals (a trial that
    /// acknowledged 103 of 24,000 records counted 0 everywhere before this count).
    unacked: u64,
    /// 1 when the trial got stuck or failed.
    stuck: u64,
}

impl Counts {
    const NAMES: [&'static str; 16] = [
        "lost",
        "duplicated",
        "reordered",
        "offset_changed",
        "isolation_diff",
        "foreign",
        "txn_missing",
        "txn_duplicated",
        "txn_past_commit",
        "txn_mismatch",
        "aborted_visible",
        "txn_partial",
        "committed_missing",
        "offsets_lost",
        "unacked",
        "stuck",
    ];

    fn values(&self) -> [u64; 16] {
        [
            self.lost,
            self.duplicated,
            self.reordered,
            self.offset_changed,
            self.isolation_diff,
            self.foreign,
            self.txn_missing,
            self.txn_duplicated,
            self.txn_past_commit,
            self.txn_mismatch,
            self.aborted_visible,
            self.txn_partial,
            self.committed_missing,
            self.offsets_lost,
            self.unacked,
            self.stuck,
        ]
    }

    fn add(&mut self, other: &Counts) {
        let sum: Vec<u64> = self
            .values()
            .iter()
            .zip(other.values())
            .map(|(a, b)| a + b)
            .collect();
        *self = Counts::from_values(&sum);
    }

    fn from_values(v: &[u64]) -> Counts {
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        Counts {
            lost: at(0),
            duplicated: at(1),
            reordered: at(2),
            offset_changed: at(3),
            isolation_diff: at(4),
            foreign: at(5),
            txn_missing: at(6),
            txn_duplicated: at(7),
            txn_past_commit: at(8),
            txn_mismatch: at(9),
            aborted_visible: at(10),
            txn_partial: at(11),
            committed_missing: at(12),
            offsets_lost: at(13),
            unacked: at(14),
            stuck: at(15),
        }
    }

    fn total(&self) -> u64 {
        self.values().iter().sum()
    }

    fn json(&self) -> serde_json::Value {
        Counts::NAMES
            .iter()
            .zip(self.values())
            .map(|(k, v)| ((*k).to_owned(), serde_json::json!(v)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}

/// The outcome of one trial.
#[derive(Debug, Default, Clone)]
struct Trial {
    seed: u64,
    nemesis: NemesisLog,
    sent: u64,
    acked: u64,
    delivery_failed: u64,
    producer_fatal: u64,
    commits: u64,
    aborts: u64,
    job_fatal: u64,
    /// Producers the job left behind, blocked in librdkafka past a call's timeout.
    client_hangs: u64,
    rebalances: u64,
    outputs: u64,
    heal_s: f64,
    counts: Counts,
    /// The first client error seen (expected under faults; for the report).
    first_error: Option<String>,
    /// Why the trial was stuck, when it was.
    failure: Option<String>,
    /// Count details for a post-mortem (first few of each kind).
    details: Vec<String>,
}

/// Parses `"<producer> <seq>"`.
fn parse_input(value: &str) -> Option<(&str, u64)> {
    let (producer, seq) = value.split_once(' ')?;
    Some((producer, seq.parse().ok()?))
}

/// Parses `"<input partition> <input offset> <txn> <input value>"`.
fn parse_output(value: &str) -> Option<(i32, i64, &str, &str)> {
    let mut parts = value.splitn(4, ' ');
    let partition = parts.next()?.parse().ok()?;
    let offset = parts.next()?.parse().ok()?;
    let txn = parts.next()?;
    Some((partition, offset, txn, parts.next()?))
}

/// Pushes `line` to `details` while it holds fewer than 40 lines.
fn detail(details: &mut Vec<String>, line: String) {
    if details.len() < 40 {
        details.push(line);
    }
}

/// The idempotent producers' checks, on the read_committed read of the input.
fn check_input(acked: &[Acked], input: &[Read], counts: &mut Counts, details: &mut Vec<String>) {
    let mut places: HashMap<(&str, u64), Vec<(i32, i64)>> = HashMap::new();
    // Per producer and partition, in offset order: the highest sequence so far.
    let mut highest: HashMap<(&str, i32), u64> = HashMap::new();
    let mut sorted: Vec<&Read> = input.iter().collect();
    sorted.sort_by_key(|r| (r.partition, r.offset));
    for r in sorted {
        let Some((producer, seq)) = parse_input(&r.value).filter(|(p, _)| *p == r.key) else {
            counts.foreign += 1;
            detail(
                details,
                format!(
                    "foreign input at {}@{}: {:?}",
                    r.partition, r.offset, r.value
                ),
            );
            continue;
        };
        let seen = places.entry((producer, seq)).or_default();
        seen.push((r.partition, r.offset));
        if seen.len() > 1 {
            counts.duplicated += 1;
            detail(
                details,
                format!("duplicate {producer} seq {seq} at {seen:?}"),
            );
            continue;
        }
        let high = highest.entry((producer, r.partition)).or_insert(seq);
        if seq < *high {
            counts.reordered += 1;
            detail(
                details,
                format!(
                    "reordered {producer} seq {seq} at {}@{} after seq {high}",
                    r.partition, r.offset
                ),
            );
        }
        *high = (*high).max(seq);
    }
    check_acked(acked, &places, counts, details);
}

/// Every acknowledged record must have been read (else `lost`), in the partition and at
/// the offset it was acknowledged at (else `offset_changed`). `places` is where each
/// (producer, sequence) was read.
fn check_acked(
    acked: &[Acked],
    places: &HashMap<(&str, u64), Vec<(i32, i64)>>,
    counts: &mut Counts,
    details: &mut Vec<String>,
) {
    for a in acked {
        match places.get(&(a.producer.as_str(), a.seq)) {
            None => {
                counts.lost += 1;
                detail(
                    details,
                    format!(
                        "lost {} seq {} acknowledged at {}@{}",
                        a.producer, a.seq, a.partition, a.offset
                    ),
                );
            }
            // librdkafka acknowledges records of a request whose answer was lost (a
            // timeout, a dropped connection) implicitly once a later request of the same
            // producer succeeds, without an offset (-1001, `rd_kafka_dr_implicit_ack`):
            // such a record must be in its partition, at an offset nobody reported.
            Some(at)
                if !at
                    .iter()
                    .any(|(p, o)| *p == a.partition && (a.offset < 0 || *o == a.offset)) =>
            {
                counts.offset_changed += 1;
                detail(
                    details,
                    format!(
                        "moved {} seq {} acknowledged at {}@{}, read at {at:?}",
                        a.producer, a.seq, a.partition, a.offset
                    ),
                );
            }
            Some(_) => {}
        }
    }
}

/// The transactional job's checks, on the read_committed reads of input and output.
fn check_output(
    input: &[Read],
    output: &[Read],
    committed: &BTreeMap<i32, i64>,
    txns: &BTreeMap<String, (u64, Outcome)>,
    counts: &mut Counts,
    details: &mut Vec<String>,
) {
    let inputs: HashMap<(i32, i64), &str> = input
        .iter()
        .map(|r| ((r.partition, r.offset), r.value.as_str()))
        .collect();
    let mut outputs_of: HashMap<(i32, i64), u64> = HashMap::new();
    let mut visible: HashMap<&str, u64> = HashMap::new();
    for r in output {
        let Some((partition, offset, txn, value)) = parse_output(&r.value) else {
            counts.foreign += 1;
            detail(
                details,
                format!(
                    "foreign output at {}@{}: {:?}",
                    r.partition, r.offset, r.value
                ),
            );
            continue;
        };
        *visible.entry(txn).or_default() += 1;
        *outputs_of.entry((partition, offset)).or_default() += 1;
        if inputs.get(&(partition, offset)) != Some(&value) || partition != r.partition {
            counts.txn_mismatch += 1;
            detail(
                details,
                format!(
                    "output at {}@{} ({txn}) does not match input {partition}@{offset}",
                    r.partition, r.offset
                ),
            );
        }
        if offset >= committed.get(&partition).copied().unwrap_or(0) {
            counts.txn_past_commit += 1;
            detail(
                details,
                format!("output at {}@{} ({txn}) for input {partition}@{offset} past the committed offset", r.partition, r.offset),
            );
        }
        if txns.get(txn).is_some_and(|t| t.1 == Outcome::Aborted) {
            counts.aborted_visible += 1;
            detail(
                details,
                format!("aborted {txn} visible at {}@{}", r.partition, r.offset),
            );
        }
    }
    check_inputs_processed(input, committed, &outputs_of, counts, details);
    check_txn_visibility(txns, &visible, counts, details);
}

/// Every input record below the group's committed offset has exactly one output (else
/// `txn_missing` or `txn_duplicated`); `outputs_of` counts the outputs of each input.
fn check_inputs_processed(
    input: &[Read],
    committed: &BTreeMap<i32, i64>,
    outputs_of: &HashMap<(i32, i64), u64>,
    counts: &mut Counts,
    details: &mut Vec<String>,
) {
    for r in input {
        if r.offset < committed.get(&r.partition).copied().unwrap_or(0) {
            match outputs_of
                .get(&(r.partition, r.offset))
                .copied()
                .unwrap_or(0)
            {
                0 => {
                    counts.txn_missing += 1;
                    detail(
                        details,
                        format!("input {}@{} has no output", r.partition, r.offset),
                    );
                }
                1 => {}
                n => {
                    counts.txn_duplicated += n - 1;
                    detail(
                        details,
                        format!("input {}@{} has {n} outputs", r.partition, r.offset),
                    );
                }
            }
        }
    }
}

/// Each transaction's records are visible all or none (else `txn_partial`), and all of
/// a committed one's (else `committed_missing`); `visible` counts what was read of each.
fn check_txn_visibility(
    txns: &BTreeMap<String, (u64, Outcome)>,
    visible: &HashMap<&str, u64>,
    counts: &mut Counts,
    details: &mut Vec<String>,
) {
    for (txn, (sent, outcome)) in txns {
        let seen = visible.get(txn.as_str()).copied().unwrap_or(0);
        if seen != 0 && seen != *sent {
            counts.txn_partial += 1;
            detail(
                details,
                format!("{txn} ({outcome:?}): {seen} of {sent} records visible"),
            );
        }
        if *outcome == Outcome::Committed && seen < *sent {
            counts.committed_missing += sent - seen;
            detail(
                details,
                format!("committed {txn}: {seen} of {sent} records visible"),
            );
        }
    }
}

/// The node launcher of a chaos run: the configured one, with the run's
/// `replica.lag.time.max.ms` added to each node's settings.
fn chaos_launcher(opts: &ChaosOpts) -> Res<NodeLauncher> {
    let mut launcher = opts.launcher.launcher()?;
    match &mut launcher {
        NodeLauncher::Kafka { properties, .. } => {
            properties.push(format!(
                "replica.lag.time.max.ms={}",
                opts.replica_lag_time_max_ms
            ));
        }
        NodeLauncher::Logbook { args, .. } => {
            args.push("--replica-lag-time-max-ms".to_owned());
            args.push(opts.replica_lag_time_max_ms.to_string());
        }
    }
    Ok(launcher)
}

/// Runs `logbook-bench chaos ARGS…`; true when every count of every trial is 0.
pub fn main(args: &[String]) -> Res<bool> {
    let opts = ChaosOpts::parse_from(args);
    let launcher = chaos_launcher(&opts)?;
    let seed = opts.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_secs())
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    println!(
        "logbook-bench chaos · {} trials of {} s · {} × {} · RF 3, min.insync.replicas 2, {} partitions · \
         {} idempotent producers × {} records/s + a read-process-write transactional job · \
         at most {} node(s) down · seed {seed}",
        opts.trials,
        opts.duration,
        opts.launcher.nodes,
        launcher.name(),
        opts.partitions,
        opts.producers,
        opts.rate,
        opts.max_down,
    );
    println!(
        "trial seed          kill stop(long) term   acked  failed fatal  commits aborts txnfatal rebal  outputs heal s  lost dup reord moved isodiff txn:miss dup past mism abrt part cmiss offl unack stuck"
    );
    let mut trials = Vec::with_capacity(opts.trials);
    let mut totals = Counts::default();
    for index in 1..=opts.trials {
        let trial_seed = seed.wrapping_add(index as u64 - 1);
        let trial = run_trial(&opts, &launcher, &rt, trial_seed);
        print_trial(index, trial_seed, &trial);
        let c = trial.counts;
        totals.add(&c);
        trials.push(trial);
    }
    let kills: u64 = trials.iter().map(|t| t.nemesis.kills).sum();
    let stops: u64 = trials.iter().map(|t| t.nemesis.stops).sum();
    let terms: u64 = trials.iter().map(|t| t.nemesis.terms).sum();
    let acked: u64 = trials.iter().map(|t| t.acked).sum();
    let commits: u64 = trials.iter().map(|t| t.commits).sum();
    println!(
        "\n{} trials, {kills} kills, {stops} stops, {terms} clean restarts; {acked} records acknowledged, {commits} transactions committed",
        trials.len()
    );
    println!(
        "counts: {}",
        Counts::NAMES
            .iter()
            .zip(totals.values())
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let line = summary_json(&opts, launcher.name(), seed, &trials, &totals);
    println!("{line}");
    if let Some(path) = &opts.json_out {
        std::fs::write(path, format!("{line}\n"))?;
    }
    Ok(totals.total() == 0)
}

/// One trial's row of the table; for a trial that found something, its details and
/// the faults it ran.
fn print_trial(index: usize, trial_seed: u64, trial: &Trial) {
    let c = trial.counts;
    let n = &trial.nemesis;
    println!(
        "{index:>5} {trial_seed:<13} {:>4} {:>4}({:>2}) {:>4} {:>7} {:>7} {:>5} {:>8} {:>6} {:>8} {:>5} {:>8} {:>6.1} {:>5} {:>3} {:>5} {:>5} {:>7} {:>8} {:>3} {:>4} {:>4} {:>4} {:>4} {:>5} {:>4} {:>5} {:>5}",
        n.kills,
        n.stops,
        n.long_stops,
        n.terms,
        trial.acked,
        trial.delivery_failed,
        trial.producer_fatal,
        trial.commits,
        trial.aborts,
        trial.job_fatal,
        trial.rebalances,
        trial.outputs,
        trial.heal_s,
        c.lost,
        c.duplicated,
        c.reordered,
        c.offset_changed,
        c.isolation_diff,
        c.txn_missing,
        c.txn_duplicated,
        c.txn_past_commit,
        c.txn_mismatch,
        c.aborted_visible,
        c.txn_partial,
        c.committed_missing,
        c.offsets_lost,
        c.unacked,
        c.stuck,
    );
    if let Some(failure) = &trial.failure {
        println!("      stuck: {failure}");
    }
    if trial.client_hangs > 0 {
        println!(
            "      client: librdkafka blocked past its timeout {} time(s) in send_offsets_to_transaction; \
             the job fenced that producer with a new one (librdkafka#5456/#5511)",
            trial.client_hangs
        );
    }
    if c.total() > 0 {
        for line in &trial.details {
            println!("      {line}");
        }
        println!("      faults:");
        for line in &n.events {
            println!("        {line}");
        }
    }
}

/// The run's machine-readable summary: its parameters, the totals and every trial.
fn summary_json(
    opts: &ChaosOpts,
    target: &str,
    seed: u64,
    trials: &[Trial],
    totals: &Counts,
) -> serde_json::Value {
    let kills: u64 = trials.iter().map(|t| t.nemesis.kills).sum();
    let stops: u64 = trials.iter().map(|t| t.nemesis.stops).sum();
    let terms: u64 = trials.iter().map(|t| t.nemesis.terms).sum();
    let acked: u64 = trials.iter().map(|t| t.acked).sum();
    let commits: u64 = trials.iter().map(|t| t.commits).sum();
    serde_json::json!({
        "bench": "logbook-bench chaos",
        "target": target,
        "seed": seed,
        "trials": trials.len(),
        "duration_s": opts.duration,
        "partitions": opts.partitions,
        "producers": opts.producers,
        "rate": opts.rate,
        "max_down": opts.max_down,
        "kills": kills,
        "stops": stops,
        "terms": terms,
        "acked": acked,
        "commits": commits,
        "counts": totals.json(),
        "each": trials.iter().map(|t| serde_json::json!({
            "seed": t.seed,
            "kills": t.nemesis.kills,
            "stops": t.nemesis.stops,
            "long_stops": t.nemesis.long_stops,
            "terms": t.nemesis.terms,
            "term_timeouts": t.nemesis.term_timeouts,
            "sent": t.sent,
            "acked": t.acked,
            "delivery_failed": t.delivery_failed,
            "producer_fatal": t.producer_fatal,
            "commits": t.commits,
            "aborts": t.aborts,
            "job_fatal": t.job_fatal,
            "client_hangs": t.client_hangs,
            "rebalances": t.rebalances,
            "outputs": t.outputs,
            "heal_s": t.heal_s,
            "counts": t.counts.json(),
            "first_error": t.first_error,
            "failure": t.failure,
            "events": t.nemesis.events,
        })).collect::<Vec<_>>(),
    })
}

/// One trial; a trial that gets stuck is reported with `stuck` 1 and its reason.
fn run_trial(
    opts: &ChaosOpts,
    launcher: &NodeLauncher,
    rt: &tokio::runtime::Runtime,
    seed: u64,
) -> Trial {
    let mut trial = Trial {
        seed,
        ..Trial::default()
    };
    if let Err(e) = trial_body(opts, launcher, rt, &mut trial) {
        trial.counts.stuck = 1;
        trial.failure = Some(e.to_string());
    }
    trial
}

fn trial_body(
    opts: &ChaosOpts,
    launcher: &NodeLauncher,
    rt: &tokio::runtime::Runtime,
    trial: &mut Trial,
) -> Res<()> {
    let mut random = XorShift::new(trial.seed);
    let cluster = start_trial_cluster(opts, launcher, rt)?;
    let bootstrap = cluster.bootstrap();
    let start = Instant::now();
    eprintln!(
        "chaos {:.3} trial seed {} started on {bootstrap}",
        wall(),
        trial.seed
    );
    let stop_load = AtomicBool::new(false);
    let stop_faults = AtomicBool::new(false);
    let producer_log = Arc::new(ProducerLog::default());
    let job_log = Arc::new(JobLog::default());
    let control = Arc::new(JobControl {
        phase: AtomicU8::new(JOB_RUN),
        drain_to: Mutex::new(BTreeMap::new()),
    });
    let job = spawn_job(&bootstrap, &control, &job_log);
    let cluster = Mutex::new(cluster);
    let mut nemesis_log = NemesisLog::default();
    let outcome: Res<u64> = std::thread::scope(|scope| {
        let producers: Vec<_> = (0..opts.producers)
            .map(|i| {
                let (bootstrap, log, stop) = (&bootstrap, &producer_log, &stop_load);
                scope.spawn(move || run_producer(i, bootstrap, opts, log, stop))
            })
            .collect();
        let faults = scope.spawn(|| -> Res<()> {
            let mut cluster = cluster.lock().map_err(|_| "cluster poisoned")?;
            let log = &mut nemesis_log;
            nemesis(&mut cluster, opts, &mut random, &stop_faults, start, log)
        });
        std::thread::sleep(Duration::from_secs_f64(opts.duration));
        stop_faults.store(true, Ordering::Relaxed);
        stop_load.store(true, Ordering::Relaxed);
        let healed = (|| -> Res<u64> {
            faults.join().map_err(|_| "the nemesis panicked")??;
            let mut sent = 0;
            for p in producers {
                sent += p.join().map_err(|_| "a producer panicked")??;
            }
            // Every node is back: wait for full ISRs, then let the job drain the input.
            let cluster = cluster.lock().map_err(|_| "cluster poisoned")?;
            drain_job(&cluster, &job, &control, &job_log, &bootstrap, opts)?;
            Ok(sent)
        })();
        stop_load.store(true, Ordering::Relaxed);
        healed
    });
    let joined = stop_job(job, &control, &job_log)?;
    trial.nemesis = nemesis_log;
    trial.heal_s = start.elapsed().as_secs_f64() - opts.duration;
    record_logs(trial, &producer_log, &job_log);
    let acked = producer_log.acked.lock().map_err(|_| "poisoned")?.clone();
    trial.acked = acked.len() as u64;
    trial.sent = outcome?;
    joined?;

    check_trial(opts, &bootstrap, &acked, &job_log, trial)
}

/// A trial's cluster: `nodes` nodes started and settled, with the input and output
/// topics created (three replicas, `min.insync.replicas` 2, no unclean election) and
/// their ISRs full.
fn start_trial_cluster(
    opts: &ChaosOpts,
    launcher: &NodeLauncher,
    rt: &tokio::runtime::Runtime,
) -> Res<LocalCluster> {
    let nodes = opts.launcher.nodes;
    let cluster = LocalCluster::start(launcher, nodes, &opts.launcher.data_root())?;
    cluster.wait_settled(nodes, None, Duration::from_secs(120))?;
    let configs = [
        ("min.insync.replicas", "2"),
        ("unclean.leader.election.enable", "false"),
    ];
    for topic in [INPUT, OUTPUT] {
        cluster.create_topic(rt, topic, opts.partitions, 3, &configs)?;
        cluster.wait_settled(nodes, Some((topic, 3)), Duration::from_secs(60))?;
    }
    Ok(cluster)
}

/// The end of a trial's faults (every node back): waits for full ISRs, then has the
/// transactional job drain the input up to its current ends; if it does not within
/// `DRAIN_TIMEOUT`, dumps the nodes' stacks and fails with what the job was doing.
fn drain_job(
    cluster: &LocalCluster,
    job: &std::thread::JoinHandle<Res<()>>,
    control: &JobControl,
    job_log: &JobLog,
    bootstrap: &str,
    opts: &ChaosOpts,
) -> Res<()> {
    let nodes = opts.launcher.nodes;
    for topic in [INPUT, OUTPUT] {
        cluster.wait_settled(nodes, Some((topic, 3)), Duration::from_secs(180))?;
    }
    let consumer = crate::kafka::assigned_consumer(bootstrap, INPUT, opts.partitions)?;
    let mut ends = BTreeMap::new();
    for partition in 0..opts.partitions {
        let (_, high) = consumer.fetch_watermarks(INPUT, partition, CALL_TIMEOUT)?;
        ends.insert(partition, high);
    }
    *control.drain_to.lock().map_err(|_| "poisoned")? = ends;
    control.phase.store(JOB_DRAIN, Ordering::SeqCst);
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    while !job.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    if !job.is_finished() {
        for path in cluster.dump_stacks() {
            eprintln!(
                "chaos {:.3} stuck: node stacks in {}",
                wall(),
                path.display()
            );
        }
        return Err(format!(
            "the transactional job did not catch up within {DRAIN_TIMEOUT:?}: it is in {}; \
             its committed offsets {:?}, input ends {:?}; the group's offsets now: {}; last job error: {}",
            job_log.step.lock().map(|c| c.clone()).unwrap_or_default(),
            job_log.committed.lock().map(|c| c.clone()).unwrap_or_default(),
            control.drain_to.lock().map(|c| c.clone()).unwrap_or_default(),
            group_offsets_report(bootstrap, opts.partitions),
            job_log.last_error.lock().map(|e| e.clone()).unwrap_or_default(),
        )
        .into());
    }
    Ok(())
}

/// Stops the transactional job and joins it, waiting up to `CALL_TIMEOUT`. The outer
/// error is a job that panicked (the trial ends there); the inner result is the job's
/// own, or where it is blocked in a librdkafka call (such a job is left behind), which
/// the trial reports only after recording its logs.
fn stop_job(
    job: std::thread::JoinHandle<Res<()>>,
    control: &JobControl,
    job_log: &JobLog,
) -> Res<Res<()>> {
    control.phase.store(JOB_STOP, Ordering::SeqCst);
    let deadline = Instant::now() + CALL_TIMEOUT;
    while !job.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(if job.is_finished() {
        job.join().map_err(|_| "the job panicked")?
    } else {
        Err(format!(
            "the transactional job is blocked in {}",
            job_log.step.lock().map(|c| c.clone()).unwrap_or_default()
        )
        .into())
    })
}

/// Copies what the producers and the job counted into the trial's record.
fn record_logs(trial: &mut Trial, producer_log: &ProducerLog, job_log: &JobLog) {
    trial.delivery_failed = producer_log.failed.load(Ordering::Relaxed);
    trial.producer_fatal = producer_log.fatal.load(Ordering::Relaxed);
    trial.commits = job_log.commits.load(Ordering::Relaxed);
    trial.aborts = job_log.aborts.load(Ordering::Relaxed);
    trial.job_fatal = job_log.fatal.load(Ordering::Relaxed);
    trial.client_hangs = job_log.client_hangs.load(Ordering::Relaxed);
    trial.rebalances = job_log.rebalances.load(Ordering::Relaxed);
    trial.first_error = producer_log
        .first_error
        .lock()
        .ok()
        .and_then(|e| e.clone())
        .or_else(|| job_log.first_error.lock().ok().and_then(|e| e.clone()));
}

/// Starts the transactional job. Not a scoped thread: a librdkafka transactional call
/// can block for good (its wait has no deadline), and a stuck trial must not hang the
/// run; such a job is left behind.
fn spawn_job(
    bootstrap: &str,
    control: &Arc<JobControl>,
    job_log: &Arc<JobLog>,
) -> std::thread::JoinHandle<Res<()>> {
    let (bootstrap, control, log) = (
        bootstrap.to_owned(),
        Arc::clone(control),
        Arc::clone(job_log),
    );
    std::thread::spawn(move || run_job(&bootstrap, &control, &log))
}

/// A trial's verdict, once the job has stopped: reads back input and output and counts
/// what went wrong (acknowledged records missing, read_committed and read_uncommitted
/// disagreeing, unacknowledged sends, group offsets behind the job's commits, output
/// not exactly the committed input).
fn check_trial(
    opts: &ChaosOpts,
    bootstrap: &str,
    acked: &[Acked],
    job_log: &JobLog,
    trial: &mut Trial,
) -> Res<()> {
    let input = read_all(bootstrap, INPUT, opts.partitions, "read_committed")?;
    let input_ru = read_all(bootstrap, INPUT, opts.partitions, "read_uncommitted")?;
    let output = read_all(bootstrap, OUTPUT, opts.partitions, "read_committed")?;
    trial.outputs = output.len() as u64;
    let mut counts = Counts::default();
    let mut details = Vec::new();
    let key = |r: &Read| (r.partition, r.offset, r.value.clone());
    let committed_read: std::collections::HashSet<_> = input.iter().map(key).collect();
    let uncommitted_read: std::collections::HashSet<_> = input_ru.iter().map(key).collect();
    counts.isolation_diff = committed_read
        .symmetric_difference(&uncommitted_read)
        .count() as u64;
    check_input(acked, &input, &mut counts, &mut details);
    if opts.max_down <= 1 && trial.sent > trial.acked {
        counts.unacked = trial.sent - trial.acked;
        detail(
            &mut details,
            format!(
                "{} of {} records sent were never acknowledged",
                counts.unacked, trial.sent
            ),
        );
    }
    let committed = check_group_offsets(bootstrap, opts, job_log, &mut counts, &mut details)?;
    let txns = job_log.txns.lock().map_err(|_| "poisoned")?.clone();
    check_output(
        &input,
        &output,
        &committed,
        &txns,
        &mut counts,
        &mut details,
    );
    trial.counts = counts;
    trial.details = details;
    Ok(())
}

/// Compares the group's committed offsets of the input with the job's own record of
/// what it committed; each offset the group lost counts. Returns the group's offsets.
fn check_group_offsets(
    bootstrap: &str,
    opts: &ChaosOpts,
    job_log: &JobLog,
    counts: &mut Counts,
    details: &mut Vec<String>,
) -> Res<BTreeMap<i32, i64>> {
    let group: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", GROUP)
        .set("isolation.level", "read_committed")
        .create()?;
    let mut list = TopicPartitionList::new();
    for partition in 0..opts.partitions {
        list.add_partition(INPUT, partition);
    }
    let mut committed = BTreeMap::new();
    for element in group.committed_offsets(list, CALL_TIMEOUT)?.elements() {
        if let Offset::Offset(o) = element.offset() {
            committed.insert(element.partition(), o);
        }
    }
    let job_committed = job_log.committed.lock().map_err(|_| "poisoned")?.clone();
    for (partition, offset) in &job_committed {
        let kept = committed.get(partition).copied().unwrap_or(0);
        if kept < *offset {
            counts.offsets_lost += u64::try_from(offset - kept)?;
            detail(
                details,
                format!(
                    "group offset of {INPUT}-{partition} is {kept}, the job committed {offset}"
                ),
            );
        }
    }
    Ok(committed)
}
