//! Records that stay in their segment file until the connection sends them.
//!
//! The kafka-protocol crate holds a partition's records as `Bytes` and encodes them with
//! one `put_slice`. For a fetch answered from a segment file the handler puts a
//! *placeholder* there: a slice of [`PLACEHOLDER`], a static all-zero region, of the
//! records' length, and hands the [`FileSlice`]s it stands for alongside the response, in
//! encoding order. The encoder sizes the frame from the placeholder's length; the
//! response buffer recognises the placeholder when it is written and records a file chunk
//! instead; the connection's writer then moves those bytes from the page cache to the
//! socket with `sendfile`. The placeholder's bytes are never read: it lives in `.bss`
//! and costs no memory.

use bytes::Bytes;

use crate::log::FileSlice;

/// The longest records field sent from a file; longer ones are read into memory.
/// Clients ask for 1 MiB per partition by default.
pub const MAX_FILE_RECORDS: usize = 16 * 1024 * 1024;

static PLACEHOLDER: [u8; MAX_FILE_RECORDS] = [0; MAX_FILE_RECORDS];

/// The placeholder to put in a response's records field for `slice`, or `None` when the
/// slice is too long to be sent this way.
pub fn placeholder(slice: &FileSlice) -> Option<Bytes> {
    PLACEHOLDER.get(..slice.len()).map(Bytes::from_static)
}

/// Whether `src` is (a prefix of) the placeholder region.
pub fn is_placeholder(src: &[u8]) -> bool {
    std::ptr::eq(src.as_ptr(), PLACEHOLDER.as_ptr())
}

/// A piece of an encoded frame: bytes in memory, or a range of a segment file.
#[derive(Debug)]
pub enum Chunk {
    Bytes(Bytes),
    File(FileSlice),
}

impl Chunk {
    pub fn len(&self) -> usize {
        match self {
            Chunk::Bytes(b) => b.len(),
            Chunk::File(f) => f.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
