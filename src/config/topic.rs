//! Per-topic configuration: validation of overrides and the values in force.

use std::collections::BTreeMap;

use super::broker::{BrokerConfig, BrokerSource};
use super::catalog::{topic_key, topic_keys, ConfigKey};
use crate::log::compression::CompressionType;
use crate::log::{CleanupPolicy, LogConfig, TimestampType};

/// Where a topic value came from, with Kafka's DescribeConfigs source codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopicSource {
    DynamicTopic = 1,
    DynamicBroker = 2,
    DynamicDefaultBroker = 3,
    StaticBroker = 4,
    Default = 5,
}

impl From<BrokerSource> for TopicSource {
    fn from(source: BrokerSource) -> Self {
        match source {
            BrokerSource::DynamicBroker => TopicSource::DynamicBroker,
            BrokerSource::DynamicDefault => TopicSource::DynamicDefaultBroker,
            BrokerSource::Static => TopicSource::StaticBroker,
            BrokerSource::Default => TopicSource::Default,
        }
    }
}

/// Checks topic config overrides as CreateTopics and AlterConfigs receive them, with Kafka
/// 4's validators and messages (`LogConfig.validate`). Returns the message for an
/// INVALID_CONFIG answer.
pub fn validate(overrides: &BTreeMap<String, String>) -> Result<(), String> {
    for (k, v) in overrides {
        let def = topic_key(k).ok_or_else(|| format!("Unknown topic config name: {k}"))?;
        def.check(v)
            .map_err(|why| format!("Invalid value {v} for configuration {k}: {why}"))?;
    }
    // LogConfig.validateValues: the compaction lags must not cross.
    let lag = |name: &str, default: i64| {
        overrides
            .get(name)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(default)
    };
    let (min_lag, max_lag) = (
        lag("min.compaction.lag.ms", 0),
        lag("max.compaction.lag.ms", i64::MAX),
    );
    if min_lag > max_lag {
        return Err(format!(
            "conflict topic config setting min.compaction.lag.ms ({min_lag}) > max.compaction.lag.ms ({max_lag})"
        ));
    }
    Ok(())
}

/// The value in force for a topic key, and where it came from.
pub fn effective(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
    key: &ConfigKey,
) -> (String, TopicSource) {
    if let Some(v) = overrides.get(key.name) {
        return (v.clone(), TopicSource::DynamicTopic);
    }
    let primary = key.synonyms.first().copied();
    match primary.and_then(|b| broker.topic_fallback(b)) {
        Some((v, source)) => (v, source.into()),
        None => (
            key.default.clone().unwrap_or_default(),
            TopicSource::Default,
        ),
    }
}

/// Every topic key's value in force, for DescribeConfigs.
pub fn describe(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<(&'static ConfigKey, String, TopicSource)> {
    topic_keys()
        .filter(|k| broker.reports(k))
        .map(|k| {
            let (v, s) = effective(broker, overrides, k);
            (k, v, s)
        })
        .collect()
}

/// The storage settings of one topic: broker defaults overlaid by its overrides.
pub fn log_config(broker: &BrokerConfig, overrides: &BTreeMap<String, String>) -> LogConfig {
    let value = |name: &str| -> (String, &'static str) {
        match topic_key(name) {
            Some(k) => (
                effective(broker, overrides, k).0,
                k.default.as_deref().unwrap_or_default(),
            ),
            None => (String::new(), ""),
        }
    };
    // A value that does not parse (a stored override no validator saw) takes the key's
    // default, which always does.
    let num = |name: &str| -> i64 {
        let (v, default) = value(name);
        v.trim()
            .parse()
            .or_else(|_| default.parse())
            .unwrap_or_default()
    };
    let ratio = |name: &str| -> f64 {
        let (v, default) = value(name);
        v.trim()
            .parse::<f64>()
            .or_else(|_| default.parse())
            .unwrap_or_default()
            .clamp(0.0, 1.0)
    };
    LogConfig {
        // Below 1 MiB only from a data dir written before Kafka 4's limit: still honoured.
        segment_bytes: num("segment.bytes").max(14) as u64,
        segment_ms: num("segment.ms").max(1),
        index_interval_bytes: num("index.interval.bytes").clamp(0, i32::MAX as i64) as u32,
        max_index_size: num("segment.index.bytes").clamp(8, i32::MAX as i64) as u32,
        max_message_bytes: num("max.message.bytes").clamp(0, i32::MAX as i64) as u32,
        message_timestamp_type: if value("message.timestamp.type").0 == "LogAppendTime" {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        },
        message_timestamp_before_max_ms: num("message.timestamp.before.max.ms").max(0),
        message_timestamp_after_max_ms: num("message.timestamp.after.max.ms").max(0),
        compression_type: CompressionType::parse(&value("compression.type").0),
        max_decompressed_message_bytes: num("max.decompressed.message.bytes")
            .clamp(0, i32::MAX as i64) as u32,
        flush_interval_messages: num("flush.messages").max(1) as u64,
        file_delete_delay_ms: num("file.delete.delay.ms").max(0) as u64,
        flush_ms: flush_ms(broker, overrides, num("flush.ms")),
        producer_id_expiration_ms: broker.log.producer_id_expiration_ms,
        retention_ms: num("retention.ms").max(-1),
        retention_bytes: num("retention.bytes"),
        cleanup_policy: CleanupPolicy::parse(&value("cleanup.policy").0),
        delete_retention_ms: num("delete.retention.ms").max(0),
        min_cleanable_dirty_ratio: ratio("min.cleanable.dirty.ratio"),
        min_compaction_lag_ms: num("min.compaction.lag.ms").max(0),
        max_compaction_lag_ms: num("max.compaction.lag.ms").max(1),
        min_insync_replicas: num("min.insync.replicas").clamp(1, i32::MAX as i64) as i32,
    }
}

/// `flush.ms`, with Kafka's fallback: when neither the topic nor
/// `log.flush.interval.ms` sets it, `log.flush.scheduler.interval.ms` does.
fn flush_ms(broker: &BrokerConfig, overrides: &BTreeMap<String, String>, topic: i64) -> i64 {
    match overrides.contains_key("flush.ms") || broker.log.flush_interval_ms_set {
        true => topic.max(0),
        false => broker.log.flush_scheduler_interval_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker(pairs: &[(&str, &str)]) -> BrokerConfig {
        BrokerConfig::from_properties(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
        .unwrap()
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn validation() {
        assert!(validate(&map(&[
            ("retention.ms", "1000"),
            ("cleanup.policy", "compact,delete")
        ]))
        .is_ok());
        assert!(validate(&map(&[("no.such", "1")]))
            .unwrap_err()
            .contains("no.such"));
        assert!(validate(&map(&[("retention.ms", "soon")])).is_err());
        assert!(validate(&map(&[("message.timestamp.type", "Later")])).is_err());
        assert!(validate(&map(&[("segment.bytes", "1")])).is_err());
    }

    #[test]
    fn sources_and_log_config() {
        let b = broker(&[("log.segment.bytes", "1048576"), ("log.roll.hours", "1")]);
        let o = map(&[
            ("max.message.bytes", "2000"),
            ("message.timestamp.type", "LogAppendTime"),
        ]);
        let lc = log_config(&b, &o);
        assert_eq!(lc.segment_bytes, 1048576);
        assert_eq!(lc.segment_ms, 3_600_000);
        assert_eq!(lc.max_message_bytes, 2000);
        assert_eq!(lc.message_timestamp_type, TimestampType::LogAppendTime);
        let d = describe(&b, &o);
        let src = |n: &str| d.iter().find(|(k, _, _)| k.name == n).unwrap().2;
        assert_eq!(src("max.message.bytes"), TopicSource::DynamicTopic);
        assert_eq!(src("segment.bytes"), TopicSource::StaticBroker);
        assert_eq!(src("retention.bytes"), TopicSource::Default);
    }
}

#[cfg(test)]
mod default_tests {
    use super::*;
    use crate::config::defs::Kind;

    /// `log_config` falls back to these when a stored value does not parse.
    #[test]
    fn every_topic_default_is_valid_for_its_key() {
        for k in topic_keys() {
            let default = k.default.as_deref().unwrap_or_default();
            k.check(default)
                .unwrap_or_else(|why| panic!("{}={}: {why}", k.name, default));
            if matches!(k.kind, Kind::Int | Kind::Long) {
                assert!(default.parse::<i64>().is_ok(), "{}", k.name);
            }
        }
    }

    #[test]
    fn an_unparsable_stored_value_takes_the_default() {
        let b = BrokerConfig::default();
        let o = BTreeMap::from([("segment.ms".to_string(), "soon".to_string())]);
        assert_eq!(log_config(&b, &o).segment_ms, 604_800_000);
        let o = BTreeMap::from([("max.message.bytes".to_string(), "".to_string())]);
        assert_eq!(log_config(&b, &o).max_message_bytes, 1_048_588);
    }
}
