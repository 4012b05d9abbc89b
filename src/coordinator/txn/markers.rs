//! Writing transaction markers to the partitions of a transaction (Kafka's
//! `TransactionMarkerChannelManager`). A partition this broker leads gets its marker by
//! a local append, as Kafka's WriteTxnMarkers handler appends it (a `__consumer_offsets`
//! partition through the group coordinator's owner of it); one led by another
//! broker is answered NOT_LEADER_OR_FOLLOWER here and retried until the leadership
//! comes back (sending WriteTxnMarkers to another broker comes with replication).

use std::sync::Arc;

use async_trait::async_trait;
use kafka_protocol::error::ResponseError;

use crate::coordinator::group::records::OFFSETS_TOPIC;
use crate::coordinator::group::GroupCoordinator;
use crate::log::control::EndTxnMarker;
use crate::log::{now_ms, TopicPartition};
use crate::replica::ReplicaManager;

#[async_trait]
pub trait MarkerWriter: Send + Sync + 'static {
    /// Appends `marker` for `producer_id` at `producer_epoch` to `tp` as its leader.
    async fn write_marker(
        &self,
        tp: &TopicPartition,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
    ) -> Result<(), ResponseError>;
}

pub struct LocalMarkerWriter {
    replicas: Arc<ReplicaManager>,
    groups: Arc<GroupCoordinator>,
}

impl LocalMarkerWriter {
    pub fn new(replicas: Arc<ReplicaManager>, groups: Arc<GroupCoordinator>) -> Self {
        LocalMarkerWriter { replicas, groups }
    }
}

#[async_trait]
impl MarkerWriter for LocalMarkerWriter {
    async fn write_marker(
        &self,
        tp: &TopicPartition,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
    ) -> Result<(), ResponseError> {
        write_local_marker(
            &self.replicas,
            &self.groups,
            tp,
            producer_id,
            producer_epoch,
            marker,
        )
        .await
    }
}

/// Appends a marker to a partition this broker leads: what WriteTxnMarkers does for
/// each of its partitions. A `__consumer_offsets` partition gets it through the group
/// coordinator, which applies the transaction's pending offsets as the marker lands;
/// its "not served here" answers are the partition's NOT_LEADER_OR_FOLLOWER.
pub async fn write_local_marker(
    replicas: &ReplicaManager,
    groups: &GroupCoordinator,
    tp: &TopicPartition,
    producer_id: i64,
    producer_epoch: i16,
    marker: EndTxnMarker,
) -> Result<(), ResponseError> {
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
    p.append_marker(producer_id, producer_epoch, marker, now_ms())
        .await
        .map(drop)
        .map_err(|e| e.error().error)
}
