//! GroupCoordinator: the groups this broker coordinates, their timers, and their
//! writes to `__consumer_offsets`.
//!
//! Every group lives in one map behind a std mutex: nothing awaits while it is held.
//! An operation locks, runs the pure state machine (`state.rs`), takes the effects it
//! asks for, unlocks, and only then appends records and answers waiting requests.
//! A group belongs to the coordinator of its `__consumer_offsets` partition; a broker
//! not hosting that partition answers NOT_COORDINATOR, so clusters can split the work.
//!
//! Changes whose records must reach the log in the order they were made (KIP-848
//! groups, group deletion and expiry) also hold their partition's write lock, an async
//! mutex, from the change until its append completes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tokio::sync::watch;
use tokio::time::{Duration, Instant};

use super::offsets_topic::{partition_for, GroupValue, RecordKey, OFFSETS_TOPIC};
use super::state::{
    Effects, Group, GroupConfig, GroupState, JoinRequest, JoinResult, Outcome, SyncResult,
};
use crate::config::BrokerConfig;
use crate::controller::Controller;
use crate::handlers::now_ms;
use crate::log::LogError;
use crate::replica::{Partition, ReplicaManager};

/// Keys and values (None: a tombstone) of records for `__consumer_offsets`.
pub(super) type Records = Vec<(Bytes, Option<Bytes>)>;

/// How often sessions, rebalance and sync timeouts are checked.
const TICK: Duration = Duration::from_millis(100);

/// The `__consumer_offsets` settings, from the broker config.
#[derive(Clone, Debug)]
pub struct OffsetsTopicConfig {
    pub partitions: i32,
    pub replication_factor: i16,
    pub segment_bytes: i32,
    pub retention_ms: i64,
    pub retention_check_interval_ms: u64,
    pub metadata_max_bytes: usize,
}

/// One partition's commit as the coordinator stores it.
pub struct CommitRequest {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// Who commits: the OffsetCommit fields a group checks.
pub struct Committer<'a> {
    pub member_id: &'a str,
    pub instance: Option<&'a str>,
    /// The generation (classic groups) or member epoch (KIP-848 groups); -1 outside.
    pub generation_id_or_member_epoch: i32,
    pub api_version: i16,
}

/// What DescribeGroups reports for a member.
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: &'static str,
    pub group_type: &'static str,
}

pub struct GroupDescription {
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<MemberDescription>,
}

pub struct GroupCoordinator {
    pub config: GroupConfig,
    /// `group.consumer.session.timeout.ms` (KIP-848 groups).
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`.
    pub consumer_heartbeat_interval_ms: i32,
    pub offsets_topic: OffsetsTopicConfig,
    replicas: Arc<ReplicaManager>,
    /// Topic names and ids for KIP-848 assignments.
    pub(super) controller: Arc<dyn Controller>,
    groups: Mutex<HashMap<String, Group>>,
    /// One per `__consumer_offsets` partition: held while a change is written.
    write_locks: Vec<tokio::sync::Mutex<()>>,
    shutdown: watch::Sender<bool>,
}

fn int(config: &BrokerConfig, key: &str, default: i64) -> i64 {
    config.long(key).unwrap_or(default)
}

impl GroupCoordinator {
    pub fn new(
        config: &BrokerConfig,
        replicas: Arc<ReplicaManager>,
        controller: Arc<dyn Controller>,
    ) -> GroupCoordinator {
        let group = GroupConfig {
            min_session_timeout_ms: int(config, "group.min.session.timeout.ms", 6000) as i32,
            max_session_timeout_ms: int(config, "group.max.session.timeout.ms", 1_800_000) as i32,
            initial_rebalance_delay_ms: int(config, "group.initial.rebalance.delay.ms", 3000)
                as i32,
            max_size: int(config, "group.max.size", i32::MAX as i64) as i32,
        };
        let offsets_topic = OffsetsTopicConfig {
            partitions: int(config, "offsets.topic.num.partitions", 50).max(1) as i32,
            replication_factor: int(config, "offsets.topic.replication.factor", 3) as i16,
            segment_bytes: int(config, "offsets.topic.segment.bytes", 104_857_600) as i32,
            retention_ms: int(config, "offsets.retention.minutes", 10080).saturating_mul(60_000),
            retention_check_interval_ms: int(config, "offsets.retention.check.interval.ms", 600_000)
                .max(1) as u64,
            metadata_max_bytes: int(config, "offset.metadata.max.bytes", 4096).max(0) as usize,
        };
        GroupCoordinator {
            config: group,
            consumer_session_timeout_ms: int(config, "group.consumer.session.timeout.ms", 45_000)
                as i32,
            consumer_heartbeat_interval_ms: int(
                config,
                "group.consumer.heartbeat.interval.ms",
                5000,
            ) as i32,
            write_locks: (0..offsets_topic.partitions)
                .map(|_| tokio::sync::Mutex::new(()))
                .collect(),
            offsets_topic,
            replicas,
            controller,
            groups: Mutex::new(HashMap::new()),
            shutdown: watch::channel(false).0,
        }
    }

    pub(super) fn groups(&self) -> MutexGuard<'_, HashMap<String, Group>> {
        // A panic while the lock was held leaves plain data behind; keep serving it.
        self.groups.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts the timers: session and rebalance timeouts, offset expiry. They stop on
    /// `shutdown` or when the coordinator is dropped.
    pub fn start(self: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("no runtime: group coordinator timers not started");
            return;
        };
        let me: Weak<Self> = Arc::downgrade(self);
        let mut stop = self.shutdown.subscribe();
        let expire_every = Duration::from_millis(self.offsets_topic.retention_check_interval_ms);
        runtime.spawn(async move {
            let mut tick = tokio::time::interval(TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut next_expiry = Instant::now() + expire_every;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stop.changed() => return,
                }
                let Some(me) = me.upgrade() else { return };
                me.tick(Instant::now()).await;
                if Instant::now() >= next_expiry {
                    next_expiry = Instant::now() + expire_every;
                    me.expire_offsets(now_ms()).await;
                }
            }
        });
    }

    pub fn shutdown(&self) {
        let _ = self.shutdown.send(true);
    }

    pub fn partition_for(&self, group_id: &str) -> i32 {
        partition_for(group_id, self.offsets_topic.partitions)
    }

    /// The write lock of a `__consumer_offsets` partition.
    pub(super) fn write_lock(&self, partition: i32) -> &tokio::sync::Mutex<()> {
        // partition_for is below the partition count, the length of write_locks.
        &self.write_locks[partition as usize % self.write_locks.len()]
    }

    /// The `__consumer_offsets` partition of a group, when this broker leads it.
    fn coordinator_partition(&self, group_id: &str) -> Result<Arc<Partition>, ResponseError> {
        self.replicas
            .partition(OFFSETS_TOPIC, self.partition_for(group_id))
            .ok_or(ResponseError::NotCoordinator)
    }

    /// Whether this broker coordinates `group_id`; the error to answer otherwise.
    pub fn check_coordinator(&self, group_id: &str) -> Result<(), ResponseError> {
        if group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        self.coordinator_partition(group_id).map(|_| ())
    }

    // ---- writes ----

    /// Appends key/value records (None: tombstone) to a group's partition as one v2
    /// batch; returns the offset of the first record.
    pub(super) async fn append(
        &self,
        group_id: &str,
        records: Records,
    ) -> Result<i64, ResponseError> {
        let partition = self.coordinator_partition(group_id)?;
        let now = now_ms();
        let records: Vec<Record> = records
            .into_iter()
            .enumerate()
            .map(|(i, (key, value))| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: i as i64,
                // The encoder starts a new batch wherever offset - sequence changes, and an
                // append takes exactly one batch; the batch's base sequence stays -1.
                sequence: i as i32 - 1,
                timestamp: now,
                key: Some(key),
                value,
                headers: Default::default(),
            })
            .collect();
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        if let Err(e) = RecordBatchEncoder::encode(&mut buf, records.iter(), &options) {
            tracing::error!(group = %group_id, error = %e, "cannot encode coordinator records");
            return Err(ResponseError::UnknownServerError);
        }
        match partition.append(buf.freeze(), now).await {
            Ok(info) => Ok(info.first_offset),
            Err(e) => {
                tracing::error!(group = %group_id, partition = %partition.tp, error = %e,
                    "cannot append to the offsets topic");
                Err(match e {
                    LogError::MessageTooLarge { .. } | LogError::RecordListTooLarge => {
                        ResponseError::InvalidCommitOffsetSize
                    }
                    _ => ResponseError::CoordinatorNotAvailable,
                })
            }
        }
    }

    async fn write_group(&self, group_id: &str, value: &GroupValue) -> Result<i64, ResponseError> {
        let key = RecordKey::Group {
            group: group_id.to_string(),
        };
        self.append(group_id, vec![(key.encode(), Some(value.encode()))])
            .await
    }

    /// Writes what the state machine asked for, then sends the answers that waited on it.
    async fn run_effects(&self, group_id: &str, effects: Effects) {
        let written = match &effects.record {
            Some(v) => self.write_group(group_id, v).await.map(|_| ()),
            None => Ok(()),
        };
        for (tx, answer) in effects.sync_answers {
            let answer = match written {
                Ok(()) => answer,
                Err(e) => SyncResult::error(e),
            };
            let _ = tx.send(answer);
        }
    }

    /// Runs `f` on a group (created Empty when `create`), and the effects it produced.
    async fn with_group<R>(
        &self,
        group_id: &str,
        create: bool,
        f: impl FnOnce(&mut Group) -> R,
    ) -> Option<R> {
        let (result, effects) = {
            let mut groups = self.groups();
            if create && !groups.contains_key(group_id) {
                let mut g = Group::new(group_id, now_ms());
                g.initial_delay_ms = self.config.initial_rebalance_delay_ms;
                groups.insert(group_id.to_string(), g);
            }
            let g = groups.get_mut(group_id)?;
            let result = f(g);
            let effects = g.take_effects();
            // A group that a refused request created holds nothing worth keeping.
            if g.state == GroupState::Empty
                && g.is_empty()
                && g.offsets.is_empty()
                && g.generation_id == 0
                && g.consumer.is_none()
            {
                groups.remove(group_id);
            }
            (result, effects)
        };
        self.run_effects(group_id, effects).await;
        Some(result)
    }

    // ---- the group protocol ----

    pub async fn join(&self, group_id: &str, req: JoinRequest) -> JoinResult {
        if let Err(e) = self.check_coordinator(group_id) {
            return JoinResult::error(e, &req.member_id);
        }
        let cfg = self.config;
        if req.session_timeout_ms < cfg.min_session_timeout_ms
            || req.session_timeout_ms > cfg.max_session_timeout_ms
        {
            return JoinResult::error(ResponseError::InvalidSessionTimeout, &req.member_id);
        }
        let member_id = req.member_id.clone();
        if let Err(e) = self.retire_empty_consumer_group(group_id).await {
            return JoinResult::error(e, &member_id);
        }
        let create = member_id.is_empty();
        let outcome = self
            .with_group(group_id, create, |g| {
                g.join(req, &cfg, Instant::now(), now_ms())
            })
            .await;
        match outcome {
            None => JoinResult::error(ResponseError::UnknownMemberId, &member_id),
            Some(Outcome::Done(r)) => r,
            Some(Outcome::Wait(rx)) => rx
                .await
                .unwrap_or_else(|_| JoinResult::error(ResponseError::UnknownMemberId, &member_id)),
        }
    }

    pub async fn sync(
        &self,
        group_id: &str,
        member_id: &str,
        instance: Option<&str>,
        generation_id: i32,
        protocol: (Option<&str>, Option<&str>),
        assignments: Vec<(String, Bytes)>,
    ) -> SyncResult {
        if let Err(e) = self.check_coordinator(group_id) {
            return SyncResult::error(e);
        }
        let outcome = self
            .with_group(group_id, false, |g| {
                g.sync(
                    member_id,
                    instance,
                    generation_id,
                    protocol,
                    assignments,
                    Instant::now(),
                    now_ms(),
                )
            })
            .await;
        match outcome {
            None => SyncResult::error(ResponseError::UnknownMemberId),
            Some(Outcome::Done(r)) => r,
            Some(Outcome::Wait(rx)) => rx
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
        if let Err(e) = self.check_coordinator(group_id) {
            return Some(e);
        }
        self.with_group(group_id, false, |g| {
            g.heartbeat(member_id, instance, generation_id, Instant::now())
        })
        .await
        .unwrap_or(Some(ResponseError::UnknownMemberId))
    }

    /// Removes members; one answer per (member id, instance id) given.
    pub async fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        self.check_coordinator(group_id)?;
        self.with_group(group_id, false, |g| {
            members
                .iter()
                .map(|(id, instance)| g.leave(id, instance.as_deref(), Instant::now(), now_ms()))
                .collect()
        })
        .await
        .ok_or(ResponseError::UnknownMemberId)
    }

    async fn tick(&self, now: Instant) {
        self.expire_consumer_members(now).await;
        let effects: Vec<(String, Effects)> = {
            let mut groups = self.groups();
            groups
                .values_mut()
                .filter_map(|g| {
                    g.tick(now, now_ms());
                    let e = g.take_effects();
                    (e.record.is_some() || !e.sync_answers.is_empty())
                        .then(|| (g.group_id.clone(), e))
                })
                .collect()
        };
        for (group_id, e) in effects {
            self.run_effects(&group_id, e).await;
        }
    }

    // ---- admin views ----

    /// Every group this broker coordinates.
    pub fn list_groups(&self) -> Vec<ListedGroup> {
        let groups = self.groups();
        let mut out: Vec<_> = groups
            .values()
            .filter(|g| g.state != GroupState::Dead)
            .map(|g| ListedGroup {
                group_id: g.group_id.clone(),
                protocol_type: match &g.consumer {
                    Some(_) => "consumer".to_string(),
                    None => g.protocol_type.clone().unwrap_or_default(),
                },
                state: g.state_name(),
                group_type: g.group_type(),
            })
            .collect();
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    pub fn describe_group(
        &self,
        group_id: &str,
    ) -> Result<Option<GroupDescription>, ResponseError> {
        self.check_coordinator(group_id)?;
        let groups = self.groups();
        let Some(g) = groups.get(group_id) else {
            return Ok(None);
        };
        if g.consumer.is_some() {
            // Kafka describes consumer groups with ConsumerGroupDescribe only.
            return Err(ResponseError::GroupIdNotFound);
        }
        let stable = g.state == GroupState::Stable;
        let protocol = g.protocol.clone().unwrap_or_default();
        Ok(Some(GroupDescription {
            state: g.state,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol: if stable {
                protocol.clone()
            } else {
                String::new()
            },
            members: g
                .members
                .values()
                .map(|m| MemberDescription {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(&protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
        }))
    }

    // ---- loading ----

    /// Replaces the coordinator's state with what was loaded from the offsets topic.
    pub fn install(&self, loaded: HashMap<String, Group>) {
        let mut groups = self.groups();
        let now = Instant::now();
        for (id, mut g) in loaded {
            g.initial_delay_ms = self.config.initial_rebalance_delay_ms;
            if let Some(c) = &mut g.consumer {
                c.finish_replay(self.consumer_session_timeout_ms, now);
            }
            groups.insert(id, g);
        }
    }
}
