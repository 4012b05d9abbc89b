//! AlterReplicaLogDirs (KIP-113): moves replicas hosted here to another of this broker's
//! `log.dirs` (`kafka-reassign-partitions.sh` with `log_dirs` in its JSON). Answered at
//! once: the copy runs in the background (`replica::log_dir_move`), and DescribeLogDirs
//! shows its `-future` log until it takes over.
//!
//! Errors as Kafka's: LOG_DIR_NOT_FOUND for a path that is not one of the log dirs,
//! KAFKA_STORAGE_ERROR for an offline dir or replica, REPLICA_NOT_AVAILABLE for a
//! partition not hosted here; CLUSTER_AUTHORIZATION_FAILED for every partition without
//! ALTER on the cluster.

use std::path::Path;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse};

use crate::auth::authorizer::CLUSTER_NAME;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::log::TopicPartition;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: AlterReplicaLogDirsRequest,
) -> AlterReplicaLogDirsResponse {
    let mut results = Vec::new();
    let allowed = ctx.authorize(AclOperation::Alter, ResourceType::Cluster, CLUSTER_NAME);
    for dir in req.dirs {
        let dir_index = broker
            .replicas
            .logs
            .log_dir_index(Path::new(dir.path.as_str()));
        for topic in dir.topics {
            let partitions = topic
                .partitions
                .iter()
                .map(|&p| {
                    let tp = TopicPartition::new(topic.name.0.as_str(), p);
                    let code = match dir_index {
                        _ if !allowed => ResponseError::ClusterAuthorizationFailed.code(),
                        None => ResponseError::LogDirNotFound.code(),
                        Some(index) => match broker.replicas.alter_replica_log_dir(&tp, index) {
                            Ok(()) => 0,
                            Err(e) => {
                                tracing::warn!(partition = %tp, dir = %dir.path.as_str(), error = %e.message(), "cannot move the replica");
                                e.code()
                            }
                        },
                    };
                    AlterReplicaLogDirPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(code)
                })
                .collect();
            results.push(
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(topic.name)
                    .with_partitions(partitions),
            );
        }
    }
    AlterReplicaLogDirsResponse::default().with_results(results)
}
