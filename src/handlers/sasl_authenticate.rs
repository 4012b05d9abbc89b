//! SaslAuthenticate reaching a handler: the connection has authenticated already, or its
//! listener has no SASL (the authenticator in `network::authenticator` answers it during
//! an exchange). Answered ILLEGAL_SASL_STATE with Kafka's message.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn handle(
    _broker: Arc<Broker>,
    _ctx: RequestContext,
    _req: SaslAuthenticateRequest,
) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::IllegalSaslState.code())
        .with_error_message(Some(StrBytes::from_static_str(
            "SaslAuthenticate request received after successful authentication",
        )))
}
