//! Incremental fetch sessions (KIP-227, Kafka's `FetchSession` and `FetchSessionCache`).
//!
//! A client that sends a full fetch with session epoch 0 gets a session id back; from
//! then on it names only the partitions whose fetch position changed (and those to
//! forget), and the broker answers only the partitions with something new: records, a
//! moved high watermark or log start offset, an error or a diverging epoch. With
//! thousands of partitions per consumer this turns each fetch's request and response
//! from O(partitions) on the wire into O(change).
//!
//! The cache holds at most `max.incremental.fetch.session.cache.slots` sessions. A new
//! session that finds it full evicts, as Kafka does: first the least recently used session
//! if it has been idle for more than two minutes; else the least valuable session old
//! enough to be evicted (older than two minutes, or any consumer session when the new
//! one is a follower's), valued by (follower, partition count, id). A session that cannot
//! be made is no error: the fetch is answered with session id 0 and the client keeps
//! sending full fetches.

use std::collections::HashMap;
use std::time::Instant;

use indexmap::IndexMap;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use uuid::Uuid;

/// The session id of a fetch outside any session.
pub const INVALID_SESSION_ID: i32 = 0;
/// The epoch of a full fetch that asks for a new session.
pub const INITIAL_EPOCH: i32 = 0;
/// The epoch of a full fetch that wants no session (and closes the one it names).
pub const FINAL_EPOCH: i32 = -1;
/// Kafka's `min.incremental.fetch.session.eviction.ms` (not configurable there either):
/// a session is protected from eviction by a newcomer this long after its creation, and
/// evictable by anyone once unused this long.
pub const EVICTION_MS: u64 = 120_000;
/// Fetch requests name topics by id from this version on.
const TOPIC_ID_VERSION: i16 = 13;
/// The most a session may hold, counted as [`PARTITION_BYTES`] per partition plus its
/// topic name: a full fetch that would need more gets no session (the client goes on
/// with full fetches), and an incremental fetch that would grow its session past it
/// ends the session (FETCH_SESSION_ID_NOT_FOUND: the client starts over with a full
/// fetch). Some 200,000 partitions of short-named topics fit.
pub const MAX_SESSION_BYTES: usize = 64 << 20;
/// What a session holds per partition besides its topic name: the key, the cached
/// request and answer offsets, and the index map's entry.
pub const PARTITION_BYTES: usize = 256;

/// A partition of a session: the topic as the request names it (by id from v13, by
/// name before; the other field is unset) and the partition index.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SessionPartitionKey {
    pub topic_id: Uuid,
    pub topic: TopicName,
    pub partition: i32,
}

impl SessionPartitionKey {
    /// What a session holding this partition is counted as holding.
    fn bytes(&self) -> usize {
        PARTITION_BYTES + self.topic.len()
    }
}

/// Copies what a session keeps out of the request it came in. A decoded request's
/// strings and unknown tagged fields are slices of its frame, and a slice keeps the
/// whole frame alive: one partition kept from a Fetch carrying a 64 MiB `rack_id` kept
/// 64 MiB. Consecutive partitions of one topic share one copy of its name.
#[derive(Default)]
struct Detacher {
    last: Option<TopicName>,
}

impl Detacher {
    fn name(&mut self, name: &TopicName) -> TopicName {
        match &self.last {
            Some(last) if last.as_str() == name.as_str() => last.clone(),
            _ => {
                let copy = TopicName(StrBytes::from_string(name.as_str().to_string()));
                self.last = Some(copy.clone());
                copy
            }
        }
    }

    fn key(&mut self, key: SessionPartitionKey) -> SessionPartitionKey {
        SessionPartitionKey {
            topic: self.name(&key.topic),
            ..key
        }
    }
}

/// The request of one partition without what skua does not read (its unknown tagged
/// fields, slices of the frame).
fn detached_request(mut request: FetchPartition) -> FetchPartition {
    request.unknown_tagged_fields = Default::default();
    request
}

/// What a session remembers of one partition: the fetch parameters the client last sent
/// and what the last response told it.
#[derive(Clone, Debug)]
struct CachedPartition {
    request: FetchPartition,
    high_watermark: i64,
    log_start_offset: i64,
}

impl CachedPartition {
    /// Whether the answer `data` must be sent (Kafka's `maybeUpdateResponseData`), and
    /// remembers what it told the client.
    fn must_respond(&mut self, data: &PartitionData) -> bool {
        let mut must = data.records.as_ref().is_some_and(|r| !r.is_empty());
        if self.high_watermark != data.high_watermark {
            self.high_watermark = data.high_watermark;
            must = true;
        }
        if self.log_start_offset != data.log_start_offset {
            self.log_start_offset = data.log_start_offset;
            must = true;
        }
        if data.preferred_read_replica.0 >= 0 || data.diverging_epoch.epoch >= 0 {
            must = true;
        }
        if data.error_code != 0 {
            // Sent again once the error clears: -1 never equals a real high watermark.
            self.high_watermark = -1;
            must = true;
        }
        must
    }
}

struct FetchSession {
    /// A follower's session, which may displace consumers' sessions.
    privileged: bool,
    /// Made by a v13+ fetch (topics by id); a fetch of the other kind may not use it.
    uses_topic_ids: bool,
    creation_ms: u64,
    last_used_ms: u64,
    /// The epoch the next incremental fetch must carry.
    epoch: i32,
    /// In the order fetches read them: partitions that returned records move to the end,
    /// so that a response cut at `max_bytes` does not always favour the same partitions.
    partitions: IndexMap<SessionPartitionKey, CachedPartition>,
    /// What the partitions are counted as holding (see [`MAX_SESSION_BYTES`]).
    bytes: usize,
}

/// How to answer one fetch (Kafka's `FetchContext`), decided before reading.
#[derive(Debug)]
pub enum FetchContext {
    /// Answer every requested partition; no session.
    Sessionless(Vec<FetchTopic>),
    /// Answer every requested partition, then offer a new session.
    Full {
        topics: Vec<FetchTopic>,
        privileged: bool,
        uses_topic_ids: bool,
    },
    /// Read every partition of the session; answer only those with something new.
    Incremental {
        session_id: i32,
        /// The epoch this fetch carried (the session now expects the next one).
        epoch: i32,
        topics: Vec<FetchTopic>,
    },
    /// Answer the error alone, with session id 0.
    Error(ResponseError),
}

/// The session part of a Fetch request.
pub struct SessionRequest {
    pub version: i16,
    pub session_id: i32,
    pub epoch: i32,
    pub is_follower: bool,
    pub topics: Vec<FetchTopic>,
    pub forgotten: Vec<ForgottenTopic>,
}

/// The broker's fetch sessions.
pub struct FetchSessionCache {
    max_sessions: usize,
    started: Instant,
    sessions: Mutex<HashMap<i32, FetchSession>>,
}

impl FetchSessionCache {
    pub fn new(max_sessions: usize) -> Self {
        FetchSessionCache {
            max_sessions,
            started: Instant::now(),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Milliseconds on the cache's monotonic clock.
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub fn len(&self) -> usize {
        self.sessions.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Decides how `req` is answered (Kafka's `FetchManager.newContext`); an incremental
    /// fetch updates its session and advances its epoch here.
    pub fn new_context(&self, now_ms: u64, req: SessionRequest) -> FetchContext {
        let uses_topic_ids = req.version >= TOPIC_ID_VERSION;
        if req.epoch == INITIAL_EPOCH || req.epoch == FINAL_EPOCH {
            // A full fetch closes the session it names.
            if req.session_id != INVALID_SESSION_ID {
                self.sessions.lock().remove(&req.session_id);
            }
            return match req.epoch {
                FINAL_EPOCH => FetchContext::Sessionless(req.topics),
                _ => FetchContext::Full {
                    topics: req.topics,
                    privileged: req.is_follower,
                    uses_topic_ids,
                },
            };
        }
        let mut sessions = self.sessions.lock();
        let Some(session) = sessions.get_mut(&req.session_id) else {
            return FetchContext::Error(ResponseError::FetchSessionIdNotFound);
        };
        if session.epoch != req.epoch {
            return FetchContext::Error(ResponseError::InvalidFetchSessionEpoch);
        }
        if session.uses_topic_ids != uses_topic_ids {
            return FetchContext::Error(ResponseError::FetchSessionTopicIdError);
        }
        update(session, req.topics, req.forgotten);
        if session.bytes > MAX_SESSION_BYTES {
            tracing::warn!(
                session_id = req.session_id,
                partitions = session.partitions.len(),
                bytes = session.bytes,
                "fetch session closed: it grew past {MAX_SESSION_BYTES} bytes"
            );
            sessions.remove(&req.session_id);
            return FetchContext::Error(ResponseError::FetchSessionIdNotFound);
        }
        if session.partitions.is_empty() {
            // Nothing left to fetch: the session ends, as in Kafka.
            sessions.remove(&req.session_id);
            return FetchContext::Sessionless(Vec::new());
        }
        session.last_used_ms = now_ms;
        session.epoch = next_epoch(session.epoch);
        FetchContext::Incremental {
            session_id: req.session_id,
            epoch: req.epoch,
            topics: session_topics(&session.partitions),
        }
    }

    /// A new session holding the partitions a full fetch was answered, each with the
    /// request's parameters and the answer's offsets (Kafka's `maybeCreateSession`).
    /// Returns its id, or [`INVALID_SESSION_ID`] when the cache is full of sessions more
    /// valuable than this one.
    pub fn maybe_create(
        &self,
        now_ms: u64,
        privileged: bool,
        uses_topic_ids: bool,
        answered: Vec<(SessionPartitionKey, FetchPartition, &PartitionData)>,
    ) -> i32 {
        if self.max_sessions == 0 {
            return INVALID_SESSION_ID;
        }
        let bytes: usize = answered.iter().map(|(key, _, _)| key.bytes()).sum();
        if bytes > MAX_SESSION_BYTES {
            return INVALID_SESSION_ID;
        }
        let mut sessions = self.sessions.lock();
        if sessions.len() >= self.max_sessions
            && !try_evict(&mut sessions, privileged, answered.len(), now_ms)
        {
            return INVALID_SESSION_ID;
        }
        let id = new_session_id(&sessions);
        let mut detach = Detacher::default();
        let partitions = answered
            .into_iter()
            .map(|(key, request, data)| {
                let cached = CachedPartition {
                    request: detached_request(request),
                    high_watermark: data.high_watermark,
                    log_start_offset: data.log_start_offset,
                };
                (detach.key(key), cached)
            })
            .collect();
        let session = FetchSession {
            privileged,
            uses_topic_ids,
            creation_ms: now_ms,
            last_used_ms: now_ms,
            epoch: next_epoch(INITIAL_EPOCH),
            partitions,
            bytes,
        };
        tracing::debug!(
            session_id = id,
            partitions = session.partitions.len(),
            privileged,
            "fetch session created"
        );
        sessions.insert(id, session);
        id
    }

    /// What every session is counted as holding (see [`MAX_SESSION_BYTES`]).
    pub fn retained_bytes(&self) -> usize {
        self.sessions.lock().values().map(|s| s.bytes).sum()
    }

    /// Drops from `responses` (one entry per key of `keys`, in that order) the partitions
    /// with nothing new for the client, and remembers what the rest told it. Returns the
    /// error for the whole response when another fetch of the same epoch got in between.
    pub fn answer_incremental(
        &self,
        session_id: i32,
        epoch: i32,
        keys: &[SessionPartitionKey],
        responses: &mut Vec<FetchableTopicResponse>,
    ) -> Result<(), ResponseError> {
        let mut sessions = self.sessions.lock();
        let Some(session) = sessions.get_mut(&session_id) else {
            // Evicted since the fetch began: the client learns it on its next fetch.
            return Ok(());
        };
        if session.epoch != next_epoch(epoch) {
            return Err(ResponseError::InvalidFetchSessionEpoch);
        }
        let mut keys = keys.iter();
        let mut moved = Vec::new();
        for topic in responses.iter_mut() {
            topic.partitions.retain(|data| {
                let Some(key) = keys.next() else {
                    return true;
                };
                let Some(cached) = session.partitions.get_mut(key) else {
                    return true;
                };
                let must = cached.must_respond(data);
                if data.records.as_ref().is_some_and(|r| !r.is_empty()) {
                    moved.push(key.clone());
                }
                must
            });
        }
        responses.retain(|t| !t.partitions.is_empty());
        for key in moved {
            // The session's own key goes back in, not the caller's copy of it.
            if let Some((key, cached)) = session.partitions.shift_remove_entry(&key) {
                session.partitions.insert(key, cached);
            }
        }
        Ok(())
    }
}

/// Applies an incremental fetch's changes: new or changed partitions take the request's
/// parameters, forgotten ones leave.
fn update(session: &mut FetchSession, topics: Vec<FetchTopic>, forgotten: Vec<ForgottenTopic>) {
    let mut detach = Detacher::default();
    for t in topics {
        let topic = detach.name(&t.topic);
        for fp in t.partitions {
            let key = SessionPartitionKey {
                topic_id: t.topic_id,
                topic: topic.clone(),
                partition: fp.partition,
            };
            let request = detached_request(fp);
            match session.partitions.get_mut(&key) {
                Some(cached) => cached.request = request,
                None => {
                    let cached = CachedPartition {
                        request,
                        high_watermark: -1,
                        log_start_offset: -1,
                    };
                    session.bytes += key.bytes();
                    session.partitions.insert(key, cached);
                }
            }
        }
    }
    for t in forgotten {
        for partition in t.partitions {
            let key = SessionPartitionKey {
                topic_id: t.topic_id,
                topic: t.topic.clone(),
                partition,
            };
            if session.partitions.shift_remove(&key).is_some() {
                session.bytes -= key.bytes();
            }
        }
    }
}

/// The session's partitions as the topics of a request, in session order (consecutive
/// partitions of one topic share an entry).
fn session_topics(partitions: &IndexMap<SessionPartitionKey, CachedPartition>) -> Vec<FetchTopic> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (key, cached) in partitions {
        match topics.last_mut() {
            Some(t) if t.topic_id == key.topic_id && t.topic == key.topic => {}
            _ => topics.push(
                FetchTopic::default()
                    .with_topic(key.topic.clone())
                    .with_topic_id(key.topic_id),
            ),
        }
        if let Some(t) = topics.last_mut() {
            t.partitions.push(cached.request.clone());
        }
    }
    topics
}

/// Kafka's `FetchMetadata.nextEpoch`: epochs run 1..=i32::MAX and wrap to 1.
fn next_epoch(epoch: i32) -> i32 {
    match epoch {
        e if e < 0 => FINAL_EPOCH,
        i32::MAX => 1,
        e => e + 1,
    }
}

/// A random positive id no session holds.
fn new_session_id(sessions: &HashMap<i32, FetchSession>) -> i32 {
    loop {
        let id = (Uuid::new_v4().as_u128() as u32 & i32::MAX as u32) as i32;
        if id != INVALID_SESSION_ID && !sessions.contains_key(&id) {
            return id;
        }
    }
}

/// Makes room for a session of `size` partitions (Kafka's `tryEvict`): evicts the least
/// recently used session if it is stale, else the least valuable session this newcomer
/// may displace if it is worth no more than the newcomer.
fn try_evict(
    sessions: &mut HashMap<i32, FetchSession>,
    privileged: bool,
    size: usize,
    now_ms: u64,
) -> bool {
    let lru = sessions
        .iter()
        .min_by_key(|(id, s)| (s.last_used_ms, **id))
        .map(|(id, s)| (*id, s.last_used_ms));
    let Some((lru_id, lru_used_ms)) = lru else {
        return false;
    };
    if now_ms.saturating_sub(lru_used_ms) > EVICTION_MS {
        sessions.remove(&lru_id);
        return true;
    }
    // Sessions past their protection may be displaced by anyone; a follower may also
    // displace any consumer's session.
    let value = |id: i32, s: &FetchSession| (s.privileged, s.partitions.len(), id);
    let least = sessions
        .iter()
        .filter(|(_, s)| {
            let old = now_ms.saturating_sub(s.creation_ms) > EVICTION_MS;
            old || (privileged && !s.privileged)
        })
        .map(|(id, s)| value(*id, s))
        .min();
    match least {
        // The newcomer's id counts as 0, below every real one: it must be worth more.
        Some(least) if (privileged, size, 0) >= least => {
            sessions.remove(&least.2);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
#[path = "fetch_session_tests.rs"]
mod tests;
