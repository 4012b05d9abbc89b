//! `.timeindex`: maps timestamps to offsets.

use std::path::Path;

use super::index_file::IndexFile;
use super::LogError;

/// Kafka's `TimeIndex`. Entries are 12 bytes: i64 timestamp, i32 relative offset,
/// big-endian. Each entry is (max timestamp so far, offset of the batch that carries it);
/// an entry is added only when the timestamp is strictly greater than the last one, so
/// timestamps strictly increase and offsets never decrease. One slot is kept free for the
/// final entry written at roll/close, so the index counts as full one entry early.
pub struct TimeIndex {
    base_offset: i64,
    file: IndexFile,
}

pub const TIME_ENTRY_SIZE: usize = 12;

impl TimeIndex {
    pub fn open(path: &Path, base_offset: i64, max_index_size: u32) -> Result<Self, LogError> {
        let file = IndexFile::open(path, TIME_ENTRY_SIZE, max_index_size)?;
        Ok(TimeIndex { base_offset, file })
    }

    /// A new, empty index at `path`, which cannot exist yet (see `IndexFile::create_new`).
    pub fn create_new(
        path: &Path,
        base_offset: i64,
        max_index_size: u32,
    ) -> Result<Self, LogError> {
        let file = IndexFile::create_new(path, TIME_ENTRY_SIZE, max_index_size)?;
        Ok(TimeIndex { base_offset, file })
    }

    fn decode(&self, e: &[u8]) -> (i64, i64) {
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&e[..8]);
        let rel = i32::from_be_bytes([e[8], e[9], e[10], e[11]]);
        (i64::from_be_bytes(ts), self.base_offset + i64::from(rel))
    }

    pub fn entries(&self) -> usize {
        self.file.entries()
    }
    pub fn is_full(&self) -> bool {
        self.file.entries() + 1 >= self.file.max_entries()
    }
    pub fn index_file(&self) -> &IndexFile {
        &self.file
    }
    pub fn entry(&self, n: usize) -> Option<(i64, i64)> {
        self.file.entry(n).map(|e| self.decode(e))
    }
    pub fn last_entry(&self) -> Option<(i64, i64)> {
        self.entries().checked_sub(1).and_then(|n| self.entry(n))
    }

    /// Appends (timestamp, offset) if the timestamp is newer than the last entry's.
    /// `skip_full_check` is for the final entry at roll/close, which uses the reserved slot.
    pub fn maybe_append(
        &mut self,
        timestamp: i64,
        offset: i64,
        skip_full_check: bool,
    ) -> Result<(), LogError> {
        if !skip_full_check && self.is_full() {
            return Err(LogError::corrupt_file(
                self.file.path(),
                "time index is full",
            ));
        }
        if let Some((last_ts, last_offset)) = self.last_entry() {
            if offset < last_offset {
                return Err(LogError::corrupt_file(
                    self.file.path(),
                    format!("offset {offset} before {last_offset}"),
                ));
            }
            if timestamp <= last_ts {
                return Ok(());
            }
        }
        let rel = offset - self.base_offset;
        if !(0..=i64::from(i32::MAX)).contains(&rel) {
            return Err(LogError::corrupt_file(
                self.file.path(),
                format!("offset {offset} out of index range"),
            ));
        }
        let mut entry = [0u8; TIME_ENTRY_SIZE];
        entry[..8].copy_from_slice(&timestamp.to_be_bytes());
        entry[8..].copy_from_slice(&(rel as i32).to_be_bytes());
        self.file.push(&entry)
    }

    /// The entry with the largest timestamp <= `target`, or (-1, base_offset).
    pub fn lookup(&self, target: i64) -> (i64, i64) {
        self.file
            .floor_slot(target, |e| {
                let mut ts = [0u8; 8];
                ts.copy_from_slice(&e[..8]);
                i64::from_be_bytes(ts)
            })
            .and_then(|slot| self.entry(slot))
            .unwrap_or((-1, self.base_offset))
    }

    /// Removes entries with offset >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        let keep = (0..self.entries())
            .take_while(|&n| self.entry(n).is_some_and(|(_, o)| o < offset))
            .count();
        self.file.truncate_entries(keep);
    }

    pub fn reset(&mut self) {
        self.file.truncate_entries(0);
    }

    pub fn sanity_check(&self) -> Result<(), LogError> {
        let mut prev: Option<(i64, i64)> = None;
        for n in 0..self.entries() {
            let (ts, offset) = self.entry(n).unwrap_or((i64::MIN, i64::MIN));
            let ordered = prev.is_none_or(|(pt, po)| ts > pt && offset >= po);
            if offset < self.base_offset || !ordered {
                return Err(LogError::corrupt_file(
                    self.file.path(),
                    format!("entry {n} ({ts}, {offset}) out of order"),
                ));
            }
            prev = Some((ts, offset));
        }
        Ok(())
    }

    pub fn trim_to_valid_size(&mut self) -> Result<(), LogError> {
        self.file.trim_to_valid_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_lookup_and_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000050.timeindex");
        let mut idx = TimeIndex::open(&path, 50, 10485760).unwrap();
        assert_eq!(idx.index_file().max_entries(), 10485756 / 12);
        idx.maybe_append(1000, 52, false).unwrap();
        idx.maybe_append(1000, 55, false).unwrap(); // not newer: skipped
        idx.maybe_append(900, 56, false).unwrap(); // older: skipped
        idx.maybe_append(2000, 60, false).unwrap();
        assert_eq!(idx.entries(), 2);
        assert!(idx.maybe_append(3000, 59, false).is_err());
        assert_eq!(idx.lookup(999), (-1, 50));
        assert_eq!(idx.lookup(1500), (1000, 52));
        assert_eq!(idx.lookup(5000), (2000, 60));
        idx.trim_to_valid_size().unwrap();
        let raw = std::fs::read(&path).unwrap();
        assert_eq!(raw.len(), 24);
        assert_eq!(&raw[..12], &[0, 0, 0, 0, 0, 0, 0x03, 0xe8, 0, 0, 0, 2]);
        drop(idx);
        let mut idx = TimeIndex::open(&path, 50, 10485760).unwrap();
        idx.sanity_check().unwrap();
        assert_eq!(idx.last_entry(), Some((2000, 60)));
        idx.truncate_to(60);
        assert_eq!(idx.last_entry(), Some((1000, 52)));
    }

    #[test]
    fn keeps_one_slot_for_the_final_entry() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.timeindex");
        let mut idx = TimeIndex::open(&path, 0, 36).unwrap();
        idx.maybe_append(1, 1, false).unwrap();
        idx.maybe_append(2, 2, false).unwrap();
        assert!(idx.is_full());
        assert!(idx.maybe_append(3, 3, false).is_err());
        idx.maybe_append(3, 3, true).unwrap();
        assert_eq!(idx.entries(), 3);
    }
}
