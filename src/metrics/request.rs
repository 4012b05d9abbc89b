//! Kafka's `RequestMetrics`, per API: requests, their errors per code, and the split of
//! each request's time as Kafka splits it:
//! - queue: from the frame read to its handler's start (waiting behind the requests
//!   before it on its connection, answered in order);
//! - local: the handler's own work (the time its future spends being polled);
//! - remote: the rest of the handler's time, waiting on others (acks=all replication,
//!   a long poll, a coordinator, a disk flush on the blocking pool);
//! - throttle: the quota's throttle time;
//! - response send: writing the response to the socket;
//! - total: from the frame read to the response written.
//!
//! Every handle is resolved at registration, so marking a request is a few atomic adds.

use std::sync::OnceLock;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::ApiKey;
use prometheus::{
    exponential_buckets, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, Opts,
    Registry,
};

use super::register;

/// Kafka's error codes run from -1 (UNKNOWN_SERVER_ERROR) up; one slot each, past the
/// highest Kafka 4.1 defines, so counting an error is an index, not a lookup.
const ERROR_SLOTS: usize = 160;
/// The highest api key any route uses, with room for the ones to come.
const API_SLOTS: usize = 100;

/// One API's handles.
pub struct ApiMetrics {
    name: String,
    pub requests: IntCounter,
    pub queue_ms: Histogram,
    pub local_ms: Histogram,
    pub remote_ms: Histogram,
    pub throttle_ms: Histogram,
    pub response_send_ms: Histogram,
    pub total_ms: Histogram,
    errors: IntCounterVec,
    /// Resolved at an error code's first occurrence for this API.
    error_counters: Vec<OnceLock<IntCounter>>,
}

impl ApiMetrics {
    /// Counts one error code of a response (0, `NONE`, included, as Kafka counts it).
    pub fn count_error(&self, code: i16) {
        let Some(slot) = usize::try_from(i32::from(code) + 1)
            .ok()
            .and_then(|i| self.error_counters.get(i))
        else {
            self.errors
                .with_label_values(&[self.name.as_str(), &code.to_string()])
                .inc();
            return;
        };
        slot.get_or_init(|| {
            self.errors
                .with_label_values(&[self.name.as_str(), &error_name(code)])
        })
        .inc();
    }

    /// Records one answered request's handler-side times; the throttle time only when a
    /// quota manager gave a verdict (without one it is always 0, and not worth a mark per
    /// request).
    pub fn observe_handled(
        &self,
        queue: Duration,
        local: Duration,
        remote: Duration,
        throttle_ms: Option<i32>,
    ) {
        self.requests.inc();
        self.queue_ms.observe(ms(queue));
        self.local_ms.observe(ms(local));
        self.remote_ms.observe(ms(remote));
        if let Some(throttle_ms) = throttle_ms {
            self.throttle_ms.observe(f64::from(throttle_ms.max(0)));
        }
    }

    /// Records the response's send time and the request's total time.
    pub fn observe_sent(&self, send: Duration, total: Duration) {
        self.response_send_ms.observe(ms(send));
        self.total_ms.observe(ms(total));
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Kafka's name for an error code (`Errors.name()`): NOT_LEADER_OR_FOLLOWER for
/// `NotLeaderOrFollower`. Runs once per API and code.
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

/// Every API's handles, indexed by api key.
pub struct RequestMetrics {
    apis: Vec<Option<ApiMetrics>>,
}

impl RequestMetrics {
    pub(super) fn register(registry: &Registry) -> RequestMetrics {
        let counter_vec = |name: &str, help: &str, labels: &[&str]| {
            let opts = Opts::new(format!("kafka_network_requestmetrics_{name}_total"), help);
            register(
                registry,
                IntCounterVec::new(opts, labels).expect("constant, valid names"),
            )
        };
        let requests = counter_vec("requests", "Requests answered", &["request"]);
        let errors = counter_vec("errors", "Error codes answered", &["request", "error"]);
        // 0.05 ms to about 105 s, doubling.
        let buckets = exponential_buckets(0.05, 2.0, 22).expect("constant buckets");
        let histogram = |name: &str, help: &str| {
            let opts = HistogramOpts::new(format!("kafka_network_requestmetrics_{name}"), help)
                .buckets(buckets.clone());
            register(
                registry,
                HistogramVec::new(opts, &["request"]).expect("constant, valid names"),
            )
        };
        let queue = histogram("requestqueuetimems", "Time waiting to be handled, ms");
        let local = histogram("localtimems", "Time in the handler's own work, ms");
        let remote = histogram(
            "remotetimems",
            "Time waiting on replication, long polls and coordinators, ms",
        );
        let throttle = histogram("throttletimems", "Quota throttle time, ms");
        let send = histogram("responsesendtimems", "Time writing the response, ms");
        let total = histogram("totaltimems", "Time from read to response written, ms");
        let mut apis: Vec<Option<ApiMetrics>> = (0..API_SLOTS).map(|_| None).collect();
        for route in crate::router::routes(true) {
            let Some(slot) = apis.get_mut(route.api_key as usize) else {
                continue;
            };
            let name = format!("{:?}", route.api_key);
            let labels = [name.as_str()];
            *slot = Some(ApiMetrics {
                requests: requests.with_label_values(&labels),
                queue_ms: queue.with_label_values(&labels),
                local_ms: local.with_label_values(&labels),
                remote_ms: remote.with_label_values(&labels),
                throttle_ms: throttle.with_label_values(&labels),
                response_send_ms: send.with_label_values(&labels),
                total_ms: total.with_label_values(&labels),
                errors: errors.clone(),
                name,
                error_counters: (0..ERROR_SLOTS).map(|_| OnceLock::new()).collect(),
            });
        }
        RequestMetrics { apis }
    }

    /// The handles of `api_key`, if a route handles it.
    pub fn api(&self, api_key: ApiKey) -> Option<&ApiMetrics> {
        self.apis.get(api_key as usize)?.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(31), "CLUSTER_AUTHORIZATION_FAILED");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
    }
}
