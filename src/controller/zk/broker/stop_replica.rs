//! StopReplica (v0–4) on the broker, as Kafka 3.9's `ReplicaManager.stopReplicas` decides
//! it: after the broker- and controller-epoch checks, a hosted partition is stopped when
//! the request's leader epoch is -2 (a deletion), -1 (no epoch: before v3) or not older
//! than the hosted one; otherwise FENCED_LEADER_EPOCH.
//!
//! Stopping without deletion leaves the replica and its log as they are and stops its
//! fetcher until a LeaderAndIsr with a newer leader epoch (as Kafka does). Stopping with
//! deletion stops hosting the partition and hands the listeners a removal: the replica
//! manager renames the log for deletion at once and removes it after
//! `file.delete.delay.ms`; the group coordinator unloads a `__consumer_offsets`
//! partition. A partition not hosted here (a deletion finishing after a restart) has its
//! log on disk deleted the same way, as Kafka does.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::stop_replica_response::StopReplicaPartitionError;
use kafka_protocol::messages::{StopReplicaRequest, StopReplicaResponse};
use uuid::Uuid;

use super::capped_lines::CappedLines;
use super::checked_names::check_partition;
use super::{BrokerSide, State};
use crate::controller::delta::{MetadataDelta, TopicDelta};
use crate::controller::{PartitionAssignment, PartitionInfo, TopicInfo};

/// The leader epoch of a StopReplica that deletes a topic's partition.
const EPOCH_DURING_DELETE: i32 = -2;
/// The leader epoch of a StopReplica without one (before v3): not checked.
const NO_EPOCH: i32 = -1;

/// One partition of the request.
struct Stop {
    topic: String,
    partition: i32,
    leader_epoch: i32,
    delete: bool,
}

impl BrokerSide {
    pub fn stop_replica(&self, req: &StopReplicaRequest, broker_epoch: i64) -> StopReplicaResponse {
        let mut state = self.state.lock();
        if let Some(e) = self.fence(
            &mut state,
            req.controller_epoch,
            req.broker_epoch,
            broker_epoch,
        ) {
            tracing::warn!(controller = req.controller_id.0, controller_epoch = req.controller_epoch, error = ?e, "StopReplica refused");
            return StopReplicaResponse::default().with_error_code(e.code());
        }
        let stops = stops(req);
        let mut errors: BTreeMap<(String, i32), ResponseError> = BTreeMap::new();
        // Topic → (topic id, partitions to delete).
        let mut deleted: BTreeMap<String, (Uuid, Vec<i32>)> = BTreeMap::new();
        let mut illegal = CappedLines::new("StopReplica refused for an illegal topic name");
        let mut stopped_lines = CappedLines::new("replica stopped by StopReplica");
        for s in &stops {
            match self.stop(&mut state, s, &mut illegal, &mut stopped_lines) {
                Ok(topic_id) if s.delete => {
                    let entry = deleted
                        .entry(s.topic.clone())
                        .or_insert((topic_id, Vec::new()));
                    entry.1.push(s.partition);
                }
                Ok(_) => {}
                Err(e) => {
                    errors.insert((s.topic.clone(), s.partition), e);
                }
            }
        }
        for (topic, partition) in self.remove_deleted(&state, &deleted) {
            errors.insert((topic, partition), ResponseError::KafkaStorageError);
        }
        let partition_errors = stops
            .iter()
            .map(|s| {
                let code = errors
                    .get(&(s.topic.clone(), s.partition))
                    .map_or(0, |e| e.code());
                StopReplicaPartitionError::default()
                    .with_topic_name(crate::handlers::topic_name(&s.topic))
                    .with_partition_index(s.partition)
                    .with_error_code(code)
            })
            .collect();
        StopReplicaResponse::default().with_partition_errors(partition_errors)
    }

    /// One partition stopped (its fetcher, or with deletion its hosting), Kafka's checks
    /// first; returns the topic id its log is deleted under.
    fn stop(
        &self,
        state: &mut State,
        s: &Stop,
        illegal: &mut CappedLines,
        stopped_lines: &mut CappedLines,
    ) -> Result<Uuid, ResponseError> {
        // Never a deletion of a name that is no topic's: no log was made of one.
        if let Err(why) = check_partition(&s.topic, s.partition) {
            if illegal.allow() {
                tracing::error!(
                    partition = s.partition,
                    delete = s.delete,
                    "StopReplica refused for a partition: {why}"
                );
            }
            return Err(ResponseError::InvalidTopicException);
        }
        let hosted = state.hosted.get(&s.topic).and_then(|h| {
            h.partitions
                .get(&s.partition)
                .map(|p| (h.topic_id, p.state.leader_epoch))
        });
        let topic_id = match hosted {
            Some((id, current)) => {
                let stale = s.leader_epoch != EPOCH_DURING_DELETE
                    && s.leader_epoch != NO_EPOCH
                    && s.leader_epoch < current;
                if stale {
                    tracing::info!(topic = %s.topic, partition = s.partition, leader_epoch = s.leader_epoch, current, "StopReplica ignored for a partition: its leader epoch is older");
                    return Err(ResponseError::FencedLeaderEpoch);
                }
                id
            }
            // Not hosted: whatever log is on disk (its own id), else the id the
            // topic had before its deletion.
            None => self
                .log_topic_id(&s.topic, s.partition)
                .or_else(|| state.cache.deleted_topic_id(&s.topic))
                .unwrap_or_default(),
        };
        if stopped_lines.allow() {
            tracing::info!(topic = %s.topic, partition = s.partition, delete = s.delete, "replica stopped by StopReplica");
        }
        if !s.delete && hosted.is_some() {
            self.stop_replica_fetcher(&s.topic, s.partition);
        }
        if s.delete {
            if let Some(h) = state.hosted.get_mut(&s.topic) {
                h.partitions.remove(&s.partition);
                if h.partitions.is_empty() {
                    state.hosted.remove(&s.topic);
                }
            }
        }
        Ok(topic_id)
    }

    /// Hands the listeners the removal of the partitions deleted (topic → its id and
    /// partitions), and topics that live on without them; returns the partitions whose
    /// logs could not be deleted.
    fn remove_deleted(
        &self,
        state: &State,
        deleted: &BTreeMap<String, (Uuid, Vec<i32>)>,
    ) -> Vec<(String, i32)> {
        let mut removal = MetadataDelta::default();
        let mut after = MetadataDelta::default();
        for (topic, (topic_id, partitions)) in deleted {
            let info = TopicInfo {
                name: topic.clone(),
                topic_id: *topic_id,
                partitions: partitions.iter().map(|&p| removed_partition(p)).collect(),
                configs: BTreeMap::new(),
            };
            removal
                .topics
                .insert(topic.clone(), TopicDelta::Removed(Arc::new(info)));
            // A topic that lives on (a replica moved away): listeners see it again
            // without the partitions deleted here.
            if let Some(t) = self.view(state, topic) {
                after.topics.insert(topic.clone(), TopicDelta::Changed(t));
            }
        }
        let failed = self
            .publish(state, &removal)
            .into_iter()
            .chain(self.publish(state, &after));
        let mut out = Vec::new();
        for f in failed {
            tracing::error!(topic = %f.topic, error = %f.message, "cannot delete the logs StopReplica named");
            if let Some((_, partitions)) = deleted.get(&f.topic) {
                out.extend(partitions.iter().map(|&p| (f.topic.clone(), p)));
            }
        }
        out
    }
}

/// Every partition of the request, whatever its version's layout.
fn stops(req: &StopReplicaRequest) -> Vec<Stop> {
    let v3 = req.topic_states.iter().flat_map(|t| {
        t.partition_states.iter().map(move |p| Stop {
            topic: t.topic_name.0.to_string(),
            partition: p.partition_index,
            leader_epoch: p.leader_epoch,
            delete: p.delete_partition,
        })
    });
    let v1 = req.topics.iter().flat_map(|t| {
        t.partition_indexes.iter().map(move |&p| Stop {
            topic: t.name.0.to_string(),
            partition: p,
            leader_epoch: NO_EPOCH,
            delete: req.delete_partitions,
        })
    });
    let v0 = req.ungrouped_partitions.iter().map(|p| Stop {
        topic: p.topic_name.0.to_string(),
        partition: p.partition_index,
        leader_epoch: NO_EPOCH,
        delete: req.delete_partitions,
    });
    v3.chain(v1).chain(v0).collect()
}

/// A partition named in a removal: only its index matters to the listeners.
fn removed_partition(partition: i32) -> PartitionInfo {
    PartitionInfo {
        partition,
        assignment: PartitionAssignment {
            replicas: Vec::new(),
            directories: Vec::new(),
        },
        state: crate::controller::LeaderAndIsr {
            leader: -1,
            leader_epoch: -1,
            partition_epoch: -1,
            isr: Vec::new(),
            eligible_leader_replicas: Vec::new(),
            last_known_elr: Vec::new(),
            leader_recovery_state: 0,
        },
    }
}
