//! AlterConfigs: replace a topic's or a group's config overrides with the given set.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};

use super::str_bytes;
use crate::broker::Broker;
use crate::controller::ControllerError;
use crate::router::RequestContext;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const GROUP: i8 = 32;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(req.resources.len());
    for r in req.resources {
        let result = match r.resource_type {
            TOPIC => {
                let wanted: BTreeMap<String, String> = r
                    .configs
                    .iter()
                    .filter_map(|c| {
                        c.value
                            .as_ref()
                            .map(|v| (c.name.to_string(), v.to_string()))
                    })
                    .collect();
                broker
                    .alter_topic_configs(r.resource_name.as_str(), req.validate_only, |configs| {
                        *configs = wanted;
                        Ok(())
                    })
                    .await
            }
            BROKER => Err(static_broker_configs()),
            GROUP => super::group_configs::alter(&broker, &r, req.validate_only).await,
            other => Err(ControllerError::new(
                ResponseError::InvalidRequest,
                format!("resource type {other} is not supported"),
            )),
        };
        let resp = AlterConfigsResourceResponse::default()
            .with_resource_type(r.resource_type)
            .with_resource_name(r.resource_name);
        responses.push(match result {
            Ok(()) => resp.with_error_message(None),
            Err(e) => resp
                .with_error_code(e.code())
                .with_error_message(Some(str_bytes(e.message))),
        });
    }
    AlterConfigsResponse::default().with_responses(responses)
}

/// Broker configs come from server.properties at startup; none can change at runtime yet.
pub fn static_broker_configs() -> ControllerError {
    ControllerError::new(
        ResponseError::InvalidConfig,
        "broker configs are read from server.properties at startup and cannot be changed dynamically",
    )
}
