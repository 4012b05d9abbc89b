//! What each API needs before its handler runs, as the request pipeline checks it
//! (`network::pipeline`), and which APIs check their resources inside the handler.

use kafka_protocol::messages::ApiKey;

use super::operations::AclOperation;

/// An API's declared authorization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// Nothing, and allowed before the connection authenticates (ApiVersions, the SASL
    /// handshake and authenticate).
    Nothing,
    /// An operation on the cluster resource, checked by the pipeline: a denial answers
    /// CLUSTER_AUTHORIZATION_FAILED without running the handler.
    Cluster(AclOperation),
    /// Checks per resource (topic, group, transactional id) inside the handler, through
    /// the request context's `authorize` / `filter_authorized`.
    PerResource,
    /// Forwarded to a KRaft cluster's controller in an Envelope carrying the client's
    /// principal: the controller authorizes it, as it does what Kafka's brokers forward.
    ByController,
    /// Not declared: allowed, as with Kafka's allow-all authorizer. Every route declares
    /// what it needs; the request pipeline's test fails for a route left here.
    Unchecked,
}

impl Needs {
    /// Whether a connection may send this API before it has authenticated.
    pub fn before_authentication(self) -> bool {
        self == Needs::Nothing
    }
}

/// The declaration of `api_key` (Kafka's checks in `KafkaApis` for each request).
pub const fn of(api_key: ApiKey) -> Needs {
    use AclOperation::*;
    match api_key {
        ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate => Needs::Nothing,
        // The controller's requests to brokers and the brokers' to the controller.
        ApiKey::LeaderAndIsr
        | ApiKey::UpdateMetadata
        | ApiKey::StopReplica
        | ApiKey::ControlledShutdown
        | ApiKey::AlterPartition
        | ApiKey::AllocateProducerIds
        | ApiKey::WriteTxnMarkers
        // The share coordinator's, from share-partition leaders and group coordinators.
        | ApiKey::InitializeShareGroupState
        | ApiKey::ReadShareGroupState
        | ApiKey::WriteShareGroupState
        | ApiKey::DeleteShareGroupState
        | ApiKey::ReadShareGroupStateSummary => Needs::Cluster(ClusterAction),
        ApiKey::ElectLeaders
        | ApiKey::AlterPartitionReassignments
        | ApiKey::CreateAcls
        | ApiKey::DeleteAcls
        | ApiKey::AlterUserScramCredentials => Needs::Cluster(Alter),
        ApiKey::ListPartitionReassignments
        | ApiKey::DescribeLogDirs
        | ApiKey::DescribeAcls
        | ApiKey::DescribeUserScramCredentials => Needs::Cluster(Describe),
        ApiKey::DescribeClientQuotas => Needs::Cluster(DescribeConfigs),
        ApiKey::AlterClientQuotas => Needs::Cluster(AlterConfigs),
        // Topics, groups, transactional ids: each handler checks its resources as
        // KafkaApis does (some also the cluster: a follower's Fetch and
        // OffsetForLeaderEpoch, InitProducerId's idempotence, CreateTopics' CREATE,
        // the broker configs, AlterReplicaLogDirs' per-partition refusal).
        ApiKey::Produce
        | ApiKey::Fetch
        | ApiKey::ListOffsets
        | ApiKey::Metadata
        | ApiKey::JoinGroup
        | ApiKey::SyncGroup
        | ApiKey::Heartbeat
        | ApiKey::LeaveGroup
        | ApiKey::OffsetCommit
        | ApiKey::OffsetFetch
        | ApiKey::FindCoordinator
        | ApiKey::ListGroups
        | ApiKey::DescribeGroups
        | ApiKey::DeleteGroups
        | ApiKey::OffsetDelete
        | ApiKey::ConsumerGroupHeartbeat
        | ApiKey::ConsumerGroupDescribe
        | ApiKey::ShareGroupHeartbeat
        | ApiKey::ShareGroupDescribe
        | ApiKey::ShareFetch
        | ApiKey::ShareAcknowledge
        | ApiKey::DescribeShareGroupOffsets
        | ApiKey::AlterShareGroupOffsets
        | ApiKey::DeleteShareGroupOffsets
        | ApiKey::InitProducerId
        | ApiKey::AddPartitionsToTxn
        | ApiKey::AddOffsetsToTxn
        | ApiKey::TxnOffsetCommit
        | ApiKey::EndTxn
        | ApiKey::DescribeProducers
        | ApiKey::DescribeTransactions
        | ApiKey::ListTransactions
        | ApiKey::CreateTopics
        | ApiKey::DeleteTopics
        | ApiKey::DeleteRecords
        | ApiKey::CreatePartitions
        | ApiKey::DescribeConfigs
        | ApiKey::AlterConfigs
        | ApiKey::IncrementalAlterConfigs
        | ApiKey::OffsetForLeaderEpoch
        | ApiKey::AlterReplicaLogDirs
        | ApiKey::DescribeTopicPartitions
        // Kafka checks nothing for it, but answers the requester's cluster operations.
        | ApiKey::DescribeCluster => Needs::PerResource,
        _ => Needs::Unchecked,
    }
}
