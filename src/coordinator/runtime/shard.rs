//! What a coordinator built on the runtime provides: its state for one partition of
//! its internal topic (a shard), the records that change it, and how they are stored.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::time::Instant;

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
        }
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

    /// Loading finished: what is not stored (sessions, timers) starts from `now`.
    fn on_loaded(&mut self, now: Instant);

    /// The partition is no longer served here: answer whatever still waits.
    fn on_unloaded(&mut self);

    /// When the earliest timer is due.
    fn next_deadline(&self) -> Option<Instant>;

    /// Runs the timers due at `now`; their records are written like an operation's.
    fn on_deadline(&mut self, now: Instant) -> Written<Self::Record, ()>;
}
