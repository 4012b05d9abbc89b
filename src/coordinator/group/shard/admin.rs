//! What ListGroups, DescribeGroups and ConsumerGroupDescribe read from a shard.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::{Group, GroupShard};
use crate::coordinator::group::classic::GroupState;
use crate::coordinator::group::consumer::ConsumerGroup;

pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: &'static str,
    pub group_type: &'static str,
}

/// What DescribeGroups reports for a member.
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

pub struct GroupDescription {
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<MemberDescription>,
}

/// A group as the metrics see it: its members and committed offsets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupOffsetsView {
    pub group_id: String,
    /// `classic`, `consumer` or `share` (Kafka's group-coordinator-metrics `protocol`
    /// tag).
    pub protocol: &'static str,
    /// The state ListGroups reports; `Empty` for a group that only has committed
    /// offsets (a simple consumer's, which Kafka keeps as an empty classic group).
    pub state: &'static str,
    pub members: usize,
    /// (topic, partition, committed offset), in topic and partition order.
    pub offsets: Vec<(String, i32, i64)>,
}

impl GroupShard {
    /// Every group with members or committed offsets (dead ones included, for the
    /// coordinator's counts), for kafka_exporter's `kafka_consumergroup_*` metrics and
    /// Kafka's GroupMetadataManager gauges (groups in order).
    pub fn offsets_view(&self) -> Vec<GroupOffsetsView> {
        let mut out: std::collections::BTreeMap<&str, GroupOffsetsView> = Default::default();
        for (id, g) in &self.groups {
            let (protocol, members) = match g {
                Group::Classic(c) => ("classic", c.members.len()),
                Group::Consumer(c) => ("consumer", c.members.len()),
                Group::Share(s) => ("share", s.members.len()),
            };
            out.insert(
                id,
                GroupOffsetsView {
                    group_id: id.clone(),
                    protocol,
                    state: g.state_name(),
                    members,
                    offsets: Vec::new(),
                },
            );
        }
        for (id, offsets) in self.offsets.groups() {
            let view = out.entry(id).or_insert_with(|| GroupOffsetsView {
                group_id: id.clone(),
                protocol: "classic",
                state: GroupState::Empty.name(),
                members: 0,
                offsets: Vec::new(),
            });
            view.offsets.extend(
                offsets
                    .iter()
                    .map(|((t, p), c)| (t.clone(), *p, c.value.offset)),
            );
        }
        out.into_values().collect()
    }

    pub fn list_groups(&self) -> Vec<ListedGroup> {
        self.groups
            .iter()
            .filter(|(_, g)| !matches!(g, Group::Classic(c) if c.state == GroupState::Dead))
            .map(|(id, g)| ListedGroup {
                group_id: id.clone(),
                protocol_type: match g {
                    Group::Consumer(_) => "consumer".to_string(),
                    Group::Share(_) => "share".to_string(),
                    Group::Classic(c) => c.protocol_type.clone().unwrap_or_default(),
                },
                state: g.state_name(),
                group_type: g.group_type(),
            })
            .collect()
    }

    /// A classic group for DescribeGroups; None when there is none.
    pub fn describe_group(
        &self,
        group_id: &str,
    ) -> Result<Option<GroupDescription>, ResponseError> {
        let g = match self.groups.get(group_id) {
            None => return Ok(None),
            // Kafka describes consumer and share groups with their own describe APIs.
            Some(Group::Consumer(_) | Group::Share(_)) => {
                return Err(ResponseError::GroupIdNotFound)
            }
            Some(Group::Classic(g)) => g,
        };
        // Members' metadata and assignments are reported for a Stable group only.
        let stable = g.state == GroupState::Stable;
        let protocol = g.protocol.clone().unwrap_or_default();
        Ok(Some(GroupDescription {
            state: g.state,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol: if stable {
                protocol.clone()
            } else {
                String::new()
            },
            members: g
                .members
                .values()
                .map(|m| MemberDescription {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(&protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
        }))
    }

    /// A KIP-848 group for ConsumerGroupDescribe.
    pub fn describe_consumer_group(&self, group_id: &str) -> Result<ConsumerGroup, ResponseError> {
        match self.groups.get(group_id) {
            Some(Group::Consumer(c)) => Ok(c.clone()),
            _ => Err(ResponseError::GroupIdNotFound),
        }
    }

    /// A share group, for ShareGroupDescribe.
    pub fn describe_share_group(
        &self,
        group_id: &str,
    ) -> Result<crate::coordinator::group::share::ShareGroup, ResponseError> {
        match self.groups.get(group_id) {
            Some(Group::Share(g)) => Ok(g.clone()),
            _ => Err(ResponseError::GroupIdNotFound),
        }
    }
}
