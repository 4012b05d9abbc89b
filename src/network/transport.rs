//! The byte stream under a connection.
//!
//! Plain TCP here; TLS in [`super::tls`]: its bytes are encrypted in user space, so it
//! cannot hand a segment range to the kernel with `sendfile`; it says so with
//! [`TransportWrite::supports_sendfile`], and the connection's writer then copies file
//! ranges through a small buffer instead. A transport also tells the connection when the
//! peer has gone while requests are still unread (see [`TransportRead::peer_closed`]).

use std::future::Future;
use std::io;
use std::os::fd::AsFd;

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

use super::sendfile::send_file;
use super::session::SecurityProtocol;
use crate::log::FileSlice;

/// A connection's stream, split into the halves its reader and writer own.
pub trait Transport: Send + 'static {
    type Reader: TransportRead;
    type Writer: TransportWrite;

    fn security_protocol(&self) -> SecurityProtocol;

    fn into_split(self) -> (Self::Reader, Self::Writer);
}

pub trait TransportRead: AsyncRead + Unpin + Send + Sync + 'static {
    /// Resolves once the peer has closed or reset the connection, even while requests it
    /// sent before are still unread in the socket's buffer (the connection stops reading
    /// while it has too much in flight, and must still learn that its client left).
    fn peer_closed(&self) -> impl Future<Output = ()> + Send + '_;

    /// Resolves once a read would find bytes (or the end of the stream), so a connection
    /// can wait for its next request without holding a read buffer.
    fn wait_readable(&self) -> impl Future<Output = io::Result<()>> + Send + '_;
}

pub trait TransportWrite: AsyncWrite + Unpin + Send + 'static {
    /// Whether file bytes may go to the socket unchanged, with [`Self::send_file`].
    fn supports_sendfile(&self) -> bool;

    /// Sends `slice` from the page cache to the peer. Only called when
    /// [`Self::supports_sendfile`] is true, after buffered bytes were flushed.
    fn send_file<'a>(
        &'a self,
        slice: &'a FileSlice,
    ) -> impl Future<Output = io::Result<()>> + Send + 'a;
}

/// A TCP connection without TLS.
pub struct PlainTransport(pub TcpStream);

impl Transport for PlainTransport {
    type Reader = OwnedReadHalf;
    type Writer = OwnedWriteHalf;

    fn security_protocol(&self) -> SecurityProtocol {
        SecurityProtocol::Plaintext
    }

    fn into_split(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        self.0.into_split()
    }
}

impl TransportRead for OwnedReadHalf {
    async fn peer_closed(&self) {
        match watch_for_close(self.as_ref()).await {
            Ok(()) => {}
            Err(e) => {
                // Without a watch the connection learns of the close when it reads again.
                tracing::debug!(error = %e, "cannot watch the socket for a close");
                std::future::pending::<()>().await
            }
        }
    }

    async fn wait_readable(&self) -> io::Result<()> {
        OwnedReadHalf::readable(self).await
    }
}

/// Waits for the peer's FIN or RST on a second registration of the socket (a duplicate
/// descriptor), so that clearing its readiness, which unread bytes keep setting, never
/// hides those bytes from the reader's own registration.
pub(super) async fn watch_for_close(stream: &TcpStream) -> io::Result<()> {
    let fd = stream.as_fd().try_clone_to_owned()?;
    // SAFETY: the AsyncFd owns `fd`, an open descriptor that stays open and names the same
    // socket until the AsyncFd is dropped; `OwnedFd::as_raw_fd` always returns it.
    let watch = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }?;
    loop {
        let mut ready = watch.readable().await?;
        // EPOLLRDHUP (FIN) or EPOLLHUP (RST), whatever is still unread.
        if ready.ready().is_read_closed() {
            return Ok(());
        }
        // Only new bytes: wait for the next event on this registration.
        ready.clear_ready();
    }
}

impl TransportWrite for OwnedWriteHalf {
    fn supports_sendfile(&self) -> bool {
        true
    }

    fn send_file<'a>(
        &'a self,
        slice: &'a FileSlice,
    ) -> impl Future<Output = io::Result<()>> + Send + 'a {
        send_file(self.as_ref(), slice)
    }
}
