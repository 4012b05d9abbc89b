//! Where the group coordinator reads its settings: the broker's group coordinator config
//! in force, taken at each operation, so a dynamic change applies from the next one.

use std::sync::Arc;

use crate::config::{BrokerConfig, SharedConfig};

pub struct GroupSettings {
    broker: Arc<SharedConfig>,
}

/// The settings a KIP-848 consumer group runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConsumerGroupSettings {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
}

impl GroupSettings {
    pub fn new(broker: Arc<SharedConfig>) -> Arc<GroupSettings> {
        Arc::new(GroupSettings { broker })
    }

    /// The broker config in force; its `group` section is the coordinator's.
    pub fn broker(&self) -> Arc<BrokerConfig> {
        self.broker.current()
    }

    /// The session timeout and heartbeat interval of consumer group `group_id`.
    pub fn consumer(&self, _group_id: &str) -> ConsumerGroupSettings {
        let c = self.broker.current().group.consumer;
        ConsumerGroupSettings {
            session_timeout_ms: c.session_timeout_ms,
            heartbeat_interval_ms: c.heartbeat_interval_ms,
        }
    }
}
