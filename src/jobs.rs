//! The broker's periodic jobs on the scheduler, with Kafka's names and config keys.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::broker::Broker;
use crate::log::now_ms;
use crate::scheduler::{period_ms, Scheduler};

/// Cleaner jobs scheduled at least, so `log.cleaner.threads` can grow at runtime.
const MIN_CLEANER_JOBS: usize = 4;

/// Schedules every periodic job of the log layer. Must be called inside a tokio runtime.
pub fn schedule_log_jobs(scheduler: &Scheduler, broker: &Arc<Broker>) {
    let config = &broker.config;
    let ms = |key: &str, default: i64| config.long(key).unwrap_or(default);
    if let Some(every) = period_ms(ms("log.flush.offset.checkpoint.interval.ms", 60_000)) {
        let replicas = broker.replicas.clone();
        scheduler.schedule_blocking("kafka-recovery-point-checkpoint", every, move || {
            replicas.checkpoint()
        });
    }
    if let Some(every) = period_ms(ms("log.flush.start.offset.checkpoint.interval.ms", 60_000)) {
        let replicas = broker.replicas.clone();
        scheduler.schedule_blocking("kafka-log-start-offset-checkpoint", every, move || {
            replicas.checkpoint_log_start_offsets()
        });
    }
    if let Some(every) = period_ms(ms("log.flush.scheduler.interval.ms", i64::MAX)) {
        let replicas = broker.replicas.clone();
        scheduler.schedule_blocking("kafka-log-flusher", every, move || {
            replicas.logs.flush_dirty_logs(now_ms())
        });
    }
    if let Some(every) = period_ms(ms("log.retention.check.interval.ms", 300_000)) {
        let replicas = broker.replicas.clone();
        scheduler.schedule_blocking("kafka-log-retention", every, move || {
            replicas.delete_old_segments(now_ms());
        });
    }
    // Each deleted segment or partition waits `file.delete.delay.ms` from its own deletion;
    // this job removes those whose wait is over, a few times per delay (at most a second late).
    let delete_tick = (ms("log.segment.delete.delay.ms", 60_000) / 4).clamp(50, 1_000) as u64;
    let replicas = broker.replicas.clone();
    scheduler.schedule_blocking(
        "kafka-delete-logs",
        Duration::from_millis(delete_tick),
        move || {
            replicas.logs.remove_due_deletions(Instant::now());
        },
    );
    let cleaner = broker.replicas.cleaner.config();
    if cleaner.enable {
        // Kafka's cleaner threads: each cleans until no log is due, then waits
        // `log.cleaner.backoff.ms`. `log.cleaner.threads` may double at runtime, so
        // jobs stand ready beyond it; those past the current count do nothing.
        let jobs = (cleaner.threads * 2).max(MIN_CLEANER_JOBS);
        for i in 0..jobs {
            // The names live as long as the broker (a handful).
            let name: &'static str = Box::leak(format!("kafka-log-cleaner-thread-{i}").into());
            let replicas = broker.replicas.clone();
            let every = Duration::from_millis(cleaner.backoff_ms);
            scheduler.schedule_blocking(name, every, move || {
                let cleaner = &replicas.cleaner;
                while i < cleaner.config().threads
                    && !cleaner.is_stopped()
                    && replicas.clean_filthiest(now_ms())
                {}
            });
        }
    }
    if let Some(every) = period_ms(ms("producer.id.expiration.check.interval.ms", 600_000)) {
        let replicas = broker.replicas.clone();
        scheduler.schedule_blocking("PeriodicProducerExpirationCheck", every, move || {
            let removed = replicas.logs.remove_expired_producers(now_ms());
            if removed > 0 {
                tracing::info!(removed, "expired idle producer ids");
            }
        });
    }
}
