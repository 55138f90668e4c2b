//! Kafka-aware fault injection for pipeline tests: an application's error handling can
//! only be tested if the broker fails on cue, the way a real Kafka fails. Off unless the
//! broker starts with `--fault-injection` (the [`Broker`]'s `faults` is `None` then, and
//! the admin API answers 404); driven over HTTP on the metrics listener
//! ([`admin`]: `POST /faults`, `GET /faults`, `DELETE /faults[/<id>]`) or with
//! `logbook fault …`.
//!
//! What a fault does, and the real failure it stands for:
//! - `error`: matching requests are answered with a chosen Kafka error code — per
//!   partition for Produce and Fetch (the partition is neither written nor read, as when
//!   the broker refuses it), in the top-level field for the group and transaction APIs
//!   ([`responses`]); for `count` requests and/or `duration_ms`.
//! - `delay`: matching responses are held back by `delay_ms` plus a uniform `jitter_ms`
//!   (the request itself is served at once, as on a slow broker or network).
//! - `drop_connection`: the connection is closed, with no answer, on the request that
//!   takes the matching bytes received past `after_bytes`.
//! - `partition_unavailable`: the partition has no leader: Metadata answers it with
//!   LEADER_NOT_AVAILABLE and leader -1, Produce and Fetch with NOT_LEADER_OR_FOLLOWER,
//!   until the fault is cleared or expires.
//! - `rebalance` (immediate): the group rebalances, as when a member joins.
//! - `fence` (immediate): the transactional id gets a new producer epoch, as when a second
//!   producer with the same `transactional.id` starts: the current producer is fenced and
//!   its open transaction aborted.
//!
//! Each fault is logged when added, when it acts and when cleared, and counted in
//! `logbook_faults_injected_total{kind}`; `logbook_faults_active` is how many are armed.

pub mod admin;
pub mod cli;
pub mod responses;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use kafka_protocol::ResponseError;
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};

use crate::handlers::{self, RequestContext, ResponseFuture};

/// What a fault does (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// Answer with an error code.
    Error,
    /// Hold responses back.
    Delay,
    /// Close connections.
    DropConnection,
    /// Take a partition's leader away.
    PartitionUnavailable,
    /// Rebalance a group now.
    Rebalance,
    /// Fence a transactional id's producer now.
    Fence,
}

impl FaultKind {
    fn label(self) -> &'static str {
        match self {
            FaultKind::Error => "error",
            FaultKind::Delay => "delay",
            FaultKind::DropConnection => "drop_connection",
            FaultKind::PartitionUnavailable => "partition_unavailable",
            FaultKind::Rebalance => "rebalance",
            FaultKind::Fence => "fence",
        }
    }
}

/// A Kafka error, by its name (`NOT_LEADER_OR_FOLLOWER`) or its code (6).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ErrorName {
    /// The code.
    Code(i16),
    /// Kafka's name, as in `Errors.java`.
    Name(String),
}

/// A fault as asked for (the JSON body of `POST /faults`). Every match field left out
/// matches everything.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// What it does.
    pub kind: Option<FaultKind>,
    /// The API it applies to, by Kafka's name (`Produce`, `FindCoordinator`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api: Option<String>,
    /// The client id of the requests it applies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The topic (Produce, Fetch, Metadata, `partition_unavailable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// The partition of `topic`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    /// The consumer group (group APIs, `rebalance`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The transactional id (transaction APIs, `fence`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactional_id: Option<String>,
    /// The error an `error` fault answers with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorName>,
    /// A `delay` fault's fixed part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// A `delay` fault's uniform random part, added to `delay_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<u64>,
    /// A `drop_connection` fault's allowance: matching request bytes let through before
    /// the drop (0: the first matching request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_bytes: Option<u64>,
    /// How many times it acts, then it is spent (unlimited if left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// How long it stays armed (forever if left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// A fault as listed by `GET /faults`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FaultView {
    /// Its id, for `DELETE /faults/<id>`.
    pub id: u64,
    /// How often it acted.
    pub injected: u64,
    /// Whether it can still act (not spent, not expired).
    pub armed: bool,
    /// What an immediate fault did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// What was asked.
    #[serde(flatten)]
    pub spec: FaultSpec,
}

/// APIs whose requests an `error` fault answers per partition.
const PARTITION_APIS: [ApiKey; 2] = [ApiKey::Produce, ApiKey::Fetch];

/// One armed fault.
struct ActiveFault {
    id: u64,
    kind: FaultKind,
    spec: FaultSpec,
    api: Option<ApiKey>,
    error: Option<ResponseError>,
    remaining: Option<AtomicU64>,
    expires: Option<Instant>,
    injected: AtomicU64,
    bytes_seen: AtomicU64,
}

impl ActiveFault {
    fn armed(&self, now: Instant) -> bool {
        self.expires.is_none_or(|at| now < at)
            && self
                .remaining
                .as_ref()
                .is_none_or(|r| r.load(Ordering::Acquire) > 0)
    }

    /// Takes one of its `count`; false when spent or expired.
    fn take(&self, now: Instant) -> bool {
        if self.expires.is_some_and(|at| now >= at) {
            return false;
        }
        if let Some(remaining) = &self.remaining {
            let took =
                remaining.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
            if took.is_err() {
                return false;
            }
        }
        self.injected.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("logbook_faults_injected_total", "kind" => self.kind.label())
            .increment(1);
        true
    }

    fn matches_client(&self, api: ApiKey, client_id: &str) -> bool {
        self.api.is_none_or(|a| a == api)
            && self
                .spec
                .client_id
                .as_deref()
                .is_none_or(|c| c == client_id)
    }

    fn matches_partition(&self, topic: &str, partition: i32) -> bool {
        self.spec.topic.as_deref().is_none_or(|t| t == topic)
            && self.spec.partition.is_none_or(|p| p == partition)
    }

    fn view(&self, now: Instant) -> FaultView {
        FaultView {
            id: self.id,
            injected: self.injected.load(Ordering::Relaxed),
            armed: self.armed(now),
            outcome: None,
            spec: self.spec.clone(),
        }
    }
}

/// The armed faults of one broker.
pub struct FaultInjector {
    faults: RwLock<Vec<Arc<ActiveFault>>>,
    /// Whether any fault is listed: the one check the request path makes when idle.
    any: AtomicBool,
    next_id: AtomicU64,
}

/// Who sent a request, for matching: its API and client id.
#[derive(Clone, Debug)]
pub struct FaultScope {
    /// The request's API.
    pub api: ApiKey,
    /// Its client id ("" when none).
    pub client_id: String,
}

impl FaultScope {
    /// The scope of `ctx`'s request.
    #[must_use]
    pub fn of(ctx: &RequestContext) -> Self {
        Self {
            api: ctx.api_key,
            client_id: ctx
                .client_id
                .as_ref()
                .map_or_else(String::new, |c| c.to_string()),
        }
    }
}

impl FaultInjector {
    /// An injector with no fault.
    #[must_use]
    pub fn new() -> Arc<Self> {
        tracing::warn!("fault injection is ENABLED (--fault-injection): requests may fail on purpose; never run a production broker with it");
        Arc::new(Self {
            faults: RwLock::new(Vec::new()),
            any: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
        })
    }

    /// The injector of `ctx`'s broker if it holds any fault.
    fn of(ctx: &RequestContext) -> Option<&Self> {
        ctx.broker
            .faults
            .as_deref()
            .filter(|f| f.any.load(Ordering::Acquire))
    }

    /// Arms a lasting fault (`error`, `delay`, `drop_connection`,
    /// `partition_unavailable`); immediate ones go through [`admin`].
    ///
    /// # Errors
    /// The spec is incomplete or names what cannot be served (the message says what).
    pub fn add(&self, spec: FaultSpec) -> Result<FaultView, String> {
        let active = self.validate(spec)?;
        let view = active.view(Instant::now());
        tracing::warn!(id = active.id, spec = %serde_json::to_string(&active.spec).unwrap_or_default(), "fault injection: fault armed");
        let mut faults = self.faults.write();
        faults.push(Arc::new(active));
        self.any.store(true, Ordering::Release);
        Self::publish(&faults);
        Ok(view)
    }

    /// A new id, for a fault armed or done now.
    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn validate(&self, spec: FaultSpec) -> Result<ActiveFault, String> {
        let kind = spec.kind.ok_or("a fault needs a kind: error, delay, drop_connection, partition_unavailable, rebalance or fence")?;
        let api = spec.api.as_deref().map(api_by_name).transpose()?;
        let error = spec.error.as_ref().map(error_by_name).transpose()?;
        match kind {
            FaultKind::Error => {
                if error.is_none() {
                    return Err("an error fault needs error (a Kafka error name such as NOT_LEADER_OR_FOLLOWER, or its code)".into());
                }
                let partitioned = spec.topic.is_some() || spec.partition.is_some();
                match api {
                    Some(api) if PARTITION_APIS.contains(&api) => {}
                    Some(api) if responses::TOP_LEVEL.contains(&api) && !partitioned => {}
                    Some(api) => {
                        return Err(format!(
                            "api {api:?}: error faults are served for {:?} (per partition, with topic/partition) and {:?}",
                            PARTITION_APIS,
                            responses::TOP_LEVEL
                        ))
                    }
                    None if partitioned => {}
                    None => return Err("an error fault needs api, or topic (for Produce and Fetch)".into()),
                }
            }
            FaultKind::Delay => {
                if spec.delay_ms.is_none() && spec.jitter_ms.is_none() {
                    return Err("a delay fault needs delay_ms (and may add jitter_ms)".into());
                }
            }
            FaultKind::DropConnection => {}
            FaultKind::PartitionUnavailable => {
                if spec.topic.is_none() {
                    return Err(
                        "a partition_unavailable fault needs topic (and may name partition)".into(),
                    );
                }
            }
            FaultKind::Rebalance | FaultKind::Fence => {
                return Err(format!("{} acts at once: POST it to /faults", kind.label()));
            }
        }
        if spec.partition.is_some() && spec.topic.is_none() {
            return Err("partition needs topic".into());
        }
        Ok(ActiveFault {
            id: self.next_id(),
            kind,
            api,
            error,
            remaining: spec.count.map(AtomicU64::new),
            expires: spec
                .duration_ms
                .and_then(|ms| Instant::now().checked_add(Duration::from_millis(ms))),
            injected: AtomicU64::new(0),
            bytes_seen: AtomicU64::new(0),
            spec,
        })
    }

    /// Every fault, armed or spent.
    #[must_use]
    pub fn list(&self) -> Vec<FaultView> {
        let now = Instant::now();
        self.faults.read().iter().map(|f| f.view(now)).collect()
    }

    /// Clears fault `id`, or every fault; how many were cleared.
    pub fn clear(&self, id: Option<u64>) -> usize {
        let mut faults = self.faults.write();
        let before = faults.len();
        faults.retain(|f| id.is_some_and(|id| f.id != id));
        let cleared = before - faults.len();
        self.any.store(!faults.is_empty(), Ordering::Release);
        Self::publish(&faults);
        tracing::warn!(?id, cleared, "fault injection: faults cleared");
        cleared
    }

    fn publish(faults: &[Arc<ActiveFault>]) {
        let now = Instant::now();
        #[allow(clippy::cast_precision_loss)]
        let armed = faults.iter().filter(|f| f.armed(now)).count() as f64;
        metrics::gauge!("logbook_faults_active").set(armed);
    }

    /// The first armed fault of `kind` that `matches`, with one of its count taken.
    fn take(
        &self,
        kind: FaultKind,
        matches: impl Fn(&ActiveFault) -> bool,
    ) -> Option<Arc<ActiveFault>> {
        let now = Instant::now();
        let faults = self.faults.read();
        faults
            .iter()
            .filter(|f| f.kind == kind && matches(f))
            .find(|f| f.take(now))
            .cloned()
    }

    /// The armed `partition_unavailable` fault covering the partition, if any.
    fn unavailable(&self, topic: &str, partition: i32) -> Option<Arc<ActiveFault>> {
        let now = Instant::now();
        self.faults
            .read()
            .iter()
            .find(|f| {
                f.kind == FaultKind::PartitionUnavailable
                    && f.armed(now)
                    && f.matches_partition(topic, partition)
            })
            .cloned()
    }

    /// The error a Produce or Fetch of `scope` gets for `topic`/`partition`, if a fault
    /// says so: NOT_LEADER_OR_FOLLOWER while the partition is unavailable, else an `error`
    /// fault's code.
    #[must_use]
    pub fn partition_error(
        &self,
        scope: &FaultScope,
        topic: &str,
        partition: i32,
    ) -> Option<ResponseError> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        if let Some(fault) = self.unavailable(topic, partition) {
            fault.injected.fetch_add(1, Ordering::Relaxed);
            metrics::counter!("logbook_faults_injected_total", "kind" => fault.kind.label())
                .increment(1);
            tracing::info!(id = fault.id, api = ?scope.api, client_id = %scope.client_id, topic, partition, "fault injection: partition unavailable, answered NOT_LEADER_OR_FOLLOWER");
            return Some(ResponseError::NotLeaderOrFollower);
        }
        let fault = self.take(FaultKind::Error, |f| {
            f.api.is_none_or(|a| PARTITION_APIS.contains(&a))
                && f.matches_client(scope.api, &scope.client_id)
                && f.matches_partition(topic, partition)
        })?;
        tracing::info!(id = fault.id, api = ?scope.api, client_id = %scope.client_id, topic, partition, error = ?fault.error, "fault injection: partition answered with an error");
        fault.error
    }
}

/// The broker's injector, if enabled and holding a fault: what Produce and Fetch ask.
#[must_use]
pub fn for_request(ctx: &RequestContext) -> Option<(&FaultInjector, FaultScope)> {
    FaultInjector::of(ctx).map(|f| (f, FaultScope::of(ctx)))
}

/// What the connection does with a request.
pub enum Dispatched {
    /// Answer it (later).
    Answer(ResponseFuture),
    /// Close the connection without an answer.
    Drop,
}

/// Runs a request as [`handlers::dispatch`] does, unless a fault says otherwise:
/// the connection's one door to the handlers.
pub fn dispatch(ctx: &RequestContext, body: RequestKind, request_bytes: usize) -> Dispatched {
    let Some(injector) = FaultInjector::of(ctx) else {
        return Dispatched::Answer(handlers::dispatch(ctx, body));
    };
    let scope = FaultScope::of(ctx);
    if let Some(fault) = injector.take(FaultKind::DropConnection, |f| {
        if !f.matches_client(scope.api, &scope.client_id) {
            return false;
        }
        let allowance = f.spec.after_bytes.unwrap_or(0);
        let seen = f
            .bytes_seen
            .fetch_add(request_bytes as u64, Ordering::AcqRel)
            .saturating_add(request_bytes as u64);
        seen > allowance
    }) {
        fault.bytes_seen.store(0, Ordering::Release);
        tracing::info!(id = fault.id, peer = %ctx.client_address, api = ?scope.api, client_id = %scope.client_id, "fault injection: connection dropped");
        return Dispatched::Drop;
    }
    if responses::TOP_LEVEL.contains(&ctx.api_key) {
        let keys = responses::Keys::of(&body);
        if let Some(fault) = injector.take(FaultKind::Error, |f| {
            f.api == Some(ctx.api_key)
                && f.matches_client(scope.api, &scope.client_id)
                && f.spec
                    .group
                    .as_deref()
                    .is_none_or(|g| keys.group.as_deref() == Some(g))
                && f.spec
                    .transactional_id
                    .as_deref()
                    .is_none_or(|t| keys.transactional_id.as_deref() == Some(t))
        }) {
            let error = fault.error.unwrap_or(ResponseError::UnknownServerError);
            if let Some(response) = responses::error_response(ctx.api_version, &body, error) {
                tracing::info!(id = fault.id, api = ?scope.api, client_id = %scope.client_id, ?error, "fault injection: request answered with an error");
                return Dispatched::Answer(handlers::ready(response));
            }
        }
    }
    let delay = injector
        .take(FaultKind::Delay, |f| f.matches_client(scope.api, &scope.client_id))
        .map(|fault| {
            let jitter = fault.spec.jitter_ms.map_or(0, |j| random_below(j.saturating_add(1)));
            let delay = Duration::from_millis(fault.spec.delay_ms.unwrap_or(0).saturating_add(jitter));
            tracing::info!(id = fault.id, api = ?scope.api, client_id = %scope.client_id, ?delay, "fault injection: response delayed");
            delay
        });
    let mut response = handlers::dispatch(ctx, body);
    if ctx.api_key == ApiKey::Metadata {
        let broker = Arc::clone(&ctx.broker);
        response = Box::pin(async move {
            let mut answer = response.await?;
            if let (ResponseKind::Metadata(metadata), Some(injector)) =
                (&mut answer.body, broker.faults.as_deref())
            {
                hide_unavailable_leaders(injector, metadata);
            }
            Some(answer)
        });
    }
    if let Some(delay) = delay {
        response = Box::pin(async move {
            tokio::time::sleep(delay).await;
            response.await
        });
    }
    Dispatched::Answer(response)
}

/// Metadata of a partition whose leader a fault took away: LEADER_NOT_AVAILABLE, no
/// leader, as Kafka answers while a partition is offline.
fn hide_unavailable_leaders(
    injector: &FaultInjector,
    metadata: &mut kafka_protocol::messages::MetadataResponse,
) {
    for topic in &mut metadata.topics {
        let Some(name) = topic.name.as_ref().map(|n| n.0.to_string()) else {
            continue;
        };
        for partition in &mut topic.partitions {
            if let Some(fault) = injector.unavailable(&name, partition.partition_index) {
                fault.injected.fetch_add(1, Ordering::Relaxed);
                metrics::counter!("logbook_faults_injected_total", "kind" => fault.kind.label())
                    .increment(1);
                partition.error_code = ResponseError::LeaderNotAvailable.code();
                partition.leader_id = kafka_protocol::messages::BrokerId(-1);
            }
        }
    }
}

/// A number in `0..bound` from a per-thread xorshift (jitter needs spread, not secrecy).
fn random_below(bound: u64) -> u64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0x9E37_79B9_7F4A_7C15, |d| d.as_nanos() as u64)
                | 1,
        );
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        x % bound.max(1)
    })
}

/// An API by Kafka's name (`Produce`, `FIND_COORDINATOR`, `findcoordinator`).
fn api_by_name(name: &str) -> Result<ApiKey, String> {
    let wanted = normalize(name);
    (0..=100)
        .filter_map(|k| ApiKey::try_from(k).ok())
        .find(|k| normalize(&format!("{k:?}")) == wanted)
        .ok_or_else(|| format!("api {name}: not a Kafka API name"))
}

/// A Kafka error by name (`NOT_LEADER_OR_FOLLOWER`) or code.
fn error_by_name(name: &ErrorName) -> Result<ResponseError, String> {
    match name {
        ErrorName::Code(code) => match ResponseError::try_from_code(*code) {
            Some(ResponseError::Unknown(_)) | None => {
                Err(format!("error {code}: not a Kafka error code"))
            }
            Some(e) => Ok(e),
        },
        ErrorName::Name(name) => {
            if let Ok(code) = name.parse::<i16>() {
                return error_by_name(&ErrorName::Code(code));
            }
            let wanted = normalize(name);
            (-1..=200)
                .filter_map(ResponseError::try_from_code)
                .filter(|e| !matches!(e, ResponseError::Unknown(_)))
                .find(|e| normalize(&e.to_string()) == wanted)
                .ok_or_else(|| format!("error {name}: not a Kafka error name"))
        }
    }
}

fn normalize(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests;
