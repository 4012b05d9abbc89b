//! The transaction coordinator's settings (Kafka's `TransactionStateManagerConfig` and
//! `TransactionLogConfig`), typed once at startup.

use super::broker::{invalid, ConfigError, Keys};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionConfig {
    /// `transaction.state.log.num.partitions`: partitions of `__transaction_state` when
    /// the broker creates it (an existing topic keeps its own count).
    pub state_log_partitions: i32,
    pub state_log_replication_factor: i16,
    /// `transaction.state.log.min.isr`: the topic's `min.insync.replicas` when the broker
    /// creates it; coordinator writes need that many replicas in the ISR.
    pub state_log_min_isr: i32,
    pub state_log_segment_bytes: i32,
    /// `transaction.max.timeout.ms`: the longest `transaction.timeout.ms` a producer may ask.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: a transactional id idle this long is forgotten.
    pub id_expiration_ms: i64,
    /// How often transactions past their timeout are looked for (and aborted).
    pub abort_timed_out_interval_ms: i64,
    /// How often expired transactional ids are looked for.
    pub remove_expired_interval_ms: i64,
}

impl TransactionConfig {
    pub(super) fn build(keys: &Keys<'_>) -> Result<Self, ConfigError> {
        let factor = keys.int("transaction.state.log.replication.factor")?;
        Ok(TransactionConfig {
            state_log_partitions: keys.int("transaction.state.log.num.partitions")?,
            state_log_replication_factor: i16::try_from(factor)
                .map_err(|_| invalid("transaction.state.log.replication.factor", "out of range"))?,
            state_log_min_isr: keys.int("transaction.state.log.min.isr")?,
            state_log_segment_bytes: keys.int("transaction.state.log.segment.bytes")?,
            max_timeout_ms: keys.int("transaction.max.timeout.ms")?,
            id_expiration_ms: i64::from(keys.int("transactional.id.expiration.ms")?),
            abort_timed_out_interval_ms: i64::from(
                keys.int("transaction.abort.timed.out.transaction.cleanup.interval.ms")?,
            ),
            remove_expired_interval_ms: i64::from(
                keys.int("transaction.remove.expired.transaction.cleanup.interval.ms")?,
            ),
        })
    }
}
