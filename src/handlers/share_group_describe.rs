//! ShareGroupDescribe (KIP-932, v1): a share group's epochs and members with their
//! assignments. Share groups enabled (`share.version`), else UNSUPPORTED_VERSION for
//! every group; DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED for it; and, as
//! Kafka, DESCRIBE on every topic its members subscribe to or are assigned, else the
//! group is answered with TOPIC_AUTHORIZATION_FAILED and no members.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{GroupId, ShareGroupDescribeRequest, ShareGroupDescribeResponse};

use super::{str_bytes, topic_name};
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::group::share::Assignment as ShareAssignment;
use crate::router::RequestContext;

/// Kafka's `SimpleAssignor.name()`, the share groups' server assignor.
const ASSIGNOR: &str = "simple";

const UNAUTHORIZED_TOPICS: &str =
    "The group has described topic(s) that the client is not authorized to describe.";

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: ShareGroupDescribeRequest,
) -> ShareGroupDescribeResponse {
    let enabled = broker.groups.share_groups_enabled();
    let mut groups = Vec::with_capacity(req.group_ids.len());
    for id in req.group_ids {
        let refused = |id: GroupId, e: ResponseError, why: Option<String>| {
            DescribedGroup::default()
                .with_group_id(id)
                .with_error_code(e.code())
                .with_error_message(why.map(str_bytes))
        };
        if !enabled {
            groups.push(refused(id, ResponseError::UnsupportedVersion, None));
            continue;
        }
        if !ctx.authorize(AclOperation::Describe, ResourceType::Group, &id) {
            groups.push(refused(id, ResponseError::GroupAuthorizationFailed, None));
            continue;
        }
        let ops = ctx.authorized_operations_if(
            req.include_authorized_operations,
            ResourceType::Group,
            &id,
        );
        let g = match broker.groups.describe_share_group(&id).await {
            Ok(g) => g,
            Err(e) => {
                let why = format!("Group {} not found.", id.0);
                groups.push(refused(id, e, Some(why)));
                continue;
            }
        };
        let topics_visible = g.members.values().all(|m| {
            m.subscribed
                .iter()
                .chain(m.assigned.keys())
                .all(|t| ctx.authorize(AclOperation::Describe, ResourceType::Topic, t))
        });
        if !topics_visible {
            let why = Some(UNAUTHORIZED_TOPICS.to_string());
            groups.push(refused(id, ResponseError::TopicAuthorizationFailed, why));
            continue;
        }
        let members = g
            .members
            .values()
            .map(|m| {
                Member::default()
                    .with_member_id(str_bytes(m.member_id.clone()))
                    .with_rack_id(m.rack_id.clone().map(str_bytes))
                    .with_member_epoch(m.member_epoch)
                    .with_client_id(str_bytes(m.client_id.clone()))
                    .with_client_host(str_bytes(m.client_host.clone()))
                    .with_subscribed_topic_names(
                        m.subscribed.iter().map(|t| topic_name(t)).collect(),
                    )
                    .with_assignment(assignment(&broker, &m.assigned))
            })
            .collect();
        groups.push(
            DescribedGroup::default()
                .with_group_id(id)
                .with_group_state(str_bytes(g.state_name()))
                .with_group_epoch(g.group_epoch)
                .with_assignment_epoch(g.assignment_epoch)
                .with_assignor_name(str_bytes(ASSIGNOR))
                .with_members(members)
                .with_authorized_operations(ops),
        );
    }
    ShareGroupDescribeResponse::default().with_groups(groups)
}

fn assignment(broker: &Broker, a: &ShareAssignment) -> Assignment {
    Assignment::default().with_topic_partitions(
        a.iter()
            .filter_map(|(topic, ps)| {
                let t = broker.controller.topic(topic)?;
                Some(
                    TopicPartitions::default()
                        .with_topic_id(t.topic_id)
                        .with_topic_name(topic_name(topic))
                        .with_partitions(ps.iter().copied().collect()),
                )
            })
            .collect(),
    )
}
