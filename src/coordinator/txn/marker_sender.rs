//! The sending side of Kafka's `TransactionMarkerChannelManager`: markers bound for
//! another broker wait in that broker's queue, and one task per broker drains the whole
//! queue into one WriteTxnMarkers request (every partition of every transaction pending
//! for it then), sends it, and hands each partition's answer back to the transaction it
//! belongs to. Markers queued while a request is out go in the next one, so a broker
//! sees one request per round of replication instead of one per partition: it answers
//! the requests of a connection one at a time, each once its markers are replicated.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ProducerId, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::{mpsc, oneshot};

use super::peers::Clients;
use crate::log::control::{EndTxnMarker, TxnResult};
use crate::log::TopicPartition;
use crate::replica::cluster_view::ClusterView;

/// WriteTxnMarkers versions this broker sends (Kafka 3.9 answers 0 and 1).
const MARKERS_MIN_VERSION: i16 = 0;
const MARKERS_MAX_VERSION: i16 = 1;

/// One partition's marker for a transaction.
#[derive(Clone, Debug)]
pub struct PendingMarker {
    pub tp: TopicPartition,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub marker: EndTxnMarker,
}

/// The partition's answer once its request came back.
pub type MarkerAnswer = oneshot::Receiver<Result<(), ResponseError>>;

struct Queued {
    pending: PendingMarker,
    answer: oneshot::Sender<Result<(), ResponseError>>,
}

/// What a request's markers share: Kafka's response keys them by producer id alone.
type TxnKey = (i64, i16, bool, i32);

fn txn_key(m: &PendingMarker) -> TxnKey {
    (
        m.producer_id,
        m.producer_epoch,
        m.marker.result == TxnResult::Commit,
        m.marker.coordinator_epoch,
    )
}

/// Each destination broker's queue, with its draining task started on first use.
pub struct MarkerQueues {
    cluster: Arc<ClusterView>,
    clients: Arc<Clients>,
    by_broker: parking_lot::Mutex<HashMap<i32, mpsc::UnboundedSender<Vec<Queued>>>>,
}

impl MarkerQueues {
    pub fn new(cluster: Arc<ClusterView>, clients: Arc<Clients>) -> Self {
        MarkerQueues {
            cluster,
            clients,
            by_broker: parking_lot::Mutex::new(HashMap::new()),
        }
    }

    /// Queues `markers` for `broker` together (they leave in the same request); their
    /// answers in the same order. Must run in a tokio runtime.
    pub fn enqueue(&self, broker: i32, markers: Vec<PendingMarker>) -> Vec<MarkerAnswer> {
        let (queued, answers): (Vec<Queued>, Vec<MarkerAnswer>) = markers
            .into_iter()
            .map(|pending| {
                let (answer, rx) = oneshot::channel();
                (Queued { pending, answer }, rx)
            })
            .unzip();
        let mut queues = self.by_broker.lock();
        let queue = queues.entry(broker).or_insert_with(|| self.start(broker));
        // The task ends only with its queue's sender; one that panicked is replaced.
        if let Err(mpsc::error::SendError(queued)) = queue.send(queued) {
            *queue = self.start(broker);
            let _ = queue.send(queued);
        }
        answers
    }

    fn start(&self, broker: i32) -> mpsc::UnboundedSender<Vec<Queued>> {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(drain(
            broker,
            self.cluster.clone(),
            self.clients.clone(),
            rx,
        ));
        tx
    }
}

/// Sends what `queue` holds to `broker`, one request at a time, until the queues are
/// dropped.
async fn drain(
    broker: i32,
    cluster: Arc<ClusterView>,
    clients: Arc<Clients>,
    mut queue: mpsc::UnboundedReceiver<Vec<Queued>>,
) {
    let mut waiting: Vec<Queued> = Vec::new();
    loop {
        if waiting.is_empty() {
            match queue.recv().await {
                Some(markers) => waiting = markers,
                None => return,
            }
        }
        while let Ok(more) = queue.try_recv() {
            waiting.extend(more);
        }
        // Markers whose transaction ended meanwhile (its coordinator stopped) are dropped.
        waiting.retain(|q| !q.answer.is_closed());
        let (batch, held) = one_request(std::mem::take(&mut waiting));
        waiting = held;
        if !batch.is_empty() {
            send(broker, &cluster, &clients, batch).await;
        }
    }
}

/// Splits `queued` into what one request can carry and what waits for the next: a
/// producer id appears in a request with one marker only, as the answer names the
/// producer id alone (a later epoch's marker waits for the earlier one's answer).
fn one_request(queued: Vec<Queued>) -> (Vec<Queued>, Vec<Queued>) {
    let mut keys: HashMap<i64, TxnKey> = HashMap::new();
    queued.into_iter().partition(|q| {
        let key = txn_key(&q.pending);
        *keys.entry(key.0).or_insert(key) == key
    })
}

async fn send(broker: i32, cluster: &ClusterView, clients: &Clients, batch: Vec<Queued>) {
    // A broker that cannot be reached (or has no known address) is NOT_LEADER_OR_FOLLOWER:
    // the coordinator looks the leader up again and retries, as Kafka's marker sender
    // does after a disconnect.
    let Some(client) = clients.client(cluster, broker) else {
        answer_all(batch, ResponseError::NotLeaderOrFollower);
        return;
    };
    let request = request_for(batch.iter().map(|q| &q.pending));
    let response = match client
        .send_negotiated(&request, MARKERS_MIN_VERSION, MARKERS_MAX_VERSION)
        .await
    {
        Ok((_, response)) => response,
        Err(e) => {
            tracing::debug!(broker, markers = batch.len(), error = %e, "WriteTxnMarkers got no answer");
            answer_all(batch, ResponseError::NotLeaderOrFollower);
            return;
        }
    };
    let codes = codes(&response);
    for q in batch {
        let m = &q.pending;
        let code = codes.get(&(m.producer_id, m.tp.topic.as_str(), m.tp.partition));
        let result = match code {
            Some(0) => Ok(()),
            Some(&code) => Err(error(code)),
            None => {
                tracing::warn!(broker, partition = %m.tp, "WriteTxnMarkers answered without the partition");
                Err(ResponseError::UnknownServerError)
            }
        };
        let _ = q.answer.send(result);
    }
}

fn answer_all(batch: Vec<Queued>, e: ResponseError) {
    for q in batch {
        let _ = q.answer.send(Err(e));
    }
}

/// One WriteTxnMarkers for `markers`: one entry per transaction, its partitions grouped
/// by topic.
pub fn request_for<'a>(markers: impl Iterator<Item = &'a PendingMarker>) -> WriteTxnMarkersRequest {
    let mut txns: Vec<WritableTxnMarker> = Vec::new();
    let mut txn_index: HashMap<TxnKey, usize> = HashMap::new();
    let mut topic_index: HashMap<(usize, &str), usize> = HashMap::new();
    for m in markers {
        let t = *txn_key_index(&mut txn_index, &mut txns, m);
        let topics = &mut txns[t].topics;
        let i = *topic_index
            .entry((t, m.tp.topic.as_str()))
            .or_insert_with(|| {
                topics.push(
                    WritableTxnMarkerTopic::default()
                        .with_name(TopicName(StrBytes::from_string(m.tp.topic.clone()))),
                );
                topics.len() - 1
            });
        topics[i].partition_indexes.push(m.tp.partition);
    }
    WriteTxnMarkersRequest::default().with_markers(txns)
}

fn txn_key_index<'m>(
    index: &'m mut HashMap<TxnKey, usize>,
    txns: &mut Vec<WritableTxnMarker>,
    m: &PendingMarker,
) -> &'m usize {
    index.entry(txn_key(m)).or_insert_with(|| {
        txns.push(
            WritableTxnMarker::default()
                .with_producer_id(ProducerId(m.producer_id))
                .with_producer_epoch(m.producer_epoch)
                .with_transaction_result(m.marker.result == TxnResult::Commit)
                .with_coordinator_epoch(m.marker.coordinator_epoch),
        );
        txns.len() - 1
    })
}

/// Each (producer id, topic, partition)'s error code in `response`.
fn codes(response: &WriteTxnMarkersResponse) -> HashMap<(i64, &str, i32), i16> {
    response
        .markers
        .iter()
        .flat_map(|m| {
            m.topics.iter().flat_map(move |t| {
                t.partitions.iter().map(move |p| {
                    (
                        (m.producer_id.0, t.name.0.as_str(), p.partition_index),
                        p.error_code,
                    )
                })
            })
        })
        .collect()
}

fn error(code: i16) -> ResponseError {
    ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError)
}

#[cfg(test)]
#[path = "marker_sender_tests.rs"]
mod tests;
