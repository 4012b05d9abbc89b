//! Names a ZooKeeper-mode broker takes from ZooKeeper and from controller requests,
//! against a real ZooKeeper (`scripts/zk`) with skua in-process as broker 1 and the
//! controller. Each test replays an attack as it was found: a topic znode whose name is
//! too long to be a directory (which took the only log dir offline and halted the broker,
//! again on every restart), LeaderAndIsr and StopReplica naming paths (which made and
//! deleted directories outside the log dir), a stale LeaderAndIsr for tens of thousands
//! of topics (which read each one's config from ZooKeeper before it was refused), and
//! duplicate brokers in replica lists. Skipped, with a message, only without java.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use kafka_protocol::messages::leader_and_isr_request::{
    LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_protocol::messages::stop_replica_request::{
    StopReplicaPartitionState, StopReplicaTopicState,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use common::zookeeper::ZooKeeper;
use common::TestBroker;
use skua::zk::session::{ZkConfig, ZkSession};
use skua::zk::znodes::{self, paths, TopicAssignment};

const INVALID_TOPIC_EXCEPTION: i16 = 17;
const STALE_CONTROLLER_EPOCH: i16 = 11;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;

async fn eventually<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    mut f: impl FnMut() -> F,
) -> T {
    for _ in 0..300 {
        if let Some(v) = f().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what} within 30 s");
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// skua as broker 1 and controller of `chroot`, and a session of the test's own.
async fn start(zk: &ZooKeeper, chroot: &str, dir: &Path) -> (TestBroker, ZkSession) {
    let connect = format!("{}{chroot}", zk.connect);
    let broker = TestBroker::start(
        dir,
        &[
            ("zookeeper.connect", &connect),
            ("zookeeper.session.timeout.ms", "6000"),
        ],
    )
    .await;
    let session =
        ZkSession::connect(&ZkConfig::new(&connect, Duration::from_secs(10), None).unwrap())
            .await
            .unwrap();
    eventually("skua is the controller", || async {
        let (data, _) = session.get(paths::CONTROLLER).await.ok()??;
        let c: znodes::ControllerRegistration = znodes::decode(&data).ok()?;
        (c.brokerid == 1).then_some(())
    })
    .await;
    (broker, session)
}

async fn write_topic_znode(session: &ZkSession, topic: &str, partitions: &[(i32, Vec<i32>)]) {
    let a = TopicAssignment::new(
        skua::log::uuid_to_kafka_string(uuid::Uuid::new_v4()),
        partitions.iter().cloned().collect(),
    );
    session
        .create_recursive(&paths::topic(topic), &znodes::encode(&a))
        .await
        .unwrap();
}

/// Produces one record to partition 0 of `topic` once it has a leader; its error code.
async fn produce_when_led(broker: &TestBroker, topic: &str) -> i16 {
    let records = common::batch(&["v"], None, kafka_protocol::records::Compression::None);
    eventually("the topic takes a record", || {
        let records = records.clone();
        async move {
            let mut c = common::Client::connect(broker.addr).await;
            let r = c
                .send(&common::produce_request(topic, 0, records, -1), 9)
                .await;
            let code = r.responses[0].partition_responses[0].error_code;
            (code == 0).then_some(code)
        }
    })
    .await
}

/// Whether every log dir of the broker is online, as DescribeLogDirs answers.
async fn log_dirs_online(broker: &TestBroker) -> bool {
    let mut c = broker.client().await;
    let r = c
        .send(&DescribeLogDirsRequest::default().with_topics(None), 4)
        .await;
    !r.results.is_empty() && r.results.iter().all(|d| d.error_code == 0)
}

/// Every entry under `root`, recursively, relative to it.
fn tree(root: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = e.path();
            out.push(path.strip_prefix(root).unwrap().to_path_buf());
            if path.is_dir() {
                todo.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Item 1 and item 9 of the issue: a topic znode named with 300 characters, and one whose
/// replica list is `[1,1,1]`, next to a legal topic. The broker keeps its log dir online,
/// serves the legal topic, makes no directory of the long name, moves its leaderships
/// on a controlled shutdown, and does all of it again after a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_znodes_with_illegal_names_or_duplicate_replicas_stop_nothing() {
    let Some(zk) = ZooKeeper::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let long = "L".repeat(300);
    for restart in [false, true] {
        let (broker, session) = start(&zk, "/znodes", dir.path()).await;
        if !restart {
            write_topic_znode(&session, &long, &[(0, vec![1])]).await;
            write_topic_znode(&session, "dups", &[(0, vec![1, 1, 1])]).await;
            write_topic_znode(&session, "legal", &[(0, vec![1])]).await;
        }
        assert_eq!(
            produce_when_led(&broker, "legal").await,
            0,
            "restart {restart}"
        );
        assert_eq!(
            produce_when_led(&broker, "dups").await,
            0,
            "restart {restart}"
        );
        assert!(log_dirs_online(&broker).await, "restart {restart}");
        assert!(
            tree(dir.path())
                .iter()
                .all(|p| !p.to_string_lossy().starts_with("LLLL")),
            "no directory of the long name"
        );
        // Controlled shutdown: the only broker has nowhere to move its leaderships, and
        // answers without an error, the duplicate-replica topic included.
        let (_, stat) = session.get(&paths::broker(1)).await.unwrap().unwrap();
        let mut c = broker.client().await;
        let r = c
            .send(
                &ControlledShutdownRequest::default()
                    .with_broker_id(BrokerId(1))
                    .with_broker_epoch(stat.czxid),
                3,
            )
            .await;
        assert_eq!(r.error_code, 0, "restart {restart}: {r:?}");
        drop(session);
        broker.stop().await;
    }
}

fn leader_and_isr(controller_epoch: i32, topics: &[(&str, i32)]) -> LeaderAndIsrRequest {
    LeaderAndIsrRequest::default()
        .with_controller_id(BrokerId(1))
        .with_controller_epoch(controller_epoch)
        .with_broker_epoch(-1)
        .with_topic_states(
            topics
                .iter()
                .map(|&(topic, p)| {
                    LeaderAndIsrTopicState::default()
                        .with_topic_name(name(topic))
                        .with_topic_id(uuid::Uuid::new_v4())
                        .with_partition_states(vec![LeaderAndIsrPartitionState::default()
                            .with_partition_index(p)
                            .with_leader(BrokerId(1))
                            .with_leader_epoch(1000)
                            .with_isr(vec![BrokerId(1)])
                            .with_replicas(vec![BrokerId(1)])])
                })
                .collect(),
        )
}

fn codes(r: &LeaderAndIsrResponse) -> Vec<i16> {
    r.topics
        .iter()
        .flat_map(|t| t.partition_errors.iter().map(|p| p.error_code))
        .collect()
}

/// Item 2: LeaderAndIsr naming `../outside/escaped` and an absolute path, then StopReplica
/// deleting the absolute path's partition 7 where a directory `victim-7/` with a file
/// that is not Kafka's exists. Each is answered INVALID_TOPIC_EXCEPTION; nothing is made
/// outside the log dir and the victim is untouched. Item 6: a stale LeaderAndIsr for
/// 30,000 topics is refused at once, without reading any of their configs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_requests_naming_paths_touch_nothing_outside_the_log_dir() {
    let Some(zk) = ZooKeeper::start() else { return };
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    std::fs::create_dir(&dir).unwrap();
    let (broker, session) = start(&zk, "/paths", &dir).await;
    let (data, _) = session.get(paths::CONTROLLER_EPOCH).await.unwrap().unwrap();
    let epoch: i32 = String::from_utf8(data).unwrap().trim().parse().unwrap();

    let victim = root.path().join("victim-7");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("not-kafkas.txt"), b"keep me").unwrap();
    let outside_before = tree(root.path());
    let absolute = root.path().join("victim").display().to_string();
    let mut c = broker.client().await;
    let r = c
        .send(
            &leader_and_isr(epoch, &[("../outside/escaped", 0), (&absolute, 7)]),
            7,
        )
        .await;
    assert_eq!(r.error_code, 0);
    assert_eq!(codes(&r), vec![INVALID_TOPIC_EXCEPTION; 2]);
    let stop = StopReplicaRequest::default()
        .with_controller_id(BrokerId(1))
        .with_controller_epoch(epoch)
        .with_broker_epoch(-1)
        .with_topic_states(vec![StopReplicaTopicState::default()
            .with_topic_name(name(&absolute))
            .with_partition_states(vec![StopReplicaPartitionState::default()
                .with_partition_index(7)
                .with_leader_epoch(-2)
                .with_delete_partition(true)])]);
    let r = c.send(&stop, 4).await;
    assert_eq!(r.partition_errors[0].error_code, INVALID_TOPIC_EXCEPTION);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let outside_after: Vec<_> = tree(root.path())
        .into_iter()
        .filter(|p| !p.starts_with("data"))
        .collect();
    let outside_before: Vec<_> = outside_before
        .into_iter()
        .filter(|p| !p.starts_with("data"))
        .collect();
    assert_eq!(
        outside_after, outside_before,
        "nothing made or removed outside"
    );
    assert_eq!(
        std::fs::read(victim.join("not-kafkas.txt")).unwrap(),
        b"keep me"
    );
    assert!(log_dirs_online(&broker).await);

    // A stale controller's LeaderAndIsr for 30,000 topics: refused before any ZooKeeper
    // read (before, one round trip per topic: 13 s for 60,000).
    let names: Vec<String> = (0..30_000).map(|i| format!("stale-{i}")).collect();
    let many: Vec<(&str, i32)> = names.iter().map(|n| (n.as_str(), 0)).collect();
    let started = Instant::now();
    let r = c.send(&leader_and_isr(epoch - 1, &many), 7).await;
    let took = started.elapsed();
    assert_eq!(r.error_code, STALE_CONTROLLER_EPOCH);
    assert!(took < Duration::from_secs(2), "refused after {took:?}");
    drop(session);
    broker.stop().await;
}

/// Item 9: CreatePartitions with a broker twice in an assignment is refused
/// INVALID_REPLICA_ASSIGNMENT, as Kafka's `validateReplicaAssignment` refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_partitions_refuses_a_broker_twice_in_an_assignment() {
    let Some(zk) = ZooKeeper::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (broker, session) = start(&zk, "/grow", dir.path()).await;
    // A second registered broker (nothing listens there: the assignments are what is
    // checked), so that a topic can have two replicas and [1, 1] the right length.
    let endpoint = znodes::EndPoint {
        listener: "PLAINTEXT".into(),
        security_protocol: "PLAINTEXT".into(),
        host: "127.0.0.1".into(),
        port: 1,
    };
    let registration = znodes::BrokerRegistration::new(&[endpoint], None, 1);
    session
        .register_ephemeral(&paths::broker(2), &znodes::encode(&registration))
        .await
        .unwrap();
    let mut c = broker.client().await;
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(name("grow"))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(vec![
                create_topics_request::CreatableReplicaAssignment::default()
                    .with_partition_index(0)
                    .with_broker_ids(vec![BrokerId(1), BrokerId(2)]),
            ])]);
    let created = eventually("broker 2 is known and the topic created", || {
        let create = create.clone();
        let addr = broker.addr;
        async move {
            let mut c = common::Client::connect(addr).await;
            let r = c.send(&create, 7).await;
            (r.topics[0].error_code == 0).then_some(r)
        }
    })
    .await;
    assert_eq!(created.topics[0].num_partitions, 1);
    let grow = |replicas: Vec<i32>| {
        CreatePartitionsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![
                create_partitions_request::CreatePartitionsTopic::default()
                    .with_name(name("grow"))
                    .with_count(2)
                    .with_assignments(Some(vec![
                        create_partitions_request::CreatePartitionsAssignment::default()
                            .with_broker_ids(replicas.into_iter().map(BrokerId).collect()),
                    ])),
            ])
    };
    let r = c.send(&grow(vec![1, 1]), 3).await;
    assert_eq!(r.results[0].error_code, INVALID_REPLICA_ASSIGNMENT, "{r:?}");
    assert_eq!(
        r.results[0].error_message.as_deref(),
        Some("Duplicate brokers not allowed in replica assignment: 1, 1 for partition id 1.")
    );
    let (data, _) = session.get(&paths::topic("grow")).await.unwrap().unwrap();
    let a: TopicAssignment = znodes::decode(&data).unwrap();
    assert_eq!(a.partitions.0.len(), 1, "the znode is unchanged");
    drop(session);
    broker.stop().await;
}

fn update_metadata(controller_epoch: i32, topic: &str, partitions: i32) -> UpdateMetadataRequest {
    use kafka_protocol::messages::update_metadata_request::{
        UpdateMetadataPartitionState, UpdateMetadataTopicState,
    };
    UpdateMetadataRequest::default()
        .with_controller_id(BrokerId(1))
        .with_controller_epoch(controller_epoch)
        .with_broker_epoch(-1)
        .with_topic_states(vec![UpdateMetadataTopicState::default()
            .with_topic_name(name(topic))
            .with_topic_id(uuid::Uuid::new_v4())
            // High to low: each was inserted at the front of the sorted partition list.
            .with_partition_states(
                (0..partitions)
                    .rev()
                    .map(|p| {
                        UpdateMetadataPartitionState::default()
                            .with_partition_index(p)
                            .with_leader(BrokerId(2))
                            .with_isr(vec![BrokerId(2)])
                            .with_replicas(vec![BrokerId(2)])
                    })
                    .collect(),
            )])
}

/// Item 4: three UpdateMetadata requests of 40,000 partitions each, named high to low,
/// sent at once over TCP. Each is applied in time linear in it, off the runtime's
/// workers: an ApiVersions sent meanwhile is answered at once (before, three such
/// requests left it unanswered for more than 5 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_metadata_with_many_partitions_stalls_nobody() {
    let Some(zk) = ZooKeeper::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (broker, session) = start(&zk, "/cache", dir.path()).await;
    let (data, _) = session.get(paths::CONTROLLER_EPOCH).await.unwrap().unwrap();
    let epoch: i32 = String::from_utf8(data).unwrap().trim().parse().unwrap();
    let started = Instant::now();
    let updates: Vec<_> = (0..3)
        .map(|i| {
            let addr = broker.addr;
            tokio::spawn(async move {
                let mut c = common::Client::connect(addr).await;
                let r = c
                    .send(&update_metadata(epoch, &format!("wide-{i}"), 40_000), 8)
                    .await;
                (r.error_code, started.elapsed())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut c = broker.client().await;
    let asked = Instant::now();
    let versions = c.send(&ApiVersionsRequest::default(), 3).await;
    let answered_in = asked.elapsed();
    assert_eq!(versions.error_code, 0);
    let mut applied = Vec::new();
    for u in updates {
        let (code, took) = u.await.unwrap();
        assert_eq!(code, 0);
        applied.push(took);
    }
    eprintln!("ApiVersions answered in {answered_in:?}; UpdateMetadata applied after {applied:?}");
    assert!(
        answered_in < Duration::from_secs(1),
        "ApiVersions took {answered_in:?}"
    );
    assert!(
        applied.iter().all(|t| *t < Duration::from_secs(20)),
        "{applied:?}"
    );
    let cached = broker
        .broker
        .controller
        .zk()
        .unwrap()
        .shared()
        .broker
        .cache();
    for i in 0..3 {
        let t = cached.topic(&format!("wide-{i}")).unwrap();
        assert_eq!(t.partitions.len(), 40_000);
    }
    drop(session);
    broker.stop().await;
}
