//! `quorum-state` in `__cluster_metadata-0`: the raft election state Kafka keeps beside its
//! metadata log (`FileQuorumStateStore`, `QuorumStateData.json`), JSON with a `data_version`
//! of 0 (static voters: also `clusterId`, `appliedOffset`, `currentVoters`) or 1 (KIP-853).
//!
//! skua is the one voter of its quorum: at each start it takes a new leader epoch and
//! records itself as that epoch's leader, in the version the file already had, so Kafka
//! started on the directory later resumes from the same election state it would have left.

use std::path::Path;

use serde_json::{json, Value};

use crate::log::{read_bounded, write_atomic, LogError};

pub const QUORUM_STATE_FILE: &str = "quorum-state";

#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuorumState {
    pub leader_epoch: i32,
    pub data_version: i64,
    /// v0's `currentVoters`, kept as Kafka wrote them.
    current_voters: Option<Value>,
}

impl QuorumState {
    /// The stored state; `None` when there is no file. An unreadable file counts as absent,
    /// as Kafka's raft layer falls back on the log's epoch too.
    pub fn read(dir: &Path) -> Result<Option<QuorumState>, LogError> {
        let path = dir.join(QUORUM_STATE_FILE);
        let Some(bytes) = read_bounded(&path, 64 * 1024)? else {
            return Ok(None);
        };
        let Ok(v) = serde_json::from_slice::<Value>(&bytes) else {
            tracing::warn!(path = %path.display(), "ignoring unreadable quorum-state");
            return Ok(None);
        };
        Ok(Some(QuorumState {
            leader_epoch: v["leaderEpoch"].as_i64().unwrap_or(-1) as i32,
            data_version: v["data_version"].as_i64().unwrap_or(0),
            current_voters: v.get("currentVoters").cloned(),
        }))
    }

    /// Writes `leader_id` as the leader of `epoch`.
    pub fn write(&self, dir: &Path, leader_id: i32, epoch: i32) -> Result<(), LogError> {
        let state = if self.data_version >= 1 {
            json!({
                "leaderId": leader_id,
                "leaderEpoch": epoch,
                "votedId": -1,
                "votedDirectoryId": "AAAAAAAAAAAAAAAAAAAAAA",
                "data_version": 1,
            })
        } else {
            let voters = self
                .current_voters
                .clone()
                .unwrap_or_else(|| json!([{ "voterId": leader_id }]));
            json!({
                "clusterId": "",
                "leaderId": leader_id,
                "leaderEpoch": epoch,
                "votedId": -1,
                "appliedOffset": 0,
                "currentVoters": voters,
                "data_version": 0,
            })
        };
        write_atomic(&dir.join(QUORUM_STATE_FILE), state.to_string().as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_kafka_s_version_and_voters() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(QUORUM_STATE_FILE),
            r#"{"clusterId":"","leaderId":1,"leaderEpoch":1,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":1}],"data_version":0}"#,
        )
        .unwrap();
        let qs = QuorumState::read(dir.path()).unwrap().unwrap();
        assert_eq!((qs.leader_epoch, qs.data_version), (1, 0));
        qs.write(dir.path(), 1, 2).unwrap();
        let v: Value =
            serde_json::from_slice(&std::fs::read(dir.path().join(QUORUM_STATE_FILE)).unwrap())
                .unwrap();
        assert_eq!(v["leaderEpoch"], 2);
        assert_eq!(v["currentVoters"], json!([{ "voterId": 1 }]));

        let v1 = QuorumState {
            data_version: 1,
            ..Default::default()
        };
        v1.write(dir.path(), 3, 9).unwrap();
        let back = QuorumState::read(dir.path()).unwrap().unwrap();
        assert_eq!((back.leader_epoch, back.data_version), (9, 1));
        std::fs::write(dir.path().join(QUORUM_STATE_FILE), "garbage").unwrap();
        assert_eq!(QuorumState::read(dir.path()).unwrap(), None);
    }
}
