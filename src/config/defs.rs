//! Kafka's configuration keys that skua knows, their types and Kafka's defaults.
//!
//! One table for broker keys and one for topic keys, so parsing, validation and
//! DescribeConfigs all read the same source of truth.

/// How a value is written and checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Int,
    Long,
    Short,
    Double,
    Bool,
    String,
    List,
    Password,
}

impl Kind {
    /// Checks that `value` is well formed for this kind; returns why not.
    pub fn check(self, value: &str) -> Result<(), String> {
        let v = value.trim();
        let ok = match self {
            Kind::Int => v.parse::<i32>().is_ok(),
            Kind::Long => v.parse::<i64>().is_ok(),
            Kind::Short => v.parse::<i16>().is_ok(),
            Kind::Double => v.parse::<f64>().is_ok(),
            Kind::Bool => v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false"),
            Kind::String | Kind::List | Kind::Password => true,
        };
        if ok {
            Ok(())
        } else {
            Err(format!("{value:?} is not a valid {self:?}"))
        }
    }

    /// The name DescribeConfigs v3+ reports for this kind (ConfigType in Kafka's protocol).
    pub fn describe_type(self) -> i8 {
        match self {
            Kind::Bool => 1,
            Kind::String => 2,
            Kind::Int => 3,
            Kind::Short => 4,
            Kind::Long => 5,
            Kind::Double => 6,
            Kind::List => 7,
            Kind::Password => 9,
        }
    }
}

/// A broker key: name, kind, Kafka's default (None when Kafka's default is null).
pub struct BrokerKey {
    pub name: &'static str,
    pub kind: Kind,
    pub default: Option<&'static str>,
}

const fn b(name: &'static str, kind: Kind, default: Option<&'static str>) -> BrokerKey {
    BrokerKey {
        name,
        kind,
        default,
    }
}

pub const LONG_MAX: &str = "9223372036854775807";

/// Broker keys with Kafka 4's defaults, except `log.dirs` (skua's quickstart uses ./data)
/// and `broker.id` (1, as Kafka's quickstart `node.id`).
pub static BROKER_KEYS: &[BrokerKey] = &[
    b("broker.id", Kind::Int, Some("1")),
    b("node.id", Kind::Int, None),
    b("listeners", Kind::List, Some("PLAINTEXT://:9092")),
    b("advertised.listeners", Kind::List, None),
    b(
        "listener.security.protocol.map",
        Kind::List,
        Some("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
    ),
    b("inter.broker.listener.name", Kind::String, None),
    b("log.dirs", Kind::List, None),
    b("log.dir", Kind::String, Some("./data")),
    b("num.partitions", Kind::Int, Some("1")),
    b("default.replication.factor", Kind::Int, Some("1")),
    b("auto.create.topics.enable", Kind::Bool, Some("true")),
    b("delete.topic.enable", Kind::Bool, Some("true")),
    b("log.segment.bytes", Kind::Int, Some("1073741824")),
    b("log.roll.hours", Kind::Int, Some("168")),
    b("log.roll.ms", Kind::Long, None),
    b("log.roll.jitter.hours", Kind::Int, Some("0")),
    b("log.roll.jitter.ms", Kind::Long, None),
    b("log.index.interval.bytes", Kind::Int, Some("4096")),
    b("log.index.size.max.bytes", Kind::Int, Some("10485760")),
    b("message.max.bytes", Kind::Int, Some("1048588")),
    b("socket.request.max.bytes", Kind::Int, Some("104857600")),
    b("socket.send.buffer.bytes", Kind::Int, Some("102400")),
    b("socket.receive.buffer.bytes", Kind::Int, Some("102400")),
    b("log.flush.interval.messages", Kind::Long, Some(LONG_MAX)),
    b("log.flush.interval.ms", Kind::Long, None),
    b(
        "log.flush.scheduler.interval.ms",
        Kind::Long,
        Some(LONG_MAX),
    ),
    b(
        "log.flush.offset.checkpoint.interval.ms",
        Kind::Int,
        Some("60000"),
    ),
    b(
        "log.flush.start.offset.checkpoint.interval.ms",
        Kind::Int,
        Some("60000"),
    ),
    b("connections.max.idle.ms", Kind::Long, Some("600000")),
    b("max.connections", Kind::Int, Some("2147483647")),
    b("queued.max.requests", Kind::Int, Some("500")),
    b("num.network.threads", Kind::Int, Some("3")),
    b("num.io.threads", Kind::Int, Some("8")),
    b("num.recovery.threads.per.data.dir", Kind::Int, Some("2")),
    b(
        "log.message.timestamp.type",
        Kind::String,
        Some("CreateTime"),
    ),
    b(
        "log.message.timestamp.before.max.ms",
        Kind::Long,
        Some(LONG_MAX),
    ),
    b(
        "log.message.timestamp.after.max.ms",
        Kind::Long,
        Some("3600000"),
    ),
    b("log.retention.hours", Kind::Int, Some("168")),
    b("log.retention.minutes", Kind::Int, None),
    b("log.retention.ms", Kind::Long, None),
    b("log.retention.bytes", Kind::Long, Some("-1")),
    b(
        "log.retention.check.interval.ms",
        Kind::Long,
        Some("300000"),
    ),
    b("log.cleanup.policy", Kind::List, Some("delete")),
    b("log.cleaner.enable", Kind::Bool, Some("true")),
    b("log.cleaner.threads", Kind::Int, Some("1")),
    b(
        "log.cleaner.delete.retention.ms",
        Kind::Long,
        Some("86400000"),
    ),
    b("log.cleaner.min.compaction.lag.ms", Kind::Long, Some("0")),
    b(
        "log.cleaner.max.compaction.lag.ms",
        Kind::Long,
        Some(LONG_MAX),
    ),
    b("log.cleaner.min.cleanable.ratio", Kind::Double, Some("0.5")),
    b("log.segment.delete.delay.ms", Kind::Long, Some("60000")),
    b("log.preallocate", Kind::Bool, Some("false")),
    b("compression.type", Kind::String, Some("producer")),
    b("min.insync.replicas", Kind::Int, Some("1")),
    b("unclean.leader.election.enable", Kind::Bool, Some("false")),
    b("offset.metadata.max.bytes", Kind::Int, Some("4096")),
    b("offsets.topic.num.partitions", Kind::Int, Some("50")),
    b("offsets.topic.replication.factor", Kind::Short, Some("3")),
    b("offsets.topic.segment.bytes", Kind::Int, Some("104857600")),
    b("offsets.retention.minutes", Kind::Int, Some("10080")),
    b(
        "offsets.retention.check.interval.ms",
        Kind::Long,
        Some("600000"),
    ),
    b(
        "transaction.state.log.num.partitions",
        Kind::Int,
        Some("50"),
    ),
    b(
        "transaction.state.log.replication.factor",
        Kind::Short,
        Some("3"),
    ),
    b("transaction.state.log.min.isr", Kind::Int, Some("2")),
    b("group.initial.rebalance.delay.ms", Kind::Int, Some("3000")),
    b("group.min.session.timeout.ms", Kind::Int, Some("6000")),
    b("group.max.session.timeout.ms", Kind::Int, Some("1800000")),
    b("group.max.size", Kind::Int, Some("2147483647")),
    b(
        "group.consumer.session.timeout.ms",
        Kind::Int,
        Some("45000"),
    ),
    b(
        "group.consumer.heartbeat.interval.ms",
        Kind::Int,
        Some("5000"),
    ),
    b("replica.lag.time.max.ms", Kind::Long, Some("30000")),
    b("zookeeper.connect", Kind::String, None),
    b("zookeeper.session.timeout.ms", Kind::Int, Some("18000")),
    b("zookeeper.connection.timeout.ms", Kind::Int, None),
    b("broker.rack", Kind::String, None),
    b("cluster.id", Kind::String, None),
    // KRaft-era keys found in Kafka 4's sample server.properties; accepted so such a file
    // starts skua unchanged, and reported by DescribeConfigs like any other key.
    b("process.roles", Kind::List, None),
    b("controller.quorum.voters", Kind::List, None),
    b("controller.quorum.bootstrap.servers", Kind::List, None),
    b("controller.listener.names", Kind::List, None),
    b(
        "share.coordinator.state.topic.replication.factor",
        Kind::Short,
        Some("3"),
    ),
    b(
        "share.coordinator.state.topic.min.isr",
        Kind::Short,
        Some("2"),
    ),
];

/// A topic key, the broker key it falls back to, and its kind.
pub struct TopicKey {
    pub name: &'static str,
    pub broker_synonym: Option<&'static str>,
    pub kind: Kind,
    /// Used when the broker synonym has no value either (e.g. `retention.ms`, derived from hours).
    pub default: &'static str,
}

const fn t(
    name: &'static str,
    broker_synonym: Option<&'static str>,
    kind: Kind,
    default: &'static str,
) -> TopicKey {
    TopicKey {
        name,
        broker_synonym,
        kind,
        default,
    }
}

pub static TOPIC_KEYS: &[TopicKey] = &[
    t(
        "cleanup.policy",
        Some("log.cleanup.policy"),
        Kind::List,
        "delete",
    ),
    t(
        "compression.type",
        Some("compression.type"),
        Kind::String,
        "producer",
    ),
    t(
        "delete.retention.ms",
        Some("log.cleaner.delete.retention.ms"),
        Kind::Long,
        "86400000",
    ),
    t(
        "file.delete.delay.ms",
        Some("log.segment.delete.delay.ms"),
        Kind::Long,
        "60000",
    ),
    t(
        "flush.messages",
        Some("log.flush.interval.messages"),
        Kind::Long,
        LONG_MAX,
    ),
    t(
        "flush.ms",
        Some("log.flush.interval.ms"),
        Kind::Long,
        LONG_MAX,
    ),
    t(
        "index.interval.bytes",
        Some("log.index.interval.bytes"),
        Kind::Int,
        "4096",
    ),
    t(
        "max.compaction.lag.ms",
        Some("log.cleaner.max.compaction.lag.ms"),
        Kind::Long,
        LONG_MAX,
    ),
    t(
        "max.decompressed.message.bytes",
        None,
        Kind::Int,
        "2147483639",
    ),
    t(
        "max.message.bytes",
        Some("message.max.bytes"),
        Kind::Int,
        "1048588",
    ),
    t(
        "message.timestamp.after.max.ms",
        Some("log.message.timestamp.after.max.ms"),
        Kind::Long,
        "3600000",
    ),
    t(
        "message.timestamp.before.max.ms",
        Some("log.message.timestamp.before.max.ms"),
        Kind::Long,
        LONG_MAX,
    ),
    t(
        "message.timestamp.type",
        Some("log.message.timestamp.type"),
        Kind::String,
        "CreateTime",
    ),
    t(
        "min.cleanable.dirty.ratio",
        Some("log.cleaner.min.cleanable.ratio"),
        Kind::Double,
        "0.5",
    ),
    t(
        "min.compaction.lag.ms",
        Some("log.cleaner.min.compaction.lag.ms"),
        Kind::Long,
        "0",
    ),
    t(
        "min.insync.replicas",
        Some("min.insync.replicas"),
        Kind::Int,
        "1",
    ),
    t("preallocate", Some("log.preallocate"), Kind::Bool, "false"),
    t(
        "retention.bytes",
        Some("log.retention.bytes"),
        Kind::Long,
        "-1",
    ),
    t(
        "retention.ms",
        Some("log.retention.ms"),
        Kind::Long,
        "604800000",
    ),
    t(
        "segment.bytes",
        Some("log.segment.bytes"),
        Kind::Int,
        "1073741824",
    ),
    t(
        "segment.index.bytes",
        Some("log.index.size.max.bytes"),
        Kind::Int,
        "10485760",
    ),
    t(
        "segment.jitter.ms",
        Some("log.roll.jitter.ms"),
        Kind::Long,
        "0",
    ),
    t("segment.ms", Some("log.roll.ms"), Kind::Long, "604800000"),
    t(
        "unclean.leader.election.enable",
        Some("unclean.leader.election.enable"),
        Kind::Bool,
        "false",
    ),
];

pub fn broker_key(name: &str) -> Option<&'static BrokerKey> {
    BROKER_KEYS.iter().find(|k| k.name == name)
}

pub fn topic_key(name: &str) -> Option<&'static TopicKey> {
    TOPIC_KEYS.iter().find(|k| k.name == name)
}
