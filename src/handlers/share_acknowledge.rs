//! ShareAcknowledge (KIP-932, v1–2): a share group member acknowledges records it acquired
//! through ShareFetch (ACCEPT, RELEASE, REJECT, GAP for offsets with no record, and from
//! v2 RENEW, which only extends the acquisition lock (KIP-1222)), under
//! its share session's epoch (-1: its last request, which closes the session and
//! releases what it still holds). Kafka's checks: share groups enabled (`share.version`),
//! else UNSUPPORTED_VERSION; READ on the group (GROUP_AUTHORIZATION_FAILED). Then per
//! partition, in Kafka's order, each refusal changing nothing and answered for that
//! partition alone: UNKNOWN_TOPIC_ID; INVALID_REQUEST for a malformed acknowledgement
//! (ranges out of order or overlapping, types not matching the offsets, types past the
//! request's version, a RENEW in a request without `IsRenewAck`, a partition named
//! twice); TOPIC_AUTHORIZATION_FAILED; this broker's leadership; then the
//! share-partition's INVALID_RECORD_STATE for records the member does not hold, outside
//! the in-flight window, or RENEW in a group whose `share.renew.acknowledge.enable` is
//! false (Kafka 4.4's check, with its message). v2's response carries the acquisition
//! lock's duration, to which a RENEW extended it.
//!
//! The helpers here serve ShareFetch's piggybacked acknowledgements too.

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::share_acknowledge_response::{
    LeaderIdAndEpoch, NodeEndpoint, PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::{BrokerId, ShareAcknowledgeRequest, ShareAcknowledgeResponse};
use uuid::Uuid;

use super::leader_hint::LeaderHints;
use super::str_bytes;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::coordinator::share::SharePartitionKey;
use crate::log::TopicPartition;
use crate::replica::share::session::ShareSessionKey;
use crate::replica::share::{
    validate_acknowledgement_batches, AcknowledgeType, AcknowledgementBatch,
};
use crate::router::RequestContext;

/// Which acknowledge types a request may carry: v1 knows GAP to REJECT (0–3), v2 adds
/// RENEW (4), which only a request with `IsRenewAck` may carry (Kafka's
/// `validateAcknowledgementBatches`: INVALID_REQUEST otherwise), and which the group's
/// `share.renew.acknowledge.enable` must allow (INVALID_RECORD_STATE otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckRules {
    pub max_type: i8,
    /// The request's `IsRenewAck` (false below v2, where the field does not exist).
    pub is_renew_ack: bool,
    pub group_renew_enabled: bool,
}

impl AckRules {
    /// The rules for a ShareFetch or ShareAcknowledge of `version` with `IsRenewAck`
    /// `is_renew_ack`, in a group whose renew setting is `group_renew_enabled`.
    pub fn for_request(version: i16, is_renew_ack: bool, group_renew_enabled: bool) -> AckRules {
        match version {
            ..=1 => AckRules {
                max_type: AcknowledgeType::Reject.id(),
                is_renew_ack: false,
                group_renew_enabled,
            },
            _ => AckRules {
                max_type: AcknowledgeType::Renew.id(),
                is_renew_ack,
                group_renew_enabled,
            },
        }
    }
}

/// Why one partition's acknowledgements were refused: Kafka's code, and its message
/// where Kafka sends one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckRefusal {
    pub error: ResponseError,
    pub message: Option<&'static str>,
}

impl From<ResponseError> for AckRefusal {
    fn from(error: ResponseError) -> Self {
        AckRefusal {
            error,
            message: None,
        }
    }
}

/// Kafka 4.4's share-partition refusal of a RENEW where the group turned it off.
const RENEW_DISABLED: &str = "Renewing acquisition locks is not enabled for the group.";

/// One partition's acknowledgements, as a request carries them.
pub struct PartitionAcks {
    pub topic_id: Uuid,
    pub partition: i32,
    pub batches: Vec<AcknowledgementBatch>,
}

/// The topic `topic_id` names, if the member may read it: UNKNOWN_TOPIC_ID, or
/// TOPIC_AUTHORIZATION_FAILED.
pub fn readable_topic(
    broker: &Broker,
    ctx: &RequestContext,
    topic_id: Uuid,
) -> Result<String, ResponseError> {
    let topic = broker
        .controller
        .topic_by_id(topic_id)
        .ok_or(ResponseError::UnknownTopicId)?;
    match ctx.authorize(AclOperation::Read, ResourceType::Topic, &topic.name) {
        true => Ok(topic.name.clone()),
        false => Err(ResponseError::TopicAuthorizationFailed),
    }
}

/// Applies each partition's acknowledgements; the error of each (None: applied), in
/// order. A partition named twice in one request is refused the second time.
pub async fn acknowledge_all(
    broker: &Broker,
    ctx: &RequestContext,
    group_id: &str,
    member_id: &str,
    acks: &[PartitionAcks],
    rules: AckRules,
) -> Vec<Option<AckRefusal>> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(acks.len());
    for a in acks {
        let error = if !seen.insert((a.topic_id, a.partition)) {
            Some(ResponseError::InvalidRequest.into())
        } else {
            acknowledge_one(broker, ctx, group_id, member_id, a, rules)
                .await
                .err()
        };
        out.push(error);
    }
    out
}

async fn acknowledge_one(
    broker: &Broker,
    ctx: &RequestContext,
    group_id: &str,
    member_id: &str,
    a: &PartitionAcks,
    rules: AckRules,
) -> Result<(), AckRefusal> {
    // Kafka's order (KafkaApis.handleAcknowledgements): the topic id, the batches'
    // form, READ on the topic, then the partition's leader and its share-partition.
    if broker.controller.topic_by_id(a.topic_id).is_none() {
        return Err(ResponseError::UnknownTopicId.into());
    }
    validate_acknowledgement_batches(&a.batches, rules.max_type, rules.is_renew_ack).map_err(
        |e| {
            tracing::debug!(group = %group_id, member = %member_id, topic_id = %a.topic_id,
            partition = a.partition, error = %e, "acknowledgement refused");
            e.response_error()
        },
    )?;
    let topic = readable_topic(broker, ctx, a.topic_id)?;
    broker
        .replicas
        .leader(&TopicPartition::new(&topic, a.partition), -1)
        .map_err(|e| e.error)?;
    let renews = a
        .batches
        .iter()
        .any(|b| b.acknowledge_types.contains(&AcknowledgeType::Renew.id()));
    if renews && !rules.group_renew_enabled {
        tracing::debug!(group = %group_id, member = %member_id, "RENEW refused: the group's share.renew.acknowledge.enable is false");
        return Err(AckRefusal {
            error: ResponseError::InvalidRecordState,
            message: Some(RENEW_DISABLED),
        });
    }
    let key = SharePartitionKey {
        group_id: group_id.to_string(),
        topic_id: a.topic_id,
        partition: a.partition,
    };
    broker
        .shares
        .acknowledge(&key, member_id, &a.batches)
        .await
        .inspect_err(|e| {
            tracing::debug!(group = %group_id, member = %member_id, topic = %topic,
                partition = a.partition, error = ?e, "acknowledgement refused");
        })
        .map_err(AckRefusal::from)
}

/// A member's share session ended (its final request): it is closed and the records
/// the member still holds in its share-partitions are released.
pub async fn close_session(broker: &Broker, group_id: &str, member_id: &str) {
    let key = ShareSessionKey {
        group_id: group_id.to_string(),
        member_id: member_id.to_string(),
    };
    broker.shares.close_session(&key).await;
}

/// A request's acknowledgement batches, as the share-partition takes them.
pub fn batches<'a>(
    from: impl Iterator<Item = (i64, i64, &'a Vec<i8>)>,
) -> Vec<AcknowledgementBatch> {
    from.map(|(first_offset, last_offset, types)| AcknowledgementBatch {
        first_offset,
        last_offset,
        acknowledge_types: types.clone(),
    })
    .collect()
}

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: ShareAcknowledgeRequest,
) -> ShareAcknowledgeResponse {
    // Kafka answers a refused request with its error code alone (its
    // `getErrorResponse` sets no message); why is logged, as Kafka logs it.
    let refuse = |e: ResponseError, why: &str| {
        tracing::debug!(error = ?e, why, "ShareAcknowledge refused");
        ShareAcknowledgeResponse::default().with_error_code(e.code())
    };
    let (group_id, member_id) = match super::share_fetch::admit_member(
        &broker,
        &ctx,
        req.group_id.as_deref().map(|g| g.as_str()),
        req.member_id.as_deref(),
    ) {
        Ok(ids) => ids,
        Err((e, why)) => return refuse(e, why),
    };
    let session_key = ShareSessionKey {
        group_id: group_id.clone(),
        member_id: member_id.clone(),
    };
    let now = crate::coordinator::runtime::now_ms();
    let step = broker.shares.sessions.lock().acknowledge_update(
        &session_key,
        req.share_session_epoch,
        now,
    );
    if let Err(e) = step {
        tracing::debug!(group = %group_id, member = %member_id,
            epoch = req.share_session_epoch, error = ?e,
            "ShareAcknowledge refused by the member's share session");
        return ShareAcknowledgeResponse::default().with_error_code(e.code());
    }
    let acks: Vec<PartitionAcks> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| PartitionAcks {
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
    let settings = broker.groups.share_settings(&group_id);
    let rules = AckRules::for_request(
        ctx.api_version,
        req.is_renew_ack,
        settings.renew_acknowledge_enabled,
    );
    let errors = acknowledge_all(&broker, &ctx, &group_id, &member_id, &acks, rules).await;
    if req.share_session_epoch == crate::replica::share::session::FINAL_EPOCH {
        close_session(&broker, &group_id, &member_id).await;
    }
    let mut hints = LeaderHints::default();
    let mut topics: Vec<ShareAcknowledgeTopicResponse> = Vec::new();
    for (a, error) in acks.iter().zip(errors) {
        let mut data = PartitionData::default().with_partition_index(a.partition);
        if let Some(AckRefusal { error: e, message }) = error {
            data = data
                .with_error_code(e.code())
                .with_error_message(message.map(str_bytes));
            if e == ResponseError::NotLeaderOrFollower {
                if let Some(t) = broker.controller.topic_by_id(a.topic_id) {
                    let (leader, epoch) = hints.current_leader(&broker, &t.name, a.partition);
                    data = data.with_current_leader(
                        LeaderIdAndEpoch::default()
                            .with_leader_id(leader)
                            .with_leader_epoch(epoch),
                    );
                }
            }
        }
        match topics.iter_mut().find(|t| t.topic_id == a.topic_id) {
            Some(t) => t.partitions.push(data),
            None => topics.push(
                ShareAcknowledgeTopicResponse::default()
                    .with_topic_id(a.topic_id)
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
    let lock_ms = i32::try_from(settings.partition.record_lock_duration_ms).unwrap_or(i32::MAX);
    ShareAcknowledgeResponse::default()
        .with_acquisition_lock_timeout_ms(lock_ms)
        .with_responses(topics)
        .with_node_endpoints(endpoints)
}
