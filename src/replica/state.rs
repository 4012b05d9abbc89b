//! What a partition knows of its replicas (Kafka's `PartitionState` and `ReplicaState`,
//! named here `ReplicationState` and `FollowerState` apart from the controller's states):
//! its role, leader epoch, replicas and ISR, and, as leader, each follower's log end
//! offset. The high-watermark rule lives here. Pure state, no I/O: `Partition` keeps it
//! under a lock and acts on what it says, so every rule is tested without a log.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;

use super::cluster_view::ClusterView;
#[cfg(test)]
use super::cluster_view::Registration;
use crate::controller::LeaderAndIsr;

/// Whether this broker leads the partition or follows another broker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Leader,
    /// Following `leader` (-1: the partition has no leader now).
    Follower {
        leader: i32,
    },
}

/// A follower as its leader sees it, from its fetches (Kafka's `ReplicaState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FollowerState {
    /// The offset the follower fetched from last: everything below it is in its log.
    /// -1 until its first fetch in this leader epoch.
    pub log_end_offset: i64,
    pub log_start_offset: i64,
    pub last_fetch_ms: i64,
    /// When it last fetched up to the leader's log end offset (Kafka's
    /// `lastCaughtUpTimeMs`), what `replica.lag.time.max.ms` is measured against.
    pub last_caught_up_ms: i64,
    /// The leader's log end offset when this follower fetched last.
    pub last_fetch_leader_leo: i64,
    /// The follower's broker epoch as its fetches carry it (-1: not known).
    pub broker_epoch: i64,
}

impl FollowerState {
    /// Kafka's `ReplicaState.isCaughtUp`: at the leader's log end, or caught up to it
    /// within the last `max_lag_ms` (never, before its first fetch that reached it).
    fn is_caught_up(&self, leader_log_end_offset: i64, now_ms: i64, max_lag_ms: i64) -> bool {
        self.log_end_offset == leader_log_end_offset
            || (self.last_caught_up_ms >= 0 && now_ms - self.last_caught_up_ms <= max_lag_ms)
    }

    /// A follower at the start of a leader epoch: nothing known of its log yet. One in
    /// the ISR counts as caught up now, so it is not dropped before it could fetch.
    fn unknown(in_sync: bool, now_ms: i64) -> Self {
        FollowerState {
            log_end_offset: -1,
            log_start_offset: -1,
            last_fetch_ms: -1,
            last_caught_up_ms: if in_sync { now_ms } else { -1 },
            last_fetch_leader_leo: -1,
            broker_epoch: -1,
        }
    }
}

/// A partition's replication state on this broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicationState {
    /// This broker's id (-1 when not known: a partition led here alone).
    pub local_id: i32,
    pub role: Role,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// Every replica, this broker included, in assignment order.
    pub replicas: Vec<i32>,
    /// The in-sync replicas, as the controller last announced them.
    pub isr: Vec<i32>,
    /// As leader: every other replica, as its fetches showed it.
    followers: BTreeMap<i32, FollowerState>,
    /// As leader: an ISR change sent to the controller and not yet answered (Kafka's
    /// `PendingExpandIsr` / `PendingShrinkIsr`). While it is out no other is proposed.
    pub pending_isr: Option<Vec<i32>>,
}

/// An ISR change a leader proposes to the controller (one partition of AlterPartition).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IsrProposal {
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// The proposed ISR with each member's broker epoch (-1: not known).
    pub new_isr: Vec<(i32, i64)>,
}

/// What the controller answered to an ISR proposal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IsrOutcome {
    /// Accepted: the partition's state as the controller now has it.
    Committed {
        leader_epoch: i32,
        partition_epoch: i32,
        isr: Vec<i32>,
    },
    /// Refused for good (INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH, ...): the proposal
    /// is dropped and the leader waits for the metadata to say what holds.
    Refused(ResponseError),
}

impl ReplicationState {
    /// A partition this broker leads alone at `leader_epoch`: it is the whole ISR.
    pub fn sole_leader(leader_epoch: i32) -> Self {
        ReplicationState {
            local_id: -1,
            role: Role::Leader,
            leader_epoch,
            partition_epoch: -1,
            replicas: Vec::new(),
            isr: Vec::new(),
            followers: BTreeMap::new(),
            pending_isr: None,
        }
    }

    pub fn is_leader(&self) -> bool {
        self.role == Role::Leader
    }

    /// The committed ISR's size, what `min.insync.replicas` is checked against (a
    /// partition led alone, with no metadata naming replicas, is its own ISR).
    pub fn isr_size(&self) -> usize {
        match self.replicas.is_empty() {
            true => 1,
            false => self.isr.len(),
        }
    }

    pub fn follower(&self, replica_id: i32) -> Option<&FollowerState> {
        self.followers.get(&replica_id)
    }

    /// Takes the leadership and ISR the metadata announces for this broker (`local_id`),
    /// as Kafka's `makeLeader` / `makeFollower` do. Returns whether the role or the leader
    /// epoch changed. On a new leader epoch every follower starts unknown: the high
    /// watermark then waits for the ISR's first fetches (it never goes back meanwhile).
    pub fn apply(
        &mut self,
        local_id: i32,
        replicas: &[i32],
        announced: &LeaderAndIsr,
        now_ms: i64,
    ) -> bool {
        let role = match announced.leader {
            l if l == local_id => Role::Leader,
            leader => Role::Follower { leader },
        };
        // Kafka's invariants of what the controller announces: leader epochs only rise
        // (a stale announcement is refused before it gets here), the ISR lies within the
        // replicas, and a leader is a member of its ISR.
        debug_assert!(
            announced.leader_epoch >= self.leader_epoch,
            "leader epoch {} announced after {}",
            announced.leader_epoch,
            self.leader_epoch
        );
        debug_assert!(
            announced.isr.iter().all(|r| replicas.contains(r)),
            "ISR {:?} outside replicas {replicas:?}",
            announced.isr
        );
        debug_assert!(
            announced.leader < 0 || announced.isr.contains(&announced.leader),
            "leader {} outside ISR {:?}",
            announced.leader,
            announced.isr
        );
        let changed = role != self.role || announced.leader_epoch != self.leader_epoch;
        self.local_id = local_id;
        self.role = role;
        self.leader_epoch = announced.leader_epoch;
        self.partition_epoch = announced.partition_epoch;
        self.replicas = replicas.to_vec();
        self.isr = announced.isr.clone();
        // What the controller announces is committed: a proposal still out is either in
        // it or was overtaken by it.
        self.pending_isr = None;
        if role != Role::Leader {
            self.followers.clear();
            return changed;
        }
        let others = replicas.iter().copied().filter(|&r| r != local_id);
        let mut followers = BTreeMap::new();
        for id in others {
            let in_sync = self.isr.contains(&id);
            let state = match self.followers.get(&id) {
                Some(known) if !changed => *known,
                _ => FollowerState::unknown(in_sync, now_ms),
            };
            followers.insert(id, state);
        }
        self.followers = followers;
        changed
    }

    /// Records a follower's fetch from `fetch_offset` (Kafka's `updateFollowerFetchState`):
    /// that is its log end offset now. NOT_LEADER_OR_FOLLOWER unless this broker leads and
    /// `replica_id` is one of the other replicas.
    pub fn update_follower(
        &mut self,
        replica_id: i32,
        fetch_offset: i64,
        log_start_offset: i64,
        leader_log_end_offset: i64,
        now_ms: i64,
    ) -> Result<(), ResponseError> {
        if !self.is_leader() {
            return Err(ResponseError::NotLeaderOrFollower);
        }
        let follower = self
            .followers
            .get_mut(&replica_id)
            .ok_or(ResponseError::NotLeaderOrFollower)?;
        follower.log_end_offset = fetch_offset;
        follower.log_start_offset = log_start_offset;
        // Kafka's rule: caught up now when the fetch reached the leader's log end; caught
        // up as of the previous fetch when it reached the log end the leader had then (a
        // busy partition's log end never stands still for a follower to reach it).
        if fetch_offset >= leader_log_end_offset {
            follower.last_caught_up_ms = follower.last_caught_up_ms.max(now_ms);
        } else if fetch_offset >= follower.last_fetch_leader_leo {
            follower.last_caught_up_ms = follower.last_caught_up_ms.max(follower.last_fetch_ms);
        }
        follower.last_fetch_ms = now_ms;
        follower.last_fetch_leader_leo = leader_log_end_offset;
        Ok(())
    }

    /// Records the broker epoch a follower's fetch carried (Fetch v15+), which the leader
    /// sends with its ISR proposals.
    pub fn set_follower_broker_epoch(&mut self, replica_id: i32, broker_epoch: i64) {
        if let Some(f) = self.followers.get_mut(&replica_id) {
            f.broker_epoch = broker_epoch;
        }
    }

    /// The ISR the high watermark and acks=all wait for: the committed ISR, and while a
    /// change is pending, every replica in either (Kafka's `maximalIsr`), so a replica
    /// joining already counts and one leaving still does until the controller agrees.
    pub fn maximal_isr(&self) -> Vec<i32> {
        let mut isr = self.isr.clone();
        for r in self.pending_isr.iter().flatten() {
            if !isr.contains(r) {
                isr.push(*r);
            }
        }
        isr
    }

    /// A proposal adding `replica_id` to the ISR (Kafka's `maybeExpandIsr`): as leader,
    /// with no change pending, for a replica not in the ISR whose log end reached both the
    /// high watermark and the start of the current leader epoch, and that the metadata
    /// lets join (`ClusterView::isr_eligible`: in a KRaft cluster, not fenced, not in
    /// controlled shutdown, fetching at its registered epoch).
    pub fn propose_expand(
        &mut self,
        replica_id: i32,
        high_watermark: i64,
        epoch_start_offset: i64,
        cluster: &ClusterView,
    ) -> Option<IsrProposal> {
        if !self.is_leader() || self.pending_isr.is_some() || self.isr.contains(&replica_id) {
            return None;
        }
        let f = self.followers.get(&replica_id)?;
        if f.log_end_offset < high_watermark || f.log_end_offset < epoch_start_offset {
            return None;
        }
        if !cluster.isr_eligible(replica_id, f.broker_epoch) {
            return None;
        }
        let mut isr = self.isr.clone();
        isr.push(replica_id);
        Some(self.propose(isr, cluster))
    }

    /// A proposal dropping the followers in the ISR that have not caught up for
    /// `max_lag_ms` (Kafka's `maybeShrinkIsr`); the leader always stays.
    pub fn propose_shrink(
        &mut self,
        leader_log_end_offset: i64,
        now_ms: i64,
        max_lag_ms: i64,
        cluster: &ClusterView,
    ) -> Option<IsrProposal> {
        if !self.is_leader() || self.pending_isr.is_some() {
            return None;
        }
        let lagging = |id: &i32| {
            self.followers.get(id).is_some_and(|f| {
                f.log_end_offset != leader_log_end_offset
                    && now_ms - f.last_caught_up_ms > max_lag_ms
            })
        };
        let kept: Vec<i32> = self.isr.iter().copied().filter(|r| !lagging(r)).collect();
        if kept.len() == self.isr.len() {
            return None;
        }
        Some(self.propose(kept, cluster))
    }

    /// Marks `isr` pending and names each member with its broker epoch (Kafka's
    /// `addBrokerEpochToIsr`): in a KRaft cluster the leader's own registration's epoch
    /// and each follower's as its fetches carried it, so the controller refuses a member
    /// that restarted since (KIP-903); -1 for a follower not heard from in this leader
    /// epoch, and for every member in ZooKeeper mode (as Kafka 3.9's leaders send them,
    /// captured in protocol-tests/fixtures-cluster).
    fn propose(&mut self, isr: Vec<i32>, cluster: &ClusterView) -> IsrProposal {
        let kraft = cluster.is_kraft();
        let epoch_of = |id: i32| match kraft {
            false => -1,
            true if id == cluster.local_id() => cluster.broker_epoch(),
            true => self.followers.get(&id).map_or(-1, |f| f.broker_epoch),
        };
        let new_isr = isr.iter().map(|&id| (id, epoch_of(id))).collect();
        self.pending_isr = Some(isr);
        IsrProposal {
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            new_isr,
        }
    }

    /// Takes the controller's answer to the proposal made at `leader_epoch` (Kafka's
    /// `handleAlterPartitionUpdate`). An answer for an older leader epoch, or a partition
    /// epoch older than ours, is stale and ignored. Returns whether the ISR changed.
    pub fn complete_isr_change(&mut self, proposed_at: i32, outcome: &IsrOutcome) -> bool {
        if !self.is_leader() || self.leader_epoch != proposed_at || self.pending_isr.is_none() {
            return false;
        }
        match outcome {
            IsrOutcome::Committed {
                leader_epoch,
                partition_epoch,
                isr,
            } => {
                if *leader_epoch != self.leader_epoch || *partition_epoch < self.partition_epoch {
                    return false;
                }
                self.pending_isr = None;
                self.partition_epoch = *partition_epoch;
                let changed = self.isr != *isr;
                self.isr = isr.clone();
                changed
            }
            IsrOutcome::Refused(_) => {
                self.pending_isr = None;
                false
            }
        }
    }

    /// Whether a fetch from `replica_id` may be served here: a consumer's (negative id)
    /// by the leader, a follower's by the leader of a partition it replicates.
    pub fn check_fetch(&self, replica_id: i32) -> Result<(), ResponseError> {
        let allowed =
            self.is_leader() && (replica_id < 0 || self.followers.contains_key(&replica_id));
        match allowed {
            true => Ok(()),
            false => Err(ResponseError::NotLeaderOrFollower),
        }
    }

    /// The high watermark the replicas allow (Kafka's `maybeIncrementLeaderHW`): the
    /// smallest log end offset among the leader, the followers in the (maximal) ISR, and
    /// the followers outside it that are about to join (Kafka's
    /// `shouldWaitForReplicaToJoinIsr`): caught up within `max_lag_ms`
    /// (`replica.lag.time.max.ms`) at `now_ms` and eligible for the ISR
    /// (`ClusterView::may_join_isr` of `cluster`, when the partition has one). Without that wait, a record committed while such a replica
    /// was a little behind would be missing from it once it joined and became leader.
    /// `None` when this broker does not lead. The caller never moves it back.
    pub fn high_watermark_candidate(
        &self,
        leader_log_end_offset: i64,
        now_ms: i64,
        max_lag_ms: i64,
        cluster: Option<&ClusterView>,
    ) -> Option<i64> {
        if !self.is_leader() {
            return None;
        }
        let isr = self.maximal_isr();
        let waited_for = |id: i32, f: &FollowerState| {
            isr.contains(&id)
                || (f.is_caught_up(leader_log_end_offset, now_ms, max_lag_ms)
                    && cluster.is_none_or(|c| c.may_join_isr(id, f.broker_epoch)))
        };
        let held = self
            .followers
            .iter()
            .filter(|(id, f)| waited_for(**id, f))
            .map(|(_, f)| f.log_end_offset);
        Some(held.fold(leader_log_end_offset, i64::min))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn announced(leader: i32, epoch: i32, isr: &[i32]) -> LeaderAndIsr {
        LeaderAndIsr::elected(leader, epoch, isr)
    }

    #[test]
    fn a_sole_leader_follows_its_own_log_end() {
        let s = ReplicationState::sole_leader(3);
        assert!(s.is_leader());
        assert_eq!(s.high_watermark_candidate(42, i64::MAX, 0, None), Some(42));
        let mut one = ReplicationState::sole_leader(0);
        assert!(one.apply(1, &[1], &announced(1, 4, &[1]), 0));
        assert_eq!(one.high_watermark_candidate(7, i64::MAX, 0, None), Some(7));
        assert_eq!(one.check_fetch(-1), Ok(()));
        assert_eq!(one.check_fetch(1), Err(ResponseError::NotLeaderOrFollower));
    }

    #[test]
    fn the_role_follows_the_announced_leader() {
        let mut s = ReplicationState::sole_leader(0);
        assert!(s.apply(1, &[1, 2], &announced(2, 5, &[1, 2]), 0));
        assert_eq!(s.role, Role::Follower { leader: 2 });
        assert_eq!(s.high_watermark_candidate(10, i64::MAX, 0, None), None);
        assert_eq!(s.check_fetch(-1), Err(ResponseError::NotLeaderOrFollower));
        assert_eq!(
            s.update_follower(2, 0, 0, 10, 0),
            Err(ResponseError::NotLeaderOrFollower)
        );
        // The same announcement again changes nothing; a new epoch does.
        assert!(!s.apply(1, &[1, 2], &announced(2, 5, &[1, 2]), 0));
        assert!(s.apply(1, &[1, 2], &announced(1, 6, &[1, 2]), 0));
        assert!(s.is_leader());
        assert_eq!(s.leader_epoch, 6);
        let leaderless = announced(-1, 7, &[1]);
        assert!(s.apply(1, &[1, 2], &leaderless, 0));
        assert_eq!(s.role, Role::Follower { leader: -1 });
    }

    #[test]
    fn the_high_watermark_is_the_smallest_log_end_in_the_isr() {
        let mut s = ReplicationState::sole_leader(0);
        s.apply(1, &[1, 2, 3], &announced(1, 1, &[1, 2, 3]), 1_000);
        // New leader epoch: the followers' logs are unknown, so nothing is committed yet.
        assert_eq!(s.high_watermark_candidate(10, i64::MAX, 0, None), Some(-1));
        s.update_follower(2, 10, 0, 10, 1_001).unwrap();
        assert_eq!(
            s.high_watermark_candidate(10, i64::MAX, 0, None),
            Some(-1),
            "3 has not fetched"
        );
        s.update_follower(3, 4, 0, 10, 1_002).unwrap();
        assert_eq!(s.high_watermark_candidate(10, i64::MAX, 0, None), Some(4));
        assert_eq!(s.follower(2).unwrap().last_caught_up_ms, 1_001);
        assert_eq!(s.follower(3).unwrap().last_caught_up_ms, 1_000);
        // Out of the ISR, a slow follower no longer holds the high watermark back.
        s.apply(1, &[1, 2, 3], &announced(1, 1, &[1, 2]), 1_003);
        assert_eq!(s.high_watermark_candidate(12, i64::MAX, 0, None), Some(10));
        assert_eq!(s.follower(3).unwrap().log_end_offset, 4, "same epoch: kept");
        // A replica that is not one of ours is refused.
        assert_eq!(
            s.update_follower(4, 1, 0, 12, 0),
            Err(ResponseError::NotLeaderOrFollower)
        );
        assert_eq!(s.check_fetch(4), Err(ResponseError::NotLeaderOrFollower));
        assert_eq!(s.check_fetch(3), Ok(()));
    }

    #[test]
    fn a_new_leader_epoch_forgets_what_followers_had() {
        let mut s = ReplicationState::sole_leader(0);
        s.apply(1, &[1, 2], &announced(1, 1, &[1, 2]), 0);
        s.update_follower(2, 8, 0, 8, 5).unwrap();
        assert_eq!(s.high_watermark_candidate(8, i64::MAX, 0, None), Some(8));
        s.apply(1, &[1, 2], &announced(1, 2, &[1, 2]), 9);
        let f = s.follower(2).unwrap();
        assert_eq!((f.log_end_offset, f.last_caught_up_ms), (-1, 9));
        assert_eq!(s.high_watermark_candidate(8, i64::MAX, 0, None), Some(-1));
    }

    #[test]
    fn a_pending_isr_change_holds_the_high_watermark_to_the_maximal_isr() {
        let zk = ClusterView::new(1);
        let mut s = ReplicationState::sole_leader(0);
        s.apply(1, &[1, 2, 3], &announced(1, 1, &[1, 2]), 0);
        s.update_follower(2, 10, 0, 10, 1).unwrap();
        s.update_follower(3, 4, 0, 10, 1).unwrap();
        assert_eq!(s.high_watermark_candidate(10, i64::MAX, 0, None), Some(10));
        // 3 is below the high watermark: not proposed yet.
        assert_eq!(s.propose_expand(3, 10, 0, &zk), None);
        s.update_follower(3, 10, 0, 12, 2).unwrap();
        let p = s.propose_expand(3, 10, 0, &zk).unwrap();
        assert_eq!((p.leader_epoch, p.partition_epoch), (1, 1));
        assert_eq!(
            p.new_isr,
            vec![(1, -1), (2, -1), (3, -1)],
            "ZooKeeper mode: no member epochs"
        );
        // While pending, 3 already holds the high watermark, and nothing else is proposed.
        assert_eq!(s.high_watermark_candidate(12, i64::MAX, 0, None), Some(10));
        assert_eq!(s.propose_shrink(12, 1_000_000, 10, &zk), None);
        // A stale answer (older leader epoch) changes nothing; the real one commits.
        let committed = IsrOutcome::Committed {
            leader_epoch: 1,
            partition_epoch: 2,
            isr: vec![1, 2, 3],
        };
        assert!(!s.complete_isr_change(0, &committed));
        assert!(s.complete_isr_change(1, &committed));
        assert_eq!((s.isr.clone(), s.partition_epoch), (vec![1, 2, 3], 2));
        assert_eq!(s.pending_isr, None);
    }

    #[test]
    fn a_shrink_drops_only_followers_lagging_past_the_limit() {
        let zk = ClusterView::new(1);
        let mut s = ReplicationState::sole_leader(0);
        s.apply(1, &[1, 2, 3], &announced(1, 1, &[1, 2, 3]), 0);
        s.update_follower(2, 10, 0, 10, 5_000).unwrap();
        s.update_follower(3, 4, 0, 10, 5_000).unwrap();
        assert_eq!(
            s.propose_shrink(10, 30_000, 30_000, &zk),
            None,
            "not past the limit"
        );
        let p = s.propose_shrink(10, 30_001, 30_000, &zk).unwrap();
        assert_eq!(
            p.new_isr.iter().map(|m| m.0).collect::<Vec<_>>(),
            vec![1, 2]
        );
        // Until the controller answers, 3 still holds the high watermark.
        assert_eq!(s.high_watermark_candidate(10, i64::MAX, 0, None), Some(4));
        // Refused: dropped; the metadata decides.
        assert!(
            !s.complete_isr_change(1, &IsrOutcome::Refused(ResponseError::InvalidUpdateVersion))
        );
        assert_eq!(
            (s.isr.clone(), s.pending_isr.clone()),
            (vec![1, 2, 3], None)
        );
        // A follower at the leader's log end is caught up whatever its last time.
        s.update_follower(3, 10, 0, 10, 6_000).unwrap();
        assert_eq!(s.propose_shrink(10, 100_000, 30_000, &zk), None);
    }

    #[test]
    fn min_insync_counts_the_committed_isr() {
        let mut s = ReplicationState::sole_leader(0);
        assert_eq!(s.isr_size(), 1);
        s.apply(1, &[1, 2, 3], &announced(1, 1, &[1, 2]), 0);
        assert_eq!(s.isr_size(), 2);
    }

    /// A KRaft cluster's metadata: broker 1 (this one) at epoch 10, 2 at 20, 3 at 30.
    fn kraft_cluster() -> ClusterView {
        let cluster = ClusterView::new(1);
        cluster.set_broker_epoch(10);
        cluster.set_registrations(registrations(&[(1, 10), (2, 20), (3, 30)]));
        cluster
    }

    fn registrations(epochs: &[(i32, i64)]) -> std::collections::HashMap<i32, Registration> {
        epochs
            .iter()
            .map(|&(id, epoch)| {
                let r = Registration {
                    epoch,
                    fenced: false,
                    in_controlled_shutdown: false,
                };
                (id, r)
            })
            .collect()
    }

    /// Leader 1 of [1, 2, 3] with ISR [1, 2]; 2 fetched at its epoch, 3 caught up and
    /// fetching at `epoch_of_3`.
    fn caught_up_follower(epoch_of_3: i64) -> ReplicationState {
        let mut s = ReplicationState::sole_leader(0);
        s.apply(1, &[1, 2, 3], &announced(1, 1, &[1, 2]), 0);
        s.update_follower(2, 10, 0, 10, 1).unwrap();
        s.set_follower_broker_epoch(2, 20);
        s.update_follower(3, 10, 0, 10, 1).unwrap();
        if epoch_of_3 >= 0 {
            s.set_follower_broker_epoch(3, epoch_of_3);
        }
        s
    }

    /// KIP-903: a KRaft leader names each member with its broker epoch, its own
    /// registration's and each follower's as its fetches carried it (-1 when a Fetch
    /// before v15 carried none, as a Kafka leader sends it).
    #[test]
    fn a_kraft_leader_proposes_members_with_their_broker_epochs() {
        let cluster = kraft_cluster();
        let mut s = caught_up_follower(30);
        let p = s.propose_expand(3, 10, 0, &cluster).unwrap();
        assert_eq!(p.new_isr, vec![(1, 10), (2, 20), (3, 30)]);
        s.complete_isr_change(
            1,
            &IsrOutcome::Committed {
                leader_epoch: 1,
                partition_epoch: 2,
                isr: vec![1, 2, 3],
            },
        );
        // A shrink names the members it keeps the same way.
        let p = s.propose_shrink(10, 100_000, 30_000, &cluster);
        assert_eq!(p, None, "all at the log end");
        s.update_follower(3, 20, 0, 20, 100_000).unwrap();
        let p = s.propose_shrink(20, 100_000, 30_000, &cluster).unwrap();
        assert_eq!(p.new_isr, vec![(1, 10), (3, 30)]);

        let mut old_fetch = caught_up_follower(-1);
        let p = old_fetch.propose_expand(3, 10, 0, &cluster).unwrap();
        assert_eq!(p.new_isr, vec![(1, 10), (2, 20), (3, -1)]);
    }

    /// Kafka's `isReplicaIsrEligible`: a KRaft leader never proposes a replica the
    /// metadata shows fenced, in controlled shutdown, unregistered, or registered at
    /// another epoch than its fetches carry (it restarted since); it does once the
    /// metadata says otherwise.
    #[test]
    fn a_kraft_leader_adds_only_eligible_replicas_to_the_isr() {
        let cluster = kraft_cluster();
        let with_3 = |fenced: bool, in_controlled_shutdown: bool, epoch: i64| {
            let mut r = registrations(&[(1, 10), (2, 20)]);
            r.insert(
                3,
                Registration {
                    epoch,
                    fenced,
                    in_controlled_shutdown,
                },
            );
            r
        };
        for (why, registrations) in [
            ("fenced", with_3(true, false, 30)),
            ("in controlled shutdown", with_3(false, true, 30)),
            ("registered again since its fetch", with_3(false, false, 31)),
            ("unregistered", registrations(&[(1, 10), (2, 20)])),
        ] {
            cluster.set_registrations(registrations);
            let mut s = caught_up_follower(30);
            assert_eq!(s.propose_expand(3, 10, 0, &cluster), None, "{why}");
            assert_eq!(s.pending_isr, None, "{why}");
        }
        cluster.set_registrations(with_3(false, false, 30));
        let mut s = caught_up_follower(30);
        assert!(s.propose_expand(3, 10, 0, &cluster).is_some(), "eligible");
        // A fetch that carried no epoch is not held against the replica (Kafka's rule).
        cluster.set_registrations(with_3(false, false, 31));
        let mut s = caught_up_follower(-1);
        assert!(s.propose_expand(3, 10, 0, &cluster).is_some(), "no epoch");
        // ZooKeeper mode (no registrations): the controller alone judges.
        let zk = ClusterView::new(1);
        let mut s = caught_up_follower(30);
        let p = s.propose_expand(3, 10, 0, &zk).unwrap();
        assert_eq!(p.new_isr, vec![(1, -1), (2, -1), (3, -1)]);
    }

    /// Kafka's `shouldWaitForReplicaToJoinIsr`: a follower outside the ISR caught up
    /// within `replica.lag.time.max.ms` and eligible for the ISR holds the high watermark
    /// (it is about to join, and must hold everything committed once it does); one caught
    /// up longer ago, fenced, or fetching at another broker epoch than registered does not.
    #[test]
    fn the_high_watermark_waits_for_a_caught_up_eligible_replica_outside_the_isr() {
        let cluster = kraft_cluster();
        // ISR [1, 2]; 3 outside it, caught up to 10 at t=1. The leader is at 15, and 2
        // fetched up to it.
        let mut s = caught_up_follower(30);
        s.update_follower(2, 15, 0, 15, 2_000).unwrap();
        let hw = |s: &ReplicationState, now: i64, c: Option<&ClusterView>| {
            s.high_watermark_candidate(15, now, 30_000, c)
        };
        assert_eq!(
            hw(&s, 2_000, Some(&cluster)),
            Some(10),
            "3 is about to join"
        );
        assert_eq!(
            hw(&s, 30_001, Some(&cluster)),
            Some(10),
            "within the lag time"
        );
        assert_eq!(
            hw(&s, 30_002, Some(&cluster)),
            Some(15),
            "caught up too long ago"
        );
        assert_eq!(
            hw(&s, 2_000, None),
            Some(10),
            "no metadata to judge by: waited for"
        );
        // Not eligible: not waited for.
        let fenced = kraft_cluster();
        let mut r = registrations(&[(1, 10), (2, 20), (3, 30)]);
        r.get_mut(&3).unwrap().fenced = true;
        fenced.set_registrations(r);
        assert_eq!(hw(&s, 2_000, Some(&fenced)), Some(15));
        let restarted = caught_up_follower(29);
        let mut restarted = restarted;
        restarted.update_follower(2, 15, 0, 15, 2_000).unwrap();
        assert_eq!(
            hw(&restarted, 2_000, Some(&cluster)),
            Some(15),
            "fetching at epoch 29"
        );
        // ZooKeeper mode: waited for while the metadata lists the broker alive.
        let zk = ClusterView::new(1);
        let broker = |id| crate::controller::BrokerInfo {
            id,
            host: "h".into(),
            port: 9092,
            rack: None,
        };
        zk.set_brokers(vec![broker(1), broker(2), broker(3)], 1);
        assert_eq!(hw(&s, 2_000, Some(&zk)), Some(10), "3 alive");
        zk.set_brokers(vec![broker(1), broker(2)], 1);
        assert_eq!(hw(&s, 2_000, Some(&zk)), Some(15), "3 stopped");
        // At the leader's log end it holds nothing back (and is caught up whenever).
        s.update_follower(3, 15, 0, 15, 40_000).unwrap();
        assert_eq!(hw(&s, 90_000, Some(&cluster)), Some(15));
        // A follower that never caught up in this leader epoch is not waited for.
        let mut fresh = ReplicationState::sole_leader(0);
        fresh.apply(1, &[1, 2, 3], &announced(1, 1, &[1, 2]), 0);
        fresh.update_follower(2, 15, 0, 15, 5).unwrap();
        fresh.update_follower(3, 3, 0, 15, 5).unwrap();
        assert_eq!(
            fresh.high_watermark_candidate(15, 10, 30_000, Some(&cluster)),
            Some(15)
        );
    }
}
