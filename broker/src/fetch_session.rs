//! Incremental fetch sessions (KIP-227): Kafka's `FetchSession`, `FetchSessionCache` and
//! `FetchManager.newContext`.
//!
//! A consumer or follower of thousands of partitions would otherwise send every partition
//! in every Fetch and get every partition back. With a session, the first (full) fetch
//! leaves the partitions and their fetch positions here; later (incremental) fetches name
//! only the partitions whose position or limits changed, plus the ones to forget, and the
//! answer carries only the partitions with something new: records, a moved high watermark
//! or log start offset, an error, or a diverging epoch.
//!
//! The request's `(session_id, session_epoch)` picks the context, as Kafka's:
//! - epoch -1 (`FINAL_EPOCH`): sessionless, like every fetch before v7; a named session is
//!   closed first;
//! - epoch 0 (`INITIAL_EPOCH`): a full fetch that creates a session when the cache has room
//!   (or may evict one); a named session is closed first;
//! - epoch > 0: the next fetch of a cached session. An unknown id answers
//!   FETCH_SESSION_ID_NOT_FOUND, another epoch INVALID_FETCH_SESSION_EPOCH, and a session
//!   made with topic names fetched by topic ids (or the reverse) FETCH_SESSION_TOPIC_ID_ERROR,
//!   all at the top level with no partitions. Forgetting the last partition closes it.
//!
//! Partitions that returned records move to the end of their session's order, so one busy
//! partition cannot take a whole `max_bytes` fetch after fetch (Kafka does the same).
//!
//! Eviction follows Kafka's `tryEvict`: a session unused for [`EVICTION_MS`] gives way to
//! anyone; otherwise a follower's (privileged) session may evict a consumer's, and a larger
//! session a smaller one, once the smaller is [`EVICTION_MS`] old.
//!
//! Beyond Kafka, the partitions all sessions hold together are bounded
//! (`--fetch-session-partitions-max`; see [`FetchSessionCache::new`] for why).
//!
//! Thread-safety: one `parking_lot::Mutex` over the cache, held for the map work only
//! (never across a read of the log or a wait).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::FetchableTopicResponse;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use uuid::Uuid;

/// The session id of a sessionless fetch, and of an answer that created no session.
pub const INVALID_SESSION_ID: i32 = 0;
/// The epoch of a full fetch that asks for a session.
pub const INITIAL_EPOCH: i32 = 0;
/// The epoch of a fetch that wants no session.
pub const FINAL_EPOCH: i32 = -1;
/// How long a session must go unused before any new session may take its slot, and how
/// old it must be before a larger one may (Kafka's
/// `MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`, not configurable there either).
pub const EVICTION_MS: u64 = 120_000;

/// The epoch after `epoch`, as Kafka's `FetchMetadata.nextEpoch`: epochs wrap to 1.
#[must_use]
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        FINAL_EPOCH
    } else if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// A partition as a session names it: by topic id (v13+ sessions, `topic` empty) or by
/// topic name (older ones, `topic_id` nil).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PartitionKey {
    /// The topic's id (nil in a session by names).
    pub topic_id: Uuid,
    /// The topic's name (empty in a session by ids).
    pub topic: String,
    /// The partition index.
    pub partition: i32,
}

impl PartitionKey {
    /// The key of `partition` of the topic named `topic` / `topic_id` in a session that
    /// does (`by_id`) or does not use topic ids.
    #[must_use]
    pub fn new(by_id: bool, topic_id: Uuid, topic: &str, partition: i32) -> Self {
        if by_id {
            Self {
                topic_id,
                topic: String::new(),
                partition,
            }
        } else {
            Self {
                topic_id: Uuid::nil(),
                topic: topic.to_owned(),
                partition,
            }
        }
    }
}

/// What the answer to one partition said, as far as a session compares answers.
#[derive(Clone, Copy, Debug, Default)]
pub struct Answer {
    /// Bytes of records sent.
    pub records_bytes: usize,
    /// The high watermark sent.
    pub high_watermark: i64,
    /// The log start offset sent.
    pub log_start_offset: i64,
    /// Whether the partition answered an error.
    pub error: bool,
    /// Whether a preferred read replica was named.
    pub preferred_read_replica: bool,
    /// Whether a diverging epoch was sent (to a follower).
    pub diverging: bool,
}

/// One partition of a session: the last request parameters, and what the session last
/// told the client about it.
struct CachedPartition {
    request: FetchPartition,
    high_watermark: i64,
    log_start_offset: i64,
    /// Position in the session's order.
    seq: u64,
}

impl CachedPartition {
    /// Kafka's `maybeUpdateResponseData`: whether `answer` must go to the client, and
    /// (when `update`) remember what it says. An error resets the cached high watermark,
    /// so the partition is sent again once the error is gone.
    fn must_respond(&mut self, answer: &Answer) -> bool {
        let mut must = answer.records_bytes > 0;
        if self.high_watermark != answer.high_watermark {
            must = true;
            self.high_watermark = answer.high_watermark;
        }
        if self.log_start_offset != answer.log_start_offset {
            must = true;
            self.log_start_offset = answer.log_start_offset;
        }
        if answer.error {
            self.high_watermark = -1;
            must = true;
        }
        must || answer.preferred_read_replica || answer.diverging
    }
}

struct FetchSession {
    epoch: i32,
    privileged: bool,
    uses_topic_ids: bool,
    created: Instant,
    last_used: Instant,
    partitions: HashMap<PartitionKey, CachedPartition>,
    /// The fetch order: `seq` to key (a linked hash map, as Kafka's
    /// `ImplicitLinkedHashCollection`, in two maps).
    order: BTreeMap<u64, PartitionKey>,
    next_seq: u64,
}

impl FetchSession {
    fn push(&mut self, key: PartitionKey, request: FetchPartition, hw: i64, log_start: i64) {
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some(old) = self.partitions.insert(
            key.clone(),
            CachedPartition {
                request,
                high_watermark: hw,
                log_start_offset: log_start,
                seq,
            },
        ) {
            self.order.remove(&old.seq);
        }
        self.order.insert(seq, key);
    }

    /// Moves `key` to the end of the order.
    fn rotate(&mut self, key: &PartitionKey) {
        if let Some(part) = self.partitions.get_mut(key) {
            self.order.remove(&part.seq);
            part.seq = self.next_seq;
            self.next_seq += 1;
            self.order.insert(part.seq, key.clone());
        }
    }

    fn remove(&mut self, key: &PartitionKey) {
        if let Some(old) = self.partitions.remove(key) {
            self.order.remove(&old.seq);
        }
    }

    /// The partitions to read, in order, with their request parameters.
    fn snapshot(&self) -> Vec<(PartitionKey, FetchPartition)> {
        self.order
            .values()
            .filter_map(|k| {
                self.partitions
                    .get(k)
                    .map(|p| (k.clone(), p.request.clone()))
            })
            .collect()
    }

    /// Kafka's `EvictableKey`: privileged sessions and larger ones are worth more.
    fn worth(&self, id: i32) -> (bool, usize, i32) {
        (self.privileged, self.partitions.len(), id)
    }
}

/// How one Fetch is answered.
#[derive(Debug)]
pub enum FetchContext {
    /// Every requested partition, no session (session id 0).
    Sessionless,
    /// Every requested partition; then a session is made of them if the cache has room.
    Full,
    /// The session's partitions, in its order; the answer names `id` and is filtered by
    /// [`FetchSessionCache::finish_incremental`].
    Incremental {
        /// The session.
        id: i32,
        /// The session's epoch once this fetch is answered.
        epoch: i32,
        /// What to read, in the session's order, with the cached request parameters.
        partitions: Vec<(PartitionKey, FetchPartition)>,
    },
    /// A top-level error and no partitions.
    Error(ResponseError),
}

/// The fetch sessions of this broker (`max.incremental.fetch.session.cache.slots` of them,
/// holding at most `partitions_max` partitions together).
pub struct FetchSessionCache {
    slots: usize,
    partitions_max: usize,
    sessions: Mutex<HashMap<i32, FetchSession>>,
}

impl FetchSessionCache {
    /// A cache with room for `slots` sessions (0: no sessions at all) of at most
    /// `partitions_max` partitions in all.
    ///
    /// Why the second bound: Kafka bounds only the session count, and a session holds every
    /// partition its full fetch named, existing or not, so one frame's worth of made-up
    /// partitions per slot could pin gigabytes. Here a session that would pass the bound is
    /// not created (or, grown by an incremental fetch, is closed with
    /// FETCH_SESSION_ID_NOT_FOUND, after which clients fetch in full again).
    #[must_use]
    pub fn new(slots: usize, partitions_max: usize) -> Self {
        Self {
            slots,
            partitions_max,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Partitions held by all sessions now.
    #[must_use]
    pub fn partitions(&self) -> usize {
        total_partitions(&self.sessions.lock())
    }

    /// Sessions cached now.
    #[must_use]
    pub fn len(&self) -> usize {
        self.sessions.lock().len()
    }

    /// Whether no session is cached.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Kafka's `FetchManager.newContext` for a v7+ fetch: `requested` are the request's
    /// partitions in order, `forgotten` its forgotten ones, `by_id` whether it names topics
    /// by id (v13+).
    pub fn new_context(
        &self,
        session_id: i32,
        epoch: i32,
        by_id: bool,
        requested: &[(PartitionKey, FetchPartition)],
        forgotten: &[PartitionKey],
        now: Instant,
    ) -> FetchContext {
        let mut sessions = self.sessions.lock();
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            if session_id != INVALID_SESSION_ID && sessions.remove(&session_id).is_some() {
                tracing::debug!(session_id, "full fetch closed its fetch session");
            }
            return if epoch == FINAL_EPOCH {
                FetchContext::Sessionless
            } else {
                FetchContext::Full
            };
        }
        let Some(session) = sessions.get_mut(&session_id) else {
            return FetchContext::Error(ResponseError::FetchSessionIdNotFound);
        };
        if session.epoch != epoch {
            return FetchContext::Error(ResponseError::InvalidFetchSessionEpoch);
        }
        if session.uses_topic_ids != by_id {
            return FetchContext::Error(ResponseError::FetchSessionTopicIdError);
        }
        let added = requested
            .iter()
            .filter(|(key, _)| !session.partitions.contains_key(key))
            .count();
        if added > 0 && total_partitions(&sessions) + added > self.partitions_max {
            sessions.remove(&session_id);
            tracing::debug!(
                session_id,
                added,
                partitions_max = self.partitions_max,
                "closed a fetch session that would pass the partition bound"
            );
            return FetchContext::Error(ResponseError::FetchSessionIdNotFound);
        }
        let Some(session) = sessions.get_mut(&session_id) else {
            return FetchContext::Error(ResponseError::FetchSessionIdNotFound);
        };
        for (key, request) in requested {
            match session.partitions.get_mut(key) {
                Some(part) => part.request = request.clone(),
                None => session.push(key.clone(), request.clone(), -1, -1),
            }
        }
        for key in forgotten {
            session.remove(key);
        }
        if session.partitions.is_empty() {
            sessions.remove(&session_id);
            return FetchContext::Sessionless;
        }
        session.last_used = now;
        session.epoch = next_epoch(session.epoch);
        FetchContext::Incremental {
            id: session_id,
            epoch: session.epoch,
            partitions: session.snapshot(),
        }
    }

    /// After a full fetch: caches its partitions (request parameters and what the answer
    /// said) as a new session if there is room, or if one may be evicted. The id to answer
    /// with, or [`INVALID_SESSION_ID`].
    pub fn create(
        &self,
        privileged: bool,
        by_id: bool,
        partitions: Vec<(PartitionKey, FetchPartition, Answer)>,
        now: Instant,
    ) -> i32 {
        if self.slots == 0 || partitions.len() > self.partitions_max {
            return INVALID_SESSION_ID;
        }
        let mut sessions = self.sessions.lock();
        while sessions.len() >= self.slots
            || total_partitions(&sessions) + partitions.len() > self.partitions_max
        {
            if !try_evict(&mut sessions, privileged, partitions.len(), now) {
                tracing::debug!(
                    privileged,
                    size = partitions.len(),
                    "no room for a fetch session"
                );
                return INVALID_SESSION_ID;
            }
        }
        let mut session = FetchSession {
            epoch: next_epoch(INITIAL_EPOCH),
            privileged,
            uses_topic_ids: by_id,
            created: now,
            last_used: now,
            partitions: HashMap::with_capacity(partitions.len()),
            order: BTreeMap::new(),
            next_seq: 0,
        };
        for (key, request, answer) in partitions {
            session.push(key, request, answer.high_watermark, answer.log_start_offset);
        }
        let id = loop {
            let id = i32::try_from(Uuid::new_v4().as_u128() & 0x7fff_ffff).unwrap_or(1);
            if id != INVALID_SESSION_ID && !sessions.contains_key(&id) {
                break id;
            }
        };
        tracing::debug!(
            session_id = id,
            privileged,
            size = session.partitions.len(),
            "created a fetch session"
        );
        sessions.insert(id, session);
        id
    }

    /// After an incremental fetch: keeps in `topics` only the partitions the client must
    /// hear about (see [`CachedPartition::must_respond`]), moves those with records to the
    /// end of the session's order, and drops topics left empty. `answer` reads one
    /// partition's answer. An error (the session was closed or fetched again meanwhile)
    /// means the whole answer must be replaced by that error.
    ///
    /// # Errors
    /// INVALID_FETCH_SESSION_EPOCH if the session moved on, FETCH_SESSION_ID_NOT_FOUND if
    /// it is gone.
    pub fn finish_incremental(
        &self,
        id: i32,
        epoch: i32,
        topics: &mut Vec<FetchableTopicResponse>,
        answer: impl Fn(&kafka_protocol::messages::fetch_response::PartitionData) -> Answer,
    ) -> Result<(), ResponseError> {
        let mut sessions = self.sessions.lock();
        let session = sessions
            .get_mut(&id)
            .ok_or(ResponseError::FetchSessionIdNotFound)?;
        if session.epoch != epoch {
            return Err(ResponseError::InvalidFetchSessionEpoch);
        }
        let by_id = session.uses_topic_ids;
        for topic in topics.iter_mut() {
            topic.partitions.retain(|p| {
                let key = PartitionKey::new(by_id, topic.topic_id, &topic.topic, p.partition_index);
                let answer = answer(p);
                let Some(part) = session.partitions.get_mut(&key) else {
                    return true;
                };
                let must = part.must_respond(&answer);
                if must && answer.records_bytes > 0 {
                    session.rotate(&key);
                }
                must
            });
        }
        topics.retain(|t| !t.partitions.is_empty());
        Ok(())
    }
}

fn total_partitions(sessions: &HashMap<i32, FetchSession>) -> usize {
    sessions.values().map(|s| s.partitions.len()).sum()
}

/// Kafka's `tryEvict`: frees one slot for a new session of `size` partitions, if a
/// session is stale or worth less than the new one.
fn try_evict(
    sessions: &mut HashMap<i32, FetchSession>,
    privileged: bool,
    size: usize,
    now: Instant,
) -> bool {
    let eviction = Duration::from_millis(EVICTION_MS);
    let stalest = sessions
        .iter()
        .min_by_key(|(id, s)| (s.last_used, **id))
        .map(|(id, s)| (*id, now.saturating_duration_since(s.last_used)));
    let victim = match stalest {
        None => return false,
        Some((id, idle)) if idle > eviction => Some(id),
        Some(_) => sessions
            .iter()
            .filter(|(_, s)| {
                let old = now.saturating_duration_since(s.created) > eviction;
                old || (privileged && !s.privileged)
            })
            .map(|(id, s)| s.worth(*id))
            .min()
            .filter(|least| (privileged, size, 0) >= *least)
            .map(|(_, _, id)| id),
    };
    match victim {
        Some(id) => {
            sessions.remove(&id);
            tracing::debug!(session_id = id, "evicted a fetch session");
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests;
