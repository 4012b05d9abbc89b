//! The metadata log: `__cluster_metadata-0` in the metadata log dir, Kafka's own KRaft
//! metadata log, read and appended with skua's log engine.
//!
//! ```text
//! __cluster_metadata-0/
//!   00000000000000000000.log …          record batches of metadata records (records/)
//!   <offset>-<epoch>.checkpoint          Kafka's snapshots (read, never written by skua)
//!   leader-epoch-checkpoint              one entry per leader epoch, kept by the Log
//!   partition.metadata                   topic id AAAAAAAAAAAAAAAAAAAAAQ, Kafka's for this log
//!   quorum-state                         the raft election state (quorum_state.rs)
//! ```
//!
//! Replaying the newest snapshot and the log after it gives the metadata image. skua is the
//! single voter of the quorum: each start takes a new leader epoch, written as Kafka's raft
//! leader does (quorum-state, then a LeaderChangeMessage control batch); every change is
//! then one batch at that epoch, fsynced before it is applied. Nothing is ever rewritten.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use uuid::Uuid;

use crate::log::{Log, LogConfig, LogError, TopicPartition};

use super::image::MetadataImage;
use super::quorum_state::QuorumState;
use super::records::batch::{build_batch, records_of};
use super::records::control::{self, LEADER_CHANGE};
use super::records::MetadataRecord;
use super::snapshot::{self, MAX_BATCH_BYTES};

pub use crate::log::METADATA_LOG_DIR;
/// Where a new metadata log is built before it is renamed into place, so a first start
/// that dies half way leaves no metadata log at all rather than part of one.
const NEW_METADATA_LOG_DIR: &str = "__cluster_metadata-0.skua-new";
/// Kafka's `Topic.METADATA_TOPIC_ID` (Uuid(0, 1)), in the log's partition.metadata.
pub const METADATA_TOPIC_ID: Uuid = Uuid::from_u128(1);
/// Bytes read from the log per step while replaying it.
const REPLAY_READ_BYTES: usize = 1024 * 1024;
/// Records per batch when a long run of independent records is written.
const RECORDS_PER_BATCH: usize = 2000;

pub struct MetadataLog {
    log: Log,
    node_id: i32,
    epoch: i32,
}

/// What replaying the log found.
pub struct Replayed {
    pub image: MetadataImage,
    /// The log ends inside a metadata transaction that never ended: its records were not
    /// applied, and the next write must abort it first.
    pub open_transaction: bool,
    pub records: u64,
}

fn metadata_tp() -> TopicPartition {
    TopicPartition::new("__cluster_metadata", 0)
}

fn corrupt(dir: &Path, why: impl Into<String>) -> LogError {
    LogError::CorruptFile {
        path: dir.to_path_buf(),
        reason: why.into(),
    }
}

impl MetadataLog {
    pub fn exists(parent: &Path) -> bool {
        parent.join(METADATA_LOG_DIR).is_dir()
    }

    /// Writes a new metadata log holding `records` (in batches of at most
    /// `RECORDS_PER_BATCH`, at leader epoch 1 after its LeaderChangeMessage) and renames it
    /// into place. Leftovers of an earlier attempt are skua's own and are replaced.
    pub fn create(
        parent: &Path,
        node_id: i32,
        records: &[MetadataRecord],
        partition_version: u32,
    ) -> Result<(), LogError> {
        let building = parent.join(NEW_METADATA_LOG_DIR);
        if building.exists() {
            std::fs::remove_dir_all(&building)?;
        }
        {
            let log = Log::open(&building, metadata_tp(), LogConfig::default(), 0, 0, true)?;
            let mut batches = vec![leader_change_batch(0, 1, node_id)];
            let mut next = 1;
            for chunk in records.chunks(RECORDS_PER_BATCH) {
                let values: Vec<Vec<u8>> =
                    chunk.iter().map(|r| r.encode(partition_version)).collect();
                batches.push(data_batch(next, 1, &values)?);
                next += chunk.len() as i64;
            }
            log.append_as_follower(Bytes::from(batches.concat()))?;
            log.close()?;
            crate::log::write_partition_metadata_file(&building, METADATA_TOPIC_ID)?;
            QuorumState::default().write(&building, node_id, 1)?;
            crate::log::sync_directory(&building)?;
        }
        std::fs::rename(&building, parent.join(METADATA_LOG_DIR))?;
        crate::log::sync_directory(parent)?;
        Ok(())
    }

    /// Opens the log (recovering a torn tail, as Kafka always does for this log) and
    /// replays the newest usable snapshot and the records after it. Nothing is appended
    /// until `begin_epoch`.
    pub fn open(parent: &Path, node_id: i32) -> Result<(MetadataLog, Replayed), LogError> {
        let dir = parent.join(METADATA_LOG_DIR);
        let log = Log::open(&dir, metadata_tp(), LogConfig::default(), 0, 0, false)?;
        let replayed = replay(&dir, &log)?;
        Ok((
            MetadataLog {
                log,
                node_id,
                epoch: -1,
            },
            replayed,
        ))
    }

    /// Takes a new leader epoch, past every epoch in the log, `quorum-state` and the
    /// snapshots, as Kafka's raft leader does: `quorum-state` first, then a
    /// LeaderChangeMessage control batch.
    pub fn begin_epoch(&mut self) -> Result<(), LogError> {
        let dir = self.log.dir().to_path_buf();
        let quorum = QuorumState::read(&dir)?;
        let snapshot_epoch = snapshot::list(&dir)?.last().map_or(0, |s| s.epoch);
        let last_epoch = [
            self.log.latest_epoch().unwrap_or(0),
            quorum.as_ref().map_or(0, |q| q.leader_epoch),
            snapshot_epoch,
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        let epoch = last_epoch + 1;
        quorum
            .unwrap_or_default()
            .write(&dir, self.node_id, epoch)?;
        let batch = leader_change_batch(self.log.log_end_offset(), epoch, self.node_id);
        self.log.append_as_follower(Bytes::from(batch))?;
        self.log.flush()?;
        self.epoch = epoch;
        Ok(())
    }

    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log.log_end_offset()
    }

    /// Appends each op's records as one batch (so each op is atomic), in one write, and
    /// fsyncs before returning. On failure nothing of it stays in the log.
    pub fn append(
        &self,
        ops: &[Vec<MetadataRecord>],
        partition_version: u32,
    ) -> Result<(), LogError> {
        let start = self.log.log_end_offset();
        let mut next = start;
        let mut bytes = Vec::new();
        for op in ops.iter().filter(|op| !op.is_empty()) {
            let values: Vec<Vec<u8>> = op.iter().map(|r| r.encode(partition_version)).collect();
            bytes.extend_from_slice(&data_batch(next, self.epoch, &values)?);
            next += op.len() as i64;
        }
        if bytes.is_empty() {
            return Ok(());
        }
        let written = self
            .log
            .append_as_follower(Bytes::from(bytes))
            .and_then(|_| self.log.flush());
        if let Err(e) = written {
            if let Err(t) = self.log.truncate_to(start) {
                tracing::error!(error = %t, "cannot take a failed metadata append back out of the log");
            }
            return Err(e);
        }
        Ok(())
    }

    /// Appends independent records (each valid on its own) in batches of a bounded size.
    pub fn append_each(
        &self,
        records: Vec<MetadataRecord>,
        partition_version: u32,
    ) -> Result<(), LogError> {
        let ops: Vec<Vec<MetadataRecord>> = records
            .chunks(RECORDS_PER_BATCH)
            .map(<[MetadataRecord]>::to_vec)
            .collect();
        self.append(&ops, partition_version)
    }

    /// Clean close: flush and trim the active segment's indexes.
    pub fn close(&self) -> Result<(), LogError> {
        self.log.close()
    }

    pub fn dir(&self) -> &Path {
        self.log.dir()
    }
}

/// Removes a metadata log that a first start began building and never finished.
pub fn remove_unfinished(parent: &Path) -> Result<(), LogError> {
    let building = parent.join(NEW_METADATA_LOG_DIR);
    if building.exists() {
        tracing::warn!(dir = %building.display(), "removing a metadata log whose creation did not finish");
        std::fs::remove_dir_all(&building)?;
    }
    Ok(())
}

pub fn metadata_log_dir(parent: &Path) -> PathBuf {
    parent.join(METADATA_LOG_DIR)
}

use crate::clock::now_ms;

fn leader_change_batch(offset: i64, epoch: i32, node_id: i32) -> Vec<u8> {
    let key = control::key(LEADER_CHANGE);
    let value = control::leader_change(node_id, &[node_id]);
    build_batch(offset, epoch, now_ms(), true, &[(Some(&key[..]), &value)])
}

fn data_batch(offset: i64, epoch: i32, values: &[Vec<u8>]) -> Result<Vec<u8>, LogError> {
    let records: Vec<(Option<&[u8]>, &[u8])> = values.iter().map(|v| (None, &v[..])).collect();
    let batch = build_batch(offset, epoch, now_ms(), false, &records);
    if batch.len() > MAX_BATCH_BYTES / 2 {
        // Kafka's raft layer reads batches of up to 8 MiB.
        return Err(LogError::RecordListTooLarge);
    }
    Ok(batch)
}

/// The newest snapshot plus the log from its end offset; with no usable snapshot, the log
/// from its start (which must then be 0).
fn replay(dir: &Path, log: &Log) -> Result<Replayed, LogError> {
    let mut replayed = Replayed {
        image: MetadataImage::default(),
        open_transaction: false,
        records: 0,
    };
    let from = replay_snapshot(dir, log, &mut replayed)?;
    replay_records(dir, log, from, &mut replayed)?;
    Ok(replayed)
}

/// Replays the newest snapshot that reaches the log's start; answers the offset the
/// log's records are replayed from.
fn replay_snapshot(dir: &Path, log: &Log, replayed: &mut Replayed) -> Result<i64, LogError> {
    let log_start = log.log_start_offset();
    let log_end = log.log_end_offset();
    let snapshots = snapshot::list(dir)?;
    if let Some(newest) = snapshots.last().filter(|s| s.end_offset > log_end) {
        // Kafka would cut its log back to nothing and start it at the snapshot; skua does
        // not delete records on its own, so it stops here instead of guessing.
        return Err(corrupt(
            dir,
            format!(
                "snapshot {} ends at offset {} but the log ends at {log_end}",
                newest.path.display(),
                newest.end_offset
            ),
        ));
    }
    let snapshot = snapshots
        .into_iter()
        .rev()
        .find(|s| s.end_offset >= log_start);
    match &snapshot {
        Some(s) => {
            snapshot::read(s, |value| {
                let record = MetadataRecord::decode(value).map_err(|e| e.to_string())?;
                replayed.image.replay(&record)?;
                replayed.records += 1;
                Ok(())
            })
            .map_err(|e| corrupt(dir, e))?;
            Ok(s.end_offset)
        }
        None if log_start == 0 => Ok(0),
        None => Err(corrupt(
            dir,
            format!(
                "the log starts at offset {log_start} and no snapshot covers the records below it"
            ),
        )),
    }
}

/// Replays the log's records from `from`, a metadata transaction's records only once its
/// end is read (an aborted one's never; one still open at the log's end is reported).
fn replay_records(
    dir: &Path,
    log: &Log,
    from: i64,
    replayed: &mut Replayed,
) -> Result<(), LogError> {
    let log_end = log.log_end_offset();
    let mut transaction: Option<Vec<MetadataRecord>> = None;
    let mut offset = from;
    while offset < log_end {
        let data = log.read(offset, REPLAY_READ_BYTES, i64::MAX, true)?;
        if data.records.is_empty() {
            break;
        }
        let mut position = 0;
        while position < data.records.len() {
            let rest = &data.records[position..];
            let header = crate::log::RecordBatchHeader::parse(rest)?;
            let size = header.check_length(rest.len())?;
            let (header, records) = records_of(&rest[..size]).map_err(|e| corrupt(dir, e.0))?;
            position += size;
            offset = header.next_offset();
            if header.is_control() {
                continue;
            }
            for r in records.iter().filter(|r| r.offset >= from) {
                let value = r.value.ok_or_else(|| {
                    corrupt(dir, format!("metadata record {} has no value", r.offset))
                })?;
                let record = MetadataRecord::decode(value)
                    .map_err(|e| corrupt(dir, format!("record at offset {}: {e}", r.offset)))?;
                match (&mut transaction, record) {
                    (None, MetadataRecord::BeginTransaction) => transaction = Some(Vec::new()),
                    (Some(_), MetadataRecord::EndTransaction) => {
                        for r in transaction.take().unwrap_or_default() {
                            apply(dir, &mut replayed.image, &r)?;
                            replayed.records += 1;
                        }
                    }
                    (Some(_), MetadataRecord::AbortTransaction) => transaction = None,
                    (Some(pending), record) => pending.push(record),
                    (None, record) => {
                        apply(dir, &mut replayed.image, &record)?;
                        replayed.records += 1;
                    }
                }
            }
        }
    }
    replayed.open_transaction = transaction.is_some();
    Ok(())
}

fn apply(dir: &Path, image: &mut MetadataImage, record: &MetadataRecord) -> Result<(), LogError> {
    image
        .replay(record)
        .map(|_| ())
        .map_err(|e| corrupt(dir, e))
}
