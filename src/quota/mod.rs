//! Client quotas (Kafka's `ClientQuotaManager`s, KIP-13, KIP-55, KIP-124, KIP-599).
//!
//! After a client's request is handled the quota manager gives its verdict, a throttle
//! time. The request pipeline puts it in the response's `throttle_time_ms` and holds the
//! connection's next response back for it (KIP-219: the client is told at once and the
//! broker stops serving it meanwhile). Controller mutations (CreateTopics, CreatePartitions,
//! DeleteTopics) are counted per topic inside their handlers through a [`MutationQuota`],
//! since a strict quota refuses single topics (THROTTLING_QUOTA_EXCEEDED).
//!
//! - `entity`: who a quota is for (user, client id, both; `<default>`), and where
//!   ZooKeeper keeps it;
//! - `configs`: the quota keys, AlterClientQuotas' checks, DescribeClientQuotas' filter;
//! - `rate`: Kafka's `Rate` and `TokenBucket`, and its throttle time arithmetic;
//! - `manager`: the eight-level precedence, the per-client rates, the verdicts.
//!
//! Where quotas are kept: in ZooKeeper mode under `/config/users` and `/config/clients`
//! (`controller::zk::broker::config_changes` follows them), on a single node as
//! `ClientQuotaRecord`s in the metadata log; either way they reach the manager through
//! the metadata image (`publisher::QuotaPublisher`).

pub mod configs;
pub mod entity;
pub mod manager;
pub mod publisher;
pub mod rate;

use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

use crate::network::Session;
use crate::router::RequestContext;
use manager::Slot;
use rate::Windows;

/// What the quota manager says about one handled request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// 0: not throttled.
    pub throttle_ms: i32,
}

/// Whose handled request the quota manager is told of: the connection's session (its
/// principal, and what the connection holds of its resolved quotas) and the request's
/// client id ("" when none) and version, and when its handler answered (the pipeline's
/// own clock read, which the quota manager records at instead of reading the clock again).
pub struct Caller<'a> {
    pub session: &'a Session,
    pub client_id: &'a str,
    pub api_version: i16,
    pub at: Instant,
}

pub trait QuotaManager: Send + Sync {
    /// Whether any quota is in force: without one the pipeline asks nothing per request.
    fn enabled(&self) -> bool {
        true
    }

    /// Records a handled request (its size in, its response, the handler's time) and
    /// answers how long its client is to be throttled.
    fn record(
        &self,
        caller: &Caller<'_>,
        api_key: ApiKey,
        request_bytes: usize,
        response: &ResponseKind,
        handler_time: Duration,
    ) -> Verdict;

    /// The controller mutation quota of the request's client, strict or permissive.
    fn mutation_quota(&self, ctx: &RequestContext, strict: bool) -> MutationQuota {
        let _ = (ctx, strict);
        MutationQuota::unbounded()
    }

    /// The most one fetch of the client's may return (Kafka bounds a consumer's fetch
    /// by what its quota allows in a window); None: no bound.
    fn max_fetch_bytes(&self, ctx: &RequestContext) -> Option<usize> {
        let _ = ctx;
        None
    }
}

/// Whether a request is replication or between brokers, which client quotas never
/// count nor throttle: the controller's and the brokers' own APIs (Kafka's cluster
/// actions), and a follower's Fetch and OffsetForLeaderEpoch.
pub fn is_exempt(api_key: ApiKey, body: &RequestKind) -> bool {
    match body {
        RequestKind::Fetch(f) => f.replica_id.0 >= 0 || f.replica_state.replica_id.0 >= 0,
        RequestKind::OffsetForLeaderEpoch(r) => r.replica_id.0 >= 0,
        _ => matches!(
            api_key,
            ApiKey::LeaderAndIsr
                | ApiKey::StopReplica
                | ApiKey::UpdateMetadata
                | ApiKey::ControlledShutdown
                | ApiKey::WriteTxnMarkers
                | ApiKey::AlterPartition
                | ApiKey::AllocateProducerIds
                | ApiKey::BrokerHeartbeat
                | ApiKey::BrokerRegistration
        ),
    }
}

/// One request's controller mutation quota (Kafka's `ControllerMutationQuota`):
/// unbounded, strict (a mutation is refused while the bucket is in debt) or permissive
/// (accepted, and the request throttled once in debt).
pub struct MutationQuota {
    slot: Option<(Slot, Windows, Instant)>,
    strict: bool,
    last_throttle_ms: i64,
    last_recorded: Option<Instant>,
}

/// Kafka's `ThrottlingQuotaExceededException`: the refusal of a topic a strict
/// controller mutation quota does not admit.
pub fn throttled() -> crate::controller::ControllerError {
    crate::controller::ControllerError::new(
        kafka_protocol::error::ResponseError::ThrottlingQuotaExceeded,
        "The throttling quota has been exceeded.",
    )
}

impl MutationQuota {
    pub fn unbounded() -> MutationQuota {
        MutationQuota {
            slot: None,
            strict: false,
            last_throttle_ms: 0,
            last_recorded: None,
        }
    }

    fn new(slot: Slot, windows: Windows, strict: bool, epoch: Instant) -> MutationQuota {
        MutationQuota {
            slot: Some((slot, windows, epoch)),
            strict,
            last_throttle_ms: 0,
            last_recorded: None,
        }
    }

    /// Whether a strict quota has refused a mutation of this request already.
    pub fn is_exceeded(&self) -> bool {
        self.strict && self.last_throttle_ms > 0
    }

    /// Counts `permits` mutations (partitions); Err(throttle ms) when a strict quota
    /// refuses them. A permissive quota always accepts.
    pub fn record(&mut self, permits: f64) -> Result<(), i64> {
        self.record_at(permits, Instant::now())
    }

    fn record_at(&mut self, permits: f64, now: Instant) -> Result<(), i64> {
        let Some((slot, windows, epoch)) = &self.slot else {
            return Ok(());
        };
        let now_ms = now.saturating_duration_since(*epoch).as_millis() as i64;
        match slot
            .sensor
            .record_tokens(*windows, slot.bound, permits, self.strict, now_ms)
        {
            Ok(()) => Ok(()),
            Err(throttle) => {
                self.last_throttle_ms = throttle;
                self.last_recorded = Some(now);
                match self.strict {
                    true => Err(throttle),
                    false => Ok(()),
                }
            }
        }
    }

    /// The throttle time the response carries: the last one computed, less the time
    /// since (the request may have waited after it was recorded).
    pub fn throttle_time_ms(&self) -> i32 {
        let Some(at) = self.last_recorded else {
            return 0;
        };
        let elapsed = at.elapsed().as_millis() as i64;
        (self.last_throttle_ms - elapsed).clamp(0, i32::MAX as i64) as i32
    }
}
