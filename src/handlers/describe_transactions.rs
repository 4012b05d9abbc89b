//! DescribeTransactions: the state of transactional ids this broker coordinates
//! (`kafka-transactions.sh describe`). DESCRIBE on each transactional id, else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED; the transaction's topics the requester may not
//! DESCRIBE are left out, as Kafka leaves them.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TransactionalId,
};

use super::{str_bytes, topic_name};
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let mut states = Vec::with_capacity(req.transactional_ids.len());
    for id in req.transactional_ids {
        states.push(describe(&broker, &ctx, id).await);
    }
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

async fn describe(broker: &Broker, ctx: &RequestContext, id: TransactionalId) -> TransactionState {
    let refused = |id: TransactionalId, e: ResponseError| {
        TransactionState::default()
            .with_transactional_id(id)
            .with_error_code(e.code())
            .with_transaction_state(str_bytes(""))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    if !ctx.authorize(AclOperation::Describe, ResourceType::TransactionalId, &id) {
        return refused(id, ResponseError::TransactionalIdAuthorizationFailed);
    }
    let described = match id.0.is_empty() {
        true => Err(ResponseError::TransactionalIdNotFound),
        false => broker.txns.describe(id.0.as_str()).await,
    };
    let d = match described {
        Ok(Some(d)) => d,
        Ok(None) => return refused(id, ResponseError::TransactionalIdNotFound),
        Err(e) => return refused(id, e),
    };
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in &d.value.partitions {
        if !ctx.authorize_quietly(AclOperation::Describe, ResourceType::Topic, &tp.topic) {
            continue;
        }
        by_topic.entry(&tp.topic).or_default().push(tp.partition);
    }
    let topics = by_topic
        .into_iter()
        .map(|(t, partitions)| {
            TopicData::default()
                .with_topic(topic_name(t))
                .with_partitions(partitions)
        })
        .collect();
    TransactionState::default()
        .with_transactional_id(id)
        .with_transaction_state(str_bytes(d.value.state.name()))
        .with_transaction_timeout_ms(d.value.timeout_ms)
        .with_transaction_start_time_ms(d.value.start_ms)
        .with_producer_id(ProducerId(d.value.producer_id))
        .with_producer_epoch(d.value.producer_epoch)
        .with_topics(topics)
}
