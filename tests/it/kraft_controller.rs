//! skua's KRaft broker pieces (`controller::kraft`: lifecycle, metadata follower,
//! publisher, driven by `driver`) against a real Apache Kafka 4.4 controller
//! (`process.roles=controller`, started by `compat/kafka-controller.sh`): skua registers,
//! heartbeats, follows `__cluster_metadata` with KRaft's Fetch and is unfenced; a topic
//! created at the controller lands in skua's image with skua as its leader; a controlled
//! shutdown is granted; a new incarnation registers again with a newer broker epoch.
//!
//! Kafka's jars come from `$COMPAT_CACHE` (fetched there on first use, as for every
//! compat suite). Skipped, with a message, when java is not installed.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use skua::client::{Client, ClientConfig};
use skua::controller::image::MetadataImage;
use skua::controller::kraft::driver::{DriverConfig, KraftBroker, Status, Stopped};
use skua::controller::kraft::follower::{Endpoint, FollowerConfig};
use skua::controller::kraft::lifecycle::{
    BrokerState, RegisteredListener, Registration, ShutdownReason, Timing,
};
use uuid::Uuid;

use crate::common::cluster::ONE_AT_A_TIME;

const BROKER_ID: i32 = 1;
const SESSION_TIMEOUT_MS: u64 = 3000;
pub(crate) const CONTROLLER_ID: i32 = 3000;

/// A Kafka controller in a temp dir, stopped when dropped.
pub(crate) struct Controller {
    dir: tempfile::TempDir,
    pub(crate) port: u16,
    pub(crate) cluster_id: String,
}

impl Controller {
    /// `None` (with a message) only when java is not installed.
    pub(crate) fn start(features: &[&str]) -> Option<Controller> {
        Controller::start_with(features, &[])
    }

    /// With `settings` (`key=value` lines) added to the controller's properties.
    pub(crate) fn start_with(features: &[&str], settings: &[&str]) -> Option<Controller> {
        if Command::new("java").arg("-version").output().is_err() {
            eprintln!("SKIPPED: java is not installed, so no Kafka controller can start");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut command =
            Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("compat/kafka-controller.sh"));
        command
            .args(["--port", &port.to_string(), "--dir"])
            .arg(dir.path())
            .args(["--node-id", &CONTROLLER_ID.to_string()]);
        for f in features {
            command.args(["--feature", f]);
        }
        // A restarted broker's new incarnation waits for the old one's session to end.
        command.args([
            "--set",
            &format!("broker.session.timeout.ms={SESSION_TIMEOUT_MS}"),
        ]);
        for setting in settings {
            command.args(["--set", setting]);
        }
        let out = command.output().expect("compat/kafka-controller.sh runs");
        let log = std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
        assert!(
            out.status.success(),
            "compat/kafka-controller.sh: {}\n{log}",
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster_id = String::from_utf8(out.stdout).unwrap().trim().to_string();
        Some(Controller {
            dir,
            port,
            cluster_id,
        })
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Lowers each finalized feature to the level `features` (`name=level`) gives it, with
    /// Kafka's `kafka-features.sh --bootstrap-controller ... downgrade`.
    pub(crate) fn downgrade(&self, features: &[&str]) {
        let mut command =
            Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("compat/kafka-controller.sh"));
        command
            .args(["--tool", "org.apache.kafka.tools.FeatureCommand"])
            .args([
                "--bootstrap-controller",
                &format!("127.0.0.1:{}", self.port),
            ])
            .arg("downgrade");
        for f in features {
            command.args(["--feature", f]);
        }
        let out = command.output().expect("compat/kafka-controller.sh runs");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && said.matches("was downgraded to 0").count() == features.len(),
            "kafka-features.sh downgrade: {said}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The controller's JVM (`compat/kafka-controller.sh` wrote its pid).
    fn pid(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("kafka.pid"))
            .unwrap()
            .trim()
            .to_string()
    }

    /// Freezes the controller's JVM (SIGSTOP) until the guard is dropped (SIGCONT): it
    /// keeps its sockets but answers nothing, as if cut off from its brokers.
    pub(crate) fn freeze(&self) -> Frozen {
        let pid = self.pid();
        signal(&pid, "-STOP");
        Frozen(pid)
    }

    /// The cluster's metadata as the controller's log holds it now: a copy of its
    /// `__cluster_metadata-0`, replayed by skua's reader (the copy's torn tail, if the
    /// controller was writing, is recovered in the copy).
    pub(crate) fn metadata(&self) -> skua::controller::image::MetadataImage {
        metadata_in(self.dir.path())
    }
}

/// The metadata the log of the Kafka controller in `dir` (`compat/kafka-controller.sh
/// --dir`) holds now, as `Controller::metadata` reads it.
pub(crate) fn metadata_in(dir: &Path) -> skua::controller::image::MetadataImage {
    let copy = tempfile::tempdir().unwrap();
    let from = dir.join("data/__cluster_metadata-0");
    let to = copy.path().join("__cluster_metadata-0");
    std::fs::create_dir(&to).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
    let (_, replayed) =
        skua::controller::metadata_log::MetadataLog::open(copy.path(), CONTROLLER_ID)
            .expect("the controller's metadata log replays");
    replayed.image
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ =
            Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("compat/kafka-controller.sh"))
                .arg("--stop")
                .arg(self.dir.path())
                .output();
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(60).collect();
            eprintln!("--- the controller's server.log, last lines ---");
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

fn signal(pid: &str, sig: &str) {
    let status = Command::new("kill").args([sig, pid]).status().unwrap();
    assert!(status.success(), "kill {sig} {pid}");
}

/// A frozen controller, resumed when dropped.
pub(crate) struct Frozen(String);

impl Drop for Frozen {
    fn drop(&mut self) {
        signal(&self.0, "-CONT");
    }
}

/// Kafka 4.4 finalizes eligible.leader.replicas.version 1, transaction.version 2,
/// share.version 2 and streams.version 1 by default, none of which skua handles
/// (`controller::kraft::features`): the controller is formatted with them at 0.
pub(crate) const FORMAT_FEATURES: &[&str] = &[
    "eligible.leader.replicas.version=0",
    "transaction.version=0",
    "share.version=0",
    "streams.version=0",
];

fn config(controller: &Controller, dir: Uuid) -> DriverConfig {
    DriverConfig {
        registration: Registration {
            broker_id: BROKER_ID,
            cluster_id: controller.cluster_id.clone(),
            incarnation_id: Uuid::new_v4(),
            listeners: vec![RegisteredListener {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 19092,
                security_protocol: 0,
            }],
            features: skua::controller::kraft::features::supported_features(),
            rack: None,
            log_dirs: vec![dir],
            previous_broker_epoch: -1,
        },
        timing: Timing {
            heartbeat_interval_ms: 500,
            session_timeout_ms: SESSION_TIMEOUT_MS,
            initial_registration_timeout_ms: 30_000,
        },
        follower: FollowerConfig {
            node_id: BROKER_ID,
            cluster_id: controller.cluster_id.clone(),
            directory_id: dir,
            bootstrap: vec![Endpoint {
                node_id: Some(CONTROLLER_ID),
                host: "127.0.0.1".into(),
                port: controller.port,
            }],
            retry_backoff_ms: 100,
            fetch_timeout_ms: 2000,
            max_snapshot_bytes: 64 << 20,
        },
        client: ClientConfig::default(),
        wait_for_ready: false,
    }
}

async fn wait_status(broker: &mut KraftBroker, what: &str, f: impl Fn(&Status) -> bool) -> Status {
    let result = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let status = broker.status.borrow_and_update().clone();
            if f(&status) {
                return status;
            }
            assert_eq!(status.stopped, None, "stopped while waiting for {what}");
            broker.status.changed().await.unwrap();
        }
    })
    .await;
    result.unwrap_or_else(|_| panic!("timed out waiting for {what}: {:?}", broker.status.borrow()))
}

async fn wait_image(
    broker: &mut KraftBroker,
    what: &str,
    f: impl Fn(&MetadataImage) -> bool,
) -> Arc<MetadataImage> {
    let result = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let image = broker.image.borrow_and_update().clone();
            if f(&image) {
                return image;
            }
            broker.image.changed().await.unwrap();
        }
    })
    .await;
    result.unwrap_or_else(|_| panic!("timed out waiting for {what}: {:?}", broker.status.borrow()))
}

async fn create_topic(controller: &Controller, name: &str, partitions: i32) -> i16 {
    let client = Client::new(
        format!("127.0.0.1:{}", controller.port).parse().unwrap(),
        ClientConfig::default(),
    );
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.into())))
            .with_num_partitions(partitions)
            .with_replication_factor(1)])
        .with_timeout_ms(10_000);
    let (_, response): (i16, CreateTopicsResponse) =
        client.send_negotiated(&request, 2, 7).await.unwrap();
    response.topics[0].error_code
}

#[test]
fn skua_registers_with_a_kafka_4_controller_follows_its_metadata_and_leads_its_topics() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let started = std::time::Instant::now();
    let Some(controller) = Controller::start(FORMAT_FEATURES) else {
        return;
    };
    eprintln!("the controller started in {:?}", started.elapsed());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(registers_follows_and_leads(&controller));
}

async fn registers_follows_and_leads(controller: &Controller) {
    let t = std::time::Instant::now();
    let dir = Uuid::new_v4();
    let mut broker = KraftBroker::start(config(controller, dir), None);

    // Registered, caught up with the metadata log, unfenced.
    let running = wait_status(&mut broker, "RUNNING", |s| s.state == BrokerState::Running).await;
    eprintln!("RUNNING after {:?}: {running:?}", t.elapsed());
    assert_eq!(running.leader.map(|(id, _)| id), Some(CONTROLLER_ID));
    assert!(running.broker_epoch > 0, "{running:?}");
    let image = broker.image.borrow().clone();
    assert_eq!(
        image.metadata_version(),
        Some(33),
        "Kafka 4.4's metadata.version"
    );
    assert_eq!(image.feature("transaction.version"), None, "formatted at 0");
    assert_eq!(image.feature("group.version"), Some(1), "KIP-848 groups");
    assert_eq!(
        image.broker_epoch(BROKER_ID),
        Some(running.broker_epoch),
        "skua's own RegisterBrokerRecord, replayed from the controller's log"
    );

    // skua's registration as the controller recorded it: its listener, then unfenced.
    let image = wait_image(&mut broker, "skua unfenced in the image", |i| {
        !i.unfenced_brokers_on("PLAINTEXT").is_empty()
    })
    .await;
    let me = &image.unfenced_brokers_on("PLAINTEXT")[0];
    assert_eq!(
        (me.id, me.host.as_str(), me.port),
        (BROKER_ID, "127.0.0.1", 19092)
    );
    assert!(image.unfenced_brokers_on("SSL").is_empty());

    // A topic created at the controller: placed on skua, the only unfenced broker, led by
    // it, in the log dir it registered.
    assert_eq!(create_topic(controller, "orders", 3).await, 0);
    let image = wait_image(&mut broker, "the topic in the image", |i| {
        i.topic("orders").is_some_and(|t| t.partitions.len() == 3)
    })
    .await;
    let topic = image.topic("orders").unwrap();
    for p in &topic.partitions {
        assert_eq!(p.assignment.replicas, vec![BROKER_ID], "{p:?}");
        assert_eq!(p.assignment.directories, vec![dir], "{p:?}");
        assert_eq!(p.state.leader, BROKER_ID, "{p:?}");
        assert_eq!(p.state.isr, vec![BROKER_ID], "{p:?}");
    }
    let applied = broker.status.borrow().applied_offset;
    assert!(applied > running.applied_offset, "{applied}");

    // Controlled shutdown: the controller moves what it can and lets the broker go.
    broker.begin_controlled_shutdown();
    let stopped = wait_status(&mut broker, "the end of the controlled shutdown", |s| {
        s.stopped.is_some()
    })
    .await;
    assert_eq!(
        stopped.stopped,
        Some(Stopped::Lifecycle(ShutdownReason::ControlledShutdownDone))
    );
    broker.shutdown().await;
    eprintln!("controlled shutdown done after {:?}", t.elapsed());

    // A new incarnation of the same broker registers at once with a newer epoch, and
    // leads the topic again.
    let mut again = KraftBroker::start(config(controller, dir), None);
    let rerun = wait_status(&mut again, "RUNNING again", |s| {
        s.state == BrokerState::Running
    })
    .await;
    assert!(
        rerun.broker_epoch > running.broker_epoch,
        "{rerun:?} after {running:?}"
    );
    wait_image(&mut again, "skua leading the topic again", |i| {
        i.topic("orders").is_some_and(|t| {
            t.partitions.len() == 3 && t.partitions.iter().all(|p| p.state.leader == BROKER_ID)
        })
    })
    .await;
    eprintln!("the new incarnation leads again after {:?}", t.elapsed());
    again.shutdown().await;
}

/// The zombie-coordinator window of a KRaft broker: Kafka's controller frozen (SIGSTOP)
/// past the session timeout answers none of skua's heartbeats, so the controllers may
/// have fenced skua and moved its leaderships: skua's leaderships come in doubt (its
/// coordinators answer NOT_COORDINATOR), not before the session timeout from the last
/// heartbeat answered, and it stays RUNNING. Once the controller runs again and answers a
/// heartbeat as unfenced (after fencing skua, if its session check ran first), the doubt
/// ends.
#[test]
fn a_broker_whose_controller_goes_silent_past_the_session_timeout_doubts_its_leaderships_until_unfenced(
) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(controller) = Controller::start(FORMAT_FEATURES) else {
        return;
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(doubt_while_silent(&controller));
}

async fn doubt_while_silent(controller: &Controller) {
    let dir = Uuid::new_v4();
    let mut broker = KraftBroker::start(config(controller, dir), None);
    wait_status(&mut broker, "RUNNING", |s| s.state == BrokerState::Running).await;
    assert!(!broker.status.borrow().leaderships_in_doubt);

    let frozen = controller.freeze();
    let t = std::time::Instant::now();
    // Within the session timeout the controller has fenced nothing: no doubt.
    tokio::time::sleep(Duration::from_millis(SESSION_TIMEOUT_MS / 2)).await;
    assert!(
        !broker.status.borrow().leaderships_in_doubt,
        "in doubt within the session timeout"
    );
    let s = wait_status(&mut broker, "the leaderships in doubt", |s| {
        s.leaderships_in_doubt
    })
    .await;
    let after = t.elapsed();
    eprintln!("in doubt {after:?} after the controller froze");
    // The lease runs from the last answered heartbeat's send, at most one interval
    // (500 ms) and a round trip (allowed 500 ms on a loaded machine) before the freeze.
    assert!(
        after >= Duration::from_millis(SESSION_TIMEOUT_MS - 1000)
            && after <= Duration::from_millis(SESSION_TIMEOUT_MS + 1500),
        "in doubt after {after:?}"
    );
    assert_eq!(s.state, BrokerState::Running, "{s:?}");

    // Silent a while longer: the controller's own session check finds skua's session over.
    tokio::time::sleep(Duration::from_millis(SESSION_TIMEOUT_MS)).await;
    assert!(broker.status.borrow().leaderships_in_doubt);
    drop(frozen);
    let t = std::time::Instant::now();
    let s = wait_status(
        &mut broker,
        "the doubt settled by an unfenced answer",
        |s| !s.leaderships_in_doubt,
    )
    .await;
    eprintln!(
        "the doubt ended {:?} after the controller resumed",
        t.elapsed()
    );
    assert_eq!(s.state, BrokerState::Running, "{s:?}");
    wait_image(&mut broker, "skua unfenced in the image", |i| {
        i.registration(BROKER_ID).is_some_and(|r| !r.fenced)
    })
    .await;
    let fenced = controller
        .log()
        .contains("Fencing broker 1 because its session has timed out");
    eprintln!("the controller fenced skua meanwhile: {fenced}");
    broker.shutdown().await;
}

/// Every delta a subscriber was handed: topics changed (+) and removed (-), in order.
#[derive(Default)]
struct Recorder(std::sync::Mutex<Vec<String>>);

impl skua::controller::delta::MetadataListener for Recorder {
    fn on_delta(
        &self,
        _image: &MetadataImage,
        delta: &skua::controller::delta::MetadataDelta,
    ) -> Vec<skua::controller::delta::ApplyError> {
        use skua::controller::delta::TopicDelta;
        let mut seen = self.0.lock().unwrap();
        for (name, t) in &delta.topics {
            match t {
                TopicDelta::Changed(t) => seen.push(format!("+{name}/{}", t.partitions.len())),
                TopicDelta::Removed(_) => seen.push(format!("-{name}")),
            }
        }
        Vec::new()
    }
}

/// The `Controller` a KRaft broker's handlers use, against the Kafka 4.4 controller:
/// unfenced only once the broker says it is ready; topics created, grown, reconfigured
/// and deleted through the controller, each answered once the image shows it, and every
/// change handed to a subscriber; the controller's refusals answered with its errors;
/// producer ids from the blocks the controller allocates.
#[test]
fn the_kraft_backend_forwards_metadata_changes_to_a_kafka_4_controller() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(controller) = Controller::start(FORMAT_FEATURES) else {
        return;
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(backend_forwards(&controller));
}

async fn backend_forwards(controller: &Controller) {
    use skua::controller::kraft::backend::KraftController;
    use skua::controller::{Controller as _, NewTopic};

    let dir = Uuid::new_v4();
    let backend = KraftController::new(
        BROKER_ID,
        "PLAINTEXT".into(),
        controller.cluster_id.clone(),
        ClientConfig::default(),
    );
    let recorder = Arc::new(Recorder::default());
    assert!(backend.subscribe(recorder.clone()).is_empty());
    let mut config = config(controller, dir);
    config.wait_for_ready = true;
    let mut broker = KraftBroker::start(config, Some(backend.clone()));
    backend.attach(broker.status.clone());

    // Caught up, but fenced until the broker says its logs are open.
    wait_status(&mut broker, "RECOVERY", |s| {
        s.state == BrokerState::Recovery
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(broker.status.borrow().state, BrokerState::Recovery);
    assert!(
        backend.brokers_on("PLAINTEXT").is_empty(),
        "fenced: in no Metadata"
    );
    broker.ready_to_unfence();
    let running = wait_status(&mut broker, "RUNNING", |s| s.state == BrokerState::Running).await;
    assert_eq!(backend.broker_epoch(), running.broker_epoch);
    wait_image(&mut broker, "skua unfenced", |i| {
        !i.unfenced_brokers_on("PLAINTEXT").is_empty()
    })
    .await;
    let me = backend.brokers_on("PLAINTEXT");
    assert_eq!(
        me.iter().map(|b| (b.id, b.port)).collect::<Vec<_>>(),
        vec![(BROKER_ID, 19092)]
    );
    assert_eq!(
        backend.controller_id(),
        BROKER_ID,
        "a live broker, not the controller"
    );

    let new_topic = |name: &str, partitions: i32, replication: i16| NewTopic {
        name: name.into(),
        num_partitions: partitions,
        replication_factor: replication,
        assignments: Default::default(),
        configs: [("cleanup.policy".to_string(), "compact".to_string())].into(),
    };
    let created = backend
        .create_topic(new_topic("events", 2, 1), false)
        .await
        .unwrap();
    assert_eq!(created.partitions.len(), 2);
    assert!(created
        .partitions
        .iter()
        .all(|p| p.state.leader == BROKER_ID));
    assert_eq!(created.configs["cleanup.policy"], "compact");
    assert_eq!(backend.topic("events").unwrap().topic_id, created.topic_id);
    assert_eq!(
        backend.topic_by_id(created.topic_id).unwrap().name,
        "events"
    );

    // The controller's refusals, with its errors.
    let e = backend
        .create_topic(new_topic("events", 2, 1), false)
        .await
        .unwrap_err();
    assert_eq!(
        e.error,
        kafka_protocol::error::ResponseError::TopicAlreadyExists,
        "{e:?}"
    );
    let e = backend
        .create_topic(new_topic("wide", 1, 3), false)
        .await
        .unwrap_err();
    assert_eq!(
        e.error,
        kafka_protocol::error::ResponseError::InvalidReplicationFactor,
        "{e:?}"
    );
    let checked = backend
        .create_topic(new_topic("checked", 5, 1), true)
        .await
        .unwrap();
    assert_eq!(checked.partitions.len(), 5);
    assert!(
        backend.topic("checked").is_none(),
        "validate_only creates nothing"
    );

    let grown = backend
        .create_partitions("events", 4, None, false)
        .await
        .unwrap();
    assert_eq!(grown.partitions.len(), 4);
    let e = backend
        .create_partitions("events", 3, None, false)
        .await
        .unwrap_err();
    assert_eq!(
        e.error,
        kafka_protocol::error::ResponseError::InvalidPartitions,
        "{e:?}"
    );

    let configs = [("retention.ms".to_string(), "1000".to_string())].into();
    let reconfigured = backend.set_topic_configs("events", configs).await.unwrap();
    assert_eq!(
        reconfigured.configs.clone().into_iter().collect::<Vec<_>>(),
        vec![("retention.ms".to_string(), "1000".to_string())],
        "compact deleted, retention set"
    );

    let first = backend.next_producer_id().await.unwrap();
    let second = backend.next_producer_id().await.unwrap();
    assert!(first >= 0 && second == first + 1, "{first} {second}");

    let removed = backend.delete_topic("events").await.unwrap();
    assert_eq!(removed.topic_id, created.topic_id);
    assert!(backend.topic("events").is_none());

    let seen = recorder.0.lock().unwrap().clone();
    assert_eq!(
        seen.first().map(String::as_str),
        Some("+events/2"),
        "{seen:?}"
    );
    assert!(seen.contains(&"+events/4".to_string()), "{seen:?}");
    assert_eq!(seen.last().map(String::as_str), Some("-events"), "{seen:?}");
    assert!(
        !seen
            .iter()
            .any(|s| s.contains("checked") || s.contains("wide")),
        "{seen:?}"
    );
    broker.shutdown().await;
}

/// AlterPartition from a skua leader, as `replica::isr` builds it (v3, each member with its
/// registration's broker epoch, KIP-903), through the KRaft backend's controller channel:
/// a Kafka 4.4 controller commits the shrink and the expansion, and both brokers' images
/// show them; a stale partition epoch is refused, and so is a member named at an epoch it
/// is no longer registered at.
#[test]
fn isr_changes_from_a_skua_leader_are_committed_by_a_kafka_4_controller() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(controller) = Controller::start(FORMAT_FEATURES) else {
        return;
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(isr_changes(&controller));
}

async fn isr_changes(controller: &Controller) {
    use kafka_protocol::messages::alter_partition_request::{
        BrokerState as Member, PartitionData, TopicData,
    };
    use kafka_protocol::messages::AlterPartitionRequest;
    use skua::controller::kraft::backend::KraftController;
    use skua::controller::{Controller as _, NewTopic};
    use skua::replica::isr::ControllerChannel;

    let start = |id: i32, port: u16| {
        let backend = KraftController::new(
            id,
            "PLAINTEXT".into(),
            controller.cluster_id.clone(),
            ClientConfig::default(),
        );
        let mut config = config(controller, Uuid::new_v4());
        config.registration.broker_id = id;
        config.registration.listeners[0].port = port;
        config.follower.node_id = id;
        let broker = KraftBroker::start(config, Some(backend.clone()));
        backend.attach(broker.status.clone());
        (backend, broker)
    };
    let (one, mut broker1) = start(1, 19092);
    let (two, mut broker2) = start(2, 19093);
    for b in [&mut broker1, &mut broker2] {
        wait_status(b, "RUNNING", |s| s.state == BrokerState::Running).await;
        wait_image(b, "both brokers unfenced", |i| {
            i.unfenced_brokers_on("PLAINTEXT").len() == 2
        })
        .await;
    }
    let topic = one
        .create_topic(
            NewTopic {
                name: "shared".into(),
                num_partitions: 1,
                replication_factor: -1,
                assignments: [(0, vec![1, 2])].into(),
                configs: Default::default(),
            },
            false,
        )
        .await
        .unwrap();
    let p = topic.partitions[0].state.clone();
    assert_eq!((p.leader, p.isr.clone()), (1, vec![1, 2]));

    let epochs = [(1, one.broker_epoch()), (2, two.broker_epoch())];
    assert!(epochs.iter().all(|(_, e)| *e > 0), "{epochs:?}");
    let alter = |leader_epoch: i32, partition_epoch: i32, isr: &[(i32, i64)]| {
        let isr = isr.to_vec();
        let id = topic.topic_id;
        let epoch = one.broker_epoch();
        move |_version: i16| {
            AlterPartitionRequest::default()
                .with_broker_id(1.into())
                .with_broker_epoch(epoch)
                .with_topics(vec![TopicData::default()
                    .with_topic_id(id)
                    .with_partitions(vec![PartitionData::default()
                        .with_partition_index(0)
                        .with_leader_epoch(leader_epoch)
                        .with_partition_epoch(partition_epoch)
                        .with_new_isr_with_epochs(
                            isr.iter()
                                .map(|(b, e)| {
                                    Member::default()
                                        .with_broker_id((*b).into())
                                        .with_broker_epoch(*e)
                                })
                                .collect(),
                        )])])
        }
    };
    let channel: &dyn ControllerChannel = &*one;
    // Shrink to the leader alone.
    let (version, response) = channel
        .alter_partition(3, &alter(p.leader_epoch, p.partition_epoch, &epochs[..1]))
        .await
        .unwrap();
    assert_eq!(version, 3);
    let r = &response.topics[0].partitions[0];
    assert_eq!(r.error_code, 0, "{response:?}");
    assert_eq!(r.isr.iter().map(|b| b.0).collect::<Vec<_>>(), vec![1]);
    assert!(r.partition_epoch > p.partition_epoch);
    let shrunk_epoch = r.partition_epoch;
    for b in [&mut broker1, &mut broker2] {
        wait_image(b, "the shrunk ISR", |i| {
            i.topic("shared").unwrap().partitions[0].state.isr == vec![1]
        })
        .await;
    }
    // A proposal at the old partition epoch is refused.
    let (_, response) = channel
        .alter_partition(3, &alter(p.leader_epoch, p.partition_epoch, &epochs))
        .await
        .unwrap();
    assert_eq!(
        response.topics[0].partitions[0].error_code,
        kafka_protocol::error::ResponseError::InvalidUpdateVersion.code(),
        "{response:?}"
    );
    // A member named at an epoch it is not registered at (a broker that restarted since
    // its fetch) is refused: the controller checks the epochs skua sends.
    let stale = [epochs[0], (2, epochs[1].1 - 1)];
    let (_, response) = channel
        .alter_partition(3, &alter(p.leader_epoch, shrunk_epoch, &stale))
        .await
        .unwrap();
    assert_eq!(
        response.topics[0].partitions[0].error_code,
        kafka_protocol::error::ResponseError::IneligibleReplica.code(),
        "{response:?}"
    );
    // The follower back in.
    let (_, response) = channel
        .alter_partition(3, &alter(p.leader_epoch, shrunk_epoch, &epochs))
        .await
        .unwrap();
    let r = &response.topics[0].partitions[0];
    assert_eq!(r.error_code, 0, "{response:?}");
    assert_eq!(r.isr.iter().map(|b| b.0).collect::<Vec<_>>(), vec![1, 2]);
    wait_image(&mut broker2, "the expanded ISR", |i| {
        i.topic("shared").unwrap().partitions[0].state.isr == vec![1, 2]
    })
    .await;
    assert_eq!(two.topic("shared").unwrap().partitions[0].state.leader, 1);
    broker1.shutdown().await;
    broker2.shutdown().await;
}

/// A cluster that finalized a feature level skua does not handle (Kafka 4.4's defaults:
/// transaction.version 2, share.version 2, ...) refuses its registration: the broker is
/// never unfenced, and stops once `initial.broker.registration.timeout.ms` passes. Once
/// those levels are lowered with Kafka's own `kafka-features.sh downgrade` (the way
/// docs/operations.md gives a cluster formatted with Kafka's defaults), skua registers
/// and is unfenced.
#[test]
fn a_cluster_with_feature_levels_skua_lacks_refuses_its_registration() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(controller) = Controller::start(&[]) else {
        return;
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let mut config = config(&controller, Uuid::new_v4());
            config.timing.initial_registration_timeout_ms = 4000;
            let mut broker = KraftBroker::start(config, None);
            let stopped = tokio::time::timeout(Duration::from_secs(30), async {
                loop {
                    let s = broker.status.borrow_and_update().clone();
                    assert_ne!(s.state, BrokerState::Running, "{s:?}");
                    if s.stopped.is_some() {
                        return s;
                    }
                    broker.status.changed().await.unwrap();
                }
            })
            .await
            .expect("the registration timeout stops the broker");
            assert_eq!(
                stopped.stopped,
                Some(Stopped::Lifecycle(ShutdownReason::RegistrationTimedOut))
            );
            assert_eq!(stopped.broker_epoch, -1, "never registered");
            assert!(
                stopped.applied_offset >= 0,
                "the metadata log was followed all along"
            );
            broker.shutdown().await;
        });
    let log = controller.log();
    let refusals: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("registerBroker: event failed with UnsupportedVersionException")
                && l.contains("does not support finalized version")
        })
        .collect();
    assert!(
        !refusals.is_empty(),
        "the controller refused the registration for a feature level:\n{}",
        log.lines()
            .filter(|l| l.contains("egist"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    controller.downgrade(FORMAT_FEATURES);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let mut broker = KraftBroker::start(config(&controller, Uuid::new_v4()), None);
            let running =
                wait_status(&mut broker, "RUNNING", |s| s.state == BrokerState::Running).await;
            assert!(running.broker_epoch > 0, "{running:?}");
            broker.shutdown().await;
        });
}
