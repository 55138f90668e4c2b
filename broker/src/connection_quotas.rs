//! Kafka's `ConnectionQuotas`, the per-address part: at most `max.connections.per.ip`
//! connections from one IP address. Kafka closes a connection over the limit as soon as it
//! is accepted, so one client (or attacker) cannot take every connection slot; the total
//! is bounded separately by `connections_max`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;

/// Live connections per client address.
pub struct ConnectionQuotas {
    per_ip_max: usize,
    counts: Mutex<HashMap<IpAddr, usize>>,
}

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
        })
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
}
