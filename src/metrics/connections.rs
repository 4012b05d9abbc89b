//! Connections per listener, as Kafka's `socket-server-metrics` (one per listener and
//! network processor) and Strimzi's rule export them:
//! `kafka_server_socket_server_metrics_connection_count{listener,networkProcessor}` and
//! the `connection_creation_total`, `connection_close_total` and
//! `failed_authentication_total` counts. skua has no network processors; its series
//! carry `networkProcessor="0"` so queries grouping by it keep working.
//!
//! A listener's counters are resolved when it starts serving; a connection holds an
//! [`OpenConnection`] that counts it closed when dropped.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use super::exposition::{Exposition, Kind};

/// One listener's counts.
#[derive(Default)]
pub struct ListenerConnections {
    open: AtomicI64,
    created: AtomicU64,
    closed: AtomicU64,
    failed_authentication: AtomicU64,
}

impl ListenerConnections {
    /// A connection accepted (for an SSL listener: once its handshake succeeded).
    pub fn opened(self: &Arc<Self>) -> OpenConnection {
        self.open.fetch_add(1, Ordering::Relaxed);
        self.created.fetch_add(1, Ordering::Relaxed);
        OpenConnection(self.clone())
    }

    /// A connection whose authentication failed (a TLS handshake refused).
    pub fn failed_authentication(&self) {
        self.failed_authentication.fetch_add(1, Ordering::Relaxed);
    }

    pub fn open_count(&self) -> i64 {
        self.open.load(Ordering::Relaxed)
    }
}

/// Held by a connection while it is open.
pub struct OpenConnection(Arc<ListenerConnections>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
        self.0.closed.fetch_add(1, Ordering::Relaxed);
    }
}

#[derive(Default)]
pub struct ConnectionMetrics {
    /// Written when a listener starts; read by scrapes. No connection takes it.
    listeners: parking_lot::RwLock<BTreeMap<String, Arc<ListenerConnections>>>,
}

impl ConnectionMetrics {
    /// The counters of listener `name` (the same ones if it is bound again).
    pub fn listener(&self, name: &str) -> Arc<ListenerConnections> {
        self.listeners
            .write()
            .entry(name.to_string())
            .or_default()
            .clone()
    }

    pub fn write(&self, out: &mut Exposition) {
        let listeners: Vec<(String, Arc<ListenerConnections>)> = self
            .listeners
            .read()
            .iter()
            .map(|(n, l)| (n.clone(), l.clone()))
            .collect();
        type Read = fn(&ListenerConnections) -> i64;
        let families: [(&'static str, Kind, &str, Read); 4] = [
            (
                "kafka_server_socket_server_metrics_connection_count",
                Kind::Gauge,
                "Connections open",
                |l| l.open.load(Ordering::Relaxed),
            ),
            (
                "kafka_server_socket_server_metrics_connection_creation_total",
                Kind::Counter,
                "Connections accepted",
                |l| l.created.load(Ordering::Relaxed) as i64,
            ),
            (
                "kafka_server_socket_server_metrics_connection_close_total",
                Kind::Counter,
                "Connections closed",
                |l| l.closed.load(Ordering::Relaxed) as i64,
            ),
            (
                "kafka_server_socket_server_metrics_failed_authentication_total",
                Kind::Counter,
                "Connections whose authentication failed",
                |l| l.failed_authentication.load(Ordering::Relaxed) as i64,
            ),
        ];
        for (name, kind, help, value) in families {
            out.family(name, kind, help);
            for (listener, l) in &listeners {
                let labels = [("listener", listener.as_str()), ("networkProcessor", "0")];
                out.sample("", &labels, value(l));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_counts_open_until_dropped() {
        let m = ConnectionMetrics::default();
        let l = m.listener("PLAINTEXT");
        let a = l.opened();
        let b = l.opened();
        drop(a);
        assert_eq!(l.open_count(), 1);
        let mut out = Exposition::new(super::super::Format::Prometheus);
        m.write(&mut out);
        let text = out.as_str();
        assert!(text.contains("kafka_server_socket_server_metrics_connection_count{listener=\"PLAINTEXT\",networkProcessor=\"0\"} 1\n"));
        assert!(text.contains("kafka_server_socket_server_metrics_connection_creation_total{listener=\"PLAINTEXT\",networkProcessor=\"0\"} 2\n"));
        drop(b);
        assert_eq!(m.listener("PLAINTEXT").open_count(), 0);
    }
}
