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
    /// Not checked yet: allowed, as with Kafka's allow-all authorizer. The ACL issue
    /// turns each of these into `PerResource` (`tests::unchecked_apis` lists them).
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
        | ApiKey::WriteTxnMarkers => Needs::Cluster(ClusterAction),
        ApiKey::ElectLeaders | ApiKey::AlterPartitionReassignments => Needs::Cluster(Alter),
        ApiKey::ListPartitionReassignments
        | ApiKey::DescribeLogDirs
        | ApiKey::DescribeUserScramCredentials => Needs::Cluster(Describe),
        ApiKey::AlterUserScramCredentials => Needs::Cluster(Alter),
        ApiKey::Produce
        | ApiKey::Fetch
        | ApiKey::ListOffsets
        | ApiKey::Metadata
        | ApiKey::JoinGroup
        | ApiKey::SyncGroup
        | ApiKey::Heartbeat
        | ApiKey::LeaveGroup => Needs::PerResource,
        _ => Needs::Unchecked,
    }
}
