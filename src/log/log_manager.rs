//! `LogManager`: every partition log in the broker's `log.dirs`.
//!
//! It never removes a partition directory on its own. A deleted partition's directory is
//! renamed `<topic>-<partition>.<uuid>-delete` at once (so a restart cannot bring it back)
//! and removed `file.delete.delay.ms` later by `remove_due_deletions`; a directory the
//! metadata does not assign here is a stray, renamed `<topic>-<partition>.<uuid>-stray`,
//! kept byte for byte and never served.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use uuid::Uuid;

use super::checkpoint::{
    read_offset_checkpoint, sync_dir, sync_filesystem, write_atomic, write_offset_checkpoint,
    CLEANER_OFFSET_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
};
use super::dir_lock::DirLock;
use super::log_dir_health::{is_fd_exhaustion, LogDirHealth};
use super::log_dirs::METADATA_LOG_DIR;
use super::partition_dirs::{child_dir, sibling_dir};
use super::partition_metadata::read_partition_metadata;
use super::{DelayedDeletes, Log, LogConfig, LogError, TopicPartition};

/// Kafka's `CleanShutdownFileHandler` marker. Present at startup: the directory was shut
/// down cleanly and its logs need no recovery scan. Deleted before logs are loaded, so a
/// crash while loading counts as unclean; written (fsynced JSON
/// `{"version":0,"brokerEpoch":<epoch>}`) as the last step of a clean shutdown.
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
pub(super) const DELETE_SUFFIX: &str = "-delete";
const STRAY_SUFFIX: &str = "-stray";
pub(super) const FUTURE_SUFFIX: &str = "-future";

pub(super) struct LogDir {
    pub(super) path: PathBuf,
    pub(super) health: Arc<LogDirHealth>,
    /// Held while the dir's checkpoint files are written: the periodic jobs and a
    /// DeleteRecords may write them at the same time. Always taken before the read lock
    /// of `LogManager::logs`, never while holding it.
    checkpoints: Mutex<()>,
    /// The dir's `.lock`, held from start-up until the logs are closed at shutdown (as
    /// Kafka's LogManager releases its locks), not until the last reference to the
    /// manager goes: a task still winding down must not keep a restarted broker out.
    lock: Mutex<Option<DirLock>>,
}

pub(super) struct Hosted {
    pub(super) log: Arc<Log>,
    pub(super) dir_index: usize,
    pub(super) topic_id: Option<Uuid>,
}

/// Whether metadata assigns a partition directory found on disk to this broker: its
/// partition and its topic id (from `partition.metadata`, if it has one).
pub trait Assignment: Fn(&TopicPartition, Option<Uuid>) -> bool {}
impl<F: Fn(&TopicPartition, Option<Uuid>) -> bool> Assignment for F {}

/// Owns the log directories, each locked (`.lock`). Layout of each: `meta.properties`, the checkpoint files
/// (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`), the clean-shutdown
/// marker, and one `<topic>-<partition>` directory per hosted partition.
///
/// A dir that fails with an I/O error goes offline (see `LogDirHealth`): its logs stay in
/// the table, refusing every operation, and it is left out of checkpoints, new logs and
/// the clean shutdown, so the next start recovers it. Each dir that goes offline is
/// reported once on the channel from `take_dir_failures`.
pub struct LogManager {
    pub(super) dirs: Vec<LogDir>,
    pub(super) logs: RwLock<HashMap<TopicPartition, Hosted>>,
    /// Replicas moving to another log dir: their copies there (see `future_logs`). Taken
    /// after `logs` when both are.
    pub(super) futures: RwLock<HashMap<TopicPartition, Hosted>>,
    /// Held by a move's switch and by shutdown, so no switch runs while logs close.
    pub(super) moving: Mutex<()>,
    dir_failures: Mutex<Option<UnboundedReceiver<PathBuf>>>,
    /// Deleted segments and partition directories waiting out `file.delete.delay.ms`.
    pub(super) delayed_deletes: Arc<DelayedDeletes>,
    pub(super) file_delete_delay: Duration,
    /// The broker epoch the clean-shutdown marker records (-1: not registered).
    broker_epoch: std::sync::atomic::AtomicI64,
    /// Threads per log dir that load logs at startup, create new ones and close them at
    /// shutdown.
    pub(super) threads: usize,
    /// Held by whoever creates logs (see `new_logs`) and by `delete_log`, so that no two
    /// make or remove the same directory while `logs` is unlocked. Taken before `logs`.
    pub(super) creating: Mutex<()>,
    /// Each dir's `directory.id` by its index in `dirs`, from its `meta.properties`
    /// (Kafka's `LogManager.directoryIds`): where a new log goes when the metadata names
    /// its dir ([`LogManager::set_directory_ids`]).
    pub(super) directory_ids: RwLock<Vec<Option<Uuid>>>,
}

/// One log dir and whether it is online.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogDirStatus {
    pub path: PathBuf,
    /// Why the dir went offline; `None` while it is online.
    pub offline_cause: Option<String>,
}

/// One log dir as DescribeLogDirs reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogDirDescription {
    /// Absolute, as Kafka names log dirs to clients (and as AlterReplicaLogDirs names them).
    pub path: PathBuf,
    /// Why the dir went offline; `None` while it is online.
    pub offline_cause: Option<String>,
    /// Size of the file system holding the dir, and what is left of it for skua (KIP-827);
    /// `None` for an offline dir or when the file system cannot tell.
    pub total_and_usable_bytes: Option<(u64, u64)>,
    /// The replicas' logs in the dir, sorted (none for an offline dir).
    pub replicas: Vec<ReplicaLogDescription>,
}

/// One replica's log in a log dir.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ReplicaLogDescription {
    pub tp: TopicPartition,
    pub size_bytes: u64,
    /// How far a future log is behind the current one; 0 for a current log.
    pub offset_lag: i64,
    /// A `-future` log: the copy an AlterReplicaLogDirs is building in this dir.
    pub is_future: bool,
}

impl LogManager {
    /// Opens every log dir (already checked and locked, see `log_dirs`): reads the
    /// recovery-point and log-start checkpoints, notes and deletes the clean-shutdown
    /// marker, schedules leftover `-delete` directories for removal, renames partition
    /// directories that `assigned` does not know to `-stray`, and loads every other
    /// partition directory (recovering after its recovery point if the shutdown was
    /// unclean). Strays are set aside before they are opened, so recovery never touches them.
    pub fn startup(
        log_dirs: Vec<(PathBuf, DirLock)>,
        assigned: impl Assignment,
        topic_configs: impl Fn(&str) -> LogConfig,
        file_delete_delay_ms: u64,
    ) -> Result<LogManager, LogError> {
        Self::startup_parallel(log_dirs, assigned, topic_configs, file_delete_delay_ms, 1)
    }

    /// `startup` with the logs of each dir loaded by `threads` threads
    /// (`num.recovery.threads.per.data.dir`).
    pub fn startup_parallel(
        log_dirs: Vec<(PathBuf, DirLock)>,
        assigned: impl Assignment,
        topic_configs: impl Fn(&str) -> LogConfig,
        file_delete_delay_ms: u64,
        threads: usize,
    ) -> Result<LogManager, LogError> {
        let file_delete_delay = Duration::from_millis(file_delete_delay_ms);
        let delayed_deletes = Arc::new(DelayedDeletes::new());
        let mut dirs = Vec::new();
        let mut logs: HashMap<TopicPartition, Hosted> = HashMap::new();
        let mut futures_found = Vec::new();
        let (failures_tx, failures_rx) = unbounded_channel();
        for (dir_index, (path, lock)) in log_dirs.into_iter().enumerate() {
            let health = Arc::new(LogDirHealth::new(&path, Some(failures_tx.clone())));
            let clean = take_clean_shutdown_marker(&path)?;
            let recovery_points = read_checkpoint_or_empty(&path.join(RECOVERY_POINT_CHECKPOINT));
            let log_starts = read_checkpoint_or_empty(&path.join(LOG_START_OFFSET_CHECKPOINT));
            let cleaner_offsets = read_checkpoint_or_empty(&path.join(CLEANER_OFFSET_CHECKPOINT));
            let mut to_load = Vec::new();
            for entry in fs::read_dir(&path)? {
                let entry = entry?;
                if !entry.file_type()?.is_dir() {
                    continue;
                }
                let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                let dir = entry.path();
                if name.ends_with(FUTURE_SUFFIX) {
                    futures_found.push(dir);
                    continue;
                }
                let Some(tp) = partition_dir(&dir, &name, &delayed_deletes, file_delete_delay)
                else {
                    continue;
                };
                let topic_id = read_partition_metadata(&dir).unwrap_or_else(|e| {
                    tracing::warn!(partition = %tp, error = %e, "unreadable partition.metadata");
                    None
                });
                if !assigned(&tp, topic_id) {
                    set_aside_stray(&path, &dir, &tp, topic_id)?;
                    continue;
                }
                let config = topic_configs(&tp.topic);
                let rp = recovery_points.get(&tp).copied().unwrap_or(0);
                let log_start = log_starts.get(&tp).copied().unwrap_or(0);
                to_load.push(ToLoad {
                    dir,
                    tp,
                    topic_id,
                    config,
                    recovery_point: rp,
                    log_start,
                });
            }
            let opened = load_logs(&to_load, clean, threads);
            for (
                ToLoad {
                    dir, tp, topic_id, ..
                },
                log,
            ) in to_load.into_iter().zip(opened)
            {
                let log = log?
                    .in_log_dir(health.clone())
                    .with_delayed_deletes(delayed_deletes.clone());
                if let Some(&offset) = cleaner_offsets.get(&tp) {
                    log.set_cleaner_checkpoint(offset);
                }
                if let Some(first) = logs.get(&tp) {
                    // A crash during a move's switch (see `future_logs`).
                    let (keep, aside) = match super::future_logs::keep_first(&first.log, &log) {
                        true => (first.log.dir().to_path_buf(), dir.clone()),
                        false => (dir.clone(), first.log.dir().to_path_buf()),
                    };
                    tracing::warn!(partition = %tp, serving = %keep.display(), "the partition is in two log dirs (a move to another log dir was interrupted): serving the longer copy, setting the other aside");
                    let aside_parent = aside.parent().map(Path::to_path_buf).unwrap_or_default();
                    if keep == dir {
                        logs.remove(&tp);
                    } else {
                        drop(log);
                        set_aside_stray(&aside_parent, &aside, &tp, topic_id)?;
                        continue;
                    }
                    set_aside_stray(&aside_parent, &aside, &tp, topic_id)?;
                }
                logs.insert(
                    tp,
                    Hosted {
                        log: Arc::new(log),
                        dir_index,
                        topic_id,
                    },
                );
            }
            tracing::info!(dir = %path.display(), clean, "loaded log dir");
            dirs.push(LogDir {
                path,
                health,
                checkpoints: Mutex::new(()),
                lock: Mutex::new(Some(lock)),
            });
        }
        let manager = LogManager {
            dirs,
            logs: RwLock::new(logs),
            futures: RwLock::new(HashMap::new()),
            moving: Mutex::new(()),
            dir_failures: Mutex::new(Some(failures_rx)),
            delayed_deletes,
            file_delete_delay,
            broker_epoch: std::sync::atomic::AtomicI64::new(-1),
            threads,
            creating: Mutex::new(()),
            directory_ids: RwLock::new(Vec::new()),
        };
        manager.drop_incomplete_futures(futures_found)?;
        Ok(manager)
    }

    /// The broker epoch written into the clean-shutdown marker: Kafka started on these
    /// dirs compares it with the epoch its metadata registered, to tell a clean shutdown.
    pub fn set_broker_epoch(&self, epoch: i64) {
        self.broker_epoch
            .store(epoch, std::sync::atomic::Ordering::Release);
    }

    /// The receiver of log dirs going offline, for the broker's failure handler (once).
    pub fn take_dir_failures(&self) -> Option<UnboundedReceiver<PathBuf>> {
        self.dir_failures.lock().take()
    }

    /// Every log dir and whether it is online.
    pub fn log_dirs(&self) -> Vec<LogDirStatus> {
        self.dirs
            .iter()
            .map(|d| LogDirStatus {
                path: d.path.clone(),
                offline_cause: d
                    .health
                    .is_offline()
                    .then(|| d.health.cause().unwrap_or_default()),
            })
            .collect()
    }

    /// Every log dir with the replicas it holds (Kafka's `ReplicaManager.describeLogDirs`).
    pub fn describe_log_dirs(&self) -> Vec<LogDirDescription> {
        let mut replicas: Vec<Vec<ReplicaLogDescription>> = vec![Vec::new(); self.dirs.len()];
        for (tp, h) in self.logs.read().iter() {
            replicas[h.dir_index].push(ReplicaLogDescription {
                tp: tp.clone(),
                size_bytes: h.log.size_bytes(),
                offset_lag: 0,
                is_future: false,
            });
        }
        for (tp, dir_index, log, offset_lag) in self.future_lags() {
            replicas[dir_index].push(ReplicaLogDescription {
                tp,
                size_bytes: log.size_bytes(),
                offset_lag,
                is_future: true,
            });
        }
        self.dirs
            .iter()
            .zip(replicas)
            .map(|(d, mut replicas)| {
                let offline_cause = d
                    .health
                    .is_offline()
                    .then(|| d.health.cause().unwrap_or_default());
                if offline_cause.is_some() {
                    replicas.clear();
                }
                replicas.sort();
                LogDirDescription {
                    path: absolute_path(&d.path),
                    total_and_usable_bytes: offline_cause
                        .is_none()
                        .then(|| super::disk_space::total_and_usable_bytes(&d.path))
                        .flatten(),
                    offline_cause,
                    replicas,
                }
            })
            .collect()
    }

    /// True when no log dir is left online (Kafka then halts the broker).
    pub fn all_dirs_offline(&self) -> bool {
        self.dirs.iter().all(|d| d.health.is_offline())
    }

    /// Takes `dir` offline after `error` in `what`, unless the error is fd exhaustion.
    pub(super) fn on_dir_failure(&self, dir_index: usize, what: &str, error: LogError) -> LogError {
        match &error {
            LogError::KafkaStorage(io) if is_fd_exhaustion(io) => {
                tracing::error!(dir = %self.dirs[dir_index].path.display(), error = %io, "{what} failed: out of file descriptors (raise `ulimit -n`)");
            }
            LogError::KafkaStorage(io) => self.dirs[dir_index].health.mark_offline(what, io),
            _ => {}
        }
        error
    }

    pub fn get_log(&self, tp: &TopicPartition) -> Option<Arc<Log>> {
        self.logs.read().get(tp).map(|h| h.log.clone())
    }

    /// Records each log dir's `directory.id` (`ids`: a dir's path and its id; a path that
    /// is not one of the dirs is ignored), so that a new log whose partition the metadata
    /// places in one of them is made there.
    pub fn set_directory_ids(&self, ids: &[(PathBuf, Uuid)]) {
        let by_index = self
            .dirs
            .iter()
            .map(|d| ids.iter().find(|(p, _)| *p == d.path).map(|(_, id)| *id))
            .collect();
        *self.directory_ids.write() = by_index;
    }

    /// The `directory.id` of log dir `index`, if known.
    pub fn directory_id_of_dir(&self, index: usize) -> Option<Uuid> {
        self.directory_ids.read().get(index).copied().flatten()
    }

    /// The `directory.id` of the dir holding `tp`'s log, as the broker reports it to a KRaft
    /// controller (AssignReplicasToDirs); `None` when there is nothing to report: no log,
    /// a dir without an id, a dir gone offline (the heartbeat reports that dir offline,
    /// and its replicas with it), or a move to another dir under way (the move reports the
    /// new dir itself before it switches, `replica::log_dir_move`).
    pub fn placement_of(&self, tp: &TopicPartition) -> Option<Uuid> {
        if self.futures.read().contains_key(tp) {
            return None;
        }
        let index = self.logs.read().get(tp)?.dir_index;
        if self.dirs[index].health.is_offline() {
            return None;
        }
        self.directory_id_of_dir(index)
    }

    /// The index of the online log dir whose `directory.id` is `id`.
    pub(super) fn online_dir_with_id(&self, id: Uuid) -> Option<usize> {
        let i = self
            .directory_ids
            .read()
            .iter()
            .position(|d| *d == Some(id))?;
        (!self.dirs[i].health.is_offline()).then_some(i)
    }

    /// The log dir holding `tp`'s current log (not a move's future copy), if hosted.
    pub fn log_dir_of(&self, tp: &TopicPartition) -> Option<PathBuf> {
        let dir_index = self.logs.read().get(tp)?.dir_index;
        Some(self.dirs[dir_index].path.clone())
    }

    pub fn all_logs(&self) -> Vec<Arc<Log>> {
        self.logs.read().values().map(|h| h.log.clone()).collect()
    }

    pub fn topic_id_of(&self, tp: &TopicPartition) -> Option<Uuid> {
        self.logs.read().get(tp).and_then(|h| h.topic_id)
    }

    /// Whether new logs may be created now: an error while the file descriptors left are
    /// within the reserve (see `fd_limit`). Checked before metadata records a new
    /// partition, and again when its log is created.
    pub fn check_capacity(&self) -> Result<(), LogError> {
        super::fd_limit::check_headroom()
    }

    /// Deletes `tp`'s log as Kafka does: stops hosting it and renames its directory to
    /// `topic-P.<uuid>-delete` at once (fsynced, so a restart never brings it back); the
    /// directory is removed `file.delete.delay.ms` later, in the queue deleted segments
    /// wait in (`DelayedDeletes`, emptied by `remove_due_deletions`).
    pub fn delete_log(&self, tp: &TopicPartition) -> Result<(), LogError> {
        self.abandon_future_log(tp);
        let _creating = self.creating.lock();
        let Some(hosted) = self.logs.write().remove(tp) else {
            return Ok(());
        };
        // The cleaner writes into the log's directory: it stops first; jobs still holding
        // the log may fail on its old path, and that is no disk failure.
        hosted.log.retire();
        let dir = hosted.log.dir().to_path_buf();
        let (parent, doomed) = sibling_dir(&dir, &suffixed_dir_name(tp, DELETE_SUFFIX))?;
        fs::rename(&dir, &doomed)?;
        sync_dir(&parent)?;
        tracing::info!(partition = %tp, dir = %doomed.display(), delay_ms = self.file_delete_delay.as_millis() as u64, "log renamed for deletion");
        self.delayed_deletes
            .schedule([doomed], self.file_delete_delay);
        Ok(())
    }

    /// Removes the deleted segments and partition directories whose delay has passed
    /// (Kafka's `kafka-delete-logs` task and its segments' `delete-file` tasks). Blocking.
    pub fn remove_due_deletions(&self, now: Instant) -> usize {
        self.delayed_deletes.remove_due(now)
    }

    /// Files and directories renamed for deletion and not yet removed.
    pub fn pending_deletions(&self) -> Vec<PathBuf> {
        self.delayed_deletes.pending()
    }

    /// The scheduler's log flusher: flushes each online log whose `flush.ms` has passed.
    pub fn flush_dirty_logs(&self, now_ms: i64) {
        for log in self.online_logs() {
            if let Err(e) = log.flush_if_due(now_ms) {
                tracing::error!(partition = %log.topic_partition(), error = %e, "scheduled flush failed");
            }
        }
    }

    /// The scheduler's producer expiration check, over every online log.
    pub fn remove_expired_producers(&self, now_ms: i64) -> usize {
        self.online_logs()
            .iter()
            .map(|log| log.remove_expired_producers(now_ms))
            .sum()
    }

    fn online_logs(&self) -> Vec<Arc<Log>> {
        self.logs
            .read()
            .values()
            .filter(|h| !self.dirs[h.dir_index].health.is_offline())
            .map(|h| h.log.clone())
            .collect()
    }

    /// Writes each online log dir's recovery-point and log-start-offset checkpoints. A dir
    /// whose checkpoint cannot be written goes offline; the others are still written.
    pub fn checkpoint_recovery_points(&self) -> Result<(), LogError> {
        let mut first_error = None;
        for i in 0..self.dirs.len() {
            if self.dirs[i].health.is_offline() {
                continue;
            }
            if let Err(e) = self.checkpoint_dir(i) {
                first_error.get_or_insert(self.on_dir_failure(i, "writing checkpoints", e));
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Writes each online log dir's `log-start-offset-checkpoint` (Kafka's
    /// `kafka-log-start-offset-checkpoint` task; also right after a DeleteRecords).
    pub fn checkpoint_log_start_offsets(&self) -> Result<(), LogError> {
        let mut first_error = None;
        for i in 0..self.dirs.len() {
            if self.dirs[i].health.is_offline() {
                continue;
            }
            if let Err(e) = self.checkpoint_log_starts_of_dir(i) {
                first_error.get_or_insert(self.on_dir_failure(i, "writing checkpoints", e));
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Writes each online log dir's `cleaner-offset-checkpoint`: where the next cleaning of
    /// each compacted log starts (logs never cleaned have no entry).
    pub fn checkpoint_cleaner_offsets(&self) -> Result<(), LogError> {
        let mut first_error = None;
        for (i, dir) in self.dirs.iter().enumerate() {
            if dir.health.is_offline() {
                continue;
            }
            let _writing = dir.checkpoints.lock();
            let mut offsets: Vec<(TopicPartition, i64)> = self
                .logs
                .read()
                .iter()
                .filter(|(_, h)| h.dir_index == i)
                .filter_map(|(tp, h)| h.log.cleaner_checkpoint().map(|o| (tp.clone(), o)))
                .collect();
            offsets.sort();
            let path = dir.path.join(CLEANER_OFFSET_CHECKPOINT);
            if let Err(e) = write_offset_checkpoint(&path, &offsets) {
                first_error.get_or_insert(self.on_dir_failure(i, "writing checkpoints", e));
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Writes each online log dir's `replication-offset-checkpoint` (Kafka's
    /// `highwatermark-checkpoint`): `high_watermark` of every log in the dir that has one.
    pub fn checkpoint_high_watermarks(
        &self,
        high_watermark: impl Fn(&TopicPartition) -> Option<i64>,
    ) -> Result<(), LogError> {
        let mut first_error = None;
        for (i, dir) in self.dirs.iter().enumerate() {
            if dir.health.is_offline() {
                continue;
            }
            let _writing = dir.checkpoints.lock();
            let mut hws: Vec<(TopicPartition, i64)> = self
                .logs
                .read()
                .iter()
                .filter(|(_, h)| h.dir_index == i)
                .filter_map(|(tp, _)| high_watermark(tp).map(|hw| (tp.clone(), hw)))
                .collect();
            hws.sort();
            let path = dir.path.join(REPLICATION_OFFSET_CHECKPOINT);
            if let Err(e) = write_offset_checkpoint(&path, &hws) {
                first_error.get_or_insert(self.on_dir_failure(i, "writing checkpoints", e));
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The high watermarks last checkpointed, each read from the dir that holds its log
    /// (an unreadable checkpoint is logged and counts as empty).
    pub fn checkpointed_high_watermarks(&self) -> HashMap<TopicPartition, i64> {
        let mut hws = HashMap::new();
        for (i, dir) in self.dirs.iter().enumerate() {
            if dir.health.is_offline() {
                continue;
            }
            // The checkpoint lock first, then `logs` (see `checkpoint_dir`).
            let _reading = dir.checkpoints.lock();
            let read = read_checkpoint_or_empty(&dir.path.join(REPLICATION_OFFSET_CHECKPOINT));
            let logs = self.logs.read();
            hws.extend(
                read.into_iter()
                    .filter(|(tp, _)| logs.get(tp).is_some_and(|h| h.dir_index == i)),
            );
        }
        hws
    }

    fn checkpoint_log_starts_of_dir(&self, i: usize) -> Result<(), LogError> {
        let dir = &self.dirs[i];
        let _writing = dir.checkpoints.lock();
        let mut starts: Vec<(TopicPartition, i64)> = self
            .logs
            .read()
            .iter()
            .filter(|(_, h)| h.dir_index == i)
            .map(|(tp, h)| (tp.clone(), h.log.log_start_offset()))
            .collect();
        starts.sort();
        write_offset_checkpoint(&dir.path.join(LOG_START_OFFSET_CHECKPOINT), &starts)
    }

    fn checkpoint_dir(&self, i: usize) -> Result<(), LogError> {
        let dir = &self.dirs[i];
        // The checkpoint lock before the logs' read lock, as everywhere: a reader waiting
        // for the checkpoint lock while holding `logs` deadlocks with a checkpoint writer
        // waiting for `logs` behind a queued log creation (parking_lot queues readers
        // behind a waiting writer).
        let _writing = dir.checkpoints.lock();
        let logs = self.logs.read();
        // Rolls whose background flush has not run yet are flushed first, so their
        // segments' recovery points go into this checkpoint.
        for h in logs.values().filter(|h| h.dir_index == i) {
            h.log.complete_roll();
        }
        {
            let mut recovery = Vec::new();
            let mut starts = Vec::new();
            for (tp, h) in logs.iter().filter(|(_, h)| h.dir_index == i) {
                recovery.push((tp.clone(), h.log.recovery_point()));
                starts.push((tp.clone(), h.log.log_start_offset()));
            }
            recovery.sort();
            starts.sort();
            write_offset_checkpoint(&dir.path.join(RECOVERY_POINT_CHECKPOINT), &recovery)?;
            write_offset_checkpoint(&dir.path.join(LOG_START_OFFSET_CHECKPOINT), &starts)?;
        }
        Ok(())
    }

    /// One `syncfs` per file system holding any of the dirs `dirs` (a dir whose file system
    /// cannot be told is synced on its own); returns each dir whose sync failed.
    fn sync_file_systems(&self, dirs: &[usize]) -> Vec<(usize, LogError)> {
        use std::os::unix::fs::MetadataExt;
        let mut by_device: Vec<(Option<u64>, Vec<usize>)> = Vec::new();
        for &i in dirs {
            let device = fs::metadata(&self.dirs[i].path).ok().map(|m| m.dev());
            match by_device
                .iter_mut()
                .find(|(d, _)| device.is_some() && *d == device)
            {
                Some((_, group)) => group.push(i),
                None => by_device.push((device, vec![i])),
            }
        }
        let mut failed = Vec::new();
        for (_, group) in by_device {
            let Some(&first) = group.first() else {
                continue;
            };
            if let Err(e) = sync_filesystem(&self.dirs[first].path) {
                tracing::error!(dir = %self.dirs[first].path.display(), error = %e, "syncfs of the log dir's file system failed");
                // The error is the file system's: no dir on it is known to be whole.
                for &i in &group {
                    let e = LogError::KafkaStorage(std::io::Error::other(format!(
                        "syncfs failed: {e}"
                    )));
                    failed.push((i, e));
                }
            }
        }
        failed
    }

    /// Clean shutdown: close every log (trimming indexes, writing the producer snapshots
    /// that changed) without fsync; then one `syncfs` per file system holding log dirs;
    /// only after it succeeded the recovery points move to the log ends and the checkpoints
    /// and the clean-shutdown marker are written (each with its fsync: a few per dir, none
    /// per partition). A log that fails to close, a failed sync or a failed checkpoint
    /// leaves its dir without the marker, so the next start recovers it from the recovery
    /// points the last fsync left.
    ///
    /// Offline dirs are left exactly as they are: no flush, no checkpoint, no marker.
    pub fn shutdown(&self) -> Result<(), LogError> {
        // Moves stop here; their copies are dropped at the next start.
        let _no_switch = self.moving.lock();
        self.futures.write().clear();
        let mut failed_dirs = Vec::new();
        let mut first_error = None;
        let to_close: Vec<(usize, Arc<Log>)> = self
            .logs
            .read()
            .values()
            .filter(|h| !self.dirs[h.dir_index].health.is_offline())
            .map(|h| (h.dir_index, h.log.clone()))
            .collect();
        let threads = (self.threads * self.dirs.len()).max(1);
        let (closed, failed) = close_logs(&to_close, threads);
        for (dir_index, e) in failed {
            failed_dirs.push(dir_index);
            first_error.get_or_insert(e);
        }
        let mut closing: Vec<usize> = (0..self.dirs.len())
            .filter(|i| !self.dirs[*i].health.is_offline() && !failed_dirs.contains(i))
            .collect();
        for (i, e) in self.sync_file_systems(&closing) {
            closing.retain(|&c| c != i);
            first_error.get_or_insert(self.on_dir_failure(i, "syncing the log dir", e));
        }
        // Everything each log held when it closed is durable now.
        for (dir_index, log, end) in &closed {
            if closing.contains(dir_index) {
                log.synced_to(*end);
            }
        }
        let epoch = self.broker_epoch.load(std::sync::atomic::Ordering::Acquire);
        for i in closing {
            let marked = self.checkpoint_dir(i).and_then(|()| {
                write_atomic(
                    &self.dirs[i].path.join(CLEAN_SHUTDOWN_FILE),
                    format!(r#"{{"version":0,"brokerEpoch":{epoch}}}"#).as_bytes(),
                )
            });
            if let Err(e) = marked {
                first_error.get_or_insert(self.on_dir_failure(i, "clean shutdown", e));
            }
        }
        for dir in &self.dirs {
            dir.lock.lock().take();
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// A log closed without fsync, with its dir and the log end it covered.
type Closed = (usize, Arc<Log>, i64);

/// Closes `logs` without fsync (`Log::close_unsynced`) on `threads` threads; returns the
/// closed logs and the failures with their dirs (logged). A log that changed nothing
/// since its last snapshot and trim costs no write.
fn close_logs(logs: &[(usize, Arc<Log>)], threads: usize) -> (Vec<Closed>, Vec<(usize, LogError)>) {
    let close = |(dir_index, log): &(usize, Arc<Log>)| match log.close_unsynced() {
        Ok(end) => Ok((*dir_index, log.clone(), end)),
        Err(e) => {
            tracing::error!(partition = %log.topic_partition(), error = %e, "failed to close log");
            Err((*dir_index, e))
        }
    };
    let threads = threads.clamp(1, logs.len().max(1));
    let results: Vec<Result<Closed, (usize, LogError)>> = if threads == 1 {
        logs.iter().map(close).collect()
    } else {
        close_on_threads(logs, threads, &close)
    };
    let mut closed = Vec::with_capacity(results.len());
    let mut failed = Vec::new();
    for r in results {
        match r {
            Ok(c) => closed.push(c),
            Err(f) => failed.push(f),
        }
    }
    (closed, failed)
}

/// `close` of every log in `logs`, on `threads` threads (each takes the next log not yet
/// taken); threads overlap the writes.
fn close_on_threads<T, F>(logs: &[(usize, Arc<Log>)], threads: usize, close: &F) -> Vec<T>
where
    T: Send,
    F: Fn(&(usize, Arc<Log>)) -> T + Sync,
{
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    while let Some(l) =
                        logs.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                    {
                        mine.push(close(l));
                    }
                    mine
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| match w.join() {
                Ok(mine) => mine,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    })
}

/// A partition directory startup loads.
struct ToLoad {
    dir: PathBuf,
    tp: TopicPartition,
    topic_id: Option<Uuid>,
    config: LogConfig,
    recovery_point: i64,
    log_start: i64,
}

/// Opens the logs of `to_load` on `threads` threads (each takes the next directory not
/// yet taken), in `to_load`'s order. Loading is mostly file-system calls and page faults
/// per partition, which threads overlap.
fn load_logs(to_load: &[ToLoad], clean: bool, threads: usize) -> Vec<Result<Log, LogError>> {
    let open = |l: &ToLoad| {
        Log::open_found(
            &l.dir,
            l.tp.clone(),
            l.config.clone(),
            l.recovery_point,
            l.log_start,
            clean,
        )
    };
    let threads = threads.clamp(1, to_load.len().max(1));
    if threads == 1 {
        return to_load.iter().map(open).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut opened: Vec<(usize, Result<Log, LogError>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(l) = to_load.get(i) else {
                            return mine;
                        };
                        mine.push((i, open(l)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| match w.join() {
                Ok(mine) => mine,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    opened.sort_by_key(|(i, _)| *i);
    opened.into_iter().map(|(_, log)| log).collect()
}

/// `path` made absolute (without resolving links), as Java's `File.getAbsolutePath`.
pub fn absolute_path(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The broker epoch the last clean shutdown wrote into the dirs' markers, when every dir
/// has a readable one and they agree (-1 otherwise): what a KRaft broker registers as its
/// previous epoch, by which the controllers tell a clean restart from an unclean one
/// (KIP-966; Kafka's `readBrokerEpochFromCleanShutdownFiles`). Read before the logs load,
/// which deletes the markers.
pub fn previous_broker_epoch(dirs: &[PathBuf]) -> i64 {
    #[derive(serde::Deserialize)]
    struct Marker {
        #[serde(rename = "brokerEpoch")]
        broker_epoch: i64,
    }
    let read = |d: &PathBuf| {
        let bytes = fs::read(d.join(CLEAN_SHUTDOWN_FILE)).ok()?;
        serde_json::from_slice::<Marker>(&bytes)
            .ok()
            .map(|m| m.broker_epoch)
    };
    let epochs: Option<Vec<i64>> = dirs.iter().map(read).collect();
    match epochs.as_deref() {
        Some([first, rest @ ..]) if rest.iter().all(|e| e == first) => *first,
        _ => -1,
    }
}

/// Whether `dir` was shut down cleanly; deletes the marker either way.
fn take_clean_shutdown_marker(dir: &Path) -> Result<bool, LogError> {
    let marker = dir.join(CLEAN_SHUTDOWN_FILE);
    if !marker.exists() {
        return Ok(false);
    }
    fs::remove_file(&marker)?;
    sync_dir(dir)?;
    Ok(true)
}

/// An unreadable checkpoint means "recover from 0", as in Kafka.
fn read_checkpoint_or_empty(path: &Path) -> HashMap<TopicPartition, i64> {
    read_offset_checkpoint(path).unwrap_or_else(|e| {
        tracing::warn!(path = %path.display(), error = %e, "ignoring unreadable checkpoint");
        HashMap::new()
    })
}

/// The partition a directory holds, or `None` for directories LogManager does not load.
/// Leftover `-delete` directories (a deletion asked for before a restart) are scheduled
/// for removal after the delay; `-stray` and `-future` ones are left as they are.
fn partition_dir(
    path: &Path,
    name: &str,
    deletes: &DelayedDeletes,
    delay: Duration,
) -> Option<TopicPartition> {
    if name.ends_with(DELETE_SUFFIX) {
        tracing::info!(dir = %path.display(), "partition directory pending deletion; removing it after the delay");
        deletes.schedule([path.to_path_buf()], delay);
        return None;
    }
    if name.ends_with(STRAY_SUFFIX) {
        tracing::warn!(dir = %path.display(), "stray partition directory kept, not served (see the warning given when it was set aside)");
        return None;
    }
    if name.ends_with(FUTURE_SUFFIX) || name.starts_with(METADATA_LOG_DIR) {
        return None;
    }
    let tp = TopicPartition::from_dir_name(name);
    if tp.is_none() {
        tracing::warn!(dir = %path.display(), "ignoring directory that is not a partition");
    }
    tp
}

/// Renames a partition directory that metadata does not assign here to Kafka's stray name,
/// keeping every byte, and says what it is and what can be done with it.
fn set_aside_stray(
    parent: &Path,
    dir: &Path,
    tp: &TopicPartition,
    topic_id: Option<Uuid>,
) -> Result<(), LogError> {
    let stray = child_dir(parent, &suffixed_dir_name(tp, STRAY_SUFFIX))?;
    fs::rename(dir, &stray)?;
    sync_dir(parent)?;
    let id = topic_id.map_or_else(|| "none".to_string(), super::uuid_to_kafka_string);
    tracing::warn!(
        "partition directory {} (topic id {id}) is not in the cluster metadata: kept as {} and not served. \
         To serve it again, stop the broker, make sure topic {} exists with partition {} (CreateTopics or CreatePartitions), \
         replace that partition's directory with this one renamed back to {tp} and without its partition.metadata, and start the broker. \
         To discard it, delete the directory.",
        dir.display(),
        stray.display(),
        tp.topic,
        tp.partition,
    );
    Ok(())
}

/// Kafka's `LocalLog.logDirNameWithSuffixCappedLength`: `topic-P.<32 hex><suffix>`, the
/// topic shortened so the name fits in 255 bytes.
pub(super) fn suffixed_dir_name(tp: &TopicPartition, suffix: &str) -> String {
    let suffix = format!("-{}.{}{suffix}", tp.partition, Uuid::new_v4().simple());
    let keep = 255usize.saturating_sub(suffix.len()).min(tp.topic.len());
    let mut cut = keep;
    while !tp.topic.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &tp.topic[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::test_util::batch_bytes;

    fn config() -> LogConfig {
        LogConfig {
            index_interval_bytes: 100,
            max_index_size: 4096,
            // Test batches carry timestamps near 1970, which the wall clock would expire.
            producer_id_expiration_ms: i64::MAX,
            ..LogConfig::default()
        }
    }

    fn locked(dirs: &[PathBuf]) -> Vec<(PathBuf, DirLock)> {
        dirs.iter()
            .map(|d| {
                fs::create_dir_all(d).unwrap();
                (d.clone(), DirLock::acquire(d).unwrap())
            })
            .collect()
    }

    /// Starts with every partition on disk assigned here.
    fn start(dirs: &[PathBuf]) -> LogManager {
        start_knowing(dirs, |_: &TopicPartition, _: Option<Uuid>| true)
    }

    fn start_knowing(dirs: &[PathBuf], assigned: impl Assignment) -> LogManager {
        LogManager::startup(locked(dirs), assigned, |_| config(), 60_000).unwrap()
    }

    #[test]
    fn shutdown_releases_the_dir_locks_while_the_manager_lives_on() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = vec![tmp.path().join("a"), tmp.path().join("b")];
        let manager = start(&dirs);
        assert!(DirLock::acquire(&dirs[0]).is_err(), "held while running");
        manager.shutdown().unwrap();
        // A task winding down may still hold the manager; a restart must not wait for it.
        for d in &dirs {
            DirLock::acquire(d).unwrap();
        }
        drop(manager);
    }

    /// Every file under `dir` with its bytes, for byte-for-byte comparisons.
    fn snapshot_tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(snapshot_tree(&path));
            } else {
                let bytes = fs::read(&path).unwrap();
                out.push((path.strip_prefix(dir).unwrap().to_path_buf(), bytes));
            }
        }
        out.sort();
        out
    }

    fn dirs_ending(parent: &Path, suffix: &str) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = fs::read_dir(parent)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(suffix))
            .collect();
        out.sort();
        out
    }

    /// Appends producer 9's batches with sequences `from..from + n`.
    fn fill(log: &Log, from: usize, n: usize) {
        for i in from..from + n {
            log.append_as_leader(
                batch_bytes(&[b"value"], i as i64, Some((9, 0, i as i32))),
                0,
                0,
            )
            .unwrap();
        }
    }

    #[test]
    fn clean_shutdown_and_restart() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("d1"), root.path().join("d2")];
        let lm = start(&dirs);
        let id = Uuid::new_v4();
        let a = lm
            .get_or_create_log(&TopicPartition::new("orders", 0), id, config())
            .unwrap();
        let b = lm
            .get_or_create_log(&TopicPartition::new("orders", 1), id, config())
            .unwrap();
        assert_ne!(a.dir().parent(), b.dir().parent(), "spread over log dirs");
        fill(&a, 0, 5);
        fill(&b, 0, 3);
        lm.shutdown().unwrap();
        for d in &dirs {
            assert_eq!(
                fs::read_to_string(d.join(CLEAN_SHUTDOWN_FILE)).unwrap(),
                r#"{"version":0,"brokerEpoch":-1}"#
            );
        }
        let a_dir = a.dir().parent().unwrap().to_path_buf();
        assert_eq!(
            fs::read_to_string(a_dir.join(RECOVERY_POINT_CHECKPOINT)).unwrap(),
            "0\n1\norders 0 5\n"
        );
        drop((a, b, lm));

        let lm = start(&dirs);
        for d in &dirs {
            assert!(
                !d.join(CLEAN_SHUTDOWN_FILE).exists(),
                "marker consumed at startup"
            );
        }
        let a = lm.get_log(&TopicPartition::new("orders", 0)).unwrap();
        assert_eq!((a.log_end_offset(), a.recovery_point()), (5, 5));
        assert_eq!(lm.topic_id_of(&TopicPartition::new("orders", 0)), Some(id));
        assert_eq!(lm.all_logs().len(), 2);
        // Producer state came back from the shutdown snapshot.
        assert!(
            a.append_as_leader(batch_bytes(&[b"value"], 4, Some((9, 0, 4))), 0, 0)
                .unwrap()
                .duplicate
        );
        assert!(matches!(
            lm.get_or_create_log(&TopicPartition::new("orders", 0), Uuid::new_v4(), config()),
            Err(LogError::InconsistentTopicId { .. })
        ));
    }

    #[test]
    fn unclean_shutdown_recovers_after_the_recovery_point() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("d")];
        let lm = start(&dirs);
        let tp = TopicPartition::new("events", 3);
        let log = lm.get_or_create_log(&tp, Uuid::new_v4(), config()).unwrap();
        fill(&log, 0, 4);
        log.flush().unwrap();
        lm.checkpoint_recovery_points().unwrap();
        fill(&log, 4, 2);
        let seg = log.dir().join("00000000000000000000.log");
        drop((log, lm));
        // A crash: no marker, untrimmed indexes, and a torn write at the end.
        let mut bytes = fs::read(&seg).unwrap();
        let good = bytes.len();
        bytes.extend_from_slice(&batch_bytes(&[b"torn"], 1, None)[..30]);
        fs::write(&seg, bytes).unwrap();

        let lm = start(&dirs);
        let log = lm.get_log(&tp).unwrap();
        assert_eq!(log.log_end_offset(), 6);
        assert_eq!(log.recovery_point(), 4);
        assert_eq!(fs::metadata(&seg).unwrap().len(), good as u64);
        assert!(
            log.append_as_leader(batch_bytes(&[b"value"], 5, Some((9, 0, 5))), 0, 0)
                .unwrap()
                .duplicate
        );
        assert_eq!(
            log.append_as_leader(batch_bytes(&[b"value"], 6, Some((9, 0, 6))), 0, 0)
                .unwrap()
                .first_offset,
            6
        );
    }

    #[test]
    fn delete_log_renames_at_once_and_removes_after_the_delay() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("d")];
        let lm = start(&dirs);
        let tp = TopicPartition::new("gone", 0);
        let log = lm.get_or_create_log(&tp, Uuid::new_v4(), config()).unwrap();
        fill(&log, 0, 2);
        let bytes = snapshot_tree(log.dir());
        drop(log);
        lm.delete_log(&tp).unwrap();
        assert!(lm.get_log(&tp).is_none());
        assert!(!dirs[0].join("gone-0").exists(), "renamed at once");
        let doomed = dirs_ending(&dirs[0], "-delete");
        assert_eq!(doomed.len(), 1);
        let name = doomed[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(
            name.starts_with("gone-0.") && name.len() == "gone-0.".len() + 32 + 7,
            "{name}"
        );
        assert_eq!(
            snapshot_tree(&doomed[0]),
            bytes,
            "kept whole until the delay"
        );
        assert_eq!(lm.remove_due_deletions(Instant::now()), 0, "not due yet");
        assert!(doomed[0].exists());
        let later = Instant::now() + Duration::from_millis(60_001);
        assert_eq!(lm.remove_due_deletions(later), 1);
        assert!(!doomed[0].exists());
        assert!(lm.pending_deletions().is_empty());
        // Deleting what is not hosted touches nothing.
        lm.delete_log(&TopicPartition::new("never", 0)).unwrap();
    }

    /// A job that took the log before the topic was deleted (a retention check that rolls
    /// it, a flush, a produce) fails on the directory's old path; the log dir stays
    /// online and its other logs keep serving. Before, such a failure took the only log
    /// dir offline and halted the broker.
    #[test]
    fn jobs_on_a_deleted_log_leave_its_dir_online() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("d")];
        let lm = start(&dirs);
        let (gone, kept) = (
            TopicPartition::new("gone", 0),
            TopicPartition::new("kept", 0),
        );
        let held = lm
            .get_or_create_log(&gone, Uuid::new_v4(), config())
            .unwrap();
        let other = lm
            .get_or_create_log(&kept, Uuid::new_v4(), config())
            .unwrap();
        fill(&held, 0, 2);
        lm.delete_log(&gone).unwrap();
        let far = crate::log::now_ms() + 10 * 365 * 24 * 3_600_000;
        assert!(
            held.roll_if_idle(far).is_err(),
            "rolls in a directory that is gone"
        );
        let _ = held.flush();
        let _ = held.append_as_leader(batch_bytes(&[b"late"], 2, Some((9, 0, 2))), 0, 0);
        assert!(!held.is_offline());
        assert!(!lm.all_dirs_offline());
        fill(&other, 0, 2);
        other.flush().unwrap();
        assert_eq!(other.log_end_offset(), 2);
    }

    #[test]
    fn checkpoints_and_log_creation_take_their_locks_in_one_order() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("d")];
        let lm = Arc::new(start(&dirs));
        lm.get_or_create_log(&TopicPartition::new("a", 0), Uuid::new_v4(), config())
            .unwrap();
        // A high-watermark checkpoint holds the checkpoint lock (as this test does) while
        // a recovery-point checkpoint and a log creation start.
        let writing = lm.dirs[0].checkpoints.lock();
        let checkpoint = {
            let lm = lm.clone();
            std::thread::spawn(move || lm.checkpoint_recovery_points())
        };
        std::thread::sleep(Duration::from_millis(200));
        let create = {
            let lm = lm.clone();
            std::thread::spawn(move || {
                lm.get_or_create_log(&TopicPartition::new("b", 0), Uuid::new_v4(), config())
                    .map(|_| ())
            })
        };
        std::thread::sleep(Duration::from_millis(200));
        // The holder of the checkpoint lock must still get the logs' read lock.
        let read = lm
            .logs
            .try_read_for(Duration::from_secs(5))
            .map(|g| g.len());
        drop(writing);
        assert!(
            read.is_some(),
            "the checkpoint writer waited on `logs`: deadlock"
        );
        checkpoint.join().unwrap().unwrap();
        create.join().unwrap().unwrap();
    }

    #[test]
    fn leftover_delete_dirs_wait_for_the_delay_after_a_restart() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("d")];
        let leftover = dirs[0].join(format!("gone-0.{}-delete", Uuid::new_v4().simple()));
        fs::create_dir_all(&leftover).unwrap();
        fs::write(leftover.join("00000000000000000000.log"), b"data").unwrap();
        fs::create_dir_all(dirs[0].join("__cluster_metadata-0")).unwrap();
        fs::create_dir_all(dirs[0].join("not_a_partition")).unwrap();
        let lm = start(&dirs);
        assert!(leftover.exists(), "a restart does not shorten the delay");
        assert!(lm.all_logs().is_empty(), "never loaded, never served");
        assert_eq!(lm.pending_deletions(), vec![leftover.clone()]);
        assert_eq!(
            lm.remove_due_deletions(Instant::now() + Duration::from_secs(61)),
            1
        );
        assert!(!leftover.exists());
        assert!(dirs[0].join("not_a_partition").exists());
        assert!(dirs[0].join("__cluster_metadata-0").exists());
    }

    #[test]
    fn strays_are_set_aside_whole_and_never_deleted() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("d")];
        let known_id = Uuid::new_v4();
        let lm = start(&dirs);
        for (tp, id) in [
            (TopicPartition::new("known", 0), known_id),
            (TopicPartition::new("unknown", 3), Uuid::new_v4()),
            (TopicPartition::new("known", 1), Uuid::new_v4()),
        ] {
            let log = lm.get_or_create_log(&tp, id, config()).unwrap();
            fill(&log, 0, 3);
        }
        lm.shutdown().unwrap();
        drop(lm);
        // A torn tail in a stray: recovery would cut it, so a stray must never be opened.
        let seg = dirs[0].join("unknown-3/00000000000000000000.log");
        let mut torn = fs::read(&seg).unwrap();
        torn.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 9, 0, 0]);
        fs::write(&seg, &torn).unwrap();
        let unknown = snapshot_tree(&dirs[0].join("unknown-3"));
        let recreated = snapshot_tree(&dirs[0].join("known-1"));

        // Metadata knows known-0 with its id; known-1 has another topic id (the topic was
        // deleted and created again while this broker was away); unknown-3 not at all.
        let assigned = move |tp: &TopicPartition, id: Option<Uuid>| {
            tp.topic == "known" && tp.partition <= 1 && id.is_none_or(|id| id == known_id)
        };
        for _ in 0..3 {
            let lm = start_knowing(&dirs, assigned);
            assert_eq!(lm.all_logs().len(), 1);
            assert!(lm.get_log(&TopicPartition::new("known", 0)).is_some());
            let strays = dirs_ending(&dirs[0], "-stray");
            assert_eq!(strays.len(), 2, "{strays:?}");
            let of = |prefix: &str| {
                strays
                    .iter()
                    .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
                    .unwrap()
                    .clone()
            };
            assert_eq!(snapshot_tree(&of("unknown-3.")), unknown, "every byte kept");
            assert_eq!(snapshot_tree(&of("known-1.")), recreated);
            let hour = Instant::now() + Duration::from_secs(3600);
            assert_eq!(lm.remove_due_deletions(hour), 0);
            lm.shutdown().unwrap();
        }
    }

    #[test]
    fn the_shutdown_marker_carries_the_broker_epoch() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("d")];
        let lm = start(&dirs);
        lm.set_broker_epoch(13);
        lm.shutdown().unwrap();
        assert_eq!(
            fs::read_to_string(dirs[0].join(CLEAN_SHUTDOWN_FILE)).unwrap(),
            r#"{"version":0,"brokerEpoch":13}"#
        );
    }

    #[test]
    fn a_failed_fsync_takes_only_its_dir_offline() {
        use crate::log::faults::{self, Fault};
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("d1"), root.path().join("d2")];
        let lm = start(&dirs);
        let mut failures = lm.take_dir_failures().unwrap();
        let id = Uuid::new_v4();
        let (tp_a, tp_b) = (TopicPartition::new("a", 0), TopicPartition::new("a", 1));
        let a = lm.get_or_create_log(&tp_a, id, config()).unwrap();
        let b = lm.get_or_create_log(&tp_b, id, config()).unwrap();
        let bad_dir = a.dir().parent().unwrap().to_path_buf();
        fill(&a, 0, 2);
        a.flush().unwrap();
        lm.checkpoint_recovery_points().unwrap();
        fill(&a, 2, 2);
        fill(&b, 0, 2);

        faults::arm(&bad_dir, Fault::Fsync, libc::EIO, Some(1));
        assert_eq!(a.flush().unwrap_err().error_code(), 56);
        assert_eq!(failures.try_recv().unwrap(), bad_dir);
        assert!(!lm.all_dirs_offline());
        let states = lm.log_dirs();
        let bad = states.iter().find(|d| d.path == bad_dir).unwrap();
        assert!(bad
            .offline_cause
            .as_deref()
            .unwrap()
            .contains("Input/output error"));
        assert!(states.iter().any(|d| d.offline_cause.is_none()));

        // The healthy dir carries on and takes every new log; the offline one is frozen.
        b.flush().unwrap();
        let c = lm
            .get_or_create_log(&TopicPartition::new("a", 2), id, config())
            .unwrap();
        assert_ne!(c.dir().parent().unwrap(), bad_dir);
        assert!(a
            .append_as_leader(batch_bytes(&[b"v"], 0, None), 0, 0)
            .is_err());
        lm.checkpoint_recovery_points().unwrap();
        assert_eq!(
            fs::read_to_string(bad_dir.join(RECOVERY_POINT_CHECKPOINT)).unwrap(),
            "0\n1\na 0 2\n",
            "the offline dir's recovery point stays before the failed fsync"
        );
        assert!(lm.shutdown().is_ok());
        assert!(!bad_dir.join(CLEAN_SHUTDOWN_FILE).exists());
        assert!(b.dir().parent().unwrap().join(CLEAN_SHUTDOWN_FILE).exists());
        drop((a, b, c, lm));

        // The next start recovers the offline dir from its recovery point.
        let lm = start(&dirs);
        let a = lm.get_log(&tp_a).unwrap();
        assert_eq!((a.recovery_point(), a.log_end_offset()), (2, 4));
        assert!(lm.log_dirs().iter().all(|d| d.offline_cause.is_none()));
    }

    #[test]
    fn no_new_log_without_an_online_dir() {
        use crate::log::faults::{self, Fault};
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("d")];
        let lm = start(&dirs);
        let a = lm
            .get_or_create_log(&TopicPartition::new("a", 0), Uuid::new_v4(), config())
            .unwrap();
        fill(&a, 0, 1);
        faults::arm(&dirs[0], Fault::Fsync, libc::EIO, Some(1));
        assert!(a.flush().is_err());
        assert!(lm.all_dirs_offline());
        let Err(err) = lm.get_or_create_log(&TopicPartition::new("b", 0), Uuid::new_v4(), config())
        else {
            panic!("created a log with every dir offline");
        };
        assert_eq!(err.error_code(), 56, "{err}");
    }

    #[test]
    fn delete_dir_names_fit() {
        let long = TopicPartition::new("x".repeat(249), 12);
        let name = suffixed_dir_name(&long, DELETE_SUFFIX);
        assert!(name.len() <= 255 && name.ends_with("-delete"), "{name}");
        let stray = suffixed_dir_name(&TopicPartition::new("t", 0), STRAY_SUFFIX);
        assert!(
            stray.starts_with("t-0.") && stray.ends_with("-stray"),
            "{stray}"
        );
    }
}
