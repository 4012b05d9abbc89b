//! ConsumerGroupHeartbeat (KIP-848): joins, leaves and reconciles a member of a
//! `consumer` group; the broker computes the assignment. From v1 the client chooses its
//! member id; v0 members joining without one get an id from the broker. Kafka's checks:
//! READ on the group (GROUP_AUTHORIZATION_FAILED), DESCRIBE on each subscribed topic
//! (TOPIC_AUTHORIZATION_FAILED).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};

use super::str_bytes;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::group::consumer::Heartbeat;
use crate::router::RequestContext;

/// Server assignors a member may ask for; both are served by the uniform assignor.
const ASSIGNORS: &[&str] = &["uniform", "range"];

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    let refuse = |e: ResponseError, why: &str| {
        ConsumerGroupHeartbeatResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(str_bytes(why)))
    };
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, &req.group_id) {
        return refuse(
            ResponseError::GroupAuthorizationFailed,
            "not authorized to read the group",
        );
    }
    if let Some(topics) = &req.subscribed_topic_names {
        let denied: Vec<&str> = topics
            .iter()
            .filter(|t| !ctx.authorize(AclOperation::Describe, ResourceType::Topic, t))
            .map(|t| t.as_str())
            .collect();
        if !denied.is_empty() {
            let why = format!("Topic authorization failed for topics {denied:?}");
            return refuse(ResponseError::TopicAuthorizationFailed, &why);
        }
    }
    let mut member_id = req.member_id.to_string();
    if member_id.is_empty() {
        if ctx.api_version >= 1 || req.member_epoch != 0 {
            return refuse(ResponseError::InvalidRequest, "MemberId can't be empty.");
        }
        member_id = uuid::Uuid::new_v4().to_string();
    }
    if let Some(a) = &req.server_assignor {
        if !ASSIGNORS.contains(&a.as_str()) {
            return refuse(
                ResponseError::UnsupportedAssignor,
                "unknown server assignor",
            );
        }
    }
    let hb = Heartbeat {
        member_id,
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.map(|s| s.to_string()),
        rack_id: req.rack_id.map(|s| s.to_string()),
        client_id: ctx.client_id.as_deref().unwrap_or_default().to_string(),
        client_host: format!("/{}", ctx.peer.ip()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed: req
            .subscribed_topic_names
            .map(|ts| ts.into_iter().map(|t| t.to_string()).collect()),
        subscribed_regex: req.subscribed_topic_regex.map(|r| r.to_string()),
        owned: req.topic_partitions.map(|tps| {
            tps.into_iter()
                .map(|tp| (tp.topic_id, tp.partitions))
                .collect()
        }),
    };
    match broker.groups.consumer_heartbeat(&req.group_id, hb).await {
        Err(e) => refuse(e, &format!("{e:?}")),
        Ok(r) => {
            let assignment = r.assignment.map(|a| {
                Assignment::default().with_topic_partitions(
                    a.into_iter()
                        .map(|(id, partitions)| {
                            TopicPartitions::default()
                                .with_topic_id(id)
                                .with_partitions(partitions)
                        })
                        .collect(),
                )
            });
            ConsumerGroupHeartbeatResponse::default()
                .with_member_id(Some(str_bytes(r.member_id)))
                .with_member_epoch(r.member_epoch)
                .with_heartbeat_interval_ms(
                    broker.groups.consumer_heartbeat_interval_ms(&req.group_id),
                )
                .with_assignment(assignment)
        }
    }
}
