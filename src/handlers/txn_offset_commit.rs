//! TxnOffsetCommit: a transactional producer commits a group's offsets inside its
//! transaction. The group coordinator writes them to `__consumer_offsets` as the
//! producer's transactional batch; they stay pending (UNSTABLE_OFFSET_COMMIT for a
//! `require_stable` OffsetFetch) until the transaction's marker reaches that partition,
//! which commits or drops them. v3+ carry the member id, generation and instance id,
//! checked against the group as Kafka checks them.
//!
//! As for a produce, the first transactional batch in the offsets partition is accepted
//! only if the transaction coordinator holds that partition in the producer's ongoing
//! transaction (KIP-890's server-side check): a commit after AddOffsetsToTxn was skipped,
//! or from a fenced producer, is refused instead of leaving offsets no marker ends.
//!
//! Kafka's checks: WRITE on the transactional id, then READ on the group (else every
//! partition answers TRANSACTIONAL_ID_ or GROUP_AUTHORIZATION_FAILED), READ on each topic
//! (else its partitions answer TOPIC_AUTHORIZATION_FAILED).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use super::commit_slots::CommitSlots;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::group::shard::{CommitRequest, Committer};
use crate::coordinator::group::OFFSETS_TOPIC;
use crate::log::TopicPartition;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let denied = if !ctx.authorize(
        AclOperation::Write,
        ResourceType::TransactionalId,
        &req.transactional_id,
    ) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !ctx.authorize(AclOperation::Read, ResourceType::Group, &req.group_id) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else {
        None
    };
    let mut slots = CommitSlots::default();
    for (t, topic) in req.topics.iter().enumerate() {
        let refusal = denied.or_else(|| {
            (!ctx.authorize(AclOperation::Read, ResourceType::Topic, &topic.name))
                .then_some(ResponseError::TopicAuthorizationFailed)
        });
        if let Some(e) = refusal {
            for p in &topic.partitions {
                slots.refuse(t, p.partition_index, e);
            }
            continue;
        }
        let known = broker.controller.topic(&topic.name);
        for p in &topic.partitions {
            let commit = CommitRequest {
                topic: topic.name.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()),
            };
            slots.add(t, known.as_deref(), commit);
        }
    }
    let commits = std::mem::take(&mut slots.commits);
    let results = match commits.is_empty() {
        true => Ok(Vec::new()),
        false => commit(&broker, &req, ctx.api_version, commits).await,
    };
    let mut topics: Vec<TxnOffsetCommitResponseTopic> = req
        .topics
        .iter()
        .map(|t| TxnOffsetCommitResponseTopic::default().with_name(t.name.clone()))
        .collect();
    for (t, partition, error) in slots.answers(&results) {
        topics[t].partitions.push(
            TxnOffsetCommitResponsePartition::default()
                .with_partition_index(partition)
                .with_error_code(error.map_or(0, |e| e.code())),
        );
    }
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// The group's checks and the write, after the transaction check.
async fn commit(
    broker: &Broker,
    req: &TxnOffsetCommitRequest,
    api_version: i16,
    commits: Vec<CommitRequest>,
) -> Result<Vec<Option<ResponseError>>, ResponseError> {
    let group_id = req.group_id.0.as_str();
    broker.groups.check_coordinator(group_id)?;
    let producer = (req.producer_id.0, req.producer_epoch);
    verify_transaction(broker, req.transactional_id.0.as_str(), group_id, producer).await?;
    let who = Committer {
        member_id: req.member_id.to_string(),
        instance: req.group_instance_id.as_ref().map(|s| s.to_string()),
        generation_id_or_member_epoch: req.generation_id,
        api_version,
    };
    broker
        .groups
        .commit_txn_offsets(group_id, who, producer, commits)
        .await
}

/// Whether the producer's ongoing transaction holds the group's offsets partition: at
/// once when the partition already has the transaction open, otherwise by asking the
/// transaction coordinator (Kafka asks with AddPartitionsToTxn verify-only).
async fn verify_transaction(
    broker: &Broker,
    transactional_id: &str,
    group_id: &str,
    (producer_id, epoch): (i64, i16),
) -> Result<(), ResponseError> {
    if transactional_id.is_empty() {
        return Err(ResponseError::InvalidRequest);
    }
    let tp = TopicPartition::new(OFFSETS_TOPIC, broker.groups.partition_for(group_id));
    let partition = broker
        .replicas
        .leader(&tp, -1)
        .map_err(|_| ResponseError::NotCoordinator)?;
    if partition.has_ongoing_txn(producer_id, epoch) {
        return Ok(());
    }
    let verified = broker
        .txns
        .verify_partitions(transactional_id, producer_id, epoch, vec![tp])
        .await
        .and_then(|r| match r.first().and_then(|(_, e)| *e) {
            Some(e) => Err(e),
            None => Ok(()),
        });
    // As Kafka's group coordinator answers a failed verification: fencing is an old
    // epoch; a transaction coordinator that cannot answer now is a retry after looking
    // the group coordinator up again.
    verified.map_err(|e| match e {
        ResponseError::ProducerFenced => ResponseError::InvalidProducerEpoch,
        ResponseError::NotCoordinator
        | ResponseError::CoordinatorNotAvailable
        | ResponseError::CoordinatorLoadInProgress
        | ResponseError::ConcurrentTransactions => ResponseError::CoordinatorNotAvailable,
        e => e,
    })
}
