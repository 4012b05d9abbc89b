//! Configuration with Kafka's key names and defaults.
//!
//! `defs.rs` is the one table of keys, kinds and defaults; `broker.rs` types the broker's
//! config once at startup into sections (`sections.rs`: log, network, replication;
//! `group_coordinator.rs`: groups and the offsets topic; `transaction.rs`: the transaction
//! coordinator and its topic; `kraft.rs`: `process.roles` and the controller quorum; `inter_broker_protocol.rs`: the request versions followers
//! send); `shared.rs` is the cell every component reads it from, where a dynamic change
//! swaps in a whole new config; `topic.rs` and `group.rs` resolve per-topic and per-group
//! configs over the broker's.

pub mod broker;
pub mod catalog;
pub mod check;
pub mod cleaner;
pub mod defs;
pub mod dynamic;
pub mod group;
pub mod group_coordinator;
pub mod inter_broker_protocol;
pub mod kraft;
pub mod listener;
pub mod password_encoder;
pub mod properties;
pub mod publisher;
pub mod sections;
pub mod shared;
pub mod topic;
pub mod transaction;
pub mod zookeeper;

pub use broker::{BrokerConfig, ConfigError};
pub use group_coordinator::{GroupCoordinatorConfig, OffsetsTopicConfig, ShareCoordinatorConfig};
pub use listener::Listener;
pub use shared::SharedConfig;

use std::collections::BTreeMap;

/// Reads `skua [FILE | --config FILE] [--override key=value]...` into a broker config.
pub fn from_args(args: &[String]) -> Result<BrokerConfig, ConfigError> {
    BrokerConfig::from_properties(read_args(args)?)
}

/// The properties `skua [FILE | --config FILE] [--override key=value]...` sets: the files
/// in order (a later key wins), then the overrides over them. Nothing is checked yet.
pub fn read_args(args: &[String]) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut props = BTreeMap::new();
    let mut overrides = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        match flag {
            "--config" | "--override" => {
                let value = inline
                    .or_else(|| it.next().cloned())
                    .ok_or_else(|| usage(format!("{flag} needs a value")))?;
                if flag == "--config" {
                    props.extend(read_file(&value)?);
                } else {
                    let (k, v) = value
                        .split_once('=')
                        .ok_or_else(|| usage(format!("--override {value}: not key=value")))?;
                    overrides.push((k.trim().to_string(), v.to_string()));
                }
            }
            f if f.starts_with('-') && f.len() > 1 => {
                return Err(usage(format!("unknown option {f}")))
            }
            path => props.extend(read_file(path)?),
        }
    }
    props.extend(overrides);
    Ok(props)
}

/// Reads a properties file (`server.properties`).
pub fn read_file(path: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_string(),
        source,
    })?;
    Ok(properties::parse(&text))
}

fn usage(why: String) -> ConfigError {
    ConfigError::Usage(why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_then_overrides() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.properties");
        std::fs::write(&path, "broker.id=4\nnum.partitions=3\n").unwrap();
        let args: Vec<String> = vec![
            path.to_string_lossy().into(),
            "--override".into(),
            "num.partitions=5".into(),
            "--override=log.dirs=/tmp/x".into(),
        ];
        let c = from_args(&args).unwrap();
        assert_eq!(c.broker_id, 4);
        assert_eq!(c.log.num_partitions, 5);
        assert_eq!(c.log_dirs[0].to_str(), Some("/tmp/x"));
        assert!(matches!(
            from_args(&["--bogus".into()]),
            Err(ConfigError::Usage(_))
        ));
        assert!(from_args(&["/no/such/file".into()]).is_err());
    }
}
