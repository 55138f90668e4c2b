//! The vocabulary of configs shared by topic and broker configs (Kafka's `ConfigDef`): how
//! a value is checked ([`Kind`], [`check`]), why a change is refused ([`ConfigError`]),
//! where a reported value comes from ([`ConfigSource`], [`Synonym`]). Both
//! `topic_config` (a topic's overrides over the broker's values) and `broker_config` (the
//! broker's layers) build on it, so neither needs the other's internals: the broker layer
//! no longer imports the topic layer.

/// How a config value is checked.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
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

/// Why a config change was refused; `errors::config_error` picks the Kafka code. The
/// messages are Kafka's, so tools show the same text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Not a Kafka topic config (INVALID_CONFIG).
    #[error("Unknown topic config name: {0}")]
    Unknown(String),
    /// A known config with a value of the wrong type or out of range (INVALID_CONFIG).
    #[error("Invalid value {value} for configuration {name}: {reason}")]
    Invalid {
        /// The config name.
        name: String,
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// APPEND or SUBTRACT on a config that is not a list (INVALID_CONFIG).
    #[error("Can't {op} to key {name} because its type is not LIST.")]
    NotList {
        /// `APPEND` or `SUBTRACT`.
        op: &'static str,
        /// The config name.
        name: String,
    },
    /// Broker configs that cannot change at run time, or that Logbook does not know
    /// (INVALID_REQUEST, as Kafka's `DynamicBrokerConfig.validate`).
    #[error("Cannot update these configs dynamically: {0}")]
    NotDynamic(String),
    /// One config named twice in one resource (INVALID_REQUEST).
    #[error("Error due to duplicate config keys")]
    DuplicateKeys,
    /// A topic config without a value in CreateTopics (INVALID_CONFIG, as Kafka's
    /// controller refuses it).
    #[error("Null value not supported for topic configs: {0}")]
    NullTopicValue(String),
    /// A SET (or legacy) entry without a value (INVALID_REQUEST).
    #[error("Null value not supported for : {0}")]
    NullValue(String),
    /// An IncrementalAlterConfigs operation code Kafka does not define (INVALID_REQUEST).
    #[error("Unknown operations type {0}")]
    UnknownOperation(i8),
}

/// Where a reported value comes from, as Kafka's `ConfigSource`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    /// Set on the topic (DYNAMIC_TOPIC_CONFIG).
    DynamicTopic,
    /// Set dynamically for this broker (DYNAMIC_BROKER_CONFIG).
    DynamicBroker,
    /// Set dynamically as the cluster default (DYNAMIC_DEFAULT_BROKER_CONFIG).
    DynamicDefaultBroker,
    /// Set at start (STATIC_BROKER_CONFIG).
    StaticBroker,
    /// Kafka's default (DEFAULT_CONFIG).
    Default,
    /// A broker logger's level (DYNAMIC_BROKER_LOGGER_CONFIG).
    DynamicBrokerLogger,
}

impl ConfigSource {
    /// Kafka's numeric code for the source (DescribeConfigs / CreateTopics responses).
    #[must_use]
    pub fn code(self) -> i8 {
        match self {
            ConfigSource::DynamicTopic => 1,
            ConfigSource::DynamicBroker => 2,
            ConfigSource::DynamicDefaultBroker => 3,
            ConfigSource::StaticBroker => 4,
            ConfigSource::Default => 5,
            ConfigSource::DynamicBrokerLogger => 6,
        }
    }
}

/// One synonym of a described config: name, value and where it is set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Synonym {
    /// The broker (or topic) config name.
    pub name: String,
    /// Its value there.
    pub value: String,
    /// The layer.
    pub source: ConfigSource,
}

/// Checks `value` against `kind`; the reason in Kafka's words (`ConfigDef`'s validators).
pub fn check(kind: Kind, value: &str) -> Result<(), String> {
    let v = value.trim();
    match kind {
        Kind::Long(min) => match v.parse::<i64>() {
            Ok(n) if n >= min => Ok(()),
            Ok(_) => Err(format!("Value must be at least {min}")),
            Err(_) => Err("Not a number of type LONG".into()),
        },
        Kind::Int(min) => match v.parse::<i32>() {
            Ok(n) if n >= min => Ok(()),
            Ok(_) => Err(format!("Value must be at least {min}")),
            Err(_) => Err("Not a number of type INT".into()),
        },
        Kind::Bool => match v.to_ascii_lowercase().as_str() {
            "true" | "false" => Ok(()),
            _ => Err("Expected value to be either true or false".into()),
        },
        Kind::Ratio => match v.parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => Ok(()),
            _ => Err("Value must be a number between 0 and 1".into()),
        },
        Kind::Enum(words) => {
            if words.iter().any(|w| w.eq_ignore_ascii_case(v)) {
                Ok(())
            } else {
                Err(format!("String must be one of: {}", words.join(", ")))
            }
        }
        Kind::List(words) => {
            let items: Vec<&str> = v
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect();
            if items.is_empty() {
                return Err(format!(
                    "List must contain at least one of: {}",
                    words.join(", ")
                ));
            }
            for item in items {
                if !words.iter().any(|w| w.eq_ignore_ascii_case(item)) {
                    return Err(format!("'{item}' is not one of: {}", words.join(", ")));
                }
            }
            Ok(())
        }
        Kind::Any => Ok(()),
    }
}
