//! KIP-848 consumer groups (`group.protocol=consumer`): the broker assigns partitions
//! and members converge by heartbeats.
//!
//! Every change the assignment depends on (a member joins or leaves, a subscription or
//! a subscribed topic's partition count changes) bumps the group epoch; the uniform
//! assignor then computes a target assignment for that epoch. Each member reconciles
//! towards its target one heartbeat at a time, revoke before assign: partitions it
//! must give up are taken away first (its epoch stays until it confirms, by listing
//! what it owns), and a partition is only handed to a member once no other member
//! still holds it. Only then does the member's epoch reach the assignment epoch.
//!
//! The group is its KIP-848 records in `__consumer_offsets`, as in Kafka:
//! - `heartbeat.rs`: a heartbeat, a leave or an expiry reads the group and returns the
//!   records of what changes (member, regex, subscribed partition counts, group epoch,
//!   target assignment and its epoch, current assignment), in Kafka's order;
//! - `replay.rs`: the group changes only when those records are replayed, after they
//!   are written, and a load replays the same records;
//! - `assignor.rs` (the uniform assignor), `reconcile.rs` (one member's next step),
//!   `regex.rs` (compiled subscriptions), `records.rs` (values and tombstones),
//!   `offsets.rs` (the member epoch checks of OffsetCommit and OffsetFetch).
//!
//! What is not stored (session deadlines, whether a member must be sent its assignment
//! again) is kept by the shard beside the group and starts afresh at load, as Kafka's
//! coordinator does after a failover.

mod assignor;
pub mod heartbeat;
mod offsets;
mod reconcile;
mod records;
mod regex;
mod replay;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};

pub use heartbeat::{expire, heartbeat, leave, Beat};
pub use records::{tombstones, ConsumerRecords};
pub use regex::RegexCache;

pub use super::topics::TopicImage;

/// Topic name → partitions.
pub type Assignment = BTreeMap<String, BTreeSet<i32>>;

/// A group's subscribed regular expressions → the topic names each matched.
pub type ResolvedRegexes = BTreeMap<String, Vec<String>>;

pub const ASSIGNOR: &str = "uniform";
/// The member epoch of a heartbeat that leaves the group.
pub const LEAVE_EPOCH: i32 = -1;
/// The member epoch of a static member leaving for now: it keeps its place (and its
/// partitions) until its session expires, so its next instance can take over.
pub const STATIC_LEAVE_EPOCH: i32 = -2;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed: Vec<String>,
    pub subscribed_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub member_epoch: i32,
    pub previous_epoch: i32,
    /// What the member may own now.
    pub assigned: Assignment,
    /// What it must give up before getting anything new.
    pub pending_revocation: Assignment,
    /// The member epoch at which each partition it holds (assigned or revoking) was
    /// assigned to it: Kafka 4.4's AssignmentEpochs of record 8 (KIP-1251), kept so the
    /// record skua writes is the one a Kafka coordinator loads without complaint.
    pub assignment_epochs: BTreeMap<(String, i32), i32>,
}

impl ConsumerMember {
    /// Keeps `assignment_epochs` to the partitions the member holds: one new to it was
    /// assigned at its current epoch (Kafka's target assignment epoch), one it no longer
    /// holds is forgotten.
    pub fn sync_assignment_epochs(&mut self) {
        let held: BTreeSet<(String, i32)> = flatten(&self.assigned)
            .chain(flatten(&self.pending_revocation))
            .map(|(t, p)| (t.to_string(), p))
            .collect();
        self.assignment_epochs.retain(|k, _| held.contains(k));
        for k in held {
            self.assignment_epochs.entry(k).or_insert(self.member_epoch);
        }
    }

    /// The epoch at which the member got `topic`-`partition` (its current epoch when
    /// unknown, as Kafka falls back to).
    pub fn assignment_epoch_of(&self, topic: &str, partition: i32) -> i32 {
        self.assignment_epochs
            .get(&(topic.to_string(), partition))
            .copied()
            .unwrap_or(self.member_epoch)
    }
}

/// One ConsumerGroupHeartbeat, as the coordinator needs it.
#[derive(Clone, Debug)]
pub struct Heartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// -1 when the request does not carry it.
    pub rebalance_timeout_ms: i32,
    pub subscribed: Option<Vec<String>>,
    /// None: unchanged; an empty string clears it.
    pub subscribed_regex: Option<String>,
    /// The partitions the member owns, by topic id (None: not sent).
    pub owned: Option<Vec<(uuid::Uuid, Vec<i32>)>>,
}

impl Default for Heartbeat {
    fn default() -> Self {
        Heartbeat {
            member_id: String::new(),
            member_epoch: 0,
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: -1,
            subscribed: None,
            subscribed_regex: None,
            owned: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatResult {
    pub member_id: String,
    pub member_epoch: i32,
    /// The member's assignment by topic id, when it is sent (it changed, the member
    /// joined or sent a full request, or must be told again).
    pub assignment: Option<Vec<(uuid::Uuid, Vec<i32>)>>,
}

/// A KIP-848 group, as its records describe it.
#[derive(Clone, Debug, Default)]
pub struct ConsumerGroup {
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ConsumerMember>,
    pub target: BTreeMap<String, Assignment>,
    /// Partition counts of the subscribed topics the target was computed from.
    pub metadata: BTreeMap<String, i32>,
    /// Regular expression → the topics it resolved to, shared by its subscribers.
    pub regexes: ResolvedRegexes,
    /// Derived on replay: which member holds a partition (assigned or revoking).
    owners: HashMap<(String, i32), String>,
    /// Derived on replay: static members by instance id.
    static_members: HashMap<String, String>,
}

impl ConsumerGroup {
    /// Kafka's consumer group states.
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.group_epoch > self.assignment_epoch {
            "Assigning"
        } else if self.members.values().any(|m| {
            m.member_epoch != self.assignment_epoch
                || !m.pending_revocation.is_empty()
                || Some(&m.assigned) != self.target.get(&m.member_id)
        }) {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// The topics a member consumes: those it names and those its regex resolved to.
    pub fn member_topics<'a>(&'a self, m: &'a ConsumerMember) -> impl Iterator<Item = &'a str> {
        member_topics(m, &self.regexes)
    }

    /// Every topic the group's members consume.
    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| self.member_topics(m))
            .map(str::to_string)
            .collect()
    }

    /// The static member holding `instance_id`.
    pub fn static_member(&self, instance_id: &str) -> Option<&ConsumerMember> {
        let id = self.static_members.get(instance_id)?;
        self.members.get(id)
    }

    /// The member holding a partition (assigned or still revoking it).
    pub fn holder(&self, topic: &str, partition: i32) -> Option<&str> {
        self.owners
            .get(&(topic.to_string(), partition))
            .map(String::as_str)
    }

    /// Members subscribed with `regex`.
    pub fn regex_subscribers(&self, regex: &str) -> usize {
        self.members
            .values()
            .filter(|m| m.subscribed_regex.as_deref() == Some(regex))
            .count()
    }
}

#[cfg(test)]
impl ConsumerGroup {
    /// Everything the records and their replay decide, indexes included, in a stable
    /// order: two groups with the same fingerprint are the same group.
    pub fn fingerprint(&self) -> String {
        let mut owners: Vec<_> = self.owners.iter().collect();
        owners.sort();
        let mut statics: Vec<_> = self.static_members.iter().collect();
        statics.sort();
        format!(
            "epochs {}/{} members {:?} target {:?} metadata {:?} regexes {:?} owners {:?} static {:?}",
            self.group_epoch,
            self.assignment_epoch,
            self.members,
            self.target,
            self.metadata,
            self.regexes,
            owners,
            statics
        )
    }
}

/// A member's topics given the group's resolved regexes.
fn member_topics<'a>(
    m: &'a ConsumerMember,
    regexes: &'a ResolvedRegexes,
) -> impl Iterator<Item = &'a str> {
    let resolved = m
        .subscribed_regex
        .as_ref()
        .and_then(|r| regexes.get(r))
        .into_iter()
        .flatten();
    m.subscribed.iter().chain(resolved).map(String::as_str)
}

fn flatten(a: &Assignment) -> impl Iterator<Item = (&str, i32)> + '_ {
    a.iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t.as_str(), *p)))
}

fn contains(a: &Assignment, topic: &str, partition: i32) -> bool {
    a.get(topic).is_some_and(|s| s.contains(&partition))
}

fn difference(a: &Assignment, b: &Assignment) -> Assignment {
    let mut out = Assignment::new();
    for (t, p) in flatten(a) {
        if !contains(b, t, p) {
            out.entry(t.to_string()).or_default().insert(p);
        }
    }
    out
}

fn intersection(a: &Assignment, b: &Assignment) -> Assignment {
    let mut out = Assignment::new();
    for (t, p) in flatten(a) {
        if contains(b, t, p) {
            out.entry(t.to_string()).or_default().insert(p);
        }
    }
    out
}

fn is_subset(a: &Assignment, b: &Assignment) -> bool {
    flatten(a).all(|(t, p)| contains(b, t, p))
}
