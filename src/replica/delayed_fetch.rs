//! Delayed fetch (Kafka's `DelayedFetch`): a fetch that found fewer than `min_bytes`
//! waits for more on each fetched partition's notification, the log end for a follower
//! (it replicates everything appended) and the high watermark for a consumer (it reads
//! only committed records), until `max_wait` is over or the broker begins shutting down.
//! Each wake-up reads once more; nothing polls on a timer.

use std::sync::Arc;
use std::time::Duration;

use futures::future::select_all;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use super::Partition;

/// How far a fetch may read (Kafka's `FetchIsolation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchIsolation {
    /// Up to the log end offset: a follower's fetch.
    LogEnd,
    /// Up to the high watermark: a read_uncommitted consumer's fetch.
    HighWatermark,
    /// Up to the last stable offset: a read_committed consumer's fetch.
    TxnCommitted,
}

/// What a Fetch request asks of the replica layer (Kafka's `FetchParams`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchParams {
    /// The fetching follower's broker id; negative for consumers.
    pub replica_id: i32,
    pub max_wait: Duration,
    pub min_bytes: usize,
    pub max_bytes: usize,
    pub isolation: FetchIsolation,
    /// The follower's broker epoch (Fetch v15+ `ReplicaState`); -1 when not sent.
    pub replica_epoch: i64,
}

impl FetchParams {
    /// A fetch from `replica_id` (>= 0: a follower, which reads to the log end; a
    /// consumer reads to the high watermark, or with `read_committed` to the last stable
    /// offset).
    pub fn new(
        replica_id: i32,
        max_wait: Duration,
        min_bytes: usize,
        max_bytes: usize,
        read_committed: bool,
    ) -> Self {
        let isolation = match (replica_id >= 0, read_committed) {
            (true, _) => FetchIsolation::LogEnd,
            (false, false) => FetchIsolation::HighWatermark,
            (false, true) => FetchIsolation::TxnCommitted,
        };
        FetchParams {
            replica_id,
            max_wait,
            min_bytes,
            max_bytes,
            isolation,
            replica_epoch: -1,
        }
    }

    pub fn with_replica_epoch(mut self, replica_epoch: i64) -> Self {
        self.replica_epoch = replica_epoch;
        self
    }

    pub fn is_from_follower(&self) -> bool {
        self.replica_id >= 0
    }
}

/// One read of every fetched partition: the answer it would give, the record bytes it
/// found, and whether some partition answered an error.
pub struct FetchAttempt<R> {
    pub response: R,
    pub bytes: usize,
    pub errored: bool,
}

/// Reads with `read` until the fetch can be answered: `min_bytes` found, a partition
/// answered an error (as in Kafka, that ends a long poll at once), `max_wait` passed, or
/// `stopping` turned true. Returns the last read's answer.
pub async fn complete<R>(
    params: &FetchParams,
    partitions: &[Arc<Partition>],
    stopping: watch::Receiver<bool>,
    read: impl FnMut() -> FetchAttempt<R>,
) -> R {
    complete_or(params, partitions, None, stopping, read).await
}

/// [`complete`], also reading again when `also` is notified: a share fetch waits for
/// records released in its share-partitions (acknowledged RELEASE, locks run out) as
/// well as for new ones (Kafka's `DelayedShareFetch` is checked on both).
pub async fn complete_or<R>(
    params: &FetchParams,
    partitions: &[Arc<Partition>],
    also: Option<&Notify>,
    mut stopping: watch::Receiver<bool>,
    mut read: impl FnMut() -> FetchAttempt<R>,
) -> R {
    let deadline = Instant::now() + params.max_wait;
    loop {
        // Registered before reading, so an advance in between is not missed.
        let mut wakeups: Vec<_> = partitions
            .iter()
            .map(|p| Box::pin(p.advanced(params.isolation)))
            .collect();
        for w in &mut wakeups {
            w.as_mut().enable();
        }
        let mut released = also.map(|n| Box::pin(n.notified()));
        if let Some(r) = &mut released {
            r.as_mut().enable();
        }
        let attempt = read();
        let done = Instant::now() >= deadline || *stopping.borrow();
        if attempt.bytes >= params.min_bytes || attempt.errored || done {
            return attempt.response;
        }
        let advanced = async {
            if wakeups.is_empty() {
                std::future::pending().await
            } else {
                select_all(wakeups).await;
            }
        };
        let released = async {
            match released {
                Some(r) => r.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = advanced => {}
            _ = released => {}
            _ = tokio::time::sleep_until(deadline) => {}
            _ = stopping.changed() => {}
        }
    }
}
