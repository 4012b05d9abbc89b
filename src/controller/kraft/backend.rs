//! The [`Controller`] a KRaft broker's handlers talk to: reads answer from the image the
//! driver publishes (topics, partitions, the unfenced brokers and their endpoints), and
//! metadata changes go to the active controller as Kafka's brokers send them
//! (CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs of topics,
//! brokers and groups, with the controller's errors answered as they come;
//! AllocateProducerIds for blocks of producer ids). A change is answered once the image
//! shows it, so that a client told a topic exists finds it in this broker's Metadata.
//!
//! SCRAM credentials and client quotas are read from the image (logins and quota
//! managers follow the controller's records); client quota changes are forwarded as
//! AlterClientQuotas. What the controller authorizes against the client's principal
//! (ACLs, SCRAM credential changes, reassignments, elections, the quorum) goes in an
//! Envelope through [`KraftController::forward`] (see the module `envelope`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse, CreatePartitionsRequest,
    CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};
use parking_lot::Mutex;
use uuid::Uuid;

use crate::client::reconnecting::ApiVersions;
use crate::client::{Client, ClientConfig};
use crate::config::BrokerConfig;
use crate::controller::delta::{ApplyError, MetadataDelta, MetadataListener};
use crate::controller::image::MetadataImage;
use crate::controller::records::CONFIG_RESOURCE_TOPIC;
use crate::controller::{
    BrokerInfo, ConfigResource, Controller, ControllerError, LeaderAndIsr, NewTopic,
    PartitionAssignment, PartitionInfo, TopicInfo,
};
use crate::sasl::scram::{ScramCredential, ScramMechanism};

use super::driver::{Published, Status};
use super::follower::Endpoint;

/// How long a forwarded request waits before trying the controller again.
const FORWARD_RETRY_BACKOFF: Duration = Duration::from_millis(100);

/// IncrementalAlterConfigs' operations.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;

struct Shared {
    image: Arc<MetadataImage>,
    listeners: Vec<Arc<dyn MetadataListener>>,
}

/// The producer ids of the block the controller gave, not yet handed out.
#[derive(Default)]
struct ProducerIdBlock {
    next: i64,
    end: i64,
}

pub struct KraftController {
    broker_id: i32,
    cluster_id: String,
    /// The listener other brokers are reached on (`brokers()`).
    inter_broker_listener: String,
    shared: Mutex<Shared>,
    /// Every published image, for changes waiting to see theirs.
    images: tokio::sync::watch::Sender<Arc<MetadataImage>>,
    /// The driver's status, once it is started ([`KraftController::attach`]).
    status: std::sync::OnceLock<tokio::sync::watch::Receiver<Status>>,
    client: ClientConfig,
    clients: Mutex<BTreeMap<(String, u16), Arc<Client>>>,
    producer_ids: tokio::sync::Mutex<ProducerIdBlock>,
    /// How long a change waits for the controller and then for the image to show it.
    timeout: Duration,
    /// The active controller's ApiVersions, as last learnt on a connection to it: what
    /// the forwarded APIs' advertised versions are narrowed to (Kafka's
    /// `NodeApiVersions` of the controller).
    controller_versions: Mutex<Option<Arc<ApiVersions>>>,
}

impl KraftController {
    /// `inter_broker_listener`: the listener other brokers are reached on.
    pub fn new(
        broker_id: i32,
        inter_broker_listener: String,
        cluster_id: String,
        client: ClientConfig,
    ) -> Arc<KraftController> {
        let image = Arc::new(MetadataImage::default());
        Arc::new(KraftController {
            broker_id,
            cluster_id,
            inter_broker_listener,
            shared: Mutex::new(Shared {
                image: image.clone(),
                listeners: Vec::new(),
            }),
            images: tokio::sync::watch::Sender::new(image),
            status: std::sync::OnceLock::new(),
            timeout: client.request_timeout,
            client,
            clients: Mutex::new(BTreeMap::new()),
            producer_ids: tokio::sync::Mutex::new(ProducerIdBlock::default()),
            controller_versions: Mutex::new(None),
        })
    }

    /// The active controller's ApiVersions once known (None before a connection to it).
    pub fn controller_api_versions(&self) -> Option<Arc<ApiVersions>> {
        self.controller_versions.lock().clone()
    }

    /// Connects to the active controller, if need be, to learn its ApiVersions.
    pub async fn learn_controller_api_versions(&self) {
        let Some(to) = self.status().controller else {
            return;
        };
        if let Ok(client) = self.client_for(&to).await {
            self.remember_versions(&client).await;
        }
    }

    async fn remember_versions(&self, client: &Client) {
        if let Ok(versions) = client.api_versions().await {
            *self.controller_versions.lock() = Some(versions);
        }
    }

    pub fn broker_id(&self) -> i32 {
        self.broker_id
    }

    pub fn image(&self) -> Arc<MetadataImage> {
        self.shared.lock().image.clone()
    }

    /// Follows the status of the driver this controller was handed to as its
    /// [`Published`] (the active controller's address, the broker epoch).
    pub fn attach(&self, status: tokio::sync::watch::Receiver<Status>) {
        let _ = self.status.set(status);
    }

    fn status(&self) -> Status {
        match self.status.get() {
            Some(s) => s.borrow().clone(),
            None => Status::default(),
        }
    }

    /// Sends `request` to the active controller at the newest version in `versions` it
    /// also speaks.
    async fn send<R: Request>(
        &self,
        request: R,
        versions: (i16, i16),
    ) -> Result<R::Response, ControllerError> {
        let unavailable = |why: String| ControllerError::new(ResponseError::NotController, why);
        let Some(to) = self.status().controller else {
            return Err(unavailable("the active controller is not known yet".into()));
        };
        let client = self.client_for(&to).await?;
        self.remember_versions(&client).await;
        client
            .send_negotiated(&request, versions.0, versions.1)
            .await
            .map(|(_, r)| r)
            .map_err(|e| unavailable(format!("the active controller did not answer: {e}")))
    }

    /// [`send`](Self::send) for the broker's own requests outside this file (`dirs`).
    pub(super) async fn send_to_active<R: Request>(
        &self,
        request: R,
        versions: (i16, i16),
    ) -> Result<R::Response, ControllerError> {
        self.send(request, versions).await
    }

    /// Every image as it is published.
    pub(super) fn images(&self) -> tokio::sync::watch::Receiver<Arc<MetadataImage>> {
        self.images.subscribe()
    }

    /// Forwards a client's request to the active controller in an Envelope (see
    /// `envelope`), answering the controller's response. As Kafka's
    /// `NodeToControllerChannelManager` does, an unknown or unreachable controller, and
    /// one that is no longer active, are tried again until the request timeout
    /// (REQUEST_TIMED_OUT); an Envelope the controller refused is UNKNOWN_SERVER_ERROR.
    pub async fn forward<R: Request>(
        &self,
        origin: &super::envelope::Origin,
        request: &R,
        version: i16,
    ) -> Result<R::Response, ControllerError> {
        use super::envelope::{unwrap, wrap, Unwrapped};
        use kafka_protocol::messages::{EnvelopeRequest, EnvelopeResponse};
        let envelope = wrap(origin, request, version)?;
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            let answer: Result<EnvelopeResponse, ControllerError> =
                self.send::<EnvelopeRequest>(envelope.clone(), (0, 0)).await;
            let last = match answer.map(|r| unwrap::<R>(r, version, origin.correlation_id)) {
                Ok(Ok(response)) => return Ok(response),
                Ok(Err(Unwrapped::EnvelopeError(e))) => {
                    return Err(ControllerError::new(
                        ResponseError::UnknownServerError,
                        format!("the controller refused the forwarded request's envelope: {e}"),
                    ))
                }
                Ok(Err(Unwrapped::Malformed(why))) => {
                    return Err(ControllerError::new(
                        ResponseError::UnknownServerError,
                        format!("the controller's answer to the forwarded request: {why}"),
                    ))
                }
                Ok(Err(Unwrapped::NotController)) => {
                    "the controller is no longer the active one".to_string()
                }
                Err(e) => e.message,
            };
            if tokio::time::Instant::now() + FORWARD_RETRY_BACKOFF >= deadline {
                return Err(ControllerError::new(
                    ResponseError::RequestTimedOut,
                    format!("the request could not be forwarded to the active controller: {last}"),
                ));
            }
            tokio::time::sleep(FORWARD_RETRY_BACKOFF).await;
        }
    }

    /// One client per controller address.
    async fn client_for(&self, to: &Endpoint) -> Result<Arc<Client>, ControllerError> {
        let key = (to.host.clone(), to.port);
        if let Some(c) = self.clients.lock().get(&key) {
            return Ok(c.clone());
        }
        let addr = tokio::net::lookup_host((to.host.as_str(), to.port))
            .await
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| {
                ControllerError::new(
                    ResponseError::NotController,
                    format!("cannot resolve {}", to.host),
                )
            })?;
        let c = Arc::new(Client::new(addr, self.client.clone()));
        self.clients.lock().insert(key, c.clone());
        Ok(c)
    }

    /// IncrementalAlterConfigs of one resource at the active controller, turning its
    /// configs from `before` into `after` (what is gone deleted, the rest set); the
    /// controller's error is answered as it comes.
    async fn alter_configs(
        &self,
        resource_type: i8,
        name: &str,
        before: &BTreeMap<String, String>,
        after: &BTreeMap<String, String>,
    ) -> Result<(), ControllerError> {
        let mut changes: Vec<AlterableConfig> = after
            .iter()
            .filter(|(k, v)| before.get(*k) != Some(*v))
            .map(|(k, v)| {
                AlterableConfig::default()
                    .with_name(StrBytes::from_string(k.clone()))
                    .with_config_operation(OP_SET)
                    .with_value(Some(StrBytes::from_string(v.clone())))
            })
            .collect();
        changes.extend(before.keys().filter(|k| !after.contains_key(*k)).map(|k| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string(k.clone()))
                .with_config_operation(OP_DELETE)
        }));
        let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(StrBytes::from_string(name.into()))
                .with_configs(changes),
        ]);
        let response: IncrementalAlterConfigsResponse = self.send(request, (0, 1)).await?;
        let Some(r) = response.responses.first() else {
            return Err(ControllerError::new(
                ResponseError::UnknownServerError,
                "the controller answered IncrementalAlterConfigs without the resource",
            ));
        };
        error(r.error_code, r.error_message.as_ref())
    }

    /// Waits until the published image satisfies `done`, answering what it returns.
    pub(super) async fn until<T>(
        &self,
        what: &str,
        mut done: impl FnMut(&MetadataImage) -> Option<T>,
    ) -> Result<T, ControllerError> {
        let mut images = self.images.subscribe();
        let wait = async {
            loop {
                let image = images.borrow_and_update().clone();
                if let Some(t) = done(&image) {
                    return Some(t);
                }
                if images.changed().await.is_err() {
                    return None;
                }
            }
        };
        match tokio::time::timeout(self.timeout, wait).await {
            Ok(Some(t)) => Ok(t),
            _ => Err(ControllerError::new(
                ResponseError::RequestTimedOut,
                format!("the controller made the change, but this broker's metadata does not show {what} yet"),
            )),
        }
    }
}

fn error(code: i16, message: Option<&StrBytes>) -> Result<(), ControllerError> {
    match ResponseError::try_from_code(code) {
        None => Ok(()),
        Some(e) => Err(ControllerError::new(
            e,
            message.map_or_else(|| e.to_string(), |m| m.to_string()),
        )),
    }
}

impl Published for KraftController {
    /// The image is handed on with its live brokers set (the unfenced ones on the
    /// inter-broker listener, and the lowest of them as the controller clients are told
    /// of): the replica manager's cluster view, the replica fetchers' leader addresses,
    /// read them as they read the single node's.
    fn published(&self, image: &Arc<MetadataImage>, delta: &MetadataDelta) {
        let mut with_brokers = (**image).clone();
        let brokers = image.unfenced_brokers_on(&self.inter_broker_listener);
        let controller_id = brokers.first().map_or(-1, |b| b.id);
        with_brokers.set_cluster(brokers, controller_id);
        let image = Arc::new(with_brokers);
        let mut shared = self.shared.lock();
        shared.image = image.clone();
        for listener in &shared.listeners {
            for e in listener.on_delta(&image, delta) {
                tracing::error!(topic = %e.topic, "a metadata change could not be applied: {}", e.message);
            }
        }
        drop(shared);
        self.images.send_replace(image);
    }
}

#[async_trait]
impl Controller for KraftController {
    fn cluster_id(&self) -> String {
        self.cluster_id.clone()
    }

    /// Clients cannot reach KRaft controllers: as Kafka's brokers do, Metadata names a
    /// live broker instead (the lowest id; this one while none is unfenced).
    fn controller_id(&self) -> i32 {
        self.brokers().first().map_or(self.broker_id, |b| b.id)
    }

    fn brokers(&self) -> Vec<BrokerInfo> {
        self.brokers_on(&self.inter_broker_listener)
    }

    fn brokers_on(&self, listener: &str) -> Vec<BrokerInfo> {
        self.image().unfenced_brokers_on(listener)
    }

    /// The listeners are what the broker registered with (the driver's registration).
    async fn advertise(&self, _config: &BrokerConfig) -> Result<(), ControllerError> {
        Ok(())
    }

    fn topics(&self) -> Vec<Arc<TopicInfo>> {
        self.image().topics().cloned().collect()
    }

    fn topic(&self, name: &str) -> Option<Arc<TopicInfo>> {
        self.image().topic(name).cloned()
    }

    fn topic_by_id(&self, id: Uuid) -> Option<Arc<TopicInfo>> {
        self.image().topic_by_id(id).cloned()
    }

    fn broker_epoch(&self) -> i64 {
        self.status().broker_epoch
    }

    fn subscribe(&self, listener: Arc<dyn MetadataListener>) -> Vec<ApplyError> {
        // Under the lock publishing takes, so no image comes between the one it is
        // handed and its first delta.
        let mut shared = self.shared.lock();
        let image = shared.image.clone();
        let failed = listener.on_delta(&image, &MetadataDelta::everything(&image));
        shared.listeners.push(listener);
        failed
    }

    async fn create_topic(
        &self,
        topic: NewTopic,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, ControllerError> {
        let name = topic.name.clone();
        // With a manual assignment the counts are the assignment's (CreateTopics wants
        // them -1).
        let (partitions, replication) = match topic.assignments.is_empty() {
            true => (topic.num_partitions, topic.replication_factor),
            false => (-1, -1),
        };
        let request = CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.clone())))
                .with_num_partitions(partitions)
                .with_replication_factor(replication)
                .with_assignments(
                    topic
                        .assignments
                        .iter()
                        .map(|(p, brokers)| {
                            CreatableReplicaAssignment::default()
                                .with_partition_index(*p)
                                .with_broker_ids(brokers.iter().map(|b| (*b).into()).collect())
                        })
                        .collect(),
                )
                .with_configs(
                    topic
                        .configs
                        .iter()
                        .map(|(k, v)| {
                            CreatableTopicConfig::default()
                                .with_name(StrBytes::from_string(k.clone()))
                                .with_value(Some(StrBytes::from_string(v.clone())))
                        })
                        .collect(),
                )])
            .with_timeout_ms(self.timeout.as_millis() as i32)
            .with_validate_only(validate_only);
        let response: CreateTopicsResponse = self.send(request, (2, 7)).await?;
        let Some(t) = response.topics.first() else {
            return Err(ControllerError::new(
                ResponseError::UnknownServerError,
                "the controller answered CreateTopics without the topic",
            ));
        };
        error(t.error_code, t.error_message.as_ref())?;
        if validate_only {
            // What the controller would create: its partition and replica counts.
            let replicas = vec![-1; t.replication_factor.max(0) as usize];
            return Ok(Arc::new(TopicInfo {
                name,
                topic_id: t.topic_id,
                partitions: (0..t.num_partitions.max(0))
                    .map(|p| PartitionInfo {
                        partition: p,
                        assignment: PartitionAssignment {
                            directories: vec![Uuid::nil(); replicas.len()],
                            replicas: replicas.clone(),
                        },
                        state: LeaderAndIsr::elected(-1, 0, &[]),
                    })
                    .collect(),
                configs: topic.configs,
            }));
        }
        let id = t.topic_id;
        let count = t.num_partitions;
        self.until("the new topic", |image| {
            image
                .topic(&name)
                .filter(|t| t.topic_id == id && t.partitions.len() as i32 >= count)
                .cloned()
        })
        .await
    }

    async fn delete_topic(&self, name: &str) -> Result<Arc<TopicInfo>, ControllerError> {
        let Some(before) = self.topic(name) else {
            return Err(ControllerError::unknown_topic(name));
        };
        let request = DeleteTopicsRequest::default()
            .with_topics(vec![DeleteTopicState::default()
                .with_name(Some(TopicName(StrBytes::from_string(name.into()))))])
            .with_timeout_ms(self.timeout.as_millis() as i32);
        let response: DeleteTopicsResponse = self.send(request, (6, 6)).await?;
        let Some(r) = response.responses.first() else {
            return Err(ControllerError::new(
                ResponseError::UnknownServerError,
                "the controller answered DeleteTopics without the topic",
            ));
        };
        error(r.error_code, r.error_message.as_ref())?;
        let id = before.topic_id;
        self.until("the topic gone", |image| {
            image.topic_by_id(id).is_none().then_some(())
        })
        .await?;
        Ok(before)
    }

    async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        assignments: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, ControllerError> {
        use kafka_protocol::messages::create_partitions_request::CreatePartitionsAssignment;
        let request = CreatePartitionsRequest::default()
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.into())))
                .with_count(count)
                .with_assignments(assignments.map(|a| {
                    a.into_iter()
                        .map(|brokers| {
                            CreatePartitionsAssignment::default()
                                .with_broker_ids(brokers.into_iter().map(Into::into).collect())
                        })
                        .collect()
                }))])
            .with_timeout_ms(self.timeout.as_millis() as i32)
            .with_validate_only(validate_only);
        let response: CreatePartitionsResponse = self.send(request, (0, 3)).await?;
        let Some(r) = response.results.first() else {
            return Err(ControllerError::new(
                ResponseError::UnknownServerError,
                "the controller answered CreatePartitions without the topic",
            ));
        };
        error(r.error_code, r.error_message.as_ref())?;
        if validate_only {
            return self
                .topic(name)
                .ok_or_else(|| ControllerError::unknown_topic(name));
        }
        self.until("the new partitions", |image| {
            image
                .topic(name)
                .filter(|t| t.partitions.len() as i32 >= count)
                .cloned()
        })
        .await
    }

    async fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicInfo>, ControllerError> {
        let Some(before) = self.topic(name) else {
            return Err(ControllerError::unknown_topic(name));
        };
        self.alter_configs(CONFIG_RESOURCE_TOPIC, name, &before.configs, &configs)
            .await?;
        self.until("the new configs", |image| {
            image.topic(name).filter(|t| t.configs == configs).cloned()
        })
        .await
    }

    /// The dynamic configs of a broker (or the cluster default) or of a group, as the
    /// controller's ConfigRecords left them in the image.
    fn resource_configs(&self, resource: &ConfigResource) -> BTreeMap<String, String> {
        self.image()
            .resource_configs(resource)
            .cloned()
            .unwrap_or_default()
    }

    /// Forwarded as IncrementalAlterConfigs of the resource, answered once the image
    /// shows the new set.
    async fn set_resource_configs(
        &self,
        resource: ConfigResource,
        configs: BTreeMap<String, String>,
    ) -> Result<(), ControllerError> {
        let before = self.resource_configs(&resource);
        self.alter_configs(resource.resource_type, &resource.name, &before, &configs)
            .await?;
        self.until("the new configs", |image| {
            let now = image.resource_configs(&resource);
            (now.map_or(configs.is_empty(), |c| *c == configs)).then_some(())
        })
        .await
    }

    /// The controller's UserScramCredentialRecords, as this broker replayed them: SASL
    /// SCRAM logins on this broker's listeners check them.
    fn scram_credential(&self, mechanism: ScramMechanism, user: &str) -> Option<ScramCredential> {
        self.image().scram_credential(mechanism, user).cloned()
    }

    fn scram_credentials(&self) -> Vec<(String, ScramMechanism, u32)> {
        self.image()
            .scram_credentials()
            .map(|(u, m, c)| (u.to_string(), m, c.iterations))
            .collect()
    }

    /// The controller's ClientQuotaRecords (the quota managers follow them as deltas).
    fn client_quotas(&self) -> crate::quota::configs::ClientQuotas {
        self.image().client_quotas().clone()
    }

    /// Forwarded as AlterClientQuotas (entries in order, each answered with the
    /// controller's outcome); answered once the image shows every change that succeeded.
    async fn alter_client_quotas(
        &self,
        alterations: Vec<crate::quota::configs::Alteration>,
        validate_only: bool,
    ) -> Result<Vec<Result<(), ControllerError>>, ControllerError> {
        use crate::quota::entity::EntityName;
        use kafka_protocol::messages::alter_client_quotas_request::{
            EntityData, EntryData, OpData,
        };
        use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
        let component = |kind: &str, name: &EntityName| {
            EntityData::default()
                .with_entity_type(StrBytes::from_string(kind.into()))
                .with_entity_name(match name {
                    EntityName::Default => None,
                    EntityName::Named(n) => Some(StrBytes::from_string(n.clone())),
                })
        };
        let entries = alterations
            .iter()
            .map(|a| {
                let mut entity = Vec::new();
                if let Some(user) = &a.entity.user {
                    entity.push(component("user", user));
                }
                if let Some(client) = &a.entity.client_id {
                    entity.push(component("client-id", client));
                }
                let ops = a
                    .ops
                    .iter()
                    .map(|(k, v)| {
                        OpData::default()
                            .with_key(StrBytes::from_string(k.clone()))
                            .with_value(v.unwrap_or(0.0))
                            .with_remove(v.is_none())
                    })
                    .collect();
                EntryData::default().with_entity(entity).with_ops(ops)
            })
            .collect();
        let request = AlterClientQuotasRequest::default()
            .with_entries(entries)
            .with_validate_only(validate_only);
        let response: AlterClientQuotasResponse = self.send(request, (0, 1)).await?;
        if response.entries.len() != alterations.len() {
            return Err(ControllerError::new(
                ResponseError::UnknownServerError,
                "the controller answered AlterClientQuotas with another number of entries",
            ));
        }
        let outcomes: Vec<Result<(), ControllerError>> = response
            .entries
            .iter()
            .map(|e| error(e.error_code, e.error_message.as_ref()))
            .collect();
        if validate_only {
            return Ok(outcomes);
        }
        let applied: Vec<&crate::quota::configs::Alteration> = alterations
            .iter()
            .zip(&outcomes)
            .filter(|(_, o)| o.is_ok())
            .map(|(a, _)| a)
            .collect();
        self.until("the new client quotas", |image| {
            applied
                .iter()
                .all(|a| {
                    let now = image.client_quotas().get(&a.entity);
                    a.ops
                        .iter()
                        .all(|(k, v)| now.and_then(|q| q.get(k)) == v.as_ref())
                })
                .then_some(())
        })
        .await?;
        Ok(outcomes)
    }

    /// From a block the controller allocated to this broker (AllocateProducerIds), a new
    /// block once it is used up.
    async fn next_producer_id(&self) -> Result<i64, ControllerError> {
        let mut block = self.producer_ids.lock().await;
        if block.next >= block.end {
            let request = AllocateProducerIdsRequest::default()
                .with_broker_id(self.broker_id.into())
                .with_broker_epoch(self.broker_epoch());
            let response: AllocateProducerIdsResponse = self.send(request, (0, 0)).await?;
            error(response.error_code, None)?;
            let start = response.producer_id_start.0;
            if start < 0 || response.producer_id_len <= 0 {
                return Err(ControllerError::new(
                    ResponseError::UnknownServerError,
                    "the controller allocated an empty block of producer ids",
                ));
            }
            block.next = start;
            block.end = start + i64::from(response.producer_id_len);
        }
        let id = block.next;
        block.next += 1;
        Ok(id)
    }
}

/// ISR changes go to the active controller, as a KRaft broker's `AlterPartitionManager`
/// sends them (Kafka 4's controllers answer AlterPartition v2 and v3).
#[async_trait]
impl crate::replica::isr::ControllerChannel for KraftController {
    async fn alter_partition(
        &self,
        max_version: i16,
        build: &(dyn Fn(i16) -> kafka_protocol::messages::AlterPartitionRequest + Sync),
    ) -> Result<(i16, kafka_protocol::messages::AlterPartitionResponse), String> {
        use kafka_protocol::messages::AlterPartitionRequest;
        let Some(to) = self.status().controller else {
            return Err("the active controller is not known yet".into());
        };
        let client = self.client_for(&to).await.map_err(|e| e.message)?;
        let versions = client.api_versions().await.map_err(|e| e.to_string())?;
        let version = crate::client::reconnecting::negotiate(
            &versions,
            <AlterPartitionRequest as Request>::KEY,
            crate::replica::isr::ALTER_PARTITION_MIN_VERSION,
            max_version,
        )
        .map_err(|e| e.to_string())?;
        let response = client
            .send(&build(version), version)
            .await
            .map_err(|e| e.to_string())?;
        Ok((version, response))
    }
}
