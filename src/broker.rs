//! The broker's shared state and the metadata operations that span the controller and
//! the replica manager.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use crate::auth::acl_authorizer::AclAuthorizer;
use crate::auth::authorizer::Authorizer;
use crate::auth::settings::AuthorizerSettings;
use crate::auth::store_log::{AclFollower, MetadataLogStore};
use crate::config::publisher::DynamicConfigPublisher;
use crate::config::{dynamic, group, topic, BrokerConfig, SharedConfig};
use crate::controller::adopt::{self, SkuaMetadataFile};
use crate::controller::image::MetadataImage;
use crate::controller::kraft::member::{self, Membership};
use crate::controller::local::{self, ControllerConfig, LocalController};
use crate::controller::metadata_log::MetadataLog;
use crate::controller::records::{MetadataRecord, CONFIG_RESOURCE_BROKER};
use crate::controller::zk::ZkController;
use crate::controller::{
    BrokerInfo, ConfigResource, Controller, ControllerError, NewTopic, TopicInfo,
};
use crate::coordinator::group::settings::GroupSettings;
use crate::coordinator::group::topics::ControllerTopics;
use crate::coordinator::group::{GroupCoordinator, OFFSETS_TOPIC};
use crate::coordinator::partition_log::ReplicaPartitionLog;
use crate::coordinator::share::coordinator::ShareCoordinator;
use crate::coordinator::share::latest_offsets::LatestOffsets;
use crate::coordinator::share::remote::{ClusterPersister, StateLeader};
use crate::coordinator::share::{Persister, SHARE_GROUP_STATE_TOPIC};
use crate::coordinator::txn::markers::ClusterMarkerWriter;
use crate::coordinator::txn::peers::Clients;
use crate::coordinator::txn::peers::TxnPeers;
use crate::coordinator::txn::TransactionCoordinator;
use crate::coordinator::TRANSACTION_STATE_TOPIC;
use crate::error::ApiError;
use crate::log::{DirLock, Identity, LogDirs, LogManager, TopicPartition, METADATA_LOG_DIR};
use crate::metrics::Metrics;
use crate::quota::manager::ClientQuotaManager;
use crate::quota::publisher::QuotaPublisher;
use crate::quota::QuotaManager;
use crate::replica::fetch_session::FetchSessionCache;
use crate::replica::share::Shares;
use crate::replica::ReplicaManager;
use crate::scheduler::Scheduler;

pub struct Broker {
    /// The config in force; read it with [`Broker::config`].
    pub shared_config: Arc<SharedConfig>,
    /// Single node, ZooKeeper mode or KRaft broker: fixed at startup (neither
    /// `zookeeper.connect` nor `process.roles` changes while the broker runs), kept
    /// apart from the config so a request's routing reads no lock.
    mode: crate::router::Mode,
    pub controller: Arc<dyn Controller>,
    pub replicas: Arc<ReplicaManager>,
    pub groups: Arc<GroupCoordinator>,
    pub txns: Arc<TransactionCoordinator>,
    /// Share groups (KIP-932): the share coordinator over `__share_group_state`, the
    /// share-partitions led here and the members' share sessions.
    pub shares: Arc<Shares>,
    /// Incremental fetch sessions (KIP-227), `max.incremental.fetch.session.cache.slots` of them.
    pub fetch_sessions: FetchSessionCache,
    /// The single-node controller; None in ZooKeeper mode, which has no metadata log.
    local: Option<Arc<LocalController>>,
    /// The membership of a KRaft cluster (`process.roles=broker`): registration,
    /// heartbeats and the metadata log followed from Kafka's controllers.
    kraft: Option<Arc<Membership>>,
    /// The lock of `metadata.log.dir` when it is not one of the log dirs.
    _metadata_dir_lock: Option<crate::log::DirLock>,
    /// The periodic jobs (checkpoints, flushes, expiry, removal of deleted logs).
    scheduler: Scheduler,
    /// Set once shutdown begins, so long waits (fetch long polls) end early.
    stopping: tokio::sync::watch::Sender<bool>,
    /// Every metric of this broker (shared with the replica manager, which marks the
    /// per-topic ones).
    pub metrics: Arc<Metrics>,
    /// The authorizer every check asks; unset: allow all (Kafka without
    /// `authorizer.class.name`).
    authorizer: OnceLock<Arc<dyn Authorizer>>,
    /// Client quotas: Kafka's quota managers, following the quotas in the metadata.
    pub client_quotas: Arc<ClientQuotaManager>,
    /// Another quota manager put in its place (tests); unset: `client_quotas`.
    quotas: OnceLock<Arc<dyn QuotaManager>>,
}

/// What runs beside the replica manager, following the same metadata.
struct Services {
    client_quotas: Arc<ClientQuotaManager>,
    groups: Arc<GroupCoordinator>,
    txns: Arc<TransactionCoordinator>,
    shares: Arc<Shares>,
    scheduler: Scheduler,
}

/// Subscribes everything that follows the metadata to `controller`, in the order that
/// matters (both modes alike), starts replication and schedules the periodic jobs.
fn follow_metadata(
    controller: &Arc<dyn Controller>,
    isr_channel: Option<Arc<dyn crate::replica::isr::ControllerChannel>>,
    shared_config: &Arc<SharedConfig>,
    replicas: &Arc<ReplicaManager>,
) -> anyhow::Result<Services> {
    let config = shared_config.current();
    replicas.start_network_replication(isr_channel);
    // Before the logs are opened, so they start with the dynamic configs in force.
    controller.subscribe(DynamicConfigPublisher::new(
        shared_config.clone(),
        replicas.clone(),
    ));
    let client_quotas = Arc::new(ClientQuotaManager::new(config.quotas));
    controller.subscribe(QuotaPublisher::new(client_quotas.clone()));
    if let Some(e) = controller.subscribe(replicas.clone()).first() {
        anyhow::bail!("cannot open the logs of topic {}: {}", e.topic, e.message);
    }
    // The coordinator's view of the topics and of group configs follows the metadata.
    let topics = ControllerTopics::new();
    controller.subscribe(topics.clone());
    let topics_for_shares = topics.clone();
    let group_settings = GroupSettings::new(shared_config.clone());
    controller.subscribe(group_settings.clone());
    let groups = Arc::new(GroupCoordinator::new(
        group_settings,
        Arc::new(ReplicaPartitionLog::new(replicas.clone(), OFFSETS_TOPIC)),
        topics,
    ));
    // After the replica manager, so the partitions it loads are hosted; the ones led
    // now load before this returns, so no request finds them loading.
    controller.subscribe(groups.metadata_listener());
    let txns = transaction_coordinator(
        &config,
        shared_config.outbound_tls(),
        replicas,
        &groups,
        controller,
    );
    let verifier: Arc<dyn crate::replica::append::TransactionVerifier> = txns.clone();
    replicas.set_transaction_verifier(&verifier);
    controller.subscribe(txns.metadata_listener());
    // The share coordinator follows `__share_group_state`'s leadership as the group
    // coordinator follows `__consumer_offsets`'; the group coordinator initializes and
    // deletes share-partitions' state through it.
    let share_coordinator = Arc::new(ShareCoordinator::new(
        shared_config.clone(),
        Arc::new(ReplicaPartitionLog::new(
            replicas.clone(),
            SHARE_GROUP_STATE_TOPIC,
        )),
        topics_for_shares,
    ));
    controller.subscribe(share_coordinator.metadata_listener());
    // Share-partitions and the group coordinator persist through the share coordinator
    // serving each key: this one in process, another broker's with its RPCs.
    let leaders = controller.clone();
    let leader_of: StateLeader = Arc::new(move |partition| {
        leaders.topic(SHARE_GROUP_STATE_TOPIC).and_then(|t| {
            t.partitions
                .iter()
                .find(|p| p.partition == partition)
                .map(|p| p.state.leader)
                .filter(|leader| *leader >= 0)
        })
    });
    let peer_config = crate::client::ClientConfig {
        client_id: Some(format!("broker-{}", config.broker_id)),
        tls: shared_config.outbound_tls(),
        sasl: crate::sasl::settings::inter_broker(&config).ok().flatten(),
        ..crate::client::ClientConfig::default()
    };
    let persister: Arc<dyn Persister> = Arc::new(ClusterPersister::new(
        share_coordinator.clone(),
        leader_of,
        replicas.cluster.clone(),
        Clients::new(&peer_config, "share-state"),
    ));
    groups.set_share_persister(persister.clone());
    let shares = Shares::new(
        share_coordinator,
        persister,
        config.group.share.max_share_sessions.max(1) as usize,
    );
    // DescribeShareGroupOffsets' lag reads partitions' latest offsets, here or from
    // their leaders.
    shares.set_latest_offsets(LatestOffsets::new(
        replicas.clone(),
        controller.clone(),
        Clients::new(&peer_config, "share-lag"),
    ));
    // A member that left a share group (or whose session ran out) with no share session
    // open here has what it holds in the share-partitions led here released at once,
    // not when each lock runs out (`Shares::member_left`).
    let departed = Arc::downgrade(&shares);
    groups.set_share_member_listener(Arc::new(move |group: &str, member: &str| {
        let (Some(shares), Ok(rt)) = (departed.upgrade(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let (group, member) = (group.to_string(), member.to_string());
        rt.spawn(async move { shares.member_left(&group, &member).await });
    }));
    let scheduler = Scheduler::new();
    crate::jobs::schedule_log_jobs(&scheduler, &config, replicas);
    crate::jobs::schedule_replica_jobs(&scheduler, &config, replicas);
    Ok(Services {
        client_quotas,
        groups,
        txns,
        shares,
        scheduler,
    })
}

/// The authorizer `authorizer.class.name` names, checked against the broker's mode:
/// Kafka's AclAuthorizer keeps ACLs in ZooKeeper, its StandardAuthorizer in the KRaft
/// metadata log, and each runs only where its storage exists.
fn authorizer_settings(
    config: &BrokerConfig,
    zookeeper_mode: bool,
) -> anyhow::Result<Option<AuthorizerSettings>> {
    use crate::auth::settings::{AclStorage, ACL_AUTHORIZER, STANDARD_AUTHORIZER};
    let Some(settings) = AuthorizerSettings::from_config(config).map_err(anyhow::Error::msg)?
    else {
        return Ok(None);
    };
    match (settings.storage, zookeeper_mode) {
        (AclStorage::ZooKeeper, false) => anyhow::bail!(
            "authorizer.class.name={ACL_AUTHORIZER} keeps ACLs in ZooKeeper and needs zookeeper.connect; a single node keeps them in its metadata log with {STANDARD_AUTHORIZER}"
        ),
        (AclStorage::MetadataLog, true) => anyhow::bail!(
            "authorizer.class.name={STANDARD_AUTHORIZER} keeps ACLs in a KRaft metadata log; a ZooKeeper-mode broker keeps them in ZooKeeper with {ACL_AUTHORIZER}"
        ),
        _ => Ok(Some(settings)),
    }
}

/// The broker's authorizer slot, holding `acls` when one is configured.
fn installed(acls: Option<Arc<AclAuthorizer>>) -> OnceLock<Arc<dyn Authorizer>> {
    let slot = OnceLock::new();
    if let Some(acls) = acls {
        let _ = slot.set(acls as Arc<dyn Authorizer>);
    }
    slot
}

/// The single-node controller on the dirs' metadata log, as a start opens it: on a first
/// start the log is created (adopting the data already in the dirs) and `meta.properties`
/// written. The dirs are locked (`LogDirs::check`).
fn open_local_controller(
    config: &BrokerConfig,
    dirs: &mut LogDirs,
) -> anyhow::Result<LocalController> {
    let new_store = !MetadataLog::exists(&dirs.metadata_dir);
    let skua_file = if new_store {
        SkuaMetadataFile::read(&config.log_dirs[0])?
    } else {
        None
    };
    if let (Some(file), Some(id)) = (&skua_file, &dirs.cluster_id) {
        if file.cluster_id != *id {
            anyhow::bail!(
                "{} names cluster {} but meta.properties names {id}",
                adopt::SKUA_METADATA_FILE,
                file.cluster_id
            );
        }
    }
    let cluster_id = dirs
        .cluster_id
        .clone()
        .or_else(|| skua_file.as_ref().map(|f| f.cluster_id.clone()))
        .unwrap_or_else(new_cluster_id);
    let had_meta_properties: Vec<bool> = dirs.log_dirs.iter().map(|d| d.meta.is_some()).collect();
    let zookeeper_mode = dirs.versions().contains(&0);
    let directory_ids = dirs.assign_directory_ids(&cluster_id, 1);
    let initial = if new_store {
        let located: Vec<(PathBuf, Uuid)> = dirs
            .log_dirs
            .iter()
            .map(|d| (d.path.clone(), d.directory_id().unwrap_or_default()))
            .collect();
        let records = initial_records(
            dirs.node_id,
            skua_file,
            &located,
            zookeeper_mode || !had_meta_properties.contains(&true),
        )?;
        let scram =
            adopt::bootstrap_scram_records(&dirs.metadata_dir).map_err(anyhow::Error::msg)?;
        if !scram.is_empty() {
            tracing::info!(
                credentials = scram.len(),
                "taking the SCRAM credentials of kafka-storage.sh format's bootstrap.checkpoint"
            );
        }
        Some(records.into_iter().chain(scram).collect())
    } else {
        None
    };
    dirs.write_meta_properties()?;
    let advertised = &config.advertised_listeners[0];
    let me = BrokerInfo {
        id: config.broker_id,
        host: advertised.host.clone(),
        port: advertised.port as i32,
        rack: config.rack.clone(),
    };
    local::open(
        &dirs.metadata_dir,
        ControllerConfig {
            broker: me,
            cluster_id,
            directory_ids,
            num_partitions: config.log.num_partitions,
            default_replication_factor: config.replication.default_replication_factor,
        },
        initial,
    )
}

/// `skua --add-scram`: SCRAM credentials written into the metadata log of a broker that is
/// not running (its dirs' locks are taken first, so a running broker refuses), as
/// UserScramCredentialRecords, exactly as AlterUserScramCredentials would write them; on
/// dirs that hold no metadata log yet, the log is first created as the first start would.
/// The way to create the first user of a single node whose listeners all need SASL.
pub fn add_scram_credentials(
    config: BrokerConfig,
    changes: Vec<crate::controller::ScramChange>,
) -> anyhow::Result<()> {
    if config.get("zookeeper.connect").is_some() {
        anyhow::bail!("in ZooKeeper mode SCRAM credentials live in ZooKeeper: write them with Kafka's kafka-configs.sh --zookeeper ... --alter --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users --entity-name NAME");
    }
    let identity = Identity {
        configured_node_id: config.broker_id_set.then_some(config.broker_id),
        default_node_id: config.broker_id,
        configured_cluster_id: config.cluster_id.clone(),
    };
    let mut dirs = LogDirs::check(
        &config.log_dirs,
        config.metadata_log_dir.as_deref(),
        &identity,
    )?;
    let mut config = config;
    config.broker_id = dirs.node_id;
    let local = open_local_controller(&config, &mut dirs)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let written = runtime.block_on(local.alter_scram_credentials(changes));
    local.shutdown();
    written.map_err(|e| anyhow::anyhow!("{}", e.message))
}

/// Where the broker's metadata comes from: its own metadata log on a single node, a
/// ZooKeeper-mode cluster's controller, or a KRaft cluster's controllers. Opened before the
/// logs (it says which partitions are hosted here and with which configs); everything
/// after it is the same for all three.
enum MetadataSource {
    Local(Arc<LocalController>),
    ZooKeeper(Arc<ZkController>),
    Kraft(Arc<Membership>),
}

impl MetadataSource {
    /// The single-node store: the metadata log in the metadata dir, created (or adopting
    /// the data already in the dirs) on a first start. Writes the dirs' meta.properties.
    fn open_local(config: &BrokerConfig, dirs: &mut LogDirs) -> anyhow::Result<MetadataSource> {
        let local = open_local_controller(config, dirs)?;
        Ok(MetadataSource::Local(Arc::new(local)))
    }

    /// A member of a Kafka 3.9 ZooKeeper-mode cluster (`controller::zk`): the cluster id
    /// is ZooKeeper's (a log dir of another cluster stops startup), and there is no
    /// metadata log. Writes the dirs' meta.properties.
    fn connect_zookeeper(
        config: &BrokerConfig,
        dirs: &mut LogDirs,
        settings: crate::controller::zk::Settings,
    ) -> anyhow::Result<MetadataSource> {
        let proposed = dirs
            .cluster_id
            .clone()
            .or_else(|| config.cluster_id.clone())
            .unwrap_or_else(new_cluster_id);
        let zk = ZkController::connect_blocking(settings, proposed)?;
        let cluster_id = zk.cluster_id();
        if let Some(id) = dirs.cluster_id.as_ref().filter(|id| **id != cluster_id) {
            anyhow::bail!(
                "the log dirs belong to cluster {id}, but ZooKeeper's /cluster/id is {cluster_id}"
            );
        }
        // version 0, as Kafka 3.9 writes in ZooKeeper mode: a dir skua started empty
        // can go back to a Kafka broker of the same cluster
        dirs.assign_directory_ids(&cluster_id, 0);
        dirs.write_meta_properties()?;
        Ok(MetadataSource::ZooKeeper(Arc::new(zk)))
    }

    /// A broker of a KRaft cluster whose controllers are Apache Kafka's
    /// (`process.roles=broker`, `controller::kraft`): the dirs must be formatted by
    /// `kafka-storage.sh format`; returns once the broker registered and caught up with
    /// the cluster's metadata log.
    fn join_kraft(config: &BrokerConfig, dirs: &mut LogDirs) -> anyhow::Result<MetadataSource> {
        let (cluster_id, metadata_dir_id) = member::check_formatted(dirs)?;
        let log_dir_ids = dirs
            .log_dirs
            .iter()
            .filter_map(|d| d.directory_id())
            .collect();
        let driver = member::driver_config(config, &cluster_id, metadata_dir_id, log_dir_ids)?;
        let membership = Membership::start_blocking(config, driver)?;
        Ok(MetadataSource::Kraft(Arc::new(membership)))
    }

    /// The image the logs are opened against, where the metadata is an image.
    fn image(&self) -> Option<Arc<MetadataImage>> {
        match self {
            MetadataSource::Local(local) => Some(local.image()),
            MetadataSource::Kraft(member) => Some(member.controller.image()),
            MetadataSource::ZooKeeper(_) => None,
        }
    }

    /// Opens the logs found in the dirs (recovering them after a crash). With a metadata
    /// log (a single node, a KRaft cluster's) the logs the metadata does not assign here
    /// are set aside as strays and each log starts with its topic's configs; in ZooKeeper mode every partition directory is
    /// loaded with the broker's defaults (as Kafka's ZooKeeper-mode broker does: which
    /// partitions are hosted, and their configs, are the controller's to say).
    fn open_logs(
        &self,
        shared_config: &Arc<SharedConfig>,
        log_dirs: Vec<(PathBuf, DirLock)>,
    ) -> anyhow::Result<LogManager> {
        let config = shared_config.current();
        let delete_delay_ms = config.log.segment_delete_delay_ms;
        let threads = config.log.recovery_threads_per_data_dir;
        let shared = shared_config.clone();
        match self.image() {
            Some(image) => {
                let node_id = config.broker_id;
                let configs_image = image.clone();
                let topic_configs = move |name: &str| {
                    let overrides = configs_image
                        .topic(name)
                        .map(|t| t.configs.clone())
                        .unwrap_or_default();
                    topic::log_config(&shared.current(), &overrides)
                };
                let assigned = move |tp: &TopicPartition, id: Option<Uuid>| {
                    assigned_here(&image, node_id, tp, id)
                };
                let logs = LogManager::startup_parallel(
                    log_dirs,
                    assigned,
                    topic_configs,
                    delete_delay_ms,
                    threads,
                )?;
                if let MetadataSource::Local(local) = self {
                    logs.set_broker_epoch(local.broker_epoch());
                }
                Ok(logs)
            }
            None => {
                let defaults =
                    move |_: &str| topic::log_config(&shared.current(), &BTreeMap::new());
                let all = |_: &TopicPartition, _| true;
                Ok(LogManager::startup_parallel(
                    log_dirs,
                    all,
                    defaults,
                    delete_delay_ms,
                    threads,
                )?)
            }
        }
    }

    /// The ACL authorizer over this source's storage, every ACL it holds in force before
    /// anything serves: the metadata log's records, or ZooKeeper's znodes.
    fn authorizer(&self, settings: AuthorizerSettings) -> anyhow::Result<Arc<AclAuthorizer>> {
        let acls = Arc::new(AclAuthorizer::new(settings));
        match self {
            MetadataSource::Local(local) => {
                acls.set_store(Arc::new(MetadataLogStore::new(local.clone())));
                local.subscribe(AclFollower::new(acls.clone()));
            }
            MetadataSource::ZooKeeper(zk) => {
                let store = crate::auth::store_zk::ZkAclStore::start_blocking(zk, acls.clone())?;
                acls.set_store(store);
            }
            // The controller's ACL records, as this broker follows them (Kafka's broker
            // runs StandardAuthorizer on its metadata image). No store: ACL changes are
            // forwarded to the controller (handlers::forwarded).
            MetadataSource::Kraft(member) => {
                member.controller.subscribe(AclFollower::new(acls.clone()));
            }
        }
        Ok(acls)
    }

    fn controller(&self) -> Arc<dyn Controller> {
        match self {
            MetadataSource::Local(local) => local.clone(),
            MetadataSource::ZooKeeper(zk) => zk.clone(),
            MetadataSource::Kraft(member) => member.controller.clone(),
        }
    }

    /// Where the leaders' ISR changes go: a KRaft cluster's active controller, through
    /// the membership's channel; otherwise the controller the metadata names.
    fn isr_channel(&self) -> Option<Arc<dyn crate::replica::isr::ControllerChannel>> {
        match self {
            MetadataSource::Kraft(member) => Some(member.controller.clone()),
            _ => None,
        }
    }

    /// Starts following: in ZooKeeper mode the broker side hosts `replicas` and the
    /// broker registers (once its logs are open); a KRaft broker, registered already, is
    /// unfenced now that its logs are open; the single node follows already.
    fn start(&self, replicas: &Arc<ReplicaManager>) -> anyhow::Result<()> {
        match self {
            MetadataSource::Local(_) => Ok(()),
            MetadataSource::ZooKeeper(zk) => zk.start_blocking(replicas.clone()),
            MetadataSource::Kraft(member) => {
                member.follow_doubt(replicas.cluster.clone());
                replicas.set_dir_assigner(member.dir_assigner());
                let held = replicas.clone();
                member.place_replicas(move |topic, partition| {
                    held.logs
                        .placement_of(&crate::log::TopicPartition::new(topic, partition))
                });
                let epoch = member.ready_blocking()?;
                replicas.logs.set_broker_epoch(epoch);
                Ok(())
            }
        }
    }

    fn local(&self) -> Option<Arc<LocalController>> {
        match self {
            MetadataSource::Local(local) => Some(local.clone()),
            _ => None,
        }
    }

    fn kraft(&self) -> Option<Arc<Membership>> {
        match self {
            MetadataSource::Kraft(member) => Some(member.clone()),
            _ => None,
        }
    }
}

impl Broker {
    /// Checks and locks the log dirs, opens the metadata source (the metadata log, or a
    /// ZooKeeper-mode cluster when `zookeeper.connect` is set), opens every log (recovering
    /// after a crash), starts hosting the partitions and loading the coordinators'
    /// partitions it leads, installs the authorizer, schedules the periodic jobs and, in
    /// ZooKeeper mode, registers. One path for both modes: what differs is the
    /// [`MetadataSource`]. Must run inside a tokio runtime.
    pub fn open(config: BrokerConfig) -> anyhow::Result<Arc<Broker>> {
        let mut config = config;
        let zk_settings = crate::controller::zk::Settings::from_config(&config)?;
        let authorizer = authorizer_settings(&config, zk_settings.is_some())?;
        let kraft_broker = config.kraft.process_roles == crate::config::kraft::ProcessRoles::Broker;
        let identity = Identity {
            configured_node_id: config.broker_id_set.then_some(config.broker_id),
            default_node_id: config.broker_id,
            configured_cluster_id: config.cluster_id.clone(),
        };
        let mut dirs = LogDirs::check(
            &config.log_dirs,
            config.metadata_log_dir.as_deref(),
            &identity,
        )?;
        config.broker_id = dirs.node_id;

        // Everything below runs only once every dir passed its checks.
        let source = match zk_settings {
            Some(settings) => MetadataSource::connect_zookeeper(&config, &mut dirs, settings)?,
            None if kraft_broker => MetadataSource::join_kraft(&config, &mut dirs)?,
            None => MetadataSource::open_local(&config, &mut dirs)?,
        };
        let outbound_tls = config.outbound_tls()?;
        let shared_config = SharedConfig::new(config);
        shared_config.set_outbound_tls(outbound_tls);
        let directory_ids: Vec<(PathBuf, Uuid)> = dirs
            .log_dirs
            .iter()
            .filter_map(|d| Some((d.path.clone(), d.directory_id()?)))
            .collect();
        let log_dirs = dirs
            .log_dirs
            .into_iter()
            .map(|d| (d.path, d.lock))
            .collect();
        let metadata_lock = dirs.separate_metadata_dir.map(|d| d.lock);
        let logs = source.open_logs(&shared_config, log_dirs)?;
        logs.set_directory_ids(&directory_ids);
        let config = shared_config.current();
        let replicas = Arc::new(ReplicaManager::new(
            config.broker_id,
            shared_config.clone(),
            logs,
        ));
        let authorizer = match authorizer {
            Some(settings) => Some(source.authorizer(settings)?),
            None => None,
        };
        let controller = source.controller();
        let Services {
            client_quotas,
            groups,
            txns,
            shares,
            scheduler,
        } = follow_metadata(&controller, source.isr_channel(), &shared_config, &replicas)?;
        source.start(&replicas)?;
        Ok(Arc::new(Broker {
            fetch_sessions: FetchSessionCache::new(
                config.max_incremental_fetch_session_cache_slots,
            ),
            metrics: replicas.metrics.clone(),
            mode: crate::router::Mode::of(&config),
            shared_config,
            controller,
            replicas,
            groups,
            txns,
            shares,
            local: source.local(),
            kraft: source.kraft(),
            _metadata_dir_lock: metadata_lock,
            scheduler,
            stopping: tokio::sync::watch::Sender::new(false),
            authorizer: installed(authorizer),
            client_quotas,
            quotas: OnceLock::new(),
        }))
    }

    /// The authorizer for a request's checks: `None` when everything is allowed, so the
    /// checks cost no call.
    pub fn authorizer(&self) -> Option<Arc<dyn Authorizer>> {
        self.authorizer
            .get()
            .filter(|a| !a.allows_everything())
            .cloned()
    }

    /// Installs the authorizer, before the broker serves (a connection is checked by the
    /// one in force when it opened); a second one is refused.
    pub fn set_authorizer(&self, authorizer: Arc<dyn Authorizer>) -> Result<(), String> {
        self.authorizer
            .set(authorizer)
            .map_err(|_| "an authorizer is installed already".to_string())
    }

    /// The quota manager the request pipeline asks (it says whether any quota is in
    /// force).
    pub fn quotas(&self) -> Option<&dyn QuotaManager> {
        match self.quotas.get() {
            Some(q) => Some(q.as_ref()),
            None => Some(self.client_quotas.as_ref()),
        }
    }

    /// The controller mutation quota of a CreateTopics, CreatePartitions or DeleteTopics
    /// request: strict from `strict_since` (its version Kafka enforces it from, KIP-599),
    /// permissive before.
    pub fn mutation_quota(
        &self,
        ctx: &crate::router::RequestContext,
        strict_since: i16,
    ) -> crate::quota::MutationQuota {
        match self.quotas() {
            Some(q) => q.mutation_quota(ctx, ctx.api_version >= strict_since),
            None => crate::quota::MutationQuota::unbounded(),
        }
    }

    /// The quota manager, held: each connection's session keeps it from its opening, so
    /// a request clones no handle that every connection's requests would share.
    pub fn quota_manager(&self) -> Arc<dyn QuotaManager> {
        match self.quotas.get() {
            Some(q) => q.clone(),
            None => self.client_quotas.clone(),
        }
    }

    /// Installs another quota manager in place of Kafka's, before the broker serves; a
    /// second one is refused.
    pub fn set_quota_manager(&self, quotas: Arc<dyn QuotaManager>) -> Result<(), String> {
        self.quotas
            .set(quotas)
            .map_err(|_| "a quota manager is installed already".to_string())
    }

    /// The config in force. Take it once per request: a dynamic change swaps in a new one.
    pub fn config(&self) -> Arc<BrokerConfig> {
        self.shared_config.current()
    }

    /// Which routes this broker serves (see [`Broker::mode`]'s field).
    pub fn mode(&self) -> crate::router::Mode {
        self.mode
    }

    pub async fn create_topic(
        &self,
        topic: NewTopic,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, ControllerError> {
        check_partition_count(topic.num_partitions.max(topic.assignments.len() as i32))?;
        // Before the controller records anything: a refusal leaves no topic behind.
        self.replicas.logs.check_capacity().map_err(storage)?;
        self.controller.create_topic(topic, validate_only).await
    }

    /// Deletes a topic. The replica manager follows the deletion: each of the topic's logs
    /// is renamed for deletion at once and removed after `file.delete.delay.ms`.
    pub async fn delete_topic(&self, name: &str) -> Result<Arc<TopicInfo>, ControllerError> {
        self.controller.delete_topic(name).await
    }

    /// Creates several topics as auto-creation does: one metadata write for all of them
    /// (in ZooKeeper mode, from any broker, as Kafka's). Each succeeds or fails on its
    /// own; results are in request order.
    pub async fn create_topics(
        &self,
        topics: Vec<NewTopic>,
    ) -> Vec<Result<Arc<TopicInfo>, ControllerError>> {
        // Before the controller records anything: a refusal leaves no topic behind.
        let capacity = self.replicas.logs.check_capacity().map_err(storage);
        let mut out = Vec::with_capacity(topics.len());
        let mut slots = Vec::new();
        let mut valid = Vec::new();
        for t in topics {
            let checked = capacity
                .as_ref()
                .map_err(|e| ControllerError::new(e.error, e.message.clone()));
            match checked.and_then(|()| {
                check_partition_count(t.num_partitions.max(t.assignments.len() as i32))
            }) {
                Ok(()) => {
                    slots.push(out.len());
                    out.push(None);
                    valid.push(t);
                }
                Err(e) => out.push(Some(Err(e))),
            }
        }
        let created = self.controller.auto_create_topics(valid).await;
        for (slot, result) in slots.into_iter().zip(created) {
            out[slot] = Some(result);
        }
        out.into_iter().flatten().collect()
    }

    /// How many partitions a CreatePartitions to `count` would add to `name` (0 for a
    /// topic that does not exist, or already has as many).
    pub fn partitions_to_add(&self, name: &str, count: i32) -> i32 {
        let existing = self
            .controller
            .topic(name)
            .map_or(0, |t| t.partitions.len() as i32);
        count.saturating_sub(existing).max(0)
    }

    pub async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        assignments: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, ControllerError> {
        let existing = self
            .controller
            .topic(name)
            .map_or(0, |t| t.partitions.len() as i32);
        check_partition_count(count.saturating_sub(existing))?;
        self.replicas.logs.check_capacity().map_err(storage)?;
        self.controller
            .create_partitions(name, count, assignments, validate_only)
            .await
    }

    /// Changes a topic's config overrides with `edit`, validates the result, and (unless
    /// `validate_only`) stores it and applies it to the topic's logs.
    pub async fn alter_topic_configs(
        &self,
        name: &str,
        validate_only: bool,
        edit: impl FnOnce(&mut BTreeMap<String, String>) -> Result<(), ControllerError>,
    ) -> Result<(), ControllerError> {
        let current = self
            .controller
            .topic(name)
            .ok_or_else(|| ControllerError::unknown_topic(name))?;
        let mut configs = current.configs.clone();
        edit(&mut configs)?;
        topic::validate(&configs)
            .map_err(|m| ControllerError::new(ResponseError::InvalidConfig, m))?;
        if validate_only {
            return Ok(());
        }
        let info = self.controller.set_topic_configs(name, configs).await?;
        tracing::info!(topic = name, configs = ?info.configs, "topic configs changed");
        Ok(())
    }

    /// Changes the dynamic configs of broker `entity` (this broker's id, or "" for the
    /// cluster default) with `edit`, checks the result as Kafka does (the keys Kafka lets
    /// change, at the level it lets them change, and the whole config built with them),
    /// and (unless `validate_only`) stores it in the metadata log as ConfigRecords of
    /// resource type BROKER; `DynamicConfigPublisher` puts it in force from there.
    pub async fn alter_broker_configs(
        &self,
        entity: &str,
        validate_only: bool,
        edit: impl FnOnce(&mut BTreeMap<String, String>) -> Result<(), ControllerError>,
    ) -> Result<(), ControllerError> {
        let invalid = |m: String| ControllerError::new(ResponseError::InvalidRequest, m);
        let config = self.config();
        if !entity.is_empty() {
            let id: i32 = entity
                .parse()
                .map_err(|_| invalid(format!("Node id must be an integer, but it is: {entity}")))?;
            if id != config.broker_id {
                return Err(invalid(format!(
                    "Unexpected broker id, expected {}, but received {entity}",
                    config.broker_id
                )));
            }
        }
        let resource = ConfigResource {
            resource_type: CONFIG_RESOURCE_BROKER,
            name: entity.to_string(),
        };
        let stored = self.controller.resource_configs(&resource);
        let mut configs = stored.clone();
        edit(&mut configs)?;
        dynamic::validate(&configs, !entity.is_empty(), config.cleaner.threads).map_err(invalid)?;
        let mut in_force = config.dynamic().clone();
        match entity.is_empty() {
            true => in_force.default = configs.clone(),
            false => in_force.broker = configs.clone(),
        }
        let next = config
            .reconfigured(&in_force)
            .map_err(|e| invalid(e.to_string()))?;
        // A listener added at runtime is bound once the change is in force; an address
        // that cannot be bound is refused now rather than logged then.
        for l in next.listeners_added_since(&config) {
            let addr = l.bind_addr();
            std::net::TcpListener::bind(&addr).map_err(|e| {
                invalid(format!(
                    "cannot listen on {addr} for listener {}: {e}",
                    l.name
                ))
            })?;
        }
        // A listener whose TLS settings change (KIP-226 keystore rotation) must get a
        // context from its new stores; a keystore that cannot be read is refused now.
        for l in &next.listeners {
            if next.security_protocol(&l.name).as_deref() != Some("SSL") {
                continue;
            }
            let now = crate::tls::SslSettings::for_listener(&next, &l.name)
                .map_err(|e| invalid(e.to_string()))?;
            let served = config.listeners.contains(l)
                && config.security_protocol(&l.name).as_deref() == Some("SSL");
            let was = served
                .then(|| crate::tls::SslSettings::for_listener(&config, &l.name).ok())
                .flatten();
            if was.as_ref() != Some(&now) {
                crate::tls::ListenerTls::build(&now).map_err(|e| invalid(e.to_string()))?;
            }
        }
        if validate_only {
            return Ok(());
        }
        self.controller
            .set_resource_configs(resource, configs.clone())
            .await?;
        let shown = crate::config::broker::redacted(&configs);
        tracing::info!(broker = entity, configs = ?shown, "dynamic broker configs changed");
        Ok(())
    }

    /// Changes a group's configs with `edit`, checks the result as Kafka does (the whole
    /// set, against the broker's bounds), and (unless `validate_only`) stores it in the
    /// metadata log, from where the group coordinator follows it.
    pub async fn alter_group_configs(
        &self,
        group_id: &str,
        validate_only: bool,
        edit: impl FnOnce(&mut BTreeMap<String, String>) -> Result<(), ControllerError>,
    ) -> Result<(), ControllerError> {
        let resource = ConfigResource::group(group_id);
        let mut configs = self.controller.resource_configs(&resource);
        edit(&mut configs)?;
        group::validate(&configs, &self.config().group.group_config_limits)
            .map_err(|m| ControllerError::new(ResponseError::InvalidConfig, m))?;
        if validate_only {
            return Ok(());
        }
        let configs: BTreeMap<String, String> = configs
            .into_iter()
            .map(|(k, v)| {
                let v = group::normalize(&k, &v);
                (k, v)
            })
            .collect();
        self.controller
            .set_resource_configs(resource, configs.clone())
            .await?;
        tracing::info!(group = group_id, ?configs, "group configs changed");
        Ok(())
    }

    /// Kafka's `LogDirFailureHandler`: each log dir that goes offline is logged (its
    /// partitions already refuse requests) and, in ZooKeeper mode, notified to the
    /// controller so it moves their leaderships away; when no dir is left online the
    /// broker halts, as Kafka does, without a clean shutdown, so the next start recovers
    /// every dir from its checkpoints. Runs in a task of its own; a second call does nothing.
    pub fn handle_log_dir_failures(self: &Arc<Self>) {
        let Some(mut failures) = self.replicas.logs.take_dir_failures() else {
            return;
        };
        let broker = self.clone();
        tokio::spawn(async move {
            while let Some(dir) = failures.recv().await {
                tracing::error!(dir = %dir.display(), "log dir is offline; its partitions answer KAFKA_STORAGE_ERROR until restart");
                broker.replicas.handle_log_dir_failure(&dir);
                if broker.replicas.logs.all_dirs_offline() {
                    tracing::error!("every log dir is offline: halting the broker");
                    std::process::exit(1);
                }
                if let Some(zk) = broker.controller.zk() {
                    crate::controller::zk::broker::log_dir_events::propagate_failure(zk).await;
                }
            }
        });
    }

    /// In a cluster (ZooKeeper mode, or a KRaft cluster's broker): asks the controller to
    /// move this broker's leaderships away (`controlled.shutdown.enable`), before the
    /// listeners close.
    pub async fn controlled_shutdown(&self) {
        if let Some(zk) = self.controller.zk() {
            zk.controlled_shutdown().await;
        }
        if let Some(member) = &self.kraft {
            member.controlled_shutdown().await;
        }
    }

    /// The channel to a KRaft cluster's active controller (`process.roles=broker`), which
    /// forwarded requests go through.
    pub fn kraft_controller(
        &self,
    ) -> Option<&Arc<crate::controller::kraft::backend::KraftController>> {
        self.kraft.as_ref().map(|m| &m.controller)
    }

    /// Tells waiting requests that the broker is going down.
    pub fn begin_shutdown(&self) {
        self.stopping.send_replace(true);
        self.txns.begin_shutdown();
        // A cleaning in progress stops at its next batch, so shutdown does not wait for it.
        self.replicas.cleaner.stop();
    }

    /// Changes to true when shutdown begins.
    pub fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stopping.subscribe()
    }

    /// Where periodic jobs are registered.
    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// Clean shutdown of the storage: the periodic jobs stopped (a run in progress
    /// finishes first), then flush, checkpoints, the clean-shutdown marker, and the
    /// metadata log closed.
    pub fn shutdown(&self) {
        // No metadata is applied while the logs close; the clean shutdown markers carry
        // the epoch the broker ends with, which its next start registers as its previous.
        if let Some(member) = &self.kraft {
            member.stop_blocking();
            self.replicas
                .logs
                .set_broker_epoch(member.controller.broker_epoch());
        }
        self.scheduler.stop();
        self.controller.shutdown();
        self.groups.shutdown();
        self.txns.shutdown();
        self.shares.coordinator.shutdown();
        match self.replicas.shutdown() {
            Ok(()) => tracing::info!("logs flushed and closed cleanly"),
            Err(e) => {
                tracing::error!(error = %e, "clean shutdown of the logs failed; recovery will run at next start")
            }
        }
        if let Some(local) = &self.local {
            local.shutdown();
        }
    }
}

/// Whether the metadata image assigns a partition directory found on disk to this broker:
/// its topic exists with that partition, this broker is one of its replicas, and the
/// directory's topic id (if it has one) is the topic's.
fn assigned_here(image: &MetadataImage, me: i32, tp: &TopicPartition, id: Option<Uuid>) -> bool {
    let Some(t) = image.topic(&tp.topic) else {
        return false;
    };
    id.is_none_or(|id| id == t.topic_id)
        && t.partitions
            .iter()
            .any(|p| p.partition == tp.partition && p.assignment.replicas.contains(&me))
}

/// The records a new metadata log starts with: an older skua's `skua-metadata.json`; the
/// partition directories already in the dirs when they come from a ZooKeeper-mode Kafka
/// broker (or carry no `meta.properties`); otherwise nothing but the finalized features.
/// KRaft dirs that hold partitions but no metadata log are refused: their metadata is
/// elsewhere, and adopting the partitions without it would lose topic configs and ids.
fn initial_records(
    node_id: i32,
    skua_file: Option<SkuaMetadataFile>,
    log_dirs: &[(PathBuf, Uuid)],
    adopt_partitions: bool,
) -> anyhow::Result<Vec<MetadataRecord>> {
    if let Some(file) = skua_file {
        tracing::info!(
            "importing {} into the metadata log; the file is left in place and no longer read",
            adopt::SKUA_METADATA_FILE
        );
        return Ok(file.records());
    }
    let found = adopt::scan_partition_dirs(log_dirs)?;
    if found.is_empty() {
        return Ok(local::bootstrap_records());
    }
    if !adopt_partitions {
        anyhow::bail!(
            "{} holds {} partition directories but no metadata log ({METADATA_LOG_DIR}); if Apache Kafka kept its metadata log in another directory, set metadata.log.dir to it",
            log_dirs.first().map_or_else(String::new, |d| d.0.display().to_string()),
            found.len()
        );
    }
    tracing::info!(
        partitions = found.len(),
        "adopting the partition directories of a ZooKeeper-mode Kafka broker; per-topic configs stayed in ZooKeeper, so topics start with the broker's defaults"
    );
    adopt::zookeeper_mode_records(node_id, &found)
}

/// A cluster id as Kafka writes one: a random UUID in unpadded base64url (22 chars).
fn new_cluster_id() -> String {
    crate::log::uuid_to_kafka_string(Uuid::new_v4())
}

/// Partitions one request may create, as Kafka's controller bounds a single operation:
/// creating a partition costs files and fsyncs, so a huge count would stall the broker.
pub const MAX_PARTITIONS_PER_REQUEST: i32 = 10_000;

/// The whole request's partitions against [`MAX_PARTITIONS_PER_REQUEST`], as Kafka's
/// controller bounds the records of one operation: above it the request is refused
/// whole, each of its topics answered POLICY_VIOLATION with Kafka's message.
pub fn check_request_partitions(
    counts: impl IntoIterator<Item = i32>,
) -> Result<(), ControllerError> {
    let total: i64 = counts.into_iter().map(|n| i64::from(n.max(0))).sum();
    if total > i64::from(MAX_PARTITIONS_PER_REQUEST) {
        return Err(ControllerError::new(
            ResponseError::PolicyViolation,
            "Unable to perform excessively large batch operation.",
        ));
    }
    Ok(())
}

fn check_partition_count(n: i32) -> Result<(), ControllerError> {
    if n > MAX_PARTITIONS_PER_REQUEST {
        return Err(ControllerError::new(
            ResponseError::PolicyViolation,
            format!("Unable to perform excessively large batch operation: {n} partitions, at most {MAX_PARTITIONS_PER_REQUEST}."),
        ));
    }
    Ok(())
}

fn storage(e: crate::log::LogError) -> ControllerError {
    tracing::error!(error = %e, "log operation failed");
    ControllerError::from(ApiError::from(e))
}

/// The transaction coordinator over `__transaction_state`, writing markers to each
/// partition's leader and verifying transactions with their coordinators (locally, or
/// through the outbound client).
fn transaction_coordinator(
    config: &BrokerConfig,
    tls: Option<crate::tls::OutboundTls>,
    replicas: &Arc<ReplicaManager>,
    groups: &Arc<GroupCoordinator>,
    controller: &Arc<dyn Controller>,
) -> Arc<TransactionCoordinator> {
    let peers = Arc::new(TxnPeers::new(
        replicas.cluster.clone(),
        crate::client::ClientConfig {
            client_id: Some(format!("broker-{}-txn", config.broker_id)),
            tls,
            sasl: crate::sasl::settings::inter_broker(config).ok().flatten(),
            ..crate::client::ClientConfig::default()
        },
    ));
    let txns = TransactionCoordinator::new(
        config.broker_id,
        config.transaction.clone(),
        Arc::new(ReplicaPartitionLog::new(
            replicas.clone(),
            TRANSACTION_STATE_TOPIC,
        )),
        Arc::new(ClusterMarkerWriter::new(
            config.broker_id,
            replicas.clone(),
            groups.clone(),
            controller.clone(),
            peers.clone(),
        )),
        Some(peers),
    );
    let metadata = Arc::downgrade(controller);
    txns.follow_metadata_leaders(Box::new(move |partition| {
        let topic = metadata.upgrade()?.topic(TRANSACTION_STATE_TOPIC)?;
        topic
            .partitions
            .iter()
            .find(|p| p.partition == partition)
            .map(|p| p.state.leader)
    }));
    txns
}
