//! DescribeClientQuotas (v0–1): the quotas of the users and client ids a filter matches:
//! in ZooKeeper mode read from `/config/users|clients` for each request, as Kafka does;
//! on a single node from the metadata image (the metadata log's `ClientQuotaRecord`s). A
//! malformed filter fails the whole request.

use std::sync::Arc;

use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;

use crate::broker::Broker;
use crate::quota::configs::{self, FilterComponent};
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let components: Vec<FilterComponent> = req
        .components
        .iter()
        .map(|c| FilterComponent {
            entity_type: c.entity_type.to_string(),
            match_type: c.match_type,
            match_name: c._match.as_ref().map(|m| m.to_string()),
        })
        .collect();
    let quotas = match broker.controller.describe_client_quotas().await {
        Ok(quotas) => quotas,
        Err(e) => {
            tracing::warn!(error = %e.message, "DescribeClientQuotas: the quotas could not be read");
            return DescribeClientQuotasResponse::default()
                .with_error_code(e.error.code())
                .with_error_message(Some(StrBytes::from_string(e.message)))
                .with_entries(None);
        }
    };
    match configs::describe(&quotas, &components, req.strict) {
        Ok(found) => {
            let entries = found
                .into_iter()
                .map(|(entity, values)| {
                    let entity = entity
                        .components()
                        .map(|(kind, name)| {
                            EntityData::default()
                                .with_entity_type(StrBytes::from_static_str(kind))
                                .with_entity_name(
                                    name.map(|n| StrBytes::from_string(n.to_string())),
                                )
                        })
                        .collect();
                    let values = values
                        .into_iter()
                        .map(|(k, v)| {
                            ValueData::default()
                                .with_key(StrBytes::from_string(k))
                                .with_value(v)
                        })
                        .collect();
                    EntryData::default().with_entity(entity).with_values(values)
                })
                .collect();
            DescribeClientQuotasResponse::default().with_entries(Some(entries))
        }
        Err(e) => DescribeClientQuotasResponse::default()
            .with_error_code(e.code())
            .with_error_message(Some(StrBytes::from_string(e.message)))
            .with_entries(None),
    }
}
