//! The broker's periodic jobs (Kafka's `KafkaScheduler`): checkpoints, flushes, producer
//! expiry, and later retention, the log cleaner and ISR checks.
//!
//! Each job has a name, a period and one tokio task that ticks it. A job never overlaps
//! itself: a run that outlasts its period delays the next one by a whole period. Jobs that touch the disk run on the blocking pool
//! (`schedule_blocking`), so an fsync never stalls a runtime worker; jobs that only touch
//! memory or await other tasks run on the runtime (`schedule`). `shutdown` stops every
//! job between runs and waits for runs in progress, so nothing is left writing when the
//! logs close; `stop` does the same from synchronous code (the broker's shutdown), where
//! it waits for blocking runs only and drops the others at their next await.
//!
//! The broker owns one scheduler (`Broker::scheduler`); whatever needs periodic work
//! registers it there when the broker opens.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

pub struct Scheduler {
    stop: watch::Sender<bool>,
    jobs: Mutex<Vec<(&'static str, JoinHandle<()>)>>,
    /// Set by `stop`: a blocking run that had not started yet does not start.
    stopped: Arc<AtomicBool>,
    /// One per blocking job, held while it runs, so `stop` can wait for a run in progress.
    running: Mutex<Vec<Arc<Mutex<()>>>>,
}

impl Default for Scheduler {
    fn default() -> Self {
        Scheduler::new()
    }
}

impl Scheduler {
    pub fn new() -> Self {
        Scheduler {
            stop: watch::channel(false).0,
            jobs: Mutex::new(Vec::new()),
            stopped: Arc::new(AtomicBool::new(false)),
            running: Mutex::new(Vec::new()),
        }
    }

    /// Runs `job` every `period` on the runtime, first after one period. Must be called
    /// inside a tokio runtime.
    pub fn schedule<F, Fut>(&self, name: &'static str, period: Duration, job: F)
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let mut stop = self.stop.subscribe();
        let period = period.max(Duration::from_millis(1));
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.wait_for(|stopped| *stopped) => return,
                }
                tracing::trace!(job = name, "running scheduled job");
                job().await;
            }
        });
        tracing::debug!(
            job = name,
            period_ms = period.as_millis() as u64,
            "scheduled"
        );
        self.jobs.lock().push((name, task));
    }

    /// Runs `job` every `period` on the blocking pool (for jobs that do I/O).
    pub fn schedule_blocking<F>(&self, name: &'static str, period: Duration, job: F)
    where
        F: Fn() + Send + Sync + 'static,
    {
        let job = Arc::new(job);
        let run = Arc::new(Mutex::new(()));
        self.running.lock().push(run.clone());
        let stopped = self.stopped.clone();
        self.schedule(name, period, move || {
            let (job, run, stopped) = (job.clone(), run.clone(), stopped.clone());
            async move {
                let blocking = tokio::task::spawn_blocking(move || {
                    let _running = run.lock();
                    if !stopped.load(Ordering::Acquire) {
                        job();
                    }
                });
                if let Err(e) = blocking.await {
                    tracing::error!(job = name, error = %e, "scheduled job panicked");
                }
            }
        });
    }

    /// The names of the jobs scheduled so far.
    pub fn job_names(&self) -> Vec<&'static str> {
        self.jobs.lock().iter().map(|(n, _)| *n).collect()
    }

    /// Stops every job from synchronous code: none starts again, and a blocking run in
    /// progress is waited for; jobs on the runtime are dropped at their next await.
    pub fn stop(&self) {
        self.stop.send_replace(true);
        self.stopped.store(true, Ordering::Release);
        for (_, task) in self.jobs.lock().drain(..) {
            task.abort();
        }
        for run in self.running.lock().iter() {
            drop(run.lock());
        }
    }

    /// Stops every job: none starts again, and runs in progress are waited for.
    pub async fn shutdown(&self) {
        self.stop.send_replace(true);
        let jobs = std::mem::take(&mut *self.jobs.lock());
        for (name, task) in jobs {
            if let Err(e) = task.await {
                tracing::error!(job = name, error = %e, "scheduled job failed at shutdown");
            }
        }
    }
}

impl Drop for Scheduler {
    /// Jobs end with their scheduler, even when nobody stopped it.
    fn drop(&mut self) {
        self.stop.send_replace(true);
        self.stopped.store(true, Ordering::Release);
        for (_, task) in self.jobs.get_mut().drain(..) {
            task.abort();
        }
    }
}

/// A period from a config value in milliseconds: `None` for Kafka's "never" (Long.MAX_VALUE,
/// or anything too large to wait for), at least 1 ms otherwise.
pub fn period_ms(ms: i64) -> Option<Duration> {
    // Anything past a year is Kafka's "disabled" in practice (its default is Long.MAX_VALUE).
    const NEVER_MS: i64 = 365 * 24 * 3600 * 1000;
    (ms < NEVER_MS).then(|| Duration::from_millis(ms.max(1) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn jobs_run_every_period_and_stop_at_shutdown() {
        let scheduler = Scheduler::new();
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        scheduler.schedule("count", Duration::from_millis(100), move || {
            let r = r.clone();
            async move {
                r.fetch_add(1, Ordering::SeqCst);
            }
        });
        assert_eq!(scheduler.job_names(), vec!["count"]);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 0, "first run after one period");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while runs.load(Ordering::SeqCst) < 3 {
            assert!(tokio::time::Instant::now() < deadline, "job did not repeat");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        scheduler.shutdown().await;
        let after = runs.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            runs.load(Ordering::SeqCst),
            after,
            "nothing runs after shutdown"
        );
    }

    #[tokio::test]
    async fn shutdown_waits_for_a_blocking_run_in_progress() {
        let scheduler = Scheduler::new();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let finished = Arc::new(AtomicUsize::new(0));
        let f = finished.clone();
        let started_tx = Mutex::new(started_tx);
        scheduler.schedule_blocking("slow", Duration::from_millis(1), move || {
            let _ = started_tx.lock().send(());
            std::thread::sleep(Duration::from_millis(200));
            f.fetch_add(1, Ordering::SeqCst);
        });
        tokio::task::spawn_blocking(move || started_rx.recv().unwrap())
            .await
            .unwrap();
        scheduler.shutdown().await;
        let done = finished.load(Ordering::SeqCst);
        assert!(
            done >= 1,
            "the run in progress finished before shutdown returned"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(finished.load(Ordering::SeqCst), done);
    }

    #[test]
    fn stop_from_synchronous_code_waits_for_a_blocking_run() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let finished = Arc::new(AtomicUsize::new(0));
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let scheduler = runtime.block_on(async {
            let scheduler = Scheduler::new();
            let f = finished.clone();
            let started_tx = Mutex::new(started_tx);
            scheduler.schedule_blocking("slow", Duration::from_millis(1), move || {
                let _ = started_tx.lock().send(());
                std::thread::sleep(Duration::from_millis(200));
                f.fetch_add(1, Ordering::SeqCst);
            });
            scheduler
        });
        // The runtime ticks the job on another thread while this one waits for it.
        let ticking = std::thread::spawn(move || {
            runtime.block_on(async { tokio::time::sleep(Duration::from_millis(600)).await });
            runtime
        });
        started_rx.recv().unwrap();
        scheduler.stop();
        let done = finished.load(Ordering::SeqCst);
        assert!(
            done >= 1,
            "the run in progress finished before stop returned"
        );
        let _runtime = ticking.join().unwrap();
        assert_eq!(
            finished.load(Ordering::SeqCst),
            done,
            "nothing ran after stop"
        );
    }

    #[test]
    fn kafka_long_max_means_never() {
        assert_eq!(period_ms(i64::MAX), None);
        assert_eq!(period_ms(60_000), Some(Duration::from_secs(60)));
        assert_eq!(period_ms(0), Some(Duration::from_millis(1)));
    }
}
