//! Files and directories renamed for deletion, removed once `file.delete.delay.ms` has
//! passed (Kafka's `.deleted` segment files and `-delete` partition directories).
//!
//! Kafka never unlinks a segment at the moment it leaves the log: it renames its files with
//! the `.deleted` suffix, so a restart cannot bring them back, and removes them a delay
//! later, so a reader that found the segment just before gets to finish. skua's readers
//! hold the open `.log` file (a `FileSlice`), which stays readable after the rename and
//! after the unlink alike, so the delay is for parity with Kafka and for operators who
//! rely on it. Whatever is still pending at shutdown is removed by the next start's
//! loader (`.deleted` files) or log manager (`-delete` directories).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The queue of pending removals, shared by every log of a `LogManager`.
#[derive(Default)]
pub struct DelayedDeletes {
    pending: Mutex<Vec<Pending>>,
}

struct Pending {
    path: PathBuf,
    due: Instant,
    /// Also the wait before a retry when the removal fails.
    delay: Duration,
}

impl DelayedDeletes {
    pub fn new() -> Self {
        DelayedDeletes::default()
    }

    /// Removes each of `paths` (a file, or a directory with everything in it) once `delay`
    /// has passed.
    pub fn schedule(&self, paths: impl IntoIterator<Item = PathBuf>, delay: Duration) {
        let due = Instant::now() + delay;
        self.pending
            .lock()
            .extend(paths.into_iter().map(|path| Pending { path, due, delay }));
    }

    /// Removes what is due at `now`; returns how many paths went. A removal that fails is
    /// logged and tried again a delay later. Blocking: run it on the blocking pool.
    pub fn remove_due(&self, now: Instant) -> usize {
        let due: Vec<Pending> = {
            let mut pending = self.pending.lock();
            let (due, later) = std::mem::take(&mut *pending)
                .into_iter()
                .partition(|p| p.due <= now);
            *pending = later;
            due
        };
        let mut removed = 0;
        for p in due {
            match remove(&p.path) {
                Ok(()) => {
                    tracing::debug!(path = %p.path.display(), "deleted");
                    removed += 1;
                }
                Err(e) => {
                    tracing::error!(path = %p.path.display(), error = %e, "cannot delete; will retry");
                    self.pending.lock().push(Pending {
                        due: now + p.delay.max(Duration::from_secs(1)),
                        ..p
                    });
                }
            }
        }
        removed
    }

    /// Paths waiting for their delay.
    pub fn pending(&self) -> Vec<PathBuf> {
        self.pending.lock().iter().map(|p| p.path.clone()).collect()
    }
}

/// Removes a file or a directory tree; what is already gone counts as removed.
fn remove(path: &Path) -> std::io::Result<()> {
    let result = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) => Err(e),
    };
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_dirs_go_after_their_delay() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("00000000000000000000.log.deleted");
        let dir = root.path().join("t-0.abc-delete");
        std::fs::write(&file, b"x").unwrap();
        std::fs::create_dir_all(dir.join("inner")).unwrap();
        std::fs::write(dir.join("inner/f"), b"y").unwrap();
        let deletes = DelayedDeletes::new();
        deletes.schedule([file.clone()], Duration::from_secs(60));
        deletes.schedule([dir.clone()], Duration::ZERO);
        let now = Instant::now();
        assert_eq!(deletes.remove_due(now), 1);
        assert!(!dir.exists() && file.exists());
        assert_eq!(deletes.pending(), vec![file.clone()]);
        assert_eq!(deletes.remove_due(now + Duration::from_secs(61)), 1);
        assert!(!file.exists());
        assert!(deletes.pending().is_empty());
        // Already gone: nothing to retry.
        deletes.schedule([file.clone()], Duration::ZERO);
        assert_eq!(deletes.remove_due(Instant::now()), 1);
        assert!(deletes.pending().is_empty());
    }
}
