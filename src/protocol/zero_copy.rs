//! Records that stay in their segment file until the connection sends them.
//!
//! The kafka-protocol crate holds a partition's records as `Bytes` and encodes them with
//! one `put_slice`. For a fetch answered from a segment file the handler puts a
//! *placeholder* there: a slice of an all-zero region, of the records' length, and hands the [`FileSlice`]s it stands for alongside the response, in
//! encoding order. The encoder sizes the frame from the placeholder's length; the
//! response buffer recognises the placeholder when it is written and records a file chunk
//! instead; the connection's writer then moves those bytes from the page cache to the
//! socket with `sendfile`. The placeholder's bytes are never read: the region is a
//! read-only anonymous mapping, reserved address space that costs no memory.

use std::sync::OnceLock;

use bytes::Bytes;

use crate::log::FileSlice;

/// The longest records field a response can carry (its length is an i32), and so the
/// size of the placeholder region.
const PLACEHOLDER_BYTES: usize = i32::MAX as usize;

/// The placeholder region once mapped; `None` inside if the mapping failed.
static REGION: OnceLock<Option<&'static [u8]>> = OnceLock::new();

/// The placeholder region, mapped on first use.
fn region() -> Option<&'static [u8]> {
    *REGION.get_or_init(|| {
        // SAFETY: a fresh private anonymous mapping, touching no existing memory; its
        // arguments are valid for mmap.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PLACEHOLDER_BYTES,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            tracing::warn!(error = %e, "cannot map the fetch placeholder region; fetched records will be copied");
            return None;
        }
        // SAFETY: the mapping is PLACEHOLDER_BYTES long, readable (zero pages), never
        // written (PROT_READ) and never unmapped, so it is a valid `&'static [u8]`.
        Some(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), PLACEHOLDER_BYTES) })
    })
}

/// The placeholder to put in a response's records field for `slice`; `None` only if the
/// placeholder region could not be mapped.
pub fn placeholder(slice: &FileSlice) -> Option<Bytes> {
    region()?.get(..slice.len()).map(Bytes::from_static)
}

/// Whether `src` is (a prefix of) the placeholder region.
pub fn is_placeholder(src: &[u8]) -> bool {
    // Not `region()`: encoding a response that holds no placeholder maps nothing.
    matches!(REGION.get(), Some(Some(r)) if std::ptr::eq(src.as_ptr(), r.as_ptr()))
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
