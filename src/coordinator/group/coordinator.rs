//! GroupCoordinator: what the group handlers call. Each group belongs to the owner of
//! its `__consumer_offsets` partition (`abs(hash(group)) % partitions`); a broker not
//! serving that partition answers NOT_COORDINATOR, one still loading it
//! COORDINATOR_LOAD_IN_PROGRESS.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use tokio::time::Instant;

use super::classic::{GroupConfig, JoinRequest, JoinResult, Outcome, SyncResult};
use super::consumer::{ConsumerGroup, Heartbeat, HeartbeatResult};
use super::records::{partition_for, OffsetValue};
use super::shard::{
    CommitRequest, Committer, GroupDescription, GroupShard, ListedGroup, ShardConfig, SyncRequest,
};
use super::topics::TopicSource;
use crate::config::BrokerConfig;
use crate::coordinator::runtime::{now_ms, CoordinatorRuntime, PartitionLog, ShardStatus, Written};

/// The `__consumer_offsets` settings, from the broker config.
#[derive(Clone, Debug)]
pub struct OffsetsTopicConfig {
    pub partitions: i32,
    pub replication_factor: i16,
    pub segment_bytes: i32,
}

pub struct GroupCoordinator {
    /// `group.consumer.heartbeat.interval.ms`.
    pub consumer_heartbeat_interval_ms: i32,
    pub offsets_topic: OffsetsTopicConfig,
    runtime: CoordinatorRuntime<GroupShard>,
    log: Arc<dyn PartitionLog>,
    topics: Arc<dyn TopicSource>,
}

fn int(config: &BrokerConfig, key: &str, default: i64) -> i64 {
    config.long(key).unwrap_or(default)
}

impl GroupCoordinator {
    pub fn new(
        config: &BrokerConfig,
        log: Arc<dyn PartitionLog>,
        topics: Arc<dyn TopicSource>,
    ) -> GroupCoordinator {
        let classic = GroupConfig {
            min_session_timeout_ms: int(config, "group.min.session.timeout.ms", 6000) as i32,
            max_session_timeout_ms: int(config, "group.max.session.timeout.ms", 1_800_000) as i32,
            initial_rebalance_delay_ms: int(config, "group.initial.rebalance.delay.ms", 3000)
                as i32,
            max_size: int(config, "group.max.size", i32::MAX as i64) as i32,
        };
        let shard_config = Arc::new(ShardConfig {
            classic,
            consumer_session_timeout_ms: int(config, "group.consumer.session.timeout.ms", 45_000)
                as i32,
            offsets_retention_ms: int(config, "offsets.retention.minutes", 10080)
                .saturating_mul(60_000),
            offsets_retention_check_interval_ms: int(
                config,
                "offsets.retention.check.interval.ms",
                600_000,
            )
            .max(1) as u64,
            offset_metadata_max_bytes: int(config, "offset.metadata.max.bytes", 4096).max(0)
                as usize,
        });
        let offsets_topic = OffsetsTopicConfig {
            partitions: int(config, "offsets.topic.num.partitions", 50).max(1) as i32,
            replication_factor: int(config, "offsets.topic.replication.factor", 3) as i16,
            segment_bytes: int(config, "offsets.topic.segment.bytes", 104_857_600) as i32,
        };
        let shard_topics = topics.clone();
        let runtime = CoordinatorRuntime::new("group coordinator", log.clone(), move |_| {
            GroupShard::new(shard_config.clone(), shard_topics.clone())
        });
        GroupCoordinator {
            consumer_heartbeat_interval_ms: int(
                config,
                "group.consumer.heartbeat.interval.ms",
                5000,
            ) as i32,
            offsets_topic,
            runtime,
            log,
            topics,
        }
    }

    pub fn partition_for(&self, group_id: &str) -> i32 {
        partition_for(group_id, self.offsets_topic.partitions)
    }

    /// Whether this broker serves `group_id` now; the error to answer otherwise.
    pub fn check_coordinator(&self, group_id: &str) -> Result<(), ResponseError> {
        if group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        self.runtime.check(self.partition_for(group_id))
    }

    /// How the partition of `group_id` is served here (None: it is not).
    pub fn status(&self, group_id: &str) -> Option<ShardStatus> {
        self.runtime.status(self.partition_for(group_id))
    }

    // ---- leadership ----

    /// Loads every `__consumer_offsets` partition this broker leads, before it serves
    /// requests (startup).
    pub fn load_led_partitions(&self) {
        for p in 0..self.offsets_topic.partitions {
            if let Some(epoch) = self.log.leader_epoch(p) {
                self.runtime.load_now(p, epoch);
            }
        }
    }

    /// Starts serving the partitions this broker newly leads (the offsets topic was
    /// just created); resolves once they are loaded.
    pub async fn elect_led_partitions(&self) {
        let mut loading = Vec::new();
        for p in 0..self.offsets_topic.partitions {
            if let Some(epoch) = self.log.leader_epoch(p) {
                loading.push(self.on_elected(p, epoch));
            }
        }
        for done in loading {
            let _ = done.await;
        }
    }

    /// This broker became the leader of `__consumer_offsets` partition `partition`.
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

    pub fn shutdown(&self) {
        self.runtime.shutdown();
    }

    async fn write<R, F>(&self, group_id: &str, op: F) -> Result<R, ResponseError>
    where
        R: Send + 'static,
        F: FnOnce(
                &mut GroupShard,
            ) -> Result<Written<super::records::GroupRecord, R>, ResponseError>
            + Send
            + 'static,
    {
        self.check_coordinator(group_id)?;
        self.runtime.write(self.partition_for(group_id), op).await
    }

    async fn read<R, F>(&self, group_id: &str, op: F) -> Result<R, ResponseError>
    where
        R: Send + 'static,
        F: FnOnce(&GroupShard) -> R + Send + 'static,
    {
        self.check_coordinator(group_id)?;
        self.runtime.read(self.partition_for(group_id), op).await
    }

    // ---- classic groups ----

    pub async fn join(&self, group_id: &str, req: JoinRequest) -> JoinResult {
        let member_id = req.member_id.clone();
        let id = group_id.to_string();
        // A classic member joining an empty consumer group turns it back into a
        // classic group: its records are tombstoned first.
        let retired = self
            .write(group_id, move |s| s.retire_empty_consumer_group(&id))
            .await;
        if let Err(e) = retired {
            return JoinResult::error(e, &member_id);
        }
        let id = group_id.to_string();
        let outcome = self
            .write(group_id, move |s| {
                s.classic_join(&id, req, Instant::now(), now_ms())
            })
            .await;
        match outcome {
            Err(e) => JoinResult::error(e, &member_id),
            Ok(Outcome::Done(r)) => r,
            Ok(Outcome::Wait(rx)) => rx
                .await
                .unwrap_or_else(|_| JoinResult::error(ResponseError::UnknownMemberId, &member_id)),
        }
    }

    pub async fn sync(&self, group_id: &str, req: SyncRequest) -> SyncResult {
        let id = group_id.to_string();
        let outcome = self
            .write(group_id, move |s| {
                s.classic_sync(&id, req, Instant::now(), now_ms())
            })
            .await;
        match outcome {
            Err(e) => SyncResult::error(e),
            Ok(Outcome::Done(r)) => r,
            Ok(Outcome::Wait(rx)) => rx
                .await
                .unwrap_or_else(|_| SyncResult::error(ResponseError::UnknownMemberId)),
        }
    }

    pub async fn heartbeat(
        &self,
        group_id: &str,
        member_id: &str,
        instance: Option<&str>,
        generation_id: i32,
    ) -> Option<ResponseError> {
        let (id, member, instance) = (
            group_id.to_string(),
            member_id.to_string(),
            instance.map(str::to_string),
        );
        self.write(group_id, move |s| {
            s.classic_heartbeat(
                &id,
                &member,
                instance.as_deref(),
                generation_id,
                Instant::now(),
                now_ms(),
            )
        })
        .await
        .unwrap_or_else(Some)
    }

    /// Removes members; one answer per (member id, instance id) given.
    pub async fn leave(
        &self,
        group_id: &str,
        members: Vec<(String, Option<String>)>,
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        let id = group_id.to_string();
        self.write(group_id, move |s| {
            s.classic_leave(&id, &members, Instant::now(), now_ms())
        })
        .await
    }

    // ---- KIP-848 groups ----

    /// One ConsumerGroupHeartbeat.
    pub async fn consumer_heartbeat(
        &self,
        group_id: &str,
        hb: Heartbeat,
    ) -> Result<HeartbeatResult, ResponseError> {
        self.check_coordinator(group_id)?;
        // The topic image is taken here, off the partition's owner.
        let image = self.topics.image();
        let id = group_id.to_string();
        self.write(group_id, move |s| {
            s.consumer_heartbeat(&id, hb, image, Instant::now(), now_ms())
        })
        .await
    }

    /// A consumer group for ConsumerGroupDescribe.
    pub async fn describe_consumer_group(
        &self,
        group_id: &str,
    ) -> Result<ConsumerGroup, ResponseError> {
        let id = group_id.to_string();
        self.read(group_id, move |s| s.describe_consumer_group(&id))
            .await?
    }

    // ---- offsets ----

    /// Validates and writes a commit. Per partition: the error, if any.
    pub async fn commit_offsets(
        &self,
        group_id: &str,
        who: Committer,
        expire_timestamp: Option<i64>,
        commits: Vec<CommitRequest>,
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        let id = group_id.to_string();
        self.write(group_id, move |s| {
            s.commit_offsets(&id, &who, expire_timestamp, commits, now_ms())
        })
        .await
    }

    /// Committed offsets of a group: of the given partitions, or all with `None`.
    pub async fn fetch_offsets(
        &self,
        group_id: &str,
        member: (Option<String>, i32),
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<Vec<(String, i32, Option<OffsetValue>)>, ResponseError> {
        let id = group_id.to_string();
        self.read(group_id, move |s| {
            s.fetch_offsets(&id, (member.0.as_deref(), member.1), partitions)
        })
        .await?
    }

    /// OffsetDelete. Per partition: the error, if any.
    pub async fn delete_offsets(
        &self,
        group_id: &str,
        partitions: Vec<(String, i32)>,
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        let id = group_id.to_string();
        self.write(group_id, move |s| s.delete_offsets(&id, &partitions))
            .await
    }

    /// DeleteGroups for one group.
    pub async fn delete_group(&self, group_id: &str) -> Result<(), ResponseError> {
        let id = group_id.to_string();
        self.write(group_id, move |s| s.delete_group(&id)).await
    }

    /// Expires offsets now, as of `now_ms`, in every partition served here (the timer
    /// does this every `offsets.retention.check.interval.ms`).
    pub async fn expire_offsets(&self, now_ms: i64) {
        for p in self.runtime.partitions() {
            loop {
                let more = self
                    .runtime
                    .write(p, move |s: &mut GroupShard| {
                        let (records, more) = s.expired_offsets(now_ms);
                        Ok(Written::new(records, more))
                    })
                    .await;
                if !matches!(more, Ok(true)) {
                    break;
                }
            }
        }
    }

    // ---- admin views ----

    /// Every group this broker coordinates, by id. A partition still loading makes the
    /// answer COORDINATOR_LOAD_IN_PROGRESS; one not served is left out.
    pub async fn list_groups(&self) -> Result<Vec<ListedGroup>, ResponseError> {
        let mut out = Vec::new();
        for p in self.runtime.partitions() {
            match self.runtime.read(p, |s: &GroupShard| s.list_groups()).await {
                Ok(groups) => out.extend(groups),
                Err(ResponseError::CoordinatorLoadInProgress) => {
                    return Err(ResponseError::CoordinatorLoadInProgress)
                }
                Err(_) => {}
            }
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        Ok(out)
    }

    pub async fn describe_group(
        &self,
        group_id: &str,
    ) -> Result<Option<GroupDescription>, ResponseError> {
        let id = group_id.to_string();
        self.read(group_id, move |s| s.describe_group(&id)).await?
    }
}
