//! The group coordinator's broker-level settings (Kafka's `GroupCoordinatorConfig`) and
//! the `__consumer_offsets` topic's, typed once at startup.

use std::collections::BTreeMap;

use super::broker::{invalid, ConfigError, Keys};
use super::defs::{GroupBound, Kind, GROUP_KEYS};

/// Classic groups: the bounds members' session timeouts must keep, the delay before a new
/// group's first rebalance, and the most members a group may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassicGroupConfig {
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub initial_rebalance_delay_ms: i32,
    pub max_size: i32,
}

impl Default for ClassicGroupConfig {
    /// Kafka's defaults.
    fn default() -> Self {
        super::BrokerConfig::default().group.classic
    }
}

/// KIP-848 consumer groups: the session timeout and heartbeat interval every group gets
/// unless its own configs say otherwise, and the bounds those must keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConsumerGroupConfig {
    pub session_timeout_ms: i32,
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub min_heartbeat_interval_ms: i32,
    pub max_heartbeat_interval_ms: i32,
}

/// KIP-932 share groups: the session timeout and heartbeat interval members get, and the
/// most members a group may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShareGroupConfig {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub max_size: i32,
    /// `group.share.max.share.sessions`: share sessions (one per member fetching here)
    /// this broker keeps at most.
    pub max_share_sessions: i32,
}

/// What a group config may be set to on this broker: for each group key, the bounds its
/// broker keys give and the broker value it falls back to, resolved once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupConfigLimits {
    /// Group key → (least, most) allowed.
    pub bounds: BTreeMap<&'static str, (Option<i64>, Option<i64>)>,
    /// Group key → the broker value it takes when a group does not set it (numbers only).
    pub defaults: BTreeMap<&'static str, i64>,
    /// `group.streams.assignors`: the names `streams.assignor.name` may take.
    pub streams_assignors: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupCoordinatorConfig {
    pub classic: ClassicGroupConfig,
    pub consumer: ConsumerGroupConfig,
    pub share: ShareGroupConfig,
    /// `offsets.retention.minutes`, in ms.
    pub offsets_retention_ms: i64,
    pub offsets_retention_check_interval_ms: u64,
    /// `offset.metadata.max.bytes`.
    pub offset_metadata_max_bytes: usize,
    pub group_config_limits: GroupConfigLimits,
}

impl GroupCoordinatorConfig {
    pub(super) fn build(keys: &Keys<'_>) -> Result<Self, ConfigError> {
        let consumer = ConsumerGroupConfig {
            session_timeout_ms: keys.int("group.consumer.session.timeout.ms")?,
            min_session_timeout_ms: keys.int("group.consumer.min.session.timeout.ms")?,
            max_session_timeout_ms: keys.int("group.consumer.max.session.timeout.ms")?,
            heartbeat_interval_ms: keys.int("group.consumer.heartbeat.interval.ms")?,
            min_heartbeat_interval_ms: keys.int("group.consumer.min.heartbeat.interval.ms")?,
            max_heartbeat_interval_ms: keys.int("group.consumer.max.heartbeat.interval.ms")?,
        };
        Ok(GroupCoordinatorConfig {
            classic: ClassicGroupConfig {
                min_session_timeout_ms: keys.int("group.min.session.timeout.ms")?,
                max_session_timeout_ms: keys.int("group.max.session.timeout.ms")?,
                initial_rebalance_delay_ms: keys.int("group.initial.rebalance.delay.ms")?,
                max_size: keys.int("group.max.size")?,
            },
            consumer,
            share: ShareGroupConfig {
                session_timeout_ms: keys.int("group.share.session.timeout.ms")?,
                heartbeat_interval_ms: keys.int("group.share.heartbeat.interval.ms")?,
                max_size: keys.int("group.share.max.size")?,
                max_share_sessions: keys.int("group.share.max.share.sessions")?,
            },
            offsets_retention_ms: i64::from(keys.int("offsets.retention.minutes")?)
                .saturating_mul(60_000),
            offsets_retention_check_interval_ms: keys
                .long("offsets.retention.check.interval.ms")?
                .max(1) as u64,
            offset_metadata_max_bytes: keys.int("offset.metadata.max.bytes")?.max(0) as usize,
            group_config_limits: limits(keys)?,
        })
    }
}

fn limits(keys: &Keys<'_>) -> Result<GroupConfigLimits, ConfigError> {
    let mut out = GroupConfigLimits::default();
    let bound = |key: &str| keys.long(key).map(Some);
    for k in GROUP_KEYS {
        let range = match k.bound {
            GroupBound::None => None,
            GroupBound::Range(min, max) => Some((bound(min)?, bound(max)?)),
            GroupBound::AtLeast(min) => Some((bound(min)?, None)),
            GroupBound::AtMost(max) => Some((None, bound(max)?)),
        };
        if let Some(range) = range {
            out.bounds.insert(k.name, range);
        }
        if let (Some(synonym), Kind::Int | Kind::Long) = (k.broker_synonym, k.kind) {
            out.defaults.insert(k.name, keys.long(synonym)?);
        }
    }
    out.streams_assignors = keys
        .string("group.streams.assignors")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect();
    Ok(out)
}

/// The `__consumer_offsets` settings used when the broker creates the topic. A topic
/// that already exists keeps its own partition count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetsTopicConfig {
    pub partitions: i32,
    pub replication_factor: i16,
    pub segment_bytes: i32,
}

impl OffsetsTopicConfig {
    pub(super) fn build(keys: &Keys<'_>) -> Result<Self, ConfigError> {
        let factor = keys.int("offsets.topic.replication.factor")?;
        Ok(OffsetsTopicConfig {
            partitions: keys.int("offsets.topic.num.partitions")?,
            replication_factor: i16::try_from(factor)
                .map_err(|_| invalid("offsets.topic.replication.factor", "out of range"))?,
            segment_bytes: keys.int("offsets.topic.segment.bytes")?,
        })
    }
}

/// The share coordinator's `__share_group_state` settings (`share.coordinator.*`). A
/// topic that already exists keeps its own partition count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareCoordinatorConfig {
    pub partitions: i32,
    pub replication_factor: i16,
    pub min_isr: i16,
    pub segment_bytes: i32,
    /// ShareUpdate records written between two ShareSnapshots of a share-partition.
    pub updates_per_snapshot: u32,
}

impl ShareCoordinatorConfig {
    pub(super) fn build(keys: &Keys<'_>) -> Result<Self, ConfigError> {
        let short = |key: &'static str| {
            i16::try_from(keys.int(key)?).map_err(|_| invalid(key, "out of range"))
        };
        Ok(ShareCoordinatorConfig {
            partitions: keys.int("share.coordinator.state.topic.num.partitions")?,
            replication_factor: short("share.coordinator.state.topic.replication.factor")?,
            min_isr: short("share.coordinator.state.topic.min.isr")?,
            segment_bytes: keys.int("share.coordinator.state.topic.segment.bytes")?,
            updates_per_snapshot: keys
                .int("share.coordinator.snapshot.update.records.per.snapshot")?
                .max(0) as u32,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BrokerConfig;

    fn cfg(pairs: &[(&str, &str)]) -> Result<BrokerConfig, ConfigError> {
        BrokerConfig::from_properties(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn kafka_defaults() {
        let g = cfg(&[]).unwrap().group;
        assert_eq!(
            g.classic,
            ClassicGroupConfig {
                min_session_timeout_ms: 6000,
                max_session_timeout_ms: 1_800_000,
                initial_rebalance_delay_ms: 3000,
                max_size: i32::MAX,
            }
        );
        assert_eq!(g.consumer.session_timeout_ms, 45_000);
        assert_eq!(g.consumer.heartbeat_interval_ms, 5000);
        assert_eq!(g.offsets_retention_ms, 7 * 24 * 3_600_000);
        let limits = &g.group_config_limits;
        assert_eq!(
            limits.bounds["consumer.session.timeout.ms"],
            (Some(45_000), Some(60_000))
        );
        assert_eq!(
            limits.bounds["streams.num.standby.replicas"],
            (None, Some(2))
        );
        assert_eq!(limits.defaults["share.record.lock.duration.ms"], 30_000);
        assert_eq!(limits.streams_assignors, vec!["sticky".to_string()]);
    }
}
