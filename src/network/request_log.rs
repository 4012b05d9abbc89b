//! Kafka's request log (the `kafka.request.logger` logger, off unless set to DEBUG):
//! one line per handled request, with who sent it and the time split the metrics count.
//! Nothing is kept for a request while the logger is off.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::StrBytes;

use super::Session;
use crate::router::RequestContext;

/// What the line says of a request, taken before its handler runs.
pub struct RequestLog {
    api_version: i16,
    correlation_id: i32,
    client_id: Option<StrBytes>,
    peer: SocketAddr,
    session: Arc<Session>,
    /// When the request's frame was read.
    pub received: Instant,
}

impl RequestLog {
    /// The request's details when the request log is on.
    pub fn start(ctx: &RequestContext, received: Instant) -> Option<RequestLog> {
        tracing::enabled!(tracing::Level::DEBUG).then(|| RequestLog {
            api_version: ctx.api_version,
            correlation_id: ctx.correlation_id,
            client_id: ctx.client_id.clone(),
            peer: ctx.peer,
            session: ctx.session.clone(),
            received,
        })
    }

    /// Kafka's "Completed request" line, once the handler answered.
    pub fn completed(
        self,
        api_key: ApiKey,
        queue: Duration,
        local: Duration,
        remote: Duration,
        throttle_ms: i32,
    ) {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        tracing::debug!(
            api = ?api_key,
            version = self.api_version,
            correlation_id = self.correlation_id,
            client_id = self.client_id.as_deref().unwrap_or(""),
            peer = %self.peer,
            principal = %self.session.principal,
            listener = %self.session.listener,
            request_queue_ms = ms(queue),
            local_ms = ms(local),
            remote_ms = ms(remote),
            throttle_ms,
            "Completed request"
        );
    }
}
