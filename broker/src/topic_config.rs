//! Topic-level configuration: the names Kafka knows, their types, defaults and validation.
//!
//! A topic stores only its overrides (what CreateTopics set); every other key reads its
//! default. Every Kafka topic config name is accepted and validated so tools that set them
//! (Kafka Connect, Debezium, Streams) work; the ones marked `applied` change behaviour here,
//! the others are stored and reported as given.

use std::collections::BTreeMap;

use logbook_storage::{CompactionConfig, LogConfig};

/// How a config value is checked.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// A signed 64-bit integer with an inclusive minimum.
    Long(i64),
    /// A signed 32-bit integer with an inclusive minimum.
    Int(i32),
    /// `true` or `false`.
    Bool,
    /// A ratio in [0, 1].
    Ratio,
    /// One of the listed words.
    Enum(&'static [&'static str]),
    /// A comma-separated list, each item one of the listed words.
    List(&'static [&'static str]),
    /// Any string (replica throttles: validated loosely).
    Any,
}

/// One known topic config.
struct Definition {
    name: &'static str,
    kind: Kind,
    default: &'static str,
}

const COMPRESSION: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

/// Every topic config of Apache Kafka 4.x, with Kafka's defaults.
const DEFINITIONS: &[Definition] = &[
    Definition {
        name: "cleanup.policy",
        kind: Kind::List(&["delete", "compact"]),
        default: "delete",
    },
    Definition {
        name: "compression.type",
        kind: Kind::Enum(COMPRESSION),
        default: "producer",
    },
    Definition {
        name: "compression.gzip.level",
        kind: Kind::Int(-1),
        default: "-1",
    },
    Definition {
        name: "compression.lz4.level",
        kind: Kind::Int(1),
        default: "9",
    },
    Definition {
        name: "compression.zstd.level",
        kind: Kind::Int(-131_072),
        default: "3",
    },
    Definition {
        name: "delete.retention.ms",
        kind: Kind::Long(0),
        default: "86400000",
    },
    Definition {
        name: "file.delete.delay.ms",
        kind: Kind::Long(0),
        default: "60000",
    },
    Definition {
        name: "flush.messages",
        kind: Kind::Long(1),
        default: "9223372036854775807",
    },
    Definition {
        name: "flush.ms",
        kind: Kind::Long(0),
        default: "9223372036854775807",
    },
    Definition {
        name: "follower.replication.throttled.replicas",
        kind: Kind::Any,
        default: "",
    },
    Definition {
        name: "index.interval.bytes",
        kind: Kind::Int(0),
        default: "4096",
    },
    Definition {
        name: "leader.replication.throttled.replicas",
        kind: Kind::Any,
        default: "",
    },
    Definition {
        name: "local.retention.bytes",
        kind: Kind::Long(-2),
        default: "-2",
    },
    Definition {
        name: "local.retention.ms",
        kind: Kind::Long(-2),
        default: "-2",
    },
    Definition {
        name: "max.compaction.lag.ms",
        kind: Kind::Long(1),
        default: "9223372036854775807",
    },
    Definition {
        name: "max.message.bytes",
        kind: Kind::Int(0),
        default: "1048588",
    },
    Definition {
        name: "message.downconversion.enable",
        kind: Kind::Bool,
        default: "true",
    },
    Definition {
        name: "message.format.version",
        kind: Kind::Any,
        default: "3.0-IV1",
    },
    Definition {
        name: "message.timestamp.after.max.ms",
        kind: Kind::Long(0),
        default: "9223372036854775807",
    },
    Definition {
        name: "message.timestamp.before.max.ms",
        kind: Kind::Long(0),
        default: "9223372036854775807",
    },
    Definition {
        name: "message.timestamp.difference.max.ms",
        kind: Kind::Long(0),
        default: "9223372036854775807",
    },
    Definition {
        name: "message.timestamp.type",
        kind: Kind::Enum(&["CreateTime", "LogAppendTime"]),
        default: "CreateTime",
    },
    Definition {
        name: "min.cleanable.dirty.ratio",
        kind: Kind::Ratio,
        default: "0.5",
    },
    Definition {
        name: "min.compaction.lag.ms",
        kind: Kind::Long(0),
        default: "0",
    },
    Definition {
        name: "min.insync.replicas",
        kind: Kind::Int(1),
        default: "1",
    },
    Definition {
        name: "preallocate",
        kind: Kind::Bool,
        default: "false",
    },
    Definition {
        name: "remote.log.copy.disable",
        kind: Kind::Bool,
        default: "false",
    },
    Definition {
        name: "remote.log.delete.on.disable",
        kind: Kind::Bool,
        default: "false",
    },
    Definition {
        name: "remote.storage.enable",
        kind: Kind::Bool,
        default: "false",
    },
    Definition {
        name: "retention.bytes",
        kind: Kind::Long(-1),
        default: "-1",
    },
    Definition {
        name: "retention.ms",
        kind: Kind::Long(-1),
        default: "604800000",
    },
    Definition {
        name: "segment.bytes",
        kind: Kind::Int(14),
        default: "1073741824",
    },
    Definition {
        name: "segment.index.bytes",
        kind: Kind::Int(4),
        default: "10485760",
    },
    Definition {
        name: "segment.jitter.ms",
        kind: Kind::Long(0),
        default: "0",
    },
    Definition {
        name: "segment.ms",
        kind: Kind::Long(1),
        default: "604800000",
    },
    Definition {
        name: "unclean.leader.election.enable",
        kind: Kind::Bool,
        default: "false",
    },
];

/// Why a config was refused; the handler turns it into INVALID_CONFIG.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Not a Kafka topic config.
    #[error("unknown topic config '{0}'")]
    Unknown(String),
    /// A known config with a value of the wrong type or out of range.
    #[error("invalid value '{value}' for topic config '{name}': {reason}")]
    Invalid {
        /// The config name.
        name: String,
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Kafka's `ConfigType` code of a topic config (DescribeConfigs v3+): BOOLEAN 1, STRING 2,
/// INT 3, LONG 5, DOUBLE 6, LIST 7; 0 for an unknown name.
#[must_use]
pub fn config_type(name: &str) -> i8 {
    match definition(name).map(|d| d.kind) {
        Some(Kind::Bool) => 1,
        Some(Kind::Enum(_)) => 2,
        Some(Kind::Int(_)) => 3,
        Some(Kind::Long(_)) => 5,
        Some(Kind::Ratio) => 6,
        Some(Kind::List(_) | Kind::Any) => 7,
        None => 0,
    }
}

fn definition(name: &str) -> Option<&'static Definition> {
    DEFINITIONS.iter().find(|d| d.name == name)
}

fn check(def: &Definition, value: &str) -> Result<(), String> {
    let v = value.trim();
    match def.kind {
        Kind::Long(min) => match v.parse::<i64>() {
            Ok(n) if n >= min => Ok(()),
            Ok(n) => Err(format!("{n} is below the minimum {min}")),
            Err(_) => Err("not a 64-bit integer".into()),
        },
        Kind::Int(min) => match v.parse::<i32>() {
            Ok(n) if n >= min => Ok(()),
            Ok(n) => Err(format!("{n} is below the minimum {min}")),
            Err(_) => Err("not a 32-bit integer".into()),
        },
        Kind::Bool => match v.to_ascii_lowercase().as_str() {
            "true" | "false" => Ok(()),
            _ => Err("not a boolean".into()),
        },
        Kind::Ratio => match v.parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => Ok(()),
            _ => Err("not a number between 0 and 1".into()),
        },
        Kind::Enum(words) => {
            if words.iter().any(|w| w.eq_ignore_ascii_case(v)) {
                Ok(())
            } else {
                Err(format!("expected one of {words:?}"))
            }
        }
        Kind::List(words) => {
            let items: Vec<&str> = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect();
            if items.is_empty() {
                return Err(format!("expected a list of {words:?}"));
            }
            for item in items {
                if !words.iter().any(|w| w.eq_ignore_ascii_case(item)) {
                    return Err(format!("'{item}' is not one of {words:?}"));
                }
            }
            Ok(())
        }
        Kind::Any => Ok(()),
    }
}

/// A topic's config overrides, validated. Serialized as a plain name → value map.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TopicConfig {
    overrides: BTreeMap<String, String>,
}

/// Where a reported value comes from, as Kafka's `ConfigSource`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    /// Set on the topic.
    DynamicTopic,
    /// The broker's default.
    Default,
}

impl ConfigSource {
    /// Kafka's numeric code for the source (DescribeConfigs / CreateTopics responses).
    #[must_use]
    pub fn code(self) -> i8 {
        match self {
            ConfigSource::DynamicTopic => 1,
            ConfigSource::Default => 5,
        }
    }
}

impl TopicConfig {
    /// Validates and collects `(name, value)` pairs. A `None` value means "use the default".
    ///
    /// # Errors
    /// The first unknown name or invalid value.
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<Self, ConfigError> {
        let mut overrides = BTreeMap::new();
        for (name, value) in pairs {
            let def = definition(name).ok_or_else(|| ConfigError::Unknown(name.to_string()))?;
            let Some(value) = value else { continue };
            check(def, value).map_err(|reason| ConfigError::Invalid {
                name: name.to_string(),
                value: value.to_string(),
                reason,
            })?;
            overrides.insert(name.to_string(), value.trim().to_string());
        }
        Ok(TopicConfig { overrides })
    }

    /// The value in force for `name`: the override, else the broker-wide default, else Kafka's.
    #[must_use]
    pub fn get(&self, name: &str, broker_defaults: &BrokerDefaults) -> Option<String> {
        if let Some(v) = self.overrides.get(name) {
            return Some(v.clone());
        }
        if let Some(v) = broker_defaults.get(name) {
            return Some(v);
        }
        definition(name).map(|d| d.default.to_string())
    }

    fn get_i64(&self, name: &str, broker_defaults: &BrokerDefaults) -> i64 {
        self.get(name, broker_defaults)
            .and_then(|v| v.parse().ok())
            .unwrap_or_default()
    }

    /// Every known config with its value and source, sorted by name.
    #[must_use]
    pub fn describe(
        &self,
        broker_defaults: &BrokerDefaults,
    ) -> Vec<(String, String, ConfigSource)> {
        DEFINITIONS
            .iter()
            .map(|d| {
                let (value, source) = match self.overrides.get(d.name) {
                    Some(v) => (v.clone(), ConfigSource::DynamicTopic),
                    None => (
                        broker_defaults
                            .get(d.name)
                            .unwrap_or_else(|| d.default.to_string()),
                        ConfigSource::Default,
                    ),
                };
                (d.name.to_string(), value, source)
            })
            .collect()
    }

    /// Largest batch accepted (`max.message.bytes`).
    #[must_use]
    pub fn max_message_bytes(&self, broker_defaults: &BrokerDefaults) -> i64 {
        self.get_i64("max.message.bytes", broker_defaults)
    }

    /// True when the broker stamps batches with its own clock (`LogAppendTime`).
    #[must_use]
    pub fn log_append_time(&self, broker_defaults: &BrokerDefaults) -> bool {
        self.get("message.timestamp.type", broker_defaults)
            .is_some_and(|v| v.eq_ignore_ascii_case("LogAppendTime"))
    }

    /// True when `cleanup.policy` includes `compact`.
    #[must_use]
    pub fn compacted(&self, broker_defaults: &BrokerDefaults) -> bool {
        self.get("cleanup.policy", broker_defaults)
            .is_some_and(|v| {
                v.split(',')
                    .any(|p| p.trim().eq_ignore_ascii_case("compact"))
            })
    }

    /// The storage settings derived from this topic's configs.
    #[must_use]
    pub fn log_config(&self, broker_defaults: &BrokerDefaults) -> LogConfig {
        let deletes = self
            .get("cleanup.policy", broker_defaults)
            .is_some_and(|v| {
                v.split(',')
                    .any(|p| p.trim().eq_ignore_ascii_case("delete"))
            });
        let (retention_ms, retention_bytes) = if deletes {
            (
                self.get_i64("retention.ms", broker_defaults),
                self.get_i64("retention.bytes", broker_defaults),
            )
        } else {
            (-1, -1)
        };
        LogConfig {
            segment_bytes: u64::try_from(self.get_i64("segment.bytes", broker_defaults))
                .unwrap_or(1 << 30),
            segment_ms: u64::try_from(self.get_i64("segment.ms", broker_defaults))
                .unwrap_or(u64::MAX),
            index_interval_bytes: u32::try_from(
                self.get_i64("index.interval.bytes", broker_defaults),
            )
            .unwrap_or(4096),
            segment_index_bytes: u32::try_from(
                self.get_i64("segment.index.bytes", broker_defaults),
            )
            .unwrap_or(10 << 20),
            retention_ms,
            retention_bytes,
            preallocate_bytes_max: broker_defaults.preallocate_bytes_max,
            page_cache_tail_bytes: broker_defaults.page_cache_tail_bytes,
            compaction: self.compaction_config(broker_defaults),
        }
    }

    /// The log cleaner's settings from `cleanup.policy` and the compaction configs.
    fn compaction_config(&self, broker_defaults: &BrokerDefaults) -> CompactionConfig {
        CompactionConfig {
            compact: self.compacted(broker_defaults),
            delete_retention_ms: self.get_i64("delete.retention.ms", broker_defaults),
            min_compaction_lag_ms: self.get_i64("min.compaction.lag.ms", broker_defaults),
            max_compaction_lag_ms: self.get_i64("max.compaction.lag.ms", broker_defaults),
            min_cleanable_dirty_ratio: self
                .get("min.cleanable.dirty.ratio", broker_defaults)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.5),
        }
    }
}

/// Broker-wide defaults that replace Kafka's for some topic configs (from flags).
#[derive(Clone, Debug, Default)]
pub struct BrokerDefaults {
    values: BTreeMap<&'static str, String>,
    /// `--log-preallocate-bytes-max` (see `LogConfig::preallocate_bytes_max`).
    preallocate_bytes_max: u64,
    /// `--page-cache-tail-bytes` (see `LogConfig::page_cache_tail_bytes`).
    page_cache_tail_bytes: u64,
}

impl BrokerDefaults {
    /// Defaults from the broker flags.
    #[must_use]
    pub fn new(message_max_bytes: i32, segment_bytes: i64, retention_ms: i64) -> Self {
        let mut values = BTreeMap::new();
        values.insert("max.message.bytes", message_max_bytes.to_string());
        values.insert("segment.bytes", segment_bytes.to_string());
        values.insert("retention.ms", retention_ms.to_string());
        BrokerDefaults {
            values,
            preallocate_bytes_max: LogConfig::default().preallocate_bytes_max,
            page_cache_tail_bytes: LogConfig::default().page_cache_tail_bytes,
        }
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

    fn get(&self, name: &str) -> Option<String> {
        self.values.get(name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Known configs with valid values are kept; unknown names and bad values are refused.
    #[test]
    fn validates_names_and_values() {
        let ok = TopicConfig::from_pairs([
            ("retention.ms", Some("1000")),
            ("cleanup.policy", Some("compact,delete")),
        ])
        .expect("valid");
        let d = BrokerDefaults::default();
        assert_eq!(ok.get("retention.ms", &d).as_deref(), Some("1000"));
        assert!(ok.compacted(&d));
        assert_eq!(
            TopicConfig::from_pairs([("no.such.config", Some("1"))]),
            Err(ConfigError::Unknown("no.such.config".into()))
        );
        assert!(matches!(
            TopicConfig::from_pairs([("retention.ms", Some("abc"))]),
            Err(ConfigError::Invalid { .. })
        ));
        assert!(matches!(
            TopicConfig::from_pairs([("cleanup.policy", Some("shred"))]),
            Err(ConfigError::Invalid { .. })
        ));
        assert!(matches!(
            TopicConfig::from_pairs([("segment.bytes", Some("10"))]),
            Err(ConfigError::Invalid { .. })
        ));
        assert!(matches!(
            TopicConfig::from_pairs([("message.timestamp.type", Some("Sometime"))]),
            Err(ConfigError::Invalid { .. })
        ));
    }

    // Defaults come from the broker flags first, then Kafka's table.
    #[test]
    fn defaults_and_log_config() {
        let d = BrokerDefaults::new(2000, 4096, -1);
        let c = TopicConfig::default();
        assert_eq!(c.max_message_bytes(&d), 2000);
        let log = c.log_config(&d);
        assert_eq!(log.segment_bytes, 4096);
        assert_eq!(log.retention_ms, -1);
        assert_eq!(c.describe(&d).len(), DEFINITIONS.len());
    }
}
