//! Kafka's checks on OffsetCommit and OffsetFetch against a KIP-848 group: a member
//! commits and fetches at its current member epoch (from OffsetCommit v9 and
//! OffsetFetch v9, which carry it); requests from outside the group carry epoch -1.

use kafka_protocol::error::ResponseError;

use super::ConsumerGroup;

/// The first OffsetCommit version that carries a member epoch; KIP-848 members must use it.
const MEMBER_EPOCH_COMMIT_VERSION: i16 = 9;

impl ConsumerGroup {
    /// OffsetCommit: an epoch of -1 (the admin client, or a consumer assigning its own
    /// partitions) may commit only while the group has no members; anyone else must be
    /// a member at its current epoch.
    pub fn validate_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
        api_version: i16,
    ) -> Result<(), ResponseError> {
        if member_epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let m = self
            .members
            .get(member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        if api_version < MEMBER_EPOCH_COMMIT_VERSION {
            return Err(ResponseError::UnsupportedVersion);
        }
        check_epoch(member_epoch, m.member_epoch)
    }

    /// TxnOffsetCommit: as OffsetCommit, whatever the request version, and a stale
    /// member epoch is ILLEGAL_GENERATION (what transactional producers understand).
    pub fn validate_txn_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
    ) -> Result<(), ResponseError> {
        if member_epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let m = self
            .members
            .get(member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        check_epoch(member_epoch, m.member_epoch).map_err(|_| ResponseError::IllegalGeneration)
    }

    /// OffsetFetch: without a member id and with epoch -1 anyone may read (the admin
    /// client, older request versions); a member id must name a member at its epoch.
    pub fn validate_fetch(
        &self,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), ResponseError> {
        match member_id {
            None if member_epoch < 0 => Ok(()),
            None => Err(ResponseError::UnknownMemberId),
            Some(id) => {
                let m = self.members.get(id).ok_or(ResponseError::UnknownMemberId)?;
                check_epoch(member_epoch, m.member_epoch)
            }
        }
    }
}

/// Any other epoch than the member's is stale, older or newer alike: the member
/// must heartbeat to learn its epoch before it commits or fetches.
fn check_epoch(received: i32, expected: i32) -> Result<(), ResponseError> {
    if received == expected {
        Ok(())
    } else {
        Err(ResponseError::StaleMemberEpoch)
    }
}

#[cfg(test)]
mod tests {
    use super::super::ConsumerMember;
    use super::*;

    fn group_with_member_at(epoch: i32) -> ConsumerGroup {
        let mut g = ConsumerGroup::default();
        g.members.insert(
            "a".into(),
            ConsumerMember {
                member_id: "a".into(),
                member_epoch: epoch,
                ..Default::default()
            },
        );
        g
    }

    #[test]
    fn commits_need_the_member_at_its_epoch_with_version_9() {
        let g = group_with_member_at(3);
        assert_eq!(g.validate_commit("a", 3, 9), Ok(()));
        assert_eq!(
            g.validate_commit("a", 2, 9),
            Err(ResponseError::StaleMemberEpoch)
        );
        assert_eq!(
            g.validate_commit("a", 4, 9),
            Err(ResponseError::StaleMemberEpoch)
        );
        assert_eq!(
            g.validate_commit("x", 3, 9),
            Err(ResponseError::UnknownMemberId)
        );
        // Outside the group while it has members.
        assert_eq!(
            g.validate_commit("", -1, 9),
            Err(ResponseError::UnknownMemberId)
        );
        assert_eq!(
            g.validate_commit("a", 3, 8),
            Err(ResponseError::UnsupportedVersion)
        );
        // An empty group takes commits from outside.
        let empty = ConsumerGroup::default();
        assert_eq!(empty.validate_commit("", -1, 8), Ok(()));
        assert_eq!(
            empty.validate_commit("a", 3, 9),
            Err(ResponseError::UnknownMemberId)
        );
    }

    #[test]
    fn fetches_with_a_member_id_need_the_member_at_its_epoch() {
        let g = group_with_member_at(3);
        assert_eq!(g.validate_fetch(None, -1), Ok(()));
        assert_eq!(g.validate_fetch(Some("a"), 3), Ok(()));
        assert_eq!(
            g.validate_fetch(Some("a"), 2),
            Err(ResponseError::StaleMemberEpoch)
        );
        assert_eq!(
            g.validate_fetch(Some("x"), 3),
            Err(ResponseError::UnknownMemberId)
        );
        assert_eq!(
            g.validate_fetch(None, 3),
            Err(ResponseError::UnknownMemberId)
        );
    }
}
