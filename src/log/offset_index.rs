//! `.index`: maps offsets to byte positions in the segment's `.log`.

use std::path::Path;

use super::index_file::IndexFile;
use super::LogError;

/// Kafka's `OffsetIndex`. Entries are 8 bytes: i32 relative offset (offset - base_offset),
/// i32 position of a batch in the `.log`, big-endian. The offset is the *last* offset of the
/// batch starting at that position. Invariants: offsets strictly increase, positions
/// strictly increase, relative offsets fit in 0..=i32::MAX. Sparse: one entry per
/// `index.interval.bytes` of appended batches. Rebuilt from the log after a crash.
pub struct OffsetIndex {
    base_offset: i64,
    file: IndexFile,
}

pub const OFFSET_ENTRY_SIZE: usize = 8;

impl OffsetIndex {
    pub fn open(path: &Path, base_offset: i64, max_index_size: u32) -> Result<Self, LogError> {
        let file = IndexFile::open(path, OFFSET_ENTRY_SIZE, max_index_size)?;
        Ok(OffsetIndex { base_offset, file })
    }

    /// A new, empty index at `path`, which cannot exist yet (see `IndexFile::create_new`).
    pub fn create_new(
        path: &Path,
        base_offset: i64,
        max_index_size: u32,
    ) -> Result<Self, LogError> {
        let file = IndexFile::create_new(path, OFFSET_ENTRY_SIZE, max_index_size)?;
        Ok(OffsetIndex { base_offset, file })
    }

    fn decode(&self, e: &[u8]) -> (i64, u32) {
        let rel = i32::from_be_bytes([e[0], e[1], e[2], e[3]]);
        let pos = u32::from_be_bytes([e[4], e[5], e[6], e[7]]);
        (self.base_offset + i64::from(rel), pos)
    }

    pub fn entries(&self) -> usize {
        self.file.entries()
    }
    pub fn is_full(&self) -> bool {
        self.file.entries() >= self.file.max_entries()
    }
    pub fn index_file(&self) -> &IndexFile {
        &self.file
    }

    /// The `n`th entry as (offset, position).
    pub fn entry(&self, n: usize) -> Option<(i64, u32)> {
        self.file.entry(n).map(|e| self.decode(e))
    }

    pub fn last_entry(&self) -> Option<(i64, u32)> {
        self.entries().checked_sub(1).and_then(|n| self.entry(n))
    }

    /// Appends (offset, position). Out-of-order entries are refused; they mean a bug.
    pub fn append(&mut self, offset: i64, position: u32) -> Result<(), LogError> {
        let rel = offset - self.base_offset;
        if !(0..=i64::from(i32::MAX)).contains(&rel) {
            return Err(LogError::corrupt_file(
                self.file.path(),
                format!("offset {offset} out of index range"),
            ));
        }
        if let Some((last_offset, last_position)) = self.last_entry() {
            if offset <= last_offset || position <= last_position {
                return Err(LogError::corrupt_file(
                    self.file.path(),
                    format!(
                        "entry ({offset}, {position}) not after ({last_offset}, {last_position})"
                    ),
                ));
            }
        }
        let mut entry = [0u8; OFFSET_ENTRY_SIZE];
        entry[..4].copy_from_slice(&(rel as i32).to_be_bytes());
        entry[4..].copy_from_slice(&position.to_be_bytes());
        self.file.push(&entry)
    }

    /// The entry with the largest offset <= `target`, or (base_offset, 0).
    pub fn lookup(&self, target: i64) -> (i64, u32) {
        let base = self.base_offset;
        self.file
            .floor_slot(target, |e| {
                base + i64::from(i32::from_be_bytes([e[0], e[1], e[2], e[3]]))
            })
            .and_then(|slot| self.entry(slot))
            .unwrap_or((self.base_offset, 0))
    }

    /// Removes entries with offset >= `offset`.
    pub fn truncate_to(&mut self, offset: i64) {
        let keep = (0..self.entries())
            .take_while(|&n| self.entry(n).is_some_and(|(o, _)| o < offset))
            .count();
        self.file.truncate_entries(keep);
    }

    pub fn reset(&mut self) {
        self.file.truncate_entries(0);
    }

    /// Checks the invariants of entries read from disk; an error means rebuild.
    pub fn sanity_check(&self) -> Result<(), LogError> {
        let mut prev: Option<(i64, u32)> = None;
        for n in 0..self.entries() {
            let (offset, position) = self.entry(n).unwrap_or((i64::MIN, 0));
            let ordered = prev.is_none_or(|(po, pp)| offset > po && position > pp);
            if offset < self.base_offset || !ordered {
                return Err(LogError::corrupt_file(
                    self.file.path(),
                    format!("entry {n} ({offset}, {position}) out of order"),
                ));
            }
            prev = Some((offset, position));
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
    fn appends_looks_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000100.index");
        let mut idx = OffsetIndex::open(&path, 100, 1003).unwrap();
        // Created empty, not preallocated: room for 125 entries all the same.
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        assert_eq!(idx.index_file().max_entries(), 125);
        assert_eq!(idx.lookup(150), (100, 0));
        idx.append(110, 4100).unwrap();
        idx.append(120, 8300).unwrap();
        idx.append(130, 12400).unwrap();
        assert_eq!(idx.lookup(99), (100, 0));
        assert_eq!(idx.lookup(109), (100, 0));
        assert_eq!(idx.lookup(110), (110, 4100));
        assert_eq!(idx.lookup(125), (120, 8300));
        assert_eq!(idx.lookup(1_000), (130, 12400));
        assert!(idx.append(130, 20000).is_err());
        assert!(idx.append(140, 12400).is_err());
        assert!(idx.append(99, 1).is_err());
    }

    #[test]
    fn trim_reopen_and_truncate() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.index");
        let mut idx = OffsetIndex::open(&path, 0, 4096).unwrap();
        for i in 1..=10u32 {
            idx.append(i64::from(i) * 10, i * 1000).unwrap();
        }
        idx.trim_to_valid_size().unwrap();
        drop(idx);
        // Kafka's on-disk bytes: i32 relative offset, i32 position, big-endian.
        let raw = std::fs::read(&path).unwrap();
        assert_eq!(raw.len(), 80);
        assert_eq!(&raw[..8], &[0, 0, 0, 10, 0, 0, 0x03, 0xe8]);
        let mut idx = OffsetIndex::open(&path, 0, 4096).unwrap();
        assert_eq!(idx.entries(), 10);
        idx.sanity_check().unwrap();
        assert_eq!(idx.lookup(55), (50, 5000));
        idx.truncate_to(50);
        assert_eq!(idx.entries(), 4);
        assert_eq!(idx.lookup(55), (40, 4000));
        idx.append(45, 4500).unwrap();
        assert_eq!(idx.lookup(1000), (45, 4500));
    }

    #[test]
    fn full_index_and_garbage_detection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.index");
        let mut idx = OffsetIndex::open(&path, 0, 16).unwrap();
        idx.append(1, 10).unwrap();
        idx.append(2, 20).unwrap();
        assert!(idx.is_full());
        assert!(idx.append(3, 30).is_err());
        drop(idx);
        // A file preallocated and never trimmed (as Kafka leaves one after a crash) has
        // zero slots that look like entries: caught.
        let path2 = dir.path().join("00000000000000000001.index");
        std::fs::write(&path2, [0u8; 64]).unwrap();
        let reopened = OffsetIndex::open(&path2, 0, 64).unwrap();
        assert_eq!(reopened.entries(), 8);
        assert!(reopened.sanity_check().is_err());
    }
}
