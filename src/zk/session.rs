//! A ZooKeeper session (the `zookeeper-client` crate) with the operations Kafka's
//! ZooKeeper mode needs, and the rule Kafka follows for its end: an expired session is
//! gone for good. Its ephemeral znodes are deleted and its watches will never fire, so
//! the owner must create a new session, register again and re-read everything; this type
//! reports expiry as `SessionEvent::Expired` and then fails every call with
//! `ZkError::SessionExpired`, and never reconnects to a new session by itself.
//!
//! A disconnection is not an expiry: the client reconnects to any server of the ensemble
//! and the session carries on while the server has not expired it.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use zookeeper_client as zk;

use crate::metrics::histogram::LatencyHistogram;

pub use zk::Stat;

/// What `zookeeper.connect` and its timeouts say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkConfig {
    /// Set for sessions on an in-process ensemble (tests, the simulation): no server.
    pub memory: Option<super::memory::Ensemble>,
    /// `host:port[,host:port...]`.
    pub servers: String,
    /// The path every znode lives under (`/kafka` in `host:port/kafka`), if any.
    pub chroot: Option<String>,
    /// `zookeeper.session.timeout.ms` (Kafka's default 18000).
    pub session_timeout: Duration,
    /// `zookeeper.connection.timeout.ms` (Kafka's default: the session timeout).
    pub connection_timeout: Duration,
}

impl ZkConfig {
    /// Reads a Kafka `zookeeper.connect` value: servers, then an optional chroot.
    pub fn new(
        connect: &str,
        session_timeout: Duration,
        connection_timeout: Option<Duration>,
    ) -> Result<ZkConfig, ZkError> {
        let (servers, chroot) = match connect.find('/') {
            Some(i) => (&connect[..i], Some(connect[i..].trim_end_matches('/'))),
            None => (connect, None),
        };
        if servers.is_empty() {
            return Err(ZkError::BadConfig(format!("no servers in {connect:?}")));
        }
        let chroot = chroot.filter(|c| !c.is_empty()).map(str::to_string);
        if chroot.as_deref().is_some_and(|c| c.contains("//")) {
            return Err(ZkError::BadConfig(format!("bad chroot in {connect:?}")));
        }
        Ok(ZkConfig {
            memory: None,
            servers: servers.to_string(),
            chroot,
            session_timeout,
            connection_timeout: connection_timeout.unwrap_or(session_timeout),
        })
    }

    /// Sessions on `ensemble`, in this process.
    pub fn in_memory(ensemble: super::memory::Ensemble, session_timeout: Duration) -> ZkConfig {
        ZkConfig {
            memory: Some(ensemble),
            servers: "in-memory".into(),
            chroot: None,
            session_timeout,
            connection_timeout: session_timeout,
        }
    }
}

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ZkError {
    #[error("bad zookeeper.connect: {0}")]
    BadConfig(String),
    /// Terminal: start a new session.
    #[error("ZooKeeper session expired")]
    SessionExpired,
    #[error("no znode {0}")]
    NoNode(String),
    #[error("znode {0} exists")]
    NodeExists(String),
    #[error("znode {0} is not at the expected version")]
    BadVersion(String),
    /// A fenced multi-op's check failed: the fencing znode (for a controller,
    /// `/controller_epoch`) changed, so nothing was written.
    #[error("fenced: {path} is no longer at version {version}")]
    Fenced { path: String, version: i32 },
    #[error("ZooKeeper: {0}")]
    Other(String),
}

impl ZkError {
    fn at(path: &str, e: zk::Error) -> ZkError {
        match e {
            zk::Error::SessionExpired => ZkError::SessionExpired,
            zk::Error::NoNode => ZkError::NoNode(path.to_string()),
            zk::Error::NodeExists => ZkError::NodeExists(path.to_string()),
            zk::Error::BadVersion => ZkError::BadVersion(path.to_string()),
            e => ZkError::Other(e.to_string()),
        }
    }
}

/// A change of the session's state, as its owner needs to act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionEvent {
    /// Connected to a server again after a disconnection; the session lives on.
    Reconnected,
    /// Lost the connection; the client is reconnecting and the session may yet survive.
    Disconnected,
    /// Terminal: the session and its ephemeral znodes are gone.
    Expired,
    /// Terminal: authentication failed.
    AuthFailed,
    /// Terminal: closed by this process.
    Closed,
}

impl SessionEvent {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            SessionEvent::Expired | SessionEvent::AuthFailed | SessionEvent::Closed
        )
    }

    fn from_state(state: zk::SessionState) -> SessionEvent {
        match state {
            zk::SessionState::Disconnected => SessionEvent::Disconnected,
            zk::SessionState::Expired => SessionEvent::Expired,
            zk::SessionState::AuthFailed => SessionEvent::AuthFailed,
            zk::SessionState::Closed => SessionEvent::Closed,
            _ => SessionEvent::Reconnected,
        }
    }
}

/// The session's state changes, in order; after a terminal event there are no more.
pub struct SessionEvents(EventSource);

enum EventSource {
    Client(zk::StateWatcher),
    Memory(tokio::sync::watch::Receiver<SessionEvent>),
}

impl SessionEvents {
    /// The next change; a terminal event is returned again on every later call.
    pub async fn next(&mut self) -> SessionEvent {
        match &mut self.0 {
            EventSource::Client(w) => SessionEvent::from_state(w.changed().await),
            EventSource::Memory(rx) => {
                let now = *rx.borrow_and_update();
                if now.is_terminal() {
                    return now;
                }
                match rx.changed().await {
                    Ok(()) => *rx.borrow_and_update(),
                    Err(_) => SessionEvent::Closed,
                }
            }
        }
    }
}

/// What a one-shot watch saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    Created(String),
    Deleted(String),
    DataChanged(String),
    ChildrenChanged(String),
    /// The session ended before the znode changed.
    Session(SessionEvent),
}

/// A one-shot watch left by a read; fires once.
pub struct Watch(WatchSource);

enum WatchSource {
    Client(zk::OneshotWatcher),
    Memory(tokio::sync::oneshot::Receiver<WatchEvent>),
}

impl Watch {
    pub async fn changed(self) -> WatchEvent {
        let w = match self.0 {
            WatchSource::Client(w) => w,
            WatchSource::Memory(rx) => {
                return rx
                    .await
                    .unwrap_or(WatchEvent::Session(SessionEvent::Closed))
            }
        };
        let event = w.changed().await;
        match event.event_type {
            zk::EventType::NodeCreated => WatchEvent::Created(event.path),
            zk::EventType::NodeDeleted => WatchEvent::Deleted(event.path),
            zk::EventType::NodeDataChanged => WatchEvent::DataChanged(event.path),
            zk::EventType::NodeChildrenChanged => WatchEvent::ChildrenChanged(event.path),
            zk::EventType::Session => {
                WatchEvent::Session(SessionEvent::from_state(event.session_state))
            }
        }
    }
}

/// One write of a fenced multi-op.
#[derive(Debug, Clone)]
pub enum Op<'a> {
    Create {
        path: &'a str,
        data: &'a [u8],
        ephemeral: bool,
    },
    SetData {
        path: &'a str,
        data: &'a [u8],
        version: Option<i32>,
    },
    Delete {
        path: &'a str,
        version: Option<i32>,
    },
}

impl Op<'_> {
    fn path(&self) -> &str {
        match self {
            Op::Create { path, .. } | Op::SetData { path, .. } | Op::Delete { path, .. } => path,
        }
    }
}

const PERSISTENT: zk::CreateOptions<'static> =
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
const EPHEMERAL: zk::CreateOptions<'static> =
    zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all());
const PERSISTENT_SEQUENTIAL: zk::CreateOptions<'static> =
    zk::CreateMode::PersistentSequential.with_acls(zk::Acls::anyone_all());

/// One ZooKeeper session, rooted at the configured chroot; on a server, or on an
/// in-process ensemble (`memory`) when the config names one.
pub struct ZkSession {
    backend: Backend,
    /// Where each request's time to its answer is recorded (Kafka's
    /// `ZooKeeperRequestLatencyMs`), once the owner gives one.
    latency: OnceLock<Arc<LatencyHistogram>>,
}

enum Backend {
    Client(zk::Client),
    /// With the session timeout it was opened with.
    Memory(super::memory::Session, Duration),
}

impl ZkSession {
    /// Opens a session within `connection_timeout`. A missing chroot is created first, as
    /// Kafka does (`KafkaZkClient.createChrootIfNecessary`).
    pub async fn connect(config: &ZkConfig) -> Result<ZkSession, ZkError> {
        if let Some(ensemble) = &config.memory {
            let memory = Backend::Memory(ensemble.connect(), config.session_timeout);
            return Ok(ZkSession::on(memory));
        }
        let connect = || async {
            let connecting = zk::Client::connector()
                .with_session_timeout(config.session_timeout)
                .connect(&config.servers);
            match tokio::time::timeout(config.connection_timeout, connecting).await {
                Ok(Ok(client)) => Ok(client),
                Ok(Err(e)) => Err(ZkError::at(&config.servers, e)),
                Err(_) => Err(ZkError::Other(format!(
                    "no ZooKeeper session with {} within {:?}",
                    config.servers, config.connection_timeout
                ))),
            }
        };
        let client = connect().await?;
        let Some(chroot) = &config.chroot else {
            return Ok(ZkSession::on(Backend::Client(client)));
        };
        match client.mkdir(chroot, &PERSISTENT).await {
            Ok(()) | Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(ZkError::at(chroot, e)),
        }
        let client = client
            .chroot(chroot.as_str())
            .map_err(|_| ZkError::BadConfig(format!("bad chroot {chroot:?}")))?;
        Ok(ZkSession::on(Backend::Client(client)))
    }

    fn on(backend: Backend) -> ZkSession {
        ZkSession {
            backend,
            latency: OnceLock::new(),
        }
    }

    /// Records the time of each request to a server from now on in `latency` (the first
    /// histogram given is kept).
    pub fn record_latency_in(&self, latency: Arc<LatencyHistogram>) {
        let _ = self.latency.set(latency);
    }

    /// `request`, its time to the answer recorded.
    async fn timed<T>(&self, request: impl Future<Output = T>) -> T {
        let Some(latency) = self.latency.get() else {
            return request.await;
        };
        let sent = Instant::now();
        let answer = request.await;
        latency.observe(sent.elapsed());
        answer
    }

    pub fn session_id(&self) -> i64 {
        match &self.backend {
            Backend::Client(c) => c.session_id().0,
            Backend::Memory(m, _) => m.id(),
        }
    }

    /// The timeout the server granted (within its tickTime bounds).
    pub fn session_timeout(&self) -> Duration {
        match &self.backend {
            Backend::Client(c) => c.session_timeout(),
            Backend::Memory(_, timeout) => *timeout,
        }
    }

    /// Session state changes from now on.
    pub fn events(&self) -> SessionEvents {
        SessionEvents(match &self.backend {
            Backend::Client(c) => EventSource::Client(c.state_watcher()),
            Backend::Memory(m, _) => EventSource::Memory(m.events()),
        })
    }

    /// The server's client, or the in-memory session `memory` is given to.
    fn client(&self) -> Result<&zk::Client, &super::memory::Session> {
        match &self.backend {
            Backend::Client(c) => Ok(c),
            Backend::Memory(m, _) => Err(m),
        }
    }

    /// Creates a persistent znode and any missing parents (empty), like Kafka's
    /// `createRecursive`. Fails with `NodeExists` if the znode itself exists.
    pub async fn create_recursive(&self, path: &str, data: &[u8]) -> Result<Stat, ZkError> {
        if let Some((parent, _)) = path.rsplit_once('/').filter(|(p, _)| !p.is_empty()) {
            self.ensure_path(parent).await?;
        }
        self.create(path, data, &PERSISTENT).await
    }

    /// Creates a persistent znode and its parents unless it exists.
    pub async fn ensure_path(&self, path: &str) -> Result<(), ZkError> {
        let c = match self.client() {
            Ok(c) => c,
            Err(m) => return m.mkdir(path).await,
        };
        match self.timed(c.mkdir(path, &PERSISTENT)).await {
            Ok(()) | Err(zk::Error::NodeExists) => Ok(()),
            Err(e) => Err(ZkError::at(path, e)),
        }
    }

    /// An ephemeral znode, deleted when the session ends. Its `czxid` is what Kafka uses
    /// as the broker epoch of a `/brokers/ids/<id>` registration.
    pub async fn create_ephemeral(&self, path: &str, data: &[u8]) -> Result<Stat, ZkError> {
        if let Err(m) = self.client() {
            return m.create(path, data, true).await;
        }
        self.create(path, data, &EPHEMERAL).await
    }

    /// A persistent sequential znode (`<prefix><10-digit sequence>`); returns its path.
    pub async fn create_sequential(&self, prefix: &str, data: &[u8]) -> Result<String, ZkError> {
        let c = match self.client() {
            Ok(c) => c,
            Err(m) => return m.create_sequential(prefix, data).await,
        };
        let (_, seq) = self
            .timed(c.create(prefix, data, &PERSISTENT_SEQUENTIAL))
            .await
            .map_err(|e| ZkError::at(prefix, e))?;
        Ok(format!("{prefix}{seq}"))
    }

    async fn create(
        &self,
        path: &str,
        data: &[u8],
        options: &zk::CreateOptions<'_>,
    ) -> Result<Stat, ZkError> {
        let c = match self.client() {
            Ok(c) => c,
            // Persistent: `create_ephemeral` answers in-memory sessions itself.
            Err(m) => return m.create(path, data, false).await,
        };
        let (stat, _) = self
            .timed(c.create(path, data, options))
            .await
            .map_err(|e| ZkError::at(path, e))?;
        Ok(stat)
    }

    /// The znode's data and stat, or None if it does not exist.
    pub async fn get(&self, path: &str) -> Result<Option<(Vec<u8>, Stat)>, ZkError> {
        let c = match self.client() {
            Ok(c) => c,
            Err(m) => return m.get(path).await,
        };
        match self.timed(c.get_data(path)).await {
            Ok(found) => Ok(Some(found)),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(ZkError::at(path, e)),
        }
    }

    /// Like `get`, and watches the znode: the watch fires when it is created, changed or
    /// deleted (Kafka's `registerZNodeChangeHandlerAndCheckExistence`).
    pub async fn get_and_watch(
        &self,
        path: &str,
    ) -> Result<(Option<(Vec<u8>, Stat)>, Watch), ZkError> {
        let c = match self.client() {
            Ok(c) => c,
            Err(m) => {
                let (found, rx) = m.get_and_watch(path).await?;
                return Ok((found, Watch(WatchSource::Memory(rx))));
            }
        };
        match self.timed(c.get_and_watch_data(path)).await {
            Ok((data, stat, watcher)) => {
                Ok((Some((data, stat)), Watch(WatchSource::Client(watcher))))
            }
            Err(zk::Error::NoNode) => {
                // Gone between the two calls? Then the exists-watch sees it come back.
                let (stat, watcher) = self
                    .timed(c.check_and_watch_stat(path))
                    .await
                    .map_err(|e| ZkError::at(path, e))?;
                let watch = Watch(WatchSource::Client(watcher));
                match stat {
                    None => Ok((None, watch)),
                    Some(_) => match self.timed(c.get_data(path)).await {
                        Ok(found) => Ok((Some(found), watch)),
                        Err(zk::Error::NoNode) => Ok((None, watch)),
                        Err(e) => Err(ZkError::at(path, e)),
                    },
                }
            }
            Err(e) => Err(ZkError::at(path, e)),
        }
    }

    /// The znode's children (names, unordered), or None if it does not exist.
    pub async fn children(&self, path: &str) -> Result<Option<Vec<String>>, ZkError> {
        let c = match self.client() {
            Ok(c) => c,
            Err(m) => return m.children(path).await,
        };
        match self.timed(c.list_children(path)).await {
            Ok(children) => Ok(Some(children)),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(ZkError::at(path, e)),
        }
    }

    /// The znode's children, watching for a child added or removed (or the znode deleted).
    pub async fn children_and_watch(&self, path: &str) -> Result<(Vec<String>, Watch), ZkError> {
        let c = match self.client() {
            Ok(c) => c,
            Err(m) => {
                let (children, rx) = m.children_and_watch(path).await?;
                return Ok((children, Watch(WatchSource::Memory(rx))));
            }
        };
        let (children, watcher) = self
            .timed(c.list_and_watch_children(path))
            .await
            .map_err(|e| ZkError::at(path, e))?;
        Ok((children, Watch(WatchSource::Client(watcher))))
    }

    /// Replaces the data if the znode is at `version` (any version with None).
    pub async fn set(
        &self,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> Result<Stat, ZkError> {
        let c = match self.client() {
            Ok(c) => c,
            Err(m) => return m.set(path, data, version).await,
        };
        self.timed(c.set_data(path, data, version))
            .await
            .map_err(|e| ZkError::at(path, e))
    }

    pub async fn delete(&self, path: &str, version: Option<i32>) -> Result<(), ZkError> {
        let c = match self.client() {
            Ok(c) => c,
            Err(m) => return m.delete(path, version).await,
        };
        self.timed(c.delete(path, version))
            .await
            .map_err(|e| ZkError::at(path, e))
    }

    /// Registers an ephemeral znode as Kafka's `CheckedEphemeral` does: created empty and
    /// filled by a version-0 set in the same multi-op, so its data version is 1 like a
    /// Kafka broker's. Returns the stat after the set (its `czxid` is the broker epoch).
    pub async fn register_ephemeral(&self, path: &str, data: &[u8]) -> Result<Stat, ZkError> {
        let c = match self.client() {
            Ok(c) => c,
            Err(m) => return m.register_ephemeral(path, data).await,
        };
        let mut writer = c.new_multi_writer();
        writer
            .add_create(path, &[], &EPHEMERAL)
            .map_err(|e| ZkError::at(path, e))?;
        writer
            .add_set_data(path, data, Some(0))
            .map_err(|e| ZkError::at(path, e))?;
        let results = self.timed(writer.commit()).await.map_err(|e| match e {
            zk::MultiWriteError::RequestFailed { source }
            | zk::MultiWriteError::OperationFailed { source, .. } => ZkError::at(path, source),
        })?;
        results
            .into_iter()
            .find_map(|r| match r {
                zk::MultiWriteResult::SetData { stat } => Some(stat),
                _ => None,
            })
            .ok_or_else(|| ZkError::Other(format!("no stat for {path} in the multi-op's answer")))
    }

    /// The znode's stat, or None if it does not exist.
    pub async fn stat(&self, path: &str) -> Result<Option<Stat>, ZkError> {
        let c = match self.client() {
            Ok(c) => c,
            Err(m) => return m.stat(path).await,
        };
        self.timed(c.check_stat(path))
            .await
            .map_err(|e| ZkError::at(path, e))
    }

    /// Applies `ops` atomically if and only if `check_path` is still at `check_version`:
    /// how Kafka's controller makes every write conditional on `/controller_epoch`, so a
    /// controller that lost its election changes nothing. Returns the stat of each created
    /// or updated znode (None for deletes).
    pub async fn multi_checked(
        &self,
        check_path: &str,
        check_version: i32,
        ops: &[Op<'_>],
    ) -> Result<Vec<Option<Stat>>, ZkError> {
        let c = match self.client() {
            Ok(c) => c,
            Err(m) => return m.multi(Some((check_path, check_version)), ops).await,
        };
        let mut writer = c
            .new_check_writer(check_path, Some(check_version))
            .map_err(|e| ZkError::at(check_path, e))?;
        for op in ops {
            let added = match op {
                Op::Create {
                    path,
                    data,
                    ephemeral,
                } => {
                    let options = if *ephemeral { &EPHEMERAL } else { &PERSISTENT };
                    writer.add_create(path, data, options)
                }
                Op::SetData {
                    path,
                    data,
                    version,
                } => writer.add_set_data(path, data, *version),
                Op::Delete { path, version } => writer.add_delete(path, *version),
            };
            added.map_err(|e| ZkError::at(op.path(), e))?;
        }
        match self.timed(writer.commit()).await {
            Ok(results) => Ok(results
                .into_iter()
                .map(|r| match r {
                    zk::MultiWriteResult::Create { stat, .. }
                    | zk::MultiWriteResult::SetData { stat } => Some(stat),
                    _ => None,
                })
                .collect()),
            Err(zk::CheckWriteError::CheckFailed {
                source: zk::Error::BadVersion | zk::Error::NoNode,
            }) => Err(ZkError::Fenced {
                path: check_path.to_string(),
                version: check_version,
            }),
            Err(zk::CheckWriteError::CheckFailed { source }) => {
                Err(ZkError::at(check_path, source))
            }
            Err(zk::CheckWriteError::OperationFailed { index, source }) => {
                let path = ops.get(index).map_or(check_path, Op::path);
                Err(ZkError::at(path, source))
            }
            Err(zk::CheckWriteError::RequestFailed { source }) => {
                Err(ZkError::at(check_path, source))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_string_splits_servers_and_chroot() {
        let t = Duration::from_secs(18);
        let c = ZkConfig::new("a:2181,b:2181/kafka/prod", t, None).unwrap();
        assert_eq!(c.servers, "a:2181,b:2181");
        assert_eq!(c.chroot.as_deref(), Some("/kafka/prod"));
        assert_eq!(c.connection_timeout, t);
        let c = ZkConfig::new("a:2181/", t, Some(Duration::from_secs(1))).unwrap();
        assert_eq!(c.chroot, None);
        assert!(ZkConfig::new("/kafka", t, None).is_err());
        assert!(ZkConfig::new("a:1//x", t, None).is_err());
    }
}
