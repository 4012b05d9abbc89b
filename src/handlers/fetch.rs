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
//! Records are not read here: each partition's answer names the segment range that holds
//! them, and the connection sends that range with `sendfile` (see `protocol::zero_copy`),
//! whatever its size. Only ranges under 16 KiB are read into the response, and at most
//! 1 MiB of them per response, so a fetch's memory does not grow with what the client
//! asks for. As in Kafka, the last batch of a partition may be cut at the size limit;
//! clients drop the partial batch and fetch it again. The first batch of a partition is
//! never cut (KIP-74): the first partition with records returns it whole whatever the
//! limits, and a later one whose first batch does not fit what is left answers no
//! records, so every response holds at least one whole batch to make progress with
//! (fetch sessions move partitions that returned records to the end, so a skipped one
//! comes first in time).
//!
//! A follower's fetch is subject to the leader's replication throttle
//! (`replica::throttle`): a throttled partition of an out-of-sync follower answers no
//! records while the throttle is over its rate, and the records of throttled partitions
//! count against it once the answer is final.
//!
//! As in Kafka, a partition named twice in one request is read once: it keeps the place
//! of its first mention and the fields of its last, and partitions of the same topic
//! that end up next to each other share one topic entry in the response.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint,
    PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::leader_hint::LeaderHints;
use crate::broker::Broker;
use crate::error::ApiError;
use crate::log::{FileSlice, LogError, TopicPartition};
use crate::protocol::zero_copy;
use crate::replica::delayed_fetch::{self, FetchAttempt};
use crate::replica::fetch_session::{
    FetchContext, FetchSessionCache, SessionPartitionKey, SessionRequest, INVALID_SESSION_ID,
};
use crate::replica::throttle::ReplicationQuota;
use crate::replica::{FetchIsolation, FetchParams, Partition};
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

/// A requested topic, resolved once before the first read.
struct TopicPlan {
    name: TopicName,
    topic_id: Uuid,
    /// The topic's name, if it exists.
    resolved: Option<String>,
    /// The error for its partitions when it does not.
    unknown: ResponseError,
    partitions: Vec<(FetchPartition, Result<Arc<Partition>, ApiError>)>,
}

/// Record ranges shorter than this are read into the response: below it a separate
/// `sendfile` call costs more than the copy.
const SENDFILE_MIN_BYTES: usize = 16 * 1024;
/// The most record bytes one response reads into memory; past it even short ranges are
/// sent from the file.
const COPIED_MAX_BYTES: usize = 1024 * 1024;

/// A partition read: its answer, and the file range its records placeholder stands for.
type Read = (PartitionData, Option<FileSlice>);

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
    let plan = plan(&broker, topics, ctx.api_version);
    let params = FetchParams::new(
        replica_id,
        Duration::from_millis(req.max_wait_ms.clamp(0, MAX_WAIT_MS_CAP) as u64),
        usize::try_from(req.min_bytes).unwrap_or(0),
        usize::try_from(req.max_bytes).unwrap_or(0),
        req.isolation_level == READ_COMMITTED,
    )
    .with_replica_epoch(replica_epoch);
    let partitions: Vec<Arc<Partition>> = plan
        .iter()
        .flat_map(|t| t.partitions.iter())
        .filter_map(|(_, p)| p.as_ref().ok().cloned())
        .collect();
    let quota = params
        .is_from_follower()
        .then_some(&broker.replicas.quotas.leader);
    let read = delayed_fetch::complete(&params, &partitions, broker.stopping(), || {
        let read = read_all(&plan, &params, quota);
        FetchAttempt {
            bytes: read.bytes,
            errored: read.errored,
            response: read,
        }
    })
    .await;
    if let Some(quota) = quota {
        quota.record(read.throttled_bytes);
    }
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
    plan: &[TopicPlan],
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
fn session_keys(plan: &[TopicPlan]) -> impl Iterator<Item = SessionPartitionKey> + '_ {
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
fn name_current_leaders(broker: &Broker, plan: &[TopicPlan], response: &mut FetchResponse) {
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
/// consecutive partitions of one topic share a topic entry.
fn plan(broker: &Broker, topics: Vec<FetchTopic>, version: i16) -> Vec<TopicPlan> {
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
    let mut plan: Vec<TopicPlan> = Vec::new();
    for (name, topic_id, fp) in wanted {
        match plan.last_mut() {
            Some(last) if last.name == name && last.topic_id == topic_id => {}
            _ => plan.push(resolve(broker, name, topic_id, version)),
        }
        if let Some(topic) = plan.last_mut() {
            let found = match topic.resolved.as_deref() {
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
fn resolve(broker: &Broker, name: TopicName, topic_id: Uuid, version: i16) -> TopicPlan {
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
    TopicPlan {
        name,
        topic_id,
        resolved,
        unknown,
        partitions: Vec::new(),
    }
}

/// One pass over every requested partition.
struct ReadAll {
    responses: Vec<FetchableTopicResponse>,
    /// The records' placeholders' file ranges, in response order.
    file_slices: Vec<FileSlice>,
    bytes: usize,
    /// The record bytes of partitions the leader's replication throttle applies to.
    throttled_bytes: usize,
    /// Some partition answered an error or a diverging epoch (either ends a long poll at
    /// once, as in Kafka).
    errored: bool,
}

/// Reads every partition once; `quota` is the leader's replication throttle, for a
/// follower's fetch.
fn read_all(plan: &[TopicPlan], params: &FetchParams, quota: Option<&ReplicationQuota>) -> ReadAll {
    let max_bytes = params.max_bytes;
    let mut total = 0usize;
    // Record bytes read into memory for this response.
    let mut copied = 0usize;
    let mut errored = false;
    let mut throttled_bytes = 0usize;
    let mut file_slices = Vec::new();
    let mut responses = Vec::with_capacity(plan.len());
    for t in plan {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for (fp, found) in &t.partitions {
            let data = match found {
                Err(e) => {
                    errored = true;
                    partition_error(fp.partition, e.error)
                }
                Ok(p) => {
                    // KIP-74: the first partition with data returns at least one whole
                    // batch even when it exceeds the limits, so progress is always possible.
                    let min_one = total == 0;
                    let budget = max_bytes
                        .saturating_sub(total)
                        .min(usize::try_from(fp.partition_max_bytes).unwrap_or(0));
                    let (mut d, mut slice) = read_one(p, fp, params, budget, min_one, &mut copied);
                    if d.error_code != 0 || d.diverging_epoch.epoch >= 0 {
                        errored = true;
                    }
                    if let Some(quota) = quota.filter(|q| q.is_throttled(&p.tp)) {
                        // Read all the same: the follower's position is recorded by it.
                        if quota.holds_back(&p.tp, p.isr().contains(&params.replica_id)) {
                            d.records = Some(Bytes::new());
                            slice = None;
                        }
                        throttled_bytes += d.records.as_ref().map_or(0, Bytes::len);
                    }
                    total += d.records.as_ref().map_or(0, Bytes::len);
                    file_slices.extend(slice);
                    d
                }
            };
            partitions.push(data);
        }
        responses.push(
            FetchableTopicResponse::default()
                .with_topic(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    ReadAll {
        responses,
        file_slices,
        bytes: total,
        throttled_bytes,
        errored,
    }
}

fn read_one(
    p: &Arc<Partition>,
    fp: &FetchPartition,
    params: &FetchParams,
    budget: usize,
    min_one: bool,
    copied: &mut usize,
) -> Read {
    if let Err(e) = p.check_fetch(fp.current_leader_epoch, params.replica_id) {
        return (partition_error(fp.partition, e), None);
    }
    let hw = p.high_watermark();
    let lso = p.last_stable_offset();
    // Kafka sends null aborted transactions to read_uncommitted readers.
    let base = PartitionData::default()
        .with_partition_index(fp.partition)
        .with_high_watermark(hw)
        .with_last_stable_offset(lso)
        .with_aborted_transactions(None);
    let (data, slice) = read_records(p, fp, params, budget, min_one, copied, base);
    if params.isolation != FetchIsolation::TxnCommitted || data.error_code != 0 {
        return (data, slice);
    }
    // read_committed readers are told which transactions were aborted in what they may
    // read (an empty list when none; others get null). Looked up after the read, with a
    // last stable offset at least as far as the read's bound: listing a transaction
    // past the records returned is harmless, missing one inside them is not.
    let aborted = p
        .aborted_txns(fp.fetch_offset, p.last_stable_offset())
        .into_iter()
        .map(|t| {
            AbortedTransaction::default()
                .with_producer_id(ProducerId(t.producer_id))
                .with_first_offset(t.first_offset)
        })
        .collect();
    (data.with_aborted_transactions(Some(aborted)), slice)
}

/// The records part of `read_one`, into `base`.
fn read_records(
    p: &Arc<Partition>,
    fp: &FetchPartition,
    params: &FetchParams,
    budget: usize,
    min_one: bool,
    copied: &mut usize,
    base: PartitionData,
) -> Read {
    if budget == 0 && !min_one {
        let empty = base
            .with_log_start_offset(p.log_start_offset())
            .with_records(Some(Bytes::new()));
        return (empty, None);
    }
    let failed = |base: PartitionData, e: LogError| {
        base.with_error_code(ApiError::from(e).code())
            .with_log_start_offset(p.log_start_offset())
            .with_records(Some(Bytes::new()))
    };
    // A follower naming the epoch of its last batch (v12+) learns first whether its log
    // parts from this one; if so it gets no records, and its fetch is not recorded.
    if params.is_from_follower() {
        match p.diverging_epoch(fp.last_fetched_epoch, fp.fetch_offset) {
            Ok(None) => {}
            Ok(Some((epoch, end_offset))) => {
                let diverging = EpochEndOffset::default()
                    .with_epoch(epoch)
                    .with_end_offset(end_offset);
                let answer = base
                    .with_log_start_offset(p.log_start_offset())
                    .with_diverging_epoch(diverging)
                    .with_records(Some(Bytes::new()));
                return (answer, None);
            }
            Err(e) => {
                let answer = base
                    .with_error_code(e.code())
                    .with_log_start_offset(p.log_start_offset())
                    .with_records(Some(Bytes::new()));
                return (answer, None);
            }
        }
    }
    let read = p.fetch_records(
        params,
        fp.fetch_offset,
        budget,
        min_one,
        fp.log_start_offset,
    );
    let data = match read {
        Ok(data) => data,
        Err(e @ LogError::OffsetOutOfRange { .. }) => return (failed(base, e), None),
        Err(e) => {
            tracing::error!(partition = %p.tp, error = %e, "read failed");
            return (failed(base, e), None);
        }
    };
    let base = base.with_log_start_offset(data.log_start_offset);
    let Some(slice) = data.records else {
        return (base.with_records(Some(Bytes::new())), None);
    };
    if slice.len() >= SENDFILE_MIN_BYTES || *copied + slice.len() > COPIED_MAX_BYTES {
        if let Some(placeholder) = zero_copy::placeholder(&slice) {
            return (base.with_records(Some(placeholder)), Some(slice));
        }
    }
    match slice.read() {
        Ok(records) => {
            *copied += records.len();
            (base.with_records(Some(records)), None)
        }
        Err(e) => {
            tracing::error!(partition = %p.tp, error = %e, "read failed");
            (failed(base, e), None)
        }
    }
}

fn partition_error(partition: i32, e: ResponseError) -> PartitionData {
    PartitionData::default()
        .with_partition_index(partition)
        .with_error_code(e.code())
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_records(Some(Bytes::new()))
}
