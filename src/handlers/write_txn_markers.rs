//! WriteTxnMarkers: commit or abort markers appended to partitions this broker leads.
//! A transaction coordinator on another broker sends it to end a transaction here, and
//! `kafka-transactions.sh abort` sends it to end a hanging one. The markers of skua's own
//! coordinator are appended locally, the same way (`coordinator::txn::markers`).
//!
//! A request's work is bounded by what it asks for, not by how often it says it: each
//! distinct marker write is made once (a partition listed a million times is one
//! append, its answer repeated), at most `WRITES_AT_ONCE` at a time.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;

use kafka_protocol::messages::write_txn_markers_request::WritableTxnMarker;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use crate::broker::Broker;
use crate::coordinator::txn::markers::write_local_marker;
use crate::log::control::{EndTxnMarker, TxnResult};
use crate::log::TopicPartition;
use crate::router::RequestContext;

/// Marker writes under way at once: a request's partitions are appended together (each
/// waits for its ISR, and one after another they would take that many replication
/// rounds), but never more futures than this alive.
const WRITES_AT_ONCE: usize = 4096;

/// A request's distinct marker writes, each as small as a partition index: the marker
/// (the first of the request's markers with its producer, epochs and result) and topic
/// (the first entry of that name) by position, then the partition. Sorted, no repeats.
struct DistinctWrites {
    /// For each of the request's markers, the first marker identical to it.
    marker_of: Vec<u32>,
    /// Topic names by position; `topic_of[name]` is a name's position.
    topics: Vec<String>,
    topic_of: HashMap<String, u32>,
    writes: Vec<(u32, u32, i32)>,
}

impl DistinctWrites {
    fn of(req: &WriteTxnMarkersRequest) -> DistinctWrites {
        let mut first_of: HashMap<(i64, i16, bool, i32), u32> = HashMap::new();
        let mut d = DistinctWrites {
            marker_of: Vec::with_capacity(req.markers.len()),
            topics: Vec::new(),
            topic_of: HashMap::new(),
            writes: Vec::new(),
        };
        for (i, m) in req.markers.iter().enumerate() {
            let marker = *first_of.entry(identity(m)).or_insert(i as u32);
            d.marker_of.push(marker);
            for t in &m.topics {
                let topic = d.topic(t.name.0.as_str());
                d.writes
                    .extend(t.partition_indexes.iter().map(|&p| (marker, topic, p)));
            }
        }
        d.writes.sort_unstable();
        d.writes.dedup();
        d
    }

    fn topic(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.topic_of.get(name) {
            return i;
        }
        let i = self.topics.len() as u32;
        self.topics.push(name.to_string());
        self.topic_of.insert(name.to_string(), i);
        i
    }

    /// Where the write of `partition` of `topic` under the request's `marker`-th marker is.
    fn position(&self, marker: usize, topic: &str, partition: i32) -> Option<usize> {
        let key = (
            self.marker_of[marker],
            *self.topic_of.get(topic)?,
            partition,
        );
        self.writes.binary_search(&key).ok()
    }
}

/// What makes two markers the same write.
fn identity(m: &WritableTxnMarker) -> (i64, i16, bool, i32) {
    (
        m.producer_id.0,
        m.producer_epoch,
        m.transaction_result,
        m.coordinator_epoch,
    )
}

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let distinct = DistinctWrites::of(&req);
    let mut codes = vec![0i16; distinct.writes.len()];
    let writes = distinct.writes.iter().enumerate().map(|(at, &(m, t, p))| {
        let m = &req.markers[m as usize];
        let tp = TopicPartition::new(distinct.topics[t as usize].as_str(), p);
        let marker = EndTxnMarker {
            result: match m.transaction_result {
                true => TxnResult::Commit,
                false => TxnResult::Abort,
            },
            coordinator_epoch: m.coordinator_epoch,
        };
        write_one(
            broker.clone(),
            at,
            tp,
            m.producer_id.0,
            m.producer_epoch,
            marker,
        )
    });
    // Boxed as a `dyn Stream`: the closure's borrowed types inside the handler's future
    // otherwise defeat the compiler's proof that the future is `Send`.
    let mut done: std::pin::Pin<Box<dyn futures::Stream<Item = (usize, i16)> + Send + '_>> =
        Box::pin(futures::stream::iter(writes).buffer_unordered(WRITES_AT_ONCE));
    while let Some((at, code)) = done.next().await {
        codes[at] = code;
    }
    drop(done);
    // One code per partition listed, in the request's order.
    answer_shaped_like(&req, |marker, topic, partition| {
        distinct
            .position(marker, topic, partition)
            .map_or(0, |at| codes[at])
    })
}

/// Writes one marker; `at` and its error code (0: written).
async fn write_one(
    broker: Arc<Broker>,
    at: usize,
    tp: TopicPartition,
    producer_id: i64,
    producer_epoch: i16,
    marker: EndTxnMarker,
) -> (usize, i16) {
    let written = write_local_marker(
        &broker.replicas,
        &broker.groups,
        &tp,
        producer_id,
        producer_epoch,
        marker,
    )
    .await;
    if let Err(e) = written {
        tracing::debug!(partition = %tp, error = ?e, "transaction marker refused");
    }
    (at, written.err().map_or(0, |e| e.code()))
}

/// The answer to `req`: its markers, topics and partitions in order, each partition with
/// the error code `code(marker's position, topic, partition)` gives (0: written).
pub fn answer_shaped_like(
    req: &WriteTxnMarkersRequest,
    mut code: impl FnMut(usize, &str, i32) -> i16,
) -> WriteTxnMarkersResponse {
    let results = req
        .markers
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let topics = m
                .topics
                .iter()
                .map(|t| {
                    let partitions = t
                        .partition_indexes
                        .iter()
                        .map(|&p| {
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(p)
                                .with_error_code(code(i, t.name.0.as_str(), p))
                        })
                        .collect();
                    WritableTxnMarkerTopicResult::default()
                        .with_name(t.name.clone())
                        .with_partitions(partitions)
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics)
        })
        .collect();
    WriteTxnMarkersResponse::default().with_markers(results)
}
