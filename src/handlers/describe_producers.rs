//! DescribeProducers: the producers a partition's leader remembers, with the first
//! offset of each one's open transaction (`kafka-transactions.sh describe-producers`,
//! and how `find-hanging` spots transactions no coordinator will end).

use std::sync::Arc;

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};

use super::str_bytes;
use crate::broker::Broker;
use crate::log::TopicPartition;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| describe(&broker, &TopicPartition::new(t.name.0.as_str(), p)))
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
