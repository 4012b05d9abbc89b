//! The routing table: one line per API, with the versions handled.
//!
//! ApiVersions answers from this table, so nothing is advertised that is not handled.
//! What a broker handles depends on its [`Mode`]: a single node, a member of a
//! ZooKeeper-mode cluster, or a broker of a KRaft cluster whose controllers are Kafka's.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use kafka_protocol::protocol::StrBytes;

use crate::auth::authorizer::Authorizer;
use crate::auth::needs::Needs;
use crate::broker::Broker;
use crate::handlers::*;
use crate::log::FileSlice;
use crate::network::Session;

/// What a handler knows about the request besides its body.
#[derive(Clone)]
pub struct RequestContext {
    pub api_key: ApiKey,
    pub api_version: i16,
    pub correlation_id: i32,
    /// A slice of the request frame, like the body's strings: no copy per request.
    pub client_id: Option<StrBytes>,
    /// The client's address (also in `session`, kept here for the handlers that log it).
    pub peer: SocketAddr,
    /// The connection's listener, security protocol and principal, and the authorizer
    /// the checks ask (`auth::helper`; `None` with the allow-all one, so a check costs no
    /// call).
    pub session: Arc<Session>,
}

impl RequestContext {
    /// The authorizer the checks ask; `None`: everything is allowed.
    pub fn authorizer(&self) -> Option<&dyn Authorizer> {
        self.session.authorizer.as_deref()
    }
}

/// A handler's answer: the response body, and for Fetch the segment ranges whose bytes
/// the body's records stand for (sent from the file by the connection, see
/// `protocol::zero_copy`).
pub struct Response {
    pub body: ResponseKind,
    pub file_slices: Vec<FileSlice>,
}

pub type HandlerFuture = Pin<Box<dyn Future<Output = Response> + Send>>;
type Handler = fn(Arc<Broker>, RequestContext, RequestKind) -> HandlerFuture;

pub struct Route {
    pub api_key: ApiKey,
    pub min_version: i16,
    pub max_version: i16,
    /// What the request pipeline checks before the handler runs (`auth::needs`).
    pub needs: Needs,
    pub handle: Handler,
}

/// Builds a route forwarded to a KRaft cluster's active controller in an Envelope
/// (`handlers::forwarded`): the controller authorizes it against the client's principal,
/// which the Envelope carries, so this broker checks nothing before forwarding.
macro_rules! forward {
    ($key:ident, $min:expr, $max:expr, $request:ident) => {
        Route {
            needs: crate::auth::needs::Needs::ByController,
            ..route!(
                $key,
                $min,
                $max,
                forwarded::handle::<kafka_protocol::messages::$request>
            )
        }
    };
}

/// Builds a route whose handler takes the typed request and returns the typed response
/// (with `file_slices`: the response and the file slices its records stand for).
macro_rules! route {
    ($key:ident, $min:expr, $max:expr, $handler:path) => {
        route!(@build $key, $min, $max, |broker, ctx, req| async move {
            Response {
                body: ResponseKind::$key($handler(broker, ctx, req).await),
                file_slices: Vec::new(),
            }
        })
    };
    ($key:ident, $min:expr, $max:expr, $handler:path, file_slices) => {
        route!(@build $key, $min, $max, |broker, ctx, req| async move {
            let (body, file_slices) = $handler(broker, ctx, req).await;
            Response {
                body: ResponseKind::$key(body),
                file_slices,
            }
        })
    };
    (@build $key:ident, $min:expr, $max:expr, $call:expr) => {
        Route {
            api_key: ApiKey::$key,
            min_version: $min,
            max_version: $max,
            needs: crate::auth::needs::of(ApiKey::$key),
            handle: |broker, ctx, body| {
                Box::pin(async move {
                    match body {
                        RequestKind::$key(req) => ($call)(broker, ctx, req).await,
                        // The connection decodes the body with the same api key it routes by.
                        other => unreachable!("{:?} routed to {}", other, stringify!($key)),
                    }
                })
            },
        }
    };
}

/// Every API skua handles. Produce is listed from v0 as Kafka 4 lists it; v0–2 are
/// answered UNSUPPORTED_VERSION by the connection before reaching the handler.
pub static ROUTES: &[Route] = &[
    route!(Produce, 0, 13, produce::handle),
    route!(Fetch, 4, 18, fetch::handle, file_slices),
    // v11 (KIP-1023) is v10 on the wire, allowing EARLIEST_PENDING_UPLOAD (-6); a Kafka 4.4
    // follower sends it to its leader without negotiating (its metadata.version decides).
    route!(ListOffsets, 1, 11, list_offsets::handle),
    route!(Metadata, 0, 13, metadata::handle),
    route!(ApiVersions, 0, 4, api_versions::handle),
    // Answered by the connection's authenticator before a SASL connection authenticates
    // (network::authenticator); the handlers answer ILLEGAL_SASL_STATE after that, and on
    // listeners without SASL, as Kafka's do. Advertised on every listener, as Kafka does.
    route!(SaslHandshake, 0, 1, sasl_handshake::handle),
    route!(SaslAuthenticate, 0, 2, sasl_authenticate::handle),
    route!(CreateTopics, 2, 7, create_topics::handle),
    route!(DeleteTopics, 1, 6, delete_topics::handle),
    route!(DeleteRecords, 0, 2, delete_records::handle),
    // Not v6: the crate's request codec stops at v5 (its ApiKey table says 6), and a v6
    // request (KIP-939's 2PC fields) would fail to decode and close the connection.
    route!(InitProducerId, 0, 5, init_producer_id::handle),
    route!(OffsetForLeaderEpoch, 0, 4, offset_for_leader_epoch::handle),
    route!(AddPartitionsToTxn, 0, 5, add_partitions_to_txn::handle),
    route!(AddOffsetsToTxn, 0, 4, add_offsets_to_txn::handle),
    // Not v5: that is KIP-890's transaction version 2, which skua does not offer.
    route!(TxnOffsetCommit, 0, 4, txn_offset_commit::handle),
    // Not v5: that is KIP-890's transaction version 2, which skua does not offer.
    route!(EndTxn, 0, 4, end_txn::handle),
    route!(DescribeProducers, 0, 0, describe_producers::handle),
    // From v1: the crate decodes v1–4 (Kafka 4 dropped v0, as it did for AlterReplicaLogDirs).
    route!(DescribeLogDirs, 1, 4, describe_log_dirs::handle),
    route!(AlterReplicaLogDirs, 1, 2, alter_replica_log_dirs::handle),
    route!(DescribeTransactions, 0, 0, describe_transactions::handle),
    route!(ListTransactions, 0, 2, list_transactions::handle),
    route!(WriteTxnMarkers, 1, 1, write_txn_markers::handle),
    route!(DescribeConfigs, 1, 4, describe_configs::handle),
    route!(AlterConfigs, 0, 2, alter_configs::handle),
    route!(DescribeClientQuotas, 0, 1, describe_client_quotas::handle),
    route!(AlterClientQuotas, 0, 1, alter_client_quotas::handle),
    route!(CreatePartitions, 0, 3, create_partitions::handle),
    route!(DescribeCluster, 0, 2, describe_cluster::handle),
    route!(FindCoordinator, 0, 6, find_coordinator::handle),
    route!(JoinGroup, 0, 9, join_group::handle),
    route!(SyncGroup, 0, 5, sync_group::handle),
    route!(Heartbeat, 0, 4, heartbeat::handle),
    route!(LeaveGroup, 0, 5, leave_group::handle),
    route!(OffsetCommit, 2, 9, offset_commit::handle),
    route!(OffsetFetch, 1, 9, offset_fetch::handle),
    route!(ListGroups, 0, 5, list_groups::handle),
    route!(DescribeGroups, 0, 6, describe_groups::handle),
    route!(DeleteGroups, 0, 2, delete_groups::handle),
    route!(OffsetDelete, 0, 0, offset_delete::handle),
    route!(
        ConsumerGroupHeartbeat,
        0,
        1,
        consumer_group_heartbeat::handle
    ),
    route!(ConsumerGroupDescribe, 0, 1, consumer_group_describe::handle),
    // KIP-932 share groups, as Kafka 4.1+ serves them (v0 was 4.0's early access),
    // answered UNSUPPORTED_VERSION and left out of ApiVersions while `share.version` is 0.
    route!(ShareGroupHeartbeat, 1, 1, share_group_heartbeat::handle),
    route!(ShareGroupDescribe, 1, 1, share_group_describe::handle),
    route!(ShareFetch, 1, 2, share_fetch::handle),
    route!(ShareAcknowledge, 1, 2, share_acknowledge::handle),
    route!(
        DescribeShareGroupOffsets,
        0,
        1,
        describe_share_group_offsets::handle
    ),
    route!(
        AlterShareGroupOffsets,
        0,
        0,
        alter_share_group_offsets::handle
    ),
    route!(
        DeleteShareGroupOffsets,
        0,
        0,
        delete_share_group_offsets::handle
    ),
    // The share coordinator's RPCs, between brokers (WriteShareGroupState and
    // ReadShareGroupStateSummary v1 carry KIP-1226's delivery complete count).
    route!(
        InitializeShareGroupState,
        0,
        0,
        initialize_share_group_state::handle
    ),
    route!(ReadShareGroupState, 0, 0, read_share_group_state::handle),
    route!(WriteShareGroupState, 0, 1, write_share_group_state::handle),
    route!(
        DeleteShareGroupState,
        0,
        0,
        delete_share_group_state::handle
    ),
    route!(
        ReadShareGroupStateSummary,
        0,
        1,
        read_share_group_state_summary::handle
    ),
    route!(
        IncrementalAlterConfigs,
        0,
        1,
        incremental_alter_configs::handle
    ),
    route!(
        DescribeTopicPartitions,
        0,
        0,
        describe_topic_partitions::handle
    ),
    route!(
        DescribeUserScramCredentials,
        0,
        0,
        describe_user_scram_credentials::handle
    ),
    route!(
        AlterUserScramCredentials,
        0,
        0,
        alter_user_scram_credentials::handle
    ),
    // From v1, as Kafka 4 (KIP-896 dropped v0, which the crate's codec does not decode).
    route!(CreateAcls, 1, 3, create_acls::handle),
    route!(DescribeAcls, 1, 3, describe_acls::handle),
    route!(DeleteAcls, 1, 3, delete_acls::handle),
];

/// The APIs only a member of a ZooKeeper-mode cluster handles (and so advertises):
/// broker → controller requests, and the controller's requests to brokers.
pub static ZK_ROUTES: &[Route] = &[
    route!(AlterPartition, 0, 3, alter_partition::handle),
    route!(ControlledShutdown, 0, 3, controlled_shutdown::handle),
    route!(AllocateProducerIds, 0, 0, allocate_producer_ids::handle),
    route!(ElectLeaders, 0, 2, elect_leaders::handle),
    route!(
        AlterPartitionReassignments,
        0,
        0,
        alter_partition_reassignments::handle
    ),
    route!(
        ListPartitionReassignments,
        0,
        0,
        list_partition_reassignments::handle
    ),
    route!(LeaderAndIsr, 0, 7, controller_requests::leader_and_isr),
    route!(UpdateMetadata, 0, 8, controller_requests::update_metadata),
    route!(StopReplica, 0, 4, controller_requests::stop_replica),
];

/// What a broker of a KRaft cluster whose controllers are Kafka's (`process.roles=broker`)
/// forwards to the active controller as Kafka 4's brokers do (`KafkaApis`'
/// `maybeForwardToController` and `forwardToControllerOrFail`): the changes only the
/// controller makes (ACLs, SCRAM credentials, reassignments, elections) and what only it
/// knows (the quorum, the reassignments under way). They replace the single node's
/// routes of the same APIs. The versions are the crate's (Kafka 4's controllers handle
/// them all; a version the controller refused would be answered UNKNOWN_SERVER_ERROR).
pub static KRAFT_BROKER_ROUTES: &[Route] = &[
    forward!(CreateAcls, 1, 3, CreateAclsRequest),
    forward!(DeleteAcls, 1, 3, DeleteAclsRequest),
    forward!(
        AlterUserScramCredentials,
        0,
        0,
        AlterUserScramCredentialsRequest
    ),
    forward!(ElectLeaders, 0, 2, ElectLeadersRequest),
    forward!(
        AlterPartitionReassignments,
        0,
        1,
        AlterPartitionReassignmentsRequest
    ),
    forward!(
        ListPartitionReassignments,
        0,
        0,
        ListPartitionReassignmentsRequest
    ),
    forward!(DescribeQuorum, 0, 2, DescribeQuorumRequest),
];

/// What kind of broker answers: the routes it handles, and so advertises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Its own controller on its own metadata log.
    SingleNode,
    /// A member of a ZooKeeper-mode cluster (`zookeeper.connect`).
    ZooKeeper,
    /// A broker of a KRaft cluster whose controllers are Kafka's (`process.roles=broker`).
    KraftBroker,
}

impl Mode {
    pub fn of(config: &crate::config::BrokerConfig) -> Mode {
        if config.zookeeper_connect.is_some() {
            Mode::ZooKeeper
        } else if config.kraft.process_roles == crate::config::kraft::ProcessRoles::Broker {
            Mode::KraftBroker
        } else {
            Mode::SingleNode
        }
    }
}

/// Every route of a broker in `mode`.
pub fn routes(mode: Mode) -> impl Iterator<Item = &'static Route> {
    let (extra, replaced): (&'static [Route], &'static [Route]) = match mode {
        Mode::SingleNode => (&[], &[]),
        Mode::ZooKeeper => (ZK_ROUTES, &[]),
        Mode::KraftBroker => (KRAFT_BROKER_ROUTES, KRAFT_BROKER_ROUTES),
    };
    ROUTES
        .iter()
        .filter(move |r| !replaced.iter().any(|x| x.api_key == r.api_key))
        .chain(extra)
}

/// Every route of every mode (an API may have one per mode).
pub fn all_routes() -> impl Iterator<Item = &'static Route> {
    ROUTES.iter().chain(ZK_ROUTES).chain(KRAFT_BROKER_ROUTES)
}

/// The route for `api_key` when it handles `version` (single-node routes).
pub fn lookup(api_key: ApiKey, version: i16) -> Option<&'static Route> {
    lookup_in(api_key, version, Mode::SingleNode)
}

/// The route for `api_key` when it handles `version`, in the given mode.
pub fn lookup_in(api_key: ApiKey, version: i16, mode: Mode) -> Option<&'static Route> {
    routes(mode)
        .find(|r| r.api_key == api_key && (r.min_version..=r.max_version).contains(&version))
}

/// The route for `api_key` at any version.
pub fn route_for(api_key: ApiKey) -> Option<&'static Route> {
    ROUTES.iter().find(|r| r.api_key == api_key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::Message;

    /// Every advertised range lies within what the codec can decode (Produce v0–2 aside).
    #[test]
    fn routes_within_codec_versions() {
        for r in all_routes() {
            let codec = r.api_key.valid_versions();
            let min = if r.api_key == ApiKey::Produce {
                codec.min
            } else {
                r.min_version
            };
            assert!(
                min >= codec.min && r.max_version <= codec.max,
                "{:?}",
                r.api_key
            );
        }
        assert_eq!(ProduceRequest::VERSIONS.max, 13);
        assert!(lookup(ApiKey::Fetch, 3).is_none());
        assert!(lookup(ApiKey::Fetch, 18).is_some());
        // What a Kafka 4.4 follower sends its leader, unnegotiated.
        assert!(lookup(ApiKey::ListOffsets, 11).is_some());
        assert!(lookup(ApiKey::JoinGroup, 0).is_some());
        assert!(lookup(ApiKey::OffsetCommit, 1).is_none());
    }

    /// The cluster APIs are handled, and so advertised, only in ZooKeeper mode.
    #[test]
    fn cluster_apis_only_in_zookeeper_mode() {
        for key in [
            ApiKey::AlterPartition,
            ApiKey::ControlledShutdown,
            ApiKey::AllocateProducerIds,
            ApiKey::ElectLeaders,
            ApiKey::AlterPartitionReassignments,
            ApiKey::ListPartitionReassignments,
            ApiKey::LeaderAndIsr,
            ApiKey::UpdateMetadata,
            ApiKey::StopReplica,
        ] {
            assert!(lookup(key, 0).is_none(), "{key:?} single-node");
            assert!(
                lookup_in(key, 0, Mode::ZooKeeper).is_some(),
                "{key:?} ZooKeeper mode"
            );
            assert!(!advertised(Mode::SingleNode, key) && advertised(Mode::ZooKeeper, key));
        }
        assert!(lookup_in(ApiKey::Produce, 13, Mode::ZooKeeper).is_some());
    }

    fn advertised(mode: Mode, key: ApiKey) -> bool {
        crate::handlers::api_versions::response(0, mode)
            .api_keys
            .iter()
            .any(|k| k.api_key == key as i16)
    }

    /// A KRaft broker advertises what Kafka 4's brokers handle: the controller's own
    /// requests are not a broker's, and what only the controller does is forwarded to it
    /// (the forwarded route, once, with the controller checking the client).
    #[test]
    fn a_kraft_broker_forwards_what_the_controller_decides() {
        use crate::auth::needs::Needs;
        let mode = Mode::KraftBroker;
        for key in [
            ApiKey::AlterPartition,
            ApiKey::ControlledShutdown,
            ApiKey::AllocateProducerIds,
            ApiKey::LeaderAndIsr,
            ApiKey::UpdateMetadata,
            ApiKey::StopReplica,
        ] {
            assert!(!advertised(mode, key), "{key:?}");
        }
        for key in [
            ApiKey::CreateAcls,
            ApiKey::DeleteAcls,
            ApiKey::AlterUserScramCredentials,
            ApiKey::ElectLeaders,
            ApiKey::AlterPartitionReassignments,
            ApiKey::ListPartitionReassignments,
            ApiKey::DescribeQuorum,
        ] {
            let found: Vec<&Route> = routes(mode).filter(|r| r.api_key == key).collect();
            assert_eq!(found.len(), 1, "{key:?} routed once");
            assert_eq!(found[0].needs, Needs::ByController, "{key:?}");
            assert!(advertised(mode, key), "{key:?}");
        }
        // Answered by the broker itself, from the image it follows.
        for key in [ApiKey::DescribeAcls, ApiKey::DescribeUserScramCredentials] {
            let r = lookup_in(key, 0.max(route_for(key).unwrap().min_version), mode).unwrap();
            assert_ne!(r.needs, Needs::ByController, "{key:?}");
        }
        assert!(!advertised(Mode::SingleNode, ApiKey::DescribeQuorum));
        assert!(!advertised(Mode::ZooKeeper, ApiKey::DescribeQuorum));
    }
}
