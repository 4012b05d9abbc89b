//! The ZooKeeper session of a ZooKeeper-mode broker, as Kafka's
//! `kafka.server:type=SessionExpireListener` meters export it through Strimzi's rules
//! (`kafka_server_sessionexpirelistener_zookeeperexpires_total`, `_zookeeperdisconnects_total`,
//! `_zookeepersyncconnects_total`, `_zookeeperauthfailures_total`). Kafka's
//! `SessionState` gauge is a string the JMX exporter cannot export; skua adds
//! `skua_zookeeper_session_state{state}`, 1 for the current state.
//!
//! The session supervisor (`controller::zk::member`) marks them as it sees the
//! session's events. Each session records its requests' time to their answers in
//! `request_latency`, exported as Kafka's `ZooKeeperClientMetrics` histogram
//! (`kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms`, ms percentiles over
//! the last minutes, as the other Yammer histograms).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::exposition::{Exposition, Kind};
use super::histogram::{LatencyHistogram, Window, PERCENTILES};

/// The session's state, as Kafka's `SessionState` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum SessionState {
    NotConnected = 0,
    Connected = 1,
    /// Lost the connection; the client is reconnecting.
    Connecting = 2,
    Expired = 3,
    AuthFailed = 4,
    Closed = 5,
}

const STATES: [(SessionState, &str); 6] = [
    (SessionState::NotConnected, "NOT_CONNECTED"),
    (SessionState::Connected, "CONNECTED"),
    (SessionState::Connecting, "CONNECTING"),
    (SessionState::Expired, "EXPIRED"),
    (SessionState::AuthFailed, "AUTH_FAILED"),
    (SessionState::Closed, "CLOSED"),
];

#[derive(Default)]
pub struct SessionMetrics {
    state: AtomicU8,
    expires: AtomicU64,
    disconnects: AtomicU64,
    sync_connects: AtomicU64,
    auth_failures: AtomicU64,
    /// Every session's requests to ZooKeeper, the time to each answer.
    pub request_latency: Arc<LatencyHistogram>,
    latency_window: Window,
}

impl SessionMetrics {
    /// A session connected (first, again after a disconnection, or a new session).
    pub fn connected(&self) {
        self.sync_connects.fetch_add(1, Ordering::Relaxed);
        self.set(SessionState::Connected);
    }

    pub fn disconnected(&self) {
        self.disconnects.fetch_add(1, Ordering::Relaxed);
        self.set(SessionState::Connecting);
    }

    pub fn expired(&self) {
        self.expires.fetch_add(1, Ordering::Relaxed);
        self.set(SessionState::Expired);
    }

    pub fn auth_failed(&self) {
        self.auth_failures.fetch_add(1, Ordering::Relaxed);
        self.set(SessionState::AuthFailed);
    }

    pub fn closed(&self) {
        self.set(SessionState::Closed);
    }

    fn set(&self, s: SessionState) {
        self.state.store(s as u8, Ordering::Relaxed);
    }

    pub fn state(&self) -> SessionState {
        let v = self.state.load(Ordering::Relaxed);
        STATES
            .iter()
            .map(|(s, _)| *s)
            .find(|s| *s as u8 == v)
            .unwrap_or(SessionState::NotConnected)
    }

    pub fn write(&self, out: &mut Exposition, now: Instant) {
        let counters: [(&'static str, &str, &AtomicU64); 4] = [
            (
                "kafka_server_sessionexpirelistener_zookeeperexpires_total",
                "ZooKeeper sessions expired",
                &self.expires,
            ),
            (
                "kafka_server_sessionexpirelistener_zookeeperdisconnects_total",
                "ZooKeeper disconnections",
                &self.disconnects,
            ),
            (
                "kafka_server_sessionexpirelistener_zookeepersyncconnects_total",
                "ZooKeeper connections made",
                &self.sync_connects,
            ),
            (
                "kafka_server_sessionexpirelistener_zookeeperauthfailures_total",
                "ZooKeeper authentication failures",
                &self.auth_failures,
            ),
        ];
        for (name, help, n) in counters {
            out.family(name, Kind::Counter, help);
            out.sample("", &[], n.load(Ordering::Relaxed));
        }
        out.family(
            "skua_zookeeper_session_state",
            Kind::Gauge,
            "The ZooKeeper session's state (1 for the current one)",
        );
        let state = self.state();
        for (s, name) in STATES {
            out.sample("", &[("state", name)], s == state);
        }
        let counts = self.request_latency.counts();
        let recent = self.latency_window.recent(&counts, now);
        out.family(
            "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms",
            Kind::Summary,
            "Time of a ZooKeeper request to its answer, ms (Kafka's percentiles over the last 5 minutes)",
        );
        for (q, label) in PERCENTILES {
            out.sample("", &[("quantile", label)], recent.quantile_ns(q) / 1e6);
        }
        out.sample("_sum", &[], counts.sum_ns() as f64 / 1e6);
        out.sample("_count", &[], counts.count());
    }
}
