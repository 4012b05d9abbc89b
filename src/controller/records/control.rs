//! Control records of the metadata log (`ControlRecordType`): the key is i16 version 0 and
//! i16 type. skua writes one `LeaderChangeMessage` (type 2) at the start of each leader
//! epoch, as Kafka's raft leader does; it reads the types only to skip them.

use super::wire::{Reader, WireError, Writer};

pub const LEADER_CHANGE: i16 = 2;
pub const SNAPSHOT_HEADER: i16 = 3;
pub const SNAPSHOT_FOOTER: i16 = 4;

/// The type of a control record from its key.
pub fn control_type(key: Option<&[u8]>) -> Result<i16, WireError> {
    let mut r = Reader::new(key.ok_or_else(|| WireError("control record without a key".into()))?);
    let version = r.i16()?;
    if version < 0 {
        return Err(WireError(format!("control record key version {version}")));
    }
    r.i16()
}

pub fn key(control_type: i16) -> [u8; 4] {
    let mut k = [0u8; 4];
    k[2..].copy_from_slice(&control_type.to_be_bytes());
    k
}

/// `LeaderChangeMessage` v0: the new leader, the voters, the voters that granted the vote.
pub fn leader_change(leader_id: i32, voters: &[i32]) -> Vec<u8> {
    let mut w = Writer::default();
    w.i16(0);
    w.i32(leader_id);
    for _ in 0..2 {
        // voters, then granting voters: each a struct with its own tagged-field section
        w.uvarint(voters.len() as u32 + 1);
        for &v in voters {
            w.i32(v);
            w.no_tagged_fields();
        }
    }
    w.no_tagged_fields();
    w.buf
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka 4.4's first LeaderChange (DumpLogSegments: valueSize 19,
    /// `{"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}`).
    #[test]
    fn leader_change_matches_kafka() {
        let bytes = leader_change(1, &[1]);
        assert_eq!(
            bytes,
            vec![0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 1, 0, 2, 0, 0, 0, 1, 0, 0]
        );
        assert_eq!(control_type(Some(&key(LEADER_CHANGE))).unwrap(), 2);
        assert!(control_type(None).is_err());
    }
}
