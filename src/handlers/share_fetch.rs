//! ShareFetch (KIP-932, v1–2): a share group member's fetch. Its share session
//! (`replica::share::session`) names the share-partitions it reads: epoch 0 opens it with
//! the request's partitions, later epochs add to it and forget from it, -1 is the
//! member's last request, which only acknowledges and then closes the session, releasing
//! what the member still holds. Acknowledgements ride on the request and are applied
//! before the fetch (their outcome is each partition's `AcknowledgeErrorCode`); the fetch
//! then acquires records for the member in each share-partition and long polls through
//! the replica manager's delayed fetch while it acquired nothing (`replica::share::service`).
//!
//! v2 (KIP-1206, KIP-1222): `ShareAcquireMode` 1 acquires at most `MaxRecords` records
//! (record-limit, `replica::share::acquire`), 0 whole log batches as v1 does; RENEW
//! acknowledgements are allowed in a request with `IsRenewAck` (`AckRules`; elsewhere
//! its partition's AcknowledgeErrorCode is INVALID_REQUEST, the fetch going on), and such
//! a request only acknowledges: it fetches nothing, and its MaxWaitMs, MinBytes, MaxBytes and
//! MaxRecords must be 0 (INVALID_REQUEST otherwise, as an unknown acquire mode is).
//!
//! Kafka's checks: share groups enabled (`share.version`), else UNSUPPORTED_VERSION;
//! READ on the group (GROUP_AUTHORIZATION_FAILED); acknowledgements on the opening
//! request (INVALID_REQUEST); the session's epoch (INVALID_SHARE_SESSION_EPOCH,
//! SHARE_SESSION_NOT_FOUND, SHARE_SESSION_LIMIT_REACHED); READ on each topic
//! (TOPIC_AUTHORIZATION_FAILED), the topic's id (UNKNOWN_TOPIC_ID) and this broker's
//! leadership (NOT_LEADER_OR_FOLLOWER, with the current leader and its endpoint) per
//! partition.
//!
//! Records are read into the response (not sent from the file as Fetch's are: the
//! batch headers decide what is acquired), and only the log batches holding what was
//! acquired (`replica::share::read`), so one response carries at most
//! `MAX_RESPONSE_BYTES` of them whatever the request asks, and usually far less.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, NodeEndpoint, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{BrokerId, ShareFetchRequest, ShareFetchResponse};
use uuid::Uuid;

use super::leader_hint::LeaderHints;
use super::share_acknowledge::{
    acknowledge_all, batches, close_session, readable_topic, AckRules, PartitionAcks,
};
use super::str_bytes;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::share::SharePartitionKey;
use crate::error::ApiError;
use crate::log::TopicPartition;
use crate::replica::share::service::{FetchTarget, FetchedShare, ShareRead};
use crate::replica::share::session::{
    FetchContext, ShareSessionKey, TopicIdPartition, INITIAL_EPOCH,
};
use crate::replica::share::ShareAcquireMode;
use crate::replica::FetchParams;
use crate::router::RequestContext;

/// The most record bytes one ShareFetch response carries (they are read into memory).
const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;
/// The longest a ShareFetch waits, whatever it asks (as Fetch's cap).
const MAX_WAIT_MS_CAP: i32 = 5 * 60 * 1000;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: ShareFetchRequest,
) -> ShareFetchResponse {
    // Kafka answers a refused request with its error code alone (its
    // `getErrorResponse` sets no message); why is logged, as Kafka logs it.
    let refuse = |e: ResponseError, why: &str| {
        tracing::debug!(error = ?e, why, "ShareFetch refused");
        ShareFetchResponse::default().with_error_code(e.code())
    };
    let (group_id, member_id) = match admit_member(
        &broker,
        &ctx,
        req.group_id.as_deref().map(|g| g.as_str()),
        req.member_id.as_deref(),
    ) {
        Ok(ids) => ids,
        Err((e, why)) => return refuse(e, why),
    };
    let v2 = ctx.api_version >= 2;
    // A renewing request only acknowledges (KIP-1222): its fetch parameters must be 0,
    // refused with Kafka's message naming each one that is not.
    let renew_only = v2 && req.is_renew_ack;
    if renew_only {
        let not_zero: String = [
            (req.max_bytes, "maxBytes"),
            (req.min_bytes, "minBytes"),
            (req.max_records, "maxRecords"),
            (req.max_wait_ms, "maxWaitMs"),
        ]
        .iter()
        .filter(|(value, _)| *value != 0)
        .map(|(_, name)| format!("{name} must be set to 0, "))
        .collect();
        if !not_zero.is_empty() {
            return refuse(
                ResponseError::InvalidRequest,
                &format!("{not_zero}if isRenewAck is true."),
            );
        }
    }
    let acquire_mode = match v2 {
        false => ShareAcquireMode::BatchOptimized,
        true => match ShareAcquireMode::from_id(req.share_acquire_mode) {
            Some(mode) => mode,
            None => return refuse(ResponseError::InvalidRequest, "unknown ShareAcquireMode"),
        },
    };
    let requested: Vec<TopicIdPartition> = req
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, p.partition_index)))
        .collect();
    let forgotten: Vec<TopicIdPartition> = req
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, *p)))
        .collect();
    let acks: Vec<PartitionAcks> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| !p.acknowledgement_batches.is_empty())
                .map(move |p| PartitionAcks {
                    topic_id: t.topic_id,
                    partition: p.partition_index,
                    batches: batches(
                        p.acknowledgement_batches
                            .iter()
                            .map(|b| (b.first_offset, b.last_offset, &b.acknowledge_types)),
                    ),
                })
        })
        .collect();
    let session_key = ShareSessionKey {
        group_id: group_id.clone(),
        member_id: member_id.clone(),
    };
    // Only partitions that exist join the session, so a session holds at most the
    // cluster's partitions however many requests name others; the rest are answered
    // UNKNOWN_TOPIC_ID (or UNKNOWN_TOPIC_OR_PARTITION) here.
    let (known, unknown): (Vec<TopicIdPartition>, Vec<TopicIdPartition>) =
        requested.iter().partition(|(topic_id, partition)| {
            broker
                .controller
                .topic_by_id(*topic_id)
                .is_some_and(|t| t.partitions.iter().any(|p| p.partition == *partition))
        });
    let now = crate::coordinator::runtime::now_ms();
    let context = {
        let mut sessions = broker.shares.sessions.lock();
        let context = sessions.fetch_context(
            &session_key,
            req.share_session_epoch,
            &known,
            &forgotten,
            !acks.is_empty(),
            now,
        );
        // The session is this connection's: its closing releases the member's records.
        if context.is_ok() && req.share_session_epoch == INITIAL_EPOCH {
            sessions.bind_connection(&session_key, ctx.session.connection_id);
        }
        context
    };
    let context = match context {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(group = %group_id, member = %member_id,
                epoch = req.share_session_epoch, error = ?e,
                "ShareFetch refused by the member's share session");
            return ShareFetchResponse::default().with_error_code(e.code());
        }
    };

    // Acknowledgements first: what they release may be acquired by this very fetch.
    let settings = broker.groups.share_settings(&group_id);
    let rules = AckRules::for_request(
        ctx.api_version,
        req.is_renew_ack,
        settings.renew_acknowledge_enabled,
    );
    let ack_errors = acknowledge_all(&broker, &ctx, &group_id, &member_id, &acks, rules).await;
    let mut answers: BTreeMap<TopicIdPartition, PartitionData> = BTreeMap::new();
    for tp in unknown {
        let e = match broker.controller.topic_by_id(tp.0) {
            None => ResponseError::UnknownTopicId,
            Some(_) => ResponseError::UnknownTopicOrPartition,
        };
        let data = answer_for(&mut answers, tp);
        *data = std::mem::take(data).with_error_code(e.code());
    }
    for (a, e) in acks.iter().zip(ack_errors) {
        let data = answer_for(&mut answers, (a.topic_id, a.partition));
        if let Some(refusal) = e {
            *data = std::mem::take(data)
                .with_acknowledge_error_code(refusal.error.code())
                .with_acknowledge_error_message(refusal.message.map(str_bytes));
        }
    }

    let lock_ms = i32::try_from(settings.partition.record_lock_duration_ms).unwrap_or(i32::MAX);
    let partitions = match context {
        FetchContext::Final => {
            close_session(&broker, &group_id, &member_id).await;
            BTreeSet::new()
        }
        // A renewing request fetches nothing.
        FetchContext::Session(_) if renew_only => BTreeSet::new(),
        FetchContext::Session(partitions) => partitions,
    };
    // An opening request answers for every partition it named.
    if req.share_session_epoch == INITIAL_EPOCH {
        for tp in &requested {
            answer_for(&mut answers, *tp);
        }
    }

    let mut hints = LeaderHints::default();
    let mut targets = Vec::new();
    let mut target_ids = Vec::new();
    for &(topic_id, partition) in &partitions {
        match share_target(&broker, &ctx, &group_id, topic_id, partition, &settings) {
            Ok(target) => {
                targets.push(target);
                target_ids.push((topic_id, partition));
            }
            Err((e, topic)) => {
                let mut data = std::mem::take(answer_for(&mut answers, (topic_id, partition)))
                    .with_error_code(e.code())
                    .with_error_message(e.message.map(str_bytes));
                if let (ResponseError::NotLeaderOrFollower, Some(topic)) = (e.error, topic) {
                    let (leader, epoch) = hints.current_leader(&broker, &topic, partition);
                    data = data.with_current_leader(
                        LeaderIdAndEpoch::default()
                            .with_leader_id(leader)
                            .with_leader_epoch(epoch),
                    );
                }
                answers.insert((topic_id, partition), data);
            }
        }
    }

    if !targets.is_empty() {
        let max_bytes = usize::try_from(req.max_bytes)
            .unwrap_or(0)
            .min(MAX_RESPONSE_BYTES);
        let params = FetchParams::new(
            -1,
            Duration::from_millis(req.max_wait_ms.clamp(0, MAX_WAIT_MS_CAP) as u64),
            usize::try_from(req.min_bytes).unwrap_or(0).min(max_bytes),
            max_bytes,
            settings.read_committed,
        );
        let max_records = u32::try_from(req.max_records)
            .unwrap_or(0)
            .clamp(1, settings.partition.max_record_locks);
        let read = ShareRead {
            member_id: &member_id,
            params,
            max_records,
            batch_size: u32::try_from(req.batch_size).unwrap_or(0).max(1),
            mode: acquire_mode,
        };
        let fetched = broker
            .shares
            .fetch(&read, &targets, broker.stopping())
            .await;
        for (tp, got) in target_ids.into_iter().zip(fetched) {
            let FetchedShare {
                records,
                acquired,
                error,
            } = got;
            if error.is_none() && acquired.is_empty() && !answers.contains_key(&tp) {
                continue;
            }
            let data = std::mem::take(answer_for(&mut answers, tp));
            let data = match error {
                Some(e) => {
                    let data = data
                        .with_error_code(e.code())
                        .with_error_message(e.message.map(str_bytes));
                    match (e.error, broker.controller.topic_by_id(tp.0)) {
                        (ResponseError::NotLeaderOrFollower, Some(topic)) => {
                            let (leader, epoch) = hints.current_leader(&broker, &topic.name, tp.1);
                            data.with_current_leader(
                                LeaderIdAndEpoch::default()
                                    .with_leader_id(leader)
                                    .with_leader_epoch(epoch),
                            )
                        }
                        _ => data,
                    }
                }
                None => data.with_records(Some(records)).with_acquired_records(
                    acquired
                        .into_iter()
                        .map(|a| {
                            AcquiredRecords::default()
                                .with_first_offset(a.first_offset)
                                .with_last_offset(a.last_offset)
                                .with_delivery_count(a.delivery_count as i16)
                        })
                        .collect(),
                ),
            };
            answers.insert(tp, data);
        }
    }

    let mut topics: Vec<ShareFetchableTopicResponse> = Vec::new();
    for ((topic_id, _), data) in answers {
        match topics.last_mut().filter(|t| t.topic_id == topic_id) {
            Some(t) => t.partitions.push(data),
            None => topics.push(
                ShareFetchableTopicResponse::default()
                    .with_topic_id(topic_id)
                    .with_partitions(vec![data]),
            ),
        }
    }
    let endpoints = hints
        .endpoints()
        .map(|b| {
            NodeEndpoint::default()
                .with_node_id(BrokerId(b.id))
                .with_host(str_bytes(b.host))
                .with_port(b.port)
                .with_rack(b.rack.map(str_bytes))
        })
        .collect();
    ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(lock_ms)
        .with_responses(topics)
        .with_node_endpoints(endpoints)
}

/// The answer being built for a partition (records empty until something is acquired).
fn answer_for(
    answers: &mut BTreeMap<TopicIdPartition, PartitionData>,
    tp: TopicIdPartition,
) -> &mut PartitionData {
    answers.entry(tp).or_insert_with(|| {
        PartitionData::default()
            .with_partition_index(tp.1)
            .with_records(Some(Default::default()))
    })
}

/// A session partition this member may read here (its share-partition loaded by the
/// fetch, which answers UNKNOWN_SERVER_ERROR with Kafka's message for one whose state
/// the group coordinator has not initialized yet, on which clients fetch again); or the
/// error for it (with the topic's name when it has one).
fn share_target(
    broker: &Broker,
    ctx: &RequestContext,
    group_id: &str,
    topic_id: Uuid,
    partition: i32,
    settings: &crate::coordinator::group::settings::ShareGroupSettings,
) -> Result<FetchTarget, (ApiError, Option<String>)> {
    let topic = readable_topic(broker, ctx, topic_id).map_err(|e| (e.into(), None))?;
    let p = broker
        .replicas
        .leader(&TopicPartition::new(&topic, partition), -1)
        .map_err(|e| (e.error.into(), Some(topic.clone())))?;
    let key = SharePartitionKey {
        group_id: group_id.to_string(),
        topic_id,
        partition,
    };
    Ok(FetchTarget {
        key,
        partition: p,
        max_bytes: MAX_RESPONSE_BYTES,
        config: settings.partition,
        reset: settings.auto_offset_reset,
    })
}

/// The checks ShareFetch and ShareAcknowledge make before anything else, in Kafka's
/// order: share groups enabled, READ on the group, group and member ids present. The
/// group and member ids, or the error and why.
pub(super) fn admit_member(
    broker: &Broker,
    ctx: &RequestContext,
    group_id: Option<&str>,
    member_id: Option<&str>,
) -> Result<(String, String), (ResponseError, &'static str)> {
    if !broker.groups.share_groups_enabled() {
        return Err((
            ResponseError::UnsupportedVersion,
            "share groups are not enabled (share.version)",
        ));
    }
    let group_id = group_id.unwrap_or_default().to_string();
    let member_id = member_id.unwrap_or_default().to_string();
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, &group_id) {
        return Err((
            ResponseError::GroupAuthorizationFailed,
            "not authorized to read the group",
        ));
    }
    if group_id.is_empty() || member_id.is_empty() {
        return Err((
            ResponseError::InvalidRequest,
            "group and member ids are required",
        ));
    }
    Ok((group_id, member_id))
}
