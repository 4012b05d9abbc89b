//! What each metadata change writes: the records Kafka's controller would write for it,
//! checked against the image first. Pure functions of the image and the request.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::image::{MetadataImage, METADATA_VERSION};
use super::records::{
    MetadataRecord, PartitionChangeRecord, PartitionRecord, CONFIG_RESOURCE_TOPIC,
};
use super::{
    topic_name, BrokerInfo, ControllerError, LeaderAndIsr, NewTopic, PartitionAssignment,
    PartitionInfo, TopicInfo,
};

/// What the controller needs to know to start.
pub struct ControllerConfig {
    pub broker: BrokerInfo,
    pub cluster_id: String,
    /// `directory.id` of each log dir, for the `directories` of new partitions.
    pub directory_ids: Vec<Uuid>,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
}

impl ControllerConfig {
    /// The records creating `topic` (TopicRecord, its ConfigRecords, a PartitionRecord per
    /// partition, as Kafka's controller writes them) and the topic they make.
    pub fn plan_create(
        &self,
        image: &MetadataImage,
        topic: NewTopic,
    ) -> Result<(Vec<MetadataRecord>, TopicInfo), ControllerError> {
        topic_name::validate(&topic.name)
            .map_err(|m| ControllerError::new(ResponseError::InvalidTopicException, m))?;
        let count = self.partition_count(&topic)?;
        check_name_free(image, &topic.name)?;
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
            CONFIG_RESOURCE_TOPIC,
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

    /// How many partitions `topic` asks for: a count and replication factor (-1 for the
    /// broker's defaults), or explicit assignments, checked as Kafka's controller does.
    fn partition_count(&self, topic: &NewTopic) -> Result<i32, ControllerError> {
        if !topic.assignments.is_empty() {
            return self.assigned_partition_count(topic);
        }
        let n = match topic.num_partitions {
            -1 => self.num_partitions,
            n => n,
        };
        let rf = match topic.replication_factor {
            -1 => self.default_replication_factor,
            rf => rf,
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
        Ok(n)
    }

    /// The partition count of explicit assignments: partitions 0..n, each assignment legal.
    fn assigned_partition_count(&self, topic: &NewTopic) -> Result<i32, ControllerError> {
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
        Ok(topic.assignments.len() as i32)
    }

    pub fn plan_partitions(
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
        let me = self.broker.id;
        // With one log dir the partition's dir is known now; with several, LogManager
        // picks one when it creates the log, and the record says "unassigned" as Kafka's
        // controller does for a broker with several dirs.
        let directory = match self.directory_ids.as_slice() {
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
        if replicas.is_empty() || replicas.iter().any(|&b| b != self.broker.id) {
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

/// ConfigRecords turning the configs of resource `resource_name` (of `resource_type`)
/// from `from` into `to`: set keys that are new or changed, null for keys that are gone.
pub fn config_changes(
    resource_type: i8,
    resource_name: &str,
    from: &BTreeMap<String, String>,
    to: &BTreeMap<String, String>,
) -> Vec<MetadataRecord> {
    let record = |name: &str, value: Option<&String>| MetadataRecord::Config {
        resource_type,
        resource_name: resource_name.to_string(),
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

/// A new topic's name must not be taken, nor collide with a taken one (`.` and `_` are
/// the same character in metric names).
fn check_name_free(image: &MetadataImage, name: &str) -> Result<(), ControllerError> {
    if image.topic(name).is_some() {
        return Err(ControllerError::new(
            ResponseError::TopicAlreadyExists,
            format!("Topic '{name}' already exists."),
        ));
    }
    if let Some(other) = image.topics().find(|t| topic_name::collides(&t.name, name)) {
        return Err(ControllerError::new(
            ResponseError::InvalidTopicException,
            format!(
                "Topic '{name}' collides with existing topic: {}",
                other.name
            ),
        ));
    }
    Ok(())
}
