//! An in-memory `PartitionLog` for tests: batches kept as appended, offsets assigned
//! as a leader would, appends that can be made to fail, and a high watermark that
//! either follows the log end or is moved by hand.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::writer::{Appended, PartitionLog};
use crate::error::ApiError;
use crate::log::control::{marker_batch, EndTxnMarker};
use crate::log::RecordBatchHeader;

#[derive(Default)]
struct Partition {
    batches: Vec<(i64, Bytes)>,
    log_end: i64,
    high_watermark: i64,
}

#[derive(Default)]
pub struct MemoryLog {
    partitions: Mutex<HashMap<i32, Partition>>,
    /// Appends fail with COORDINATOR_NOT_AVAILABLE while set.
    pub fail_appends: AtomicBool,
    /// The high watermark stays where `set_high_watermark` put it while set.
    pub manual_high_watermark: AtomicBool,
    advanced: Notify,
    /// Partitions whose appends wait until `release` (a slow disk, say).
    held: Mutex<HashSet<i32>>,
    /// Partitions whose log dir went offline.
    pub offline: Mutex<HashSet<i32>>,
    /// The broker's leaderships are in doubt (its ZooKeeper session lost) while set.
    pub in_doubt: AtomicBool,
    released: Notify,
}

impl MemoryLog {
    pub fn set_high_watermark(&self, partition: i32, hw: i64) {
        if let Some(p) = self.partitions.lock().get_mut(&partition) {
            p.high_watermark = hw;
        }
        self.advanced.notify_waiters();
    }

    /// Appends to `partition` wait until `release`.
    pub fn hold(&self, partition: i32) {
        self.held.lock().insert(partition);
    }

    pub fn release(&self, partition: i32) {
        self.held.lock().remove(&partition);
        self.released.notify_waiters();
    }

    pub fn log_end(&self, partition: i32) -> i64 {
        self.partitions
            .lock()
            .get(&partition)
            .map_or(0, |p| p.log_end)
    }

    /// Appends raw bytes as they are, as a corrupted disk would hold them.
    pub fn append_raw(&self, partition: i32, base_offset: i64, bytes: Bytes, next_offset: i64) {
        let mut parts = self.partitions.lock();
        let p = parts.entry(partition).or_default();
        p.batches.push((base_offset, bytes));
        p.log_end = next_offset;
        p.high_watermark = next_offset;
    }
}

#[async_trait]
impl PartitionLog for MemoryLog {
    async fn append(
        &self,
        partition: i32,
        batch: Bytes,
        _now_ms: i64,
    ) -> Result<Appended, ResponseError> {
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if !self.held.lock().contains(&partition) {
                break;
            }
            released.await;
        }
        if self.fail_appends.load(Ordering::Acquire) {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        let header = RecordBatchHeader::parse(&batch).map_err(|_| ResponseError::CorruptMessage)?;
        let mut parts = self.partitions.lock();
        let p = parts.entry(partition).or_default();
        let first = p.log_end;
        let last = first + header.last_offset_delta() as i64;
        let mut stored = BytesMut::from(&batch[..]);
        stored[..8].copy_from_slice(&first.to_be_bytes());
        p.batches.push((first, stored.freeze()));
        p.log_end = last + 1;
        if !self.manual_high_watermark.load(Ordering::Acquire) {
            p.high_watermark = p.log_end;
        }
        drop(parts);
        self.advanced.notify_waiters();
        Ok(Appended {
            first_offset: first,
            last_offset: last,
        })
    }

    async fn append_marker(
        &self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
        now_ms: i64,
    ) -> Result<Appended, ResponseError> {
        let batch = marker_batch(producer_id, producer_epoch, marker, now_ms);
        self.append(partition, batch, now_ms).await
    }

    fn leader_epoch(&self, partition: i32) -> Option<i32> {
        (!self.is_offline(partition)).then_some(0)
    }

    fn is_offline(&self, partition: i32) -> bool {
        self.offline.lock().contains(&partition)
    }

    fn leaderships_in_doubt(&self) -> bool {
        self.in_doubt.load(Ordering::Acquire)
    }

    fn high_watermark(&self, partition: i32) -> Option<i64> {
        self.partitions
            .lock()
            .get(&partition)
            .map(|p| p.high_watermark)
    }

    async fn committed(&self, partition: i32, offset: i64) -> Result<(), ResponseError> {
        loop {
            let advanced = self.advanced.notified();
            tokio::pin!(advanced);
            advanced.as_mut().enable();
            if self.high_watermark(partition).is_some_and(|hw| hw > offset) {
                return Ok(());
            }
            advanced.await;
        }
    }

    fn log_start_offset(&self, _partition: i32) -> Result<i64, ApiError> {
        Ok(0)
    }

    fn read(&self, partition: i32, offset: i64, max_bytes: usize) -> Result<Bytes, ApiError> {
        let parts = self.partitions.lock();
        let Some(p) = parts.get(&partition) else {
            return Ok(Bytes::new());
        };
        let mut out = BytesMut::new();
        for (i, (base, bytes)) in p.batches.iter().enumerate() {
            let next = p.batches.get(i + 1).map_or(p.log_end, |(b, _)| *b);
            if next <= offset {
                continue;
            }
            if !out.is_empty() && out.len() + bytes.len() > max_bytes {
                break;
            }
            let _ = base;
            out.extend_from_slice(bytes);
        }
        Ok(out.freeze())
    }
}
