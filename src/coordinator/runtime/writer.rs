//! How the runtime reaches the log of its internal topic: append a batch as leader,
//! learn when the high watermark passes it, and read the partition back for loading.
//! The replica layer implements it (`coordinator::partition_log`); tests use a fake.

use async_trait::async_trait;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use crate::error::ApiError;
use crate::log::control::EndTxnMarker;

/// Where an appended batch landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    pub first_offset: i64,
    pub last_offset: i64,
}

#[async_trait]
pub trait PartitionLog: Send + Sync + 'static {
    /// Appends one record batch (v2, as `batches::encode` builds it) to a partition this
    /// broker leads, as a coordinator appends (Kafka's origin COORDINATOR: a
    /// transactional batch's producer epoch is checked, its sequence is not).
    async fn append(
        &self,
        partition: i32,
        batch: Bytes,
        now_ms: i64,
    ) -> Result<Appended, ResponseError>;

    /// Appends a transaction marker for `producer_id` at `producer_epoch` to a partition
    /// this broker leads, as WriteTxnMarkers does: it ends the producer's transaction
    /// there (an older epoch is refused).
    async fn append_marker(
        &self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
        now_ms: i64,
    ) -> Result<Appended, ResponseError>;

    /// The leader epoch when this broker leads `partition`; None when it does not.
    fn leader_epoch(&self, partition: i32) -> Option<i32>;

    /// Whether `partition`'s log dir went offline here: nothing can be written to it
    /// again until the broker restarts, and its leadership moves to another broker whose
    /// coordinator takes the partition's state over.
    fn is_offline(&self, partition: i32) -> bool;

    /// Whether this broker's leaderships are in doubt (its ZooKeeper session is gone at
    /// the servers, and the controller has not yet spoken to its next registration):
    /// another broker may lead the partition by now.
    fn leaderships_in_doubt(&self) -> bool;

    /// The high watermark: offsets below it are committed.
    fn high_watermark(&self, partition: i32) -> Option<i64>;

    /// Resolves once the high watermark passes `offset`, or with NOT_COORDINATOR when
    /// the partition is no longer led here.
    async fn committed(&self, partition: i32, offset: i64) -> Result<(), ResponseError>;

    /// The first offset of the partition's log, where loading starts.
    fn log_start_offset(&self, partition: i32) -> Result<i64, ApiError>;

    /// Whole batches from `offset`, at most `max_bytes` unless the first batch is larger;
    /// empty at the end of the log.
    fn read(&self, partition: i32, offset: i64, max_bytes: usize) -> Result<Bytes, ApiError>;
}
