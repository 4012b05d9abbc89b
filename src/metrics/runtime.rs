//! Kafka's idle gauges from the tokio runtime's busy time. skua has no request handler
//! pool or network processors of their own: the runtime's workers run the connections
//! and the handlers alike, so both of Kafka's gauges report the workers' idle fraction
//! (0 to 1, as Kafka's do):
//! - `kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent`
//!   (`RequestHandlerAvgIdlePercent`),
//! - `kafka_network_socketserver_networkprocessoravgidle_percent`
//!   (`NetworkProcessorAvgIdlePercent`).
//!
//! The fraction is over the time since the previous scrape (at least [`MIN_WINDOW`];
//! a closer scrape gets the same value again), and since the broker started for the
//! first.

use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::runtime::RuntimeMetrics;

use super::exposition::{Exposition, Kind};

pub const MIN_WINDOW: Duration = Duration::from_secs(1);

pub struct RuntimeIdle {
    /// When the window began, the workers' total busy time then, the last fraction.
    last: Mutex<(Instant, Duration, f64)>,
}

impl Default for RuntimeIdle {
    fn default() -> Self {
        RuntimeIdle {
            last: Mutex::new((Instant::now(), Duration::ZERO, 1.0)),
        }
    }
}

impl RuntimeIdle {
    /// The workers' idle fraction over the window ending `now`.
    pub fn idle(&self, metrics: &RuntimeMetrics, now: Instant) -> f64 {
        let workers = metrics.num_workers();
        let busy: Duration = (0..workers)
            .map(|w| metrics.worker_total_busy_duration(w))
            .sum();
        let mut last = self.last.lock();
        let (since, busy_then, fraction) = *last;
        let window = now.saturating_duration_since(since);
        if window < MIN_WINDOW {
            return fraction;
        }
        let capacity = window.as_secs_f64() * workers.max(1) as f64;
        let busy_in_window = busy.saturating_sub(busy_then).as_secs_f64();
        let idle = (1.0 - busy_in_window / capacity).clamp(0.0, 1.0);
        *last = (now, busy, idle);
        idle
    }

    /// Both gauges, when called on a tokio runtime.
    pub fn write(&self, out: &mut Exposition, now: Instant) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let idle = self.idle(&handle.metrics(), now);
        for (name, help) in [
            (
                "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
                "Fraction of time the runtime's workers (which run the request handlers) were idle",
            ),
            (
                "kafka_network_socketserver_networkprocessoravgidle_percent",
                "Fraction of time the runtime's workers (which run the connections) were idle",
            ),
        ] {
            out.family(name, Kind::Gauge, help);
            out.sample("", &[], idle);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idle_falls_while_the_workers_are_busy_and_rises_when_they_rest() {
        let runtime = tokio::runtime::Handle::current().metrics();
        let idle = RuntimeIdle::default();
        let began = Instant::now();
        // Both workers held for 1.2 s (a blocking sleep inside a task is busy time). The
        // barrier makes the two sleeps overlap on two workers: without it a loaded machine
        // could run both on one worker, one after the other.
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let busy: Vec<_> = (0..2)
            .map(|_| {
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    barrier.wait();
                    std::thread::sleep(Duration::from_millis(1200))
                })
            })
            .collect();
        for b in busy {
            b.await.unwrap();
        }
        // A worker adds a task's busy time when it parks, just after the task ended: the
        // join can wake this thread first. Wait (at most 2 s) until both have added it.
        let t = Instant::now();
        let total_busy = || -> Duration {
            (0..runtime.num_workers())
                .map(|w| runtime.worker_total_busy_duration(w))
                .sum()
        };
        while total_busy() < Duration::from_millis(2400) && t.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let now = Instant::now();
        let while_busy = idle.idle(&runtime, now);
        // The two workers were busy for at least 2.4 s of the window's 2 x its length; on
        // a loaded machine the window is longer than the sleeps (the test's own thread may
        // wait to run), so the bound follows the window measured here.
        let window = now.duration_since(began).as_secs_f64();
        let most_idle = 1.0 - 2.4 / (2.0 * window);
        assert!(
            while_busy <= most_idle + 0.02,
            "idle {while_busy} while both workers were busy for 1.2 s of a {window:.2} s window"
        );
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let at_rest = idle.idle(&runtime, Instant::now());
        assert!(at_rest > 0.7, "idle {at_rest} while nothing ran");
        // A scrape within the minimum window repeats the last value.
        assert_eq!(idle.idle(&runtime, Instant::now()), at_rest);
    }
}
