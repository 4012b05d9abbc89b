//! New logs: the partition directories a topic creation (or a reassignment to this broker)
//! makes, several at once.
//!
//! A new partition directory holds what Kafka's holds: `00000000000000000000.log`,
//! `.index` and `.timeindex`, an empty `leader-epoch-checkpoint` and `partition.metadata`.
//! Made in three steps, so that a thousand partitions cost little more than their files:
//!
//! 1. under the table's lock, the logs already hosted are found and each new one is given
//!    a log dir: the one the metadata names for it when that is an online dir of this
//!    broker (Kafka's `targetLogDirectoryId`: a KRaft controller names it when the broker
//!    reported it, or when it placed the replica on a dir the broker registered), otherwise
//!    the one hosting the fewest logs. Kafka's broker instead skips a log whose named dir
//!    is not online while it has offline dirs (`createLogInAssignedDirectoryId`): a dir
//!    that failed to load at startup is offline there and its logs unknown, so a log made
//!    elsewhere could shadow one it holds. skua needs no such rule: it starts only when
//!    every log dir loads, and a dir that fails later keeps its logs in the table (each
//!    refusing every operation), so a partition not in the table is in no dir of this
//!    broker and a new log for it shadows nothing;
//! 2. with no lock held that readers wait on, the directories are made on up to
//!    `num.recovery.threads.per.data.dir` threads per online dir. A directory made just
//!    now is empty, so nothing in it is listed, probed or measured, and each file is
//!    written straight to its name. Nothing is synced: the metadata record that names the
//!    partition already is, and the log's first flush syncs the directory and
//!    `partition.metadata` (`Log::sync_creation`). A crash before then leaves the
//!    directory absent, or present with some of its files absent, empty or torn, each of
//!    which loads as an empty log; a missing or unreadable `partition.metadata` is written
//!    again when the metadata assigns the partition (`get_or_create_logs`);
//! 3. under the table's lock again, the new logs are hosted. A partition is served only
//!    once its log is in the table (`ReplicaManager::apply_topic` adds it afterwards).
//!
//! Creators take `LogManager::creating` for all three steps, so no two make the same
//! directory; readers of the table are held up only by steps 1 and 3.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use uuid::Uuid;

use super::log_manager::Hosted;
use super::partition_dirs::{log_dir_takes_new_dirs, new_partition_dir};
use super::partition_metadata::{write_new_partition_metadata, write_partition_metadata};
use super::{Log, LogConfig, LogError, LogManager, TopicPartition};

/// New logs per creating thread: fewer than this many are made on the calling thread
/// alone, as a thread costs more to start than a few logs cost to make.
const LOGS_PER_THREAD: usize = 16;

/// A log to make: where its result goes, its dir and its partition.
struct ToCreate {
    slot: usize,
    dir_index: usize,
    dir: PathBuf,
    tp: TopicPartition,
}

impl LogManager {
    /// The log of `tp`, created in the log dir hosting the fewest partitions if absent.
    /// Writes `partition.metadata`; an existing log with a different topic id is an error.
    pub fn get_or_create_log(
        &self,
        tp: &TopicPartition,
        topic_id: Uuid,
        config: LogConfig,
    ) -> Result<Arc<Log>, LogError> {
        let mut logs = self.get_or_create_logs(std::slice::from_ref(tp), topic_id, &config);
        logs.pop()
            .unwrap_or_else(|| Err(LogError::InvalidRecord(format!("no log for {tp}"))))
    }

    /// The logs of `tps` (distinct partitions of the topic `topic_id`), in `tps`' order:
    /// each hosted one as it is (given the topic id if it had none), each other one
    /// created in the log dir hosting the fewest partitions, several on their own
    /// threads (see the module comment). Each succeeds or fails on its own: an illegal
    /// topic name is refused before any path is made (`partition_dirs`), and an I/O error
    /// creating one fails that log alone unless its log dir is failing, which then goes
    /// offline.
    pub fn get_or_create_logs(
        &self,
        tps: &[TopicPartition],
        topic_id: Uuid,
        config: &LogConfig,
    ) -> Vec<Result<Arc<Log>, LogError>> {
        self.get_or_create_logs_in(tps, &[], topic_id, config)
    }

    /// As [`LogManager::get_or_create_logs`], each new log made in the online log dir
    /// whose `directory.id` is its entry of `targets` (the dir the metadata names for that
    /// partition; `targets` may be shorter than `tps`), or where a new log goes when that
    /// names none of this broker's online dirs.
    pub fn get_or_create_logs_in(
        &self,
        tps: &[TopicPartition],
        targets: &[Option<Uuid>],
        topic_id: Uuid,
        config: &LogConfig,
    ) -> Vec<Result<Arc<Log>, LogError>> {
        let _creating = self.creating.lock();
        let mut results: Vec<Option<Result<Arc<Log>, LogError>>> = Vec::with_capacity(tps.len());
        let Some(to_create) = self.place_new_logs(tps, targets, topic_id, &mut results) else {
            return tps.iter().map(|_| Err(self.no_dir_online())).collect();
        };
        let threads =
            (self.threads * self.dirs.len()).clamp(1, to_create.len() / LOGS_PER_THREAD + 1);
        let made = parallel_map(&to_create, threads, |c| {
            super::fd_limit::check_headroom()?;
            make_log(&c.dir, c.tp.clone(), Some(topic_id), config.clone())
        });
        let made: Vec<Result<Log, LogError>> = to_create
            .iter()
            .zip(made)
            .map(|(c, made)| made.map_err(|e| self.on_creation_failure(c, e)))
            .collect();
        let mut logs = self.logs.write();
        for (c, made) in to_create.into_iter().zip(made) {
            results[c.slot] = Some(made.map(|log| {
                let log = Arc::new(
                    log.in_log_dir(self.dirs[c.dir_index].health.clone())
                        .with_delayed_deletes(self.delayed_deletes.clone()),
                );
                // Kafka's LogManager line: one per log made.
                tracing::info!(partition = %c.tp, dir = %log.dir().display(), "created log");
                logs.insert(
                    c.tp,
                    Hosted {
                        log: log.clone(),
                        dir_index: c.dir_index,
                        topic_id: Some(topic_id),
                    },
                );
                log
            }));
        }
        results.into_iter().flatten().collect()
    }

    /// Step 1: fills `results` with the hosted logs of `tps` (a slot of `None` for each new
    /// one) and returns the new ones, each with the log dir it goes in; `None` when a log
    /// is to be made and no log dir is online.
    fn place_new_logs(
        &self,
        tps: &[TopicPartition],
        targets: &[Option<Uuid>],
        topic_id: Uuid,
        results: &mut Vec<Option<Result<Arc<Log>, LogError>>>,
    ) -> Option<Vec<ToCreate>> {
        let mut logs = self.logs.write();
        let online: Vec<usize> = (0..self.dirs.len())
            .filter(|&i| !self.dirs[i].health.is_offline())
            .collect();
        // Logs per online dir; counting walks every log, so only when there is a choice.
        let mut counts: Vec<(usize, usize)> = online.iter().map(|&i| (i, 0)).collect();
        if counts.len() > 1 {
            for h in logs.values() {
                if let Some(c) = counts.iter_mut().find(|(i, _)| *i == h.dir_index) {
                    c.1 += 1;
                }
            }
        }
        let mut to_create = Vec::new();
        for (slot, tp) in tps.iter().enumerate() {
            if let Some(hosted) = logs.get_mut(tp) {
                results.push(Some(existing(hosted, topic_id)));
                continue;
            }
            let target = targets
                .get(slot)
                .copied()
                .flatten()
                .and_then(|id| self.online_dir_with_id(id));
            let (dir_index, count) = match target {
                Some(i) => counts.iter_mut().find(|(d, _)| *d == i)?,
                None => counts.iter_mut().min_by_key(|(_, n)| *n)?,
            };
            let dir = match new_partition_dir(&self.dirs[*dir_index].path, tp) {
                Ok(dir) => dir,
                Err(e) => {
                    tracing::error!(partition = %tp, error = %e, "no log made for an illegal partition name");
                    results.push(Some(Err(e)));
                    continue;
                }
            };
            *count += 1;
            results.push(None);
            to_create.push(ToCreate {
                slot,
                dir_index: *dir_index,
                dir,
                tp: tp.clone(),
            });
        }
        Some(to_create)
    }

    /// A log that could not be made fails alone while its log dir still takes new
    /// directories (a name the file system refuses, say); otherwise the dir is failing
    /// and goes offline.
    fn on_creation_failure(&self, c: &ToCreate, error: LogError) -> LogError {
        let what = format!("creating the log of {}", c.tp);
        let LogError::KafkaStorage(io) = &error else {
            return error;
        };
        if log_dir_takes_new_dirs(&self.dirs[c.dir_index].path) {
            tracing::error!(partition = %c.tp, dir = %c.dir.display(), error = %io, "{what} failed; the log dir is healthy and stays online");
            return error;
        }
        self.on_dir_failure(c.dir_index, &what, error)
    }

    fn no_dir_online(&self) -> LogError {
        LogError::LogDirOffline {
            dir: self
                .dirs
                .first()
                .map(|d| d.path.clone())
                .unwrap_or_default(),
            cause: "no log dir is online".into(),
        }
    }
}

/// A hosted log asked for again: an error if it belongs to another topic; given the topic
/// id if it has none (its `partition.metadata` was missing or unreadable at startup).
fn existing(hosted: &mut Hosted, topic_id: Uuid) -> Result<Arc<Log>, LogError> {
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
    Ok(hosted.log.clone())
}

/// Makes the log of `tp` in `dir` with `partition.metadata` for `topic_id` (if known). A
/// directory made just now is empty and gets its files without a look inside
/// (`Log::create`); one already there (left behind, not hosted) is loaded as it is and
/// its `partition.metadata` replaced durably.
pub(super) fn make_log(
    dir: &Path,
    tp: TopicPartition,
    topic_id: Option<Uuid>,
    config: LogConfig,
) -> Result<Log, LogError> {
    match fs::create_dir(dir) {
        Ok(()) => {
            let log = Log::create(dir, tp, config)?;
            if let Some(id) = topic_id {
                write_new_partition_metadata(dir, id)?;
            }
            Ok(log)
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            let log = Log::open(dir, tp, config, 0, 0, true)?;
            if let Some(id) = topic_id {
                write_partition_metadata(dir, id)?;
            }
            Ok(log)
        }
        Err(e) => Err(e.into()),
    }
}

/// `f` over `items` on `threads` threads (the calling one among them), each taking the
/// next item not yet taken; the results in `items`' order.
fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let work = || {
        let mut mine = Vec::new();
        loop {
            let at = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(at) else {
                return mine;
            };
            mine.push((at, f(item)));
        }
    };
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
        let mut done = work();
        for h in helpers {
            match h.join() {
                Ok(theirs) => done.extend(theirs),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        done
    });
    done.sort_by_key(|(at, _)| *at);
    done.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
#[path = "new_logs_tests.rs"]
mod tests;
