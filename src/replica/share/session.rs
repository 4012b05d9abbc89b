//! Share sessions (KIP-932, after Kafka's `ShareSessionCache` and
//! `SharePartitionManager.newContext`): a member's ShareFetch requests name the
//! share-partitions it fetches once, then only what changes, under an epoch that moves
//! by one with every request.
//!
//! - epoch 0 opens a session (any session of that member is replaced; acknowledgements
//!   may not ride on it);
//! - epoch -1 is the member's last request: it may acknowledge but not fetch, and the
//!   caller then closes the session and releases the member's records;
//! - any other epoch must be the session's current one (INVALID_SHARE_SESSION_EPOCH),
//!   of a session that exists (SHARE_SESSION_NOT_FOUND).
//!
//! A session belongs to the connection that opened it (Kafka's `connectionIdToSessionMap`):
//! when that connection closes, the session is closed and the member's records in its
//! share-partitions are released (`Shares::connection_closed`), as Kafka's
//! `ShareSessionCache`'s disconnect listener does. That is how a consumer that died
//! (kill -9: its sockets close) gets its records redelivered at once on every leader it
//! fetched from, wherever its group coordinator is.
//!
//! The cache holds at most `group.share.max.share.sessions` sessions
//! (SHARE_SESSION_LIMIT_REACHED past that); each holds the share-partitions its
//! requests named, which the ShareFetch handler limits to partitions that exist.

use std::collections::{BTreeSet, HashMap};

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

pub const INITIAL_EPOCH: i32 = 0;
pub const FINAL_EPOCH: i32 = -1;

/// `group.share.max.share.sessions`'s default.
pub const MAX_SHARE_SESSIONS_DEFAULT: usize = 2000;

/// A share-partition as a session names it.
pub type TopicIdPartition = (Uuid, i32);

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShareSessionKey {
    pub group_id: String,
    pub member_id: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareSession {
    /// The epoch the member's next request must carry.
    pub epoch: i32,
    pub partitions: BTreeSet<TopicIdPartition>,
    pub last_used_ms: i64,
    /// The connection that opened it (`bind_connection`); 0 until bound.
    pub connection_id: u64,
}

/// What a ShareFetch fetches from, after its session step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchContext {
    /// The member's last request: acknowledge, fetch nothing, then close the session.
    Final,
    /// The session's share-partitions, as this request leaves them.
    Session(BTreeSet<TopicIdPartition>),
}

/// Kafka's `ShareRequestMetadata.nextEpoch`: up by one, wrapping past `i32::MAX` to 1.
pub fn next_epoch(epoch: i32) -> i32 {
    match epoch {
        i32::MAX => 1,
        e if e < 0 => INITIAL_EPOCH,
        e => e + 1,
    }
}

#[derive(Debug)]
pub struct ShareSessionCache {
    sessions: HashMap<ShareSessionKey, ShareSession>,
    /// The session each connection opened, while it is open.
    by_connection: HashMap<u64, ShareSessionKey>,
    max_sessions: usize,
}

impl ShareSessionCache {
    pub fn new(max_sessions: usize) -> Self {
        ShareSessionCache {
            sessions: HashMap::new(),
            by_connection: HashMap::new(),
            max_sessions,
        }
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    pub fn get(&self, key: &ShareSessionKey) -> Option<&ShareSession> {
        self.sessions.get(key)
    }

    /// ShareFetch's session step: `fetch` are the share-partitions the request names
    /// (with a non-zero byte limit), `forget` those it drops, `acknowledging` whether it
    /// carries acknowledgements.
    pub fn fetch_context(
        &mut self,
        key: &ShareSessionKey,
        epoch: i32,
        fetch: &[TopicIdPartition],
        forget: &[TopicIdPartition],
        acknowledging: bool,
        now_ms: i64,
    ) -> Result<FetchContext, ResponseError> {
        match epoch {
            FINAL_EPOCH => {
                if !fetch.is_empty() {
                    return Err(ResponseError::InvalidRequest);
                }
                if !self.sessions.contains_key(key) {
                    return Err(ResponseError::ShareSessionNotFound);
                }
                Ok(FetchContext::Final)
            }
            INITIAL_EPOCH => {
                if acknowledging {
                    return Err(ResponseError::InvalidRequest);
                }
                let replacing = self.remove(key).is_some();
                if !replacing && self.sessions.len() >= self.max_sessions {
                    return Err(ResponseError::ShareSessionLimitReached);
                }
                let partitions: BTreeSet<TopicIdPartition> = fetch.iter().copied().collect();
                self.sessions.insert(
                    key.clone(),
                    ShareSession {
                        epoch: next_epoch(INITIAL_EPOCH),
                        partitions: partitions.clone(),
                        last_used_ms: now_ms,
                        connection_id: 0,
                    },
                );
                Ok(FetchContext::Session(partitions))
            }
            _ => {
                let session = self
                    .sessions
                    .get_mut(key)
                    .ok_or(ResponseError::ShareSessionNotFound)?;
                if session.epoch != epoch {
                    return Err(ResponseError::InvalidShareSessionEpoch);
                }
                session.partitions.extend(fetch.iter().copied());
                for tp in forget {
                    session.partitions.remove(tp);
                }
                session.last_used_ms = now_ms;
                session.epoch = next_epoch(session.epoch);
                Ok(FetchContext::Session(session.partitions.clone()))
            }
        }
    }

    /// ShareAcknowledge's session step (Kafka's `acknowledgeSessionUpdate`): epoch 0 is
    /// refused, -1 needs the session only, any other must be its current epoch.
    pub fn acknowledge_update(
        &mut self,
        key: &ShareSessionKey,
        epoch: i32,
        now_ms: i64,
    ) -> Result<(), ResponseError> {
        if epoch == INITIAL_EPOCH {
            return Err(ResponseError::InvalidShareSessionEpoch);
        }
        let session = self
            .sessions
            .get_mut(key)
            .ok_or(ResponseError::ShareSessionNotFound)?;
        if epoch == FINAL_EPOCH {
            return Ok(());
        }
        if session.epoch != epoch {
            return Err(ResponseError::InvalidShareSessionEpoch);
        }
        session.last_used_ms = now_ms;
        session.epoch = next_epoch(session.epoch);
        Ok(())
    }

    /// Closes a session (its final request was answered, or the member left the group);
    /// the caller releases the records the member holds in its share-partitions.
    pub fn remove(&mut self, key: &ShareSessionKey) -> Option<ShareSession> {
        let session = self.sessions.remove(key)?;
        if self.by_connection.get(&session.connection_id) == Some(key) {
            self.by_connection.remove(&session.connection_id);
        }
        Some(session)
    }

    /// Ties `key`'s session (just opened by a request at epoch 0) to the connection
    /// that request came on.
    pub fn bind_connection(&mut self, key: &ShareSessionKey, connection_id: u64) {
        let Some(session) = self.sessions.get_mut(key) else {
            return;
        };
        if self.by_connection.get(&session.connection_id) == Some(key) {
            self.by_connection.remove(&session.connection_id);
        }
        session.connection_id = connection_id;
        // A connection opening a second session (another member id) owns the latest.
        self.by_connection.insert(connection_id, key.clone());
    }

    /// `connection_id` closed: the session it opened, if still open, is closed; the
    /// caller releases the member's records in its share-partitions.
    pub fn remove_connection(
        &mut self,
        connection_id: u64,
    ) -> Option<(ShareSessionKey, ShareSession)> {
        let key = self.by_connection.remove(&connection_id)?;
        let session = self.remove(&key)?;
        Some((key, session))
    }

    /// Every session of a group's member, for when it leaves the group.
    pub fn remove_member(&mut self, group_id: &str, member_id: &str) -> Option<ShareSession> {
        self.remove(&ShareSessionKey {
            group_id: group_id.to_string(),
            member_id: member_id.to_string(),
        })
    }
}
