//! Kafka's KRaft metadata records (apache/kafka `metadata/src/main/resources/common/metadata/`),
//! the ones skua reads and writes, and the frame every record value carries.
//!
//! A record value is `frameVersion` (unsigned varint, 1), `apiKey` (unsigned varint),
//! `version` (unsigned varint), then the record in Kafka's flexible encoding. Keys are null.
//! Records skua does not interpret (broker registrations, delegation
//! tokens, no-ops) are kept as [`MetadataRecord::Other`]: they stay in the log untouched. A
//! record skua interprets in a version newer than it knows is an error: guessing at its
//! fields could misread the cluster.

mod access;
pub mod batch;
pub mod control;
pub mod wire;

use uuid::Uuid;

use crate::quota::entity::QuotaEntity;
use wire::{encoded, Reader, WireError, Writer};

/// The only frame version Kafka writes (`AbstractApiMessageSerde.DEFAULT_FRAME_VERSION`).
const FRAME_VERSION: u32 = 1;

/// `ConfigRecord.resourceType` for a topic (`ConfigResource.Type.TOPIC`).
pub const CONFIG_RESOURCE_TOPIC: i8 = 2;
/// `ConfigResource.Type.BROKER`: one broker's configs, or the cluster's defaults (name "").
pub const CONFIG_RESOURCE_BROKER: i8 = 4;
/// `ConfigResource.Type.GROUP`: a consumer (or share, streams) group's configs.
pub const CONFIG_RESOURCE_GROUP: i8 = 32;

/// `PartitionChangeRecord.leader`: the leader did not change.
pub const NO_LEADER_CHANGE: i32 = -2;
pub const NO_LEADER: i32 = -1;

mod api_key {
    pub const REGISTER_BROKER: u32 = 0;
    pub const UNREGISTER_BROKER: u32 = 1;
    pub const FENCE_BROKER: u32 = 7;
    pub const UNFENCE_BROKER: u32 = 8;
    pub const BROKER_REGISTRATION_CHANGE: u32 = 17;
    pub const TOPIC: u32 = 2;
    pub const PARTITION: u32 = 3;
    pub const CONFIG: u32 = 4;
    pub const PARTITION_CHANGE: u32 = 5;
    pub const REMOVE_TOPIC: u32 = 9;
    pub const FEATURE_LEVEL: u32 = 12;
    pub const USER_SCRAM_CREDENTIAL: u32 = 11;
    pub const CLIENT_QUOTA: u32 = 14;
    pub const PRODUCER_IDS: u32 = 15;
    pub const REMOVE_USER_SCRAM_CREDENTIAL: u32 = 22;
    pub const ACCESS_CONTROL_ENTRY: u32 = 18;
    pub const REMOVE_ACCESS_CONTROL_ENTRY: u32 = 19;
    pub const BEGIN_TRANSACTION: u32 = 23;
    pub const END_TRANSACTION: u32 = 24;
    pub const ABORT_TRANSACTION: u32 = 25;
}

/// `PartitionRecord` (apiKey 3), versions 0–2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionRecord {
    pub partition_id: i32,
    pub topic_id: Uuid,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub removing_replicas: Vec<i32>,
    pub adding_replicas: Vec<i32>,
    pub leader: i32,
    /// Tag 0: 1 while a leader elected uncleanly is recovering.
    pub leader_recovery_state: i8,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    /// v1+: the log dir (directory.id) of each replica, in `replicas` order.
    pub directories: Vec<Uuid>,
    /// v2+ tag 1 and tag 2 (KIP-966); empty when absent.
    pub eligible_leader_replicas: Vec<i32>,
    pub last_known_elr: Vec<i32>,
}

/// `PartitionChangeRecord` (apiKey 5), versions 0–2: every field but the ids is optional
/// and `None` means unchanged. Replaying one that names a leader (even the same one) bumps
/// the leader epoch; any change bumps the partition epoch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionChangeRecord {
    pub partition_id: i32,
    pub topic_id: Uuid,
    pub isr: Option<Vec<i32>>,
    /// `NO_LEADER_CHANGE` (-2) when unchanged.
    pub leader: i32,
    pub replicas: Option<Vec<i32>>,
    pub removing_replicas: Option<Vec<i32>>,
    pub adding_replicas: Option<Vec<i32>>,
    /// -1 when unchanged.
    pub leader_recovery_state: i8,
    pub directories: Option<Vec<Uuid>>,
    pub eligible_leader_replicas: Option<Vec<i32>>,
    pub last_known_elr: Option<Vec<i32>>,
}

/// `UserScramCredentialRecord` (apiKey 11), version 0.
#[derive(Clone, PartialEq, Eq)]
pub struct UserScramCredential {
    pub name: String,
    pub mechanism: i8,
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl std::fmt::Debug for UserScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "UserScramCredential({}, mechanism {}, iterations {}, keys hidden)",
            self.name, self.mechanism, self.iterations
        )
    }
}

/// `AccessControlEntryRecord` (apiKey 18), version 0: one ACL with its id, in Kafka's codes
/// (`auth::acl` reads them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessControlEntryRecord {
    pub id: Uuid,
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission_type: i8,
}

/// `ClientQuotaRecord` (apiKey 14), version 0: sets or removes one quota key of one
/// entity.
#[derive(Clone, Debug)]
pub struct ClientQuotaRecord {
    /// (entity type, name): `user`, `client-id` or `ip`; a null name is the default.
    pub entity: Vec<(String, Option<String>)>,
    pub key: String,
    /// Ignored when `remove`.
    pub value: f64,
    pub remove: bool,
}

impl ClientQuotaRecord {
    /// The user / client-id entity it names; None for the entities skua does not
    /// enforce (IP addresses).
    pub fn entity(&self) -> Option<QuotaEntity> {
        crate::quota::configs::parse_entity(&self.entity).ok()
    }

    /// The record setting (`Some`) or removing (`None`) `key` of `entity`.
    pub fn new(entity: &QuotaEntity, key: &str, value: Option<f64>) -> ClientQuotaRecord {
        ClientQuotaRecord {
            entity: entity
                .components()
                .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
                .collect(),
            key: key.to_string(),
            value: value.unwrap_or(0.0),
            remove: value.is_none(),
        }
    }
}

// The value compared by its bits, so records are `Eq` as the others are.
impl PartialEq for ClientQuotaRecord {
    fn eq(&self, other: &Self) -> bool {
        self.entity == other.entity
            && self.key == other.key
            && self.value.to_bits() == other.value.to_bits()
            && self.remove == other.remove
    }
}

impl Eq for ClientQuotaRecord {}

/// One endpoint of a `RegisterBrokerRecord`: a listener's name and address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerEndpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
    pub security_protocol: i16,
}

/// One record of the metadata log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetadataRecord {
    Topic {
        name: String,
        topic_id: Uuid,
    },
    Partition(PartitionRecord),
    PartitionChange(PartitionChangeRecord),
    /// A config of any resource; `value: None` deletes the key.
    Config {
        resource_type: i8,
        resource_name: String,
        name: String,
        value: Option<String>,
    },
    /// Removes a topic, its partitions and its configs.
    RemoveTopic {
        topic_id: Uuid,
    },
    FeatureLevel {
        name: String,
        level: i16,
    },
    ClientQuota(ClientQuotaRecord),
    /// The first producer id of the next block to hand out.
    ProducerIds {
        broker_id: i32,
        broker_epoch: i64,
        next_producer_id: i64,
    },
    /// A broker's registration (Kafka's controllers write it; skua's single node never
    /// does): its epoch, and the endpoints, rack and state Metadata answers come from.
    RegisterBroker {
        broker_id: i32,
        broker_epoch: i64,
        endpoints: Vec<BrokerEndpoint>,
        rack: Option<String>,
        fenced: bool,
        in_controlled_shutdown: bool,
    },
    FenceBroker {
        broker_id: i32,
        broker_epoch: i64,
    },
    UnfenceBroker {
        broker_id: i32,
        broker_epoch: i64,
    },
    /// A change to a registration: `fenced` -1 unfenced, 0 no change, 1 fenced;
    /// `in_controlled_shutdown` 0 no change, 1 in controlled shutdown.
    BrokerRegistrationChange {
        broker_id: i32,
        broker_epoch: i64,
        fenced: i8,
        in_controlled_shutdown: i8,
    },
    /// A user's SCRAM credential for one mechanism (Kafka's `ScramMechanism` type: 1 is
    /// SCRAM-SHA-256, 2 SCRAM-SHA-512), added or replaced.
    UserScramCredential(UserScramCredential),
    RemoveUserScramCredential {
        name: String,
        mechanism: i8,
    },
    AccessControlEntry(AccessControlEntryRecord),
    /// Removes the ACL of that id.
    RemoveAccessControlEntry {
        id: Uuid,
    },
    UnregisterBroker {
        broker_id: i32,
    },
    /// KIP-868 metadata transactions: the records between Begin and End apply together;
    /// Abort (or a log ending before End) discards them.
    BeginTransaction,
    EndTransaction,
    AbortTransaction,
    /// A record skua keeps but does not interpret.
    Other {
        api_key: u32,
        version: u32,
    },
}

impl MetadataRecord {
    /// Decodes one record value (frame included).
    pub fn decode(value: &[u8]) -> Result<MetadataRecord, WireError> {
        let mut r = Reader::new(value);
        let frame = r.uvarint()?;
        if frame != FRAME_VERSION {
            return Err(WireError(format!("unknown metadata frame version {frame}")));
        }
        let api_key = r.uvarint()?;
        let version = r.uvarint()?;
        if let Some((name, max)) = interpreted(api_key).filter(|(_, max)| version > *max) {
            return Err(WireError(format!(
                "{name} version {version} is newer than the versions skua reads (0-{max})"
            )));
        }
        use api_key::*;
        let r = &mut r;
        let record = match api_key {
            TOPIC => decode_topic(r)?,
            PARTITION => MetadataRecord::Partition(decode_partition(r, version)?),
            PARTITION_CHANGE => MetadataRecord::PartitionChange(decode_partition_change(r, version)?),
            CONFIG => decode_config(r)?,
            REMOVE_TOPIC => {
                let topic_id = r.uuid()?;
                r.skip_tagged_fields()?;
                MetadataRecord::RemoveTopic { topic_id }
            }
            FEATURE_LEVEL => {
                let name = r.string()?;
                let level = r.i16()?;
                r.skip_tagged_fields()?;
                MetadataRecord::FeatureLevel { name, level }
            }
            PRODUCER_IDS => decode_producer_ids(r)?,
            USER_SCRAM_CREDENTIAL => access::decode_user_scram_credential(r)?,
            REMOVE_USER_SCRAM_CREDENTIAL => access::decode_remove_user_scram_credential(r)?,
            ACCESS_CONTROL_ENTRY => access::decode_access_control_entry(r)?,
            REMOVE_ACCESS_CONTROL_ENTRY => access::decode_remove_access_control_entry(r)?,
            CLIENT_QUOTA => access::decode_client_quota(r)?,
            REGISTER_BROKER => decode_register_broker(r, version)?,
            FENCE_BROKER | UNFENCE_BROKER => decode_fence_broker(r, api_key)?,
            BROKER_REGISTRATION_CHANGE => decode_broker_registration_change(r, version)?,
            UNREGISTER_BROKER if version == 0 => MetadataRecord::UnregisterBroker {
                broker_id: r.i32()?,
            },
            BEGIN_TRANSACTION if version == 0 => MetadataRecord::BeginTransaction,
            END_TRANSACTION if version == 0 => MetadataRecord::EndTransaction,
            ABORT_TRANSACTION if version == 0 => MetadataRecord::AbortTransaction,
            BEGIN_TRANSACTION | END_TRANSACTION | ABORT_TRANSACTION => {
                return Err(WireError(format!(
                    "metadata transaction record {api_key} version {version} is newer than skua reads"
                )))
            }
            _ => MetadataRecord::Other { api_key, version },
        };
        Ok(record)
    }

    /// Encodes the record (frame included). `partition_version` is the PartitionRecord and
    /// PartitionChangeRecord version the cluster's metadata.version calls for (0, 1 or 2).
    pub fn encode(&self, partition_version: u32) -> Vec<u8> {
        use api_key::*;
        let mut w = Writer::default();
        w.uvarint(FRAME_VERSION);
        match self {
            MetadataRecord::Topic { name, topic_id } => encode_topic(&mut w, name, *topic_id),
            MetadataRecord::Partition(p) => {
                header(&mut w, PARTITION, partition_version);
                encode_partition(&mut w, p, partition_version);
            }
            MetadataRecord::PartitionChange(c) => {
                header(&mut w, PARTITION_CHANGE, partition_version);
                encode_partition_change(&mut w, c, partition_version);
            }
            MetadataRecord::Config {
                resource_type,
                resource_name,
                name,
                value,
            } => encode_config(
                &mut w,
                *resource_type,
                resource_name,
                name,
                value.as_deref(),
            ),
            MetadataRecord::RemoveTopic { topic_id } => {
                header(&mut w, REMOVE_TOPIC, 0);
                w.uuid(*topic_id);
                w.no_tagged_fields();
            }
            MetadataRecord::FeatureLevel { name, level } => {
                header(&mut w, FEATURE_LEVEL, 0);
                w.string(name);
                w.i16(*level);
                w.no_tagged_fields();
            }
            MetadataRecord::ClientQuota(q) => access::encode_client_quota(&mut w, q),
            MetadataRecord::ProducerIds {
                broker_id,
                broker_epoch,
                next_producer_id,
            } => encode_producer_ids(&mut w, *broker_id, *broker_epoch, *next_producer_id),
            MetadataRecord::UserScramCredential(c) => {
                access::encode_user_scram_credential(&mut w, c)
            }
            MetadataRecord::RemoveUserScramCredential { name, mechanism } => {
                access::encode_remove_user_scram_credential(&mut w, name, *mechanism)
            }
            MetadataRecord::AccessControlEntry(acl) => {
                access::encode_access_control_entry(&mut w, acl)
            }
            MetadataRecord::RemoveAccessControlEntry { id } => {
                header(&mut w, REMOVE_ACCESS_CONTROL_ENTRY, 0);
                w.uuid(*id);
                w.no_tagged_fields();
            }
            MetadataRecord::BeginTransaction => encode_empty(&mut w, BEGIN_TRANSACTION),
            MetadataRecord::EndTransaction => encode_empty(&mut w, END_TRANSACTION),
            MetadataRecord::AbortTransaction => encode_empty(&mut w, ABORT_TRANSACTION),
            // Never written by skua: these come from Kafka and stay where Kafka put them.
            MetadataRecord::RegisterBroker { .. }
            | MetadataRecord::FenceBroker { .. }
            | MetadataRecord::UnfenceBroker { .. }
            | MetadataRecord::BrokerRegistrationChange { .. }
            | MetadataRecord::UnregisterBroker { .. }
            | MetadataRecord::Other { .. } => {
                unreachable!("skua does not write {self:?}")
            }
        }
        w.buf
    }
}

/// The records skua interprets, by name, with the newest version it reads: a newer one
/// is an error, since guessing at its fields could misread the cluster.
fn interpreted(api_key: u32) -> Option<(&'static str, u32)> {
    use api_key::*;
    Some(match api_key {
        TOPIC => ("TopicRecord", 0),
        PARTITION => ("PartitionRecord", 2),
        PARTITION_CHANGE => ("PartitionChangeRecord", 2),
        CONFIG => ("ConfigRecord", 0),
        REMOVE_TOPIC => ("RemoveTopicRecord", 0),
        FEATURE_LEVEL => ("FeatureLevelRecord", 0),
        PRODUCER_IDS => ("ProducerIdsRecord", 0),
        USER_SCRAM_CREDENTIAL => ("UserScramCredentialRecord", 0),
        REMOVE_USER_SCRAM_CREDENTIAL => ("RemoveUserScramCredentialRecord", 0),
        ACCESS_CONTROL_ENTRY => ("AccessControlEntryRecord", 0),
        REMOVE_ACCESS_CONTROL_ENTRY => ("RemoveAccessControlEntryRecord", 0),
        CLIENT_QUOTA => ("ClientQuotaRecord", 0),
        REGISTER_BROKER => ("RegisterBrokerRecord", 4),
        FENCE_BROKER => ("FenceBrokerRecord", 0),
        UNFENCE_BROKER => ("UnfenceBrokerRecord", 0),
        BROKER_REGISTRATION_CHANGE => ("BrokerRegistrationChangeRecord", 3),
        _ => return None,
    })
}

fn decode_topic(r: &mut Reader<'_>) -> Result<MetadataRecord, WireError> {
    let name = r.string()?;
    let topic_id = r.uuid()?;
    r.skip_tagged_fields()?;
    Ok(MetadataRecord::Topic { name, topic_id })
}

fn decode_config(r: &mut Reader<'_>) -> Result<MetadataRecord, WireError> {
    let resource_type = r.i8()?;
    let resource_name = r.string()?;
    let name = r.string()?;
    let value = r.nullable_string()?;
    r.skip_tagged_fields()?;
    Ok(MetadataRecord::Config {
        resource_type,
        resource_name,
        name,
        value,
    })
}

fn decode_producer_ids(r: &mut Reader<'_>) -> Result<MetadataRecord, WireError> {
    let broker_id = r.i32()?;
    let broker_epoch = r.i64()?;
    let next_producer_id = r.i64()?;
    r.skip_tagged_fields()?;
    Ok(MetadataRecord::ProducerIds {
        broker_id,
        broker_epoch,
        next_producer_id,
    })
}

/// Only the leading fields are read: the id and epoch the clean-shutdown marker needs.
/// A RegisterBrokerRecord (v0-4): the id, epoch, listeners, rack and fencing. Features
/// are read past (the controllers checked them); LogDirs and CordonedLogDirs are tagged
/// fields, skipped.
fn decode_register_broker(r: &mut Reader<'_>, version: u32) -> Result<MetadataRecord, WireError> {
    let broker_id = r.i32()?;
    if version >= 2 {
        r.bool()?; // isMigratingZkBroker
    }
    r.uuid()?; // incarnationId
    let broker_epoch = r.i64()?;
    let endpoints = r.array_of(7, |r| {
        let name = r.string()?;
        let host = r.string()?;
        let port = r.i16()? as u16;
        let security_protocol = r.i16()?;
        r.skip_tagged_fields()?;
        Ok(BrokerEndpoint {
            name,
            host,
            port,
            security_protocol,
        })
    })?;
    r.array_of(6, |r| {
        r.string()?;
        r.i16()?;
        r.i16()?;
        r.skip_tagged_fields()
    })?;
    let rack = r.nullable_string()?;
    let fenced = r.bool()?;
    let in_controlled_shutdown = version >= 1 && r.bool()?;
    r.skip_tagged_fields()?;
    Ok(MetadataRecord::RegisterBroker {
        broker_id,
        broker_epoch,
        endpoints,
        rack,
        fenced,
        in_controlled_shutdown,
    })
}

/// A FenceBrokerRecord or UnfenceBrokerRecord (v0).
fn decode_fence_broker(r: &mut Reader<'_>, api_key: u32) -> Result<MetadataRecord, WireError> {
    let broker_id = r.i32()?;
    let broker_epoch = r.i64()?;
    r.skip_tagged_fields()?;
    Ok(match api_key {
        api_key::FENCE_BROKER => MetadataRecord::FenceBroker {
            broker_id,
            broker_epoch,
        },
        _ => MetadataRecord::UnfenceBroker {
            broker_id,
            broker_epoch,
        },
    })
}

/// A BrokerRegistrationChangeRecord (v0-3): fencing and controlled shutdown are tagged
/// fields; the log dirs of v2+ are skipped.
fn decode_broker_registration_change(
    r: &mut Reader<'_>,
    version: u32,
) -> Result<MetadataRecord, WireError> {
    let broker_id = r.i32()?;
    let broker_epoch = r.i64()?;
    let (mut fenced, mut in_controlled_shutdown) = (0, 0);
    r.tagged_fields(|tag, body| {
        match tag {
            0 => fenced = body.i8()?,
            1 if version >= 1 => in_controlled_shutdown = body.i8()?,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(MetadataRecord::BrokerRegistrationChange {
        broker_id,
        broker_epoch,
        fenced,
        in_controlled_shutdown,
    })
}

fn encode_topic(w: &mut Writer, name: &str, topic_id: Uuid) {
    header(w, api_key::TOPIC, 0);
    w.string(name);
    w.uuid(topic_id);
    w.no_tagged_fields();
}

fn encode_producer_ids(w: &mut Writer, broker_id: i32, broker_epoch: i64, next: i64) {
    header(w, api_key::PRODUCER_IDS, 0);
    w.i32(broker_id);
    w.i64(broker_epoch);
    w.i64(next);
    w.no_tagged_fields();
}

fn encode_config(
    w: &mut Writer,
    resource_type: i8,
    resource_name: &str,
    name: &str,
    value: Option<&str>,
) {
    header(w, api_key::CONFIG, 0);
    w.i8(resource_type);
    w.string(resource_name);
    w.string(name);
    w.nullable_string(value);
    w.no_tagged_fields();
}

/// A record of no fields (the metadata transaction markers).
fn encode_empty(w: &mut Writer, api_key: u32) {
    header(w, api_key, 0);
    w.no_tagged_fields();
}

pub(super) fn header(w: &mut Writer, api_key: u32, version: u32) {
    w.uvarint(api_key);
    w.uvarint(version);
}

fn decode_partition(r: &mut Reader<'_>, version: u32) -> Result<PartitionRecord, WireError> {
    let mut p = PartitionRecord {
        partition_id: r.i32()?,
        topic_id: r.uuid()?,
        replicas: r.i32_array()?,
        isr: r.i32_array()?,
        removing_replicas: r.i32_array()?,
        adding_replicas: r.i32_array()?,
        leader: r.i32()?,
        leader_recovery_state: 0,
        leader_epoch: r.i32()?,
        partition_epoch: r.i32()?,
        directories: Vec::new(),
        eligible_leader_replicas: Vec::new(),
        last_known_elr: Vec::new(),
    };
    if version >= 1 {
        p.directories = r.uuid_array()?;
    }
    r.tagged_fields(|tag, body| {
        match tag {
            0 => p.leader_recovery_state = body.i8()?,
            1 if version >= 2 => {
                p.eligible_leader_replicas =
                    body.nullable_array(4, Reader::i32)?.unwrap_or_default()
            }
            2 if version >= 2 => {
                p.last_known_elr = body.nullable_array(4, Reader::i32)?.unwrap_or_default()
            }
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(p)
}

fn encode_partition(w: &mut Writer, p: &PartitionRecord, version: u32) {
    w.i32(p.partition_id);
    w.uuid(p.topic_id);
    w.i32_array(&p.replicas);
    w.i32_array(&p.isr);
    w.i32_array(&p.removing_replicas);
    w.i32_array(&p.adding_replicas);
    w.i32(p.leader);
    w.i32(p.leader_epoch);
    w.i32(p.partition_epoch);
    if version >= 1 {
        w.uuid_array(&p.directories);
    }
    // Tagged fields at their defaults are left out, as Kafka's generated code does.
    let mut tags = Vec::new();
    if p.leader_recovery_state != 0 {
        tags.push((0, encoded(|w| w.i8(p.leader_recovery_state))));
    }
    if version >= 2 && !p.eligible_leader_replicas.is_empty() {
        tags.push((1, encoded(|w| w.i32_array(&p.eligible_leader_replicas))));
    }
    if version >= 2 && !p.last_known_elr.is_empty() {
        tags.push((2, encoded(|w| w.i32_array(&p.last_known_elr))));
    }
    w.tagged_fields(&tags);
}

fn decode_partition_change(
    r: &mut Reader<'_>,
    version: u32,
) -> Result<PartitionChangeRecord, WireError> {
    let mut c = PartitionChangeRecord {
        partition_id: r.i32()?,
        topic_id: r.uuid()?,
        leader: NO_LEADER_CHANGE,
        leader_recovery_state: -1,
        ..Default::default()
    };
    r.tagged_fields(|tag, body| {
        let ints = |body: &mut Reader<'_>| body.nullable_array(4, Reader::i32);
        match tag {
            0 => c.isr = ints(body)?,
            1 => c.leader = body.i32()?,
            2 => c.replicas = ints(body)?,
            3 => c.removing_replicas = ints(body)?,
            4 => c.adding_replicas = ints(body)?,
            5 => c.leader_recovery_state = body.i8()?,
            6 if version >= 2 => c.eligible_leader_replicas = ints(body)?,
            7 if version >= 2 => c.last_known_elr = ints(body)?,
            8 if version >= 1 => c.directories = body.nullable_array(16, Reader::uuid)?,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(c)
}

fn encode_partition_change(w: &mut Writer, c: &PartitionChangeRecord, version: u32) {
    w.i32(c.partition_id);
    w.uuid(c.topic_id);
    let mut tags = Vec::new();
    let ints = |v: &Vec<i32>| encoded(|w| w.i32_array(v));
    if let Some(isr) = &c.isr {
        tags.push((0, ints(isr)));
    }
    if c.leader != NO_LEADER_CHANGE {
        tags.push((1, encoded(|w| w.i32(c.leader))));
    }
    if let Some(v) = &c.replicas {
        tags.push((2, ints(v)));
    }
    if let Some(v) = &c.removing_replicas {
        tags.push((3, ints(v)));
    }
    if let Some(v) = &c.adding_replicas {
        tags.push((4, ints(v)));
    }
    if c.leader_recovery_state != -1 {
        tags.push((5, encoded(|w| w.i8(c.leader_recovery_state))));
    }
    if version >= 2 {
        if let Some(v) = &c.eligible_leader_replicas {
            tags.push((6, ints(v)));
        }
        if let Some(v) = &c.last_known_elr {
            tags.push((7, ints(v)));
        }
    }
    if version >= 1 {
        if let Some(v) = &c.directories {
            tags.push((8, encoded(|w| w.uuid_array(v))));
        }
    }
    w.tagged_fields(&tags);
}

/// The PartitionRecord / PartitionChangeRecord version Kafka writes at a metadata.version
/// feature level (`MetadataVersion.partitionRecordVersion`): directories from 3.7-IV2 (17),
/// eligible leader replicas from 4.0-IV1 (23).
pub fn partition_record_version(metadata_version: i16) -> u32 {
    match metadata_version {
        v if v >= 23 => 2,
        v if v >= 17 => 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(record: MetadataRecord, version: u32) {
        let bytes = record.encode(version);
        assert_eq!(MetadataRecord::decode(&bytes).unwrap(), record);
    }

    #[test]
    fn records_round_trip() {
        let id = Uuid::from_u128(0x1234);
        round_trip(
            MetadataRecord::Topic {
                name: "orders".into(),
                topic_id: id,
            },
            0,
        );
        for version in 0..=2 {
            round_trip(
                MetadataRecord::Partition(PartitionRecord {
                    partition_id: 3,
                    topic_id: id,
                    replicas: vec![1],
                    isr: vec![1],
                    removing_replicas: vec![],
                    adding_replicas: vec![],
                    leader: 1,
                    leader_recovery_state: 0,
                    leader_epoch: 4,
                    partition_epoch: 5,
                    directories: if version >= 1 {
                        vec![Uuid::from_u128(9)]
                    } else {
                        vec![]
                    },
                    eligible_leader_replicas: vec![],
                    last_known_elr: if version >= 2 { vec![1] } else { vec![] },
                }),
                version,
            );
        }
        round_trip(
            MetadataRecord::PartitionChange(PartitionChangeRecord {
                partition_id: 0,
                topic_id: id,
                isr: Some(vec![1]),
                leader: 1,
                leader_recovery_state: -1,
                eligible_leader_replicas: Some(vec![]),
                last_known_elr: Some(vec![]),
                ..Default::default()
            }),
            2,
        );
        round_trip(
            MetadataRecord::Config {
                resource_type: CONFIG_RESOURCE_TOPIC,
                resource_name: "orders".into(),
                name: "cleanup.policy".into(),
                value: None,
            },
            0,
        );
        round_trip(
            MetadataRecord::ProducerIds {
                broker_id: 1,
                broker_epoch: -1,
                next_producer_id: 2000,
            },
            0,
        );
        round_trip(MetadataRecord::AbortTransaction, 0);
        round_trip(
            MetadataRecord::UserScramCredential(UserScramCredential {
                name: "alice".into(),
                mechanism: 2,
                salt: vec![1, 2, 3],
                stored_key: vec![4; 64],
                server_key: vec![5; 64],
                iterations: 8192,
            }),
            0,
        );
        round_trip(
            MetadataRecord::RemoveUserScramCredential {
                name: "alice".into(),
                mechanism: 1,
            },
            0,
        );
        round_trip(
            MetadataRecord::AccessControlEntry(AccessControlEntryRecord {
                id,
                resource_type: 2,
                resource_name: "orders".into(),
                pattern_type: 4,
                principal: "User:alice".into(),
                host: "*".into(),
                operation: 3,
                permission_type: 3,
            }),
            0,
        );
        round_trip(MetadataRecord::RemoveAccessControlEntry { id }, 0);
    }

    /// The bytes of Kafka's generated `AccessControlEntryRecord` v0 (flexible: compact
    /// strings, length + 1) and `RemoveAccessControlEntryRecord` v0.
    #[test]
    fn acl_records_in_kafkas_layout() {
        let id = Uuid::from_u128(0x0102);
        let bytes = MetadataRecord::AccessControlEntry(AccessControlEntryRecord {
            id,
            resource_type: 2,
            resource_name: "t".into(),
            pattern_type: 3,
            principal: "User:a".into(),
            host: "*".into(),
            operation: 4,
            permission_type: 3,
        })
        .encode(0);
        let mut want = vec![1, 18, 0];
        want.extend_from_slice(id.as_bytes());
        want.extend_from_slice(&[2, 2, b't', 3, 7]);
        want.extend_from_slice(b"User:a");
        want.extend_from_slice(&[2, b'*', 4, 3, 0]);
        assert_eq!(bytes, want);
        let mut remove = vec![1, 19, 0];
        remove.extend_from_slice(id.as_bytes());
        remove.push(0);
        assert_eq!(
            MetadataRecord::decode(&remove).unwrap(),
            MetadataRecord::RemoveAccessControlEntry { id }
        );
    }

    /// Bytes Apache Kafka 4.4 wrote (DumpLogSegments shows them as
    /// `{"type":"TOPIC_RECORD","version":0,"data":{"name":"t1","topicId":"LoMLgq0bRtyNmD97KBQrkg"}}`
    /// and a FeatureLevelRecord metadata.version=33).
    #[test]
    fn decodes_kafka_written_values() {
        let topic = [
            1, 2, 0, 3, b't', b'1', 0x2e, 0x83, 0x0b, 0x82, 0xad, 0x1b, 0x46, 0xdc, 0x8d, 0x98,
            0x3f, 0x7b, 0x28, 0x14, 0x2b, 0x92, 0,
        ];
        assert_eq!(
            MetadataRecord::decode(&topic).unwrap(),
            MetadataRecord::Topic {
                name: "t1".into(),
                topic_id: crate::log::kafka_string_to_uuid("LoMLgq0bRtyNmD97KBQrkg").unwrap(),
            }
        );
        let mut feature = vec![1, 12, 0, 17];
        feature.extend_from_slice(b"metadata.version");
        feature.extend_from_slice(&[0, 33, 0]);
        assert_eq!(
            MetadataRecord::decode(&feature).unwrap(),
            MetadataRecord::FeatureLevel {
                name: "metadata.version".into(),
                level: 33
            }
        );
        let mut partition = vec![1, 3, 2, 0, 0, 0, 0];
        partition.extend_from_slice(&topic[6..22]);
        partition.extend_from_slice(&[2, 0, 0, 0, 1, 2, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1]);
        partition.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 2]);
        let dir = crate::log::kafka_string_to_uuid("ADWL50JYHS6Ie6C6nQ0zeQ").unwrap();
        partition.extend_from_slice(dir.as_bytes());
        partition.push(0);
        let MetadataRecord::Partition(p) = MetadataRecord::decode(&partition).unwrap() else {
            panic!("not a PartitionRecord");
        };
        assert_eq!(
            (
                p.partition_id,
                p.replicas.clone(),
                p.isr.clone(),
                p.leader,
                p.leader_epoch
            ),
            (0, vec![1], vec![1], 1, 0)
        );
        assert_eq!(p.directories, vec![dir]);
        assert_eq!(MetadataRecord::Partition(p.clone()).encode(2), partition);
        // BeginTransactionRecord with its tagged name "Bootstrap records".
        let mut begin = vec![1, 23, 0, 1, 0, 18, 18];
        begin.extend_from_slice(b"Bootstrap records");
        assert_eq!(
            MetadataRecord::decode(&begin).unwrap(),
            MetadataRecord::BeginTransaction
        );
    }

    /// RegisterBrokerRecord v4 as Kafka's schema lays it out (two endpoints, a feature,
    /// a rack, LogDirs in tag 0), then the records that fence and unfence it.
    #[test]
    fn broker_registration_records_in_kafkas_layout() {
        let mut w = Writer::default();
        w.uvarint(FRAME_VERSION);
        header(&mut w, api_key::REGISTER_BROKER, 4);
        w.i32(7);
        w.bool(false); // isMigratingZkBroker
        w.uuid(Uuid::from_u128(9)); // incarnationId
        w.i64(42);
        w.uvarint(3); // two endpoints
        for (name, port, protocol) in [("PLAINTEXT", 9092u16, 0i16), ("SSL", 9093, 1)] {
            w.string(name);
            w.string("b7.example");
            w.i16(port as i16);
            w.i16(protocol);
            w.no_tagged_fields();
        }
        w.uvarint(2); // one feature
        w.string("metadata.version");
        w.i16(7);
        w.i16(33);
        w.no_tagged_fields();
        w.nullable_string(Some("r1"));
        w.bool(true); // fenced
        w.bool(false); // inControlledShutdown
        w.tagged_fields(&[(0, encoded(|w| w.uuid_array(&[Uuid::from_u128(5)])))]);
        let record = MetadataRecord::decode(&w.buf).unwrap();
        assert_eq!(
            record,
            MetadataRecord::RegisterBroker {
                broker_id: 7,
                broker_epoch: 42,
                endpoints: vec![
                    BrokerEndpoint {
                        name: "PLAINTEXT".into(),
                        host: "b7.example".into(),
                        port: 9092,
                        security_protocol: 0,
                    },
                    BrokerEndpoint {
                        name: "SSL".into(),
                        host: "b7.example".into(),
                        port: 9093,
                        security_protocol: 1,
                    },
                ],
                rack: Some("r1".into()),
                fenced: true,
                in_controlled_shutdown: false,
            }
        );
        // Cut anywhere, it is an error, not a panic.
        for n in 4..w.buf.len() - 1 {
            assert!(MetadataRecord::decode(&w.buf[..n]).is_err(), "cut at {n}");
        }
        let mut bytes = w.buf.clone();
        bytes[2] = 5;
        assert!(MetadataRecord::decode(&bytes).is_err(), "v5 is refused");

        for (key, fenced) in [
            (api_key::FENCE_BROKER, true),
            (api_key::UNFENCE_BROKER, false),
        ] {
            let mut w = Writer::default();
            w.uvarint(FRAME_VERSION);
            header(&mut w, key, 0);
            w.i32(7);
            w.i64(42);
            w.no_tagged_fields();
            let expected = if fenced {
                MetadataRecord::FenceBroker {
                    broker_id: 7,
                    broker_epoch: 42,
                }
            } else {
                MetadataRecord::UnfenceBroker {
                    broker_id: 7,
                    broker_epoch: 42,
                }
            };
            assert_eq!(MetadataRecord::decode(&w.buf).unwrap(), expected);
        }

        let mut w = Writer::default();
        w.uvarint(FRAME_VERSION);
        header(&mut w, api_key::BROKER_REGISTRATION_CHANGE, 2);
        w.i32(7);
        w.i64(42);
        w.tagged_fields(&[
            (0, vec![0xff]),
            (1, vec![1]),
            (2, encoded(|w| w.uuid_array(&[]))),
        ]);
        assert_eq!(
            MetadataRecord::decode(&w.buf).unwrap(),
            MetadataRecord::BrokerRegistrationChange {
                broker_id: 7,
                broker_epoch: 42,
                fenced: -1,
                in_controlled_shutdown: 1,
            }
        );
    }

    #[test]
    fn client_quota_records_as_kafkas_schema_lays_them_out() {
        let record = MetadataRecord::ClientQuota(ClientQuotaRecord {
            entity: vec![
                ("user".into(), Some("alice".into())),
                ("client-id".into(), None),
            ],
            key: "producer_byte_rate".into(),
            value: 1024.0,
            remove: false,
        });
        let mut expected = vec![1, 14, 0, 3];
        expected.extend([
            5, b'u', b's', b'e', b'r', 6, b'a', b'l', b'i', b'c', b'e', 0,
        ]);
        expected.extend([10]);
        expected.extend(b"client-id");
        expected.extend([0, 0]);
        expected.push(19);
        expected.extend(b"producer_byte_rate");
        expected.extend(1024.0f64.to_be_bytes());
        expected.extend([0, 0]);
        assert_eq!(record.encode(0), expected);
        assert_eq!(MetadataRecord::decode(&expected).unwrap(), record);
        let MetadataRecord::ClientQuota(q) = record else {
            unreachable!()
        };
        assert_eq!(
            q.entity().unwrap().to_string(),
            "user=alice, client-id=<default>"
        );
        // IP entities are kept in the log but name no user or client id.
        let ip = ClientQuotaRecord {
            entity: vec![("ip".into(), Some("10.0.0.1".into()))],
            ..q
        };
        assert_eq!(ip.entity(), None);
    }

    #[test]
    fn newer_versions_of_interpreted_records_are_refused() {
        let mut bytes = MetadataRecord::Topic {
            name: "t".into(),
            topic_id: Uuid::nil(),
        }
        .encode(0);
        bytes[2] = 1; // TopicRecord v1 does not exist yet
        let err = MetadataRecord::decode(&bytes).unwrap_err();
        assert!(err.0.contains("TopicRecord version 1"), "{err}");
        // Records skua does not interpret are kept whatever their version.
        assert_eq!(
            MetadataRecord::decode(&[1, 20, 7, 0]).unwrap(),
            MetadataRecord::Other {
                api_key: 20,
                version: 7
            }
        );
    }

    #[test]
    fn partition_versions_follow_metadata_version() {
        assert_eq!(partition_record_version(7), 0);
        assert_eq!(partition_record_version(17), 1);
        assert_eq!(partition_record_version(25), 2);
        assert_eq!(partition_record_version(33), 2);
    }
}
