//! JoinGroup: a member joins (or rejoins) a classic group and waits until the rebalance
//! completes. From v4 a new member without an id first gets MEMBER_ID_REQUIRED and an
//! id to rejoin with (KIP-394); from v5 members may be static (KIP-345).

use std::sync::Arc;

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};

use kafka_protocol::error::ResponseError;

use super::{shutdown_begun, str_bytes};
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::group::classic::{JoinRequest, JoinResult};
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: JoinGroupRequest,
) -> JoinGroupResponse {
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, &req.group_id) {
        return JoinGroupResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let v = ctx.api_version;
    let join = JoinRequest {
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.map(|s| s.to_string()),
        client_id: ctx.client_id.as_deref().unwrap_or_default().to_string(),
        client_host: format!("/{}", ctx.peer.ip()),
        session_timeout_ms: req.session_timeout_ms,
        // v0 has no rebalance timeout: the session timeout serves for both.
        rebalance_timeout_ms: if v >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .into_iter()
            .map(|p| (p.name.to_string(), p.metadata))
            .collect(),
        require_known_member_id: v >= 4,
        supports_skip_assignment: v >= 9,
    };
    let member_id = join.member_id.clone();
    // At shutdown the member goes looking for the coordinator again.
    let result = tokio::select! {
        r = broker.groups.join(&req.group_id, join) => r,
        _ = shutdown_begun(&broker) => JoinResult::error(ResponseError::NotCoordinator, &member_id),
    };
    response(result, v)
}

/// Shapes a JoinGroup answer for version `v`, leaving out what it lacks.
pub fn response(r: JoinResult, v: i16) -> JoinGroupResponse {
    let members = r
        .members
        .into_iter()
        .map(|(id, instance, metadata)| {
            JoinGroupResponseMember::default()
                .with_member_id(str_bytes(id))
                .with_group_instance_id(if v >= 5 {
                    instance.map(str_bytes)
                } else {
                    None
                })
                .with_metadata(metadata)
        })
        .collect();
    let mut resp = JoinGroupResponse::default()
        .with_error_code(r.error.map_or(0, |e| e.code()))
        .with_generation_id(r.generation_id)
        .with_leader(str_bytes(r.leader))
        .with_member_id(str_bytes(r.member_id))
        .with_members(members);
    if v >= 7 {
        resp = resp
            .with_protocol_type(r.protocol_type.map(str_bytes))
            .with_protocol_name(r.protocol_name.map(str_bytes));
    } else {
        resp = resp.with_protocol_name(Some(str_bytes(r.protocol_name.unwrap_or_default())));
    }
    if v >= 9 {
        resp = resp.with_skip_assignment(r.skip_assignment);
    }
    resp
}
