//! ZooKeeper mode's typed section: the session, the controller's timeouts and elections,
//! and the broker's controlled shutdown (Kafka's `ZkConfigs`, `ReplicationConfigs` and
//! `ServerConfigs` keys a ZooKeeper-mode broker reads). Built for every config, used
//! only with `zookeeper.connect`; a bad value stops startup naming its key, as anywhere
//! else in the config. (`zookeeper.connect` itself, which chooses the mode, is the
//! config's `zookeeper_connect`.)

use std::time::Duration;

use super::broker::{ConfigError, Keys};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZooKeeperConfig {
    /// `zookeeper.session.timeout.ms`.
    pub session_timeout: Duration,
    /// `zookeeper.connection.timeout.ms`; None waits as long as the session timeout.
    pub connection_timeout: Option<Duration>,
    /// `controller.socket.timeout.ms`: how long the controller waits for a broker's answer.
    pub controller_socket_timeout: Duration,
    /// `request.timeout.ms`: how long admin requests wait for the controller, and each
    /// ControlledShutdown request for its answer.
    pub request_timeout: Duration,
    pub unclean_leader_election: bool,
    pub auto_leader_rebalance: bool,
    pub leader_imbalance_check_interval: Duration,
    /// `leader.imbalance.per.broker.percentage`, within 0..=100.
    pub leader_imbalance_per_broker_percentage: i32,
    pub controlled_shutdown: ControlledShutdownConfig,
}

/// `controlled.shutdown.*`: whether a stopping broker asks the controller to move its
/// leaderships away first, and how often it asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlledShutdownConfig {
    pub enable: bool,
    pub max_retries: u32,
    pub retry_backoff: Duration,
}

/// Milliseconds, at least 1 (a zero timeout would fire at once, which no key means).
fn millis(n: i64) -> Duration {
    Duration::from_millis(n.max(1) as u64)
}

impl ZooKeeperConfig {
    pub(super) fn build(keys: &Keys<'_>) -> Result<Self, ConfigError> {
        let connection_timeout = match keys.get("zookeeper.connection.timeout.ms") {
            Some(_) => Some(millis(keys.long("zookeeper.connection.timeout.ms")?)),
            None => None,
        };
        Ok(ZooKeeperConfig {
            session_timeout: millis(keys.long("zookeeper.session.timeout.ms")?),
            connection_timeout,
            controller_socket_timeout: millis(keys.long("controller.socket.timeout.ms")?),
            request_timeout: millis(keys.long("request.timeout.ms")?),
            unclean_leader_election: keys.bool("unclean.leader.election.enable"),
            auto_leader_rebalance: keys.bool("auto.leader.rebalance.enable"),
            leader_imbalance_check_interval: Duration::from_secs(
                keys.long("leader.imbalance.check.interval.seconds")?.max(1) as u64,
            ),
            leader_imbalance_per_broker_percentage: keys
                .int("leader.imbalance.per.broker.percentage")?
                .clamp(0, 100),
            controlled_shutdown: ControlledShutdownConfig {
                enable: keys.bool("controlled.shutdown.enable"),
                max_retries: keys.int("controlled.shutdown.max.retries")?.max(0) as u32,
                retry_backoff: Duration::from_millis(
                    keys.long("controlled.shutdown.retry.backoff.ms")?.max(0) as u64,
                ),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::config::BrokerConfig;

    fn config(pairs: &[(&str, &str)]) -> Result<BrokerConfig, String> {
        let props: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        BrokerConfig::from_properties(props).map_err(|e| e.to_string())
    }

    #[test]
    fn kafkas_defaults() {
        let zk = config(&[]).unwrap().zookeeper;
        assert_eq!(zk.session_timeout.as_millis(), 18_000);
        assert_eq!(zk.connection_timeout, None);
        assert_eq!(zk.controller_socket_timeout.as_millis(), 30_000);
        assert_eq!(zk.request_timeout.as_millis(), 30_000);
        assert!(!zk.unclean_leader_election);
        assert!(zk.auto_leader_rebalance);
        assert_eq!(zk.leader_imbalance_check_interval.as_secs(), 300);
        assert_eq!(zk.leader_imbalance_per_broker_percentage, 10);
        assert!(zk.controlled_shutdown.enable);
        assert_eq!(zk.controlled_shutdown.max_retries, 3);
        assert_eq!(zk.controlled_shutdown.retry_backoff.as_millis(), 5_000);
    }

    #[test]
    fn values_set_are_read() {
        let zk = config(&[
            ("zookeeper.connect", "127.0.0.1:2181/kafka"),
            ("zookeeper.session.timeout.ms", "6000"),
            ("zookeeper.connection.timeout.ms", "2000"),
            ("auto.leader.rebalance.enable", "false"),
            ("leader.imbalance.check.interval.seconds", "5"),
            ("controlled.shutdown.enable", "FALSE"),
            ("controlled.shutdown.max.retries", "7"),
            ("controlled.shutdown.retry.backoff.ms", "250"),
        ])
        .unwrap()
        .zookeeper;
        assert_eq!(zk.session_timeout.as_millis(), 6_000);
        assert_eq!(zk.connection_timeout.map(|d| d.as_millis()), Some(2_000));
        assert!(!zk.auto_leader_rebalance);
        assert_eq!(zk.leader_imbalance_check_interval.as_secs(), 5);
        assert!(!zk.controlled_shutdown.enable);
        assert_eq!(zk.controlled_shutdown.max_retries, 7);
        assert_eq!(zk.controlled_shutdown.retry_backoff.as_millis(), 250);
    }

    /// A bad value names its key and stops startup; before this section the ZooKeeper
    /// keys were read as strings and a bad one silently became the default.
    #[test]
    fn bad_values_are_refused() {
        for (key, value) in [
            ("zookeeper.session.timeout.ms", "six seconds"),
            ("controlled.shutdown.max.retries", "many"),
            ("controlled.shutdown.enable", "yes"),
            ("auto.leader.rebalance.enable", "1"),
            ("leader.imbalance.check.interval.seconds", "0"),
            ("leader.imbalance.per.broker.percentage", "ten"),
            ("request.timeout.ms", "-1"),
        ] {
            let err = config(&[(key, value)]).unwrap_err();
            assert!(err.contains(key), "{key}={value}: {err}");
        }
    }
}
