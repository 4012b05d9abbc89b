//! One member's next step towards its target: revoke first, then assign what no other
//! member still holds, and reach the assignment epoch once nothing is left to revoke.
//! A partition new to the member is stamped with the epoch it reached (AssignmentEpochs).

use super::{
    contains, difference, flatten, intersection, Assignment, ConsumerGroup, ConsumerMember,
};

/// `member` after this heartbeat: `owned` is what it reports owning (None: not sent),
/// `target` its target at `assignment_epoch`. `group` tells who holds what; the member
/// itself and `replaced` (a static member it takes over from) do not count.
pub fn reconcile(
    group: &ConsumerGroup,
    member: &ConsumerMember,
    replaced: Option<&str>,
    target: &Assignment,
    assignment_epoch: i32,
    owned: Option<&Assignment>,
) -> ConsumerMember {
    let mut m = step(group, member, replaced, target, assignment_epoch, owned);
    m.sync_assignment_epochs();
    m
}

fn step(
    group: &ConsumerGroup,
    member: &ConsumerMember,
    replaced: Option<&str>,
    target: &Assignment,
    assignment_epoch: i32,
    owned: Option<&Assignment>,
) -> ConsumerMember {
    let mut m = member.clone();
    if !m.pending_revocation.is_empty() {
        let revoked =
            owned.is_some_and(|o| flatten(o).all(|(t, p)| !contains(&m.pending_revocation, t, p)));
        if !revoked {
            return m;
        }
        m.pending_revocation.clear();
    }
    let to_revoke = difference(&m.assigned, target);
    if !to_revoke.is_empty() {
        m.assigned = intersection(&m.assigned, target);
        m.pending_revocation = to_revoke;
        return m;
    }
    for (topic, partition) in flatten(target) {
        let free = match group.holder(topic, partition) {
            None => true,
            Some(holder) => holder == m.member_id || Some(holder) == replaced,
        };
        if free {
            m.assigned
                .entry(topic.to_string())
                .or_default()
                .insert(partition);
        }
    }
    if m.member_epoch != assignment_epoch {
        m.previous_epoch = m.member_epoch;
        m.member_epoch = assignment_epoch;
    }
    m
}
