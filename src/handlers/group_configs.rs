//! Group configs (resource type GROUP) for DescribeConfigs, IncrementalAlterConfigs and
//! AlterConfigs, with Kafka 4.4's answers: the checks its broker makes before a change
//! reaches the controller are here, the checks of the values in `config::group`.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{alter_configs_request, incremental_alter_configs_request};

use super::str_bytes;
use crate::broker::Broker;
use crate::config::group;
use crate::controller::{ConfigResource, ControllerError};

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// A group's configs as DescribeConfigs reports them; `wanted` filters by key.
pub fn describe(
    broker: &Broker,
    r: &DescribeConfigsResource,
    synonyms: bool,
    wanted: impl Fn(&str) -> bool,
) -> Result<Vec<DescribeConfigsResourceResult>, (ResponseError, String)> {
    let name = r.resource_name.as_str();
    if name.is_empty() {
        return Err((
            ResponseError::InvalidRequest,
            "Group name must not be empty".into(),
        ));
    }
    let configs = broker
        .controller
        .resource_configs(&ConfigResource::group(name));
    let entries = group::describe(&broker.config(), &configs)
        .into_iter()
        .filter(|e| wanted(e.key.name))
        .map(|e| {
            let entry = DescribeConfigsResourceResult::default()
                .with_name(str_bytes(e.key.name))
                .with_value(Some(str_bytes(e.value)))
                .with_config_source(e.source as i8)
                .with_config_type(e.key.kind.describe_type());
            if !synonyms {
                return entry;
            }
            entry.with_synonyms(
                e.synonyms
                    .into_iter()
                    .map(|(name, value, source)| {
                        DescribeConfigsSynonym::default()
                            .with_name(str_bytes(name))
                            .with_value(Some(str_bytes(value)))
                            .with_source(source as i8)
                    })
                    .collect(),
            )
        })
        .collect();
    Ok(entries)
}

/// IncrementalAlterConfigs for a group: SET and DELETE (group keys are no lists).
pub async fn alter_incremental(
    broker: &Broker,
    r: &incremental_alter_configs_request::AlterConfigsResource,
    validate_only: bool,
) -> Result<(), ControllerError> {
    check_name(r.resource_name.as_str())?;
    // Kafka's broker checks every operation before any is applied.
    for c in &r.configs {
        match (c.config_operation, &c.value) {
            (SET, None) => return Err(null_value(&c.name)),
            (SET | DELETE, _) => {}
            (op @ (APPEND | SUBTRACT), _) => {
                let op = if op == APPEND { "APPEND" } else { "SUBTRACT" };
                return Err(ControllerError::new(
                    ResponseError::InvalidConfig,
                    format!("Can't {op} to key {} because its type is not LIST.", c.name),
                ));
            }
            (op, _) => {
                return Err(ControllerError::new(
                    ResponseError::InvalidRequest,
                    format!("Unknown config operation {op}"),
                ))
            }
        }
    }
    broker
        .alter_group_configs(r.resource_name.as_str(), validate_only, |configs| {
            for c in &r.configs {
                match &c.value {
                    Some(v) if c.config_operation == SET => {
                        configs.insert(c.name.to_string(), v.to_string());
                    }
                    _ => {
                        configs.remove(c.name.as_str());
                    }
                }
            }
            Ok(())
        })
        .await
}

/// AlterConfigs for a group: the given configs replace the group's.
pub async fn alter(
    broker: &Broker,
    r: &alter_configs_request::AlterConfigsResource,
    validate_only: bool,
) -> Result<(), ControllerError> {
    check_name(r.resource_name.as_str())?;
    let mut wanted = BTreeMap::new();
    for c in &r.configs {
        let value = c.value.as_ref().ok_or_else(|| null_value(&c.name))?;
        wanted.insert(c.name.to_string(), value.to_string());
    }
    broker
        .alter_group_configs(r.resource_name.as_str(), validate_only, |configs| {
            *configs = wanted;
            Ok(())
        })
        .await
}

fn check_name(name: &str) -> Result<(), ControllerError> {
    match name.is_empty() {
        true => Err(ControllerError::new(
            ResponseError::InvalidRequest,
            "Default group resources are not allowed.",
        )),
        false => Ok(()),
    }
}

fn null_value(name: &str) -> ControllerError {
    ControllerError::new(
        ResponseError::InvalidRequest,
        format!("Null value not supported for : {name}"),
    )
}
