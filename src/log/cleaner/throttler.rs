//! `log.cleaner.io.max.bytes.per.second`: the I/O rate every cleaner thread together may
//! use (Kafka's `Throttler`, shared by the threads). Each thread reports the bytes it read
//! or wrote; once a check interval has passed, a rate above the limit makes the reporting
//! thread sleep until the bytes fit it.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

const CHECK_INTERVAL: Duration = Duration::from_millis(300);
/// Sleeps are cut into slices so an aborted cleaning is not held up by a long one.
const SLEEP_SLICE: Duration = Duration::from_millis(100);

pub struct Throttler {
    bytes_per_second: Mutex<f64>,
    period: Mutex<(Instant, u64)>,
}

impl Throttler {
    pub fn new(bytes_per_second: f64) -> Self {
        Throttler {
            bytes_per_second: Mutex::new(bytes_per_second),
            period: Mutex::new((Instant::now(), 0)),
        }
    }

    pub fn set_rate(&self, bytes_per_second: f64) {
        *self.bytes_per_second.lock() = bytes_per_second;
    }

    /// Counts `bytes`, and sleeps if the rate since the period began is over the limit.
    /// `stop` ends the sleep early.
    pub fn maybe_throttle(&self, bytes: u64, stop: impl Fn() -> bool) {
        let rate = *self.bytes_per_second.lock();
        if !rate.is_finite() || rate <= 0.0 {
            return;
        }
        let sleep = {
            let mut period = self.period.lock();
            period.1 += bytes;
            let elapsed = period.0.elapsed();
            if elapsed < CHECK_INTERVAL {
                return;
            }
            let wanted = Duration::from_secs_f64(period.1 as f64 / rate);
            *period = (Instant::now(), 0);
            wanted.saturating_sub(elapsed)
        };
        let until = Instant::now() + sleep;
        while !stop() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(SLEEP_SLICE));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_the_rate() {
        let throttler = Throttler::new(1_000_000.0);
        let started = Instant::now();
        for _ in 0..10 {
            throttler.maybe_throttle(100_000, || false);
            std::thread::sleep(Duration::from_millis(35));
        }
        // 1 MB at 1 MB/s: about a second, not the 0.35 s of work alone.
        assert!(
            started.elapsed() >= Duration::from_millis(600),
            "{:?}",
            started.elapsed()
        );
        let unlimited = Throttler::new(f64::MAX);
        let started = Instant::now();
        unlimited.maybe_throttle(u64::MAX / 2, || false);
        assert!(started.elapsed() < Duration::from_millis(100));
    }
}
