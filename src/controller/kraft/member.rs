//! What `Broker::open` runs for `process.roles=broker` (Kafka's `BrokerServer` startup and
//! shutdown around its `BrokerLifecycleManager`): the dirs checked as `kafka-storage.sh
//! format` left them, the driver started on the broker's config, and the waits Kafka's
//! broker makes: caught up with the metadata log before the logs open, unfenced before
//! requests are served, the controller's permission before a controlled shutdown ends.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use uuid::Uuid;

use crate::client::ClientConfig;
use crate::config::BrokerConfig;
use crate::log::LogDirs;

use super::backend::KraftController;
use super::driver::{DriverConfig, KraftBroker, Status, Stopped};
use super::follower::{Endpoint, FollowerConfig};
use super::lifecycle::{BrokerState, RegisteredListener, Registration, ShutdownReason, Timing};

/// The largest metadata snapshot the broker loads (Kafka reads snapshots in chunks of
/// this size's order; a cluster's metadata far beyond it is not one skua serves).
const MAX_SNAPSHOT_BYTES: usize = 256 << 20;

/// How long a controlled shutdown waits for the controller's permission (Kafka's broker
/// waits out what is left of its five-minute shutdown deadline).
const CONTROLLED_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(300);

/// The broker's membership of a KRaft cluster: the controller channel the handlers use,
/// and the driver registering and following the metadata log.
pub struct Membership {
    pub controller: Arc<KraftController>,
    status: watch::Receiver<Status>,
    driver: Mutex<Option<KraftBroker>>,
    /// Set once the broker's own shutdown began: the driver stopping is then expected.
    leaving: Arc<std::sync::atomic::AtomicBool>,
}

/// The cluster id and the metadata log dir's `directory.id`, as `kafka-storage.sh
/// format` wrote them, with every other log dir completed as Kafka completes them (a dir
/// without `meta.properties` gets one with a new directory id; written only here, once
/// every dir passed `LogDirs::check`). A metadata dir that was never formatted, or that a
/// ZooKeeper-mode broker wrote (version 0), is refused: its cluster cannot be told from
/// the config, and writing one would claim the dir for a cluster it may not belong to.
pub fn check_formatted(dirs: &mut LogDirs) -> anyhow::Result<(String, Uuid)> {
    let metadata_dir = dirs.metadata_dir.clone();
    let format_hint = "format it first with Kafka's bin/kafka-storage.sh format --cluster-id <the cluster's id> --config <this server.properties>";
    let meta = dirs
        .log_dirs
        .iter()
        .chain(dirs.separate_metadata_dir.iter())
        .find(|d| d.path == metadata_dir)
        .and_then(|d| d.meta.clone());
    let Some(meta) = meta else {
        anyhow::bail!(
            "process.roles=broker: the metadata log dir {} has no meta.properties; {format_hint}",
            metadata_dir.display()
        );
    };
    if dirs.versions().contains(&0) {
        anyhow::bail!(
            "process.roles=broker: a log dir holds a version 0 meta.properties (a ZooKeeper-mode broker's); a KRaft broker needs dirs formatted by kafka-storage.sh (version 1)"
        );
    }
    let Some(directory_id) = meta.directory_id else {
        anyhow::bail!(
            "process.roles=broker: {}/meta.properties has no directory.id; {format_hint}",
            metadata_dir.display()
        );
    };
    let cluster_id = meta.cluster_id.clone();
    dirs.assign_directory_ids(&cluster_id, 1);
    dirs.write_meta_properties()?;
    Ok((cluster_id, directory_id))
}

/// Kafka's `SecurityProtocol` id of a protocol name.
fn protocol_id(name: &str) -> Option<i16> {
    match name {
        "PLAINTEXT" => Some(0),
        "SSL" => Some(1),
        "SASL_PLAINTEXT" => Some(2),
        "SASL_SSL" => Some(3),
        _ => None,
    }
}

/// What the driver runs on, from the broker's config: its advertised listeners
/// registered, the quorum's voters (or bootstrap servers) followed.
pub fn driver_config(
    config: &BrokerConfig,
    cluster_id: &str,
    metadata_directory_id: Uuid,
    log_dir_ids: Vec<Uuid>,
) -> anyhow::Result<DriverConfig> {
    let kraft = &config.kraft;
    match kraft.controller_security_protocol.as_deref() {
        Some("PLAINTEXT") | None => {}
        Some(other) => anyhow::bail!(
            "process.roles=broker: the controller listener {} is {other}; skua reaches Kafka's controllers over PLAINTEXT only so far",
            kraft.controller_listener_names.first().map_or("", String::as_str)
        ),
    }
    let mut listeners = Vec::new();
    for l in &config.advertised_listeners {
        let protocol = config
            .security_protocol(&l.name)
            .unwrap_or_else(|| l.name.clone());
        let Some(security_protocol) = protocol_id(&protocol) else {
            anyhow::bail!("listener {} has no known security protocol", l.name);
        };
        listeners.push(RegisteredListener {
            name: l.name.clone(),
            host: l.host.clone(),
            port: l.port,
            security_protocol,
        });
    }
    let quorum = match kraft.voters.is_empty() {
        true => &kraft.bootstrap_servers,
        false => &kraft.voters,
    };
    let bootstrap = quorum
        .iter()
        .map(|e| Endpoint {
            node_id: e.id,
            host: e.host.clone(),
            port: e.port,
        })
        .collect();
    let ms = |d: Duration| d.as_millis() as u64;
    Ok(DriverConfig {
        registration: Registration {
            broker_id: config.broker_id,
            cluster_id: cluster_id.to_string(),
            incarnation_id: Uuid::new_v4(),
            listeners,
            features: super::features::supported_features(),
            rack: config.rack.clone(),
            log_dirs: log_dir_ids,
            previous_broker_epoch: crate::log::previous_broker_epoch(&config.log_dirs),
        },
        timing: Timing {
            heartbeat_interval_ms: ms(kraft.heartbeat_interval),
            session_timeout_ms: ms(kraft.session_timeout),
            initial_registration_timeout_ms: ms(kraft.initial_registration_timeout),
        },
        follower: FollowerConfig {
            node_id: config.broker_id,
            cluster_id: cluster_id.to_string(),
            directory_id: metadata_directory_id,
            bootstrap,
            retry_backoff_ms: ms(kraft.quorum_retry_backoff),
            fetch_timeout_ms: ms(kraft.quorum_fetch_timeout),
            max_snapshot_bytes: MAX_SNAPSHOT_BYTES,
        },
        client: controller_client(config, "raft"),
        wait_for_ready: true,
    })
}

/// The client of the broker's requests to the controllers.
fn controller_client(config: &BrokerConfig, what: &str) -> ClientConfig {
    ClientConfig {
        client_id: Some(format!("broker-{}-{what}", config.broker_id)),
        request_timeout: config.kraft.quorum_request_timeout,
        ..ClientConfig::default()
    }
}

/// Runs `f` to its end from a blocking thread (or a worker of a multi-threaded runtime).
fn block_on<F: std::future::Future>(f: F) -> anyhow::Result<F::Output> {
    let handle = tokio::runtime::Handle::try_current()
        .map_err(|_| anyhow::anyhow!("a KRaft broker needs a tokio runtime"))?;
    Ok(tokio::task::block_in_place(|| handle.block_on(f)))
}

impl Membership {
    /// Starts registering and following the metadata log, and waits (from a blocking
    /// thread) until the controller says the broker caught up and the image it reached is
    /// published: what the logs are opened against. Fails once the driver stops (the
    /// registration timed out, the log could not be followed).
    pub fn start_blocking(config: &BrokerConfig, driver: DriverConfig) -> anyhow::Result<Self> {
        let controller = KraftController::new(
            config.broker_id,
            config.inter_broker_listener(),
            driver.registration.cluster_id.clone(),
            controller_client(config, "to-controller"),
        );
        tracing::info!(quorum = ?driver.follower.bootstrap, previous_broker_epoch = driver.registration.previous_broker_epoch, "registering with the KRaft controller quorum and following its metadata log");
        let broker = KraftBroker::start(driver, Some(controller.clone()));
        controller.attach(broker.status.clone());
        let status = broker.status.clone();
        let membership = Membership {
            controller,
            status,
            driver: Mutex::new(Some(broker)),
            leaving: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        };
        let reached = block_on(membership.wait(
            "the controller to acknowledge that we are caught up",
            |s| {
                matches!(s.state, BrokerState::Recovery | BrokerState::Running)
                    && s.applied_offset >= 0
            },
        ))?;
        match reached {
            Ok(s) => {
                tracing::info!(
                    broker_epoch = s.broker_epoch,
                    offset = s.applied_offset,
                    "caught up with the cluster's metadata log"
                );
                Ok(membership)
            }
            Err(why) => {
                membership.stop_blocking();
                anyhow::bail!("process.roles=broker: {why}")
            }
        }
    }

    /// Waits until the status satisfies `done`, or the driver stops (Err: why).
    async fn wait(&self, what: &str, done: impl Fn(&Status) -> bool) -> Result<Status, String> {
        let mut status = self.status.clone();
        loop {
            let s = status.borrow_and_update().clone();
            if done(&s) {
                return Ok(s);
            }
            if let Some(stopped) = &s.stopped {
                return Err(match stopped {
                    Stopped::Lifecycle(ShutdownReason::RegistrationTimedOut) => format!(
                        "no registration with the controller quorum succeeded within initial.broker.registration.timeout.ms while waiting for {what} (is the quorum reachable, the cluster id the dirs' one, and is a feature finalized at a level skua lacks? see the controller's log)"
                    ),
                    other => format!("the broker stopped while waiting for {what}: {other:?}"),
                });
            }
            if status.changed().await.is_err() {
                return Err(format!("the driver ended while waiting for {what}"));
            }
        }
    }

    /// Tells the controller which log dir holds each of this broker's replicas, from now
    /// on (`dirs`): `placement_of` names the `directory.id` to report for a partition's
    /// replica (`LogManager::placement_of`).
    pub fn place_replicas(
        &self,
        placement_of: impl Fn(&str, i32) -> Option<Uuid> + Send + Sync + 'static,
    ) {
        super::dirs::spawn(&self.controller, Arc::new(placement_of));
    }

    /// Where a log dir move reports its new dir before it switches.
    pub fn dir_assigner(&self) -> Arc<dyn crate::replica::log_dir_move::DirAssigner> {
        Arc::new(super::dirs::MoveAssigner::new(&self.controller))
    }

    /// Keeps `cluster`'s doubt of this broker's leaderships what the lifecycle says
    /// (`Status::leaderships_in_doubt`): its coordinators answer NOT_COORDINATOR while the
    /// controllers may have fenced it, as after a lost ZooKeeper session.
    pub fn follow_doubt(&self, cluster: Arc<crate::replica::cluster_view::ClusterView>) {
        tokio::spawn(follow_doubt(self.status.clone(), cluster));
    }

    /// The logs are open and every publisher follows the image: asks to be unfenced and
    /// waits until the controller did (Kafka's broker serves no request before).
    pub fn ready_blocking(&self) -> anyhow::Result<i64> {
        if let Some(d) = self.driver.lock().as_ref() {
            d.ready_to_unfence();
        }
        let running = block_on(self.wait("the broker to be unfenced", |s| {
            s.state == BrokerState::Running
        }))?
        .map_err(anyhow::Error::msg)?;
        // The controller answers the heartbeat before this broker fetched the record that
        // unfences it: clients are served once this broker's own Metadata names it.
        let me = self.controller.broker_id();
        let shown = block_on(self.controller.until("this broker unfenced", |image| {
            image
                .registration(me)
                .is_some_and(|r| !r.fenced)
                .then_some(())
        }))?;
        if let Err(e) = shown {
            tracing::warn!("{}", e.message);
        }
        tracing::info!(
            broker_epoch = running.broker_epoch,
            "unfenced by the controller"
        );
        self.halt_if_the_driver_stops();
        Ok(running.broker_epoch)
    }

    /// A driver that stops while the broker serves (the metadata log can no longer be
    /// followed, a failed log dir could not be reported) leaves it without heartbeats: the
    /// controllers fence it and elect other leaders while it would still answer as the
    /// old one. The process halts instead, as when every log dir is offline; the next
    /// start recovers the logs and registers again.
    fn halt_if_the_driver_stops(&self) {
        let mut status = self.status.clone();
        let leaving = self.leaving.clone();
        tokio::spawn(async move {
            loop {
                let stopped = status.borrow_and_update().stopped.clone();
                if let Some(why) = stopped {
                    if leaving.load(std::sync::atomic::Ordering::Acquire) {
                        return;
                    }
                    tracing::error!(reason = ?why, "the KRaft broker stopped following the controller quorum while serving: halting");
                    std::process::exit(1);
                }
                if status.changed().await.is_err() {
                    return;
                }
            }
        });
    }

    /// Controlled shutdown: `wantShutDown` in the heartbeats until the controller moved
    /// this broker's leaderships away and allows it, at most five minutes.
    pub async fn controlled_shutdown(&self) {
        self.leaving
            .store(true, std::sync::atomic::Ordering::Release);
        if self.status.borrow().state != BrokerState::Running {
            return;
        }
        match self.driver.lock().as_ref() {
            Some(d) => d.begin_controlled_shutdown(),
            None => return,
        }
        tracing::info!("asking the controller to move this broker's leaderships away");
        let done = tokio::time::timeout(
            CONTROLLED_SHUTDOWN_TIMEOUT,
            self.wait("the controller's permission to shut down", |s| {
                s.stopped.is_some()
            }),
        )
        .await;
        match done {
            Ok(Ok(s)) => tracing::info!(stopped = ?s.stopped, "controlled shutdown done"),
            Ok(Err(why)) => tracing::warn!("controlled shutdown: {why}"),
            Err(_) => tracing::error!(
                "timed out waiting for the controller to approve controlled shutdown"
            ),
        }
    }

    /// Stops the driver (no more heartbeats: the controller fences the broker once its
    /// session ends, or at once after a controlled shutdown).
    pub fn stop_blocking(&self) {
        self.leaving
            .store(true, std::sync::atomic::Ordering::Release);
        let Some(driver) = self.driver.lock().take() else {
            return;
        };
        if let Err(e) = block_on(driver.shutdown()) {
            tracing::warn!("the KRaft driver was not stopped: {e}");
        }
    }
}

/// Sets `cluster`'s doubt from each status the driver publishes, until it stops.
async fn follow_doubt(
    mut status: watch::Receiver<Status>,
    cluster: Arc<crate::replica::cluster_view::ClusterView>,
) {
    let mut in_doubt = false;
    loop {
        let now = status.borrow_and_update().leaderships_in_doubt;
        if now != in_doubt {
            in_doubt = now;
            if now {
                cluster.lease_lost();
            } else {
                cluster.lease_regained();
            }
        }
        if status.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::log::{Identity, MetaProperties};

    fn config(dirs: &[&Path], extra: &[(&str, &str)]) -> BrokerConfig {
        let log_dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        let mut props: std::collections::BTreeMap<String, String> = [
            ("process.roles", "broker"),
            ("node.id", "4"),
            (
                "controller.quorum.voters",
                "3000@ctl-a:9093,3001@ctl-b:9093",
            ),
            ("controller.listener.names", "CONTROLLER"),
            (
                "listener.security.protocol.map",
                "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            ),
            ("listeners", "PLAINTEXT://127.0.0.1:9092"),
            ("broker.rack", "r1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        props.insert("log.dirs".into(), log_dirs.join(","));
        for (k, v) in extra {
            props.insert(k.to_string(), v.to_string());
        }
        BrokerConfig::from_properties(props).unwrap()
    }

    fn checked(config: &BrokerConfig) -> LogDirs {
        LogDirs::check(
            &config.log_dirs,
            None,
            &Identity {
                configured_node_id: Some(config.broker_id),
                default_node_id: config.broker_id,
                configured_cluster_id: None,
            },
        )
        .unwrap()
    }

    fn formatted(dir: &Path, version: i32, directory_id: Option<Uuid>) {
        std::fs::create_dir_all(dir).unwrap();
        MetaProperties {
            version,
            node_id: 4,
            cluster_id: "c1uster".into(),
            directory_id,
        }
        .write(dir)
        .unwrap();
    }

    fn listing(dir: &Path) -> Vec<PathBuf> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| !p.ends_with(".lock"))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn an_unformatted_metadata_dir_is_refused_and_left_empty() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        let config = config(&[&a, &b], &[]);
        let err = check_formatted(&mut checked(&config))
            .unwrap_err()
            .to_string();
        assert!(err.contains("has no meta.properties"), "{err}");
        assert!(err.contains("kafka-storage.sh format"), "{err}");
        assert!(listing(&a).is_empty() && listing(&b).is_empty());
    }

    #[test]
    fn zookeeper_mode_dirs_and_dirs_without_directory_ids_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let a = root.path().join("a");
        formatted(&a, 0, Some(Uuid::from_u128(7)));
        let err = check_formatted(&mut checked(&config(&[&a], &[])))
            .unwrap_err()
            .to_string();
        assert!(err.contains("version 0"), "{err}");
        formatted(&a, 1, None);
        let before = std::fs::read(a.join("meta.properties")).unwrap();
        let err = check_formatted(&mut checked(&config(&[&a], &[])))
            .unwrap_err()
            .to_string();
        assert!(err.contains("no directory.id"), "{err}");
        assert_eq!(std::fs::read(a.join("meta.properties")).unwrap(), before);
    }

    /// As Kafka completes a formatted broker's other log dirs: the metadata dir's cluster
    /// and node, a new directory id; the metadata dir's file untouched.
    #[test]
    fn a_formatted_metadata_dir_gives_the_cluster_and_completes_the_other_dirs() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        let id = Uuid::from_u128(0xfeed);
        formatted(&a, 1, Some(id));
        let before = std::fs::read(a.join("meta.properties")).unwrap();
        let config = config(&[&a, &b], &[]);
        let mut dirs = checked(&config);
        assert_eq!(check_formatted(&mut dirs).unwrap(), ("c1uster".into(), id));
        assert_eq!(std::fs::read(a.join("meta.properties")).unwrap(), before);
        let other = MetaProperties::read(&b).unwrap().expect("written");
        assert_eq!((other.version, other.node_id), (1, 4));
        assert_eq!(other.cluster_id, "c1uster");
        assert!(other.directory_id.is_some_and(|d| d != id));
    }

    #[test]
    fn the_driver_registers_the_advertised_listeners_and_follows_the_voters() {
        let root = tempfile::tempdir().unwrap();
        let config = config(
            &[root.path()],
            &[
                (
                    "listeners",
                    "PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094",
                ),
                ("broker.heartbeat.interval.ms", "700"),
            ],
        );
        let (meta, dir) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let d = driver_config(&config, "c1uster", meta, vec![dir]).unwrap();
        let r = &d.registration;
        assert_eq!((r.broker_id, r.cluster_id.as_str()), (4, "c1uster"));
        let listeners: Vec<(&str, u16, i16)> = r
            .listeners
            .iter()
            .map(|l| (l.name.as_str(), l.port, l.security_protocol))
            .collect();
        assert_eq!(
            listeners,
            vec![("PLAINTEXT", 9092, 0), ("INTERNAL", 9094, 0)]
        );
        assert_eq!(r.rack.as_deref(), Some("r1"));
        assert_eq!(r.log_dirs, vec![dir]);
        assert_eq!(r.previous_broker_epoch, -1, "no clean shutdown marker");
        assert_eq!(d.follower.directory_id, meta);
        let voters: Vec<(Option<i32>, &str)> = d
            .follower
            .bootstrap
            .iter()
            .map(|e| (e.node_id, e.host.as_str()))
            .collect();
        assert_eq!(voters, vec![(Some(3000), "ctl-a"), (Some(3001), "ctl-b")]);
        assert_eq!(d.timing.heartbeat_interval_ms, 700);
        assert!(d.wait_for_ready, "unfenced only once the logs are open");
    }

    #[test]
    fn a_controller_listener_skua_cannot_speak_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let config = config(
            &[root.path()],
            &[(
                "listener.security.protocol.map",
                "CONTROLLER:SASL_SSL,PLAINTEXT:PLAINTEXT",
            )],
        );
        let err = driver_config(&config, "c", Uuid::nil(), vec![])
            .unwrap_err()
            .to_string();
        assert!(err.contains("CONTROLLER is SASL_SSL"), "{err}");
    }

    #[test]
    fn the_previous_epoch_is_the_clean_shutdown_markers_when_every_dir_agrees() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let marker = |d: &Path, epoch: i64| {
            std::fs::write(
                d.join(crate::log::CLEAN_SHUTDOWN_FILE),
                format!(r#"{{"version":0,"brokerEpoch":{epoch}}}"#),
            )
            .unwrap()
        };
        let dirs = [a.clone(), b.clone()];
        assert_eq!(crate::log::previous_broker_epoch(&dirs), -1);
        marker(&a, 42);
        assert_eq!(crate::log::previous_broker_epoch(&dirs), -1, "b unclean");
        marker(&b, 41);
        assert_eq!(crate::log::previous_broker_epoch(&dirs), -1, "they differ");
        marker(&b, 42);
        assert_eq!(crate::log::previous_broker_epoch(&dirs), 42);
    }

    /// The lifecycle's doubt reaches the replica layer's cluster view, where the
    /// coordinators read it (`CoordinatorRuntime::check_online`), and its end too.
    #[tokio::test]
    async fn the_lifecycles_doubt_reaches_the_cluster_view_and_ends_there() {
        use crate::replica::cluster_view::ClusterView;
        let cluster = Arc::new(ClusterView::new(1));
        let (tx, rx) = watch::channel(Status::default());
        let following = tokio::spawn(follow_doubt(rx, cluster.clone()));
        let settle = || async {
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
        };
        let set = |in_doubt: bool| {
            tx.send_modify(|s| s.leaderships_in_doubt = in_doubt);
        };
        settle().await;
        assert!(!cluster.leaderships_in_doubt());
        set(true);
        settle().await;
        assert!(cluster.leaderships_in_doubt());
        // Another change of status (an offset applied) keeps it.
        tx.send_modify(|s| s.applied_offset = 40);
        settle().await;
        assert!(cluster.leaderships_in_doubt());
        set(false);
        settle().await;
        assert!(!cluster.leaderships_in_doubt());
        drop(tx);
        following.await.unwrap();
    }
}
