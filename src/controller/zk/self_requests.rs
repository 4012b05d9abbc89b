//! What a skua broker answers when a controller (skua's own, which addresses its own
//! broker over the network as Kafka's does, or a Kafka broker's) sends it LeaderAndIsr,
//! UpdateMetadata or StopReplica, until skua's broker side (a metadata cache fed by
//! UpdateMetadata, replicas led and followed on LeaderAndIsr) exists.
//!
//! It fences as a Kafka broker does: a request from an older controller epoch than one
//! already seen is answered STALE_CONTROLLER_EPOCH, one addressed to an older
//! registration of this broker STALE_BROKER_EPOCH. Beyond that it hosts nothing and
//! pretends nothing:
//! - LeaderAndIsr: every partition is answered KAFKA_STORAGE_ERROR, the answer of a
//!   broker that cannot host the replica (Kafka's for a replica on a failed log dir).
//!   The controller then treats the replica as offline: out of the ISR, and leadership
//!   elected elsewhere. No log is created.
//! - UpdateMetadata: acknowledged; its content is not kept (no metadata cache yet).
//! - StopReplica: every partition acknowledged; there is no replica to stop and no file
//!   is touched (a deletion is confirmed because this broker holds no data for it).

use std::sync::atomic::{AtomicI32, Ordering};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::leader_and_isr_response::{
    LeaderAndIsrPartitionError, LeaderAndIsrTopicError,
};
use kafka_protocol::messages::stop_replica_response::StopReplicaPartitionError;
use kafka_protocol::messages::{
    LeaderAndIsrRequest, LeaderAndIsrResponse, StopReplicaRequest, StopReplicaResponse,
    UpdateMetadataRequest, UpdateMetadataResponse,
};

/// The highest controller epoch seen in a controller request.
#[derive(Debug)]
pub struct SelfRequests {
    controller_epoch: AtomicI32,
}

impl Default for SelfRequests {
    fn default() -> Self {
        SelfRequests {
            controller_epoch: AtomicI32::new(-1),
        }
    }
}

impl SelfRequests {
    /// Kafka's checks of a control request: None to go on, or the error to answer.
    pub fn fence(
        &self,
        controller_epoch: i32,
        request_broker_epoch: i64,
        broker_epoch: i64,
    ) -> Option<ResponseError> {
        // -1: a controller that does not know the epoch (Kafka before KIP-380) is trusted.
        if request_broker_epoch != -1 && request_broker_epoch < broker_epoch {
            return Some(ResponseError::StaleBrokerEpoch);
        }
        let seen = self
            .controller_epoch
            .fetch_max(controller_epoch, Ordering::AcqRel);
        (controller_epoch < seen).then_some(ResponseError::StaleControllerEpoch)
    }

    pub fn leader_and_isr(
        &self,
        req: &LeaderAndIsrRequest,
        version: i16,
        broker_epoch: i64,
    ) -> LeaderAndIsrResponse {
        if let Some(e) = self.fence(req.controller_epoch, req.broker_epoch, broker_epoch) {
            return LeaderAndIsrResponse::default().with_error_code(e.code());
        }
        let storage = ResponseError::KafkaStorageError.code();
        tracing::info!(
            controller = req.controller_id.0,
            partitions = req.topic_states.iter().map(|t| t.partition_states.len()).sum::<usize>() + req.ungrouped_partition_states.len(),
            "LeaderAndIsr: this broker hosts no replicas in cluster mode yet; answering KAFKA_STORAGE_ERROR"
        );
        if version >= 5 {
            let topics = req
                .topic_states
                .iter()
                .map(|t| {
                    LeaderAndIsrTopicError::default()
                        .with_topic_id(t.topic_id)
                        .with_partition_errors(
                            t.partition_states
                                .iter()
                                .map(|p| {
                                    LeaderAndIsrPartitionError::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(storage)
                                })
                                .collect(),
                        )
                })
                .collect();
            return LeaderAndIsrResponse::default().with_topics(topics);
        }
        let partitions = req
            .topic_states
            .iter()
            .flat_map(|t| {
                t.partition_states
                    .iter()
                    .map(move |p| (t.topic_name.clone(), p.partition_index))
            })
            .chain(
                req.ungrouped_partition_states
                    .iter()
                    .map(|p| (p.topic_name.clone(), p.partition_index)),
            )
            .map(|(topic, p)| {
                LeaderAndIsrPartitionError::default()
                    .with_topic_name(topic)
                    .with_partition_index(p)
                    .with_error_code(storage)
            })
            .collect();
        LeaderAndIsrResponse::default().with_partition_errors(partitions)
    }

    pub fn update_metadata(
        &self,
        req: &UpdateMetadataRequest,
        broker_epoch: i64,
    ) -> UpdateMetadataResponse {
        let error = self.fence(req.controller_epoch, req.broker_epoch, broker_epoch);
        UpdateMetadataResponse::default().with_error_code(error.map_or(0, |e| e.code()))
    }

    pub fn stop_replica(&self, req: &StopReplicaRequest, broker_epoch: i64) -> StopReplicaResponse {
        if let Some(e) = self.fence(req.controller_epoch, req.broker_epoch, broker_epoch) {
            return StopReplicaResponse::default().with_error_code(e.code());
        }
        let partitions = req
            .topic_states
            .iter()
            .flat_map(|t| {
                t.partition_states
                    .iter()
                    .map(move |p| (t.topic_name.clone(), p.partition_index))
            })
            .chain(req.topics.iter().flat_map(|t| {
                t.partition_indexes
                    .iter()
                    .map(move |&p| (t.name.clone(), p))
            }))
            .chain(
                req.ungrouped_partitions
                    .iter()
                    .map(|p| (p.topic_name.clone(), p.partition_index)),
            )
            .map(|(topic, p)| {
                StopReplicaPartitionError::default()
                    .with_topic_name(topic)
                    .with_partition_index(p)
                    .with_error_code(0)
            })
            .collect();
        StopReplicaResponse::default().with_partition_errors(partitions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::leader_and_isr_request::{
        LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
    };
    use uuid::Uuid;

    #[test]
    fn older_controllers_and_registrations_are_fenced() {
        let s = SelfRequests::default();
        assert_eq!(s.fence(3, 100, 100), None);
        assert_eq!(
            s.fence(2, 100, 100),
            Some(ResponseError::StaleControllerEpoch)
        );
        assert_eq!(s.fence(4, 99, 100), Some(ResponseError::StaleBrokerEpoch));
        assert_eq!(s.fence(4, -1, 100), None);
    }

    #[test]
    fn leader_and_isr_is_refused_per_partition_without_hosting() {
        let s = SelfRequests::default();
        let id = Uuid::new_v4();
        let req = LeaderAndIsrRequest::default()
            .with_controller_epoch(1)
            .with_broker_epoch(5)
            .with_topic_states(vec![LeaderAndIsrTopicState::default()
                .with_topic_id(id)
                .with_partition_states(vec![
                    LeaderAndIsrPartitionState::default().with_partition_index(0),
                    LeaderAndIsrPartitionState::default().with_partition_index(1),
                ])]);
        let r = s.leader_and_isr(&req, 7, 5);
        assert_eq!(r.error_code, 0);
        assert_eq!(r.topics[0].topic_id, id);
        let codes: Vec<i16> = r.topics[0]
            .partition_errors
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert_eq!(codes, vec![56, 56], "KAFKA_STORAGE_ERROR for each");
    }
}
