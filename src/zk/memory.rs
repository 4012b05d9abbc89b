//! An in-process ZooKeeper ensemble: the znode tree, sessions and one-shot watches with
//! ZooKeeper's semantics for what ZooKeeper mode uses (versions and czxids, ephemeral
//! znodes owned by a session, sequential children, watches fired once, multi-ops applied
//! whole or not at all, a session that expires taking its ephemeral znodes with it).
//!
//! A [`ZkSession`](super::session::ZkSession) opened on a [`ZkConfig::in_memory`]
//! (super::session::ZkConfig::in_memory) config talks to one of these instead of a
//! server, so the controller's own code runs unchanged in unit tests and in the cluster
//! simulation (`controller::zk::sim`). Everything is deterministic: zxids and session
//! ids count up, children are listed sorted, and the optional jitter (a number of
//! scheduler yields before each operation, so concurrent sessions interleave) comes from
//! a seeded generator.
//!
//! Every committed change is also appended to a write log ([`Ensemble::take_writes`]),
//! in commit order, for invariant checkers that must see every intermediate state.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{oneshot, watch};

use super::session::{Op, SessionEvent, Stat, WatchEvent, ZkError};

/// One committed change, in commit order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    Created { path: String, data: Vec<u8> },
    Set { path: String, data: Vec<u8> },
    Deleted { path: String },
}

/// A shared handle on one in-memory ensemble.
#[derive(Clone, Default)]
pub struct Ensemble {
    tree: Arc<Mutex<Tree>>,
}

impl std::fmt::Debug for Ensemble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ensemble(in memory)")
    }
}

impl PartialEq for Ensemble {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.tree, &other.tree)
    }
}

impl Eq for Ensemble {}

struct Node {
    data: Vec<u8>,
    stat: Stat,
}

struct Watcher {
    session: i64,
    tx: oneshot::Sender<WatchEvent>,
}

#[derive(Default)]
struct Tree {
    nodes: BTreeMap<String, Node>,
    zxid: i64,
    next_session: i64,
    sessions: BTreeMap<i64, watch::Sender<SessionEvent>>,
    data_watches: BTreeMap<String, Vec<Watcher>>,
    child_watches: BTreeMap<String, Vec<Watcher>>,
    writes: Vec<Write>,
    /// xorshift state and the most yields before an operation (0: none).
    jitter: (u64, u32),
}

/// What one change fires: (path, event) for data watches, for child watches.
#[derive(Default)]
struct Fired {
    data: Vec<(String, WatchEvent)>,
    children: Vec<(String, WatchEvent)>,
    writes: Vec<Write>,
}

fn parent_of(path: &str) -> Option<&str> {
    match path.rsplit_once('/') {
        Some(("", _)) if path != "/" => Some("/"),
        Some((p, _)) if !p.is_empty() => Some(p),
        _ => None,
    }
}

fn new_stat(zxid: i64, owner: i64, data_len: usize) -> Stat {
    Stat {
        czxid: zxid,
        mzxid: zxid,
        pzxid: zxid,
        ctime: 0,
        mtime: 0,
        version: 0,
        cversion: 0,
        aversion: 0,
        ephemeral_owner: owner,
        data_length: data_len as i32,
        num_children: 0,
    }
}

/// The znode map an operation works on, with what it fires.
struct Change<'a> {
    nodes: &'a mut BTreeMap<String, Node>,
    zxid: &'a mut i64,
    fired: Fired,
}

impl Change<'_> {
    fn create(&mut self, path: &str, data: &[u8], owner: i64) -> Result<Stat, ZkError> {
        if self.nodes.contains_key(path) {
            return Err(ZkError::NodeExists(path.to_string()));
        }
        let parent = parent_of(path).ok_or_else(|| ZkError::Other(format!("bad path {path}")))?;
        let p = self
            .nodes
            .get_mut(parent)
            .ok_or_else(|| ZkError::NoNode(path.to_string()))?;
        if p.stat.ephemeral_owner != 0 {
            return Err(ZkError::Other(format!("{parent} is ephemeral")));
        }
        *self.zxid += 1;
        let zxid = *self.zxid;
        p.stat.cversion += 1;
        p.stat.num_children += 1;
        p.stat.pzxid = zxid;
        let stat = new_stat(zxid, owner, data.len());
        self.nodes.insert(
            path.to_string(),
            Node {
                data: data.to_vec(),
                stat,
            },
        );
        let created = WatchEvent::Created(path.to_string());
        self.fired.data.push((path.to_string(), created));
        let changed = WatchEvent::ChildrenChanged(parent.to_string());
        self.fired.children.push((parent.to_string(), changed));
        self.fired.writes.push(Write::Created {
            path: path.to_string(),
            data: data.to_vec(),
        });
        Ok(stat)
    }

    fn set(&mut self, path: &str, data: &[u8], version: Option<i32>) -> Result<Stat, ZkError> {
        let node = self
            .nodes
            .get_mut(path)
            .ok_or_else(|| ZkError::NoNode(path.to_string()))?;
        if version.is_some_and(|v| v != node.stat.version) {
            return Err(ZkError::BadVersion(path.to_string()));
        }
        *self.zxid += 1;
        node.data = data.to_vec();
        node.stat.version += 1;
        node.stat.mzxid = *self.zxid;
        node.stat.data_length = data.len() as i32;
        let stat = node.stat;
        let event = WatchEvent::DataChanged(path.to_string());
        self.fired.data.push((path.to_string(), event));
        self.fired.writes.push(Write::Set {
            path: path.to_string(),
            data: data.to_vec(),
        });
        Ok(stat)
    }

    fn delete(&mut self, path: &str, version: Option<i32>) -> Result<(), ZkError> {
        let node = self
            .nodes
            .get(path)
            .ok_or_else(|| ZkError::NoNode(path.to_string()))?;
        if version.is_some_and(|v| v != node.stat.version) {
            return Err(ZkError::BadVersion(path.to_string()));
        }
        if node.stat.num_children > 0 {
            return Err(ZkError::Other(format!("{path} has children")));
        }
        self.nodes.remove(path);
        *self.zxid += 1;
        if let Some(parent) = parent_of(path) {
            if let Some(p) = self.nodes.get_mut(parent) {
                p.stat.cversion += 1;
                p.stat.num_children -= 1;
                p.stat.pzxid = *self.zxid;
            }
            let changed = WatchEvent::ChildrenChanged(parent.to_string());
            self.fired.children.push((parent.to_string(), changed));
        }
        let deleted = WatchEvent::Deleted(path.to_string());
        self.fired.data.push((path.to_string(), deleted.clone()));
        self.fired.children.push((path.to_string(), deleted));
        self.fired.writes.push(Write::Deleted {
            path: path.to_string(),
        });
        Ok(())
    }
}

impl Tree {
    fn new() -> Tree {
        let mut t = Tree::default();
        t.nodes.insert(
            "/".to_string(),
            Node {
                data: Vec::new(),
                stat: new_stat(0, 0, 0),
            },
        );
        t.next_session = 0x100;
        t
    }

    fn change(&mut self) -> Change<'_> {
        Change {
            nodes: &mut self.nodes,
            zxid: &mut self.zxid,
            fired: Fired::default(),
        }
    }

    /// Delivers what a committed change fired.
    fn fire(&mut self, fired: Fired) {
        for (path, event) in fired.data {
            for w in self.data_watches.remove(&path).unwrap_or_default() {
                let _ = w.tx.send(event.clone());
            }
        }
        for (path, event) in fired.children {
            for w in self.child_watches.remove(&path).unwrap_or_default() {
                let _ = w.tx.send(event.clone());
            }
        }
        self.writes.extend(fired.writes);
    }

    fn children(&self, path: &str) -> Vec<String> {
        let prefix = if path == "/" {
            "/".to_string()
        } else {
            format!("{path}/")
        };
        self.nodes
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter_map(|(k, _)| {
                let rest = &k[prefix.len()..];
                (!rest.is_empty() && !rest.contains('/')).then(|| rest.to_string())
            })
            .collect()
    }

    /// Ends a session: its watchers hear why, its ephemeral znodes go.
    fn end_session(&mut self, id: i64, why: SessionEvent) {
        let Some(state) = self.sessions.remove(&id) else {
            return;
        };
        for watches in [&mut self.data_watches, &mut self.child_watches] {
            for list in watches.values_mut() {
                for w in std::mem::take(list) {
                    if w.session == id {
                        let _ = w.tx.send(WatchEvent::Session(why));
                    } else {
                        list.push(w);
                    }
                }
            }
        }
        let owned: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.stat.ephemeral_owner == id)
            .map(|(p, _)| p.clone())
            .collect();
        for path in owned {
            let mut c = self.change();
            if c.delete(&path, None).is_ok() {
                let fired = c.fired;
                self.fire(fired);
            }
        }
        let _ = state.send(why);
    }

    fn next_jitter(&mut self) -> u32 {
        let (state, max) = &mut self.jitter;
        if *max == 0 {
            return 0;
        }
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        (*state % (*max as u64 + 1)) as u32
    }
}

impl Ensemble {
    pub fn new() -> Ensemble {
        Ensemble {
            tree: Arc::new(Mutex::new(Tree::new())),
        }
    }

    /// Before each operation a session yields to the scheduler up to `max` times (drawn
    /// from `seed`), so that tasks sharing a current-thread runtime interleave their
    /// ZooKeeper operations as they would against a server.
    pub fn set_jitter(&self, seed: u64, max: u32) {
        self.tree.lock().jitter = (seed | 1, max);
    }

    /// A new session, connected.
    pub fn connect(&self) -> Session {
        let mut t = self.tree.lock();
        t.next_session += 1;
        let id = t.next_session;
        let (tx, rx) = watch::channel(SessionEvent::Reconnected);
        t.sessions.insert(id, tx);
        Session {
            ensemble: self.clone(),
            id,
            events: rx,
        }
    }

    /// Expires a session as the server would after its timeout: its ephemeral znodes are
    /// deleted (watchers of other sessions see that) and it fails every later call.
    pub fn expire(&self, session_id: i64) {
        self.tree
            .lock()
            .end_session(session_id, SessionEvent::Expired);
    }

    /// The session's client loses (`false`) or regains (`true`) its connection to the
    /// ensemble, the session living on meanwhile: only its events say so.
    pub fn set_connected(&self, session_id: i64, connected: bool) {
        if let Some(tx) = self.tree.lock().sessions.get(&session_id) {
            let _ = tx.send(match connected {
                true => SessionEvent::Reconnected,
                false => SessionEvent::Disconnected,
            });
        }
    }

    pub fn is_live(&self, session_id: i64) -> bool {
        self.tree.lock().sessions.contains_key(&session_id)
    }

    /// A znode's data, read outside any session (for tests and checkers).
    pub fn read(&self, path: &str) -> Option<Vec<u8>> {
        self.tree.lock().nodes.get(path).map(|n| n.data.clone())
    }

    /// The owner session of an ephemeral znode.
    pub fn owner(&self, path: &str) -> Option<i64> {
        let t = self.tree.lock();
        let owner = t.nodes.get(path)?.stat.ephemeral_owner;
        (owner != 0).then_some(owner)
    }

    pub fn children_of(&self, path: &str) -> Vec<String> {
        self.tree.lock().children(path)
    }

    /// The writes committed since the last call, in order.
    pub fn take_writes(&self) -> Vec<Write> {
        std::mem::take(&mut self.tree.lock().writes)
    }
}

/// One session on an ensemble. Dropping it closes the session (its ephemeral znodes go),
/// as the last handle of a real session does.
pub struct Session {
    ensemble: Ensemble,
    id: i64,
    events: watch::Receiver<SessionEvent>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.ensemble
            .tree
            .lock()
            .end_session(self.id, SessionEvent::Closed);
    }
}

pub type Found = Option<(Vec<u8>, Stat)>;

impl Session {
    pub fn id(&self) -> i64 {
        self.id
    }

    pub fn events(&self) -> watch::Receiver<SessionEvent> {
        self.events.clone()
    }

    /// Yields as the jitter says, then runs `f` on the tree if the session lives.
    async fn op<T>(&self, f: impl FnOnce(&mut Tree) -> Result<T, ZkError>) -> Result<T, ZkError> {
        let yields = self.ensemble.tree.lock().next_jitter();
        for _ in 0..yields {
            tokio::task::yield_now().await;
        }
        let mut t = self.ensemble.tree.lock();
        if !t.sessions.contains_key(&self.id) {
            return Err(ZkError::SessionExpired);
        }
        f(&mut t)
    }

    fn watch(
        t: &mut Tree,
        session: i64,
        path: &str,
        children: bool,
    ) -> oneshot::Receiver<WatchEvent> {
        let (tx, rx) = oneshot::channel();
        let map = match children {
            true => &mut t.child_watches,
            false => &mut t.data_watches,
        };
        map.entry(path.to_string())
            .or_default()
            .push(Watcher { session, tx });
        rx
    }

    pub async fn create(&self, path: &str, data: &[u8], ephemeral: bool) -> Result<Stat, ZkError> {
        let owner = if ephemeral { self.id } else { 0 };
        self.op(|t| {
            let mut c = t.change();
            let stat = c.create(path, data, owner)?;
            let fired = c.fired;
            t.fire(fired);
            Ok(stat)
        })
        .await
    }

    /// Creates `path` and its missing parents, empty; fine if it exists.
    pub async fn mkdir(&self, path: &str) -> Result<(), ZkError> {
        self.op(|t| {
            let mut c = t.change();
            let mut at = String::new();
            for part in path.split('/').filter(|p| !p.is_empty()) {
                at.push('/');
                at.push_str(part);
                match c.create(&at, &[], 0) {
                    Ok(_) | Err(ZkError::NodeExists(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            let fired = c.fired;
            t.fire(fired);
            Ok(())
        })
        .await
    }

    pub async fn create_sequential(&self, prefix: &str, data: &[u8]) -> Result<String, ZkError> {
        self.op(|t| {
            let parent = parent_of(prefix).unwrap_or("/");
            let seq = t
                .nodes
                .get(parent)
                .ok_or_else(|| ZkError::NoNode(prefix.to_string()))?
                .stat
                .cversion;
            let path = format!("{prefix}{seq:010}");
            let mut c = t.change();
            c.create(&path, data, 0)?;
            let fired = c.fired;
            t.fire(fired);
            Ok(path)
        })
        .await
    }

    pub async fn get(&self, path: &str) -> Result<Found, ZkError> {
        self.op(|t| Ok(t.nodes.get(path).map(|n| (n.data.clone(), n.stat))))
            .await
    }

    /// The data (if any) and a watch on the znode's creation, change or deletion.
    pub async fn get_and_watch(
        &self,
        path: &str,
    ) -> Result<(Found, oneshot::Receiver<WatchEvent>), ZkError> {
        let id = self.id;
        self.op(|t| {
            let found = t.nodes.get(path).map(|n| (n.data.clone(), n.stat));
            Ok((found, Self::watch(t, id, path, false)))
        })
        .await
    }

    pub async fn children(&self, path: &str) -> Result<Option<Vec<String>>, ZkError> {
        self.op(|t| Ok(t.nodes.contains_key(path).then(|| t.children(path))))
            .await
    }

    pub async fn children_and_watch(
        &self,
        path: &str,
    ) -> Result<(Vec<String>, oneshot::Receiver<WatchEvent>), ZkError> {
        let id = self.id;
        self.op(|t| {
            if !t.nodes.contains_key(path) {
                return Err(ZkError::NoNode(path.to_string()));
            }
            let children = t.children(path);
            Ok((children, Self::watch(t, id, path, true)))
        })
        .await
    }

    pub async fn stat(&self, path: &str) -> Result<Option<Stat>, ZkError> {
        self.op(|t| Ok(t.nodes.get(path).map(|n| n.stat))).await
    }

    pub async fn set(
        &self,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> Result<Stat, ZkError> {
        self.op(|t| {
            let mut c = t.change();
            let stat = c.set(path, data, version)?;
            let fired = c.fired;
            t.fire(fired);
            Ok(stat)
        })
        .await
    }

    pub async fn delete(&self, path: &str, version: Option<i32>) -> Result<(), ZkError> {
        self.op(|t| {
            let mut c = t.change();
            c.delete(path, version)?;
            let fired = c.fired;
            t.fire(fired);
            Ok(())
        })
        .await
    }

    /// Kafka's `CheckedEphemeral`: created empty and set at version 0, in one step.
    pub async fn register_ephemeral(&self, path: &str, data: &[u8]) -> Result<Stat, ZkError> {
        let ops = [
            Op::Create {
                path,
                data: &[],
                ephemeral: true,
            },
            Op::SetData {
                path,
                data,
                version: Some(0),
            },
        ];
        let stats = self.multi(None, &ops).await?;
        stats
            .get(1)
            .copied()
            .flatten()
            .ok_or_else(|| ZkError::Other("no stat".into()))
    }

    /// `ops` applied whole if `check` (path, version) holds, else `Fenced`; the first
    /// failing op fails them all.
    pub async fn multi(
        &self,
        check: Option<(&str, i32)>,
        ops: &[Op<'_>],
    ) -> Result<Vec<Option<Stat>>, ZkError> {
        let id = self.id;
        self.op(|t| {
            if let Some((path, version)) = check {
                if t.nodes.get(path).map(|n| n.stat.version) != Some(version) {
                    return Err(ZkError::Fenced {
                        path: path.to_string(),
                        version,
                    });
                }
            }
            // Applied to a copy, kept only if every op succeeds.
            let mut nodes: BTreeMap<String, Node> = t
                .nodes
                .iter()
                .map(|(k, n)| {
                    let n = Node {
                        data: n.data.clone(),
                        stat: n.stat,
                    };
                    (k.clone(), n)
                })
                .collect();
            let mut zxid = t.zxid;
            let mut c = Change {
                nodes: &mut nodes,
                zxid: &mut zxid,
                fired: Fired::default(),
            };
            let mut stats = Vec::with_capacity(ops.len());
            for op in ops {
                stats.push(match *op {
                    Op::Create {
                        path,
                        data,
                        ephemeral,
                    } => Some(c.create(path, data, if ephemeral { id } else { 0 })?),
                    Op::SetData {
                        path,
                        data,
                        version,
                    } => Some(c.set(path, data, version)?),
                    Op::Delete { path, version } => {
                        c.delete(path, version)?;
                        None
                    }
                });
            }
            let fired = c.fired;
            t.nodes = nodes;
            t.zxid = zxid;
            t.fire(fired);
            Ok(stats)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn versions_children_and_fenced_multi_ops() {
        run(async {
            let e = Ensemble::new();
            let s = e.connect();
            s.mkdir("/a/b").await.unwrap();
            let st = s.create("/a/b/c", b"x", false).await.unwrap();
            assert_eq!(st.version, 0);
            assert_eq!(s.set("/a/b/c", b"y", Some(0)).await.unwrap().version, 1);
            assert_eq!(
                s.set("/a/b/c", b"z", Some(0)).await,
                Err(ZkError::BadVersion("/a/b/c".into()))
            );
            assert_eq!(s.children("/a").await.unwrap(), Some(vec!["b".to_string()]));
            assert_eq!(
                s.create("/x/y", b"", false).await,
                Err(ZkError::NoNode("/x/y".into()))
            );
            let ops = [
                Op::Create {
                    path: "/a/d",
                    data: b"1",
                    ephemeral: false,
                },
                Op::Delete {
                    path: "/missing",
                    version: None,
                },
            ];
            assert_eq!(
                s.multi(Some(("/a/b/c", 1)), &ops).await,
                Err(ZkError::NoNode("/missing".into()))
            );
            assert_eq!(
                s.get("/a/d").await.unwrap(),
                None,
                "nothing of a failed multi"
            );
            assert!(matches!(
                s.multi(Some(("/a/b/c", 0)), &ops[..1]).await,
                Err(ZkError::Fenced { .. })
            ));
            s.multi(Some(("/a/b/c", 1)), &ops[..1]).await.unwrap();
            assert_eq!(s.get("/a/d").await.unwrap().unwrap().0, b"1");
            let p = s.create_sequential("/a/seq-", b"").await.unwrap();
            assert_eq!(p, "/a/seq-0000000002");
        });
    }

    #[test]
    fn expiry_deletes_ephemerals_and_fires_watches() {
        run(async {
            let e = Ensemble::new();
            let a = e.connect();
            let b = e.connect();
            a.mkdir("/brokers/ids").await.unwrap();
            let st = a.register_ephemeral("/brokers/ids/1", b"r").await.unwrap();
            assert_eq!((st.version, st.ephemeral_owner), (1, a.id()));
            let (_, gone) = b.children_and_watch("/brokers/ids").await.unwrap();
            let (_, own) = a.get_and_watch("/brokers/ids/1").await.unwrap();
            e.expire(a.id());
            assert_eq!(
                gone.await.unwrap(),
                WatchEvent::ChildrenChanged("/brokers/ids".into())
            );
            assert_eq!(
                own.await.unwrap(),
                WatchEvent::Session(SessionEvent::Expired)
            );
            assert_eq!(a.get("/").await, Err(ZkError::SessionExpired));
            assert_eq!(b.children("/brokers/ids").await.unwrap(), Some(vec![]));
            assert_eq!(*a.events().borrow(), SessionEvent::Expired);
        });
    }
}
