//! Offset commits from many consumer groups: each group commits as a group with no members
//! does (generation -1, no member id, as a consumer that assigns its partitions itself),
//! one partition per commit, over a few connections to the group's coordinator with
//! several commits in flight on each. The groups' coordinators are found first (which also
//! makes Kafka create its offsets topic). Latency is send to answer, in microseconds.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    FindCoordinatorRequest, GroupId, OffsetCommitRequest, OffsetCommitResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use skua::client::Connection;
use tokio::time::Instant;

use crate::setup::{self, Broker};

/// COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR: retried
/// while the offsets topic is being created and loaded.
fn coordinator_retriable(code: i16) -> bool {
    (14..=16).contains(&code)
}

const RETRIES: usize = 300;
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

fn refused_retriably(resp: &OffsetCommitResponse) -> bool {
    resp.topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .any(|p| coordinator_retriable(p.error_code))
}

/// Where the commits go and how.
pub struct Plan {
    pub topic: String,
    pub partitions: i32,
    pub groups: u64,
    pub connections: usize,
    pub in_flight: usize,
    pub version: i16,
}

/// The groups' coordinators, each with `connections` connections of its own.
pub struct Coordinators {
    /// Group index -> coordinator address.
    by_group: Vec<SocketAddr>,
    conns: BTreeMap<SocketAddr, Vec<Arc<Connection>>>,
}

/// Asks `admin` for the coordinator of every group (up to a minute per group while the
/// offsets topic is created) and connects to each coordinator.
pub async fn coordinators(admin: &Broker, plan: &Plan) -> Result<Coordinators, String> {
    let version = admin.version(10, 1, 3)?;
    let mut by_group = Vec::with_capacity(plan.groups as usize);
    for g in 0..plan.groups {
        let req = FindCoordinatorRequest::default()
            .with_key(StrBytes::from_string(group_name(&plan.topic, g)))
            .with_key_type(0);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let resp = admin
                .conn
                .send(&req, version)
                .await
                .map_err(|e| format!("FindCoordinator: {e}"))?;
            if resp.error_code == 0 {
                let addr = (resp.host.as_str(), u16::try_from(resp.port).unwrap_or(0))
                    .to_socket_addrs()
                    .ok()
                    .and_then(|mut a| a.next())
                    .ok_or_else(|| format!("FindCoordinator: bad address {}", resp.host))?;
                by_group.push(addr);
                break;
            }
            if !coordinator_retriable(resp.error_code) || Instant::now() > deadline {
                return Err(format!("FindCoordinator: error code {}", resp.error_code));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let mut conns = BTreeMap::new();
    for addr in &by_group {
        if !conns.contains_key(addr) {
            let mut list = Vec::with_capacity(plan.connections);
            for _ in 0..plan.connections.max(1) {
                list.push(setup::connect(*addr).await?.conn);
            }
            conns.insert(*addr, list);
        }
    }
    Ok(Coordinators { by_group, conns })
}

fn group_name(topic: &str, g: u64) -> String {
    format!("{topic}-group-{g}")
}

/// What came back.
pub struct Outcome {
    pub commits: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// Send-to-answer latency per commit, µs.
    pub latency: Histogram<u64>,
}

impl Outcome {
    fn new() -> Outcome {
        Outcome {
            commits: 0,
            errors: 0,
            first_error: None,
            // 1 µs to 10 minutes at 3 significant digits.
            latency: Histogram::new_with_bounds(1, 600_000_000, 3)
                .expect("constant histogram bounds are valid"),
        }
    }

    fn failed(&mut self, why: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(why);
        }
    }
}

/// Commits `commits` offsets, commit i for group i % groups, partition (i / groups) %
/// partitions, offset i; `in_flight` commits outstanding per connection.
pub async fn run(plan: Arc<Plan>, coordinators: Arc<Coordinators>, commits: u64) -> Outcome {
    let next = Arc::new(AtomicU64::new(0));
    let outcome = Arc::new(Mutex::new(Outcome::new()));
    let mut tasks = Vec::new();
    for c in 0..plan.connections.max(1) {
        for _ in 0..plan.in_flight.max(1) {
            let (plan, coordinators) = (plan.clone(), coordinators.clone());
            let (next, outcome) = (next.clone(), outcome.clone());
            tasks.push(tokio::spawn(async move {
                worker(&plan, &coordinators, c, &next, commits, &outcome).await
            }));
        }
    }
    for t in tasks {
        if let Err(e) = t.await {
            outcome.lock().failed(format!("commit task: {e}"));
        }
    }
    let mut total = Outcome::new();
    let done = outcome.lock();
    total.commits = done.commits;
    total.errors = done.errors;
    total.first_error.clone_from(&done.first_error);
    let _ = total.latency.add(&done.latency);
    total
}

async fn worker(
    plan: &Plan,
    coordinators: &Coordinators,
    connection: usize,
    next: &AtomicU64,
    commits: u64,
    outcome: &Mutex<Outcome>,
) {
    let topic = TopicName(StrBytes::from_string(plan.topic.clone()));
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= commits {
            return;
        }
        let g = i % plan.groups;
        let addr = coordinators.by_group[g as usize];
        let Some(conn) = coordinators
            .conns
            .get(&addr)
            .and_then(|list| list.get(connection % list.len()))
        else {
            outcome.lock().failed(format!("no connection to {addr}"));
            return;
        };
        let partition = ((i / plan.groups) % plan.partitions.max(1) as u64) as i32;
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group_name(&plan.topic, g))))
            .with_generation_id_or_member_epoch(-1)
            .with_retention_time_ms(-1)
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(topic.clone())
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(partition)
                    .with_committed_offset(i as i64)])]);
        let sent = Instant::now();
        let mut result = conn.send(&req, plan.version).await;
        // As a consumer does: a coordinator still loading its offsets topic (Kafka, just
        // after creating it) is retried after a backoff, the wait counted in the latency.
        for _ in 0..RETRIES {
            match &result {
                Ok(resp) if refused_retriably(resp) => {
                    tokio::time::sleep(RETRY_BACKOFF).await;
                    result = conn.send(&req, plan.version).await;
                }
                _ => break,
            }
        }
        let micros = sent.elapsed().as_micros() as u64;
        let mut outcome = outcome.lock();
        match result {
            Err(e) => {
                outcome.failed(format!("OffsetCommit: {e}"));
                return;
            }
            Ok(resp) => {
                let refused = resp
                    .topics
                    .iter()
                    .flat_map(|t| t.partitions.iter())
                    .find(|p| p.error_code != 0);
                match refused {
                    Some(p) => outcome.failed(format!("OffsetCommit: error code {}", p.error_code)),
                    None => {
                        outcome.commits += 1;
                        let _ = outcome.latency.record(micros.max(1));
                    }
                }
            }
        }
    }
}
