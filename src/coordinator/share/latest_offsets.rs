//! The latest offset of a share-partition's topic partition, which DescribeShareGroupOffsets
//! v1's lag is measured against (Kafka's `PartitionMetadataClient.listLatestOffsets`): the
//! high watermark, read from the partition when this broker leads it, else asked of its
//! leader with ListOffsets (LATEST, read_uncommitted) as Kafka's group coordinator asks.
//!
//! Kafka's lag (KIP-1226): `latest offset - share-partition start offset - delivery
//! complete count`, the records at or above the start offset not yet delivered for good.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::persister::StateSummary;
use crate::controller::Controller;
use crate::coordinator::txn::peers::Clients;
use crate::replica::ReplicaManager;

/// ListOffsets' LATEST timestamp.
const LATEST_TIMESTAMP: i64 = -1;
/// ListOffsets versions sent to a partition's leader (v1 answers one offset; v2 has the
/// isolation level).
const LIST_OFFSETS_MIN_VERSION: i16 = 2;
const LIST_OFFSETS_MAX_VERSION: i16 = 9;

pub struct LatestOffsets {
    replicas: Arc<ReplicaManager>,
    controller: Arc<dyn Controller>,
    clients: Clients,
}

impl LatestOffsets {
    pub fn new(
        replicas: Arc<ReplicaManager>,
        controller: Arc<dyn Controller>,
        clients: Clients,
    ) -> Self {
        LatestOffsets {
            replicas,
            controller,
            clients,
        }
    }

    /// `topic`-`partition`'s high watermark, or the error its leader answered
    /// (LEADER_NOT_AVAILABLE while it has none, UNKNOWN_TOPIC_OR_PARTITION for one the
    /// metadata does not know).
    pub async fn latest(&self, topic: &str, partition: i32) -> Result<i64, ResponseError> {
        if let Ok(p) = self.replicas.leader_of(topic, partition, -1) {
            return Ok(p.high_watermark());
        }
        let leader = self
            .controller
            .topic(topic)
            .and_then(|t| {
                t.partitions
                    .iter()
                    .find(|p| p.partition == partition)
                    .map(|p| p.state.leader)
            })
            .ok_or(ResponseError::UnknownTopicOrPartition)?;
        let cluster = &self.replicas.cluster;
        if leader < 0 || leader == cluster.local_id() {
            // Led here but not (yet) hosted as leader, or no leader at all.
            return Err(ResponseError::LeaderNotAvailable);
        }
        let client = self
            .clients
            .client(cluster, leader)
            .ok_or(ResponseError::LeaderNotAvailable)?;
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(0)
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(LATEST_TIMESTAMP)])]);
        let (_, resp) = client
            .send_negotiated(&req, LIST_OFFSETS_MIN_VERSION, LIST_OFFSETS_MAX_VERSION)
            .await
            .map_err(|e| {
                tracing::debug!(topic, partition, leader, error = %e, "ListOffsets for a share lag got no answer");
                ResponseError::LeaderNotAvailable
            })?;
        let p = resp
            .topics
            .into_iter()
            .next()
            .and_then(|t| t.partitions.into_iter().next())
            .ok_or(ResponseError::UnknownServerError)?;
        match ResponseError::try_from_code(p.error_code) {
            Some(e) => Err(e),
            None => Ok(p.offset),
        }
    }
}

/// Kafka's lag of one share-partition from its persisted summary and its partition's
/// latest offset; None (answered as -1) when it is not known: the share-partition was
/// never initialized, or its last write came without a delivery complete count.
pub fn share_partition_lag(summary: &StateSummary, latest_offset: i64) -> Option<i64> {
    if summary.start_offset == -1 || summary.delivery_complete_count == -1 {
        return None;
    }
    Some(latest_offset - summary.start_offset - i64::from(summary.delivery_complete_count))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(start_offset: i64, delivery_complete_count: i32) -> StateSummary {
        StateSummary {
            state_epoch: 0,
            leader_epoch: 0,
            start_offset,
            delivery_complete_count,
        }
    }

    #[test]
    fn lag_is_the_records_past_the_start_offset_not_yet_complete() {
        // Ten records, start offset 3 (0-2 done), 4 and 6 accepted beyond it.
        assert_eq!(share_partition_lag(&summary(3, 2), 10), Some(5));
        assert_eq!(share_partition_lag(&summary(10, 0), 10), Some(0));
    }

    #[test]
    fn lag_is_unknown_without_a_start_offset_or_a_count() {
        assert_eq!(share_partition_lag(&summary(-1, 0), 10), None);
        assert_eq!(share_partition_lag(&summary(3, -1), 10), None);
    }
}
