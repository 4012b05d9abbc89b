//! A response buffer that keeps fetched record bytes out of the copy.
//!
//! The kafka-protocol crate encodes a `records` field by `put_slice` of the `Bytes` it
//! holds. [`FrameBuf`] knows which `Bytes` are record data (registered up front) and,
//! when one of them is written, ends the current chunk and keeps a reference to the
//! `Bytes` instead of copying it. The frame goes out as a list of chunks, so segment
//! bytes read for a Fetch travel from the read buffer to the socket without another
//! copy in user space. Records still in their segment file arrive as placeholders (see
//! [`super::zero_copy`]) and become file chunks.

use std::collections::VecDeque;
use std::ops::Range;

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::buf::ByteBufMut;

use super::zero_copy::{is_placeholder, Chunk};
use super::Frame;
use crate::log::FileSlice;

/// Slices shorter than this are copied: a separate chunk costs more than the copy.
const ZERO_COPY_MIN_BYTES: usize = 1024;

pub struct FrameBuf {
    /// Finished chunks, in order.
    chunks: Vec<Chunk>,
    /// The chunk being written.
    current: BytesMut,
    /// Bytes written before `current`.
    written_before: usize,
    /// Record data to pass by reference when the encoder writes it, in the order it is
    /// written: each slice written is compared with the front only, so encoding stays
    /// linear in the number of partitions.
    shared: VecDeque<Bytes>,
    /// Comparisons made against `shared`, for the test that encoding is linear.
    #[cfg(test)]
    comparisons: usize,
    /// File ranges the placeholders stand for, in the order they are written.
    files: VecDeque<FileSlice>,
    /// Set when a placeholder did not match the next file slice.
    mismatch: Option<String>,
}

impl FrameBuf {
    /// `shared` in the order the encoder writes them; placeholders among them are
    /// recognised on their own.
    pub fn new(shared: Vec<Bytes>, files: Vec<FileSlice>) -> Self {
        let shared = shared
            .into_iter()
            .filter(|b| b.len() >= ZERO_COPY_MIN_BYTES && !is_placeholder(b))
            .collect();
        let mut current = BytesMut::with_capacity(256);
        // The frame's size, filled in by `into_frame`.
        current.put_i32(0);
        FrameBuf {
            chunks: Vec::new(),
            current,
            written_before: 0,
            shared,
            #[cfg(test)]
            comparisons: 0,
            files: files.into(),
            mismatch: None,
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
    /// that [`FrameBuf::new`] reserved. Fails when a file slice was not written where
    /// its placeholder was expected: sending the placeholder's zeros would corrupt data.
    pub fn into_frame(mut self) -> Result<Frame, String> {
        if let Some(why) = self.mismatch {
            return Err(why);
        }
        if !self.files.is_empty() {
            return Err(format!("{} file slices were not encoded", self.files.len()));
        }
        let size = (self.len() - 4) as i32;
        match self.chunks.first_mut() {
            None => self.current[..4].copy_from_slice(&size.to_be_bytes()),
            // The head is always the bytes written before the first shared chunk, frozen
            // but not shared yet, so this takes it back without a copy.
            Some(Chunk::Bytes(head)) => {
                let mut mutable = std::mem::take(head)
                    .try_into_mut()
                    .unwrap_or_else(|b| BytesMut::from(&b[..]));
                mutable[..4].copy_from_slice(&size.to_be_bytes());
                *head = mutable.freeze();
            }
            Some(Chunk::File(_)) => return Err("frame starts with records".into()),
        }
        if !self.current.is_empty() {
            self.chunks.push(Chunk::Bytes(self.current.freeze()));
        }
        Ok(self.chunks)
    }

    /// Ends the current chunk and appends `chunk` after it.
    fn push_chunk(&mut self, chunk: Chunk) {
        let done = std::mem::replace(&mut self.current, BytesMut::with_capacity(256));
        self.written_before += done.len() + chunk.len();
        if !done.is_empty() {
            self.chunks.push(Chunk::Bytes(done.freeze()));
        }
        self.chunks.push(chunk);
    }

    /// The registered `Bytes` that `src` is, if it is the next one expected.
    fn take_shared(&mut self, src: &[u8]) -> Option<Bytes> {
        if src.len() < ZERO_COPY_MIN_BYTES {
            return None;
        }
        #[cfg(test)]
        {
            self.comparisons += 1;
        }
        let next = self.shared.front()?;
        if next.as_ptr() == src.as_ptr() && next.len() == src.len() {
            self.shared.pop_front()
        } else {
            None
        }
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
        if !src.is_empty() && is_placeholder(src) {
            match self.files.pop_front() {
                Some(file) if file.len() == src.len() => self.push_chunk(Chunk::File(file)),
                other => {
                    self.mismatch = Some(format!(
                        "records placeholder of {} bytes met {other:?}",
                        src.len()
                    ));
                    // Keep the frame's length right; the frame is refused anyway.
                    self.current.extend_from_slice(src);
                }
            }
            return;
        }
        match self.take_shared(src) {
            Some(shared) => self.push_chunk(Chunk::Bytes(shared)),
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
    use std::io::Write;
    use std::sync::Arc;

    use super::*;
    use crate::protocol::zero_copy::placeholder;

    fn bytes_of(chunk: &Chunk) -> &Bytes {
        match chunk {
            Chunk::Bytes(b) => b,
            Chunk::File(f) => panic!("expected bytes, got {f:?}"),
        }
    }

    fn concat(chunks: &[Chunk]) -> Vec<u8> {
        chunks
            .iter()
            .flat_map(|c| bytes_of(c).iter().copied())
            .collect()
    }

    fn file_slice(len: usize) -> FileSlice {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&vec![9u8; len + 10]).unwrap();
        FileSlice::new(Arc::new(f), 10, len)
    }

    #[test]
    fn registered_bytes_are_passed_by_reference() {
        let records = Bytes::from(vec![7u8; 4096]);
        let mut buf = FrameBuf::new(vec![records.clone()], Vec::new());
        buf.put_i16(5);
        buf.put_slice(&records);
        buf.put_i8(1);
        assert_eq!(buf.len(), 4 + 2 + 4096 + 1);
        let chunks = buf.into_frame().unwrap();
        assert_eq!(chunks.len(), 3);
        assert_eq!(
            &bytes_of(&chunks[0])[..],
            &[0, 0, 16, 3, 0, 5],
            "size 2 + 4096 + 1"
        );
        assert_eq!(
            bytes_of(&chunks[1]).as_ptr(),
            records.as_ptr(),
            "no copy of the records"
        );
        assert_eq!(&bytes_of(&chunks[2])[..], &[1]);
    }

    #[test]
    fn unregistered_and_small_slices_are_copied() {
        let small = Bytes::from(vec![1u8; 10]);
        let other = vec![2u8; 5000];
        let mut buf = FrameBuf::new(vec![small.clone()], Vec::new());
        buf.put_slice(&small);
        buf.put_slice(&other);
        let chunks = buf.into_frame().unwrap();
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].len(), 4 + 5010);
        assert_eq!(&concat(&chunks)[..4], &5010i32.to_be_bytes());
    }

    #[test]
    fn placeholders_become_file_chunks_in_order() {
        let (a, b) = (file_slice(3000), file_slice(3000));
        let (pa, pb) = (placeholder(&a).unwrap(), placeholder(&b).unwrap());
        let mut buf = FrameBuf::new(vec![pa.clone(), pb.clone()], vec![a, b]);
        buf.put_i8(1);
        buf.put_slice(&pa);
        buf.put_slice(&pb);
        buf.put_i8(2);
        let chunks = buf.into_frame().unwrap();
        assert_eq!(chunks.len(), 4);
        assert_eq!(
            &bytes_of(&chunks[0])[..],
            &[0, 0, 23, 114, 1],
            "size 1 + 6000 + 1"
        );
        assert!(matches!(&chunks[1], Chunk::File(f) if f.len() == 3000 && f.position() == 10));
        assert!(matches!(&chunks[2], Chunk::File(f) if f.len() == 3000));
        assert_eq!(&bytes_of(&chunks[3])[..], &[2]);
    }

    /// 160k partitions of records (the issue: 3.3 s to the first byte, quadratic in the
    /// partitions): one comparison per slice written, each passed by reference.
    #[test]
    fn encoding_many_shared_slices_is_linear() {
        const N: usize = 160_000;
        let backing = Bytes::from(vec![5u8; N + ZERO_COPY_MIN_BYTES]);
        let records: Vec<Bytes> = (0..N)
            .map(|i| backing.slice(i..i + ZERO_COPY_MIN_BYTES))
            .collect();
        let mut buf = FrameBuf::new(records.clone(), Vec::new());
        for r in &records {
            buf.put_i32(r.len() as i32);
            buf.put_slice(r);
        }
        assert_eq!(buf.comparisons, N, "one comparison per records field");
        assert!(buf.shared.is_empty(), "every slice was taken by reference");
        let chunks = buf.into_frame().unwrap();
        assert_eq!(
            chunks.len(),
            2 * N,
            "a length chunk and a records chunk each"
        );
        assert_eq!(bytes_of(&chunks[1]).as_ptr(), records[0].as_ptr());
        assert_eq!(
            bytes_of(&chunks[2 * N - 1]).as_ptr(),
            records[N - 1].as_ptr()
        );
    }

    #[test]
    fn a_placeholder_without_its_file_slice_refuses_the_frame() {
        let a = file_slice(3000);
        let wrong = placeholder(&file_slice(2000)).unwrap();
        let mut buf = FrameBuf::new(Vec::new(), vec![a.clone()]);
        buf.put_slice(&wrong);
        assert!(buf.into_frame().is_err(), "length mismatch");

        let buf = FrameBuf::new(Vec::new(), vec![a]);
        assert!(buf.into_frame().is_err(), "slice never written");
    }
}
