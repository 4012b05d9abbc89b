//! Telling the controller that a log dir went offline, as a Kafka 3.9 broker does
//! (`KafkaZkClient.propagateLogDirEvent`): a persistent sequential znode
//! `/log_dir_event_notification/log_dir_event_<seq>` holding
//! `{"version":1,"broker":<id>,"event":1}`. A Kafka 3.9 controller reads it, deletes it,
//! sends this broker a LeaderAndIsr for every replica it hosts, learns from the
//! KAFKA_STORAGE_ERROR answers which are offline, and elects other leaders for them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::super::ZkController;
use crate::zk::znodes;

/// The sequential znodes' prefix (Kafka's `LogDirEventNotificationSequenceZNode`).
pub const EVENT_PREFIX: &str = "/log_dir_event_notification/log_dir_event_";
/// Kafka's `LogDirFailureEvent`.
pub const LOG_DIR_FAILURE: i32 = 1;
/// Attempts to write the notification while ZooKeeper is unreachable or the session is
/// being replaced, half a second apart.
const ATTEMPTS: usize = 60;
const RETRY: Duration = Duration::from_millis(500);

/// A notification's content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogDirEvent {
    pub version: i32,
    pub broker: i32,
    pub event: i32,
}

/// Writes one log-dir-failure notification for this broker; retried for about half a
/// minute, then given up with an error logged (the dir stays offline either way).
pub async fn propagate_failure(zk: &ZkController) {
    let shared = zk.shared();
    let event = LogDirEvent {
        version: 1,
        broker: shared.settings.broker_id,
        event: LOG_DIR_FAILURE,
    };
    let data = znodes::encode(&event);
    for _ in 0..ATTEMPTS {
        let session = shared.session.lock().clone();
        if let Some(session) = session {
            match session.create_sequential(EVENT_PREFIX, &data).await {
                Ok(path) => {
                    tracing::info!(path, "log dir failure notified to the controller");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot write the log dir failure notification; trying again")
                }
            }
        }
        tokio::time::sleep(RETRY).await;
    }
    tracing::error!("log dir failure not notified: ZooKeeper did not take the notification");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes a Kafka 3.9 controller reads (`LogDirEventNotificationSequenceZNode`).
    #[test]
    fn the_notification_is_kafkas_json() {
        let event = LogDirEvent {
            version: 1,
            broker: 7,
            event: LOG_DIR_FAILURE,
        };
        let data = znodes::encode(&event);
        assert_eq!(
            String::from_utf8_lossy(&data),
            r#"{"version":1,"broker":7,"event":1}"#
        );
        assert_eq!(znodes::decode::<LogDirEvent>(&data).unwrap(), event);
    }
}
