//! The single-node controller: the metadata image in memory, every change appended to the
//! KRaft metadata log (`metadata_log.rs`) before it is applied.
//!
//! Readers never wait on a write: they clone the published image (an `Arc`) under a lock
//! held for that clone only. Writers queue their change and one blocking thread drains the
//! queue: it checks each change against the image as the earlier ones in the same drain
//! leave it, appends every accepted change as its own batch in one write, fsyncs once,
//! then publishes the new image and answers. Concurrent creations (an 800-topic
//! auto-create) so share fsyncs, and no runtime worker blocks on disk.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use kafka_protocol::error::ResponseError;
use parking_lot::{Mutex, RwLock};
use tokio::sync::oneshot;
use uuid::Uuid;

use crate::auth::acl::{AclBinding, AclBindingFilter};
use crate::config::BrokerConfig;

use super::delta::{ApplyError, MetadataDelta, MetadataListener};
use super::image::MetadataImage;
use super::metadata_log::MetadataLog;
use super::plan::config_changes;
pub use super::plan::{bootstrap_records, take_leadership, ControllerConfig};
use super::records::{
    partition_record_version, ClientQuotaRecord, MetadataRecord, UserScramCredential,
    CONFIG_RESOURCE_TOPIC,
};
use super::{
    BrokerInfo, ConfigResource, Controller, ControllerError, NewTopic, ScramChange, TopicInfo,
};
use crate::quota::configs::{Alteration, ClientQuotas};
use crate::sasl::scram::{ScramCredential, ScramMechanism};

/// Producer ids are reserved in blocks (a ProducerIdsRecord each), so handing one out
/// rarely costs a write, and ids below a reserved block's end are never reused, also
/// after a crash. Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`.
const PRODUCER_ID_BLOCK: i64 = 1000;

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
    SetResourceConfigs {
        resource: ConfigResource,
        configs: BTreeMap<String, String>,
    },
    ReserveProducerIds,
    AlterScram(Vec<ScramChange>),
    CreateAcls(Vec<AclBinding>),
    DeleteAcls(Vec<AclBindingFilter>),
    /// AlterClientQuotas: one outcome per alteration; with `validate_only` nothing is
    /// written.
    AlterClientQuotas {
        alterations: Vec<Alteration>,
        validate_only: bool,
    },
}

/// The first metadata.version whose log may hold SCRAM credentials (3.5-IV2).
const SCRAM_METADATA_VERSION: i16 = 11;

/// What a committed change answers with, resolved against the new image.
enum Planned {
    Topic(String),
    Removed(Arc<TopicInfo>),
    Configs,
    ProducerIds { first: i64, end: i64 },
    Acls(Vec<Vec<AclBinding>>),
    ClientQuotas(Vec<Result<(), ControllerError>>),
}

enum Outcome {
    Topic(Arc<TopicInfo>),
    Configs,
    ProducerIds {
        first: i64,
        end: i64,
    },
    /// The ACLs deleted, per filter (none for a creation).
    Acls(Vec<Vec<AclBinding>>),
    ClientQuotas(Vec<Result<(), ControllerError>>),
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
    /// This broker as each listener advertises it (listeners may change at runtime,
    /// KIP-226); empty until [`Controller::advertise`] names them.
    endpoints: RwLock<Vec<(String, BrokerInfo)>>,
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
            endpoints: RwLock::new(Vec::new()),
        })
    }

    /// The published image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.inner.image.read().clone()
    }

    /// Writes an AccessControlEntryRecord for each ACL not already in force.
    pub async fn create_acls(&self, acls: Vec<AclBinding>) -> Result<(), ControllerError> {
        match self.submit(Op::CreateAcls(acls)).await? {
            Outcome::Acls(_) => Ok(()),
            _ => Err(internal("unexpected answer to an ACL creation")),
        }
    }

    /// Removes the ACLs each filter matches; returns them, per filter.
    pub async fn delete_acls(
        &self,
        filters: Vec<AclBindingFilter>,
    ) -> Result<Vec<Vec<AclBinding>>, ControllerError> {
        match self.submit(Op::DeleteAcls(filters)).await? {
            Outcome::Acls(deleted) => Ok(deleted),
            _ => Err(internal("unexpected answer to an ACL deletion")),
        }
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
            _ => Err(internal("unexpected answer to a topic change")),
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
                Planned::Configs => Ok(Outcome::Configs),
                Planned::ProducerIds { first, end } => Ok(Outcome::ProducerIds { first, end }),
                Planned::Acls(deleted) => Ok(Outcome::Acls(deleted)),
                Planned::ClientQuotas(results) => Ok(Outcome::ClientQuotas(results)),
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

    /// The next block of producer ids, reserved by this broker.
    fn plan_producer_ids(&self, image: &MetadataImage) -> (Vec<MetadataRecord>, Planned) {
        let first = image.next_producer_id();
        let end = first + PRODUCER_ID_BLOCK;
        let record = MetadataRecord::ProducerIds {
            broker_id: self.config.broker.id,
            broker_epoch: image.broker_epoch(self.config.broker.id).unwrap_or(-1),
            next_producer_id: end,
        };
        (vec![record], Planned::ProducerIds { first, end })
    }

    fn plan(
        &self,
        image: &MetadataImage,
        op: Op,
    ) -> Result<(Vec<MetadataRecord>, Planned), ControllerError> {
        match op {
            Op::Create(topic) => {
                let (records, info) = self.config.plan_create(image, topic)?;
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
                let (records, _) = self
                    .config
                    .plan_partitions(image, &name, count, assignments)?;
                Ok((records, Planned::Topic(name)))
            }
            Op::SetConfigs { name, configs } => {
                let t = image
                    .topic(&name)
                    .ok_or_else(|| ControllerError::unknown_topic(&name))?;
                Ok((
                    config_changes(CONFIG_RESOURCE_TOPIC, &name, &t.configs, &configs),
                    Planned::Topic(name),
                ))
            }
            Op::SetResourceConfigs { resource, configs } => {
                let empty = BTreeMap::new();
                let current = image.resource_configs(&resource).unwrap_or(&empty);
                let records =
                    config_changes(resource.resource_type, &resource.name, current, &configs);
                Ok((records, Planned::Configs))
            }
            Op::ReserveProducerIds => Ok(self.plan_producer_ids(image)),
            Op::AlterScram(changes) => Ok((plan_alter_scram(image, changes)?, Planned::Configs)),
            Op::CreateAcls(acls) => Ok((plan_create_acls(image, acls), Planned::Acls(Vec::new()))),
            Op::DeleteAcls(filters) => {
                let (records, deleted) = plan_delete_acls(image, &filters);
                Ok((records, Planned::Acls(deleted)))
            }
            Op::AlterClientQuotas {
                alterations,
                validate_only,
            } => {
                let (records, results) = plan_client_quotas(image, &alterations);
                let records = if validate_only { Vec::new() } else { records };
                Ok((records, Planned::ClientQuotas(results)))
            }
        }
    }
}

/// The UserScramCredentialRecords (or their removals) of an AlterUserScramCredentials,
/// refused below the metadata.version that brought them (3.5-IV2).
fn plan_alter_scram(
    image: &MetadataImage,
    changes: Vec<ScramChange>,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    if image.metadata_version().unwrap_or(0) < SCRAM_METADATA_VERSION {
        return Err(ControllerError::new(
            ResponseError::UnsupportedVersion,
            "The current metadata.version does not support SCRAM",
        ));
    }
    let records = changes
        .into_iter()
        .map(|c| match c.credential {
            Some(cred) => MetadataRecord::UserScramCredential(UserScramCredential {
                name: c.user,
                mechanism: c.mechanism.kafka_type(),
                salt: cred.salt,
                stored_key: cred.stored_key,
                server_key: cred.server_key,
                iterations: i32::try_from(cred.iterations).unwrap_or(i32::MAX),
            }),
            None => MetadataRecord::RemoveUserScramCredential {
                name: c.user,
                mechanism: c.mechanism.kafka_type(),
            },
        })
        .collect();
    Ok(records)
}

/// An AccessControlEntryRecord for each ACL not in the image yet (Kafka's
/// `AclControlManager.createAcls`: an existing ACL is a success that writes nothing),
/// each with a new id.
fn plan_create_acls(image: &MetadataImage, acls: Vec<AclBinding>) -> Vec<MetadataRecord> {
    let mut present: BTreeSet<AclBinding> = image
        .acls()
        .filter_map(|r| AclBinding::from_record(r))
        .collect();
    let taken: BTreeSet<Uuid> = image.acls().map(|r| r.id).collect();
    let mut records = Vec::new();
    for acl in acls {
        if present.insert(acl.clone()) {
            let id = loop {
                let id = Uuid::new_v4();
                if !taken.contains(&id) {
                    break id;
                }
            };
            records.push(MetadataRecord::AccessControlEntry(acl.to_record(id)));
        }
    }
    records
}

/// A RemoveAccessControlEntryRecord for each ACL a filter matches (once, whatever the
/// number of filters matching it), and what each filter matched.
fn plan_delete_acls(
    image: &MetadataImage,
    filters: &[AclBindingFilter],
) -> (Vec<MetadataRecord>, Vec<Vec<AclBinding>>) {
    let acls: Vec<(Uuid, AclBinding)> = image
        .acls()
        .filter_map(|r| Some((r.id, AclBinding::from_record(r)?)))
        .collect();
    let mut removed = BTreeSet::new();
    let deleted = filters
        .iter()
        .map(|f| {
            acls.iter()
                .filter(|(_, b)| f.matches(b))
                .map(|(id, b)| {
                    removed.insert(*id);
                    b.clone()
                })
                .collect()
        })
        .collect();
    let records = removed
        .into_iter()
        .map(|id| MetadataRecord::RemoveAccessControlEntry { id })
        .collect();
    (records, deleted)
}

/// The `ClientQuotaRecord`s of `alterations` (Kafka's `ClientQuotaControlManager`):
/// an entity failing a check gets its error and no record; one named twice, an error the
/// second time; a value equal to the current one, no record.
fn plan_client_quotas(
    image: &MetadataImage,
    alterations: &[Alteration],
) -> (Vec<MetadataRecord>, Vec<Result<(), ControllerError>>) {
    let mut records = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let results = alterations
        .iter()
        .map(|a| {
            if !seen.insert(&a.entity) {
                return Err(ControllerError::new(
                    ResponseError::InvalidRequest,
                    format!("Ignoring duplicate entity {}", a.entity),
                ));
            }
            let current = image.client_quotas().get(&a.entity);
            crate::quota::configs::altered(current, &a.ops)?;
            for (key, value) in &a.ops {
                let now = current.and_then(|c| c.get(key));
                let changed = match value {
                    None => now.is_some(),
                    Some(v) => now != Some(v),
                };
                if changed {
                    records.push(MetadataRecord::ClientQuota(ClientQuotaRecord::new(
                        &a.entity, key, *value,
                    )));
                }
            }
            Ok(())
        })
        .collect();
    (records, results)
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

    fn brokers_on(&self, listener: &str) -> Vec<BrokerInfo> {
        let endpoints = self.endpoints.read();
        if endpoints.is_empty() {
            return self.brokers();
        }
        endpoints
            .iter()
            .filter(|(name, _)| name == listener)
            .map(|(_, b)| b.clone())
            .collect()
    }

    async fn advertise(&self, config: &BrokerConfig) -> Result<(), ControllerError> {
        let me = |l: &crate::config::Listener| BrokerInfo {
            id: config.broker_id,
            host: l.host.clone(),
            port: l.port as i32,
            rack: config.rack.clone(),
        };
        let endpoints: Vec<(String, BrokerInfo)> = config
            .advertised_listeners
            .iter()
            .map(|l| (l.name.clone(), me(l)))
            .collect();
        if let Some((_, first)) = endpoints.first() {
            // Under the log's lock, so no commit publishes an image planned before this.
            let _log = self.inner.log.lock();
            let mut image = (**self.inner.image.read()).clone();
            image.set_cluster(vec![first.clone()], first.id);
            *self.inner.image.write() = Arc::new(image);
        }
        *self.endpoints.write() = endpoints;
        Ok(())
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
                .config
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
                .config
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

    fn resource_configs(&self, resource: &ConfigResource) -> BTreeMap<String, String> {
        self.inner
            .image
            .read()
            .resource_configs(resource)
            .cloned()
            .unwrap_or_default()
    }

    async fn set_resource_configs(
        &self,
        resource: ConfigResource,
        configs: BTreeMap<String, String>,
    ) -> Result<(), ControllerError> {
        match self
            .submit(Op::SetResourceConfigs { resource, configs })
            .await?
        {
            Outcome::Configs => Ok(()),
            _ => Err(internal("unexpected answer to a config change")),
        }
    }

    fn scram_credential(&self, mechanism: ScramMechanism, user: &str) -> Option<ScramCredential> {
        self.inner
            .image
            .read()
            .scram_credential(mechanism, user)
            .cloned()
    }

    fn scram_credentials(&self) -> Vec<(String, ScramMechanism, u32)> {
        let image = self.inner.image.read().clone();
        image
            .scram_credentials()
            .map(|(u, m, c)| (u.to_string(), m, c.iterations))
            .collect()
    }

    async fn alter_scram_credentials(
        &self,
        changes: Vec<ScramChange>,
    ) -> Result<(), ControllerError> {
        match self.submit(Op::AlterScram(changes)).await? {
            Outcome::Configs => Ok(()),
            _ => Err(internal("unexpected answer to a SCRAM credential change")),
        }
    }
    fn client_quotas(&self) -> ClientQuotas {
        self.inner.image.read().client_quotas().clone()
    }

    async fn alter_client_quotas(
        &self,
        alterations: Vec<Alteration>,
        validate_only: bool,
    ) -> Result<Vec<Result<(), ControllerError>>, ControllerError> {
        let op = Op::AlterClientQuotas {
            alterations,
            validate_only,
        };
        match self.submit(op).await? {
            Outcome::ClientQuotas(results) => Ok(results),
            _ => Err(internal("unexpected answer to a client quota change")),
        }
    }

    async fn next_producer_id(&self) -> Result<i64, ControllerError> {
        let mut block = self.producer_ids.lock().await;
        if block.0 >= block.1 {
            match self.submit(Op::ReserveProducerIds).await? {
                Outcome::ProducerIds { first, end } => *block = (first, end),
                _ => return Err(internal("unexpected answer to a producer-id reservation")),
            }
        }
        let id = block.0;
        block.0 += 1;
        Ok(id)
    }
}

/// Whether the metadata describes this node alone: a dir from a multi-broker Kafka
/// cluster (other brokers registered, replicas elsewhere) is not taken over, since
/// becoming the leader of every partition would rewrite that cluster's view of them.
fn single_node(image: &MetadataImage, me: i32) -> Result<(), String> {
    if let Some(other) = image.registered_brokers().find(|&b| b != me) {
        return Err(format!(
            "broker {other} is registered in it, besides node {me}"
        ));
    }
    for t in image.topics() {
        for p in &t.partitions {
            if let Some(other) = p.assignment.replicas.iter().find(|&&b| b != me) {
                return Err(format!(
                    "partition {}-{} has a replica on broker {other}",
                    t.name, p.partition
                ));
            }
        }
    }
    Ok(())
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
    let (mut log, replayed) = MetadataLog::open(metadata_dir, config.broker.id)?;
    if let Err(why) = single_node(&replayed.image, config.broker.id) {
        anyhow::bail!(
            "{}: {why}; skua runs a single node until cluster mode exists, so it leaves this metadata log as it is",
            log.dir().display()
        );
    }
    log.begin_epoch()?;
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
