//! One TCP connection to a broker (TLS over it, and SASL authentication before the first
//! request, when the config says so), pipelined:
//! requests are written as they come, each waits for the response with its correlation
//! id, for at most the request timeout.
//!
//! As Kafka's NetworkClient does, a request that times out closes the connection (what
//! the broker did with it is unknown), and so does a response with a correlation id no
//! request is waiting for; every request still waiting then fails with `Disconnected`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::protocol::Request;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Semaphore};

use super::codec;
use super::{ClientConfig, ClientError};

/// Requests waiting for their response, by correlation id; `closed` once the connection
/// is gone (why), after which nothing waits.
#[derive(Default)]
struct InFlight {
    waiting: HashMap<i32, oneshot::Sender<Bytes>>,
    closed: Option<String>,
}

impl InFlight {
    fn close(&mut self, why: String) {
        if self.closed.is_none() {
            self.closed = Some(why);
        }
        // Dropping the senders wakes every waiter with Disconnected.
        self.waiting.clear();
    }
}

pub struct Connection {
    addr: SocketAddr,
    client_id: Option<String>,
    request_timeout: Duration,
    next_correlation_id: AtomicI32,
    /// Bounds the requests in flight (`ClientConfig::max_in_flight`).
    permits: Semaphore,
    in_flight: Arc<parking_lot::Mutex<InFlight>>,
    /// Bytes read from the broker so far (after TLS): a request that times out says how
    /// many arrived after it was sent.
    received: Arc<AtomicU64>,
    /// Whole frames are written under this lock, so concurrent requests never interleave.
    writer: tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>,
    reader: tokio::task::JoinHandle<()>,
}

impl Connection {
    pub async fn connect(
        addr: SocketAddr,
        config: &ClientConfig,
    ) -> Result<Connection, ClientError> {
        let stream = match tokio::time::timeout(config.connect_timeout, TcpStream::connect(addr))
            .await
        {
            Ok(Ok(stream)) => stream,
            Ok(Err(source)) => return Err(ClientError::Connect { addr, source }),
            Err(_) => {
                let source = std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out");
                return Err(ClientError::Connect { addr, source });
            }
        };
        let _ = stream.set_nodelay(true);
        let (mut read_half, mut write_half) = split(stream, addr, config).await?;
        if let Some(credentials) = &config.sasl {
            super::sasl::authenticate(
                &mut read_half,
                &mut write_half,
                credentials,
                config.client_id.as_deref(),
                config.connect_timeout,
            )
            .await
            .map_err(|why| ClientError::Connect {
                addr,
                source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, why),
            })?;
        }
        let in_flight = Arc::new(parking_lot::Mutex::new(InFlight::default()));
        let reader_in_flight = in_flight.clone();
        let max_bytes = config.max_response_bytes;
        let received = Arc::new(AtomicU64::new(0));
        let mut read_half = Counted {
            inner: read_half,
            count: received.clone(),
        };
        let reader = tokio::spawn(async move {
            let _gone = ReaderGone(reader_in_flight.clone());
            let why = loop {
                let frame = match codec::read_frame(&mut read_half, max_bytes).await {
                    Ok(Some(frame)) => frame,
                    Ok(None) => break "closed by the broker".to_string(),
                    Err(e) => break format!("read: {e}"),
                };
                let Some(id) = codec::correlation_id(&frame) else {
                    break "response shorter than its header".to_string();
                };
                let waiter = reader_in_flight.lock().waiting.remove(&id);
                match waiter {
                    // The waiter may have given up; then the bytes are dropped.
                    Some(tx) => drop(tx.send(frame)),
                    None => break format!("response with unexpected correlation id {id}"),
                }
            };
            tracing::debug!(%addr, why, "outbound connection closed");
            reader_in_flight.lock().close(why);
        });
        Ok(Connection {
            addr,
            client_id: config.client_id.clone(),
            request_timeout: config.request_timeout,
            next_correlation_id: AtomicI32::new(0),
            permits: Semaphore::new(config.max_in_flight),
            in_flight,
            received,
            writer: tokio::sync::Mutex::new(write_half),
            reader,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Why the connection is closed, or None while it is usable.
    pub fn closed(&self) -> Option<String> {
        self.in_flight.lock().closed.clone()
    }

    /// Sends `req` at `version` and waits for its response.
    pub async fn send<R: Request>(
        &self,
        req: &R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| ClientError::Disconnected("connection dropped".into()))?;
        let (id, frame) = self.frame(req, version)?;
        let (tx, rx) = oneshot::channel();
        {
            let mut in_flight = self.in_flight.lock();
            if let Some(why) = &in_flight.closed {
                return Err(ClientError::Disconnected(why.clone()));
            }
            // Registered before the write: the response may come back at once.
            in_flight.waiting.insert(id, tx);
        }
        self.write(&frame).await?;
        let received_before = self.received.load(Ordering::Relaxed);
        match tokio::time::timeout(self.request_timeout, rx).await {
            Ok(Ok(response)) => {
                codec::decode_response::<R>(response, version).map(|(_, body)| body)
            }
            Ok(Err(_)) => Err(ClientError::Disconnected(
                self.closed().unwrap_or_else(|| "closed".into()),
            )),
            Err(_) => {
                let arrived = self.received.load(Ordering::Relaxed) - received_before;
                let detail = format!(
                    "request {id} (api {} v{version}, {} bytes) written and flushed; \
                     {arrived} bytes arrived on the connection since",
                    R::KEY,
                    frame.len()
                );
                self.close(format!(
                    "timed out after {:?}: {detail}",
                    self.request_timeout
                ))
                .await;
                Err(ClientError::Timeout {
                    after: self.request_timeout,
                    detail,
                })
            }
        }
    }

    /// Sends a request the broker does not answer (Produce with acks=0).
    pub async fn send_without_response<R: Request>(
        &self,
        req: &R,
        version: i16,
    ) -> Result<(), ClientError> {
        if let Some(why) = self.closed() {
            return Err(ClientError::Disconnected(why));
        }
        let (_, frame) = self.frame(req, version)?;
        self.write(&frame).await
    }

    fn frame<R: Request>(
        &self,
        req: &R,
        version: i16,
    ) -> Result<(i32, bytes::BytesMut), ClientError> {
        // Correlation ids wrap as Kafka's do; ids in flight at once are far fewer than 2^31.
        let id = self
            .next_correlation_id
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(1);
        let frame = codec::encode_request(req, version, id, self.client_id.as_deref())?;
        Ok((id, frame))
    }

    async fn write(&self, frame: &[u8]) -> Result<(), ClientError> {
        let mut writer = self.writer.lock().await;
        if let Err(e) = codec::write_frame(&mut *writer, frame).await {
            drop(writer);
            let why = format!("write: {e}");
            self.close(why.clone()).await;
            return Err(ClientError::Disconnected(why));
        }
        Ok(())
    }

    async fn close(&self, why: String) {
        self.in_flight.lock().close(why);
        self.reader.abort();
        let mut writer = self.writer.lock().await;
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut *writer).await;
    }
}

/// Closes the connection's requests when its reader task ends, however it ends (a panic
/// in the TLS stream included): no request then waits out its timeout for a reader that
/// is gone. The reason a reader gave when it stopped on its own is kept.
struct ReaderGone(Arc<parking_lot::Mutex<InFlight>>);

impl Drop for ReaderGone {
    fn drop(&mut self) {
        self.0
            .lock()
            .close("the connection's reader stopped".into());
    }
}

/// A read half that counts the bytes it yields.
struct Counted<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: AsyncRead + Unpin> AsyncRead for Counted<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = (buf.filled().len() - before) as u64;
        self.count.fetch_add(read, Ordering::Relaxed);
        polled
    }
}

type Halves = (
    Box<dyn AsyncRead + Send + Unpin>,
    Box<dyn AsyncWrite + Send + Unpin>,
);

/// The stream's halves: the TCP socket's, or after a TLS handshake (within the connect
/// timeout) toward `config.server_name` (else the address), the TLS stream's.
async fn split(
    stream: TcpStream,
    addr: SocketAddr,
    config: &ClientConfig,
) -> Result<Halves, ClientError> {
    let Some(tls) = &config.tls else {
        let (r, w) = stream.into_split();
        return Ok((Box::new(r), Box::new(w)));
    };
    let host = config
        .server_name
        .clone()
        .unwrap_or_else(|| addr.ip().to_string());
    let source =
        match tokio::time::timeout(config.connect_timeout, tls.connect(&host, stream)).await {
            Ok(Ok(stream)) => {
                let (r, w) = tokio::io::split(stream);
                return Ok((Box::new(r), Box::new(w)));
            }
            Ok(Err(e)) => std::io::Error::new(e.kind(), format!("TLS handshake with {host}: {e}")),
            Err(_) => std::io::Error::new(std::io::ErrorKind::TimedOut, "TLS handshake timed out"),
        };
    Err(ClientError::Connect { addr, source })
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}
