//! Replaying a consumer group's records: the last value of a key wins and a tombstone
//! removes it. This is how the group changes after a write and how it is rebuilt at
//! load, so both give the same group. The indexes kept beside the records (who holds
//! a partition, static members by instance id) are updated on the way.

use std::collections::BTreeMap;

use super::records::by_name;
use super::{flatten, ConsumerGroup, ConsumerMember, TopicImage};
use crate::coordinator::group::records::consumer::{ConsumerKey, ConsumerValue, CurrentAssignment};

impl ConsumerGroup {
    /// Applies one record; `None` is a tombstone. The group's own tombstone (type 3)
    /// is the caller's to handle: it removes the whole group.
    pub fn replay(
        &mut self,
        key: ConsumerKey,
        value: Option<ConsumerValue>,
        topics: &TopicImage,
    ) -> Result<(), String> {
        match (key, value) {
            (ConsumerKey::Metadata, Some(ConsumerValue::Metadata { epoch })) => {
                self.group_epoch = epoch;
            }
            (ConsumerKey::PartitionMetadata, Some(ConsumerValue::PartitionMetadata(ts))) => {
                self.metadata = ts
                    .into_iter()
                    .map(|t| (t.topic_name, t.num_partitions))
                    .collect();
            }
            (ConsumerKey::PartitionMetadata, None) => self.metadata.clear(),
            (ConsumerKey::Member(id), Some(ConsumerValue::Member(v))) => {
                if let Some(old) = self.members.get(&id).and_then(|m| m.instance_id.clone()) {
                    self.forget_instance(&old, &id);
                }
                if let Some(instance) = &v.instance_id {
                    self.static_members.insert(instance.clone(), id.clone());
                }
                let m = self.member_for_replay(&id);
                m.instance_id = v.instance_id;
                m.rack_id = v.rack_id;
                m.client_id = v.client_id;
                m.client_host = v.client_host;
                m.subscribed = v.subscribed_topic_names;
                m.subscribed_regex = v.subscribed_topic_regex;
                m.rebalance_timeout_ms = v.rebalance_timeout_ms;
            }
            (ConsumerKey::Member(id), None) => {
                self.release(&id);
                if let Some(m) = self.members.remove(&id) {
                    if let Some(instance) = &m.instance_id {
                        self.forget_instance(instance, &id);
                    }
                }
            }
            (ConsumerKey::TargetAssignmentMetadata, v) => {
                self.assignment_epoch = match v {
                    Some(ConsumerValue::TargetAssignmentMetadata { assignment_epoch }) => {
                        assignment_epoch
                    }
                    None => 0,
                    Some(_) => return Err("value does not match its key".into()),
                };
            }
            (ConsumerKey::TargetAssignment(id), Some(ConsumerValue::TargetAssignment(tps))) => {
                self.target.insert(id, by_name(tps, topics));
            }
            (ConsumerKey::TargetAssignment(id), None) => {
                self.target.remove(&id);
            }
            (ConsumerKey::CurrentAssignment(id), Some(ConsumerValue::CurrentAssignment(a))) => {
                self.release(&id);
                let m = self.member_for_replay(&id);
                m.member_epoch = a.member_epoch;
                m.previous_epoch = a.previous_member_epoch;
                m.assignment_epochs = epochs_by_name(&a, topics);
                m.assigned = by_name(a.assigned, topics);
                m.pending_revocation = by_name(a.pending_revocation, topics);
                m.sync_assignment_epochs();
                self.hold(&id);
            }
            (ConsumerKey::CurrentAssignment(id), None) => {
                // The member is leaving; its metadata tombstone follows.
                self.release(&id);
                if let Some(m) = self.members.get_mut(&id) {
                    m.member_epoch = -1;
                    m.previous_epoch = -1;
                    m.assigned.clear();
                    m.pending_revocation.clear();
                    m.assignment_epochs.clear();
                }
            }
            (ConsumerKey::RegularExpression(regex), v) => match v {
                Some(ConsumerValue::RegularExpression(r)) => {
                    self.regexes.insert(regex, r.topics);
                }
                None => {
                    self.regexes.remove(&regex);
                }
                Some(_) => return Err("value does not match its key".into()),
            },
            _ => return Err("value does not match its key".into()),
        }
        Ok(())
    }

    fn member_for_replay(&mut self, id: &str) -> &mut ConsumerMember {
        self.members
            .entry(id.to_string())
            .or_insert_with(|| ConsumerMember {
                member_id: id.to_string(),
                ..Default::default()
            })
    }

    fn forget_instance(&mut self, instance: &str, member_id: &str) {
        if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
            self.static_members.remove(instance);
        }
    }

    /// Drops a member's partitions from the holder index.
    fn release(&mut self, member_id: &str) {
        let Some(m) = self.members.get(member_id) else {
            return;
        };
        for (t, p) in flatten(&m.assigned).chain(flatten(&m.pending_revocation)) {
            let key = (t.to_string(), p);
            if self.owners.get(&key).map(String::as_str) == Some(member_id) {
                self.owners.remove(&key);
            }
        }
    }

    /// Records a member's partitions in the holder index.
    fn hold(&mut self, member_id: &str) {
        let Some(m) = self.members.get(member_id) else {
            return;
        };
        for (t, p) in flatten(&m.assigned).chain(flatten(&m.pending_revocation)) {
            self.owners
                .insert((t.to_string(), p), member_id.to_string());
        }
    }
}

/// Record 8's AssignmentEpochs by topic name and partition. A topic whose epochs do not
/// line up with its partitions (or has none: a record from before Kafka 4.4) gets none
/// here, so its partitions take the member's epoch, as Kafka falls back to.
fn epochs_by_name(a: &CurrentAssignment, topics: &TopicImage) -> BTreeMap<(String, i32), i32> {
    let mut out = BTreeMap::new();
    for tp in a.assigned.iter().chain(&a.pending_revocation) {
        if tp.assignment_epochs.len() != tp.partitions.len() {
            continue;
        }
        let Some(name) = topics.topic_name(tp.topic_id) else {
            continue;
        };
        for (p, e) in tp.partitions.iter().zip(&tp.assignment_epochs) {
            out.insert((name.to_string(), *p), *e);
        }
    }
    out
}
