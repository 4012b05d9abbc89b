//! ShareGroupHeartbeat (KIP-932, v1 as Kafka 4.1+ serves it): joins (member epoch 0),
//! heartbeats and leaves (-1) a member of a share group; the broker assigns partitions,
//! each to any number of members, once their share-partitions' state exists in
//! `__share_group_state` (created here if the topic is missing, as Kafka's persister's
//! FindCoordinator creates it). Kafka's checks: share groups enabled (`share.version`),
//! else UNSUPPORTED_VERSION; READ on the group (GROUP_AUTHORIZATION_FAILED); DESCRIBE on
//! each subscribed topic (TOPIC_AUTHORIZATION_FAILED). A member leaving keeps its share
//! session for its final request (Kafka closes a share session only on that request,
//! its connection's close or its expiry); what it holds without one is released once
//! it is out of the group.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};

use super::find_coordinator::ensure_share_state_topic;
use super::str_bytes;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::group::share::{ShareHeartbeat, LEAVE_EPOCH};
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: ShareGroupHeartbeatRequest,
) -> ShareGroupHeartbeatResponse {
    let refuse = |e: ResponseError, why: &str| {
        ShareGroupHeartbeatResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(str_bytes(why)))
    };
    if !broker.groups.share_groups_enabled() {
        return refuse(
            ResponseError::UnsupportedVersion,
            "share groups are not enabled (share.version)",
        );
    }
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
    if req.member_epoch != LEAVE_EPOCH {
        if let Err(e) = ensure_share_state_topic(&broker).await {
            return refuse(e, "the share coordinator's topic is not available");
        }
    }
    let hb = ShareHeartbeat {
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        rack_id: req.rack_id.map(|s| s.to_string()),
        subscribed: req
            .subscribed_topic_names
            .map(|ts| ts.into_iter().map(|t| t.to_string()).collect()),
        client_id: ctx.client_id.as_deref().unwrap_or_default().to_string(),
        client_host: format!("/{}", ctx.peer.ip()),
    };
    // Leaving (epoch -1) does not touch the member's share session, as in Kafka: a
    // closing consumer sends its leave heartbeat and its final ShareAcknowledge or
    // ShareFetch (session epoch -1) at once, on different connections, and that final
    // request must find its session whichever comes first. The group coordinator tells
    // the share-partitions once the member is out (`Shares::member_left`), which release
    // its records at once when it has no session left here.
    match broker.groups.share_heartbeat(&req.group_id, hb).await {
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
            ShareGroupHeartbeatResponse::default()
                .with_member_id(Some(str_bytes(r.member_id)))
                .with_member_epoch(r.member_epoch)
                .with_heartbeat_interval_ms(
                    broker.groups.share_heartbeat_interval_ms(&req.group_id),
                )
                .with_assignment(assignment)
        }
    }
}
