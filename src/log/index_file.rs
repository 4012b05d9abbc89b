//! A file of fixed-size entries: the shared machinery of `.index` and `.timeindex`
//! (Kafka's `AbstractIndex`), on disk in Kafka's exact format.
//!
//! There is no header and no count: a file opened from disk is taken to hold
//! `len / entry_size` entries. Those are read through a read-only mapping, taken when the
//! file is opened and touched only by lookups (an older segment's index is opened on first
//! use, see `LogSegment`). Entries appended after them live in a heap buffer sized by what
//! was written, and lookups read them there; the file catches up with positioned writes
//! (page cache, not this process's memory) once a page's worth is pending, at every flush
//! and when the segment rolls or closes, which also trims the file to its entries and
//! maps it again, freeing the buffer.
//!
//! Kafka instead preallocates the file to `max_index_size` and writes entries through a
//! shared writable mapping. With thousands of partitions that costs a dirty page per
//! index, counted in the broker's resident memory for as long as the segment is active;
//! the buffer costs the entries' bytes. The file may lag the buffer between flushes: a
//! crash loses only entries for data after the recovery point, whose segments are rebuilt
//! from the log on the next start (`loader`), as are an index's entries in Kafka after an
//! unclean shutdown.
//!
//! As in Kafka, no file descriptor is kept open: a segment holds one descriptor (its
//! `.log`), not three. Writing, trimming and syncing open the file for a moment.

use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use memmap2::{Advice, Mmap, MmapOptions};

use super::LogError;

/// Pending bytes that make an append write them to the file: one page.
const WRITE_BEHIND_BYTES: usize = 4096;

/// An index: a mapped prefix read from disk, then the entries appended since. Reads go
/// through `&self`, changes through `&mut self`; the log's lock serialises them.
pub struct IndexFile {
    path: PathBuf,
    /// The file as it was last opened or trimmed, read-only; `None` when that was empty.
    mmap: Option<Mmap>,
    /// Entries read from `mmap` (a truncation may leave fewer than it holds).
    mapped: usize,
    /// Entries after the mapped ones, `tail.len() / entry_size` of them.
    tail: Vec<u8>,
    entry_size: usize,
    /// The first `written` entries are in the file as they are here; the rest of `tail`
    /// is still to be written. Never below `mapped`. Atomic so that `take_sync_target`
    /// (under the log's lock, through `&self`) can write them.
    written: AtomicUsize,
    /// Entries the index may grow to (`max_index_size`, or the file's own length if larger).
    max_entries: usize,
    /// The file changed since the last `take_sync_target`: an unchanged index is not synced
    /// again. Entries still to be written count as a change.
    dirty: AtomicBool,
    /// This open created the file (it was missing).
    created: bool,
}

impl IndexFile {
    /// Opens `path`, creating it empty if missing. An existing file keeps its length and
    /// `len / entry_size` entries.
    pub fn open(path: &Path, entry_size: usize, max_index_size: u32) -> Result<Self, LogError> {
        let (file, existed) = match OpenOptions::new().read(true).open(path) {
            Ok(file) => (file, true),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(path)?;
                (file, false)
            }
            Err(e) => return Err(e.into()),
        };
        let len = usize::try_from(file.metadata()?.len()).unwrap_or(usize::MAX);
        let entries = len / entry_size;
        let mmap = map(&file, entries * entry_size)?;
        drop(file);
        let max_len = round_down(max_index_size as usize, entry_size).max(len);
        Ok(Self::with_mapped(
            path,
            mmap,
            entries,
            entry_size,
            max_len / entry_size,
            !existed,
        ))
    }

    /// A new, empty index at `path`, which cannot exist yet (its segment's directory was
    /// just made): created exclusively, with nothing looked up or measured first.
    pub fn create_new(
        path: &Path,
        entry_size: usize,
        max_index_size: u32,
    ) -> Result<Self, LogError> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)?;
        let max_len = round_down(max_index_size as usize, entry_size);
        Ok(Self::with_mapped(
            path,
            None,
            0,
            entry_size,
            max_len / entry_size,
            true,
        ))
    }

    /// The index whose file's first `entries` entries are `mmap`; `created`: the file was
    /// made by this open, so it is also unsynced.
    fn with_mapped(
        path: &Path,
        mmap: Option<Mmap>,
        entries: usize,
        entry_size: usize,
        max_entries: usize,
        created: bool,
    ) -> Self {
        IndexFile {
            path: path.to_path_buf(),
            mmap,
            mapped: entries,
            tail: Vec::new(),
            entry_size,
            written: AtomicUsize::new(entries),
            max_entries,
            dirty: AtomicBool::new(created),
            created,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn entries(&self) -> usize {
        self.mapped + self.tail.len() / self.entry_size
    }
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }
    /// Whether this open created the file: an index that was missing.
    pub fn was_created(&self) -> bool {
        self.created
    }
    /// Heap bytes held for appended entries (what this index adds to resident memory
    /// beyond the page cache).
    pub fn buffered_bytes(&self) -> usize {
        self.tail.capacity()
    }

    /// The file to fsync outside the log's lock (`SyncTarget`) if the index changed since
    /// the last call; entries not yet in the file are written to it first. The change is
    /// then counted as synced (as written, on success).
    pub fn take_sync_target(&self) -> Option<std::io::Result<File>> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return None;
        }
        let opened = OpenOptions::new().write(true).open(&self.path);
        let written = opened.and_then(|file| self.write_pending(&file).map(|()| file));
        if written.is_err() {
            self.dirty.store(true, Ordering::Release);
        }
        Some(written)
    }

    /// Writes the entries the file lacks at their positions.
    fn write_pending(&self, file: &File) -> std::io::Result<()> {
        let from = self.written.load(Ordering::Acquire);
        let entries = self.entries();
        if from >= entries {
            return Ok(());
        }
        // `written >= mapped` always holds, so every pending entry is in `tail`.
        let start = (from - self.mapped) * self.entry_size;
        file.write_all_at(&self.tail[start..], (from * self.entry_size) as u64)?;
        self.written.store(entries, Ordering::Release);
        Ok(())
    }

    /// The bytes of entry `n`, if it exists.
    pub fn entry(&self, n: usize) -> Option<&[u8]> {
        let size = self.entry_size;
        if n < self.mapped {
            return self.mmap.as_ref()?.get(n * size..(n + 1) * size);
        }
        let at = (n - self.mapped) * size;
        self.tail.get(at..at + size)
    }

    /// Appends one entry; the caller has checked ordering. Errors when the index is full.
    pub fn push(&mut self, entry: &[u8]) -> Result<(), LogError> {
        debug_assert_eq!(entry.len(), self.entry_size);
        if self.entries() >= self.max_entries {
            return Err(LogError::corrupt_file(&self.path, "index is full"));
        }
        self.tail.extend_from_slice(entry);
        self.dirty.store(true, Ordering::Release);
        let pending = self.entries() - self.written.load(Ordering::Acquire);
        if pending * self.entry_size >= WRITE_BEHIND_BYTES {
            let file = OpenOptions::new().write(true).open(&self.path)?;
            self.write_pending(&file)?;
        }
        Ok(())
    }

    /// Forgets every entry from `n` on (the file's bytes stay until trimmed or overwritten).
    pub fn truncate_entries(&mut self, n: usize) {
        if n < self.mapped {
            // Later appends will be written over the cut entries, which the mapping still
            // shows: the kept ones move to the buffer and the mapping goes (a truncation
            // below an index's last flush is rare: a follower's or a recovery's).
            let kept = self
                .mmap
                .as_ref()
                .map_or(&[][..], |m| &m[..n * self.entry_size]);
            self.tail = kept.to_vec();
            self.mmap = None;
            self.mapped = 0;
        } else {
            self.tail
                .truncate(self.tail.len().min((n - self.mapped) * self.entry_size));
        }
        let written = self.written.get_mut();
        *written = (*written).min(n);
    }

    /// Binary search for the last entry whose key (as read by `key`) is <= `target`.
    pub fn floor_slot(&self, target: i64, key: impl Fn(&[u8]) -> i64) -> Option<usize> {
        let (mut lo, mut hi) = (0usize, self.entries());
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

    /// Writes the pending entries, cuts the file to its valid entries (at roll and close,
    /// or the zero or stale bytes past them would later read as entries) and maps it
    /// again, freeing the buffer. Nothing is synced: that is the next flush's (as in
    /// Kafka's `AbstractIndex.trimToValidSize`); an fsync here would cost a journal commit
    /// per segment at startup.
    pub fn trim_to_valid_size(&mut self) -> Result<(), LogError> {
        let entries = self.entries();
        let valid = entries * self.entry_size;
        let file = OpenOptions::new().read(true).write(true).open(&self.path)?;
        self.write_pending(&file)?;
        let len = file.metadata()?.len();
        if len == valid as u64 && self.tail.is_empty() {
            return Ok(());
        }
        // The old mapping goes before the file shrinks: nothing may read past its end.
        self.mmap = None;
        self.mapped = 0;
        if len != valid as u64 {
            file.set_len(valid as u64)?;
            self.dirty.store(true, Ordering::Release);
        }
        self.mmap = map(&file, valid)?;
        self.mapped = entries;
        self.tail = Vec::new();
        Ok(())
    }
}

fn round_down(n: usize, multiple: usize) -> usize {
    n / multiple * multiple
}

/// Maps the first `len` bytes of `file` read-only; nothing to map when `len` is 0.
fn map(file: &File, len: usize) -> Result<Option<Mmap>, LogError> {
    if len == 0 {
        return Ok(None);
    }
    // SAFETY: the index file lives in a partition directory that only this broker
    // writes, and no byte of it is written or cut while mapped: appends are written past
    // the mapping (`written >= mapped`, and a truncation into the mapped entries drops
    // the mapping), and `trim_to_valid_size` drops the mapping before it shortens the
    // file. So the bytes behind the `&[u8]` the mapping hands out do not change.
    let mmap = unsafe { MmapOptions::new().len(len).map(file)? };
    // Lookups touch index pages one at a time (a binary search). Without this advice a
    // first touch faults in a whole read-around window of page cache (several MiB with
    // large folios): with thousands of partitions that made a restart spend most of its
    // time reading. Advice only changes speed, so a refusal is not an error.
    let _ = mmap.advise(Advice::Random);
    Ok(Some(mmap))
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
        std::fs::write(&path, [0u8; 64]).unwrap();
        let mut index = IndexFile::open(&path, 8, 1 << 20).unwrap();
        let flags = vm_flags(&path).expect("the index is mapped");
        assert!(flags.split_whitespace().any(|f| f == "rr"), "{flags}");
        // A trim maps again, with the same advice.
        index.truncate_entries(4);
        index.trim_to_valid_size().unwrap();
        let flags = vm_flags(&path).expect("the index is mapped");
        assert!(flags.split_whitespace().any(|f| f == "rr"), "{flags}");
    }
}
