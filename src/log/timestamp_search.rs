//! ListOffsets by time inside one stored batch (Kafka's `FileRecords.searchForTimestamp`
//! and `RecordBatch.offsetOfMaxTimestamp`). The batch's bytes were read from its segment
//! under the log lock; the search, which may decompress, runs after the lock is released.

use super::records::{Keep, RecordWalk};
use super::{LogError, TimestampType};

/// A ListOffsets answer: a record's timestamp and offset, and the leader epoch of the batch
/// holding it (`None` when the batch carries none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampAndOffset {
    pub timestamp: i64,
    pub offset: i64,
    pub leader_epoch: Option<i32>,
}

fn epoch(leader_epoch: i32) -> Option<i32> {
    (leader_epoch >= 0).then_some(leader_epoch)
}

/// The first record of `batch` with a timestamp >= `target` and an offset >= `start_offset`.
pub(crate) fn first_at_or_after(
    batch: &[u8],
    target: i64,
    start_offset: i64,
) -> Result<Option<TimestampAndOffset>, LogError> {
    let mut walk = RecordWalk::open(batch, None)?;
    let h = walk.header;
    if h.timestamp_type() == TimestampType::LogAppendTime && h.records_count() > 0 {
        // Every record carries the batch's timestamp: no need to decompress.
        let offset = h.base_offset().max(start_offset);
        return Ok(
            (h.max_timestamp() >= target && offset <= h.last_offset()).then_some(
                TimestampAndOffset {
                    timestamp: h.max_timestamp(),
                    offset,
                    leader_epoch: epoch(h.partition_leader_epoch()),
                },
            ),
        );
    }
    while let Some(r) = walk.next(Keep::Positions)? {
        if r.timestamp >= target && r.offset >= start_offset {
            return Ok(Some(TimestampAndOffset {
                timestamp: r.timestamp,
                offset: r.offset,
                leader_epoch: epoch(h.partition_leader_epoch()),
            }));
        }
    }
    Ok(None)
}

/// The first record of `batch` whose timestamp is the batch's max timestamp (KAFKA-16310:
/// inside a batch the largest timestamp need not be on the last record).
pub(crate) fn offset_of_max_timestamp(
    batch: &[u8],
) -> Result<Option<TimestampAndOffset>, LogError> {
    let mut walk = RecordWalk::open(batch, None)?;
    let h = walk.header;
    while let Some(r) = walk.next(Keep::Positions)? {
        if r.timestamp == h.max_timestamp() {
            return Ok(Some(TimestampAndOffset {
                timestamp: r.timestamp,
                offset: r.offset,
                leader_epoch: epoch(h.partition_leader_epoch()),
            }));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch;
    use crate::log::test_util::*;
    use kafka_protocol::records::Compression;

    fn batch_with_timestamps(ts: &[i64], c: Compression) -> Vec<u8> {
        let values: Vec<&[u8]> = ts.iter().map(|_| &b"v"[..]).collect();
        let mut rs = records(&values, 0, None);
        for (r, &t) in rs.iter_mut().zip(ts) {
            r.timestamp = t;
        }
        let mut b = encode(&rs, c).to_vec();
        batch::set_base_offset(&mut b, 100);
        batch::set_partition_leader_epoch(&mut b, 3);
        b
    }

    #[test]
    fn max_timestamp_is_on_the_record_that_has_it() {
        for c in [Compression::None, Compression::Zstd] {
            let b = batch_with_timestamps(&[10, 30, 20], c);
            let found = offset_of_max_timestamp(&b).unwrap().unwrap();
            assert_eq!(
                (found.timestamp, found.offset, found.leader_epoch),
                (30, 101, Some(3))
            );
        }
    }

    #[test]
    fn first_record_at_or_after_a_time() {
        for c in [Compression::None, Compression::Gzip] {
            let b = batch_with_timestamps(&[10, 30, 20], c);
            let at = |t, start| {
                first_at_or_after(&b, t, start)
                    .unwrap()
                    .map(|f| (f.timestamp, f.offset))
            };
            assert_eq!(at(5, 0), Some((10, 100)));
            assert_eq!(at(15, 0), Some((30, 101)));
            assert_eq!(at(15, 102), Some((20, 102)));
            assert_eq!(at(31, 0), None);
        }
    }

    #[test]
    fn log_append_time_batches_answer_from_the_header() {
        let mut b = batch_with_timestamps(&[10, 30, 20], Compression::Lz4);
        batch::set_log_append_time(&mut b, 500);
        let found = first_at_or_after(&b, 400, 101).unwrap().unwrap();
        assert_eq!((found.timestamp, found.offset), (500, 101));
        assert_eq!(offset_of_max_timestamp(&b).unwrap().unwrap().offset, 100);
        assert_eq!(first_at_or_after(&b, 501, 0).unwrap(), None);
    }
}
