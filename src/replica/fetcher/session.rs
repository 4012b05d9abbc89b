//! A follower's side of a KIP-227 fetch session (Kafka's `FetchSessionHandler`).
//!
//! The first fetch is full: it names every partition, with session id 0 (or the id of a
//! session to close) and epoch 0, and the leader answers with a new session id. From then
//! on each fetch carries that id and the next epoch and names only what changed since the
//! previous one: partitions added, partitions whose fetch offset, log start, leader epoch,
//! last fetched epoch or topic id moved, and, in `forgotten_topics_data`, partitions that
//! left (by topic id from Fetch v13, by name below). The leader answers only partitions
//! with something new, so a partition absent from an incremental answer had nothing.
//!
//! Any trouble starts over with a full fetch: FETCH_SESSION_ID_NOT_FOUND (the leader
//! evicted the session or restarted) asks for a new session with id 0; any other error of
//! the whole response, an answer naming a partition outside the session, a failed request
//! or a new connection closes the session by naming it in a full fetch. Below Fetch v7
//! there are no sessions and every fetch is full.

use std::collections::HashSet;

use indexmap::IndexMap;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::FetchResponse;
use uuid::Uuid;

use super::thread::FetchedPartition;
use crate::log::TopicPartition;

/// Fetch requests carry a session from this version on.
pub const SESSION_VERSION: i16 = 7;
/// Fetch requests name topics by id from this version on.
const TOPIC_ID_VERSION: i16 = 13;
const INVALID_SESSION_ID: i32 = 0;
const INITIAL_EPOCH: i32 = 0;
/// The epoch of a fetch outside any session.
const FINAL_EPOCH: i32 = -1;

/// One Fetch request's partitions and session fields.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchData {
    pub session_id: i32,
    pub epoch: i32,
    /// The partitions the request names: all of them in a full fetch; in an incremental
    /// one those added or changed.
    pub to_send: Vec<FetchedPartition>,
    /// Partitions that left the session, with the topic id they were fetched under.
    pub forgotten: Vec<(TopicPartition, Uuid)>,
}

impl FetchData {
    pub fn is_full(&self) -> bool {
        self.epoch == INITIAL_EPOCH || self.epoch == FINAL_EPOCH
    }
}

/// The follower's state of its session with one leader.
#[derive(Debug)]
pub struct FetchSessionHandler {
    /// The session the next fetch names (0: none).
    session_id: i32,
    /// The epoch the next fetch carries: 0 for a full fetch.
    epoch: i32,
    /// What the leader's session holds for each partition, as last sent.
    partitions: IndexMap<TopicPartition, FetchedPartition>,
    /// The session's partitions by topic id and index, for answers by topic id.
    by_id: HashSet<(Uuid, i32)>,
}

impl Default for FetchSessionHandler {
    fn default() -> Self {
        FetchSessionHandler::new()
    }
}

impl FetchSessionHandler {
    pub fn new() -> Self {
        FetchSessionHandler {
            session_id: INVALID_SESSION_ID,
            epoch: INITIAL_EPOCH,
            partitions: IndexMap::new(),
            by_id: HashSet::new(),
        }
    }

    /// The session the next fetch continues (0: it will be full and open a new one).
    pub fn session_id(&self) -> i32 {
        self.session_id
    }

    /// The epoch the next fetch carries (0: a full fetch).
    pub fn next_epoch(&self) -> i32 {
        self.epoch
    }

    /// The request for `next`, every partition this round fetches (Kafka's
    /// `Builder.build`): the session becomes exactly `next`.
    pub fn build(&mut self, version: i16, next: Vec<FetchedPartition>) -> FetchData {
        if version < SESSION_VERSION {
            self.session_id = INVALID_SESSION_ID;
            self.epoch = INITIAL_EPOCH;
            self.set_partitions(&next);
            return FetchData {
                session_id: INVALID_SESSION_ID,
                epoch: FINAL_EPOCH,
                to_send: next,
                forgotten: Vec::new(),
            };
        }
        if self.epoch == INITIAL_EPOCH {
            self.set_partitions(&next);
            return FetchData {
                session_id: self.session_id,
                epoch: INITIAL_EPOCH,
                to_send: next,
                forgotten: Vec::new(),
            };
        }
        let mut next: IndexMap<TopicPartition, FetchedPartition> =
            next.into_iter().map(|p| (p.tp.clone(), p)).collect();
        let mut to_send = Vec::new();
        let mut forgotten = Vec::new();
        let by_topic_id = version >= TOPIC_ID_VERSION;
        self.partitions
            .retain(|tp, sent| match next.shift_remove(tp) {
                None => {
                    forgotten.push((tp.clone(), sent.topic_id));
                    false
                }
                Some(p) if p == *sent => true,
                Some(p) => {
                    // A topic recreated under a new id is a new partition to the leader: the
                    // old one is forgotten, by id; names cannot tell them apart.
                    if by_topic_id && p.topic_id != sent.topic_id {
                        forgotten.push((tp.clone(), sent.topic_id));
                    }
                    *sent = p.clone();
                    to_send.push(p);
                    true
                }
            });
        for (tp, p) in next {
            self.partitions.insert(tp, p.clone());
            to_send.push(p);
        }
        self.index_ids();
        FetchData {
            session_id: self.session_id,
            epoch: self.epoch,
            to_send,
            forgotten,
        }
    }

    fn set_partitions(&mut self, next: &[FetchedPartition]) {
        self.partitions = next.iter().map(|p| (p.tp.clone(), p.clone())).collect();
        self.index_ids();
    }

    fn index_ids(&mut self) {
        self.by_id = self
            .partitions
            .values()
            .map(|p| (p.topic_id, p.tp.partition))
            .collect();
    }

    /// Takes in the answer to the fetch last built at `version` (Kafka's
    /// `handleResponse`): whether its partitions are to be applied. `false` means the
    /// next fetch is full.
    pub fn handle_response(&mut self, version: i16, response: &FetchResponse) -> bool {
        if version < SESSION_VERSION {
            return response.error_code == 0;
        }
        if response.error_code != 0 {
            if response.error_code == ResponseError::FetchSessionIdNotFound.code() {
                self.session_id = INVALID_SESSION_ID;
            }
            self.epoch = INITIAL_EPOCH;
            return false;
        }
        let full = self.epoch == INITIAL_EPOCH;
        if let Some(tp) = self.unknown_partition(version, response) {
            tracing::info!(session_id = self.session_id, partition = %tp,
                "the leader answered a partition outside the fetch session; starting a new one");
            if full {
                self.session_id = INVALID_SESSION_ID;
            }
            self.epoch = INITIAL_EPOCH;
            return false;
        }
        if response.session_id == INVALID_SESSION_ID {
            // No session (a full leader cache), or the leader closed it.
            self.session_id = INVALID_SESSION_ID;
            self.epoch = INITIAL_EPOCH;
        } else if full {
            self.session_id = response.session_id;
            self.epoch = next_epoch(INITIAL_EPOCH);
        } else {
            self.epoch = next_epoch(self.epoch);
        }
        true
    }

    /// The request failed as a whole (Kafka's `handleError`), or the connection is new:
    /// the next fetch is full and closes this session.
    pub fn handle_error(&mut self) {
        self.epoch = INITIAL_EPOCH;
    }

    /// A partition of `response` the session does not hold, if any.
    fn unknown_partition(&self, version: i16, response: &FetchResponse) -> Option<String> {
        for t in &response.responses {
            for p in &t.partitions {
                let known = match version >= TOPIC_ID_VERSION {
                    true => self.by_id.contains(&(t.topic_id, p.partition_index)),
                    false => self
                        .partitions
                        .contains_key(&TopicPartition::new(t.topic.0.as_str(), p.partition_index)),
                };
                if !known {
                    return Some(match version >= TOPIC_ID_VERSION {
                        true => format!("{}-{}", t.topic_id, p.partition_index),
                        false => format!("{}-{}", t.topic.0.as_str(), p.partition_index),
                    });
                }
            }
        }
        None
    }
}

/// Kafka's `FetchMetadata.nextEpoch`: epochs run 1..=i32::MAX and wrap to 1.
fn next_epoch(epoch: i32) -> i32 {
    match epoch {
        i32::MAX => 1,
        e => e + 1,
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
