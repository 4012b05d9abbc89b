//! A memory-mapped file of fixed-size entries: the shared machinery of `.index` and
//! `.timeindex` (Kafka's `AbstractIndex`).
//!
//! There is no header and no count: a file opened from disk is taken to hold
//! `len / entry_size` entries. A new file is preallocated (zero-filled) to the largest
//! multiple of the entry size within `max_index_size`, and must be trimmed to its valid
//! entries when the segment rolls or closes, or the zero slots would later read as entries.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::MmapMut;

use super::LogError;

pub struct IndexFile {
    path: PathBuf,
    file: Arc<File>,
    mmap: MmapMut,
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
        let max_entries = mmap.len() / entry_size;
        Ok(IndexFile {
            path: path.to_path_buf(),
            file: Arc::new(file),
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
    pub fn file(&self) -> &Arc<File> {
        &self.file
    }

    /// The bytes of entry `n`, if it exists.
    pub fn entry(&self, n: usize) -> Option<&[u8]> {
        if n >= self.entries {
            return None;
        }
        self.mmap
            .get(n * self.entry_size..(n + 1) * self.entry_size)
    }

    /// Appends one entry; the caller has checked ordering. Errors when the file is full.
    pub fn push(&mut self, entry: &[u8]) -> Result<(), LogError> {
        debug_assert_eq!(entry.len(), self.entry_size);
        if self.entries >= self.max_entries {
            return Err(LogError::corrupt_file(&self.path, "index is full"));
        }
        let at = self.entries * self.entry_size;
        self.mmap[at..at + self.entry_size].copy_from_slice(entry);
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
    /// entries) and remaps it.
    pub fn resize(&mut self, new_len: usize) -> Result<(), LogError> {
        let new_len = round_down(new_len, self.entry_size).max(self.entries * self.entry_size);
        if new_len == self.mmap.len() {
            return Ok(());
        }
        self.mmap.flush()?;
        // Drop the old mapping before changing the file's length, so no mapping ever covers
        // bytes past the end of the file.
        self.mmap = MmapMut::map_anon(0)?;
        self.file.set_len(new_len as u64)?;
        self.mmap = map(&self.file)?;
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

fn map(file: &File) -> Result<MmapMut, LogError> {
    // SAFETY: the index file lives in a partition directory that only this broker writes,
    // and this struct owns the only handle that changes its length; `resize` drops the map
    // before shrinking the file and remaps afterwards, so the mapping never extends past
    // the end of the file. Entries are plain bytes, so any content is a valid `[u8]`.
    let mmap = unsafe { MmapMut::map_mut(file)? };
    Ok(mmap)
}
