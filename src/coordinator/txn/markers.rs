//! Writing transaction markers to the partitions of a transaction (Kafka's
//! `TransactionMarkerChannelManager`). Each marker goes to the partition's leader as the
//! metadata names it: a partition this broker leads gets it by a local append, as Kafka's
//! WriteTxnMarkers handler appends it (a `__consumer_offsets` partition through the group
//! coordinator's owner of it); one led by another broker gets a WriteTxnMarkers request
//! (`peers.rs`), in one request with every other marker then pending for that broker
//! (`marker_sender.rs`). A partition without a leader, or whose leader moved or cannot be
//! reached, answers NOT_LEADER_OR_FOLLOWER and the coordinator retries with the metadata
//! of then; a topic the metadata no longer has is UNKNOWN_TOPIC_OR_PARTITION (dropped).
//! A marker is written once it is replicated to the whole ISR (acks=all, as Kafka's).

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use kafka_protocol::error::ResponseError;

use super::marker_sender::PendingMarker;
use super::peers::TxnPeers;
use crate::controller::Controller;
use crate::coordinator::group::records::OFFSETS_TOPIC;
use crate::coordinator::group::GroupCoordinator;
use crate::log::control::EndTxnMarker;
use crate::log::TopicPartition;
use crate::replica::delayed_produce::DelayedProduce;
use crate::replica::{AppendData, AppendEntry, AppendOrigin, AppendOutcome, ReplicaManager};

/// How long a marker waits for the ISR (Kafka's marker requests use `request.timeout.ms`).
const REPLICATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A marker being written; resolves once it is (or with why not).
pub type MarkerWrite = BoxFuture<'static, Result<(), ResponseError>>;

pub trait MarkerWriter: Send + Sync + 'static {
    /// Starts appending `marker` for `producer_id` at `producer_epoch` to each of
    /// `partitions` as their leaders; the writes in the same order. The markers bound for
    /// one broker are queued together before this returns, so they leave in one request.
    fn write_markers(
        &self,
        partitions: &[TopicPartition],
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
    ) -> Vec<MarkerWrite>;
}

/// Markers to each partition's current leader, this broker or another.
pub struct ClusterMarkerWriter {
    broker_id: i32,
    replicas: Arc<ReplicaManager>,
    groups: Arc<GroupCoordinator>,
    metadata: Arc<dyn Controller>,
    peers: Arc<TxnPeers>,
}

impl ClusterMarkerWriter {
    pub fn new(
        broker_id: i32,
        replicas: Arc<ReplicaManager>,
        groups: Arc<GroupCoordinator>,
        metadata: Arc<dyn Controller>,
        peers: Arc<TxnPeers>,
    ) -> Self {
        ClusterMarkerWriter {
            broker_id,
            replicas,
            groups,
            metadata,
            peers,
        }
    }

    /// The partition's leader in the metadata: None when the topic or partition is gone.
    fn leader(&self, tp: &TopicPartition) -> Option<i32> {
        let topic = self.metadata.topic(&tp.topic)?;
        let p = topic
            .partitions
            .iter()
            .find(|p| p.partition == tp.partition)?;
        Some(p.state.leader)
    }
}

impl MarkerWriter for ClusterMarkerWriter {
    fn write_markers(
        &self,
        partitions: &[TopicPartition],
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
    ) -> Vec<MarkerWrite> {
        let mut writes: Vec<Option<MarkerWrite>> = Vec::with_capacity(partitions.len());
        // Partitions led by other brokers, by leader: (their place in `writes`, marker).
        let mut elsewhere: HashMap<i32, Vec<(usize, PendingMarker)>> = HashMap::new();
        for tp in partitions {
            let write: MarkerWrite = match self.leader(tp) {
                None => ready(Err(ResponseError::UnknownTopicOrPartition)),
                Some(leader) if leader < 0 => ready(Err(ResponseError::NotLeaderOrFollower)),
                Some(leader) if leader == self.broker_id => {
                    let (replicas, groups, tp) =
                        (self.replicas.clone(), self.groups.clone(), tp.clone());
                    Box::pin(async move {
                        write_local_marker(
                            &replicas,
                            &groups,
                            &tp,
                            producer_id,
                            producer_epoch,
                            marker,
                        )
                        .await
                        // The metadata names this broker before the partition is hosted here.
                        .map_err(|e| match e {
                            ResponseError::UnknownTopicOrPartition => {
                                ResponseError::NotLeaderOrFollower
                            }
                            e => e,
                        })
                    })
                }
                Some(leader) => {
                    let pending = PendingMarker {
                        tp: tp.clone(),
                        producer_id,
                        producer_epoch,
                        marker,
                    };
                    elsewhere
                        .entry(leader)
                        .or_default()
                        .push((writes.len(), pending));
                    writes.push(None);
                    continue;
                }
            };
            writes.push(Some(write));
        }
        for (leader, markers) in elsewhere {
            let (places, markers): (Vec<usize>, Vec<PendingMarker>) = markers.into_iter().unzip();
            let answers = self.peers.write_markers(leader, markers);
            for (place, answer) in places.into_iter().zip(answers) {
                // No answer: the sender went away with the request; the leader is looked
                // up again on the retry.
                writes[place] = Some(Box::pin(async move {
                    answer
                        .await
                        .unwrap_or(Err(ResponseError::NotLeaderOrFollower))
                }));
            }
        }
        writes.into_iter().flatten().collect()
    }
}

fn ready(result: Result<(), ResponseError>) -> MarkerWrite {
    Box::pin(std::future::ready(result))
}

/// Appends a marker to a partition this broker leads: what WriteTxnMarkers does for
/// each of its partitions. A `__consumer_offsets` partition gets it through the group
/// coordinator, which applies the transaction's pending offsets as the marker lands;
/// its "not served here" answers are the partition's NOT_LEADER_OR_FOLLOWER.
///
/// A producer id below 0 is no producer's (INVALID_REQUEST). A marker for a producer
/// the partition does not know is not written and answered as done: that producer has
/// no transaction open here to end (it added the partition and aborted before writing
/// to it, or never existed), and an error would have its coordinator retry forever.
pub async fn write_local_marker(
    replicas: &ReplicaManager,
    groups: &GroupCoordinator,
    tp: &TopicPartition,
    producer_id: i64,
    producer_epoch: i16,
    marker: EndTxnMarker,
) -> Result<(), ResponseError> {
    if producer_id < 0 {
        return Err(ResponseError::InvalidRequest);
    }
    let p = replicas.leader(tp, -1).map_err(|e| e.error)?;
    if tp.topic == OFFSETS_TOPIC {
        return groups
            .complete_transaction(tp.partition, producer_id, producer_epoch, marker)
            .await
            .map_err(|e| match e {
                ResponseError::NotCoordinator
                | ResponseError::CoordinatorNotAvailable
                | ResponseError::CoordinatorLoadInProgress => ResponseError::NotLeaderOrFollower,
                e => e,
            });
    }
    if !p.knows_producer(producer_id) {
        tracing::debug!(partition = %tp, producer_id, "transaction marker for a producer this partition does not know: nothing to end, not written");
        return Ok(());
    }
    let data = AppendData::Marker {
        producer_id,
        producer_epoch,
        marker,
    };
    let entry = AppendEntry::new(&tp.topic, tp.partition, data);
    let info = match Some(replicas.append_one(AppendOrigin::Marker, entry).await) {
        Some(AppendOutcome::Appended(info)) => info,
        Some(AppendOutcome::Refused { error, .. }) => return Err(error.error().error),
        _ => return Err(ResponseError::NotLeaderOrFollower),
    };
    let mut replicated = DelayedProduce::new();
    replicated.watch(p, info.last_offset);
    match replicated
        .complete(REPLICATION_TIMEOUT)
        .await
        .pop()
        .flatten()
    {
        None => Ok(()),
        Some(e) => Err(e),
    }
}
