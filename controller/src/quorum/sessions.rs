//! Broker sessions (Kafka's `BrokerHeartbeatManager`): when each broker's session ends and
//! which offset its registration was written at. In memory on the active controller only,
//! never in the log, as in Kafka: a new active controller starts every broker afresh.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use logbook_metadata::{BrokerId, MetadataImage};

/// One broker's session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BrokerSession {
    /// The registration the heartbeats belong to.
    pub broker_epoch: i64,
    /// Offset of the registration's batch: the broker is caught up once its metadata
    /// offset reaches it. After a controller failover the registration's epoch stands in
    /// (it is at most that offset, since the epoch is the offset before it plus one).
    pub registration_offset: i64,
    /// The session ends at this instant without a heartbeat.
    pub deadline: Instant,
    /// The controller connection that carried the last heartbeat (`None`: an in-process
    /// heartbeat of a combined node, or none yet). When it closes, the session is cut to
    /// one heartbeat interval ([`BrokerSessions::connection_closed`]).
    pub heartbeat_connection: Option<u64>,
    /// The metadata offset the last heartbeat reported (-1: none yet), and when it came:
    /// DescribeQuorum shows brokers as observers of the metadata log with them.
    pub metadata_offset: i64,
    /// When the last heartbeat came.
    pub last_heartbeat: Option<Instant>,
    /// Offset of the metadata batch that moved this broker's leaderships away when it
    /// asked to shut down (Kafka's `controlledShutdownOffset`): it may stop once every
    /// other active broker has applied it.
    pub controlled_shutdown_offset: Option<i64>,
}

/// Sessions of the registered brokers.
#[derive(Debug, Default)]
pub struct BrokerSessions {
    sessions: BTreeMap<BrokerId, BrokerSession>,
}

impl BrokerSessions {
    /// A new active controller's sessions: every broker of `image` gets one ending at
    /// `deadline`, except a fenced broker or one in controlled shutdown, whose session
    /// ends at `now`. Kafka's `hasValidSession` is false for a fenced broker, so its new
    /// incarnation registers at once; a broker in controlled shutdown is leaving (the old
    /// controller may already have told it to stop and ended its session, which a
    /// failover forgets). Without this, a combined node that shut down cleanly while it
    /// was the active controller, and led again after its restart, refused its own new
    /// registration for a whole session timeout (9 s of a fenced node in the chaos
    /// trials, long enough for librdkafka to drop it from its brokers).
    pub fn reset(&mut self, image: &MetadataImage, now: Instant, deadline: Instant) {
        self.sessions = image
            .brokers()
            .map(|b| {
                let leaving = b.fenced || b.in_controlled_shutdown;
                let session = BrokerSession {
                    broker_epoch: b.broker_epoch,
                    registration_offset: b.broker_epoch,
                    deadline: if leaving { now } else { deadline },
                    heartbeat_connection: None,
                    metadata_offset: -1,
                    last_heartbeat: None,
                    controlled_shutdown_offset: None,
                };
                (b.broker_id, session)
            })
            .collect();
    }

    /// Whether `broker_id` has a session that has not ended at `now`.
    #[must_use]
    pub fn is_live(&self, broker_id: BrokerId, now: Instant) -> bool {
        self.sessions
            .get(&broker_id)
            .is_some_and(|s| now < s.deadline)
    }

    /// The session of `broker_id`, if any.
    #[must_use]
    pub fn get(&self, broker_id: BrokerId) -> Option<BrokerSession> {
        self.sessions.get(&broker_id).copied()
    }

    /// Starts the session of a new registration.
    pub fn register(&mut self, broker_id: BrokerId, session: BrokerSession) {
        self.sessions.insert(broker_id, session);
    }

    /// A heartbeat of registration `broker_epoch` at `metadata_offset`, carried by
    /// controller connection `connection` (`None`: in-process): extends the session by
    /// `timeout` (starting one if this controller has none for it) and remembers the
    /// connection and offset; returns it.
    pub fn touch(
        &mut self,
        broker_id: BrokerId,
        (broker_epoch, metadata_offset): (i64, i64),
        connection: Option<u64>,
        now: Instant,
        timeout: Duration,
    ) -> BrokerSession {
        let fresh = BrokerSession {
            broker_epoch,
            registration_offset: broker_epoch,
            deadline: now,
            heartbeat_connection: None,
            metadata_offset: -1,
            last_heartbeat: None,
            controlled_shutdown_offset: None,
        };
        let session = self.sessions.entry(broker_id).or_insert(fresh);
        if session.broker_epoch != broker_epoch {
            *session = fresh;
        }
        session.deadline = now + timeout;
        session.heartbeat_connection = connection;
        session.metadata_offset = metadata_offset;
        session.last_heartbeat = Some(now);
        *session
    }

    /// Controller connection `connection` closed (EOF or reset): every session whose last
    /// heartbeat came over it now ends at `deadline` (one heartbeat interval from now)
    /// unless a heartbeat arrives first, on a new connection (plan §0 "Failover speed": a
    /// killed broker's kernel closes its socket, so it is fenced in about one interval
    /// rather than a whole session timeout; a paused one keeps its socket and waits out
    /// the session, which is right, since it may resume). A heartbeat that already came
    /// over a newer connection is not affected. Returns the brokers whose session was cut.
    pub fn connection_closed(&mut self, connection: u64, deadline: Instant) -> Vec<BrokerId> {
        let mut cut = Vec::new();
        for (id, session) in &mut self.sessions {
            if session.heartbeat_connection == Some(connection) {
                session.heartbeat_connection = None;
                session.deadline = session.deadline.min(deadline);
                cut.push(*id);
            }
        }
        cut
    }

    /// Brokers whose session ended at or before `now`.
    #[must_use]
    pub fn expired(&self, now: Instant) -> Vec<BrokerId> {
        self.sessions
            .iter()
            .filter(|(_, s)| s.deadline <= now)
            .map(|(id, _)| *id)
            .collect()
    }

    /// Ends `broker_id`'s session at `now`: it stopped after a controlled shutdown, so a
    /// restart may register at once, and the next session check fences it.
    pub fn end(&mut self, broker_id: BrokerId, now: Instant) {
        if let Some(session) = self.sessions.get_mut(&broker_id) {
            session.deadline = session.deadline.min(now);
        }
    }

    /// The controlled shutdown offset of `broker_id`'s session: the one recorded before,
    /// else `offset` (recorded now). Kafka keeps the first, so the brokers are measured
    /// against the batch that actually moved the leaderships.
    pub fn controlled_shutdown_offset(&mut self, broker_id: BrokerId, offset: i64) -> i64 {
        match self.sessions.get_mut(&broker_id) {
            Some(session) => *session.controlled_shutdown_offset.get_or_insert(offset),
            None => offset,
        }
    }

    /// Kafka's `lowestActiveOffset`: the smallest metadata offset reported by a broker
    /// that is active in `image` (unfenced, not in controlled shutdown), other than
    /// `except`; `None` when there is no such broker. An active broker without a session
    /// or without a heartbeat yet counts as -1 (it has applied nothing known).
    #[must_use]
    pub fn lowest_active_offset(&self, image: &MetadataImage, except: BrokerId) -> Option<i64> {
        image
            .brokers()
            .filter(|b| b.broker_id != except && !b.fenced && !b.in_controlled_shutdown)
            .map(|b| {
                self.sessions
                    .get(&b.broker_id)
                    .filter(|s| s.broker_epoch == b.broker_epoch)
                    .map_or(-1, |s| s.metadata_offset)
            })
            .min()
    }

    /// Every session, by broker id.
    pub fn iter(&self) -> impl Iterator<Item = (BrokerId, &BrokerSession)> {
        self.sessions.iter().map(|(id, s)| (*id, s))
    }

    /// Forgets `broker_id`'s session (it was fenced).
    pub fn remove(&mut self, broker_id: BrokerId) {
        self.sessions.remove(&broker_id);
    }
}
