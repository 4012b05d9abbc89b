//! InitProducerId: a fresh producer id (epoch 0) for an idempotent producer.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let refused = |e: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(e.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    if req
        .transactional_id
        .as_ref()
        .is_some_and(|t| !t.0.is_empty())
    {
        // There is no transaction coordinator yet (FindCoordinator is not advertised);
        // a transactional producer gets a clear, non-retriable refusal.
        return refused(ResponseError::UnsupportedVersion);
    }
    // An idempotent producer always gets a new id: re-initialising (KIP-360) with its
    // old id and epoch simply starts a new sequence space, as Kafka does without a
    // transactional id.
    match broker.controller.next_producer_id().await {
        Ok(id) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => refused(e.error),
    }
}
