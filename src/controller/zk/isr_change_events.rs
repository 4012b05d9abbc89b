//! The controller's side of ISR changes a leader wrote to ZooKeeper itself (Kafka 3.9's
//! `KafkaController.processIsrChangeNotification`). A Kafka broker whose
//! `inter.broker.protocol.version` is below 2.7 has no AlterPartition: as a leader it
//! writes a shrunk or expanded ISR straight into the partition's `state` znode and then
//! `/isr_change_notification/isr_change_<seq>` naming the partitions. The controller reads
//! every notification, re-reads those partitions' state znodes into its context (so an
//! election later starts from the ISR the leader wrote), tells every live broker with
//! UpdateMetadata, and deletes the notifications.

use std::collections::BTreeSet;

use serde::Deserialize;

use super::context::TopicPartition;
use super::event_loop::{ControllerLoop, Event, ZkResult};
use super::store;

/// The parent of the notifications (Kafka's `IsrChangeNotificationZNode`).
pub const ISR_CHANGE_NOTIFICATION: &str = "/isr_change_notification";

/// A notification's content: `{"version":1,"partitions":[{"topic":..,"partition":..}]}`.
#[derive(Deserialize)]
struct IsrChange {
    partitions: Vec<ChangedPartition>,
}

#[derive(Deserialize)]
struct ChangedPartition {
    topic: String,
    partition: i32,
}

impl ControllerLoop {
    /// Failover: the watch, then the notifications left from before are deleted, as
    /// Kafka does (the context was just read from the state znodes they point at).
    pub(super) async fn watch_isr_change_events(&mut self) -> ZkResult<()> {
        let (children, w) = self.s.children_and_watch(ISR_CHANGE_NOTIFICATION).await?;
        self.on_watch(w, Event::IsrChangeNotification(self.generation));
        self.armed.isr_change_events = true;
        self.delete_notifications(ISR_CHANGE_NOTIFICATION, &children)
            .await
    }

    /// New notifications: the partitions' leadership from ZooKeeper, then UpdateMetadata.
    pub(super) async fn process_isr_change_notification(&mut self) -> ZkResult<()> {
        let (children, w) = self.s.children_and_watch(ISR_CHANGE_NOTIFICATION).await?;
        if !self.armed.isr_change_events {
            self.on_watch(w, Event::IsrChangeNotification(self.generation));
            self.armed.isr_change_events = true;
        }
        let changes: Vec<IsrChange> = self
            .read_notifications(ISR_CHANGE_NOTIFICATION, &children, "ISR change")
            .await?;
        let changed: BTreeSet<TopicPartition> = changes
            .into_iter()
            .flat_map(|change| change.partitions)
            .map(|p| TopicPartition {
                topic: p.topic,
                partition: p.partition,
            })
            .collect();
        // Partitions of topics the controller no longer knows are left out, as Kafka does.
        let known: Vec<TopicPartition> = changed
            .into_iter()
            .filter(|tp| self.ctx.leadership.contains_key(tp))
            .collect();
        let result = self.on_isr_changes(&known).await;
        // Deleted whatever happened, as Kafka does: a notification is a hint, and the next
        // failover or election reads the state znodes anyway.
        self.delete_notifications(ISR_CHANGE_NOTIFICATION, &children)
            .await?;
        result
    }

    async fn on_isr_changes(&mut self, partitions: &[TopicPartition]) -> ZkResult<()> {
        if partitions.is_empty() {
            return Ok(());
        }
        let states = store::read_partition_states(&self.s, partitions).await?;
        tracing::info!(
            partitions = states.len(),
            "ISR changes written by their leaders"
        );
        self.ctx.leadership.extend(states);
        let brokers: Vec<i32> = self.ctx.live_or_shutting_down_ids().into_iter().collect();
        self.batch
            .add_update_metadata(&self.ctx, &brokers, partitions);
        self.flush();
        Ok(())
    }
}
