//! IncrementalAlterConfigs: sets, deletes, appends to or subtracts from a topic's config
//! overrides or a broker's dynamic configs (its id, or an empty name for the cluster
//! default), as Kafka's controller applies the operations; sets or unsets a broker's
//! logger levels (`broker_loggers`).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

use super::alter_configs::{preprocess, repeated_resources};
use super::broker_loggers::{self, BROKER_LOGGER};
use super::describe_configs::{GROUP, TOPIC};
use super::str_bytes;
use crate::auth::operations::AclOperation;
use crate::broker::Broker;
use crate::config::catalog::{broker_key, topic_key};
use crate::config::defs::Kind;
use crate::controller::ControllerError;
use crate::router::RequestContext;

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let repeated = repeated_resources(
        req.resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str())),
    );
    let mut responses = Vec::with_capacity(req.resources.len());
    for r in &req.resources {
        let names: Vec<&str> = r.configs.iter().map(|c| c.name.as_str()).collect();
        let null_values: Vec<&str> = r
            .configs
            .iter()
            .filter(|c| c.config_operation != DELETE && c.value.is_none())
            .map(|c| c.name.as_str())
            .collect();
        let name = r.resource_name.as_str();
        let checked =
            ctx.authorize_config_resource(AclOperation::AlterConfigs, r.resource_type, name);
        let result = match preprocess(&repeated, r.resource_type, name, &names, &null_values, true)
        {
            _ if checked.is_err() => Err(ControllerError::new(
                checked.unwrap_err(),
                "not authorized to alter the resource's configs",
            )),
            Err(e) => Err(e),
            Ok(()) if r.resource_type == BROKER_LOGGER => {
                let broker_id = broker.config().broker_id;
                broker_loggers::alter(&ctx, broker_id, r, req.validate_only)
            }
            Ok(()) if r.resource_type == GROUP => {
                super::group_configs::alter_incremental(&broker, r, req.validate_only).await
            }
            Ok(()) if r.resource_type == TOPIC => {
                broker
                    .alter_topic_configs(name, req.validate_only, |c| apply(r, c, true))
                    .await
            }
            Ok(()) => {
                broker
                    .alter_broker_configs(name, req.validate_only, |c| apply(r, c, false))
                    .await
            }
        };
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

/// Applies the resource's operations to `configs` (Kafka's
/// `ConfigurationControlManager.incrementalAlterConfigResource`; a broker's are refused
/// earlier, in `ConfigAdminManager.prepareIncrementalConfigs`, with their own messages).
fn apply(
    r: &AlterConfigsResource,
    configs: &mut BTreeMap<String, String>,
    topic: bool,
) -> Result<(), ControllerError> {
    for c in &r.configs {
        let name = c.name.to_string();
        let value = c.value.as_ref().map(|v| v.to_string());
        let key = match topic {
            true => topic_key(&name),
            false => broker_key(&name),
        };
        let is_list = key.is_some_and(|k| k.kind == Kind::List);
        match (c.config_operation, value) {
            (SET, Some(v)) => {
                configs.insert(name, v);
            }
            (DELETE, _) => {
                configs.remove(&name);
            }
            (op @ (APPEND | SUBTRACT), Some(v)) => {
                if !is_list {
                    let op_name = if op == APPEND { "APPEND" } else { "SUBTRACT" };
                    return Err(match topic {
                        true => ControllerError::new(
                            ResponseError::InvalidConfig,
                            format!("Can't {op_name} to key {name} because its type is not LIST."),
                        ),
                        false => ControllerError::new(
                            ResponseError::InvalidRequest,
                            format!(
                                "Config value {} is not allowed for config key: {name}",
                                op_name.to_lowercase()
                            ),
                        ),
                    });
                }
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
                for item in v.split(',') {
                    if op == APPEND {
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
                    ResponseError::InvalidRequest,
                    format!("Unknown operations type {op}"),
                ))
            }
        }
    }
    Ok(())
}
