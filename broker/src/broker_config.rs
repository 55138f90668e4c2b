//! Broker configs under Kafka's names, kept in Kafka's layers (`DynamicBrokerConfig`):
//! dynamic per-broker (AlterConfigs on `BROKER <node id>`), dynamic cluster default
//! (`BROKER ""`, `kafka-configs.sh --entity-default`), static (flags, `--override`,
//! `KAFKA_*`), and Kafka's defaults. A topic config without an override reads its broker
//! synonyms (`retention.ms` ← `log.retention.ms`, `log.retention.minutes`,
//! `log.retention.hours`) through these layers, so a dynamic broker default applies to every
//! topic without an override at once.
//!
//! The dynamic layers are persisted in `<data-dir>/__cluster_metadata/broker_configs.json`,
//! replaced atomically like the topic registry.

use std::collections::BTreeMap;
use std::sync::Arc;

use logbook_storage::LogConfig;
use parking_lot::RwLock;

pub use crate::config_def::Synonym;
use crate::config_def::{check, ConfigError, ConfigSource, Kind};

/// One broker config Logbook knows: its Kafka name, type, Kafka's default and whether
/// Kafka lets it change at run time (`DynamicBrokerConfig.AllDynamicConfigs`).
pub struct BrokerDefinition {
    /// Kafka's name.
    pub name: &'static str,
    kind: Kind,
    /// Kafka's default, `None` where Kafka has none (the value comes from a synonym).
    pub default: Option<&'static str>,
    /// Changeable with AlterConfigs.
    pub dynamic: bool,
}

impl BrokerDefinition {
    /// How its values are checked.
    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }
}

const fn def(
    name: &'static str,
    kind: Kind,
    default: Option<&'static str>,
    dynamic: bool,
) -> BrokerDefinition {
    BrokerDefinition {
        name,
        kind,
        default,
        dynamic,
    }
}

const LONG_MAX: Option<&str> = Some("9223372036854775807");
const COMPRESSION: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

/// Broker configs that are defaults of topic configs, with Kafka 4.x's types and defaults,
/// and the replication throttle rates. All are dynamic in Kafka (`DynamicLogConfig`,
/// `DynamicReplicationConfig`). Broker settings that are not topic
/// defaults (`num.partitions`, `node.id`, …) are static: see `config::SETTINGS`.
pub const BROKER_DEFINITIONS: &[BrokerDefinition] = &[
    def("compression.gzip.level", Kind::Int(-1), Some("-1"), true),
    def("compression.lz4.level", Kind::Int(1), Some("9"), true),
    def(
        "compression.type",
        Kind::Enum(COMPRESSION),
        Some("producer"),
        true,
    ),
    def(
        "compression.zstd.level",
        Kind::Int(-131_072),
        Some("3"),
        true,
    ),
    // Replication throttles (what `kafka-reassign-partitions --throttle` sets and
    // `--verify` removes): stored and described, not enforced; see README "A cluster".
    def(
        "follower.replication.throttled.rate",
        Kind::Long(0),
        LONG_MAX,
        true,
    ),
    def(
        "leader.replication.throttled.rate",
        Kind::Long(0),
        LONG_MAX,
        true,
    ),
    def(
        "log.cleaner.delete.retention.ms",
        Kind::Long(0),
        Some("86400000"),
        true,
    ),
    def(
        "log.cleaner.max.compaction.lag.ms",
        Kind::Long(1),
        LONG_MAX,
        true,
    ),
    def(
        "log.cleaner.min.cleanable.ratio",
        Kind::Ratio,
        Some("0.5"),
        true,
    ),
    def(
        "log.cleaner.min.compaction.lag.ms",
        Kind::Long(0),
        Some("0"),
        true,
    ),
    def(
        "log.cleanup.policy",
        Kind::List(&["delete", "compact"]),
        Some("delete"),
        true,
    ),
    def("log.flush.interval.messages", Kind::Long(1), LONG_MAX, true),
    def("log.flush.interval.ms", Kind::Long(0), None, true),
    def(
        "log.flush.scheduler.interval.ms",
        Kind::Long(0),
        LONG_MAX,
        false,
    ),
    def("log.index.interval.bytes", Kind::Int(0), Some("4096"), true),
    def(
        "log.index.size.max.bytes",
        Kind::Int(4),
        Some("10485760"),
        true,
    ),
    def(
        "log.local.retention.bytes",
        Kind::Long(-2),
        Some("-2"),
        true,
    ),
    def("log.local.retention.ms", Kind::Long(-2), Some("-2"), true),
    def(
        "log.message.timestamp.after.max.ms",
        Kind::Long(0),
        Some("3600000"),
        true,
    ),
    def(
        "log.message.timestamp.before.max.ms",
        Kind::Long(0),
        LONG_MAX,
        true,
    ),
    def(
        "log.message.timestamp.type",
        Kind::Enum(&["CreateTime", "LogAppendTime"]),
        Some("CreateTime"),
        true,
    ),
    def("log.preallocate", Kind::Bool, Some("false"), true),
    def(
        "log.remote.copy.lag.bytes",
        Kind::Long(-1),
        Some("-1"),
        true,
    ),
    def("log.remote.copy.lag.ms", Kind::Long(-1), Some("0"), true),
    def("log.retention.bytes", Kind::Long(-1), Some("-1"), true),
    // Kafka updates only the primary synonym (`log.retention.ms`, `log.roll.ms`,
    // `log.roll.jitter.ms`) at run time: the hours and minutes forms are read-only.
    def("log.retention.hours", Kind::Int(-1), Some("168"), false),
    def("log.retention.minutes", Kind::Int(-1), None, false),
    def("log.retention.ms", Kind::Long(-1), None, true),
    def("log.roll.hours", Kind::Int(1), Some("168"), false),
    def("log.roll.jitter.hours", Kind::Int(0), Some("0"), false),
    def("log.roll.jitter.ms", Kind::Long(0), None, true),
    def("log.roll.ms", Kind::Long(1), None, true),
    def("log.segment.bytes", Kind::Int(14), Some("1073741824"), true),
    def(
        "log.segment.delete.delay.ms",
        Kind::Long(0),
        Some("60000"),
        true,
    ),
    def(
        "max.decompressed.message.bytes",
        Kind::Int(1),
        Some("2147483639"),
        true,
    ),
    def("message.max.bytes", Kind::Int(0), Some("1048588"), true),
    def("min.insync.replicas", Kind::Int(1), Some("1"), true),
    def(
        "replica.alter.log.dirs.io.max.bytes.per.second",
        Kind::Long(0),
        LONG_MAX,
        true,
    ),
    def(
        "unclean.leader.election.enable",
        Kind::Bool,
        Some("false"),
        true,
    ),
];

const HOUR_MS: i64 = 3_600_000;
const MINUTE_MS: i64 = 60_000;

/// A topic config's broker synonyms in Kafka's order (`ServerTopicConfigSynonyms`), each
/// with the factor that turns its unit into the topic config's (hours → ms).
const TOPIC_SYNONYMS: &[(&str, &[(&str, i64)])] = &[
    ("cleanup.policy", &[("log.cleanup.policy", 1)]),
    ("compression.gzip.level", &[("compression.gzip.level", 1)]),
    ("compression.lz4.level", &[("compression.lz4.level", 1)]),
    ("compression.type", &[("compression.type", 1)]),
    ("compression.zstd.level", &[("compression.zstd.level", 1)]),
    (
        "delete.retention.ms",
        &[("log.cleaner.delete.retention.ms", 1)],
    ),
    (
        "file.delete.delay.ms",
        &[("log.segment.delete.delay.ms", 1)],
    ),
    ("flush.messages", &[("log.flush.interval.messages", 1)]),
    (
        "flush.ms",
        &[
            ("log.flush.interval.ms", 1),
            ("log.flush.scheduler.interval.ms", 1),
        ],
    ),
    ("index.interval.bytes", &[("log.index.interval.bytes", 1)]),
    ("local.retention.bytes", &[("log.local.retention.bytes", 1)]),
    ("local.retention.ms", &[("log.local.retention.ms", 1)]),
    (
        "max.compaction.lag.ms",
        &[("log.cleaner.max.compaction.lag.ms", 1)],
    ),
    (
        "max.decompressed.message.bytes",
        &[("max.decompressed.message.bytes", 1)],
    ),
    ("max.message.bytes", &[("message.max.bytes", 1)]),
    (
        "message.timestamp.after.max.ms",
        &[("log.message.timestamp.after.max.ms", 1)],
    ),
    (
        "message.timestamp.before.max.ms",
        &[("log.message.timestamp.before.max.ms", 1)],
    ),
    (
        "message.timestamp.type",
        &[("log.message.timestamp.type", 1)],
    ),
    (
        "min.cleanable.dirty.ratio",
        &[("log.cleaner.min.cleanable.ratio", 1)],
    ),
    (
        "min.compaction.lag.ms",
        &[("log.cleaner.min.compaction.lag.ms", 1)],
    ),
    ("min.insync.replicas", &[("min.insync.replicas", 1)]),
    ("preallocate", &[("log.preallocate", 1)]),
    ("remote.copy.lag.bytes", &[("log.remote.copy.lag.bytes", 1)]),
    ("remote.copy.lag.ms", &[("log.remote.copy.lag.ms", 1)]),
    ("retention.bytes", &[("log.retention.bytes", 1)]),
    (
        "retention.ms",
        &[
            ("log.retention.ms", 1),
            ("log.retention.minutes", MINUTE_MS),
            ("log.retention.hours", HOUR_MS),
        ],
    ),
    ("segment.bytes", &[("log.segment.bytes", 1)]),
    ("segment.index.bytes", &[("log.index.size.max.bytes", 1)]),
    (
        "segment.jitter.ms",
        &[
            ("log.roll.jitter.ms", 1),
            ("log.roll.jitter.hours", HOUR_MS),
        ],
    ),
    (
        "segment.ms",
        &[("log.roll.ms", 1), ("log.roll.hours", HOUR_MS)],
    ),
    (
        "unclean.leader.election.enable",
        &[("unclean.leader.election.enable", 1)],
    ),
];

/// The broker definition of `name`, if it is one Logbook knows as a topic default.
#[must_use]
pub fn broker_definition(name: &str) -> Option<&'static BrokerDefinition> {
    BROKER_DEFINITIONS.iter().find(|d| d.name == name)
}

/// Whether a broker config is a list (APPEND / SUBTRACT apply to it).
#[must_use]
pub fn is_list_kind(def: &BrokerDefinition) -> bool {
    matches!(def.kind, Kind::List(_))
}

/// Kafka's `ConfigType` code of a broker config (see `topic_config::config_type`).
#[must_use]
pub fn broker_config_type(name: &str) -> i8 {
    broker_definition(name).map_or(0, |d| d.kind.type_code())
}

/// The broker synonyms of topic config `name`, in Kafka's order.
fn topic_synonyms(name: &str) -> &'static [(&'static str, i64)] {
    TOPIC_SYNONYMS
        .iter()
        .find(|(topic, _)| *topic == name)
        .map_or(&[], |(_, synonyms)| synonyms)
}

/// Kafka's `DynamicBrokerConfig.brokerConfigSynonyms`: the names that set the same broker
/// value, most specific first.
fn broker_synonyms(name: &str) -> &'static [(&'static str, i64)] {
    TOPIC_SYNONYMS
        .iter()
        .map(|(_, synonyms)| *synonyms)
        .chain(BROKER_ONLY_SYNONYMS.iter().copied())
        .find(|synonyms| synonyms.iter().any(|(n, _)| *n == name))
        .unwrap_or(&[])
}

/// Broker configs that are no topic's default: each is its own only synonym.
const BROKER_ONLY_SYNONYMS: &[&[(&str, i64)]] = &[
    &[("follower.replication.throttled.rate", 1)],
    &[("leader.replication.throttled.rate", 1)],
    &[("replica.alter.log.dirs.io.max.bytes.per.second", 1)],
];

/// Which dynamic layer an AlterConfigs on a BROKER resource changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerScope {
    /// `BROKER "<node id>"`: this broker only (DYNAMIC_BROKER_CONFIG).
    Node,
    /// `BROKER ""`: the cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG).
    ClusterDefault,
}

/// The dynamic layers, as persisted.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DynamicBrokerConfigs {
    /// Set for this broker (`--entity-name <id>`).
    #[serde(default)]
    pub node: BTreeMap<String, String>,
    /// Set as the cluster default (`--entity-default`).
    #[serde(default)]
    pub cluster_default: BTreeMap<String, String>,
}

impl DynamicBrokerConfigs {
    /// The layer `scope` changes.
    #[must_use]
    pub fn layer(&self, scope: BrokerScope) -> &BTreeMap<String, String> {
        match scope {
            BrokerScope::Node => &self.node,
            BrokerScope::ClusterDefault => &self.cluster_default,
        }
    }

    /// The layer `scope` changes, mutably.
    pub fn layer_mut(&mut self, scope: BrokerScope) -> &mut BTreeMap<String, String> {
        match scope {
            BrokerScope::Node => &mut self.node,
            BrokerScope::ClusterDefault => &mut self.cluster_default,
        }
    }
}

/// Checks a broker layer as Kafka's `DynamicBrokerConfig.validate` does: every key must be
/// a dynamic broker config, every value valid for its type.
///
/// # Errors
/// `NotDynamic` for a static or unknown key, `Invalid` for a bad value.
pub fn validate_broker_layer(layer: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    let not_dynamic: Vec<&str> = layer
        .keys()
        .filter(|k| !broker_definition(k).is_some_and(|d| d.dynamic))
        .map(String::as_str)
        .collect();
    if !not_dynamic.is_empty() {
        return Err(ConfigError::NotDynamic(not_dynamic.join(", ")));
    }
    for (name, value) in layer {
        if let Some(def) = broker_definition(name) {
            check(def.kind, value).map_err(|reason| ConfigError::Invalid {
                name: name.clone(),
                value: value.clone(),
                reason,
            })?;
        }
    }
    Ok(())
}

/// Broker-wide values of topic configs: the layered broker configs a topic without an
/// override reads. Cloning shares the dynamic layers (one per broker process).
#[derive(Clone, Debug, Default)]
pub struct BrokerDefaults {
    /// Static broker configs (flags, `--override`, `KAFKA_*`), by Kafka broker name.
    statics: BTreeMap<String, String>,
    /// The dynamic layers, changed by AlterConfigs on BROKER resources.
    dynamic: Arc<RwLock<DynamicBrokerConfigs>>,
    /// `--log-preallocate-bytes-max` (see `LogConfig::preallocate_bytes_max`).
    pub(crate) preallocate_bytes_max: u64,
    /// `--page-cache-tail-bytes` (see `LogConfig::page_cache_tail_bytes`).
    pub(crate) page_cache_tail_bytes: u64,
}

impl BrokerDefaults {
    /// Defaults from the broker flags. A flag holding Kafka's default is not a static
    /// config (DescribeConfigs reports it as DEFAULT_CONFIG, as Kafka does when
    /// server.properties leaves it out).
    #[must_use]
    pub fn new(message_max_bytes: i32, segment_bytes: i64, retention_ms: i64) -> Self {
        let mut statics = BTreeMap::new();
        for (name, value, kafka_default) in [
            ("message.max.bytes", i64::from(message_max_bytes), 1_048_588),
            ("log.segment.bytes", segment_bytes, 1 << 30),
            ("log.retention.ms", retention_ms, 168 * HOUR_MS),
        ] {
            if value != kafka_default {
                statics.insert(name.to_string(), value.to_string());
            }
        }
        BrokerDefaults {
            statics,
            dynamic: Arc::default(),
            preallocate_bytes_max: LogConfig::default().preallocate_bytes_max,
            page_cache_tail_bytes: LogConfig::default().page_cache_tail_bytes,
        }
    }

    /// Adds static broker configs given by Kafka name (`--override`, `KAFKA_*`); they win
    /// over the flag values passed to [`BrokerDefaults::new`].
    #[must_use]
    pub fn with_static_configs(mut self, configs: &BTreeMap<String, String>) -> Self {
        for (name, value) in configs {
            if broker_definition(name).is_some() {
                self.statics.insert(name.clone(), value.clone());
            }
        }
        self
    }

    /// Sets how much of each active segment's end stays in the page cache once durable.
    #[must_use]
    pub fn with_page_cache_tail_bytes(mut self, bytes: u64) -> Self {
        self.page_cache_tail_bytes = bytes;
        self
    }

    /// Sets the most disk space a log reserves ahead of its end.
    #[must_use]
    pub fn with_preallocate_bytes_max(mut self, bytes: u64) -> Self {
        self.preallocate_bytes_max = bytes;
        self
    }

    /// A copy of the dynamic layers.
    #[must_use]
    pub fn dynamic(&self) -> DynamicBrokerConfigs {
        self.dynamic.read().clone()
    }

    /// Replaces the dynamic layers (after they were validated and persisted).
    pub fn set_dynamic(&self, configs: DynamicBrokerConfigs) {
        *self.dynamic.write() = configs;
    }

    /// The layers from most to least specific, Kafka's `configSynonyms` order.
    fn layers(&self) -> [(BTreeMap<String, String>, ConfigSource); 3] {
        let dynamic = self.dynamic.read();
        [
            (dynamic.node.clone(), ConfigSource::DynamicBroker),
            (
                dynamic.cluster_default.clone(),
                ConfigSource::DynamicDefaultBroker,
            ),
            (self.statics.clone(), ConfigSource::StaticBroker),
        ]
    }

    /// The value of broker config `name` set in a layer, with the layer.
    fn layered(&self, name: &str) -> Option<(String, ConfigSource)> {
        let dynamic = self.dynamic.read();
        dynamic
            .node
            .get(name)
            .map(|v| (v.clone(), ConfigSource::DynamicBroker))
            .or_else(|| {
                dynamic
                    .cluster_default
                    .get(name)
                    .map(|v| (v.clone(), ConfigSource::DynamicDefaultBroker))
            })
            .or_else(|| {
                self.statics
                    .get(name)
                    .map(|v| (v.clone(), ConfigSource::StaticBroker))
            })
    }

    /// The broker-wide value of topic config `name` (in the topic config's unit), if a
    /// broker synonym sets it: as Kafka merges the layers first, then takes the first
    /// synonym set (`log.retention.ms` before `.minutes` before `.hours`), then the first
    /// synonym with a default.
    pub(crate) fn get(&self, name: &str) -> Option<String> {
        let synonyms = topic_synonyms(name);
        let scaled = |value: String, factor: i64| {
            if factor == 1 {
                return value;
            }
            value
                .trim()
                .parse::<i64>()
                .map_or(value, |v| v.saturating_mul(factor).to_string())
        };
        synonyms
            .iter()
            .find_map(|(n, f)| self.layered(n).map(|(v, _)| scaled(v, *f)))
            .or_else(|| {
                synonyms.iter().find_map(|(n, f)| {
                    broker_definition(n)
                        .and_then(|d| d.default)
                        .map(|v| scaled(v.to_string(), *f))
                })
            })
    }

    /// Kafka's `ConfigHelper.configSynonyms(name, synonyms)`: for each layer from most to
    /// least specific, every synonym set there; then dropped up to the first entry named
    /// `name` (so a topic's `retention.ms` lists nothing when only Kafka's default
    /// `log.retention.hours` is set, as Kafka's describe shows).
    fn config_synonyms(&self, name: &str, synonyms: &[(&str, i64)]) -> Vec<Synonym> {
        let mut all = Vec::new();
        for (layer, source) in self.layers() {
            for (n, _) in synonyms {
                if let Some(v) = layer.get(*n) {
                    all.push(Synonym {
                        name: (*n).to_string(),
                        value: v.clone(),
                        source,
                    });
                }
            }
        }
        for (n, _) in synonyms {
            if let Some(v) = broker_definition(n).and_then(|d| d.default) {
                all.push(Synonym {
                    name: (*n).to_string(),
                    value: v.to_string(),
                    source: ConfigSource::Default,
                });
            }
        }
        let first = all.iter().position(|s| s.name == name).unwrap_or(all.len());
        all.split_off(first)
    }

    /// The broker synonyms of topic config `name` as DescribeConfigs lists them after the
    /// topic's own override.
    #[must_use]
    pub fn topic_config_synonyms(&self, name: &str) -> Vec<Synonym> {
        let synonyms = topic_synonyms(name);
        match synonyms.first() {
            Some((first, _)) => self.config_synonyms(first, broker_synonyms(first)),
            None => Vec::new(),
        }
    }

    /// Every broker config of [`BROKER_DEFINITIONS`] as DescribeConfigs reports it for
    /// this broker: name, value (`None` when unset and without default), synonyms.
    #[must_use]
    pub fn describe_node(&self) -> Vec<(String, Option<String>, Vec<Synonym>)> {
        BROKER_DEFINITIONS
            .iter()
            .map(|d| {
                let synonyms = self.config_synonyms(d.name, broker_synonyms(d.name));
                let value = self
                    .layered(d.name)
                    .map(|(v, _)| v)
                    .or_else(|| d.default.map(str::to_string));
                (d.name.to_string(), value, synonyms)
            })
            .collect()
    }

    /// The cluster-default layer as DescribeConfigs reports `BROKER ""`: only what is set
    /// there, each with its DYNAMIC_DEFAULT_BROKER_CONFIG synonyms.
    #[must_use]
    pub fn describe_cluster_default(&self) -> Vec<(String, Option<String>, Vec<Synonym>)> {
        let layer = self.dynamic.read().cluster_default.clone();
        layer
            .into_iter()
            .map(|(name, value)| {
                let synonyms = self
                    .config_synonyms(&name, broker_synonyms(&name))
                    .into_iter()
                    .filter(|s| s.source == ConfigSource::DynamicDefaultBroker)
                    .collect();
                (name, Some(value), synonyms)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
