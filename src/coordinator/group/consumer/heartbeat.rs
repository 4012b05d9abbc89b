//! A heartbeat, a leave or an expiry: read the group, return the records of what
//! changes and the answer. Nothing here changes the group; `replay.rs` does once the
//! records are written. The steps and their records follow Kafka's
//! `GroupMetadataManager.consumerGroupHeartbeat`:
//!
//! 1. the member: found, created, or (static membership) taking over from the instance
//!    that left with epoch -2; its metadata record when it changed;
//! 2. its regular expression: resolved when the group first sees it (and all of the
//!    group's again when the topics changed), a record per resolution;
//! 3. the partition counts of the subscribed topics and the group epoch, bumped when
//!    the assignment depends on something new;
//! 4. a new target assignment when the group epoch moved past the assignment epoch;
//! 5. the member's next step towards its target (`reconcile.rs`).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};

use kafka_protocol::error::ResponseError;

use super::assignor::assign;
use super::reconcile::reconcile;
use super::records::{
    current_assignment_record, member_metadata, member_record, member_tombstones,
    partition_metadata_record, regex_record, target_record, ConsumerRecords,
};
use super::{
    is_subset, member_topics, Assignment, ConsumerGroup, ConsumerMember, Heartbeat,
    HeartbeatResult, RegexCache, ResolvedRegexes, TopicImage, LEAVE_EPOCH, STATIC_LEAVE_EPOCH,
};
use crate::coordinator::group::records::consumer::{ConsumerKey, ConsumerValue};

/// What the coordinator knows beside the group when a heartbeat arrives.
pub struct Context<'a> {
    pub topics: &'a TopicImage,
    pub regexes: &'a mut RegexCache,
    /// The topics changed since the group's subscriptions were last resolved.
    pub refresh: bool,
    /// The member must be sent its assignment whatever changed (after a load).
    pub resend: bool,
    pub now_ms: i64,
}

/// What a heartbeat writes and answers, and what the coordinator keeps beside it.
pub struct Beat {
    pub records: ConsumerRecords,
    pub result: HeartbeatResult,
    /// The member is left with partitions to revoke, newly (its rebalance timeout
    /// starts now) or still.
    pub revoking: Option<Revoking>,
    pub rebalance_timeout_ms: i32,
    /// A static member this one took over from.
    pub replaced: Option<String>,
    /// The member left the group (or left for now, as a static member).
    pub left: bool,
    /// The answer carries the member's assignment.
    pub sent_assignment: bool,
    /// The subscriptions were resolved against the current topics.
    pub refreshed: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Revoking {
    Started,
    Continues,
}

impl Beat {
    fn with_records(self, records: ConsumerRecords) -> Beat {
        Beat { records, ..self }
    }

    fn left(records: ConsumerRecords, member_id: &str, epoch: i32) -> Beat {
        Beat {
            records,
            result: HeartbeatResult {
                member_id: member_id.to_string(),
                member_epoch: epoch,
                assignment: None,
            },
            revoking: None,
            rebalance_timeout_ms: 0,
            replaced: None,
            left: true,
            sent_assignment: false,
            refreshed: false,
        }
    }
}

/// A heartbeat that stays in the group (member epoch 0 to join, or the current one):
/// Kafka's `consumerGroupHeartbeat`, one function per step.
pub fn heartbeat(
    g: &ConsumerGroup,
    hb: &Heartbeat,
    mut ctx: Context<'_>,
) -> Result<Beat, ResponseError> {
    let joining = hb.member_epoch == 0;
    if joining && hb.subscribed.is_none() && hb.subscribed_regex.is_none() {
        return Err(ResponseError::InvalidRequest);
    }
    let topics = ctx.topics;
    let owned = hb.owned.as_ref().map(|o| owned_by_name(o, topics));
    let mut records = ConsumerRecords::new();

    let found = find_member(g, hb, owned.as_ref())?;
    let change = update_member(g, hb, &found, topics, &mut records)?;
    let (regexes, regexes_moved) = update_regexes(g, &change, &mut ctx, &mut records)?;
    let mut bump = change.bump || regexes_moved;
    let metadata = match bump || ctx.refresh {
        true => update_subscription_metadata(g, &change, &regexes, topics, &mut records),
        false => Cow::Borrowed(&g.metadata),
    };
    bump |= *metadata != g.metadata;
    let group_epoch = g.group_epoch + i32::from(bump);
    if bump {
        records.push((
            ConsumerKey::Metadata,
            Some(ConsumerValue::Metadata { epoch: group_epoch }),
        ));
    }
    let (assignment_epoch, target) = match group_epoch > g.assignment_epoch {
        true => update_target_assignment(
            g,
            &change,
            &regexes,
            &metadata,
            group_epoch,
            topics,
            &mut records,
        ),
        false => {
            let mine = change.previous_target(g, &change.now.member_id);
            (
                g.assignment_epoch,
                mine.map_or(Cow::Owned(Assignment::new()), Cow::Borrowed),
            )
        }
    };
    let next = Next {
        assignment_epoch,
        target,
        owned,
        lost_response: found.lost_response,
    };
    Ok(maybe_reconcile(g, hb, change, next, &ctx, &mut records).with_records(records))
}

/// The member as replay has it before this heartbeat's own changes (`before`), the one
/// it becomes (`now`), and whether that alone moves the group epoch.
struct MemberChange<'g> {
    before: Option<Cow<'g, ConsumerMember>>,
    now: ConsumerMember,
    /// The static member this one takes over from.
    replaced: Option<String>,
    /// A new member or a new subscription: the group epoch moves.
    bump: bool,
}

impl<'g> MemberChange<'g> {
    /// Whether `id` is this member (or the one it replaces), whose place is being rewritten.
    fn is_changing(&self, id: &str) -> bool {
        id == self.now.member_id || self.replaced.as_deref() == Some(id)
    }

    /// The other members, as they stay.
    fn others<'a>(&'a self, g: &'g ConsumerGroup) -> impl Iterator<Item = &'g ConsumerMember> + 'a {
        g.members
            .values()
            .filter(|o| !self.is_changing(&o.member_id))
    }

    /// A member's target before this heartbeat (this member's is the replaced one's).
    fn previous_target(&self, g: &'g ConsumerGroup, id: &str) -> Option<&'g Assignment> {
        let id = match &self.replaced {
            Some(old) if id == self.now.member_id => old.as_str(),
            _ => id,
        };
        g.target.get(id)
    }
}

/// Step 1: the member found, created, or taking over a static member's place; its
/// metadata record when it changed.
fn update_member<'g>(
    g: &'g ConsumerGroup,
    hb: &Heartbeat,
    found: &Found<'g>,
    topics: &TopicImage,
    records: &mut ConsumerRecords,
) -> Result<MemberChange<'g>, ResponseError> {
    let before: Option<Cow<ConsumerMember>> = match (found.replaced, found.current) {
        (Some(old), _) => Some(Cow::Owned(take_over(
            g,
            old,
            &hb.member_id,
            topics,
            records,
        ))),
        (None, current) => current.map(Cow::Borrowed),
    };
    // A member (re)joining starts afresh; whatever it had is reassigned.
    let fresh = hb.member_epoch == 0 && found.replaced.is_none();
    let mut now = match (&before, fresh) {
        (_, true) => ConsumerMember {
            member_id: hb.member_id.clone(),
            ..Default::default()
        },
        (Some(b), false) => b.as_ref().clone(),
        (None, false) => return Err(ResponseError::UnknownMemberId),
    };
    apply_request(&mut now, hb);
    if before
        .as_deref()
        .is_none_or(|b| member_metadata(b) != member_metadata(&now))
    {
        records.push(member_record(&now));
    }
    let bump = fresh
        || before
            .as_deref()
            .is_some_and(|b| b.subscribed != now.subscribed);
    Ok(MemberChange {
        before,
        now,
        replaced: found.replaced.map(|r| r.member_id.clone()),
        bump,
    })
}

/// A new static instance takes the old one's place: its subscription, target and
/// partitions, at epoch 0 (Kafka's `replaceMember`).
fn take_over(
    g: &ConsumerGroup,
    old: &ConsumerMember,
    member_id: &str,
    topics: &TopicImage,
    records: &mut ConsumerRecords,
) -> ConsumerMember {
    let copy = ConsumerMember {
        member_id: member_id.to_string(),
        member_epoch: 0,
        previous_epoch: 0,
        ..old.clone()
    };
    let old_target = g.target.get(&old.member_id).cloned().unwrap_or_default();
    records.extend(member_tombstones(&old.member_id));
    records.push(member_record(&copy));
    records.push(target_record(&copy.member_id, &old_target, topics));
    records.push(current_assignment_record(
        &copy,
        Some(&old_target),
        g.assignment_epoch,
        topics,
    ));
    copy
}

/// Step 2: the member's regular expression resolved when the group first sees it (and
/// every one of the group's again when the topics changed), a record per resolution.
/// Also answers whether the group epoch must move for it.
fn update_regexes<'g>(
    g: &'g ConsumerGroup,
    change: &MemberChange<'_>,
    ctx: &mut Context<'_>,
    records: &mut ConsumerRecords,
) -> Result<(Cow<'g, ResolvedRegexes>, bool), ResponseError> {
    let mut regexes = Cow::Borrowed(&g.regexes);
    let mut moved = false;
    let old_regex = change
        .before
        .as_deref()
        .and_then(|b| b.subscribed_regex.as_ref());
    if old_regex != change.now.subscribed_regex.as_ref() {
        moved = true;
        if let Some(old) = old_regex {
            let others = change
                .others(g)
                .any(|o| o.subscribed_regex.as_ref() == Some(old));
            if !others && regexes.contains_key(old) {
                records.push((ConsumerKey::RegularExpression(old.clone()), None));
                regexes.to_mut().remove(old);
            }
        }
        if let Some(new) = &change.now.subscribed_regex {
            if !regexes.contains_key(new) {
                let matched = ctx.regexes.resolve(new, ctx.topics)?;
                records.push(regex_record(new, &matched, ctx.now_ms));
                regexes.to_mut().insert(new.clone(), matched);
            }
        }
    }
    if ctx.refresh {
        let stale: Vec<(String, Vec<String>)> = regexes
            .iter()
            .filter_map(|(regex, matched)| {
                let now = ctx.regexes.resolve(regex, ctx.topics).ok()?;
                (now != *matched).then(|| (regex.clone(), now))
            })
            .collect();
        for (regex, matched) in stale {
            records.push(regex_record(&regex, &matched, ctx.now_ms));
            regexes.to_mut().insert(regex, matched);
            moved = true;
        }
    }
    Ok((regexes, moved))
}

/// Step 3: the partition counts of every topic the group subscribes to, with a record
/// when they changed (which moves the group epoch).
fn update_subscription_metadata<'g>(
    g: &'g ConsumerGroup,
    change: &MemberChange<'_>,
    regexes: &ResolvedRegexes,
    topics: &TopicImage,
    records: &mut ConsumerRecords,
) -> Cow<'g, BTreeMap<String, i32>> {
    let mut subscribed: HashSet<&str> = HashSet::new();
    for o in change.others(g).chain([&change.now]) {
        subscribed.extend(member_topics(o, regexes));
    }
    let now: BTreeMap<String, i32> = subscribed
        .into_iter()
        .filter_map(|t| Some((t.to_string(), topics.partitions(t)?)))
        .collect();
    if now == g.metadata {
        return Cow::Borrowed(&g.metadata);
    }
    records.push(partition_metadata_record(&now, topics));
    Cow::Owned(now)
}

/// Step 4: a new target assignment for the group epoch, a record per member whose
/// target changed; answers the assignment epoch and this member's target.
fn update_target_assignment<'g>(
    g: &'g ConsumerGroup,
    change: &MemberChange<'_>,
    regexes: &ResolvedRegexes,
    metadata: &BTreeMap<String, i32>,
    group_epoch: i32,
    topics: &TopicImage,
    records: &mut ConsumerRecords,
) -> (i32, Cow<'g, Assignment>) {
    let m = &change.now;
    let subscriptions: BTreeMap<String, HashSet<&str>> = change
        .others(g)
        .chain([m])
        .map(|o| (o.member_id.clone(), member_topics(o, regexes).collect()))
        .collect();
    let previous: Cow<BTreeMap<String, Assignment>> = match &change.replaced {
        None => Cow::Borrowed(&g.target),
        Some(old) => {
            let mut t = g.target.clone();
            if let Some(a) = t.remove(old) {
                t.insert(m.member_id.clone(), a);
            }
            Cow::Owned(t)
        }
    };
    let mut computed = assign(&subscriptions, metadata, &previous);
    for (id, t) in &computed {
        if change.previous_target(g, id) != Some(t) {
            records.push(target_record(id, t, topics));
        }
    }
    records.push((
        ConsumerKey::TargetAssignmentMetadata,
        Some(ConsumerValue::TargetAssignmentMetadata {
            assignment_epoch: group_epoch,
        }),
    ));
    let mine = computed.remove(&m.member_id).unwrap_or_default();
    (group_epoch, Cow::Owned(mine))
}

/// What step 5 works towards.
struct Next<'g> {
    assignment_epoch: i32,
    target: Cow<'g, Assignment>,
    /// What the member reports owning, by name (None: not sent).
    owned: Option<Assignment>,
    lost_response: bool,
}

/// Step 5: the member's next step towards its target (`reconcile.rs`), its record when
/// its state changed, and the answer (with its assignment when it must be sent).
fn maybe_reconcile(
    g: &ConsumerGroup,
    hb: &Heartbeat,
    change: MemberChange<'_>,
    next: Next<'_>,
    ctx: &Context<'_>,
    records: &mut ConsumerRecords,
) -> Beat {
    let topics = ctx.topics;
    let updated = reconcile(
        g,
        &change.now,
        change.replaced.as_deref(),
        &next.target,
        next.assignment_epoch,
        next.owned.as_ref(),
    );
    let before = change.before.as_deref();
    let state_changed = before.is_none_or(|b| {
        (
            b.member_epoch,
            b.previous_epoch,
            &b.assigned,
            &b.pending_revocation,
        ) != (
            updated.member_epoch,
            updated.previous_epoch,
            &updated.assigned,
            &updated.pending_revocation,
        )
    });
    if state_changed {
        records.push(current_assignment_record(
            &updated,
            Some(&next.target),
            next.assignment_epoch,
            topics,
        ));
    }
    let revoking = match before {
        _ if updated.pending_revocation.is_empty() => None,
        Some(b) if b.pending_revocation == updated.pending_revocation => Some(Revoking::Continues),
        _ => Some(Revoking::Started),
    };
    let full_request = hb.rebalance_timeout_ms != -1
        && (hb.subscribed.is_some() || hb.subscribed_regex.is_some())
        && hb.owned.is_some();
    let send = hb.member_epoch == 0
        || full_request
        || next.lost_response
        || ctx.resend
        || before.is_none_or(|b| b.assigned != updated.assigned);
    Beat {
        records: ConsumerRecords::new(),
        result: HeartbeatResult {
            member_id: updated.member_id.clone(),
            member_epoch: updated.member_epoch,
            assignment: send.then(|| assignment_by_id(&updated.assigned, topics)),
        },
        revoking,
        rebalance_timeout_ms: updated.rebalance_timeout_ms,
        replaced: change.replaced,
        left: false,
        sent_assignment: send,
        refreshed: ctx.refresh,
    }
}

/// Who a heartbeat is from, after Kafka's checks.
struct Found<'g> {
    /// The member as the group has it; None for a new one.
    current: Option<&'g ConsumerMember>,
    /// The static member a joining instance takes over from.
    replaced: Option<&'g ConsumerMember>,
    /// One epoch behind with nothing it should not own: the last answer was lost.
    lost_response: bool,
}

fn find_member<'g>(
    g: &'g ConsumerGroup,
    hb: &Heartbeat,
    owned: Option<&Assignment>,
) -> Result<Found<'g>, ResponseError> {
    let joining = hb.member_epoch == 0;
    let existing = match hb.instance_id.as_deref() {
        // A static member: its instance id is what counts.
        Some(instance) => match (g.static_member(instance), joining) {
            (None, true) => g.members.get(&hb.member_id),
            (Some(s), true) => {
                // Its instance id is taken until the member holding it leaves with
                // epoch -2 (or its session expires).
                if s.member_epoch != STATIC_LEAVE_EPOCH {
                    tracing::info!(member = %hb.member_id, instance,
                        owner = %s.member_id, "instance id is still in use");
                    return Err(ResponseError::UnreleasedInstanceId);
                }
                return Ok(Found {
                    current: None,
                    replaced: Some(s),
                    lost_response: false,
                });
            }
            (None, false) => return Err(ResponseError::UnknownMemberId),
            (Some(s), false) => {
                if s.member_id != hb.member_id {
                    return Err(ResponseError::FencedInstanceId);
                }
                Some(s)
            }
        },
        None if joining => g.members.get(&hb.member_id),
        None => Some(
            g.members
                .get(&hb.member_id)
                .ok_or(ResponseError::UnknownMemberId)?,
        ),
    };
    let mut lost_response = false;
    if let (Some(m), false) = (existing, joining) {
        if hb.member_epoch != m.member_epoch {
            lost_response = hb.member_epoch == m.previous_epoch
                && hb.member_epoch < m.member_epoch
                && owned.is_some_and(|o| is_subset(o, &m.assigned));
            if !lost_response {
                return Err(ResponseError::FencedMemberEpoch);
            }
        }
    }
    Ok(Found {
        current: existing,
        replaced: None,
        lost_response,
    })
}

/// The request's fields onto the member: those sent replace what it had.
fn apply_request(m: &mut ConsumerMember, hb: &Heartbeat) {
    m.client_id = hb.client_id.clone();
    m.client_host = hb.client_host.clone();
    if let Some(i) = &hb.instance_id {
        m.instance_id = Some(i.clone());
    }
    if let Some(r) = &hb.rack_id {
        m.rack_id = Some(r.clone());
    }
    if hb.rebalance_timeout_ms > 0 {
        m.rebalance_timeout_ms = hb.rebalance_timeout_ms;
    }
    if let Some(s) = &hb.subscribed {
        m.subscribed = s.clone();
    }
    if let Some(r) = &hb.subscribed_regex {
        m.subscribed_regex = Some(r.clone()).filter(|r| !r.is_empty());
    }
}

/// A heartbeat with epoch -1 (leave) or -2 (a static member leaving for now).
pub fn leave(
    g: &ConsumerGroup,
    hb: &Heartbeat,
    topics: &TopicImage,
) -> Result<Beat, ResponseError> {
    let member = match hb.instance_id.as_deref() {
        None if hb.member_epoch == STATIC_LEAVE_EPOCH => {
            return Err(ResponseError::InvalidRequest);
        }
        None => g
            .members
            .get(&hb.member_id)
            .ok_or(ResponseError::UnknownMemberId)?,
        Some(instance) => {
            let s = g
                .static_member(instance)
                .ok_or(ResponseError::UnknownMemberId)?;
            if s.member_id != hb.member_id {
                return Err(ResponseError::FencedInstanceId);
            }
            s
        }
    };
    if hb.member_epoch == STATIC_LEAVE_EPOCH {
        // It keeps its place and partitions until its session expires, so a new
        // instance can take over without a rebalance.
        let left = ConsumerMember {
            member_epoch: STATIC_LEAVE_EPOCH,
            pending_revocation: Assignment::new(),
            ..member.clone()
        };
        let record = current_assignment_record(
            &left,
            g.target.get(&left.member_id),
            g.assignment_epoch,
            topics,
        );
        return Ok(Beat::left(
            vec![record],
            &member.member_id,
            STATIC_LEAVE_EPOCH,
        ));
    }
    let records = remove(g, &[member.member_id.as_str()], topics);
    Ok(Beat::left(records, &member.member_id, LEAVE_EPOCH))
}

/// Members whose session or revocation timeout ran out leave the group.
pub fn expire(g: &ConsumerGroup, member_ids: &[&str], topics: &TopicImage) -> ConsumerRecords {
    let present: Vec<&str> = member_ids
        .iter()
        .copied()
        .filter(|id| g.members.contains_key(*id))
        .collect();
    if present.is_empty() {
        return ConsumerRecords::new();
    }
    remove(g, &present, topics)
}

/// The records that take members out: their tombstones, those of regexes nobody else
/// uses, the partition counts without them, and one group epoch bump.
fn remove(g: &ConsumerGroup, ids: &[&str], topics: &TopicImage) -> ConsumerRecords {
    let mut records = ConsumerRecords::new();
    for id in ids {
        records.extend(member_tombstones(id));
    }
    let staying = || {
        g.members
            .values()
            .filter(|o| !ids.contains(&o.member_id.as_str()))
    };
    for regex in g.regexes.keys() {
        if !staying().any(|o| o.subscribed_regex.as_ref() == Some(regex)) {
            records.push((ConsumerKey::RegularExpression(regex.clone()), None));
        }
    }
    let mut subscribed: HashSet<&str> = HashSet::new();
    for o in staying() {
        subscribed.extend(member_topics(o, &g.regexes));
    }
    let metadata: BTreeMap<String, i32> = subscribed
        .into_iter()
        .filter_map(|t| Some((t.to_string(), topics.partitions(t)?)))
        .collect();
    if metadata != g.metadata {
        records.push(partition_metadata_record(&metadata, topics));
    }
    records.push((
        ConsumerKey::Metadata,
        Some(ConsumerValue::Metadata {
            epoch: g.group_epoch + 1,
        }),
    ));
    records
}

/// Owned partitions as reported (by topic id) to names; unknown ids are dropped.
fn owned_by_name(owned: &[(uuid::Uuid, Vec<i32>)], topics: &TopicImage) -> Assignment {
    let mut out = Assignment::new();
    for (id, ps) in owned {
        if let Some(name) = topics.topic_name(*id) {
            out.entry(name.to_string())
                .or_default()
                .extend(ps.iter().copied());
        }
    }
    out
}

fn assignment_by_id(a: &Assignment, topics: &TopicImage) -> Vec<(uuid::Uuid, Vec<i32>)> {
    a.iter()
        .filter_map(|(name, ps)| Some((topics.topic_id(name)?, ps.iter().copied().collect())))
        .collect()
}
