//! DescribeProducers: the producers a partition's leader remembers, with the first
//! offset of each one's open transaction (`kafka-transactions.sh describe-producers`,
//! and how `find-hanging` spots transactions no coordinator will end). READ on each
//! topic, else its partitions answer TOPIC_AUTHORIZATION_FAILED.

use std::sync::Arc;

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};

use super::str_bytes;
use kafka_protocol::error::ResponseError;

use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::log::TopicPartition;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let readable = ctx.authorize(AclOperation::Read, ResourceType::Topic, &t.name);
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| match readable {
                    true => describe(&broker, &TopicPartition::new(t.name.0.as_str(), p)),
                    false => PartitionResponse::default()
                        .with_partition_index(p)
                        .with_error_code(ResponseError::TopicAuthorizationFailed.code()),
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

fn describe(broker: &Broker, tp: &TopicPartition) -> PartitionResponse {
    let base = PartitionResponse::default().with_partition_index(tp.partition);
    let p = match broker.replicas.leader(tp, -1) {
        Ok(p) => p,
        Err(e) => {
            return base
                .with_error_code(e.code())
                .with_error_message(Some(str_bytes(e.message())))
        }
    };
    let mut producers = p.producer_states();
    producers.sort_by_key(|e| e.producer_id);
    let active = producers
        .into_iter()
        .map(|e| {
            ProducerState::default()
                .with_producer_id(ProducerId(e.producer_id))
                .with_producer_epoch(i32::from(e.epoch))
                .with_last_sequence(e.batches.back().map_or(-1, |b| b.last_seq))
                .with_last_timestamp(e.last_timestamp)
                .with_coordinator_epoch(e.coordinator_epoch)
                .with_current_txn_start_offset(e.current_txn_first_offset.unwrap_or(-1))
        })
        .collect();
    base.with_active_producers(active)
}
