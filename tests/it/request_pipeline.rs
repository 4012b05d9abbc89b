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
use skua::network::{pipeline, refusal, SecurityProtocol, Session};
use skua::quota::{QuotaManager, Verdict};
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

/// A request for `key` naming topic `t` (partition 0) or group `g` where it names any.
fn request_for(key: ApiKey) -> RequestKind {
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
                $(ApiKey::$api => RequestKind::$api(Default::default()),)*
                other => panic!("no request built for {other:?}"),
            }
        };
    }
    defaults!(
        ApiVersions,
        DescribeClientQuotas,
        AlterClientQuotas,
        CreateTopics,
        DeleteTopics,
        DeleteRecords,
        InitProducerId,
        OffsetForLeaderEpoch,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        TxnOffsetCommit,
        EndTxn,
        DescribeProducers,
        DescribeLogDirs,
        AlterReplicaLogDirs,
        DescribeTransactions,
        ListTransactions,
        DescribeConfigs,
        AlterConfigs,
        CreatePartitions,
        DescribeCluster,
        FindCoordinator,
        OffsetCommit,
        OffsetFetch,
        ListGroups,
        DescribeGroups,
        DeleteGroups,
        OffsetDelete,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
        IncrementalAlterConfigs,
        DescribeTopicPartitions,
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

/// The version each API is sent at here: names rather than topic ids for Produce and Fetch.
fn version_for(route: &router::Route) -> i16 {
    match route.api_key {
        ApiKey::Produce => 9,
        ApiKey::Fetch => 12,
        ApiKey::Metadata => 12,
        _ => route.max_version,
    }
}

/// The error codes of a response, where Kafka puts a refusal for each API.
fn codes(body: &ResponseKind) -> Vec<i16> {
    let mut out = Vec::new();
    refusal::count_errors(body, |c| out.push(c));
    match body {
        ResponseKind::ListOffsets(r) => out.extend(
            r.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code)),
        ),
        ResponseKind::Metadata(r) => out.extend(r.topics.iter().map(|t| t.error_code)),
        ResponseKind::WriteTxnMarkers(r) => out.extend(r.markers.iter().flat_map(|m| {
            m.topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        })),
        _ => {}
    }
    out
}

#[tokio::test]
async fn every_route_is_timed_counted_and_authorized_through_the_trait() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let recorder = Arc::new(DenyAndRecord::default());
    b.broker.set_authorizer(recorder.clone()).unwrap();
    let mut unchecked = BTreeSet::new();
    for route in router::routes(true) {
        let key = route.api_key;
        let ctx = RequestContext {
            api_key: key,
            api_version: version_for(route),
            correlation_id: 1,
            client_id: None,
            peer: b.addr,
            session: Arc::new(Session::new(
                "PLAINTEXT",
                SecurityProtocol::Plaintext,
                b.addr,
            )),
            authorizer: b.broker.authorizer(),
        };
        recorder.asked.lock().clear();
        let api = b
            .broker
            .metrics
            .requests
            .api(key)
            .expect("every route has metrics");
        let (requests, local) = (api.requests.get(), api.local_ms.get_sample_count());
        let run = pipeline::run(route, &b.broker, ctx, request_for(key), Instant::now(), 0);
        let handled = tokio::time::timeout(Duration::from_secs(20), run)
            .await
            .unwrap_or_else(|_| panic!("{key:?} did not finish"))
            .unwrap_or_else(|e| panic!("{key:?}: {e}"));
        assert_eq!(api.requests.get(), requests + 1, "{key:?} counted");
        assert_eq!(api.local_ms.get_sample_count(), local + 1, "{key:?} timed");
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
        match route.needs {
            Needs::Nothing => {
                assert!(asked.is_empty(), "{key:?}");
                assert_eq!(codes, vec![0], "{key:?}");
            }
            Needs::Cluster(op) => {
                checked(op, ResourceType::Cluster, "kafka-cluster");
                refused_with(ResponseError::ClusterAuthorizationFailed);
            }
            Needs::PerResource => match key {
                ApiKey::Produce => {
                    checked(AclOperation::Write, ResourceType::Topic, "t");
                    refused_with(ResponseError::TopicAuthorizationFailed);
                }
                ApiKey::Fetch => {
                    checked(AclOperation::Read, ResourceType::Topic, "t");
                    refused_with(ResponseError::TopicAuthorizationFailed);
                }
                ApiKey::ListOffsets | ApiKey::Metadata => {
                    checked(AclOperation::Describe, ResourceType::Topic, "t");
                    refused_with(ResponseError::TopicAuthorizationFailed);
                }
                ApiKey::JoinGroup | ApiKey::SyncGroup | ApiKey::Heartbeat | ApiKey::LeaveGroup => {
                    checked(AclOperation::Read, ResourceType::Group, "g");
                    refused_with(ResponseError::GroupAuthorizationFailed);
                }
                other => panic!("{other:?} declares per-resource checks this test does not know"),
            },
            Needs::Unchecked => {
                unchecked.insert(format!("{key:?}"));
            }
        }
    }
    // The APIs still to be given their checks (the ACL work turns each into PerResource).
    let expected: BTreeSet<String> = [
        "AddOffsetsToTxn",
        "AddPartitionsToTxn",
        "AlterClientQuotas",
        "AlterConfigs",
        "AlterReplicaLogDirs",
        "ConsumerGroupDescribe",
        "ConsumerGroupHeartbeat",
        "CreatePartitions",
        "CreateTopics",
        "DeleteGroups",
        "DeleteRecords",
        "DeleteTopics",
        "DescribeClientQuotas",
        "DescribeCluster",
        "DescribeConfigs",
        "DescribeGroups",
        "DescribeProducers",
        "DescribeTopicPartitions",
        "DescribeTransactions",
        "EndTxn",
        "FindCoordinator",
        "IncrementalAlterConfigs",
        "InitProducerId",
        "ListGroups",
        "ListTransactions",
        "OffsetCommit",
        "OffsetDelete",
        "OffsetFetch",
        "OffsetForLeaderEpoch",
        "TxnOffsetCommit",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(unchecked, expected);
    b.stop().await;
}

#[tokio::test]
async fn a_denied_client_gets_kafkas_codes_over_tcp_and_every_request_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("t", 1).await, 0);
    b.broker
        .set_authorizer(Arc::new(DenyAndRecord::default()))
        .unwrap();
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
    assert_eq!(produce.requests.get(), 1);
    // The response's send is timed once it is written.
    common::wait_for(
        "the produce's send is recorded",
        Duration::from_secs(5),
        || async { produce.total_ms.get_sample_count() == 1 },
    )
    .await;
    let text = b.broker.metrics.encode_text();
    assert!(
        text.contains(r#"kafka_network_requestmetrics_errors_total{error="TOPIC_AUTHORIZATION_FAILED",request="Produce"} 1"#),
        "{text}"
    );
    b.stop().await;
}

/// Throttles every request by 300 ms.
struct Throttle;

impl QuotaManager for Throttle {
    fn record(
        &self,
        _: &RequestContext,
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
