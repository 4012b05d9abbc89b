//! Metadata: brokers, controller, and topics with their partitions' leaders, replicas
//! and ISR; creates unknown topics when the client allows it and the broker does too.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use uuid::Uuid;

use super::{str_bytes, topic_name};
use crate::auth::operations::{if_requested, ResourceType, NOT_REQUESTED};
use crate::broker::Broker;
use crate::controller::{topic_name as names, NewTopic, TopicInfo};
use crate::router::RequestContext;

/// Metadata v8–10 can ask for the cluster's authorized operations (later: DescribeCluster).
const CLUSTER_OPS_VERSIONS: std::ops::RangeInclusive<i16> = 8..=10;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: MetadataRequest,
) -> MetadataResponse {
    let c = &broker.controller;
    let ops = if_requested(req.include_topic_authorized_operations, ResourceType::Topic);
    let cluster_ops = if_requested(
        req.include_cluster_authorized_operations
            && CLUSTER_OPS_VERSIONS.contains(&ctx.api_version),
        ResourceType::Cluster,
    );
    // v0 asks for every topic with an empty list; later versions with null.
    let wanted = match req.topics {
        Some(t) if !(t.is_empty() && ctx.api_version == 0) => Some(t),
        _ => None,
    };
    let topics = match wanted {
        None => c.topics().iter().map(|t| describe(t, ops)).collect(),
        Some(requested) => {
            let auto_create = (ctx.api_version < 4 || req.allow_auto_topic_creation)
                && broker.config.auto_create_topics_enable;
            let mut out = Vec::with_capacity(requested.len());
            for t in requested {
                let entry = match (t.name, t.topic_id) {
                    (Some(name), _) => by_name(&broker, name.0.as_str(), auto_create, ops).await,
                    (None, id) => by_id(&broker, id, ops),
                };
                out.push(entry);
            }
            out
        }
    };
    MetadataResponse::default()
        .with_brokers(
            c.brokers()
                .into_iter()
                .map(|b| {
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(b.id))
                        .with_host(str_bytes(b.host))
                        .with_port(b.port)
                        .with_rack(b.rack.map(str_bytes))
                })
                .collect(),
        )
        .with_cluster_id(Some(str_bytes(c.cluster_id())))
        .with_controller_id(BrokerId(c.controller_id()))
        .with_cluster_authorized_operations(cluster_ops)
        .with_topics(topics)
}

async fn by_name(
    broker: &Broker,
    name: &str,
    auto_create: bool,
    ops: i32,
) -> MetadataResponseTopic {
    if let Some(t) = broker.controller.topic(name) {
        return describe(&t, ops);
    }
    let error = |e: ResponseError| {
        MetadataResponseTopic::default()
            .with_name(Some(topic_name(name)))
            .with_error_code(e.code())
            .with_topic_authorized_operations(ops)
    };
    if names::validate(name).is_err() {
        return error(ResponseError::InvalidTopicException);
    }
    if !auto_create || name == "__consumer_offsets" || name == "__transaction_state" {
        return error(ResponseError::UnknownTopicOrPartition);
    }
    let new = NewTopic {
        name: name.to_string(),
        num_partitions: -1,
        replication_factor: -1,
        assignments: BTreeMap::new(),
        configs: BTreeMap::new(),
    };
    match broker.create_topic(new, false).await {
        Ok(t) => {
            tracing::info!(
                topic = name,
                partitions = t.partitions.len(),
                "auto-created topic"
            );
            describe(&t, ops)
        }
        // Another request created it first.
        Err(e) if e.error == ResponseError::TopicAlreadyExists => {
            match broker.controller.topic(name) {
                Some(t) => describe(&t, ops),
                None => error(ResponseError::LeaderNotAvailable),
            }
        }
        Err(e) => error(e.error),
    }
}

fn by_id(broker: &Broker, id: Uuid, ops: i32) -> MetadataResponseTopic {
    match broker.controller.topic_by_id(id) {
        Some(t) => describe(&t, ops),
        None => MetadataResponseTopic::default()
            .with_topic_id(id)
            .with_error_code(ResponseError::UnknownTopicId.code())
            // Kafka leaves unknown topic ids out of the authorized-operations pass.
            .with_topic_authorized_operations(NOT_REQUESTED),
    }
}

fn describe(t: &TopicInfo, ops: i32) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(&t.name)))
        .with_topic_id(t.topic_id)
        .with_is_internal(t.is_internal())
        .with_topic_authorized_operations(ops)
        .with_partitions(
            t.partitions
                .iter()
                .map(|p| {
                    MetadataResponsePartition::default()
                        .with_partition_index(p.partition)
                        .with_leader_id(BrokerId(p.leader))
                        .with_leader_epoch(p.leader_epoch)
                        .with_replica_nodes(p.replicas.iter().copied().map(BrokerId).collect())
                        .with_isr_nodes(p.isr.iter().copied().map(BrokerId).collect())
                })
                .collect(),
        )
}
