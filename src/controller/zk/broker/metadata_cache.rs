//! The broker's metadata cache in ZooKeeper mode (Kafka's `ZkMetadataCache`): what the
//! controller's UpdateMetadata requests said about live brokers, the controller and
//! every partition. Metadata, DescribeCluster and FindCoordinator answer from it, so
//! every broker of the cluster gives the same answer.
//!
//! As Kafka's: the live brokers are replaced by every request; partition states are
//! merged (the controller sends partial updates), a partition whose leader is -2
//! (`LeaderDuringDelete`) is removed, and a topic goes with its last partition. A topic
//! id of zero in a topic state forgets the topic's id.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use kafka_protocol::messages::update_metadata_request::{
    UpdateMetadataBroker, UpdateMetadataPartitionState,
};
use kafka_protocol::messages::UpdateMetadataRequest;
use uuid::Uuid;

use super::capped_lines::CappedLines;
use super::checked_names::check_partition;
use crate::controller::image::MetadataImage;
use crate::controller::{BrokerInfo, LeaderAndIsr, PartitionAssignment, PartitionInfo, TopicInfo};

/// The leader of a partition whose topic is being deleted.
pub const LEADER_DURING_DELETE: i32 = -2;

/// One endpoint of a live broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedEndpoint {
    pub listener: String,
    pub host: String,
    pub port: i32,
    pub security_protocol: i16,
}

/// A live broker as UpdateMetadata announced it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedBroker {
    pub id: i32,
    pub endpoints: Vec<CachedEndpoint>,
    pub rack: Option<String>,
}

impl CachedBroker {
    /// The broker as clients reach it through `listener` (else its first endpoint).
    pub fn info(&self, listener: &str) -> Option<BrokerInfo> {
        self.endpoint_info(listener).or_else(|| {
            let first = self.endpoints.first()?;
            self.endpoint_info(&first.listener)
        })
    }

    /// The broker as clients reach it through `listener`; None without such an endpoint.
    pub fn endpoint_info(&self, listener: &str) -> Option<BrokerInfo> {
        let e = self.endpoints.iter().find(|e| e.listener == listener)?;
        Some(BrokerInfo {
            id: self.id,
            host: e.host.clone(),
            port: e.port,
            rack: self.rack.clone(),
        })
    }
}

/// What one UpdateMetadata changed, for the broker's metadata listeners.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CacheUpdate {
    /// Topics that appeared, got new partitions or a new topic id.
    pub reshaped: BTreeSet<String>,
    /// Topics whose last partition was removed (deleted), as they were.
    pub removed: Vec<Arc<TopicInfo>>,
}

#[derive(Clone, Debug)]
pub struct MetadataCache {
    /// Whether any UpdateMetadata was applied: before that the cache knows nothing.
    received: bool,
    controller_id: i32,
    brokers: BTreeMap<i32, CachedBroker>,
    /// Topics (without configs, which UpdateMetadata does not carry).
    image: MetadataImage,
    /// Offline replicas by partition (UpdateMetadata v4+); absent when none.
    offline: BTreeMap<(String, i32), Vec<i32>>,
    /// The ids of topics removed by a deletion, for a StopReplica that comes later
    /// (StopReplica names topics without ids): the [`MAX_DELETED_IDS`] latest, oldest
    /// first in `deleted_order`.
    deleted_ids: BTreeMap<String, Uuid>,
    deleted_order: VecDeque<String>,
    /// The listener the image's broker addresses are taken from (empty: the first).
    inter_broker_listener: String,
}

/// How many deleted topics' ids are kept. The controller's StopReplica follows a
/// deletion at once; this only has to outlast a burst of deletions, not every name
/// ever deleted (a cluster that creates and deletes topics by the thousand).
pub const MAX_DELETED_IDS: usize = 1000;

impl Default for MetadataCache {
    fn default() -> Self {
        MetadataCache {
            received: false,
            controller_id: -1,
            brokers: BTreeMap::new(),
            image: MetadataImage::default(),
            offline: BTreeMap::new(),
            deleted_ids: BTreeMap::new(),
            deleted_order: VecDeque::new(),
            inter_broker_listener: String::new(),
        }
    }
}

impl MetadataCache {
    /// A cache whose image (what the replica layer follows) names each broker by its
    /// endpoint on `listener`, the inter-broker listener.
    pub fn for_listener(listener: &str) -> MetadataCache {
        MetadataCache {
            inter_broker_listener: listener.to_string(),
            ..MetadataCache::default()
        }
    }

    pub fn received(&self) -> bool {
        self.received
    }

    pub fn controller_id(&self) -> i32 {
        self.controller_id
    }

    pub fn brokers(&self) -> impl Iterator<Item = &CachedBroker> {
        self.brokers.values()
    }

    pub fn is_alive(&self, id: i32) -> bool {
        self.brokers.contains_key(&id)
    }

    pub fn broker(&self, id: i32) -> Option<&CachedBroker> {
        self.brokers.get(&id)
    }

    pub fn image(&self) -> &MetadataImage {
        &self.image
    }

    pub fn topic(&self, name: &str) -> Option<&Arc<TopicInfo>> {
        self.image.topic(name)
    }

    pub fn offline_replicas(&self, topic: &str, partition: i32) -> Vec<i32> {
        self.offline
            .get(&(topic.to_string(), partition))
            .cloned()
            .unwrap_or_default()
    }

    /// The configs of a resource other than a topic, read from ZooKeeper (UpdateMetadata
    /// carries none).
    pub fn set_resource_configs(
        &mut self,
        resource: crate::controller::ConfigResource,
        configs: BTreeMap<String, String>,
    ) {
        self.image.set_resource_configs(resource, configs);
    }

    /// An entity's client quotas, read from ZooKeeper; whether they changed.
    pub fn set_client_quotas(
        &mut self,
        entity: crate::quota::entity::QuotaEntity,
        quotas: BTreeMap<String, f64>,
    ) -> bool {
        self.image.set_client_quotas(entity, quotas)
    }

    /// The id a topic had when a deletion removed it from the cache.
    pub fn deleted_topic_id(&self, name: &str) -> Option<Uuid> {
        self.deleted_ids.get(name).copied()
    }

    /// Applies one UpdateMetadata request (any version).
    pub fn apply(&mut self, req: &UpdateMetadataRequest) -> CacheUpdate {
        self.received = true;
        self.controller_id = req.controller_id.0;
        self.apply_brokers(req);
        let mut update = CacheUpdate::default();
        for (name, (id, states)) in legal_states_by_topic(req) {
            self.apply_topic(name, id, &states, &mut update);
        }
        update
    }

    /// The live brokers, replaced by every request.
    fn apply_brokers(&mut self, req: &UpdateMetadataRequest) {
        self.brokers = req
            .live_brokers
            .iter()
            .map(|b| {
                let broker = CachedBroker {
                    id: b.id.0,
                    endpoints: endpoints_of(b),
                    rack: b.rack.as_ref().map(|r| r.to_string()),
                };
                (broker.id, broker)
            })
            .collect();
        // Replicas fetch from, and send ISR changes to, the inter-broker endpoints (the
        // first endpoint where a broker has none on that listener).
        let listener = self.inter_broker_listener.as_str();
        let brokers = self
            .brokers
            .values()
            .filter_map(|b| b.info(listener))
            .collect();
        self.image.set_cluster(brokers, self.controller_id);
    }

    fn remember_deleted(&mut self, name: &str, id: Uuid) {
        if self.deleted_ids.insert(name.to_string(), id).is_some() {
            self.deleted_order.retain(|n| n != name);
        }
        self.deleted_order.push_back(name.to_string());
        while self.deleted_order.len() > MAX_DELETED_IDS {
            if let Some(oldest) = self.deleted_order.pop_front() {
                self.deleted_ids.remove(&oldest);
            }
        }
    }

    fn apply_topic(
        &mut self,
        name: &str,
        id: Option<Uuid>,
        states: &[&UpdateMetadataPartitionState],
        update: &mut CacheUpdate,
    ) {
        let old = self.image.topic(name).cloned();
        let mut topic = old.as_deref().cloned().unwrap_or_else(|| TopicInfo {
            name: name.to_string(),
            topic_id: Uuid::nil(),
            partitions: Vec::new(),
            configs: BTreeMap::new(),
        });
        if let Some(id) = id {
            topic.topic_id = id;
        }
        // Merged by index in a map, then laid out sorted again: linear in the topic and
        // the request whatever order the request names partitions in (inserting each
        // into the sorted list moved the whole list per partition).
        let mut partitions: BTreeMap<i32, PartitionInfo> = std::mem::take(&mut topic.partitions)
            .into_iter()
            .map(|p| (p.partition, p))
            .collect();
        for s in states {
            let key = (name.to_string(), s.partition_index);
            if s.leader.0 == LEADER_DURING_DELETE {
                partitions.remove(&s.partition_index);
                self.offline.remove(&key);
                continue;
            }
            partitions.insert(s.partition_index, partition_info(s));
            match s.offline_replicas.is_empty() {
                true => self.offline.remove(&key),
                false => self
                    .offline
                    .insert(key, s.offline_replicas.iter().map(|b| b.0).collect()),
            };
        }
        topic.partitions = partitions.into_values().collect();
        if topic.partitions.is_empty() {
            if let Some(old) = old {
                if !old.topic_id.is_nil() {
                    self.remember_deleted(name, old.topic_id);
                }
                self.image.remove_topic(name);
                update.removed.push(old);
            }
            return;
        }
        if self.deleted_ids.remove(name).is_some() {
            self.deleted_order.retain(|n| n != name);
        }
        let reshaped = old.as_ref().is_none_or(|o| {
            o.topic_id != topic.topic_id || o.partitions.len() != topic.partitions.len()
        });
        if reshaped {
            update.reshaped.insert(name.to_string());
        }
        self.image.put_topic(Arc::new(topic));
    }
}

/// A live broker's endpoints as any version of UpdateMetadata names them.
fn endpoints_of(b: &UpdateMetadataBroker) -> Vec<CachedEndpoint> {
    if b.endpoints.is_empty() && !b.v0_host.is_empty() {
        // v0: one PLAINTEXT endpoint.
        return vec![CachedEndpoint {
            listener: "PLAINTEXT".into(),
            host: b.v0_host.to_string(),
            port: b.v0_port,
            security_protocol: 0,
        }];
    }
    b.endpoints
        .iter()
        .map(|e| CachedEndpoint {
            // Before v3 the listener is named after its security protocol.
            listener: if e.listener.is_empty() {
                protocol_name(e.security_protocol).to_string()
            } else {
                e.listener.to_string()
            },
            host: e.host.to_string(),
            port: e.port,
            security_protocol: e.security_protocol,
        })
        .collect()
}

/// A topic's id (when the request's version says it) and partition states.
type TopicStates<'r> = (Option<Uuid>, Vec<&'r UpdateMetadataPartitionState>);

/// The request's partition states by topic, grouped (v5+) or not; illegal partitions
/// and topics left out with an error line (capped), never reaching the log layer.
fn legal_states_by_topic(req: &UpdateMetadataRequest) -> BTreeMap<&str, TopicStates<'_>> {
    let mut touched: BTreeMap<&str, TopicStates<'_>> = BTreeMap::new();
    let mut illegal = CappedLines::new("UpdateMetadata left out an illegal partition");
    let mut legal = |topic: &str, p: &UpdateMetadataPartitionState| {
        let checked = check_partition(topic, p.partition_index);
        if let Err(why) = &checked {
            if illegal.allow() {
                tracing::error!(
                    partition = p.partition_index,
                    "UpdateMetadata left out a partition: {why}"
                );
            }
        }
        checked.is_ok()
    };
    for t in &req.topic_states {
        let states: Vec<&UpdateMetadataPartitionState> = t
            .partition_states
            .iter()
            .filter(|p| legal(&t.topic_name, p))
            .collect();
        let name_illegal = || check_partition(&t.topic_name, 0).is_err();
        if states.is_empty() && (!t.partition_states.is_empty() || name_illegal()) {
            continue;
        }
        let entry = touched.entry(t.topic_name.as_str()).or_default();
        // v5 and v6 group by topic without ids: nothing to say about the id then.
        entry.0 = (!t.topic_id.is_nil() || entry.0.is_some()).then_some(t.topic_id);
        entry.1.extend(states);
    }
    for p in &req.ungrouped_partition_states {
        if legal(&p.topic_name, p) {
            touched.entry(p.topic_name.as_str()).or_default().1.push(p);
        }
    }
    touched
}

fn partition_info(s: &UpdateMetadataPartitionState) -> PartitionInfo {
    let replicas: Vec<i32> = s.replicas.iter().map(|b| b.0).collect();
    PartitionInfo {
        partition: s.partition_index,
        assignment: PartitionAssignment {
            directories: vec![Uuid::nil(); replicas.len()],
            replicas,
        },
        state: LeaderAndIsr {
            leader: s.leader.0,
            leader_epoch: s.leader_epoch,
            partition_epoch: s.zk_version,
            isr: s.isr.iter().map(|b| b.0).collect(),
            eligible_leader_replicas: Vec::new(),
            last_known_elr: Vec::new(),
            leader_recovery_state: 0,
        },
    }
}

/// Kafka's `SecurityProtocol` names by id.
fn protocol_name(id: i16) -> &'static str {
    match id {
        1 => "SSL",
        2 => "SASL_PLAINTEXT",
        3 => "SASL_SSL",
        _ => "PLAINTEXT",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::update_metadata_request::{
        UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataTopicState,
    };
    use kafka_protocol::messages::{BrokerId, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn state(p: i32, leader: i32, epoch: i32, replicas: &[i32]) -> UpdateMetadataPartitionState {
        UpdateMetadataPartitionState::default()
            .with_partition_index(p)
            .with_leader(BrokerId(leader))
            .with_leader_epoch(epoch)
            .with_isr(replicas.iter().copied().map(BrokerId).collect())
            .with_replicas(replicas.iter().copied().map(BrokerId).collect())
    }

    fn broker(id: i32, port: i32) -> UpdateMetadataBroker {
        UpdateMetadataBroker::default()
            .with_id(BrokerId(id))
            .with_endpoints(vec![UpdateMetadataEndpoint::default()
                .with_host(StrBytes::from_static_str("127.0.0.1"))
                .with_port(port)
                .with_listener(StrBytes::from_static_str("PLAINTEXT"))])
    }

    fn request(
        controller: i32,
        brokers: Vec<UpdateMetadataBroker>,
        topics: Vec<(&str, Uuid, Vec<UpdateMetadataPartitionState>)>,
    ) -> UpdateMetadataRequest {
        UpdateMetadataRequest::default()
            .with_controller_id(BrokerId(controller))
            .with_live_brokers(brokers)
            .with_topic_states(
                topics
                    .into_iter()
                    .map(|(name, id, states)| {
                        UpdateMetadataTopicState::default()
                            .with_topic_name(TopicName(StrBytes::from_string(name.into())))
                            .with_topic_id(id)
                            .with_partition_states(states)
                    })
                    .collect(),
            )
    }

    #[test]
    fn partial_updates_merge_and_deletions_remove() {
        let id = Uuid::from_u128(9);
        let mut c = MetadataCache::default();
        assert!(!c.received());
        let u = c.apply(&request(
            2,
            vec![broker(1, 9091), broker(2, 9092)],
            vec![(
                "t",
                id,
                vec![state(0, 1, 0, &[1, 2]), state(1, 2, 0, &[2, 1])],
            )],
        ));
        assert_eq!(u.reshaped, BTreeSet::from(["t".to_string()]));
        assert_eq!(c.controller_id(), 2);
        assert_eq!(c.brokers().count(), 2);
        let t = c.topic("t").unwrap().clone();
        assert_eq!((t.topic_id, t.partitions.len()), (id, 2));

        // A partial update: only partition 1 changes, broker 1 is gone.
        let mut moved = state(1, 2, 1, &[2, 1]);
        moved.isr = vec![BrokerId(2)];
        moved.offline_replicas = vec![BrokerId(1)];
        let u = c.apply(&request(
            2,
            vec![broker(2, 9092)],
            vec![("t", id, vec![moved])],
        ));
        assert!(u.reshaped.is_empty() && u.removed.is_empty());
        assert!(!c.is_alive(1));
        let t = c.topic("t").unwrap();
        assert_eq!(t.partitions[0].state.leader, 1, "partition 0 kept");
        assert_eq!(
            (
                t.partitions[1].state.leader_epoch,
                t.partitions[1].state.isr.clone()
            ),
            (1, vec![2])
        );
        assert_eq!(c.offline_replicas("t", 1), vec![1]);
        assert_eq!(c.image().topic_by_id(id).unwrap().name, "t");

        // Deletion: leader -2 for every partition.
        let u = c.apply(&request(
            2,
            vec![broker(2, 9092)],
            vec![(
                "t",
                id,
                vec![
                    state(0, LEADER_DURING_DELETE, 0, &[1, 2]),
                    state(1, LEADER_DURING_DELETE, 1, &[2, 1]),
                ],
            )],
        ));
        assert_eq!(u.removed.len(), 1);
        assert!(c.topic("t").is_none());
        assert!(c.image().topic_by_id(id).is_none());
        assert_eq!(c.deleted_topic_id("t"), Some(id));
        assert!(c.offline_replicas("t", 1).is_empty());
    }

    /// Deleted topics' ids are kept for the latest deletions only, however many distinct
    /// names come and go.
    #[test]
    fn deleted_topic_ids_are_bounded() {
        let mut c = MetadataCache::default();
        let total = MAX_DELETED_IDS + 500;
        for i in 0..total {
            let (name, id) = (format!("t{i}"), Uuid::from_u128(i as u128 + 1));
            for leader in [1, LEADER_DURING_DELETE] {
                c.apply(&request(
                    1,
                    vec![broker(1, 9091)],
                    vec![(&name, id, vec![state(0, leader, 0, &[1])])],
                ));
            }
        }
        assert_eq!(c.deleted_ids.len(), MAX_DELETED_IDS);
        assert_eq!(c.deleted_order.len(), MAX_DELETED_IDS);
        let last = total - 1;
        assert_eq!(
            c.deleted_topic_id(&format!("t{last}")),
            Some(Uuid::from_u128(last as u128 + 1))
        );
        assert_eq!(c.deleted_topic_id("t0"), None);
        // A name created again is forgotten as deleted.
        c.apply(&request(
            1,
            vec![broker(1, 9091)],
            vec![(
                &format!("t{last}"),
                Uuid::from_u128(7),
                vec![state(0, 1, 0, &[1])],
            )],
        ));
        assert_eq!(c.deleted_topic_id(&format!("t{last}")), None);
        assert_eq!(c.deleted_order.len(), MAX_DELETED_IDS - 1);
    }

    /// 40,000 partitions named high to low: each was inserted at the front of the sorted
    /// list, moving the whole list (seconds of work under the broker side's lock).
    #[test]
    fn applying_partitions_in_any_order_is_linear() {
        const PARTITIONS: i32 = 40_000;
        let states: Vec<_> = (0..PARTITIONS)
            .rev()
            .map(|p| state(p, 1, 0, &[1]))
            .collect();
        let mut c = MetadataCache::default();
        let started = std::time::Instant::now();
        c.apply(&request(
            1,
            vec![broker(1, 9091)],
            vec![("t", Uuid::from_u128(1), states)],
        ));
        let took = started.elapsed();
        let t = c.topic("t").unwrap();
        assert_eq!(t.partitions.len(), PARTITIONS as usize);
        assert!(t
            .partitions
            .windows(2)
            .all(|w| w[0].partition < w[1].partition));
        assert!(took < std::time::Duration::from_secs(3), "took {took:?}");
    }

    /// Names a controller passed on from ZooKeeper that are no topic's never reach the
    /// cache (the Metadata answer, the listeners, the log layer).
    #[test]
    fn illegal_names_and_indexes_are_left_out() {
        let mut c = MetadataCache::default();
        let long = "L".repeat(300);
        let u = c.apply(&request(
            1,
            vec![broker(1, 9091)],
            vec![
                (&long, Uuid::from_u128(1), vec![state(0, 1, 0, &[1])]),
                (
                    "../outside/escaped",
                    Uuid::from_u128(2),
                    vec![state(0, 1, 0, &[1])],
                ),
                (
                    "/tmp/victim",
                    Uuid::from_u128(3),
                    vec![state(7, 1, 0, &[1])],
                ),
                (
                    "fine",
                    Uuid::from_u128(4),
                    vec![state(-1, 1, 0, &[1]), state(0, 1, 0, &[1])],
                ),
            ],
        ));
        assert_eq!(u.reshaped, BTreeSet::from(["fine".to_string()]));
        let names: Vec<&str> = c.image().topics().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["fine"]);
        let fine: Vec<i32> = c
            .topic("fine")
            .unwrap()
            .partitions
            .iter()
            .map(|p| p.partition)
            .collect();
        assert_eq!(fine, [0]);
    }

    #[test]
    fn each_listener_has_its_own_endpoints() {
        let b = CachedBroker {
            id: 1,
            endpoints: vec![
                CachedEndpoint {
                    listener: "INTERNAL".into(),
                    host: "10.0.0.1".into(),
                    port: 9091,
                    security_protocol: 0,
                },
                CachedEndpoint {
                    listener: "EXTERNAL".into(),
                    host: "kafka.example".into(),
                    port: 9092,
                    security_protocol: 0,
                },
            ],
            rack: None,
        };
        assert_eq!(b.endpoint_info("EXTERNAL").unwrap().port, 9092);
        assert_eq!(b.endpoint_info("INTERNAL").unwrap().host, "10.0.0.1");
        assert!(b.endpoint_info("OTHER").is_none());
        assert_eq!(b.info("OTHER").unwrap().port, 9091, "first endpoint");
    }

    #[test]
    fn v0_brokers_and_ungrouped_states() {
        let mut c = MetadataCache::default();
        let mut req = UpdateMetadataRequest::default()
            .with_controller_id(BrokerId(1))
            .with_live_brokers(vec![UpdateMetadataBroker::default()
                .with_id(BrokerId(1))
                .with_v0_host(StrBytes::from_static_str("h"))
                .with_v0_port(9)]);
        let mut s = state(0, 1, 3, &[1]);
        s.topic_name = TopicName(StrBytes::from_static_str("old"));
        req.ungrouped_partition_states = vec![s];
        c.apply(&req);
        let b = c.broker(1).unwrap().info("PLAINTEXT").unwrap();
        assert_eq!((b.host.as_str(), b.port), ("h", 9));
        assert!(c.broker(1).unwrap().endpoint_info("EXTERNAL").is_none());
        let t = c.topic("old").unwrap();
        assert_eq!(
            (t.topic_id, t.partitions[0].state.leader_epoch),
            (Uuid::nil(), 3)
        );
    }
}
