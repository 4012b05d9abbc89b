//! One client connection: frames in, responses out in request order.
//!
//! The reader decodes requests ahead (pipelining) while the writer runs their handlers
//! one at a time, in arrival order, and writes each response (see [`super::writer`]). One
//! at a time is Kafka's contract: an idempotent producer pipelines up to five produce
//! requests per connection and relies on them being appended in the order sent; clients
//! also match responses to requests by position. Requests on different connections run
//! in parallel.
//!
//! What the reader may hold is bounded (see [`super::memory`]): before it reads a frame's
//! body it reserves the frame's size in the connection's read-ahead pool and the broker's
//! `queued.max.request.bytes` pool, and at most `queued.max.requests` requests wait for the
//! writer. While any bound is reached the reader is muted: it reads nothing, but still
//! watches for the client closing the connection, so that a client that leaves does not
//! keep its queued requests (and their memory) alive.
//!
//! An idle connection waits on its socket and on its [`Link`], nothing else: its listener
//! tells it through the link to stop (at shutdown) or to check whether it has been idle
//! past `connections.max.idle.ms` (from its last read or answer), so that it holds no
//! timer and no shutdown watch.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;

use super::authenticator::{Authenticator, Outcome, MIN_REAUTH_INTERVAL};
use super::dispatch::{dispatch, Job, Work};
use super::link::{Asked, JobSender, Link};
use super::memory::{ConnectionMemory, MemoryPool, RequestMemory};
use super::queue::Refused;
use super::session::Session;
use super::transport::{Transport, TransportRead};
use super::writer::write_responses;
use crate::broker::Broker;
use crate::protocol::codec::peek_header;
use crate::protocol::frame::{self, Check};
use crate::sasl::settings::SaslSettings;

/// Limits applied to every connection, from the broker config.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `socket.request.max.bytes`: larger frames close the connection. Also the most a
    /// decoded request may hold beyond its frame.
    pub max_frame_bytes: usize,
    /// Requests read but not yet answered, per connection (`queued.max.requests`).
    pub max_in_flight: usize,
    /// Bytes of requests read but not yet answered, per connection: past this the
    /// connection reads no further request until one is answered.
    pub read_ahead_bytes: usize,
    /// `connections.max.idle.ms`: a connection that has read and written nothing for
    /// longer, with nothing waiting to be answered, is closed.
    pub idle: Duration,
}

/// Bytes read from the socket per read call; the buffer grows with what arrives, never
/// by what a frame header claims. A connection holds this buffer only while a request is
/// arriving: between requests it waits for the socket to be readable without one, so
/// 10,000 idle connections do not each keep pages of a buffer resident.
const READ_CHUNK: usize = 64 * 1024;

/// The smallest budget for a decoded request, whatever `socket.request.max.bytes` says.
const MIN_DECODE_BYTES: usize = 1024 * 1024;

/// What a connection's reader works with.
struct Reader<R> {
    stream: R,
    session: Arc<Session>,
    broker: Arc<Broker>,
    limits: Limits,
    memory: ConnectionMemory,
    jobs: JobSender,
    /// A SASL listener's settings (for re-authentication too).
    sasl: Option<Arc<SaslSettings>>,
    /// Set while the connection authenticates (or re-authenticates): its frames go to
    /// the authenticator, not to the request pipeline.
    auth: Option<Box<Authenticator>>,
}

/// Opens a connection: returns its reader and its writer, to be run as two tasks (so the
/// next request decodes while the current one is handled), and its link, through which
/// the listener stops it or has it checked for idleness. The connection is done when the
/// reader and the writer are.
pub fn open<T: Transport>(
    transport: T,
    session: Session,
    sasl: Option<Arc<SaslSettings>>,
    broker: Arc<Broker>,
    limits: Limits,
    broker_memory: Arc<MemoryPool>,
) -> (
    impl Future<Output = ()> + Send + 'static,
    impl Future<Output = ()> + Send + 'static,
    Arc<Link>,
) {
    let (stream, writer) = transport.into_split();
    // Jobs are boxed in the queue: a connection's queue keeps the room its most
    // pipelined moment needed, and pointers cost 8 bytes a slot where jobs cost 64.
    let (jobs, pending, link) = Link::open(limits.max_in_flight);
    let peer = session.peer;
    let metrics = broker.metrics.clone();
    // A SASL connection authenticates before anything else; the bound on how long it may
    // take starts now.
    let auth = match (&sasl, session.security_protocol.is_sasl()) {
        (Some(settings), true) => Some(Box::new(Authenticator::new(
            settings.clone(),
            authentication_timeout(&limits),
        ))),
        _ => None,
    };
    let mut session = session;
    session.authorizer = broker.authorizer();
    session.quotas = Some(broker.quota_manager());
    let reader = Reader {
        stream,
        session: Arc::new(session),
        broker,
        limits,
        memory: ConnectionMemory {
            connection: MemoryPool::new(Some(limits.read_ahead_bytes)),
            broker: broker_memory,
        },
        jobs,
        sasl,
        auth,
    };
    (
        read_requests(reader),
        write_responses(writer, pending, peer, metrics),
        link,
    )
}

/// Waits until more of the connection's bytes are in `buf`. Err: close the connection
/// (saying why if there is a why): the client went, authentication took too long, the
/// connection idled past `connections.max.idle.ms`, or the server is stopping.
async fn read_more<R: TransportRead>(
    r: &mut Reader<R>,
    buf: &mut BytesMut,
    held: Option<&RequestMemory>,
) -> Result<(), Option<String>> {
    let link = r.jobs.link();
    let deadline = r.auth.as_ref().map(|a| a.deadline);
    loop {
        let read = tokio::select! {
            read = read_some(&mut r.stream, buf) => read,
            () = until(deadline) => {
                return Err(Some(format!(
                    "SASL authentication not finished within {} ms",
                    authentication_timeout(&r.limits).as_millis()
                )))
            }
            asked = link.asked() => match asked {
                Asked::Stop => return Err(None),
                // Idle only when nothing is waiting to be answered (a long poll may be).
                Asked::CheckIdle
                    if link.idle_for() >= r.limits.idle && waiting_for_nothing(&r.memory, held) =>
                {
                    return Err(Some(format!(
                        "idle for more than {} ms",
                        r.limits.idle.as_millis()
                    )))
                }
                Asked::CheckIdle => continue,
            },
        };
        return match read {
            Ok(0) => {
                // A clean close: the requests read before it still run (see `gone`).
                link.gone.set();
                match buf.is_empty() {
                    true => Err(None),
                    false => Err(Some("connection closed mid-frame".to_string())),
                }
            }
            Ok(_) => {
                link.touch();
                Ok(())
            }
            Err(e) => {
                link.gone.abandon();
                Err(Some(format!("read failed: {e}")))
            }
        };
    }
}

/// The job for a whole request frame, and whether it is the connection's last (a failed
/// authentication's answer); Err: close the connection, saying why if there is a why.
fn job_for<R: TransportRead>(
    r: &mut Reader<R>,
    request: Bytes,
    memory: RequestMemory,
    max_decoded_bytes: usize,
) -> Result<(Job, bool), Option<String>> {
    if r.auth.is_none() && begins_reauthentication(r, &request) {
        r.auth = r
            .session
            .sasl
            .as_ref()
            .zip(r.sasl.as_ref())
            .map(|(s, settings)| {
                Box::new(Authenticator::reauthenticate(
                    settings.clone(),
                    authentication_timeout(&r.limits),
                    s.mechanism,
                    r.session.principal.clone(),
                ))
            });
    }
    match r.auth.is_some() {
        true => authenticate(r, request, memory),
        false => dispatch(request, &r.broker, &r.session, memory, max_decoded_bytes)
            .map(|job| (job, false))
            .map_err(Some),
    }
}

async fn read_requests<R: TransportRead>(mut r: Reader<R>) {
    let peer = r.session.peer;
    let max_decoded_bytes = r.limits.max_frame_bytes.max(MIN_DECODE_BYTES);
    let mut buf = BytesMut::new();
    // The memory reserved for the frame at the head of `buf`, once its size is known.
    let mut held: Option<RequestMemory> = None;
    let reason = loop {
        // Before and during authentication a frame is bounded by
        // `sasl.server.max.receive.size`, not `socket.request.max.bytes`.
        let max_frame = r
            .auth
            .as_ref()
            .map_or(r.limits.max_frame_bytes, |a| a.max_receive_size());
        let check = match frame::check(&buf, max_frame) {
            Ok(check) => check,
            Err(e) if r.auth.is_some() => {
                break Some(format!(
                    "Failing SASL authentication due to invalid receive size ({e}; sasl.server.max.receive.size is {max_frame})"
                ))
            }
            Err(e) => break Some(e.to_string()),
        };
        let frame_bytes = match check {
            Check::Complete(size) => Some(4 + size),
            Check::Incomplete(total) if buf.len() >= 4 => Some(total),
            Check::Incomplete(_) => None,
        };
        if let (Some(bytes), None) = (frame_bytes, &held) {
            let reserved = match r.memory.try_reserve(bytes) {
                Some(reserved) => reserved,
                None => {
                    let reserve = r.memory.clone().reserve(bytes);
                    match Box::pin(muted(&r, reserve)).await {
                        Some(reserved) => reserved,
                        None => break None,
                    }
                }
            };
            held = Some(reserved);
            // Room for exactly this frame, not a doubling of the buffer.
            buf.reserve(bytes.saturating_sub(buf.len()));
        }
        match (check, held.take()) {
            (Check::Complete(size), Some(memory)) => {
                let request: Bytes = frame::split(&mut buf, size).freeze();
                let (job, last) = match job_for(&mut r, request, memory, max_decoded_bytes) {
                    Ok(job) => job,
                    Err(why) => break why,
                };
                match r.jobs.try_send(Box::new(job)) {
                    Ok(()) if last => break None,
                    Ok(()) => continue,
                    Err(Refused::Closed(_)) => break None,
                    Err(Refused::Full(job)) => match Box::pin(muted(&r, r.jobs.send(job))).await {
                        Some(Ok(())) if last => break None,
                        Some(Ok(())) => continue,
                        Some(Err(_)) | None => break None,
                    },
                }
            }
            // Not whole yet: keep its reservation while the rest of it is read.
            (_, reserved) => held = reserved,
        }
        if let Err(why) = read_more(&mut r, &mut buf, held.as_ref()).await {
            break why;
        }
    };
    if let Some(why) = reason {
        tracing::warn!(%peer, "closing connection: {why}");
    }
    // The writer answers what was already accepted (after a clean close it still runs it,
    // writing nothing), then closes the connection.
}

/// How long a SASL exchange may take from its first byte: the authenticator's bound, or
/// `connections.max.idle.ms` where shorter.
fn authentication_timeout(limits: &Limits) -> Duration {
    super::authenticator::AUTHENTICATION_TIMEOUT.min(limits.idle)
}

/// Resolves at `deadline`; never without one. The timer is boxed: only a connection that
/// is authenticating has a deadline, and a timer inline would make every connection's
/// reader task, idle ones included, larger by its size.
async fn until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(at) => Box::pin(tokio::time::sleep_until(at.into())).await,
        None => std::future::pending().await,
    }
}

/// Whether `request` (a frame of an authenticated connection) is a SaslHandshake that
/// begins a KIP-368 re-authentication: the session has a lifetime, and the last
/// re-authentication began at least a second ago (else it goes to the pipeline, whose
/// handler answers ILLEGAL_SASL_STATE, as Kafka's does).
fn begins_reauthentication<R>(r: &Reader<R>, request: &[u8]) -> bool {
    let Some(session) = &r.session.sasl else {
        return false;
    };
    let handshake = matches!(peek_header(request), Ok((key, _, _)) if key == kafka_protocol::messages::ApiKey::SaslHandshake as i16);
    handshake
        && session.expires_at.is_some()
        && session
            .reauthenticated_at
            .is_none_or(|at| at.elapsed() >= MIN_REAUTH_INTERVAL)
}

/// Hands one frame to the authenticator: the job that answers it and whether it is the
/// connection's last, or why the connection closes at once (`None`: already logged).
/// Once authenticated, the connection's session is replaced: the requests that follow
/// carry its principal.
fn authenticate<R>(
    r: &mut Reader<R>,
    request: Bytes,
    memory: RequestMemory,
) -> Result<(Job, bool), Option<String>> {
    let Some(auth) = r.auth.as_mut() else {
        return Err(Some("no authenticator".into()));
    };
    let job = |work| Job {
        work,
        expects_response: true,
        cancel_on_disconnect: false,
        memory,
    };
    let peer = r.session.peer;
    match auth.receive(request, &*r.broker) {
        Outcome::Continue(frame) => Ok((job(Work::Ready(frame)), false)),
        Outcome::Authenticated {
            reply,
            principal,
            session,
        } => {
            tracing::debug!(%peer, %principal, mechanism = session.mechanism, "authenticated");
            let mut next = Session::clone(&r.session);
            next.principal = principal;
            next.sasl = Some(session);
            r.session = Arc::new(next);
            r.auth = None;
            Ok((job(Work::Ready(reply)), false))
        }
        Outcome::Failed {
            reply,
            delayed,
            why,
        } => {
            // Kafka's selector logs this at INFO: a wrong password is the client's affair.
            tracing::info!(%peer, listener = %r.session.listener, "Failed authentication: {why}; closing connection");
            let delay = match delayed {
                true => auth.failure_delay(),
                false => std::time::Duration::ZERO,
            };
            if reply.is_none() && delay.is_zero() {
                return Err(None);
            }
            // The answer (if any) waits out the delay, then the connection closes: the
            // reader ends, and the writer closes once it has answered this.
            Ok((job(Work::Delayed(reply, delay)), true))
        }
    }
}

/// Reads what the socket has into `buf`. With no part of a request in `buf` (between
/// requests), the buffer is released and a new one taken only once bytes arrive: the
/// requests already split off keep their own part of the old one until answered.
async fn read_some<R: TransportRead>(stream: &mut R, buf: &mut BytesMut) -> std::io::Result<usize> {
    if buf.is_empty() {
        *buf = BytesMut::new();
        stream.wait_readable().await?;
    }
    if buf.capacity() == buf.len() {
        buf.reserve(READ_CHUNK);
    }
    stream.read_buf(buf).await
}

/// Waits for `until` while the connection reads nothing (it is muted), noting meanwhile
/// whether the client closes the connection. `None` when the listener stops the reader.
/// Callers box it: muting is rare, and its futures inline would make every connection's
/// reader task larger while it idles.
async fn muted<R: TransportRead, F: Future>(r: &Reader<R>, until: F) -> Option<F::Output> {
    let link = r.jobs.link();
    tokio::pin!(until);
    if !link.gone.is_set() {
        tokio::select! {
            done = &mut until => return Some(done),
            _ = r.stream.peer_closed() => {
                tracing::debug!(peer = %r.session.peer, "client left while requests were queued");
                // A close or a reset, not told apart here: a client that filled the
                // connection's queue and left takes its unanswered requests with it.
                link.gone.abandon();
            }
            _ = link.stopped() => return None,
        }
    }
    // Gone: the writer now drops what expects an answer, so the wait is short; what is
    // still unread is read to its end for requests that expect none (acks=0 produce).
    tokio::select! {
        done = until => Some(done),
        _ = link.stopped() => None,
    }
}

/// Whether no request read on this connection is waiting to be answered (the frame being
/// read, `held`, is not one yet).
fn waiting_for_nothing(memory: &ConnectionMemory, held: Option<&RequestMemory>) -> bool {
    memory.connection.used() == held.map_or(0, RequestMemory::connection_bytes)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// Between requests a connection holds no read buffer: once a request is split off,
    /// the wait for the next one drops the buffer and takes one only when bytes arrive.
    #[tokio::test]
    async fn the_read_buffer_is_released_between_requests() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let (mut stream, _writer) = server.into_split();
        client.write_all(&[0, 0, 0, 3, 1, 2, 3]).await.unwrap();
        let mut buf = BytesMut::new();
        while buf.len() < 7 {
            read_some(&mut stream, &mut buf).await.unwrap();
        }
        assert!(buf.capacity() >= READ_CHUNK);
        let request = buf.split_to(7).freeze();
        let waited =
            tokio::time::timeout(Duration::from_millis(200), read_some(&mut stream, &mut buf))
                .await;
        assert!(waited.is_err(), "no second request was sent");
        assert_eq!(buf.capacity(), 0, "an idle connection's read buffer");
        // The request keeps its own bytes until it is answered.
        assert_eq!(&request[..], &[0, 0, 0, 3, 1, 2, 3]);
        client.write_all(&[0, 0, 0, 1, 9]).await.unwrap();
        read_some(&mut stream, &mut buf).await.unwrap();
        assert_eq!(&buf[..], &[0, 0, 0, 1, 9]);
    }
}
