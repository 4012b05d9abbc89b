//! KIP-848 groups driven the way the coordinator drives them: each heartbeat returns
//! records, and the group changes only by replaying them.

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::heartbeat::Context;
use super::*;
use crate::coordinator::group::records::consumer::{ConsumerKey, ConsumerValue, TopicPartitions};

/// Topics "t" and "u" of four partitions each, ids 1 and 2.
fn topics() -> TopicImage {
    TopicImage::new([
        ("t".to_string(), Uuid::from_u128(1), 4),
        ("u".to_string(), Uuid::from_u128(2), 4),
    ])
}

struct Live {
    g: ConsumerGroup,
    topics: TopicImage,
    regexes: RegexCache,
}

impl Live {
    fn new() -> Live {
        Live {
            g: ConsumerGroup::default(),
            topics: topics(),
            regexes: RegexCache::default(),
        }
    }

    /// A heartbeat, its records replayed as a write would; the record types written.
    fn beat(&mut self, hb: Heartbeat) -> Result<(HeartbeatResult, Vec<i16>), ResponseError> {
        let beat = if hb.member_epoch < 0 {
            leave(&self.g, &hb, &self.topics)?
        } else {
            let ctx = Context {
                topics: &self.topics,
                regexes: &mut self.regexes,
                refresh: false,
                resend: false,
                now_ms: 1000,
            };
            heartbeat(&self.g, &hb, ctx)?
        };
        let types = self.replay(beat.records);
        Ok((beat.result, types))
    }

    fn replay(&mut self, records: ConsumerRecords) -> Vec<i16> {
        let types = records.iter().map(|(k, _)| k.record_type()).collect();
        for (k, v) in records {
            self.g.replay(k, v, &self.topics).unwrap();
        }
        types
    }

    fn ok(&mut self, hb: Heartbeat) -> HeartbeatResult {
        self.beat(hb).unwrap().0
    }
}

fn join(id: &str) -> Heartbeat {
    Heartbeat {
        member_id: id.into(),
        member_epoch: 0,
        subscribed: Some(vec!["t".into()]),
        rebalance_timeout_ms: 30_000,
        owned: Some(vec![]),
        ..Default::default()
    }
}

fn join_static(id: &str, instance: &str) -> Heartbeat {
    Heartbeat {
        instance_id: Some(instance.into()),
        ..join(id)
    }
}

/// A steady-state heartbeat: member `id` at `epoch`, owning `owned`.
fn beat(id: &str, epoch: i32, owned: &Option<Vec<(Uuid, Vec<i32>)>>) -> Heartbeat {
    Heartbeat {
        member_id: id.into(),
        member_epoch: epoch,
        owned: Some(owned.clone().unwrap_or_default()),
        ..Default::default()
    }
}

fn count(a: &Option<Vec<(Uuid, Vec<i32>)>>) -> usize {
    a.iter().flatten().map(|(_, ps)| ps.len()).sum()
}

#[test]
fn first_member_gets_everything_then_revokes_before_the_second_gets_half() {
    let mut live = Live::new();
    let (r, types) = live.beat(join("a")).unwrap();
    // Kafka's order: member, partition metadata, epoch, target, target epoch, current.
    assert_eq!(types, vec![5, 4, 3, 7, 6, 8]);
    assert_eq!(r.member_epoch, 1);
    let a_owned = r.assignment;
    assert_eq!(count(&a_owned), 4);
    assert_eq!(live.g.state_name(), "Stable");

    // b joins: epoch 2. b gets nothing yet, a still holds everything.
    let r = live.ok(join("b"));
    assert_eq!(r.member_epoch, 2);
    assert_eq!(count(&r.assignment), 0);
    assert_eq!(live.g.state_name(), "Reconciling");

    // a is told to give up two partitions; its epoch stays until it confirms.
    let (r, types) = live.beat(beat("a", 1, &a_owned)).unwrap();
    assert_eq!(types, vec![8], "only a's current assignment changes");
    assert_eq!(r.member_epoch, 1);
    let a_kept = r.assignment;
    assert_eq!(count(&a_kept), 2);
    // Still listing the revoked partitions: nothing moves, nothing is written.
    let (r, types) = live.beat(beat("a", 1, &a_owned)).unwrap();
    assert_eq!((r.member_epoch, r.assignment, types), (1, None, vec![]));
    let r = live.ok(beat("a", 1, &a_kept));
    assert_eq!(r.member_epoch, 2);

    // Now b gets the released partitions.
    let r = live.ok(beat("b", 2, &Some(vec![])));
    assert_eq!(count(&r.assignment), 2);
    assert_eq!(live.g.state_name(), "Stable");
}

#[test]
fn leaving_and_expiring_members_hand_their_partitions_back() {
    let mut live = Live::new();
    live.ok(join("a"));
    live.ok(join("b"));
    let left = live.ok(beat("b", -1, &None));
    assert_eq!(left.member_epoch, -1);
    assert_eq!(live.g.members.len(), 1);
    let records = expire(&live.g, &["a"], &live.topics);
    live.replay(records);
    assert!(live.g.members.is_empty());
    assert_eq!(live.g.state_name(), "Empty");
    assert!(
        live.g.holder("t", 0).is_none(),
        "nobody holds what the leavers had"
    );
}

#[test]
fn wrong_epochs_are_fenced_and_unknown_members_refused() {
    let mut live = Live::new();
    let owned = live.ok(join("a")).assignment;
    assert_eq!(
        live.beat(beat("a", 7, &owned)).unwrap_err(),
        ResponseError::FencedMemberEpoch
    );
    assert_eq!(
        live.beat(beat("x", 1, &owned)).unwrap_err(),
        ResponseError::UnknownMemberId
    );
    assert_eq!(
        live.beat(beat("x", -1, &None)).unwrap_err(),
        ResponseError::UnknownMemberId
    );
}

#[test]
fn a_regex_subscription_resolves_once_for_the_group() {
    let mut live = Live::new();
    let mut hb = join("a");
    hb.subscribed = None;
    hb.subscribed_regex = Some("t|u".into());
    let (r, types) = live.beat(hb.clone()).unwrap();
    assert_eq!(count(&r.assignment), 8);
    assert!(types.contains(&16));
    assert_eq!(live.g.regexes["t|u"], ["t", "u"]);
    // A second subscriber to the same regex reuses the resolution.
    hb.member_id = "b".into();
    let (_, types) = live.beat(hb.clone()).unwrap();
    assert!(!types.contains(&16), "{types:?}");
    assert_eq!(live.regexes.len(), 1);
    // An invalid regex is refused and adds nobody.
    hb.member_id = "c".into();
    hb.subscribed_regex = Some("(".into());
    assert_eq!(
        live.beat(hb).unwrap_err(),
        ResponseError::InvalidRegularExpression
    );
    assert!(!live.g.members.contains_key("c"));
    // The last subscriber leaving tombstones the resolution.
    live.ok(beat("a", -1, &None));
    let (_, types) = live.beat(beat("b", -1, &None)).unwrap();
    assert!(types.contains(&16));
    assert!(live.g.regexes.is_empty());
}

#[test]
fn a_departing_member_is_tombstoned_before_the_epoch_moves() {
    let mut live = Live::new();
    live.ok(join("a"));
    let mut b = join("b");
    b.subscribed = None;
    b.subscribed_regex = Some("t|u".into());
    live.ok(b);
    let records = leave(&live.g, &beat("b", -1, &None), &live.topics)
        .unwrap()
        .records;
    let keys: Vec<ConsumerKey> = records.iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(
        keys,
        vec![
            ConsumerKey::CurrentAssignment("b".into()),
            ConsumerKey::TargetAssignment("b".into()),
            ConsumerKey::Member("b".into()),
            ConsumerKey::RegularExpression("t|u".into()),
            // Without b's regex only "t" is subscribed.
            ConsumerKey::PartitionMetadata,
            ConsumerKey::Metadata,
        ]
    );
    assert!(records[..4].iter().all(|(_, v)| v.is_none()));
    live.replay(records);
    assert!(live.g.regexes.is_empty());
    assert_eq!(live.g.metadata.keys().collect::<Vec<_>>(), ["t"]);
}

#[test]
fn deleting_a_group_ends_with_its_epoch_tombstone() {
    let mut live = Live::new();
    let mut hb = join("a");
    hb.subscribed_regex = Some("t".into());
    live.ok(hb);
    let keys: Vec<i16> = tombstones(&live.g)
        .iter()
        .map(|(k, _)| k.record_type())
        .collect();
    assert_eq!(keys, vec![8, 7, 6, 5, 16, 4, 3]);
    assert!(tombstones(&live.g).iter().all(|(_, v)| v.is_none()));
}

#[test]
fn assignments_of_deleted_topics_are_dropped_on_replay() {
    let mut g = ConsumerGroup::default();
    let gone = TopicPartitions {
        topic_id: Uuid::from_u128(99),
        partitions: vec![0],
        assignment_epochs: vec![],
    };
    let kept = TopicPartitions {
        topic_id: Uuid::from_u128(1),
        partitions: vec![1, 2],
        assignment_epochs: vec![],
    };
    let value = ConsumerValue::TargetAssignment(vec![gone, kept]);
    g.replay(
        ConsumerKey::TargetAssignment("m".into()),
        Some(value),
        &topics(),
    )
    .unwrap();
    assert_eq!(
        g.target["m"],
        Assignment::from([("t".to_string(), [1, 2].into())])
    );
    let mismatched = Some(ConsumerValue::Metadata { epoch: 1 });
    assert!(g
        .replay(ConsumerKey::Member("m".into()), mismatched, &topics())
        .is_err());
}

// ---- static membership (KIP-848) ----

#[test]
fn an_instance_id_in_use_is_unreleased_until_its_member_leaves_with_epoch_minus_two() {
    let mut live = Live::new();
    let first = live.ok(join_static("a1", "app-1"));
    assert_eq!(first.member_epoch, 1);
    let owned = first.assignment;
    // A second member with the same instance id, while a1 is active.
    assert_eq!(
        live.beat(join_static("a2", "app-1")).unwrap_err(),
        ResponseError::UnreleasedInstanceId
    );
    // Rejoining with the same member id does not free it either.
    assert_eq!(
        live.beat(join_static("a1", "app-1")).unwrap_err(),
        ResponseError::UnreleasedInstanceId
    );
    // Another member id heartbeating under the instance id is fenced.
    let mut wrong = beat("a2", 1, &owned);
    wrong.instance_id = Some("app-1".into());
    assert_eq!(
        live.beat(wrong).unwrap_err(),
        ResponseError::FencedInstanceId
    );
    // An unknown instance id heartbeating is an unknown member.
    let mut unknown = beat("a1", 1, &owned);
    unknown.instance_id = Some("app-9".into());
    assert_eq!(
        live.beat(unknown).unwrap_err(),
        ResponseError::UnknownMemberId
    );
    // Leaving for now: epoch -2, the member keeps its place and its partitions.
    let mut left = beat("a1", -2, &None);
    left.instance_id = Some("app-1".into());
    let (r, types) = live.beat(left).unwrap();
    assert_eq!((r.member_epoch, types), (-2, vec![8]));
    assert_eq!(live.g.members["a1"].member_epoch, -2);
    assert_eq!(live.g.group_epoch, 1, "no rebalance");
    assert_eq!(live.g.holder("t", 0), Some("a1"));

    // The next instance takes over: same partitions, no new group epoch.
    let (r, types) = live.beat(join_static("a2", "app-1")).unwrap();
    assert_eq!(r.member_epoch, 1);
    assert_eq!(count(&r.assignment), 4);
    assert_eq!(&types[..6], &[8, 7, 5, 5, 7, 8], "a1 replaced by a2");
    assert!(!types.contains(&3), "{types:?}");
    assert!(!live.g.members.contains_key("a1"));
    assert_eq!(live.g.holder("t", 0), Some("a2"));
    assert_eq!(live.g.static_member("app-1").unwrap().member_id, "a2");
    assert_eq!(live.g.group_epoch, 1);
}

#[test]
fn leaving_with_epoch_minus_two_needs_an_instance_id() {
    let mut live = Live::new();
    live.ok(join("a"));
    assert_eq!(
        live.beat(beat("a", -2, &None)).unwrap_err(),
        ResponseError::InvalidRequest
    );
}

#[test]
fn a_static_member_leaving_for_good_hands_its_partitions_back() {
    let mut live = Live::new();
    live.ok(join_static("a1", "app-1"));
    live.ok(join("b"));
    let mut gone = beat("a1", -1, &None);
    gone.instance_id = Some("app-1".into());
    let (r, types) = live.beat(gone).unwrap();
    assert_eq!(r.member_epoch, -1);
    assert!(types.contains(&3), "the group epoch moves");
    assert!(live.g.static_member("app-1").is_none());
    // The instance id is free for a new member at once.
    assert!(live.beat(join_static("a2", "app-1")).is_ok());
}

/// Record 8's AssignmentEpochs (Kafka 4.4, KIP-1251): a partition carries the member
/// epoch at which it was assigned. a gets all four at epoch 1 and keeps two of them at
/// epoch 1 once it reaches epoch 2; b gets the other two at epoch 2. The group is rebuilt
/// from the records written, so the epochs went through them.
#[test]
fn partitions_carry_the_epoch_they_were_assigned_at() {
    let mut live = Live::new();
    let a_owned = live.ok(join("a")).assignment;
    live.ok(join("b"));
    let a_kept = live.ok(beat("a", 1, &a_owned)).assignment;
    assert_eq!(live.ok(beat("a", 1, &a_kept)).member_epoch, 2);
    live.ok(beat("b", 2, &Some(vec![])));
    let epochs = |m: &str| -> Vec<i32> {
        live.g.members[m]
            .assignment_epochs
            .values()
            .copied()
            .collect()
    };
    assert_eq!(epochs("a"), vec![1, 1]);
    assert_eq!(epochs("b"), vec![2, 2]);

    // The record a Kafka 4.4 coordinator would load: epochs aligned with partitions.
    let (_, value) = records::current_assignment_record(
        &live.g.members["a"],
        live.g.target.get("a"),
        live.g.assignment_epoch,
        &live.topics,
    );
    let Some(ConsumerValue::CurrentAssignment(a)) = value else {
        panic!("not record 8");
    };
    assert_eq!(a.assigned.len(), 1);
    assert_eq!(a.assigned[0].assignment_epochs, vec![1, 1]);
    assert_eq!(a.assigned[0].partitions.len(), 2);
}
