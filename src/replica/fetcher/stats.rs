//! What a broker's replica fetchers have sent: how many Fetch requests, how many of them
//! full (opening a fetch session or outside one), and how many partitions they named and
//! forgot. With sessions an idle follower's requests name no partition; these counters
//! show it, in tests and when measuring.

use std::sync::atomic::{AtomicU64, Ordering};

use super::session::FetchData;

#[derive(Debug, Default)]
pub struct FetcherStats {
    requests: AtomicU64,
    full_requests: AtomicU64,
    partitions_named: AtomicU64,
    partitions_forgotten: AtomicU64,
}

/// The counters at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FetcherStatsSnapshot {
    pub requests: u64,
    pub full_requests: u64,
    pub partitions_named: u64,
    pub partitions_forgotten: u64,
}

impl FetcherStats {
    /// Counts one request about to be sent.
    pub fn record(&self, data: &FetchData) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if data.is_full() {
            self.full_requests.fetch_add(1, Ordering::Relaxed);
        }
        self.partitions_named
            .fetch_add(data.to_send.len() as u64, Ordering::Relaxed);
        self.partitions_forgotten
            .fetch_add(data.forgotten.len() as u64, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> FetcherStatsSnapshot {
        FetcherStatsSnapshot {
            requests: self.requests.load(Ordering::Relaxed),
            full_requests: self.full_requests.load(Ordering::Relaxed),
            partitions_named: self.partitions_named.load(Ordering::Relaxed),
            partitions_forgotten: self.partitions_forgotten.load(Ordering::Relaxed),
        }
    }
}
