//! ACLs in ZooKeeper, kept as Kafka 3.9's `AclAuthorizer` keeps them, so Kafka brokers
//! and skua brokers of one cluster share them:
//!
//! - a resource's ACLs are one znode, `/kafka-acl/<Type>/<name>` for a LITERAL pattern
//!   and `/kafka-acl-extended/prefixed/<Type>/<name>` for a PREFIXED one (`Topic`,
//!   `Group`, `Cluster`, `TransactionalId`, `DelegationToken`, `User`), holding
//!   `{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Read","host":"*"}]}`,
//!   written with the znode's version (a concurrent writer makes the write start over);
//! - each change is announced by a persistent sequential
//!   `/kafka-acl-changes/acl_changes_<seq>` holding `TOPIC:name` (LITERAL) or
//!   `/kafka-acl-extended-changes/acl_changes_<seq>` holding
//!   `{"version":1,"resourceType":"TOPIC","name":"foo","patternType":"PREFIXED"}`;
//! - every broker watches both, re-reads the resource named and puts its ACLs in force
//!   (Kafka's `ZkNodeChangeNotificationListener`), and removes notifications older than
//!   15 minutes. A new session first reads every ACL again, so no change is missed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use kafka_protocol::error::ResponseError;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::acl::{
    AccessControlEntry, AclBinding, AclBindingFilter, PatternType, Permission, ResourcePattern,
};
use super::acl_authorizer::{AclAuthorizer, AclStore, StoreError};
use super::operations::{AclOperation, ResourceType};
use crate::controller::zk::ZkController;
use crate::zk::session::{WatchEvent, ZkError, ZkSession};

const LITERAL_ROOT: &str = "/kafka-acl";
const PREFIXED_ROOT: &str = "/kafka-acl-extended/prefixed";
const LITERAL_CHANGES: &str = "/kafka-acl-changes";
const EXTENDED_CHANGES: &str = "/kafka-acl-extended-changes";
const CHANGE_PREFIX: &str = "acl_changes_";
/// Kafka's `ZkNodeChangeNotificationListener` default `changeExpirationMs`.
const CHANGE_EXPIRATION: Duration = Duration::from_secs(15 * 60);
const RETRY: Duration = Duration::from_millis(500);
/// Attempts at one resource's compare-and-set before giving up.
const MAX_WRITE_ATTEMPTS: usize = 50;

/// The enum name Kafka's `ResourceType.toString` gives (`TOPIC`, `TRANSACTIONAL_ID`).
fn enum_name(t: ResourceType) -> &'static str {
    match t {
        ResourceType::Topic => "TOPIC",
        ResourceType::Group => "GROUP",
        ResourceType::Cluster => "CLUSTER",
        ResourceType::TransactionalId => "TRANSACTIONAL_ID",
        ResourceType::DelegationToken => "DELEGATION_TOKEN",
        ResourceType::User => "USER",
    }
}

fn root(p: PatternType) -> &'static str {
    match p {
        PatternType::Literal => LITERAL_ROOT,
        PatternType::Prefixed => PREFIXED_ROOT,
    }
}

/// The znode of a resource pattern's ACLs.
pub fn znode(p: &ResourcePattern) -> String {
    format!(
        "{}/{}/{}",
        root(p.pattern_type),
        p.resource_type.camel_name(),
        p.name
    )
}

#[derive(Serialize, Deserialize)]
struct AclJson {
    principal: String,
    #[serde(rename = "permissionType")]
    permission_type: String,
    operation: String,
    host: String,
}

#[derive(Serialize, Deserialize)]
struct AclsJson {
    version: i32,
    acls: Vec<AclJson>,
}

/// A resource znode's JSON (Kafka's `AclEntry.toJsonCompatibleMap`).
pub fn encode_acls(entries: &BTreeSet<AccessControlEntry>) -> Vec<u8> {
    let acls = entries
        .iter()
        .map(|e| AclJson {
            principal: e.principal.clone(),
            permission_type: e.permission.camel_name().to_string(),
            operation: e.operation.camel_name().to_string(),
            host: e.host.clone(),
        })
        .collect();
    serde_json::to_vec(&AclsJson { version: 1, acls }).unwrap_or_default()
}

/// A resource znode's entries (Kafka's `AclEntry.fromBytes`); entries naming what skua
/// does not know are skipped with a warning, an unreadable znode holds none.
pub fn decode_acls(path: &str, data: &[u8]) -> BTreeSet<AccessControlEntry> {
    if data.is_empty() {
        return BTreeSet::new();
    }
    let parsed: AclsJson = match serde_json::from_slice(data) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(path, error = %e, "unreadable ACL znode; taken as empty");
            return BTreeSet::new();
        }
    };
    parsed
        .acls
        .into_iter()
        .filter_map(|a| {
            let operation = AclOperation::from_name(&a.operation);
            let permission = Permission::from_name(&a.permission_type);
            let entry =
                operation
                    .zip(permission)
                    .map(|(operation, permission)| AccessControlEntry {
                        principal: a.principal.clone(),
                        host: a.host.clone(),
                        operation,
                        permission,
                    });
            if entry.is_none() {
                tracing::warn!(
                    path,
                    operation = a.operation,
                    permission = a.permission_type,
                    "ACL entry skua does not know; skipped"
                );
            }
            entry
        })
        .collect()
}

/// The notification announcing a change of `p`'s ACLs: its parent path and data.
pub fn change_notification(p: &ResourcePattern) -> (&'static str, Vec<u8>) {
    match p.pattern_type {
        PatternType::Literal => (
            LITERAL_CHANGES,
            format!("{}:{}", enum_name(p.resource_type), p.name).into_bytes(),
        ),
        PatternType::Prefixed => {
            #[derive(Serialize)]
            struct Event<'a> {
                version: i32,
                #[serde(rename = "resourceType")]
                resource_type: &'a str,
                name: &'a str,
                #[serde(rename = "patternType")]
                pattern_type: &'a str,
            }
            let event = Event {
                version: 1,
                resource_type: enum_name(p.resource_type),
                name: &p.name,
                pattern_type: p.pattern_type.name(),
            };
            (
                EXTENDED_CHANGES,
                serde_json::to_vec(&event).unwrap_or_default(),
            )
        }
    }
}

/// The resource a notification names (either store's format).
pub fn decode_notification(changes_path: &str, data: &[u8]) -> Option<ResourcePattern> {
    if changes_path == LITERAL_CHANGES {
        let text = std::str::from_utf8(data).ok()?;
        let (t, name) = text.split_once(':')?;
        return Some(ResourcePattern {
            resource_type: ResourceType::from_name(t)?,
            name: name.to_string(),
            pattern_type: PatternType::Literal,
        });
    }
    #[derive(Deserialize)]
    struct Event {
        #[serde(rename = "resourceType")]
        resource_type: String,
        name: String,
        #[serde(rename = "patternType")]
        pattern_type: String,
    }
    let e: Event = serde_json::from_slice(data).ok()?;
    Some(ResourcePattern {
        resource_type: ResourceType::from_name(&e.resource_type)?,
        name: e.name,
        pattern_type: PatternType::from_name(&e.pattern_type)?,
    })
}

type AclMap = BTreeMap<ResourcePattern, BTreeSet<AccessControlEntry>>;

/// The ZooKeeper session in use now, if any (the controller's, which changes after an
/// expiry).
pub type Sessions = Arc<dyn Fn() -> Option<Arc<ZkSession>> + Send + Sync>;

pub struct ZkAclStore {
    sessions: Sessions,
    authorizer: Arc<AclAuthorizer>,
    /// What ZooKeeper holds, as last read or written here.
    acls: Mutex<AclMap>,
}

fn zk_error(e: ZkError) -> StoreError {
    StoreError {
        error: ResponseError::UnknownServerError,
        message: format!("cannot update the ACLs in ZooKeeper: {e}"),
    }
}

impl ZkAclStore {
    /// Creates Kafka's ACL paths, reads every ACL and puts them in force (before the
    /// broker serves), then follows the change notifications for as long as the
    /// controller lives. From a worker of a multi-threaded runtime, as `Broker::open`.
    pub fn start_blocking(
        zk: &Arc<ZkController>,
        authorizer: Arc<AclAuthorizer>,
    ) -> anyhow::Result<Arc<ZkAclStore>> {
        let weak = Arc::downgrade(zk);
        let sessions: Sessions = Arc::new(move || weak.upgrade().and_then(|zk| zk.session()));
        let handle = tokio::runtime::Handle::try_current()?;
        let (store, follower) = tokio::task::block_in_place(|| {
            handle.block_on(ZkAclStore::start(sessions, authorizer))
        })?;
        zk.add_follower(follower);
        Ok(store)
    }

    /// [`ZkAclStore::start_blocking`] for any source of sessions; returns the store and
    /// the task following the notifications.
    pub async fn start(
        sessions: Sessions,
        authorizer: Arc<AclAuthorizer>,
    ) -> anyhow::Result<(Arc<ZkAclStore>, tokio::task::JoinHandle<()>)> {
        let session = sessions()
            .ok_or_else(|| anyhow::anyhow!("no ZooKeeper session to read the ACLs from"))?;
        let store = Arc::new(ZkAclStore {
            sessions,
            authorizer,
            acls: Mutex::new(BTreeMap::new()),
        });
        create_paths(&session).await?;
        store.read_all(&session).await?;
        let follower = tokio::spawn(run(Arc::downgrade(&store)));
        Ok((store, follower))
    }

    fn session(&self) -> Result<Arc<ZkSession>, StoreError> {
        (self.sessions)().ok_or_else(|| StoreError {
            error: ResponseError::UnknownServerError,
            message: "no ZooKeeper session".into(),
        })
    }

    fn publish(&self, acls: &AclMap) {
        self.authorizer
            .set_acls(acls.iter().flat_map(|(p, entries)| {
                entries.iter().map(|e| AclBinding {
                    pattern: p.clone(),
                    entry: e.clone(),
                })
            }));
    }

    /// Every ACL znode, read again.
    async fn read_all(&self, session: &ZkSession) -> Result<(), ZkError> {
        let mut acls = AclMap::new();
        for pattern_type in [PatternType::Literal, PatternType::Prefixed] {
            for resource_type in ResourceType::ALL {
                let dir = format!("{}/{}", root(pattern_type), resource_type.camel_name());
                for name in session.children(&dir).await?.unwrap_or_default() {
                    let p = ResourcePattern {
                        resource_type,
                        name,
                        pattern_type,
                    };
                    let entries = read_resource(session, &p).await?.0;
                    if !entries.is_empty() {
                        acls.insert(p, entries);
                    }
                }
            }
        }
        let count: usize = acls.values().map(BTreeSet::len).sum();
        tracing::info!(acls = count, "ACLs in force from ZooKeeper");
        self.publish(&acls);
        *self.acls.lock() = acls;
        Ok(())
    }

    /// One resource's ACLs, read again and put in force.
    async fn reload(&self, session: &ZkSession, p: ResourcePattern) -> Result<(), ZkError> {
        let entries = read_resource(session, &p).await?.0;
        let mut acls = self.acls.lock();
        match entries.is_empty() {
            true => acls.remove(&p),
            false => acls.insert(p, entries),
        };
        self.publish(&acls);
        Ok(())
    }

    /// Rewrites one resource's znode with `change` applied to what it holds, by
    /// compare-and-set; announces and applies the result. Returns the entries removed.
    async fn update(
        &self,
        session: &ZkSession,
        p: &ResourcePattern,
        change: impl Fn(&mut BTreeSet<AccessControlEntry>),
    ) -> Result<BTreeSet<AccessControlEntry>, ZkError> {
        let path = znode(p);
        for _ in 0..MAX_WRITE_ATTEMPTS {
            let (current, version) = read_resource(session, p).await?;
            let mut updated = current.clone();
            change(&mut updated);
            let removed: BTreeSet<_> = current.difference(&updated).cloned().collect();
            if updated == current {
                return Ok(removed);
            }
            let written = match (version, updated.is_empty()) {
                (None, _) => session
                    .create_recursive(&path, &encode_acls(&updated))
                    .await
                    .map(|_| ()),
                (Some(v), true) => session.delete(&path, Some(v)).await,
                (Some(v), false) => session
                    .set(&path, &encode_acls(&updated), Some(v))
                    .await
                    .map(|_| ()),
            };
            match written {
                Ok(()) => {}
                Err(ZkError::BadVersion(_) | ZkError::NodeExists(_) | ZkError::NoNode(_)) => {
                    continue
                }
                Err(e) => return Err(e),
            }
            let (changes, data) = change_notification(p);
            session
                .create_sequential(&format!("{changes}/{CHANGE_PREFIX}"), &data)
                .await?;
            let mut acls = self.acls.lock();
            match updated.is_empty() {
                true => acls.remove(p),
                false => acls.insert(p.clone(), updated),
            };
            self.publish(&acls);
            return Ok(removed);
        }
        Err(ZkError::Other(format!(
            "{path} kept changing under {MAX_WRITE_ATTEMPTS} attempts to update it"
        )))
    }

    /// Follows both notification paths until the session ends (Ok) or a read fails.
    async fn follow(&self, session: &ZkSession) -> Result<(), ZkError> {
        let mut last: BTreeMap<&str, Option<u64>> = BTreeMap::new();
        for changes in [LITERAL_CHANGES, EXTENDED_CHANGES] {
            let children = session.children(changes).await?.unwrap_or_default();
            last.insert(changes, children.iter().filter_map(|c| sequence(c)).max());
        }
        self.read_all(session).await?;
        loop {
            let mut watches = Vec::new();
            for changes in [LITERAL_CHANGES, EXTENDED_CHANGES] {
                let (children, watch) = session.children_and_watch(changes).await?;
                watches.push(Box::pin(watch.changed()));
                let mut seqs: Vec<(u64, &String)> = children
                    .iter()
                    .filter_map(|c| Some((sequence(c)?, c)))
                    .collect();
                seqs.sort();
                for &(seq, child) in &seqs {
                    let seen = last.get(changes).copied().flatten();
                    if seen.is_some_and(|l| seq <= l) {
                        continue;
                    }
                    let path = format!("{changes}/{child}");
                    if let Some((data, _)) = session.get(&path).await? {
                        match decode_notification(changes, &data) {
                            Some(p) => self.reload(session, p).await?,
                            None => tracing::warn!(
                                path,
                                data = %String::from_utf8_lossy(&data),
                                "ACL change notification not understood; skipped"
                            ),
                        }
                    }
                    last.insert(changes, Some(seq));
                }
                purge_expired(session, changes, seqs.iter().map(|(_, c)| c.as_str())).await;
            }
            let (event, _, _) = futures::future::select_all(watches).await;
            if let WatchEvent::Session(e) = event {
                if e.is_terminal() {
                    return Ok(());
                }
            }
        }
    }
}

/// Follows ACL changes one session after another, while the store lives.
async fn run(store: Weak<ZkAclStore>) {
    let mut ended: Option<Arc<ZkSession>> = None;
    loop {
        let Some(s) = store.upgrade() else { return };
        let session = (s.sessions)();
        let Some(session) = session.filter(|s| !ended.as_ref().is_some_and(|e| Arc::ptr_eq(e, s)))
        else {
            drop(s);
            tokio::time::sleep(RETRY).await;
            continue;
        };
        match s.follow(&session).await {
            Ok(()) | Err(ZkError::SessionExpired) => ended = Some(session),
            Err(e) => {
                tracing::warn!(error = %e, "cannot follow ACL changes in ZooKeeper; trying again");
                drop(s);
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// Kafka's `createAclPaths`: every type's directory under both roots, and both
/// notification paths.
async fn create_paths(session: &ZkSession) -> Result<(), ZkError> {
    for pattern_type in [PatternType::Literal, PatternType::Prefixed] {
        for t in ResourceType::ALL {
            session
                .ensure_path(&format!("{}/{}", root(pattern_type), t.camel_name()))
                .await?;
        }
    }
    session.ensure_path(LITERAL_CHANGES).await?;
    session.ensure_path(EXTENDED_CHANGES).await
}

/// A resource's entries and its znode's version (`None`: no znode).
async fn read_resource(
    session: &ZkSession,
    p: &ResourcePattern,
) -> Result<(BTreeSet<AccessControlEntry>, Option<i32>), ZkError> {
    let path = znode(p);
    Ok(match session.get(&path).await? {
        Some((data, stat)) => (decode_acls(&path, &data), Some(stat.version)),
        None => (BTreeSet::new(), None),
    })
}

fn sequence(child: &str) -> Option<u64> {
    child.strip_prefix(CHANGE_PREFIX)?.parse().ok()
}

/// Removes notifications older than [`CHANGE_EXPIRATION`], as every Kafka broker does.
async fn purge_expired<'a>(
    session: &ZkSession,
    changes: &str,
    children: impl Iterator<Item = &'a str>,
) {
    let now_ms = crate::clock::now_ms();
    for child in children {
        let path = format!("{changes}/{child}");
        let Ok(Some(stat)) = session.stat(&path).await else {
            continue;
        };
        if now_ms - stat.ctime > CHANGE_EXPIRATION.as_millis() as i64 {
            match session.delete(&path, None).await {
                Ok(()) | Err(ZkError::NoNode(_)) => {}
                Err(e) => tracing::debug!(path, error = %e, "expired ACL change not removed"),
            }
        }
    }
}

#[async_trait]
impl AclStore for ZkAclStore {
    async fn create(&self, acls: Vec<AclBinding>) -> Result<(), StoreError> {
        let session = self.session()?;
        let mut by_resource: BTreeMap<ResourcePattern, BTreeSet<AccessControlEntry>> =
            BTreeMap::new();
        for a in acls {
            by_resource.entry(a.pattern).or_default().insert(a.entry);
        }
        for (p, entries) in by_resource {
            self.update(&session, &p, |current| {
                current.extend(entries.iter().cloned())
            })
            .await
            .map_err(zk_error)?;
        }
        Ok(())
    }

    async fn delete(
        &self,
        filters: Vec<AclBindingFilter>,
    ) -> Result<Vec<Vec<AclBinding>>, StoreError> {
        let session = self.session()?;
        // Kafka's AclAuthorizer: the resources its cache knows that a filter's pattern
        // matches, each rewritten without the entries any filter matches.
        let resources: Vec<ResourcePattern> = self
            .acls
            .lock()
            .keys()
            .filter(|p| filters.iter().any(|f| f.matches_pattern(p)))
            .cloned()
            .collect();
        let mut removed: Vec<AclBinding> = Vec::new();
        for p in resources {
            let matching: Vec<&AclBindingFilter> =
                filters.iter().filter(|f| f.matches_pattern(&p)).collect();
            let gone = self
                .update(&session, &p, |current| {
                    current.retain(|e| !matching.iter().any(|f| f.matches_entry(e)))
                })
                .await
                .map_err(zk_error)?;
            removed.extend(gone.into_iter().map(|entry| AclBinding {
                pattern: p.clone(),
                entry,
            }));
        }
        Ok(filters
            .iter()
            .map(|f| removed.iter().filter(|b| f.matches(b)).cloned().collect())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(t: ResourceType, name: &str, p: PatternType) -> ResourcePattern {
        ResourcePattern {
            resource_type: t,
            name: name.into(),
            pattern_type: p,
        }
    }

    use crate::auth::authorizer::Authorizer;
    use crate::auth::settings::AuthorizerSettings;
    use crate::zk::memory::Ensemble;
    use crate::zk::session::ZkConfig;

    async fn member(ensemble: &Ensemble) -> (Arc<AclAuthorizer>, tokio::task::JoinHandle<()>) {
        let config = ZkConfig::in_memory(ensemble.clone(), Duration::from_secs(10));
        let session = Arc::new(ZkSession::connect(&config).await.unwrap());
        let settings =
            AuthorizerSettings::parse(Some(crate::auth::settings::ACL_AUTHORIZER), None, None)
                .unwrap()
                .unwrap();
        let acls = Arc::new(AclAuthorizer::new(settings));
        let sessions: Sessions = Arc::new(move || Some(session.clone()));
        let (store, follower) = ZkAclStore::start(sessions, acls.clone()).await.unwrap();
        acls.set_store(store);
        (acls, follower)
    }

    fn binding(name: &str, p: PatternType, principal: &str, op: AclOperation) -> AclBinding {
        AclBinding {
            pattern: pattern(ResourceType::Topic, name, p),
            entry: AccessControlEntry {
                principal: principal.into(),
                host: "*".into(),
                operation: op,
                permission: Permission::Allow,
            },
        }
    }

    async fn eventually(what: &str, check: impl Fn() -> bool) {
        for _ in 0..100 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("not within a second: {what}");
    }

    /// Two brokers on one ZooKeeper: an ACL written through one is in force on the other
    /// within a second (through the change notification), in Kafka's znodes; a deletion
    /// likewise; a broker starting later reads them all.
    #[tokio::test]
    async fn acls_written_by_one_member_reach_the_others() {
        let ensemble = Ensemble::new();
        let (a, fa) = member(&ensemble).await;
        let (b, fb) = member(&ensemble).await;
        let admin = a.acl_admin().unwrap();
        admin
            .create(vec![
                binding(
                    "orders",
                    PatternType::Literal,
                    "User:alice",
                    AclOperation::Read,
                ),
                binding(
                    "pay",
                    PatternType::Prefixed,
                    "User:bob",
                    AclOperation::Write,
                ),
                binding(
                    "orders",
                    PatternType::Literal,
                    "User:carol",
                    AclOperation::Read,
                ),
            ])
            .await
            .unwrap();
        assert_eq!(
            a.acls().len(),
            3,
            "the writer applies its own change at once"
        );
        eventually("the other member follows", || b.acls().len() == 3).await;
        let json = ensemble.read("/kafka-acl/Topic/orders").unwrap();
        assert_eq!(decode_acls("", &json).len(), 2);
        assert!(ensemble
            .read("/kafka-acl-extended/prefixed/Topic/pay")
            .is_some());
        // (The notifications themselves are purged at once here: the in-memory
        // ensemble's znodes have no creation time.)
        // Deleting through the other member: alice's entry goes, carol's stays.
        let filter = AclBindingFilter {
            principal: Some("User:alice".into()),
            ..AclBindingFilter::any()
        };
        let deleted = b.acl_admin().unwrap().delete(vec![filter]).await.unwrap();
        assert_eq!(deleted[0].len(), 1);
        eventually("the deletion reaches the first member", || {
            a.acls().len() == 2
        })
        .await;
        // Removing the last entry of a resource removes its znode.
        let filter = AclBindingFilter {
            name: Some("pay".into()),
            ..AclBindingFilter::any()
        };
        b.acl_admin().unwrap().delete(vec![filter]).await.unwrap();
        assert!(ensemble
            .read("/kafka-acl-extended/prefixed/Topic/pay")
            .is_none());
        // A member starting now reads what is there.
        eventually("the first member follows", || a.acls().len() == 1).await;
        let (c, fc) = member(&ensemble).await;
        assert_eq!(c.acls(), a.acls());
        for f in [fa, fb, fc] {
            f.abort();
        }
    }

    #[test]
    fn kafkas_paths_and_notifications() {
        let lit = pattern(ResourceType::Topic, "orders", PatternType::Literal);
        let pre = pattern(ResourceType::TransactionalId, "tx-", PatternType::Prefixed);
        assert_eq!(znode(&lit), "/kafka-acl/Topic/orders");
        assert_eq!(
            znode(&pre),
            "/kafka-acl-extended/prefixed/TransactionalId/tx-"
        );
        let (path, data) = change_notification(&lit);
        assert_eq!(
            (path, data.as_slice()),
            ("/kafka-acl-changes", b"TOPIC:orders".as_slice())
        );
        assert_eq!(decode_notification(path, &data), Some(lit.clone()));
        let (path, data) = change_notification(&pre);
        assert_eq!(path, "/kafka-acl-extended-changes");
        assert_eq!(
            String::from_utf8(data.clone()).unwrap(),
            r#"{"version":1,"resourceType":"TRANSACTIONAL_ID","name":"tx-","patternType":"PREFIXED"}"#
        );
        assert_eq!(decode_notification(path, &data), Some(pre));
        // Kafka before 2.0 wrote the camel-case type; a name may hold colons.
        assert_eq!(
            decode_notification(LITERAL_CHANGES, b"Group:a:b"),
            Some(pattern(ResourceType::Group, "a:b", PatternType::Literal))
        );
        assert_eq!(decode_notification(LITERAL_CHANGES, b"nonsense"), None);
    }

    /// The JSON a Kafka 3.9 broker writes (`kafka-acls.sh --add --allow-principal
    /// User:alice --operation Read --operation IdempotentWrite`), read and written back.
    #[test]
    fn kafkas_acl_json() {
        let kafka = br#"{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"},{"host":"10.0.0.1","operation":"IdempotentWrite","permissionType":"Deny","principal":"User:bob"},{"principal":"User:x","permissionType":"Allow","operation":"FutureOp","host":"*"}]}"#;
        let entries = decode_acls("/kafka-acl/Topic/t", kafka);
        let want: BTreeSet<AccessControlEntry> = [
            AccessControlEntry {
                principal: "User:alice".into(),
                host: "*".into(),
                operation: AclOperation::Read,
                permission: Permission::Allow,
            },
            AccessControlEntry {
                principal: "User:bob".into(),
                host: "10.0.0.1".into(),
                operation: AclOperation::IdempotentWrite,
                permission: Permission::Deny,
            },
        ]
        .into();
        assert_eq!(entries, want);
        assert_eq!(decode_acls("/x", &encode_acls(&want)), want);
        let text = String::from_utf8(encode_acls(&want)).unwrap();
        assert!(text.starts_with(r#"{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}"#), "{text}");
        assert!(decode_acls("/x", b"not json").is_empty());
    }
}
