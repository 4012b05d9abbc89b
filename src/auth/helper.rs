//! Kafka's `AuthHelper`: the two checks handlers make, one call per resource, reached from
//! the request context. With the allow-all authorizer the context holds none, and each
//! check is a branch.

use super::authorizer::{Action, Authorizer, Requester};
use super::operations::{to_bit_field, AclOperation, ResourceType, NOT_REQUESTED};
use crate::router::RequestContext;

impl RequestContext {
    /// One check through the connection's kept decisions when the authorizer allows
    /// keeping them (`auth::decisions`), else asking it.
    fn decide(&self, a: &dyn Authorizer, requester: &Requester<'_>, action: &Action<'_>) -> bool {
        match a.generation() {
            Some(generation) => self
                .session
                .held
                .decisions
                .decide(generation, action, || a.authorize_one(requester, action)),
            None => a.authorize_one(requester, action),
        }
    }

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
        match self.authorizer() {
            None => true,
            Some(a) => self.decide(
                a,
                &self.requester(),
                &Action::new(operation, resource_type, name),
            ),
        }
    }

    /// [`RequestContext::authorize`] where a denial only narrows the answer and is not
    /// logged (Kafka's `logIfDenied = false`: ListGroups' cluster check, authorized
    /// operations).
    pub fn authorize_quietly(
        &self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        match self.authorizer() {
            None => true,
            Some(a) => self.decide(
                a,
                &self.requester(),
                &Action {
                    log_if_denied: false,
                    ..Action::new(operation, resource_type, name)
                },
            ),
        }
    }

    /// Whether `operation` is allowed on some resource of `resource_type` (Kafka's
    /// `authorizeByResourceType`).
    pub fn authorize_by_resource_type(
        &self,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        match self.authorizer() {
            None => true,
            Some(a) => a.authorize_by_resource_type(&self.requester(), operation, resource_type),
        }
    }

    /// The authorized-operations bit field of a resource for the requester, as Kafka's
    /// `authorizedOperations`: every operation its type supports that is allowed (all
    /// of them without an authorizer).
    pub fn authorized_operations(&self, resource_type: ResourceType, name: &str) -> i32 {
        let supported = resource_type.supported_operations();
        let Some(a) = self.authorizer() else {
            return to_bit_field(supported);
        };
        let requester = self.requester();
        let allowed: Vec<AclOperation> = supported
            .iter()
            .copied()
            .filter(|op| {
                self.decide(
                    a,
                    &requester,
                    &Action {
                        log_if_denied: false,
                        ..Action::new(*op, resource_type, name)
                    },
                )
            })
            .collect();
        to_bit_field(&allowed)
    }

    /// The authorized operations if the request asked for them, else Kafka's
    /// "not requested" value.
    pub fn authorized_operations_if(
        &self,
        requested: bool,
        resource_type: ResourceType,
        name: &str,
    ) -> i32 {
        match requested {
            true => self.authorized_operations(resource_type, name),
            false => NOT_REQUESTED,
        }
    }

    /// Kafka's check of a config resource (DescribeConfigs, AlterConfigs,
    /// IncrementalAlterConfigs): `operation` on the cluster for a broker (type 4) or
    /// broker logger (8), on the topic (2) or group (32) of that name; the refusal is
    /// Kafka's error for the type. Another type is the handler's to refuse.
    pub fn authorize_config_resource(
        &self,
        operation: AclOperation,
        config_resource_type: i8,
        name: &str,
    ) -> Result<(), kafka_protocol::error::ResponseError> {
        use kafka_protocol::error::ResponseError;
        let (resource_type, name, denied) = match config_resource_type {
            4 | 8 => (
                ResourceType::Cluster,
                super::authorizer::CLUSTER_NAME,
                ResponseError::ClusterAuthorizationFailed,
            ),
            2 => (
                ResourceType::Topic,
                name,
                ResponseError::TopicAuthorizationFailed,
            ),
            32 => (
                ResourceType::Group,
                name,
                ResponseError::GroupAuthorizationFailed,
            ),
            _ => return Ok(()),
        };
        match self.authorize(operation, resource_type, name) {
            true => Ok(()),
            false => Err(denied),
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
        let Some(a) = self.authorizer() else {
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
                self.decide(a, &requester, &action)
            })
            .collect()
    }

    /// Whether every check passes without asking (the allow-all authorizer).
    pub fn allows_everything(&self) -> bool {
        self.authorizer().is_none()
    }
}
