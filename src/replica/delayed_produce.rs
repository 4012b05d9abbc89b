//! Delayed produce (Kafka's `DelayedProduce`): an acks=all request's appends are
//! acknowledged once the high watermark of each partition passes what was appended, or
//! answered REQUEST_TIMED_OUT for those still short of it when the request's timeout
//! ends. A partition whose leadership moved away meanwhile answers NOT_LEADER_OR_FOLLOWER.
//! With one replica the high watermark moves with the append, so nothing waits.

use std::sync::Arc;
use std::time::Duration;

use futures::future::select_all;
use kafka_protocol::error::ResponseError;
use tokio::time::Instant;

use super::Partition;

/// One append waiting for its acknowledgement.
struct Waiting {
    partition: Arc<Partition>,
    /// The offset after the append's last record: the high watermark must reach it.
    required_offset: i64,
    result: Option<Result<(), ResponseError>>,
}

/// The appends of one acks=all Produce request.
#[derive(Default)]
pub struct DelayedProduce {
    waiting: Vec<Waiting>,
}

impl DelayedProduce {
    pub fn new() -> Self {
        DelayedProduce::default()
    }

    /// Adds an append to `partition` whose last offset is `last_offset`; its answer comes
    /// back at the index this returns.
    pub fn watch(&mut self, partition: Arc<Partition>, last_offset: i64) -> usize {
        self.waiting.push(Waiting {
            partition,
            required_offset: last_offset + 1,
            result: None,
        });
        self.waiting.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Waits until every append is settled or `timeout` ends. One answer per `watch`, in
    /// order: `None` when acknowledged.
    pub async fn complete(mut self, timeout: Duration) -> Vec<Option<ResponseError>> {
        let deadline = Instant::now() + timeout;
        // Alone in the ISR (and whenever the followers are already there) every append is
        // settled at once: answered without registering wake-ups or arming a timer.
        for w in &mut self.waiting {
            w.result = w
                .partition
                .check_enough_replicas_reach_offset(w.required_offset);
        }
        while !self.try_finish(false) {
            let pending: Vec<(usize, Arc<Partition>, i64)> = self
                .waiting
                .iter()
                .enumerate()
                .filter(|(_, w)| w.result.is_none())
                .map(|(i, w)| (i, w.partition.clone(), w.required_offset))
                .collect();
            // Registered before checking, so an advance in between is not missed.
            let mut wakeups: Vec<_> = pending
                .iter()
                .map(|(_, p, _)| Box::pin(p.high_watermark_advanced()))
                .collect();
            for w in &mut wakeups {
                w.as_mut().enable();
            }
            for (i, p, required_offset) in &pending {
                self.waiting[*i].result = p.check_enough_replicas_reach_offset(*required_offset);
            }
            if self.try_finish(Instant::now() >= deadline) {
                break;
            }
            tokio::select! {
                _ = select_all(wakeups) => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
        tracing::debug!(target: "replica_latency", "acks=all settled");
        self.waiting
            .into_iter()
            .map(|w| w.result.and_then(Result::err))
            .collect()
    }

    /// Whether every append is settled; at the deadline, those still waiting time out.
    fn try_finish(&mut self, expired: bool) -> bool {
        for w in self.waiting.iter_mut().filter(|w| w.result.is_none()) {
            if !expired {
                return false;
            }
            w.result = Some(Err(ResponseError::RequestTimedOut));
        }
        true
    }
}
