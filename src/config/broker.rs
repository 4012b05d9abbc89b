//! The broker's configuration: `server.properties` plus `--override key=value`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::catalog::{broker_key, broker_keys, dynamic_only_broker_key, ConfigKey, UpdateMode};
use super::check::{KeyNote, SortedKeys};
use super::group_coordinator::{
    GroupCoordinatorConfig, OffsetsTopicConfig, ShareCoordinatorConfig,
};
use super::kraft::KRaftConfig;
use super::listener::Listener;
use super::sections::{LogManagerConfig, NetworkConfig, ReplicationConfig};
use super::transaction::TransactionConfig;
use super::zookeeper::ZooKeeperConfig;
use crate::log::cleaner::CleanerConfig;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid value for {key}: {why}")]
    Invalid { key: String, why: String },
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// The command line is not one skua takes.
    #[error("{0}")]
    Usage(String),
}

/// The definition a key is checked by: a broker key, or a listener's own security key
/// (`listener.name.<l>.ssl.keystore.location`, `listener.name.<l>.<mechanism>.sasl.jaas.config`),
/// which Kafka checks as the key it overrides.
pub fn key_def(name: &str) -> Option<&'static ConfigKey> {
    if let Some(def) = broker_key(name) {
        return Some(def);
    }
    listener_key(name).and_then(broker_key)
}

/// The key a listener's own security key overrides: `ssl.keystore.location` for
/// `listener.name.<l>.ssl.keystore.location`, `sasl.jaas.config` for
/// `listener.name.<l>.<mechanism>.sasl.jaas.config`; None for any other name.
pub fn listener_key(name: &str) -> Option<&str> {
    let rest = name.strip_prefix("listener.name.")?;
    let (_, key) = rest.split_once('.')?;
    let key = match key.split_once('.') {
        // `<mechanism>.sasl.jaas.config` and the like: a mechanism name holds no dot.
        Some((
            _,
            k @ ("sasl.jaas.config"
            | "connections.max.reauth.ms"
            | "sasl.server.callback.handler.class"),
        )) => k,
        Some((_, k)) if k.starts_with("sasl.oauthbearer.") => k,
        _ => key,
    };
    let security = key.starts_with("ssl.") || key.starts_with("sasl.");
    (security || key == "connections.max.reauth.ms").then_some(key)
}

/// `configs` for a log line: the values of password keys (`ssl.keystore.password`,
/// `listener.name.l.plain.sasl.jaas.config`, ...) replaced, as Kafka never logs them.
pub fn redacted(configs: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    configs
        .iter()
        .map(|(k, v)| {
            let secret = key_def(k).is_some_and(|d| d.kind == super::defs::Kind::Password);
            let shown = if secret {
                "[hidden]".to_string()
            } else {
                v.clone()
            };
            (k.clone(), shown)
        })
        .collect()
}

pub(super) fn invalid(key: &str, why: impl Into<String>) -> ConfigError {
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

/// Dynamic broker configs as the metadata log holds them (ConfigRecords of resource type
/// BROKER): this broker's own (named by its id) and the cluster default (empty name).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DynamicConfigs {
    pub broker: BTreeMap<String, String>,
    pub default: BTreeMap<String, String>,
}

/// The broker's configuration, typed: built and validated once from the properties (a
/// malformed or refused value of a known key is an error naming the key), then only read.
/// Defaults live in `defs.rs` alone; every typed field is read through them.
///
/// Identity fields (id, listeners, dirs) never change while the broker runs; the
/// sections may, by a dynamic change that builds a whole new config
/// ([`BrokerConfig::reconfigured`]) and swaps it in ([`super::SharedConfig`]).
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    pub broker_id: i32,
    /// Whether `node.id` or `broker.id` was set (else the id comes from `meta.properties`,
    /// or is the default).
    pub broker_id_set: bool,
    /// `cluster.id`: when set, the log dirs must belong to this cluster.
    pub cluster_id: Option<String>,
    /// `metadata.log.dir`: where the metadata log lives (the first log dir when unset).
    pub metadata_log_dir: Option<PathBuf>,
    pub listeners: Vec<Listener>,
    pub advertised_listeners: Vec<Listener>,
    pub log_dirs: Vec<PathBuf>,
    pub delete_topic_enable: bool,
    pub zookeeper_connect: Option<String>,
    /// ZooKeeper mode's session, controller and controlled-shutdown settings.
    pub zookeeper: ZooKeeperConfig,
    /// `process.roles`, the controller quorum and the KRaft broker's lifecycle timings.
    pub kraft: KRaftConfig,
    pub rack: Option<String>,
    pub log: LogManagerConfig,
    pub network: NetworkConfig,
    pub replication: ReplicationConfig,
    pub group: GroupCoordinatorConfig,
    pub offsets_topic: OffsetsTopicConfig,
    /// `__share_group_state` and the share coordinator (KIP-932).
    pub share_coordinator: ShareCoordinatorConfig,
    /// The log cleaner (`log.cleaner.*`).
    pub cleaner: CleanerConfig,
    pub transaction: TransactionConfig,
    /// How client quotas measure rates (`quota.window.*`, `controller.quota.window.*`).
    pub quotas: crate::quota::manager::QuotaSettings,
    /// `max.incremental.fetch.session.cache.slots`: the most fetch sessions kept (KIP-227).
    pub max_incremental_fetch_session_cache_slots: usize,
    /// `metrics.listener` (skua's, `http://host:port`): where the Prometheus metrics are
    /// served; None (the default) serves none.
    pub metrics_listener: Option<Listener>,
    /// Keys set in server.properties or by --override, after validation.
    values: BTreeMap<String, String>,
    /// Keys set at runtime, over `values` (only keys Kafka lets change).
    dynamic: DynamicConfigs,
}

impl Default for BrokerConfig {
    /// Kafka's defaults (with skua's quickstart `log.dirs`), as an empty `server.properties`
    /// gives them.
    fn default() -> Self {
        BrokerConfig::from_properties(BTreeMap::new())
            .expect("the defaults in defs.rs pass their own validation")
    }
}

impl BrokerConfig {
    /// Builds the config from parsed properties. Unknown keys are logged and ignored, as
    /// Kafka does; a malformed value of a known key is an error naming the key (the first,
    /// in key order).
    pub fn from_properties(props: BTreeMap<String, String>) -> Result<Self, ConfigError> {
        let sorted = SortedKeys::sort(props);
        sorted.notes.iter().for_each(KeyNote::log);
        if let Some(e) = sorted.errors.into_iter().next() {
            return Err(e);
        }
        Self::from_sorted_values(sorted.values)
    }

    /// Builds the config from the values [`SortedKeys`] kept (each already checked).
    pub(super) fn from_sorted_values(
        values: BTreeMap<String, String>,
    ) -> Result<Self, ConfigError> {
        Self::build(values, DynamicConfigs::default())
    }

    /// Types and checks every section from `values` with `dynamic` over them (keys
    /// already checked one by one).
    fn build(
        values: BTreeMap<String, String>,
        dynamic: DynamicConfigs,
    ) -> Result<Self, ConfigError> {
        let mut in_force = values.clone();
        in_force.extend(dynamic.default.clone());
        in_force.extend(dynamic.broker.clone());
        let keys = Keys(&in_force);
        let broker_id = match values.get("node.id") {
            Some(v) => parse_num("node.id", v)?,
            None => keys.int("broker.id")?,
        };
        if broker_id < 0 {
            return Err(invalid("broker.id", "must be >= 0"));
        }
        let listeners = Listener::parse_list("listeners", &keys.string("listeners"))?;
        let advertised_listeners = match keys.get("advertised.listeners") {
            Some(v) => Listener::parse_list("advertised.listeners", &v)?,
            None => listeners.iter().map(Listener::advertised_default).collect(),
        };
        if keys.is_set("inter.broker.listener.name")
            && keys.is_set("security.inter.broker.protocol")
        {
            return Err(invalid(
                "security.inter.broker.protocol",
                "inter.broker.listener.name and security.inter.broker.protocol should not be set at the same time",
            ));
        }
        // Kafka's inter-broker listener: named, or the listener named after the protocol
        // when that is set (its default, PLAINTEXT, is not required to be a listener here).
        let inter_broker = keys.get("inter.broker.listener.name").or_else(|| {
            keys.is_set("security.inter.broker.protocol")
                .then(|| keys.get("security.inter.broker.protocol"))
                .flatten()
        });
        Listener::check_names(
            &listeners,
            &advertised_listeners,
            &keys.string("listener.security.protocol.map"),
            inter_broker.as_deref(),
        )?;
        let log_dirs: Vec<PathBuf> = keys
            .get("log.dirs")
            .unwrap_or_else(|| keys.string("log.dir"))
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect();
        if log_dirs.is_empty() {
            return Err(invalid("log.dirs", "no directory given"));
        }
        let zookeeper_connect = keys.get("zookeeper.connect").filter(|s| !s.is_empty());
        let kraft = KRaftConfig::build(
            &keys,
            &super::kraft::Context {
                node_id: values.get("node.id").map(|_| broker_id),
                listeners: &listeners,
                zookeeper_connect: zookeeper_connect.as_deref(),
            },
        )?;
        let config = BrokerConfig {
            broker_id,
            broker_id_set: keys.is_set("node.id") || keys.is_set("broker.id"),
            cluster_id: keys.get("cluster.id"),
            metadata_log_dir: keys.get("metadata.log.dir").map(PathBuf::from),
            listeners,
            advertised_listeners,
            log_dirs,
            delete_topic_enable: keys.bool("delete.topic.enable"),
            zookeeper_connect,
            zookeeper: ZooKeeperConfig::build(&keys)?,
            kraft,
            rack: keys.get("broker.rack"),
            log: LogManagerConfig::build(&keys)?,
            network: NetworkConfig::build(&keys)?,
            replication: ReplicationConfig::build(&keys)?,
            group: GroupCoordinatorConfig::build(&keys)?,
            offsets_topic: OffsetsTopicConfig::build(&keys)?,
            share_coordinator: ShareCoordinatorConfig::build(&keys)?,
            cleaner: super::cleaner::build(&keys)?,
            transaction: TransactionConfig::build(&keys)?,
            quotas: super::sections::quota_settings(&keys)?,
            max_incremental_fetch_session_cache_slots: usize::try_from(
                keys.int("max.incremental.fetch.session.cache.slots")?,
            )
            .unwrap_or(0),
            metrics_listener: metrics_listener(keys.get("metrics.listener"))?,
            values,
            dynamic,
        };
        config.check_tls_listeners()?;
        config.check_sasl_listeners()?;
        Ok(config)
    }

    /// Every SASL listener's mechanisms can be served (each with its JAAS config), and a
    /// SASL inter-broker listener enables `sasl.mechanism.inter.broker.protocol` and
    /// names the broker's own credentials for it.
    fn check_sasl_listeners(&self) -> Result<(), ConfigError> {
        for l in &self.listeners {
            if crate::sasl::settings::is_sasl_listener(self, &l.name) {
                crate::sasl::settings::SaslSettings::for_listener(self, &l.name)?;
            }
        }
        let inter_broker = self.inter_broker_listener();
        if self.listeners.iter().any(|l| l.name == inter_broker) {
            crate::sasl::settings::inter_broker(self)?;
        }
        Ok(())
    }

    /// Whether listener `name` speaks TLS (SSL or SASL_SSL).
    pub fn is_tls_listener(&self, name: &str) -> bool {
        matches!(
            self.security_protocol(name).as_deref(),
            Some("SSL" | "SASL_SSL")
        )
    }

    /// Every SSL and SASL_SSL listener's `ssl.*` keys resolve and are values rustls can
    /// honour (the stores they name are read when the listener is bound).
    fn check_tls_listeners(&self) -> Result<(), ConfigError> {
        for l in &self.listeners {
            if self.is_tls_listener(&l.name) {
                let settings = crate::tls::SslSettings::for_listener(self, &l.name)?;
                if settings.keystore.is_none() {
                    return Err(invalid(
                        "ssl.keystore.location",
                        format!("{} listener {} needs a keystore (ssl.keystore.location, or ssl.keystore.key with ssl.keystore.certificate.chain)", self.security_protocol(&l.name).unwrap_or_default(), l.name),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The security protocol of listener `name` in `listener.security.protocol.map`.
    pub fn security_protocol(&self, name: &str) -> Option<String> {
        let map = self
            .get("listener.security.protocol.map")
            .unwrap_or_default();
        Listener::protocol_map(&map)
            .ok()?
            .remove(&name.to_ascii_uppercase())
    }

    /// The listener other brokers are reached on: `inter.broker.listener.name`, or the
    /// listener named after `security.inter.broker.protocol` (PLAINTEXT by default).
    pub fn inter_broker_listener(&self) -> String {
        self.get("inter.broker.listener.name")
            .or_else(|| self.get("security.inter.broker.protocol"))
            .unwrap_or_else(|| "PLAINTEXT".into())
            .trim()
            .to_ascii_uppercase()
    }

    /// The TLS context of the broker's own connections to other brokers, when the
    /// inter-broker listener is SSL or SASL_SSL (`None`: they are plain TCP). Reads the
    /// listener's keystore and truststore.
    pub fn outbound_tls(&self) -> anyhow::Result<Option<crate::tls::OutboundTls>> {
        let listener = self.inter_broker_listener();
        if !self.is_tls_listener(&listener) {
            return Ok(None);
        }
        let settings = crate::tls::SslSettings::for_listener(self, &listener)?;
        Ok(Some(crate::tls::OutboundTls::build(&settings)?))
    }

    /// A new config with `dynamic` (every dynamic config in force, not only the changed
    /// ones) over the static properties, checked as at startup; identity fields resolved
    /// at startup (the node id from `meta.properties`, ports bound for port 0) are kept.
    /// Keys Kafka does not let change at runtime are ignored, as Kafka ignores them in
    /// stored dynamic configs (`--entity-default` cannot set per-broker keys either).
    /// This is what a dynamic change swaps in.
    pub fn reconfigured(&self, dynamic: &DynamicConfigs) -> Result<Self, ConfigError> {
        let take = |map: &BTreeMap<String, String>, per_broker: bool| {
            let mut kept = BTreeMap::new();
            for (k, v) in map {
                let allowed = key_def(k)
                    .or_else(|| dynamic_only_broker_key(k))
                    .filter(|def| match def.mode {
                        UpdateMode::ReadOnly => false,
                        UpdateMode::PerBroker => per_broker,
                        UpdateMode::ClusterWide => true,
                    });
                let Some(def) = allowed else {
                    tracing::warn!(key = %k, "dynamic broker config ignored: it cannot change at runtime");
                    continue;
                };
                def.check(v).map_err(|why| invalid(k, why))?;
                kept.insert(k.clone(), v.trim().to_string());
            }
            Ok::<_, ConfigError>(kept)
        };
        let dynamic = DynamicConfigs {
            broker: take(&dynamic.broker, true)?,
            default: take(&dynamic.default, false)?,
        };
        let mut next = Self::build(self.values.clone(), dynamic)?;
        next.broker_id = self.broker_id;
        next.broker_id_set = self.broker_id_set;
        next.resolve_listener_ports(self)?;
        next.log_dirs = self.log_dirs.clone();
        Ok(next)
    }

    /// The listeners may change at runtime (per broker, KIP-226); a listener kept as it
    /// was (same name, host and port as configured) keeps the port bound for it, which an
    /// advertised listener of port 0 names. A listener added at runtime needs its port:
    /// nobody could advertise an ephemeral one before it is bound.
    fn resolve_listener_ports(&mut self, was: &BrokerConfig) -> Result<(), ConfigError> {
        if let Some(l) = self.listeners_added_since(was).iter().find(|l| l.port == 0) {
            return Err(invalid(
                "listeners",
                format!(
                    "listener {} added at runtime needs a port other than 0",
                    l.name
                ),
            ));
        }
        for a in &mut self.advertised_listeners {
            if a.port != 0 {
                continue;
            }
            let kept = self
                .listeners
                .iter()
                .any(|l| l.name == a.name && was.listeners.contains(l));
            let bound = was
                .advertised_listeners
                .iter()
                .find(|b| b.name == a.name && b.port != 0)
                .filter(|_| kept);
            match bound {
                Some(b) => a.port = b.port,
                None => {
                    return Err(invalid(
                        "advertised.listeners",
                        format!(
                            "listener {} is advertised with port 0, which only a listener bound at startup may be",
                            a.name
                        ),
                    ))
                }
            }
        }
        Ok(())
    }

    /// Listeners in `self` that `was` did not have, or had bound elsewhere.
    pub fn listeners_added_since(&self, was: &BrokerConfig) -> Vec<&Listener> {
        self.listeners
            .iter()
            .filter(|l| !was.listeners.contains(l))
            .collect()
    }

    /// The dynamic configs in force.
    pub fn dynamic(&self) -> &DynamicConfigs {
        &self.dynamic
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
        if let Some(v) = self.dynamic.broker.get(key) {
            return Some((v.clone(), BrokerSource::DynamicBroker));
        }
        if let Some(v) = self.dynamic.default.get(key) {
            return Some((v.clone(), BrokerSource::DynamicDefault));
        }
        self.values
            .get(key)
            .map(|v| (v.clone(), BrokerSource::Static))
    }

    /// Kafka's `configSynonyms`: each of `names` that is set, from every source in
    /// precedence order (dynamic for this broker, dynamic default, static, default),
    /// starting at the first entry for `primary`. The first entry is where the value in
    /// force came from; none means the key has no value.
    pub fn synonyms_of(
        &self,
        primary: &str,
        names: &[&'static str],
    ) -> Vec<(&'static str, String, BrokerSource)> {
        let mut out = Vec::new();
        for (map, source) in [
            (&self.dynamic.broker, BrokerSource::DynamicBroker),
            (&self.dynamic.default, BrokerSource::DynamicDefault),
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

    /// Every broker key with its value in force, for DescribeConfigs: Kafka 4's keys, and
    /// in ZooKeeper mode (as a Kafka 3.9 broker) also those Kafka 4 removed.
    pub fn describe(&self) -> Vec<(&'static ConfigKey, Option<String>)> {
        broker_keys()
            .filter(|k| self.reports(k))
            .map(|k| (k, self.get(k.name)))
            .collect()
    }

    /// Whether DescribeConfigs lists `key`: a key only Kafka 3.9 has is listed only in
    /// ZooKeeper mode.
    pub fn reports(&self, key: &ConfigKey) -> bool {
        !key.only_in_3_9 || self.zookeeper_connect.is_some()
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

/// Typed reads of the keys set, falling back to Kafka's defaults in `defs.rs`: the only
/// way a section reads a value, so no default is written twice.
pub(super) struct Keys<'a>(&'a BTreeMap<String, String>);

impl Keys<'_> {
    pub(super) fn get(&self, key: &str) -> Option<String> {
        self.0
            .get(key)
            .cloned()
            .or_else(|| broker_key(key).and_then(|d| d.default.clone()))
    }

    /// Whether `key` was set explicitly (statically or dynamically).
    pub(super) fn is_set(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    pub(super) fn string(&self, key: &str) -> String {
        self.get(key).unwrap_or_default()
    }

    pub(super) fn int(&self, key: &str) -> Result<i32, ConfigError> {
        parse_num(key, &self.string(key))
    }

    pub(super) fn long(&self, key: &str) -> Result<i64, ConfigError> {
        parse_num(key, &self.string(key))
    }

    pub(super) fn double(&self, key: &str) -> Result<f64, ConfigError> {
        parse_num(key, &self.string(key))
    }

    pub(super) fn bool(&self, key: &str) -> bool {
        self.string(key).eq_ignore_ascii_case("true")
    }

    /// A count or size that must be above zero.
    pub(super) fn positive(&self, key: &str) -> Result<usize, ConfigError> {
        let n = self.int(key)?;
        usize::try_from(n)
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| invalid(key, "must be > 0"))
    }
}

/// Multiplies a numeric value (minutes, hours) into milliseconds; -1 stays -1 (unlimited).
fn scaled(v: Option<(String, BrokerSource)>, factor: i64) -> Option<(String, BrokerSource)> {
    let (s, src) = v?;
    let n: i64 = s.trim().parse().ok()?;
    let ms = if n < 0 { -1 } else { n.saturating_mul(factor) };
    Some((ms.to_string(), src))
}

/// `metrics.listener`: one `http://host:port` (an empty host is every interface), or
/// nothing when unset or empty.
fn metrics_listener(value: Option<String>) -> Result<Option<Listener>, ConfigError> {
    let Some(value) = value.filter(|v| !v.trim().is_empty()) else {
        return Ok(None);
    };
    let key = "metrics.listener";
    let mut list = Listener::parse_list(key, &value)?;
    if list.len() != 1 || list[0].name != "HTTP" {
        return Err(invalid(
            key,
            format!("{value:?} is not one http://host:port"),
        ));
    }
    Ok(list.pop())
}

pub(super) fn parse_num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, ConfigError> {
    v.trim()
        .parse()
        .map_err(|_| invalid(key, format!("{v:?} is not a number in range")))
}

#[cfg(test)]
mod redaction_tests {
    use super::*;

    #[test]
    fn password_values_are_hidden_in_log_lines() {
        let configs: BTreeMap<String, String> = [
            ("ssl.keystore.password", "hunter2"),
            ("listener.name.internal.ssl.key.password", "hunter3"),
            (
                "listener.name.client.plain.sasl.jaas.config",
                "x required password=\"p\";",
            ),
            ("log.retention.ms", "1000"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let shown = format!("{:?}", redacted(&configs));
        for secret in ["hunter2", "hunter3", "password="] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(shown.contains("1000"));
    }
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
        assert_eq!(c.log.message_max_bytes, 1048588);
        assert_eq!(c.network.socket_request_max_bytes, 104857600);
        assert_eq!(c.network.queued_max_request_bytes, Some(256 << 20));
        assert_eq!(
            cfg(&[("queued.max.request.bytes", "-1")])
                .unwrap()
                .network
                .queued_max_request_bytes,
            None,
            "unbounded, as in Kafka"
        );
        assert!(c.log.auto_create_topics_enable);
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
