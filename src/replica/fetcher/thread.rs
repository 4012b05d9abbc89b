//! One fetcher (Kafka's `ReplicaFetcherThread`): a task that replicates a set of
//! partitions from one leader over one connection, in a loop of Fetch requests.
//!
//! Each round fetches every partition not backing off from its log end offset, naming the
//! epoch of its last batch (KIP-320), through a KIP-227 fetch session from Fetch v7
//! (`session.rs`): the request names only the partitions whose position changed since
//! the last one, the answer only those with something new, and a session the leader lost
//! or refused makes the next round a full fetch at once. Per partition, the answer is one
//! of:
//! - records: appended as they are (`Partition::append_as_follower`), then the high
//!   watermark and log start offset follow the leader's;
//! - a diverging epoch: the log is cut where it parts from the leader's (Kafka's
//!   `getOffsetTruncationState`), and the next round fetches from there;
//! - OFFSET_OUT_OF_RANGE: the leader's log end and start (ListOffsets) say whether to
//!   cut the tail or to start afresh at the leader's log start;
//! - any other error: the partition waits `replica.fetch.backoff.ms` (new metadata
//!   usually moves it elsewhere meanwhile).
//!
//! Below Fetch v12 (an `inter.broker.protocol.version` older than 2.7-IV1, or a leader that
//! handles no newer Fetch) the leader never reports a divergence, so a partition that
//! became a follower or moved to a new leader epoch truncates first (Kafka's Truncating
//! state, `maybeTruncate`): it asks OffsetForLeaderEpoch for the end of its latest epoch on
//! the leader and cuts its log there (`offset_truncation_state`), asking again when the
//! leader named an epoch it does not have; without an epoch (or below 0.11.0-IV2, which has
//! no OffsetForLeaderEpoch) it truncates to its high watermark. Only then is it fetched.
//!
//! A partition named by `follower.replication.throttled.replicas` is left out of a round
//! while the follower throttle is over its rate and the partition has not caught up to
//! the leader's high watermark (Kafka's `shouldFollowerThrottle`); what it brings back
//! counts against the rate.
//!
//! A round whose request failed as a whole (connection, timeout) backs every partition
//! off. Nothing a fetch brings back is applied to a partition that left the fetcher or
//! changed leader epoch in between.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{
    FetchPartition, FetchTopic, ForgottenTopic, ReplicaState,
};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;
use uuid::Uuid;

use super::endpoint::{EpochEnd, EpochQuery, LeaderEndpoint};
use super::session::{FetchData, FetchSessionHandler};
use super::stats::FetcherStats;
use super::FetcherSettings;
use crate::log::{whole_batches_len, TopicPartition};
use crate::replica::cluster_view::ClusterView;
use crate::replica::throttle::{ReplicationQuota, ReplicationQuotas};
use crate::replica::Partition;

/// ListOffsets' special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
/// Fetch requests name topics by id from this version on.
const TOPIC_ID_VERSION: i16 = 13;
/// From this version the follower's id and epoch are in `replica_state` (KIP-903).
const REPLICA_STATE_VERSION: i16 = 15;
/// From this version the leader answers a divergent log with where it diverges (KIP-320),
/// and the follower names the epoch of its last batch.
pub const TRUNCATION_ON_FETCH_VERSION: i16 = 12;

/// A partition this fetcher replicates.
#[derive(Clone)]
pub struct FetchState {
    pub partition: Arc<Partition>,
    pub topic_id: Uuid,
    /// The leader epoch it follows in; fetches carry it so a stale leader refuses them.
    pub leader_epoch: i32,
    /// Not fetched before this instant (after an error).
    pub delayed_until: Option<Instant>,
    /// Its last fetch reached the leader's high watermark (Kafka's `isReplicaInSync`):
    /// a follower throttle does not hold it back.
    pub in_sync: bool,
    /// Kafka's Truncating state: set when it joins the fetcher in a leader epoch; below
    /// Fetch v12 it is not fetched until OffsetForLeaderEpoch (or its high watermark) has
    /// said where its log parts from the leader's.
    pub truncating: bool,
}

/// What the fetcher's task and its manager share.
pub struct Shared {
    pub partitions: Mutex<BTreeMap<TopicPartition, FetchState>>,
    /// Woken when partitions are added or the fetcher is stopped.
    pub changed: Notify,
    pub stopped: AtomicBool,
    /// Counts what the fetcher sends (shared by all fetchers of a broker).
    pub stats: Arc<FetcherStats>,
}

impl Shared {
    pub fn new() -> Self {
        Shared::with_stats(Arc::default())
    }

    pub fn with_stats(stats: Arc<FetcherStats>) -> Self {
        Shared {
            partitions: Mutex::new(BTreeMap::new()),
            changed: Notify::new(),
            stopped: AtomicBool::new(false),
            stats,
        }
    }

    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.changed.notify_waiters();
        self.changed.notify_one();
    }

    fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// The state of `tp` if it is still fetched here at `leader_epoch`.
    fn current(&self, tp: &TopicPartition, leader_epoch: i32) -> Option<FetchState> {
        self.partitions
            .lock()
            .get(tp)
            .filter(|s| s.leader_epoch == leader_epoch)
            .cloned()
    }

    fn set_in_sync(&self, tp: &TopicPartition, leader_epoch: i32, in_sync: bool) {
        if let Some(s) = self
            .partitions
            .lock()
            .get_mut(tp)
            .filter(|s| s.leader_epoch == leader_epoch)
        {
            s.in_sync = in_sync;
        }
    }

    /// Leaves the Truncating state, or stays in it to ask again.
    fn set_truncating(&self, tp: &TopicPartition, leader_epoch: i32, truncating: bool) {
        if let Some(s) = self
            .partitions
            .lock()
            .get_mut(tp)
            .filter(|s| s.leader_epoch == leader_epoch)
        {
            s.truncating = truncating;
        }
    }

    fn delay(&self, tp: &TopicPartition, leader_epoch: i32, backoff: Duration) {
        if let Some(s) = self
            .partitions
            .lock()
            .get_mut(tp)
            .filter(|s| s.leader_epoch == leader_epoch)
        {
            s.delayed_until = Some(Instant::now() + backoff);
        }
    }
}

impl Default for Shared {
    fn default() -> Self {
        Shared::new()
    }
}

/// The fetcher's task: rounds of Fetch until stopped.
pub async fn run(
    shared: Arc<Shared>,
    endpoint: Arc<dyn LeaderEndpoint>,
    settings: FetcherSettings,
    cluster: Arc<ClusterView>,
    quotas: Arc<ReplicationQuotas>,
) {
    let stats = shared.stats.clone();
    let fetcher = Fetcher {
        shared,
        endpoint,
        settings,
        cluster,
        quotas,
        session: Mutex::new(SessionState::default()),
        stats,
    };
    while !fetcher.shared.is_stopped() {
        fetcher.round().await;
        // A leader that answers at once (errors, divergences) must not keep this task
        // from giving the runtime back.
        tokio::task::yield_now().await;
    }
}

struct Fetcher {
    shared: Arc<Shared>,
    endpoint: Arc<dyn LeaderEndpoint>,
    settings: FetcherSettings,
    cluster: Arc<ClusterView>,
    quotas: Arc<ReplicationQuotas>,
    session: Mutex<SessionState>,
    stats: Arc<FetcherStats>,
}

/// One partition of a round, as it was when the request was built (named in the request,
/// or unchanged in the fetch session).
struct Asked {
    fetched: FetchedPartition,
    state: FetchState,
}

/// The fetch session with the leader, and the connection it was made on.
#[derive(Default)]
struct SessionState {
    handler: FetchSessionHandler,
    connection: u64,
}

impl Fetcher {
    /// One Fetch round, or a wait when no partition is ready.
    async fn round(&self) {
        let changed = self.shared.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let now = Instant::now();
        let (ready, next_ready) = {
            let partitions = self.shared.partitions.lock();
            let mut ready = Vec::new();
            let mut next_ready: Option<Instant> = None;
            for (tp, s) in partitions.iter() {
                match s.delayed_until {
                    Some(until) if until > now => {
                        next_ready = Some(next_ready.map_or(until, |n| n.min(until)));
                    }
                    _ => ready.push((tp.clone(), s.clone())),
                }
            }
            (ready, next_ready)
        };
        if self.shared.is_stopped() {
            return;
        }
        let before = ready.len();
        let ready: Vec<_> = ready
            .into_iter()
            .filter(|(tp, s)| !self.quota().holds_back(tp, s.in_sync))
            .collect();
        // Partitions held back by the throttle are asked again after the fetch backoff
        // (Kafka's fetcher waits so when its request would be empty).
        let next_ready = match ready.len() < before {
            true => Some(next_ready.map_or(now + self.settings.backoff, |n| {
                n.min(now + self.settings.backoff)
            })),
            false => next_ready,
        };
        if ready.is_empty() {
            let wait = next_ready.unwrap_or(now + Duration::from_secs(60));
            tokio::select! {
                _ = changed => {}
                _ = tokio::time::sleep_until(wait) => {}
            }
            return;
        }
        if let Err(e) = self.fetch(ready).await {
            tracing::info!(error = %e, "replica fetch failed; backing off");
            let backoff = self.settings.backoff;
            let mut partitions = self.shared.partitions.lock();
            for s in partitions.values_mut() {
                s.delayed_until = Some(Instant::now() + backoff);
            }
        }
    }

    fn quota(&self) -> &ReplicationQuota {
        &self.quotas.follower
    }

    async fn fetch(&self, ready: Vec<(TopicPartition, FetchState)>) -> Result<(), String> {
        let version = self
            .endpoint
            .fetch_version()
            .await
            .map_err(|e| e.to_string())?;
        let ready = match version >= TRUNCATION_ON_FETCH_VERSION {
            true => ready,
            false => self.maybe_truncate(ready).await?,
        };
        if ready.is_empty() {
            return Ok(());
        }
        let asked: Vec<Asked> = ready
            .into_iter()
            .map(|(tp, state)| {
                let (fetch_offset, last_fetched_epoch, log_start_offset) =
                    state.partition.follower_fetch_position();
                Asked {
                    fetched: FetchedPartition {
                        tp,
                        topic_id: state.topic_id,
                        leader_epoch: state.leader_epoch,
                        fetch_offset,
                        last_fetched_epoch,
                        log_start_offset,
                    },
                    state,
                }
            })
            .collect();
        let data = {
            let mut session = self.session.lock();
            // A new connection starts a new session, as after a failed request.
            let connection = self.endpoint.connection_generation();
            if session.connection != connection {
                session.connection = connection;
                session.handler.handle_error();
            }
            let next = asked.iter().map(|a| a.fetched.clone()).collect();
            session.handler.build(version, next)
        };
        let request = build_fetch(
            version,
            self.cluster.local_id(),
            self.cluster.broker_epoch(),
            &self.settings,
            &data,
        );
        self.stats.record(&data);
        tracing::debug!(target: "replica_latency", "follower fetch sent");
        let response = match self.endpoint.fetch(&request, version).await {
            Ok(response) => response,
            Err(e) => {
                self.session.lock().handler.handle_error();
                return Err(e.to_string());
            }
        };
        tracing::debug!(target: "replica_latency", "follower fetch answered");
        if !self
            .session
            .lock()
            .handler
            .handle_response(version, &response)
        {
            return match ResponseError::try_from_code(response.error_code) {
                // The leader lost the session (evicted, restarted) or the epochs parted:
                // the next round is a full fetch, at once.
                Some(
                    e @ (ResponseError::FetchSessionIdNotFound
                    | ResponseError::InvalidFetchSessionEpoch
                    | ResponseError::FetchSessionTopicIdError),
                ) => {
                    tracing::info!(session_id = data.session_id, epoch = data.epoch, error = ?e,
                        "the leader refused the fetch session; fetching in full");
                    Ok(())
                }
                None => Ok(()),
                Some(e) => Err(format!("fetch answered error {e:?}")),
            };
        }
        let by_id = version >= TOPIC_ID_VERSION;
        let index: HashMap<(&str, Uuid, i32), &Asked> = asked
            .iter()
            .map(|a| {
                let f = &a.fetched;
                let key = match by_id {
                    true => ("", f.topic_id, f.tp.partition),
                    false => (f.tp.topic.as_str(), Uuid::nil(), f.tp.partition),
                };
                (key, a)
            })
            .collect();
        for t in &response.responses {
            for p in &t.partitions {
                let key = match by_id {
                    true => ("", t.topic_id, p.partition_index),
                    false => (t.topic.0.as_str(), Uuid::nil(), p.partition_index),
                };
                if let Some(a) = index.get(&key) {
                    self.process(a, p).await;
                }
            }
        }
        Ok(())
    }

    /// Truncates the partitions of `ready` in the Truncating state (Kafka's
    /// `maybeTruncate`) and returns those to fetch now: the ones that were not truncating
    /// and the ones whose truncation completed. `Err` when OffsetForLeaderEpoch failed as a
    /// whole (every partition then backs off, as after a failed fetch).
    async fn maybe_truncate(
        &self,
        ready: Vec<(TopicPartition, FetchState)>,
    ) -> Result<Vec<(TopicPartition, FetchState)>, String> {
        let by_epoch = self.endpoint.is_offset_for_leader_epoch_supported();
        let mut queries = Vec::new();
        for (tp, s) in ready.iter().filter(|(_, s)| s.truncating) {
            match s.partition.log().latest_epoch().filter(|_| by_epoch) {
                Some(latest) => queries.push(EpochQuery {
                    tp: tp.clone(),
                    current_leader_epoch: s.leader_epoch,
                    leader_epoch: latest,
                }),
                None => self.truncate_to_high_watermark(tp, s),
            }
        }
        if !queries.is_empty() {
            let local_id = self.cluster.local_id();
            let ends = self
                .endpoint
                .fetch_epoch_end_offsets(local_id, &queries)
                .await
                .map_err(|e| format!("OffsetForLeaderEpoch failed: {e}"))?;
            for (query, end) in queries.iter().zip(&ends) {
                self.truncate_to_epoch_end(query, end);
            }
        }
        let now = Instant::now();
        Ok(ready
            .into_iter()
            .filter(|(tp, s)| {
                self.shared
                    .current(tp, s.leader_epoch)
                    .is_some_and(|state| {
                        !state.truncating && state.delayed_until.is_none_or(|until| until <= now)
                    })
            })
            .collect())
    }

    /// Kafka's `truncateToHighWatermark`: a follower with no epoch to ask about keeps what
    /// it knows is committed and fetches the rest again.
    fn truncate_to_high_watermark(&self, tp: &TopicPartition, s: &FetchState) {
        let p = &s.partition;
        let offset = p.high_watermark().min(p.log_end_offset());
        self.truncate(tp, s.leader_epoch, offset, true);
    }

    /// Applies the leader's end offset of one partition's epoch (Kafka's
    /// `maybeTruncateToEpochEndOffsets`), unless the partition left the fetcher or its
    /// leader epoch meanwhile.
    fn truncate_to_epoch_end(&self, query: &EpochQuery, end: &EpochEnd) {
        let epoch = query.current_leader_epoch;
        let Some(state) = self.shared.current(&query.tp, epoch) else {
            return;
        };
        if end.error_code != 0 {
            // FENCED_LEADER_EPOCH included: the controller's next LeaderAndIsr moves it.
            tracing::info!(partition = %query.tp, leader_epoch = epoch, error = end.error_code,
                "OffsetForLeaderEpoch answered an error; backing off");
            self.shared.delay(&query.tp, epoch, self.settings.backoff);
            return;
        }
        let (offset, completed) =
            offset_truncation_state(&state.partition, end.leader_epoch, end.end_offset);
        tracing::info!(partition = %query.tp, leader_epoch = epoch, asked = query.leader_epoch,
            leader_answered_epoch = end.leader_epoch, leader_end_offset = end.end_offset,
            offset, completed, "truncating from the leader's epoch end offset");
        self.truncate(&query.tp, epoch, offset, completed);
    }

    /// Cuts the log of `tp` at `offset` when it ends past it; `completed` ends its
    /// Truncating state. A failed truncation backs the partition off.
    fn truncate(&self, tp: &TopicPartition, leader_epoch: i32, offset: i64, completed: bool) {
        let Some(state) = self.shared.current(tp, leader_epoch) else {
            return;
        };
        let p = &state.partition;
        if offset < p.log_end_offset() {
            if let Err(e) = p.truncate_to(leader_epoch, offset) {
                tracing::warn!(partition = %tp, leader_epoch, offset, error = %e, "truncation failed; backing off");
                self.shared.delay(tp, leader_epoch, self.settings.backoff);
                return;
            }
        }
        self.shared.set_truncating(tp, leader_epoch, !completed);
    }

    /// Applies one partition's answer.
    async fn process(&self, a: &Asked, data: &PartitionData) {
        let epoch = a.state.leader_epoch;
        // Only while the partition is still fetched here, in the same leader epoch, from
        // the same offset (no truncation in between).
        let Some(state) = self.shared.current(&a.fetched.tp, epoch) else {
            return;
        };
        let p = &state.partition;
        if p.log_end_offset() != a.fetched.fetch_offset {
            return;
        }
        let outcome = match ResponseError::try_from_code(data.error_code) {
            None => self.apply_fetched(p, epoch, data).await,
            Some(ResponseError::OffsetOutOfRange) => self.out_of_range(a, p, epoch).await,
            Some(e) => Err(format!("leader answered {e:?}")),
        };
        if let Err(e) = outcome {
            tracing::debug!(partition = %a.fetched.tp, leader_epoch = epoch, error = %e, "partition backs off");
            self.shared
                .delay(&a.fetched.tp, epoch, self.settings.backoff);
        }
    }

    async fn apply_fetched(
        &self,
        p: &Arc<Partition>,
        epoch: i32,
        data: &PartitionData,
    ) -> Result<(), String> {
        let diverging = &data.diverging_epoch;
        if diverging.epoch >= 0 || diverging.end_offset >= 0 {
            let offset = truncation_offset(p, diverging.epoch, diverging.end_offset);
            if offset >= p.log_end_offset() {
                // Nothing to cut, so the next fetch would be answered the same: wait.
                return Err(format!(
                    "the leader reports a divergence at epoch {} ending at {}, past this log's end",
                    diverging.epoch, diverging.end_offset
                ));
            }
            return p.truncate_to(epoch, offset).map_err(|e| e.to_string());
        }
        if let Some(records) = data.records.as_ref() {
            let whole = whole_batches_len(records);
            if whole > 0 {
                crate::replica::append::append_as_follower(p, epoch, records.slice(..whole))
                    .await
                    .map_err(|e| e.to_string())?;
                tracing::debug!(target: "replica_latency", tp = %p.tp, end = p.log_end_offset(), "follower appended");
                if self.quota().is_throttled(&p.tp) {
                    self.quota().record(whole);
                }
            } else if !records.is_empty()
                && records.len() >= self.settings.partition_max_bytes_usize()
            {
                // One batch larger than what a fetch may return: it can never come whole.
                return Err(format!(
                    "a batch larger than replica.fetch.max.bytes ({}) at offset {}",
                    self.settings.partition_max_bytes,
                    p.log_end_offset()
                ));
            }
        }
        p.update_follower_high_watermark(data.high_watermark);
        let in_sync = data.high_watermark <= p.log_end_offset();
        self.shared.set_in_sync(&p.tp, epoch, in_sync);
        if data.log_start_offset >= 0 {
            p.update_follower_log_start_offset(data.log_start_offset)
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// The fetch offset is outside the leader's log (Kafka's `fetchOffsetAndTruncate`):
    /// past the leader's log end, the tail goes; below its log start, the log starts
    /// again there.
    async fn out_of_range(&self, a: &Asked, p: &Arc<Partition>, epoch: i32) -> Result<(), String> {
        let local_id = self.cluster.local_id();
        let ask = |ts| {
            self.endpoint
                .list_offset(&a.fetched.tp, local_id, epoch, ts)
        };
        let leader_end = ask(LATEST)
            .await
            .map_err(|e| e.to_string())?
            .map_err(|code| format!("ListOffsets latest answered {code}"))?;
        let leo = p.log_end_offset();
        if leader_end < leo {
            return p.truncate_to(epoch, leader_end).map_err(|e| e.to_string());
        }
        let leader_start = ask(EARLIEST)
            .await
            .map_err(|e| e.to_string())?
            .map_err(|code| format!("ListOffsets earliest answered {code}"))?;
        if leader_start > leo {
            return p
                .truncate_fully_and_start_at(epoch, leader_start)
                .map_err(|e| e.to_string());
        }
        Err(format!(
            "offset {leo} out of range though the leader holds {leader_start}..{leader_end}"
        ))
    }
}

/// One partition of a follower's Fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedPartition {
    pub tp: TopicPartition,
    pub topic_id: Uuid,
    pub leader_epoch: i32,
    pub fetch_offset: i64,
    pub last_fetched_epoch: i32,
    pub log_start_offset: i64,
}

/// A follower's full Fetch request at `version` outside any session (session id 0,
/// epoch -1), as a Kafka 3.9 follower builds it.
pub fn build_request(
    version: i16,
    replica_id: i32,
    broker_epoch: i64,
    settings: &FetcherSettings,
    partitions: &[FetchedPartition],
) -> FetchRequest {
    let data = FetchData {
        session_id: 0,
        epoch: -1,
        to_send: partitions.to_vec(),
        forgotten: Vec::new(),
    };
    build_fetch(version, replica_id, broker_epoch, settings, &data)
}

/// A follower's Fetch request at `version` for one step of its fetch session, as a Kafka
/// 3.9 follower builds it: the partitions `data` names, grouped by topic in the order
/// first met, and those it forgets (by topic id from v13, by name below).
pub fn build_fetch(
    version: i16,
    replica_id: i32,
    broker_epoch: i64,
    settings: &FetcherSettings,
    data: &FetchData,
) -> FetchRequest {
    let by_id = version >= TOPIC_ID_VERSION;
    let mut topics: Vec<FetchTopic> = Vec::new();
    for a in &data.to_send {
        let fp = FetchPartition::default()
            .with_partition(a.tp.partition)
            .with_current_leader_epoch(a.leader_epoch)
            .with_fetch_offset(a.fetch_offset)
            .with_last_fetched_epoch(match version >= TRUNCATION_ON_FETCH_VERSION {
                true => a.last_fetched_epoch,
                false => -1,
            })
            .with_log_start_offset(a.log_start_offset)
            .with_partition_max_bytes(settings.partition_max_bytes);
        let same = |t: &FetchTopic| match by_id {
            true => t.topic_id == a.topic_id,
            false => t.topic.0.as_str() == a.tp.topic,
        };
        // Consecutive partitions of a topic are the common case: look at the last first.
        let found = match topics.last().is_some_and(same) {
            true => topics.last_mut(),
            false => topics.iter_mut().find(|t| same(t)),
        };
        match found {
            Some(t) => t.partitions.push(fp),
            None => {
                let t = match by_id {
                    true => FetchTopic::default().with_topic_id(a.topic_id),
                    false => FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(a.tp.topic.clone()))),
                };
                topics.push(t.with_partitions(vec![fp]));
            }
        }
    }
    let mut forgotten: Vec<ForgottenTopic> = Vec::new();
    for (tp, topic_id) in &data.forgotten {
        let same = |t: &ForgottenTopic| match by_id {
            true => t.topic_id == *topic_id,
            false => t.topic.0.as_str() == tp.topic,
        };
        match forgotten.iter_mut().find(|t| same(t)) {
            Some(t) => t.partitions.push(tp.partition),
            None => {
                let t = match by_id {
                    true => ForgottenTopic::default().with_topic_id(*topic_id),
                    false => ForgottenTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(tp.topic.clone()))),
                };
                forgotten.push(t.with_partitions(vec![tp.partition]));
            }
        }
    }
    let request = FetchRequest::default()
        .with_max_wait_ms(settings.max_wait_ms)
        .with_min_bytes(settings.min_bytes)
        .with_max_bytes(settings.max_bytes)
        .with_isolation_level(0)
        .with_session_id(data.session_id)
        .with_session_epoch(data.epoch)
        .with_topics(topics)
        .with_forgotten_topics_data(forgotten);
    match version >= REPLICA_STATE_VERSION {
        true => request.with_replica_id(BrokerId(-1)).with_replica_state(
            ReplicaState::default()
                .with_replica_id(BrokerId(replica_id))
                .with_replica_epoch(broker_epoch),
        ),
        false => request.with_replica_id(BrokerId(replica_id)),
    }
}

/// Where a follower's log parts from its leader's, given the leader's end offset of the
/// diverging epoch (Kafka's `getOffsetTruncationState`); see `offset_truncation_state`.
pub fn truncation_offset(p: &Partition, leader_epoch: i32, leader_end_offset: i64) -> i64 {
    offset_truncation_state(p, leader_epoch, leader_end_offset).0
}

/// Kafka's `getOffsetTruncationState`: where a follower's log parts from its leader's,
/// given the leader's end offset of `leader_epoch`, never past its own log end, and
/// whether that is final:
/// - no end offset (the leader knows no such epoch): the high watermark, final;
/// - no epoch (OffsetForLeaderEpoch v0): the leader's end offset, final;
/// - the follower has that epoch: the smaller of both ends, final;
/// - the follower's largest epoch below it is older: the end of that one, not final (the
///   leader is asked again about the epoch now last);
/// - the follower has no epoch that old: the leader's end offset, final.
pub fn offset_truncation_state(
    p: &Partition,
    leader_epoch: i32,
    leader_end_offset: i64,
) -> (i64, bool) {
    let leo = p.log_end_offset();
    if leader_end_offset < 0 {
        return (p.high_watermark().min(leo), true);
    }
    if leader_epoch < 0 {
        return (leader_end_offset.min(leo), true);
    }
    match p.end_offset_for_epoch(leader_epoch) {
        Some((epoch, end)) if epoch != leader_epoch => (end.min(leo), false),
        Some((_, end)) => (end.min(leader_end_offset).min(leo), true),
        None => (leader_end_offset.min(leo), true),
    }
}
