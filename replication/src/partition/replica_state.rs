//! `ReplicaState`: what the leader knows of one follower of a partition (Kafka's
//! `Replica` / `ReplicaState`), learnt from that follower's Fetch requests.
//!
//! The leader decides three things from it: the high watermark (a follower in the ISR counts
//! with its fetch offset, which is its log end), whether the follower has fallen out of sync
//! (no fetch reached the leader's log end for `replica.lag.time.max.ms`), and whether it may
//! join the ISR again. Not locked: owned by the partition's `Leadership`.

use logbook_storage::Offset;

/// The leader's view of one follower. `log_end_offset` is `None` until the follower's first
/// fetch in this leader epoch (Kafka's `UnifiedLog.UNKNOWN_OFFSET`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaState {
    /// The follower's broker id.
    pub broker_id: i32,
    /// The follower's log end: the offset of its last fetch (it fetched everything below).
    pub log_end_offset: Option<Offset>,
    /// The follower's log start, as it reported it.
    pub log_start_offset: Option<Offset>,
    /// The broker epoch the follower fetched with (KIP-903), -1 when not known.
    pub broker_epoch: i64,
    /// The last time the follower was known to have caught up with the leader's log end
    /// (0: never in this leader epoch).
    pub last_caught_up_time_ms: i64,
    /// The leader's log end when the follower fetched last.
    pub last_fetch_leader_log_end_offset: Offset,
    /// When the follower fetched last.
    pub last_fetch_time_ms: i64,
}

impl ReplicaState {
    /// A follower the leader has not heard from yet in this epoch. A member of the ISR
    /// starts as caught up at `now_ms` (it gets a full lag time to fetch before it is
    /// dropped); any other replica as never caught up, as Kafka's `resetReplicaState`.
    #[must_use]
    pub fn new(broker_id: i32, now_ms: i64, leader_log_end: Offset, in_isr: bool) -> Self {
        let last_caught_up_time_ms = if in_isr { now_ms } else { 0 };
        Self {
            broker_id,
            log_end_offset: None,
            log_start_offset: None,
            broker_epoch: -1,
            last_caught_up_time_ms,
            last_fetch_leader_log_end_offset: leader_log_end,
            last_fetch_time_ms: last_caught_up_time_ms,
        }
    }

    /// Records a fetch at `fetch_offset` made at `fetch_time_ms` while the leader's log ended
    /// at `leader_log_end`, as Kafka's `updateFetchStateOrThrow`: the follower caught up at
    /// this fetch if it asked for the leader's log end, and at its previous fetch if it now
    /// asks for at least what the leader's log end was then.
    pub fn update_fetch_state(
        &mut self,
        fetch_offset: Offset,
        log_start_offset: Offset,
        fetch_time_ms: i64,
        leader_log_end: Offset,
        broker_epoch: i64,
    ) {
        if fetch_offset >= leader_log_end {
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(fetch_time_ms);
        } else if fetch_offset >= self.last_fetch_leader_log_end_offset {
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(self.last_fetch_time_ms);
        }
        self.log_end_offset = Some(fetch_offset);
        self.log_start_offset = Some(log_start_offset);
        self.broker_epoch = broker_epoch;
        self.last_fetch_leader_log_end_offset = leader_log_end;
        self.last_fetch_time_ms = fetch_time_ms;
    }

    /// Whether the follower is in sync (Kafka's `isCaughtUp`): it has the leader's whole
    /// log, or it caught up within the last `lag_time_max_ms`.
    #[must_use]
    pub fn is_caught_up(&self, leader_log_end: Offset, now_ms: i64, lag_time_max_ms: i64) -> bool {
        self.log_end_offset == Some(leader_log_end)
            || now_ms - self.last_caught_up_time_ms <= lag_time_max_ms
    }
}
