//! The partition and replica state machines' states and legal transitions (Kafka's
//! `PartitionStateMachine` and `ReplicaStateMachine`). The controller keeps one state per
//! partition and per (partition, replica); a transition from a state not listed as a
//! valid predecessor is refused and logged, never applied.

/// A partition's state in the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PartitionState {
    /// Assigned but without a leader yet: its `state` znode is not written.
    New,
    /// Has a leader.
    Online,
    /// Had a leader that is gone.
    Offline,
    /// Deleted, or never created.
    NonExistent,
}

impl PartitionState {
    pub fn valid_previous(self) -> &'static [PartitionState] {
        use PartitionState::*;
        match self {
            New => &[NonExistent],
            Online | Offline => &[New, Online, Offline],
            NonExistent => &[Offline],
        }
    }

    pub fn can_follow(self, from: PartitionState) -> bool {
        self.valid_previous().contains(&from)
    }
}

/// A replica's state in the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplicaState {
    /// Assigned to a new partition; may only become a follower.
    New,
    /// Told its partition's leadership; part of the assignment.
    Online,
    /// Its broker is gone (or shutting down): out of the ISR, sent StopReplica.
    Offline,
    /// StopReplica with deletion sent; waiting for the answer.
    DeletionStarted,
    DeletionSuccessful,
    /// Deletion failed or its broker is down; retried when it comes back.
    DeletionIneligible,
    NonExistent,
}

impl ReplicaState {
    pub fn valid_previous(self) -> &'static [ReplicaState] {
        use ReplicaState::*;
        match self {
            New => &[NonExistent],
            Online | Offline => &[New, Online, Offline, DeletionIneligible],
            DeletionStarted => &[Offline],
            DeletionSuccessful => &[DeletionStarted],
            DeletionIneligible => &[Offline, DeletionStarted],
            NonExistent => &[DeletionSuccessful],
        }
    }

    pub fn can_follow(self, from: ReplicaState) -> bool {
        self.valid_previous().contains(&from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_transitions_are_kafkas() {
        use PartitionState::*;
        let all = [New, Online, Offline, NonExistent];
        let legal: Vec<(PartitionState, PartitionState)> = all
            .iter()
            .flat_map(|&from| all.iter().map(move |&to| (from, to)))
            .filter(|&(from, to)| to.can_follow(from))
            .collect();
        assert_eq!(
            legal,
            vec![
                (New, Online),
                (New, Offline),
                (Online, Online),
                (Online, Offline),
                (Offline, Online),
                (Offline, Offline),
                (Offline, NonExistent),
                (NonExistent, New),
            ]
        );
    }

    #[test]
    fn replica_deletion_goes_through_offline_and_started() {
        use ReplicaState::*;
        assert!(!DeletionStarted.can_follow(Online));
        assert!(DeletionStarted.can_follow(Offline));
        assert!(DeletionSuccessful.can_follow(DeletionStarted));
        assert!(!NonExistent.can_follow(DeletionStarted));
        assert!(NonExistent.can_follow(DeletionSuccessful));
        assert!(
            Online.can_follow(DeletionIneligible),
            "a retried deletion's broker came back"
        );
        assert!(!New.can_follow(Online));
    }
}
