//! The TLS transport of an SSL listener's connections: the server handshake (bounded in
//! time), the client's principal from its certificate, and the stream split into the
//! halves a connection's reader and writer own.
//!
//! rustls runs unbuffered (`UnbufferedServerConnection`): the bytes either side of it (TLS
//! bytes read and not yet consumed, decrypted bytes not yet read, TLS bytes not yet sent)
//! are this module's buffers, and each is released as soon as it empties. An idle TLS
//! connection therefore holds rustls's session state (keys, a few hundred bytes of
//! protocol state) and no buffer; rustls's own buffered connection keeps a 4 KiB read
//! buffer for the life of every connection.
//!
//! TLS encrypts in user space, so the writer cannot `sendfile`: it copies a fetch's file
//! ranges through a 64 KiB buffer into rustls, which encrypts them into records
//! ([`TransportWrite::supports_sendfile`] is false). Kernel TLS would let the kernel
//! encrypt and `sendfile` again; [`kernel_tls_available`] says whether this kernel offers
//! it, and the broker logs which path its fetches take.
//!
//! Both halves share the TLS state under a std mutex, held only inside one poll (never
//! across an await), over a socket both halves reach without the lock: the reader waits
//! for readable bytes and for the peer's close on the socket itself. Only the reader
//! reads the socket, and it hands rustls everything it reads at once, so outside the lock
//! the TLS bytes held are at most one partial record.

use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use rustls::server::UnbufferedServerConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, UnbufferedStatus};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

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

/// Room made for each socket read: one whole TLS record (16 KiB of payload and its
/// overhead), so a stream of records is read a record or more per call.
const READ_CHUNK: usize = 18 * 1024;

/// The most TLS bytes held unconsumed: a handshake message may span records up to 64 KiB
/// (rustls's bound), a record 16 KiB and its overhead. More is a peer sending what rustls
/// cannot make progress on.
const MAX_INCOMING: usize = 0xffff + READ_CHUNK;

/// The most plaintext encrypted per write call.
const WRITE_CHUNK: usize = 64 * 1024;

/// TLS bytes waiting for the socket past which a write waits for the socket to take them
/// (all of them): a connection writing to a slow client holds at most this and one
/// chunk's records beyond the socket's own buffer.
const OUTGOING_HIGH: usize = 64 * 1024;

/// Whether the kernel offers TLS offload (`tls` in `/proc/sys/net/ipv4/tcp_available_ulp`).
pub fn kernel_tls_available() -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp")
        .is_ok_and(|ulps| ulps.split_whitespace().any(|u| u == "tls"))
}

/// One TLS connection: rustls's state and the bytes either side of it. Every buffer is
/// released once empty, so that an idle connection holds none.
struct Tls {
    conn: UnbufferedServerConnection,
    /// TLS bytes read from the socket that rustls has not consumed yet.
    incoming: BytesMut,
    /// Decrypted bytes the connection has not read yet.
    plaintext: BytesMut,
    /// TLS bytes (records, handshake messages, alerts) for the peer.
    outgoing: Outgoing,
    /// The peer sent its close_notify or closed its side of the socket.
    peer_closed: bool,
    /// Our close_notify is in `outgoing`.
    close_queued: bool,
}

/// What [`Tls::process`] does once rustls has consumed what it can.
#[derive(Clone, Copy)]
enum Want<'a> {
    Nothing,
    /// Encrypt (a prefix of) these bytes, once application data may be sent.
    Encrypt(&'a [u8]),
    /// Encrypt a close_notify alert.
    CloseNotify,
}

/// TLS bytes for the peer: `buf[start..end]`. The buffer is kept initialised and reused
/// while a connection writes (rustls encrypts into a `&mut [u8]`, so a buffer grown for
/// each write would be zero-filled for each write), and released once the writer flushes
/// (or the reader has sent its replies), so an idle connection holds none.
#[derive(Default)]
struct Outgoing {
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Outgoing {
    fn pending(&self) -> usize {
        self.end - self.start
    }

    fn unsent(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Appends what `encode` writes, growing the buffer to the size rustls asks for.
    fn append(
        &mut self,
        estimate: usize,
        mut encode: impl FnMut(&mut [u8]) -> Result<usize, Option<usize>>,
        what: &str,
    ) -> io::Result<usize> {
        let mut room = estimate;
        loop {
            if self.buf.len() < self.end + room {
                self.buf.resize(self.end + room, 0);
            }
            match encode(&mut self.buf[self.end..]) {
                Ok(n) => {
                    self.end += n;
                    return Ok(n);
                }
                Err(Some(required)) if required > room => room = required,
                Err(_) => return Err(io::Error::other(format!("TLS: cannot {what}"))),
            }
        }
    }

    /// `n` more bytes were sent.
    fn sent(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Moves what is unsent to the front, before more is added.
    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }

    /// Drops the buffer if nothing in it is unsent.
    fn release_if_empty(&mut self) {
        if self.pending() == 0 && self.buf.capacity() > 0 {
            *self = Outgoing::default();
        }
    }
}

fn encode_error(e: EncodeError) -> Option<usize> {
    match e {
        EncodeError::InsufficientSize(s) => Some(s.required_size),
        _ => None,
    }
}

fn encrypt_error(e: EncryptError) -> Option<usize> {
    match e {
        EncryptError::InsufficientSize(s) => Some(s.required_size),
        _ => None,
    }
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// Drops `buf`'s allocation if it holds nothing.
fn release_if_empty(buf: &mut BytesMut) {
    if buf.is_empty() && buf.capacity() > 0 {
        *buf = BytesMut::new();
    }
}

impl Tls {
    fn new(tls: &ListenerTls) -> io::Result<Tls> {
        Ok(Tls {
            conn: UnbufferedServerConnection::new(tls.config.clone()).map_err(tls_error)?,
            incoming: BytesMut::new(),
            plaintext: BytesMut::new(),
            outgoing: Outgoing::default(),
            peer_closed: false,
            close_queued: false,
        })
    }

    /// TLS bytes waiting for the socket.
    fn pending(&self) -> usize {
        self.outgoing.pending()
    }

    /// Runs rustls over the TLS bytes read until it needs more from the peer: decrypted
    /// bytes go to `plaintext`, handshake messages and replies to `outgoing`; then does
    /// what `want` asks, if application data may be sent yet, and returns how many of its
    /// bytes were encrypted.
    fn process(&mut self, want: Want<'_>) -> io::Result<usize> {
        loop {
            let UnbufferedStatus { mut discard, state } =
                self.conn.process_tls_records(&mut self.incoming[..]);
            let state = match state {
                Ok(state) => state,
                Err(e) => {
                    self.incoming.advance(discard);
                    return Err(self.failed(e));
                }
            };
            let done = match state {
                ConnectionState::ReadTraffic(mut records) => {
                    while let Some(record) = records.next_record() {
                        let record = record.map_err(tls_error)?;
                        discard += record.discard;
                        self.plaintext.extend_from_slice(record.payload);
                    }
                    None
                }
                ConnectionState::EncodeTlsData(mut data) => {
                    self.outgoing.append(
                        0,
                        |out| data.encode(out).map_err(encode_error),
                        "encode a handshake message",
                    )?;
                    None
                }
                // The encoded bytes are in `outgoing`, sent in order before anything later.
                ConnectionState::TransmitTlsData(sent) => {
                    sent.done();
                    None
                }
                ConnectionState::PeerClosed => {
                    self.peer_closed = true;
                    None
                }
                ConnectionState::Closed => {
                    self.peer_closed = true;
                    Some(0)
                }
                ConnectionState::WriteTraffic(mut traffic) => match want {
                    Want::Nothing => Some(0),
                    Want::Encrypt(data) => {
                        // A record's overhead is at most 40 bytes here (AEAD tag, header,
                        // TLS 1.3's content type): enough room for the first try.
                        let estimate = data.len() + (data.len() / 16_384 + 1) * 64;
                        self.outgoing.append(
                            estimate,
                            |out| traffic.encrypt(data, out).map_err(encrypt_error),
                            "encrypt",
                        )?;
                        Some(data.len())
                    }
                    Want::CloseNotify => {
                        self.outgoing.append(
                            64,
                            |out| traffic.queue_close_notify(out).map_err(encrypt_error),
                            "encode close_notify",
                        )?;
                        self.close_queued = true;
                        Some(0)
                    }
                },
                ConnectionState::BlockedHandshake => match want {
                    Want::Nothing => Some(0),
                    _ => {
                        return Err(io::Error::new(
                            io::ErrorKind::NotConnected,
                            "TLS handshake not finished",
                        ))
                    }
                },
                // Early data is not enabled (rustls's default), so never offered.
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "unexpected TLS state",
                    ))
                }
            };
            self.incoming.advance(discard);
            if let Some(n) = done {
                release_if_empty(&mut self.incoming);
                return Ok(n);
            }
        }
    }

    /// After rustls refused what the peer sent: puts the alert rustls queued for the peer
    /// (if any) in `outgoing`, to be sent before the connection closes.
    fn failed(&mut self, e: rustls::Error) -> io::Error {
        // rustls hands out what it queued before it looks at the bytes again; it is given
        // the bytes it has not consumed, as its handshake deframer points into them.
        // Asked once only: everything queued before the error was sent by `process`, so
        // the one thing queued is the fatal alert, and asking again would make rustls
        // read the refused bytes again and queue a second fatal alert.
        let UnbufferedStatus { discard, state } =
            self.conn.process_tls_records(&mut self.incoming[..]);
        if let Ok(ConnectionState::EncodeTlsData(mut alert)) = state {
            let _ = self.outgoing.append(
                0,
                |out| alert.encode(out).map_err(encode_error),
                "encode an alert",
            );
        }
        self.incoming.advance(discard);
        tls_error(e)
    }

    /// Reads what the socket has into `incoming`; Pending (the task woken once the socket
    /// is readable) while it has nothing. The end of the stream sets `peer_closed`.
    fn poll_fill(&mut self, tcp: &TcpStream, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.incoming.len() >= MAX_INCOMING {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "TLS: more than 64 KiB of a message unconsumed",
            )));
        }
        loop {
            ready!(tcp.poll_read_ready(cx))?;
            self.incoming.reserve(READ_CHUNK);
            match tcp.try_read_buf(&mut self.incoming) {
                Ok(0) => {
                    self.peer_closed = true;
                    return Poll::Ready(Ok(()));
                }
                Ok(n) => {
                    // A short read most likely emptied the socket: read once more, so that
                    // a WouldBlock clears the socket's readiness. Otherwise the next wait
                    // for a request would return at once, and the connection would take
                    // its read buffer for a request that has not come.
                    if self.incoming.capacity() > self.incoming.len() && n > 0 {
                        match tcp.try_read_buf(&mut self.incoming) {
                            Ok(0) => self.peer_closed = true,
                            Ok(_) => {}
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                            Err(e) => return Poll::Ready(Err(e)),
                        }
                    }
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    release_if_empty(&mut self.incoming);
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Writes `outgoing` to the socket; Pending (the task woken once the socket is
    /// writable) until the socket has taken all of it.
    fn poll_send(&mut self, tcp: &TcpStream, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.pending() > 0 {
            ready!(tcp.poll_write_ready(cx))?;
            match tcp.try_write(self.outgoing.unsent()) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(n) => self.outgoing.sent(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Writes what of `outgoing` the socket takes now, without waiting; the rest goes with
    /// the next write or flush.
    fn send_now(&mut self, tcp: &TcpStream) -> io::Result<()> {
        while self.pending() > 0 {
            match tcp.try_write(self.outgoing.unsent()) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.outgoing.sent(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Runs the server handshake to its end (the client's Finished read, the session
    /// tickets sent).
    async fn handshake(&mut self, tcp: &TcpStream) -> io::Result<()> {
        loop {
            if let Err(e) = self.process(Want::Nothing) {
                // The alert, if the socket takes it.
                let _ = self.send_now(tcp);
                return Err(e);
            }
            std::future::poll_fn(|cx| self.poll_send(tcp, cx)).await?;
            if !self.conn.is_handshaking() {
                self.outgoing.release_if_empty();
                return Ok(());
            }
            if self.peer_closed {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed the connection",
                ));
            }
            std::future::poll_fn(|cx| self.poll_fill(tcp, cx)).await?;
        }
    }
}

type Shared = Arc<Mutex<Tls>>;

fn lock(tls: &Shared) -> MutexGuard<'_, Tls> {
    // A poll that panicked leaves the state as it was; the connection then fails on its
    // next read or write rather than every later lock panicking.
    tls.lock().unwrap_or_else(|p| p.into_inner())
}

/// An SSL listener's connection after its handshake.
pub struct TlsTransport {
    tls: Shared,
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
        let mut state = Tls::new(tls).map_err(HandshakeError::Failed)?;
        match tokio::time::timeout(timeout, state.handshake(&tcp)).await {
            Err(_) => return Err(HandshakeError::Timeout(timeout)),
            Ok(Err(e)) => return Err(HandshakeError::Failed(e)),
            Ok(Ok(())) => {}
        }
        let principal = match state.conn.peer_certificates() {
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
            tls: Arc::new(Mutex::new(state)),
            tcp: Arc::new(tcp),
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
                tls: self.tls.clone(),
                tcp: self.tcp.clone(),
            },
            TlsWriter {
                tls: self.tls,
                tcp: self.tcp,
            },
        )
    }
}

pub struct TlsReader {
    tls: Shared,
    tcp: Arc<TcpStream>,
}

pub struct TlsWriter {
    tls: Shared,
    tcp: Arc<TcpStream>,
}

impl AsyncRead for TlsReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut tls = lock(&self.tls);
        loop {
            if !tls.plaintext.is_empty() {
                let n = buf.remaining().min(tls.plaintext.len());
                buf.put_slice(&tls.plaintext[..n]);
                tls.plaintext.advance(n);
                release_if_empty(&mut tls.plaintext);
                return Poll::Ready(Ok(()));
            }
            // Most clients close the socket without a close_notify. Kafka's framing is
            // length-prefixed, so a truncation is seen anyway (a frame cut short); between
            // requests this is the client leaving, read as the end of the stream.
            if tls.peer_closed {
                return Poll::Ready(Ok(()));
            }
            ready!(tls.poll_fill(&self.tcp, cx))?;
            let processed = tls.process(Want::Nothing);
            // What rustls answered (a KeyUpdate, an alert) goes now if the socket takes
            // it, else with the writer's next write.
            if tls.pending() > 0 {
                let sent = tls.send_now(&self.tcp);
                tls.outgoing.release_if_empty();
                sent?;
            }
            processed?;
        }
    }
}

impl TlsReader {
    /// Bytes of buffer the connection's TLS state holds (read, decrypted and unsent
    /// bytes' buffers, by capacity): none once the connection is idle.
    pub fn buffered_capacity(&self) -> usize {
        let tls = lock(&self.tls);
        tls.incoming.capacity() + tls.plaintext.capacity() + tls.outgoing.buf.capacity()
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
        // Decrypted bytes (or the peer's close_notify) may already be here, which no
        // socket readiness will announce.
        {
            let tls = lock(&self.tls);
            if !tls.plaintext.is_empty() || tls.peer_closed {
                return Ok(());
            }
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
        let mut tls = lock(&self.tls);
        if tls.pending() >= OUTGOING_HIGH {
            ready!(tls.poll_send(&self.tcp, cx))?;
        }
        tls.outgoing.compact();
        let n = tls.process(Want::Encrypt(&buf[..buf.len().min(WRITE_CHUNK)]))?;
        // Sending starts at once; what the socket does not take now waits for the next
        // write or the flush.
        tls.send_now(&self.tcp)?;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut tls = lock(&self.tls);
        ready!(tls.poll_send(&self.tcp, cx))?;
        // The end of a burst of answers: the connection may now idle.
        tls.outgoing.release_if_empty();
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut tls = lock(&self.tls);
        if !tls.close_queued {
            tls.outgoing.compact();
            tls.process(Want::CloseNotify)?;
            // A connection rustls considers closed already has nothing to say.
            tls.close_queued = true;
        }
        ready!(tls.poll_send(&self.tcp, cx))?;
        // SAFETY: the descriptor belongs to the TcpStream this Arc keeps open.
        let rc = unsafe { libc::shutdown(self.tcp.as_raw_fd(), libc::SHUT_WR) };
        Poll::Ready(match rc {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        })
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
