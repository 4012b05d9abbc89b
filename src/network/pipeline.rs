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
//!    no allocation: the handler's future is polled through [`Run`], which is kept
//!    inline in the connection's queued request;
//! 4. the response's error codes, counted per API and code ([`finish`], run by the
//!    connection's writer, which then encodes the response and, once it is sent,
//!    records its send time with [`sent`]: the writer holds the broker's metrics for
//!    the connection's life, so a request clones no handle to them);
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
use kafka_protocol::protocol::StrBytes;

use super::refusal;
use super::request_log::RequestLog;
use crate::auth::authorizer::CLUSTER_NAME;
use crate::auth::needs::Needs;
use crate::auth::operations::ResourceType;
use crate::broker::Broker;
use crate::metrics::{FetchSide, Metrics};
use crate::network::Session;
use crate::protocol::{encode_response, Frame};
use crate::quota::Caller;
use crate::router::{HandlerFuture, RequestContext, Response, Route};

/// A request that reached the pipeline: what its answer needs once its handler is done
/// (its header's fields, for the encoding; when its frame was read and which side a Fetch
/// is, for its times).
#[derive(Clone, Copy)]
pub struct Request {
    pub api_key: ApiKey,
    pub api_version: i16,
    pub correlation_id: i32,
    /// A Fetch's side (Kafka's `FetchConsumer` / `FetchFollower`).
    pub fetch_side: Option<FetchSide>,
    /// When its frame was read.
    pub received: Instant,
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

/// Starts `route`'s handler for `body` through the pipeline: the cluster check its
/// route declares, then the handler, polled by [`Run`]. Err: why the connection must close
/// (a denied request with no refusal to answer).
pub fn start(
    route: &'static Route,
    broker: &Arc<Broker>,
    ctx: RequestContext,
    body: RequestKind,
    received: Instant,
    request_bytes: usize,
) -> Result<Run, String> {
    let api_key = route.api_key;
    let denied = match route.needs {
        Needs::Cluster(op) => !ctx.authorize(op, ResourceType::Cluster, CLUSTER_NAME),
        _ => false,
    };
    // The quota manager is told of the request after the handler; without a quota in
    // force, or for replication and the brokers' own requests, nothing is kept (and
    // nothing cloned: every request passes here).
    let quota = ctx
        .session
        .quotas
        .as_deref()
        .filter(|q| q.enabled() && !crate::quota::is_exempt(api_key, &body))
        .map(|_| QuotaCheck {
            session: ctx.session.clone(),
            client_id: ctx.client_id.clone(),
            api_version: ctx.api_version,
            request_bytes,
        });
    let request_log = RequestLog::start(&ctx, received).map(Box::new);
    let handler: HandlerFuture = match denied {
        false => (route.handle)(broker.clone(), ctx, body),
        true => {
            tracing::info!(principal = %ctx.session.principal, peer = %ctx.peer, api = ?api_key, "denied {:?} on the cluster", route.needs);
            let body = refusal::refuse(body, ResponseError::ClusterAuthorizationFailed)
                .ok_or_else(|| format!("{api_key:?} denied, with no refusal to answer"))?;
            Box::pin(std::future::ready(Response {
                body,
                file_slices: Vec::new(),
            }))
        }
    };
    Ok(Run {
        handler,
        first_poll: None,
        local: Duration::ZERO,
        quota,
        request_log,
        api_key,
    })
}

/// What the quota manager is told once the handler answered: the connection's session
/// (its principal, the quota manager and the quotas it resolved) and the request's
/// client id and version, kept inline (the rest of the request context went to the
/// handler).
struct QuotaCheck {
    session: Arc<Session>,
    /// A slice of the request frame.
    client_id: Option<StrBytes>,
    api_version: i16,
    request_bytes: usize,
}

/// A handler's future in the pipeline: polled with the time spent inside its polls
/// (local) told apart from the time between them (remote: waiting on others); when it
/// answers, the quota's verdict goes into the response and Kafka's request log line is
/// written. One struct, kept inline in its connection's queued request: no task and no
/// allocation of its own.
pub struct Run {
    handler: HandlerFuture,
    first_poll: Option<Instant>,
    local: Duration,
    quota: Option<QuotaCheck>,
    request_log: Option<Box<RequestLog>>,
    api_key: ApiKey,
}

/// A handler's answer, with the quota's throttle in it, and its times.
pub struct Handled {
    pub response: Response,
    /// The quota's throttle (or a controller mutation quota's, if longer), in the
    /// response and to be held before the connection's next one.
    pub throttle_ms: i32,
    pub started: Instant,
    pub ended: Instant,
    pub local: Duration,
    pub remote: Duration,
}

impl Future for Run {
    type Output = Handled;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Handled> {
        let start = Instant::now();
        let first = *self.first_poll.get_or_insert(start);
        let polled = self.handler.as_mut().poll(cx);
        let end = Instant::now();
        self.local += end - start;
        let Poll::Ready(response) = polled else {
            return Poll::Pending;
        };
        // Done in its first poll (an acks=1 produce): nothing was waited for.
        let remote = match first == start {
            true => Duration::ZERO,
            false => (end - first).saturating_sub(self.local),
        };
        let mut handled = Handled {
            response,
            throttle_ms: 0,
            started: first,
            ended: end,
            local: self.local,
            remote,
        };
        self.verdict(&mut handled);
        if let Some(log) = self.request_log.take() {
            let queue = first.saturating_duration_since(log.received);
            log.completed(
                self.api_key,
                queue,
                handled.local,
                handled.remote,
                handled.throttle_ms,
            );
        }
        Poll::Ready(handled)
    }
}

impl Run {
    /// The quota manager's verdict on the answered request, and a controller mutation
    /// quota's throttle its handler set (Kafka throttles for the longer of the two).
    fn verdict(&self, handled: &mut Handled) {
        let body = &mut handled.response.body;
        let mutation_throttle_ms = refusal::throttle_time(body);
        let quota_ms = self.quota.as_ref().map_or(0, |q| {
            let Some(quotas) = q.session.quotas.as_deref() else {
                return 0;
            };
            let caller = Caller {
                session: &q.session,
                client_id: q.client_id.as_deref().unwrap_or(""),
                api_version: q.api_version,
                at: handled.ended,
            };
            let handler_time = handled.local + handled.remote;
            quotas
                .record(&caller, self.api_key, q.request_bytes, body, handler_time)
                .throttle_ms
        });
        let throttle_ms = quota_ms.max(mutation_throttle_ms);
        if throttle_ms > 0 {
            refusal::set_throttle_time(body, throttle_ms);
        }
        handled.throttle_ms = throttle_ms;
    }
}

/// An answered request, encoded for its connection's writer.
pub struct Answer {
    /// `None` when the request expects no response (acks=0).
    pub frame: Option<Frame>,
    pub throttle: Duration,
    /// When the handler ended (the response's send time counts from there).
    pub handled_at: Instant,
}

/// Counts the answered request's version, time split and error codes, and encodes its
/// response (none when the client expects none). Err: the response could not be encoded
/// (the connection is then closed, so the client fails fast instead of waiting for an
/// answer that never comes).
pub fn finish(
    metrics: &Metrics,
    request: &Request,
    handled: Handled,
    expects_response: bool,
) -> Result<Answer, String> {
    count(metrics, request, &handled);
    let throttle = Duration::from_millis(u64::try_from(handled.throttle_ms).unwrap_or(0));
    let frame = match expects_response {
        false => None,
        true => {
            let response = handled.response;
            let frame = encode_response(
                request.api_key,
                request.api_version,
                request.correlation_id,
                &response.body,
                response.file_slices,
            );
            Some(frame.map_err(|e| {
                format!(
                    "cannot encode {:?} v{} response: {e}",
                    request.api_key, request.api_version
                )
            })?)
        }
    };
    Ok(Answer {
        frame,
        throttle,
        handled_at: handled.ended,
    })
}

/// Counts an answered request: its version, its time split up to its handler's end, and
/// its response's error codes (per API, and per Fetch side). A response's codes are
/// tallied in runs, so a produce answered NONE for each of its partitions adds once.
pub fn count(metrics: &Metrics, request: &Request, handled: &Handled) {
    let queue = handled.started.saturating_duration_since(request.received);
    let (local, remote, throttle_ms) = (handled.local, handled.remote, handled.throttle_ms);
    let requests = &metrics.requests;
    if let Some(api) = requests.api(request.api_key) {
        let marks = api.mine();
        marks.observe_handled(request.api_version, queue, local, remote, throttle_ms);
        let mut run: Option<(i16, u64)> = None;
        refusal::count_errors(&handled.response.body, |code| match &mut run {
            Some((c, n)) if *c == code => *n += 1,
            _ => {
                if let Some((c, n)) = run.replace((code, 1)) {
                    marks.count_errors(c, n);
                }
            }
        });
        if let Some((c, n)) = run {
            marks.count_errors(c, n);
        }
    }
    if let Some(side) = request.fetch_side {
        let api = requests.fetch_side(side).mine();
        api.observe_handled(request.api_version, queue, local, remote, throttle_ms);
    }
}

/// Records the response's send time (from the handler's end, `handled_at`: its
/// encoding and its wait behind the connection's earlier answers included, as Kafka's
/// response queue and send times together) and the total time.
pub fn sent(metrics: &Metrics, request: &Request, handled_at: Instant) {
    let now = Instant::now();
    let send = now.saturating_duration_since(handled_at);
    let total = now - request.received;
    if let Some(api) = metrics.requests.api(request.api_key) {
        api.mine().observe_sent(send, total);
    }
    if let Some(side) = request.fetch_side {
        metrics
            .requests
            .fetch_side(side)
            .mine()
            .observe_sent(send, total);
    }
}
