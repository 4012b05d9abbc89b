//! OffsetFetch: a group's committed offsets. Up to v7 one group; from v8 many. A
//! partition without a commit answers offset -1 and empty metadata. From v9 a member of
//! a KIP-848 group names itself and its epoch, which the group checks. From v7 a
//! `require_stable` request (read_committed consumers) gets UNSTABLE_OFFSET_COMMIT for a
//! partition whose transactional commit is not yet ended; the client retries.
//! Kafka's checks: DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), DESCRIBE on
//! each topic: a partition asked for answers TOPIC_AUTHORIZATION_FAILED, and a request
//! for every topic leaves the others out.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse};

use super::{str_bytes, topic_name};
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::group::records::OffsetValue;
use crate::coordinator::group::shard::FetchedOffset;
use crate::router::RequestContext;

const MULTI_GROUP_VERSION: i16 = 8;
const LEADER_EPOCH_VERSION: i16 = 5;

/// (topic, partition, committed or its error) in request order, or the group's error.
type Fetched = Result<Vec<FetchedOffset>, ResponseError>;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: OffsetFetchRequest,
) -> OffsetFetchResponse {
    let v = ctx.api_version;
    if v >= MULTI_GROUP_VERSION {
        let mut groups = Vec::with_capacity(req.groups.len());
        for g in req.groups {
            let wanted = g.topics.map(|ts| {
                ts.into_iter()
                    .flat_map(|t| {
                        let name = t.name.to_string();
                        t.partition_indexes
                            .into_iter()
                            .map(move |p| (name.clone(), p))
                    })
                    .collect()
            });
            let member = (g.member_id.map(|m| m.to_string()), g.member_epoch);
            let fetched = authorized_fetch(
                &broker,
                &ctx,
                &g.group_id,
                member,
                wanted,
                req.require_stable,
            )
            .await;
            groups.push(group_response(g.group_id, fetched));
        }
        return OffsetFetchResponse::default().with_groups(groups);
    }
    let wanted = req.topics.map(|ts| {
        ts.into_iter()
            .flat_map(|t| {
                let name = t.name.to_string();
                t.partition_indexes
                    .into_iter()
                    .map(move |p| (name.clone(), p))
            })
            .collect::<Vec<_>>()
    });
    let fetched = authorized_fetch(
        &broker,
        &ctx,
        &req.group_id,
        (None, -1),
        wanted.clone(),
        req.require_stable,
    )
    .await;
    single_group_response(fetched, wanted, v)
}

/// The group's offsets for the partitions asked for (all when `None`) as the requester
/// may see them.
async fn authorized_fetch(
    broker: &Broker,
    ctx: &RequestContext,
    group_id: &str,
    member: (Option<String>, i32),
    wanted: Option<Vec<(String, i32)>>,
    require_stable: bool,
) -> Fetched {
    if !ctx.authorize(AclOperation::Describe, ResourceType::Group, group_id) {
        return Err(ResponseError::GroupAuthorizationFailed);
    }
    if ctx.allows_everything() {
        return broker
            .groups
            .fetch_offsets(group_id, member, wanted, require_stable)
            .await;
    }
    let mut seen: BTreeMap<String, bool> = BTreeMap::new();
    let mut describable = |topic: &str| match seen.get(topic) {
        Some(allowed) => *allowed,
        None => {
            let allowed = ctx.authorize(AclOperation::Describe, ResourceType::Topic, topic);
            seen.insert(topic.to_string(), allowed);
            allowed
        }
    };
    match wanted {
        None => {
            let rows = broker
                .groups
                .fetch_offsets(group_id, member, None, require_stable)
                .await?;
            Ok(rows
                .into_iter()
                .filter(|(t, _, _)| describable(t))
                .collect())
        }
        Some(wanted) => {
            let (allowed, denied): (Vec<_>, Vec<_>) =
                wanted.into_iter().partition(|(t, _)| describable(t));
            let mut rows = broker
                .groups
                .fetch_offsets(group_id, member, Some(allowed), require_stable)
                .await?;
            rows.extend(
                denied
                    .into_iter()
                    .map(|(t, p)| (t, p, Err(ResponseError::TopicAuthorizationFailed))),
            );
            Ok(rows)
        }
    }
}

fn single_group_response(
    fetched: Fetched,
    wanted: Option<Vec<(String, i32)>>,
    v: i16,
) -> OffsetFetchResponse {
    let (error, rows) = match fetched {
        Ok(rows) => (None, rows),
        // v1 has no group-level error: it goes on every partition asked for.
        Err(e) => (
            Some(e),
            wanted
                .unwrap_or_default()
                .into_iter()
                .map(|(t, p)| (t, p, Ok(None)))
                .collect(),
        ),
    };
    let mut topics: Vec<OffsetFetchResponseTopic> = Vec::new();
    for (topic, partition, value) in rows {
        let (offset, epoch, metadata, partition_error) = fields(value);
        let code = match (v < 2, error, partition_error) {
            (true, Some(e), _) => e.code(),
            (_, _, Some(e)) => e.code(),
            _ => 0,
        };
        let mut p = OffsetFetchResponsePartition::default()
            .with_partition_index(partition)
            .with_committed_offset(offset)
            .with_metadata(Some(str_bytes(metadata)))
            .with_error_code(code);
        if v >= LEADER_EPOCH_VERSION {
            p = p.with_committed_leader_epoch(epoch);
        }
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                OffsetFetchResponseTopic::default()
                    .with_name(topic_name(&topic))
                    .with_partitions(vec![p]),
            ),
        }
    }
    let mut resp = OffsetFetchResponse::default().with_topics(topics);
    if v >= 2 {
        resp = resp.with_error_code(error.map_or(0, |e| e.code()));
    }
    resp
}

fn group_response(
    group_id: kafka_protocol::messages::GroupId,
    fetched: Fetched,
) -> OffsetFetchResponseGroup {
    let rows = match fetched {
        Ok(rows) => rows,
        Err(e) => {
            return OffsetFetchResponseGroup::default()
                .with_group_id(group_id)
                .with_error_code(e.code())
        }
    };
    let mut topics: Vec<OffsetFetchResponseTopics> = Vec::new();
    for (topic, partition, value) in rows {
        let (offset, epoch, metadata, error) = fields(value);
        let p = OffsetFetchResponsePartitions::default()
            .with_partition_index(partition)
            .with_committed_offset(offset)
            .with_committed_leader_epoch(epoch)
            .with_metadata(Some(str_bytes(metadata)))
            .with_error_code(error.map_or(0, |e| e.code()));
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                OffsetFetchResponseTopics::default()
                    .with_name(topic_name(&topic))
                    .with_partitions(vec![p]),
            ),
        }
    }
    OffsetFetchResponseGroup::default()
        .with_group_id(group_id)
        .with_topics(topics)
}

/// Offset, leader epoch, metadata and error of one partition's answer: -1, -1 and ""
/// when nothing is committed or the partition has an error.
fn fields(
    value: Result<Option<OffsetValue>, ResponseError>,
) -> (i64, i32, String, Option<ResponseError>) {
    match value {
        Ok(Some(v)) => (v.offset, v.leader_epoch, v.metadata, None),
        Ok(None) => (-1, -1, String::new(), None),
        Err(e) => (-1, -1, String::new(), Some(e)),
    }
}
