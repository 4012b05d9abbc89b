//! KRaft snapshots: `<20-digit end offset>-<10-digit epoch>.checkpoint` files in
//! `__cluster_metadata-0`, each a run of record batches (a control batch with the
//! SnapshotHeader, data batches holding the whole image as records, a control batch with
//! the SnapshotFooter) that stands for every record of the log below its end offset.
//! `.checkpoint.part` (being written) and `.checkpoint.deleted` files are not snapshots.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::log::{RecordBatchHeader, HEADER_SIZE};

use super::records::batch::records_of;
use super::records::wire::WireError;

/// Larger than any batch Kafka's raft layer writes (8 MiB), so a damaged length is caught
/// before it is allocated.
pub const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotId {
    pub end_offset: i64,
    pub epoch: i32,
    pub path: PathBuf,
}

/// Parses a snapshot file name.
fn snapshot_id(dir: &Path, name: &str) -> Option<SnapshotId> {
    let stem = name.strip_suffix(".checkpoint")?;
    let (offset, epoch) = stem.split_once('-')?;
    if offset.len() != 20 || epoch.len() != 10 {
        return None;
    }
    if !offset
        .bytes()
        .chain(epoch.bytes())
        .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    Some(SnapshotId {
        end_offset: offset.parse().ok()?,
        epoch: epoch.parse().ok()?,
        path: dir.join(name),
    })
}

/// Every complete snapshot in `dir`, oldest first.
pub fn list(dir: &Path) -> std::io::Result<Vec<SnapshotId>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(id) = entry.file_name().to_str().and_then(|n| snapshot_id(dir, n)) {
            out.push(id);
        }
    }
    out.sort_by_key(|s| (s.end_offset, s.epoch));
    Ok(out)
}

/// Reads a snapshot batch by batch, handing each data record's value to `visit`. Only
/// one batch is in memory at a time.
pub fn read(
    snapshot: &SnapshotId,
    mut visit: impl FnMut(&[u8]) -> Result<(), String>,
) -> Result<(), String> {
    let at = |e: &dyn std::fmt::Display| format!("{}: {e}", snapshot.path.display());
    let file = File::open(&snapshot.path).map_err(|e| at(&e))?;
    let size = file.metadata().map_err(|e| at(&e))?.len();
    let mut position = 0u64;
    let mut header = [0u8; HEADER_SIZE];
    while position < size {
        file.read_exact_at(&mut header, position)
            .map_err(|e| at(&format!("batch header at byte {position}: {e}")))?;
        let h = RecordBatchHeader::parse(&header).map_err(|e| at(&e))?;
        let len = h.size_in_bytes();
        if !(HEADER_SIZE..=MAX_BATCH_BYTES).contains(&len) || position + len as u64 > size {
            return Err(at(&format!(
                "batch at byte {position} declares {len} bytes"
            )));
        }
        let mut batch = vec![0u8; len];
        file.read_exact_at(&mut batch, position)
            .map_err(|e| at(&e))?;
        let (h, records) = records_of(&batch).map_err(|e: WireError| at(&e))?;
        if !h.is_control() {
            for r in records {
                let value = r
                    .value
                    .ok_or_else(|| at(&format!("record {} has no value", r.offset)))?;
                visit(value).map_err(|e| at(&e))?;
            }
        }
        position += len as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let dir = Path::new("/d");
        let id = snapshot_id(dir, "00000000000000001370-0000000002.checkpoint").unwrap();
        assert_eq!((id.end_offset, id.epoch), (1370, 2));
        assert!(snapshot_id(dir, "00000000000000001370-0000000002.checkpoint.part").is_none());
        assert!(snapshot_id(dir, "00000000000000001370-0000000002.checkpoint.deleted").is_none());
        assert!(snapshot_id(dir, "00000000000000001370.snapshot").is_none());
        assert!(snapshot_id(dir, "0000000000000000137x-0000000002.checkpoint").is_none());
    }
}
