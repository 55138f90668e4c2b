//! The classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, and the
//! timers that end join phases and remove silent members. Follows Kafka's `GroupCoordinator`
//! (`doNewMemberJoinGroup`, `prepareRebalance`, `onCompleteJoin`, `InitialDelayedJoin`, …).

use bytes::Bytes;
use tokio::sync::oneshot;

use super::classic_group::{ClassicGroup, GroupState, JoinResult, Member, SyncResult};
use super::persistence;
use super::NEW_MEMBER_JOIN_TIMEOUT_MS;
use super::{duration_ms, now_ms, GroupCoordinator, GroupError, JoinRequest};

/// Which join-phase timer fired.
#[derive(Clone, Copy, Debug)]
enum JoinTimer {
    /// The initial delay of an empty group's first rebalance, with what remains of the
    /// rebalance timeout after it.
    Initial { remaining_ms: i32 },
    /// The rebalance timeout.
    Rebalance,
}

impl GroupCoordinator {
    /// JoinGroup. The receiver is answered when the join phase ends (or at once on error,
    /// MEMBER_ID_REQUIRED, or a rejoin that needs no rebalance).
    pub fn join_group(&self, req: JoinRequest) -> oneshot::Receiver<JoinResult> {
        let (tx, rx) = oneshot::channel();
        if let Err(e) = self.validate_join_request(&req) {
            let _ = tx.send(JoinResult::error(&req.member_id, e));
            return rx;
        }
        let group = if req.member_id.is_empty() {
            self.get_or_create(&req.group_id)
        } else {
            self.lookup(&req.group_id)
                .and_then(|g| g.ok_or(GroupError::UnknownMemberId))
        };
        let group = match group {
            Ok(g) => g,
            Err(e) => {
                let _ = tx.send(JoinResult::error(&req.member_id, e));
                return rx;
            }
        };
        let mut g = group.lock();
        if g.state == GroupState::Dead {
            // Deleted meanwhile: the client finds the coordinator again and retries.
            let _ = tx.send(JoinResult::error(
                &req.member_id,
                GroupError::CoordinatorNotAvailable,
            ));
            return rx;
        }
        let known = g.members.contains_key(&req.member_id);
        if !known && g.members.len() >= self.config.group_max_size {
            let _ = tx.send(JoinResult::error(
                &req.member_id,
                GroupError::GroupMaxSizeReached,
            ));
            return rx;
        }
        if !g.supports_protocols(&req.protocol_type, &req.protocols) {
            let _ = tx.send(JoinResult::error(
                &req.member_id,
                GroupError::InconsistentGroupProtocol,
            ));
            return rx;
        }
        if req.member_id.is_empty() {
            self.new_member_join(&mut g, req, tx);
        } else {
            self.current_member_join(&mut g, req, tx);
        }
        rx
    }

    /// The checks of a JoinGroup that need no group (Kafka's `handleJoinGroup` before it
    /// looks the group up), in its order: the group id, then the protocol names, then the
    /// session timeout against the broker's bounds.
    fn validate_join_request(&self, req: &JoinRequest) -> Result<(), GroupError> {
        // Persisted strings are int16-length in Kafka's __consumer_offsets schemas; the
        // flexible request versions can carry longer ones, which we refuse up front.
        let too_long = |s: &str| s.len() > persistence::STRING_BYTES_MAX;
        if req.group_id.is_empty()
            || too_long(&req.group_id)
            || req.group_instance_id.as_deref().is_some_and(too_long)
        {
            return Err(GroupError::InvalidGroupId);
        }
        if too_long(&req.protocol_type) || req.protocols.iter().any(|(name, _)| too_long(name)) {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        if req.session_timeout_ms < self.config.min_session_timeout_ms
            || req.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return Err(GroupError::InvalidSessionTimeout);
        }
        Ok(())
    }

    fn new_member_join(
        &self,
        g: &mut ClassicGroup,
        req: JoinRequest,
        tx: oneshot::Sender<JoinResult>,
    ) {
        // A static member's id starts with its instance id, another's with its client id
        // (Kafka's `generateMemberId`), cut so the member id fits an int16-length string.
        let prefix: String = req
            .group_instance_id
            .as_deref()
            .unwrap_or(&req.client_id)
            .chars()
            .take(persistence::STRING_BYTES_MAX / 8)
            .collect();
        let member_id = format!("{prefix}-{}", uuid::Uuid::new_v4());
        if let Some(instance) = req.group_instance_id.clone() {
            if let Some(old_member_id) = g.static_members.get(&instance).cloned() {
                self.replace_static_member(g, req, &old_member_id, member_id, tx);
            } else {
                self.add_member_and_rebalance(g, req, member_id, tx);
            }
        } else if req.require_known_member_id {
            if g.pending_members.len() >= self.config.group_max_size {
                let _ = tx.send(JoinResult::error("", GroupError::GroupMaxSizeReached));
                return;
            }
            let token = next_token();
            g.pending_members.insert(member_id.clone(), token);
            self.spawn_timer(&g.group_id, req.session_timeout_ms, {
                let group_id = g.group_id.clone();
                let member_id = member_id.clone();
                move |c| c.on_pending_member_expired(&group_id, &member_id, token)
            });
            let _ = tx.send(JoinResult::error(&member_id, GroupError::MemberIdRequired));
        } else {
            self.add_member_and_rebalance(g, req, member_id, tx);
        }
    }

    fn current_member_join(
        &self,
        g: &mut ClassicGroup,
        req: JoinRequest,
        tx: oneshot::Sender<JoinResult>,
    ) {
        let member_id = req.member_id.clone();
        if g.pending_members.remove(&member_id).is_some() {
            self.add_member_and_rebalance(g, req, member_id, tx);
            return;
        }
        if let Some(e) = g.static_member_error(req.group_instance_id.as_deref(), &member_id) {
            let _ = tx.send(JoinResult::error(&member_id, e));
            return;
        }
        let Some(member) = g.members.get(&member_id) else {
            let _ = tx.send(JoinResult::error(&member_id, GroupError::UnknownMemberId));
            return;
        };
        let matches = member.matches(&req.protocols);
        match g.state {
            GroupState::PreparingRebalance => self.update_member_and_rebalance(g, &req, tx),
            GroupState::CompletingRebalance if matches => {
                // The member missed its JoinGroup answer: send it again. The leader needs
                // the members' metadata again, or it would assign nothing to anyone.
                let mut result = current_generation(g, &member_id, false);
                if g.is_leader(&member_id) {
                    result.members = g.current_member_metadata();
                }
                let _ = tx.send(result);
            }
            GroupState::Stable if matches && !g.is_leader(&member_id) => {
                // A follower with unchanged metadata goes on to SyncGroup in the current
                // generation; only the leader (which may have seen topic metadata change)
                // or changed metadata forces a rebalance, as in Kafka.
                let _ = tx.send(current_generation(g, &member_id, false));
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.update_member_and_rebalance(g, &req, tx);
            }
            GroupState::Empty | GroupState::Dead => {
                let _ = tx.send(JoinResult::error(&member_id, GroupError::UnknownMemberId));
            }
        }
    }

    /// A static member came back with a new member id: it takes over the old member's
    /// place (and assignment); a Stable group needs no rebalance.
    fn replace_static_member(
        &self,
        g: &mut ClassicGroup,
        req: JoinRequest,
        old_member_id: &str,
        new_member_id: String,
        tx: oneshot::Sender<JoinResult>,
    ) {
        let old_protocol = g.protocol_name.clone();
        let old_leader = g.leader_id.clone().unwrap_or_default();
        g.replace_static_member(old_member_id, &new_member_id);
        let req = JoinRequest {
            member_id: new_member_id.clone(),
            ..req
        };
        match g.state {
            GroupState::Stable => {
                update_member(g, &req);
                if g.select_protocol() == old_protocol {
                    // Kafka: a leader on v9+ gets the members with skip_assignment; anyone
                    // else is named the leader as it was before the replacement, so an
                    // old leader's client does not think it leads and assign (a Stable
                    // group would not hand that assignment out).
                    let skip = g.is_leader(&new_member_id) && req.supports_skip_assignment;
                    let mut result = current_generation(g, &new_member_id, skip);
                    if !skip {
                        result.leader = old_leader;
                    }
                    let _ = tx.send(result);
                    self.schedule_session(g, &new_member_id, req.session_timeout_ms);
                    let _ = self.store_group(g);
                } else {
                    self.update_member_and_rebalance(g, &req, tx);
                }
            }
            GroupState::CompletingRebalance | GroupState::PreparingRebalance => {
                // The leader may already be assigning to the old id: rebalance again.
                self.update_member_and_rebalance(g, &req, tx);
            }
            GroupState::Empty | GroupState::Dead => {
                let _ = tx.send(JoinResult::error(
                    &new_member_id,
                    GroupError::UnknownMemberId,
                ));
            }
        }
    }

    fn add_member_and_rebalance(
        &self,
        g: &mut ClassicGroup,
        req: JoinRequest,
        member_id: String,
        tx: oneshot::Sender<JoinResult>,
    ) {
        if g.state == GroupState::PreparingRebalance && g.generation_id == 0 {
            g.new_member_added = true;
        }
        if g.members.is_empty() {
            g.protocol_type = Some(req.protocol_type.clone());
        }
        g.add(Member {
            member_id: member_id.clone(),
            group_instance_id: req.group_instance_id,
            client_id: req.client_id,
            client_host: req.client_host,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            session_timeout_ms: req.session_timeout_ms,
            protocols: req.protocols,
            assignment: Bytes::new(),
            awaiting_join: Some(tx),
            awaiting_sync: None,
            is_new: true,
            session_token: 0,
            session_timer: None,
        });
        self.schedule_session(g, &member_id, NEW_MEMBER_JOIN_TIMEOUT_MS);
        if g.state == GroupState::PreparingRebalance {
            self.check_join_complete(g);
        } else {
            self.prepare_rebalance(g, "new member joined");
        }
    }

    fn update_member_and_rebalance(
        &self,
        g: &mut ClassicGroup,
        req: &JoinRequest,
        tx: oneshot::Sender<JoinResult>,
    ) {
        // Said apart because they mean different things when a group churns: a leader
        // rejoins when its client saw topic metadata change (or lost its own join result),
        // a member with new metadata changed its subscription or owned partitions.
        let reason = match g.members.get(&req.member_id) {
            Some(m) if !m.matches(&req.protocols) => "member rejoined with new metadata",
            _ if g.is_leader(&req.member_id) => "leader rejoined",
            _ => "member rejoined",
        };
        update_member(g, req);
        if let Some(member) = g.members.get_mut(&req.member_id) {
            if let Some(old) = member.awaiting_join.replace(tx) {
                let _ = old.send(JoinResult::error(
                    &req.member_id,
                    GroupError::RebalanceInProgress,
                ));
            }
        }
        if g.state == GroupState::PreparingRebalance {
            self.check_join_complete(g);
        } else {
            self.prepare_rebalance(g, reason);
        }
    }

    /// Starts a rebalance if the state allows one.
    pub(super) fn prepare_rebalance(&self, g: &mut ClassicGroup, reason: &str) {
        if !g.can_rebalance() {
            return;
        }
        tracing::info!(group = %g.group_id, generation = g.generation_id, state = %g.state, reason, "preparing rebalance");
        if g.state == GroupState::CompletingRebalance {
            reset_and_propagate_assignment_error(g, GroupError::RebalanceInProgress);
        }
        g.pending_sync.clear();
        let initial = g.state == GroupState::Empty;
        g.transition_to(GroupState::PreparingRebalance, now_ms());
        let rebalance_timeout_ms = g.rebalance_timeout_ms();
        if initial {
            let delay = self.config.initial_rebalance_delay_ms;
            g.in_initial_delay = true;
            self.schedule_join_timer(
                g,
                delay,
                JoinTimer::Initial {
                    remaining_ms: (rebalance_timeout_ms - delay).max(0),
                },
            );
        } else {
            g.in_initial_delay = false;
            self.schedule_join_timer(g, rebalance_timeout_ms, JoinTimer::Rebalance);
            self.check_join_complete(g);
        }
    }

    fn schedule_join_timer(&self, g: &mut ClassicGroup, delay_ms: i32, timer: JoinTimer) {
        let token = next_token();
        g.rebalance_token = token;
        let group_id = g.group_id.clone();
        self.spawn_timer(&g.group_id, delay_ms, move |c| {
            c.on_join_timer(&group_id, token, timer);
        });
    }

    fn on_join_timer(&self, group_id: &str, token: u64, timer: JoinTimer) {
        let Some(group) = self.group(group_id) else {
            return;
        };
        let mut g = group.lock();
        if g.rebalance_token != token || g.state != GroupState::PreparingRebalance {
            return;
        }
        match timer {
            JoinTimer::Initial { remaining_ms } if g.new_member_added && remaining_ms > 0 => {
                g.new_member_added = false;
                let delay = self.config.initial_rebalance_delay_ms.min(remaining_ms);
                self.schedule_join_timer(
                    &mut g,
                    delay,
                    JoinTimer::Initial {
                        remaining_ms: (remaining_ms - delay).max(0),
                    },
                );
            }
            JoinTimer::Initial { .. } | JoinTimer::Rebalance => {
                g.in_initial_delay = false;
                self.complete_join(&mut g);
            }
        }
    }

    /// Ends the join phase early once every member has rejoined.
    pub(super) fn check_join_complete(&self, g: &mut ClassicGroup) {
        if g.state == GroupState::PreparingRebalance
            && !g.in_initial_delay
            && g.has_all_members_joined()
        {
            self.complete_join(g);
        }
    }

    /// Kafka's `onCompleteJoin`: drop dynamic members that did not rejoin, start the next
    /// generation, answer every parked JoinGroup (the leader gets the members' metadata).
    fn complete_join(&self, g: &mut ClassicGroup) {
        let not_rejoined: Vec<String> = g
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.group_instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in not_rejoined {
            tracing::info!(group = %g.group_id, member = %member_id, "removing member that did not rejoin");
            g.remove(&member_id);
        }
        if g.state == GroupState::Dead {
            return;
        }
        if !g.members.is_empty() && !maybe_elect_new_joined_leader(g) {
            // Only static members that have not rejoined remain: wait for them
            // (or for their session timeouts).
            let timeout = g.rebalance_timeout_ms();
            self.schedule_join_timer(g, timeout, JoinTimer::Rebalance);
            return;
        }
        let now = now_ms();
        g.generation_id += 1;
        if g.members.is_empty() {
            g.protocol_name = None;
            g.transition_to(GroupState::Empty, now);
            tracing::info!(group = %g.group_id, generation = g.generation_id, "group is empty");
            let _ = self.store_group(g);
            return;
        }
        g.protocol_name = g.select_protocol();
        g.transition_to(GroupState::CompletingRebalance, now);
        tracing::info!(
            group = %g.group_id,
            generation = g.generation_id,
            members = g.members.len(),
            protocol = ?g.protocol_name,
            "join phase complete"
        );
        let ids = self.answer_joined_members(g);
        g.pending_sync = ids.into_iter().collect();
        let token = next_token();
        g.rebalance_token = token;
        let group_id = g.group_id.clone();
        let generation = g.generation_id;
        self.spawn_timer(&g.group_id, g.rebalance_timeout_ms(), move |c| {
            c.on_pending_sync_expired(&group_id, token, generation);
        });
    }

    /// Answers every member's parked JoinGroup with the new generation (Kafka's
    /// `onCompleteJoin` completing each join future; the leader's answer carries every
    /// member's metadata) and restarts each member's session timer. Returns the member
    /// ids, which now owe a SyncGroup.
    fn answer_joined_members(&self, g: &mut ClassicGroup) -> Vec<String> {
        let leader_members = g.current_member_metadata();
        let ids: Vec<String> = g.members.keys().cloned().collect();
        for id in &ids {
            let is_leader = g.is_leader(id);
            let mut result = current_generation(g, id, false);
            if is_leader {
                result.members = leader_members.clone();
            }
            let session_timeout = {
                let Some(member) = g.members.get_mut(id) else {
                    continue;
                };
                if let Some(tx) = member.awaiting_join.take() {
                    let _ = tx.send(result);
                }
                member.is_new = false;
                member.session_timeout_ms
            };
            self.schedule_session(g, id, session_timeout);
        }
        ids
    }

    fn on_pending_sync_expired(&self, group_id: &str, token: u64, generation: i32) {
        let Some(group) = self.group(group_id) else {
            return;
        };
        let mut g = group.lock();
        if g.rebalance_token != token
            || g.generation_id != generation
            || !matches!(
                g.state,
                GroupState::CompletingRebalance | GroupState::Stable
            )
            || g.pending_sync.is_empty()
        {
            return;
        }
        let pending: Vec<String> = g.pending_sync.drain().collect();
        for member_id in pending {
            tracing::info!(group = %g.group_id, member = %member_id, "removing member that did not sync");
            remove_answering(&mut g, &member_id);
        }
        self.prepare_rebalance(&mut g, "members did not send SyncGroup");
    }

    fn on_pending_member_expired(&self, group_id: &str, member_id: &str, token: u64) {
        let Some(group) = self.group(group_id) else {
            return;
        };
        let mut g = group.lock();
        if g.pending_members.get(member_id) == Some(&token) {
            g.pending_members.remove(member_id);
            self.check_join_complete(&mut g);
        }
    }

    /// (Re)starts a member's session timer.
    pub(super) fn schedule_session(&self, g: &mut ClassicGroup, member_id: &str, timeout_ms: i32) {
        let group_id = g.group_id.clone();
        let Some(member) = g.members.get_mut(member_id) else {
            return;
        };
        member.cancel_session_timer();
        let token = next_token();
        member.session_token = token;
        let member_id = member_id.to_string();
        member.session_timer = self.spawn_timer(&group_id.clone(), timeout_ms, move |c| {
            c.on_session_expired(&group_id, &member_id, token);
        });
    }

    fn on_session_expired(&self, group_id: &str, member_id: &str, token: u64) {
        let Some(group) = self.group(group_id) else {
            return;
        };
        let mut g = group.lock();
        let Some(member) = g.members.get(member_id) else {
            return;
        };
        if member.session_token != token {
            return;
        }
        // A member parked in JoinGroup or SyncGroup is alive (Kafka's hasSatisfiedHeartbeat);
        // the end of that phase restarts its timer.
        if !member.is_new && (member.awaiting_join.is_some() || member.awaiting_sync.is_some()) {
            return;
        }
        tracing::info!(group = %g.group_id, member = member_id, "session timeout expired; removing member");
        self.remove_member_and_update(&mut g, member_id);
    }

    /// Removes a member and moves the group on: a rebalance if it was Stable or
    /// CompletingRebalance, maybe the end of the join phase if it was PreparingRebalance.
    pub(super) fn remove_member_and_update(&self, g: &mut ClassicGroup, member_id: &str) {
        remove_answering(g, member_id);
        match g.state {
            GroupState::Dead | GroupState::Empty => {}
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(g, "member left");
            }
            GroupState::PreparingRebalance => self.check_join_complete(g),
        }
    }

    /// SyncGroup. The leader's request carries the assignments; every member's receiver is
    /// answered with its own once the leader's arrives.
    #[expect(
        clippy::too_many_arguments,
        reason = "the fields of a SyncGroup request"
    )]
    pub fn sync_group(
        &self,
        group_id: &str,
        generation_id: i32,
        member_id: &str,
        group_instance_id: Option<&str>,
        protocol_type: Option<&str>,
        protocol_name: Option<&str>,
        assignments: Vec<(String, Bytes)>,
    ) -> oneshot::Receiver<SyncResult> {
        let (tx, rx) = oneshot::channel();
        let group = match self.lookup(group_id) {
            Ok(Some(g)) => g,
            Ok(None) => {
                let _ = tx.send(SyncResult::error(GroupError::UnknownMemberId));
                return rx;
            }
            Err(e) => {
                let _ = tx.send(SyncResult::error(e));
                return rx;
            }
        };
        let mut g = group.lock();
        let error = validate_sync_group(
            &g,
            generation_id,
            member_id,
            group_instance_id,
            protocol_type,
            protocol_name,
        );
        if let Some(error) = error {
            let _ = tx.send(SyncResult::error(error));
            return rx;
        }
        g.pending_sync.remove(member_id);
        if g.state == GroupState::Stable {
            let result = SyncResult {
                error: None,
                protocol_type: g.protocol_type.clone(),
                protocol_name: g.protocol_name.clone(),
                assignment: g
                    .members
                    .get(member_id)
                    .map(|m| m.assignment.clone())
                    .unwrap_or_default(),
            };
            let _ = tx.send(result);
            let timeout = g.members.get(member_id).map_or(0, |m| m.session_timeout_ms);
            self.schedule_session(&mut g, member_id, timeout);
            return rx;
        }
        if let Some(member) = g.members.get_mut(member_id) {
            if let Some(old) = member.awaiting_sync.replace(tx) {
                let _ = old.send(SyncResult::error(GroupError::RebalanceInProgress));
            }
        }
        if g.is_leader(member_id) {
            self.store_leader_assignments(&mut g, group_id, assignments);
        }
        rx
    }

    /// The leader's SyncGroup in CompletingRebalance: each member's assignment is set from
    /// the leader's (empty for a member it left out) and the group's record appended.
    fn store_leader_assignments(
        &self,
        g: &mut ClassicGroup,
        group_id: &str,
        assignments: Vec<(String, Bytes)>,
    ) {
        let mut assignments: std::collections::HashMap<String, Bytes> =
            assignments.into_iter().collect();
        for member in g.members.values_mut() {
            member.assignment = assignments.remove(&member.member_id).unwrap_or_default();
        }
        // Kafka's storeGroup: the members are answered, and the group becomes Stable,
        // only once the group's record (with these assignments) is durable.
        let generation = g.generation_id;
        match self.store_group(g) {
            Ok((partition, end_offset)) => {
                self.await_assignment_durable(group_id, generation, partition, end_offset);
            }
            Err(e) => self.assignment_not_stored(g, e),
        }
    }

    /// Waits (in a task) for the group record holding a generation's assignments to become
    /// durable, then completes that generation's sync.
    fn await_assignment_durable(
        &self,
        group_id: &str,
        generation: i32,
        partition: std::sync::Arc<dyn super::CoordinatorPartition>,
        end_offset: i64,
    ) {
        let Some(coordinator) = self.self_weak.upgrade() else {
            return;
        };
        let shutdown = self.shutdown.clone();
        let timeout = std::time::Duration::from_millis(self.config.commit_timeout_ms);
        let group_id = group_id.to_string();
        tokio::spawn(async move {
            let durable = tokio::select! {
                () = shutdown.cancelled() => return,
                durable = partition.wait_committed(end_offset, timeout) => durable,
            };
            let Some(group) = coordinator.group(&group_id) else {
                return;
            };
            let mut g = group.lock();
            if g.state != GroupState::CompletingRebalance || g.generation_id != generation {
                // A rebalance (or a deletion) overtook the write; it answered the members.
                return;
            }
            match durable {
                Ok(()) => coordinator.propagate_assignment(&mut g),
                Err(e) => {
                    tracing::warn!(group = %g.group_id, generation, error = %e, "group assignment not durable");
                    coordinator.assignment_not_stored(&mut g, GroupError::from(&e));
                }
            }
        });
    }

    /// The assignments are durable: the group is Stable and every parked SyncGroup gets
    /// its member's assignment.
    fn propagate_assignment(&self, g: &mut ClassicGroup) {
        g.transition_to(GroupState::Stable, now_ms());
        tracing::info!(group = %g.group_id, generation = g.generation_id, "group is stable");
        let ids: Vec<String> = g.members.keys().cloned().collect();
        for id in ids {
            let Some(member) = g.members.get_mut(&id) else {
                continue;
            };
            let Some(tx) = member.awaiting_sync.take() else {
                continue;
            };
            let timeout = member.session_timeout_ms;
            let _ = tx.send(SyncResult {
                error: None,
                protocol_type: g.protocol_type.clone(),
                protocol_name: g.protocol_name.clone(),
                assignment: member.assignment.clone(),
            });
            self.schedule_session(g, &id, timeout);
        }
    }

    /// The assignments could not be stored: as Kafka, every parked SyncGroup gets the
    /// error, the assignments are dropped, and the group rebalances.
    fn assignment_not_stored(&self, g: &mut ClassicGroup, error: GroupError) {
        reset_and_propagate_assignment_error(g, error);
        self.prepare_rebalance(g, "the group's assignment could not be stored");
    }

    /// Starts a rebalance of a group that has members, as a member joining would (the
    /// fault injector's "forced rebalance"): members learn of it from their next heartbeat
    /// (REBALANCE_IN_PROGRESS) and rejoin. Whether a rebalance was started: not for an
    /// empty or unknown group, nor one already rebalancing.
    ///
    /// # Errors
    /// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, … for a group this broker does not
    /// coordinate.
    pub fn force_rebalance(&self, group_id: &str, reason: &str) -> Result<bool, GroupError> {
        self.check_coordinates(group_id)?;
        let Some(group) = self.lookup(group_id)? else {
            return Ok(false);
        };
        let mut g = group.lock();
        if !matches!(
            g.state,
            GroupState::Stable | GroupState::CompletingRebalance
        ) {
            return Ok(false);
        }
        self.prepare_rebalance(&mut g, reason);
        Ok(g.state == GroupState::PreparingRebalance)
    }

    /// Heartbeat: restarts the member's session timer; tells it to rejoin during a rebalance.
    ///
    /// # Errors
    /// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, …
    pub fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), GroupError> {
        let group = self.lookup(group_id)?.ok_or(GroupError::UnknownMemberId)?;
        let mut g = group.lock();
        if g.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        if let Some(e) = g.static_member_error(group_instance_id, member_id) {
            return Err(e);
        }
        let timeout = g
            .members
            .get(member_id)
            .map(|m| m.session_timeout_ms)
            .ok_or(GroupError::UnknownMemberId)?;
        if generation_id != g.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        match g.state {
            GroupState::Empty | GroupState::Dead => Err(GroupError::UnknownMemberId),
            GroupState::CompletingRebalance | GroupState::Stable => {
                self.schedule_session(&mut g, member_id, timeout);
                Ok(())
            }
            GroupState::PreparingRebalance => {
                self.schedule_session(&mut g, member_id, timeout);
                Err(GroupError::RebalanceInProgress)
            }
        }
    }

    /// LeaveGroup of one or more members (v3+ batches; a member may be named by its
    /// `group.instance.id` alone). Returns one result per member, in order.
    ///
    /// # Errors
    /// COORDINATOR_NOT_AVAILABLE for a group being deleted.
    pub fn leave_group(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let Some(group) = self.lookup(group_id)? else {
            return Ok(members
                .iter()
                .map(|_| Err(GroupError::UnknownMemberId))
                .collect());
        };
        let mut g = group.lock();
        if g.state == GroupState::Dead {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        let mut results = Vec::with_capacity(members.len());
        for (member_id, instance) in members {
            let result = if member_id.is_empty() {
                match instance
                    .as_ref()
                    .and_then(|i| g.static_members.get(i))
                    .cloned()
                {
                    Some(id) => {
                        tracing::info!(group = %g.group_id, member = %id, "static member left");
                        self.remove_member_and_update(&mut g, &id);
                        Ok(())
                    }
                    None => Err(GroupError::UnknownMemberId),
                }
            } else if g.pending_members.remove(member_id).is_some() {
                self.check_join_complete(&mut g);
                Ok(())
            } else if let Some(e) = g.static_member_error(instance.as_deref(), member_id) {
                Err(e)
            } else if !g.members.contains_key(member_id) {
                Err(GroupError::UnknownMemberId)
            } else {
                tracing::info!(group = %g.group_id, member = %member_id, "member left");
                self.remove_member_and_update(&mut g, member_id);
                Ok(())
            };
            results.push(result);
        }
        Ok(results)
    }

    /// Runs `f` on the coordinator after `delay_ms` on a timer of `group_id`'s shard, so
    /// unloading the shard (or shutdown) cancels it; `None` when the shard is not loaded
    /// (its groups are gone, nothing is left to time).
    fn spawn_timer(
        &self,
        group_id: &str,
        delay_ms: i32,
        f: impl FnOnce(&GroupCoordinator) + Send + 'static,
    ) -> Option<tokio::task::AbortHandle> {
        let weak = self.self_weak.clone();
        self.runtime
            .schedule(
                self.partition_for(group_id),
                duration_ms(delay_ms),
                move |_shard| {
                    if let Some(c) = weak.upgrade() {
                        f(&c);
                    }
                },
            )
            .inspect_err(|e| tracing::debug!(group = group_id, error = %e, "timer not scheduled"))
            .ok()
    }
}

/// A process-wide unique timer token.
fn next_token() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Applies a rejoining member's new protocols and timeouts.
fn update_member(g: &mut ClassicGroup, req: &JoinRequest) {
    if let Some(member) = g.members.get_mut(&req.member_id) {
        member.protocols.clone_from(&req.protocols);
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        member.session_timeout_ms = req.session_timeout_ms;
        member.client_id.clone_from(&req.client_id);
        member.client_host.clone_from(&req.client_host);
    }
}

/// Kafka's `maybeElectNewJoinedLeader`: keeps the leader if it rejoined, else makes the
/// first member (in join order) that rejoined the leader. `false` when no member
/// rejoined: only static members that have not rejoined remain.
fn maybe_elect_new_joined_leader(g: &mut ClassicGroup) -> bool {
    let leader_joined = g
        .leader_id
        .as_ref()
        .and_then(|l| g.members.get(l))
        .is_some_and(|m| m.awaiting_join.is_some());
    if leader_joined {
        return true;
    }
    let joined = g
        .join_order
        .iter()
        .find(|id| {
            g.members
                .get(*id)
                .is_some_and(|m| m.awaiting_join.is_some())
        })
        .cloned();
    match joined {
        Some(id) => {
            g.leader_id = Some(id);
            true
        }
        None => false,
    }
}

/// Kafka's `validateSyncGroup` (with the group's state checks of `handleSyncGroup`), in
/// its order: a Dead group, a fenced static member, an unknown member, another
/// generation, another protocol; then the group's state: Empty has no such member,
/// PreparingRebalance means the member must rejoin first.
fn validate_sync_group(
    g: &ClassicGroup,
    generation_id: i32,
    member_id: &str,
    group_instance_id: Option<&str>,
    protocol_type: Option<&str>,
    protocol_name: Option<&str>,
) -> Option<GroupError> {
    if g.state == GroupState::Dead {
        Some(GroupError::CoordinatorNotAvailable)
    } else if let Some(e) = g.static_member_error(group_instance_id, member_id) {
        Some(e)
    } else if !g.members.contains_key(member_id) {
        Some(GroupError::UnknownMemberId)
    } else if generation_id != g.generation_id {
        Some(GroupError::IllegalGeneration)
    } else if protocol_type.is_some_and(|t| g.protocol_type.as_deref() != Some(t))
        || protocol_name.is_some_and(|n| g.protocol_name.as_deref() != Some(n))
    {
        Some(GroupError::InconsistentGroupProtocol)
    } else {
        match g.state {
            GroupState::Empty | GroupState::Dead => Some(GroupError::UnknownMemberId),
            GroupState::PreparingRebalance => Some(GroupError::RebalanceInProgress),
            GroupState::CompletingRebalance | GroupState::Stable => None,
        }
    }
}

/// The current generation as a JoinGroup answer for `member_id` (the leader's metadata list
/// only when `with_members`).
fn current_generation(g: &ClassicGroup, member_id: &str, with_members: bool) -> JoinResult {
    JoinResult {
        error: None,
        generation_id: g.generation_id,
        protocol_type: g.protocol_type.clone(),
        protocol_name: g.protocol_name.clone(),
        leader: g.leader_id.clone().unwrap_or_default(),
        skip_assignment: with_members,
        member_id: member_id.to_string(),
        members: if with_members {
            g.current_member_metadata()
        } else {
            Vec::new()
        },
    }
}

/// Removes a member, answering its parked requests with UNKNOWN_MEMBER_ID.
fn remove_answering(g: &mut ClassicGroup, member_id: &str) {
    if let Some(mut member) = g.remove(member_id) {
        if let Some(tx) = member.awaiting_join.take() {
            let _ = tx.send(JoinResult::error(member_id, GroupError::UnknownMemberId));
        }
        if let Some(tx) = member.awaiting_sync.take() {
            let _ = tx.send(SyncResult::error(GroupError::UnknownMemberId));
        }
    }
}

/// A rebalance started while members waited in SyncGroup: they must rejoin.
fn reset_and_propagate_assignment_error(g: &mut ClassicGroup, error: GroupError) {
    for member in g.members.values_mut() {
        member.assignment = Bytes::new();
        if let Some(tx) = member.awaiting_sync.take() {
            let _ = tx.send(SyncResult::error(error));
        }
    }
}
