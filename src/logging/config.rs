//! skua's logging keys in `server.properties` (Kafka keeps these in `log4j.properties`):
//!
//! - `logging.format`: `text` (the default: one human-readable line per event) or `json`
//!   (one JSON object per line, for log shippers);
//! - `logging.level.<logger>=<LEVEL>`: a logger's level at startup, `<logger>` any name
//!   the BROKER_LOGGER resource takes (`root`, a Kafka logger name, a skua module path),
//!   `<LEVEL>` one of Kafka's (any case) or OFF.

use std::collections::BTreeMap;

use super::levels::Level;
use super::names;
use crate::config::ConfigError;

pub const FORMAT_KEY: &str = "logging.format";
pub const LEVEL_PREFIX: &str = "logging.level.";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    #[default]
    Text,
    Json,
}

#[derive(Clone, Debug, Default)]
pub struct LoggingConfig {
    pub format: Format,
    /// Loggers with a level set, root among them when set.
    pub levels: Vec<(String, Level)>,
}

impl LoggingConfig {
    /// The logging keys of `props` (the others are the broker's); a bad value is an error
    /// naming its key.
    pub fn from_properties(props: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let mut config = LoggingConfig::default();
        for (key, value) in props {
            if let Some(Err(why)) = check_key(key, value) {
                return Err(ConfigError::Invalid {
                    key: key.clone(),
                    why,
                });
            }
            if key == FORMAT_KEY {
                config.format = match value.trim().eq_ignore_ascii_case("json") {
                    true => Format::Json,
                    false => Format::Text,
                };
            } else if let Some(logger) = key.strip_prefix(LEVEL_PREFIX) {
                if let Some(level) = Level::parse_lenient(value) {
                    config.levels.push((logger.to_string(), level));
                }
            }
        }
        Ok(config)
    }
}

/// None when `key` is no logging key; else whether its value is one skua takes.
pub fn check_key(key: &str, value: &str) -> Option<Result<(), String>> {
    if key == FORMAT_KEY {
        let v = value.trim();
        let ok = v.eq_ignore_ascii_case("text") || v.eq_ignore_ascii_case("json");
        return Some(match ok {
            true => Ok(()),
            false => Err("String must be one of: text, json".into()),
        });
    }
    let logger = key.strip_prefix(LEVEL_PREFIX)?;
    Some(
        match (names::targets(logger), Level::parse_lenient(value)) {
            (None, _) => Err(format!("Logger {logger} does not exist!")),
            (_, None) => Err(format!(
                "not a log level; valid log levels are {}, OFF",
                Level::KAFKA_NAMES
            )),
            _ => Ok(()),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn format_and_levels_from_properties() {
        let c = LoggingConfig::from_properties(&props(&[
            ("logging.format", "JSON"),
            ("logging.level.root", "warn"),
            ("logging.level.kafka.server.ReplicaManager", "DEBUG"),
            ("logging.level.skua::log::cleaner", "off"),
            ("num.partitions", "3"),
        ]))
        .unwrap();
        assert_eq!(c.format, Format::Json);
        assert_eq!(
            c.levels,
            vec![
                ("kafka.server.ReplicaManager".to_string(), Level::Debug),
                ("root".to_string(), Level::Warn),
                ("skua::log::cleaner".to_string(), Level::Off),
            ]
        );
        assert_eq!(
            LoggingConfig::from_properties(&BTreeMap::new())
                .unwrap()
                .format,
            Format::Text
        );
    }

    #[test]
    fn bad_values_and_unknown_loggers_name_their_key() {
        let bad = |k: &str, v: &str| match LoggingConfig::from_properties(&props(&[(k, v)])) {
            Err(ConfigError::Invalid { key, why }) => (key, why),
            other => panic!("{k}={v}: {other:?}"),
        };
        assert_eq!(
            bad("logging.format", "xml").1,
            "String must be one of: text, json"
        );
        assert_eq!(
            bad("logging.level.kafka.nope", "INFO").1,
            "Logger kafka.nope does not exist!"
        );
        assert_eq!(bad("logging.level.root", "LOUD").0, "logging.level.root");
        assert_eq!(check_key("log.retention.ms", "1"), None);
    }
}
