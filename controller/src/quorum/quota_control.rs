//! Client quotas in the metadata log (Kafka's `ClientQuotaControlManager`):
//! AlterClientQuotas checks each entity and value with Kafka's rules and messages and
//! writes a `ClientQuotaRecord` for every key that changes (a removal only for a key that
//! is set). One request is one batch.

use futures::StreamExt;
use logbook_metadata::quotas::{
    entity_display, entity_of, EntityData, QuotaKeyType, QuotaValue, CLIENT_ID, IP, IP_KEYS, USER,
    USER_AND_CLIENT_KEYS,
};
use logbook_metadata::{ClientQuotaRecord, MetadataImage, MetadataRecord};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::time::Duration;

use super::{QuorumController, QuorumError};

/// One entity's changes: each key set to a value, or removed (`None`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaAlteration {
    /// The entity's components, as the request gave them.
    pub entity: Vec<EntityData>,
    /// The keys, in request order.
    pub ops: Vec<(String, Option<QuotaValue>)>,
}

impl QuorumController {
    /// AlterClientQuotas: each alteration's result, in request order; with
    /// `validate_only` nothing is written.
    ///
    /// # Errors
    /// `NotController`, `Raft` for the request; per alteration `InvalidRequest` with
    /// Kafka's message.
    pub async fn alter_client_quotas(
        &self,
        alterations: Vec<QuotaAlteration>,
        validate_only: bool,
    ) -> Result<Vec<Result<(), QuorumError>>, QuorumError> {
        // Host names are looked up here, before the controller's serialized `run`: a slow
        // resolver must not hold up every other metadata change (Kafka resolves them on
        // its controller thread).
        let unresolved = unresolved_hosts(&alterations).await;
        let _active = self.activate().await?;
        let (results, _) = self
            .run(|image| {
                let (records, results) = quota_records(image, &alterations, &unresolved);
                Ok((if validate_only { Vec::new() } else { records }, results))
            })
            .await?;
        Ok(results)
    }
}

type Altered = (Vec<MetadataRecord>, Vec<Result<(), QuorumError>>);

/// How long one IP entity's host name may take to resolve before it counts as
/// unresolvable.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// How many IP entities' host names are looked up at once: a request may name thousands,
/// and each lookup holds a blocking-pool thread.
const RESOLVE_CONCURRENCY: usize = 16;

/// The IP entities' names that are neither an address nor a host name that resolves
/// (Kafka's `InetAddress.getByName`), looked up [`RESOLVE_CONCURRENCY`] at a time, each
/// within [`RESOLVE_TIMEOUT`].
async fn unresolved_hosts(alterations: &[QuotaAlteration]) -> HashSet<String> {
    let names: HashSet<String> = alterations
        .iter()
        .flat_map(|a| &a.entity)
        .filter(|part| part.entity_type == IP)
        .filter_map(|part| part.entity_name.clone())
        .filter(|name| !name.is_empty() && name.parse::<std::net::IpAddr>().is_err())
        .collect();
    let results: Vec<(String, bool)> = futures::stream::iter(names)
        .map(|name| async move {
            let found = resolves(&name).await;
            (name, found)
        })
        .buffer_unordered(RESOLVE_CONCURRENCY)
        .collect()
        .await;
    results
        .into_iter()
        .filter_map(|(name, found)| (!found).then_some(name))
        .collect()
}

/// Whether `name` resolves to an address within [`RESOLVE_TIMEOUT`].
async fn resolves(name: &str) -> bool {
    tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((name, 0)))
        .await
        .is_ok_and(|r| r.is_ok_and(|mut addrs| addrs.next().is_some()))
}

fn quota_records(
    image: &MetadataImage,
    alterations: &[QuotaAlteration],
    unresolved: &HashSet<String>,
) -> Altered {
    let mut records = Vec::new();
    let mut seen = Vec::new();
    let results = alterations
        .iter()
        .map(|alteration| {
            let entity = entity_of(&alteration.entity);
            let mut keys: Vec<&str> = Vec::new();
            let duplicate_key = alteration.ops.iter().any(|(key, _)| {
                let dup = keys.contains(&key.as_str());
                keys.push(key);
                dup
            });
            if duplicate_key || seen.contains(&entity) {
                // Kafka answers a duplicate key with its duplicate-entity message too.
                return Err(QuorumError::InvalidRequest(format!(
                    "Ignoring duplicate entity {}",
                    entity_display(&entity)
                )));
            }
            seen.push(entity.clone());
            entity_records(image, alteration, unresolved, &mut records)
        })
        .collect();
    (records, results)
}

/// The records of one entity's changes, appended to `records` only if all are valid.
fn entity_records(
    image: &MetadataImage,
    alteration: &QuotaAlteration,
    unresolved: &HashSet<String>,
    records: &mut Vec<MetadataRecord>,
) -> Result<(), QuorumError> {
    let invalid = |m: String| QuorumError::InvalidRequest(m);
    if alteration.entity.is_empty() {
        return Err(invalid("Invalid empty client quota entity".into()));
    }
    let mut types: Vec<&str> = Vec::new();
    for part in &alteration.entity {
        let t = part.entity_type.as_str();
        if types.contains(&t) {
            return Err(invalid(format!(
                "Invalid client quota entity, duplicate entity entry {t}"
            )));
        }
        if ![USER, CLIENT_ID, IP].contains(&t) {
            return Err(invalid(format!("Unhandled client quota entity type: {t}")));
        }
        if part.entity_name.as_deref() == Some("") {
            return Err(invalid(format!("Empty {t} not supported")));
        }
        types.push(t);
    }
    let keys = if types.contains(&IP) {
        if types.len() > 1 {
            // Kafka's message, its missing space included.
            return Err(invalid(
                "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId".into(),
            ));
        }
        let ip = alteration.entity[0].entity_name.as_deref();
        if let Some(ip) = ip.filter(|ip| unresolved.contains(*ip)) {
            return Err(invalid(format!(
                "{ip} is not a valid IP or resolvable host."
            )));
        }
        IP_KEYS
    } else {
        USER_AND_CLIENT_KEYS
    };
    let entity = entity_of(&alteration.entity);
    let current = image.client_quotas().get(&entity);
    let mut new = Vec::new();
    for (key, value) in &alteration.ops {
        let set = current.and_then(|c| c.get(key));
        let value = match value {
            None => {
                if set.is_some() {
                    new.push(record(&alteration.entity, key, QuotaValue(0.0), true));
                }
                continue;
            }
            Some(value) => value.0,
        };
        let kind = keys
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, kind)| *kind)
            .ok_or_else(|| invalid(format!("Invalid configuration key {key}")))?;
        check_value(key, kind, value).map_err(invalid)?;
        if set != Some(&QuotaValue(value)) {
            new.push(record(&alteration.entity, key, QuotaValue(value), false));
        }
    }
    records.extend(new);
    Ok(())
}

/// Kafka's `validateQuotaKeyValue`.
fn check_value(key: &str, kind: QuotaKeyType, value: f64) -> Result<(), String> {
    if value.is_nan() || value <= 0.0 {
        return Err(format!("Quota {key} must be greater than 0"));
    }
    let limit = match kind {
        QuotaKeyType::Double => return Ok(()),
        QuotaKeyType::Int => (f64::from(i32::MAX), "an INT"),
        #[allow(clippy::cast_precision_loss)]
        QuotaKeyType::Long => (i64::MAX as f64, "a LONG"),
    };
    if value > limit.0 {
        return Err(format!(
            "Proposed value for {key} is too large for {}.",
            limit.1
        ));
    }
    if (value % 1.0).abs() > 1e-6 {
        return Err(format!("{key} cannot be a fractional value."));
    }
    Ok(())
}

fn record(entity: &[EntityData], key: &str, value: QuotaValue, remove: bool) -> MetadataRecord {
    MetadataRecord::ClientQuota(ClientQuotaRecord {
        entity: entity.to_vec(),
        key: key.to_string(),
        value,
        remove,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alteration(parts: &[(&str, Option<&str>)], ops: &[(&str, Option<f64>)]) -> QuotaAlteration {
        QuotaAlteration {
            entity: parts
                .iter()
                .map(|(t, n)| EntityData {
                    entity_type: (*t).to_string(),
                    entity_name: n.map(str::to_string),
                })
                .collect(),
            ops: ops
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.map(QuotaValue)))
                .collect(),
        }
    }

    fn message(r: &Result<(), QuorumError>) -> String {
        match r {
            Err(QuorumError::InvalidRequest(m)) => m.clone(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn kafkas_checks_and_messages() {
        let image = MetadataImage::empty();
        let (records, results) = quota_records(
            &image,
            &[
                alteration(
                    &[("user", Some("alice"))],
                    &[("producer_byte_rate", Some(1024.0))],
                ),
                alteration(&[], &[("producer_byte_rate", Some(1.0))]),
                alteration(
                    &[("group", Some("g"))],
                    &[("producer_byte_rate", Some(1.0))],
                ),
                alteration(&[("user", Some(""))], &[("producer_byte_rate", Some(1.0))]),
                alteration(&[("user", Some("b"))], &[("producer_byte_rate", Some(0.0))]),
                alteration(&[("user", Some("c"))], &[("producer_byte_rate", Some(1.5))]),
                alteration(
                    &[("user", Some("d"))],
                    &[("connection_creation_rate", Some(1.0))],
                ),
                alteration(
                    &[("ip", Some("10.0.0.1")), ("user", None)],
                    &[("x", Some(1.0))],
                ),
                alteration(&[("ip", None)], &[("connection_creation_rate", Some(3e10))]),
                alteration(
                    &[("client-id", None)],
                    &[("request_percentage", Some(12.5))],
                ),
                alteration(
                    &[("user", Some("e"))],
                    &[
                        ("consumer_byte_rate", Some(1.0)),
                        ("consumer_byte_rate", None),
                    ],
                ),
                alteration(&[("user", Some("f"))], &[("consumer_byte_rate", None)]),
            ],
            &HashSet::new(),
        );
        let messages: Vec<String> = results.iter().map(message).collect();
        assert_eq!(
            messages,
            [
                "Ok(())",
                "Invalid empty client quota entity",
                "Unhandled client quota entity type: group",
                "Empty user not supported",
                "Quota producer_byte_rate must be greater than 0",
                "producer_byte_rate cannot be a fractional value.",
                "Invalid configuration key connection_creation_rate",
                "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
                "Proposed value for connection_creation_rate is too large for an INT.",
                "Ok(())",
                "Ignoring duplicate entity ClientQuotaEntity(entries={user=e})",
                "Ok(())",
            ]
        );
        // alice's rate and the default client id's percentage; removing an unset key
        // writes nothing.
        assert_eq!(records.len(), 2);
    }

    #[tokio::test]
    async fn ip_entities_are_addresses_or_names_that_resolve() {
        let ops = [("connection_creation_rate", Some(5.0))];
        let alterations = [
            alteration(&[("ip", Some("192.0.2.7"))], &ops),
            alteration(&[("ip", Some("::1"))], &ops),
            alteration(&[("ip", Some("localhost"))], &ops),
            alteration(&[("ip", Some("no-such-host.invalid"))], &ops),
            alteration(&[("ip", None)], &ops),
        ];
        let unresolved = unresolved_hosts(&alterations).await;
        assert_eq!(
            unresolved,
            HashSet::from(["no-such-host.invalid".to_owned()])
        );
        let (records, results) = quota_records(&MetadataImage::empty(), &alterations, &unresolved);
        let messages: Vec<String> = results.iter().map(message).collect();
        assert_eq!(
            messages,
            [
                "Ok(())",
                "Ok(())",
                "Ok(())",
                "no-such-host.invalid is not a valid IP or resolvable host.",
                "Ok(())",
            ]
        );
        assert_eq!(records.len(), 4);
    }
}
