//! A classic group (JoinGroup/SyncGroup/Heartbeat/LeaveGroup): Kafka's group state
//! machine, free of I/O.
//!
//! ```text
//!            join                  all joined / timeout           leader's SyncGroup
//!   Empty ─────────▶ PreparingRebalance ─────────▶ CompletingRebalance ─────────▶ Stable
//!     ▲                ▲      │ no members left          │ member joins, leaves,     │
//!     └────────────────┼──────┘                          │ sync timeout              │
//!                      └─────────────────────────────────┴───────────────────────────┘
//!                                     member joins, leaves or expires
//! ```
//!
//! Requests that must wait (JoinGroup until the rebalance completes, SyncGroup until
//! the leader's assignment arrives) leave a oneshot sender in their member; the state
//! machine answers through it. Time is passed in (`now`), so every transition,
//! timeouts included, is tested without a clock. What the machine wants written to
//! `__consumer_offsets` (group metadata after a generation completes) and the answers
//! that must wait for that write are collected as [`Effects`] for the caller.
//!
//! As in Kafka's coordinator, a classic group changes in memory as requests arrive
//! (members, waiters and session timers are not records) and its GroupMetadata record
//! persists it; that record is replayed only when the partition loads (`record.rs`).

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use indexmap::IndexMap;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;
use tokio::time::{Duration, Instant};

mod commit;
mod record;
#[cfg(test)]
mod tests;

use super::records::GroupValue;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name Kafka reports in ListGroups and DescribeGroups.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// The broker settings the machine enforces.
pub use crate::config::group_coordinator::ClassicGroupConfig as GroupConfig;

/// A JoinGroup answer, before it is shaped for the request's version.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JoinResult {
    pub error: Option<ResponseError>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    pub skip_assignment: bool,
    /// Filled for the leader only: (member id, group instance id, metadata).
    pub members: Vec<(String, Option<String>, Bytes)>,
}

impl JoinResult {
    pub fn error(e: ResponseError, member_id: &str) -> JoinResult {
        JoinResult {
            error: Some(e),
            generation_id: -1,
            member_id: member_id.to_string(),
            ..Default::default()
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct SyncResult {
    pub error: Option<ResponseError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResult {
    pub fn error(e: ResponseError) -> SyncResult {
        SyncResult {
            error: Some(e),
            ..Default::default()
        }
    }
}

pub enum Outcome<T> {
    Done(T),
    Wait(oneshot::Receiver<T>),
}

/// A JoinGroup request as the machine needs it.
#[derive(Clone, Debug, Default)]
pub struct JoinRequest {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// v4+: a new dynamic member first gets MEMBER_ID_REQUIRED (KIP-394).
    pub require_known_member_id: bool,
    /// v9+: a rejoining static leader can be told to skip the assignment.
    pub supports_skip_assignment: bool,
}

pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    /// Supported protocols in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    join_waiter: Option<oneshot::Sender<JoinResult>>,
    sync_waiter: Option<oneshot::Sender<SyncResult>>,
    heartbeat_deadline: Instant,
}

impl Member {
    /// This member's metadata for `protocol`.
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }

    fn awaiting(&self) -> bool {
        self.join_waiter.is_some() || self.sync_waiter.is_some()
    }
}

/// What the caller must do after an operation, outside the lock.
#[derive(Default)]
pub struct Effects {
    /// Group metadata to append to `__consumer_offsets`.
    pub record: Option<GroupValue>,
    /// SyncGroup answers that go out once `record` is written.
    pub sync_answers: Vec<(oneshot::Sender<SyncResult>, SyncResult)>,
}

pub struct ClassicGroup {
    pub group_id: String,
    pub state: GroupState,
    /// Wall-clock ms of the last state change (GroupMetadataValue.currentStateTimestamp).
    pub state_timestamp_ms: i64,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: IndexMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, with the deadline to rejoin.
    pending_members: HashMap<String, Instant>,
    /// group.instance.id → member id.
    static_members: HashMap<String, String>,
    rebalance_deadline: Option<Instant>,
    /// While the first rebalance of an empty group waits for more members, the latest
    /// it may be extended to.
    initial_delay_cap: Option<Instant>,
    sync_deadline: Option<Instant>,
    /// `group.initial.rebalance.delay.ms`, applied when an empty group first rebalances.
    pub initial_delay_ms: i32,
    effects: Effects,
    /// How many members support each protocol (Kafka's `supportedProtocols`): whether
    /// every member supports one is a look-up, not a walk over every member's list.
    protocol_counts: HashMap<String, usize>,
}

fn member_id_for(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4())
}

impl ClassicGroup {
    pub fn new(group_id: &str, now_ms: i64) -> ClassicGroup {
        ClassicGroup {
            group_id: group_id.to_string(),
            state: GroupState::Empty,
            state_timestamp_ms: now_ms,
            generation_id: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: IndexMap::new(),
            pending_members: HashMap::new(),
            static_members: HashMap::new(),
            rebalance_deadline: None,
            initial_delay_cap: None,
            sync_deadline: None,
            initial_delay_ms: 0,
            effects: Effects::default(),
            protocol_counts: HashMap::new(),
        }
    }

    /// Counts `protocols` (a member's, each name once) in or out of `protocol_counts`.
    fn count_protocols(&mut self, protocols: &[(String, Bytes)], joined: bool) {
        let names: HashSet<&String> = protocols.iter().map(|(n, _)| n).collect();
        for name in names {
            if joined {
                *self.protocol_counts.entry(name.clone()).or_default() += 1;
                continue;
            }
            if let Some(count) = self.protocol_counts.get_mut(name) {
                *count -= 1;
                if *count == 0 {
                    self.protocol_counts.remove(name);
                }
            }
        }
    }

    /// Whether every member supports `protocol`.
    fn all_support(&self, protocol: &str) -> bool {
        self.protocol_counts.get(protocol) == Some(&self.members.len())
    }

    pub fn take_effects(&mut self) -> Effects {
        std::mem::take(&mut self.effects)
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.pending_members.is_empty()
    }

    fn transition(&mut self, to: GroupState, now_ms: i64) {
        self.state = to;
        self.state_timestamp_ms = now_ms;
    }

    // ---- JoinGroup ----

    pub fn join(
        &mut self,
        req: JoinRequest,
        cfg: &GroupConfig,
        now: Instant,
        now_ms: i64,
    ) -> Outcome<JoinResult> {
        let fail = |e| Outcome::Done(JoinResult::error(e, &req.member_id));
        if self.state == GroupState::Dead {
            return fail(ResponseError::CoordinatorNotAvailable);
        }
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            return fail(ResponseError::InconsistentGroupProtocol);
        }
        if req.member_id.is_empty() {
            return self.join_unknown_member(req, cfg, now, now_ms);
        }
        if self.pending_members.remove(&req.member_id).is_some() {
            let id = req.member_id.clone();
            return self.add_member_and_wait(id, req, now, now_ms);
        }
        let Some(member) = self.members.get(&req.member_id) else {
            return fail(ResponseError::UnknownMemberId);
        };
        if let Err(e) = self.check_instance(&req.member_id, req.group_instance_id.as_deref()) {
            return fail(e);
        }
        let unchanged = member.protocols == req.protocols;
        let is_leader = self.leader.as_deref() == Some(req.member_id.as_str());
        match self.state {
            GroupState::PreparingRebalance => {
                let rx = self.update_member(&req, now);
                self.maybe_complete_join(now, now_ms);
                Outcome::Wait(rx)
            }
            GroupState::CompletingRebalance if unchanged => {
                // A retried join of the generation being completed: answer it again.
                Outcome::Done(self.join_result(&req.member_id, is_leader))
            }
            GroupState::Stable if unchanged && !is_leader => {
                Outcome::Done(self.join_result(&req.member_id, false))
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                let rx = self.update_member(&req, now);
                self.prepare_rebalance(now, now_ms);
                Outcome::Wait(rx)
            }
            GroupState::Empty | GroupState::Dead => fail(ResponseError::UnknownMemberId),
        }
    }

    fn join_unknown_member(
        &mut self,
        req: JoinRequest,
        cfg: &GroupConfig,
        now: Instant,
        now_ms: i64,
    ) -> Outcome<JoinResult> {
        if let Some(instance) = req.group_instance_id.clone() {
            let new_id = member_id_for(&instance);
            if let Some(old_id) = self.static_members.get(&instance).cloned() {
                return self.replace_static_member(&old_id, new_id, req, now, now_ms);
            }
            if self.is_full(cfg) {
                return Outcome::Done(JoinResult::error(ResponseError::GroupMaxSizeReached, ""));
            }
            return self.add_member_and_wait(new_id, req, now, now_ms);
        }
        if self.is_full(cfg) {
            return Outcome::Done(JoinResult::error(ResponseError::GroupMaxSizeReached, ""));
        }
        let new_id = member_id_for(&req.client_id);
        if req.require_known_member_id {
            self.pending_members
                .insert(new_id.clone(), now + ms(req.session_timeout_ms));
            return Outcome::Done(JoinResult::error(ResponseError::MemberIdRequired, &new_id));
        }
        self.add_member_and_wait(new_id, req, now, now_ms)
    }

    fn is_full(&self, cfg: &GroupConfig) -> bool {
        self.members.len() + self.pending_members.len() >= cfg.max_size.max(0) as usize
    }

    fn add_member_and_wait(
        &mut self,
        member_id: String,
        req: JoinRequest,
        now: Instant,
        now_ms: i64,
    ) -> Outcome<JoinResult> {
        if self.members.is_empty() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        if let Some(instance) = &req.group_instance_id {
            self.static_members
                .insert(instance.clone(), member_id.clone());
        }
        let (tx, rx) = oneshot::channel();
        let protocols = owned_protocols(req.protocols);
        self.count_protocols(&protocols, true);
        self.members.insert(
            member_id.clone(),
            Member {
                member_id,
                group_instance_id: req.group_instance_id,
                client_id: req.client_id,
                client_host: req.client_host,
                session_timeout_ms: req.session_timeout_ms,
                rebalance_timeout_ms: req.rebalance_timeout_ms,
                protocols,
                assignment: Bytes::new(),
                join_waiter: Some(tx),
                sync_waiter: None,
                heartbeat_deadline: now + ms(req.session_timeout_ms),
            },
        );
        if self.state == GroupState::PreparingRebalance {
            self.extend_initial_delay(now);
            self.maybe_complete_join(now, now_ms);
        } else {
            self.prepare_rebalance(now, now_ms);
        }
        Outcome::Wait(rx)
    }

    /// KIP-345: a static member restarting under a new member id takes over the old
    /// one; in a Stable group with unchanged protocols it keeps its assignment and no
    /// rebalance happens.
    fn replace_static_member(
        &mut self,
        old_id: &str,
        new_id: String,
        req: JoinRequest,
        now: Instant,
        now_ms: i64,
    ) -> Outcome<JoinResult> {
        let Some(mut member) = self.members.shift_remove(old_id) else {
            return Outcome::Done(JoinResult::error(ResponseError::UnknownMemberId, ""));
        };
        if let Some(tx) = member.join_waiter.take() {
            let _ = tx.send(JoinResult::error(ResponseError::FencedInstanceId, old_id));
        }
        if let Some(tx) = member.sync_waiter.take() {
            let _ = tx.send(SyncResult::error(ResponseError::FencedInstanceId));
        }
        let protocol = self.protocol.clone().unwrap_or_default();
        let unchanged = member.metadata(&protocol) == metadata_in(&req.protocols, &protocol);
        member.member_id = new_id.clone();
        member.client_id = req.client_id.clone();
        member.client_host = req.client_host.clone();
        member.session_timeout_ms = req.session_timeout_ms;
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        let protocols = owned_protocols(req.protocols.clone());
        self.count_protocols(&member.protocols, false);
        self.count_protocols(&protocols, true);
        member.protocols = protocols;
        member.heartbeat_deadline = now + ms(req.session_timeout_ms);
        self.members.insert(new_id.clone(), member);
        if let Some(instance) = &req.group_instance_id {
            self.static_members.insert(instance.clone(), new_id.clone());
        }
        let was_leader = self.leader.as_deref() == Some(old_id);
        if was_leader {
            self.leader = Some(new_id.clone());
        }
        match self.state {
            GroupState::Stable if unchanged => {
                self.effects.record = Some(self.to_record());
                let mut result = self.join_result(&new_id, false);
                if was_leader && req.supports_skip_assignment {
                    result = self.join_result(&new_id, true);
                    result.skip_assignment = true;
                }
                Outcome::Done(result)
            }
            GroupState::PreparingRebalance => {
                let (tx, rx) = oneshot::channel();
                self.members[&new_id].join_waiter = Some(tx);
                self.maybe_complete_join(now, now_ms);
                Outcome::Wait(rx)
            }
            _ => {
                let (tx, rx) = oneshot::channel();
                self.members[&new_id].join_waiter = Some(tx);
                self.prepare_rebalance(now, now_ms);
                Outcome::Wait(rx)
            }
        }
    }

    fn update_member(&mut self, req: &JoinRequest, now: Instant) -> oneshot::Receiver<JoinResult> {
        let (tx, rx) = oneshot::channel();
        let protocols = owned_protocols(req.protocols.clone());
        let old = std::mem::take(&mut self.members[&req.member_id].protocols);
        self.count_protocols(&old, false);
        self.count_protocols(&protocols, true);
        let m = &mut self.members[&req.member_id];
        m.protocols = protocols;
        m.session_timeout_ms = req.session_timeout_ms;
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        m.heartbeat_deadline = now + ms(req.session_timeout_ms);
        // A second join from the same member replaces the first, which is answered.
        if let Some(old) = m.join_waiter.replace(tx) {
            let _ = old.send(JoinResult::error(
                ResponseError::UnknownMemberId,
                &req.member_id,
            ));
        }
        rx
    }

    /// Whether a member with these protocols can join: an empty group takes any; a
    /// non-empty one needs the same protocol type and a protocol every member supports.
    fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if protocol_type.is_empty() || protocols.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            return true;
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols.iter().any(|(name, _)| self.all_support(name))
    }

    fn check_instance(&self, member_id: &str, instance: Option<&str>) -> Result<(), ResponseError> {
        match instance {
            None => Ok(()),
            Some(i) => match self.static_members.get(i) {
                Some(id) if id == member_id => Ok(()),
                Some(_) => Err(ResponseError::FencedInstanceId),
                None => Err(ResponseError::UnknownMemberId),
            },
        }
    }

    /// Checks a request's member against the group: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID.
    fn check_member(&self, member_id: &str, instance: Option<&str>) -> Result<(), ResponseError> {
        if let Some(i) = instance {
            if let Some(id) = self.static_members.get(i) {
                if id != member_id {
                    return Err(ResponseError::FencedInstanceId);
                }
            }
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(ResponseError::UnknownMemberId)
        }
    }

    fn join_result(&self, member_id: &str, with_members: bool) -> JoinResult {
        let protocol = self.protocol.clone().unwrap_or_default();
        JoinResult {
            error: None,
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            skip_assignment: false,
            members: if with_members {
                self.members
                    .values()
                    .map(|m| {
                        (
                            m.member_id.clone(),
                            m.group_instance_id.clone(),
                            m.metadata(&protocol),
                        )
                    })
                    .collect()
            } else {
                Vec::new()
            },
        }
    }

    // ---- rebalance ----

    fn max_rebalance_timeout(&self) -> Duration {
        ms(self
            .members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0))
    }

    fn prepare_rebalance(&mut self, now: Instant, now_ms: i64) {
        if self.state == GroupState::CompletingRebalance {
            for m in self.members.values_mut() {
                m.assignment = Bytes::new();
                if let Some(tx) = m.sync_waiter.take() {
                    let _ = tx.send(SyncResult::error(ResponseError::RebalanceInProgress));
                }
            }
        }
        let timeout = self.max_rebalance_timeout();
        self.initial_delay_cap = None;
        self.rebalance_deadline = Some(now + timeout);
        if self.state == GroupState::Empty && self.initial_delay_ms > 0 {
            let delay = ms(self.initial_delay_ms).min(timeout);
            self.rebalance_deadline = Some(now + delay);
            self.initial_delay_cap = Some(now + timeout);
        }
        self.sync_deadline = None;
        self.transition(GroupState::PreparingRebalance, now_ms);
        self.maybe_complete_join(now, now_ms);
    }

    /// Each member joining during the initial delay buys the others another delay, up
    /// to the rebalance timeout.
    fn extend_initial_delay(&mut self, now: Instant) {
        if let Some(cap) = self.initial_delay_cap {
            self.rebalance_deadline = Some((now + ms(self.initial_delay_ms)).min(cap));
        }
    }

    fn maybe_complete_join(&mut self, now: Instant, now_ms: i64) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        let all_joined = self.pending_members.is_empty()
            && self.members.values().all(|m| m.join_waiter.is_some());
        let expired = self.rebalance_deadline.is_some_and(|d| now >= d);
        if (all_joined && self.initial_delay_cap.is_none()) || expired {
            self.complete_join(now, now_ms);
        }
    }

    fn complete_join(&mut self, now: Instant, now_ms: i64) {
        // Dynamic members that did not rejoin in time are out; static ones keep their
        // place until their session expires.
        let absent: Vec<String> = self
            .members
            .values()
            .filter(|m| m.join_waiter.is_none() && m.group_instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in absent {
            self.forget_member(&id);
        }
        self.rebalance_deadline = None;
        self.initial_delay_cap = None;
        self.generation_id += 1;
        if self.members.is_empty() {
            self.protocol = None;
            self.leader = None;
            self.transition(GroupState::Empty, now_ms);
            self.effects.record = Some(self.to_record());
            return;
        }
        self.protocol = self.vote();
        let leader_present = self
            .leader
            .as_ref()
            .and_then(|l| self.members.get(l))
            .is_some_and(|m| m.join_waiter.is_some());
        if !leader_present {
            self.leader = self
                .members
                .values()
                .find(|m| m.join_waiter.is_some())
                .or_else(|| self.members.values().next())
                .map(|m| m.member_id.clone());
        }
        self.transition(GroupState::CompletingRebalance, now_ms);
        self.sync_deadline = Some(now + self.max_rebalance_timeout());
        let leader = self.leader.clone().unwrap_or_default();
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let result = self.join_result(&id, id == leader);
            let m = &mut self.members[&id];
            m.heartbeat_deadline = now + ms(m.session_timeout_ms);
            if let Some(tx) = m.join_waiter.take() {
                let _ = tx.send(result);
            }
        }
    }

    /// The protocol every member supports that most members prefer.
    fn vote(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let mut candidates: Vec<&String> = Vec::new();
        let mut at: HashMap<&String, usize> = HashMap::new();
        for (n, _) in &first.protocols {
            if self.all_support(n) && !at.contains_key(n) {
                at.insert(n, candidates.len());
                candidates.push(n);
            }
        }
        let mut votes: Vec<(&String, usize)> = candidates.iter().map(|c| (*c, 0)).collect();
        for m in self.members.values() {
            if let Some(&i) = m.protocols.iter().find_map(|(n, _)| at.get(n)) {
                votes[i].1 += 1;
            }
        }
        // Ties go to the earliest candidate in the first member's preference order.
        let best = votes.iter().map(|(_, n)| *n).max()?;
        votes
            .into_iter()
            .find(|(_, n)| *n == best)
            .map(|(c, _)| c.clone())
    }

    /// Drops a member from every table, answering anything it waits for.
    fn forget_member(&mut self, member_id: &str) {
        if let Some(m) = self.members.shift_remove(member_id) {
            self.count_protocols(&m.protocols, false);
            if let Some(i) = &m.group_instance_id {
                if self.static_members.get(i).map(String::as_str) == Some(member_id) {
                    self.static_members.remove(i);
                }
            }
            if let Some(tx) = m.join_waiter {
                let _ = tx.send(JoinResult::error(ResponseError::UnknownMemberId, member_id));
            }
            if let Some(tx) = m.sync_waiter {
                let _ = tx.send(SyncResult::error(ResponseError::UnknownMemberId));
            }
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = None;
        }
    }

    fn remove_member(&mut self, member_id: &str, now: Instant, now_ms: i64) {
        self.forget_member(member_id);
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(now, now_ms)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(now, now_ms),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    // ---- SyncGroup, Heartbeat, LeaveGroup ----

    #[expect(
        clippy::too_many_arguments,
        reason = "the fields of a SyncGroup request and the two clocks"
    )]
    pub fn sync(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation_id: i32,
        protocol: (Option<&str>, Option<&str>),
        assignments: Vec<(String, Bytes)>,
        now: Instant,
        now_ms: i64,
    ) -> Outcome<SyncResult> {
        let fail = |e| Outcome::Done(SyncResult::error(e));
        if self.state == GroupState::Dead {
            return fail(ResponseError::CoordinatorNotAvailable);
        }
        if let Err(e) = self.check_member(member_id, instance) {
            return fail(e);
        }
        if generation_id != self.generation_id {
            return fail(ResponseError::IllegalGeneration);
        }
        let (ptype, pname) = protocol;
        if ptype.is_some_and(|t| Some(t) != self.protocol_type.as_deref())
            || pname.is_some_and(|n| Some(n) != self.protocol.as_deref())
        {
            return fail(ResponseError::InconsistentGroupProtocol);
        }
        match self.state {
            GroupState::Empty | GroupState::Dead => fail(ResponseError::UnknownMemberId),
            GroupState::PreparingRebalance => fail(ResponseError::RebalanceInProgress),
            GroupState::Stable => Outcome::Done(self.sync_result(member_id)),
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                let m = &mut self.members[member_id];
                m.heartbeat_deadline = now + ms(m.session_timeout_ms);
                if let Some(old) = m.sync_waiter.replace(tx) {
                    let _ = old.send(SyncResult::error(ResponseError::UnknownMemberId));
                }
                if self.leader.as_deref() == Some(member_id) {
                    self.complete_sync(assignments, now_ms);
                }
                Outcome::Wait(rx)
            }
        }
    }

    /// The leader's assignment arrived: the generation is Stable. The answers wait in
    /// `effects` until the group metadata is written.
    fn complete_sync(&mut self, assignments: Vec<(String, Bytes)>, now_ms: i64) {
        let mut assignments: HashMap<String, Bytes> = assignments.into_iter().collect();
        for m in self.members.values_mut() {
            // A copy: the leader's SyncGroup frame holds every member's assignment.
            m.assignment = assignments
                .remove(&m.member_id)
                .map(|a| Bytes::copy_from_slice(&a))
                .unwrap_or_default();
        }
        self.sync_deadline = None;
        self.transition(GroupState::Stable, now_ms);
        self.effects.record = Some(self.to_record());
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for id in ids {
            let result = self.sync_result(&id);
            if let Some(tx) = self.members[&id].sync_waiter.take() {
                self.effects.sync_answers.push((tx, result));
            }
        }
    }

    fn sync_result(&self, member_id: &str) -> SyncResult {
        SyncResult {
            error: None,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol.clone(),
            assignment: self.members[member_id].assignment.clone(),
        }
    }

    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        generation_id: i32,
        now: Instant,
    ) -> Option<ResponseError> {
        match self.state {
            GroupState::Dead => return Some(ResponseError::CoordinatorNotAvailable),
            GroupState::Empty => return Some(ResponseError::UnknownMemberId),
            _ => {}
        }
        if let Err(e) = self.check_member(member_id, instance) {
            return Some(e);
        }
        if generation_id != self.generation_id {
            return Some(ResponseError::IllegalGeneration);
        }
        let m = &mut self.members[member_id];
        m.heartbeat_deadline = now + ms(m.session_timeout_ms);
        (self.state == GroupState::PreparingRebalance).then_some(ResponseError::RebalanceInProgress)
    }

    /// One member of a LeaveGroup request; from v3 a static member may be named by its
    /// instance id alone.
    pub fn leave(
        &mut self,
        member_id: &str,
        instance: Option<&str>,
        now: Instant,
        now_ms: i64,
    ) -> Option<ResponseError> {
        if self.state == GroupState::Dead {
            return Some(ResponseError::CoordinatorNotAvailable);
        }
        let id = match (member_id, instance) {
            ("", Some(i)) => match self.static_members.get(i) {
                Some(id) => id.clone(),
                None => return Some(ResponseError::UnknownMemberId),
            },
            (id, _) => {
                if self.pending_members.remove(id).is_some() {
                    return None;
                }
                if let Err(e) = self.check_member(id, instance) {
                    return Some(e);
                }
                id.to_string()
            }
        };
        self.remove_member(&id, now, now_ms);
        None
    }

    // ---- timers ----

    /// When `tick` next has something to do: a session, a pending member id, the
    /// rebalance or the sync timeout running out. Members waiting for an answer have no
    /// session timer until they get it, as `tick` skips them.
    pub fn next_deadline(&self) -> Option<Instant> {
        let sessions = self
            .members
            .values()
            .filter(|m| !m.awaiting())
            .map(|m| m.heartbeat_deadline);
        let pending = self.pending_members.values().copied();
        let rebalance = match self.state {
            GroupState::PreparingRebalance => self.rebalance_deadline,
            GroupState::CompletingRebalance => self.sync_deadline,
            _ => None,
        };
        sessions.chain(pending).chain(rebalance).min()
    }

    /// The partition is no longer served here: whoever waits is told to find the
    /// coordinator again.
    pub fn answer_waiters(&mut self, e: ResponseError) {
        for m in self.members.values_mut() {
            if let Some(tx) = m.join_waiter.take() {
                let _ = tx.send(JoinResult::error(e, &m.member_id));
            }
            if let Some(tx) = m.sync_waiter.take() {
                let _ = tx.send(SyncResult::error(e));
            }
        }
    }

    /// Expires sessions, pending member ids, rebalance and sync timeouts due by `now`.
    /// KIP-848 members expire through the coordinator, which writes their removal.
    pub fn tick(&mut self, now: Instant, now_ms: i64) {
        self.pending_members.retain(|_, deadline| *deadline > now);
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.awaiting() && m.heartbeat_deadline <= now)
            .map(|m| m.member_id.clone())
            .collect();
        for id in expired {
            tracing::info!(group = %self.group_id, member = %id, "member's session expired");
            self.remove_member(&id, now, now_ms);
        }
        if self.state == GroupState::PreparingRebalance {
            self.maybe_complete_join(now, now_ms);
        }
        if self.state == GroupState::CompletingRebalance
            && self.sync_deadline.is_some_and(|d| now >= d)
        {
            let absent: Vec<String> = self
                .members
                .values()
                .filter(|m| m.sync_waiter.is_none())
                .map(|m| m.member_id.clone())
                .collect();
            for id in absent {
                tracing::info!(group = %self.group_id, member = %id, "member did not sync in time");
                self.forget_member(&id);
            }
            self.prepare_rebalance(now, now_ms);
        }
    }
}

/// `protocols` with each metadata copied out of the JoinGroup frame it is a slice of:
/// a member lives for as long as the group does, and a slice kept the whole frame alive
/// (8 joins with a 64 MiB unknown tagged field held 513 MB).
fn owned_protocols(protocols: Vec<(String, Bytes)>) -> Vec<(String, Bytes)> {
    protocols
        .into_iter()
        .map(|(name, metadata)| (name, Bytes::copy_from_slice(&metadata)))
        .collect()
}

fn metadata_in(protocols: &[(String, Bytes)], name: &str) -> Bytes {
    protocols
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, m)| m.clone())
        .unwrap_or_default()
}

fn ms(v: i32) -> Duration {
    Duration::from_millis(v.max(0) as u64)
}
