//! The broker's metrics registry, reachable from every layer through the broker
//! (`Broker::metrics`) and, for the replica layer, through `ReplicaManager`.
//!
//! Names follow what the Prometheus JMX exporter with Strimzi's rules makes of Kafka's
//! MBeans (`kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t` becomes
//! `kafka_server_brokertopicmetrics_bytesin_total{topic="t"}`), so dashboards written for
//! Kafka read skua.
//!
//! Counting costs no lock and no allocation on the request paths: every handle a request
//! marks (an API's counters and histograms, a topic's byte counters) is resolved once,
//! when the registry or the partition is made, and a mark is an atomic add on it.

pub mod request;
pub mod topic;

use prometheus::{Encoder, Registry, TextEncoder};

pub use request::{ApiMetrics, RequestMetrics};
pub use topic::{BrokerTopicMetrics, TopicCounters};

/// Every metric of one broker.
pub struct Metrics {
    registry: Registry,
    /// Per API: requests, the RequestMetrics time split, error codes.
    pub requests: RequestMetrics,
    /// Per topic: bytes and records in and out, marked by `ReplicaManager`.
    pub topics: BrokerTopicMetrics,
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let requests = RequestMetrics::register(&registry);
        let topics = BrokerTopicMetrics::register(&registry);
        Metrics {
            registry,
            requests,
            topics,
        }
    }

    /// Every metric in Prometheus' text exposition format.
    pub fn encode_text(&self) -> String {
        let mut out = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::error!(error = %e, "cannot encode the metrics");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Registers `metric` in `registry`. Registration fails only for a name registered twice
/// or an invalid one, both fixed at compile time here: a broken invariant, not an error
/// to route around, so it panics at startup rather than serving without the metric.
fn register<M: prometheus::core::Collector + Clone + 'static>(registry: &Registry, metric: M) -> M {
    registry
        .register(Box::new(metric.clone()))
        .expect("metric names are constants, each registered once");
    metric
}
