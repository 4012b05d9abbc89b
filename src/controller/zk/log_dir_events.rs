//! The controller's side of log dir failures (Kafka 3.9's
//! `KafkaController.processLogDirEventNotification` and `onBrokerLogDirFailure`). A broker
//! whose log dir went offline writes `/log_dir_event_notification/log_dir_event_<seq>`
//! (`broker/log_dir_events.rs`); the controller reads every notification, deletes it, and
//! sends those brokers a LeaderAndIsr for every replica they host. The replicas in the
//! offline dir answer KAFKA_STORAGE_ERROR, and `process_leader_and_isr_response` takes
//! them offline: other leaders are elected for the partitions they led and they leave
//! the ISRs. The broker serves on from its other dirs.

use std::collections::BTreeSet;

use super::broker::log_dir_events::LogDirEvent;
use super::event_loop::{ControllerLoop, Event, ZkResult};
use super::states::ReplicaState;

/// The parent of the notifications (Kafka's `LogDirEventNotificationZNode`).
pub const LOG_DIR_EVENT_NOTIFICATION: &str = "/log_dir_event_notification";

impl ControllerLoop {
    /// Failover: the watch, then the notifications left from before are deleted, as
    /// Kafka does (the replica state machine's startup asks every broker about every
    /// replica anyway).
    pub(super) async fn watch_log_dir_events(&mut self) -> ZkResult<()> {
        let (children, w) = self
            .s
            .children_and_watch(LOG_DIR_EVENT_NOTIFICATION)
            .await?;
        self.on_watch(w, Event::LogDirEventNotification(self.generation));
        self.armed.log_dir_events = true;
        self.delete_notifications(LOG_DIR_EVENT_NOTIFICATION, &children)
            .await
    }

    /// New notifications: ask their brokers about every replica they host.
    pub(super) async fn process_log_dir_event_notification(&mut self) -> ZkResult<()> {
        let (children, w) = self
            .s
            .children_and_watch(LOG_DIR_EVENT_NOTIFICATION)
            .await?;
        if !self.armed.log_dir_events {
            self.on_watch(w, Event::LogDirEventNotification(self.generation));
            self.armed.log_dir_events = true;
        }
        let events: Vec<LogDirEvent> = self
            .read_notifications(LOG_DIR_EVENT_NOTIFICATION, &children, "log dir event")
            .await?;
        let brokers: BTreeSet<i32> = events.iter().map(|event| event.broker).collect();
        self.delete_notifications(LOG_DIR_EVENT_NOTIFICATION, &children)
            .await?;
        self.on_broker_log_dir_failure(&brokers).await
    }

    /// Kafka's `onBrokerLogDirFailure`: every replica on those brokers goes to
    /// OnlineReplica again, which sends each broker a LeaderAndIsr naming them all.
    async fn on_broker_log_dir_failure(&mut self, brokers: &BTreeSet<i32>) -> ZkResult<()> {
        let live: BTreeSet<i32> = brokers
            .iter()
            .copied()
            .filter(|b| self.ctx.live_brokers.contains_key(b))
            .collect();
        if live.is_empty() {
            return Ok(());
        }
        tracing::info!(brokers = ?live, "handling log dir failure: asking the brokers which replicas are offline");
        let replicas = self.ctx.replicas_on_brokers(&live);
        self.replica_changes(&replicas, ReplicaState::Online).await
    }
}
