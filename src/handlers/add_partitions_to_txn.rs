//! AddPartitionsToTxn: the partitions a transactional producer is about to write to
//! join its transaction, before it writes (so the coordinator knows where to send the
//! markers). v0–3 carry one transaction (clients); v4+ carry many (brokers), each may
//! be `verify_only` (KIP-890: is the partition already in the transaction?).
//!
//! As Kafka answers: partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION and
//! the others OPERATION_NOT_ATTEMPTED; otherwise every partition of a transaction gets
//! the transaction's error (or none).
//!
//! Kafka's checks: v4+ (brokers only) CLUSTER_ACTION on the cluster, else
//! CLUSTER_AUTHORIZATION_FAILED; WRITE on each transactional id, else every partition of
//! it answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED; WRITE on each topic, else its
//! partitions answer TOPIC_AUTHORIZATION_FAILED (and the others OPERATION_NOT_ATTEMPTED).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, TransactionalId,
};

use super::{topic_name, txn_errors};
use crate::auth::authorizer::CLUSTER_NAME;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::log::TopicPartition;
use crate::router::RequestContext;

const BATCHED_VERSION: i16 = 4;
const PRODUCER_FENCED_VERSION: i16 = 2;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    let version = ctx.api_version;
    if version < BATCHED_VERSION {
        let results = one(
            &broker,
            &ctx,
            &req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id.0,
            req.v3_and_below_producer_epoch,
            &req.v3_and_below_topics,
            false,
            version,
        )
        .await;
        return AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results);
    }
    if !ctx.authorize(
        AclOperation::ClusterAction,
        ResourceType::Cluster,
        CLUSTER_NAME,
    ) {
        return AddPartitionsToTxnResponse::default()
            .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
    }
    let mut out = Vec::with_capacity(req.transactions.len());
    for t in &req.transactions {
        let results = one(
            &broker,
            &ctx,
            &t.transactional_id,
            t.producer_id.0,
            t.producer_epoch,
            &t.topics,
            t.verify_only,
            version,
        )
        .await;
        out.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(t.transactional_id.clone())
                .with_topic_results(results),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(out)
}

/// One transaction's partitions, answered per partition.
#[allow(clippy::too_many_arguments)]
async fn one(
    broker: &Broker,
    ctx: &RequestContext,
    transactional_id: &TransactionalId,
    producer_id: i64,
    epoch: i16,
    topics: &[AddPartitionsToTxnTopic],
    verify_only: bool,
    version: i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let partitions: Vec<TopicPartition> = topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|&p| TopicPartition::new(t.name.0.as_str(), p))
        })
        .collect();
    if !ctx.authorize(
        AclOperation::Write,
        ResourceType::TransactionalId,
        transactional_id,
    ) {
        let denied = Some(ResponseError::TransactionalIdAuthorizationFailed);
        return results_by_topic(&partitions, &vec![denied; partitions.len()]);
    }
    let writable: Vec<bool> = topics
        .iter()
        .map(|t| ctx.authorize(AclOperation::Write, ResourceType::Topic, &t.name))
        .collect();
    let refused: Vec<Option<ResponseError>> = partitions
        .iter()
        .map(|tp| {
            let t = topics.iter().position(|t| t.name.0.as_str() == tp.topic);
            if t.is_some_and(|t| !writable[t]) {
                return Some(ResponseError::TopicAuthorizationFailed);
            }
            let unknown = broker
                .controller
                .topic(&tp.topic)
                .is_none_or(|t| !t.partitions.iter().any(|p| p.partition == tp.partition));
            unknown.then_some(ResponseError::UnknownTopicOrPartition)
        })
        .collect();
    let errors: Vec<Option<ResponseError>> = if refused.iter().any(Option::is_some) {
        refused
            .into_iter()
            .map(|e| Some(e.unwrap_or(ResponseError::OperationNotAttempted)))
            .collect()
    } else {
        let id = transactional_id.0.as_str();
        let fenced = |e| Some(txn_errors::for_version(e, version, PRODUCER_FENCED_VERSION));
        if verify_only {
            match broker
                .txns
                .verify_partitions_here(id, producer_id, epoch, partitions.clone())
                .await
            {
                Ok(per_partition) => per_partition.into_iter().map(|(_, e)| e).collect(),
                Err(e) => vec![fenced(e); partitions.len()],
            }
        } else {
            let added = broker
                .txns
                .add_partitions(id, producer_id, epoch, partitions.clone())
                .await;
            vec![added.err().and_then(fenced); partitions.len()]
        }
    };
    results_by_topic(&partitions, &errors)
}

/// Per-partition answers grouped by topic, in request order.
fn results_by_topic(
    partitions: &[TopicPartition],
    errors: &[Option<ResponseError>],
) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut out: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for (tp, e) in partitions.iter().zip(errors) {
        let result = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(tp.partition)
            .with_partition_error_code(e.map_or(0, |e| e.code()));
        match out.last_mut() {
            Some(t) if t.name.0.as_str() == tp.topic => t.results_by_partition.push(result),
            _ => out.push(
                AddPartitionsToTxnTopicResult::default()
                    .with_name(topic_name(&tp.topic))
                    .with_results_by_partition(vec![result]),
            ),
        }
    }
    out
}
