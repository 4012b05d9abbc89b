//! Moving a hosted replica to another of the broker's log dirs (AlterReplicaLogDirs;
//! Kafka's `ReplicaAlterLogDirsThread`). The future log (`log::future_logs`) copies the
//! current one batch by batch, as a follower copies its leader, while the partition keeps
//! serving; when it has caught up, the partition's appends are held off for the last
//! batches and the switch (`LogManager::replace_current_with_future`).
//!
//! In a KRaft cluster the controller records which log dir holds each replica (KIP-858),
//! and elects only replicas on dirs their broker has online: as Kafka's
//! `ReplicaAlterLogDirsThread` does, a copy that has caught up first has its new dir
//! assigned (AssignReplicasToDirs, [`DirAssigner`]) and switches only once the controller
//! accepted it, so the metadata never names the old dir for a log that left it. Until the
//! switch the broker's placement task leaves a moving replica alone
//! (`LogManager::placement_of`); a move abandoned after its assignment is put back there.
//!
//! The copy follows the current log as a follower follows its leader: a current log
//! truncated under the copy (this broker is a follower whose leader changed) truncates the
//! copy where their leader epochs part; a log start that moved past the copy's end starts
//! the copy again there.

use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use uuid::Uuid;

use super::{Partition, ReplicaManager};
use crate::error::ApiError;
use crate::log::{Log, LogError, TopicPartition};
use kafka_protocol::error::ResponseError;

/// The most one copy step reads from the current log.
const COPY_BYTES_MAX: usize = 1024 * 1024;
/// The most copy steps the switch takes while appends are held off.
const SWITCH_STEPS_MAX: usize = 1000;
/// How long the copier waits when the current log has nothing new for it.
const IDLE_WAIT: Duration = Duration::from_millis(10);
/// How long a copy waits before asking again for a new dir the controller did not accept.
const ASSIGN_RETRY: Duration = Duration::from_secs(1);

/// Where a KRaft broker tells its controller which log dir holds a replica.
#[async_trait]
pub trait DirAssigner: Send + Sync {
    /// Whether the controller accepted that this broker's replica of partition
    /// `partition` of topic `topic_id` is in the log dir whose `directory.id` is `dir`.
    async fn assign(&self, topic_id: Uuid, partition: i32, dir: Uuid) -> bool;
}

impl ReplicaManager {
    /// AlterReplicaLogDirs for one partition: moves `tp` to log dir `dir_index` (see
    /// `LogManager::log_dir_index`). Errors as Kafka's `ReplicaManager.alterReplicaLogDirs`.
    pub fn alter_replica_log_dir(
        self: &Arc<Self>,
        tp: &TopicPartition,
        dir_index: usize,
    ) -> Result<(), ApiError> {
        if self.logs.is_dir_offline(dir_index) {
            return Err(ApiError::new(
                ResponseError::KafkaStorageError,
                "The destination log dir is offline.",
            ));
        }
        let Some(partition) = self.partition(&tp.topic, tp.partition) else {
            return Err(ApiError::new(
                ResponseError::ReplicaNotAvailable,
                "This server does not host this replica.",
            ));
        };
        if partition.log().is_offline() {
            return Err(ApiError::new(
                ResponseError::KafkaStorageError,
                "The replica's log dir is offline.",
            ));
        }
        match self.logs.future_dir_of(tp) {
            Some(d) if d == dir_index => return Ok(()),
            Some(_) => self.logs.abandon_future_log(tp),
            None => {}
        }
        if self.logs.dir_of(tp) == Some(dir_index) {
            return Ok(());
        }
        let future = self
            .logs
            .create_future_log(tp, dir_index, partition.log().config())
            .map_err(|e| ApiError::from(&e))?;
        let manager = Arc::downgrade(self);
        tokio::spawn(copy_then_switch(manager, partition, future));
        Ok(())
    }
}

/// The copier of one move: ends when the switch is done, the future log is abandoned (or
/// replaced by another move's), the broker goes away, or a log fails.
async fn copy_then_switch(
    manager: Weak<ReplicaManager>,
    partition: Arc<Partition>,
    future: Arc<Log>,
) {
    let tp = partition.tp.clone();
    // Whether the controller accepted the new dir (no controller to ask: at once).
    let mut assigned = false;
    loop {
        let Some(m) = manager.upgrade() else { return };
        let ours = m
            .logs
            .future_log(&tp)
            .is_some_and(|f| Arc::ptr_eq(&f, &future));
        if !ours {
            return;
        }
        let (p, f) = (partition.clone(), future.clone());
        let step = tokio::task::spawn_blocking(move || copy_step(&p.log(), &f)).await;
        let caught_up = match step {
            Ok(Ok(caught_up)) => caught_up,
            Ok(Err(e)) => {
                tracing::error!(partition = %tp, error = %e, "moving the replica to another log dir failed; it stays where it is");
                m.logs.abandon_future_log(&tp);
                return;
            }
            Err(e) => {
                tracing::error!(partition = %tp, error = %e, "log dir move task failed");
                m.logs.abandon_future_log(&tp);
                return;
            }
        };
        if !caught_up {
            drop(m);
            tokio::time::sleep(IDLE_WAIT).await;
            continue;
        }
        if !assigned {
            let assigner = m.dir_assigner.get().cloned();
            let dir = m
                .logs
                .future_dir_of(&tp)
                .and_then(|i| m.logs.directory_id_of_dir(i));
            drop(m);
            assigned = match (assigner, dir) {
                (Some(a), Some(dir)) => {
                    let accepted = a.assign(partition.topic_id, tp.partition, dir).await;
                    if accepted {
                        tracing::info!(partition = %tp, %dir, "the controller accepted the replica's new log dir; switching");
                    } else {
                        tokio::time::sleep(ASSIGN_RETRY).await;
                    }
                    accepted
                }
                _ => true,
            };
            // The copy follows the log meanwhile; the switch takes the last batches.
            continue;
        }
        let (p, f, by) = (partition.clone(), future.clone(), m.clone());
        let switched = tokio::task::spawn_blocking(move || switch(&by, &p, &f)).await;
        let failure = match switched {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        tracing::error!(partition = %tp, error = %failure, "switching the replica to its new log dir failed; it stays where it was");
        if m.logs
            .future_log(&tp)
            .is_some_and(|f| Arc::ptr_eq(&f, &future))
        {
            m.logs.abandon_future_log(&tp);
        }
        return;
    }
}

/// With the partition's appends held off: the last batches, then the switch.
fn switch(
    manager: &ReplicaManager,
    partition: &Partition,
    future: &Arc<Log>,
) -> Result<(), LogError> {
    partition.switch_log(|current| {
        // Appends are held off, so this ends: each step copies up to the log end (the
        // bound only guards against a log that never lets the copy reach its end).
        let mut steps = 0;
        while !copy_step(current, future)? {
            steps += 1;
            if steps > SWITCH_STEPS_MAX {
                return Err(LogError::InvalidRecord(format!(
                    "the copy of {} does not reach the log end",
                    partition.tp
                )));
            }
        }
        let still_ours = manager
            .logs
            .future_log(&partition.tp)
            .is_some_and(|f| Arc::ptr_eq(&f, future));
        if !still_ours {
            return Ok(None);
        }
        future.maybe_increment_log_start_offset(current.log_start_offset())?;
        manager
            .logs
            .replace_current_with_future(&partition.tp)
            .map(Some)
    })
}

/// Copies the next batches of `current` onto `future` (at most `COPY_BYTES_MAX`). Returns
/// whether `future` now ends where `current` does. Blocking.
fn copy_step(current: &Log, future: &Log) -> Result<bool, LogError> {
    follow_truncation(current, future)?;
    let from = future.log_end_offset();
    let current_end = current.log_end_offset();
    if from >= current_end {
        return Ok(from == current_end);
    }
    let data = current.read(from, COPY_BYTES_MAX, current_end, true)?;
    if data.records.is_empty() {
        return Ok(false);
    }
    // The first batch holds `from` but may start below it when `from` is a log start
    // inside a batch (DeleteRecords): an empty copy then starts at that batch.
    if let Some(base) = first_base_offset(&data.records) {
        if base < from && future.size_bytes() == 0 {
            future.truncate_fully_and_start_at(base)?;
        }
    }
    future.append_as_follower(data.records)?;
    future.maybe_increment_log_start_offset(current.log_start_offset())?;
    Ok(future.log_end_offset() >= current.log_end_offset())
}

/// Keeps the copy a prefix of the current log: truncated where their leader epochs part
/// (or at the current log's end), restarted at the current log start when that passed it.
fn follow_truncation(current: &Log, future: &Log) -> Result<(), LogError> {
    let future_end = future.log_end_offset();
    if current.log_start_offset() > future_end {
        future.truncate_fully_and_start_at(current.log_start_offset())?;
        return Ok(());
    }
    let mut keep = future_end.min(current.log_end_offset());
    if let Some(epoch) = future.latest_epoch() {
        match current.end_offset_for_epoch(epoch) {
            Some((_, end)) => keep = keep.min(end),
            None => keep = keep.min(current.log_start_offset()),
        }
    }
    if keep < future_end {
        if keep <= future.log_start_offset() {
            future.truncate_fully_and_start_at(current.log_start_offset())?;
        } else {
            future.truncate_to(keep)?;
        }
    }
    Ok(())
}

/// The base offset of the first batch in `records`, if whole enough to say.
fn first_base_offset(records: &Bytes) -> Option<i64> {
    let head: [u8; 8] = records.get(..8)?.try_into().ok()?;
    Some(i64::from_be_bytes(head))
}
