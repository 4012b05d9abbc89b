//! Share group membership through its records: every change is written as bytes, read
//! back and replayed, as the coordinator runtime does.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::heartbeat::{tombstones, validate};
use super::*;
use crate::coordinator::group::records::share::{ShareKey, ShareValue};
use crate::coordinator::wire::Reader;

const T: Uuid = Uuid::from_u128(0x11);
const U: Uuid = Uuid::from_u128(0x22);

struct Coordinator {
    g: ShareGroup,
    topics: TopicImage,
    now: i64,
    refresh: bool,
    max_size: usize,
    since: InitializingSince,
    /// Every record written, as bytes.
    log: Vec<(bytes::Bytes, Option<bytes::Bytes>)>,
}

impl Coordinator {
    fn new(topics: &[(&str, Uuid, i32)]) -> Self {
        Coordinator {
            g: ShareGroup::default(),
            topics: image(topics),
            now: 1_000,
            refresh: false,
            max_size: MAX_SIZE_DEFAULT,
            since: InitializingSince::new(),
            log: Vec::new(),
        }
    }

    fn write(&mut self, records: ShareRecords) {
        for (key, value) in records {
            let k = key.encode("g");
            let v = value.as_ref().map(ShareValue::encode);
            let (key, value) = decode(&k, v.clone());
            self.g.replay(key, value, &self.topics).expect("replay");
            self.log.push((k, v));
        }
    }

    fn beat(&mut self, hb: ShareHeartbeat) -> Result<ShareBeat, ResponseError> {
        validate("g", &hb).map_err(|(e, _)| e)?;
        let beat = match hb.member_epoch {
            LEAVE_EPOCH => leave(&self.g, &hb, &self.topics)?,
            _ => {
                let ctx = Context {
                    topics: &self.topics,
                    refresh: self.refresh,
                    now_ms: self.now,
                    max_size: self.max_size,
                    initialize_retry_ms: INITIALIZE_RETRY_INTERVAL_MS_DEFAULT,
                    initializing_since: &self.since,
                };
                heartbeat(&self.g, &hb, &ctx)?
            }
        };
        self.refresh = false;
        self.write(beat.records.clone());
        if let Some(req) = &beat.initialize {
            req.note_sent(&mut self.since, self.now);
        }
        Ok(beat)
    }

    /// The share coordinator answers an initialization.
    fn initialized(&mut self, req: &InitializeRequest) {
        let records = initialized(&self.g, &req.topics);
        self.write(records);
    }

    /// A member joins and, once its partitions are initialized, heartbeats again.
    fn join_and_settle(&mut self, member: &str, topics: &[&str]) -> ShareBeat {
        let first = self.beat(join(member, topics)).unwrap();
        if let Some(req) = &first.initialize {
            self.initialized(req);
        }
        let epoch = first.result.member_epoch;
        self.beat(at(member, epoch)).unwrap()
    }

    /// A coordinator loading the group from its records.
    fn reload(&self) -> ShareGroup {
        let mut g = ShareGroup::default();
        for (k, v) in &self.log {
            let (key, value) = decode(k, v.clone());
            g.replay(key, value, &self.topics).unwrap();
        }
        g
    }
}

fn decode(k: &bytes::Bytes, v: Option<bytes::Bytes>) -> (ShareKey, Option<ShareValue>) {
    let mut r = Reader::new(k.clone(), false);
    let record_type = r.i16().unwrap();
    assert_eq!(r.str().unwrap(), "g");
    let key = ShareKey::decode(record_type, &mut r).unwrap().unwrap();
    let value = v.map(|v| ShareValue::decode(&key, v).unwrap());
    (key, value)
}

fn image(topics: &[(&str, Uuid, i32)]) -> TopicImage {
    TopicImage::new(topics.iter().map(|(n, id, p)| (n.to_string(), *id, *p)))
}

fn join(member: &str, topics: &[&str]) -> ShareHeartbeat {
    ShareHeartbeat {
        member_id: member.into(),
        member_epoch: 0,
        subscribed: Some(topics.iter().map(|t| t.to_string()).collect()),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    }
}

fn at(member: &str, epoch: i32) -> ShareHeartbeat {
    ShareHeartbeat {
        member_id: member.into(),
        member_epoch: epoch,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        ..Default::default()
    }
}

fn kinds(records: &ShareRecords) -> Vec<(i16, bool)> {
    records
        .iter()
        .map(|(k, v)| (k.record_type(), v.is_some()))
        .collect()
}

fn partitions_of(c: &Coordinator, member: &str, topic: &str) -> BTreeSet<i32> {
    c.g.members[member]
        .assigned
        .get(topic)
        .cloned()
        .unwrap_or_default()
}

#[test]
fn a_member_is_assigned_its_partitions_once_their_state_is_initialized() {
    let mut c = Coordinator::new(&[("t", T, 2)]);
    let first = c.beat(join("m1", &["t"])).unwrap();
    // Member, group epoch, target epoch, current assignment, state partitions.
    assert_eq!(
        kinds(&first.records),
        vec![(10, true), (11, true), (12, true), (14, true), (15, true)]
    );
    assert_eq!(first.result.member_epoch, 1);
    assert_eq!(
        first.result.assignment,
        Some(vec![]),
        "nothing initialized yet"
    );
    let req = first.initialize.clone().expect("initialize asked for");
    assert_eq!(req.state_epoch, 1);
    assert_eq!(req.topics[&T], ("t".to_string(), BTreeSet::from([0, 1])));
    assert_eq!(
        c.g.state_partitions.initializing[&T].1,
        BTreeSet::from([0, 1])
    );

    c.initialized(&req);
    assert!(c.g.state_partitions.initializing.is_empty());
    assert_eq!(
        c.g.state_partitions.initialized[&T].1,
        BTreeSet::from([0, 1])
    );

    // The next heartbeat moves the group epoch and assigns both partitions.
    let second = c.beat(at("m1", 1)).unwrap();
    assert_eq!(second.result.member_epoch, 2);
    assert_eq!(second.result.assignment, Some(vec![(T, vec![0, 1])]));
    assert!(second.initialize.is_none());
    // A heartbeat with nothing new writes nothing and sends no assignment.
    let third = c.beat(at("m1", 2)).unwrap();
    assert!(third.records.is_empty(), "{:?}", third.records);
    assert_eq!(
        (third.result.member_epoch, third.result.assignment),
        (2, None)
    );
}

#[test]
fn three_members_share_one_partition() {
    let mut c = Coordinator::new(&[("t", T, 1)]);
    c.join_and_settle("m1", &["t"]);
    c.beat(join("m2", &["t"])).unwrap();
    c.beat(join("m3", &["t"])).unwrap();
    for m in ["m1", "m2", "m3"] {
        let epoch = c.g.members[m].member_epoch;
        c.beat(at(m, epoch)).unwrap();
    }
    for m in ["m1", "m2", "m3"] {
        assert_eq!(partitions_of(&c, m, "t"), BTreeSet::from([0]), "{m}");
        assert_eq!(c.g.members[m].member_epoch, c.g.group_epoch);
    }
    assert_eq!(c.g.state_name(), "Stable");
}

#[test]
fn more_partitions_than_members_are_spread_without_sharing() {
    let mut c = Coordinator::new(&[("t", T, 5)]);
    c.join_and_settle("m1", &["t"]);
    c.beat(join("m2", &["t"])).unwrap();
    let e1 = c.g.members["m1"].member_epoch;
    c.beat(at("m1", e1)).unwrap();
    let a = partitions_of(&c, "m1", "t");
    let b = partitions_of(&c, "m2", "t");
    assert!(a.is_disjoint(&b));
    assert_eq!(a.union(&b).count(), 5);
    assert!(a.len().abs_diff(b.len()) <= 1, "{a:?} {b:?}");
}

#[test]
fn members_get_only_the_topics_they_subscribe_to() {
    let mut c = Coordinator::new(&[("t", T, 1), ("u", U, 1)]);
    c.join_and_settle("m1", &["t"]);
    c.join_and_settle("m2", &["u"]);
    let e1 = c.g.members["m1"].member_epoch;
    c.beat(at("m1", e1)).unwrap();
    assert_eq!(
        c.g.members["m1"].assigned.keys().collect::<Vec<_>>(),
        vec!["t"]
    );
    assert_eq!(
        c.g.members["m2"].assigned.keys().collect::<Vec<_>>(),
        vec!["u"]
    );
}

#[test]
fn member_epochs_are_checked_as_kafka_does() {
    let mut c = Coordinator::new(&[("t", T, 1)]);
    c.join_and_settle("m1", &["t"]);
    c.beat(join("m2", &["t"])).unwrap();
    let epoch = c.beat(at("m1", 2)).unwrap().result.member_epoch;
    assert_eq!((epoch, c.g.members["m1"].previous_epoch), (3, 2));
    assert_eq!(
        c.beat(at("nobody", 1)).unwrap_err(),
        ResponseError::UnknownMemberId
    );
    assert_eq!(
        c.beat(at("m1", epoch + 1)).unwrap_err(),
        ResponseError::FencedMemberEpoch
    );
    // The previous epoch: the answer that moved it was lost.
    let retry = c.beat(at("m1", epoch - 1)).unwrap();
    assert_eq!(retry.result.member_epoch, epoch);
    assert_eq!(
        c.beat(at("m1", epoch - 2)).unwrap_err(),
        ResponseError::FencedMemberEpoch
    );
    // Joining again with epoch 0 starts afresh with the same id.
    let rejoin = c.beat(join("m1", &["t"])).unwrap();
    assert_eq!(rejoin.result.member_epoch, epoch);
    assert_eq!(rejoin.result.assignment, Some(vec![(T, vec![0])]));
}

#[test]
fn invalid_heartbeats_are_refused() {
    let bad = |hb: ShareHeartbeat| validate("g", &hb).map_err(|(e, _)| e);
    assert_eq!(bad(join("", &["t"])), Err(ResponseError::InvalidRequest));
    assert_eq!(bad(join("m", &[])), Err(ResponseError::InvalidRequest));
    assert_eq!(bad(at("m", 0)), Err(ResponseError::InvalidRequest));
    assert_eq!(bad(at("m", -2)), Err(ResponseError::InvalidRequest));
    assert_eq!(
        validate("", &join("m", &["t"])).map_err(|(e, _)| e),
        Err(ResponseError::InvalidRequest)
    );
    assert!(bad(at("m", 3)).is_ok());
}

#[test]
fn a_full_group_refuses_new_members_only() {
    let mut c = Coordinator::new(&[("t", T, 1)]);
    c.max_size = 2;
    c.beat(join("m1", &["t"])).unwrap();
    c.beat(join("m2", &["t"])).unwrap();
    assert_eq!(
        c.beat(join("m3", &["t"])).unwrap_err(),
        ResponseError::GroupMaxSizeReached
    );
    assert!(c.beat(join("m2", &["t"])).is_ok());
}

#[test]
fn a_leaving_member_is_removed_and_the_others_rebalance() {
    let mut c = Coordinator::new(&[("t", T, 2)]);
    c.join_and_settle("m1", &["t"]);
    c.beat(join("m2", &["t"])).unwrap();
    let e1 = c.g.members["m1"].member_epoch;
    let shared = c.beat(at("m1", e1)).unwrap();
    assert_eq!(shared.result.assignment.map(|a| a[0].1.len()), Some(1));
    let epoch_before = c.g.group_epoch;
    let left = c.beat(at("m2", -1)).unwrap();
    assert!(left.left);
    assert_eq!(left.result.member_epoch, -1);
    assert_eq!(
        kinds(&left.records),
        vec![(14, false), (13, false), (10, false), (11, true)]
    );
    assert_eq!(c.g.group_epoch, epoch_before + 1);
    assert!(!c.g.members.contains_key("m2") && !c.g.target.contains_key("m2"));
    let e1 = c.g.members["m1"].member_epoch;
    let back = c.beat(at("m1", e1)).unwrap();
    assert_eq!(back.result.assignment, Some(vec![(T, vec![0, 1])]));
    assert_eq!(
        c.beat(at("m2", -1)).unwrap_err(),
        ResponseError::UnknownMemberId
    );
    // Expiry: the same records for a member whose session ran out.
    let records = expire(&c.g, &["m1", "gone"], &c.topics);
    c.write(records);
    assert_eq!(c.g.state_name(), "Empty");
}

#[test]
fn an_unanswered_initialization_is_asked_again_after_the_retry_interval() {
    let mut c = Coordinator::new(&[("t", T, 1)]);
    let first = c.beat(join("m1", &["t"])).unwrap();
    assert!(first.initialize.is_some());
    c.now += 1_000;
    assert!(
        c.beat(at("m1", 1)).unwrap().initialize.is_none(),
        "asked recently"
    );
    c.now += INITIALIZE_RETRY_INTERVAL_MS_DEFAULT;
    let again = c
        .beat(at("m1", 1))
        .unwrap()
        .initialize
        .expect("asked again");
    // A failed one is forgotten and asked for at the next heartbeat.
    let records = uninitialize(&c.g, &again.topics);
    c.write(records);
    assert!(c.g.state_partitions.initializing.is_empty());
    assert!(c.beat(at("m1", 1)).unwrap().initialize.is_some());
    // A group loaded from its records asks again for what was initializing.
    let loaded = c.reload();
    assert!(!loaded.state_partitions.initializing.is_empty());
    let ctx = Context {
        topics: &c.topics,
        refresh: false,
        now_ms: c.now,
        max_size: MAX_SIZE_DEFAULT,
        initialize_retry_ms: INITIALIZE_RETRY_INTERVAL_MS_DEFAULT,
        initializing_since: &InitializingSince::new(),
    };
    assert!(heartbeat(&loaded, &at("m1", 1), &ctx)
        .unwrap()
        .initialize
        .is_some());
}

#[test]
fn new_partitions_are_initialized_then_assigned() {
    let mut c = Coordinator::new(&[("t", T, 1)]);
    c.join_and_settle("m1", &["t"]);
    let epoch = c.g.group_epoch;
    c.topics = image(&[("t", T, 3)]);
    c.refresh = true;
    let beat = c.beat(at("m1", epoch)).unwrap();
    assert_eq!(c.g.group_epoch, epoch + 1, "the metadata hash moved");
    let req = beat.initialize.expect("the new partitions");
    assert_eq!(req.topics[&T].1, BTreeSet::from([1, 2]));
    c.initialized(&req);
    let e = c.g.members["m1"].member_epoch;
    let beat = c.beat(at("m1", e)).unwrap();
    assert_eq!(beat.result.assignment, Some(vec![(T, vec![0, 1, 2])]));
}

#[test]
fn a_reloaded_group_is_the_same_group() {
    let mut c = Coordinator::new(&[("t", T, 2), ("u", U, 1)]);
    c.join_and_settle("m1", &["t", "u"]);
    c.join_and_settle("m2", &["t"]);
    c.beat(at("m2", -1)).unwrap();
    let loaded = c.reload();
    assert_eq!(
        format!("{:?}", loaded.members),
        format!("{:?}", c.g.members)
    );
    assert_eq!(loaded.target, c.g.target);
    assert_eq!(loaded.state_partitions, c.g.state_partitions);
    assert_eq!(
        (
            loaded.group_epoch,
            loaded.assignment_epoch,
            loaded.metadata_hash
        ),
        (c.g.group_epoch, c.g.assignment_epoch, c.g.metadata_hash)
    );
    // The group's tombstones leave nothing behind but the group epoch's, which the
    // caller turns into the group's removal.
    let mut g = loaded.clone();
    for (k, v) in tombstones(&loaded) {
        if k == ShareKey::Metadata {
            break;
        }
        g.replay(k, v, &c.topics).unwrap();
    }
    assert!(g.members.is_empty() && g.target.is_empty() && g.state_partitions.is_empty());
}

#[test]
fn a_member_rejoining_with_epoch_0_gets_its_assignment_again() {
    let mut c = Coordinator::new(&[("t", T, 1)]);
    c.join_and_settle("m1", &["t"]);
    assert_eq!(partitions_of(&c, "m1", "t"), BTreeSet::from([0]));
    // A restarted broker loads the group from its records; the client joins again.
    c.g = c.reload();
    c.refresh = true;
    let again = c.beat(join("m1", &["t"])).unwrap();
    assert_eq!(again.result.assignment, Some(vec![(T, vec![0])]));
}
