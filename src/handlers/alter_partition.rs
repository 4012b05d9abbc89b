//! AlterPartition (ZooKeeper mode): a leader's ISR change, decided by the controller's
//! event loop; NOT_CONTROLLER on any other broker.

use std::sync::Arc;

use kafka_protocol::messages::{AlterPartitionRequest, AlterPartitionResponse};

use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: AlterPartitionRequest,
) -> AlterPartitionResponse {
    broker
        .controller
        .alter_partition(req, ctx.api_version)
        .await
}
