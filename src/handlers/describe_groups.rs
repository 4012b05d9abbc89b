//! DescribeGroups: state, protocol and members of groups. Members' metadata and
//! assignments are only reported for a Stable group, as Kafka does. A group the
//! requester may not DESCRIBE answers GROUP_AUTHORIZATION_FAILED; the authorized
//! operations (v3+) are the requester's on each group.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, GroupId};

use super::str_bytes;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::router::RequestContext;

/// From v6 an unknown group is an error rather than a Dead group.
const NOT_FOUND_VERSION: i16 = 6;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let v = ctx.api_version;
    let mut groups = Vec::with_capacity(req.groups.len());
    for id in req.groups {
        if !ctx.authorize(AclOperation::Describe, ResourceType::Group, &id) {
            groups.push(
                DescribedGroup::default()
                    .with_group_id(id)
                    .with_error_code(ResponseError::GroupAuthorizationFailed.code()),
            );
            continue;
        }
        // Kafka answers the group's operations for each group found without error (v3+).
        let ops = ctx.authorized_operations_if(
            req.include_authorized_operations && v >= 3,
            ResourceType::Group,
            &id,
        );
        let g = describe(&broker, id, v).await;
        groups.push(if g.error_code == 0 {
            g.with_authorized_operations(ops)
        } else {
            g
        });
    }
    DescribeGroupsResponse::default().with_groups(groups)
}

async fn describe(broker: &Broker, id: GroupId, v: i16) -> DescribedGroup {
    let error = |id: GroupId, e: ResponseError, message: String| {
        let g = DescribedGroup::default()
            .with_group_id(id)
            .with_error_code(e.code())
            .with_group_state(str_bytes("Dead"));
        if v >= NOT_FOUND_VERSION {
            g.with_error_message(Some(str_bytes(message)))
        } else {
            g
        }
    };
    match broker.groups.describe_group(&id).await {
        Err(e) => error(id, e, format!("{e:?}")),
        Ok(None) if v >= NOT_FOUND_VERSION => {
            let message = format!("Group {} not found.", id.0);
            error(id, ResponseError::GroupIdNotFound, message)
        }
        Ok(None) => DescribedGroup::default()
            .with_group_id(id)
            .with_group_state(str_bytes("Dead")),
        Ok(Some(d)) => DescribedGroup::default()
            .with_group_id(id)
            .with_group_state(str_bytes(d.state.name()))
            .with_protocol_type(str_bytes(d.protocol_type))
            .with_protocol_data(str_bytes(d.protocol))
            .with_members(
                d.members
                    .into_iter()
                    .map(|m| {
                        DescribedGroupMember::default()
                            .with_member_id(str_bytes(m.member_id))
                            .with_group_instance_id(if v >= 4 {
                                m.group_instance_id.map(str_bytes)
                            } else {
                                None
                            })
                            .with_client_id(str_bytes(m.client_id))
                            .with_client_host(str_bytes(m.client_host))
                            .with_member_metadata(m.metadata)
                            .with_member_assignment(m.assignment)
                    })
                    .collect(),
            ),
    }
}
