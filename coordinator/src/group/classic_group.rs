//! `ClassicGroup`: the state of one group under the classic (JoinGroup/SyncGroup) protocol,
//! as Kafka's `ClassicGroup` keeps it: members, their protocols and assignments, the
//! generation, the selected protocol, and the requests parked until a rebalance phase ends.
//!
//! Thread-safety: a group sits behind its own mutex in `GroupCoordinator`; nothing here
//! blocks or awaits. The rebalance logic lives in `GroupCoordinator`; this file keeps the
//! bookkeeping that must stay consistent (the static-member index, the leader).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use bytes::Bytes;
use tokio::sync::oneshot;

use super::offsets::{GroupOffsets, OffsetAndMetadata};
use super::GroupError;

/// Kafka's `ClassicGroupState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    /// No members; the group may still hold committed offsets.
    Empty,
    /// A rebalance started: members must (re)join.
    PreparingRebalance,
    /// Everyone joined; waiting for the leader's assignment in SyncGroup.
    CompletingRebalance,
    /// Assignments distributed; members heartbeat.
    Stable,
    /// Deleted (or all offsets expired); about to be removed.
    Dead,
}

impl GroupState {
    /// The name Kafka reports in ListGroups and DescribeGroups.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

impl fmt::Display for GroupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a parked JoinGroup receives when its rebalance phase ends.
#[derive(Clone, Debug, Default)]
pub struct JoinResult {
    /// The error, if the join failed.
    pub error: Option<GroupError>,
    /// The generation the member joined (-1 on error).
    pub generation_id: i32,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The selected protocol (assignor) name.
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// Whether the (static) leader must skip computing an assignment (KIP-814).
    pub skip_assignment: bool,
    /// The member's id (newly assigned ones included).
    pub member_id: String,
    /// For the leader only: every member's id, instance id and metadata for the selected protocol.
    pub members: Vec<(String, Option<String>, Bytes)>,
}

impl JoinResult {
    /// A failed join for `member_id`.
    #[must_use]
    pub fn error(member_id: &str, error: GroupError) -> Self {
        JoinResult {
            error: Some(error),
            generation_id: -1,
            member_id: member_id.to_string(),
            ..JoinResult::default()
        }
    }
}

/// What a parked SyncGroup receives.
#[derive(Clone, Debug, Default)]
pub struct SyncResult {
    /// The error, if the sync failed.
    pub error: Option<GroupError>,
    /// The group's protocol type.
    pub protocol_type: Option<String>,
    /// The selected protocol name.
    pub protocol_name: Option<String>,
    /// This member's assignment.
    pub assignment: Bytes,
}

impl SyncResult {
    /// A failed sync.
    #[must_use]
    pub fn error(error: GroupError) -> Self {
        SyncResult {
            error: Some(error),
            ..SyncResult::default()
        }
    }
}

/// One member of a classic group.
#[derive(Debug)]
pub struct Member {
    /// Coordinator-assigned id: `<client id>-<uuid>`.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
    /// The client id of the member's last JoinGroup.
    pub client_id: String,
    /// The client host of the member's last JoinGroup.
    pub client_host: String,
    /// How long the group waits for this member to rejoin during a rebalance.
    pub rebalance_timeout_ms: i32,
    /// How long without a heartbeat before the member is removed.
    pub session_timeout_ms: i32,
    /// The protocols (assignor name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// The assignment the leader gave this member in the current generation.
    pub assignment: Bytes,
    /// A JoinGroup waiting for the rebalance to complete.
    pub awaiting_join: Option<oneshot::Sender<JoinResult>>,
    /// A SyncGroup waiting for the leader's assignment.
    pub awaiting_sync: Option<oneshot::Sender<SyncResult>>,
    /// True from the member's first join until its join completes (Kafka's `isNew`): such a
    /// member is removed if the join phase times out rather than kept.
    pub is_new: bool,
    /// Identifies the current session timer, so a stale expiry is ignored.
    pub session_token: u64,
    /// Aborts the current session timer.
    pub session_timer: Option<tokio::task::AbortHandle>,
}

impl Member {
    /// The metadata this member sent for `protocol`.
    #[must_use]
    pub fn metadata(&self, protocol: &str) -> Option<&Bytes> {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, metadata)| metadata)
    }

    /// True when `protocols` are exactly this member's (a JoinGroup resend).
    #[must_use]
    pub fn matches(&self, protocols: &[(String, Bytes)]) -> bool {
        self.protocols == protocols
    }

    /// Cancels the session timer.
    pub fn cancel_session_timer(&mut self) {
        if let Some(timer) = self.session_timer.take() {
            timer.abort();
        }
        self.session_token = self.session_token.wrapping_add(1);
    }
}

/// One classic group: membership, generation, protocol and committed offsets.
#[derive(Debug)]
pub struct ClassicGroup {
    /// The group id.
    pub group_id: String,
    /// The current state.
    pub state: GroupState,
    /// When the state last changed, in ms since the epoch (retention counts from it).
    pub state_timestamp_ms: i64,
    /// Incremented by every completed join phase.
    pub generation_id: i32,
    /// `consumer`, `connect`, …; `None` for groups that only store offsets.
    pub protocol_type: Option<String>,
    /// The protocol (assignor) selected in the current generation.
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader_id: Option<String>,
    /// Members by id, in join order (the first joiner leads a new generation).
    pub members: BTreeMap<String, Member>,
    /// Member ids in the order they joined, to pick a leader deterministically.
    pub join_order: Vec<String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, not yet joined, with their timer tokens.
    pub pending_members: HashMap<String, u64>,
    /// Members of the current generation that have not sent SyncGroup yet.
    pub pending_sync: HashSet<String>,
    /// Static members: `group.instance.id` → member id.
    pub static_members: HashMap<String, String>,
    /// Set when a member joined during the initial rebalance delay (extends the delay).
    pub new_member_added: bool,
    /// Identifies the current join/sync timer, so a stale one is ignored.
    pub rebalance_token: u64,
    /// True while the initial rebalance delay runs: the join phase does not end early.
    pub in_initial_delay: bool,
    /// Committed offsets by (topic, partition), latest and as of the high watermark.
    pub offsets: GroupOffsets,
    /// Transactional offset commits (TxnOffsetCommit) not yet committed or aborted, by
    /// producer id: applied to `offsets` by the commit marker, dropped by the abort marker.
    pub pending_txn_offsets: HashMap<i64, BTreeMap<(String, i32), OffsetAndMetadata>>,
}

impl ClassicGroup {
    /// A new, empty group.
    #[must_use]
    pub fn new(group_id: &str, now_ms: i64) -> Self {
        ClassicGroup {
            group_id: group_id.to_string(),
            state: GroupState::Empty,
            state_timestamp_ms: now_ms,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader_id: None,
            members: BTreeMap::new(),
            join_order: Vec::new(),
            pending_members: HashMap::new(),
            pending_sync: HashSet::new(),
            static_members: HashMap::new(),
            new_member_added: false,
            rebalance_token: 0,
            in_initial_delay: false,
            offsets: GroupOffsets::default(),
            pending_txn_offsets: HashMap::new(),
        }
    }

    /// Moves to `state`, asserting the transition is one Kafka allows.
    pub fn transition_to(&mut self, state: GroupState, now_ms: i64) {
        use GroupState::{CompletingRebalance, Dead, Empty, PreparingRebalance, Stable};
        let allowed = match state {
            Empty => matches!(self.state, PreparingRebalance),
            PreparingRebalance => matches!(self.state, Stable | CompletingRebalance | Empty),
            CompletingRebalance => matches!(self.state, PreparingRebalance),
            Stable => matches!(self.state, CompletingRebalance),
            Dead => true,
        };
        assert!(
            allowed,
            "group {}: illegal transition {} -> {state}",
            self.group_id, self.state
        );
        self.state = state;
        self.state_timestamp_ms = now_ms;
    }

    /// True if a rebalance may start from the current state.
    #[must_use]
    pub fn can_rebalance(&self) -> bool {
        matches!(
            self.state,
            GroupState::Stable | GroupState::CompletingRebalance | GroupState::Empty
        )
    }

    /// True if `member_id` leads the current generation.
    #[must_use]
    pub fn is_leader(&self, member_id: &str) -> bool {
        self.leader_id.as_deref() == Some(member_id)
    }

    /// The error for a request naming `group_instance_id` with `member_id` (Kafka's
    /// `ClassicGroup.validateMember`): an instance id the group does not know is
    /// UNKNOWN_MEMBER_ID, one held by another member id FENCED_INSTANCE_ID; `None` when
    /// no instance id is given or it belongs to `member_id`.
    #[must_use]
    pub fn static_member_error(
        &self,
        group_instance_id: Option<&str>,
        member_id: &str,
    ) -> Option<GroupError> {
        match self.static_members.get(group_instance_id?) {
            None => Some(GroupError::UnknownMemberId),
            Some(current) if current != member_id => Some(GroupError::FencedInstanceId),
            Some(_) => None,
        }
    }

    /// Adds a member; the first member of a group becomes its leader.
    pub fn add(&mut self, member: Member) {
        if self.leader_id.is_none() {
            self.leader_id = Some(member.member_id.clone());
        }
        if let Some(instance) = &member.group_instance_id {
            self.static_members
                .insert(instance.clone(), member.member_id.clone());
        }
        self.join_order.push(member.member_id.clone());
        self.members.insert(member.member_id.clone(), member);
    }

    /// Removes a member (cancelling its timer) and picks a new leader if it led.
    pub fn remove(&mut self, member_id: &str) -> Option<Member> {
        let mut member = self.members.remove(member_id)?;
        member.cancel_session_timer();
        self.join_order.retain(|id| id != member_id);
        self.pending_sync.remove(member_id);
        if let Some(instance) = &member.group_instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        if self.is_leader(member_id) {
            self.leader_id = self.join_order.first().cloned();
        }
        Some(member)
    }

    /// Replaces the static member `old_member_id` by `new_member_id`, keeping its assignment.
    /// The old member's parked requests are answered with FENCED_INSTANCE_ID.
    pub fn replace_static_member(
        &mut self,
        old_member_id: &str,
        new_member_id: &str,
    ) -> Option<()> {
        let mut member = self.members.remove(old_member_id)?;
        if let Some(join) = member.awaiting_join.take() {
            let _ = join.send(JoinResult::error(
                old_member_id,
                GroupError::FencedInstanceId,
            ));
        }
        if let Some(sync) = member.awaiting_sync.take() {
            let _ = sync.send(SyncResult::error(GroupError::FencedInstanceId));
        }
        member.cancel_session_timer();
        member.member_id = new_member_id.to_string();
        if let Some(instance) = &member.group_instance_id {
            self.static_members
                .insert(instance.clone(), new_member_id.to_string());
        }
        for id in &mut self.join_order {
            if id == old_member_id {
                *id = new_member_id.to_string();
            }
        }
        if self.pending_sync.remove(old_member_id) {
            self.pending_sync.insert(new_member_id.to_string());
        }
        if self.is_leader(old_member_id) {
            self.leader_id = Some(new_member_id.to_string());
        }
        self.members.insert(new_member_id.to_string(), member);
        Some(())
    }

    /// True when every member has a parked JoinGroup and no MEMBER_ID_REQUIRED member is
    /// still expected.
    #[must_use]
    pub fn has_all_members_joined(&self) -> bool {
        self.pending_members.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    /// The longest rebalance timeout of the members (the join phase's bound).
    #[must_use]
    pub fn rebalance_timeout_ms(&self) -> i32 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    /// Whether a member with `protocol_type` and `protocols` may join: an empty group takes
    /// any non-empty set; otherwise the type must match and one protocol must be supported
    /// by every current member.
    #[must_use]
    pub fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|(name, _)| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == name))
            })
    }

    /// Kafka's `selectProtocol`: among the protocols every member supports, each member
    /// votes for the first one in its preference order; the most votes win (ties go to the
    /// candidate the leader prefers). `None` if there is no common protocol.
    #[must_use]
    pub fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&str> = first
            .protocols
            .iter()
            .map(|(name, _)| name.as_str())
            .filter(|name| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == name))
            })
            .collect();
        let mut votes: HashMap<&str, usize> = HashMap::new();
        for member in self.members.values() {
            if let Some((vote, _)) = member
                .protocols
                .iter()
                .find(|(name, _)| candidates.contains(&name.as_str()))
            {
                *votes.entry(vote.as_str()).or_default() += 1;
            }
        }
        let leader_order: Vec<&str> = self
            .leader_id
            .as_ref()
            .and_then(|id| self.members.get(id))
            .map(|m| m.protocols.iter().map(|(n, _)| n.as_str()).collect())
            .unwrap_or_default();
        let rank = |name: &str| {
            leader_order
                .iter()
                .position(|n| *n == name)
                .unwrap_or(usize::MAX)
        };
        candidates
            .iter()
            .max_by(|a, b| {
                votes
                    .get(*a)
                    .cmp(&votes.get(*b))
                    .then_with(|| rank(b).cmp(&rank(a)))
            })
            .map(|s| (*s).to_string())
    }

    /// Every member's id, instance id and metadata for the selected protocol (the leader's
    /// JoinGroup answer).
    #[must_use]
    pub fn current_member_metadata(&self) -> Vec<(String, Option<String>, Bytes)> {
        let protocol = self.protocol_name.as_deref().unwrap_or_default();
        self.join_order
            .iter()
            .filter_map(|id| self.members.get(id))
            .map(|m| {
                (
                    m.member_id.clone(),
                    m.group_instance_id.clone(),
                    m.metadata(protocol).cloned().unwrap_or_default(),
                )
            })
            .collect()
    }

    /// Topics the members subscribe to, from their consumer-protocol metadata; `None` when
    /// the group is not a consumer group or a subscription does not decode.
    #[must_use]
    pub fn subscribed_topics(&self) -> Option<HashSet<String>> {
        use kafka_protocol::messages::ConsumerProtocolSubscription;
        use kafka_protocol::protocol::Decodable;
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut topics = HashSet::new();
        for member in self.members.values() {
            let mut metadata = member.metadata(protocol)?.clone();
            if metadata.len() < 2 {
                return None;
            }
            let version = i16::from_be_bytes([metadata[0], metadata[1]]);
            bytes::Buf::advance(&mut metadata, 2);
            let subscription =
                ConsumerProtocolSubscription::decode(&mut metadata, version.clamp(0, 3)).ok()?;
            topics.extend(subscription.topics.iter().map(|t| t.to_string()));
        }
        Some(topics)
    }
}
