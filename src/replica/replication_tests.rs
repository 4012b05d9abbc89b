//! Replication between two replica managers in one process: broker 1 and broker 2, each
//! with its own log dir, roles given by metadata deltas as a controller would announce
//! them, the follower's fetcher talking to the other manager's partitions through an
//! in-process endpoint (the leader's side of a follower fetch, as the Fetch handler
//! runs it), and ISR changes answered by a fake controller.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{
    EpochEndOffset, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{
    AlterPartitionRequest, AlterPartitionResponse, FetchRequest, FetchResponse,
};
use parking_lot::Mutex;
use uuid::Uuid;

use super::delayed_fetch::{self, FetchAttempt};
use super::fetcher::endpoint::{EndpointFactory, EpochEnd, EpochQuery, LeaderEndpoint};
use super::isr::ControllerChannel;
use super::*;
use crate::client::ClientError;
use crate::controller::delta::{MetadataDelta, MetadataListener, TopicDelta};
use crate::controller::image::MetadataImage;
use crate::controller::{BrokerInfo, LeaderAndIsr, PartitionAssignment, PartitionInfo, TopicInfo};
use crate::log::test_util::batch_bytes;
use crate::log::{now_ms, DirLock, LogConfig, LogManager, TopicPartition};

const TOPIC_ID: u128 = 77;

/// The brokers of the test cluster, for the endpoints to reach.
#[derive(Default)]
struct Brokers {
    managers: Mutex<HashMap<i32, Weak<ReplicaManager>>>,
    /// Brokers whose fetch answers fail as a lost connection would.
    unreachable: Mutex<Vec<i32>>,
    /// The Fetch version the leaders speak (17 when unset); below 12 followers truncate
    /// with OffsetForLeaderEpoch.
    fetch_version: Mutex<Option<i16>>,
    /// Every OffsetForLeaderEpoch partition asked, in order.
    epoch_queries: Mutex<Vec<EpochQuery>>,
}

impl Brokers {
    fn fetch_version(&self) -> i16 {
        self.fetch_version.lock().unwrap_or(17)
    }
}

struct LocalLeader {
    id: i32,
    brokers: Arc<Brokers>,
}

impl LocalLeader {
    fn manager(&self) -> Result<Arc<ReplicaManager>, ClientError> {
        if self.brokers.unreachable.lock().contains(&self.id) {
            return Err(ClientError::Disconnected(format!(
                "broker {} is down",
                self.id
            )));
        }
        self.brokers
            .managers
            .lock()
            .get(&self.id)
            .and_then(Weak::upgrade)
            .ok_or_else(|| ClientError::Disconnected("gone".into()))
    }
}

/// The leader's side of one partition of a follower's fetch, as the Fetch handler runs
/// it: epoch check, diverging epoch, then the records up to the log end.
fn answer(
    p: &Arc<Partition>,
    params: &FetchParams,
    fp: &kafka_protocol::messages::fetch_request::FetchPartition,
) -> PartitionData {
    let base = PartitionData::default().with_partition_index(fp.partition);
    if let Err(e) = p.check_fetch(fp.current_leader_epoch, params.replica_id) {
        return base.with_error_code(e.code());
    }
    let base = base
        .with_high_watermark(p.high_watermark())
        .with_log_start_offset(p.log_start_offset());
    match p.diverging_epoch(fp.last_fetched_epoch, fp.fetch_offset) {
        Ok(None) => {}
        Ok(Some((epoch, end_offset))) => {
            return base.with_diverging_epoch(
                EpochEndOffset::default()
                    .with_epoch(epoch)
                    .with_end_offset(end_offset),
            )
        }
        Err(e) => return base.with_error_code(e.code()),
    }
    let max = usize::try_from(fp.partition_max_bytes).unwrap_or(0);
    match p.fetch_records(params, fp.fetch_offset, max, true, fp.log_start_offset) {
        Ok(data) => {
            let records = data.records.map(|s| s.read().unwrap()).unwrap_or_default();
            base.with_high_watermark(p.high_watermark())
                .with_records(Some(records))
        }
        Err(e) => base.with_error_code(crate::error::ApiError::from(e).code()),
    }
}

#[async_trait]
impl LeaderEndpoint for LocalLeader {
    async fn fetch_version(&self) -> Result<i16, ClientError> {
        Ok(self.brokers.fetch_version())
    }

    fn is_offset_for_leader_epoch_supported(&self) -> bool {
        true
    }

    async fn fetch_epoch_end_offsets(
        &self,
        _replica_id: i32,
        partitions: &[EpochQuery],
    ) -> Result<Vec<EpochEnd>, ClientError> {
        let m = self.manager()?;
        self.brokers
            .epoch_queries
            .lock()
            .extend(partitions.iter().cloned());
        Ok(partitions
            .iter()
            .map(|q| {
                let (error_code, (leader_epoch, end_offset)) =
                    match m.leader(&q.tp, q.current_leader_epoch) {
                        Err(e) => (e.code(), (-1, -1)),
                        Ok(p) => (
                            0,
                            p.end_offset_for_epoch(q.leader_epoch).unwrap_or((-1, -1)),
                        ),
                    };
                EpochEnd {
                    tp: q.tp.clone(),
                    error_code,
                    leader_epoch,
                    end_offset,
                }
            })
            .collect())
    }

    async fn fetch(&self, req: &FetchRequest, version: i16) -> Result<FetchResponse, ClientError> {
        assert_eq!(version, self.brokers.fetch_version());
        let (replica_id, replica_epoch) = match version >= 15 {
            true => {
                assert_eq!(req.replica_id.0, -1, "v15+: the id is in replica_state");
                (
                    req.replica_state.replica_id.0,
                    req.replica_state.replica_epoch,
                )
            }
            false => (req.replica_id.0, -1),
        };
        if version < 12 {
            let named = req.topics.iter().flat_map(|t| &t.partitions);
            assert!(named.clone().all(|p| p.last_fetched_epoch == -1));
        }
        let m = self.manager()?;
        let params = FetchParams::new(
            replica_id,
            Duration::from_millis(req.max_wait_ms as u64),
            req.min_bytes as usize,
            req.max_bytes as usize,
            false,
        )
        .with_replica_epoch(replica_epoch);
        let mut asked = Vec::new();
        for t in &req.topics {
            for fp in &t.partitions {
                // Below v13 topics are named, from v13 by id.
                let p = m
                    .partition("t", fp.partition)
                    .filter(|p| match version >= 13 {
                        true => p.topic_id == t.topic_id,
                        false => t.topic.0.as_str() == "t",
                    });
                asked.push((t.topic_id, fp.clone(), p));
            }
        }
        let partitions: Vec<Arc<Partition>> =
            asked.iter().filter_map(|(_, _, p)| p.clone()).collect();
        let (_stop, stopping) = tokio::sync::watch::channel(false);
        let responses = delayed_fetch::complete(&params, &partitions, stopping, || {
            let mut bytes = 0;
            let mut errored = false;
            let mut responses = Vec::new();
            for (topic_id, fp, p) in &asked {
                let data = match p {
                    Some(p) => answer(p, &params, fp),
                    None => PartitionData::default()
                        .with_partition_index(fp.partition)
                        .with_error_code(ResponseError::UnknownTopicId.code()),
                };
                bytes += data.records.as_ref().map_or(0, Bytes::len);
                errored |= data.error_code != 0 || data.diverging_epoch.epoch >= 0;
                // Named both ways: below v13 the follower reads the name.
                responses.push(
                    FetchableTopicResponse::default()
                        .with_topic(kafka_protocol::messages::TopicName("t".into()))
                        .with_topic_id(*topic_id)
                        .with_partitions(vec![data]),
                );
            }
            FetchAttempt {
                response: responses,
                bytes,
                errored,
            }
        })
        .await;
        Ok(FetchResponse::default().with_responses(responses))
    }

    async fn list_offset(
        &self,
        tp: &TopicPartition,
        _replica_id: i32,
        current_leader_epoch: i32,
        timestamp: i64,
    ) -> Result<Result<i64, i16>, ClientError> {
        let m = self.manager()?;
        Ok(match m.leader(tp, current_leader_epoch) {
            Err(e) => Err(e.code()),
            Ok(p) => match p.fetch_offset_for_timestamp(timestamp, FetchIsolation::LogEnd) {
                Ok(found) => Ok(found.map_or(-1, |f| f.offset)),
                Err(e) => Err(e.code()),
            },
        })
    }
}

struct LocalEndpoints(Arc<Brokers>);

impl EndpointFactory for LocalEndpoints {
    fn connect(&self, broker_id: i32, _: SocketAddr, _: usize) -> Arc<dyn LeaderEndpoint> {
        Arc::new(LocalLeader {
            id: broker_id,
            brokers: self.0.clone(),
        })
    }
}

/// A controller that accepts every ISR change (partition epoch + 1), or refuses them all
/// with `refuse`.
#[derive(Default)]
struct FakeController {
    refuse: Mutex<Option<ResponseError>>,
    requests: Mutex<Vec<AlterPartitionRequest>>,
}

#[async_trait]
impl ControllerChannel for FakeController {
    async fn alter_partition(
        &self,
        max_version: i16,
        build: &(dyn Fn(i16) -> AlterPartitionRequest + Sync),
    ) -> Result<(i16, AlterPartitionResponse), String> {
        use kafka_protocol::messages::alter_partition_response::{PartitionData, TopicData};
        assert_eq!(max_version, 3, "the test topic has an id");
        let req = build(3);
        self.requests.lock().push(req.clone());
        let refuse = *self.refuse.lock();
        let topics = req
            .topics
            .iter()
            .map(|t| {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| match refuse {
                        Some(e) => PartitionData::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(e.code()),
                        None => PartitionData::default()
                            .with_partition_index(p.partition_index)
                            .with_leader_id(req.broker_id)
                            .with_leader_epoch(p.leader_epoch)
                            .with_partition_epoch(p.partition_epoch + 1)
                            .with_isr(p.new_isr_with_epochs.iter().map(|b| b.broker_id).collect()),
                    })
                    .collect();
                TopicData::default()
                    .with_topic_id(t.topic_id)
                    .with_partitions(partitions)
            })
            .collect();
        Ok((3, AlterPartitionResponse::default().with_topics(topics)))
    }
}

struct Cluster {
    brokers: Arc<Brokers>,
    controller: Arc<FakeController>,
    managers: HashMap<i32, Arc<ReplicaManager>>,
    _dirs: Vec<tempfile::TempDir>,
}

impl Cluster {
    fn new(ids: &[i32]) -> Cluster {
        let brokers = Arc::new(Brokers::default());
        let controller = Arc::new(FakeController::default());
        let mut managers = HashMap::new();
        let mut dirs = Vec::new();
        let infos: Vec<BrokerInfo> = ids
            .iter()
            .map(|&id| BrokerInfo {
                id,
                host: "127.0.0.1".into(),
                port: 9000 + id,
                rack: None,
            })
            .collect();
        for &id in ids {
            let root = tempfile::tempdir().unwrap();
            let dir = root.path().to_path_buf();
            let lock = DirLock::acquire(&dir).unwrap();
            let logs = LogManager::startup(
                vec![(dir, lock)],
                |_: &TopicPartition, _: Option<Uuid>| true,
                |_| LogConfig::default(),
                60_000,
            )
            .unwrap();
            // The ISR shrinks here run on a clock 30 s ahead (`maybe_shrink_isr(now_ms() +
            // 30_001, ..)`), the high watermark on the real one: with a 1 ms lag time, a
            // follower that stopped fetching a few ms before is not one the high watermark
            // waits for to join again (Kafka's `shouldWaitForReplicaToJoinIsr`: caught up
            // within the lag time, tested in `state.rs`).
            let args: Vec<String> = [
                "replica.fetch.backoff.ms=20",
                "replica.fetch.wait.max.ms=200",
                "replica.lag.time.max.ms=1",
            ]
            .iter()
            .flat_map(|o| ["--override".to_string(), o.to_string()])
            .collect();
            let config = crate::config::from_args(&args).unwrap();
            let m = Arc::new(ReplicaManager::new(
                id,
                crate::config::SharedConfig::new(config),
                logs,
            ));
            m.cluster.set_brokers(infos.clone(), ids[0]);
            m.cluster.set_broker_epoch(100 + i64::from(id));
            m.start_replication(
                Arc::new(LocalEndpoints(brokers.clone())),
                controller.clone(),
            );
            brokers.managers.lock().insert(id, Arc::downgrade(&m));
            managers.insert(id, m);
            dirs.push(root);
        }
        Cluster {
            brokers,
            controller,
            managers,
            _dirs: dirs,
        }
    }

    /// Announces t-0 with `replicas`, `leader` at `epoch` and `isr` to `to`.
    fn announce(
        &self,
        to: &[i32],
        replicas: &[i32],
        leader: i32,
        epoch: i32,
        isr: &[i32],
        configs: &[(&str, &str)],
    ) {
        let topic = Arc::new(TopicInfo {
            name: "t".into(),
            topic_id: Uuid::from_u128(TOPIC_ID),
            partitions: vec![PartitionInfo {
                partition: 0,
                assignment: PartitionAssignment {
                    replicas: replicas.to_vec(),
                    directories: vec![Uuid::nil(); replicas.len()],
                },
                state: LeaderAndIsr::elected(leader, epoch, isr),
            }],
            configs: configs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        });
        let delta = MetadataDelta {
            topics: BTreeMap::from([("t".to_string(), TopicDelta::Changed(topic))]),
            ..Default::default()
        };
        for id in to {
            assert!(self.managers[id]
                .on_delta(&MetadataImage::default(), &delta)
                .is_empty());
        }
    }

    fn p(&self, id: i32) -> Arc<Partition> {
        self.managers[&id].partition("t", 0).unwrap()
    }

    fn set_unreachable(&self, id: i32, down: bool) {
        let mut u = self.brokers.unreachable.lock();
        u.retain(|&b| b != id);
        if down {
            u.push(id);
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for m in self.managers.values() {
            let _ = m.shutdown();
        }
    }
}

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn produce(p: &Partition, value: &[u8]) -> i64 {
    p.append(batch_bytes(&[value], 1_000, None), now_ms())
        .await
        .unwrap()
        .first_offset
}

/// Every record batch below the high watermark, as stored.
fn committed_bytes(p: &Partition) -> Bytes {
    p.read(0, 1 << 20, true).unwrap().records
}

#[tokio::test]
async fn a_follower_copies_the_leaders_batches_as_they_are() {
    let c = Cluster::new(&[1, 2]);
    c.announce(&[1, 2], &[1, 2], 1, 1, &[1, 2], &[]);
    let (leader, follower) = (c.p(1), c.p(2));
    assert_eq!(c.managers[&2].fetching(&follower.tp), Some(1));
    for v in [&b"a"[..], b"bb", b"ccc"] {
        produce(&leader, v).await;
    }
    eventually("the follower has everything, committed", || {
        follower.high_watermark() == 3
    })
    .await;
    assert_eq!(leader.high_watermark(), 3);
    assert_eq!(leader.follower_log_end_offset(2), Some(3));
    // Offsets, epochs and CRCs untouched: the same bytes on both.
    assert_eq!(committed_bytes(&follower), committed_bytes(&leader));
    assert_eq!(follower.end_offset_for_epoch(1), Some((1, 3)));
    // The follower's fetches carry its broker epoch (KIP-903).
    assert_eq!(
        leader.state_for_tests().follower(2).unwrap().broker_epoch,
        102
    );
}

#[tokio::test]
async fn a_divergent_tail_is_cut_where_the_leaders_epoch_ends() {
    let c = Cluster::new(&[1, 2]);
    c.announce(&[1, 2], &[1, 2], 1, 1, &[1, 2], &[]);
    produce(&c.p(1), b"a").await;
    eventually("replicated", || c.p(2).log_end_offset() == 1).await;

    // Broker 2 alone believes it leads at epoch 2 and takes two writes nobody else has.
    c.announce(&[2], &[1, 2], 2, 2, &[2], &[]);
    assert_eq!(c.managers[&2].fetching(&c.p(2).tp), None);
    produce(&c.p(2), b"lost-1").await;
    produce(&c.p(2), b"lost-2").await;
    assert_eq!(c.p(2).log_end_offset(), 3);

    // The controller elects broker 1 at epoch 3; it writes on, past broker 2's log end,
    // so only the epochs tell that broker 2's offsets 1 and 2 are not the leader's.
    c.announce(&[1, 2], &[1, 2], 1, 3, &[1, 2], &[]);
    for v in [&b"kept-1"[..], b"kept-2", b"kept-3"] {
        produce(&c.p(1), v).await;
    }
    eventually("the follower caught up with the leader's log", || {
        c.p(2).high_watermark() == 4 && c.p(1).high_watermark() == 4
    })
    .await;
    assert_eq!(committed_bytes(&c.p(2)), committed_bytes(&c.p(1)));
    assert_eq!(
        c.p(2).end_offset_for_epoch(2),
        Some((1, 1)),
        "epoch 2 forgotten"
    );
    assert_eq!(c.p(2).end_offset_for_epoch(3), Some((3, 4)));
}

/// Below Fetch v12 (inter.broker.protocol.version older than 2.7-IV1) nothing in a fetch
/// answer tells a follower its log diverged: it asks OffsetForLeaderEpoch on becoming a
/// follower and after every leader change, and cuts its log there before it fetches.
#[tokio::test]
async fn below_fetch_v12_a_divergent_tail_is_cut_from_offset_for_leader_epoch() {
    let c = Cluster::new(&[1, 2]);
    *c.brokers.fetch_version.lock() = Some(11);
    c.announce(&[1, 2], &[1, 2], 1, 1, &[1, 2], &[]);
    produce(&c.p(1), b"a").await;
    eventually("replicated", || c.p(2).high_watermark() == 1).await;

    // Broker 2 alone believes it leads at epoch 2 and takes two writes nobody else has.
    c.announce(&[2], &[1, 2], 2, 2, &[2], &[]);
    produce(&c.p(2), b"lost-1").await;
    produce(&c.p(2), b"lost-2").await;

    // Broker 1 leads at epoch 3 and writes past broker 2's log end: fetching from there
    // would find records, so only OffsetForLeaderEpoch shows offsets 1 and 2 are not
    // the leader's.
    c.announce(&[1], &[1, 2], 1, 3, &[1], &[]);
    for v in [&b"kept-1"[..], b"kept-2", b"kept-3"] {
        produce(&c.p(1), v).await;
    }
    c.announce(&[1, 2], &[1, 2], 1, 3, &[1, 2], &[]);
    eventually("the follower caught up with the leader's log", || {
        c.p(2).high_watermark() == 4 && c.p(1).high_watermark() == 4
    })
    .await;
    assert_eq!(committed_bytes(&c.p(2)), committed_bytes(&c.p(1)));
    assert_eq!(
        c.p(2).end_offset_for_epoch(2),
        Some((1, 1)),
        "epoch 2 forgotten"
    );
    assert_eq!(c.p(2).end_offset_for_epoch(3), Some((3, 4)));
    let queries = c.brokers.epoch_queries.lock().clone();
    let tp = c.p(2).tp.clone();
    assert!(
        queries.contains(&EpochQuery {
            tp,
            current_leader_epoch: 3,
            leader_epoch: 2,
        }),
        "asked the new leader about epoch 2: {queries:?}"
    );
}

/// A KRaft leader (Kafka's `isReplicaIsrEligible`): a follower the metadata shows fenced
/// fetches and catches up but is not proposed; once unfenced, the next fetch proposes it,
/// each member named with its broker epoch (the leader's registration's, the follower's
/// as its fetches carried it).
#[tokio::test]
async fn a_kraft_leader_proposes_a_follower_once_it_is_unfenced() {
    use super::cluster_view::Registration;
    let c = Cluster::new(&[1, 2]);
    let registrations = |fenced_2: bool| {
        [(1, 101, false), (2, 102, fenced_2)]
            .into_iter()
            .map(|(id, epoch, fenced)| {
                let r = Registration {
                    epoch,
                    fenced,
                    in_controlled_shutdown: false,
                };
                (id, r)
            })
            .collect()
    };
    c.managers[&1]
        .cluster
        .set_registrations(registrations(true));
    c.announce(&[1, 2], &[1, 2], 1, 1, &[1], &[]);
    let leader = c.p(1);
    produce(&leader, b"a").await;
    eventually("broker 2 caught up", || {
        leader.follower_log_end_offset(2) == Some(1)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(leader.isr(), vec![1], "fenced: not proposed");
    assert!(c.controller.requests.lock().is_empty());

    c.managers[&1]
        .cluster
        .set_registrations(registrations(false));
    eventually("broker 2 joined the ISR", || leader.isr() == vec![1, 2]).await;
    let requests = c.controller.requests.lock();
    let isr: Vec<(i32, i64)> = requests[0].topics[0].partitions[0]
        .new_isr_with_epochs
        .iter()
        .map(|b| (b.broker_id.0, b.broker_epoch))
        .collect();
    assert_eq!(isr, vec![(1, 101), (2, 102)]);
}

#[tokio::test]
async fn a_follower_below_the_leaders_log_start_starts_there() {
    let c = Cluster::new(&[1, 2]);
    // Broker 1 leads alone first and its log start moves past what broker 2 could have.
    c.announce(&[1], &[1, 2], 1, 1, &[1], &[]);
    for v in [&b"a"[..], b"b", b"c", b"d"] {
        produce(&c.p(1), v).await;
    }
    c.p(1)
        .log_for_tests()
        .maybe_increment_log_start_offset(3)
        .unwrap();
    c.announce(&[2], &[1, 2], 1, 1, &[1], &[]);
    eventually("the follower starts at the leader's log start", || {
        c.p(2).log_end_offset() == 4
    })
    .await;
    assert_eq!(c.p(2).log_start_offset(), 3);
}

#[tokio::test]
async fn the_isr_grows_when_a_follower_catches_up_and_shrinks_when_it_lags() {
    let c = Cluster::new(&[1, 2]);
    c.announce(&[1, 2], &[1, 2], 1, 1, &[1], &[]);
    let leader = c.p(1);
    produce(&leader, b"a").await;
    eventually("broker 2 joined the ISR", || leader.isr() == vec![1, 2]).await;
    {
        let requests = c.controller.requests.lock();
        let first = &requests[0];
        assert_eq!((first.broker_id.0, first.broker_epoch), (1, 101));
        let p = &first.topics[0].partitions[0];
        assert_eq!((p.leader_epoch, p.partition_epoch), (1, 1));
        let isr: Vec<(i32, i64)> = p
            .new_isr_with_epochs
            .iter()
            .map(|b| (b.broker_id.0, b.broker_epoch))
            .collect();
        assert_eq!(
            isr,
            vec![(1, -1), (2, -1)],
            "as Kafka 3.9's ZooKeeper-mode leaders"
        );
    }

    // Broker 2 stops fetching; once it lags past replica.lag.time.max.ms it leaves.
    c.set_unreachable(1, true);
    produce(&leader, b"b").await;
    // Past the 1 ms lag time of its last fetch (`Cluster::new`).
    tokio::time::sleep(Duration::from_millis(20)).await;
    leader.maybe_shrink_isr(now_ms(), 30_000);
    assert_eq!(leader.isr(), vec![1, 2], "not lagging long enough yet");
    leader.maybe_shrink_isr(now_ms() + 30_001, 30_000);
    eventually("broker 2 left the ISR", || leader.isr() == vec![1]).await;
    assert_eq!(leader.high_watermark(), 2, "the ISR alone commits");

    // It comes back and catches up: in again.
    c.set_unreachable(1, false);
    eventually("broker 2 rejoined the ISR", || leader.isr() == vec![1, 2]).await;
}

#[tokio::test]
async fn a_refused_isr_change_waits_for_metadata() {
    let c = Cluster::new(&[1, 2]);
    *c.controller.refuse.lock() = Some(ResponseError::InvalidUpdateVersion);
    c.announce(&[1, 2], &[1, 2], 1, 1, &[1], &[]);
    let leader = c.p(1);
    produce(&leader, b"a").await;
    eventually("the expansion was sent and refused", || {
        !c.controller.requests.lock().is_empty() && !leader.isr_change_pending()
    })
    .await;
    assert_eq!(leader.isr(), vec![1]);
    // The refusal wakes no parked fetch: the follower asks again after its long poll,
    // not at once (which had the leader propose again and again, hundreds of times a
    // second, for as long as the controller refused).
    let sent = c.controller.requests.lock().len();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let again = c.controller.requests.lock().len() - sent;
    assert!(again <= 20, "{again} more proposals in a second");
    // The controller's next announcement is what holds.
    *c.controller.refuse.lock() = None;
    c.announce(&[1, 2], &[1, 2], 1, 1, &[1, 2], &[]);
    assert_eq!(leader.isr(), vec![1, 2]);
}

#[tokio::test]
async fn acks_all_needs_min_insync_replicas_before_and_after_the_append() {
    let c = Cluster::new(&[1, 2]);
    let min_isr = [("min.insync.replicas", "2")];
    c.announce(&[1, 2], &[1, 2], 1, 1, &[1], &min_isr);
    let leader = c.p(1);
    let batch = || batch_bytes(&[b"v"], 1_000, None);
    // Stop the follower's fetches so the ISR stays as announced for now.
    c.set_unreachable(1, true);
    let refused = leader
        .append_records(batch(), now_ms(), -1)
        .await
        .unwrap_err();
    assert_eq!(refused.error().error, ResponseError::NotEnoughReplicas);
    assert_eq!(leader.log_end_offset(), 0, "nothing appended");
    leader.append_records(batch(), now_ms(), 1).await.unwrap();

    // With the follower in the ISR, acks=all is answered once it has the records.
    c.set_unreachable(1, false);
    eventually("broker 2 joined the ISR", || leader.isr() == vec![1, 2]).await;
    let info = leader.append_records(batch(), now_ms(), -1).await.unwrap();
    let mut acks = DelayedProduce::new();
    acks.watch(leader.clone(), info.last_offset);
    assert_eq!(acks.complete(Duration::from_secs(10)).await, vec![None]);
    assert!(c.p(2).log_end_offset() > info.last_offset);

    // Appended while both were in sync; the follower then stops and is dropped: the
    // high watermark passes the batch with one replica only.
    c.set_unreachable(1, true);
    let info = leader.append_records(batch(), now_ms(), -1).await.unwrap();
    let mut acks = DelayedProduce::new();
    acks.watch(leader.clone(), info.last_offset);
    let answer = tokio::spawn(acks.complete(Duration::from_secs(10)));
    // Past the 1 ms lag time of its last fetch (`Cluster::new`).
    tokio::time::sleep(Duration::from_millis(20)).await;
    leader.maybe_shrink_isr(now_ms() + 30_001, 30_000);
    assert_eq!(
        answer.await.unwrap(),
        vec![Some(ResponseError::NotEnoughReplicasAfterAppend)]
    );
}

/// A leader's log dir fails while an acks=all append waits for its follower: handling
/// the failure answers the append KAFKA_STORAGE_ERROR at once (Kafka's `DelayedProduce`
/// finds the partition offline), where it used to wait for the request's timeout, the
/// high watermark never able to pass it, holding the client's connection and the
/// broker's clean shutdown for up to 30 s. The partition then proposes no ISR shrink
/// (Kafka's ISR expiration covers online partitions only).
#[tokio::test]
async fn an_acks_all_append_waiting_when_the_log_dir_fails_is_answered_at_once() {
    let c = Cluster::new(&[1, 2]);
    let min_isr = [("min.insync.replicas", "2")];
    c.announce(&[1, 2], &[1, 2], 1, 1, &[1, 2], &min_isr);
    let leader = c.p(1);
    // The follower cannot fetch: the append waits for it.
    c.set_unreachable(1, true);
    let batch = batch_bytes(&[b"v"], 1_000, None);
    let info = leader.append_records(batch, now_ms(), -1).await.unwrap();
    let mut acks = DelayedProduce::new();
    acks.watch(leader.clone(), info.last_offset);
    let answer = tokio::spawn(acks.complete(Duration::from_secs(60)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!answer.is_finished(), "waits for the follower");

    let log = leader.log();
    crate::log::faults::arm(
        log.dir(),
        crate::log::faults::Fault::Fsync,
        libc::EIO,
        Some(1),
    );
    log.flush().unwrap_err();
    assert!(log.is_offline(), "the failed fsync takes the dir offline");
    c.managers[&1].handle_log_dir_failure(log.dir().parent().unwrap());
    let answered = tokio::time::timeout(Duration::from_secs(5), answer)
        .await
        .expect("answered at once, not at the 60 s timeout")
        .unwrap();
    assert_eq!(answered, vec![Some(ResponseError::KafkaStorageError)]);

    // Long past replica.lag.time.max.ms: still no shrink proposed for the offline log.
    c.managers[&1].maybe_shrink_isrs(now_ms() + 60_000);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(leader.isr(), vec![1, 2]);
}

#[tokio::test]
async fn acknowledged_writes_survive_the_leader_and_producers_keep_their_offsets() {
    let c = Cluster::new(&[1, 2]);
    c.announce(
        &[1, 2],
        &[1, 2],
        1,
        1,
        &[1, 2],
        &[("min.insync.replicas", "2")],
    );
    let leader = c.p(1);
    // An idempotent producer writes with acks=all; each answer waits for broker 2.
    let batch = |seq: i32| batch_bytes(&[format!("v{seq}").as_bytes()], 1_000, Some((7, 0, seq)));
    let mut acked = Vec::new();
    for seq in 0..20 {
        let info = leader
            .append_records(batch(seq), now_ms(), -1)
            .await
            .unwrap();
        let mut acks = DelayedProduce::new();
        acks.watch(leader.clone(), info.last_offset);
        if acks.complete(Duration::from_secs(10)).await == vec![None] {
            acked.push((seq, info.first_offset));
        }
    }
    assert_eq!(acked.len(), 20);

    // Broker 1 dies; the controller elects broker 2, which leads from its own log.
    c.set_unreachable(1, true);
    c.announce(&[2], &[1, 2], 2, 2, &[2], &[]);
    let new_leader = c.p(2);
    assert!(new_leader.is_leader());
    assert!(new_leader.high_watermark() >= 20 || new_leader.log_end_offset() == 20);
    // Every acknowledged record is there, once, at its offset.
    let data = new_leader
        .log_for_tests()
        .read(0, 1 << 20, 20, true)
        .unwrap()
        .records;
    let sets = crate::log::test_util::decode_all(&data);
    let values: Vec<Vec<u8>> = sets
        .iter()
        .flat_map(|s| s.records.iter().map(|r| r.value.clone().unwrap().to_vec()))
        .collect();
    let expected: Vec<Vec<u8>> = (0..20).map(|s| format!("v{s}").into_bytes()).collect();
    assert_eq!(values, expected);
    // The producer retries its last batch on the new leader: its original offset back.
    let retry = new_leader
        .append_records(batch(19), now_ms(), 1)
        .await
        .unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.first_offset, acked[19].1);
    assert_eq!(new_leader.log_end_offset(), 20);
}

/// Rounds of failover in `acks_all_writes_survive_leaders_failing_over_again_and_again`;
/// `SKUA_FAILOVER_ROUNDS` sets more for a long run.
fn failover_rounds() -> usize {
    std::env::var("SKUA_FAILOVER_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4)
}

#[tokio::test]
async fn acks_all_writes_survive_leaders_failing_over_again_and_again() {
    let c = Cluster::new(&[1, 2]);
    let min_isr = [("min.insync.replicas", "2")];
    let batch = |seq: i32| batch_bytes(&[format!("v{seq}").as_bytes()], 1_000, Some((7, 0, seq)));
    let (mut leader, mut epoch) = (1, 1);
    c.announce(&[1, 2], &[1, 2], leader, epoch, &[1, 2], &min_isr);
    // (sequence, offset) of every acknowledged write.
    let mut acked: Vec<(i32, i64)> = Vec::new();
    let mut seq = 0;
    for _ in 0..failover_rounds() {
        // An idempotent producer with acks=all writes ten records, retrying each until
        // it is acknowledged.
        let target = seq + 10;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while seq < target {
            assert!(
                tokio::time::Instant::now() < deadline,
                "write {seq} never acknowledged"
            );
            let p = c.p(leader);
            if let Ok(info) = p.append_records(batch(seq), now_ms(), -1).await {
                let mut acks = DelayedProduce::new();
                acks.watch(p.clone(), info.last_offset);
                if acks.complete(Duration::from_secs(2)).await == vec![None] {
                    acked.push((seq, info.first_offset));
                    seq += 1;
                    continue;
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // The leader stops answering its follower, takes one more write that is never
        // acknowledged, and the controller elects the follower without it.
        let (old, new) = (leader, 3 - leader);
        c.set_unreachable(old, true);
        let unacked = c.p(old).append_records(batch(seq), now_ms(), -1).await;
        epoch += 1;
        c.announce(&[new], &[1, 2], new, epoch, &[new], &min_isr);
        if let Ok(info) = unacked {
            let mut acks = DelayedProduce::new();
            acks.watch(c.p(old), info.last_offset);
            // Its follower is gone: the paused leader cannot acknowledge the write.
            assert_ne!(acks.complete(Duration::from_millis(50)).await, vec![None]);
        }
        // The old leader comes back as a follower, drops what the new leader does not
        // have, catches up and rejoins the ISR.
        c.announce(&[old], &[1, 2], new, epoch, &[new], &min_isr);
        c.set_unreachable(old, false);
        leader = new;
        eventually("the old leader rejoined the ISR", || {
            c.p(leader).isr().len() == 2
        })
        .await;
    }
    let p = c.p(leader);
    eventually("every write committed on both", || {
        p.high_watermark() == p.log_end_offset()
            && c.p(3 - leader).log_end_offset() == p.log_end_offset()
    })
    .await;
    let sets = crate::log::test_util::decode_all(&committed_bytes(&p));
    let stored: Vec<(i32, i64)> = sets
        .iter()
        .flat_map(|s| s.records.iter())
        .map(|r| {
            let value = String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap();
            (value[1..].parse().unwrap(), r.offset)
        })
        .collect();
    // Every acknowledged record, once, at the offset it was acknowledged with, in order;
    // and nothing else (each unacknowledged write was retried under its own sequence).
    assert_eq!(stored, acked);
    assert_eq!(committed_bytes(&c.p(3 - leader)), committed_bytes(&p));
}

/// StopReplica without deletion (Kafka's `stopReplicas`): the follower stops fetching and
/// stays stopped through metadata at the same leader epoch (a config change, a reshaped
/// topic), its log kept; a newer leader epoch makes it fetch again.
#[tokio::test]
async fn a_stopped_follower_fetches_again_only_at_a_newer_leader_epoch() {
    let c = Cluster::new(&[1, 2]);
    c.announce(&[1, 2], &[1, 2], 1, 1, &[1, 2], &[]);
    produce(&c.p(1), b"a").await;
    eventually("replicated", || c.p(2).log_end_offset() == 1).await;
    let tp = c.p(2).tp.clone();

    c.managers[&2].stop_replica(&tp);
    assert_eq!(c.managers[&2].fetching(&tp), None);
    c.announce(&[2], &[1, 2], 1, 1, &[1, 2], &[("retention.ms", "100000")]);
    assert_eq!(
        c.managers[&2].fetching(&tp),
        None,
        "same epoch: still stopped"
    );
    produce(&c.p(1), b"b").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(c.p(2).log_end_offset(), 1, "nothing fetched while stopped");

    c.announce(&[1, 2], &[1, 2], 1, 2, &[1, 2], &[]);
    assert_eq!(c.managers[&2].fetching(&tp), Some(2));
    eventually("fetching again", || c.p(2).log_end_offset() == 2).await;
}

/// A follower told of its leader before the leader is known as live (LeaderAndIsr ahead
/// of the UpdateMetadata naming it) starts fetching once the live brokers change, with
/// no partition change; the same delta names the new controller ISR changes go to.
#[tokio::test]
async fn a_follower_fetches_once_its_leader_is_known_and_leaders_follow_the_controller() {
    let c = Cluster::new(&[1, 2]);
    let m = &c.managers[&2];
    let only_me: Vec<BrokerInfo> = vec![BrokerInfo {
        id: 2,
        host: "127.0.0.1".into(),
        port: 9002,
        rack: None,
    }];
    m.cluster.set_brokers(only_me, 2);
    c.announce(&[1, 2], &[1, 2], 1, 1, &[1, 2], &[]);
    let tp = c.p(2).tp.clone();
    assert_eq!(m.fetching(&tp), None, "the leader's address is not known");

    let mut image = MetadataImage::default();
    let both = [1, 2].map(|id| BrokerInfo {
        id,
        host: "127.0.0.1".into(),
        port: 9000 + id,
        rack: None,
    });
    image.set_cluster(both.to_vec(), 1);
    let cluster_changed = MetadataDelta {
        cluster: true,
        ..Default::default()
    };
    assert!(m.on_delta(&image, &cluster_changed).is_empty());
    assert_eq!(m.cluster.controller_id(), 1);
    assert_eq!(m.fetching(&tp), Some(1));
    produce(&c.p(1), b"a").await;
    eventually("replicated", || c.p(2).log_end_offset() == 1).await;
}
