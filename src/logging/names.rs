//! The loggers an operator names: `root`, Kafka's logger names (its classes and packages,
//! and the named loggers of its `log4j.properties`) mapped to the skua modules doing that
//! work, and skua's own module paths (tracing's targets).
//!
//! A Kafka logger stands for the targets listed beside it; setting it sets each of them.
//! A skua module path stands for itself and the modules under it.

/// Kafka's root logger.
pub const ROOT: &str = "root";

/// Kafka's logger names and the skua targets each stands for; the first is the one its
/// described level is read from when it has none of its own.
pub const KAFKA_LOGGERS: &[(&str, &[&str])] = &[
    ("kafka", &["skua"]),
    ("kafka.authorizer.logger", &["skua::auth"]),
    ("kafka.controller", &["skua::controller"]),
    ("kafka.coordinator.group", &["skua::coordinator::group"]),
    ("kafka.coordinator.transaction", &["skua::coordinator::txn"]),
    ("kafka.log", &["skua::log"]),
    ("kafka.log.LogCleaner", &["skua::log::cleaner"]),
    ("kafka.log.LogManager", &["skua::log::log_manager"]),
    ("kafka.log.UnifiedLog", &["skua::log::log"]),
    ("kafka.metrics", &["skua::metrics"]),
    ("kafka.network", &["skua::network", "skua::protocol"]),
    (
        "kafka.network.RequestChannel$",
        &["skua::network::pipeline"],
    ),
    ("kafka.network.SocketServer", &["skua::network"]),
    // Kafka's request log: one DEBUG line per completed request.
    ("kafka.request.logger", &["skua::network::request_log"]),
    (
        "kafka.server",
        &[
            "skua::broker",
            "skua::handlers",
            "skua::router",
            "skua::replica",
            "skua::config",
            "skua::quota",
            "skua::scheduler",
            "skua::jobs",
        ],
    ),
    ("kafka.server.ClientQuotaManager", &["skua::quota"]),
    ("kafka.server.DynamicBrokerConfig", &["skua::config"]),
    (
        "kafka.server.KafkaApis",
        &["skua::handlers", "skua::router"],
    ),
    (
        "kafka.server.KafkaServer",
        &["skua::broker", "skua::scheduler", "skua::jobs"],
    ),
    (
        "kafka.server.ReplicaFetcherManager",
        &["skua::replica::fetcher"],
    ),
    (
        "kafka.server.ReplicaFetcherThread",
        &["skua::replica::fetcher"],
    ),
    ("kafka.server.ReplicaManager", &["skua::replica"]),
    ("kafka.zk", &["skua::zk"]),
    ("kafka.zookeeper", &["skua::zk"]),
    (
        "org.apache.kafka.common.security.authenticator",
        &["skua::network::authenticator", "skua::sasl"],
    ),
    ("org.apache.kafka.controller", &["skua::controller::local"]),
    ("org.apache.kafka.raft", &["skua::controller::metadata_log"]),
    ("org.apache.zookeeper", &["zookeeper_client"]),
    // Kafka's state-change log: the controller's partition and replica state machines
    // and a broker's LeaderAndIsr and StopReplica.
    (
        "state.change.logger",
        &[
            "skua::controller::zk::partition_machine",
            "skua::controller::zk::replica_machine",
            "skua::controller::zk::broker::leader_and_isr",
            "skua::controller::zk::broker::stop_replica",
        ],
    ),
];

/// skua's top-level modules (lib.rs), each a logger of its own.
pub const SKUA_MODULES: &[&str] = &[
    "auth",
    "broker",
    "client",
    "clock",
    "config",
    "controller",
    "coordinator",
    "error",
    "handlers",
    "jobs",
    "log",
    "logging",
    "metrics",
    "network",
    "protocol",
    "quota",
    "replica",
    "router",
    "sasl",
    "scheduler",
    "tls",
    "zk",
];

/// The crate's own name, the root of its module paths.
const CRATE: &str = "skua";

/// The targets logger `name` stands for, or None when there is no such logger.
/// `root` stands for no target: it is the level of every target without one.
pub fn targets(name: &str) -> Option<Vec<String>> {
    if name == ROOT {
        return Some(Vec::new());
    }
    if let Some((_, targets)) = KAFKA_LOGGERS.iter().find(|(n, _)| *n == name) {
        return Some(targets.iter().map(|t| t.to_string()).collect());
    }
    is_skua_path(name).then(|| vec![name.to_string()])
}

/// `skua`, or `skua::<module>(::<ident>)*` under one of its top-level modules. Deeper
/// paths are taken as written: a path naming no module logs nothing.
fn is_skua_path(name: &str) -> bool {
    let mut parts = name.split("::");
    if parts.next() != Some(CRATE) {
        return false;
    }
    match parts.next() {
        None => true,
        Some(top) if SKUA_MODULES.contains(&top) => parts.all(is_ident),
        Some(_) => false,
    }
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Every logger DescribeConfigs lists whether set or not: root, Kafka's names, `skua` and
/// its top-level modules.
pub fn listed() -> impl Iterator<Item = String> {
    std::iter::once(ROOT.to_string())
        .chain(KAFKA_LOGGERS.iter().map(|(n, _)| n.to_string()))
        .chain(std::iter::once(CRATE.to_string()))
        .chain(SKUA_MODULES.iter().map(|m| format!("{CRATE}::{m}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Whether skua module path `path` has a source file.
    fn module_exists(path: &str) -> bool {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let rel = path.strip_prefix("skua::").unwrap().replace("::", "/");
        src.join(format!("{rel}.rs")).is_file() || src.join(&rel).join("mod.rs").is_file()
    }

    #[test]
    fn every_mapped_target_is_a_module_of_this_tree() {
        for (name, targets) in KAFKA_LOGGERS {
            for t in *targets {
                let known = *t == "skua" || *t == "zookeeper_client" || module_exists(t);
                assert!(known, "{name} maps to {t}, which is no module");
            }
        }
    }

    #[test]
    fn the_top_level_modules_are_lib_rs_s() {
        let lib =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs")).unwrap();
        let declared: Vec<&str> = lib
            .lines()
            .filter_map(|l| l.strip_prefix("pub mod "))
            .map(|l| l.trim_end_matches(';'))
            .collect();
        assert_eq!(declared, SKUA_MODULES);
    }

    #[test]
    fn which_names_are_loggers() {
        assert_eq!(targets("root"), Some(vec![]));
        assert_eq!(
            targets("kafka.server.ReplicaManager"),
            Some(vec!["skua::replica".to_string()])
        );
        assert_eq!(
            targets("skua::replica::fetcher"),
            Some(vec!["skua::replica::fetcher".to_string()])
        );
        assert_eq!(targets("skua"), Some(vec!["skua".to_string()]));
        assert_eq!(targets("skua::nope"), None);
        assert_eq!(targets("skua::log::Bad"), None);
        assert_eq!(targets("skua::log::"), None);
        assert_eq!(targets("kafka.server.Nope"), None);
        assert_eq!(targets("Root"), None);
    }
}
