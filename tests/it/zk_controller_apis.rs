//! The broker → controller APIs of a skua controller (AlterPartition, ControlledShutdown,
//! AllocateProducerIds) with Kafka's error codes, against a real ZooKeeper (`scripts/zk`).
//!
//! skua runs in-process with `zookeeper.connect` and wins the election. Brokers 2 and 3
//! are registered in ZooKeeper by the test itself (Kafka's v5 JSON, their epochs the
//! znodes' czxids), with a small server behind each that acknowledges whatever the
//! controller sends and records it. Skipped, with a message, only without java.

use crate::common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_request::{BrokerState, PartitionData, TopicData};
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::leader_and_isr_response::{
    LeaderAndIsrPartitionError, LeaderAndIsrTopicError,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use common::zookeeper::ZooKeeper;
use skua::client::codec;
use skua::zk::session::{ZkConfig, ZkSession};
use skua::zk::znodes::{
    self, paths, BrokerRegistration, EndPoint, LeaderIsrAndControllerEpoch, ProducerIdBlock,
};

/// What a fake broker received: (api key, controller epoch, broker epoch).
type Received = Arc<Mutex<Vec<(i16, i32, i64)>>>;

/// A broker that answers the controller's requests with success.
async fn fake_broker() -> (SocketAddr, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received: Received = Arc::default();
    let log = received.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let (mut r, mut w) = stream.into_split();
                while let Ok(Some(mut frame)) = codec::read_frame(&mut r, 1 << 20).await {
                    let key = i16::from_be_bytes([frame[0], frame[1]]);
                    let version = i16::from_be_bytes([frame[2], frame[3]]);
                    let api = ApiKey::try_from(key).unwrap();
                    let header =
                        RequestHeader::decode(&mut frame, api.request_header_version(version))
                            .unwrap();
                    let body = RequestKind::decode(api, &mut frame, version).unwrap();
                    let response = match body {
                        RequestKind::ApiVersions(_) => ResponseKind::ApiVersions(
                            ApiVersionsResponse::default().with_api_keys(
                                [(4, 7), (5, 4), (6, 8), (18, 3)]
                                    .into_iter()
                                    .map(|(k, max)| {
                                        api_versions_response::ApiVersion::default()
                                            .with_api_key(k)
                                            .with_max_version(max)
                                    })
                                    .collect(),
                            ),
                        ),
                        RequestKind::LeaderAndIsr(r) => {
                            log.lock()
                                .unwrap()
                                .push((key, r.controller_epoch, r.broker_epoch));
                            ResponseKind::LeaderAndIsr(
                                LeaderAndIsrResponse::default().with_topics(
                                    r.topic_states
                                        .iter()
                                        .map(|t| {
                                            LeaderAndIsrTopicError::default()
                                                .with_topic_id(t.topic_id)
                                                .with_partition_errors(
                                                    t.partition_states
                                                        .iter()
                                                        .map(|p| {
                                                            LeaderAndIsrPartitionError::default()
                                                                .with_partition_index(
                                                                    p.partition_index,
                                                                )
                                                        })
                                                        .collect(),
                                                )
                                        })
                                        .collect(),
                                ),
                            )
                        }
                        RequestKind::UpdateMetadata(r) => {
                            log.lock()
                                .unwrap()
                                .push((key, r.controller_epoch, r.broker_epoch));
                            ResponseKind::UpdateMetadata(UpdateMetadataResponse::default())
                        }
                        RequestKind::StopReplica(r) => {
                            log.lock()
                                .unwrap()
                                .push((key, r.controller_epoch, r.broker_epoch));
                            ResponseKind::StopReplica(StopReplicaResponse::default())
                        }
                        other => panic!("unexpected request {other:?}"),
                    };
                    let mut out = BytesMut::new();
                    ResponseHeader::default()
                        .with_correlation_id(header.correlation_id)
                        .encode(&mut out, api.response_header_version(version))
                        .unwrap();
                    response.encode(&mut out, version).unwrap();
                    let mut framed = (out.len() as i32).to_be_bytes().to_vec();
                    framed.extend_from_slice(&out);
                    if w.write_all(&framed).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, received)
}

/// Registers broker `id` at `addr`; returns its epoch.
async fn register(s: &ZkSession, id: i32, addr: SocketAddr) -> i64 {
    let endpoint = EndPoint {
        listener: "PLAINTEXT".into(),
        security_protocol: "PLAINTEXT".into(),
        host: "127.0.0.1".into(),
        port: addr.port() as i32,
    };
    let data = znodes::encode(&BrokerRegistration::new(&[endpoint], None, 1));
    s.register_ephemeral(&paths::broker(id), &data)
        .await
        .unwrap()
        .czxid
}

fn isr(ids: &[i32], epochs: &[(i32, i64)]) -> Vec<BrokerState> {
    ids.iter()
        .map(|&b| {
            let e = epochs
                .iter()
                .find(|(id, _)| *id == b)
                .map_or(-1, |(_, e)| *e);
            BrokerState::default()
                .with_broker_id(BrokerId(b))
                .with_broker_epoch(e)
        })
        .collect()
}

async fn eventually<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    mut f: impl FnMut() -> F,
) -> T {
    for _ in 0..200 {
        if let Some(v) = f().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what} within 20 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_to_controller_apis_answer_with_kafkas_errors() {
    let Some(zk) = ZooKeeper::start() else { return };
    let chroot = format!("{}/apis", zk.connect);
    let session =
        ZkSession::connect(&ZkConfig::new(&chroot, Duration::from_secs(10), None).unwrap())
            .await
            .unwrap();

    // skua first: it creates the paths and wins the election.
    let dir = tempfile::tempdir().unwrap();
    let broker = common::TestBroker::start(
        dir.path(),
        &[
            ("zookeeper.connect", &chroot),
            ("zookeeper.session.timeout.ms", "6000"),
        ],
    )
    .await;
    eventually("skua is the controller", || async {
        let (data, _) = session.get(paths::CONTROLLER).await.unwrap()?;
        let c: znodes::ControllerRegistration = znodes::decode(&data).ok()?;
        (c.brokerid == 1).then_some(())
    })
    .await;

    // ApiVersions advertises the cluster APIs in ZooKeeper mode.
    let mut client = broker.client().await;
    let versions = client.send(&ApiVersionsRequest::default(), 3).await;
    for (key, max) in [(56, 3), (7, 3), (67, 0), (4, 7), (5, 4), (6, 8)] {
        assert!(
            versions
                .api_keys
                .iter()
                .any(|k| k.api_key == key && k.max_version == max),
            "api {key} advertised up to v{max}"
        );
    }

    let (addr2, got2) = fake_broker().await;
    let (addr3, _got3) = fake_broker().await;
    let e2 = register(&session, 2, addr2).await;
    let e3 = register(&session, 3, addr3).await;
    let epochs = [(2, e2), (3, e3)];

    // A topic on brokers 2 and 3 (partition 0 led by 2, partition 1 by 2).
    let create = CreateTopicsRequest::default()
        .with_timeout_ms(30000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(
                (0..2)
                    .map(|p| {
                        CreatableReplicaAssignment::default()
                            .with_partition_index(p)
                            .with_broker_ids(vec![BrokerId(2), BrokerId(3)])
                    })
                    .collect(),
            )]);
    let created = eventually("the topic is created", || {
        let create = create.clone();
        let addr = broker.addr;
        async move {
            let mut c = common::Client::connect(addr).await;
            let r = c.send(&create, 7).await;
            (r.topics[0].error_code == 0).then_some(r)
        }
    })
    .await;
    let topic_id = created.topics[0].topic_id;
    assert_eq!(created.topics[0].num_partitions, 2);
    eventually("broker 2 is told its leadership", || async {
        got2.lock()
            .unwrap()
            .iter()
            .any(|(k, _, e)| *k == 4 && *e == e2)
            .then_some(())
    })
    .await;
    assert!(
        got2.lock()
            .unwrap()
            .iter()
            .all(|(_, ce, e)| *ce == 1 && *e == e2),
        "every request carries controller epoch 1 and broker 2's epoch: {:?}",
        got2.lock().unwrap()
    );

    // A topic written straight into ZooKeeper (as another admin would) is picked up,
    // its config overrides with it.
    let config =
        znodes::EntityConfig::new([("retention.ms".to_string(), "1234".to_string())].into());
    session
        .create_recursive("/config/topics/outside", &znodes::encode(&config))
        .await
        .unwrap();
    let assignment = znodes::TopicAssignment::new(
        skua::log::uuid_to_kafka_string(uuid::Uuid::new_v4()),
        [(0, vec![3, 2])].into(),
    );
    session
        .create_recursive(&paths::topic("outside"), &znodes::encode(&assignment))
        .await
        .unwrap();
    let outside = eventually("the outside topic has a leader", || async {
        broker
            .broker
            .controller
            .topic("outside")
            .filter(|t| t.partitions[0].state.leader == 3)
    })
    .await;
    assert_eq!(
        outside.configs.get("retention.ms").map(String::as_str),
        Some("1234")
    );

    let alter = |broker_epoch: i64,
                 leader_epoch: i32,
                 partition_epoch: i32,
                 new_isr: &[i32],
                 id: uuid::Uuid| {
        AlterPartitionRequest::default()
            .with_broker_id(BrokerId(2))
            .with_broker_epoch(broker_epoch)
            .with_topics(vec![TopicData::default()
                .with_topic_id(id)
                .with_partitions(vec![PartitionData::default()
                    .with_partition_index(0)
                    .with_leader_epoch(leader_epoch)
                    .with_partition_epoch(partition_epoch)
                    .with_new_isr_with_epochs(isr(new_isr, &epochs))])])
    };
    let partition_error = |r: &AlterPartitionResponse| r.topics[0].partitions[0].error_code;

    // Shrink to [2]: accepted, partition epoch 0 → 1, written to the state znode.
    let r = client.send(&alter(e2, 0, 0, &[2], topic_id), 3).await;
    assert_eq!((r.error_code, partition_error(&r)), (0, 0), "{r:?}");
    let p = &r.topics[0].partitions[0];
    assert_eq!(
        (p.leader_id.0, p.leader_epoch, p.partition_epoch),
        (2, 0, 1)
    );
    assert_eq!(p.isr, vec![BrokerId(2)]);
    let (data, stat) = session
        .get(&paths::partition_state("t", 0))
        .await
        .unwrap()
        .unwrap();
    let state: LeaderIsrAndControllerEpoch = znodes::decode(&data).unwrap();
    assert_eq!((state.isr.clone(), stat.version), (vec![2], 1));

    // The same request again: answered with the current state, not refused.
    let r = client.send(&alter(e2, 0, 0, &[2], topic_id), 3).await;
    assert_eq!(partition_error(&r), 0);
    assert_eq!(r.topics[0].partitions[0].partition_epoch, 1);
    // A different ISR from the stale partition epoch.
    let r = client.send(&alter(e2, 0, 0, &[2, 3], topic_id), 3).await;
    assert_eq!(
        partition_error(&r),
        ResponseError::InvalidUpdateVersion.code()
    );
    // A newer leader epoch than the controller knows: maybe a newer controller.
    let r = client.send(&alter(e2, 5, 1, &[2, 3], topic_id), 3).await;
    assert_eq!(partition_error(&r), ResponseError::NotController.code());
    // A replica that is not alive.
    let r = client.send(&alter(e2, 0, 1, &[2, 4], topic_id), 3).await;
    assert_eq!(partition_error(&r), ResponseError::IneligibleReplica.code());
    // Broker 2's registration is older than the request claims.
    let r = client
        .send(&alter(e2 + 1000, 0, 1, &[2, 3], topic_id), 3)
        .await;
    assert_eq!(r.error_code, ResponseError::StaleBrokerEpoch.code());
    let r = client
        .send(&alter(e2, 0, 1, &[2, 3], uuid::Uuid::new_v4()), 3)
        .await;
    assert_eq!(partition_error(&r), ResponseError::UnknownTopicId.code());
    // Growing back, at the current epochs.
    let r = client.send(&alter(e2, 0, 1, &[2, 3], topic_id), 3).await;
    assert_eq!(partition_error(&r), 0);
    assert_eq!(r.topics[0].partitions[0].partition_epoch, 2);
    // An older leader epoch once the controller moved leadership on (below).

    // Producer ids: blocks of 1000 claimed in /latest_producer_id_block.
    let ids = |id: i32, epoch: i64| {
        AllocateProducerIdsRequest::default()
            .with_broker_id(BrokerId(id))
            .with_broker_epoch(epoch)
    };
    let a = client.send(&ids(2, e2), 0).await;
    assert_eq!((a.error_code, a.producer_id_len), (0, 1000));
    let b = client.send(&ids(3, e3), 0).await;
    assert_eq!(b.producer_id_start.0, a.producer_id_start.0 + 1000);
    let (data, _) = session
        .get(paths::LATEST_PRODUCER_ID_BLOCK)
        .await
        .unwrap()
        .unwrap();
    let block: ProducerIdBlock = znodes::decode(&data).unwrap();
    assert_eq!(
        (block.broker, block.range()),
        (
            3,
            Some((b.producer_id_start.0, b.producer_id_start.0 + 999))
        )
    );
    assert_eq!(
        client.send(&ids(3, e3 - 1), 0).await.error_code,
        ResponseError::StaleBrokerEpoch.code()
    );
    assert_eq!(
        client.send(&ids(9, 1), 0).await.error_code,
        ResponseError::BrokerIdNotRegistered.code()
    );

    // Controlled shutdown of broker 2: both its leaderships move to broker 3.
    let shutdown = |epoch: i64| {
        ControlledShutdownRequest::default()
            .with_broker_id(BrokerId(2))
            .with_broker_epoch(epoch)
    };
    assert_eq!(
        client.send(&shutdown(e2 - 1), 3).await.error_code,
        ResponseError::StaleBrokerEpoch.code()
    );
    let r = client.send(&shutdown(e2), 3).await;
    assert_eq!(r.error_code, 0);
    assert!(r.remaining_partitions.is_empty(), "{r:?}");
    for p in 0..2 {
        let (data, _) = session
            .get(&paths::partition_state("t", p))
            .await
            .unwrap()
            .unwrap();
        let state: LeaderIsrAndControllerEpoch = znodes::decode(&data).unwrap();
        assert_eq!(
            (state.leader, state.isr.clone()),
            (3, vec![3]),
            "partition {p}"
        );
    }
    // Broker 2, no longer leader at epoch 0, is fenced.
    let r = client.send(&alter(e2, 0, 2, &[2, 3], topic_id), 3).await;
    assert_eq!(partition_error(&r), ResponseError::FencedLeaderEpoch.code());

    // /feature as a Kafka 3.9 controller leaves it.
    let (data, _) = session.get(paths::FEATURE).await.unwrap().unwrap();
    assert_eq!(data, br#"{"features":{},"version":2,"status":1}"#);

    // Broker 2 re-registers in place at another address (same session, same epoch):
    // the controller's requests follow it, and every broker is told.
    let (addr2b, got2b) = fake_broker().await;
    let endpoint = EndPoint {
        listener: "PLAINTEXT".into(),
        security_protocol: "PLAINTEXT".into(),
        host: "127.0.0.1".into(),
        port: addr2b.port() as i32,
    };
    let data = znodes::encode(&BrokerRegistration::new(&[endpoint], None, 2));
    session.set(&paths::broker(2), &data, None).await.unwrap();
    eventually("broker 2's new address gets UpdateMetadata", || async {
        got2b
            .lock()
            .unwrap()
            .iter()
            .any(|(k, _, e)| *k == 6 && *e == e2)
            .then_some(())
    })
    .await;

    // Fencing: another controller's election moves /controller_epoch on. skua's next
    // write (broker 3 leaving the ISR when its registration goes) fails whole, skua
    // resigns, and the partition states stay as they were.
    let before: Vec<_> = {
        let mut v = Vec::new();
        for p in 0..2 {
            v.push(
                session
                    .get(&paths::partition_state("t", p))
                    .await
                    .unwrap()
                    .unwrap(),
            );
        }
        v
    };
    session
        .set(paths::CONTROLLER_EPOCH, b"99", None)
        .await
        .unwrap();
    session.delete(&paths::broker(3), None).await.unwrap();
    eventually("skua resigned", || async {
        let mut c = common::Client::connect(broker.addr).await;
        let r = c.send(&create, 7).await;
        (r.topics[0].error_code == ResponseError::NotController.code()).then_some(())
    })
    .await;
    for p in 0..2 {
        let now = session
            .get(&paths::partition_state("t", p))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            now, before[p as usize],
            "partition {p} untouched by a fenced controller"
        );
    }

    // A clean stop closes the session: the registration and /controller go at once,
    // not a session timeout (6 s) later.
    drop(client);
    let stopped = std::time::Instant::now();
    broker.stop().await;
    eventually("skua's registration and controllership gone", || async {
        let gone = session.get(&paths::broker(1)).await.unwrap().is_none()
            && session.get(paths::CONTROLLER).await.unwrap().is_none();
        gone.then_some(())
    })
    .await;
    assert!(
        stopped.elapsed() < Duration::from_secs(3),
        "{:?}",
        stopped.elapsed()
    );
}

/// While no producer id block can be claimed (here `/latest_producer_id_block` holds what
/// no broker can read), InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS, which
/// producers retry, as a Kafka 3.9 broker does while it holds no block; the retry once
/// the znode is readable again gets the first id of the next block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_producer_id_is_retriable_while_no_block_can_be_claimed() {
    let Some(zk) = ZooKeeper::start() else { return };
    let chroot = format!("{}/producer-ids", zk.connect);
    let session =
        ZkSession::connect(&ZkConfig::new(&chroot, Duration::from_secs(10), None).unwrap())
            .await
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let broker = common::TestBroker::start(
        dir.path(),
        &[
            ("zookeeper.connect", &chroot),
            ("zookeeper.session.timeout.ms", "6000"),
        ],
    )
    .await;
    eventually("skua is registered", || async {
        session.get(&paths::broker(1)).await.unwrap().map(|_| ())
    })
    .await;
    let write_block = |data: Vec<u8>| {
        let session = &session;
        async move {
            match session.get(paths::LATEST_PRODUCER_ID_BLOCK).await.unwrap() {
                Some(_) => session
                    .set(paths::LATEST_PRODUCER_ID_BLOCK, &data, None)
                    .await
                    .unwrap(),
                None => session
                    .create_recursive(paths::LATEST_PRODUCER_ID_BLOCK, &data)
                    .await
                    .unwrap(),
            };
        }
    };

    write_block(b"not a block".to_vec()).await;
    let mut client = broker.client().await;
    let init = InitProducerIdRequest::default().with_transaction_timeout_ms(60_000);
    let r = client.send(&init, 4).await;
    assert_eq!(
        (r.error_code, r.producer_id.0, r.producer_epoch),
        (ResponseError::CoordinatorLoadInProgress.code(), -1, -1)
    );

    write_block(znodes::encode(&ProducerIdBlock::new(2, 0, 1000))).await;
    let r = client.send(&init, 4).await;
    assert_eq!(
        (r.error_code, r.producer_id.0, r.producer_epoch),
        (0, 1000, 0)
    );
    let r = client.send(&init, 4).await;
    assert_eq!((r.error_code, r.producer_id.0), (0, 1001));
    drop(client);
    broker.stop().await;
}
