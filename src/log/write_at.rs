//! Positional writes of several buffers in one system call.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

/// Writes `parts` one after another at `position` with `pwritev(2)`; what a short write
/// leaves (a signal, a disk filling up mid-call) is finished with plain `pwrite`s, which
/// report the error if there is one.
pub fn write_all_at_parts(file: &File, parts: [&[u8]; 2], position: u64) -> io::Result<()> {
    let offset = libc::off_t::try_from(position)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file position out of range"))?;
    let iov = parts.map(|p| libc::iovec {
        iov_base: p.as_ptr() as *mut libc::c_void,
        iov_len: p.len(),
    });
    let written = loop {
        // SAFETY: each iovec points at a slice borrowed for the whole call, with its own
        // length; pwritev only reads through them, and `file` is an open descriptor.
        let n = unsafe { libc::pwritev(file.as_raw_fd(), iov.as_ptr(), 2, offset) };
        if n >= 0 {
            break n as usize;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    };
    let mut skip = written;
    let mut at = position + written as u64;
    for part in parts {
        if skip >= part.len() {
            skip -= part.len();
            continue;
        }
        let rest = &part[skip..];
        file.write_all_at(rest, at)?;
        at += rest.len() as u64;
        skip = 0;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_land_in_order_at_the_position() {
        let file = tempfile::tempfile().unwrap();
        file.write_all_at(b"0123", 0).unwrap();
        write_all_at_parts(&file, [b"head", b"-records"], 4).unwrap();
        write_all_at_parts(&file, [b"", b"!"], 16).unwrap();
        let mut out = vec![0; 17];
        file.read_exact_at(&mut out, 0).unwrap();
        assert_eq!(&out, b"0123head-records!");
    }
}
