//! The metadata image: what replaying the metadata log's records gives, as Kafka's
//! `MetadataImage` (topics with partitions and configs, finalized features, the producer-id
//! high-water mark, broker registrations).
//!
//! Replay follows Kafka's controller: a `PartitionChangeRecord` naming a leader bumps the
//! leader epoch, any change bumps the partition epoch, `RemoveTopicRecord` takes the topic's
//! configs with it. A record that contradicts the image (a partition of an unknown topic) is
//! an error: the log is not what Kafka or skua would have written.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use uuid::Uuid;

use super::records::{
    AccessControlEntryRecord, BrokerEndpoint, ClientQuotaRecord, MetadataRecord,
    PartitionChangeRecord, PartitionRecord, UserScramCredential, CONFIG_RESOURCE_TOPIC,
    NO_LEADER_CHANGE,
};
use crate::quota::configs::ClientQuotas;
use crate::quota::entity::QuotaEntity;
use crate::sasl::scram::{ScramCredential, ScramMechanism};

use super::{
    BrokerInfo, ConfigResource, LeaderAndIsr, PartitionAssignment, PartitionInfo, TopicInfo,
};

pub const METADATA_VERSION: &str = "metadata.version";

/// What one record changed, for whoever follows the image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The topic was created or changed (partitions, leaders, configs).
    Topic(String),
    /// The topic is gone; this is what it was.
    TopicRemoved(Arc<TopicInfo>),
    /// The configs of a resource other than a topic changed.
    Configs(ConfigResource),
    /// An ACL was added or removed.
    Acls,
    /// A client quota changed.
    ClientQuotas,
    /// A SCRAM credential was set or removed.
    ScramCredentials,
    /// A broker registered, unregistered, or was fenced or unfenced.
    Cluster,
    None,
}

/// A broker's registration in the metadata log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRegistration {
    pub epoch: i64,
    pub endpoints: Vec<BrokerEndpoint>,
    pub rack: Option<String>,
    /// Fenced brokers lead nothing and are left out of Metadata.
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
}

#[derive(Clone, Debug, Default)]
pub struct MetadataImage {
    topics: BTreeMap<String, Arc<TopicInfo>>,
    names_by_id: HashMap<Uuid, String>,
    /// Topic configs by topic name (Kafka keys configs by resource, not by topic id).
    topic_configs: HashMap<String, BTreeMap<String, String>>,
    /// The configs of every other resource (groups; brokers, kept but not applied).
    resource_configs: BTreeMap<ConfigResource, BTreeMap<String, String>>,
    features: BTreeMap<String, i16>,
    /// The first producer id of the next block to hand out (0 before any block).
    next_producer_id: i64,
    /// Brokers registered in the log (by Kafka's controllers, or by skua's single node
    /// before it adopted a Kafka dir).
    registrations: BTreeMap<i32, BrokerRegistration>,
    /// Client quotas per user / client id entity (`ClientQuotaRecord`s, or ZooKeeper's
    /// `/config/users` and `/config/clients`).
    client_quotas: ClientQuotas,
    /// The live brokers clients are told about, and the active controller.
    brokers: Vec<BrokerInfo>,
    controller_id: i32,
    /// SCRAM credentials by user and mechanism (`UserScramCredentialRecord`s).
    scram: BTreeMap<(String, ScramMechanism), ScramCredential>,
    /// Topics whose TopicRecord named them illegally (a metadata log written by something
    /// else, or damaged): skipped with their partitions, never a log directory.
    illegal_topic_ids: BTreeSet<Uuid>,
    /// The ACLs, by id, as their records hold them (Kafka's `AclControlManager.idToAcl`).
    acls: BTreeMap<Uuid, Arc<AccessControlEntryRecord>>,
}

impl MetadataImage {
    pub fn topic(&self, name: &str) -> Option<&Arc<TopicInfo>> {
        self.topics.get(name)
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<&Arc<TopicInfo>> {
        self.names_by_id.get(&id).and_then(|n| self.topics.get(n))
    }

    pub fn topics(&self) -> impl Iterator<Item = &Arc<TopicInfo>> {
        self.topics.values()
    }

    pub fn topic_count(&self) -> usize {
        self.topics.len()
    }

    /// The configs kept for a resource other than a topic.
    pub fn resource_configs(&self, resource: &ConfigResource) -> Option<&BTreeMap<String, String>> {
        self.resource_configs.get(resource)
    }

    /// Every resource other than a topic that has configs.
    pub fn config_resources(&self) -> impl Iterator<Item = &ConfigResource> {
        self.resource_configs.keys()
    }

    /// `user`'s SCRAM credential for `mechanism`.
    pub fn scram_credential(
        &self,
        mechanism: ScramMechanism,
        user: &str,
    ) -> Option<&ScramCredential> {
        self.scram.get(&(user.to_string(), mechanism))
    }

    /// Every SCRAM credential: user, mechanism, credential, in user order.
    pub fn scram_credentials(
        &self,
    ) -> impl Iterator<Item = (&str, ScramMechanism, &ScramCredential)> {
        self.scram.iter().map(|((u, m), c)| (u.as_str(), *m, c))
    }

    /// Every ACL, by id.
    pub fn acls(&self) -> impl Iterator<Item = &Arc<AccessControlEntryRecord>> {
        self.acls.values()
    }

    /// Every entity's client quotas.
    pub fn client_quotas(&self) -> &ClientQuotas {
        &self.client_quotas
    }

    /// Replaces one entity's quotas (empty: none): a ZooKeeper-mode broker reads them
    /// whole from `/config/<entity>`, not as records. Whether anything changed.
    pub fn set_client_quotas(
        &mut self,
        entity: QuotaEntity,
        quotas: BTreeMap<String, f64>,
    ) -> bool {
        let changed = self
            .client_quotas
            .get(&entity)
            .map_or(!quotas.is_empty(), |q| *q != quotas);
        match quotas.is_empty() {
            true => self.client_quotas.remove(&entity),
            false => self.client_quotas.insert(entity, quotas),
        };
        changed
    }

    pub fn feature(&self, name: &str) -> Option<i16> {
        self.features.get(name).copied()
    }

    pub fn metadata_version(&self) -> Option<i16> {
        self.feature(METADATA_VERSION)
    }

    pub fn next_producer_id(&self) -> i64 {
        self.next_producer_id
    }

    pub fn broker_epoch(&self, broker_id: i32) -> Option<i64> {
        self.registrations.get(&broker_id).map(|r| r.epoch)
    }

    /// Ids of the brokers registered in the metadata log.
    pub fn registered_brokers(&self) -> impl Iterator<Item = i32> + '_ {
        self.registrations.keys().copied()
    }

    /// A broker's registration as the metadata log holds it.
    pub fn registration(&self, broker_id: i32) -> Option<&BrokerRegistration> {
        self.registrations.get(&broker_id)
    }

    /// The registered brokers that are not fenced, as clients of `listener` reach them
    /// (a broker with no endpoint of that name is left out), by id: what Kafka's KRaft
    /// brokers answer Metadata with.
    pub fn unfenced_brokers_on(&self, listener: &str) -> Vec<BrokerInfo> {
        self.registrations
            .iter()
            .filter(|(_, r)| !r.fenced)
            .filter_map(|(id, r)| {
                let e = r.endpoints.iter().find(|e| e.name == listener)?;
                Some(BrokerInfo {
                    id: *id,
                    host: e.host.clone(),
                    port: i32::from(e.port),
                    rack: r.rack.clone(),
                })
            })
            .collect()
    }

    pub fn brokers(&self) -> &[BrokerInfo] {
        &self.brokers
    }

    pub fn controller_id(&self) -> i32 {
        self.controller_id
    }

    /// Sets the live brokers and the controller: the single-node controller knows them
    /// from its own configuration, not from records.
    pub fn set_cluster(&mut self, brokers: Vec<BrokerInfo>, controller_id: i32) {
        self.brokers = brokers;
        self.controller_id = controller_id;
    }

    /// Puts `topic` in place of any topic of that name: a ZooKeeper-mode broker's
    /// metadata cache has no records to replay, only the controller's UpdateMetadata.
    pub fn put_topic(&mut self, topic: Arc<TopicInfo>) {
        if let Some(old) = self.topics.get(&topic.name) {
            self.names_by_id.remove(&old.topic_id);
        }
        if !topic.topic_id.is_nil() {
            self.names_by_id.insert(topic.topic_id, topic.name.clone());
        }
        self.topics.insert(topic.name.clone(), topic);
    }

    /// Replaces the configs of a resource other than a topic (empty: none): a
    /// ZooKeeper-mode broker reads them whole from `/config/<entity>`, not as records.
    pub fn set_resource_configs(
        &mut self,
        resource: ConfigResource,
        configs: BTreeMap<String, String>,
    ) {
        match configs.is_empty() {
            true => self.resource_configs.remove(&resource),
            false => self.resource_configs.insert(resource, configs),
        };
    }

    /// Removes a topic put with [`MetadataImage::put_topic`], returning it.
    pub fn remove_topic(&mut self, name: &str) -> Option<Arc<TopicInfo>> {
        let removed = self.topics.remove(name)?;
        self.names_by_id.remove(&removed.topic_id);
        Some(removed)
    }

    /// Applies one record.
    pub fn replay(&mut self, record: &MetadataRecord) -> Result<Change, String> {
        match record {
            MetadataRecord::Topic { name, topic_id } => self.replay_topic(name, *topic_id),
            MetadataRecord::Partition(p) if self.illegal_topic_ids.contains(&p.topic_id) => {
                Ok(Change::None)
            }
            MetadataRecord::PartitionChange(c) if self.illegal_topic_ids.contains(&c.topic_id) => {
                Ok(Change::None)
            }
            MetadataRecord::RemoveTopic { topic_id } if self.illegal_topic_ids.remove(topic_id) => {
                Ok(Change::None)
            }
            MetadataRecord::Partition(p) => self.replay_partition(p),
            MetadataRecord::PartitionChange(c) => self.replay_partition_change(c),
            MetadataRecord::RemoveTopic { topic_id } => self.replay_remove_topic(*topic_id),
            MetadataRecord::Config {
                resource_type,
                resource_name,
                name,
                value,
            } => self.replay_config(*resource_type, resource_name, name, value.as_deref()),
            MetadataRecord::FeatureLevel { name, level } => {
                self.features.insert(name.clone(), *level);
                Ok(Change::None)
            }
            MetadataRecord::ProducerIds {
                next_producer_id, ..
            } => self.replay_producer_ids(*next_producer_id),
            MetadataRecord::RegisterBroker {
                broker_id,
                broker_epoch,
                endpoints,
                rack,
                fenced,
                in_controlled_shutdown,
            } => {
                self.registrations.insert(
                    *broker_id,
                    BrokerRegistration {
                        epoch: *broker_epoch,
                        endpoints: endpoints.clone(),
                        rack: rack.clone(),
                        fenced: *fenced,
                        in_controlled_shutdown: *in_controlled_shutdown,
                    },
                );
                Ok(Change::Cluster)
            }
            MetadataRecord::UnregisterBroker { broker_id } => {
                self.registrations.remove(broker_id);
                Ok(Change::Cluster)
            }
            MetadataRecord::FenceBroker {
                broker_id,
                broker_epoch,
            }
            | MetadataRecord::UnfenceBroker {
                broker_id,
                broker_epoch,
            } => {
                let fenced = matches!(record, MetadataRecord::FenceBroker { .. });
                let r = self.registration_mut(*broker_id, *broker_epoch)?;
                r.fenced = fenced;
                if fenced {
                    r.in_controlled_shutdown = false;
                }
                Ok(Change::Cluster)
            }
            MetadataRecord::BrokerRegistrationChange {
                broker_id,
                broker_epoch,
                fenced,
                in_controlled_shutdown,
            } => {
                let r = self.registration_mut(*broker_id, *broker_epoch)?;
                match fenced {
                    -1 => r.fenced = false,
                    1 => r.fenced = true,
                    _ => {}
                }
                if *in_controlled_shutdown == 1 {
                    r.in_controlled_shutdown = true;
                }
                Ok(Change::Cluster)
            }
            MetadataRecord::UserScramCredential(c) => {
                self.replay_scram_credential(c);
                Ok(Change::ScramCredentials)
            }
            MetadataRecord::RemoveUserScramCredential { name, mechanism } => {
                // A mechanism this broker does not know was never served.
                if let Some(m) = ScramMechanism::from_kafka_type(*mechanism) {
                    self.scram.remove(&(name.clone(), m));
                }
                Ok(Change::ScramCredentials)
            }
            MetadataRecord::AccessControlEntry(acl) => {
                self.acls.insert(acl.id, Arc::new(acl.clone()));
                Ok(Change::Acls)
            }
            MetadataRecord::RemoveAccessControlEntry { id } => {
                self.acls.remove(id).ok_or_else(|| {
                    format!("RemoveAccessControlEntryRecord for unknown ACL id {id}")
                })?;
                Ok(Change::Acls)
            }
            MetadataRecord::ClientQuota(r) => Ok(self.replay_client_quota(r)),
            MetadataRecord::BeginTransaction
            | MetadataRecord::EndTransaction
            | MetadataRecord::AbortTransaction
            | MetadataRecord::Other { .. } => Ok(Change::None),
        }
    }

    /// A TopicRecord: a new topic with no partitions yet (its configs may have come first).
    /// An illegal name is skipped with its partitions, never reaching the log layer.
    fn replay_topic(&mut self, name: &str, topic_id: Uuid) -> Result<Change, String> {
        if let Err(why) = super::topic_name::validate(name) {
            tracing::error!(topic_id = %topic_id, "TopicRecord skipped with its partitions: {why}");
            self.illegal_topic_ids.insert(topic_id);
            return Ok(Change::None);
        }
        if let Some(old) = self.topics.get(name) {
            if old.topic_id != topic_id {
                return Err(format!(
                    "TopicRecord for {name} with id {topic_id} while the topic has id {}",
                    old.topic_id
                ));
            }
        }
        let configs = self.topic_configs.get(name).cloned().unwrap_or_default();
        self.names_by_id.insert(topic_id, name.to_string());
        self.topics.insert(
            name.to_string(),
            Arc::new(TopicInfo {
                name: name.to_string(),
                topic_id,
                partitions: Vec::new(),
                configs,
            }),
        );
        Ok(Change::Topic(name.to_string()))
    }

    /// A PartitionRecord: the partition added, or replaced whole.
    fn replay_partition(&mut self, p: &PartitionRecord) -> Result<Change, String> {
        let topic = self.topic_mut(p.topic_id, "PartitionRecord")?;
        let info = partition_info(p);
        match topic
            .partitions
            .binary_search_by_key(&p.partition_id, |x| x.partition)
        {
            Ok(i) => topic.partitions[i] = info,
            Err(i) => topic.partitions.insert(i, info),
        }
        Ok(Change::Topic(topic.name.clone()))
    }

    /// A PartitionChangeRecord: the fields it carries merged into the partition.
    fn replay_partition_change(&mut self, c: &PartitionChangeRecord) -> Result<Change, String> {
        let topic = self.topic_mut(c.topic_id, "PartitionChangeRecord")?;
        let name = topic.name.clone();
        let p = topic
            .partitions
            .iter_mut()
            .find(|p| p.partition == c.partition_id)
            .ok_or_else(|| {
                format!(
                    "PartitionChangeRecord for unknown partition {name}-{}",
                    c.partition_id
                )
            })?;
        merge(p, c);
        Ok(Change::Topic(name))
    }

    fn replay_remove_topic(&mut self, topic_id: Uuid) -> Result<Change, String> {
        let name = self
            .names_by_id
            .remove(&topic_id)
            .ok_or_else(|| format!("RemoveTopicRecord for unknown topic id {topic_id}"))?;
        self.topic_configs.remove(&name);
        let removed = self
            .topics
            .remove(&name)
            .ok_or_else(|| format!("RemoveTopicRecord for unknown topic {name}"))?;
        Ok(Change::TopicRemoved(removed))
    }

    /// A ConfigRecord: set (or, with no value, removed) on a topic, kept with the topic
    /// (also before its TopicRecord), or on another resource.
    fn replay_config(
        &mut self,
        resource_type: i8,
        resource_name: &str,
        name: &str,
        value: Option<&str>,
    ) -> Result<Change, String> {
        let set = |configs: &mut BTreeMap<String, String>| match value {
            Some(v) => configs.insert(name.to_string(), v.to_string()),
            None => configs.remove(name),
        };
        if resource_type == CONFIG_RESOURCE_TOPIC {
            let configs = self
                .topic_configs
                .entry(resource_name.to_string())
                .or_default();
            set(configs);
            let configs = configs.clone();
            return match self.topics.get_mut(resource_name) {
                Some(t) => {
                    Arc::make_mut(t).configs = configs;
                    Ok(Change::Topic(resource_name.to_string()))
                }
                None => Ok(Change::None),
            };
        }
        let resource = ConfigResource {
            resource_type,
            name: resource_name.to_string(),
        };
        let configs = self.resource_configs.entry(resource.clone()).or_default();
        set(configs);
        if configs.is_empty() {
            self.resource_configs.remove(&resource);
        }
        Ok(Change::Configs(resource))
    }

    fn replay_producer_ids(&mut self, next_producer_id: i64) -> Result<Change, String> {
        if next_producer_id <= self.next_producer_id {
            return Err(format!(
                "ProducerIdsRecord {next_producer_id} does not advance past {}",
                self.next_producer_id
            ));
        }
        self.next_producer_id = next_producer_id;
        Ok(Change::None)
    }

    /// A UserScramCredentialRecord; a mechanism this broker does not know is kept in the
    /// log, not served.
    fn replay_scram_credential(&mut self, c: &UserScramCredential) {
        if let Some(m) = ScramMechanism::from_kafka_type(c.mechanism) {
            let credential = ScramCredential {
                salt: c.salt.clone(),
                stored_key: c.stored_key.clone(),
                server_key: c.server_key.clone(),
                iterations: u32::try_from(c.iterations).unwrap_or(0),
            };
            self.scram.insert((c.name.clone(), m), credential);
        }
    }

    /// A ClientQuotaRecord: one quota of one entity set or removed. Kafka 4 writes IP
    /// entities too; skua does not enforce them.
    fn replay_client_quota(&mut self, r: &ClientQuotaRecord) -> Change {
        let Some(entity) = r.entity() else {
            return Change::None;
        };
        let quotas = self.client_quotas.entry(entity.clone()).or_default();
        match r.remove {
            true => quotas.remove(&r.key),
            false => quotas.insert(r.key.clone(), r.value),
        };
        if quotas.is_empty() {
            self.client_quotas.remove(&entity);
        }
        Change::ClientQuotas
    }

    /// The registration a fence, unfence or change record names, at its epoch (Kafka's
    /// controllers write them only for the registration in force).
    fn registration_mut(&mut self, id: i32, epoch: i64) -> Result<&mut BrokerRegistration, String> {
        match self.registrations.get_mut(&id) {
            Some(r) if r.epoch == epoch => Ok(r),
            Some(r) => Err(format!(
                "a registration change for broker {id} at epoch {epoch} while it is registered at epoch {}",
                r.epoch
            )),
            None => Err(format!("a registration change for unregistered broker {id}")),
        }
    }

    fn topic_mut(&mut self, id: Uuid, record: &str) -> Result<&mut TopicInfo, String> {
        let name = self
            .names_by_id
            .get(&id)
            .ok_or_else(|| format!("{record} for unknown topic id {id}"))?;
        let topic = self
            .topics
            .get_mut(name)
            .ok_or_else(|| format!("{record} for unknown topic {name}"))?;
        Ok(Arc::make_mut(topic))
    }
}

fn partition_info(p: &PartitionRecord) -> PartitionInfo {
    PartitionInfo {
        partition: p.partition_id,
        assignment: PartitionAssignment {
            replicas: p.replicas.clone(),
            directories: p.directories.clone(),
        },
        state: LeaderAndIsr {
            leader: p.leader,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            isr: p.isr.clone(),
            eligible_leader_replicas: p.eligible_leader_replicas.clone(),
            last_known_elr: p.last_known_elr.clone(),
            leader_recovery_state: p.leader_recovery_state,
        },
    }
}

/// Kafka's `PartitionRegistration.merge`.
fn merge(p: &mut PartitionInfo, c: &PartitionChangeRecord) {
    if let Some(replicas) = &c.replicas {
        p.assignment.replicas = replicas.clone();
    }
    if let Some(dirs) = &c.directories {
        p.assignment.directories = dirs.clone();
    }
    let s = &mut p.state;
    if let Some(isr) = &c.isr {
        s.isr = isr.clone();
    }
    if c.leader != NO_LEADER_CHANGE {
        s.leader = c.leader;
        s.leader_epoch += 1;
    }
    if c.leader_recovery_state >= 0 {
        s.leader_recovery_state = c.leader_recovery_state;
    }
    if let Some(elr) = &c.eligible_leader_replicas {
        s.eligible_leader_replicas = elr.clone();
    }
    if let Some(lke) = &c.last_known_elr {
        s.last_known_elr = lke.clone();
    }
    s.partition_epoch += 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kraft_registrations_fence_unfence_and_answer_metadata() {
        let mut image = MetadataImage::default();
        let register = |id: i32, epoch: i64| MetadataRecord::RegisterBroker {
            broker_id: id,
            broker_epoch: epoch,
            endpoints: vec![BrokerEndpoint {
                name: "PLAINTEXT".into(),
                host: format!("b{id}"),
                port: 9092,
                security_protocol: 0,
            }],
            rack: None,
            fenced: true,
            in_controlled_shutdown: false,
        };
        assert_eq!(image.replay(&register(2, 10)).unwrap(), Change::Cluster);
        image.replay(&register(1, 11)).unwrap();
        assert!(
            image.unfenced_brokers_on("PLAINTEXT").is_empty(),
            "registered fenced"
        );
        image
            .replay(&MetadataRecord::UnfenceBroker {
                broker_id: 2,
                broker_epoch: 10,
            })
            .unwrap();
        image
            .replay(&MetadataRecord::BrokerRegistrationChange {
                broker_id: 1,
                broker_epoch: 11,
                fenced: -1,
                in_controlled_shutdown: 0,
            })
            .unwrap();
        let ids = |i: &MetadataImage| -> Vec<i32> {
            i.unfenced_brokers_on("PLAINTEXT")
                .iter()
                .map(|b| b.id)
                .collect()
        };
        assert_eq!(ids(&image), vec![1, 2]);
        assert_eq!(image.unfenced_brokers_on("PLAINTEXT")[0].host, "b1");
        assert!(
            image.unfenced_brokers_on("SSL").is_empty(),
            "no endpoint there"
        );
        image
            .replay(&MetadataRecord::BrokerRegistrationChange {
                broker_id: 1,
                broker_epoch: 11,
                fenced: 0,
                in_controlled_shutdown: 1,
            })
            .unwrap();
        assert!(image.registration(1).unwrap().in_controlled_shutdown);
        image
            .replay(&MetadataRecord::FenceBroker {
                broker_id: 1,
                broker_epoch: 11,
            })
            .unwrap();
        assert_eq!(ids(&image), vec![2]);
        assert!(!image.registration(1).unwrap().in_controlled_shutdown);
        // A change for an epoch that is not the registration's is a log Kafka never writes.
        let e = image
            .replay(&MetadataRecord::FenceBroker {
                broker_id: 2,
                broker_epoch: 9,
            })
            .unwrap_err();
        assert!(e.contains("epoch 9"), "{e}");
        // Registering again replaces the registration (fenced, new epoch).
        image.replay(&register(2, 12)).unwrap();
        assert_eq!(image.broker_epoch(2), Some(12));
        assert!(ids(&image).is_empty());
        image
            .replay(&MetadataRecord::UnregisterBroker { broker_id: 2 })
            .unwrap();
        assert_eq!(image.registered_brokers().collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn client_quota_records_set_and_remove_an_entitys_quotas() {
        use crate::controller::records::ClientQuotaRecord;
        use crate::quota::entity::{EntityName, QuotaEntity};
        let alice = QuotaEntity::user(EntityName::Named("alice".into()));
        let mut image = MetadataImage::default();
        let set =
            |key: &str, v| MetadataRecord::ClientQuota(ClientQuotaRecord::new(&alice, key, v));
        assert_eq!(
            image
                .replay(&set("producer_byte_rate", Some(10.0)))
                .unwrap(),
            Change::ClientQuotas
        );
        image
            .replay(&set("consumer_byte_rate", Some(20.0)))
            .unwrap();
        assert_eq!(image.client_quotas()[&alice].len(), 2);
        image.replay(&set("producer_byte_rate", None)).unwrap();
        image.replay(&set("consumer_byte_rate", None)).unwrap();
        assert!(image.client_quotas().is_empty());
    }

    fn topic(name: &str, id: u128) -> MetadataRecord {
        MetadataRecord::Topic {
            name: name.into(),
            topic_id: Uuid::from_u128(id),
        }
    }

    fn partition(id: u128, p: i32) -> MetadataRecord {
        MetadataRecord::Partition(PartitionRecord {
            partition_id: p,
            topic_id: Uuid::from_u128(id),
            replicas: vec![1],
            isr: vec![1],
            removing_replicas: vec![],
            adding_replicas: vec![],
            leader: 1,
            leader_recovery_state: 0,
            leader_epoch: 0,
            partition_epoch: 0,
            directories: vec![],
            eligible_leader_replicas: vec![],
            last_known_elr: vec![],
        })
    }

    fn config(topic: &str, key: &str, value: Option<&str>) -> MetadataRecord {
        MetadataRecord::Config {
            resource_type: CONFIG_RESOURCE_TOPIC,
            resource_name: topic.into(),
            name: key.into(),
            value: value.map(str::to_string),
        }
    }

    fn replay_all(image: &mut MetadataImage, records: &[MetadataRecord]) {
        for r in records {
            image.replay(r).unwrap();
        }
    }

    /// A metadata log naming a topic illegally (`../x`, 300 characters) replays without
    /// it: no topic, no partition for the log layer to make a directory of, no error.
    #[test]
    fn illegal_topic_names_are_skipped_with_their_partitions() {
        let mut image = MetadataImage::default();
        let long = "L".repeat(300);
        replay_all(
            &mut image,
            &[
                topic("../outside/escaped", 1),
                partition(1, 0),
                topic(&long, 2),
                partition(2, 0),
                topic("fine", 3),
                partition(3, 0),
                MetadataRecord::RemoveTopic {
                    topic_id: Uuid::from_u128(2),
                },
            ],
        );
        let names: Vec<&str> = image.topics().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["fine"]);
        assert!(image.topic_by_id(Uuid::from_u128(1)).is_none());
    }

    #[test]
    fn topics_partitions_and_configs() {
        let mut image = MetadataImage::default();
        replay_all(
            &mut image,
            &[
                topic("t", 7),
                config("t", "cleanup.policy", Some("compact")),
                partition(7, 1),
                partition(7, 0),
            ],
        );
        let t = image.topic("t").unwrap();
        assert_eq!(
            t.partitions.iter().map(|p| p.partition).collect::<Vec<_>>(),
            vec![0, 1]
        );
        assert_eq!(t.configs["cleanup.policy"], "compact");
        assert_eq!(image.topic_by_id(Uuid::from_u128(7)).unwrap().name, "t");

        // Kafka's controlled shutdown with ELR, then a leader elected again.
        let change = |leader, isr: Vec<i32>, elr: Vec<i32>| {
            MetadataRecord::PartitionChange(PartitionChangeRecord {
                partition_id: 0,
                topic_id: Uuid::from_u128(7),
                isr: Some(isr),
                leader,
                leader_recovery_state: -1,
                eligible_leader_replicas: Some(elr.clone()),
                last_known_elr: Some(elr),
                ..Default::default()
            })
        };
        replay_all(&mut image, &[change(-1, vec![], vec![1])]);
        let p = image.topic("t").unwrap().partitions[0].state.clone();
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (-1, 1, 1));
        assert_eq!(
            (p.isr.clone(), p.eligible_leader_replicas),
            (vec![], vec![1])
        );
        replay_all(&mut image, &[change(1, vec![1], vec![])]);
        let p = &image.topic("t").unwrap().partitions[0].state;
        assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (1, 2, 2));

        replay_all(&mut image, &[config("t", "cleanup.policy", None)]);
        assert!(image.topic("t").unwrap().configs.is_empty());
        let removed = image
            .replay(&MetadataRecord::RemoveTopic {
                topic_id: Uuid::from_u128(7),
            })
            .unwrap();
        assert!(matches!(removed, Change::TopicRemoved(t) if t.name == "t"));
        assert!(image.topic("t").is_none());
        // Configs went with the topic: a new topic of the same name starts clean.
        replay_all(&mut image, &[topic("t", 8)]);
        assert!(image.topic("t").unwrap().configs.is_empty());
    }

    #[test]
    fn contradictions_are_errors() {
        let mut image = MetadataImage::default();
        assert!(image.replay(&partition(1, 0)).is_err());
        assert!(image
            .replay(&MetadataRecord::RemoveTopic {
                topic_id: Uuid::from_u128(1)
            })
            .is_err());
        replay_all(&mut image, &[topic("t", 1)]);
        assert!(image.replay(&topic("t", 2)).is_err());
        let pid = |n| MetadataRecord::ProducerIds {
            broker_id: 1,
            broker_epoch: -1,
            next_producer_id: n,
        };
        replay_all(&mut image, &[pid(1000)]);
        assert_eq!(image.next_producer_id(), 1000);
        assert!(image.replay(&pid(1000)).is_err());
    }
}
