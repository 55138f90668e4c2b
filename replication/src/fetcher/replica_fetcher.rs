//! `ReplicaFetcher`: the partitions one follower broker copies from one leader broker, and
//! the rounds that copy them (Kafka's `AbstractFetcherThread.doWork`: truncate, then
//! fetch). `ReplicaFetcherHandle` runs it as one tokio task fed by a bounded command
//! channel (add, remove, describe) and stopped by a `CancellationToken`.
//!
//! Per partition the state is Kafka's `PartitionFetchState`: the fetch offset (always the
//! local log end), the current leader epoch, the epoch of the last batch fetched,
//! Truncating or Fetching, and a back-off deadline after a retriable error. Partitions
//! that cannot go on (fenced with the current epoch, storage or fsync failure, data that
//! does not continue the log) move to a failed set, logged once, until they are added
//! again (a new leader epoch from metadata).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use logbook_storage::record_batch::iter_headers;
use logbook_storage::{LeaderEpoch, Offset};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::follower_log::FollowerLog;
use super::leader_end_point::{
    EndPointError, EpochEndOffset, EpochRequest, FetchPartition, FetchRequest, FetchedPartition,
    LeaderEndPoint, LeaderError,
};
use super::truncation::offset_truncation_state;
use crate::{Error, TopicPartition};

/// Settings of one fetcher, Kafka's `replica.fetch.*` configs where one exists.
#[derive(Clone, Debug)]
pub struct FetcherConfig {
    /// `replica.fetch.wait.max.ms`: how long the leader may hold a Fetch. Default 500.
    pub max_wait_ms: i32,
    /// `replica.fetch.min.bytes`. Default 1.
    pub min_bytes: i32,
    /// `replica.fetch.response.max.bytes`. Default 10 MiB.
    pub max_bytes: i32,
    /// `replica.fetch.max.bytes`: per partition. Default 1 MiB.
    pub partition_max_bytes: i32,
    /// `replica.fetch.backoff.ms`: pause of a partition after a retriable error. Default 1 s.
    pub backoff: Duration,
    /// Send the next Fetch only once the last one's appends are fsync'd: true under
    /// `FlushPolicy::EveryWrite` (the default), false under `Os`.
    pub wait_for_durable: bool,
    /// Most partitions one fetcher follows (each costs a little per Fetch). Default 10 000.
    pub partitions_max: usize,
    /// Capacity of the command channel. Default 64.
    pub commands_capacity: usize,
}

impl Default for FetcherConfig {
    fn default() -> Self {
        Self {
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 10 << 20,
            partition_max_bytes: 1 << 20,
            backoff: Duration::from_secs(1),
            wait_for_durable: true,
            partitions_max: 10_000,
            commands_capacity: 64,
        }
    }
}

/// A partition to follow (Kafka's `InitialFetchState`): the fetch offset and last fetched
/// epoch are taken from the log itself.
pub struct InitialFetchState<L> {
    /// The local replica.
    pub log: Arc<L>,
    /// Its topic's id.
    pub topic_id: Uuid,
    /// The leader epoch metadata names for the leader fetched from.
    pub current_leader_epoch: LeaderEpoch,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReplicaState {
    /// Must learn where its log diverges before fetching (OffsetsForLeaderEpoch, or the
    /// high watermark for a log without epochs).
    Truncating,
    /// Fetching from `fetch_offset`.
    Fetching,
}

struct PartitionFetchState<L> {
    log: Arc<L>,
    topic_id: Uuid,
    fetch_offset: Offset,
    current_leader_epoch: LeaderEpoch,
    last_fetched_epoch: Option<LeaderEpoch>,
    state: ReplicaState,
    delayed_until: Option<Instant>,
}

impl<L> PartitionFetchState<L> {
    fn is_delayed(&self, now: Instant) -> bool {
        self.delayed_until.is_some_and(|until| until > now)
    }
}

/// A partition's fetch state as seen from outside (tests, metrics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchStateView {
    /// The next offset to fetch (the local log end).
    pub fetch_offset: Offset,
    /// The leader epoch the partition is fetched in.
    pub current_leader_epoch: LeaderEpoch,
    /// The epoch of the local log's last batch.
    pub last_fetched_epoch: Option<LeaderEpoch>,
    /// Waiting to learn where its log diverges.
    pub truncating: bool,
    /// Backing off after a retriable error.
    pub delayed: bool,
}

/// Why a partition stopped being fetched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailureReason {
    /// The leader has a newer epoch than ours: wait for metadata to re-add the partition.
    Fenced {
        /// The epoch we fetched in.
        current_leader_epoch: LeaderEpoch,
    },
    /// The local log failed or refused a truncation or append.
    Storage(String),
    /// An fsync of fetched data failed: it may be lost, so nothing after it may be
    /// reported to the leader as replicated.
    FsyncFailed(String),
}

/// Refusals of [`ReplicaFetcher::add_partitions`] and the handle's commands.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FetcherError {
    /// The fetcher already follows `partitions_max` partitions.
    #[error("the fetcher already follows {max} partitions")]
    TooManyPartitions {
        /// The limit.
        max: usize,
    },
    /// The fetcher task has stopped.
    #[error("the fetcher has stopped")]
    Stopped,
}

/// The partitions followed on one leader broker and their fetch rounds. See the module
/// docs.
pub struct ReplicaFetcher<E, L> {
    endpoint: E,
    config: FetcherConfig,
    partitions: BTreeMap<TopicPartition, PartitionFetchState<L>>,
    failed: BTreeMap<TopicPartition, FailureReason>,
    /// Rounds fetched so far: each Fetch starts its partition list one further, so when
    /// the response's byte budget runs out it is not always the same partitions that
    /// wait (Kafka moves served partitions to the end of its list for the same reason).
    rotation: usize,
}

impl<E: LeaderEndPoint, L: FollowerLog> ReplicaFetcher<E, L> {
    /// A fetcher with no partitions.
    pub fn new(endpoint: E, config: FetcherConfig) -> Self {
        Self {
            endpoint,
            config,
            partitions: BTreeMap::new(),
            failed: BTreeMap::new(),
            rotation: 0,
        }
    }

    /// The end point (tests inspect their fake leader through it).
    pub fn endpoint_mut(&mut self) -> &mut E {
        &mut self.endpoint
    }

    /// Starts following partitions, or moves followed ones to a new leader epoch (Kafka's
    /// `addPartitions`): a partition already followed in the same epoch keeps its state.
    /// A new one starts Fetching from its log end with its latest epoch as the last
    /// fetched, so the leader's diverging-epoch check decides any truncation; a log with
    /// no epoch at all starts Truncating (to its high watermark). Clears a failure.
    ///
    /// # Errors
    /// `TooManyPartitions` (nothing added) when the new ones would exceed
    /// `partitions_max`.
    pub fn add_partitions(
        &mut self,
        states: Vec<InitialFetchState<L>>,
    ) -> Result<(), FetcherError> {
        let new = states
            .iter()
            .filter(|s| !self.partitions.contains_key(s.log.topic_partition()))
            .count();
        if self.partitions.len() + new > self.config.partitions_max {
            return Err(FetcherError::TooManyPartitions {
                max: self.config.partitions_max,
            });
        }
        for initial in states {
            let tp = initial.log.topic_partition().clone();
            self.failed.remove(&tp);
            if self
                .partitions
                .get(&tp)
                .is_some_and(|s| s.current_leader_epoch == initial.current_leader_epoch)
            {
                continue;
            }
            let start = initial
                .log
                .log_end_offset()
                .and_then(|end| Ok((end, initial.log.latest_epoch()?)));
            let (fetch_offset, latest) = match start {
                Ok(start) => start,
                Err(e) => {
                    self.partitions.remove(&tp);
                    self.fail(&tp, FailureReason::Storage(e.to_string()));
                    continue;
                }
            };
            let state = if latest.is_some() {
                ReplicaState::Fetching
            } else {
                ReplicaState::Truncating
            };
            self.partitions.insert(
                tp,
                PartitionFetchState {
                    log: initial.log,
                    topic_id: initial.topic_id,
                    fetch_offset,
                    current_leader_epoch: initial.current_leader_epoch,
                    last_fetched_epoch: latest,
                    state,
                    delayed_until: None,
                },
            );
        }
        Ok(())
    }

    /// Stops following `partitions` (they became leader, moved to another leader's
    /// fetcher, or were deleted).
    pub fn remove_partitions(&mut self, partitions: &[TopicPartition]) {
        for tp in partitions {
            self.partitions.remove(tp);
            self.failed.remove(tp);
        }
    }

    /// The state of every partition followed.
    #[must_use]
    pub fn fetch_states(&self) -> Vec<(TopicPartition, FetchStateView)> {
        let now = Instant::now();
        self.partitions
            .iter()
            .map(|(tp, s)| {
                let view = FetchStateView {
                    fetch_offset: s.fetch_offset,
                    current_leader_epoch: s.current_leader_epoch,
                    last_fetched_epoch: s.last_fetched_epoch,
                    truncating: s.state == ReplicaState::Truncating,
                    delayed: s.is_delayed(now),
                };
                (tp.clone(), view)
            })
            .collect()
    }

    /// The state of one partition, if followed.
    #[must_use]
    pub fn fetch_state(&self, tp: &TopicPartition) -> Option<FetchStateView> {
        self.fetch_states()
            .into_iter()
            .find_map(|(t, view)| (&t == tp).then_some(view))
    }

    /// Partitions that stopped, and why.
    #[must_use]
    pub fn failed_partitions(&self) -> &BTreeMap<TopicPartition, FailureReason> {
        &self.failed
    }

    /// Whether some partition can be worked on now.
    #[must_use]
    pub fn has_ready_partitions(&self, now: Instant) -> bool {
        self.partitions.values().any(|s| !s.is_delayed(now))
    }

    /// The earliest end of a back-off, if every partition is backing off.
    #[must_use]
    pub fn next_ready_at(&self) -> Option<Instant> {
        self.partitions
            .values()
            .filter_map(|s| s.delayed_until)
            .min()
    }

    /// One round (Kafka's `doWork`): truncate the partitions that must, then fetch for
    /// the others, append, and (under `wait_for_durable`) wait for the appends to be
    /// durable before returning, so the next round's fetch offsets are durable.
    pub async fn do_work(&mut self) {
        self.maybe_truncate().await;
        self.maybe_fetch().await;
    }

    /// The local log refused an operation: a partition that is no longer a follower (its
    /// role changed while this round ran; metadata removes or re-adds it next) backs off and
    /// is tried again, as Kafka's fetcher drops a response for a partition whose state
    /// changed; any other error fails the partition.
    fn local_failure(&mut self, tp: &TopicPartition, e: &Error) {
        if let Error::NotLeaderOrFollower(_) = e {
            tracing::debug!(partition = %tp, "no longer a follower; backing off");
            self.delay(tp);
        } else {
            self.fail(tp, FailureReason::Storage(e.to_string()));
        }
    }

    fn fail(&mut self, tp: &TopicPartition, reason: FailureReason) {
        match &reason {
            FailureReason::Fenced {
                current_leader_epoch,
            } => {
                tracing::info!(partition = %tp, %current_leader_epoch, "leader has a newer epoch; stop fetching until metadata moves the partition");
            }
            FailureReason::Storage(e) => {
                tracing::error!(partition = %tp, error = %e, "local log failed; stop fetching the partition");
            }
            FailureReason::FsyncFailed(e) => {
                tracing::error!(partition = %tp, error = %e, "fsync of fetched data failed; stop fetching the partition");
            }
        }
        self.partitions.remove(tp);
        self.failed.insert(tp.clone(), reason);
    }

    fn delay(&mut self, tp: &TopicPartition) {
        let until = Instant::now() + self.config.backoff;
        if let Some(state) = self.partitions.get_mut(tp) {
            if !state.is_delayed(Instant::now()) {
                state.delayed_until = Some(until);
            }
        }
    }

    /// Kafka's `onPartitionFenced`: fenced in the epoch we still fetch in means we are
    /// behind the controller; stop until metadata re-adds it. An answer to an older epoch
    /// (we moved on meanwhile) is retried.
    fn on_fenced(&mut self, tp: &TopicPartition, requested: LeaderEpoch) {
        match self.partitions.get(tp) {
            Some(state) if state.current_leader_epoch == requested => {
                self.fail(
                    tp,
                    FailureReason::Fenced {
                        current_leader_epoch: requested,
                    },
                );
            }
            Some(_) => self.delay(tp),
            None => {}
        }
    }

    /// Resets a partition's fetch position to its log end after a truncation.
    fn reset_position(&mut self, tp: &TopicPartition, state: ReplicaState) {
        let Some(partition) = self.partitions.get(tp) else {
            return;
        };
        let log = Arc::clone(&partition.log);
        match log
            .log_end_offset()
            .and_then(|end| Ok((end, log.latest_epoch()?)))
        {
            Ok((end, latest)) => {
                if let Some(partition) = self.partitions.get_mut(tp) {
                    partition.fetch_offset = end;
                    partition.last_fetched_epoch = latest;
                    partition.state = state;
                }
            }
            Err(e) => self.local_failure(tp, &e),
        }
    }

    async fn maybe_truncate(&mut self) {
        let now = Instant::now();
        let mut with_epoch = Vec::new();
        let mut without_epoch = Vec::new();
        let mut broken = Vec::new();
        for (tp, state) in &self.partitions {
            if state.state != ReplicaState::Truncating || state.is_delayed(now) {
                continue;
            }
            match state.log.latest_epoch() {
                Ok(Some(epoch)) => with_epoch.push(EpochRequest {
                    topic_partition: tp.clone(),
                    current_leader_epoch: state.current_leader_epoch,
                    leader_epoch: epoch,
                }),
                Ok(None) => without_epoch.push(tp.clone()),
                Err(e) => broken.push((tp.clone(), e)),
            }
        }
        for (tp, e) in broken {
            self.local_failure(&tp, &e);
        }
        for tp in without_epoch {
            self.truncate_to_high_watermark(&tp);
        }
        if with_epoch.is_empty() {
            return;
        }
        let requested: BTreeMap<TopicPartition, LeaderEpoch> = with_epoch
            .iter()
            .map(|r| (r.topic_partition.clone(), r.current_leader_epoch))
            .collect();
        match self.endpoint.fetch_epoch_end_offsets(with_epoch).await {
            Ok(results) => {
                for result in results {
                    let tp = &result.topic_partition;
                    let Some(&requested_epoch) = requested.get(tp) else {
                        tracing::warn!(partition = %tp, "leader answered OffsetsForLeaderEpoch for a partition not asked");
                        continue;
                    };
                    match result.error {
                        None => self.truncate(tp, result.end),
                        Some(LeaderError::FencedLeaderEpoch) => self.on_fenced(tp, requested_epoch),
                        Some(error) => {
                            tracing::info!(partition = %tp, ?error, "retrying OffsetsForLeaderEpoch after the leader's error");
                            self.delay(tp);
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(leader = self.endpoint.broker_id(), error = %e, "OffsetsForLeaderEpoch failed; backing off");
                for tp in requested.keys() {
                    self.delay(tp);
                }
            }
        }
    }

    /// Truncates after the leader said where `answer`'s epoch ends (from
    /// OffsetsForLeaderEpoch or a Fetch's diverging epoch).
    fn truncate(&mut self, tp: &TopicPartition, answer: EpochEndOffset) {
        let Some(partition) = self.partitions.get(tp) else {
            return;
        };
        let log = Arc::clone(&partition.log);
        let decided = (|| {
            let log_end = log.log_end_offset()?;
            let floor = if answer.leader_epoch >= 0 && answer.end_offset >= 0 {
                log.floor_end_offset(LeaderEpoch(answer.leader_epoch))?
            } else {
                None
            };
            let truncation = offset_truncation_state(answer, floor, log_end, log.high_watermark());
            log.truncate_to(truncation.offset)?;
            Ok::<_, Error>((log_end, truncation))
        })();
        match decided {
            Ok((log_end, truncation)) => {
                tracing::info!(partition = %tp, leader_epoch = answer.leader_epoch, leader_end_offset = answer.end_offset, log_end = %log_end, offset = %truncation.offset, complete = truncation.complete, "truncating to where the leader's epoch ends");
                let next = if truncation.complete {
                    ReplicaState::Fetching
                } else {
                    ReplicaState::Truncating
                };
                self.reset_position(tp, next);
            }
            Err(e) => self.local_failure(tp, &e),
        }
    }

    /// A log without epochs cannot ask where it diverged: keep only what is known
    /// committed (Kafka's `truncateToHighWatermark`).
    fn truncate_to_high_watermark(&mut self, tp: &TopicPartition) {
        let Some(partition) = self.partitions.get(tp) else {
            return;
        };
        let log = Arc::clone(&partition.log);
        let high_watermark = log.high_watermark();
        match log.truncate_to(high_watermark) {
            Ok(()) => {
                tracing::info!(partition = %tp, offset = %high_watermark, "truncating to the high watermark (no leader epoch known)");
                self.reset_position(tp, ReplicaState::Fetching);
            }
            Err(e) => self.local_failure(tp, &e),
        }
    }

    /// One fetch round (Kafka's `maybeFetch`): builds the request, sends it, applies the
    /// answers and, under the fsync rule, waits for this round's appends to be durable.
    async fn maybe_fetch(&mut self) {
        let partitions = self.build_fetch();
        if partitions.is_empty() {
            return;
        }
        let sent: BTreeMap<TopicPartition, (Offset, LeaderEpoch)> = partitions
            .iter()
            .map(|p| {
                (
                    p.topic_partition.clone(),
                    (p.fetch_offset, p.current_leader_epoch),
                )
            })
            .collect();
        let request = FetchRequest {
            max_wait_ms: self.config.max_wait_ms,
            min_bytes: self.config.min_bytes,
            max_bytes: self.config.max_bytes,
            partitions,
        };
        let responses = match self.endpoint.fetch(request).await {
            Ok(responses) => responses,
            Err(e) => {
                tracing::warn!(leader = self.endpoint.broker_id(), error = %e, "replica fetch failed; backing off");
                for tp in sent.keys() {
                    self.delay(tp);
                }
                return;
            }
        };
        let appended = self.process_fetch_response(&sent, responses).await;
        if self.config.wait_for_durable {
            self.await_durable(appended).await;
        }
    }

    /// The partitions of this round's Fetch (Kafka's `buildFetch`): those fetching and
    /// not backing off, starting one further along each round so that a small
    /// `max_bytes` does not always go to the same partitions first. A partition whose log
    /// cannot say its start offset fails here, before the request.
    fn build_fetch(&mut self) -> Vec<FetchPartition> {
        let now = Instant::now();
        let mut partitions = Vec::new();
        let mut broken = Vec::new();
        for (tp, state) in &self.partitions {
            if state.state != ReplicaState::Fetching || state.is_delayed(now) {
                continue;
            }
            match state.log.log_start_offset() {
                Ok(log_start_offset) => partitions.push(FetchPartition {
                    topic_partition: tp.clone(),
                    topic_id: state.topic_id,
                    fetch_offset: state.fetch_offset,
                    current_leader_epoch: state.current_leader_epoch,
                    last_fetched_epoch: state.last_fetched_epoch,
                    log_start_offset,
                    partition_max_bytes: self.config.partition_max_bytes,
                }),
                Err(e) => broken.push((tp.clone(), e)),
            }
        }
        for (tp, e) in broken {
            self.local_failure(&tp, &e);
        }
        if partitions.is_empty() {
            return partitions;
        }
        let first = self.rotation % partitions.len();
        partitions.rotate_left(first);
        self.rotation = self.rotation.wrapping_add(1);
        partitions
    }

    /// Applies each partition's answer (Kafka's `processFetchRequest`), if it answers the
    /// request as that partition stands now: data is appended, a diverging epoch
    /// truncates, an out-of-range offset or a fenced epoch is resolved, any other error
    /// backs off. Returns the log end after each append, for the fsync rule.
    async fn process_fetch_response(
        &mut self,
        sent: &BTreeMap<TopicPartition, (Offset, LeaderEpoch)>,
        responses: Vec<FetchedPartition>,
    ) -> Vec<(TopicPartition, Offset)> {
        let mut appended = Vec::new();
        for response in responses {
            let tp = response.topic_partition.clone();
            let Some(&(fetch_offset, requested_epoch)) = sent.get(&tp) else {
                continue;
            };
            // Only an answer to the request as it stands now is applied.
            let current = self.partitions.get(&tp).is_some_and(|s| {
                s.fetch_offset == fetch_offset
                    && s.current_leader_epoch == requested_epoch
                    && s.state == ReplicaState::Fetching
            });
            if !current {
                continue;
            }
            match response.error {
                None => {
                    if let Some(diverging) = response.diverging_epoch {
                        self.truncate(&tp, diverging);
                    } else if let Some(end) = self.process_partition_data(&tp, &response) {
                        appended.push((tp, end));
                    }
                }
                Some(LeaderError::OffsetOutOfRange) => {
                    self.handle_out_of_range(&tp, requested_epoch).await;
                }
                Some(LeaderError::FencedLeaderEpoch) => self.on_fenced(&tp, requested_epoch),
                Some(error) => {
                    tracing::debug!(partition = %tp, ?error, "leader refused the partition; backing off");
                    self.delay(&tp);
                }
            }
        }
        appended
    }

    /// The fsync rule: returns once every append of this round is durable, so the next
    /// Fetch's offsets are; a failed fsync fails its partition.
    async fn await_durable(&mut self, appended: Vec<(TopicPartition, Offset)>) {
        for (tp, end) in appended {
            let Some(log) = self.partitions.get(&tp).map(|s| Arc::clone(&s.log)) else {
                continue;
            };
            if let Err(e) = log.wait_durable(end).await {
                self.fail(&tp, FailureReason::FsyncFailed(e.to_string()));
            }
        }
    }

    /// Appends a partition's fetched batches and takes the leader's high watermark;
    /// returns the new log end if anything was appended (Kafka's `processPartitionData`).
    fn process_partition_data(
        &mut self,
        tp: &TopicPartition,
        response: &FetchedPartition,
    ) -> Option<Offset> {
        let partition = self.partitions.get(tp)?;
        let log = Arc::clone(&partition.log);
        let fetch_offset = partition.fetch_offset.get();
        // Whole batches only, from the first one reaching the fetch offset (the leader
        // sends from the batch holding it).
        let records = &response.records;
        let mut range: Option<(usize, usize)> = None;
        for (position, header) in iter_headers(records) {
            if header.last_offset() < fetch_offset {
                continue;
            }
            let end = position + header.total_bytes();
            range = Some(range.map_or((position, end), |(start, _)| (start, end)));
        }
        let mut appended = None;
        if let Some(batches) = range.and_then(|(start, end)| records.get(start..end)) {
            match log.append_as_follower(batches) {
                Ok(info) => appended = Some(info.log_end_offset),
                Err(Error::Storage(
                    e @ (logbook_storage::Error::CorruptBatch { .. }
                    | logbook_storage::Error::Batch(_)),
                )) => {
                    // Kafka logs and retries: a transient state of the leader's log can
                    // produce it, and the next fetch may be fine.
                    tracing::error!(partition = %tp, offset = fetch_offset, error = %e, "invalid batches from the leader; backing off");
                    self.delay(tp);
                    return None;
                }
                Err(Error::NotLeaderOrFollower(_)) => {
                    // The partition changed role since this round was sent; metadata
                    // removes or moves it next.
                    tracing::debug!(partition = %tp, "no longer a follower; fetched data dropped");
                    self.delay(tp);
                    return None;
                }
                Err(e) => {
                    self.local_failure(tp, &e);
                    return None;
                }
            }
        }
        if let Err(e) = log.update_from_leader(response.high_watermark, response.log_start_offset) {
            self.local_failure(tp, &e);
            return None;
        }
        if appended.is_some() {
            self.reset_position(tp, ReplicaState::Fetching);
        }
        appended
    }

    /// OFFSET_OUT_OF_RANGE (Kafka's `fetchOffsetAndTruncate`): the leader's log ends below
    /// ours (an unclean election) → truncate to its end; or ours ends below its start
    /// (we were away while retention ran) → start over at its start.
    async fn handle_out_of_range(&mut self, tp: &TopicPartition, epoch: LeaderEpoch) {
        let Some(log) = self.partitions.get(tp).map(|s| Arc::clone(&s.log)) else {
            return;
        };
        let log_end = match log.log_end_offset() {
            Ok(end) => end,
            Err(e) => return self.local_failure(tp, &e),
        };
        let leader_end = match self.endpoint.fetch_latest_offset(tp, epoch).await {
            Ok(offset) => offset,
            Err(e) => return self.on_list_offsets_error(tp, epoch, &e),
        };
        let done = if leader_end < log_end {
            tracing::warn!(partition = %tp, log_end = %log_end, leader_end = %leader_end, "leader's log ends below ours; truncating to its end");
            log.truncate_to(leader_end)
        } else {
            let leader_start = match self.endpoint.fetch_earliest_offset(tp, epoch).await {
                Ok(offset) => offset,
                Err(e) => return self.on_list_offsets_error(tp, epoch, &e),
            };
            if leader_start > log_end {
                tracing::warn!(partition = %tp, log_end = %log_end, leader_start = %leader_start, "our log ends below the leader's start; starting over there");
                log.truncate_fully_and_start_at(leader_start)
            } else {
                Ok(())
            }
        };
        match done {
            Ok(()) => self.reset_position(tp, ReplicaState::Fetching),
            Err(e) => self.local_failure(tp, &e),
        }
    }

    fn on_list_offsets_error(
        &mut self,
        tp: &TopicPartition,
        epoch: LeaderEpoch,
        e: &EndPointError,
    ) {
        if matches!(e, EndPointError::Refused(LeaderError::FencedLeaderEpoch)) {
            self.on_fenced(tp, epoch);
        } else {
            tracing::info!(partition = %tp, error = %e, "cannot read the leader's offsets; backing off");
            self.delay(tp);
        }
    }
}

enum Command<L> {
    Add(
        Vec<InitialFetchState<L>>,
        oneshot::Sender<Result<(), FetcherError>>,
    ),
    Remove(Vec<TopicPartition>, oneshot::Sender<()>),
    Describe(oneshot::Sender<Description>),
}

/// Every followed partition's state and every failed one's reason.
pub type Description = (
    Vec<(TopicPartition, FetchStateView)>,
    Vec<(TopicPartition, FailureReason)>,
);

/// A running fetcher task. Commands take effect between rounds, so a round in flight (at
/// most `max_wait_ms` plus the fsync wait) finishes first.
pub struct ReplicaFetcherHandle<L> {
    commands: mpsc::Sender<Command<L>>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

impl<L: FollowerLog> ReplicaFetcherHandle<L> {
    /// Runs `fetcher` on its own task.
    pub fn spawn<E: LeaderEndPoint>(fetcher: ReplicaFetcher<E, L>) -> Self {
        let (commands, receiver) = mpsc::channel(fetcher.config.commands_capacity.max(1));
        let cancel = CancellationToken::new();
        let task = tokio::spawn(run(fetcher, receiver, cancel.clone()));
        Self {
            commands,
            cancel,
            task,
        }
    }

    async fn ask<T>(
        &self,
        command: impl FnOnce(oneshot::Sender<T>) -> Command<L>,
    ) -> Result<T, FetcherError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(command(tx))
            .await
            .map_err(|_| FetcherError::Stopped)?;
        rx.await.map_err(|_| FetcherError::Stopped)
    }

    /// See [`ReplicaFetcher::add_partitions`].
    ///
    /// # Errors
    /// `TooManyPartitions`; `Stopped`.
    pub async fn add_partitions(
        &self,
        states: Vec<InitialFetchState<L>>,
    ) -> Result<(), FetcherError> {
        self.ask(|tx| Command::Add(states, tx)).await?
    }

    /// See [`ReplicaFetcher::remove_partitions`]; returns once no round uses them.
    ///
    /// # Errors
    /// `Stopped`.
    pub async fn remove_partitions(
        &self,
        partitions: Vec<TopicPartition>,
    ) -> Result<(), FetcherError> {
        self.ask(|tx| Command::Remove(partitions, tx)).await
    }

    /// Every followed partition's state and every failed one's reason.
    ///
    /// # Errors
    /// `Stopped`.
    pub async fn describe(&self) -> Result<Description, FetcherError> {
        self.ask(Command::Describe).await
    }

    /// Stops the task (a round in flight is dropped at its next await) and waits for it.
    pub async fn shutdown(self) {
        self.cancel.cancel();
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "replica fetcher task failed");
        }
    }
}

async fn run<E: LeaderEndPoint, L: FollowerLog>(
    mut fetcher: ReplicaFetcher<E, L>,
    mut commands: mpsc::Receiver<Command<L>>,
    cancel: CancellationToken,
) {
    loop {
        loop {
            match commands.try_recv() {
                Ok(command) => apply(&mut fetcher, command),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => return,
            }
        }
        if fetcher.has_ready_partitions(Instant::now()) {
            tokio::select! {
                biased;
                () = cancel.cancelled() => return,
                () = fetcher.do_work() => {}
            }
        } else {
            let wake = fetcher.next_ready_at();
            tokio::select! {
                biased;
                () = cancel.cancelled() => return,
                command = commands.recv() => match command {
                    Some(command) => apply(&mut fetcher, command),
                    None => return,
                },
                () = sleep_until(wake), if wake.is_some() => {}
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

fn apply<E: LeaderEndPoint, L: FollowerLog>(
    fetcher: &mut ReplicaFetcher<E, L>,
    command: Command<L>,
) {
    // A dropped receiver only means the caller stopped waiting.
    match command {
        Command::Add(states, reply) => {
            let _ = reply.send(fetcher.add_partitions(states));
        }
        Command::Remove(partitions, reply) => {
            fetcher.remove_partitions(&partitions);
            let _ = reply.send(());
        }
        Command::Describe(reply) => {
            let failed = fetcher
                .failed
                .iter()
                .map(|(tp, reason)| (tp.clone(), reason.clone()))
                .collect();
            let _ = reply.send((fetcher.fetch_states(), failed));
        }
    }
}
