//! Kafka's `Authorizer`: may this principal, from this host and listener, perform this
//! operation on this resource? One trait, asked through two helpers that every handler
//! uses (Kafka's `AuthHelper.authorize` and `filterByAuthorized`), reached from the
//! request context: [`RequestContext::authorize`](crate::router::RequestContext::authorize)
//! and [`RequestContext::filter_authorized`](crate::router::RequestContext::filter_authorized).
//!
//! The default is [`AllowAll`]: with no authorizer configured Kafka allows everything,
//! and so does skua. The request context then holds no authorizer at all, so a check
//! costs a branch, not a call: the produce and fetch paths check per topic.

use std::net::IpAddr;

use super::operations::{AclOperation, ResourceType};
use crate::network::session::Principal;

/// How an ACL's resource name matches (Kafka's `PatternType`). A request always names a
/// literal resource; prefixed patterns live in the ACLs the authorizer stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PatternType {
    Literal,
    Prefixed,
}

/// One check (Kafka's `Action`): an operation on a named resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action<'a> {
    pub operation: AclOperation,
    pub resource_type: ResourceType,
    pub name: &'a str,
    pub pattern: PatternType,
    /// Whether a denial is logged (false where a denial only filters, as Metadata's
    /// topic list does: Kafka's `logIfDenied`).
    pub log_if_denied: bool,
}

impl<'a> Action<'a> {
    pub fn new(operation: AclOperation, resource_type: ResourceType, name: &'a str) -> Self {
        Action {
            operation,
            resource_type,
            name,
            pattern: PatternType::Literal,
            log_if_denied: true,
        }
    }
}

/// The cluster resource's one name, as Kafka's `Resource.CLUSTER_NAME`.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// Who asks (Kafka's `AuthorizableRequestContext`).
#[derive(Clone, Copy, Debug)]
pub struct Requester<'a> {
    pub principal: &'a Principal,
    pub host: IpAddr,
    pub listener: &'a str,
    pub api_key: i16,
    pub api_version: i16,
    pub client_id: &'a str,
    pub correlation_id: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthorizationResult {
    Allowed,
    Denied,
}

pub trait Authorizer: Send + Sync {
    /// One result per action, in order.
    fn authorize(
        &self,
        requester: &Requester<'_>,
        actions: &[Action<'_>],
    ) -> Vec<AuthorizationResult>;

    /// One action; an authorizer may answer it without the vector.
    fn authorize_one(&self, requester: &Requester<'_>, action: &Action<'_>) -> bool {
        self.authorize(requester, std::slice::from_ref(action))
            .first()
            .is_some_and(|r| *r == AuthorizationResult::Allowed)
    }

    /// Whether `operation` is allowed on some resource of `resource_type` (Kafka's
    /// `authorizeByResourceType`: InitProducerId's "WRITE on any topic", KIP-679). An
    /// authorizer that cannot list its ACLs answers for a made-up resource name, as
    /// Kafka's first step does.
    fn authorize_by_resource_type(
        &self,
        requester: &Requester<'_>,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        let probe = Action {
            log_if_denied: false,
            ..Action::new(operation, resource_type, "hardcode")
        };
        self.authorize_one(requester, &probe)
    }

    /// A number that changes whenever any of this authorizer's decisions may (every ACL
    /// change bumps it); `Some` lets a connection keep the decisions its requests got,
    /// keyed by operation and resource alone, until it changes (`auth::decisions`). An
    /// authorizer whose decisions depend on more of the request than the session's
    /// principal and host, or that cannot say when they change, answers `None`: each
    /// check asks it.
    fn generation(&self) -> Option<u64> {
        None
    }

    /// Whether this authorizer allows everything (so the request context need not ask).
    fn allows_everything(&self) -> bool {
        false
    }

    /// The ACLs an authorizer keeps, for CreateAcls, DescribeAcls and DeleteAcls; `None`
    /// when it keeps none (they answer SECURITY_DISABLED, as Kafka without an authorizer).
    fn acl_admin(&self) -> Option<&dyn super::acl_authorizer::AclAdmin> {
        None
    }
}

/// Kafka without `authorizer.class.name`: everything is allowed.
pub struct AllowAll;

impl Authorizer for AllowAll {
    fn authorize(&self, _: &Requester<'_>, actions: &[Action<'_>]) -> Vec<AuthorizationResult> {
        vec![AuthorizationResult::Allowed; actions.len()]
    }

    fn authorize_one(&self, _: &Requester<'_>, _: &Action<'_>) -> bool {
        true
    }

    fn allows_everything(&self) -> bool {
        true
    }
}
