//! KIP-848 consumer groups (`group.protocol=consumer`): the broker assigns partitions
//! and members converge by heartbeats, free of I/O like `state.rs`.
//!
//! Every change the assignment depends on (a member joins or leaves, a subscription or
//! a subscribed topic's partition count changes) bumps the group epoch; the uniform
//! assignor then computes a target assignment for that epoch. Each member reconciles
//! towards its target one heartbeat at a time, revoke before assign: partitions it
//! must give up are taken away first (its epoch stays until it confirms, by listing
//! what it owns), and a partition is only handed to a member once no other member
//! still holds it. Only then does the member's epoch reach the assignment epoch.
//!
//! The group is persisted in `__consumer_offsets` with Kafka's KIP-848 records
//! (`records.rs`), so after a restart its members carry on at their epochs.

mod offsets;
mod records;

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use tokio::time::{Duration, Instant};
use uuid::Uuid;

pub use records::{changes, tombstones, ConsumerRecords};

/// Topic name → partitions.
pub type Assignment = BTreeMap<String, BTreeSet<i32>>;

/// The cluster's topics as the assignor sees them.
pub trait TopicView {
    /// The partition count of a topic, None when it does not exist.
    fn partitions(&self, topic: &str) -> Option<i32>;
    /// Every topic a regular expression subscription may match.
    fn names(&self) -> Vec<String>;
    /// A topic's id, as the records of `__consumer_offsets` store assignments.
    fn topic_id(&self, topic: &str) -> Option<Uuid>;
    /// The name of the topic with this id, None when it no longer exists.
    fn topic_name(&self, id: Uuid) -> Option<String>;
}

pub const ASSIGNOR: &str = "uniform";
const LEAVE_EPOCH: i32 = -1;
const STATIC_LEAVE_EPOCH: i32 = -2;

#[derive(Clone, Debug, Default)]
pub struct ConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub member_epoch: i32,
    pub previous_epoch: i32,
    pub subscribed: Vec<String>,
    pub subscribed_regex: Option<String>,
    /// Topics the regex matched at the member's last heartbeat.
    regex_matches: Vec<String>,
    pub rebalance_timeout_ms: i32,
    /// What the member may own now.
    pub assigned: Assignment,
    /// What it must give up before getting anything new.
    pub pending_revocation: Assignment,
    session_deadline: Option<Instant>,
    revocation_deadline: Option<Instant>,
    last_sent: Option<Assignment>,
}

/// One ConsumerGroupHeartbeat, with owned partitions already resolved to topic names.
#[derive(Clone, Debug, Default)]
pub struct Heartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub subscribed: Option<Vec<String>>,
    /// None: unchanged; an empty string clears it.
    pub subscribed_regex: Option<String>,
    pub owned: Option<Assignment>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct HeartbeatResult {
    pub member_id: String,
    pub member_epoch: i32,
    /// Present when the member's assignment changed since it was last told.
    pub assignment: Option<Assignment>,
}

#[derive(Clone, Debug, Default)]
pub struct ConsumerGroup {
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ConsumerMember>,
    pub target: BTreeMap<String, Assignment>,
    /// Partition counts of the subscribed topics the target was computed from.
    metadata: BTreeMap<String, i32>,
    pub session_timeout_ms: i32,
    /// Only while replaying `__consumer_offsets`: regex → the topics it last matched,
    /// handed to the members subscribing with it when the replay ends.
    replayed_regexes: BTreeMap<String, Vec<String>>,
}

impl ConsumerMember {
    /// The topics this member consumes: named ones and those its regex matched.
    pub fn topics(&self) -> BTreeSet<String> {
        self.subscribed
            .iter()
            .chain(self.regex_matches.iter())
            .cloned()
            .collect()
    }

    /// Re-resolves the regex subscription; whether the matched set changed.
    fn resolve_regex(&mut self, topics: &dyn TopicView) -> Result<bool, ResponseError> {
        let matches = match self.subscribed_regex.as_deref() {
            None | Some("") => Vec::new(),
            Some(pattern) => {
                // Kafka matches the whole name (RE2J `matches`).
                let re = regex_automata::meta::Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|_| ResponseError::InvalidRegularExpression)?;
                let mut names: Vec<String> = topics
                    .names()
                    .into_iter()
                    .filter(|t| re.is_match(t))
                    .collect();
                names.sort();
                names
            }
        };
        let changed = matches != self.regex_matches;
        self.regex_matches = matches;
        Ok(changed)
    }
}

impl ConsumerGroup {
    pub fn new(session_timeout_ms: i32) -> ConsumerGroup {
        ConsumerGroup {
            session_timeout_ms,
            ..Default::default()
        }
    }

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

    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members.values().flat_map(|m| m.topics()).collect()
    }

    /// Handles one heartbeat. `partitions` gives the partition count of a topic, or
    /// None when it does not exist.
    pub fn heartbeat(
        &mut self,
        hb: Heartbeat,
        topics: &dyn TopicView,
        now: Instant,
    ) -> Result<HeartbeatResult, ResponseError> {
        if hb.member_epoch == LEAVE_EPOCH || hb.member_epoch == STATIC_LEAVE_EPOCH {
            if self.members.remove(&hb.member_id).is_some() {
                self.target.remove(&hb.member_id);
                self.group_epoch += 1;
            }
            return Ok(HeartbeatResult {
                member_id: hb.member_id,
                member_epoch: hb.member_epoch,
                assignment: None,
            });
        }
        let session = Duration::from_millis(self.session_timeout_ms.max(0) as u64);
        // One heartbeat bumps the group epoch at most once, whatever changed.
        let mut changed = false;
        if hb.member_epoch == 0 {
            if hb.subscribed.is_none() && hb.subscribed_regex.is_none() {
                return Err(ResponseError::InvalidRequest);
            }
            let subscribed = hb.subscribed.clone().unwrap_or_default();
            // A member (re)joining starts afresh; whatever it had is reassigned.
            self.members.insert(
                hb.member_id.clone(),
                ConsumerMember {
                    member_id: hb.member_id.clone(),
                    instance_id: hb.instance_id.clone(),
                    rack_id: hb.rack_id.clone(),
                    client_id: hb.client_id.clone(),
                    client_host: hb.client_host.clone(),
                    subscribed,
                    subscribed_regex: hb.subscribed_regex.clone().filter(|r| !r.is_empty()),
                    rebalance_timeout_ms: hb.rebalance_timeout_ms,
                    ..Default::default()
                },
            );
            changed = true;
        } else {
            let Some(m) = self.members.get_mut(&hb.member_id) else {
                return Err(ResponseError::UnknownMemberId);
            };
            if hb.member_epoch != m.member_epoch {
                // A lost response: the member is one epoch behind but owns nothing new.
                let lost_response = hb.member_epoch == m.previous_epoch
                    && hb.owned.as_ref().is_some_and(|o| is_subset(o, &m.assigned));
                if !lost_response {
                    return Err(ResponseError::FencedMemberEpoch);
                }
                m.last_sent = None;
            }
            if let Some(s) = &hb.subscribed {
                if *s != m.subscribed {
                    m.subscribed = s.clone();
                    changed = true;
                }
            }
            if let Some(r) = &hb.subscribed_regex {
                let r = Some(r.clone()).filter(|r| !r.is_empty());
                if r != m.subscribed_regex {
                    m.subscribed_regex = r;
                    changed = true;
                }
            }
            if hb.rebalance_timeout_ms > 0 {
                m.rebalance_timeout_ms = hb.rebalance_timeout_ms;
            }
        }
        if let Some(m) = self.members.get_mut(&hb.member_id) {
            m.session_deadline = Some(now + session);
            match m.resolve_regex(topics) {
                Ok(c) => changed |= c,
                Err(e) => {
                    if hb.member_epoch == 0 {
                        self.members.remove(&hb.member_id);
                    }
                    return Err(e);
                }
            }
        }
        changed |= self.refresh_metadata(topics);
        if changed {
            self.group_epoch += 1;
        }
        if self.group_epoch > self.assignment_epoch {
            self.target = assign(&self.members, &self.metadata);
            self.assignment_epoch = self.group_epoch;
        }
        self.reconcile(&hb.member_id, hb.owned.as_ref(), now);
        let Some(m) = self.members.get_mut(&hb.member_id) else {
            return Err(ResponseError::UnknownMemberId);
        };
        let news = m.last_sent.as_ref() != Some(&m.assigned);
        if news {
            m.last_sent = Some(m.assigned.clone());
        }
        Ok(HeartbeatResult {
            member_id: m.member_id.clone(),
            member_epoch: m.member_epoch,
            assignment: news.then(|| m.assigned.clone()),
        })
    }

    /// Whether a subscribed topic appeared, vanished or grew.
    fn refresh_metadata(&mut self, topics: &dyn TopicView) -> bool {
        let metadata: BTreeMap<String, i32> = self
            .subscribed_topics()
            .into_iter()
            .filter_map(|t| topics.partitions(&t).map(|n| (t, n)))
            .collect();
        if metadata == self.metadata {
            return false;
        }
        self.metadata = metadata;
        true
    }

    /// Moves one member a step towards its target: revoke first, then assign what no
    /// other member still holds.
    fn reconcile(&mut self, member_id: &str, owned: Option<&Assignment>, now: Instant) {
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let held_by_others: BTreeSet<(String, i32)> = self
            .members
            .values()
            .filter(|o| o.member_id != member_id)
            .flat_map(|o| flatten(&o.assigned).chain(flatten(&o.pending_revocation)))
            .collect();
        let assignment_epoch = self.assignment_epoch;
        let Some(m) = self.members.get_mut(member_id) else {
            return;
        };
        if !m.pending_revocation.is_empty() {
            let revoked = owned.is_some_and(|o| {
                flatten(o)
                    .all(|(t, p)| !m.pending_revocation.get(&t).is_some_and(|s| s.contains(&p)))
            });
            if !revoked {
                return;
            }
            m.pending_revocation.clear();
            m.revocation_deadline = None;
        }
        let to_revoke = difference(&m.assigned, &target);
        if !to_revoke.is_empty() {
            m.assigned = intersection(&m.assigned, &target);
            m.pending_revocation = to_revoke;
            let timeout = Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64);
            m.revocation_deadline = Some(now + timeout);
            return;
        }
        for (topic, partition) in flatten(&target) {
            if !held_by_others.contains(&(topic.clone(), partition)) {
                m.assigned.entry(topic).or_default().insert(partition);
            }
        }
        if m.member_epoch != assignment_epoch {
            m.previous_epoch = m.member_epoch;
            m.member_epoch = assignment_epoch;
        }
    }

    /// Members whose session expired or who did not revoke in time.
    pub fn expired_members(&self, now: Instant) -> Vec<String> {
        self.members
            .values()
            .filter(|m| {
                m.session_deadline.is_some_and(|d| now >= d)
                    || m.revocation_deadline.is_some_and(|d| now >= d)
            })
            .map(|m| m.member_id.clone())
            .collect()
    }

    /// Removes members whose session expired or who did not revoke in time.
    pub fn tick(&mut self, now: Instant) {
        for id in self.expired_members(now) {
            tracing::info!(member = %id, "consumer group member expired");
            self.members.remove(&id);
            self.target.remove(&id);
            self.group_epoch += 1;
        }
    }
}

/// The uniform assignor: every partition of a subscribed topic goes to one member
/// subscribed to it, keeping current owners where that stays balanced, then evening
/// out counts so no two eligible members differ by more than one partition.
pub fn assign(
    members: &BTreeMap<String, ConsumerMember>,
    metadata: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .keys()
        .map(|id| (id.clone(), Assignment::new()))
        .collect();
    if members.is_empty() {
        return out;
    }
    let eligible = |topic: &str| -> Vec<&String> {
        members
            .values()
            .filter(|m| m.topics().contains(topic))
            .map(|m| &m.member_id)
            .collect()
    };
    let total: usize = metadata.values().map(|n| n.max(&0)).sum::<i32>() as usize;
    let quota = total.div_ceil(members.len()).max(1);
    let mut count: BTreeMap<String, usize> = members.keys().map(|id| (id.clone(), 0)).collect();
    let mut owner: BTreeMap<(String, i32), String> = BTreeMap::new();
    // Sticky pass: current owners keep up to the quota.
    for m in members.values() {
        for (t, p) in flatten(&m.assigned) {
            let valid = metadata.get(&t).is_some_and(|n| p < *n) && m.topics().contains(&t);
            if valid && count[&m.member_id] < quota && !owner.contains_key(&(t.clone(), p)) {
                owner.insert((t, p), m.member_id.clone());
                *count.get_mut(&m.member_id).unwrap_or(&mut 0) += 1;
            }
        }
    }
    // The rest, each to the least loaded eligible member.
    for (topic, n) in metadata {
        let candidates = eligible(topic);
        for p in 0..*n {
            if owner.contains_key(&(topic.clone(), p)) {
                continue;
            }
            if let Some(best) = candidates.iter().min_by_key(|id| (count[**id], **id)) {
                owner.insert((topic.clone(), p), (*best).clone());
                *count.get_mut(*best).unwrap_or(&mut 0) += 1;
            }
        }
    }
    // Even out: move partitions from the most to the least loaded eligible member.
    let moves_max = total;
    for _ in 0..moves_max {
        let mut moved = false;
        let keys: Vec<(String, i32)> = owner.keys().cloned().collect();
        for key in keys {
            let from = owner[&key].clone();
            let candidates = eligible(&key.0);
            if let Some(to) = candidates.iter().min_by_key(|id| (count[**id], **id)) {
                if count[&from] > count[*to] + 1 {
                    *count.get_mut(&from).unwrap_or(&mut 0) -= 1;
                    *count.get_mut(*to).unwrap_or(&mut 0) += 1;
                    owner.insert(key, (*to).clone());
                    moved = true;
                }
            }
        }
        if !moved {
            break;
        }
    }
    for ((t, p), id) in owner {
        if let Some(a) = out.get_mut(&id) {
            a.entry(t).or_default().insert(p);
        }
    }
    out
}

fn flatten(a: &Assignment) -> impl Iterator<Item = (String, i32)> + '_ {
    a.iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
}

fn is_subset(a: &Assignment, b: &Assignment) -> bool {
    flatten(a).all(|(t, p)| b.get(&t).is_some_and(|s| s.contains(&p)))
}

fn difference(a: &Assignment, b: &Assignment) -> Assignment {
    let mut out = Assignment::new();
    for (t, p) in flatten(a) {
        if !b.get(&t).is_some_and(|s| s.contains(&p)) {
            out.entry(t).or_default().insert(p);
        }
    }
    out
}

fn intersection(a: &Assignment, b: &Assignment) -> Assignment {
    let mut out = Assignment::new();
    for (t, p) in flatten(a) {
        if b.get(&t).is_some_and(|s| s.contains(&p)) {
            out.entry(t).or_default().insert(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Topics "t" and "u" of four partitions each.
    struct Topics;

    impl TopicView for Topics {
        fn partitions(&self, topic: &str) -> Option<i32> {
            ["t", "u"].contains(&topic).then_some(4)
        }

        fn names(&self) -> Vec<String> {
            vec!["t".into(), "u".into()]
        }

        fn topic_id(&self, topic: &str) -> Option<Uuid> {
            match topic {
                "t" => Some(Uuid::from_u128(1)),
                "u" => Some(Uuid::from_u128(2)),
                _ => None,
            }
        }

        fn topic_name(&self, id: Uuid) -> Option<String> {
            self.names()
                .into_iter()
                .find(|t| self.topic_id(t) == Some(id))
        }
    }

    const PARTS: Topics = Topics;

    fn join(id: &str) -> Heartbeat {
        Heartbeat {
            member_id: id.into(),
            member_epoch: 0,
            subscribed: Some(vec!["t".into()]),
            rebalance_timeout_ms: 30_000,
            ..Default::default()
        }
    }

    /// A steady-state heartbeat: member `id` at `epoch`, owning `owned`.
    pub(super) fn beat(id: &str, epoch: i32, owned: &Assignment) -> Heartbeat {
        Heartbeat {
            member_id: id.into(),
            member_epoch: epoch,
            owned: Some(owned.clone()),
            ..Default::default()
        }
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(|s| s.len()).sum()
    }

    #[test]
    fn first_member_gets_everything_then_revokes_before_the_second_gets_half() {
        let now = Instant::now();
        let mut g = ConsumerGroup::new(45_000);
        let r = g.heartbeat(join("a"), &PARTS, now).unwrap();
        assert_eq!(r.member_epoch, 1);
        let a_owned = r.assignment.unwrap();
        assert_eq!(count(&a_owned), 4);
        assert_eq!(g.state_name(), "Stable");

        // b joins: epoch 2. b gets nothing yet, a still holds everything.
        let r = g.heartbeat(join("b"), &PARTS, now).unwrap();
        assert_eq!(r.member_epoch, 2);
        assert_eq!(r.assignment.map(|a| count(&a)), Some(0));
        assert_eq!(g.state_name(), "Reconciling");

        // a is told to give up two partitions; its epoch stays until it confirms.
        let r = g.heartbeat(beat("a", 1, &a_owned), &PARTS, now).unwrap();
        assert_eq!(r.member_epoch, 1);
        let a_kept = r.assignment.unwrap();
        assert_eq!(count(&a_kept), 2);
        // Still listing the revoked partitions: nothing moves.
        let r = g.heartbeat(beat("a", 1, &a_owned), &PARTS, now).unwrap();
        assert_eq!((r.member_epoch, r.assignment), (1, None));
        let r = g.heartbeat(beat("a", 1, &a_kept), &PARTS, now).unwrap();
        assert_eq!(r.member_epoch, 2);

        // Now b gets the released partitions.
        let r = g
            .heartbeat(beat("b", 2, &Assignment::new()), &PARTS, now)
            .unwrap();
        let b_owned = r.assignment.unwrap();
        assert_eq!(count(&b_owned), 2);
        assert!(intersection(&a_kept, &b_owned).is_empty());
        assert_eq!(g.state_name(), "Stable");
    }

    #[test]
    fn leaving_and_expiring_members_hand_their_partitions_back() {
        let now = Instant::now();
        let mut g = ConsumerGroup::new(1000);
        g.heartbeat(join("a"), &PARTS, now).unwrap();
        g.heartbeat(join("b"), &PARTS, now).unwrap();
        let left = g
            .heartbeat(beat("b", -1, &Assignment::new()), &PARTS, now)
            .unwrap();
        assert_eq!(left.member_epoch, -1);
        assert_eq!(g.members.len(), 1);
        g.tick(now + Duration::from_millis(1000));
        assert!(g.members.is_empty());
        assert_eq!(g.state_name(), "Empty");
    }

    #[test]
    fn wrong_epochs_are_fenced_and_unknown_members_refused() {
        let now = Instant::now();
        let mut g = ConsumerGroup::new(45_000);
        let r = g.heartbeat(join("a"), &PARTS, now).unwrap();
        let owned = r.assignment.unwrap();
        assert_eq!(
            g.heartbeat(beat("a", 7, &owned), &PARTS, now),
            Err(ResponseError::FencedMemberEpoch)
        );
        assert_eq!(
            g.heartbeat(beat("x", 1, &owned), &PARTS, now),
            Err(ResponseError::UnknownMemberId)
        );
    }

    #[test]
    fn a_regex_subscription_resolves_against_the_topics() {
        let now = Instant::now();
        let mut g = ConsumerGroup::new(45_000);
        let mut hb = join("a");
        hb.subscribed = None;
        hb.subscribed_regex = Some("t|u".into());
        let r = g.heartbeat(hb.clone(), &PARTS, now).unwrap();
        assert_eq!(count(&r.assignment.unwrap()), 8);
        hb.member_id = "b".into();
        hb.subscribed_regex = Some("(".into());
        assert_eq!(
            g.heartbeat(hb, &PARTS, now),
            Err(ResponseError::InvalidRegularExpression)
        );
        assert!(!g.members.contains_key("b"));
    }

    #[test]
    fn the_uniform_assignor_balances_and_sticks() {
        let mut members = BTreeMap::new();
        for id in ["a", "b", "c"] {
            members.insert(
                id.to_string(),
                ConsumerMember {
                    member_id: id.into(),
                    subscribed: vec!["t".into(), "u".into()],
                    ..Default::default()
                },
            );
        }
        let metadata = BTreeMap::from([("t".to_string(), 4), ("u".to_string(), 3)]);
        let first = assign(&members, &metadata);
        let counts: Vec<usize> = first.values().map(count).collect();
        assert_eq!(counts.iter().sum::<usize>(), 7);
        assert!(counts.iter().all(|c| (2..=3).contains(c)), "{counts:?}");
        for (id, a) in &first {
            members.get_mut(id).unwrap().assigned = a.clone();
        }
        assert_eq!(
            assign(&members, &metadata),
            first,
            "stable input, same output"
        );
        // A member subscribed to only one topic gets only its partitions.
        members.get_mut("c").unwrap().subscribed = vec!["u".into()];
        let next = assign(&members, &metadata);
        assert!(next["c"].keys().all(|t| t == "u"));
    }
}
