//! The log cleaner's broker settings (`log.cleaner.*`).

use super::BrokerConfig;
use crate::log::cleaner::CleanerConfig;

/// The cleaner settings in force, Kafka's defaults for keys not set.
pub fn cleaner_config(broker: &BrokerConfig) -> CleanerConfig {
    let defaults = CleanerConfig::default();
    let long = |key: &str, default: i64| broker.long(key).unwrap_or(default);
    let double = |key: &str, default: f64| {
        broker
            .get(key)
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(default)
    };
    CleanerConfig {
        enable: broker
            .get("log.cleaner.enable")
            .is_none_or(|v| v.trim().eq_ignore_ascii_case("true")),
        threads: long("log.cleaner.threads", 1).clamp(0, 64) as usize,
        dedupe_buffer_size: long(
            "log.cleaner.dedupe.buffer.size",
            defaults.dedupe_buffer_size as i64,
        )
        .max(0) as u64,
        io_buffer_size: long("log.cleaner.io.buffer.size", defaults.io_buffer_size as i64)
            .clamp(4096, i32::MAX as i64) as usize,
        io_buffer_load_factor: double("log.cleaner.io.buffer.load.factor", 0.9),
        io_max_bytes_per_second: double("log.cleaner.io.max.bytes.per.second", f64::MAX),
        backoff_ms: long("log.cleaner.backoff.ms", 15_000).max(1) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_defaults_and_overrides() {
        let c = cleaner_config(&BrokerConfig::from_properties(Default::default()).unwrap());
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
        let c = cleaner_config(&BrokerConfig::from_properties(props).unwrap());
        assert_eq!(
            (c.threads, c.offset_map_bytes(), c.enable),
            (2, 524288, false)
        );
        assert_eq!(c.io_max_bytes_per_second, 1e6);
    }
}
