//! OffsetCommit, OffsetFetch, OffsetDelete and the expiry of offsets past
//! `offsets.retention.minutes`, written as offset records or their tombstones. The
//! offsets change only when those records are replayed.

use kafka_protocol::error::ResponseError;

use super::classic::encode_consumer;
use super::share::encode_share;
use super::{Group, GroupShard};
use crate::coordinator::group::classic::GroupState;
use crate::coordinator::group::consumer::tombstones;
use crate::coordinator::group::records::{GroupRecord, OffsetValue, RecordKey, RecordValue};
use crate::coordinator::group::share;
use crate::coordinator::runtime::Written;

/// Expired offsets (and deleted groups) written per batch; more waits for the next one.
const EXPIRED_RECORDS_PER_BATCH: usize = 4096;

/// One partition's commit as the coordinator stores it.
pub struct CommitRequest {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// A partition's committed offset as OffsetFetch answers it, or its error.
pub type FetchedOffset = (String, i32, Result<Option<OffsetValue>, ResponseError>);

/// Who commits: the OffsetCommit fields a group checks.
pub struct Committer {
    pub member_id: String,
    pub instance: Option<String>,
    /// The generation (classic groups) or member epoch (KIP-848 groups); -1 outside.
    pub generation_id_or_member_epoch: i32,
    pub api_version: i16,
}

impl GroupShard {
    /// Validates a commit and returns its records; per partition, the error if any.
    pub fn commit_offsets(
        &self,
        group_id: &str,
        who: &Committer,
        expire_timestamp: Option<i64>,
        commits: Vec<CommitRequest>,
        now_ms: i64,
    ) -> Result<Written<GroupRecord, Vec<Option<ResponseError>>>, ResponseError> {
        let generation_id = who.generation_id_or_member_epoch;
        match self.groups.get(group_id) {
            Some(Group::Classic(g)) => {
                g.validate_commit(&who.member_id, who.instance.as_deref(), generation_id)?
            }
            Some(Group::Consumer(c)) => {
                c.validate_commit(&who.member_id, generation_id, who.api_version)?
            }
            // A share group has no committed offsets (its progress is in
            // __share_group_state), as Kafka refuses them.
            Some(Group::Share(_)) => return Err(ResponseError::GroupIdNotFound),
            // Admin tools and consumers using assign() commit outside any group; the
            // group appears when the commit is replayed.
            None if generation_id < 0 => {}
            // From v9 (which KIP-848 members use) an unknown group is named as such;
            // older versions keep ILLEGAL_GENERATION.
            None if who.api_version >= 9 => return Err(ResponseError::GroupIdNotFound),
            None => return Err(ResponseError::IllegalGeneration),
        }
        let (answers, records) = self.offset_records(group_id, commits, expire_timestamp, now_ms);
        Ok(Written::new(records, answers))
    }

    /// Committed offsets of a group: of the given partitions, or all with `None`.
    /// `member` is OffsetFetch v9's member id and epoch, checked against a KIP-848
    /// group; (None, -1) reads from outside the group.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        member: (Option<&str>, i32),
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<Vec<(String, i32, Option<OffsetValue>)>, ResponseError> {
        if let Some(Group::Consumer(c)) = self.groups.get(group_id) {
            c.validate_fetch(member.0, member.1)?;
        }
        Ok(match partitions {
            Some(list) => list
                .into_iter()
                .map(|(t, p)| {
                    let v = self.offsets.get(group_id, &t, p).map(|c| c.value.clone());
                    (t, p, v)
                })
                .collect(),
            None => self
                .offsets
                .group(group_id)
                .into_iter()
                .flatten()
                .map(|((t, p), c)| (t.clone(), *p, Some(c.value.clone())))
                .collect(),
        })
    }

    /// `fetch_offsets`, each partition with its error: with `require_stable` (OffsetFetch
    /// v7+, read_committed consumers) a partition with a transactional commit not yet
    /// ended is UNSTABLE_OFFSET_COMMIT, which the client retries, as Kafka answers.
    pub fn fetch_stable_offsets(
        &self,
        group_id: &str,
        member: (Option<&str>, i32),
        partitions: Option<Vec<(String, i32)>>,
        require_stable: bool,
    ) -> Result<Vec<FetchedOffset>, ResponseError> {
        let rows = self.fetch_offsets(group_id, member, partitions)?;
        Ok(rows
            .into_iter()
            .map(|(topic, partition, committed)| {
                if require_stable && self.offsets.has_pending(group_id, &topic, partition) {
                    (topic, partition, Err(ResponseError::UnstableOffsetCommit))
                } else {
                    (topic, partition, Ok(committed))
                }
            })
            .collect())
    }

    /// TxnOffsetCommit: validates a transactional producer's commit for the group and
    /// returns its records, written as the producer's transactional batch and pending
    /// until the transaction's marker. Per partition: the error, if any.
    pub fn commit_txn_offsets(
        &self,
        group_id: &str,
        who: &Committer,
        producer: (i64, i16),
        commits: Vec<CommitRequest>,
        now_ms: i64,
    ) -> Result<Written<GroupRecord, Vec<Option<ResponseError>>>, ResponseError> {
        let generation_id = who.generation_id_or_member_epoch;
        match self.groups.get(group_id) {
            Some(Group::Classic(g)) => {
                g.validate_txn_commit(&who.member_id, who.instance.as_deref(), generation_id)?
            }
            Some(Group::Consumer(c)) => c.validate_txn_commit(&who.member_id, generation_id)?,
            Some(Group::Share(_)) => return Err(ResponseError::GroupIdNotFound),
            // A producer outside group management commits to a simple group, which its
            // replay creates.
            None if generation_id < 0 => {}
            None => return Err(ResponseError::IllegalGeneration),
        }
        let (answers, records) = self.offset_records(group_id, commits, None, now_ms);
        Ok(Written::new(records, answers).transactional(producer.0, producer.1))
    }

    /// The records of a commit, and per partition the error (metadata too large).
    fn offset_records(
        &self,
        group_id: &str,
        commits: Vec<CommitRequest>,
        expire_timestamp: Option<i64>,
        now_ms: i64,
    ) -> (Vec<Option<ResponseError>>, Vec<GroupRecord>) {
        let max_metadata_bytes = self.settings.broker().group.offset_metadata_max_bytes;
        let mut answers = Vec::with_capacity(commits.len());
        let mut records = Vec::new();
        for c in commits {
            let metadata = c.metadata.unwrap_or_default();
            if metadata.len() > max_metadata_bytes {
                answers.push(Some(ResponseError::OffsetMetadataTooLarge));
                continue;
            }
            answers.push(None);
            let key = RecordKey::Offset {
                group: group_id.to_string(),
                topic: c.topic,
                partition: c.partition,
            };
            let value = OffsetValue {
                offset: c.offset,
                leader_epoch: c.leader_epoch,
                metadata,
                commit_timestamp: now_ms,
                expire_timestamp,
            };
            records.push((key, Some(RecordValue::Offset(value))));
        }
        (answers, records)
    }

    /// OffsetDelete: tombstones a group's offsets for partitions its members do not
    /// consume. Per partition: the error, if any.
    pub fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Written<GroupRecord, Vec<Option<ResponseError>>>, ResponseError> {
        let group = self
            .groups
            .get(group_id)
            .ok_or(ResponseError::GroupIdNotFound)?;
        let subscribed: Vec<String> = match group {
            Group::Classic(g) if g.state == GroupState::Dead => {
                return Err(ResponseError::GroupIdNotFound)
            }
            g if g.is_empty() => Vec::new(),
            Group::Classic(g) => g.subscribed_topics().ok_or(ResponseError::NonEmptyGroup)?,
            Group::Consumer(c) => c.subscribed_topics().into_iter().collect(),
            Group::Share(_) => return Err(ResponseError::GroupIdNotFound),
        };
        let mut answers = Vec::with_capacity(partitions.len());
        let mut records = Vec::new();
        for (topic, partition) in partitions {
            if subscribed.contains(topic) {
                answers.push(Some(ResponseError::GroupSubscribedToTopic));
                continue;
            }
            answers.push(None);
            // Pending transactional commits go too (Kafka's OffsetDelete does the same).
            if self.offsets.get(group_id, topic, *partition).is_some()
                || self.offsets.has_pending(group_id, topic, *partition)
            {
                records.push(offset_tombstone(group_id, topic, *partition));
            }
        }
        Ok(Written::new(records, answers))
    }

    /// Kafka's `onPartitionsDeleted`: tombstones for every group's offsets of `topics`,
    /// which the metadata no longer has. An empty group left without offsets goes at
    /// the next expiry pass.
    pub fn deleted_topics_offsets(
        &self,
        topics: &std::collections::BTreeSet<String>,
    ) -> Vec<GroupRecord> {
        let mut records = Vec::new();
        for (group_id, offsets) in self.offsets.groups() {
            for (topic, partition) in offsets.keys() {
                if topics.contains(topic) {
                    records.push(offset_tombstone(group_id, topic, *partition));
                }
            }
        }
        records
    }

    /// DeleteGroups for one group: only an empty group can go; its offsets and metadata
    /// are tombstoned, and it is gone once they are written.
    pub fn delete_group(&self, group_id: &str) -> Result<Written<GroupRecord, ()>, ResponseError> {
        let group = self
            .groups
            .get(group_id)
            .ok_or(ResponseError::GroupIdNotFound)?;
        match group {
            Group::Classic(g) if g.state == GroupState::Dead => {
                return Err(ResponseError::GroupIdNotFound)
            }
            Group::Classic(g) if g.state != GroupState::Empty || !g.is_empty() => {
                return Err(ResponseError::NonEmptyGroup)
            }
            Group::Consumer(c) if !c.members.is_empty() => {
                return Err(ResponseError::NonEmptyGroup)
            }
            Group::Share(s) if !s.members.is_empty() => return Err(ResponseError::NonEmptyGroup),
            _ => {}
        }
        let mut records: Vec<GroupRecord> = self
            .offsets
            .group(group_id)
            .into_iter()
            .flatten()
            .map(|((t, p), _)| offset_tombstone(group_id, t, *p))
            .collect();
        // Partitions with only pending transactional commits get one tombstone too, as
        // Kafka's group deletion writes.
        for (t, p) in self.offsets.pending_partitions(group_id) {
            if self.offsets.get(group_id, &t, p).is_none() {
                records.push(offset_tombstone(group_id, &t, p));
            }
        }
        records.extend(metadata_tombstones(group_id, group));
        Ok(Written::new(records, ()))
    }

    /// Tombstones for offsets past `offsets.retention.minutes`: every offset of an empty
    /// group counts from when the group became empty (or its commit, if later); commits
    /// with their own expire timestamp (OffsetCommit v1–v4 retention) expire then. An
    /// empty group left without offsets is deleted. At most one batch's worth; the
    /// second value says whether more is due.
    pub fn expired_offsets(&self, now_ms: i64) -> (Vec<GroupRecord>, bool) {
        let retention = self.settings.broker().group.offsets_retention_ms;
        let mut records = Vec::new();
        for (group_id, group) in &self.groups {
            if records.len() >= EXPIRED_RECORDS_PER_BATCH {
                return (records, true);
            }
            // Offsets of groups with members live on.
            let since = match group {
                Group::Classic(g) if g.state == GroupState::Empty && g.is_empty() => {
                    g.state_timestamp_ms
                }
                Group::Consumer(c) if c.members.is_empty() => 0,
                _ => continue,
            };
            let offsets = self.offsets.group(group_id);
            let mut expired = 0;
            for ((topic, partition), c) in offsets.into_iter().flatten() {
                // An offset a transaction is about to replace is not expired under it.
                if self.offsets.has_pending(group_id, topic, *partition) {
                    continue;
                }
                let due = match c.value.expire_timestamp {
                    Some(t) => now_ms >= t,
                    None => now_ms - c.value.commit_timestamp.max(since) >= retention,
                };
                if due {
                    records.push(offset_tombstone(group_id, topic, *partition));
                    expired += 1;
                }
            }
            if expired > 0 {
                tracing::info!(group = %group_id, count = expired, "expired committed offsets");
            }
            // An empty group without offsets is gone (Kafka's group cleanup).
            if offsets.map_or(0, |o| o.len()) == expired
                && !self.offsets.has_pending_group(group_id)
            {
                records.extend(metadata_tombstones(group_id, group));
            }
        }
        (records, false)
    }
}

fn offset_tombstone(group_id: &str, topic: &str, partition: i32) -> GroupRecord {
    let key = RecordKey::Offset {
        group: group_id.to_string(),
        topic: topic.to_string(),
        partition,
    };
    (key, None)
}

/// The tombstones that delete a group's metadata: its KIP-848 records, or its classic
/// GroupMetadata record.
fn metadata_tombstones(group_id: &str, group: &Group) -> Vec<GroupRecord> {
    match group {
        Group::Consumer(c) => encode_consumer(group_id, tombstones(c)),
        Group::Share(s) => encode_share(group_id, share::heartbeat::tombstones(s)),
        Group::Classic(_) => {
            let key = RecordKey::Group {
                group: group_id.to_string(),
            };
            vec![(key, None)]
        }
    }
}
