//! The controller's one wall clock: the timestamps it writes into `/controller` and
//! `/brokers/ids/<id>`. Injected, so the cluster simulation runs on a fake clock (its
//! timers are tokio's, which a paused runtime advances only when told).

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
