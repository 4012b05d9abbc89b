//! `.txnindex`: the aborted transactions whose markers lie in one segment (Kafka's
//! `TransactionIndex`).
//!
//! Format: a sequence of 34-byte entries, no header, big-endian:
//! `i16 version (0), i64 producerId, i64 firstOffset, i64 lastOffset, i64 lastStableOffset`.
//! `lastOffset` is the abort marker's offset and strictly increases from entry to entry;
//! `firstOffset` is the transaction's first offset in the partition (it may lie in an
//! earlier segment). The file is created by the first append, so most segments have
//! none. It is rebuilt from the log by recovery (the markers are in the `.log`), so a
//! torn tail entry is dropped rather than trusted.
//!
//! The entries are kept in memory beside the file: read_committed fetches consult them
//! on every read, and a segment has as many as aborted transactions ended in it.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::checkpoint::read_bounded;
use super::LogError;

pub const ENTRY_BYTES: usize = 34;
const VERSION: i16 = 0;
/// Larger `.txnindex` files are refused at load: 8 million aborted transactions in one
/// segment is far beyond anything a segment of Kafka's maximum size holds.
const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// One aborted transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The offset of the abort marker.
    pub last_offset: i64,
    /// The last stable offset once this transaction was aborted.
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    fn to_bytes(self) -> [u8; ENTRY_BYTES] {
        let mut b = [0u8; ENTRY_BYTES];
        b[0..2].copy_from_slice(&VERSION.to_be_bytes());
        b[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        b[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        b[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        b[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        b
    }

    fn from_bytes(b: &[u8]) -> Self {
        let i64_at = |at: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[at..at + 8]);
            i64::from_be_bytes(x)
        };
        AbortedTxn {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        }
    }
}

pub struct TransactionIndex {
    path: PathBuf,
    base_offset: i64,
    entries: Vec<AbortedTxn>,
    /// The file was corrupt and its entries dropped: the loader replays producer state
    /// over the whole segment to put them back.
    discarded: bool,
}

impl TransactionIndex {
    /// Reads the segment's index if it exists. Entries must name markers in this segment
    /// (lastOffset >= base) in increasing order; anything else is corrupt, and the caller
    /// rebuilds the segment's indexes.
    pub fn open(path: &Path, base_offset: i64) -> Result<Self, LogError> {
        let mut index = Self::empty(path, base_offset);
        let Some(bytes) = read_bounded(path, MAX_FILE_BYTES)? else {
            return Ok(index);
        };
        for chunk in bytes.chunks_exact(ENTRY_BYTES) {
            // Kafka reads only the first byte of the version.
            if chunk[0] != 0 {
                return Err(LogError::corrupt_file(path, "unknown entry version"));
            }
            index.entries.push(AbortedTxn::from_bytes(chunk));
        }
        if bytes.len() % ENTRY_BYTES != 0 {
            tracing::warn!(path = %path.display(), "dropping a partial entry at the end of the transaction index");
            index.rewrite()?;
        }
        index.sanity_check()?;
        Ok(index)
    }

    /// An index with no entries (its file, if any, is left as it is).
    pub fn empty(path: &Path, base_offset: i64) -> Self {
        TransactionIndex {
            path: path.to_path_buf(),
            base_offset,
            entries: Vec::new(),
            discarded: false,
        }
    }

    /// An empty index in place of a corrupt one (its file emptied): every entry of the
    /// segment is to be found again from its markers.
    pub fn discarded(path: &Path, base_offset: i64) -> Result<Self, LogError> {
        let mut index = Self::empty(path, base_offset);
        index.reset()?;
        index.discarded = true;
        Ok(index)
    }

    /// Whether this index replaced a corrupt one (see `discarded`).
    pub fn was_discarded(&self) -> bool {
        self.discarded
    }

    pub fn sanity_check(&self) -> Result<(), LogError> {
        let mut last = self.base_offset - 1;
        for e in &self.entries {
            if e.last_offset <= last {
                return Err(LogError::corrupt_file(
                    &self.path,
                    format!(
                        "entry ending at {} after one ending at {last}",
                        e.last_offset
                    ),
                ));
            }
            last = e.last_offset;
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    /// Appends an entry whose marker is past every entry's. Recovery replays markers the
    /// index may already hold; those are skipped.
    pub fn append(&mut self, txn: AbortedTxn) -> Result<(), LogError> {
        if self
            .entries
            .last()
            .is_some_and(|e| e.last_offset >= txn.last_offset)
        {
            return Ok(());
        }
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        file.write_all(&txn.to_bytes())?;
        self.entries.push(txn);
        Ok(())
    }

    /// Forgets entries whose marker is at or after `offset` (the segment was truncated).
    pub fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        let keep = self.entries.partition_point(|e| e.last_offset < offset);
        if keep == self.entries.len() {
            return Ok(());
        }
        self.entries.truncate(keep);
        self.rewrite()
    }

    /// Forgets every entry (the segment's indexes are being rebuilt).
    pub fn reset(&mut self) -> Result<(), LogError> {
        self.entries.clear();
        match fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    fn rewrite(&self) -> Result<(), LogError> {
        let bytes: Vec<u8> = self.entries.iter().flat_map(|e| e.to_bytes()).collect();
        fs::write(&self.path, bytes)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(pid: i64, first: i64, last: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: pid,
            first_offset: first,
            last_offset: last,
            last_stable_offset: last + 1,
        }
    }

    #[test]
    fn kafka_bytes_round_trip_and_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000010.txnindex");
        let mut index = TransactionIndex::open(&path, 10).unwrap();
        assert!(!path.exists(), "created by the first append only");
        index.append(txn(7, 3, 12)).unwrap();
        index.append(txn(8, 11, 15)).unwrap();
        index.append(txn(8, 11, 15)).unwrap(); // a replayed marker
        let raw = fs::read(&path).unwrap();
        assert_eq!(raw.len(), 2 * ENTRY_BYTES);
        let mut first = vec![0u8, 0];
        for v in [7i64, 3, 12, 13] {
            first.extend_from_slice(&v.to_be_bytes());
        }
        assert_eq!(&raw[..ENTRY_BYTES], &first[..]);

        let reopened = TransactionIndex::open(&path, 10).unwrap();
        assert_eq!(reopened.entries(), index.entries());

        index.truncate_to(15).unwrap();
        assert_eq!(index.entries(), &[txn(7, 3, 12)]);
        assert_eq!(fs::read(&path).unwrap().len(), ENTRY_BYTES);

        // A torn tail is dropped; an entry below the segment's base is corrupt.
        let mut torn = fs::read(&path).unwrap();
        torn.extend_from_slice(&[0, 0, 1]);
        fs::write(&path, torn).unwrap();
        assert_eq!(
            TransactionIndex::open(&path, 10).unwrap().entries().len(),
            1
        );
        assert!(TransactionIndex::open(&path, 13).is_err());
    }
}
