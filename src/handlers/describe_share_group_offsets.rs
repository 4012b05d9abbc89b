//! DescribeShareGroupOffsets (KIP-932, v0–1): each share-partition's start offset and
//! leader epoch, read from the share coordinator (ReadShareGroupStateSummary), for
//! `kafka-share-groups.sh --describe --offsets`; v1 adds its lag (KIP-1226). The group coordinator answers: a group
//! served elsewhere is NOT_COORDINATOR, one that is not a share group GROUP_ID_NOT_FOUND.
//!
//! Kafka's checks: share groups enabled (`share.version`), else UNSUPPORTED_VERSION;
//! DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED); DESCRIBE on each named topic
//! (TOPIC_AUTHORIZATION_FAILED for its partitions), and when no topics are named (all of
//! the group's), the topics the requester may not describe are left out. A named topic
//! that does not exist answers UNKNOWN_TOPIC_OR_PARTITION.
//!
//! The lag, as Kafka's group coordinator computes it: the partition's latest offset
//! (`latest_offsets.rs`) less the start offset less the delivery complete count the
//! share-partition's leader last persisted; -1 when the share-partition has no start
//! offset or no count yet. A partition whose latest offset cannot be read is answered
//! with that error, as Kafka does. v0 carries no lag.

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, GroupId,
};
use uuid::Uuid;

use super::{str_bytes, topic_name};
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::share::latest_offsets::share_partition_lag;
use crate::coordinator::share::{Persister, SharePartitionKey, StateSummary};
use crate::router::RequestContext;

/// A topic to answer: its name, its id when it exists, its partitions, and the error
/// for all of them when it is refused.
type Wanted = (String, Option<Uuid>, Vec<i32>, Option<ResponseError>);

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: DescribeShareGroupOffsetsRequest,
) -> DescribeShareGroupOffsetsResponse {
    let mut groups = Vec::with_capacity(req.groups.len());
    for g in req.groups {
        let named = g.topics.map(|ts| {
            ts.into_iter()
                .map(|t| (t.topic_name.0.to_string(), t.partitions))
                .collect::<Vec<_>>()
        });
        groups.push(describe(&broker, &ctx, g.group_id, named).await);
    }
    DescribeShareGroupOffsetsResponse::default().with_groups(groups)
}

async fn describe(
    broker: &Broker,
    ctx: &RequestContext,
    group_id: GroupId,
    named: Option<Vec<(String, Vec<i32>)>>,
) -> DescribeShareGroupOffsetsResponseGroup {
    let refused = |id: GroupId, e: ResponseError| {
        DescribeShareGroupOffsetsResponseGroup::default()
            .with_group_id(id)
            .with_error_code(e.code())
    };
    if !broker.groups.share_groups_enabled() {
        return refused(group_id, ResponseError::UnsupportedVersion);
    }
    if !ctx.authorize(AclOperation::Describe, ResourceType::Group, &group_id) {
        return refused(group_id, ResponseError::GroupAuthorizationFailed);
    }
    let initialized = match broker.groups.share_state_partitions(&group_id).await {
        Ok((_, initialized)) => initialized,
        Err(e) => {
            let why = format!("Group {} not found.", group_id.0);
            return refused(group_id, e).with_error_message(Some(str_bytes(why)));
        }
    };
    let wanted: Vec<Wanted> = match named {
        None => initialized
            .into_iter()
            .filter(|(_, (name, _))| {
                ctx.authorize(AclOperation::Describe, ResourceType::Topic, name)
            })
            .map(|(id, (name, ps))| (name, Some(id), ps.into_iter().collect(), None))
            .collect(),
        Some(topics) => topics
            .into_iter()
            .map(|(name, ps)| {
                let ps: Vec<i32> = ps
                    .into_iter()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect();
                if !ctx.authorize(AclOperation::Describe, ResourceType::Topic, &name) {
                    return (
                        name,
                        None,
                        ps,
                        Some(ResponseError::TopicAuthorizationFailed),
                    );
                }
                match broker.controller.topic(&name) {
                    Some(t) => (name, Some(t.topic_id), ps, None),
                    None => (name, None, ps, Some(ResponseError::UnknownTopicOrPartition)),
                }
            })
            .collect(),
    };
    let persister = &broker.shares.persister;
    let mut topics = Vec::with_capacity(wanted.len());
    for (name, id, partitions, error) in wanted {
        let mut answers = Vec::with_capacity(partitions.len());
        for partition in partitions {
            let answer = DescribeShareGroupOffsetsResponsePartition::default()
                .with_partition_index(partition);
            let topic_id = match (id, error) {
                (Some(topic_id), None) => topic_id,
                (_, e) => {
                    let e = e.unwrap_or(ResponseError::UnknownTopicOrPartition);
                    answers.push(
                        answer
                            .with_error_code(e.code())
                            .with_start_offset(-1)
                            .with_leader_epoch(-1),
                    );
                    continue;
                }
            };
            let key = SharePartitionKey {
                group_id: group_id.0.to_string(),
                topic_id,
                partition,
            };
            let summary = Persister::read_summary(persister.as_ref(), key).await;
            answers.push(match summary {
                Ok(s) => match lag(broker, &name, partition, &s).await {
                    Ok(lag) => answer
                        .with_start_offset(s.start_offset)
                        .with_leader_epoch(s.leader_epoch)
                        .with_lag(lag),
                    Err(e) => answer
                        .with_error_code(e.code())
                        .with_error_message(Some(str_bytes(e.to_string()))),
                },
                Err(e) => answer
                    .with_error_code(e.code())
                    .with_start_offset(-1)
                    .with_leader_epoch(-1),
            });
        }
        topics.push(
            DescribeShareGroupOffsetsResponseTopic::default()
                .with_topic_name(topic_name(&name))
                .with_topic_id(id.unwrap_or_default())
                .with_partitions(answers),
        );
    }
    DescribeShareGroupOffsetsResponseGroup::default()
        .with_group_id(group_id)
        .with_topics(topics)
}

/// The share-partition's lag, -1 when unknown; the latest offset's error when it is
/// needed and cannot be read.
async fn lag(
    broker: &Broker,
    topic: &str,
    partition: i32,
    summary: &StateSummary,
) -> Result<i64, ResponseError> {
    let (Some(latest), Some(_)) = (
        broker.shares.latest_offsets(),
        share_partition_lag(summary, 0),
    ) else {
        return Ok(-1);
    };
    let end = latest.latest(topic, partition).await?;
    Ok(share_partition_lag(summary, end).unwrap_or(-1))
}
