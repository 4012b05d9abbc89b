//! IncrementalAlterConfigs: set, delete, append to or subtract from topic configs; set
//! or delete group configs.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

use super::str_bytes;
use crate::broker::Broker;
use crate::config::defs::{topic_key, Kind};
use crate::controller::ControllerError;
use crate::router::RequestContext;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const GROUP: i8 = 32;
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(req.resources.len());
    for r in req.resources {
        let result = alter(&broker, &r, req.validate_only).await;
        let resp = AlterConfigsResourceResponse::default()
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name.clone());
        responses.push(match result {
            Ok(()) => resp.with_error_message(None),
            Err(e) => resp
                .with_error_code(e.code())
                .with_error_message(Some(str_bytes(e.message))),
        });
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

async fn alter(
    broker: &Broker,
    r: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), ControllerError> {
    match r.resource_type {
        TOPIC => {}
        BROKER => return Err(super::alter_configs::static_broker_configs()),
        GROUP => return super::group_configs::alter_incremental(broker, r, validate_only).await,
        other => {
            return Err(ControllerError::new(
                ResponseError::InvalidRequest,
                format!("resource type {other} is not supported"),
            ))
        }
    }
    broker
        .alter_topic_configs(r.resource_name.as_str(), validate_only, |configs| {
            for c in &r.configs {
                let name = c.name.to_string();
                let value = c.value.as_ref().map(|v| v.to_string());
                let is_list = topic_key(&name).is_some_and(|k| k.kind == Kind::List);
                match (c.config_operation, value) {
                    (SET, Some(v)) => {
                        configs.insert(name, v);
                    }
                    (DELETE, _) => {
                        configs.remove(&name);
                    }
                    (APPEND | SUBTRACT, Some(v)) if is_list => {
                        let mut items: Vec<String> = configs
                            .get(&name)
                            .map(|cur| {
                                cur.split(',')
                                    .map(str::trim)
                                    .filter(|s| !s.is_empty())
                                    .map(String::from)
                                    .collect()
                            })
                            .unwrap_or_default();
                        for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                            if c.config_operation == APPEND {
                                if !items.iter().any(|i| i == item) {
                                    items.push(item.to_string());
                                }
                            } else {
                                items.retain(|i| i != item);
                            }
                        }
                        configs.insert(name, items.join(","));
                    }
                    (op, _) => {
                        return Err(ControllerError::new(
                            ResponseError::InvalidConfig,
                            format!("operation {op} is not valid for {name}"),
                        ))
                    }
                }
            }
            Ok(())
        })
        .await
}
