//! Fetch: whole record batches from each partition, as stored on disk.
//!
//! A long poll (`max_wait_ms`, `min_bytes`) waits on the fetched partitions' append
//! notifications, never on a timer loop. Sessions (KIP-227) are not kept: every answer
//! carries session id 0, which tells clients to send full fetch requests.
//!
//! Records are not read here: each partition's answer names the segment range that holds
//! them, and the connection sends that range with `sendfile` (see `protocol::zero_copy`).
//! As in Kafka, the last batch of a partition may be cut at the size limit; clients drop
//! the partial batch and fetch it again.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::select_all;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use tokio::time::Instant;
use uuid::Uuid;

use crate::broker::Broker;
use crate::log::{FileSlice, LogError};
use crate::protocol::zero_copy;
use crate::replica::Partition;
use crate::router::RequestContext;

/// Fetch requests name topics by id from this version on.
const TOPIC_ID_VERSION: i16 = 13;
/// Clients may ask to wait at most this long; a larger value is clamped.
const MAX_WAIT_MS_CAP: i32 = 60_000;
const READ_COMMITTED: i8 = 1;

/// A requested topic, resolved once before the first read.
struct TopicPlan {
    name: TopicName,
    topic_id: Uuid,
    partitions: Vec<(FetchPartition, Result<Arc<Partition>, ResponseError>)>,
}

/// Record ranges shorter than this are read into the response: below it a separate
/// `sendfile` call costs more than the copy.
const SENDFILE_MIN_BYTES: usize = 16 * 1024;

/// A partition read: its answer, and the file range its records placeholder stands for.
type Read = (PartitionData, Option<FileSlice>);

/// Answers the fetch, with the file slices its records stand for, in encoding order.
pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: FetchRequest,
) -> (FetchResponse, Vec<FileSlice>) {
    if req.session_id != 0 && req.session_epoch > 0 {
        // An incremental fetch in a session we never created.
        let refused =
            FetchResponse::default().with_error_code(ResponseError::FetchSessionIdNotFound.code());
        return (refused, Vec::new());
    }
    let plan: Vec<TopicPlan> = req
        .topics
        .into_iter()
        .map(|t| resolve(&broker, t, ctx.api_version))
        .collect();
    let max_wait = Duration::from_millis(req.max_wait_ms.clamp(0, MAX_WAIT_MS_CAP) as u64);
    let deadline = Instant::now() + max_wait;
    let max_bytes = usize::try_from(req.max_bytes).unwrap_or(0);
    let min_bytes = usize::try_from(req.min_bytes).unwrap_or(0);
    let read_committed = req.isolation_level == READ_COMMITTED;
    let mut stopping = broker.stopping();
    loop {
        // Register for wake-ups before reading, so an append in between is not missed.
        let mut wakeups: Vec<_> = plan
            .iter()
            .flat_map(|t| t.partitions.iter())
            .filter_map(|(_, p)| p.as_ref().ok())
            .map(|p| Box::pin(p.appended()))
            .collect();
        for w in &mut wakeups {
            w.as_mut().enable();
        }
        let read = read_all(&plan, max_bytes, read_committed);
        let done = Instant::now() >= deadline || *stopping.borrow();
        if read.bytes >= min_bytes || read.errored || done {
            let response = FetchResponse::default().with_responses(read.responses);
            return (response, read.file_slices);
        }
        let appended = async {
            if wakeups.is_empty() {
                std::future::pending().await
            } else {
                select_all(wakeups).await;
            }
        };
        tokio::select! {
            _ = appended => {}
            _ = tokio::time::sleep_until(deadline) => {}
            _ = stopping.changed() => {}
        }
    }
}

fn resolve(broker: &Broker, t: FetchTopic, version: i16) -> TopicPlan {
    let name = if version >= TOPIC_ID_VERSION {
        broker
            .controller
            .topic_by_id(t.topic_id)
            .map(|info| info.name.clone())
    } else {
        Some(t.topic.0.to_string())
    };
    let unknown = if version >= TOPIC_ID_VERSION {
        ResponseError::UnknownTopicId
    } else {
        ResponseError::UnknownTopicOrPartition
    };
    let partitions = t
        .partitions
        .into_iter()
        .map(|fp| {
            let found = name
                .as_deref()
                .and_then(|n| broker.replicas.partition(n, fp.partition))
                .ok_or(unknown);
            (fp, found)
        })
        .collect();
    TopicPlan {
        name: t.topic,
        topic_id: t.topic_id,
        partitions,
    }
}

/// One pass over every requested partition.
struct ReadAll {
    responses: Vec<FetchableTopicResponse>,
    /// The records' placeholders' file ranges, in response order.
    file_slices: Vec<FileSlice>,
    bytes: usize,
    /// Some partition answered an error (which ends a long poll at once, as in Kafka).
    errored: bool,
}

/// Reads every partition once.
fn read_all(plan: &[TopicPlan], max_bytes: usize, read_committed: bool) -> ReadAll {
    let mut total = 0usize;
    let mut errored = false;
    let mut file_slices = Vec::new();
    let mut responses = Vec::with_capacity(plan.len());
    for t in plan {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for (fp, found) in &t.partitions {
            let data = match found {
                Err(e) => {
                    errored = true;
                    partition_error(fp.partition, *e)
                }
                Ok(p) => {
                    // KIP-74: the first partition with data returns at least one whole
                    // batch even when it exceeds the limits, so progress is always possible.
                    let min_one = total == 0;
                    let budget = max_bytes
                        .saturating_sub(total)
                        .min(usize::try_from(fp.partition_max_bytes).unwrap_or(0));
                    let (d, slice) = read_one(p, fp, budget, min_one);
                    if d.error_code != 0 {
                        errored = true;
                    }
                    total += d.records.as_ref().map_or(0, Bytes::len);
                    file_slices.extend(slice);
                    d
                }
            };
            let data = if read_committed {
                data.with_aborted_transactions(Some(Vec::new()))
            } else {
                data
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
        errored,
    }
}

fn read_one(p: &Partition, fp: &FetchPartition, budget: usize, min_one: bool) -> Read {
    if let Err(e) = p.check_leader_epoch(fp.current_leader_epoch) {
        return (partition_error(fp.partition, e), None);
    }
    let hw = p.high_watermark();
    let base = PartitionData::default()
        .with_partition_index(fp.partition)
        .with_high_watermark(hw)
        .with_last_stable_offset(hw);
    if budget == 0 && !min_one {
        let empty = base
            .with_log_start_offset(p.log.log_start_offset())
            .with_records(Some(Bytes::new()));
        return (empty, None);
    }
    let failed = |base: PartitionData, e: LogError| {
        base.with_error_code(e.error_code())
            .with_log_start_offset(p.log.log_start_offset())
            .with_records(Some(Bytes::new()))
    };
    let data = match p.read_slice(fp.fetch_offset, budget, min_one) {
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
    if slice.len() >= SENDFILE_MIN_BYTES {
        if let Some(placeholder) = zero_copy::placeholder(&slice) {
            return (base.with_records(Some(placeholder)), Some(slice));
        }
    }
    match slice.read() {
        Ok(records) => (base.with_records(Some(records)), None),
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
