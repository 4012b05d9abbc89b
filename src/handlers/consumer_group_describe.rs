//! ConsumerGroupDescribe (KIP-848): epochs, members, their current and target
//! assignments. DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED for it; and, as
//! Kafka 4, DESCRIBE on every topic its members subscribe to or are assigned, else the
//! group is answered with TOPIC_AUTHORIZATION_FAILED and no members (a group must not
//! show a topic its requester may not see).

use std::sync::Arc;

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, GroupId,
};

use super::{str_bytes, topic_name};
use kafka_protocol::error::ResponseError;

use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::group::consumer::{self, ASSIGNOR};
use crate::router::RequestContext;

/// ConsumerGroupDescribe's member type for a KIP-848 member (v1+).
const MEMBER_TYPE_CONSUMER: i8 = 1;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let mut groups = Vec::with_capacity(req.group_ids.len());
    for id in req.group_ids {
        if !ctx.authorize(AclOperation::Describe, ResourceType::Group, &id) {
            groups.push(
                DescribedGroup::default()
                    .with_group_id(id)
                    .with_error_code(ResponseError::GroupAuthorizationFailed.code()),
            );
            continue;
        }
        let ops = ctx.authorized_operations_if(
            req.include_authorized_operations,
            ResourceType::Group,
            &id,
        );
        let g = describe(&broker, id, ctx.api_version).await;
        groups.push(match g.error_code {
            0 if !topics_describable(&ctx, &g) => DescribedGroup::default()
                .with_group_id(g.group_id)
                .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                .with_error_message(Some(str_bytes(UNAUTHORIZED_TOPICS.to_string()))),
            0 => g.with_authorized_operations(ops),
            _ => g,
        });
    }
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}

/// Kafka's message for a group that names a topic its requester may not describe.
const UNAUTHORIZED_TOPICS: &str =
    "The group has described topic(s) that the client is not authorized to describe.";

/// Whether the requester may describe every topic the group's members subscribe to or
/// are (or are to be) assigned.
fn topics_describable(ctx: &RequestContext, g: &DescribedGroup) -> bool {
    g.members.iter().all(|m| {
        let assigned = m
            .assignment
            .topic_partitions
            .iter()
            .chain(&m.target_assignment.topic_partitions)
            .map(|tp| &tp.topic_name.0);
        m.subscribed_topic_names
            .iter()
            .map(|t| &t.0)
            .chain(assigned)
            .all(|topic| ctx.authorize(AclOperation::Describe, ResourceType::Topic, topic))
    })
}

async fn describe(broker: &Broker, id: GroupId, v: i16) -> DescribedGroup {
    let g = match broker.groups.describe_consumer_group(&id).await {
        Ok(g) => g,
        Err(e) => {
            let message = format!("Group {} not found or not a consumer group.", id.0);
            return DescribedGroup::default()
                .with_group_id(id)
                .with_error_code(e.code())
                .with_error_message(Some(str_bytes(message)));
        }
    };
    let assignment = |a: &consumer::Assignment| {
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
    };
    let members = g
        .members
        .values()
        .map(|m| {
            let target = g.target.get(&m.member_id).cloned().unwrap_or_default();
            let mut member = Member::default()
                .with_member_id(str_bytes(m.member_id.clone()))
                .with_instance_id(m.instance_id.clone().map(str_bytes))
                .with_rack_id(m.rack_id.clone().map(str_bytes))
                .with_member_epoch(m.member_epoch)
                .with_client_id(str_bytes(m.client_id.clone()))
                .with_client_host(str_bytes(m.client_host.clone()))
                .with_subscribed_topic_names(m.subscribed.iter().map(|t| topic_name(t)).collect())
                .with_subscribed_topic_regex(m.subscribed_regex.clone().map(str_bytes))
                .with_assignment(assignment(&m.assigned))
                .with_target_assignment(assignment(&target));
            if v >= 1 {
                member = member.with_member_type(MEMBER_TYPE_CONSUMER);
            }
            member
        })
        .collect();
    DescribedGroup::default()
        .with_group_id(id)
        .with_group_state(str_bytes(g.state_name()))
        .with_group_epoch(g.group_epoch)
        .with_assignment_epoch(g.assignment_epoch)
        .with_assignor_name(str_bytes(ASSIGNOR))
        .with_members(members)
}
