//! End-to-end latency: producers at a fixed rate while consumers long-poll the same
//! partitions, each record timed from the moment its request was due to the moment a
//! consumer's fetch answer carrying it arrived, in microseconds.
//!
//! The producers and consumers are matched by offset after the run: a producer learns the
//! base offset of every batch it sent from its acknowledgement, a consumer notes when each
//! batch (by base offset) reached it. With acks=1 a record can reach the consumer before
//! its acknowledgement reaches the producer, so neither side waits for the other.

use std::collections::HashMap;
use std::sync::Arc;

use hdrhistogram::Histogram;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use skua::client::Connection;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::{consume, produce};

/// How long a consumer's fetch may wait at the broker for a record (as a Java consumer's
/// `fetch.max.wait.ms` default): the broker answers as soon as one is there.
const MAX_WAIT_MS: i32 = 500;

/// One consumer: a connection to a leader and the partitions it reads there.
pub struct Reader {
    pub connection: Arc<Connection>,
    pub partitions: Vec<i32>,
}

pub struct Outcome {
    pub produced: produce::Outcome,
    /// Due-to-fetched latency per record, µs.
    pub latency: Histogram<u64>,
    /// Records acknowledged and fetched back.
    pub records: u64,
    pub first_error: Option<String>,
}

/// When a batch (partition, base offset) with this many records reached a consumer.
type Arrivals = Vec<(i32, i64, u64, Instant)>;

/// Produces `plans` (whose `trace` is set) while `readers` fetch the same partitions from
/// their log end offsets, and times every acknowledged record from due to fetched.
pub async fn run(
    plans: Vec<produce::Plan>,
    readers: &[Reader],
    topic: &str,
    fetch_version: i16,
    list_offsets_version: i16,
) -> Outcome {
    let mut outcome = Outcome {
        produced: produce::Outcome::new(),
        latency: histogram(),
        records: 0,
        first_error: None,
    };
    let name = TopicName(StrBytes::from_string(topic.to_string()));
    // The offsets each reader starts at: the partitions' ends before the producers start.
    let mut starts = Vec::with_capacity(readers.len());
    for r in readers {
        match log_end_offsets(r, &name, list_offsets_version).await {
            Ok(offsets) => starts.push(offsets),
            Err(e) => {
                outcome.first_error = Some(e);
                return outcome;
            }
        }
    }
    // The offsets the producers reached, once they are done: a reader stops there.
    let (ends_tx, ends_rx) = watch::channel(None::<Arc<HashMap<i32, i64>>>);
    let tasks: Vec<_> = readers
        .iter()
        .zip(starts)
        .map(|(r, start)| {
            tokio::spawn(read(
                r.connection.clone(),
                name.clone(),
                start,
                fetch_version,
                ends_rx.clone(),
            ))
        })
        .collect();
    outcome.produced = produce::run_all(plans).await;
    let mut ends: HashMap<i32, i64> = HashMap::new();
    for (partition, base, count, _) in &outcome.produced.acked {
        let end = ends.entry(*partition).or_insert(0);
        *end = (*end).max(base + *count as i64);
    }
    let _ = ends_tx.send(Some(Arc::new(ends)));
    let mut arrived: HashMap<(i32, i64), Instant> = HashMap::new();
    for t in tasks {
        match t.await {
            Ok(Ok(arrivals)) => {
                arrived.extend(arrivals.into_iter().map(|(p, o, _, at)| ((p, o), at)))
            }
            Ok(Err(e)) => outcome.first_error = outcome.first_error.take().or(Some(e)),
            Err(e) => {
                outcome.first_error = outcome
                    .first_error
                    .take()
                    .or(Some(format!("consumer task: {e}")))
            }
        }
    }
    for (partition, base, count, due) in &outcome.produced.acked {
        match arrived.get(&(*partition, *base)) {
            Some(at) => {
                let micros = at.saturating_duration_since(*due).as_micros() as u64;
                let _ = outcome.latency.record_n(micros.max(1), *count);
                outcome.records += count;
            }
            None if outcome.first_error.is_none() => {
                outcome.first_error = Some(format!(
                    "the batch at offset {base} of partition {partition} was acknowledged but \
                     never fetched"
                ))
            }
            None => {}
        }
    }
    outcome
}

fn histogram() -> Histogram<u64> {
    // 1 µs to 10 minutes at 3 significant digits.
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("constant histogram bounds are valid")
}

/// The log end offset of each of the reader's partitions (ListOffsets, timestamp -1).
async fn log_end_offsets(
    reader: &Reader,
    name: &TopicName,
    version: i16,
) -> Result<HashMap<i32, i64>, String> {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name.clone())
            .with_partitions(
                reader
                    .partitions
                    .iter()
                    .map(|p| {
                        ListOffsetsPartition::default()
                            .with_partition_index(*p)
                            .with_timestamp(-1)
                    })
                    .collect(),
            )]);
    let resp = reader
        .connection
        .send(&req, version)
        .await
        .map_err(|e| format!("list offsets: {e}"))?;
    let mut ends = HashMap::new();
    for p in resp.topics.iter().flat_map(|t| t.partitions.iter()) {
        if p.error_code != 0 {
            return Err(format!(
                "list offsets partition {}: error code {}",
                p.partition_index, p.error_code
            ));
        }
        ends.insert(p.partition_index, p.offset);
    }
    match reader.partitions.iter().find(|p| !ends.contains_key(p)) {
        Some(p) => Err(format!("list offsets: no answer for partition {p}")),
        None => Ok(ends),
    }
}

/// Long-polls the partitions from `next` until every one has reached the end the
/// producers report, noting when each batch arrived.
async fn read(
    connection: Arc<Connection>,
    name: TopicName,
    mut next: HashMap<i32, i64>,
    version: i16,
    ends: watch::Receiver<Option<Arc<HashMap<i32, i64>>>>,
) -> Result<Arrivals, String> {
    let mut arrivals = Vec::new();
    loop {
        if let Some(ends) = ends.borrow().as_ref() {
            let reached = next
                .iter()
                .all(|(p, offset)| ends.get(p).is_none_or(|end| offset >= end));
            if reached {
                return Ok(arrivals);
            }
        }
        let req = consume::fetch_request(&name, MAX_WAIT_MS, next.iter().map(|(p, o)| (*p, *o)));
        let resp = connection
            .send(&req, version)
            .await
            .map_err(|e| format!("fetch: {e}"))?;
        let at = Instant::now();
        if resp.error_code != 0 {
            return Err(format!("fetch: error code {}", resp.error_code));
        }
        for data in resp.responses.iter().flat_map(|t| t.partitions.iter()) {
            if data.error_code != 0 {
                return Err(format!(
                    "fetch partition {}: error code {}",
                    data.partition_index, data.error_code
                ));
            }
            let (Some(bytes), Some(offset)) = (&data.records, next.get_mut(&data.partition_index))
            else {
                continue;
            };
            for (header, _) in skua::log::records::whole_batches(bytes) {
                // A fetch may start inside a batch it already had; only new ones count.
                if header.base_offset() >= *offset {
                    let count = u64::try_from(header.records_count()).unwrap_or(0);
                    arrivals.push((data.partition_index, header.base_offset(), count, at));
                }
                *offset = (*offset).max(header.next_offset());
            }
        }
    }
}
