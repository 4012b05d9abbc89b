//! One round of controller → broker requests (Kafka's `ControllerBrokerRequestBatch`):
//! state changes add partitions to per-broker LeaderAndIsr and StopReplica requests and
//! to one UpdateMetadata for a set of brokers; `build` turns them into requests, filled
//! as Kafka 3.9 fills them (`inter.broker.protocol.version=3.9`: LeaderAndIsr v7,
//! UpdateMetadata v8, StopReplica v4, each carrying the controller's id and epoch and
//! the receiving broker's epoch).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::leader_and_isr_request::{
    LeaderAndIsrLiveLeader, LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_protocol::messages::stop_replica_request::{
    StopReplicaPartitionState, StopReplicaTopicState,
};
use kafka_protocol::messages::update_metadata_request::{
    UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataPartitionState,
    UpdateMetadataTopicState,
};
use kafka_protocol::messages::{
    BrokerId, LeaderAndIsrRequest, StopReplicaRequest, TopicName, UpdateMetadataRequest,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::context::{ControllerContext, Leadership, TopicPartition};

pub const LEADER_AND_ISR_VERSION: i16 = 7;
pub const UPDATE_METADATA_VERSION: i16 = 8;
pub const STOP_REPLICA_VERSION: i16 = 4;

/// A request for one broker.
#[derive(Debug, Clone)]
pub enum ControlRequest {
    LeaderAndIsr(LeaderAndIsrRequest),
    UpdateMetadata(UpdateMetadataRequest),
    /// With the partitions it deletes, whose answers topic deletion waits for.
    StopReplica(StopReplicaRequest, BTreeSet<TopicPartition>),
}

#[derive(Default)]
pub struct RequestBatch {
    leader_and_isr: BTreeMap<i32, BTreeMap<TopicPartition, LeaderAndIsrPartitionState>>,
    stop_replica: BTreeMap<i32, BTreeMap<TopicPartition, bool>>,
    update_metadata_brokers: BTreeSet<i32>,
    update_metadata_partitions: BTreeMap<TopicPartition, UpdateMetadataPartitionState>,
}

fn ids(v: &[i32]) -> Vec<BrokerId> {
    v.iter().map(|&b| BrokerId(b)).collect()
}

fn topic_name(t: &str) -> TopicName {
    TopicName(StrBytes::from_string(t.to_string()))
}

impl RequestBatch {
    pub fn is_empty(&self) -> bool {
        self.leader_and_isr.is_empty()
            && self.stop_replica.is_empty()
            && self.update_metadata_brokers.is_empty()
    }

    /// Tells `brokers` the partition's leadership, and every live broker its metadata.
    pub fn add_leader_and_isr(
        &mut self,
        ctx: &ControllerContext,
        brokers: &[i32],
        tp: &TopicPartition,
        leadership: &Leadership,
        is_new: bool,
    ) {
        let l = &leadership.leader_and_isr;
        for &b in brokers.iter().filter(|&&b| b >= 0) {
            let states = self.leader_and_isr.entry(b).or_default();
            let already_new = states.get(tp).is_some_and(|s| s.is_new);
            let state = LeaderAndIsrPartitionState::default()
                .with_topic_name(topic_name(&tp.topic))
                .with_partition_index(tp.partition)
                .with_controller_epoch(leadership.controller_epoch)
                .with_leader(BrokerId(l.leader))
                .with_leader_epoch(l.leader_epoch)
                .with_isr(ids(&l.isr))
                .with_partition_epoch(l.partition_epoch)
                .with_replicas(ids(ctx.replicas(tp)))
                .with_adding_replicas(ids(ctx.adding_replicas(tp)))
                .with_removing_replicas(ids(ctx.removing_replicas(tp)))
                .with_is_new(is_new || already_new)
                .with_leader_recovery_state(l.recovery_state());
            states.insert(tp.clone(), state);
        }
        let all: Vec<i32> = ctx.live_or_shutting_down_ids().into_iter().collect();
        self.add_update_metadata(ctx, &all, std::slice::from_ref(tp));
    }

    pub fn add_stop_replica(&mut self, brokers: &[i32], tp: &TopicPartition, delete: bool) {
        for &b in brokers.iter().filter(|&&b| b >= 0) {
            let d = self
                .stop_replica
                .entry(b)
                .or_default()
                .entry(tp.clone())
                .or_default();
            *d = *d || delete;
        }
    }

    /// UpdateMetadata for `brokers`, carrying `partitions` (those with a leadership).
    pub fn add_update_metadata(
        &mut self,
        ctx: &ControllerContext,
        brokers: &[i32],
        partitions: &[TopicPartition],
    ) {
        self.update_metadata_brokers
            .extend(brokers.iter().copied().filter(|&b| b >= 0));
        for tp in partitions {
            let Some(leadership) = ctx.leadership.get(tp) else {
                tracing::debug!(partition = %tp, "no leader yet; left out of UpdateMetadata");
                continue;
            };
            let replicas = ctx.replicas(tp);
            let offline: Vec<i32> = replicas
                .iter()
                .copied()
                .filter(|&r| !ctx.is_replica_online(r, tp, false))
                .collect();
            let l = if ctx.is_topic_queued_for_deletion(&tp.topic) {
                leadership.leader_and_isr.during_delete()
            } else {
                leadership.leader_and_isr.clone()
            };
            let state = UpdateMetadataPartitionState::default()
                .with_topic_name(topic_name(&tp.topic))
                .with_partition_index(tp.partition)
                .with_controller_epoch(leadership.controller_epoch)
                .with_leader(BrokerId(l.leader))
                .with_leader_epoch(l.leader_epoch)
                .with_isr(ids(&l.isr))
                .with_zk_version(l.partition_epoch)
                .with_replicas(ids(replicas))
                .with_offline_replicas(ids(&offline));
            self.update_metadata_partitions.insert(tp.clone(), state);
        }
    }

    /// The requests, per broker in the order Kafka sends them (LeaderAndIsr, then
    /// UpdateMetadata, then StopReplica); brokers not live are skipped. Empties the batch.
    pub fn build(
        &mut self,
        ctx: &ControllerContext,
        controller_id: i32,
        listener: &str,
    ) -> Vec<(i32, ControlRequest)> {
        let mut out = Vec::new();
        let live = ctx.live_or_shutting_down_ids();
        for (broker, states) in std::mem::take(&mut self.leader_and_isr) {
            let Some(target) = ctx.live_brokers.get(&broker) else {
                continue;
            };
            let leader_ids: BTreeSet<i32> = states.values().map(|s| s.leader.0).collect();
            let live_leaders = ctx
                .live_brokers
                .values()
                .filter(|b| leader_ids.contains(&b.id))
                .filter_map(|b| {
                    let e = b.endpoint(listener)?;
                    Some(
                        LeaderAndIsrLiveLeader::default()
                            .with_broker_id(BrokerId(b.id))
                            .with_host_name(StrBytes::from_string(e.host.clone()))
                            .with_port(e.port),
                    )
                })
                .collect();
            let mut topics: BTreeMap<String, LeaderAndIsrTopicState> = BTreeMap::new();
            for (tp, state) in states {
                topics
                    .entry(tp.topic.clone())
                    .or_insert_with(|| {
                        LeaderAndIsrTopicState::default()
                            .with_topic_name(topic_name(&tp.topic))
                            .with_topic_id(
                                ctx.topic_ids.get(&tp.topic).copied().unwrap_or(Uuid::nil()),
                            )
                    })
                    .partition_states
                    .push(state);
            }
            let req = LeaderAndIsrRequest::default()
                .with_controller_id(BrokerId(controller_id))
                .with_is_k_raft_controller(false)
                .with_controller_epoch(ctx.epoch)
                .with_broker_epoch(target.epoch)
                .with_type(0)
                .with_topic_states(topics.into_values().collect())
                .with_live_leaders(live_leaders);
            out.push((broker, ControlRequest::LeaderAndIsr(req)));
        }
        let brokers = std::mem::take(&mut self.update_metadata_brokers);
        let partitions = std::mem::take(&mut self.update_metadata_partitions);
        if !brokers.is_empty() {
            let live_brokers: Vec<UpdateMetadataBroker> = ctx
                .live_brokers
                .values()
                .map(|b| {
                    UpdateMetadataBroker::default()
                        .with_id(BrokerId(b.id))
                        .with_endpoints(
                            b.endpoints
                                .iter()
                                .map(|e| {
                                    UpdateMetadataEndpoint::default()
                                        .with_host(StrBytes::from_string(e.host.clone()))
                                        .with_port(e.port)
                                        .with_listener(StrBytes::from_string(e.listener.clone()))
                                        .with_security_protocol(security_protocol_id(
                                            &e.security_protocol,
                                        ))
                                })
                                .collect(),
                        )
                        .with_rack(b.rack.clone().map(StrBytes::from_string))
                })
                .collect();
            let mut topics: BTreeMap<String, UpdateMetadataTopicState> = BTreeMap::new();
            for (tp, state) in partitions {
                topics
                    .entry(tp.topic.clone())
                    .or_insert_with(|| {
                        UpdateMetadataTopicState::default()
                            .with_topic_name(topic_name(&tp.topic))
                            .with_topic_id(
                                ctx.topic_ids.get(&tp.topic).copied().unwrap_or(Uuid::nil()),
                            )
                    })
                    .partition_states
                    .push(state);
            }
            let topics: Vec<UpdateMetadataTopicState> = topics.into_values().collect();
            for broker in brokers.intersection(&live) {
                let epoch = ctx.live_brokers[broker].epoch;
                let req = UpdateMetadataRequest::default()
                    .with_controller_id(BrokerId(controller_id))
                    .with_is_k_raft_controller(false)
                    .with_type(0)
                    .with_controller_epoch(ctx.epoch)
                    .with_broker_epoch(epoch)
                    .with_topic_states(topics.clone())
                    .with_live_brokers(live_brokers.clone());
                out.push((*broker, ControlRequest::UpdateMetadata(req)));
            }
        }
        for (broker, partitions) in std::mem::take(&mut self.stop_replica) {
            let Some(target) = ctx.live_brokers.get(&broker) else {
                continue;
            };
            let mut topics: BTreeMap<String, StopReplicaTopicState> = BTreeMap::new();
            let mut deleting = BTreeSet::new();
            for (tp, delete) in partitions {
                if delete {
                    deleting.insert(tp.clone());
                }
                topics
                    .entry(tp.topic.clone())
                    .or_insert_with(|| {
                        StopReplicaTopicState::default().with_topic_name(topic_name(&tp.topic))
                    })
                    .partition_states
                    .push(
                        StopReplicaPartitionState::default()
                            .with_partition_index(tp.partition)
                            .with_leader_epoch(ctx.leader_epoch_for_stop_replica(&tp))
                            .with_delete_partition(delete),
                    );
            }
            let req = StopReplicaRequest::default()
                .with_controller_id(BrokerId(controller_id))
                .with_is_k_raft_controller(false)
                .with_controller_epoch(ctx.epoch)
                .with_broker_epoch(target.epoch)
                .with_delete_partitions(false)
                .with_topic_states(topics.into_values().collect());
            out.push((broker, ControlRequest::StopReplica(req, deleting)));
        }
        out
    }
}

/// Kafka's `SecurityProtocol` ids.
pub fn security_protocol_id(name: &str) -> i16 {
    match name {
        "PLAINTEXT" => 0,
        "SSL" => 1,
        "SASL_PLAINTEXT" => 2,
        "SASL_SSL" => 3,
        _ => 0,
    }
}
