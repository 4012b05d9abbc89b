//! DeleteAcls: removes the ACLs each filter matches and names them (Kafka's
//! `AclApis.handleDeleteAcls`). The pipeline has checked ALTER on the cluster; without
//! an authorizer every filter answers SECURITY_DISABLED, and a filter with UNKNOWN codes
//! INVALID_REQUEST.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};

use super::str_bytes;
use crate::auth::acl::AclBindingFilter;
use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn handle(
    _broker: Arc<Broker>,
    ctx: RequestContext,
    req: DeleteAclsRequest,
) -> DeleteAclsResponse {
    let failed = |error: ResponseError, message: &str| {
        DeleteAclsFilterResult::default()
            .with_error_code(error.code())
            .with_error_message(Some(str_bytes(message)))
    };
    let Some(admin) = ctx.authorizer().and_then(|a| a.acl_admin()) else {
        let results = req
            .filters
            .iter()
            .map(|_| {
                failed(
                    ResponseError::SecurityDisabled,
                    "No Authorizer is configured.",
                )
            })
            .collect();
        return DeleteAclsResponse::default().with_filter_results(results);
    };
    let parsed: Vec<Result<AclBindingFilter, String>> = req
        .filters
        .iter()
        .map(|f| {
            AclBindingFilter::from_codes(
                f.resource_type_filter,
                f.resource_name_filter.as_deref(),
                f.pattern_type_filter,
                f.principal_filter.as_deref(),
                f.host_filter.as_deref(),
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    let valid: Vec<AclBindingFilter> = parsed.iter().filter_map(|p| p.clone().ok()).collect();
    let deleted = match valid.is_empty() {
        true => Ok(Vec::new()),
        false => admin.delete(valid).await,
    };
    let mut matched = match &deleted {
        Ok(d) => d.clone().into_iter(),
        Err(_) => Vec::new().into_iter(),
    };
    let results = parsed
        .into_iter()
        .map(|p| match (p, &deleted) {
            (Err(why), _) => failed(ResponseError::InvalidRequest, &why),
            (Ok(_), Err(e)) => failed(e.error, &e.message),
            (Ok(_), Ok(_)) => {
                let acls = matched.next().unwrap_or_default();
                for acl in &acls {
                    tracing::info!(principal = %ctx.session.principal, "deleted ACL {acl}");
                }
                DeleteAclsFilterResult::default().with_matching_acls(
                    acls.into_iter()
                        .map(|b| {
                            DeleteAclsMatchingAcl::default()
                                .with_resource_type(b.pattern.resource_type.code())
                                .with_resource_name(str_bytes(b.pattern.name))
                                .with_pattern_type(b.pattern.pattern_type.code())
                                .with_principal(str_bytes(b.entry.principal))
                                .with_host(str_bytes(b.entry.host))
                                .with_operation(b.entry.operation.code())
                                .with_permission_type(b.entry.permission.code())
                        })
                        .collect(),
                )
            }
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}
