//! The requests brokers send the controller, processed in its event loop (Kafka's
//! `processAlterPartition`, `doControlledShutdown`, `processAllocateProducerIds`). Each
//! checks the sender's broker epoch against its registration first.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_response::{PartitionData, TopicData};
use kafka_protocol::messages::{
    AlterPartitionRequest, AlterPartitionResponse, BrokerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::context::{Leadership, TopicPartition};
use super::event_loop::{ControllerLoop, ZkResult};
use super::leader_and_isr::LeaderAndIsr;
use super::leader_election::Strategy;
use super::producer_ids::{self, BlockError, PRODUCER_ID_BLOCK_SIZE};
use super::states::{PartitionState, ReplicaState};
use super::store::{self, UpdateOutcome};

type PartitionResult = Result<LeaderAndIsr, ResponseError>;

/// Kafka's checks of one proposed ISR change against the partition's leadership as
/// the controller has it: Ok(Some(current)) when it is already in force (a repeat),
/// Ok(None) when it is to be written, else the error the partition is answered with.
fn alter_partition_verdict(
    new: &LeaderAndIsr,
    current: &LeaderAndIsr,
    live: &std::collections::BTreeSet<i32>,
    version: i16,
) -> Result<Option<LeaderAndIsr>, ResponseError> {
    if new.partition_epoch > current.partition_epoch || new.leader_epoch > current.leader_epoch {
        // The leader knows a newer state than this controller: it was likely deposed.
        Err(ResponseError::NotController)
    } else if new.leader_epoch < current.leader_epoch {
        Err(ResponseError::FencedLeaderEpoch)
    } else if new.equals_allow_stale_partition_epoch(current) {
        Ok(Some(current.clone()))
    } else if new.partition_epoch < current.partition_epoch {
        Err(ResponseError::InvalidUpdateVersion)
    } else if new.recovering() && (new.isr.len() > 1 || !current.recovering()) {
        // A recovering leader leads alone, and a recovered one cannot go back.
        Err(ResponseError::InvalidRequest)
    } else if new.isr.iter().any(|r| !live.contains(r)) {
        Err(if version > 1 {
            ResponseError::IneligibleReplica
        } else {
            ResponseError::OperationNotAttempted
        })
    } else {
        Ok(None)
    }
}

impl ControllerLoop {
    /// An ISR change asked by a partition's leader, accepted only at its current leader
    /// and partition epochs.
    pub(super) async fn process_alter_partition(
        &mut self,
        req: AlterPartitionRequest,
        version: i16,
    ) -> ZkResult<AlterPartitionResponse> {
        let refuse =
            |e: ResponseError| Ok(AlterPartitionResponse::default().with_error_code(e.code()));
        if !self.is_active() {
            return refuse(ResponseError::NotController);
        }
        let broker = req.broker_id.0;
        match self.ctx.live_brokers.get(&broker) {
            Some(b) if b.epoch == req.broker_epoch => {}
            _ => {
                tracing::info!(
                    broker,
                    epoch = req.broker_epoch,
                    "AlterPartition from an unknown broker or stale broker epoch"
                );
                return refuse(ResponseError::StaleBrokerEpoch);
            }
        }
        let by_id = version > 1;
        let (proposed, unknown_ids) = self.proposed_isr_changes(&req, version);
        let live = self.ctx.live_broker_ids();
        let mut results: BTreeMap<TopicPartition, PartitionResult> = BTreeMap::new();
        let mut updates = Vec::new();
        for (tp, new) in &proposed {
            let Some(current) = self.ctx.leadership.get(tp).map(|l| &l.leader_and_isr) else {
                results.insert(tp.clone(), Err(ResponseError::UnknownTopicOrPartition));
                continue;
            };
            match alter_partition_verdict(new, current, &live, version) {
                Ok(Some(same)) => {
                    results.insert(tp.clone(), Ok(same));
                }
                Ok(None) => updates.push((tp.clone(), new.clone())),
                Err(e) => {
                    results.insert(tp.clone(), Err(e));
                }
            }
        }
        results.extend(self.write_isr_changes(&updates).await?);
        let all: Vec<i32> = self.ctx.live_or_shutting_down_ids().into_iter().collect();
        let touched: Vec<TopicPartition> = proposed.keys().cloned().collect();
        self.batch.add_update_metadata(&self.ctx, &all, &touched);
        self.flush();
        Ok(self.alter_partition_response(results, unknown_ids, by_id))
    }

    /// The leaderships an AlterPartition proposes, by partition, and the answers for
    /// topics whose id is unknown.
    fn proposed_isr_changes(
        &self,
        req: &AlterPartitionRequest,
        version: i16,
    ) -> (BTreeMap<TopicPartition, LeaderAndIsr>, Vec<TopicData>) {
        let mut unknown_ids: Vec<TopicData> = Vec::new();
        let mut proposed: BTreeMap<TopicPartition, LeaderAndIsr> = BTreeMap::new();
        for t in &req.topics {
            let name = if version > 1 {
                self.ctx.topic_name(t.topic_id).map(str::to_string)
            } else {
                Some(t.topic_name.0.to_string())
            };
            let Some(name) = name else {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        PartitionData::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(ResponseError::UnknownTopicId.code())
                    })
                    .collect();
                unknown_ids.push(
                    TopicData::default()
                        .with_topic_id(t.topic_id)
                        .with_partitions(partitions),
                );
                continue;
            };
            for p in &t.partitions {
                let isr: Vec<i32> = if version >= 3 {
                    p.new_isr_with_epochs
                        .iter()
                        .map(|b| b.broker_id.0)
                        .collect()
                } else {
                    p.new_isr.iter().map(|b| b.0).collect()
                };
                proposed.insert(
                    TopicPartition::new(name.clone(), p.partition_index),
                    LeaderAndIsr {
                        leader_epoch: p.leader_epoch,
                        partition_epoch: p.partition_epoch,
                        leader_recovery_state: p.leader_recovery_state,
                        ..LeaderAndIsr::initial(req.broker_id.0, isr)
                    },
                );
            }
        }
        (proposed, unknown_ids)
    }

    /// Writes accepted ISR changes (conditional on their partition epochs) into
    /// ZooKeeper and the context.
    async fn write_isr_changes(
        &mut self,
        updates: &[(TopicPartition, LeaderAndIsr)],
    ) -> ZkResult<Vec<(TopicPartition, PartitionResult)>> {
        let mut results = Vec::new();
        for (tp, outcome) in store::update_leader_and_isr(&self.s, self.fence()?, updates).await? {
            let result = match outcome {
                UpdateOutcome::Done(l) => {
                    tracing::info!(partition = %tp, isr = ?l.isr, partition_epoch = l.partition_epoch, "ISR changed");
                    self.ctx.leadership.insert(
                        tp.clone(),
                        Leadership {
                            leader_and_isr: l.clone(),
                            controller_epoch: self.ctx.epoch,
                        },
                    );
                    Ok(l)
                }
                UpdateOutcome::BadVersion => Err(ResponseError::InvalidUpdateVersion),
                UpdateOutcome::Failed(e) => {
                    tracing::error!(partition = %tp, error = %e, "cannot write the ISR");
                    Err(ResponseError::UnknownServerError)
                }
            };
            results.push((tp, result));
        }
        Ok(results)
    }

    fn alter_partition_response(
        &self,
        results: BTreeMap<TopicPartition, PartitionResult>,
        mut topics: Vec<TopicData>,
        by_id: bool,
    ) -> AlterPartitionResponse {
        let mut by_topic: BTreeMap<String, Vec<PartitionData>> = BTreeMap::new();
        for (tp, r) in results {
            let p = PartitionData::default().with_partition_index(tp.partition);
            let p = match r {
                Err(e) => p.with_error_code(e.code()),
                Ok(l) => p
                    .with_leader_id(BrokerId(l.leader))
                    .with_leader_epoch(l.leader_epoch)
                    .with_isr(l.isr.iter().map(|&b| BrokerId(b)).collect())
                    .with_leader_recovery_state(l.leader_recovery_state)
                    .with_partition_epoch(l.partition_epoch),
            };
            by_topic.entry(tp.topic).or_default().push(p);
        }
        for (topic, partitions) in by_topic {
            let t = if by_id {
                TopicData::default().with_topic_id(
                    self.ctx
                        .topic_ids
                        .get(&topic)
                        .copied()
                        .unwrap_or(Uuid::nil()),
                )
            } else {
                TopicData::default().with_topic_name(TopicName(StrBytes::from_string(topic)))
            };
            topics.push(t.with_partitions(partitions));
        }
        AlterPartitionResponse::default().with_topics(topics)
    }

    /// Moves every leadership away from a broker that is shutting down and takes it out
    /// of the ISRs it follows in; answers the partitions it still leads.
    pub(super) async fn process_controlled_shutdown(
        &mut self,
        id: i32,
        broker_epoch: i64,
    ) -> ZkResult<Result<Vec<TopicPartition>, ResponseError>> {
        if !self.is_active() {
            return Ok(Err(ResponseError::NotController));
        }
        if broker_epoch != -1 {
            if let Some(b) = self.ctx.live_brokers.get(&id) {
                if broker_epoch < b.epoch {
                    tracing::info!(
                        broker = id,
                        broker_epoch,
                        current = b.epoch,
                        "controlled shutdown from an old broker epoch"
                    );
                    return Ok(Err(ResponseError::StaleBrokerEpoch));
                }
            }
        }
        if !self.ctx.live_brokers.contains_key(&id) {
            return Ok(Err(ResponseError::BrokerNotAvailable));
        }
        tracing::info!(broker = id, "controlled shutdown");
        self.ctx.shutting_down.insert(id);
        let to_act_on: Vec<TopicPartition> = self
            .ctx
            .partitions_on_broker(id)
            .into_iter()
            .filter(|tp| {
                self.ctx.replicas(tp).len() > 1
                    && self.ctx.leadership.contains_key(tp)
                    && !self.ctx.is_topic_queued_for_deletion(&tp.topic)
            })
            .collect();
        let (led, followed): (Vec<_>, Vec<_>) = to_act_on
            .into_iter()
            .partition(|tp| self.ctx.leadership[tp].leader_and_isr.leader == id);
        self.partition_changes(
            &led,
            PartitionState::Online,
            Some(Strategy::ControlledShutdown),
        )
        .await?;
        for tp in &followed {
            self.batch.add_stop_replica(&[id], tp, false);
        }
        self.flush();
        let followers: Vec<(TopicPartition, i32)> =
            followed.into_iter().map(|tp| (tp, id)).collect();
        self.replica_changes(&followers, ReplicaState::Offline)
            .await?;
        Ok(Ok(self.ctx.partition_leaders_on(id)))
    }

    pub(super) async fn process_allocate_producer_ids(
        &mut self,
        broker_id: i32,
        broker_epoch: i64,
    ) -> ZkResult<Result<(i64, i32), ResponseError>> {
        if !self.is_active() {
            return Ok(Err(ResponseError::NotController));
        }
        match self.ctx.live_brokers.get(&broker_id) {
            None => return Ok(Err(ResponseError::BrokerIdNotRegistered)),
            Some(b) if b.epoch != broker_epoch => return Ok(Err(ResponseError::StaleBrokerEpoch)),
            Some(_) => {}
        }
        match producer_ids::allocate_block(&self.s, broker_id).await {
            Ok(first) => Ok(Ok((first, PRODUCER_ID_BLOCK_SIZE as i32))),
            Err(BlockError::Exhausted) => Ok(Err(ResponseError::UnknownServerError)),
            Err(BlockError::Zk(e)) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn l(leader_epoch: i32, partition_epoch: i32, isr: &[i32], recovering: bool) -> LeaderAndIsr {
        LeaderAndIsr {
            leader_epoch,
            partition_epoch,
            leader_recovery_state: i8::from(recovering),
            ..LeaderAndIsr::initial(1, isr.to_vec())
        }
    }

    /// Kafka's `processAlterPartition` checks, in its order.
    #[test]
    fn alter_partition_verdicts_are_kafkas() {
        let live: BTreeSet<i32> = [1, 2].into();
        let cur = l(5, 7, &[1, 2], false);
        let v = |new: LeaderAndIsr, version| alter_partition_verdict(&new, &cur, &live, version);
        use ResponseError::*;
        assert_eq!(v(l(6, 7, &[1], false), 3), Err(NotController));
        assert_eq!(v(l(5, 8, &[1], false), 3), Err(NotController));
        assert_eq!(v(l(4, 7, &[1], false), 3), Err(FencedLeaderEpoch));
        assert_eq!(
            v(l(5, 6, &[1, 2], false), 3),
            Ok(Some(cur.clone())),
            "a repeat"
        );
        assert_eq!(v(l(5, 6, &[1], false), 3), Err(InvalidUpdateVersion));
        assert_eq!(
            v(l(5, 7, &[1], true), 3),
            Err(InvalidRequest),
            "recovered stays"
        );
        assert_eq!(v(l(5, 7, &[1, 2, 3], false), 3), Err(IneligibleReplica));
        assert_eq!(v(l(5, 7, &[1, 2, 3], false), 1), Err(OperationNotAttempted));
        assert_eq!(v(l(5, 7, &[1], false), 3), Ok(None));
    }
}
