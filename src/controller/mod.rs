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
pub mod kraft;
pub mod local;
pub mod metadata_log;
pub mod plan;
pub mod quorum_state;
pub mod records;
pub mod snapshot;
pub mod topic_name;
pub mod zk;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    AlterPartitionRequest, AlterPartitionResponse, LeaderAndIsrRequest, LeaderAndIsrResponse,
    StopReplicaRequest, StopReplicaResponse, UpdateMetadataRequest, UpdateMetadataResponse,
};
use uuid::Uuid;

use crate::config::BrokerConfig;
use crate::sasl::scram::{ScramCredential, ScramMechanism};

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

/// One change AlterUserScramCredentials makes: `user`'s credential for `mechanism` set
/// (upserted) or, with `None`, deleted.
#[derive(Clone, Debug)]
pub struct ScramChange {
    pub user: String,
    pub mechanism: ScramMechanism,
    pub credential: Option<ScramCredential>,
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

    /// The ZooKeeper-mode controller, for the broker's own bookkeeping (its shutdown);
    /// handlers reach it through the typed methods below.
    fn zk(&self) -> Option<&zk::ZkController> {
        None
    }

    // The ZooKeeper-mode APIs. A backend that is no cluster's controller answers the
    // brokers' requests NOT_CONTROLLER (as any Kafka broker but the controller does) and
    // the controller's requests UNSUPPORTED_VERSION (it is in no cluster to be told).

    /// AlterPartition: a leader's ISR change, decided by the active controller.
    async fn alter_partition(
        &self,
        request: AlterPartitionRequest,
        version: i16,
    ) -> AlterPartitionResponse {
        let _ = (request, version);
        AlterPartitionResponse::default().with_error_code(ResponseError::NotController.code())
    }

    /// ControlledShutdown of `broker_id`: the partitions it still leads once the
    /// controller moved what it could.
    async fn controlled_shutdown_of(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<Vec<zk::context::TopicPartition>, ResponseError> {
        let _ = (broker_id, broker_epoch);
        Err(ResponseError::NotController)
    }

    /// AllocateProducerIds: a block (start, length) for `broker_id`.
    async fn allocate_producer_ids(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<(i64, i32), ResponseError> {
        let _ = (broker_id, broker_epoch);
        Err(ResponseError::NotController)
    }

    /// ElectLeaders: the result per partition.
    async fn elect_leaders(
        &self,
        partitions: BTreeSet<zk::context::TopicPartition>,
        election: zk::replica_election::ElectionType,
        timeout: Duration,
    ) -> zk::replica_election::ElectionResults {
        let _ = (election, timeout);
        partitions
            .into_iter()
            .map(|tp| (tp, Err((ResponseError::NotController, None))))
            .collect()
    }

    /// AlterPartitionReassignments: started, cancelled or why not, per partition.
    async fn alter_partition_reassignments(
        &self,
        reassignments: BTreeMap<zk::context::TopicPartition, Option<Vec<i32>>>,
    ) -> Result<zk::partition_reassignment::ReassignmentResults, ResponseError> {
        let _ = reassignments;
        Err(ResponseError::NotController)
    }

    /// ListPartitionReassignments: the named partitions (or all) that are moving.
    async fn list_partition_reassignments(
        &self,
        partitions: Option<BTreeSet<zk::context::TopicPartition>>,
    ) -> Result<zk::partition_reassignment::OngoingReassignments, ResponseError> {
        let _ = partitions;
        Err(ResponseError::NotController)
    }

    /// LeaderAndIsr from the controller.
    async fn leader_and_isr(
        &self,
        request: LeaderAndIsrRequest,
        version: i16,
    ) -> LeaderAndIsrResponse {
        let _ = (request, version);
        LeaderAndIsrResponse::default().with_error_code(ResponseError::UnsupportedVersion.code())
    }

    /// UpdateMetadata from the controller.
    async fn update_metadata(&self, request: UpdateMetadataRequest) -> UpdateMetadataResponse {
        let _ = request;
        UpdateMetadataResponse::default().with_error_code(ResponseError::UnsupportedVersion.code())
    }

    /// StopReplica from the controller.
    async fn stop_replica(&self, request: StopReplicaRequest) -> StopReplicaResponse {
        let _ = request;
        StopReplicaResponse::default().with_error_code(ResponseError::UnsupportedVersion.code())
    }

    /// `user`'s SCRAM credential for `mechanism`: Kafka's `/config/users/<user>` in
    /// ZooKeeper mode, its `UserScramCredentialRecord`s in the metadata log.
    fn scram_credential(&self, mechanism: ScramMechanism, user: &str) -> Option<ScramCredential> {
        let _ = (mechanism, user);
        None
    }

    /// Every SCRAM credential as DescribeUserScramCredentials reports it: user,
    /// mechanism, iterations, in user order.
    fn scram_credentials(&self) -> Vec<(String, ScramMechanism, u32)> {
        Vec::new()
    }

    /// Applies every change at once. A backend that keeps no credentials refuses.
    async fn alter_scram_credentials(
        &self,
        changes: Vec<ScramChange>,
    ) -> Result<(), ControllerError> {
        let _ = changes;
        Err(ControllerError::new(
            ResponseError::UnsupportedVersion,
            "SCRAM credentials are not kept by this controller",
        ))
    }

    /// Every user's and client id's quotas.
    fn client_quotas(&self) -> crate::quota::configs::ClientQuotas {
        BTreeMap::new()
    }

    /// Every user's and client id's quotas as DescribeClientQuotas answers them: those in
    /// force (`client_quotas`), except where Kafka reads the store itself for each
    /// request (ZooKeeper mode), so that a quota just written through another broker is
    /// listed at once. Err: the store could not be read.
    async fn describe_client_quotas(
        &self,
    ) -> Result<crate::quota::configs::ClientQuotas, ControllerError> {
        Ok(self.client_quotas())
    }

    /// AlterClientQuotas: the outcome of each alteration, in order (an alteration that
    /// fails its checks changes nothing, the others apply); with `validate_only` only the
    /// checks. Err: none could be made (no metadata log, no ZooKeeper session).
    async fn alter_client_quotas(
        &self,
        alterations: Vec<crate::quota::configs::Alteration>,
        validate_only: bool,
    ) -> Result<Vec<Result<(), ControllerError>>, ControllerError> {
        let _ = (alterations, validate_only);
        Err(ControllerError::new(
            ResponseError::InvalidRequest,
            "client quotas are not kept by this controller",
        ))
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
