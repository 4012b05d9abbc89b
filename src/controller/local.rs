//! The single-node controller: the metadata image in memory, every change appended to the
//! KRaft metadata log (`metadata_log.rs`) before it is applied.
//!
//! Readers never wait on a write: they clone the published image (an `Arc`) under a lock
//! held for that clone only. Writers queue their change and one blocking thread drains the
//! queue: it checks each change against the image as the earlier ones in the same drain
//! leave it, appends every accepted change as its own batch in one write, fsyncs once,
//! then publishes the new image and answers. Concurrent creations (an 800-topic
//! auto-create) so share fsyncs, and no runtime worker blocks on disk.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use kafka_protocol::error::ResponseError;
use parking_lot::{Mutex, RwLock};
use tokio::sync::oneshot;
use uuid::Uuid;

use super::delta::{ApplyError, MetadataDelta, MetadataListener};
use super::image::{MetadataImage, METADATA_VERSION};
use super::metadata_log::MetadataLog;
use super::records::{
    partition_record_version, MetadataRecord, PartitionChangeRecord, PartitionRecord,
    CONFIG_RESOURCE_TOPIC,
};
use super::{
    topic_name, BrokerInfo, Controller, ControllerError, LeaderAndIsr, NewTopic,
    PartitionAssignment, PartitionInfo, TopicInfo,
};

/// Producer ids are reserved in blocks (a ProducerIdsRecord each), so handing one out
/// rarely costs a write, and ids below a reserved block's end are never reused, also
/// after a crash. Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`.
const PRODUCER_ID_BLOCK: i64 = 1000;

/// What the controller needs to know to start.
pub struct ControllerConfig {
    pub broker: BrokerInfo,
    pub cluster_id: String,
    /// `directory.id` of each log dir, for the `directories` of new partitions.
    pub directory_ids: Vec<Uuid>,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
}

/// One change waiting for the writer.
enum Op {
    Create(NewTopic),
    Delete(String),
    CreatePartitions {
        name: String,
        count: i32,
        assignments: Option<Vec<Vec<i32>>>,
    },
    SetConfigs {
        name: String,
        configs: BTreeMap<String, String>,
    },
    ReserveProducerIds,
}

/// What a committed change answers with, resolved against the new image.
enum Planned {
    Topic(String),
    Removed(Arc<TopicInfo>),
    ProducerIds { first: i64, end: i64 },
}

enum Outcome {
    Topic(Arc<TopicInfo>),
    ProducerIds { first: i64, end: i64 },
}

struct Pending {
    op: Op,
    reply: oneshot::Sender<Result<Outcome, ControllerError>>,
}

#[derive(Default)]
struct Queue {
    pending: Vec<Pending>,
    draining: bool,
}

struct Inner {
    config: ControllerConfig,
    image: RwLock<Arc<MetadataImage>>,
    queue: Mutex<Queue>,
    /// `None` once an append failed: the log can no longer be trusted to hold what the
    /// image says, so every later change is refused until a restart replays it.
    log: Mutex<Option<MetadataLog>>,
    partition_version: u32,
    /// Followers of the metadata, each handed every change's delta in order, on the
    /// writer thread, before the change is answered.
    listeners: RwLock<Vec<Arc<dyn MetadataListener>>>,
}

pub struct LocalController {
    inner: Arc<Inner>,
    /// The producer-id block handed out from: [next, end).
    producer_ids: tokio::sync::Mutex<(i64, i64)>,
}

impl LocalController {
    /// Starts on an opened metadata log: `image` is what replaying it gave. Partitions
    /// assigned here whose leadership or ISR says otherwise (Kafka's controlled shutdown
    /// leaves them leaderless) are taken over with a new leader epoch, as Kafka's
    /// controller does when the broker returns.
    pub fn start(
        config: ControllerConfig,
        log: MetadataLog,
        image: MetadataImage,
        open_transaction: bool,
    ) -> anyhow::Result<LocalController> {
        let partition_version = partition_record_version(image.metadata_version().unwrap_or(7));
        let mut image = image;
        image.set_cluster(vec![config.broker.clone()], config.broker.id);
        if open_transaction {
            // Kafka's new active controller aborts a transaction its predecessor left open.
            log.append(&[vec![MetadataRecord::AbortTransaction]], partition_version)?;
        }
        let takeover = take_leadership(&image, config.broker.id);
        if !takeover.is_empty() {
            tracing::info!(
                partitions = takeover.len(),
                epoch = log.epoch(),
                "taking leadership of the partitions assigned to this broker"
            );
            log.append_each(takeover.clone(), partition_version)?;
            for r in &takeover {
                image.replay(r).map_err(anyhow::Error::msg)?;
            }
        }
        Ok(LocalController {
            inner: Arc::new(Inner {
                config,
                image: RwLock::new(Arc::new(image)),
                queue: Mutex::new(Queue::default()),
                log: Mutex::new(Some(log)),
                partition_version,
                listeners: RwLock::new(Vec::new()),
            }),
            producer_ids: tokio::sync::Mutex::new((0, 0)),
        })
    }

    /// The published image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.inner.image.read().clone()
    }

    /// Closes the metadata log cleanly.
    pub fn shutdown(&self) {
        if let Some(log) = self.inner.log.lock().as_ref() {
            if let Err(e) = log.close() {
                tracing::error!(error = %e, "cannot close the metadata log cleanly");
            }
        }
    }

    /// Every write goes through here: queued, committed by the writer thread, answered.
    async fn submit(&self, op: Op) -> Result<Outcome, ControllerError> {
        let (reply, answer) = oneshot::channel();
        let start_writer = {
            let mut q = self.inner.queue.lock();
            q.pending.push(Pending { op, reply });
            !std::mem::replace(&mut q.draining, true)
        };
        if start_writer {
            let inner = self.inner.clone();
            tokio::task::spawn_blocking(move || inner.drain());
        }
        answer.await.unwrap_or_else(|_| {
            Err(ControllerError::new(
                ResponseError::UnknownServerError,
                "the metadata writer stopped",
            ))
        })
    }

    async fn submit_topic(&self, op: Op) -> Result<Arc<TopicInfo>, ControllerError> {
        match self.submit(op).await? {
            Outcome::Topic(t) => Ok(t),
            Outcome::ProducerIds { .. } => Err(internal("unexpected producer-id answer")),
        }
    }
}

impl Inner {
    fn drain(&self) {
        loop {
            let batch = {
                let mut q = self.queue.lock();
                if q.pending.is_empty() {
                    q.draining = false;
                    return;
                }
                std::mem::take(&mut q.pending)
            };
            self.commit(batch);
        }
    }

    /// Plans each change against the image as the earlier ones leave it, writes them all
    /// with one fsync, then publishes the image and answers.
    fn commit(&self, batch: Vec<Pending>) {
        let mut guard = self.log.lock();
        let Some(log) = guard.as_ref() else {
            for p in batch {
                let _ = p.reply.send(Err(log_failed()));
            }
            return;
        };
        let mut image = (**self.image.read()).clone();
        let mut writes = Vec::new();
        let mut answers: Vec<(oneshot::Sender<Result<Outcome, ControllerError>>, Planned)> =
            Vec::new();
        let mut changes = Vec::new();
        for p in batch {
            let (records, planned) = match self.plan(&image, p.op) {
                Ok(planned) => planned,
                Err(e) => {
                    let _ = p.reply.send(Err(e));
                    continue;
                }
            };
            let replayed: Result<Vec<_>, String> =
                records.iter().map(|r| image.replay(r)).collect();
            let replayed = match replayed {
                Ok(c) => c,
                Err(e) => {
                    // Planned records always apply; if one does not, nothing of this drain
                    // is written and the image stays as it was.
                    tracing::error!(error = %e, "a planned metadata change does not apply");
                    let _ = p.reply.send(Err(internal(&e)));
                    for (reply, _) in answers {
                        let _ = reply.send(Err(internal(&e)));
                    }
                    return;
                }
            };
            writes.push(records);
            changes.push(replayed);
            answers.push((p.reply, planned));
        }
        if let Err(e) = log.append(&writes, self.partition_version) {
            tracing::error!(error = %e, "cannot append to the metadata log; metadata changes are refused until a restart");
            *guard = None;
            for (reply, _) in answers {
                let _ = reply.send(Err(storage(&e)));
            }
            return;
        }
        let image = Arc::new(image);
        *self.image.write() = image.clone();
        for ((reply, planned), changes) in answers.into_iter().zip(changes) {
            let delta = MetadataDelta::from_changes(&changes, &image);
            let failed = self.publish(&image, &delta);
            let outcome = match planned {
                _ if !failed.is_empty() => Err(storage(&failed.join("; "))),
                Planned::Topic(name) => image
                    .topic(&name)
                    .cloned()
                    .map(Outcome::Topic)
                    .ok_or_else(|| ControllerError::unknown_topic(&name)),
                Planned::Removed(t) => Ok(Outcome::Topic(t)),
                Planned::ProducerIds { first, end } => Ok(Outcome::ProducerIds { first, end }),
            };
            let _ = reply.send(outcome);
        }
    }

    /// Hands `delta` to every listener; returns what they could not apply.
    fn publish(&self, image: &MetadataImage, delta: &MetadataDelta) -> Vec<String> {
        if delta.is_empty() {
            return Vec::new();
        }
        let mut failed = Vec::new();
        for listener in self.listeners.read().iter() {
            for e in listener.on_delta(image, delta) {
                tracing::error!(topic = %e.topic, error = %e.message, "metadata change not applied");
                failed.push(format!("{}: {}", e.topic, e.message));
            }
        }
        failed
    }

    fn plan(
        &self,
        image: &MetadataImage,
        op: Op,
    ) -> Result<(Vec<MetadataRecord>, Planned), ControllerError> {
        match op {
            Op::Create(topic) => {
                let (records, info) = self.plan_create(image, topic)?;
                Ok((records, Planned::Topic(info.name.clone())))
            }
            Op::Delete(name) => {
                let t = image
                    .topic(&name)
                    .cloned()
                    .ok_or_else(|| ControllerError::unknown_topic(&name))?;
                let records = vec![MetadataRecord::RemoveTopic {
                    topic_id: t.topic_id,
                }];
                Ok((records, Planned::Removed(t)))
            }
            Op::CreatePartitions {
                name,
                count,
                assignments,
            } => {
                let (records, _) = self.plan_partitions(image, &name, count, assignments)?;
                Ok((records, Planned::Topic(name)))
            }
            Op::SetConfigs { name, configs } => {
                let t = image
                    .topic(&name)
                    .ok_or_else(|| ControllerError::unknown_topic(&name))?;
                Ok((
                    config_changes(&name, &t.configs, &configs),
                    Planned::Topic(name),
                ))
            }
            Op::ReserveProducerIds => {
                let first = image.next_producer_id();
                let end = first + PRODUCER_ID_BLOCK;
                let record = MetadataRecord::ProducerIds {
                    broker_id: self.config.broker.id,
                    broker_epoch: image.broker_epoch(self.config.broker.id).unwrap_or(-1),
                    next_producer_id: end,
                };
                Ok((vec![record], Planned::ProducerIds { first, end }))
            }
        }
    }

    /// The records creating `topic` (TopicRecord, its ConfigRecords, a PartitionRecord per
    /// partition, as Kafka's controller writes them) and the topic they make.
    fn plan_create(
        &self,
        image: &MetadataImage,
        topic: NewTopic,
    ) -> Result<(Vec<MetadataRecord>, TopicInfo), ControllerError> {
        topic_name::validate(&topic.name)
            .map_err(|m| ControllerError::new(ResponseError::InvalidTopicException, m))?;
        let count = if topic.assignments.is_empty() {
            let n = if topic.num_partitions == -1 {
                self.config.num_partitions
            } else {
                topic.num_partitions
            };
            let rf = if topic.replication_factor == -1 {
                self.config.default_replication_factor
            } else {
                topic.replication_factor
            };
            if n <= 0 {
                return Err(ControllerError::new(
                    ResponseError::InvalidPartitions,
                    "Number of partitions must be larger than 0.",
                ));
            }
            if rf <= 0 {
                return Err(ControllerError::new(
                    ResponseError::InvalidReplicationFactor,
                    "Replication factor must be larger than 0.",
                ));
            }
            self.check_replication_factor(rf)?;
            n
        } else {
            if topic.num_partitions != -1 || topic.replication_factor != -1 {
                return Err(ControllerError::new(
                    ResponseError::InvalidRequest,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
                ));
            }
            let expected: Vec<i32> = (0..topic.assignments.len() as i32).collect();
            if topic.assignments.keys().copied().collect::<Vec<_>>() != expected {
                return Err(ControllerError::new(
                    ResponseError::InvalidReplicaAssignment,
                    "Partitions should be a consecutive 0-based integer sequence",
                ));
            }
            for replicas in topic.assignments.values() {
                self.check_assignment(replicas)?;
            }
            topic.assignments.len() as i32
        };
        if image.topic(&topic.name).is_some() {
            return Err(ControllerError::new(
                ResponseError::TopicAlreadyExists,
                format!("Topic '{}' already exists.", topic.name),
            ));
        }
        if let Some(other) = image
            .topics()
            .find(|t| topic_name::collides(&t.name, &topic.name))
        {
            return Err(ControllerError::new(
                ResponseError::InvalidTopicException,
                format!(
                    "Topic '{}' collides with existing topic: {}",
                    topic.name, other.name
                ),
            ));
        }
        let topic_id = loop {
            let id = crate::log::new_kafka_uuid();
            if image.topic_by_id(id).is_none() {
                break id;
            }
        };
        let partitions: Vec<PartitionInfo> = (0..count).map(|p| self.new_partition(p)).collect();
        let mut records = vec![MetadataRecord::Topic {
            name: topic.name.clone(),
            topic_id,
        }];
        records.extend(config_changes(
            &topic.name,
            &BTreeMap::new(),
            &topic.configs,
        ));
        records.extend(
            partitions
                .iter()
                .map(|p| MetadataRecord::Partition(partition_record(topic_id, p))),
        );
        let info = TopicInfo {
            name: topic.name,
            topic_id,
            partitions,
            configs: topic.configs,
        };
        Ok((records, info))
    }

    fn plan_partitions(
        &self,
        image: &MetadataImage,
        name: &str,
        count: i32,
        assignments: Option<Vec<Vec<i32>>>,
    ) -> Result<(Vec<MetadataRecord>, TopicInfo), ControllerError> {
        let current = image
            .topic(name)
            .ok_or_else(|| ControllerError::unknown_topic(name))?;
        let existing = current.partitions.len() as i32;
        if count < existing {
            return Err(ControllerError::new(
                ResponseError::InvalidPartitions,
                format!("Topic currently has {existing} partitions, which is higher than the requested {count}."),
            ));
        }
        if count == existing {
            return Err(ControllerError::new(
                ResponseError::InvalidPartitions,
                format!("Topic already has {existing} partitions."),
            ));
        }
        let rf = current
            .partitions
            .first()
            .map_or(1, |p| p.assignment.replicas.len() as i16);
        self.check_replication_factor(rf)?;
        if let Some(assignments) = &assignments {
            if assignments.len() as i32 != count - existing {
                return Err(ControllerError::new(
                    ResponseError::InvalidReplicaAssignment,
                    format!(
                        "Increasing the number of partitions by {} but {} assignments provided.",
                        count - existing,
                        assignments.len()
                    ),
                ));
            }
            for replicas in assignments {
                self.check_assignment(replicas)?;
            }
        }
        let added: Vec<PartitionInfo> = (existing..count).map(|p| self.new_partition(p)).collect();
        let records = added
            .iter()
            .map(|p| MetadataRecord::Partition(partition_record(current.topic_id, p)))
            .collect();
        let mut info = (**current).clone();
        info.partitions.extend(added);
        Ok((records, info))
    }

    fn new_partition(&self, partition: i32) -> PartitionInfo {
        let me = self.config.broker.id;
        // With one log dir the partition's dir is known now; with several, LogManager
        // picks one when it creates the log, and the record says "unassigned" as Kafka's
        // controller does for a broker with several dirs.
        let directory = match self.config.directory_ids.as_slice() {
            [only] => *only,
            _ => Uuid::nil(),
        };
        PartitionInfo {
            partition,
            assignment: PartitionAssignment {
                replicas: vec![me],
                directories: vec![directory],
            },
            state: LeaderAndIsr {
                leader: me,
                leader_epoch: 0,
                partition_epoch: 0,
                isr: vec![me],
                eligible_leader_replicas: Vec::new(),
                last_known_elr: Vec::new(),
                leader_recovery_state: 0,
            },
        }
    }

    fn check_replication_factor(&self, rf: i16) -> Result<(), ControllerError> {
        if rf != 1 {
            return Err(ControllerError::new(
                ResponseError::InvalidReplicationFactor,
                format!("Replication factor: {rf} larger than available brokers: 1."),
            ));
        }
        Ok(())
    }

    fn check_assignment(&self, replicas: &[i32]) -> Result<(), ControllerError> {
        if replicas.is_empty() || replicas.iter().any(|&b| b != self.config.broker.id) {
            return Err(ControllerError::new(
                ResponseError::InvalidReplicaAssignment,
                format!("Replica assignment {replicas:?} names brokers that are not live"),
            ));
        }
        Ok(())
    }
}

fn partition_record(topic_id: Uuid, p: &PartitionInfo) -> PartitionRecord {
    PartitionRecord {
        partition_id: p.partition,
        topic_id,
        replicas: p.assignment.replicas.clone(),
        isr: p.state.isr.clone(),
        removing_replicas: Vec::new(),
        adding_replicas: Vec::new(),
        leader: p.state.leader,
        leader_recovery_state: p.state.leader_recovery_state,
        leader_epoch: p.state.leader_epoch,
        partition_epoch: p.state.partition_epoch,
        directories: p.assignment.directories.clone(),
        eligible_leader_replicas: p.state.eligible_leader_replicas.clone(),
        last_known_elr: p.state.last_known_elr.clone(),
    }
}

/// ConfigRecords turning `from` into `to`: set keys that are new or changed, null for
/// keys that are gone.
fn config_changes(
    topic: &str,
    from: &BTreeMap<String, String>,
    to: &BTreeMap<String, String>,
) -> Vec<MetadataRecord> {
    let record = |name: &str, value: Option<&String>| MetadataRecord::Config {
        resource_type: CONFIG_RESOURCE_TOPIC,
        resource_name: topic.to_string(),
        name: name.to_string(),
        value: value.cloned(),
    };
    let mut out: Vec<MetadataRecord> = to
        .iter()
        .filter(|(k, v)| from.get(*k) != Some(v))
        .map(|(k, v)| record(k, Some(v)))
        .collect();
    out.extend(
        from.keys()
            .filter(|k| !to.contains_key(*k))
            .map(|k| record(k, None)),
    );
    out
}

/// PartitionChangeRecords making `me` the leader, sole ISR member and nothing else for
/// every partition assigned here that is not already so (a new leader epoch each).
pub fn take_leadership(image: &MetadataImage, me: i32) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for t in image.topics() {
        for p in t
            .partitions
            .iter()
            .filter(|p| p.assignment.replicas.contains(&me))
        {
            let s = &p.state;
            let settled = s.leader == me
                && s.isr == [me]
                && s.eligible_leader_replicas.is_empty()
                && s.last_known_elr.is_empty()
                && s.leader_recovery_state == 0;
            if settled {
                continue;
            }
            out.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                partition_id: p.partition,
                topic_id: t.topic_id,
                isr: (s.isr != [me]).then(|| vec![me]),
                leader: me,
                leader_recovery_state: if s.leader_recovery_state != 0 { 0 } else { -1 },
                eligible_leader_replicas: (!s.eligible_leader_replicas.is_empty()).then(Vec::new),
                last_known_elr: (!s.last_known_elr.is_empty()).then(Vec::new),
                ..Default::default()
            }));
        }
    }
    out
}

/// The records a new metadata log starts with: Kafka 4.0's finalized features
/// (metadata.version 4.0-IV3, the level Kafka 4.0 formats with, which every Kafka from
/// 4.0 on reads; group.version 1 for KIP-848 groups; transaction.version 2).
pub fn bootstrap_records() -> Vec<MetadataRecord> {
    [
        (METADATA_VERSION, 25),
        ("group.version", 1),
        ("transaction.version", 2),
    ]
    .into_iter()
    .map(|(name, level)| MetadataRecord::FeatureLevel {
        name: name.to_string(),
        level,
    })
    .collect()
}

fn internal(why: &str) -> ControllerError {
    ControllerError::new(ResponseError::UnknownServerError, why)
}

fn storage(e: &dyn std::fmt::Display) -> ControllerError {
    ControllerError::new(ResponseError::KafkaStorageError, e.to_string())
}

fn log_failed() -> ControllerError {
    ControllerError::new(
        ResponseError::KafkaStorageError,
        "the metadata log failed; restart the broker",
    )
}

#[async_trait]
impl Controller for LocalController {
    fn cluster_id(&self) -> String {
        self.inner.config.cluster_id.clone()
    }

    fn controller_id(&self) -> i32 {
        self.inner.image.read().controller_id()
    }

    fn brokers(&self) -> Vec<BrokerInfo> {
        self.inner.image.read().brokers().to_vec()
    }

    fn topics(&self) -> Vec<Arc<TopicInfo>> {
        self.image().topics().cloned().collect()
    }

    fn topic(&self, name: &str) -> Option<Arc<TopicInfo>> {
        self.inner.image.read().topic(name).cloned()
    }

    fn topic_by_id(&self, id: Uuid) -> Option<Arc<TopicInfo>> {
        self.inner.image.read().topic_by_id(id).cloned()
    }

    fn subscribe(&self, listener: Arc<dyn MetadataListener>) -> Vec<ApplyError> {
        // Under the log lock, so no change commits between the image it is handed and
        // the first delta it is sent.
        let _no_commit = self.inner.log.lock();
        let image = self.image();
        let failed = listener.on_delta(&image, &MetadataDelta::everything(&image));
        self.inner.listeners.write().push(listener);
        failed
    }

    fn broker_epoch(&self) -> i64 {
        self.inner
            .image
            .read()
            .broker_epoch(self.inner.config.broker.id)
            .unwrap_or(-1)
    }

    async fn create_topic(
        &self,
        topic: NewTopic,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, ControllerError> {
        if validate_only {
            let image = self.image();
            return self
                .inner
                .plan_create(&image, topic)
                .map(|(_, info)| Arc::new(info));
        }
        self.submit_topic(Op::Create(topic)).await
    }

    async fn create_topics(
        &self,
        topics: Vec<NewTopic>,
    ) -> Vec<Result<Arc<TopicInfo>, ControllerError>> {
        // Queued together, so one drain commits them with one fsync.
        let pending: Vec<_> = topics
            .into_iter()
            .map(|t| self.submit_topic(Op::Create(t)))
            .collect();
        futures::future::join_all(pending).await
    }

    async fn delete_topic(&self, name: &str) -> Result<Arc<TopicInfo>, ControllerError> {
        self.submit_topic(Op::Delete(name.to_string())).await
    }

    async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        assignments: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, ControllerError> {
        if validate_only {
            let image = self.image();
            return self
                .inner
                .plan_partitions(&image, name, count, assignments)
                .map(|(_, info)| Arc::new(info));
        }
        self.submit_topic(Op::CreatePartitions {
            name: name.to_string(),
            count,
            assignments,
        })
        .await
    }

    async fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicInfo>, ControllerError> {
        self.submit_topic(Op::SetConfigs {
            name: name.to_string(),
            configs,
        })
        .await
    }

    async fn next_producer_id(&self) -> Result<i64, ControllerError> {
        let mut block = self.producer_ids.lock().await;
        if block.0 >= block.1 {
            match self.submit(Op::ReserveProducerIds).await? {
                Outcome::ProducerIds { first, end } => *block = (first, end),
                Outcome::Topic(_) => return Err(internal("unexpected topic answer")),
            }
        }
        let id = block.0;
        block.0 += 1;
        Ok(id)
    }
}

/// Opens the controller on the metadata log under `metadata_dir`. When there is none yet
/// it is first created holding `initial_records` (see `adopt.rs`; the caller computes them
/// only when `MetadataLog::exists` says there is no log).
pub fn open(
    metadata_dir: &Path,
    config: ControllerConfig,
    initial_records: Option<Vec<MetadataRecord>>,
) -> anyhow::Result<LocalController> {
    super::metadata_log::remove_unfinished(metadata_dir)?;
    if !MetadataLog::exists(metadata_dir) {
        let records = initial_records.unwrap_or_else(bootstrap_records);
        let mut scratch = MetadataImage::default();
        for r in &records {
            scratch.replay(r).map_err(anyhow::Error::msg)?;
        }
        let version = partition_record_version(scratch.metadata_version().unwrap_or(7));
        MetadataLog::create(metadata_dir, config.broker.id, &records, version)?;
        tracing::info!(
            dir = %metadata_dir.display(),
            topics = scratch.topic_count(),
            "created the metadata log"
        );
    }
    let (log, replayed) = MetadataLog::open(metadata_dir, config.broker.id)?;
    tracing::info!(
        records = replayed.records,
        topics = replayed.image.topic_count(),
        epoch = log.epoch(),
        "metadata log replayed"
    );
    LocalController::start(config, log, replayed.image, replayed.open_transaction)
}

#[cfg(test)]
#[path = "local_tests.rs"]
mod tests;
