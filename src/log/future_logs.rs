//! Future logs: a replica's copy in another of the broker's log dirs, built while the
//! replica keeps serving, that takes the current log's place once complete
//! (AlterReplicaLogDirs, Kafka's `LogManager` future logs).
//!
//! On disk a future log is `<target dir>/<topic>-<partition>.<uuid>-future`, a complete
//! partition directory in Kafka's format. Its copying (`replica::log_dir_move`) appends the
//! current log's batches as a follower does. The switch, with the partition's appends held
//! off, goes in an order where a crash at any step leaves a complete copy that the next
//! start serves:
//!
//! 1. the future log is flushed and closed (segments, indexes, producer snapshot, its
//!    directory), so it holds every offset the current one does, durably;
//! 2. it is renamed `<target dir>/<topic>-<partition>` and the target dir synced: from here
//!    both dirs hold the partition, the new copy complete and durable. A restart that finds
//!    a partition in two dirs serves the longer copy (the new one, unless the old one is as
//!    long) and sets the other aside as a stray, kept whole;
//! 3. the new copy is opened and takes the current log's place in the table (and the
//!    partition's, see `Partition::switch_log`);
//! 4. the old directory is renamed `-delete` and removed after `file.delete.delay.ms`.
//!
//! A `-future` directory found at startup is a copy that never completed: the current log
//! is whole, so the copy is renamed `-delete` and removed after the delay (and the move is
//! not resumed; it can be asked for again).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::checkpoint::sync_dir;
use super::log_manager::{absolute_path, suffixed_dir_name, Hosted, DELETE_SUFFIX, FUTURE_SUFFIX};
use super::partition_dirs::{child_dir, sibling_dir};
use super::{Log, LogConfig, LogError, LogManager, TopicPartition};

impl LogManager {
    /// The index (in `log.dirs` order) of the log dir named `path`, compared as absolute
    /// paths as Kafka compares them.
    pub fn log_dir_index(&self, path: &Path) -> Option<usize> {
        let wanted = absolute_path(path);
        self.dirs
            .iter()
            .position(|d| absolute_path(&d.path) == wanted)
    }

    /// Whether log dir `index` is offline.
    pub fn is_dir_offline(&self, index: usize) -> bool {
        self.dirs.get(index).is_none_or(|d| d.health.is_offline())
    }

    /// The log dir holding `tp`'s current log.
    pub fn dir_of(&self, tp: &TopicPartition) -> Option<usize> {
        self.logs.read().get(tp).map(|h| h.dir_index)
    }

    /// The log dir holding `tp`'s future log, if a move is under way.
    pub fn future_dir_of(&self, tp: &TopicPartition) -> Option<usize> {
        self.futures.read().get(tp).map(|h| h.dir_index)
    }

    pub fn future_log(&self, tp: &TopicPartition) -> Option<Arc<Log>> {
        self.futures.read().get(tp).map(|h| h.log.clone())
    }

    /// Creates `tp`'s future log, empty, in log dir `dir_index` with the current log's
    /// config and topic id. An existing future log is an error (abandon it first).
    pub fn create_future_log(
        &self,
        tp: &TopicPartition,
        dir_index: usize,
        config: LogConfig,
    ) -> Result<Arc<Log>, LogError> {
        let topic_id = self.topic_id_of(tp);
        let mut futures = self.futures.write();
        if futures.contains_key(tp) {
            return Err(LogError::InvalidRecord(format!(
                "{tp} already has a future log"
            )));
        }
        let dir = self
            .dirs
            .get(dir_index)
            .ok_or_else(|| LogError::LogDirOffline {
                dir: PathBuf::new(),
                cause: format!("no log dir {dir_index}"),
            })?;
        if dir.health.is_offline() {
            return Err(LogError::LogDirOffline {
                dir: dir.path.clone(),
                cause: dir.health.cause().unwrap_or_default(),
            });
        }
        super::fd_limit::check_headroom()?;
        let path = child_dir(&dir.path, &suffixed_dir_name(tp, FUTURE_SUFFIX))?;
        let created = super::new_logs::make_log(&path, tp.clone(), topic_id, config);
        let log = created
            .map_err(|e| {
                self.on_dir_failure(dir_index, &format!("creating the future log of {tp}"), e)
            })?
            .in_log_dir(dir.health.clone())
            .with_delayed_deletes(self.delayed_deletes.clone());
        let log = Arc::new(log);
        tracing::info!(partition = %tp, dir = %path.display(), "created a future log: the replica is moving to this log dir");
        futures.insert(
            tp.clone(),
            Hosted {
                log: log.clone(),
                dir_index,
                topic_id,
            },
        );
        Ok(log)
    }

    /// Drops `tp`'s future log, if any: its directory is renamed `-delete` and removed
    /// after `file.delete.delay.ms` (the current log holds everything it held).
    pub fn abandon_future_log(&self, tp: &TopicPartition) {
        let Some(hosted) = self.futures.write().remove(tp) else {
            return;
        };
        if let Err(e) = self.rename_for_deletion(tp, hosted.log.dir()) {
            tracing::error!(partition = %tp, dir = %hosted.log.dir().display(), error = %e, "cannot rename an abandoned future log for deletion");
            return;
        }
        tracing::info!(partition = %tp, "abandoned the future log");
    }

    /// The switch (steps 1 to 4 above). The caller holds off every append to `tp` and has
    /// checked that the future log ends where the current one does. Returns the new current
    /// log. On an error before the rename the move is abandoned and the current log stays.
    pub fn replace_current_with_future(&self, tp: &TopicPartition) -> Result<Arc<Log>, LogError> {
        let _switching = self.moving.lock();
        let Some(future) = self
            .futures
            .read()
            .get(tp)
            .map(|h| (h.log.clone(), h.dir_index))
        else {
            return Err(LogError::InvalidRecord(format!("{tp} has no future log")));
        };
        let (future, dir_index) = future;
        let Some(current) = self.get_log(tp) else {
            self.abandon_future_log(tp);
            return Err(LogError::InvalidRecord(format!("{tp} has no current log")));
        };
        let parent = self.dirs[dir_index].path.clone();
        let dest = child_dir(&parent, &tp.to_string())?;
        let moved = future
            .close()
            .and_then(|()| Ok(fs::rename(future.dir(), &dest)?))
            .and_then(|()| sync_dir(&parent));
        if let Err(e) = moved {
            let e = self.on_dir_failure(dir_index, &format!("completing the move of {tp}"), e);
            if !dest.exists() {
                self.abandon_future_log(tp);
            }
            return Err(e);
        }
        let (end, start) = (future.log_end_offset(), future.log_start_offset());
        let reopened = Log::open(&dest, tp.clone(), current.config(), end, start, true);
        let log = match reopened {
            Ok(log) => Arc::new(
                log.in_log_dir(self.dirs[dir_index].health.clone())
                    .with_delayed_deletes(self.delayed_deletes.clone()),
            ),
            Err(e) => {
                return Err(self.on_dir_failure(
                    dir_index,
                    &format!("opening the moved log of {tp}"),
                    e,
                ))
            }
        };
        if let Some(offset) = current.cleaner_checkpoint() {
            log.set_cleaner_checkpoint(offset);
        }
        {
            let mut logs = self.logs.write();
            let topic_id = logs.get(tp).and_then(|h| h.topic_id);
            logs.insert(
                tp.clone(),
                Hosted {
                    log: log.clone(),
                    dir_index,
                    topic_id,
                },
            );
            self.futures.write().remove(tp);
        }
        current.retire();
        if let Err(e) = self.rename_for_deletion(tp, current.dir()) {
            // The new copy serves; the old one stays under its name and the next start
            // sets it aside (see step 2).
            tracing::error!(partition = %tp, dir = %current.dir().display(), error = %e, "cannot rename the moved replica's old log for deletion");
        }
        tracing::info!(partition = %tp, dir = %dest.display(), log_end_offset = end, "replica moved to another log dir");
        Ok(log)
    }

    /// Renames `dir` (a partition directory of `tp`) to Kafka's `-delete` name, durably,
    /// and queues its removal after `file.delete.delay.ms`.
    fn rename_for_deletion(&self, tp: &TopicPartition, dir: &Path) -> Result<(), LogError> {
        let (parent, doomed) = sibling_dir(dir, &suffixed_dir_name(tp, DELETE_SUFFIX))?;
        fs::rename(dir, &doomed)?;
        sync_dir(&parent)?;
        self.delayed_deletes
            .schedule([doomed], self.file_delete_delay);
        Ok(())
    }

    /// Startup: the `-future` directories found, each a copy that never completed. One
    /// whose partition is served from another directory is renamed `-delete`; any other is
    /// left as it is (never served, never deleted).
    pub(super) fn drop_incomplete_futures(&self, found: Vec<PathBuf>) -> Result<(), LogError> {
        for dir in found {
            let tp = dir
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_suffix(FUTURE_SUFFIX))
                .and_then(|n| n.rsplit_once('.'))
                .and_then(|(name, _)| TopicPartition::from_dir_name(name));
            match tp {
                Some(tp) if self.logs.read().contains_key(&tp) => {
                    tracing::info!(partition = %tp, dir = %dir.display(), "a log dir move did not complete before the restart: its copy is removed after the delay, the replica stays where it was");
                    self.rename_for_deletion(&tp, &dir)?;
                }
                _ => {
                    tracing::warn!(dir = %dir.display(), "future log directory of a partition not hosted here: kept, not served");
                }
            }
        }
        Ok(())
    }

    /// Every future log with how far it is behind its current log (DescribeLogDirs).
    pub(super) fn future_lags(&self) -> Vec<(TopicPartition, usize, Arc<Log>, i64)> {
        let futures: Vec<(TopicPartition, usize, Arc<Log>)> = self
            .futures
            .read()
            .iter()
            .map(|(tp, h)| (tp.clone(), h.dir_index, h.log.clone()))
            .collect();
        futures
            .into_iter()
            .map(|(tp, dir, log)| {
                let current_end = self.get_log(&tp).map_or(0, |l| l.log_end_offset());
                let lag = (current_end - log.log_end_offset()).max(0);
                (tp, dir, log, lag)
            })
            .collect()
    }
}

/// Which of two copies of one partition found at startup to serve: the one that goes
/// further (a move's new copy was flushed before the switch; the old one may have lost an
/// unflushed tail), the first found when they end alike.
pub(super) fn keep_first(first: &Log, second: &Log) -> bool {
    first.log_end_offset() >= second.log_end_offset()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::test_util::batch_bytes;
    use crate::log::DirLock;
    use uuid::Uuid;

    fn config() -> LogConfig {
        LogConfig {
            producer_id_expiration_ms: i64::MAX,
            ..LogConfig::default()
        }
    }

    fn start(dirs: &[PathBuf]) -> LogManager {
        let locked = dirs
            .iter()
            .map(|d| {
                fs::create_dir_all(d).unwrap();
                (d.clone(), DirLock::acquire(d).unwrap())
            })
            .collect();
        LogManager::startup(
            locked,
            |_: &TopicPartition, _: Option<Uuid>| true,
            |_| config(),
            60_000,
        )
        .unwrap()
    }

    fn fill(log: &Log, n: usize) {
        for _ in 0..n {
            log.append_as_leader(batch_bytes(&[b"value"], 0, None), 0, 0)
                .unwrap();
        }
    }

    fn copy_dir(from: &Path, to: &Path) {
        fs::create_dir_all(to).unwrap();
        for entry in fs::read_dir(from).unwrap() {
            let path = entry.unwrap().path();
            fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }

    fn names_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(suffix))
            .collect()
    }

    /// A crash between the switch's two renames leaves the partition in both dirs.
    #[test]
    fn an_interrupted_switch_serves_the_longer_copy_and_keeps_the_other() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("d1"), root.path().join("d2")];
        let tp = TopicPartition::new("t", 0);
        let lm = start(&dirs[..1]);
        fill(
            &lm.get_or_create_log(&tp, Uuid::new_v4(), config()).unwrap(),
            3,
        );
        lm.shutdown().unwrap();
        drop(lm);
        copy_dir(&dirs[0].join("t-0"), &dirs[1].join("t-0"));
        // The new copy went further (the old one lost an unflushed tail).
        let lm = start(&dirs[1..]);
        fill(&lm.get_log(&tp).unwrap(), 2);
        lm.shutdown().unwrap();
        drop(lm);
        let old = fs::read(dirs[0].join("t-0/00000000000000000000.log")).unwrap();

        let lm = start(&dirs);
        let log = lm.get_log(&tp).unwrap();
        assert_eq!(log.log_end_offset(), 5);
        assert!(log.dir().starts_with(&dirs[1]));
        assert!(!dirs[0].join("t-0").exists());
        let strays = names_ending(&dirs[0], "-stray");
        assert_eq!(strays.len(), 1, "the other copy is kept");
        assert_eq!(
            fs::read(strays[0].join("00000000000000000000.log")).unwrap(),
            old
        );
        lm.shutdown().unwrap();
    }

    /// A crash while copying leaves a `-future` directory beside the whole current log.
    #[test]
    fn an_incomplete_copy_is_dropped_at_startup() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("d1"), root.path().join("d2")];
        let tp = TopicPartition::new("t", 0);
        let lm = start(&dirs);
        let log = lm.get_or_create_log(&tp, Uuid::new_v4(), config()).unwrap();
        fill(&log, 4);
        let other = if log.dir().starts_with(&dirs[0]) {
            1
        } else {
            0
        };
        let future = lm.create_future_log(&tp, other, config()).unwrap();
        fill(&future, 1);
        assert_eq!(lm.future_dir_of(&tp), Some(other));
        let described = lm.describe_log_dirs();
        let listed = &described[other].replicas;
        assert_eq!(listed.len(), 1);
        assert!(listed[0].is_future);
        assert_eq!(listed[0].offset_lag, 3);
        drop((log, future));
        lm.shutdown().unwrap();
        drop(lm);
        assert_eq!(names_ending(&dirs[other], "-future").len(), 1);

        let lm = start(&dirs);
        assert_eq!(lm.get_log(&tp).unwrap().log_end_offset(), 4);
        assert!(names_ending(&dirs[other], "-future").is_empty());
        assert_eq!(lm.pending_deletions().len(), 1, "removed after the delay");
        assert!(lm.future_log(&tp).is_none());
    }

    /// The switch: the copy takes the current log's place; the old one goes to `-delete`.
    #[test]
    fn the_switch_moves_the_log_and_renames_the_old_one_for_deletion() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("d1"), root.path().join("d2")];
        let tp = TopicPartition::new("t", 0);
        let lm = start(&dirs);
        let log = lm.get_or_create_log(&tp, Uuid::new_v4(), config()).unwrap();
        fill(&log, 3);
        let (from, to) = match log.dir().starts_with(&dirs[0]) {
            true => (0, 1),
            false => (1, 0),
        };
        let future = lm.create_future_log(&tp, to, config()).unwrap();
        let data = log.read(0, 1 << 20, log.log_end_offset(), true).unwrap();
        future.append_as_follower(data.records).unwrap();
        let moved = lm.replace_current_with_future(&tp).unwrap();
        assert_eq!(moved.log_end_offset(), 3);
        assert_eq!(moved.dir(), dirs[to].join("t-0"));
        assert_eq!(lm.dir_of(&tp), Some(to));
        assert!(lm.future_log(&tp).is_none());
        assert!(!dirs[from].join("t-0").exists());
        assert_eq!(names_ending(&dirs[from], "-delete").len(), 1);
        assert_eq!(lm.topic_id_of(&tp), read_topic_id(&dirs[to].join("t-0")));
        lm.shutdown().unwrap();
        drop((log, future, moved, lm));
        let lm = start(&dirs);
        assert_eq!(lm.get_log(&tp).unwrap().log_end_offset(), 3);
        assert_eq!(lm.dir_of(&tp), Some(to));
    }

    fn read_topic_id(dir: &Path) -> Option<Uuid> {
        crate::log::partition_metadata::read_partition_metadata(dir).unwrap()
    }
}
