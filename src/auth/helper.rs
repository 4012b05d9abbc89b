//! Kafka's `AuthHelper`: the two checks handlers make, one call per resource, reached from
//! the request context. With the allow-all authorizer the context holds none, and each
//! check is a branch.

use super::authorizer::{Action, Requester};
use super::operations::{AclOperation, ResourceType};
use crate::router::RequestContext;

impl RequestContext {
    /// Who asks, as the authorizer sees it.
    pub fn requester(&self) -> Requester<'_> {
        Requester {
            principal: &self.session.principal,
            host: self.session.peer.ip(),
            listener: &self.session.listener,
            api_key: self.api_key as i16,
            api_version: self.api_version,
            client_id: self.client_id.as_deref().unwrap_or(""),
            correlation_id: self.correlation_id,
        }
    }

    /// Whether the requester may perform `operation` on the resource named `name`
    /// (Kafka's `AuthHelper.authorize`).
    pub fn authorize(
        &self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        match &self.authorizer {
            None => true,
            Some(a) => a.authorize_one(
                &self.requester(),
                &Action::new(operation, resource_type, name),
            ),
        }
    }

    /// The items whose resource the requester may perform `operation` on, in order
    /// (Kafka's `filterByAuthorized`); a denial is not logged, as it only filters.
    pub fn filter_authorized<T>(
        &self,
        operation: AclOperation,
        resource_type: ResourceType,
        items: Vec<T>,
        name: impl Fn(&T) -> &str,
    ) -> Vec<T> {
        let Some(a) = &self.authorizer else {
            return items;
        };
        let requester = self.requester();
        items
            .into_iter()
            .filter(|item| {
                let action = Action {
                    log_if_denied: false,
                    ..Action::new(operation, resource_type, name(item))
                };
                a.authorize_one(&requester, &action)
            })
            .collect()
    }

    /// Whether every check passes without asking (the allow-all authorizer).
    pub fn allows_everything(&self) -> bool {
        self.authorizer.is_none()
    }
}
