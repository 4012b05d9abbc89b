//! SyncGroup: members wait for the leader's assignment; the leader brings it.

use std::sync::Arc;

use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};

use kafka_protocol::error::ResponseError;

use super::{shutdown_begun, str_bytes};
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::group::classic::SyncResult;
use crate::coordinator::group::shard::SyncRequest;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: SyncGroupRequest,
) -> SyncGroupResponse {
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, &req.group_id) {
        return SyncGroupResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let assignments = req
        .assignments
        .into_iter()
        .map(|a| (a.member_id.to_string(), a.assignment))
        .collect();
    let sync = SyncRequest {
        member_id: req.member_id.to_string(),
        instance: req.group_instance_id.map(|s| s.to_string()),
        generation_id: req.generation_id,
        protocol_type: req.protocol_type.map(|s| s.to_string()),
        protocol_name: req.protocol_name.map(|s| s.to_string()),
        assignments,
    };
    let sync = broker.groups.sync(&req.group_id, sync);
    // At shutdown the member goes looking for the coordinator again.
    let r = tokio::select! {
        r = sync => r,
        _ = shutdown_begun(&broker) => SyncResult::error(ResponseError::NotCoordinator),
    };
    let mut resp = SyncGroupResponse::default()
        .with_error_code(r.error.map_or(0, |e| e.code()))
        .with_assignment(r.assignment);
    if ctx.api_version >= 5 {
        resp = resp
            .with_protocol_type(r.protocol_type.map(str_bytes))
            .with_protocol_name(r.protocol_name.map(str_bytes));
    }
    resp
}
