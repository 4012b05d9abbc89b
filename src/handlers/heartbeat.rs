//! Heartbeat: keeps a member's session alive and tells it when to rejoin.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: HeartbeatRequest,
) -> HeartbeatResponse {
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, &req.group_id) {
        return HeartbeatResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let error = broker
        .groups
        .heartbeat(
            &req.group_id,
            &req.member_id,
            req.group_instance_id.as_deref(),
            req.generation_id,
        )
        .await;
    HeartbeatResponse::default().with_error_code(error.map_or(0, |e| e.code()))
}
