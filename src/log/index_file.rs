//! A memory-mapped file of fixed-size entries: the shared machinery of `.index` and
//! `.timeindex` (Kafka's `AbstractIndex`).
//!
//! There is no header and no count: a file opened from disk is taken to hold
//! `len / entry_size` entries. A new file is preallocated (zero-filled) to the largest
//! multiple of the entry size within `max_index_size`, and must be trimmed to its valid
//! entries when the segment rolls or closes, or the zero slots would later read as entries.
//! An existing file is mapped at the length it has: opening never resizes it. The first
//! append beyond that length grows it to `max_index_size` (the active segment after a
//! clean shutdown, whose indexes were trimmed when it closed).
//!
//! As in Kafka, the file descriptor is closed once the file is mapped: a segment holds one
//! descriptor (its `.log`), not three. The mapping is enough to read, write and `msync`
//! the index; only a resize reopens the file for a moment.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use memmap2::{Advice, MmapOptions, MmapRaw};

use super::LogError;

/// A memory-mapped index. The mapping is shared (`Arc`) only so that a flush can `msync`
/// it after the log's lock is released; every read and write of entries goes through
/// `&self` / `&mut self` of this struct, which the log's lock serialises.
pub struct IndexFile {
    path: PathBuf,
    /// The whole file; `None` while it is empty (nothing to map).
    mmap: Option<Arc<MmapRaw>>,
    entry_size: usize,
    entries: usize,
    /// Entries the file may grow to (`max_index_size`, or the file's own length if larger).
    max_entries: usize,
    /// Entries written or the length changed since the last `take_sync_target`: an
    /// unchanged index is not synced again.
    dirty: AtomicBool,
    /// This open created the file (it was missing).
    created: bool,
}

impl IndexFile {
    /// Opens `path`, creating and preallocating it to `max_index_size` if missing. An
    /// existing file keeps its length and `len / entry_size` entries.
    pub fn open(path: &Path, entry_size: usize, max_index_size: u32) -> Result<Self, LogError> {
        let preallocated = round_down(max_index_size as usize, entry_size);
        let (file, existed) = match OpenOptions::new().read(true).write(true).open(path) {
            Ok(file) => (file, true),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(path)?;
                file.set_len(preallocated as u64)?;
                (file, false)
            }
            Err(e) => return Err(e.into()),
        };
        let len = usize::try_from(file.metadata()?.len()).unwrap_or(usize::MAX);
        let entries = if existed { len / entry_size } else { 0 };
        let mmap = map(&file, len)?;
        drop(file);
        Ok(IndexFile {
            path: path.to_path_buf(),
            mmap,
            entry_size,
            entries,
            max_entries: preallocated.max(len) / entry_size,
            dirty: AtomicBool::new(!existed),
            created: !existed,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn entries(&self) -> usize {
        self.entries
    }
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }
    /// Whether this open created the file: an index that was missing.
    pub fn was_created(&self) -> bool {
        self.created
    }

    /// The mapping to `msync` outside the log's lock (`SyncTarget`) if the index changed
    /// since the last call; the change is then counted as synced.
    pub fn take_sync_target(&self) -> Option<Arc<MmapRaw>> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return None;
        }
        self.mmap.clone()
    }

    /// Entries that fit in the file as it is mapped now.
    fn mapped_entries(&self) -> usize {
        self.mmap.as_ref().map_or(0, |m| m.len() / self.entry_size)
    }

    fn bytes(&self) -> &[u8] {
        let Some(mmap) = &self.mmap else {
            return &[];
        };
        // SAFETY: the mapping covers `len()` bytes of a file at least that long (see
        // `map`), stays mapped while `self.mmap` lives, and is only written through
        // `bytes_mut`, which needs `&mut self`; so no write aliases this shared borrow.
        unsafe { std::slice::from_raw_parts(mmap.as_ptr(), mmap.len()) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        let Some(mmap) = &self.mmap else {
            return &mut [];
        };
        // SAFETY: as in `bytes`; `&mut self` makes this the only borrow of the mapping's
        // bytes in this process (a concurrent msync reads nothing in user space).
        unsafe { std::slice::from_raw_parts_mut(mmap.as_mut_ptr(), mmap.len()) }
    }

    /// The bytes of entry `n`, if it exists.
    pub fn entry(&self, n: usize) -> Option<&[u8]> {
        if n >= self.entries {
            return None;
        }
        self.bytes()
            .get(n * self.entry_size..(n + 1) * self.entry_size)
    }

    /// Appends one entry; the caller has checked ordering. Errors when the file is full;
    /// grows a file mapped shorter than `max_index_size` first.
    pub fn push(&mut self, entry: &[u8]) -> Result<(), LogError> {
        debug_assert_eq!(entry.len(), self.entry_size);
        if self.entries >= self.max_entries {
            return Err(LogError::corrupt_file(&self.path, "index is full"));
        }
        if self.entries >= self.mapped_entries() {
            self.resize(self.max_entries * self.entry_size)?;
        }
        let (at, size) = (self.entries * self.entry_size, self.entry_size);
        match self.bytes_mut().get_mut(at..at + size) {
            Some(slot) => slot.copy_from_slice(entry),
            None => {
                return Err(LogError::corrupt_file(
                    &self.path,
                    "index shorter than its entries",
                ))
            }
        }
        self.entries += 1;
        self.dirty.store(true, Ordering::Release);
        Ok(())
    }

    /// Forgets every entry from `n` on (the bytes stay until trimmed or overwritten).
    pub fn truncate_entries(&mut self, n: usize) {
        self.entries = self.entries.min(n);
    }

    /// Binary search for the last entry whose key (as read by `key`) is <= `target`.
    pub fn floor_slot(&self, target: i64, key: impl Fn(&[u8]) -> i64) -> Option<usize> {
        let (mut lo, mut hi) = (0usize, self.entries);
        // Invariant: entries < lo have key <= target; entries >= hi have key > target.
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.entry(mid) {
                Some(e) if key(e) <= target => lo = mid + 1,
                _ => hi = mid,
            }
        }
        lo.checked_sub(1)
    }

    /// Resizes the file to `new_len` rounded down to whole entries (at least the valid
    /// entries) and remaps it. Nothing is synced: the old and the new mapping share the
    /// file's page cache, so entries written through the old one stay in the file and
    /// reach disk with the next flush of the segment (as in Kafka's `AbstractIndex.resize`).
    /// An `msync` here would cost a journal commit per resize, several per partition at
    /// startup.
    pub fn resize(&mut self, new_len: usize) -> Result<(), LogError> {
        let new_len = round_down(new_len, self.entry_size).max(self.entries * self.entry_size);
        if new_len == self.mapped_entries() * self.entry_size {
            return Ok(());
        }
        let file = OpenOptions::new().read(true).write(true).open(&self.path)?;
        file.set_len(new_len as u64)?;
        // A flush may still hold the old mapping for its msync; this struct never touches
        // it again, so no access reaches past the end of the shrunk file.
        self.mmap = map(&file, new_len)?;
        self.max_entries = self.max_entries.max(new_len / self.entry_size);
        self.dirty.store(true, Ordering::Release);
        Ok(())
    }

    /// Cuts the file to its valid entries (at roll and close); nothing to do when it has
    /// no other bytes.
    pub fn trim_to_valid_size(&mut self) -> Result<(), LogError> {
        self.resize(self.entries * self.entry_size)
    }
}

fn round_down(n: usize, multiple: usize) -> usize {
    n / multiple * multiple
}

/// Maps the whole of `file`, `len` bytes long; an empty file has no mapping.
fn map(file: &File, len: usize) -> Result<Option<Arc<MmapRaw>>, LogError> {
    if len == 0 {
        return Ok(None);
    }
    // The index file lives in a partition directory that only this broker writes, and
    // only `resize` changes its length, remapping at once; the mapping is taken of the
    // whole file as it is now. `MmapRaw` hands out pointers, not references: `bytes` and
    // `bytes_mut` carry the safety argument for reading and writing through them.
    let mmap = MmapOptions::new().len(len).map_raw(file)?;
    // Index pages are touched one at a time (a lookup's binary search, an append at the
    // end), and most of a preallocated file is a hole. Without this advice every first
    // touch faults in a whole read-around window of zeroed page cache (several MiB
    // with large folios), which a trim then throws away: that made a restart with
    // thousands of partitions spend most of its time zeroing memory. Advice only changes
    // speed, so a refusal is not an error.
    let _ = mmap.advise(Advice::Random);
    Ok(Some(Arc::new(mmap)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `VmFlags` line of this process's mapping of `path`.
    fn vm_flags(path: &Path) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let name = path.to_str()?;
        let mut lines = smaps.lines().skip_while(|l| !l.ends_with(name));
        lines.find(|l| l.starts_with("VmFlags:")).map(str::to_owned)
    }

    #[test]
    fn mappings_are_advised_random_so_a_touch_reads_no_window() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.index");
        let mut index = IndexFile::open(&path, 8, 1 << 20).unwrap();
        let flags = vm_flags(&path).expect("the index is mapped");
        assert!(flags.split_whitespace().any(|f| f == "rr"), "{flags}");
        // A resize maps again, with the same advice.
        index.resize(4096).unwrap();
        let flags = vm_flags(&path).expect("the index is mapped");
        assert!(flags.split_whitespace().any(|f| f == "rr"), "{flags}");
    }
}
