//! DescribeLogDirs (KIP-113, KIP-827): each of this broker's `log.dirs` with the replicas
//! it holds (size, and for a `-future` copy how far it is behind), and from v4 the size of
//! the file system under it. An offline dir is listed with KAFKA_STORAGE_ERROR. What
//! `kafka-log-dirs.sh --describe` prints, and how an admin finds where a replica lives
//! before AlterReplicaLogDirs moves it.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};

use super::{str_bytes, topic_name};
use crate::broker::Broker;
use crate::log::{LogDirDescription, TopicPartition};
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    // Null asks for every replica; a list, for the partitions it names.
    let wanted: Option<HashSet<TopicPartition>> = req.topics.map(|topics| {
        topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|&p| TopicPartition::new(t.topic.0.as_str(), p))
            })
            .collect()
    });
    let results = broker
        .replicas
        .logs
        .describe_log_dirs()
        .into_iter()
        .map(|dir| describe(dir, wanted.as_ref()))
        .collect();
    DescribeLogDirsResponse::default().with_results(results)
}

fn describe(
    dir: LogDirDescription,
    wanted: Option<&HashSet<TopicPartition>>,
) -> DescribeLogDirsResult {
    let result = DescribeLogDirsResult::default()
        .with_log_dir(str_bytes(dir.path.to_string_lossy()))
        .with_total_bytes(-1)
        .with_usable_bytes(-1);
    if dir.offline_cause.is_some() {
        return result.with_error_code(ResponseError::KafkaStorageError.code());
    }
    let mut topics: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
    for replica in dir.replicas {
        if wanted.is_some_and(|w| !w.contains(&replica.tp)) {
            continue;
        }
        topics.entry(replica.tp.topic.clone()).or_default().push(
            DescribeLogDirsPartition::default()
                .with_partition_index(replica.tp.partition)
                .with_partition_size(i64::try_from(replica.size_bytes).unwrap_or(i64::MAX))
                .with_offset_lag(replica.offset_lag)
                .with_is_future_key(replica.is_future),
        );
    }
    let topics = topics
        .into_iter()
        .map(|(name, partitions)| {
            DescribeLogDirsTopic::default()
                .with_name(topic_name(&name))
                .with_partitions(partitions)
        })
        .collect();
    let (total, usable) = dir
        .total_and_usable_bytes
        .map_or((-1, -1), |(t, u)| (clamp(t), clamp(u)));
    result
        .with_topics(topics)
        .with_total_bytes(total)
        .with_usable_bytes(usable)
}

fn clamp(bytes: u64) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}
