//! A hook through which the application can stop a decode that would take too much
//! memory.
//!
//! A decoded message can be far larger than its encoding: an array element of four
//! bytes on the wire becomes a struct of a hundred, and each unknown tagged field a map
//! entry. Bounding allocations by the bytes left in the buffer bounds the element count,
//! not the memory. The application, which can measure what a decode allocates, installs a
//! guard; array decoders ask it before each element (with the bytes the array is about
//! to grow by) and tagged-field sections before each field, and the decode fails as soon
//! as the guard refuses.

use std::sync::OnceLock;

use anyhow::{bail, Result};

/// Answers whether a decode may go on and allocate `additional_bytes` more.
pub type DecodeGuard = fn(additional_bytes: usize) -> bool;

static GUARD: OnceLock<DecodeGuard> = OnceLock::new();

/// Installs the guard for the whole process. Only the first call takes effect; returns
/// whether this call installed `guard`.
pub fn set_decode_guard(guard: DecodeGuard) -> bool {
    GUARD.set(guard).is_ok()
}

/// Fails when the installed guard refuses `additional_bytes` more.
pub(crate) fn admit(additional_bytes: usize) -> Result<()> {
    match GUARD.get() {
        Some(guard) if !guard(additional_bytes) => {
            bail!("decoded message exceeds its memory budget")
        }
        _ => Ok(()),
    }
}
