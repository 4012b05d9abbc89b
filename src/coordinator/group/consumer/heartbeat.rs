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
    HeartbeatResult, RegexCache, TopicImage, LEAVE_EPOCH, STATIC_LEAVE_EPOCH,
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

/// A heartbeat that stays in the group (member epoch 0 to join, or the current one).
pub fn heartbeat(
    g: &ConsumerGroup,
    hb: &Heartbeat,
    ctx: Context<'_>,
) -> Result<Beat, ResponseError> {
    let joining = hb.member_epoch == 0;
    if joining && hb.subscribed.is_none() && hb.subscribed_regex.is_none() {
        return Err(ResponseError::InvalidRequest);
    }
    let topics = ctx.topics;
    let owned = hb.owned.as_ref().map(|o| owned_by_name(o, topics));
    let mut records = ConsumerRecords::new();

    // 1. The member as replay has it before this heartbeat's own changes (`before`),
    // and the one it becomes (`m`).
    let found = find_member(g, hb, owned.as_ref())?;
    let replaced = found.replaced.map(|r| r.member_id.clone());
    let before: Option<Cow<ConsumerMember>> = match (&found.replaced, found.current) {
        (Some(old), _) => {
            // The new instance takes the old one's place: its subscription, target and
            // partitions, at epoch 0 (Kafka's `replaceMember`).
            let copy = ConsumerMember {
                member_id: hb.member_id.clone(),
                member_epoch: 0,
                previous_epoch: 0,
                ..(*old).clone()
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
            Some(Cow::Owned(copy))
        }
        (None, current) => current.map(Cow::Borrowed),
    };
    let mut m = match (&before, joining && found.replaced.is_none()) {
        // A member (re)joining starts afresh; whatever it had is reassigned.
        (_, true) => ConsumerMember {
            member_id: hb.member_id.clone(),
            ..Default::default()
        },
        (Some(b), false) => b.as_ref().clone(),
        (None, false) => return Err(ResponseError::UnknownMemberId),
    };
    apply_request(&mut m, hb);
    if before
        .as_deref()
        .is_none_or(|b| member_metadata(b) != member_metadata(&m))
    {
        records.push(member_record(&m));
    }
    let mut bump = (joining && found.replaced.is_none())
        || before
            .as_deref()
            .is_some_and(|b| b.subscribed != m.subscribed);

    // 2. Regular expressions.
    let mut regexes: Cow<BTreeMap<String, Vec<String>>> = Cow::Borrowed(&g.regexes);
    let old_regex = before.as_deref().and_then(|b| b.subscribed_regex.clone());
    let leaving_members = [Some(m.member_id.as_str()), replaced.as_deref()];
    if old_regex != m.subscribed_regex {
        bump = true;
        if let Some(old) = &old_regex {
            let others = g.members.values().any(|o| {
                o.subscribed_regex.as_ref() == Some(old)
                    && !leaving_members.contains(&Some(o.member_id.as_str()))
            });
            if !others && regexes.contains_key(old) {
                records.push((ConsumerKey::RegularExpression(old.clone()), None));
                regexes.to_mut().remove(old);
            }
        }
        if let Some(new) = &m.subscribed_regex {
            if !regexes.contains_key(new) {
                let matched = ctx.regexes.resolve(new, topics)?;
                records.push(regex_record(new, &matched, ctx.now_ms));
                regexes.to_mut().insert(new.clone(), matched);
            }
        }
    }
    if ctx.refresh {
        let stale: Vec<(String, Vec<String>)> = regexes
            .iter()
            .filter_map(|(regex, matched)| {
                let now = ctx.regexes.resolve(regex, topics).ok()?;
                (now != *matched).then(|| (regex.clone(), now))
            })
            .collect();
        for (regex, matched) in stale {
            records.push(regex_record(&regex, &matched, ctx.now_ms));
            regexes.to_mut().insert(regex, matched);
            bump = true;
        }
    }

    // 3. Subscribed partition counts and the group epoch.
    let others = || {
        g.members
            .values()
            .filter(|o| !leaving_members.contains(&Some(o.member_id.as_str())))
    };
    let mut metadata = Cow::Borrowed(&g.metadata);
    if bump || ctx.refresh {
        let mut subscribed: HashSet<&str> = HashSet::new();
        for o in others().chain([&m]) {
            subscribed.extend(member_topics(o, &regexes));
        }
        let now: BTreeMap<String, i32> = subscribed
            .into_iter()
            .filter_map(|t| Some((t.to_string(), topics.partitions(t)?)))
            .collect();
        if now != g.metadata {
            records.push(partition_metadata_record(&now, topics));
            metadata = Cow::Owned(now);
            bump = true;
        }
    }
    let group_epoch = g.group_epoch + i32::from(bump);
    if bump {
        records.push((
            ConsumerKey::Metadata,
            Some(ConsumerValue::Metadata { epoch: group_epoch }),
        ));
    }

    // 4. The target assignment.
    let previous_target = |id: &str| -> Option<&Assignment> {
        match &replaced {
            Some(old) if id == m.member_id => g.target.get(old),
            _ => g.target.get(id),
        }
    };
    let empty = Assignment::new();
    let (assignment_epoch, target) = if group_epoch > g.assignment_epoch {
        let subscriptions: BTreeMap<String, HashSet<&str>> = others()
            .chain([&m])
            .map(|o| (o.member_id.clone(), member_topics(o, &regexes).collect()))
            .collect();
        let previous: Cow<BTreeMap<String, Assignment>> = match &replaced {
            None => Cow::Borrowed(&g.target),
            Some(old) => {
                let mut t = g.target.clone();
                if let Some(a) = t.remove(old) {
                    t.insert(m.member_id.clone(), a);
                }
                Cow::Owned(t)
            }
        };
        let mut computed = assign(&subscriptions, &metadata, &previous);
        for (id, t) in &computed {
            if previous_target(id) != Some(t) {
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
    } else {
        let mine = previous_target(&m.member_id).unwrap_or(&empty);
        (g.assignment_epoch, Cow::Borrowed(mine))
    };

    // 5. The member's next step.
    let updated = reconcile(
        g,
        &m,
        replaced.as_deref(),
        &target,
        assignment_epoch,
        owned.as_ref(),
    );
    let state_changed = before.as_deref().is_none_or(|b| {
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
            Some(&target),
            assignment_epoch,
            topics,
        ));
    }

    let revoking = match before.as_deref() {
        _ if updated.pending_revocation.is_empty() => None,
        Some(b) if b.pending_revocation == updated.pending_revocation => Some(Revoking::Continues),
        _ => Some(Revoking::Started),
    };
    let full_request = hb.rebalance_timeout_ms != -1
        && (hb.subscribed.is_some() || hb.subscribed_regex.is_some())
        && hb.owned.is_some();
    let send = joining
        || full_request
        || found.lost_response
        || ctx.resend
        || before
            .as_deref()
            .is_none_or(|b| b.assigned != updated.assigned);
    Ok(Beat {
        records,
        result: HeartbeatResult {
            member_id: updated.member_id.clone(),
            member_epoch: updated.member_epoch,
            assignment: send.then(|| assignment_by_id(&updated.assigned, topics)),
        },
        revoking,
        rebalance_timeout_ms: updated.rebalance_timeout_ms,
        replaced,
        left: false,
        sent_assignment: send,
        refreshed: ctx.refresh,
    })
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
