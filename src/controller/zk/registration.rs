//! What every cluster member does first on a new ZooKeeper session (Kafka's
//! `KafkaServer.startup` and `registerBroker`): make sure Kafka's top-level paths exist,
//! agree on `/cluster/id`, and register `/brokers/ids/<id>` as an ephemeral znode whose
//! czxid is the broker epoch.

use std::time::Duration;

use crate::zk::session::{ZkError, ZkSession};
use crate::zk::znodes::{self, paths, BrokerRegistration, ClusterId};

/// Creates Kafka's persistent top-level paths (`createTopLevelPaths`).
pub async fn create_top_level_paths(s: &ZkSession) -> Result<(), ZkError> {
    for p in paths::PERSISTENT {
        s.ensure_path(p).await?;
    }
    Ok(())
}

/// The cluster id in `/cluster/id`, creating it with `proposed` when absent
/// (`createOrGetClusterId`).
pub async fn create_or_get_cluster_id(s: &ZkSession, proposed: &str) -> Result<String, ZkError> {
    let data = znodes::encode(&ClusterId::new(proposed.to_string()));
    match s.create_recursive(paths::CLUSTER_ID, &data).await {
        Ok(_) => Ok(proposed.to_string()),
        Err(ZkError::NodeExists(_)) => {
            let (data, _) = s.get(paths::CLUSTER_ID).await?.ok_or_else(|| {
                ZkError::Other(format!("{} vanished while being read", paths::CLUSTER_ID))
            })?;
            znodes::decode::<ClusterId>(&data)
                .map(|c| c.id)
                .map_err(|e| ZkError::Other(format!("unreadable {}: {e}", paths::CLUSTER_ID)))
        }
        Err(e) => Err(e),
    }
}

/// Registers `/brokers/ids/<id>` and returns the broker epoch. A registration left by
/// this broker's previous process (killed before its session expired) blocks the id
/// until ZooKeeper expires that session; this waits for it for up to `wait_max`.
pub async fn register_broker(
    s: &ZkSession,
    broker_id: i32,
    registration: &BrokerRegistration,
    wait_max: Duration,
) -> Result<i64, ZkError> {
    let path = paths::broker(broker_id);
    let data = znodes::encode(registration);
    let deadline = tokio::time::Instant::now() + wait_max;
    loop {
        match s.register_ephemeral(&path, &data).await {
            Ok(stat) => {
                tracing::info!(broker_id, broker_epoch = stat.czxid, endpoints = ?registration.endpoints, "registered in ZooKeeper");
                return Ok(stat.czxid);
            }
            Err(ZkError::NodeExists(_)) => {
                let owner = s.stat(&path).await?.map(|st| st.ephemeral_owner);
                if owner == Some(s.session_id()) {
                    // Ours already (a reply lost to a disconnection): read its epoch.
                    if let Some(st) = s.stat(&path).await? {
                        return Ok(st.czxid);
                    }
                    continue;
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(ZkError::NodeExists(path));
                }
                tracing::warn!(broker_id, "{path} is held by another session (an earlier process of this broker?); waiting for it to expire");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(e),
        }
    }
}
