//! Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups and the
//! expiry of offsets past `offsets.retention.minutes`, all written to
//! `__consumer_offsets` as offset records or their tombstones.

use std::collections::BTreeSet;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::consumer;
use super::consumer_groups::encode;
use super::coordinator::{CommitRequest, Committer, GroupCoordinator, Records};
use super::offsets_topic::{OffsetValue, RecordKey};
use super::state::{Committed, Group, GroupState};
use crate::handlers::now_ms;

impl GroupCoordinator {
    /// Validates and writes a commit. Per partition: the error, if any.
    pub async fn commit_offsets(
        &self,
        group_id: &str,
        who: Committer<'_>,
        expire_timestamp: Option<i64>,
        commits: Vec<CommitRequest>,
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        self.check_coordinator(group_id)?;
        let generation_id = who.generation_id_or_member_epoch;
        {
            let mut groups = self.groups();
            match groups.get(group_id) {
                Some(g) => {
                    g.validate_commit(who.member_id, who.instance, generation_id, who.api_version)?
                }
                None if generation_id < 0 => {
                    let mut g = Group::new(group_id, now_ms());
                    g.initial_delay_ms = self.config.initial_rebalance_delay_ms;
                    groups.insert(group_id.to_string(), g);
                }
                // From v9 (which KIP-848 members use) an unknown group is named as such;
                // older versions keep ILLEGAL_GENERATION.
                None if who.api_version >= 9 => return Err(ResponseError::GroupIdNotFound),
                None => return Err(ResponseError::IllegalGeneration),
            }
        }
        let now = now_ms();
        let mut answers = Vec::with_capacity(commits.len());
        let mut records = Vec::new();
        let mut stored = Vec::new();
        for c in commits {
            let metadata = c.metadata.unwrap_or_default();
            if metadata.len() > self.offsets_topic.metadata_max_bytes {
                answers.push(Some(ResponseError::OffsetMetadataTooLarge));
                continue;
            }
            answers.push(None);
            let key = RecordKey::Offset {
                group: group_id.to_string(),
                topic: c.topic.clone(),
                partition: c.partition,
            };
            let value = OffsetValue {
                offset: c.offset,
                leader_epoch: c.leader_epoch,
                metadata,
                commit_timestamp: now,
                expire_timestamp,
            };
            records.push((key.encode(), Some(value.encode())));
            stored.push((c.topic, c.partition, value));
        }
        if records.is_empty() {
            // Nothing to write: drop a group this request created for nothing.
            let mut groups = self.groups();
            if groups.get(group_id).is_some_and(|g| {
                g.is_empty() && g.offsets.is_empty() && g.generation_id == 0 && g.consumer.is_none()
            }) {
                groups.remove(group_id);
            }
            return Ok(answers);
        }
        let base = match self.append(group_id, records).await {
            Ok(base) => base,
            Err(e) => {
                return Ok(answers.into_iter().map(|a| a.or(Some(e))).collect());
            }
        };
        let mut groups = self.groups();
        // Created above, but the expiry check may have dropped it while we appended.
        let g = groups.entry(group_id.to_string()).or_insert_with(|| {
            let mut g = Group::new(group_id, now);
            g.initial_delay_ms = self.config.initial_rebalance_delay_ms;
            g
        });
        for (i, (topic, partition, value)) in stored.into_iter().enumerate() {
            let record_offset = base + i as i64;
            g.apply_commit(
                &topic,
                partition,
                Committed {
                    value,
                    record_offset,
                },
            );
        }
        Ok(answers)
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
        self.check_coordinator(group_id)?;
        let groups = self.groups();
        if let Some(c) = groups.get(group_id).and_then(|g| g.consumer.as_ref()) {
            c.validate_fetch(member.0, member.1)?;
        }
        let offsets = groups.get(group_id).map(|g| &g.offsets);
        Ok(match partitions {
            Some(list) => list
                .into_iter()
                .map(|(t, p)| {
                    let v = offsets
                        .and_then(|o| o.get(&(t.clone(), p)))
                        .map(|c| c.value.clone());
                    (t, p, v)
                })
                .collect(),
            None => offsets
                .into_iter()
                .flatten()
                .map(|((t, p), c)| (t.clone(), *p, Some(c.value.clone())))
                .collect(),
        })
    }

    /// OffsetDelete: removes a group's offsets for partitions its members do not
    /// consume. Per partition: the error, if any.
    pub async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        self.check_coordinator(group_id)?;
        let mut answers = Vec::with_capacity(partitions.len());
        let mut tombstones = Vec::new();
        {
            let mut groups = self.groups();
            let g = groups
                .get_mut(group_id)
                .ok_or(ResponseError::GroupIdNotFound)?;
            if g.state == GroupState::Dead {
                return Err(ResponseError::GroupIdNotFound);
            }
            let subscribed = if g.is_empty() {
                Some(Vec::new())
            } else {
                g.subscribed_topics()
            };
            let Some(subscribed) = subscribed else {
                return Err(ResponseError::NonEmptyGroup);
            };
            for (topic, partition) in partitions {
                if subscribed.contains(topic) {
                    answers.push(Some(ResponseError::GroupSubscribedToTopic));
                    continue;
                }
                answers.push(None);
                if g.offsets.remove(&(topic.clone(), *partition)).is_some() {
                    tombstones.push(offset_tombstone(group_id, topic, *partition));
                }
            }
        }
        if !tombstones.is_empty() {
            self.append(group_id, tombstones).await?;
        }
        Ok(answers)
    }

    /// DeleteGroups for one group: only an empty group can go; its offsets and metadata
    /// are tombstoned.
    pub async fn delete_group(&self, group_id: &str) -> Result<(), ResponseError> {
        self.check_coordinator(group_id)?;
        let _writing = self.write_lock(self.partition_for(group_id)).lock().await;
        let tombstones = {
            let mut groups = self.groups();
            let g = groups
                .get_mut(group_id)
                .ok_or(ResponseError::GroupIdNotFound)?;
            match g.state {
                GroupState::Dead => return Err(ResponseError::GroupIdNotFound),
                GroupState::Empty if g.is_empty() => {}
                _ => return Err(ResponseError::NonEmptyGroup),
            }
            g.state = GroupState::Dead;
            let g = groups
                .remove(group_id)
                .ok_or(ResponseError::GroupIdNotFound)?;
            group_tombstones(&g)
        };
        self.append(group_id, tombstones).await.map(|_| ())
    }

    /// Tombstones offsets past `offsets.retention.minutes`: every offset of an empty
    /// group counts from when the group became empty (or its commit, if later);
    /// commits with their own expire timestamp (OffsetCommit v1–v4 retention) expire then.
    /// An empty group left without offsets is deleted. One partition at a time, under
    /// its write lock.
    pub async fn expire_offsets(&self, now_ms: i64) {
        let partitions: BTreeSet<i32> = self
            .groups()
            .keys()
            .map(|id| self.partition_for(id))
            .collect();
        for partition in partitions {
            let _writing = self.write_lock(partition).lock().await;
            for (group_id, records) in self.expire_in_partition(partition, now_ms) {
                let _ = self.append(&group_id, records).await;
            }
        }
    }

    fn expire_in_partition(&self, partition: i32, now_ms: i64) -> Vec<(String, Records)> {
        let retention = self.offsets_topic.retention_ms;
        let mut writes: Vec<(String, Records)> = Vec::new();
        let mut groups = self.groups();
        let mut dead = Vec::new();
        for g in groups.values_mut() {
            // Offsets of groups with members live on (a consumer group's members
            // are in `consumer`, its classic state stays Empty).
            if g.state != GroupState::Empty
                || !g.is_empty()
                || self.partition_for(&g.group_id) != partition
            {
                continue;
            }
            let since = g.state_timestamp_ms;
            let expired: Vec<(String, i32)> = g
                .offsets
                .iter()
                .filter(|(_, c)| match c.value.expire_timestamp {
                    Some(t) => now_ms >= t,
                    None => now_ms - c.value.commit_timestamp.max(since) >= retention,
                })
                .map(|(k, _)| k.clone())
                .collect();
            let mut records = Vec::new();
            for (topic, partition) in expired {
                g.offsets.remove(&(topic.clone(), partition));
                records.push(offset_tombstone(&g.group_id, &topic, partition));
            }
            if !records.is_empty() {
                tracing::info!(group = %g.group_id, count = records.len(), "expired committed offsets");
            }
            // An empty group without offsets is gone (Kafka's group cleanup).
            if g.offsets.is_empty() {
                g.state = GroupState::Dead;
                dead.push(g.group_id.clone());
                records.extend(metadata_tombstones(g));
            }
            if !records.is_empty() {
                writes.push((g.group_id.clone(), records));
            }
        }
        for id in dead {
            groups.remove(&id);
        }
        writes
    }
}

fn offset_tombstone(group_id: &str, topic: &str, partition: i32) -> (Bytes, Option<Bytes>) {
    let key = RecordKey::Offset {
        group: group_id.to_string(),
        topic: topic.to_string(),
        partition,
    };
    (key.encode(), None)
}

fn group_tombstones(g: &Group) -> Records {
    let mut out: Vec<_> = g
        .offsets
        .keys()
        .map(|(t, p)| offset_tombstone(&g.group_id, t, *p))
        .collect();
    out.extend(metadata_tombstones(g));
    out
}

/// The tombstones that delete a group's metadata: its KIP-848 records, or its
/// classic GroupMetadata record.
fn metadata_tombstones(g: &Group) -> Records {
    match &g.consumer {
        Some(c) => encode(&g.group_id, consumer::tombstones(c)),
        None => {
            let key = RecordKey::Group {
                group: g.group_id.clone(),
            };
            vec![(key.encode(), None)]
        }
    }
}
