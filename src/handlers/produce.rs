//! Produce: append each partition's record batches and report their base offsets.
//! The handler translates the protocol and checks Write on each topic (and on the
//! transactional id); `ReplicaManager::append_records` does the rest (acks rules,
//! internal topics, KIP-890, the acks=all wait).
//!
//! The records stay the `Bytes` slice of the request frame all the way into the log;
//! only batch headers are parsed. With acks=0 the connection sends no response at all;
//! with acks=all the answer waits in the replica layer's delayed produce until each
//! partition's high watermark passes its append (at once with one replica), or the
//! request's timeout ends.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use kafka_protocol::messages::{BrokerId, ProduceRequest, ProduceResponse, TopicName};
use uuid::Uuid;

use super::leader_hint::LeaderHints;
use super::str_bytes;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::log::AppendInfo;
use crate::replica::{AppendData, AppendEntry, AppendError, AppendOrigin, AppendOutcome};
use crate::router::RequestContext;

/// Produce requests carry topic ids instead of names from this version on.
const TOPIC_ID_VERSION: i16 = 13;
/// KIP-951's current leader and node endpoints exist from this version on.
const CURRENT_LEADER_VERSION: i16 = 10;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: ProduceRequest,
) -> ProduceResponse {
    let transactional_id = req
        .transactional_id
        .as_ref()
        .map(|t| &*t.0)
        .filter(|t| !t.is_empty());
    let txn_denied = transactional_id
        .is_some_and(|id| !ctx.authorize(AclOperation::Write, ResourceType::TransactionalId, id));
    // Each topic's name (borrowed from the request before v13), or why it has none, and
    // whether the producer may write it.
    let topics: Vec<(Result<Cow<'_, str>, ResponseError>, bool)> = req
        .topic_data
        .iter()
        .map(|t| {
            let name = resolve_name(&broker, &t.name, t.topic_id, ctx.api_version);
            let allowed = match &name {
                Ok(name) => ctx.authorize(AclOperation::Write, ResourceType::Topic, name),
                Err(_) => true,
            };
            (name, allowed)
        })
        .collect();
    let mut entries = Vec::new();
    for (t, (name, allowed)) in req.topic_data.iter().zip(&topics) {
        let (Ok(name), true, false) = (name, allowed, txn_denied) else {
            continue;
        };
        for p in &t.partition_data {
            if let Some(records) = &p.records {
                let data = AppendData::Records(records.clone());
                entries.push(AppendEntry::new(name, p.index, data));
            }
        }
    }
    let origin = AppendOrigin::Client {
        required_acks: req.acks,
        api_version: ctx.api_version,
        transactional_id,
        timeout: Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(0)),
    };
    broker.replicas.append_records(origin, &mut entries).await;
    let mut outcomes = entries.iter_mut().map(AppendEntry::take_outcome);
    let mut responses = Vec::with_capacity(req.topic_data.len());
    for (t, (name, allowed)) in req.topic_data.iter().zip(&topics) {
        let partitions = t
            .partition_data
            .iter()
            .map(|p| match (name, allowed, &p.records) {
                (_, _, _) if txn_denied => error(
                    p.index,
                    ResponseError::TransactionalIdAuthorizationFailed,
                    "not authorized to write for the transactional id",
                ),
                (Err(e), _, _) => error(p.index, *e, "unknown topic"),
                (Ok(_), false, _) => error(
                    p.index,
                    ResponseError::TopicAuthorizationFailed,
                    "not authorized to write to the topic",
                ),
                (Ok(_), true, None) => error(p.index, ResponseError::InvalidRecord, "no records"),
                (Ok(_), true, Some(_)) => match outcomes.next() {
                    Some(outcome) => answer(p.index, outcome),
                    None => error(p.index, ResponseError::UnknownServerError, "no outcome"),
                },
            })
            .collect();
        responses.push(
            TopicProduceResponse::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_partition_responses(partitions),
        );
    }
    drop(topics);
    let mut response = ProduceResponse::default().with_responses(responses);
    if ctx.api_version >= CURRENT_LEADER_VERSION {
        name_current_leaders(&broker, &mut response);
    }
    response
}

/// A partition's answer from the replica manager's outcome.
fn answer(index: i32, outcome: AppendOutcome) -> PartitionProduceResponse {
    let appended = |info: &AppendInfo| {
        PartitionProduceResponse::default()
            .with_index(index)
            .with_base_offset(info.first_offset)
            .with_log_append_time_ms(info.log_append_time)
            .with_log_start_offset(info.log_start_offset)
    };
    match outcome {
        AppendOutcome::Appended(info) => appended(&info),
        AppendOutcome::NotReplicated { info, error } => {
            appended(&info).with_error_code(error.code())
        }
        AppendOutcome::InternalTopic => internal_topic(index),
        AppendOutcome::Refused {
            error,
            log_start_offset,
        } => {
            let refused = error.error();
            PartitionProduceResponse::default()
                .with_index(index)
                .with_error_code(refused.code())
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(log_start_offset)
                .with_record_errors(record_errors(&error))
                .with_error_message(Some(str_bytes(refused.message())))
        }
    }
}

/// KIP-951: each partition answered NOT_LEADER_OR_FOLLOWER names its current leader, and
/// the response carries those leaders' endpoints.
fn name_current_leaders(broker: &Broker, response: &mut ProduceResponse) {
    let mut hints = LeaderHints::default();
    let not_leader = ResponseError::NotLeaderOrFollower.code();
    for t in &mut response.responses {
        if t.partition_responses
            .iter()
            .all(|p| p.error_code != not_leader)
        {
            continue;
        }
        // From v13 topics are named by id only.
        let name = match t.name.0.is_empty() {
            true => broker
                .controller
                .topic_by_id(t.topic_id)
                .map(|i| Cow::Owned(i.name.clone())),
            false => Some(Cow::Borrowed(&*t.name.0)),
        };
        for p in &mut t.partition_responses {
            if p.error_code != not_leader {
                continue;
            }
            let (leader, epoch) = match &name {
                Some(name) => hints.current_leader(broker, name, p.index),
                None => (-1, -1),
            };
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
                .with_host(str_bytes(b.host))
                .with_port(b.port)
                .with_rack(b.rack.map(str_bytes))
        })
        .collect();
}

/// The topic's name: before v13 the request's own (borrowed, no copy per topic), from
/// v13 the metadata's name for the topic id.
fn resolve_name<'t>(
    broker: &Broker,
    name: &'t TopicName,
    topic_id: Uuid,
    version: i16,
) -> Result<Cow<'t, str>, ResponseError> {
    if version >= TOPIC_ID_VERSION {
        broker
            .controller
            .topic_by_id(topic_id)
            .map(|t| Cow::Owned(t.name.clone()))
            .ok_or(ResponseError::UnknownTopicId)
    } else {
        Ok(Cow::Borrowed(&name.0))
    }
}

/// Which records of the batch were refused and why (Produce v8+; older versions drop them).
fn record_errors(e: &AppendError) -> Vec<BatchIndexAndErrorMessage> {
    e.record_errors()
        .iter()
        .map(|r| {
            BatchIndexAndErrorMessage::default()
                .with_batch_index(r.batch_index)
                .with_batch_index_error_message(Some(str_bytes(r.message.clone())))
        })
        .collect()
}

/// Kafka answers a client's write to an internal topic INVALID_TOPIC_EXCEPTION with no
/// message ("Cannot append to internal topic" is its exception's text, not sent).
fn internal_topic(index: i32) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(ResponseError::InvalidTopicException.code())
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
}

fn error(index: i32, e: ResponseError, message: &str) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(e.code())
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message(Some(str_bytes(message)))
}
