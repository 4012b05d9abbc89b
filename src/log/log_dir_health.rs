//! Whether a log dir can still be trusted (Kafka's offline log dirs and
//! `LogDirFailureChannel`).
//!
//! An I/O error while writing, flushing or checkpointing a log means the disk may have
//! lost data the broker believes it has: Linux reports a failed writeback once and then
//! clears it, so a later fsync can succeed over pages that never reached the disk. Kafka's
//! answer, and skua's, is to stop trusting the whole directory: it goes offline, every
//! partition in it refuses reads and writes with KAFKA_STORAGE_ERROR, nothing in it is
//! flushed or checkpointed again (so its recovery point never passes the failure), and
//! the next start recovers it from its last checkpoint. A dir never comes back online
//! while the broker runs.
//!
//! Running out of file descriptors is not a disk fault: the operation that hit it fails
//! with KAFKA_STORAGE_ERROR, and the dir stays online when the log could be put back as
//! it was (see `is_fd_exhaustion`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use tokio::sync::mpsc::UnboundedSender;

/// The state of one log dir, shared by every log in it.
pub struct LogDirHealth {
    path: PathBuf,
    offline: AtomicBool,
    /// What took the dir offline, for error messages and DescribeLogDirs.
    cause: Mutex<Option<String>>,
    /// Told once, when the dir goes offline (the broker's log-dir failure handler).
    failures: Option<UnboundedSender<PathBuf>>,
}

impl LogDirHealth {
    pub fn new(path: &Path, failures: Option<UnboundedSender<PathBuf>>) -> Self {
        LogDirHealth {
            path: path.to_path_buf(),
            offline: AtomicBool::new(false),
            cause: Mutex::new(None),
            failures,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn is_offline(&self) -> bool {
        self.offline.load(Ordering::Acquire)
    }

    /// Why the dir went offline, if it did.
    pub fn cause(&self) -> Option<String> {
        self.cause.lock().clone()
    }

    /// Takes the dir offline because `what` failed. Logged loudly the first time only: every
    /// later operation in the dir fails fast with `LogError::LogDirOffline`.
    pub fn mark_offline(&self, what: &str, error: &dyn std::fmt::Display) {
        let mut cause = self.cause.lock();
        if self.offline.swap(true, Ordering::AcqRel) {
            return;
        }
        let text = format!("{what}: {error}");
        tracing::error!(
            dir = %self.path.display(),
            cause = %text,
            "LOG DIR OFFLINE: an I/O error means data in this directory may be lost; every \
             partition in it now answers KAFKA_STORAGE_ERROR and nothing in it is flushed or \
             checkpointed until the broker restarts and recovers it"
        );
        *cause = Some(text);
        if let Some(tx) = &self.failures {
            let _ = tx.send(self.path.clone());
        }
    }
}

/// EMFILE or ENFILE: the process or system ran out of file descriptors. Not a sign that
/// the disk lost data, so it does not take a dir offline by itself.
pub fn is_fd_exhaustion(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goes_offline_once_and_tells_the_channel_once() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let h = LogDirHealth::new(Path::new("/data/d1"), Some(tx));
        assert!(!h.is_offline());
        h.mark_offline("fsync of orders-0", &"Input/output error");
        h.mark_offline("checkpoint", &"again");
        assert!(h.is_offline());
        assert_eq!(
            h.cause().as_deref(),
            Some("fsync of orders-0: Input/output error")
        );
        assert_eq!(rx.try_recv().unwrap(), PathBuf::from("/data/d1"));
        assert!(rx.try_recv().is_err(), "reported once");
    }

    #[test]
    fn fd_exhaustion_is_recognised() {
        assert!(is_fd_exhaustion(&std::io::Error::from_raw_os_error(
            libc::EMFILE
        )));
        assert!(is_fd_exhaustion(&std::io::Error::from_raw_os_error(
            libc::ENFILE
        )));
        assert!(!is_fd_exhaustion(&std::io::Error::from_raw_os_error(
            libc::EIO
        )));
    }
}
