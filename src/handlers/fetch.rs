//! Fetch: whole record batches from each partition, as stored on disk.
//!
//! A long poll (`max_wait_ms`, `min_bytes`) is the replica layer's delayed fetch: it
//! waits on the fetched partitions' notifications, never on a timer loop. A fetch from a
//! follower (replica id >= 0) reads up to the log end and reports the follower's log end
//! offset to the leader; a consumer's reads up to the high watermark, or with
//! read_committed up to the last stable offset, with the aborted transactions below it. Sessions (KIP-227)
//! are not kept: every answer carries session id 0, which tells clients to send full
//! fetch requests.
//!
//! The reads themselves (records as file ranges sent with `sendfile`, KIP-74's first
//! batch, the replication throttle, bytes out) are `ReplicaManager::fetch`'s
//! (`replica/read.rs`); this handler translates the protocol, keeps the fetch sessions
//! and names the current leaders. Fetch sessions move partitions that returned records
//! to the end, so one skipped for the size limit comes first in time.
//!
//! As in Kafka, a partition named twice in one request is read once: it keeps the place
//! of its first mention and the fields of its last, and partitions of the same topic
//! that end up next to each other share one topic entry in the response.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::{LeaderIdAndEpoch, NodeEndpoint};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::leader_hint::LeaderHints;
use crate::auth::authorizer::CLUSTER_NAME;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::error::ApiError;
use crate::log::{FileSlice, TopicPartition};
use crate::replica::fetch_session::{
    FetchContext, FetchSessionCache, SessionPartitionKey, SessionRequest, INVALID_SESSION_ID,
};
use crate::replica::read::TopicReads;
use crate::replica::FetchParams;
use crate::router::RequestContext;

/// Fetch requests name topics by id from this version on.
const TOPIC_ID_VERSION: i16 = 13;
/// From this version the follower's id is in `replica_state` (KIP-903).
const REPLICA_STATE_VERSION: i16 = 15;
/// KIP-951's current leader and node endpoints are answered from this version on.
const CURRENT_LEADER_VERSION: i16 = 16;
/// Clients may ask to wait at most this long; a larger value is clamped.
const MAX_WAIT_MS_CAP: i32 = 60_000;
const READ_COMMITTED: i8 = 1;

/// Answers the fetch, with the file slices its records stand for, in encoding order.
pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: FetchRequest,
) -> (FetchResponse, Vec<FileSlice>) {
    let (replica_id, replica_epoch) = match ctx.api_version >= REPLICA_STATE_VERSION {
        true => (
            req.replica_state.replica_id.0,
            req.replica_state.replica_epoch,
        ),
        false => (req.replica_id.0, -1),
    };
    let sessions = &broker.fetch_sessions;
    let context = sessions.new_context(
        sessions.now_ms(),
        SessionRequest {
            version: ctx.api_version,
            session_id: req.session_id,
            epoch: req.session_epoch,
            is_follower: replica_id >= 0,
            topics: req.topics,
            forgotten: req.forgotten_topics_data,
        },
    );
    let topics = match &context {
        FetchContext::Error(e) => {
            let refused = FetchResponse::default().with_error_code(e.code());
            return (refused, Vec::new());
        }
        FetchContext::Sessionless(topics)
        | FetchContext::Full { topics, .. }
        | FetchContext::Incremental { topics, .. } => topics.clone(),
    };
    let plan = plan(&broker, &ctx, topics, replica_id >= 0);
    let mut max_bytes = usize::try_from(req.max_bytes).unwrap_or(0);
    // A consumer's fetch returns at most what its quota allows over the quota's windows
    // (Kafka's `getMaxValueInQuotaWindow`), so one fetch never earns a throttle of
    // minutes; at least one batch is still returned (KIP-74).
    if replica_id < 0 {
        if let Some(bound) = broker.quotas().and_then(|q| q.max_fetch_bytes(&ctx)) {
            max_bytes = max_bytes.min(bound);
        }
    }
    let params = FetchParams::new(
        replica_id,
        Duration::from_millis(req.max_wait_ms.clamp(0, MAX_WAIT_MS_CAP) as u64),
        usize::try_from(req.min_bytes).unwrap_or(0).min(max_bytes),
        max_bytes,
        req.isolation_level == READ_COMMITTED,
    )
    .with_replica_epoch(replica_epoch);
    let read = broker
        .replicas
        .fetch(&params, &plan, broker.stopping())
        .await;
    let mut response = FetchResponse::default().with_responses(read.responses);
    if ctx.api_version >= CURRENT_LEADER_VERSION {
        name_current_leaders(&broker, &plan, &mut response);
    }
    match answer_in_session(sessions, context, &plan, &mut response) {
        Ok(()) => (response, read.file_slices),
        Err(e) => {
            let refused = FetchResponse::default().with_error_code(e.code());
            (refused, Vec::new())
        }
    }
}

/// The session part of the answer: a full fetch is offered a new session holding what
/// it fetched; an incremental one keeps only the partitions with something new.
fn answer_in_session(
    sessions: &FetchSessionCache,
    context: FetchContext,
    plan: &[TopicReads],
    response: &mut FetchResponse,
) -> Result<(), ResponseError> {
    response.session_id = match context {
        FetchContext::Sessionless(_) | FetchContext::Error(_) => INVALID_SESSION_ID,
        FetchContext::Full {
            privileged,
            uses_topic_ids,
            ..
        } => {
            let answered = session_keys(plan)
                .zip(plan.iter().flat_map(|t| t.partitions.iter()))
                .zip(response.responses.iter().flat_map(|t| t.partitions.iter()))
                .map(|((key, (fp, _)), data)| (key, fp.clone(), data))
                .collect();
            sessions.maybe_create(sessions.now_ms(), privileged, uses_topic_ids, answered)
        }
        FetchContext::Incremental {
            session_id, epoch, ..
        } => {
            let keys: Vec<SessionPartitionKey> = session_keys(plan).collect();
            sessions.answer_incremental(session_id, epoch, &keys, &mut response.responses)?;
            // Only answered partitions keep their file ranges: the dropped ones had no
            // records, so no range of theirs is among them.
            session_id
        }
    };
    Ok(())
}

/// Each planned partition's key in a fetch session, in response order.
fn session_keys(plan: &[TopicReads]) -> impl Iterator<Item = SessionPartitionKey> + '_ {
    plan.iter().flat_map(|t| {
        t.partitions.iter().map(|(fp, _)| SessionPartitionKey {
            topic_id: t.topic_id,
            topic: t.name.clone(),
            partition: fp.partition,
        })
    })
}

/// KIP-951: each partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names
/// its current leader, and the response carries those leaders' endpoints.
fn name_current_leaders(broker: &Broker, plan: &[TopicReads], response: &mut FetchResponse) {
    let moved = [
        ResponseError::NotLeaderOrFollower.code(),
        ResponseError::FencedLeaderEpoch.code(),
    ];
    let mut hints = LeaderHints::default();
    for (t, topic) in response.responses.iter_mut().zip(plan) {
        let Some(name) = topic.resolved.as_deref() else {
            continue;
        };
        for p in &mut t.partitions {
            if !moved.contains(&p.error_code) {
                continue;
            }
            let (leader, epoch) = hints.current_leader(broker, name, p.partition_index);
            p.current_leader = LeaderIdAndEpoch::default()
                .with_leader_id(BrokerId(leader))
                .with_leader_epoch(epoch);
        }
    }
    response.node_endpoints = hints
        .endpoints()
        .map(|b| {
            NodeEndpoint::default()
                .with_node_id(BrokerId(b.id))
                .with_host(StrBytes::from_string(b.host))
                .with_port(b.port)
                .with_rack(b.rack.map(StrBytes::from_string))
        })
        .collect();
}

/// The partitions to read, each once, grouped by topic as Kafka answers them: a
/// partition keeps the place of its first mention and the fields of its last, and
/// consecutive partitions of one topic share a topic entry. A follower needs
/// ClusterAction on the cluster, a consumer Read on each topic; a partition the fetch
/// may not read answers TOPIC_AUTHORIZATION_FAILED.
fn plan(
    broker: &Broker,
    ctx: &RequestContext,
    topics: Vec<FetchTopic>,
    from_follower: bool,
) -> Vec<TopicReads> {
    let version = ctx.api_version;
    let follower_allowed = from_follower
        && ctx.authorize(
            AclOperation::ClusterAction,
            ResourceType::Cluster,
            CLUSTER_NAME,
        );
    // Kafka's key: topic id and name (one of them is unset at any version) and partition.
    let mut wanted: Vec<(TopicName, Uuid, FetchPartition)> = Vec::new();
    let mut seen: HashMap<(Uuid, TopicName, i32), usize> = HashMap::new();
    for t in topics {
        for fp in t.partitions {
            let key = (t.topic_id, t.topic.clone(), fp.partition);
            match seen.get(&key) {
                Some(&i) => wanted[i].2 = fp,
                None => {
                    seen.insert(key, wanted.len());
                    wanted.push((t.topic.clone(), t.topic_id, fp));
                }
            }
        }
    }
    let mut plan: Vec<TopicReads> = Vec::new();
    // Whether the fetch may read the plan's last topic entry.
    let mut allowed = true;
    for (name, topic_id, fp) in wanted {
        match plan.last_mut() {
            Some(last) if last.name == name && last.topic_id == topic_id => {}
            _ => {
                let topic = resolve(broker, name, topic_id, version);
                allowed = match (from_follower, topic.resolved.as_deref()) {
                    (true, _) => follower_allowed,
                    (false, Some(name)) => {
                        ctx.authorize(AclOperation::Read, ResourceType::Topic, name)
                    }
                    (false, None) => true,
                };
                plan.push(topic);
            }
        }
        if let Some(topic) = plan.last_mut() {
            let found = match topic.resolved.as_deref() {
                _ if !allowed => Err(ApiError::from(ResponseError::TopicAuthorizationFailed)),
                Some(name) => broker
                    .replicas
                    .leader(&TopicPartition::new(name, fp.partition), -1),
                None => Err(ApiError::from(topic.unknown)),
            };
            topic.partitions.push((fp, found));
        }
    }
    plan
}

/// A topic entry of the plan, its name resolved (from its id at v13 and later).
fn resolve(broker: &Broker, name: TopicName, topic_id: Uuid, version: i16) -> TopicReads {
    let (resolved, unknown) = if version >= TOPIC_ID_VERSION {
        let resolved = broker
            .controller
            .topic_by_id(topic_id)
            .map(|info| info.name.clone());
        (resolved, ResponseError::UnknownTopicId)
    } else {
        (
            Some(name.0.to_string()),
            ResponseError::UnknownTopicOrPartition,
        )
    };
    TopicReads {
        name,
        topic_id,
        resolved,
        unknown,
        partitions: Vec::new(),
    }
}
