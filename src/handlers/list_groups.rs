//! ListGroups: the groups this broker coordinates, filtered by state (v4+) and by
//! type (v5+: `classic` or `consumer`). DESCRIBE on the cluster lists every group;
//! without it, only the groups the requester may DESCRIBE (Kafka's filter).

use std::sync::Arc;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use super::str_bytes;
use crate::auth::authorizer::CLUSTER_NAME;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: ListGroupsRequest,
) -> ListGroupsResponse {
    let v = ctx.api_version;
    let matches = |filter: &[kafka_protocol::protocol::StrBytes], value: &str| {
        filter.is_empty() || filter.iter().any(|f| f.eq_ignore_ascii_case(value))
    };
    let listed = match broker.groups.list_groups().await {
        Ok(listed) => listed,
        Err(e) => return ListGroupsResponse::default().with_error_code(e.code()),
    };
    let all = ctx.authorize_quietly(AclOperation::Describe, ResourceType::Cluster, CLUSTER_NAME);
    let listed = match all {
        true => listed,
        false => ctx.filter_authorized(AclOperation::Describe, ResourceType::Group, listed, |g| {
            &g.group_id
        }),
    };
    let groups = listed
        .into_iter()
        .filter(|g| {
            matches(&req.types_filter, g.group_type) && matches(&req.states_filter, g.state)
        })
        .map(|l| {
            let mut g = ListedGroup::default()
                .with_group_id(GroupId(str_bytes(l.group_id)))
                .with_protocol_type(str_bytes(l.protocol_type));
            if v >= 4 {
                g = g.with_group_state(str_bytes(l.state));
            }
            if v >= 5 {
                g = g.with_group_type(str_bytes(l.group_type));
            }
            g
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
