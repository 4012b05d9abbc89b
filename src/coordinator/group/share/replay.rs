//! Replaying a share group's records: the last value of a key wins and a tombstone
//! removes it. This is how the group changes after a write and how it is rebuilt at
//! load, so both give the same group.

use std::collections::BTreeSet;

use super::heartbeat::by_name;
use super::{ShareGroup, ShareMember, StatePartitions, TopicImage, TopicPartitionsById};
use crate::coordinator::group::records::share::{ShareKey, ShareValue, TopicPartitionsInfo};

impl ShareGroup {
    /// Applies one record; `None` is a tombstone. The group epoch's tombstone removes
    /// the whole group: the caller's to handle.
    pub fn replay(
        &mut self,
        key: ShareKey,
        value: Option<ShareValue>,
        topics: &TopicImage,
    ) -> Result<(), String> {
        match (key, value) {
            (
                ShareKey::Metadata,
                Some(ShareValue::Metadata {
                    epoch,
                    metadata_hash,
                }),
            ) => {
                self.group_epoch = epoch;
                self.metadata_hash = metadata_hash;
            }
            (ShareKey::Member(id), Some(ShareValue::Member(v))) => {
                let m = self.member_for_replay(&id);
                m.rack_id = v.rack_id;
                m.client_id = v.client_id;
                m.client_host = v.client_host;
                m.subscribed = v.subscribed_topic_names;
            }
            (ShareKey::Member(id), None) => {
                self.members.remove(&id);
            }
            (ShareKey::TargetAssignmentMetadata, v) => {
                self.assignment_epoch = match v {
                    Some(ShareValue::TargetAssignmentMetadata { assignment_epoch }) => {
                        assignment_epoch
                    }
                    None => 0,
                    Some(_) => return Err("value does not match its key".into()),
                };
            }
            (ShareKey::TargetAssignment(id), Some(ShareValue::TargetAssignment(tps))) => {
                self.target.insert(id, by_name(tps, topics));
            }
            (ShareKey::TargetAssignment(id), None) => {
                self.target.remove(&id);
            }
            (ShareKey::CurrentAssignment(id), Some(ShareValue::CurrentAssignment(a))) => {
                let m = self.member_for_replay(&id);
                m.member_epoch = a.member_epoch;
                m.previous_epoch = a.previous_member_epoch;
                m.assigned = by_name(a.assigned, topics);
            }
            (ShareKey::CurrentAssignment(id), None) => {
                // The member is leaving; its metadata tombstone follows.
                if let Some(m) = self.members.get_mut(&id) {
                    m.member_epoch = -1;
                    m.previous_epoch = -1;
                    m.assigned.clear();
                }
            }
            (ShareKey::StatePartitionMetadata, v) => {
                self.state_partitions = match v {
                    Some(ShareValue::StatePartitionMetadata(s)) => StatePartitions {
                        initializing: by_topic_id(s.initializing),
                        initialized: by_topic_id(s.initialized),
                        deleting: s
                            .deleting
                            .into_iter()
                            .map(|t| (t.topic_id, t.topic_name))
                            .collect(),
                    },
                    None => StatePartitions::default(),
                    Some(_) => return Err("value does not match its key".into()),
                };
            }
            _ => return Err("value does not match its key".into()),
        }
        Ok(())
    }

    fn member_for_replay(&mut self, id: &str) -> &mut ShareMember {
        self.members
            .entry(id.to_string())
            .or_insert_with(|| ShareMember {
                member_id: id.to_string(),
                ..Default::default()
            })
    }
}

fn by_topic_id(topics: Vec<TopicPartitionsInfo>) -> TopicPartitionsById {
    topics
        .into_iter()
        .map(|t| {
            let ps: BTreeSet<i32> = t.partitions.into_iter().collect();
            (t.topic_id, (t.topic_name, ps))
        })
        .collect()
}
