//! A partition's leadership as the controller keeps it (Kafka's `LeaderAndIsr`): leader,
//! leader epoch, ISR, recovery state and partition epoch. The partition epoch is the
//! version of the partition's `state` znode, so a write made from a stale copy fails.

use crate::zk::znodes::{LeaderIsrAndControllerEpoch, LEADER_RECOVERING};

/// No leader: every replica in the ISR is offline and unclean election is off.
pub const NO_LEADER: i32 = -1;
/// The leader UpdateMetadata carries for a topic queued for deletion.
pub const LEADER_DURING_DELETE: i32 = -2;
/// The leader epoch StopReplica carries for a topic queued for deletion.
pub const EPOCH_DURING_DELETE: i32 = -2;

/// The controller's one leadership type, shared with the metadata image: in ZooKeeper
/// mode its eligible leader replicas (KIP-966) stay empty, as Kafka 3.9's do.
pub use crate::controller::LeaderAndIsr;

/// ZooKeeper mode's transitions of a leadership, as Kafka's `LeaderAndIsr` has them.
impl LeaderAndIsr {
    /// A new partition's first state: epoch 0, and the znode not yet written.
    pub fn initial(leader: i32, isr: Vec<i32>) -> Self {
        LeaderAndIsr {
            leader,
            leader_epoch: 0,
            partition_epoch: 0,
            isr,
            eligible_leader_replicas: Vec::new(),
            last_known_elr: Vec::new(),
            leader_recovery_state: 0,
        }
    }

    /// From a `state` znode and its version.
    pub fn from_znode(state: &LeaderIsrAndControllerEpoch, version: i32) -> Self {
        LeaderAndIsr {
            leader_epoch: state.leader_epoch,
            partition_epoch: version,
            leader_recovery_state: if state.recovering() {
                LEADER_RECOVERING
            } else {
                0
            },
            ..LeaderAndIsr::initial(state.leader, state.isr.clone())
        }
    }

    /// The `state` znode for this leadership, written by the controller of `controller_epoch`.
    pub fn to_znode(&self, controller_epoch: i32) -> LeaderIsrAndControllerEpoch {
        let mut s = LeaderIsrAndControllerEpoch::new(
            controller_epoch,
            self.leader,
            self.leader_epoch,
            self.isr.clone(),
        );
        if self.recovering() {
            s.leader_recovery_state = Some(LEADER_RECOVERING);
        }
        s
    }

    /// Whether a leader elected from outside the ISR is still recovering (KIP-704).
    pub fn recovering(&self) -> bool {
        self.leader_recovery_state == LEADER_RECOVERING
    }

    /// A new leader and ISR at the next leader epoch, keeping the recovery state.
    pub fn new_leader_and_isr(&self, leader: i32, isr: Vec<i32>) -> Self {
        LeaderAndIsr {
            leader,
            leader_epoch: self.leader_epoch + 1,
            isr,
            ..self.clone()
        }
    }

    /// A leader from outside the ISR: it must recover before the ISR may grow.
    pub fn new_recovering_leader_and_isr(&self, leader: i32, isr: Vec<i32>) -> Self {
        LeaderAndIsr {
            leader_recovery_state: LEADER_RECOVERING,
            ..self.new_leader_and_isr(leader, isr)
        }
    }

    pub fn new_leader(&self, leader: i32) -> Self {
        self.new_leader_and_isr(leader, self.isr.clone())
    }

    /// The same state at the next leader epoch (so brokers take a changed replica set).
    pub fn new_epoch(&self) -> Self {
        self.new_leader_and_isr(self.leader, self.isr.clone())
    }

    /// The same state, the partition epoch aside (a repeated AlterPartition is answered
    /// with the current state, not refused).
    pub fn equals_allow_stale_partition_epoch(&self, current: &LeaderAndIsr) -> bool {
        self.leader == current.leader
            && self.leader_epoch == current.leader_epoch
            && self.isr == current.isr
            && self.leader_recovery_state == current.leader_recovery_state
            && self.partition_epoch <= current.partition_epoch
    }

    /// What UpdateMetadata says of a partition whose topic is being deleted: leader -2
    /// at epoch 0 (Kafka's `LeaderAndIsr.duringDelete`), so brokers drop it.
    pub fn during_delete(&self) -> Self {
        LeaderAndIsr::initial(LEADER_DURING_DELETE, self.isr.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn znode_round_trip_keeps_epochs() {
        let l = LeaderAndIsr::initial(2, vec![2, 1]);
        let z = l.to_znode(7);
        assert_eq!((z.controller_epoch, z.leader, z.leader_epoch), (7, 2, 0));
        assert_eq!(LeaderAndIsr::from_znode(&z, 0), l);
        let r = l.new_recovering_leader_and_isr(1, vec![1]);
        assert_eq!((r.leader_epoch, r.recovering()), (1, true));
        assert_eq!(r.to_znode(7).leader_recovery_state, Some(LEADER_RECOVERING));
        assert!(l.equals_allow_stale_partition_epoch(&LeaderAndIsr {
            partition_epoch: 3,
            ..l.clone()
        }));
        assert!(!l.new_epoch().equals_allow_stale_partition_epoch(&l));
    }
}
