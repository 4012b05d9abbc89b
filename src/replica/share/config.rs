//! A share-partition's limits and where a new one starts, with Kafka's names, defaults and
//! ranges (`ShareGroupConfig` for the broker's `group.share.*`, `GroupConfig` for a group's
//! `share.*` overrides, `ShareGroupAutoOffsetResetStrategy`).

use std::fmt;

pub const RECORD_LOCK_DURATION_MS_CONFIG: &str = "group.share.record.lock.duration.ms";
pub const RECORD_LOCK_DURATION_MS_DEFAULT: i64 = 30_000;
pub const RECORD_LOCK_DURATION_MS_MIN: i64 = 1_000;
pub const RECORD_LOCK_DURATION_MS_MAX: i64 = 3_600_000;

pub const DELIVERY_COUNT_LIMIT_CONFIG: &str = "group.share.delivery.count.limit";
pub const DELIVERY_COUNT_LIMIT_DEFAULT: u16 = 5;
pub const DELIVERY_COUNT_LIMIT_MIN: u16 = 2;
pub const DELIVERY_COUNT_LIMIT_MAX: u16 = 10;

pub const PARTITION_MAX_RECORD_LOCKS_CONFIG: &str = "group.share.partition.max.record.locks";
pub const PARTITION_MAX_RECORD_LOCKS_DEFAULT: u32 = 2_000;
pub const PARTITION_MAX_RECORD_LOCKS_MIN: u32 = 100;
pub const PARTITION_MAX_RECORD_LOCKS_MAX: u32 = 10_000;

/// A value outside Kafka's range for its setting.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid value {value} for {name}: must be between {min} and {max}")]
pub struct RangeError {
    pub name: &'static str,
    pub value: i64,
    pub min: i64,
    pub max: i64,
}

/// The limits one share-partition runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharePartitionConfig {
    /// How long an acquired record stays locked to its member.
    pub record_lock_duration_ms: i64,
    /// Deliveries after which a record is archived instead of made available again.
    pub delivery_count_limit: u16,
    /// The in-flight window's size: records between the start offset and the end offset
    /// (Kafka's `maxInFlightRecords`).
    pub max_record_locks: u32,
}

impl Default for SharePartitionConfig {
    fn default() -> Self {
        SharePartitionConfig {
            record_lock_duration_ms: RECORD_LOCK_DURATION_MS_DEFAULT,
            delivery_count_limit: DELIVERY_COUNT_LIMIT_DEFAULT,
            max_record_locks: PARTITION_MAX_RECORD_LOCKS_DEFAULT,
        }
    }
}

impl SharePartitionConfig {
    /// Checks every value against Kafka's range, as its `ConfigDef` validators do.
    pub fn validate(&self) -> Result<(), RangeError> {
        check(
            RECORD_LOCK_DURATION_MS_CONFIG,
            self.record_lock_duration_ms,
            RECORD_LOCK_DURATION_MS_MIN,
            RECORD_LOCK_DURATION_MS_MAX,
        )?;
        check(
            DELIVERY_COUNT_LIMIT_CONFIG,
            i64::from(self.delivery_count_limit),
            i64::from(DELIVERY_COUNT_LIMIT_MIN),
            i64::from(DELIVERY_COUNT_LIMIT_MAX),
        )?;
        check(
            PARTITION_MAX_RECORD_LOCKS_CONFIG,
            i64::from(self.max_record_locks),
            i64::from(PARTITION_MAX_RECORD_LOCKS_MIN),
            i64::from(PARTITION_MAX_RECORD_LOCKS_MAX),
        )
    }

    /// Records on their delivery number `throttle_limit()` or later are handed out in
    /// shrinking groups, so that one poisonous record does not use up the deliveries of
    /// the whole batch around it (half the limit, rounded up, at least 2).
    pub fn throttle_limit(&self) -> u16 {
        self.delivery_count_limit.div_ceil(2).max(2)
    }
}

fn check(name: &'static str, value: i64, min: i64, max: i64) -> Result<(), RangeError> {
    match (min..=max).contains(&value) {
        true => Ok(()),
        false => Err(RangeError {
            name,
            value,
            min,
            max,
        }),
    }
}

/// `share.auto.offset.reset`: where a share-partition with no persisted state starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ShareAutoOffsetReset {
    Earliest,
    /// Kafka's default: only records produced after the group first reads the partition.
    #[default]
    Latest,
    /// `by_duration:<ISO-8601 duration>`: the first record at or after now minus it.
    ByDuration {
        duration_ms: i64,
    },
}

/// A `share.auto.offset.reset` value Kafka would refuse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid value {0:?} for share.auto.offset.reset")]
pub struct InvalidOffsetReset(pub String);

impl ShareAutoOffsetReset {
    pub fn parse(value: &str) -> Result<Self, InvalidOffsetReset> {
        let lower = value.trim().to_ascii_lowercase();
        match lower.as_str() {
            "earliest" => return Ok(ShareAutoOffsetReset::Earliest),
            "latest" => return Ok(ShareAutoOffsetReset::Latest),
            _ => {}
        }
        let invalid = || InvalidOffsetReset(value.to_string());
        let duration = lower.strip_prefix("by_duration:").ok_or_else(invalid)?;
        let duration_ms = parse_iso8601_duration_ms(duration).ok_or_else(invalid)?;
        Ok(ShareAutoOffsetReset::ByDuration { duration_ms })
    }
}

impl fmt::Display for ShareAutoOffsetReset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShareAutoOffsetReset::Earliest => f.write_str("earliest"),
            ShareAutoOffsetReset::Latest => f.write_str("latest"),
            ShareAutoOffsetReset::ByDuration { duration_ms } => {
                write!(
                    f,
                    "by_duration:PT{}.{:03}S",
                    duration_ms / 1000,
                    duration_ms % 1000
                )
            }
        }
    }
}

/// Java's `Duration.parse` grammar, `PnDTnHnMn.nS`, lower-cased; negative durations are
/// refused as Kafka refuses them. Returns milliseconds (sub-millisecond digits dropped).
fn parse_iso8601_duration_ms(s: &str) -> Option<i64> {
    let rest = s.strip_prefix('p')?;
    let (days, time) = match rest.split_once('t') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let mut total_ms: i64 = 0;
    let mut any = false;
    if !days.is_empty() {
        let n = days.strip_suffix('d')?;
        total_ms = total_ms.checked_add(unsigned(n)?.checked_mul(86_400_000)?)?;
        any = true;
    }
    if let Some(mut t) = time {
        if t.is_empty() {
            return None;
        }
        for (unit, ms) in [('h', 3_600_000i64), ('m', 60_000)] {
            if let Some(i) = t.find(unit) {
                total_ms = total_ms.checked_add(unsigned(&t[..i])?.checked_mul(ms)?)?;
                t = &t[i + 1..];
                any = true;
            }
        }
        if let Some(secs) = t.strip_suffix('s') {
            let (whole, frac) = secs.split_once('.').unwrap_or((secs, ""));
            if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let frac_ms = format!("{frac:0<3}")[..3].parse::<i64>().ok()?;
            total_ms = total_ms.checked_add(unsigned(whole)?.checked_mul(1000)?)?;
            total_ms = total_ms.checked_add(frac_ms)?;
            any = true;
        } else if !t.is_empty() {
            return None;
        }
    }
    any.then_some(total_ms)
}

fn unsigned(digits: &str) -> Option<i64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The offsets of the partition's log a new share-partition may start at.
pub trait LogOffsets {
    /// The log start offset.
    fn earliest(&self) -> i64;
    /// The high watermark (Kafka asks for the latest offset READ_UNCOMMITTED).
    fn latest(&self) -> i64;
    /// The first offset whose record's timestamp is at or after `timestamp_ms`.
    fn for_timestamp(&self, timestamp_ms: i64) -> Option<i64>;
}

/// `by_duration` found no record recent enough: Kafka answers OFFSET_NOT_AVAILABLE.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("offset for timestamp {0} not found")]
pub struct OffsetNotAvailable(pub i64);

/// The start offset of a share-partition that has none persisted (Kafka's
/// `startOffsetDuringInitialization`).
pub fn initial_start_offset(
    reset: ShareAutoOffsetReset,
    log: &dyn LogOffsets,
    now_ms: i64,
) -> Result<i64, OffsetNotAvailable> {
    match reset {
        ShareAutoOffsetReset::Earliest => Ok(log.earliest()),
        ShareAutoOffsetReset::Latest => Ok(log.latest()),
        ShareAutoOffsetReset::ByDuration { duration_ms } => {
            let timestamp = now_ms.saturating_sub(duration_ms);
            log.for_timestamp(timestamp)
                .ok_or(OffsetNotAvailable(timestamp))
        }
    }
}
