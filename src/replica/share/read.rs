//! What a ShareFetch reads of the log: the headers of the batches it may acquire from,
//! and then only the bytes of the batches holding what it acquired.
//!
//! A share fetch's byte budget is the request's `MaxBytes` (up to 8 MiB a response),
//! far more than the `MaxRecords` a member acquires at once (500 by default, and at most
//! `max_record_locks` past the window). Reading the whole budget into memory and sending
//! it back cost the broker milliseconds a fetch and made the client receive and walk
//! megabytes to keep a few hundred records, so a poll-acknowledge cycle took longer than
//! on Kafka. So the walk reads only batch headers (in small chunks, skipping the record
//! bytes of large batches), stops past the last offset acquisition can reach, and the
//! answer carries only the batches from the one holding the first acquired offset to the
//! one holding the last, as Kafka's `ShareFetchUtils.maybeSliceFetchRecords` does.

use std::ops::Range;

use bytes::Bytes;

use super::acquire::{ControlMarker, FetchedBatch};
use super::AcquiredRecords;
use crate::log::control::{read_marker, TxnResult};
use crate::log::{FileSlice, LogError, RecordBatchHeader, HEADER_SIZE, LOG_OVERHEAD};

/// How much the header walk reads at a time: several small batches' headers in one read,
/// a large batch's header without its records.
const WALK_CHUNK: usize = 8 * 1024;

/// Where a batch lies in what was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchAt {
    pub batch: FetchedBatch,
    /// Its bytes within the read, from its first byte (base offset) to its end.
    pub start: usize,
    pub end: usize,
}

/// Bytes of a log range, read at positions relative to its start.
pub trait ReadAt {
    /// How many bytes there are.
    fn size(&self) -> usize;
    /// At most `len` bytes from `at` (fewer at the end).
    fn read_at(&self, at: usize, len: usize) -> Result<Bytes, LogError>;
}

impl ReadAt for FileSlice {
    fn size(&self) -> usize {
        FileSlice::len(self)
    }

    fn read_at(&self, at: usize, len: usize) -> Result<Bytes, LogError> {
        self.sub(at, len).read()
    }
}

impl ReadAt for Bytes {
    fn size(&self) -> usize {
        Bytes::len(self)
    }

    fn read_at(&self, at: usize, len: usize) -> Result<Bytes, LogError> {
        let at = at.min(Bytes::len(self));
        Ok(self.slice(at..(at + len).min(Bytes::len(self))))
    }
}

/// The whole batches of `src` in order, up to and including the first whose last offset
/// reaches `last_wanted` (acquisition never goes past it). A batch cut at the end of the
/// read is left out; so is everything from a batch whose header does not parse.
pub fn walk_batches<R: ReadAt>(src: &R, last_wanted: i64) -> Result<Vec<BatchAt>, LogError> {
    let mut out = Vec::new();
    let total = src.size();
    let mut chunk = Bytes::new();
    let mut chunk_at = 0usize;
    let mut at = 0usize;
    while at + HEADER_SIZE <= total {
        // The header, and a control batch's whole body, must be in the chunk.
        if at < chunk_at || at + HEADER_SIZE > chunk_at + chunk.len() {
            chunk = src.read_at(at, WALK_CHUNK)?;
            chunk_at = at;
        }
        let Ok(h) = RecordBatchHeader::parse(&chunk[at - chunk_at..]) else {
            break;
        };
        let Some(end) = usize::try_from(h.batch_length())
            .ok()
            .and_then(|len| at.checked_add(LOG_OVERHEAD + len))
        else {
            break;
        };
        if end > total || end < at + HEADER_SIZE {
            break;
        }
        let control = match h.is_control() {
            false => None,
            true => {
                let body = match end <= chunk_at + chunk.len() {
                    true => chunk.slice(at - chunk_at..end - chunk_at),
                    false => src.read_at(at, end - at)?,
                };
                match read_marker(&body) {
                    Ok(Some(m)) if m.result == TxnResult::Abort => Some(ControlMarker::Abort),
                    _ => Some(ControlMarker::Commit),
                }
            }
        };
        out.push(BatchAt {
            batch: FetchedBatch {
                base_offset: h.base_offset(),
                last_offset: h.last_offset(),
                producer_id: h.producer_id(),
                transactional: h.is_transactional(),
                control,
            },
            start: at,
            end,
        });
        if h.last_offset() >= last_wanted {
            break;
        }
        at = end;
    }
    Ok(out)
}

/// The byte range of `batches` to answer with: from the batch holding the first acquired
/// offset to the one holding the last. None when nothing was acquired.
pub fn acquired_span(batches: &[BatchAt], acquired: &[AcquiredRecords]) -> Option<Range<usize>> {
    let first = acquired.iter().map(|a| a.first_offset).min()?;
    let last = acquired.iter().map(|a| a.last_offset).max()?;
    let holding = |b: &&BatchAt| b.batch.last_offset >= first && b.batch.base_offset <= last;
    let start = batches.iter().find(holding)?.start;
    let end = batches.iter().rev().find(holding)?.end;
    Some(start..end)
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, BytesMut};

    use super::*;
    use crate::log::control::{marker_batch, EndTxnMarker};

    /// A v2 batch of `records` records at `base`, `body` record bytes after its header
    /// (acquisition reads headers only, so they are zeros).
    fn batch(base: i64, records: i32, attributes: i16, producer_id: i64, body: usize) -> BytesMut {
        let mut b = BytesMut::new();
        b.put_i64(base);
        b.put_i32((HEADER_SIZE - LOG_OVERHEAD + body) as i32); // batch length
        b.put_i32(0); // partition leader epoch
        b.put_i8(2); // magic
        b.put_u32(0); // crc
        b.put_i16(attributes);
        b.put_i32(records - 1); // last offset delta
        b.put_i64(0);
        b.put_i64(0);
        b.put_i64(producer_id);
        b.put_i16(0);
        b.put_i32(0);
        b.put_i32(records);
        b.put_bytes(0, body);
        b
    }

    fn plain(base: i64, records: i32, body: usize) -> BytesMut {
        batch(base, records, 0, -1, body)
    }

    fn offsets(w: &[BatchAt]) -> Vec<(i64, i64)> {
        w.iter()
            .map(|b| (b.batch.base_offset, b.batch.last_offset))
            .collect()
    }

    #[test]
    fn walk_reads_whole_batches_and_their_markers() {
        let mut bytes = plain(0, 3, 0);
        bytes.extend_from_slice(&batch(3, 2, 0x10, 7, 0));
        let mut marker = BytesMut::from(
            &marker_batch(
                7,
                0,
                EndTxnMarker {
                    result: TxnResult::Abort,
                    coordinator_epoch: 0,
                },
                0,
            )[..],
        );
        marker[..8].copy_from_slice(&5i64.to_be_bytes());
        bytes.extend_from_slice(&marker);
        // A batch cut at the read's end is left out.
        bytes.extend_from_slice(&plain(6, 4, 0)[..30]);
        let got = walk_batches(&bytes.freeze(), i64::MAX).unwrap();
        let batches: Vec<FetchedBatch> = got.iter().map(|b| b.batch).collect();
        assert_eq!(
            batches,
            vec![
                FetchedBatch::plain(0, 2),
                FetchedBatch {
                    base_offset: 3,
                    last_offset: 4,
                    producer_id: 7,
                    transactional: true,
                    control: None,
                },
                FetchedBatch {
                    base_offset: 5,
                    last_offset: 5,
                    producer_id: 7,
                    transactional: true,
                    control: Some(ControlMarker::Abort),
                },
            ]
        );
        assert_eq!((got[0].start, got[0].end), (0, HEADER_SIZE));
        assert_eq!(got[1].start, HEADER_SIZE);
    }

    #[test]
    fn walk_skips_large_batches_bodies_and_stops_at_the_last_wanted_offset() {
        // Ten batches of 100 records, 20 KB each: larger than a walk chunk.
        let mut bytes = BytesMut::new();
        for i in 0..10 {
            bytes.extend_from_slice(&plain(i * 100, 100, 20_000));
        }
        let bytes = bytes.freeze();
        let all = walk_batches(&bytes, i64::MAX).unwrap();
        assert_eq!(all.len(), 10);
        assert_eq!(all[9].end, bytes.len());
        // Up to and including the batch holding offset 250.
        let some = walk_batches(&bytes, 250).unwrap();
        assert_eq!(offsets(&some), vec![(0, 99), (100, 199), (200, 299)]);
        // Many small batches: their headers come from few reads.
        let mut small = BytesMut::new();
        for i in 0..500 {
            small.extend_from_slice(&plain(i, 1, 10));
        }
        assert_eq!(walk_batches(&small.freeze(), i64::MAX).unwrap().len(), 500);
    }

    /// Bytes that count what is read of them.
    struct Counting(Bytes, std::cell::Cell<usize>);

    impl ReadAt for Counting {
        fn size(&self) -> usize {
            self.0.len()
        }

        fn read_at(&self, at: usize, len: usize) -> Result<Bytes, LogError> {
            let got = self.0.read_at(at, len)?;
            self.1.set(self.1.get() + got.len());
            Ok(got)
        }
    }

    #[test]
    fn walk_reads_headers_not_record_bytes() {
        // Ten batches of 100 KB: the walk reads a chunk at each header, not the batches.
        let mut bytes = BytesMut::new();
        for i in 0..10 {
            bytes.extend_from_slice(&plain(i * 100, 100, 100_000));
        }
        let src = Counting(bytes.freeze(), Default::default());
        assert_eq!(walk_batches(&src, i64::MAX).unwrap().len(), 10);
        assert!(src.1.get() <= 10 * WALK_CHUNK, "read {} bytes", src.1.get());
    }

    #[test]
    fn walk_stops_at_a_header_that_does_not_parse_or_a_length_past_the_read() {
        let mut bytes = plain(0, 1, 0);
        let mut bad = plain(1, 1, 0);
        bad[8..12].copy_from_slice(&(-5i32).to_be_bytes());
        bytes.extend_from_slice(&bad);
        assert_eq!(
            offsets(&walk_batches(&bytes.freeze(), i64::MAX).unwrap()),
            vec![(0, 0)]
        );
        let mut long = plain(0, 1, 0);
        long[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(walk_batches(&long.freeze(), i64::MAX).unwrap().is_empty());
    }

    #[test]
    fn the_answer_spans_only_the_batches_holding_acquired_records() {
        let mut bytes = BytesMut::new();
        for i in 0..5 {
            bytes.extend_from_slice(&plain(i * 10, 10, 100));
        }
        let walked = walk_batches(&bytes.freeze(), i64::MAX).unwrap();
        let size = walked[0].end;
        let acquired = |first, last| AcquiredRecords {
            first_offset: first,
            last_offset: last,
            delivery_count: 1,
        };
        assert_eq!(acquired_span(&walked, &[]), None);
        // Records 15..=27: the batches at 10 and 20.
        assert_eq!(
            acquired_span(&walked, &[acquired(15, 19), acquired(22, 27)]),
            Some(size..3 * size)
        );
        assert_eq!(
            acquired_span(&walked, &[acquired(0, 49)]),
            Some(0..5 * size)
        );
    }
}
