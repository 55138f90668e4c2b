//! Broker settings under Kafka's names (`server.properties` keys), so an operator can start
//! Logbook as `kafka-server-start.sh` is started: `--override log.segment.bytes=1048576`,
//! or `KAFKA_LOG_SEGMENT_BYTES=1048576` in the environment (the Kafka docker image's
//! convention). One row per setting; adding a flag to `Config` is adding a row here.
//!
//! An unknown name or a bad value stops the start with a message naming the key, the value
//! and what is allowed. Topic defaults without a flag (`log.cleanup.policy`,
//! `log.message.timestamp.type`, …) are accepted by their `broker_config` definition and
//! kept in `Config::static_broker_configs`.

use std::str::FromStr;

use super::Config;
use crate::broker_config::broker_definition;

/// One broker setting: its Kafka name, what values it takes, how it sets and reads `Config`.
pub struct Setting {
    /// Kafka's name.
    pub name: &'static str,
    /// What is allowed, for the error message.
    pub allowed: &'static str,
    /// Kafka's `ConfigType` code (BOOLEAN 1, STRING 2, INT 3, LONG 5, LIST 7).
    pub config_type: i8,
    /// Sets the field from a value, or says why the value is refused.
    pub apply: fn(&mut Config, &str) -> Result<(), String>,
    /// The field's current value, as Kafka writes it.
    pub read: fn(&Config) -> String,
}

/// Parses a number and checks its lower bound.
fn number<T: FromStr + PartialOrd + std::fmt::Display>(value: &str, min: T) -> Result<T, String> {
    let n: T = value
        .trim()
        .parse()
        .map_err(|_| "not a number of the right type".to_string())?;
    if n < min {
        return Err(format!("value must be at least {min}"));
    }
    Ok(n)
}

/// A double as Java's `Double.toString` writes it, which is how Kafka reports DOUBLE configs:
/// plain decimal with at least one fractional digit in [10^-3, 10^7), else `d.dddE<exp>`
/// (`Double.MAX_VALUE`, the unlimited cleaner I/O rate, is `1.7976931348623157E308`).
fn java_double(value: f64) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-3..1e7).contains(&magnitude) {
        let scientific = format!("{value:e}");
        let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
        let point = if mantissa.contains('.') { "" } else { ".0" };
        return format!("{mantissa}{point}E{exponent}");
    }
    let plain = value.to_string();
    if plain.contains('.') {
        plain
    } else {
        format!("{plain}.0")
    }
}

fn boolean(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("expected true or false".into()),
    }
}

/// A listener list as Kafka writes it (`NAME://host:port,...`); empty when the settings
/// do not hold together (the broker refuses to start then).
fn listeners_read(
    c: &Config,
    pick: fn(&crate::listeners::Listeners) -> &Vec<crate::listeners::Endpoint>,
) -> String {
    c.listeners()
        .map(|l| {
            let list: Vec<String> = pick(&l).iter().map(ToString::to_string).collect();
            list.join(",")
        })
        .unwrap_or_default()
}

macro_rules! numeric {
    ($name:literal, $($field:ident).+, $ty:ty, $min:expr, $allowed:literal, $code:literal) => {
        Setting {
            name: $name,
            allowed: $allowed,
            config_type: $code,
            apply: |c, v| {
                c.$($field).+ = number::<$ty>(v, $min)?;
                Ok(())
            },
            read: |c| c.$($field).+.to_string(),
        }
    };
}

/// Every broker setting Logbook has, by Kafka name.
pub static SETTINGS: &[Setting] = &[
    Setting {
        name: "advertised.listeners",
        allowed: "NAME://host:port,... for listeners of listeners",
        // LIST, as Kafka types it.
        config_type: 7,
        apply: |c, v| {
            c.listener_settings.advertised_listeners = Some(v.trim().to_string());
            Ok(())
        },
        read: |c| listeners_read(c, |l| &l.advertised),
    },
    Setting {
        name: "allow.everyone.if.no.acl.found",
        allowed: "true or false",
        config_type: 1,
        apply: |c, v| {
            c.authorizer.allow_everyone_if_no_acl_found = boolean(v)?;
            Ok(())
        },
        read: |c| c.authorizer.allow_everyone_if_no_acl_found.to_string(),
    },
    Setting {
        name: "authorizer.class.name",
        allowed: "empty (no ACLs) or org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        config_type: 2,
        apply: |c, v| {
            c.authorizer.standard = crate::authorizer::standard::parse_class_name(v)?;
            Ok(())
        },
        read: |c| crate::authorizer::standard::class_name(c.authorizer.standard).to_string(),
    },
    Setting {
        name: "auto.create.topics.enable",
        allowed: "true or false",
        config_type: 1,
        apply: |c, v| {
            c.auto_create_topics_enable = boolean(v)?;
            Ok(())
        },
        read: |c| c.auto_create_topics_enable.to_string(),
    },
    Setting {
        name: "auto.leader.rebalance.enable",
        allowed: "true or false",
        config_type: 1,
        apply: |c, v| {
            c.auto_leader_rebalance_enable = boolean(v)?;
            Ok(())
        },
        read: |c| c.auto_leader_rebalance_enable.to_string(),
    },
    numeric!("broker.id", node_id, i32, 0, "an integer >= 0", 3),
    numeric!(
        "broker.heartbeat.interval.ms",
        broker_heartbeat_interval_ms,
        u64,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "broker.session.timeout.ms",
        broker_session_timeout_ms,
        u64,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "replica.lag.time.max.ms",
        replica_lag_time_max_ms,
        i64,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "connections.max.idle.ms",
        limits.connections_max_idle_ms,
        u64,
        1,
        "an integer >= 1",
        5
    ),
    Setting {
        name: "controller.quorum.voters",
        allowed: "id@host:port,... (distinct ids, routable hosts), or empty for a single node",
        config_type: 7,
        apply: |c, v| {
            c.controller_quorum_voters = v.parse()?;
            Ok(())
        },
        read: |c| c.controller_quorum_voters.to_string(),
    },
    numeric!(
        "default.replication.factor",
        default_replication_factor,
        i16,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "fetch.max.bytes",
        limits.fetch_response_bytes_max,
        usize,
        1024,
        "an integer >= 1024",
        3
    ),
    numeric!(
        "group.initial.rebalance.delay.ms",
        group_initial_rebalance_delay_ms,
        i32,
        0,
        "an integer >= 0",
        3
    ),
    numeric!(
        "group.max.session.timeout.ms",
        group_max_session_timeout_ms,
        i32,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "group.max.size",
        limits.group_max_size,
        usize,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "group.min.session.timeout.ms",
        group_min_session_timeout_ms,
        i32,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "leader.imbalance.check.interval.seconds",
        leader_imbalance_check_interval_seconds,
        u64,
        1,
        "an integer >= 1",
        5
    ),
    // Checked together (`Config::listeners`) once every setting is applied: each alone
    // cannot tell whether a listener name is known.
    Setting {
        name: "controller.listener.names",
        allowed: "a comma-separated list of listener names",
        config_type: 2,
        apply: |c, v| {
            c.listener_settings.controller_listener_names = Some(v.trim().to_string());
            Ok(())
        },
        read: |c| {
            c.listeners()
                .map(|l| {
                    let names: Vec<&str> = l.controller.iter().map(|n| n.as_str()).collect();
                    names.join(",")
                })
                .unwrap_or_default()
        },
    },
    Setting {
        name: "inter.broker.listener.name",
        allowed: "a listener name of advertised.listeners",
        config_type: 2,
        apply: |c, v| {
            c.listener_settings.inter_broker_listener_name = Some(v.trim().to_string());
            Ok(())
        },
        read: |c| {
            c.listeners()
                .map(|l| l.inter_broker.to_string())
                .unwrap_or_default()
        },
    },
    Setting {
        name: "listener.security.protocol.map",
        allowed: "NAME:PROTOCOL pairs (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)",
        config_type: 2,
        apply: |c, v| {
            c.listener_settings.protocol_map = Some(v.trim().to_string());
            Ok(())
        },
        read: |c| {
            c.listener_settings
                .protocol_map
                .clone()
                .unwrap_or_else(|| crate::listeners::DEFAULT_PROTOCOL_MAP.to_string())
        },
    },
    Setting {
        name: "listeners",
        allowed: "NAME://host:port,... (an empty host: every interface)",
        // LIST, as Kafka types it.
        config_type: 7,
        apply: |c, v| {
            c.listener_settings.listeners = Some(v.trim().to_string());
            Ok(())
        },
        read: |c| listeners_read(c, |l| &l.bound),
    },
    Setting {
        name: "super.users",
        allowed: "principals separated by ';', e.g. User:admin;User:broker",
        config_type: 2,
        apply: |c, v| {
            c.authorizer.super_users = crate::authorizer::standard::parse_super_users(v)?;
            Ok(())
        },
        read: |c| c.authorizer.super_users.join(";"),
    },
    Setting {
        name: "security.inter.broker.protocol",
        allowed: "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
        config_type: 2,
        apply: |c, v| {
            crate::listeners::SecurityProtocol::parse(v)?;
            c.listener_settings.security_inter_broker_protocol = Some(v.trim().to_string());
            Ok(())
        },
        read: |c| {
            c.listeners()
                .ok()
                .and_then(|l| l.advertised(&l.inter_broker).map(|e| e.protocol.name()))
                .unwrap_or("PLAINTEXT")
                .to_string()
        },
    },
    Setting {
        name: "log.cleaner.backoff.ms",
        allowed: "an integer >= 0",
        config_type: 5,
        apply: |c, v| {
            c.log_cleaner_backoff_ms = number::<u64>(v, 0)?;
            Ok(())
        },
        read: |c| c.log_cleaner_backoff_ms.to_string(),
    },
    numeric!(
        "log.cleaner.dedupe.buffer.size",
        log_cleaner_dedupe_buffer_size,
        usize,
        1 << 20,
        "an integer >= 1048576",
        5
    ),
    Setting {
        name: "log.cleaner.enable",
        allowed: "true or false",
        config_type: 1,
        apply: |c, v| {
            c.log_cleaner_enable = boolean(v)?;
            Ok(())
        },
        read: |c| c.log_cleaner_enable.to_string(),
    },
    Setting {
        name: "log.cleaner.io.max.bytes.per.second",
        allowed: "a number > 0",
        config_type: 6,
        apply: |c, v| {
            let rate = number::<f64>(v, f64::MIN_POSITIVE)?;
            c.log_cleaner_io_max_bytes_per_second = rate;
            Ok(())
        },
        read: |c| java_double(c.log_cleaner_io_max_bytes_per_second),
    },
    numeric!(
        "log.cleaner.threads",
        log_cleaner_threads,
        usize,
        1,
        "an integer >= 1",
        3
    ),
    Setting {
        name: "log.dirs",
        allowed: "one directory",
        // LIST, as Kafka types it.
        config_type: 7,
        apply: |c, v| {
            if v.contains(',') {
                return Err("Logbook uses one log directory".into());
            }
            c.data_dir = v.trim().into();
            Ok(())
        },
        read: |c| c.data_dir.display().to_string(),
    },
    numeric!(
        "log.retention.check.interval.ms",
        log_retention_check_interval_ms,
        u64,
        1,
        "an integer >= 1",
        5
    ),
    Setting {
        name: "log.retention.hours",
        allowed: "an integer >= -1",
        config_type: 3,
        apply: |c, v| retention(c, "log.retention.hours", v),
        read: |c| c.log_retention_ms.to_string(),
    },
    Setting {
        name: "log.retention.minutes",
        allowed: "an integer >= -1",
        config_type: 3,
        apply: |c, v| retention(c, "log.retention.minutes", v),
        read: |c| c.log_retention_ms.to_string(),
    },
    Setting {
        name: "log.retention.ms",
        allowed: "an integer >= -1",
        config_type: 5,
        apply: |c, v| retention(c, "log.retention.ms", v),
        read: |c| c.log_retention_ms.to_string(),
    },
    Setting {
        name: "log.segment.bytes",
        allowed: "an integer >= 14",
        config_type: 3,
        apply: |c, v| {
            c.log_segment_bytes = number::<i32>(v, 14)?.into();
            c.static_broker_configs
                .insert("log.segment.bytes".into(), v.trim().into());
            Ok(())
        },
        read: |c| c.log_segment_bytes.to_string(),
    },
    numeric!(
        "max.connections",
        limits.connections_max,
        usize,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "max.connection.creation.rate",
        limits.max_connection_creation_rate,
        u32,
        0,
        "an integer >= 0",
        3
    ),
    numeric!(
        "max.connections.per.ip",
        limits.max_connections_per_ip,
        usize,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "max.incremental.fetch.session.cache.slots",
        limits.fetch_session_cache_slots,
        usize,
        0,
        "an integer >= 0",
        3
    ),
    Setting {
        name: "message.max.bytes",
        allowed: "an integer >= 0",
        config_type: 3,
        apply: |c, v| {
            c.limits.message_max_bytes = number::<i32>(v, 0)?;
            c.static_broker_configs
                .insert("message.max.bytes".into(), v.trim().into());
            Ok(())
        },
        read: |c| c.limits.message_max_bytes.to_string(),
    },
    numeric!("node.id", node_id, i32, 0, "an integer >= 0", 3),
    numeric!(
        "num.partitions",
        num_partitions,
        i32,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "offsets.retention.check.interval.ms",
        offsets_retention_check_interval_ms,
        u64,
        1,
        "an integer >= 1",
        5
    ),
    numeric!(
        "offsets.retention.minutes",
        offsets_retention_minutes,
        i64,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "offsets.topic.num.partitions",
        offsets_topic_num_partitions,
        i32,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "offsets.topic.replication.factor",
        offsets_topic_replication_factor,
        i16,
        1,
        "an integer >= 1",
        4
    ),
    numeric!(
        "offsets.topic.segment.bytes",
        offsets_topic_segment_bytes,
        i32,
        1,
        "an integer >= 1",
        3
    ),
    Setting {
        name: "process.roles",
        allowed: "broker,controller, broker or controller",
        config_type: 7,
        apply: |c, v| {
            c.process_roles = v.parse()?;
            Ok(())
        },
        read: |c| c.process_roles.to_string(),
    },
    numeric!(
        "producer.id.expiration.ms",
        producer_id_expiration_ms,
        i64,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "producer.id.expiration.check.interval.ms",
        producer_id_expiration_check_interval_ms,
        u64,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        transaction_abort_timed_out_transaction_cleanup_interval_ms,
        u64,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "transaction.max.timeout.ms",
        transaction_max_timeout_ms,
        i32,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        transaction_remove_expired_transaction_cleanup_interval_ms,
        u64,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "transaction.state.log.num.partitions",
        transaction_state_log_num_partitions,
        i32,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "transaction.state.log.replication.factor",
        transaction_state_log_replication_factor,
        i16,
        1,
        "an integer >= 1",
        4
    ),
    numeric!(
        "transaction.state.log.segment.bytes",
        transaction_state_log_segment_bytes,
        i32,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "transaction.state.log.min.isr",
        transaction_state_log_min_isr,
        i32,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "transactional.id.expiration.ms",
        transactional_id_expiration_ms,
        i64,
        1,
        "an integer >= 1",
        3
    ),
    numeric!(
        "socket.request.max.bytes",
        limits.frame_bytes_max,
        usize,
        1,
        "an integer >= 1",
        3
    ),
];

/// `log.retention.{ms,minutes,hours}`: sets the flag in milliseconds and records the
/// static config under the name given, so DescribeConfigs shows Kafka's synonyms.
///
/// Whatever order they come in (a config file may list `log.retention.ms` above the stock
/// `log.retention.hours=168`), the one in force is Kafka's pick: `ms`, else `minutes`, else
/// `hours`.
fn retention(c: &mut Config, name: &str, value: &str) -> Result<(), String> {
    number::<i64>(value, -1)?;
    c.static_broker_configs
        .insert(name.into(), value.trim().into());
    let in_force = [
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", 3_600_000),
    ]
    .into_iter()
    .find_map(|(key, factor)| {
        let n = c.static_broker_configs.get(key)?.parse::<i64>().ok()?;
        Some(if n < 0 { -1 } else { n.saturating_mul(factor) })
    });
    if let Some(ms) = in_force {
        c.log_retention_ms = ms;
    }
    Ok(())
}

/// The setting named `name`.
#[must_use]
pub fn setting(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.name == name)
}

/// Whether `key` names a broker setting [`apply`] takes (one with an effect, a topic
/// default, or a JVM tuning key accepted and ignored).
#[must_use]
pub fn is_known(key: &str) -> bool {
    setting(key).is_some()
        || broker_definition(key).is_some()
        || JVM_TUNING.contains(&key)
        || crate::ssl::is_ssl_setting(key)
        || crate::sasl::is_sasl_setting(key)
}

/// Applies one `KEY=VALUE` under Kafka's name to `config`.
///
/// # Errors
/// A message naming the key, the value and what is allowed.
pub fn apply(config: &mut Config, key: &str, value: &str) -> Result<(), String> {
    if let Some(s) = setting(key) {
        (s.apply)(config, value).map_err(|reason| {
            format!(
                "invalid value '{value}' for broker config {key}: {reason} (allowed: {})",
                s.allowed
            )
        })?;
    } else if let Some(def) = broker_definition(key) {
        crate::topic_config::check(def.kind(), value).map_err(|reason| {
            format!("invalid value '{value}' for broker config {key}: {reason}")
        })?;
        config
            .static_broker_configs
            .insert(key.to_string(), value.trim().to_string());
    } else if crate::ssl::is_ssl_setting(key) || crate::sasl::is_sasl_setting(key) {
        // Checked when the listener that reads it starts (`crate::ssl::server_config`,
        // `crate::sasl::SaslListener::new`).
        config
            .security_settings
            .insert(key.to_string(), value.trim().to_string());
    } else if JVM_TUNING.contains(&key) {
        // Accepted so a Kafka server.properties works as it is, and said at startup.
        config.ignored.push(format!("{key}={value}"));
        return Ok(());
    } else {
        return Err(format!(
            "unknown broker config '{key}' (value '{value}'); known: {}",
            known_names().join(", ")
        ));
    }
    config.explicit.insert(key.to_string());
    Ok(())
}

/// Kafka settings that tune the JVM broker's own thread pools and socket buffers, which
/// Logbook does not have (one async runtime, the kernel's socket buffer sizing). Kafka's
/// stock `server.properties` sets them, so they are accepted, logged as ignored, and not
/// reported by DescribeConfigs.
const JVM_TUNING: &[&str] = &[
    "background.threads",
    "num.io.threads",
    "num.network.threads",
    "num.recovery.threads.per.data.dir",
    "num.replica.alter.log.dirs.threads",
    "num.replica.fetchers",
    "queued.max.requests",
    "socket.receive.buffer.bytes",
    "socket.send.buffer.bytes",
];

/// Every name `--override` accepts, sorted.
fn known_names() -> Vec<&'static str> {
    let mut names: Vec<&str> = SETTINGS.iter().map(|s| s.name).collect();
    names.extend(
        crate::broker_config::BROKER_DEFINITIONS
            .iter()
            .map(|d| d.name),
    );
    names.extend(JVM_TUNING);
    names.sort_unstable();
    names.dedup();
    names
}

/// Environment variables with the `KAFKA_` prefix that Kafka's scripts and docker image
/// use for the JVM, not for broker configs; they are not settings.
const NOT_SETTINGS: &[&str] = &[
    "KAFKA_CLUSTER_ID",
    "KAFKA_DEBUG",
    "KAFKA_GC_LOG_OPTS",
    "KAFKA_HEAP_OPTS",
    "KAFKA_HOME",
    "KAFKA_JMX_HOSTNAME",
    "KAFKA_JMX_OPTS",
    "KAFKA_JMX_PORT",
    "KAFKA_JVM_PERFORMANCE_OPTS",
    "KAFKA_LOG4J_LOGGERS",
    "KAFKA_LOG4J_OPTS",
    "KAFKA_LOG4J_ROOT_LOGLEVEL",
    "KAFKA_OPTS",
    "KAFKA_TOOLS_LOG4J_LOGLEVEL",
    "KAFKA_VERSION",
];

/// The Kafka name of a `KAFKA_*` environment variable, as the Kafka docker image maps
/// them: prefix dropped, lower case, `___` → `-`, `__` → `_`, `_` → `.`; `None` for
/// other variables and [`NOT_SETTINGS`].
#[must_use]
pub fn env_key(var: &str) -> Option<String> {
    let rest = var.strip_prefix("KAFKA_")?;
    if rest.is_empty() || NOT_SETTINGS.contains(&var) {
        return None;
    }
    Some(
        rest.to_ascii_lowercase()
            .replace("___", "-")
            .replace("__", "\u{0}")
            .replace('_', ".")
            .replace('\u{0}', "_"),
    )
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    // DOUBLE configs read as Java writes them, since tools show Kafka's text.
    #[test]
    fn doubles_as_java_writes_them() {
        assert_eq!(java_double(f64::MAX), "1.7976931348623157E308");
        assert_eq!(java_double(0.5), "0.5");
        assert_eq!(java_double(1_048_576.0), "1048576.0");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(java_double(12_345_678.0), "1.2345678E7");
        assert_eq!(java_double(0.000_1), "1.0E-4");
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(f64::INFINITY), "Infinity");
        let mut c = Config::parse_from(["logbook"]);
        let setting = setting("log.cleaner.io.max.bytes.per.second").expect("a setting");
        assert_eq!((setting.read)(&c), "1.7976931348623157E308");
        (setting.apply)(&mut c, "1.7976931348623157E308").expect("Kafka's default parses");
        assert_eq!(c.log_cleaner_io_max_bytes_per_second, f64::MAX);
    }

    // The produce-path bounds default to what produce.rs had as constants and follow
    // their flags; validation leaves the async worker from the thresholds on.
    #[test]
    fn produce_validation_limits() {
        let c = Config::parse_from(["logbook"]);
        assert_eq!(c.limits.decompressed_batch_bytes_max, 64 << 20);
        assert_eq!(c.limits.block_in_place_compressed_bytes_min, 64 << 10);
        assert_eq!(c.limits.block_in_place_bytes_min, 1 << 20);
        assert!(!c
            .limits
            .validation_off_worker()
            .applies_to((64 << 10) - 1, true));
        assert!(c.limits.validation_off_worker().applies_to(64 << 10, true));
        assert!(!c.limits.validation_off_worker().applies_to(64 << 10, false));
        assert!(c.limits.validation_off_worker().applies_to(1 << 20, false));
        let c = Config::parse_from([
            "logbook",
            "--decompressed-batch-bytes-max",
            "1000",
            "--block-in-place-compressed-bytes-min",
            "10",
            "--block-in-place-bytes-min",
            "20",
        ]);
        assert_eq!(c.limits.decompressed_batch_bytes_max, 1000);
        assert!(c.limits.validation_off_worker().applies_to(10, true));
        assert!(!c.limits.validation_off_worker().applies_to(19, false));
        assert!(c.limits.validation_off_worker().applies_to(20, false));
    }

    // KAFKA_* variables map to Kafka names as the docker image maps them; JVM variables
    // are not settings.
    #[test]
    fn env_keys() {
        assert_eq!(
            env_key("KAFKA_LOG_SEGMENT_BYTES").as_deref(),
            Some("log.segment.bytes")
        );
        assert_eq!(env_key("KAFKA_A__B___C").as_deref(), Some("a_b-c"));
        assert_eq!(env_key("KAFKA_HEAP_OPTS"), None);
        assert_eq!(env_key("LOGBOOK_DATA_DIR"), None);
    }

    // A KAFKA_* variable naming no setting is set aside (logged at start), not an error;
    // the same key through --override still is, and a known variable still applies.
    #[test]
    fn unknown_kafka_variables_are_set_aside() {
        let mut c = Config::parse_from(["logbook"]);
        c.apply_kafka_settings([
            ("KAFKA_BOOTSTRAP".to_string(), "127.0.0.1:9092".to_string()),
            ("KAFKA_BROKERS".to_string(), "a:9092".to_string()),
            ("KAFKA_NUM_PARTITIONS".to_string(), "4".to_string()),
        ])
        .expect("unknown variables do not stop the start");
        assert_eq!(c.ignored_env, vec!["KAFKA_BOOTSTRAP", "KAFKA_BROKERS"]);
        assert_eq!(c.num_partitions, 4);
        let mut c = Config::parse_from(["logbook", "--override", "bootstrap=x"]);
        let e = c.apply_kafka_settings([]).expect_err("a mistyped override");
        assert!(e.contains("unknown broker config 'bootstrap'"), "{e}");
    }

    // --override beats KAFKA_*, which beats flags; hours become milliseconds; a bad value
    // names key, value and what is allowed.
    #[test]
    fn precedence_and_errors() {
        let mut c = Config::parse_from([
            "logbook",
            "--num-partitions",
            "2",
            "--override",
            "num.partitions=5",
            "--override",
            "log.retention.hours=2",
        ]);
        c.apply_kafka_settings([("KAFKA_NUM_PARTITIONS".to_string(), "4".to_string())])
            .expect("valid settings");
        assert_eq!(c.num_partitions, 5);
        assert_eq!(c.log_retention_ms, 7_200_000);
        assert!(c.explicit.contains("num.partitions"));
        assert!(
            !c.explicit.contains("log.dirs"),
            "a setting left at its default is not static"
        );
        let mut c = Config::parse_from(["logbook", "--override", "max.connections.per.ip=-1"]);
        let e = c
            .apply_kafka_settings([])
            .expect_err("a negative connection limit");
        assert!(
            e.contains("'-1'") && e.contains("max.connections.per.ip") && e.contains("allowed"),
            "{e}"
        );
    }

    // log.retention.ms wins over .minutes and .hours whatever the order they come in.
    #[test]
    fn retention_keys_in_kafka_precedence() {
        let mut c = Config::parse_from(["logbook"]);
        apply(&mut c, "log.retention.ms", "5000").expect("ms");
        apply(&mut c, "log.retention.hours", "168").expect("hours");
        assert_eq!(c.log_retention_ms, 5000);
        let mut c = Config::parse_from(["logbook"]);
        apply(&mut c, "log.retention.hours", "2").expect("hours");
        apply(&mut c, "log.retention.minutes", "3").expect("minutes");
        assert_eq!(c.log_retention_ms, 180_000);
        assert!(apply(&mut c, "log.retention.hours", "x").is_err());
    }

    // A KRaft listeners line with a CONTROLLER entry and Kafka's empty host: the client
    // listener is bound on every interface and advertised as this machine's name; the
    // CONTROLLER entry is the quorum's. Several client listeners are served.
    #[test]
    fn kraft_listeners_line() {
        let mut c = Config::parse_from([
            "logbook",
            "--override",
            "listeners=PLAINTEXT://:19092,CONTROLLER://:19093",
        ]);
        c.apply_kafka_settings([]).expect("a KRaft listeners line");
        let l = c.listeners().expect("listeners");
        assert_eq!(
            l.bound[0].bind_address().expect("bind").to_string(),
            "0.0.0.0:19092"
        );
        assert_eq!(l.bound.len(), 1);
        assert_eq!(l.advertised[0].host, crate::listeners::local_host_name());
        // Without `listeners`, --listen is the PLAINTEXT listener and --advertised-listener
        // what it advertises.
        let c = Config::parse_from([
            "logbook",
            "--listen",
            "127.0.0.1:19092",
            "--advertised-listener",
            "broker1:9092",
        ]);
        let l = c.listeners().expect("listeners");
        assert_eq!(l.bound[0].to_string(), "PLAINTEXT://127.0.0.1:19092");
        assert_eq!(l.advertised[0].to_string(), "PLAINTEXT://broker1:9092");
        // A controller-only node's listeners name only CONTROLLER.
        let mut c = Config::parse_from(["logbook", "--override", "listeners=CONTROLLER://:19093"]);
        c.apply_kafka_settings([])
            .expect("a controller's listeners line");
        assert!(c.listeners().expect("listeners").bound.is_empty());
        let mut c = Config::parse_from([
            "logbook",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:1,INTERNAL://127.0.0.1:2",
            "--override",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            "--override",
            "advertised.listeners=PLAINTEXT://localhost:1,INTERNAL://logbook:2",
            "--override",
            "inter.broker.listener.name=INTERNAL",
        ]);
        c.apply_kafka_settings([]).expect("two client listeners");
        assert_eq!(
            setting("advertised.listeners").map(|s| (s.read)(&c)),
            Some("PLAINTEXT://localhost:1,INTERNAL://logbook:2".to_string())
        );
        assert_eq!(
            setting("inter.broker.listener.name").map(|s| (s.read)(&c)),
            Some("INTERNAL".to_string())
        );
        // The rest of a Kafka docker image's KRaft environment is taken as it is.
        let mut c = Config::parse_from(["logbook"]);
        c.apply_kafka_settings([
            (
                "KAFKA_CONTROLLER_LISTENER_NAMES".to_string(),
                "CONTROLLER".to_string(),
            ),
            (
                "KAFKA_INTER_BROKER_LISTENER_NAME".to_string(),
                "PLAINTEXT".to_string(),
            ),
            (
                "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP".to_string(),
                "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT".to_string(),
            ),
        ])
        .expect("a KRaft environment");
        // A SASL_SSL inter-broker listener is served (its TLS and login are checked when
        // the broker starts).
        let mut c = Config::parse_from(["logbook"]);
        c.apply_kafka_settings([(
            "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP".to_string(),
            "PLAINTEXT:SASL_SSL".to_string(),
        )])
        .expect("SASL_SSL inter-broker");
        assert_eq!(
            c.listeners().expect("listeners").advertised[0].protocol,
            crate::listeners::SecurityProtocol::SaslSsl
        );
    }

    // SSL and SASL listeners are served for clients, between brokers and to the
    // controllers; the controller listener's protocol is its protocol map entry.
    #[test]
    fn secured_listeners_where_they_are_served() {
        let config = |overrides: &[&str]| {
            let mut args = vec!["logbook".to_owned()];
            for o in overrides {
                args.extend(["--override".to_owned(), (*o).to_owned()]);
            }
            let mut c = Config::parse_from(args);
            c.apply_kafka_settings([]).map(|()| c)
        };
        let c = config(&["listeners=PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2"]).expect("SSL");
        assert_eq!(
            c.listeners().expect("listeners").bound[1].protocol,
            crate::listeners::SecurityProtocol::Ssl
        );
        let c = config(&[
            "listeners=PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2",
            "security.inter.broker.protocol=SSL",
        ])
        .expect("SSL between brokers");
        assert_eq!(
            c.listeners().expect("listeners").inter_broker.as_str(),
            "SSL"
        );
        let c = config(&[
            "listeners=PLAINTEXT://127.0.0.1:1,CONTROLLER://127.0.0.1:2",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
        ])
        .expect("SSL to the controllers");
        assert_eq!(
            c.listeners().expect("listeners").controller_protocol,
            crate::listeners::SecurityProtocol::Ssl
        );
        let c = config(&[
            "listeners=PLAINTEXT://127.0.0.1:1,SASL_PLAINTEXT://127.0.0.1:2,SASL_SSL://127.0.0.1:3",
        ])
        .expect("SASL client listeners");
        let protocols: Vec<_> = c
            .listeners()
            .expect("listeners")
            .bound
            .iter()
            .map(|e| e.protocol)
            .collect();
        use crate::listeners::SecurityProtocol::{Plaintext, SaslPlaintext, SaslSsl};
        assert_eq!(protocols, [Plaintext, SaslPlaintext, SaslSsl]);
    }

    // The cluster settings take Kafka's names through --override and KAFKA_*, and are
    // checked together with node.id once all are applied.
    #[test]
    fn cluster_settings_by_kafka_name() {
        let mut c = Config::parse_from([
            "logbook",
            "--override",
            "process.roles=controller",
            "--override",
            "controller.quorum.voters=1@127.0.0.1:19811,2@127.0.0.1:19821",
        ]);
        c.apply_kafka_settings([("KAFKA_NODE_ID".to_string(), "2".to_string())])
            .expect("a controller that is a voter");
        let cluster = c.cluster().expect("checked");
        assert_eq!(cluster.node_id, 2);
        assert!(!cluster.roles.broker && cluster.roles.controller);
        assert_eq!(
            cluster.controller_address.map(|v| v.address()),
            Some("127.0.0.1:19821".to_string())
        );
        assert!(c.explicit.contains("process.roles"));
        assert_eq!(
            (setting("controller.quorum.voters").expect("a setting").read)(&c),
            "1@127.0.0.1:19811,2@127.0.0.1:19821"
        );

        let mut c = Config::parse_from([
            "logbook",
            "--node-id",
            "3",
            "--controller-quorum-voters",
            "1@127.0.0.1:19811,2@127.0.0.1:19821",
        ]);
        let e = c
            .apply_kafka_settings([])
            .expect_err("a combined node that is not a voter");
        assert!(e.contains("node.id 3 must be one of"), "{e}");

        let mut c = Config::parse_from(["logbook", "--override", "process.roles=broker,broker"]);
        let e = c.apply_kafka_settings([]).expect_err("a duplicate role");
        assert!(
            e.contains("process.roles") && e.contains("duplicate role 'broker'"),
            "{e}"
        );

        let mut c = Config::parse_from(["logbook"]);
        c.apply_kafka_settings([]).expect("defaults");
        assert!(c.cluster().expect("checked").is_single_node());
        assert!(!c.explicit.contains("process.roles"));
        assert!(!c.explicit.contains("controller.quorum.voters"));
    }

    // The flags refuse bad values when parsed, with clap's message naming the flag.
    #[test]
    fn cluster_flags_parse() {
        let e = Config::try_parse_from(["logbook", "--controller-quorum-voters", "1@h:1,1@h:2"])
            .expect_err("duplicate ids");
        assert!(e.to_string().contains("duplicate voter id 1"), "{e}");
        let e = Config::try_parse_from(["logbook", "--process-roles", "brokers"])
            .expect_err("unknown role");
        assert!(
            e.to_string().contains("unknown process role 'brokers'"),
            "{e}"
        );
    }

    // A value given by a flag (or its LOGBOOK_* variable) is a static broker config, as Kafka
    // reports what server.properties sets; the rest stay defaults.
    #[test]
    fn flags_are_static_configs() {
        let mut c = Config::parse_from(["logbook", "--listen", "127.0.0.1:19092"]);
        c.apply_kafka_settings(Vec::new()).expect("apply");
        assert!(c.explicit.contains("listeners"), "{:?}", c.explicit);
        assert!(!c.explicit.contains("num.partitions"), "{:?}", c.explicit);
    }
}
