//! LeaderAndIsr (v0–7) on the broker, as Kafka 3.9's `ReplicaManager.becomeLeaderOrFollower`
//! decides it: after the broker- and controller-epoch checks, each partition is taken
//! when its leader epoch is newer than the one hosted here (an equal or older one is
//! answered STALE_CONTROLLER_EPOCH, a request whose topic id contradicts the log's
//! INCONSISTENT_TOPIC_ID, a partition not assigned here UNKNOWN_TOPIC_OR_PARTITION).
//! The partitions taken reach the listeners as one delta: the replica manager creates
//! their logs and gives each its role, leader epoch and ISR; the group coordinator loads
//! or unloads the `__consumer_offsets` partitions this broker now leads or follows.
//! A topic the listeners could not apply is answered KAFKA_STORAGE_ERROR.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::leader_and_isr_request::LeaderAndIsrPartitionState;
use kafka_protocol::messages::leader_and_isr_response::{
    LeaderAndIsrPartitionError, LeaderAndIsrTopicError,
};
use kafka_protocol::messages::{LeaderAndIsrRequest, LeaderAndIsrResponse};
use uuid::Uuid;

use super::capped_lines::CappedLines;
use super::checked_names::check_partition;
use super::{refusal, BrokerSide, HostedTopic, State};
use crate::controller::delta::{MetadataDelta, TopicDelta};
use crate::controller::{LeaderAndIsr, PartitionAssignment, PartitionInfo};

/// LeaderAndIsr v5 groups its answer by topic id.
const TOPIC_ID_RESPONSE_VERSION: i16 = 5;

impl BrokerSide {
    /// The topics of `req` whose logs it would create here, whose config overrides are
    /// to be read from ZooKeeper before [`BrokerSide::leader_and_isr`]: none when the
    /// request is to be refused (a stale controller costs no ZooKeeper read), and only
    /// legal names assigned here and not hosted yet (a hosted topic's configs follow
    /// their change notifications).
    pub fn topics_to_configure(
        &self,
        req: &LeaderAndIsrRequest,
        broker_epoch: i64,
    ) -> BTreeSet<String> {
        let state = self.state.lock();
        if refusal(&state, req.controller_epoch, req.broker_epoch, broker_epoch).is_some() {
            return BTreeSet::new();
        }
        let grouped = req
            .topic_states
            .iter()
            .flat_map(|t| t.partition_states.iter().map(move |p| (&t.topic_name, p)));
        let ungrouped = req
            .ungrouped_partition_states
            .iter()
            .map(|p| (&p.topic_name, p));
        grouped
            .chain(ungrouped)
            .filter(|(topic, p)| {
                p.replicas.iter().any(|b| b.0 == self.broker_id)
                    && !state.hosted.contains_key(topic.as_str())
                    && check_partition(topic, p.partition_index).is_ok()
            })
            .map(|(topic, _)| topic.to_string())
            .collect()
    }

    /// `topic_configs`: the config overrides of the topics [`BrokerSide::topics_to_configure`]
    /// named, as ZooKeeper has them, applied to the logs created here.
    pub fn leader_and_isr(
        &self,
        req: &LeaderAndIsrRequest,
        version: i16,
        broker_epoch: i64,
        topic_configs: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> LeaderAndIsrResponse {
        let mut state = self.state.lock();
        if let Some(e) = self.fence(
            &mut state,
            req.controller_epoch,
            req.broker_epoch,
            broker_epoch,
        ) {
            tracing::warn!(controller = req.controller_id.0, controller_epoch = req.controller_epoch, error = ?e, "LeaderAndIsr refused");
            return LeaderAndIsrResponse::default().with_error_code(e.code());
        }
        let requested = partition_states(req);
        tracing::info!(
            controller = req.controller_id.0,
            controller_epoch = req.controller_epoch,
            partitions = requested.len(),
            "handling LeaderAndIsr"
        );
        let mut errors: BTreeMap<(String, i32), ResponseError> = BTreeMap::new();
        let mut taken: BTreeMap<String, Vec<PartitionInfo>> = BTreeMap::new();
        let mut ids: BTreeMap<String, Uuid> = BTreeMap::new();
        let mut lines = Lines::new();
        for (topic_id, p) in &requested {
            if check_partition(&p.topic_name, p.partition_index).is_ok() {
                ids.insert(p.topic_name.0.to_string(), *topic_id);
            }
            match self.judge(&state, *topic_id, p, &mut lines) {
                Ok(info) => taken
                    .entry(p.topic_name.0.to_string())
                    .or_default()
                    .push(info),
                Err(e) => {
                    errors.insert((p.topic_name.to_string(), p.partition_index), e);
                }
            }
        }
        let delta = self.host(&mut state, &taken, &ids, topic_configs);
        for failed in self.publish(&state, &delta) {
            tracing::error!(topic = %failed.topic, error = %failed.message, "cannot host the partitions LeaderAndIsr assigned");
            if let Some(partitions) = taken.get(&failed.topic) {
                for p in partitions {
                    errors.insert(
                        (failed.topic.clone(), p.partition),
                        ResponseError::KafkaStorageError,
                    );
                }
            }
        }
        // After the new leaderships are published, so a coordinator has given up what
        // it no longer leads before it serves again.
        if let Some(r) = self.replicas.get() {
            r.heard_from_controller(req.broker_epoch);
        }
        let codes = requested.iter().map(|(id, p)| {
            let topic = p.topic_name.0.to_string();
            let code = errors
                .get(&(topic.clone(), p.partition_index))
                .map_or(0, |e| e.code());
            (*id, topic, p.partition_index, code)
        });
        response(codes, version, &req.topic_states)
    }

    /// One partition of a LeaderAndIsr: taken (its new state), or the error it is
    /// answered with, in Kafka's order of checks.
    fn judge(
        &self,
        state: &State,
        topic_id: Uuid,
        p: &LeaderAndIsrPartitionState,
        lines: &mut Lines,
    ) -> Result<PartitionInfo, ResponseError> {
        if let Err(why) = check_partition(&p.topic_name, p.partition_index) {
            if lines.illegal.allow() {
                tracing::error!(
                    partition = p.partition_index,
                    "LeaderAndIsr refused for a partition: {why}"
                );
            }
            return Err(ResponseError::InvalidTopicException);
        }
        let topic = p.topic_name.0.to_string();
        let hosted = state.hosted.get(&topic).and_then(|h| {
            h.partitions
                .get(&p.partition_index)
                .map(|x| (h.topic_id, x))
        });
        let current_epoch = hosted.map_or(-1, |(_, x)| x.state.leader_epoch);
        let log_id = match hosted {
            Some((id, _)) => Some(id),
            None => self.log_topic_id(&topic, p.partition_index),
        }
        .filter(|id| !id.is_nil());
        if self.replica_offline(&topic, p.partition_index) {
            // Before the epoch check, as Kafka's: this answer is how a controller
            // learns, after a log dir event, which replicas went offline.
            if lines.offline.allow() {
                tracing::warn!(topic = %topic, partition = p.partition_index, "LeaderAndIsr for a replica in an offline log dir");
            }
            Err(ResponseError::KafkaStorageError)
        } else if !topic_id.is_nil() && log_id.is_some_and(|id| id != topic_id) {
            tracing::error!(topic = %topic, partition = p.partition_index, request_topic_id = %topic_id, log_topic_id = ?log_id, "LeaderAndIsr names another topic id than the log");
            Err(ResponseError::InconsistentTopicId)
        } else if p.leader_epoch <= current_epoch {
            if lines.stale.allow() {
                tracing::info!(topic = %topic, partition = p.partition_index, leader_epoch = p.leader_epoch, current_epoch, "LeaderAndIsr ignored for a partition: its leader epoch is not newer");
            }
            Err(ResponseError::StaleControllerEpoch)
        } else if !p.replicas.iter().any(|b| b.0 == self.broker_id) {
            if lines.unassigned.allow() {
                tracing::warn!(topic = %topic, partition = p.partition_index, replicas = ?p.replicas, "LeaderAndIsr ignored for a partition not assigned here");
            }
            Err(ResponseError::UnknownTopicOrPartition)
        } else {
            Ok(partition_info(p))
        }
    }

    /// Hosts the partitions taken (with the config overrides read for new topics) and
    /// returns the delta that tells the listeners.
    fn host(
        &self,
        state: &mut State,
        taken: &BTreeMap<String, Vec<PartitionInfo>>,
        ids: &BTreeMap<String, Uuid>,
        topic_configs: &BTreeMap<String, BTreeMap<String, String>>,
    ) -> MetadataDelta {
        let mut delta = MetadataDelta::default();
        let mut hosted_lines = CappedLines::new("partition hosted by LeaderAndIsr");
        for (topic, partitions) in taken {
            let request_id = ids.get(topic).copied().unwrap_or_default();
            if let Some(configs) = topic_configs.get(topic) {
                state.topic_configs.insert(topic.clone(), configs.clone());
            }
            let hosted = state.hosted.entry(topic.clone()).or_insert(HostedTopic {
                topic_id: request_id,
                partitions: BTreeMap::new(),
            });
            if !request_id.is_nil() {
                hosted.topic_id = request_id;
            }
            for p in partitions {
                if !hosted_lines.allow() {
                    hosted.partitions.insert(p.partition, p.clone());
                    continue;
                }
                tracing::info!(
                    topic = %topic,
                    partition = p.partition,
                    leader = p.state.leader,
                    leader_epoch = p.state.leader_epoch,
                    isr = ?p.state.isr,
                    role = if p.state.leader == self.broker_id { "leader" } else { "follower" },
                    "partition hosted by LeaderAndIsr"
                );
                hosted.partitions.insert(p.partition, p.clone());
            }
            if let Some(t) = self.view(state, topic) {
                delta.topics.insert(topic.clone(), TopicDelta::Changed(t));
            }
        }
        delta
    }
}

/// The capped log lines of one LeaderAndIsr, by kind.
struct Lines {
    illegal: CappedLines,
    offline: CappedLines,
    stale: CappedLines,
    unassigned: CappedLines,
}

impl Lines {
    fn new() -> Lines {
        Lines {
            illegal: CappedLines::new("LeaderAndIsr refused for an illegal topic name"),
            offline: CappedLines::new("LeaderAndIsr for a replica in an offline log dir"),
            stale: CappedLines::new("LeaderAndIsr ignored: leader epoch not newer"),
            unassigned: CappedLines::new("LeaderAndIsr ignored: partition not assigned here"),
        }
    }
}

/// Every partition state of the request, with its topic's id (nil before v5).
fn partition_states(req: &LeaderAndIsrRequest) -> Vec<(Uuid, LeaderAndIsrPartitionState)> {
    let grouped = req.topic_states.iter().flat_map(|t| {
        t.partition_states.iter().map(move |p| {
            // Grouped states leave the topic name to their topic.
            let mut p = p.clone();
            p.topic_name = t.topic_name.clone();
            (t.topic_id, p)
        })
    });
    let ungrouped = req
        .ungrouped_partition_states
        .iter()
        .map(|p| (Uuid::nil(), p.clone()));
    grouped.chain(ungrouped).collect()
}

fn partition_info(p: &LeaderAndIsrPartitionState) -> PartitionInfo {
    let replicas: Vec<i32> = p.replicas.iter().map(|b| b.0).collect();
    PartitionInfo {
        partition: p.partition_index,
        assignment: PartitionAssignment {
            directories: vec![Uuid::nil(); replicas.len()],
            replicas,
        },
        state: LeaderAndIsr {
            leader: p.leader.0,
            leader_epoch: p.leader_epoch,
            partition_epoch: p.partition_epoch,
            isr: p.isr.iter().map(|b| b.0).collect(),
            eligible_leader_replicas: Vec::new(),
            last_known_elr: Vec::new(),
            leader_recovery_state: p.leader_recovery_state,
        },
    }
}

/// The answer: per partition before v5, per topic id from v5.
fn response(
    codes: impl Iterator<Item = (Uuid, String, i32, i16)>,
    version: i16,
    topic_states: &[kafka_protocol::messages::leader_and_isr_request::LeaderAndIsrTopicState],
) -> LeaderAndIsrResponse {
    if version < TOPIC_ID_RESPONSE_VERSION {
        let errors = codes
            .map(|(_, topic, p, code)| {
                LeaderAndIsrPartitionError::default()
                    .with_topic_name(crate::handlers::topic_name(&topic))
                    .with_partition_index(p)
                    .with_error_code(code)
            })
            .collect();
        return LeaderAndIsrResponse::default().with_partition_errors(errors);
    }
    let mut topics: Vec<LeaderAndIsrTopicError> = Vec::with_capacity(topic_states.len());
    // Where each topic id's answer is in `topics`: one look-up per partition, however
    // many topics the request names.
    let mut at: HashMap<Uuid, usize> = HashMap::with_capacity(topic_states.len());
    for (id, _, p, code) in codes {
        let error = LeaderAndIsrPartitionError::default()
            .with_partition_index(p)
            .with_error_code(code);
        let i = *at.entry(id).or_insert_with(|| {
            topics.push(LeaderAndIsrTopicError::default().with_topic_id(id));
            topics.len() - 1
        });
        topics[i].partition_errors.push(error);
    }
    LeaderAndIsrResponse::default().with_topics(topics)
}
