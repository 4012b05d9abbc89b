//! Metadata: brokers, controller, and topics with their partitions' leaders, replicas
//! and ISR; creates unknown topics when the client allows it and the broker does too.
//! Kafka's checks: DESCRIBE on each topic (a topic named and denied answers
//! TOPIC_AUTHORIZATION_FAILED; a request for every topic leaves it out), CREATE on the
//! cluster or the topic to auto-create it (else TOPIC_AUTHORIZATION_FAILED); the
//! authorized operations are the requester's.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use uuid::Uuid;

use super::{str_bytes, topic_name};
use crate::auth::authorizer::CLUSTER_NAME;
use crate::auth::operations::{AclOperation, ResourceType, NOT_REQUESTED};
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
    let topic_ops = |name: &str| {
        ctx.authorized_operations_if(
            req.include_topic_authorized_operations,
            ResourceType::Topic,
            name,
        )
    };
    let ops: Ops<'_> = &topic_ops;
    let cluster_ops = ctx.authorized_operations_if(
        req.include_cluster_authorized_operations
            && CLUSTER_OPS_VERSIONS.contains(&ctx.api_version),
        ResourceType::Cluster,
        CLUSTER_NAME,
    );
    // v0 asks for every topic with an empty list; later versions with null.
    let wanted = match req.topics {
        Some(t) if !(t.is_empty() && ctx.api_version == 0) => Some(t),
        _ => None,
    };
    let described = |name: &str| ctx.authorize(AclOperation::Describe, ResourceType::Topic, name);
    let topics = match wanted {
        // Every topic the client may describe; the others are left out, as in Kafka.
        None => ctx
            .filter_authorized(
                AclOperation::Describe,
                ResourceType::Topic,
                c.topics(),
                |t| &t.name,
            )
            .iter()
            .map(|t| describe(&broker, t, ops(&t.name)))
            .collect(),
        Some(requested) => {
            let auto_create = (ctx.api_version < 4 || req.allow_auto_topic_creation)
                && broker.config().log.auto_create_topics_enable;
            let mut out = Vec::with_capacity(requested.len());
            let mut to_create = Vec::new();
            for t in requested {
                let entry = match (t.name, t.topic_id) {
                    // Not even whether it exists is told (nor is it created).
                    (Some(name), _) if !described(name.0.as_str()) => error_for(
                        name.0.as_str(),
                        ResponseError::TopicAuthorizationFailed,
                        ops(&name),
                    ),
                    (None, id) if c.topic_by_id(id).is_some_and(|t| !described(&t.name)) => {
                        MetadataResponseTopic::default()
                            .with_topic_id(id)
                            .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                            .with_topic_authorized_operations(NOT_REQUESTED)
                    }
                    (Some(name), _) => match by_name(&broker, name.0.as_str(), auto_create, ops) {
                        Lookup::Found(entry) => entry,
                        Lookup::Create(name) if !may_create(&ctx, &name) => {
                            error_for(&name, ResponseError::TopicAuthorizationFailed, ops(&name))
                        }
                        Lookup::Create(name) => {
                            to_create.push((out.len(), name.clone()));
                            error_for(&name, ResponseError::LeaderNotAvailable, ops(&name))
                        }
                    },
                    (None, id) => by_id(&broker, id, ops),
                };
                out.push(entry);
            }
            auto_create_topics(&broker, to_create, ops, &mut out).await;
            out
        }
    };
    MetadataResponse::default()
        .with_brokers(
            c.brokers_on(&ctx.session.listener)
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

/// The authorized operations of a topic, by name, for this request.
type Ops<'a> = &'a (dyn Fn(&str) -> i32 + Sync);

/// Whether the requester may have `name` auto-created: CREATE on the cluster, or on the
/// topic.
fn may_create(ctx: &RequestContext, name: &str) -> bool {
    ctx.authorize_quietly(AclOperation::Create, ResourceType::Cluster, CLUSTER_NAME)
        || ctx.authorize(AclOperation::Create, ResourceType::Topic, name)
}

/// What a named topic's entry will be: known (or refused) now, or to be auto-created.
enum Lookup {
    Found(MetadataResponseTopic),
    Create(String),
}

fn error_for(name: &str, e: ResponseError, ops: i32) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(name)))
        .with_error_code(e.code())
        .with_topic_authorized_operations(ops)
}

fn by_name(broker: &Broker, name: &str, auto_create: bool, ops: Ops<'_>) -> Lookup {
    if let Some(t) = broker.controller.topic(name) {
        return Lookup::Found(describe(broker, &t, ops(name)));
    }
    if names::validate(name).is_err() {
        return Lookup::Found(error_for(
            name,
            ResponseError::InvalidTopicException,
            ops(name),
        ));
    }
    if !auto_create || name == "__consumer_offsets" || name == "__transaction_state" {
        return Lookup::Found(error_for(
            name,
            ResponseError::UnknownTopicOrPartition,
            ops(name),
        ));
    }
    Lookup::Create(name.to_string())
}

/// Partitions one Metadata request may create. Kafka creates only the topics a request
/// names and its controller bounds each operation; skua bounds each request so that one
/// request cannot make the broker create thousands of logs at once: topics are created in
/// request order while their partitions fit, and the rest are answered
/// LEADER_NOT_AVAILABLE (Kafka's answer for a topic being created), which clients retry,
/// creating the next ones. The first topic is always created.
pub const MAX_AUTO_CREATED_PARTITIONS_PER_REQUEST: i32 = 100;

/// Creates the named topics (their entries in `out` answer LEADER_NOT_AVAILABLE until
/// then) with one metadata write, within the per-request bound.
async fn auto_create_topics(
    broker: &Broker,
    wanted: Vec<(usize, String)>,
    ops: Ops<'_>,
    out: &mut [MetadataResponseTopic],
) {
    let mut budget = MAX_AUTO_CREATED_PARTITIONS_PER_REQUEST;
    let mut seen = std::collections::HashSet::new();
    let mut slots = Vec::new();
    let mut creating = Vec::new();
    let mut repeated = Vec::new();
    for (slot, name) in wanted {
        if !seen.insert(name.clone()) {
            repeated.push((slot, name));
            continue;
        }
        let cost = broker.config().log.num_partitions;
        if !creating.is_empty() && cost > budget {
            continue;
        }
        budget -= cost;
        slots.push(slot);
        creating.push(NewTopic {
            name,
            num_partitions: -1,
            replication_factor: -1,
            assignments: BTreeMap::new(),
            configs: BTreeMap::new(),
        });
    }
    let names: Vec<String> = creating.iter().map(|t| t.name.clone()).collect();
    let results = broker.create_topics(creating).await;
    for ((slot, name), result) in slots.into_iter().zip(names).zip(results) {
        out[slot] = match result {
            Ok(t) => {
                tracing::info!(
                    topic = %name,
                    partitions = t.partitions.len(),
                    "auto-created topic"
                );
                describe(broker, &t, ops(&name))
            }
            // Another request created it first.
            Err(e) if e.error == ResponseError::TopicAlreadyExists => {
                match broker.controller.topic(&name) {
                    Some(t) => describe(broker, &t, ops(&name)),
                    None => error_for(&name, ResponseError::LeaderNotAvailable, ops(&name)),
                }
            }
            Err(e) => error_for(&name, e.error, ops(&name)),
        };
    }
    for (slot, name) in repeated {
        if let Some(t) = broker.controller.topic(&name) {
            out[slot] = describe(broker, &t, ops(&name));
        }
    }
}

fn by_id(broker: &Broker, id: Uuid, ops: Ops<'_>) -> MetadataResponseTopic {
    match broker.controller.topic_by_id(id) {
        Some(t) => describe(broker, &t, ops(&t.name)),
        None => MetadataResponseTopic::default()
            .with_topic_id(id)
            .with_error_code(ResponseError::UnknownTopicId.code())
            // Kafka leaves unknown topic ids out of the authorized-operations pass.
            .with_topic_authorized_operations(NOT_REQUESTED),
    }
}

/// A topic's entry. A partition whose leader is not a live broker (none elected, or its
/// broker gone) is LEADER_NOT_AVAILABLE with leader -1, as Kafka answers it; offline
/// replicas are the ones the cluster reports (ZooKeeper mode).
fn describe(broker: &Broker, t: &TopicInfo, ops: i32) -> MetadataResponseTopic {
    let c = &broker.controller;
    let live: std::collections::BTreeSet<i32> = c.brokers().iter().map(|b| b.id).collect();
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(&t.name)))
        .with_topic_id(t.topic_id)
        .with_is_internal(t.is_internal())
        .with_topic_authorized_operations(ops)
        .with_partitions(
            t.partitions
                .iter()
                .map(|p| {
                    let led = live.contains(&p.state.leader);
                    MetadataResponsePartition::default()
                        .with_error_code(match led {
                            true => 0,
                            false => ResponseError::LeaderNotAvailable.code(),
                        })
                        .with_partition_index(p.partition)
                        .with_leader_id(BrokerId(if led { p.state.leader } else { -1 }))
                        .with_leader_epoch(p.state.leader_epoch)
                        .with_replica_nodes(
                            p.assignment
                                .replicas
                                .iter()
                                .copied()
                                .map(BrokerId)
                                .collect(),
                        )
                        .with_isr_nodes(p.state.isr.iter().copied().map(BrokerId).collect())
                        .with_offline_replicas(
                            c.offline_replicas(&t.name, p.partition)
                                .into_iter()
                                .map(BrokerId)
                                .collect(),
                        )
                })
                .collect(),
        )
}
