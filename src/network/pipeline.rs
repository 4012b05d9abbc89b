//! The one place every request passes (Kafka's `RequestChannel` and the checks
//! `KafkaApis` makes before any handler), between the decoded request and its handler:
//!
//! 1. the connection's authentication state: before it authenticates, a connection may
//!    send only what its route declares it may (`Needs::before_authentication`);
//! 2. what the route declares it needs (`auth::needs`): a cluster operation is
//!    authorized here and a denial answered with CLUSTER_AUTHORIZATION_FAILED, the
//!    handler never running; per-resource checks are the handler's, through the
//!    request context's helpers;
//! 3. the request's time split as Kafka's `RequestMetrics` splits it (queue, local,
//!    remote, throttle, response send: see `metrics::request`), with no extra task and
//!    no allocation: the handler's future is polled through [`Timed`];
//! 4. the response's error codes, counted per API and code;
//! 5. the quota manager's verdict (`quota`: client requests only, never replication or
//!    the brokers' own requests): its throttle time, or a controller mutation quota's
//!    that the handler set if longer, goes into the response, and the connection's
//!    writer holds the next response back for it;
//! 6. Kafka's request log, when its logger is on (`request_log`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, RequestKind};

use super::dispatch::Handled;
use super::refusal;
use super::request_log::RequestLog;
use crate::auth::authorizer::CLUSTER_NAME;
use crate::auth::needs::Needs;
use crate::auth::operations::ResourceType;
use crate::broker::Broker;
use crate::metrics::{FetchSide, Metrics};
use crate::router::{HandlerFuture, RequestContext, Response, Route};

/// When a request's answer is ready: what the writer records once it is sent.
pub struct SendTiming {
    pub metrics: Arc<Metrics>,
    pub api_key: ApiKey,
    /// A Fetch's side (Kafka's `FetchConsumer` / `FetchFollower`).
    pub fetch_side: Option<FetchSide>,
    /// When its frame was read.
    pub received: Instant,
}

impl SendTiming {
    /// Records the response's send time (from the handler's end, `handled_at`: its
    /// encoding and its wait behind the connection's earlier answers included, as
    /// Kafka's response queue and send times together) and the total time.
    pub fn sent(&self, handled_at: Instant) {
        let now = Instant::now();
        let send = now.saturating_duration_since(handled_at);
        let total = now - self.received;
        if let Some(api) = self.metrics.requests.api(self.api_key) {
            api.observe_sent(send, total);
        }
        if let Some(side) = self.fetch_side {
            self.metrics
                .requests
                .fetch_side(side)
                .observe_sent(send, total);
        }
    }
}

/// Which side a Fetch comes from: a follower names its broker id (`replica_id`
/// before v15, `replica_state` from v15), a consumer -1.
pub fn fetch_side(body: &RequestKind) -> Option<FetchSide> {
    let RequestKind::Fetch(f) = body else {
        return None;
    };
    let follower = f.replica_id.0 >= 0 || f.replica_state.replica_id.0 >= 0;
    Some(match follower {
        true => FetchSide::Follower,
        false => FetchSide::Consumer,
    })
}

/// Refuses a request its connection may not send yet (the reason closes the connection,
/// as Kafka closes a SASL connection that sends anything else before authenticating, and
/// one whose KIP-368 session has expired).
pub fn admit(route: &Route, ctx: &RequestContext) -> Result<(), String> {
    match authentication(&ctx.session) {
        Authentication::Done => Ok(()),
        _ if route.needs.before_authentication() => Ok(()),
        Authentication::Expired => Err(format!(
            "{:?} on a connection whose SASL session expired without re-authentication",
            route.api_key
        )),
        Authentication::Pending => Err(format!(
            "{:?} before the connection authenticated",
            route.api_key
        )),
    }
}

/// Where a connection stands with authentication.
#[derive(Debug, PartialEq, Eq)]
enum Authentication {
    Done,
    /// A SASL connection that has not authenticated (its authenticator answers what it
    /// sends until it does; nothing else may reach a handler).
    Pending,
    /// A SASL session past its lifetime (`connections.max.reauth.ms`) that did not
    /// re-authenticate: only a re-authentication may follow.
    Expired,
}

/// A plaintext connection is as authenticated as it will be (`User:ANONYMOUS`); an SSL
/// connection is once its handshake is done, before its first request is read (its
/// principal is the client certificate's, or anonymous). A SASL listener's connection is
/// once its authenticator set the session's [`SaslSession`](crate::network::session::SaslSession),
/// and stays so until that session expires.
/// The clock is read only for a SASL session (every request of every connection
/// passes here).
fn authentication(session: &crate::network::Session) -> Authentication {
    if !session.security_protocol.is_sasl() {
        return Authentication::Done;
    }
    match &session.sasl {
        None => Authentication::Pending,
        Some(s) if s.expired(Instant::now()) => Authentication::Expired,
        Some(_) => Authentication::Done,
    }
}

/// Runs `route`'s handler for `body` (a Fetch from `side`, found once by the caller)
/// through the pipeline; resolves to the response body (None with acks=0), its throttle
/// time, or why the connection must close.
pub fn run(
    route: &'static Route,
    broker: &Arc<Broker>,
    ctx: RequestContext,
    body: RequestKind,
    received: Instant,
    request_bytes: usize,
    side: Option<FetchSide>,
) -> impl Future<Output = Result<Handled, String>> + Send + 'static {
    let broker = broker.clone();
    let api_key = route.api_key;
    let api_version = ctx.api_version;
    let denied = match route.needs {
        Needs::Cluster(op) => !ctx.authorize(op, ResourceType::Cluster, CLUSTER_NAME),
        _ => false,
    };
    // The quota manager sees the context after the handler; without a quota in force, or
    // for replication and the brokers' own requests, nothing is kept. The clone copies
    // reference counts only (the client id is a slice of the request frame).
    let quota_ctx = broker
        .quotas()
        .filter(|q| q.enabled() && !crate::quota::is_exempt(api_key, &body))
        .map(|_| ctx.clone());
    let request_log = RequestLog::start(&ctx);
    let handler: HandlerFuture = match denied {
        false => (route.handle)(broker.clone(), ctx, body),
        true => {
            tracing::info!(principal = %ctx.session.principal, peer = %ctx.peer, api = ?api_key, "denied {:?} on the cluster", route.needs);
            match refusal::refuse(body, ResponseError::ClusterAuthorizationFailed) {
                Some(body) => Box::pin(std::future::ready(Response {
                    body,
                    file_slices: Vec::new(),
                })),
                None => {
                    let why = format!("{api_key:?} denied, with no refusal to answer");
                    return futures::future::Either::Left(std::future::ready(Err(why)));
                }
            }
        }
    };
    futures::future::Either::Right(async move {
        let (mut response, timing) = Timed::new(handler).await;
        // A controller mutation quota's throttle, set by its handler (Kafka throttles
        // for the longer of it and the request quota's).
        let mutation_throttle_ms = refusal::throttle_time(&mut response.body);
        let throttle_ms = match (broker.quotas(), &quota_ctx) {
            (Some(q), Some(ctx)) => {
                let handler_time = timing.local + timing.remote;
                q.record(ctx, api_key, request_bytes, &response.body, handler_time)
                    .throttle_ms
            }
            _ => 0,
        }
        .max(mutation_throttle_ms);
        if throttle_ms > 0 {
            refusal::set_throttle_time(&mut response.body, throttle_ms);
        }
        let queue = timing.started.saturating_duration_since(received);
        let requests = &broker.metrics.requests;
        if let Some(api) = requests.api(api_key) {
            api.observe_handled(api_version, queue, timing.local, timing.remote, throttle_ms);
            refusal::count_errors(&response.body, |code| api.count_error(code));
        }
        if let Some(side) = side {
            let api = requests.fetch_side(side);
            api.observe_handled(api_version, queue, timing.local, timing.remote, throttle_ms);
        }
        if let Some(log) = request_log {
            log.completed(api_key, queue, timing.local, timing.remote, throttle_ms);
        }
        Ok(Handled {
            response,
            throttle: Duration::from_millis(u64::try_from(throttle_ms).unwrap_or(0)),
            handled_at: timing.ended,
        })
    })
}

/// A handler's times: when it started and ended, inside its polls, and between them.
struct Timing {
    started: Instant,
    ended: Instant,
    local: Duration,
    remote: Duration,
}

/// A handler's future, polled with the time spent inside its polls (local) told apart
/// from the time between them (remote: waiting on others).
struct Timed<F> {
    inner: F,
    first_poll: Option<Instant>,
    local: Duration,
}

impl<F> Timed<F> {
    fn new(inner: F) -> Self {
        Timed {
            inner,
            first_poll: None,
            local: Duration::ZERO,
        }
    }
}

impl<F: Future + Unpin> Future for Timed<F> {
    type Output = (F::Output, Timing);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let start = Instant::now();
        let first = *self.first_poll.get_or_insert(start);
        let polled = Pin::new(&mut self.inner).poll(cx);
        let end = Instant::now();
        self.local += end - start;
        match polled {
            Poll::Pending => Poll::Pending,
            Poll::Ready(out) => {
                // Done in its first poll (an acks=1 produce): nothing was waited for.
                let remote = match first == start {
                    true => Duration::ZERO,
                    false => (end - first).saturating_sub(self.local),
                };
                let timing = Timing {
                    started: first,
                    ended: end,
                    local: self.local,
                    remote,
                };
                Poll::Ready((out, timing))
            }
        }
    }
}
