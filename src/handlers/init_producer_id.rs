//! InitProducerId: a producer id and epoch. Without a transactional id, a fresh producer
//! id at epoch 0 (an idempotent producer); with one, the transaction coordinator's
//! answer for that id: the same producer id with its epoch bumped (which fences the
//! previous instance), KIP-360's re-initialisation after an abortable error, and a new
//! producer id once the epoch is exhausted. Kafka's checks: WRITE on the transactional
//! id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without one IDEMPOTENT_WRITE on the
//! cluster or WRITE on some topic (KIP-679; else CLUSTER_AUTHORIZATION_FAILED).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::txn_errors;
use crate::auth::authorizer::CLUSTER_NAME;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::router::RequestContext;

/// PRODUCER_FENCED is known to clients from this version (older: INVALID_PRODUCER_EPOCH).
const PRODUCER_FENCED_VERSION: i16 = 4;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let refused = |e: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(
                txn_errors::for_version(e, ctx.api_version, PRODUCER_FENCED_VERSION).code(),
            )
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    let allocate = || async {
        broker
            .controller
            .next_producer_id()
            .await
            .map_err(|e| e.error)
    };
    let transactional_id = req
        .transactional_id
        .as_ref()
        .map(|t| t.0.to_string())
        .filter(|t| !t.is_empty());
    let Some(transactional_id) = transactional_id else {
        let idempotent = ctx.authorize(
            AclOperation::IdempotentWrite,
            ResourceType::Cluster,
            CLUSTER_NAME,
        ) || ctx
            .authorize_by_resource_type(AclOperation::Write, ResourceType::Topic);
        if !idempotent {
            return refused(ResponseError::ClusterAuthorizationFailed);
        }
        // An idempotent producer always gets a new id: re-initialising (KIP-360) with its
        // old id and epoch simply starts a new sequence space, as Kafka does without a
        // transactional id.
        return match allocate().await {
            Ok(id) => InitProducerIdResponse::default()
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(0),
            Err(e) => refused(e),
        };
    };
    if !ctx.authorize(
        AclOperation::Write,
        ResourceType::TransactionalId,
        &transactional_id,
    ) {
        return refused(ResponseError::TransactionalIdAuthorizationFailed);
    }
    let expected = (req.producer_id.0 >= 0).then_some((req.producer_id.0, req.producer_epoch));
    let answer = broker
        .txns
        .init_producer_id(
            &transactional_id,
            req.transaction_timeout_ms,
            expected,
            allocate,
        )
        .await;
    match answer {
        Ok((id, epoch)) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        Err(e) => refused(e),
    }
}
