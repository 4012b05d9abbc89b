//! How config values are written and checked (Kafka's `ConfigDef` types and validators),
//! and what skua lays over Kafka's catalog of keys (`catalog`): its own defaults and the
//! few keys Kafka does not have.

use super::catalog::{ConfigKey, Scope, UpdateMode};

/// How a value is written and checked (Kafka's `ConfigDef.Type`).
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

    /// The type DescribeConfigs v3+ reports (`ConfigType` in Kafka's protocol).
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

    /// Kafka's `ConfigDef.Type` name, for messages.
    pub fn kafka_name(self) -> &'static str {
        match self {
            Kind::Bool => "BOOLEAN",
            Kind::String => "STRING",
            Kind::Int => "INT",
            Kind::Short => "SHORT",
            Kind::Long => "LONG",
            Kind::Double => "DOUBLE",
            Kind::List => "LIST",
            Kind::Class => "CLASS",
            Kind::Password => "PASSWORD",
        }
    }
}

/// A constraint on a key's value beyond its kind (Kafka's `ConfigDef.Validator`s that skua
/// checks; others are left to the kind).
#[derive(Clone, Debug, PartialEq)]
pub enum Validator {
    /// `Range`: bounds as Kafka prints them (`Value must be at least 1048576`).
    Range {
        min: Option<&'static str>,
        max: Option<&'static str>,
    },
    /// `ValidString.in`.
    OneOf(Vec<&'static str>),
    /// `ValidList.in`: a comma-separated list of these.
    ListOf(Vec<&'static str>),
}

impl Validator {
    pub const fn at_least(min: &'static str) -> Validator {
        Validator::Range {
            min: Some(min),
            max: None,
        }
    }

    /// Reads Kafka's `toString` of a validator: `[1,...]`, `[0,...,1]`, `[a, b]`. Anything
    /// else (custom validators) is not checked beyond the kind.
    pub fn from_kafka(text: &'static str, kind: Kind) -> Option<Validator> {
        let inner = text.strip_prefix('[')?.strip_suffix(']')?;
        if let Some((min, max)) = inner.split_once(",...,") {
            return Some(Validator::Range {
                min: (min != "...").then_some(min),
                max: Some(max),
            });
        }
        if let Some(min) = inner.strip_suffix(",...") {
            return Some(Validator::at_least(min));
        }
        if let Some(max) = inner.strip_prefix("...,") {
            return Some(Validator::Range {
                min: None,
                max: Some(max),
            });
        }
        if inner.contains('[') || inner.contains(':') {
            return None;
        }
        let items: Vec<&'static str> = inner.split(", ").collect();
        match kind {
            Kind::List => Some(Validator::ListOf(items)),
            Kind::String => Some(Validator::OneOf(items)),
            _ => None,
        }
    }

    /// Checks a well-formed value; returns why not in Kafka's words (what follows
    /// "Invalid value V for configuration K: ").
    pub fn check(&self, value: &str) -> Result<(), String> {
        let v = value.trim();
        match self {
            Validator::Range { min, max } => {
                let Ok(n) = v.parse::<f64>() else {
                    return Ok(());
                };
                let bound = |b: Option<&'static str>| {
                    b.and_then(|s| s.parse::<f64>().ok().map(|f| (f, s)))
                };
                if let Some((_, text)) = bound(*min).filter(|(m, _)| n < *m) {
                    return Err(format!("Value must be at least {text}"));
                }
                if let Some((_, text)) = bound(*max).filter(|(m, _)| n > *m) {
                    return Err(format!("Value must be no more than {text}"));
                }
                Ok(())
            }
            Validator::OneOf(allowed) => one_of(allowed, v),
            Validator::ListOf(allowed) => v
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .try_for_each(|e| one_of(allowed, e)),
        }
    }
}

fn one_of(allowed: &[&str], v: &str) -> Result<(), String> {
    match allowed.contains(&v) {
        true => Ok(()),
        false => Err(format!("String must be one of: {}", allowed.join(", "))),
    }
}

/// KIP-1030 (Kafka 4.0): segments of at least 1 MiB.
pub const SEGMENT_BYTES_MIN: i64 = 1024 * 1024;

/// Validators of skua's own keys (Kafka's keys take theirs from the catalog).
pub fn validator(name: &str) -> Option<Validator> {
    Some(match name {
        "producer.id.expiration.check.interval.ms" => Validator::at_least("1"),
        "max.decompressed.message.bytes" => Validator::at_least("0"),
        _ => return None,
    })
}

/// Checks `value` for the key `name` as Kafka's `ConfigDef` does (kind, then validator);
/// the error is Kafka's reason, which its messages put after
/// `Invalid value V for configuration K: `.
pub fn check_value(key: &ConfigKey, value: &str) -> Result<(), String> {
    key.kind
        .check(value)
        .and_then(|()| key.validator.as_ref().map_or(Ok(()), |v| v.check(value)))
}

pub const LONG_MAX: &str = "9223372036854775807";

/// Where skua's defaults differ from Kafka's: the quickstart's `broker.id` (as its
/// `node.id`), data under `./data`, and a bound on request memory Kafka leaves unbounded
/// (`queued.max.request.bytes` <= 0 turns it off).
pub const SKUA_BROKER_DEFAULTS: &[(&str, &str)] = &[
    ("broker.id", "1"),
    ("log.dir", "./data"),
    ("queued.max.request.bytes", "268435456"),
];

/// Keys skua has and Kafka does not define (or keeps internal).
pub fn skua_keys() -> Vec<ConfigKey> {
    let key = |scope, name, kind, default: &str, documentation: &str| ConfigKey {
        scope,
        name,
        kind,
        default: Some(default.to_string()),
        mode: UpdateMode::ReadOnly,
        validator: None,
        synonyms: vec![name],
        documentation: documentation.to_string(),
        only_in_3_9: false,
    };
    vec![
        key(
            Scope::Broker,
            "producer.id.expiration.check.interval.ms",
            Kind::Int,
            "600000",
            "How often idle producer ids are looked for and forgotten (see producer.id.expiration.ms).",
        ),
        ConfigKey {
            default: None,
            ..key(
                Scope::Broker,
                "cluster.id",
                Kind::String,
                "",
                "The cluster id to use when the data dirs name none yet (a new cluster).",
            )
        },
        ConfigKey {
            synonyms: vec![],
            ..key(
                Scope::Topic,
                "max.decompressed.message.bytes",
                Kind::Int,
                "2147483639",
                "The largest record a compressed batch of this topic may decompress to; larger ones are refused on produce.",
            )
        },
    ]
}
