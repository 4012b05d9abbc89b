//! One round of controller → broker requests (Kafka's `ControllerBrokerRequestBatch`):
//! state changes add partitions to per-broker LeaderAndIsr and StopReplica requests and
//! to one UpdateMetadata for a set of brokers; `build` turns them into requests at the
//! versions Kafka 3.9's controller sends at the cluster's `inter.broker.protocol.version`
//! (LeaderAndIsr v7, UpdateMetadata v8 and StopReplica v4 at 3.4 and later; `versions.rs`
//! lays them out as each version carries them).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::leader_and_isr_request::{
    LeaderAndIsrLiveLeader, LeaderAndIsrPartitionState,
};
use kafka_protocol::messages::update_metadata_request::{
    UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataPartitionState,
};
use kafka_protocol::messages::{
    BrokerId, LeaderAndIsrRequest, StopReplicaRequest, TopicName, UpdateMetadataRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::context::{ControllerContext, Leadership, TopicPartition};
use super::versions;
use crate::config::inter_broker_protocol::MetadataVersion;

/// A request for one broker, with the version it is sent at.
#[derive(Debug, Clone)]
pub enum ControlRequest {
    LeaderAndIsr {
        request: LeaderAndIsrRequest,
        version: i16,
    },
    UpdateMetadata {
        request: UpdateMetadataRequest,
        version: i16,
    },
    /// With the partitions it deletes, whose answers topic deletion waits for.
    StopReplica {
        request: StopReplicaRequest,
        version: i16,
        deleting: BTreeSet<TopicPartition>,
    },
}

/// What every controller request starts with.
#[derive(Debug, Clone, Copy)]
pub struct Header {
    pub controller_id: i32,
    pub controller_epoch: i32,
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
                .with_leader_recovery_state(l.leader_recovery_state);
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
    /// UpdateMetadata, then StopReplica), at the versions `protocol` names; brokers not
    /// live are skipped. Empties the batch.
    pub fn build(
        &mut self,
        ctx: &ControllerContext,
        controller_id: i32,
        listener: &str,
        protocol: MetadataVersion,
    ) -> Vec<(i32, ControlRequest)> {
        let header = Header {
            controller_id,
            controller_epoch: ctx.epoch,
        };
        let mut out = self.build_leader_and_isr(ctx, header, listener, protocol);
        out.extend(self.build_update_metadata(ctx, header, protocol));
        out.extend(self.build_stop_replica(ctx, header, protocol));
        out
    }

    fn build_leader_and_isr(
        &mut self,
        ctx: &ControllerContext,
        header: Header,
        listener: &str,
        protocol: MetadataVersion,
    ) -> Vec<(i32, ControlRequest)> {
        let mut out = Vec::new();
        let version = protocol.leader_and_isr_request_version();
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
            let request = versions::leader_and_isr(
                version,
                header,
                target.epoch,
                states.into_values().collect(),
                &ctx.topic_ids,
                live_leaders,
            );
            out.push((broker, ControlRequest::LeaderAndIsr { request, version }));
        }
        out
    }

    fn build_update_metadata(
        &mut self,
        ctx: &ControllerContext,
        header: Header,
        protocol: MetadataVersion,
    ) -> Vec<(i32, ControlRequest)> {
        let mut out = Vec::new();
        let brokers = std::mem::take(&mut self.update_metadata_brokers);
        let partitions = std::mem::take(&mut self.update_metadata_partitions);
        if brokers.is_empty() {
            return out;
        }
        let version = protocol.update_metadata_request_version();
        let live = ctx.live_or_shutting_down_ids();
        let live_brokers: Vec<UpdateMetadataBroker> = ctx
            .live_brokers
            .values()
            .map(update_metadata_broker)
            .collect();
        let states: Vec<UpdateMetadataPartitionState> = partitions.into_values().collect();
        for broker in brokers.intersection(&live) {
            let request = versions::update_metadata(
                version,
                header,
                ctx.live_brokers[broker].epoch,
                states.clone(),
                &ctx.topic_ids,
                live_brokers.clone(),
            );
            out.push((*broker, ControlRequest::UpdateMetadata { request, version }));
        }
        out
    }

    fn build_stop_replica(
        &mut self,
        ctx: &ControllerContext,
        header: Header,
        protocol: MetadataVersion,
    ) -> Vec<(i32, ControlRequest)> {
        let mut out = Vec::new();
        let version = protocol.stop_replica_request_version();
        for (broker, partitions) in std::mem::take(&mut self.stop_replica) {
            let Some(target) = ctx.live_brokers.get(&broker) else {
                continue;
            };
            let states = partitions
                .into_iter()
                .map(|(tp, delete)| {
                    let epoch = ctx.leader_epoch_for_stop_replica(&tp);
                    (tp, epoch, delete)
                })
                .collect();
            for (request, deleting) in versions::stop_replica(version, header, target.epoch, states)
            {
                out.push((
                    broker,
                    ControlRequest::StopReplica {
                        request,
                        version,
                        deleting,
                    },
                ));
            }
        }
        out
    }
}

/// A live broker as UpdateMetadata lists it, with every endpoint.
fn update_metadata_broker(b: &super::context::LiveBroker) -> UpdateMetadataBroker {
    let endpoints = b
        .endpoints
        .iter()
        .map(|e| {
            UpdateMetadataEndpoint::default()
                .with_host(StrBytes::from_string(e.host.clone()))
                .with_port(e.port)
                .with_listener(StrBytes::from_string(e.listener.clone()))
                .with_security_protocol(security_protocol_id(&e.security_protocol))
        })
        .collect();
    UpdateMetadataBroker::default()
        .with_id(BrokerId(b.id))
        .with_endpoints(endpoints)
        .with_rack(b.rack.clone().map(StrBytes::from_string))
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
