//! ControlledShutdown (ZooKeeper mode): the controller moves the broker's leaderships
//! away and answers the partitions it still leads; NOT_CONTROLLER on any other broker.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::controlled_shutdown_response::RemainingPartition;
use kafka_protocol::messages::{ControlledShutdownRequest, ControlledShutdownResponse};

use super::topic_name;
use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: ControlledShutdownRequest,
) -> ControlledShutdownResponse {
    let error = |e: ResponseError| ControlledShutdownResponse::default().with_error_code(e.code());
    let remaining = broker
        .controller
        .controlled_shutdown_of(req.broker_id.0, req.broker_epoch)
        .await;
    match remaining {
        Ok(remaining) => ControlledShutdownResponse::default().with_remaining_partitions(
            remaining
                .into_iter()
                .map(|tp| {
                    RemainingPartition::default()
                        .with_topic_name(topic_name(&tp.topic))
                        .with_partition_index(tp.partition)
                })
                .collect(),
        ),
        Err(e) => error(e),
    }
}
