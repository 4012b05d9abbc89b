//! Startup loading and crash recovery of one partition directory (Kafka's `LogLoader`).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use super::checkpoint::LEADER_EPOCH_CHECKPOINT;
use super::control::{read_marker, EndTxnMarker, TxnResult};
use super::leader_epoch::LeaderEpochFileCache;
use super::producer_state::{ProducerStateManager, SNAPSHOT_SUFFIX};
use super::segment::{
    read_header, LogSegment, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX,
};
use super::txn_index::AbortedTxn;
use super::{parse_offset_file_name, LogConfig, LogError};

/// Everything recovered from a partition directory.
pub struct LoadedLog {
    pub segments: BTreeMap<i64, LogSegment>,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub recovery_point: i64,
    pub leader_epoch_cache: LeaderEpochFileCache,
    pub producer_state: ProducerStateManager,
    /// Where the producer state on disk is complete (see `load_producer_state`).
    pub snapshot_on_disk: SnapshotOnDisk,
}

/// Where the producer state on disk is complete, and whether that is durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotOnDisk {
    /// The offset of a snapshot file holding the state at that offset, or the log start
    /// when the state is empty there and no snapshot is needed; -1 if unknown.
    pub offset: i64,
    /// Whether a snapshot file at `offset` is durable (written with fsync, or found after
    /// a clean shutdown): a clean close then need not write it again.
    pub synced: bool,
}

impl SnapshotOnDisk {
    pub const UNKNOWN: SnapshotOnDisk = SnapshotOnDisk {
        offset: -1,
        synced: false,
    };

    /// A snapshot at `offset` written with fsync: it describes the state from there on
    /// unless a newer one already does.
    pub fn synced_at(self, offset: i64) -> SnapshotOnDisk {
        match offset >= self.offset {
            true => SnapshotOnDisk {
                offset,
                synced: true,
            },
            false => self,
        }
    }
}

/// What one read of a partition directory found: loading lists it once, not once per
/// kind of file, and asks the file system nothing the listing already says.
struct Listing {
    /// Base offsets of the `.log` files.
    logs: BTreeSet<i64>,
    /// Base offsets of segments with both an `.index` and a `.timeindex`.
    indexed: BTreeSet<i64>,
    /// Base offsets of segments with a `.txnindex`.
    txn_indexed: BTreeSet<i64>,
    /// Index files whose `.log` is missing.
    orphans: Vec<PathBuf>,
    /// Producer snapshots by offset.
    snapshots: BTreeMap<i64, PathBuf>,
    leader_epoch_checkpoint: bool,
    /// Leftovers of an interrupted deletion, cleaning or write (`.deleted`, `.cleaned`,
    /// `.swap`, `.tmp`).
    temporaries: bool,
}

impl Listing {
    fn read(dir: &Path) -> Result<Listing, LogError> {
        let mut listing = Listing {
            logs: BTreeSet::new(),
            indexed: BTreeSet::new(),
            txn_indexed: BTreeSet::new(),
            orphans: Vec::new(),
            snapshots: BTreeMap::new(),
            leader_epoch_checkpoint: false,
            temporaries: false,
        };
        let (mut offset_indexes, mut time_indexes, mut txn_indexes) =
            (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if let Some(base) = parse_offset_file_name(&name, LOG_SUFFIX) {
                listing.logs.insert(base);
            } else if let Some(base) = parse_offset_file_name(&name, INDEX_SUFFIX) {
                offset_indexes.insert(base);
            } else if let Some(base) = parse_offset_file_name(&name, TIME_INDEX_SUFFIX) {
                time_indexes.insert(base);
            } else if let Some(base) = parse_offset_file_name(&name, TXN_INDEX_SUFFIX) {
                txn_indexes.insert(base);
            } else if let Some(offset) = parse_offset_file_name(&name, SNAPSHOT_SUFFIX) {
                listing.snapshots.insert(offset, entry.path());
            } else if name == LEADER_EPOCH_CHECKPOINT {
                listing.leader_epoch_checkpoint = true;
            } else if is_temporary(&name) {
                listing.temporaries = true;
            }
        }
        for (indexes, suffix) in [
            (&offset_indexes, INDEX_SUFFIX),
            (&time_indexes, TIME_INDEX_SUFFIX),
            (&txn_indexes, TXN_INDEX_SUFFIX),
        ] {
            listing.orphans.extend(
                indexes
                    .difference(&listing.logs)
                    .map(|&base| dir.join(super::offset_file_name(base, suffix))),
            );
        }
        listing.txn_indexed = txn_indexes;
        listing.indexed = offset_indexes
            .intersection(&time_indexes)
            .copied()
            .collect();
        Ok(listing)
    }
}

fn is_temporary(name: &str) -> bool {
    (name.ends_with(".deleted") && !name.ends_with(".checkpoint.deleted"))
        || name.ends_with(".tmp")
        || name.ends_with(".cleaned")
        || name.ends_with(".swap")
}

/// Loads `dir`. After an unclean shutdown every segment from the one holding
/// `recovery_point` on is scanned batch by batch; the first bad batch and everything after
/// it are cut (later segments deleted), and their indexes rebuilt. After a clean one
/// nothing is scanned. Either way a segment below that whose index is missing is rebuilt
/// now; one whose index is bad, when it is first used (the indexes of segments below the
/// active one are mapped and checked then, as Kafka's are).
pub fn load(
    dir: &Path,
    config: &LogConfig,
    recovery_point: i64,
    log_start_checkpoint: i64,
    clean_shutdown: bool,
    now_ms: i64,
) -> Result<LoadedLog, LogError> {
    let mut listing = Listing::read(dir)?;
    if listing.temporaries {
        remove_temporary_files(dir)?;
        listing = Listing::read(dir)?;
    }
    for path in &listing.orphans {
        tracing::info!(path = %path.display(), "deleting index without a log file");
        fs::remove_file(path)?;
    }
    let bases: Vec<i64> = listing.logs.iter().copied().collect();
    let mut leader_epoch_cache =
        LeaderEpochFileCache::load_listed(dir, listing.leader_epoch_checkpoint)?;
    let mut segments = BTreeMap::new();
    let last_base = bases.last().copied();
    // After an unclean shutdown the segments from here on are scanned and their indexes
    // rebuilt by `recover_after` anyway: checking them first would rebuild them twice.
    let recovered_from = (!clean_shutdown).then(|| recovery_start(&bases, recovery_point));
    for &base in &bases {
        let active = Some(base) == last_base;
        let txn_index = listing.txn_indexed.contains(&base);
        let mut segment = LogSegment::open_listed(dir, base, config, active, now_ms, txn_index)?;
        if recovered_from.is_some_and(|from| base >= from) {
            segments.insert(base, segment);
            continue;
        }
        let index_missing = !listing.indexed.contains(&base);
        // An older segment's indexes are checked when first used; the active one's now,
        // as appends go on from its last entry.
        if index_missing || (active && segment.sanity_check().is_err()) {
            tracing::info!(dir = %dir.display(), base, "rebuilding indexes of segment");
            segment.recover(&mut |_| {})?;
        }
        segments.insert(base, segment);
    }

    if !clean_shutdown {
        recover_after(dir, &mut segments, recovery_point, &mut leader_epoch_cache)?;
    }
    if segments.is_empty() {
        let base = log_start_checkpoint.max(0);
        segments.insert(base, LogSegment::open(dir, base, config, true, now_ms)?);
    }
    let log_end_offset = next_offset_of_last(dir, &mut segments, &mut leader_epoch_cache)?;

    let first_base = segments.keys().next().copied().unwrap_or(0);
    let log_start_offset = log_start_checkpoint.max(first_base).min(log_end_offset);
    delete_segments_below(dir, &mut segments, log_start_offset)?;
    leader_epoch_cache.truncate_from_end(log_end_offset)?;
    leader_epoch_cache.truncate_from_start(log_start_offset)?;

    let recovery_point = if clean_shutdown {
        log_end_offset
    } else {
        recovery_point.clamp(0, log_end_offset)
    };
    // A transaction index found corrupt lost its segment's aborted transactions; they are
    // found again only by replaying producer state over the whole segment, so from a
    // snapshot no later than its start (Kafka's `recoverSegment` rebuilds its producer
    // state up to the segment's base the same way). Without that, records of transactions
    // aborted below the replay's start would be served to read_committed consumers.
    let replay_from = segments
        .values()
        .filter(|s| s.txn_index_discarded())
        .map(|s| s.base_offset())
        .min();
    let mut snapshots = listing.snapshots;
    if let Some(from) = replay_from {
        tracing::warn!(dir = %dir.display(), from, "replaying producer state from a segment whose transaction index was discarded");
        snapshots.retain(|&offset, _| offset <= from);
    }
    let (mut producer_state, snapshot_on_disk) = load_producer_state(
        dir,
        snapshots,
        &mut segments,
        log_start_offset,
        log_end_offset,
        clean_shutdown && replay_from.is_none(),
    )?;
    producer_state.remove_expired_producers(now_ms, config.producer_id_expiration_ms);
    Ok(LoadedLog {
        segments,
        log_start_offset,
        log_end_offset,
        recovery_point,
        leader_epoch_cache,
        producer_state,
        snapshot_on_disk,
    })
}

/// A new, empty log in `dir`, a directory just made: its first segment and an empty
/// leader-epoch checkpoint are written without listing the directory or looking for
/// files that cannot be there. The same log `load` makes of an empty directory.
pub fn create(dir: &Path, config: &LogConfig, now_ms: i64) -> Result<LoadedLog, LogError> {
    let segment = LogSegment::create_new(dir, 0, config, now_ms)?;
    let leader_epoch_cache = LeaderEpochFileCache::create_new(dir)?;
    Ok(LoadedLog {
        segments: BTreeMap::from([(0, segment)]),
        log_start_offset: 0,
        log_end_offset: 0,
        recovery_point: 0,
        leader_epoch_cache,
        producer_state: ProducerStateManager::new(dir, 0),
        // Empty at the log start: nothing to write at a stop until a record arrives.
        snapshot_on_disk: SnapshotOnDisk {
            offset: 0,
            synced: false,
        },
    })
}

/// The base of the segment holding `recovery_point` (the first one if none does): where
/// recovery after an unclean shutdown starts.
fn recovery_start(bases: &[i64], recovery_point: i64) -> i64 {
    let below = bases.partition_point(|&b| b <= recovery_point);
    below
        .checked_sub(1)
        .and_then(|i| bases.get(i))
        .or(bases.first())
        .copied()
        .unwrap_or(i64::MIN)
}

/// Recovers from the segment containing `recovery_point` to the end.
fn recover_after(
    dir: &Path,
    segments: &mut BTreeMap<i64, LogSegment>,
    recovery_point: i64,
    cache: &mut LeaderEpochFileCache,
) -> Result<(), LogError> {
    let all: Vec<i64> = segments.keys().copied().collect();
    let bases: Vec<i64> = segments
        .range(recovery_start(&all, recovery_point)..)
        .map(|(&b, _)| b)
        .collect();
    let mut cache_error = None;
    for (i, base) in bases.iter().enumerate() {
        let Some(segment) = segments.get_mut(base) else {
            continue;
        };
        let truncated = segment.recover(&mut |h| {
            if h.partition_leader_epoch() >= 0
                && cache
                    .latest_epoch()
                    .is_none_or(|e| e < h.partition_leader_epoch())
            {
                if let Err(e) = cache.assign(h.partition_leader_epoch(), h.base_offset()) {
                    cache_error = Some(e);
                }
            }
        })?;
        if let Some(e) = cache_error.take() {
            return Err(e);
        }
        if truncated > 0 {
            for later in &bases[i + 1..] {
                if let Some(s) = segments.remove(later) {
                    tracing::warn!(dir = %dir.display(), base = later, "deleting segment after a truncated one");
                    s.delete(dir)?;
                }
            }
            break;
        }
    }
    Ok(())
}

/// The log end offset, from the last segment (rebuilt if its tail cannot be read).
fn next_offset_of_last(
    dir: &Path,
    segments: &mut BTreeMap<i64, LogSegment>,
    cache: &mut LeaderEpochFileCache,
) -> Result<i64, LogError> {
    let Some(mut last) = segments.last_entry() else {
        return Ok(0);
    };
    let segment = last.get_mut();
    match segment.read_next_offset() {
        Ok(next) => Ok(next),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "last segment unreadable after a clean shutdown; recovering it");
            recover_after(dir, segments, i64::MAX, cache)?;
            let mut segment = segments
                .last_entry()
                .ok_or_else(|| LogError::corrupt_file(dir, "no segments"))?;
            segment.get_mut().read_next_offset()
        }
    }
}

fn delete_segments_below(
    dir: &Path,
    segments: &mut BTreeMap<i64, LogSegment>,
    log_start_offset: i64,
) -> Result<(), LogError> {
    // A segment is wholly below the log start when the next segment starts at or below it.
    let bases: Vec<i64> = segments.keys().copied().collect();
    for pair in bases.windows(2) {
        if pair[1] <= log_start_offset {
            if let Some(s) = segments.remove(&pair[0]) {
                s.delete(dir)?;
            }
        }
    }
    Ok(())
}

fn load_producer_state(
    dir: &Path,
    snapshots: BTreeMap<i64, PathBuf>,
    segments: &mut BTreeMap<i64, LogSegment>,
    log_start_offset: i64,
    log_end_offset: i64,
    clean_shutdown: bool,
) -> Result<(ProducerStateManager, SnapshotOnDisk), LogError> {
    let any_below_start = snapshots.keys().any(|&o| o < log_start_offset);
    let (mut state, found) =
        ProducerStateManager::load_listed(dir, snapshots, log_start_offset, log_end_offset)?;
    if !found && clean_shutdown {
        // As Kafka: a cleanly shut down log without snapshots had no producer state worth a
        // scan. As Kafka's `lastSnapOffset`, nothing on disk is complete past the log start.
        state.set_map_end_offset(log_end_offset);
        let empty = SnapshotOnDisk {
            offset: log_start_offset,
            synced: false,
        };
        return Ok((state, empty));
    }
    let from = state.map_end_offset();
    // A clean shutdown left a synced snapshot at the log end: if it is the one found, the
    // next clean close need not write it again. After a crash a snapshot found may be one
    // an earlier start wrote without fsync.
    let synced = found && clean_shutdown && from == log_end_offset;
    if !found && from < log_end_offset {
        tracing::info!(dir = %dir.display(), from, to = log_end_offset, "no producer snapshot: rebuilding producer state by reading every batch header in the log");
    }
    replay_producer_state(segments, &mut state, log_end_offset)?;
    if from < log_end_offset {
        state.take_snapshot()?;
    }
    if any_below_start {
        state.delete_snapshots_below(log_start_offset)?;
    }
    // A snapshot found at the log end read back whole, so it holds this state, synced or
    // not (after kill -9 the page cache still has it); one written just now holds it too.
    // An empty log with no snapshot has nothing to write either (Kafka's `takeSnapshot`
    // writes none unless the map end is past the last snapshot, the log start at first).
    let offset = if found || from < log_end_offset {
        log_end_offset
    } else {
        log_start_offset
    };
    Ok((state, SnapshotOnDisk { offset, synced }))
}

/// Replays batch headers from the state's map end offset up to `to` (exclusive). An
/// abort marker met on the way is put (back) in its segment's `.txnindex`, so a crash
/// between a marker's append and its index entry, or a segment recovery, loses nothing.
pub fn replay_producer_state(
    segments: &mut BTreeMap<i64, LogSegment>,
    state: &mut ProducerStateManager,
    to: i64,
) -> Result<(), LogError> {
    let from = state.map_end_offset();
    if from >= to {
        // A snapshot at the log end (every clean start): no batch to read.
        return Ok(());
    }
    let first = segments
        .range(..=from)
        .next_back()
        .map(|(&b, _)| b)
        .unwrap_or(i64::MIN);
    for segment in segments.range_mut(first..).map(|(_, s)| s) {
        let mut position = match segment.translate_offset(from)? {
            Some(bp) => bp.position,
            None => continue,
        };
        while let Some(h) = read_header(segment.log_file(), position, segment.size())? {
            if h.base_offset() >= to {
                break;
            }
            let size =
                h.check_length(usize::try_from(segment.size() - position).unwrap_or(usize::MAX))?;
            if h.last_offset() >= from {
                let lso_before = state.last_stable_offset_after(h.producer_id(), h.base_offset());
                if let Some(first_offset) = state.replay(&h) {
                    let marker = read_control_batch(segment, position, size)?;
                    if marker.is_some_and(|m| m.result == TxnResult::Abort) {
                        segment.append_aborted_txn(AbortedTxn {
                            producer_id: h.producer_id(),
                            first_offset,
                            last_offset: h.base_offset(),
                            last_stable_offset: lso_before,
                        })?;
                    }
                }
            }
            position += size as u64;
        }
    }
    state.set_map_end_offset(to);
    Ok(())
}

/// A control batch's bytes are a header and one small record; anything larger is not a
/// marker skua or Kafka wrote.
const CONTROL_BATCH_MAX_BYTES: usize = 4096;

/// The transaction marker of the control batch at `position`.
fn read_control_batch(
    segment: &LogSegment,
    position: u64,
    size: usize,
) -> Result<Option<EndTxnMarker>, LogError> {
    if size > CONTROL_BATCH_MAX_BYTES {
        return Err(LogError::CorruptMessage(format!(
            "control batch of {size} bytes at position {position}"
        )));
    }
    let mut buf = vec![0u8; size];
    std::os::unix::fs::FileExt::read_exact_at(segment.log_file().as_ref(), &mut buf, position)?;
    read_marker(&buf)
}

/// Kafka's temp-file cleanup: `.deleted` (but not KRaft's `.checkpoint.deleted`), `.cleaned`
/// and `.tmp` files go; `.swap` files replace the segments they cover unless a `.cleaned`
/// file at or below them shows the cleaner never finished.
fn remove_temporary_files(dir: &Path) -> Result<(), LogError> {
    let mut swaps = Vec::new();
    let mut min_cleaned = i64::MAX;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let path = entry.path();
        if (name.ends_with(".deleted") && !name.ends_with(".checkpoint.deleted"))
            || name.ends_with(".tmp")
        {
            fs::remove_file(&path)?;
        } else if let Some(stem) = name.strip_suffix(".cleaned") {
            min_cleaned = min_cleaned.min(offset_prefix(stem).unwrap_or(i64::MIN));
            fs::remove_file(&path)?;
        } else if let Some(stem) = name.strip_suffix(".swap") {
            swaps.push((path, stem.to_owned()));
        }
    }
    for (path, stem) in swaps {
        let offset = offset_prefix(&stem).unwrap_or(i64::MIN);
        if offset >= min_cleaned || !stem.ends_with(LOG_SUFFIX) {
            // Index swaps are simply rebuilt from the log.
            fs::remove_file(&path)?;
            continue;
        }
        let next = swap_next_offset(&path)?;
        for base in segment_bases(dir)? {
            if base >= offset && base < next {
                for suffix in [
                    LOG_SUFFIX,
                    INDEX_SUFFIX,
                    TIME_INDEX_SUFFIX,
                    TXN_INDEX_SUFFIX,
                ] {
                    let _ = fs::remove_file(dir.join(super::offset_file_name(base, suffix)));
                }
            }
        }
        for suffix in [INDEX_SUFFIX, TIME_INDEX_SUFFIX] {
            let _ = fs::remove_file(dir.join(super::offset_file_name(offset, suffix)));
        }
        fs::rename(&path, dir.join(&stem))?;
    }
    Ok(())
}

fn offset_prefix(name: &str) -> Option<i64> {
    name.get(..20).and_then(|d| parse_offset_file_name(d, ""))
}

/// The offset after the last whole batch of a `.swap` log file.
fn swap_next_offset(path: &Path) -> Result<i64, LogError> {
    let file = fs::File::open(path)?;
    let size = file.metadata()?.len();
    let mut position = 0u64;
    let mut next = i64::MIN;
    while let Some(h) = read_header(&file, position, size)? {
        let Ok(len) = h.check_length(usize::try_from(size - position).unwrap_or(usize::MAX)) else {
            break;
        };
        next = h.next_offset();
        position += len as u64;
    }
    Ok(next)
}

/// Base offsets of the `.log` files; index files without a `.log` are deleted.
fn segment_bases(dir: &Path) -> Result<Vec<i64>, LogError> {
    let mut logs = BTreeSet::new();
    let mut indexes = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if let Some(base) = parse_offset_file_name(&name, LOG_SUFFIX) {
            logs.insert(base);
        } else if let Some(base) = [INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX]
            .iter()
            .find_map(|s| parse_offset_file_name(&name, s))
        {
            indexes.push((base, entry.path()));
        }
    }
    for (base, path) in indexes {
        if !logs.contains(&base) {
            tracing::info!(path = %path.display(), "deleting index without a log file");
            fs::remove_file(path)?;
        }
    }
    Ok(logs.into_iter().collect())
}
