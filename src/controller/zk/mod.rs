//! ZooKeeper mode: skua as a member of a Kafka 3.9 ZooKeeper-mode cluster, beside Apache
//! Kafka brokers, speaking Kafka's own cluster protocol (Kafka's `KafkaController`).
//!
//! The map, in the order things happen:
//! - `registration`: on every new session, Kafka's top-level paths, `/cluster/id`, and
//!   this broker's ephemeral `/brokers/ids/<id>` (its czxid is the broker epoch).
//! - `event_loop`: every member's controller module. It competes for `/controller`
//!   (`election`); while elected it owns the `context`, reacts to the cluster
//!   (`cluster_events`) through the partition and replica state machines
//!   (`states`, `partition_machine`, `replica_machine`, with `leader_election`'s rules),
//!   deletes topics (`deletion`), answers brokers (`broker_apis`, `producer_ids`) and
//!   tells them with `requests` sent through one ordered queue per broker (`channel`).
//!   Every write is fenced by the controller epoch (`store`).
//! - `member`: the session's supervisor: session expiry ends the loop; a new session
//!   registers again and starts a new loop, which re-reads everything.
//! - `admin`: CreateTopics, CreatePartitions, DeleteTopics and topic configs as Kafka's
//!   `AdminZkClient` writes them, with Kafka's `assignment`; only the active controller
//!   answers them (NOT_CONTROLLER elsewhere, as Kafka 3.9 does).
//! - `broker`: the broker side, on every member: the metadata cache UpdateMetadata
//!   fills, LeaderAndIsr and StopReplica turned into metadata deltas for the replica
//!   manager and the group coordinator, and controlled shutdown.
//!
//! [`ZkController`] is the seam with the rest of the broker: it implements
//! [`Controller`] from the broker side's metadata cache (the same answer on every
//! broker), and administration through the event loop when this broker is controller.

pub mod admin;
pub mod assignment;
pub mod broker;
mod broker_apis;
pub mod channel;
mod cluster_events;
mod cluster_requests;
pub mod context;
mod deletion;
pub mod election;
pub mod event_loop;
mod isr_change_events;
pub mod leader_and_isr;
pub mod leader_election;
mod log_dir_events;
mod member;
mod notifications;
mod partition_machine;
pub mod partition_reassignment;
pub mod producer_ids;
pub mod reassignment;
pub mod registration;
pub mod replica_election;
mod replica_machine;
pub mod requests;
#[cfg(test)]
mod sim;
pub mod states;
pub mod store;
#[cfg(test)]
mod testkit;
pub mod versions;
pub mod znode_checks;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kafka_protocol::error::ResponseError;
use parking_lot::{Mutex, RwLock};
use tokio::sync::mpsc;
use uuid::Uuid;

use self::context::LiveBroker;
use self::event_loop::{ControllerLoop, Event};
use super::{BrokerInfo, Controller, ControllerError, NewTopic, PartitionInfo, TopicInfo};
use crate::clock;
use crate::config::inter_broker_protocol::MetadataVersion;
use crate::config::BrokerConfig;
use crate::zk::session::{ZkConfig, ZkSession};
use crate::zk::znodes::{BrokerRegistration, EndPoint};

/// What ZooKeeper mode takes from `server.properties`.
#[derive(Debug, Clone)]
pub struct Settings {
    pub broker_id: i32,
    pub zk: ZkConfig,
    /// The advertised endpoints, as registered.
    pub endpoints: Vec<EndPoint>,
    /// The listener other brokers (and the controller) use.
    pub inter_broker_listener: String,
    /// `inter.broker.protocol.version`: the versions of the controller's requests.
    pub inter_broker_protocol: MetadataVersion,
    pub rack: Option<String>,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub unclean_leader_election: bool,
    pub delete_topic_enable: bool,
    /// `controller.socket.timeout.ms`: how long a controller request waits.
    pub controller_socket_timeout: Duration,
    /// How long admin requests wait for the controller to act on what they wrote.
    pub admin_timeout: Duration,
    /// `controlled.shutdown.*`.
    pub shutdown: broker::controlled_shutdown::ShutdownSettings,
    /// `auto.leader.rebalance.enable`.
    pub auto_leader_rebalance: bool,
    /// `leader.imbalance.check.interval.seconds`.
    pub leader_imbalance_check_interval: Duration,
    /// `leader.imbalance.per.broker.percentage`.
    pub leader_imbalance_per_broker_percentage: i32,
    /// TLS toward the other brokers' inter-broker listener (`None`: plain TCP).
    pub outbound_tls: Option<crate::tls::OutboundTls>,
    /// SASL toward the other brokers' inter-broker listener, with this broker's own
    /// credentials (`None`: no SASL).
    pub outbound_sasl: Option<crate::sasl::settings::ClientCredentials>,
    /// `password.encoder.*`: how dynamic password configs are kept in ZooKeeper (`None`:
    /// no `password.encoder.secret`, so none can be set or read).
    pub password_encoder: Option<crate::config::password_encoder::PasswordEncoder>,
    /// `password.encoder.old.secret`: the secret before a change; at startup the broker's
    /// stored password configs are encoded again under the new one.
    pub password_encoder_old: Option<crate::config::password_encoder::PasswordEncoder>,
}

impl Settings {
    pub fn from_config(config: &BrokerConfig) -> anyhow::Result<Option<Settings>> {
        let Some(connect) = &config.zookeeper_connect else {
            return Ok(None);
        };
        let typed = &config.zookeeper;
        let zk = ZkConfig::new(connect, typed.session_timeout, typed.connection_timeout)?;
        let endpoints = endpoints_of(config);
        let inter_broker_listener = config.inter_broker_listener();
        let outbound_tls = config.outbound_tls()?;
        let mut shutdown = broker::controlled_shutdown::ShutdownSettings::from_config(config);
        shutdown.outbound_tls = outbound_tls.clone();
        let outbound_sasl = crate::sasl::settings::inter_broker(config)?;
        shutdown.outbound_sasl = outbound_sasl.clone();
        Ok(Some(Settings {
            broker_id: config.broker_id,
            zk,
            endpoints,
            inter_broker_listener,
            inter_broker_protocol: config.replication.inter_broker_protocol_version,
            rack: config.rack.clone(),
            num_partitions: config.log.num_partitions,
            default_replication_factor: config.replication.default_replication_factor,
            unclean_leader_election: typed.unclean_leader_election,
            delete_topic_enable: config.delete_topic_enable,
            controller_socket_timeout: typed.controller_socket_timeout,
            admin_timeout: typed.request_timeout,
            shutdown,
            auto_leader_rebalance: typed.auto_leader_rebalance,
            leader_imbalance_check_interval: typed.leader_imbalance_check_interval,
            leader_imbalance_per_broker_percentage: typed.leader_imbalance_per_broker_percentage,
            outbound_tls,
            outbound_sasl,
            password_encoder: crate::config::password_encoder::from_config(config)
                .map_err(anyhow::Error::msg)?,
            password_encoder_old: crate::config::password_encoder::old_from_config(config)
                .map_err(anyhow::Error::msg)?,
        }))
    }
}

/// `config`'s advertised listeners as `/brokers/ids/<id>` lists them, each with its
/// security protocol from `listener.security.protocol.map`.
pub fn endpoints_of(config: &BrokerConfig) -> Vec<EndPoint> {
    let protocol_map = parse_protocol_map(config.get("listener.security.protocol.map"));
    config
        .advertised_listeners
        .iter()
        .map(|l| EndPoint {
            listener: l.name.clone(),
            security_protocol: protocol_map
                .get(&l.name)
                .cloned()
                .unwrap_or_else(|| l.name.clone()),
            host: l.host.clone(),
            port: l.port as i32,
        })
        .collect()
}

/// `listener.security.protocol.map` (`NAME:PROTOCOL,...`); Kafka's default maps each
/// protocol name to itself.
fn parse_protocol_map(value: Option<String>) -> BTreeMap<String, String> {
    value
        .unwrap_or_default()
        .split(',')
        .filter_map(|e| e.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// What the event loop publishes for the broker's request handlers.
#[derive(Default)]
struct Snapshot {
    controller_id: i32,
    active: bool,
    brokers: BTreeMap<i32, LiveBroker>,
    topics: BTreeMap<String, Arc<TopicInfo>>,
}

/// Whoever must carry this broker's current epoch (the replica layer, the log manager).
pub type EpochFollower = Arc<dyn Fn(i64) + Send + Sync>;

/// State shared between the member's tasks and the broker's request handlers.
pub struct Shared {
    settings: Arc<Settings>,
    cluster_id: String,
    /// The endpoints this broker registers: the settings' until the listeners change at
    /// runtime (KIP-226).
    advertised: RwLock<Vec<EndPoint>>,
    snapshot: RwLock<Snapshot>,
    /// The current event loop, None while there is no session.
    events: Mutex<Option<mpsc::UnboundedSender<Event>>>,
    session: Mutex<Option<Arc<ZkSession>>>,
    broker_epoch: std::sync::atomic::AtomicI64,
    /// Told each new broker epoch (every registration, also after a session expiry).
    epoch_followers: Mutex<Vec<EpochFollower>>,
    /// Bumped after every event the loop processed (admin requests wait on it).
    changed: tokio::sync::watch::Sender<u64>,
    /// Config overrides this broker wrote, by topic (newer than the controller's read).
    topic_configs: Mutex<BTreeMap<String, BTreeMap<String, String>>>,
    /// Producer ids: next to hand out, end of the claimed block.
    producer_ids: tokio::sync::Mutex<(i64, i64)>,
    /// This broker's side of the cluster protocol: the metadata cache, hosted replicas.
    pub broker: broker::BrokerSide,
    /// The session's state and events, for the metrics.
    pub session_metrics: crate::metrics::zookeeper::SessionMetrics,
    /// The controller's elections, for the metrics (marked while this broker is it).
    pub controller_stats: crate::metrics::controller::ControllerStats,
    pub(super) clock: Arc<dyn clock::Clock>,
    /// Set in tests and the simulation: controller requests are recorded, not sent.
    pub(super) outbox: Option<channel::Outbox>,
}

impl Shared {
    /// A member's shared state, no session's event loop started yet.
    pub(crate) fn new(
        settings: Arc<Settings>,
        cluster_id: String,
        session: Option<Arc<ZkSession>>,
        clock: Arc<dyn clock::Clock>,
        outbox: Option<channel::Outbox>,
    ) -> Shared {
        let broker = broker::BrokerSide::with_inter_broker_listener(
            settings.broker_id,
            &settings.inter_broker_listener,
        );
        let session_metrics = crate::metrics::zookeeper::SessionMetrics::default();
        if let Some(s) = &session {
            s.record_latency_in(session_metrics.request_latency.clone());
        }
        Shared {
            advertised: RwLock::new(settings.endpoints.clone()),
            settings,
            cluster_id,
            snapshot: RwLock::new(Snapshot {
                controller_id: -1,
                ..Snapshot::default()
            }),
            events: Mutex::new(None),
            session: Mutex::new(session),
            broker_epoch: std::sync::atomic::AtomicI64::new(-1),
            epoch_followers: Mutex::new(Vec::new()),
            changed: tokio::sync::watch::Sender::new(0),
            topic_configs: Mutex::new(BTreeMap::new()),
            producer_ids: tokio::sync::Mutex::new((0, 0)),
            broker,
            session_metrics,
            controller_stats: Default::default(),
            clock,
            outbox,
        }
    }

    /// What `/brokers/ids/<id>` holds for this broker now.
    fn registration(&self) -> BrokerRegistration {
        let now_ms = self.clock.now_ms();
        BrokerRegistration::new(&self.advertised.read(), self.settings.rack.clone(), now_ms)
    }

    fn set_controller_id(&self, id: i32) {
        let previous = std::mem::replace(&mut self.snapshot.write().controller_id, id);
        if previous != id {
            match id {
                -1 => tracing::info!(previous, "no controller"),
                _ => tracing::info!(controller = id, previous, "the controller changed"),
            }
        }
    }

    fn set_brokers(&self, brokers: &BTreeMap<i32, LiveBroker>) {
        self.snapshot.write().brokers = brokers.clone();
    }

    fn publish(&self, l: &ControllerLoop) {
        let active = l.is_active();
        let topics = if active {
            topics_of(l, &self.topic_configs.lock())
        } else {
            BTreeMap::new()
        };
        {
            let mut s = self.snapshot.write();
            s.active = active;
            s.topics = topics;
            if active {
                s.controller_id = self.settings.broker_id;
            }
        }
        self.changed.send_modify(|n| *n += 1);
    }

    fn forget_topic_configs(&self, topic: &str) {
        self.topic_configs.lock().remove(topic);
    }

    /// No session: nobody known to control, nothing published.
    fn reset(&self) {
        *self.snapshot.write() = Snapshot {
            controller_id: -1,
            ..Snapshot::default()
        };
        self.changed.send_modify(|n| *n += 1);
    }

    pub fn broker_epoch(&self) -> i64 {
        self.broker_epoch.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Records the epoch of a new registration and tells every follower.
    fn set_broker_epoch(&self, epoch: i64) {
        self.broker_epoch
            .store(epoch, std::sync::atomic::Ordering::Release);
        let followers = self.epoch_followers.lock().clone();
        for f in followers {
            f(epoch);
        }
    }

    fn session(&self) -> Result<Arc<ZkSession>, ControllerError> {
        self.session.lock().clone().ok_or_else(|| {
            ControllerError::new(ResponseError::NotController, "no ZooKeeper session")
        })
    }

    /// The event loop's sender when this broker is the active controller.
    fn active_events(&self) -> Option<mpsc::UnboundedSender<Event>> {
        if !self.snapshot.read().active {
            return None;
        }
        self.events.lock().clone()
    }
}

/// InitProducerId's answer while no producer id block can be claimed (no ZooKeeper
/// session, a ZooKeeper error, an unreadable `/latest_producer_id_block`). A Kafka 3.9
/// broker (inter.broker.protocol.version 3.0 and above) answers COORDINATOR_LOAD_IN_PROGRESS
/// whenever it holds no block, the allocation in flight or failed (`RPCProducerIdManager`):
/// producers retry it, where UNKNOWN_SERVER_ERROR is fatal to an idempotent Java producer.
fn no_producer_id_block(e: impl std::fmt::Display) -> ControllerError {
    tracing::warn!(error = %e, "cannot claim a producer id block");
    ControllerError::new(
        ResponseError::CoordinatorLoadInProgress,
        format!("no producer id block: {e}"),
    )
}

/// Topics as the `Controller` trait describes them, from the controller's context.
fn topics_of(
    l: &ControllerLoop,
    configs: &BTreeMap<String, BTreeMap<String, String>>,
) -> BTreeMap<String, Arc<TopicInfo>> {
    let ctx = &l.ctx;
    ctx.assignments
        .iter()
        .filter(|(t, _)| !ctx.is_topic_queued_for_deletion(t))
        .map(|(t, parts)| {
            let partitions = parts
                .iter()
                .map(|(&p, replicas)| {
                    let tp = context::TopicPartition::new(t.clone(), p);
                    let l = ctx.leadership.get(&tp).map(|l| &l.leader_and_isr);
                    partition_info(p, replicas, l)
                })
                .collect();
            let info = TopicInfo {
                name: t.clone(),
                topic_id: ctx.topic_ids.get(t).copied().unwrap_or(Uuid::nil()),
                partitions,
                // What this broker wrote last, else what was read at load.
                configs: configs
                    .get(t)
                    .or_else(|| ctx.topic_configs.get(t))
                    .cloned()
                    .unwrap_or_default(),
            };
            (t.clone(), Arc::new(info))
        })
        .collect()
}

/// A partition as the `Controller` trait describes it; no leader (-1) without a
/// leadership, and no log dirs (ZooKeeper mode does not assign them).
pub(crate) fn partition_info(
    partition: i32,
    replicas: &[i32],
    leadership: Option<&leader_and_isr::LeaderAndIsr>,
) -> PartitionInfo {
    PartitionInfo {
        partition,
        assignment: super::PartitionAssignment {
            replicas: replicas.to_vec(),
            directories: vec![Uuid::nil(); replicas.len()],
        },
        state: leadership.cloned().unwrap_or(super::LeaderAndIsr {
            leader_epoch: -1,
            partition_epoch: -1,
            ..super::LeaderAndIsr::initial(-1, Vec::new())
        }),
    }
}

/// The `Controller` of a ZooKeeper-mode broker.
pub struct ZkController {
    shared: Arc<Shared>,
    member: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Follows `/config/changes` (`broker::config_changes`).
    config_changes: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Other followers of ZooKeeper's notifications (the ACL store's), stopped with the
    /// member.
    followers: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl ZkController {
    /// Connects to ZooKeeper, agrees on the cluster id (`proposed_cluster_id`: the one in
    /// the log dirs' `meta.properties`, if any), and returns the controller with the
    /// cluster id. The member is not registered until [`ZkController::start`].
    pub async fn connect(
        settings: Settings,
        proposed_cluster_id: String,
    ) -> anyhow::Result<ZkController> {
        let settings = Arc::new(settings);
        let session = Arc::new(ZkSession::connect(&settings.zk).await?);
        registration::create_top_level_paths(&session).await?;
        producer_ids::repair_empty_block(&session, settings.broker_id).await?;
        let cluster_id =
            registration::create_or_get_cluster_id(&session, &proposed_cluster_id).await?;
        tracing::info!(cluster_id = %cluster_id, zookeeper = %settings.zk.servers, chroot = ?settings.zk.chroot, "connected to ZooKeeper");
        let shared = Arc::new(Shared::new(
            settings,
            cluster_id,
            Some(session),
            Arc::new(clock::SystemClock),
            None,
        ));
        // Before the broker opens its logs: the dynamic broker configs and the topic
        // configs ZooKeeper holds are in force from the start (this broker's password
        // configs first moved from `password.encoder.old.secret` to the new one).
        let session = shared.session()?;
        broker::config_changes::re_encode_passwords(&shared, &session).await?;
        broker::config_changes::read_all(&shared, &session).await?;
        Ok(ZkController {
            shared,
            member: Mutex::new(None),
            config_changes: Mutex::new(None),
            followers: Mutex::new(Vec::new()),
        })
    }

    /// The current session, if there is one (none between an expiry and the next one,
    /// and after [`ZkController::close`]).
    pub fn session(&self) -> Option<Arc<ZkSession>> {
        self.shared.session.lock().clone()
    }

    /// Keeps `follower` (a task following znodes) to stop it with the member.
    pub fn add_follower(&self, follower: tokio::task::JoinHandle<()>) {
        self.followers.lock().push(follower);
    }

    /// `connect` from a blocking thread, or a worker of a multi-threaded tokio runtime
    /// (`Broker::open` is synchronous), proposing `proposed_cluster_id` (the log dirs'
    /// or `cluster.id`) for `/cluster/id`.
    pub fn connect_blocking(
        settings: Settings,
        proposed_cluster_id: String,
    ) -> anyhow::Result<ZkController> {
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| anyhow::anyhow!("ZooKeeper mode needs a tokio runtime"))?;
        tokio::task::block_in_place(|| {
            handle.block_on(ZkController::connect(settings, proposed_cluster_id))
        })
    }

    /// Hosts `replicas` (the broker's replica manager: LeaderAndIsr and StopReplica act on
    /// them, and they follow this broker's epoch from its first registration on), then
    /// `start`s, from a blocking thread or a worker of a multi-threaded tokio runtime.
    pub fn start_blocking(&self, replicas: Arc<dyn broker::HostedReplicas>) -> anyhow::Result<()> {
        self.shared
            .broker
            .host_replicas(replicas.clone())
            .map_err(anyhow::Error::msg)?;
        // Before registering, so the first epoch and any later one (a new session after
        // an expiry registers again) reach the fetches, ISR changes and shutdown marker.
        self.follow_broker_epoch(Arc::new(move |epoch| replicas.set_broker_epoch(epoch)));
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| anyhow::anyhow!("ZooKeeper mode needs a tokio runtime"))?;
        tokio::task::block_in_place(|| handle.block_on(self.start()))
    }

    /// Registers this broker and starts competing for the controllership; from now on
    /// an expired session is replaced by a new one, registered again.
    pub async fn start(&self) -> anyhow::Result<()> {
        let session = self.shared.session()?;
        member::register(&self.shared, &session).await?;
        let handle = tokio::spawn(member::run(self.shared.clone(), session));
        *self.member.lock() = Some(handle);
        let follower = tokio::spawn(broker::config_changes::run(self.shared.clone()));
        *self.config_changes.lock() = Some(follower);
        Ok(())
    }

    /// Stops the member and closes its session (the last handle dropped sends
    /// CloseSession), waiting up to 2 s for ZooKeeper to confirm.
    pub fn close(&self) {
        if let Some(h) = self.member.lock().take() {
            h.abort();
        }
        for h in self.followers.lock().drain(..) {
            h.abort();
        }
        if let Some(h) = self.config_changes.lock().take() {
            h.abort();
        }
        *self.shared.events.lock() = None;
        self.shared.reset();
        let Some(session) = self.shared.session.lock().take() else {
            return;
        };
        let mut events = session.events();
        drop(session);
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let wait = async {
            let closed = async { while !events.next().await.is_terminal() {} };
            if tokio::time::timeout(Duration::from_secs(2), closed)
                .await
                .is_err()
            {
                tracing::warn!("ZooKeeper session not confirmed closed; it will expire");
            } else {
                tracing::info!("ZooKeeper session closed");
            }
        };
        tokio::task::block_in_place(|| handle.block_on(wait));
    }

    /// A topic of the metadata cache with its config overrides: as ZooKeeper had them
    /// at the last read (`broker::config_changes`, which follows every change), else
    /// what this broker wrote last, else what the controller (if this broker is it) read.
    fn with_configs(&self, t: &Arc<TopicInfo>) -> Arc<TopicInfo> {
        let configs = self
            .shared
            .broker
            .topic_configs(&t.name)
            .or_else(|| self.shared.topic_configs.lock().get(&t.name).cloned())
            .or_else(|| {
                let s = self.shared.snapshot.read();
                s.topics.get(&t.name).map(|c| c.configs.clone())
            });
        match configs {
            Some(configs) if configs != t.configs => Arc::new(TopicInfo {
                configs,
                ..(**t).clone()
            }),
            _ => t.clone(),
        }
    }

    /// The config overrides ZooKeeper holds for `topics` (`/config/topics/<t>`), for the
    /// logs LeaderAndIsr creates; a topic whose configs cannot be read gets none.
    pub async fn read_topic_configs(
        &self,
        topics: impl IntoIterator<Item = String>,
    ) -> BTreeMap<String, BTreeMap<String, String>> {
        /// Reads under way at once: round trips overlap, ZooKeeper is not flooded.
        const READS_AT_ONCE: usize = 32;
        let mut out = BTreeMap::new();
        let Ok(session) = self.shared.session() else {
            return out;
        };
        // Only legal names become znode paths (the callers check them already).
        let topics: Vec<String> = topics
            .into_iter()
            .filter(|t| crate::controller::topic_name::validate(t).is_ok())
            .collect();
        for chunk in topics.chunks(READS_AT_ONCE) {
            let reads = chunk.iter().map(|t| {
                let path = crate::zk::znodes::paths::entity_config(&format!("topics/{t}"));
                let session = &session;
                async move { (t, session.get(&path).await) }
            });
            for (t, read) in futures::future::join_all(reads).await {
                match read {
                    Ok(Some((data, _))) => {
                        match crate::zk::znodes::decode::<crate::zk::znodes::EntityConfig>(&data) {
                            Ok(c) => {
                                out.insert(t.clone(), c.config.0);
                            }
                            Err(e) => {
                                tracing::warn!(topic = %t, error = %e, "unreadable topic config znode")
                            }
                        }
                    }
                    Ok(None) => {
                        out.insert(t.clone(), BTreeMap::new());
                    }
                    Err(e) => tracing::warn!(topic = %t, error = %e, "cannot read topic configs"),
                }
            }
        }
        out
    }

    /// Calls `f` with this broker's epoch now (if registered) and after every new
    /// registration: a session that expired means a new znode and a new epoch.
    pub fn follow_broker_epoch(&self, f: EpochFollower) {
        self.shared.epoch_followers.lock().push(f.clone());
        let epoch = self.shared.broker_epoch();
        if epoch >= 0 {
            f(epoch);
        }
    }

    /// Asks the controller to move this broker's leaderships away (controlled shutdown).
    pub async fn controlled_shutdown(&self) -> bool {
        let settings = &self.shared.settings;
        let find = || {
            let id = self.controller_id();
            if id < 0 {
                return None;
            }
            let b = self.brokers().into_iter().find(|b| b.id == id)?;
            Some((id, format!("{}:{}", b.host, b.port)))
        };
        broker::controlled_shutdown::run(
            &settings.shutdown,
            settings.broker_id,
            &|| self.shared.broker_epoch(),
            &find,
        )
        .await
    }

    /// Wakes whoever waits on the published metadata (admin requests waiting for the
    /// cache to show what they wrote).
    pub fn metadata_changed(&self) {
        self.shared.changed.send_modify(|n| *n += 1);
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    pub fn settings(&self) -> &Settings {
        &self.shared.settings
    }

    pub fn is_active(&self) -> bool {
        self.shared.snapshot.read().active
    }

    /// Sends an event to the event loop of the active controller; None elsewhere.
    pub(crate) fn submit(&self, make: impl FnOnce() -> Event) -> bool {
        match self.shared.active_events() {
            Some(tx) => tx.send(make()).is_ok(),
            None => false,
        }
    }

    /// ElectLeaders as Kafka 3.9's `ReplicaManager.electLeaders` answers it: the
    /// controller's result per partition, where a partition that got a leader is
    /// reported once this broker's metadata shows that leader, REQUEST_TIMED_OUT if it
    /// does not within `timeout`. NOT_CONTROLLER for every partition elsewhere.
    pub async fn elect_leaders(
        &self,
        partitions: std::collections::BTreeSet<context::TopicPartition>,
        election: replica_election::ElectionType,
        timeout: Duration,
    ) -> replica_election::ElectionResults {
        let not_controller = |partitions: std::collections::BTreeSet<context::TopicPartition>| {
            partitions
                .into_iter()
                .map(|tp| (tp, Err((ResponseError::NotController, None))))
                .collect()
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        let asked = partitions.clone();
        if !self.submit(|| Event::ReplicaLeaderElection {
            partitions,
            election,
            reply,
        }) {
            return not_controller(asked);
        }
        let Ok(mut results) = answer.await else {
            return not_controller(asked);
        };
        let expected: Vec<(context::TopicPartition, i32)> = results
            .iter()
            .filter_map(|(tp, r)| r.as_ref().ok().map(|&l| (tp.clone(), l)))
            .collect();
        let shows = |z: &ZkController, tp: &context::TopicPartition, leader: i32| {
            z.topic(&tp.topic).is_some_and(|t| {
                t.partitions
                    .iter()
                    .any(|p| p.partition == tp.partition && p.state.leader == leader)
            })
        };
        self.wait_until(timeout, |z| expected.iter().all(|(tp, l)| shows(z, tp, *l)))
            .await;
        for (tp, leader) in expected {
            if !shows(self, &tp, leader) {
                results.insert(tp, Err((ResponseError::RequestTimedOut, None)));
            }
        }
        results
    }

    /// AlterPartitionReassignments as Kafka 3.9's controller answers it: per partition,
    /// started (or cancelled) or why not; NOT_CONTROLLER as a whole on other brokers.
    pub async fn alter_partition_reassignments(
        &self,
        reassignments: BTreeMap<context::TopicPartition, Option<Vec<i32>>>,
    ) -> Result<partition_reassignment::ReassignmentResults, ResponseError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        if !self.submit(|| Event::AlterPartitionReassignments {
            reassignments,
            reply,
        }) {
            return Err(ResponseError::NotController);
        }
        answer.await.unwrap_or(Err(ResponseError::NotController))
    }

    /// ListPartitionReassignments: the named partitions (or all) that are moving, with
    /// their full assignment; NOT_CONTROLLER on other brokers.
    pub async fn list_partition_reassignments(
        &self,
        partitions: Option<std::collections::BTreeSet<context::TopicPartition>>,
    ) -> Result<partition_reassignment::OngoingReassignments, ResponseError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        if !self.submit(|| Event::ListPartitionReassignments { partitions, reply }) {
            return Err(ResponseError::NotController);
        }
        answer.await.unwrap_or(Err(ResponseError::NotController))
    }

    /// Waits until `done` holds for the published state, or `timeout` passes.
    async fn wait_until(&self, timeout: Duration, done: impl Fn(&ZkController) -> bool) -> bool {
        let mut changed = self.shared.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if done(self) {
                return true;
            }
            match tokio::time::timeout_at(deadline, changed.changed()).await {
                Ok(Ok(())) => {}
                _ => return done(self),
            }
        }
    }
}

impl Drop for ZkController {
    fn drop(&mut self) {
        if let Some(h) = self.member.lock().take() {
            h.abort();
        }
        for h in self.followers.lock().drain(..) {
            h.abort();
        }
        if let Some(h) = self.config_changes.lock().take() {
            h.abort();
        }
    }
}

#[async_trait]
impl Controller for ZkController {
    fn cluster_id(&self) -> String {
        self.shared.cluster_id.clone()
    }

    /// The controller the last UpdateMetadata named (as every broker of the cluster
    /// answers), or before any, the one `/controller` names.
    fn controller_id(&self) -> i32 {
        let cache = self.shared.broker.cache();
        match cache.received() {
            true => cache.controller_id(),
            false => self.shared.snapshot.read().controller_id,
        }
    }

    /// The live brokers of the metadata cache, or before any UpdateMetadata, the ones
    /// registered in ZooKeeper (the controller's view).
    fn brokers(&self) -> Vec<BrokerInfo> {
        let listener = &self.shared.settings.inter_broker_listener;
        let cache = self.shared.broker.cache();
        if cache.received() {
            return cache.brokers().filter_map(|b| b.info(listener)).collect();
        }
        self.shared
            .snapshot
            .read()
            .brokers
            .values()
            .filter_map(|b| {
                let e = b.endpoint(listener).or_else(|| b.endpoints.first())?;
                Some(BrokerInfo {
                    id: b.id,
                    host: e.host.clone(),
                    port: e.port,
                    rack: b.rack.clone(),
                })
            })
            .collect()
    }

    /// From the metadata cache, the brokers with an endpoint on `listener`; before any
    /// UpdateMetadata, as `brokers`.
    fn brokers_on(&self, listener: &str) -> Vec<BrokerInfo> {
        let cache = self.shared.broker.cache();
        if !cache.received() {
            return self.brokers();
        }
        cache
            .brokers()
            .filter_map(|b| b.endpoint_info(listener))
            .collect()
    }

    /// Kafka's `updateBrokerInfo`: the new endpoints are written over this broker's
    /// registration (its epoch, the znode's creation, stays); the controller sees the
    /// change and tells every broker with UpdateMetadata.
    async fn advertise(&self, config: &BrokerConfig) -> Result<(), ControllerError> {
        let endpoints = endpoints_of(config);
        if *self.shared.advertised.read() == endpoints {
            return Ok(());
        }
        *self.shared.advertised.write() = endpoints;
        let data = crate::zk::znodes::encode(&self.shared.registration());
        let path = crate::zk::znodes::paths::broker(self.shared.settings.broker_id);
        let session = self
            .shared
            .session()
            .map_err(|e| ControllerError::new(ResponseError::UnknownServerError, e.to_string()))?;
        session
            .set(&path, &data, None)
            .await
            .map_err(|e| ControllerError::new(ResponseError::UnknownServerError, e.to_string()))?;
        tracing::info!(registration = %String::from_utf8_lossy(&data), "broker registration updated with the listeners now served");
        Ok(())
    }

    fn topics(&self) -> Vec<Arc<TopicInfo>> {
        let cache = self.shared.broker.cache();
        cache
            .image()
            .topics()
            .map(|t| self.with_configs(t))
            .collect()
    }

    fn topic(&self, name: &str) -> Option<Arc<TopicInfo>> {
        let cache = self.shared.broker.cache();
        cache.topic(name).map(|t| self.with_configs(t))
    }

    fn topic_by_id(&self, id: Uuid) -> Option<Arc<TopicInfo>> {
        let cache = self.shared.broker.cache();
        cache.image().topic_by_id(id).map(|t| self.with_configs(t))
    }

    fn offline_replicas(&self, topic: &str, partition: i32) -> Vec<i32> {
        self.shared
            .broker
            .cache()
            .offline_replicas(topic, partition)
    }

    async fn create_topic(
        &self,
        topic: NewTopic,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, ControllerError> {
        admin::create_topic(self, topic, validate_only).await
    }

    async fn auto_create_topics(
        &self,
        topics: Vec<NewTopic>,
    ) -> Vec<Result<Arc<TopicInfo>, ControllerError>> {
        let mut out = Vec::with_capacity(topics.len());
        for t in topics {
            out.push(admin::auto_create_topic(self, t).await);
        }
        out
    }

    async fn delete_topic(&self, name: &str) -> Result<Arc<TopicInfo>, ControllerError> {
        admin::delete_topic(self, name).await
    }

    async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        assignments: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, ControllerError> {
        admin::create_partitions(self, name, count, assignments, validate_only).await
    }

    async fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicInfo>, ControllerError> {
        admin::set_topic_configs(self, name, configs).await
    }

    async fn next_producer_id(&self) -> Result<i64, ControllerError> {
        let mut ids = self.shared.producer_ids.lock().await;
        if ids.0 >= ids.1 {
            let session = self.shared.session().map_err(no_producer_id_block)?;
            let first = producer_ids::allocate_block(&session, self.shared.settings.broker_id)
                .await
                .map_err(no_producer_id_block)?;
            *ids = (first, first + producer_ids::PRODUCER_ID_BLOCK_SIZE);
        }
        let id = ids.0;
        ids.0 += 1;
        Ok(id)
    }

    fn broker_epoch(&self) -> i64 {
        self.shared.broker_epoch()
    }

    /// Dynamic broker configs as ZooKeeper holds them (`/config/brokers/<id>`, and
    /// `<default>` for the empty name); ZooKeeper mode keeps no other resource's configs.
    fn resource_configs(&self, resource: &super::ConfigResource) -> BTreeMap<String, String> {
        if resource.resource_type != super::records::CONFIG_RESOURCE_BROKER {
            return BTreeMap::new();
        }
        self.shared
            .broker
            .cache()
            .image()
            .resource_configs(resource)
            .cloned()
            .unwrap_or_default()
    }

    fn client_quotas(&self) -> crate::quota::configs::ClientQuotas {
        self.shared.broker.cache().image().client_quotas().clone()
    }

    async fn describe_client_quotas(
        &self,
    ) -> Result<crate::quota::configs::ClientQuotas, ControllerError> {
        broker::client_quotas::read_znodes(&self.shared).await
    }

    async fn alter_client_quotas(
        &self,
        alterations: Vec<crate::quota::configs::Alteration>,
        validate_only: bool,
    ) -> Result<Vec<Result<(), ControllerError>>, ControllerError> {
        broker::client_quotas::alter(&self.shared, alterations, validate_only).await
    }

    /// Writes dynamic broker configs to `/config/brokers/<id>` (or `<default>`) with a
    /// change notification, as a Kafka 3.9 broker does, and puts them in force here at
    /// once; every other broker follows the notification.
    async fn set_resource_configs(
        &self,
        resource: super::ConfigResource,
        configs: BTreeMap<String, String>,
    ) -> Result<(), ControllerError> {
        if resource.resource_type != super::records::CONFIG_RESOURCE_BROKER {
            return Err(ControllerError::new(
                ResponseError::InvalidRequest,
                format!(
                    "configs of resource type {} are not kept in ZooKeeper mode",
                    resource.resource_type
                ),
            ));
        }
        let entity = match resource.name.is_empty() {
            true => broker::config_changes::DEFAULT_BROKER,
            false => resource.name.as_str(),
        };
        // Password configs go to ZooKeeper encoded, as a Kafka 3.9 broker writes them.
        let stored = crate::config::password_encoder::to_persistent(
            &configs,
            self.shared.settings.password_encoder.as_ref(),
            !resource.name.is_empty(),
        )
        .map_err(|why| ControllerError::new(ResponseError::InvalidConfig, why))?;
        let session = self.shared.session()?;
        broker::config_changes::write_entity_config(
            &session,
            &format!("brokers/{entity}"),
            &stored,
        )
        .await
        .map_err(|e| ControllerError::new(ResponseError::UnknownServerError, e.to_string()))?;
        self.shared
            .broker
            .apply_broker_configs(&resource.name, configs);
        Ok(())
    }

    /// Deltas come from the controller's LeaderAndIsr, UpdateMetadata and StopReplica
    /// (see `broker`).
    fn subscribe(
        &self,
        listener: Arc<dyn super::delta::MetadataListener>,
    ) -> Vec<super::delta::ApplyError> {
        self.shared.broker.subscribe(listener)
    }

    fn shutdown(&self) {
        self.close();
    }

    fn scram_credential(
        &self,
        mechanism: crate::sasl::scram::ScramMechanism,
        user: &str,
    ) -> Option<crate::sasl::scram::ScramCredential> {
        self.shared.broker.scram_users.get(mechanism, user)
    }

    fn scram_credentials(&self) -> Vec<(String, crate::sasl::scram::ScramMechanism, u32)> {
        self.shared.broker.scram_users.list()
    }

    /// Rewrites each user's `/config/users/<sanitized name>` (its other configs, quotas,
    /// kept) with a change notification, as a Kafka 3.9 broker does, and puts the
    /// credentials in force here at once; every other broker follows the notification.
    async fn alter_scram_credentials(
        &self,
        changes: Vec<super::ScramChange>,
    ) -> Result<(), ControllerError> {
        let failed = |e: crate::zk::session::ZkError| {
            ControllerError::new(ResponseError::UnknownServerError, e.to_string())
        };
        let session = self.shared.session()?;
        let mut by_user: BTreeMap<String, Vec<super::ScramChange>> = BTreeMap::new();
        for c in changes {
            by_user.entry(c.user.clone()).or_default().push(c);
        }
        for (user, changes) in by_user {
            let entity = format!("users/{}", broker::scram_users::sanitize(&user));
            let mut configs = broker::config_changes::read_configs(&session, &entity)
                .await
                .map_err(failed)?;
            for c in changes {
                match c.credential {
                    Some(cred) => {
                        configs.insert(c.mechanism.name().to_string(), cred.to_kafka_string())
                    }
                    None => configs.remove(c.mechanism.name()),
                };
            }
            broker::config_changes::write_entity_config(&session, &entity, &configs)
                .await
                .map_err(failed)?;
            self.shared.broker.scram_users.apply(&user, &configs);
        }
        Ok(())
    }

    fn zk(&self) -> Option<&ZkController> {
        Some(self)
    }

    async fn alter_partition(
        &self,
        request: kafka_protocol::messages::AlterPartitionRequest,
        version: i16,
    ) -> kafka_protocol::messages::AlterPartitionResponse {
        self.alter_partition_request(request, version).await
    }

    async fn controlled_shutdown_of(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<Vec<context::TopicPartition>, ResponseError> {
        self.controlled_shutdown_request(broker_id, broker_epoch)
            .await
    }

    async fn allocate_producer_ids(
        &self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> Result<(i64, i32), ResponseError> {
        self.allocate_producer_ids_request(broker_id, broker_epoch)
            .await
    }

    async fn elect_leaders(
        &self,
        partitions: std::collections::BTreeSet<context::TopicPartition>,
        election: replica_election::ElectionType,
        timeout: Duration,
    ) -> replica_election::ElectionResults {
        ZkController::elect_leaders(self, partitions, election, timeout).await
    }

    async fn alter_partition_reassignments(
        &self,
        reassignments: BTreeMap<context::TopicPartition, Option<Vec<i32>>>,
    ) -> Result<partition_reassignment::ReassignmentResults, ResponseError> {
        ZkController::alter_partition_reassignments(self, reassignments).await
    }

    async fn list_partition_reassignments(
        &self,
        partitions: Option<std::collections::BTreeSet<context::TopicPartition>>,
    ) -> Result<partition_reassignment::OngoingReassignments, ResponseError> {
        ZkController::list_partition_reassignments(self, partitions).await
    }

    async fn leader_and_isr(
        &self,
        request: kafka_protocol::messages::LeaderAndIsrRequest,
        version: i16,
    ) -> kafka_protocol::messages::LeaderAndIsrResponse {
        self.leader_and_isr_request(request, version).await
    }

    async fn update_metadata(
        &self,
        request: kafka_protocol::messages::UpdateMetadataRequest,
    ) -> kafka_protocol::messages::UpdateMetadataResponse {
        self.update_metadata_request(request).await
    }

    async fn stop_replica(
        &self,
        request: kafka_protocol::messages::StopReplicaRequest,
    ) -> kafka_protocol::messages::StopReplicaResponse {
        self.stop_replica_request(request).await
    }
}
