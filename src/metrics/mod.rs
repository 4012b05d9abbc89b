//! The broker's metrics, served over HTTP (`metrics.listener`, see [`http`]) in
//! Prometheus' text format or OpenMetrics.
//!
//! Names follow what the Prometheus JMX exporter with Strimzi's `kafka-metrics.yaml`
//! rules makes of Kafka's MBeans (`kafka.server:type=BrokerTopicMetrics,
//! name=BytesInPerSec,topic=t` becomes `kafka_server_brokertopicmetrics_bytesin_total
//! {topic="t"}`), so dashboards and alerts written for Kafka read skua; consumer lag
//! takes kafka_exporter's names. What Kafka does not have is named `skua_*`.
//!
//! Two kinds of metric:
//! - counters and histograms marked on the request paths ([`request`], [`topic`],
//!   [`connections`], [`zookeeper`], the ISR changes here): each mark is a relaxed
//!   atomic add on a handle resolved once (when the broker starts, a listener binds or
//!   a partition is hosted), with no lock, allocation or lookup; those every request
//!   marks are striped per thread ([`striped`]);
//! - gauges computed when scraped ([`scrape`]), from the replica manager, the
//!   controller, the group coordinator and `/proc`: nothing is kept up to date for
//!   them between scrapes, so they cost the request paths nothing.

pub mod connections;
pub mod controller;
pub mod exposition;
pub mod histogram;
pub mod http;
pub mod process;
pub mod request;
pub mod runtime;
pub mod scrape;
pub mod striped;
pub mod topic;
pub mod zookeeper;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

pub use connections::ConnectionMetrics;
pub use exposition::{Exposition, Format};
pub use request::{ApiMetrics, FetchSide, RequestMetrics};
pub use topic::{BrokerTopicMetrics, TopicCounters};

/// Every metric marked on the request paths of one broker.
#[derive(Default)]
pub struct Metrics {
    /// Per API: requests, the RequestMetrics time split, error codes.
    pub requests: RequestMetrics,
    /// Per topic and all topics: bytes and records in and out, marked by `ReplicaManager`.
    pub topics: BrokerTopicMetrics,
    /// ISR changes this broker's leaders made (Kafka's `IsrShrinksPerSec` and
    /// `IsrExpandsPerSec` of `ReplicaManager`).
    pub isr: IsrChanges,
    /// Connections per listener.
    pub connections: ConnectionMetrics,
    /// The runtime workers' idle fraction, between scrapes.
    pub runtime: runtime::RuntimeIdle,
}

/// The ISR changes a leader's proposals committed.
#[derive(Default)]
pub struct IsrChanges {
    pub shrinks: AtomicU64,
    pub expands: AtomicU64,
}

impl IsrChanges {
    /// An ISR of `before` members became one of `after`.
    pub fn changed(&self, before: usize, after: usize) {
        if after < before {
            self.shrinks.fetch_add(1, Ordering::Relaxed);
        } else if after > before {
            self.expands.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// The marked metrics in Prometheus' text format (a scrape adds the computed ones;
    /// see [`scrape`]).
    pub async fn encode_text(&self) -> String {
        let mut out = Exposition::new(Format::Prometheus);
        let mut sink = exposition::Collected::default();
        // A Collected sink cannot fail.
        let _ = self.write(&mut out, &mut sink, Instant::now()).await;
        out.finish();
        sink.0 + out.as_str()
    }

    /// Writes every marked family.
    pub async fn write(
        &self,
        out: &mut Exposition,
        sink: &mut dyn exposition::Sink,
        now: Instant,
    ) -> std::io::Result<()> {
        self.topics.write(out, sink).await?;
        self.requests.write(out, now);
        self.connections.write(out);
        self.runtime.write(out, now);
        out.family(
            "kafka_server_replicamanager_isrshrinks_total",
            exposition::Kind::Counter,
            "ISR shrinks committed by this broker's leaders",
        );
        out.sample("", &[], self.isr.shrinks.load(Ordering::Relaxed));
        out.family(
            "kafka_server_replicamanager_isrexpands_total",
            exposition::Kind::Counter,
            "ISR expansions committed by this broker's leaders",
        );
        out.sample("", &[], self.isr.expands.load(Ordering::Relaxed));
        out.flush_if_full(sink).await
    }
}
