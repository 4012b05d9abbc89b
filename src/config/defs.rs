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
    Class,
    Password,
}

impl Kind {
    /// From Kafka's type name (`ConfigDef.Type.name()`).
    pub fn from_kafka(name: &str) -> Option<Kind> {
        Some(match name {
            "INT" => Kind::Int,
            "LONG" => Kind::Long,
            "SHORT" => Kind::Short,
            "DOUBLE" => Kind::Double,
            "BOOLEAN" => Kind::Bool,
            "STRING" => Kind::String,
            "LIST" => Kind::List,
            "CLASS" => Kind::Class,
            "PASSWORD" => Kind::Password,
            _ => return None,
        })
    }

    /// Checks that `value` is well formed for this kind; returns why not, in the words of
    /// Kafka's `ConfigDef.parseType`.
    pub fn check(self, value: &str) -> Result<(), String> {
        let v = value.trim();
        let (ok, kafka_type) = match self {
            Kind::Int => (v.parse::<i32>().is_ok(), "INT"),
            Kind::Long => (v.parse::<i64>().is_ok(), "LONG"),
            Kind::Short => (v.parse::<i16>().is_ok(), "SHORT"),
            Kind::Double => (v.parse::<f64>().is_ok(), "DOUBLE"),
            Kind::Bool => {
                let ok = v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false");
                return ok
                    .then_some(())
                    .ok_or_else(|| "Expected value to be either true or false".into());
            }
            Kind::String | Kind::List | Kind::Class | Kind::Password => (true, ""),
        };
        match ok {
            true => Ok(()),
            false => Err(format!("Not a number of type {kafka_type}")),
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
            Kind::Class => 8,
            Kind::Password => 9,
        }
    }
}

/// A constraint on a key's value beyond its kind (Kafka's `ConfigDef.Validator`s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Validator {
    /// `Range.atLeast`.
    AtLeast(i64),
    /// `Range.between` (inclusive), as used for ratios.
    Between(f64, f64),
    /// `ValidString.in`.
    OneOf(&'static [&'static str]),
    /// `ValidList.in`: a comma-separated list of these.
    ListOf(&'static [&'static str]),
    /// `ShareGroupAutoOffsetResetStrategy.Validator` (`share.auto.offset.reset`):
    /// `earliest`, `latest` or `by_duration:` and a non-negative ISO-8601 duration.
    ShareAutoOffsetReset,
}

impl Validator {
    /// Checks a well-formed value; returns why not in Kafka's words (what follows
    /// "Invalid value V for configuration K: ").
    pub fn check(self, value: &str) -> Result<(), String> {
        let v = value.trim();
        match self {
            Validator::AtLeast(min) => match v.parse::<i64>() {
                Ok(n) if n < min => Err(format!("Value must be at least {min}")),
                _ => Ok(()),
            },
            Validator::Between(min, max) => match v.parse::<f64>() {
                // Kafka declares these bounds as integers, so they print without a fraction.
                Ok(n) if n < min => Err(format!("Value must be at least {min}")),
                Ok(n) if n > max => Err(format!("Value must be no more than {max}")),
                _ => Ok(()),
            },
            Validator::OneOf(allowed) => one_of(allowed, v),
            Validator::ListOf(allowed) => v
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .try_for_each(|e| one_of(allowed, e)),
            Validator::ShareAutoOffsetReset => share_auto_offset_reset(value),
        }
    }
}

fn one_of(allowed: &[&str], v: &str) -> Result<(), String> {
    match allowed.contains(&v) {
        true => Ok(()),
        false => Err(format!("String must be one of: {}", allowed.join(", "))),
    }
}

/// Kafka's `AutoOffsetResetStrategy.fromString` as a share group takes it.
fn share_auto_offset_reset(value: &str) -> Result<(), String> {
    let v = value.trim();
    let ok = match v.strip_prefix("by_duration:") {
        Some(duration) => iso8601_duration_ms(duration).is_some_and(|ms| ms >= 0),
        None => v == "earliest" || v == "latest",
    };
    match ok {
        true => Ok(()),
        false => Err(format!(
            "Invalid value `{value}` for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
        )),
    }
}

/// Milliseconds of an ISO-8601 duration as Java's `Duration.parse` reads it
/// (`[-]PnDTnHnMn.nS`, each part optional but at least one present, each signed); None
/// when it is not one.
pub fn iso8601_duration_ms(text: &str) -> Option<i128> {
    let upper = text.to_ascii_uppercase();
    let (negative, rest) = match upper.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, upper.strip_prefix('+').unwrap_or(&upper)),
    };
    let rest = rest.strip_prefix('P')?;
    let (date, time) = match rest.split_once('T') {
        Some((d, t)) if !t.is_empty() => (d, Some(t)),
        Some(_) => return None,
        None => (rest, None),
    };
    let mut total: i128 = 0;
    let mut parts = 0;
    let mut read = |text: &str, units: &[(char, i128)]| -> Option<()> {
        let mut text = text;
        for &(unit, ms) in units {
            if text.is_empty() {
                break;
            }
            let Some(at) = text.find(unit) else {
                continue;
            };
            let number = &text[..at];
            total += if unit == 'S' {
                seconds_ms(number)?
            } else {
                number.parse::<i64>().ok()? as i128 * ms
            };
            parts += 1;
            text = &text[at + 1..];
        }
        text.is_empty().then_some(())
    };
    read(date, &[('D', 86_400_000)])?;
    if let Some(time) = time {
        read(time, &[('H', 3_600_000), ('M', 60_000), ('S', 1_000)])?;
    }
    (parts > 0).then_some(if negative { -total } else { total })
}

/// `n` or `n.fff` seconds (a fraction of up to 9 digits), in whole milliseconds.
fn seconds_ms(number: &str) -> Option<i128> {
    let (whole, fraction) = number
        .split_once(['.', ','])
        .map_or((number, ""), |(w, f)| (w, f));
    if fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let seconds = whole.parse::<i64>().ok()? as i128;
    let nanos = format!("{fraction:0<9}").parse::<i128>().ok()?;
    let nanos = if whole.starts_with('-') {
        -nanos
    } else {
        nanos
    };
    Some(seconds * 1_000 + nanos / 1_000_000)
}

/// `BrokerCompressionType.names()`, in Kafka's order.
const COMPRESSION_TYPES: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
const CLEANUP_POLICIES: &[&str] = &["compact", "delete"];
const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];
const ISOLATION_LEVELS: &[&str] = &["read_committed", "read_uncommitted"];
/// KIP-1030 (Kafka 4.0): segments of at least 1 MiB.
pub const SEGMENT_BYTES_MIN: i64 = 1024 * 1024;

/// Kafka 4's validator for a broker or topic key, where it has one.
pub fn validator(name: &str) -> Option<Validator> {
    use Validator::*;
    Some(match name {
        // Topic keys (LogConfig) and their broker synonyms.
        "segment.bytes" | "log.segment.bytes" => AtLeast(SEGMENT_BYTES_MIN),
        "segment.ms" | "max.compaction.lag.ms" | "log.cleaner.max.compaction.lag.ms" => AtLeast(1),
        "segment.index.bytes" | "log.index.size.max.bytes" => AtLeast(4),
        "flush.messages" | "log.flush.interval.messages" => AtLeast(1),
        "min.insync.replicas" => AtLeast(1),
        "retention.ms" => AtLeast(-1),
        "segment.jitter.ms"
        | "flush.ms"
        | "max.message.bytes"
        | "message.max.bytes"
        | "index.interval.bytes"
        | "log.index.interval.bytes"
        | "delete.retention.ms"
        | "log.cleaner.delete.retention.ms"
        | "min.compaction.lag.ms"
        | "log.cleaner.min.compaction.lag.ms"
        | "file.delete.delay.ms"
        | "log.segment.delete.delay.ms"
        | "message.timestamp.before.max.ms"
        | "message.timestamp.after.max.ms"
        | "log.message.timestamp.before.max.ms"
        | "log.message.timestamp.after.max.ms"
        | "log.roll.jitter.hours"
        | "log.flush.offset.checkpoint.interval.ms"
        | "log.flush.start.offset.checkpoint.interval.ms"
        | "log.cleaner.threads"
        | "log.cleaner.io.buffer.size"
        | "log.cleaner.backoff.ms"
        | "max.connections"
        | "max.incremental.fetch.session.cache.slots" => AtLeast(0),
        "min.cleanable.dirty.ratio" | "log.cleaner.min.cleanable.ratio" => Between(0.0, 1.0),
        "cleanup.policy" | "log.cleanup.policy" => ListOf(CLEANUP_POLICIES),
        "compression.type" => OneOf(COMPRESSION_TYPES),
        "message.timestamp.type" | "log.message.timestamp.type" => OneOf(TIMESTAMP_TYPES),
        // Broker-only keys.
        "num.partitions"
        | "log.roll.hours"
        | "log.retention.check.interval.ms"
        | "num.recovery.threads.per.data.dir"
        | "socket.request.max.bytes"
        | "queued.max.requests"
        | "num.network.threads"
        | "num.io.threads"
        | "offsets.topic.num.partitions"
        | "offsets.topic.replication.factor"
        | "offsets.topic.segment.bytes"
        | "offsets.retention.minutes"
        | "offsets.retention.check.interval.ms"
        | "transaction.state.log.num.partitions"
        | "transaction.state.log.replication.factor"
        | "transaction.state.log.min.isr"
        | "transaction.state.log.segment.bytes"
        | "transaction.max.timeout.ms"
        | "transactional.id.expiration.ms"
        | "transaction.abort.timed.out.transaction.cleanup.interval.ms"
        | "transaction.remove.expired.transaction.cleanup.interval.ms"
        | "producer.id.expiration.ms"
        | "producer.id.expiration.check.interval.ms"
        | "leader.imbalance.check.interval.seconds" => AtLeast(1),
        "request.timeout.ms" => AtLeast(0),
        // Group keys (Kafka 4.4's GroupConfig).
        "consumer.session.timeout.ms"
        | "consumer.heartbeat.interval.ms"
        | "share.session.timeout.ms"
        | "share.heartbeat.interval.ms"
        | "streams.session.timeout.ms"
        | "streams.heartbeat.interval.ms"
        | "streams.task.offset.interval.ms" => AtLeast(1),
        "consumer.assignment.interval.ms"
        | "share.assignment.interval.ms"
        | "streams.num.standby.replicas"
        | "streams.initial.rebalance.delay.ms"
        | "streams.assignment.interval.ms"
        | "streams.num.warmup.replicas"
        | "streams.acceptable.recovery.lag" => AtLeast(0),
        "share.record.lock.duration.ms" => AtLeast(1000),
        "share.delivery.count.limit" => AtLeast(2),
        "share.partition.max.record.locks" => AtLeast(100),
        "share.isolation.level" => OneOf(ISOLATION_LEVELS),
        "share.auto.offset.reset" => ShareAutoOffsetReset,
        _ => return None,
    })
}

/// Checks `value` for key `name` as Kafka's `ConfigDef` does (kind, then validator); the
/// error is Kafka's reason, which its messages put after
/// `Invalid value V for configuration K: `.
pub fn check_value(name: &str, kind: Kind, value: &str) -> Result<(), String> {
    kind.check(value)
        .and_then(|()| validator(name).map_or(Ok(()), |v| v.check(value)))
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
    b(
        "max.incremental.fetch.session.cache.slots",
        Kind::Int,
        Some("1000"),
    ),
    // Kafka's default is -1 (unbounded); skua bounds the bytes of requests read but not
    // yet answered, broker-wide, at 256 MiB by default (<= 0 turns the bound off).
    b("queued.max.request.bytes", Kind::Long, Some("268435456")),
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
        "log.cleaner.dedupe.buffer.size",
        Kind::Long,
        Some("134217728"),
    ),
    b("log.cleaner.io.buffer.size", Kind::Int, Some("524288")),
    b(
        "log.cleaner.io.buffer.load.factor",
        Kind::Double,
        Some("0.9"),
    ),
    b(
        "log.cleaner.io.max.bytes.per.second",
        Kind::Double,
        Some("1.7976931348623157E308"),
    ),
    b("log.cleaner.backoff.ms", Kind::Long, Some("15000")),
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
    b(
        "transaction.state.log.segment.bytes",
        Kind::Int,
        Some("104857600"),
    ),
    b("transaction.max.timeout.ms", Kind::Int, Some("900000")),
    b(
        "transactional.id.expiration.ms",
        Kind::Int,
        Some("604800000"),
    ),
    b(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        Kind::Int,
        Some("10000"),
    ),
    b(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        Kind::Int,
        Some("3600000"),
    ),
    b("group.initial.rebalance.delay.ms", Kind::Int, Some("3000")),
    b("group.min.session.timeout.ms", Kind::Int, Some("6000")),
    b("group.max.session.timeout.ms", Kind::Int, Some("1800000")),
    b("group.max.size", Kind::Int, Some("2147483647")),
    // KIP-848 consumer groups: the defaults, and the bounds a group's own configs must keep.
    b(
        "group.consumer.session.timeout.ms",
        Kind::Int,
        Some("45000"),
    ),
    b(
        "group.consumer.min.session.timeout.ms",
        Kind::Int,
        Some("45000"),
    ),
    b(
        "group.consumer.max.session.timeout.ms",
        Kind::Int,
        Some("60000"),
    ),
    b(
        "group.consumer.heartbeat.interval.ms",
        Kind::Int,
        Some("5000"),
    ),
    b(
        "group.consumer.min.heartbeat.interval.ms",
        Kind::Int,
        Some("5000"),
    ),
    b(
        "group.consumer.max.heartbeat.interval.ms",
        Kind::Int,
        Some("15000"),
    ),
    b(
        "group.consumer.assignment.interval.ms",
        Kind::Int,
        Some("1000"),
    ),
    b(
        "group.consumer.min.assignment.interval.ms",
        Kind::Int,
        Some("0"),
    ),
    b(
        "group.consumer.max.assignment.interval.ms",
        Kind::Int,
        Some("15000"),
    ),
    b(
        "group.consumer.assignor.offload.enable",
        Kind::Bool,
        Some("true"),
    ),
    b("group.consumer.max.size", Kind::Int, Some("2147483647")),
    b(
        "group.consumer.regex.refresh.interval.ms",
        Kind::Int,
        Some("600000"),
    ),
    // Share groups (KIP-932, being built); streams groups do not exist in skua, their
    // keys bound group configs.
    b("group.share.session.timeout.ms", Kind::Int, Some("45000")),
    b("group.share.max.size", Kind::Int, Some("200")),
    b("group.share.max.share.sessions", Kind::Int, Some("2000")),
    b(
        "group.share.min.session.timeout.ms",
        Kind::Int,
        Some("45000"),
    ),
    b(
        "group.share.max.session.timeout.ms",
        Kind::Int,
        Some("60000"),
    ),
    b("group.share.heartbeat.interval.ms", Kind::Int, Some("5000")),
    b(
        "group.share.min.heartbeat.interval.ms",
        Kind::Int,
        Some("5000"),
    ),
    b(
        "group.share.max.heartbeat.interval.ms",
        Kind::Int,
        Some("15000"),
    ),
    b(
        "group.share.assignment.interval.ms",
        Kind::Int,
        Some("1000"),
    ),
    b(
        "group.share.min.assignment.interval.ms",
        Kind::Int,
        Some("0"),
    ),
    b(
        "group.share.max.assignment.interval.ms",
        Kind::Int,
        Some("15000"),
    ),
    b(
        "group.share.assignor.offload.enable",
        Kind::Bool,
        Some("true"),
    ),
    b(
        "group.share.record.lock.duration.ms",
        Kind::Int,
        Some("30000"),
    ),
    b(
        "group.share.min.record.lock.duration.ms",
        Kind::Int,
        Some("15000"),
    ),
    b(
        "group.share.max.record.lock.duration.ms",
        Kind::Int,
        Some("60000"),
    ),
    b("group.share.delivery.count.limit", Kind::Int, Some("5")),
    b("group.share.min.delivery.count.limit", Kind::Int, Some("2")),
    b(
        "group.share.max.delivery.count.limit",
        Kind::Int,
        Some("10"),
    ),
    b(
        "group.share.partition.max.record.locks",
        Kind::Int,
        Some("2000"),
    ),
    b(
        "group.share.min.partition.max.record.locks",
        Kind::Int,
        Some("100"),
    ),
    b(
        "group.share.max.partition.max.record.locks",
        Kind::Int,
        Some("4000"),
    ),
    b("group.streams.session.timeout.ms", Kind::Int, Some("45000")),
    b(
        "group.streams.min.session.timeout.ms",
        Kind::Int,
        Some("45000"),
    ),
    b(
        "group.streams.max.session.timeout.ms",
        Kind::Int,
        Some("60000"),
    ),
    b(
        "group.streams.heartbeat.interval.ms",
        Kind::Int,
        Some("5000"),
    ),
    b(
        "group.streams.min.heartbeat.interval.ms",
        Kind::Int,
        Some("5000"),
    ),
    b(
        "group.streams.max.heartbeat.interval.ms",
        Kind::Int,
        Some("15000"),
    ),
    b(
        "group.streams.assignment.interval.ms",
        Kind::Int,
        Some("1000"),
    ),
    b(
        "group.streams.min.assignment.interval.ms",
        Kind::Int,
        Some("0"),
    ),
    b(
        "group.streams.max.assignment.interval.ms",
        Kind::Int,
        Some("15000"),
    ),
    b(
        "group.streams.assignor.offload.enable",
        Kind::Bool,
        Some("true"),
    ),
    b("group.streams.num.standby.replicas", Kind::Int, Some("0")),
    b("group.streams.max.standby.replicas", Kind::Int, Some("2")),
    b(
        "group.streams.initial.rebalance.delay.ms",
        Kind::Int,
        Some("3000"),
    ),
    b(
        "group.streams.task.offset.interval.ms",
        Kind::Int,
        Some("60000"),
    ),
    b(
        "group.streams.min.task.offset.interval.ms",
        Kind::Int,
        Some("15000"),
    ),
    b("group.streams.num.warmup.replicas", Kind::Int, Some("2")),
    b("group.streams.max.warmup.replicas", Kind::Int, Some("20")),
    b(
        "group.streams.acceptable.recovery.lag",
        Kind::Long,
        Some("10000"),
    ),
    b(
        "group.streams.rack.aware.assignment.tags",
        Kind::List,
        Some(""),
    ),
    b("group.streams.assignors", Kind::List, Some("sticky")),
    b("replica.lag.time.max.ms", Kind::Long, Some("30000")),
    b(
        "replica.high.watermark.checkpoint.interval.ms",
        Kind::Long,
        Some("5000"),
    ),
    // The replica fetchers: connections per source broker, and their Fetch requests.
    b("num.replica.fetchers", Kind::Int, Some("1")),
    b("replica.fetch.max.bytes", Kind::Int, Some("1048576")),
    b(
        "replica.fetch.response.max.bytes",
        Kind::Int,
        Some("10485760"),
    ),
    b("replica.fetch.min.bytes", Kind::Int, Some("1")),
    b("replica.fetch.wait.max.ms", Kind::Int, Some("500")),
    b("replica.fetch.backoff.ms", Kind::Int, Some("1000")),
    b("replica.socket.timeout.ms", Kind::Int, Some("30000")),
    // Client quotas: how produce, fetch and request rates (and controller mutations)
    // are measured.
    b("quota.window.num", Kind::Int, Some("11")),
    b("quota.window.size.seconds", Kind::Int, Some("1")),
    b("controller.quota.window.num", Kind::Int, Some("11")),
    b("controller.quota.window.size.seconds", Kind::Int, Some("1")),
    // Replication throttles (KIP-73): how the replicated byte rate is measured.
    b("replication.quota.window.num", Kind::Int, Some("11")),
    b(
        "replication.quota.window.size.seconds",
        Kind::Int,
        Some("1"),
    ),
    b("producer.id.expiration.ms", Kind::Int, Some("86400000")),
    b(
        "producer.id.expiration.check.interval.ms",
        Kind::Int,
        Some("600000"),
    ),
    b("zookeeper.connect", Kind::String, None),
    b("zookeeper.session.timeout.ms", Kind::Int, Some("18000")),
    b("zookeeper.connection.timeout.ms", Kind::Int, None),
    b("broker.rack", Kind::String, None),
    b("cluster.id", Kind::String, None),
    // skua's: where the Prometheus metrics are served (off by default).
    b("metrics.listener", Kind::String, None),
    // The authorizer (`auth::settings`): Kafka's class names select skua's ACL
    // authorizer; the other two are the authorizer's own keys, which Kafka passes to it.
    b("authorizer.class.name", Kind::String, Some("")),
    b("super.users", Kind::String, None),
    b("allow.everyone.if.no.acl.found", Kind::Bool, Some("false")),
    // ZooKeeper mode: the controller's request timeout, how long admin requests wait for
    // it, and the inter-broker protocol (`inter_broker_protocol.rs`: the versions followers
    // send; a skua controller sends Kafka 3.9's requests whatever it is set to).
    b("controller.socket.timeout.ms", Kind::Int, Some("30000")),
    b("request.timeout.ms", Kind::Int, Some("30000")),
    // ZooKeeper mode: controlled shutdown (the broker's side) and the controller's
    // automatic preferred-leader rebalance.
    b("controlled.shutdown.enable", Kind::Bool, Some("true")),
    b("controlled.shutdown.max.retries", Kind::Int, Some("3")),
    b(
        "controlled.shutdown.retry.backoff.ms",
        Kind::Long,
        Some("5000"),
    ),
    b("auto.leader.rebalance.enable", Kind::Bool, Some("true")),
    b(
        "leader.imbalance.per.broker.percentage",
        Kind::Int,
        Some("10"),
    ),
    b(
        "leader.imbalance.check.interval.seconds",
        Kind::Long,
        Some("300"),
    ),
    b(
        "security.inter.broker.protocol",
        Kind::String,
        Some("PLAINTEXT"),
    ),
    b(
        "inter.broker.protocol.version",
        Kind::String,
        Some("3.9-IV0"),
    ),
    // KRaft (config/kraft.rs): the roles, the controller quorum a `process.roles=broker`
    // node registers with and follows, and its lifecycle's timings. `broker,controller`
    // (Kafka 4's single-node server.properties) keeps skua's own single-node metadata log.
    b("process.roles", Kind::List, None),
    b("controller.quorum.voters", Kind::List, None),
    b("controller.quorum.bootstrap.servers", Kind::List, None),
    b("controller.listener.names", Kind::List, None),
    b("broker.heartbeat.interval.ms", Kind::Int, Some("2000")),
    b("broker.session.timeout.ms", Kind::Int, Some("9000")),
    b(
        "initial.broker.registration.timeout.ms",
        Kind::Int,
        Some("60000"),
    ),
    b(
        "controller.quorum.request.timeout.ms",
        Kind::Int,
        Some("2000"),
    ),
    b("controller.quorum.retry.backoff.ms", Kind::Int, Some("20")),
    b(
        "controller.quorum.fetch.timeout.ms",
        Kind::Int,
        Some("2000"),
    ),
    // Where the KRaft metadata log lives; the first log dir when unset.
    b("metadata.log.dir", Kind::String, None),
    b(
        "share.coordinator.state.topic.num.partitions",
        Kind::Int,
        Some("50"),
    ),
    b(
        "share.coordinator.state.topic.segment.bytes",
        Kind::Int,
        Some("104857600"),
    ),
    b(
        "share.coordinator.snapshot.update.records.per.snapshot",
        Kind::Int,
        Some("500"),
    ),
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

/// The broker keys that bound a group key's value (Kafka 4.4's `GroupConfig.validateValues`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupBound {
    None,
    /// Between the values of these two broker keys, inclusive.
    Range(&'static str, &'static str),
    AtLeast(&'static str),
    AtMost(&'static str),
}

/// A group key (resource type GROUP): its kind, the broker key it falls back to, its
/// default when it has none, whether Kafka hides it until it is set (`defineInternal`),
/// and the broker keys bounding it.
#[derive(Debug, PartialEq, Eq)]
pub struct GroupKey {
    pub name: &'static str,
    pub kind: Kind,
    pub broker_synonym: Option<&'static str>,
    pub default: &'static str,
    pub internal: bool,
    pub bound: GroupBound,
}

const fn g(
    name: &'static str,
    kind: Kind,
    broker_synonym: Option<&'static str>,
    bound: GroupBound,
) -> GroupKey {
    GroupKey {
        name,
        kind,
        broker_synonym,
        default: "",
        internal: false,
        bound,
    }
}

const fn internal(key: GroupKey) -> GroupKey {
    GroupKey {
        internal: true,
        ..key
    }
}

const fn no_synonym(name: &'static str, kind: Kind, default: &'static str) -> GroupKey {
    GroupKey {
        name,
        kind,
        broker_synonym: None,
        default,
        internal: false,
        bound: GroupBound::None,
    }
}

/// Kafka 4.4's group configs, in its definition order (which is the order it checks them).
pub static GROUP_KEYS: &[GroupKey] = &[
    g(
        "consumer.session.timeout.ms",
        Kind::Int,
        Some("group.consumer.session.timeout.ms"),
        GroupBound::Range(
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
        ),
    ),
    g(
        "consumer.heartbeat.interval.ms",
        Kind::Int,
        Some("group.consumer.heartbeat.interval.ms"),
        GroupBound::Range(
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
        ),
    ),
    g(
        "consumer.assignment.interval.ms",
        Kind::Int,
        Some("group.consumer.assignment.interval.ms"),
        GroupBound::Range(
            "group.consumer.min.assignment.interval.ms",
            "group.consumer.max.assignment.interval.ms",
        ),
    ),
    internal(g(
        "consumer.assignor.offload.enable",
        Kind::Bool,
        Some("group.consumer.assignor.offload.enable"),
        GroupBound::None,
    )),
    g(
        "share.session.timeout.ms",
        Kind::Int,
        Some("group.share.session.timeout.ms"),
        GroupBound::Range(
            "group.share.min.session.timeout.ms",
            "group.share.max.session.timeout.ms",
        ),
    ),
    g(
        "share.heartbeat.interval.ms",
        Kind::Int,
        Some("group.share.heartbeat.interval.ms"),
        GroupBound::Range(
            "group.share.min.heartbeat.interval.ms",
            "group.share.max.heartbeat.interval.ms",
        ),
    ),
    g(
        "share.record.lock.duration.ms",
        Kind::Int,
        Some("group.share.record.lock.duration.ms"),
        GroupBound::Range(
            "group.share.min.record.lock.duration.ms",
            "group.share.max.record.lock.duration.ms",
        ),
    ),
    g(
        "share.delivery.count.limit",
        Kind::Int,
        Some("group.share.delivery.count.limit"),
        GroupBound::Range(
            "group.share.min.delivery.count.limit",
            "group.share.max.delivery.count.limit",
        ),
    ),
    g(
        "share.partition.max.record.locks",
        Kind::Int,
        Some("group.share.partition.max.record.locks"),
        GroupBound::Range(
            "group.share.min.partition.max.record.locks",
            "group.share.max.partition.max.record.locks",
        ),
    ),
    no_synonym("share.auto.offset.reset", Kind::String, "latest"),
    no_synonym("share.isolation.level", Kind::String, "read_uncommitted"),
    no_synonym("share.renew.acknowledge.enable", Kind::Bool, "true"),
    g(
        "share.assignment.interval.ms",
        Kind::Int,
        Some("group.share.assignment.interval.ms"),
        GroupBound::Range(
            "group.share.min.assignment.interval.ms",
            "group.share.max.assignment.interval.ms",
        ),
    ),
    internal(g(
        "share.assignor.offload.enable",
        Kind::Bool,
        Some("group.share.assignor.offload.enable"),
        GroupBound::None,
    )),
    g(
        "streams.session.timeout.ms",
        Kind::Int,
        Some("group.streams.session.timeout.ms"),
        GroupBound::Range(
            "group.streams.min.session.timeout.ms",
            "group.streams.max.session.timeout.ms",
        ),
    ),
    g(
        "streams.heartbeat.interval.ms",
        Kind::Int,
        Some("group.streams.heartbeat.interval.ms"),
        GroupBound::Range(
            "group.streams.min.heartbeat.interval.ms",
            "group.streams.max.heartbeat.interval.ms",
        ),
    ),
    g(
        "streams.num.standby.replicas",
        Kind::Int,
        Some("group.streams.num.standby.replicas"),
        GroupBound::AtMost("group.streams.max.standby.replicas"),
    ),
    g(
        "streams.initial.rebalance.delay.ms",
        Kind::Int,
        Some("group.streams.initial.rebalance.delay.ms"),
        GroupBound::None,
    ),
    g(
        "streams.assignment.interval.ms",
        Kind::Int,
        Some("group.streams.assignment.interval.ms"),
        GroupBound::Range(
            "group.streams.min.assignment.interval.ms",
            "group.streams.max.assignment.interval.ms",
        ),
    ),
    internal(g(
        "streams.assignor.offload.enable",
        Kind::Bool,
        Some("group.streams.assignor.offload.enable"),
        GroupBound::None,
    )),
    internal(g(
        "streams.task.offset.interval.ms",
        Kind::Int,
        Some("group.streams.task.offset.interval.ms"),
        GroupBound::AtLeast("group.streams.min.task.offset.interval.ms"),
    )),
    internal(g(
        "streams.num.warmup.replicas",
        Kind::Int,
        Some("group.streams.num.warmup.replicas"),
        GroupBound::AtMost("group.streams.max.warmup.replicas"),
    )),
    g(
        "streams.rack.aware.assignment.tags",
        Kind::List,
        Some("group.streams.rack.aware.assignment.tags"),
        GroupBound::None,
    ),
    internal(g(
        "streams.acceptable.recovery.lag",
        Kind::Long,
        Some("group.streams.acceptable.recovery.lag"),
        GroupBound::None,
    )),
    // Its default is the first of `group.streams.assignors`.
    g(
        "streams.assignor.name",
        Kind::String,
        Some("group.streams.assignors"),
        GroupBound::None,
    ),
    no_synonym("errors.deadletterqueue.topic.name", Kind::String, ""),
    no_synonym(
        "errors.deadletterqueue.copy.record.enable",
        Kind::Bool,
        "false",
    ),
];

pub fn group_key(name: &str) -> Option<&'static GroupKey> {
    GROUP_KEYS.iter().find(|k| k.name == name)
}

pub fn broker_key(name: &str) -> Option<&'static BrokerKey> {
    BROKER_KEYS.iter().find(|k| k.name == name)
}

pub fn topic_key(name: &str) -> Option<&'static TopicKey> {
    TOPIC_KEYS.iter().find(|k| k.name == name)
}

/// The documentation DescribeConfigs gives for keys `kafka_catalog.tsv` does not have:
/// skua's own, and Kafka keys newer than the catalog (empty).
pub fn skua_documentation(name: &str) -> &'static str {
    match name {
        "producer.id.expiration.check.interval.ms" => {
            "How often idle producer ids are looked for and forgotten (see producer.id.expiration.ms)."
        }
        "cluster.id" => "The cluster id to use when the data dirs name none yet (a new cluster).",
        "metrics.listener" => {
            "Where the Prometheus metrics are served, as http://host:port (an empty host is every interface; GET /metrics). Unset: not served."
        }
        "super.users" => {
            "Principals allowed every operation whatever the ACLs, separated by semicolons (User:admin;User:CN=broker)."
        }
        "allow.everyone.if.no.acl.found" => {
            "Whether a resource no ACL matches is open to every principal (false: only super users)."
        }
        "max.decompressed.message.bytes" => {
            "The largest size a compressed batch of this topic may decompress to; larger ones are refused on produce."
        }
        _ => "",
    }
}
