//! Producers: each on its own connections (one per leader of its partitions), sending one
//! batch per request to its partitions in turn, each to the partition's leader, at most `in_flight` requests outstanding, either as fast as the broker answers
//! or on a fixed schedule. Latency is from the moment a request was due (its scheduled
//! time at a fixed rate, so a broker that falls behind is not excused by the generator
//! waiting for it) to its response, in microseconds.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hdrhistogram::Histogram;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use skua::client::Connection;
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;

/// What one producer sends.
#[derive(Clone)]
pub struct Plan {
    pub topic: String,
    /// Its partitions, each with the connection to the partition's leader.
    pub partitions: Vec<(i32, Arc<Connection>)>,
    pub batch: Bytes,
    pub batch_records: u64,
    pub requests: u64,
    /// The time between two requests at a fixed rate; None: as fast as possible.
    pub interval: Option<Duration>,
    pub acks: i16,
    pub in_flight: usize,
    pub version: i16,
    /// Whether to keep every acknowledged batch's offset and due time (end-to-end runs).
    pub trace: bool,
}

/// What came back.
pub struct Outcome {
    pub requests: u64,
    pub records_acked: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// Send-to-ack latency per request, µs.
    pub latency: Histogram<u64>,
    /// With `Plan::trace`: (partition, base offset, records, due time) per acknowledged
    /// batch.
    pub acked: Vec<(i32, i64, u64, Instant)>,
}

impl Outcome {
    pub fn new() -> Outcome {
        Outcome {
            requests: 0,
            records_acked: 0,
            errors: 0,
            first_error: None,
            // 1 µs to 10 minutes at 3 significant digits.
            latency: Histogram::new_with_bounds(1, 600_000_000, 3)
                .expect("constant histogram bounds are valid"),
            acked: Vec::new(),
        }
    }

    pub fn add(&mut self, other: &Outcome) {
        self.requests += other.requests;
        self.records_acked += other.records_acked;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
        // Both histograms have the same bounds, so adding cannot fail.
        let _ = self.latency.add(&other.latency);
        self.acked.extend_from_slice(&other.acked);
    }

    fn failed(&mut self, why: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(why);
        }
    }
}

/// 30 s of retries: Kafka answers CreateTopics before its partitions can take writes, and
/// with thousands of partitions some need seconds.
const RETRIES: usize = 300;
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// Whether a partition answered an error a producer retries: NOT_LEADER_OR_FOLLOWER,
/// LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS.
fn retriable(resp: &ProduceResponse) -> bool {
    resp.responses
        .iter()
        .flat_map(|t| t.partition_responses.iter())
        .any(|p| matches!(p.error_code, 6 | 5 | 3 | 19))
}

fn request(plan: &Plan, partition: i32) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(plan.acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(plan.topic.clone())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(plan.batch.clone()))])])
}

/// The due time of each of `requests` requests, `interval` apart, each delivered at that
/// time by a thread of its own. tokio's timer ticks in whole milliseconds and wakes up to a
/// tick late; latency counts from the due time, so that lateness would be charged to the
/// broker (it was most of a one-record acks=all request's measured p50). A thread's sleep
/// wakes within tens of microseconds.
fn pace(interval: Duration, requests: u64) -> mpsc::Receiver<Instant> {
    let (tx, rx) = mpsc::channel(1024);
    let start = std::time::Instant::now();
    std::thread::spawn(move || {
        for i in 0..requests {
            let at = start + interval.mul_f64(i as f64);
            let now = std::time::Instant::now();
            if at > now {
                std::thread::sleep(at - now);
            }
            // The producer waits for a permit meanwhile: the due times queue here and keep
            // their original instants, so a broker that falls behind is not excused.
            if tx.blocking_send(Instant::from_std(at)).is_err() {
                return;
            }
        }
    });
    rx
}

/// Runs `plan` and returns what the brokers answered.
pub async fn run(plan: Plan) -> Outcome {
    let outcome = Arc::new(Mutex::new(Outcome::new()));
    let permits = Arc::new(Semaphore::new(plan.in_flight.max(1)));
    let requests: Vec<(i32, Arc<ProduceRequest>, Arc<Connection>)> = plan
        .partitions
        .iter()
        .map(|(p, conn)| (*p, Arc::new(request(&plan, *p)), conn.clone()))
        .collect();
    let mut tasks = Vec::new();
    if requests.is_empty() {
        let mut none = Outcome::new();
        none.failed("produce: no partition with a leader to send to".into());
        return none;
    }
    let mut schedule = plan.interval.map(|interval| pace(interval, plan.requests));
    for i in 0..plan.requests {
        let due = match schedule.as_mut() {
            Some(schedule) => match schedule.recv().await {
                Some(at) => Some(at),
                None => break,
            },
            None => None,
        };
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        let due = due.unwrap_or_else(Instant::now);
        let (partition, req, connection) = requests[i as usize % requests.len()].clone();
        let outcome = outcome.clone();
        let (version, records, trace) = (plan.version, plan.batch_records, plan.trace);
        tasks.push(tokio::spawn(async move {
            let mut result = connection.send(&*req, version).await;
            // As Kafka's producer does: a partition whose leader is still settling (just
            // after topic creation) is retried after a backoff, the wait counted in its
            // latency.
            for _ in 0..RETRIES {
                match &result {
                    Ok(resp) if retriable(resp) => {
                        tokio::time::sleep(RETRY_BACKOFF).await;
                        result = connection.send(&*req, version).await;
                    }
                    _ => break,
                }
            }
            let micros = due.elapsed().as_micros() as u64;
            drop(permit);
            let mut outcome = outcome.lock();
            outcome.requests += 1;
            match result {
                Err(e) => outcome.failed(format!("produce: {e}")),
                Ok(resp) => {
                    let refused = resp
                        .responses
                        .iter()
                        .flat_map(|t| t.partition_responses.iter())
                        .find(|p| p.error_code != 0);
                    match refused {
                        Some(p) => outcome.failed(format!(
                            "produce: error code {} ({})",
                            p.error_code,
                            p.error_message.as_deref().unwrap_or("")
                        )),
                        None => {
                            outcome.records_acked += records;
                            let _ = outcome.latency.record(micros.max(1));
                            let base = resp
                                .responses
                                .iter()
                                .flat_map(|t| t.partition_responses.iter())
                                .map(|p| p.base_offset)
                                .next();
                            if let (true, Some(base)) = (trace, base) {
                                outcome.acked.push((partition, base, records, due));
                            }
                        }
                    }
                }
            }
        }));
        // Finished tasks need not be kept.
        if tasks.len() >= 4096 {
            tasks.retain(|t| !t.is_finished());
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    let mut total = Outcome::new();
    total.add(&outcome.lock());
    total
}

/// Runs every plan at once and adds up what the brokers answered.
pub async fn run_all(plans: Vec<Plan>) -> Outcome {
    let tasks: Vec<_> = plans
        .into_iter()
        .map(|plan| tokio::spawn(run(plan)))
        .collect();
    let mut total = Outcome::new();
    for t in tasks {
        match t.await {
            Ok(one) => total.add(&one),
            Err(e) => total.failed(format!("producer task: {e}")),
        }
    }
    total
}
