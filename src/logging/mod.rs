//! The broker's own log: its format, and the level of each logger, set in config and
//! changed at runtime through Kafka's BROKER_LOGGER config resource (Kafka's
//! `Log4jController`; the request side is `handlers::broker_loggers`).
//!
//! `names` maps Kafka's logger names to skua's module paths; `levels` holds the level of
//! each tracing target and filters the output by it; `config` reads the `logging.*` keys;
//! `json` is the JSON line format.
//!
//! The levels are process-wide, as log4j's are: [`install`] sets them up with the output;
//! a broker built without it (the in-process tests) gets [`loggers`]' own, whose changes
//! are kept and described but filter no output.

pub mod config;
pub mod json;
pub mod levels;
pub mod names;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, RwLock};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

pub use config::{Format, LoggingConfig};
pub use levels::Level;
use levels::{Levels, LevelsFilter};

/// Every logger's level, and the filter of the output that follows them.
pub struct Loggers {
    state: Mutex<State>,
    filter: LevelsFilter,
}

struct State {
    root: Level,
    /// RUST_LOG's `target=level` pairs: beneath every logger's level.
    base: HashMap<String, Level>,
    /// The loggers with a level of their own (root aside), each with when it was set: of
    /// two loggers standing for one target, the later set wins.
    set: HashMap<String, (Level, u64)>,
    changes: u64,
}

impl State {
    fn levels(&self) -> Levels {
        let mut targets = self.base.clone();
        let mut set: Vec<_> = self.set.iter().collect();
        set.sort_by_key(|(_, (_, at))| *at);
        for (name, (level, _)) in set {
            for target in names::targets(name).unwrap_or_default() {
                targets.insert(target, *level);
            }
        }
        Levels {
            root: self.root,
            targets,
        }
    }
}

impl Loggers {
    /// The levels `config` sets, under RUST_LOG's when `rust_log` is given (its bare level
    /// replaces the root's; its `target=level` pairs stand beneath the loggers').
    pub fn new(config: &LoggingConfig, rust_log: Option<&str>) -> Loggers {
        let mut state = State {
            root: Level::Info,
            base: HashMap::new(),
            set: HashMap::new(),
            changes: 0,
        };
        for (name, level) in &config.levels {
            match name.as_str() {
                names::ROOT => state.root = *level,
                _ => {
                    state.changes += 1;
                    state.set.insert(name.clone(), (*level, state.changes));
                }
            }
        }
        for directive in rust_log.unwrap_or("").split(',').map(str::trim) {
            match directive.split_once('=') {
                Some((target, level)) => {
                    if let Some(level) = Level::parse_lenient(level) {
                        state.base.insert(target.trim().to_string(), level);
                    }
                }
                None => {
                    if let Some(level) = Level::parse_lenient(directive) {
                        state.root = level;
                    }
                }
            }
        }
        let filter = LevelsFilter(Arc::new(RwLock::new(state.levels())));
        Loggers {
            state: Mutex::new(state),
            filter,
        }
    }

    /// Whether `name` is a logger (Kafka's `Log4jController.loggerExists`).
    pub fn exists(&self, name: &str) -> bool {
        names::targets(name).is_some()
    }

    /// Every listed logger and every logger set, with its level: its own, or (unset) the
    /// level its first target is logged at. By name.
    pub fn describe(&self) -> Vec<(String, String)> {
        let state = self.state.lock();
        let levels = state.levels();
        let mut described: Vec<(String, String)> = names::listed()
            .chain(state.set.keys().cloned())
            .map(|name| {
                let level = match (name.as_str(), state.set.get(&name)) {
                    (names::ROOT, _) => state.root,
                    (_, Some((level, _))) => *level,
                    _ => {
                        let targets = names::targets(&name).unwrap_or_default();
                        targets.first().map_or(state.root, |t| levels.level_of(t))
                    }
                };
                (name, level.name().to_string())
            })
            .collect();
        described.sort();
        described.dedup();
        described
    }

    /// Sets logger `name`'s level (an existing logger; see [`Loggers::exists`]).
    pub fn set(&self, name: &str, level: Level) {
        let mut state = self.state.lock();
        if name == names::ROOT {
            state.root = level;
        } else {
            state.changes += 1;
            let at = state.changes;
            state.set.insert(name.to_string(), (level, at));
        }
        self.filter.set(state.levels());
    }

    /// Takes logger `name`'s own level away: it is logged at its ancestors' again. The
    /// root's level cannot be taken away.
    pub fn unset(&self, name: &str) {
        let mut state = self.state.lock();
        if state.set.remove(name).is_some() {
            self.filter.set(state.levels());
        }
    }
}

static LOGGERS: OnceLock<Loggers> = OnceLock::new();

/// The process's loggers: those [`install`] set up, else levels that filter nothing.
pub fn loggers() -> &'static Loggers {
    LOGGERS.get_or_init(|| Loggers::new(&LoggingConfig::default(), None))
}

/// Sets up the process's log output (stdout, in `config`'s format) and its loggers'
/// levels, RUST_LOG's beneath them. Once per process.
pub fn install(config: &LoggingConfig) -> Result<(), String> {
    let rust_log = std::env::var("RUST_LOG").ok();
    let loggers = Loggers::new(config, rust_log.as_deref());
    let filter = loggers.filter.clone();
    LOGGERS
        .set(loggers)
        .map_err(|_| "the loggers are already set up".to_string())?;
    let output = match config.format {
        Format::Text => tracing_subscriber::fmt::layer()
            .with_target(false)
            // Colours only on a terminal: logs redirected to a file stay plain text.
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()))
            .boxed(),
        Format::Json => tracing_subscriber::fmt::layer()
            .event_format(json::JsonFormat)
            .boxed(),
    };
    tracing_subscriber::registry()
        .with(output.with_filter(filter))
        .try_init()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(loggers: &Loggers, name: &str) -> String {
        let described = loggers.describe();
        let found = described.iter().find(|(n, _)| n == name);
        found.map(|(_, l)| l.clone()).unwrap_or_default()
    }

    fn target_level(loggers: &Loggers, target: &str) -> Level {
        loggers.filter.0.read().level_of(target)
    }

    #[test]
    fn kafka_names_and_module_paths_set_the_same_targets_the_later_winning() {
        let loggers = Loggers::new(&LoggingConfig::default(), None);
        assert_eq!(level(&loggers, "root"), "INFO");
        assert_eq!(level(&loggers, "kafka.server.ReplicaManager"), "INFO");
        loggers.set("kafka.server.ReplicaManager", Level::Debug);
        assert_eq!(target_level(&loggers, "skua::replica::isr"), Level::Debug);
        assert_eq!(level(&loggers, "skua::replica"), "DEBUG");
        assert_eq!(level(&loggers, "kafka.server.ReplicaManager"), "DEBUG");
        loggers.set("skua::replica", Level::Trace);
        assert_eq!(target_level(&loggers, "skua::replica::isr"), Level::Trace);
        // Its own level stays what it was set to.
        assert_eq!(level(&loggers, "kafka.server.ReplicaManager"), "DEBUG");
        loggers.unset("skua::replica");
        assert_eq!(target_level(&loggers, "skua::replica::isr"), Level::Debug);
        loggers.unset("kafka.server.ReplicaManager");
        assert_eq!(target_level(&loggers, "skua::replica::isr"), Level::Info);
        loggers.set("root", Level::Warn);
        assert_eq!(level(&loggers, "kafka.server.ReplicaManager"), "WARN");
        assert_eq!(
            target_level(&loggers, "zookeeper_client::session"),
            Level::Warn
        );
        // A logger below the listed ones is described once set.
        assert_eq!(level(&loggers, "skua::log::cleaner"), "");
        loggers.set("skua::log::cleaner", Level::Fatal);
        assert_eq!(level(&loggers, "skua::log::cleaner"), "FATAL");
    }

    #[test]
    fn config_then_rust_log_beneath() {
        let config = LoggingConfig {
            format: Format::Text,
            levels: vec![
                ("root".into(), Level::Warn),
                ("kafka.log.LogCleaner".into(), Level::Debug),
            ],
        };
        let loggers = Loggers::new(&config, Some("debug,skua::log=trace,h2=off"));
        assert_eq!(level(&loggers, "root"), "DEBUG");
        assert_eq!(target_level(&loggers, "skua::log::segment"), Level::Trace);
        assert_eq!(
            target_level(&loggers, "skua::log::cleaner::clean"),
            Level::Debug
        );
        assert_eq!(target_level(&loggers, "h2::proto"), Level::Off);
        assert_eq!(level(&loggers, "kafka.log.LogCleaner"), "DEBUG");
    }
}
