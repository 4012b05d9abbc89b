//! The group state machine, transition by transition. Time is an explicit `Instant`,
//! so timeouts are tested by passing a later one.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;
use tokio::time::{Duration, Instant};

use super::*;

const SESSION_MS: i32 = 10_000;
const REBALANCE_MS: i32 = 30_000;

fn cfg() -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    }
}

fn req(member_id: &str, protocols: &[(&str, &str)]) -> JoinRequest {
    JoinRequest {
        member_id: member_id.into(),
        group_instance_id: None,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: SESSION_MS,
        rebalance_timeout_ms: REBALANCE_MS,
        protocol_type: "consumer".into(),
        protocols: protocols
            .iter()
            .map(|(n, m)| (n.to_string(), Bytes::from(m.to_string())))
            .collect(),
        require_known_member_id: true,
        supports_skip_assignment: true,
    }
}

fn range(member_id: &str) -> JoinRequest {
    req(member_id, &[("range", "meta")])
}

fn after(t: Instant, ms: u64) -> Instant {
    t + Duration::from_millis(ms)
}

fn done<T>(o: Outcome<T>) -> T {
    match o {
        Outcome::Done(r) => r,
        Outcome::Wait(_) => panic!("expected an immediate answer"),
    }
}

fn waiting<T>(o: Outcome<T>) -> oneshot::Receiver<T> {
    match o {
        Outcome::Wait(rx) => rx,
        Outcome::Done(_) => panic!("expected to wait"),
    }
}

fn answered<T>(rx: &mut oneshot::Receiver<T>) -> T {
    rx.try_recv().expect("answered")
}

/// The leader's SyncGroup: the answers go out once the group metadata is "written".
fn leader_sync(
    g: &mut ClassicGroup,
    id: &str,
    generation: i32,
    assignments: Vec<(String, Bytes)>,
    now: Instant,
) -> SyncResult {
    let mut rx = waiting(g.sync(id, None, generation, (None, None), assignments, now, 0));
    deliver(g);
    answered(&mut rx)
}

fn deliver(g: &mut ClassicGroup) {
    for (tx, r) in g.take_effects().sync_answers {
        let _ = tx.send(r);
    }
}

/// A new dynamic member: MEMBER_ID_REQUIRED, then the join with its id.
fn join_new(g: &mut ClassicGroup, now: Instant) -> (String, oneshot::Receiver<JoinResult>) {
    let first = done(g.join(range(""), &cfg(), now, 0));
    assert_eq!(first.error, Some(ResponseError::MemberIdRequired));
    let id = first.member_id.clone();
    assert!(id.starts_with("client-"));
    (id.clone(), waiting(g.join(range(&id), &cfg(), now, 0)))
}

/// A Stable group of two members with assignments "a1" and "a2"; returns their ids
/// (leader first).
fn stable_pair(g: &mut ClassicGroup, now: Instant) -> (String, String) {
    let (a, mut ja) = join_new(g, now);
    // One member joined and none other is known: the join completes at once.
    let ra = answered(&mut ja);
    assert_eq!(ra.generation_id, 1);
    leader_sync(g, &a, 1, vec![], now);
    assert_eq!(g.state, GroupState::Stable);
    // A second member joins: rebalance to generation 2.
    let (b, mut jb) = join_new(g, now);
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert!(jb.try_recv().is_err(), "waits for the leader to rejoin");
    let mut ja = waiting(g.join(range(&a), &cfg(), now, 0));
    let (ra, rb) = (answered(&mut ja), answered(&mut jb));
    assert_eq!((ra.generation_id, rb.generation_id), (2, 2));
    assert_eq!(ra.leader, a);
    assert_eq!(ra.members.len(), 2, "the leader learns every member");
    assert!(rb.members.is_empty());
    assert_eq!(g.state, GroupState::CompletingRebalance);
    let mut sb = waiting(g.sync(&b, None, 2, (None, None), vec![], now, 0));
    let assignments = vec![
        (a.clone(), Bytes::from("a1")),
        (b.clone(), Bytes::from("a2")),
    ];
    let mut sa = waiting(g.sync(
        &a,
        None,
        2,
        (Some("consumer"), Some("range")),
        assignments,
        now,
        0,
    ));
    assert_eq!(g.state, GroupState::Stable);
    let effects = g.take_effects();
    let record = effects.record.expect("group metadata is written");
    assert_eq!(record.generation, 2);
    assert_eq!(record.members.len(), 2);
    assert_eq!(effects.sync_answers.len(), 2, "answers wait for the write");
    for (tx, r) in effects.sync_answers {
        let _ = tx.send(r);
    }
    assert_eq!(answered(&mut sa).assignment, Bytes::from("a1"));
    assert_eq!(answered(&mut sb).assignment, Bytes::from("a2"));
    (a, b)
}

#[test]
fn two_members_join_sync_and_heartbeat() {
    let now = Instant::now();
    let mut g = ClassicGroup::new("g", 0);
    let (a, b) = stable_pair(&mut g, now);
    assert_eq!(g.heartbeat(&a, None, 2, now), None);
    assert_eq!(g.heartbeat(&b, None, 2, now), None);
    assert_eq!(
        g.heartbeat(&b, None, 1, now),
        Some(ResponseError::IllegalGeneration)
    );
    assert_eq!(
        g.heartbeat("nobody", None, 2, now),
        Some(ResponseError::UnknownMemberId)
    );
    // A late SyncGroup in Stable gets the stored assignment.
    let r = done(g.sync(&b, None, 2, (None, None), vec![], now, 0));
    assert_eq!(r.assignment, Bytes::from("a2"));
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
}

#[test]
fn session_expiry_rebalances_the_others() {
    let t0 = Instant::now();
    let mut g = ClassicGroup::new("g", 0);
    let (a, b) = stable_pair(&mut g, t0);
    let t1 = after(t0, SESSION_MS as u64 / 2);
    assert_eq!(g.heartbeat(&a, None, 2, t1), None);
    g.tick(after(t0, SESSION_MS as u64 + 1), 0);
    assert!(!g.members.contains_key(&b), "b stopped heartbeating");
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert_eq!(
        g.heartbeat(&a, None, 2, after(t0, SESSION_MS as u64 + 2)),
        Some(ResponseError::RebalanceInProgress)
    );
    // The survivor rejoins; it is the only member, so the rebalance completes at once.
    let mut ja = waiting(g.join(range(&a), &cfg(), after(t0, SESSION_MS as u64 + 3), 0));
    let r = answered(&mut ja);
    assert_eq!((r.generation_id, r.leader.as_str()), (3, a.as_str()));
    assert_eq!(r.members.len(), 1);
}

#[test]
fn rebalance_timeout_drops_members_that_do_not_rejoin() {
    let t0 = Instant::now();
    let mut g = ClassicGroup::new("g", 0);
    let (a, b) = stable_pair(&mut g, t0);
    // A third member's arrival starts a rebalance; only it and a rejoin.
    let (_c, mut jc) = join_new(&mut g, t0);
    let mut ja = waiting(g.join(range(&a), &cfg(), t0, 0));
    // b keeps heartbeating but never rejoins.
    let t1 = after(t0, REBALANCE_MS as u64 - 1);
    assert_eq!(
        g.heartbeat(&b, None, 2, t1),
        Some(ResponseError::RebalanceInProgress)
    );
    g.tick(t1, 0);
    assert!(jc.try_recv().is_err());
    g.tick(after(t0, REBALANCE_MS as u64), 0);
    assert!(!g.members.contains_key(&b));
    let (ra, rc) = (answered(&mut ja), answered(&mut jc));
    assert_eq!((ra.generation_id, rc.generation_id), (3, 3));
    assert_eq!(ra.members.len(), 2);
}

#[test]
fn initial_rebalance_delay_waits_for_more_members() {
    let t0 = Instant::now();
    let mut g = ClassicGroup::new("g", 0);
    g.initial_delay_ms = 3000;
    let (_, mut ja) = join_new(&mut g, t0);
    g.tick(after(t0, 2000), 0);
    assert!(
        ja.try_recv().is_err(),
        "the first rebalance waits the initial delay"
    );
    // A second member at 2 s pushes completion to 5 s.
    let (_, mut jb) = join_new(&mut g, after(t0, 2000));
    g.tick(after(t0, 4000), 0);
    assert!(ja.try_recv().is_err());
    g.tick(after(t0, 5000), 0);
    let (ra, rb) = (answered(&mut ja), answered(&mut jb));
    assert_eq!((ra.generation_id, rb.generation_id), (1, 1));
    assert_eq!(ra.members.len() + rb.members.len(), 2);
}

#[test]
fn protocols_must_overlap_and_the_vote_picks_the_favourite() {
    let now = Instant::now();
    let mut g = ClassicGroup::new("g", 0);
    let mut ra = req("", &[("range", "r"), ("roundrobin", "rr")]);
    ra.require_known_member_id = false;
    let mut ja = waiting(g.join(ra, &cfg(), now, 0));
    let a = answered(&mut ja).member_id;
    leader_sync(&mut g, &a, 1, vec![], now);
    let mut bad = req("", &[("sticky", "s")]);
    bad.require_known_member_id = false;
    let r = done(g.join(bad, &cfg(), now, 0));
    assert_eq!(r.error, Some(ResponseError::InconsistentGroupProtocol));
    let mut other_type = range("");
    other_type.protocol_type = "connect".into();
    let r = done(g.join(other_type, &cfg(), now, 0));
    assert_eq!(r.error, Some(ResponseError::InconsistentGroupProtocol));
    // b prefers roundrobin, c too: roundrobin wins 2 to 1.
    for _ in 0..2 {
        let mut r = req("", &[("roundrobin", "rr"), ("range", "r")]);
        r.require_known_member_id = false;
        let _pending = waiting(g.join(r, &cfg(), now, 0));
    }
    let _pending = waiting(g.join(
        req(&a, &[("range", "r"), ("roundrobin", "rr")]),
        &cfg(),
        now,
        0,
    ));
    assert_eq!(g.state, GroupState::CompletingRebalance);
    assert_eq!(g.protocol.as_deref(), Some("roundrobin"));
}

#[test]
fn unknown_members_and_empty_protocols_are_refused() {
    let now = Instant::now();
    let mut g = ClassicGroup::new("g", 0);
    let r = done(g.join(range("ghost"), &cfg(), now, 0));
    assert_eq!(r.error, Some(ResponseError::UnknownMemberId));
    let r = done(g.join(req("", &[]), &cfg(), now, 0));
    assert_eq!(r.error, Some(ResponseError::InconsistentGroupProtocol));
    let r = done(g.sync("ghost", None, 0, (None, None), vec![], now, 0));
    assert_eq!(r.error, Some(ResponseError::UnknownMemberId));
    assert_eq!(
        g.leave("ghost", None, now, 0),
        Some(ResponseError::UnknownMemberId)
    );
}

#[test]
fn group_max_size_counts_pending_members() {
    let now = Instant::now();
    let mut g = ClassicGroup::new("g", 0);
    let small = GroupConfig {
        max_size: 1,
        ..cfg()
    };
    let r = done(g.join(range(""), &small, now, 0));
    assert_eq!(r.error, Some(ResponseError::MemberIdRequired));
    let r = done(g.join(range(""), &small, now, 0));
    assert_eq!(r.error, Some(ResponseError::GroupMaxSizeReached));
}

#[test]
fn pending_member_ids_expire() {
    let now = Instant::now();
    let mut g = ClassicGroup::new("g", 0);
    let id = done(g.join(range(""), &cfg(), now, 0)).member_id;
    g.tick(after(now, SESSION_MS as u64), 0);
    let r = done(g.join(range(&id), &cfg(), after(now, SESSION_MS as u64), 0));
    assert_eq!(r.error, Some(ResponseError::UnknownMemberId));
}

#[test]
fn leaving_rebalances_and_the_last_one_out_empties_the_group() {
    let now = Instant::now();
    let mut g = ClassicGroup::new("g", 0);
    let (a, b) = stable_pair(&mut g, now);
    assert_eq!(g.leave(&b, None, now, 0), None);
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert_eq!(g.leave(&a, None, now, 0), None);
    assert_eq!(g.state, GroupState::Empty);
    assert_eq!(g.generation_id, 3);
    let record = g.take_effects().record.expect("empty group is written");
    assert!(record.members.is_empty());
    assert_eq!(record.protocol, None);
}

#[test]
fn a_leader_leaving_mid_sync_fails_the_waiting_followers() {
    let now = Instant::now();
    let mut g = ClassicGroup::new("g", 0);
    let (a, b) = stable_pair(&mut g, now);
    let (_c, mut jc) = join_new(&mut g, now);
    let _ja = waiting(g.join(range(&a), &cfg(), now, 0));
    let _jb = waiting(g.join(range(&b), &cfg(), now, 0));
    let gen = answered(&mut jc).generation_id;
    let mut sb = waiting(g.sync(&b, None, gen, (None, None), vec![], now, 0));
    assert_eq!(g.leave(&a, None, now, 0), None);
    assert_eq!(
        answered(&mut sb).error,
        Some(ResponseError::RebalanceInProgress)
    );
    assert_eq!(g.state, GroupState::PreparingRebalance);
}

#[test]
fn sync_timeout_removes_members_that_never_synced() {
    let t0 = Instant::now();
    let mut g = ClassicGroup::new("g", 0);
    let (a, b) = stable_pair(&mut g, t0);
    let _ja = waiting(g.join(range(&a), &cfg(), t0, 0));
    let _jb = waiting(g.join(range(&b), &cfg(), t0, 0));
    assert_eq!(g.state, GroupState::CompletingRebalance);
    let mut sb = waiting(g.sync(&b, None, 3, (None, None), vec![], t0, 0));
    // The leader never syncs.
    g.tick(after(t0, REBALANCE_MS as u64), 0);
    assert!(!g.members.contains_key(&a));
    assert_eq!(
        answered(&mut sb).error,
        Some(ResponseError::RebalanceInProgress)
    );
    assert_eq!(g.state, GroupState::PreparingRebalance);
}

#[test]
fn sync_checks_generation_and_protocol() {
    let now = Instant::now();
    let mut g = ClassicGroup::new("g", 0);
    let (a, _) = stable_pair(&mut g, now);
    let r = done(g.sync(&a, None, 1, (None, None), vec![], now, 0));
    assert_eq!(r.error, Some(ResponseError::IllegalGeneration));
    let r = done(g.sync(&a, None, 2, (None, Some("roundrobin")), vec![], now, 0));
    assert_eq!(r.error, Some(ResponseError::InconsistentGroupProtocol));
}

#[test]
fn a_restarted_static_member_gets_its_assignment_back_without_a_rebalance() {
    let now = Instant::now();
    let mut g = ClassicGroup::new("g", 0);
    let mut ra = range("");
    ra.group_instance_id = Some("i1".into());
    let mut ja = waiting(g.join(ra.clone(), &cfg(), now, 0));
    let a = answered(&mut ja).member_id;
    assert!(a.starts_with("i1-"));
    let assignment = vec![(a.clone(), Bytes::from("p0,p1"))];
    let _pending = waiting(g.sync(&a, Some("i1"), 1, (None, None), assignment, now, 0));
    let _ = g.take_effects();
    assert_eq!(g.state, GroupState::Stable);
    // The process restarts: same instance id, no member id.
    let r = done(g.join(ra, &cfg(), now, 0));
    assert_eq!(r.error, None);
    assert_ne!(r.member_id, a);
    assert_eq!(r.generation_id, 1, "no rebalance");
    assert_eq!(g.state, GroupState::Stable);
    assert!(r.skip_assignment, "the leader keeps its assignment");
    assert!(
        g.take_effects().record.is_some(),
        "the new member id is persisted"
    );
    let s = done(g.sync(&r.member_id, Some("i1"), 1, (None, None), vec![], now, 0));
    assert_eq!(s.assignment, Bytes::from("p0,p1"));
    // The old incarnation is fenced.
    assert_eq!(
        g.heartbeat(&a, Some("i1"), 1, now),
        Some(ResponseError::FencedInstanceId)
    );
}

#[test]
fn static_member_can_leave_by_instance_id() {
    let now = Instant::now();
    let mut g = ClassicGroup::new("g", 0);
    let mut ra = range("");
    ra.group_instance_id = Some("i1".into());
    let _pending = waiting(g.join(ra, &cfg(), now, 0));
    assert_eq!(
        g.leave("", Some("i2"), now, 0),
        Some(ResponseError::UnknownMemberId)
    );
    assert_eq!(g.leave("", Some("i1"), now, 0), None);
    assert_eq!(g.state, GroupState::Empty);
}

#[test]
fn commit_validation_follows_kafka() {
    let now = Instant::now();
    let mut g = ClassicGroup::new("g", 0);
    assert_eq!(g.validate_commit("", None, -1), Ok(()), "standalone commit");
    let (a, _) = stable_pair(&mut g, now);
    assert_eq!(g.validate_commit(&a, None, 2), Ok(()));
    assert_eq!(
        g.validate_commit(&a, None, 1),
        Err(ResponseError::IllegalGeneration)
    );
    assert_eq!(
        g.validate_commit("x", None, 2),
        Err(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        g.validate_commit("", None, -1),
        Err(ResponseError::UnknownMemberId)
    );
    let _pending = waiting(g.join(range(&a), &cfg(), now, 0));
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert_eq!(
        g.validate_commit(&a, None, 2),
        Ok(()),
        "commits allowed while preparing"
    );
}

#[test]
fn restore_brings_back_a_stable_group_whose_members_must_heartbeat() {
    let now = Instant::now();
    let mut g = ClassicGroup::new("g", 0);
    stable_pair(&mut g, now);
    let record = g.to_record();
    let mut r = ClassicGroup::restore("g", record.clone(), now);
    assert_eq!(r.state, GroupState::Stable);
    assert_eq!(r.to_record(), record);
    r.tick(after(now, SESSION_MS as u64), 0);
    assert_eq!(r.state, GroupState::Empty, "nobody came back");
}

/// A member keeps no slice of the JoinGroup frame it joined with: before, its protocol
/// metadata was one, and a member kept the whole frame (a 64 MiB unknown tagged field)
/// for as long as it stayed in the group.
#[test]
fn a_member_keeps_no_join_frame_alive() {
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    use kafka_protocol::messages::JoinGroupRequest;
    use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
    let mut wire = JoinGroupRequest::default()
        .with_group_id(kafka_protocol::messages::GroupId(
            StrBytes::from_static_str("g"),
        ))
        .with_session_timeout_ms(SESSION_MS)
        .with_rebalance_timeout_ms(REBALANCE_MS)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(Bytes::from_static(b"subscription"))]);
    wire.unknown_tagged_fields
        .insert(99, Bytes::from(vec![0u8; 1 << 20]));
    let mut out = bytes::BytesMut::new();
    wire.encode(&mut out, 9).unwrap();
    let (mut frame, alive) = crate::protocol::tracked_frame::tracked(out.to_vec());
    let decoded = JoinGroupRequest::decode(&mut frame, 9).unwrap();
    drop(frame);
    let mut join = req("", &[]);
    join.require_known_member_id = false;
    // The rest of the request goes now; its protocols' metadata are frame slices.
    fn protocols_of(r: JoinGroupRequest) -> Vec<JoinGroupRequestProtocol> {
        r.protocols
    }
    let protocols = protocols_of(decoded);
    join.protocols = protocols
        .into_iter()
        .map(|p| (p.name.to_string(), p.metadata))
        .collect();
    assert!(alive.alive(), "the metadata slices hold the frame");
    let mut g = ClassicGroup::new("g", 0);
    let _wait = g.join(join, &cfg(), Instant::now(), 0);
    assert_eq!(g.members.len(), 1);
    assert!(!alive.alive(), "the JoinGroup frame is gone");
    let member = g.members.values().next().unwrap();
    assert_eq!(
        member.metadata("range"),
        Bytes::from_static(b"subscription")
    );
}

/// 401 members with 1,000 protocols each, all but the last supporting every one: a
/// stranger's join naming 1,000 of them is refused INCONSISTENT_GROUP_PROTOCOL after a
/// look-up per protocol, not a walk over every member's list per protocol (up to 1.5 s
/// a join before).
#[test]
fn a_join_checks_its_protocols_in_time_linear_in_them() {
    let names: Vec<String> = (0..1000).map(|i| format!("protocol-{i}")).collect();
    let protocols = |names: &[String]| -> Vec<(String, Bytes)> {
        names.iter().map(|n| (n.clone(), Bytes::new())).collect()
    };
    let mut g = ClassicGroup::new("g", 0);
    let now = Instant::now();
    for i in 0..401 {
        let mut join = req("", &[]);
        join.require_known_member_id = false;
        // The last member supports protocol-0 only (the group's common protocol).
        join.protocols = match i {
            400 => protocols(&names[..1]),
            _ => protocols(&names),
        };
        let _ = g.join(join, &cfg(), now, 0);
    }
    assert_eq!(g.members.len(), 401);
    let mut stranger = req("", &[]);
    stranger.require_known_member_id = false;
    stranger.protocols = protocols(&names[1..]);
    let started = std::time::Instant::now();
    let answer = done(g.join(stranger, &cfg(), now, 0));
    let took = started.elapsed();
    assert_eq!(answer.error, Some(ResponseError::InconsistentGroupProtocol));
    assert!(
        took < std::time::Duration::from_millis(200),
        "took {took:?}"
    );
    assert_eq!(g.members.len(), 401);
}
