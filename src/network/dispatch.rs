//! From a request frame to the work that answers it: checks the api key and version
//! against the routing table, decodes, and starts the handler.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};
use kafka_protocol::protocol::Decodable;

use super::memory::RequestMemory;
use super::pipeline::{self, Request, Run};
use super::session::Session;
use crate::broker::Broker;
use crate::handlers::api_versions;
use crate::log::FileSlice;
use crate::protocol::codec::peek_header;
use crate::protocol::zero_copy::Chunk;
use crate::protocol::{decode_request_within, encode_response, legacy_produce, Frame};
use crate::router::{self, RequestContext};

/// One request read off a connection, waiting for its turn.
pub struct Job {
    pub work: Work,
    /// Whether the client waits for an answer (not for acks=0 produce). Once the client
    /// has reset the connection (or left it muted), a job that expects an answer is
    /// dropped unrun; one that does not still runs. After a clean close every job runs,
    /// as Kafka still handles what it read before the close.
    pub expects_response: bool,
    /// Whether the handler may be dropped midway when the client goes: a Fetch only reads,
    /// and its long poll would otherwise hold the connection for up to a minute.
    pub cancel_on_disconnect: bool,
    /// The request's frame and decoded size, held until it is answered or dropped.
    pub memory: RequestMemory,
}

/// What the connection does with one request.
pub enum Work {
    /// A response that is ready now.
    Ready(Frame),
    /// A handler running through the request pipeline, answered once the requests before
    /// it are (the writer polls it, then has the pipeline count and encode its answer).
    Pipelined(Run, Request),
    /// A response sent after a delay (a failed authentication's, or none: the connection
    /// then closes).
    Delayed(Option<Frame>, Duration),
    /// Nothing to send (Produce v0–2 with acks=0).
    Silent,
}

/// Turns a request frame into a [`Job`], or the reason to close the connection. The
/// decoded request may hold at most `max_decoded_bytes` beyond its frame; what it holds
/// is added to `memory`.
pub fn dispatch(
    frame: Bytes,
    broker: &Arc<Broker>,
    session: &Arc<Session>,
    mut memory: RequestMemory,
    max_decoded_bytes: usize,
) -> Result<Job, String> {
    let received = Instant::now();
    let request_bytes = frame.len();
    let (key, version, correlation_id) = peek_header(&frame).map_err(|e| e.to_string())?;
    let api_key = ApiKey::try_from(key).map_err(|_| format!("unknown api key {key}"))?;
    let job = |work, expects_response, memory| Job {
        work,
        expects_response,
        cancel_on_disconnect: api_key == ApiKey::Fetch,
        memory,
    };
    let mode = broker.mode();
    let lookup = |k, v| router::lookup_in(k, v, mode);
    if api_key == ApiKey::ApiVersions && lookup(api_key, version).is_none() && version >= 0 {
        // A client newer than us: answer v0 with UNSUPPORTED_VERSION and our ranges, so it
        // can retry with a version we speak (KIP-511).
        let body = ResponseKind::ApiVersions(api_versions::response(
            ResponseError::UnsupportedVersion.code(),
            mode,
        ));
        let frame = encode(api_key, 0, correlation_id, &body, Vec::new())?;
        return Ok(job(Work::Ready(frame), true, memory));
    }
    if api_key == ApiKey::Produce && (0..3).contains(&version) {
        let work = legacy(frame, version, correlation_id)?;
        let silent = matches!(work, Work::Silent);
        return Ok(job(work, !silent, memory));
    }
    if lookup(api_key, version).is_none() {
        return Err(format!("{api_key:?} v{version} is not supported"));
    }
    let decoded = decode_request_within(frame, max_decoded_bytes).map_err(|e| e.to_string())?;
    memory.grow(decoded.decoded_bytes);
    let body = decoded.body;
    let expects_response = !matches!(&body, RequestKind::Produce(p) if p.acks == 0);
    let route = lookup(api_key, version).ok_or("route vanished")?;
    let ctx = RequestContext {
        api_key,
        api_version: version,
        correlation_id,
        client_id: decoded.header.client_id,
        peer: session.peer,
        session: session.clone(),
    };
    pipeline::admit(route, &ctx)?;
    let request = Request {
        api_key,
        api_version: version,
        correlation_id,
        fetch_side: pipeline::fetch_side(&body),
        received,
    };
    let run = pipeline::start(route, broker, ctx, body, received, request_bytes)?;
    Ok(job(Work::Pipelined(run, request), expects_response, memory))
}

fn encode(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
    file_slices: Vec<FileSlice>,
) -> Result<Frame, String> {
    encode_response(api_key, version, correlation_id, body, file_slices)
        .map_err(|e| format!("cannot encode {api_key:?} v{version} response: {e}"))
}

/// Produce v0–2: every partition is answered UNSUPPORTED_VERSION.
fn legacy(mut frame: Bytes, version: i16, correlation_id: i32) -> Result<Work, String> {
    RequestHeader::decode(&mut frame, 1)
        .map_err(|e| format!("malformed Produce v{version} header: {e}"))?;
    let req = legacy_produce::decode(frame)
        .ok_or_else(|| format!("malformed Produce v{version} body"))?;
    if req.acks == 0 {
        return Ok(Work::Silent);
    }
    let body = legacy_produce::encode_unsupported(&req, version);
    let mut out = bytes::BytesMut::with_capacity(8 + body.len());
    out.extend_from_slice(&((4 + body.len()) as i32).to_be_bytes());
    out.extend_from_slice(&correlation_id.to_be_bytes());
    out.extend_from_slice(&body);
    Ok(Work::Ready(vec![Chunk::Bytes(out.freeze())]))
}
