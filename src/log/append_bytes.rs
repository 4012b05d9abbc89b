//! The bytes of one append as they go to the segment file.
//!
//! A produce request's records arrive as a slice of the request frame, and that frame is
//! still shared (with the decoded request's other fields, and with the connection's read
//! buffer holding the next pipelined requests), so the records cannot be patched in place
//! without first copying all of them. The leader only ever rewrites a batch's 61-byte
//! header (base offset, leader epoch, and when it is wrong or stamped, max timestamp and
//! CRC), so that header is patched in a copy of its own and the records behind it are
//! written to the file straight from the request: one `pwritev` of two buffers.

use bytes::Bytes;

use super::batch::HEADER_SIZE;

pub struct AppendBytes {
    /// A patched copy of the first batch's header; `head_len` is 0 when the append's bytes
    /// are written as they are (a follower's batches, whole).
    head: [u8; HEADER_SIZE],
    head_len: usize,
    /// Everything after the head, shared with whoever else holds it.
    tail: Bytes,
}

impl AppendBytes {
    /// Bytes written exactly as given.
    pub fn whole(bytes: Bytes) -> Self {
        AppendBytes {
            head: [0; HEADER_SIZE],
            head_len: 0,
            tail: bytes,
        }
    }

    /// One batch whose header will be patched: `batch` is at least a header long (the
    /// caller parsed it), else it is kept whole and `header_mut` is empty.
    pub fn with_header(batch: Bytes) -> Self {
        if batch.len() < HEADER_SIZE {
            return AppendBytes::whole(batch);
        }
        let mut head = [0; HEADER_SIZE];
        head.copy_from_slice(&batch[..HEADER_SIZE]);
        AppendBytes {
            head,
            head_len: HEADER_SIZE,
            tail: batch.slice(HEADER_SIZE..),
        }
    }

    /// The batch header to patch, and the records after it (which the CRC also covers).
    pub fn header_mut(&mut self) -> (&mut [u8], &[u8]) {
        (&mut self.head[..self.head_len], &self.tail)
    }

    pub fn header(&self) -> &[u8] {
        &self.head[..self.head_len]
    }

    pub fn len(&self) -> usize {
        self.head_len + self.tail.len()
    }

    /// The bytes in file order.
    pub fn parts(&self) -> [&[u8]; 2] {
        [&self.head[..self.head_len], &self.tail]
    }

    /// The records after the header, still the buffer they arrived in.
    #[cfg(test)]
    pub fn tail(&self) -> &Bytes {
        &self.tail
    }

    #[cfg(test)]
    pub fn to_vec(&self) -> Vec<u8> {
        self.parts().concat()
    }
}

impl std::fmt::Debug for AppendBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppendBytes")
            .field("head_len", &self.head_len)
            .field("tail_len", &self.tail.len())
            .finish()
    }
}
