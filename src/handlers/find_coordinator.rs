//! FindCoordinator: which broker coordinates a group (key type 0), a transactional id
//! (key type 1) or a share-partition's state (key type 2, from v6, keys
//! "group:topicId:partition"): the leader of the key's partition of `__consumer_offsets`,
//! `__transaction_state` or `__share_group_state`, which is created by the first request
//! that needs it. From v4 one request asks for many keys. Kafka's checks: DESCRIBE on the
//! group or the transactional id, else GROUP_ or TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//! for that key; CLUSTER_ACTION on the cluster for share keys (brokers ask for them).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::str_bytes;
use crate::auth::authorizer::CLUSTER_NAME;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::controller::{ControllerError, NewTopic};
use crate::coordinator::group::OFFSETS_TOPIC;
use crate::coordinator::share::{SharePartitionKey, SHARE_GROUP_STATE_TOPIC};
use crate::coordinator::TRANSACTION_STATE_TOPIC;
use crate::log::{kafka_string_to_uuid, TopicPartition};
use crate::router::RequestContext;

const BATCHED_VERSION: i16 = 4;
const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;
pub const KEY_TYPE_SHARE: i8 = 2;
/// The first version that may name share keys.
const SHARE_VERSION: i16 = 6;

/// The coordinator a key type names: its topic and the topic's settings.
struct Kind {
    topic: &'static str,
    partitions: i32,
    replication_factor: i16,
    /// The topic's `min.insync.replicas`, when its coordinator sets one.
    min_isr: Option<i32>,
    configs: BTreeMap<String, String>,
}

impl Kind {
    fn of(broker: &Broker, key_type: i8) -> Option<Kind> {
        let config = broker.config();
        match key_type {
            KEY_TYPE_GROUP => Some(Kind {
                topic: OFFSETS_TOPIC,
                partitions: config.offsets_topic.partitions,
                replication_factor: config.offsets_topic.replication_factor,
                min_isr: None,
                configs: BTreeMap::from([
                    ("cleanup.policy".to_string(), "compact".to_string()),
                    (
                        "segment.bytes".to_string(),
                        config.offsets_topic.segment_bytes.to_string(),
                    ),
                    ("compression.type".to_string(), "producer".to_string()),
                ]),
            }),
            // Kafka's `TransactionLog` topic configs.
            KEY_TYPE_TRANSACTION => Some(Kind {
                topic: TRANSACTION_STATE_TOPIC,
                partitions: config.transaction.state_log_partitions,
                replication_factor: config.transaction.state_log_replication_factor,
                min_isr: Some(config.transaction.state_log_min_isr),
                configs: BTreeMap::from([
                    ("cleanup.policy".to_string(), "compact".to_string()),
                    (
                        "segment.bytes".to_string(),
                        config.transaction.state_log_segment_bytes.to_string(),
                    ),
                    ("compression.type".to_string(), "uncompressed".to_string()),
                    (
                        "unclean.leader.election.enable".to_string(),
                        "false".to_string(),
                    ),
                ]),
            }),
            // Kafka's `ShareCoordinatorService.shareGroupStateTopicConfigs` (KIP-932:
            // delete, not compact, since a share-partition's state is a snapshot and the
            // updates after it, under different keys).
            KEY_TYPE_SHARE => {
                let share = &config.share_coordinator;
                Some(Kind {
                    topic: SHARE_GROUP_STATE_TOPIC,
                    partitions: share.partitions,
                    replication_factor: share.replication_factor,
                    min_isr: Some(i32::from(share.min_isr)),
                    configs: BTreeMap::from([
                        ("cleanup.policy".to_string(), "delete".to_string()),
                        ("compression.type".to_string(), "producer".to_string()),
                        ("segment.bytes".to_string(), share.segment_bytes.to_string()),
                    ]),
                })
            }
            _ => None,
        }
    }
}

/// Creates `__share_group_state` if it does not exist yet, as the first FindCoordinator
/// for a share key does (the share group coordinator needs it to initialize a group's
/// share-partitions).
pub async fn ensure_share_state_topic(broker: &Broker) -> Result<(), ResponseError> {
    match Kind::of(broker, KEY_TYPE_SHARE) {
        Some(kind) => ensure_topic(broker, kind).await,
        None => Ok(()),
    }
}

/// Kafka's `SharePartitionKey.validate`: exactly "group:topicId:partition", a group,
/// a topic id in Kafka's text form, a partition index.
fn parse_share_key(key: &str) -> Option<SharePartitionKey> {
    let mut parts = key.split(':');
    let (group, topic, partition) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || group.is_empty() {
        return None;
    }
    let topic_id = kafka_string_to_uuid(topic)?;
    let partition: i32 = partition.parse().ok().filter(|p| *p >= 0)?;
    Some(SharePartitionKey {
        group_id: group.to_string(),
        topic_id,
        partition,
    })
}

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
        coordinators.push(find(&broker, &ctx, req.key_type, key).await);
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
async fn find(broker: &Broker, ctx: &RequestContext, key_type: i8, key: StrBytes) -> Coordinator {
    let listener: &str = &ctx.session.listener;
    // The client is told Kafka's message for the error (as KafkaApis sends
    // `error.message()`); why it was refused goes to the broker's debug log.
    let refuse = |key: StrBytes, e: ResponseError, why: &str| {
        tracing::debug!(key = %key.as_str(), error = ?e, "FindCoordinator refused: {why}");
        Coordinator::default()
            .with_key(key)
            .with_node_id(BrokerId(-1))
            .with_host(StrBytes::default())
            .with_port(-1)
            .with_error_code(e.code())
            .with_error_message(Some(str_bytes(e.to_string())))
    };
    let Some(kind) = Kind::of(broker, key_type) else {
        return refuse(
            key,
            ResponseError::InvalidRequest,
            "only group and transaction coordinators exist on this broker",
        );
    };
    let (resource, denied) = match key_type {
        KEY_TYPE_GROUP => (ResourceType::Group, ResponseError::GroupAuthorizationFailed),
        _ => (
            ResourceType::TransactionalId,
            ResponseError::TransactionalIdAuthorizationFailed,
        ),
    };
    let share_key = match key_type {
        KEY_TYPE_SHARE if ctx.api_version < SHARE_VERSION => {
            return refuse(key, ResponseError::InvalidRequest, "share keys need v6");
        }
        KEY_TYPE_SHARE => {
            if !ctx.authorize(
                AclOperation::ClusterAction,
                ResourceType::Cluster,
                CLUSTER_NAME,
            ) {
                return refuse(
                    key,
                    ResponseError::ClusterAuthorizationFailed,
                    "not authorized for CLUSTER_ACTION",
                );
            }
            match parse_share_key(&key) {
                Some(k) => Some(k),
                None => {
                    return refuse(
                        key,
                        ResponseError::InvalidRequest,
                        "not a share-partition key",
                    )
                }
            }
        }
        _ => None,
    };
    if share_key.is_none() && !ctx.authorize(AclOperation::Describe, resource, &key) {
        return refuse(key, denied, "not authorized to describe the key");
    }
    if key_type == KEY_TYPE_TRANSACTION && key.is_empty() {
        return refuse(key, ResponseError::InvalidRequest, "empty transactional id");
    }
    let topic = kind.topic;
    if let Err(e) = ensure_topic(broker, kind).await {
        return refuse(key, e, "the coordinator's topic is not available");
    }
    // A partition this broker was just elected for (the topic was just created) is loaded
    // before the client is sent to it.
    let partition = match (key_type, &share_key) {
        (_, Some(k)) => {
            broker.shares.coordinator.loaded(k).await;
            broker.shares.coordinator.partition_for(k)
        }
        (KEY_TYPE_GROUP, _) => {
            broker.groups.loaded(&key).await;
            broker.groups.partition_for(&key)
        }
        _ => {
            broker.txns.loaded(&key).await;
            broker.txns.partition_for(&key)
        }
    };
    let leader = broker.controller.topic(topic).and_then(|t| {
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
        .leader(&TopicPartition::new(topic, partition), -1)
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

/// Creates the coordinator's topic if it does not exist yet, as the first
/// FindCoordinator for a group or transactional id does in Kafka. The coordinator
/// follows the new partitions' leadership through the metadata, as it does when an
/// admin request creates the topic.
async fn ensure_topic(broker: &Broker, kind: Kind) -> Result<(), ResponseError> {
    let name = kind.topic;
    if broker.controller.topic(name).is_some() {
        return Ok(());
    }
    let live = broker.controller.brokers().len().max(1) as i16;
    let replication_factor = kind.replication_factor.clamp(1, live);
    let mut configs = kind.configs;
    if let Some(min_isr) = kind.min_isr {
        // A topic made smaller than its configured factor (fewer live brokers) keeps a
        // minimum it can meet.
        let min_isr = min_isr.clamp(1, i32::from(replication_factor));
        configs.insert("min.insync.replicas".to_string(), min_isr.to_string());
    }
    let topic = NewTopic {
        name: name.to_string(),
        num_partitions: kind.partitions,
        replication_factor,
        assignments: BTreeMap::new(),
        configs,
    };
    // Auto-creation: any broker of a ZooKeeper-mode cluster may create it, as Kafka's.
    let created = broker.create_topics(vec![topic]).await.pop();
    match created.unwrap_or_else(|| Err(ControllerError::unknown_topic(OFFSETS_TOPIC))) {
        Ok(_) => {
            tracing::info!(partitions = kind.partitions, "created {name}");
            Ok(())
        }
        Err(e) if e.error == ResponseError::TopicAlreadyExists => Ok(()),
        Err(e) => {
            tracing::error!(error = %e, "cannot create {name}");
            Err(ResponseError::CoordinatorNotAvailable)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::uuid_to_kafka_string;
    use uuid::Uuid;

    #[test]
    fn share_keys_are_kafkas_group_topic_id_partition() {
        let id = Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        let text = uuid_to_kafka_string(id);
        assert_eq!(
            parse_share_key(&format!("queue:{text}:3")),
            Some(SharePartitionKey {
                group_id: "queue".into(),
                topic_id: id,
                partition: 3,
            })
        );
        for bad in [
            format!(":{text}:3"),
            format!("queue:{text}"),
            format!("queue:{text}:3:4"),
            format!("a:b:{text}:3"),
            format!("queue:{text}:-1"),
            format!("queue:{text}:x"),
            "queue:not-a-uuid:0".to_string(),
            format!("queue:{}:0", &text[..20]),
        ] {
            assert_eq!(parse_share_key(&bad), None, "{bad}");
        }
    }
}
