//! skua's controller requests against Kafka 3.9.1's, byte for byte.
//!
//! For every LeaderAndIsr, UpdateMetadata and StopReplica a Kafka 3.9.1 controller sent
//! in `protocol-tests/fixtures-cluster/`, at its default `inter.broker.protocol.version`
//! and at every older one captured that skua runs at (0.11.0 to 3.3), the test rebuilds the controller state the
//! request describes (live brokers and epochs, leaderships, topic ids, deletions), has
//! skua's `RequestBatch` build the request for the same broker, and frames it as skua's
//! controller channel does (client id = controller id). The frames must be identical,
//! except for the order of topics, partitions and brokers within the request: Kafka
//! lists them in JVM hash-map order, skua in id order, and receivers treat them as sets.
//! So both sides are put in id order before comparing; how many frames matched without
//! that is printed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, LeaderAndIsrRequest, RequestHeader, RequestKind, StopReplicaRequest,
    UpdateMetadataRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use skua::client::codec::encode_request;
use skua::config::inter_broker_protocol::MetadataVersion;
use skua::controller::zk::context::{ControllerContext, Leadership, LiveBroker, TopicPartition};
use skua::controller::zk::leader_and_isr::{
    LeaderAndIsr, EPOCH_DURING_DELETE, LEADER_DURING_DELETE,
};
use skua::controller::zk::requests::{ControlRequest, RequestBatch};
use skua::zk::znodes::EndPoint;

const LISTENER: &str = "PLAINTEXT";

/// The inter-broker protocol a capture's controller ran at, from its directory's name
/// (`kafka-3.9.1-ibp-2.4-IV0-to-broker-1`); None for captures of other senders, and of
/// versions older than skua runs at.
fn protocol_of(client: &str) -> Option<MetadataVersion> {
    let rest = client.strip_prefix("kafka-3.9.1-")?;
    if rest.starts_with("to-broker-") {
        return Some(MetadataVersion::LATEST);
    }
    let version = rest.strip_prefix("ibp-")?.rsplit_once("-to-broker-")?.0;
    MetadataVersion::parse(version).ok()
}

fn fixtures() -> Vec<(ApiKey, i16, MetadataVersion, PathBuf)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol-tests/fixtures-cluster");
    let manifest = std::fs::read_to_string(dir.join("MANIFEST.tsv")).unwrap();
    manifest
        .lines()
        .skip(1)
        .filter_map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            // Kafka 3.9.1's controller only: older releases' captures are compared by
            // tests/it/zk_broker_replay.rs.
            let protocol = protocol_of(c[1])?;
            let key = ApiKey::try_from(c[3].parse::<i16>().ok()?).ok()?;
            matches!(
                key,
                ApiKey::LeaderAndIsr | ApiKey::UpdateMetadata | ApiKey::StopReplica
            )
            .then(|| (key, c[5].parse().unwrap(), protocol, dir.join(c[6])))
        })
        .collect()
}

fn broker(id: i32, epoch: i64, host: &str, port: i32, rack: Option<String>) -> LiveBroker {
    LiveBroker {
        id,
        epoch,
        endpoints: vec![EndPoint {
            listener: LISTENER.into(),
            security_protocol: LISTENER.into(),
            host: host.into(),
            port,
        }],
        rack,
    }
}

/// The target broker, registered at the request's broker epoch.
fn target_of(path: &Path) -> i32 {
    let name = path
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap();
    name.rsplit('-').next().unwrap().parse().unwrap()
}

fn rebuild_leader_and_isr(
    req: &LeaderAndIsrRequest,
    target: i32,
) -> (ControllerContext, RequestBatch) {
    let mut ctx = ControllerContext {
        epoch: req.controller_epoch,
        ..Default::default()
    };
    ctx.live_brokers
        .insert(target, broker(target, req.broker_epoch, "unused", 1, None));
    for l in &req.live_leaders {
        let b = broker(l.broker_id.0, 0, &l.host_name, l.port, None);
        ctx.live_brokers.entry(l.broker_id.0).or_insert(b);
        if l.broker_id.0 == target {
            ctx.live_brokers.insert(
                target,
                broker(target, req.broker_epoch, &l.host_name, l.port, None),
            );
        }
    }
    let mut batch = RequestBatch::default();
    // Below v2 the partitions are listed one by one, each with its topic's name.
    let ungrouped = req.ungrouped_partition_states.iter().map(|p| {
        let topic = p.topic_name.0.to_string();
        (topic, p)
    });
    let grouped = req.topic_states.iter().flat_map(|t| {
        let topic = t.topic_name.0.to_string();
        t.partition_states.iter().map(move |p| (topic.clone(), p))
    });
    for t in &req.topic_states {
        ctx.topic_ids.insert(t.topic_name.0.to_string(), t.topic_id);
    }
    {
        for (topic, p) in ungrouped.chain(grouped) {
            assert!(
                p.adding_replicas.is_empty() && p.removing_replicas.is_empty(),
                "no reassignment captured"
            );
            let tp = TopicPartition::new(topic.clone(), p.partition_index);
            ctx.assignments
                .entry(topic.clone())
                .or_default()
                .insert(p.partition_index, p.replicas.iter().map(|b| b.0).collect());
            let leadership = Leadership {
                leader_and_isr: LeaderAndIsr {
                    leader_epoch: p.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    leader_recovery_state: p.leader_recovery_state,
                    ..LeaderAndIsr::initial(p.leader.0, p.isr.iter().map(|b| b.0).collect())
                },
                controller_epoch: p.controller_epoch,
            };
            batch.add_leader_and_isr(&ctx, &[target], &tp, &leadership, p.is_new);
        }
    }
    (ctx, batch)
}

fn rebuild_update_metadata(
    req: &UpdateMetadataRequest,
    target: i32,
) -> (ControllerContext, RequestBatch) {
    let mut ctx = ControllerContext {
        epoch: req.controller_epoch,
        ..Default::default()
    };
    for b in &req.live_brokers {
        let e = &b.endpoints[0];
        assert_eq!(b.endpoints.len(), 1);
        let epoch = if b.id.0 == target {
            req.broker_epoch
        } else {
            0
        };
        ctx.live_brokers.insert(
            b.id.0,
            broker(
                b.id.0,
                epoch,
                &e.host,
                e.port,
                b.rack.as_ref().map(|r| r.to_string()),
            ),
        );
    }
    let mut partitions = Vec::new();
    // Below v5 the partitions are listed one by one, each with its topic's name.
    let ungrouped = req.ungrouped_partition_states.iter().map(|p| {
        let topic = p.topic_name.0.to_string();
        (topic, p)
    });
    let grouped = req.topic_states.iter().flat_map(|t| {
        let topic = t.topic_name.0.to_string();
        t.partition_states.iter().map(move |p| (topic.clone(), p))
    });
    for t in &req.topic_states {
        ctx.topic_ids.insert(t.topic_name.0.to_string(), t.topic_id);
    }
    {
        for (topic, p) in ungrouped.chain(grouped) {
            let tp = TopicPartition::new(topic.clone(), p.partition_index);
            ctx.assignments
                .entry(topic.clone())
                .or_default()
                .insert(p.partition_index, p.replicas.iter().map(|b| b.0).collect());
            for r in &p.offline_replicas {
                if ctx.live_brokers.contains_key(&r.0) {
                    ctx.offline_replicas
                        .entry(r.0)
                        .or_default()
                        .insert(tp.clone());
                }
            }
            if p.leader.0 == LEADER_DURING_DELETE {
                ctx.topics_to_delete.insert(topic.clone());
            }
            let l = LeaderAndIsr {
                leader_epoch: p.leader_epoch,
                partition_epoch: p.zk_version,
                ..LeaderAndIsr::initial(p.leader.0, p.isr.iter().map(|b| b.0).collect())
            };
            ctx.leadership.insert(
                tp.clone(),
                Leadership {
                    leader_and_isr: l,
                    controller_epoch: p.controller_epoch,
                },
            );
            partitions.push(tp);
        }
    }
    let mut batch = RequestBatch::default();
    batch.add_update_metadata(&ctx, &[target], &partitions);
    (ctx, batch)
}

fn rebuild_stop_replica(
    req: &StopReplicaRequest,
    target: i32,
) -> (ControllerContext, RequestBatch) {
    let mut ctx = ControllerContext {
        epoch: req.controller_epoch,
        ..Default::default()
    };
    ctx.live_brokers
        .insert(target, broker(target, req.broker_epoch, "unused", 1, None));
    let mut batch = RequestBatch::default();
    // (topic, partition, leader epoch, delete): from v3 each partition says, before one
    // flag says for all, and no leader epoch is sent (any will do).
    let mut states: Vec<(String, i32, i32, bool)> = Vec::new();
    for p in &req.ungrouped_partitions {
        states.push((
            p.topic_name.0.to_string(),
            p.partition_index,
            0,
            req.delete_partitions,
        ));
    }
    for t in &req.topics {
        for &p in &t.partition_indexes {
            states.push((t.name.0.to_string(), p, 0, req.delete_partitions));
        }
    }
    for t in &req.topic_states {
        for p in &t.partition_states {
            let state = (t.topic_name.0.to_string(), p.partition_index);
            states.push((state.0, state.1, p.leader_epoch, p.delete_partition));
        }
    }
    for (topic, partition, leader_epoch, delete) in states {
        let tp = TopicPartition::new(topic.clone(), partition);
        ctx.assignments
            .entry(topic.clone())
            .or_default()
            .insert(partition, vec![target]);
        if leader_epoch == EPOCH_DURING_DELETE {
            ctx.topics_to_delete.insert(topic.clone());
        } else {
            ctx.leadership.insert(
                tp.clone(),
                Leadership {
                    leader_and_isr: LeaderAndIsr {
                        leader_epoch,
                        partition_epoch: 0,
                        ..LeaderAndIsr::initial(target, vec![target])
                    },
                    controller_epoch: req.controller_epoch,
                },
            );
        }
        batch.add_stop_replica(&[target], &tp, delete);
    }
    (ctx, batch)
}

/// Topics, partitions and brokers in id order.
fn normalize(req: &mut RequestKind) {
    match req {
        RequestKind::LeaderAndIsr(r) => {
            r.topic_states
                .sort_by(|a, b| a.topic_name.0.cmp(&b.topic_name.0));
            for t in &mut r.topic_states {
                t.partition_states.sort_by_key(|p| p.partition_index);
            }
            r.live_leaders.sort_by_key(|l| l.broker_id.0);
            r.ungrouped_partition_states.sort_by(|a, b| {
                (&a.topic_name.0, a.partition_index).cmp(&(&b.topic_name.0, b.partition_index))
            });
        }
        RequestKind::UpdateMetadata(r) => {
            r.topic_states
                .sort_by(|a, b| a.topic_name.0.cmp(&b.topic_name.0));
            for t in &mut r.topic_states {
                t.partition_states.sort_by_key(|p| p.partition_index);
            }
            r.live_brokers.sort_by_key(|b| b.id.0);
            r.ungrouped_partition_states.sort_by(|a, b| {
                (&a.topic_name.0, a.partition_index).cmp(&(&b.topic_name.0, b.partition_index))
            });
        }
        RequestKind::StopReplica(r) => {
            r.topic_states
                .sort_by(|a, b| a.topic_name.0.cmp(&b.topic_name.0));
            for t in &mut r.topic_states {
                t.partition_states.sort_by_key(|p| p.partition_index);
            }
            r.topics.sort_by(|a, b| a.name.0.cmp(&b.name.0));
            for t in &mut r.topics {
                t.partition_indexes.sort();
            }
            r.ungrouped_partitions.sort_by(|a, b| {
                (&a.topic_name.0, a.partition_index).cmp(&(&b.topic_name.0, b.partition_index))
            });
        }
        _ => unreachable!(),
    }
}

/// The API key, version and body of a request skua's controller built.
fn built_request(request: ControlRequest) -> (ApiKey, i16, RequestKind) {
    match request {
        ControlRequest::LeaderAndIsr { request, version } => (
            ApiKey::LeaderAndIsr,
            version,
            RequestKind::LeaderAndIsr(request),
        ),
        ControlRequest::UpdateMetadata { request, version } => (
            ApiKey::UpdateMetadata,
            version,
            RequestKind::UpdateMetadata(request),
        ),
        ControlRequest::StopReplica {
            request, version, ..
        } => (
            ApiKey::StopReplica,
            version,
            RequestKind::StopReplica(request),
        ),
    }
}

fn frame(header: &RequestHeader, key: ApiKey, version: i16, body: &RequestKind) -> Vec<u8> {
    let mut out = BytesMut::new();
    header
        .encode(&mut out, key.request_header_version(version))
        .unwrap();
    body.encode(&mut out, version).unwrap();
    out.to_vec()
}

#[test]
fn controller_requests_match_kafkas_byte_for_byte() {
    let all = fixtures();
    assert!(all.len() > 30, "the capture has the controller's requests");
    let mut exact = 0;
    let mut kinds = BTreeSet::new();
    let mut versions = BTreeSet::new();
    for (key, version, protocol, path) in &all {
        let bytes = Bytes::from(std::fs::read(path).unwrap());
        let mut buf = bytes.clone();
        let header = RequestHeader::decode(&mut buf, key.request_header_version(*version)).unwrap();
        let kafka = RequestKind::decode(*key, &mut buf, *version).unwrap();
        let target = target_of(path);
        let (ctx, mut batch, controller_id) = match &kafka {
            RequestKind::LeaderAndIsr(r) => {
                assert_eq!(*version, protocol.leader_and_isr_request_version());
                let (c, b) = rebuild_leader_and_isr(r, target);
                (c, b, r.controller_id.0)
            }
            RequestKind::UpdateMetadata(r) => {
                assert_eq!(*version, protocol.update_metadata_request_version());
                let (c, b) = rebuild_update_metadata(r, target);
                (c, b, r.controller_id.0)
            }
            RequestKind::StopReplica(r) => {
                assert_eq!(*version, protocol.stop_replica_request_version());
                let (c, b) = rebuild_stop_replica(r, target);
                (c, b, r.controller_id.0)
            }
            _ => unreachable!(),
        };
        let built: Vec<RequestKind> = batch
            .build(&ctx, controller_id, LISTENER, *protocol)
            .into_iter()
            .filter(|(b, _)| *b == target)
            .map(|(_, r)| built_request(r))
            .filter(|(k, _, _)| k == key)
            .map(|(_, v, r)| {
                assert_eq!(v, *version);
                r
            })
            .collect();
        assert_eq!(
            built.len(),
            1,
            "{}: one request for broker {target}",
            path.display()
        );
        let mut ours = built.into_iter().next().unwrap();
        // Framed as skua's controller channel frames it.
        assert_eq!(
            header.client_id.as_deref(),
            Some(controller_id.to_string().as_str())
        );
        let framed = match &ours {
            RequestKind::LeaderAndIsr(r) => encode_request(
                r,
                *version,
                header.correlation_id,
                Some(&controller_id.to_string()),
            ),
            RequestKind::UpdateMetadata(r) => encode_request(
                r,
                *version,
                header.correlation_id,
                Some(&controller_id.to_string()),
            ),
            RequestKind::StopReplica(r) => encode_request(
                r,
                *version,
                header.correlation_id,
                Some(&controller_id.to_string()),
            ),
            _ => unreachable!(),
        }
        .unwrap();
        if framed[4..] == bytes[..] {
            exact += 1;
        }
        let mut theirs = kafka;
        normalize(&mut theirs);
        normalize(&mut ours);
        assert_eq!(
            frame(&header, *key, *version, &ours),
            frame(&header, *key, *version, &theirs),
            "{}: skua's request differs from Kafka's\nskua:  {ours:?}\nkafka: {theirs:?}",
            path.display()
        );
        kinds.insert(*key as i16);
        versions.insert((*key as i16, *version));
    }
    assert_eq!(
        kinds.len(),
        3,
        "LeaderAndIsr, UpdateMetadata and StopReplica all compared"
    );
    // LeaderAndIsr v0-7, UpdateMetadata v3-8 and StopReplica v0-4.
    assert_eq!(
        versions.len(),
        8 + 6 + 5,
        "every version a controller at 0.11.0 or later sends: {versions:?}"
    );
    eprintln!(
        "{} frames compared; {exact} identical as sent, all identical in id order",
        all.len()
    );
    assert!(exact > 0);
}

#[test]
fn broker_epochs_and_controller_epoch_go_where_kafka_puts_them() {
    // A controller at epoch 7 telling broker 2 (epoch 40) about partition t-0.
    let mut ctx = ControllerContext {
        epoch: 7,
        ..Default::default()
    };
    ctx.live_brokers.insert(1, broker(1, 30, "h1", 9091, None));
    ctx.live_brokers
        .insert(2, broker(2, 40, "h2", 9092, Some("r".into())));
    ctx.assignments
        .insert("t".into(), BTreeMap::from([(0, vec![1, 2])]));
    let tp = TopicPartition::new("t", 0);
    let l = Leadership {
        leader_and_isr: LeaderAndIsr::initial(1, vec![1, 2]),
        controller_epoch: 6,
    };
    ctx.leadership.insert(tp.clone(), l.clone());
    let mut batch = RequestBatch::default();
    batch.add_leader_and_isr(&ctx, &[2], &tp, &l, true);
    let requests = batch.build(&ctx, 1, LISTENER, MetadataVersion::LATEST);
    let mut seen = BTreeMap::new();
    for (b, r) in requests {
        match r {
            ControlRequest::LeaderAndIsr { request: r, .. } => {
                assert_eq!((b, r.controller_epoch, r.broker_epoch), (2, 7, 40));
                let p = &r.topic_states[0].partition_states[0];
                assert_eq!(p.controller_epoch, 6, "the epoch that wrote the leadership");
                assert!(p.is_new);
                assert_eq!(r.live_leaders.len(), 1);
                assert_eq!(r.live_leaders[0].host_name.as_str(), "h1");
            }
            ControlRequest::UpdateMetadata { request: r, .. } => {
                let expected = if b == 1 { 30 } else { 40 };
                assert_eq!(r.broker_epoch, expected, "each broker gets its own epoch");
                assert_eq!(r.live_brokers.len(), 2);
            }
            ControlRequest::StopReplica { .. } => panic!("no StopReplica asked"),
        }
        *seen.entry(b).or_insert(0) += 1;
    }
    assert_eq!(
        seen,
        BTreeMap::from([(1, 1), (2, 2)]),
        "LeaderAndIsr to 2, UpdateMetadata to both"
    );
}
