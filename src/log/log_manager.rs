//! `LogManager`: every partition log in the broker's `log.dirs`.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use uuid::Uuid;

use super::checkpoint::{
    read_offset_checkpoint, sync_dir, write_atomic, write_offset_checkpoint,
    LOG_START_OFFSET_CHECKPOINT, RECOVERY_POINT_CHECKPOINT,
};
use super::dir_lock::DirLock;
use super::log_dir_health::{is_fd_exhaustion, LogDirHealth};
use super::meta_properties::ensure_meta_properties;
use super::partition_metadata::{read_partition_metadata, write_partition_metadata};
use super::{DelayedDeletes, Log, LogConfig, LogError, TopicPartition};

/// Kafka's `CleanShutdownFileHandler` marker. Present at startup: the directory was shut
/// down cleanly and its logs need no recovery scan. Deleted before logs are loaded, so a
/// crash while loading counts as unclean; written (fsynced JSON
/// `{"version":0,"brokerEpoch":-1}`) as the last step of a clean shutdown.
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
/// KRaft's metadata log: LogManager never loads it.
const METADATA_LOG_DIR: &str = "__cluster_metadata-0";

struct LogDir {
    path: PathBuf,
    health: Arc<LogDirHealth>,
    /// Held while the dir's checkpoint files are written: the periodic jobs and a
    /// DeleteRecords may write them at the same time.
    checkpoints: Mutex<()>,
    _lock: DirLock,
}

struct Hosted {
    log: Arc<Log>,
    dir_index: usize,
    topic_id: Option<Uuid>,
}

/// Owns the log directories, each locked (`.lock`). Layout of each: `meta.properties`, the checkpoint files
/// (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`), the clean-shutdown
/// marker, and one `<topic>-<partition>` directory per hosted partition.
///
/// A dir that fails with an I/O error goes offline (see `LogDirHealth`): its logs stay in
/// the table, refusing every operation, and it is left out of checkpoints, new logs and
/// the clean shutdown, so the next start recovers it. Each dir that goes offline is
/// reported once on the channel from `take_dir_failures`.
pub struct LogManager {
    dirs: Vec<LogDir>,
    logs: RwLock<HashMap<TopicPartition, Hosted>>,
    dir_failures: Mutex<Option<UnboundedReceiver<PathBuf>>>,
    /// Deleted segments and partition directories waiting out `file.delete.delay.ms`.
    delayed_deletes: Arc<DelayedDeletes>,
    /// The broker's `log.segment.delete.delay.ms`, which deleted partitions wait.
    file_delete_delay: Duration,
}

/// One log dir as DescribeLogDirs will report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogDirStatus {
    pub path: PathBuf,
    /// Why the dir went offline; `None` while it is online.
    pub offline_cause: Option<String>,
}

impl LogManager {
    /// Opens every log dir: creates it if missing, writes or validates `meta.properties`,
    /// reads the recovery-point and log-start checkpoints, notes and deletes the
    /// clean-shutdown marker, removes `-delete` directories, and loads every partition
    /// directory (recovering after its recovery point if the shutdown was unclean).
    pub fn startup(
        log_dirs: &[PathBuf],
        node_id: i32,
        cluster_id: &str,
        default_config: LogConfig,
        topic_configs: impl Fn(&str) -> LogConfig,
    ) -> Result<LogManager, LogError> {
        // topic_configs already overlays the broker defaults.
        let file_delete_delay = Duration::from_millis(default_config.file_delete_delay_ms);
        let delayed_deletes = Arc::new(DelayedDeletes::new());
        let mut dirs = Vec::new();
        let mut logs = HashMap::new();
        let mut directory_ids = Vec::new();
        let (failures_tx, failures_rx) = unbounded_channel();
        for (dir_index, path) in log_dirs.iter().enumerate() {
            let health = Arc::new(LogDirHealth::new(path, Some(failures_tx.clone())));
            fs::create_dir_all(path)?;
            let lock = DirLock::acquire(path)?;
            let id = ensure_meta_properties(path, node_id, cluster_id)?;
            if directory_ids.contains(&id) {
                return Err(LogError::corrupt_file(
                    path,
                    "directory.id duplicates another log dir's",
                ));
            }
            directory_ids.push(id);
            let clean = take_clean_shutdown_marker(path)?;
            let recovery_points = read_checkpoint_or_empty(&path.join(RECOVERY_POINT_CHECKPOINT));
            let log_starts = read_checkpoint_or_empty(&path.join(LOG_START_OFFSET_CHECKPOINT));
            for entry in fs::read_dir(path)? {
                let entry = entry?;
                if !entry.file_type()?.is_dir() {
                    continue;
                }
                let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                let Some(tp) =
                    partition_dir(&entry.path(), &name, &delayed_deletes, file_delete_delay)?
                else {
                    continue;
                };
                if logs.contains_key(&tp) {
                    return Err(LogError::corrupt_file(
                        &entry.path(),
                        format!("{tp} is present in more than one log dir"),
                    ));
                }
                let config = topic_configs(&tp.topic);
                let rp = recovery_points.get(&tp).copied().unwrap_or(0);
                let log_start = log_starts.get(&tp).copied().unwrap_or(0);
                let log = Log::open(&entry.path(), tp.clone(), config, rp, log_start, clean)?
                    .in_log_dir(health.clone())
                    .with_delayed_deletes(delayed_deletes.clone());
                let topic_id = read_partition_metadata(&entry.path()).unwrap_or_else(|e| {
                    tracing::warn!(partition = %tp, error = %e, "unreadable partition.metadata");
                    None
                });
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
                path: path.clone(),
                health,
                checkpoints: Mutex::new(()),
                _lock: lock,
            });
        }
        Ok(LogManager {
            dirs,
            logs: RwLock::new(logs),
            dir_failures: Mutex::new(Some(failures_rx)),
            delayed_deletes,
            file_delete_delay,
        })
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

    /// True when no log dir is left online (Kafka then halts the broker).
    pub fn all_dirs_offline(&self) -> bool {
        self.dirs.iter().all(|d| d.health.is_offline())
    }

    /// Takes `dir` offline after `error` in `what`, unless the error is fd exhaustion.
    fn on_dir_failure(&self, dir_index: usize, what: &str, error: LogError) -> LogError {
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

    pub fn all_logs(&self) -> Vec<Arc<Log>> {
        self.logs.read().values().map(|h| h.log.clone()).collect()
    }

    pub fn topic_id_of(&self, tp: &TopicPartition) -> Option<Uuid> {
        self.logs.read().get(tp).and_then(|h| h.topic_id)
    }

    /// The log of `tp`, created in the log dir hosting the fewest partitions if absent.
    /// Writes `partition.metadata`; an existing log with a different topic id is an error.
    pub fn get_or_create_log(
        &self,
        tp: &TopicPartition,
        topic_id: Uuid,
        config: LogConfig,
    ) -> Result<Arc<Log>, LogError> {
        let mut logs = self.logs.write();
        if let Some(hosted) = logs.get_mut(tp) {
            match hosted.topic_id {
                Some(found) if found != topic_id => {
                    return Err(LogError::InconsistentTopicId {
                        expected: topic_id,
                        found,
                    })
                }
                Some(_) => {}
                None => {
                    write_partition_metadata(hosted.log.dir(), topic_id)?;
                    hosted.topic_id = Some(topic_id);
                }
            }
            return Ok(hosted.log.clone());
        }
        let dir_index = (0..self.dirs.len())
            .filter(|&i| !self.dirs[i].health.is_offline())
            .min_by_key(|&i| logs.values().filter(|h| h.dir_index == i).count())
            .ok_or_else(|| LogError::LogDirOffline {
                dir: self
                    .dirs
                    .first()
                    .map(|d| d.path.clone())
                    .unwrap_or_default(),
                cause: "no log dir is online".into(),
            })?;
        super::fd_limit::check_headroom()?;
        let parent = &self.dirs[dir_index].path;
        let dir = parent.join(tp.to_string());
        let created = Log::open(&dir, tp.clone(), config, 0, 0, true).and_then(|log| {
            write_partition_metadata(&dir, topic_id)?;
            sync_dir(parent)?;
            Ok(log)
        });
        let log = created
            .map_err(|e| self.on_dir_failure(dir_index, &format!("creating the log of {tp}"), e))?
            .in_log_dir(self.dirs[dir_index].health.clone())
            .with_delayed_deletes(self.delayed_deletes.clone());
        let log = Arc::new(log);
        logs.insert(
            tp.clone(),
            Hosted {
                log: log.clone(),
                dir_index,
                topic_id: Some(topic_id),
            },
        );
        Ok(log)
    }

    /// Whether new logs may be created now: an error while the file descriptors left are
    /// within the reserve (see `fd_limit`). Checked before metadata records a new
    /// partition, and again when its log is created.
    pub fn check_capacity(&self) -> Result<(), LogError> {
        super::fd_limit::check_headroom()
    }

    /// Removes `tp`'s log: renames its directory to `topic-P.<uuid hex>-delete` at once (so
    /// a restart never brings it back) and removes it `log.segment.delete.delay.ms` later,
    /// with the deleted segments (`DelayedDeletes`).
    pub fn delete_log(&self, tp: &TopicPartition) -> Result<(), LogError> {
        let Some(hosted) = self.logs.write().remove(tp) else {
            return Ok(());
        };
        let dir = hosted.log.dir().to_path_buf();
        let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
        let doomed = parent.join(delete_dir_name(tp));
        fs::rename(&dir, &doomed)?;
        sync_dir(&parent)?;
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
        let logs = self.logs.read();
        let dir = &self.dirs[i];
        let _writing = dir.checkpoints.lock();
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

    /// Clean shutdown: flush and close every log (trimming indexes, writing producer
    /// snapshots), write the checkpoints, then the clean-shutdown marker. A log that fails
    /// to close leaves its directory without the marker, so the next start recovers it.
    ///
    /// Offline dirs are left exactly as they are: no flush, no checkpoint, no marker.
    pub fn shutdown(&self) -> Result<(), LogError> {
        let mut failed_dirs = Vec::new();
        let mut first_error = None;
        for h in self.logs.read().values() {
            if self.dirs[h.dir_index].health.is_offline() {
                continue;
            }
            if let Err(e) = h.log.close() {
                tracing::error!(partition = %h.log.topic_partition(), error = %e, "failed to close log");
                failed_dirs.push(h.dir_index);
                first_error.get_or_insert(e);
            }
        }
        for (i, dir) in self.dirs.iter().enumerate() {
            if dir.health.is_offline() || failed_dirs.contains(&i) {
                continue;
            }
            let closed = self.checkpoint_dir(i).and_then(|()| {
                write_atomic(
                    &dir.path.join(CLEAN_SHUTDOWN_FILE),
                    br#"{"version":0,"brokerEpoch":-1}"#,
                )
            });
            if let Err(e) = closed {
                first_error.get_or_insert(self.on_dir_failure(i, "clean shutdown", e));
            }
        }
        first_error.map_or(Ok(()), Err)
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
/// Leftover `-delete` directories (deleted before a restart) are scheduled for removal.
fn partition_dir(
    path: &Path,
    name: &str,
    deletes: &DelayedDeletes,
    delay: Duration,
) -> Result<Option<TopicPartition>, LogError> {
    if name.ends_with("-delete") {
        tracing::info!(dir = %path.display(), "partition directory pending deletion; removing it after the delay");
        deletes.schedule([path.to_path_buf()], delay);
        return Ok(None);
    }
    if name.ends_with("-future") || name.ends_with("-stray") || name == METADATA_LOG_DIR {
        return Ok(None);
    }
    let tp = TopicPartition::from_dir_name(name);
    if tp.is_none() {
        tracing::warn!(dir = %path.display(), "ignoring directory that is not a partition");
    }
    Ok(tp)
}

/// Kafka's `LocalLog.logDeleteDirName`: `topic-P.<32 hex>-delete`, the topic shortened so
/// the name fits in 255 bytes.
fn delete_dir_name(tp: &TopicPartition) -> String {
    let suffix = format!("-{}.{}-delete", tp.partition, Uuid::new_v4().simple());
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

    fn start(dirs: &[PathBuf]) -> LogManager {
        LogManager::startup(dirs, 1, "cluster-a", config(), |_| config()).unwrap()
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
            assert!(d.join("meta.properties").exists());
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
        lm.delete_log(&tp).unwrap();
        assert!(lm.get_log(&tp).is_none());
        assert!(!dirs[0].join("gone-0").exists());
        let pending = lm.pending_deletions();
        assert_eq!(pending.len(), 1);
        let name = pending[0].file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with("gone-0.") && name.ends_with("-delete"),
            "{name}"
        );
        assert!(pending[0].join("00000000000000000000.log").exists());
        assert_eq!(lm.remove_due_deletions(Instant::now()), 0, "not due yet");
        let due = Instant::now() + Duration::from_millis(config().file_delete_delay_ms + 1);
        assert_eq!(lm.remove_due_deletions(due), 1);
        assert!(!pending[0].exists());
        assert!(lm.pending_deletions().is_empty());
    }

    #[test]
    fn leftover_delete_dirs_wait_for_the_delay_after_a_restart() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("d")];
        drop(start(&dirs));
        let leftover = dirs[0].join(format!("gone-0.{}-delete", Uuid::new_v4().simple()));
        fs::create_dir_all(&leftover).unwrap();
        fs::create_dir_all(dirs[0].join("__cluster_metadata-0")).unwrap();
        fs::create_dir_all(dirs[0].join("not_a_partition")).unwrap();
        let lm = start(&dirs);
        assert!(lm.all_logs().is_empty());
        assert_eq!(lm.pending_deletions(), vec![leftover.clone()]);
        assert!(leftover.exists());
        lm.remove_due_deletions(Instant::now() + Duration::from_secs(61));
        assert!(!leftover.exists());
    }

    #[test]
    fn rejects_another_clusters_dir() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("d")];
        drop(start(&dirs));
        assert!(LogManager::startup(&dirs, 1, "cluster-b", config(), |_| config()).is_err());
        assert!(LogManager::startup(&dirs, 2, "cluster-a", config(), |_| config()).is_err());
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
        let name = delete_dir_name(&long);
        assert!(name.len() <= 255 && name.ends_with("-delete"), "{name}");
        assert!(delete_dir_name(&TopicPartition::new("t", 0)).starts_with("t-0."));
    }
}
