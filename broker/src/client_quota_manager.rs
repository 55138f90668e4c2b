//! Byte-rate quotas (Kafka's `ClientQuotaManager`): each produce request's bytes and each
//! fetch response's bytes are recorded against the quota that applies to the request's
//! user and client id (`producer_byte_rate`, `consumer_byte_rate`, resolved from the
//! metadata image in Kafka's precedence), and a request that takes the rate over it is
//! answered with the time the client must hold off (`throttle_time_ms`) to bring the rate
//! back to the quota.
//!
//! The rate is Kafka's: a sum over `quota.window.num` (11) samples of
//! `quota.window.size.seconds` (1 s), divided by the time they span, counted as at least
//! ten full samples (so a burst right after start is not read as a huge rate). The
//! throttle time is `(rate - quota) / quota × window`. As in Kafka, a default entity
//! (`--entity-default`) gives each user or client id its own quota, a named one is shared
//! by everything it names.
//!
//! What the broker does with the throttle time (KIP-219): a produce is appended and
//! answered at once with `throttle_time_ms`, and its connection reads no further request
//! until the time has passed (the channel is muted); a throttled fetch is answered with
//! no records and its bytes are not counted, and a fetch never asks for more than the
//! quota allows in one window (`max_bytes` capped), so a consumer under a small quota still
//! advances.
//!
//! Nothing is recorded while no quota is set at all (one lock-free look at the image per
//! request).

use std::collections::HashMap;

use logbook_metadata::quotas::{self, ClientQuotas};
use parking_lot::Mutex;

/// Kafka's `quota.window.num` default.
const SAMPLES: u64 = 11;
/// Kafka's `quota.window.size.seconds` default, in ms.
const SAMPLE_MS: u64 = 1000;
/// Sensors kept before idle ones are dropped (Kafka expires them after an hour idle).
const SENSORS_MAX: usize = 10_000;

/// Which quota a manager enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaType {
    /// `producer_byte_rate`.
    Produce,
    /// `consumer_byte_rate`.
    Fetch,
    /// `request_percentage`: the time spent on the client's requests, in percent of one
    /// thread (Kafka's `ClientRequestQuotaManager`; see `client_request_quota`).
    Request,
}

impl QuotaType {
    fn key(self) -> &'static str {
        match self {
            QuotaType::Produce => quotas::PRODUCER_BYTE_RATE,
            QuotaType::Fetch => quotas::CONSUMER_BYTE_RATE,
            QuotaType::Request => quotas::REQUEST_PERCENTAGE,
        }
    }
}

/// Whose rate a sample counts toward: the user and/or client id the applying quota names
/// (the connection's own for a default entity).
type SensorKey = (Option<String>, Option<String>);

/// A rate over [`SAMPLES`] samples of [`SAMPLE_MS`] (Kafka's `Rate` with the quota
/// window settings); also the per-IP connection creation rate.
#[derive(Debug, Default)]
pub(crate) struct Rate {
    /// (start ms, sum) of each sample, oldest first. A sample starts at the first value
    /// recorded after the previous one ended, as Kafka's `SampledStat`.
    samples: Vec<(u64, f64)>,
}

impl Rate {
    /// Whether a sample started at `start` has aged out at `now_ms`.
    fn expired(start: u64, now_ms: u64) -> bool {
        now_ms.saturating_sub(start) >= SAMPLES * SAMPLE_MS
    }

    pub(crate) fn record(&mut self, value: f64, now_ms: u64) {
        self.samples
            .retain(|(start, _)| !Self::expired(*start, now_ms));
        match self.samples.last_mut() {
            Some((start, sum)) if now_ms.saturating_sub(*start) < SAMPLE_MS => *sum += value,
            _ => {
                if self.samples.len() as u64 >= SAMPLES {
                    self.samples.remove(0);
                }
                self.samples.push((now_ms, value));
            }
        }
    }

    /// Kafka's `Rate.measure` (per second) and the window it divides by (ms).
    pub(crate) fn measure(&self, now_ms: u64) -> (f64, f64) {
        let live = self
            .samples
            .iter()
            .filter(|(start, _)| !Self::expired(*start, now_ms));
        let total: f64 = live.clone().map(|(_, v)| v).sum();
        let oldest = live.map(|(start, _)| *start).min().unwrap_or(now_ms);
        let mut elapsed = now_ms.saturating_sub(oldest);
        let full = elapsed / SAMPLE_MS;
        if full < SAMPLES - 1 {
            elapsed += (SAMPLES - 1 - full) * SAMPLE_MS;
        }
        #[allow(clippy::cast_precision_loss)]
        let window_ms = elapsed as f64;
        (total / (window_ms / 1000.0), window_ms)
    }

    pub(crate) fn idle(&self, now_ms: u64) -> bool {
        self.samples
            .iter()
            .all(|(start, _)| Self::expired(*start, now_ms))
    }
}

/// The quota that applies to one request, found before its bytes are known.
pub struct Applied {
    bound: f64,
    key: SensorKey,
}

/// One quota type's rates.
pub struct ClientQuotaManager {
    quota_type: QuotaType,
    sensors: Mutex<HashMap<SensorKey, Rate>>,
}

impl ClientQuotaManager {
    /// A manager of `quota_type` with no rates yet.
    #[must_use]
    pub fn new(quota_type: QuotaType) -> Self {
        ClientQuotaManager {
            quota_type,
            sensors: Mutex::new(HashMap::new()),
        }
    }

    /// The quota that applies to `user` with `client_id` under `quotas`, if any.
    #[must_use]
    pub fn applied(&self, quotas: &ClientQuotas, user: &str, client_id: &str) -> Option<Applied> {
        let (bound, entity) = quotas.resolve_entity(user, client_id, self.quota_type.key())?;
        let key = (
            entity.contains_key(quotas::USER).then(|| user.to_string()),
            entity
                .contains_key(quotas::CLIENT_ID)
                .then(|| client_id.to_string()),
        );
        Some(Applied { bound, key })
    }

    /// The most bytes one request may carry without being throttled for certain (Kafka's
    /// `getMaxValueInQuotaWindow`: the quota over the window's full samples).
    #[must_use]
    pub fn max_value_in_window(applied: &Applied) -> f64 {
        #[allow(clippy::cast_precision_loss)]
        let full = ((SAMPLES - 1) * SAMPLE_MS) as f64 / 1000.0;
        applied.bound * full
    }

    /// Records `value` bytes at `now_ms`; the throttle time in ms (0 within the quota).
    pub fn record(&self, applied: &Applied, value: f64, now_ms: u64) -> i32 {
        let mut sensors = self.sensors.lock();
        if sensors.len() >= SENSORS_MAX && !sensors.contains_key(&applied.key) {
            sensors.retain(|_, rate| !rate.idle(now_ms));
        }
        let rate = sensors.entry(applied.key.clone()).or_default();
        rate.record(value, now_ms);
        let throttle = throttle_ms(rate, applied.bound, now_ms);
        if self.quota_type == QuotaType::Request {
            // Kafka's `boundedThrottleTime`: a request quota never throttles for more than
            // one sample window, however far over it the client is.
            #[allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)]
            return throttle.min(SAMPLE_MS as i32);
        }
        throttle
    }

    /// Takes back `value` bytes recorded at `now_ms` (a throttled fetch sends none).
    pub fn unrecord(&self, applied: &Applied, value: f64, now_ms: u64) {
        if let Some(rate) = self.sensors.lock().get_mut(&applied.key) {
            rate.record(-value, now_ms);
        }
    }
}

/// Kafka's `QuotaUtils.throttleTime`: how long until `rate` is back at `bound` (0 if it is
/// not over it).
pub(crate) fn throttle_ms(rate: &Rate, bound: f64, now_ms: u64) -> i32 {
    let (observed, window_ms) = rate.measure(now_ms);
    if observed <= bound {
        return 0;
    }
    let throttle = (observed - bound) / bound * window_ms;
    #[allow(clippy::cast_possible_truncation)]
    let throttle = throttle.round().min(f64::from(i32::MAX)) as i32;
    throttle
}

/// The broker's quota managers, and the look at the image that says whether any quota is
/// set.
pub struct QuotaManagers {
    /// `producer_byte_rate`.
    pub produce: ClientQuotaManager,
    /// `consumer_byte_rate`.
    pub fetch: ClientQuotaManager,
    /// `request_percentage`.
    pub request: ClientQuotaManager,
}

impl Default for QuotaManagers {
    fn default() -> Self {
        QuotaManagers {
            produce: ClientQuotaManager::new(QuotaType::Produce),
            fetch: ClientQuotaManager::new(QuotaType::Fetch),
            request: ClientQuotaManager::new(QuotaType::Request),
        }
    }
}

/// Milliseconds since the epoch, for the rates.
#[must_use]
pub fn now_ms() -> u64 {
    u64::try_from(logbook_common::now_ms()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use logbook_metadata::quotas::{EntityData, QuotaValue};
    use logbook_metadata::ClientQuotaRecord;

    fn quotas(parts: &[(&str, Option<&str>)], value: f64) -> ClientQuotas {
        quotas_of(quotas::PRODUCER_BYTE_RATE, parts, value)
    }

    fn quotas_of(key: &str, parts: &[(&str, Option<&str>)], value: f64) -> ClientQuotas {
        let mut q = ClientQuotas::default();
        q.apply(&ClientQuotaRecord {
            entity: parts
                .iter()
                .map(|(t, n)| EntityData {
                    entity_type: (*t).to_string(),
                    entity_name: n.map(str::to_string),
                })
                .collect(),
            key: key.to_string(),
            value: QuotaValue(value),
            remove: false,
        });
        q
    }

    #[test]
    fn throttle_time_is_kafkas() {
        let manager = ClientQuotaManager::new(QuotaType::Produce);
        let q = quotas(&[("user", Some("alice"))], 1000.0);
        let applied = manager.applied(&q, "alice", "app").expect("a quota");
        let t0 = 1_000_000_000;
        // 10 s window at least: 10,000 bytes is exactly the quota.
        assert_eq!(manager.record(&applied, 10_000.0, t0), 0);
        // 20,000 over 10.01 s (ten full samples and 10 ms) is 1,998/s:
        // (1998 - 1000) / 1000 x 10,010 ms.
        assert_eq!(manager.record(&applied, 10_000.0, t0 + 10), 9_990);
        manager.unrecord(&applied, 10_000.0, t0 + 10);
        assert_eq!(manager.record(&applied, 0.0, t0 + 20), 0);
        // Eleven seconds later the samples have aged out.
        assert_eq!(manager.record(&applied, 5_000.0, t0 + 11_000), 0);
        assert!(manager.applied(&q, "bob", "app").is_none());
        assert_eq!(ClientQuotaManager::max_value_in_window(&applied), 10_000.0);
    }

    #[test]
    fn a_default_quota_is_per_client_a_named_one_shared() {
        let manager = ClientQuotaManager::new(QuotaType::Produce);
        let t0 = 2_000_000_000;
        let q = quotas(&[("client-id", None)], 1000.0);
        let a = manager.applied(&q, "ANONYMOUS", "a").expect("a quota");
        let b = manager.applied(&q, "ANONYMOUS", "b").expect("a quota");
        assert_eq!(manager.record(&a, 10_000.0, t0), 0);
        assert_eq!(manager.record(&b, 10_000.0, t0), 0);
        let q = quotas(&[("user", Some("alice"))], 1000.0);
        let a = manager.applied(&q, "alice", "a").expect("a quota");
        let b = manager.applied(&q, "alice", "b").expect("a quota");
        assert_eq!(manager.record(&a, 10_000.0, t0), 0);
        assert!(manager.record(&b, 10_000.0, t0) > 0);
    }

    #[test]
    fn a_request_quota_throttles_for_one_window_at_most() {
        let manager = ClientQuotaManager::new(QuotaType::Request);
        let q = quotas_of(
            quotas::REQUEST_PERCENTAGE,
            &[("client-id", Some("busy"))],
            10.0,
        );
        let applied = manager.applied(&q, "ANONYMOUS", "busy").expect("a quota");
        assert!(manager.applied(&q, "ANONYMOUS", "idle").is_none());
        let t0 = 3_000_000_000;
        // 10 % over the ten-second window is 100 percent-seconds: within the quota.
        assert_eq!(manager.record(&applied, 100.0, t0), 0);
        // Twice the quota would be 10 s of throttle by the byte-rate formula; Kafka's
        // boundedThrottleTime holds a request quota to one sample window.
        assert_eq!(manager.record(&applied, 100.0, t0 + 1), 1000);
    }
}
