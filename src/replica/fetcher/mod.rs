//! Replica fetchers (Kafka's `ReplicaFetcherManager`): the partitions this broker follows,
//! each replicated by one fetcher task per (leader, fetcher id), with
//! `num.replica.fetchers` fetchers per source broker; a partition's fetcher id is Kafka's
//! (`abs(31 * topic.hashCode() + partition) % num.replica.fetchers`), so the same
//! partitions share a connection as on a Kafka broker.
//!
//! - `endpoint.rs`: the leader behind a fetcher (the network, or a test's partition).
//! - `thread.rs`: one fetcher's loop.
//! - `session.rs`: its KIP-227 fetch session with the leader.
//! - `stats.rs`: counters of what the fetchers sent.

pub mod endpoint;
pub mod session;
pub mod stats;
pub mod thread;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use uuid::Uuid;

use self::endpoint::EndpointFactory;
use self::stats::{FetcherStats, FetcherStatsSnapshot};
use self::thread::{FetchState, Shared};
use super::cluster_view::ClusterView;
use super::throttle::ReplicationQuotas;
use super::Partition;
use crate::config::sections::ReplicationConfig;
use crate::log::TopicPartition;

/// What every fetch request carries (the `replica.fetch.*` settings).
#[derive(Clone, Debug)]
pub struct FetcherSettings {
    pub num_fetchers: usize,
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub partition_max_bytes: i32,
    pub backoff: Duration,
}

impl FetcherSettings {
    pub fn from_config(c: &ReplicationConfig) -> Self {
        FetcherSettings {
            num_fetchers: c.num_replica_fetchers.max(1),
            max_wait_ms: c.replica_fetch_wait_max_ms,
            min_bytes: c.replica_fetch_min_bytes,
            max_bytes: c.replica_fetch_response_max_bytes,
            partition_max_bytes: c.replica_fetch_max_bytes,
            backoff: Duration::from_millis(c.replica_fetch_backoff_ms),
        }
    }

    pub(crate) fn partition_max_bytes_usize(&self) -> usize {
        usize::try_from(self.partition_max_bytes).unwrap_or(0)
    }
}

/// A running fetcher.
struct Fetcher {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Fetcher {
    /// Ends the task at once, even mid-request: what a fetch brings back is applied only
    /// between its awaits, so nothing is left half done.
    fn stop(&self) {
        self.shared.stop();
        self.task.abort();
    }
}

pub struct ReplicaFetcherManager {
    settings: FetcherSettings,
    endpoints: Arc<dyn EndpointFactory>,
    cluster: Arc<ClusterView>,
    quotas: Arc<ReplicationQuotas>,
    fetchers: Mutex<HashMap<(i32, usize), Fetcher>>,
    stats: Arc<FetcherStats>,
}

/// Java's `String.hashCode`, for Kafka's fetcher id.
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

/// Kafka's `getFetcherId`.
pub fn fetcher_id(tp: &TopicPartition, num_fetchers: usize) -> usize {
    let hash = java_string_hash(&tp.topic)
        .wrapping_mul(31)
        .wrapping_add(tp.partition);
    // Kafka's `Utils.abs`: i32::MIN maps to 0.
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs as usize % num_fetchers.max(1)
}

impl ReplicaFetcherManager {
    pub fn new(
        settings: FetcherSettings,
        endpoints: Arc<dyn EndpointFactory>,
        cluster: Arc<ClusterView>,
        quotas: Arc<ReplicationQuotas>,
    ) -> Self {
        ReplicaFetcherManager {
            settings,
            endpoints,
            cluster,
            quotas,
            fetchers: Mutex::new(HashMap::new()),
            stats: Arc::default(),
        }
    }

    /// Replicates `partition` from `leader` at `addr` in `leader_epoch`, from its log end
    /// offset; it leaves any fetcher it was in.
    pub fn add_partition(
        &self,
        partition: Arc<Partition>,
        topic_id: Uuid,
        leader: i32,
        addr: SocketAddr,
        leader_epoch: i32,
    ) {
        let tp = partition.tp.clone();
        let id = fetcher_id(&tp, self.settings.num_fetchers);
        let mut fetchers = self.fetchers.lock();
        let already = fetchers.get(&(leader, id)).is_some_and(|f| {
            f.addr == addr
                && f.shared
                    .partitions
                    .lock()
                    .get(&tp)
                    .is_some_and(|s| s.leader_epoch == leader_epoch)
        });
        if already {
            return;
        }
        for f in fetchers.values() {
            f.shared.partitions.lock().remove(&tp);
        }
        // A leader that moved to another address gets a new connection.
        if fetchers.get(&(leader, id)).is_some_and(|f| f.addr != addr) {
            if let Some(old) = fetchers.remove(&(leader, id)) {
                old.stop();
            }
        }
        let fetcher = fetchers
            .entry((leader, id))
            .or_insert_with(|| self.spawn(leader, addr, id));
        fetcher.shared.partitions.lock().insert(
            tp.clone(),
            FetchState {
                partition,
                topic_id,
                leader_epoch,
                delayed_until: None,
                in_sync: false,
                truncating: true,
            },
        );
        fetcher.shared.changed.notify_one();
        tracing::info!(partition = %tp, leader, leader_epoch, fetcher = id, "following the leader");
        Self::stop_idle(&mut fetchers);
    }

    fn spawn(&self, leader: i32, addr: SocketAddr, id: usize) -> Fetcher {
        let shared = Arc::new(Shared::with_stats(self.stats.clone()));
        let endpoint = self.endpoints.connect(leader, addr, id);
        let task = tokio::spawn(thread::run(
            shared.clone(),
            endpoint,
            self.settings.clone(),
            self.cluster.clone(),
            self.quotas.clone(),
        ));
        Fetcher { addr, shared, task }
    }

    /// Stops replicating `tp` (it leads now, has no leader, or is gone).
    pub fn remove_partition(&self, tp: &TopicPartition) {
        let mut fetchers = self.fetchers.lock();
        for f in fetchers.values() {
            f.shared.partitions.lock().remove(tp);
        }
        Self::stop_idle(&mut fetchers);
    }

    /// Fetchers with no partition left end (Kafka's `shutdownIdleFetcherThreads`).
    fn stop_idle(fetchers: &mut HashMap<(i32, usize), Fetcher>) {
        fetchers.retain(|_, f| {
            let idle = f.shared.partitions.lock().is_empty();
            if idle {
                f.stop();
            }
            !idle
        });
    }

    /// The leader epoch `tp` is fetched at, if it is fetched.
    pub fn fetching(&self, tp: &TopicPartition) -> Option<i32> {
        self.fetchers
            .lock()
            .values()
            .find_map(|f| f.shared.partitions.lock().get(tp).map(|s| s.leader_epoch))
    }

    /// What every fetcher of this broker has sent so far.
    pub fn stats(&self) -> FetcherStatsSnapshot {
        self.stats.snapshot()
    }

    /// How many fetcher tasks run.
    pub fn fetcher_count(&self) -> usize {
        self.fetchers.lock().len()
    }

    /// Stops every fetcher.
    pub fn shutdown(&self) {
        for (_, f) in self.fetchers.lock().drain() {
            f.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fetcher_ids_are_kafkas() {
        // Kafka: Utils.abs(31 * "t".hashCode() + 0) % 3; "t".hashCode() == 116.
        assert_eq!(fetcher_id(&TopicPartition::new("t", 0), 3), (31 * 116) % 3);
        assert_eq!(java_string_hash("topic"), 110_546_223);
        for p in 0..10 {
            assert_eq!(fetcher_id(&TopicPartition::new("x", p), 1), 0);
        }
    }
}
