//! Idempotent-producer state of one partition (Kafka's `ProducerStateManager`) and its
//! snapshot files.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use super::batch::{decrement_sequence, RecordBatchHeader};
use super::checkpoint::{read_small, write_atomic, write_unsynced, SmallFile};
use super::control::EndTxnMarker;
use super::{offset_file_name, parse_offset_file_name, LogError};

pub const SNAPSHOT_SUFFIX: &str = ".snapshot";
/// Batches remembered per producer for duplicate detection (Kafka's NUM_BATCHES_TO_RETAIN).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;
const SNAPSHOT_VERSION: i16 = 1;
const SNAPSHOT_HEADER_BYTES: usize = 10;
const SNAPSHOT_ENTRY_BYTES: usize = 46;
/// Snapshots above this size are treated as corrupt rather than read into memory.
const MAX_SNAPSHOT_BYTES: u64 = 512 * 1024 * 1024;

/// One appended batch of a producer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
    pub timestamp: i64,
}

/// A producer's last `NUM_BATCHES_TO_RETAIN` batches, oldest first, kept inline: a
/// producer costs no allocation of its own, and serialising a snapshot (done under the
/// partition lock) follows no pointer per producer.
#[derive(Clone, Copy, Debug, Default)]
pub struct RecentBatches {
    slots: [BatchMetadata; NUM_BATCHES_TO_RETAIN],
    /// Slot of the oldest batch.
    start: usize,
    len: usize,
}

impl RecentBatches {
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn iter(&self) -> impl Iterator<Item = &BatchMetadata> {
        (0..self.len).map(move |i| &self.slots[(self.start + i) % NUM_BATCHES_TO_RETAIN])
    }
    pub fn back(&self) -> Option<&BatchMetadata> {
        self.iter().last()
    }
    /// Adds the newest batch, forgetting the oldest when all slots are taken.
    pub fn push(&mut self, batch: BatchMetadata) {
        let slot = (self.start + self.len) % NUM_BATCHES_TO_RETAIN;
        self.slots[slot] = batch;
        if self.len == NUM_BATCHES_TO_RETAIN {
            self.start = (self.start + 1) % NUM_BATCHES_TO_RETAIN;
        } else {
            self.len += 1;
        }
    }
    pub fn clear(&mut self) {
        (self.start, self.len) = (0, 0);
    }
}

impl PartialEq for RecentBatches {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for RecentBatches {}

/// What the partition knows about one producer id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerStateEntry {
    pub producer_id: i64,
    pub epoch: i16,
    /// The last `NUM_BATCHES_TO_RETAIN` batches, oldest first.
    pub batches: RecentBatches,
    pub coordinator_epoch: i32,
    pub current_txn_first_offset: Option<i64>,
    pub last_timestamp: i64,
}

impl ProducerStateEntry {
    fn empty(producer_id: i64) -> Self {
        ProducerStateEntry {
            producer_id,
            epoch: -1,
            batches: RecentBatches::default(),
            coordinator_epoch: -1,
            current_txn_first_offset: None,
            last_timestamp: -1,
        }
    }

    fn last_seq(&self) -> i32 {
        self.batches.back().map_or(-1, |b| b.last_seq)
    }

    /// A new epoch forgets the old epoch's batches.
    fn maybe_update_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
    }

    fn add_batch(&mut self, h: &RecordBatchHeader) {
        self.maybe_update_epoch(h.producer_epoch());
        self.batches.push(BatchMetadata {
            first_seq: h.base_sequence(),
            last_seq: h.last_sequence(),
            first_offset: h.base_offset(),
            last_offset: h.last_offset(),
            timestamp: h.max_timestamp(),
        });
        self.last_timestamp = h.max_timestamp();
    }
}

/// A producer's last record in the log (Kafka's `LastRecord`): the last offset of its
/// last data batch, which holds its last sequence; without one (a marker of a newer epoch
/// came after its batches), its last marker is the batch carrying its epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastRecord {
    pub last_data_offset: Option<i64>,
    pub producer_epoch: i16,
}

/// Who appends (Kafka's `AppendOrigin`): a client's batches are checked for sequence
/// continuity; a coordinator's transactional batches carry no sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendOrigin {
    Client,
    Coordinator,
}

/// Entries changed by the batches of one append, applied only once the bytes are written.
pub type StagedProducers = HashMap<i64, ProducerStateEntry>;

/// Per-producer state: epoch fencing, sequence continuity and duplicate detection.
///
/// Snapshot file `<20-digit map end offset>.snapshot` (the offset is exclusive: the state
/// covers every batch below it), Kafka's `ProducerSnapshot` v1, big-endian:
/// `i16 version=1, u32 crc, i32 count, count × { i64 producerId, i16 epoch, i32 lastSequence,
/// i64 lastOffset, i32 offsetDelta, i64 timestamp, i32 coordinatorEpoch,
/// i64 currentTxnFirstOffset (-1 if none) }`. The CRC-32C covers bytes 6..EOF. Only each
/// producer's last batch survives a snapshot, as in Kafka.
pub struct ProducerStateManager {
    dir: PathBuf,
    producers: HashMap<i64, ProducerStateEntry>,
    /// Open transactions as (first offset, producer id), oldest first (Kafka's
    /// `ongoingTxns`): the first is the first unstable offset.
    ongoing: BTreeSet<(i64, i64)>,
    /// The state reflects every batch below this offset.
    map_end_offset: i64,
}

impl ProducerStateManager {
    pub fn new(dir: &Path, map_end_offset: i64) -> Self {
        ProducerStateManager {
            dir: dir.to_path_buf(),
            producers: HashMap::new(),
            ongoing: BTreeSet::new(),
            map_end_offset,
        }
    }

    fn with_producers(
        dir: &Path,
        producers: HashMap<i64, ProducerStateEntry>,
        map_end_offset: i64,
    ) -> Self {
        let ongoing = producers
            .values()
            .filter_map(|e| e.current_txn_first_offset.map(|o| (o, e.producer_id)))
            .collect();
        ProducerStateManager {
            dir: dir.to_path_buf(),
            producers,
            ongoing,
            map_end_offset,
        }
    }

    /// Puts `entry` in place, keeping the open transactions in step.
    fn put(&mut self, entry: ProducerStateEntry) {
        let pid = entry.producer_id;
        if let Some(first) = self
            .producers
            .get(&pid)
            .and_then(|e| e.current_txn_first_offset)
        {
            self.ongoing.remove(&(first, pid));
        }
        if let Some(first) = entry.current_txn_first_offset {
            self.ongoing.insert((first, pid));
        }
        self.producers.insert(pid, entry);
    }

    /// The first offset of the oldest open transaction: records from there on are not
    /// stable yet (read_committed consumers stop before it).
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.first().map(|&(o, _)| o)
    }

    /// The last stable offset once `producer_id`'s transaction, whose marker is at
    /// `marker_offset`, has ended (Kafka's `lastStableOffset(completedTxn)`): the oldest
    /// other open transaction's first offset, else the offset after the marker.
    pub fn last_stable_offset_after(&self, producer_id: i64, marker_offset: i64) -> i64 {
        self.ongoing
            .iter()
            .find(|&&(_, pid)| pid != producer_id)
            .map_or(marker_offset + 1, |&(o, _)| o)
    }

    /// The producers with an open transaction: (producer id, epoch, first offset).
    pub fn ongoing_transactions(&self) -> Vec<(i64, i16, i64)> {
        self.ongoing
            .iter()
            .filter_map(|&(o, pid)| self.producers.get(&pid).map(|e| (pid, e.epoch, o)))
            .collect()
    }

    /// Every producer this partition knows, for DescribeProducers.
    pub fn producers(&self) -> impl Iterator<Item = &ProducerStateEntry> {
        self.producers.values()
    }

    /// Whether `producer_id` at `epoch` has a transaction open here.
    pub fn has_ongoing_txn(&self, producer_id: i64, epoch: i16) -> bool {
        self.producers
            .get(&producer_id)
            .is_some_and(|e| e.epoch == epoch && e.current_txn_first_offset.is_some())
    }

    pub fn map_end_offset(&self) -> i64 {
        self.map_end_offset
    }
    pub fn set_map_end_offset(&mut self, offset: i64) {
        self.map_end_offset = offset;
    }
    /// What the partition knows about `producer_id`.
    pub fn entry(&self, producer_id: i64) -> Option<&ProducerStateEntry> {
        self.producers.get(&producer_id)
    }
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Each producer's last record in the log, for the cleaner to keep that batch's
    /// header (Kafka's `lastRecordsOfActiveProducers`).
    pub fn last_records(&self) -> HashMap<i64, LastRecord> {
        self.producers
            .iter()
            .map(|(&pid, e)| {
                let last = LastRecord {
                    last_data_offset: e.batches.back().map(|b| b.last_offset),
                    producer_epoch: e.epoch,
                };
                (pid, last)
            })
            .collect()
    }

    /// A batch with the same producer epoch and sequence range as one of the last five.
    pub fn find_duplicate(&self, h: &RecordBatchHeader) -> Option<BatchMetadata> {
        let entry = self.producers.get(&h.producer_id())?;
        if entry.epoch != h.producer_epoch() {
            return None;
        }
        entry
            .batches
            .iter()
            .find(|b| b.first_seq == h.base_sequence() && b.last_seq == h.last_sequence())
            .copied()
    }

    /// Checks a client batch (with offsets already assigned) against the producer's state
    /// and records it in `staged` (Kafka's `ProducerAppendInfo.append`, client origin).
    pub fn stage(
        &self,
        staged: &mut StagedProducers,
        h: &RecordBatchHeader,
        origin: AppendOrigin,
    ) -> Result<(), LogError> {
        let producer_id = h.producer_id();
        let current_epoch = self.producers.get(&producer_id).map_or(-1, |e| e.epoch);
        let entry = staged.entry(producer_id).or_insert_with(|| {
            self.producers
                .get(&producer_id)
                .cloned()
                .unwrap_or_else(|| ProducerStateEntry::empty(producer_id))
        });
        let epoch = h.producer_epoch();
        if entry.epoch >= 0 && epoch < entry.epoch {
            return Err(LogError::InvalidProducerEpoch {
                producer_id,
                epoch,
                current_epoch: entry.epoch,
            });
        }
        if !h.is_control() && origin == AppendOrigin::Client {
            let first_seq = h.base_sequence();
            if epoch != entry.epoch {
                // A bumped epoch restarts sequences at 0; an unknown producer may start anywhere.
                if first_seq != 0 && entry.epoch >= 0 {
                    return Err(LogError::OutOfOrderSequence {
                        producer_id,
                        last_sequence: entry.last_seq(),
                        first_sequence: first_seq,
                    });
                }
            } else if current_epoch >= 0 && !in_sequence(entry.last_seq(), first_seq) {
                return Err(LogError::OutOfOrderSequence {
                    producer_id,
                    last_sequence: entry.last_seq(),
                    first_sequence: first_seq,
                });
            }
        }
        apply(entry, h);
        Ok(())
    }

    /// Checks a transaction marker written by the coordinator (Kafka's
    /// `ProducerAppendInfo.appendEndTxnMarker`) and records it in `staged`: an older
    /// producer epoch is fenced, an older coordinator epoch is a deposed coordinator's.
    /// Returns the first offset of the transaction it ends, if one was open.
    pub fn stage_marker(
        &self,
        staged: &mut StagedProducers,
        h: &RecordBatchHeader,
        marker: EndTxnMarker,
    ) -> Result<Option<i64>, LogError> {
        let producer_id = h.producer_id();
        let entry = staged.entry(producer_id).or_insert_with(|| {
            self.producers
                .get(&producer_id)
                .cloned()
                .unwrap_or_else(|| ProducerStateEntry::empty(producer_id))
        });
        if entry.epoch >= 0 && h.producer_epoch() < entry.epoch {
            return Err(LogError::InvalidProducerEpoch {
                producer_id,
                epoch: h.producer_epoch(),
                current_epoch: entry.epoch,
            });
        }
        if marker.coordinator_epoch < entry.coordinator_epoch {
            return Err(LogError::TransactionCoordinatorFenced {
                producer_id,
                coordinator_epoch: marker.coordinator_epoch,
                current: entry.coordinator_epoch,
            });
        }
        let first = entry.current_txn_first_offset;
        apply(entry, h);
        entry.coordinator_epoch = marker.coordinator_epoch;
        Ok(first)
    }

    /// Makes staged entries current; `next_offset` is the log end offset after the append.
    pub fn commit(&mut self, staged: StagedProducers, next_offset: i64) {
        for (_, entry) in staged {
            self.put(entry);
        }
        self.map_end_offset = next_offset;
    }

    /// Applies a batch already in the log (recovery, replay, follower appends): no checks.
    /// For a marker, returns the first offset of the transaction it ended.
    pub fn replay(&mut self, h: &RecordBatchHeader) -> Option<i64> {
        let mut ended = None;
        let pid = h.producer_id();
        if pid >= 0 && !is_cleaned_marker(h) {
            // In place (recovery replays every batch): only a change of the open
            // transaction touches `ongoing`.
            let entry = self
                .producers
                .entry(pid)
                .or_insert_with(|| ProducerStateEntry::empty(pid));
            let before = entry.current_txn_first_offset;
            if entry.epoch < 0 || h.producer_epoch() >= entry.epoch {
                if h.is_control() {
                    ended = entry.current_txn_first_offset;
                }
                apply(entry, h);
            }
            let after = entry.current_txn_first_offset;
            if before != after {
                if let Some(first) = before {
                    self.ongoing.remove(&(first, pid));
                }
                if let Some(first) = after {
                    self.ongoing.insert((first, pid));
                }
            }
        }
        self.map_end_offset = self.map_end_offset.max(h.next_offset());
        ended
    }

    /// Forgets producers idle for `expiration_ms` (Kafka's `removeExpiredProducers`): no
    /// open transaction and a last batch timestamp at least that old. A later batch from
    /// such a producer is taken as from a new producer: any sequence is accepted, and a
    /// retry of a batch from before the expiry is no longer known as a duplicate.
    /// Returns how many were removed.
    pub fn remove_expired_producers(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| {
            e.current_txn_first_offset.is_some()
                || now_ms.saturating_sub(e.last_timestamp) < expiration_ms
        });
        before - self.producers.len()
    }

    #[cfg(test)]
    pub fn producer_count(&self) -> usize {
        self.producers.len()
    }

    /// Applies a batch already written elsewhere (a follower copying its leader) to
    /// `staged`, without checks, as `replay` would apply it.
    /// For a marker, returns the first offset of the transaction it ended.
    pub fn stage_replay(&self, staged: &mut StagedProducers, h: &RecordBatchHeader) -> Option<i64> {
        if h.producer_id() < 0 || is_cleaned_marker(h) {
            return None;
        }
        let entry = staged.entry(h.producer_id()).or_insert_with(|| {
            self.producers
                .get(&h.producer_id())
                .cloned()
                .unwrap_or_else(|| ProducerStateEntry::empty(h.producer_id()))
        });
        let mut ended = None;
        if entry.epoch < 0 || h.producer_epoch() >= entry.epoch {
            if h.is_control() {
                ended = entry.current_txn_first_offset;
            }
            apply(entry, h);
        }
        ended
    }

    /// Writes `<map end offset>.snapshot` at startup, after a replay, without fsync
    /// (appends write snapshots serialised under the log's lock with `snapshot_bytes` and
    /// written, synced, after it with `write_snapshot`). This snapshot only saves the next
    /// start a replay: if a crash loses or tears it, its CRC fails or it is missing, and
    /// the next load falls back to an older snapshot or the log start and replays the
    /// same batches again. One fsync per partition here made a restart after kill -9 with
    /// thousands of partitions take seconds.
    pub fn take_snapshot(&self) -> Result<(), LogError> {
        let path = self
            .dir
            .join(offset_file_name(self.map_end_offset, SNAPSHOT_SUFFIX));
        write_unsynced(&path, &self.snapshot_bytes())
    }

    /// The snapshot file's bytes for the current state. Entries follow the map's order, as
    /// in Kafka; a reader takes them in any order.
    pub fn snapshot_bytes(&self) -> Vec<u8> {
        let mut file =
            Vec::with_capacity(SNAPSHOT_HEADER_BYTES + self.producers.len() * SNAPSHOT_ENTRY_BYTES);
        file.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        file.extend_from_slice(&[0; 4]); // the CRC, filled in below
        file.extend_from_slice(&(self.producers.len() as i32).to_be_bytes());
        for e in self.producers.values() {
            let last = e.batches.back();
            file.extend_from_slice(&e.producer_id.to_be_bytes());
            file.extend_from_slice(&e.epoch.to_be_bytes());
            file.extend_from_slice(&last.map_or(-1, |b| b.last_seq).to_be_bytes());
            file.extend_from_slice(&last.map_or(-1, |b| b.last_offset).to_be_bytes());
            file.extend_from_slice(
                &last
                    .map_or(0, |b| (b.last_offset - b.first_offset) as i32)
                    .to_be_bytes(),
            );
            file.extend_from_slice(&e.last_timestamp.to_be_bytes());
            file.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
            file.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
        }
        let crc = crc32c::crc32c(&file[6..]);
        file[2..6].copy_from_slice(&crc.to_be_bytes());
        file
    }

    /// Writes snapshot bytes as `<offset>.snapshot` in `dir`, atomically. A snapshot too
    /// large to be read back at startup is still written, and said loudly.
    pub fn write_snapshot(dir: &Path, offset: i64, bytes: &[u8]) -> Result<(), LogError> {
        if bytes.len() as u64 > MAX_SNAPSHOT_BYTES {
            tracing::error!(dir = %dir.display(), bytes = bytes.len(), max = MAX_SNAPSHOT_BYTES, "producer snapshot exceeds what startup reads back; lower producer.id.expiration.ms");
        }
        write_atomic(&dir.join(offset_file_name(offset, SNAPSHOT_SUFFIX)), bytes)
    }

    /// `write_snapshot` without fsync, for a clean stop that syncs the whole file system
    /// afterwards, before its clean-shutdown marker.
    pub fn write_snapshot_unsynced(dir: &Path, offset: i64, bytes: &[u8]) -> Result<(), LogError> {
        write_unsynced(&dir.join(offset_file_name(offset, SNAPSHOT_SUFFIX)), bytes)
    }

    /// Loads the newest valid snapshot at or below `log_end_offset`, deleting snapshots
    /// above it and any that are corrupt. Without one, the state is empty at
    /// `log_start_offset`. Returns the manager and whether a snapshot was found.
    pub fn load(
        dir: &Path,
        log_start_offset: i64,
        log_end_offset: i64,
    ) -> Result<(Self, bool), LogError> {
        Self::load_listed(dir, list_snapshots(dir)?, log_start_offset, log_end_offset)
    }

    /// `load` from the snapshots a listing of `dir` found.
    pub fn load_listed(
        dir: &Path,
        snapshots: BTreeMap<i64, PathBuf>,
        log_start_offset: i64,
        log_end_offset: i64,
    ) -> Result<(Self, bool), LogError> {
        for (&offset, path) in snapshots.iter().rev() {
            if offset > log_end_offset {
                fs::remove_file(path)?;
                continue;
            }
            if offset < log_start_offset {
                break;
            }
            let bytes = match read_small(path, MAX_SNAPSHOT_BYTES)? {
                SmallFile::Read(bytes) => bytes,
                SmallFile::TooLarge(len) => {
                    tracing::warn!(path = %path.display(), bytes = len, max = MAX_SNAPSHOT_BYTES, "producer snapshot is larger than startup reads; deleting it and rebuilding producer state from the log instead (slow for a long log; lower producer.id.expiration.ms)");
                    fs::remove_file(path)?;
                    continue;
                }
                // Listed a moment ago: gone since, as a corrupt one would be below.
                SmallFile::Missing => continue,
            };
            match parse_snapshot(path, &bytes) {
                Ok(producers) => {
                    let manager = ProducerStateManager::with_producers(dir, producers, offset);
                    return Ok((manager, true));
                }
                Err(LogError::KafkaStorage(e)) => return Err(LogError::KafkaStorage(e)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "deleting corrupt producer snapshot");
                    fs::remove_file(path)?;
                }
            }
        }
        Ok((ProducerStateManager::new(dir, log_start_offset), false))
    }

    /// Deletes snapshots with offsets below `offset` (their segments are gone).
    pub fn delete_snapshots_below(&self, offset: i64) -> Result<(), LogError> {
        for (o, path) in list_snapshots(&self.dir)? {
            if o < offset {
                fs::remove_file(path)?;
            }
        }
        Ok(())
    }

    /// Deletes snapshots with offsets above `offset` (the log was truncated).
    pub fn delete_snapshots_above(&self, offset: i64) -> Result<(), LogError> {
        for (o, path) in list_snapshots(&self.dir)? {
            if o > offset {
                fs::remove_file(path)?;
            }
        }
        Ok(())
    }
}

fn apply(entry: &mut ProducerStateEntry, h: &RecordBatchHeader) {
    if h.is_control() {
        // A transaction marker ends the producer's open transaction.
        entry.maybe_update_epoch(h.producer_epoch());
        entry.current_txn_first_offset = None;
        entry.last_timestamp = h.max_timestamp();
    } else {
        entry.add_batch(h);
        if h.is_transactional() && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(h.base_offset());
        }
    }
}

/// A control batch the cleaner cut down to its header: its transaction's records are all
/// gone from the log, and it says nothing about the producer (Kafka's producer state
/// skips it too).
fn is_cleaned_marker(h: &RecordBatchHeader) -> bool {
    h.is_control() && h.records_count() == 0
}

/// Kafka's `inSequence`: the next sequence follows the last, wrapping at i32::MAX.
fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    i64::from(next_seq) == i64::from(last_seq) + 1 || (next_seq == 0 && last_seq == i32::MAX)
}

pub fn list_snapshots(dir: &Path) -> Result<BTreeMap<i64, PathBuf>, LogError> {
    let mut out = BTreeMap::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(offset) = entry
            .file_name()
            .to_str()
            .and_then(|n| parse_offset_file_name(n, SNAPSHOT_SUFFIX))
        {
            out.insert(offset, entry.path());
        }
    }
    Ok(out)
}

/// Parses the bytes of a producer snapshot (for fuzzing and tools): the number of
/// producers it holds.
pub fn parse_producer_snapshot(bytes: &[u8]) -> Result<usize, LogError> {
    parse_snapshot(Path::new("producer.snapshot"), bytes).map(|p| p.len())
}

/// Parses snapshot bytes read from `path` (named in errors). The entry count is checked
/// against the length before anything is allocated for it.
fn parse_snapshot(path: &Path, bytes: &[u8]) -> Result<HashMap<i64, ProducerStateEntry>, LogError> {
    let corrupt = |reason: &str| LogError::corrupt_file(path, reason.to_string());
    if bytes.len() < SNAPSHOT_HEADER_BYTES {
        return Err(corrupt("shorter than the header"));
    }
    let version = i16::from_be_bytes([bytes[0], bytes[1]]);
    if version != SNAPSHOT_VERSION {
        return Err(corrupt("unsupported version"));
    }
    let crc = u32::from_be_bytes([bytes[2], bytes[3], bytes[4], bytes[5]]);
    if crc32c::crc32c(&bytes[6..]) != crc {
        return Err(corrupt("CRC mismatch"));
    }
    let count = i32::from_be_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]);
    let count = usize::try_from(count).map_err(|_| corrupt("negative entry count"))?;
    if bytes.len() != SNAPSHOT_HEADER_BYTES + count.saturating_mul(SNAPSHOT_ENTRY_BYTES) {
        return Err(corrupt("entry count does not match the file length"));
    }
    let mut producers = HashMap::with_capacity(count);
    for e in bytes[SNAPSHOT_HEADER_BYTES..].chunks_exact(SNAPSHOT_ENTRY_BYTES) {
        let mut r = Reader(e);
        let producer_id = r.i64();
        let epoch = r.i16();
        let last_seq = r.i32();
        let last_offset = r.i64();
        let offset_delta = r.i32();
        let timestamp = r.i64();
        let coordinator_epoch = r.i32();
        let txn_first = r.i64();
        let mut entry = ProducerStateEntry::empty(producer_id);
        entry.epoch = epoch;
        entry.coordinator_epoch = coordinator_epoch;
        entry.current_txn_first_offset = (txn_first >= 0).then_some(txn_first);
        entry.last_timestamp = timestamp;
        if last_offset >= 0 {
            entry.batches.push(BatchMetadata {
                first_seq: decrement_sequence(last_seq, offset_delta.max(0)),
                last_seq,
                first_offset: last_offset - i64::from(offset_delta),
                last_offset,
                timestamp,
            });
        }
        producers.insert(producer_id, entry);
    }
    Ok(producers)
}

/// Reads big-endian fields from an entry whose length was checked by `chunks_exact`.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&self.0[..N]);
        self.0 = &self.0[N..];
        out
    }
    fn i16(&mut self) -> i16 {
        i16::from_be_bytes(self.take())
    }
    fn i32(&mut self) -> i32 {
        i32::from_be_bytes(self.take())
    }
    fn i64(&mut self) -> i64 {
        i64::from_be_bytes(self.take())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::set_base_offset;
    use crate::log::test_util::batch_bytes;

    fn header(pid: i64, epoch: i16, seq: i32, n: usize, base_offset: i64) -> RecordBatchHeader {
        let values: Vec<&[u8]> = vec![b"v"; n];
        let mut b = batch_bytes(&values, 100, Some((pid, epoch, seq))).to_vec();
        set_base_offset(&mut b, base_offset);
        RecordBatchHeader::parse(&b).unwrap()
    }

    fn append(m: &mut ProducerStateManager, h: RecordBatchHeader) -> Result<(), LogError> {
        let mut staged = StagedProducers::new();
        m.stage(&mut staged, &h, AppendOrigin::Client)?;
        m.commit(staged, h.next_offset());
        Ok(())
    }

    #[test]
    fn sequence_and_epoch_rules() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new(dir.path(), 0);
        append(&mut m, header(1, 0, 0, 2, 0)).unwrap();
        append(&mut m, header(1, 0, 2, 1, 2)).unwrap();
        // A gap in sequence.
        assert!(matches!(
            append(&mut m, header(1, 0, 5, 1, 3)),
            Err(LogError::OutOfOrderSequence { .. })
        ));
        // The same range again is a duplicate, found before staging.
        assert_eq!(
            m.find_duplicate(&header(1, 0, 0, 2, 99))
                .map(|b| b.first_offset),
            Some(0)
        );
        assert_eq!(
            m.find_duplicate(&header(1, 0, 2, 1, 99))
                .map(|b| (b.first_offset, b.last_offset)),
            Some((2, 2))
        );
        assert_eq!(m.find_duplicate(&header(1, 1, 0, 2, 99)), None);
        // A new epoch must restart at 0; an old epoch is fenced.
        assert!(matches!(
            append(&mut m, header(1, 1, 3, 1, 3)),
            Err(LogError::OutOfOrderSequence { .. })
        ));
        append(&mut m, header(1, 1, 0, 1, 3)).unwrap();
        assert!(matches!(
            append(&mut m, header(1, 0, 3, 1, 4)),
            Err(LogError::InvalidProducerEpoch { .. })
        ));
        // An unknown producer may start anywhere (the log may have lost its state).
        append(&mut m, header(2, 0, 17, 1, 4)).unwrap();
        assert_eq!(m.map_end_offset(), 5);
    }

    #[test]
    fn recent_batches_ring() {
        let mut r = RecentBatches::default();
        assert!(r.is_empty() && r.back().is_none());
        let b = |seq| BatchMetadata {
            first_seq: seq,
            last_seq: seq,
            ..BatchMetadata::default()
        };
        for seq in 0..7 {
            r.push(b(seq));
        }
        let seqs: Vec<i32> = r.iter().map(|m| m.first_seq).collect();
        assert_eq!(seqs, vec![2, 3, 4, 5, 6]);
        assert_eq!(r.back().map(|m| m.last_seq), Some(6));
        let mut same = RecentBatches::default();
        for seq in 2..7 {
            same.push(b(seq));
        }
        assert_eq!(r, same, "equal by content, not by slot layout");
        r.clear();
        assert_eq!(r.len(), 0);
    }

    #[test]
    fn an_oversized_snapshot_is_set_aside_for_an_older_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new(dir.path(), 0);
        append(&mut m, header(1, 0, 0, 1, 0)).unwrap();
        m.take_snapshot().unwrap(); // at 1

        // A snapshot past the size startup reads (sparse: no disk is used).
        let big = dir.path().join("00000000000000000002.snapshot");
        fs::File::create(&big)
            .unwrap()
            .set_len(MAX_SNAPSHOT_BYTES + 1)
            .unwrap();
        let (loaded, found) = ProducerStateManager::load(dir.path(), 0, 2).unwrap();
        assert!(found);
        assert_eq!(
            loaded.map_end_offset(),
            1,
            "the older snapshot, then a replay"
        );
        assert!(!big.exists());
    }

    #[test]
    fn keeps_five_batches() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new(dir.path(), 0);
        for i in 0..7 {
            append(&mut m, header(9, 0, i, 1, i64::from(i))).unwrap();
        }
        assert_eq!(m.entry(9).unwrap().batches.len(), 5);
        assert!(m.find_duplicate(&header(9, 0, 1, 1, 0)).is_none());
        assert!(m.find_duplicate(&header(9, 0, 2, 1, 0)).is_some());
    }

    #[test]
    fn staged_batches_of_one_append_chain() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new(dir.path(), 0);
        append(&mut m, header(1, 0, 0, 1, 0)).unwrap();
        let mut staged = StagedProducers::new();
        m.stage(&mut staged, &header(1, 0, 1, 2, 1), AppendOrigin::Client)
            .unwrap();
        m.stage(&mut staged, &header(1, 0, 3, 2, 3), AppendOrigin::Client)
            .unwrap();
        assert!(m
            .stage(&mut staged, &header(1, 0, 3, 2, 5), AppendOrigin::Client)
            .is_err());
        assert_eq!(
            m.entry(1).unwrap().batches.len(),
            1,
            "nothing is visible before commit"
        );
    }

    #[test]
    fn snapshot_exact_bytes_and_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new(dir.path(), 0);
        append(&mut m, header(7, 2, 10, 3, 40)).unwrap();
        m.take_snapshot().unwrap();
        let path = dir.path().join("00000000000000000043.snapshot");
        let raw = fs::read(&path).unwrap();
        assert_eq!(raw.len(), 10 + 46);
        assert_eq!(&raw[..2], &[0, 1]);
        assert_eq!(
            u32::from_be_bytes(raw[2..6].try_into().unwrap()),
            crc32c::crc32c(&raw[6..])
        );
        assert_eq!(&raw[6..10], &[0, 0, 0, 1]);
        let mut expected = Vec::new();
        expected.extend_from_slice(&7i64.to_be_bytes());
        expected.extend_from_slice(&2i16.to_be_bytes());
        expected.extend_from_slice(&12i32.to_be_bytes()); // last sequence
        expected.extend_from_slice(&42i64.to_be_bytes()); // last offset
        expected.extend_from_slice(&2i32.to_be_bytes()); // offset delta
        expected.extend_from_slice(&102i64.to_be_bytes()); // max timestamp
        expected.extend_from_slice(&(-1i32).to_be_bytes());
        expected.extend_from_slice(&(-1i64).to_be_bytes());
        assert_eq!(&raw[10..], &expected[..]);

        let (loaded, found) = ProducerStateManager::load(dir.path(), 0, 43).unwrap();
        assert!(found);
        assert_eq!(loaded.map_end_offset(), 43);
        assert_eq!(loaded.entry(7), m.entry(7));
        assert!(loaded.find_duplicate(&header(7, 2, 10, 3, 0)).is_some());
    }

    #[test]
    fn corrupt_and_stray_snapshots_are_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new(dir.path(), 0);
        append(&mut m, header(1, 0, 0, 1, 0)).unwrap();
        m.take_snapshot().unwrap(); // at 1
        append(&mut m, header(1, 0, 1, 1, 1)).unwrap();
        m.take_snapshot().unwrap(); // at 2
        append(&mut m, header(1, 0, 2, 1, 2)).unwrap();
        m.take_snapshot().unwrap(); // at 3
        let p2 = dir.path().join("00000000000000000002.snapshot");
        let mut raw = fs::read(&p2).unwrap();
        let last = raw.len() - 1;
        raw[last] ^= 0xff;
        fs::write(&p2, raw).unwrap();
        // LEO 2: the snapshot at 3 is stray, the one at 2 corrupt, so 1 is used.
        let (loaded, found) = ProducerStateManager::load(dir.path(), 0, 2).unwrap();
        assert!(found);
        assert_eq!(loaded.map_end_offset(), 1);
        assert_eq!(
            list_snapshots(dir.path())
                .unwrap()
                .keys()
                .copied()
                .collect::<Vec<_>>(),
            vec![1]
        );
        for garbage in [&b""[..], &[0, 1, 0, 0], &[0, 2, 0, 0, 0, 0, 0, 0, 0, 0]] {
            fs::write(dir.path().join("00000000000000000001.snapshot"), garbage).unwrap();
            let (loaded, found) = ProducerStateManager::load(dir.path(), 0, 2).unwrap();
            assert!(!found);
            assert!(loaded.is_empty());
        }
    }
}

#[cfg(test)]
mod snapshot_cost {
    use super::*;
    use crate::log::batch::set_base_offset;
    use crate::log::test_util::batch_bytes;

    /// How long a roll holds the partition lock for the producer snapshot, against the
    /// whole snapshot (serialise, write, fsync), with `SKUA_PRODUCERS` producers (300,000).
    /// `cargo test --lib snapshot_cost -- --ignored --nocapture`
    #[test]
    #[ignore = "a measurement, not a check"]
    fn snapshot_time_under_the_lock() {
        let n: i64 = std::env::var("SKUA_PRODUCERS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(300_000);
        let dir = tempfile::tempdir().unwrap();
        let mut m = ProducerStateManager::new(dir.path(), 0);
        let mut raw = batch_bytes(&[b"v"], 1, Some((0, 0, 0))).to_vec();
        for pid in 0..n {
            raw[43..51].copy_from_slice(&pid.to_be_bytes());
            set_base_offset(&mut raw, pid);
            m.replay(&RecordBatchHeader::parse(&raw).unwrap());
        }
        let t = std::time::Instant::now();
        let bytes = m.snapshot_bytes();
        let under_lock = t.elapsed();
        ProducerStateManager::write_snapshot(dir.path(), n, &bytes).unwrap();
        let total = t.elapsed();
        eprintln!(
            "{n} producers, {} bytes: {under_lock:?} under the lock, {total:?} in all",
            bytes.len()
        );
        let (loaded, found) = ProducerStateManager::load(dir.path(), 0, n).unwrap();
        assert!(found);
        assert_eq!(loaded.producer_count(), n as usize);
    }
}
