//! The broker's configuration: `server.properties` plus `--override key=value`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::RwLock;

use super::catalog::{broker_key, broker_keys, ConfigKey};
use super::defs::check_value;
use super::listener::Listener;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid value for {key}: {why}")]
    Invalid { key: String, why: String },
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
}

fn invalid(key: &str, why: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_string(),
        why: why.into(),
    }
}

/// Where a broker value came from, as DescribeConfigs reports it (Kafka's
/// `ConfigSource` codes), highest precedence first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerSource {
    /// Set for this broker at runtime (`--entity-name <id>`): DYNAMIC_BROKER_CONFIG.
    DynamicBroker = 2,
    /// Set for every broker at runtime (`--entity-default`): DYNAMIC_DEFAULT_BROKER_CONFIG.
    DynamicDefault = 3,
    /// Set in server.properties or by --override: STATIC_BROKER_CONFIG.
    Static = 4,
    /// Kafka's default (skua's where they differ): DEFAULT_CONFIG.
    Default = 5,
}

/// Dynamic broker configs, as the metadata log holds them: this broker's own and the
/// cluster-wide defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DynamicConfigs {
    pub broker: BTreeMap<String, String>,
    pub default: BTreeMap<String, String>,
}

/// Typed view of the keys the broker acts on; `values` keeps every key that was set.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    pub broker_id: i32,
    pub listeners: Vec<Listener>,
    pub advertised_listeners: Vec<Listener>,
    pub log_dirs: Vec<PathBuf>,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics_enable: bool,
    pub delete_topic_enable: bool,
    pub message_max_bytes: i32,
    pub socket_request_max_bytes: usize,
    pub connections_max_idle_ms: u64,
    pub max_connections: usize,
    pub queued_max_requests: usize,
    /// `queued.max.request.bytes`; `None` when unbounded (a value <= 0).
    pub queued_max_request_bytes: Option<usize>,
    pub zookeeper_connect: Option<String>,
    pub rack: Option<String>,
    /// Keys set explicitly, after validation.
    values: BTreeMap<String, String>,
    /// Keys set at runtime, shared by every copy of this config so that all holders see
    /// a change (`set_dynamic`). They override `values` for the keys Kafka lets change.
    dynamic: Arc<RwLock<DynamicConfigs>>,
}

impl BrokerConfig {
    /// Builds the config from parsed properties. Unknown keys are logged and ignored, as
    /// Kafka does; a malformed value of a known key is an error naming the key.
    pub fn from_properties(props: BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let mut values = BTreeMap::new();
        for (k, v) in props {
            match broker_key(&k) {
                Some(def) => {
                    check_value(def, &v).map_err(|why| invalid(&k, why))?;
                    values.insert(k, v.trim().to_string());
                }
                None if k.starts_with("listener.name.")
                    || k.starts_with("ssl.")
                    || k.starts_with("sasl.") =>
                {
                    tracing::warn!(key = %k, "configuration key not supported yet; ignored");
                }
                None => tracing::warn!(key = %k, "unknown configuration key; ignored"),
            }
        }
        let mut cfg = BrokerConfig {
            broker_id: 0,
            listeners: Vec::new(),
            advertised_listeners: Vec::new(),
            log_dirs: Vec::new(),
            num_partitions: 0,
            default_replication_factor: 0,
            auto_create_topics_enable: false,
            delete_topic_enable: false,
            message_max_bytes: 0,
            socket_request_max_bytes: 0,
            connections_max_idle_ms: 0,
            max_connections: 0,
            queued_max_requests: 0,
            queued_max_request_bytes: None,
            zookeeper_connect: None,
            rack: None,
            values,
            dynamic: Arc::default(),
        };
        cfg.broker_id = match cfg.values.get("node.id") {
            Some(v) => parse_num("node.id", v)?,
            None => cfg.int("broker.id")?,
        };
        if cfg.broker_id < 0 {
            return Err(invalid("broker.id", "must be >= 0"));
        }
        cfg.listeners = Listener::parse_list("listeners", &cfg.string("listeners"))?;
        cfg.advertised_listeners = match cfg.get("advertised.listeners") {
            Some(v) => Listener::parse_list("advertised.listeners", &v)?,
            None => cfg
                .listeners
                .iter()
                .map(Listener::advertised_default)
                .collect(),
        };
        cfg.log_dirs = cfg
            .get("log.dirs")
            .unwrap_or_else(|| cfg.string("log.dir"))
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect();
        if cfg.log_dirs.is_empty() {
            return Err(invalid("log.dirs", "no directory given"));
        }
        cfg.num_partitions = cfg.int("num.partitions")?;
        if cfg.num_partitions < 1 {
            return Err(invalid("num.partitions", "must be >= 1"));
        }
        cfg.default_replication_factor = parse_num(
            "default.replication.factor",
            &cfg.string("default.replication.factor"),
        )?;
        cfg.auto_create_topics_enable = cfg.bool("auto.create.topics.enable");
        cfg.delete_topic_enable = cfg.bool("delete.topic.enable");
        cfg.message_max_bytes = cfg.int("message.max.bytes")?;
        cfg.socket_request_max_bytes = positive(&cfg, "socket.request.max.bytes")?;
        cfg.connections_max_idle_ms = parse_num(
            "connections.max.idle.ms",
            &cfg.string("connections.max.idle.ms"),
        )?;
        cfg.max_connections = positive(&cfg, "max.connections")?;
        cfg.queued_max_requests = positive(&cfg, "queued.max.requests")?;
        let queued_bytes: i64 = parse_num(
            "queued.max.request.bytes",
            &cfg.string("queued.max.request.bytes"),
        )?;
        cfg.queued_max_request_bytes = usize::try_from(queued_bytes).ok().filter(|n| *n > 0);
        cfg.zookeeper_connect = cfg.get("zookeeper.connect").filter(|s| !s.is_empty());
        cfg.rack = cfg.get("broker.rack");
        Ok(cfg)
    }

    /// The value in force for `key`: set at runtime for this broker, or for all brokers,
    /// or in server.properties; else the default.
    pub fn get(&self, key: &str) -> Option<String> {
        self.explicit(key)
            .map(|(v, _)| v)
            .or_else(|| broker_key(key).and_then(|d| d.default.clone()))
    }

    pub fn source(&self, key: &str) -> BrokerSource {
        self.explicit(key)
            .map_or(BrokerSource::Default, |(_, source)| source)
    }

    /// The value of `key` where one was set (not the default), and where.
    fn explicit(&self, key: &str) -> Option<(String, BrokerSource)> {
        let dynamic = self.dynamic.read();
        if let Some(v) = dynamic.broker.get(key) {
            return Some((v.clone(), BrokerSource::DynamicBroker));
        }
        if let Some(v) = dynamic.default.get(key) {
            return Some((v.clone(), BrokerSource::DynamicDefault));
        }
        self.values
            .get(key)
            .map(|v| (v.clone(), BrokerSource::Static))
    }

    /// Takes the dynamic configs the metadata holds now (at startup and on every change).
    pub fn set_dynamic(&self, configs: DynamicConfigs) {
        *self.dynamic.write() = configs;
    }

    pub fn dynamic(&self) -> DynamicConfigs {
        self.dynamic.read().clone()
    }

    /// Kafka's `configSynonyms`: each of `names` that is set, from every source in
    /// precedence order (dynamic for this broker, dynamic default, static, default),
    /// starting at the first entry for `primary`. The first entry is where the value in
    /// force came from; none means the default.
    pub fn synonyms_of(
        &self,
        primary: &str,
        names: &[&'static str],
    ) -> Vec<(&'static str, String, BrokerSource)> {
        let dynamic = self.dynamic.read();
        let mut out = Vec::new();
        for (map, source) in [
            (&dynamic.broker, BrokerSource::DynamicBroker),
            (&dynamic.default, BrokerSource::DynamicDefault),
            (&self.values, BrokerSource::Static),
        ] {
            out.extend(
                names
                    .iter()
                    .filter_map(|&n| map.get(n).map(|v| (n, v.clone(), source))),
            );
        }
        out.extend(names.iter().filter_map(|&n| {
            let default = broker_key(n)?.default.clone()?;
            Some((n, default, BrokerSource::Default))
        }));
        match out.iter().position(|(n, _, _)| *n == primary) {
            Some(i) => out.split_off(i),
            None => Vec::new(),
        }
    }

    fn string(&self, key: &str) -> String {
        self.get(key).unwrap_or_default()
    }

    fn int(&self, key: &str) -> Result<i32, ConfigError> {
        parse_num(key, &self.string(key))
    }

    pub fn long(&self, key: &str) -> Option<i64> {
        self.get(key).and_then(|v| v.trim().parse().ok())
    }

    fn bool(&self, key: &str) -> bool {
        self.string(key).eq_ignore_ascii_case("true")
    }

    /// Every broker key with its value in force, for DescribeConfigs.
    pub fn describe(&self) -> Vec<(&'static ConfigKey, Option<String>)> {
        broker_keys().map(|k| (k, self.get(k.name))).collect()
    }

    /// The broker-level value a topic key falls back to, resolving Kafka's derived keys
    /// (`log.retention.ms` from minutes or hours, `log.roll.ms` from hours).
    pub fn topic_fallback(&self, broker_key: &str) -> Option<(String, BrokerSource)> {
        let explicit = |k: &str| self.explicit(k);
        match broker_key {
            "log.retention.ms" => explicit("log.retention.ms")
                .or_else(|| scaled(explicit("log.retention.minutes"), 60_000))
                .or_else(|| {
                    scaled(
                        Some((
                            self.string("log.retention.hours"),
                            self.source("log.retention.hours"),
                        )),
                        3_600_000,
                    )
                }),
            "log.roll.ms" => explicit("log.roll.ms").or_else(|| {
                scaled(
                    Some((self.string("log.roll.hours"), self.source("log.roll.hours"))),
                    3_600_000,
                )
            }),
            "log.roll.jitter.ms" => explicit("log.roll.jitter.ms").or_else(|| {
                scaled(
                    Some((
                        self.string("log.roll.jitter.hours"),
                        self.source("log.roll.jitter.hours"),
                    )),
                    3_600_000,
                )
            }),
            other => self.get(other).map(|v| (v, self.source(other))),
        }
    }
}

/// Multiplies a numeric value (minutes, hours) into milliseconds; -1 stays -1 (unlimited).
fn scaled(v: Option<(String, BrokerSource)>, factor: i64) -> Option<(String, BrokerSource)> {
    let (s, src) = v?;
    let n: i64 = s.trim().parse().ok()?;
    let ms = if n < 0 { -1 } else { n.saturating_mul(factor) };
    Some((ms.to_string(), src))
}

fn parse_num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, ConfigError> {
    v.trim()
        .parse()
        .map_err(|_| invalid(key, format!("{v:?} is not a number in range")))
}

fn positive(cfg: &BrokerConfig, key: &str) -> Result<usize, ConfigError> {
    let n = cfg.int(key)?;
    usize::try_from(n)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| invalid(key, "must be > 0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Result<BrokerConfig, ConfigError> {
        BrokerConfig::from_properties(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn quickstart_defaults() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.broker_id, 1);
        assert_eq!(c.listeners[0].port, 9092);
        assert_eq!(c.advertised_listeners[0].host, "localhost");
        assert_eq!(c.log_dirs, vec![PathBuf::from("./data")]);
        assert_eq!(c.message_max_bytes, 1048588);
        assert_eq!(c.socket_request_max_bytes, 104857600);
        assert_eq!(c.queued_max_request_bytes, Some(256 << 20));
        assert_eq!(
            cfg(&[("queued.max.request.bytes", "-1")])
                .unwrap()
                .queued_max_request_bytes,
            None,
            "unbounded, as in Kafka"
        );
        assert!(c.auto_create_topics_enable);
        assert_eq!(c.source("num.partitions"), BrokerSource::Default);
    }

    #[test]
    fn malformed_value_names_the_key() {
        let err = cfg(&[("num.partitions", "many")]).unwrap_err().to_string();
        assert!(err.contains("num.partitions"), "{err}");
        let err = cfg(&[("auto.create.topics.enable", "yes")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("auto.create.topics.enable"), "{err}");
    }

    #[test]
    fn unknown_key_is_ignored() {
        let c = cfg(&[("no.such.key", "1"), ("broker.id", "7")]).unwrap();
        assert_eq!(c.broker_id, 7);
        assert!(c.get("no.such.key").is_none());
    }

    #[test]
    fn derived_retention_and_roll() {
        let c = cfg(&[("log.retention.hours", "1")]).unwrap();
        assert_eq!(c.topic_fallback("log.retention.ms").unwrap().0, "3600000");
        let c = cfg(&[("log.retention.minutes", "2"), ("log.retention.hours", "1")]).unwrap();
        assert_eq!(c.topic_fallback("log.retention.ms").unwrap().0, "120000");
        assert_eq!(c.topic_fallback("log.roll.ms").unwrap().0, "604800000");
    }

    #[test]
    fn log_dirs_list() {
        let c = cfg(&[("log.dirs", "/a, /b")]).unwrap();
        assert_eq!(c.log_dirs, vec![PathBuf::from("/a"), PathBuf::from("/b")]);
    }
}
