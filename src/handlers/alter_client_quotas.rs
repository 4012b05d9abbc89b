//! AlterClientQuotas (v0–1): sets and removes quotas of users and client ids (Kafka's
//! `ClientQuotaControlManager` checks), each entity on its own; `validate_only` checks
//! without changing anything. The change is kept by the controller (a ZooKeeper znode
//! with its notification, or `ClientQuotaRecord`s) and in force once answered.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::Broker;
use crate::controller::ControllerError;
use crate::quota::configs::{self, Alteration};
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    // Entries that fail to parse are answered here; the others go to the controller,
    // their outcomes put back in request order.
    let parsed: Vec<Result<Alteration, ControllerError>> =
        req.entries.iter().map(alteration).collect();
    let valid: Vec<Alteration> = parsed
        .iter()
        .filter_map(|p| p.as_ref().ok().cloned())
        .collect();
    let mut outcomes = match valid.is_empty() {
        true => Vec::new(),
        false => match broker
            .controller
            .alter_client_quotas(valid, req.validate_only)
            .await
        {
            Ok(results) => results,
            Err(e) => parsed
                .iter()
                .filter(|p| p.is_ok())
                .map(|_| Err(e.clone()))
                .collect(),
        },
    }
    .into_iter();
    let entries = req
        .entries
        .iter()
        .zip(parsed)
        .map(|(entry, parsed)| {
            let result = match parsed {
                Err(e) => Err(e),
                Ok(_) => outcomes.next().unwrap_or_else(|| {
                    Err(ControllerError::new(
                        ResponseError::UnknownServerError,
                        "no outcome",
                    ))
                }),
            };
            let entity = entry
                .entity
                .iter()
                .map(|e| {
                    EntityData::default()
                        .with_entity_type(e.entity_type.clone())
                        .with_entity_name(e.entity_name.clone())
                })
                .collect();
            let (code, message) = match result {
                Ok(()) => (0, None),
                Err(e) => (e.code(), Some(StrBytes::from_string(e.message))),
            };
            EntryData::default()
                .with_entity(entity)
                .with_error_code(code)
                .with_error_message(message)
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}

/// One entry as an alteration: its entity checked, its ops with no key twice.
fn alteration(
    entry: &kafka_protocol::messages::alter_client_quotas_request::EntryData,
) -> Result<Alteration, ControllerError> {
    let components: Vec<(String, Option<String>)> = entry
        .entity
        .iter()
        .map(|e| {
            (
                e.entity_type.to_string(),
                e.entity_name.as_ref().map(|n| n.to_string()),
            )
        })
        .collect();
    let entity = configs::parse_entity(&components)?;
    let mut ops = BTreeMap::new();
    for op in &entry.ops {
        let value = (!op.remove).then_some(op.value);
        if ops.insert(op.key.to_string(), value).is_some() {
            return Err(ControllerError::new(
                ResponseError::InvalidRequest,
                format!(
                    "Duplicate quota key {} not updating quota for this entity {entity}",
                    op.key.as_str()
                ),
            ));
        }
    }
    Ok(Alteration { entity, ops })
}
