//! The broker side of ZooKeeper mode: what a skua broker does with the controller's
//! requests, whichever broker (skua or Apache Kafka 3.9) is the controller.
//!
//! - UpdateMetadata fills the `metadata_cache`, which Metadata, DescribeCluster and
//!   FindCoordinator answer from.
//! - LeaderAndIsr (`leader_and_isr`) decides which partitions this broker hosts, with
//!   which role, leader epoch and ISR; StopReplica (`stop_replica`) stops hosting them
//!   and, when asked, deletes their logs.
//!
//! Both reach the rest of the broker as [`MetadataDelta`]s handed to every
//! [`MetadataListener`] (the replica manager, the group coordinator), in the order the
//! controller's requests arrived: one lock (Kafka's `replicaStateChangeLock`) orders
//! them. The topics a delta carries are the partitions as this broker follows them: the
//! ones it hosts with the state LeaderAndIsr gave, the others as the cache has them.
//! A partition assigned here that no LeaderAndIsr made hosted yet is left out, so a
//! listener never starts hosting from UpdateMetadata alone.

mod capped_lines;
mod checked_names;
pub mod client_quotas;
pub mod config_changes;
pub mod controlled_shutdown;
mod hosted;
mod leader_and_isr;
pub mod log_dir_events;
pub mod metadata_cache;
pub mod scram_users;
mod stop_replica;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{UpdateMetadataRequest, UpdateMetadataResponse};
use parking_lot::{Mutex, RwLock};
use uuid::Uuid;

use self::metadata_cache::MetadataCache;
use crate::controller::delta::{ApplyError, MetadataDelta, MetadataListener, TopicDelta};
use crate::controller::records::CONFIG_RESOURCE_BROKER;
use crate::controller::{BrokerInfo, ConfigResource, PartitionInfo, TopicInfo};
use crate::quota::entity::QuotaEntity;

/// What the broker side asks of the replicas this broker hosts (the broker's
/// `ReplicaManager`), given once, when the broker starts following the controller.
pub trait HostedReplicas: Send + Sync {
    /// The topic id of the partition's log on disk (None: no log, or no id): LeaderAndIsr
    /// checks a request's topic id against it.
    fn log_topic_id(&self, topic: &str, partition: i32) -> Option<Uuid>;
    /// Whether the partition's log is in an offline log dir.
    fn is_offline(&self, topic: &str, partition: i32) -> bool;
    /// Stops the replica's fetcher without deleting it (StopReplica without deletion).
    fn stop_replica(&self, topic: &str, partition: i32);
    /// This broker's epoch (its registration's czxid), for its fetches, ISR changes and
    /// shutdown marker; again after a new session registers it again.
    fn set_broker_epoch(&self, epoch: i64);
    /// The session is gone at the servers: what this broker leads is in doubt
    /// (`ClusterView::doubt_leaderships`).
    fn doubt_leaderships(&self);
    /// The session survived a disconnection: the leaderships stand.
    fn session_survived(&self);
    /// A LeaderAndIsr to the registration of `request_broker_epoch` was taken.
    fn heard_from_controller(&self, request_broker_epoch: i64);
}

/// A topic's partitions hosted here, as LeaderAndIsr made them.
#[derive(Clone, Debug)]
struct HostedTopic {
    topic_id: Uuid,
    partitions: BTreeMap<i32, PartitionInfo>,
}

/// What the lock guards.
struct State {
    /// The highest controller epoch seen (Kafka's `ReplicaManager.controllerEpoch`).
    controller_epoch: i32,
    cache: MetadataCache,
    hosted: BTreeMap<String, HostedTopic>,
    /// Topics' config overrides as last read from `/config/topics/<t>` (when
    /// LeaderAndIsr came, at startup, or on a change notification).
    topic_configs: BTreeMap<String, BTreeMap<String, String>>,
}

pub struct BrokerSide {
    broker_id: i32,
    state: Mutex<State>,
    /// The cache as last applied, for request handlers (never waits on `state`).
    published: RwLock<Arc<MetadataCache>>,
    listeners: Mutex<Vec<Arc<dyn MetadataListener>>>,
    /// The replica layer, once the broker starts (none before: nothing is hosted yet).
    replicas: OnceLock<Arc<dyn HostedReplicas>>,
    /// SCRAM credentials from `/config/users` (`config_changes`).
    pub scram_users: scram_users::ScramUsers,
}

impl BrokerSide {
    /// A broker's side whose image names brokers by their first endpoint.
    pub fn new(broker_id: i32) -> BrokerSide {
        Self::with_inter_broker_listener(broker_id, "")
    }

    /// A broker's side; the replicas it follows are reached on `inter_broker_listener`.
    pub fn with_inter_broker_listener(broker_id: i32, inter_broker_listener: &str) -> BrokerSide {
        BrokerSide {
            broker_id,
            state: Mutex::new(State {
                controller_epoch: -1,
                cache: MetadataCache::for_listener(inter_broker_listener),
                hosted: BTreeMap::new(),
                topic_configs: BTreeMap::new(),
            }),
            published: RwLock::new(Arc::new(MetadataCache::default())),
            listeners: Mutex::new(Vec::new()),
            replicas: OnceLock::new(),
            scram_users: scram_users::ScramUsers::default(),
        }
    }

    /// The metadata cache as the last UpdateMetadata left it.
    pub fn cache(&self) -> Arc<MetadataCache> {
        self.published.read().clone()
    }

    /// Gives the broker side the replicas it hosts; a second call is refused.
    pub fn host_replicas(&self, replicas: Arc<dyn HostedReplicas>) -> Result<(), String> {
        self.replicas
            .set(replicas)
            .map_err(|_| "the broker side hosts its replicas already".to_string())
    }

    fn replica_offline(&self, topic: &str, partition: i32) -> bool {
        self.replicas
            .get()
            .is_some_and(|r| r.is_offline(topic, partition))
    }

    fn stop_replica_fetcher(&self, topic: &str, partition: i32) {
        if let Some(r) = self.replicas.get() {
            r.stop_replica(topic, partition);
        }
    }

    fn log_topic_id(&self, topic: &str, partition: i32) -> Option<Uuid> {
        self.replicas.get()?.log_topic_id(topic, partition)
    }

    /// This broker's ZooKeeper session is gone at the servers (see
    /// [`HostedReplicas::doubt_leaderships`]).
    pub fn doubt_leaderships(&self) {
        if let Some(r) = self.replicas.get() {
            r.doubt_leaderships();
        }
    }

    /// This broker's ZooKeeper session survived a disconnection.
    pub fn session_survived(&self) {
        if let Some(r) = self.replicas.get() {
            r.session_survived();
        }
    }

    /// Adds a listener and hands it every topic as this broker follows it now.
    pub fn subscribe(&self, listener: Arc<dyn MetadataListener>) -> Vec<ApplyError> {
        let state = self.state.lock();
        let names: BTreeSet<String> = state
            .cache
            .image()
            .topics()
            .map(|t| t.name.clone())
            .chain(state.hosted.keys().cloned())
            .collect();
        let delta = MetadataDelta {
            topics: names
                .into_iter()
                .filter_map(|n| Some((n.clone(), TopicDelta::Changed(self.view(&state, &n)?))))
                .collect(),
            configs: state.cache.image().config_resources().cloned().collect(),
            cluster: true,
            // ZooKeeper mode keeps ACLs in znodes, not in the image.
            acls: false,
            client_quotas: true,
            // Read from ZooKeeper's /config/users, not the image.
            scram_credentials: false,
        };
        let errors = listener.on_delta(state.cache.image(), &delta);
        self.listeners.lock().push(listener);
        errors
    }

    /// Kafka's checks of every control request: a registration of this broker older than
    /// the current one (STALE_BROKER_EPOCH), then a controller older than one already
    /// heard from (STALE_CONTROLLER_EPOCH). None to go on; the epoch is then remembered.
    fn fence(
        &self,
        state: &mut State,
        controller_epoch: i32,
        request_broker_epoch: i64,
        broker_epoch: i64,
    ) -> Option<ResponseError> {
        let refused = refusal(state, controller_epoch, request_broker_epoch, broker_epoch);
        if refused.is_none() {
            state.controller_epoch = controller_epoch;
        }
        refused
    }

    pub fn update_metadata(
        &self,
        req: &UpdateMetadataRequest,
        broker_epoch: i64,
    ) -> UpdateMetadataResponse {
        let mut state = self.state.lock();
        if let Some(e) = self.fence(
            &mut state,
            req.controller_epoch,
            req.broker_epoch,
            broker_epoch,
        ) {
            tracing::warn!(controller = req.controller_id.0, controller_epoch = req.controller_epoch, error = ?e, "UpdateMetadata refused");
            return UpdateMetadataResponse::default().with_error_code(e.code());
        }
        let cluster_before = cluster_of(state.cache.image());
        let update = state.cache.apply(req);
        *self.published.write() = Arc::new(state.cache.clone());
        follow_isr_changes(&mut state);
        let mut delta = MetadataDelta {
            // A new controller after a failover, or a broker back, often comes with no
            // partition change; the listeners must learn of it all the same (leaders
            // send their ISR changes to the controller, followers fetch from brokers).
            cluster: cluster_of(state.cache.image()) != cluster_before,
            ..MetadataDelta::default()
        };
        for name in &update.reshaped {
            if let Some(t) = self.view(&state, name) {
                delta.topics.insert(name.clone(), TopicDelta::Changed(t));
            }
        }
        for t in update.removed {
            // The topic is gone from the cluster's metadata; the logs hosted here go
            // only when StopReplica asks (listeners learn of the deletion, nothing else).
            tracing::info!(topic = %t.name, "topic deleted from the metadata cache");
            state.topic_configs.remove(&t.name);
            let gone = TopicInfo {
                partitions: Vec::new(),
                ..(*t).clone()
            };
            delta
                .topics
                .insert(t.name.clone(), TopicDelta::Removed(Arc::new(gone)));
        }
        for e in self.publish(&state, &delta) {
            tracing::error!(topic = %e.topic, error = %e.message, "UpdateMetadata not applied");
        }
        UpdateMetadataResponse::default()
    }

    /// The config overrides of `topic` as last read from ZooKeeper; None before any read.
    pub fn topic_configs(&self, topic: &str) -> Option<BTreeMap<String, String>> {
        self.state.lock().topic_configs.get(topic).cloned()
    }

    /// Puts `configs`, what `/config/topics/<topic>` now holds, in force (Kafka's
    /// `TopicConfigHandler`): the logs hosted here take them at once.
    pub fn apply_topic_configs(&self, topic: &str, configs: BTreeMap<String, String>) {
        let mut state = self.state.lock();
        if state.topic_configs.get(topic) == Some(&configs) {
            return;
        }
        tracing::info!(topic, ?configs, "topic configs read from ZooKeeper");
        state.topic_configs.insert(topic.to_string(), configs);
        let mut delta = MetadataDelta::default();
        if let Some(t) = self.view(&state, topic) {
            delta
                .topics
                .insert(topic.to_string(), TopicDelta::Changed(t));
        }
        for e in self.publish(&state, &delta) {
            tracing::error!(topic = %e.topic, error = %e.message, "topic configs not applied");
        }
    }

    /// Puts `configs`, what `/config/brokers/<entity>` now holds, in the image as the
    /// BROKER resource `entity` ("" for `<default>`), and tells the listeners (the
    /// dynamic config publisher puts them in force, Kafka's `BrokerConfigHandler`).
    pub fn apply_broker_configs(&self, entity: &str, configs: BTreeMap<String, String>) {
        let resource = ConfigResource {
            resource_type: CONFIG_RESOURCE_BROKER,
            name: entity.to_string(),
        };
        let mut state = self.state.lock();
        let current = state.cache.image().resource_configs(&resource);
        if current.map_or(configs.is_empty(), |c| *c == configs) {
            return;
        }
        tracing::info!(
            broker = entity,
            configs = ?crate::config::broker::redacted(&configs),
            "dynamic broker configs read from ZooKeeper"
        );
        state.cache.set_resource_configs(resource.clone(), configs);
        *self.published.write() = Arc::new(state.cache.clone());
        let mut delta = MetadataDelta::default();
        delta.configs.insert(resource);
        for e in self.publish(&state, &delta) {
            tracing::error!(error = %e.message, "dynamic broker configs not applied");
        }
    }

    /// Puts `quotas`, what `/config/<entity>` now holds, in the image as the entity's
    /// client quotas, and tells the listeners (the quota publisher puts them in force).
    pub fn apply_client_quotas(&self, entity: QuotaEntity, quotas: BTreeMap<String, f64>) {
        let mut state = self.state.lock();
        tracing::debug!(%entity, ?quotas, "client quotas read from ZooKeeper");
        if !state.cache.set_client_quotas(entity, quotas) {
            return;
        }
        *self.published.write() = Arc::new(state.cache.clone());
        let delta = MetadataDelta {
            client_quotas: true,
            ..MetadataDelta::default()
        };
        for e in self.publish(&state, &delta) {
            tracing::error!(error = %e.message, "client quotas not applied");
        }
    }

    /// Hands `delta` to every listener; what they could not apply.
    fn publish(&self, state: &State, delta: &MetadataDelta) -> Vec<ApplyError> {
        if delta.is_empty() {
            return Vec::new();
        }
        let listeners = self.listeners.lock().clone();
        listeners
            .iter()
            .flat_map(|l| l.on_delta(state.cache.image(), delta))
            .collect()
    }

    /// A topic as this broker follows it: hosted partitions as LeaderAndIsr made them,
    /// the others as the cache has them, less those assigned here but not yet hosted.
    fn view(&self, state: &State, name: &str) -> Option<Arc<TopicInfo>> {
        let cached = state.cache.topic(name);
        let hosted = state.hosted.get(name);
        let topic_id = match (hosted, cached) {
            (Some(h), _) => h.topic_id,
            (None, Some(c)) => c.topic_id,
            (None, None) => return None,
        };
        let mut partitions: BTreeMap<i32, PartitionInfo> = BTreeMap::new();
        if let Some(c) = cached.filter(|c| c.topic_id == topic_id || c.topic_id.is_nil()) {
            for p in &c.partitions {
                if !p.assignment.replicas.contains(&self.broker_id) {
                    partitions.insert(p.partition, p.clone());
                }
            }
        }
        if let Some(h) = hosted {
            partitions.extend(h.partitions.iter().map(|(&i, p)| (i, p.clone())));
        }
        Some(Arc::new(TopicInfo {
            name: name.to_string(),
            topic_id,
            partitions: partitions.into_values().collect(),
            configs: state.topic_configs.get(name).cloned().unwrap_or_default(),
        }))
    }
}

/// The answer [`BrokerSide::fence`] would give, remembering nothing.
fn refusal(
    state: &State,
    controller_epoch: i32,
    request_broker_epoch: i64,
    broker_epoch: i64,
) -> Option<ResponseError> {
    // -1: a controller that does not know the epoch (Kafka before KIP-380) is trusted.
    if request_broker_epoch != -1 && request_broker_epoch < broker_epoch {
        return Some(ResponseError::StaleBrokerEpoch);
    }
    if controller_epoch < state.controller_epoch {
        return Some(ResponseError::StaleControllerEpoch);
    }
    None
}

/// The live brokers and the controller an image names.
fn cluster_of(image: &crate::controller::image::MetadataImage) -> (Vec<BrokerInfo>, i32) {
    (image.brokers().to_vec(), image.controller_id())
}

/// Keeps hosted partitions' ISR in step with the cluster's between LeaderAndIsr requests:
/// an ISR change the leader made through AlterPartition reaches the brokers by
/// UpdateMetadata only, at the same leader epoch and a newer partition epoch. Without
/// this, a later delta for the topic would hand the replica manager the older ISR.
fn follow_isr_changes(state: &mut State) {
    let State { cache, hosted, .. } = state;
    for (name, h) in hosted.iter_mut() {
        let Some(cached) = cache.topic(name).filter(|c| c.topic_id == h.topic_id) else {
            continue;
        };
        for c in &cached.partitions {
            let Some(p) = h.partitions.get_mut(&c.partition) else {
                continue;
            };
            let same_leadership =
                c.state.leader == p.state.leader && c.state.leader_epoch == p.state.leader_epoch;
            if same_leadership && c.state.partition_epoch > p.state.partition_epoch {
                p.state.isr = c.state.isr.clone();
                p.state.partition_epoch = c.state.partition_epoch;
            }
        }
    }
}

/// The image the broker side hands listeners, for tests.
#[cfg(test)]
impl BrokerSide {
    fn image(&self) -> crate::controller::image::MetadataImage {
        self.state.lock().cache.image().clone()
    }
}

#[cfg(test)]
mod tests;
