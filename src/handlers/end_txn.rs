//! EndTxn: commit or abort the producer's ongoing transaction (two-phase: the
//! coordinator persists PrepareCommit/PrepareAbort, writes the markers, then
//! CompleteCommit/CompleteAbort). WRITE on the transactional id, else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

use std::sync::Arc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};

use super::txn_errors;
use kafka_protocol::error::ResponseError;

use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::router::RequestContext;

const PRODUCER_FENCED_VERSION: i16 = 2;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: EndTxnRequest,
) -> EndTxnResponse {
    if !ctx.authorize(
        AclOperation::Write,
        ResourceType::TransactionalId,
        &req.transactional_id,
    ) {
        return EndTxnResponse::default()
            .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
    }
    let ended = broker
        .txns
        .end_txn(
            req.transactional_id.0.as_str(),
            req.producer_id.0,
            req.producer_epoch,
            req.committed,
        )
        .await;
    let code = match ended {
        Ok(()) => 0,
        Err(e) => txn_errors::for_version(e, ctx.api_version, PRODUCER_FENCED_VERSION).code(),
    };
    EndTxnResponse::default().with_error_code(code)
}
