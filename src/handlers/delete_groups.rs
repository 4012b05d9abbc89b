//! DeleteGroups: removes empty groups with their committed offsets.

use std::sync::Arc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: DeleteGroupsRequest,
) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(req.groups_names.len());
    for id in req.groups_names {
        let error = broker.groups.delete_group(&id).await.err();
        results.push(
            DeletableGroupResult::default()
                .with_group_id(id)
                .with_error_code(error.map_or(0, |e| e.code())),
        );
    }
    DeleteGroupsResponse::default().with_results(results)
}
