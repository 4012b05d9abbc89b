//! Replication throttles (KIP-73, Kafka's `ReplicationQuotaManager`): a byte rate a
//! broker's leaders may serve to replicas that are catching up, and one its followers may
//! fetch at, so moving a replica does not starve producers and consumers.
//!
//! - The bounds are the per-broker dynamic configs `leader.replication.throttled.rate`
//!   and `follower.replication.throttled.rate` (bytes/s; unset: no bound).
//! - Only the partitions a topic names are throttled: `leader.replication.throttled.replicas`
//!   and `follower.replication.throttled.replicas` list `partition:broker` pairs (or `*`),
//!   and a broker throttles a partition when the list names it with its own id.
//! - The rate is measured as Kafka's `Rate` measures it: the bytes of the last
//!   `replication.quota.window.num` samples of `replication.quota.window.size.seconds`
//!   each, over at least all but one of those windows.
//! - A leader leaves a throttled partition's records out of a follower's fetch while the
//!   rate is over the bound and that follower is not in the ISR; a follower leaves a
//!   throttled partition out of its fetches while over the bound and not caught up to
//!   the leader's high watermark. In-sync replicas are never held back, so acks=all
//!   latency does not depend on the throttle.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use crate::log::TopicPartition;

pub const LEADER_RATE: &str = "leader.replication.throttled.rate";
pub const FOLLOWER_RATE: &str = "follower.replication.throttled.rate";
pub const LEADER_REPLICAS: &str = "leader.replication.throttled.replicas";
pub const FOLLOWER_REPLICAS: &str = "follower.replication.throttled.replicas";

/// The leader's and the follower's throttle of one broker.
pub struct ReplicationQuotas {
    pub leader: ReplicationQuota,
    pub follower: ReplicationQuota,
}

impl ReplicationQuotas {
    pub fn new(window_num: usize, window_size: Duration) -> Self {
        ReplicationQuotas {
            leader: ReplicationQuota::new(window_num, window_size),
            follower: ReplicationQuota::new(window_num, window_size),
        }
    }

    /// Takes the rates from this broker's own dynamic configs (Kafka reads them from the
    /// per-broker entity only, not from the cluster default).
    pub fn update_rates(&self, broker_configs: &BTreeMap<String, String>) {
        self.leader.set_bound(rate_of(broker_configs, LEADER_RATE));
        self.follower
            .set_bound(rate_of(broker_configs, FOLLOWER_RATE));
    }

    /// Takes the throttled partitions of `topic` from its configs.
    pub fn update_topic(&self, broker_id: i32, topic: &str, configs: &BTreeMap<String, String>) {
        let parse = |key| configs.get(key).map(|v| Throttled::parse(v, broker_id));
        self.leader.mark(topic, parse(LEADER_REPLICAS));
        self.follower.mark(topic, parse(FOLLOWER_REPLICAS));
    }

    pub fn remove_topic(&self, topic: &str) {
        self.leader.mark(topic, None);
        self.follower.mark(topic, None);
    }
}

/// A rate config's bound; unset or not a non-negative number: none (logged).
fn rate_of(configs: &BTreeMap<String, String>, key: &str) -> Option<f64> {
    let value = configs.get(key)?;
    match value.trim().parse::<i64>() {
        Ok(n) if n >= 0 => Some(n as f64),
        _ => {
            tracing::warn!(
                key,
                value,
                "replication throttle rate not a number of bytes/s; not bounded"
            );
            None
        }
    }
}

/// The partitions of one topic a throttle applies to.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Throttled {
    All,
    Partitions(BTreeSet<i32>),
}

impl Throttled {
    /// Kafka's `parseThrottledPartitions`: `*`, or the partitions of the `partition:broker`
    /// pairs naming `broker_id`. Pairs that are not two numbers are passed over.
    fn parse(value: &str, broker_id: i32) -> Throttled {
        let value = value.trim();
        if value == "*" {
            return Throttled::All;
        }
        let partitions = value
            .split(',')
            .filter_map(|pair| {
                let (p, b) = pair.trim().split_once(':')?;
                let (p, b) = (p.trim().parse::<i32>().ok()?, b.trim().parse::<i32>().ok()?);
                (b == broker_id).then_some(p)
            })
            .collect();
        Throttled::Partitions(partitions)
    }

    fn contains(&self, partition: i32) -> bool {
        match self {
            Throttled::All => true,
            Throttled::Partitions(p) => p.contains(&partition),
        }
    }
}

/// One direction's throttle: its bound, its measured rate and the throttled partitions.
pub struct ReplicationQuota {
    /// Bytes per second; `None`: unbounded.
    bound: RwLock<Option<f64>>,
    rate: Mutex<Rate>,
    throttled: RwLock<HashMap<String, Throttled>>,
}

impl ReplicationQuota {
    pub fn new(window_num: usize, window_size: Duration) -> Self {
        ReplicationQuota {
            bound: RwLock::new(None),
            rate: Mutex::new(Rate::new(window_num, window_size)),
            throttled: RwLock::new(HashMap::new()),
        }
    }

    fn set_bound(&self, bound: Option<f64>) {
        let mut current = self.bound.write();
        if *current != bound {
            tracing::info!(?bound, "replication throttle rate (bytes/s)");
            *current = bound;
        }
    }

    fn mark(&self, topic: &str, throttled: Option<Throttled>) {
        let mut map = self.throttled.write();
        match throttled {
            Some(t) => map.insert(topic.to_string(), t),
            None => map.remove(topic),
        };
    }

    /// Whether `tp` is one of the throttled partitions (Kafka's `isThrottled`).
    pub fn is_throttled(&self, tp: &TopicPartition) -> bool {
        self.throttled
            .read()
            .get(&tp.topic)
            .is_some_and(|t| t.contains(tp.partition))
    }

    /// Whether the measured rate is over the bound (Kafka's `isQuotaExceeded`).
    pub fn is_quota_exceeded(&self) -> bool {
        self.is_quota_exceeded_at(Instant::now())
    }

    fn is_quota_exceeded_at(&self, now: Instant) -> bool {
        let Some(bound) = *self.bound.read() else {
            return false;
        };
        self.rate.lock().measure(now) > bound
    }

    /// Counts bytes replicated for throttled partitions.
    pub fn record(&self, bytes: usize) {
        self.record_at(bytes, Instant::now());
    }

    fn record_at(&self, bytes: usize, now: Instant) {
        if bytes > 0 {
            self.rate.lock().record(bytes as f64, now);
        }
    }

    /// Whether `tp` is held back for a replica out of sync: throttled and over the bound
    /// (Kafka's `shouldLeaderThrottle` / `shouldFollowerThrottle`).
    pub fn holds_back(&self, tp: &TopicPartition, in_sync: bool) -> bool {
        !in_sync && self.is_throttled(tp) && self.is_quota_exceeded()
    }
}

/// Kafka's `Rate` over a `SampledStat`: at most `samples_max` samples, each opened by the
/// first record after the previous one's window ended.
struct Rate {
    samples_max: usize,
    window: Duration,
    /// (start, bytes), oldest first.
    samples: VecDeque<(Instant, f64)>,
}

impl Rate {
    fn new(samples_max: usize, window: Duration) -> Self {
        Rate {
            samples_max: samples_max.max(1),
            window: window.max(Duration::from_millis(1)),
            samples: VecDeque::new(),
        }
    }

    fn record(&mut self, bytes: f64, now: Instant) {
        self.purge(now);
        match self.samples.back_mut() {
            Some((start, total)) if now.saturating_duration_since(*start) < self.window => {
                *total += bytes
            }
            _ => {
                self.samples.push_back((now, bytes));
                if self.samples.len() > self.samples_max {
                    self.samples.pop_front();
                }
            }
        }
    }

    /// Drops samples older than every window together (Kafka's `purgeObsoleteSamples`).
    fn purge(&mut self, now: Instant) {
        let expiry = self.window * self.samples_max as u32;
        self.samples
            .retain(|(start, _)| now.saturating_duration_since(*start) < expiry);
    }

    /// Bytes per second: the samples' total over the time since the oldest began, but
    /// never over fewer than `samples_max - 1` windows, so a first burst counts against a
    /// full measuring span (Kafka's `Rate.windowSize`).
    fn measure(&mut self, now: Instant) -> f64 {
        self.purge(now);
        let total: f64 = self.samples.iter().map(|(_, b)| b).sum();
        let elapsed = self.samples.front().map_or(Duration::ZERO, |(start, _)| {
            now.saturating_duration_since(*start)
        });
        let full_windows = (elapsed.as_nanos() / self.window.as_nanos()) as u32;
        let min_full_windows = self.samples_max as u32 - 1;
        let span = match full_windows < min_full_windows {
            true => elapsed + self.window * (min_full_windows - full_windows),
            false => elapsed,
        };
        total / span.as_secs_f64().max(0.001)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn throttled_replicas_name_this_broker() {
        assert_eq!(Throttled::parse("*", 1), Throttled::All);
        let t = Throttled::parse("0:1, 1:2,2:1,x:1,3", 1);
        assert_eq!(t, Throttled::Partitions([0, 2].into()));
        assert_eq!(
            Throttled::parse("", 1),
            Throttled::Partitions(BTreeSet::new())
        );

        let q = ReplicationQuotas::new(11, Duration::from_secs(1));
        q.update_topic(
            2,
            "t",
            &configs(&[(LEADER_REPLICAS, "0:1,1:2"), (FOLLOWER_REPLICAS, "*")]),
        );
        assert!(!q.leader.is_throttled(&TopicPartition::new("t", 0)));
        assert!(q.leader.is_throttled(&TopicPartition::new("t", 1)));
        assert!(q.follower.is_throttled(&TopicPartition::new("t", 7)));
        assert!(!q.follower.is_throttled(&TopicPartition::new("u", 0)));
        q.update_topic(2, "t", &configs(&[]));
        assert!(!q.leader.is_throttled(&TopicPartition::new("t", 1)));
        assert!(!q.follower.is_throttled(&TopicPartition::new("t", 7)));
    }

    #[test]
    fn rate_spans_at_least_all_but_one_window() {
        let t0 = Instant::now();
        let mut r = Rate::new(11, Duration::from_secs(1));
        r.record(10_000.0, t0);
        // A burst at once is measured over ten windows.
        assert_eq!(r.measure(t0), 1_000.0);
        // 2 000 bytes a second for twenty seconds: measured at 2 000/s.
        for s in 1..=20 {
            r.record(2_000.0, t0 + Duration::from_secs(s));
        }
        let rate = r.measure(t0 + Duration::from_millis(20_500));
        assert!((1_900.0..=2_100.0).contains(&rate), "{rate}");
        // Everything forgotten after every window passed.
        assert_eq!(r.measure(t0 + Duration::from_secs(40)), 0.0);
    }

    #[test]
    fn quota_is_exceeded_only_over_a_bound() {
        let q = ReplicationQuotas::new(2, Duration::from_secs(1));
        let t0 = Instant::now();
        let tp = TopicPartition::new("t", 0);
        q.leader.record_at(5_000, t0);
        assert!(!q.leader.is_quota_exceeded_at(t0), "no bound set");
        q.update_rates(&configs(&[(LEADER_RATE, "1000")]));
        assert!(q.leader.is_quota_exceeded_at(t0));
        assert!(!q.follower.is_quota_exceeded_at(t0));
        // Not a throttled partition, or an in-sync replica: never held back.
        q.update_topic(1, "t", &configs(&[(LEADER_REPLICAS, "*")]));
        assert!(q.leader.holds_back(&tp, false));
        assert!(!q.leader.holds_back(&tp, true));
        assert!(!q.leader.holds_back(&TopicPartition::new("u", 0), false));
        // The burst has left the window.
        assert!(!q.leader.is_quota_exceeded_at(t0 + Duration::from_secs(3)));
        q.update_rates(&configs(&[]));
        assert!(!q.leader.holds_back(&tp, false));
    }
}
