//! Kafka's partition leader election rules (`Election` and
//! `PartitionLeaderElectionAlgorithms`): pure functions of a partition's assignment, its
//! current leadership and which replicas are alive.

use std::collections::BTreeSet;

use super::leader_and_isr::LeaderAndIsr;

/// Why a leader is being chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// The leader is gone (or the partition is new): the first live replica of the
    /// assignment that is in the ISR; with `allow_unclean`, any live replica.
    Offline { allow_unclean: bool },
    /// The first replica of the assignment, if it is live and in the ISR.
    Preferred,
    /// Away from brokers that are shutting down, to a live ISR member.
    ControlledShutdown,
    /// A reassignment finishing whose leader is not among (or not alive in) the target
    /// replicas: the first target replica that is live and in the ISR.
    Reassign,
}

/// Kafka's invariants of an elected leadership, by construction of the rules below: the
/// leader is in the ISR, and the leader epoch moved past the current one.
fn checked(current: &LeaderAndIsr, elected: LeaderAndIsr) -> LeaderAndIsr {
    debug_assert!(
        elected.isr.contains(&elected.leader),
        "leader {} outside ISR {:?}",
        elected.leader,
        elected.isr
    );
    debug_assert!(elected.leader_epoch > current.leader_epoch);
    elected
}

/// The new leadership after an offline election, or None when no replica qualifies
/// (the partition stays offline). A leader from outside the ISR (unclean) starts an
/// ISR of itself alone and is marked recovering.
pub fn offline(
    assignment: &[i32],
    current: &LeaderAndIsr,
    live: &BTreeSet<i32>,
    allow_unclean: bool,
) -> Option<LeaderAndIsr> {
    let clean = assignment
        .iter()
        .copied()
        .find(|r| live.contains(r) && current.isr.contains(r));
    let leader = clean.or_else(|| {
        allow_unclean
            .then(|| assignment.iter().copied().find(|r| live.contains(r)))
            .flatten()
    })?;
    if current.isr.contains(&leader) {
        let isr = current
            .isr
            .iter()
            .copied()
            .filter(|r| live.contains(r))
            .collect();
        Some(checked(current, current.new_leader_and_isr(leader, isr)))
    } else {
        let unclean = current.new_recovering_leader_and_isr(leader, vec![leader]);
        Some(checked(current, unclean))
    }
}

/// The preferred (first assigned) replica, when it is live and in the ISR.
pub fn preferred(
    assignment: &[i32],
    current: &LeaderAndIsr,
    live: &BTreeSet<i32>,
) -> Option<LeaderAndIsr> {
    let first = *assignment.first()?;
    (live.contains(&first) && current.isr.contains(&first))
        .then(|| checked(current, current.new_leader(first)))
}

/// The first of the reassignment's target replicas that is live and in the ISR; the
/// ISR is left as it is (the removed replicas leave it afterwards).
pub fn reassign(
    target: &[i32],
    current: &LeaderAndIsr,
    live: &BTreeSet<i32>,
) -> Option<LeaderAndIsr> {
    let leader = target
        .iter()
        .copied()
        .find(|r| live.contains(r) && current.isr.contains(r))?;
    Some(checked(current, current.new_leader(leader)))
}

/// A leader that is not shutting down, from the ISR; the shutting-down brokers leave the ISR.
pub fn controlled_shutdown(
    assignment: &[i32],
    current: &LeaderAndIsr,
    live_or_shutting_down: &BTreeSet<i32>,
    shutting_down: &BTreeSet<i32>,
) -> Option<LeaderAndIsr> {
    let leader = assignment.iter().copied().find(|r| {
        live_or_shutting_down.contains(r) && current.isr.contains(r) && !shutting_down.contains(r)
    })?;
    let isr = current
        .isr
        .iter()
        .copied()
        .filter(|r| !shutting_down.contains(r))
        .collect();
    Some(checked(current, current.new_leader_and_isr(leader, isr)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(leader: i32, isr: &[i32]) -> LeaderAndIsr {
        LeaderAndIsr {
            leader_epoch: 4,
            partition_epoch: 9,
            ..LeaderAndIsr::initial(leader, isr.to_vec())
        }
    }

    fn set(ids: &[i32]) -> BTreeSet<i32> {
        ids.iter().copied().collect()
    }

    #[test]
    fn offline_picks_first_live_isr_member_in_assignment_order() {
        let got = offline(&[1, 2, 3], &state(1, &[1, 3, 2]), &set(&[2, 3]), false).unwrap();
        assert_eq!(got.leader, 2);
        assert_eq!(
            got.isr,
            vec![3, 2],
            "dead replicas leave the ISR, order kept"
        );
        assert_eq!(got.leader_epoch, 5);
        assert_eq!(
            got.partition_epoch, 9,
            "the znode version is set by the write"
        );
        assert!(!got.recovering());
    }

    #[test]
    fn no_live_isr_member_means_no_leader_unless_unclean() {
        let cur = state(1, &[1]);
        assert_eq!(offline(&[1, 2], &cur, &set(&[2]), false), None);
        let unclean = offline(&[1, 2], &cur, &set(&[2]), true).unwrap();
        assert_eq!((unclean.leader, unclean.isr.clone()), (2, vec![2]));
        assert!(
            unclean.recovering(),
            "a leader from outside the ISR recovers first"
        );
        assert_eq!(offline(&[1, 2], &cur, &set(&[]), true), None);
    }

    #[test]
    fn preferred_needs_the_first_replica_live_and_in_sync() {
        assert_eq!(
            preferred(&[2, 1], &state(1, &[1, 2]), &set(&[1, 2])).map(|l| l.leader),
            Some(2)
        );
        assert_eq!(preferred(&[2, 1], &state(1, &[1]), &set(&[1, 2])), None);
        assert_eq!(preferred(&[2, 1], &state(1, &[1, 2]), &set(&[1])), None);
    }

    #[test]
    fn reassign_picks_the_first_live_in_sync_target_replica() {
        let got = reassign(&[2, 3], &state(1, &[1, 2, 3]), &set(&[1, 2, 3])).unwrap();
        assert_eq!((got.leader, got.isr.clone()), (2, vec![1, 2, 3]));
        assert_eq!(got.leader_epoch, 5);
        let got = reassign(&[2, 3], &state(1, &[1, 3]), &set(&[1, 2, 3])).unwrap();
        assert_eq!(got.leader, 3, "2 is not in the ISR");
        assert_eq!(reassign(&[2, 3], &state(1, &[1, 3]), &set(&[1, 2])), None);
    }

    #[test]
    fn controlled_shutdown_moves_away_and_shrinks_isr() {
        let got = controlled_shutdown(
            &[1, 2, 3],
            &state(1, &[1, 2, 3]),
            &set(&[1, 2, 3]),
            &set(&[1]),
        )
        .unwrap();
        assert_eq!((got.leader, got.isr.clone()), (2, vec![2, 3]));
        assert_eq!(
            controlled_shutdown(&[1, 2], &state(1, &[1]), &set(&[1, 2]), &set(&[1])),
            None,
            "no other ISR member: the leader stays"
        );
    }
}
