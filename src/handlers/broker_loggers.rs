//! The BROKER_LOGGER config resource (type 8) for DescribeConfigs and
//! IncrementalAlterConfigs, with Kafka's answers (`ConfigHelper` and
//! `RuntimeLoggerManager`): a broker's loggers and their levels, changed at runtime on
//! that broker alone (see `logging`). Legacy AlterConfigs does not take the resource, as
//! in Kafka.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResourceResult;
use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;

use super::str_bytes;
use crate::auth::authorizer::CLUSTER_NAME;
use crate::auth::operations::{AclOperation, ResourceType};
use crate::controller::ControllerError;
use crate::logging::{self, names, Level};
use crate::router::RequestContext;

pub const BROKER_LOGGER: i8 = 8;
/// `ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG`.
const DYNAMIC_BROKER_LOGGER_CONFIG: i8 = 6;

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// Every logger of broker `broker_id` with its level, filtered by the request's keys.
pub fn describe(
    broker_id: i32,
    r: &DescribeConfigsResource,
    wanted: impl Fn(&str) -> bool,
) -> Result<Vec<DescribeConfigsResourceResult>, (ResponseError, String)> {
    let name = r.resource_name.as_str();
    let invalid = |m: String| Err((ResponseError::InvalidRequest, m));
    if name.is_empty() {
        return invalid("Broker id must not be empty".into());
    }
    match name.parse::<i32>() {
        Err(_) => return invalid(format!("Broker id must be an integer, but it is: {name}")),
        Ok(id) if id != broker_id => {
            return invalid(format!(
                "Unexpected broker id, expected {broker_id} but received {name}"
            ))
        }
        Ok(_) => {}
    }
    Ok(logging::loggers()
        .describe()
        .into_iter()
        .filter(|(logger, _)| wanted(logger))
        .map(|(logger, level)| {
            DescribeConfigsResourceResult::default()
                .with_name(str_bytes(logger))
                .with_value(Some(str_bytes(level)))
                .with_config_source(DYNAMIC_BROKER_LOGGER_CONFIG)
                .with_read_only(false)
                .with_is_sensitive(false)
        })
        .collect())
}

/// Kafka's `RuntimeLoggerManager.applyChangesForResource`: ALTER_CONFIGS on the cluster,
/// this broker's id, every operation checked before any is applied.
pub fn alter(
    ctx: &RequestContext,
    broker_id: i32,
    r: &AlterConfigsResource,
    validate_only: bool,
) -> Result<(), ControllerError> {
    if !ctx.authorize(
        AclOperation::AlterConfigs,
        ResourceType::Cluster,
        CLUSTER_NAME,
    ) {
        return Err(ControllerError::new(
            ResponseError::ClusterAuthorizationFailed,
            "Cluster authorization failed.",
        ));
    }
    let name = r.resource_name.as_str();
    let invalid = |m: String| ControllerError::new(ResponseError::InvalidRequest, m);
    let id: i32 = name
        .parse()
        .map_err(|_| invalid(format!("Node id must be an integer, but it is: {name}")))?;
    if id != broker_id {
        return Err(invalid(format!(
            "Unexpected node id. Expected {broker_id}, but received {name}"
        )));
    }
    let loggers = logging::loggers();
    let mut changes = Vec::with_capacity(r.configs.len());
    for c in &r.configs {
        let logger = c.name.as_str();
        let exists = || match loggers.exists(logger) {
            true => Ok(()),
            false => Err(ControllerError::new(
                ResponseError::InvalidConfig,
                format!("Logger {logger} does not exist!"),
            )),
        };
        match c.config_operation {
            SET => {
                exists()?;
                let value = c.value.as_deref().unwrap_or("");
                let level = Level::from_kafka(value).ok_or_else(|| {
                    ControllerError::new(
                        ResponseError::InvalidConfig,
                        format!(
                            "Cannot set the log level of {logger} to {value} as it is not a supported log level. Valid log levels are {}",
                            Level::KAFKA_NAMES
                        ),
                    )
                })?;
                changes.push((logger, Some(level)));
            }
            DELETE => {
                exists()?;
                if logger == names::ROOT {
                    return Err(invalid(format!(
                        "Removing the log level of the {} logger is not allowed",
                        names::ROOT
                    )));
                }
                changes.push((logger, None));
            }
            op @ (APPEND | SUBTRACT) => {
                let op = if op == APPEND { "APPEND" } else { "SUBTRACT" };
                return Err(invalid(format!(
                    "{op} operation is not allowed for the BROKER_LOGGER resource"
                )));
            }
            op => {
                return Err(invalid(format!(
                    "Unknown operation type {op} is not allowed for the BROKER_LOGGER resource"
                )))
            }
        }
    }
    if validate_only {
        return Ok(());
    }
    for (logger, level) in changes {
        // At WARN, as Kafka logs it: a level change is worth seeing whatever the levels.
        match level {
            Some(level) => {
                loggers.set(logger, level);
                tracing::warn!(principal = %ctx.session.principal, peer = %ctx.peer, "Updated the log level of {logger} to {}", level.name());
            }
            None => {
                loggers.unset(logger);
                tracing::warn!(principal = %ctx.session.principal, peer = %ctx.peer, "Unset the log level of {logger}");
            }
        }
    }
    Ok(())
}
