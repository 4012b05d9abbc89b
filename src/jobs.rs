//! The broker's periodic jobs on its scheduler, with Kafka's names and config keys. Each
//! holds the replica manager weakly: the log dirs' locks go with the broker, not with a
//! job that happens to be between runs.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::config::BrokerConfig;
use crate::log::now_ms;
use crate::replica::ReplicaManager;
use crate::scheduler::{period_ms, Scheduler};

/// Cleaner jobs scheduled at least, so `log.cleaner.threads` can grow at runtime.
const MIN_CLEANER_JOBS: usize = 4;
/// The cleaner jobs' tick at most: how soon a shorter `log.cleaner.backoff.ms` acts.
const MAX_CLEANER_TICK_MS: u64 = 1000;

/// Schedules the log layer's jobs: recovery-point and log-start checkpoints, the flusher,
/// retention, the log cleaner's threads, producer-id expiry, and the removal of deleted
/// logs once `log.segment.delete.delay.ms` has passed. Must be called inside a tokio
/// runtime.
pub fn schedule_log_jobs(
    scheduler: &Scheduler,
    config: &BrokerConfig,
    replicas: &Arc<ReplicaManager>,
) {
    if let Some(every) = period_ms(config.log.flush_offset_checkpoint_interval_ms) {
        let replicas = Arc::downgrade(replicas);
        scheduler.schedule_blocking("kafka-recovery-point-checkpoint", every, move || {
            with(&replicas, ReplicaManager::checkpoint)
        });
    }
    if let Some(every) = period_ms(config.log.flush_start_offset_checkpoint_interval_ms) {
        let replicas = Arc::downgrade(replicas);
        scheduler.schedule_blocking("kafka-log-start-offset-checkpoint", every, move || {
            with(&replicas, ReplicaManager::checkpoint_log_start_offsets)
        });
    }
    if let Some(every) = period_ms(config.log.flush_scheduler_interval_ms) {
        let replicas = Arc::downgrade(replicas);
        scheduler.schedule_blocking("kafka-log-flusher", every, move || {
            with(&replicas, |r| r.logs.flush_dirty_logs(now_ms()))
        });
    }
    if let Some(every) = period_ms(config.log.retention_check_interval_ms) {
        let replicas = Arc::downgrade(replicas);
        scheduler.schedule_blocking("kafka-log-retention", every, move || {
            with(&replicas, |r| {
                r.delete_old_segments(now_ms());
            })
        });
    }
    if config.cleaner.enable {
        // Kafka's cleaner threads: each cleans until no log is due, then waits
        // `log.cleaner.backoff.ms`. `log.cleaner.threads` may double at runtime (each
        // change at most doubles it), so jobs stand ready beyond it; those past the count
        // in force do nothing. The backoff may change at runtime too: the jobs tick at
        // most every second and each waits out the backoff in force since its last round.
        // The names live as long as the broker (a handful).
        let jobs = (config.cleaner.threads * 2).max(MIN_CLEANER_JOBS);
        let tick = Duration::from_millis(config.cleaner.backoff_ms.min(MAX_CLEANER_TICK_MS));
        for i in 0..jobs {
            let name: &'static str = Box::leak(format!("kafka-log-cleaner-thread-{i}").into());
            let replicas = Arc::downgrade(replicas);
            let last_round = parking_lot::Mutex::new(None::<Instant>);
            scheduler.schedule_blocking(name, tick, move || {
                with(&replicas, |r| {
                    let backoff = Duration::from_millis(r.cleaner.config().backoff_ms);
                    let mut last = last_round.lock();
                    if last.is_some_and(|t| t.elapsed() < backoff) {
                        return;
                    }
                    while i < r.cleaner.config().threads
                        && !r.cleaner.is_stopped()
                        && r.clean_filthiest(now_ms())
                    {}
                    *last = Some(Instant::now());
                })
            });
        }
    }
    if let Some(every) = period_ms(config.log.producer_id_expiration_check_interval_ms) {
        let replicas = Arc::downgrade(replicas);
        scheduler.schedule_blocking("PeriodicProducerExpirationCheck", every, move || {
            with(&replicas, |r| {
                let removed = r.logs.remove_expired_producers(now_ms());
                if removed > 0 {
                    tracing::info!(removed, "expired idle producer ids");
                }
            })
        });
    }
    // Each deleted log or segment waits the delay from its own deletion; checking a few
    // times per delay (at least every second, at most every 50 ms) removes it at most
    // that late.
    let delete_delay_ms = config.log.segment_delete_delay_ms;
    let every = Duration::from_millis((delete_delay_ms / 4).clamp(50, 1000));
    let replicas = Arc::downgrade(replicas);
    scheduler.schedule_blocking("kafka-delete-logs", every, move || {
        with(&replicas, |r| {
            r.logs.remove_due_deletions(Instant::now());
        })
    });
}

/// Schedules the replica layer's jobs: ISR expiry (Kafka's `isr-expiration`), every half
/// `replica.lag.time.max.ms`, proposes dropping followers that stopped catching up; the
/// high-watermark checkpoint (`highwatermark-checkpoint`) keeps what is committed across
/// a restart.
pub fn schedule_replica_jobs(
    scheduler: &Scheduler,
    config: &BrokerConfig,
    replicas: &Arc<ReplicaManager>,
) {
    if let Some(every) = period_ms(config.replication.replica_lag_time_max_ms / 2) {
        let replicas = Arc::downgrade(replicas);
        scheduler.schedule_blocking("isr-expiration", every, move || {
            with(&replicas, |r| r.maybe_shrink_isrs(now_ms()))
        });
    }
    if let Some(every) = period_ms(
        config
            .replication
            .replica_high_watermark_checkpoint_interval_ms,
    ) {
        let replicas = Arc::downgrade(replicas);
        scheduler.schedule_blocking("highwatermark-checkpoint", every, move || {
            with(&replicas, ReplicaManager::checkpoint_high_watermarks)
        });
    }
}

/// Runs `job` on the replica manager while the broker still has it.
fn with(replicas: &Weak<ReplicaManager>, job: impl FnOnce(&ReplicaManager)) {
    if let Some(r) = replicas.upgrade() {
        job(&r);
    }
}
