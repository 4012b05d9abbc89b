//! One client connection: frames in, responses out in request order.
//!
//! The reader decodes requests ahead (pipelining) while the writer runs their handlers
//! one at a time, in arrival order, and writes each response. One at a time is Kafka's
//! contract: an idempotent producer pipelines up to five produce requests per connection
//! and relies on them being appended in the order sent; clients also match responses to
//! requests by position. Requests on different connections run in parallel. The queue
//! between reader and writer bounds the requests in flight.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use super::dispatch::{dispatch, Job};
use super::sendfile::send_file;
use crate::broker::Broker;
use crate::protocol::frame::{self, Check};
use crate::protocol::zero_copy::Chunk;

/// Limits applied to every connection, from the broker config.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// `socket.request.max.bytes`: larger frames close the connection.
    pub max_frame_bytes: usize,
    /// Requests read but not yet answered, per connection (`queued.max.requests`).
    pub max_in_flight: usize,
    /// `connections.max.idle.ms`.
    pub idle: Duration,
}

/// Bytes read from the socket per read call; the buffer grows with what arrives, never
/// by what a frame header claims.
const READ_CHUNK: usize = 64 * 1024;

pub async fn serve(
    stream: TcpStream,
    peer: SocketAddr,
    broker: Arc<Broker>,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
    }
    let (mut reader, writer) = stream.into_split();
    let (queue, pending) = mpsc::channel::<Job>(limits.max_in_flight);
    let writer = tokio::spawn(write_responses(writer, pending, peer));
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let reason = loop {
        let size = match frame::check(&buf, limits.max_frame_bytes) {
            Ok(Check::Complete(size)) => size,
            Ok(Check::Incomplete(_)) => {
                buf.reserve(READ_CHUNK);
                let read = tokio::select! {
                    r = tokio::time::timeout(limits.idle, reader.read_buf(&mut buf)) => r,
                    _ = shutdown.changed() => break None,
                };
                match read {
                    Ok(Ok(0)) if buf.is_empty() => break None,
                    Ok(Ok(0)) => break Some("connection closed mid-frame".to_string()),
                    Ok(Ok(_)) => continue,
                    Ok(Err(e)) => break Some(format!("read failed: {e}")),
                    // Idle only when nothing is waiting to be answered (a long poll may be).
                    Err(_) if queue.capacity() == limits.max_in_flight => {
                        break Some(format!("idle for more than {} ms", limits.idle.as_millis()))
                    }
                    Err(_) => continue,
                }
            }
            Err(e) => break Some(e.to_string()),
        };
        let request: Bytes = frame::split(&mut buf, size).freeze();
        match dispatch(request, &broker, peer) {
            Ok(job) => {
                if queue.send(job).await.is_err() {
                    break None;
                }
            }
            Err(why) => break Some(why),
        }
    };
    if let Some(why) = reason {
        tracing::warn!(%peer, "closing connection: {why}");
    }
    // Let the writer answer what was already accepted, then close.
    drop(queue);
    if let Err(e) = writer.await {
        tracing::error!(%peer, error = %e, "request handler failed; connection closed");
    }
}

async fn write_responses(
    writer: OwnedWriteHalf,
    mut pending: mpsc::Receiver<Job>,
    peer: SocketAddr,
) {
    let mut out = BufWriter::new(writer);
    while let Some(job) = pending.recv().await {
        let bytes = match job {
            Job::Ready(b) => Some(b),
            Job::Silent => None,
            Job::Handle(handler) => match handler.await {
                Ok(b) => b,
                Err(why) => {
                    tracing::error!(%peer, "{why}; closing connection");
                    break;
                }
            },
        };
        // Large chunks (fetched records) bypass the buffer and go straight to the socket;
        // records still in a segment file go from the page cache with sendfile.
        for chunk in bytes.iter().flatten() {
            let written = match chunk {
                Chunk::Bytes(b) => out.write_all(b).await,
                Chunk::File(slice) => match out.flush().await {
                    Ok(()) => send_file(out.get_ref().as_ref(), slice).await,
                    Err(e) => Err(e),
                },
            };
            match written {
                Ok(()) => {}
                // A segment truncated under a planned fetch answer: worth a line.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                    tracing::warn!(%peer, error = %e, "closing connection");
                    return;
                }
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "write failed");
                    return;
                }
            }
        }
        // Flush once the queue is drained, so pipelined responses share a syscall.
        if pending.is_empty() {
            if let Err(e) = out.flush().await {
                tracing::debug!(%peer, error = %e, "flush failed");
                return;
            }
        }
    }
    let _ = out.flush().await;
    let _ = out.into_inner().shutdown().await;
}
