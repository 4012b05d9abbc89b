//! Dynamic broker configs: which keys may change at runtime, for one broker or as the
//! cluster default, checked as Kafka's `DynamicBrokerConfig.validate` checks them.
//!
//! Kafka answers a refused broker change with INVALID_REQUEST (its `ConfigException`s are
//! rewrapped, KAFKA-13609), with these messages.

use std::collections::BTreeMap;

use super::catalog::{broker_key, dynamic_only_broker_key, UpdateMode};

/// Checks `configs`, the whole new set of dynamic configs for a broker (`per_broker`) or
/// for the cluster default. `cleaner_threads` is the number of cleaner threads running
/// now. Returns Kafka's message on refusal.
pub fn validate(
    configs: &BTreeMap<String, String>,
    per_broker: bool,
    cleaner_threads: usize,
) -> Result<(), String> {
    // A listener's own security keys (`listener.name.l.ssl.keystore.location`) are checked
    // as the key they override.
    let known = |name: &str| {
        super::broker::key_def(name)
            .or_else(|| broker_key(name))
            .or_else(|| dynamic_only_broker_key(name))
    };
    let not_dynamic: Vec<&str> = configs
        .keys()
        .filter(|k| known(k).is_some_and(|key| key.mode == UpdateMode::ReadOnly))
        .map(String::as_str)
        .collect();
    refuse(&not_dynamic, "Cannot update these configs dynamically")?;
    for (name, value) in configs {
        if let Some(key) = known(name) {
            key.kind
                .check(value)
                .map_err(|why| format!("Invalid value {value} for configuration {name}: {why}"))?;
        }
    }
    if !per_broker {
        let per_broker_only: Vec<&str> = configs
            .keys()
            .filter(|k| known(k).is_some_and(|key| key.mode == UpdateMode::PerBroker))
            .map(String::as_str)
            .collect();
        refuse(
            &per_broker_only,
            "Cannot update these configs at default cluster level, broker id must be specified",
        )?;
    }
    for (name, value) in configs {
        if let Some(key) = known(name) {
            key.check(value)
                .map_err(|why| format!("Invalid value {value} for configuration {name}: {why}"))?;
        }
    }
    if let Some(threads) = configs.get("log.cleaner.threads") {
        check_cleaner_threads(threads.trim().parse().unwrap_or(0), cleaner_threads)?;
    }
    Ok(())
}

/// Kafka's `ConfigException(s"$errorMessage: $invalidPropNames")`, a Scala `Set`.
fn refuse(names: &[&str], message: &str) -> Result<(), String> {
    match names.is_empty() {
        true => Ok(()),
        false => Err(format!("{message}: Set({})", names.join(", "))),
    }
}

/// `LogCleaner.validateReconfiguration`: at least one thread, and at most a factor of two
/// either way at a time.
fn check_cleaner_threads(threads: i64, current: usize) -> Result<(), String> {
    let current = current as i64;
    if threads < 1 {
        return Err("Log cleaner threads should be at least 1".into());
    }
    if threads < current / 2 {
        return Err(format!(
            "Log cleaner threads cannot be reduced to less than half the current value {current}"
        ));
    }
    if threads > current * 2 {
        return Err(format!(
            "Log cleaner threads cannot be increased to more than double the current value {current}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn kafkas_rules_and_messages() {
        assert!(validate(
            &map(&[("log.retention.ms", "1000"), ("message.max.bytes", "2000")]),
            false,
            1
        )
        .is_ok());
        assert_eq!(
            validate(&map(&[("num.partitions", "3")]), true, 1).unwrap_err(),
            "Cannot update these configs dynamically: Set(num.partitions)"
        );
        assert_eq!(
            validate(&map(&[("listeners", "PLAINTEXT://:9093")]), false, 1).unwrap_err(),
            "Cannot update these configs at default cluster level, broker id must be specified: Set(listeners)"
        );
        assert!(validate(&map(&[("listeners", "PLAINTEXT://:9093")]), true, 1).is_ok());
        assert_eq!(
            validate(&map(&[("log.segment.bytes", "ten")]), true, 1).unwrap_err(),
            "Invalid value ten for configuration log.segment.bytes: Not a number of type INT"
        );
        assert_eq!(
            validate(&map(&[("log.segment.bytes", "1000")]), true, 1).unwrap_err(),
            "Invalid value 1000 for configuration log.segment.bytes: Value must be at least 1048576"
        );
        assert_eq!(
            validate(&map(&[("log.cleaner.threads", "3")]), true, 1).unwrap_err(),
            "Log cleaner threads cannot be increased to more than double the current value 1"
        );
        assert!(validate(&map(&[("log.cleaner.threads", "2")]), true, 1).is_ok());
    }
}
