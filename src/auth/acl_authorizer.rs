//! skua's ACL authorizer: Kafka's `AclAuthorizer` (ZooKeeper mode) and `StandardAuthorizer`
//! (single node) decide alike, and so does this one; they differ only in where the ACLs
//! are kept, which is the [`AclStore`]'s business (`store_log`: the metadata log's
//! records; `store_zk`: AclAuthorizer's znodes). The store hands every change of the ACL
//! set to [`AclAuthorizer::set_acls`]; checks read the index it builds.
//!
//! A check is a super-user test, then the index's lookups (`acl_index`). Decisions that
//! compared many entries (thousands of ACLs on one pattern) are cached per principal,
//! host, operation and resource until the ACLs next change, so no check costs more than
//! a hash lookup or two.

use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;
use async_trait::async_trait;
use dashmap::DashMap;
use kafka_protocol::error::ResponseError;

use super::acl::{AclBinding, AclBindingFilter};
use super::acl_index::{AclIndex, Rule, Who};
use super::authorizer::{Action, AuthorizationResult, Authorizer, Requester};
use super::operations::{AclOperation, ResourceType};
use super::settings::AuthorizerSettings;

/// A decision comparing more entries than this is cached.
const CACHE_FROM_ENTRIES: usize = 16;
/// The most decisions cached; past it the cache starts again.
const CACHE_CAPACITY: usize = 100_000;

/// Why a store could not apply a change (the error every item of the request gets).
#[derive(Clone, Debug)]
pub struct StoreError {
    pub error: ResponseError,
    pub message: String,
}

/// Where ACLs are kept.
#[async_trait]
pub trait AclStore: Send + Sync {
    /// Adds `acls` (ones already present are kept once); every authorizer sharing the
    /// store applies them.
    async fn create(&self, acls: Vec<AclBinding>) -> Result<(), StoreError>;
    /// Removes the bindings each filter matches; returns them, per filter.
    async fn delete(
        &self,
        filters: Vec<AclBindingFilter>,
    ) -> Result<Vec<Vec<AclBinding>>, StoreError>;
}

/// What CreateAcls, DescribeAcls and DeleteAcls reach (Kafka's `Authorizer.createAcls`,
/// `acls`, `deleteAcls`).
#[async_trait]
pub trait AclAdmin: Send + Sync {
    fn describe(&self, filter: &AclBindingFilter) -> Vec<AclBinding>;
    async fn create(&self, acls: Vec<AclBinding>) -> Result<(), StoreError>;
    async fn delete(
        &self,
        filters: Vec<AclBindingFilter>,
    ) -> Result<Vec<Vec<AclBinding>>, StoreError>;
}

struct Cached {
    principal_type: Box<str>,
    principal_name: Box<str>,
    host: IpAddr,
    operation: AclOperation,
    resource_type: ResourceType,
    name: Box<str>,
    allowed: bool,
}

/// The ACLs in force and the decisions cached against them.
#[derive(Default)]
struct State {
    index: AclIndex,
    cache: DashMap<u64, Cached>,
    /// Whether anything was ever cached: until then a check computes no cache key.
    caching: AtomicBool,
}

pub struct AclAuthorizer {
    settings: AuthorizerSettings,
    /// The ACLs in force, replaced whole on a change. Read without a lock or a reference
    /// count: every check of every connection reads it, and either would be a write to a
    /// line all of them share.
    state: ArcSwap<State>,
    /// Bumped after each change of the ACLs is in force: what connections' own caches
    /// of decisions are valid for ([`Authorizer::generation`]).
    generation: AtomicU64,
    store: OnceLock<Arc<dyn AclStore>>,
}

impl AclAuthorizer {
    /// An authorizer with no ACLs yet (its store loads them).
    pub fn new(settings: AuthorizerSettings) -> AclAuthorizer {
        AclAuthorizer {
            settings,
            state: ArcSwap::from_pointee(State::default()),
            generation: AtomicU64::new(0),
            store: OnceLock::new(),
        }
    }

    pub fn settings(&self) -> &AuthorizerSettings {
        &self.settings
    }

    /// Connects the store ACL changes are written to.
    pub fn set_store(&self, store: Arc<dyn AclStore>) {
        let _ = self.store.set(store);
    }

    /// Puts `acls` in force, in place of the ACLs before.
    pub fn set_acls(&self, acls: impl IntoIterator<Item = AclBinding>) {
        let state = Arc::new(State {
            index: AclIndex::new(acls),
            ..State::default()
        });
        self.state.store(state);
        // After the store: a check that sees the new generation decides on the new ACLs.
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Every ACL in force.
    pub fn acls(&self) -> Vec<AclBinding> {
        self.state.load().index.bindings().iter().cloned().collect()
    }

    fn is_super_user(&self, r: &Requester<'_>) -> bool {
        self.settings
            .super_users
            .iter()
            .any(|(t, n)| *t == *r.principal.principal_type && *n == *r.principal.name)
    }

    /// The decision for one action.
    pub fn decide(&self, r: &Requester<'_>, action: &Action<'_>) -> bool {
        if self.is_super_user(r) {
            return true;
        }
        let who = Who {
            principal_type: &r.principal.principal_type,
            principal_name: &r.principal.name,
            host: r.host.to_canonical(),
        };
        let state = self.state.load();
        if state.caching.load(Ordering::Relaxed) {
            if let Some(hit) = state.cache.get(&cache_key(&who, action)) {
                if hit.matches(&who, action) {
                    return hit.allowed;
                }
            }
        }
        let (rule, compared) =
            state
                .index
                .find(&who, action.operation, action.resource_type, action.name);
        let allowed = match rule {
            Rule::Allow => true,
            Rule::Deny | Rule::NoMatchingAcl => false,
            Rule::NoResourceAcls => self.settings.allow_everyone_if_no_acl_found,
        };
        if compared >= CACHE_FROM_ENTRIES {
            if state.cache.len() >= CACHE_CAPACITY {
                state.cache.clear();
            }
            state
                .cache
                .insert(cache_key(&who, action), Cached::of(&who, action, allowed));
            state.caching.store(true, Ordering::Relaxed);
        }
        if !allowed && action.log_if_denied {
            tracing::info!(
                target: "kafka.authorizer.logger",
                "Principal = {} is Denied operation = {:?} from host = {} on resource = {:?}:{}:{} for request = {:?} based on rule {:?}",
                r.principal,
                action.operation,
                who.host,
                action.resource_type,
                action.pattern.name(),
                action.name,
                kafka_protocol::messages::ApiKey::try_from(r.api_key).ok(),
                rule,
            );
        }
        allowed
    }
}

impl Cached {
    fn of(who: &Who<'_>, action: &Action<'_>, allowed: bool) -> Cached {
        Cached {
            principal_type: who.principal_type.into(),
            principal_name: who.principal_name.into(),
            host: who.host,
            operation: action.operation,
            resource_type: action.resource_type,
            name: action.name.into(),
            allowed,
        }
    }

    fn matches(&self, who: &Who<'_>, action: &Action<'_>) -> bool {
        *self.principal_type == *who.principal_type
            && *self.principal_name == *who.principal_name
            && self.host == who.host
            && self.operation == action.operation
            && self.resource_type == action.resource_type
            && *self.name == *action.name
    }
}

fn cache_key(who: &Who<'_>, action: &Action<'_>) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    (
        who.principal_type,
        who.principal_name,
        who.host,
        action.operation,
        action.resource_type,
        action.name,
    )
        .hash(&mut h);
    h.finish()
}

impl Authorizer for AclAuthorizer {
    fn authorize(&self, r: &Requester<'_>, actions: &[Action<'_>]) -> Vec<AuthorizationResult> {
        actions
            .iter()
            .map(|a| match self.decide(r, a) {
                true => AuthorizationResult::Allowed,
                false => AuthorizationResult::Denied,
            })
            .collect()
    }

    fn authorize_one(&self, r: &Requester<'_>, action: &Action<'_>) -> bool {
        self.decide(r, action)
    }

    fn authorize_by_resource_type(
        &self,
        r: &Requester<'_>,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        // Kafka asks about a made-up name first, so super users (and the no-ACL rule)
        // are honoured whatever the ACLs.
        let probe = Action {
            log_if_denied: false,
            ..Action::new(operation, resource_type, "hardcode")
        };
        if self.decide(r, &probe) {
            return true;
        }
        let who = Who {
            principal_type: &r.principal.principal_type,
            principal_name: &r.principal.name,
            host: r.host.to_canonical(),
        };
        self.state
            .load()
            .index
            .any_allowed(&who, operation, resource_type)
    }

    /// A decision depends on the principal, the host, the operation and the resource, and
    /// changes only with the ACLs (the super users and `allow.everyone.if.no.acl.found`
    /// are fixed).
    fn generation(&self) -> Option<u64> {
        Some(self.generation.load(Ordering::Acquire))
    }

    fn acl_admin(&self) -> Option<&dyn AclAdmin> {
        Some(self)
    }
}

#[async_trait]
impl AclAdmin for AclAuthorizer {
    fn describe(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        let state = self.state.load_full();
        state
            .index
            .bindings()
            .iter()
            .filter(|b| filter.matches(b))
            .cloned()
            .collect()
    }

    async fn create(&self, acls: Vec<AclBinding>) -> Result<(), StoreError> {
        self.store()?.create(acls).await
    }

    async fn delete(
        &self,
        filters: Vec<AclBindingFilter>,
    ) -> Result<Vec<Vec<AclBinding>>, StoreError> {
        self.store()?.delete(filters).await
    }
}

impl AclAuthorizer {
    fn store(&self) -> Result<&Arc<dyn AclStore>, StoreError> {
        self.store.get().ok_or_else(|| StoreError {
            error: ResponseError::UnknownServerError,
            message: "the authorizer has no ACL store".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::acl::{AccessControlEntry, PatternType, Permission, ResourcePattern};
    use crate::network::session::Principal;
    use std::borrow::Cow;
    use std::net::Ipv4Addr;

    fn principal(name: &str) -> Principal {
        Principal {
            principal_type: Cow::Borrowed("User"),
            name: Cow::Owned(name.to_string()),
        }
    }

    fn requester(p: &Principal) -> Requester<'_> {
        Requester {
            principal: p,
            host: IpAddr::V4(Ipv4Addr::new(10, 1, 1, 1)),
            listener: "PLAINTEXT",
            api_key: 0,
            api_version: 9,
            client_id: "",
            correlation_id: 1,
        }
    }

    fn acl(name: &str, principal: &str, op: AclOperation, perm: Permission) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: ResourceType::Topic,
                name: name.into(),
                pattern_type: PatternType::Literal,
            },
            entry: AccessControlEntry {
                principal: principal.into(),
                host: "*".into(),
                operation: op,
                permission: perm,
            },
        }
    }

    fn settings(super_users: &str, allow_everyone: bool) -> AuthorizerSettings {
        AuthorizerSettings::parse(
            Some("org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
            Some(super_users),
            Some(if allow_everyone { "true" } else { "false" }),
        )
        .unwrap()
        .unwrap()
    }

    fn can(a: &AclAuthorizer, who: &str, op: AclOperation, topic: &str) -> bool {
        let p = principal(who);
        a.authorize_one(&requester(&p), &Action::new(op, ResourceType::Topic, topic))
    }

    #[test]
    fn super_users_bypass_every_acl() {
        let a = AclAuthorizer::new(settings("User:admin; User:CN=ops,O=x", false));
        a.set_acls([acl("t", "User:*", AclOperation::All, Permission::Deny)]);
        assert!(can(&a, "admin", AclOperation::Write, "t"));
        assert!(can(&a, "CN=ops,O=x", AclOperation::Delete, "t"));
        assert!(!can(&a, "alice", AclOperation::Write, "t"));
        assert!(!can(&a, "admin2", AclOperation::Write, "t"));
    }

    /// `allow.everyone.if.no.acl.found` applies only where no ACL matches the resource:
    /// an ACL for someone else on the topic still denies.
    #[test]
    fn allow_everyone_only_without_resource_acls() {
        let open = AclAuthorizer::new(settings("", true));
        open.set_acls([acl(
            "guarded",
            "User:bob",
            AclOperation::Read,
            Permission::Allow,
        )]);
        assert!(can(&open, "alice", AclOperation::Read, "free"));
        assert!(!can(&open, "alice", AclOperation::Read, "guarded"));
        assert!(can(&open, "bob", AclOperation::Read, "guarded"));
        let closed = AclAuthorizer::new(settings("", false));
        closed.set_acls([acl(
            "guarded",
            "User:bob",
            AclOperation::Read,
            Permission::Allow,
        )]);
        assert!(!can(&closed, "alice", AclOperation::Read, "free"));
    }

    /// Decisions over many entries are cached, and a change of the ACLs drops them.
    #[test]
    fn cached_decisions_follow_acl_changes() {
        let a = AclAuthorizer::new(settings("", false));
        let mut acls: Vec<AclBinding> = (0..100)
            .map(|i| {
                acl(
                    "*",
                    &format!("User:u{i}"),
                    AclOperation::Read,
                    Permission::Allow,
                )
            })
            .collect();
        a.set_acls(acls.clone());
        assert!(can(&a, "u7", AclOperation::Read, "t"));
        assert!(!can(&a, "alice", AclOperation::Read, "t"));
        assert_eq!(a.state.load().cache.len(), 2);
        // Answered from the cache, the same.
        assert!(can(&a, "u7", AclOperation::Read, "t"));
        assert!(!can(&a, "alice", AclOperation::Read, "t"));
        acls.push(acl(
            "t",
            "User:alice",
            AclOperation::Read,
            Permission::Allow,
        ));
        acls.push(acl("*", "User:u7", AclOperation::Read, Permission::Deny));
        a.set_acls(acls);
        assert!(can(&a, "alice", AclOperation::Read, "t"));
        assert!(!can(&a, "u7", AclOperation::Read, "t"));
    }

    #[test]
    fn by_resource_type_honours_super_users_and_acls() {
        let a = AclAuthorizer::new(settings("User:admin", false));
        a.set_acls([acl(
            "t",
            "User:alice",
            AclOperation::Write,
            Permission::Allow,
        )]);
        let check = |who: &str| {
            let p = principal(who);
            a.authorize_by_resource_type(&requester(&p), AclOperation::Write, ResourceType::Topic)
        };
        assert!(check("alice"));
        assert!(check("admin"));
        assert!(!check("bob"));
    }

    #[test]
    fn describe_filters_what_is_in_force() {
        let a = AclAuthorizer::new(settings("", false));
        a.set_acls([
            acl("t", "User:alice", AclOperation::Write, Permission::Allow),
            acl("u", "User:bob", AclOperation::Read, Permission::Allow),
        ]);
        let f = AclBindingFilter {
            principal: Some("User:bob".into()),
            ..AclBindingFilter::any()
        };
        let found = AclAdmin::describe(&a, &f);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].pattern.name, "u");
        assert_eq!(AclAdmin::describe(&a, &AclBindingFilter::any()).len(), 2);
    }
}
