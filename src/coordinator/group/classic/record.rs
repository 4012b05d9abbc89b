//! A group to and from its GroupMetadataValue record in `__consumer_offsets`.

use bytes::Bytes;
use tokio::time::Instant;

use super::{ms, ClassicGroup, GroupState, Member};
use crate::coordinator::group::records::{GroupValue, MemberValue};

impl ClassicGroup {
    /// Rebuilds a group from its last GroupMetadataValue: Stable with its members (who
    /// must heartbeat within their session timeout), or Empty.
    pub fn restore(group_id: &str, v: GroupValue, now: Instant) -> ClassicGroup {
        let mut g = ClassicGroup::new(group_id, v.current_state_timestamp);
        g.generation_id = v.generation;
        g.protocol_type = (!v.protocol_type.is_empty()).then_some(v.protocol_type);
        g.protocol = v.protocol;
        g.leader = v.leader;
        for m in v.members {
            let protocol = g.protocol.clone().unwrap_or_default();
            if let Some(instance) = &m.group_instance_id {
                g.static_members
                    .insert(instance.clone(), m.member_id.clone());
            }
            // Copies: the record's fields are slices of the batch read from the log.
            let protocols = vec![(protocol, Bytes::copy_from_slice(&m.subscription))];
            g.count_protocols(&protocols, true);
            g.members.insert(
                m.member_id.clone(),
                Member {
                    member_id: m.member_id,
                    group_instance_id: m.group_instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocols,
                    assignment: Bytes::copy_from_slice(&m.assignment),
                    join_waiter: None,
                    sync_waiter: None,
                    heartbeat_deadline: now + ms(m.session_timeout_ms),
                },
            );
        }
        if !g.members.is_empty() {
            g.state = GroupState::Stable;
        }
        g
    }

    /// The group as its GroupMetadataValue record.
    pub fn to_record(&self) -> GroupValue {
        let protocol = self.protocol.clone().unwrap_or_default();
        GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation_id,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: self.state_timestamp_ms,
            members: self
                .members
                .values()
                .map(|m| MemberValue {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }
}
