//! Scenarios of Kafka's `SharePartitionTest`, on the pure share-partition.

use super::*;
use crate::coordinator::share::{PersistedState, StateBatch};

mod acknowledge_tests;
mod acquire_tests;
mod bounds_tests;
mod config_tests;
mod failover_tests;
mod lock_tests;
mod manager_tests;
mod session_tests;

const LOCK_MS: i64 = 30_000;

fn config() -> SharePartitionConfig {
    SharePartitionConfig::default()
}

/// A share-partition starting at `start` with nothing persisted beyond it.
fn partition_at(config: SharePartitionConfig, start: i64) -> SharePartition {
    let persisted = PersistedState {
        state_epoch: 0,
        start_offset: start,
        state_batches: Vec::new(),
    };
    SharePartition::initialize(config, 0, &persisted, || {
        unreachable!("start offset is persisted")
    })
    .expect("initialize")
}

fn plain(batches: &[(i64, i64)]) -> Vec<FetchedBatch> {
    batches
        .iter()
        .map(|(f, l)| FetchedBatch::plain(*f, *l))
        .collect()
}

/// One ShareFetch by `member`: the log read from the next fetch offset returns `batches`.
fn fetch(
    sp: &mut SharePartition,
    member: &str,
    batches: &[FetchedBatch],
    now_ms: i64,
) -> ShareAcquiredRecords {
    fetch_with(sp, member, batches, 500, 500, now_ms)
}

fn fetch_with(
    sp: &mut SharePartition,
    member: &str,
    batches: &[FetchedBatch],
    batch_size: u32,
    max_fetch_records: u32,
    now_ms: i64,
) -> ShareAcquiredRecords {
    fetch_in_mode(
        sp,
        member,
        batches,
        batch_size,
        max_fetch_records,
        ShareAcquireMode::BatchOptimized,
        now_ms,
    )
}

fn fetch_in_mode(
    sp: &mut SharePartition,
    member: &str,
    batches: &[FetchedBatch],
    batch_size: u32,
    max_fetch_records: u32,
    mode: ShareAcquireMode,
    now_ms: i64,
) -> ShareAcquiredRecords {
    let fetch_offset = sp.next_fetch_offset();
    let req = AcquireRequest {
        member_id: member,
        batch_size,
        max_fetch_records,
        mode,
        fetch_offset,
        batches,
        aborted_transactions: None,
    };
    sp.acquire(&req, now_ms)
}

fn ranges(acquired: &ShareAcquiredRecords) -> Vec<(i64, i64, u16)> {
    acquired
        .records
        .iter()
        .map(|r| (r.first_offset, r.last_offset, r.delivery_count))
        .collect()
}

fn ack(
    sp: &mut SharePartition,
    member: &str,
    first: i64,
    last: i64,
    ack: AcknowledgeType,
    now_ms: i64,
) -> Result<PendingWrite, ShareError> {
    sp.acknowledge(
        member,
        &[AcknowledgementBatch::new(first, last, ack)],
        now_ms,
    )
}

/// Acknowledges and persists successfully.
fn ack_persisted(
    sp: &mut SharePartition,
    member: &str,
    first: i64,
    last: i64,
    t: AcknowledgeType,
    now_ms: i64,
) {
    let pending = ack(sp, member, first, last, t, now_ms).expect("acknowledge");
    sp.complete_write(&pending, Ok(()), now_ms);
}

fn state(sp: &SharePartition, offset: i64) -> (RecordState, u16, String) {
    let s = sp.record_state(offset).expect("offset cached");
    (s.state(), s.delivery_count(), s.member_id().to_string())
}
