//! `logbook produce TOPIC`: writes one record per line of standard input (or `--file`),
//! as Kafka's `kafka-console-producer` does.
//!
//! Records are batched per partition (up to [`BATCH_RECORDS`] records or [`BATCH_BYTES`]
//! bytes) and each flush sends one Produce request per partition leader, as Metadata
//! names them. A leader change (`NOT_LEADER_OR_FOLLOWER`, `LEADER_NOT_AVAILABLE`) refreshes
//! the metadata and resends the same batches, a few times; any other error code stops the
//! tool (exit 1), naming the partition. Batches acknowledged before a failure stay written,
//! as with Kafka's tool.
//!
//! The topic must exist unless `--allow-auto-topic-creation` is given (as `rpk topic
//! produce` has it): Kafka's console producer may auto-create topics through Metadata, but
//! by default a typo in a topic name here is an error instead of a new topic with the
//! broker's default settings.
//!
//! This module also holds [`topic_layout`], the Metadata look-up `consume` shares.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal};
use std::path::{Path, PathBuf};
use std::time::Duration;

use logbook_common::now_ms;

use bytes::{Bytes, BytesMut};
use futures::future::join_all;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
};

use super::client::{error_name, CliError, KafkaClient, Node};
use super::output;

/// Records per partition batch before it is sent (Kafka's console producer batches by
/// size only; a count bound keeps each request small when records are tiny).
pub const BATCH_RECORDS: usize = 500;
/// Bytes of keys, values and headers per partition batch before it is sent (Kafka's
/// `batch.size` default, 16 KiB).
pub const BATCH_BYTES: usize = 16 * 1024;
/// Input files larger than this get a progress bar (when stderr is a terminal).
const PROGRESS_MIN_BYTES: u64 = 1024 * 1024;
/// How often a batch is resent after a leader change before the tool gives up.
const LEADER_RETRIES: u32 = 5;

/// Kafka's UNKNOWN_TOPIC_OR_PARTITION.
pub(super) const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// Kafka's LEADER_NOT_AVAILABLE.
pub(super) const LEADER_NOT_AVAILABLE: i16 = 5;
/// Kafka's NOT_LEADER_OR_FOLLOWER.
pub(super) const NOT_LEADER_OR_FOLLOWER: i16 = 6;

/// `logbook produce`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ProduceArgs {
    /// The topic to write to; it must exist.
    pub topic: String,
    /// Read the records from this file instead of standard input.
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// Each line is KEY SEP VALUE: the text before the first SEP is the record's key (a
    /// line without SEP is an error). Without it, records have no key.
    #[arg(long, value_name = "SEP", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub key_separator: Option<String>,
    /// A header added to every record; repeat for more.
    #[arg(short = 'H', long = "header", value_name = "KEY=VALUE", value_parser = parse_header)]
    pub headers: Vec<(String, String)>,
    /// Write every record to this partition. Without it, records with a key go to Kafka's
    /// default partition for the key (murmur2), records without one to each partition in
    /// turn, one batch at a time.
    #[arg(short = 'p', long)]
    pub partition: Option<i32>,
    /// Which replicas must have a batch before the leader acknowledges it.
    #[arg(long, value_enum, default_value_t = Acks::All)]
    pub acks: Acks,
    /// How batches are compressed.
    #[arg(long, value_enum, default_value_t = CompressionArg::None)]
    pub compression: CompressionArg,
    /// Ask the broker to create the topic if it does not exist (with its defaults; only
    /// when its `auto.create.topics.enable` is on).
    #[arg(long)]
    pub allow_auto_topic_creation: bool,
    /// Brokers and output format.
    #[command(flatten)]
    pub connection: super::Connection,
}

/// `--acks`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Acks {
    /// Every in-sync replica (Kafka's `acks=all`, `-1`).
    All,
    /// The leader alone (`acks=1`).
    #[value(name = "1")]
    Leader,
}

impl Acks {
    /// The Produce request's `acks` field.
    fn wire(self) -> i16 {
        match self {
            Acks::All => -1,
            Acks::Leader => 1,
        }
    }
}

/// `--compression`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CompressionArg {
    /// Uncompressed batches.
    None,
    /// gzip.
    Gzip,
    /// Snappy.
    Snappy,
    /// LZ4.
    Lz4,
    /// Zstandard.
    Zstd,
}

impl From<CompressionArg> for Compression {
    fn from(value: CompressionArg) -> Compression {
        match value {
            CompressionArg::None => Compression::None,
            CompressionArg::Gzip => Compression::Gzip,
            CompressionArg::Snappy => Compression::Snappy,
            CompressionArg::Lz4 => Compression::Lz4,
            CompressionArg::Zstd => Compression::Zstd,
        }
    }
}

/// `KEY=VALUE` → `(KEY, VALUE)`, split at the first `=` (a value may hold more).
fn parse_header(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err(format!("'{text}' is not KEY=VALUE")),
    }
}

/// Writes the input to the topic and prints the summary.
///
/// # Errors
/// The topic is missing, the input cannot be read or parsed, or a broker refused a batch
/// (exit 1); no broker answered (exit 3).
pub async fn run(args: ProduceArgs) -> Result<(), CliError> {
    let client = args.connection.client()?;
    let result = produce(&client, &args).await;
    client.shutdown();
    result
}

/// The whole run: metadata, then read, batch and send line by line, then the summary.
async fn produce(client: &KafkaClient, args: &ProduceArgs) -> Result<(), CliError> {
    if args.allow_auto_topic_creation {
        auto_create(client, &args.topic).await?;
    }
    let layout = topic_layout(client, &args.topic).await?;
    if let Some(partition) = args.partition {
        layout.require_partition(&args.topic, partition)?;
    }
    let input = Input::open(args.file.as_deref())?;
    let mut producer = Producer::new(client, args, layout);
    let records = read_lines(input, args, &mut producer).await?;
    producer.flush().await?;
    print_summary(args, records, &producer.offsets);
    Ok(())
}

/// Feeds every line of `input` to `producer`; returns how many records it read.
async fn read_lines(
    mut input: Input,
    args: &ProduceArgs,
    producer: &mut Producer<'_>,
) -> Result<u64, CliError> {
    let separator = args.key_separator.as_deref().map(str::as_bytes);
    let mut line = Vec::new();
    let mut number: u64 = 0;
    loop {
        line.clear();
        let read = input
            .reader
            .read_until(b'\n', &mut line)
            .map_err(|e| CliError::Failed(format!("cannot read {}: {e}", input.name)))?;
        if read == 0 {
            break;
        }
        number += 1;
        input.progress.inc(read as u64);
        let (key, value) = split_line(strip_newline(&line), separator, number)?;
        producer.add(key, value).await?;
        // Someone typing at a terminal expects each line written when it is entered.
        if input.interactive {
            producer.flush().await?;
        }
    }
    input.progress.finish_and_clear();
    Ok(number)
}

/// The line without its `\n` (or `\r\n`, as Java's `readLine` strips both).
fn strip_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// `(key, value)` of one line: split at the first `separator` when one is given.
fn split_line(
    line: &[u8],
    separator: Option<&[u8]>,
    number: u64,
) -> Result<(Option<Bytes>, Bytes), CliError> {
    let Some(separator) = separator else {
        return Ok((None, Bytes::copy_from_slice(line)));
    };
    match line.windows(separator.len()).position(|w| w == separator) {
        Some(at) => Ok((
            Some(Bytes::copy_from_slice(&line[..at])),
            Bytes::copy_from_slice(&line[at + separator.len()..]),
        )),
        None => Err(CliError::Failed(format!(
            "line {number} has no key separator '{}': '{}'",
            String::from_utf8_lossy(separator),
            String::from_utf8_lossy(line)
        ))),
    }
}

/// Where the lines come from.
struct Input {
    reader: Box<dyn BufRead>,
    /// For error messages: the file's path or "standard input".
    name: String,
    /// Standard input is a terminal: flush after every line.
    interactive: bool,
    /// Hidden unless the input is a large file and stderr a terminal.
    progress: indicatif::ProgressBar,
}

impl Input {
    /// `path`, or standard input when `None`.
    fn open(path: Option<&Path>) -> Result<Input, CliError> {
        let Some(path) = path else {
            let stdin = std::io::stdin();
            return Ok(Input {
                interactive: stdin.is_terminal(),
                reader: Box::new(BufReader::new(stdin)),
                name: "standard input".to_string(),
                progress: indicatif::ProgressBar::hidden(),
            });
        };
        let name = path.display().to_string();
        let file =
            File::open(path).map_err(|e| CliError::Failed(format!("cannot open {name}: {e}")))?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Input {
            reader: Box::new(BufReader::with_capacity(256 * 1024, file)),
            name,
            interactive: false,
            progress: progress_bar(size),
        })
    }
}

/// A byte-count progress bar on stderr for a file of `size` bytes; hidden for small files
/// and when stderr is not a terminal (a log or a pipe would fill with redraws).
fn progress_bar(size: u64) -> indicatif::ProgressBar {
    if size < PROGRESS_MIN_BYTES || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(size);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
    ) {
        bar.set_style(style);
    }
    bar
}

/// "produced N records to TOPIC" on stderr; with `--json`, the offsets on stdout.
fn print_summary(args: &ProduceArgs, records: u64, offsets: &BTreeMap<i32, (i64, i64)>) {
    eprintln!("produced {records} records to {}", args.topic);
    if args.connection.json {
        let partitions: serde_json::Map<String, serde_json::Value> = offsets
            .iter()
            .map(|(partition, (first, last))| {
                (
                    partition.to_string(),
                    serde_json::json!({ "first_offset": first, "last_offset": last }),
                )
            })
            .collect();
        output::json(&serde_json::json!({
            "topic": args.topic,
            "records": records,
            "partitions": partitions,
        }));
    }
}

/// A topic's id and each partition's leader, from Metadata.
pub(super) struct TopicLayout {
    /// The topic id (nil from brokers older than Metadata v10); Produce v13+ and Fetch
    /// v13+ name topics by id.
    pub topic_id: uuid::Uuid,
    /// Partition → leader broker id (-1: no leader right now).
    pub leaders: BTreeMap<i32, i32>,
}

impl TopicLayout {
    /// The partitions, in order.
    pub fn partitions(&self) -> Vec<i32> {
        self.leaders.keys().copied().collect()
    }

    /// An error unless `partition` is one of the topic's.
    pub fn require_partition(&self, topic: &str, partition: i32) -> Result<(), CliError> {
        if self.leaders.contains_key(&partition) {
            Ok(())
        } else {
            Err(CliError::Kafka {
                name: error_name(UNKNOWN_TOPIC_OR_PARTITION),
                message: format!(
                    "topic {topic} has no partition {partition} (it has {})",
                    self.leaders.len()
                ),
            })
        }
    }
}

/// The error for a topic that does not exist.
pub(super) fn missing_topic(topic: &str) -> CliError {
    CliError::Kafka {
        name: error_name(UNKNOWN_TOPIC_OR_PARTITION),
        message: format!("topic {topic} does not exist"),
    }
}

/// Asks for `topic` with auto-creation and waits (up to 10 s) until its partitions have
/// leaders.
async fn auto_create(client: &KafkaClient, topic: &str) -> Result<(), CliError> {
    let names = [topic.to_string()];
    for _ in 0..50 {
        let response = client.metadata_with(Some(&names), true).await?;
        let ready = response.topics.iter().any(|t| {
            t.error_code == 0
                && !t.partitions.is_empty()
                && t.partitions.iter().all(|p| p.leader_id.0 >= 0)
        });
        if ready {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(missing_topic(topic))
}

/// Metadata for `topic`, without asking for auto-creation.
///
/// # Errors
/// The topic does not exist or Metadata failed for it (exit 1); no broker answered (3).
pub(super) async fn topic_layout(
    client: &KafkaClient,
    topic: &str,
) -> Result<TopicLayout, CliError> {
    let response = client.metadata(Some(&[topic.to_string()])).await?;
    let found = response
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic));
    let Some(found) = found else {
        return Err(missing_topic(topic));
    };
    if found.error_code == UNKNOWN_TOPIC_OR_PARTITION {
        return Err(missing_topic(topic));
    }
    super::client::check(
        found.error_code,
        &format!("metadata of topic {topic}"),
        None,
    )?;
    if found.partitions.is_empty() {
        return Err(missing_topic(topic));
    }
    Ok(TopicLayout {
        topic_id: found.topic_id,
        leaders: found
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.leader_id.0))
            .collect(),
    })
}

/// A random index below `len` (0 for an empty list), from the process's hash seed.
fn random_index(len: usize) -> usize {
    use std::hash::{BuildHasher, Hasher};
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    usize::try_from(random % u64::try_from(len.max(1)).unwrap_or(1)).unwrap_or(0)
}

/// Kafka's murmur2 hash (`org.apache.kafka.common.utils.Utils.murmur2`), which its default
/// partitioner applies to keys: the same key lands on the same partition whichever client
/// wrote it.
#[must_use]
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = data.len();
    // Java hashes the length as an int; truncating matches it for any key.
    let mut h: u32 = SEED ^ (length as u32);
    let mut chunks = data.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if let Some(&first) = tail.first() {
        h ^= u32::from(first);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    i32::from_ne_bytes(h.to_ne_bytes())
}

/// Kafka's default partition for `key` among `partitions`: `toPositive(murmur2) % n`.
#[must_use]
pub fn partition_for_key(key: &[u8], partitions: usize) -> usize {
    let positive = u32::from_ne_bytes(murmur2(key).to_ne_bytes()) & 0x7fff_ffff;
    // `positive` < 2^31 fits usize on every target Rust supports here.
    (positive as usize) % partitions.max(1)
}

/// Records waiting to be sent to one partition.
#[derive(Default)]
struct Batch {
    records: Vec<Record>,
    bytes: usize,
}

impl Batch {
    fn is_full(&self) -> bool {
        self.records.len() >= BATCH_RECORDS || self.bytes >= BATCH_BYTES
    }
}

/// Batches records per partition and sends them to the leaders.
struct Producer<'a> {
    client: &'a KafkaClient,
    topic: &'a str,
    layout: TopicLayout,
    /// The topic's partitions, in order (for keyed and round-robin choices).
    partitions: Vec<i32>,
    acks: i16,
    timeout_ms: i32,
    compression: Compression,
    headers: Vec<(StrBytes, Bytes)>,
    fixed_partition: Option<i32>,
    /// Index into `partitions` of the partition keyless records go to now.
    sticky: usize,
    pending: BTreeMap<i32, Batch>,
    /// Partition → (first, last) offset written.
    offsets: BTreeMap<i32, (i64, i64)>,
}

impl<'a> Producer<'a> {
    fn new(client: &'a KafkaClient, args: &'a ProduceArgs, layout: TopicLayout) -> Producer<'a> {
        let sticky = random_index(layout.partitions().len());
        Producer {
            client,
            topic: &args.topic,
            partitions: layout.partitions(),
            layout,
            acks: args.acks.wire(),
            // The broker's wait for acks=all ends before the client's own timeout, so a slow
            // ISR is REQUEST_TIMED_OUT (exit 1), not a lost connection (exit 3).
            timeout_ms: i32::try_from(args.connection.request_timeout_ms.saturating_mul(4) / 5)
                .unwrap_or(i32::MAX),
            compression: args.compression.into(),
            headers: args
                .headers
                .iter()
                .map(|(k, v)| {
                    (
                        StrBytes::from_string(k.clone()),
                        Bytes::from(v.clone().into_bytes()),
                    )
                })
                .collect(),
            fixed_partition: args.partition,
            // A random first partition, as Kafka's partitioner starts: short runs of
            // keyless records do not all land on partition 0.
            sticky,
            pending: BTreeMap::new(),
            offsets: BTreeMap::new(),
        }
    }

    /// The partition for a record with `key`.
    fn choose(&self, key: Option<&Bytes>) -> i32 {
        if let Some(partition) = self.fixed_partition {
            return partition;
        }
        let index = match key {
            Some(key) => partition_for_key(key, self.partitions.len()),
            None => self.sticky,
        };
        self.partitions.get(index).copied().unwrap_or(0)
    }

    /// Queues one record; sends every pending batch once one is full.
    async fn add(&mut self, key: Option<Bytes>, value: Bytes) -> Result<(), CliError> {
        let partition = self.choose(key.as_ref());
        let batch = self.pending.entry(partition).or_default();
        let index = i32::try_from(batch.records.len()).unwrap_or(i32::MAX);
        batch.bytes += key.as_ref().map_or(0, Bytes::len)
            + value.len()
            + self
                .headers
                .iter()
                .map(|(k, v)| k.len() + v.len())
                .sum::<usize>()
            + 16;
        batch.records.push(Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(index),
            // The encoder keeps records in one batch while offset - sequence is constant;
            // the batch's base sequence stays NO_SEQUENCE (not idempotent).
            sequence: NO_SEQUENCE.wrapping_add(index),
            timestamp: now_ms(),
            key,
            value: Some(value),
            headers: self
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), Some(v.clone())))
                .collect(),
        });
        if batch.is_full() {
            if key_less_round_robin(self.fixed_partition, &batch.records) {
                self.sticky = (self.sticky + 1) % self.partitions.len().max(1);
            }
            self.flush().await?;
        }
        Ok(())
    }

    /// Sends every pending batch (one Produce per leader, concurrently), resending after a
    /// leader change, and records the offsets the leaders assigned.
    async fn flush(&mut self) -> Result<(), CliError> {
        let mut todo = self.encode_pending()?;
        let mut attempt = 0;
        loop {
            let retry = self.send_round(&mut todo).await?;
            if todo.is_empty() {
                return Ok(());
            }
            attempt += 1;
            if attempt > LEADER_RETRIES {
                return Err(retry.unwrap_or_else(|| {
                    CliError::Failed(format!("no leader accepted the batches for {}", self.topic))
                }));
            }
            tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
            self.layout = topic_layout(self.client, self.topic).await?;
        }
    }

    /// The pending batches encoded, as partition → (record count, bytes).
    fn encode_pending(&mut self) -> Result<BTreeMap<i32, (i64, Bytes)>, CliError> {
        let options = RecordEncodeOptions {
            version: 2,
            compression: self.compression,
        };
        let mut encoded = BTreeMap::new();
        for (partition, batch) in std::mem::take(&mut self.pending) {
            if batch.records.is_empty() {
                continue;
            }
            let mut buf = BytesMut::new();
            RecordBatchEncoder::encode(&mut buf, batch.records.iter(), &options).map_err(|e| {
                CliError::Failed(format!(
                    "cannot encode a batch for {}/{partition}: {e}",
                    self.topic
                ))
            })?;
            let count = i64::try_from(batch.records.len()).unwrap_or(i64::MAX);
            encoded.insert(partition, (count, buf.freeze()));
        }
        Ok(encoded)
    }

    /// One Produce per leader for the batches in `todo`; removes the ones acknowledged.
    /// Returns the last retriable error (the batches left in `todo` should be resent after
    /// a metadata refresh); fails on any other error.
    async fn send_round(
        &mut self,
        todo: &mut BTreeMap<i32, (i64, Bytes)>,
    ) -> Result<Option<CliError>, CliError> {
        let mut by_leader: BTreeMap<i32, Vec<PartitionProduceData>> = BTreeMap::new();
        let mut retry = None;
        for (&partition, (_, records)) in todo.iter() {
            match self.layout.leaders.get(&partition) {
                Some(&leader) if leader >= 0 => by_leader.entry(leader).or_default().push(
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(records.clone())),
                ),
                _ => retry = Some(self.partition_error(partition, LEADER_NOT_AVAILABLE, None)),
            }
        }
        let requests: Vec<(i32, ProduceRequest)> = by_leader
            .into_iter()
            .map(|(leader, partitions)| (leader, self.request(partitions)))
            .collect();
        let client = self.client;
        let sends = requests
            .iter()
            .map(|(leader, request)| client.send(Node::Id(*leader), request));
        let responses: Vec<ProduceResponse> = join_all(sends)
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
        for response in &responses {
            if let Some(error) = self.read_response(response, todo)? {
                retry = Some(error);
            }
        }
        Ok(retry)
    }

    /// A Produce request for `partitions` of the topic. It names the topic both by name
    /// (v3-12) and by id (v13+): the encoder writes the one the negotiated version has.
    fn request(&self, partitions: Vec<PartitionProduceData>) -> ProduceRequest {
        ProduceRequest::default()
            .with_acks(self.acks)
            .with_timeout_ms(self.timeout_ms)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(self.topic.to_string())))
                .with_topic_id(self.layout.topic_id)
                .with_partition_data(partitions)])
    }

    /// Records the offsets of the acknowledged partitions of `response` and removes them
    /// from `todo`; returns a retriable error if some partition had one.
    fn read_response(
        &mut self,
        response: &ProduceResponse,
        todo: &mut BTreeMap<i32, (i64, Bytes)>,
    ) -> Result<Option<CliError>, CliError> {
        let mut retry = None;
        let ours = response.responses.iter().filter(|t| {
            t.name.0.as_str() == self.topic
                || (!t.topic_id.is_nil() && t.topic_id == self.layout.topic_id)
        });
        for topic in ours {
            for p in &topic.partition_responses {
                let Some(&(count, _)) = todo.get(&p.index) else {
                    continue;
                };
                match p.error_code {
                    0 => {
                        todo.remove(&p.index);
                        let last = p.base_offset + count - 1;
                        let entry = self.offsets.entry(p.index).or_insert((p.base_offset, last));
                        entry.0 = entry.0.min(p.base_offset);
                        entry.1 = entry.1.max(last);
                    }
                    NOT_LEADER_OR_FOLLOWER | LEADER_NOT_AVAILABLE => {
                        retry = Some(self.partition_error(
                            p.index,
                            p.error_code,
                            p.error_message.as_ref(),
                        ));
                    }
                    UNKNOWN_TOPIC_OR_PARTITION => return Err(missing_topic(self.topic)),
                    code => {
                        return Err(self.partition_error(p.index, code, p.error_message.as_ref()))
                    }
                }
            }
        }
        Ok(retry)
    }

    /// The error for `code` on one partition of the topic.
    fn partition_error(&self, partition: i32, code: i16, message: Option<&StrBytes>) -> CliError {
        CliError::kafka(
            code,
            &format!("producing to {}/{partition}", self.topic),
            message.map(StrBytes::as_str),
        )
    }
}

/// Keyless records spread over the partitions one batch at a time (Kafka's sticky
/// partitioner): true when a full batch of keyless records should move the next ones on.
fn key_less_round_robin(fixed_partition: Option<i32>, records: &[Record]) -> bool {
    fixed_partition.is_none() && records.last().is_some_and(|r| r.key.is_none())
}

/// Milliseconds since the epoch, the records' CreateTime.
#[cfg(test)]
mod tests {
    use super::*;

    /// The vectors of Kafka's `UtilsTest.testMurmur2`.
    #[test]
    fn murmur2_matches_kafka() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (
                b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58_897_971,
            ),
            (b"abc", 479_470_107),
        ];
        for (key, hash) in cases {
            assert_eq!(murmur2(key), hash, "{}", String::from_utf8_lossy(key));
        }
    }

    #[test]
    fn partition_for_key_is_positive_modulo() {
        // murmur2("21") is negative: toPositive masks the sign bit before the modulo.
        let positive = (-973_932_308_i32 & 0x7fff_ffff) as usize;
        assert_eq!(partition_for_key(b"21", 7), positive % 7);
        assert_eq!(partition_for_key(b"abc", 1), 0);
    }

    #[test]
    fn lines_split_at_the_first_separator() {
        let (key, value) = split_line(b"k::v::w", Some(b"::"), 1).expect("has separator");
        assert_eq!(key.as_deref(), Some(&b"k"[..]));
        assert_eq!(&value[..], b"v::w");
        let (key, value) = split_line(b"plain", None, 1).expect("no separator needed");
        assert_eq!((key, &value[..]), (None, &b"plain"[..]));
        let error = split_line(b"novalue", Some(b":"), 7).expect_err("no separator");
        assert!(error.to_string().contains("line 7"), "{error}");
    }

    #[test]
    fn newlines_are_stripped() {
        assert_eq!(strip_newline(b"a\r\n"), b"a");
        assert_eq!(strip_newline(b"a\n"), b"a");
        assert_eq!(strip_newline(b"a"), b"a");
        assert_eq!(strip_newline(b"\n"), b"");
    }

    #[test]
    fn headers_parse() {
        assert_eq!(parse_header("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert_eq!(parse_header("a="), Ok(("a".into(), String::new())));
        assert!(parse_header("=b").is_err());
        assert!(parse_header("ab").is_err());
    }
}
