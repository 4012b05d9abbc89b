//! GroupCoordinator: what the group handlers call. Each group belongs to the owner of
//! its `__consumer_offsets` partition (`abs(hash(group)) % partitions`); a broker not
//! serving that partition answers NOT_COORDINATOR, one still loading it
//! COORDINATOR_LOAD_IN_PROGRESS.
//!
//! Which partitions are served follows their leadership in the metadata: the coordinator
//! is a metadata listener, and each delta that makes this broker leader of a
//! `__consumer_offsets` partition loads it (`on_elected`), each that moves the leadership
//! away or deletes the topic unloads it (`on_resigned`), as Kafka's
//! `BrokerMetadataPublisher` drives its group coordinator.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use kafka_protocol::error::ResponseError;
use tokio::time::Instant;
use uuid::Uuid;

use super::classic::{JoinRequest, JoinResult, Outcome, SyncResult};
use super::consumer::{ConsumerGroup, Heartbeat, HeartbeatResult};
use super::records::{partition_for, OFFSETS_TOPIC};
use super::settings::{GroupSettings, ShareGroupSettings};
use super::shard::{
    CommitRequest, Committer, FetchedOffset, Group, GroupDescription, GroupOffsetsView, GroupShard,
    ListedGroup, SyncRequest,
};
use super::share::{
    InitializeRequest, ShareDepartures, ShareHeartbeat, ShareHeartbeatResult, ShareMemberLeft,
    TopicPartitionsById,
};
use super::topics::TopicSource;
use crate::controller::delta::{ApplyError, MetadataDelta, MetadataListener, TopicDelta};
use crate::controller::image::MetadataImage;
use crate::controller::TopicInfo;
use crate::coordinator::runtime::{now_ms, CoordinatorRuntime, PartitionLog, ShardStatus, Written};
use crate::coordinator::share::{Persister, SharePartitionKey};
use crate::log::control::EndTxnMarker;

pub struct GroupCoordinator {
    settings: Arc<GroupSettings>,
    /// The partition count of `__consumer_offsets`, fixed once the topic is seen.
    offsets_partitions: OnceLock<i32>,
    runtime: CoordinatorRuntime<GroupShard>,
    topics: Arc<dyn TopicSource>,
    /// This broker's id: the partitions it leads are the ones served here.
    broker_id: i32,
    /// Set once the first delta (the whole image, at subscription) was applied: the
    /// partitions led at startup load before the broker serves anything; later ones load
    /// in the background.
    started: AtomicBool,
    /// Where share groups' share-partition state is initialized.
    share_persister: OnceLock<Arc<dyn Persister>>,
    /// Told of share group members that left (see `set_share_member_listener`).
    share_departures: Arc<ShareDepartures>,
}

impl GroupCoordinator {
    /// `settings` should follow the metadata (subscribed to the controller), so group
    /// configs reach the groups.
    pub fn new(
        settings: Arc<GroupSettings>,
        log: Arc<dyn PartitionLog>,
        topics: Arc<dyn TopicSource>,
    ) -> GroupCoordinator {
        let (shard_settings, shard_topics) = (settings.clone(), topics.clone());
        let share_departures = Arc::new(ShareDepartures::default());
        let departures = share_departures.clone();
        let runtime = CoordinatorRuntime::new("group coordinator", log, move |_| {
            GroupShard::new(
                shard_settings.clone(),
                shard_topics.clone(),
                departures.clone(),
            )
        });
        let broker_id = settings.broker().broker_id;
        GroupCoordinator {
            settings,
            offsets_partitions: OnceLock::new(),
            runtime,
            topics,
            broker_id,
            started: AtomicBool::new(false),
            share_persister: OnceLock::new(),
            share_departures,
        }
    }

    /// The heartbeat interval KIP-848 members of `group_id` are given.
    pub fn consumer_heartbeat_interval_ms(&self, group_id: &str) -> i32 {
        self.settings.consumer(group_id).heartbeat_interval_ms
    }

    /// `__consumer_offsets` partitions, which place every group: the topic's own count
    /// once it exists (a data dir adopted from Kafka may have another count than
    /// `offsets.topic.num.partitions`), fixed from then on as Kafka fixes it; the
    /// configured count, which creates the topic, until then.
    fn partitions(&self) -> i32 {
        if let Some(n) = self.offsets_partitions.get() {
            return *n;
        }
        match self.topics.image().partitions(OFFSETS_TOPIC) {
            Some(n) if n > 0 => *self.offsets_partitions.get_or_init(|| n),
            _ => self.settings.broker().offsets_topic.partitions.max(1),
        }
    }

    pub fn partition_for(&self, group_id: &str) -> i32 {
        partition_for(group_id, self.partitions())
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

    /// Resolves once the partition of `group_id` is no longer loading (at once when it is
    /// served, or not served here).
    pub async fn loaded(&self, group_id: &str) {
        self.runtime.loaded(self.partition_for(group_id)).await;
    }

    // ---- leadership ----

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

    /// Follows the leadership of the offsets topic's partitions in `topic` (its new
    /// state): loads those this broker leads, unloads the others. `inline`: load in the
    /// calling thread (startup).
    fn follow_leadership(&self, topic: &TopicInfo, inline: bool) {
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

    // ---- share groups ----

    /// The heartbeat interval members of share group `group_id` are given.
    pub fn share_heartbeat_interval_ms(&self, group_id: &str) -> i32 {
        self.settings.share_members(group_id).heartbeat_interval_ms
    }

    /// Whether share groups are served (the finalized `share.version`).
    pub fn share_groups_enabled(&self) -> bool {
        self.settings.share_groups_enabled()
    }

    /// The settings of share group `group_id`'s share-partitions.
    pub fn share_settings(&self, group_id: &str) -> ShareGroupSettings {
        self.settings.share(group_id)
    }

    /// Where share groups' share-partitions get their state (the share coordinator).
    /// Until it is set, share groups are assigned nothing: a partition is assigned only
    /// once its state is initialized.
    pub fn set_share_persister(&self, persister: Arc<dyn Persister>) {
        let _ = self.share_persister.set(persister);
    }

    /// Who is told, once it is committed, that a member left a share group (its session
    /// ran out or it left): the share-partitions led here, which release its records.
    pub fn set_share_member_listener(&self, listener: ShareMemberLeft) {
        self.share_departures.set(listener);
    }

    /// One ShareGroupHeartbeat. When it finds subscribed share-partitions without state,
    /// their initialization is sent to the persister once the heartbeat's records are
    /// written, without the answer waiting for it (as Kafka does); the partitions are
    /// assigned from the next heartbeat after it succeeds.
    pub async fn share_heartbeat(
        self: &Arc<Self>,
        group_id: &str,
        hb: ShareHeartbeat,
    ) -> Result<ShareHeartbeatResult, ResponseError> {
        self.check_coordinator(group_id)?;
        let image = self.topics.image();
        let id = group_id.to_string();
        let answer = self
            .write(group_id, move |s| {
                s.share_heartbeat(&id, hb, image, Instant::now(), now_ms())
            })
            .await?;
        if let (Some(req), Some(persister)) = (answer.initialize, self.share_persister.get()) {
            let (groups, persister, id) = (self.clone(), persister.clone(), group_id.to_string());
            tokio::spawn(async move { groups.initialize_share_state(&id, req, persister).await });
        }
        Ok(answer.result)
    }

    /// Kafka's `persisterInitialize`: each share-partition's state is initialized, then
    /// the group records which ones succeeded (assignable) and which failed (asked for
    /// again at the next heartbeat).
    async fn initialize_share_state(
        &self,
        group_id: &str,
        req: InitializeRequest,
        persister: Arc<dyn Persister>,
    ) {
        let (mut done, mut failed) = (TopicPartitionsById::new(), TopicPartitionsById::new());
        for (topic_id, (name, partitions)) in req.topics {
            for p in partitions {
                let key = SharePartitionKey {
                    group_id: group_id.to_string(),
                    topic_id,
                    partition: p,
                };
                let outcome = persister.initialize(key, req.state_epoch, -1).await;
                if let Err(e) = &outcome {
                    tracing::info!(group = %group_id, %topic_id, partition = p, error = ?e,
                        "share-partition state initialization failed");
                }
                let into = if outcome.is_ok() {
                    &mut done
                } else {
                    &mut failed
                };
                into.entry(topic_id)
                    .or_insert_with(|| (name.clone(), Default::default()))
                    .1
                    .insert(p);
            }
        }
        for (topics, succeeded) in [(done, true), (failed, false)] {
            if topics.is_empty() {
                continue;
            }
            if let Err(e) = self.share_initialized(group_id, topics, succeeded).await {
                tracing::info!(group = %group_id, error = ?e,
                    "recording share-partition state initialization failed");
            }
        }
    }

    /// The share coordinator's answer to an InitializeShareGroupState for `group_id`.
    pub async fn share_initialized(
        &self,
        group_id: &str,
        topics: TopicPartitionsById,
        succeeded: bool,
    ) -> Result<(), ResponseError> {
        let id = group_id.to_string();
        self.write(group_id, move |s| {
            Ok(s.share_initialized(&id, &topics, succeeded))
        })
        .await
    }

    /// A share group for ShareGroupDescribe.
    pub async fn describe_share_group(
        &self,
        group_id: &str,
    ) -> Result<super::share::ShareGroup, ResponseError> {
        let id = group_id.to_string();
        self.read(group_id, move |s| s.describe_share_group(&id))
            .await?
    }

    /// A share group's share-partitions whose state the share coordinator holds, and
    /// whether the group has no members (the admin offsets APIs). GROUP_ID_NOT_FOUND for
    /// a group that does not exist or is not a share group.
    pub async fn share_state_partitions(
        &self,
        group_id: &str,
    ) -> Result<(bool, TopicPartitionsById), ResponseError> {
        let id = group_id.to_string();
        self.read(group_id, move |s| match s.group(&id) {
            Some(Group::Share(g)) => {
                Ok((g.members.is_empty(), g.state_partitions.initialized.clone()))
            }
            _ => Err(ResponseError::GroupIdNotFound),
        })
        .await?
    }

    /// AlterShareGroupOffsets, as Kafka's group coordinator does it: the share group (got
    /// or created: Kafka 4.2+) must be empty, else NON_EMPTY_GROUP for the whole request
    /// (GROUP_ID_NOT_FOUND for a group of another kind); its share-partitions are
    /// recorded as initializing (one ShareGroupStatePartitionMetadata record, which alone
    /// brings a new group into being); the share coordinator initializes each one's
    /// state at the given start offset; those that succeeded are recorded as
    /// initialized. One outcome per partition, in order; a failed one stays
    /// initializing, so a member's heartbeat asks for it again.
    ///
    /// The state epoch is the group's epoch, as Kafka's (0 for a new group); a
    /// share-partition with state already is initialized at least one past its epoch,
    /// so a leader elsewhere still holding the old state is fenced from writing over the
    /// new one (Kafka gives it the group's epoch, which fences nothing).
    pub async fn alter_share_group_offsets(
        &self,
        group_id: &str,
        offsets: &[(Uuid, String, i32, i64)],
    ) -> Result<Vec<Result<(), ResponseError>>, ResponseError> {
        let persister = self
            .share_persister
            .get()
            .ok_or(ResponseError::CoordinatorNotAvailable)?
            .clone();
        let mut altering = TopicPartitionsById::new();
        for (topic_id, name, partition, _) in offsets {
            altering
                .entry(*topic_id)
                .or_insert_with(|| (name.clone(), Default::default()))
                .1
                .insert(*partition);
        }
        let id = group_id.to_string();
        let group_epoch = self
            .write(group_id, move |s| s.share_offsets_altering(&id, &altering))
            .await?;
        let mut outcomes = Vec::with_capacity(offsets.len());
        let mut done = TopicPartitionsById::new();
        for (topic_id, name, partition, start_offset) in offsets {
            let key = SharePartitionKey {
                group_id: group_id.to_string(),
                topic_id: *topic_id,
                partition: *partition,
            };
            let outcome = async {
                let summary = persister.read_summary(key.clone()).await?;
                persister
                    .initialize(key, alter_state_epoch(group_epoch, &summary), *start_offset)
                    .await
            }
            .await;
            if outcome.is_ok() {
                done.entry(*topic_id)
                    .or_insert_with(|| (name.clone(), Default::default()))
                    .1
                    .insert(*partition);
            }
            outcomes.push(outcome);
        }
        if !done.is_empty() {
            let id = group_id.to_string();
            self.write(group_id, move |s| Ok(s.share_offsets_altered(&id, &done)))
                .await?;
        }
        Ok(outcomes)
    }

    /// DeleteShareGroupOffsets: an empty share group's state for `topics` is deleted
    /// from `__share_group_state`, then the topics leave the group's share-partitions
    /// (a member subscribing again starts them where `share.auto.offset.reset` says).
    /// One outcome per topic: UNKNOWN_TOPIC_OR_PARTITION for one without state here.
    pub async fn delete_share_group_offsets(
        &self,
        group_id: &str,
        topics: &[Uuid],
    ) -> Result<Vec<Result<(), ResponseError>>, ResponseError> {
        let (empty, initialized) = self.share_state_partitions(group_id).await?;
        if !empty {
            return Err(ResponseError::NonEmptyGroup);
        }
        let persister = self
            .share_persister
            .get()
            .ok_or(ResponseError::CoordinatorNotAvailable)?;
        let mut outcomes = Vec::with_capacity(topics.len());
        let mut deleted = Vec::new();
        for topic_id in topics {
            let Some((_, partitions)) = initialized.get(topic_id) else {
                outcomes.push(Err(ResponseError::UnknownTopicOrPartition));
                continue;
            };
            let mut outcome = Ok(());
            for partition in partitions {
                let key = SharePartitionKey {
                    group_id: group_id.to_string(),
                    topic_id: *topic_id,
                    partition: *partition,
                };
                if let Err(e) = persister.delete(key).await {
                    outcome = Err(e);
                    break;
                }
            }
            if outcome.is_ok() {
                deleted.push(*topic_id);
            }
            outcomes.push(outcome);
        }
        if !deleted.is_empty() {
            let id = group_id.to_string();
            self.write(
                group_id,
                move |s| Ok(s.share_state_forgotten(&id, &deleted)),
            )
            .await?;
        }
        Ok(outcomes)
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

    /// Committed offsets of a group: of the given partitions, or all with `None`; with
    /// `require_stable`, UNSTABLE_OFFSET_COMMIT for those a transaction has pending.
    pub async fn fetch_offsets(
        &self,
        group_id: &str,
        member: (Option<String>, i32),
        partitions: Option<Vec<(String, i32)>>,
        require_stable: bool,
    ) -> Result<Vec<FetchedOffset>, ResponseError> {
        let id = group_id.to_string();
        self.read(group_id, move |s| {
            s.fetch_stable_offsets(
                &id,
                (member.0.as_deref(), member.1),
                partitions,
                require_stable,
            )
        })
        .await?
    }

    /// TxnOffsetCommit: validates and writes a transactional producer's commit as its
    /// transactional batch, pending until its transaction ends. Per partition: the
    /// error, if any.
    pub async fn commit_txn_offsets(
        &self,
        group_id: &str,
        who: Committer,
        producer: (i64, i16),
        commits: Vec<CommitRequest>,
    ) -> Result<Vec<Option<ResponseError>>, ResponseError> {
        let id = group_id.to_string();
        self.write(group_id, move |s| {
            s.commit_txn_offsets(&id, &who, producer, commits, now_ms())
        })
        .await
    }

    /// Writes the marker ending `producer_id`'s transaction to `__consumer_offsets`
    /// partition `partition` through its owner (Kafka's `completeTransaction`), so its
    /// pending offsets are committed or dropped in the same step as the marker lands.
    pub async fn complete_transaction(
        &self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
    ) -> Result<(), ResponseError> {
        self.runtime
            .write(partition, move |_| {
                Ok(Written::marker(producer_id, producer_epoch, marker, ()))
            })
            .await
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
        self.delete_share_state(group_id).await?;
        let id = group_id.to_string();
        self.write(group_id, move |s| s.delete_group(&id)).await
    }

    /// An empty share group's share-partitions lose their state in `__share_group_state`
    /// before the group goes (Kafka's DeleteShareGroupState on group deletion); the
    /// group stays if any deletion fails. Nothing for other groups.
    async fn delete_share_state(&self, group_id: &str) -> Result<(), ResponseError> {
        let id = group_id.to_string();
        let state = self
            .read(group_id, move |s| match s.group(&id) {
                Some(Group::Share(g)) if g.members.is_empty() => {
                    let mut all = g.state_partitions.initialized.clone();
                    for (topic, (name, ps)) in &g.state_partitions.initializing {
                        let entry = all
                            .entry(*topic)
                            .or_insert_with(|| (name.clone(), Default::default()));
                        entry.1.extend(ps);
                    }
                    Some(all)
                }
                _ => None,
            })
            .await?;
        let (Some(state), Some(persister)) = (state, self.share_persister.get()) else {
            return Ok(());
        };
        for (topic_id, (_, partitions)) in state {
            for partition in partitions {
                let key = SharePartitionKey {
                    group_id: group_id.to_string(),
                    topic_id,
                    partition,
                };
                persister.delete(key).await?;
            }
        }
        Ok(())
    }

    /// Removes every group's committed offsets of `topics`, deleted from the metadata
    /// (Kafka's `onPartitionsDeleted`), in every partition served here.
    pub async fn remove_offsets_of_deleted_topics(
        &self,
        topics: std::collections::BTreeSet<String>,
    ) {
        for p in self.runtime.partitions() {
            let topics = topics.clone();
            let written = self
                .runtime
                .write(p, move |s: &mut GroupShard| {
                    Ok(Written::new(s.deleted_topics_offsets(&topics), ()))
                })
                .await;
            if let Err(e) = written {
                tracing::warn!(partition = p, error = ?e, "offsets of deleted topics not removed");
            }
        }
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

    /// The members and committed offsets of every group this broker coordinates, one
    /// partition of `__consumer_offsets` at a time (each a read queued on its owner
    /// like any request's); partitions loading or not served are left out.
    pub async fn offsets_views(&self) -> Vec<GroupOffsetsView> {
        let mut out = Vec::new();
        for p in self.runtime.partitions() {
            if let Ok(views) = self
                .runtime
                .read(p, |s: &GroupShard| s.offsets_view())
                .await
            {
                out.extend(views);
            }
        }
        out
    }

    pub async fn describe_group(
        &self,
        group_id: &str,
    ) -> Result<Option<GroupDescription>, ResponseError> {
        let id = group_id.to_string();
        self.read(group_id, move |s| s.describe_group(&id)).await?
    }
}

impl GroupCoordinator {
    /// What to subscribe to the metadata. It holds the coordinator weakly: the
    /// coordinator reads topics from the controller, and the controller holds its
    /// listeners, so a strong reference would keep both (and the log dirs' locks) alive.
    pub fn metadata_listener(self: &Arc<Self>) -> Arc<dyn MetadataListener> {
        Arc::new(LeadershipListener(Arc::downgrade(self)))
    }

    /// Loads and unloads `__consumer_offsets` partitions as their leadership changes; the
    /// replica manager, subscribed first, has the partitions' logs by then.
    fn apply_delta(&self, delta: &MetadataDelta) {
        let inline = !self.started.swap(true, Ordering::AcqRel);
        match delta.topics.get(OFFSETS_TOPIC) {
            Some(TopicDelta::Changed(topic)) => self.follow_leadership(topic, inline),
            Some(TopicDelta::Removed(topic)) => {
                for p in &topic.partitions {
                    self.on_resigned(p.partition, None);
                }
            }
            None => {}
        }
    }
}

struct LeadershipListener(Weak<GroupCoordinator>);

impl MetadataListener for LeadershipListener {
    fn on_delta(&self, image: &MetadataImage, delta: &MetadataDelta) -> Vec<ApplyError> {
        if let Some(groups) = self.0.upgrade() {
            groups.apply_delta(delta);
            // Topics gone from the metadata (not a replica deleted here while the topic
            // lives on): their offsets go too, written through the coordinator runtime.
            let deleted: std::collections::BTreeSet<String> = delta
                .topics
                .iter()
                .filter(|(name, d)| {
                    matches!(d, TopicDelta::Removed(_))
                        && name.as_str() != OFFSETS_TOPIC
                        && image.topic(name).is_none()
                })
                .map(|(name, _)| name.clone())
                .collect();
            if !deleted.is_empty() {
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move { groups.remove_offsets_of_deleted_topics(deleted).await });
                }
            }
        }
        Vec::new()
    }
}

/// The state epoch AlterShareGroupOffsets initializes a share-partition under: the
/// group's epoch where the share coordinator has no state for it (what its summary
/// answers then: state epoch 0, start offset -1; Kafka's choice), else at least one past
/// the state's epoch, fencing a leader that still writes under the old one.
fn alter_state_epoch(group_epoch: i32, summary: &crate::coordinator::share::StateSummary) -> i32 {
    let no_state = summary.state_epoch == 0 && summary.start_offset == -1;
    match no_state {
        true => group_epoch,
        false => group_epoch.max(summary.state_epoch.saturating_add(1)),
    }
}
