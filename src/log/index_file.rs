//! A memory-mapped file of fixed-size entries: the shared machinery of `.index` and
//! `.timeindex` (Kafka's `AbstractIndex`).
//!
//! There is no header and no count: a file opened from disk is taken to hold
//! `len / entry_size` entries. A new file is preallocated (zero-filled) to the largest
//! multiple of the entry size within `max_index_size`, and must be trimmed to its valid
//! entries when the segment rolls or closes, or the zero slots would later read as entries.
//!
//! As in Kafka, the file descriptor is closed once the file is mapped: a segment holds one
//! descriptor (its `.log`), not three. The mapping is enough to read, write and `msync`
//! the index; only a resize reopens the file for a moment.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::{Advice, MmapOptions, MmapRaw};

use super::LogError;

/// A memory-mapped index. The mapping is shared (`Arc`) only so that a flush can `msync`
/// it after the log's lock is released; every read and write of entries goes through
/// `&self` / `&mut self` of this struct, which the log's lock serialises.
pub struct IndexFile {
    path: PathBuf,
    mmap: Arc<MmapRaw>,
    entry_size: usize,
    entries: usize,
    max_entries: usize,
}

impl IndexFile {
    /// Opens `path`, creating and preallocating it to `max_index_size` if missing. An existing
    /// file keeps `len / entry_size` entries; when `writable` it is grown back to
    /// `max_index_size` so appends can continue (the active segment).
    pub fn open(
        path: &Path,
        entry_size: usize,
        max_index_size: u32,
        writable: bool,
    ) -> Result<Self, LogError> {
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let preallocated = round_down(max_index_size as usize, entry_size) as u64;
        let len = file.metadata()?.len();
        let entries = if existed {
            (len as usize) / entry_size
        } else {
            0
        };
        if !existed || (writable && len < preallocated) {
            file.set_len(preallocated.max((entries * entry_size) as u64))?;
        }
        let mmap = map(&file)?;
        drop(file);
        let max_entries = mmap.len() / entry_size;
        Ok(IndexFile {
            path: path.to_path_buf(),
            mmap,
            entry_size,
            entries,
            max_entries,
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
    /// The mapping, for an `msync` outside the log's lock (`SyncTarget`).
    pub fn mapping(&self) -> &Arc<MmapRaw> {
        &self.mmap
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping covers `len()` bytes of a file at least that long (see
        // `map`), stays mapped while `self.mmap` lives, and is only written through
        // `bytes_mut`, which needs `&mut self`; so no write aliases this shared borrow.
        unsafe { std::slice::from_raw_parts(self.mmap.as_ptr(), self.mmap.len()) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes this the only borrow of the mapping's
        // bytes in this process (a concurrent msync reads nothing in user space).
        unsafe { std::slice::from_raw_parts_mut(self.mmap.as_mut_ptr(), self.mmap.len()) }
    }

    /// The bytes of entry `n`, if it exists.
    pub fn entry(&self, n: usize) -> Option<&[u8]> {
        if n >= self.entries {
            return None;
        }
        self.bytes()
            .get(n * self.entry_size..(n + 1) * self.entry_size)
    }

    /// Appends one entry; the caller has checked ordering. Errors when the file is full.
    pub fn push(&mut self, entry: &[u8]) -> Result<(), LogError> {
        debug_assert_eq!(entry.len(), self.entry_size);
        if self.entries >= self.max_entries {
            return Err(LogError::corrupt_file(&self.path, "index is full"));
        }
        let (at, size) = (self.entries * self.entry_size, self.entry_size);
        self.bytes_mut()[at..at + size].copy_from_slice(entry);
        self.entries += 1;
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
        if new_len == self.mmap.len() {
            return Ok(());
        }
        let file = OpenOptions::new().read(true).write(true).open(&self.path)?;
        file.set_len(new_len as u64)?;
        // A flush may still hold the old mapping for its msync; this struct never touches
        // it again, so no access reaches past the end of the shrunk file.
        self.mmap = map(&file)?;
        self.max_entries = self.mmap.len() / self.entry_size;
        Ok(())
    }

    /// Cuts the file to its valid entries (at roll and close).
    pub fn trim_to_valid_size(&mut self) -> Result<(), LogError> {
        self.resize(self.entries * self.entry_size)
    }
}

fn round_down(n: usize, multiple: usize) -> usize {
    n / multiple * multiple
}

fn map(file: &File) -> Result<Arc<MmapRaw>, LogError> {
    // The index file lives in a partition directory that only this broker writes, and
    // only `resize` changes its length, remapping at once; the mapping is taken of the
    // whole file as it is now. `MmapRaw` hands out pointers, not references: `bytes` and
    // `bytes_mut` carry the safety argument for reading and writing through them.
    let mmap = MmapOptions::new().map_raw(file)?;
    // Index pages are touched one at a time (a lookup's binary search, an append at the
    // end), and most of a preallocated file is a hole. Without this advice every first
    // touch faults in a whole read-around window of zeroed page cache (several MiB
    // with large folios), which a trim then throws away: that made a restart with
    // thousands of partitions spend most of its time zeroing memory. Advice only changes
    // speed, so a refusal is not an error.
    let _ = mmap.advise(Advice::Random);
    Ok(Arc::new(mmap))
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
        let mut index = IndexFile::open(&path, 8, 1 << 20, true).unwrap();
        let flags = vm_flags(&path).expect("the index is mapped");
        assert!(flags.split_whitespace().any(|f| f == "rr"), "{flags}");
        // A resize maps again, with the same advice.
        index.resize(4096).unwrap();
        let flags = vm_flags(&path).expect("the index is mapped");
        assert!(flags.split_whitespace().any(|f| f == "rr"), "{flags}");
    }
}
