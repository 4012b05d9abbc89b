//! A produce request's records, through the record-batch validator and the append path.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use skua::log::{Log, LogConfig, TopicPartition};

fn log() -> &'static Log {
    static LOG: OnceLock<Log> = OnceLock::new();
    LOG.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("skua-fuzz-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Log::open(
            &dir,
            TopicPartition::new("fuzz", 0),
            LogConfig::default(),
            0,
            0,
            true,
        )
        .expect("log opens")
    })
}

fuzz_target!(|data: &[u8]| {
    let _ = log().append_as_leader(bytes::Bytes::copy_from_slice(data), 0, 1_700_000_000_000);
});
