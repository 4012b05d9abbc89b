//! `.lock` in every log dir, held with `flock` for the process's lifetime: a second broker
//! (or a second copy of this one) started on the same directory stops at start-up
//! instead of interleaving writes into the same segments. Kafka does the same.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;

use super::LogError;

pub const LOCK_FILE: &str = ".lock";

/// The held lock; released when dropped (or when the process dies, even by `kill -9`).
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    pub fn acquire(dir: &Path) -> Result<DirLock, LogError> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)?;
        // SAFETY: flock on a descriptor this function owns; no memory is involved.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let why = std::io::Error::last_os_error();
            return Err(LogError::KafkaStorage(std::io::Error::new(
                why.kind(),
                format!(
                    "cannot lock {}: another broker is using this log dir ({why})",
                    path.display()
                ),
            )));
        }
        Ok(DirLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_locked_dir_refuses_a_second_lock_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let held = DirLock::acquire(dir.path()).unwrap();
        let refused = DirLock::acquire(dir.path()).unwrap_err();
        assert!(refused.to_string().contains("another broker"), "{refused}");
        drop(held);
        DirLock::acquire(dir.path()).unwrap();
    }
}
