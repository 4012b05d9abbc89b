//! Cluster metadata: brokers, topics, partition assignments, topic ids, producer ids.
//!
//! Handlers talk to a [`Controller`] and never know which backend answers: `local`
//! (one node, persisted in the data dir's KRaft metadata log) or `zk` (a member of a
//! Kafka 3.9 ZooKeeper-mode cluster). Reads are synchronous lookups in the metadata
//! image (with `zk`, in what the controller's event loop publishes). With `local`,
//! changes reach the rest of the broker as [`delta::MetadataDelta`]s, handed to every
//! [`delta::MetadataListener`] (the replica manager creates and removes this broker's
//! logs from them); with `zk` the controller tells brokers with LeaderAndIsr,
//! UpdateMetadata and StopReplica, and the broker side (`zk::broker`) turns those into
//! the same deltas.

pub mod adopt;
pub mod delta;
pub mod image;
pub mod local;
pub mod metadata_log;
pub mod plan;
pub mod quorum_state;
pub mod records;
pub mod snapshot;
pub mod topic_name;
pub mod zk;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use crate::config::BrokerConfig;

/// A broker as Metadata and DescribeCluster report it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerInfo {
    pub id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

/// Where a partition's replicas live. Changes only when replicas are reassigned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionAssignment {
    pub replicas: Vec<i32>,
    /// The log dir (`directory.id`) of each replica, in `replicas` order; the nil uuid when
    /// not yet assigned.
    pub directories: Vec<Uuid>,
}

/// Who leads a partition and who is in sync, with the epochs a compare-and-set on them
/// needs: the leader epoch moves with every leader election, the partition epoch with
/// every change to the partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderAndIsr {
    /// -1 when the partition has no leader.
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub isr: Vec<i32>,
    /// KIP-966: replicas that may still be elected though not in the ISR.
    pub eligible_leader_replicas: Vec<i32>,
    pub last_known_elr: Vec<i32>,
    /// 1 while a leader elected uncleanly is recovering.
    pub leader_recovery_state: i8,
}

impl LeaderAndIsr {
    /// `leader` at `epoch` (also the partition epoch) with `isr` in sync, recovered and
    /// with no eligible leader replicas: a partition as a clean election leaves it.
    pub fn elected(leader: i32, epoch: i32, isr: &[i32]) -> LeaderAndIsr {
        LeaderAndIsr {
            leader,
            leader_epoch: epoch,
            partition_epoch: epoch,
            isr: isr.to_vec(),
            eligible_leader_replicas: Vec::new(),
            last_known_elr: Vec::new(),
            leader_recovery_state: 0,
        }
    }
}

/// One partition, as Kafka's `PartitionRegistration` holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionInfo {
    pub partition: i32,
    pub assignment: PartitionAssignment,
    pub state: LeaderAndIsr,
}

/// A topic: its id, partitions (ordered by partition id) and config overrides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicInfo {
    pub name: String,
    pub topic_id: Uuid,
    pub partitions: Vec<PartitionInfo>,
    pub configs: BTreeMap<String, String>,
}

impl TopicInfo {
    /// Kafka's internal topics: `__consumer_offsets` and `__transaction_state`.
    pub fn is_internal(&self) -> bool {
        self.name == "__consumer_offsets" || self.name == "__transaction_state"
    }
}

/// A resource other than a topic that configs are kept for, as Kafka's `ConfigResource`
/// names it (type code, name). Topic configs live with their topic ([`TopicInfo`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConfigResource {
    pub resource_type: i8,
    pub name: String,
}

impl ConfigResource {
    pub fn group(name: impl Into<String>) -> Self {
        ConfigResource {
            resource_type: records::CONFIG_RESOURCE_GROUP,
            name: name.into(),
        }
    }
}

/// What CreateTopics asks for, after defaults are applied by the caller.
#[derive(Clone, Debug)]
pub struct NewTopic {
    pub name: String,
    /// -1: `num.partitions`.
    pub num_partitions: i32,
    /// -1: `default.replication.factor`.
    pub replication_factor: i16,
    /// Explicit assignment (partition → broker ids), empty for automatic.
    pub assignments: BTreeMap<i32, Vec<i32>>,
    pub configs: BTreeMap<String, String>,
}

/// A refused metadata change, carrying the Kafka error it is answered with.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{error:?}: {message}")]
pub struct ControllerError {
    pub error: ResponseError,
    pub message: String,
}

impl ControllerError {
    pub fn new(error: ResponseError, message: impl Into<String>) -> Self {
        ControllerError {
            error,
            message: message.into(),
        }
    }

    pub fn code(&self) -> i16 {
        self.error.code()
    }

    /// The refusal for a topic metadata does not know.
    pub fn unknown_topic(name: &str) -> Self {
        ControllerError::new(
            ResponseError::UnknownTopicOrPartition,
            format!("Topic {name} does not exist"),
        )
    }
}

#[async_trait]
pub trait Controller: Send + Sync {
    fn cluster_id(&self) -> String;
    /// The broker acting as controller.
    fn controller_id(&self) -> i32;
    /// Live brokers.
    fn brokers(&self) -> Vec<BrokerInfo>;
    /// Live brokers as clients of `listener` reach them (Kafka answers each client with
    /// the endpoints of the listener its request came on; a broker without one is left
    /// out).
    fn brokers_on(&self, listener: &str) -> Vec<BrokerInfo> {
        let _ = listener;
        self.brokers()
    }
    /// Puts this broker's advertised listeners from `config` in force, as the listeners
    /// the broker now serves: clients are told them (and, in a cluster, every broker).
    async fn advertise(&self, config: &BrokerConfig) -> Result<(), ControllerError>;
    fn topics(&self) -> Vec<Arc<TopicInfo>>;
    fn topic(&self, name: &str) -> Option<Arc<TopicInfo>>;
    fn topic_by_id(&self, id: Uuid) -> Option<Arc<TopicInfo>>;
    /// The replicas of a partition the cluster reports offline (ZooKeeper mode).
    fn offline_replicas(&self, topic: &str, partition: i32) -> Vec<i32> {
        let _ = (topic, partition);
        Vec::new()
    }
    /// This broker's epoch as the cluster registered it, -1 if never registered.
    fn broker_epoch(&self) -> i64 {
        -1
    }
    /// Hands `listener` the whole current image as one delta (returning what it could not
    /// apply), then every later change.
    fn subscribe(&self, listener: Arc<dyn delta::MetadataListener>) -> Vec<delta::ApplyError>;
    /// Creates a topic, or with `validate_only` only checks it could be created.
    async fn create_topic(
        &self,
        topic: NewTopic,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, ControllerError>;
    /// Creates several topics, each on its own (one failing does not stop the others).
    async fn create_topics(
        &self,
        topics: Vec<NewTopic>,
    ) -> Vec<Result<Arc<TopicInfo>, ControllerError>> {
        let mut out = Vec::with_capacity(topics.len());
        for t in topics {
            out.push(self.create_topic(t, false).await);
        }
        out
    }
    /// Creates topics a client asked for by using them (Metadata, FindCoordinator):
    /// unlike CreateTopics, any member of a ZooKeeper-mode cluster may.
    async fn auto_create_topics(
        &self,
        topics: Vec<NewTopic>,
    ) -> Vec<Result<Arc<TopicInfo>, ControllerError>> {
        self.create_topics(topics).await
    }
    async fn delete_topic(&self, name: &str) -> Result<Arc<TopicInfo>, ControllerError>;
    /// Grows a topic to `count` partitions.
    async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        assignments: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, ControllerError>;
    /// Replaces a topic's config overrides.
    async fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicInfo>, ControllerError>;
    /// A producer id never handed out before, also across restarts.
    async fn next_producer_id(&self) -> Result<i64, ControllerError>;

    /// Leaves the cluster at shutdown (ZooKeeper mode: closes the session, so this
    /// broker's registration, and its controllership if it held it, go at once).
    fn shutdown(&self) {}

    /// The ZooKeeper-mode controller, for the APIs only a cluster member handles.
    fn zk(&self) -> Option<&zk::ZkController> {
        None
    }

    /// The configs kept for a resource other than a topic (a group), empty when none.
    fn resource_configs(&self, resource: &ConfigResource) -> BTreeMap<String, String> {
        let _ = resource;
        BTreeMap::new()
    }
    /// Replaces the configs of a resource other than a topic. A backend that does not
    /// keep such configs refuses.
    async fn set_resource_configs(
        &self,
        resource: ConfigResource,
        configs: BTreeMap<String, String>,
    ) -> Result<(), ControllerError> {
        let _ = configs;
        Err(ControllerError::new(
            ResponseError::InvalidRequest,
            format!(
                "configs of resource type {} are not kept by this controller",
                resource.resource_type
            ),
        ))
    }
}
