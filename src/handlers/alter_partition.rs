//! AlterPartition (ZooKeeper mode): a leader's ISR change, decided by the controller's
//! event loop; NOT_CONTROLLER on any other broker.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{AlterPartitionRequest, AlterPartitionResponse};

use crate::broker::Broker;
use crate::controller::zk::event_loop::Event;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: AlterPartitionRequest,
) -> AlterPartitionResponse {
    let not_controller =
        || AlterPartitionResponse::default().with_error_code(ResponseError::NotController.code());
    let Some(zk) = broker.controller.zk() else {
        return not_controller();
    };
    let (reply, answer) = tokio::sync::oneshot::channel();
    let version = ctx.api_version;
    if !zk.submit(|| Event::AlterPartition {
        request: req,
        version,
        reply,
    }) {
        return not_controller();
    }
    answer.await.unwrap_or_else(|_| not_controller())
}
