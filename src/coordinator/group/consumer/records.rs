//! A consumer group to and from its KIP-848 records in `__consumer_offsets`.
//!
//! Writing: after every change the coordinator compares the group before and after
//! and writes what differs, in the order Kafka does (members leaving first, then member
//! subscriptions, resolved regexes, subscribed partition counts, the group epoch, the
//! target assignment and its epoch, and last the members' current assignments), so a
//! replay that stops anywhere sees a state Kafka could have written.
//!
//! Reading: records are replayed in log order, the last value of a key winning and a
//! tombstone removing it. Assignments are stored by topic id and kept by name here;
//! partitions of topics that no longer exist are dropped on the way in. What is not
//! persisted (session and revocation deadlines, what a member was last sent) starts
//! afresh when loading finishes, as Kafka's coordinator does after a failover.

use std::collections::{BTreeMap, BTreeSet};

use tokio::time::{Duration, Instant};

use super::{Assignment, ConsumerGroup, ConsumerMember, TopicView};
use crate::coordinator::group::offsets_topic::consumer_group::{
    member_state, ConsumerKey, ConsumerValue, CurrentAssignment, MemberMetadata, RegularExpression,
    TopicMetadata, TopicPartitions,
};

/// Records of one group: key and value (None: a tombstone).
pub type ConsumerRecords = Vec<(ConsumerKey, Option<ConsumerValue>)>;

/// skua resolves regexes at every heartbeat and keeps no metadata image version;
/// version 0 makes a Kafka coordinator reading the record resolve it afresh.
const REGEX_VERSION: i64 = 0;

/// The records that take a group from `before` (a new group: the default) to `after`.
pub fn changes(
    before: &ConsumerGroup,
    after: &ConsumerGroup,
    topics: &dyn TopicView,
    now_ms: i64,
) -> ConsumerRecords {
    let mut out = ConsumerRecords::new();
    for id in before.members.keys() {
        if !after.members.contains_key(id) {
            out.push((ConsumerKey::CurrentAssignment(id.clone()), None));
            out.push((ConsumerKey::TargetAssignment(id.clone()), None));
            out.push((ConsumerKey::Member(id.clone()), None));
        }
    }
    for (id, m) in &after.members {
        let new = member_metadata(m);
        if before.members.get(id).map(member_metadata).as_ref() != Some(&new) {
            out.push((
                ConsumerKey::Member(id.clone()),
                Some(ConsumerValue::Member(new)),
            ));
        }
    }
    let (old_regexes, new_regexes) = (regexes(before), regexes(after));
    for regex in old_regexes.keys() {
        if !new_regexes.contains_key(regex) {
            out.push((ConsumerKey::RegularExpression(regex.clone()), None));
        }
    }
    for (regex, matched) in &new_regexes {
        if old_regexes.get(regex) != Some(matched) {
            let value = RegularExpression {
                topics: matched.clone(),
                version: REGEX_VERSION,
                timestamp_ms: now_ms,
            };
            out.push((
                ConsumerKey::RegularExpression(regex.clone()),
                Some(ConsumerValue::RegularExpression(value)),
            ));
        }
    }
    if before.metadata != after.metadata {
        out.push((
            ConsumerKey::PartitionMetadata,
            Some(partition_metadata(&after.metadata, topics)),
        ));
    }
    if before.group_epoch != after.group_epoch {
        let epoch = after.group_epoch;
        out.push((
            ConsumerKey::Metadata,
            Some(ConsumerValue::Metadata { epoch }),
        ));
    }
    for (id, target) in &after.target {
        if before.target.get(id) != Some(target) {
            let value = ConsumerValue::TargetAssignment(by_id(target, topics));
            out.push((ConsumerKey::TargetAssignment(id.clone()), Some(value)));
        }
    }
    for id in before.target.keys() {
        // Targets of departed members were tombstoned with them above.
        if !after.target.contains_key(id) && after.members.contains_key(id) {
            out.push((ConsumerKey::TargetAssignment(id.clone()), None));
        }
    }
    if before.assignment_epoch != after.assignment_epoch {
        let assignment_epoch = after.assignment_epoch;
        out.push((
            ConsumerKey::TargetAssignmentMetadata,
            Some(ConsumerValue::TargetAssignmentMetadata { assignment_epoch }),
        ));
    }
    for (id, m) in &after.members {
        let changed = before.members.get(id).is_none_or(|old| {
            (
                old.member_epoch,
                old.previous_epoch,
                &old.assigned,
                &old.pending_revocation,
            ) != (
                m.member_epoch,
                m.previous_epoch,
                &m.assigned,
                &m.pending_revocation,
            )
        });
        if changed {
            let value = current_assignment(after, m, topics);
            out.push((
                ConsumerKey::CurrentAssignment(id.clone()),
                Some(ConsumerValue::CurrentAssignment(value)),
            ));
        }
    }
    out
}

/// The tombstones that delete a group and everything recorded about it, in Kafka's
/// order: the group epoch goes last, once nothing refers to the group.
pub fn tombstones(g: &ConsumerGroup) -> ConsumerRecords {
    let mut out = ConsumerRecords::new();
    for id in g.members.keys() {
        out.push((ConsumerKey::CurrentAssignment(id.clone()), None));
    }
    let targeted: BTreeSet<&String> = g.members.keys().chain(g.target.keys()).collect();
    for id in targeted {
        out.push((ConsumerKey::TargetAssignment(id.clone()), None));
    }
    out.push((ConsumerKey::TargetAssignmentMetadata, None));
    for id in g.members.keys() {
        out.push((ConsumerKey::Member(id.clone()), None));
    }
    for regex in regexes(g).into_keys() {
        out.push((ConsumerKey::RegularExpression(regex), None));
    }
    out.push((ConsumerKey::PartitionMetadata, None));
    out.push((ConsumerKey::Metadata, None));
    out
}

fn member_metadata(m: &ConsumerMember) -> MemberMetadata {
    MemberMetadata {
        instance_id: m.instance_id.clone(),
        rack_id: m.rack_id.clone(),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        subscribed_topic_names: m.subscribed.clone(),
        subscribed_topic_regex: m.subscribed_regex.clone(),
        rebalance_timeout_ms: m.rebalance_timeout_ms,
        // skua serves every assignor name with its uniform assignor and keeps none.
        server_assignor: None,
    }
}

fn current_assignment(
    g: &ConsumerGroup,
    m: &ConsumerMember,
    topics: &dyn TopicView,
) -> CurrentAssignment {
    let state = if !m.pending_revocation.is_empty() {
        member_state::UNREVOKED_PARTITIONS
    } else if m.member_epoch == g.assignment_epoch
        && g.target.get(&m.member_id).is_some_and(|t| *t != m.assigned)
    {
        member_state::UNRELEASED_PARTITIONS
    } else {
        member_state::STABLE
    };
    CurrentAssignment {
        member_epoch: m.member_epoch,
        previous_member_epoch: m.previous_epoch,
        state,
        assigned: by_id(&m.assigned, topics),
        pending_revocation: by_id(&m.pending_revocation, topics),
    }
}

/// Regular expression → the topics it matched, over the group's members.
fn regexes(g: &ConsumerGroup) -> BTreeMap<String, Vec<String>> {
    g.members
        .values()
        .filter_map(|m| Some((m.subscribed_regex.clone()?, m.regex_matches.clone())))
        .collect()
}

fn partition_metadata(metadata: &BTreeMap<String, i32>, topics: &dyn TopicView) -> ConsumerValue {
    ConsumerValue::PartitionMetadata(
        metadata
            .iter()
            .filter_map(|(name, n)| {
                Some(TopicMetadata {
                    topic_id: topics.topic_id(name)?,
                    topic_name: name.clone(),
                    num_partitions: *n,
                })
            })
            .collect(),
    )
}

/// An assignment by topic id; a topic deleted meanwhile is left out.
fn by_id(a: &Assignment, topics: &dyn TopicView) -> Vec<TopicPartitions> {
    a.iter()
        .filter_map(|(name, ps)| {
            Some(TopicPartitions {
                topic_id: topics.topic_id(name)?,
                partitions: ps.iter().copied().collect(),
            })
        })
        .collect()
}

/// An assignment by topic name; partitions of unknown topic ids are dropped.
fn by_name(tps: Vec<TopicPartitions>, topics: &dyn TopicView) -> Assignment {
    let mut out = Assignment::new();
    for tp in tps {
        match topics.topic_name(tp.topic_id) {
            Some(name) => out.entry(name).or_default().extend(tp.partitions),
            None => {
                tracing::debug!(topic_id = %tp.topic_id, "dropping partitions of a deleted topic")
            }
        }
    }
    out
}

impl ConsumerGroup {
    /// Applies one replayed record; `None` is a tombstone. The group's own tombstone
    /// (type 3) is the caller's to handle: it removes the whole group.
    pub fn replay(
        &mut self,
        key: ConsumerKey,
        value: Option<ConsumerValue>,
        topics: &dyn TopicView,
    ) -> Result<(), String> {
        match (key, value) {
            (ConsumerKey::Metadata, Some(ConsumerValue::Metadata { epoch })) => {
                self.group_epoch = epoch;
            }
            (ConsumerKey::PartitionMetadata, Some(ConsumerValue::PartitionMetadata(ts))) => {
                self.metadata = ts
                    .into_iter()
                    .map(|t| (t.topic_name, t.num_partitions))
                    .collect();
            }
            (ConsumerKey::PartitionMetadata, None) => self.metadata.clear(),
            (ConsumerKey::Member(id), Some(ConsumerValue::Member(v))) => {
                let m = self.member_for_replay(&id);
                m.instance_id = v.instance_id;
                m.rack_id = v.rack_id;
                m.client_id = v.client_id;
                m.client_host = v.client_host;
                m.subscribed = v.subscribed_topic_names;
                m.subscribed_regex = v.subscribed_topic_regex;
                m.rebalance_timeout_ms = v.rebalance_timeout_ms;
            }
            (ConsumerKey::Member(id), None) => {
                self.members.remove(&id);
            }
            (ConsumerKey::TargetAssignmentMetadata, v) => {
                self.assignment_epoch = match v {
                    Some(ConsumerValue::TargetAssignmentMetadata { assignment_epoch }) => {
                        assignment_epoch
                    }
                    None => 0,
                    Some(_) => return Err("value does not match its key".into()),
                };
            }
            (ConsumerKey::TargetAssignment(id), Some(ConsumerValue::TargetAssignment(tps))) => {
                self.target.insert(id, by_name(tps, topics));
            }
            (ConsumerKey::TargetAssignment(id), None) => {
                self.target.remove(&id);
            }
            (ConsumerKey::CurrentAssignment(id), Some(ConsumerValue::CurrentAssignment(a))) => {
                let m = self.member_for_replay(&id);
                m.member_epoch = a.member_epoch;
                m.previous_epoch = a.previous_member_epoch;
                m.assigned = by_name(a.assigned, topics);
                m.pending_revocation = by_name(a.pending_revocation, topics);
            }
            (ConsumerKey::CurrentAssignment(id), None) => {
                // The member is leaving; its metadata tombstone follows.
                if let Some(m) = self.members.get_mut(&id) {
                    m.member_epoch = -1;
                    m.previous_epoch = -1;
                    m.assigned.clear();
                    m.pending_revocation.clear();
                }
            }
            (ConsumerKey::RegularExpression(regex), v) => match v {
                Some(ConsumerValue::RegularExpression(r)) => {
                    self.replayed_regexes.insert(regex, r.topics);
                }
                None => {
                    self.replayed_regexes.remove(&regex);
                }
                Some(_) => return Err("value does not match its key".into()),
            },
            _ => return Err("value does not match its key".into()),
        }
        Ok(())
    }

    fn member_for_replay(&mut self, id: &str) -> &mut ConsumerMember {
        self.members
            .entry(id.to_string())
            .or_insert_with(|| ConsumerMember {
                member_id: id.to_string(),
                ..Default::default()
            })
    }

    /// Ends a replay: members get a fresh session (and, when revoking, a fresh rebalance
    /// timeout) from now, and their regexes what was last recorded for them.
    pub fn finish_replay(&mut self, session_timeout_ms: i32, now: Instant) {
        self.session_timeout_ms = session_timeout_ms;
        let session = Duration::from_millis(session_timeout_ms.max(0) as u64);
        let regexes = std::mem::take(&mut self.replayed_regexes);
        for m in self.members.values_mut() {
            m.session_deadline = Some(now + session);
            if !m.pending_revocation.is_empty() {
                let timeout = Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64);
                m.revocation_deadline = Some(now + timeout);
            }
            if let Some(r) = &m.subscribed_regex {
                m.regex_matches = regexes.get(r).cloned().unwrap_or_default();
            }
            m.last_sent = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::super::tests::beat;
    use super::super::Heartbeat;
    use super::*;

    /// Topics "t" (four partitions) and "u" (two), with ids 1 and 2.
    struct Topics;

    impl TopicView for Topics {
        fn partitions(&self, topic: &str) -> Option<i32> {
            match topic {
                "t" => Some(4),
                "u" => Some(2),
                _ => None,
            }
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

    fn join(id: &str, regex: Option<&str>) -> Heartbeat {
        Heartbeat {
            member_id: id.into(),
            member_epoch: 0,
            client_id: "client".into(),
            subscribed: Some(if regex.is_some() {
                vec![]
            } else {
                vec!["t".into()]
            }),
            subscribed_regex: regex.map(String::from),
            rebalance_timeout_ms: 30_000,
            ..Default::default()
        }
    }

    /// Applies `f` and replays what it wrote onto `replayed`, as a restart would see it.
    fn step(
        g: &mut ConsumerGroup,
        replayed: &mut ConsumerGroup,
        f: impl FnOnce(&mut ConsumerGroup),
    ) -> Vec<i16> {
        let before = g.clone();
        f(g);
        let records = changes(&before, g, &Topics, 1000);
        let types = records.iter().map(|(k, _)| k.record_type()).collect();
        for (k, v) in records {
            replayed.replay(k, v, &Topics).unwrap();
        }
        types
    }

    fn same_state(a: &ConsumerGroup, b: &ConsumerGroup) {
        assert_eq!(
            (a.group_epoch, a.assignment_epoch),
            (b.group_epoch, b.assignment_epoch)
        );
        assert_eq!(a.target, b.target);
        assert_eq!(a.metadata, b.metadata);
        assert_eq!(
            a.members.keys().collect::<Vec<_>>(),
            b.members.keys().collect::<Vec<_>>()
        );
        for (x, y) in a.members.values().zip(b.members.values()) {
            assert_eq!(
                (
                    x.member_epoch,
                    x.previous_epoch,
                    &x.assigned,
                    &x.pending_revocation
                ),
                (
                    y.member_epoch,
                    y.previous_epoch,
                    &y.assigned,
                    &y.pending_revocation
                )
            );
            assert_eq!(
                (&x.subscribed, &x.subscribed_regex, &x.client_id),
                (&y.subscribed, &y.subscribed_regex, &y.client_id)
            );
            assert_eq!(x.rebalance_timeout_ms, y.rebalance_timeout_ms);
        }
    }

    #[test]
    fn a_converging_group_replays_to_the_same_state_and_carries_on() {
        let now = Instant::now();
        let mut g = ConsumerGroup::new(45_000);
        let mut replayed = ConsumerGroup::default();
        let mut a_owned = Assignment::new();
        let types = step(&mut g, &mut replayed, |g| {
            a_owned = g
                .heartbeat(join("a", None), &Topics, now)
                .unwrap()
                .assignment
                .unwrap();
        });
        // Kafka's order: member, partition metadata, epoch, target, target epoch, current.
        assert_eq!(types, vec![5, 4, 3, 7, 6, 8]);
        step(&mut g, &mut replayed, |g| {
            g.heartbeat(join("b", Some("t|u")), &Topics, now).unwrap();
        });
        // a is asked to revoke: only its current assignment changes.
        let types = step(&mut g, &mut replayed, |g| {
            g.heartbeat(beat("a", 1, &a_owned), &Topics, now).unwrap();
        });
        assert_eq!(types, vec![8]);
        assert!(!replayed.members["a"].pending_revocation.is_empty());
        same_state(&g, &replayed);

        replayed.finish_replay(45_000, now);
        assert_eq!(replayed.members["b"].regex_matches, ["t", "u"]);
        assert_eq!(replayed.state_name(), g.state_name());
        // After a "restart", a keeps revoking at its epoch: no fencing, no new epoch.
        let kept = intersection_for_test(&a_owned, &replayed.target["a"]);
        let r = replayed
            .heartbeat(beat("a", 1, &kept), &Topics, now)
            .unwrap();
        let r2 = g.heartbeat(beat("a", 1, &kept), &Topics, now).unwrap();
        assert_eq!(r.member_epoch, r2.member_epoch);
        assert_eq!(r.member_epoch, 2);
        // The restarted coordinator does not know what the member was last sent, so it
        // sends the (unchanged) assignment again.
        assert_eq!(r2.assignment, None);
        assert_eq!(r.assignment.as_ref(), Some(&g.members["a"].assigned));
        assert_eq!(replayed.group_epoch, 2, "replay bumped no epoch");
    }

    fn intersection_for_test(a: &Assignment, b: &Assignment) -> Assignment {
        let mut out = Assignment::new();
        for (t, ps) in a {
            for p in ps {
                if b.get(t).is_some_and(|s| s.contains(p)) {
                    out.entry(t.clone()).or_default().insert(*p);
                }
            }
        }
        out
    }

    #[test]
    fn a_departing_member_is_tombstoned_before_the_epoch_moves() {
        let now = Instant::now();
        let mut g = ConsumerGroup::new(45_000);
        let mut replayed = ConsumerGroup::default();
        step(&mut g, &mut replayed, |g| {
            g.heartbeat(join("a", None), &Topics, now).unwrap();
            g.heartbeat(join("b", Some("t|u")), &Topics, now).unwrap();
        });
        let records = {
            let before = g.clone();
            g.heartbeat(beat("b", -1, &Assignment::new()), &Topics, now)
                .unwrap();
            changes(&before, &g, &Topics, 1000)
        };
        let keys: Vec<ConsumerKey> = records.iter().map(|(k, _)| k.clone()).collect();
        assert_eq!(
            keys,
            vec![
                ConsumerKey::CurrentAssignment("b".into()),
                ConsumerKey::TargetAssignment("b".into()),
                ConsumerKey::Member("b".into()),
                ConsumerKey::RegularExpression("t|u".into()),
                ConsumerKey::Metadata,
            ]
        );
        assert!(records[..4].iter().all(|(_, v)| v.is_none()));
        for (k, v) in records {
            replayed.replay(k, v, &Topics).unwrap();
        }
        same_state(&g, &replayed);
        assert!(replayed.replayed_regexes.is_empty());
    }

    #[test]
    fn deleting_a_group_ends_with_its_epoch_tombstone() {
        let now = Instant::now();
        let mut g = ConsumerGroup::new(45_000);
        g.heartbeat(join("a", Some("t")), &Topics, now).unwrap();
        let keys: Vec<i16> = tombstones(&g)
            .iter()
            .map(|(k, _)| k.record_type())
            .collect();
        assert_eq!(keys, vec![8, 7, 6, 5, 16, 4, 3]);
        assert!(tombstones(&g).iter().all(|(_, v)| v.is_none()));
    }

    #[test]
    fn assignments_of_deleted_topics_are_dropped_on_replay() {
        let mut g = ConsumerGroup::default();
        let gone = TopicPartitions {
            topic_id: Uuid::from_u128(99),
            partitions: vec![0],
        };
        let kept = TopicPartitions {
            topic_id: Uuid::from_u128(1),
            partitions: vec![1, 2],
        };
        let value = ConsumerValue::TargetAssignment(vec![gone, kept]);
        g.replay(
            ConsumerKey::TargetAssignment("m".into()),
            Some(value),
            &Topics,
        )
        .unwrap();
        assert_eq!(
            g.target["m"],
            Assignment::from([("t".to_string(), [1, 2].into())])
        );
        let mismatched = Some(ConsumerValue::Metadata { epoch: 1 });
        assert!(g
            .replay(ConsumerKey::Member("m".into()), mismatched, &Topics)
            .is_err());
    }
}
