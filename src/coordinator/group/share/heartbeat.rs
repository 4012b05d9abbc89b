//! A heartbeat, a leave, an expiry or the answer to an initialization: read the group,
//! return the records of what changes and the answer. Nothing here changes the group;
//! `replay.rs` does once the records are written. The steps and their records follow
//! Kafka's `GroupMetadataManager.shareGroupHeartbeat`:
//!
//! 1. the member: found or created; its metadata record (10) when it changed;
//! 2. the group epoch (11, with the metadata hash), bumped when a subscription changed,
//!    the subscribed topics' metadata changed, or initialized partitions wait to be
//!    assigned;
//! 3. a new target assignment (13 per member whose target changed, then 12) when the
//!    group epoch moved past the assignment epoch;
//! 4. the member takes its target at once (14): share members revoke nothing;
//! 5. subscribed partitions without share-group state become initializing (15), and the
//!    caller is asked to send InitializeShareGroupState for them.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::assignor::assign;
use super::{
    metadata_hash, Assignment, InitializeRequest, InitializingSince, ShareGroup, ShareHeartbeat,
    ShareHeartbeatResult, ShareMember, ShareRecords, StatePartitions, TopicImage,
    TopicPartitionsById, LEAVE_EPOCH,
};
use crate::coordinator::group::records::consumer::TopicPartitions;
use crate::coordinator::group::records::share::{
    ShareCurrentAssignment, ShareKey, ShareMemberMetadata, ShareValue, StatePartitionMetadata,
    TopicInfo, TopicPartitionsInfo,
};

/// Kafka's `MemberState.STABLE`, the only state a share member is recorded in.
const STABLE: i8 = 0;

/// What the coordinator knows beside the group when a heartbeat arrives.
pub struct Context<'a> {
    pub topics: &'a TopicImage,
    /// The topics changed since the group's metadata hash was last computed.
    pub refresh: bool,
    pub now_ms: i64,
    /// `group.share.max.size`.
    pub max_size: usize,
    /// `group.share.initialize.retry.interval.ms`.
    pub initialize_retry_ms: i64,
    /// When each of the group's initializing topics was last asked for.
    pub initializing_since: &'a InitializingSince,
}

/// What a heartbeat writes and answers.
#[derive(Debug)]
pub struct ShareBeat {
    pub records: ShareRecords,
    pub result: ShareHeartbeatResult,
    /// InitializeShareGroupState to send once the records are written.
    pub initialize: Option<InitializeRequest>,
    /// The member left the group.
    pub left: bool,
}

/// The checks Kafka makes on a ShareGroupHeartbeat before the group is looked at
/// (`throwIfShareGroupHeartbeatRequestIsInvalid`).
pub fn validate(group_id: &str, hb: &ShareHeartbeat) -> Result<(), (ResponseError, &'static str)> {
    let invalid = |why| Err((ResponseError::InvalidRequest, why));
    if group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if hb.member_id.trim().is_empty() {
        return invalid("MemberId can't be empty.");
    }
    match hb.member_epoch {
        0 if hb.subscribed.as_ref().is_none_or(|s| s.is_empty()) => {
            invalid("SubscribedTopicNames must be set in first request.")
        }
        e if e < LEAVE_EPOCH => invalid("MemberEpoch is invalid."),
        _ => Ok(()),
    }
}

/// A heartbeat that stays in the group (member epoch 0 to join, or the current one).
pub fn heartbeat(
    g: &ShareGroup,
    hb: &ShareHeartbeat,
    ctx: &Context<'_>,
) -> Result<ShareBeat, ResponseError> {
    let joining = hb.member_epoch == 0;
    let topics = ctx.topics;
    if g.members.len() >= ctx.max_size && !g.members.contains_key(&hb.member_id) {
        return Err(ResponseError::GroupMaxSizeReached);
    }
    let before = find_member(g, hb)?;
    let mut records = ShareRecords::new();

    // 1. The member. A member joining with epoch 0 starts afresh, whatever it had.
    let mut now = match (before, joining) {
        (Some(b), false) => b.clone(),
        _ => ShareMember {
            member_id: hb.member_id.clone(),
            ..Default::default()
        },
    };
    if hb.rack_id.is_some() {
        now.rack_id = hb.rack_id.clone();
    }
    if let Some(s) = &hb.subscribed {
        now.subscribed = s.clone();
    }
    now.client_id = hb.client_id.clone();
    now.client_host = hb.client_host.clone();
    if before.is_none_or(|b| member_metadata(b) != member_metadata(&now)) {
        records.push(member_record(&now));
    }
    let mut bump =
        before.is_none_or(|b| b.subscribed != now.subscribed) || initialized_assignment_pending(g);

    // 2. The group epoch and the metadata hash of what the group subscribes to.
    let subscribed = subscribed_with(g, &now);
    let mut hash = g.metadata_hash;
    if bump || ctx.refresh {
        hash = metadata_hash(subscribed.iter().map(String::as_str), topics);
        bump |= hash != g.metadata_hash;
    }
    let group_epoch = g.group_epoch + i32::from(bump);
    if bump {
        records.push(epoch_record(group_epoch, hash));
    }

    // 3. The target assignment.
    let (assignment_epoch, target) = match group_epoch > g.assignment_epoch {
        true => update_target(g, &now, group_epoch, topics, &mut records),
        false => (
            g.assignment_epoch,
            g.target.get(&now.member_id).cloned().unwrap_or_default(),
        ),
    };

    // 4. The member takes its target.
    let assignment_changed = before.is_none_or(|b| b.assigned != target);
    if now.member_epoch != assignment_epoch || now.assigned != target || joining {
        now.previous_epoch = now.member_epoch;
        now.member_epoch = assignment_epoch;
        now.assigned = target;
        records.push(current_assignment_record(&now, topics));
    }

    // 5. Subscribed partitions without state are initialized.
    let initialize = initialize_request(g, &subscribed, group_epoch, ctx, &mut records);

    let send = joining || hb.subscribed.is_some() || assignment_changed;
    Ok(ShareBeat {
        records,
        result: ShareHeartbeatResult {
            member_id: now.member_id.clone(),
            member_epoch: now.member_epoch,
            assignment: send.then(|| assignment_by_id(&now.assigned, topics)),
        },
        initialize,
        left: false,
    })
}

/// The member the heartbeat is from (None for one joining anew), after Kafka's epoch
/// checks: a greater epoch is fenced, a smaller one unless it is the previous epoch (the
/// answer that bumped it was lost).
fn find_member<'g>(
    g: &'g ShareGroup,
    hb: &ShareHeartbeat,
) -> Result<Option<&'g ShareMember>, ResponseError> {
    let existing = g.members.get(&hb.member_id);
    if hb.member_epoch == 0 {
        return Ok(existing);
    }
    let m = existing.ok_or(ResponseError::UnknownMemberId)?;
    if hb.member_epoch > m.member_epoch
        || (hb.member_epoch < m.member_epoch && hb.member_epoch != m.previous_epoch)
    {
        return Err(ResponseError::FencedMemberEpoch);
    }
    Ok(Some(m))
}

/// Every subscribed topic, with `now` in place of its earlier self.
fn subscribed_with(g: &ShareGroup, now: &ShareMember) -> BTreeSet<String> {
    g.members
        .values()
        .filter(|m| m.member_id != now.member_id)
        .chain([now])
        .flat_map(|m| m.subscribed.iter().cloned())
        .collect()
}

/// Kafka's `initializedAssignmentPending`: some subscribed topic has initialized
/// partitions the target does not assign exactly.
fn initialized_assignment_pending(g: &ShareGroup) -> bool {
    if g.members.is_empty() || g.state_partitions.initialized.is_empty() {
        return false;
    }
    let subscribed = g.subscribed_topics();
    let mut assigned: BTreeMap<&str, BTreeSet<i32>> = BTreeMap::new();
    for a in g.target.values() {
        for (t, ps) in a {
            assigned.entry(t).or_default().extend(ps);
        }
    }
    g.state_partitions
        .initialized
        .values()
        .filter(|(name, _)| subscribed.contains(name.as_str()))
        .any(|(name, ps)| assigned.get(name.as_str()) != Some(ps))
}

/// Step 3: a new target for every member, with a record per member whose target changed.
fn update_target(
    g: &ShareGroup,
    now: &ShareMember,
    group_epoch: i32,
    topics: &TopicImage,
    records: &mut ShareRecords,
) -> (i32, Assignment) {
    let subscriptions: BTreeMap<String, BTreeSet<String>> = g
        .members
        .values()
        .filter(|m| m.member_id != now.member_id)
        .chain([now])
        .map(|m| (m.member_id.clone(), m.subscribed.iter().cloned().collect()))
        .collect();
    let mut computed = assign(&subscriptions, &assignable(&g.state_partitions, topics));
    let empty = Assignment::new();
    for (id, t) in &computed {
        // A member without a target has an empty one, as in Kafka.
        if g.target.get(id).unwrap_or(&empty) != t {
            records.push(target_record(id, t, topics));
        }
    }
    records.push((
        ShareKey::TargetAssignmentMetadata,
        Some(ShareValue::TargetAssignmentMetadata {
            assignment_epoch: group_epoch,
        }),
    ));
    (
        group_epoch,
        computed.remove(&now.member_id).unwrap_or_default(),
    )
}

/// The partitions that may be assigned: initialized ones of topics that still exist
/// with that id, below their partition count.
fn assignable(state: &StatePartitions, topics: &TopicImage) -> BTreeMap<String, BTreeSet<i32>> {
    state
        .initialized
        .iter()
        .filter_map(|(id, (_, ps))| {
            let name = topics.topic_name(*id)?;
            let n = topics.partitions(name)?;
            let ps: BTreeSet<i32> = ps.iter().copied().filter(|p| *p < n).collect();
            Some((name.to_string(), ps))
        })
        .collect()
}

/// Step 5 (Kafka's `maybeCreateInitializeShareGroupStateRequest`): the subscribed
/// partitions neither initialized nor recently asked for become initializing.
fn initialize_request(
    g: &ShareGroup,
    subscribed: &BTreeSet<String>,
    group_epoch: i32,
    ctx: &Context<'_>,
    records: &mut ShareRecords,
) -> Option<InitializeRequest> {
    let state = &g.state_partitions;
    let mut wanted = TopicPartitionsById::new();
    for name in subscribed {
        let (Some(id), Some(n)) = (ctx.topics.topic_id(name), ctx.topics.partitions(name)) else {
            continue;
        };
        let recent = ctx
            .initializing_since
            .get(&id)
            .is_some_and(|t| ctx.now_ms - t < ctx.initialize_retry_ms);
        let mut have: BTreeSet<i32> = BTreeSet::new();
        if let Some((_, ps)) = state.initialized.get(&id) {
            have.extend(ps);
        }
        if recent {
            if let Some((_, ps)) = state.initializing.get(&id) {
                have.extend(ps);
            }
        }
        let missing: BTreeSet<i32> = (0..n).filter(|p| !have.contains(p)).collect();
        if !missing.is_empty() {
            wanted.insert(id, (name.clone(), missing));
        }
    }
    if wanted.is_empty() {
        return None;
    }
    let mut next = state.clone();
    for (id, (name, ps)) in &wanted {
        let entry = next
            .initializing
            .entry(*id)
            .or_insert_with(|| (name.clone(), BTreeSet::new()));
        entry.1.extend(ps);
        next.deleting.remove(id);
    }
    records.push(state_partitions_record(&next));
    Some(InitializeRequest {
        state_epoch: group_epoch,
        topics: wanted,
    })
}

/// The share coordinator initialized these share-partitions: they move from
/// initializing to initialized (Kafka's `initializeShareGroupState`).
pub fn initialized(g: &ShareGroup, done: &TopicPartitionsById) -> ShareRecords {
    let mut next = g.state_partitions.clone();
    let mut changed = false;
    for (id, (name, ps)) in done {
        if let Some((_, initializing)) = next.initializing.get_mut(id) {
            for p in ps {
                changed |= initializing.remove(p);
            }
            if initializing.is_empty() {
                next.initializing.remove(id);
            }
        }
        let entry = next
            .initialized
            .entry(*id)
            .or_insert_with(|| (name.clone(), BTreeSet::new()));
        for p in ps {
            changed |= entry.1.insert(*p);
        }
    }
    match changed {
        true => vec![state_partitions_record(&next)],
        false => Vec::new(),
    }
}

/// AlterShareGroupOffsets is about to initialize `topics` of the group (`g`; an empty
/// default for a group that does not exist yet): they join its initializing
/// share-partitions and leave its deleting ones, in one ShareGroupStatePartitionMetadata
/// record written before the share coordinator is asked (Kafka's
/// `addInitializingTopicsRecords`). A group that did not exist comes into being with
/// this record alone, at group epoch 0: Kafka writes no ShareGroupMetadata for it.
pub fn altering(g: &ShareGroup, topics: &TopicPartitionsById) -> ShareRecords {
    if topics.is_empty() {
        return Vec::new();
    }
    let mut next = g.state_partitions.clone();
    for (id, (name, ps)) in topics {
        let entry = next
            .initializing
            .entry(*id)
            .or_insert_with(|| (name.clone(), BTreeSet::new()));
        entry.0 = name.clone();
        entry.1.extend(ps);
        next.deleting.remove(id);
    }
    vec![state_partitions_record(&next)]
}

/// An initialization failed: its partitions are no longer initializing, so the next
/// heartbeat asks again (Kafka's `uninitializeShareGroupState`).
pub fn uninitialize(g: &ShareGroup, failed: &TopicPartitionsById) -> ShareRecords {
    let mut next = g.state_partitions.clone();
    let mut changed = false;
    for (id, (_, ps)) in failed {
        if let Some((_, initializing)) = next.initializing.get_mut(id) {
            for p in ps {
                changed |= initializing.remove(p);
            }
            if initializing.is_empty() {
                next.initializing.remove(id);
            }
        }
    }
    match changed {
        true => vec![state_partitions_record(&next)],
        false => Vec::new(),
    }
}

/// Topics whose state was deleted leave the group's share-partitions.
pub fn forget_topics(g: &ShareGroup, topics: &[Uuid]) -> ShareRecords {
    let mut next = g.state_partitions.clone();
    let mut changed = false;
    for id in topics {
        changed |= next.initialized.remove(id).is_some();
        changed |= next.initializing.remove(id).is_some();
    }
    match changed {
        true => vec![state_partitions_record(&next)],
        false => Vec::new(),
    }
}

/// A heartbeat with member epoch -1: the member leaves.
pub fn leave(
    g: &ShareGroup,
    hb: &ShareHeartbeat,
    topics: &TopicImage,
) -> Result<ShareBeat, ResponseError> {
    if !g.members.contains_key(&hb.member_id) {
        return Err(ResponseError::UnknownMemberId);
    }
    Ok(ShareBeat {
        records: remove(g, &[hb.member_id.as_str()], topics),
        result: ShareHeartbeatResult {
            member_id: hb.member_id.clone(),
            member_epoch: LEAVE_EPOCH,
            assignment: None,
        },
        initialize: None,
        left: true,
    })
}

/// Members whose session ran out leave the group.
pub fn expire(g: &ShareGroup, member_ids: &[&str], topics: &TopicImage) -> ShareRecords {
    let present: Vec<&str> = member_ids
        .iter()
        .copied()
        .filter(|id| g.members.contains_key(*id))
        .collect();
    match present.is_empty() {
        true => ShareRecords::new(),
        false => remove(g, &present, topics),
    }
}

/// The records that take members out, in Kafka's order: each one's current assignment,
/// target and metadata tombstones, then one group epoch bump with the hash of what the
/// others subscribe to.
fn remove(g: &ShareGroup, ids: &[&str], topics: &TopicImage) -> ShareRecords {
    let mut records = ShareRecords::new();
    for id in ids {
        records.push((ShareKey::CurrentAssignment(id.to_string()), None));
        records.push((ShareKey::TargetAssignment(id.to_string()), None));
        records.push((ShareKey::Member(id.to_string()), None));
    }
    let staying = g
        .members
        .values()
        .filter(|m| !ids.contains(&m.member_id.as_str()))
        .flat_map(|m| m.subscribed.iter().map(String::as_str));
    let hash = metadata_hash(staying, topics);
    records.push(epoch_record(g.group_epoch + 1, hash));
    records
}

/// The tombstones that delete a share group, in Kafka's order (`createGroupTombstoneRecords`):
/// members' current assignments, targets, the target epoch, members, the state
/// partitions, the group epoch last.
pub fn tombstones(g: &ShareGroup) -> ShareRecords {
    let mut out = ShareRecords::new();
    for id in g.members.keys() {
        out.push((ShareKey::CurrentAssignment(id.clone()), None));
    }
    let targeted: BTreeSet<&String> = g.members.keys().chain(g.target.keys()).collect();
    for id in targeted {
        out.push((ShareKey::TargetAssignment(id.clone()), None));
    }
    out.push((ShareKey::TargetAssignmentMetadata, None));
    for id in g.members.keys() {
        out.push((ShareKey::Member(id.clone()), None));
    }
    out.push((ShareKey::StatePartitionMetadata, None));
    out.push((ShareKey::Metadata, None));
    out
}

// ---- records ----

fn member_metadata(m: &ShareMember) -> ShareMemberMetadata {
    ShareMemberMetadata {
        rack_id: m.rack_id.clone(),
        client_id: m.client_id.clone(),
        client_host: m.client_host.clone(),
        subscribed_topic_names: m.subscribed.clone(),
    }
}

fn member_record(m: &ShareMember) -> (ShareKey, Option<ShareValue>) {
    (
        ShareKey::Member(m.member_id.clone()),
        Some(ShareValue::Member(member_metadata(m))),
    )
}

fn epoch_record(epoch: i32, metadata_hash: i64) -> (ShareKey, Option<ShareValue>) {
    (
        ShareKey::Metadata,
        Some(ShareValue::Metadata {
            epoch,
            metadata_hash,
        }),
    )
}

fn target_record(
    member_id: &str,
    target: &Assignment,
    topics: &TopicImage,
) -> (ShareKey, Option<ShareValue>) {
    (
        ShareKey::TargetAssignment(member_id.to_string()),
        Some(ShareValue::TargetAssignment(by_id(target, topics))),
    )
}

fn current_assignment_record(
    m: &ShareMember,
    topics: &TopicImage,
) -> (ShareKey, Option<ShareValue>) {
    (
        ShareKey::CurrentAssignment(m.member_id.clone()),
        Some(ShareValue::CurrentAssignment(ShareCurrentAssignment {
            member_epoch: m.member_epoch,
            previous_member_epoch: m.previous_epoch,
            state: STABLE,
            assigned: by_id(&m.assigned, topics),
        })),
    )
}

fn state_partitions_record(s: &StatePartitions) -> (ShareKey, Option<ShareValue>) {
    let info = |m: &TopicPartitionsById| {
        m.iter()
            .map(|(id, (name, ps))| TopicPartitionsInfo {
                topic_id: *id,
                topic_name: name.clone(),
                partitions: ps.iter().copied().collect(),
            })
            .collect()
    };
    let value = StatePartitionMetadata {
        initializing: info(&s.initializing),
        initialized: info(&s.initialized),
        deleting: s
            .deleting
            .iter()
            .map(|(id, name)| TopicInfo {
                topic_id: *id,
                topic_name: name.clone(),
            })
            .collect(),
    };
    (
        ShareKey::StatePartitionMetadata,
        Some(ShareValue::StatePartitionMetadata(value)),
    )
}

/// An assignment by topic id; a topic deleted meanwhile is left out.
pub(super) fn by_id(a: &Assignment, topics: &TopicImage) -> Vec<TopicPartitions> {
    a.iter()
        .filter_map(|(name, ps)| {
            Some(TopicPartitions {
                topic_id: topics.topic_id(name)?,
                partitions: ps.iter().copied().collect(),
                assignment_epochs: vec![],
            })
        })
        .collect()
}

/// An assignment by topic name; partitions of unknown topic ids are dropped.
pub(super) fn by_name(tps: Vec<TopicPartitions>, topics: &TopicImage) -> Assignment {
    let mut out = Assignment::new();
    for tp in tps {
        if let Some(name) = topics.topic_name(tp.topic_id) {
            out.entry(name.to_string())
                .or_default()
                .extend(tp.partitions);
        }
    }
    out
}

fn assignment_by_id(a: &Assignment, topics: &TopicImage) -> Vec<(Uuid, Vec<i32>)> {
    by_id(a, topics)
        .into_iter()
        .map(|tp| (tp.topic_id, tp.partitions))
        .collect()
}
