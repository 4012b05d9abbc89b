//! DescribeAcls: the ACLs in force that the filter matches, grouped by resource pattern
//! (Kafka's `AclApis.handleDescribeAcls`). The pipeline has checked DESCRIBE on the
//! cluster; without an authorizer the answer is SECURITY_DISABLED.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};

use super::str_bytes;
use crate::auth::acl::AclBindingFilter;
use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn handle(
    _broker: Arc<Broker>,
    ctx: RequestContext,
    req: DescribeAclsRequest,
) -> DescribeAclsResponse {
    let refused = |error: ResponseError, message: &str| {
        DescribeAclsResponse::default()
            .with_error_code(error.code())
            .with_error_message(Some(str_bytes(message)))
    };
    let Some(admin) = ctx.authorizer().and_then(|a| a.acl_admin()) else {
        return refused(
            ResponseError::SecurityDisabled,
            "No Authorizer is configured.",
        );
    };
    let filter = match AclBindingFilter::from_codes(
        req.resource_type_filter,
        req.resource_name_filter.as_deref(),
        req.pattern_type_filter,
        req.principal_filter.as_deref(),
        req.host_filter.as_deref(),
        req.operation,
        req.permission_type,
    ) {
        Ok(f) => f,
        Err(why) => return refused(ResponseError::InvalidRequest, &why),
    };
    let mut resources: BTreeMap<_, Vec<AclDescription>> = BTreeMap::new();
    for acl in admin.describe(&filter) {
        let e = &acl.entry;
        resources.entry(acl.pattern.clone()).or_default().push(
            AclDescription::default()
                .with_principal(str_bytes(&e.principal))
                .with_host(str_bytes(&e.host))
                .with_operation(e.operation.code())
                .with_permission_type(e.permission.code()),
        );
    }
    DescribeAclsResponse::default().with_resources(
        resources
            .into_iter()
            .map(|(p, acls)| {
                DescribeAclsResource::default()
                    .with_resource_type(p.resource_type.code())
                    .with_resource_name(str_bytes(p.name))
                    .with_pattern_type(p.pattern_type.code())
                    .with_acls(acls)
            })
            .collect(),
    )
}
