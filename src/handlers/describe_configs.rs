//! DescribeConfigs: topic, broker and group configs with their values in force and
//! sources.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

use super::{group_configs, str_bytes};
use crate::broker::Broker;
use crate::config::broker::BrokerSource;
use crate::config::defs::Kind;
use crate::config::topic::{self, TopicSource};
use crate::router::RequestContext;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const GROUP: i8 = 32;
const SOURCE_DYNAMIC_BROKER: i8 = 2;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let results = req
        .resources
        .into_iter()
        .map(|r| {
            let base = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let configs = match r.resource_type {
                TOPIC => topic_configs(&broker, &r, req.include_synonyms),
                BROKER => broker_configs(&broker, &r, req.include_synonyms),
                GROUP => group_configs::describe(&broker, &r, req.include_synonyms, |key| {
                    wanted(&r, key)
                }),
                _ => Err((
                    ResponseError::InvalidRequest,
                    format!("resource type {} is not supported", r.resource_type),
                )),
            };
            match configs {
                Ok(configs) => base.with_configs(configs),
                Err((e, message)) => base
                    .with_error_code(e.code())
                    .with_error_message(Some(str_bytes(message))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

type Described = Result<Vec<DescribeConfigsResourceResult>, (ResponseError, String)>;

fn wanted(r: &DescribeConfigsResource, name: &str) -> bool {
    r.configuration_keys
        .as_ref()
        .is_none_or(|keys| keys.is_empty() || keys.iter().any(|k| k.as_str() == name))
}

fn topic_configs(broker: &Broker, r: &DescribeConfigsResource, synonyms: bool) -> Described {
    let info = broker
        .controller
        .topic(r.resource_name.as_str())
        .ok_or_else(|| {
            (
                ResponseError::UnknownTopicOrPartition,
                format!("Topic {} does not exist", r.resource_name.as_str()),
            )
        })?;
    let config = broker.config();
    Ok(topic::describe(&config, &info.configs)
        .into_iter()
        .filter(|(key, _, _)| wanted(r, key.name))
        .map(|(key, value, source)| {
            let mut entry = DescribeConfigsResourceResult::default()
                .with_name(str_bytes(key.name))
                .with_value(Some(str_bytes(value.clone())))
                .with_config_source(source as i8)
                .with_config_type(key.kind.describe_type());
            if synonyms {
                let mut list = Vec::new();
                if source == TopicSource::DynamicTopic {
                    list.push(synonym(key.name, &value, TopicSource::DynamicTopic as i8));
                }
                if let Some(b) = key.broker_synonym {
                    if let Some((v, BrokerSource::Static)) = config.topic_fallback(b) {
                        list.push(synonym(b, &v, SOURCE_STATIC_BROKER));
                    }
                    let default = crate::config::defs::broker_key(b)
                        .and_then(|k| k.default)
                        .unwrap_or(key.default);
                    list.push(synonym(b, default, SOURCE_DEFAULT));
                }
                entry = entry.with_synonyms(list);
            }
            entry
        })
        .collect())
}

fn broker_configs(broker: &Broker, r: &DescribeConfigsResource, synonyms: bool) -> Described {
    let name = r.resource_name.as_str();
    let config = broker.config();
    if !name.is_empty() && name != config.broker_id.to_string() {
        return Err((
            ResponseError::InvalidRequest,
            format!(
                "Unexpected broker id, expected {} but received {name}",
                config.broker_id
            ),
        ));
    }
    Ok(config
        .describe()
        .into_iter()
        .filter(|(key, _, _, _)| wanted(r, key))
        .map(|(key, value, source, kind)| {
            let sensitive = kind == Kind::Password;
            let source_code = match source {
                BrokerSource::Dynamic => SOURCE_DYNAMIC_BROKER,
                BrokerSource::Static => SOURCE_STATIC_BROKER,
                BrokerSource::Default => SOURCE_DEFAULT,
            };
            let value = if sensitive {
                None
            } else {
                value.map(str_bytes)
            };
            let mut entry = DescribeConfigsResourceResult::default()
                .with_name(str_bytes(key))
                .with_value(value.clone())
                .with_config_source(source_code)
                .with_read_only(true)
                .with_is_sensitive(sensitive)
                .with_config_type(kind.describe_type());
            if synonyms {
                entry = entry.with_synonyms(vec![DescribeConfigsSynonym::default()
                    .with_name(str_bytes(key))
                    .with_value(value)
                    .with_source(source_code)]);
            }
            entry
        })
        .collect())
}

fn synonym(name: &str, value: &str, source: i8) -> DescribeConfigsSynonym {
    DescribeConfigsSynonym::default()
        .with_name(str_bytes(name))
        .with_value(Some(str_bytes(value)))
        .with_source(source)
}
