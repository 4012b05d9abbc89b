//! The request pipeline: every route is timed, counted and authorized through the
//! `Authorizer` trait. A deny-all authorizer that records what it is asked refuses each
//! API with Kafka's error for it and shows which resource each API checked; over TCP, a
//! refused client gets Kafka's codes, the metrics count what it sent, and a quota's
//! throttle reaches the response and holds the connection's next answer back.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;

use skua::auth::authorizer::{Action, AuthorizationResult, Authorizer, Requester};
use skua::auth::needs::Needs;
use skua::auth::operations::{AclOperation, ResourceType};
use skua::metrics::request;
use skua::network::{pipeline, refusal, SecurityProtocol, Session};
use skua::quota::{Caller, QuotaManager, Verdict};
use skua::router::{self, RequestContext};

use crate::common::{self, TestBroker};

/// Denies everything and records each action it was asked about, with its API.
#[derive(Default)]
struct DenyAndRecord {
    asked: Mutex<Vec<(i16, AclOperation, ResourceType, String)>>,
}

impl Authorizer for DenyAndRecord {
    fn authorize(&self, r: &Requester<'_>, actions: &[Action<'_>]) -> Vec<AuthorizationResult> {
        let mut asked = self.asked.lock();
        for a in actions {
            asked.push((r.api_key, a.operation, a.resource_type, a.name.to_string()));
        }
        vec![AuthorizationResult::Denied; actions.len()]
    }
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

fn t() -> TopicName {
    TopicName(s("t"))
}

fn g() -> GroupId {
    GroupId(s("g"))
}

/// A request for `key` naming topic `t` (partition 0), group `g`, transactional id `x`
/// where it names any.
fn request_for(key: ApiKey) -> RequestKind {
    use kafka_protocol::messages::*;
    let tx = || TransactionalId(s("x"));
    macro_rules! defaults {
        ($($api:ident),* $(,)?) => {
            match key {
                ApiKey::Produce => RequestKind::Produce(ProduceRequest::default().with_acks(1).with_topic_data(vec![
                    produce_request::TopicProduceData::default()
                        .with_name(t())
                        .with_partition_data(vec![produce_request::PartitionProduceData::default()]),
                ])),
                ApiKey::Fetch => RequestKind::Fetch(FetchRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
                    fetch_request::FetchTopic::default()
                        .with_topic(t())
                        .with_partitions(vec![fetch_request::FetchPartition::default()]),
                ])),
                ApiKey::ListOffsets => RequestKind::ListOffsets(ListOffsetsRequest::default().with_topics(vec![
                    list_offsets_request::ListOffsetsTopic::default()
                        .with_name(t())
                        .with_partitions(vec![list_offsets_request::ListOffsetsPartition::default()]),
                ])),
                ApiKey::Metadata => RequestKind::Metadata(MetadataRequest::default().with_topics(Some(vec![
                    metadata_request::MetadataRequestTopic::default().with_name(Some(t())),
                ]))),
                ApiKey::JoinGroup => RequestKind::JoinGroup(JoinGroupRequest::default().with_group_id(g())),
                ApiKey::SyncGroup => RequestKind::SyncGroup(SyncGroupRequest::default().with_group_id(g())),
                ApiKey::Heartbeat => RequestKind::Heartbeat(HeartbeatRequest::default().with_group_id(g())),
                ApiKey::LeaveGroup => RequestKind::LeaveGroup(LeaveGroupRequest::default().with_group_id(g())),
                ApiKey::WriteTxnMarkers => RequestKind::WriteTxnMarkers(WriteTxnMarkersRequest::default().with_markers(vec![
                    write_txn_markers_request::WritableTxnMarker::default().with_topics(vec![
                        write_txn_markers_request::WritableTxnMarkerTopic::default()
                            .with_name(t())
                            .with_partition_indexes(vec![0]),
                    ]),
                ])),
                ApiKey::AlterClientQuotas => RequestKind::AlterClientQuotas(AlterClientQuotasRequest::default().with_entries(vec![
                    alter_client_quotas_request::EntryData::default().with_entity(vec![
                        alter_client_quotas_request::EntityData::default().with_entity_type(s("client-id")).with_entity_name(Some(s("c"))),
                    ]),
                ])),
                ApiKey::AlterUserScramCredentials => RequestKind::AlterUserScramCredentials(
                    AlterUserScramCredentialsRequest::default().with_deletions(vec![
                        alter_user_scram_credentials_request::ScramCredentialDeletion::default()
                            .with_name(s("u"))
                            .with_mechanism(2),
                    ]),
                ),
                ApiKey::OffsetCommit => RequestKind::OffsetCommit(OffsetCommitRequest::default().with_group_id(g()).with_topics(vec![
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(t())
                        .with_partitions(vec![offset_commit_request::OffsetCommitRequestPartition::default()]),
                ])),
                ApiKey::OffsetFetch => RequestKind::OffsetFetch(OffsetFetchRequest::default().with_groups(vec![
                    offset_fetch_request::OffsetFetchRequestGroup::default().with_group_id(g()),
                ])),
                ApiKey::FindCoordinator => RequestKind::FindCoordinator(FindCoordinatorRequest::default().with_coordinator_keys(vec![s("g")])),
                ApiKey::DescribeGroups => RequestKind::DescribeGroups(DescribeGroupsRequest::default().with_groups(vec![g()])),
                ApiKey::DeleteGroups => RequestKind::DeleteGroups(DeleteGroupsRequest::default().with_groups_names(vec![g()])),
                ApiKey::OffsetDelete => RequestKind::OffsetDelete(OffsetDeleteRequest::default().with_group_id(g())),
                ApiKey::ConsumerGroupHeartbeat => RequestKind::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest::default().with_group_id(g())),
                ApiKey::ConsumerGroupDescribe => RequestKind::ConsumerGroupDescribe(ConsumerGroupDescribeRequest::default().with_group_ids(vec![g()])),
                ApiKey::ShareGroupHeartbeat => RequestKind::ShareGroupHeartbeat(ShareGroupHeartbeatRequest::default()
                    .with_group_id(g()).with_member_id(s("m")).with_subscribed_topic_names(Some(vec![t()]))),
                ApiKey::ShareGroupDescribe => RequestKind::ShareGroupDescribe(ShareGroupDescribeRequest::default().with_group_ids(vec![g()])),
                ApiKey::ShareFetch => RequestKind::ShareFetch(ShareFetchRequest::default().with_group_id(Some(g())).with_member_id(Some(s("m")))),
                ApiKey::ShareAcknowledge => RequestKind::ShareAcknowledge(ShareAcknowledgeRequest::default().with_group_id(Some(g())).with_member_id(Some(s("m"))).with_share_session_epoch(1)),
                ApiKey::DescribeShareGroupOffsets => RequestKind::DescribeShareGroupOffsets(DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                    describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default().with_group_id(g()),
                ])),
                ApiKey::AlterShareGroupOffsets => RequestKind::AlterShareGroupOffsets(AlterShareGroupOffsetsRequest::default().with_group_id(g())),
                ApiKey::DeleteShareGroupOffsets => RequestKind::DeleteShareGroupOffsets(DeleteShareGroupOffsetsRequest::default().with_group_id(g())),
                // The share coordinator's RPCs answer per partition only.
                ApiKey::InitializeShareGroupState => RequestKind::InitializeShareGroupState(InitializeShareGroupStateRequest::default().with_topics(vec![
                    initialize_share_group_state_request::InitializeStateData::default()
                        .with_partitions(vec![initialize_share_group_state_request::PartitionData::default()]),
                ])),
                ApiKey::ReadShareGroupState => RequestKind::ReadShareGroupState(ReadShareGroupStateRequest::default().with_topics(vec![
                    read_share_group_state_request::ReadStateData::default()
                        .with_partitions(vec![read_share_group_state_request::PartitionData::default()]),
                ])),
                ApiKey::WriteShareGroupState => RequestKind::WriteShareGroupState(WriteShareGroupStateRequest::default().with_topics(vec![
                    write_share_group_state_request::WriteStateData::default()
                        .with_partitions(vec![write_share_group_state_request::PartitionData::default()]),
                ])),
                ApiKey::DeleteShareGroupState => RequestKind::DeleteShareGroupState(DeleteShareGroupStateRequest::default().with_topics(vec![
                    delete_share_group_state_request::DeleteStateData::default()
                        .with_partitions(vec![delete_share_group_state_request::PartitionData::default()]),
                ])),
                ApiKey::ReadShareGroupStateSummary => RequestKind::ReadShareGroupStateSummary(ReadShareGroupStateSummaryRequest::default().with_topics(vec![
                    read_share_group_state_summary_request::ReadStateSummaryData::default()
                        .with_partitions(vec![read_share_group_state_summary_request::PartitionData::default()]),
                ])),
                ApiKey::InitProducerId => RequestKind::InitProducerId(InitProducerIdRequest::default().with_transactional_id(Some(tx()))),
                ApiKey::AddPartitionsToTxn => RequestKind::AddPartitionsToTxn(AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(tx())
                    .with_v3_and_below_topics(vec![add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                        .with_name(t())
                        .with_partitions(vec![0])])),
                ApiKey::AddOffsetsToTxn => RequestKind::AddOffsetsToTxn(AddOffsetsToTxnRequest::default().with_transactional_id(tx()).with_group_id(g())),
                ApiKey::TxnOffsetCommit => RequestKind::TxnOffsetCommit(TxnOffsetCommitRequest::default().with_transactional_id(tx()).with_group_id(g()).with_topics(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                        .with_name(t())
                        .with_partitions(vec![txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()]),
                ])),
                ApiKey::EndTxn => RequestKind::EndTxn(EndTxnRequest::default().with_transactional_id(tx())),
                ApiKey::DescribeProducers => RequestKind::DescribeProducers(DescribeProducersRequest::default().with_topics(vec![
                    describe_producers_request::TopicRequest::default().with_name(t()).with_partition_indexes(vec![0]),
                ])),
                ApiKey::DescribeTransactions => RequestKind::DescribeTransactions(DescribeTransactionsRequest::default().with_transactional_ids(vec![tx()])),
                ApiKey::CreateTopics => RequestKind::CreateTopics(CreateTopicsRequest::default().with_topics(vec![
                    create_topics_request::CreatableTopic::default().with_name(t()).with_num_partitions(1).with_replication_factor(1),
                ])),
                ApiKey::DeleteTopics => RequestKind::DeleteTopics(DeleteTopicsRequest::default().with_topics(vec![
                    delete_topics_request::DeleteTopicState::default().with_name(Some(t())),
                ])),
                ApiKey::DeleteRecords => RequestKind::DeleteRecords(DeleteRecordsRequest::default().with_topics(vec![
                    delete_records_request::DeleteRecordsTopic::default()
                        .with_name(t())
                        .with_partitions(vec![delete_records_request::DeleteRecordsPartition::default()]),
                ])),
                ApiKey::CreatePartitions => RequestKind::CreatePartitions(CreatePartitionsRequest::default().with_topics(vec![
                    create_partitions_request::CreatePartitionsTopic::default().with_name(t()).with_count(2),
                ])),
                ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(DescribeConfigsRequest::default().with_resources(vec![
                    describe_configs_request::DescribeConfigsResource::default().with_resource_type(2).with_resource_name(s("t")),
                ])),
                ApiKey::AlterConfigs => RequestKind::AlterConfigs(AlterConfigsRequest::default().with_resources(vec![
                    alter_configs_request::AlterConfigsResource::default().with_resource_type(2).with_resource_name(s("t")),
                ])),
                ApiKey::IncrementalAlterConfigs => RequestKind::IncrementalAlterConfigs(IncrementalAlterConfigsRequest::default().with_resources(vec![
                    incremental_alter_configs_request::AlterConfigsResource::default().with_resource_type(2).with_resource_name(s("t")),
                ])),
                ApiKey::OffsetForLeaderEpoch => RequestKind::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
                    offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                        .with_topic(t())
                        .with_partitions(vec![offset_for_leader_epoch_request::OffsetForLeaderPartition::default()]),
                ])),
                ApiKey::AlterReplicaLogDirs => RequestKind::AlterReplicaLogDirs(AlterReplicaLogDirsRequest::default().with_dirs(vec![
                    alter_replica_log_dirs_request::AlterReplicaLogDir::default()
                        .with_path(s("/nowhere"))
                        .with_topics(vec![alter_replica_log_dirs_request::AlterReplicaLogDirTopic::default()
                            .with_name(t())
                            .with_partitions(vec![0])]),
                ])),
                ApiKey::DescribeTopicPartitions => RequestKind::DescribeTopicPartitions(DescribeTopicPartitionsRequest::default()
                    .with_topics(vec![describe_topic_partitions_request::TopicRequest::default().with_name(t())])
                    .with_response_partition_limit(10)),
                ApiKey::DescribeCluster => RequestKind::DescribeCluster(DescribeClusterRequest::default().with_include_cluster_authorized_operations(true)),
                ApiKey::CreateAcls => RequestKind::CreateAcls(CreateAclsRequest::default().with_creations(vec![
                    create_acls_request::AclCreation::default()
                        .with_resource_type(2).with_resource_name(s("t")).with_resource_pattern_type(3)
                        .with_principal(s("User:a")).with_host(s("*")).with_operation(3).with_permission_type(3),
                ])),
                ApiKey::DescribeAcls => RequestKind::DescribeAcls(DescribeAclsRequest::default()
                    .with_resource_type_filter(1).with_pattern_type_filter(1).with_operation(1).with_permission_type(1)),
                ApiKey::DeleteAcls => RequestKind::DeleteAcls(DeleteAclsRequest::default().with_filters(vec![
                    delete_acls_request::DeleteAclsFilter::default()
                        .with_resource_type_filter(1).with_pattern_type_filter(1).with_operation(1).with_permission_type(1),
                ])),
                $(ApiKey::$api => RequestKind::$api(Default::default()),)*
                other => panic!("no request built for {other:?}"),
            }
        };
    }
    defaults!(
        ApiVersions,
        SaslHandshake,
        SaslAuthenticate,
        DescribeUserScramCredentials,
        DescribeClientQuotas,
        DescribeLogDirs,
        ListTransactions,
        ListGroups,
        AlterPartition,
        ControlledShutdown,
        AllocateProducerIds,
        ElectLeaders,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        LeaderAndIsr,
        UpdateMetadata,
        StopReplica,
    )
}

/// The version each API is sent at here: names rather than topic ids for Produce and
/// Fetch, a client's AddPartitionsToTxn.
fn version_for(route: &router::Route) -> i16 {
    match route.api_key {
        ApiKey::Produce => 9,
        ApiKey::Fetch => 12,
        ApiKey::Metadata => 12,
        ApiKey::AddPartitionsToTxn => 3,
        _ => route.max_version,
    }
}

/// The error codes of a response, where Kafka puts a refusal for each API.
fn codes(body: &ResponseKind) -> Vec<i16> {
    let mut out = Vec::new();
    macro_rules! per {
        ($iter:expr) => {
            out.extend($iter)
        };
    }
    match body {
        ResponseKind::ListOffsets(r) => per!(r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))),
        ResponseKind::Metadata(r) => per!(r.topics.iter().map(|t| t.error_code)),
        ResponseKind::WriteTxnMarkers(r) => per!(r.markers.iter().flat_map(|m| {
            m.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        })),
        ResponseKind::OffsetCommit(r) => per!(r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))),
        ResponseKind::OffsetFetch(r) => per!(r.groups.iter().map(|g| g.error_code)),
        ResponseKind::FindCoordinator(r) => per!(r.coordinators.iter().map(|c| c.error_code)),
        ResponseKind::DescribeGroups(r) => per!(r.groups.iter().map(|g| g.error_code)),
        ResponseKind::DeleteGroups(r) => per!(r.results.iter().map(|g| g.error_code)),
        ResponseKind::ConsumerGroupDescribe(r) => per!(r.groups.iter().map(|g| g.error_code)),
        ResponseKind::AddPartitionsToTxn(r) => {
            per!(r.results_by_topic_v3_and_below.iter().flat_map(|t| {
                t.results_by_partition
                    .iter()
                    .map(|p| p.partition_error_code)
            }))
        }
        ResponseKind::TxnOffsetCommit(r) => per!(r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))),
        ResponseKind::DescribeProducers(r) => per!(r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))),
        ResponseKind::DescribeTransactions(r) => {
            per!(r.transaction_states.iter().map(|t| t.error_code))
        }
        ResponseKind::CreateTopics(r) => per!(r.topics.iter().map(|t| t.error_code)),
        ResponseKind::DeleteTopics(r) => per!(r.responses.iter().map(|t| t.error_code)),
        ResponseKind::DeleteRecords(r) => per!(r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))),
        ResponseKind::CreatePartitions(r) => per!(r.results.iter().map(|t| t.error_code)),
        ResponseKind::DescribeConfigs(r) => per!(r.results.iter().map(|t| t.error_code)),
        ResponseKind::AlterConfigs(r) => per!(r.responses.iter().map(|t| t.error_code)),
        ResponseKind::IncrementalAlterConfigs(r) => per!(r.responses.iter().map(|t| t.error_code)),
        ResponseKind::OffsetForLeaderEpoch(r) => per!(r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))),
        ResponseKind::AlterReplicaLogDirs(r) => per!(r
            .results
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))),
        ResponseKind::DescribeTopicPartitions(r) => per!(r.topics.iter().map(|t| t.error_code)),
        ResponseKind::CreateAcls(r) => per!(r.results.iter().map(|c| c.error_code)),
        ResponseKind::DeleteAcls(r) => per!(r.filter_results.iter().map(|f| f.error_code)),
        _ => refusal::count_errors(body, |c| out.push(c)),
    }
    out
}

/// What a denied request for each per-resource API checks first, and Kafka's answer.
fn per_resource(key: ApiKey) -> (AclOperation, ResourceType, &'static str, ResponseError) {
    use AclOperation::*;
    use ResourceType::*;
    let topic = ResponseError::TopicAuthorizationFailed;
    let group = ResponseError::GroupAuthorizationFailed;
    let txn = ResponseError::TransactionalIdAuthorizationFailed;
    let cluster = ResponseError::ClusterAuthorizationFailed;
    match key {
        ApiKey::Produce => (Write, Topic, "t", topic),
        ApiKey::Fetch => (Read, Topic, "t", topic),
        ApiKey::ListOffsets | ApiKey::Metadata | ApiKey::OffsetForLeaderEpoch => {
            (Describe, Topic, "t", topic)
        }
        ApiKey::DescribeTopicPartitions => (Describe, Topic, "t", topic),
        ApiKey::JoinGroup | ApiKey::SyncGroup | ApiKey::Heartbeat | ApiKey::LeaveGroup => {
            (Read, Group, "g", group)
        }
        ApiKey::OffsetCommit
        | ApiKey::ConsumerGroupHeartbeat
        | ApiKey::ShareGroupHeartbeat
        | ApiKey::ShareFetch
        | ApiKey::ShareAcknowledge
        | ApiKey::AlterShareGroupOffsets => (Read, Group, "g", group),
        ApiKey::OffsetFetch
        | ApiKey::FindCoordinator
        | ApiKey::DescribeGroups
        | ApiKey::ConsumerGroupDescribe
        | ApiKey::ShareGroupDescribe
        | ApiKey::DescribeShareGroupOffsets => (Describe, Group, "g", group),
        ApiKey::DeleteGroups | ApiKey::OffsetDelete | ApiKey::DeleteShareGroupOffsets => {
            (Delete, Group, "g", group)
        }
        ApiKey::InitProducerId
        | ApiKey::AddPartitionsToTxn
        | ApiKey::AddOffsetsToTxn
        | ApiKey::TxnOffsetCommit
        | ApiKey::EndTxn => (Write, TransactionalId, "x", txn),
        ApiKey::DescribeTransactions => (Describe, TransactionalId, "x", txn),
        ApiKey::DescribeProducers => (Read, Topic, "t", topic),
        ApiKey::CreateTopics => (Create, Topic, "t", topic),
        ApiKey::DeleteTopics | ApiKey::DeleteRecords => (Delete, Topic, "t", topic),
        ApiKey::CreatePartitions => (Alter, Topic, "t", topic),
        ApiKey::DescribeConfigs => (DescribeConfigs, Topic, "t", topic),
        ApiKey::AlterConfigs | ApiKey::IncrementalAlterConfigs => (AlterConfigs, Topic, "t", topic),
        ApiKey::AlterReplicaLogDirs => (Alter, Cluster, "kafka-cluster", cluster),
        other => panic!("{other:?} declares per-resource checks this test does not know"),
    }
}

#[tokio::test]
async fn every_route_is_timed_counted_and_authorized_through_the_trait() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let recorder = Arc::new(DenyAndRecord::default());
    b.broker.set_authorizer(recorder.clone()).unwrap();
    let mut unchecked = BTreeSet::new();
    for route in router::routes(router::Mode::ZooKeeper) {
        let key = route.api_key;
        let ctx = RequestContext {
            api_key: key,
            api_version: version_for(route),
            correlation_id: 1,
            client_id: None,
            peer: b.addr,
            session: Arc::new(Session {
                authorizer: b.broker.authorizer(),
                ..Session::new("PLAINTEXT", SecurityProtocol::Plaintext, b.addr)
            }),
        };
        recorder.asked.lock().clear();
        let api = b
            .broker
            .metrics
            .requests
            .api(key)
            .expect("every route has metrics");
        let local_count = || api.counts(request::LOCAL).count();
        let (requests, local) = (api.requests(), local_count());
        let body = request_for(key);
        let request = pipeline::Request {
            api_key: key,
            api_version: ctx.api_version,
            correlation_id: 1,
            fetch_side: pipeline::fetch_side(&body),
            received: Instant::now(),
        };
        let run = pipeline::start(route, &b.broker, ctx, body, request.received, 0)
            .unwrap_or_else(|e| panic!("{key:?}: {e}"));
        let handled = tokio::time::timeout(Duration::from_secs(20), run)
            .await
            .unwrap_or_else(|_| panic!("{key:?} did not finish"));
        pipeline::count(&b.broker.metrics, &request, &handled);
        assert_eq!(api.requests(), requests + 1, "{key:?} counted");
        assert_eq!(local_count(), local + 1, "{key:?} timed");
        let asked: Vec<_> = recorder.asked.lock().clone();
        let codes = codes(&handled.response.body);
        let checked = |op, rt, name: &str| {
            assert!(
                asked
                    .iter()
                    .any(|(k, o, r, n)| *k == key as i16 && *o == op && *r == rt && n == name),
                "{key:?} checked {op:?} on {rt:?} {name}: {asked:?}"
            );
        };
        let refused_with = |e: ResponseError| {
            assert!(
                !codes.is_empty() && codes.iter().all(|c| *c == e.code()),
                "{key:?}: {codes:?}, want {e:?}"
            );
        };
        match (route.needs, key) {
            (Needs::Nothing, _) => {
                assert!(asked.is_empty(), "{key:?}");
                // The SASL APIs reach a handler only outside an exchange (here: a
                // PLAINTEXT connection), which answers ILLEGAL_SASL_STATE as Kafka's does.
                let want = match key {
                    ApiKey::SaslHandshake | ApiKey::SaslAuthenticate => {
                        ResponseError::IllegalSaslState.code()
                    }
                    _ => 0,
                };
                assert_eq!(codes, vec![want], "{key:?}");
            }
            (Needs::Cluster(op), _) => {
                checked(op, ResourceType::Cluster, "kafka-cluster");
                refused_with(ResponseError::ClusterAuthorizationFailed);
            }
            // Filtered lists: a denied principal is told of nothing, without an error.
            (Needs::PerResource, ApiKey::ListGroups) => {
                checked(
                    AclOperation::Describe,
                    ResourceType::Cluster,
                    "kafka-cluster",
                );
                let ResponseKind::ListGroups(r) = &handled.response.body else {
                    unreachable!()
                };
                assert_eq!((r.error_code, r.groups.len()), (0, 0));
            }
            (Needs::PerResource, ApiKey::ListTransactions) => {
                let ResponseKind::ListTransactions(r) = &handled.response.body else {
                    unreachable!()
                };
                assert_eq!((r.error_code, r.transaction_states.len()), (0, 0));
            }
            // Kafka checks nothing; the cluster operations asked for are none.
            (Needs::PerResource, ApiKey::DescribeCluster) => {
                checked(
                    AclOperation::Describe,
                    ResourceType::Cluster,
                    "kafka-cluster",
                );
                let ResponseKind::DescribeCluster(r) = &handled.response.body else {
                    unreachable!()
                };
                assert_eq!((r.error_code, r.cluster_authorized_operations), (0, 0));
            }
            (Needs::PerResource, _) => {
                let (op, rt, name, error) = per_resource(key);
                checked(op, rt, name);
                refused_with(error);
            }
            // A KRaft broker's forwarded routes (kraft_broker.rs runs them).
            (Needs::ByController, _) => panic!("{key:?} is forwarded only by a KRaft broker"),
            (Needs::Unchecked, _) => {
                unchecked.insert(format!("{key:?}"));
            }
        }
    }
    // Every route declares what it needs.
    assert_eq!(unchecked, BTreeSet::new());
    b.stop().await;
}

#[tokio::test]
async fn a_denied_client_gets_kafkas_codes_over_tcp_and_every_request_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    assert_eq!(b.client().await.create_topic("t", 1).await, 0);
    b.broker
        .set_authorizer(Arc::new(DenyAndRecord::default()))
        .unwrap();
    // A connection is checked by the authorizer in force when it opened.
    let mut c = b.client().await;
    let records = common::batch(&["v"], None, kafka_protocol::records::Compression::None);
    let (code, _) = c.produce("t", 0, records, 1).await;
    assert_eq!(code, ResponseError::TopicAuthorizationFailed.code());
    // Every topic request: the denied topic is left out, not reported.
    let all = c
        .send(&MetadataRequest::default().with_topics(None), 12)
        .await;
    assert!(all.topics.is_empty(), "{:?}", all.topics);
    let versions = c.send(&ApiVersionsRequest::default(), 3).await;
    assert_eq!(versions.error_code, 0);
    let produce = b.broker.metrics.requests.api(ApiKey::Produce).unwrap();
    assert_eq!(produce.requests(), 1);
    // The response's send is timed once it is written.
    common::wait_for(
        "the produce's send is recorded",
        Duration::from_secs(5),
        || async { produce.counts(request::TOTAL).count() == 1 },
    )
    .await;
    let text = b.broker.metrics.encode_text().await;
    assert!(
        text.contains(r#"kafka_network_requestmetrics_errors_total{request="Produce",error="TOPIC_AUTHORIZATION_FAILED"} 1"#),
        "{text}"
    );
    b.stop().await;
}

/// Throttles every request by 300 ms.
struct Throttle;

impl QuotaManager for Throttle {
    fn record(
        &self,
        _: &Caller<'_>,
        _: ApiKey,
        _: usize,
        _: &ResponseKind,
        _: Duration,
    ) -> Verdict {
        Verdict { throttle_ms: 300 }
    }
}

#[tokio::test]
async fn a_quota_throttle_is_in_the_response_and_holds_the_next_answer_back() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    b.broker.set_quota_manager(Arc::new(Throttle)).unwrap();
    let mut c = b.client().await;
    let started = Instant::now();
    let first = c.send(&ApiVersionsRequest::default(), 3).await;
    assert_eq!(first.throttle_time_ms, 300);
    assert!(
        started.elapsed() < Duration::from_millis(300),
        "answered at once"
    );
    let second = c.send(&ApiVersionsRequest::default(), 3).await;
    assert_eq!(second.throttle_time_ms, 300);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "held back for the throttle"
    );
    b.stop().await;
}
