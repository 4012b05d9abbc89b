//! Following `__cluster_metadata` from the controller quorum's leader, as Kafka's raft
//! client does for an observer (a broker), as a pure state machine: [`Follower::decide`]
//! takes a response or a timer and answers the Fetch or FetchSnapshot request to send
//! and what became committed ([`Output::Publish`], [`Output::LoadSnapshot`]).
//!
//! - The leader is unknown at first: Fetch goes to the quorum's endpoints in turn
//!   (`controller.quorum.voters`, else `controller.quorum.bootstrap.servers`); any
//!   answer names the leader and its epoch (`current_leader`, with its address in
//!   `node_endpoints`), and Fetch follows it there. A larger epoch in any answer, or
//!   FENCED_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER, moves to the leader it names; an
//!   answer from an older epoch is dropped. No successful Fetch for
//!   `controller.quorum.fetch.timeout.ms` forgets the leader. A request to the leader
//!   that fails (it died, say) is followed by a Fetch to another of the quorum's
//!   endpoints, as Kafka's observer asks a bootstrap server while its leader backs off: a
//!   voter answers with the leader it knows, so a new leader is found as soon as it is
//!   elected instead of after the fetch timeout, which the new active controller's broker
//!   sessions may not outlast.
//! - Records are appended to an in-memory tail; whole batches below the leader's high
//!   watermark are committed and handed on in order (only the uncommitted tail is kept).
//! - `diverging_epoch` truncates the tail to where this log and the leader's agree, as
//!   Kafka's `truncateToEndOffset` finds it; a truncation below what was committed is
//!   fatal, as in Kafka.
//! - `snapshot_id` (the leader's log starts past the fetch offset) fetches that snapshot
//!   with FetchSnapshot, chunk by chunk at the position reached; when whole, it replaces
//!   everything before it and Fetch resumes at its end offset. SNAPSHOT_NOT_FOUND starts
//!   over with a Fetch.
//!
//! Every size is bounded: records come inside a response the client already bounded,
//! the tail holds only uncommitted batches, a snapshot may not exceed `max_snapshot_bytes`.

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{fetch_request, fetch_snapshot_request, FetchRequest};
use kafka_protocol::messages::{FetchResponse, FetchSnapshotRequest, FetchSnapshotResponse};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::controller::metadata_log::METADATA_TOPIC_ID;
use crate::log::{RecordBatchHeader, HEADER_SIZE};

use super::super::records::batch::records_of;

pub const METADATA_TOPIC: &str = "__cluster_metadata";
/// Kafka's raft client: the longest a Fetch waits at the leader, and the most it asks for.
pub const FETCH_MAX_WAIT_MS: i32 = 500;
pub const FETCH_MAX_BYTES: i32 = 8 * 1024 * 1024;

/// Where a request goes: a quorum node (id known once a response named it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub node_id: Option<i32>,
    pub host: String,
    pub port: u16,
}

#[derive(Clone, Debug)]
pub struct FollowerConfig {
    pub node_id: i32,
    pub cluster_id: String,
    /// The metadata log dir's `directory.id`.
    pub directory_id: Uuid,
    /// The quorum's endpoints from the config, asked in turn while no leader is known.
    pub bootstrap: Vec<Endpoint>,
    pub retry_backoff_ms: u64,
    pub fetch_timeout_ms: u64,
    pub max_snapshot_bytes: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    Timeout,
    Disconnected,
}

#[derive(Clone, Debug)]
pub enum Event {
    Tick,
    FetchResponse(Result<FetchResponse, Failure>),
    FetchSnapshotResponse(Result<FetchSnapshotResponse, Failure>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    Fetch(Endpoint, FetchRequest),
    FetchSnapshot(Endpoint, FetchSnapshotRequest),
    /// Committed batches, in offset order, each a whole record batch.
    Publish(Vec<Bytes>),
    /// A whole snapshot (its record batches) ending at `end_offset`: it replaces the
    /// image; committed batches from `end_offset` on follow.
    LoadSnapshot {
        end_offset: i64,
        epoch: i32,
        batches: Bytes,
    },
    /// The leader changed (or was found).
    Leader {
        id: i32,
        epoch: i32,
    },
    /// The log cannot be followed (a truncation below the committed offset, a cluster
    /// id the leader refuses, damaged records): the broker must stop.
    Fatal(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Leader {
    id: i32,
    endpoint: Endpoint,
}

#[derive(Clone, Debug)]
struct SnapshotFetch {
    end_offset: i64,
    epoch: i32,
    bytes: BytesMut,
}

/// One uncommitted batch of the tail.
#[derive(Clone, Debug)]
struct Batch {
    base_offset: i64,
    last_offset: i64,
    epoch: i32,
    bytes: Bytes,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InFlight {
    Fetch,
    FetchSnapshot,
}

#[derive(Clone, Debug)]
pub struct Follower {
    config: FollowerConfig,
    /// The quorum epoch known, and its leader when known.
    epoch: i32,
    leader: Option<Leader>,
    /// The next bootstrap endpoint to ask while no leader is known.
    next_bootstrap: usize,
    /// A request to the leader failed: the next Fetch asks another endpoint who leads.
    probe_bootstrap: bool,
    /// The log's end: the next offset to fetch.
    end_offset: i64,
    /// The epoch of the last batch fetched (or of the snapshot the log starts at).
    last_fetched_epoch: i32,
    /// Leader epochs and the offset each starts at, ascending (Kafka's leader epoch
    /// cache), trimmed below the committed offset.
    epochs: Vec<(i32, i64)>,
    /// Batches fetched and not yet committed.
    tail: std::collections::VecDeque<Batch>,
    /// Everything below this offset was handed on.
    committed: i64,
    high_watermark: i64,
    snapshot: Option<SnapshotFetch>,
    in_flight: Option<InFlight>,
    next_send: u64,
    last_fetch_ok: u64,
    failed: bool,
}

impl Follower {
    /// A follower whose log starts empty at offset 0 (a broker keeps no metadata log of
    /// its own across restarts yet: it fetches from the start, or the leader's snapshot).
    pub fn new(config: FollowerConfig, now_ms: u64) -> Follower {
        Follower {
            config,
            epoch: 0,
            leader: None,
            next_bootstrap: 0,
            probe_bootstrap: false,
            end_offset: 0,
            last_fetched_epoch: 0,
            epochs: Vec::new(),
            tail: Default::default(),
            committed: 0,
            high_watermark: -1,
            snapshot: None,
            in_flight: None,
            next_send: now_ms,
            last_fetch_ok: now_ms,
            failed: false,
        }
    }

    /// The offset of the next record to fetch.
    pub fn end_offset(&self) -> i64 {
        self.end_offset
    }

    /// Every offset below this was committed and handed on.
    pub fn committed_offset(&self) -> i64 {
        self.committed
    }

    pub fn leader(&self) -> Option<(i32, i32)> {
        self.leader.as_ref().map(|l| (l.id, self.epoch))
    }

    /// Where the quorum's leader (the active controller) is, when known.
    pub fn leader_endpoint(&self) -> Option<Endpoint> {
        self.leader.as_ref().map(|l| l.endpoint.clone())
    }

    /// When the driver must next call [`Event::Tick`].
    pub fn next_deadline(&self) -> Option<u64> {
        (!self.failed && self.in_flight.is_none()).then_some(self.next_send)
    }

    pub fn decide(&mut self, now_ms: u64, event: Event) -> Vec<Output> {
        let mut out = Vec::new();
        if self.failed {
            return out;
        }
        match event {
            Event::Tick => {}
            Event::FetchResponse(r) => self.on_fetch(now_ms, r, &mut out),
            Event::FetchSnapshotResponse(r) => self.on_fetch_snapshot(now_ms, r, &mut out),
        }
        if self.leader.is_some()
            && now_ms.saturating_sub(self.last_fetch_ok) >= self.config.fetch_timeout_ms
        {
            tracing::info!(epoch = self.epoch, "no successful Fetch from the quorum leader within controller.quorum.fetch.timeout.ms: looking for the leader again");
            self.leader = None;
            self.last_fetch_ok = now_ms;
        }
        if out.iter().any(|o| matches!(o, Output::Fatal(_))) {
            self.failed = true;
            return out;
        }
        if self.in_flight.is_none() && now_ms >= self.next_send {
            self.send(&mut out);
        }
        out
    }

    fn target(&mut self) -> Option<Endpoint> {
        let probe = std::mem::take(&mut self.probe_bootstrap);
        if let Some(l) = &self.leader {
            let leader = l.endpoint.clone();
            // A FetchSnapshot goes to the leader only; so does a Fetch when every
            // endpoint is the leader's.
            if probe && self.snapshot.is_none() {
                for _ in 0..self.config.bootstrap.len() {
                    match self.next_bootstrap_endpoint() {
                        Some(e) if !same_address(&e, &leader) => return Some(e),
                        _ => {}
                    }
                }
            }
            return Some(leader);
        }
        self.next_bootstrap_endpoint()
    }

    /// The quorum's endpoints in turn.
    fn next_bootstrap_endpoint(&mut self) -> Option<Endpoint> {
        let n = self.config.bootstrap.len();
        if n == 0 {
            return None;
        }
        let e = self.config.bootstrap[self.next_bootstrap % n].clone();
        self.next_bootstrap = (self.next_bootstrap + 1) % n;
        Some(e)
    }

    fn send(&mut self, out: &mut Vec<Output>) {
        let Some(to) = self.target() else { return };
        match &self.snapshot {
            Some(s) if self.leader.is_some() => {
                let partition = fetch_snapshot_request::PartitionSnapshot::default()
                    .with_partition(0)
                    .with_current_leader_epoch(self.epoch)
                    .with_snapshot_id(
                        fetch_snapshot_request::SnapshotId::default()
                            .with_end_offset(s.end_offset)
                            .with_epoch(s.epoch),
                    )
                    .with_position(s.bytes.len() as i64)
                    .with_replica_directory_id(self.config.directory_id);
                let request = FetchSnapshotRequest::default()
                    .with_cluster_id(Some(StrBytes::from_string(self.config.cluster_id.clone())))
                    .with_replica_id(self.config.node_id.into())
                    .with_max_bytes(FETCH_MAX_BYTES)
                    .with_topics(vec![fetch_snapshot_request::TopicSnapshot::default()
                        .with_name(StrBytes::from_static_str(METADATA_TOPIC).into())
                        .with_partitions(vec![partition])]);
                self.in_flight = Some(InFlight::FetchSnapshot);
                out.push(Output::FetchSnapshot(to, request));
            }
            _ => {
                let partition = fetch_request::FetchPartition::default()
                    .with_partition(0)
                    .with_current_leader_epoch(self.epoch)
                    .with_fetch_offset(self.end_offset)
                    .with_last_fetched_epoch(self.last_fetched_epoch)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(FETCH_MAX_BYTES)
                    .with_replica_directory_id(self.config.directory_id);
                let request = FetchRequest::default()
                    .with_cluster_id(Some(StrBytes::from_string(self.config.cluster_id.clone())))
                    .with_replica_state(
                        fetch_request::ReplicaState::default()
                            .with_replica_id(self.config.node_id.into())
                            .with_replica_epoch(-1),
                    )
                    .with_max_wait_ms(FETCH_MAX_WAIT_MS)
                    .with_min_bytes(0)
                    .with_max_bytes(FETCH_MAX_BYTES)
                    .with_topics(vec![fetch_request::FetchTopic::default()
                        .with_topic(StrBytes::from_static_str(METADATA_TOPIC).into())
                        .with_topic_id(METADATA_TOPIC_ID)
                        .with_partitions(vec![partition])]);
                self.in_flight = Some(InFlight::Fetch);
                out.push(Output::Fetch(to, request));
            }
        }
    }

    fn retry_later(&mut self, now_ms: u64) {
        self.next_send = now_ms + self.config.retry_backoff_ms;
    }

    /// The answer to the `kind` request in flight: None when no such request is in flight
    /// (a late answer) or it failed (sent again after the backoff).
    fn answer<R>(
        &mut self,
        kind: InFlight,
        now_ms: u64,
        response: Result<R, Failure>,
    ) -> Option<R> {
        if self.in_flight != Some(kind) {
            return None;
        }
        self.in_flight = None;
        match response {
            Ok(r) => Some(r),
            Err(failure) => {
                tracing::debug!(?failure, request = ?kind, "metadata request failed; retrying");
                self.probe_bootstrap = self.leader.is_some();
                self.retry_later(now_ms);
                None
            }
        }
    }

    /// What a response's leader and epoch mean (Kafka's `maybeHandleCommonResponse`):
    /// `Some(())` when the response was handled by that alone.
    fn common(
        &mut self,
        now_ms: u64,
        error: Option<ResponseError>,
        leader_id: i32,
        epoch: i32,
        endpoint: Option<Endpoint>,
        out: &mut Vec<Output>,
    ) -> Option<()> {
        let leader_known = leader_id >= 0;
        if epoch < self.epoch || error == Some(ResponseError::UnknownLeaderEpoch) {
            // An answer from an older epoch, or ours is ahead of that node's.
            self.retry_later(now_ms);
            return Some(());
        }
        let moved = epoch > self.epoch
            || matches!(
                error,
                Some(ResponseError::FencedLeaderEpoch | ResponseError::NotLeaderOrFollower)
            );
        let found = epoch == self.epoch && leader_known && self.leader.is_none();
        if moved || found {
            let before = (self.leader.clone(), self.epoch);
            self.epoch = epoch;
            self.leader = endpoint.filter(|_| leader_known).map(|endpoint| Leader {
                id: leader_id,
                endpoint,
            });
            // Told again what it knew (a probe's answer names the same leader) is no news:
            // nothing published, and the fetch timeout keeps running.
            if (self.leader.clone(), epoch) != before {
                if self.leader.is_some() {
                    out.push(Output::Leader {
                        id: leader_id,
                        epoch,
                    });
                }
                self.last_fetch_ok = now_ms;
            }
            if moved || error.is_some() || self.leader.is_none() {
                // Retried at once against the leader named (or the next endpoint).
                self.next_send = if self.leader.is_some() {
                    now_ms
                } else {
                    now_ms + self.config.retry_backoff_ms
                };
                return Some(());
            }
            // Found the leader in an answer without error: its records count.
            return None;
        }
        None
    }

    fn on_fetch(
        &mut self,
        now_ms: u64,
        response: Result<FetchResponse, Failure>,
        out: &mut Vec<Output>,
    ) {
        let Some(response) = self.answer(InFlight::Fetch, now_ms, response) else {
            return;
        };
        if let Some(e) = ResponseError::try_from_code(response.error_code) {
            return self.top_level_error(now_ms, e, out);
        }
        let Some(p) = single_partition(&response) else {
            out.push(Output::Fatal(
                "the quorum answered a metadata Fetch with no single __cluster_metadata partition"
                    .into(),
            ));
            return;
        };
        let leader_id = p.current_leader.leader_id.0;
        let endpoint = response
            .node_endpoints
            .iter()
            .find(|n| n.node_id.0 == leader_id)
            .and_then(|n| {
                Some(Endpoint {
                    node_id: Some(leader_id),
                    host: n.host.to_string(),
                    port: u16::try_from(n.port).ok()?,
                })
            })
            .or_else(|| self.known_endpoint(leader_id));
        let error = ResponseError::try_from_code(p.error_code);
        if self
            .common(
                now_ms,
                error,
                leader_id,
                p.current_leader.leader_epoch,
                endpoint,
                out,
            )
            .is_some()
        {
            return;
        }
        if let Some(e) = error {
            tracing::warn!(error = %e, "metadata Fetch answered with an error; retrying");
            return self.retry_later(now_ms);
        }
        if self.leader.is_none() {
            // A node that knows no leader either: its records (if any) are not the
            // leader's; the next endpoint is asked after the backoff.
            return self.retry_later(now_ms);
        }
        self.last_fetch_ok = now_ms;
        self.next_send = now_ms;
        if p.diverging_epoch.epoch >= 0 {
            self.truncate_to_end_offset(p.diverging_epoch.epoch, p.diverging_epoch.end_offset, out);
        } else if p.snapshot_id.epoch >= 0 || p.snapshot_id.end_offset >= 0 {
            if p.snapshot_id.epoch < 0 || p.snapshot_id.end_offset < 0 {
                tracing::error!(snapshot = ?p.snapshot_id, "the leader named an invalid snapshot id");
                return self.retry_later(now_ms);
            }
            tracing::info!(
                end_offset = p.snapshot_id.end_offset,
                epoch = p.snapshot_id.epoch,
                "the leader's log starts past the fetch offset: fetching its snapshot"
            );
            self.snapshot = Some(SnapshotFetch {
                end_offset: p.snapshot_id.end_offset,
                epoch: p.snapshot_id.epoch,
                bytes: BytesMut::new(),
            });
        } else {
            if let Some(records) = p.records.as_ref().filter(|r| !r.is_empty()) {
                if let Err(why) = self.append(records) {
                    out.push(Output::Fatal(why));
                    return;
                }
            }
            if p.high_watermark >= 0 {
                self.high_watermark = self.high_watermark.max(p.high_watermark);
            }
            self.commit(out);
        }
    }

    /// The leader's address when the response did not carry it: a configured voter's.
    fn known_endpoint(&self, id: i32) -> Option<Endpoint> {
        if let Some(l) = self.leader.as_ref().filter(|l| l.id == id) {
            return Some(l.endpoint.clone());
        }
        self.config
            .bootstrap
            .iter()
            .find(|e| e.node_id == Some(id))
            .cloned()
    }

    fn top_level_error(&mut self, now_ms: u64, e: ResponseError, out: &mut Vec<Output>) {
        match e {
            ResponseError::ClusterAuthorizationFailed | ResponseError::InconsistentClusterId => {
                out.push(Output::Fatal(format!(
                    "the controller quorum refused this broker's metadata Fetch: {e}"
                )));
            }
            _ => {
                tracing::warn!(error = %e, "metadata Fetch refused; retrying");
                self.retry_later(now_ms);
            }
        }
    }

    /// Appends the whole batches of `records` (a trailing partial batch is fetched again).
    fn append(&mut self, records: &Bytes) -> Result<(), String> {
        let mut position = 0;
        while records.len() - position >= HEADER_SIZE {
            let rest = &records[position..];
            let header = RecordBatchHeader::parse(rest).map_err(|e| e.to_string())?;
            let size = header.size_in_bytes();
            if size < HEADER_SIZE {
                return Err(format!(
                    "metadata batch at offset {} declares {size} bytes",
                    header.base_offset()
                ));
            }
            if size > rest.len() {
                break;
            }
            let bytes = records.slice(position..position + size);
            let (header, _) = records_of(&bytes)
                .map_err(|e| format!("metadata batch from the leader: {}", e.0))?;
            position += size;
            if header.last_offset() < self.end_offset {
                continue; // already held
            }
            if header.base_offset() != self.end_offset {
                return Err(format!(
                    "the leader sent a metadata batch at offset {} where the log ends at {}",
                    header.base_offset(),
                    self.end_offset
                ));
            }
            let epoch = header.partition_leader_epoch();
            if epoch < self.last_fetched_epoch {
                return Err(format!(
                    "the leader sent a metadata batch of epoch {epoch} after epoch {}",
                    self.last_fetched_epoch
                ));
            }
            if self.epochs.last().is_none_or(|(e, _)| *e < epoch) {
                self.epochs.push((epoch, header.base_offset()));
            }
            self.last_fetched_epoch = epoch;
            self.end_offset = header.last_offset() + 1;
            self.tail.push_back(Batch {
                base_offset: header.base_offset(),
                last_offset: header.last_offset(),
                epoch,
                bytes,
            });
        }
        Ok(())
    }

    /// Hands on every whole batch below the high watermark.
    fn commit(&mut self, out: &mut Vec<Output>) {
        let mut batches = Vec::new();
        while let Some(b) = self.tail.front() {
            if b.last_offset >= self.high_watermark {
                break;
            }
            let b = self.tail.pop_front().expect("front exists");
            self.committed = b.last_offset + 1;
            batches.push(b.bytes);
        }
        if !batches.is_empty() {
            // Epoch entries wholly below the committed offset can no longer be truncated to.
            while self.epochs.len() > 1 && self.epochs[1].1 <= self.committed {
                self.epochs.remove(0);
            }
            out.push(Output::Publish(batches));
        }
    }

    /// Kafka's `truncateToEndOffset`: the end of `epoch` in this log (the start of the
    /// first larger epoch, or the log end), no further than `end_offset` when this log
    /// has that very epoch.
    fn truncate_to_end_offset(&mut self, epoch: i32, end_offset: i64, out: &mut Vec<Output>) {
        let to = if epoch == 0 {
            end_offset.min(self.end_offset)
        } else {
            let at_or_below = self.epochs.iter().rev().find(|(e, _)| *e <= epoch);
            let local_end = self
                .epochs
                .iter()
                .find(|(e, _)| *e > epoch)
                .map_or(self.end_offset, |(_, start)| *start);
            match at_or_below {
                Some((e, _)) if *e == epoch => local_end.min(end_offset),
                Some(_) => local_end,
                None => self.committed,
            }
        };
        if to < self.committed {
            out.push(Output::Fatal(format!(
                "the leader asked to truncate the metadata log to offset {to}, below the committed offset {}",
                self.committed
            )));
            return;
        }
        tracing::info!(
            from = self.end_offset,
            to,
            "truncating the metadata log as the leader asked"
        );
        while self.tail.back().is_some_and(|b| b.base_offset >= to) {
            self.tail.pop_back();
        }
        if let Some(b) = self.tail.back() {
            if b.last_offset >= to {
                // A batch is kept whole or not at all; the fetch resumes at its start.
                let base = b.base_offset;
                self.tail.pop_back();
                return self.set_end(base);
            }
        }
        self.set_end(to);
    }

    fn set_end(&mut self, to: i64) {
        self.end_offset = to.min(self.end_offset);
        self.epochs.retain(|(_, start)| *start < self.end_offset);
        self.last_fetched_epoch = self
            .tail
            .back()
            .map(|b| b.epoch)
            .or_else(|| self.epochs.last().map(|(e, _)| *e))
            .unwrap_or(0);
    }

    fn on_fetch_snapshot(
        &mut self,
        now_ms: u64,
        response: Result<FetchSnapshotResponse, Failure>,
        out: &mut Vec<Output>,
    ) {
        let Some(response) = self.answer(InFlight::FetchSnapshot, now_ms, response) else {
            return;
        };
        if let Some(e) = ResponseError::try_from_code(response.error_code) {
            return self.top_level_error(now_ms, e, out);
        }
        let Some(p) = response
            .topics
            .first()
            .filter(|t| response.topics.len() == 1 && t.partitions.len() == 1)
            .and_then(|t| t.partitions.first())
        else {
            out.push(Output::Fatal(
                "the quorum answered FetchSnapshot with no single __cluster_metadata partition"
                    .into(),
            ));
            return;
        };
        let leader_id = p.current_leader.leader_id.0;
        let endpoint = response
            .node_endpoints
            .iter()
            .find(|n| n.node_id.0 == leader_id)
            .map(|n| Endpoint {
                node_id: Some(leader_id),
                host: n.host.to_string(),
                port: n.port,
            })
            .or_else(|| self.known_endpoint(leader_id));
        let error = ResponseError::try_from_code(p.error_code);
        if self
            .common(
                now_ms,
                error,
                leader_id,
                p.current_leader.leader_epoch,
                endpoint,
                out,
            )
            .is_some()
        {
            return;
        }
        self.last_fetch_ok = now_ms;
        self.next_send = now_ms;
        if error == Some(ResponseError::SnapshotNotFound)
            || p.snapshot_id.end_offset < 0
            || p.snapshot_id.epoch < 0
        {
            tracing::info!("the leader no longer has the snapshot being fetched: fetching again");
            self.snapshot = None;
            return;
        }
        if let Some(e) = error {
            tracing::warn!(error = %e, "FetchSnapshot answered with an error; retrying");
            return self.retry_later(now_ms);
        }
        let Some(s) = self.snapshot.as_mut() else {
            return;
        };
        if (s.end_offset, s.epoch) != (p.snapshot_id.end_offset, p.snapshot_id.epoch)
            || p.position != s.bytes.len() as i64
        {
            out.push(Output::Fatal(format!(
                "FetchSnapshot answered snapshot ({}, {}) at position {} while ({}, {}) was asked at {}",
                p.snapshot_id.end_offset,
                p.snapshot_id.epoch,
                p.position,
                s.end_offset,
                s.epoch,
                s.bytes.len()
            )));
            return;
        }
        let size = p.size;
        if size < 0
            || size as u64 > self.config.max_snapshot_bytes as u64
            || s.bytes.len() + p.unaligned_records.len() > size as usize
        {
            out.push(Output::Fatal(format!(
                "the leader's snapshot of {size} bytes exceeds what this broker takes ({} bytes) or its own size",
                self.config.max_snapshot_bytes
            )));
            return;
        }
        s.bytes.extend_from_slice(&p.unaligned_records);
        if s.bytes.len() as i64 == size {
            let s = self.snapshot.take().expect("being fetched");
            self.load_snapshot(s, out);
        }
    }

    /// A whole snapshot replaces the log before its end: the tail is dropped and Fetch
    /// resumes at its end offset.
    fn load_snapshot(&mut self, s: SnapshotFetch, out: &mut Vec<Output>) {
        self.tail.clear();
        self.end_offset = s.end_offset;
        self.committed = s.end_offset;
        self.high_watermark = self.high_watermark.max(s.end_offset);
        self.last_fetched_epoch = s.epoch;
        self.epochs = vec![(s.epoch, s.end_offset)];
        out.push(Output::LoadSnapshot {
            end_offset: s.end_offset,
            epoch: s.epoch,
            batches: s.bytes.freeze(),
        });
    }
}

fn single_partition(
    response: &FetchResponse,
) -> Option<&kafka_protocol::messages::fetch_response::PartitionData> {
    let [topic] = response.responses.as_slice() else {
        return None;
    };
    let named = topic.topic_id == METADATA_TOPIC_ID || topic.topic.as_str() == METADATA_TOPIC;
    match topic.partitions.as_slice() {
        [p] if named && p.partition_index == 0 => Some(p),
        _ => None,
    }
}

/// Whether two endpoints name the same host and port (a configured voter's node id may be
/// known where a bootstrap server's is not).
fn same_address(a: &Endpoint, b: &Endpoint) -> bool {
    a.host == b.host && a.port == b.port
}

#[cfg(test)]
#[path = "follower_tests.rs"]
mod tests;
