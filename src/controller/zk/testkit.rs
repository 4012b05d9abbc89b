//! A ZooKeeper-mode controller on an in-memory ensemble, for the state machines' unit
//! tests: brokers register with sessions of their own, the controller is the first of
//! them (its own session both registers it and runs its event loop, as a member's
//! does), and everything the controller sends is recorded in an outbox. Each call
//! settles: the controller processes every event its watches and answers queued.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::leader_and_isr_request::LeaderAndIsrPartitionState;
use kafka_protocol::messages::update_metadata_request::UpdateMetadataPartitionState;
use uuid::Uuid;

use super::broker::controlled_shutdown::ShutdownSettings;
use super::channel::{Outbox, Sent};
use super::event_loop::ControllerLoop;
use super::requests::ControlRequest;
use super::{registration, Settings, Shared};
use crate::clock::TokioClock;
use crate::config::inter_broker_protocol::MetadataVersion;
use crate::zk::memory::Ensemble;
use crate::zk::session::{ZkConfig, ZkSession};
use crate::zk::znodes::{self, paths, BrokerRegistration, EndPoint, LeaderIsrAndControllerEpoch};

/// A member's settings on `ensemble`: one PLAINTEXT listener on a port from its id,
/// Kafka's defaults otherwise, automatic leader rebalancing off.
pub fn settings(broker_id: i32, ensemble: &Ensemble) -> Settings {
    Settings {
        broker_id,
        zk: ZkConfig::in_memory(ensemble.clone(), Duration::from_secs(18)),
        endpoints: vec![endpoint(broker_id)],
        inter_broker_listener: "PLAINTEXT".into(),
        inter_broker_protocol: MetadataVersion::LATEST,
        rack: None,
        num_partitions: 1,
        default_replication_factor: 1,
        unclean_leader_election: false,
        delete_topic_enable: true,
        controller_socket_timeout: Duration::from_secs(30),
        admin_timeout: Duration::from_secs(30),
        shutdown: ShutdownSettings {
            enable: true,
            max_retries: 3,
            retry_backoff: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            outbound_tls: None,
            outbound_sasl: None,
        },
        auto_leader_rebalance: false,
        leader_imbalance_check_interval: Duration::from_secs(300),
        leader_imbalance_per_broker_percentage: 10,
        outbound_tls: None,
        outbound_sasl: None,
        password_encoder: None,
        password_encoder_old: None,
    }
}

fn endpoint(broker_id: i32) -> EndPoint {
    EndPoint {
        listener: "PLAINTEXT".into(),
        security_protocol: "PLAINTEXT".into(),
        host: "127.0.0.1".into(),
        port: 9000 + broker_id,
    }
}

/// `/brokers/ids/<id>` for `broker_id` on `session`; returns the broker epoch.
pub async fn register(session: &ZkSession, broker_id: i32) -> i64 {
    let r = BrokerRegistration::new(&[endpoint(broker_id)], None, 0);
    registration::register_broker(session, broker_id, &r, Duration::ZERO)
        .await
        .expect("registered")
}

/// Broker 1's shared state on a new in-memory ensemble: its session connected with
/// `session_timeout`, the top-level paths made, no event loop started.
pub async fn member_shared(session_timeout: Duration) -> (Ensemble, Arc<ZkSession>, Arc<Shared>) {
    let ensemble = Ensemble::new();
    let config = ZkConfig::in_memory(ensemble.clone(), session_timeout);
    let session = Arc::new(ZkSession::connect(&config).await.unwrap());
    registration::create_top_level_paths(&session)
        .await
        .unwrap();
    let shared = Arc::new(Shared::new(
        Arc::new(settings(1, &ensemble)),
        "test-cluster".into(),
        Some(session.clone()),
        TokioClock::new(1_700_000_000_000),
        None,
    ));
    (ensemble, session, shared)
}

pub struct Cluster {
    pub ensemble: Ensemble,
    pub outbox: Outbox,
    /// Each live broker's session; the controller's is the first broker's.
    pub sessions: BTreeMap<i32, Arc<ZkSession>>,
    pub l: ControllerLoop,
    /// A session of its own for what an administrator writes.
    pub admin: Arc<ZkSession>,
}

impl Cluster {
    /// `brokers` registered, the first elected controller with `tweak`ed settings.
    pub async fn start(brokers: &[i32], tweak: impl FnOnce(&mut Settings)) -> Cluster {
        let ensemble = Ensemble::new();
        let config = ZkConfig::in_memory(ensemble.clone(), Duration::from_secs(18));
        let admin = Arc::new(ZkSession::connect(&config).await.unwrap());
        registration::create_top_level_paths(&admin).await.unwrap();
        let mut sessions = BTreeMap::new();
        for &b in brokers {
            let s = Arc::new(ZkSession::connect(&config).await.unwrap());
            register(&s, b).await;
            sessions.insert(b, s);
        }
        let controller_id = brokers[0];
        let mut settings = settings(controller_id, &ensemble);
        tweak(&mut settings);
        let outbox = Outbox::default();
        let session = sessions[&controller_id].clone();
        let shared = Arc::new(Shared::new(
            Arc::new(settings),
            "test-cluster".into(),
            Some(session.clone()),
            TokioClock::new(1_700_000_000_000),
            Some(outbox.clone()),
        ));
        let l = ControllerLoop::new(session, shared.settings.clone(), shared);
        let mut c = Cluster {
            ensemble,
            outbox,
            sessions,
            l,
            admin,
        };
        c.l.start().await.unwrap();
        c.settle().await;
        assert!(c.l.is_active(), "the only candidate is elected");
        c
    }

    /// Processes what is queued until nothing is (watch tasks get to run in between).
    pub async fn settle(&mut self) {
        loop {
            for _ in 0..8 {
                tokio::task::yield_now().await;
            }
            let Some(event) = self.l.try_next_event() else {
                return;
            };
            if let Some(end) = self.l.handle(event).await {
                panic!("the controller's loop ended: {end}");
            }
        }
    }

    /// Writes `/brokers/topics/<topic>` as `AdminZkClient` does and lets the controller act.
    pub async fn create_topic(&mut self, topic: &str, assignment: &[(i32, &[i32])]) -> Uuid {
        let id = Uuid::new_v4();
        let partitions = assignment.iter().map(|(p, r)| (*p, r.to_vec())).collect();
        let a = znodes::TopicAssignment::new(crate::log::uuid_to_kafka_string(id), partitions);
        self.admin
            .create_recursive(&paths::topic(topic), &znodes::encode(&a))
            .await
            .unwrap();
        self.settle().await;
        id
    }

    /// The broker's session expires: its registration goes.
    pub async fn kill(&mut self, broker: i32) {
        let s = self.sessions.remove(&broker).expect("a live broker");
        self.ensemble.expire(s.session_id());
        self.settle().await;
    }

    /// The broker registers again, on a new session (a new broker epoch).
    pub async fn restart(&mut self, broker: i32) -> i64 {
        let config = ZkConfig::in_memory(self.ensemble.clone(), Duration::from_secs(18));
        let s = Arc::new(ZkSession::connect(&config).await.unwrap());
        let epoch = register(&s, broker).await;
        self.sessions.insert(broker, s);
        self.settle().await;
        epoch
    }

    /// A partition's `state` znode and its version.
    pub fn state(&self, topic: &str, partition: i32) -> Option<LeaderIsrAndControllerEpoch> {
        let data = self
            .ensemble
            .read(&paths::partition_state(topic, partition))?;
        Some(znodes::decode(&data).expect("a state znode Kafka can read"))
    }

    /// The requests sent since the last call.
    pub fn sent(&self) -> Vec<Sent> {
        self.outbox.take()
    }
}

/// The LeaderAndIsr partition states `sent` carried to `broker`, in order.
pub fn leader_and_isr_to(sent: &[Sent], broker: i32) -> Vec<LeaderAndIsrPartitionState> {
    sent.iter()
        .filter(|s| s.to == broker)
        .flat_map(|s| match &s.request {
            ControlRequest::LeaderAndIsr { request, .. } => {
                let grouped = request
                    .topic_states
                    .iter()
                    .flat_map(|t| t.partition_states.iter().cloned());
                request
                    .ungrouped_partition_states
                    .iter()
                    .cloned()
                    .chain(grouped)
                    .collect()
            }
            _ => Vec::new(),
        })
        .collect()
}

/// The UpdateMetadata partition states `sent` carried to `broker`, in order.
pub fn update_metadata_to(sent: &[Sent], broker: i32) -> Vec<UpdateMetadataPartitionState> {
    sent.iter()
        .filter(|s| s.to == broker)
        .flat_map(|s| match &s.request {
            ControlRequest::UpdateMetadata { request, .. } => {
                let grouped = request
                    .topic_states
                    .iter()
                    .flat_map(|t| t.partition_states.iter().cloned());
                request
                    .ungrouped_partition_states
                    .iter()
                    .cloned()
                    .chain(grouped)
                    .collect()
            }
            _ => Vec::new(),
        })
        .collect()
}

/// (topic, partition, delete) of every StopReplica `sent` carried to `broker`.
pub fn stop_replica_to(sent: &[Sent], broker: i32) -> Vec<(String, i32, bool)> {
    let mut out = Vec::new();
    for s in sent.iter().filter(|s| s.to == broker) {
        if let ControlRequest::StopReplica { request, .. } = &s.request {
            for t in &request.topic_states {
                for p in &t.partition_states {
                    out.push((
                        t.topic_name.0.to_string(),
                        p.partition_index,
                        p.delete_partition,
                    ));
                }
            }
        }
    }
    out
}

impl Cluster {
    /// Every StopReplica with deletion in `sent` answered as done, as a broker would.
    pub async fn answer_deletions(&mut self, sent: &[Sent]) {
        use kafka_protocol::messages::stop_replica_response::StopReplicaPartitionError;
        use kafka_protocol::messages::{StopReplicaResponse, TopicName};
        for s in sent {
            let ControlRequest::StopReplica { deleting, .. } = &s.request else {
                continue;
            };
            if deleting.is_empty() {
                continue;
            }
            let errors = deleting
                .iter()
                .map(|tp| {
                    StopReplicaPartitionError::default()
                        .with_topic_name(TopicName(tp.topic.clone().into()))
                        .with_partition_index(tp.partition)
                })
                .collect();
            let _ = s
                .events
                .send(super::event_loop::Event::StopReplicaResponse {
                    broker: s.to,
                    response: StopReplicaResponse::default().with_partition_errors(errors),
                    deleting: deleting.clone(),
                });
        }
        self.settle().await;
    }

    /// AlterPartition (v3) from `broker` for `topic`-`partition`: `isr` at the leader
    /// and partition epochs ZooKeeper holds now; the answer's error code for the partition.
    pub async fn alter_isr(
        &mut self,
        broker: i32,
        topic: &str,
        partition: i32,
        isr: &[i32],
    ) -> i16 {
        let tp = super::context::TopicPartition::new(topic, partition);
        let l = self.l.ctx.leadership[&tp].leader_and_isr.clone();
        self.alter_isr_at(broker, &tp, l.leader_epoch, l.partition_epoch, isr)
            .await
    }

    /// AlterPartition (v3) from `broker` at the epochs given.
    pub async fn alter_isr_at(
        &mut self,
        broker: i32,
        tp: &super::context::TopicPartition,
        leader_epoch: i32,
        partition_epoch: i32,
        isr: &[i32],
    ) -> i16 {
        use kafka_protocol::messages::alter_partition_request::{
            BrokerState, PartitionData, TopicData,
        };
        use kafka_protocol::messages::{AlterPartitionRequest, BrokerId};
        let (topic, partition) = (tp.topic.as_str(), tp.partition);
        let epochs = |b: i32| self.l.ctx.live_brokers.get(&b).map_or(-1, |x| x.epoch);
        let p = PartitionData::default()
            .with_partition_index(partition)
            .with_leader_epoch(leader_epoch)
            .with_partition_epoch(partition_epoch)
            .with_new_isr_with_epochs(
                isr.iter()
                    .map(|&b| {
                        BrokerState::default()
                            .with_broker_id(BrokerId(b))
                            .with_broker_epoch(epochs(b))
                    })
                    .collect(),
            );
        let request = AlterPartitionRequest::default()
            .with_broker_id(BrokerId(broker))
            .with_broker_epoch(epochs(broker))
            .with_topics(vec![TopicData::default()
                .with_topic_id(self.l.ctx.topic_ids[topic])
                .with_partitions(vec![p])]);
        let (reply, answer) = tokio::sync::oneshot::channel();
        let event = super::event_loop::Event::AlterPartition {
            request,
            version: 3,
            reply,
        };
        assert!(self.l.handle(event).await.is_none());
        self.settle().await;
        let response = answer.await.expect("answered");
        match response.topics.first().and_then(|t| t.partitions.first()) {
            Some(p) => p.error_code,
            None => response.error_code,
        }
    }
}
