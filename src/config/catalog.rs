//! Every broker and topic config key Apache Kafka 4.1 has (and those only 3.9 still has),
//! from Kafka's own definitions (`kafka_catalog.tsv`, written by `scripts/config-catalog`):
//! type, default, whether and how it may change at runtime, validator, synonyms and
//! documentation. What skua acts on is laid over it from `defs.rs`: its keys' kinds and
//! defaults win, and its own keys (which Kafka does not define) are added, so `defs.rs`
//! stays the one place a skua default is written.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use super::defs::{self, Kind, Validator};

/// Whether a broker key may change while the broker runs (Kafka's
/// `DynamicBrokerConfig` update modes).
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
    /// Kafka's validator (skua's from `defs::validator` where it names one).
    pub validator: Option<Validator>,
    /// Broker keys: the keys that set the same value (Kafka's `brokerConfigSynonyms`,
    /// the key itself first). Topic keys: the broker keys they fall back to, in order.
    pub synonyms: Vec<&'static str>,
    pub documentation: String,
    /// Kafka 4 removed it; Kafka 3.9 brokers still report it.
    pub only_in_3_9: bool,
}

impl ConfigKey {
    /// Checks `value` as Kafka's `ConfigDef` does (kind, then validator); the error is
    /// Kafka's reason, which its messages put after `Invalid value V for configuration K: `.
    pub fn check(&self, value: &str) -> Result<(), String> {
        self.kind
            .check(value)
            .and_then(|()| self.validator.map_or(Ok(()), |v| v.check(value)))
    }
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
    for k in defs::BROKER_KEYS {
        let entry = catalog
            .broker
            .entry(k.name)
            .or_insert_with(|| skua_key(Scope::Broker, k.name, k.kind, vec![k.name]));
        entry.kind = k.kind;
        entry.default = k.default.map(str::to_string);
    }
    for k in defs::TOPIC_KEYS {
        let synonyms = k.broker_synonym.into_iter().collect();
        let entry = catalog
            .topic
            .entry(k.name)
            .or_insert_with(|| skua_key(Scope::Topic, k.name, k.kind, synonyms));
        entry.kind = k.kind;
        entry.default = Some(k.default.to_string());
    }
    for key in catalog
        .broker
        .values_mut()
        .chain(catalog.topic.values_mut())
    {
        if let Some(v) = defs::validator(key.name) {
            key.validator = Some(v);
        }
    }
    catalog
}

/// A key skua has that Kafka does not define: read-only, documented in `defs.rs`'s words.
fn skua_key(
    scope: Scope,
    name: &'static str,
    kind: Kind,
    synonyms: Vec<&'static str>,
) -> ConfigKey {
    ConfigKey {
        scope,
        name,
        kind,
        default: None,
        mode: UpdateMode::ReadOnly,
        validator: None,
        synonyms,
        documentation: defs::skua_documentation(name).to_string(),
        only_in_3_9: false,
    }
}

/// Keys Kafka 3.9 in ZooKeeper mode changes per broker at runtime that 4.x (KRaft only,
/// whose registration cannot be rewritten) made read-only: skua's cluster mode is
/// ZooKeeper's, where a broker rewrites `/brokers/ids/<id>` with new endpoints.
const ZOOKEEPER_MODE_PER_BROKER: &[&str] = &["advertised.listeners"];

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
            _ if ZOOKEEPER_MODE_PER_BROKER.contains(&name) => UpdateMode::PerBroker,
            "per-broker" => UpdateMode::PerBroker,
            "cluster-wide" => UpdateMode::ClusterWide,
            _ => UpdateMode::ReadOnly,
        },
        validator: kafka_validator(validator),
        synonyms: synonyms.split(',').filter(|s| !s.is_empty()).collect(),
        documentation: unescape(doc),
        only_in_3_9: only_in == "3.9",
    })
}

/// Reads Kafka's `toString` of a range validator: `[1,...]`, `[0,...,1]`. The `toString`
/// of a list or custom validator does not say what it accepts (`inter.broker.protocol.version`
/// takes prefixes of what it prints), so those are only checked where `defs::validator`
/// names them.
fn kafka_validator(text: &str) -> Option<Validator> {
    let inner = text.strip_prefix('[')?.strip_suffix(']')?;
    if let Some((min, max)) = inner.split_once(",...,") {
        return Some(Validator::Between(min.parse().ok()?, max.parse().ok()?));
    }
    let min = inner.strip_suffix(",...")?;
    Some(Validator::AtLeast(min.parse().ok()?))
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

/// Kafka's per-broker dynamic configs that are not broker config keys (its
/// `DynamicConfig.Broker`: the replication throttle rates): they exist only when set at
/// runtime for one broker, and DescribeConfigs lists them only then.
pub fn dynamic_only_broker_key(name: &str) -> Option<&'static ConfigKey> {
    DYNAMIC_ONLY.iter().find(|k| k.name == name)
}

static DYNAMIC_ONLY: LazyLock<Vec<ConfigKey>> = LazyLock::new(|| {
    let key = |name: &'static str, side: &str| ConfigKey {
        scope: Scope::Broker,
        name,
        kind: Kind::Long,
        default: None,
        // Kafka accepts them at the cluster default too, but its quota managers read
        // only the broker's own entity (see `replica::throttle`).
        mode: UpdateMode::ClusterWide,
        validator: Some(Validator::AtLeast(0)),
        synonyms: vec![name],
        documentation: format!(
            "The most bytes per second this broker's {side}s replicate of the partitions \
             {side}.replication.throttled.replicas names (of each topic) while their \
             replicas are out of sync. Set only at runtime, for one broker."
        ),
        only_in_3_9: false,
    };
    vec![
        key("leader.replication.throttled.rate", "leader"),
        key("follower.replication.throttled.rate", "follower"),
    ]
});

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
            vec![
                "log.retention.ms",
                "log.retention.minutes",
                "log.retention.hours"
            ]
        );
        assert!(retention.documentation.contains("milliseconds"));
        assert_eq!(broker_key("listeners").unwrap().mode, UpdateMode::PerBroker);
        assert_eq!(
            broker_key("advertised.listeners").unwrap().mode,
            UpdateMode::PerBroker
        );
        assert_eq!(
            broker_key("num.partitions").unwrap().mode,
            UpdateMode::ReadOnly
        );
        assert_eq!(
            broker_key("log.dir").unwrap().default.as_deref(),
            Some("./data")
        );
        assert!(broker_key("zookeeper.connect").unwrap().only_in_3_9);
        let segment = topic_key("segment.bytes").unwrap();
        assert_eq!(segment.synonyms, vec!["log.segment.bytes"]);
        assert_eq!(
            segment.check("1000").unwrap_err(),
            "Value must be at least 1048576"
        );
        assert_eq!(
            topic_key("cleanup.policy")
                .unwrap()
                .check("compact,bogus")
                .unwrap_err(),
            "String must be one of: compact, delete"
        );
        // From Kafka's catalog alone: a validator defs.rs does not name.
        assert_eq!(
            broker_key("log.cleaner.io.buffer.load.factor")
                .unwrap()
                .check("x")
                .unwrap_err(),
            "Not a number of type DOUBLE"
        );
        let own = topic_key("max.decompressed.message.bytes").unwrap();
        assert_eq!(own.default.as_deref(), Some("2147483639"));
        assert_eq!(own.mode, UpdateMode::ReadOnly);
        assert!(!own.documentation.is_empty(), "skua documents its own keys");
    }

    #[test]
    fn a_kafka_4_broker_does_not_list_what_only_3_9_has() {
        use crate::config::BrokerConfig;
        let kraft = BrokerConfig::default();
        let listed =
            |c: &BrokerConfig, name: &str| c.describe().iter().any(|(k, _)| k.name == name);
        assert!(!listed(&kraft, "zookeeper.connect"));
        assert!(listed(&kraft, "log.retention.ms"));
        let zk = BrokerConfig::from_properties(
            [(
                "zookeeper.connect".to_string(),
                "127.0.0.1:2181".to_string(),
            )]
            .into(),
        )
        .unwrap();
        assert!(listed(&zk, "zookeeper.connect"));
    }

    /// A default that its own key refuses would make DescribeConfigs report a value the
    /// broker cannot be given.
    #[test]
    fn every_default_passes_its_own_check() {
        for key in broker_keys().chain(topic_keys()) {
            if let Some(default) = &key.default {
                if let Err(why) = key.check(default) {
                    panic!("{}={default}: {why}", key.name);
                }
            }
        }
    }
}
