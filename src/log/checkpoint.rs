//! Kafka's text checkpoint files (`CheckpointFile`).
//!
//! Format: a version line (`0`), a count line `N`, then exactly N entry lines, every line
//! ending in `\n`. Fields within a line are separated by whitespace. Written to
//! `<path>.tmp`, fsynced, then renamed over `<path>` so a crash leaves the old or the new
//! file, never a mix. An empty file has no entries.
//!
//! Offset checkpoints (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
//! `replication-offset-checkpoint`) have entries `<topic> <partition> <offset>`;
//! `leader-epoch-checkpoint` has entries `<epoch> <startOffset>`.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use super::leader_epoch::EpochEntry;
use super::{LogError, TopicPartition};

pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub const REPLICATION_OFFSET_CHECKPOINT: &str = "replication-offset-checkpoint";
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";
pub const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";

/// Checkpoint files above this size are refused rather than read into memory.
const MAX_CHECKPOINT_BYTES: u64 = 256 * 1024 * 1024;

/// Writes `contents` to `path` via `<path>.tmp`, fsync and rename, then fsyncs the directory
/// so the rename itself is durable.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), LogError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    super::faults::check(path, super::faults::Fault::WriteCheckpoint)?;
    {
        let mut file = File::create(&tmp)?;
        file.write_all(contents)?;
        file.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(parent) = path.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

/// Writes `contents` to `path` via `<path>.tmp` and rename, syncing nothing: for files
/// that only save work and are checked when read back (a crash may leave the old file,
/// the new one, an empty or a torn one, or none).
pub fn write_unsynced(path: &Path, contents: &[u8]) -> Result<(), LogError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    fs::write(&tmp, contents)?;
    fs::rename(&tmp, path)?;
    Ok(())
}

/// Creates `path`, which must not exist, holding `contents`; syncs nothing. For a file
/// of a directory just made, where no reader or older file can be: three calls (open,
/// write, close) where a temporary and a rename take five.
pub fn write_new(path: &Path, contents: &[u8]) -> Result<(), LogError> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    file.write_all(contents)?;
    Ok(())
}

pub(crate) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)?.sync_all()?;
    Ok(())
}

/// Reads a whole small file, refusing anything larger than `max` bytes.
pub fn read_bounded(path: &Path, max: u64) -> Result<Option<Vec<u8>>, LogError> {
    match read_small(path, max)? {
        SmallFile::Missing => Ok(None),
        SmallFile::TooLarge(len) => Err(LogError::corrupt_file(
            path,
            format!("{len} bytes is more than {max}"),
        )),
        SmallFile::Read(bytes) => Ok(Some(bytes)),
    }
}

/// What `read_small` found.
pub enum SmallFile {
    Missing,
    /// Longer than allowed: this many bytes (or more) and nothing read.
    TooLarge(u64),
    Read(Vec<u8>),
}

/// Reads a whole file of at most `max` bytes with one open and no lookup of its size when
/// it is small (a start reads three small files per partition): the first `FIRST_READ`
/// bytes are read at once; only a file that fills them is measured, and refused when over
/// `max` before more is read. No more than `max` bytes are read even if it grows meanwhile.
pub fn read_small(path: &Path, max: u64) -> std::io::Result<SmallFile> {
    use std::io::Read;
    /// Larger than a partition's checkpoints, metadata and a snapshot of a few producers.
    const FIRST_READ: u64 = 8 * 1024;
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(SmallFile::Missing),
        Err(e) => return Err(e),
    };
    let first = FIRST_READ.min(max.saturating_add(1));
    let mut bytes = Vec::with_capacity(usize::try_from(first).unwrap_or(0));
    (&file).take(first).read_to_end(&mut bytes)?;
    if (bytes.len() as u64) < first {
        return Ok(SmallFile::Read(bytes));
    }
    let len = file.metadata()?.len();
    if len > max {
        return Ok(SmallFile::TooLarge(len));
    }
    // `len` <= `max`, the caller's bound. One byte of room lets the read see the end.
    let rest = usize::try_from(len.saturating_sub(first)).unwrap_or(0);
    bytes.reserve(rest.saturating_add(1));
    (&file)
        .take(max.saturating_add(1) - first)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Ok(SmallFile::TooLarge(bytes.len() as u64));
    }
    Ok(SmallFile::Read(bytes))
}

/// Makes everything written to the file system holding `dir` durable: one `syncfs(2)`
/// instead of one fsync per file, for a clean stop that wrote thousands of files. Its
/// error reports a writeback failure of any file on that file system since it was opened.
pub(crate) fn sync_filesystem(dir: &Path) -> Result<(), LogError> {
    use std::os::fd::AsRawFd;
    super::faults::check(dir, super::faults::Fault::SyncFs)?;
    let file = File::open(dir)?;
    // SAFETY: `file` is an open descriptor for the whole call; syncfs only reads it.
    if unsafe { libc::syncfs(file.as_raw_fd()) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

fn checkpoint_text(lines: &[String]) -> String {
    let mut text = format!("0\n{}\n", lines.len());
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    text
}

fn write_checkpoint(path: &Path, lines: &[String]) -> Result<(), LogError> {
    write_atomic(path, checkpoint_text(lines).as_bytes())
}

/// The entry lines of a checkpoint, each split on whitespace. A missing file has none.
fn read_checkpoint(path: &Path) -> Result<Vec<Vec<String>>, LogError> {
    let Some(bytes) = read_bounded(path, MAX_CHECKPOINT_BYTES)? else {
        return Ok(Vec::new());
    };
    parse_checkpoint(path, &bytes)
}

/// Parses checkpoint bytes read from `path` (named in errors). The entries are bounded by
/// the bytes: a count larger than the lines present is an error, never an allocation.
fn parse_checkpoint(path: &Path, bytes: &[u8]) -> Result<Vec<Vec<String>>, LogError> {
    let text = std::str::from_utf8(bytes).map_err(|_| LogError::corrupt_file(path, "not UTF-8"))?;
    let mut lines = text.lines();
    let Some(version) = lines.next() else {
        return Ok(Vec::new());
    };
    if version.trim() != "0" {
        return Err(LogError::corrupt_file(
            path,
            format!("unrecognised version {version:?}"),
        ));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| LogError::corrupt_file(path, "missing entry count"))?;
    let entries: Vec<Vec<String>> = lines
        .map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .filter(|f| !f.is_empty())
        .collect();
    if entries.len() != count {
        return Err(LogError::corrupt_file(
            path,
            format!("expected {count} entries, found {}", entries.len()),
        ));
    }
    Ok(entries)
}

fn field<T: std::str::FromStr>(path: &Path, s: &str) -> Result<T, LogError> {
    s.parse()
        .map_err(|_| LogError::corrupt_file(path, format!("malformed field {s:?}")))
}

/// Writes `<topic> <partition> <offset>` entries.
pub fn write_offset_checkpoint(
    path: &Path,
    entries: &[(TopicPartition, i64)],
) -> Result<(), LogError> {
    let lines: Vec<String> = entries
        .iter()
        .map(|(tp, o)| format!("{} {} {o}", tp.topic, tp.partition))
        .collect();
    write_checkpoint(path, &lines)
}

pub fn read_offset_checkpoint(path: &Path) -> Result<HashMap<TopicPartition, i64>, LogError> {
    offset_entries(path, read_checkpoint(path)?)
}

/// Parses the bytes of an offset checkpoint file (for fuzzing and tools).
pub fn parse_offset_checkpoint(bytes: &[u8]) -> Result<HashMap<TopicPartition, i64>, LogError> {
    let path = Path::new(RECOVERY_POINT_CHECKPOINT);
    offset_entries(path, parse_checkpoint(path, bytes)?)
}

fn offset_entries(
    path: &Path,
    entries: Vec<Vec<String>>,
) -> Result<HashMap<TopicPartition, i64>, LogError> {
    let mut map = HashMap::new();
    for fields in entries {
        let [topic, partition, offset] = fields.as_slice() else {
            return Err(LogError::corrupt_file(
                path,
                format!("malformed entry {fields:?}"),
            ));
        };
        map.insert(
            TopicPartition::new(topic.clone(), field(path, partition)?),
            field(path, offset)?,
        );
    }
    Ok(map)
}

pub fn write_leader_epoch_checkpoint(path: &Path, entries: &[EpochEntry]) -> Result<(), LogError> {
    let lines: Vec<String> = entries
        .iter()
        .map(|e| format!("{} {}", e.epoch, e.start_offset))
        .collect();
    write_checkpoint(path, &lines)
}

pub fn read_leader_epoch_checkpoint(path: &Path) -> Result<Vec<EpochEntry>, LogError> {
    epoch_entries(path, read_checkpoint(path)?)
}

/// Parses the bytes of a `leader-epoch-checkpoint` file (for fuzzing and tools).
pub fn parse_leader_epoch_checkpoint(bytes: &[u8]) -> Result<Vec<EpochEntry>, LogError> {
    let path = Path::new(LEADER_EPOCH_CHECKPOINT);
    epoch_entries(path, parse_checkpoint(path, bytes)?)
}

fn epoch_entries(path: &Path, entries: Vec<Vec<String>>) -> Result<Vec<EpochEntry>, LogError> {
    entries
        .iter()
        .map(|fields| match fields.as_slice() {
            [epoch, offset] => Ok(EpochEntry {
                epoch: field(path, epoch)?,
                start_offset: field(path, offset)?,
            }),
            _ => Err(LogError::corrupt_file(
                path,
                format!("malformed entry {fields:?}"),
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_files_are_read_whole_and_larger_than_allowed_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let read = |max| match read_small(&path, max).unwrap() {
            SmallFile::Missing => "missing".to_string(),
            SmallFile::TooLarge(len) => format!("too large: {len}"),
            SmallFile::Read(bytes) => format!("read {}", bytes.len()),
        };
        assert_eq!(read(10), "missing");
        for (len, max, expected) in [
            (0, 10, "read 0"),
            (10, 10, "read 10"),
            (11, 10, "too large: 11"),
            (8192, 8192, "read 8192"),
            (8193, 8192, "too large: 8193"),
            (8192, 100_000, "read 8192"),
            (50_000, 100_000, "read 50000"),
            (100_000, 100_000, "read 100000"),
            (100_001, 100_000, "too large: 100001"),
        ] {
            let contents: Vec<u8> = (0..len).map(|i| i as u8).collect();
            fs::write(&path, &contents).unwrap();
            assert_eq!(read(max), expected, "{len} bytes, at most {max}");
            if let SmallFile::Read(bytes) = read_small(&path, max).unwrap() {
                assert_eq!(bytes, contents);
            }
        }
    }

    #[test]
    fn offset_checkpoint_round_trip_in_kafka_text() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RECOVERY_POINT_CHECKPOINT);
        let entries = vec![
            (TopicPartition::new("orders", 0), 42),
            (TopicPartition::new("a-b", 3), 7),
        ];
        write_offset_checkpoint(&path, &entries).unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "0\n2\norders 0 42\na-b 3 7\n"
        );
        assert!(!dir
            .path()
            .join("recovery-point-offset-checkpoint.tmp")
            .exists());
        let map = read_offset_checkpoint(&path).unwrap();
        assert_eq!(map.len(), 2);
        assert_eq!(map[&TopicPartition::new("orders", 0)], 42);
        assert_eq!(map[&TopicPartition::new("a-b", 3)], 7);
    }

    #[test]
    fn reads_kafka_written_text_and_tolerates_missing_or_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x");
        assert!(read_offset_checkpoint(&path).unwrap().is_empty());
        fs::write(&path, "").unwrap();
        assert!(read_offset_checkpoint(&path).unwrap().is_empty());
        fs::write(&path, "0\n1\n__consumer_offsets  12\t900\n").unwrap();
        assert_eq!(
            read_offset_checkpoint(&path).unwrap()[&TopicPartition::new("__consumer_offsets", 12)],
            900
        );
    }

    #[test]
    fn rejects_bad_version_count_and_fields() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x");
        for bad in [
            "1\n0\n",
            "0\n2\nt 0 1\n",
            "0\n1\nt zero 1\n",
            "0\n1\nt 0\n",
            "0\n",
            "\u{0}\u{ff}",
        ] {
            fs::write(&path, bad).unwrap();
            assert!(read_offset_checkpoint(&path).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn leader_epoch_checkpoint_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LEADER_EPOCH_CHECKPOINT);
        let entries = vec![
            EpochEntry {
                epoch: 0,
                start_offset: 0,
            },
            EpochEntry {
                epoch: 3,
                start_offset: 150,
            },
        ];
        write_leader_epoch_checkpoint(&path, &entries).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "0\n2\n0 0\n3 150\n");
        assert_eq!(read_leader_epoch_checkpoint(&path).unwrap(), entries);
    }
}
