//! DescribeConfigs: every topic and broker config key Kafka has (and group configs, see
//! `group_configs`; a broker's loggers, see `broker_loggers`), with the value in force,
//! where it came from, its synonyms and (v3+) its type and documentation, built as
//! Kafka's `ConfigHelper` builds them.
//!
//! A broker described by its id gets every key; the cluster default (an empty name) gets
//! only the dynamic defaults that are set. A broker key is read-only unless Kafka lets one
//! of its synonyms change at runtime; topic keys never are.
//!
//! DESCRIBE_CONFIGS on the cluster (brokers), the topic or the group, else Kafka's
//! CLUSTER_, TOPIC_ or GROUP_AUTHORIZATION_FAILED for that resource.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

use super::{broker_loggers, group_configs, str_bytes};
use crate::auth::operations::AclOperation;
use crate::broker::Broker;
use crate::config::broker::BrokerSource;
use crate::config::catalog::{broker_key, dynamic_only_broker_key, ConfigKey, UpdateMode};
use crate::config::defs::Kind;
use crate::config::topic::{self, TopicSource};
use crate::router::RequestContext;

pub const TOPIC: i8 = 2;
pub const BROKER: i8 = 4;
pub const GROUP: i8 = 32;
/// The request and response fields `include_documentation` and `config_type` exist from
/// this version on.
const DOCUMENTATION_VERSION: i16 = 3;

/// What to put in each entry.
struct Detail {
    synonyms: bool,
    documentation: bool,
    types: bool,
}

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let detail = Detail {
        synonyms: req.include_synonyms,
        documentation: req.include_documentation && ctx.api_version >= DOCUMENTATION_VERSION,
        types: ctx.api_version >= DOCUMENTATION_VERSION,
    };
    let results = req
        .resources
        .into_iter()
        .map(|r| {
            let base = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let checked = ctx.authorize_config_resource(
                AclOperation::DescribeConfigs,
                r.resource_type,
                &r.resource_name,
            );
            let configs = match r.resource_type {
                _ if checked.is_err() => Err((checked.unwrap_err(), None)),
                TOPIC => topic_configs(&broker, &r, &detail),
                BROKER => broker_configs(&broker, &r, &detail),
                GROUP => {
                    group_configs::describe(&broker, &r, detail.synonyms, |key| wanted(&r, key))
                        .map_err(|(e, message)| (e, Some(message)))
                }
                broker_loggers::BROKER_LOGGER => {
                    broker_loggers::describe(broker.config().broker_id, &r, |key| wanted(&r, key))
                        .map_err(|(e, message)| (e, Some(message)))
                }
                other => Err((
                    ResponseError::InvalidRequest,
                    Some(format!("Unsupported resource type: {other}")),
                )),
            };
            match configs {
                Ok(configs) => base.with_configs(configs),
                Err((e, message)) => base
                    .with_error_code(e.code())
                    .with_error_message(message.map(str_bytes)),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

type Described = Result<Vec<DescribeConfigsResourceResult>, (ResponseError, Option<String>)>;

fn wanted(r: &DescribeConfigsResource, name: &str) -> bool {
    r.configuration_keys
        .as_ref()
        .is_none_or(|keys| keys.is_empty() || keys.iter().any(|k| k.as_str() == name))
}

fn topic_configs(broker: &Broker, r: &DescribeConfigsResource, detail: &Detail) -> Described {
    let info = broker
        .controller
        .topic(r.resource_name.as_str())
        .ok_or((ResponseError::UnknownTopicOrPartition, None))?;
    let config = broker.config();
    Ok(topic::describe(&config, &info.configs)
        .into_iter()
        .filter(|(key, _, _)| wanted(r, key.name))
        .map(|(key, value, source)| {
            // Kafka's `createTopicConfigEntry`: the topic's own value, then the broker
            // synonyms of its first broker key.
            let mut synonyms = Vec::new();
            if source == TopicSource::DynamicTopic {
                synonyms.push((key.name, value.clone(), TopicSource::DynamicTopic as i8));
            }
            if let Some(primary) = key.synonyms.first().copied().and_then(broker_key) {
                synonyms.extend(
                    config
                        .synonyms_of(primary.name, &primary.synonyms)
                        .into_iter()
                        .map(|(n, v, s)| (n, v, s as i8)),
                );
            }
            let source = synonyms.first().map_or(TopicSource::Default as i8, |s| s.2);
            entry(key, Some(value), source, false, synonyms, detail)
        })
        .collect())
}

fn broker_configs(broker: &Broker, r: &DescribeConfigsResource, detail: &Detail) -> Described {
    let name = r.resource_name.as_str();
    let config = broker.config();
    if name.is_empty() {
        // The cluster default: only what is set dynamically for every broker.
        let defaults = &config.dynamic().default;
        return Ok(defaults
            .iter()
            .filter(|(k, _)| wanted(r, k))
            .filter_map(|(k, v)| {
                let key = broker_key(k)?;
                let synonyms = config
                    .synonyms_of(key.name, &key.synonyms)
                    .into_iter()
                    .filter(|(_, _, s)| *s != BrokerSource::DynamicBroker)
                    .map(|(n, v, s)| (n, v, s as i8))
                    .collect();
                let value = Some(v.clone());
                Some(entry(
                    key,
                    value,
                    BrokerSource::DynamicDefault as i8,
                    !dynamic(key),
                    synonyms,
                    detail,
                ))
            })
            .collect());
    }
    let id: i32 = name.parse().map_err(|_| {
        (
            ResponseError::InvalidRequest,
            Some(format!("Broker id must be an integer, but it is: {name}")),
        )
    })?;
    if id != config.broker_id {
        return Err((
            ResponseError::InvalidRequest,
            Some(format!(
                "Unexpected broker id, expected {} or empty string, but received {name}",
                config.broker_id
            )),
        ));
    }
    let mut described: Vec<_> = config
        .describe()
        .into_iter()
        .filter(|(key, _)| wanted(r, key.name))
        .map(|(key, value)| {
            let synonyms: Vec<_> = config
                .synonyms_of(key.name, &key.synonyms)
                .into_iter()
                .map(|(n, v, s)| (n, v, s as i8))
                .collect();
            let source = synonyms
                .first()
                .map_or(BrokerSource::Default as i8, |s| s.2);
            entry(key, value, source, !dynamic(key), synonyms, detail)
        })
        .collect();
    // Kafka's dynamic-only keys (the replication throttle rates), when set.
    let source = BrokerSource::DynamicBroker as i8;
    for (k, v) in &config.dynamic().broker {
        let Some(key) = dynamic_only_broker_key(k).filter(|_| wanted(r, k)) else {
            continue;
        };
        let synonyms = vec![(key.name, v.clone(), source)];
        described.push(entry(key, Some(v.clone()), source, false, synonyms, detail));
    }
    // Kafka lists a broker's configs by name.
    described.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
    Ok(described)
}

/// Whether Kafka lets `key` (or one of its synonyms) change at runtime.
fn dynamic(key: &ConfigKey) -> bool {
    key.synonyms
        .iter()
        .filter_map(|s| broker_key(s))
        .chain(std::iter::once(key))
        .any(|k| k.mode != UpdateMode::ReadOnly)
}

fn entry(
    key: &ConfigKey,
    value: Option<String>,
    source: i8,
    read_only: bool,
    synonyms: Vec<(&str, String, i8)>,
    detail: &Detail,
) -> DescribeConfigsResourceResult {
    // Passwords are never shown, as in Kafka.
    let sensitive = key.kind == Kind::Password;
    let shown = |v: String| (!sensitive).then(|| str_bytes(v));
    let mut e = DescribeConfigsResourceResult::default()
        .with_name(str_bytes(key.name))
        .with_value(value.and_then(shown))
        .with_config_source(source)
        .with_read_only(read_only)
        .with_is_sensitive(sensitive);
    if detail.synonyms {
        e = e.with_synonyms(
            synonyms
                .into_iter()
                .map(|(name, value, source)| {
                    DescribeConfigsSynonym::default()
                        .with_name(str_bytes(name))
                        .with_value(shown(value))
                        .with_source(source)
                })
                .collect(),
        );
    }
    if detail.types {
        e = e.with_config_type(key.kind.describe_type());
    }
    if detail.documentation {
        e = e.with_documentation(Some(str_bytes(key.documentation.clone())));
    }
    e
}
