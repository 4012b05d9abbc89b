//! The TLS transport of an SSL listener's connections: the server handshake (bounded in
//! time), the client's principal from its certificate, and the stream split into the
//! halves a connection's reader and writer own.
//!
//! TLS encrypts in user space, so the writer cannot `sendfile`: it copies a fetch's file
//! ranges through a 64 KiB buffer into rustls, which encrypts them into records
//! ([`TransportWrite::supports_sendfile`] is false). Kernel TLS would let the kernel
//! encrypt and `sendfile` again; [`kernel_tls_available`] says whether this kernel offers
//! it, and the broker logs which path its fetches take.
//!
//! Both halves share the rustls stream under a std mutex, held only inside one poll
//! (never across an await), over a socket both halves reach without the lock: the reader
//! waits for readable bytes and for the peer's close on the socket itself, so an idle TLS
//! connection holds no read buffer, as a plain one holds none.

use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use super::session::{Principal, SecurityProtocol};
use super::transport::{watch_for_close, Transport, TransportRead, TransportWrite};
use crate::log::FileSlice;
use crate::tls::principal::subject_dn;
use crate::tls::ListenerTls;

/// The longest a TLS handshake may take before the connection is closed: a client that
/// connects and stalls holds a connection slot (and rustls's handshake state, at most one
/// TLS message of 16 KiB buffered plus a few KiB of state) only this long.
/// `connections.max.idle.ms` bounds it further where it is shorter.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether the kernel offers TLS offload (`tls` in `/proc/sys/net/ipv4/tcp_available_ulp`).
pub fn kernel_tls_available() -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp")
        .is_ok_and(|ulps| ulps.split_whitespace().any(|u| u == "tls"))
}

/// A TCP socket that the TLS stream reads and writes through `&self`, so that the
/// connection's halves can also wait on it without taking the TLS lock.
struct SharedTcp(Arc<TcpStream>);

impl AsyncRead for SharedTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            ready!(self.0.poll_read_ready(cx))?;
            match self.0.try_read(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for SharedTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            ready!(self.0.poll_write_ready(cx))?;
            match self.0.try_write(buf) {
                Ok(n) => return Poll::Ready(Ok(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // SAFETY: the descriptor belongs to the TcpStream this Arc keeps open.
        let rc = unsafe { libc::shutdown(self.0.as_raw_fd(), libc::SHUT_WR) };
        Poll::Ready(match rc {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        })
    }
}

type Shared = Arc<Mutex<TlsStream<SharedTcp>>>;

fn lock(stream: &Shared) -> MutexGuard<'_, TlsStream<SharedTcp>> {
    // A poll that panicked leaves the stream as rustls left it; the connection then fails
    // on its next read or write rather than every later lock panicking.
    stream.lock().unwrap_or_else(|p| p.into_inner())
}

/// An SSL listener's connection after its handshake.
pub struct TlsTransport {
    stream: Shared,
    tcp: Arc<TcpStream>,
}

impl std::fmt::Debug for TlsTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsTransport")
    }
}

/// Why a TLS connection was closed before it became a Kafka connection.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("TLS handshake not finished within {0:?}")]
    Timeout(Duration),
    #[error("TLS handshake failed: {0}")]
    Failed(io::Error),
    #[error("no principal for the client certificate: {0}")]
    Principal(String),
}

impl TlsTransport {
    /// Runs the server handshake on `tcp` within `timeout` and maps the client's
    /// certificate (if any) to its principal.
    pub async fn accept(
        tls: &ListenerTls,
        tcp: TcpStream,
        timeout: Duration,
    ) -> Result<(TlsTransport, Principal), HandshakeError> {
        let tcp = Arc::new(tcp);
        let handshake = tls.acceptor.accept(SharedTcp(tcp.clone()));
        let stream = match tokio::time::timeout(timeout, handshake).await {
            Err(_) => return Err(HandshakeError::Timeout(timeout)),
            Ok(Err(e)) => return Err(HandshakeError::Failed(e)),
            Ok(Ok(stream)) => stream,
        };
        let principal = match stream.get_ref().1.peer_certificates() {
            Some([leaf, ..]) => {
                let dn = subject_dn(leaf).map_err(HandshakeError::Principal)?;
                let name = tls.mapper.name_of(&dn).map_err(HandshakeError::Principal)?;
                Principal {
                    principal_type: "User".into(),
                    name: name.into(),
                }
            }
            _ => Principal::anonymous(),
        };
        let transport = TlsTransport {
            stream: Arc::new(Mutex::new(stream)),
            tcp,
        };
        Ok((transport, principal))
    }
}

impl Transport for TlsTransport {
    type Reader = TlsReader;
    type Writer = TlsWriter;

    fn security_protocol(&self) -> SecurityProtocol {
        SecurityProtocol::Ssl
    }

    fn into_split(self) -> (TlsReader, TlsWriter) {
        (
            TlsReader {
                stream: self.stream.clone(),
                tcp: self.tcp,
            },
            TlsWriter {
                stream: self.stream,
            },
        )
    }
}

pub struct TlsReader {
    stream: Shared,
    tcp: Arc<TcpStream>,
}

pub struct TlsWriter {
    stream: Shared,
}

impl AsyncRead for TlsReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut stream = lock(&self.stream);
        match Pin::new(&mut *stream).poll_read(cx, buf) {
            // Most clients close the socket without a close_notify. Kafka's framing is
            // length-prefixed, so a truncation is seen anyway (a frame cut short); between
            // requests this is the client leaving, read as the end of the stream.
            Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => Poll::Ready(Ok(())),
            other => other,
        }
    }
}

impl TransportRead for TlsReader {
    async fn peer_closed(&self) {
        if let Err(e) = watch_for_close(&self.tcp).await {
            tracing::debug!(error = %e, "cannot watch the socket for a close");
            std::future::pending::<()>().await
        }
    }

    async fn wait_readable(&self) -> io::Result<()> {
        // rustls may already hold decrypted bytes (or the peer's close_notify) that no
        // socket readiness will announce.
        if !lock(&self.stream).get_ref().1.wants_read() {
            return Ok(());
        }
        self.tcp.readable().await
    }
}

impl AsyncWrite for TlsWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut stream = lock(&self.stream);
        Pin::new(&mut *stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut stream = lock(&self.stream);
        Pin::new(&mut *stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut stream = lock(&self.stream);
        Pin::new(&mut *stream).poll_shutdown(cx)
    }
}

impl TransportWrite for TlsWriter {
    fn supports_sendfile(&self) -> bool {
        false
    }

    async fn send_file(&self, _: &FileSlice) -> io::Result<()> {
        // The writer copies file ranges for transports without sendfile; reaching this is
        // a bug in the writer, answered as an error rather than a panic.
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "sendfile on a TLS connection",
        ))
    }
}
