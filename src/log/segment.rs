//! One segment of a partition's log: `.log` plus its `.index` and `.timeindex`.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::batch::{self, BatchIter, RecordBatchHeader, HEADER_SIZE, MAGIC_V2};
use super::offset_index::OffsetIndex;
use super::time_index::TimeIndex;
use super::txn_index::{AbortedTxn, TransactionIndex};
use super::write_at::write_all_at_parts;
use super::{offset_file_name, LogConfig, LogError};

pub const LOG_SUFFIX: &str = ".log";
pub const INDEX_SUFFIX: &str = ".index";
pub const TIME_INDEX_SUFFIX: &str = ".timeindex";
pub const TXN_INDEX_SUFFIX: &str = ".txnindex";
/// Appended to a file scheduled for deletion (Kafka's `LogFileUtils.DELETED_FILE_SUFFIX`).
pub const DELETED_SUFFIX: &str = ".deleted";
/// The cleaner's output while it is written (Kafka's `CLEANED_FILE_SUFFIX`).
pub const CLEANED_SUFFIX: &str = ".cleaned";
/// The cleaner's output once complete, until the segments it replaces are gone.
pub const SWAP_SUFFIX: &str = ".swap";

/// `path` with `suffix` appended to its file name.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Renames each file of the segment at `base_offset` from suffix `from` to suffix `to`
/// (Kafka's `changeFileSuffixes`); files that do not exist are skipped. Returns the new
/// paths.
pub fn change_suffixes(
    dir: &Path,
    base_offset: i64,
    from: &str,
    to: &str,
) -> Result<Vec<PathBuf>, LogError> {
    let mut renamed = Vec::new();
    for path in LogSegment::file_paths(dir, base_offset) {
        let target = with_suffix(&path, to);
        match fs::rename(with_suffix(&path, from), &target) {
            Ok(()) => renamed.push(target),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(renamed)
}

/// Kafka's `LogSegment`. The `.log` file (`FileRecords`) is a plain concatenation of record
/// batches, named by the segment's base offset; every batch's offsets are >= the base offset
/// and fit in an i32 relative to it. Bytes are only ever appended at `size`, so readers may
/// `pread` anything below a size they observed while the writer appends beyond it.
///
/// The state is boxed: a log keeps its segments in a `BTreeMap` whose every node has room
/// for 11 values, and nearly every log has one segment, so a segment held inline cost 11
/// times its size (5 KiB a partition, half the broker's heap with 10,000 partitions).
pub struct LogSegment(Box<SegmentState>);

/// What a `LogSegment` holds; its methods are `LogSegment`'s, reached through `Deref`.
pub struct SegmentState {
    base_offset: i64,
    log_path: PathBuf,
    log: Arc<File>,
    /// Bytes of whole batches in `.log`.
    size: u64,
    /// The offset and time indexes. Mapped when the segment opens if it is active (or
    /// new); for an older segment on first use, when they are checked against the log
    /// and rebuilt from it if bad (Kafka's `LazyIndex`): a restart maps no index of a
    /// segment nobody reads.
    indexes: OnceLock<Indexes>,
    index_path: PathBuf,
    time_index_path: PathBuf,
    /// Aborted transactions whose markers are in this segment.
    txn_index: TransactionIndex,
    index_interval_bytes: u64,
    max_index_size: u32,
    bytes_since_last_index_entry: u64,
    /// (max timestamp, offset of the batch carrying it), or (-1, -1); `None` until the
    /// time index of a lazily opened segment is read (its last entry holds it).
    max_timestamp_and_offset: Option<(i64, i64)>,
    /// Max timestamp of the first batch: the clock `segment.ms` is measured against.
    rolling_based_timestamp: Option<i64>,
    created_ms: i64,
}

impl std::ops::Deref for LogSegment {
    type Target = SegmentState;
    fn deref(&self) -> &SegmentState {
        &self.0
    }
}

impl std::ops::DerefMut for LogSegment {
    fn deref_mut(&mut self) -> &mut SegmentState {
        &mut self.0
    }
}

/// A segment's offset and time index.
pub struct Indexes {
    pub offset: OffsetIndex,
    pub time: TimeIndex,
}

/// Where a read starts: a batch at `position` in a segment.
#[derive(Clone, Copy, Debug)]
pub struct BatchPosition {
    pub position: u64,
    pub header: RecordBatchHeader,
}

/// A batch found during recovery or replay, with its position.
pub type BatchVisitor<'a> = dyn FnMut(&RecordBatchHeader) + 'a;

impl LogSegment {
    pub fn log_path(dir: &Path, base_offset: i64) -> PathBuf {
        dir.join(offset_file_name(base_offset, LOG_SUFFIX))
    }
    pub fn index_path(dir: &Path, base_offset: i64) -> PathBuf {
        dir.join(offset_file_name(base_offset, INDEX_SUFFIX))
    }
    pub fn time_index_path(dir: &Path, base_offset: i64) -> PathBuf {
        dir.join(offset_file_name(base_offset, TIME_INDEX_SUFFIX))
    }
    pub fn txn_index_path(dir: &Path, base_offset: i64) -> PathBuf {
        dir.join(offset_file_name(base_offset, TXN_INDEX_SUFFIX))
    }

    /// Opens (creating if needed) the segment at `base_offset`. An `active` segment's
    /// indexes are mapped now; an older one's on first use.
    pub fn open(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        active: bool,
        now_ms: i64,
    ) -> Result<Self, LogError> {
        Self::open_with_suffix(dir, base_offset, config, active, now_ms, "", true)
    }

    /// `open` of a segment whose directory was just listed: `txn_index` says whether its
    /// `.txnindex` was among the files, so a segment without one (most) costs no lookup.
    pub fn open_listed(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        active: bool,
        now_ms: i64,
        txn_index: bool,
    ) -> Result<Self, LogError> {
        Self::open_with_suffix(dir, base_offset, config, active, now_ms, "", txn_index)
    }

    /// The first segment of a new log, in a directory just made: none of its files can
    /// exist, so none is looked for or measured. The `.log` is created exclusively (an
    /// existing one is an error, never truncated); the transaction index has no file until
    /// its first entry; the indexes are created and mapped, as an active segment's are.
    pub fn create_new(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        now_ms: i64,
    ) -> Result<Self, LogError> {
        let log_path = Self::log_path(dir, base_offset);
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&log_path)?;
        let txn_index =
            TransactionIndex::empty(&Self::txn_index_path(dir, base_offset), base_offset);
        let mut segment = Self::assemble(
            dir,
            base_offset,
            "",
            (log_path, log, 0),
            txn_index,
            config,
            now_ms,
        );
        let indexes = Indexes {
            offset: OffsetIndex::create_new(
                &segment.index_path,
                base_offset,
                config.max_index_size,
            )?,
            time: TimeIndex::create_new(
                &segment.time_index_path,
                base_offset,
                config.max_index_size,
            )?,
        };
        segment.set_indexes(indexes);
        Ok(segment)
    }

    /// A new segment for the cleaner's output: `<base>.log.cleaned` and its indexes, which
    /// the loader deletes if the swap never happened (see `Log::replace_segments`).
    pub fn create_cleaned(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        now_ms: i64,
    ) -> Result<Self, LogError> {
        for path in Self::file_paths(dir, base_offset) {
            // A leftover of an aborted cleaning: never appended to.
            match fs::remove_file(with_suffix(&path, CLEANED_SUFFIX)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        Self::open_with_suffix(dir, base_offset, config, true, now_ms, CLEANED_SUFFIX, true)
    }

    /// Every file a segment may have: `.log`, `.index`, `.timeindex`, `.txnindex`.
    pub fn file_paths(dir: &Path, base_offset: i64) -> [PathBuf; 4] {
        [
            Self::log_path(dir, base_offset),
            Self::index_path(dir, base_offset),
            Self::time_index_path(dir, base_offset),
            dir.join(offset_file_name(base_offset, TXN_INDEX_SUFFIX)),
        ]
    }

    fn open_with_suffix(
        dir: &Path,
        base_offset: i64,
        config: &LogConfig,
        active: bool,
        now_ms: i64,
        suffix: &str,
        txn_index_may_exist: bool,
    ) -> Result<Self, LogError> {
        let log_path = with_suffix(&Self::log_path(dir, base_offset), suffix);
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&log_path)?;
        let size = log.metadata()?.len();
        // With the suffix too: a cleaned segment's index is its own, not the live one's.
        let txn_path = with_suffix(&Self::txn_index_path(dir, base_offset), suffix);
        let opened = match txn_index_may_exist {
            true => TransactionIndex::open(&txn_path, base_offset),
            false => Ok(TransactionIndex::empty(&txn_path, base_offset)),
        };
        let txn_index = match opened {
            Err(e @ LogError::CorruptFile { .. }) => {
                // Its entries come back when producer state is replayed over the segment's
                // markers, from its start (the loader sees `txn_index_discarded`).
                tracing::warn!(path = %txn_path.display(), error = %e, "discarding a corrupt transaction index");
                TransactionIndex::discarded(&txn_path, base_offset)?
            }
            other => other?,
        };
        let mut segment = Self::assemble(
            dir,
            base_offset,
            suffix,
            (log_path, log, size),
            txn_index,
            config,
            now_ms,
        );
        if active {
            let indexes = segment.open_index_files()?;
            segment.set_indexes(indexes);
        } else {
            // An active segment's first batch is read where its end is found
            // (`read_next_offset` after a clean shutdown, `recover` otherwise), which reads
            // that header anyway when the segment is small.
            segment.rolling_based_timestamp = segment
                .read_header_at(0)
                .ok()
                .flatten()
                .map(|h| h.max_timestamp());
        }
        Ok(segment)
    }

    /// The segment of `log` (the file at `log_path`, `size` bytes long) with its indexes'
    /// paths (carrying `suffix`, as the log's does) and `txn_index`; indexes not mapped yet.
    fn assemble(
        dir: &Path,
        base_offset: i64,
        suffix: &str,
        (log_path, log, size): (PathBuf, File, u64),
        txn_index: TransactionIndex,
        config: &LogConfig,
        now_ms: i64,
    ) -> Self {
        LogSegment(Box::new(SegmentState {
            base_offset,
            log_path,
            log: Arc::new(log),
            size,
            indexes: OnceLock::new(),
            index_path: with_suffix(&Self::index_path(dir, base_offset), suffix),
            time_index_path: with_suffix(&Self::time_index_path(dir, base_offset), suffix),
            txn_index,
            index_interval_bytes: u64::from(config.index_interval_bytes),
            max_index_size: config.max_index_size,
            bytes_since_last_index_entry: 0,
            max_timestamp_and_offset: None,
            rolling_based_timestamp: None,
            created_ms: now_ms,
        }))
    }

    /// The indexes in use from now on, as an active segment's are from the start; the
    /// segment's max timestamp is the time index's last entry.
    fn set_indexes(&mut self, indexes: Indexes) {
        self.max_timestamp_and_offset = Some(indexes.time.last_entry().unwrap_or((-1, -1)));
        let _ = self.indexes.set(indexes);
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn size(&self) -> u64 {
        self.size
    }
    pub fn log_file(&self) -> &Arc<File> {
        &self.log
    }
    /// (max timestamp, offset of the batch carrying it), or (-1, -1) for a segment without
    /// timestamps; read from the time index of a lazily opened segment.
    pub fn max_timestamp_and_offset(&self) -> Result<(i64, i64), LogError> {
        match self.max_timestamp_and_offset {
            Some(known) => Ok(known),
            None => Ok(self.indexes()?.time.last_entry().unwrap_or((-1, -1))),
        }
    }
    pub fn offset_index(&self) -> Result<&OffsetIndex, LogError> {
        Ok(&self.indexes()?.offset)
    }
    pub fn time_index(&self) -> Result<&TimeIndex, LogError> {
        Ok(&self.indexes()?.time)
    }
    /// Whether the indexes are mapped (an older segment's are only after first use).
    pub fn indexes_open(&self) -> bool {
        self.indexes.get().is_some()
    }

    /// The indexes, mapped (and checked, rebuilt if bad) on first use.
    fn indexes(&self) -> Result<&Indexes, LogError> {
        if let Some(indexes) = self.indexes.get() {
            return Ok(indexes);
        }
        // Every use runs under the log's lock, so no two threads open the files at once.
        let opened = self.open_checked_indexes()?;
        Ok(self.indexes.get_or_init(|| opened))
    }

    fn indexes_mut(&mut self) -> Result<&mut Indexes, LogError> {
        if self.indexes.get().is_none() {
            let opened = self.open_checked_indexes()?;
            let _ = self.indexes.set(opened);
        }
        let state = &mut *self.0;
        state
            .indexes
            .get_mut()
            .ok_or_else(|| LogError::corrupt_file(&state.index_path, "index not open"))
    }

    /// Maps both index files as they are (creating missing ones).
    fn open_index_files(&self) -> Result<Indexes, LogError> {
        Ok(Indexes {
            offset: OffsetIndex::open(&self.index_path, self.base_offset, self.max_index_size)?,
            time: TimeIndex::open(&self.time_index_path, self.base_offset, self.max_index_size)?,
        })
    }

    /// An older segment's indexes on first use: mapped, checked against the log, and
    /// rebuilt from the log when missing or bad, so a damaged index is never trusted.
    fn open_checked_indexes(&self) -> Result<Indexes, LogError> {
        let mut indexes = self.open_index_files()?;
        let created =
            indexes.offset.index_file().was_created() || indexes.time.index_file().was_created();
        let checked = match created {
            true => Err(LogError::corrupt_file(
                &self.index_path,
                "index file missing",
            )),
            false => self.check_indexes(&indexes),
        };
        if let Err(e) = checked {
            tracing::warn!(segment = %self.log_path.display(), error = %e, "rebuilding the indexes of a segment on first use");
            self.index_batches(&mut indexes, self.size, &mut |_| {})?;
            indexes.offset.trim_to_valid_size()?;
            indexes.time.trim_to_valid_size()?;
            for target in index_sync_targets(&indexes) {
                target.sync()?;
            }
        }
        Ok(indexes)
    }
    /// The aborted transactions whose markers are in this segment, in marker order.
    pub fn aborted_txns(&self) -> &[AbortedTxn] {
        self.txn_index.entries()
    }

    /// Records an aborted transaction whose marker was just appended (or replayed).
    /// Whether the segment's transaction index was corrupt when opened and emptied: its
    /// aborted transactions are known again only once its markers are replayed.
    pub fn txn_index_discarded(&self) -> bool {
        self.txn_index.was_discarded()
    }

    pub fn append_aborted_txn(&mut self, txn: AbortedTxn) -> Result<(), LogError> {
        self.txn_index.append(txn)
    }

    pub fn set_index_interval(&mut self, bytes: u32) {
        self.index_interval_bytes = u64::from(bytes);
    }

    /// Everything that must reach disk for this segment to be durable, in a form that
    /// can be synced after the log's lock is released.
    /// Indexes unchanged since their last sync (or never mapped) are left out.
    pub fn files_to_sync(&self) -> Vec<SyncTarget> {
        let mut files = vec![SyncTarget::File(self.log.clone())];
        files.extend(self.index_sync_targets());
        // Aborted transactions recorded since the last flush must survive a crash with
        // the markers the flush makes durable (Kafka's `LogSegment.flush` syncs it too).
        if !self.txn_index.entries().is_empty() {
            files.push(SyncTarget::Path(self.txn_index.path().to_path_buf()));
        }
        files
    }

    /// The indexes' mappings changed since their last sync, to `msync`.
    pub fn index_sync_targets(&self) -> Vec<SyncTarget> {
        self.indexes.get().map_or_else(Vec::new, index_sync_targets)
    }

    /// Reads the batch header at `position`; `None` if fewer than a header's bytes remain.
    pub fn read_header_at(&self, position: u64) -> Result<Option<RecordBatchHeader>, LogError> {
        read_header(&self.log, position, self.size)
    }

    fn fits_relative(&self, offset: i64) -> bool {
        (0..=i64::from(i32::MAX)).contains(&(offset - self.base_offset))
    }

    /// Kafka's `shouldRoll`: would appending `size` bytes, ending at `last_offset` with max
    /// timestamp `max_timestamp`, need a fresh segment?
    pub fn should_roll(
        &self,
        config: &LogConfig,
        size: u64,
        max_timestamp: i64,
        last_offset: i64,
        now_ms: i64,
    ) -> bool {
        let waited = match self.rolling_based_timestamp {
            Some(first) if first >= 0 => max_timestamp.saturating_sub(first),
            _ => now_ms.saturating_sub(self.created_ms),
        };
        self.size > config.segment_bytes.saturating_sub(size)
            || (self.size > 0 && waited > config.max_segment_ms())
            || self
                .indexes()
                .is_ok_and(|i| i.offset.is_full() || i.time.is_full())
            || !self.fits_relative(last_offset)
    }

    /// Appends validated, offset-assigned batches (Kafka's `LogSegment.append`): one index
    /// entry per append once more than `index.interval.bytes` have gone by since the last.
    pub fn append(
        &mut self,
        last_offset: i64,
        max_timestamp: i64,
        offset_of_max_timestamp: i64,
        records: &[u8],
    ) -> Result<(), LogError> {
        self.append_parts(
            last_offset,
            max_timestamp,
            offset_of_max_timestamp,
            [records, &[]],
        )
    }

    /// `append` of batches held in two buffers, written in order with one `pwritev`: a
    /// patched batch header and the records behind it, which stay where the request
    /// brought them.
    pub fn append_parts(
        &mut self,
        last_offset: i64,
        max_timestamp: i64,
        offset_of_max_timestamp: i64,
        parts: [&[u8]; 2],
    ) -> Result<(), LogError> {
        let len = (parts[0].len() + parts[1].len()) as u64;
        if len == 0 {
            return Ok(());
        }
        if !self.fits_relative(last_offset) {
            return Err(LogError::corrupt_file(
                &self.log_path,
                format!(
                    "offset {last_offset} does not fit segment {}",
                    self.base_offset
                ),
            ));
        }
        let position = self.size;
        if let Err(e) = write_all_at_parts(&self.log, parts, position) {
            // Leave no partial batch behind to be read; recovery would cut it anyway.
            let _ = self.log.set_len(position);
            return Err(e.into());
        }
        if self.size == 0 {
            self.rolling_based_timestamp = Some(max_timestamp);
        }
        self.size += len;
        let mut max = self.max_timestamp_and_offset()?;
        if max_timestamp > max.0 {
            max = (max_timestamp, offset_of_max_timestamp);
            self.max_timestamp_and_offset = Some(max);
        }
        if self.bytes_since_last_index_entry > self.index_interval_bytes {
            let indexes = self.indexes_mut()?;
            indexes.offset.append(last_offset, to_u32(position)?)?;
            indexes.time.maybe_append(max.0, max.1, false)?;
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += len;
        Ok(())
    }

    /// The first batch whose last offset is >= `offset`, searching from the index entry
    /// below it. `None` if the segment holds no such batch.
    pub fn translate_offset(&self, offset: i64) -> Result<Option<BatchPosition>, LogError> {
        let start = self.scan_start(offset)?;
        match self.scan_for(offset, start) {
            Err(e) if start > 0 => {
                tracing::warn!(segment = %self.log_path.display(), offset, position = start, error = %e, "offset index entry leads into a bad batch; scanning the segment instead");
                self.scan_for(offset, 0)
            }
            found => found,
        }
    }

    fn scan_for(&self, offset: i64, start: u64) -> Result<Option<BatchPosition>, LogError> {
        let mut position = start;
        while let Some(header) = self.read_header_at(position)? {
            let size =
                header.check_length(usize::try_from(self.size - position).unwrap_or(usize::MAX))?;
            if header.last_offset() >= offset {
                return Ok(Some(BatchPosition { position, header }));
            }
            position += size as u64;
        }
        Ok(None)
    }

    /// Where a forward scan for `offset` may start: the index entry at or below it, checked
    /// against the batch found there. Like Kafka, indexes read back after a clean shutdown
    /// are only sanity-checked at their last entry; an earlier entry that points past
    /// `offset` would make a read skip batches, so it is caught here and the scan starts
    /// at the segment's beginning instead.
    fn scan_start(&self, offset: i64) -> Result<u64, LogError> {
        let (_, start) = self.indexes()?.offset.lookup(offset);
        if start == 0 {
            return Ok(0);
        }
        match self.read_header_at(u64::from(start))? {
            Some(h)
                if h.magic() == MAGIC_V2
                    && h.base_offset() <= offset
                    && h.base_offset() >= self.base_offset =>
            {
                Ok(u64::from(start))
            }
            _ => {
                tracing::warn!(segment = %self.log_path.display(), offset, position = start, "offset index entry does not match the log; scanning the segment instead");
                Ok(0)
            }
        }
    }

    /// Offset after the last batch, found by scanning from the last index entry; the
    /// first batch's timestamp (which an active segment's open leaves unread) is taken
    /// on the way when the scan starts there.
    pub fn read_next_offset(&mut self) -> Result<i64, LogError> {
        let mut next = self.base_offset;
        let last_entry = self.indexes()?.offset.last_entry();
        let mut position = u64::from(last_entry.map_or(0, |(_, p)| p));
        if position > 0 {
            self.rolling_based_timestamp = self
                .read_header_at(0)
                .ok()
                .flatten()
                .map(|h| h.max_timestamp());
        }
        while let Some(header) = self.read_header_at(position)? {
            if position == 0 {
                self.rolling_based_timestamp = Some(header.max_timestamp());
            }
            let size =
                header.check_length(usize::try_from(self.size - position).unwrap_or(usize::MAX))?;
            next = header.next_offset();
            position += size as u64;
        }
        if position != self.size {
            return Err(LogError::corrupt_file(
                &self.log_path,
                format!("partial batch at {position}"),
            ));
        }
        Ok(next)
    }

    /// Scans every batch (length, magic, CRC, offsets), rebuilding both indexes; cuts the
    /// file at the first bad or partial batch. `visit` sees each valid batch. Returns the
    /// number of bytes truncated.
    pub fn recover(&mut self, visit: &mut BatchVisitor<'_>) -> Result<u64, LogError> {
        let mut indexes = match self.indexes.take() {
            Some(indexes) => indexes,
            None => self.open_index_files()?,
        };
        self.bytes_since_last_index_entry = 0;
        let file_len = self.log.metadata()?.len();
        self.size = file_len;
        let scanned = self.index_batches(&mut indexes, file_len, visit);
        let _ = self.indexes.set(indexes);
        let (position, next_offset, max) = scanned?;
        self.max_timestamp_and_offset = Some(max);
        // Markers cut below are forgotten; those kept are in the index already, or are
        // added back when producer state is replayed over them.
        self.txn_index.truncate_to(next_offset)?;
        let truncated = file_len - position;
        if truncated > 0 {
            tracing::warn!(segment = %self.log_path.display(), position, truncated, "truncating invalid bytes at the end of segment");
            self.log.set_len(position)?;
        }
        self.size = position;
        self.rolling_based_timestamp = self.read_header_at(0)?.map(|h| h.max_timestamp());
        let indexes = self.indexes_mut()?;
        indexes.offset.trim_to_valid_size()?;
        indexes.time.trim_to_valid_size()?;
        Ok(truncated)
    }

    /// Rebuilds `indexes` from the valid batches below `end`, as appends would have
    /// written them, with the final time-index entry; they are not trimmed. Returns where
    /// the valid batches end, the offset after them and their max timestamp and offset.
    fn index_batches(
        &self,
        indexes: &mut Indexes,
        end: u64,
        visit: &mut BatchVisitor<'_>,
    ) -> Result<(u64, i64, (i64, i64)), LogError> {
        indexes.offset.reset();
        indexes.time.reset();
        let mut max = (-1, -1);
        let mut since_last_entry = 0u64;
        let mut position = 0u64;
        let mut next_offset = self.base_offset;
        let mut buf = Vec::new();
        while let Some(header) = self.valid_batch_at(position, end, next_offset, &mut buf)? {
            let size = header.size_in_bytes() as u64;
            if header.max_timestamp() > max.0 {
                max = (header.max_timestamp(), header.last_offset());
            }
            // The same rule as append, applied per batch (Kafka's recover does likewise).
            if since_last_entry > self.index_interval_bytes {
                indexes
                    .offset
                    .append(header.last_offset(), to_u32(position)?)?;
                indexes.time.maybe_append(max.0, max.1, false)?;
                since_last_entry = 0;
            }
            since_last_entry += size;
            next_offset = header.next_offset();
            visit(&header);
            position += size;
        }
        if max.0 >= 0 {
            indexes.time.maybe_append(max.0, max.1, true)?;
        }
        Ok((position, next_offset, max))
    }

    /// The batch at `position` if it is whole and sound, else `None` (the recovery cut).
    fn valid_batch_at(
        &self,
        position: u64,
        end: u64,
        min_offset: i64,
        buf: &mut Vec<u8>,
    ) -> Result<Option<RecordBatchHeader>, LogError> {
        let Some(header) = read_header(&self.log, position, end)? else {
            return Ok(None);
        };
        let available = usize::try_from(end - position).unwrap_or(usize::MAX);
        let reason = if header.check_length(available).is_err() {
            "bad or partial length"
        } else if header.magic() != MAGIC_V2 {
            "unsupported magic"
        } else if header.base_offset() < min_offset
            || header.last_offset_delta() < 0
            || !self.fits_relative(header.last_offset())
        {
            "offsets out of order or range"
        } else {
            if self.stored_crc(position, header.size_in_bytes(), buf)? != header.crc() {
                "CRC mismatch"
            } else {
                return Ok(Some(header));
            }
        };
        tracing::warn!(segment = %self.log_path.display(), position, reason, "invalid batch found during recovery");
        Ok(None)
    }

    /// CRC-32C of bytes 21..size of the batch at `position`, streamed through a bounded
    /// buffer so a large (or garbage) length never turns into a large allocation.
    fn stored_crc(&self, position: u64, size: usize, buf: &mut Vec<u8>) -> Result<u32, LogError> {
        const CHUNK_BYTES: usize = 64 * 1024;
        buf.resize(CHUNK_BYTES, 0);
        let mut at = position + batch::ATTRIBUTES_OFFSET as u64;
        let end = position + size as u64;
        let mut crc = 0u32;
        while at < end {
            let n = CHUNK_BYTES.min((end - at) as usize);
            self.log.read_exact_at(&mut buf[..n], at)?;
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            at += n as u64;
        }
        Ok(crc)
    }

    /// Removes everything at and after `offset` (which must be in this segment); returns the
    /// bytes removed.
    pub fn truncate_to(&mut self, offset: i64) -> Result<u64, LogError> {
        let mapping = self.translate_offset(offset)?;
        self.txn_index.truncate_to(offset)?;
        let indexes = self.indexes_mut()?;
        indexes.offset.truncate_to(offset);
        indexes.time.truncate_to(offset);
        let Some(mapping) = mapping else {
            return Ok(0);
        };
        let removed = self.size - mapping.position;
        self.log.set_len(mapping.position)?;
        self.size = mapping.position;
        self.bytes_since_last_index_entry = 0;
        if self.size == 0 {
            self.rolling_based_timestamp = None;
        }
        self.reload_max_timestamp()?;
        Ok(removed)
    }

    /// Recomputes the max timestamp from the last time-index entry and the batches after it.
    fn reload_max_timestamp(&mut self) -> Result<(), LogError> {
        let indexes = self.indexes()?;
        let last = indexes.time.last_entry();
        let mut max = last.unwrap_or((-1, -1));
        let from = last.map_or(self.base_offset, |(_, o)| o);
        let mut position = u64::from(indexes.offset.lookup(from).1);
        while let Some(h) = self.read_header_at(position)? {
            if h.max_timestamp() > max.0 {
                max = (h.max_timestamp(), h.last_offset());
            }
            position +=
                h.check_length(usize::try_from(self.size - position).unwrap_or(usize::MAX))? as u64;
        }
        self.max_timestamp_and_offset = Some(max);
        Ok(())
    }

    /// Roll/close: write the final time-index entry and trim both indexes to their entries.
    /// A segment whose indexes were never mapped has nothing to write: its files are as
    /// they were read.
    pub fn on_become_inactive(&mut self) -> Result<(), LogError> {
        if !self.indexes_open() {
            return Ok(());
        }
        let (ts, offset) = self.max_timestamp_and_offset()?;
        let indexes = self.indexes_mut()?;
        if ts >= 0 {
            indexes.time.maybe_append(ts, offset, true)?;
        }
        indexes.offset.trim_to_valid_size()?;
        indexes.time.trim_to_valid_size()?;
        Ok(())
    }

    /// Checks the on-disk indexes (mapping them if need be) and the transaction index;
    /// an error means they must be rebuilt by `recover`.
    pub fn sanity_check(&self) -> Result<(), LogError> {
        match self.indexes.get() {
            Some(indexes) => self.check_indexes(indexes)?,
            None => {
                self.indexes()?;
            }
        }
        self.txn_index.sanity_check()
    }

    /// The invariants of both indexes, and that the last offset-index entry names a
    /// batch of the log.
    fn check_indexes(&self, indexes: &Indexes) -> Result<(), LogError> {
        indexes.offset.sanity_check()?;
        indexes.time.sanity_check()?;
        if let Some((offset, position)) = indexes.offset.last_entry() {
            // The last entry must name a batch boundary: one pread catches an index that is
            // ordered but points into the middle of the data. (An entry written for a
            // multi-batch append carries the append's last offset, so only bound it.)
            let header = self.read_header_at(u64::from(position))?;
            let plausible = |h: RecordBatchHeader| {
                h.magic() == MAGIC_V2
                    && h.base_offset() >= self.base_offset
                    && h.base_offset() <= offset
            };
            if !header.is_some_and(plausible) {
                let reason = format!("index entry ({offset}, {position}) is not a batch");
                return Err(LogError::corrupt_file(&self.log_path, reason));
            }
        }
        Ok(())
    }

    pub fn flush(&self) -> Result<(), LogError> {
        for target in self.files_to_sync() {
            target.sync()?;
        }
        Ok(())
    }

    /// Kafka's `LogSegment.largestTimestamp`, which time retention goes by: the largest
    /// record timestamp, or the `.log` file's modification time when no batch carries one.
    pub fn largest_timestamp(&self) -> i64 {
        match self.max_timestamp_and_offset() {
            Ok((ts, _)) if ts >= 0 => return ts,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(segment = %self.log_path.display(), error = %e, "cannot read the time index; using the file's modification time");
            }
        }
        self.log
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64)
    }

    /// The first step of Kafka's asynchronous delete: every file of the segment gets the
    /// `.deleted` suffix, so a restart's loader removes it instead of loading it. Returns
    /// the renamed paths, to be removed after `file.delete.delay.ms`. Open handles (a
    /// reader's `FileSlice`) keep reading the same file.
    pub fn rename_to_deleted(self, dir: &Path) -> Result<Vec<PathBuf>, LogError> {
        change_suffixes(dir, self.base_offset, "", DELETED_SUFFIX)
    }

    /// Max timestamp of the first batch, if any: where `segment.ms` and
    /// `max.compaction.lag.ms` count from (Kafka's `getFirstBatchTimestamp`).
    pub fn first_batch_timestamp(&self) -> Option<i64> {
        self.rolling_based_timestamp
    }

    /// The `.log` file's modification time, set on a cleaned segment to its sources' so
    /// time retention of records without timestamps is not reset by cleaning.
    pub fn set_last_modified(&self, time: std::time::SystemTime) -> Result<(), LogError> {
        self.log.set_modified(time)?;
        Ok(())
    }

    pub fn last_modified(&self) -> Option<std::time::SystemTime> {
        self.log.metadata().and_then(|m| m.modified()).ok()
    }

    /// Deletes the segment's files (open handles stay readable until dropped).
    pub fn delete(self, dir: &Path) -> Result<(), LogError> {
        for path in [
            self.log_path.clone(),
            Self::index_path(dir, self.base_offset),
            Self::time_index_path(dir, self.base_offset),
            dir.join(offset_file_name(self.base_offset, TXN_INDEX_SUFFIX)),
        ] {
            match fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        Ok(())
    }
}

/// The index files changed since their last sync, their pending entries written.
fn index_sync_targets(indexes: &Indexes) -> Vec<SyncTarget> {
    [
        indexes.offset.index_file().take_sync_target(),
        indexes.time.index_file().take_sync_target(),
    ]
    .into_iter()
    .flatten()
    .map(|written| match written {
        Ok(file) => SyncTarget::File(Arc::new(file)),
        Err(e) => SyncTarget::Unwritten(e.kind(), e.to_string()),
    })
    .collect()
}

/// A segment file to make durable: the `.log` or an index by fsync (index files keep no
/// descriptor open; the handle that wrote an index's pending entries is kept to sync it).
pub enum SyncTarget {
    File(Arc<File>),
    /// A file written through short-lived handles (the `.txnindex`); gone is synced.
    Path(PathBuf),
    /// An index whose pending entries could not be written: its sync fails with this
    /// error (and the index stays changed, so the next flush tries again).
    Unwritten(std::io::ErrorKind, String),
}

impl SyncTarget {
    pub fn sync(&self) -> std::io::Result<()> {
        match self {
            SyncTarget::File(file) => file.sync_all(),
            SyncTarget::Path(path) => match File::open(path) {
                Ok(f) => f.sync_all(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e),
            },
            SyncTarget::Unwritten(kind, message) => {
                Err(std::io::Error::new(*kind, message.clone()))
            }
        }
    }
}

/// The batch header at `position` of a file whose valid length is `size`.
pub fn read_header(
    file: &File,
    position: u64,
    size: u64,
) -> Result<Option<RecordBatchHeader>, LogError> {
    if size.saturating_sub(position) < HEADER_SIZE as u64 {
        return Ok(None);
    }
    let mut raw = [0u8; HEADER_SIZE];
    file.read_exact_at(&mut raw, position)?;
    RecordBatchHeader::parse(&raw).map(Some)
}

/// Length of the longest prefix of `buf` made of whole batches that end before
/// `max_offset` (exclusive).
pub fn whole_batches_len(buf: &[u8], max_offset: i64) -> usize {
    let mut end = 0;
    for item in BatchIter::new(buf) {
        match item {
            Ok((pos, header)) if header.last_offset() < max_offset => {
                end = pos + header.size_in_bytes()
            }
            _ => break,
        }
    }
    end
}

fn to_u32(position: u64) -> Result<u32, LogError> {
    u32::try_from(position)
        .map_err(|_| LogError::InvalidRecord(format!("segment position {position} exceeds 4 GiB")))
}
