//! The rdkafka (librdkafka) clients the bench drives: topic creation, a fixed-volume
//! multi-instance producer, a counting consumer, and a paced producer with a
//! latency-measuring consumer. Either producer may be idempotent or transactional
//! (KIP-98: `init_transactions` once, then `begin_transaction` / `commit_transaction`
//! around every group of records).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::util::Timeout;

use crate::Res;

/// `key=value` librdkafka properties.
type Properties = Vec<(String, String)>;

/// `--producer-arg` / `--consumer-arg` overrides, applied last to every client.
static OVERRIDES: OnceLock<(Properties, Properties)> = OnceLock::new();

/// Sets the `key=value` overrides for producers and consumers (once, at start-up).
pub fn set_overrides(producer: &[String], consumer: &[String]) -> Res<()> {
    let parse = |args: &[String]| -> Res<Properties> {
        args.iter()
            .map(|a| {
                a.split_once('=')
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .ok_or_else(|| format!("expected key=value, got {a:?}").into())
            })
            .collect()
    };
    OVERRIDES
        .set((parse(producer)?, parse(consumer)?))
        .map_err(|_| "client overrides set twice".into())
}

fn apply(config: &mut ClientConfig, producer: bool) {
    if let Some((p, c)) = OVERRIDES.get() {
        for (k, v) in if producer { p } else { c } {
            config.set(k, v);
        }
    }
}

/// How long a consumer may see no new record before the bench calls it stuck.
const STALL: Duration = Duration::from_secs(30);
/// Marks a latency-probe payload: `[MAGIC][send time ns][sequence]…`.
const MAGIC: u32 = 0x4c42_4c54;

/// Creates one topic with `partitions` partitions (replication factor 1).
pub fn create_topic(
    rt: &tokio::runtime::Runtime,
    bootstrap: &str,
    name: &str,
    partitions: i32,
) -> Res<()> {
    create_topic_with(rt, bootstrap, name, partitions, &[])
}

/// Creates a topic with topic configs (`--produce-topic-config`).
pub fn create_topic_with(
    rt: &tokio::runtime::Runtime,
    bootstrap: &str,
    name: &str,
    partitions: i32,
    configs: &[(String, String)],
) -> Res<()> {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("socket.timeout.ms", "300000")
        .create()?;
    let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    for (key, value) in configs {
        topic = topic.set(key, value);
    }
    let options = AdminOptions::new()
        .operation_timeout(Some(Duration::from_secs(300)))
        .request_timeout(Some(Duration::from_secs(300)));
    let results = rt.block_on(admin.create_topics([&topic], &options))?;
    for result in results {
        result.map_err(|(topic, code)| format!("create topic {topic}: {code}"))?;
    }
    Ok(())
}

/// Producer delivery counters shared by the callback and the sending thread.
#[derive(Default)]
struct Deliveries {
    ok: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
}

/// Counts delivery reports.
struct CountingContext(Arc<Deliveries>);

impl ClientContext for CountingContext {
    /// librdkafka's debug lines (only logged when `--producer-arg debug=eos,…` asks) go
    /// to stderr with a wall-clock time, to see where a producer waits; the rest is
    /// dropped as before (no `log` backend).
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        if matches!(level, RDKafkaLogLevel::Debug) {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            eprintln!("{now:.6} rdkafka {fac} {log_message}");
        }
    }
}

impl ProducerContext for CountingContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, (): ()) {
        match result {
            Ok(_) => {
                self.0.ok.fetch_add(1, Ordering::Relaxed);
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

/// Producer settings.
#[derive(Clone, Debug)]
pub struct ProducerSettings {
    /// `acks`: "all" or "1".
    pub acks: &'static str,
    /// `linger.ms`.
    pub linger_ms: u32,
    /// `batch.size` (None: the client default).
    pub batch_bytes: Option<u32>,
    /// Distinct record keys (8-byte big-endian record number modulo this), so a
    /// `cleanup.policy=compact` topic has something to clean; 0 sends no keys.
    pub keys: u64,
    /// `enable.idempotence` (implied by `transactions`).
    pub idempotent: bool,
    /// Send in transactions (each producer instance its own `transactional.id`); needs
    /// `acks` "all", as librdkafka refuses anything else with idempotence.
    pub transactions: Option<Transactions>,
}

/// When a transactional producer commits its open transaction.
#[derive(Clone, Copy, Debug)]
pub enum Transactions {
    /// After this many records (per producer instance).
    EveryRecords(u64),
    /// At every multiple of this interval since the start of a paced run: the
    /// transaction holds exactly the records due in one window.
    Every(Duration),
}

impl ProducerSettings {
    /// The throughput producer: linger 5 ms, 1 MiB batches, no compression.
    pub fn tuned(acks: &'static str) -> ProducerSettings {
        ProducerSettings {
            acks,
            linger_ms: 5,
            batch_bytes: Some(1024 * 1024),
            keys: 0,
            idempotent: false,
            transactions: None,
        }
    }

    /// Client defaults (librdkafka: linger.ms 5) except `acks`.
    pub fn default_with(acks: &'static str) -> ProducerSettings {
        ProducerSettings {
            acks,
            linger_ms: 5,
            batch_bytes: None,
            keys: 0,
            idempotent: false,
            transactions: None,
        }
    }

    /// The client config; `transactional_id` is used only with `transactions`.
    fn config(&self, bootstrap: &str, transactional_id: &str) -> ClientConfig {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", bootstrap)
            .set("acks", self.acks)
            .set("linger.ms", self.linger_ms.to_string())
            .set("compression.type", "none")
            .set("queue.buffering.max.kbytes", "65536")
            .set("message.timeout.ms", "120000");
        if let Some(batch) = self.batch_bytes {
            // The client caps a batch at message.max.bytes too (default 1,000,000);
            // the broker's limit is 1 MiB + 12.
            config
                .set("batch.size", batch.to_string())
                .set("message.max.bytes", (batch + 12).to_string());
        }
        if self.idempotent || self.transactions.is_some() {
            config.set("enable.idempotence", "true");
        }
        if self.transactions.is_some() {
            // librdkafka wants message.timeout.ms <= transaction.timeout.ms (default 60 s).
            config
                .set("transactional.id", transactional_id)
                .set("message.timeout.ms", "60000");
        }
        apply(&mut config, true);
        config
    }
}

/// How long `init_transactions` and `commit_transaction` may take before the run fails.
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);

/// A producer's transactions: begun before the first record of each group, committed
/// when its `Transactions` policy says, each commit timed (see `CommitTimes`).
struct TransactionLoop<'p, C: ProducerContext + 'static> {
    producer: &'p BaseProducer<C>,
    policy: Transactions,
    open: bool,
    /// Records in the open transaction.
    records: u64,
    /// `Every`: the scheduled time at which the open transaction commits.
    window_end: Duration,
    commits: CommitTimes,
}

/// How long a producer's commits took, microseconds, each list sorted once complete.
#[derive(Clone, Debug, Default)]
pub struct CommitTimes {
    /// The whole commit: waiting for the transaction's records to be acknowledged
    /// (AddPartitionsToTxn and Produce), then EndTxn.
    pub total_micros: Vec<u64>,
    /// EndTxn alone (`commit_transaction` once every record is acknowledged).
    pub end_txn_micros: Vec<u64>,
}

impl CommitTimes {
    fn extend(&mut self, other: CommitTimes) {
        self.total_micros.extend(other.total_micros);
        self.end_txn_micros.extend(other.end_txn_micros);
    }

    fn sort(&mut self) {
        self.total_micros.sort_unstable();
        self.end_txn_micros.sort_unstable();
    }

    /// Commits per `seconds`.
    pub fn per_second(&self, seconds: f64) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "counts are small")]
        let count = self.total_micros.len() as f64;
        count / seconds
    }
}

impl<'p, C: ProducerContext + 'static> TransactionLoop<'p, C> {
    /// Registers the `transactional.id` with its coordinator (InitProducerId), or
    /// returns `None` for a producer without transactions.
    fn init(producer: &'p BaseProducer<C>, policy: Option<Transactions>) -> Res<Option<Self>> {
        let Some(policy) = policy else {
            return Ok(None);
        };
        producer.init_transactions(TRANSACTION_TIMEOUT)?;
        Ok(Some(TransactionLoop {
            producer,
            policy,
            open: false,
            records: 0,
            window_end: Duration::ZERO,
            commits: CommitTimes::default(),
        }))
    }

    /// Before sending a record due at `scheduled` (time since the run started; unused
    /// by `EveryRecords`): commits the open transaction if it is complete and begins
    /// one if none is open.
    fn before_send(&mut self, scheduled: Duration) -> Res<()> {
        if self.open {
            let complete = match self.policy {
                Transactions::EveryRecords(n) => self.records >= n,
                Transactions::Every(_) => scheduled >= self.window_end,
            };
            if complete {
                self.commit()?;
            }
        }
        if !self.open {
            self.producer.begin_transaction()?;
            self.open = true;
            self.records = 0;
            if let Transactions::Every(interval) = self.policy {
                let windows = scheduled.as_nanos() / interval.as_nanos().max(1) + 1;
                self.window_end = interval.saturating_mul(u32::try_from(windows)?);
            }
        }
        self.records += 1;
        Ok(())
    }

    /// Commits the last transaction, if one is open.
    fn finish(&mut self) -> Res<()> {
        if self.open {
            self.commit()?;
        }
        Ok(())
    }

    fn commit(&mut self) -> Res<()> {
        let started = Instant::now();
        flush_now(self.producer)?;
        let flushed = Instant::now();
        self.producer.commit_transaction(TRANSACTION_TIMEOUT)?;
        let micros =
            |since: Instant| u64::try_from(since.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.commits.total_micros.push(micros(started));
        self.commits.end_txn_micros.push(micros(flushed));
        self.open = false;
        Ok(())
    }
}

/// How often the delivery-report thread of a transactional producer re-checks whether
/// to stop (it serves each report as it arrives; this only bounds the wait at the end).
const REPORT_POLL: Duration = Duration::from_millis(100);

/// Runs `work` while, if `serve`, a helper thread serves `producer`'s delivery reports
/// as they arrive (as rdkafka's `ThreadedProducer` does), so that `flush_now` can wait
/// inside librdkafka.
fn serving_reports<C, R>(producer: &BaseProducer<C>, serve: bool, work: impl FnOnce() -> R) -> R
where
    C: ProducerContext + 'static,
    BaseProducer<C>: Sync,
{
    if !serve {
        return work();
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::Acquire) {
                producer.poll(REPORT_POLL);
            }
        });
        let result = work();
        stop.store(true, Ordering::Release);
        result
    })
}

/// Waits until every record `producer` holds is acknowledged, as a commit must first,
/// through librdkafka's own flush: it sends at once (ignoring `linger.ms` while it
/// waits) and, in the event mode rdkafka uses, waits for the delivery reports that the
/// `serving_reports` thread serves. The rdkafka crate's flush, which
/// `BaseProducer::commit_transaction` calls, would instead let the records wait out
/// `linger.ms` and serve the reports in whole 100 ms `poll` steps, putting ~100 ms on
/// every commit; after this one it returns at once. A C or Java client's commit costs
/// the same as this: a flush that sends at once, then EndTxn.
fn flush_now<C: ProducerContext + 'static>(producer: &BaseProducer<C>) -> Res<()> {
    let timeout_ms = i32::try_from(TRANSACTION_TIMEOUT.as_millis()).unwrap_or(i32::MAX);
    #[expect(unsafe_code, reason = "rdkafka exposes no flush that sends at once")]
    // SAFETY: the handle is a live producer (borrowed for the whole call) and
    // rd_kafka_flush is thread-safe; it touches no memory of ours.
    let result =
        unsafe { rdkafka::bindings::rd_kafka_flush(producer.client().native_ptr(), timeout_ms) };
    if result == RDKafkaRespErr::RD_KAFKA_RESP_ERR_NO_ERROR {
        Ok(())
    } else {
        Err(format!("flush before commit: {}", RDKafkaErrorCode::from(result)).into())
    }
}

/// Outcome of a fixed-volume produce run.
#[derive(Clone, Debug)]
pub struct ProduceRun {
    /// Records acknowledged.
    pub records: u64,
    /// Value bytes acknowledged.
    pub bytes: u64,
    /// Records that failed.
    pub errors: u64,
    /// The producer's commits (empty without transactions).
    pub commits: CommitTimes,
}

/// Sends `total_records` values of `value_bytes` bytes to `partitions` partitions of
/// `topic` from `instances` producer instances (each its own connection and thread),
/// round-robin over partitions, and waits for every delivery report. `on_start` runs
/// once all producers are connected (and transactional ones initialised), just before
/// the first record is sent. Transactional instance `k` uses `transactional.id`
/// `{topic}-{k}`.
#[expect(clippy::too_many_arguments, reason = "a flat description of one run")]
pub fn produce_fixed(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    settings: &ProducerSettings,
    instances: usize,
    total_records: u64,
    value_bytes: usize,
    on_start: &(dyn Fn() + Sync),
) -> Res<ProduceRun> {
    let deliveries = Arc::new(Deliveries::default());
    let producers = connect_producers(bootstrap, topic, settings, instances, &deliveries)?;
    let barrier = Barrier::new(instances + 1);
    let instances_u64 = instances as u64;
    let keys = settings.keys;
    let send_errors = AtomicU64::new(0);
    let commits = std::thread::scope(|scope| -> Res<CommitTimes> {
        let mut handles = Vec::with_capacity(instances);
        for (k, producer) in producers.iter().enumerate() {
            let barrier = &barrier;
            let send_errors = &send_errors;
            let k_u64 = k as u64;
            let share =
                total_records / instances_u64 + u64::from(k_u64 < total_records % instances_u64);
            handles.push(scope.spawn(move || -> Res<CommitTimes> {
                let value = value_pattern(value_bytes, k);
                let transactions = TransactionLoop::init(producer, settings.transactions);
                // Every thread reaches the barrier, also when its initialisation failed.
                barrier.wait();
                let mut transactions = transactions?;
                let serve = transactions.is_some();
                serving_reports(producer, serve, || -> Res<CommitTimes> {
                    let plan = SendPlan {
                        topic,
                        partitions,
                        instances: instances_u64,
                        keys,
                    };
                    send_share(
                        producer,
                        &plan,
                        k_u64,
                        share,
                        &value,
                        &mut transactions,
                        send_errors,
                    )?;
                    let commits = match &mut transactions {
                        Some(t) => {
                            t.finish()?;
                            std::mem::take(&mut t.commits)
                        }
                        None => CommitTimes::default(),
                    };
                    producer.flush(Duration::from_secs(300))?;
                    Ok(commits)
                })
            }));
        }
        on_start();
        barrier.wait();
        let mut commits = CommitTimes::default();
        for handle in handles {
            commits.extend(handle.join().map_err(|_| "producer thread panicked")??);
        }
        commits.sort();
        Ok(commits)
    })?;
    Ok(deliveries.outcome(&send_errors, value_bytes, commits))
}

impl Deliveries {
    /// A finished run's outcome: the records acknowledged, and as errors those that
    /// failed in delivery or could not be sent (the first error is printed).
    fn outcome(
        &self,
        send_errors: &AtomicU64,
        value_bytes: usize,
        commits: CommitTimes,
    ) -> ProduceRun {
        let records = self.ok.load(Ordering::Relaxed);
        let errors = self.failed.load(Ordering::Relaxed) + send_errors.load(Ordering::Relaxed);
        if errors > 0 {
            let first = self.first_error.lock().ok().and_then(|e| e.clone());
            eprintln!("  {errors} records failed; first error: {first:?}");
        }
        ProduceRun {
            records,
            bytes: records * value_bytes as u64,
            errors,
            commits,
        }
    }
}

/// Connects `instances` producers, each with its own `transactional.id` `{topic}-{k}`
/// (when the settings use transactions), and has each learn the partition leaders, so
/// that the clock starts with every producer ready.
fn connect_producers(
    bootstrap: &str,
    topic: &str,
    settings: &ProducerSettings,
    instances: usize,
    deliveries: &Arc<Deliveries>,
) -> Res<Vec<BaseProducer<CountingContext>>> {
    let mut producers = Vec::with_capacity(instances);
    for k in 0..instances {
        let producer: BaseProducer<CountingContext> = settings
            .config(bootstrap, &format!("{topic}-{k}"))
            .create_with_context(CountingContext(Arc::clone(deliveries)))?;
        // Connects and learns the partition leaders before the clock starts.
        producer
            .client()
            .fetch_metadata(Some(topic), Duration::from_secs(30))?;
        producers.push(producer);
    }
    Ok(producers)
}

/// Producer `k`'s value: `value_bytes` bytes of a pattern of its own.
fn value_pattern(value_bytes: usize, k: usize) -> Vec<u8> {
    let mut value = vec![0_u8; value_bytes];
    for (i, byte) in value.iter_mut().enumerate() {
        #[expect(clippy::cast_possible_truncation, reason = "a byte pattern")]
        let b = (i * 31 + k) as u8;
        *byte = b;
    }
    value
}

/// What every producer of a fixed-volume run sends to.
struct SendPlan<'a> {
    topic: &'a str,
    partitions: i32,
    /// How many producers share the records (record `i` of producer `k` is the run's
    /// `i * instances + k`).
    instances: u64,
    /// Distinct keys (the record number modulo this); 0 sends no keys.
    keys: u64,
}

/// Producer `k`'s `share` of the records: round-robin over the partitions, keyed when
/// the run has keys, each sent as soon as the local queue takes it (reports are served
/// while it is full); a record the client refuses otherwise counts in `send_errors`.
fn send_share(
    producer: &BaseProducer<CountingContext>,
    plan: &SendPlan<'_>,
    k: u64,
    share: u64,
    value: &[u8],
    transactions: &mut Option<TransactionLoop<'_, CountingContext>>,
    send_errors: &AtomicU64,
) -> Res<()> {
    let parts = u64::try_from(plan.partitions)?;
    for i in 0..share {
        if let Some(t) = transactions {
            t.before_send(Duration::ZERO)?;
        }
        let partition = i32::try_from((i + k) % parts)?;
        let key = (i * plan.instances + k)
            .checked_rem(plan.keys)
            .map(u64::to_be_bytes);
        let mut record = BaseRecord::<[u8], [u8], ()>::to(plan.topic)
            .payload(value)
            .partition(partition);
        if let Some(key) = &key {
            record = record.key(&key[..]);
        }
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(1));
                }
                Err((_, _)) => {
                    send_errors.fetch_add(1, Ordering::Relaxed);
                    break;
                }
            }
        }
        if i % 1024 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    Ok(())
}

/// A consumer's `isolation.level`: whether Fetch stops at the last stable offset and
/// the client drops aborted transactions' records.
#[derive(Clone, Copy, Debug)]
pub enum Isolation {
    /// Up to the last stable offset, aborted records dropped.
    ReadCommitted,
    /// Up to the high watermark, everything.
    ReadUncommitted,
}

impl Isolation {
    /// The librdkafka value, as Kafka names it.
    pub fn name(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read_committed",
            Isolation::ReadUncommitted => "read_uncommitted",
        }
    }
}

/// A consumer assigned every partition of `topic` from the beginning (librdkafka wants
/// a `group.id` even for manual assignment; nothing joins or commits), with
/// librdkafka's default `isolation.level` (read_committed).
pub fn assigned_consumer(bootstrap: &str, topic: &str, partitions: i32) -> Res<BaseConsumer> {
    assigned_consumer_with(bootstrap, topic, partitions, None)
}

/// `assigned_consumer` with an explicit `isolation.level` (None: librdkafka's default).
pub fn assigned_consumer_with(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    isolation: Option<Isolation>,
) -> Res<BaseConsumer> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "logbook-bench")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "false")
        .set("max.partition.fetch.bytes", (4 * 1024 * 1024).to_string());
    if let Some(isolation) = isolation {
        config.set("isolation.level", isolation.name());
    }
    apply(&mut config, false);
    let consumer: BaseConsumer = config.create()?;
    let mut list = TopicPartitionList::with_capacity(usize::try_from(partitions)?);
    for partition in 0..partitions {
        list.add_partition_offset(topic, partition, Offset::Beginning)?;
    }
    consumer.assign(&list)?;
    Ok(consumer)
}

/// Outcome of reading a topic back.
#[derive(Clone, Copy, Debug)]
pub struct ConsumeRun {
    /// Records received.
    pub records: u64,
    /// Value bytes received.
    pub bytes: u64,
    /// When the first record arrived.
    pub first: Instant,
    /// When the last record arrived.
    pub last: Instant,
}

/// Polls `consumer` until `expected` records arrived (or nothing arrives for `STALL`).
pub fn consume_count(consumer: &BaseConsumer, expected: u64) -> Res<ConsumeRun> {
    let mut records = 0_u64;
    let mut bytes = 0_u64;
    let mut last_progress = Instant::now();
    let mut first = None;
    while records < expected {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                records += 1;
                bytes += message.payload_len() as u64;
                last_progress = Instant::now();
                first.get_or_insert(last_progress);
            }
            Some(Err(error)) => eprintln!("  consumer error: {error}"),
            None => {
                if last_progress.elapsed() > STALL {
                    return Err(
                        format!("consumer stalled at {records} of {expected} records").into(),
                    );
                }
            }
        }
    }
    Ok(ConsumeRun {
        records,
        bytes,
        first: first.unwrap_or(last_progress),
        last: last_progress,
    })
}

/// End-to-end latencies of one paced run.
#[derive(Clone, Debug)]
pub struct LatencyRun {
    /// Measured latencies (after the warm-up), microseconds, sorted.
    pub micros: Vec<u64>,
    /// Records sent but never received (or failed).
    pub lost: u64,
    /// The producer's commits (empty without transactions).
    pub commits: CommitTimes,
}

impl LatencyRun {
    /// The `q`-quantile (0..=1) in milliseconds (nearest rank).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        quantile_ms(&self.micros, q)
    }
}

/// The `q`-quantile (0..=1) of sorted microseconds, in milliseconds (nearest rank).
pub fn quantile_ms(sorted_micros: &[u64], q: f64) -> f64 {
    if sorted_micros.is_empty() {
        return f64::NAN;
    }
    #[expect(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "ranks are small and non-negative"
    )]
    let rank = ((q * sorted_micros.len() as f64).ceil() as usize).clamp(1, sorted_micros.len());
    #[expect(
        clippy::cast_precision_loss,
        reason = "latencies in microseconds are small"
    )]
    let ms = sorted_micros.get(rank - 1).copied().unwrap_or(0) as f64 / 1000.0;
    ms
}

/// Sends `rate` records/s of `value_bytes` each for `seconds` (round-robin over
/// `partitions`) from one producer, while one consumer assigned to every partition
/// (with `isolation`, None: librdkafka's default) measures each record's age on
/// arrival. The payload carries the time the record was due (same clock), not the time
/// `send` ran, so a record held back while a transaction commits counts its wait.
/// Records due during the first `warmup` seconds are not counted. A transactional
/// producer uses `transactional.id` `{topic}-latency`.
#[expect(clippy::too_many_arguments, reason = "a flat description of one run")]
pub fn latency_run(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    settings: &ProducerSettings,
    isolation: Option<Isolation>,
    rate: u32,
    seconds: f64,
    warmup: f64,
    value_bytes: usize,
) -> Res<LatencyRun> {
    let epoch = Instant::now();
    let deliveries = Arc::new(Deliveries::default());
    let producer: BaseProducer<CountingContext> = settings
        .config(bootstrap, &format!("{topic}-latency"))
        .create_with_context(CountingContext(Arc::clone(&deliveries)))?;
    producer
        .client()
        .fetch_metadata(Some(topic), Duration::from_secs(30))?;
    let mut transactions = TransactionLoop::init(&producer, settings.transactions)?;
    let consumer = assigned_consumer_with(bootstrap, topic, partitions, isolation)?;
    // Let the consumer connect and start fetching before the first probe.
    let settle = Instant::now();
    while settle.elapsed() < Duration::from_millis(500) {
        let _ = consumer.poll(Duration::from_millis(50));
    }
    let (total, warm_records) = (records_at(rate, seconds), records_at(rate, warmup));
    let done = AtomicBool::new(false);
    let value_len = value_bytes.max(16);
    let (micros, received) = std::thread::scope(|scope| -> Res<(Vec<u64>, u64)> {
        let consumer_thread =
            scope.spawn(|| receive_probes(&consumer, epoch, total, warm_records, &done));
        // The consumer stops only once `done` is set, so it is set also when sending fails.
        let serve = transactions.is_some();
        let sent = serving_reports(&producer, serve, || {
            send_paced(
                &producer,
                transactions.as_mut(),
                topic,
                partitions,
                rate,
                total,
                value_len,
                epoch,
            )
        });
        let flushed = sent.and_then(|send_failures| {
            deliveries
                .failed
                .fetch_add(send_failures, Ordering::Relaxed);
            Ok(producer.flush(Duration::from_secs(60))?)
        });
        done.store(true, Ordering::Release);
        let (micros, received) = consumer_thread
            .join()
            .map_err(|_| "consumer thread panicked")?;
        flushed?;
        Ok((micros, received))
    })?;
    let mut micros = micros;
    micros.sort_unstable();
    let failed = deliveries.failed.load(Ordering::Relaxed);
    let mut commits = transactions.map(|t| t.commits).unwrap_or_default();
    commits.sort();
    Ok(LatencyRun {
        micros,
        lost: total.saturating_sub(received).max(failed),
        commits,
    })
}

/// How many records `seconds` at `rate` per second are.
fn records_at(rate: u32, seconds: f64) -> u64 {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "positive and small"
    )]
    let records = (f64::from(rate) * seconds) as u64;
    records
}

/// The consumer half of `latency_run`: reads probes until `total` arrived, or until
/// nothing came for 10 s after the producer is `done`; each probe from the
/// `warm_records`-th on gives its age (receipt time minus the time it was due, in µs).
/// Returns the ages and how many probes arrived.
fn receive_probes(
    consumer: &BaseConsumer,
    epoch: Instant,
    total: u64,
    warm_records: u64,
    done: &AtomicBool,
) -> (Vec<u64>, u64) {
    let mut micros = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    let mut received = 0_u64;
    let mut idle_since: Option<Instant> = None;
    loop {
        match consumer.poll(Duration::from_millis(20)) {
            Some(Ok(message)) => {
                let now = epoch.elapsed();
                let Some((sent, seq)) = message.payload().and_then(decode_probe) else {
                    continue;
                };
                received += 1;
                if seq >= warm_records {
                    let age = now.saturating_sub(Duration::from_nanos(sent));
                    micros.push(u64::try_from(age.as_micros()).unwrap_or(u64::MAX));
                }
                idle_since = None;
                if received >= total {
                    break;
                }
            }
            Some(Err(error)) => eprintln!("  consumer error: {error}"),
            None => {
                if done.load(Ordering::Acquire) {
                    let idle = idle_since.get_or_insert_with(Instant::now);
                    if idle.elapsed() > Duration::from_secs(10) {
                        break;
                    }
                }
            }
        }
    }
    (micros, received)
}

/// The producer half of `latency_run`: `total` records at `rate` per second, each
/// stamped with the time it was due (nanoseconds since `epoch`) and its sequence number,
/// in transactions when `transactions` is given (the last one committed before return).
/// Returns how many records `send` refused.
#[expect(clippy::too_many_arguments, reason = "a flat description of one run")]
fn send_paced<C: ProducerContext<DeliveryOpaque = ()> + 'static>(
    producer: &BaseProducer<C>,
    mut transactions: Option<&mut TransactionLoop<'_, C>>,
    topic: &str,
    partitions: i32,
    rate: u32,
    total: u64,
    value_len: usize,
    epoch: Instant,
) -> Res<u64> {
    let mut value = vec![0_u8; value_len];
    let start = Instant::now();
    let start_ns = u64::try_from(start.duration_since(epoch).as_nanos())?;
    let interval = Duration::from_secs_f64(1.0 / f64::from(rate));
    let parts = u64::try_from(partitions)?;
    let mut next = 0_u64;
    let mut refused = 0_u64;
    while next < total {
        let due = interval.saturating_mul(u32::try_from(next)?);
        let elapsed = start.elapsed();
        if elapsed < due {
            std::thread::sleep(due.saturating_sub(elapsed).min(Duration::from_millis(1)));
            producer.poll(Duration::ZERO);
            continue;
        }
        if let Some(t) = transactions.as_deref_mut() {
            t.before_send(due)?;
        }
        let sent = start_ns + u64::try_from(due.as_nanos())?;
        encode_probe(&mut value, sent, next);
        let partition = i32::try_from(next % parts)?;
        let record = BaseRecord::<(), [u8], ()>::to(topic)
            .payload(&value[..])
            .partition(partition);
        if producer.send(record).is_err() {
            refused += 1;
        }
        next += 1;
    }
    if let Some(t) = transactions {
        t.finish()?;
    }
    Ok(refused)
}

fn encode_probe(value: &mut [u8], sent_ns: u64, seq: u64) {
    if let Some(head) = value.get_mut(0..20) {
        head[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        head[4..12].copy_from_slice(&sent_ns.to_le_bytes());
        head[12..20].copy_from_slice(&seq.to_le_bytes());
    }
}

fn decode_probe(payload: &[u8]) -> Option<(u64, u64)> {
    let magic = u32::from_be_bytes(payload.get(0..4)?.try_into().ok()?);
    if magic != MAGIC {
        return None;
    }
    let sent = u64::from_le_bytes(payload.get(4..12)?.try_into().ok()?);
    let seq = u64::from_le_bytes(payload.get(12..20)?.try_into().ok()?);
    Some((sent, seq))
}

/// Sum of the high watermarks of `partitions` partitions of `topic` (after a restart:
/// how many records survived).
pub fn high_watermark_sum(bootstrap: &str, topic: &str, partitions: i32) -> Res<u64> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()?;
    let mut sum = 0_u64;
    for partition in 0..partitions {
        let (_, high) =
            consumer.fetch_watermarks(topic, partition, Timeout::After(Duration::from_secs(30)))?;
        sum += u64::try_from(high)?;
    }
    Ok(sum)
}
