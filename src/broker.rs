//! The broker's shared state and the metadata operations that span the controller and
//! the replica manager.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;

use crate::config::{topic, BrokerConfig};
use crate::controller::local::LocalController;
use crate::controller::{BrokerInfo, Controller, ControllerError, NewTopic, TopicInfo};
use crate::coordinator::group::topics::ControllerTopics;
use crate::coordinator::group::{GroupCoordinator, OFFSETS_TOPIC};
use crate::coordinator::partition_log::ReplicaPartitionLog;
use crate::log::{LogError, LogManager};
use crate::replica::ReplicaManager;

pub struct Broker {
    pub config: Arc<BrokerConfig>,
    pub controller: Arc<dyn Controller>,
    pub replicas: Arc<ReplicaManager>,
    pub groups: Arc<GroupCoordinator>,
    /// Set once shutdown begins, so long waits (fetch long polls) end early.
    stopping: tokio::sync::watch::Sender<bool>,
}

impl Broker {
    /// Opens the metadata store and every log (recovering after a crash) and starts
    /// hosting the partitions metadata assigns here.
    pub fn open(config: BrokerConfig) -> anyhow::Result<Arc<Broker>> {
        let config = Arc::new(config);
        let advertised = &config.advertised_listeners[0];
        let me = BrokerInfo {
            id: config.broker_id,
            host: advertised.host.clone(),
            port: advertised.port as i32,
            rack: config.rack.clone(),
        };
        if config.zookeeper_connect.is_some() {
            tracing::warn!("zookeeper.connect is set but cluster mode is not available yet; running as a single node");
        }
        let controller = Arc::new(LocalController::open(
            &config.log_dirs[0],
            me,
            config.get("cluster.id"),
            config.num_partitions,
            config.default_replication_factor,
        )?);
        let topics = controller.topics();
        let topic_configs = {
            let config = config.clone();
            let topics = topics.clone();
            move |name: &str| {
                let overrides = topics
                    .iter()
                    .find(|t| t.name == name)
                    .map(|t| t.configs.clone())
                    .unwrap_or_default();
                topic::log_config(&config, &overrides)
            }
        };
        let logs = LogManager::startup(
            &config.log_dirs,
            config.broker_id,
            &controller.cluster_id(),
            topic::log_config(&config, &Default::default()),
            topic_configs,
        )?;
        let replicas = Arc::new(ReplicaManager::new(config.broker_id, config.clone(), logs));
        replicas.remove_strays(&topics);
        for t in &topics {
            replicas.apply_topic(t)?;
        }
        let controller: Arc<dyn Controller> = controller;
        let groups = Arc::new(GroupCoordinator::new(
            &config,
            Arc::new(ReplicaPartitionLog::new(replicas.clone(), OFFSETS_TOPIC)),
            Arc::new(ControllerTopics::new(controller.clone())),
        ));
        groups.load_led_partitions();
        Ok(Arc::new(Broker {
            config,
            controller,
            replicas,
            groups,
            stopping: tokio::sync::watch::Sender::new(false),
        }))
    }

    pub async fn create_topic(
        &self,
        topic: NewTopic,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, ControllerError> {
        check_partition_count(topic.num_partitions.max(topic.assignments.len() as i32))?;
        let info = self.controller.create_topic(topic, validate_only).await?;
        if !validate_only {
            self.replicas.apply_topic(&info).map_err(storage)?;
        }
        Ok(info)
    }

    pub async fn delete_topic(&self, name: &str) -> Result<Arc<TopicInfo>, ControllerError> {
        let info = self.controller.delete_topic(name).await?;
        self.replicas.remove_topic(&info).map_err(storage)?;
        Ok(info)
    }

    pub async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        assignments: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, ControllerError> {
        let existing = self
            .controller
            .topic(name)
            .map_or(0, |t| t.partitions.len() as i32);
        check_partition_count(count.saturating_sub(existing))?;
        let info = self
            .controller
            .create_partitions(name, count, assignments, validate_only)
            .await?;
        if !validate_only {
            self.replicas.apply_topic(&info).map_err(storage)?;
        }
        Ok(info)
    }

    /// Changes a topic's config overrides with `edit`, validates the result, and (unless
    /// `validate_only`) stores it and applies it to the topic's logs.
    pub async fn alter_topic_configs(
        &self,
        name: &str,
        validate_only: bool,
        edit: impl FnOnce(&mut BTreeMap<String, String>) -> Result<(), ControllerError>,
    ) -> Result<(), ControllerError> {
        let current = self
            .controller
            .topic(name)
            .ok_or_else(|| ControllerError::unknown_topic(name))?;
        let mut configs = current.configs.clone();
        edit(&mut configs)?;
        topic::validate(&configs)
            .map_err(|m| ControllerError::new(ResponseError::InvalidConfig, m))?;
        if validate_only {
            return Ok(());
        }
        let info = self.controller.set_topic_configs(name, configs).await?;
        self.replicas.apply_topic(&info).map_err(storage)?;
        tracing::info!(topic = name, configs = ?info.configs, "topic configs changed");
        Ok(())
    }

    /// Tells waiting requests that the broker is going down.
    pub fn begin_shutdown(&self) {
        self.stopping.send_replace(true);
    }

    /// Changes to true when shutdown begins.
    pub fn stopping(&self) -> tokio::sync::watch::Receiver<bool> {
        self.stopping.subscribe()
    }

    /// Clean shutdown of the storage: flush, checkpoints, the clean-shutdown marker.
    pub fn shutdown(&self) {
        self.groups.shutdown();
        match self.replicas.shutdown() {
            Ok(()) => tracing::info!("logs flushed and closed cleanly"),
            Err(e) => {
                tracing::error!(error = %e, "clean shutdown of the logs failed; recovery will run at next start")
            }
        }
    }
}

/// Partitions one request may create, as Kafka's controller bounds a single operation:
/// creating a partition costs files and fsyncs, so a huge count would stall the broker.
pub const MAX_PARTITIONS_PER_REQUEST: i32 = 10_000;

fn check_partition_count(n: i32) -> Result<(), ControllerError> {
    if n > MAX_PARTITIONS_PER_REQUEST {
        return Err(ControllerError::new(
            ResponseError::PolicyViolation,
            format!("Unable to perform excessively large batch operation: {n} partitions, at most {MAX_PARTITIONS_PER_REQUEST}."),
        ));
    }
    Ok(())
}

fn storage(e: LogError) -> ControllerError {
    tracing::error!(error = %e, "log operation failed");
    ControllerError::new(ResponseError::KafkaStorageError, e.to_string())
}
