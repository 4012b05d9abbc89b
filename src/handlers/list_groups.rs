//! ListGroups: the groups this broker coordinates, filtered by state (v4+) and by
//! type (v5+; every group here is `classic`).

use std::sync::Arc;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use super::str_bytes;
use crate::broker::Broker;
use crate::router::RequestContext;

const GROUP_TYPE: &str = "classic";

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: ListGroupsRequest,
) -> ListGroupsResponse {
    let v = ctx.api_version;
    let wanted_state = |s: &str| {
        req.states_filter.is_empty() || req.states_filter.iter().any(|f| f.eq_ignore_ascii_case(s))
    };
    let wanted_type = req.types_filter.is_empty()
        || req
            .types_filter
            .iter()
            .any(|f| f.eq_ignore_ascii_case(GROUP_TYPE));
    let groups = broker
        .groups
        .list_groups()
        .into_iter()
        .filter(|(_, _, state)| wanted_type && wanted_state(state.name()))
        .map(|(id, protocol_type, state)| {
            let mut g = ListedGroup::default()
                .with_group_id(GroupId(str_bytes(id)))
                .with_protocol_type(str_bytes(protocol_type));
            if v >= 4 {
                g = g.with_group_state(str_bytes(state.name()));
            }
            if v >= 5 {
                g = g.with_group_type(str_bytes(GROUP_TYPE));
            }
            g
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
