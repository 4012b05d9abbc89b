//! `ReplicaManager::fetch`: every read of this broker's partitions for a Fetch, a
//! consumer's or a follower's (and, later, a share fetch's), as Kafka's
//! `ReplicaManager.fetchMessages`: delayed fetch (long polls), the isolation level's
//! bound (log end for followers, high watermark or last stable offset for consumers,
//! with the aborted transactions below it for read_committed), the followers'
//! diverging epochs, the leader's replication throttle, and the per-topic bytes out.
//!
//! Records are not read here: each partition's answer names the segment range that holds
//! them, and the connection sends that range with `sendfile` (see `protocol::zero_copy`),
//! whatever its size. Only ranges under 16 KiB are read into the response, and at most
//! 1 MiB of them per response, so a fetch's memory does not grow with what the client
//! asks for. As in Kafka, the last batch of a partition may be cut at the size limit;
//! clients drop the partial batch and fetch it again. The first batch of a partition is
//! never cut (KIP-74): the first partition with records returns it whole whatever the
//! limits, and a later one whose first batch does not fit what is left answers no
//! records (`Log::plan_slice`), so every response holds at least one whole batch to make
//! progress with.
//!
//! A follower's fetch is subject to the leader's replication throttle
//! (`replica::throttle`): a throttled partition of an out-of-sync follower answers no
//! records while the throttle is over its rate, and the records of throttled partitions
//! count against it once the answer is final.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{ProducerId, TopicName};
use tokio::sync::watch;
use uuid::Uuid;

use super::delayed_fetch::{self, FetchAttempt};
use super::throttle::ReplicationQuota;
use super::{FetchIsolation, FetchParams, Partition, ReplicaManager};
use crate::error::ApiError;
use crate::log::{FileSlice, LogError};
use crate::protocol::zero_copy;

/// A requested topic, its name resolved once before the first read, and its partitions
/// found (or why not) in request order.
pub struct TopicReads {
    pub name: TopicName,
    pub topic_id: Uuid,
    /// The topic's name, if it exists.
    pub resolved: Option<String>,
    /// The error for its partitions when it does not.
    pub unknown: ResponseError,
    pub partitions: Vec<(FetchPartition, Result<Arc<Partition>, ApiError>)>,
}

/// Record ranges shorter than this are read into the response: below it a separate
/// `sendfile` call costs more than the copy.
const SENDFILE_MIN_BYTES: usize = 16 * 1024;
/// The most record bytes one response reads into memory; past it even short ranges are
/// sent from the file.
const COPIED_MAX_BYTES: usize = 1024 * 1024;

/// A partition read: its answer, and the file range its records placeholder stands for.
type Read = (PartitionData, Option<FileSlice>);

impl ReplicaManager {
    /// Reads `plan`'s partitions until the fetch can be answered (see
    /// `delayed_fetch::complete`); the answer's record bytes are counted per topic as
    /// bytes out, or replication bytes out for a follower.
    pub async fn fetch(
        &self,
        params: &FetchParams,
        plan: &[TopicReads],
        stopping: watch::Receiver<bool>,
    ) -> ReadAll {
        let partitions: Vec<Arc<Partition>> = plan
            .iter()
            .flat_map(|t| t.partitions.iter())
            .filter_map(|(_, p)| p.as_ref().ok().cloned())
            .collect();
        let quota = params.is_from_follower().then_some(&self.quotas.leader);
        let read = delayed_fetch::complete(params, &partitions, stopping, || {
            let read = read_all(plan, params, quota);
            FetchAttempt {
                bytes: read.bytes,
                errored: read.errored,
                response: read,
            }
        })
        .await;
        if let Some(quota) = quota {
            quota.record(read.throttled_bytes);
        }
        count_fetch(
            &self.metrics,
            plan,
            &read.responses,
            params.is_from_follower(),
        );
        read
    }
}

/// Marks, per partition of the answer, a fetch request and, for an unexpected error, a
/// failed one (Kafka's `readFromLog` does not count the refusals a client or follower
/// handles: leadership, epochs, offsets out of range, offline logs), and the returned
/// record bytes (a placeholder is as long as the file range it stands for) as bytes
/// out, or replication bytes out for a follower. A partition not hosted here counts for
/// all topics only.
fn count_fetch(
    metrics: &crate::metrics::Metrics,
    plan: &[TopicReads],
    responses: &[FetchableTopicResponse],
    follower: bool,
) {
    let answered = responses.iter().flat_map(|t| t.partitions.iter());
    let read = plan.iter().flat_map(|t| t.partitions.iter());
    for ((_, found), data) in read.zip(answered) {
        let counters = match found {
            Ok(p) => &p.counters,
            Err(_) => metrics.topics.all_topics(),
        };
        counters.fetch_request();
        if !expected_fetch_error(data.error_code) {
            counters.failed_fetch_request();
        }
        let Some(records) = data.records.as_ref().filter(|r| !r.is_empty()) else {
            continue;
        };
        match follower {
            true => counters.replication_bytes_out(records.len() as u64),
            false => counters.bytes_out(records.len() as u64),
        }
    }
}

/// Whether a partition's fetch error is one Kafka's `readFromLog` expects (and does not
/// count as a failed fetch).
fn expected_fetch_error(code: i16) -> bool {
    use ResponseError::*;
    code == 0
        || [
            UnknownTopicOrPartition,
            UnknownTopicId,
            NotLeaderOrFollower,
            UnknownLeaderEpoch,
            FencedLeaderEpoch,
            ReplicaNotAvailable,
            KafkaStorageError,
            InconsistentTopicId,
            OffsetOutOfRange,
        ]
        .iter()
        .any(|e| e.code() == code)
}

/// One pass over every requested partition.
pub struct ReadAll {
    pub responses: Vec<FetchableTopicResponse>,
    /// The records' placeholders' file ranges, in response order.
    pub file_slices: Vec<FileSlice>,
    bytes: usize,
    /// The record bytes of partitions the leader's replication throttle applies to.
    throttled_bytes: usize,
    /// Some partition answered an error or a diverging epoch (either ends a long poll at
    /// once, as in Kafka).
    errored: bool,
}

/// Reads every partition once; `quota` is the leader's replication throttle, for a
/// follower's fetch.
fn read_all(
    plan: &[TopicReads],
    params: &FetchParams,
    quota: Option<&ReplicationQuota>,
) -> ReadAll {
    let max_bytes = params.max_bytes;
    let mut total = 0usize;
    // Record bytes read into memory for this response.
    let mut copied = 0usize;
    let mut errored = false;
    let mut throttled_bytes = 0usize;
    let mut file_slices = Vec::new();
    let mut responses = Vec::with_capacity(plan.len());
    for t in plan {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for (fp, found) in &t.partitions {
            let data = match found {
                Err(e) => {
                    errored = true;
                    partition_error(fp.partition, e.error)
                }
                Ok(p) => {
                    // KIP-74: the first partition with data returns at least one whole
                    // batch even when it exceeds the limits, so progress is always possible.
                    let min_one = total == 0;
                    let budget = max_bytes
                        .saturating_sub(total)
                        .min(usize::try_from(fp.partition_max_bytes).unwrap_or(0));
                    let (mut d, mut slice) = read_one(p, fp, params, budget, min_one, &mut copied);
                    if d.error_code != 0 || d.diverging_epoch.epoch >= 0 {
                        errored = true;
                    }
                    if let Some(quota) = quota.filter(|q| q.is_throttled(&p.tp)) {
                        // Read all the same: the follower's position is recorded by it.
                        if quota.holds_back(&p.tp, p.isr().contains(&params.replica_id)) {
                            d.records = Some(Bytes::new());
                            slice = None;
                        }
                        throttled_bytes += d.records.as_ref().map_or(0, Bytes::len);
                    }
                    total += d.records.as_ref().map_or(0, Bytes::len);
                    file_slices.extend(slice);
                    d
                }
            };
            partitions.push(data);
        }
        responses.push(
            FetchableTopicResponse::default()
                .with_topic(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_partitions(partitions),
        );
    }
    ReadAll {
        responses,
        file_slices,
        bytes: total,
        throttled_bytes,
        errored,
    }
}

fn read_one(
    p: &Arc<Partition>,
    fp: &FetchPartition,
    params: &FetchParams,
    budget: usize,
    min_one: bool,
    copied: &mut usize,
) -> Read {
    if let Err(e) = p.check_fetch(fp.current_leader_epoch, params.replica_id) {
        return (partition_error(fp.partition, e), None);
    }
    let hw = p.high_watermark();
    let lso = p.last_stable_offset();
    // Kafka sends null aborted transactions to read_uncommitted readers.
    let base = PartitionData::default()
        .with_partition_index(fp.partition)
        .with_high_watermark(hw)
        .with_last_stable_offset(lso)
        .with_aborted_transactions(None);
    let (data, slice) = read_records(p, fp, params, budget, min_one, copied, base);
    if params.isolation != FetchIsolation::TxnCommitted || data.error_code != 0 {
        return (data, slice);
    }
    // read_committed readers are told which transactions were aborted in what they may
    // read (an empty list when none; others get null). Looked up after the read, with a
    // last stable offset at least as far as the read's bound: listing a transaction
    // past the records returned is harmless, missing one inside them is not.
    let aborted = p
        .aborted_txns(fp.fetch_offset, p.last_stable_offset())
        .into_iter()
        .map(|t| {
            AbortedTransaction::default()
                .with_producer_id(ProducerId(t.producer_id))
                .with_first_offset(t.first_offset)
        })
        .collect();
    (data.with_aborted_transactions(Some(aborted)), slice)
}

/// The records part of `read_one`, into `base`.
fn read_records(
    p: &Arc<Partition>,
    fp: &FetchPartition,
    params: &FetchParams,
    budget: usize,
    min_one: bool,
    copied: &mut usize,
    base: PartitionData,
) -> Read {
    if budget == 0 && !min_one {
        let empty = base
            .with_log_start_offset(p.log_start_offset())
            .with_records(Some(Bytes::new()));
        return (empty, None);
    }
    let failed = |base: PartitionData, e: LogError| {
        base.with_error_code(ApiError::from(e).code())
            .with_log_start_offset(p.log_start_offset())
            .with_records(Some(Bytes::new()))
    };
    // A follower naming the epoch of its last batch (v12+) learns first whether its log
    // parts from this one; if so it gets no records, and its fetch is not recorded.
    if params.is_from_follower() {
        match p.diverging_epoch(fp.last_fetched_epoch, fp.fetch_offset) {
            Ok(None) => {}
            Ok(Some((epoch, end_offset))) => {
                let diverging = EpochEndOffset::default()
                    .with_epoch(epoch)
                    .with_end_offset(end_offset);
                let answer = base
                    .with_log_start_offset(p.log_start_offset())
                    .with_diverging_epoch(diverging)
                    .with_records(Some(Bytes::new()));
                return (answer, None);
            }
            Err(e) => {
                let answer = base
                    .with_error_code(e.code())
                    .with_log_start_offset(p.log_start_offset())
                    .with_records(Some(Bytes::new()));
                return (answer, None);
            }
        }
    }
    let read = p.fetch_records(
        params,
        fp.fetch_offset,
        budget,
        min_one,
        fp.log_start_offset,
    );
    let data = match read {
        Ok(data) => data,
        Err(e @ LogError::OffsetOutOfRange { .. }) => return (failed(base, e), None),
        Err(e) => {
            tracing::error!(partition = %p.tp, error = %e, "read failed");
            return (failed(base, e), None);
        }
    };
    let base = base.with_log_start_offset(data.log_start_offset);
    let Some(slice) = data.records else {
        return (base.with_records(Some(Bytes::new())), None);
    };
    if slice.len() >= SENDFILE_MIN_BYTES || *copied + slice.len() > COPIED_MAX_BYTES {
        if let Some(placeholder) = zero_copy::placeholder(&slice) {
            return (base.with_records(Some(placeholder)), Some(slice));
        }
    }
    match slice.read() {
        Ok(records) => {
            *copied += records.len();
            (base.with_records(Some(records)), None)
        }
        Err(e) => {
            tracing::error!(partition = %p.tp, error = %e, "read failed");
            (failed(base, e), None)
        }
    }
}

fn partition_error(partition: i32, e: ResponseError) -> PartitionData {
    PartitionData::default()
        .with_partition_index(partition)
        .with_error_code(e.code())
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_records(Some(Bytes::new()))
}
