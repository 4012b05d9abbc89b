//! The size of the file system under a log dir (KIP-827's `TotalBytes` and `UsableBytes`
//! in DescribeLogDirs), as Java's `File.getTotalSpace` / `getUsableSpace` compute it from
//! `statvfs`: all blocks, and the blocks an unprivileged process may still use.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Total and usable bytes of the file system holding `path`; `None` when it cannot be
/// asked (the dir is gone, or the path holds a NUL byte).
pub fn total_and_usable_bytes(path: &Path) -> Option<(u64, u64)> {
    let c_path = CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c_path` is a NUL-terminated string that outlives the call, and `stat`
    // points to writable memory of the struct's size, which statvfs fills on success.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it initialised the struct (and it was zeroed anyway).
    let stat = unsafe { stat.assume_init() };
    // The field types differ between platforms (u64 on Linux x86-64, u32 elsewhere).
    #[expect(clippy::useless_conversion, reason = "u64 on Linux x86-64 only")]
    let (blocks, available, block) = (
        u64::from(stat.f_blocks),
        u64::from(stat.f_bavail),
        u64::from(stat.f_frsize),
    );
    Some((
        blocks.saturating_mul(block),
        available.saturating_mul(block),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_dir_has_usable_space_within_its_total() {
        let dir = tempfile::tempdir().unwrap();
        let (total, usable) = total_and_usable_bytes(dir.path()).unwrap();
        assert!(total > 0 && usable <= total, "{total} {usable}");
        assert!(total_and_usable_bytes(&dir.path().join("missing")).is_none());
    }
}
