//! AllocateProducerIds (ZooKeeper mode): a block of 1000 producer ids from
//! `/latest_producer_id_block`, claimed by the controller; NOT_CONTROLLER elsewhere.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse, ProducerId,
};

use crate::broker::Broker;
use crate::controller::zk::event_loop::Event;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: AllocateProducerIdsRequest,
) -> AllocateProducerIdsResponse {
    let error = |e: ResponseError| AllocateProducerIdsResponse::default().with_error_code(e.code());
    let Some(zk) = broker.controller.zk() else {
        return error(ResponseError::NotController);
    };
    let (reply, answer) = tokio::sync::oneshot::channel();
    if !zk.submit(|| Event::AllocateProducerIds {
        broker_id: req.broker_id.0,
        broker_epoch: req.broker_epoch,
        reply,
    }) {
        return error(ResponseError::NotController);
    }
    match answer.await {
        Ok(Ok((start, len))) => AllocateProducerIdsResponse::default()
            .with_producer_id_start(ProducerId(start))
            .with_producer_id_len(len),
        Ok(Err(e)) => error(e),
        Err(_) => error(ResponseError::NotController),
    }
}
