//! Group configs (resource type GROUP): a group's own overrides of the broker's group
//! settings, as Kafka 4.4's `GroupConfig` defines, checks and describes them.
//!
//! Every key is checked against the broker's bounds when it is set (Kafka's
//! `GroupConfig.validate`, on the whole set the group would have); the coordinator
//! reads the two it acts on (`consumer.session.timeout.ms`,
//! `consumer.heartbeat.interval.ms`) through [`GroupConfig`].

use std::collections::BTreeMap;

use super::broker::{BrokerConfig, BrokerSource};
use super::defs::{broker_key, check_value, group_key, GroupKey, Kind, GROUP_KEYS};
use super::group_coordinator::GroupConfigLimits;
use crate::replica::share::ShareAutoOffsetReset;

/// The keys with broker bounds, in the order Kafka checks them (`validateValues`).
const BOUNDED_IN_ORDER: &[&str] = &[
    "consumer.heartbeat.interval.ms",
    "consumer.session.timeout.ms",
    "consumer.assignment.interval.ms",
    "share.heartbeat.interval.ms",
    "share.session.timeout.ms",
    "share.record.lock.duration.ms",
    "share.delivery.count.limit",
    "share.partition.max.record.locks",
    "share.assignment.interval.ms",
    "streams.heartbeat.interval.ms",
    "streams.session.timeout.ms",
    "streams.num.standby.replicas",
    "streams.assignment.interval.ms",
    "streams.task.offset.interval.ms",
    "streams.num.warmup.replicas",
];

/// Session timeouts that must stay above their group's heartbeat interval.
const SESSION_ABOVE_HEARTBEAT: &[(&str, &str)] = &[
    (
        "consumer.session.timeout.ms",
        "consumer.heartbeat.interval.ms",
    ),
    ("share.session.timeout.ms", "share.heartbeat.interval.ms"),
    (
        "streams.session.timeout.ms",
        "streams.heartbeat.interval.ms",
    ),
];

const RACK_TAGS: &str = "streams.rack.aware.assignment.tags";
const ASSIGNOR_NAME: &str = "streams.assignor.name";
const DLQ_TOPIC: &str = "errors.deadletterqueue.topic.name";

/// Checks the configs a group would have after a change, in Kafka 4.4's order and words;
/// the message of the INVALID_CONFIG answer otherwise.
pub fn validate(
    configs: &BTreeMap<String, String>,
    limits: &GroupConfigLimits,
) -> Result<(), String> {
    if let Some(unknown) = configs.keys().find(|k| group_key(k).is_none()) {
        return Err(format!("Unknown group config name: {unknown}"));
    }
    if let Some(tags) = configs.get(RACK_TAGS) {
        let tags = list(tags);
        if tags.iter().enumerate().any(|(i, t)| tags[..i].contains(t)) {
            return Err(format!("{RACK_TAGS} must not contain duplicate tag keys."));
        }
    }
    for key in GROUP_KEYS {
        if let Some(v) = configs.get(key.name) {
            check_value(key.name, key.kind, v).map_err(|why| {
                format!("Invalid value {v} for configuration {}: {why}", key.name)
            })?;
        }
    }
    let number = |key: &str| configs.get(key).and_then(|v| v.trim().parse::<i64>().ok());
    for &key in BOUNDED_IN_ORDER {
        let (Some(v), Some(&(min, max))) = (number(key), limits.bounds.get(key)) else {
            continue;
        };
        match (min, max) {
            (Some(min), Some(max)) if v < min || v > max => {
                return Err(format!(
                    "{key} must be in the range {min} to {max} inclusive."
                ))
            }
            (Some(min), None) if v < min => {
                return Err(format!("{key} must be greater than or equal to {min}"))
            }
            (None, Some(max)) if v > max => {
                return Err(format!("{key} must be less than or equal to {max}"))
            }
            _ => {}
        }
    }
    if let Some(name) = configs.get(ASSIGNOR_NAME).map(|v| v.trim()) {
        if !limits.streams_assignors.iter().any(|a| a == name) {
            return Err(format!(
                "{ASSIGNOR_NAME} '{name}' is not a registered task assignor. Registered assignors are: [{}].",
                limits.streams_assignors.join(", ")
            ));
        }
    }
    for &(session, heartbeat) in SESSION_ABOVE_HEARTBEAT {
        if number(session).is_none() && number(heartbeat).is_none() {
            continue;
        }
        let effective = |key: &str| number(key).or_else(|| limits.defaults.get(key).copied());
        if effective(session) <= effective(heartbeat) {
            return Err(format!("{session} must be greater than {heartbeat}"));
        }
    }
    if configs
        .get(DLQ_TOPIC)
        .is_some_and(|name| name.trim().starts_with("__"))
    {
        return Err(format!(
            "{DLQ_TOPIC}: DLQ topic name must not start with '__'"
        ));
    }
    Ok(())
}

/// A value as it is stored and described: trimmed, a list's items joined by commas.
pub fn normalize(key: &str, value: &str) -> String {
    match group_key(key).map(|k| k.kind) {
        Some(Kind::List) => list(value).join(","),
        _ => value.trim().to_string(),
    }
}

fn list(value: &str) -> Vec<&str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// Where a described group value came from (DescribeConfigs' ConfigSource codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupSource {
    DynamicBroker = 2,
    DynamicDefaultBroker = 3,
    StaticBroker = 4,
    Default = 5,
    Group = 8,
}

/// One DescribeConfigs entry of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupEntry {
    pub key: &'static GroupKey,
    pub value: String,
    pub source: GroupSource,
    /// (name, value, source), most specific first.
    pub synonyms: Vec<(String, String, GroupSource)>,
}

/// Every group key a group reports (internal ones only when set), with the value in
/// force, its source and its synonyms, as Kafka's DescribeConfigs gives them.
pub fn describe(broker: &BrokerConfig, configs: &BTreeMap<String, String>) -> Vec<GroupEntry> {
    GROUP_KEYS
        .iter()
        .filter(|k| !k.internal || configs.contains_key(k.name))
        .map(|k| describe_key(broker, configs, k))
        .collect()
}

fn describe_key(
    broker: &BrokerConfig,
    configs: &BTreeMap<String, String>,
    key: &'static GroupKey,
) -> GroupEntry {
    let mut synonyms = Vec::new();
    let own = configs.get(key.name).map(|v| normalize(key.name, v));
    if let Some(v) = &own {
        synonyms.push((key.name.to_string(), v.clone(), GroupSource::Group));
    }
    let (fallback, fallback_source) = match key.broker_synonym {
        Some(synonym) => {
            let value = broker_value(key, &broker.get(synonym).unwrap_or_default());
            let source = match broker.source(synonym) {
                BrokerSource::DynamicBroker => GroupSource::DynamicBroker,
                BrokerSource::DynamicDefault => GroupSource::DynamicDefaultBroker,
                BrokerSource::Static => GroupSource::StaticBroker,
                BrokerSource::Default => GroupSource::Default,
            };
            if source != GroupSource::Default {
                synonyms.push((synonym.to_string(), value.clone(), source));
            }
            let default = broker_key(synonym).and_then(|b| b.default).unwrap_or("");
            synonyms.push((
                synonym.to_string(),
                broker_value(key, default),
                GroupSource::Default,
            ));
            (value, source)
        }
        None => {
            synonyms.push((
                key.name.to_string(),
                key.default.to_string(),
                GroupSource::Default,
            ));
            (key.default.to_string(), GroupSource::Default)
        }
    };
    let (value, source) = match own {
        Some(v) => (v, GroupSource::Group),
        None => (fallback, fallback_source),
    };
    GroupEntry {
        key,
        value,
        source,
        synonyms,
    }
}

/// A broker value as the group key reads it: `streams.assignor.name` is the first of
/// `group.streams.assignors`.
fn broker_value(key: &GroupKey, value: &str) -> String {
    match key.name {
        ASSIGNOR_NAME => list(value).first().copied().unwrap_or("").to_string(),
        _ if key.kind == Kind::List => list(value).join(","),
        _ => value.to_string(),
    }
}

/// The group configs the coordinator acts on, typed: None where the group does not set
/// the key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupConfig {
    pub consumer_session_timeout_ms: Option<i32>,
    pub consumer_heartbeat_interval_ms: Option<i32>,
    pub share_session_timeout_ms: Option<i32>,
    pub share_heartbeat_interval_ms: Option<i32>,
    pub share_record_lock_duration_ms: Option<i64>,
    pub share_delivery_count_limit: Option<i64>,
    pub share_partition_max_record_locks: Option<i64>,
    pub share_auto_offset_reset: Option<ShareAutoOffsetReset>,
    /// `share.isolation.level` is `read_committed`.
    pub share_read_committed: Option<bool>,
    /// `share.renew.acknowledge.enable` (KIP-1222: RENEW acknowledgements).
    pub share_renew_acknowledge_enable: Option<bool>,
}

impl GroupConfig {
    /// From a group's stored configs (checked when they were set; a value that does not
    /// parse, which only another writer could have stored, counts as unset).
    pub fn from_configs(configs: &BTreeMap<String, String>) -> GroupConfig {
        let int = |key: &str| configs.get(key).and_then(|v| v.trim().parse().ok());
        let long = |key: &str| configs.get(key).and_then(|v| v.trim().parse().ok());
        GroupConfig {
            consumer_session_timeout_ms: int("consumer.session.timeout.ms"),
            consumer_heartbeat_interval_ms: int("consumer.heartbeat.interval.ms"),
            share_session_timeout_ms: int("share.session.timeout.ms"),
            share_heartbeat_interval_ms: int("share.heartbeat.interval.ms"),
            share_record_lock_duration_ms: long("share.record.lock.duration.ms"),
            share_delivery_count_limit: long("share.delivery.count.limit"),
            share_partition_max_record_locks: long("share.partition.max.record.locks"),
            share_auto_offset_reset: configs
                .get("share.auto.offset.reset")
                .and_then(|v| ShareAutoOffsetReset::parse(v).ok()),
            share_read_committed: configs
                .get("share.isolation.level")
                .map(|v| v.trim() == "read_committed"),
            share_renew_acknowledge_enable: configs
                .get("share.renew.acknowledge.enable")
                .and_then(|v| v.trim().to_ascii_lowercase().parse().ok()),
        }
    }
}

/// Kafka 4.4's `GroupConfig.evaluate`: a group's value kept within the broker's bounds
/// in force (they may have changed since it was set).
pub fn clamp_to_bound(key: &str, value: i64, limits: &GroupConfigLimits) -> i64 {
    match limits.bounds.get(key) {
        Some(&(min, max)) => {
            let v = min.map_or(value, |min| value.max(min));
            max.map_or(v, |max| v.min(max))
        }
        None => value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn broker(pairs: &[(&str, &str)]) -> BrokerConfig {
        BrokerConfig::from_properties(map(pairs)).unwrap()
    }

    fn check(pairs: &[(&str, &str)]) -> Result<(), String> {
        validate(&map(pairs), &broker(&[]).group.group_config_limits)
    }

    /// Kafka 4.4's answers, as a Kafka 4.4 broker gave them.
    #[test]
    fn kafka_messages() {
        assert!(check(&[("consumer.session.timeout.ms", "50000")]).is_ok());
        assert_eq!(
            check(&[("consumer.session.timeout.ms", "1000")]).unwrap_err(),
            "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."
        );
        assert_eq!(
            check(&[("consumer.session.timeout.ms", "abc")]).unwrap_err(),
            "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"
        );
        assert_eq!(
            check(&[("consumer.session.timeout.ms", "0")]).unwrap_err(),
            "Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1"
        );
        assert_eq!(
            check(&[("nope.key", "1")]).unwrap_err(),
            "Unknown group config name: nope.key"
        );
        assert_eq!(
            check(&[("share.isolation.level", "bogus")]).unwrap_err(),
            "Invalid value bogus for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"
        );
        assert_eq!(
            check(&[("share.auto.offset.reset", "bogus")]).unwrap_err(),
            "Invalid value bogus for configuration share.auto.offset.reset: Invalid value `bogus` for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
        );
        for ok in [
            "latest",
            " latest",
            "by_duration:pt1h",
            "by_duration:P1DT1.5S",
        ] {
            assert!(check(&[("share.auto.offset.reset", ok)]).is_ok(), "{ok}");
        }
        for bad in [
            "EARLIEST",
            "BY_DURATION:PT1H",
            "by_duration:-PT1H",
            "by_duration:PT",
        ] {
            assert!(check(&[("share.auto.offset.reset", bad)]).is_err(), "{bad}");
        }
        assert_eq!(
            check(&[("errors.deadletterqueue.topic.name", "__x")]).unwrap_err(),
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"
        );
        assert_eq!(
            check(&[("streams.rack.aware.assignment.tags", "a,a")]).unwrap_err(),
            "streams.rack.aware.assignment.tags must not contain duplicate tag keys."
        );
        assert_eq!(
            check(&[("streams.assignor.name", "nope")]).unwrap_err(),
            "streams.assignor.name 'nope' is not a registered task assignor. Registered assignors are: [sticky]."
        );
        assert_eq!(
            check(&[("share.record.lock.duration.ms", "500")]).unwrap_err(),
            "Invalid value 500 for configuration share.record.lock.duration.ms: Value must be at least 1000"
        );
        assert_eq!(
            check(&[("streams.num.standby.replicas", "3")]).unwrap_err(),
            "streams.num.standby.replicas must be less than or equal to 2"
        );
        assert_eq!(
            check(&[("streams.task.offset.interval.ms", "10")]).unwrap_err(),
            "streams.task.offset.interval.ms must be greater than or equal to 15000"
        );
        assert_eq!(
            check(&[("consumer.assignor.offload.enable", "yes")]).unwrap_err(),
            "Invalid value yes for configuration consumer.assignor.offload.enable: Expected value to be either true or false"
        );
    }

    /// The session timeout must stay above the heartbeat interval, the broker's values
    /// standing in for keys the group does not set (checked with overlapping bounds).
    #[test]
    fn session_above_heartbeat() {
        let b = broker(&[
            ("group.consumer.session.timeout.ms", "50000"),
            ("group.consumer.max.heartbeat.interval.ms", "50000"),
        ]);
        let limits = &b.group.group_config_limits;
        let check = |pairs: &[(&str, &str)]| validate(&map(pairs), limits);
        assert!(check(&[("consumer.heartbeat.interval.ms", "48000")]).is_ok());
        assert_eq!(
            check(&[
                ("consumer.heartbeat.interval.ms", "48000"),
                ("consumer.session.timeout.ms", "46000")
            ])
            .unwrap_err(),
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
        );
        assert_eq!(
            check(&[("consumer.heartbeat.interval.ms", "52000")]).unwrap_err(),
            "consumer.heartbeat.interval.ms must be in the range 5000 to 50000 inclusive."
        );
    }

    #[test]
    fn describe_sources_and_synonyms() {
        let b = broker(&[("group.consumer.session.timeout.ms", "50000")]);
        let own = map(&[
            ("consumer.heartbeat.interval.ms", "6000"),
            ("streams.rack.aware.assignment.tags", "a, b"),
            ("consumer.assignor.offload.enable", "false"),
        ]);
        let entries = describe(&b, &own);
        let entry = |name: &str| entries.iter().find(|e| e.key.name == name).unwrap();
        let s = |n: &str, v: &str, src| (n.to_string(), v.to_string(), src);
        let session = entry("consumer.session.timeout.ms");
        assert_eq!(
            (session.value.as_str(), session.source),
            ("50000", GroupSource::StaticBroker)
        );
        assert_eq!(
            session.synonyms,
            vec![
                s(
                    "group.consumer.session.timeout.ms",
                    "50000",
                    GroupSource::StaticBroker
                ),
                s(
                    "group.consumer.session.timeout.ms",
                    "45000",
                    GroupSource::Default
                ),
            ]
        );
        let heartbeat = entry("consumer.heartbeat.interval.ms");
        assert_eq!(heartbeat.source, GroupSource::Group);
        assert_eq!(
            heartbeat.synonyms,
            vec![
                s("consumer.heartbeat.interval.ms", "6000", GroupSource::Group),
                s(
                    "group.consumer.heartbeat.interval.ms",
                    "5000",
                    GroupSource::Default
                ),
            ]
        );
        assert_eq!(entry("streams.rack.aware.assignment.tags").value, "a,b");
        assert_eq!(entry("streams.assignor.name").value, "sticky");
        assert_eq!(
            entry("share.auto.offset.reset").synonyms,
            vec![s("share.auto.offset.reset", "latest", GroupSource::Default)]
        );
        // Internal keys show only once set.
        assert_eq!(entry("consumer.assignor.offload.enable").value, "false");
        assert!(entries
            .iter()
            .all(|e| e.key.name != "streams.num.warmup.replicas"));
        assert_eq!(
            describe(&b, &BTreeMap::new()).len(),
            21,
            "as Kafka 4.4 lists them"
        );
    }

    #[test]
    fn stored_values_are_clamped_to_the_bounds_in_force() {
        let limits = broker(&[]).group.group_config_limits;
        let clamp = |v| clamp_to_bound("consumer.session.timeout.ms", v, &limits);
        assert_eq!(
            (clamp(1000), clamp(50_000), clamp(90_000)),
            (45_000, 50_000, 60_000)
        );
        assert_eq!(
            GroupConfig::from_configs(&map(&[("consumer.session.timeout.ms", "50000")])),
            GroupConfig {
                consumer_session_timeout_ms: Some(50_000),
                ..Default::default()
            }
        );
    }
}
