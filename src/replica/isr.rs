//! ISR changes on their way to the controller (Kafka's `AlterPartitionManager`): leaders
//! queue their proposals here; one task sends what has queued as one AlterPartition
//! request to the current controller, hands each partition its answer, and sends again
//! after a pause what got no answer (no controller, connection lost, NOT_CONTROLLER,
//! STALE_BROKER_EPOCH), as long as the partition still waits for it.
//!
//! The request's shape follows its version: topic names up to v1, topic ids from v2,
//! the ISR as broker states from v3 (KIP-903), each member with the broker epoch its
//! leader proposed it at (`ReplicationState::propose`). A batch naming a topic without an id (one created by a
//! controller at an `inter.broker.protocol.version` below 2.8) goes at v1 at most, as
//! Kafka's `AlterPartitionManager` sends it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_request::{self as req, BrokerState};
use kafka_protocol::messages::{
    AlterPartitionRequest, AlterPartitionResponse, BrokerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::cluster_view::ClusterView;
use super::state::{IsrOutcome, IsrProposal};
use super::Partition;
use crate::client::{Client, ClientConfig};

/// One partition's proposal, queued by its leader.
pub struct IsrChange {
    pub partition: Arc<Partition>,
    pub proposal: IsrProposal,
}

/// Where a partition's leader queues its proposals, with what the metadata says of the
/// brokers it names in them.
#[derive(Clone)]
pub struct IsrChanges {
    sender: mpsc::UnboundedSender<IsrChange>,
    cluster: Arc<ClusterView>,
}

impl IsrChanges {
    pub fn new(sender: mpsc::UnboundedSender<IsrChange>, cluster: Arc<ClusterView>) -> Self {
        IsrChanges { sender, cluster }
    }

    /// Queues a proposal (dropped when the sending task is gone: shutting down).
    pub fn send(&self, change: IsrChange) {
        let _ = self.sender.send(change);
    }

    pub fn cluster(&self) -> &ClusterView {
        &self.cluster
    }
}

/// AlterPartition versions this broker sends (the ones Kafka 3.9's controller answers).
pub const ALTER_PARTITION_MIN_VERSION: i16 = 0;
pub const ALTER_PARTITION_MAX_VERSION: i16 = 3;
/// The newest version that names topics rather than their ids.
const ALTER_PARTITION_MAX_VERSION_BY_NAME: i16 = 1;

/// The pause before sending again what got no answer (Kafka retries after 50 ms).
const RETRY_BACKOFF: Duration = Duration::from_millis(50);

/// Sends an AlterPartition request to the current controller.
#[async_trait]
pub trait ControllerChannel: Send + Sync {
    /// Sends the request `build` makes for the version both sides speak, at most
    /// `max_version`; `Err` when it got no answer.
    async fn alter_partition(
        &self,
        max_version: i16,
        build: &(dyn Fn(i16) -> AlterPartitionRequest + Sync),
    ) -> Result<(i16, AlterPartitionResponse), String>;
}

/// The controller as the metadata names it, one outbound client per controller.
pub struct NetworkControllerChannel {
    cluster: Arc<ClusterView>,
    config: ClientConfig,
    client: tokio::sync::Mutex<Option<(i32, Arc<Client>)>>,
}

impl NetworkControllerChannel {
    pub fn new(cluster: Arc<ClusterView>, config: ClientConfig) -> Self {
        NetworkControllerChannel {
            cluster,
            config,
            client: tokio::sync::Mutex::new(None),
        }
    }

    async fn client(&self) -> Result<Arc<Client>, String> {
        let id = self.cluster.controller_id();
        let addr = self
            .cluster
            .address(id)
            .ok_or_else(|| format!("the controller ({id}) has no known address"))?;
        let mut current = self.client.lock().await;
        match &*current {
            Some((cid, c)) if *cid == id && c.addr() == addr => Ok(c.clone()),
            _ => {
                let mut config = self.config.clone();
                config.server_name = self.cluster.broker(id).map(|b| b.host);
                let c = Arc::new(Client::new(addr, config));
                *current = Some((id, c.clone()));
                Ok(c)
            }
        }
    }
}

#[async_trait]
impl ControllerChannel for NetworkControllerChannel {
    async fn alter_partition(
        &self,
        max_version: i16,
        build: &(dyn Fn(i16) -> AlterPartitionRequest + Sync),
    ) -> Result<(i16, AlterPartitionResponse), String> {
        let client = self.client().await?;
        let versions = client.api_versions().await.map_err(|e| e.to_string())?;
        let version = crate::client::reconnecting::negotiate(
            &versions,
            <AlterPartitionRequest as kafka_protocol::protocol::Request>::KEY,
            ALTER_PARTITION_MIN_VERSION,
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

/// Runs until every sender of `changes` is gone: sends the queued proposals, answers
/// each partition, and counts each committed change as an ISR shrink or expansion (as
/// Kafka's leader marks `IsrShrinksPerSec` once its AlterPartition is committed).
pub async fn run(
    mut changes: mpsc::UnboundedReceiver<IsrChange>,
    channel: Arc<dyn ControllerChannel>,
    cluster: Arc<ClusterView>,
    metrics: Arc<crate::metrics::Metrics>,
) {
    // The latest proposal of each partition not yet answered.
    let mut unsent: BTreeMap<(String, i32), IsrChange> = BTreeMap::new();
    loop {
        if unsent.is_empty() {
            match changes.recv().await {
                Some(c) => queue(&mut unsent, c),
                None => return,
            }
        }
        while let Ok(c) = changes.try_recv() {
            queue(&mut unsent, c);
        }
        // A partition that no longer waits (new metadata, new epoch) drops its proposal.
        unsent.retain(|_, c| {
            c.partition.isr_change_pending()
                && c.partition.leader_epoch() == c.proposal.leader_epoch
        });
        if unsent.is_empty() {
            continue;
        }
        let batch: Vec<&IsrChange> = unsent.values().collect();
        let local_id = cluster.local_id();
        let broker_epoch = cluster.broker_epoch();
        let build = |version: i16| build_request(version, local_id, broker_epoch, &batch);
        let answered = match channel.alter_partition(max_version(&batch), &build).await {
            Ok((version, response)) => outcomes(version, &batch, &response),
            Err(e) => {
                tracing::debug!(error = %e, "AlterPartition not sent; trying again");
                Err(ResponseError::UnknownServerError)
            }
        };
        match answered {
            Ok(results) => {
                for (c, outcome) in batch.iter().zip(results) {
                    let sizes = c
                        .partition
                        .complete_isr_change(c.proposal.leader_epoch, &outcome);
                    if let Some((before, after)) = sizes {
                        metrics.isr.changed(before, after);
                    }
                }
                unsent.clear();
            }
            Err(e) => {
                tracing::debug!(error = ?e, "AlterPartition not answered; trying again");
                tokio::time::sleep(RETRY_BACKOFF).await;
            }
        }
    }
}

fn queue(unsent: &mut BTreeMap<(String, i32), IsrChange>, c: IsrChange) {
    let key = (c.partition.tp.topic.clone(), c.partition.tp.partition);
    unsent.insert(key, c);
}

/// The newest AlterPartition version `changes` can go at: by name when a topic has no id.
pub fn max_version(changes: &[&IsrChange]) -> i16 {
    match changes.iter().any(|c| c.partition.topic_id.is_nil()) {
        true => ALTER_PARTITION_MAX_VERSION_BY_NAME,
        false => ALTER_PARTITION_MAX_VERSION,
    }
}

/// The AlterPartition request for `changes` at `version`.
pub fn build_request(
    version: i16,
    broker_id: i32,
    broker_epoch: i64,
    changes: &[&IsrChange],
) -> AlterPartitionRequest {
    let mut topics: Vec<req::TopicData> = Vec::new();
    for c in changes {
        let p = &c.partition;
        let mut data = req::PartitionData::default()
            .with_partition_index(p.tp.partition)
            .with_leader_epoch(c.proposal.leader_epoch)
            .with_partition_epoch(c.proposal.partition_epoch);
        if version >= 3 {
            data = data.with_new_isr_with_epochs(
                c.proposal
                    .new_isr
                    .iter()
                    .map(|&(id, epoch)| {
                        BrokerState::default()
                            .with_broker_id(BrokerId(id))
                            .with_broker_epoch(epoch)
                    })
                    .collect(),
            );
        } else {
            data = data.with_new_isr(
                c.proposal
                    .new_isr
                    .iter()
                    .map(|&(id, _)| BrokerId(id))
                    .collect(),
            );
        }
        let same_topic = |t: &req::TopicData| match version >= 2 {
            true => t.topic_id == p.topic_id,
            false => t.topic_name.0.as_str() == p.tp.topic,
        };
        match topics.iter_mut().find(|t| same_topic(t)) {
            Some(t) => t.partitions.push(data),
            None => {
                let t = match version >= 2 {
                    true => req::TopicData::default().with_topic_id(p.topic_id),
                    false => req::TopicData::default()
                        .with_topic_name(TopicName(StrBytes::from_string(p.tp.topic.clone()))),
                };
                topics.push(t.with_partitions(vec![data]));
            }
        }
    }
    AlterPartitionRequest::default()
        .with_broker_id(BrokerId(broker_id))
        .with_broker_epoch(broker_epoch)
        .with_topics(topics)
}

/// Each change's answer, in order; `Err` when the request as a whole was refused (it is
/// sent again). A partition missing from the answer counts as refused.
pub fn outcomes(
    version: i16,
    changes: &[&IsrChange],
    response: &AlterPartitionResponse,
) -> Result<Vec<IsrOutcome>, ResponseError> {
    if response.error_code != 0 {
        return Err(ResponseError::try_from_code(response.error_code)
            .unwrap_or(ResponseError::UnknownServerError));
    }
    let find = |topic: &str, id: Uuid, partition: i32| {
        response
            .topics
            .iter()
            .filter(|t| match version >= 2 {
                true => t.topic_id == id,
                false => t.topic_name.0.as_str() == topic,
            })
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
    };
    Ok(changes
        .iter()
        .map(|c| {
            let p = &c.partition;
            match find(&p.tp.topic, p.topic_id, p.tp.partition) {
                None => IsrOutcome::Refused(ResponseError::UnknownServerError),
                Some(r) if r.error_code != 0 => IsrOutcome::Refused(
                    ResponseError::try_from_code(r.error_code)
                        .unwrap_or(ResponseError::UnknownServerError),
                ),
                Some(r) => IsrOutcome::Committed {
                    leader_epoch: r.leader_epoch,
                    partition_epoch: r.partition_epoch,
                    isr: r.isr.iter().map(|b| b.0).collect(),
                },
            }
        })
        .collect())
}

/// Starts the task that sends this broker's ISR changes through `channel`; returns
/// where leaders queue them, and the task (aborted at shutdown).
pub fn start(
    channel: Arc<dyn ControllerChannel>,
    cluster: Arc<ClusterView>,
    metrics: Arc<crate::metrics::Metrics>,
) -> (IsrChanges, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let changes = IsrChanges::new(tx, cluster.clone());
    let task = tokio::spawn(run(rx, channel, cluster, metrics));
    (changes, task)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::LeaderAndIsr;
    use crate::log::{Log, LogConfig, TopicPartition};

    fn change(root: &tempfile::TempDir) -> IsrChange {
        change_of(root, Uuid::from_u128(5))
    }

    fn change_of(root: &tempfile::TempDir, topic_id: Uuid) -> IsrChange {
        let tp = TopicPartition::new("t", 3);
        let log = Log::open(
            &root.path().join("t-3"),
            tp.clone(),
            LogConfig::default(),
            0,
            0,
            false,
        )
        .unwrap();
        let p = Partition::new(tp, topic_id, Arc::new(log), 0);
        let announced = LeaderAndIsr {
            leader: 1,
            leader_epoch: 4,
            partition_epoch: 9,
            isr: vec![1],
            eligible_leader_replicas: Vec::new(),
            last_known_elr: Vec::new(),
            leader_recovery_state: 0,
        };
        p.apply_leadership(1, &[1, 2], &announced, 0);
        IsrChange {
            partition: Arc::new(p),
            proposal: IsrProposal {
                leader_epoch: 4,
                partition_epoch: 9,
                new_isr: vec![(1, -1), (2, 77)],
            },
        }
    }

    /// A Kafka controller at inter.broker.protocol.version < 2.8 gives topics no id: only
    /// names find them (v2+ would be answered UNKNOWN_TOPIC_ID).
    #[test]
    fn a_topic_without_an_id_goes_by_name() {
        let root = tempfile::tempdir().unwrap();
        let with_id = change(&root);
        assert_eq!(max_version(&[&with_id]), 3);
        let other = tempfile::tempdir().unwrap();
        let without = change_of(&other, Uuid::nil());
        assert_eq!(max_version(&[&without]), 1);
        assert_eq!(max_version(&[&with_id, &without]), 1);
    }

    #[test]
    fn requests_take_the_shape_of_their_version() {
        let root = tempfile::tempdir().unwrap();
        let c = change(&root);
        let v1 = build_request(1, 1, 55, &[&c]);
        assert_eq!((v1.broker_id.0, v1.broker_epoch), (1, 55));
        assert_eq!(v1.topics[0].topic_name.0.as_str(), "t");
        let p = &v1.topics[0].partitions[0];
        assert_eq!(
            (p.partition_index, p.leader_epoch, p.partition_epoch),
            (3, 4, 9)
        );
        assert_eq!(
            p.new_isr.iter().map(|b| b.0).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert!(p.new_isr_with_epochs.is_empty());
        let v3 = build_request(3, 1, 55, &[&c]);
        assert_eq!(v3.topics[0].topic_id, Uuid::from_u128(5));
        let members: Vec<(i32, i64)> = v3.topics[0].partitions[0]
            .new_isr_with_epochs
            .iter()
            .map(|b| (b.broker_id.0, b.broker_epoch))
            .collect();
        assert_eq!(members, vec![(1, -1), (2, 77)], "the members as proposed");
        // Each encodes at its version.
        for (version, request) in [(1, &v1), (3, &v3)] {
            let mut buf = bytes::BytesMut::new();
            kafka_protocol::protocol::Encodable::encode(request, &mut buf, version).unwrap();
        }
    }

    #[test]
    fn answers_are_matched_to_their_partitions() {
        use kafka_protocol::messages::alter_partition_response::{PartitionData, TopicData};
        let root = tempfile::tempdir().unwrap();
        let c = change(&root);
        let refused =
            AlterPartitionResponse::default().with_error_code(ResponseError::NotController.code());
        assert_eq!(
            outcomes(3, &[&c], &refused),
            Err(ResponseError::NotController)
        );
        let answer = |error: i16| {
            AlterPartitionResponse::default().with_topics(vec![TopicData::default()
                .with_topic_id(Uuid::from_u128(5))
                .with_partitions(vec![PartitionData::default()
                    .with_partition_index(3)
                    .with_error_code(error)
                    .with_leader_id(BrokerId(1))
                    .with_leader_epoch(4)
                    .with_partition_epoch(10)
                    .with_isr(vec![BrokerId(1), BrokerId(2)])])])
        };
        assert_eq!(
            outcomes(3, &[&c], &answer(0)),
            Ok(vec![IsrOutcome::Committed {
                leader_epoch: 4,
                partition_epoch: 10,
                isr: vec![1, 2]
            }])
        );
        assert_eq!(
            outcomes(
                3,
                &[&c],
                &answer(ResponseError::InvalidUpdateVersion.code())
            ),
            Ok(vec![IsrOutcome::Refused(
                ResponseError::InvalidUpdateVersion
            )])
        );
        // Answered by name at v1: the topic id does not match; missing means refused.
        assert_eq!(
            outcomes(1, &[&c], &answer(0)),
            Ok(vec![IsrOutcome::Refused(ResponseError::UnknownServerError)])
        );
    }
}
