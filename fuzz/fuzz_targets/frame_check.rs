//! Buffered bytes before a frame is split off: `check` must never claim more than it has.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skua::protocol::frame::{check, Check};

const MAX: usize = 100 * 1024 * 1024;

fuzz_target!(|data: &[u8]| {
    match check(data, MAX) {
        Ok(Check::Complete(n)) => assert!(n <= MAX && 4 + n <= data.len()),
        Ok(Check::Incomplete(total)) => assert!(total > data.len()),
        Err(_) => assert!(data.len() >= 4),
    }
});
