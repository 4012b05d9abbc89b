//! WriteTxnMarkers: commit or abort markers appended to partitions this broker leads.
//! A transaction coordinator on another broker sends it to end a transaction here, and
//! `kafka-transactions.sh abort` sends it to end a hanging one. The markers of skua's own
//! coordinator are appended locally, the same way (`coordinator::txn::markers`).

use std::sync::Arc;

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};

use crate::broker::Broker;
use crate::coordinator::txn::markers::write_local_marker;
use crate::log::control::{EndTxnMarker, TxnResult};
use crate::log::TopicPartition;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    // Every partition's marker is appended and awaited at once, as Kafka appends a
    // request's markers in one go: each waits for its ISR, and one after another a
    // request with many partitions would take that many replication rounds.
    let writes = req.markers.iter().flat_map(|m| {
        let marker = EndTxnMarker {
            result: match m.transaction_result {
                true => TxnResult::Commit,
                false => TxnResult::Abort,
            },
            coordinator_epoch: m.coordinator_epoch,
        };
        let broker = &broker;
        m.topics.iter().flat_map(move |t| {
            t.partition_indexes.iter().map(move |&p| async move {
                let tp = TopicPartition::new(t.name.0.as_str(), p);
                let written = write_local_marker(
                    &broker.replicas,
                    &broker.groups,
                    &tp,
                    m.producer_id.0,
                    m.producer_epoch,
                    marker,
                )
                .await;
                if let Err(e) = written {
                    tracing::debug!(partition = %tp, error = ?e, "transaction marker refused");
                }
                written.err().map_or(0, |e| e.code())
            })
        })
    });
    let mut codes = futures::future::join_all(writes).await.into_iter();
    // One code per partition, in the request's order.
    answer_shaped_like(req, |_, _| codes.next().unwrap_or(0))
}

/// The answer to `req`: its markers, topics and partitions in order, each partition with
/// the error code `code(topic, partition)` gives (0: written).
pub fn answer_shaped_like(
    req: WriteTxnMarkersRequest,
    mut code: impl FnMut(&str, i32) -> i16,
) -> WriteTxnMarkersResponse {
    let results = req
        .markers
        .into_iter()
        .map(|m| {
            let topics = m
                .topics
                .into_iter()
                .map(|t| {
                    let partitions = t
                        .partition_indexes
                        .iter()
                        .map(|&p| {
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(p)
                                .with_error_code(code(t.name.0.as_str(), p))
                        })
                        .collect();
                    WritableTxnMarkerTopicResult::default()
                        .with_name(t.name)
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
