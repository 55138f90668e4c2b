//! `logbook consume TOPIC`: prints a topic's records, as tab-separated text (partition,
//! offset, timestamp, key, value; `--value-only` prints just the value, which is what
//! Kafka's `kafka-console-consumer` prints by default) or JSON lines.
//!
//! Where it starts, per partition: `--offset`, else the first record at or after
//! `--from-timestamp`, else the `--group`'s committed offset, else the earliest record
//! (`--from-beginning`) or the end of the partition (only new records; the default). An
//! explicit `--offset` or `--from-timestamp` therefore wins over a group's commits, and
//! `--from-beginning` only decides where partitions without a commit start (Kafka's
//! `auto.offset.reset`).
//!
//! It fetches from each partition's leader (one Fetch per leader and round), skips control
//! records and, under `--isolation-level read_committed`, aborted transactions; a fetch
//! returns whole batches, so records before the position are dropped. A leader change
//! refreshes the metadata; an offset out of range moves to the log start when it is before
//! it, else restarts per the start rule, as Kafka's consumer resets.
//!
//! With `--group`, what was printed is committed after every round and at the end, as a
//! standalone consumer does it (generation -1, no member id); Kafka refuses such commits
//! while the group has active members, and that refusal is reported (exit 1).
//!
//! It stops after `--count` records, after `--timeout-ms` without a new record (Kafka's
//! `--timeout-ms` is also an idle time), on Ctrl-C, or when standard output is closed;
//! all of those exit 0.
//!
//! Keys, values and header values are printed as UTF-8, with invalid sequences replaced
//! (U+FFFD): the tool is for reading text records, not for copying binary ones.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::io::{BufWriter, ErrorKind, Stdout, Write};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use futures::future::join_all;
use futures::FutureExt;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::{AbortedTransaction, PartitionData};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, GroupId, ListOffsetsRequest, ListOffsetsResponse,
    OffsetCommitRequest, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Record, RecordBatchDecoder};

use super::client::{check, CliError, KafkaClient, Node};
use super::produce::{
    topic_layout, TopicLayout, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER,
    UNKNOWN_TOPIC_OR_PARTITION,
};

/// Longest a Fetch waits at the broker for new records (Kafka's `fetch.max.wait.ms`).
const FETCH_MAX_WAIT: Duration = Duration::from_millis(500);
/// Bytes per Fetch answer (Kafka's `fetch.max.bytes`).
const FETCH_MAX_BYTES: i32 = 50 * 1024 * 1024;
/// Bytes per partition in one Fetch answer (Kafka's `max.partition.fetch.bytes`).
const PARTITION_MAX_BYTES: i32 = 1024 * 1024;
/// How often a request is retried after a leader or coordinator moved.
const RETRIES: u32 = 5;
/// ListOffsets' timestamp for the log start.
const EARLIEST: i64 = -2;
/// ListOffsets' timestamp for the log end (the last stable offset under read_committed).
const LATEST: i64 = -1;

/// Kafka's OFFSET_OUT_OF_RANGE.
const OFFSET_OUT_OF_RANGE: i16 = 1;
/// Kafka's COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR:
/// ask FindCoordinator again and retry.
const COORDINATOR_MOVED: [i16; 3] = [14, 15, 16];
/// Error codes after which a fetch is retried with fresh metadata: the leader moved, or
/// the broker does not know the topic or epoch yet (FENCED_LEADER_EPOCH,
/// UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_ID, OFFSET_NOT_AVAILABLE, NOT_LEADER, ...).
const STALE_METADATA: [i16; 7] = [
    UNKNOWN_TOPIC_OR_PARTITION,
    LEADER_NOT_AVAILABLE,
    NOT_LEADER_OR_FOLLOWER,
    74,
    76,
    78,
    100,
];
/// Highest OffsetFetch and OffsetCommit version used: v10 names topics by id only.
const BY_NAME_MAX: i16 = 9;
/// Size of a v2 record batch header, up to and including its record count.
const BATCH_HEADER_BYTES: usize = 61;

/// `logbook consume`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ConsumeArgs {
    /// The topic to read.
    pub topic: String,
    /// Read only this partition (default: every partition).
    #[arg(short = 'p', long)]
    pub partition: Option<i32>,
    /// Start at the earliest record of each partition without a group commit (default:
    /// at the end, printing only records written from now on).
    #[arg(long, conflicts_with_all = ["offset", "from_timestamp"])]
    pub from_beginning: bool,
    /// Start at this offset: in `--partition`, or in every partition.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(0..))]
    pub offset: Option<i64>,
    /// Start at the first record stamped at or after T: milliseconds since the epoch, or an
    /// RFC 3339 date-time such as 2026-12-01T10:00:00Z.
    #[arg(long, value_name = "T", value_parser = parse_timestamp, conflicts_with = "offset")]
    pub from_timestamp: Option<i64>,
    /// Consumer group: start where it committed, and commit what was printed.
    #[arg(short = 'g', long)]
    pub group: Option<String>,
    /// Stop after printing this many records.
    #[arg(short = 'n', long, visible_alias = "max-messages", value_name = "N")]
    pub count: Option<u64>,
    /// Stop when no record arrived for this many milliseconds (default: never).
    #[arg(long, value_name = "MS")]
    pub timeout_ms: Option<u64>,
    /// Print only each record's value (text output; `--json` prints every field).
    #[arg(long)]
    pub value_only: bool,
    /// Whether records of open and aborted transactions are printed.
    #[arg(long, value_enum, default_value_t = IsolationLevel::ReadUncommitted)]
    pub isolation_level: IsolationLevel,
    /// Brokers and output format.
    #[command(flatten)]
    pub connection: super::Connection,
}

/// `--isolation-level`, Kafka's `isolation.level`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum IsolationLevel {
    /// Every record, including those of open or aborted transactions.
    #[value(name = "read_uncommitted", alias = "read-uncommitted")]
    ReadUncommitted,
    /// Only committed records, up to the last stable offset.
    #[value(name = "read_committed", alias = "read-committed")]
    ReadCommitted,
}

impl IsolationLevel {
    /// The field's value in Fetch and ListOffsets.
    fn wire(self) -> i8 {
        match self {
            IsolationLevel::ReadUncommitted => 0,
            IsolationLevel::ReadCommitted => 1,
        }
    }
}

/// `--from-timestamp`: milliseconds since the epoch, or an RFC 3339 date-time.
fn parse_timestamp(text: &str) -> Result<i64, String> {
    if let Ok(ms) = text.parse::<i64>() {
        return if ms >= 0 {
            Ok(ms)
        } else {
            Err("a timestamp is not negative".to_string())
        };
    }
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|e| {
            format!(
                "'{text}' is neither milliseconds since the epoch nor an RFC 3339 date-time ({e})"
            )
        })
}

/// Prints the topic's records until a stop condition.
///
/// # Errors
/// The topic or partition is missing, or a broker refused a request (exit 1); no broker
/// answered (exit 3).
pub async fn run(args: ConsumeArgs) -> Result<(), CliError> {
    let client = args.connection.client()?;
    let result = consume(&client, &args).await;
    client.shutdown();
    result
}

/// The whole run: metadata, start positions, fetch rounds, the last commit.
async fn consume(client: &KafkaClient, args: &ConsumeArgs) -> Result<(), CliError> {
    let layout = topic_layout(client, &args.topic).await?;
    let partitions = match args.partition {
        Some(partition) => {
            layout.require_partition(&args.topic, partition)?;
            vec![partition]
        }
        None => layout.partitions(),
    };
    let mut consumer = Consumer::new(client, args, layout);
    consumer.start(&partitions).await?;
    let polled = consumer.poll_loop().await;
    // What was printed before a failure was delivered: commit it too.
    let committed = consumer.commit().await;
    eprintln!("consumed {} records from {}", consumer.printed, args.topic);
    polled.and(committed)
}

/// What one fetch round found besides records.
#[derive(Default)]
struct Round {
    /// Records printed.
    printed: u64,
    /// Some partition's leader moved: refresh the metadata.
    refresh: bool,
    /// Partitions whose position is out of range.
    out_of_range: Vec<i32>,
}

/// The records of one partition's fetched data at or after the position, and the offset
/// after the last whole batch (where the next fetch starts once all were printed).
#[derive(Debug, Default)]
struct Decoded {
    records: Vec<Record>,
    next_offset: Option<i64>,
}

/// One run's state.
struct Consumer<'a> {
    client: &'a KafkaClient,
    args: &'a ConsumeArgs,
    layout: TopicLayout,
    /// Partition → next offset to read.
    positions: BTreeMap<i32, i64>,
    /// Partition → the group's committed offset, as last read or written.
    committed: BTreeMap<i32, i64>,
    coordinator: Option<i32>,
    printer: Printer,
    printed: u64,
    /// Standard output was closed (`| head`): stop quietly.
    closed: bool,
}

impl<'a> Consumer<'a> {
    fn new(client: &'a KafkaClient, args: &'a ConsumeArgs, layout: TopicLayout) -> Consumer<'a> {
        Consumer {
            client,
            args,
            layout,
            positions: BTreeMap::new(),
            committed: BTreeMap::new(),
            coordinator: None,
            printer: Printer {
                out: BufWriter::new(std::io::stdout()),
                topic: args.topic.clone(),
                json: args.connection.json,
                value_only: args.value_only,
            },
            printed: 0,
            closed: false,
        }
    }

    /// `--count` records printed, or nowhere left to print them.
    fn done(&self) -> bool {
        self.closed || self.args.count.is_some_and(|n| self.printed >= n)
    }

    fn read_committed(&self) -> bool {
        self.args.isolation_level == IsolationLevel::ReadCommitted
    }

    /// ListOffsets' timestamp for partitions that start per the start rule.
    fn reset_timestamp(&self) -> i64 {
        if self.args.from_beginning {
            EARLIEST
        } else {
            LATEST
        }
    }

    /// Sets the start position of every partition (see the module documentation).
    async fn start(&mut self, partitions: &[i32]) -> Result<(), CliError> {
        if let Some(group) = self.args.group.as_deref() {
            self.committed = self.committed_offsets(group, partitions).await?;
        }
        let mut lookups = Vec::new();
        for &partition in partitions {
            if let Some(offset) = self.args.offset {
                self.positions.insert(partition, offset);
            } else if let Some(timestamp) = self.args.from_timestamp {
                lookups.push((partition, timestamp));
            } else if let Some(&offset) = self.committed.get(&partition) {
                self.positions.insert(partition, offset);
            } else {
                lookups.push((partition, self.reset_timestamp()));
            }
        }
        let mut past_end = Vec::new();
        for (partition, offset) in self.list_offsets(&lookups).await? {
            if offset >= 0 {
                self.positions.insert(partition, offset);
            } else {
                // No record at or after the timestamp: start at the end.
                past_end.push((partition, LATEST));
            }
        }
        let ends = self.list_offsets(&past_end).await?;
        self.positions.extend(ends);
        Ok(())
    }

    /// Fetch rounds until `--count`, `--timeout-ms`, Ctrl-C or a closed output; commits
    /// after every round.
    async fn poll_loop(&mut self) -> Result<(), CliError> {
        // Fused: a failed signal registration must not be polled again after it completed.
        let ctrl_c = tokio::signal::ctrl_c().fuse();
        tokio::pin!(ctrl_c);
        let mut last_record = Instant::now();
        let request_timeout = Duration::from_millis(self.args.connection.request_timeout_ms);
        while !self.done() {
            let mut wait = FETCH_MAX_WAIT.min(request_timeout / 2);
            if let Some(ms) = self.args.timeout_ms {
                let left = Duration::from_millis(ms).saturating_sub(last_record.elapsed());
                if left.is_zero() {
                    break;
                }
                wait = wait.min(left);
            }
            let (plan, leaderless) = self.fetch_plan();
            let responses = tokio::select! {
                responses = self.fetch(&plan, wait) => responses?,
                Ok(()) = &mut ctrl_c => break,
            };
            let round = self.read_responses(&responses)?;
            if let Err(e) = self.printer.flush() {
                if let Some(error) = self.output_error(&e) {
                    return Err(error);
                }
            }
            if round.printed > 0 {
                last_record = Instant::now();
            }
            if !round.out_of_range.is_empty() {
                self.reset(&round.out_of_range).await?;
            }
            if round.refresh || leaderless || plan.is_empty() {
                tokio::time::sleep(wait).await;
                self.layout = topic_layout(self.client, &self.args.topic).await?;
            }
            self.commit().await?;
        }
        Ok(())
    }

    /// Partitions with a leader, grouped by it, with their positions; and whether some
    /// partition has no leader right now.
    fn fetch_plan(&self) -> (BTreeMap<i32, Vec<(i32, i64)>>, bool) {
        let mut plan: BTreeMap<i32, Vec<(i32, i64)>> = BTreeMap::new();
        let mut leaderless = false;
        for (&partition, &offset) in &self.positions {
            match self.layout.leaders.get(&partition) {
                Some(&leader) if leader >= 0 => {
                    plan.entry(leader).or_default().push((partition, offset))
                }
                _ => leaderless = true,
            }
        }
        (plan, leaderless)
    }

    /// One Fetch per leader in `plan`, concurrently.
    async fn fetch(
        &self,
        plan: &BTreeMap<i32, Vec<(i32, i64)>>,
        wait: Duration,
    ) -> Result<Vec<FetchResponse>, CliError> {
        let requests: Vec<(i32, FetchRequest)> = plan
            .iter()
            .map(|(&leader, partitions)| (leader, self.fetch_request(partitions, wait)))
            .collect();
        join_all(
            requests
                .iter()
                .map(|(leader, request)| self.client.send(Node::Id(*leader), request)),
        )
        .await
        .into_iter()
        .collect()
    }

    /// A sessionless Fetch (session epoch -1, every partition every time) for `partitions`.
    /// It names the topic by name (v4-12) and by id (v13+): the encoder writes the one the
    /// negotiated version has.
    fn fetch_request(&self, partitions: &[(i32, i64)], wait: Duration) -> FetchRequest {
        FetchRequest::default()
            .with_max_wait_ms(i32::try_from(wait.as_millis()).unwrap_or(i32::MAX))
            .with_min_bytes(1)
            .with_max_bytes(FETCH_MAX_BYTES)
            .with_isolation_level(self.args.isolation_level.wire())
            .with_topics(vec![FetchTopic::default()
                .with_topic(self.topic_name())
                .with_topic_id(self.layout.topic_id)
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&(partition, offset)| {
                            FetchPartition::default()
                                .with_partition(partition)
                                .with_fetch_offset(offset)
                                .with_partition_max_bytes(PARTITION_MAX_BYTES)
                        })
                        .collect(),
                )])
    }

    fn topic_name(&self) -> TopicName {
        TopicName(StrBytes::from_string(self.args.topic.clone()))
    }

    /// Prints the records of every partition in `responses` and advances the positions.
    fn read_responses(&mut self, responses: &[FetchResponse]) -> Result<Round, CliError> {
        let mut round = Round::default();
        for response in responses {
            check(
                response.error_code,
                &format!("fetching from {}", self.args.topic),
                None,
            )?;
            for topic in &response.responses {
                let ours = topic.topic.0.as_str() == self.args.topic
                    || (!topic.topic_id.is_nil() && topic.topic_id == self.layout.topic_id);
                if !ours {
                    continue;
                }
                for partition in &topic.partitions {
                    self.read_partition(partition, &mut round)?;
                }
            }
        }
        Ok(round)
    }

    /// One partition of a Fetch answer: its records printed, or its error noted.
    fn read_partition(&mut self, data: &PartitionData, round: &mut Round) -> Result<(), CliError> {
        let partition = data.partition_index;
        let Some(&position) = self.positions.get(&partition) else {
            return Ok(());
        };
        match data.error_code {
            0 => {}
            OFFSET_OUT_OF_RANGE => {
                round.out_of_range.push(partition);
                return Ok(());
            }
            code if STALE_METADATA.contains(&code) => {
                round.refresh = true;
                return Ok(());
            }
            code => {
                return Err(CliError::kafka(
                    code,
                    &format!(
                        "fetching {}/{partition} at offset {position}",
                        self.args.topic
                    ),
                    None,
                ))
            }
        }
        let Some(records) = data.records.clone() else {
            return Ok(());
        };
        let aborted = self
            .read_committed()
            .then(|| data.aborted_transactions.as_deref().unwrap_or_default());
        let decoded = decode(records, position, aborted).map_err(|e| {
            CliError::Failed(format!(
                "cannot decode the records of {}/{partition} at offset {position}: {e}",
                self.args.topic
            ))
        })?;
        for record in &decoded.records {
            if self.done() {
                return Ok(());
            }
            if let Err(e) = self.printer.record(partition, record) {
                return self.output_error(&e).map_or(Ok(()), Err);
            }
            self.positions.insert(partition, record.offset + 1);
            self.printed += 1;
            round.printed += 1;
        }
        // Everything decoded was printed: skip what follows it in the batches too (control
        // records, aborted transactions) so the next fetch does not return them again.
        if let Some(next) = decoded.next_offset {
            let at = self.positions.entry(partition).or_insert(next);
            *at = (*at).max(next);
        }
        Ok(())
    }

    /// `None` for a closed standard output (stop quietly, as `| head` expects), else the
    /// error to fail with.
    fn output_error(&mut self, error: &std::io::Error) -> Option<CliError> {
        if error.kind() == ErrorKind::BrokenPipe {
            self.closed = true;
            None
        } else {
            Some(CliError::Failed(format!(
                "cannot write to standard output: {error}"
            )))
        }
    }

    /// Moves out-of-range positions: before the log start to the log start, else per the
    /// start rule (Kafka's `auto.offset.reset`).
    async fn reset(&mut self, partitions: &[i32]) -> Result<(), CliError> {
        let earliest = self
            .list_offsets(
                &partitions
                    .iter()
                    .map(|&p| (p, EARLIEST))
                    .collect::<Vec<_>>(),
            )
            .await?;
        let latest = self
            .list_offsets(&partitions.iter().map(|&p| (p, LATEST)).collect::<Vec<_>>())
            .await?;
        for &partition in partitions {
            let (Some(&start), Some(&end)) = (earliest.get(&partition), latest.get(&partition))
            else {
                continue;
            };
            let Some(position) = self.positions.get_mut(&partition) else {
                continue;
            };
            let to = if *position < start || self.args.from_beginning {
                start
            } else {
                end
            };
            eprintln!(
                "logbook: offset {position} of {}/{partition} is out of range; continuing at {to}",
                self.args.topic
            );
            *position = to;
        }
        Ok(())
    }

    /// ListOffsets for `(partition, timestamp)` pairs at their leaders, retried with fresh
    /// metadata after a leader change; partition → offset (-1: no record at or after the
    /// timestamp).
    async fn list_offsets(
        &mut self,
        wanted: &[(i32, i64)],
    ) -> Result<BTreeMap<i32, i64>, CliError> {
        let mut found = BTreeMap::new();
        let mut todo: BTreeMap<i32, i64> = wanted.iter().copied().collect();
        let mut attempt = 0;
        while !todo.is_empty() {
            let mut by_leader: BTreeMap<i32, Vec<ListOffsetsPartition>> = BTreeMap::new();
            let mut retry = None;
            for (&partition, &timestamp) in &todo {
                match self.layout.leaders.get(&partition) {
                    Some(&leader) if leader >= 0 => by_leader.entry(leader).or_default().push(
                        ListOffsetsPartition::default()
                            .with_partition_index(partition)
                            .with_timestamp(timestamp),
                    ),
                    _ => retry = Some(LEADER_NOT_AVAILABLE),
                }
            }
            let requests: Vec<(i32, ListOffsetsRequest)> = by_leader
                .into_iter()
                .map(|(leader, partitions)| (leader, self.list_offsets_request(partitions)))
                .collect();
            let responses = join_all(
                requests
                    .iter()
                    .map(|(leader, request)| self.client.send(Node::Id(*leader), request)),
            )
            .await;
            for response in responses {
                self.take_answered(&response?, &mut todo, &mut found, &mut retry)?;
            }
            if todo.is_empty() {
                break;
            }
            attempt += 1;
            if attempt > RETRIES {
                let code = retry.unwrap_or(LEADER_NOT_AVAILABLE);
                return Err(CliError::kafka(
                    code,
                    &format!("listing offsets of {}", self.args.topic),
                    None,
                ));
            }
            tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
            self.layout = topic_layout(self.client, &self.args.topic).await?;
        }
        Ok(found)
    }

    /// Takes the offsets one leader answered out of `todo` into `found`. An error saying
    /// the metadata is stale only leaves the partition for the next attempt (`retry` keeps
    /// the code to report if the attempts run out); any other error ends the listing.
    fn take_answered(
        &self,
        response: &ListOffsetsResponse,
        todo: &mut BTreeMap<i32, i64>,
        found: &mut BTreeMap<i32, i64>,
        retry: &mut Option<i16>,
    ) -> Result<(), CliError> {
        for topic in response
            .topics
            .iter()
            .filter(|t| t.name.0.as_str() == self.args.topic)
        {
            for p in &topic.partitions {
                match p.error_code {
                    0 => {
                        todo.remove(&p.partition_index);
                        found.insert(p.partition_index, p.offset);
                    }
                    code if STALE_METADATA.contains(&code) => *retry = Some(code),
                    code => {
                        return Err(CliError::kafka(
                            code,
                            &format!(
                                "listing offsets of {}/{}",
                                self.args.topic, p.partition_index
                            ),
                            None,
                        ))
                    }
                }
            }
        }
        Ok(())
    }

    fn list_offsets_request(&self, partitions: Vec<ListOffsetsPartition>) -> ListOffsetsRequest {
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(self.args.isolation_level.wire())
            .with_timeout_ms(
                i32::try_from(self.args.connection.request_timeout_ms).unwrap_or(i32::MAX),
            )
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(self.topic_name())
                .with_partitions(partitions)])
    }

    /// The group's coordinator, looked up once (and again after it moved).
    async fn coordinator(&mut self, group: &str) -> Result<i32, CliError> {
        if let Some(id) = self.coordinator {
            return Ok(id);
        }
        let id = self.client.group_coordinator(group).await?;
        self.coordinator = Some(id);
        Ok(id)
    }

    /// The group's committed offsets of `partitions` (those without a commit left out).
    async fn committed_offsets(
        &mut self,
        group: &str,
        partitions: &[i32],
    ) -> Result<BTreeMap<i32, i64>, CliError> {
        let mut attempt = 0;
        loop {
            let coordinator = self.coordinator(group).await?;
            let mut version = 0;
            let response = self
                .client
                .send_capped(Node::Id(coordinator), BY_NAME_MAX, |v| {
                    version = v;
                    offset_fetch_request(v, group, &self.args.topic, partitions)
                })
                .await?;
            match read_offset_fetch(&response, version, group, &self.args.topic) {
                Ok(offsets) => return Ok(offsets),
                Err(code) if COORDINATOR_MOVED.contains(&code) && attempt < RETRIES => {
                    attempt += 1;
                    self.coordinator = None;
                    tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
                }
                Err(code) => {
                    return Err(CliError::kafka(
                        code,
                        &format!(
                            "reading the offsets group {group} committed for {}",
                            self.args.topic
                        ),
                        None,
                    ))
                }
            }
        }
    }

    /// Commits every position that moved since the last commit, as a standalone consumer
    /// (generation -1, empty member id). Without `--group`, nothing.
    async fn commit(&mut self) -> Result<(), CliError> {
        let Some(group) = self.args.group.as_deref() else {
            return Ok(());
        };
        let changed: BTreeMap<i32, i64> = self
            .positions
            .iter()
            .filter(|(p, o)| self.committed.get(*p) != Some(*o))
            .map(|(&p, &o)| (p, o))
            .collect();
        if changed.is_empty() {
            return Ok(());
        }
        let mut attempt = 0;
        loop {
            let coordinator = self.coordinator(group).await?;
            let request = self.commit_request(group, &changed);
            let response = self
                .client
                .send_capped(Node::Id(coordinator), BY_NAME_MAX, |_| request)
                .await?;
            let mut moved = None;
            for p in response.topics.iter().flat_map(|t| t.partitions.iter()) {
                let Some(&offset) = changed.get(&p.partition_index) else {
                    continue;
                };
                match p.error_code {
                    0 => {
                        self.committed.insert(p.partition_index, offset);
                    }
                    code if COORDINATOR_MOVED.contains(&code) => moved = Some(code),
                    code => {
                        return Err(CliError::kafka(
                            code,
                            &format!(
                                "committing offset {offset} of {}/{} for group {group}",
                                self.args.topic, p.partition_index
                            ),
                            None,
                        ))
                    }
                }
            }
            let Some(code) = moved else {
                return Ok(());
            };
            attempt += 1;
            if attempt > RETRIES {
                return Err(CliError::kafka(
                    code,
                    &format!("committing offsets for group {group}"),
                    None,
                ));
            }
            self.coordinator = None;
            tokio::time::sleep(Duration::from_millis(100 * u64::from(attempt))).await;
        }
    }

    fn commit_request(&self, group: &str, offsets: &BTreeMap<i32, i64>) -> OffsetCommitRequest {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(StrBytes::default())
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(self.topic_name())
                .with_partitions(
                    offsets
                        .iter()
                        .map(|(&partition, &offset)| {
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(partition)
                                .with_committed_offset(offset)
                        })
                        .collect(),
                )])
    }
}

/// OffsetFetch for `partitions` of `topic` in the shape of `version`: the group at the top
/// level up to v7, in a list of groups from v8 (the encoder refuses the other shape).
fn offset_fetch_request(
    version: i16,
    group: &str,
    topic: &str,
    partitions: &[i32],
) -> OffsetFetchRequest {
    let group_id = GroupId(StrBytes::from_string(group.to_string()));
    let name = TopicName(StrBytes::from_string(topic.to_string()));
    if version >= 8 {
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(group_id)
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(name)
                .with_partition_indexes(partitions.to_vec())]))])
    } else {
        OffsetFetchRequest::default()
            .with_group_id(group_id)
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(name)
                .with_partition_indexes(partitions.to_vec())]))
    }
}

/// Partition → committed offset from an OffsetFetch answer of `version` (partitions
/// without a commit left out), or the first error code in it.
fn read_offset_fetch(
    response: &OffsetFetchResponse,
    version: i16,
    group: &str,
    topic: &str,
) -> Result<BTreeMap<i32, i64>, i16> {
    let mut offsets = BTreeMap::new();
    let mut keep = |partition: i32, offset: i64, code: i16| -> Result<(), i16> {
        if code != 0 {
            return Err(code);
        }
        if offset >= 0 {
            offsets.insert(partition, offset);
        }
        Ok(())
    };
    if version >= 8 {
        // UNKNOWN_SERVER_ERROR when the answer leaves the group out.
        let answer = response
            .groups
            .iter()
            .find(|g| g.group_id.0.as_str() == group)
            .ok_or(-1_i16)?;
        if answer.error_code != 0 {
            return Err(answer.error_code);
        }
        for t in answer.topics.iter().filter(|t| t.name.0.as_str() == topic) {
            for p in &t.partitions {
                keep(p.partition_index, p.committed_offset, p.error_code)?;
            }
        }
    } else {
        if response.error_code != 0 {
            return Err(response.error_code);
        }
        for t in response
            .topics
            .iter()
            .filter(|t| t.name.0.as_str() == topic)
        {
            for p in &t.partitions {
                keep(p.partition_index, p.committed_offset, p.error_code)?;
            }
        }
    }
    Ok(offsets)
}

/// The records of a partition's fetched `data` at or after `from`. A fetch may end inside
/// a batch (it is cut at the size limit); that batch is left for the next fetch. Control
/// batches are skipped; with `aborted` (read_committed: the answer's aborted
/// transactions), so are the batches of transactions aborted, as Kafka's consumer filters
/// them: a producer's batches are dropped from its aborted transaction's first offset
/// until its abort marker.
fn decode(
    mut data: Bytes,
    from: i64,
    aborted: Option<&[AbortedTransaction]>,
) -> Result<Decoded, String> {
    let read_committed = aborted.is_some();
    let mut pending: Vec<(i64, i64)> = aborted
        .unwrap_or_default()
        .iter()
        .map(|t| (t.first_offset, t.producer_id.0))
        .collect();
    pending.sort_unstable();
    let mut pending = VecDeque::from(pending);
    let mut aborting: HashSet<i64> = HashSet::new();
    let mut out = Decoded::default();
    while data.len() >= 12 {
        let base = (&data[0..8]).get_i64();
        let length = usize::try_from((&data[8..12]).get_i32())
            .map_err(|_| format!("the batch at offset {base} has a negative length"))?;
        if data.len() < 12 + length {
            break;
        }
        let mut batch = data.split_to(12 + length);
        if batch.len() < BATCH_HEADER_BYTES {
            return Err(format!(
                "the batch at offset {base} is shorter than a batch header"
            ));
        }
        if batch[16] != 2 {
            return Err(format!(
                "the batch at offset {base} has message format v{}; only v2 is read",
                batch[16]
            ));
        }
        let attributes = (&batch[21..23]).get_i16();
        let last = base + i64::from((&batch[23..27]).get_i32());
        let producer_id = (&batch[43..51]).get_i64();
        let transactional = attributes & 0x10 != 0;
        let control = attributes & 0x20 != 0;
        out.next_offset = Some(last + 1);
        while let Some(&(first, producer)) = pending.front() {
            if first > last {
                break;
            }
            aborting.insert(producer);
            pending.pop_front();
        }
        if control {
            if read_committed && transactional && is_abort_marker(&mut batch)? {
                aborting.remove(&producer_id);
            }
            continue;
        }
        if last < from || (read_committed && transactional && aborting.contains(&producer_id)) {
            continue;
        }
        let set = RecordBatchDecoder::decode(&mut batch).map_err(|e| e.to_string())?;
        out.records.extend(
            set.records
                .into_iter()
                .filter(|r| r.offset >= from && !r.control),
        );
    }
    Ok(out)
}

/// Whether a control batch holds an abort marker (control record key: version, then type
/// 0 = ABORT, 1 = COMMIT).
fn is_abort_marker(batch: &mut Bytes) -> Result<bool, String> {
    let set = RecordBatchDecoder::decode(batch).map_err(|e| e.to_string())?;
    Ok(set
        .records
        .first()
        .and_then(|r| r.key.as_ref())
        .is_some_and(|key| key.len() >= 4 && (&key[2..4]).get_i16() == 0))
}

/// Writes records to standard output.
struct Printer {
    out: BufWriter<Stdout>,
    topic: String,
    json: bool,
    value_only: bool,
}

impl Printer {
    /// One line for `record`: JSON, the value alone, or
    /// `PARTITION\tOFFSET\tTIMESTAMP\tKEY\tVALUE` (a missing key or value prints `null`,
    /// as Kafka's console consumer prints it).
    fn record(&mut self, partition: i32, record: &Record) -> std::io::Result<()> {
        if self.json {
            let line = json_line(&self.topic, partition, record);
            return writeln!(self.out, "{line}");
        }
        let value = text(record.value.as_ref());
        if self.value_only {
            return writeln!(self.out, "{value}");
        }
        writeln!(
            self.out,
            "{partition}\t{}\t{}\t{}\t{value}",
            record.offset,
            record.timestamp,
            text(record.key.as_ref())
        )
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Bytes as (lossy) UTF-8; `null` when absent.
fn text(bytes: Option<&Bytes>) -> String {
    bytes.map_or_else(
        || "null".to_string(),
        |b| String::from_utf8_lossy(b).into_owned(),
    )
}

/// `{"topic","partition","offset","timestamp","key","value","headers"}`; key, value and
/// header values are (lossy) UTF-8 strings or null.
fn json_line(topic: &str, partition: i32, record: &Record) -> serde_json::Value {
    let lossy = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
    let headers: serde_json::Map<String, serde_json::Value> = record
        .headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.as_ref().map(lossy).into()))
        .collect();
    serde_json::json!({
        "topic": topic,
        "partition": partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": record.key.as_ref().map(lossy),
        "value": record.value.as_ref().map(lossy),
        "headers": headers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::ProducerId;
    use kafka_protocol::records::{
        Compression, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    /// A batch of `values` at `base`, by `producer` (-1: none), transactional or not.
    fn batch(
        base: i64,
        values: &[&str],
        producer: i64,
        transactional: bool,
        control: bool,
    ) -> Bytes {
        let records: Vec<Record> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let delta = i32::try_from(i).expect("small");
                Record {
                    transactional,
                    control,
                    delete_horizon: false,
                    partition_leader_epoch: 0,
                    producer_id: producer,
                    producer_epoch: if producer < 0 { -1 } else { 0 },
                    timestamp_type: TimestampType::Creation,
                    offset: base + i64::from(delta),
                    sequence: if producer < 0 { -1 + delta } else { delta },
                    timestamp: 1000 + i64::from(delta),
                    key: if control {
                        // Version 0, type 0 (ABORT) when the value says so, else 1 (COMMIT).
                        Some(Bytes::from_static(if *v == "abort" {
                            &[0, 0, 0, 0]
                        } else {
                            &[0, 0, 0, 1]
                        }))
                    } else {
                        None
                    },
                    value: Some(Bytes::from(v.to_string())),
                    headers: Default::default(),
                }
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            records.iter(),
            &RecordEncodeOptions {
                version: 2,
                compression: Compression::None,
            },
        )
        .expect("encode");
        buf.freeze()
    }

    fn values(decoded: &Decoded) -> Vec<(i64, String)> {
        decoded
            .records
            .iter()
            .map(|r| (r.offset, text(r.value.as_ref())))
            .collect()
    }

    #[test]
    fn records_before_the_position_and_partial_batches_are_dropped() {
        let mut data = BytesMut::new();
        data.extend_from_slice(&batch(0, &["a", "b", "c"], -1, false, false));
        data.extend_from_slice(&batch(3, &["d", "e"], -1, false, false));
        let cut = batch(5, &["f"], -1, false, false);
        data.extend_from_slice(&cut[..cut.len() - 3]);
        let decoded = decode(data.freeze(), 1, None).expect("decode");
        assert_eq!(
            values(&decoded),
            vec![
                (1, "b".into()),
                (2, "c".into()),
                (3, "d".into()),
                (4, "e".into())
            ]
        );
        assert_eq!(decoded.next_offset, Some(5));
    }

    #[test]
    fn read_committed_drops_aborted_transactions_and_control_batches() {
        let mut data = BytesMut::new();
        data.extend_from_slice(&batch(0, &["t1", "t2"], 7, true, false));
        data.extend_from_slice(&batch(2, &["abort"], 7, true, true));
        data.extend_from_slice(&batch(3, &["plain"], -1, false, false));
        data.extend_from_slice(&batch(4, &["t3"], 7, true, false));
        data.extend_from_slice(&batch(5, &["commit"], 7, true, true));
        let data = data.freeze();
        let aborted = [AbortedTransaction::default()
            .with_producer_id(ProducerId(7))
            .with_first_offset(0)];
        let committed = decode(data.clone(), 0, Some(&aborted)).expect("decode");
        assert_eq!(
            values(&committed),
            vec![(3, "plain".into()), (4, "t3".into())]
        );
        assert_eq!(committed.next_offset, Some(6));
        let everything = decode(data, 0, None).expect("decode");
        assert_eq!(
            values(&everything),
            vec![
                (0, "t1".into()),
                (1, "t2".into()),
                (3, "plain".into()),
                (4, "t3".into())
            ]
        );
    }

    #[test]
    fn timestamps_parse() {
        assert_eq!(parse_timestamp("1767225600000"), Ok(1_767_225_600_000));
        assert_eq!(
            parse_timestamp("2026-01-01T00:00:03Z"),
            Ok(1_767_225_603_000)
        );
        assert_eq!(
            parse_timestamp("2026-01-01T01:00:00+01:00"),
            Ok(1_767_225_600_000)
        );
        assert!(parse_timestamp("yesterday").is_err());
        assert!(parse_timestamp("-5").is_err());
    }

    #[test]
    fn json_lines_carry_every_field() {
        let record = Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: 42,
            sequence: -1,
            timestamp: 1000,
            key: None,
            value: Some(Bytes::from_static(b"v")),
            headers: [(
                StrBytes::from_static_str("h"),
                Some(Bytes::from_static(b"x")),
            )]
            .into_iter()
            .collect(),
        };
        assert_eq!(
            json_line("t", 3, &record),
            serde_json::json!({"topic": "t", "partition": 3, "offset": 42, "timestamp": 1000,
                "key": null, "value": "v", "headers": {"h": "x"}})
        );
    }
}
