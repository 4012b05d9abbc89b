//! A `recovery-point-offset-checkpoint` (or any offset checkpoint) as read back at startup.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = skua::log::parse_offset_checkpoint(data) {
        // No entry without a line of its own.
        assert!(entries.len() <= data.iter().filter(|&&b| b == b'\n').count() + 1);
    }
});
