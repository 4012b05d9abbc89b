//! A response buffer that keeps fetched record bytes out of the copy.
//!
//! The kafka-protocol crate encodes a `records` field by `put_slice` of the `Bytes` it
//! holds. [`FrameBuf`] knows which `Bytes` are record data (registered up front) and,
//! when one of them is written, ends the current chunk and keeps a reference to the
//! `Bytes` instead of copying it. The frame goes out as a list of chunks, so segment
//! bytes read for a Fetch travel from the read buffer to the socket without another
//! copy in user space.

use std::ops::Range;

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::buf::ByteBufMut;

/// Slices shorter than this are copied: a separate chunk costs more than the copy.
const ZERO_COPY_MIN_BYTES: usize = 1024;

pub struct FrameBuf {
    /// Finished chunks, in order.
    chunks: Vec<Bytes>,
    /// The chunk being written.
    current: BytesMut,
    /// Bytes written before `current`.
    written_before: usize,
    /// Record data to pass by reference when the encoder writes it.
    shared: Vec<Bytes>,
}

impl FrameBuf {
    pub fn new(shared: Vec<Bytes>) -> Self {
        let shared = shared
            .into_iter()
            .filter(|b| b.len() >= ZERO_COPY_MIN_BYTES)
            .collect();
        let mut current = BytesMut::with_capacity(256);
        // The frame's size, filled in by `into_frame`.
        current.put_i32(0);
        FrameBuf {
            chunks: Vec::new(),
            current,
            written_before: 0,
            shared,
        }
    }

    /// Total bytes written.
    pub fn len(&self) -> usize {
        self.written_before + self.current.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The finished frame as chunks, in order, starting with the 4-byte size prefix
    /// that [`FrameBuf::new`] reserved.
    pub fn into_frame(mut self) -> Vec<Bytes> {
        let size = (self.len() - 4) as i32;
        if self.chunks.is_empty() {
            self.current[..4].copy_from_slice(&size.to_be_bytes());
        } else {
            // The head chunk is frozen but not shared yet, so this takes it back without a copy.
            let head = std::mem::take(&mut self.chunks[0]);
            let mut head = head
                .try_into_mut()
                .unwrap_or_else(|b| BytesMut::from(&b[..]));
            head[..4].copy_from_slice(&size.to_be_bytes());
            self.chunks[0] = head.freeze();
        }
        if !self.current.is_empty() {
            self.chunks.push(self.current.freeze());
        }
        self.chunks
    }

    fn take_shared(&mut self, src: &[u8]) -> Option<Bytes> {
        if src.len() < ZERO_COPY_MIN_BYTES {
            return None;
        }
        let i = self
            .shared
            .iter()
            .position(|b| b.as_ptr() == src.as_ptr() && b.len() == src.len())?;
        Some(self.shared.swap_remove(i))
    }
}

// SAFETY: every method delegates to the inner `BytesMut`, whose `BufMut` contract holds;
// `put_slice` only changes which buffer later bytes go to, never the bytes themselves.
unsafe impl BufMut for FrameBuf {
    fn remaining_mut(&self) -> usize {
        self.current.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller initialised `cnt` bytes of `chunk_mut()`, which is the inner
        // buffer's own chunk.
        unsafe { self.current.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.current.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        match self.take_shared(src) {
            Some(shared) => {
                let done = std::mem::replace(&mut self.current, BytesMut::with_capacity(256));
                self.written_before += done.len() + shared.len();
                if !done.is_empty() {
                    self.chunks.push(done.freeze());
                }
                self.chunks.push(shared);
            }
            None => self.current.extend_from_slice(src),
        }
    }
}

/// Gaps (written later by offset) are used only by record-batch encoding, never by
/// message encoding; they work within the current chunk.
impl ByteBufMut for FrameBuf {
    fn offset(&self) -> usize {
        self.len()
    }

    fn seek(&mut self, offset: usize) {
        let local = offset.saturating_sub(self.written_before);
        self.current.resize(local, 0);
    }

    fn range(&mut self, r: Range<usize>) -> &mut [u8] {
        let start = r
            .start
            .saturating_sub(self.written_before)
            .min(self.current.len());
        let end = r
            .end
            .saturating_sub(self.written_before)
            .min(self.current.len())
            .max(start);
        debug_assert_eq!(end - start, r.len(), "gap outside the current chunk");
        &mut self.current[start..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn concat(chunks: &[Bytes]) -> Vec<u8> {
        chunks.iter().flat_map(|c| c.iter().copied()).collect()
    }

    #[test]
    fn registered_bytes_are_passed_by_reference() {
        let records = Bytes::from(vec![7u8; 4096]);
        let mut buf = FrameBuf::new(vec![records.clone()]);
        buf.put_i16(5);
        buf.put_slice(&records);
        buf.put_i8(1);
        assert_eq!(buf.len(), 4 + 2 + 4096 + 1);
        let chunks = buf.into_frame();
        assert_eq!(chunks.len(), 3);
        assert_eq!(&chunks[0][..], &[0, 0, 16, 3, 0, 5], "size 2 + 4096 + 1");
        assert_eq!(
            chunks[1].as_ptr(),
            records.as_ptr(),
            "no copy of the records"
        );
        assert_eq!(&chunks[2][..], &[1]);
    }

    #[test]
    fn unregistered_and_small_slices_are_copied() {
        let small = Bytes::from(vec![1u8; 10]);
        let other = vec![2u8; 5000];
        let mut buf = FrameBuf::new(vec![small.clone()]);
        buf.put_slice(&small);
        buf.put_slice(&other);
        let chunks = buf.into_frame();
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].len(), 4 + 5010);
        assert_eq!(&concat(&chunks)[..4], &5010i32.to_be_bytes());
    }
}
