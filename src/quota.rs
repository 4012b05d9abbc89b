//! Client quotas' hook in the request pipeline: after a request is handled the quota
//! manager gives its verdict, a throttle time. The pipeline puts it in the response's
//! `throttle_time_ms` and holds the connection's next response back for it (KIP-219:
//! the client is told at once and the broker stops serving it meanwhile).
//!
//! There are no quotas yet: the broker holds no quota manager, so the pipeline asks
//! none. The quota issue supplies an implementation (Kafka's `ClientQuotaManager` per
//! user and client id, its config from `/config/users|clients` or the metadata log).

use std::time::Duration;

use kafka_protocol::messages::ApiKey;

use crate::router::RequestContext;

/// What the quota manager says about one handled request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// 0: not throttled.
    pub throttle_ms: i32,
}

pub trait QuotaManager: Send + Sync {
    /// Records a handled request (its size in and out, the handler's time) and answers
    /// how long its client is to be throttled.
    fn record(
        &self,
        ctx: &RequestContext,
        api_key: ApiKey,
        request_bytes: usize,
        handler_time: Duration,
    ) -> Verdict;
}
