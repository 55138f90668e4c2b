//! Topic-level configuration: the names Kafka knows, their types, defaults and validation.
//!
//! A topic stores only its overrides (what CreateTopics set); every other key reads its
//! default. Every Kafka topic config name is accepted and validated so tools that set them
//! (Kafka Connect, Debezium, Streams) work; the ones marked `applied` change behaviour here,
//! the others are stored and reported as given.

use std::collections::BTreeMap;

use logbook_storage::{CompactionConfig, LogConfig};

pub use crate::broker_config::BrokerDefaults;
pub(crate) use crate::config_def::{check, Kind};
pub use crate::config_def::{ConfigError, ConfigSource};

/// One known topic config.
struct Definition {
    name: &'static str,
    kind: Kind,
    default: &'static str,
}

const COMPRESSION: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

/// Every topic config of Apache Kafka 4.4 (the reference broker of `scripts/kafka-tools-test`),
/// with Kafka's defaults. The configs Kafka 4.0 removed (`message.format.version`,
/// `message.downconversion.enable`, `message.timestamp.difference.max.ms`) are not here:
/// Kafka 4.x refuses them as unknown and never lists them.
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
        name: "errors.deadletterqueue.group.enable",
        kind: Kind::Bool,
        default: "false",
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
        name: "max.decompressed.message.bytes",
        kind: Kind::Int(1),
        default: "2147483639",
    },
    Definition {
        name: "max.message.bytes",
        kind: Kind::Int(0),
        default: "1048588",
    },
    Definition {
        name: "message.timestamp.after.max.ms",
        kind: Kind::Long(0),
        default: "3600000",
    },
    Definition {
        name: "message.timestamp.before.max.ms",
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
        name: "remote.copy.lag.bytes",
        kind: Kind::Long(-1),
        default: "-1",
    },
    Definition {
        name: "remote.copy.lag.ms",
        kind: Kind::Long(-1),
        default: "0",
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

/// An IncrementalAlterConfigs operation (Kafka's `AlterConfigOp.OpType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlterOp {
    /// Set the value.
    Set,
    /// Remove the override (back to the default).
    Delete,
    /// Add items to a list config, skipping those present.
    Append,
    /// Remove items from a list config.
    Subtract,
}

impl AlterOp {
    /// The operation with Kafka's code (0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT).
    ///
    /// # Errors
    /// `UnknownOperation` for any other code.
    pub fn from_code(code: i8) -> Result<Self, ConfigError> {
        match code {
            0 => Ok(AlterOp::Set),
            1 => Ok(AlterOp::Delete),
            2 => Ok(AlterOp::Append),
            3 => Ok(AlterOp::Subtract),
            other => Err(ConfigError::UnknownOperation(other)),
        }
    }
}

/// Applies incremental operations to a map of set values, as Kafka's controller does
/// (`ConfigurationControlManager.incrementalAlterConfigResource`): APPEND and SUBTRACT
/// start from the current value, else the default (`default_of`), and only apply to list
/// configs (`is_list`). Validation of the result is the caller's.
///
/// # Errors
/// `NotList` for APPEND/SUBTRACT on a non-list config.
pub fn apply_ops(
    current: &BTreeMap<String, String>,
    ops: &[(String, AlterOp, Option<String>)],
    is_list: impl Fn(&str) -> bool,
    default_of: impl Fn(&str) -> Option<String>,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut next = current.clone();
    for (name, op, value) in ops {
        let value = value.clone().unwrap_or_default();
        match op {
            AlterOp::Set => {
                next.insert(name.clone(), value);
            }
            AlterOp::Delete => {
                next.remove(name);
            }
            AlterOp::Append | AlterOp::Subtract => {
                let op_name = if *op == AlterOp::Append {
                    "APPEND"
                } else {
                    "SUBTRACT"
                };
                if !is_list(name) {
                    return Err(ConfigError::NotList {
                        op: op_name,
                        name: name.clone(),
                    });
                }
                let old = next.get(name).cloned().or_else(|| default_of(name));
                let mut items: Vec<String> = old
                    .unwrap_or_default()
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                for item in value.split(',') {
                    if *op == AlterOp::Append {
                        if !items.iter().any(|i| i == item) {
                            items.push(item.to_string());
                        }
                    } else if let Some(at) = items.iter().position(|i| i == item) {
                        items.remove(at);
                    }
                }
                next.insert(name.clone(), items.join(","));
            }
        }
    }
    Ok(next)
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

/// Whether topic config `name` is a list (APPEND / SUBTRACT apply to it).
#[must_use]
pub fn is_list(name: &str) -> bool {
    matches!(definition(name).map(|d| d.kind), Some(Kind::List(_)))
}

/// Kafka's default of topic config `name`.
#[must_use]
pub fn kafka_default(name: &str) -> Option<String> {
    definition(name).map(|d| d.default.to_string())
}

impl Kind {
    /// Kafka's `ConfigType` code: BOOLEAN 1, STRING 2, INT 3, LONG 5, DOUBLE 6, LIST 7.
    pub(crate) fn type_code(self) -> i8 {
        match self {
            Kind::Bool => 1,
            Kind::Enum(_) => 2,
            Kind::Int(_) => 3,
            Kind::Long(_) => 5,
            Kind::Ratio => 6,
            Kind::List(_) | Kind::Any => 7,
        }
    }
}

fn definition(name: &str) -> Option<&'static Definition> {
    DEFINITIONS.iter().find(|d| d.name == name)
}

/// A topic's config overrides, validated. Serialized as a plain name → value map.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TopicConfig {
    overrides: BTreeMap<String, String>,
}

impl TopicConfig {
    /// Validates and collects `(name, value)` pairs (CreateTopics' configs).
    ///
    /// # Errors
    /// The first unknown name, missing value (`NullTopicValue`: Kafka refuses a null where
    /// one might expect "the default") or invalid value.
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<Self, ConfigError> {
        let mut overrides = BTreeMap::new();
        for (name, value) in pairs {
            let def = definition(name).ok_or_else(|| ConfigError::Unknown(name.to_string()))?;
            let value = value.ok_or_else(|| ConfigError::NullTopicValue(name.to_string()))?;
            check(def.kind, value).map_err(|reason| ConfigError::Invalid {
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

    /// The overrides set on the topic, by name.
    #[must_use]
    pub fn overrides(&self) -> &BTreeMap<String, String> {
        &self.overrides
    }

    /// Validates a whole set of overrides (the result of an AlterConfigs), as Kafka's
    /// `LogConfig.validate`: every name known, every value valid.
    ///
    /// # Errors
    /// The first unknown name or invalid value.
    pub fn from_map(map: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        Self::from_pairs(map.iter().map(|(k, v)| (k.as_str(), Some(v.as_str()))))
    }

    /// Every known config with its value and source, sorted by name.
    #[must_use]
    pub fn describe(
        &self,
        broker_defaults: &BrokerDefaults,
    ) -> Vec<(String, String, ConfigSource)> {
        self.describe_with_synonyms(broker_defaults)
            .into_iter()
            .map(|(name, value, source, _)| (name, value, source))
            .collect()
    }

    /// Every known config with its value in force, its source and its synonyms, as
    /// Kafka's `ConfigHelper.createTopicConfigEntry`: the topic's own override first, then
    /// the broker synonyms by layer; the source is the first synonym's, else DEFAULT_CONFIG.
    #[must_use]
    pub fn describe_with_synonyms(
        &self,
        broker_defaults: &BrokerDefaults,
    ) -> Vec<(
        String,
        String,
        ConfigSource,
        Vec<crate::config_def::Synonym>,
    )> {
        DEFINITIONS
            .iter()
            .map(|d| {
                let value = self
                    .get(d.name, broker_defaults)
                    .unwrap_or_else(|| d.default.to_string());
                let mut synonyms = broker_defaults.topic_config_synonyms(d.name);
                if self.overrides.contains_key(d.name) {
                    synonyms.insert(
                        0,
                        crate::config_def::Synonym {
                            name: d.name.to_string(),
                            value: value.clone(),
                            source: ConfigSource::DynamicTopic,
                        },
                    );
                }
                let source = synonyms.first().map_or(ConfigSource::Default, |s| s.source);
                (d.name.to_string(), value, source, synonyms)
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
            min_insync_replicas: usize::try_from(
                self.get_i64("min.insync.replicas", broker_defaults),
            )
            .unwrap_or(1)
            .max(1),
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
