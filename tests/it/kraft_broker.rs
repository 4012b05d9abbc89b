//! skua as a broker of a KRaft cluster (`process.roles=broker`) whose controller is an
//! Apache Kafka 4.4 controller (`compat/kafka-controller.sh`): the skua binary starts on
//! dirs `kafka-storage.sh format` formatted, registers and is unfenced; a topic created,
//! grown and reconfigured through skua is the controller's; records produced through skua
//! are fetched back, with producer ids from the controller's blocks and offsets committed
//! to a group; ACLs and SCRAM credentials made through skua are the controller's (forwarded
//! in Envelopes); SIGTERM shuts it down under the controller's controlled shutdown, and the
//! restarted broker registers again with every record and offset kept. Beside an Apache
//! Kafka 4.4 broker of the same cluster, each replicates the other's partitions byte for
//! byte, and elections, reassignments and DescribeQuorum through skua reach the controller.
//!
//! Kafka's jars come from `$COMPAT_CACHE`. Skipped, with a message, when java is not
//! installed.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{
    create_partitions_request, delete_topics_request, describe_configs_request,
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeClusterRequest,
    DescribeConfigsRequest, FindCoordinatorRequest, InitProducerIdRequest, MetadataRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use crate::common::cluster::ONE_AT_A_TIME;
use crate::common::{batch, values, Client};
use crate::kraft_controller::{Controller, FORMAT_FEATURES};

const BROKER_ID: i32 = 1;

pub(crate) fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The skua binary on a properties file, its output (the log is on stdout) in `log`;
/// killed when dropped.
pub(crate) struct Skua {
    pub(crate) child: Child,
    log: PathBuf,
}

impl Skua {
    pub(crate) fn start(props: &Path, log: &Path) -> Skua {
        let out = std::fs::File::create(log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_skua"))
            .arg(props)
            .env("RUST_LOG", "info")
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        Skua {
            child,
            log: log.to_path_buf(),
        }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the broker serves (it logs "skua started" once it is unfenced).
    pub(crate) fn wait_started(&mut self) -> Duration {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(60) {
            if self.log().contains("skua started") {
                return t.elapsed();
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("skua exited with {status}:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("skua did not start:\n{}", self.log());
    }

    /// SIGTERM, then the exit status once it stopped.
    pub(crate) fn terminate(&mut self) -> (std::process::ExitStatus, Duration) {
        let t = Instant::now();
        // SAFETY: kill(2) on the pid of our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        while t.elapsed() < Duration::from_secs(60) {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, t.elapsed());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("skua did not stop after SIGTERM:\n{}", self.log());
    }
}

impl Drop for Skua {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- skua's log ---\n{}", self.log());
        }
    }
}

/// The controller's and skua's authorizer in the first scenario: the ACLs are the
/// controller's records, and every client here (PLAINTEXT: User:ANONYMOUS) a super user.
const AUTHORIZER: &[&str] = &[
    "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users=User:ANONYMOUS",
];

/// skua's `server.properties` as a Kafka 4 broker of `controller`'s cluster would have it,
/// with `extra` lines.
fn write_properties(
    dir: &Path,
    controller: &Controller,
    node_id: i32,
    port: u16,
    extra: &[&str],
) -> PathBuf {
    let quorum = format!(
        "controller.quorum.bootstrap.servers=127.0.0.1:{}",
        controller.port
    );
    write_properties_with_dirs(dir, &quorum, node_id, port, &["data"], extra)
}

/// As `write_properties`, with `quorum` the line naming the controllers and `log.dirs`
/// the dirs `log_dirs` of `dir` (the first holds the metadata log).
pub(crate) fn write_properties_with_dirs(
    dir: &Path,
    quorum: &str,
    node_id: i32,
    port: u16,
    log_dirs: &[&str],
    extra: &[&str],
) -> PathBuf {
    let props = dir.join("server.properties");
    std::fs::write(
        &props,
        format!(
            "process.roles=broker\n\
             node.id={node_id}\n\
             {quorum}\n\
             controller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n\
             listeners=PLAINTEXT://127.0.0.1:{port}\n\
             log.dirs={data}\n\
             broker.heartbeat.interval.ms=500\n\
             broker.session.timeout.ms=3000\n\
             offsets.topic.replication.factor=1\n\
             offsets.topic.num.partitions=2\n\
             transaction.state.log.replication.factor=1\n{extra}",
            data = log_dirs
                .iter()
                .map(|d| dir.join(d).display().to_string())
                .collect::<Vec<_>>()
                .join(","),
            extra = extra.iter().map(|l| format!("{l}\n")).collect::<String>(),
        ),
    )
    .unwrap();
    props
}

/// `kafka-storage.sh format` of the dirs `props` names, for `controller`'s cluster.
fn format_dirs(props: &Path, controller: &Controller) {
    format_dirs_for(props, &controller.cluster_id)
}

/// `kafka-storage.sh format` of the dirs `props` names, for cluster `cluster_id`.
pub(crate) fn format_dirs_for(props: &Path, cluster_id: &str) {
    let mut format = Command::new(script());
    format
        .arg("--format-broker")
        .arg(props)
        .args(["--cluster-id", cluster_id]);
    for f in FORMAT_FEATURES {
        format.args(["--feature", f]);
    }
    let out = format.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub(crate) fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("compat/kafka-controller.sh")
}

#[test]
fn skua_serves_as_a_broker_of_a_kafka_4_kraft_cluster_and_keeps_its_records_across_a_restart() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let Some(controller) = Controller::start_with(FORMAT_FEATURES, AUTHORIZER) else {
        return;
    };
    eprintln!("the controller started in {:?}", started.elapsed());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // Two log dirs, as `kafka-storage.sh format` formats them: skua spreads its replicas
    // over both and tells the controller which holds each (AssignReplicasToDirs).
    let quorum = format!(
        "controller.quorum.bootstrap.servers=127.0.0.1:{}",
        controller.port
    );
    let props = write_properties_with_dirs(
        dir.path(),
        &quorum,
        BROKER_ID,
        port,
        &["data", "data2"],
        AUTHORIZER,
    );

    // Unformatted dirs are refused, with the way to format them.
    let out = Command::new(env!("CARGO_BIN_EXE_skua"))
        .arg(&props)
        .output()
        .unwrap();
    // skua logs on stdout.
    let err = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("kafka-storage.sh format"),
        "{}: {err}",
        out.status
    );

    format_dirs(&props, &controller);
    let meta = std::fs::read_to_string(dir.path().join("data/meta.properties")).expect("formatted");
    assert!(meta.contains("version=1"), "{meta}");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut skua = Skua::start(&props, &dir.path().join("skua-1.log"));
    eprintln!("skua started in {:?}", skua.wait_started());
    let produced = rt.block_on(first_run(addr, &controller));
    let placed = replicas_placed_on_their_dirs(dir.path(), &["data", "data2"], &controller);
    eprintln!("the controller names each replica's log dir: {placed:?}");
    move_to_the_other_dir(&rt, addr, dir.path(), &skua);
    replicas_placed_on_their_dirs(dir.path(), &["data", "data2"], &controller);
    rt.block_on(coordinator_steps_back_while_the_controller_is_silent(
        addr,
        &controller,
    ));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("data/meta.properties")).unwrap(),
        meta,
        "skua keeps the formatted meta.properties as it is"
    );

    // SIGTERM: a controlled shutdown the controller allows, then a clean stop.
    let (status, took) = skua.terminate();
    eprintln!("skua stopped in {took:?}");
    assert!(status.success(), "{status}\n{}", skua.log());
    let log = skua.log();
    assert!(
        log.contains("controlled shutdown done") && log.contains("ControlledShutdownDone"),
        "{log}"
    );
    assert!(
        took < Duration::from_secs(15),
        "the controller allowed it at once: {took:?}"
    );

    let mut again = Skua::start(&props, &dir.path().join("skua-2.log"));
    eprintln!("skua restarted in {:?}", again.wait_started());
    rt.block_on(second_run(addr, &produced));
    replicas_placed_on_their_dirs(dir.path(), &["data", "data2"], &controller);
    let (status, _) = again.terminate();
    assert!(status.success(), "{status}");
    assert!(
        controller.log().contains(&format!(
            "Registering a new incarnation of broker {BROKER_ID}"
        )),
        "the controller saw the restart as a new incarnation"
    );
    eprintln!("the whole scenario took {:?}", started.elapsed());
}

/// The zombie-coordinator window closed on a KRaft broker: the controller frozen
/// (SIGSTOP) past `broker.session.timeout.ms` (3 s here) may have fenced skua and moved
/// `__consumer_offsets` elsewhere, so skua's group coordinator answers NOT_COORDINATOR
/// (not before half the session timeout); once the controller answers a heartbeat as
/// unfenced, it serves again with the offsets committed before.
async fn coordinator_steps_back_while_the_controller_is_silent(
    addr: SocketAddr,
    controller: &Controller,
) {
    const NOT_COORDINATOR: i16 = 16;
    let mut c = Client::connect(addr).await;
    assert_eq!(c.commit_offset("readers", "orders", 4, None).await, 0);
    let frozen = controller.freeze();
    let t = Instant::now();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        c.commit_offset("readers", "orders", 5, None).await,
        0,
        "within the session timeout the coordinator serves"
    );
    let mut committed = 5;
    loop {
        let code = c.commit_offset("readers", "orders", 6, None).await;
        if code == NOT_COORDINATOR {
            break;
        }
        assert_eq!(code, 0);
        committed = 6;
        assert!(
            t.elapsed() < Duration::from_secs(8),
            "the coordinator still serves {:?} after the controller went silent",
            t.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "NOT_COORDINATOR {:?} after the controller went silent",
        t.elapsed()
    );
    assert_eq!(c.committed_offsets("readers").await.0, NOT_COORDINATOR);
    drop(frozen);
    let t = Instant::now();
    loop {
        let (code, offsets) = c.committed_offsets("readers").await;
        if code == 0 {
            assert_eq!(
                offsets,
                vec![committed],
                "what was committed before the doubt"
            );
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the coordinator still steps back {:?} after the controller resumed: {code}",
            t.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "serving again {:?} after the controller resumed",
        t.elapsed()
    );
    assert_eq!(c.commit_offset("readers", "orders", 3, None).await, 0);
}

/// AlterReplicaLogDirs of `orders-0` to skua's other log dir: the move switches only once
/// the controller accepted the new dir (AssignReplicasToDirs before the switch, as Kafka's
/// `ReplicaAlterLogDirsThread`), within 20 s.
fn move_to_the_other_dir(rt: &tokio::runtime::Runtime, addr: SocketAddr, dir: &Path, skua: &Skua) {
    use kafka_protocol::messages::alter_replica_log_dirs_request::{
        AlterReplicaLogDir, AlterReplicaLogDirTopic,
    };
    use kafka_protocol::messages::AlterReplicaLogDirsRequest;
    let to = match dir.join("data/orders-0").is_dir() {
        true => dir.join("data2"),
        false => dir.join("data"),
    };
    let request =
        AlterReplicaLogDirsRequest::default().with_dirs(vec![AlterReplicaLogDir::default()
            .with_path(s(&to.display().to_string()))
            .with_topics(vec![AlterReplicaLogDirTopic::default()
                .with_name(TopicName(s("orders")))
                .with_partitions(vec![0])])]);
    let codes: Vec<i16> = rt.block_on(async {
        let mut c = Client::connect(addr).await;
        let response = c.send(&request, 2).await;
        response
            .results
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect()
    });
    assert_eq!(codes, vec![0]);
    let t = Instant::now();
    while !to.join("orders-0").is_dir() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "orders-0 not moved to {}: {}",
            to.display(),
            skua.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("orders-0 moved in {:?}", t.elapsed());
    assert!(
        skua.log()
            .contains("the controller accepted the replica's new log dir"),
        "{}",
        skua.log()
    );
}

/// Waits (10 s at most) until the controller's metadata names, for every partition skua
/// holds in `log_dirs` (of `dir`), the `directory.id` of the dir holding it; every dir
/// holds some. Returns how many each holds.
fn replicas_placed_on_their_dirs(
    dir: &Path,
    log_dirs: &[&str],
    controller: &Controller,
) -> Vec<usize> {
    // (topic, partition, the dir's id) of each partition dir skua made.
    let mut held = Vec::new();
    let mut counts = Vec::new();
    for d in log_dirs {
        let path = dir.join(d);
        let meta = std::fs::read_to_string(path.join("meta.properties")).unwrap();
        let id = meta
            .lines()
            .find_map(|l| l.strip_prefix("directory.id="))
            .unwrap_or_else(|| panic!("{meta}"));
        let id = skua::log::kafka_string_to_uuid(id).unwrap();
        let mut count = 0;
        for entry in std::fs::read_dir(&path).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().to_string();
            let Some((topic, partition)) = name.rsplit_once('-') else {
                continue;
            };
            let Ok(partition) = partition.parse::<i32>() else {
                continue;
            };
            if topic != "__cluster_metadata" {
                held.push((topic.to_string(), partition, id));
                count += 1;
            }
        }
        counts.push(count);
    }
    assert!(counts.iter().all(|c| *c > 0), "{counts:?} {held:?}");
    let t = Instant::now();
    loop {
        let image = controller.metadata();
        let named = |topic: &str, partition: i32| {
            let t = image.topic(topic)?;
            let p = t.partitions.iter().find(|p| p.partition == partition)?;
            let i = p.assignment.replicas.iter().position(|r| *r == BROKER_ID)?;
            p.assignment.directories.get(i).copied()
        };
        let wrong: Vec<_> = held
            .iter()
            .filter(|(topic, partition, id)| named(topic, *partition) != Some(*id))
            .map(|(topic, partition, id)| (topic, partition, id, named(topic, *partition)))
            .collect();
        if wrong.is_empty() {
            return counts;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "(topic, partition, dir holding it, dir the controller names): {wrong:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What the first run produced: (partition, values) of topic `orders`.
type Produced = Vec<(i32, Vec<String>)>;

async fn first_run(addr: SocketAddr, controller: &Controller) -> Produced {
    let mut c = Client::connect(addr).await;

    // Registered and unfenced: the controller's UnfenceBrokerRecord put skua in the
    // cluster it describes.
    let cluster = c.send(&DescribeClusterRequest::default(), 0).await;
    assert_eq!(cluster.error_code, 0);
    let brokers: Vec<(i32, i32)> = cluster
        .brokers
        .iter()
        .map(|b| (b.broker_id.0, b.port))
        .collect();
    assert_eq!(brokers, vec![(BROKER_ID, addr.port() as i32)]);
    assert_eq!(cluster.cluster_id.to_string(), controller.cluster_id);

    // A topic created through skua is the controller's: the controller refuses it again.
    assert_eq!(c.create_topic("orders", 3).await, 0);
    let again = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(s("orders")))
            .with_num_partitions(1)
            .with_replication_factor(1)])
        .with_timeout_ms(5000);
    let at_controller = skua::client::Client::new(
        format!("127.0.0.1:{}", controller.port).parse().unwrap(),
        skua::client::ClientConfig::default(),
    );
    let (_, r) = at_controller
        .send_negotiated(&again, 2, 7)
        .await
        .expect("the controller answers CreateTopics");
    assert_eq!(
        r.topics[0].error_code,
        kafka_protocol::error::ResponseError::TopicAlreadyExists.code(),
        "{r:?}"
    );
    // ... and skua answers the controller's refusal.
    let r = c.send(&again, 7).await;
    assert_eq!(
        r.topics[0].error_code,
        kafka_protocol::error::ResponseError::TopicAlreadyExists.code()
    );

    // CreatePartitions, IncrementalAlterConfigs and DeleteTopics through skua.
    let grow = CreatePartitionsRequest::default()
        .with_topics(vec![
            create_partitions_request::CreatePartitionsTopic::default()
                .with_name(TopicName(s("orders")))
                .with_count(4),
        ])
        .with_timeout_ms(5000);
    let r = c.send(&grow, 3).await;
    assert_eq!(r.results[0].error_code, 0, "{r:?}");
    use crate::common::configs::{incremental_alter, BROKER, SET, TOPIC};
    let altered = incremental_alter(
        &mut c,
        TOPIC,
        "orders",
        &[(SET, "retention.ms", Some("86400000"))],
    )
    .await;
    assert_eq!(altered, (0, None));
    let described = c
        .send(
            &DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s("orders"))
                    .with_configuration_keys(Some(vec![s("retention.ms")])),
            ]),
            4,
        )
        .await;
    let entry = &described.results[0].configs[0];
    assert_eq!(
        entry.value.as_ref().map(|v| v.to_string()).as_deref(),
        Some("86400000")
    );
    // A cluster-wide dynamic broker config set through skua: skua keeps no metadata of
    // its own, so what it describes is the controller's ConfigRecord (and after the
    // restart, read again from the controller's log).
    let altered = incremental_alter(
        &mut c,
        BROKER,
        "",
        &[(SET, "message.max.bytes", Some("2000000"))],
    )
    .await;
    assert_eq!(altered, (0, None));
    let describe_broker = |name: &str| {
        DescribeConfigsRequest::default().with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(BROKER)
                .with_resource_name(s(name))
                .with_configuration_keys(Some(vec![s("message.max.bytes")])),
        ])
    };
    let on_skua = c.send(&describe_broker("1"), 4).await;
    let entry = &on_skua.results[0].configs[0];
    assert_eq!(
        entry.value.as_ref().map(|v| v.to_string()).as_deref(),
        Some("2000000"),
        "{on_skua:?}"
    );
    acls_and_scram_through_the_controller(&mut c, controller).await;
    assert_eq!(c.create_topic("scratch", 1).await, 0);
    let r = c
        .send(
            &DeleteTopicsRequest::default()
                .with_topics(vec![delete_topics_request::DeleteTopicState::default()
                    .with_name(Some(TopicName(s("scratch"))))])
                .with_timeout_ms(5000),
            6,
        )
        .await;
    assert_eq!(r.responses[0].error_code, 0, "{r:?}");
    let metadata = c
        .send(&MetadataRequest::default().with_topics(None), 12)
        .await;
    let mut names: Vec<String> = metadata
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .collect();
    names.sort();
    assert_eq!(names, vec!["orders"], "scratch is gone");
    let orders = &metadata.topics[0];
    assert_eq!(orders.partitions.len(), 4);
    assert!(orders
        .partitions
        .iter()
        .all(|p| p.leader_id.0 == BROKER_ID && p.error_code == 0));

    // A producer id from the block the controller allocated.
    let pid = c
        .send(
            &InitProducerIdRequest::default().with_transaction_timeout_ms(60_000),
            4,
        )
        .await;
    assert_eq!(pid.error_code, 0);
    assert!(pid.producer_id.0 >= 0);

    // Records produced through skua are fetched back.
    let mut produced = Vec::new();
    for p in 0..4 {
        let vals: Vec<String> = (0..5).map(|i| format!("p{p}-r{i}")).collect();
        let refs: Vec<&str> = vals.iter().map(String::as_str).collect();
        let (err, base) = c
            .produce("orders", p, batch(&refs, None, Compression::None), -1)
            .await;
        assert_eq!((err, base), (0, 0), "partition {p}");
        let fetched = c.fetch("orders", p, 0, 100, 1).await;
        assert_eq!(fetched.error_code, 0);
        let got: Vec<String> = values(&fetched.records.unwrap())
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        assert_eq!(got, vals);
        produced.push((p, vals));
    }

    // An offset committed to a group: __consumer_offsets is created at the controller
    // when a client first looks for the group's coordinator, and skua leads it.
    let find = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![s("readers")]);
    let t = Instant::now();
    loop {
        let r = c.send(&find, 4).await;
        let found = &r.coordinators[0];
        if found.error_code == 0 {
            assert_eq!(found.node_id.0, BROKER_ID);
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "no coordinator: {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(c.commit_offset("readers", "orders", 3, None).await, 0);
    assert_eq!(c.committed_offsets("readers").await, (0, vec![3]));
    produced
}

/// ACLs and SCRAM credentials are the controller's: CreateAcls, DeleteAcls and
/// AlterUserScramCredentials through skua are forwarded in Envelopes (the controller
/// reads the client's principal from them), DescribeAcls and DescribeUserScramCredentials
/// answer from the records skua follows, and the controller itself has what skua made.
async fn acls_and_scram_through_the_controller(c: &mut Client, controller: &Controller) {
    use kafka_protocol::messages::{
        alter_user_scram_credentials_request as aus, create_acls_request, delete_acls_request,
        describe_user_scram_credentials_request as dus, AlterUserScramCredentialsRequest,
        ApiVersionsRequest, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest,
        DescribeUserScramCredentialsRequest,
    };
    // What a KRaft broker handles, and nothing a controller does.
    let versions = c.send(&ApiVersionsRequest::default(), 3).await;
    let has = |k: kafka_protocol::messages::ApiKey| {
        versions.api_keys.iter().any(|v| v.api_key == k as i16)
    };
    use kafka_protocol::messages::ApiKey as K;
    for k in [
        K::CreateAcls,
        K::AlterUserScramCredentials,
        K::ElectLeaders,
        K::DescribeQuorum,
    ] {
        assert!(has(k), "{k:?} advertised");
    }
    for k in [K::AlterPartition, K::LeaderAndIsr, K::AllocateProducerIds] {
        assert!(!has(k), "{k:?} not advertised");
    }

    let acl = create_acls_request::AclCreation::default()
        .with_resource_type(2) // TOPIC
        .with_resource_name(s("orders"))
        .with_resource_pattern_type(3) // LITERAL
        .with_principal(s("User:carol"))
        .with_host(s("*"))
        .with_operation(3) // READ
        .with_permission_type(3); // ALLOW
    let r = c
        .send(&CreateAclsRequest::default().with_creations(vec![acl]), 3)
        .await;
    assert_eq!(r.results[0].error_code, 0, "{r:?}");
    let describe = DescribeAclsRequest::default()
        .with_resource_type_filter(2)
        .with_resource_name_filter(Some(s("orders")))
        .with_pattern_type_filter(1) // ANY
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1);
    // Answered once the controller committed it; skua's image has it a moment later.
    let t = Instant::now();
    loop {
        let described = c.send(&describe, 3).await;
        assert_eq!(described.error_code, 0, "{described:?}");
        let principals: Vec<String> = described
            .resources
            .iter()
            .flat_map(|r| r.acls.iter().map(|a| a.principal.to_string()))
            .collect();
        if !principals.is_empty() {
            assert_eq!(principals, vec!["User:carol"]);
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the ACL never reached skua's image"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let at_controller = skua::client::Client::new(
        format!("127.0.0.1:{}", controller.port).parse().unwrap(),
        skua::client::ClientConfig::default(),
    );
    // The controller answers DescribeAcls from its own authorizer, which its metadata
    // loader (AclPublisher) updates after the record is committed, on its own thread: the
    // CreateAcls answer and skua's image can both be ahead of it, so wait for it there too.
    let t = Instant::now();
    loop {
        let (_, on_controller) = at_controller
            .send_negotiated(&describe, 1, 3)
            .await
            .expect("the controller answers DescribeAcls");
        assert_eq!(on_controller.error_code, 0, "{on_controller:?}");
        if !on_controller.resources.is_empty() {
            assert_eq!(on_controller.resources.len(), 1, "{on_controller:?}");
            let principals: Vec<String> = on_controller.resources[0]
                .acls
                .iter()
                .map(|a| a.principal.to_string())
                .collect();
            assert_eq!(principals, vec!["User:carol"], "{on_controller:?}");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the controller's authorizer never had the ACL: {on_controller:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let filter = delete_acls_request::DeleteAclsFilter::default()
        .with_resource_type_filter(2)
        .with_resource_name_filter(Some(s("orders")))
        .with_pattern_type_filter(1)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1);
    let r = c
        .send(&DeleteAclsRequest::default().with_filters(vec![filter]), 3)
        .await;
    assert_eq!(r.filter_results[0].error_code, 0, "{r:?}");
    assert_eq!(r.filter_results[0].matching_acls.len(), 1, "{r:?}");
    let t = Instant::now();
    while !c.send(&describe, 3).await.resources.is_empty() {
        assert!(t.elapsed() < Duration::from_secs(10), "the ACL stays");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A SCRAM credential from the client's salted password, as the client sent it; one
    // the controller refuses (too few iterations) answered with its error.
    let upsert = |iterations| {
        AlterUserScramCredentialsRequest::default().with_upsertions(vec![
            aus::ScramCredentialUpsertion::default()
                .with_name(s("dave"))
                .with_mechanism(1)
                .with_iterations(iterations)
                .with_salt(bytes::Bytes::from_static(b"fedcba9876543210"))
                .with_salted_password(bytes::Bytes::from(vec![3u8; 32])),
        ])
    };
    let r = c.send(&upsert(100), 0).await;
    assert_eq!(
        r.results[0].error_code,
        kafka_protocol::error::ResponseError::UnacceptableCredential.code(),
        "{r:?}"
    );
    let r = c.send(&upsert(4096), 0).await;
    assert_eq!(r.results[0].error_code, 0, "{r:?}");
    let t = Instant::now();
    loop {
        let users = c
            .send(
                &DescribeUserScramCredentialsRequest::default()
                    .with_users(Some(vec![dus::UserName::default().with_name(s("dave"))])),
                0,
            )
            .await;
        let seen = users.results.iter().any(|u| {
            u.error_code == 0
                && u.credential_infos
                    .iter()
                    .any(|i| (i.mechanism, i.iterations) == (1, 4096))
        });
        if seen {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{users:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn second_run(addr: SocketAddr, produced: &Produced) {
    let mut c = Client::connect(addr).await;
    let cluster = c.send(&DescribeClusterRequest::default(), 0).await;
    assert_eq!(cluster.brokers.len(), 1, "unfenced again");
    for (p, vals) in produced {
        let fetched = c.fetch("orders", *p, 0, 100, 1).await;
        assert_eq!(fetched.error_code, 0, "partition {p}");
        let got: Vec<String> = values(&fetched.records.unwrap())
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        assert_eq!(&got, vals, "partition {p} after the restart");
        assert_eq!(fetched.high_watermark, vals.len() as i64);
    }
    // Produced to after the restart, at the offset after the last kept record.
    let (err, base) = c
        .produce("orders", 0, batch(&["after"], None, Compression::None), -1)
        .await;
    assert_eq!((err, base), (0, 5));
    assert_eq!(c.committed_offsets("readers").await, (0, vec![3]));
    let described = c
        .send(
            &DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(crate::common::configs::BROKER)
                    .with_resource_name(s("1"))
                    .with_configuration_keys(Some(vec![s("message.max.bytes")])),
            ]),
            4,
        )
        .await;
    let entry = &described.results[0].configs[0];
    assert_eq!(
        entry.value.as_ref().map(|v| v.to_string()).as_deref(),
        Some("2000000")
    );
}

/// An Apache Kafka 4.4 broker of the same cluster, stopped when dropped.
struct KafkaBroker {
    dir: tempfile::TempDir,
    port: u16,
}

impl KafkaBroker {
    fn start(controller: &Controller, node_id: i32) -> KafkaBroker {
        KafkaBroker::start_with(controller, node_id, &[])
    }

    /// With `settings` (`key=value`) added to the broker's properties.
    fn start_with(controller: &Controller, node_id: i32, settings: &[&str]) -> KafkaBroker {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut command = Command::new(script());
        command
            .args([
                "--broker-of",
                &format!("3000@127.0.0.1:{}", controller.port),
            ])
            .args(["--cluster-id", &controller.cluster_id])
            .args(["--port", &port.to_string(), "--dir"])
            .arg(dir.path())
            .args(["--node-id", &node_id.to_string()])
            .args(["--set", "broker.heartbeat.interval.ms=500"])
            .args(["--set", "replica.lag.time.max.ms=30000"]);
        for setting in settings {
            command.args(["--set", setting]);
        }
        for f in FORMAT_FEATURES {
            command.args(["--feature", f]);
        }
        let out = command.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        KafkaBroker { dir, port }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }
}

impl Drop for KafkaBroker {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .arg("--stop")
            .arg(self.dir.path())
            .output();
        if std::thread::panicking() {
            let log =
                std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
            eprintln!("--- the Kafka broker's server.log, errors and warnings ---");
            for line in log
                .lines()
                .filter(|l| l.contains("ERROR") || l.contains("WARN"))
                .take(40)
            {
                eprintln!("{line}");
            }
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!("--- the Kafka broker's server.log, last lines ---");
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

/// A skua broker and an Apache Kafka 4.4 broker in one KRaft cluster: a topic created
/// through skua with RF 2 has a partition led by each; acks=all produces through either
/// leader are acknowledged only once the other kind replicated them, both stay in the ISR,
/// and each partition's segment is byte for byte the same on both brokers. After a kill -9
/// of skua the Kafka broker leads both with nothing acknowledged lost, and the restarted
/// skua catches up from it and rejoins both ISRs; a SIGTERM moves skua's leadership to the
/// Kafka broker before skua stops. SCRAM users and client quotas made through the Kafka
/// broker are read by skua from the controller's records; a quota set through skua
/// reaches the Kafka broker. Elections, reassignments and DescribeQuorum through skua:
/// `elections_reassignments_and_the_quorum_through_skua`.
#[test]
fn a_skua_broker_and_a_kafka_4_broker_replicate_each_others_partitions() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let Some(controller) = Controller::start(FORMAT_FEATURES) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let props = write_properties(dir.path(), &controller, BROKER_ID, port, &[]);
    format_dirs(&props, &controller);
    let mut skua = Skua::start(&props, &dir.path().join("skua.log"));
    skua.wait_started();
    let kafka = KafkaBroker::start(&controller, 2);
    eprintln!("both brokers started after {:?}", started.elapsed());
    let skua_addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let kafka_addr: SocketAddr = format!("127.0.0.1:{}", kafka.port).parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let vals0: Vec<String> = (0..20).map(|i| format!("to-skua-{i}")).collect();
    let vals1: Vec<String> = (0..20).map(|i| format!("to-kafka-{i}")).collect();
    rt.block_on(async {
        let mut c = Client::connect(skua_addr).await;
        let t = Instant::now();
        loop {
            let cluster = c.send(&DescribeClusterRequest::default(), 0).await;
            if cluster.brokers.len() == 2 {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(30), "{cluster:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        // A SCRAM user and a client quota created through the Kafka broker (which sends
        // them to the controller): skua reads both from the controller's records.
        let mut k = Client::connect(kafka_addr).await;
        use kafka_protocol::messages::{
            alter_client_quotas_request as acq, alter_user_scram_credentials_request as aus,
            describe_client_quotas_request as dcq, AlterClientQuotasRequest,
            AlterUserScramCredentialsRequest, DescribeClientQuotasRequest,
            DescribeUserScramCredentialsRequest,
        };
        let upsert = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
            aus::ScramCredentialUpsertion::default()
                .with_name(s("alice"))
                .with_mechanism(2)
                .with_iterations(8192)
                .with_salt(bytes::Bytes::from_static(b"0123456789abcdef"))
                .with_salted_password(bytes::Bytes::from(vec![7u8; 64])),
        ]);
        let r = k.send(&upsert, 0).await;
        assert_eq!(r.results[0].error_code, 0, "{r:?}");
        let quota =
            AlterClientQuotasRequest::default().with_entries(vec![acq::EntryData::default()
                .with_entity(vec![acq::EntityData::default()
                    .with_entity_type(s("user"))
                    .with_entity_name(Some(s("alice")))])
                .with_ops(vec![acq::OpData::default()
                    .with_key(s("producer_byte_rate"))
                    .with_value(1024.0)])]);
        let r = k.send(&quota, 1).await;
        assert_eq!(r.entries[0].error_code, 0, "{r:?}");
        let t = Instant::now();
        loop {
            let users = c
                .send(&DescribeUserScramCredentialsRequest::default(), 0)
                .await;
            let quotas = c
                .send(
                    &DescribeClientQuotasRequest::default().with_components(vec![
                        dcq::ComponentData::default()
                            .with_entity_type(s("user"))
                            .with_match_type(0)
                            .with_match(Some(s("alice"))),
                    ]),
                    1,
                )
                .await;
            let user_seen = users.results.iter().any(|u| {
                u.user.as_str() == "alice"
                    && u.credential_infos
                        .iter()
                        .any(|i| (i.mechanism, i.iterations) == (2, 8192))
            });
            let quota_seen = quotas.entries.iter().flatten().any(|e| {
                e.values
                    .iter()
                    .any(|v| v.key.as_str() == "producer_byte_rate" && v.value == 1024.0)
            });
            if user_seen && quota_seen {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "{users:?}\n{quotas:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        // ... and a quota set through skua is the controller's: the Kafka broker has it.
        let quota =
            AlterClientQuotasRequest::default().with_entries(vec![acq::EntryData::default()
                .with_entity(vec![acq::EntityData::default()
                    .with_entity_type(s("user"))
                    .with_entity_name(Some(s("bob")))])
                .with_ops(vec![acq::OpData::default()
                    .with_key(s("consumer_byte_rate"))
                    .with_value(2048.0)])]);
        let r = c.send(&quota, 1).await;
        assert_eq!(r.entries[0].error_code, 0, "{r:?}");
        let t = Instant::now();
        loop {
            let quotas = k
                .send(
                    &DescribeClientQuotasRequest::default().with_components(vec![
                        dcq::ComponentData::default()
                            .with_entity_type(s("user"))
                            .with_match_type(0)
                            .with_match(Some(s("bob"))),
                    ]),
                    1,
                )
                .await;
            let seen = quotas.entries.iter().flatten().any(|e| {
                e.values
                    .iter()
                    .any(|v| v.key.as_str() == "consumer_byte_rate" && v.value == 2048.0)
            });
            if seen {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(10), "{quotas:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }

        use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
        let assignment = |p: i32, brokers: [i32; 2]| {
            CreatableReplicaAssignment::default()
                .with_partition_index(p)
                .with_broker_ids(brokers.iter().map(|b| (*b).into()).collect())
        };
        let create = CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(s("mixed")))
                .with_num_partitions(-1)
                .with_replication_factor(-1)
                .with_assignments(vec![
                    assignment(0, [1, 2]),
                    assignment(1, [2, 1]),
                ])])
            .with_timeout_ms(10_000);
        let r = c.send(&create, 7).await;
        assert_eq!(r.topics[0].error_code, 0, "{r:?}");

        // acks=all through each leader: skua leads 0, Kafka leads 1.
        for (client, p, vals) in [(&mut c, 0, &vals0), (&mut k, 1, &vals1)] {
            let t = Instant::now();
            for chunk in vals.chunks(5) {
                let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
                loop {
                    let (err, _) = client
                        .produce("mixed", p, batch(&chunk, None, Compression::None), -1)
                        .await;
                    if err == 0 {
                        break;
                    }
                    // The leader may not know it leads for a moment after the creation.
                    assert!(
                        t.elapsed() < Duration::from_secs(20),
                        "partition {p}: error {err}"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
        // Consumed through either kind: each leader serves what the producer was told.
        let got = |fetched: kafka_protocol::messages::fetch_response::PartitionData| {
            values(&fetched.records.unwrap())
                .into_iter()
                .map(|(_, v)| v)
                .collect::<Vec<String>>()
        };
        assert_eq!(got(c.fetch("mixed", 0, 0, 100, 1).await), vals0);
        assert_eq!(got(k.fetch("mixed", 1, 0, 100, 1).await), vals1);

        // Both brokers in both ISRs, as the controller (through the Kafka broker) says.
        wait_isrs(&mut k, vec![(0, 1, vec![1, 2]), (1, 2, vec![1, 2])]).await;
    });

    // Each replica byte for byte its leader's.
    assert_same_segments(&dir.path().join("data"), &kafka.data());

    // kill -9 of skua, the leader of partition 0: the controller fences it once its
    // session ends and the Kafka broker leads, with nothing acknowledged lost; skua comes
    // back, catches up from the Kafka leader and rejoins both ISRs.
    let _ = skua.child.kill();
    let _ = skua.child.wait();
    let killed = Instant::now();
    let vals0_after: Vec<String> = (0..10)
        .map(|i| format!("while-skua-was-down-{i}"))
        .collect();
    rt.block_on(async {
        let mut k = Client::connect(kafka_addr).await;
        wait_isrs(&mut k, vec![(0, 2, vec![2]), (1, 2, vec![2])]).await;
        eprintln!(
            "the Kafka broker leads alone {:?} after the kill",
            killed.elapsed()
        );
        let chunk: Vec<&str> = vals0_after.iter().map(String::as_str).collect();
        let (err, base) = k
            .produce("mixed", 0, batch(&chunk, None, Compression::None), -1)
            .await;
        assert_eq!((err, base), (0, 20));
    });
    let mut again = Skua::start(&props, &dir.path().join("skua-2.log"));
    again.wait_started();
    rt.block_on(async {
        let mut k = Client::connect(kafka_addr).await;
        // Partition 0's preferred leader (skua) gets it back only at the controller's
        // next rebalance; both ISRs hold skua again once it caught up.
        wait_isrs(&mut k, vec![(0, 2, vec![1, 2]), (1, 2, vec![1, 2])]).await;
        eprintln!(
            "skua rejoined both ISRs {:?} after the kill",
            killed.elapsed()
        );
        let fetched = k.fetch("mixed", 0, 0, 100, 1).await;
        let got: Vec<String> = values(&fetched.records.unwrap())
            .into_iter()
            .map(|(_, v)| v)
            .collect();
        let all: Vec<String> = vals0.iter().chain(&vals0_after).cloned().collect();
        assert_eq!(got, all, "nothing acknowledged lost");
    });
    assert_same_segments(&dir.path().join("data"), &kafka.data());
    rt.block_on(elections_reassignments_and_the_quorum_through_skua(
        skua_addr,
        kafka_addr,
        &dir.path().join("data"),
        &kafka.data(),
    ));
    // skua's expansion of `moved` named both members with their broker epochs, not -1.
    let expansions: Vec<String> = again
        .log()
        .lines()
        .filter(|l| l.contains("expanding the ISR") && l.contains("moved-0"))
        .map(str::to_string)
        .collect();
    assert!(
        !expansions.is_empty() && expansions.iter().all(|l| !l.contains(", -1)")),
        "{expansions:?}"
    );

    // A topic created through the Kafka broker, led by skua; SIGTERM to skua is a
    // controlled shutdown: the controller moves the leadership to the Kafka broker before
    // it lets skua go, well within the session timeout a crash would take.
    rt.block_on(async {
        let mut k = Client::connect(kafka_addr).await;
        use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
        let create = CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(s("led")))
                .with_num_partitions(-1)
                .with_replication_factor(-1)
                .with_assignments(vec![CreatableReplicaAssignment::default()
                    .with_partition_index(0)
                    .with_broker_ids(vec![1.into(), 2.into()])])])
            .with_timeout_ms(10_000);
        let r = k.send(&create, 7).await;
        assert_eq!(r.topics[0].error_code, 0, "{r:?}");
        wait_topic_isrs(
            &mut k,
            "led",
            vec![(0, 1, vec![1, 2])],
            Duration::from_secs(30),
        )
        .await;
    });
    let (status, took) = again.terminate();
    assert!(status.success(), "{status}\n{}", again.log());
    assert!(
        again.log().contains("controlled shutdown done"),
        "{}",
        again.log()
    );
    rt.block_on(async {
        let mut k = Client::connect(kafka_addr).await;
        wait_topic_isrs(
            &mut k,
            "led",
            vec![(0, 2, vec![2])],
            Duration::from_millis(1500),
        )
        .await;
    });
    eprintln!("skua's controlled shutdown took {took:?}");
    eprintln!("the mixed scenario took {:?}", started.elapsed());
}

/// What Kafka 4's brokers forward to the controller, through skua: a preferred election
/// gives partition 0 back to skua (its first replica) after the Kafka broker led it; a
/// reassignment moves a partition from the Kafka broker to skua, listed while under way,
/// and skua's copy is byte for byte the one the Kafka broker wrote; another puts the
/// Kafka broker back beside skua, which adds it to the ISR; DescribeQuorum lists
/// the controller as the voter leading and both brokers as observers.
async fn elections_reassignments_and_the_quorum_through_skua(
    skua_addr: SocketAddr,
    kafka_addr: SocketAddr,
    skua_data: &Path,
    kafka_data: &Path,
) {
    use kafka_protocol::messages::{
        describe_quorum_request as dq, elect_leaders_request as el,
        list_partition_reassignments_request as lpr, DescribeQuorumRequest, ElectLeadersRequest,
        ListPartitionReassignmentsRequest,
    };
    let mut c = Client::connect(skua_addr).await;
    let mut k = Client::connect(kafka_addr).await;

    let elect = ElectLeadersRequest::default()
        .with_election_type(0)
        .with_topic_partitions(Some(vec![el::TopicPartitions::default()
            .with_topic(TopicName(s("mixed")))
            .with_partitions(vec![0])]))
        .with_timeout_ms(10_000);
    let r = c.send(&elect, 2).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(
        r.replica_election_results[0].partition_result[0].error_code, 0,
        "{r:?}"
    );
    wait_isrs(&mut k, vec![(0, 1, vec![1, 2]), (1, 2, vec![1, 2])]).await;
    // Again: the leader is already the preferred one.
    let r = c.send(&elect, 2).await;
    assert_eq!(
        r.replica_election_results[0].partition_result[0].error_code,
        kafka_protocol::error::ResponseError::ElectionNotNeeded.code(),
        "{r:?}"
    );

    // A partition only the Kafka broker holds, moved to skua.
    use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
    let create = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(s("moved")))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(vec![CreatableReplicaAssignment::default()
                .with_partition_index(0)
                .with_broker_ids(vec![2.into()])])])
        .with_timeout_ms(10_000);
    let r = c.send(&create, 7).await;
    assert_eq!(r.topics[0].error_code, 0, "{r:?}");
    let vals: Vec<String> = (0..50).map(|i| format!("moved-{i}")).collect();
    let t = Instant::now();
    for chunk in vals.chunks(10) {
        let chunk: Vec<&str> = chunk.iter().map(String::as_str).collect();
        loop {
            let (err, _) = k
                .produce("moved", 0, batch(&chunk, None, Compression::None), -1)
                .await;
            if err == 0 {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(20), "error {err}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let segment = "moved-0/00000000000000000000.log";
    let on_kafka = std::fs::read(kafka_data.join(segment)).unwrap();
    let r = reassign(&mut c, "moved", &[1]).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    assert_eq!(r.responses[0].partitions[0].error_code, 0, "{r:?}");
    let list = ListPartitionReassignmentsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(Some(vec![lpr::ListPartitionReassignmentsTopics::default()
            .with_name(TopicName(s("moved")))
            .with_partition_indexes(vec![0])]));
    let t = Instant::now();
    loop {
        let r = c.send(&list, 0).await;
        assert_eq!(r.error_code, 0, "{r:?}");
        if r.topics.is_empty() {
            break;
        }
        // Under way: adding skua, removing the Kafka broker.
        let p = &r.topics[0].partitions[0];
        assert_eq!(
            p.adding_replicas,
            vec![kafka_protocol::messages::BrokerId(1)],
            "{r:?}"
        );
        assert_eq!(
            p.removing_replicas,
            vec![kafka_protocol::messages::BrokerId(2)],
            "{r:?}"
        );
        assert!(t.elapsed() < Duration::from_secs(30), "{r:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_topic_isrs(
        &mut k,
        "moved",
        vec![(0, 1, vec![1])],
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(
        std::fs::read(skua_data.join(segment)).unwrap(),
        on_kafka,
        "skua's copy is the Kafka broker's, byte for byte"
    );
    let fetched = c.fetch("moved", 0, 0, 1 << 20, 1).await;
    let got: Vec<String> = values(&fetched.records.unwrap())
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    assert_eq!(got, vals);

    // And back onto both: the Kafka broker, added, catches up from skua, whose ISR
    // expansion the controller commits (it checks each member's broker epoch, KIP-903),
    // ending the reassignment.
    let r = reassign(&mut c, "moved", &[1, 2]).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0, "{r:?}");
    wait_topic_isrs(
        &mut k,
        "moved",
        vec![(0, 1, vec![1, 2])],
        Duration::from_secs(20),
    )
    .await;

    // The quorum, as `kafka-metadata-quorum.sh --bootstrap-server <skua> describe` asks.
    let quorum = DescribeQuorumRequest::default().with_topics(vec![dq::TopicData::default()
        .with_topic_name(TopicName(s("__cluster_metadata")))
        .with_partitions(vec![dq::PartitionData::default().with_partition_index(0)])]);
    let r = c.send(&quorum, 2).await;
    assert_eq!(r.error_code, 0, "{r:?}");
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0, "{r:?}");
    assert_eq!(
        p.leader_id.0,
        crate::kraft_controller::CONTROLLER_ID,
        "{r:?}"
    );
    let voters: Vec<i32> = p.current_voters.iter().map(|v| v.replica_id.0).collect();
    assert_eq!(voters, vec![crate::kraft_controller::CONTROLLER_ID]);
    let mut observers: Vec<i32> = p.observers.iter().map(|o| o.replica_id.0).collect();
    observers.sort();
    assert_eq!(
        observers,
        vec![1, 2],
        "both brokers follow the metadata log"
    );
    assert!(p.high_watermark > 0);
}

/// Waits until the Kafka broker's Metadata shows `mixed`'s (partition, leader, sorted ISR).
async fn wait_isrs(k: &mut Client, expected: Vec<(i32, i32, Vec<i32>)>) {
    wait_topic_isrs(k, "mixed", expected, Duration::from_secs(30)).await
}

/// Partition 0 of `topic` reassigned to `replicas` (AlterPartitionReassignments, as
/// `kafka-reassign-partitions.sh --execute` sends it).
pub(crate) async fn reassign(
    c: &mut Client,
    topic: &str,
    replicas: &[i32],
) -> kafka_protocol::messages::AlterPartitionReassignmentsResponse {
    use kafka_protocol::messages::{
        alter_partition_reassignments_request as apr, AlterPartitionReassignmentsRequest,
    };
    let req = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(10_000)
        .with_topics(vec![apr::ReassignableTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(vec![apr::ReassignablePartition::default()
                .with_partition_index(0)
                .with_replicas(Some(
                    replicas.iter().map(|&b| b.into()).collect(),
                ))])]);
    c.send(&req, 0).await
}

/// Waits at most `limit` until the Kafka broker's Metadata shows `topic`'s (partition,
/// leader, sorted ISR).
pub(crate) async fn wait_topic_isrs(
    k: &mut Client,
    topic: &str,
    expected: Vec<(i32, i32, Vec<i32>)>,
    limit: Duration,
) {
    let t = Instant::now();
    loop {
        let metadata = k
            .send(
                &MetadataRequest::default().with_topics(Some(vec![
                    kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(TopicName(s(topic)))),
                ])),
                12,
            )
            .await;
        let mut seen: Vec<(i32, i32, Vec<i32>)> = metadata.topics[0]
            .partitions
            .iter()
            .map(|p| {
                let mut isr: Vec<i32> = p.isr_nodes.iter().map(|b| b.0).collect();
                isr.sort();
                (p.partition_index, p.leader_id.0, isr)
            })
            .collect();
        seen.sort();
        if seen == expected {
            return;
        }
        assert!(t.elapsed() < limit, "{seen:?}, waiting for {expected:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Each partition of `mixed` byte for byte the same on both brokers (eventually: a
/// follower's fetch may be in flight).
fn assert_same_segments(skua_data: &Path, kafka_data: &Path) {
    let segment = |data: &Path, p: i32| {
        std::fs::read(data.join(format!("mixed-{p}/00000000000000000000.log"))).unwrap_or_default()
    };
    let t = Instant::now();
    for p in [0, 1] {
        loop {
            let (on_skua, on_kafka) = (segment(skua_data, p), segment(kafka_data, p));
            if !on_skua.is_empty() && on_skua == on_kafka {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(15),
                "partition {p}: {} bytes on skua, {} on Kafka",
                on_skua.len(),
                on_kafka.len()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Makes `to` the leader of `topic`-`partition` (replicas `to` and `other`, both in the
/// ISR) through skua, as `kafka-reassign-partitions.sh` and `kafka-leader-election.sh`
/// would: the replicas reordered with `to` first, then a preferred election; waits until
/// the Kafka broker's Metadata shows it.
async fn lead_through_skua(c: &mut Client, k: &mut Client, topic: &str, to: i32, other: i32) {
    use kafka_protocol::messages::{elect_leaders_request as el, ElectLeadersRequest};
    let r = reassign(c, topic, &[to, other]).await;
    assert_eq!(r.responses[0].partitions[0].error_code, 0, "{r:?}");
    let elect = ElectLeadersRequest::default()
        .with_election_type(0)
        .with_topic_partitions(Some(vec![el::TopicPartitions::default()
            .with_topic(TopicName(s(topic)))
            .with_partitions(vec![0])]))
        .with_timeout_ms(10_000);
    let r = c.send(&elect, 2).await;
    let code = r.replica_election_results[0].partition_result[0].error_code;
    let not_needed = kafka_protocol::error::ResponseError::ElectionNotNeeded.code();
    assert!(code == 0 || code == not_needed, "{r:?}");
    let mut isr = vec![to, other];
    isr.sort();
    wait_topic_isrs(k, topic, vec![(0, to, isr)], Duration::from_secs(30)).await;
}

/// Waits until FindCoordinator through `c` names a coordinator for `key` (0: group, 1:
/// transactional id), `broker` if given; answers it.
async fn wait_coordinator(c: &mut Client, key_type: i8, key: &str, broker: Option<i32>) -> i32 {
    let find = FindCoordinatorRequest::default()
        .with_key_type(key_type)
        .with_coordinator_keys(vec![s(key)]);
    let t = Instant::now();
    loop {
        let r = c.send(&find, 4).await;
        let found = &r.coordinators[0];
        if found.error_code == 0 && broker.is_none_or(|b| b == found.node_id.0) {
            return found.node_id.0;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{key}: {found:?}, waiting for {broker:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The committed offsets of `group` at its coordinator `c`, retried while the coordinator
/// is loading the partition it was just given (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS),
/// as a client retries.
async fn offsets_at(c: &mut Client, group: &str) -> Vec<i64> {
    let t = Instant::now();
    loop {
        let (err, offsets) = c.committed_offsets(group).await;
        if err == 0 {
            return offsets;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{group}: error {err}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `group`'s committed offsets at `c` are `want` (a coordinator that has just
/// taken its partition over may answer before it has loaded every group), for at most 20 s.
async fn offsets_become(c: &mut Client, group: &str, want: &[i64]) {
    let t = Instant::now();
    loop {
        let got = offsets_at(c, group).await;
        if got == want {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{group}: {got:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A KIP-848 member's heartbeat to the coordinator `c` (joining at epoch 0, subscribed to
/// the transactions' topic): (error, member id, epoch).
async fn consumer_heartbeat(c: &mut Client, member: &str, epoch: i32) -> (i16, String, i32) {
    use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, GroupId};
    let mut req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("kip848")))
        .with_member_id(s(member))
        .with_member_epoch(epoch)
        .with_topic_partitions(None);
    if epoch == 0 {
        req = req
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(s(crate::common::txn::TOPIC))]))
            .with_topic_partitions(Some(vec![]));
    }
    let r = c.send(&req, 1).await;
    let id = r.member_id.as_deref().unwrap_or(member).to_string();
    (r.error_code, id, r.member_epoch)
}

/// OffsetCommit v9 of `offset` for the transactions' topic by a KIP-848 member.
async fn member_commit(c: &mut Client, member: &str, epoch: i32, offset: i64) -> i16 {
    use kafka_protocol::messages::{offset_commit_request as oc, GroupId, OffsetCommitRequest};
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("kip848")))
        .with_generation_id_or_member_epoch(epoch)
        .with_member_id(s(member))
        .with_topics(vec![oc::OffsetCommitRequestTopic::default()
            .with_name(TopicName(s(crate::common::txn::TOPIC)))
            .with_partitions(vec![oc::OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    c.send(&req, 9).await.topics[0].partitions[0].error_code
}

/// Coordinators across kinds. `__consumer_offsets` and `__transaction_state` (one
/// partition each, on both brokers, created through skua) are led by skua, then by the
/// Kafka 4.4 broker, then by skua again (moved through skua): a classic group's and a
/// KIP-848 consumer group's committed offsets are served by each coordinator in turn, and
/// the consumer group's member carries on heartbeating at its epoch on the other kind. A
/// transactional producer whose coordinator is skua writes to a partition the Kafka broker
/// leads: the Kafka broker verifies the transaction with skua, skua's markers commit one
/// transaction and abort another, and a read_committed consumer through the Kafka broker
/// sees only the committed records.
#[test]
fn groups_and_transactions_keep_their_state_across_coordinators_of_both_kinds() {
    use crate::common::txn;
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let Some(controller) = Controller::start(FORMAT_FEATURES) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let internal = [
        "offsets.topic.replication.factor=2",
        "offsets.topic.num.partitions=1",
        "transaction.state.log.replication.factor=2",
        "transaction.state.log.num.partitions=1",
    ];
    let props = write_properties(dir.path(), &controller, BROKER_ID, port, &internal);
    format_dirs(&props, &controller);
    let mut skua = Skua::start(&props, &dir.path().join("skua.log"));
    skua.wait_started();
    // The coordinators of both kinds agree on the internal topics' partition counts.
    let kafka = KafkaBroker::start_with(&controller, 2, &internal);
    let skua_addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let kafka_addr: SocketAddr = format!("127.0.0.1:{}", kafka.port).parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = Client::connect(skua_addr).await;
        let mut k = Client::connect(kafka_addr).await;
        let t = Instant::now();
        while c
            .send(&DescribeClusterRequest::default(), 0)
            .await
            .brokers
            .len()
            < 2
        {
            assert!(t.elapsed() < Duration::from_secs(30), "both unfenced");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
        let create = CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(s(txn::TOPIC)))
                .with_num_partitions(-1)
                .with_replication_factor(-1)
                .with_assignments(vec![CreatableReplicaAssignment::default()
                    .with_partition_index(0)
                    .with_broker_ids(vec![2.into(), 1.into()])])])
            .with_timeout_ms(10_000);
        let r = c.send(&create, 7).await;
        assert_eq!(r.topics[0].error_code, 0, "{r:?}");

        // Both internal topics created through skua (skua's replication factor), then
        // led by skua.
        wait_coordinator(&mut c, 0, "classic", None).await;
        wait_coordinator(&mut c, 1, "tx", None).await;
        lead_through_skua(&mut c, &mut k, "__consumer_offsets", 1, 2).await;
        lead_through_skua(&mut c, &mut k, "__transaction_state", 1, 2).await;
        eprintln!("coordinators on skua after {:?}", started.elapsed());

        // At skua: a classic group's offset, and a KIP-848 member's.
        wait_coordinator(&mut c, 0, "classic", Some(1)).await;
        assert_eq!(c.commit_offset("classic", txn::TOPIC, 7, None).await, 0);
        let (err, member, mut epoch) = consumer_heartbeat(&mut c, "member-6a1c9e02", 0).await;
        assert_eq!(err, 0);
        assert!(!member.is_empty() && epoch > 0);
        assert_eq!(member_commit(&mut c, &member, epoch, 11).await, 0);
        assert_eq!(offsets_at(&mut c, "classic").await, vec![7]);
        assert_eq!(offsets_at(&mut c, "kip848").await, vec![11]);

        // The Kafka broker coordinates: the offsets are there, the member carries on.
        lead_through_skua(&mut c, &mut k, "__consumer_offsets", 2, 1).await;
        wait_coordinator(&mut k, 0, "classic", Some(2)).await;
        wait_coordinator(&mut k, 0, "kip848", Some(2)).await;
        offsets_become(&mut k, "classic", &[7]).await;
        offsets_become(&mut k, "kip848", &[11]).await;
        let (err, _, now) = consumer_heartbeat(&mut k, &member, epoch).await;
        assert_eq!(
            err, 0,
            "skua's member records loaded by the Kafka coordinator"
        );
        assert!(now >= epoch);
        // Record 8 carries Kafka 4.4's AssignmentEpochs aligned with its partitions (a
        // record without them makes Kafka 4.4 log this ERROR and fall back to an epoch).
        let log = std::fs::read_to_string(kafka.dir.path().join("server.log")).unwrap();
        assert!(
            !log.contains("Size of assignment epochs"),
            "{}",
            log.lines()
                .filter(|l| l.contains("assignment epochs"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        epoch = now;
        assert_eq!(member_commit(&mut k, &member, epoch, 12).await, 0);
        assert_eq!(k.commit_offset("classic", txn::TOPIC, 8, None).await, 0);

        // And skua again, loading what the Kafka coordinator wrote.
        lead_through_skua(&mut c, &mut k, "__consumer_offsets", 1, 2).await;
        wait_coordinator(&mut c, 0, "classic", Some(1)).await;
        assert_eq!(offsets_at(&mut c, "classic").await, vec![8]);
        assert_eq!(offsets_at(&mut c, "kip848").await, vec![12]);
        let (err, _, now) = consumer_heartbeat(&mut c, &member, epoch).await;
        assert_eq!(
            err, 0,
            "the Kafka coordinator's member records loaded by skua"
        );
        assert!(now >= epoch);
        eprintln!("groups moved both ways after {:?}", started.elapsed());

        // A transaction coordinated by skua on a partition the Kafka broker leads.
        wait_coordinator(&mut c, 1, "tx", Some(1)).await;
        let init = txn::init(&mut c, "tx", (-1, -1)).await;
        assert_eq!(init.error_code, 0, "{init:?}");
        let (pid, pe) = (init.producer_id.0, init.producer_epoch);
        let mut seq = 0;
        for (values, commit) in [(vec!["a", "b"], true), (vec!["x"], false)] {
            assert_eq!(txn::add_partition(&mut c, "tx", pid, pe, 0).await, 0);
            let (err, _) =
                txn::produce(&mut k, "tx", txn::txn_batch(&values, (pid, pe, seq))).await;
            assert_eq!(
                err, 0,
                "the Kafka leader verified the transaction with skua"
            );
            seq += values.len() as i32;
            assert_eq!(txn::end(&mut c, "tx", pid, pe, commit).await, 0);
        }
        let t = Instant::now();
        loop {
            let fetched = txn::fetch(&mut k, true).await;
            let data: Vec<String> = txn::records(&fetched)
                .into_iter()
                .filter(|(_, _, control)| !control)
                .map(|(_, v, _)| v)
                .collect();
            let stable = txn::latest(&mut k, true).await == txn::latest(&mut k, false).await;
            if stable && txn::batches(&fetched).iter().filter(|(_, c)| *c).count() == 2 {
                assert_eq!(
                    data,
                    vec!["a", "b", "x"],
                    "with the aborted batch, which the consumer drops"
                );
                let aborted = txn::aborted(&fetched).unwrap_or_default();
                assert_eq!(aborted.len(), 1, "{aborted:?}");
                assert_eq!(aborted[0].0, pid);
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "markers: {fetched:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let (status, _) = skua.terminate();
    assert!(status.success(), "{status}");
    eprintln!("the coordinators scenario took {:?}", started.elapsed());
}

/// The step a rolling replacement repeats (long form, `SKUA_KRAFT_ROLLING=1`): a Kafka 4.4
/// broker stopped, skua started on its dir with its node id.
#[test]
fn skua_takes_over_a_kafka_4_brokers_dir() {
    if std::env::var_os("SKUA_KRAFT_ROLLING").is_none() {
        eprintln!("SKIPPED: set SKUA_KRAFT_ROLLING=1");
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(controller) = Controller::start(FORMAT_FEATURES) else {
        return;
    };
    let kafka = KafkaBroker::start(&controller, 2);
    let kafka_addr: SocketAddr = format!("127.0.0.1:{}", kafka.port).parse().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let vals: Vec<String> = (0..30).map(|i| format!("kafka-wrote-{i}")).collect();
    rt.block_on(async {
        let mut k = Client::connect(kafka_addr).await;
        assert_eq!(k.create_topic("handed", 1).await, 0);
        let t = Instant::now();
        let refs: Vec<&str> = vals.iter().map(String::as_str).collect();
        loop {
            let (err, _) = k
                .produce("handed", 0, batch(&refs, None, Compression::None), -1)
                .await;
            if err == 0 {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(20), "error {err}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let _ = Command::new(script())
        .arg("--stop")
        .arg(kafka.dir.path())
        .output();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let props = dir.path().join("server.properties");
    std::fs::write(
        &props,
        format!(
            "process.roles=broker\nnode.id=2\ncontroller.quorum.bootstrap.servers=127.0.0.1:{}\n\
             controller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n\
             listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={}\n\
             broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=3000\n",
            controller.port,
            kafka.data().display()
        ),
    )
    .unwrap();
    let mut skua = Skua::start(&props, &dir.path().join("skua.log"));
    eprintln!(
        "skua started on the Kafka broker's dir in {:?}",
        skua.wait_started()
    );
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    rt.block_on(async {
        let mut c = Client::connect(addr).await;
        let t = Instant::now();
        loop {
            let fetched = c.fetch("handed", 0, 0, 1 << 20, 1).await;
            if fetched.error_code == 0 {
                let got: Vec<String> = values(&fetched.records.unwrap())
                    .into_iter()
                    .map(|(_, v)| v)
                    .collect();
                assert_eq!(got, vals);
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(20), "{fetched:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (err, base) = c
            .produce(
                "handed",
                0,
                batch(&["skua-wrote"], None, Compression::None),
                -1,
            )
            .await;
        assert_eq!((err, base), (0, 30));
    });
    let (status, _) = skua.terminate();
    assert!(status.success(), "{status}");
}
