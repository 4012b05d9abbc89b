//! DeleteGroups: removes empty groups with their committed offsets; a group the
//! requester may not DELETE answers GROUP_AUTHORIZATION_FAILED.

use std::sync::Arc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use kafka_protocol::error::ResponseError;

use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(req.groups_names.len());
    for id in req.groups_names {
        let error = match ctx.authorize(AclOperation::Delete, ResourceType::Group, &id) {
            true => broker.groups.delete_group(&id).await.err(),
            false => Some(ResponseError::GroupAuthorizationFailed),
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(id)
                .with_error_code(error.map_or(0, |e| e.code())),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
