//! What a coordinator built on the runtime provides: its state for one partition of
//! its internal topic (a shard), the records that change it, and how they are stored.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::time::Instant;

use crate::log::control::{EndTxnMarker, TxnResult};

/// Runs once a write is settled: `Ok` when its records are committed, the error when
/// the append failed (then nothing was replayed).
pub type OnSettled = Box<dyn FnOnce(Result<(), ResponseError>) + Send>;

/// What an operation returns: the records to write and the response to give once they
/// are committed.
pub struct Written<Rec, R> {
    pub records: Vec<Rec>,
    pub response: R,
    /// Whether the records are replayed onto the shard once written. Classic group
    /// operations change their group directly (joins, waiters and session timers are
    /// not records) and write its GroupMetadata only to persist it, as Kafka's group
    /// coordinator does; those records are replayed when the partition is loaded.
    pub replay: bool,
    pub on_settled: Option<OnSettled>,
    /// How the records are stored: a plain batch, a producer's transactional batch, or
    /// a transaction marker.
    pub batch: BatchKind,
}

/// The batch a write appends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchKind {
    /// The coordinator's own records (no producer).
    Plain,
    /// Records of a producer's transaction (TxnOffsetCommit): stored as a transactional
    /// batch under the producer's id and epoch, replayed with
    /// `Shard::replay_transactional`, and in force only once a COMMIT marker follows.
    Transactional {
        producer_id: i64,
        producer_epoch: i16,
    },
    /// A marker ending the producer's transaction in this partition (no records),
    /// replayed with `Shard::replay_end_txn`.
    Marker {
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
    },
}

impl<Rec, R> Written<Rec, R> {
    /// An answer that writes nothing.
    pub fn response(response: R) -> Self {
        Written::new(Vec::new(), response)
    }

    /// Records to write, replayed once written, and the answer to give then.
    pub fn new(records: Vec<Rec>, response: R) -> Self {
        Written {
            records,
            response,
            replay: true,
            on_settled: None,
            batch: BatchKind::Plain,
        }
    }

    /// Records written as `producer_id`'s transactional batch at `producer_epoch`.
    pub fn transactional(mut self, producer_id: i64, producer_epoch: i16) -> Self {
        self.batch = BatchKind::Transactional {
            producer_id,
            producer_epoch,
        };
        self
    }

    /// A transaction marker for `producer_id` instead of records.
    pub fn marker(
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
        response: R,
    ) -> Self {
        let mut w = Written::new(Vec::new(), response);
        w.batch = BatchKind::Marker {
            producer_id,
            producer_epoch,
            marker,
        };
        w
    }

    /// Records that persist a change already made in memory (see `replay`).
    pub fn without_replay(mut self) -> Self {
        self.replay = false;
        self
    }

    /// Runs `f` when the write is settled, whatever its outcome.
    pub fn on_settled(mut self, f: OnSettled) -> Self {
        self.on_settled = Some(f);
        self
    }
}

/// The state a coordinator keeps for one partition of its internal topic, rebuilt from
/// that partition's records. Its operations read it and return records; it changes
/// only by `replay`, which is the same code at write time and at load time.
pub trait Shard: Send + 'static {
    /// A decoded record: a key and its value, or a tombstone.
    type Record: Send + 'static;

    /// The record as stored: key and value (None: a tombstone).
    fn encode(record: &Self::Record) -> (Bytes, Option<Bytes>);

    /// A stored record; `Ok(None)` for record types this coordinator does not own,
    /// which loading skips as Kafka's loader does. Anything else undecodable is an
    /// error that fails the load.
    fn decode(key: Option<&Bytes>, value: Option<&Bytes>) -> Result<Option<Self::Record>, String>;

    /// Applies one record stored at `offset`.
    fn replay(&mut self, offset: i64, record: Self::Record) -> Result<(), String>;

    /// Applies one record of `producer_id`'s transaction stored at `offset`: pending
    /// until `replay_end_txn` says how the transaction ended. A coordinator that never
    /// writes transactional records refuses them.
    fn replay_transactional(
        &mut self,
        offset: i64,
        producer_id: i64,
        record: Self::Record,
    ) -> Result<(), String> {
        let _ = (offset, producer_id, record);
        Err("a transactional record where none is expected".into())
    }

    /// A marker at `offset` ended `producer_id`'s transaction in this partition.
    fn replay_end_txn(
        &mut self,
        offset: i64,
        producer_id: i64,
        result: TxnResult,
    ) -> Result<(), String> {
        let _ = (offset, producer_id, result);
        Ok(())
    }

    /// Loading finished: what is not stored (sessions, timers) starts from `now`.
    fn on_loaded(&mut self, now: Instant);

    /// The partition is no longer served here: answer whatever still waits.
    fn on_unloaded(&mut self);

    /// When the earliest timer is due.
    fn next_deadline(&self) -> Option<Instant>;

    /// Runs the timers due at `now`; their records are written like an operation's.
    fn on_deadline(&mut self, now: Instant) -> Written<Self::Record, ()>;
}
