//! The broker's wall clock: milliseconds since the Unix epoch, as Kafka's `Time.milliseconds`
//! stamps records, sessions and deadlines. One clock for every layer, so a clock that reads
//! before 1970 (a broken RTC) reads as 0 everywhere rather than differently per module.
//!
//! Code that a simulation drives takes the clock injected as a `Clock` (the ZooKeeper-mode
//! controller, whose cluster simulation runs on tokio's paused time through `TokioClock`);
//! everything else reads `now_ms`, which is `SystemClock`'s reading. Intervals (timeouts,
//! rates, lock expiries) are measured on monotonic `Instant`s, never on this clock.

use std::sync::Arc;

pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
}

/// The system's wall clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64)
    }
}

/// The system's wall clock, for code that is not given one.
pub fn now_ms() -> i64 {
    SystemClock.now_ms()
}

/// A fixed start plus the time tokio's clock has moved since this was made: with a
/// paused runtime (`tokio::time::pause`) it moves only with `tokio::time::advance`.
pub struct TokioClock {
    start_ms: i64,
    start: tokio::time::Instant,
}

impl TokioClock {
    pub fn new(start_ms: i64) -> Arc<TokioClock> {
        Arc::new(TokioClock {
            start_ms,
            start: tokio::time::Instant::now(),
        })
    }
}

impl Clock for TokioClock {
    fn now_ms(&self) -> i64 {
        self.start_ms + self.start.elapsed().as_millis() as i64
    }
}
