//! Kafka's `RequestMetrics`, per API: requests per version, their errors per code, and
//! the split of each request's time as Kafka splits it:
//! - queue: from the frame read to its handler's start (waiting behind the requests
//!   before it on its connection, answered in order);
//! - local: the handler's own work (the time its future spends being polled);
//! - remote: the rest of the handler's time, waiting on others (acks=all replication,
//!   a long poll, a coordinator, a disk flush on the blocking pool);
//! - throttle: the quota's throttle time (0 without quotas, as in Kafka);
//! - response send: from the handler's end to the response written (Kafka's response
//!   queue and send times together: the writer encodes and sends in one step);
//! - total: from the frame read to the response written.
//!
//! As Kafka does, a Fetch is also counted as `FetchConsumer` or `FetchFollower`
//! (requests and times; errors under `Fetch` only).
//!
//! Exported as Strimzi's rules export Kafka's MBeans
//! (`kafka_network_requestmetrics_requests_total{request,version}`,
//! `_errors_total{request,error}`, `_totaltimems{request,quantile}` with `_count`), and,
//! beyond Kafka, each time as a Prometheus histogram in microseconds
//! (`skua_network_requestmetrics_totaltime_microseconds`). An API that never had a
//! request exports nothing.
//!
//! Marking a request is a few relaxed atomic adds on the marking thread's own stripe
//! (made the first time that thread marks that request name): no lock, no lookup, and
//! no cache line passed between cores.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ApiKey;

use super::exposition::{Exposition, Kind};
use super::histogram::{self, LatencyHistogram, Window, PERCENTILES};
use super::striped;

/// Kafka's error codes run from -1 (UNKNOWN_SERVER_ERROR) up; one slot each, past the
/// highest Kafka 4.1 defines, so counting an error is an index. Codes past it share
/// the last slot (reported as UNKNOWN_SERVER_ERROR's neighbour "OTHER").
const ERROR_SLOTS: usize = 160;
/// Versions counted apart; a higher one (none exists) counts in the last.
const VERSION_SLOTS: usize = 32;
/// The highest api key any route uses, with room for the ones to come.
const API_SLOTS: usize = 100;

/// The stages of a request's time, in [`ApiMetrics::times`] order.
pub const QUEUE: usize = 0;
pub const LOCAL: usize = 1;
pub const REMOTE: usize = 2;
pub const THROTTLE: usize = 3;
pub const RESPONSE_SEND: usize = 4;
pub const TOTAL: usize = 5;

/// Each stage's Kafka metric name (Strimzi's form) and skua's µs histogram.
const STAGES: [(&str, &str, &str); 6] = [
    (
        "kafka_network_requestmetrics_requestqueuetimems",
        "skua_network_requestmetrics_requestqueuetime_microseconds",
        "Time from the request read to its handler's start",
    ),
    (
        "kafka_network_requestmetrics_localtimems",
        "skua_network_requestmetrics_localtime_microseconds",
        "Time in the handler's own work",
    ),
    (
        "kafka_network_requestmetrics_remotetimems",
        "skua_network_requestmetrics_remotetime_microseconds",
        "Time waiting on replication, long polls and coordinators",
    ),
    (
        "kafka_network_requestmetrics_throttletimems",
        "skua_network_requestmetrics_throttletime_microseconds",
        "Quota throttle time",
    ),
    (
        "kafka_network_requestmetrics_responsesendtimems",
        "skua_network_requestmetrics_responsesendtime_microseconds",
        "Time from the handler's end to the response written",
    ),
    (
        "kafka_network_requestmetrics_totaltimems",
        "skua_network_requestmetrics_totaltime_microseconds",
        "Time from the request read to its response written",
    ),
];

/// Which side a Fetch comes from, for Kafka's `FetchConsumer` / `FetchFollower`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FetchSide {
    Consumer,
    Follower,
}

/// One request name's counters and histograms.
pub struct ApiMetrics {
    /// Kafka's name (`ApiKeys.name`, or `FetchConsumer` / `FetchFollower`).
    name: String,
    /// Each stripe's marks, made when a thread of that stripe first marks this request
    /// name: an API no client sends costs no more than this slot.
    marks: Box<[OnceLock<Box<Marks>>]>,
    /// The percentiles' window of each stage (touched by scrapes only).
    windows: [Window; 6],
}

/// One stripe's counters of a request name (see [`super::striped`]).
pub struct Marks {
    versions: [AtomicU64; VERSION_SLOTS],
    errors: [AtomicU64; ERROR_SLOTS],
    times: [LatencyHistogram; 6],
}

impl Marks {
    fn new() -> Marks {
        Marks {
            versions: std::array::from_fn(|_| AtomicU64::new(0)),
            errors: std::array::from_fn(|_| AtomicU64::new(0)),
            times: Default::default(),
        }
    }

    /// Counts `n` occurrences of one error code in responses (0, `NONE`, included, as
    /// Kafka counts it).
    pub fn count_errors(&self, code: i16, n: u64) {
        let slot = usize::try_from(i32::from(code) + 1)
            .unwrap_or(0)
            .min(ERROR_SLOTS - 1);
        self.errors[slot].fetch_add(n, Ordering::Relaxed);
    }

    /// Records one answered request's version and handler-side times.
    pub fn observe_handled(
        &self,
        version: i16,
        queue: Duration,
        local: Duration,
        remote: Duration,
        throttle_ms: i32,
    ) {
        let v = usize::try_from(version).unwrap_or(0).min(VERSION_SLOTS - 1);
        self.versions[v].fetch_add(1, Ordering::Relaxed);
        self.times[QUEUE].observe(queue);
        self.times[LOCAL].observe(local);
        self.times[REMOTE].observe(remote);
        let throttle = Duration::from_millis(u64::try_from(throttle_ms).unwrap_or(0));
        self.times[THROTTLE].observe(throttle);
    }

    /// Records the response's send time and the request's total time.
    pub fn observe_sent(&self, send: Duration, total: Duration) {
        self.times[RESPONSE_SEND].observe(send);
        self.times[TOTAL].observe(total);
    }
}

impl ApiMetrics {
    fn new(name: String) -> ApiMetrics {
        ApiMetrics {
            name,
            marks: (0..striped::count()).map(|_| OnceLock::new()).collect(),
            windows: Default::default(),
        }
    }

    /// The calling thread's stripe of marks: what a request marks.
    pub fn mine(&self) -> &Marks {
        let slot = &self.marks[striped::mine().min(self.marks.len() - 1)];
        slot.get_or_init(|| Box::new(Marks::new()))
    }

    /// The stripes marked so far.
    fn stripes(&self) -> impl Iterator<Item = &Marks> {
        self.marks.iter().filter_map(|m| m.get().map(|b| &**b))
    }

    /// Requests answered with version `v`, summed over the stripes.
    fn version_count(&self, v: usize) -> u64 {
        self.stripes()
            .map(|m| m.versions[v].load(Ordering::Relaxed))
            .sum()
    }

    /// Requests answered, all versions.
    pub fn requests(&self) -> u64 {
        (0..VERSION_SLOTS).map(|v| self.version_count(v)).sum()
    }

    /// Requests answered with `code` (per error code in the response).
    pub fn errors(&self, code: i16) -> u64 {
        let Ok(slot) = usize::try_from(i32::from(code) + 1) else {
            return 0;
        };
        if slot >= ERROR_SLOTS {
            return 0;
        }
        self.error_slot(slot)
    }

    fn error_slot(&self, slot: usize) -> u64 {
        self.stripes()
            .map(|m| m.errors[slot].load(Ordering::Relaxed))
            .sum()
    }

    /// The counts of one stage (`QUEUE` .. `TOTAL`), summed over the stripes.
    pub fn counts(&self, stage: usize) -> histogram::Counts {
        let mut c = histogram::Counts::zero();
        for m in self.stripes() {
            c.add(&m.times[stage]);
        }
        c
    }
}

/// Kafka's name for an error code (`Errors.name()`): NOT_LEADER_OR_FOLLOWER for
/// `NotLeaderOrFollower`. Runs at scrape time, for the codes seen.
fn error_name(code: i16) -> String {
    if code == 0 {
        return "NONE".to_string();
    }
    let Some(e) = ResponseError::try_from_code(code) else {
        return code.to_string();
    };
    let camel = format!("{e:?}");
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// Every API's handles, indexed by api key, and the two Fetch sides.
pub struct RequestMetrics {
    apis: Vec<Option<ApiMetrics>>,
    fetch_consumer: ApiMetrics,
    fetch_follower: ApiMetrics,
}

impl Default for RequestMetrics {
    fn default() -> Self {
        RequestMetrics::new()
    }
}

impl RequestMetrics {
    /// Slots for every API a route handles, in either mode.
    pub fn new() -> RequestMetrics {
        let mut apis: Vec<Option<ApiMetrics>> = (0..API_SLOTS).map(|_| None).collect();
        for route in crate::router::all_routes() {
            if let Some(slot) = apis.get_mut(route.api_key as usize) {
                if slot.is_none() {
                    *slot = Some(ApiMetrics::new(format!("{:?}", route.api_key)));
                }
            }
        }
        RequestMetrics {
            apis,
            fetch_consumer: ApiMetrics::new("FetchConsumer".into()),
            fetch_follower: ApiMetrics::new("FetchFollower".into()),
        }
    }

    /// The handles of `api_key`, if a route handles it.
    pub fn api(&self, api_key: ApiKey) -> Option<&ApiMetrics> {
        self.apis.get(api_key as usize)?.as_ref()
    }

    /// `FetchConsumer` or `FetchFollower`.
    pub fn fetch_side(&self, side: FetchSide) -> &ApiMetrics {
        match side {
            FetchSide::Consumer => &self.fetch_consumer,
            FetchSide::Follower => &self.fetch_follower,
        }
    }

    /// Every request name that had a request, in api key order, then the Fetch sides.
    fn used(&self) -> impl Iterator<Item = &ApiMetrics> {
        self.apis
            .iter()
            .flatten()
            .chain([&self.fetch_consumer, &self.fetch_follower])
            .filter(|a| a.requests() > 0)
    }

    /// Writes every family (see the module comment).
    pub fn write(&self, out: &mut Exposition, now: Instant) {
        out.family(
            "kafka_network_requestmetrics_requests_total",
            Kind::Counter,
            "Requests answered, per request name and version",
        );
        for api in self.used() {
            for v in 0..VERSION_SLOTS {
                let n = api.version_count(v);
                if n > 0 {
                    let version = v.to_string();
                    out.sample("", &[("request", &api.name), ("version", &version)], n);
                }
            }
        }
        out.family(
            "kafka_network_requestmetrics_errors_total",
            Kind::Counter,
            "Error codes answered (NONE included), per request name and error",
        );
        for api in self.used() {
            for slot in 0..ERROR_SLOTS {
                let n = api.error_slot(slot);
                if n > 0 {
                    let name = error_name(slot as i16 - 1);
                    out.sample("", &[("request", &api.name), ("error", &name)], n);
                }
            }
        }
        for (stage, (kafka, micros, help)) in STAGES.iter().enumerate() {
            let counts: Vec<(&ApiMetrics, histogram::Counts)> =
                self.used().map(|a| (a, a.counts(stage))).collect();
            out.family(
                kafka,
                Kind::Summary,
                &format!("{help}, ms (Kafka's percentiles over the last 5 minutes)"),
            );
            for (api, c) in &counts {
                let recent = api.windows[stage].recent(c, now);
                for (q, label) in PERCENTILES {
                    let ms = recent.quantile_ns(q) / 1e6;
                    out.sample("", &[("request", &api.name), ("quantile", label)], ms);
                }
                out.sample("_sum", &[("request", &api.name)], c.sum_ns() as f64 / 1e6);
                out.sample("_count", &[("request", &api.name)], c.count());
            }
            out.family(micros, Kind::Histogram, &format!("{help}, µs"));
            for (api, c) in &counts {
                histogram::write_micros(out, &[("request", &api.name)], c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::exposition::Format;

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(31), "CLUSTER_AUTHORIZATION_FAILED");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
    }

    #[test]
    fn a_request_is_exported_as_strimzis_rules_name_it() {
        let m = RequestMetrics::new();
        let produce = m.api(ApiKey::Produce).unwrap();
        let ms = Duration::from_millis;
        produce.mine().observe_handled(9, ms(1), ms(2), ms(3), 0);
        produce.mine().observe_sent(ms(1), ms(7));
        produce.mine().count_errors(0, 1);
        produce.mine().count_errors(6, 1);
        let mut out = Exposition::new(Format::Prometheus);
        m.write(&mut out, Instant::now());
        let text = out.as_str();
        for line in [
            "kafka_network_requestmetrics_requests_total{request=\"Produce\",version=\"9\"} 1\n",
            "kafka_network_requestmetrics_errors_total{request=\"Produce\",error=\"NONE\"} 1\n",
            "kafka_network_requestmetrics_errors_total{request=\"Produce\",error=\"NOT_LEADER_OR_FOLLOWER\"} 1\n",
            "kafka_network_requestmetrics_totaltimems_count{request=\"Produce\"} 1\n",
            "kafka_network_requestmetrics_throttletimems_count{request=\"Produce\"} 1\n",
            "skua_network_requestmetrics_totaltime_microseconds_count{request=\"Produce\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        let p99 = text
            .lines()
            .find(|l| l.starts_with("kafka_network_requestmetrics_totaltimems{request=\"Produce\",quantile=\"0.99\"}"))
            .unwrap();
        let v: f64 = p99.rsplit(' ').next().unwrap().parse().unwrap();
        assert!((6.0..=8.0).contains(&v), "{p99}");
        assert!(
            !text.contains("request=\"Fetch\""),
            "unused APIs export nothing"
        );
    }
}
