//! Topic administration in ZooKeeper mode, written as Kafka's `ZkAdminManager` and
//! `AdminZkClient` write it. Only the active controller answers CreateTopics,
//! CreatePartitions and DeleteTopics (NOT_CONTROLLER elsewhere, as Kafka 3.9 does): it
//! writes the request into ZooKeeper (the topic's assignment, `/admin/delete_topics`)
//! and then waits, up to the request timeout, for its own event loop to have acted on
//! the write (leaders elected; partitions gone from the metadata), as Kafka's delayed
//! create and delete operations wait for the broker's metadata.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use super::assignment::{assign_replicas_to_brokers, BrokerMetadata};
use super::ZkController;
use crate::controller::{topic_name, Controller, ControllerError, NewTopic, TopicInfo};
use crate::zk::session::ZkError;
use crate::zk::znodes::{self, paths, ConfigChangeNotification, EntityConfig, TopicAssignment};

fn not_controller() -> ControllerError {
    ControllerError::new(
        ResponseError::NotController,
        "This is not the correct controller for this cluster.",
    )
}

fn zk_error(e: ZkError) -> ControllerError {
    match e {
        ZkError::SessionExpired | ZkError::Fenced { .. } => not_controller(),
        e => ControllerError::new(ResponseError::UnknownServerError, e.to_string()),
    }
}

fn invalid_assignment(message: impl Into<String>) -> ControllerError {
    ControllerError::new(ResponseError::InvalidReplicaAssignment, message)
}

/// The live brokers, by id, as assignment takes them.
fn broker_metadata(zk: &ZkController) -> Vec<BrokerMetadata> {
    zk.brokers()
        .into_iter()
        .map(|b| BrokerMetadata {
            id: b.id,
            rack: b.rack,
        })
        .collect()
}

/// Kafka's `validateTopicCreate` checks of an explicit assignment.
fn validate_assignment(assignments: &BTreeMap<i32, Vec<i32>>) -> Result<(), ControllerError> {
    let sizes: BTreeSet<usize> = assignments.values().map(Vec::len).collect();
    if sizes.len() != 1 {
        return Err(invalid_assignment(
            "All partitions should have the same number of replicas",
        ));
    }
    for replicas in assignments.values() {
        if replicas.iter().collect::<BTreeSet<_>>().len() != replicas.len() {
            return Err(invalid_assignment(format!(
                "Duplicate replica assignment found: {replicas:?}"
            )));
        }
    }
    let expected: Vec<i32> = (0..assignments.len() as i32).collect();
    if assignments.keys().copied().collect::<Vec<_>>() != expected {
        return Err(invalid_assignment(
            "Partitions should be a consecutive 0-based integer sequence",
        ));
    }
    Ok(())
}

fn topic_info(
    name: &str,
    id: Uuid,
    assignment: &BTreeMap<i32, Vec<i32>>,
    configs: BTreeMap<String, String>,
) -> TopicInfo {
    TopicInfo {
        name: name.to_string(),
        topic_id: id,
        partitions: assignment
            .iter()
            .map(|(&p, replicas)| super::partition_info(p, replicas, None))
            .collect(),
        configs,
    }
}

pub async fn create_topic(
    zk: &ZkController,
    topic: NewTopic,
    validate_only: bool,
) -> Result<Arc<TopicInfo>, ControllerError> {
    if !zk.is_active() {
        return Err(not_controller());
    }
    write_topic(zk, topic, validate_only).await
}

/// Auto-creation (Metadata, FindCoordinator) from any broker, as Kafka 3.9's
/// ZooKeeper-mode brokers create topics: written to ZooKeeper by the broker itself, then
/// awaited in its metadata cache once the controller has elected the leaders.
pub async fn auto_create_topic(
    zk: &ZkController,
    topic: NewTopic,
) -> Result<Arc<TopicInfo>, ControllerError> {
    write_topic(zk, topic, false).await
}

async fn write_topic(
    zk: &ZkController,
    topic: NewTopic,
    validate_only: bool,
) -> Result<Arc<TopicInfo>, ControllerError> {
    check_new_name(zk, &topic.name)?;
    let assignment = new_topic_assignment(zk, &topic)?;
    let id = Uuid::new_v4();
    let info = topic_info(&topic.name, id, &assignment, topic.configs.clone());
    if validate_only {
        return Ok(Arc::new(info));
    }
    write_new_topic(zk, &topic, id, &assignment).await?;
    tracing::info!(topic = %topic.name, assignment = ?assignment, "topic written to ZooKeeper");
    let name = topic.name.clone();
    let message =
        format!("Topic '{name}' was written but not all its partitions have a leader yet.");
    await_leaders(zk, &name, assignment.len(), message).await
}

/// A legal name, not taken and not colliding with another topic's (`.` and `_`).
fn check_new_name(zk: &ZkController, name: &str) -> Result<(), ControllerError> {
    topic_name::validate(name)
        .map_err(|m| ControllerError::new(ResponseError::InvalidTopicException, m))?;
    let existing = zk.topics();
    if existing.iter().any(|t| t.name == name) {
        return Err(ControllerError::new(
            ResponseError::TopicAlreadyExists,
            format!("Topic '{name}' already exists."),
        ));
    }
    if let Some(other) = existing
        .iter()
        .find(|t| topic_name::collides(&t.name, name))
    {
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

/// The assignment asked for, or Kafka's over the live brokers with the defaults.
fn new_topic_assignment(
    zk: &ZkController,
    topic: &NewTopic,
) -> Result<BTreeMap<i32, Vec<i32>>, ControllerError> {
    let settings = zk.settings();
    if topic.assignments.is_empty() {
        let n = if topic.num_partitions == -1 {
            settings.num_partitions
        } else {
            topic.num_partitions
        };
        let rf = if topic.replication_factor == -1 {
            settings.default_replication_factor
        } else {
            topic.replication_factor
        };
        return assign_replicas_to_brokers(&broker_metadata(zk), n, rf as i32, None, 0);
    }
    if topic.num_partitions != -1 || topic.replication_factor != -1 {
        return Err(ControllerError::new(
            ResponseError::InvalidRequest,
            "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
        ));
    }
    validate_assignment(&topic.assignments)?;
    Ok(topic.assignments.clone())
}

/// `/config/topics/<t>` then `/brokers/topics/<t>`, as Kafka's `AdminZkClient` writes them.
async fn write_new_topic(
    zk: &ZkController,
    topic: &NewTopic,
    id: Uuid,
    assignment: &BTreeMap<i32, Vec<i32>>,
) -> Result<(), ControllerError> {
    let session = zk.shared.session()?;
    let config_path = paths::entity_config(&format!("topics/{}", topic.name));
    let config = znodes::encode(&EntityConfig::new(topic.configs.clone()));
    match session.create_recursive(&config_path, &config).await {
        Ok(_) => {}
        Err(ZkError::NodeExists(_)) => {
            session
                .set(&config_path, &config, None)
                .await
                .map_err(zk_error)?;
        }
        Err(e) => return Err(zk_error(e)),
    }
    let znode = TopicAssignment::new(crate::log::uuid_to_kafka_string(id), assignment.clone());
    match session
        .create_recursive(&paths::topic(&topic.name), &znodes::encode(&znode))
        .await
    {
        Ok(_) => {}
        Err(ZkError::NodeExists(_)) => {
            return Err(ControllerError::new(
                ResponseError::TopicAlreadyExists,
                format!("Topic '{}' already exists.", topic.name),
            ))
        }
        Err(e) => return Err(zk_error(e)),
    }
    zk.shared
        .topic_configs
        .lock()
        .insert(topic.name.clone(), topic.configs.clone());
    Ok(())
}

/// Waits (up to `request.timeout.ms`) until the topic has `partitions` partitions, each
/// with a leader; REQUEST_TIMED_OUT with `message` otherwise.
async fn await_leaders(
    zk: &ZkController,
    name: &str,
    partitions: usize,
    message: String,
) -> Result<Arc<TopicInfo>, ControllerError> {
    let done = zk
        .wait_until(zk.settings().admin_timeout, |z| {
            z.topic(name).is_some_and(|t| {
                t.partitions.len() == partitions && t.partitions.iter().all(|p| p.state.leader >= 0)
            })
        })
        .await;
    if !done {
        return Err(ControllerError::new(
            ResponseError::RequestTimedOut,
            message,
        ));
    }
    zk.topic(name)
        .ok_or_else(|| ControllerError::unknown_topic(name))
}

pub async fn delete_topic(
    zk: &ZkController,
    name: &str,
) -> Result<Arc<TopicInfo>, ControllerError> {
    if !zk.is_active() {
        return Err(not_controller());
    }
    let info = zk
        .topic(name)
        .ok_or_else(|| ControllerError::unknown_topic(name))?;
    let session = zk.shared.session()?;
    match session
        .create_recursive(&paths::delete_topic(name), &[])
        .await
    {
        Ok(_) | Err(ZkError::NodeExists(_)) => {}
        Err(e) => return Err(zk_error(e)),
    }
    tracing::info!(topic = name, "topic marked for deletion");
    // Done for the client once the brokers were told the topic is going (Kafka's
    // DelayedDeleteTopics); the znodes go once every replica confirmed.
    let gone = zk
        .wait_until(zk.settings().admin_timeout, |z| z.topic(name).is_none())
        .await;
    if !gone {
        return Err(ControllerError::new(
            ResponseError::RequestTimedOut,
            format!("Topic '{name}' is marked for deletion but its deletion has not started."),
        ));
    }
    Ok(info)
}

pub async fn create_partitions(
    zk: &ZkController,
    name: &str,
    count: i32,
    assignments: Option<Vec<Vec<i32>>>,
    validate_only: bool,
) -> Result<Arc<TopicInfo>, ControllerError> {
    if !zk.is_active() {
        return Err(not_controller());
    }
    let session = zk.shared.session()?;
    let (mut znode, version) = super::store::read_assignment(&session, name)
        .await
        .map_err(zk_error)?
        .ok_or_else(|| ControllerError::unknown_topic(name))?;
    if zk.topic(name).is_none() {
        return Err(ControllerError::new(
            ResponseError::InvalidTopicException,
            "The topic is queued for deletion.",
        ));
    }
    let existing = znode.partitions.0.len() as i32;
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
    let first = znode.partitions.0.get(&0).cloned().unwrap_or_default();
    let added = added_partitions(zk, &first, existing, count, assignments)?;
    let mut info = (*zk
        .topic(name)
        .ok_or_else(|| ControllerError::unknown_topic(name))?)
    .clone();
    info.partitions
        .extend(topic_info(name, info.topic_id, &added, BTreeMap::new()).partitions);
    if validate_only {
        return Ok(Arc::new(info));
    }
    znode.partitions.0.extend(added);
    session
        .set(&paths::topic(name), &znodes::encode(&znode), Some(version))
        .await
        .map_err(|e| match e {
            ZkError::BadVersion(_) => ControllerError::new(
                ResponseError::UnknownServerError,
                "The topic's assignment changed meanwhile; retry.",
            ),
            e => zk_error(e),
        })?;
    let message = "The new partitions were written but do not all have a leader yet.".to_string();
    await_leaders(zk, name, count as usize, message).await
}

/// New partitions as asked: one assignment per partition, known brokers, one replica
/// of a partition per broker (Kafka's `validateReplicaAssignment`).
fn explicit_partitions(
    brokers: &[BrokerMetadata],
    existing: i32,
    count: i32,
    a: Vec<Vec<i32>>,
) -> Result<BTreeMap<i32, Vec<i32>>, ControllerError> {
    if a.len() as i32 != count - existing {
        return Err(invalid_assignment(format!(
            "Increasing the number of partitions by {} but {} assignments provided.",
            count - existing,
            a.len()
        )));
    }
    let known: BTreeSet<i32> = brokers.iter().map(|b| b.id).collect();
    let unknown: BTreeSet<i32> = a
        .iter()
        .flatten()
        .copied()
        .filter(|b| !known.contains(b))
        .collect();
    if !unknown.is_empty() {
        return Err(invalid_assignment(format!(
            "Unknown broker(s) in replica assignment: {}.",
            unknown
                .iter()
                .map(i32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let added: BTreeMap<i32, Vec<i32>> = (existing..count).zip(a).collect();
    // Kafka's `validateReplicaAssignment`: a broker holds one replica of a partition.
    for (p, replicas) in &added {
        if replicas.iter().collect::<BTreeSet<_>>().len() != replicas.len() {
            return Err(invalid_assignment(format!(
                "Duplicate brokers not allowed in replica assignment: {} for partition id {p}.",
                replicas
                    .iter()
                    .map(i32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    Ok(added)
}

/// The partitions `existing..count`: as asked (checked as Kafka checks them), or
/// assigned from partition 0's first replica on; with partition 0's replication factor.
fn added_partitions(
    zk: &ZkController,
    first: &[i32],
    existing: i32,
    count: i32,
    assignments: Option<Vec<Vec<i32>>>,
) -> Result<BTreeMap<i32, Vec<i32>>, ControllerError> {
    let brokers = broker_metadata(zk);
    let added: BTreeMap<i32, Vec<i32>> = match assignments {
        Some(a) => explicit_partitions(&brokers, existing, count, a)?,
        None => {
            // Kafka starts the new partitions where partition 0's first replica sits.
            let start = first
                .first()
                .and_then(|&f| brokers.iter().position(|b| b.id >= f))
                .unwrap_or(0);
            assign_replicas_to_brokers(
                &brokers,
                count - existing,
                first.len().max(1) as i32,
                Some(start),
                existing,
            )?
        }
    };
    if added.values().any(|r| r.len() != first.len()) {
        return Err(invalid_assignment(
            "Inconsistent replication factor between partitions",
        ));
    }
    Ok(added)
}

/// `/config/topics/<topic>` and a change notification, so every broker re-reads it
/// (Kafka's `changeTopicConfig`; any broker may write it).
pub async fn set_topic_configs(
    zk: &ZkController,
    name: &str,
    configs: BTreeMap<String, String>,
) -> Result<Arc<TopicInfo>, ControllerError> {
    let session = zk.shared.session()?;
    if session
        .stat(&paths::topic(name))
        .await
        .map_err(zk_error)?
        .is_none()
    {
        return Err(ControllerError::unknown_topic(name));
    }
    let path = paths::entity_config(&format!("topics/{name}"));
    let data = znodes::encode(&EntityConfig::new(configs.clone()));
    match session.set(&path, &data, None).await {
        Ok(_) => {}
        Err(ZkError::NoNode(_)) => {
            session
                .create_recursive(&path, &data)
                .await
                .map_err(zk_error)?;
        }
        Err(e) => return Err(zk_error(e)),
    }
    let note = znodes::encode(&ConfigChangeNotification::new(format!("topics/{name}")));
    session
        .create_sequential(paths::CONFIG_CHANGE_PREFIX, &note)
        .await
        .map_err(zk_error)?;
    zk.shared
        .topic_configs
        .lock()
        .insert(name.to_string(), configs.clone());
    zk.shared.broker.apply_topic_configs(name, configs.clone());
    let base = zk
        .topic(name)
        .map(|t| (*t).clone())
        .unwrap_or_else(|| topic_info(name, Uuid::nil(), &BTreeMap::new(), BTreeMap::new()));
    Ok(Arc::new(TopicInfo { configs, ..base }))
}
