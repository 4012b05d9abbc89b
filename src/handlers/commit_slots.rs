//! The partitions of an OffsetCommit or TxnOffsetCommit request, in request order: each
//! either refused before the commit (a partition that does not exist) or given a slot in
//! the commit sent to the group coordinator, whose per-slot answer it then takes.

use kafka_protocol::error::ResponseError;

use crate::controller::TopicInfo;
use crate::coordinator::group::shard::CommitRequest;

#[derive(Default)]
pub struct CommitSlots {
    /// (topic index in the request, partition, refusal or slot in `commits`).
    slots: Vec<(usize, i32, Result<usize, ResponseError>)>,
    pub commits: Vec<CommitRequest>,
}

impl CommitSlots {
    /// Adds the request's topic `t`, partition `commit.partition`: refused with
    /// UNKNOWN_TOPIC_OR_PARTITION unless `known` has that partition.
    pub fn add(&mut self, t: usize, known: Option<&TopicInfo>, commit: CommitRequest) {
        let p = commit.partition;
        let exists = known.is_some_and(|k| p >= 0 && (p as usize) < k.partitions.len());
        if !exists {
            self.slots
                .push((t, p, Err(ResponseError::UnknownTopicOrPartition)));
            return;
        }
        self.slots.push((t, p, Ok(self.commits.len())));
        self.commits.push(commit);
    }

    /// Adds the request's topic `t`, partition `partition`, refused with `error` (a topic
    /// the requester may not read).
    pub fn refuse(&mut self, t: usize, partition: i32, error: ResponseError) {
        self.slots.push((t, partition, Err(error)));
    }

    /// Each partition's (topic index, partition, error) once the commit answered
    /// `results` (per slot, or one error for all).
    pub fn answers(
        self,
        results: &Result<Vec<Option<ResponseError>>, ResponseError>,
    ) -> impl Iterator<Item = (usize, i32, Option<ResponseError>)> + '_ {
        self.slots.into_iter().map(move |(t, partition, slot)| {
            let error = match (slot, results) {
                (Err(e), _) => Some(e),
                (Ok(_), Err(e)) => Some(*e),
                (Ok(i), Ok(r)) => r.get(i).copied().flatten(),
            };
            (t, partition, error)
        })
    }
}
