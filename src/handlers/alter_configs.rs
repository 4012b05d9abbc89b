//! AlterConfigs (the legacy API): replaces a topic's config overrides, or a broker's
//! dynamic configs (its id, or an empty name for the cluster default), with the given
//! set. The request checks every Kafka broker makes first (`ConfigAdminManager.preprocess`)
//! are shared with IncrementalAlterConfigs.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use super::broker_loggers::BROKER_LOGGER;
use super::describe_configs::{BROKER, GROUP, TOPIC};
use super::str_bytes;
use crate::auth::operations::AclOperation;
use crate::broker::Broker;
use crate::controller::ControllerError;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let repeated = repeated_resources(
        req.resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.as_str())),
    );
    let mut responses = Vec::with_capacity(req.resources.len());
    for r in &req.resources {
        let checked = ctx.authorize_config_resource(
            AclOperation::AlterConfigs,
            r.resource_type,
            &r.resource_name,
        );
        if let Err(e) = checked {
            let denied = Err(ControllerError::new(
                e,
                "not authorized to alter the resource's configs",
            ));
            responses.push(response(r.resource_type, &r.resource_name, denied));
            continue;
        }
        if r.resource_type == GROUP && !repeated.contains(&(GROUP, r.resource_name.to_string())) {
            let result = super::group_configs::alter(&broker, r, req.validate_only).await;
            responses.push(response(r.resource_type, &r.resource_name, result));
            continue;
        }
        let names: Vec<&str> = r.configs.iter().map(|c| c.name.as_str()).collect();
        let null_values: Vec<&str> = r
            .configs
            .iter()
            .filter(|c| c.value.is_none())
            .map(|c| c.name.as_str())
            .collect();
        let wanted: BTreeMap<String, String> = r
            .configs
            .iter()
            .filter_map(|c| {
                c.value
                    .as_ref()
                    .map(|v| (c.name.to_string(), v.to_string()))
            })
            .collect();
        let name = r.resource_name.as_str();
        let result = match preprocess(
            &repeated,
            r.resource_type,
            name,
            &names,
            &null_values,
            false,
        ) {
            Err(e) => Err(e),
            Ok(()) => match r.resource_type {
                TOPIC => {
                    broker
                        .alter_topic_configs(name, req.validate_only, |configs| {
                            *configs = wanted;
                            Ok(())
                        })
                        .await
                }
                _ => {
                    broker
                        .alter_broker_configs(name, req.validate_only, |configs| {
                            *configs = wanted;
                            Ok(())
                        })
                        .await
                }
            },
        };
        responses.push(response(r.resource_type, &r.resource_name, result));
    }
    AlterConfigsResponse::default().with_responses(responses)
}

fn response(
    resource_type: i8,
    name: &StrBytes,
    result: Result<(), ControllerError>,
) -> AlterConfigsResourceResponse {
    let resp = AlterConfigsResourceResponse::default()
        .with_resource_type(resource_type)
        .with_resource_name(name.clone());
    match result {
        Ok(()) => resp.with_error_message(None),
        Err(e) => resp
            .with_error_code(e.code())
            .with_error_message(Some(str_bytes(e.message))),
    }
}

/// The resources named more than once in a request: each of them is refused.
pub(super) fn repeated_resources<'a>(
    resources: impl Iterator<Item = (i8, &'a str)>,
) -> HashSet<(i8, String)> {
    let mut seen = HashSet::new();
    let mut repeated = HashSet::new();
    for (kind, name) in resources {
        if !seen.insert((kind, name.to_string())) {
            repeated.insert((kind, name.to_string()));
        }
    }
    repeated
}

/// Kafka's `ConfigAdminManager.preprocess`: one mention per resource, no key twice, no
/// null value where one is needed, a resource type it handles (BROKER_LOGGER only when
/// `loggers`: the legacy API does not take it).
pub(super) fn preprocess(
    repeated: &HashSet<(i8, String)>,
    resource_type: i8,
    name: &str,
    config_names: &[&str],
    null_values: &[&str],
    loggers: bool,
) -> Result<(), ControllerError> {
    let invalid = |m: String| Err(ControllerError::new(ResponseError::InvalidRequest, m));
    if repeated.contains(&(resource_type, name.to_string())) {
        return invalid("Each resource must appear at most once.".into());
    }
    let mut seen = HashSet::new();
    if !config_names.iter().all(|n| seen.insert(*n)) {
        return invalid("Error due to duplicate config keys".into());
    }
    if !null_values.is_empty() {
        return invalid(format!(
            "Null value not supported for : {}",
            null_values.join(", ")
        ));
    }
    match resource_type {
        TOPIC | BROKER | GROUP => Ok(()),
        BROKER_LOGGER if loggers => Ok(()),
        other => invalid(format!("Unknown resource type {other}")),
    }
}
