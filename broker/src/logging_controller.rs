//! `LoggingController`: the broker's log levels as Kafka's broker loggers (KIP-412), so
//! `kafka-configs.sh --entity-type broker-loggers --entity-name ID` lists them and changes
//! them at run time (DescribeConfigs and IncrementalAlterConfigs of resource type
//! BROKER_LOGGER), as an operator does on Kafka to debug a live broker.
//!
//! A logger is a `tracing` target: `root` (events no other logger claims), each crate of
//! the broker (`logbook_broker`, `logbook_replication`, …) and `openraft`; a module path
//! under a crate (`logbook_replication::fetcher`) is a logger too, listed once given a
//! level. Levels are Kafka's names (`FATAL` filters as `ERROR`, which `tracing` has as
//! its highest). The starting levels come from `RUST_LOG` (or the broker's default,
//! `info,openraft=warn`); a change rebuilds the subscriber's filter from them and the
//! levels set since. Changes are not kept across a restart, as on Kafka.
//!
//! The levels are process-wide because the subscriber is: [`install`] registers the
//! filter's reload function once, at start-up; [`controller`] is what the handlers use.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

/// The logger that holds the level of every target no other logger names.
pub const ROOT_LOGGER: &str = "root";

/// The levels a logger may be set to (Kafka's `LogLevelConfig.VALID_LOG_LEVELS`).
pub const VALID_LOG_LEVELS: [&str; 6] = ["DEBUG", "ERROR", "FATAL", "INFO", "TRACE", "WARN"];

/// Loggers every broker has: the targets of the broker's crates and of the Raft library.
const KNOWN_LOGGERS: [&str; 11] = [
    "logbook",
    "logbook_broker",
    "logbook_client",
    "logbook_common",
    "logbook_controller",
    "logbook_coordinator",
    "logbook_metadata",
    "logbook_protocol",
    "logbook_replication",
    "logbook_storage",
    "openraft",
];

/// Most loggers that may have a level of their own: a module path under a crate is a
/// logger, so without a bound the filter (rebuilt whole on every change) could grow
/// without end. Far above the broker's modules.
pub const LOGGERS_MAX: usize = 1_000;

/// Installs a new filter built from directives; fails if the subscriber is gone.
pub type Reload = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// One change IncrementalAlterConfigs asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoggerChange {
    /// SET: the logger's level (a name of [`VALID_LOG_LEVELS`]).
    Set {
        /// The logger.
        logger: String,
        /// The level.
        level: String,
    },
    /// DELETE: the logger takes its starting level again (or the root's).
    Unset {
        /// The logger.
        logger: String,
    },
}

/// Why a change was refused: Kafka's error (INVALID_CONFIG when true, else INVALID_REQUEST)
/// and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// INVALID_CONFIG (true) or INVALID_REQUEST (false).
    pub invalid_config: bool,
    /// Kafka's message.
    pub message: String,
}

#[derive(Debug)]
struct Levels {
    /// The root level.
    root: String,
    /// Levels of named loggers: the starting ones, then those set since.
    loggers: BTreeMap<String, String>,
    /// Directives of the starting filter that are not a plain level (span or field
    /// filters): kept as they are in every rebuilt filter.
    other: Vec<String>,
}

/// The broker's loggers and their levels. See the module docs.
pub struct LoggingController {
    /// Levels as the broker started, for DELETE.
    start: BTreeMap<String, String>,
    levels: Mutex<Levels>,
    reload: Option<Reload>,
}

impl LoggingController {
    /// Loggers from `directives` (`RUST_LOG` syntax); `reload` installs a rebuilt filter
    /// (none: levels are only recorded, as in tests that run no subscriber).
    #[must_use]
    pub fn new(directives: &str, reload: Option<Reload>) -> Self {
        // An `EnvFilter` with no bare level enables nothing that no directive names.
        let mut root = "OFF".to_owned();
        let mut loggers = BTreeMap::new();
        let mut other = Vec::new();
        for directive in directives
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
        {
            let plain = match directive.split_once('=') {
                None => kafka_level(directive).map(|level| (ROOT_LOGGER, level)),
                Some((target, level)) if is_target(target) => {
                    kafka_level(level).map(|level| (target, level))
                }
                Some(_) => None,
            };
            match plain {
                Some((ROOT_LOGGER, level)) => level.clone_into(&mut root),
                Some((target, level)) => {
                    loggers.insert(target.to_owned(), level.to_owned());
                }
                None => other.push(directive.to_owned()),
            }
        }
        let mut start = loggers.clone();
        start.insert(ROOT_LOGGER.to_owned(), root.clone());
        Self {
            start,
            levels: Mutex::new(Levels {
                root,
                loggers,
                other,
            }),
            reload,
        }
    }

    /// Every logger with its level, `root` first: the known ones, and any other that has a
    /// level of its own.
    #[must_use]
    pub fn loggers(&self) -> Vec<(String, String)> {
        let levels = self.lock();
        let mut out = vec![(ROOT_LOGGER.to_owned(), levels.root.clone())];
        let mut names: Vec<&str> = KNOWN_LOGGERS.to_vec();
        names.extend(levels.loggers.keys().map(String::as_str));
        names.sort_unstable();
        names.dedup();
        for name in names {
            let level = levels.loggers.get(name).unwrap_or(&levels.root);
            out.push((name.to_owned(), level.clone()));
        }
        out
    }

    /// Checks `changes` as Kafka's `ConfigAdminManager.validateLogLevelConfigs` does, and
    /// unless `validate_only` applies them all together; nothing changes if one is refused.
    ///
    /// # Errors
    /// The first refusal: an unknown logger or a level that is not one (INVALID_CONFIG),
    /// DELETE of `root` (INVALID_REQUEST); a filter the subscriber refused.
    pub fn alter(&self, changes: &[LoggerChange], validate_only: bool) -> Result<(), Refused> {
        let mut levels = self.lock();
        for change in changes {
            let logger = match change {
                LoggerChange::Set { logger, .. } | LoggerChange::Unset { logger } => logger,
            };
            if !Self::exists(&levels, logger) {
                return Err(Refused {
                    invalid_config: true,
                    message: format!("Logger {logger} does not exist!"),
                });
            }
            match change {
                LoggerChange::Set { logger, level }
                    if !VALID_LOG_LEVELS.contains(&level.as_str()) =>
                {
                    return Err(Refused {
                        invalid_config: true,
                        message: format!(
                            "Cannot set the log level of {logger} to {level} as it is not a supported log level. Valid log levels are {}",
                            VALID_LOG_LEVELS.join(", ")
                        ),
                    });
                }
                LoggerChange::Unset { logger } if logger == ROOT_LOGGER => {
                    return Err(Refused {
                        invalid_config: false,
                        message: "Removing the log level of the root logger is not allowed"
                            .to_owned(),
                    });
                }
                _ => {}
            }
        }
        let named: std::collections::BTreeSet<&str> = levels
            .loggers
            .keys()
            .map(String::as_str)
            .chain(changes.iter().filter_map(|c| match c {
                LoggerChange::Set { logger, .. } if logger != ROOT_LOGGER => Some(logger.as_str()),
                _ => None,
            }))
            .collect();
        if named.len() > LOGGERS_MAX {
            return Err(Refused {
                invalid_config: true,
                message: format!(
                    "At most {LOGGERS_MAX} loggers may have a level of their own; DELETE some first"
                ),
            });
        }
        if validate_only || changes.is_empty() {
            return Ok(());
        }
        let before = (levels.root.clone(), levels.loggers.clone());
        for change in changes {
            match change {
                LoggerChange::Set { logger, level } if logger == ROOT_LOGGER => {
                    levels.root.clone_from(level);
                }
                LoggerChange::Set { logger, level } => {
                    levels.loggers.insert(logger.clone(), level.clone());
                }
                LoggerChange::Unset { logger } => match self.start.get(logger) {
                    Some(level) => {
                        levels.loggers.insert(logger.clone(), level.clone());
                    }
                    None => {
                        levels.loggers.remove(logger);
                    }
                },
            }
        }
        let directives = Self::directives(&levels);
        if let Some(reload) = &self.reload {
            if let Err(e) = reload(&directives) {
                (levels.root, levels.loggers) = before;
                return Err(Refused {
                    invalid_config: false,
                    message: format!("the log filter could not be changed: {e}"),
                });
            }
        }
        tracing::info!(filter = %directives, "log levels changed");
        Ok(())
    }

    /// A logger exists if the broker has it, it has a level, or it is a module path under
    /// one of the broker's crates.
    fn exists(levels: &Levels, logger: &str) -> bool {
        logger == ROOT_LOGGER
            || KNOWN_LOGGERS.contains(&logger)
            || levels.loggers.contains_key(logger)
            || logger
                .split_once("::")
                .is_some_and(|(krate, path)| KNOWN_LOGGERS.contains(&krate) && is_target(path))
    }

    /// The filter for the current levels: the root level, the kept directives, then one
    /// directive per logger with a level.
    fn directives(levels: &Levels) -> String {
        let mut parts = vec![tracing_level(&levels.root).to_owned()];
        parts.extend(levels.other.iter().cloned());
        parts.extend(
            levels
                .loggers
                .iter()
                .map(|(logger, level)| format!("{logger}={}", tracing_level(level))),
        );
        parts.join(",")
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Levels> {
        // A poisoned lock only means a panic elsewhere while holding it; the levels
        // themselves are always whole.
        self.levels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Kafka's name of a `tracing` level directive (`info` → `INFO`, `off` → `OFF`).
fn kafka_level(level: &str) -> Option<&'static str> {
    Some(match level.to_ascii_lowercase().as_str() {
        "trace" => "TRACE",
        "debug" => "DEBUG",
        "info" => "INFO",
        "warn" => "WARN",
        "error" => "ERROR",
        "off" => "OFF",
        _ => return None,
    })
}

/// The `tracing` directive of a Kafka level: FATAL filters as ERROR.
fn tracing_level(level: &str) -> &'static str {
    match level {
        "TRACE" => "trace",
        "DEBUG" => "debug",
        "INFO" => "info",
        "WARN" => "warn",
        "ERROR" | "FATAL" => "error",
        _ => "off",
    }
}

/// A plain target: a Rust path (letters, digits, `_` and `::`), nothing a filter directive
/// would read as a span or field filter.
fn is_target(target: &str) -> bool {
    !target.is_empty()
        && target.split("::").all(|part| {
            !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

static CONTROLLER: OnceLock<LoggingController> = OnceLock::new();

/// Registers the broker's loggers once, when the subscriber is set up; a later call is
/// ignored.
pub fn install(directives: &str, reload: Reload) {
    let _ = CONTROLLER.set(LoggingController::new(directives, Some(reload)));
}

/// The broker's loggers: as [`install`] registered them, else the default levels with
/// nothing to reload (a broker run inside a test process).
pub fn controller() -> &'static LoggingController {
    CONTROLLER.get_or_init(|| LoggingController::new(DEFAULT_DIRECTIVES, None))
}

/// The broker's log filter when `RUST_LOG` is not set: openraft logs every vote and
/// membership step at info.
pub const DEFAULT_DIRECTIVES: &str = "info,openraft=warn";

#[cfg(test)]
mod tests {
    use super::*;

    fn set(logger: &str, level: &str) -> LoggerChange {
        LoggerChange::Set {
            logger: logger.to_owned(),
            level: level.to_owned(),
        }
    }

    #[test]
    fn starting_levels_come_from_the_directives() {
        let c = LoggingController::new("info,openraft=warn,logbook_storage[seg]=debug", None);
        let loggers: BTreeMap<_, _> = c.loggers().into_iter().collect();
        assert_eq!(loggers["root"], "INFO");
        assert_eq!(loggers["openraft"], "WARN");
        assert_eq!(loggers["logbook_broker"], "INFO");
        assert_eq!(c.loggers()[0].0, "root");
        let levels = c.lock();
        assert_eq!(levels.other, vec!["logbook_storage[seg]=debug".to_owned()]);
    }

    #[test]
    fn changes_rebuild_the_filter_and_delete_restores_the_start() {
        let seen = std::sync::Arc::new(Mutex::new(Vec::<String>::new()));
        let record = std::sync::Arc::clone(&seen);
        let c = LoggingController::new(
            "info,openraft=warn",
            Some(Box::new(move |d: &str| {
                record.lock().expect("lock").push(d.to_owned());
                Ok(())
            })),
        );
        c.alter(
            &[set("logbook_broker", "DEBUG"), set("root", "WARN")],
            false,
        )
        .expect("applied");
        assert_eq!(
            seen.lock().expect("lock").last().expect("a reload"),
            "warn,logbook_broker=debug,openraft=warn"
        );
        c.alter(&[set("logbook_replication::fetcher", "FATAL")], false)
            .expect("applied");
        assert!(c.loggers().contains(&(
            "logbook_replication::fetcher".to_owned(),
            "FATAL".to_owned()
        )));
        let unset = |logger: &str| LoggerChange::Unset {
            logger: logger.to_owned(),
        };
        c.alter(&[unset("openraft"), unset("logbook_broker")], false)
            .expect("applied");
        let loggers: BTreeMap<_, _> = c.loggers().into_iter().collect();
        assert_eq!(loggers["openraft"], "WARN", "back to its starting level");
        assert_eq!(loggers["logbook_broker"], "WARN", "the root's now");
        assert_eq!(
            seen.lock().expect("lock").last().expect("a reload"),
            "warn,logbook_replication::fetcher=error,openraft=warn"
        );
    }

    #[test]
    fn refusals_change_nothing() {
        let c = LoggingController::new(DEFAULT_DIRECTIVES, None);
        let refused = |changes: &[LoggerChange]| c.alter(changes, false).expect_err("refused");
        assert_eq!(
            refused(&[set("logbook_broker", "DEBUG"), set("root", "NOPE")]),
            Refused {
                invalid_config: true,
                message: "Cannot set the log level of root to NOPE as it is not a supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN".to_owned(),
            }
        );
        assert_eq!(
            refused(&[set("no_such", "DEBUG")]).message,
            "Logger no_such does not exist!"
        );
        assert_eq!(
            refused(&[set("logbook_broker::bad path", "DEBUG")]).message,
            "Logger logbook_broker::bad path does not exist!"
        );
        assert_eq!(
            refused(&[LoggerChange::Unset {
                logger: "root".to_owned()
            }]),
            Refused {
                invalid_config: false,
                message: "Removing the log level of the root logger is not allowed".to_owned(),
            }
        );
        let many: Vec<LoggerChange> = (0..=LOGGERS_MAX)
            .map(|i| set(&format!("logbook_storage::m{i}"), "DEBUG"))
            .collect();
        assert_eq!(
            refused(&many).message,
            format!(
                "At most {LOGGERS_MAX} loggers may have a level of their own; DELETE some first"
            )
        );
        c.alter(&[set("logbook_broker", "TRACE")], true)
            .expect("applied");
        let loggers: BTreeMap<_, _> = c.loggers().into_iter().collect();
        assert_eq!(
            loggers["logbook_broker"], "INFO",
            "validate_only and refusals apply nothing"
        );
    }
}
