//! Injected I/O failures for tests: a test arms a fault for a directory, and the storage
//! code's fault points under that directory fail with the given error. Compiled to nothing
//! outside `cfg(test)`.

use std::path::Path;

/// Places where storage code asks whether to fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// `checkpoint::write_atomic` (leader-epoch, offset and other checkpoint files).
    WriteCheckpoint,
    /// An fsync of a log's segment files in `Log::flush_to`.
    Fsync,
    /// `checkpoint::sync_filesystem`, the clean stop's one sync of a log dir's file system.
    SyncFs,
    /// `Log::replace_segments`, before anything is renamed.
    CleanerSwapStart,
    /// `Log::replace_segments`, once the cleaned files are `.swap` and fsynced.
    CleanerSwapped,
    /// `Log::replace_segments`, once the replaced segments are renamed `.deleted`.
    CleanerOldDeleted,
}

#[cfg(test)]
pub use armed::{arm, disarm};

/// Fails when a test armed `fault` for a directory holding `path`.
#[inline]
pub fn check(path: &Path, fault: Fault) -> std::io::Result<()> {
    #[cfg(test)]
    return armed::check(path, fault);
    #[cfg(not(test))]
    {
        let _ = (path, fault);
        Ok(())
    }
}

#[cfg(test)]
mod armed {
    use std::path::{Path, PathBuf};

    use parking_lot::Mutex;

    use super::Fault;

    struct Armed {
        dir: PathBuf,
        fault: Fault,
        errno: i32,
        /// How many more times it fires; `None` forever.
        remaining: Option<u32>,
    }

    static ARMED: Mutex<Vec<Armed>> = Mutex::new(Vec::new());

    /// Fails `fault` under `dir` with `errno`, `times` times (`None`: until disarmed).
    pub fn arm(dir: &Path, fault: Fault, errno: i32, times: Option<u32>) {
        ARMED.lock().push(Armed {
            dir: dir.to_path_buf(),
            fault,
            errno,
            remaining: times,
        });
    }

    pub fn disarm(dir: &Path) {
        ARMED.lock().retain(|a| !a.dir.starts_with(dir));
    }

    pub fn check(path: &Path, fault: Fault) -> std::io::Result<()> {
        let mut armed = ARMED.lock();
        let Some(a) = armed
            .iter_mut()
            .find(|a| a.fault == fault && path.starts_with(&a.dir))
        else {
            return Ok(());
        };
        let errno = a.errno;
        if let Some(n) = &mut a.remaining {
            *n -= 1;
            if *n == 0 {
                armed.retain(|a| a.remaining != Some(0));
            }
        }
        Err(std::io::Error::from_raw_os_error(errno))
    }
}
