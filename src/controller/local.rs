//! The single-node controller: metadata kept in memory and persisted as one JSON
//! file in the first log dir, rewritten atomically (tmp, fsync, rename) on each change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use kafka_protocol::error::ResponseError;
use parking_lot::Mutex;
use uuid::Uuid;

use crate::log::{read_bounded, write_atomic};

use super::{
    topic_name, BrokerInfo, Controller, ControllerError, NewTopic, PartitionInfo, TopicInfo,
};

/// File name of the metadata store inside the first log dir.
pub const METADATA_FILE: &str = "skua-metadata.json";

/// Producer ids are reserved on disk in blocks, so handing one out rarely costs an fsync
/// and an id is never reused after a crash (the whole reserved block is skipped).
const PRODUCER_ID_BLOCK: i64 = 1000;

/// A metadata file larger than this is refused rather than read into memory.
const MAX_METADATA_BYTES: u64 = 256 * 1024 * 1024;

#[derive(serde::Serialize, serde::Deserialize)]
struct Persisted {
    version: u32,
    cluster_id: String,
    /// First producer id not yet reserved.
    producer_id_block_end: i64,
    topics: Vec<TopicInfo>,
}

struct State {
    cluster_id: String,
    topics: BTreeMap<String, Arc<TopicInfo>>,
    next_producer_id: i64,
    producer_id_block_end: i64,
}

pub struct LocalController {
    path: PathBuf,
    broker: BrokerInfo,
    num_partitions: i32,
    default_replication_factor: i16,
    // A std-style lock, not a tokio one: nothing awaits while it is held.
    state: Mutex<State>,
}

impl LocalController {
    /// Loads the store from `dir`, or starts an empty cluster with a new id.
    pub fn open(
        dir: &Path,
        broker: BrokerInfo,
        configured_cluster_id: Option<String>,
        num_partitions: i32,
        default_replication_factor: i16,
    ) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(METADATA_FILE);
        let stored = read_bounded(&path, MAX_METADATA_BYTES).map_err(|e| anyhow::anyhow!("{e}"))?;
        let state = match stored {
            Some(bytes) => {
                let p: Persisted = serde_json::from_slice(&bytes)
                    .map_err(|e| anyhow::anyhow!("{} is damaged: {e}", path.display()))?;
                State {
                    cluster_id: p.cluster_id,
                    topics: p
                        .topics
                        .into_iter()
                        .map(|t| (t.name.clone(), Arc::new(t)))
                        .collect(),
                    // Everything below the persisted block end may have been handed out.
                    next_producer_id: p.producer_id_block_end,
                    producer_id_block_end: p.producer_id_block_end,
                }
            }
            None => State {
                cluster_id: configured_cluster_id.unwrap_or_else(new_cluster_id),
                topics: BTreeMap::new(),
                next_producer_id: 0,
                producer_id_block_end: 0,
            },
        };
        let controller = LocalController {
            path,
            broker,
            num_partitions,
            default_replication_factor,
            state: Mutex::new(state),
        };
        controller.persist(&controller.state.lock())?;
        Ok(controller)
    }

    fn persist(&self, state: &State) -> std::io::Result<()> {
        let p = Persisted {
            version: 1,
            cluster_id: state.cluster_id.clone(),
            producer_id_block_end: state.producer_id_block_end,
            topics: state.topics.values().map(|t| (**t).clone()).collect(),
        };
        let bytes = serde_json::to_vec_pretty(&p).map_err(std::io::Error::other)?;
        write_atomic(&self.path, &bytes).map_err(|e| std::io::Error::other(e.to_string()))
    }

    fn single_node_assignment(
        &self,
        rf: i16,
        partitions: std::ops::Range<i32>,
    ) -> Result<Vec<PartitionInfo>, ControllerError> {
        if rf != 1 {
            return Err(ControllerError::new(
                ResponseError::InvalidReplicationFactor,
                format!("Replication factor: {rf} larger than available brokers: 1."),
            ));
        }
        Ok(partitions.map(|p| self.partition_on_self(p)).collect())
    }

    fn partition_on_self(&self, partition: i32) -> PartitionInfo {
        PartitionInfo {
            partition,
            leader: self.broker.id,
            leader_epoch: 0,
            replicas: vec![self.broker.id],
            isr: vec![self.broker.id],
        }
    }

    fn check_assignment(&self, replicas: &[i32]) -> Result<(), ControllerError> {
        if replicas.is_empty() || replicas.iter().any(|&b| b != self.broker.id) {
            return Err(ControllerError::new(
                ResponseError::InvalidReplicaAssignment,
                format!("Replica assignment {replicas:?} names brokers that are not live"),
            ));
        }
        Ok(())
    }

    fn storage_error(e: std::io::Error) -> ControllerError {
        tracing::error!(error = %e, "cannot persist cluster metadata");
        ControllerError::new(ResponseError::KafkaStorageError, e.to_string())
    }
}

#[async_trait]
impl Controller for LocalController {
    fn cluster_id(&self) -> String {
        self.state.lock().cluster_id.clone()
    }

    fn controller_id(&self) -> i32 {
        self.broker.id
    }

    fn brokers(&self) -> Vec<BrokerInfo> {
        vec![self.broker.clone()]
    }

    fn topics(&self) -> Vec<Arc<TopicInfo>> {
        self.state.lock().topics.values().cloned().collect()
    }

    fn topic(&self, name: &str) -> Option<Arc<TopicInfo>> {
        self.state.lock().topics.get(name).cloned()
    }

    fn topic_by_id(&self, id: Uuid) -> Option<Arc<TopicInfo>> {
        self.state
            .lock()
            .topics
            .values()
            .find(|t| t.topic_id == id)
            .cloned()
    }

    async fn create_topic(
        &self,
        topic: NewTopic,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, ControllerError> {
        topic_name::validate(&topic.name)
            .map_err(|m| ControllerError::new(ResponseError::InvalidTopicException, m))?;
        let partitions = if topic.assignments.is_empty() {
            let n = if topic.num_partitions == -1 {
                self.num_partitions
            } else {
                topic.num_partitions
            };
            let rf = if topic.replication_factor == -1 {
                self.default_replication_factor
            } else {
                topic.replication_factor
            };
            if n <= 0 {
                return Err(ControllerError::new(
                    ResponseError::InvalidPartitions,
                    "Number of partitions must be larger than 0.",
                ));
            }
            if rf <= 0 {
                return Err(ControllerError::new(
                    ResponseError::InvalidReplicationFactor,
                    "Replication factor must be larger than 0.",
                ));
            }
            self.single_node_assignment(rf, 0..n)?
        } else {
            if topic.num_partitions != -1 || topic.replication_factor != -1 {
                return Err(ControllerError::new(
                    ResponseError::InvalidRequest,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
                ));
            }
            let expected: Vec<i32> = (0..topic.assignments.len() as i32).collect();
            if topic.assignments.keys().copied().collect::<Vec<_>>() != expected {
                return Err(ControllerError::new(
                    ResponseError::InvalidReplicaAssignment,
                    "Partitions should be a consecutive 0-based integer sequence",
                ));
            }
            for replicas in topic.assignments.values() {
                self.check_assignment(replicas)?;
            }
            topic
                .assignments
                .keys()
                .map(|&p| self.partition_on_self(p))
                .collect()
        };
        let mut state = self.state.lock();
        if state.topics.contains_key(&topic.name) {
            return Err(ControllerError::new(
                ResponseError::TopicAlreadyExists,
                format!("Topic '{}' already exists.", topic.name),
            ));
        }
        if let Some(other) = state
            .topics
            .keys()
            .find(|t| topic_name::collides(t, &topic.name))
        {
            return Err(ControllerError::new(
                ResponseError::InvalidTopicException,
                format!(
                    "Topic '{}' collides with existing topic: {other}",
                    topic.name
                ),
            ));
        }
        let info = Arc::new(TopicInfo {
            name: topic.name.clone(),
            topic_id: Uuid::new_v4(),
            partitions,
            configs: topic.configs,
        });
        if !validate_only {
            state.topics.insert(topic.name, info.clone());
            self.persist(&state).map_err(Self::storage_error)?;
        }
        Ok(info)
    }

    async fn delete_topic(&self, name: &str) -> Result<Arc<TopicInfo>, ControllerError> {
        let mut state = self.state.lock();
        let removed = state
            .topics
            .remove(name)
            .ok_or_else(|| ControllerError::unknown_topic(name))?;
        self.persist(&state).map_err(Self::storage_error)?;
        Ok(removed)
    }

    async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        assignments: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, ControllerError> {
        let mut state = self.state.lock();
        let current = state
            .topics
            .get(name)
            .cloned()
            .ok_or_else(|| ControllerError::unknown_topic(name))?;
        let existing = current.partitions.len() as i32;
        if count < existing {
            return Err(ControllerError::new(
                ResponseError::InvalidPartitions,
                format!("Topic currently has {existing} partitions, which is higher than the requested {count}."),
            ));
        }
        if count == existing {
            return Err(ControllerError::new(
                ResponseError::InvalidPartitions,
                format!("Topic already has {existing} partitions."),
            ));
        }
        let rf = current
            .partitions
            .first()
            .map_or(1, |p| p.replicas.len() as i16);
        let mut added = self.single_node_assignment(rf, existing..count)?;
        if let Some(assignments) = assignments {
            if assignments.len() as i32 != count - existing {
                return Err(ControllerError::new(
                    ResponseError::InvalidReplicaAssignment,
                    format!(
                        "Increasing the number of partitions by {} but {} assignments provided.",
                        count - existing,
                        assignments.len()
                    ),
                ));
            }
            for replicas in &assignments {
                self.check_assignment(replicas)?;
            }
            added = (existing..count)
                .map(|p| self.partition_on_self(p))
                .collect();
        }
        let mut info = (*current).clone();
        info.partitions.extend(added);
        let info = Arc::new(info);
        if !validate_only {
            state.topics.insert(name.to_string(), info.clone());
            self.persist(&state).map_err(Self::storage_error)?;
        }
        Ok(info)
    }

    async fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicInfo>, ControllerError> {
        let mut state = self.state.lock();
        let current = state
            .topics
            .get(name)
            .cloned()
            .ok_or_else(|| ControllerError::unknown_topic(name))?;
        let info = Arc::new(TopicInfo {
            configs,
            ..(*current).clone()
        });
        state.topics.insert(name.to_string(), info.clone());
        self.persist(&state).map_err(Self::storage_error)?;
        Ok(info)
    }

    async fn next_producer_id(&self) -> Result<i64, ControllerError> {
        let mut state = self.state.lock();
        if state.next_producer_id >= state.producer_id_block_end {
            state.producer_id_block_end = state.next_producer_id + PRODUCER_ID_BLOCK;
            if let Err(e) = self.persist(&state) {
                state.producer_id_block_end = state.next_producer_id;
                return Err(Self::storage_error(e));
            }
        }
        let id = state.next_producer_id;
        state.next_producer_id += 1;
        Ok(id)
    }
}

/// A cluster id as Kafka writes one: a random UUID in unpadded base64url (22 chars).
fn new_cluster_id() -> String {
    crate::log::uuid_to_kafka_string(Uuid::new_v4())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker() -> BrokerInfo {
        BrokerInfo {
            id: 1,
            host: "localhost".into(),
            port: 9092,
            rack: None,
        }
    }

    fn new_topic(name: &str, n: i32, rf: i16) -> NewTopic {
        NewTopic {
            name: name.into(),
            num_partitions: n,
            replication_factor: rf,
            assignments: BTreeMap::new(),
            configs: BTreeMap::new(),
        }
    }

    #[tokio::test]
    async fn topics_and_producer_ids_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let c = LocalController::open(dir.path(), broker(), None, 1, 1).unwrap();
        let t = c
            .create_topic(new_topic("orders", 3, 1), false)
            .await
            .unwrap();
        assert_eq!(t.partitions.len(), 3);
        let id1 = c.next_producer_id().await.unwrap();
        let id2 = c.next_producer_id().await.unwrap();
        assert_eq!(id2, id1 + 1);
        let cluster = c.cluster_id();
        assert_eq!(cluster.len(), 22);
        drop(c);
        let c = LocalController::open(dir.path(), broker(), None, 1, 1).unwrap();
        assert_eq!(c.cluster_id(), cluster);
        assert_eq!(c.topic("orders").unwrap().topic_id, t.topic_id);
        assert!(c.next_producer_id().await.unwrap() > id2);
    }

    #[tokio::test]
    async fn refusals_carry_kafka_errors() {
        let dir = tempfile::tempdir().unwrap();
        let c = LocalController::open(dir.path(), broker(), None, 2, 1).unwrap();
        let e = c
            .create_topic(new_topic("x", 1, 3), false)
            .await
            .unwrap_err();
        assert_eq!(e.error, ResponseError::InvalidReplicationFactor);
        let e = c
            .create_topic(new_topic("bad name", 1, 1), false)
            .await
            .unwrap_err();
        assert_eq!(e.error, ResponseError::InvalidTopicException);
        let t = c.create_topic(new_topic("d", -1, -1), true).await.unwrap();
        assert_eq!(t.partitions.len(), 2);
        assert!(c.topic("d").is_none(), "validate_only must not create");
        c.create_topic(new_topic("a.b", 1, 1), false).await.unwrap();
        let e = c
            .create_topic(new_topic("a.b", 1, 1), false)
            .await
            .unwrap_err();
        assert_eq!(e.error, ResponseError::TopicAlreadyExists);
        let e = c
            .create_topic(new_topic("a_b", 1, 1), false)
            .await
            .unwrap_err();
        assert_eq!(e.error, ResponseError::InvalidTopicException);
        let e = c
            .create_partitions("a.b", 1, None, false)
            .await
            .unwrap_err();
        assert_eq!(e.error, ResponseError::InvalidPartitions);
        let t = c.create_partitions("a.b", 4, None, false).await.unwrap();
        assert_eq!(t.partitions.len(), 4);
        let e = c.delete_topic("nope").await.unwrap_err();
        assert_eq!(e.error, ResponseError::UnknownTopicOrPartition);
    }
}
