//! Whole batches of a segment file, read in chunks of `log.cleaner.io.buffer.size`.
//!
//! A batch larger than the buffer is read on its own, up to the largest batch the cleaner
//! accepts (`max.message.bytes`, and never more than the segment holds); a larger or
//! malformed length stops the cleaning of that log with an error.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::log::batch::{RecordBatchHeader, HEADER_SIZE};
use crate::log::LogError;

/// A batch read: its position in the file, header and bytes.
pub type StoredBatch<'b> = (u64, RecordBatchHeader, &'b [u8]);

pub struct BatchReader<'a> {
    file: &'a File,
    /// Valid bytes of the file: nothing at or past this is read.
    end: u64,
    position: u64,
    buf: Vec<u8>,
    /// File position of `buf[0]`, and how many bytes of `buf` hold file data.
    buf_start: u64,
    buf_len: usize,
    chunk: usize,
    max_batch: usize,
}

impl<'a> BatchReader<'a> {
    pub fn new(file: &'a File, end: u64, chunk: usize, max_batch: usize) -> Self {
        BatchReader {
            file,
            end,
            position: 0,
            buf: Vec::new(),
            buf_start: 0,
            buf_len: 0,
            chunk: chunk.max(HEADER_SIZE),
            max_batch: max_batch.max(HEADER_SIZE),
        }
    }

    /// The next whole batch (header included) and its position; `Ok(None)` at the end.
    /// `on_read` is told how many bytes each file read took (for the throttler).
    pub fn next_batch(
        &mut self,
        mut on_read: impl FnMut(u64),
    ) -> Result<Option<StoredBatch<'_>>, LogError> {
        let left = self.end.saturating_sub(self.position);
        if left < HEADER_SIZE as u64 {
            return Ok(None);
        }
        self.fill(HEADER_SIZE, &mut on_read)?;
        let header = RecordBatchHeader::parse(self.buffered())?;
        let size = header.check_length(usize::try_from(left).unwrap_or(usize::MAX))?;
        if size > self.max_batch {
            return Err(LogError::CorruptMessage(format!(
                "batch at position {} of {size} bytes is larger than the cleaner reads ({} bytes, max.message.bytes)",
                self.position, self.max_batch
            )));
        }
        self.fill(size, &mut on_read)?;
        let position = self.position;
        self.position += size as u64;
        let at = (position - self.buf_start) as usize;
        Ok(Some((position, header, &self.buf[at..at + size])))
    }

    fn buffered(&self) -> &[u8] {
        let at = (self.position - self.buf_start) as usize;
        &self.buf[at..self.buf_len]
    }

    /// Makes `buf` hold at least `n` bytes from `position` on (n fits in the file).
    fn fill(&mut self, n: usize, on_read: &mut impl FnMut(u64)) -> Result<(), LogError> {
        let held = (self.buf_start + self.buf_len as u64).saturating_sub(self.position);
        if self.position >= self.buf_start && held >= n as u64 {
            return Ok(());
        }
        let want = n.max(self.chunk);
        let len = usize::try_from((self.end - self.position).min(want as u64)).unwrap_or(want);
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        self.file
            .read_exact_at(&mut self.buf[..len], self.position)?;
        on_read(len as u64);
        self.buf_start = self.position;
        self.buf_len = len;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::test_util::batch_bytes;

    #[test]
    fn reads_whole_batches_across_chunks_and_refuses_oversized_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg");
        let mut bytes = Vec::new();
        let mut positions = Vec::new();
        for i in 0..20 {
            positions.push(bytes.len() as u64);
            let value = vec![b'x'; 10 * i];
            bytes.extend_from_slice(&batch_bytes(&[&value], i as i64, None));
        }
        std::fs::write(&path, &bytes).unwrap();
        let file = File::open(&path).unwrap();
        let mut reads = 0;
        let mut reader = BatchReader::new(&file, bytes.len() as u64, 100, 1 << 20);
        let mut seen = Vec::new();
        while let Some((position, header, batch)) = reader.next_batch(|_| reads += 1).unwrap() {
            assert_eq!(batch.len(), header.size_in_bytes());
            assert_eq!(
                batch,
                &bytes[position as usize..position as usize + batch.len()]
            );
            seen.push(position);
        }
        assert_eq!(seen, positions);
        assert!(reads >= 10);
        let mut small = BatchReader::new(&file, bytes.len() as u64, 100, 100);
        let mut last = Ok(None);
        for _ in 0..20 {
            last = small.next_batch(|_| {}).map(|b| b.map(|(p, _, _)| p));
            if last.is_err() {
                break;
            }
        }
        assert!(last.is_err(), "a batch over max_batch stops the read");
        // A cut-off last batch is not returned.
        let mut cut = BatchReader::new(&file, bytes.len() as u64 - 5, 4096, 1 << 20);
        let mut n = 0;
        while let Ok(Some(_)) = cut.next_batch(|_| {}) {
            n += 1;
        }
        assert_eq!(n, 19);
    }
}
