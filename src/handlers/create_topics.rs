//! CreateTopics: validate names, counts and configs, then create through the controller.
//! Kafka's checks: CREATE on the cluster, or else on each topic (TOPIC_AUTHORIZATION_FAILED);
//! a created topic's configs are answered only with DESCRIBE_CONFIGS on it (else its
//! `topic_config_error_code` says TOPIC_AUTHORIZATION_FAILED).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};

use super::str_bytes;
use crate::auth::authorizer::CLUSTER_NAME;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::broker::Broker;
use crate::config::topic;
use crate::controller::{ControllerError, NewTopic, TopicInfo};
use crate::router::RequestContext;

/// From v6 a controller mutation quota refuses topics once exhausted (KIP-599).
const STRICT_QUOTA_SINCE: i16 = 6;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let mut seen = HashSet::new();
    let duplicates: HashSet<String> = req
        .topics
        .iter()
        .map(|t| t.name.0.to_string())
        .filter(|n| !seen.insert(n.clone()))
        .collect();
    // The partitions of the whole request are bounded, not each topic's alone (3 topics
    // of 4,000 made 12,000 partitions at once); above the bound nothing is created.
    let default_partitions = broker.config().log.num_partitions;
    let partitions = |t: &CreatableTopic| {
        let n = match t.num_partitions {
            -1 => default_partitions,
            n => n,
        };
        n.max(t.assignments.len() as i32)
    };
    let too_many = crate::broker::check_request_partitions(
        req.topics
            .iter()
            .filter(|t| !duplicates.contains(t.name.0.as_str()))
            .map(partitions),
    )
    .err();
    // Each topic's partitions are counted against the client's controller mutation
    // quota in request order, before any is created (Kafka counts them as it creates).
    let mut quota = broker.mutation_quota(&ctx, STRICT_QUOTA_SINCE);
    let admitted: Vec<bool> = req
        .topics
        .iter()
        .map(|t| {
            req.validate_only
                || too_many.is_some()
                || duplicates.contains(t.name.0.as_str())
                || quota.record(partitions(t) as f64).is_ok()
        })
        .collect();
    // Every topic is submitted before any is awaited, so the controller plans them in one
    // drain and writes them with one fsync, not one each in turn.
    let cluster_create =
        ctx.authorize_quietly(AclOperation::Create, ResourceType::Cluster, CLUSTER_NAME);
    let creations = req.topics.into_iter().zip(admitted).map(|(t, admitted)| {
        let broker = &broker;
        let duplicate = duplicates.contains(t.name.0.as_str());
        let too_many = too_many.clone();
        let allowed = duplicate
            || cluster_create
            || ctx.authorize(AclOperation::Create, ResourceType::Topic, &t.name);
        let describe_configs =
            ctx.authorize_quietly(AclOperation::DescribeConfigs, ResourceType::Topic, &t.name);
        async move {
            let name = t.name.clone();
            let result = if !allowed {
                Err(ControllerError::new(
                    ResponseError::TopicAuthorizationFailed,
                    "Authorization failed.",
                ))
            } else if let Some(e) = too_many {
                Err(e)
            } else if duplicate {
                Err(ControllerError::new(
                    ResponseError::InvalidRequest,
                    "Duplicate topic in request.",
                ))
            } else if !admitted {
                Err(crate::quota::throttled())
            } else {
                create(broker, t, req.validate_only).await
            };
            match result {
                Ok(info) if describe_configs => success(broker, info),
                Ok(info) => success(broker, info)
                    .with_configs(Some(Vec::new()))
                    .with_topic_config_error_code(ResponseError::TopicAuthorizationFailed.code()),
                Err(e) => CreatableTopicResult::default()
                    .with_name(name)
                    .with_error_code(e.code())
                    .with_error_message(Some(str_bytes(e.message)))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1),
            }
        }
    });
    let results = futures::future::join_all(creations).await;
    CreateTopicsResponse::default()
        .with_topics(results)
        .with_throttle_time_ms(quota.throttle_time_ms())
}

async fn create(
    broker: &Broker,
    t: CreatableTopic,
    validate_only: bool,
) -> Result<Arc<TopicInfo>, ControllerError> {
    let configs: BTreeMap<String, String> = t
        .configs
        .into_iter()
        .filter_map(|c| c.value.map(|v| (c.name.to_string(), v.to_string())))
        .collect();
    topic::validate(&configs).map_err(|m| ControllerError::new(ResponseError::InvalidConfig, m))?;
    let new = NewTopic {
        name: t.name.0.to_string(),
        num_partitions: t.num_partitions,
        replication_factor: t.replication_factor,
        assignments: t
            .assignments
            .into_iter()
            .map(|a| {
                (
                    a.partition_index,
                    a.broker_ids.into_iter().map(|b| b.0).collect(),
                )
            })
            .collect(),
        configs,
    };
    let created = broker.create_topic(new, validate_only).await?;
    if !validate_only {
        tracing::info!(topic = %created.name, partitions = created.partitions.len(), "created topic");
    }
    Ok(created)
}

fn success(broker: &Broker, info: Arc<TopicInfo>) -> CreatableTopicResult {
    let configs = topic::describe(&broker.config(), &info.configs)
        .into_iter()
        .map(|(key, value, source)| {
            CreatableTopicConfigs::default()
                .with_name(str_bytes(key.name))
                .with_value(Some(str_bytes(value)))
                .with_config_source(source as i8)
        })
        .collect();
    CreatableTopicResult::default()
        .with_name(super::topic_name(&info.name))
        .with_topic_id(info.topic_id)
        .with_num_partitions(info.partitions.len() as i32)
        .with_replication_factor(
            info.partitions
                .first()
                .map_or(1, |p| p.assignment.replicas.len() as i16),
        )
        .with_configs(Some(configs))
}
