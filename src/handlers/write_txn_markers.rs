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
    let mut results = Vec::with_capacity(req.markers.len());
    for m in req.markers {
        let marker = EndTxnMarker {
            result: match m.transaction_result {
                true => TxnResult::Commit,
                false => TxnResult::Abort,
            },
            coordinator_epoch: m.coordinator_epoch,
        };
        let mut topics = Vec::with_capacity(m.topics.len());
        for t in m.topics {
            let mut partitions = Vec::with_capacity(t.partition_indexes.len());
            for &p in &t.partition_indexes {
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
                partitions.push(
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(written.err().map_or(0, |e| e.code())),
                );
            }
            topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(t.name)
                    .with_partitions(partitions),
            );
        }
        results.push(
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics),
        );
    }
    WriteTxnMarkersResponse::default().with_markers(results)
}
