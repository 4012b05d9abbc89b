//! The broker config's typed sections for the log layer, the network and replication;
//! each is built once from the keys set (defaults from `defs.rs`) and checked as a whole.

use super::broker::{invalid, ConfigError, Keys};
use super::inter_broker_protocol::MetadataVersion;

/// How the broker manages its logs (Kafka's `ServerLogConfigs` and `LogManager` settings).
/// Per-topic settings are not here: `topic::log_config` resolves them for each topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogManagerConfig {
    /// `num.partitions`: partitions of a topic created without a count.
    pub num_partitions: i32,
    pub auto_create_topics_enable: bool,
    pub message_max_bytes: i32,
    /// `log.segment.delete.delay.ms`: how long a deleted log waits before its files go.
    pub segment_delete_delay_ms: u64,
    /// `log.flush.offset.checkpoint.interval.ms`.
    pub flush_offset_checkpoint_interval_ms: i64,
    /// `log.flush.start.offset.checkpoint.interval.ms`.
    pub flush_start_offset_checkpoint_interval_ms: i64,
    /// `log.flush.scheduler.interval.ms`: how often logs are checked for `flush.ms`, and
    /// the `flush.ms` of topics when neither they nor `log.flush.interval.ms` set it.
    pub flush_scheduler_interval_ms: i64,
    /// Whether `log.flush.interval.ms` was set (the broker synonym of `flush.ms`).
    pub flush_interval_ms_set: bool,
    /// `log.retention.check.interval.ms`.
    pub retention_check_interval_ms: i64,
    pub producer_id_expiration_ms: i64,
    pub producer_id_expiration_check_interval_ms: i64,
    /// `num.recovery.threads.per.data.dir`: threads loading each log dir's logs at startup.
    pub recovery_threads_per_data_dir: usize,
}

impl LogManagerConfig {
    pub(super) fn build(keys: &Keys<'_>) -> Result<Self, ConfigError> {
        let num_partitions = keys.int("num.partitions")?;
        if num_partitions < 1 {
            return Err(invalid("num.partitions", "must be >= 1"));
        }
        Ok(LogManagerConfig {
            num_partitions,
            auto_create_topics_enable: keys.bool("auto.create.topics.enable"),
            message_max_bytes: keys.int("message.max.bytes")?,
            segment_delete_delay_ms: keys.long("log.segment.delete.delay.ms")?.max(0) as u64,
            flush_offset_checkpoint_interval_ms: keys
                .long("log.flush.offset.checkpoint.interval.ms")?,
            flush_start_offset_checkpoint_interval_ms: keys
                .long("log.flush.start.offset.checkpoint.interval.ms")?,
            flush_scheduler_interval_ms: keys.long("log.flush.scheduler.interval.ms")?.max(0),
            flush_interval_ms_set: keys.is_set("log.flush.interval.ms"),
            retention_check_interval_ms: keys.long("log.retention.check.interval.ms")?,
            producer_id_expiration_ms: keys.long("producer.id.expiration.ms")?.max(1),
            producer_id_expiration_check_interval_ms: keys
                .long("producer.id.expiration.check.interval.ms")?,
            recovery_threads_per_data_dir: keys.int("num.recovery.threads.per.data.dir")?.max(1)
                as usize,
        })
    }
}

/// Limits of the listeners and connections (Kafka's `SocketServerConfigs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkConfig {
    /// `socket.request.max.bytes`: the largest request frame, and the most memory one
    /// request's decoded form may take.
    pub socket_request_max_bytes: usize,
    pub connections_max_idle_ms: u64,
    pub max_connections: usize,
    /// `queued.max.requests`: requests read but not answered, per connection.
    pub queued_max_requests: usize,
    /// `queued.max.request.bytes`; `None` when unbounded (a value <= 0).
    pub queued_max_request_bytes: Option<usize>,
}

impl NetworkConfig {
    pub(super) fn build(keys: &Keys<'_>) -> Result<Self, ConfigError> {
        let queued_bytes = keys.long("queued.max.request.bytes")?;
        Ok(NetworkConfig {
            socket_request_max_bytes: keys.positive("socket.request.max.bytes")?,
            connections_max_idle_ms: keys.long("connections.max.idle.ms")?.max(0) as u64,
            max_connections: keys.positive("max.connections")?,
            queued_max_requests: keys.positive("queued.max.requests")?,
            queued_max_request_bytes: usize::try_from(queued_bytes).ok().filter(|n| *n > 0),
        })
    }
}

/// Replication settings (Kafka's `ReplicationConfigs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicationConfig {
    /// `default.replication.factor`: replicas of a topic created without a factor.
    pub default_replication_factor: i16,
    /// `replica.lag.time.max.ms`: how long a follower may lag before it leaves the ISR.
    pub replica_lag_time_max_ms: i64,
    /// `replica.high.watermark.checkpoint.interval.ms`: how often every partition's high
    /// watermark goes to `replication-offset-checkpoint`.
    pub replica_high_watermark_checkpoint_interval_ms: i64,
    /// `num.replica.fetchers`: fetcher connections per source broker.
    pub num_replica_fetchers: usize,
    /// `replica.fetch.max.bytes`: the most bytes asked of one partition per fetch.
    pub replica_fetch_max_bytes: i32,
    /// `replica.fetch.response.max.bytes`: the most bytes asked of one fetch.
    pub replica_fetch_response_max_bytes: i32,
    pub replica_fetch_min_bytes: i32,
    pub replica_fetch_wait_max_ms: i32,
    /// `replica.fetch.backoff.ms`: the pause after a failed fetch.
    pub replica_fetch_backoff_ms: u64,
    /// `replica.socket.timeout.ms`: how long a fetch waits for its response.
    pub replica_socket_timeout_ms: u64,
    /// `replication.quota.window.num`: the samples a replication throttle's rate is
    /// measured over.
    pub replication_quota_window_num: usize,
    /// `replication.quota.window.size.seconds`: the time each of those samples spans.
    pub replication_quota_window_size_seconds: u64,
    /// `inter.broker.protocol.version`: the request versions followers send.
    pub inter_broker_protocol_version: MetadataVersion,
}

impl ReplicationConfig {
    pub(super) fn build(keys: &Keys<'_>) -> Result<Self, ConfigError> {
        let factor = keys.int("default.replication.factor")?;
        Ok(ReplicationConfig {
            default_replication_factor: i16::try_from(factor)
                .map_err(|_| invalid("default.replication.factor", "out of range"))?,
            replica_lag_time_max_ms: keys.long("replica.lag.time.max.ms")?,
            replica_high_watermark_checkpoint_interval_ms: keys
                .long("replica.high.watermark.checkpoint.interval.ms")?,
            num_replica_fetchers: keys.positive("num.replica.fetchers")?,
            replica_fetch_max_bytes: keys.int("replica.fetch.max.bytes")?.max(0),
            replica_fetch_response_max_bytes: keys.int("replica.fetch.response.max.bytes")?.max(0),
            replica_fetch_min_bytes: keys.int("replica.fetch.min.bytes")?.max(0),
            replica_fetch_wait_max_ms: keys.int("replica.fetch.wait.max.ms")?.max(0),
            replica_fetch_backoff_ms: keys.int("replica.fetch.backoff.ms")?.max(0) as u64,
            replica_socket_timeout_ms: keys.int("replica.socket.timeout.ms")?.max(0) as u64,
            replication_quota_window_num: keys.positive("replication.quota.window.num")?,
            replication_quota_window_size_seconds: keys
                .positive("replication.quota.window.size.seconds")?
                as u64,
            inter_broker_protocol_version: MetadataVersion::parse(
                &keys.string("inter.broker.protocol.version"),
            )
            .map_err(|e| invalid("inter.broker.protocol.version", e.to_string()))?,
        })
    }
}

/// Client quotas' windows (Kafka's `QuotaConfig`): `quota.window.num` samples of
/// `quota.window.size.seconds` for the byte rates and the request percentage,
/// `controller.quota.window.*` for controller mutations.
pub(super) fn quota_settings(
    keys: &Keys<'_>,
) -> Result<crate::quota::manager::QuotaSettings, ConfigError> {
    use crate::quota::rate::Windows;
    Ok(crate::quota::manager::QuotaSettings {
        windows: Windows::new(
            keys.positive("quota.window.num")?,
            keys.positive("quota.window.size.seconds")? as u64,
        ),
        controller_windows: Windows::new(
            keys.positive("controller.quota.window.num")?,
            keys.positive("controller.quota.window.size.seconds")? as u64,
        ),
    })
}
