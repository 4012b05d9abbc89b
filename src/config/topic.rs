//! Per-topic configuration: validation of overrides and the values in force.

use std::collections::BTreeMap;

use super::broker::{BrokerConfig, BrokerSource};
use super::catalog::{topic_key, topic_keys, ConfigKey};
use super::defs::check_value;
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
        check_value(def, v)
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
        None => (key.default.clone().unwrap_or_default(), TopicSource::Default),
    }
}

/// Every topic key's value in force, for DescribeConfigs.
pub fn describe(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<(&'static ConfigKey, String, TopicSource)> {
    topic_keys()
        .map(|k| {
            let (v, s) = effective(broker, overrides, k);
            (k, v, s)
        })
        .collect()
}

/// The storage settings of one topic: broker defaults overlaid by its overrides.
pub fn log_config(broker: &BrokerConfig, overrides: &BTreeMap<String, String>) -> LogConfig {
    let get = |name: &str| -> String {
        topic_key(name)
            .map(|k| effective(broker, overrides, k).0)
            .unwrap_or_default()
    };
    let num = |name: &str, fallback: i64| -> i64 { get(name).trim().parse().unwrap_or(fallback) };
    let defaults = LogConfig::default();
    LogConfig {
        // Below 1 MiB only from a data dir written before Kafka 4's limit: still honoured.
        segment_bytes: num("segment.bytes", defaults.segment_bytes as i64).max(14) as u64,
        segment_ms: num("segment.ms", defaults.segment_ms).max(1),
        index_interval_bytes: num("index.interval.bytes", 4096).clamp(0, i32::MAX as i64) as u32,
        max_index_size: num("segment.index.bytes", 10_485_760).clamp(8, i32::MAX as i64) as u32,
        max_message_bytes: num("max.message.bytes", 1_048_588).clamp(0, i32::MAX as i64) as u32,
        message_timestamp_type: if get("message.timestamp.type") == "LogAppendTime" {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        },
        message_timestamp_before_max_ms: num("message.timestamp.before.max.ms", i64::MAX).max(0),
        message_timestamp_after_max_ms: num("message.timestamp.after.max.ms", 3_600_000).max(0),
        compression_type: CompressionType::parse(&get("compression.type")),
        max_decompressed_message_bytes: num("max.decompressed.message.bytes", i32::MAX as i64 - 8)
            .clamp(0, i32::MAX as i64) as u32,
        flush_interval_messages: num("flush.messages", i64::MAX).max(1) as u64,
        file_delete_delay_ms: num("file.delete.delay.ms", 60_000).max(0) as u64,
        flush_ms: flush_ms(broker, overrides, num("flush.ms", i64::MAX)),
        producer_id_expiration_ms: broker
            .long("producer.id.expiration.ms")
            .unwrap_or(defaults.producer_id_expiration_ms)
            .max(1),
        retention_ms: num("retention.ms", defaults.retention_ms).max(-1),
        retention_bytes: num("retention.bytes", -1),
        cleanup_policy: CleanupPolicy::parse(&get("cleanup.policy")),
        delete_retention_ms: num("delete.retention.ms", defaults.delete_retention_ms).max(0),
        min_cleanable_dirty_ratio: get("min.cleanable.dirty.ratio")
            .trim()
            .parse::<f64>()
            .unwrap_or(defaults.min_cleanable_dirty_ratio)
            .clamp(0.0, 1.0),
        min_compaction_lag_ms: num("min.compaction.lag.ms", 0).max(0),
        max_compaction_lag_ms: num("max.compaction.lag.ms", i64::MAX).max(1),
    }
}

/// `flush.ms`, with Kafka's fallback: when neither the topic nor
/// `log.flush.interval.ms` sets it, `log.flush.scheduler.interval.ms` does.
fn flush_ms(broker: &BrokerConfig, overrides: &BTreeMap<String, String>, topic: i64) -> i64 {
    let explicit = overrides.contains_key("flush.ms")
        || broker.source("log.flush.interval.ms") == BrokerSource::Static;
    match explicit {
        true => topic.max(0),
        false => broker
            .long("log.flush.scheduler.interval.ms")
            .unwrap_or(i64::MAX)
            .max(0),
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
