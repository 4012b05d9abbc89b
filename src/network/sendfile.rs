//! Segment bytes from the page cache to a socket with `sendfile(2)`: record data of a
//! fetch answer never passes through user space.

use std::io;
use std::os::fd::AsRawFd;

use tokio::io::Interest;
use tokio::net::TcpStream;

use crate::log::FileSlice;

/// Sends all of `slice` on `stream`, waiting for the socket to drain as needed.
/// A segment shorter than the slice (truncated since the slice was planned) is an
/// error: the frame cannot be completed, so the caller closes the connection.
pub async fn send_file(stream: &TcpStream, slice: &FileSlice) -> io::Result<()> {
    let out_of_range = || io::Error::new(io::ErrorKind::InvalidInput, "file slice out of range");
    let mut offset = libc::off_t::try_from(slice.position()).map_err(|_| out_of_range())?;
    let len = libc::off_t::try_from(slice.len()).map_err(|_| out_of_range())?;
    let end = offset.checked_add(len).ok_or_else(out_of_range)?;
    let (socket, file) = (stream.as_raw_fd(), slice.file().as_raw_fd());
    while offset < end {
        stream.writable().await?;
        let sent = stream.try_io(Interest::WRITABLE, || {
            let count = usize::try_from(end - offset).unwrap_or(usize::MAX);
            // SAFETY: both descriptors are open for the call's duration (the stream and
            // the slice's file are borrowed), and `offset` is a valid off_t the kernel
            // advances by the bytes sent.
            let n = unsafe { libc::sendfile(socket, file, &mut offset, count) };
            if n < 0 {
                Err(io::Error::last_os_error())
            } else {
                Ok(n)
            }
        });
        match sent {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "segment file is shorter than the records being sent",
                ))
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
