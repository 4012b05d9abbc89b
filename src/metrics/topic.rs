//! Kafka's `BrokerTopicMetrics`: per topic and for all topics, bytes and records in and
//! out, produce and fetch requests per partition and their unexpected failures, and
//! the bytes of batches refused as too large. Replication bytes in and out are counted
//! for all topics only, as Kafka counts them (a dashboard summing them over the `topic`
//! label would otherwise count each byte twice).
//!
//! `ReplicaManager` marks them, for every origin of an append (client, coordinator,
//! transaction marker, replication) and of a fetch (consumer, follower). A partition
//! holds its topic's [`TopicCounters`], resolved when it is hosted, so a mark is two
//! relaxed atomic adds (the topic's and the all-topics one) with no lookup, each on the
//! marking thread's own stripe ([`super::striped`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::exposition::{Exposition, Kind, Sink};
use super::striped::Striped;

/// One set of counters (a topic's, or all topics'), striped.
#[derive(Default)]
pub struct TopicStats {
    stripes: Striped<TopicMarks>,
}

impl TopicStats {
    /// One counter's total over the stripes.
    pub fn total(&self, field: Field) -> u64 {
        self.stripes
            .iter()
            .map(|m| field(m).load(Ordering::Relaxed))
            .sum()
    }
}

/// One stripe of a [`TopicStats`].
#[derive(Default)]
pub struct TopicMarks {
    /// `MessagesInPerSec`: records appended as leader.
    pub messages_in: AtomicU64,
    /// `BytesInPerSec`: bytes appended as leader (clients, coordinators, markers).
    pub bytes_in: AtomicU64,
    /// `BytesOutPerSec`: record bytes returned to consumers.
    pub bytes_out: AtomicU64,
    /// `BytesRejectedPerSec`: bytes of batches refused as larger than the topic allows.
    pub bytes_rejected: AtomicU64,
    /// `TotalProduceRequestsPerSec`: appends to a partition led here (one per partition
    /// of a request).
    pub total_produce_requests: AtomicU64,
    /// `TotalFetchRequestsPerSec`: reads of a partition (one per partition of a fetch).
    pub total_fetch_requests: AtomicU64,
    /// `FailedProduceRequestsPerSec`: appends that failed unexpectedly (not for a known
    /// refusal such as NOT_LEADER_OR_FOLLOWER or MESSAGE_TOO_LARGE).
    pub failed_produce_requests: AtomicU64,
    /// `FailedFetchRequestsPerSec`: reads that failed unexpectedly.
    pub failed_fetch_requests: AtomicU64,
    /// `ReplicationBytesInPerSec` (all topics only): bytes appended as follower.
    pub replication_bytes_in: AtomicU64,
    /// `ReplicationBytesOutPerSec` (all topics only): record bytes read by followers.
    pub replication_bytes_out: AtomicU64,
}

/// A topic's counters and the all-topics ones, held by each of its partitions.
#[derive(Clone)]
pub struct TopicCounters {
    pub topic: Arc<TopicStats>,
    pub all: Arc<TopicStats>,
}

/// Each counter: the field, its name as Strimzi's rules export it, its help, and
/// whether Kafka counts it per topic.
pub type Field = fn(&TopicMarks) -> &AtomicU64;
const COUNTERS: [(Field, &str, &str, bool); 10] = [
    (
        |s| &s.messages_in,
        "kafka_server_brokertopicmetrics_messagesin_total",
        "Records appended as leader",
        true,
    ),
    (
        |s| &s.bytes_in,
        "kafka_server_brokertopicmetrics_bytesin_total",
        "Bytes appended as leader by clients, coordinators and markers",
        true,
    ),
    (
        |s| &s.bytes_out,
        "kafka_server_brokertopicmetrics_bytesout_total",
        "Record bytes returned to consumers",
        true,
    ),
    (
        |s| &s.bytes_rejected,
        "kafka_server_brokertopicmetrics_bytesrejected_total",
        "Bytes of batches refused as too large",
        true,
    ),
    (
        |s| &s.total_produce_requests,
        "kafka_server_brokertopicmetrics_totalproducerequests_total",
        "Produce requests, per partition",
        true,
    ),
    (
        |s| &s.total_fetch_requests,
        "kafka_server_brokertopicmetrics_totalfetchrequests_total",
        "Fetch requests, per partition",
        true,
    ),
    (
        |s| &s.failed_produce_requests,
        "kafka_server_brokertopicmetrics_failedproducerequests_total",
        "Produce requests that failed unexpectedly, per partition",
        true,
    ),
    (
        |s| &s.failed_fetch_requests,
        "kafka_server_brokertopicmetrics_failedfetchrequests_total",
        "Fetch requests that failed unexpectedly, per partition",
        true,
    ),
    (
        |s| &s.replication_bytes_in,
        "kafka_server_brokertopicmetrics_replicationbytesin_total",
        "Bytes appended as follower",
        false,
    ),
    (
        |s| &s.replication_bytes_out,
        "kafka_server_brokertopicmetrics_replicationbytesout_total",
        "Record bytes read by followers",
        false,
    ),
];

impl TopicCounters {
    /// Counters in no registry, for a partition made outside a broker (tests, tools).
    pub fn unregistered() -> TopicCounters {
        TopicCounters {
            topic: Arc::default(),
            all: Arc::default(),
        }
    }

    fn add(&self, field: impl Fn(&TopicMarks) -> &AtomicU64, n: u64) {
        field(self.topic.stripes.mine()).fetch_add(n, Ordering::Relaxed);
        field(self.all.stripes.mine()).fetch_add(n, Ordering::Relaxed);
    }

    /// A leader's fresh append of `records` records in `bytes` bytes.
    pub fn appended(&self, records: u64, bytes: u64) {
        self.add(|s| &s.messages_in, records);
        self.add(|s| &s.bytes_in, bytes);
    }

    /// One partition of a produce (or coordinator) append tried here as leader.
    pub fn produce_request(&self) {
        self.add(|s| &s.total_produce_requests, 1);
    }

    pub fn failed_produce_request(&self) {
        self.add(|s| &s.failed_produce_requests, 1);
    }

    pub fn bytes_rejected(&self, bytes: u64) {
        self.add(|s| &s.bytes_rejected, bytes);
    }

    /// One partition of a fetch read here.
    pub fn fetch_request(&self) {
        self.add(|s| &s.total_fetch_requests, 1);
    }

    pub fn failed_fetch_request(&self) {
        self.add(|s| &s.failed_fetch_requests, 1);
    }

    /// Record bytes returned to a consumer.
    pub fn bytes_out(&self, bytes: u64) {
        self.add(|s| &s.bytes_out, bytes);
    }

    /// Bytes appended as follower (all topics only).
    pub fn replication_bytes_in(&self, bytes: u64) {
        let all = self.all.stripes.mine();
        all.replication_bytes_in.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Record bytes returned to a follower (all topics only).
    pub fn replication_bytes_out(&self, bytes: u64) {
        let all = self.all.stripes.mine();
        all.replication_bytes_out
            .fetch_add(bytes, Ordering::Relaxed);
    }
}

/// The all-topics counters and each topic's.
pub struct BrokerTopicMetrics {
    all: Arc<TopicStats>,
    /// What a request naming a partition not hosted here marks: all topics only.
    unhosted: TopicCounters,
    /// Written when a topic's first partition is hosted or the topic is deleted; a
    /// scrape reads it for as long as it takes to copy the `Arc`s. No request path
    /// takes it.
    topics: parking_lot::RwLock<BTreeMap<String, Arc<TopicStats>>>,
}

impl Default for BrokerTopicMetrics {
    fn default() -> Self {
        let all = Arc::new(TopicStats::default());
        BrokerTopicMetrics {
            unhosted: TopicCounters {
                topic: Arc::default(),
                all: all.clone(),
            },
            all,
            topics: Default::default(),
        }
    }
}

impl BrokerTopicMetrics {
    /// The counters of `topic` (created at first use).
    pub fn for_topic(&self, topic: &str) -> TopicCounters {
        let existing = self.topics.read().get(topic).cloned();
        let stats = match existing {
            Some(s) => s,
            None => self
                .topics
                .write()
                .entry(topic.to_string())
                .or_default()
                .clone(),
        };
        TopicCounters {
            topic: stats,
            all: self.all.clone(),
        }
    }

    /// The all-topics counters, for a request naming a partition not hosted here.
    pub fn all_topics(&self) -> &TopicCounters {
        &self.unhosted
    }

    /// Drops a deleted topic's series (Kafka's `removeMetrics`); partitions still holding
    /// its counters count into counters no longer exported.
    pub fn remove_topic(&self, topic: &str) {
        self.topics.write().remove(topic);
    }

    /// Every counter family: the all-topics series without a `topic` label, then one
    /// per topic.
    pub async fn write(&self, out: &mut Exposition, sink: &mut dyn Sink) -> std::io::Result<()> {
        let topics: Vec<(String, Arc<TopicStats>)> = self
            .topics
            .read()
            .iter()
            .map(|(t, s)| (t.clone(), s.clone()))
            .collect();
        for (field, name, help, per_topic) in COUNTERS {
            out.family(name, Kind::Counter, help);
            out.sample("", &[], self.all.total(field));
            if !per_topic {
                continue;
            }
            for (topic, stats) in &topics {
                let n = stats.total(field);
                out.sample("", &[("topic", topic)], n);
                out.flush_if_full(sink).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::exposition::{Collected, Format};

    async fn scraped(m: &BrokerTopicMetrics) -> String {
        let mut out = Exposition::new(Format::Prometheus);
        let mut sink = Collected::default();
        m.write(&mut out, &mut sink).await.unwrap();
        sink.0 + out.as_str()
    }

    #[tokio::test]
    async fn per_topic_and_all_topics_series() {
        let m = BrokerTopicMetrics::default();
        let a = m.for_topic("a");
        let b = m.for_topic("b");
        a.appended(3, 300);
        b.appended(1, 50);
        a.replication_bytes_in(10);
        let text = scraped(&m).await;
        for line in [
            "kafka_server_brokertopicmetrics_messagesin_total 4\n",
            "kafka_server_brokertopicmetrics_messagesin_total{topic=\"a\"} 3\n",
            "kafka_server_brokertopicmetrics_bytesin_total{topic=\"b\"} 50\n",
            "kafka_server_brokertopicmetrics_bytesin_total 350\n",
            "kafka_server_brokertopicmetrics_replicationbytesin_total 10\n",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        assert!(!text.contains("replicationbytesin_total{topic"));
        m.remove_topic("a");
        assert!(!scraped(&m).await.contains("topic=\"a\""));
    }
}
