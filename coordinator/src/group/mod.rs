//! `GroupCoordinator`: Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup), committed offsets, and their durable storage in `__consumer_offsets`.
//!
//! Thread-safety: each group is a `ClassicGroup` behind its own `parking_lot::Mutex`, held
//! only for bounded, non-blocking work and never across an `.await`. Requests that must wait
//! for a rebalance phase (JoinGroup, SyncGroup) get a `oneshot` receiver; the coordinator
//! keeps the sender in the member and answers it when the phase ends. Timers (session
//! timeouts, the join phase, pending syncs, MEMBER_ID_REQUIRED members, offset expiry) are
//! scheduled on the group's shard of the [`CoordinatorRuntime`], so unloading the shard
//! cancels them; each calls back with a token, and a token that no longer matches means the
//! timer was superseded, so a late wake-up can never act on newer state.
//!
//! Sharding: groups live in one [`GroupShard`] per `__consumer_offsets` partition, replayed
//! from that partition only (`load_partition`) and dropped with `unload_partition`; see
//! `coordinator::runtime`.
//!
//! Writes: an operation builds its records and response (a [`CoordinatorResult`]) and
//! hands them to `GroupCoordinator::write`, which appends them through the runtime and
//! replays the offset records onto the group with `replay_offset`, the function the load
//! replays `__consumer_offsets` with; group metadata records are written after the
//! rebalance state machine has changed the group in memory (see `write`).

pub mod classic_group;
pub mod offsets;
pub mod persistence;

mod admin;
mod commit;
mod rebalance;
#[cfg(test)]
mod tests;
mod txn_commit;

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;

pub use admin::{GroupDescription, GroupListing, MemberDescription};
pub use classic_group::{ClassicGroup, GroupState, JoinResult, Member, SyncResult};
pub use commit::{CommitPartition, CommitResult, FetchedTopic};

use super::partition_writer::{CoordinatorHost, CoordinatorPartition, WriteError};
use super::runtime::{
    CoordinatorResult, CoordinatorRuntime, CoordinatorShard, LoadTicket, RuntimeError, TopicSpec,
    Written,
};
use logbook_common::now_ms;
use persistence::{GroupValue, MemberValue, Persisted};

/// Why a group operation failed; each variant is a Kafka error a client acts on, mapped to
/// its code in `errors::group_error`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    /// Empty or otherwise unusable group id.
    #[error("invalid group id")]
    InvalidGroupId,
    /// The group is being deleted or unloaded; find the coordinator again.
    #[error("coordinator not available")]
    CoordinatorNotAvailable,
    /// This broker does not coordinate the group (its shard is not loaded, or its log
    /// failed).
    #[error("not coordinator")]
    NotCoordinator,
    /// The group's shard is being replayed from `__consumer_offsets`.
    #[error("coordinator load in progress")]
    CoordinatorLoadInProgress,
    /// The member id is not (or no longer) in the group.
    #[error("unknown member id")]
    UnknownMemberId,
    /// KIP-394: rejoin with the member id in the response.
    #[error("member id required")]
    MemberIdRequired,
    /// The request names an older (or newer) generation.
    #[error("illegal generation")]
    IllegalGeneration,
    /// A rebalance is running; rejoin.
    #[error("rebalance in progress")]
    RebalanceInProgress,
    /// Another member now holds this `group.instance.id`.
    #[error("fenced instance id")]
    FencedInstanceId,
    /// Protocol type or protocols incompatible with the group's.
    #[error("inconsistent group protocol")]
    InconsistentGroupProtocol,
    /// Session timeout outside the broker's bounds.
    #[error("invalid session timeout")]
    InvalidSessionTimeout,
    /// The group has `group.max.size` members.
    #[error("group max size reached")]
    GroupMaxSizeReached,
    /// No such group.
    #[error("group id not found")]
    GroupIdNotFound,
    /// DeleteGroups/OffsetDelete of a group that still has members.
    #[error("group is not empty")]
    NonEmptyGroup,
    /// OffsetDelete of a topic the group's members subscribe to.
    #[error("group is subscribed to the topic")]
    GroupSubscribedToTopic,
    /// Commit metadata above `offset.metadata.max.bytes`.
    #[error("offset metadata too large")]
    OffsetMetadataTooLarge,
    /// A commit names a topic that cannot exist.
    #[error("unknown topic")]
    UnknownTopicOrPartition,
    /// Writing to `__consumer_offsets` failed.
    #[error("storage failure")]
    Storage,
}

/// What a coordinator runtime's refusal means to a group client: a shard not hosted here
/// (never loaded, unloaded, or failed to load) is NOT_COORDINATOR, so the client looks the
/// coordinator up again; one still replaying is COORDINATOR_LOAD_IN_PROGRESS (retry).
impl From<&RuntimeError> for GroupError {
    fn from(e: &RuntimeError) -> Self {
        match e {
            RuntimeError::NotCoordinator(_) | RuntimeError::Load { .. } => Self::NotCoordinator,
            RuntimeError::LoadInProgress(_) => Self::CoordinatorLoadInProgress,
        }
    }
}

/// Group coordinator settings (broker flags named as Kafka's configs).
#[derive(Clone, Debug)]
pub struct GroupConfig {
    /// `group.initial.rebalance.delay.ms`: how long the first rebalance of an empty group
    /// waits for more members.
    pub initial_rebalance_delay_ms: i32,
    /// `offsets.topic.num.partitions`, used when `__consumer_offsets` is created.
    pub offsets_topic_num_partitions: i32,
    /// `offsets.retention.minutes`, in ms.
    pub offsets_retention_ms: i64,
    /// How often expired offsets are removed (`offsets.retention.check.interval.ms`).
    pub offsets_retention_check_interval_ms: u64,
    /// `group.min.session.timeout.ms`.
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`.
    pub max_session_timeout_ms: i32,
    /// `group.max.size`: members per group.
    pub group_max_size: usize,
    /// How long an OffsetCommit waits for its records to become durable.
    pub commit_timeout_ms: u64,
    /// `offsets.topic.segment.bytes`: `segment.bytes` of `__consumer_offsets` when it is
    /// created. Small segments let the log cleaner compact it sooner (the active segment
    /// is never cleaned).
    pub offsets_topic_segment_bytes: i32,
}

impl Default for GroupConfig {
    /// Kafka's defaults.
    fn default() -> Self {
        GroupConfig {
            initial_rebalance_delay_ms: 3000,
            offsets_topic_num_partitions: 50,
            offsets_retention_ms: 7 * 24 * 60 * 60 * 1000,
            offsets_retention_check_interval_ms: 600_000,
            min_session_timeout_ms: 6000,
            max_session_timeout_ms: 1_800_000,
            group_max_size: 10_000,
            commit_timeout_ms: 30_000,
            offsets_topic_segment_bytes: 104_857_600,
        }
    }
}

/// A JoinGroup, as the coordinator needs it.
#[derive(Clone, Debug)]
pub struct JoinRequest {
    /// Group id.
    pub group_id: String,
    /// Member id ("" for a first join).
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
    /// The request header's client id.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
    /// Rebalance timeout (the session timeout for v0).
    pub rebalance_timeout_ms: i32,
    /// Session timeout.
    pub session_timeout_ms: i32,
    /// Protocol type (`consumer`, …).
    pub protocol_type: String,
    /// Protocols in preference order, with the member's metadata for each.
    pub protocols: Vec<(String, Bytes)>,
    /// v4+: a first join gets MEMBER_ID_REQUIRED and must rejoin with the id (KIP-394).
    pub require_known_member_id: bool,
    /// v9+: a static leader rejoining a Stable group may be told to skip the assignment
    /// (KIP-814); an older one is answered as a follower.
    pub supports_skip_assignment: bool,
}

/// How long a member that joined has to complete its first rebalance (Kafka's
/// `NewMemberJoinTimeoutMs`).
const NEW_MEMBER_JOIN_TIMEOUT_MS: i32 = 5 * 60 * 1000;

fn duration_ms(ms: i32) -> std::time::Duration {
    std::time::Duration::from_millis(u64::try_from(ms.max(0)).unwrap_or(0))
}

/// The groups of one `__consumer_offsets` partition: the group coordinator's
/// [`CoordinatorShard`], rebuilt from that partition only.
#[derive(Default)]
pub struct GroupShard {
    groups: RwLock<HashMap<String, Arc<Mutex<ClassicGroup>>>>,
}

impl CoordinatorShard for GroupShard {
    fn replay(partition_index: i32, partition: &dyn CoordinatorPartition) -> Result<Self, String> {
        let records =
            persistence::replay(partition).map_err(|e| format!("{}: {e}", partition.name()))?;
        let shard = GroupShard::default();
        let count = records.len();
        shard.apply_loaded(records);
        tracing::info!(
            partition = partition_index,
            records = count,
            groups = shard.groups.read().len(),
            "loaded groups"
        );
        Ok(shard)
    }
}

impl GroupShard {
    fn group(&self, group_id: &str) -> Option<Arc<Mutex<ClassicGroup>>> {
        self.groups.read().get(group_id).cloned()
    }

    fn get_or_create(&self, group_id: &str) -> Arc<Mutex<ClassicGroup>> {
        if let Some(g) = self.group(group_id) {
            return g;
        }
        Arc::clone(
            self.groups
                .write()
                .entry(group_id.to_string())
                .or_insert_with(|| Arc::new(Mutex::new(ClassicGroup::new(group_id, now_ms())))),
        )
    }

    fn all(&self) -> Vec<Arc<Mutex<ClassicGroup>>> {
        self.groups.read().values().cloned().collect()
    }

    /// A transaction marker of `producer_id` on this shard's partition, ending before
    /// `marker_end` (`None` when replayed): its pending transactional offsets become
    /// committed offsets (commit) or are dropped (abort).
    fn complete_txn_offsets(&self, producer_id: i64, commit: bool, marker_end: Option<i64>) {
        for group in self.all() {
            let mut g = group.lock();
            if let Some(pending) = g.pending_txn_offsets.remove(&producer_id) {
                if commit {
                    for (key, value) in pending {
                        g.offsets.apply(key, Some(value), marker_end);
                    }
                }
            }
        }
    }

    /// Kafka's `GroupCoordinatorShard.replay` over the records of a load, in log order:
    /// offset records through [`replay_offset`] (the function every write replays its own
    /// records with), markers through `complete_txn_offsets`, and group metadata rebuilding
    /// (or, for a tombstone, removing) the group.
    fn apply_loaded(&self, records: Vec<Persisted>) {
        for record in records {
            match record {
                Persisted::TxnMarker {
                    producer_id,
                    commit,
                } => self.complete_txn_offsets(producer_id, commit, None),
                Persisted::Group {
                    group_id,
                    value: Some(v),
                } => restore_group(&mut self.get_or_create(&group_id).lock(), v),
                Persisted::Group {
                    group_id,
                    value: None,
                } => {
                    self.groups.write().remove(&group_id);
                }
                // Nothing to hold pending, and no group to create for it.
                Persisted::TxnOffset { value: None, .. } => {}
                Persisted::Offset { ref group_id, .. }
                | Persisted::TxnOffset { ref group_id, .. } => {
                    let group = self.get_or_create(group_id);
                    replay_offset(&mut group.lock(), record, None);
                }
            }
        }
    }
}

/// The one place an offset record of `__consumer_offsets` changes a group (`g`, the
/// record's group, locked by the caller): the load's replay calls it for every offset
/// record it reads (`batch_end` `None`: the record is committed), and every write calls it
/// for the records it has just appended (`batch_end`: the offset their batch ends before,
/// so the change reaches OffsetFetch once the high watermark passes it), so what a restart
/// rebuilds and what a live write installs cannot drift apart.
///
/// An offset commit (or tombstone) changes the group's offsets; a transactional one is
/// held pending for its producer until the producer's marker (`complete_txn_offsets`), as
/// Kafka's replay keeps it. Markers and group metadata are not offset records and are left
/// to the caller.
fn replay_offset(g: &mut ClassicGroup, record: Persisted, batch_end: Option<i64>) {
    match record {
        Persisted::Offset {
            topic,
            partition,
            value,
            ..
        } => g.offsets.apply((topic, partition), value, batch_end),
        Persisted::TxnOffset {
            producer_id,
            topic,
            partition,
            value: Some(v),
            ..
        } => {
            g.pending_txn_offsets
                .entry(producer_id)
                .or_default()
                .insert((topic, partition), v);
        }
        Persisted::TxnOffset { value: None, .. }
        | Persisted::TxnMarker { .. }
        | Persisted::Group { .. } => {}
    }
}

/// The group coordinator of this broker. See the module docs for the locking rules.
pub struct GroupCoordinator {
    config: GroupConfig,
    /// One [`GroupShard`] per loaded `__consumer_offsets` partition: its timers, the topic's
    /// lifecycle and the write path.
    runtime: Arc<CoordinatorRuntime<GroupShard>>,
    /// `__consumer_offsets`'s partition count: the existing topic's, else
    /// `offsets_topic_num_partitions`.
    offsets_partitions: i32,
    shutdown: CancellationToken,
    self_weak: Weak<GroupCoordinator>,
}

impl GroupCoordinator {
    /// Loads every partition of `__consumer_offsets` if it exists (a single node leads
    /// them all), each into its own shard. The topic itself is created on first use (a
    /// group's first write, a FindCoordinator), as Kafka creates it, and its partitions are
    /// loaded then, so an unused broker starts without creating
    /// `offsets_topic_num_partitions` partitions.
    /// Call from within the tokio runtime (timers are tasks); it does blocking I/O.
    ///
    /// # Errors
    /// The topic's log cannot be read.
    pub fn load(host: &Arc<dyn CoordinatorHost>, config: GroupConfig) -> Result<Arc<Self>, String> {
        let name = super::GROUP_METADATA_TOPIC_NAME;
        let offsets_partitions = host
            .partition_count(name)
            .unwrap_or(config.offsets_topic_num_partitions);
        let shutdown = CancellationToken::new();
        let coordinator = Arc::new_cyclic(|self_weak| GroupCoordinator {
            config,
            runtime: CoordinatorRuntime::new(shutdown.clone(), Arc::clone(host), name),
            offsets_partitions,
            shutdown,
            self_weak: self_weak.clone(),
        });
        coordinator
            .runtime
            .load_existing(|index| coordinator.load_partition(index))
            .map_err(|e| e.to_string())?;
        Ok(coordinator)
    }

    /// Kafka's `onElection`: this broker leads partition `partition_index` of
    /// `__consumer_offsets`; replays it (that partition only) into a new shard, restarts
    /// the session timers of the members it restores, and starts its offset expiry.
    /// Blocking I/O (run via `block_in_place` on the broker's runtime).
    ///
    /// # Errors
    /// The partition is not hosted here or its log cannot be read.
    pub fn load_partition(&self, partition_index: i32) -> Result<(), RuntimeError> {
        let ticket = self.begin_load_partition(partition_index);
        self.complete_load_partition(ticket)
    }

    /// The non-blocking half of [`GroupCoordinator::load_partition`]: from now on requests
    /// for the partition's groups answer COORDINATOR_LOAD_IN_PROGRESS until
    /// [`GroupCoordinator::complete_load_partition`] (or NOT_COORDINATOR after an unload).
    pub fn begin_load_partition(&self, partition_index: i32) -> LoadTicket {
        self.runtime.begin_load(partition_index)
    }

    /// Replays the partition of `ticket` and starts its timers, unless the load was
    /// superseded meanwhile. Blocking I/O.
    ///
    /// # Errors
    /// The partition is not hosted here, cannot be read, or the load was superseded.
    pub fn complete_load_partition(&self, ticket: LoadTicket) -> Result<(), RuntimeError> {
        let partition_index = ticket.partition_index;
        let shard = self.runtime.load_hosted(ticket)?;
        self.start_loaded_timers(&shard);
        self.schedule_expiry(partition_index);
        Ok(())
    }

    /// Kafka's `onResignation`: drops the groups of partition `partition_index`; the
    /// runtime cancels the shard's timers, parked JoinGroup / SyncGroup requests are
    /// answered NOT_COORDINATOR (so those members find the new coordinator), and later
    /// requests for its groups get NOT_COORDINATOR.
    pub fn unload_partition(&self, partition_index: i32) {
        if let Some(shard) = self.runtime.unload(partition_index) {
            for group in shard.all() {
                let mut g = group.lock();
                g.rebalance_token = g.rebalance_token.wrapping_add(1);
                for member in g.members.values_mut() {
                    member.cancel_session_timer();
                    if let Some(tx) = member.awaiting_join.take() {
                        let _ = tx.send(JoinResult::error(
                            &member.member_id,
                            GroupError::NotCoordinator,
                        ));
                    }
                    if let Some(tx) = member.awaiting_sync.take() {
                        let _ = tx.send(SyncResult::error(GroupError::NotCoordinator));
                    }
                }
            }
        }
    }

    /// Whether partition `partition_index`'s groups are loaded or loading here.
    #[must_use]
    pub fn is_hosted(&self, partition_index: i32) -> bool {
        self.runtime.is_hosted(partition_index)
    }

    /// The `__consumer_offsets` partitions whose groups this coordinator serves.
    #[must_use]
    pub fn loaded_partitions(&self) -> Vec<i32> {
        self.runtime.loaded_partitions()
    }

    /// Expires offsets of the shard every `offsets.retention.check.interval.ms`, on a
    /// periodic timer of the shard (so it stops at unload).
    fn schedule_expiry(&self, partition_index: i32) {
        let weak = self.self_weak.clone();
        let period = std::time::Duration::from_millis(
            self.config.offsets_retention_check_interval_ms.max(100),
        );
        let scheduled = self
            .runtime
            .schedule_periodic(partition_index, period, move |shard| {
                if let Some(c) = weak.upgrade() {
                    c.expire_groups(shard.all(), now_ms());
                }
            });
        if let Err(e) = scheduled {
            tracing::debug!(error = %e, "offset expiry not scheduled");
        }
    }

    /// Stops the coordinator's timers.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
        for group in self.all_groups() {
            let mut g = group.lock();
            g.rebalance_token = g.rebalance_token.wrapping_add(1);
            for member in g.members.values_mut() {
                member.cancel_session_timer();
            }
        }
    }

    /// The coordinator's settings.
    #[must_use]
    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// The `__consumer_offsets` partition of `group_id` (its leader is the coordinator).
    #[must_use]
    pub fn partition_for(&self, group_id: &str) -> i32 {
        super::partition_for(group_id, self.offsets_partitions)
    }

    /// The partition count of `__consumer_offsets`, created if this is its first use — by a
    /// group write, a FindCoordinator, or a Metadata request naming it — always by the
    /// coordinator's rules: `offsets_partitions` partitions and the configs Kafka's
    /// `groupMetadataTopicConfigs` sets (compacted, `compression.type=producer`,
    /// `segment.bytes` = `offsets.topic.segment.bytes`, 100 MiB by default).
    ///
    /// # Errors
    /// `Storage` when the topic cannot be created (the partition limit, I/O).
    pub fn offsets_topic(&self) -> Result<i32, GroupError> {
        let spec = || TopicSpec {
            partitions: self.offsets_partitions,
            replication_factor: 1,
            configs: vec![
                ("cleanup.policy", "compact".to_string()),
                ("compression.type", "producer".to_string()),
                (
                    "segment.bytes",
                    self.config.offsets_topic_segment_bytes.to_string(),
                ),
            ],
        };
        self.runtime
            .ensure_topic(spec, |index| self.load_partition(index))
            .map_err(|e| {
                tracing::error!(error = %e, "the group coordinator's topic is not available");
                GroupError::Storage
            })
    }

    fn offsets_partition(
        &self,
        group_id: &str,
    ) -> Result<Arc<dyn CoordinatorPartition>, GroupError> {
        self.offsets_topic()?;
        self.runtime
            .partition(self.partition_for(group_id))
            .ok_or(GroupError::Storage)
    }

    /// The loaded shard of `group_id`'s partition, where every group operation starts;
    /// `None` while `__consumer_offsets` does not exist (no group can exist yet).
    ///
    /// # Errors
    /// NOT_COORDINATOR when the shard is not loaded here, COORDINATOR_LOAD_IN_PROGRESS
    /// while it replays.
    fn shard_for(&self, group_id: &str) -> Result<Option<Arc<GroupShard>>, GroupError> {
        // Another broker may have created the topic, and this one may lead the group's
        // partition now (loaded by `CoordinatorRoles` on a failover) without any request
        // having named the topic here yet: then the shard answers, not "no group". (The
        // failover test failed 1 run in 10 this way: the new coordinator answered
        // OffsetFetch with -1 until a FindCoordinator happened to reach it.)
        if self.runtime.topic_partitions().is_none() {
            return Ok(None);
        }
        self.runtime
            .shard(self.partition_for(group_id))
            .map(Some)
            .map_err(|e| GroupError::from(&e))
    }

    /// The group, if its shard is loaded and holds it (timers use this: an unloaded shard's
    /// group is gone).
    fn group(&self, group_id: &str) -> Option<Arc<Mutex<ClassicGroup>>> {
        self.shard_for(group_id).ok().flatten()?.group(group_id)
    }

    /// Whether this broker coordinates `group_id` now, as Kafka's `validateGroupStatus`
    /// checks before anything else (a TxnOffsetCommit is answered NOT_COORDINATOR before its
    /// transaction is verified). `Ok` also when `__consumer_offsets` does not exist yet: the
    /// request's own path creates it or answers.
    ///
    /// # Errors
    /// See [`Self::shard_for`].
    pub fn check_coordinates(&self, group_id: &str) -> Result<(), GroupError> {
        self.shard_for(group_id).map(|_| ())
    }

    /// The group for a request: `Ok(None)` when it does not exist.
    ///
    /// # Errors
    /// See [`Self::shard_for`].
    fn lookup(&self, group_id: &str) -> Result<Option<Arc<Mutex<ClassicGroup>>>, GroupError> {
        Ok(self.shard_for(group_id)?.and_then(|s| s.group(group_id)))
    }

    /// The group, created in its shard if new (creating `__consumer_offsets` on first use).
    fn get_or_create(&self, group_id: &str) -> Result<Arc<Mutex<ClassicGroup>>, GroupError> {
        self.offsets_topic()?;
        let shard = self
            .shard_for(group_id)?
            .ok_or(GroupError::NotCoordinator)?;
        Ok(shard.get_or_create(group_id))
    }

    /// Every group of every loaded shard.
    fn all_groups(&self) -> Vec<Arc<Mutex<ClassicGroup>>> {
        self.runtime
            .loaded_partitions()
            .into_iter()
            .filter_map(|p| self.runtime.shard(p).ok())
            .flat_map(|s| s.all())
            .collect()
    }

    /// Removes a Dead group from its shard (if it is still the registered one).
    fn remove_group(&self, group_id: &str, group: &Arc<Mutex<ClassicGroup>>) {
        let Ok(Some(shard)) = self.shard_for(group_id) else {
            return;
        };
        let mut groups = shard.groups.write();
        if groups.get(group_id).is_some_and(|g| Arc::ptr_eq(g, group)) {
            groups.remove(group_id);
        }
    }

    /// The group coordinator's write path: appends `result`'s records to `g`'s
    /// `__consumer_offsets` partition through [`CoordinatorRuntime::write`] (as `producer`'s
    /// transactional batch when set, for TxnOffsetCommit), then replays the appended offset
    /// records onto `g` with [`replay_offset`], the function the load replays them with, at
    /// the batch's end offset. Call with `g` locked: the log order is the apply order.
    ///
    /// Before replaying, the changes the high watermark has passed are forgotten (a group
    /// that writes and never fetches would otherwise keep every change).
    ///
    /// Group metadata records (a member change, the group's tombstone) are not replayed
    /// here: the rebalance state machine changes `g` itself (members, parked requests,
    /// timers, the Dead transition) and writes the record after, and rebuilding the group
    /// from its record as the load does (`restore_group`) would drop what the record does
    /// not hold: parked JoinGroup/SyncGroup requests, session timers, pending members.
    ///
    /// # Errors
    /// The topic cannot be created, or the write failed (logged by the runtime, naming the
    /// group).
    fn write<T>(
        &self,
        g: &mut ClassicGroup,
        producer: Option<(i64, i16)>,
        result: CoordinatorResult<T>,
    ) -> Result<Written<T>, GroupError> {
        self.offsets_topic()?;
        let span = tracing::error_span!("write", group = g.group_id);
        let written = self
            .runtime
            .write(self.partition_for(&g.group_id), producer, result, &span)
            .map_err(|e| GroupError::from(&e))?;
        let Some((partition, end_offset)) = &written.committable else {
            return Ok(written);
        };
        g.offsets.prune(partition.high_watermark());
        let (producer_id, transactional) = producer.map_or((-1, false), |(id, _)| (id, true));
        for (key, value) in &written.records {
            match persistence::decode_replayed(key, value.as_ref(), producer_id, transactional) {
                Ok(record) => {
                    assert_record_of(g, &record);
                    replay_offset(g, record, Some(*end_offset));
                }
                // As the load would skip it: our own record, so our own bug.
                Err(e) => {
                    tracing::error!(group = g.group_id, error = %e, "cannot decode a __consumer_offsets record just written")
                }
            }
        }
        Ok(written)
    }

    /// Persists the group's metadata (members with their assignments); a tombstone when the
    /// group is Dead. Returns the append to wait for: SyncGroup answers only once it is
    /// durable; other callers (a static member's return, deletion) do not wait, as members
    /// hold the same state and a lost record costs at most a rebalance.
    fn store_group(&self, g: &mut ClassicGroup) -> Result<Committable, GroupError> {
        let key = persistence::group_key(&g.group_id);
        let value = (g.state != GroupState::Dead).then(|| {
            let protocol = g.protocol_name.clone().unwrap_or_default();
            persistence::group_value(&GroupValue {
                protocol_type: g.protocol_type.clone().unwrap_or_default(),
                generation_id: g.generation_id,
                protocol_name: g.protocol_name.clone(),
                leader_id: g.leader_id.clone(),
                state_timestamp_ms: g.state_timestamp_ms,
                members: g
                    .join_order
                    .iter()
                    .filter_map(|id| g.members.get(id))
                    .map(|m| MemberValue {
                        member_id: m.member_id.clone(),
                        group_instance_id: m.group_instance_id.clone(),
                        client_id: m.client_id.clone(),
                        client_host: m.client_host.clone(),
                        rebalance_timeout_ms: m.rebalance_timeout_ms,
                        session_timeout_ms: m.session_timeout_ms,
                        subscription: m.metadata(&protocol).cloned().unwrap_or_default(),
                        assignment: m.assignment.clone(),
                    })
                    .collect(),
            })
        });
        let result = CoordinatorResult {
            records: vec![(key, value)],
            response: (),
        };
        let written = self.write(g, None, result)?;
        Ok(written
            .committable
            .expect("a write of one record appends a batch"))
    }

    /// Starts session timers for members restored from the log, so members that never
    /// come back are removed.
    fn start_loaded_timers(&self, shard: &GroupShard) {
        for group in shard.all() {
            let mut g = group.lock();
            let members: Vec<(String, i32)> = g
                .members
                .values()
                .map(|m| (m.member_id.clone(), m.session_timeout_ms))
                .collect();
            for (member_id, timeout) in members {
                self.schedule_session(&mut g, &member_id, timeout);
            }
        }
    }
}

/// Checks (in debug builds) that a record a write of `g` appended belongs to `g`: its records are replayed
/// onto `g` alone, and one of another group would change the wrong group's offsets.
fn assert_record_of(g: &ClassicGroup, record: &Persisted) {
    let group_id = match record {
        Persisted::Offset { group_id, .. }
        | Persisted::TxnOffset { group_id, .. }
        | Persisted::Group { group_id, .. } => group_id,
        Persisted::TxnMarker { .. } => return,
    };
    debug_assert!(
        *group_id == g.group_id,
        "a write of group {} appended a record of group {group_id}",
        g.group_id
    );
}

/// Rebuilds a group's membership from its persisted metadata.
fn restore_group(g: &mut ClassicGroup, v: GroupValue) {
    for (_, mut member) in std::mem::take(&mut g.members) {
        member.cancel_session_timer();
    }
    g.join_order.clear();
    g.static_members.clear();
    g.pending_sync.clear();
    g.generation_id = v.generation_id;
    g.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
    g.protocol_name = v.protocol_name.clone();
    g.leader_id = None;
    g.state_timestamp_ms = v.state_timestamp_ms;
    let protocol = v.protocol_name.unwrap_or_default();
    for m in v.members {
        g.add(Member {
            member_id: m.member_id,
            group_instance_id: m.group_instance_id,
            client_id: m.client_id,
            client_host: m.client_host,
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            session_timeout_ms: m.session_timeout_ms,
            protocols: vec![(protocol.clone(), m.subscription)],
            assignment: m.assignment,
            awaiting_join: None,
            awaiting_sync: None,
            is_new: false,
            session_token: 0,
            session_timer: None,
        });
    }
    if v.leader_id
        .as_ref()
        .is_some_and(|l| g.members.contains_key(l))
    {
        g.leader_id = v.leader_id;
    }
    g.state = if g.members.is_empty() {
        GroupState::Empty
    } else {
        GroupState::Stable
    };
}

pub use super::runtime::Committable;

/// What a failed `__consumer_offsets` write means to a group client (Kafka's
/// `normalizeException`: a write timeout or too few replicas is COORDINATOR_NOT_AVAILABLE,
/// a log this broker cannot write is NOT_COORDINATOR).
impl From<&WriteError> for GroupError {
    fn from(e: &WriteError) -> Self {
        match e {
            WriteError::Unavailable(_) => GroupError::CoordinatorNotAvailable,
            WriteError::NotLeader(_) | WriteError::Fenced(_) => GroupError::NotCoordinator,
            WriteError::Duplicate(_) | WriteError::Encode(_) => GroupError::Storage,
        }
    }
}
