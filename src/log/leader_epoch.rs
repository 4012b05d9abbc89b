//! The leader epoch cache of one partition (Kafka's `LeaderEpochFileCache`), persisted in
//! `leader-epoch-checkpoint` (see `checkpoint.rs` for the text format).

use std::path::{Path, PathBuf};

use super::checkpoint::{
    read_leader_epoch_checkpoint, write_leader_epoch_checkpoint, write_new, write_unsynced,
    LEADER_EPOCH_CHECKPOINT,
};

/// A checkpoint with no entries: version 0, count 0.
const EMPTY_CHECKPOINT: &[u8] = b"0\n0\n";
use super::LogError;

/// A leader epoch and the first offset written in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

/// Epoch → start offset. Invariant: epochs and start offsets both strictly increase.
/// Every change is written through to the checkpoint file.
pub struct LeaderEpochFileCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

impl LeaderEpochFileCache {
    /// Loads `<dir>/leader-epoch-checkpoint`. A damaged file is discarded (and rewritten
    /// empty): the cache is rebuilt from recovered batches, and losing it only costs
    /// precision in OffsetForLeaderEpoch answers.
    pub fn load(dir: &Path) -> Result<Self, LogError> {
        let existed = dir.join(LEADER_EPOCH_CHECKPOINT).exists();
        Self::load_listed(dir, existed)
    }

    /// `load`, told by a listing of `dir` whether the checkpoint exists: a missing one
    /// is not looked for again.
    pub fn load_listed(dir: &Path, existed: bool) -> Result<Self, LogError> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT);
        let read = match existed {
            true => read_leader_epoch_checkpoint(&path),
            false => Ok(Vec::new()),
        };
        let entries = match read {
            Ok(entries) => entries,
            Err(LogError::KafkaStorage(e)) => return Err(LogError::KafkaStorage(e)),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "discarding damaged leader epoch checkpoint");
                Vec::new()
            }
        };
        let mut cache = LeaderEpochFileCache {
            path,
            entries: Vec::new(),
        };
        for e in entries {
            // Re-assigning drops any entry that breaks the ordering invariant.
            cache.assign_no_flush(e.epoch, e.start_offset);
        }
        if !existed {
            // Kafka creates the (empty) checkpoint along with the log. Without an fsync:
            // a crash can only leave it absent, empty or torn, which loads as this same
            // empty cache, and 10,000 partitions created at once must not wait for 20,000
            // fsyncs (the file and its dir).
            write_unsynced(&cache.path, EMPTY_CHECKPOINT)?;
        }
        Ok(cache)
    }

    /// The empty cache of a new log, in a directory just made: the checkpoint is written
    /// straight to its name (created exclusively), no temporary and no rename, as no
    /// older file can be there to replace. Not synced, as in `load_listed`: a crash leaves
    /// it absent, empty or torn, each of which loads as this same empty cache.
    pub fn create_new(dir: &Path) -> Result<Self, LogError> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT);
        write_new(&path, EMPTY_CHECKPOINT)?;
        Ok(LeaderEpochFileCache {
            path,
            entries: Vec::new(),
        })
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    fn assign_no_flush(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || start_offset < 0 {
            return false;
        }
        if let Some(last) = self.entries.last() {
            if last.epoch == epoch && last.start_offset <= start_offset {
                return false;
            }
        }
        // Kafka's truncateAndAppend: a new entry supersedes any with a higher-or-equal epoch
        // or a higher-or-equal start offset.
        self.entries
            .retain(|e| e.epoch < epoch && e.start_offset < start_offset);
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        true
    }

    /// Records that `epoch` began at `start_offset`.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<(), LogError> {
        if self.assign_no_flush(epoch, start_offset) {
            self.flush()?;
        }
        Ok(())
    }

    /// OffsetForLeaderEpoch: `(epoch, end offset)` where the end offset is the start offset of
    /// the first epoch above `requested` (or `log_end_offset` for the latest epoch), and the
    /// epoch is the largest known epoch <= `requested`. `None` for Kafka's UNDEFINED answer.
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> Option<(i32, i64)> {
        if requested < 0 {
            return None;
        }
        if self.latest_epoch() == Some(requested) {
            return Some((requested, log_end_offset));
        }
        let higher = self.entries.iter().find(|e| e.epoch > requested)?;
        let floor = self.entries.iter().rev().find(|e| e.epoch <= requested);
        Some((floor.map_or(requested, |e| e.epoch), higher.start_offset))
    }

    /// Drops entries that start at or after `end_offset` (log truncated to `end_offset`).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<(), LogError> {
        let before = self.entries.len();
        self.entries.retain(|e| e.start_offset < end_offset);
        if self.entries.len() != before {
            self.flush()?;
        }
        Ok(())
    }

    /// Drops entries wholly below `start_offset`; the last of them is kept, moved up to
    /// `start_offset`, so the epoch in force at the new log start stays known.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> Result<(), LogError> {
        let below = self
            .entries
            .iter()
            .take_while(|e| e.start_offset < start_offset)
            .count();
        if below == 0 {
            return Ok(());
        }
        let mut kept = self.entries[below - 1];
        kept.start_offset = start_offset;
        self.entries.drain(..below);
        if self
            .entries
            .first()
            .is_none_or(|e| e.start_offset > start_offset)
        {
            self.entries.insert(0, kept);
        }
        self.flush()
    }

    pub fn flush(&self) -> Result<(), LogError> {
        write_leader_epoch_checkpoint(&self.path, &self.entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> (tempfile::TempDir, LeaderEpochFileCache) {
        let dir = tempfile::tempdir().unwrap();
        let c = LeaderEpochFileCache::load(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT)).unwrap();
        assert_eq!(text, "0\n0\n", "created empty with the log");
        (dir, c)
    }

    #[test]
    fn assign_and_end_offsets() {
        let (dir, mut c) = cache();
        assert_eq!(c.latest_epoch(), None);
        assert_eq!(c.end_offset_for(0, 10), None);
        c.assign(1, 0).unwrap();
        c.assign(1, 5).unwrap(); // same epoch later offset: no change
        c.assign(3, 20).unwrap();
        c.assign(5, 50).unwrap();
        assert_eq!(c.entries().len(), 3);
        assert_eq!(c.end_offset_for(5, 80), Some((5, 80)));
        assert_eq!(c.end_offset_for(3, 80), Some((3, 50)));
        assert_eq!(c.end_offset_for(4, 80), Some((3, 50)));
        assert_eq!(c.end_offset_for(2, 80), Some((1, 20)));
        assert_eq!(c.end_offset_for(0, 80), Some((0, 0)));
        assert_eq!(c.end_offset_for(6, 80), None);
        assert_eq!(c.end_offset_for(-1, 80), None);
        let reloaded = LeaderEpochFileCache::load(dir.path()).unwrap();
        assert_eq!(reloaded.entries(), c.entries());
    }

    #[test]
    fn assign_supersedes_later_entries() {
        let (_dir, mut c) = cache();
        c.assign(1, 0).unwrap();
        c.assign(2, 10).unwrap();
        c.assign(3, 20).unwrap();
        c.assign(4, 15).unwrap();
        assert_eq!(
            c.entries(),
            &[
                EpochEntry {
                    epoch: 1,
                    start_offset: 0
                },
                EpochEntry {
                    epoch: 2,
                    start_offset: 10
                },
                EpochEntry {
                    epoch: 4,
                    start_offset: 15
                }
            ]
        );
    }

    #[test]
    fn truncation() {
        let (dir, mut c) = cache();
        c.assign(1, 0).unwrap();
        c.assign(2, 10).unwrap();
        c.assign(3, 20).unwrap();
        c.truncate_from_end(20).unwrap();
        assert_eq!(c.latest_epoch(), Some(2));
        c.truncate_from_start(12).unwrap();
        assert_eq!(
            c.entries(),
            &[EpochEntry {
                epoch: 2,
                start_offset: 12
            }]
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT)).unwrap(),
            "0\n1\n2 12\n"
        );
    }

    #[test]
    fn damaged_checkpoint_is_discarded() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LEADER_EPOCH_CHECKPOINT), "0\n5\n1 0\n").unwrap();
        let c = LeaderEpochFileCache::load(dir.path()).unwrap();
        assert!(c.entries().is_empty());
    }
}
