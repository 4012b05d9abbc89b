//! KIP-848 groups in the coordinator: heartbeats, session expiry and conversion to a
//! classic group, each written to `__consumer_offsets` before it is answered.
//!
//! A change runs the pure state machine (`consumer.rs`) under the groups lock, compares
//! the group before and after (`consumer/records.rs`), and appends the difference while
//! holding the partition's write lock, so records reach the log in the order the
//! changes were made. If the append fails the group is put back as it was: what a
//! member was told is then never ahead of what a restart would replay.

use kafka_protocol::error::ResponseError;
use tokio::time::Instant;

use super::consumer::{self, ConsumerGroup, ConsumerRecords, Heartbeat, HeartbeatResult};
use super::coordinator::{GroupCoordinator, Records};
use super::offsets_topic::RecordKey;
use super::state::{Group, GroupState};
use super::topics::ControllerTopics;
use crate::handlers::now_ms;

impl GroupCoordinator {
    /// One ConsumerGroupHeartbeat.
    pub async fn consumer_heartbeat(
        &self,
        group_id: &str,
        hb: Heartbeat,
    ) -> Result<HeartbeatResult, ResponseError> {
        self.check_coordinator(group_id)?;
        let session_timeout_ms = self.consumer_session_timeout_ms;
        let create = hb.member_epoch == 0;
        let topics = ControllerTopics(self.controller.as_ref());
        let outcome = self
            .update_consumer_group(group_id, create, |g| {
                // A classic group with members stays classic (no online upgrade).
                if !g.members.is_empty() || g.state == GroupState::Dead {
                    return Err(ResponseError::GroupIdNotFound);
                }
                let consumer = g
                    .consumer
                    .get_or_insert_with(|| ConsumerGroup::new(session_timeout_ms));
                consumer.heartbeat(hb, &topics, Instant::now())
            })
            .await?;
        outcome.unwrap_or(Err(ResponseError::UnknownMemberId))
    }

    /// A consumer group for ConsumerGroupDescribe.
    pub fn describe_consumer_group(&self, group_id: &str) -> Result<ConsumerGroup, ResponseError> {
        self.check_coordinator(group_id)?;
        let groups = self.groups();
        groups
            .get(group_id)
            .and_then(|g| g.consumer.clone())
            .ok_or(ResponseError::GroupIdNotFound)
    }

    /// Removes members whose session or revocation timeout passed, group by group.
    pub(super) async fn expire_consumer_members(&self, now: Instant) {
        let due: Vec<String> = self
            .groups()
            .values()
            .filter(|g| {
                g.consumer
                    .as_ref()
                    .is_some_and(|c| !c.expired_members(now).is_empty())
            })
            .map(|g| g.group_id.clone())
            .collect();
        for group_id in due {
            let expired = self
                .update_consumer_group(&group_id, false, |g| {
                    if let Some(c) = &mut g.consumer {
                        c.tick(now);
                    }
                })
                .await;
            if let Err(e) = expired {
                // The members stay until the next tick retries.
                tracing::warn!(group = %group_id, error = ?e, "cannot write expired consumer group members");
            }
        }
    }

    /// A classic member joining an empty consumer group turns it back into a classic
    /// group: the consumer group's records are tombstoned first.
    pub(super) async fn retire_empty_consumer_group(
        &self,
        group_id: &str,
    ) -> Result<(), ResponseError> {
        let empty_consumer_group = self
            .groups()
            .get(group_id)
            .is_some_and(|g| g.consumer.as_ref().is_some_and(|c| c.members.is_empty()));
        if !empty_consumer_group {
            return Ok(());
        }
        self.update_consumer_group(group_id, false, |g| {
            if g.consumer.as_ref().is_some_and(|c| c.members.is_empty()) {
                g.consumer = None;
            }
        })
        .await
        .map(|_| ())
    }

    /// Runs `f` on a group (created first when `create`) and writes what it changed in
    /// the group's KIP-848 state before returning `f`'s result. `Ok(None)`: no such
    /// group. A failed write undoes the change and is the error.
    pub(super) async fn update_consumer_group<R>(
        &self,
        group_id: &str,
        create: bool,
        f: impl FnOnce(&mut Group) -> R,
    ) -> Result<Option<R>, ResponseError> {
        let _writing = self.write_lock(self.partition_for(group_id)).lock().await;
        let topics = ControllerTopics(self.controller.as_ref());
        let (result, records, before, created) = {
            let mut groups = self.groups();
            let created = create && !groups.contains_key(group_id);
            if created {
                let mut g = Group::new(group_id, now_ms());
                g.initial_delay_ms = self.config.initial_rebalance_delay_ms;
                groups.insert(group_id.to_string(), g);
            }
            let Some(g) = groups.get_mut(group_id) else {
                return Ok(None);
            };
            let before = g.consumer.clone();
            let result = f(g);
            let records = match (&before, &g.consumer) {
                (Some(b), Some(a)) => consumer::changes(b, a, &topics, now_ms()),
                (Some(b), None) => consumer::tombstones(b),
                (None, Some(a)) => {
                    let records =
                        consumer::changes(&ConsumerGroup::default(), a, &topics, now_ms());
                    if records.is_empty() {
                        // A refused first heartbeat: the group did not become a consumer group.
                        g.consumer = None;
                    }
                    records
                }
                (None, None) => ConsumerRecords::new(),
            };
            let mut encoded = Records::new();
            if before.is_none() && !records.is_empty() && had_classic_record(g) {
                // The classic group this one replaces is deleted first, as Kafka does.
                let key = RecordKey::Group {
                    group: group_id.to_string(),
                };
                encoded.push((key.encode(), None));
            }
            encoded.extend(encode(group_id, records));
            if created && holds_nothing(g) {
                groups.remove(group_id);
            }
            (result, encoded, before, created)
        };
        if records.is_empty() {
            return Ok(Some(result));
        }
        if let Err(e) = self.append(group_id, records).await {
            let mut groups = self.groups();
            if let Some(g) = groups.get_mut(group_id) {
                g.consumer = before;
                if created && holds_nothing(g) {
                    groups.remove(group_id);
                }
            }
            return Err(match e {
                ResponseError::NotCoordinator => e,
                _ => ResponseError::CoordinatorNotAvailable,
            });
        }
        Ok(Some(result))
    }
}

/// Whether a group was ever written as a classic group (GroupMetadataValue).
fn had_classic_record(g: &Group) -> bool {
    g.generation_id > 0 || g.protocol_type.is_some()
}

/// A group that a refused request created holds nothing worth keeping.
fn holds_nothing(g: &Group) -> bool {
    g.state == GroupState::Empty
        && g.is_empty()
        && g.offsets.is_empty()
        && g.generation_id == 0
        && g.consumer.is_none()
}

/// Consumer group records as keys and values for `__consumer_offsets`.
pub(super) fn encode(group_id: &str, records: ConsumerRecords) -> Records {
    records
        .into_iter()
        .map(|(kind, value)| {
            let key = RecordKey::Consumer {
                group: group_id.to_string(),
                kind,
            };
            (key.encode(), value.map(|v| v.encode()))
        })
        .collect()
}
