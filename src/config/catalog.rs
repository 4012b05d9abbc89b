//! Every broker and topic config key Apache Kafka 4.1 has (and those only 3.9 still has),
//! from Kafka's own definitions (`kafka_catalog.tsv`, written by `scripts/config-catalog`):
//! type, default, whether and how it may change at runtime, validator, synonyms and
//! documentation. skua's own defaults and keys are laid over it in `defs`.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use super::defs::{self, Kind, Validator};

/// Whether a broker key may change while the broker runs (Kafka's
/// `DynamicBrokerConfig.dynamicConfigUpdateModes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateMode {
    ReadOnly,
    /// Only for one broker (`--entity-name <id>`).
    PerBroker,
    /// For one broker or as the cluster default.
    ClusterWide,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Broker,
    Topic,
}

/// One config key.
#[derive(Debug)]
pub struct ConfigKey {
    pub scope: Scope,
    pub name: &'static str,
    pub kind: Kind,
    /// The default in force (skua's where it differs from Kafka's); `None`: none.
    pub default: Option<String>,
    pub mode: UpdateMode,
    pub validator: Option<Validator>,
    /// Broker keys: the keys that set the same value (Kafka's `brokerConfigSynonyms`,
    /// the key itself first). Topic keys: the broker keys they fall back to, in order.
    pub synonyms: Vec<&'static str>,
    pub documentation: String,
    /// Kafka 4 removed it; Kafka 3.9 brokers still report it.
    pub only_in_3_9: bool,
}

struct Catalog {
    broker: BTreeMap<&'static str, ConfigKey>,
    topic: BTreeMap<&'static str, ConfigKey>,
}

static CATALOG: LazyLock<Catalog> = LazyLock::new(load);

const KAFKA_CATALOG: &str = include_str!("kafka_catalog.tsv");

fn load() -> Catalog {
    let mut catalog = Catalog {
        broker: BTreeMap::new(),
        topic: BTreeMap::new(),
    };
    for line in KAFKA_CATALOG.lines().filter(|l| !l.starts_with('#')) {
        let Some(key) = parse_line(line) else {
            continue;
        };
        match key.scope {
            Scope::Broker => catalog.broker.insert(key.name, key),
            Scope::Topic => catalog.topic.insert(key.name, key),
        };
    }
    for key in defs::skua_keys() {
        let map = match key.scope {
            Scope::Broker => &mut catalog.broker,
            Scope::Topic => &mut catalog.topic,
        };
        map.insert(key.name, key);
    }
    for (name, default) in defs::SKUA_BROKER_DEFAULTS {
        if let Some(k) = catalog.broker.get_mut(name) {
            k.default = Some(default.to_string());
        }
    }
    for map in [&mut catalog.broker, &mut catalog.topic] {
        for key in map.values_mut() {
            if let Some(v) = defs::validator(key.name) {
                key.validator = Some(v);
            }
        }
    }
    catalog
}

fn parse_line(line: &'static str) -> Option<ConfigKey> {
    let cols: Vec<&'static str> = line.splitn(9, '\t').collect();
    let [scope, name, only_in, kind, default, mode, validator, synonyms, doc] = cols[..] else {
        return None;
    };
    let kind = Kind::from_kafka(kind)?;
    Some(ConfigKey {
        scope: match scope {
            "broker" => Scope::Broker,
            _ => Scope::Topic,
        },
        name,
        kind,
        default: (default != "\\N").then(|| unescape(default)),
        mode: match mode {
            "per-broker" => UpdateMode::PerBroker,
            "cluster-wide" => UpdateMode::ClusterWide,
            _ => UpdateMode::ReadOnly,
        },
        validator: Validator::from_kafka(validator, kind),
        synonyms: synonyms.split(',').filter(|s| !s.is_empty()).collect(),
        documentation: unescape(doc),
        only_in_3_9: only_in == "3.9",
    })
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

pub fn broker_key(name: &str) -> Option<&'static ConfigKey> {
    CATALOG.broker.get(name)
}

pub fn topic_key(name: &str) -> Option<&'static ConfigKey> {
    CATALOG.topic.get(name)
}

/// Every broker key, by name.
pub fn broker_keys() -> impl Iterator<Item = &'static ConfigKey> {
    CATALOG.broker.values()
}

/// Every topic key, by name.
pub fn topic_keys() -> impl Iterator<Item = &'static ConfigKey> {
    CATALOG.topic.values()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_keys_with_skuas_defaults_over_them() {
        assert!(broker_keys().count() > 350, "{}", broker_keys().count());
        assert!(topic_keys().count() >= 36);
        let retention = broker_key("log.retention.ms").unwrap();
        assert_eq!(retention.kind, Kind::Long);
        assert_eq!(retention.default, None);
        assert_eq!(retention.mode, UpdateMode::ClusterWide);
        assert_eq!(
            retention.synonyms,
            vec!["log.retention.ms", "log.retention.minutes", "log.retention.hours"]
        );
        assert!(retention.documentation.contains("milliseconds"));
        assert_eq!(broker_key("listeners").unwrap().mode, UpdateMode::PerBroker);
        assert_eq!(broker_key("num.partitions").unwrap().mode, UpdateMode::ReadOnly);
        assert_eq!(broker_key("log.dir").unwrap().default.as_deref(), Some("./data"));
        assert!(broker_key("zookeeper.connect").unwrap().only_in_3_9);
        let segment = topic_key("segment.bytes").unwrap();
        assert_eq!(segment.synonyms, vec!["log.segment.bytes"]);
        assert_eq!(segment.validator, Some(Validator::at_least("1048576")));
        assert_eq!(
            topic_key("cleanup.policy").unwrap().validator,
            Some(Validator::ListOf(vec!["compact", "delete"]))
        );
        assert!(topic_key("max.decompressed.message.bytes").is_some(), "skua's own");
    }
}
