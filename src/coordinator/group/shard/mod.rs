//! GroupShard: the groups and committed offsets of one `__consumer_offsets` partition,
//! as the coordinator runtime serves them.
//!
//! State changes by replaying records (`replay` below): offsets, group deletion and
//! every KIP-848 change, at write time and at load time alike. Classic groups are the
//! exception Kafka makes too: their operations change the group in memory and write its
//! GroupMetadata only to persist it (`classic.rs`).
//!
//! Timers are one per group (its earliest session, rebalance or sync deadline) plus
//! the periodic offset expiry, so idle groups cost nothing between requests.
//!
//! - `classic.rs`: JoinGroup, SyncGroup, Heartbeat, LeaveGroup;
//! - `consumer.rs`: ConsumerGroupHeartbeat and the sessions kept beside KIP-848 groups;
//! - `offsets.rs`: OffsetCommit, OffsetFetch, OffsetDelete, offset expiry;
//! - `admin.rs`: ListGroups, DescribeGroups, ConsumerGroupDescribe, DeleteGroups.

mod admin;
mod classic;
mod consumer;
mod offsets;
mod share;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use bytes::Bytes;
use tokio::time::{Duration, Instant};

pub use admin::{GroupDescription, GroupOffsetsView, ListedGroup, MemberDescription};
pub use classic::SyncRequest;
pub use offsets::{CommitRequest, Committer, FetchedOffset};
pub use share::ShareHeartbeatAnswer;

use super::classic::{ClassicGroup, GroupState};
use super::consumer::{ConsumerGroup, RegexCache, TopicImage};
use super::offsets::{Committed, Offsets};
use super::records::consumer::ConsumerKey;
use super::records::share::ShareKey;
use super::records::{decode_record, encode_record, GroupRecord, RecordKey, RecordValue};
use super::settings::GroupSettings;
use super::share::{InitializingSince, ShareDepartures, ShareGroup};
use super::topics::TopicSource;
use crate::coordinator::runtime::timers::Timers;
use crate::coordinator::runtime::{now_ms, Shard, Written};
use crate::log::control::TxnResult;

/// A group: classic or KIP-848, one kind at a time.
#[expect(
    clippy::large_enum_variant,
    reason = "groups live in a map, one value each; boxing would add an allocation per group"
)]
pub enum Group {
    Classic(ClassicGroup),
    Consumer(ConsumerGroup),
    Share(ShareGroup),
}

impl Group {
    /// `classic` or `consumer`, as ListGroups reports the type.
    pub fn group_type(&self) -> &'static str {
        match self {
            Group::Classic(_) => "classic",
            Group::Consumer(_) => "consumer",
            Group::Share(_) => "share",
        }
    }

    /// The state ListGroups and DescribeGroups report.
    pub fn state_name(&self) -> &'static str {
        match self {
            Group::Classic(g) => g.state.name(),
            Group::Consumer(c) => c.state_name(),
            Group::Share(s) => s.state_name(),
        }
    }

    /// No members (and, for a classic group, none pending).
    pub fn is_empty(&self) -> bool {
        match self {
            Group::Classic(g) => g.is_empty(),
            Group::Consumer(c) => c.members.is_empty(),
            Group::Share(s) => s.members.is_empty(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum TimerKey {
    /// A group's earliest deadline.
    Group(String),
    OffsetExpiry,
}

/// What a KIP-848 member has beside its records: when its session (and, while it
/// revokes, its rebalance timeout) runs out, and whether it must be sent its assignment
/// again. Not stored; starts afresh at load.
#[derive(Clone, Copy, Debug)]
struct Session {
    deadline: Instant,
    revocation_deadline: Option<Instant>,
    resend: bool,
}

/// How long a timer whose write failed waits before it tries again.
const TIMER_RETRY: Duration = Duration::from_secs(1);

pub struct GroupShard {
    settings: Arc<GroupSettings>,
    /// The topics as of the latest KIP-848 operation; replay maps topic ids with it.
    image: Arc<TopicImage>,
    groups: HashMap<String, Group>,
    offsets: Offsets,
    /// KIP-848 sessions: group → member → session.
    sessions: HashMap<String, HashMap<String, Session>>,
    /// The topic image version each KIP-848 group last resolved its subscriptions at;
    /// set once the write that resolved them is committed.
    resolved_at: HashMap<String, Arc<AtomicU64>>,
    regexes: RegexCache,
    /// Share groups: when each topic's share-partition state was last asked to be
    /// initialized.
    share_initializing: HashMap<String, InitializingSince>,
    /// Told of share group members that left, once that is committed.
    share_departures: Arc<ShareDepartures>,
    timers: Timers<TimerKey>,
}

impl GroupShard {
    pub fn new(
        settings: Arc<GroupSettings>,
        topics: Arc<dyn TopicSource>,
        share_departures: Arc<ShareDepartures>,
    ) -> Self {
        let image = topics.image();
        GroupShard {
            settings,
            image,
            groups: HashMap::new(),
            offsets: Offsets::default(),
            sessions: HashMap::new(),
            resolved_at: HashMap::new(),
            regexes: RegexCache::default(),
            share_initializing: HashMap::new(),
            share_departures,
            timers: Timers::default(),
        }
    }

    fn offsets_retention_check_interval(&self) -> Duration {
        let ms = self
            .settings
            .broker()
            .group
            .offsets_retention_check_interval_ms;
        Duration::from_millis(ms)
    }

    pub fn group(&self, group_id: &str) -> Option<&Group> {
        self.groups.get(group_id)
    }

    pub fn groups(&self) -> impl Iterator<Item = (&String, &Group)> {
        self.groups.iter()
    }

    pub fn offsets(&self) -> &Offsets {
        &self.offsets
    }

    /// Timers currently set (a group's deadline counts once).
    pub fn timer_count(&self) -> usize {
        self.timers.len()
    }

    fn new_classic(&self, group_id: &str, now_ms: i64) -> ClassicGroup {
        let mut g = ClassicGroup::new(group_id, now_ms);
        g.initial_delay_ms = self
            .settings
            .broker()
            .group
            .classic
            .initial_rebalance_delay_ms;
        g
    }

    /// A group that holds nothing: never had members or a generation, and no offsets.
    fn holds_nothing(&self, group_id: &str) -> bool {
        let empty_classic = matches!(
            self.groups.get(group_id),
            Some(Group::Classic(g)) if g.state == GroupState::Empty
                && g.is_empty()
                && g.generation_id == 0
        );
        empty_classic && !self.offsets.has_offsets(group_id)
    }

    fn drop_if_holds_nothing(&mut self, group_id: &str) {
        if self.holds_nothing(group_id) {
            self.remove_group(group_id);
        }
    }

    fn remove_group(&mut self, group_id: &str) {
        self.groups.remove(group_id);
        self.sessions.remove(group_id);
        self.resolved_at.remove(group_id);
        self.share_initializing.remove(group_id);
        self.timers.cancel(&TimerKey::Group(group_id.to_string()));
    }

    /// Offsets without a group keep one: an empty classic group, as Kafka creates for
    /// commits from outside any group. Its timestamp 0 lets its offsets expire by their
    /// commit time.
    fn keep_for_offsets(&mut self, group_id: &str) {
        if !self.groups.contains_key(group_id) && self.offsets.has_offsets(group_id) {
            let g = self.new_classic(group_id, 0);
            self.groups.insert(group_id.to_string(), Group::Classic(g));
        }
    }

    /// Whether `member_id` of a KIP-848 or share group has a heartbeat session here: a
    /// joining member's session is set before its record makes it a member.
    fn has_session(&self, group_id: &str, member_id: &str) -> bool {
        self.sessions
            .get(group_id)
            .is_some_and(|s| s.contains_key(member_id))
    }

    /// After a member's tombstone was replayed: its session goes and the group's timer is
    /// set again without it.
    fn member_departed(&mut self, group_id: &str, departed: Option<String>) {
        if let Some(id) = departed {
            if let Some(sessions) = self.sessions.get_mut(group_id) {
                sessions.remove(&id);
            }
            self.schedule(group_id);
        }
    }

    /// Sets a group's timer to its earliest deadline (or none).
    fn schedule(&mut self, group_id: &str) {
        let at = match self.groups.get(group_id) {
            Some(Group::Classic(g)) => g.next_deadline(),
            Some(Group::Consumer(c)) => self.sessions.get(group_id).and_then(|sessions| {
                sessions
                    .iter()
                    .filter(|(id, _)| c.members.contains_key(*id))
                    .flat_map(|(_, s)| [Some(s.deadline), s.revocation_deadline])
                    .flatten()
                    .min()
            }),
            Some(Group::Share(g)) => self.sessions.get(group_id).and_then(|sessions| {
                sessions
                    .iter()
                    .filter(|(id, _)| g.members.contains_key(*id))
                    .map(|(_, s)| s.deadline)
                    .min()
            }),
            None => None,
        };
        self.timers.set(TimerKey::Group(group_id.to_string()), at);
    }

    /// The consumer group `group_id` for a record: a classic group in its place is
    /// replaced, as Kafka tombstones one kind before writing the other.
    fn consumer_for_replay(&mut self, group_id: &str) -> &mut ConsumerGroup {
        let slot = self
            .groups
            .entry(group_id.to_string())
            .or_insert_with(|| Group::Consumer(ConsumerGroup::default()));
        if !matches!(slot, Group::Consumer(_)) {
            *slot = Group::Consumer(ConsumerGroup::default());
        }
        match slot {
            Group::Consumer(c) => c,
            _ => unreachable!("replaced just above"),
        }
    }

    /// The share group `group_id` for a record: a group of another kind in its place
    /// is replaced, as Kafka tombstones one kind before writing the other.
    fn share_for_replay(&mut self, group_id: &str) -> &mut ShareGroup {
        let slot = self
            .groups
            .entry(group_id.to_string())
            .or_insert_with(|| Group::Share(ShareGroup::default()));
        if !matches!(slot, Group::Share(_)) {
            *slot = Group::Share(ShareGroup::default());
        }
        match slot {
            Group::Share(s) => s,
            _ => unreachable!("replaced just above"),
        }
    }
}

impl Shard for GroupShard {
    type Record = GroupRecord;

    fn encode(record: &GroupRecord) -> (Bytes, Option<Bytes>) {
        encode_record(record)
    }

    fn decode(key: Option<&Bytes>, value: Option<&Bytes>) -> Result<Option<GroupRecord>, String> {
        decode_record(key, value).map_err(|e| e.to_string())
    }

    fn replay(&mut self, offset: i64, (key, value): GroupRecord) -> Result<(), String> {
        let group_id = key.group().to_string();
        match (key, value) {
            (
                RecordKey::Offset {
                    topic, partition, ..
                },
                Some(RecordValue::Offset(value)),
            ) => {
                let committed = Committed {
                    value,
                    record_offset: offset,
                };
                self.offsets
                    .replay_commit(&group_id, topic, partition, committed);
                self.keep_for_offsets(&group_id);
            }
            (
                RecordKey::Offset {
                    topic, partition, ..
                },
                None,
            ) => {
                self.offsets.replay_delete(&group_id, topic, partition);
                self.drop_if_holds_nothing(&group_id);
            }
            (RecordKey::Group { .. }, Some(RecordValue::Group(v))) => {
                let mut g = ClassicGroup::restore(&group_id, v, Instant::now());
                g.initial_delay_ms = self
                    .settings
                    .broker()
                    .group
                    .classic
                    .initial_rebalance_delay_ms;
                self.remove_group(&group_id);
                self.groups.insert(group_id.clone(), Group::Classic(g));
                self.schedule(&group_id);
            }
            (RecordKey::Group { .. }, None) => {
                if let Some(Group::Classic(_)) = self.groups.get(&group_id) {
                    self.remove_group(&group_id);
                }
                self.keep_for_offsets(&group_id);
            }
            (
                RecordKey::Consumer {
                    kind: ConsumerKey::Metadata,
                    ..
                },
                None,
            ) => {
                // The consumer group is deleted; its offsets have tombstones of their own.
                if let Some(Group::Consumer(_)) = self.groups.get(&group_id) {
                    self.remove_group(&group_id);
                }
                self.keep_for_offsets(&group_id);
            }
            (RecordKey::Consumer { kind, .. }, None) => {
                let image = self.image.clone();
                if let Some(Group::Consumer(c)) = self.groups.get_mut(&group_id) {
                    let departed = match &kind {
                        ConsumerKey::Member(id) => Some(id.clone()),
                        _ => None,
                    };
                    c.replay(kind, None, &image)?;
                    self.member_departed(&group_id, departed);
                }
            }
            (RecordKey::Consumer { kind, .. }, Some(RecordValue::Consumer(v))) => {
                let image = self.image.clone();
                // A joining member's session is set before its record makes it a member;
                // its timer can only be set once the record is replayed.
                let joining = match &kind {
                    ConsumerKey::Member(id) => self.has_session(&group_id, id),
                    _ => false,
                };
                self.consumer_for_replay(&group_id)
                    .replay(kind, Some(v), &image)?;
                if joining {
                    self.schedule(&group_id);
                }
            }
            (
                RecordKey::Share {
                    kind: ShareKey::Metadata,
                    ..
                },
                None,
            ) => {
                // The share group is deleted.
                if let Some(Group::Share(_)) = self.groups.get(&group_id) {
                    self.remove_group(&group_id);
                }
                self.keep_for_offsets(&group_id);
            }
            (RecordKey::Share { kind, .. }, None) => {
                let image = self.image.clone();
                if let Some(Group::Share(s)) = self.groups.get_mut(&group_id) {
                    let departed = match &kind {
                        ShareKey::Member(id) => Some(id.clone()),
                        _ => None,
                    };
                    s.replay(kind, None, &image)?;
                    self.member_departed(&group_id, departed);
                }
            }
            (RecordKey::Share { kind, .. }, Some(RecordValue::Share(v))) => {
                let image = self.image.clone();
                let joining = match &kind {
                    ShareKey::Member(id) => self.has_session(&group_id, id),
                    _ => false,
                };
                self.share_for_replay(&group_id)
                    .replay(kind, Some(v), &image)?;
                if joining {
                    self.schedule(&group_id);
                }
            }
            _ => return Err("value does not match its key".into()),
        }
        Ok(())
    }

    /// A TxnOffsetCommit's record: pending for its producer until the marker. Other
    /// records in a transactional batch (a tombstone) act as they do anywhere.
    fn replay_transactional(
        &mut self,
        offset: i64,
        producer_id: i64,
        record: GroupRecord,
    ) -> Result<(), String> {
        match record {
            (
                RecordKey::Offset {
                    group,
                    topic,
                    partition,
                },
                Some(RecordValue::Offset(value)),
            ) => {
                let committed = Committed {
                    value,
                    record_offset: offset,
                };
                self.offsets
                    .replay_pending(producer_id, &group, topic, partition, committed);
                self.keep_for_offsets(&group);
                Ok(())
            }
            other => self.replay(offset, other),
        }
    }

    fn replay_end_txn(
        &mut self,
        _offset: i64,
        producer_id: i64,
        result: TxnResult,
    ) -> Result<(), String> {
        let groups = self
            .offsets
            .replay_end_txn(producer_id, result == TxnResult::Commit);
        for group_id in groups {
            self.drop_if_holds_nothing(&group_id);
        }
        Ok(())
    }

    fn on_loaded(&mut self, now: Instant) {
        let ids: Vec<String> = self.groups.keys().cloned().collect();
        for id in &ids {
            if let Some(Group::Consumer(c)) = self.groups.get(id) {
                // Every member gets a fresh session, a fresh rebalance timeout while it
                // revokes, and its assignment once more.
                let session_ms = self.settings.consumer(id).session_timeout_ms;
                let session = Duration::from_millis(session_ms.max(0) as u64);
                let sessions = c
                    .members
                    .values()
                    .map(|m| {
                        let revoking = !m.pending_revocation.is_empty();
                        let timeout = Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64);
                        (
                            m.member_id.clone(),
                            Session {
                                deadline: now + session,
                                revocation_deadline: revoking.then(|| now + timeout),
                                resend: true,
                            },
                        )
                    })
                    .collect();
                self.sessions.insert(id.clone(), sessions);
            }
            if let Some(Group::Share(g)) = self.groups.get(id) {
                // Every member gets a fresh session, as in Kafka after a failover.
                let session_ms = self.settings.broker().group.share.session_timeout_ms;
                let deadline = now + Duration::from_millis(session_ms.max(0) as u64);
                let sessions = g
                    .members
                    .keys()
                    .map(|m| {
                        let session = Session {
                            deadline,
                            revocation_deadline: None,
                            resend: true,
                        };
                        (m.clone(), session)
                    })
                    .collect();
                self.sessions.insert(id.clone(), sessions);
            }
            self.schedule(id);
        }
        let every = self.offsets_retention_check_interval();
        self.timers.schedule(TimerKey::OffsetExpiry, now + every);
    }

    fn on_unloaded(&mut self) {
        for g in self.groups.values_mut() {
            if let Group::Classic(g) = g {
                g.answer_waiters(kafka_protocol::error::ResponseError::NotCoordinator);
            }
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.timers.next()
    }

    fn on_deadline(&mut self, now: Instant) -> Written<GroupRecord, ()> {
        match self.timers.pop_first_due(now) {
            None => Written::response(()),
            Some(TimerKey::OffsetExpiry) => {
                let every = self.offsets_retention_check_interval();
                let (records, more) = self.expired_offsets(now_ms());
                // A partition with more to expire than one batch takes carries on at once.
                let next = if more { now } else { now + every };
                self.timers.schedule(TimerKey::OffsetExpiry, next);
                Written::new(records, ())
            }
            Some(TimerKey::Group(id)) => match self.groups.get(&id) {
                Some(Group::Classic(_)) => self.classic_tick(&id, now, now_ms()),
                Some(Group::Consumer(_)) => {
                    // Tried again shortly if the write fails; replaying the removal
                    // sets the group's next deadline.
                    self.timers
                        .schedule(TimerKey::Group(id.clone()), now + TIMER_RETRY);
                    self.expire_consumer_members(&id, now)
                }
                Some(Group::Share(_)) => {
                    self.timers
                        .schedule(TimerKey::Group(id.clone()), now + TIMER_RETRY);
                    self.expire_share_members(&id, now)
                }
                None => Written::response(()),
            },
        }
    }
}
