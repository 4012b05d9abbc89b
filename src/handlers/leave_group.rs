//! LeaveGroup: members leave at once instead of waiting for their session to expire.
//! Up to v2 one member by id; from v3 a batch, static members possibly by instance id.

use std::sync::Arc;

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use kafka_protocol::error::ResponseError;

use super::str_bytes;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::router::RequestContext;

const BATCHED_VERSION: i16 = 3;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: LeaveGroupRequest,
) -> LeaveGroupResponse {
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, &req.group_id) {
        return LeaveGroupResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let batched = ctx.api_version >= BATCHED_VERSION;
    let members: Vec<(String, Option<String>)> = if batched {
        req.members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(|s| s.to_string()),
                )
            })
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    match broker.groups.leave(&req.group_id, members.clone()).await {
        Err(e) => LeaveGroupResponse::default().with_error_code(e.code()),
        Ok(errors) if !batched => LeaveGroupResponse::default()
            .with_error_code(errors.first().copied().flatten().map_or(0, |e| e.code())),
        Ok(errors) => LeaveGroupResponse::default().with_members(
            members
                .into_iter()
                .zip(errors)
                .map(|((id, instance), e)| {
                    MemberResponse::default()
                        .with_member_id(str_bytes(id))
                        .with_group_instance_id(instance.map(str_bytes))
                        .with_error_code(e.map_or(0, |e| e.code()))
                })
                .collect(),
        ),
    }
}
