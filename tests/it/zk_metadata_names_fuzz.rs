//! A short mutation run of the ZooKeeper-mode metadata path with arbitrary topic names
//! and partition lists: a topic znode's JSON (its name the znode's, as `/brokers/topics`
//! lists it) through the controller's checks into its context, the LeaderAndIsr and
//! UpdateMetadata it would send, and that request into a broker side whose listener
//! creates the logs in a real log dir. The same request is also sent as a controller
//! that checks nothing (Apache Kafka's) would send it, followed by a StopReplica that
//! deletes it. For a bounded time (`SKUA_FUZZ_SECS`, `SKUA_FUZZ_SEED`).
//!
//! Never a panic; nothing made or removed outside the log dir; the log dir never taken
//! offline; every directory in it named `<legal topic>-<index>`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use kafka_protocol::messages::stop_replica_request::{
    StopReplicaPartitionState, StopReplicaTopicState,
};
use kafka_protocol::messages::{StopReplicaRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use skua::config::inter_broker_protocol::MetadataVersion;
use skua::controller::delta::{ApplyError, MetadataDelta, MetadataListener, TopicDelta};
use skua::controller::image::MetadataImage;
use skua::controller::topic_name;
use skua::controller::zk::broker::BrokerSide;
use skua::controller::zk::context::{ControllerContext, Leadership, LiveBroker, TopicPartition};
use skua::controller::zk::leader_and_isr::LeaderAndIsr;
use skua::controller::zk::requests::{ControlRequest, RequestBatch};
use skua::controller::zk::znode_checks::{checked_assignment, legal_topic_names};
use skua::log::{DirLock, LogConfig, LogManager};
use skua::zk::znodes::{self, BrokerRegistration, EndPoint, TopicAssignment};

use crate::fuzzing;
use fuzzing::{budget, mutate, Rng};

const ME: i32 = 1;

/// Creates the logs of the partitions a delta hosts here, as the replica manager does.
struct Creating(Arc<LogManager>);

impl MetadataListener for Creating {
    fn on_delta(&self, _: &MetadataImage, delta: &MetadataDelta) -> Vec<ApplyError> {
        let mut failed = Vec::new();
        for (name, d) in &delta.topics {
            match d {
                TopicDelta::Changed(t) => {
                    for p in &t.partitions {
                        if !p.assignment.replicas.contains(&ME) {
                            continue;
                        }
                        let tp = skua::log::TopicPartition::new(name.as_str(), p.partition);
                        if let Err(e) = self.0.get_or_create_log(&tp, t.topic_id, config()) {
                            failed.push(ApplyError {
                                topic: name.clone(),
                                message: e.to_string(),
                            });
                        }
                    }
                }
                TopicDelta::Removed(t) => {
                    for p in &t.partitions {
                        let tp = skua::log::TopicPartition::new(name.as_str(), p.partition);
                        if let Err(e) = self.0.delete_log(&tp) {
                            failed.push(ApplyError {
                                topic: name.clone(),
                                message: e.to_string(),
                            });
                        }
                    }
                }
            }
        }
        failed
    }
}

fn config() -> LogConfig {
    LogConfig {
        max_index_size: 4096,
        ..LogConfig::default()
    }
}

/// A topic name: one of the shapes that broke something, a legal one, or random bytes.
fn topic(rng: &mut Rng) -> String {
    let shapes = [
        "../outside/escaped".to_string(),
        "/tmp/skua-fuzz-victim".to_string(),
        "L".repeat(300),
        "x".repeat(249),
        "x".repeat(250),
        String::new(),
        ".".into(),
        "..".into(),
        "a/b".into(),
        "a\0b".into(),
        "ü".into(),
        "__consumer_offsets".into(),
        "t-1".into(),
    ];
    match rng.below(4) {
        0 => shapes[rng.below(shapes.len())].clone(),
        1 => format!("t{}", rng.below(8)),
        _ => {
            let alphabet = b"ab.-_/\\\0 L.";
            let len = rng.below(12);
            let bytes: Vec<u8> = (0..len)
                .map(|_| match rng.below(3) {
                    0 => rng.next() as u8,
                    _ => alphabet[rng.below(alphabet.len())],
                })
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        }
    }
}

/// A partition → replicas map: indexes negative, large or small, brokers repeated.
fn partitions(rng: &mut Rng) -> BTreeMap<i32, Vec<i32>> {
    let indexes = [-1, 0, 1, 2, 3, 100_000, 1_000_000, i32::MAX, i32::MIN];
    (0..1 + rng.below(4))
        .map(|_| {
            let p = indexes[rng.below(indexes.len())];
            let replicas = (0..rng.below(4))
                .map(|_| [ME, ME, 2, -1][rng.below(4)])
                .collect();
            (p, replicas)
        })
        .collect()
}

/// The LeaderAndIsr (and UpdateMetadata) a controller sends broker 1 for `assignment`.
fn requests(name: &str, assignment: &BTreeMap<i32, Vec<i32>>) -> Vec<ControlRequest> {
    let mut ctx = ControllerContext {
        epoch: 1,
        ..Default::default()
    };
    let endpoint = EndPoint {
        listener: "PLAINTEXT".into(),
        security_protocol: "PLAINTEXT".into(),
        host: "127.0.0.1".into(),
        port: 9092,
    };
    let registration = BrokerRegistration::new(&[endpoint], None, 1);
    ctx.live_brokers.insert(
        ME,
        LiveBroker::from_registration(ME, 10, &registration).unwrap(),
    );
    ctx.topic_ids.insert(name.to_string(), Uuid::new_v4());
    ctx.assignments.insert(name.to_string(), assignment.clone());
    let mut batch = RequestBatch::default();
    for (&p, replicas) in assignment {
        let tp = TopicPartition::new(name, p);
        let leadership = Leadership {
            leader_and_isr: LeaderAndIsr {
                leader_epoch: 0,
                partition_epoch: 0,
                ..LeaderAndIsr::initial(replicas.first().copied().unwrap_or(-1), replicas.clone())
            },
            controller_epoch: 1,
        };
        ctx.leadership.insert(tp.clone(), leadership.clone());
        batch.add_leader_and_isr(&ctx, replicas, &tp, &leadership, true);
    }
    batch
        .build(&ctx, ME, "PLAINTEXT", MetadataVersion::LATEST)
        .into_iter()
        .map(|(_, r)| r)
        .collect()
}

fn apply(side: &BrokerSide, requests: Vec<ControlRequest>) {
    let configs = BTreeMap::new();
    for r in requests {
        match r {
            ControlRequest::LeaderAndIsr { request, version } => {
                side.leader_and_isr(&request, version, 10, &configs);
            }
            ControlRequest::UpdateMetadata { request, .. } => {
                side.update_metadata(&request, 10);
            }
            ControlRequest::StopReplica { request, .. } => {
                side.stop_replica(&request, 10);
            }
        }
    }
}

fn stop_and_delete(name: &str, assignment: &BTreeMap<i32, Vec<i32>>) -> StopReplicaRequest {
    StopReplicaRequest::default()
        .with_controller_epoch(1)
        .with_broker_epoch(10)
        .with_topic_states(vec![StopReplicaTopicState::default()
            .with_topic_name(TopicName(StrBytes::from_string(name.to_string())))
            .with_partition_states(
                assignment
                    .keys()
                    .map(|&p| {
                        StopReplicaPartitionState::default()
                            .with_partition_index(p)
                            .with_leader_epoch(-2)
                            .with_delete_partition(true)
                    })
                    .collect(),
            )])
}

fn entries(root: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// Whether `name` (an entry of the log dir) is one the log layer may have made: its own
/// files, a partition directory `<legal topic>-<index>`, or one renamed for deletion
/// `<topic>-<index>.<32 hex>-delete`.
fn made_by_the_log_layer(name: &str) -> bool {
    if matches!(name, ".lock" | "meta.properties") || name.ends_with("-checkpoint") {
        return true;
    }
    let partition_dir = |dir: &str| {
        dir.rsplit_once('-').is_some_and(|(topic, p)| {
            p.parse::<i32>().is_ok_and(|p| p >= 0) && topic_name::validate(topic).is_ok()
        })
    };
    match name
        .strip_suffix("-delete")
        .and_then(|rest| rest.rsplit_once('.'))
    {
        Some((dir, id)) => id.len() == 32 && partition_dir(dir),
        None => partition_dir(name),
    }
}

#[test]
fn zookeeper_mode_names_and_partitions_make_no_path_outside_the_log_dir() {
    let mut rng = Rng::from_env(0x5a17_7e57);
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("logs");
    std::fs::create_dir(&dir).unwrap();
    let lock = DirLock::acquire(&dir).unwrap();
    let logs = Arc::new(
        LogManager::startup(vec![(dir.clone(), lock)], |_: &_, _| true, |_| config(), 0).unwrap(),
    );
    let side = BrokerSide::new(ME);
    assert!(side.subscribe(Arc::new(Creating(logs.clone()))).is_empty());
    let outside: Vec<PathBuf> = entries(root.path());
    let deadline = Instant::now() + budget(2.0);
    let mut runs = 0u64;
    while Instant::now() < deadline {
        runs += 1;
        let name = topic(&mut rng);
        let assignment = partitions(&mut rng);
        let json = znodes::encode(&TopicAssignment::new(
            skua::log::uuid_to_kafka_string(Uuid::new_v4()),
            assignment.clone(),
        ));
        let json = match rng.below(3) {
            0 => mutate(&mut rng, &json),
            _ => json,
        };
        // skua's controller: only a legal name and a checked assignment are loaded.
        if let (Ok(a), [legal]) = (
            znodes::decode::<TopicAssignment>(&json),
            legal_topic_names(vec![name.clone()]).as_slice(),
        ) {
            let a = checked_assignment(legal, a);
            apply(&side, requests(legal, &a.partitions.0));
        }
        // A controller that checks nothing: the raw name and partitions reach the broker.
        apply(&side, requests(&name, &assignment));
        side.stop_replica(&stop_and_delete(&name, &assignment), 10);

        assert!(
            !logs.all_dirs_offline(),
            "run {runs}: {name:?} {assignment:?}"
        );
        assert_eq!(entries(root.path()), outside, "run {runs}: {name:?}");
        for e in entries(&dir) {
            let n = e.file_name().unwrap().to_string_lossy().into_owned();
            assert!(made_by_the_log_layer(&n), "run {runs}: {n:?} from {name:?}");
        }
    }
    assert!(runs > 10, "only {runs} runs");
    eprintln!("{runs} runs");
}
