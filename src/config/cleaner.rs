//! The log cleaner's broker settings (`log.cleaner.*`), a typed section of the broker
//! config read through `defs.rs`'s defaults.

use super::broker::{ConfigError, Keys};
use crate::log::cleaner::CleanerConfig;

pub(super) fn build(keys: &Keys<'_>) -> Result<CleanerConfig, ConfigError> {
    Ok(CleanerConfig {
        enable: keys.bool("log.cleaner.enable"),
        threads: keys.int("log.cleaner.threads")?.clamp(0, 64) as usize,
        dedupe_buffer_size: keys.long("log.cleaner.dedupe.buffer.size")?.max(0) as u64,
        io_buffer_size: keys
            .int("log.cleaner.io.buffer.size")?
            .clamp(4096, i32::MAX) as usize,
        io_buffer_load_factor: keys.double("log.cleaner.io.buffer.load.factor")?,
        io_max_bytes_per_second: keys.double("log.cleaner.io.max.bytes.per.second")?,
        backoff_ms: keys.long("log.cleaner.backoff.ms")?.max(1) as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::super::BrokerConfig;
    use super::*;

    #[test]
    fn kafkas_defaults_and_overrides() {
        let c = BrokerConfig::from_properties(Default::default())
            .unwrap()
            .cleaner;
        assert_eq!(c, CleanerConfig::default());
        let props = [
            ("log.cleaner.threads", "2"),
            ("log.cleaner.dedupe.buffer.size", "1048576"),
            ("log.cleaner.io.max.bytes.per.second", "1000000.0"),
            ("log.cleaner.enable", "false"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let c = BrokerConfig::from_properties(props).unwrap().cleaner;
        assert_eq!(
            (c.threads, c.offset_map_bytes(), c.enable),
            (2, 524288, false)
        );
        assert_eq!(c.io_max_bytes_per_second, 1e6);
    }
}
