//! Kafka's `ConnectionQuotas`, the per-address part: at most `max.connections.per.ip`
//! connections from one IP address. Kafka closes a connection over the limit as soon as it
//! is accepted, so one client (or attacker) cannot take every connection slot; the total
//! is bounded separately by `connections_max`.
//!
//! And KIP-612's per-IP connection creation rate (`connection_creation_rate` of an `ip`
//! quota entity, set with AlterClientQuotas): a connection that takes its address over
//! the rate is closed at once, and so is every new one from that address until the
//! throttle time has passed.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;

/// Live connections per client address.
pub struct ConnectionQuotas {
    per_ip_max: usize,
    counts: Mutex<HashMap<IpAddr, usize>>,
    /// Connection creation rates by address, and until when each is refused.
    rates: Mutex<HashMap<IpAddr, (crate::client_quota_manager::Rate, u64)>>,
}

/// Addresses whose creation rate is kept before idle ones are dropped.
const RATES_MAX: usize = 10_000;

/// One counted connection; dropping it gives its address's slot back.
pub struct ConnectionSlot {
    quotas: Arc<ConnectionQuotas>,
    ip: IpAddr,
}

impl ConnectionQuotas {
    /// Quotas allowing `per_ip_max` connections from each address.
    #[must_use]
    pub fn new(per_ip_max: usize) -> Arc<Self> {
        Arc::new(Self {
            per_ip_max,
            counts: Mutex::new(HashMap::new()),
            rates: Mutex::new(HashMap::new()),
        })
    }

    /// Counts a new connection from `ip` against its `connection_creation_rate` of `limit`
    /// per second at `now_ms`; `Err` with the throttle time left when it must be closed.
    ///
    /// # Errors
    /// The address is over its rate (or still throttled for having been).
    pub fn admit_rate(&self, ip: IpAddr, limit: f64, now_ms: u64) -> Result<(), u64> {
        let mut rates = self.rates.lock();
        if rates.len() >= RATES_MAX && !rates.contains_key(&ip) {
            rates.retain(|_, (rate, until)| *until > now_ms || !rate.idle(now_ms));
        }
        let (rate, until) = rates.entry(ip).or_default();
        if *until > now_ms {
            return Err(*until - now_ms);
        }
        rate.record(1.0, now_ms);
        let throttle = crate::client_quota_manager::throttle_ms(rate, limit, now_ms);
        if throttle > 0 {
            let throttle = u64::try_from(throttle).unwrap_or(0);
            *until = now_ms + throttle;
            return Err(throttle);
        }
        Ok(())
    }

    /// Counts a new connection from `ip`, or `None` if that address is at its limit.
    #[must_use]
    pub fn try_open(self: &Arc<Self>, ip: IpAddr) -> Option<ConnectionSlot> {
        let mut counts = self.counts.lock();
        let count = counts.entry(ip).or_insert(0);
        if *count >= self.per_ip_max {
            return None;
        }
        *count += 1;
        Some(ConnectionSlot {
            quotas: Arc::clone(self),
            ip,
        })
    }

    /// Live connections from `ip`.
    #[must_use]
    pub fn count(&self, ip: IpAddr) -> usize {
        self.counts.lock().get(&ip).copied().unwrap_or(0)
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut counts = self.quotas.counts.lock();
        if let Some(count) = counts.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The limit is per address, and a closed connection frees its slot.
    #[test]
    fn limits_each_address_and_frees_on_drop() {
        let quotas = ConnectionQuotas::new(2);
        let a: IpAddr = "10.0.0.1".parse().expect("ip");
        let b: IpAddr = "10.0.0.2".parse().expect("ip");
        let first = quotas.try_open(a).expect("first");
        let _second = quotas.try_open(a).expect("second");
        assert!(quotas.try_open(a).is_none(), "third from the same address");
        let _other = quotas.try_open(b).expect("another address is not limited");
        drop(first);
        assert_eq!(quotas.count(a), 1);
        let _again = quotas.try_open(a).expect("a freed slot is reusable");
        assert_eq!(quotas.count(a), 2);
    }

    #[test]
    fn connection_creation_rate_closes_the_excess_and_throttles_the_address() {
        let quotas = ConnectionQuotas::new(100);
        let ip: IpAddr = "10.0.0.1".parse().expect("ip");
        let other: IpAddr = "10.0.0.2".parse().expect("ip");
        let t0 = 5_000_000;
        // 2 per second over Kafka's ten-second window: 20 go through, the 21st does not.
        for _ in 0..20 {
            assert_eq!(quotas.admit_rate(ip, 2.0, t0), Ok(()));
        }
        let throttle = quotas.admit_rate(ip, 2.0, t0).expect_err("over the rate");
        assert_eq!(throttle, 500);
        assert_eq!(quotas.admit_rate(ip, 2.0, t0 + 100), Err(400));
        assert_eq!(quotas.admit_rate(other, 2.0, t0 + 100), Ok(()));
    }
}
