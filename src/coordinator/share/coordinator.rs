//! ShareCoordinator: what share-partition leaders and the group coordinator call to
//! persist share-partitions' state (Kafka's `ShareCoordinatorService` behind its
//! persister). Each share-partition key belongs to the owner of one `__share_group_state`
//! partition (`shard::partition_for`); a broker not serving that partition answers
//! NOT_COORDINATOR, one still loading it COORDINATOR_LOAD_IN_PROGRESS.
//!
//! Which partitions are served follows their leadership in the metadata, as the group
//! coordinator follows `__consumer_offsets`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use kafka_protocol::error::ResponseError;

use super::persister::{PersistedState, Persister, StateSummary, StateWrite};
use super::records::{SharePartitionKey, UNKNOWN_DELIVERY_COMPLETE_COUNT};
use super::shard::{partition_for, ShareCoordinatorShard};
use super::SHARE_GROUP_STATE_TOPIC;
use crate::config::SharedConfig;
use crate::controller::delta::{ApplyError, MetadataDelta, MetadataListener, TopicDelta};
use crate::controller::image::MetadataImage;
use crate::coordinator::group::topics::TopicSource;
use crate::coordinator::runtime::{now_ms, CoordinatorRuntime, PartitionLog, ShardStatus};
use crate::error::ApiError;

pub struct ShareCoordinator {
    config: Arc<SharedConfig>,
    /// The partition count of `__share_group_state`, fixed once the topic is seen.
    state_partitions: OnceLock<i32>,
    runtime: CoordinatorRuntime<ShareCoordinatorShard>,
    topics: Arc<dyn TopicSource>,
    broker_id: i32,
    /// Set once the first delta was applied: partitions led at startup load inline.
    started: AtomicBool,
}

impl ShareCoordinator {
    pub fn new(
        config: Arc<SharedConfig>,
        log: Arc<dyn PartitionLog>,
        topics: Arc<dyn TopicSource>,
    ) -> ShareCoordinator {
        let current = config.current();
        let per_snapshot = current.share_coordinator.updates_per_snapshot;
        let runtime = CoordinatorRuntime::new("share coordinator", log, move |_| {
            ShareCoordinatorShard::new(per_snapshot)
        });
        ShareCoordinator {
            broker_id: current.broker_id,
            config,
            state_partitions: OnceLock::new(),
            runtime,
            topics,
            started: AtomicBool::new(false),
        }
    }

    /// `__share_group_state` partitions: the topic's own count once it exists, the
    /// configured count (which creates it) until then.
    fn partitions(&self) -> i32 {
        if let Some(n) = self.state_partitions.get() {
            return *n;
        }
        match self.topics.image().partitions(SHARE_GROUP_STATE_TOPIC) {
            Some(n) if n > 0 => *self.state_partitions.get_or_init(|| n),
            _ => self.config.current().share_coordinator.partitions.max(1),
        }
    }

    /// The `__share_group_state` partition holding `key`'s state.
    pub fn partition_for(&self, key: &SharePartitionKey) -> i32 {
        partition_for(key, self.partitions())
    }

    /// Whether this broker serves `key` now; the error to answer otherwise.
    pub fn check_coordinator(&self, key: &SharePartitionKey) -> Result<(), ResponseError> {
        self.runtime.check(self.partition_for(key))
    }

    /// Resolves once `key`'s partition is no longer loading here (at once when it is
    /// served, or not served here): a partition just elected (the topic was just
    /// created) answers once loaded rather than COORDINATOR_LOAD_IN_PROGRESS.
    pub async fn loaded(&self, key: &SharePartitionKey) {
        self.runtime.loaded(self.partition_for(key)).await;
    }

    /// InitializeShareGroupState for one share-partition: it starts at `start_offset`
    /// (-1: where `share.auto.offset.reset` says, when its leader first reads it).
    pub async fn initialize(
        &self,
        key: SharePartitionKey,
        state_epoch: i32,
        start_offset: i64,
    ) -> Result<(), ResponseError> {
        let p = self.partition_for(&key);
        self.runtime.check(p)?;
        self.runtime
            .write(p, move |s: &mut ShareCoordinatorShard| {
                Ok(s.initialize(&key, state_epoch, start_offset, now_ms()))
            })
            .await?
    }

    /// ReadShareGroupState by the share-partition's leader at `leader_epoch`;
    /// INVALID_REQUEST (with Kafka's message) for a share-partition without state.
    pub async fn read(
        &self,
        key: SharePartitionKey,
        leader_epoch: i32,
    ) -> Result<PersistedState, ApiError> {
        let p = self.partition_for(&key);
        self.runtime.check(p)?;
        self.runtime
            .write(p, move |s: &mut ShareCoordinatorShard| {
                Ok(s.read(&key, leader_epoch))
            })
            .await?
    }

    /// WriteShareGroupState for one share-partition.
    pub async fn write(
        &self,
        key: SharePartitionKey,
        write: StateWrite,
    ) -> Result<(), ResponseError> {
        let p = self.partition_for(&key);
        self.runtime.check(p)?;
        self.runtime
            .write(p, move |s: &mut ShareCoordinatorShard| {
                Ok(s.write(&key, &write, now_ms()))
            })
            .await?
    }

    /// ReadShareGroupStateSummary for one share-partition: a read that fences nobody.
    pub async fn read_summary(
        &self,
        key: SharePartitionKey,
    ) -> Result<StateSummary, ResponseError> {
        let p = self.partition_for(&key);
        self.runtime.check(p)?;
        self.runtime
            .read(p, move |s: &ShareCoordinatorShard| {
                match s.store().get(&key) {
                    // Kafka's answer for a share-partition it holds no state for.
                    None => StateSummary {
                        state_epoch: 0,
                        leader_epoch: 0,
                        start_offset: -1,
                        delivery_complete_count: UNKNOWN_DELIVERY_COMPLETE_COUNT,
                    },
                    Some(o) => StateSummary {
                        state_epoch: o.state_epoch,
                        leader_epoch: o.leader_epoch,
                        start_offset: o.start_offset,
                        delivery_complete_count: o.delivery_complete_count,
                    },
                }
            })
            .await
    }

    /// DeleteShareGroupState for one share-partition.
    pub async fn delete(&self, key: SharePartitionKey) -> Result<(), ResponseError> {
        let p = self.partition_for(&key);
        self.runtime.check(p)?;
        self.runtime
            .write(p, move |s: &mut ShareCoordinatorShard| Ok(s.delete(&key)))
            .await
    }

    // ---- leadership ----

    /// This broker became the leader of `__share_group_state` partition `partition`.
    pub fn on_elected(
        &self,
        partition: i32,
        epoch: i32,
    ) -> tokio::sync::oneshot::Receiver<ShardStatus> {
        self.runtime.on_elected(partition, epoch)
    }

    /// This broker no longer leads `partition` (None: the topic is gone).
    pub fn on_resigned(&self, partition: i32, epoch: Option<i32>) {
        self.runtime.on_resigned(partition, epoch);
    }

    /// Loads a partition in the calling thread (startup, tests).
    pub fn load_now(&self, partition: i32, epoch: i32) -> ShardStatus {
        self.runtime.load_now(partition, epoch)
    }

    pub fn shutdown(&self) {
        self.runtime.shutdown();
    }

    /// What to subscribe to the metadata; holds the coordinator weakly, as the group
    /// coordinator's listener does.
    pub fn metadata_listener(self: &Arc<Self>) -> Arc<dyn MetadataListener> {
        Arc::new(LeadershipListener(Arc::downgrade(self)))
    }

    fn apply_delta(&self, delta: &MetadataDelta) {
        let inline = !self.started.swap(true, Ordering::AcqRel);
        match delta.topics.get(SHARE_GROUP_STATE_TOPIC) {
            Some(TopicDelta::Changed(topic)) => {
                for p in &topic.partitions {
                    let (partition, epoch) = (p.partition, p.state.leader_epoch);
                    match p.state.leader == self.broker_id {
                        true if inline => {
                            self.runtime.load_now(partition, epoch);
                        }
                        true => drop(self.on_elected(partition, epoch)),
                        false => self.on_resigned(partition, Some(epoch)),
                    }
                }
            }
            Some(TopicDelta::Removed(topic)) => {
                for p in &topic.partitions {
                    self.on_resigned(p.partition, None);
                }
            }
            None => {}
        }
    }
}

/// The share coordinator in this process persists for the share-partitions led here.
#[async_trait::async_trait]
impl Persister for ShareCoordinator {
    async fn initialize(
        &self,
        key: SharePartitionKey,
        state_epoch: i32,
        start_offset: i64,
    ) -> Result<(), ResponseError> {
        self.loaded(&key).await;
        ShareCoordinator::initialize(self, key, state_epoch, start_offset).await
    }

    async fn read(
        &self,
        key: SharePartitionKey,
        leader_epoch: i32,
    ) -> Result<PersistedState, ApiError> {
        self.loaded(&key).await;
        ShareCoordinator::read(self, key, leader_epoch).await
    }

    async fn write(&self, key: SharePartitionKey, write: StateWrite) -> Result<(), ResponseError> {
        ShareCoordinator::write(self, key, write).await
    }

    async fn read_summary(&self, key: SharePartitionKey) -> Result<StateSummary, ResponseError> {
        self.loaded(&key).await;
        ShareCoordinator::read_summary(self, key).await
    }

    async fn delete(&self, key: SharePartitionKey) -> Result<(), ResponseError> {
        ShareCoordinator::delete(self, key).await
    }
}

struct LeadershipListener(Weak<ShareCoordinator>);

impl MetadataListener for LeadershipListener {
    fn on_delta(&self, _image: &MetadataImage, delta: &MetadataDelta) -> Vec<ApplyError> {
        if let Some(shares) = self.0.upgrade() {
            shares.apply_delta(delta);
        }
        Vec::new()
    }
}
