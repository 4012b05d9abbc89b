//! What a classic group checks before accepting offsets, and what it consumes.

use bytes::{Buf, Bytes};
use kafka_protocol::error::ResponseError;

use super::{ClassicGroup, GroupState};

impl ClassicGroup {
    /// Kafka's checks before a classic group accepts an OffsetCommit.
    pub fn validate_commit(
        &self,
        member_id: &str,
        instance: Option<&str>,
        generation_id: i32,
    ) -> Result<(), ResponseError> {
        if self.state == GroupState::Dead {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        if generation_id < 0 && self.state == GroupState::Empty {
            // Admin tools and consumers using assign() commit outside any generation.
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || instance.is_some() {
            self.check_member(member_id, instance)?;
            if generation_id != self.generation_id {
                return Err(ResponseError::IllegalGeneration);
            }
        } else if self.state != GroupState::Empty {
            return Err(ResponseError::UnknownMemberId);
        }
        if self.state == GroupState::CompletingRebalance {
            return Err(ResponseError::RebalanceInProgress);
        }
        Ok(())
    }

    /// Kafka's checks before a classic group accepts a TxnOffsetCommit: those of
    /// OffsetCommit, except that a request without member id and generation (versions
    /// 0–2) is accepted whatever the state, and a group completing its rebalance is not
    /// refused.
    pub fn validate_txn_commit(
        &self,
        member_id: &str,
        instance: Option<&str>,
        generation_id: i32,
    ) -> Result<(), ResponseError> {
        if self.state == GroupState::Dead {
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        if generation_id < 0 && self.state == GroupState::Empty {
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || instance.is_some() {
            self.check_member(member_id, instance)?;
            if generation_id != self.generation_id {
                return Err(ResponseError::IllegalGeneration);
            }
        }
        Ok(())
    }

    /// Topics the members subscribe to, when the protocol type is `consumer` (the
    /// subscription is ConsumerProtocolSubscription: version, then a topic array).
    pub fn subscribed_topics(&self) -> Option<Vec<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let protocol = self.protocol.clone()?;
        let mut out = Vec::new();
        for m in self.members.values() {
            out.extend(parse_subscription(&m.metadata(&protocol))?);
        }
        Some(out)
    }
}

fn parse_subscription(b: &Bytes) -> Option<Vec<String>> {
    let mut b = b.clone();
    if b.remaining() < 6 {
        return None;
    }
    let _version = b.get_i16();
    let n = b.get_i32();
    let mut topics = Vec::new();
    for _ in 0..n.max(0) {
        if b.remaining() < 2 {
            return None;
        }
        let len = b.get_i16();
        let len = usize::try_from(len).ok()?;
        if b.remaining() < len {
            return None;
        }
        topics.push(String::from_utf8(b.split_to(len).to_vec()).ok()?);
    }
    Some(topics)
}
