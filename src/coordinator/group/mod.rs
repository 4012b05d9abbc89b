//! Consumer groups, classic (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) and KIP-848
//! (ConsumerGroupHeartbeat), and committed offsets, persisted in `__consumer_offsets`.
//!
//! - `state.rs`: one group's state machine, pure (time is passed in).
//! - `consumer.rs`: KIP-848 (`group.protocol=consumer`) groups, pure as well, and
//!   `consumer/records.rs` their records in `__consumer_offsets`.
//! - `coordinator.rs`: the table of groups, timers, and the writes.
//! - `offsets.rs`: committing, fetching, deleting and expiring offsets.
//! - `offsets_topic.rs`: Kafka's record schemas and the group → partition mapping.
//! - `load.rs`: rebuilding everything from the topic at startup.
//! - `topics.rs`: the controller's topics as KIP-848 groups see them.

pub mod consumer;
mod consumer_groups;
pub mod coordinator;
pub mod load;
pub mod offsets;
pub mod offsets_topic;
pub mod state;
pub mod topics;

#[cfg(test)]
mod state_tests;

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;

pub use coordinator::GroupCoordinator;
pub use offsets_topic::OFFSETS_TOPIC;

use crate::broker::Broker;
use crate::controller::NewTopic;

/// Creates `__consumer_offsets` if it does not exist yet, as the first FindCoordinator
/// for a group does in Kafka.
pub async fn ensure_offsets_topic(broker: &Broker) -> Result<(), ResponseError> {
    if broker.controller.topic(OFFSETS_TOPIC).is_some() {
        return Ok(());
    }
    let cfg = &broker.groups.offsets_topic;
    let live = broker.controller.brokers().len().max(1) as i16;
    let configs = BTreeMap::from([
        ("cleanup.policy".to_string(), "compact".to_string()),
        ("segment.bytes".to_string(), cfg.segment_bytes.to_string()),
        ("compression.type".to_string(), "producer".to_string()),
    ]);
    let topic = NewTopic {
        name: OFFSETS_TOPIC.to_string(),
        num_partitions: cfg.partitions,
        replication_factor: cfg.replication_factor.clamp(1, live),
        assignments: BTreeMap::new(),
        configs,
    };
    match broker.create_topic(topic, false).await {
        Ok(_) => {
            tracing::info!(partitions = cfg.partitions, "created {OFFSETS_TOPIC}");
            Ok(())
        }
        Err(e) if e.error == ResponseError::TopicAlreadyExists => Ok(()),
        Err(e) => {
            tracing::error!(error = %e, "cannot create {OFFSETS_TOPIC}");
            Err(ResponseError::CoordinatorNotAvailable)
        }
    }
}
