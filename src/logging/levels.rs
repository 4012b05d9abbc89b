//! Levels: Kafka's log levels, the level each tracing target is logged at, and the
//! subscriber filter that reads them.
//!
//! A target's level is that of its nearest ancestor module path with one (`skua::replica`
//! for `skua::replica::fetcher::thread`, at `::` boundaries: `skua::log` is no ancestor
//! of `skua::logging`), else the root level. The filter answers each callsite once, when
//! it registers; a change of levels asks tracing to ask every callsite again, so an event
//! that stays off costs what it cost before.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::Metadata;
use tracing_subscriber::layer::{Context, Filter};

/// Kafka's log levels (`LogLevelConfig.VALID_LOG_LEVELS`), and log4j's OFF, which a
/// config file may name but the BROKER_LOGGER API refuses (as Kafka does).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Off,
    /// Logged as ERROR: tracing has no level above it.
    Fatal,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl Level {
    /// Kafka's names, in its message's order (`RuntimeLoggerManager.VALID_LOG_LEVELS_STRING`,
    /// sorted).
    pub const KAFKA_NAMES: &'static str = "DEBUG, ERROR, FATAL, INFO, TRACE, WARN";

    /// One of Kafka's level names exactly as `LogLevelConfig` spells it (the API is
    /// case-sensitive: `debug` is refused).
    pub fn from_kafka(name: &str) -> Option<Level> {
        match name {
            "FATAL" => Some(Level::Fatal),
            "ERROR" => Some(Level::Error),
            "WARN" => Some(Level::Warn),
            "INFO" => Some(Level::Info),
            "DEBUG" => Some(Level::Debug),
            "TRACE" => Some(Level::Trace),
            _ => None,
        }
    }

    /// A level in a config file or RUST_LOG: any case, OFF included.
    pub fn parse_lenient(name: &str) -> Option<Level> {
        let upper = name.trim().to_ascii_uppercase();
        match upper.as_str() {
            "OFF" => Some(Level::Off),
            other => Level::from_kafka(other),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Level::Off => "OFF",
            Level::Fatal => "FATAL",
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
            Level::Trace => "TRACE",
        }
    }

    fn filter(self) -> LevelFilter {
        match self {
            Level::Off => LevelFilter::OFF,
            Level::Fatal | Level::Error => LevelFilter::ERROR,
            Level::Warn => LevelFilter::WARN,
            Level::Info => LevelFilter::INFO,
            Level::Debug => LevelFilter::DEBUG,
            Level::Trace => LevelFilter::TRACE,
        }
    }
}

/// The level of every target given one, and the root level for the rest.
#[derive(Clone, Debug)]
pub struct Levels {
    pub root: Level,
    pub targets: HashMap<String, Level>,
}

impl Levels {
    /// `target`'s level: its own, or its nearest ancestor's, or the root's.
    pub fn level_of(&self, target: &str) -> Level {
        let mut path = target;
        loop {
            if let Some(level) = self.targets.get(path) {
                return *level;
            }
            match path.rfind("::") {
                Some(i) => path = &path[..i],
                None => return self.root,
            }
        }
    }

    fn enables(&self, meta: &Metadata<'_>) -> bool {
        self.level_of(meta.target()).filter() >= *meta.level()
    }

    fn most_verbose(&self) -> LevelFilter {
        self.targets
            .values()
            .chain(std::iter::once(&self.root))
            .map(|l| l.filter())
            .max()
            .unwrap_or(LevelFilter::OFF)
    }
}

/// The per-layer filter of the log output: what `levels` holds now.
#[derive(Clone)]
pub struct LevelsFilter(pub Arc<RwLock<Levels>>);

impl LevelsFilter {
    /// Swaps in `levels` and has every callsite asked again.
    pub fn set(&self, levels: Levels) {
        *self.0.write() = levels;
        tracing::callsite::rebuild_interest_cache();
    }
}

impl<S> Filter<S> for LevelsFilter {
    fn enabled(&self, meta: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        self.0.read().enables(meta)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        // Records of the `log` crate share one callsite per level whatever their target:
        // each is asked about as it comes.
        if meta.target() == "log" {
            return Interest::sometimes();
        }
        match self.0.read().enables(meta) {
            true => Interest::always(),
            false => Interest::never(),
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(self.0.read().most_verbose())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_takes_its_nearest_ancestors_level_at_module_boundaries() {
        let levels = Levels {
            root: Level::Info,
            targets: [
                ("skua::log".to_string(), Level::Debug),
                ("skua::log::cleaner".to_string(), Level::Warn),
            ]
            .into_iter()
            .collect(),
        };
        assert_eq!(levels.level_of("skua::log"), Level::Debug);
        assert_eq!(levels.level_of("skua::log::segment"), Level::Debug);
        assert_eq!(levels.level_of("skua::log::cleaner::clean"), Level::Warn);
        // A string prefix is no ancestor.
        assert_eq!(levels.level_of("skua::logging"), Level::Info);
        assert_eq!(levels.level_of("zookeeper_client"), Level::Info);
        assert_eq!(levels.most_verbose(), LevelFilter::DEBUG);
    }

    #[test]
    fn kafkas_names_are_case_sensitive_config_files_are_not() {
        assert_eq!(Level::from_kafka("DEBUG"), Some(Level::Debug));
        assert_eq!(Level::from_kafka("debug"), None);
        assert_eq!(Level::from_kafka("OFF"), None);
        assert_eq!(Level::parse_lenient(" debug "), Some(Level::Debug));
        assert_eq!(Level::parse_lenient("off"), Some(Level::Off));
        assert_eq!(Level::Fatal.filter(), LevelFilter::ERROR);
    }
}
