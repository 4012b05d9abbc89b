//! The broker side's answers and the deltas it hands listeners, request by request.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::leader_and_isr_request::{
    LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_protocol::messages::stop_replica_request::{
    StopReplicaPartitionState, StopReplicaTopicState,
};
use kafka_protocol::messages::update_metadata_request::{
    UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataPartitionState,
    UpdateMetadataTopicState,
};
use kafka_protocol::messages::{
    BrokerId, LeaderAndIsrRequest, StopReplicaRequest, TopicName, UpdateMetadataRequest,
};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use uuid::Uuid;

use super::BrokerSide;
use crate::controller::delta::{ApplyError, MetadataDelta, MetadataListener, TopicDelta};
use crate::controller::image::MetadataImage;

const ME: i32 = 1;
const EPOCH: i64 = 100;

#[derive(Default)]
struct Recorder {
    deltas: Mutex<Vec<MetadataDelta>>,
    /// Topics whose deltas fail, as a replica manager's would on a broken log dir.
    failing: Mutex<Vec<String>>,
}

impl MetadataListener for Recorder {
    fn on_delta(&self, _image: &MetadataImage, delta: &MetadataDelta) -> Vec<ApplyError> {
        self.deltas.lock().push(delta.clone());
        let failing = self.failing.lock();
        delta
            .topics
            .keys()
            .filter(|t| failing.contains(t))
            .map(|t| ApplyError {
                topic: t.clone(),
                message: "log dir offline".into(),
            })
            .collect()
    }
}

impl Recorder {
    fn last(&self) -> MetadataDelta {
        self.deltas.lock().last().cloned().unwrap_or_default()
    }
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

fn ids(v: &[i32]) -> Vec<BrokerId> {
    v.iter().copied().map(BrokerId).collect()
}

fn update(
    controller_epoch: i32,
    topic: &str,
    id: Uuid,
    parts: &[(i32, i32, &[i32])],
) -> UpdateMetadataRequest {
    UpdateMetadataRequest::default()
        .with_controller_id(BrokerId(2))
        .with_controller_epoch(controller_epoch)
        .with_broker_epoch(EPOCH)
        .with_live_brokers(vec![
            UpdateMetadataBroker::default().with_id(BrokerId(1)),
            UpdateMetadataBroker::default().with_id(BrokerId(2)),
        ])
        .with_topic_states(vec![UpdateMetadataTopicState::default()
            .with_topic_name(name(topic))
            .with_topic_id(id)
            .with_partition_states(
                parts
                    .iter()
                    .map(|&(p, leader, replicas)| {
                        UpdateMetadataPartitionState::default()
                            .with_partition_index(p)
                            .with_leader(BrokerId(leader))
                            .with_replicas(ids(replicas))
                            .with_isr(ids(replicas))
                    })
                    .collect(),
            )])
}

fn leader_and_isr(
    controller_epoch: i32,
    broker_epoch: i64,
    topic: &str,
    id: Uuid,
    parts: &[(i32, i32, i32, &[i32])],
) -> LeaderAndIsrRequest {
    LeaderAndIsrRequest::default()
        .with_controller_id(BrokerId(2))
        .with_controller_epoch(controller_epoch)
        .with_broker_epoch(broker_epoch)
        .with_topic_states(vec![LeaderAndIsrTopicState::default()
            .with_topic_name(name(topic))
            .with_topic_id(id)
            .with_partition_states(
                parts
                    .iter()
                    .map(|&(p, leader, leader_epoch, replicas)| {
                        LeaderAndIsrPartitionState::default()
                            .with_partition_index(p)
                            .with_leader(BrokerId(leader))
                            .with_leader_epoch(leader_epoch)
                            .with_replicas(ids(replicas))
                            .with_isr(ids(replicas))
                    })
                    .collect(),
            )])
}

fn stop(
    controller_epoch: i32,
    topic: &str,
    p: i32,
    leader_epoch: i32,
    delete: bool,
) -> StopReplicaRequest {
    StopReplicaRequest::default()
        .with_controller_epoch(controller_epoch)
        .with_broker_epoch(EPOCH)
        .with_topic_states(vec![StopReplicaTopicState::default()
            .with_topic_name(name(topic))
            .with_partition_states(vec![StopReplicaPartitionState::default()
                .with_partition_index(p)
                .with_leader_epoch(leader_epoch)
                .with_delete_partition(delete)])])
}

fn codes(r: &kafka_protocol::messages::LeaderAndIsrResponse) -> Vec<(i32, i16)> {
    r.topics
        .iter()
        .flat_map(|t| {
            t.partition_errors
                .iter()
                .map(|p| (p.partition_index, p.error_code))
        })
        .collect()
}

fn side() -> (BrokerSide, Arc<Recorder>) {
    let side = BrokerSide::new(ME);
    let recorder = Arc::new(Recorder::default());
    assert!(side.subscribe(recorder.clone()).is_empty());
    (side, recorder)
}

#[test]
fn update_metadata_alone_hosts_nothing() {
    let (side, rec) = side();
    let id = Uuid::from_u128(5);
    let r = side.update_metadata(&update(1, "t", id, &[(0, 1, &[1, 2]), (1, 2, &[2])]), EPOCH);
    assert_eq!(r.error_code, 0);
    let cache = side.cache();
    assert_eq!(cache.topic("t").unwrap().partitions.len(), 2);
    assert_eq!(cache.controller_id(), 2);
    // Listeners see the topic, without partition 0 (assigned here, not yet hosted).
    let TopicDelta::Changed(t) = &rec.last().topics["t"] else {
        panic!("a change")
    };
    assert_eq!(
        t.partitions.iter().map(|p| p.partition).collect::<Vec<_>>(),
        vec![1]
    );
    assert_eq!(side.image().topic("t").unwrap().partitions.len(), 2);
}

#[test]
fn leader_and_isr_hosts_with_kafkas_checks() {
    let (side, rec) = side();
    let id = Uuid::from_u128(5);
    let r = side.leader_and_isr(
        &leader_and_isr(1, EPOCH, "t", id, &[(0, 1, 0, &[1, 2]), (1, 2, 0, &[2, 3])]),
        7,
        EPOCH,
        &BTreeMap::from([(
            "t".to_string(),
            BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())]),
        )]),
    );
    assert_eq!(r.error_code, 0);
    assert_eq!(
        codes(&r),
        vec![(0, 0), (1, 3)],
        "partition 1 is not assigned here: UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert_eq!(r.topics[0].topic_id, id);
    let TopicDelta::Changed(t) = &rec.last().topics["t"] else {
        panic!("a change")
    };
    let p0 = t.partitions.iter().find(|p| p.partition == 0).unwrap();
    assert_eq!((p0.state.leader, p0.state.leader_epoch), (1, 0));
    assert_eq!(t.configs["cleanup.policy"], "compact");

    // The same leader epoch again, or an older one: STALE_CONTROLLER_EPOCH, as Kafka 3.9.
    let deltas = rec.deltas.lock().len();
    let r = side.leader_and_isr(
        &leader_and_isr(1, EPOCH, "t", id, &[(0, 2, 0, &[1, 2])]),
        7,
        EPOCH,
        &BTreeMap::new(),
    );
    assert_eq!(codes(&r), vec![(0, 11)]);
    assert_eq!(rec.deltas.lock().len(), deltas, "nothing published");
    // A newer epoch makes this broker a follower.
    let r = side.leader_and_isr(
        &leader_and_isr(2, EPOCH, "t", id, &[(0, 2, 1, &[1, 2])]),
        7,
        EPOCH,
        &BTreeMap::new(),
    );
    assert_eq!(codes(&r), vec![(0, 0)]);
    let TopicDelta::Changed(t) = &rec.last().topics["t"] else {
        panic!("a change")
    };
    assert_eq!(t.partitions[0].state.leader, 2);

    // Another topic id than the hosted log's.
    let r = side.leader_and_isr(
        &leader_and_isr(2, EPOCH, "t", Uuid::from_u128(6), &[(0, 1, 5, &[1, 2])]),
        7,
        EPOCH,
        &BTreeMap::new(),
    );
    assert_eq!(codes(&r), vec![(0, 103)], "INCONSISTENT_TOPIC_ID");

    // Fencing: an older controller, an older registration of this broker.
    let r = side.leader_and_isr(
        &leader_and_isr(1, EPOCH, "t", id, &[(0, 1, 9, &[1])]),
        7,
        EPOCH,
        &BTreeMap::new(),
    );
    assert_eq!(
        (r.error_code, r.topics.len()),
        (11, 0),
        "STALE_CONTROLLER_EPOCH"
    );
    let r = side.leader_and_isr(
        &leader_and_isr(2, EPOCH - 1, "t", id, &[(0, 1, 9, &[1])]),
        7,
        EPOCH,
        &BTreeMap::new(),
    );
    assert_eq!(r.error_code, 77, "STALE_BROKER_EPOCH");
    assert_eq!(
        side.update_metadata(&update(1, "t", id, &[]), EPOCH)
            .error_code,
        11
    );
}

#[test]
fn old_versions_answer_per_partition_and_storage_failures_are_reported() {
    let (side, rec) = side();
    rec.failing.lock().push("bad".into());
    let r = side.leader_and_isr(
        &leader_and_isr(1, EPOCH, "bad", Uuid::nil(), &[(0, 1, 0, &[1])]),
        4,
        EPOCH,
        &BTreeMap::new(),
    );
    assert!(r.topics.is_empty());
    let p = &r.partition_errors[0];
    assert_eq!(
        (p.topic_name.0.as_str(), p.partition_index, p.error_code),
        ("bad", 0, 56)
    );
}

#[test]
fn stop_replica_fences_by_leader_epoch_and_deletes_when_asked() {
    let (side, rec) = side();
    let id = Uuid::from_u128(5);
    side.leader_and_isr(
        &leader_and_isr(1, EPOCH, "t", id, &[(0, 1, 3, &[1]), (1, 1, 3, &[1])]),
        7,
        EPOCH,
        &BTreeMap::new(),
    );
    let deltas = rec.deltas.lock().len();
    let r = side.stop_replica(&stop(1, "t", 0, 2, true), EPOCH);
    assert_eq!(r.partition_errors[0].error_code, 74, "FENCED_LEADER_EPOCH");
    // Without deletion: acknowledged, still hosted, nothing published.
    let r = side.stop_replica(&stop(1, "t", 0, 3, false), EPOCH);
    assert_eq!(r.partition_errors[0].error_code, 0);
    assert_eq!(rec.deltas.lock().len(), deltas);
    // A deletion (-2): the partition is removed for the listeners, with the topic's id.
    let r = side.stop_replica(&stop(1, "t", 0, -2, true), EPOCH);
    assert_eq!(r.partition_errors[0].error_code, 0);
    let removal = rec.deltas.lock()[deltas].clone();
    let TopicDelta::Removed(t) = &removal.topics["t"] else {
        panic!("a removal")
    };
    assert_eq!(
        (t.topic_id, t.partitions.len(), t.partitions[0].partition),
        (id, 1, 0)
    );
    // Partition 1 is still hosted and shown again.
    let TopicDelta::Changed(t) = &rec.last().topics["t"] else {
        panic!("a change")
    };
    assert_eq!(
        t.partitions.iter().map(|p| p.partition).collect::<Vec<_>>(),
        vec![1]
    );
    let r = side.stop_replica(&stop(0, "t", 1, -2, true), EPOCH);
    assert_eq!(r.error_code, 11, "STALE_CONTROLLER_EPOCH");
}

#[test]
fn isr_changes_announced_by_update_metadata_reach_later_deltas() {
    let (side, rec) = side();
    let id = Uuid::from_u128(5);
    side.leader_and_isr(
        &leader_and_isr(1, EPOCH, "t", id, &[(0, 1, 0, &[1, 2])]),
        7,
        EPOCH,
        &BTreeMap::new(),
    );
    // The leader shrank the ISR through AlterPartition: UpdateMetadata carries it at the
    // same leader epoch and partition epoch 1.
    let mut shrunk = update(1, "t", id, &[(0, 1, &[1, 2])]);
    let state = &mut shrunk.topic_states[0].partition_states[0];
    state.isr = ids(&[1]);
    state.zk_version = 1;
    side.update_metadata(&shrunk, EPOCH);
    // A new partition reshapes the topic: the delta carries the newer ISR.
    side.update_metadata(&update(1, "t", id, &[(1, 2, &[2])]), EPOCH);
    let TopicDelta::Changed(t) = &rec.last().topics["t"] else {
        panic!("a change")
    };
    let p0 = &t.partitions[0].state;
    assert_eq!((p0.isr.clone(), p0.partition_epoch), (vec![1], 1));
    assert_eq!(t.partitions.len(), 2);
}

/// A controller elected after a failover announces itself with an UpdateMetadata that
/// changes no partition (so do broker restarts): the listeners hear of it all the same,
/// or a leader would keep sending its ISR changes to the controller that is gone.
#[test]
fn a_new_controller_reaches_the_listeners_without_partition_changes() {
    let (side, rec) = side();
    let id = Uuid::from_u128(5);
    side.update_metadata(&update(1, "t", id, &[(0, 2, &[2])]), EPOCH);
    let seen = rec.deltas.lock().len();
    // The same partitions, the same brokers and controller: nothing to tell.
    side.update_metadata(&update(1, "t", id, &[(0, 2, &[2])]), EPOCH);
    assert_eq!(rec.deltas.lock().len(), seen, "an unchanged UpdateMetadata");
    // Broker 1 (here) became the controller; the partitions stand as they were.
    let failover = update(2, "t", id, &[(0, 2, &[2])]).with_controller_id(BrokerId(1));
    side.update_metadata(&failover, EPOCH);
    assert_eq!(rec.deltas.lock().len(), seen + 1, "the failover is told");
    let delta = rec.last();
    assert!(delta.cluster && delta.topics.is_empty(), "{delta:?}");
    assert_eq!(side.image().controller_id(), 1);
    // A broker back (or gone) is told too.
    let mut back = update(2, "t", id, &[(0, 2, &[2])]).with_controller_id(BrokerId(1));
    back.live_brokers.push(
        UpdateMetadataBroker::default()
            .with_id(BrokerId(3))
            .with_endpoints(vec![UpdateMetadataEndpoint::default()
                .with_host(StrBytes::from_static_str("127.0.0.1"))
                .with_port(9093)
                .with_listener(StrBytes::from_static_str("PLAINTEXT"))]),
    );
    side.update_metadata(&back, EPOCH);
    assert_eq!(rec.deltas.lock().len(), seen + 2);
    assert!(rec.last().cluster);
    assert_eq!(
        side.image().brokers().len(),
        1,
        "broker 3, with its endpoint"
    );
}

/// StopReplica without deletion stops the replica's fetcher (through the replica
/// manager's `stop_replica`) for hosted partitions it accepts; a fenced one, a partition
/// not hosted and a deletion are not stopped this way.
#[test]
fn stop_replica_without_deletion_stops_the_fetcher() {
    /// Replicas that only record which were stopped.
    #[derive(Default)]
    struct Stopped(parking_lot::Mutex<Vec<(String, i32)>>);
    impl super::HostedReplicas for Stopped {
        fn log_topic_id(&self, _: &str, _: i32) -> Option<Uuid> {
            None
        }
        fn is_offline(&self, _: &str, _: i32) -> bool {
            false
        }
        fn stop_replica(&self, topic: &str, partition: i32) {
            self.0.lock().push((topic.to_string(), partition));
        }
        fn set_broker_epoch(&self, _: i64) {}
        fn doubt_leaderships(&self) {}
        fn session_survived(&self) {}
        fn heard_from_controller(&self, _: i64) {}
    }
    let (side, _rec) = side();
    let stopped = Arc::new(Stopped::default());
    side.host_replicas(stopped.clone()).unwrap();
    let stopped = &stopped.0;
    let id = Uuid::from_u128(5);
    side.leader_and_isr(
        &leader_and_isr(1, EPOCH, "t", id, &[(0, 2, 3, &[2, 1]), (1, 2, 3, &[2, 1])]),
        7,
        EPOCH,
        &BTreeMap::new(),
    );
    let r = side.stop_replica(&stop(1, "t", 0, 2, false), EPOCH);
    assert_eq!(r.partition_errors[0].error_code, 74, "FENCED_LEADER_EPOCH");
    side.stop_replica(&stop(1, "other", 0, 3, false), EPOCH);
    side.stop_replica(&stop(1, "t", 1, -2, true), EPOCH);
    assert!(stopped.lock().is_empty());
    let r = side.stop_replica(&stop(1, "t", 0, 3, false), EPOCH);
    assert_eq!(r.partition_errors[0].error_code, 0);
    assert_eq!(*stopped.lock(), vec![("t".to_string(), 0)]);
}

/// Configs read from ZooKeeper reach the listeners: a topic's overrides as a change of
/// the topic (hosted partitions with them), broker configs as a changed BROKER resource
/// in the image; reading the same again publishes nothing.
#[test]
fn configs_from_zookeeper_reach_the_listeners() {
    let (side, rec) = side();
    let id = Uuid::from_u128(5);
    side.leader_and_isr(
        &leader_and_isr(1, EPOCH, "t", id, &[(0, 1, 3, &[1])]),
        7,
        EPOCH,
        &BTreeMap::new(),
    );
    let configs = BTreeMap::from([("retention.ms".to_string(), "1000".to_string())]);
    side.apply_topic_configs("t", configs.clone());
    let TopicDelta::Changed(t) = &rec.last().topics["t"] else {
        panic!("a change")
    };
    assert_eq!(t.configs, configs);
    assert_eq!(t.partitions.len(), 1);
    let deltas = rec.deltas.lock().len();
    side.apply_topic_configs("t", configs.clone());
    assert_eq!(
        rec.deltas.lock().len(),
        deltas,
        "unchanged: nothing published"
    );

    let broker = BTreeMap::from([("message.max.bytes".to_string(), "2000".to_string())]);
    side.apply_broker_configs("", broker.clone());
    let last = rec.last();
    let resource = crate::controller::ConfigResource {
        resource_type: crate::controller::records::CONFIG_RESOURCE_BROKER,
        name: String::new(),
    };
    assert!(last.configs.contains(&resource));
    assert_eq!(side.image().resource_configs(&resource), Some(&broker));
    side.apply_broker_configs("", BTreeMap::new());
    assert_eq!(side.image().resource_configs(&resource), None);
}

/// Topic names a controller passed on from ZooKeeper that are no topic's (too long for a
/// directory, a relative or absolute path): answered INVALID_TOPIC_EXCEPTION, never
/// hosted, never handed to the listeners (whose log layer would make a directory of
/// them), and never deleted by StopReplica. The legal topic beside them is hosted.
#[test]
fn illegal_topic_names_are_refused_and_reach_no_listener() {
    let (side, rec) = side();
    let long = "L".repeat(300);
    for (i, bad) in [long.as_str(), "../outside/escaped", "/tmp/victim"]
        .iter()
        .enumerate()
    {
        let id = Uuid::from_u128(10 + i as u128);
        let r = side.leader_and_isr(
            &leader_and_isr(1, EPOCH, bad, id, &[(7, 1, 0, &[1])]),
            7,
            EPOCH,
            &BTreeMap::new(),
        );
        assert_eq!(codes(&r), vec![(7, 17)], "{bad}: INVALID_TOPIC_EXCEPTION");
        let r = side.stop_replica(&stop(1, bad, 7, -2, true), EPOCH);
        assert_eq!(r.partition_errors[0].error_code, 17, "{bad}");
    }
    let r = side.leader_and_isr(
        &leader_and_isr(
            1,
            EPOCH,
            "fine",
            Uuid::from_u128(1),
            &[(0, 1, 0, &[1]), (-1, 1, 0, &[1])],
        ),
        7,
        EPOCH,
        &BTreeMap::new(),
    );
    assert_eq!(codes(&r), vec![(0, 0), (-1, 17)]);
    let seen: Vec<String> = rec
        .deltas
        .lock()
        .iter()
        .flat_map(|d| d.topics.keys().cloned())
        .collect();
    assert_eq!(seen, ["fine"]);
}

/// A LeaderAndIsr the broker will refuse asks for no topic config from ZooKeeper; one it
/// takes asks only for the legal topics whose logs it creates here.
#[test]
fn only_logs_to_create_have_their_configs_read() {
    let (side, _rec) = side();
    let id = Uuid::from_u128(5);
    let first = leader_and_isr(5, EPOCH, "t", id, &[(0, 1, 0, &[1])]);
    let wanted: Vec<String> = side
        .topics_to_configure(&first, EPOCH)
        .into_iter()
        .collect();
    assert_eq!(wanted, ["t"]);
    side.leader_and_isr(&first, 7, EPOCH, &BTreeMap::new());
    // Hosted now: its configs follow their change notifications.
    let again = leader_and_isr(5, EPOCH, "t", id, &[(0, 1, 1, &[1])]);
    assert!(side.topics_to_configure(&again, EPOCH).is_empty());
    // A stale controller, a stale broker epoch, an illegal name, another broker's
    // partition: nothing to read.
    let many = |epoch, broker_epoch| {
        let mut r = leader_and_isr(epoch, broker_epoch, "u", id, &[(0, 1, 0, &[1])]);
        for i in 0..1000 {
            let mut t = r.topic_states[0].clone();
            t.topic_name = name(&format!("u{i}"));
            r.topic_states.push(t);
        }
        r
    };
    assert!(side.topics_to_configure(&many(4, EPOCH), EPOCH).is_empty());
    assert!(side
        .topics_to_configure(&many(5, EPOCH - 1), EPOCH)
        .is_empty());
    assert_eq!(side.topics_to_configure(&many(5, EPOCH), EPOCH).len(), 1001);
    let odd = leader_and_isr(5, EPOCH, "../x", id, &[(0, 1, 0, &[1])]);
    assert!(side.topics_to_configure(&odd, EPOCH).is_empty());
    let elsewhere = leader_and_isr(5, EPOCH, "v", id, &[(0, 2, 0, &[2])]);
    assert!(side.topics_to_configure(&elsewhere, EPOCH).is_empty());
}
