//! `RequestMetrics` (Kafka's `RequestMetrics` per request type) and `ConnectionMetrics`.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, ResponseKind};
use metrics::{counter, histogram, Counter, Histogram};

/// The handles of one API key, resolved once.
struct ApiHandles {
    name: &'static str,
    requests: Counter,
    queue: Histogram,
    processing: Histogram,
    size: Histogram,
}

/// Per-API request metrics: one set of handles per API key, indexed by the key and
/// resolved on the key's first request (so only APIs in use have series).
pub struct RequestMetrics {
    by_key: Vec<OnceLock<ApiHandles>>,
}

/// The highest API key number looked for when resolving handles.
const API_KEY_MAX: i16 = 100;

impl RequestMetrics {
    /// The process's request metrics (no-ops unless the recorder was installed first).
    pub fn global() -> &'static RequestMetrics {
        static GLOBAL: OnceLock<RequestMetrics> = OnceLock::new();
        GLOBAL.get_or_init(|| RequestMetrics {
            by_key: (0..=API_KEY_MAX).map(|_| OnceLock::new()).collect(),
        })
    }

    fn api(&self, key: ApiKey) -> Option<&ApiHandles> {
        let slot = self.by_key.get(usize::try_from(key as i16).ok()?)?;
        Some(slot.get_or_init(|| ApiHandles::new(key)))
    }

    /// A request of `bytes` arrived.
    pub fn received(&self, key: ApiKey, bytes: usize) {
        if !super::enabled() {
            return;
        }
        if let Some(api) = self.api(key) {
            api.size.record(bytes as f64);
        }
    }

    /// A request's response is ready: it waited `queue` before its processing started and
    /// took `processing`; error codes other than NONE in `body` are counted.
    pub fn answered(
        &self,
        key: ApiKey,
        queue: Duration,
        processing: Duration,
        body: Option<&ResponseKind>,
    ) {
        if !super::enabled() {
            return;
        }
        let Some(api) = self.api(key) else {
            return;
        };
        api.requests.increment(1);
        api.queue.record(queue.as_secs_f64());
        api.processing.record(processing.as_secs_f64());
        if let Some(body) = body {
            super::collector::response_errors(body, &mut |code| {
                if code != 0 {
                    counter!(
                        "logbook_request_errors_total",
                        "api" => api.name,
                        "error" => crate::errors::error_name(code)
                    )
                    .increment(1);
                }
            });
        }
    }
}

impl ApiHandles {
    fn new(key: ApiKey) -> ApiHandles {
        let name = api_name(key);
        ApiHandles {
            name,
            requests: counter!("logbook_requests_total", "api" => name),
            queue: histogram!("logbook_request_queue_seconds", "api" => name),
            processing: histogram!("logbook_request_processing_seconds", "api" => name),
            size: histogram!("logbook_request_size_bytes", "api" => name),
        }
    }
}

/// Kafka's name of an API ("Produce", "Fetch", "ApiVersions", …), as in its request
/// metrics: the key's variant name less the `Key` suffix kafka-protocol gives some.
fn api_name(key: ApiKey) -> &'static str {
    static NAMES: OnceLock<Vec<(i16, &'static str)>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        (0..=API_KEY_MAX)
            .filter_map(|k| ApiKey::try_from(k).ok().map(|key| (k, key)))
            .map(|(k, key)| {
                let name = format!("{key:?}");
                let name = name.strip_suffix("Key").map_or(name.clone(), str::to_owned);
                (k, &*Box::leak(name.into_boxed_str()))
            })
            .collect()
    });
    names
        .iter()
        .find(|(k, _)| *k == key as i16)
        .map_or("Unknown", |(_, name)| name)
}

/// Client connections: accepted and rejected counters, and the open count read at scrape
/// time.
pub struct ConnectionMetrics {
    active: AtomicI64,
    accepted: Counter,
    rejected_per_ip: Counter,
    failed_authentication: Counter,
}

impl ConnectionMetrics {
    /// The process's connection metrics.
    pub fn global() -> &'static ConnectionMetrics {
        static GLOBAL: OnceLock<ConnectionMetrics> = OnceLock::new();
        GLOBAL.get_or_init(|| ConnectionMetrics {
            active: AtomicI64::new(0),
            accepted: counter!("logbook_connections_accepted_total"),
            rejected_per_ip: counter!(
                "logbook_connections_rejected_total",
                "reason" => "max_connections_per_ip"
            ),
            // Kafka's `failed-authentication-total`.
            failed_authentication: counter!("logbook_failed_authentication_total"),
        })
    }

    /// A connection was accepted and will be served.
    pub fn opened(&self) {
        self.accepted.increment(1);
        self.active.fetch_add(1, Ordering::Relaxed);
    }

    /// A served connection closed.
    pub fn closed(&self) {
        self.active.fetch_sub(1, Ordering::Relaxed);
    }

    /// A connection was closed at once: its address has `max.connections.per.ip` open.
    pub fn rejected_per_ip(&self) {
        self.rejected_per_ip.increment(1);
    }

    /// A client failed SASL authentication.
    pub fn failed_authentication(&self) {
        self.failed_authentication.increment(1);
    }

    /// Connections open now.
    pub fn active(&self) -> i64 {
        self.active.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_names() {
        assert_eq!(api_name(ApiKey::Produce), "Produce");
        assert_eq!(api_name(ApiKey::ApiVersions), "ApiVersions");
        assert_eq!(crate::errors::error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(crate::errors::error_name(19), "NOT_ENOUGH_REPLICAS");
        assert_eq!(crate::errors::error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(crate::errors::error_name(9999), "9999");
    }
}
