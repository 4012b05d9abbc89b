//! AddOffsetsToTxn: a transactional producer about to commit a group's offsets
//! (`sendOffsetsToTransaction`) adds the group's `__consumer_offsets` partition to its
//! transaction, as AddPartitionsToTxn adds a partition it writes to, so the transaction
//! coordinator sends that partition a marker when the transaction ends. The producer then
//! sends TxnOffsetCommit to the group coordinator. Kafka's checks: WRITE on the
//! transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group
//! (GROUP_AUTHORIZATION_FAILED).

use std::sync::Arc;

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use super::txn_errors;
use kafka_protocol::error::ResponseError;

use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::group::OFFSETS_TOPIC;
use crate::log::TopicPartition;
use crate::router::RequestContext;

const PRODUCER_FENCED_VERSION: i16 = 2;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let denied = if !ctx.authorize(
        AclOperation::Write,
        ResourceType::TransactionalId,
        &req.transactional_id,
    ) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !ctx.authorize(AclOperation::Read, ResourceType::Group, &req.group_id) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else {
        None
    };
    if let Some(e) = denied {
        return AddOffsetsToTxnResponse::default().with_error_code(e.code());
    }
    let offsets_partition =
        TopicPartition::new(OFFSETS_TOPIC, broker.groups.partition_for(&req.group_id));
    let added = broker
        .txns
        .add_partitions(
            req.transactional_id.0.as_str(),
            req.producer_id.0,
            req.producer_epoch,
            vec![offsets_partition],
        )
        .await;
    let code = match added {
        Ok(()) => 0,
        Err(e) => txn_errors::for_version(e, ctx.api_version, PRODUCER_FENCED_VERSION).code(),
    };
    AddOffsetsToTxnResponse::default().with_error_code(code)
}
