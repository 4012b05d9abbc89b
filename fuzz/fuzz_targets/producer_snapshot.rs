//! A producer-state `.snapshot` file as read back at startup.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(n) = skua::log::parse_producer_snapshot(data) {
        // Every accepted entry is 46 bytes after a 10-byte header.
        assert_eq!(data.len(), 10 + 46 * n);
    }
});
