//! AllocateProducerIds (ZooKeeper mode): a block of 1000 producer ids from
//! `/latest_producer_id_block`, claimed by the controller; NOT_CONTROLLER elsewhere.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse, ProducerId,
};

use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: AllocateProducerIdsRequest,
) -> AllocateProducerIdsResponse {
    let error = |e: ResponseError| AllocateProducerIdsResponse::default().with_error_code(e.code());
    let allocated = broker
        .controller
        .allocate_producer_ids(req.broker_id.0, req.broker_epoch)
        .await;
    match allocated {
        Ok((start, len)) => AllocateProducerIdsResponse::default()
            .with_producer_id_start(ProducerId(start))
            .with_producer_id_len(len),
        Err(e) => error(e),
    }
}
