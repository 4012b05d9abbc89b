//! Produce: append each partition's record batches and report their base offsets.
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
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use kafka_protocol::messages::{BrokerId, ProduceRequest, ProduceResponse, TopicName};
use uuid::Uuid;

use super::leader_hint::LeaderHints;
use super::{now_ms, str_bytes};
use crate::broker::Broker;
use crate::coordinator::is_internal_topic;
use crate::error::ApiError;
use crate::log::{check_produce_records, RecordBatchHeader};
use crate::replica::{AppendError, DelayedProduce, Partition};
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
    let refusal = if !matches!(req.acks, -1..=1) {
        Some((
            ResponseError::InvalidRequiredAcks,
            "acks must be -1, 0 or 1",
        ))
    } else {
        None
    };
    let transactional_id = req
        .transactional_id
        .as_ref()
        .map(|t| t.0.to_string())
        .filter(|t| !t.is_empty());
    // acks=all: the appends wait for their high watermarks, answered together.
    let mut acks = DelayedProduce::new();
    // Where each watched append's answer sits: (topic, partition) in `responses`.
    let mut watched = Vec::new();
    let mut responses = Vec::with_capacity(req.topic_data.len());
    for topic in req.topic_data {
        let TopicProduceData {
            name: topic_name,
            topic_id,
            partition_data,
            ..
        } = topic;
        let name = resolve_name(&broker, &topic_name, topic_id, ctx.api_version);
        let mut partitions = Vec::with_capacity(partition_data.len());
        for p in partition_data {
            let resp = match (refusal, &name) {
                (Some((e, why)), _) => error(p.index, e, why),
                (None, Err(e)) => error(p.index, *e, "unknown topic"),
                (None, Ok(name))
                    if is_internal_topic(name) && broker.controller.topic(name).is_some() =>
                {
                    internal_topic(p.index, name)
                }
                (None, Ok(name)) => {
                    let (resp, appended) = append(
                        &broker,
                        name,
                        p,
                        ctx.api_version,
                        req.acks,
                        transactional_id.as_deref(),
                    )
                    .await;
                    if let (-1, Some((partition, last_offset))) = (req.acks, appended) {
                        acks.watch(partition, last_offset);
                        watched.push((responses.len(), partitions.len()));
                    }
                    resp
                }
            };
            partitions.push(resp);
        }
        drop(name); // it may borrow `topic_name`, which the response takes
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic_name)
                .with_topic_id(topic_id)
                .with_partition_responses(partitions),
        );
    }
    if !acks.is_empty() {
        let timeout = Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(0));
        for (refused, (t, p)) in acks.complete(timeout).await.into_iter().zip(watched) {
            if let Some(e) = refused {
                let resp: &mut TopicProduceResponse = &mut responses[t];
                tracing::debug!(topic = ?resp.name, partition = resp.partition_responses[p].index, error = ?e, "acks=all not satisfied");
                resp.partition_responses[p].error_code = e.code();
            }
        }
    }
    let mut response = ProduceResponse::default().with_responses(responses);
    if ctx.api_version >= CURRENT_LEADER_VERSION {
        name_current_leaders(&broker, &mut response);
    }
    response
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

/// Appends one partition's records on its leader. Also returns, for a successful append,
/// the partition and the append's last offset, which acks=all waits for.
async fn append(
    broker: &Broker,
    topic: &str,
    p: PartitionProduceData,
    version: i16,
    acks: i16,
    transactional_id: Option<&str>,
) -> (PartitionProduceResponse, Option<(Arc<Partition>, i64)>) {
    let partition = match broker.replicas.leader_of(topic, p.index, -1) {
        Ok(partition) => partition,
        Err(e) => {
            let index = p.index;
            tracing::debug!(partition = %format_args!("{topic}-{index}"), error = %e, "produce refused");
            return (error(p.index, e.error, &e.message()), None);
        }
    };
    let Some(records) = p.records else {
        return (
            error(p.index, ResponseError::InvalidRecord, "no records"),
            None,
        );
    };
    let checked = match check_produce_records(version, &records) {
        Ok(()) => verify_transaction(broker, &partition, &records, transactional_id).await,
        Err(e) => Err(e.into()),
    };
    let appended = match checked {
        Ok(()) => partition.append_records(records, now_ms(), acks).await,
        Err(e) => Err(AppendError::Refused(e)),
    };
    match appended {
        Ok(info) => {
            let resp = PartitionProduceResponse::default()
                .with_index(p.index)
                .with_base_offset(info.first_offset)
                .with_log_append_time_ms(info.log_append_time)
                .with_log_start_offset(info.log_start_offset);
            (resp, Some((partition, info.last_offset)))
        }
        Err(e) => {
            let refused = e.error();
            if refused.error == ResponseError::KafkaStorageError {
                tracing::error!(partition = %partition.tp, error = %e, "append failed");
            } else {
                tracing::debug!(partition = %partition.tp, error = %e, "produce refused");
            }
            let resp = PartitionProduceResponse::default()
                .with_index(p.index)
                .with_error_code(refused.code())
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(partition.log_start_offset())
                .with_record_errors(record_errors(&e))
                .with_error_message(Some(str_bytes(refused.message())));
            (resp, None)
        }
    }
}

/// KIP-890's defence against hanging transactions: the first transactional batch of a
/// transaction in a partition is accepted only if the coordinator has the partition in
/// the producer's ongoing transaction (Kafka asks with AddPartitionsToTxn verify-only;
/// the coordinator here is local). Later batches of the same transaction find it open
/// in the partition's producer state and are not asked about again. A late batch of a
/// fenced or finished transaction is refused rather than opening a transaction no
/// coordinator will ever end.
async fn verify_transaction(
    broker: &Broker,
    partition: &Partition,
    records: &bytes::Bytes,
    transactional_id: Option<&str>,
) -> Result<(), ApiError> {
    let Ok(header) = RecordBatchHeader::parse(records) else {
        return Ok(()); // the append refuses it with the log's own error
    };
    if !header.is_transactional() {
        return Ok(());
    }
    let Some(id) = transactional_id else {
        return Err(ApiError::new(
            ResponseError::TransactionalIdAuthorizationFailed,
            "transactional records need a transactional id",
        ));
    };
    let (producer_id, epoch) = (header.producer_id(), header.producer_epoch());
    if partition.has_ongoing_txn(producer_id, epoch) {
        return Ok(());
    }
    let verified = broker
        .txns
        .verify_partitions(id, producer_id, epoch, vec![partition.tp.clone()])
        .await
        .and_then(|r| match r.first().and_then(|(_, e)| *e) {
            Some(e) => Err(e),
            None => Ok(()),
        });
    verified.map_err(|e| {
        // As Kafka maps verification errors for the producer: fencing is an old epoch,
        // a coordinator that cannot answer now is worth a retry.
        let e = match e {
            ResponseError::ProducerFenced => ResponseError::InvalidProducerEpoch,
            ResponseError::NotCoordinator
            | ResponseError::CoordinatorNotAvailable
            | ResponseError::CoordinatorLoadInProgress
            | ResponseError::ConcurrentTransactions => ResponseError::NotEnoughReplicas,
            e => e,
        };
        ApiError::new(
            e,
            format!(
                "the transaction of producer {producer_id} does not include {}",
                partition.tp
            ),
        )
    })
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

/// Only the coordinators write their internal topics: a client's batch there could
/// make their partitions unloadable. Kafka answers INVALID_TOPIC_EXCEPTION with no
/// message ("Cannot append to internal topic" is its exception's text, not sent).
fn internal_topic(index: i32, topic: &str) -> PartitionProduceResponse {
    tracing::debug!(
        topic,
        partition = index,
        "Cannot append to internal topic {topic}"
    );
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
