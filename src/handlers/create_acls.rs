//! CreateAcls: adds ACLs through the authorizer's store (Kafka's `AclApis.handleCreateAcls`).
//! The pipeline has checked ALTER on the cluster. Without an authorizer every creation
//! answers SECURITY_DISABLED; a creation Kafka refuses (ANY or UNKNOWN codes, an empty
//! name, a cluster resource not named `kafka-cluster`, a principal without a type)
//! answers INVALID_REQUEST, and the others are created.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};

use super::str_bytes;
use crate::auth::acl::AclBinding;
use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn handle(
    _broker: Arc<Broker>,
    ctx: RequestContext,
    req: CreateAclsRequest,
) -> CreateAclsResponse {
    let failed = |error: ResponseError, message: &str| {
        AclCreationResult::default()
            .with_error_code(error.code())
            .with_error_message(Some(str_bytes(message)))
    };
    let Some(admin) = ctx.authorizer().and_then(|a| a.acl_admin()) else {
        let results = req
            .creations
            .iter()
            .map(|_| {
                failed(
                    ResponseError::SecurityDisabled,
                    "No Authorizer is configured.",
                )
            })
            .collect();
        return CreateAclsResponse::default().with_results(results);
    };
    let parsed: Vec<Result<AclBinding, String>> = req
        .creations
        .iter()
        .map(|c| {
            AclBinding::from_codes(
                c.resource_type,
                &c.resource_name,
                c.resource_pattern_type,
                &c.principal,
                &c.host,
                c.operation,
                c.permission_type,
            )
        })
        .collect();
    let valid: Vec<AclBinding> = parsed.iter().filter_map(|p| p.clone().ok()).collect();
    let stored = match valid.is_empty() {
        true => Ok(()),
        false => admin.create(valid).await,
    };
    let results = parsed
        .into_iter()
        .map(|p| match (p, &stored) {
            (Err(why), _) => failed(ResponseError::InvalidRequest, &why),
            (Ok(_), Err(e)) => failed(e.error, &e.message),
            (Ok(acl), Ok(())) => {
                tracing::info!(principal = %ctx.session.principal, "created ACL {acl}");
                AclCreationResult::default()
            }
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}
