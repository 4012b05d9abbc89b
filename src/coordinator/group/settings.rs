//! Where the group coordinator reads its settings: the broker's group coordinator config
//! in force, taken at each operation so a dynamic change applies from the next one, and
//! each group's own configs (resource type GROUP), which it follows through the metadata
//! deltas as Kafka's `GroupConfigManager` does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::config::group::{clamp_to_bound, GroupConfig};
use crate::config::kraft::ProcessRoles;
use crate::config::{BrokerConfig, SharedConfig};
use crate::controller::delta::{ApplyError, MetadataDelta, MetadataListener};
use crate::controller::image::MetadataImage;
use crate::controller::records::CONFIG_RESOURCE_GROUP;
use crate::replica::share::{ShareAutoOffsetReset, SharePartitionConfig};

/// The feature that enables share groups.
pub const SHARE_VERSION: &str = "share.version";

pub struct GroupSettings {
    broker: Arc<SharedConfig>,
    /// The groups that have configs of their own, as the metadata log last set them.
    groups: RwLock<HashMap<String, GroupConfig>>,
    /// The finalized `share.version` in the metadata; -1 while none is finalized.
    share_version: AtomicI32,
}

/// The settings a KIP-848 consumer group (or a share group's members) runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConsumerGroupSettings {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
}

/// The settings a share group's share-partitions run with (Kafka's `GroupConfigManager`
/// over `ShareGroupConfig`): the group's own `share.*` configs kept within the broker's
/// `group.share.min/max.*` bounds in force, else the broker's `group.share.*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShareGroupSettings {
    pub partition: SharePartitionConfig,
    pub auto_offset_reset: ShareAutoOffsetReset,
    pub read_committed: bool,
    /// `share.renew.acknowledge.enable` (default true): RENEW acknowledgements allowed.
    pub renew_acknowledge_enabled: bool,
}

impl GroupSettings {
    /// Knows no group configs until subscribed to the controller.
    pub fn new(broker: Arc<SharedConfig>) -> Arc<GroupSettings> {
        Arc::new(GroupSettings {
            broker,
            groups: RwLock::new(HashMap::new()),
            share_version: AtomicI32::new(-1),
        })
    }

    /// The broker config in force; its `group` section is the coordinator's.
    pub fn broker(&self) -> Arc<BrokerConfig> {
        self.broker.current()
    }

    /// The session timeout and heartbeat interval of consumer group `group_id`: its own
    /// configs, kept within the broker's bounds in force (Kafka 4.4's evaluation), else
    /// the broker's.
    pub fn consumer(&self, group_id: &str) -> ConsumerGroupSettings {
        let broker = self.broker.current();
        let group = &broker.group;
        let own = self
            .groups
            .read()
            .get(group_id)
            .copied()
            .unwrap_or_default();
        let bounded = |key: &str, value: Option<i32>, default: i32| {
            value.map_or(default, |v| {
                clamp_to_bound(key, i64::from(v), &group.group_config_limits) as i32
            })
        };
        ConsumerGroupSettings {
            session_timeout_ms: bounded(
                "consumer.session.timeout.ms",
                own.consumer_session_timeout_ms,
                group.consumer.session_timeout_ms,
            ),
            heartbeat_interval_ms: bounded(
                "consumer.heartbeat.interval.ms",
                own.consumer_heartbeat_interval_ms,
                group.consumer.heartbeat_interval_ms,
            ),
        }
    }

    /// Whether share groups (KIP-932) are served, as Kafka 4.2 decides it: the finalized
    /// `share.version` is 1 or more. Where skua is its own controller (a single node, a
    /// ZooKeeper-mode cluster) and nothing finalized the feature, they are served; a
    /// broker beside Kafka's controller quorum follows the quorum's level (0 unless
    /// finalized).
    pub fn share_groups_enabled(&self) -> bool {
        match self.share_version.load(Ordering::Acquire) {
            -1 => self.broker.current().kraft.process_roles != ProcessRoles::Broker,
            level => level >= 1,
        }
    }

    /// The session timeout and heartbeat interval of share group `group_id`'s members:
    /// its own configs within the broker's bounds in force, else the broker's.
    pub fn share_members(&self, group_id: &str) -> ConsumerGroupSettings {
        let broker = self.broker.current();
        let group = &broker.group;
        let own = self
            .groups
            .read()
            .get(group_id)
            .copied()
            .unwrap_or_default();
        let bounded = |key: &str, value: Option<i32>, default: i32| {
            value.map_or(default, |v| {
                clamp_to_bound(key, i64::from(v), &group.group_config_limits) as i32
            })
        };
        ConsumerGroupSettings {
            session_timeout_ms: bounded(
                "share.session.timeout.ms",
                own.share_session_timeout_ms,
                group.share.session_timeout_ms,
            ),
            heartbeat_interval_ms: bounded(
                "share.heartbeat.interval.ms",
                own.share_heartbeat_interval_ms,
                group.share.heartbeat_interval_ms,
            ),
        }
    }

    /// The settings of share group `group_id`'s share-partitions.
    pub fn share(&self, group_id: &str) -> ShareGroupSettings {
        let broker = self.broker.current();
        let limits = &broker.group.group_config_limits;
        let own = self
            .groups
            .read()
            .get(group_id)
            .copied()
            .unwrap_or_default();
        let value = |key: &str, own: Option<i64>, fallback: i64| {
            let v = own.or_else(|| limits.defaults.get(key).copied());
            clamp_to_bound(key, v.unwrap_or(fallback), limits)
        };
        let d = SharePartitionConfig::default();
        ShareGroupSettings {
            partition: SharePartitionConfig {
                record_lock_duration_ms: value(
                    "share.record.lock.duration.ms",
                    own.share_record_lock_duration_ms,
                    d.record_lock_duration_ms,
                ),
                delivery_count_limit: value(
                    "share.delivery.count.limit",
                    own.share_delivery_count_limit,
                    i64::from(d.delivery_count_limit),
                )
                .clamp(1, i64::from(u16::MAX)) as u16,
                max_record_locks: value(
                    "share.partition.max.record.locks",
                    own.share_partition_max_record_locks,
                    i64::from(d.max_record_locks),
                )
                .clamp(1, i64::from(u32::MAX)) as u32,
            },
            auto_offset_reset: own.share_auto_offset_reset.unwrap_or_default(),
            read_committed: own.share_read_committed.unwrap_or(false),
            renew_acknowledge_enabled: own.share_renew_acknowledge_enable.unwrap_or(true),
        }
    }
}

impl MetadataListener for GroupSettings {
    fn on_delta(&self, image: &MetadataImage, delta: &MetadataDelta) -> Vec<ApplyError> {
        let share_version = image.feature(SHARE_VERSION).map_or(-1, i32::from);
        self.share_version.store(share_version, Ordering::Release);
        let changed = delta
            .configs
            .iter()
            .filter(|r| r.resource_type == CONFIG_RESOURCE_GROUP);
        for resource in changed {
            let config = image
                .resource_configs(resource)
                .map(GroupConfig::from_configs)
                .filter(|c| *c != GroupConfig::default());
            let mut groups = self.groups.write();
            match config {
                Some(c) => groups.insert(resource.name.clone(), c),
                None => groups.remove(&resource.name),
            };
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::controller::records::MetadataRecord;

    fn record(group: &str, key: &str, value: Option<&str>) -> MetadataRecord {
        MetadataRecord::Config {
            resource_type: CONFIG_RESOURCE_GROUP,
            resource_name: group.into(),
            name: key.into(),
            value: value.map(str::to_string),
        }
    }

    #[test]
    fn a_group_runs_with_its_own_configs_within_the_broker_bounds() {
        let props = BTreeMap::from([(
            "group.consumer.session.timeout.ms".to_string(),
            "50000".to_string(),
        )]);
        let broker = BrokerConfig::from_properties(props).unwrap();
        let settings = GroupSettings::new(SharedConfig::new(broker));
        let defaults = ConsumerGroupSettings {
            session_timeout_ms: 50_000,
            heartbeat_interval_ms: 5000,
        };
        assert_eq!(settings.consumer("g"), defaults);

        let mut image = MetadataImage::default();
        let mut apply = |records: &[MetadataRecord]| {
            let changes: Vec<_> = records.iter().map(|r| image.replay(r).unwrap()).collect();
            settings.on_delta(&image, &MetadataDelta::from_changes(&changes, &image));
        };
        apply(&[
            record("g", "consumer.session.timeout.ms", Some("55000")),
            record("g", "consumer.heartbeat.interval.ms", Some("7000")),
            // Stored by a broker with wider bounds: kept within this broker's.
            record("h", "consumer.session.timeout.ms", Some("90000")),
        ]);
        let g = ConsumerGroupSettings {
            session_timeout_ms: 55_000,
            heartbeat_interval_ms: 7000,
        };
        assert_eq!(settings.consumer("g"), g);
        assert_eq!(settings.consumer("h").session_timeout_ms, 60_000);
        assert_eq!(settings.consumer("other"), defaults);

        apply(&[record("g", "consumer.heartbeat.interval.ms", None)]);
        assert_eq!(settings.consumer("g").heartbeat_interval_ms, 5000);
        apply(&[record("g", "consumer.session.timeout.ms", None)]);
        assert_eq!(settings.consumer("g"), defaults);
        assert!(!settings.groups.read().contains_key("g"));
    }

    #[test]
    fn share_groups_run_with_their_configs_clamped_to_the_broker_lock_bounds() {
        let broker = BrokerConfig::from_properties(BTreeMap::new()).unwrap();
        let settings = GroupSettings::new(SharedConfig::new(broker));
        let defaults = settings.share("q");
        assert_eq!(defaults.partition.record_lock_duration_ms, 30_000);
        assert_eq!(defaults.partition.delivery_count_limit, 5);
        assert_eq!(defaults.partition.max_record_locks, 2000);
        assert_eq!(defaults.auto_offset_reset, ShareAutoOffsetReset::Latest);
        assert!(!defaults.read_committed);
        assert!(defaults.renew_acknowledge_enabled);

        let mut image = MetadataImage::default();
        let mut apply = |records: &[MetadataRecord]| {
            let changes: Vec<_> = records.iter().map(|r| image.replay(r).unwrap()).collect();
            settings.on_delta(&image, &MetadataDelta::from_changes(&changes, &image));
        };
        apply(&[
            record("q", "share.record.lock.duration.ms", Some("20000")),
            record("q", "share.auto.offset.reset", Some("earliest")),
            record("q", "share.isolation.level", Some("read_committed")),
            record("q", "share.delivery.count.limit", Some("3")),
            record("q", "share.heartbeat.interval.ms", Some("6000")),
            record("q", "share.session.timeout.ms", Some("50000")),
            record("q", "share.renew.acknowledge.enable", Some("false")),
            // Below and above group.share.min/max.record.lock.duration.ms (15 s, 60 s),
            // stored when the bounds were wider.
            record("low", "share.record.lock.duration.ms", Some("1000")),
            record("high", "share.record.lock.duration.ms", Some("3600000")),
        ]);
        let q = settings.share("q");
        assert_eq!(q.partition.record_lock_duration_ms, 20_000);
        assert_eq!(q.partition.delivery_count_limit, 3);
        assert_eq!(q.auto_offset_reset, ShareAutoOffsetReset::Earliest);
        assert!(q.read_committed);
        assert!(!q.renew_acknowledge_enabled);
        assert_eq!(
            settings.share("low").partition.record_lock_duration_ms,
            15_000
        );
        assert_eq!(
            settings.share("high").partition.record_lock_duration_ms,
            60_000
        );
    }

    #[test]
    fn share_groups_follow_the_finalized_share_version() {
        let single = GroupSettings::new(SharedConfig::new(
            BrokerConfig::from_properties(BTreeMap::new()).unwrap(),
        ));
        assert!(
            single.share_groups_enabled(),
            "skua's own controller, nothing finalized"
        );
        let mut image = MetadataImage::default();
        let level = |image: &mut MetadataImage, level: i16| {
            let r = MetadataRecord::FeatureLevel {
                name: SHARE_VERSION.to_string(),
                level,
            };
            let change = image.replay(&r).unwrap();
            MetadataDelta::from_changes(&[change], image)
        };
        let delta = level(&mut image, 0);
        single.on_delta(&image, &delta);
        assert!(!single.share_groups_enabled(), "share.version 0");
        let delta = level(&mut image, 1);
        single.on_delta(&image, &delta);
        assert!(single.share_groups_enabled(), "share.version 1");
    }
}
