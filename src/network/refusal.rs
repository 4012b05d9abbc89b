//! What the request pipeline writes into responses without knowing their API: the
//! answer to a request refused before its handler, the quota's throttle time, and the
//! error codes a response carries (for `RequestMetrics`' error counts).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::*;

/// A share coordinator RPC's answer with `code` on every partition it named: the five
/// RPCs' responses have the same shape (results per topic id, then per partition) in
/// types of their own.
macro_rules! every_share_partition {
    ($req:expr, $code:expr, $module:ident, $response:ident, $topic_result:ident) => {{
        use $module::{$topic_result, PartitionResult};
        $response::default().with_results(
            $req.topics
                .iter()
                .map(|t| {
                    $topic_result::default()
                        .with_topic_id(t.topic_id)
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    PartitionResult::default()
                                        .with_partition(p.partition)
                                        .with_error_code($code)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
    }};
}

/// The answer to a request whose route's cluster operation was denied: `error` where
/// Kafka puts it for that API (the top-level code, or every partition's where the
/// response has no top-level one). `None` for an API that declares no cluster need.
pub fn refuse(body: RequestKind, error: ResponseError) -> Option<ResponseKind> {
    let code = error.code();
    let kind = match body {
        RequestKind::LeaderAndIsr(_) => {
            ResponseKind::LeaderAndIsr(LeaderAndIsrResponse::default().with_error_code(code))
        }
        RequestKind::UpdateMetadata(_) => {
            ResponseKind::UpdateMetadata(UpdateMetadataResponse::default().with_error_code(code))
        }
        RequestKind::StopReplica(_) => {
            ResponseKind::StopReplica(StopReplicaResponse::default().with_error_code(code))
        }
        RequestKind::ControlledShutdown(_) => ResponseKind::ControlledShutdown(
            ControlledShutdownResponse::default().with_error_code(code),
        ),
        RequestKind::AlterPartition(_) => {
            ResponseKind::AlterPartition(AlterPartitionResponse::default().with_error_code(code))
        }
        RequestKind::AllocateProducerIds(_) => ResponseKind::AllocateProducerIds(
            AllocateProducerIdsResponse::default().with_error_code(code),
        ),
        RequestKind::AlterPartitionReassignments(_) => ResponseKind::AlterPartitionReassignments(
            AlterPartitionReassignmentsResponse::default().with_error_code(code),
        ),
        RequestKind::ListPartitionReassignments(_) => ResponseKind::ListPartitionReassignments(
            ListPartitionReassignmentsResponse::default().with_error_code(code),
        ),
        RequestKind::DescribeLogDirs(_) => {
            ResponseKind::DescribeLogDirs(DescribeLogDirsResponse::default().with_error_code(code))
        }
        RequestKind::DescribeUserScramCredentials(_) => ResponseKind::DescribeUserScramCredentials(
            DescribeUserScramCredentialsResponse::default().with_error_code(code),
        ),
        RequestKind::AlterUserScramCredentials(req) => {
            ResponseKind::AlterUserScramCredentials(alter_user_scram_credentials(req, code))
        }
        RequestKind::DescribeClientQuotas(_) => ResponseKind::DescribeClientQuotas(
            DescribeClientQuotasResponse::default().with_error_code(code),
        ),
        RequestKind::AlterClientQuotas(req) => {
            ResponseKind::AlterClientQuotas(alter_client_quotas(req, code))
        }
        RequestKind::ElectLeaders(req) => ResponseKind::ElectLeaders(elect_leaders(req, code)),
        // The ACL APIs: each creation or filter carries the error, DescribeAcls one.
        RequestKind::CreateAcls(req) => ResponseKind::CreateAcls(
            CreateAclsResponse::default().with_results(
                req.creations
                    .iter()
                    .map(|_| {
                        create_acls_response::AclCreationResult::default().with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::DescribeAcls(_) => {
            ResponseKind::DescribeAcls(DescribeAclsResponse::default().with_error_code(code))
        }
        RequestKind::DeleteAcls(req) => ResponseKind::DeleteAcls(
            DeleteAclsResponse::default().with_filter_results(
                req.filters
                    .iter()
                    .map(|_| {
                        delete_acls_response::DeleteAclsFilterResult::default()
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::WriteTxnMarkers(req) => {
            ResponseKind::WriteTxnMarkers(write_txn_markers(req, code))
        }
        // The share coordinator's RPCs have no top-level code: every partition's.
        RequestKind::InitializeShareGroupState(req) => {
            ResponseKind::InitializeShareGroupState(every_share_partition!(
                req,
                code,
                initialize_share_group_state_response,
                InitializeShareGroupStateResponse,
                InitializeStateResult
            ))
        }
        RequestKind::ReadShareGroupState(req) => {
            ResponseKind::ReadShareGroupState(every_share_partition!(
                req,
                code,
                read_share_group_state_response,
                ReadShareGroupStateResponse,
                ReadStateResult
            ))
        }
        RequestKind::WriteShareGroupState(req) => {
            ResponseKind::WriteShareGroupState(every_share_partition!(
                req,
                code,
                write_share_group_state_response,
                WriteShareGroupStateResponse,
                WriteStateResult
            ))
        }
        RequestKind::DeleteShareGroupState(req) => {
            ResponseKind::DeleteShareGroupState(every_share_partition!(
                req,
                code,
                delete_share_group_state_response,
                DeleteShareGroupStateResponse,
                DeleteStateResult
            ))
        }
        RequestKind::ReadShareGroupStateSummary(req) => {
            ResponseKind::ReadShareGroupStateSummary(every_share_partition!(
                req,
                code,
                read_share_group_state_summary_response,
                ReadShareGroupStateSummaryResponse,
                ReadStateSummaryResult
            ))
        }
        _ => return None,
    };
    Some(kind)
}

/// AlterUserScramCredentials has no top-level error: every named user carries it.
fn alter_user_scram_credentials(
    req: AlterUserScramCredentialsRequest,
    code: i16,
) -> AlterUserScramCredentialsResponse {
    use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
    let mut users: Vec<kafka_protocol::protocol::StrBytes> = Vec::new();
    let names = req
        .upsertions
        .into_iter()
        .map(|u| u.name)
        .chain(req.deletions.into_iter().map(|d| d.name));
    for name in names {
        if !users.contains(&name) {
            users.push(name);
        }
    }
    AlterUserScramCredentialsResponse::default().with_results(
        users
            .into_iter()
            .map(|user| {
                AlterUserScramCredentialsResult::default()
                    .with_user(user)
                    .with_error_code(code)
            })
            .collect(),
    )
}

/// AlterClientQuotas has no top-level error: every entry carries it, with its entity.
fn alter_client_quotas(req: AlterClientQuotasRequest, code: i16) -> AlterClientQuotasResponse {
    use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
    let entries = req
        .entries
        .into_iter()
        .map(|e| {
            let entity = e
                .entity
                .into_iter()
                .map(|d| {
                    EntityData::default()
                        .with_entity_type(d.entity_type)
                        .with_entity_name(d.entity_name)
                })
                .collect();
            EntryData::default()
                .with_error_code(code)
                .with_entity(entity)
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}

/// ElectLeaders v0 has no top-level error: every named partition carries it.
fn elect_leaders(req: ElectLeadersRequest, code: i16) -> ElectLeadersResponse {
    let results = req
        .topic_partitions
        .unwrap_or_default()
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    PartitionResult::default()
                        .with_partition_id(p)
                        .with_error_code(code)
                })
                .collect();
            ReplicaElectionResult::default()
                .with_topic(t.topic)
                .with_partition_result(partitions)
        })
        .collect();
    ElectLeadersResponse::default()
        .with_error_code(code)
        .with_replica_election_results(results)
}

/// WriteTxnMarkers has errors per partition only.
fn write_txn_markers(req: WriteTxnMarkersRequest, code: i16) -> WriteTxnMarkersResponse {
    let markers = req
        .markers
        .into_iter()
        .map(|m| {
            let topics = m
                .topics
                .into_iter()
                .map(|t| {
                    let partitions = t
                        .partition_indexes
                        .into_iter()
                        .map(|p| {
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(p)
                                .with_error_code(code)
                        })
                        .collect();
                    WritableTxnMarkerTopicResult::default()
                        .with_name(t.name)
                        .with_partitions(partitions)
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics)
        })
        .collect();
    WriteTxnMarkersResponse::default().with_markers(markers)
}

/// Sets the response's `throttle_time_ms` (a no-op for the few APIs without one: the
/// controller's requests, which Kafka never throttles).
pub fn set_throttle_time(body: &mut ResponseKind, throttle_ms: i32) {
    if let Some(t) = throttle_time_mut(body) {
        *t = throttle_ms;
    }
}

/// The throttle time the handler put in the response (a controller mutation quota's),
/// 0 for the APIs without one.
pub fn throttle_time(body: &mut ResponseKind) -> i32 {
    throttle_time_mut(body).map_or(0, |t| *t)
}

fn throttle_time_mut(body: &mut ResponseKind) -> Option<&mut i32> {
    macro_rules! throttled {
        ($($api:ident),* $(,)?) => {
            match body {
                $(ResponseKind::$api(r) => Some(&mut r.throttle_time_ms),)*
                _ => None,
            }
        };
    }
    throttled!(
        Produce,
        Fetch,
        ListOffsets,
        Metadata,
        ApiVersions,
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
        JoinGroup,
        SyncGroup,
        Heartbeat,
        LeaveGroup,
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
        CreateAcls,
        DescribeAcls,
        DeleteAcls,
        AlterPartition,
        AllocateProducerIds,
        ElectLeaders,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        DescribeClientQuotas,
        AlterClientQuotas,
        DescribeShareGroupOffsets,
        AlterShareGroupOffsets,
        DeleteShareGroupOffsets,
    )
}

/// Hands `count` each error code the response carries, as Kafka's `errorCounts` does:
/// Produce's per partition, Fetch's top-level one or else its partitions', the
/// top-level code of the APIs that have one. APIs whose errors are only per resource
/// (CreateTopics, DescribeConfigs …) are counted as requests, not yet per code.
pub fn count_errors(body: &ResponseKind, mut count: impl FnMut(i16)) {
    macro_rules! top_level {
        ($($api:ident),* $(,)?) => {
            match body {
                $(ResponseKind::$api(r) => count(r.error_code),)*
                ResponseKind::Produce(r) => {
                    for p in r.responses.iter().flat_map(|t| t.partition_responses.iter()) {
                        count(p.error_code);
                    }
                }
                ResponseKind::AlterUserScramCredentials(r) => {
                    for u in &r.results {
                        count(u.error_code);
                    }
                }
                ResponseKind::AlterClientQuotas(r) => {
                    for e in &r.entries {
                        count(e.error_code);
                    }
                }
                ResponseKind::SaslHandshake(r) => count(r.error_code),
                ResponseKind::SaslAuthenticate(r) => count(r.error_code),
                ResponseKind::Fetch(r) if r.error_code != 0 => count(r.error_code),
                ResponseKind::Fetch(r) => {
                    for p in r.responses.iter().flat_map(|t| t.partitions.iter()) {
                        count(p.error_code);
                    }
                }
                // Kafka's ShareFetch/ShareAcknowledgeResponse.errorCounts: the top-level
                // code, then each partition's.
                ResponseKind::ShareFetch(r) => {
                    count(r.error_code);
                    for p in r.responses.iter().flat_map(|t| t.partitions.iter()) {
                        count(p.error_code);
                    }
                }
                ResponseKind::ShareAcknowledge(r) => {
                    count(r.error_code);
                    for p in r.responses.iter().flat_map(|t| t.partitions.iter()) {
                        count(p.error_code);
                    }
                }
                ResponseKind::ShareGroupDescribe(r) => {
                    for g in &r.groups {
                        count(g.error_code);
                    }
                }
                ResponseKind::DescribeShareGroupOffsets(r) => {
                    for g in &r.groups {
                        count(g.error_code);
                        for p in g.topics.iter().flat_map(|t| t.partitions.iter()) {
                            count(p.error_code);
                        }
                    }
                }
                ResponseKind::AlterShareGroupOffsets(r) => {
                    count(r.error_code);
                    for p in r.responses.iter().flat_map(|t| t.partitions.iter()) {
                        count(p.error_code);
                    }
                }
                ResponseKind::DeleteShareGroupOffsets(r) => {
                    count(r.error_code);
                    for t in &r.responses {
                        count(t.error_code);
                    }
                }
                ResponseKind::InitializeShareGroupState(r) => {
                    for p in r.results.iter().flat_map(|t| t.partitions.iter()) {
                        count(p.error_code);
                    }
                }
                ResponseKind::ReadShareGroupState(r) => {
                    for p in r.results.iter().flat_map(|t| t.partitions.iter()) {
                        count(p.error_code);
                    }
                }
                ResponseKind::WriteShareGroupState(r) => {
                    for p in r.results.iter().flat_map(|t| t.partitions.iter()) {
                        count(p.error_code);
                    }
                }
                ResponseKind::DeleteShareGroupState(r) => {
                    for p in r.results.iter().flat_map(|t| t.partitions.iter()) {
                        count(p.error_code);
                    }
                }
                ResponseKind::ReadShareGroupStateSummary(r) => {
                    for p in r.results.iter().flat_map(|t| t.partitions.iter()) {
                        count(p.error_code);
                    }
                }
                _ => {}
            }
        };
    }
    top_level!(
        ApiVersions,
        AddOffsetsToTxn,
        AllocateProducerIds,
        AlterPartitionReassignments,
        AlterPartition,
        ConsumerGroupHeartbeat,
        ShareGroupHeartbeat,
        ControlledShutdown,
        DescribeAcls,
        DescribeClientQuotas,
        DescribeCluster,
        DescribeLogDirs,
        DescribeUserScramCredentials,
        ElectLeaders,
        EndTxn,
        FindCoordinator,
        Heartbeat,
        InitProducerId,
        JoinGroup,
        LeaderAndIsr,
        LeaveGroup,
        ListGroups,
        ListPartitionReassignments,
        ListTransactions,
        OffsetDelete,
        OffsetFetch,
        StopReplica,
        SyncGroup,
        UpdateMetadata,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::read_share_group_state_request::{PartitionData, ReadStateData};
    use kafka_protocol::protocol::StrBytes;
    use uuid::Uuid;

    #[test]
    fn a_refused_share_coordinator_rpc_carries_the_code_on_every_partition_it_named() {
        let topic = |id: u128, partitions: &[i32]| {
            ReadStateData::default()
                .with_topic_id(Uuid::from_u128(id))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|p| PartitionData::default().with_partition(*p))
                        .collect(),
                )
        };
        let req = ReadShareGroupStateRequest::default()
            .with_group_id(StrBytes::from_static_str("g"))
            .with_topics(vec![topic(1, &[0, 2]), topic(2, &[5])]);
        let refused = refuse(
            RequestKind::ReadShareGroupState(req),
            ResponseError::ClusterAuthorizationFailed,
        );
        let Some(ResponseKind::ReadShareGroupState(resp)) = refused else {
            panic!("not a ReadShareGroupState answer: {refused:?}");
        };
        let named: Vec<(u128, i32, i16)> = resp
            .results
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(move |p| (t.topic_id.as_u128(), p.partition, p.error_code))
            })
            .collect();
        let code = ResponseError::ClusterAuthorizationFailed.code();
        assert_eq!(named, vec![(1, 0, code), (1, 2, code), (2, 5, code)]);
    }
}
