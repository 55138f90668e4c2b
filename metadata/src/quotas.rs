//! Client quotas in the metadata log (KIP-546, Kafka's `ClientQuotaImage`): a value per
//! quota key for an entity, an entity being a user, a client id, both, or an IP, each
//! named or the default (`None`, Kafka's `<default>`).
//!
//! [`ClientQuotas::resolve`] finds the quota that applies to a connection's user and
//! client id in Kafka's order of precedence (`ClientQuotaManager`'s default callback):
//! user and client id, user with the default client id, user, the default user with the
//! client id, the default user with the default client id, the default user, the client id,
//! the default client id.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Entity type of a user (the SASL or TLS principal's name).
pub const USER: &str = "user";
/// Entity type of a client id.
pub const CLIENT_ID: &str = "client-id";
/// Entity type of a client IP address.
pub const IP: &str = "ip";

/// Produce bytes per second (a whole number).
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// Fetch bytes per second (a whole number).
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
/// Share of request handling time, in percent.
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
/// Partition mutations per second (CreateTopics, CreatePartitions, DeleteTopics).
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";
/// New connections per second from one IP (a whole number).
pub const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// An entity: entity type to name (`None` is the type's default), sorted by type.
pub type QuotaEntity = BTreeMap<String, Option<String>>;

/// A quota value. Kafka's are doubles; the controller only stores values above zero, so
/// NaN never occurs and equality by value is total.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(transparent)]
pub struct QuotaValue(pub f64);

impl Eq for QuotaValue {}

/// One entity component of a [`ClientQuotaRecord`](crate::ClientQuotaRecord).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EntityData {
    /// `user`, `client-id` or `ip`.
    pub entity_type: String,
    /// The name; `None` for the default entity of the type.
    pub entity_name: Option<String>,
}

/// What kind of value a quota key takes, and for which entities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaKeyType {
    /// A whole number (Kafka's LONG).
    Long,
    /// A whole number up to `i32::MAX` (Kafka's INT).
    Int,
    /// Any positive number (Kafka's DOUBLE).
    Double,
}

/// The keys of user and client-id entities (Kafka's `QuotaConfig.userAndClientQuotaConfigs`).
pub const USER_AND_CLIENT_KEYS: &[(&str, QuotaKeyType)] = &[
    (PRODUCER_BYTE_RATE, QuotaKeyType::Long),
    (CONSUMER_BYTE_RATE, QuotaKeyType::Long),
    (REQUEST_PERCENTAGE, QuotaKeyType::Double),
    (CONTROLLER_MUTATION_RATE, QuotaKeyType::Double),
];

/// The keys of IP entities (Kafka's `QuotaConfig.ipConfigs`).
pub const IP_KEYS: &[(&str, QuotaKeyType)] = &[(CONNECTION_CREATION_RATE, QuotaKeyType::Int)];

/// Every entity's quotas.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientQuotas {
    entities: BTreeMap<QuotaEntity, BTreeMap<String, QuotaValue>>,
}

impl ClientQuotas {
    /// Applies one record: sets `key` of the entity, or removes it (and the entity once it
    /// has no key left).
    pub fn apply(&mut self, record: &crate::ClientQuotaRecord) {
        let entity = entity_of(&record.entity);
        if record.remove {
            if let Some(quotas) = self.entities.get_mut(&entity) {
                quotas.remove(&record.key);
                if quotas.is_empty() {
                    self.entities.remove(&entity);
                }
            }
        } else {
            self.entities
                .entry(entity)
                .or_default()
                .insert(record.key.clone(), record.value);
        }
    }

    /// The quotas of exactly `entity`.
    #[must_use]
    pub fn get(&self, entity: &QuotaEntity) -> Option<&BTreeMap<String, QuotaValue>> {
        self.entities.get(entity)
    }

    /// Every entity with its quotas, in entity order.
    pub fn iter(&self) -> impl Iterator<Item = (&QuotaEntity, &BTreeMap<String, QuotaValue>)> {
        self.entities.iter()
    }

    /// Whether no quota is set at all (the broker then skips quota accounting).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// The `key` quota that applies to `user` with `client_id`, in Kafka's precedence
    /// (see the module docs); `None` when no entity sets it.
    #[must_use]
    pub fn resolve(&self, user: &str, client_id: &str, key: &str) -> Option<f64> {
        self.resolve_entity(user, client_id, key).map(|(v, _)| v)
    }

    /// As [`ClientQuotas::resolve`], with the entity the quota comes from.
    #[must_use]
    pub fn resolve_entity(
        &self,
        user: &str,
        client_id: &str,
        key: &str,
    ) -> Option<(f64, &QuotaEntity)> {
        let named = |s: &str| Some(s.to_string());
        let candidates: [&[(&str, Option<String>)]; 8] = [
            &[(USER, named(user)), (CLIENT_ID, named(client_id))],
            &[(USER, named(user)), (CLIENT_ID, None)],
            &[(USER, named(user))],
            &[(USER, None), (CLIENT_ID, named(client_id))],
            &[(USER, None), (CLIENT_ID, None)],
            &[(USER, None)],
            &[(CLIENT_ID, named(client_id))],
            &[(CLIENT_ID, None)],
        ];
        candidates.iter().find_map(|parts| {
            let entity: QuotaEntity = parts
                .iter()
                .map(|(t, n)| ((*t).to_string(), n.clone()))
                .collect();
            let (found, quotas) = self.entities.get_key_value(&entity)?;
            quotas.get(key).map(|v| (v.0, found))
        })
    }

    /// The `connection_creation_rate` for connections from `ip`: its own, else the
    /// default IP's.
    #[must_use]
    pub fn ip_connection_rate(&self, ip: &str) -> Option<f64> {
        [Some(ip.to_string()), None].into_iter().find_map(|name| {
            let entity: QuotaEntity = [(IP.to_string(), name)].into_iter().collect();
            self.entities
                .get(&entity)?
                .get(CONNECTION_CREATION_RATE)
                .map(|v| v.0)
        })
    }
}

/// The entity a record's components name.
#[must_use]
pub fn entity_of(parts: &[EntityData]) -> QuotaEntity {
    parts
        .iter()
        .map(|p| (p.entity_type.clone(), p.entity_name.clone()))
        .collect()
}

/// Kafka's `ClientQuotaEntity.toString` form, for messages: `ClientQuotaEntity(entries={user=alice})`.
#[must_use]
pub fn entity_display(entity: &QuotaEntity) -> String {
    let entries: Vec<String> = entity
        .iter()
        .map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("null")))
        .collect();
    format!("ClientQuotaEntity(entries={{{}}})", entries.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ClientQuotaRecord;

    fn set(parts: &[(&str, Option<&str>)], key: &str, value: f64) -> ClientQuotaRecord {
        ClientQuotaRecord {
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
        }
    }

    #[test]
    fn precedence_is_kafkas() {
        let mut q = ClientQuotas::default();
        q.apply(&set(&[(CLIENT_ID, None)], PRODUCER_BYTE_RATE, 8.0));
        assert_eq!(q.resolve("alice", "app", PRODUCER_BYTE_RATE), Some(8.0));
        q.apply(&set(&[(CLIENT_ID, Some("app"))], PRODUCER_BYTE_RATE, 7.0));
        assert_eq!(q.resolve("alice", "app", PRODUCER_BYTE_RATE), Some(7.0));
        q.apply(&set(&[(USER, None)], PRODUCER_BYTE_RATE, 6.0));
        assert_eq!(q.resolve("alice", "app", PRODUCER_BYTE_RATE), Some(6.0));
        q.apply(&set(&[(USER, Some("alice"))], PRODUCER_BYTE_RATE, 3.0));
        assert_eq!(q.resolve("alice", "app", PRODUCER_BYTE_RATE), Some(3.0));
        assert_eq!(q.resolve("bob", "app", PRODUCER_BYTE_RATE), Some(6.0));
        q.apply(&set(
            &[(USER, Some("alice")), (CLIENT_ID, Some("app"))],
            PRODUCER_BYTE_RATE,
            1.0,
        ));
        assert_eq!(q.resolve("alice", "app", PRODUCER_BYTE_RATE), Some(1.0));
        assert_eq!(q.resolve("alice", "other", PRODUCER_BYTE_RATE), Some(3.0));
        assert_eq!(q.resolve("alice", "app", CONSUMER_BYTE_RATE), None);
        let mut remove = set(&[(USER, Some("alice"))], PRODUCER_BYTE_RATE, 0.0);
        remove.remove = true;
        q.apply(&remove);
        assert_eq!(q.resolve("alice", "other", PRODUCER_BYTE_RATE), Some(6.0));
        q.apply(&set(&[(IP, None)], CONNECTION_CREATION_RATE, 5.0));
        assert_eq!(q.ip_connection_rate("10.0.0.1"), Some(5.0));
        assert_eq!(
            entity_display(&entity_of(
                &set(&[(USER, Some("a")), (CLIENT_ID, None)], "k", 1.0).entity
            )),
            "ClientQuotaEntity(entries={client-id=null, user=a})"
        );
    }
}
