//! ListTransactions: the transactional ids this broker coordinates, filtered by state,
//! producer id, (v1+) how long they have run, and (v2+) a regular expression on the id
//! (`kafka-transactions.sh list`, `find-hanging`). Only the ids the requester may
//! DESCRIBE are listed.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use regex_automata::meta::Regex;

use super::{now_ms, str_bytes};
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::txn::TxnState;
use crate::router::RequestContext;

/// Kafka's state names, which the state filters use.
const STATES: &[TxnState] = &[
    TxnState::Empty,
    TxnState::Ongoing,
    TxnState::PrepareCommit,
    TxnState::PrepareAbort,
    TxnState::CompleteCommit,
    TxnState::CompleteAbort,
    TxnState::Dead,
    TxnState::PrepareEpochFence,
];

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let known = |f: &str| STATES.iter().any(|s| s.name() == f);
    let unknown_state_filters: Vec<_> = req
        .state_filters
        .iter()
        .filter(|f| !known(f.as_str()))
        .cloned()
        .collect();
    let refused = |e: ResponseError| ListTransactionsResponse::default().with_error_code(e.code());
    let pattern = match req
        .transactional_id_pattern
        .as_ref()
        .filter(|p| !p.is_empty())
    {
        None => None,
        Some(p) => match Regex::new(&format!("^(?:{})$", p.as_str())) {
            Ok(r) => Some(r),
            Err(_) => return refused(ResponseError::InvalidRegularExpression),
        },
    };
    let listed = match broker.txns.list().await {
        Ok(l) => l,
        Err(e) => return refused(e),
    };
    let now = now_ms();
    let states = listed
        .into_iter()
        .filter(|d| {
            let v = &d.value;
            (req.state_filters.is_empty()
                || req.state_filters.iter().any(|f| f.as_str() == v.state.name()))
                && (req.producer_id_filters.is_empty()
                    || req.producer_id_filters.contains(&ProducerId(v.producer_id)))
                // Kafka: running at least that long (a transaction that has begun).
                && (req.duration_filter < 0
                    || (v.start_ms >= 0 && now - v.start_ms >= req.duration_filter))
                && pattern
                    .as_ref()
                    .is_none_or(|r| r.is_match(d.transactional_id.as_str()))
                && ctx.authorize_quietly(
                    AclOperation::Describe,
                    ResourceType::TransactionalId,
                    &d.transactional_id,
                )
        })
        .map(|d| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(str_bytes(d.transactional_id)))
                .with_producer_id(ProducerId(d.value.producer_id))
                .with_transaction_state(str_bytes(d.value.state.name()))
        })
        .collect();
    ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown_state_filters)
        .with_transaction_states(states)
}
