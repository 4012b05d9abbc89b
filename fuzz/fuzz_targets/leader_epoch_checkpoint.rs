//! A `leader-epoch-checkpoint` as read back when a log opens.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = skua::log::parse_leader_epoch_checkpoint(data) {
        assert!(entries.len() <= data.iter().filter(|&&b| b == b'\n').count() + 1);
    }
});
