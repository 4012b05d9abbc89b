//! The memory one request's decode may take, measured as it is allocated.
//!
//! A decoded request can be far larger than its frame: an array element of four bytes on
//! the wire becomes a struct of 120, an unknown tagged field a 400-byte map node, so a
//! 99 MB frame of minimal elements once decoded into 8.7 GB before failing. Counting
//! elements cannot bound that; counting bytes allocated can. [`MeteredAllocator`] adds
//! every allocation made on a thread inside [`decode_within`] to that thread's meter (and
//! takes frees off it), and the kafka-protocol crate's decode guard asks, before each
//! array element and each tagged field, whether the meter plus what the array is about to
//! reserve stays within the limit; once it does not, the decode fails and the connection
//! is closed. Outside a decode the allocator only checks that no meter is running.
//!
//! The skua binary installs the allocator (`main.rs`); a program without it (a test that
//! starts the broker in-process, say) still gets the guard's check of each array's next
//! growth against the limit, but not the count of what was already allocated.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use kafka_protocol::protocol::decode_guard;

/// The system allocator, with the per-thread decode meter on top. Install it with
/// `#[global_allocator] static A: MeteredAllocator = MeteredAllocator;`.
pub struct MeteredAllocator;

#[cfg(test)]
#[global_allocator]
static ALLOCATOR: MeteredAllocator = MeteredAllocator;

#[derive(Clone, Copy)]
struct Meter {
    /// Bytes allocated (net of frees) since the decode began.
    used: usize,
    limit: usize,
}

thread_local! {
    // Const-initialised and without a destructor: safe to touch from the allocator, at any
    // point of a thread's life, without allocating.
    static METER: Cell<Option<Meter>> = const { Cell::new(None) };
}

fn count(allocated: usize, freed: usize) {
    let _ = METER.try_with(|m| {
        if let Some(mut meter) = m.get() {
            meter.used = (meter.used + allocated).saturating_sub(freed);
            m.set(Some(meter));
        }
    });
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the
// meter only reads and writes a thread-local `Cell`, which neither allocates nor unwinds.
unsafe impl GlobalAlloc for MeteredAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received (see the impl's note).
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            count(layout.size(), 0);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            count(layout.size(), 0);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(0, layout.size());
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as received.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            count(new_size, layout.size());
        }
        new
    }
}

/// The crate's decode guard: within a metered decode, whether `additional` more bytes fit.
fn admit(additional: usize) -> bool {
    METER
        .try_with(|m| {
            m.get()
                .is_none_or(|meter| meter.used.saturating_add(additional) <= meter.limit)
        })
        .unwrap_or(true)
}

/// Runs `decode` with this thread's allocations metered against `limit` bytes; returns
/// its result and the bytes it left allocated (what the decoded value holds). Decoders
/// of the kafka-protocol crate fail once the limit would be passed.
pub fn decode_within<R>(limit: usize, decode: impl FnOnce() -> R) -> (R, usize) {
    decode_guard::set_decode_guard(admit);
    /// Stops the meter however `decode` ends.
    struct Stop;
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = METER.try_with(|m| m.set(None));
        }
    }
    METER.with(|m| m.set(Some(Meter { used: 0, limit })));
    let stop = Stop;
    let result = decode();
    let used = METER.with(|m| m.get().map_or(0, |meter| meter.used));
    drop(stop);
    (result, used)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_inside_are_counted_and_outside_are_not() {
        let (v, used) = decode_within(1 << 20, || vec![0u8; 1000]);
        assert!(used >= 1000, "the vector's bytes are counted: {used}");
        let (_, used) = decode_within(1 << 20, || drop(vec![0u8; 1000]));
        assert_eq!(used, 0, "freed inside, so nothing is held");
        drop(v);
        assert!(admit(usize::MAX), "no limit outside a decode");
    }

    #[test]
    fn the_guard_refuses_past_the_limit() {
        let (admitted, _) = decode_within(4096, || {
            let held = vec![0u8; 4000];
            let r = (admit(50), admit(200));
            drop(held);
            r
        });
        assert_eq!(admitted, (true, false));
    }
}
