//! FindCoordinator: which broker coordinates a group (key type 0). From v4 one request
//! asks for many keys. Transactions do not exist yet, so transaction keys (type 1) and
//! share keys are refused with a non-retriable error.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::str_bytes;
use crate::broker::Broker;
use crate::controller::{ControllerError, NewTopic};
use crate::coordinator::group::OFFSETS_TOPIC;
use crate::log::TopicPartition;
use crate::router::RequestContext;

const BATCHED_VERSION: i16 = 4;
const KEY_TYPE_GROUP: i8 = 0;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let keys = if ctx.api_version >= BATCHED_VERSION {
        req.coordinator_keys
    } else {
        vec![req.key]
    };
    let mut coordinators = Vec::with_capacity(keys.len());
    for key in keys {
        coordinators.push(find(&broker, &ctx.session.listener, req.key_type, key).await);
    }
    if ctx.api_version >= BATCHED_VERSION {
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let c = coordinators.pop().unwrap_or_default();
    let mut resp = FindCoordinatorResponse::default()
        .with_error_code(c.error_code)
        .with_node_id(c.node_id)
        .with_host(c.host)
        .with_port(c.port);
    if ctx.api_version >= 1 {
        resp = resp.with_error_message(c.error_message);
    }
    resp
}

/// The coordinator of `key`, as clients of `listener` reach it.
async fn find(broker: &Broker, listener: &str, key_type: i8, key: StrBytes) -> Coordinator {
    let refuse = |key: StrBytes, e: ResponseError, why: &str| {
        Coordinator::default()
            .with_key(key)
            .with_node_id(BrokerId(-1))
            .with_host(StrBytes::default())
            .with_port(-1)
            .with_error_code(e.code())
            .with_error_message(Some(str_bytes(why)))
    };
    if key_type != KEY_TYPE_GROUP {
        return refuse(
            key,
            ResponseError::InvalidRequest,
            "only group coordinators exist on this broker; transactions are not supported",
        );
    }
    if let Err(e) = ensure_offsets_topic(broker).await {
        return refuse(key, e, "the offsets topic is not available");
    }
    // A partition this broker was just elected for (the topic was just created) is loaded
    // before the client is sent to it.
    broker.groups.loaded(&key).await;
    let partition = broker.groups.partition_for(&key);
    let leader = broker.controller.topic(OFFSETS_TOPIC).and_then(|t| {
        t.partitions
            .iter()
            .find(|p| p.partition == partition)
            .map(|p| p.state.leader)
    });
    let node = leader.and_then(|id| {
        broker
            .controller
            .brokers_on(listener)
            .into_iter()
            .find(|b| b.id == id)
    });
    // While the offsets topic is being created its metadata is visible before this
    // broker leads the partitions; naming ourselves then would earn the client a
    // NOT_COORDINATOR on its next request, so ask it to retry instead.
    let hosted_here = broker
        .replicas
        .leader(&TopicPartition::new(OFFSETS_TOPIC, partition), -1)
        .is_ok();
    let node = node.filter(|b| b.id != broker.config().broker_id || hosted_here);
    match node {
        Some(b) => Coordinator::default()
            .with_key(key)
            .with_node_id(BrokerId(b.id))
            .with_host(str_bytes(b.host))
            .with_port(b.port)
            .with_error_message(None),
        None => refuse(
            key,
            ResponseError::CoordinatorNotAvailable,
            "the coordinator's partition has no live leader",
        ),
    }
}

/// Creates `__consumer_offsets` if it does not exist yet, as the first FindCoordinator
/// for a group does in Kafka. The coordinator follows the new partitions' leadership
/// through the metadata, as it does when an admin request creates the topic.
async fn ensure_offsets_topic(broker: &Broker) -> Result<(), ResponseError> {
    if broker.controller.topic(OFFSETS_TOPIC).is_some() {
        return Ok(());
    }
    let cfg = broker.config().offsets_topic.clone();
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
    // Auto-creation: any broker of a ZooKeeper-mode cluster may create it, as Kafka's.
    let created = broker.create_topics(vec![topic]).await.pop();
    match created.unwrap_or_else(|| Err(ControllerError::unknown_topic(OFFSETS_TOPIC))) {
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
