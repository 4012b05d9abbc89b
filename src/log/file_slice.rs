//! A range of a segment file, handed to the network layer instead of its bytes.
//!
//! A fetch answer names where its records lie (`FileSlice`) and the connection's writer
//! moves them from the page cache to the socket with `sendfile`, so record bytes are never
//! copied through user space on the way out. Everything below the segment size observed
//! when the slice was planned is immutable (segments only grow at the end), so the slice
//! stays valid while the response waits in the connection's queue; a segment truncated
//! meanwhile shows up as a short transfer, which the writer treats as a failed write.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use bytes::Bytes;

use super::LogError;

#[derive(Clone)]
pub struct FileSlice {
    file: Arc<File>,
    position: u64,
    len: usize,
}

impl FileSlice {
    pub fn new(file: Arc<File>, position: u64, len: usize) -> Self {
        FileSlice {
            file,
            position,
            len,
        }
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn position(&self) -> u64 {
        self.position
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The part of this slice `len` bytes long from `at` within it (cut at its end).
    pub fn sub(&self, at: usize, len: usize) -> FileSlice {
        let at = at.min(self.len);
        FileSlice {
            file: self.file.clone(),
            position: self.position + at as u64,
            len: len.min(self.len - at),
        }
    }

    /// The slice's bytes, read into memory (one copy). A short file (truncated under us)
    /// gives fewer bytes.
    pub fn read(&self) -> Result<Bytes, LogError> {
        // Read into uninitialised capacity: zero-filling a fresh buffer of up to a
        // partition's fetch size on every read cost as much CPU as the read itself.
        let len = self.len;
        let mut buf: Vec<u8> = Vec::with_capacity(len);
        while buf.len() < len {
            let filled = buf.len();
            let offset = libc::off_t::try_from(self.position + filled as u64)
                .map_err(|_| LogError::InvalidRecord("file position out of range".into()))?;
            // SAFETY: the destination is the vector's spare capacity, at least
            // `len - filled` bytes, and at most that many are written there; `file` is an
            // open descriptor for the call's duration.
            let n = unsafe {
                libc::pread(
                    self.file.as_raw_fd(),
                    buf.as_mut_ptr().add(filled).cast::<libc::c_void>(),
                    len - filled,
                    offset,
                )
            };
            match n {
                0 => break,
                // SAFETY: pread initialised exactly `n` more bytes.
                n if n > 0 => unsafe { buf.set_len(filled + n as usize) },
                _ => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(e.into());
                    }
                }
            }
        }
        Ok(Bytes::from(buf))
    }
}

impl std::fmt::Debug for FileSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FileSlice({}+{})", self.position, self.len)
    }
}
