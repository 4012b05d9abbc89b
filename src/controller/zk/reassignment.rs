//! A partition's replica assignment while it may be moving (Kafka's `ReplicaAssignment`,
//! KIP-455), the checks a requested target goes through, and the legacy
//! `/admin/reassign_partitions` znode. Pure: the controller's steps are in
//! `partition_reassignment`.
//!
//! During a reassignment the assignment znode lists the full replica set
//! RS = TRS ++ ORS (target first, then the original replicas not in the target), with
//! `adding_replicas` = RS − ORS and `removing_replicas` = RS − TRS. ZooKeeper is the only
//! place the original replicas are kept, so a new controller (skua or Kafka) can finish
//! or cancel what an earlier one started.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;
use serde::{Deserialize, Serialize};

use super::context::TopicPartition;

/// Where Kafka's tools before KIP-455 (and operators) ask for reassignments.
pub const REASSIGN_PARTITIONS: &str = "/admin/reassign_partitions";

/// A reassignment's failure for one partition: the error code and its message.
pub type ReassignmentError = (ResponseError, Option<String>);

/// Kafka's default message for the errors these APIs answer with, which Kafka's
/// `ApiError` sends when nothing more specific was said.
pub fn default_message(e: ResponseError) -> Option<String> {
    let m = match e {
        ResponseError::NotController => "This is not the correct controller for this cluster.",
        ResponseError::NoReassignmentInProgress => "No partition reassignment is in progress.",
        ResponseError::UnknownServerError => {
            "The server experienced an unexpected error when processing the request."
        }
        ResponseError::InvalidReplicaAssignment => "Replica assignment is invalid.",
        ResponseError::UnknownTopicOrPartition => "This server does not host this topic-partition.",
        _ => return None,
    };
    Some(m.to_string())
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplicaAssignment {
    /// RS: every replica, target ones first.
    pub replicas: Vec<i32>,
    /// AR: replicas being added.
    pub adding: Vec<i32>,
    /// RR: replicas being removed.
    pub removing: Vec<i32>,
}

/// `a` without the members of `b`, order kept (Scala's `diff` on distinct lists).
fn diff(a: &[i32], b: &[i32]) -> Vec<i32> {
    a.iter().copied().filter(|x| !b.contains(x)).collect()
}

impl ReplicaAssignment {
    /// An assignment that is not moving.
    pub fn settled(replicas: Vec<i32>) -> Self {
        ReplicaAssignment {
            replicas,
            adding: Vec::new(),
            removing: Vec::new(),
        }
    }

    /// ORS: the replicas before the reassignment.
    pub fn origin(&self) -> Vec<i32> {
        diff(&self.replicas, &self.adding)
    }

    /// TRS: the replicas once it is done.
    pub fn target(&self) -> Vec<i32> {
        diff(&self.replicas, &self.removing)
    }

    pub fn is_being_reassigned(&self) -> bool {
        !self.adding.is_empty() || !self.removing.is_empty()
    }

    /// Moving towards `target` from this assignment's original replicas (a reassignment
    /// already under way is replaced; its original replicas stay the origin).
    pub fn reassign_to(&self, target: &[i32]) -> ReplicaAssignment {
        let origin = self.origin();
        let mut full: Vec<i32> = Vec::with_capacity(target.len() + origin.len());
        for &r in target.iter().chain(origin.iter()) {
            if !full.contains(&r) {
                full.push(r);
            }
        }
        ReplicaAssignment {
            adding: diff(&full, &origin),
            removing: diff(&full, target),
            replicas: full,
        }
    }

    /// The assignment a request asks for: `Some(target)` moves there, `None` cancels the
    /// reassignment under way (back to the original replicas). None when there is nothing
    /// to cancel (Kafka's `maybeBuildReassignment`).
    pub fn build(&self, target: Option<&[i32]>) -> Option<ReplicaAssignment> {
        match target {
            Some(t) => Some(self.reassign_to(t)),
            None if self.is_being_reassigned() => Some(self.reassign_to(&self.origin())),
            None => None,
        }
    }
}

/// Kafka's `validateReplicas` for a target asked through AlterPartitionReassignments:
/// not empty, no duplicates, no negative ids, and every replica being added alive.
pub fn validate_target(
    current: &ReplicaAssignment,
    target: &[i32],
    live_brokers: &BTreeSet<i32>,
) -> Result<(), ReassignmentError> {
    let invalid = |m: String| Err((ResponseError::InvalidReplicaAssignment, Some(m)));
    let distinct: BTreeSet<i32> = target.iter().copied().collect();
    if target.is_empty() {
        return invalid("Empty replica list specified in partition reassignment.".into());
    }
    if distinct.len() != target.len() {
        return invalid(format!(
            "Duplicate replica ids in partition reassignment replica list: {target:?}"
        ));
    }
    if target.iter().any(|&r| r < 0) {
        return invalid(format!("Invalid broker id in replica list: {target:?}"));
    }
    let adding = current.reassign_to(target).adding;
    if adding.iter().any(|r| !live_brokers.contains(r)) {
        return invalid(format!(
            "Replica assignment has brokers that are not alive. Replica list: {adding:?}, live broker list: {live_brokers:?}"
        ));
    }
    Ok(())
}

/// `/admin/reassign_partitions` as Kafka writes it (version 1).
#[derive(Debug, Serialize, Deserialize)]
struct LegacyReassignment {
    version: i32,
    partitions: Vec<LegacyPartition>,
}

#[derive(Debug, Serialize, Deserialize)]
struct LegacyPartition {
    topic: String,
    partition: i32,
    replicas: Vec<i32>,
}

/// The targets a `/admin/reassign_partitions` znode asks for (None when unreadable).
pub fn parse_legacy(data: &[u8]) -> Option<BTreeMap<TopicPartition, Vec<i32>>> {
    let z: LegacyReassignment = serde_json::from_slice(data).ok()?;
    Some(
        z.partitions
            .into_iter()
            .map(|p| (TopicPartition::new(p.topic, p.partition), p.replicas))
            .collect(),
    )
}

/// The znode for the reassignments still asked for, as Kafka encodes it.
pub fn encode_legacy(partitions: &BTreeMap<TopicPartition, Vec<i32>>) -> Vec<u8> {
    let z = LegacyReassignment {
        version: 1,
        partitions: partitions
            .iter()
            .map(|(tp, r)| LegacyPartition {
                topic: tp.topic.clone(),
                partition: tp.partition,
                replicas: r.clone(),
            })
            .collect(),
    };
    serde_json::to_vec(&z).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reassign_lists_target_first_then_the_origin() {
        // Kafka's example: [1,2,3] → [3,4,2] is [3,4,2,1] while it runs.
        let a = ReplicaAssignment::settled(vec![1, 2, 3]).reassign_to(&[3, 4, 2]);
        assert_eq!(a.replicas, vec![3, 4, 2, 1]);
        assert_eq!(a.adding, vec![4]);
        assert_eq!(a.removing, vec![1]);
        assert_eq!(a.origin(), vec![3, 2, 1]);
        assert_eq!(a.target(), vec![3, 4, 2]);
        assert!(a.is_being_reassigned());
        // 1,2 → 2,3
        let b = ReplicaAssignment::settled(vec![1, 2]).reassign_to(&[2, 3]);
        assert_eq!(
            (b.replicas, b.adding, b.removing),
            (vec![2, 3, 1], vec![3], vec![1])
        );
    }

    #[test]
    fn replacing_a_reassignment_keeps_the_original_replicas() {
        let moving = ReplicaAssignment::settled(vec![1, 2]).reassign_to(&[3, 4]);
        let again = moving.reassign_to(&[2, 5]);
        assert_eq!(again.replicas, vec![2, 5, 1]);
        assert_eq!(again.adding, vec![5]);
        assert_eq!(again.removing, vec![1]);
        // Cancel: back to the origin (in Kafka's order: the origin as RS listed it),
        // nothing moving.
        let cancelled = again.build(None).unwrap();
        assert_eq!(cancelled.target(), vec![2, 1]);
        assert!(!cancelled.is_being_reassigned());
        assert_eq!(ReplicaAssignment::settled(vec![1]).build(None), None);
        // Same target as now: nothing to move.
        let same = ReplicaAssignment::settled(vec![1, 2]).reassign_to(&[1, 2]);
        assert!(!same.is_being_reassigned());
    }

    #[test]
    fn targets_are_validated_as_kafka_does() {
        let live = BTreeSet::from([1, 2, 3]);
        let cur = ReplicaAssignment::settled(vec![1, 2]);
        let code = |t: &[i32]| validate_target(&cur, t, &live).err().map(|e| e.0);
        assert_eq!(code(&[2, 3]), None);
        assert_eq!(code(&[]), Some(ResponseError::InvalidReplicaAssignment));
        assert_eq!(code(&[2, 2]), Some(ResponseError::InvalidReplicaAssignment));
        assert_eq!(
            code(&[2, -1]),
            Some(ResponseError::InvalidReplicaAssignment)
        );
        assert_eq!(code(&[2, 9]), Some(ResponseError::InvalidReplicaAssignment));
        // A dead broker that is already a replica may stay.
        let cur = ReplicaAssignment::settled(vec![1, 7]);
        assert_eq!(validate_target(&cur, &[7, 2], &live).err(), None);
    }

    #[test]
    fn legacy_znode_round_trips() {
        let data = br#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}"#;
        let got = parse_legacy(data).unwrap();
        assert_eq!(
            got,
            BTreeMap::from([(TopicPartition::new("t", 0), vec![2, 3])])
        );
        assert_eq!(encode_legacy(&got), data.to_vec());
        assert_eq!(parse_legacy(b"{}"), None);
    }
}
