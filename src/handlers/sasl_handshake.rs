//! SaslHandshake reaching a handler: the connection has authenticated already (on a SASL
//! listener the authenticator in `network::authenticator` answers it before then, and
//! starts a KIP-368 re-authentication from it), or its listener has no SASL at all.
//! Either way it is answered ILLEGAL_SASL_STATE, as Kafka's `KafkaApis` answers it.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};

use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn handle(
    _broker: Arc<Broker>,
    _ctx: RequestContext,
    _req: SaslHandshakeRequest,
) -> SaslHandshakeResponse {
    SaslHandshakeResponse::default().with_error_code(ResponseError::IllegalSaslState.code())
}
